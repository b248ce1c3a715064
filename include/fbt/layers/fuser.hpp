// fbt/layers/fuser.hpp: the feedback fusers Fuse(s, e) of spec section 2.
//
//   glu (paper Eq. 4, default)  Fuse = (W_U s) * sigmoid(W_G N_g(e))
//   gated_add                   Fuse = e + alpha * sigmoid(W_g [N_g(e); N_s(s)] + b) * (W_s N_s(s))
//   concat                      Fuse = W_c [N_s(s); N_g(e)]
// s is the previous position's top state (already shifted), e the new token's embedding.
//
// Every variant has a part that depends on e only, "pe" (N, D): glu's gate pre-activation W_G N_g(e),
// gated_add's W_g[:, :D] N_g(e) + b, concat's W_c[:, D:] N_g(e). It is the same in every pass of a step,
// so it is computed once (shared_forward) and its gradient dpe is summed over the passes before one
// shared_backward; the per-pass part (forward / backward) handles s.
// Parameters under model.feedback.: glu: w_u.weight (D,D), w_g.weight (D,D), gate_norm.weight (D);
// gated_add: w_g.weight (D,2D), w_g.bias (D), w_s.weight (D,D), gate_norm.weight, state_norm.weight;
// concat: w_c.weight (D,2D), gate_norm.weight, state_norm.weight.
#pragma once

#include <cmath>

#include "../model/config.hpp"
#include "../ops/activations.hpp"
#include "../ops/linear.hpp"
#include "../ops/rmsnorm.hpp"
#include "common.hpp"

