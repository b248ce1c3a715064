// fbt/layers/glu_fuser.hpp: the paper's GLU fuser (arXiv:2608.08888 Eq. 4; spec section 2), fuser "glu".
//
//   u = (W_U s) * sigmoid(W_G N_g(e))          W_U, W_G (D, D); N_g an RMSNorm with gain
// The gate's pre-activation pre = W_G N_g(e) depends on e only: it is the fuser's precompute, computed
// once per step (and tabulated per token by the decoder), its gradient summed over the passes.
// Init (knob glu_init): default W_U = I, W_G ~ N(0, 1e-6/D) (the gate starts at 1/2 for every e);
// fan_in: both N(0, 1/D); identity_both: both I.
// Parameters (under model.feedback.): w_u.weight (D,D), w_g.weight (D,D), gate_norm.weight (D).
#pragma once

#include <algorithm>
#include <cmath>

#include "fuser.hpp"

namespace fbt {

enum class GluInit { Default, FanIn, IdentityBoth };

template <class T> struct GluFuser {
  using Scalar = T;
  static constexpr const char* name = "glu";
  int D = 0;
  GluInit init = GluInit::Default;
  RMSNorm<T> gate_norm;           // N_g
  std::size_t w_u = 0, w_g = 0;   // offsets of W_U, W_G

  struct PreCache {
    T *ng, *rg;  // (N, D), (N)  N_g(e) and its rstd
    T* dng;      // (N, D)  backward's scratch (temporary)
  };
  struct Cache {
    T* a;   // (N, D)  W_U s
    T* da;  // (N, D)  backward's scratch (temporary)
  };

  GluFuser() = default;
  /// Option "init" (fuser_options.init; legacy config field glu_init); a fuser built by hand without it: default.
  explicit GluFuser(const FuserArgs& a) : GluFuser(a, a.options.has("init") ? glu_init_of(a.options.get_string("init")) : GluInit::Default) {}
  GluFuser(const FuserArgs& a, GluInit gi) : D(a.hidden_size), init(gi), gate_norm(a.hidden_size, a.rms_norm_eps) {}

  static void declare_options(OptionList& o) {
    o.add_string("init", "default", {"default", "fan_in", "identity_both"},
                 "default: W_U = I, W_G ~ N(0, 1e-6/D); fan_in: both N(0, 1/D); identity_both: both I");
  }
  static GluInit glu_init_of(const std::string& s) { return s == "fan_in" ? GluInit::FanIn : s == "identity_both" ? GluInit::IdentityBoth : GluInit::Default; }
  static const char* glu_init_str(GluInit g) { return g == GluInit::FanIn ? "fan_in" : g == GluInit::IdentityBoth ? "identity_both" : "default"; }
  /// The options a checkpoint records (describe_model).
  Options options() const { return {{"init", OptionValue::of_string(glu_init_str(init))}}; }

  void declare(const ParamRegistry<T>& r) {
    const Shape DD{D, D};
    const double fan_in = 1.0 / std::sqrt(double(D));
    w_u = r.add("w_u.weight", DD, init == GluInit::FanIn ? Init::Normal : Init::Identity, fan_in);
    if (init == GluInit::IdentityBoth) w_g = r.add("w_g.weight", DD, Init::Identity);
    else if (init == GluInit::FanIn) w_g = r.add("w_g.weight", DD, Init::Normal, fan_in);
    else w_g = r.add("w_g.weight", DD, Init::Normal, std::sqrt(1e-6 / D));
    gate_norm.declare(r.scope("gate_norm"));
  }

  // ---- the e-only precompute: pre = W_G N_g(e) ------------------------------------------------------
  int pre_width() const { return D; }
  template <class Be> void alloc_pre(const Be&, Carver<T>& keep, Carver<T>& temp, PreCache& c, int N, bool grad) const {
    c.ng = keep.take(std::size_t(N) * D), c.rg = keep.take(N), c.dng = grad ? temp.take(std::size_t(N) * D) : nullptr;
  }
  template <class Be> void pre_forward(Be& be, const Weights<T>& w, PreCache& c, const T* e, T* pre, int N) const {
    gate_norm.forward(be, w, c.ng, c.rg, e, N);
    linear(be, pre, c.ng, w.value + w_g, N, D, D, D, false);
  }
  template <class Be> void pre_backward(Be& be, const Weights<T>& w, const PreCache& c, const T* e, const T* dpre, T* de, int N) const {
    be.zero(c.dng, std::size_t(N) * D);
    linear_backward(be, c.dng, w.grad + w_g, dpre, c.ng, w.value + w_g, N, D, D, D);
    gate_norm.backward(be, w, de, c.dng, e, c.rg, N);
  }

  // ---- per pass: u = (W_U s) * sigmoid(pre) ---------------------------------------------------------
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    c.a = keep.take(std::size_t(N) * D), c.da = grad ? temp.take(std::size_t(N) * D) : nullptr;
  }
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* s, const T*, const T* pre, T* u, int N) const {
    linear(be, c.a, s, w.value + w_u, N, D, D, D, false);
    be.sigmoid_gate_forward(u, c.a, pre, std::size_t(N) * D);
  }
  /// u = a * sigmoid(pre):  da = du sigmoid(pre),  dpre += du a sigmoid'(pre);  a = W_U s.
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache& c, const T* s, const T*, const T* pre, const T* du, T* ds, T*, T* dpre, int N) const {
    be.zero(c.da, std::size_t(N) * D);
    be.sigmoid_gate_backward(c.da, dpre, du, c.a, pre, std::size_t(N) * D);
    linear_backward(be, ds, w.grad + w_u, c.da, s, w.value + w_u, N, D, D, D);
  }

  /// The gate sigmoid(pre) over fed-back rows: mean and spread.
  template <class Be> FuserStats diagnostics(Be& be, const Weights<T>&, const Cache&, const FuserPass<T>& p) const {
    const auto m = be.masked_sigmoid_moments(p.pre, p.mask, p.N, D);
    const double cnt = double(p.rows) * D, mean = m.first / cnt;
    FuserStats st;
    st.gate_mean = mean, st.gate_std = std::sqrt(std::max(0.0, m.second / cnt - mean * mean));
    return st;
  }
};

}  // namespace fbt
