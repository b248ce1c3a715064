// fbt/layers/attention.hpp: Qwen3-style causal self-attention (spec sections 1 and 9), built from its
// own AttentionSpec, in three stages that a variant can replace one at a time.
//
//   (a) projection  QkvProjection<T>    q = x Wq^T, k = x Wk^T, v = x Wv^T   (N, NH*hs), (N, NKV*hs), (N, NKV*hs)
//                                       q, k <- RMSNorm per head (QK-norm, one gain shared by all heads), then RoPE
//   (b) kernel      AttentionKernel<T>  o = attention(q, k, v)  (GQA, causal, document-masked)   (N, NH*hs)
//                                       sliding window W (Hugging Face Qwen3's sliding_attention layers): query t
//                                       sees keys t-W < j <= t only (PassShape::first_for); decoding keeps the
//                                       last W positions as a ring (decode/decoder.hpp)
//                                       decoding: append k, v to the KV cache, attend over it
//   (c) output      OutProjection<T>    y += o Wo^T   (N, D)   (accumulated into the residual)
//
// Attention<T, Proj, Kernel, Out> runs them in order and owns nothing else; CausalSelfAttention<T> is the
// standard one. Each stage has forward, backward and decode, and its own Cache / DecodeCache (what it
// produces lives in its cache: the projection's q, k, v and their gradients, the kernel's o and its
// gradient). A stage's backward accumulates into the gradients of its inputs (+=); Attention zeroes the
// scratch between stages. The output stage also sees the attention's input x, so a gate computed from
// x (per element or per head) is an output stage of ~15 lines (layers/head_gate.hpp, docs/api.md
// "Attention in stages"). The stage interfaces are checked at compile time (layers/contract.hpp
// check_attention_stages).
//
// Parameters (under the scope the block gives, e.g. model.layers.{i}.self_attn.): {q,k,v,o}_proj.weight,
// {q,k}_norm.weight, registered in that order (the store's order, which the initialiser draws in). The
// RoPE table (max_positions, hs/2) is a constant shared by every layer of the same head size and theta.
// What attention keeps for backward is the backend's choice (the CPU and CUDA backends keep the logsumexp
// (B, NH, T) and recompute the probabilities): the kernel's cache holds `att`, sized by the backend.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "../ops/rope.hpp"
#include "rmsnorm.hpp"