namespace fbt {

enum class FuserKind { None, Glu, GatedAdd, Concat };

inline FuserKind fuser_kind(const std::string& name) {
  if (name == "none") return FuserKind::None;
  if (name == "glu") return FuserKind::Glu;
  if (name == "gated_add") return FuserKind::GatedAdd;
  if (name == "concat") return FuserKind::Concat;
  throw Error("unknown fuser \"" + name + "\" (expected one of: none, glu, gated_add, concat)");
}

template <class T> struct FeedbackFuser {
  using Scalar = T;
  FuserKind kind = FuserKind::None;
  int D = 0;
  T eps = T(1e-6), alpha = T(0.1);
  // parameter offsets (those of other variants stay 0)
  std::size_t w_u = 0, w_g = 0, b_g = 0, w_s = 0, w_c = 0, g_gate = 0, g_state = 0;

  /// Computed once per step from e.
  struct Shared {
    T *ng, *rg;  // (N, D), (N)  N_g(e) and its rstd
    T* pe;       // (N, D)  the e-only pre-activation (see the file comment)
    T* dpe;      // (N, D)  its gradient, summed over passes
    T* dng;      // (N, D)  scratch
  };
  /// Per pass.
  struct Cache {
    T* a;        // (N, D)  glu: W_U s
    T *ns, *rs;  // (N, D), (N)  N_s(s) (gated_add, concat)
    T *z, *ws;   // (N, D) each  gated_add: gate pre-activation, W_s N_s(s)
  };
  /// Per-pass gradient scratch, shared by all passes.
  struct Scratch {
    T *t0, *t1, *t2;  // (N, D) each
  };

  FeedbackFuser() = default;
  FeedbackFuser(const ModelConfig& c)
      : kind(fuser_kind(c.fuser)), D(c.hidden_size), eps(T(c.rms_norm_eps)), alpha(T(c.gated_add_alpha)) {}

  void declare(ParamStore<T>& ps, const ModelConfig& c) {
    const std::string p = "model.feedback.";
    const Shape DD{D, D}, D2D{D, 2 * D};
    switch (kind) {
      case FuserKind::None: return;
      case FuserKind::Glu:
        w_u = ps.add(p + "w_u.weight", DD, c.glu_init == "fan_in" ? Init::Normal : Init::Identity, 1.0 / std::sqrt(double(D)));
        if (c.glu_init == "identity_both") w_g = ps.add(p + "w_g.weight", DD, Init::Identity);
        else if (c.glu_init == "fan_in") w_g = ps.add(p + "w_g.weight", DD, Init::Normal, 1.0 / std::sqrt(double(D)));
        else w_g = ps.add(p + "w_g.weight", DD, Init::Normal, std::sqrt(1e-6 / D));
        g_gate = ps.add(p + "gate_norm.weight", {D}, Init::Ones);
        return;
      case FuserKind::GatedAdd:
        w_g = ps.add(p + "w_g.weight", D2D, Init::Normal, c.initializer_range);
        b_g = ps.add(p + "w_g.bias", {D}, Init::Zeros);
        w_s = ps.add(p + "w_s.weight", DD, Init::Zeros);  // exactly the plain model at init
        g_gate = ps.add(p + "gate_norm.weight", {D}, Init::Ones);
        g_state = ps.add(p + "state_norm.weight", {D}, Init::Ones);
        return;
      case FuserKind::Concat:
        w_c = ps.add(p + "w_c.weight", D2D, Init::ZeroIdentity);  // [0 | I]: selects N_g(e) at init
        g_gate = ps.add(p + "gate_norm.weight", {D}, Init::Ones);
        g_state = ps.add(p + "state_norm.weight", {D}, Init::Ones);
        return;
    }
  }
  void alloc_shared(Arena<T>& a, Shared& s, int N) const {
    if (kind == FuserKind::None) return;
    s.ng = a.take(std::size_t(N) * D), s.rg = a.take(N), s.pe = a.take(std::size_t(N) * D), s.dpe = a.take(std::size_t(N) * D);
    s.dng = a.take(std::size_t(N) * D);
  }
  void alloc(Arena<T>& a, Cache& c, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    c = Cache{nullptr, nullptr, nullptr, nullptr, nullptr};
    if (kind == FuserKind::Glu) c.a = a.take(ND);
    if (kind == FuserKind::GatedAdd || kind == FuserKind::Concat) c.ns = a.take(ND), c.rs = a.take(N);
    if (kind == FuserKind::GatedAdd) c.z = a.take(ND), c.ws = a.take(ND);
  }
  void alloc_scratch(Arena<T>& a, Scratch& s, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    s.t0 = a.take(ND), s.t1 = a.take(ND), s.t2 = a.take(ND);
  }

  /// \brief Fills sh.ng, sh.pe from e (N, D) and clears sh.dpe.
  void shared_forward(const ParamStore<T>& ps, Shared& sh, const T* e, int N) const {
    const T* P = ps.values();
    rmsnorm_forward(smat(sh.ng, N, D), vec(sh.rg, N), csmat(e, N, D), cvec(P + g_gate, D), eps);
    auto NG = csmat(sh.ng, N, D);
    auto PE = smat(sh.pe, N, D);
    switch (kind) {
      case FuserKind::Glu: linear_forward(PE, NG, csmat(P + w_g, D, D)); break;
      case FuserKind::GatedAdd:
        linear_forward(PE, NG, csmat(P + w_g, D, D, 2 * D));  // left half: the e part of [N_g(e); N_s(s)]
        bias_forward(PE, cvec(P + b_g, D));
        break;
      case FuserKind::Concat: linear_forward(PE, NG, csmat(P + w_c + D, D, D, 2 * D)); break;  // right half: the e part
      case FuserKind::None: break;
    }
    zero(sh.dpe, std::size_t(N) * D);
  }

  /// \brief u (N, D) = Fuse(s, e) at every row (the caller decides which rows use it).
  void forward(const ParamStore<T>& ps, const Shared& sh, Cache& c, const T* s, const T* e, T* u, int N) const {
    const T* P = ps.values();
    auto S = csmat(s, N, D);
    auto U = smat(u, N, D);
    switch (kind) {
      case FuserKind::Glu:
        linear_forward(smat(c.a, N, D), S, csmat(P + w_u, D, D));
        sigmoid_gate_forward(U, csmat(c.a, N, D), csmat(sh.pe, N, D));
        break;
      case FuserKind::GatedAdd: {
        rmsnorm_forward(smat(c.ns, N, D), vec(c.rs, N), S, cvec(P + g_state, D), eps);
        auto NS = csmat(c.ns, N, D);
        mat(c.z, N, D) = cmat(sh.pe, N, D);
        linear_forward_acc(smat(c.z, N, D), NS, csmat(P + w_g + D, D, D, 2 * D));  // right half: the s part
        linear_forward(smat(c.ws, N, D), NS, csmat(P + w_s, D, D));
        sigmoid_gate_forward(U, csmat(c.ws, N, D), csmat(c.z, N, D));  // u = sigmoid(z) * ws
        U = cmat(e, N, D) + alpha * U;                                  // u = e + alpha * sigmoid(z) * ws
        break;
      }
      case FuserKind::Concat:
        rmsnorm_forward(smat(c.ns, N, D), vec(c.rs, N), S, cvec(P + g_state, D), eps);
        U = cmat(sh.pe, N, D);
        linear_forward_acc(U, csmat(c.ns, N, D), csmat(P + w_c, D, D, 2 * D));  // left half: the s part
        break;
      case FuserKind::None: FBT_ASSERT(false, "FeedbackFuser::forward with fuser none");
    }
  }

  /// \brief From du (N, D) (zero on rows that did not use the fuser), accumulates ds (N, D) (may be null:
  /// detached), de (N, D) (the direct path of gated_add), sh.dpe, and the per-pass parameter gradients.
  void backward(ParamStore<T>& ps, const Shared& sh, const Cache& c, const Scratch& sc, const T* du, T* ds, T* de, const T* s,
                int N) const {
    const T* P = ps.values();
    T* G = ps.grads();
    const std::size_t ND = std::size_t(N) * D;
    auto dU = csmat(du, N, D);
    switch (kind) {
      case FuserKind::Glu: {
        // u = a * sigmoid(pe):  da = du sigmoid(pe),  dpe += du a sigmoid' ;  a = W_U s
        zero(sc.t0, ND);
        sigmoid_gate_backward(smat(sc.t0, N, D), smat(sh.dpe, N, D), dU, csmat(c.a, N, D), csmat(sh.pe, N, D));
        linear_backward(ds ? smat(ds, N, D) : no_grad<T>(N, D), smat(G + w_u, D, D), csmat(sc.t0, N, D), csmat(s, N, D),
                        csmat(P + w_u, D, D));
        break;
      }
      case FuserKind::GatedAdd: {
        // u = e + alpha * sigmoid(z) * ws
        mat(de, N, D) += dU;
        mat(sc.t2, N, D) = alpha * dU;
        zero(sc.t0, ND), zero(sc.t1, ND);  // t0 = d ws, t1 = d z
        sigmoid_gate_backward(smat(sc.t0, N, D), smat(sc.t1, N, D), csmat(sc.t2, N, D), csmat(c.ws, N, D), csmat(c.z, N, D));
        mat(sh.dpe, N, D) += cmat(sc.t1, N, D);  // z = pe + W_g[:, D:] ns
        zero(sc.t2, ND);                         // t2 = d ns
        auto NS = csmat(c.ns, N, D);
        linear_backward(smat(sc.t2, N, D), smat(G + w_g + D, D, D, 2 * D), csmat(sc.t1, N, D), NS, csmat(P + w_g + D, D, D, 2 * D));
        linear_backward(smat(sc.t2, N, D), smat(G + w_s, D, D), csmat(sc.t0, N, D), NS, csmat(P + w_s, D, D));
        if (ds) rmsnorm_backward(smat(ds, N, D), vec(G + g_state, D), csmat(sc.t2, N, D), csmat(s, N, D), cvec(P + g_state, D), cvec(c.rs, N));
        else rmsnorm_backward(smat(sc.t1, N, D), vec(G + g_state, D), csmat(sc.t2, N, D), csmat(s, N, D), cvec(P + g_state, D), cvec(c.rs, N));
        break;
      }
      case FuserKind::Concat: {
        // u = pe + W_c[:, :D] ns
        mat(sh.dpe, N, D) += dU;
        zero(sc.t0, ND);
        linear_backward(smat(sc.t0, N, D), smat(G + w_c, D, D, 2 * D), dU, csmat(c.ns, N, D), csmat(P + w_c, D, D, 2 * D));
        zero(sc.t1, ND);
        rmsnorm_backward(ds ? smat(ds, N, D) : smat(sc.t1, N, D), vec(G + g_state, D), csmat(sc.t0, N, D), csmat(s, N, D),
                         cvec(P + g_state, D), cvec(c.rs, N));
        break;
      }
      case FuserKind::None: break;
    }
  }

  /// \brief From sh.dpe (summed over passes), accumulates de (N, D) and the e-side parameter gradients.
  void shared_backward(ParamStore<T>& ps, const Shared& sh, const T* e, T* de, int N) const {
    const T* P = ps.values();
    T* G = ps.grads();
    auto dPE = csmat(sh.dpe, N, D);
    auto NG = csmat(sh.ng, N, D);
    zero(sh.dng, std::size_t(N) * D);
    switch (kind) {
      case FuserKind::Glu: linear_backward(smat(sh.dng, N, D), smat(G + w_g, D, D), dPE, NG, csmat(P + w_g, D, D)); break;
      case FuserKind::GatedAdd:
        linear_backward(smat(sh.dng, N, D), smat(G + w_g, D, D, 2 * D), dPE, NG, csmat(P + w_g, D, D, 2 * D));
        bias_backward(vec(G + b_g, D), dPE);
        break;
      case FuserKind::Concat:
        linear_backward(smat(sh.dng, N, D), smat(G + w_c + D, D, D, 2 * D), dPE, NG, csmat(P + w_c + D, D, D, 2 * D));
        break;
      case FuserKind::None: return;
    }
    rmsnorm_backward(smat(de, N, D), vec(G + g_gate, D), csmat(sh.dng, N, D), csmat(e, N, D), cvec(P + g_gate, D), cvec(sh.rg, N));
  }
};

}  // namespace fbt
