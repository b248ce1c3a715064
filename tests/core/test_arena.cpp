// fbt::Arena: two-phase layout (count, then point), 64-byte aligned slices, reuse without reallocation.
#include <gtest/gtest.h>

#include <cstdint>

#include "fbt/core/arena.hpp"

using namespace fbt;

TEST(Arena, SlicesAreAlignedDisjointAndCounted) {
  Arena<float> a;
  float *p = nullptr, *q = nullptr, *r = nullptr;
  auto layout = [&](Arena<float>& ar) { p = ar.take(3), q = ar.take(17), r = ar.take(1); };
  EXPECT_EQ(Arena<float>::measure(layout), 16u + 32u + 16u);
  a.build(layout);
  ASSERT_NE(p, nullptr);
  for (float* x : {p, q, r}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % 64, 0u);
  EXPECT_GE(q - p, 3);
  EXPECT_GE(r - q, 17);
  EXPECT_EQ(a.bytes(), (16u + 32u + 16u) * sizeof(float));
  for (int i = 0; i < 17; ++i) EXPECT_EQ(q[i], 0.0f) << "fresh arena is zero-filled";
  const float* before = p;
  a.build(layout);  // same size: no reallocation
  EXPECT_EQ(p, before);
}
