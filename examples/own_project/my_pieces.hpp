// examples/own_project/my_pieces.hpp: a researcher's own pieces, written outside the library against its
// contracts, with no library edit: a fuser with an option, a decoding policy and an optimizer. main.cpp
// gives them to fbt::cli_main, which makes every `fbt` subcommand take them.
#pragma once

#include <cmath>
#include <string>

#include "fbt/fbt.hpp"

// ---- a fuser: u = e + B (A s), A (r, D), B (D, r): a rank-r state map (fuser "lowrank", option rank) ----
template <class T> struct LowRankFuser {
  using Scalar = T;
  static constexpr const char* name = "lowrank";
  int D = 0, r = 0;
  std::size_t a = 0, b = 0;  // offsets of A (r, D) and B (D, r)

  struct Cache {
    T* z;   // (N, r)  A s
    T* dz;  // (N, r)  backward's scratch (temporary)
  };

  /// Its option: --fuser.rank 8 (checked: an integer in [1, 1024]); recorded in the checkpoint.
  static void declare_options(fbt::OptionList& o) { o.add_int("rank", 8, 1, 1024, "rank of the state map B A"); }
  explicit LowRankFuser(const fbt::FuserArgs& args) : D(args.hidden_size), r(int(args.options.get_int("rank"))) {}
  fbt::Options options() const { return {{"rank", fbt::OptionValue::of_int(r)}}; }

  void declare(const fbt::ParamRegistry<T>& reg) {
    a = reg.add("w_a.weight", {r, D}, fbt::Init::Normal, 1.0 / std::sqrt(double(D)));
    b = reg.add("w_b.weight", {D, r}, fbt::Init::Zeros);  // the model starts as the plain one
  }
  template <class Be> void alloc(const Be&, fbt::Carver<T>& keep, fbt::Carver<T>& temp, Cache& c, int N, bool grad) const {
    c.z = keep.take(std::size_t(N) * r), c.dz = grad ? temp.take(std::size_t(N) * r) : nullptr;
  }
  /// z (N, r) = s A^T;  u (N, D) = e + z B^T.
  template <class Be> void forward(Be& be, const fbt::Weights<T>& w, Cache& c, const T* s, const T* e, const T*, T* u, int N) const {
    fbt::linear(be, c.z, s, w.value + a, N, r, D, D, false);
    be.copy(u, e, std::size_t(N) * D);
    fbt::linear(be, u, c.z, w.value + b, N, D, r, r, /*acc=*/true);
  }
  /// de += du;  dz = du B, dB += du^T z;  ds += dz A (skipped when detached), dA += dz^T s.
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T* s, const T*, const T*, const T* du, T* ds, T* de, T*, int N) const {
    be.add(de, du, std::size_t(N) * D);
    be.zero(c.dz, std::size_t(N) * r);
    fbt::linear_backward(be, c.dz, w.grad + b, du, c.z, w.value + b, N, D, r, r);
    fbt::linear_backward(be, ds, w.grad + a, c.dz, s, w.value + a, N, r, D, D);
  }
};

