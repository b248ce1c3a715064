// tests/xt/test_views.cpp: xtensor views of fbt memory are zero-copy and row-major, like RowMap.
//
// STYLE.md ("Eigen and xtensor", condition 2) asks for this test: one buffer seen through Eigen
// (fbt::mat) and through xtensor (fbt::xt_view) must agree element by element, which can only hold
// if both are row-major. The ParamStore tests check that param_view/grad_view alias the store.
#include <gtest/gtest.h>

#include <fbt/core/params.hpp>
#include <fbt/core/tensor.hpp>
#include <fbt/xt/views.hpp>

#include <numeric>
#include <type_traits>

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_xt_views {

namespace {

TEST(XtView, AgreesWithRowMapElementWise) {
  constexpr int R = 3, C = 5;
  fbt::AlignedVector<float> buf(R * C);
  std::iota(buf.begin(), buf.end(), 0.0f);  // buf[k] = k, so element (i, j) must be i * C + j

  auto m = fbt::mat(buf.data(), R, C);     // Eigen (R, C), row-major
  auto x = fbt::xt_view(buf.data(), {R, C});  // xtensor (R, C), row-major
  ASSERT_EQ(x.dimension(), 2u);
  EXPECT_EQ(x.shape()[0], std::size_t(R));
  EXPECT_EQ(x.shape()[1], std::size_t(C));
  EXPECT_EQ(x.data(), buf.data());  // zero-copy
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      EXPECT_EQ(m(i, j), x(i, j)) << "at (" << i << ", " << j << ")";
      EXPECT_EQ(x(i, j), float(i * C + j));
    }

  // A write through either view is seen by the other.
  x(1, 2) = -1.0f;
  EXPECT_EQ(m(1, 2), -1.0f);
  m(2, 4) = -2.0f;
  EXPECT_EQ(x(2, 4), -2.0f);
}

TEST(XtView, SlicesAnNdBufferLikeNumpy) {
  // (P, B, C) = (2, 3, 4): xt::view(x, p) is the (B, C) block at offset p * B * C, i.e. mat(p * 12, 3, 4).
  fbt::AlignedVector<double> buf(2 * 3 * 4);
  std::iota(buf.begin(), buf.end(), 0.0);
  auto x = fbt::xt_view(buf.data(), {2, 3, 4});
  auto slab = xt::view(x, 1, xt::all(), xt::all());
  auto m = fbt::cmat(buf.data() + 12, 3, 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(slab(i, j), m(i, j));
}

TEST(XtView, ConstViewIsReadOnly) {
  fbt::AlignedVector<float> buf(6, 1.5f);
  auto cx = fbt::cxt_view(buf.data(), {2, 3});
  EXPECT_EQ(cx(1, 2), 1.5f);
  static_assert(std::is_const<std::remove_reference_t<decltype(cx(0, 0))>>::value, "cxt_view must be read-only");
  static_assert(std::is_same<decltype(cx), fbt::XtView<const float>>::value, "XtView<const T> names the const view");
}

TEST(ParamView, HasTheRegisteredShapeAndAliasesTheStore) {
  fbt::ParamStore<float> store;
  store.add("model.norm.weight", {7}, fbt::Init::Ones);
  store.add("w", {3, 4}, fbt::Init::Zeros);
  store.finalize();
  store.init(1);

  auto w = fbt::param_view(store, "w");
  ASSERT_EQ(w.dimension(), 2u);
  EXPECT_EQ(w.shape()[0], 3u);
  EXPECT_EQ(w.shape()[1], 4u);
  EXPECT_EQ(w.data(), store.value("w"));

  w(2, 1) = 42.0f;  // write via xtensor ...
  EXPECT_EQ(store.value("w")[2 * 4 + 1], 42.0f);                // ... read via the store
  EXPECT_EQ(fbt::mat(store.value("w"), 3, 4)(2, 1), 42.0f);    // ... and via Eigen

  auto g = fbt::grad_view(store, "w");
  g(0, 3) = 0.5f;
  EXPECT_EQ(store.grad("w")[3], 0.5f);
  EXPECT_EQ(store.value("w")[3], 0.0f);  // grads are a separate buffer

  const auto& cstore = store;
  auto cw = fbt::param_view(cstore, "w");
  auto cg = fbt::grad_view(cstore, "w");
  EXPECT_EQ(cw(2, 1), 42.0f);
  EXPECT_EQ(cg(0, 3), 0.5f);
  EXPECT_EQ(fbt::param_view(store, "model.norm.weight")(6), 1.0f);
}

TEST(ParamView, UnknownNameThrows) {
  fbt::ParamStore<double> store;
  store.add("w", {2, 2}, fbt::Init::Identity);
  store.finalize();
  EXPECT_THROW(fbt::param_view(store, "nope"), fbt::Error);
}

}  // namespace

}  // namespace test_xt_views
