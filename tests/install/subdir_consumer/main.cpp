// Uses fbt::fbt (Eigen only) from a project that vendors fbt with add_subdirectory.
#include <cstdio>

#include <fbt/core/params.hpp>
#include <fbt/core/tensor.hpp>

int main() {
  fbt::ParamStore<double> store;
  store.add("wte", fbt::Shape{8, 4}, fbt::Init::Normal, 0.02);
  store.add("fuser", fbt::Shape{4, 8}, fbt::Init::ZeroIdentity);
  store.finalize();
  store.init(42);
  const bool size_ok = store.size() == 8 * 4 + 4 * 8;
  const bool fuser_ok = fbt::cmat(store.value("fuser"), 4, 8).sum() == 4.0;  // [0 | I]
  std::printf("fbt %s via add_subdirectory: ParamStore size %zu (expected 64)\n", FBT_VERSION_STRING, store.size());
  return (size_ok && fuser_ok) ? 0 : 1;
}
