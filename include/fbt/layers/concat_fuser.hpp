// fbt/layers/concat_fuser.hpp: the concatenation fuser of spec section 2, fuser "concat".
//
//   u = W_c [N_s(s); N_g(e)]          W_c (D, 2D), initialised [0 | I] (u = N_g(e) at init)
// The e part, pre = W_c[:, D:] N_g(e), is the fuser's precompute.
// Parameters (under model.feedback.): w_c.weight (D,2D), gate_norm.weight, state_norm.weight (D).
#pragma once

#include <cmath>

#include "fuser.hpp"

namespace fbt {

template <class T> struct ConcatFuser {
  using Scalar = T;
  static constexpr const char* name = "concat";
  int D = 0;
  RMSNorm<T> gate_norm, state_norm;  // N_g, N_s
  std::size_t w_c = 0;

  struct PreCache {
    T *ng, *rg;  // (N, D), (N)
    T* dng;      // (N, D)  backward's scratch (temporary)
  };
  struct Cache {
    T *ns, *rs;  // (N, D), (N)  N_s(s), rstd
    T *t0, *t1;  // (N, D) each  backward's scratch (temporary)
  };

  ConcatFuser() = default;
  explicit ConcatFuser(const FuserArgs& a) : D(a.hidden_size), gate_norm(a.hidden_size, a.rms_norm_eps), state_norm(a.hidden_size, a.rms_norm_eps) {}

  void declare(const ParamRegistry<T>& r) {
    w_c = r.add("w_c.weight", {D, 2 * D}, Init::ZeroIdentity);  // [0 | I]: selects N_g(e) at init
    gate_norm.declare(r.scope("gate_norm"));
    state_norm.declare(r.scope("state_norm"));
  }

  // ---- precompute: pre = W_c[:, D:] N_g(e)  (the right half acts on N_g(e)) ---------------------------
  int pre_width() const { return D; }
  template <class Be> void alloc_pre(const Be&, Carver<T>& keep, Carver<T>& temp, PreCache& c, int N, bool grad) const {
    c.ng = keep.take(std::size_t(N) * D), c.rg = keep.take(N), c.dng = grad ? temp.take(std::size_t(N) * D) : nullptr;
  }
  template <class Be> void pre_forward(Be& be, const Weights<T>& w, PreCache& c, const T* e, T* pre, int N) const {
    gate_norm.forward(be, w, c.ng, c.rg, e, N);
    linear(be, pre, c.ng, w.value + w_c + D, N, D, D, 2 * D, false);
  }
  template <class Be> void pre_backward(Be& be, const Weights<T>& w, const PreCache& c, const T* e, const T* dpre, T* de, int N) const {
    be.zero(c.dng, std::size_t(N) * D);
    linear_backward(be, c.dng, w.grad + w_c + D, dpre, c.ng, w.value + w_c + D, N, D, D, 2 * D);
    gate_norm.backward(be, w, de, c.dng, e, c.rg, N);
  }

  // ---- per pass: u = pre + W_c[:, :D] N_s(s) ---------------------------------------------------------
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    const std::size_t ND = std::size_t(N) * D;
    c.ns = keep.take(ND), c.rs = keep.take(N);
    c.t0 = c.t1 = nullptr;
    if (grad) c.t0 = temp.take(ND), c.t1 = temp.take(ND);
  }
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* s, const T*, const T* pre, T* u, int N) const {
    state_norm.forward(be, w, c.ns, c.rs, s, N);
    be.copy(u, pre, std::size_t(N) * D);
    linear(be, u, c.ns, w.value + w_c, N, D, D, 2 * D, true);  // left half: the s part
  }
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache& c, const T* s, const T*, const T*, const T* du, T* ds, T*, T* dpre, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    be.add(dpre, du, ND);
    be.zero(c.t0, ND);
    linear_backward(be, c.t0, w.grad + w_c, du, c.ns, w.value + w_c, N, D, D, 2 * D);
    be.zero(c.t1, ND);
    state_norm.backward(be, w, ds ? ds : c.t1, c.t0, s, c.rs, N);  // detached: the gain's gradient only
  }

  /// ||u - pre|| / ||e|| over fed-back rows: the state's share of the input.
  template <class Be> FuserStats diagnostics(Be& be, const Weights<T>&, const Cache&, const FuserPass<T>& p) const {
    return feedback_ratio(be, p, p.pre, D);
  }
};

}  // namespace fbt
