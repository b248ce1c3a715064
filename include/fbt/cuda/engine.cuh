// fbt/cuda/engine.cuh: the K-pass train step and the KV-cached decoder over a compute backend.
//
// This is the CPU path of model/model.hpp, model/multipass.hpp and decode/decoder.hpp, step for step,
// with every kernel call going to a backend `Be` and every buffer living in Be's memory:
//   Be = CudaBackend (backend.cuh): device memory, cuBLAS and the kernels of kernels.cuh;
//        fbt::cuda::DeviceModel / DeviceDecoder (model.cuh) are this engine over it.
//   Be = a host backend (tests/cuda/host_backend.hpp): plain loops, so the whole orchestration (the
//        K-pass chain, the carry through shift_right, the fuser variants, the decoder's cache) is
//        checked against the CPU path on machines without a GPU.
// The file is therefore plain C++17 (no CUDA syntax); it includes CPU headers (allowed in this
// direction) and is never included by them.
//
// Layout: the parameters, gradients and AdamW moments are four flat buffers with the host ParamStore's
// layout (the same offsets, so a copy either way is one memcpy); the activations of a step live in
// one allocation (DeviceWorkspace) carved like the CPU Arena, one DevPass per live pass (STYLE 2.4).
// What differs from the CPU: attention keeps the logsumexp (B, NH, T) per layer and pass instead of the
// probabilities (B, NH, T, T) (the backward recomputes them tile by tile), and a forward-only
// workspace keeps every layer's cache (the CPU shares one), which the decoder's prefill reads.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../decode/decoder.hpp"
#include "../model/multipass.hpp"
#include "../train/adamw.hpp"

namespace fbt {
namespace cuda {

namespace detail {
/// Carves one buffer into slices aligned to 64 elements: run a layout once with base == nullptr to
/// count, allocate, then again with the base to point (the CPU Arena's two runs).
struct Carver {
  float* base = nullptr;
  std::size_t used = 0;
  float* take(std::size_t n) {
    float* p = base ? base + used : nullptr;
    used += (n + 63) / 64 * 64;
    return p;
  }
};
}  // namespace detail

/// One layer's cache of one pass (layers/attention.hpp, mlp.hpp, block.hpp Cache).
struct DevBlockCache {
  float *ln1, *r1, *mid, *ln2, *r2;  // (N, D), (N), (N, D), (N, D), (N)
  float *q, *k, *v;                  // (N, NH*hs), (N, NKV*hs), (N, NKV*hs)  raw projections
  float *qn, *kn, *rq, *rk;          // after QK-norm (== q, k without it); rstd (N*NH), (N*NKV)
  float *qr, *kr;                    // after RoPE: what attention saw
  float* lse;                        // (B, NH, T)  attention logsumexp (replaces the (B, NH, T, T) probabilities)
  float* ao;                         // (N, NH*hs)  attention output before o_proj
  float *g, *u, *h;                  // (N, F) each  SwiGLU gate, up, product
};
/// The fuser's per-step part (computed once from e) and its per-pass cache (layers/fuser.hpp).
struct DevFuserShared {
  float *ng, *rg, *pe, *dpe, *dng;  // (N, D), (N), (N, D), (N, D), (N, D)
};
struct DevFuserCache {
  float *a, *ns, *rs, *z, *ws;  // glu: a (N, D); gated_add/concat: ns (N, D), rs (N); gated_add: z, ws (N, D)
};
/// One pass's activations (model/model.hpp PassCache).
struct DevPass {
  std::vector<float*> res;             // L+1 of (N, D): res[0] = X, res[l+1] = block l's output
  std::vector<DevBlockCache> blocks;   // L
  float *hf, *rf, *dhead;              // (N, D), (N), (N, D)
  float *S, *u, *rin, *mask;           // (N, D), (N, D), (N), (N)
  DevFuserCache fuser;
};

/// Everything a step needs besides the parameters (model/model.hpp Workspace), in Be's memory.
template <class Be> struct DeviceWorkspace {
  typename Be::template Buf<float> mem;
  typename Be::template Buf<int> ints;  // tokens, targets, pos, first: (N) each
  int B = 0, T = 0, slots = 0;
  bool grad = false, ready = false;
  std::vector<int> pos, first;          // host copies of the position tables
  std::vector<std::uint8_t> plain;      // (N) 1 at a row's position 0 and at document starts
  std::vector<float> mask_host, losses_host;
  int *tokens = nullptr, *targets = nullptr, *pos_d = nullptr, *first_d = nullptr;
  float *e = nullptr, *de = nullptr;    // (N, D)
  DevFuserShared fshared{};
  float *logits = nullptr, *losses = nullptr, *lse = nullptr;  // (N, V), (N), (N)
  std::vector<DevPass> pass;            // slots
  float *dres = nullptr, *dhf = nullptr, *du = nullptr, *ds = nullptr, *noise = nullptr;  // (N, D)
  float* carry[2] = {nullptr, nullptr};
  // backward scratch shared by every layer and pass
  float *dln = nullptr, *dao = nullptr, *dqr = nullptr, *dkr = nullptr, *dv = nullptr, *dqn = nullptr, *dkn = nullptr, *Dt = nullptr;
  float *dh = nullptr, *dg = nullptr, *dup = nullptr;  // (N, F)
  float *t0 = nullptr, *t1 = nullptr, *t2 = nullptr;   // fuser scratch (N, D)
  int N() const { return B * T; }
  std::size_t bytes() const { return mem.size() * sizeof(float) + ints.size() * sizeof(int); }
};

/// \brief A Model<float>'s parameters, gradients and AdamW moments in Be's memory, and the K-pass step.
///
/// Same semantics as the CPU free functions: multipass_step ACCUMULATES the gradients (call zero_grad
/// first) and fills StepStats; adamw_update applies one AdamW step. The host Model is the source of
/// the configuration and the layout; its values are read at construction (and by upload()) and are
/// written back only by download(), on demand.
template <class Be> class DeviceModelT {
 public:
  using Backend = Be;
  using Workspace = DeviceWorkspace<Be>;
  template <class U> using Buf = typename Be::template Buf<U>;

  /// \brief Uploads host's values, AdamW moments and step; zero gradients. be_args construct the backend.
  template <class... A>
  explicit DeviceModelT(Model<float>& host, A&&... be_args) : host_(host), be_(std::forward<A>(be_args)...) {
    const ModelConfig& c = host_.cfg;
    FBT_ASSERT(c.hs() <= 128, "CUDA path: head_dim " + std::to_string(c.hs()) + " is over the kernels' limit of 128");
    FBT_ASSERT(c.hidden_size <= 12288 && c.intermediate_size > 0, "CUDA path: hidden_size over 12288 is not supported");
    const std::size_t n = host_.params.size();
    value_.resize(n), grad_.resize(n), m_.resize(n), v_.resize(n);
    acc_.resize(8);
    cos_.resize(host_.rope.cos_.size()), sin_.resize(host_.rope.sin_.size());
    be_.upload(cos_.data(), host_.rope.cos_.data(), cos_.size());
    be_.upload(sin_.data(), host_.rope.sin_.data(), sin_.size());
    upload();
    zero_grad();
  }
  DeviceModelT(const DeviceModelT&) = delete;
  DeviceModelT& operator=(const DeviceModelT&) = delete;

  Model<float>& host() { return host_; }
  const Model<float>& host() const { return host_; }
  const ModelConfig& cfg() const { return host_.cfg; }
  Be& backend() { return be_; }
  std::size_t size() const { return host_.params.size(); }
  long step() const { return step_; }
  /// Changes whenever the device weights change (upload, adamw_update): the decoder's pe table key.
  std::uint64_t version() const { return version_; }
  float* values() { return value_.data(); }
  const float* values() const { return value_.data(); }
  float* grads() { return grad_.data(); }
  /// RoPE tables (max_pos, hs/2) in Be's memory.
  const float* rope_cos() const { return cos_.data(); }
  const float* rope_sin() const { return sin_.data(); }

  // ---- host <-> device ------------------------------------------------------------------------
  /// Host values, AdamW moments and step -> device (after the host weights were changed or loaded).
  void upload() {
    const std::size_t n = size();
    be_.upload(value_.data(), host_.params.values(), n);
    be_.upload(m_.data(), host_.params.adam_m(), n);
    be_.upload(v_.data(), host_.params.adam_v(), n);
    step_ = host_.params.step;
    ++version_;
  }
  /// Device values, gradients, AdamW moments and step -> the host ParamStore (e.g. to save a checkpoint).
  void download() {
    const std::size_t n = size();
    be_.download(host_.params.values(), value_.data(), n);
    be_.download(host_.params.grads(), grad_.data(), n);
    be_.download(host_.params.adam_m(), m_.data(), n);
    be_.download(host_.params.adam_v(), v_.data(), n);
    host_.params.step = step_;
  }
  void download_values(float* dst) { be_.download(dst, value_.data(), size()); }
  void download_grads(float* dst) { be_.download(dst, grad_.data(), size()); }
  void zero_grad() { be_.zero(grad_.data(), size()); }

  // ---- optimizer ------------------------------------------------------------------------------
  /// \brief sqrt(sum g^2) over every gradient (double accumulation), as fbt::grad_global_norm.
  double grad_global_norm() {
    be_.zero(acc_.data(), 1);
    be_.sum_squares(acc_.data(), grad_.data(), size());
    double s = 0;
    be_.download(&s, acc_.data(), 1);
    return std::sqrt(s);
  }
  /// \brief As fbt::clip_grad_norm: returns the norm before clipping.
  double clip_grad_norm(double max_norm) {
    const double norm = grad_global_norm();
    if (!std::isfinite(norm) || !(max_norm > 0.0) || !(norm > max_norm)) return norm;
    be_.scale(grad_.data(), max_norm / (norm + 1e-6), size());
    return norm;
  }
  /// \brief One AdamW step (train/adamw.hpp): same checks, same arithmetic, one launch per tensor.
  void adamw_update(const AdamWConfig& cfg, double lr) {
    FBT_ASSERT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0, "AdamW beta1 = " + std::to_string(cfg.beta1) + " must be in [0, 1)");
    FBT_ASSERT(cfg.beta2 >= 0.0 && cfg.beta2 < 1.0, "AdamW beta2 = " + std::to_string(cfg.beta2) + " must be in [0, 1)");
    FBT_ASSERT(cfg.eps > 0.0, "AdamW eps = " + std::to_string(cfg.eps) + " must be > 0");
    FBT_ASSERT(cfg.weight_decay >= 0.0, "AdamW weight_decay must be >= 0");
    FBT_ASSERT(std::isfinite(lr) && lr >= 0.0, "AdamW lr = " + std::to_string(lr) + " must be finite and >= 0");
    const long t = ++step_;
    const double bc1 = 1.0 - std::pow(cfg.beta1, double(t)), bc2 = 1.0 - std::pow(cfg.beta2, double(t));
    const std::array<float, 8> rates{float(cfg.beta1), float(cfg.beta2), float(1.0 - cfg.beta1), float(1.0 - cfg.beta2),
                                     float(1.0 / bc1),  float(1.0 / bc2),  float(cfg.eps),         float(lr)};
    for (const ParamSpec& s : host_.params.specs())
      be_.adamw(value_.data() + s.offset, grad_.data() + s.offset, m_.data() + s.offset, v_.data() + s.offset, s.size, rates,
                float(s.decay ? cfg.weight_decay : 0.0));
    ++version_;
  }

