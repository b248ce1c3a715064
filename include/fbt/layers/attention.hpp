// fbt/layers/attention.hpp: Qwen3-style causal self-attention (spec sections 1 and 9).
//
//   q = x Wq^T, k = x Wk^T, v = x Wv^T            (N, NH*hs), (N, NKV*hs), (N, NKV*hs)
//   q, k <- RMSNorm per head (QK-norm, one gain shared by all heads), then RoPE (rotate-half)
//   o = attention(q, k, v)  (GQA, causal, document-masked)     (N, NH*hs)
//   y += o Wo^T                                                (N, D)    (accumulated into the residual)
// Parameters: model.layers.{i}.self_attn.{q,k,v,o}_proj.weight, .{q,k}_norm.weight.
#pragma once

#include <cmath>

#include "../model/config.hpp"
#include "../ops/attention.hpp"
#include "../ops/linear.hpp"
#include "../ops/rmsnorm.hpp"
#include "../ops/rope.hpp"
#include "common.hpp"

namespace fbt {

template <class T> struct CausalSelfAttention {
  using Scalar = T;
  int D = 0, NH = 0, NKV = 0, hs = 0;
  bool qk_norm = true;
  T eps = T(1e-6);
  std::size_t wq = 0, wk = 0, wv = 0, wo = 0, gq = 0, gk = 0;  // offsets in the ParamStore

  /// What backward needs, per pass and layer.
  struct Cache {
    T *q, *k, *v;    // (N, NH*hs), (N, NKV*hs), (N, NKV*hs)  raw projections (q, k alias qr, kr without QK-norm)
    T *rq, *rk;      // (N*NH), (N*NKV)  QK-norm rstd
    T *qr, *kr;      // (N, NH*hs), (N, NKV*hs)  after QK-norm and RoPE: what attention saw
    // (the QK-normed, not yet rotated q and k are not kept: backward needs only q, k and the rstd)
    T* att;          // (B, NH, T, T)  attention probabilities
    T* ao;           // (N, NH*hs)  attention output before o_proj
  };
  /// Gradient scratch shared by every layer and pass (used transiently inside backward).
  struct Scratch {
    T *dao, *dqr, *dkr, *dv, *dqn, *dkn, *datt;  // (N, NH*hs), (N, NH*hs), (N, NKV*hs) x 2, (N, NH*hs), (N, NKV*hs), (T, T)
  };

  CausalSelfAttention() = default;
  CausalSelfAttention(const ModelConfig& c)
      : D(c.hidden_size), NH(c.num_attention_heads), NKV(c.num_key_value_heads), hs(c.hs()), qk_norm(c.qk_norm), eps(T(c.rms_norm_eps)) {}

  void declare(ParamStore<T>& ps, const std::string& prefix, double std, double out_std) {
    wq = ps.add(prefix + "q_proj.weight", {NH * hs, D}, Init::Normal, std);
    wk = ps.add(prefix + "k_proj.weight", {NKV * hs, D}, Init::Normal, std);
    wv = ps.add(prefix + "v_proj.weight", {NKV * hs, D}, Init::Normal, std);
    wo = ps.add(prefix + "o_proj.weight", {D, NH * hs}, Init::Normal, out_std);
    if (qk_norm) {
      gq = ps.add(prefix + "q_norm.weight", {hs}, Init::Ones);
      gk = ps.add(prefix + "k_norm.weight", {hs}, Init::Ones);
    }
  }
  void alloc(Arena<T>& a, Cache& c, int B, int Tn) const {
    const std::size_t N = std::size_t(B) * Tn;
    c.qr = a.take(N * NH * hs), c.kr = a.take(N * NKV * hs), c.v = a.take(N * NKV * hs);
    if (qk_norm) {
      c.q = a.take(N * NH * hs), c.k = a.take(N * NKV * hs), c.rq = a.take(N * NH), c.rk = a.take(N * NKV);
    } else {  // project straight into qr, kr and rotate in place
      c.q = c.qr, c.k = c.kr, c.rq = c.rk = nullptr;
    }
    c.att = a.take(std::size_t(B) * NH * Tn * Tn);
    c.ao = a.take(N * NH * hs);
  }
  void alloc_scratch(Arena<T>& a, Scratch& s, int B, int Tn) const {
    const std::size_t N = std::size_t(B) * Tn;
    s.dao = a.take(N * NH * hs), s.dqr = a.take(N * NH * hs), s.dkr = a.take(N * NKV * hs), s.dv = a.take(N * NKV * hs);
    s.dqn = a.take(N * NH * hs), s.dkn = a.take(N * NKV * hs), s.datt = a.take(std::size_t(Tn) * Tn);
  }

  /// \brief y (N, D) += o_proj(attention(x)); fills c. x (N, D) is the normalised block input.
  void forward(const ParamStore<T>& ps, Cache& c, const T* x, T* y, const PassShape& s, const RopeTable<T>& rope) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    const T* P = ps.values();
    auto X = csmat(x, N, D);
    linear_forward(smat(c.q, N, QD), X, csmat(P + wq, QD, D));
    linear_forward(smat(c.k, N, KD), X, csmat(P + wk, KD, D));
    linear_forward(smat(c.v, N, KD), X, csmat(P + wv, KD, D));
    if (qk_norm) {  // per head: view (N, NH*hs) as (N*NH, hs); the normed q, k go straight into qr, kr
      rmsnorm_forward(smat(c.qr, N * NH, hs), vec(c.rq, N * NH), csmat(c.q, N * NH, hs), cvec(P + gq, hs), eps);
      rmsnorm_forward(smat(c.kr, N * NKV, hs), vec(c.rk, N * NKV), csmat(c.k, N * NKV, hs), cvec(P + gk, hs), eps);
    }
    rope_forward(smat(c.qr, N, QD), csmat(c.qr, N, QD), s.pos, rope, NH);  // in place
    rope_forward(smat(c.kr, N, KD), csmat(c.kr, N, KD), s.pos, rope, NKV);
    attention_forward(smat(c.ao, N, QD), c.att, csmat(c.qr, N, QD), csmat(c.kr, N, KD), csmat(c.v, N, KD), s.first,
                      AttnShape{s.B, s.T, NH, NKV, hs});
    linear_forward_acc(smat(y, N, D), csmat(c.ao, N, QD), csmat(P + wo, D, QD));
  }

