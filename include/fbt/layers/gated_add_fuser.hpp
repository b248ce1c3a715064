// fbt/layers/gated_add_fuser.hpp: the gated additive fuser of spec section 2, fuser "gated_add".
//
//   u = e + alpha * sigmoid(W_g [N_g(e); N_s(s)] + b) * (W_s N_s(s))     W_g (D, 2D), W_s (D, D), b (D)
// The e part of the gate, pre = W_g[:, :D] N_g(e) + b, is the fuser's precompute. W_s = 0 at init makes
// the model exactly the plain one (under input_norm all); alpha is a config scalar (gated_add_alpha).
// Parameters (under model.feedback.): w_g.weight (D,2D), w_g.bias (D), w_s.weight (D,D),
// gate_norm.weight, state_norm.weight (D).
#pragma once

#include <cmath>

#include "fuser.hpp"

namespace fbt {

template <class T> struct GatedAddFuser {
  using Scalar = T;
  static constexpr const char* name = "gated_add";
  int D = 0;
  double alpha_value = 0.1;  ///< alpha (kept in double: it is recorded in the config as given)
  double init_std = 0.02;
  RMSNorm<T> gate_norm, state_norm;      // N_g, N_s
  std::size_t w_g = 0, b_g = 0, w_s = 0;

  struct PreCache {
    T *ng, *rg;  // (N, D), (N)  N_g(e), rstd
    T* dng;      // (N, D)  backward's scratch (temporary)
  };
  struct Cache {
    T *ns, *rs;      // (N, D), (N)  N_s(s), rstd
    T *z, *ws;       // (N, D) each  gate pre-activation, W_s N_s(s)
    T *t0, *t1, *t2; // (N, D) each  backward's scratch (temporary)
  };

  GatedAddFuser() = default;
  /// Option "alpha" (fuser_options.alpha; legacy config field gated_add_alpha); built by hand without it: 0.1.
  explicit GatedAddFuser(const FuserArgs& a) : GatedAddFuser(a, a.options.has("alpha") ? a.options.get_real("alpha") : 0.1) {}
  GatedAddFuser(const FuserArgs& a, double gated_add_alpha)
      : D(a.hidden_size), alpha_value(gated_add_alpha), init_std(a.initializer_range), gate_norm(a.hidden_size, a.rms_norm_eps),
        state_norm(a.hidden_size, a.rms_norm_eps) {}

  static void declare_options(OptionList& o) { o.add_real("alpha", 0.1, -1e9, 1e9, "alpha: the scale of the gated state term"); }
  /// The options a checkpoint records (describe_model).
  Options options() const { return {{"alpha", OptionValue::of_real(alpha_value)}}; }

  void declare(const ParamRegistry<T>& r) {
    w_g = r.add("w_g.weight", {D, 2 * D}, Init::Normal, init_std);
    b_g = r.add("w_g.bias", {D}, Init::Zeros);
    w_s = r.add("w_s.weight", {D, D}, Init::Zeros);  // exactly the plain model at init
    gate_norm.declare(r.scope("gate_norm"));
    state_norm.declare(r.scope("state_norm"));
  }

  // ---- precompute: pre = W_g[:, :D] N_g(e) + b  (the left half of W_g acts on N_g(e)) ----------------
  int pre_width() const { return D; }
  template <class Be> void alloc_pre(const Be&, Carver<T>& keep, Carver<T>& temp, PreCache& c, int N, bool grad) const {
    c.ng = keep.take(std::size_t(N) * D), c.rg = keep.take(N), c.dng = grad ? temp.take(std::size_t(N) * D) : nullptr;
  }
  template <class Be> void pre_forward(Be& be, const Weights<T>& w, PreCache& c, const T* e, T* pre, int N) const {
    gate_norm.forward(be, w, c.ng, c.rg, e, N);
    linear(be, pre, c.ng, w.value + w_g, N, D, D, 2 * D, false);
    be.bias_forward(pre, w.value + b_g, N, D);
  }
  template <class Be> void pre_backward(Be& be, const Weights<T>& w, const PreCache& c, const T* e, const T* dpre, T* de, int N) const {
    be.zero(c.dng, std::size_t(N) * D);
    linear_backward(be, c.dng, w.grad + w_g, dpre, c.ng, w.value + w_g, N, D, D, 2 * D);
    be.bias_backward(w.grad + b_g, dpre, N, D);
    gate_norm.backward(be, w, de, c.dng, e, c.rg, N);
  }

  // ---- per pass --------------------------------------------------------------------------------------
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    const std::size_t ND = std::size_t(N) * D;
    c.ns = keep.take(ND), c.rs = keep.take(N), c.z = keep.take(ND), c.ws = keep.take(ND);
    c.t0 = c.t1 = c.t2 = nullptr;
    if (grad) c.t0 = temp.take(ND), c.t1 = temp.take(ND), c.t2 = temp.take(ND);
  }
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* s, const T* e, const T* pre, T* u, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    state_norm.forward(be, w, c.ns, c.rs, s, N);
    be.copy(c.z, pre, ND);
    linear(be, c.z, c.ns, w.value + w_g + D, N, D, D, 2 * D, true);  // right half: the s part
    linear(be, c.ws, c.ns, w.value + w_s, N, D, D, D, false);
    be.sigmoid_gate_forward(u, c.ws, c.z, ND);  // u = sigmoid(z) * ws
    be.axpby(u, T(1), e, T(alpha_value), ND);            // u = e + alpha * sigmoid(z) * ws
  }
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache& c, const T* s, const T*, const T*, const T* du, T* ds, T* de, T* dpre, int N) const {
    const std::size_t ND = std::size_t(N) * D;
    be.add(de, du, ND);                 // the direct path u = e + ...
    be.axpby(c.t2, T(alpha_value), du, T(0), ND);
    be.zero(c.t0, ND), be.zero(c.t1, ND);  // t0 = d ws, t1 = d z
    be.sigmoid_gate_backward(c.t0, c.t1, c.t2, c.ws, c.z, ND);
    be.add(dpre, c.t1, ND);             // z = pre + W_g[:, D:] ns
    be.zero(c.t2, ND);                  // t2 = d ns
    linear_backward(be, c.t2, w.grad + w_g + D, c.t1, c.ns, w.value + w_g + D, N, D, D, 2 * D);
    linear_backward(be, c.t2, w.grad + w_s, c.t0, c.ns, w.value + w_s, N, D, D, D);
    state_norm.backward(be, w, ds ? ds : c.t1, c.t2, s, c.rs, N);  // detached: the gain's gradient only
  }

  /// ||u - e|| / ||e|| over fed-back rows: how much the state moves the input.
  template <class Be> FuserStats diagnostics(Be& be, const Weights<T>&, const Cache&, const FuserPass<T>& p) const {
    return feedback_ratio(be, p, p.e, D);
  }
};

}  // namespace fbt
