// tests/train/test_lr_schedule.cpp: learning-rate schedules (fbt/train/lr_schedule.hpp).
//
// Specific steps against the formulas in the header (warmup start/end, cosine middle and end, WSD
// plateau, decay middle and end), monotonicity, and that bad names and fields throw fbt::Error naming
// them. Tolerance: 1e-15 absolute on learning rates of order 1e-3 (about 1e-12 relative).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "fbt/train/lr_schedule.hpp"
#include "common/errors.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_lr_schedule {

namespace {

using ::testing::HasSubstr;
using fbt_test::error_of;
constexpr double kTol = 1e-15;

TEST(LrSchedule, CosineKeySteps) {
  // W = 10, N = 110: cosine runs over 100 steps from step 10 to step 110.
  const auto s = fbt::make_lr_schedule("cosine", 1e-3, 1e-4, 10, 110);
  EXPECT_NEAR(s.lr(0), 1e-4, kTol);   // first warmup step: max_lr * 1/10 (not 0)
  EXPECT_NEAR(s.lr(4), 5e-4, kTol);   // max_lr * 5/10
  EXPECT_NEAR(s.lr(9), 1e-3, kTol);   // last warmup step reaches max_lr
  EXPECT_NEAR(s.lr(10), 1e-3, kTol);  // progress 0
  // progress 1/4: min + 0.5 (max - min)(1 + cos(pi/4)) = 1e-4 + 9e-4 * 0.85355339...
  EXPECT_NEAR(s.lr(35), 8.681980515339464e-4, kTol);
  EXPECT_NEAR(s.lr(60), 5.5e-4, kTol);  // progress 1/2: midpoint of max and min
  EXPECT_GT(s.lr(109), 1e-4);
  EXPECT_NEAR(s.lr(109), 1e-4 + 0.5 * 9e-4 * (1.0 + std::cos(3.14159265358979323846 * 0.99)), kTol);
  EXPECT_NEAR(s.lr(110), 1e-4, kTol);   // end: min_lr
  EXPECT_NEAR(s.lr(1000), 1e-4, kTol);  // clamped after the end
}

TEST(LrSchedule, CosineWithoutWarmupStartsAtMax) {
  const auto s = fbt::make_lr_schedule("cosine", 1e-3, 0.0, 0, 100);
  EXPECT_NEAR(s.lr(0), 1e-3, kTol);
  EXPECT_NEAR(s.lr(50), 5e-4, kTol);
  EXPECT_NEAR(s.lr(100), 0.0, kTol);
}

TEST(LrSchedule, WsdKeySteps) {
  // W = 10, N = 100, decay_frac = 0.2: stable on [10, 80), linear decay on [80, 100].
  const auto s = fbt::make_lr_schedule("wsd", 1e-3, 1e-5, 10, 100, 0.2);
  EXPECT_EQ(s.wsd_decay_start(), 80);
  EXPECT_NEAR(s.lr(0), 1e-4, kTol);
  EXPECT_NEAR(s.lr(9), 1e-3, kTol);
  EXPECT_EQ(s.lr(10), 1e-3);  // plateau: exactly max_lr
  EXPECT_EQ(s.lr(50), 1e-3);
  EXPECT_EQ(s.lr(79), 1e-3);
  EXPECT_NEAR(s.lr(80), 1e-3, kTol);                         // decay progress 0
  EXPECT_NEAR(s.lr(81), 1e-3 + (1e-5 - 1e-3) * 0.05, kTol);  // first step below max: progress 1/20
  EXPECT_NEAR(s.lr(90), 1e-3 + (1e-5 - 1e-3) * 0.5, kTol);   // mid-decay: (max + min) / 2
  EXPECT_NEAR(s.lr(95), 1e-3 + (1e-5 - 1e-3) * 0.75, kTol);
  EXPECT_NEAR(s.lr(100), 1e-5, kTol);  // end: min_lr
  EXPECT_NEAR(s.lr(500), 1e-5, kTol);  // clamped
}

TEST(LrSchedule, WsdDecayLengthRoundsAndEdgeFractions) {
  // round(0.5 * 7) = round(3.5) = 4 decay steps (half away from zero), so decay starts at 3.
  EXPECT_EQ(fbt::make_lr_schedule("wsd", 1.0, 0.0, 0, 7, 0.5).wsd_decay_start(), 3);
  // decay_frac = 0: warmup then constant, never decays.
  const auto flat = fbt::make_lr_schedule("wsd", 1e-3, 0.0, 5, 50, 0.0);
  EXPECT_EQ(flat.wsd_decay_start(), 50);
  EXPECT_EQ(flat.lr(49), 1e-3);
  EXPECT_EQ(flat.lr(50), 1e-3);
  // decay_frac = 1 and no warmup: linear from max at step 0 to min at step N.
  const auto lin = fbt::make_lr_schedule("wsd", 1e-3, 0.0, 0, 100, 1.0);
  EXPECT_NEAR(lin.lr(0), 1e-3, kTol);
  EXPECT_NEAR(lin.lr(25), 7.5e-4, kTol);
  EXPECT_NEAR(lin.lr(100), 0.0, kTol);
}

TEST(LrSchedule, ConstantAfterWarmup) {
  const auto s = fbt::make_lr_schedule("constant", 2e-3, 0.0, 4, 100);
  EXPECT_NEAR(s.lr(0), 5e-4, kTol);
  EXPECT_NEAR(s.lr(3), 2e-3, kTol);
  EXPECT_EQ(s.lr(4), 2e-3);
  EXPECT_EQ(s.lr(100), 2e-3);
  EXPECT_EQ(s.lr(10000), 2e-3);
}

TEST(LrSchedule, WarmupIncreasesThenNeverIncreases) {
  for (const char* kind : {"cosine", "wsd", "constant"}) {
    const auto s = fbt::make_lr_schedule(kind, 1e-3, 1e-4, 20, 200, 0.3);
    for (long t = 1; t < 20; ++t) EXPECT_GT(s.lr(t), s.lr(t - 1)) << kind << " warmup step " << t;
    for (long t = 20; t <= 220; ++t) EXPECT_LE(s.lr(t), s.lr(t - 1)) << kind << " step " << t;
    for (long t = 0; t <= 220; ++t) {
      EXPECT_LE(s.lr(t), 1e-3 + kTol) << kind << " step " << t;
      if (t >= 20) {
        EXPECT_GE(s.lr(t), 1e-4 - kTol) << kind << " step " << t;
      }
    }
  }
}

TEST(LrSchedule, ParsesNamesAndRejectsUnknownOnes) {
  for (const char* name : {"cosine", "wsd", "constant"})
    EXPECT_STREQ(fbt::lr_schedule_kind_name(fbt::parse_lr_schedule_kind(name)), name);
  EXPECT_EQ(fbt::parse_lr_schedule_kind("wsd"), fbt::LrSchedule::WSD);
  const std::string msg = error_of([] { fbt::parse_lr_schedule_kind("linear"); });
  EXPECT_THAT(msg, HasSubstr("\"linear\""));
  EXPECT_THAT(msg, HasSubstr("cosine, wsd, constant"));
  EXPECT_THAT(error_of([] { fbt::make_lr_schedule("Cosine", 1e-3, 0.0, 0, 10); }), HasSubstr("\"Cosine\""));
}

TEST(LrSchedule, BadFieldsThrowNamingTheField) {
  auto make = [](const char* kind, double max_lr, double min_lr, long w, long n, double frac) {
    return [=] { fbt::make_lr_schedule(kind, max_lr, min_lr, w, n, frac); };
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(error_of(make("cosine", 1e-3, 1e-4, 10, 100, 0.2)), "<no throw>");
  EXPECT_THAT(error_of(make("cosine", 1e-3, 1e-4, 0, 0, 0.2)), HasSubstr("total_steps"));
  EXPECT_THAT(error_of(make("cosine", 1e-3, 1e-4, 0, -5, 0.2)), HasSubstr("total_steps"));
  EXPECT_THAT(error_of(make("cosine", 1e-3, 1e-4, -1, 100, 0.2)), HasSubstr("warmup_steps"));
  EXPECT_THAT(error_of(make("cosine", 1e-3, 1e-4, 101, 100, 0.2)), HasSubstr("warmup_steps"));
  EXPECT_THAT(error_of(make("cosine", 1e-3, -1e-5, 10, 100, 0.2)), HasSubstr("min_lr"));
  EXPECT_THAT(error_of(make("cosine", 1e-4, 1e-3, 10, 100, 0.2)), HasSubstr("max_lr"));
  EXPECT_THAT(error_of(make("cosine", nan, 1e-4, 10, 100, 0.2)), HasSubstr("max_lr"));
  EXPECT_THAT(error_of(make("wsd", 1e-3, 1e-4, 10, 100, 1.5)), HasSubstr("decay_frac"));
  EXPECT_THAT(error_of(make("wsd", 1e-3, 1e-4, 10, 100, -0.1)), HasSubstr("decay_frac"));
  EXPECT_THAT(error_of(make("wsd", 1e-3, 1e-4, 10, 100, nan)), HasSubstr("decay_frac"));
  // WSD: a warmup that runs into the decay phase (starts at 80) is rejected; cosine accepts it.
  EXPECT_THAT(error_of(make("wsd", 1e-3, 1e-4, 90, 100, 0.2)), HasSubstr("warmup_steps"));
  EXPECT_EQ(error_of(make("cosine", 1e-3, 1e-4, 90, 100, 0.2)), "<no throw>");
  // validate() on a hand-filled struct reports the same way.
  fbt::LrSchedule s;
  s.total_steps = 0;
  EXPECT_THAT(error_of([&] { s.validate(); }), HasSubstr("total_steps"));
}

}  // namespace

}  // namespace test_train_lr_schedule