namespace fbt {

/// The sizes of one attention layer.
struct AttentionSpec {
  int hidden_size = 0;          ///< D
  int num_heads = 0;            ///< NH
  int num_kv_heads = 0;         ///< NKV, divides NH
  int head_dim = 0;             ///< hs, even (rotate-half RoPE)
  bool qk_norm = true;          ///< Qwen3 per-head RMSNorm on q and k
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int max_positions = 4096;     ///< rows of the RoPE table: the longest sequence
  double init_std = 0.02;       ///< q, k, v projections
  double out_std = 0.02;        ///< o_proj (depth-scaled by the model: std / sqrt(2L))
  int sliding_window = 0;       ///< W: each query sees its last W positions (itself included); 0 = every earlier one
};

/// \brief Stage (a): q, k, v = x W^T, QK-norm, RoPE. Produces qr, kr, v (what the kernel attends with);
/// its backward reads their gradients dqr, dkr, dv from its cache (the kernel's backward fills them).
template <class T> struct QkvProjection {
  using Scalar = T;
  AttentionSpec spec;
  int D = 0, NH = 0, NKV = 0, hs = 0;
  RMSNorm<T> q_norm, k_norm;           // per head (hs)
  std::size_t wq = 0, wk = 0, wv = 0;  // offsets in the ParamStore
  std::size_t rope = 0;                // offset of the RoPE table in the constants

  struct Cache {
    T *q, *k, *v;    // (N, NH*hs), (N, NKV*hs), (N, NKV*hs)  raw projections (q, k alias qr, kr without QK-norm)
    T *rq, *rk;      // (N*NH), (N*NKV)  QK-norm rstd
    T *qr, *kr;      // (N, NH*hs), (N, NKV*hs)  after QK-norm and RoPE: what attention saw (kr, v: what a prefill commits)
    // backward's scratch (temporaries; null without grad)
    T *dqr, *dkr, *dv;  // (N, NH*hs), (N, NKV*hs) x 2  gradients of qr, kr, v (the kernel accumulates them)
    T *dqn, *dkn;       // (N, NH*hs), (N, NKV*hs)      after RoPE's backward
  };
  struct DecodeCache {
    T *q, *k, *v;  // (R, NH*hs), (R, NKV*hs) x 2  rotated q, k and v of the new positions
    T* rstd;       // (R*NH)
  };

  QkvProjection() = default;
  explicit QkvProjection(const AttentionSpec& s)
      : spec(s), D(s.hidden_size), NH(s.num_heads), NKV(s.num_kv_heads), hs(s.head_dim), q_norm(s.head_dim, s.rms_norm_eps),
        k_norm(s.head_dim, s.rms_norm_eps) {}

  /// q_proj, k_proj, v_proj. (declare_norms registers the rest after the output stage's o_proj.)
  void declare(const ParamRegistry<T>& r) {
    wq = r.add("q_proj.weight", {NH * hs, D}, Init::Normal, spec.init_std);
    wk = r.add("k_proj.weight", {NKV * hs, D}, Init::Normal, spec.init_std);
    wv = r.add("v_proj.weight", {NKV * hs, D}, Init::Normal, spec.init_std);
  }
  /// q_norm, k_norm and the RoPE table.
  void declare_norms(const ParamRegistry<T>& r) {
    if (spec.qk_norm) q_norm.declare(r.scope("q_norm")), k_norm.declare(r.scope("k_norm"));
    const int maxp = spec.max_positions, h = hs;
    const double theta = spec.rope_theta;
    char key[96];
    std::snprintf(key, sizeof key, "rope:%d:%d:%.17g", maxp, h, theta);
    rope = r.constant(key, std::size_t(maxp) * h, [=](T* p) { rope_fill(p, maxp, h, theta); });
  }
  RopeView<T> rope_view(const Weights<T>& w) const {
    const std::size_t half = std::size_t(hs) / 2, rows = std::size_t(spec.max_positions);
    return RopeView<T>{w.consts + rope, w.consts + rope + rows * half, spec.max_positions, int(half)};
  }

  /// With grad, what backward reads is kept; without, only kr and v (a prefill commits them).
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    const std::size_t NQ = std::size_t(N) * NH * hs, NK = std::size_t(N) * NKV * hs;
    Carver<T>& a = grad ? keep : temp;
    c.kr = keep.take(NK), c.v = keep.take(NK);
    c.qr = a.take(NQ);
    if (spec.qk_norm) {
      c.q = a.take(NQ), c.k = a.take(NK), c.rq = a.take(std::size_t(N) * NH), c.rk = a.take(std::size_t(N) * NKV);
    } else {  // project straight into qr, kr and rotate in place
      c.q = c.qr, c.k = c.kr, c.rq = c.rk = nullptr;
    }
    c.dqr = c.dkr = c.dv = c.dqn = c.dkn = nullptr;
    if (!grad) return;
    c.dqr = temp.take(NQ), c.dkr = temp.take(NK), c.dv = temp.take(NK), c.dqn = temp.take(NQ), c.dkn = temp.take(NK);
  }
  template <class Be> void alloc_decode(const Be&, Carver<T>& a, DecodeCache& c, int R) const {
    c.q = a.take(std::size_t(R) * NH * hs), c.k = a.take(std::size_t(R) * NKV * hs), c.v = a.take(std::size_t(R) * NKV * hs);
    c.rstd = a.take(std::size_t(R) * NH);
  }

