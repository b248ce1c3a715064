// Training with optimizer normuon / muon (train/muon.hpp through the Trainer): exact resume (NorMuon's row
// moments saved and restored), a small model's loss falls in 30 steps, the optimizer's time and the
// matrices' rate in train.jsonl and the run's summary, states of another optimizer refused naming the
// file and the field, and the new config fields' refusals.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fbt/train/trainer.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_normuon_training {

using namespace fbt;

namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "fbt_normuon_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

/// The trainer tests' tiny run (D 32, 2 layers, glu fuser, feedback from step 2), with `optimizer`.
TrainConfig tiny(const std::string& out, const std::string& optimizer = "normuon") {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 4, c.seq_len = 32, c.steps = 8, c.warmup_steps = 2, c.grad_accum = 2;
  c.schedule.feedback_start = 0.25, c.schedule.pass_mix = {{2, 0.6}, {3, 0.4}};
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 4, c.progress = false, c.out_dir = out;
  c.optimizer = optimizer, c.weight_decay = 0.0, c.lr = 5e-3, c.matrix_lr = 2e-2, c.matrix_weight_decay = 0.01;
  return c;
}

/// Values, both AdamW moments, the row moments and the step, bit for bit.
bool same_bits(const ParamStore<float>& a, const ParamStore<float>& b) {
  const std::size_t n = a.size() * sizeof(float);
  return a.size() == b.size() && std::memcmp(a.values(), b.values(), n) == 0 && std::memcmp(a.adam_m(), b.adam_m(), n) == 0 &&
         std::memcmp(a.adam_v(), b.adam_v(), n) == 0 && a.has_row_moments() == b.has_row_moments() &&
         (!a.has_row_moments() || std::memcmp(a.row_moments(), b.row_moments(), a.row_moments_size() * sizeof(float)) == 0) && a.step == b.step;
}

/// Rewrites checkpoint `dir`'s train_state.safetensors with metadata `key` = `value` and without the
/// tensor `drop` (if given): a forged or damaged training state.
void forge_state(const std::string& dir, const std::string& key, const std::string& value, const std::string& drop = "") {
  const std::string p = dir + "/train_state.safetensors";
  const SafetensorsFile f = read_safetensors(p);
  std::vector<TensorRef> refs;
  for (const auto& e : f.tensors)
    if (e.name != drop) refs.push_back({e.name, e.dtype, e.shape, f.bytes(e)});
  auto meta = f.metadata;
  if (!key.empty()) meta[key] = value;
  save_safetensors(p, refs, meta);
}

// N steps == N/2 + save + resume + N/2, bit for bit, with NorMuon (whose row moments are in the training
// state) and with Muon; the resumed run did train.
TEST(NorMuonTraining, ResumeContinuesBitIdentically) {
  for (const char* opt : {"normuon", "muon"}) {
    SCOPED_TRACE(opt);
    const std::string dir = temp_dir(std::string("resume_") + opt);
    Trainer<Model<float>> straight(tiny(dir + "/a", opt));
    int fed_back = 0;
    for (int i = 0; i < 8; ++i) fed_back += straight.train_step().K > 1;
    EXPECT_GT(fed_back, 0) << "the run must exercise the fed-back passes";
    EXPECT_EQ(straight.model.params.has_row_moments(), std::string(opt) == "normuon");

    Trainer<Model<float>> first(tiny(dir + "/b", opt));
    for (int i = 0; i < 4; ++i) first.train_step();
    first.save_checkpoint(dir + "/b/checkpoint");
    auto resumed = Trainer<Model<float>>::resume(dir + "/b/checkpoint");
    EXPECT_EQ(resumed->step, 4);
    EXPECT_TRUE(same_bits(first.model.params, resumed->model.params)) << "the checkpoint restores the whole optimizer state";
    for (int i = 0; i < 4; ++i) resumed->train_step();
    EXPECT_TRUE(same_bits(straight.model.params, resumed->model.params)) << "N steps vs N/2 + save + resume + N/2";
    EXPECT_FALSE(same_bits(first.model.params, resumed->model.params));
    std::filesystem::remove_all(dir);
  }
}

