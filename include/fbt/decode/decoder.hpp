// fbt/decode/decoder.hpp: KV-cached decoding in the three modes of spec section 4.
//
//   standard   every input is plain, N_in(e) (e for a baseline); the feedback weights are unused
//   soft       plain prefill of the prompt; then each new token's input is N_in(Fuse(h_prev, e(tok)))
//   fused(k)   prefill = a plain pass + k fed-back passes over the prompt (position 1 plain, no prefix
//              mixing), committing only the last pass's K/V and state; then as soft. Prefill costs (k+1)x.
// Per-sequence state = KV cache + h_prev (the previous position's top state, spec 2's feedback_source),
// so batched decoding carries both. The prefill reuses the training forward (one Workspace, B = 1);
// a step runs R sequences' new tokens together: projections as (R, D) products, attention per sequence
// against its own cache.
// Documents: a token equal to `sep_token` starts a document: its input is plain and, under
// doc_attention "masked", the cache restarts (RoPE positions from 0), exactly as in training.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "../model/multipass.hpp"
#include "sampling.hpp"

namespace fbt {

enum class DecodeMode { Standard, Soft, Fused };

struct DecodeModeSpec {
  DecodeMode mode = DecodeMode::Standard;
  int k = 0;  ///< fused(k): number of fed-back prefill passes
  /// "standard", "soft", "fused(k)" (also "fusedK" / "fused" = fused(1)).
  static DecodeModeSpec parse(const std::string& s) {
    if (s == "standard") return {DecodeMode::Standard, 0};
    if (s == "soft") return {DecodeMode::Soft, 0};
    if (s.rfind("fused", 0) == 0) {
      std::string n = s.substr(5);
      if (n.size() >= 2 && n.front() == '(' && n.back() == ')') n = n.substr(1, n.size() - 2);
      if (n.empty()) return {DecodeMode::Fused, 1};
      char* end = nullptr;
      const long k = std::strtol(n.c_str(), &end, 10);
      if (end && *end == 0 && k >= 1 && k <= 1000) return {DecodeMode::Fused, int(k)};
    }
    throw Error("unknown decoding mode \"" + s + "\" (expected standard, soft or fused(k) with k >= 1)");
  }
  std::string name() const {
    return mode == DecodeMode::Standard ? "standard" : mode == DecodeMode::Soft ? "soft" : "fused(" + std::to_string(k) + ")";
  }
};

/// One request's decoding state.
template <class T> struct Sequence {
  int capacity = 0;        ///< positions the cache can hold
  int len = 0;             ///< positions in the cache (since the document start under masked attention)
  AlignedVector<T> k, v;   ///< (L, capacity, NKV*hs) keys (after QK-norm and RoPE) and values
  AlignedVector<T> h;      ///< (D) state of the last position: what the next token is fused with
  bool has_h = false;
  DecodeModeSpec mode;
};

template <class T> class Decoder {
 public:
  /// \param sep_token the document separator (-1: none).
  explicit Decoder(const Model<T>& m, int sep_token = -1) : m_(m), sep_(sep_token) {}

  const Model<T>& model() const { return m_; }

  /// A fresh sequence whose cache holds `capacity` positions (<= max_position_embeddings).
  Sequence<T> new_sequence(int capacity, DecodeModeSpec mode) const {
    FBT_ASSERT(capacity > 0 && capacity <= m_.cfg.max_position_embeddings,
               "sequence capacity " + std::to_string(capacity) + " must be in [1, max_position_embeddings=" +
                   std::to_string(m_.cfg.max_position_embeddings) + "]");
    FBT_ASSERT(mode.mode == DecodeMode::Standard || m_.feedback(), "decoding mode " + mode.name() + " needs a feedback fuser (the model's fuser is none)");
    Sequence<T> s;
    s.capacity = capacity, s.mode = mode;
    s.k.assign(std::size_t(m_.L) * capacity * KD(), T(0));
    s.v.assign(std::size_t(m_.L) * capacity * KD(), T(0));
    s.h.assign(m_.D, T(0));
    return s;
  }

  /// \brief Runs the prompt (P tokens) through the mode's prefill, commits K/V and h_prev, and writes the
  /// logits of the last prompt position into logits (V). The sequence must be fresh (len 0).
  void prefill(Sequence<T>& s, const int* prompt, int P, T* logits) {
    FBT_ASSERT(P >= 1, "prefill needs at least one prompt token");
    FBT_ASSERT(s.len == 0 && !s.has_h, "prefill of a sequence that already holds tokens");
    FBT_ASSERT(P <= s.capacity, "prompt of " + std::to_string(P) + " tokens exceeds the sequence capacity " + std::to_string(s.capacity));
    const int D = m_.D, L = m_.L;
    if (s.mode.mode != DecodeMode::Standard) refresh_pe_table();
    docs_.assign(P, 0);
    int start = 0;  // the last document start in the prompt
    for (int t = 0; t < P; ++t)
      if (t == 0 || prompt[t] == sep_) docs_[t] = 1, start = t;
    const int passes = s.mode.mode == DecodeMode::Fused ? 1 + s.mode.k : 1;
    const Model<T>& m = m_;
    m.prepare(ws_, 1, P, 1, false);
    m.begin_batch(ws_, prompt, docs_.data());
    PassCache<T>& p = ws_.pass[0];
    if (passes > 1) m.fuser.shared_forward(m.params, ws_.fshared, ws_.e, P);
    for (int j = 0; j < passes; ++j) {
      if (j == 0) m.plain_input(ws_, p);
      else m.fused_input(ws_, p, m.source_state(p), nullptr, nullptr);
      m.stack_forward(ws_, p);
    }
    // commit the last pass's keys and values (from the last document start under masked attention)
    const int from = m_.cfg.doc_attention == "masked" ? start : 0;
    for (int l = 0; l < L; ++l) {
      const auto& c = p.blocks[l].attn;
      std::copy(c.kr + std::size_t(from) * KD(), c.kr + std::size_t(P) * KD(), s.k.data() + std::size_t(l) * s.capacity * KD());
      std::copy(c.v + std::size_t(from) * KD(), c.v + std::size_t(P) * KD(), s.v.data() + std::size_t(l) * s.capacity * KD());
    }
    s.len = P - from;
    const T* src = m.source_state(p) + std::size_t(P - 1) * D;
    std::copy(src, src + D, s.h.data());
    s.has_h = true;
    linear_forward(smat(logits, 1, m_.V), csmat(p.hf + std::size_t(P - 1) * D, 1, D), csmat(m_.params.values() + m_.head_offset(), m_.V, D));
  }

  /// \brief Feeds tokens[r] to seqs[r] for r < R (one new position each) and writes logits (R, V).
  void step(Sequence<T>* const* seqs, int R, const int* tokens, T* logits) {
    const int D = m_.D, V = m_.V, L = m_.L;
    reserve(R);
    const T* P = m_.params.values();
    const T eps = T(m_.cfg.rms_norm_eps);
    bool any_fused = false;
    for (int r = 0; r < R; ++r) {
      Sequence<T>& s = *seqs[r];
      const bool doc_start = tokens[r] == sep_;
      if (doc_start && m_.cfg.doc_attention == "masked") s.len = 0;  // a new document: nothing before it is visible
      FBT_ASSERT(s.len < s.capacity, "sequence is full (" + std::to_string(s.capacity) + " positions)");
      const bool fused = m_.feedback() && s.mode.mode != DecodeMode::Standard && s.has_h && !doc_start;
      mask_[r] = fused ? T(1) : T(0);
      any_fused |= fused;
      pos_[r] = s.len;
      if (fused) std::copy(s.h.begin(), s.h.end(), S_.begin() + std::size_t(r) * D);
      else std::fill(S_.begin() + std::size_t(r) * D, S_.begin() + std::size_t(r + 1) * D, T(0));
    }
    // layer-0 input
    embedding_forward(smat(e_.data(), R, D), tokens, csmat(P + m_.embed, V, D));
    if (!m_.feedback()) {
      std::copy(e_.begin(), e_.begin() + std::size_t(R) * D, x_.begin());
    } else if (any_fused) {
      // the fuser's e-only part (pe) comes from the per-token table: the soft step's own cost is W_U s
      // (or W_s / W_c on s) and the norms, as in spec 4
      for (int r = 0; r < R; ++r)
        std::copy(pe_table_.begin() + std::size_t(tokens[r]) * D, pe_table_.begin() + std::size_t(tokens[r] + 1) * D, sh_.pe + std::size_t(r) * D);
      m_.fuse_rows(R, e_.data(), S_.data(), mask_.data(), sh_, fc_, u_.data(), rin_.data(), x_.data());
    } else if (m_.cfg.input_norm == "all") {
      rmsnorm_forward(smat(x_.data(), R, D), vec(rin_.data(), R), csmat(e_.data(), R, D), cvec(P + m_.in_norm, D), eps);
    } else {
      std::copy(e_.begin(), e_.begin() + std::size_t(R) * D, x_.begin());
    }
    // the stack, one new position per sequence
    const int NH = m_.cfg.num_attention_heads, NKV = m_.cfg.num_key_value_heads, hs = m_.cfg.hs(), QD = NH * hs, F = m_.cfg.intermediate_size;
    for (int l = 0; l < L; ++l) {
      const Block<T>& bl = m_.blocks[l];
      const auto& at = bl.attn;
      rmsnorm_forward(smat(ln_.data(), R, D), vec(rstd_.data(), R), csmat(x_.data(), R, D), cvec(P + bl.g1, D), eps);
      linear_forward(smat(q_.data(), R, QD), csmat(ln_.data(), R, D), csmat(P + at.wq, QD, D));
      linear_forward(smat(k_.data(), R, KD()), csmat(ln_.data(), R, D), csmat(P + at.wk, KD(), D));
      linear_forward(smat(v_.data(), R, KD()), csmat(ln_.data(), R, D), csmat(P + at.wv, KD(), D));
      if (at.qk_norm) {
        rmsnorm_forward(smat(q_.data(), R * NH, hs), vec(rq_.data(), R * NH), csmat(q_.data(), R * NH, hs), cvec(P + at.gq, hs), eps);
        rmsnorm_forward(smat(k_.data(), R * NKV, hs), vec(rq_.data(), R * NKV), csmat(k_.data(), R * NKV, hs), cvec(P + at.gk, hs), eps);
      }
      rope_forward(smat(q_.data(), R, QD), csmat(q_.data(), R, QD), pos_.data(), m_.rope, NH);
      rope_forward(smat(k_.data(), R, KD()), csmat(k_.data(), R, KD()), pos_.data(), m_.rope, NKV);
      for (int r = 0; r < R; ++r) {
        Sequence<T>& s = *seqs[r];
        T* Kc = s.k.data() + std::size_t(l) * s.capacity * KD();
        T* Vc = s.v.data() + std::size_t(l) * s.capacity * KD();
        std::copy(k_.begin() + std::size_t(r) * KD(), k_.begin() + std::size_t(r + 1) * KD(), Kc + std::size_t(s.len) * KD());
        std::copy(v_.begin() + std::size_t(r) * KD(), v_.begin() + std::size_t(r + 1) * KD(), Vc + std::size_t(s.len) * KD());
        attention_decode(ao_.data() + std::size_t(r) * QD, scores_.data(), q_.data() + std::size_t(r) * QD, Kc, Vc, s.len + 1, NH, NKV, hs);
      }
      linear_forward_acc(smat(x_.data(), R, D), csmat(ao_.data(), R, QD), csmat(P + at.wo, D, QD));
      rmsnorm_forward(smat(ln_.data(), R, D), vec(rstd_.data(), R), csmat(x_.data(), R, D), cvec(P + bl.g2, D), eps);
      linear_forward(smat(g_.data(), R, F), csmat(ln_.data(), R, D), csmat(P + bl.mlp.wg, F, D));
      linear_forward(smat(up_.data(), R, F), csmat(ln_.data(), R, D), csmat(P + bl.mlp.wu, F, D));
      swiglu_forward(smat(g_.data(), R, F), csmat(g_.data(), R, F), csmat(up_.data(), R, F));
      linear_forward_acc(smat(x_.data(), R, D), csmat(g_.data(), R, F), csmat(P + bl.mlp.wd, D, F));
    }
    rmsnorm_forward(smat(hf_.data(), R, D), vec(rstd_.data(), R), csmat(x_.data(), R, D), cvec(P + m_.final_norm, D), eps);
    linear_forward(smat(logits, R, V), csmat(hf_.data(), R, D), csmat(P + m_.head_offset(), V, D));
    const T* src = m_.post_norm_source() ? hf_.data() : x_.data();
    for (int r = 0; r < R; ++r) {
      Sequence<T>& s = *seqs[r];
      std::copy(src + std::size_t(r) * D, src + std::size_t(r + 1) * D, s.h.begin());
      s.has_h = true;
      ++s.len;
    }
  }

 private:
  int KD() const { return m_.cfg.num_key_value_heads * m_.cfg.hs(); }

  /// The fuser's e-only pre-activation pe (fuser.hpp) for every token of the vocabulary, (V, D): glu's
  /// W_G N_g(E[v]), gated_add's W_g[:, :D] N_g(E[v]) + b, concat's W_c[:, D:] N_g(E[v]). Recomputed at a
  /// prefill when the weights it reads have changed (a hash of them is kept): a decoder reads the weights
  /// at prefill, and changing them in the middle of a sequence is not supported (its KV cache would be stale too).
  void refresh_pe_table() {
    const int V = m_.V, D = m_.D;
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const T* p, std::size_t n) {
      const unsigned char* c = reinterpret_cast<const unsigned char*>(p);
      for (std::size_t i = 0; i < n * sizeof(T); i += 8) {
        std::uint64_t w = 0;
        std::memcpy(&w, c + i, std::min<std::size_t>(8, n * sizeof(T) - i));
        h = (h ^ w) * 1099511628211ull;
      }
    };
    mix(m_.params.values() + m_.embed, std::size_t(V) * D);
    for (const auto& sp : m_.params.specs())
      if (sp.name.rfind("model.feedback.", 0) == 0) mix(m_.params.values() + sp.offset, sp.size);
    if (h == pe_hash_ && !pe_table_.empty()) return;
    Arena<T> a;
    typename FeedbackFuser<T>::Shared tsh;
    a.build([&](Arena<T>& ar) { m_.fuser.alloc_shared(ar, tsh, V); });
    m_.fuser.shared_forward(m_.params, tsh, m_.params.values() + m_.embed, V);
    pe_table_.assign(tsh.pe, tsh.pe + std::size_t(V) * D);
    pe_hash_ = h;
  }
  /// Step buffers for R rows (grown once; a step of a size seen before allocates nothing).
  void reserve(int R) {
    if (R <= rows_) return;
    rows_ = R;
    const int D = m_.D, QD = m_.cfg.num_attention_heads * m_.cfg.hs(), F = m_.cfg.intermediate_size;
    const std::size_t RD = std::size_t(R) * D;
    for (auto* b : {&e_, &x_, &ln_, &hf_, &S_, &u_}) b->assign(RD, T(0));
    q_.assign(std::size_t(R) * QD, T(0)), ao_.assign(std::size_t(R) * QD, T(0));
    k_.assign(std::size_t(R) * KD(), T(0)), v_.assign(std::size_t(R) * KD(), T(0));
    g_.assign(std::size_t(R) * F, T(0)), up_.assign(std::size_t(R) * F, T(0));
    rstd_.assign(R, T(0)), rin_.assign(R, T(0)), mask_.assign(R, T(0)), pos_.assign(R, 0);
    rq_.assign(std::size_t(R) * m_.cfg.num_attention_heads, T(0));
    scores_.assign(m_.cfg.max_position_embeddings, T(0));
    if (m_.feedback()) {
      arena_.build([&](Arena<T>& a) {
        m_.fuser.alloc_shared(a, sh_, R);
        m_.fuser.alloc(a, fc_, R);
      });
    }
  }

