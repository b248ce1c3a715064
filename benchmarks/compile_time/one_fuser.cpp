// benchmarks/compile_time/one_fuser.cpp: the file of a researcher's first idea: one fuser (u = e + W s) and the
// `fbt` command with it (every subcommand: fbt::cli_main). What benchmarks/compile_time.sh compiles, against the
// headers only and against fbt::runtime (docs/PERFORMANCE.md, "Compile time of a user file").
#include "fbt/layers/fuser.hpp"
#include "fbt/ops/linear.hpp"

template <class T> struct AddFuser {
  using Scalar = T;
  static constexpr const char* name = "add";
  int D = 0;
  std::size_t w = 0;  // offset of W (D, D)
  struct Cache {};
  explicit AddFuser(const fbt::FuserArgs& a) : D(a.hidden_size) {}
  void declare(const fbt::ParamRegistry<T>& r) { w = r.add("w_a.weight", {D, D}, fbt::Init::Zeros); }
  template <class Be> void alloc(const Be&, fbt::Carver<T>&, fbt::Carver<T>&, Cache&, int, bool) const {}
  template <class Be> void forward(Be& be, const fbt::Weights<T>& wt, Cache&, const T* s, const T* e, const T*, T* u, int N) const {
    be.copy(u, e, std::size_t(N) * D);  // u = e + s W^T
    fbt::linear(be, u, s, wt.value + w, N, D, D, D, true);
  }
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& wt, const Cache&, const T* s, const T*, const T*, const T* du, T* ds, T* de, T*, int N) const {
    be.add(de, du, std::size_t(N) * D);
    fbt::linear_backward(be, ds, wt.grad + w, du, s, wt.value + w, N, D, D, D);
  }
};

#if defined(FBT_PLUGIN_BUILD)  // the same fuser as a plugin: compile with -DFBT_PLUGIN_BUILD -shared -fPIC
#include "fbt/plugin.hpp"
FBT_REGISTER_FUSER(AddFuser);
#else
#include "fbt/cli.hpp"
int main(int argc, char** argv) { return fbt::cli_main<AddFuser<float>>(argc, argv); }
#endif
