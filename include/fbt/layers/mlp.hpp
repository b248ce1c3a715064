// fbt/layers/mlp.hpp: the SwiGLU MLP (Shazeer 2020; spec section 1).
//
//   g = x Wg^T,  u = x Wu^T   (N, F);   h = silu(g) * u;   y += h Wd^T   (N, D)
// Parameters: model.layers.{i}.mlp.{gate,up,down}_proj.weight.
#pragma once

#include "../model/config.hpp"
#include "../ops/activations.hpp"
#include "../ops/linear.hpp"
#include "common.hpp"

namespace fbt {

template <class T> struct SwiGLUMlp {
  using Scalar = T;
  int D = 0, F = 0;
  std::size_t wg = 0, wu = 0, wd = 0;

  struct Cache {
    T *g, *u;  // (N, F) each
    T* h;      // (N, F)  silu(g) * u: a temporary, recomputed by backward (so it may be shared by all layers)
  };
  struct Scratch {
    T *dh, *dg, *du;  // (N, F) each
  };

  SwiGLUMlp() = default;
  SwiGLUMlp(const ModelConfig& c) : D(c.hidden_size), F(c.intermediate_size) {}

  void declare(ParamStore<T>& ps, const std::string& prefix, double std, double out_std) {
    wg = ps.add(prefix + "gate_proj.weight", {F, D}, Init::Normal, std);
    wu = ps.add(prefix + "up_proj.weight", {F, D}, Init::Normal, std);
    wd = ps.add(prefix + "down_proj.weight", {D, F}, Init::Normal, out_std);
  }
  /// share: a cache whose temporary h this one reuses (null: allocate one).
  void alloc(Arena<T>& a, Cache& c, int B, int Tn, const Cache* share = nullptr) const {
    const std::size_t N = std::size_t(B) * Tn;
    c.g = a.take(N * F), c.u = a.take(N * F), c.h = share ? share->h : a.take(N * F);
  }
  void alloc_scratch(Arena<T>& a, Scratch& s, int B, int Tn) const {
    const std::size_t N = std::size_t(B) * Tn;
    s.dh = a.take(N * F), s.dg = a.take(N * F), s.du = a.take(N * F);
  }

  /// \brief y (N, D) += mlp(x); x (N, D) is the normalised input.
  void forward(const ParamStore<T>& ps, Cache& c, const T* x, T* y, int N) const {
    const T* P = ps.values();
    auto X = csmat(x, N, D);
    linear_forward(smat(c.g, N, F), X, csmat(P + wg, F, D));
    linear_forward(smat(c.u, N, F), X, csmat(P + wu, F, D));
    swiglu_forward(smat(c.h, N, F), csmat(c.g, N, F), csmat(c.u, N, F));
    linear_forward_acc(smat(y, N, D), csmat(c.h, N, F), csmat(P + wd, D, F));
  }

  /// \brief Given dy (N, D), accumulates dx (N, D) and the parameter gradients.
  void backward(ParamStore<T>& ps, const Cache& c, const Scratch& sc, const T* dy, T* dx, const T* x, int N) const {
    const T* P = ps.values();
    T* G = ps.grads();
    zero(sc.dh, std::size_t(N) * F), zero(sc.dg, std::size_t(N) * F), zero(sc.du, std::size_t(N) * F);
    swiglu_forward(smat(c.h, N, F), csmat(c.g, N, F), csmat(c.u, N, F));  // recompute h (not kept per layer)
    linear_backward(smat(sc.dh, N, F), smat(G + wd, D, F), csmat(dy, N, D), csmat(c.h, N, F), csmat(P + wd, D, F));
    swiglu_backward(smat(sc.dg, N, F), smat(sc.du, N, F), csmat(sc.dh, N, F), csmat(c.g, N, F), csmat(c.u, N, F));
    auto X = csmat(x, N, D);
    linear_backward(smat(dx, N, D), smat(G + wg, F, D), csmat(sc.dg, N, F), X, csmat(P + wg, F, D));
    linear_backward(smat(dx, N, D), smat(G + wu, F, D), csmat(sc.du, N, F), X, csmat(P + wu, F, D));
  }
};

}  // namespace fbt