  const Model<T>& m_;
  int sep_;
  Workspace<T> ws_;  // prefill
  std::vector<std::uint8_t> docs_;
  int rows_ = 0;
  AlignedVector<T> e_, x_, ln_, hf_, S_, u_, q_, k_, v_, ao_, g_, up_, rstd_, rin_, mask_, rq_, scores_;
  std::vector<int> pos_;
  Arena<T> arena_;
  AlignedVector<T> pe_table_;  // (V, D)
  std::uint64_t pe_hash_ = 0;
  typename FeedbackFuser<T>::Shared sh_;
  typename FeedbackFuser<T>::Cache fc_;
};

/// What one request asks for.
struct GenerateOptions {
  DecodeModeSpec mode;
  int max_new_tokens = 64;
  SamplingOptions sampling;
  std::uint64_t seed = 0;  ///< the request's own sampling stream
  int stop_token = -1;     ///< generation ends after emitting it (-1: none)
};

struct Request {
  std::vector<int> prompt;
  GenerateOptions opts;
};

/// \brief Decodes several requests together (each with its own cache, h_prev and Rng); a request leaves
/// the batch when it stops. Returns each request's generated tokens (the prompt not included).
template <class T> std::vector<std::vector<int>> generate_batch(Decoder<T>& dec, const std::vector<Request>& reqs) {
  const int V = dec.model().V, n = int(reqs.size());
  std::vector<Sequence<T>> seqs;
  std::vector<Rng> rngs;
  std::vector<std::vector<int>> out(n);
  std::vector<int> next(n);
  std::vector<T> logits(std::size_t(std::max(n, 1)) * V);
  std::vector<std::pair<double, int>> scratch;
  seqs.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto& r = reqs[i];
    r.opts.sampling.validate();
    FBT_ASSERT(!r.prompt.empty(), "request " + std::to_string(i) + " has an empty prompt");
    const int maxpos = dec.model().cfg.max_position_embeddings;
    FBT_ASSERT(int(r.prompt.size()) + r.opts.max_new_tokens <= maxpos,
               "request " + std::to_string(i) + ": prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_new_tokens (" +
                   std::to_string(r.opts.max_new_tokens) + ") exceeds the model's max_position_embeddings (" + std::to_string(maxpos) + ")");
    const int cap = int(r.prompt.size()) + r.opts.max_new_tokens;
    seqs.push_back(dec.new_sequence(cap, r.opts.mode));
    rngs.emplace_back(r.opts.seed);
    dec.prefill(seqs[i], r.prompt.data(), int(r.prompt.size()), logits.data());
    next[i] = sample_token(logits.data(), V, r.opts.sampling, rngs[i], scratch);
  }
  std::vector<int> active;
  for (int i = 0; i < n; ++i) {
    if (reqs[i].opts.max_new_tokens <= 0) continue;
    out[i].push_back(next[i]);
    if (next[i] != reqs[i].opts.stop_token && int(out[i].size()) < reqs[i].opts.max_new_tokens) active.push_back(i);
  }
  std::vector<Sequence<T>*> batch;
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
  }
  return out;
}

/// \brief One request.
template <class T> std::vector<int> generate(Decoder<T>& dec, const std::vector<int>& prompt, const GenerateOptions& o) {
  return generate_batch(dec, std::vector<Request>{Request{prompt, o}})[0];
}

}  // namespace fbt