  /// \brief c.qr, c.kr, c.v from x (N, D), the normalised block input.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, const PassShape& s) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    {
      Bf16InputScope<T> once(x, std::size_t(N) * D);  // bf16: x rounded once for the three products
      linear(be, c.q, x, w.value + wq, N, QD, D, D, false);
      linear(be, c.k, x, w.value + wk, N, KD, D, D, false);
      linear(be, c.v, x, w.value + wv, N, KD, D, D, false);
    }
    if (spec.qk_norm) {  // per head: view (N, NH*hs) as (N*NH, hs); the normed q, k go straight into qr, kr
      q_norm.forward(be, w, c.qr, c.rq, c.q, N * NH);
      k_norm.forward(be, w, c.kr, c.rk, c.k, N * NKV);
    }
    const RopeView<T> rv = rope_view(w);
    be.rope_forward(c.qr, c.qr, s.pos, rv, N, NH);  // in place
    be.rope_forward(c.kr, c.kr, s.pos, rv, N, NKV);
  }

  /// \brief From c.dqr, c.dkr, c.dv (consumed: reused as scratch), accumulates dx (N, D) and the parameter gradients.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, T* dx, const T* x, const PassShape& s) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    const std::size_t NQ = std::size_t(N) * QD, NK = std::size_t(N) * KD;
    // RoPE backward into dqn/dkn; with QK-norm they then go through the per-head norm into dq/dk
    T* dq = c.dqn;
    T* dk = c.dkn;
    be.zero(c.dqn, NQ), be.zero(c.dkn, NK);
    const RopeView<T> rv = rope_view(w);
    be.rope_backward(c.dqn, c.dqr, s.pos, rv, N, NH);
    be.rope_backward(c.dkn, c.dkr, s.pos, rv, N, NKV);
    if (spec.qk_norm) {  // reuse dqr/dkr as dq/dk (their contents were consumed above)
      dq = c.dqr, dk = c.dkr;
      be.zero(dq, NQ), be.zero(dk, NK);
      q_norm.backward(be, w, dq, c.dqn, c.q, c.rq, N * NH);
      k_norm.backward(be, w, dk, c.dkn, c.k, c.rk, N * NKV);
    }
    Bf16InputScope<T> once(x, std::size_t(N) * D);  // bf16: x rounded once for the three weight gradients
    linear_backward(be, dx, w.grad + wq, dq, x, w.value + wq, N, QD, D, D);
    linear_backward(be, dx, w.grad + wk, dk, x, w.value + wk, N, KD, D, D);
    linear_backward(be, dx, w.grad + wv, c.dv, x, w.value + wv, N, KD, D, D);
  }

  /// \brief c.q, c.k (rotated) and c.v of the R new positions, x (R, D).
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, const T* x, const DecodeStep<T>& st) const {
    const int R = st.R, QD = NH * hs, KD = NKV * hs;
    linear(be, c.q, x, w.value + wq, R, QD, D, D, false);
    linear(be, c.k, x, w.value + wk, R, KD, D, D, false);
    linear(be, c.v, x, w.value + wv, R, KD, D, D, false);
    if (spec.qk_norm) {
      q_norm.forward(be, w, c.q, c.rstd, c.q, R * NH);
      k_norm.forward(be, w, c.k, c.rstd, c.k, R * NKV);
    }
    const RopeView<T> rv = rope_view(w);
    be.rope_forward(c.q, c.q, st.pos, rv, R, NH);
    be.rope_forward(c.k, c.k, st.pos, rv, R, NKV);
  }
};