  // ---- the step -------------------------------------------------------------------------------
  /// Bytes of the workspace a step of this shape needs (known before it runs), plus the parameter buffers.
  std::size_t workspace_bytes(int B, int T, const StepOptions& o) const {
    Workspace w;
    detail::Carver cv;
    layout(cv, w, B, T, fbt::detail::step_slots(o), o.backward);
    return cv.used * sizeof(float) + std::size_t(4) * B * T * sizeof(int);
  }
  std::size_t param_bytes() const { return 4 * size() * sizeof(float); }

  /// \brief One K-pass step on the device (model/multipass.hpp multipass_step, same options and stats):
  /// gradients ACCUMULATED into the device grads. Throws fbt::Error on a non-finite loss, naming the pass.
  void multipass_step(const Batch& b, const StepOptions& o, StepStats& st) { multipass_step(ws_, b, o, st); }
  StepStats multipass_step(const Batch& b, const StepOptions& o) {
    StepStats st;
    multipass_step(ws_, b, o, st);
    return st;
  }
  /// As above with a caller-owned workspace.
  void multipass_step(Workspace& w, const Batch& b, const StepOptions& o, StepStats& st) {
    validate_step(host_, b, o);
    const int K = o.K, N = b.B * b.T, D = host_.D;
    const int fg = o.backward ? fbt::detail::first_grad_pass(o) : K;
    prepare(w, b.B, b.T, fbt::detail::step_slots(o), o.backward);
    begin_batch(w, b.tokens, b.doc_start, b.targets);
    if (K > 1) shared_forward(w.fshared, w.e, N);
    if (o.backward) be_.zero(w.de, std::size_t(N) * D);

    st.objective = 0.0;
    st.loss.assign(K, 0.0), st.weight.assign(K, 0.0), st.state_rms.assign(K, 0.0);
    st.gate_mean.assign(K, 0.0), st.gate_std.assign(K, 0.0), st.feedback_ratio.assign(K, 0.0);
    auto slot_of = [&](int j) -> DevPass& {
      if (j < fg || o.detach) return w.pass[0];
      return w.pass[j - fg];
    };
    auto run_forward = [&](int j) {
      DevPass& p = slot_of(j);
      const bool grad = j >= fg;
      if (j == 0) {
        plain_input(w, p);
      } else {
        const float* src = source_state(slot_of(j - 1));
        std::uint64_t seed = 0;
        const bool noisy = o.sigma > 0;
        if (noisy) seed = (std::uint64_t(o.rng->next_u32()) << 32) | o.rng->next_u32();  // the CPU's draw order
        fused_input(w, p, src, noisy, seed, o.sigma, o.row_offset, o.prefix ? o.prefix + std::size_t(j) * b.B : nullptr);
        diagnostics(w, p, st, j);
      }
      stack_forward(w, p);
      st.weight[j] = j == 0 ? 1.0 : o.lambda / (K - 1);
      const auto [sum, count] = head_forward(w, p, b.targets, grad ? st.weight[j] * o.grad_scale : 0.0);
      st.targets = count;
      st.loss[j] = count > 0 ? sum / double(count) : 0.0;
      if (!std::isfinite(st.loss[j]))
        throw Error("non-finite loss (" + std::to_string(st.loss[j]) + ") in pass " + std::to_string(j + 1) + " of " + std::to_string(K));
      st.objective += st.weight[j] * st.loss[j];
    };
    if (o.detach) {
      for (int j = 0; j < K; ++j) {
        run_forward(j);
        if (j >= fg) pass_backward(w, slot_of(j), j > 0, nullptr, nullptr);
      }
    } else {
      for (int j = 0; j < K; ++j) run_forward(j);
      const float* carry_in = nullptr;
      for (int j = K - 1; j >= fg; --j) {
        float* carry_out = (j > fg) ? w.carry[j % 2] : nullptr;
        pass_backward(w, slot_of(j), j > 0, carry_in, carry_out);
        carry_in = carry_out;
      }
    }
    if (o.backward && fg < K) finish_backward(w, b.tokens, K > 1);
  }

