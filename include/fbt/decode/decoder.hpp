// fbt/decode/decoder.hpp: KV-cached decoding in the three modes of spec section 4, written once over a
// backend (the CPU's, or a GPU's through model/backend_model.hpp).
//
//   standard   every input is plain, N_in(e) (e for a baseline); the feedback weights are unused
//   soft       plain prefill of the prompt; then each new token's input is N_in(Fuse(h_prev, e(tok)))
//   fused(k)   prefill = a plain pass + k fed-back passes over the prompt (position 1 plain, no prefix
//              mixing), committing only the last pass's K/V and state; then as soft. Prefill costs (k+1)x.
// A mode's PrefillSpec (policy.hpp) may replace the policy's prefill: standard, fused(k), recurrent
// (token by token, each prompt token fed back with the previous position's state: P-1 steps), or
// recurrent(k) (a plain pass over all but the last k tokens, then k fed-back steps).
// Per-sequence state = KV cache + h_prev (the previous position's tapped state, spec 2's feedback_source),
// so batched decoding carries both. The prefill is the training forward (model/pass.hpp forward_chain,
// B = 1); a step runs R sequences' new tokens together, each block one position per sequence against
// its own cache (the blocks' decode members). The fuser's e-only precompute comes from a per-token
// table, so a soft step's own cost is the fuser's s part and the norms (spec 4).
// Documents: a token equal to `sep_token` starts a document: its input is plain and, under
// doc_attention "masked", the cache restarts (RoPE positions from 0), exactly as in training.
// Sliding-window layers (config layer_types): such a layer's cache is a ring of min(capacity, W) rows,
// position p in row p % W, so a sequence's memory on it is bounded by the window. Attention over the ring
// needs no order (the keys are stored after RoPE): a step sees its min(len + 1, W) live rows, which are
// exactly the keys t-W < j <= t of the training forward.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../detail/input.hpp"
#include "../model/backend_model.hpp"
#include "policy.hpp"
#include "generate_options.hpp"
#include "sampling.hpp"

