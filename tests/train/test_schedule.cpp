// MultiPassScheduler (spec section 3): single-pass before feedback_start, K drawn from pass_mix after it,
// 75/22/3 over a run with the defaults (mean passes 1.28), lambda ramp, prefix modes, determinism, and
// refusals that name the field.
#include <gtest/gtest.h>

#include "fbt/train/schedule.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_schedule {

using namespace fbt;

TEST(Schedule, SinglePassBeforeTheStartThenThePassMix) {
  ScheduleConfig c;  // defaults: start 0.75, {2: 0.88, 3: 0.12}
  MultiPassScheduler s(c, 20000);
  EXPECT_EQ(s.start_step(), 15000);
  Rng rng(1);
  PassPlan p;
  long counts[4] = {0, 0, 0, 0};
  for (long step = 0; step < 20000; ++step) {
    s.plan(step, 2, 16, rng, p);
    if (step < 15000) ASSERT_EQ(p.K, 1);
    ++counts[p.K];
  }
  EXPECT_EQ(counts[1], 15000);
  EXPECT_NEAR(counts[2] / 20000.0, 0.22, 0.012);  // 75/22/3 over the run (~5 standard errors)
  EXPECT_NEAR(counts[3] / 20000.0, 0.03, 0.006);
  EXPECT_NEAR(s.mean_passes(), 1.28, 1e-12);
}

TEST(Schedule, PrefixModesAndLambdaRamp) {
  ScheduleConfig c;
  c.feedback_start = 0.5, c.pass_mix = {{3, 1.0}}, c.lambda = 0.8, c.lambda_ramp = 4;
  MultiPassScheduler s(c, 100);
  Rng rng(2);
  PassPlan p;
  s.plan(50, 3, 10, rng, p);
  EXPECT_EQ(p.K, 3);
  EXPECT_NEAR(p.lambda, 0.2, 1e-12);  // first step of the ramp: 1/4
  s.plan(53, 3, 10, rng, p);
  EXPECT_NEAR(p.lambda, 0.8, 1e-12);
  s.plan(90, 3, 10, rng, p);
  EXPECT_NEAR(p.lambda, 0.8, 1e-12);
  ASSERT_EQ(p.prefix.size(), 9u);
  bool varied = false;
  for (int i = 3; i < 9; ++i) {
    EXPECT_GE(p.prefix[i], 0);
    EXPECT_LT(p.prefix[i], 10);
    varied |= p.prefix[i] != p.prefix[3];
  }
  EXPECT_TRUE(varied) << "uniform prefixes differ between sequences";
  c.prefix = "none";
  MultiPassScheduler n(c, 100);
  n.plan(60, 3, 10, rng, p);
  for (int v : p.prefix) EXPECT_EQ(v, 0);
  c.prefix = "4";
  MultiPassScheduler f(c, 100);
  f.plan(60, 3, 10, rng, p);
  for (int i = 3; i < 9; ++i) EXPECT_EQ(p.prefix[i], 4);
}

TEST(Schedule, SeededAndDeterministic) {
  ScheduleConfig c;
  c.feedback_start = 0.0;
  MultiPassScheduler s(c, 1000);
  Rng a(5), b(5);
  PassPlan pa, pb;
  for (long step = 0; step < 200; ++step) {
    s.plan(step, 4, 32, a, pa);
    s.plan(step, 4, 32, b, pb);
    ASSERT_EQ(pa.K, pb.K);
    ASSERT_EQ(pa.prefix, pb.prefix);
  }
}