  // ---- the pass-level API (as Model's; the decoder uses it) --------------------------------------
  /// Lays the workspace out if its shape changed.
  void prepare(Workspace& w, int B, int T, int slots, bool grad) const {
    FBT_ASSERT(B > 0 && T > 0, "batch shape must be positive, got B=" + std::to_string(B) + " T=" + std::to_string(T));
    FBT_ASSERT(T <= host_.cfg.max_position_embeddings,
               "sequence length T=" + std::to_string(T) + " exceeds max_position_embeddings=" + std::to_string(host_.cfg.max_position_embeddings));
    if (w.ready && w.B == B && w.T == T && w.slots == slots && w.grad == grad) return;
    detail::Carver cv;
    layout(cv, w, B, T, slots, grad);
    w.mem.resize(cv.used);
    cv = detail::Carver{w.mem.data(), 0};
    layout(cv, w, B, T, slots, grad);
    const std::size_t N = std::size_t(B) * T;
    w.ints.resize(4 * N);
    w.tokens = w.ints.data(), w.targets = w.tokens + N, w.pos_d = w.targets + N, w.first_d = w.pos_d + N;
    w.pos.assign(N, 0), w.first.assign(N, 0), w.plain.assign(N, 0), w.mask_host.assign(N, 0.f), w.losses_host.assign(N, 0.f);
    w.B = B, w.T = T, w.slots = slots, w.grad = grad, w.ready = true;
  }

  /// Tokens (N) -> w.e; position tables from the document starts (model.hpp begin_batch); targets
  /// (may be null: forward only) checked and uploaded.
  void begin_batch(Workspace& w, const int* tokens, const std::uint8_t* doc_start, const int* targets) const {
    const int B = w.B, Tn = w.T, N = w.N(), V = host_.V;
    const bool masked = host_.cfg.doc_attention == "masked";
    for (int b = 0; b < B; ++b) {
      int start = 0;
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        const bool is_start = t == 0 || (doc_start && doc_start[n]);
        if (is_start) start = t;
        w.plain[n] = is_start;
        w.pos[n] = masked ? t - start : t;
        w.first[n] = masked ? start : 0;
      }
    }
    for (int n = 0; n < N; ++n)
      FBT_ASSERT(tokens[n] >= 0 && tokens[n] < V, "token id " + std::to_string(tokens[n]) + " at position " + std::to_string(n) +
                                                      " is outside the vocabulary [0, " + std::to_string(V) + ")");
    be_.upload(w.tokens, tokens, std::size_t(N));
    be_.upload(w.pos_d, w.pos.data(), std::size_t(N));
    be_.upload(w.first_d, w.first.data(), std::size_t(N));
    if (targets) {
      for (int n = 0; n < N; ++n)
        FBT_ASSERT(targets[n] < V, "softmax_xent_forward: target " + std::to_string(targets[n]) + " outside the vocabulary of " + std::to_string(V));
      be_.upload(w.targets, targets, std::size_t(N));
    }
    be_.embedding_forward(w.e, w.tokens, value_.data() + host_.embed, N, host_.D);
  }

  /// Layer-0 input of a plain pass into p.res[0]: N_in(e) (input_norm all), else e.
  void plain_input(Workspace& w, DevPass& p) const {
    const int N = w.N(), D = host_.D;
    const std::size_t ND = std::size_t(N) * D;
    if (host_.feedback() && host_.cfg.input_norm == "all") {
      be_.rmsnorm_forward(p.res[0], p.rin, w.e, value_.data() + host_.in_norm, N, D, eps());
      be_.copy(p.u, w.e, ND);
      be_.zero(p.mask, std::size_t(N));
    } else {
      be_.copy(p.res[0], w.e, ND);
      if (host_.feedback()) be_.zero(p.mask, std::size_t(N));
    }
  }