// ---- a block: the standard pre-norm block whose attention output is scaled by a learned per-channel
// gate, 2 sigmoid(g) (block "gated_attn", option gate_init: the gate's value at init, 1 = the plain block) --
template <class T> struct GatedAttention : fbt::CausalSelfAttention<T> {
  using Base = fbt::CausalSelfAttention<T>;
  using Base::Base;
  double gate_init = 1.0;
  std::size_t g = 0;  // offset of g (D)

  struct Cache : Base::Cache {
    T* t;   // (N, D)  the ungated attention output
    T* dt;  // (N, D)  backward's scratch (temporary)
  };
  struct DecodeCache : Base::DecodeCache {
    T* t;  // (R, D)
  };

  void declare(const fbt::ParamRegistry<T>& r) {
    Base::declare(r);
    g = r.add("gate.weight", {this->D}, fbt::Init::Constant, std::log(gate_init / (2.0 - gate_init)));  // 2 sigmoid(g) = gate_init
  }
  template <class Be> void alloc(const Be& be, fbt::Carver<T>& keep, fbt::Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    Base::alloc(be, keep, temp, c, B, Tn, grad);
    const std::size_t N = std::size_t(B) * Tn * this->D;
    c.t = grad ? keep.take(N) : temp.take(N), c.dt = grad ? temp.take(N) : nullptr;
  }
  template <class Be> void alloc_decode(const Be& be, fbt::Carver<T>& a, DecodeCache& c, int R) const {
    Base::alloc_decode(be, a, c, R);
    c.t = a.take(std::size_t(R) * this->D);
  }
  /// y (N, D) += 2 sigmoid(g) * t,  t = the standard attention's output (the CPU backend: plain loops).
  template <class Be> void forward(Be& be, const fbt::Weights<T>& w, Cache& c, const T* x, T* y, const fbt::PassShape& s) const {
    be.zero(c.t, std::size_t(s.N()) * this->D);
    Base::forward(be, w, c, x, c.t, s);
    gate_add(w, y, c.t, s.N());
  }
  /// dt = 2 sigmoid(g) * dy;  dg += sum over rows of dy * t * 2 sigmoid'(g);  then the attention's backward of dt.
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T* dy, T* dx, const T* x, const fbt::PassShape& s) const {
    const int N = s.N(), D = this->D;
    for (int d = 0; d < D; ++d) {
      const T sg = T(1) / (T(1) + std::exp(-w.value[g + d]));
      T acc = 0;
      for (int n = 0; n < N; ++n) {
        const std::size_t i = std::size_t(n) * D + d;
        c.dt[i] = T(2) * sg * dy[i];
        acc += dy[i] * c.t[i];
      }
      w.grad[g + d] += acc * T(2) * sg * (T(1) - sg);
    }
    Base::backward(be, w, c, c.dt, dx, x, s);
  }
  template <class Be> void decode(Be& be, const fbt::Weights<T>& w, const DecodeCache& c, const T* x, T* y, const fbt::DecodeStep<T>& st) const {
    be.zero(c.t, std::size_t(st.R) * this->D);
    Base::decode(be, w, c, x, c.t, st);
    gate_add(w, y, c.t, st.R);
  }

 private:
  void gate_add(const fbt::Weights<T>& w, T* y, const T* t, int N) const {
    const int D = this->D;
    for (int d = 0; d < D; ++d) {
      const T gate = T(2) / (T(1) + std::exp(-w.value[g + d]));
      for (int n = 0; n < N; ++n) y[std::size_t(n) * D + d] += gate * t[std::size_t(n) * D + d];
    }
  }
};

template <class T> struct GatedBlock : fbt::PreNormBlock<GatedAttention<T>, fbt::SwiGLU<T>> {
  using Base = fbt::PreNormBlock<GatedAttention<T>, fbt::SwiGLU<T>>;
  static constexpr const char* name = "gated_attn";
  static void declare_options(fbt::OptionList& o) { o.add_real("gate_init", 1.0, 0.01, 1.99, "the attention gate 2 sigmoid(g) at init"); }
  GatedBlock() = default;
  explicit GatedBlock(const fbt::LayerSpec& s) : Base(s) { this->attn.gate_init = s.options.has("gate_init") ? s.options.get_real("gate_init") : 1.0; }
  fbt::Options options() const { return {{"gate_init", fbt::OptionValue::of_real(this->attn.gate_init)}}; }
};

// ---- a decoding policy: soft for the first n new tokens, then standard ("soft_first(n)") ---------------
struct SoftFirstPolicy {
  static constexpr const char* name = "soft_first";
  int n = 8;
  explicit SoftFirstPolicy(const std::string& arg) {
    if (arg.empty()) return;
    if (arg.find_first_not_of("0123456789") != std::string::npos || arg.size() > 6)
      throw fbt::Error("decoding mode soft_first(" + arg + "): n must be a non-negative integer");
    n = std::stoi(arg);
  }
  int prefill_passes() const { return 1; }
  bool feeds_back() const { return true; }
  bool feed(const fbt::PolicyStep& s) const { return s.generated < n; }
  std::string describe() const { return "soft_first(" + std::to_string(n) + ")"; }
};

// ---- an optimizer: SGD with momentum (optimizer "sgdm", option momentum); its velocity lives in the
// store's first moment buffer (saved and resumed with the checkpoint) ----------------------------------
struct SgdMomentum {
  static constexpr const char* name = "sgdm";
  double momentum = 0.9;
  static void declare_options(fbt::OptionList& o) { o.add_real("momentum", 0.9, 0.0, 0.999, "velocity decay"); }
  explicit SgdMomentum(const fbt::OptimizerArgs& a) : momentum(a.options.get_real("momentum")) {}
  template <class T> void step(fbt::ParamStore<T>& ps, const fbt::OptimizerStep& s) {
    T* w = ps.values();
    const T* g = ps.grads();
    T* v = ps.adam_m();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      v[i] = T(momentum) * v[i] + g[i];
      w[i] -= T(s.lr) * v[i];
    }
    ++ps.step;
  }
};