// A small model trained 30 steps with NorMuon (and with Muon) ends with a lower loss than it started
// with: the mean pass-1 loss of the last 5 steps is below step 0's by more than 0.3 nats (AdamW at the
// same Adam-group lr gets there too; this checks that the matrix group trains, not which is faster).
TEST(NorMuonTraining, LossFallsWithin30Steps) {
  for (const char* opt : {"normuon", "muon"}) {
    TrainConfig c = tiny(temp_dir("loss"), opt);
    c.steps = 30, c.grad_accum = 1;
    Trainer<Model<float>> t(c);
    const std::vector<float> w0(t.model.params.values(), t.model.params.values() + t.model.params.size());
    const double first = t.train_step().loss[0];
    double last = 0;
    for (int s = 1; s < 30; ++s) {
      const StepReport r = t.train_step();
      if (s >= 25) last += r.loss[0] / 5;
      EXPECT_TRUE(std::isfinite(r.loss[0])) << opt << " step " << s;
    }
    std::printf("[ loss     ] %s: step 0 %.4f, steps 25-29 %.4f\n", opt, first, last);
    EXPECT_LT(last, first - 0.3) << opt;
    // every matrix moved (the fuser's too: feedback starts at step 8)
    for (const auto& s : t.model.params.specs())
      if (param_group(s) == ParamGroup::Matrix) {
        double d = 0;
        for (std::size_t i = 0; i < s.size; ++i) d = std::max(d, std::fabs(double(t.model.params.values()[s.offset + i]) - w0[s.offset + i]));
        EXPECT_GT(d, 1e-4) << opt << " " << s.name;
      }
  }
}

// train.jsonl records the optimizer's seconds every step (and, with muon / normuon, the matrices' rate:
// matrix_lr x lr(step) / lr); the run's summary names the optimizer's share of the step time.
TEST(NorMuonTraining, LogsTheOptimizerTimeAndTheMatrixRate) {
  for (const char* opt : {"normuon", "adamw"}) {
    SCOPED_TRACE(opt);
    const std::string dir = temp_dir(std::string("log_") + opt);
    TrainConfig c = tiny(dir, opt);
    c.steps = 4, c.seq_eval_windows = 0, c.monitor_passes = 0;
    Trainer<Model<float>> t(c);
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    t.run(out);
    std::rewind(out);
    std::string text;
    for (int ch; (ch = std::fgetc(out)) != EOF;) text += char(ch);
    std::fclose(out);
    EXPECT_NE(text.find(std::string("optimizer ") + opt + ": "), std::string::npos) << text;
    EXPECT_NE(text.find("% of the step time"), std::string::npos) << text;
    std::ifstream log(dir + "/train.jsonl");
    std::string line;
    int n = 0;
    while (std::getline(log, line)) {
      const auto j = nlohmann::json::parse(line);
      ASSERT_TRUE(j.contains("optimizer_seconds")) << line;
      EXPECT_GT(j["optimizer_seconds"].get<double>(), 0.0);
      EXPECT_LT(j["optimizer_seconds"].get<double>(), 10.0);
      if (std::string(opt) == "adamw") {
        EXPECT_FALSE(j.contains("matrix_lr")) << line;
      } else {
        EXPECT_DOUBLE_EQ(j["matrix_lr"].get<double>(), c.matrix_lr * j["lr"].get<double>() / c.lr) << line;
      }
      ++n;
    }
    EXPECT_EQ(n, 4);
    std::filesystem::remove_all(dir);
  }
}