  /// Layer-0 input of a fed-back pass from the previous pass's source state src (N, D) plus, when noisy,
  /// the seeded jitter; row (b, t) is fed back iff t >= max(prefix_b, 1) and t is not a document start.
  void fused_input(Workspace& w, DevPass& p, const float* src, bool noisy, std::uint64_t seed, double sigma, int row_offset,
                   const int* prefix) const {
    const int N = w.N(), B = w.B, Tn = w.T, D = host_.D;
    if (noisy) {  // jitter the carried state: one uniform draw per element, before shift_right (spec 3)
      be_.jitter_add(w.noise, src, seed, row_offset, B, std::size_t(Tn) * D, sigma);
      src = w.noise;
    }
    be_.shift_right_forward(p.S, src, B, Tn, D);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t) {
        const std::size_t n = std::size_t(b) * Tn + t;
        w.mask_host[n] = !w.plain[n] && t >= (prefix ? prefix[b] : 0) ? 1.f : 0.f;
      }
    be_.upload(p.mask, w.mask_host.data(), std::size_t(N));
    fuse_rows(N, w.e, p.S, p.mask, w.fshared, p.fuser, p.u, p.rin, p.res[0]);
  }

  /// X (R, D) = N_in(Fuse(S_r, e_r)) where mask_r = 1, else the plain input (model.hpp fuse_rows).
  void fuse_rows(int R, const float* e, const float* S, const float* mask, const DevFuserShared& sh, DevFuserCache& c, float* u, float* rin,
                 float* X) const {
    const int D = host_.D;
    fuser_forward(sh, c, S, e, u, R);
    be_.copy_plain_rows(u, e, mask, R, D);
    be_.rmsnorm_forward(X, rin, u, value_.data() + host_.in_norm, R, D, eps());
    if (host_.cfg.input_norm == "fused_only") be_.copy_plain_rows(X, e, mask, R, D);
  }

  /// The stack and the final norm on p.res[0]: fills p.res[1..L], p.hf.
  void stack_forward(Workspace& w, DevPass& p) const {
    const int N = w.N(), D = host_.D;
    for (int l = 0; l < host_.L; ++l) block_forward(l, p.blocks[l], p.res[l], p.res[l + 1], w);
    be_.rmsnorm_forward(p.hf, p.rf, p.res[host_.L], value_.data() + host_.final_norm, N, D, eps());
  }
  const float* source_state(const DevPass& p) const { return host_.post_norm_source() ? p.hf : p.res[host_.L]; }

  /// logits, CE; with weight > 0 also p.dhead and the head's gradient. targets: the host copy.
  std::pair<double, long> head_forward(Workspace& w, DevPass& p, const int* targets, double weight) {
    const int N = w.N(), D = host_.D, V = host_.V;
    const std::size_t head = host_.head_offset();
    linear(w.logits, p.hf, head, N, V, D, D, false);
    long count = 0;
    for (int n = 0; n < N; ++n) count += targets[n] >= 0;
    be_.softmax_xent_forward(w.logits, w.losses, w.lse, w.targets, N, V, host_.cfg.z_loss);
    be_.download(w.losses_host.data(), w.losses, std::size_t(N));
    double sum = 0.0;
    for (int n = 0; n < N; ++n)
      if (targets[n] >= 0) sum += double(w.losses_host[n]);
    if (weight > 0 && count > 0) {
      be_.softmax_xent_backward(w.logits, w.lse, w.targets, N, V, weight / double(count), host_.cfg.z_loss);
      be_.zero(p.dhead, std::size_t(N) * D);
      linear_backward(p.dhead, head, w.logits, p.hf, head, N, V, D, D);
    } else if (weight > 0) {
      be_.zero(p.dhead, std::size_t(N) * D);
    }
    return {sum, count};
  }

  /// Backward of one pass (model.hpp pass_backward).
  void pass_backward(Workspace& w, DevPass& p, bool fed_back, const float* carry_in, float* carry_out) {
    const int N = w.N(), D = host_.D, L = host_.L;
    const std::size_t ND = std::size_t(N) * D;
    const float* P = value_.data();
    float* G = grad_.data();
    be_.copy(w.dhf, p.dhead, ND);
    if (carry_in && host_.post_norm_source()) be_.add(w.dhf, carry_in, ND);
    be_.zero(w.dres, ND);
    be_.rmsnorm_backward(w.dres, G + host_.final_norm, w.dhf, p.res[L], P + host_.final_norm, p.rf, N, D);
    if (carry_in && !host_.post_norm_source()) be_.add(w.dres, carry_in, ND);
    for (int l = L - 1; l >= 0; --l) block_backward(l, p.blocks[l], w, w.dres, p.res[l]);
    // w.dres = dX, the gradient w.r.t. the layer-0 input
    if (!host_.feedback()) {
      be_.add(w.de, w.dres, ND);
      return;
    }
    const bool norm_all = host_.cfg.input_norm == "all";
    if (!fed_back) {
      if (norm_all) be_.rmsnorm_backward(w.de, G + host_.in_norm, w.dres, w.e, P + host_.in_norm, p.rin, N, D);
      else be_.add(w.de, w.dres, ND);
      return;
    }
    // fed-back pass: plain rows go to e, fed-back rows through N_in and the fuser
    if (!norm_all) be_.move_plain_rows(w.de, w.dres, p.mask, N, D);
    be_.zero(w.du, ND);
    be_.rmsnorm_backward(w.du, G + host_.in_norm, w.dres, p.u, P + host_.in_norm, p.rin, N, D);
    be_.move_plain_rows(w.de, w.du, p.mask, N, D);
    if (carry_out) be_.zero(w.ds, ND);
    fuser_backward(w, p.fuser, w.du, carry_out ? w.ds : nullptr, w.de, p.S, N);
    if (carry_out) {
      be_.zero(carry_out, ND);
      be_.shift_right_backward(carry_out, w.ds, w.B, w.T, D);
    }
  }

  /// The fuser's e-side gradient and the embedding scatter.
  void finish_backward(Workspace& w, const int* /*tokens: already on the device*/, bool any_fed_back) {
    const int N = w.N();
    if (host_.feedback() && any_fed_back) shared_backward(w.fshared, w.e, w.de, N);
    be_.embedding_backward(grad_.data() + host_.embed, w.de, w.tokens, N, host_.D);
  }

  /// The fuser's e-only pre-activation (fuser.hpp shared_forward) of N rows of e; clears sh.dpe.
  void shared_forward(const DevFuserShared& sh, const float* e, int N) const {
    const int D = host_.D;
    const FeedbackFuser<float>& f = host_.fuser;
    be_.rmsnorm_forward(sh.ng, sh.rg, e, value_.data() + f.g_gate, N, D, eps());
    switch (f.kind) {
      case FuserKind::Glu: linear(sh.pe, sh.ng, f.w_g, N, D, D, D, false); break;
      case FuserKind::GatedAdd:
        linear(sh.pe, sh.ng, f.w_g, N, D, D, 2 * D, false);  // left half: the e part of [N_g(e); N_s(s)]
        be_.bias_forward(sh.pe, value_.data() + f.b_g, N, D);
        break;
      case FuserKind::Concat: linear(sh.pe, sh.ng, f.w_c + D, N, D, D, 2 * D, false); break;  // right half
      case FuserKind::None: break;
    }
    if (sh.dpe) be_.zero(sh.dpe, std::size_t(N) * D);
  }

 private:
  float eps() const { return float(host_.cfg.rms_norm_eps); }

  /// out (N, OC) = inp (N, C) W^T (+ out), W = the parameter at offset w with row stride ldw.
  void linear(float* out, const float* inp, std::size_t w, int N, int OC, int C, int ldw, bool acc) const {
    be_.gemm(out, OC, inp, C, false, value_.data() + w, ldw, true, N, OC, C, acc);
  }
  /// dinp (N, C) += dout W (skipped when null); dW += dout^T inp at gradient offset dw (npos: skipped).
  void linear_backward(float* dinp, std::size_t dw, const float* dout, const float* inp, std::size_t w, int N, int OC, int C, int ldw) {
    if (dinp) be_.gemm(dinp, C, dout, OC, false, value_.data() + w, ldw, false, N, C, OC, true);
    if (dw != npos) be_.gemm(grad_.data() + dw, ldw, dout, OC, true, inp, C, false, OC, C, N, true);
  }
  static constexpr std::size_t npos = std::size_t(-1);

  void layout(detail::Carver& a, Workspace& w, int B, int Tn, int slots, bool grad) const {
    const ModelConfig& c = host_.cfg;
    const int D = host_.D, V = host_.V, L = host_.L, NH = c.num_attention_heads, NKV = c.num_key_value_heads, hs = c.hs();
    const int F = c.intermediate_size;
    const std::size_t N = std::size_t(B) * Tn, ND = N * D, QD = std::size_t(NH) * hs, KD = std::size_t(NKV) * hs;
    const bool fb = host_.feedback();
    w.e = a.take(ND), w.de = grad ? a.take(ND) : nullptr;
    w.fshared = DevFuserShared{};
    if (fb) w.fshared = DevFuserShared{a.take(ND), a.take(N), a.take(ND), a.take(ND), a.take(ND)};
    w.logits = a.take(N * V), w.losses = a.take(N), w.lse = a.take(N);
    w.pass.assign(slots, DevPass{});
    for (auto& p : w.pass) {
      p.res.resize(L + 1);
      p.blocks.resize(L);
      for (auto& r : p.res) r = a.take(ND);
      for (auto& bc : p.blocks) {  // every layer keeps its cache, forward-only too (the prefill reads kr, v)
        bc.ln1 = a.take(ND), bc.r1 = a.take(N), bc.mid = a.take(ND), bc.ln2 = a.take(ND), bc.r2 = a.take(N);
        bc.q = a.take(N * QD), bc.k = a.take(N * KD), bc.v = a.take(N * KD);
        if (c.qk_norm) bc.qn = a.take(N * QD), bc.kn = a.take(N * KD), bc.rq = a.take(N * NH), bc.rk = a.take(N * NKV);
        else bc.qn = bc.q, bc.kn = bc.k, bc.rq = bc.rk = nullptr;
        bc.qr = a.take(N * QD), bc.kr = a.take(N * KD), bc.lse = a.take(N * NH), bc.ao = a.take(N * QD);
        bc.g = a.take(N * F), bc.u = a.take(N * F), bc.h = a.take(N * F);
      }
      p.hf = a.take(ND), p.rf = a.take(N), p.dhead = grad ? a.take(ND) : nullptr;
      p.S = p.u = p.rin = p.mask = nullptr;
      p.fuser = DevFuserCache{};
      if (fb) {
        p.S = a.take(ND), p.u = a.take(ND), p.rin = a.take(N), p.mask = a.take(N);
        const FuserKind k = host_.fuser.kind;
        if (k == FuserKind::Glu) p.fuser.a = a.take(ND);
        if (k == FuserKind::GatedAdd || k == FuserKind::Concat) p.fuser.ns = a.take(ND), p.fuser.rs = a.take(N);
        if (k == FuserKind::GatedAdd) p.fuser.z = a.take(ND), p.fuser.ws = a.take(ND);
      }
    }
    w.noise = fb ? a.take(ND) : nullptr;
    w.dres = w.dhf = w.du = w.ds = w.carry[0] = w.carry[1] = nullptr;
    w.dln = w.dao = w.dqr = w.dkr = w.dv = w.dqn = w.dkn = w.Dt = w.dh = w.dg = w.dup = nullptr;
    w.t0 = w.t1 = w.t2 = nullptr;
    if (grad) {
      w.dres = a.take(ND), w.dhf = a.take(ND);
      w.dln = a.take(ND), w.dao = a.take(N * QD), w.dqr = a.take(N * QD), w.dkr = a.take(N * KD), w.dv = a.take(N * KD);
      w.dqn = a.take(N * QD), w.dkn = a.take(N * KD), w.Dt = a.take(N * NH);
      w.dh = a.take(N * F), w.dg = a.take(N * F), w.dup = a.take(N * F);
      if (fb) {
        w.du = a.take(ND), w.ds = a.take(ND), w.carry[0] = a.take(ND), w.carry[1] = a.take(ND);
        w.t0 = a.take(ND), w.t1 = a.take(ND), w.t2 = a.take(ND);
      }
    }
  }

  /// One pre-norm block (layers/block.hpp forward): out = mid + SwiGLU(RMSNorm(mid)), mid = x + Attn(RMSNorm(x)).
  void block_forward(int l, DevBlockCache& c, const float* x, float* out, const Workspace& w) const {
    const int N = w.N(), D = host_.D;
    const std::size_t ND = std::size_t(N) * D;
    const Block<float>& bl = host_.blocks[l];
    const float* P = value_.data();
    be_.rmsnorm_forward(c.ln1, c.r1, x, P + bl.g1, N, D, eps());
    be_.copy(c.mid, x, ND);
    attn_forward(bl.attn, c, c.ln1, c.mid, w);
    be_.rmsnorm_forward(c.ln2, c.r2, c.mid, P + bl.g2, N, D, eps());
    be_.copy(out, c.mid, ND);
    mlp_forward(bl.mlp, c, c.ln2, out, N);
  }
  /// dx (N, D): d out on entry, d x on exit (layers/block.hpp backward).
  void block_backward(int l, const DevBlockCache& c, Workspace& w, float* dx, const float* x) {
    const int N = w.N(), D = host_.D;
    const std::size_t ND = std::size_t(N) * D;
    const Block<float>& bl = host_.blocks[l];
    const float* P = value_.data();
    float* G = grad_.data();
    be_.zero(w.dln, ND);
    mlp_backward(bl.mlp, c, w, dx, w.dln, c.ln2, N);
    be_.rmsnorm_backward(dx, G + bl.g2, w.dln, c.mid, P + bl.g2, c.r2, N, D);
    be_.zero(w.dln, ND);
    attn_backward(bl.attn, c, w, dx, w.dln, c.ln1);
    be_.rmsnorm_backward(dx, G + bl.g1, w.dln, x, P + bl.g1, c.r1, N, D);
  }

  /// y (N, D) += o_proj(attention(x)) (layers/attention.hpp forward).
  void attn_forward(const CausalSelfAttention<float>& at, DevBlockCache& c, const float* x, float* y, const Workspace& w) const {
    const int N = w.N(), D = host_.D, NH = at.NH, NKV = at.NKV, hs = at.hs, QD = NH * hs, KD = NKV * hs;
    const float* P = value_.data();
    linear(c.q, x, at.wq, N, QD, D, D, false);
    linear(c.k, x, at.wk, N, KD, D, D, false);
    linear(c.v, x, at.wv, N, KD, D, D, false);
    if (at.qk_norm) {  // per head: (N, NH*hs) viewed as (N*NH, hs)
      be_.rmsnorm_forward(c.qn, c.rq, c.q, P + at.gq, N * NH, hs, eps());
      be_.rmsnorm_forward(c.kn, c.rk, c.k, P + at.gk, N * NKV, hs, eps());
    }
    be_.rope_forward(c.qr, c.qn, w.pos_d, cos_.data(), sin_.data(), N, NH, hs);
    be_.rope_forward(c.kr, c.kn, w.pos_d, cos_.data(), sin_.data(), N, NKV, hs);
    be_.attention_forward(c.ao, c.lse, c.qr, c.kr, c.v, w.first_d, w.B, w.T, NH, NKV, hs);
    linear(y, c.ao, at.wo, N, D, QD, QD, true);
  }
  /// Accumulates dx (N, D) and the attention's parameter gradients from dy (layers/attention.hpp backward).
  void attn_backward(const CausalSelfAttention<float>& at, const DevBlockCache& c, Workspace& w, const float* dy, float* dx, const float* x) {
    const int N = w.N(), D = host_.D, NH = at.NH, NKV = at.NKV, hs = at.hs, QD = NH * hs, KD = NKV * hs;
    const std::size_t NQ = std::size_t(N) * QD, NK = std::size_t(N) * KD;
    const float* P = value_.data();
    float* G = grad_.data();
    be_.zero(w.dao, NQ), be_.zero(w.dqr, NQ), be_.zero(w.dkr, NK), be_.zero(w.dv, NK);
    linear_backward(w.dao, at.wo, dy, c.ao, at.wo, N, D, QD, QD);
    be_.attention_backward(w.dqr, w.dkr, w.dv, w.Dt, w.dao, c.ao, c.lse, c.qr, c.kr, c.v, w.first_d, w.B, w.T, NH, NKV, hs);
    float* dq = w.dqn;
    float* dk = w.dkn;
    be_.zero(w.dqn, NQ), be_.zero(w.dkn, NK);
    be_.rope_backward(w.dqn, w.dqr, w.pos_d, cos_.data(), sin_.data(), N, NH, hs);
    be_.rope_backward(w.dkn, w.dkr, w.pos_d, cos_.data(), sin_.data(), N, NKV, hs);
    if (at.qk_norm) {  // reuse dqr/dkr as dq/dk (consumed above)
      dq = w.dqr, dk = w.dkr;
      be_.zero(dq, NQ), be_.zero(dk, NK);
      be_.rmsnorm_backward(dq, G + at.gq, w.dqn, c.q, P + at.gq, c.rq, N * NH, hs);
      be_.rmsnorm_backward(dk, G + at.gk, w.dkn, c.k, P + at.gk, c.rk, N * NKV, hs);
    }
    linear_backward(dx, at.wq, dq, x, at.wq, N, QD, D, D);
    linear_backward(dx, at.wk, dk, x, at.wk, N, KD, D, D);
    linear_backward(dx, at.wv, w.dv, x, at.wv, N, KD, D, D);
  }

  void mlp_forward(const SwiGLUMlp<float>& m, DevBlockCache& c, const float* x, float* y, int N) const {
    const int D = host_.D, F = m.F;
    linear(c.g, x, m.wg, N, F, D, D, false);
    linear(c.u, x, m.wu, N, F, D, D, false);
    be_.swiglu_forward(c.h, c.g, c.u, std::size_t(N) * F);
    linear(y, c.h, m.wd, N, D, F, F, true);
  }
  void mlp_backward(const SwiGLUMlp<float>& m, const DevBlockCache& c, Workspace& w, const float* dy, float* dx, const float* x, int N) {
    const int D = host_.D, F = m.F;
    const std::size_t NF = std::size_t(N) * F;
    be_.zero(w.dh, NF), be_.zero(w.dg, NF), be_.zero(w.dup, NF);
    linear_backward(w.dh, m.wd, dy, c.h, m.wd, N, D, F, F);
    be_.swiglu_backward(w.dg, w.dup, w.dh, c.g, c.u, NF);
    linear_backward(dx, m.wg, w.dg, x, m.wg, N, F, D, D);
    linear_backward(dx, m.wu, w.dup, x, m.wu, N, F, D, D);
  }

 public:
  /// u (R, D) = Fuse(s, e) at every row (fuser.hpp forward); sh.pe must hold the e-only part.
  void fuser_forward(const DevFuserShared& sh, DevFuserCache& c, const float* s, const float* e, float* u, int R) const {
    const int D = host_.D;
    const std::size_t RD = std::size_t(R) * D;
    const FeedbackFuser<float>& f = host_.fuser;
    const float* P = value_.data();
    switch (f.kind) {
      case FuserKind::Glu:
        linear(c.a, s, f.w_u, R, D, D, D, false);
        be_.sigmoid_gate_forward(u, c.a, sh.pe, RD);
        break;
      case FuserKind::GatedAdd:
        be_.rmsnorm_forward(c.ns, c.rs, s, P + f.g_state, R, D, eps());
        be_.copy(c.z, sh.pe, RD);
        linear(c.z, c.ns, f.w_g + D, R, D, D, 2 * D, true);  // right half: the s part
        linear(c.ws, c.ns, f.w_s, R, D, D, D, false);
        be_.sigmoid_gate_forward(u, c.ws, c.z, RD);          // u = sigmoid(z) * ws
        be_.axpby(u, 1.f, e, f.alpha, RD);                   // u = e + alpha * u
        break;
      case FuserKind::Concat:
        be_.rmsnorm_forward(c.ns, c.rs, s, P + f.g_state, R, D, eps());
        be_.copy(u, sh.pe, RD);
        linear(u, c.ns, f.w_c, R, D, D, 2 * D, true);        // left half: the s part
        break;
      case FuserKind::None: FBT_ASSERT(false, "FeedbackFuser::forward with fuser none");
    }
  }

 private:
  /// From du (zero on plain rows): ds (may be null: detached), de, w.fshared.dpe and the per-pass gradients.
  void fuser_backward(Workspace& w, const DevFuserCache& c, const float* du, float* ds, float* de, const float* s, int N) {
    const int D = host_.D;
    const std::size_t ND = std::size_t(N) * D;
    const FeedbackFuser<float>& f = host_.fuser;
    const DevFuserShared& sh = w.fshared;
    const float* P = value_.data();
    float* G = grad_.data();
    switch (f.kind) {
      case FuserKind::Glu:
        // u = a * sigmoid(pe): da = du sigmoid(pe), dpe += du a sigmoid';  a = W_U s
        be_.zero(w.t0, ND);
        be_.sigmoid_gate_backward(w.t0, sh.dpe, du, c.a, sh.pe, ND);
        linear_backward(ds, f.w_u, w.t0, s, f.w_u, N, D, D, D);
        break;
      case FuserKind::GatedAdd:
        // u = e + alpha * sigmoid(z) * ws
        be_.add(de, du, ND);
        be_.axpby(w.t2, f.alpha, du, 0.f, ND);
        be_.zero(w.t0, ND), be_.zero(w.t1, ND);  // t0 = d ws, t1 = d z
        be_.sigmoid_gate_backward(w.t0, w.t1, w.t2, c.ws, c.z, ND);
        be_.add(sh.dpe, w.t1, ND);  // z = pe + W_g[:, D:] ns
        be_.zero(w.t2, ND);         // t2 = d ns
        linear_backward(w.t2, f.w_g + D, w.t1, c.ns, f.w_g + D, N, D, D, 2 * D);
        linear_backward(w.t2, f.w_s, w.t0, c.ns, f.w_s, N, D, D, D);
        be_.rmsnorm_backward(ds ? ds : w.t1, G + f.g_state, w.t2, s, P + f.g_state, c.rs, N, D);
        break;
      case FuserKind::Concat:
        // u = pe + W_c[:, :D] ns
        be_.add(sh.dpe, du, ND);
        be_.zero(w.t0, ND);
        linear_backward(w.t0, f.w_c, du, c.ns, f.w_c, N, D, D, 2 * D);
        be_.zero(w.t1, ND);
        be_.rmsnorm_backward(ds ? ds : w.t1, G + f.g_state, w.t0, s, P + f.g_state, c.rs, N, D);
        break;
      case FuserKind::None: break;
    }
  }
  /// From sh.dpe (summed over passes): de and the e-side gradients (fuser.hpp shared_backward).
  void shared_backward(const DevFuserShared& sh, const float* e, float* de, int N) {
    const int D = host_.D;
    const FeedbackFuser<float>& f = host_.fuser;
    const float* P = value_.data();
    float* G = grad_.data();
    be_.zero(sh.dng, std::size_t(N) * D);
    switch (f.kind) {
      case FuserKind::Glu: linear_backward(sh.dng, f.w_g, sh.dpe, sh.ng, f.w_g, N, D, D, D); break;
      case FuserKind::GatedAdd:
        linear_backward(sh.dng, f.w_g, sh.dpe, sh.ng, f.w_g, N, D, D, 2 * D);
        be_.bias_backward(G + f.b_g, sh.dpe, N, D);
        break;
      case FuserKind::Concat: linear_backward(sh.dng, f.w_c + D, sh.dpe, sh.ng, f.w_c + D, N, D, D, 2 * D); break;
      case FuserKind::None: return;
    }
    be_.rmsnorm_backward(de, G + f.g_gate, sh.dng, e, P + f.g_gate, sh.rg, N, D);
  }

  /// Diagnostics of a fed-back pass (multipass.hpp diagnostics), reduced on the device in double.
  void diagnostics(Workspace& w, const DevPass& p, StepStats& st, int j) {
    const int N = w.N(), D = host_.D;
    const FuserKind k = host_.fuser.kind;
    be_.zero(acc_.data(), 6);
    be_.feedback_stats(acc_.data(), p.S, w.fshared.pe, w.e, p.u, p.mask, N, D, k == FuserKind::Glu ? 1 : k == FuserKind::GatedAdd ? 2 : 3);
    double a[6];
    be_.download(a, acc_.data(), 6);
    const double rows = a[0];
    if (rows == 0) return;
    st.state_rms[j] = std::sqrt(a[1] / (rows * D));
    if (k == FuserKind::Glu) {
      const double cnt = rows * D, mean = a[2] / cnt;
      st.gate_mean[j] = mean, st.gate_std[j] = std::sqrt(std::max(0.0, a[3] / cnt - mean * mean));
    } else if (a[5] > 0) {
      st.feedback_ratio[j] = std::sqrt(a[4] / a[5]);
    }
  }

  Model<float>& host_;
  mutable Be be_;  // launching a kernel does not change the model: const members launch too
  Buf<float> value_, grad_, m_, v_, cos_, sin_;
  Buf<double> acc_;
  long step_ = 0;
  std::uint64_t version_ = 0;
  Workspace ws_;
};