/// \brief Stage (b): o (N, NH*hs) = softmax(q k^T / sqrt(hs)) v per head, causal within each token's
/// document (PassShape::first), GQA; decoding attends over the KV cache after appending the new k, v.
template <class T> struct AttentionKernel {
  using Scalar = T;
  int NH = 0, NKV = 0, hs = 0;
  int window = 0;  // sliding window W (0: full causal attention)

  struct Cache {
    T* att;   // backend-sized attention state (CPU and CUDA: the logsumexp (B, NH, T))
    T* ao;    // (N, NH*hs)  attention output
    // backward's scratch (temporaries; null without grad)
    T* dao;   // (N, NH*hs)  gradient of ao (the output stage accumulates it)
    T* datt;  // backend-sized attention scratch (CPU and CUDA: Dt (B, NH, T))
  };
  struct DecodeCache {
    T* ao;  // (R, NH*hs)
  };

  AttentionKernel() = default;
  explicit AttentionKernel(const AttentionSpec& s) : NH(s.num_heads), NKV(s.num_kv_heads), hs(s.head_dim), window(s.sliding_window) {}

  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    Carver<T>& a = grad ? keep : temp;
    c.att = a.take(be.attention_state_size(B, Tn, NH));
    c.ao = a.take(std::size_t(B) * Tn * NH * hs);
    c.dao = c.datt = nullptr;
    if (!grad) return;
    c.dao = temp.take(std::size_t(B) * Tn * NH * hs), c.datt = temp.take(be.attention_scratch_size(B, Tn, NH));
  }
  template <class Be> void alloc_decode(const Be&, Carver<T>& a, DecodeCache& c, int R) const { c.ao = a.take(std::size_t(R) * NH * hs); }

  /// \brief c.ao from q (N, NH*hs), k, v (N, NKV*hs).
  template <class Be> void forward(Be& be, Cache& c, const T* q, const T* k, const T* v, const PassShape& s) const {
    be.attention_forward(c.ao, c.att, q, k, v, s.first_for(window), s.B, s.T, NH, NKV, hs);
  }
  /// \brief From c.dao, accumulates dq (N, NH*hs), dk, dv (N, NKV*hs).
  template <class Be>
  void backward(Be& be, const Cache& c, T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const PassShape& s) const {
    be.attention_backward(dq, dk, dv, c.datt, c.dao, c.ao, c.att, q, k, v, s.first_for(window), s.B, s.T, NH, NKV, hs);
  }
  /// \brief Appends k, v (R, NKV*hs) to each row's cache, then c.ao (R, NH*hs) = attention of q over it.
  template <class Be> void decode(Be& be, const DecodeCache& c, const T* q, const T* k, const T* v, const DecodeStep<T>& st) const {
    be.kv_append(st.kc, st.vc, k, v, st.slot ? st.slot : st.pos, st.R, NKV * hs);  // a sliding layer's ring: slot pos % W
    be.attention_decode(c.ao, q, st.kc, st.vc, st.len1, st.max_len1, st.R, NH, NKV, hs);
  }
};

/// \brief Stage (c): y (N, D) += o Wo^T. x (N, D), the attention's input, is passed to every output
/// stage (a gate may read it); this one does not use it.
template <class T> struct OutProjection {
  using Scalar = T;
  AttentionSpec spec;
  int D = 0, QD = 0;   // model width, NH*hs
  std::size_t wo = 0;  // offset of o_proj (D, NH*hs)

  struct Cache {};
  struct DecodeCache {};

  OutProjection() = default;
  explicit OutProjection(const AttentionSpec& s) : spec(s), D(s.hidden_size), QD(s.num_heads * s.head_dim) {}

  void declare(const ParamRegistry<T>& r) { wo = r.add("o_proj.weight", {D, QD}, Init::Normal, spec.out_std); }
  template <class Be> void alloc(const Be&, Carver<T>&, Carver<T>&, Cache&, int, bool) const {}
  template <class Be> void alloc_decode(const Be&, Carver<T>&, DecodeCache&, int) const {}

  /// \brief y (N, D) += o (N, NH*hs) Wo^T.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache&, const T*, const T* o, T* y, int N) const {
    linear(be, y, o, w.value + wo, N, D, QD, QD, true);
  }
  /// \brief From dy (N, D): d_o (N, NH*hs) += dy Wo, dWo += dy^T o. (dx: untouched, x is not used.)
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache&, const T*, const T* o, const T* dy, T*, T* d_o, int N) const {
    linear_backward(be, d_o, w.grad + wo, dy, o, w.value + wo, N, D, QD, QD);
  }
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache&, const T*, const T* o, T* y, int R) const {
    linear(be, y, o, w.value + wo, R, D, QD, QD, true);
  }
};