std::string resume_error(const std::string& dir, const std::function<void(TrainConfig&)>& override = {}) {
  try {
    Trainer<Model<float>>::resume(dir, override);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no throw>";
}

// A training state of another optimizer than the run's is refused, naming the file and the field: a
// NorMuon run whose state says adamw, an AdamW state resumed as normuon, an unknown optimizer, a NorMuon
// state without a row moment, and row moments in a state that says muon.
TEST(NorMuonTraining, StateOfAnotherOptimizerIsRefused) {
  const std::string dir = temp_dir("other");
  {
    Trainer<Model<float>> t(tiny(dir, "normuon"));
    t.train_step();
    t.save_checkpoint(dir + "/normuon");
    Trainer<Model<float>> a(tiny(dir, "adamw"));
    a.train_step();
    a.save_checkpoint(dir + "/adamw");
  }
  ASSERT_EQ(resume_error(dir + "/normuon"), "<no throw>");
  ASSERT_EQ(resume_error(dir + "/adamw"), "<no throw>");
  auto copy = [&](const std::string& from) {
    std::filesystem::remove_all(dir + "/bad");
    std::filesystem::copy(dir + "/" + from, dir + "/bad");
    return dir + "/bad";
  };
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  struct Case {
    std::string from, key, value, drop;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"normuon", "optimizer", "adamw", "", {"\"optimizer\"", "adamw", "normuon"}},
      {"normuon", "optimizer", "sgd", "", {"\"optimizer\"", "sgd", "expected one of the optimizers this program knows: adamw, muon, normuon"}},
      {"normuon", "", "", "row_v." + q, {"missing tensor \"row_v." + q + "\"", "\"optimizer\" is \"normuon\""}},
      {"normuon", "optimizer", "muon", "", {"\"optimizer\"", "muon"}},
      {"adamw", "optimizer", "normuon", "", {"\"optimizer\"", "normuon"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.from + " " + c.key + "=" + c.value + " drop " + c.drop);
    const std::string bad = copy(c.from);
    forge_state(bad, c.key, c.value, c.drop);
    const std::string e = resume_error(bad);
    EXPECT_NE(e.find(bad + "/train_state.safetensors"), std::string::npos) << "names the file: " << e;
    for (const auto& p : c.parts) EXPECT_NE(e.find(p), std::string::npos) << "lacks \"" << p << "\": " << e;
  }
  // the file's own optimizer, but a run that asks for another (a C++ override)
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(dir + "/adamw", [](TrainConfig& c) { c.optimizer = "normuon"; }), "train_state.safetensors",
                   "\"optimizer\" is \"adamw\"", "normuon");
  // load_train_state alone: a NorMuon state's row moments need the "optimizer" field's consent
  const std::string bad = copy("normuon");
  forge_state(bad, "optimizer", "muon");
  Model<float> m(tiny(dir).model, 1);
  EXPECT_FBT_ERROR(load_train_state(bad + "/train_state.safetensors", m.params), "train_state.safetensors", "\"optimizer\" is \"muon\"", "row_v");
  EXPECT_FALSE(m.params.has_row_moments()) << "a refused load leaves the store unchanged";
  std::filesystem::remove_all(dir);
}

// The new fields' refusals name the field and the value; their defaults are the paper's NorMuon values.
TEST(NorMuonTraining, BadFieldValuesAreRefused) {
  const TrainConfig d;
  EXPECT_EQ(d.optimizer, "adamw");
  EXPECT_EQ(d.matrix_lr, 1e-2);
  EXPECT_EQ(d.matrix_weight_decay, 0.01);
  EXPECT_EQ(d.muon_momentum, 0.95);
  EXPECT_EQ(d.normuon_beta2, 0.95);
  EXPECT_EQ(d.ns_steps, 5);
  struct Case {
    const char* field;
    const char* value;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"optimizer", "sgd", {"optimizer", "expected one of adamw, muon, normuon", "sgd"}},
      {"optimizer", "NorMuon", {"optimizer", "NorMuon"}},
      {"matrix_lr", "0", {"matrix_lr", "(0, inf)", "0"}},
      {"matrix_lr", "-1e-2", {"matrix_lr", "-0.01"}},
      {"matrix_weight_decay", "-0.1", {"matrix_weight_decay", "[0, inf)"}},
      {"muon_momentum", "1", {"muon_momentum", "[0, 1)"}},
      {"normuon_beta2", "-0.5", {"normuon_beta2", "[0, 1)"}},
      {"normuon_beta2", "1.5", {"normuon_beta2", "1.5"}},
      {"ns_steps", "0", {"ns_steps", "[1, 100]", "0"}},
      {"ns_steps", "1000", {"ns_steps", "1000"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " " + c.value);
    TrainConfig t = tiny("unused");
    set_config_field(t, c.field, c.value);
    try {
      validate(t);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("invalid training config: " + std::string(c.field)), std::string::npos) << e.what();
      for (const auto& p : c.parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "lacks \"" << p << "\": " << e.what();
    }
  }
  TrainConfig t;
  EXPECT_FBT_ERROR(set_config_field(t, "ns_steps", "five"), "ns_steps", "five");
  EXPECT_FBT_ERROR(set_config_field(t, "matrix_lr", "fast"), "matrix_lr", "fast");
  // the fields read back from a run's record
  set_config_field(t, "optimizer", "normuon"), set_config_field(t, "matrix_lr", "0.02"), set_config_field(t, "ns_steps", "6");
  TrainConfig back;
  apply_json(back, to_json(t), "record");
  EXPECT_EQ(back.optimizer, "normuon");
  EXPECT_EQ(back.matrix_lr, 0.02);
  EXPECT_EQ(back.ns_steps, 6);
}

}  // namespace

}  // namespace test_train_normuon_training