// ============================================================================================ decoding

/// One request's decoding state on the device (decode/decoder.hpp Sequence): KV cache + h_prev.
template <class Be> struct DeviceSequenceT {
  int capacity = 0;   ///< positions the cache can hold
  int len = 0;        ///< positions in the cache
  typename Be::template Buf<float> k, v;  ///< (L, capacity, NKV*hs) keys (after QK-norm and RoPE) and values
  typename Be::template Buf<float> h;     ///< (D) the last position's state
  bool has_h = false;
  DecodeModeSpec mode;
};

/// \brief KV-cached decoding on the device in the three modes, with decode/decoder.hpp's API and semantics
/// (prefill of a fresh sequence; step of R sequences together; the sep token starts a document).
template <class Be> class DeviceDecoderT {
 public:
  using Sequence = DeviceSequenceT<Be>;
  template <class U> using Buf = typename Be::template Buf<U>;

  explicit DeviceDecoderT(DeviceModelT<Be>& m, int sep_token = -1) : m_(m), sep_(sep_token) {}
  const Model<float>& model() const { return m_.host(); }

  Sequence new_sequence(int capacity, DecodeModeSpec mode) {
    const Model<float>& hm = m_.host();
    FBT_ASSERT(capacity > 0 && capacity <= hm.cfg.max_position_embeddings,
               "sequence capacity " + std::to_string(capacity) + " must be in [1, max_position_embeddings=" +
                   std::to_string(hm.cfg.max_position_embeddings) + "]");
    FBT_ASSERT(mode.mode == DecodeMode::Standard || hm.feedback(),
               "decoding mode " + mode.name() + " needs a feedback fuser (the model's fuser is none)");
    Sequence s;
    s.capacity = capacity, s.mode = mode;
    const std::size_t n = std::size_t(hm.L) * capacity * KD();
    s.k.resize(n), s.v.resize(n), s.h.resize(hm.D);
    m_.backend().zero(s.k.data(), n), m_.backend().zero(s.v.data(), n), m_.backend().zero(s.h.data(), hm.D);
    return s;
  }

  /// \brief The prompt (P tokens) through the mode's prefill; commits K/V and h_prev; logits (V, host) of
  /// the last prompt position. The sequence must be fresh.
  void prefill(Sequence& s, const int* prompt, int P, float* logits) {
    FBT_ASSERT(P >= 1, "prefill needs at least one prompt token");
    FBT_ASSERT(s.len == 0 && !s.has_h, "prefill of a sequence that already holds tokens");
    FBT_ASSERT(P <= s.capacity, "prompt of " + std::to_string(P) + " tokens exceeds the sequence capacity " + std::to_string(s.capacity));
    const Model<float>& hm = m_.host();
    Be& be = m_.backend();
    const int D = hm.D, L = hm.L, V = hm.V;
    docs_.assign(P, 0);
    int start = 0;
    for (int t = 0; t < P; ++t)
      if (t == 0 || prompt[t] == sep_) docs_[t] = 1, start = t;
    const int passes = s.mode.mode == DecodeMode::Fused ? 1 + s.mode.k : 1;
    m_.prepare(ws_, 1, P, 1, false);
    m_.begin_batch(ws_, prompt, docs_.data(), nullptr);
    DevPass& p = ws_.pass[0];
    if (passes > 1) m_.shared_forward(ws_.fshared, ws_.e, P);
    for (int j = 0; j < passes; ++j) {
      if (j == 0) m_.plain_input(ws_, p);
      else m_.fused_input(ws_, p, m_.source_state(p), false, 0, 0.0, 0, nullptr);
      m_.stack_forward(ws_, p);
    }
    const int from = hm.cfg.doc_attention == "masked" ? start : 0;
    const std::size_t kd = KD();
    for (int l = 0; l < L; ++l) {
      be.copy(s.k.data() + std::size_t(l) * s.capacity * kd, p.blocks[l].kr + std::size_t(from) * kd, std::size_t(P - from) * kd);
      be.copy(s.v.data() + std::size_t(l) * s.capacity * kd, p.blocks[l].v + std::size_t(from) * kd, std::size_t(P - from) * kd);
    }
    s.len = P - from;
    be.copy(s.h.data(), m_.source_state(p) + std::size_t(P - 1) * D, std::size_t(D));
    s.has_h = true;
    be.gemm(ws_.logits, V, p.hf + std::size_t(P - 1) * D, D, false, m_.values() + hm.head_offset(), D, true, 1, V, D, false);
    be.download(logits, ws_.logits, std::size_t(V));
  }

  /// \brief Feeds tokens[r] to seqs[r] for r < R (one new position each); logits (R, V) on the host.
  void step(Sequence* const* seqs, int R, const int* tokens, float* logits) {
    const Model<float>& hm = m_.host();
    Be& be = m_.backend();
    const ModelConfig& c = hm.cfg;
    const int D = hm.D, V = hm.V, L = hm.L, NH = c.num_attention_heads, NKV = c.num_key_value_heads, hs = c.hs(), QD = NH * hs;
    const int F = c.intermediate_size, kd = KD();
    const float eps = float(c.rms_norm_eps);
    const float* P = m_.values();
    reserve(R);
    bool any_fused = false;
    int max_len1 = 0;
    for (int r = 0; r < R; ++r) {
      Sequence& s = *seqs[r];
      FBT_ASSERT(tokens[r] >= 0 && tokens[r] < V, "token id " + std::to_string(tokens[r]) + " at position " + std::to_string(r) +
                                                      " is outside the vocabulary [0, " + std::to_string(V) + ")");
      const bool doc_start = tokens[r] == sep_;
      if (doc_start && c.doc_attention == "masked") s.len = 0;
      FBT_ASSERT(s.len < s.capacity, "sequence is full (" + std::to_string(s.capacity) + " positions)");
      const bool fused = hm.feedback() && s.mode.mode != DecodeMode::Standard && s.has_h && !doc_start;
      hmask_[r] = fused ? 1.f : 0.f;
      any_fused |= fused;
      hint_[r] = tokens[r], hint_[R + r] = s.len, hint_[2 * R + r] = s.len + 1, hint_[3 * R + r] = s.capacity;
      hptr_[r] = s.k.data(), hptr_[R + r] = s.v.data(), hptr_[2 * R + r] = s.h.data();
      max_len1 = std::max(max_len1, s.len + 1);
    }
    const int* tok = ints_.data();
    const int* pos = tok + R;
    const int* len1 = pos + R;
    const int* cap = len1 + R;
    float* const* kc = ptrs_.data();
    float* const* vc = kc + R;
    float* const* hp = vc + R;
    be.upload(ints_.data(), hint_.data(), std::size_t(4) * R);
    be.upload(ptrs_.data(), hptr_.data(), std::size_t(3) * R);
    be.upload(mask_, hmask_.data(), std::size_t(R));
    const std::size_t RD = std::size_t(R) * D;
    // layer-0 input
    be.embedding_forward(e_, tok, P + hm.embed, R, D);
    if (!hm.feedback()) {
      be.copy(x_, e_, RD);
    } else if (any_fused) {
      refresh_pe_table();
      be.embedding_forward(sh_.pe, tok, pe_table_.data(), R, D);  // the fuser's e-only part, from the per-token table
      be.gather_rows(S_, const_cast<const float* const*>(hp), mask_, R, D);
      m_.fuse_rows(R, e_, S_, mask_, sh_, fc_, u_, rin_, x_);
    } else if (c.input_norm == "all") {
      be.rmsnorm_forward(x_, rin_, e_, P + hm.in_norm, R, D, eps);
    } else {
      be.copy(x_, e_, RD);
    }
    // the stack, one new position per sequence
    for (int l = 0; l < L; ++l) {
      const Block<float>& bl = hm.blocks[l];
      const auto& at = bl.attn;
      be.rmsnorm_forward(ln_, rstd_, x_, P + bl.g1, R, D, eps);
      be.gemm(q_, QD, ln_, D, false, P + at.wq, D, true, R, QD, D, false);
      be.gemm(k_, kd, ln_, D, false, P + at.wk, D, true, R, kd, D, false);
      be.gemm(v_, kd, ln_, D, false, P + at.wv, D, true, R, kd, D, false);
      if (at.qk_norm) {
        be.rmsnorm_forward(q_, rq_, q_, P + at.gq, R * NH, hs, eps);
        be.rmsnorm_forward(k_, rq_, k_, P + at.gk, R * NKV, hs, eps);
      }
      be.rope_forward(q_, q_, pos, m_cos(), m_sin(), R, NH, hs);
      be.rope_forward(k_, k_, pos, m_cos(), m_sin(), R, NKV, hs);
      be.kv_append(kc, vc, k_, v_, pos, cap, l, R, kd);
      be.attention_decode(ao_, q_, const_cast<const float* const*>(kc), const_cast<const float* const*>(vc), len1, cap, max_len1, l, R, NH, NKV,
                          hs);
      be.gemm(x_, D, ao_, QD, false, P + at.wo, QD, true, R, D, QD, true);
      be.rmsnorm_forward(ln_, rstd_, x_, P + bl.g2, R, D, eps);
      be.gemm(g_, F, ln_, D, false, P + bl.mlp.wg, D, true, R, F, D, false);
      be.gemm(up_, F, ln_, D, false, P + bl.mlp.wu, D, true, R, F, D, false);
      be.swiglu_forward(g_, g_, up_, std::size_t(R) * F);
      be.gemm(x_, D, g_, F, false, P + bl.mlp.wd, F, true, R, D, F, true);
    }
    be.rmsnorm_forward(hf_, rstd_, x_, P + hm.final_norm, R, D, eps);
    be.gemm(lg_, V, hf_, D, false, P + hm.head_offset(), D, true, R, V, D, false);
    be.scatter_rows(hp, hm.post_norm_source() ? hf_ : x_, R, D);
    be.download(logits, lg_, std::size_t(R) * V);
    for (int r = 0; r < R; ++r) {
      seqs[r]->has_h = true;
      ++seqs[r]->len;
    }
  }

 private:
  int KD() const { return m_.cfg().num_key_value_heads * m_.cfg().hs(); }
  const float* m_cos() const { return rope_cos_; }
  const float* m_sin() const { return rope_sin_; }

  /// pe of every vocabulary entry (V, D), recomputed when the device weights changed (version).
  void refresh_pe_table() {
    if (pe_version_ == m_.version() && pe_table_.size() > 0) return;
    const Model<float>& hm = m_.host();
    const int V = hm.V, D = hm.D;
    const std::size_t VD = std::size_t(V) * D;
    pe_table_.resize(VD);
    pe_tmp_.resize(VD + V);  // a member: kernels may still read it after this returns
    float* t = pe_tmp_.data();
    DevFuserShared sh{t, t + VD, pe_table_.data(), nullptr, nullptr};  // ng, rg, pe; no gradient
    m_.shared_forward(sh, m_.values() + hm.embed, V);
    pe_version_ = m_.version();
  }
  /// Step buffers for R rows (grown once).
  void reserve(int R) {
    if (R <= rows_) return;
    const ModelConfig& c = m_.cfg();
    const Model<float>& hm = m_.host();
    const std::size_t D = hm.D, QD = std::size_t(c.num_attention_heads) * c.hs(), F = c.intermediate_size, kd = KD(), V = hm.V;
    const auto layout = [&](detail::Carver& a) {
      e_ = a.take(R * D), x_ = a.take(R * D), ln_ = a.take(R * D), hf_ = a.take(R * D), S_ = a.take(R * D), u_ = a.take(R * D);
      q_ = a.take(R * QD), ao_ = a.take(R * QD), k_ = a.take(R * kd), v_ = a.take(R * kd), g_ = a.take(R * F), up_ = a.take(R * F);
      rstd_ = a.take(R), rin_ = a.take(R), mask_ = a.take(R), rq_ = a.take(std::size_t(R) * c.num_attention_heads);
      lg_ = a.take(R * V);
      sh_ = DevFuserShared{nullptr, nullptr, a.take(R * D), nullptr, nullptr};
      fc_ = DevFuserCache{a.take(R * D), a.take(R * D), a.take(R), a.take(R * D), a.take(R * D)};
    };
    detail::Carver cv;
    layout(cv);
    mem_.resize(cv.used);
    cv = detail::Carver{mem_.data(), 0};
    layout(cv);
    ints_.resize(std::size_t(4) * R), ptrs_.resize(std::size_t(3) * R);
    hint_.assign(std::size_t(4) * R, 0), hptr_.assign(std::size_t(3) * R, nullptr), hmask_.assign(R, 0.f);
    rope_cos_ = m_.rope_cos(), rope_sin_ = m_.rope_sin();
    rows_ = R;
  }

  DeviceModelT<Be>& m_;
  int sep_;
  DeviceWorkspace<Be> ws_;  // prefill
  std::vector<std::uint8_t> docs_;
  int rows_ = 0;
  Buf<float> mem_, pe_table_, pe_tmp_;
  Buf<int> ints_;     // tokens, pos, len1, cap: (R) each
  Buf<float*> ptrs_;  // per-row K cache, V cache, h: (R) each
  std::vector<int> hint_;
  std::vector<float*> hptr_;
  std::vector<float> hmask_;
  std::uint64_t pe_version_ = ~std::uint64_t(0);
  const float *rope_cos_ = nullptr, *rope_sin_ = nullptr;
  float *e_ = nullptr, *x_ = nullptr, *ln_ = nullptr, *hf_ = nullptr, *S_ = nullptr, *u_ = nullptr, *q_ = nullptr, *ao_ = nullptr;
  float *k_ = nullptr, *v_ = nullptr, *g_ = nullptr, *up_ = nullptr, *rstd_ = nullptr, *rin_ = nullptr, *mask_ = nullptr, *rq_ = nullptr;
  float* lg_ = nullptr;
  DevFuserShared sh_{};
  DevFuserCache fc_{};
};

/// \brief Decodes several requests together on the device (decode/decoder.hpp generate_batch, same
/// sampling and stopping rules, so greedy decoding must give the CPU decoder's tokens).
template <class Be> std::vector<std::vector<int>> generate_batch(DeviceDecoderT<Be>& dec, const std::vector<Request>& reqs) {
  using Seq = typename DeviceDecoderT<Be>::Sequence;
  const int V = dec.model().V, n = int(reqs.size());
  std::vector<Seq> seqs;
  std::vector<Rng> rngs;
  std::vector<std::vector<int>> out(n);
  std::vector<int> next(n);
  std::vector<float> logits(std::size_t(std::max(n, 1)) * V);
  std::vector<std::pair<double, int>> scratch;
  seqs.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto& r = reqs[i];
    r.opts.sampling.validate();
    FBT_ASSERT(!r.prompt.empty(), "request " + std::to_string(i) + " has an empty prompt");
    const int cap = std::min<int>(dec.model().cfg.max_position_embeddings, int(r.prompt.size()) + r.opts.max_new_tokens);
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
  }
  return out;
}

}  // namespace cuda
}  // namespace fbt