TEST(Schedule, RefusesBadKnobsNamingThem) {
  auto refused = [](ScheduleConfig c, const std::string& field) {
    try {
      c.validate();
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  ScheduleConfig c;
  c.feedback_start = 1.5;
  refused(c, "feedback_start");
  c = ScheduleConfig{};
  c.pass_mix = {{4, 1.0}};
  refused(c, "pass_mix");
  c = ScheduleConfig{};
  c.pass_mix = {{2, 0.0}};
  refused(c, "pass_mix");
  c = ScheduleConfig{};
  c.prefix = "some";
  refused(c, "prefix");
  c = ScheduleConfig{};
  c.sigma = -1;
  refused(c, "sigma");
  EXPECT_EQ(ScheduleConfig::parse_mix("2:0.88,3:0.12"), (std::map<int, double>{{2, 0.88}, {3, 0.12}}));
  EXPECT_THROW(ScheduleConfig::parse_mix("2=0.5"), Error);
}

// A recorded mix must read back to the same doubles ("2:0.123456789" was recorded with 6
// digits as "2:0.123457", so a resumed run sampled K with other probabilities).
TEST(Schedule, FormatMixRoundTripsExactly) {
  const std::map<int, double> m{{2, 0.123456789}, {3, 1.0 / 3.0}, {4, 0.88}};
  const std::string s = ScheduleConfig::format_mix(m);
  EXPECT_EQ(ScheduleConfig::parse_mix(s), m) << s;
  EXPECT_EQ(ScheduleConfig::format_mix({{2, 0.88}, {3, 0.12}}), "2:0.88,3:0.12");  // short weights stay short
}

// The paper's runs as pass-mix presets (spec 10): whole-run shares, whatever feedback_start is (as long as
// it leaves room for them). After the start P'(1) = (P_1 - f) / (1 - f), P'(k) = P_k / (1 - f), so the
// scheduler's mean passes over the run is the preset's sum_k k P_k exactly.
TEST(Schedule, PassMixPresetsGiveTheirWholeRunShares) {
  struct Want {
    const char* name;
    double mean;  // sum_k k P_k of the paper's run
  };
  for (const Want& w : {Want{"paper_10b", 3.0}, Want{"paper_100b", 0.75 + 3 * 0.25}, Want{"paper_200b", 0.75 + 2 * 0.22 + 3 * 0.03},
                        Want{"paper_400b", 0.75 + 2 * 0.22 + 3 * 0.03}, Want{"two_pass_75_25", 0.75 + 2 * 0.25}})
    for (double f : {0.0, 0.25, 0.5, 0.75}) {
      ScheduleConfig c;
      c.set_mix_text(w.name);
      c.feedback_start = f;
      if (std::string(w.name) == "paper_10b" && f > 0) {  // 100% 3-pass: no single-pass steps to start with
        EXPECT_THROW(c.validate(), Error) << w.name << " f " << f;
        continue;
      }
      ASSERT_NO_THROW(c.validate()) << w.name << " f " << f;
      EXPECT_EQ(c.mix_text(), w.name);
      const long steps = 4000;  // divisible, so start_step is exact
      MultiPassScheduler s(c, steps);
      EXPECT_NEAR(s.mean_passes(), w.mean, 1e-12) << w.name << " f " << f;
      double tot = 0;
      for (const auto& kv : c.after_start_mix()) tot += kv.second;
      EXPECT_NEAR(tot, 1.0, 1e-12) << w.name << " f " << f;
    }
  // 75/22/3 from the start at 0.5: 1:0.5, 2:0.44, 3:0.06 (the paper preset's schedule)
  ScheduleConfig c;
  c.set_mix_text("paper_200b");
  c.feedback_start = 0.5;
  const auto m = c.after_start_mix();
  EXPECT_NEAR(m.at(1), 0.5, 1e-12);
  EXPECT_NEAR(m.at(2), 0.44, 1e-12);
  EXPECT_NEAR(m.at(3), 0.06, 1e-12);
  // a start later than the preset's single-pass share is refused, naming both
  c.feedback_start = 0.8;
  try {
    c.validate();
    ADD_FAILURE() << "no refusal";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("feedback_start"), std::string::npos) << msg;
    EXPECT_NE(msg.find("paper_200b"), std::string::npos) << msg;
  }
  // an explicit mix stays a mix after a preset
  c.set_mix_text("2:0.5,3:0.5");
  EXPECT_TRUE(c.pass_preset.empty());
  EXPECT_EQ(c.mix_text(), "2:0.5,3:0.5");
  EXPECT_THROW(c.set_mix_text("paper_1t"), Error);  // neither a preset nor a K:p list
  // draws follow the after-start mix: 1-pass batches occur after the start under paper_200b
  c.set_mix_text("paper_200b");
  c.feedback_start = 0.5;
  MultiPassScheduler s(c, 1000);
  Rng rng(3);
  PassPlan plan;
  std::map<int, int> count;
  for (long step = 500; step < 1000; ++step) s.plan(step, 1, 8, rng, plan), ++count[plan.K];
  EXPECT_NEAR(count[1] / 500.0, 0.5, 0.07);
  EXPECT_NEAR(count[2] / 500.0, 0.44, 0.07);
  EXPECT_GT(count[3], 0);
}

}  // namespace test_train_schedule
