// Training presets (train/presets.hpp train_presets): `--preset v1|paper` sets a fixed list
// of fields first, whatever its place among the flags or the keys of a file; the other fields then change
// it; the preset is recorded (to_json, so the checkpoint's train_config and result.json) and a resumed
// record reads back to the same config; a baseline is made single-pass instead of being refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "fbt/train/config.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_presets {

using namespace fbt;
using fbt_test::TempDirTest;

namespace {

using Flags = std::vector<std::pair<std::string, std::string>>;

TEST(Presets, V1IsTheDefaultsAndBothSetTheSameFields) {
  TrainConfig d, v1;
  apply_preset(v1, "v1");
  EXPECT_EQ(to_json(v1), to_json(d)) << "v1 must be the defaults: old results stay reproducible";
  ASSERT_EQ(train_presets().size(), 2u);
  std::set<std::string> a, b;
  for (const auto& kv : train_presets()[0].second) a.insert(kv.first);
  for (const auto& kv : train_presets()[1].second) b.insert(kv.first);
  EXPECT_EQ(a, b) << "a preset must set every field the other sets (switching leaves nothing behind)";
  // switching from paper to v1 gives v1 back exactly
  TrainConfig c;
  apply_preset(c, "paper");
  EXPECT_NE(to_json(c), to_json(d));
  apply_preset(c, "v1");
  EXPECT_EQ(to_json(c), to_json(d));
  EXPECT_FBT_ERROR(apply_preset(c, "gpt2"), "preset", "\"gpt2\"", "v1, paper");
}

TEST(Presets, PaperIsThePublishedRecipe) {
  TrainConfig c;
  apply_preset(c, "paper");
  EXPECT_EQ(c.preset, "paper");
  EXPECT_EQ(c.model.input_norm, "feedback_passes");
  EXPECT_EQ(c.model.gate_norm, "shared");
  EXPECT_EQ(c.model.block_norm, "sandwich");
  EXPECT_EQ(c.lr_schedule, "wsd");
  EXPECT_EQ(c.wsd_decay_frac, 0.25);
  EXPECT_EQ(c.min_lr, 0.0);
  EXPECT_EQ(c.warmup_steps, 200);
  EXPECT_EQ(c.lr, 5e-4);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.cooldown_z_loss, 1e-5);
  EXPECT_EQ(c.optimizer, "normuon");
  EXPECT_EQ(c.matrix_lr, 1e-2);
  EXPECT_EQ(c.matrix_weight_decay, 0.01);
  EXPECT_EQ(c.schedule.mix_text(), "paper_200b");
  // the feedback phase starts before the cooldown
  c.steps = 1000;
  validate(c);
  MultiPassScheduler s(c.schedule, c.steps);
  const LrSchedule lr = make_lr_schedule(c.lr_schedule, c.lr, c.min_lr, c.warmup_steps, c.steps, c.wsd_decay_frac);
  EXPECT_LT(s.start_step(), lr.wsd_decay_start());
  EXPECT_NEAR(s.mean_passes(), 1.28, 1e-12);  // 75/22/3
}

TEST(Presets, ThePresetComesFirstWhereverItIsGiven) {
  // flags: preset after lr still leaves lr as given
  const TrainConfig a = make_train_config("", Flags{{"lr", "0.01"}, {"preset", "paper"}, {"steps", "800"}});
  EXPECT_EQ(a.preset, "paper");
  EXPECT_EQ(a.lr, 0.01);
  EXPECT_EQ(a.model.block_norm, "sandwich");
  // a JSON object is read in key order ("lr" < "preset"): the preset still comes first
  TrainConfig b;
  apply_json(b, nlohmann::json{{"lr", "0.01"}, {"preset", "paper"}, {"steps", 800}}, "test");
  EXPECT_EQ(to_json(b), to_json(a));
  // set_config_fields likewise
  TrainConfig c;
  set_config_fields(c, Flags{{"lr", "0.01"}, {"steps", "800"}, {"preset", "paper"}});
  EXPECT_EQ(to_json(c), to_json(a));
}

TEST(Presets, RecordReadsBackToTheSameConfig) {
  TrainConfig c = make_train_config("", Flags{{"preset", "paper"}, {"block_norm", "pre"}, {"steps", "900"}});
  validate(c);
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(j.at("preset"), "paper");
  TrainConfig back;
  apply_json(back, j, "record");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.model.block_norm, "pre");  // the override survives the preset's re-application
}

class PresetFile : public TempDirTest {};

TEST_F(PresetFile, FlagsPresetBeatsTheFilesAndTheFilesFieldsApplyOnTop) {
  const std::string p = path("run.json");
  std::ofstream(p) << R"({"preset": "paper", "lr": 0.002, "steps": 1200})";
  const TrainConfig f = make_train_config(p, Flags{});
  EXPECT_EQ(f.preset, "paper");
  EXPECT_EQ(f.lr, 0.002);
  EXPECT_EQ(f.model.input_norm, "feedback_passes");
  const TrainConfig g = make_train_config(p, Flags{{"preset", "v1"}, {"steps", "10"}});
  EXPECT_EQ(g.preset, "v1");
  EXPECT_EQ(g.lr, 0.002);  // the file's field, on the flag's preset
  EXPECT_EQ(g.model.input_norm, "all");
  EXPECT_EQ(g.steps, 10);
}

TEST(Presets, ABaselineIsMadeSinglePass) {
  for (const char* preset : {"v1", "paper"}) {
    TrainConfig c = make_train_config("", Flags{{"preset", preset}, {"fuser", "none"}, {"steps", "800"}});
    EXPECT_NO_THROW(validate(c)) << preset;
    EXPECT_EQ(c.schedule.K_max, 1);
    MultiPassScheduler s(c.schedule, c.steps);
    EXPECT_EQ(s.mean_passes(), 1.0);
  }
  // set in code and not normalised, the refusal names the way out
  TrainConfig c;
  c.model.fuser = "none";
  EXPECT_FBT_ERROR(validate(c), "fuser", "single-pass");
}

TEST(Presets, CooldownZLossNeedsAWsdCooldownAndStartsThere) {
  TrainConfig c;
  c.cooldown_z_loss = 1e-5;
  EXPECT_FBT_ERROR(validate(c), "cooldown_z_loss", "wsd");
  c.lr_schedule = "wsd", c.steps = 100, c.wsd_decay_frac = 0.25, c.warmup_steps = 10;
  validate(c);
  const LrSchedule lr = make_lr_schedule(c.lr_schedule, c.lr, c.min_lr, c.warmup_steps, c.steps, c.wsd_decay_frac);
  EXPECT_EQ(scheduled_z_loss(c, lr, 0), 0.0);
  EXPECT_EQ(scheduled_z_loss(c, lr, 74), 0.0);
  EXPECT_EQ(scheduled_z_loss(c, lr, 75), 1e-5);  // the wsd decay's first step: 100 - round(0.25 * 100)
  c.model.z_loss = 1e-4;  // without a cooldown value the model's own z_loss throughout
  c.cooldown_z_loss = 0;
  EXPECT_EQ(scheduled_z_loss(c, lr, 80), 1e-4);
  c.cooldown_z_loss = 1e-5;
  c.cooldown_z_loss = -1;
  EXPECT_FBT_ERROR(validate(c), "cooldown_z_loss");
}

}  // namespace

}  // namespace test_train_presets
