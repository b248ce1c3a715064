// fbt/layers/mlp.hpp: the SwiGLU MLP (Shazeer 2020; spec section 1), built from its own MlpSpec.
//
//   g = x Wg^T,  u = x Wu^T   (N, F);   h = silu(g) * u;   y += h Wd^T   (N, D)
// Parameters (under the block's scope, e.g. model.layers.{i}.mlp.): {gate,up,down}_proj.weight.
#pragma once

#include "common.hpp"

namespace fbt {

/// The sizes of one MLP.
struct MlpSpec {
  int hidden_size = 0;        ///< D
  int intermediate_size = 0;  ///< F
  double init_std = 0.02;     ///< gate_proj, up_proj
  double out_std = 0.02;      ///< down_proj (depth-scaled by the model)
};

template <class T> struct SwiGLU {
  using Scalar = T;
  using Spec = MlpSpec;
  Spec spec;
  int D = 0, F = 0;
  std::size_t wg = 0, wu = 0, wd = 0;

  struct Cache {
    T *g, *u;         // (N, F) each
    T* h;             // (N, F)  silu(g) * u: a temporary, recomputed by backward (so all layers share one)
    T *dh, *dg, *du;  // (N, F) each: backward's scratch (temporaries; null without grad)
  };
  using DecodeCache = Cache;  // a decoding step is the forward on R rows

  SwiGLU() = default;
  explicit SwiGLU(const Spec& s) : spec(s), D(s.hidden_size), F(s.intermediate_size) {
    FBT_ASSERT(D > 0 && F > 0, "SwiGLU: hidden_size and intermediate_size must be > 0");
  }

  void declare(const ParamRegistry<T>& r) {
    wg = r.add("gate_proj.weight", {F, D}, Init::Normal, spec.init_std);
    wu = r.add("up_proj.weight", {F, D}, Init::Normal, spec.init_std);
    wd = r.add("down_proj.weight", {D, F}, Init::Normal, spec.out_std);
  }
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    const std::size_t N = std::size_t(B) * Tn;
    Carver<T>& a = grad ? keep : temp;
    c.g = a.take(N * F), c.u = a.take(N * F), c.h = temp.take(N * F);
    c.dh = c.dg = c.du = nullptr;
    if (grad) c.dh = temp.take(N * F), c.dg = temp.take(N * F), c.du = temp.take(N * F);
  }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const { alloc(be, a, a, c, R, 1, false); }

  /// \brief y (N, D) += mlp(x); x (N, D) is the normalised input.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* y, const PassShape& s) const {
    const int N = s.N();
    {
      Bf16InputScope<T> once(x, std::size_t(N) * D);  // bf16: x rounded once for gate and up
      linear(be, c.g, x, w.value + wg, N, F, D, D, false);
      linear(be, c.u, x, w.value + wu, N, F, D, D, false);
    }
    be.swiglu_forward(c.h, c.g, c.u, std::size_t(N) * F);
    linear(be, y, c.h, w.value + wd, N, D, F, F, true);
  }

  /// \brief Given dy (N, D), accumulates dx (N, D) and the parameter gradients.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, const T* dy, T* dx, const T* x, const PassShape& s) const {
    const int N = s.N();
    const std::size_t NF = std::size_t(N) * F;
    be.zero(c.dg, NF), be.zero(c.du, NF);
    be.swiglu_forward(c.h, c.g, c.u, NF);  // recompute h (not kept per layer)
    linear_backward(be, c.dh, w.grad + wd, dy, c.h, w.value + wd, N, D, F, F, /*acc_dx=*/false);  // dh = dy Wd, written whole
    be.swiglu_backward(c.dg, c.du, c.dh, c.g, c.u, NF);
    Bf16InputScope<T> once(x, std::size_t(N) * D);  // bf16: x rounded once for both weight gradients
    linear_backward(be, dx, w.grad + wg, c.dg, x, w.value + wg, N, F, D, D);
    linear_backward(be, dx, w.grad + wu, c.du, x, w.value + wu, N, F, D, D);
  }

  /// \brief One decoding step on R rows: y (R, D) += mlp(x).
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, const T* x, T* y, const DecodeStep<T>& st) const {
    DecodeCache cc = c;
    forward(be, w, cc, x, y, PassShape{st.R, 1, nullptr, nullptr});
  }
};

}  // namespace fbt
