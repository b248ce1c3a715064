// fbt::Carver and the layouts built on it (core/arena.hpp): two-phase layout (count, then point),
// 64-byte aligned slices, a shared region of temporaries sized by its largest user, reuse without
// reallocation.
#include <gtest/gtest.h>

#include <cstdint>

#include "fbt/backend/cpu.hpp"
#include "fbt/core/arena.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_core_arena {

using namespace fbt;

TEST(Carver, SlicesAreAlignedDisjointAndCounted) {
  HostBuffer<float> buf;
  float *p = nullptr, *q = nullptr, *r = nullptr;
  auto layout = [&](Carver<float>& a) { p = a.take(3), q = a.take(17), r = a.take(1); };
  EXPECT_EQ(measure_layout<float>(layout), 16u + 32u + 16u);
  EXPECT_EQ(lay_out<float>(buf, layout), 16u + 32u + 16u);
  ASSERT_NE(p, nullptr);
  for (float* x : {p, q, r}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % 64, 0u);
  EXPECT_GE(q - p, 3);
  EXPECT_GE(r - q, 17);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(q[i], 0.0f) << "a fresh CPU buffer is zero-filled";
  const float* before = p;
  lay_out<float>(buf, layout);  // same size: no reallocation
  EXPECT_EQ(p, before);
}

TEST(Carver, RegionsShareTheirTemporaries) {
  // two users: each keeps its own slice and carves temporaries from the shared region, which takes the
  // larger of their two sizes and follows the kept slices
  HostBuffer<double> buf;
  double *k1 = nullptr, *k2 = nullptr, *t1 = nullptr, *t2 = nullptr, *t2b = nullptr;
  auto layout = [&](Regions<double>& r) {
    k1 = r.keep.take(5);
    Carver<double> a = r.temp();
    t1 = a.take(20);
    r.done(a);
    k2 = r.keep.take(3);
    Carver<double> b = r.temp();
    t2 = b.take(4), t2b = b.take(9);
    r.done(b);
  };
  EXPECT_EQ(measure_regions<double>(layout), 8u + 8u + 24u);  // keep 8 + 8; temporaries max(24, 8 + 16) = 24
  EXPECT_EQ(lay_out_regions<double>(buf, layout), 40u);
  EXPECT_EQ(t1, t2) << "the users' temporaries start at the same place";
  EXPECT_EQ(t1, k1 + 16) << "after the kept slices";
  EXPECT_EQ(k2, k1 + 8);
  EXPECT_EQ(t2b, t2 + 8);
  EXPECT_EQ(buf.size(), 40u);
}

}  // namespace test_core_arena
