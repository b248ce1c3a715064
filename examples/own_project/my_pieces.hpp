// examples/own_project/my_pieces.hpp: a researcher's own pieces, written outside the library against its
// contracts, with no library edit: a fuser and a block with an option each, a decoding policy and an optimizer.
// main.cpp gives them to fbt::cli_main, which makes every `fbt` subcommand take them; plugin.cpp registers them
// in a plugin that the stock `fbt` command loads (--plugin). It includes only the contracts it writes against.
#pragma once

#include <cmath>
#include <string>

#include "fbt/decode/policy.hpp"
#include "fbt/layers/contract.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/train/optimizer.hpp"

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
// gate, 2 sigmoid(g) (block "gated_attn", option gate_init: the gate's value at init, 1 = the plain block).
// Only attention's output stage changes (fbt/layers/attention.hpp "stages"): y += o (s * Wo)^T with
// s = 2 sigmoid(g) (D) scaling the rows of o_proj, which is s * (o Wo^T); backend ops only, so every backend runs it --
template <class T> struct GatedOutput : fbt::OutProjection<T> {
  using Base = fbt::OutProjection<T>;
  using Base::Base, Base::D, Base::QD, Base::wo;
  double gate_init = 1.0;
  std::size_t g = 0;                                        // offset of g (D), initialised so that 2 sigmoid(g) = gate_init
  struct Cache : Base::Cache { T *sg, *ws, *dws, *ds; };    // (D) sigmoid(g), (D, QD) s * Wo; backward's scratch (D, QD), (D)
  using DecodeCache = Cache;
  void declare(const fbt::ParamRegistry<T>& r) { Base::declare(r), g = r.add("gate.weight", {D}, fbt::Init::Constant, std::log(gate_init / (2 - gate_init))); }
  template <class Be> void alloc(const Be&, fbt::Carver<T>& keep, fbt::Carver<T>& temp, Cache& c, int, bool) const {
    c.sg = keep.take(D), c.ws = keep.take(std::size_t(D) * QD), c.dws = temp.take(std::size_t(D) * QD), c.ds = temp.take(D);
  }
  template <class Be> void alloc_decode(const Be& be, fbt::Carver<T>& a, Cache& c, int R) const { alloc(be, a, a, c, R, false); }
  template <class Be> void forward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T*, const T* o, T* y, int N) const {
    be.sigmoid(c.sg, w.value + g, D), be.scale_groups(c.ws, w.value + wo, c.sg, 1, D, QD), be.scale(c.ws, 2.0, std::size_t(D) * QD);
    fbt::linear(be, y, o, c.ws, N, D, QD, QD, true);
  }
  template <class Be> void decode(Be& be, const fbt::Weights<T>& w, const Cache& c, const T* x, const T* o, T* y, int R) const { forward(be, w, c, x, o, y, R); }
  /// d_o += dy (s * Wo);  d(s * Wo) = dy^T o;  dWo += that * s;  ds = sum over QD of that * Wo;  dg += ds * 2 sigmoid'(g).
  template <class Be> void backward(Be& be, const fbt::Weights<T>& w, const Cache& c, const T*, const T* o, const T* dy, T*, T* d_o, int N) const {
    be.zero(c.dws, std::size_t(D) * QD), be.zero(c.ds, D), fbt::linear_backward(be, d_o, c.dws, dy, o, c.ws, N, D, QD, QD);
    be.scale(c.dws, 2.0, std::size_t(D) * QD), be.scale_groups_backward(w.grad + wo, c.ds, c.dws, w.value + wo, c.sg, 1, D, QD);
    be.sigmoid_backward(w.grad + g, c.ds, c.sg, D);
  }
};

template <class T> struct GatedBlock : fbt::PreNormBlock<fbt::Attention<T, fbt::QkvProjection<T>, fbt::AttentionKernel<T>, GatedOutput<T>>, fbt::SwiGLU<T>> {
  using Base = fbt::PreNormBlock<fbt::Attention<T, fbt::QkvProjection<T>, fbt::AttentionKernel<T>, GatedOutput<T>>, fbt::SwiGLU<T>>;
  static constexpr const char* name = "gated_attn";
  static void declare_options(fbt::OptionList& o) { o.add_real("gate_init", 1.0, 0.01, 1.99, "the attention gate 2 sigmoid(g) at init"); }
  GatedBlock() = default;
  explicit GatedBlock(const fbt::LayerSpec& s) : Base(s) { this->attn.out.gate_init = s.options.has("gate_init") ? s.options.get_real("gate_init") : 1.0; }
  fbt::Options options() const { return {{"gate_init", fbt::OptionValue::of_real(this->attn.out.gate_init)}}; }
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