namespace fbt {

/// One request's decoding state, in the backend's memory.
template <class M, class Be = CpuBackend<typename M::Scalar>> struct Sequence {
  using T = typename M::Scalar;
  int capacity = 0;        ///< positions the cache can hold
  int len = 0;             ///< positions in the cache (since the document start under masked attention)
  typename Be::template Buf<T> k, v;  ///< per layer l, (rows_l, KD_l) keys (after QK-norm and RoPE) and values, layer after layer;
                                      ///< rows_l = capacity, or min(capacity, W) on a sliding layer (a ring)
  std::vector<std::size_t> koff;      ///< (L) offset of layer l's rows in k and v
  typename Be::template Buf<T> h;     ///< (D) state of the last position: what the next token is fused with
  bool has_h = false;
  int generated = 0;       ///< tokens fed after the prefill (what the policy's feed() is told)
  bool prefilling = false; ///< inside a recurrent prefill: every step is fed back (no policy asked), none counts as generated
  DecodeModeSpec mode;
};

template <class M, class Be = CpuBackend<typename M::Scalar>> class Decoder {
 public:
  using T = typename M::Scalar;
  using Seq = Sequence<M, Be>;
  template <class U> using Buf = typename Be::template Buf<U>;
  static constexpr bool fb = M::may_feed_back;  // the fed-back code is compiled (m.feedback() says whether it runs)

  /// \brief Decodes with a host model's current weights on the CPU. \param sep_token the document separator (-1: none).
  explicit Decoder(const M& m, int sep_token = -1) : m_(m), be_(&own_be_), sep_(sep_token) {
    static_assert(std::is_same<Be, CpuBackend<T>>::value, "Decoder(model): a host model decodes on the CPU backend; for another "
                                                           "backend construct the Decoder from a BackendModel");
    weights_ = [this] { return m_.weights(); };
    version_ = [this] { return host_hash(); };
    init_layout();
  }
  /// \brief Decodes with a BackendModel's weights, on its backend.
  explicit Decoder(BackendModel<M, Be>& bm, int sep_token = -1) : m_(bm.host()), be_(&bm.backend()), sep_(sep_token) {
    weights_ = [&bm] { return bm.weights(); };
    version_ = [&bm] { return bm.version(); };
    init_layout();
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const M& model() const { return m_; }
  int sep_token() const { return sep_; }  ///< the document separator (-1: none)

  /// A fresh sequence whose cache holds `capacity` positions (<= max_position_embeddings).
  Seq new_sequence(int capacity, DecodeModeSpec mode) const {
    FBT_ASSERT(capacity > 0 && capacity <= m_.opts.max_position_embeddings,
               "sequence capacity " + std::to_string(capacity) + " must be in [1, max_position_embeddings=" +
                   std::to_string(m_.opts.max_position_embeddings) + "]");
    FBT_ASSERT(!mode.feeds_back() || m_.feedback(), "decoding mode " + mode.name() + " needs a feedback fuser (the model's fuser is none)");
    FBT_ASSERT(!mode.prefill_feeds_back() || m_.feedback(), "prefill " + mode.prefill.describe() + " of decoding mode " + mode.name() +
                                                     " needs a feedback fuser (the model's fuser is none)");
    Seq s;
    s.capacity = capacity, s.mode = mode;
    std::size_t n = 0;
    s.koff.assign(std::size_t(m_.L), 0);
    for (int l = 0; l < m_.L; ++l) s.koff[l] = n, n += std::size_t(rows(capacity, l)) * kd_[l];
    s.k.resize(n), s.v.resize(n), s.h.resize(m_.D);
    be_->zero(s.k.data(), n), be_->zero(s.v.data(), n), be_->zero(s.h.data(), std::size_t(m_.D));
    return s;
  }

  /// \brief Runs the prompt (P tokens, host) through the mode's prefill, commits K/V and h_prev, and
  /// writes the logits of the last prompt position into logits (V, host). The sequence must be fresh.
  /// Recurrent prefill: the tokens before the last n = prefill.recurrent_steps(P) by a one-pass prefill
  /// (the first token alone under `recurrent`), then each of the last n by a step fed back with the
  /// previous position's state, whatever the policy (its feed() is asked from generation on).
  void prefill(Seq& s, const int* prompt, int P, T* logits) {
    FBT_ASSERT(P >= 1, "prefill needs at least one prompt token");
    FBT_ASSERT(s.len == 0 && !s.has_h, "prefill of a sequence that already holds tokens");
    FBT_ASSERT(P <= s.capacity, "prompt of " + std::to_string(P) + " tokens exceeds the sequence capacity " + std::to_string(s.capacity));
    if (!s.mode.recurrent_prefill()) return prefill_passes(s, prompt, P, s.mode.prefill_passes(), logits);
    FBT_ASSERT(m_.feedback(), "recurrent prefill needs a feedback fuser (the model's fuser is none)");
    refresh_pre_table(weights_());
    const int n = s.mode.prefill.recurrent_steps(P);
    prefill_passes(s, prompt, P - n, 1, logits);
    Seq* one = &s;
    s.prefilling = true;
    for (int t = P - n; t < P; ++t) step(&one, 1, prompt + t, logits);
    s.prefilling = false;
  }

  /// \brief Called in every step (when set) with the (R, D) rows, in the backend's memory, at depth 0..L+1:
  /// depth l <= L-1 = block l's input (0 = the layer-0 input, after the fuser and N_in), L = the last block's
  /// output, L+1 = the final norm's output. What a probe reads (probe.hpp); unset, a step pays nothing.
  std::function<void(int depth, const T* rows, int R)> observe;

 private:
  /// The prompt through a plain pass and passes-1 fed-back ones (forward_chain), committed to s.
  void prefill_passes(Seq& s, const int* prompt, int P, int passes, T* logits) {
    const int D = m_.D, V = m_.V, L = m_.L;
    const Weights<T> w = weights_();
    // the weights' bf16 copies are made anew at a prefill and reused by the sequence's steps (ops/bf16_weights.hpp)
    Bf16WeightScope<T> packed(w.value, m_.params.size(), /*fresh=*/true);
    if (s.mode.feeds_back() || passes > 1) refresh_pre_table(w);
    docs_.assign(P, 0);
    int start = 0;  // the last document start in the prompt
    for (int t = 0; t < P; ++t)
      if (t == 0 || prompt[t] == sep_) docs_[t] = 1, start = t;
    FBT_ASSERT(passes >= 1 && (passes == 1 || m_.feedback()), "decoding mode " + s.mode.name() + ": " + std::to_string(passes) +
                                                      " prefill passes (at least 1; more than 1 needs a feedback fuser)");
    PassRunner<M, Be> run(*be_, m_, w, ws_);
    run.prepare(1, P, 1, false);
    run.begin_batch(prompt, docs_.data(), nullptr);
    run.forward_chain(passes, [](int, PassCache<M>&) {});
    PassCache<M>& p = ws_.pass[0];
    // commit the last pass's keys and values (from the last document start under masked attention); a
    // sliding layer keeps the last W of them, position p (from the document start) in ring row p % W
    const int from = m_.opts.doc_masked ? start : 0;
    for (int l = 0; l < L; ++l) {
      const auto kv = m_.blocks[l].kv(p.blocks[l]);
      const std::size_t kd = kd_[l], off = s.koff[l];
      const int W = m_.windows[l], a = W > 0 ? std::max(from, P - W) : from;  // positions a..P-1 are kept
      for (int t = a; t < P;) {  // contiguous runs of ring rows (one run without a window)
        const int row = W > 0 ? (t - from) % W : t - from, n = W > 0 ? std::min(P - t, W - row) : P - t;
        be_->copy(s.k.data() + off + std::size_t(row) * kd, kv.first + std::size_t(t) * kd, std::size_t(n) * kd);
        be_->copy(s.v.data() + off + std::size_t(row) * kd, kv.second + std::size_t(t) * kd, std::size_t(n) * kd);
        t += n;
      }
    }
    s.len = P - from;
    be_->copy(s.h.data(), run.source(p) + std::size_t(P - 1) * D, std::size_t(D));
    s.has_h = true;
    linear(*be_, ws_.logits, p.hf + std::size_t(P - 1) * D, w.value + m_.head_offset(), 1, V, D, D, false);
    be_->download(logits, ws_.logits, std::size_t(V));
  }

 public:
  /// \brief Feeds tokens[r] (host) to seqs[r] for r < R (one new position each) and writes logits (R, V, host).
  void step(Seq* const* seqs, int R, const int* tokens, T* logits) {
    const int D = m_.D, V = m_.V, L = m_.L;
    reserve(R);
    const Weights<T> w = weights_();
    Bf16WeightScope<T> packed(w.value, m_.params.size(), /*fresh=*/false);
    bool any_fused = false;
    int max_len1 = 0, max_live1 = 0;
    const int W = m_.window;
    for (int r = 0; r < R; ++r) {
      Seq& s = *seqs[r];
      FBT_ASSERT(tokens[r] >= 0 && tokens[r] < V, "token id " + std::to_string(tokens[r]) + " at position " + std::to_string(r) +
                                                      " is outside the vocabulary [0, " + std::to_string(V) + ")");
      const bool doc_start = tokens[r] == sep_;
      if (doc_start && m_.opts.doc_masked) s.len = 0;  // a new document: nothing before it is visible
      FBT_ASSERT(s.len < s.capacity, "sequence is full (" + std::to_string(s.capacity) + " positions)");
      const bool fused = m_.feedback() && s.has_h && !doc_start && (s.prefilling || (s.mode.feeds_back() && s.mode.feed(PolicyStep{s.len, s.generated})));
      hmask_[r] = fused ? T(1) : T(0);
      any_fused |= fused;
      hint_[r] = tokens[r], hint_[R + r] = s.len, hint_[2 * R + r] = s.len + 1;
      hint_[3 * R + r] = W > 0 ? s.len % W : s.len, hint_[4 * R + r] = W > 0 ? std::min(s.len + 1, W) : s.len + 1;  // ring slot, live rows
      max_len1 = std::max(max_len1, s.len + 1), max_live1 = std::max(max_live1, hint_[4 * R + r]);
      hptr_[r] = s.h.data();
      for (int l = 0; l < L; ++l) {
        const std::size_t off = s.koff[l];
        hptr_[R + std::size_t(l) * R + r] = s.k.data() + off;
        hptr_[R + std::size_t(L + l) * R + r] = s.v.data() + off;
      }
    }
    const std::size_t nptr = R + 2 * std::size_t(L) * R;
    be_->upload(ints_.data(), hint_.data(), std::size_t(5) * R);
    be_->upload(ptrs_.data(), hptr_.data(), nptr);
    be_->upload(mask_, hmask_.data(), std::size_t(R));
    const int* tok = ints_.data();
    const int* pos = tok + R;
    const int* len1 = pos + R;
    const int* slot = len1 + R;   // (R) a sliding layer's ring row of the new position
    const int* live1 = slot + R;  // (R) a sliding layer's live rows after the step
    T* const* hp = ptrs_.data();
    // layer-0 input
    m_.embed.forward(*be_, w, e_, tok, R);
    if constexpr (fb) {
      if (any_fused) {
        const int P = FuserOps<typename M::Fuser>::pre_width(m_.fuser());
        if (P > 0) {
          if (pre_table_.size() == 0) refresh_pre_table(w);
          be_->embedding_forward(pre_, tok, pre_table_.data(), R, V, P);  // the precompute, from the per-token table
        }
        be_->gather_rows(S_, const_cast<const T* const*>(hp), mask_, R, D);
      }
    }
    m_.input().decode_forward(*be_, w, R, e_, any_fused, S_, mask_, pre_, fc_, u_, rin_, x_);  // plain rows as in pass 1
    // the stack, one new position per sequence; the tapped state goes to each sequence's h
    const FeedbackTap tap = m_.opts.tap;
    for (int l = 0; l < L; ++l) {
      T* const* kc = hp + R + std::size_t(l) * R;
      T* const* vc = hp + R + std::size_t(L + l) * R;
      const DecodeStep<T> st = m_.windows[l] > 0 ? DecodeStep<T>{R, pos, live1, max_live1, kc, vc, slot} : DecodeStep<T>{R, pos, len1, max_len1, kc, vc};
      if (observe) observe(l, x_, R);
      m_.blocks[l].decode(*be_, w, dcache_[l], x_, st);
      if (tap.layer == l) be_->scatter_rows(hp, x_, R, D);
    }
    if (observe) observe(L, x_, R);
    m_.final_norm.forward(*be_, w, hf_, rstd_, x_, R);
    if (observe) observe(L + 1, hf_, R);
    linear(*be_, lg_, hf_, w.value + m_.head_offset(), R, V, D, D, false);
    if (tap.is_final_norm()) be_->scatter_rows(hp, hf_, R, D);
    be_->download(logits, lg_, std::size_t(R) * V);
    for (int r = 0; r < R; ++r) {
      seqs[r]->has_h = true;
      ++seqs[r]->len;
      if (!seqs[r]->prefilling) ++seqs[r]->generated;
    }
  }

 private:
  void init_layout() {
    kd_.assign(m_.L, 0);
    for (int l = 0; l < m_.L; ++l) kd_[l] = std::size_t(m_.blocks[l].kv_width());
  }
  /// Cache rows of layer l in a sequence of `capacity` positions: a sliding layer's ring holds min(capacity, W).
  int rows(int capacity, int l) const { return m_.windows[l] > 0 ? std::min(capacity, m_.windows[l]) : capacity; }

  /// A hash of the weights the per-token table reads (the embedding and the feedback tensors), for a
  /// host model whose weights may change between prefills (training, a test's edits).
  std::uint64_t host_hash() const {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const T* p, std::size_t n) {
      const unsigned char* c = reinterpret_cast<const unsigned char*>(p);
      for (std::size_t i = 0; i < n * sizeof(T); i += 8) {
        std::uint64_t x = 0;
        std::memcpy(&x, c + i, std::min<std::size_t>(8, n * sizeof(T) - i));
        h = (h ^ x) * 1099511628211ull;
      }
    };
    mix(m_.params.values() + m_.embed.w, std::size_t(m_.V) * m_.D);
    for (const auto& sp : m_.params.specs())
      if (sp.name.rfind("model.feedback.", 0) == 0) mix(m_.params.values() + sp.offset, sp.size);
    return h;
  }

  /// The fuser's e-only precompute for every token of the vocabulary, (V, P), recomputed at a prefill when
  /// the weights it reads changed: a decoder reads the weights at prefill, and changing them in the middle
  /// of a sequence is not supported (its KV cache would be stale too).
  void refresh_pre_table(const Weights<T>& w) {
    if constexpr (fb) {
      using Ops = FuserOps<typename M::Fuser>;
      const int P = Ops::pre_width(m_.fuser()), V = m_.V;
      if (P == 0) return;
      const std::uint64_t v = version_();
      if (v == pre_version_ && pre_table_.size() > 0) return;
      typename Ops::PreCache pc{};
      pre_table_.resize(std::size_t(V) * P);
      lay_out_regions<T>(pre_tmp_, [&](Regions<T>& r) {
        Carver<T> t = r.temp();
        Ops::alloc_pre(m_.fuser(), *be_, r.keep, t, pc, V, false);
        r.done(t);
      });
      Ops::pre_forward(m_.fuser(), *be_, w, pc, w.value + m_.embed.w, pre_table_.data(), V);
      pre_version_ = v;
    }
  }

  /// Step buffers for R rows (grown once; a step of a size seen before allocates nothing).
  void reserve(int R) {
    if (R <= rows_) return;
    const int D = m_.D, V = m_.V, L = m_.L;
    const std::size_t RD = std::size_t(R) * D;
    dcache_.assign(L, typename M::Block::DecodeCache{});
    lay_out_regions<T>(mem_, [&](Regions<T>& r) {
      Carver<T>& a = r.keep;
      e_ = a.take(RD), x_ = a.take(RD), hf_ = a.take(RD), S_ = a.take(RD), u_ = a.take(RD);
      rstd_ = a.take(R), rin_ = a.take(R), mask_ = a.take(R), lg_ = a.take(std::size_t(R) * V);
      pre_ = nullptr;
      if constexpr (fb) {
        const int P = FuserOps<typename M::Fuser>::pre_width(m_.fuser());
        if (P > 0) pre_ = a.take(std::size_t(R) * P);
        Carver<T> t = r.temp();
        m_.fuser().alloc(*be_, a, t, fc_, R, false);
        r.done(t);
      }
      for (int l = 0; l < L; ++l) {  // one block at a time: their buffers share the temporaries
        Carver<T> t = r.temp();
        m_.blocks[l].alloc_decode(*be_, t, dcache_[l], R);
        r.done(t);
      }
    });
    ints_.resize(std::size_t(5) * R), ptrs_.resize(R + 2 * std::size_t(L) * R);
    hint_.assign(std::size_t(5) * R, 0), hptr_.assign(R + 2 * std::size_t(L) * R, nullptr), hmask_.assign(R, T(0));
    rows_ = R;
  }

  const M& m_;
  CpuBackend<T> own_be_;  // the backend of a host-model decoder
  Be* be_;
  std::function<Weights<T>()> weights_;
  std::function<std::uint64_t()> version_;
  int sep_;
  std::vector<std::size_t> kd_;  // (L) each layer's KD
  Workspace<M, Be> ws_;  // prefill
  std::vector<std::uint8_t> docs_;
  int rows_ = 0;
  Buf<T> mem_, pre_table_, pre_tmp_;
  Buf<int> ints_;   // tokens, pos, len1, slot, live1: (R) each
  Buf<T*> ptrs_;    // h (R), then per layer the K caches (L, R), then the V caches (L, R)
  std::vector<int> hint_;
  std::vector<T*> hptr_;
  std::vector<T> hmask_;
  std::uint64_t pre_version_ = ~std::uint64_t(0);
  T *e_ = nullptr, *x_ = nullptr, *hf_ = nullptr, *S_ = nullptr, *u_ = nullptr, *rstd_ = nullptr, *rin_ = nullptr, *mask_ = nullptr;
  T *lg_ = nullptr, *pre_ = nullptr;
  typename M::Fuser::Cache fc_{};
  std::vector<typename M::Block::DecodeCache> dcache_;
};

template <class M> Decoder(const M&, int = -1) -> Decoder<M>;
template <class M, class Be> Decoder(BackendModel<M, Be>&, int = -1) -> Decoder<M, Be>;

struct Request {
  std::vector<int> prompt;
  GenerateOptions opts;
};

/// \brief The cache capacity a request needs, prompt + max_new_tokens, computed without overflow and
/// checked against the model's max_position_embeddings. Throws fbt::Error naming the request, the
/// prompt length, max_new_tokens and how many new tokens fit.
inline int checked_capacity(const Request& r, int index, int max_position_embeddings) {
  const std::string who = "request " + std::to_string(index) + ": ";
  if (r.opts.max_new_tokens < 0) throw Error(who + "max_new_tokens must be >= 0, got " + std::to_string(r.opts.max_new_tokens));
  const long long P = static_cast<long long>(r.prompt.size()), need = P + r.opts.max_new_tokens;  // 64-bit: no overflow
  if (P > max_position_embeddings)
    throw Error(who + "the prompt holds " + std::to_string(P) + " tokens, more than the model's max_position_embeddings (" +
                std::to_string(max_position_embeddings) + ")");
  if (need > max_position_embeddings)
    throw Error(who + "prompt (" + std::to_string(P) + " tokens) + max_new_tokens (" + std::to_string(r.opts.max_new_tokens) +
                ") exceeds the model's max_position_embeddings (" + std::to_string(max_position_embeddings) + "): at most " +
                std::to_string(max_position_embeddings - P) + " new tokens fit after this prompt");
  return static_cast<int>(need);
}

/// \brief generate_batch on sequences and sampling streams the caller keeps (an interactive session: the KV
/// caches live across calls; fbt/python/decoder.hpp). seqs[i] fresh (nothing in it): the prompt is prefilled,
/// and prompt + max_new_tokens must fit its capacity; seqs[i] holding tokens: the request's prompt is fed token
/// by token as decoding steps (as generated tokens are; the last token a previous call sampled is the caller's to
/// put first), then generation goes on. rngs[i] is request i's stream (reqs[i].opts.seed is not read).
/// between_steps, when set, runs after the prefills and after every step (a caller's interrupt check; it may throw).
template <class M, class Be>
std::vector<std::vector<int>> generate_batch(Decoder<M, Be>& dec, const std::vector<Request>& reqs, std::vector<typename Decoder<M, Be>::Seq>& seqs,
                                             std::vector<Rng>& rngs, const std::function<void()>& between_steps = {}) {
  using T = typename M::Scalar;
  using Seq = typename Decoder<M, Be>::Seq;
  const int V = dec.model().V, n = int(reqs.size());
  FBT_ASSERT(seqs.size() == reqs.size() && rngs.size() == reqs.size(), "generate_batch: one sequence and one Rng per request");
  std::vector<std::vector<int>> out(n);
  std::vector<int> next(n);
  std::vector<T> logits(std::size_t(std::max(n, 1)) * V);
  std::vector<std::pair<double, int>> scratch;
  for (int i = 0; i < n; ++i) {
    const auto& r = reqs[i];
    Seq& s = seqs[i];
    r.opts.sampling.validate();
    const std::string who = "request " + std::to_string(i) + ": ";
    if (r.opts.max_new_tokens < 0) throw Error(who + "max_new_tokens must be >= 0, got " + std::to_string(r.opts.max_new_tokens));
    const long long P = static_cast<long long>(r.prompt.size()), used = s.len == 0 && !s.has_h ? 0 : s.len;
    if (used + P + r.opts.max_new_tokens > s.capacity)
      throw Error(who + "the sequence holds " + std::to_string(used) + " of its " + std::to_string(s.capacity) + " positions; " + std::to_string(P) +
                  " prompt tokens + max_new_tokens (" + std::to_string(r.opts.max_new_tokens) + ") do not fit");
    if (used == 0) {
      FBT_ASSERT(P > 0, "request " + std::to_string(i) + " has an empty prompt");
      dec.prefill(s, r.prompt.data(), int(P), logits.data());
    } else {
      FBT_ASSERT(P > 0, "request " + std::to_string(i) + ": continuing a sequence needs at least one token to feed");
      Seq* one = &s;
      for (long long t = 0; t < P; ++t) dec.step(&one, 1, r.prompt.data() + t, logits.data());
    }
    next[i] = sample_token(logits.data(), V, r.opts.sampling, rngs[i], scratch);
  }
  if (between_steps) between_steps();
  std::vector<int> active;
  for (int i = 0; i < n; ++i) {
    if (reqs[i].opts.max_new_tokens <= 0) continue;
    out[i].push_back(next[i]);
    if (next[i] != reqs[i].opts.stop_token && int(out[i].size()) < reqs[i].opts.max_new_tokens) active.push_back(i);
  }
  std::vector<Seq*> batch;
  std::vector<int> toks;
  while (!active.empty()) {
    batch.clear(), toks.clear();
    for (int i : active) batch.push_back(&seqs[i]), toks.push_back(out[i].back());
    dec.step(batch.data(), int(batch.size()), toks.data(), logits.data());
    std::vector<int> still;
    for (std::size_t j = 0; j < active.size(); ++j) {
      const int i = active[j];
      const int t = sample_token(logits.data() + j * V, V, reqs[i].opts.sampling, rngs[i], scratch);
      out[i].push_back(t);
      if (t != reqs[i].opts.stop_token && int(out[i].size()) < reqs[i].opts.max_new_tokens) still.push_back(i);
    }
    active.swap(still);
    if (between_steps) between_steps();
  }
  return out;
}

/// \brief Decodes several requests together (each with its own cache, h_prev and Rng); a request leaves
/// the batch when it stops. Returns each request's generated tokens (the prompt not included).
template <class M, class Be> std::vector<std::vector<int>> generate_batch(Decoder<M, Be>& dec, const std::vector<Request>& reqs) {
  std::vector<typename Decoder<M, Be>::Seq> seqs;
  std::vector<Rng> rngs;
  seqs.reserve(reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& r = reqs[i];
    r.opts.sampling.validate();
    FBT_ASSERT(!r.prompt.empty(), "request " + std::to_string(i) + " has an empty prompt");
    seqs.push_back(dec.new_sequence(checked_capacity(r, int(i), dec.model().opts.max_position_embeddings), r.opts.mode));
    rngs.emplace_back(r.opts.seed);
  }
  return generate_batch(dec, reqs, seqs, rngs);
}

/// \brief One request.
template <class M, class Be> std::vector<int> generate(Decoder<M, Be>& dec, const std::vector<int>& prompt, const GenerateOptions& o) {
  return generate_batch(dec, std::vector<Request>{Request{prompt, o}})[0];
}

}  // namespace fbt
