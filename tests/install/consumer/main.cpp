// Uses an installed fbt through fbt::fbt (Eigen) and fbt::io (xtensor). Exit 0 when all checks pass.
#include <cstdio>

#include <fbt/core/params.hpp>
#include <fbt/core/tensor.hpp>
#include <xtensor/xarray.hpp>

int main() {
  fbt::ParamStore<float> store;
  store.add("w", fbt::Shape{3, 4}, fbt::Init::Normal, 0.02);
  store.add("g", fbt::Shape{4}, fbt::Init::Ones);
  store.finalize();
  store.init(1337);
  const bool size_ok = store.size() == 3 * 4 + 4;
  const bool gain_ok = fbt::cvec(store.value("g"), 4).sum() == 4.0f;
  const float w_sum = fbt::cmat(store.value("w"), 3, 4).sum();

  xt::xarray<float> a = {{1.0f, 2.0f}, {3.0f, 4.0f}};
  const bool xt_ok = a.size() == 4 && a(1, 0) == 3.0f;

  std::printf("fbt %s: ParamStore size %zu (expected 16), sum(w) %g, xarray size %zu\n", FBT_VERSION_STRING,
              store.size(), double(w_sum), a.size());
  return (size_ok && gain_ok && xt_ok) ? 0 : 1;
}
