// fbt/layers/head_gate.hpp: a per-head output gate for attention, written as an output stage
// (layers/attention.hpp): the example of replacing one stage without copying the others.
//
//   z = x W_g^T   (N, NH)          x: the attention's (normalised) input, W_g (NH, D): gate_proj.weight
//   g = sigmoid(z)                 one gate per token and head
//   o'_h = o_h * g_h               (N, NH*hs)  each head's attention output scaled by its gate
//   y += o' Wo^T                   (N, D)      the standard o_proj
// (the per-head variant of the output gate of Qiu et al. 2025, "Gated attention for large language
// models"). Backward: d o' = dy Wo;  d o += d o' * g,  dg = sum over hs of d o' * o;  dz = dg g (1 - g);
// dx += dz W_g,  dW_g += dz^T x. Every step is a backend op, so it runs on every backend.
// Parameters: the standard attention's plus self_attn.gate_proj.weight (NH, D).
#pragma once

#include "attention.hpp"

namespace fbt {

template <class T> struct HeadGateOutput : OutProjection<T> {
  using Base = OutProjection<T>;
  int NH = 0, hs = 0;
  std::size_t wg = 0;  // offset of gate_proj (NH, D)

  struct Cache : Base::Cache {
    T *g, *og;    // (N, NH) sigmoid(z), (N, NH*hs) the gated o
    T *dg, *dz;   // (N, NH) x 2  backward's scratch (temporaries; null without grad)
    T* dog;       // (N, NH*hs)
  };
  struct DecodeCache : Base::DecodeCache {
    T *g, *og;  // (R, NH), (R, NH*hs)
  };

  HeadGateOutput() = default;
  explicit HeadGateOutput(const AttentionSpec& s) : Base(s), NH(s.num_heads), hs(s.head_dim) {}

  void declare(const ParamRegistry<T>& r) {
    Base::declare(r);
    wg = r.add("gate_proj.weight", {NH, this->D}, Init::Normal, this->spec.init_std);
  }
  template <class Be> void alloc(const Be&, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    Carver<T>& a = grad ? keep : temp;
    c.g = a.take(std::size_t(N) * NH), c.og = a.take(std::size_t(N) * this->QD);
    c.dg = grad ? temp.take(std::size_t(N) * NH) : nullptr, c.dz = grad ? temp.take(std::size_t(N) * NH) : nullptr;
    c.dog = grad ? temp.take(std::size_t(N) * this->QD) : nullptr;
  }
  template <class Be> void alloc_decode(const Be&, Carver<T>& a, DecodeCache& c, int R) const {
    c.g = a.take(std::size_t(R) * NH), c.og = a.take(std::size_t(R) * this->QD);
  }

  /// \brief y (N, D) += (o * sigmoid(x W_g^T) per head) Wo^T.
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, const T* o, T* y, int N) const {
    gate(be, w, c.g, c.og, x, o, N);
    Base::forward(be, w, c, x, c.og, y, N);
  }
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, const T* x, const T* o, T* y, int R) const {
    gate(be, w, c.g, c.og, x, o, R);
    Base::decode(be, w, c, x, c.og, y, R);
  }
  /// \brief Accumulates d_o (N, NH*hs), dx (N, D) and the parameter gradients from dy (N, D).
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache& c, const T* x, const T* o, const T* dy, T* dx, T* d_o, int N) const {
    be.zero(c.dog, std::size_t(N) * this->QD), be.zero(c.dg, std::size_t(N) * NH), be.zero(c.dz, std::size_t(N) * NH);
    Base::backward(be, w, c, x, c.og, dy, dx, c.dog, N);
    be.scale_groups_backward(d_o, c.dg, c.dog, o, c.g, N, NH, hs);
    be.sigmoid_backward(c.dz, c.dg, c.g, std::size_t(N) * NH);
    linear_backward(be, dx, w.grad + wg, c.dz, x, w.value + wg, N, NH, this->D, this->D);
  }

 private:
  template <class Be> void gate(Be& be, const Weights<T>& w, T* g, T* og, const T* x, const T* o, int N) const {
    linear(be, g, x, w.value + wg, N, NH, this->D, this->D, false);  // z
    be.sigmoid(g, g, std::size_t(N) * NH);
    be.scale_groups(og, o, g, N, NH, hs);
  }
};

/// Attention with the per-head output gate: the standard projection and kernel, HeadGateOutput.
template <class T> using HeadGatedAttention = Attention<T, QkvProjection<T>, AttentionKernel<T>, HeadGateOutput<T>>;

}  // namespace fbt