  /// \brief Given dy (N, D), accumulates dx (N, D) and the parameter gradients in ps.
  void backward(ParamStore<T>& ps, const Cache& c, const Scratch& sc, const T* dy, T* dx, const T* x, const PassShape& s,
                const RopeTable<T>& rope) const {
    const int N = s.N(), QD = NH * hs, KD = NKV * hs;
    const T* P = ps.values();
    T* G = ps.grads();
    zero(sc.dao, std::size_t(N) * QD), zero(sc.dqr, std::size_t(N) * QD), zero(sc.dkr, std::size_t(N) * KD);
    zero(sc.dv, std::size_t(N) * KD);
    linear_backward(smat(sc.dao, N, QD), smat(G + wo, D, QD), csmat(dy, N, D), csmat(c.ao, N, QD), csmat(P + wo, D, QD));
    attention_backward(smat(sc.dqr, N, QD), smat(sc.dkr, N, KD), smat(sc.dv, N, KD), sc.datt, csmat(sc.dao, N, QD), c.att,
                       csmat(c.qr, N, QD), csmat(c.kr, N, KD), csmat(c.v, N, KD), s.first, AttnShape{s.B, s.T, NH, NKV, hs});
    // RoPE backward into dqn/dkn; with QK-norm they then go through the per-head norm into dq/dk
    T* dq = sc.dqn;
    T* dk = sc.dkn;
    zero(sc.dqn, std::size_t(N) * QD), zero(sc.dkn, std::size_t(N) * KD);
    rope_backward(smat(sc.dqn, N, QD), csmat(sc.dqr, N, QD), s.pos, rope, NH);
    rope_backward(smat(sc.dkn, N, KD), csmat(sc.dkr, N, KD), s.pos, rope, NKV);
    if (qk_norm) {  // reuse dqr/dkr as dq/dk (their contents were consumed above)
      dq = sc.dqr, dk = sc.dkr;
      zero(dq, std::size_t(N) * QD), zero(dk, std::size_t(N) * KD);
      rmsnorm_backward(smat(dq, N * NH, hs), vec(G + gq, hs), csmat(sc.dqn, N * NH, hs), csmat(c.q, N * NH, hs), cvec(P + gq, hs),
                       cvec(c.rq, N * NH));
      rmsnorm_backward(smat(dk, N * NKV, hs), vec(G + gk, hs), csmat(sc.dkn, N * NKV, hs), csmat(c.k, N * NKV, hs), cvec(P + gk, hs),
                       cvec(c.rk, N * NKV));
    }
    auto X = csmat(x, N, D);
    linear_backward(smat(dx, N, D), smat(G + wq, QD, D), csmat(dq, N, QD), X, csmat(P + wq, QD, D));
    linear_backward(smat(dx, N, D), smat(G + wk, KD, D), csmat(dk, N, KD), X, csmat(P + wk, KD, D));
    linear_backward(smat(dx, N, D), smat(G + wv, KD, D), csmat(sc.dv, N, KD), X, csmat(P + wv, KD, D));
  }
};

}  // namespace fbt