/// \brief Attention from its three stages: y (N, D) += Out(Kernel(Proj(x))). The layer contract of a
/// block's attention part (layers/contract.hpp check_attention).
template <class T, class Proj = QkvProjection<T>, class Kernel = AttentionKernel<T>, class Out = OutProjection<T>> struct Attention {
  using Scalar = T;
  using Spec = AttentionSpec;
  using ProjStage = Proj;
  using KernelStage = Kernel;
  using OutStage = Out;
  Spec spec;
  int D = 0, NH = 0, NKV = 0, hs = 0;
  Proj proj;
  Kernel kernel;
  Out out;

  /// One pass's activations (what backward needs) and backward's scratch: each stage's own.
  struct Cache {
    typename Proj::Cache proj;
    typename Kernel::Cache kernel;
    typename Out::Cache out;
  };
  /// One decoding step's buffers for R rows.
  struct DecodeCache {
    typename Proj::DecodeCache proj;
    typename Kernel::DecodeCache kernel;
    typename Out::DecodeCache out;
  };

  Attention() = default;
  explicit Attention(const Spec& s)
      : spec(s), D(s.hidden_size), NH(s.num_heads), NKV(s.num_kv_heads), hs(s.head_dim), proj(check(s)), kernel(s), out(s) {}

  int kv_width() const { return NKV * hs; }  ///< KD: one position's keys (and values) in a KV cache

  /// q_proj, k_proj, v_proj, o_proj (and the output stage's own), then q_norm, k_norm: Qwen3's order.
  void declare(const ParamRegistry<T>& r) {
    proj.declare(r);
    out.declare(r);
    proj.declare_norms(r);
  }

  /// Lays out a pass's cache (layers/contract.hpp): with grad, what backward reads is kept and its scratch
  /// is temporary; without, only the rotated keys and the values (a prefill commits them) are kept.
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    proj.alloc(be, keep, temp, c.proj, B * Tn, grad);
    kernel.alloc(be, keep, temp, c.kernel, B, Tn, grad);
    out.alloc(be, keep, temp, c.out, B * Tn, grad);
  }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const {
    proj.alloc_decode(be, a, c.proj, R);
    kernel.alloc_decode(be, a, c.kernel, R);
    out.alloc_decode(be, a, c.out, R);
  }

  /// \brief y (N, D) += attention(x); fills c. x (N, D) is the normalised block input.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* y, const PassShape& s) const {
    proj.forward(be, w, c.proj, x, s);
    kernel.forward(be, c.kernel, c.proj.qr, c.proj.kr, c.proj.v, s);
    out.forward(be, w, c.out, x, c.kernel.ao, y, s.N());
  }

  /// \brief Given dy (N, D), accumulates dx (N, D) and the parameter gradients.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, const T* dy, T* dx, const T* x, const PassShape& s) const {
    const std::size_t NQ = std::size_t(s.N()) * NH * hs, NK = std::size_t(s.N()) * NKV * hs;
    be.zero(c.kernel.dao, NQ);
    out.backward(be, w, c.out, x, c.kernel.ao, dy, dx, c.kernel.dao, s.N());
    be.zero(c.proj.dqr, NQ), be.zero(c.proj.dkr, NK), be.zero(c.proj.dv, NK);
    kernel.backward(be, c.kernel, c.proj.dqr, c.proj.dkr, c.proj.dv, c.proj.qr, c.proj.kr, c.proj.v, s);
    proj.backward(be, w, c.proj, dx, x, s);
  }

  /// \brief One decoding step: y (R, D) += attention of each new position against its sequence's cache;
  /// the new keys and values are appended to the cache first. x (R, D) is the normalised input.
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, const T* x, T* y, const DecodeStep<T>& st) const {
    proj.decode(be, w, c.proj, x, st);
    kernel.decode(be, c.kernel, c.proj.q, c.proj.k, c.proj.v, st);
    out.decode(be, w, c.out, x, c.kernel.ao, y, st.R);
  }

  /// The rotated keys and the values (N, KD) of a forward: what a prefill commits to the KV cache.
  std::pair<const T*, const T*> kv(const Cache& c) const { return {c.proj.kr, c.proj.v}; }

 private:
  static const Spec& check(const Spec& s) {
    const int NH = s.num_heads, NKV = s.num_kv_heads;
    FBT_ASSERT(s.hidden_size > 0 && NH > 0 && NKV > 0 && s.head_dim > 0, "CausalSelfAttention: sizes must be > 0");
    FBT_ASSERT(NH % NKV == 0, "CausalSelfAttention: num_kv_heads (" + std::to_string(NKV) + ") must divide num_heads (" + std::to_string(NH) + ")");
    FBT_ASSERT(s.head_dim % 2 == 0, "CausalSelfAttention: head_dim must be even for RoPE, got " + std::to_string(s.head_dim));
    FBT_ASSERT(s.max_positions > 0, "CausalSelfAttention: max_positions must be > 0");
    return s;
  }
};

/// The standard attention: Qwen3's projections, the backend's attention kernel, o_proj.
template <class T> using CausalSelfAttention = Attention<T>;

}  // namespace fbt
