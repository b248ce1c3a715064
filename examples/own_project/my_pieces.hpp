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
