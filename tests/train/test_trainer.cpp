// The trainer: exact resume, non-finite stops naming step and pass, the sequential-exact loss
// with feedback off equals the parallel pass-1 loss, logs and checkpoints on disk, clear refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include "fbt/train/trainer.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_trainer {

using namespace fbt;

namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "fbt_trainer_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

TrainConfig tiny(const std::string& out) {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 4, c.seq_len = 32, c.steps = 8, c.warmup_steps = 2, c.grad_accum = 2;
  c.schedule.feedback_start = 0.25, c.schedule.pass_mix = {{2, 0.6}, {3, 0.4}};
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 4, c.progress = false, c.out_dir = out;
  return c;
}

bool same_bits(const ParamStore<float>& a, const ParamStore<float>& b) {
  return a.size() == b.size() && std::memcmp(a.values(), b.values(), a.size() * sizeof(float)) == 0 &&
         std::memcmp(a.adam_m(), b.adam_m(), a.size() * sizeof(float)) == 0 && std::memcmp(a.adam_v(), b.adam_v(), a.size() * sizeof(float)) == 0 &&
         a.step == b.step;
}

TEST(Trainer, ResumeContinuesBitIdentically) {
  const std::string dir = temp_dir("resume");
  Trainer<Model<float>> straight(tiny(dir + "/a"));
  int fed_back = 0;
  for (int i = 0; i < 8; ++i) fed_back += straight.train_step().K > 1;
  EXPECT_GT(fed_back, 0) << "the run must exercise the fed-back passes";

  Trainer<Model<float>> first(tiny(dir + "/b"));
  for (int i = 0; i < 4; ++i) first.train_step();
  first.save_checkpoint(dir + "/b/checkpoint");
  auto resumed = Trainer<Model<float>>::resume(dir + "/b/checkpoint");
  EXPECT_EQ(resumed->step, 4);
  for (int i = 0; i < 4; ++i) resumed->train_step();
  EXPECT_TRUE(same_bits(straight.model.params, resumed->model.params)) << "N steps vs N/2 + save + resume + N/2";
  EXPECT_EQ(straight.tokens, resumed->tokens);
  EXPECT_EQ(straight.compute_tokens, resumed->compute_tokens);
  // and the resumed run did train: it differs from the checkpoint
  EXPECT_FALSE(same_bits(first.model.params, resumed->model.params));
  std::filesystem::remove_all(dir);
}

TEST(Trainer, TwoThreadsTrainLikeOneAndResumeExactly) {
  // 2 threads split each batch's rows; only float summation order differs from 1 thread (tolerance
  // 2e-4 absolute on weights of scale ~0.02 after 6 AdamW steps), and a 2-thread run resumes bit for bit
  const std::string dir = temp_dir("threads");
  TrainConfig c1 = tiny(dir + "/one"), c2 = tiny(dir + "/two");
  c2.threads = 2;
  Trainer<Model<float>> one(c1), two(c2);
  for (int i = 0; i < 6; ++i) {
    const auto a = one.train_step(), b = two.train_step();
    ASSERT_EQ(a.K, b.K);
    for (int j = 0; j < a.K; ++j) EXPECT_NEAR(a.loss[j], b.loss[j], 1e-4 * a.loss[j]);
  }
  double d = 0;
  for (std::size_t i = 0; i < one.model.params.size(); ++i) d = std::max(d, double(std::abs(one.model.params.values()[i] - two.model.params.values()[i])));
  EXPECT_LT(d, 2e-4);
  Trainer<Model<float>> half(c2);
  for (int i = 0; i < 3; ++i) half.train_step();
  half.save_checkpoint(dir + "/ck");
  auto res = Trainer<Model<float>>::resume(dir + "/ck");
  for (int i = 0; i < 3; ++i) res->train_step();
  EXPECT_TRUE(same_bits(two.model.params, res->model.params));
  std::filesystem::remove_all(dir);
}

TEST(Trainer, CheckpointFilesFromDifferentStepsAreRefused) {
  const std::string dir = temp_dir("mismatch");
  Trainer<Model<float>> t(tiny(dir));
  t.train_step();
  t.save_checkpoint(dir + "/c1");
  t.train_step();
  t.save_checkpoint(dir + "/c2");
  std::filesystem::copy_file(dir + "/c1/model.safetensors", dir + "/c2/model.safetensors", std::filesystem::copy_options::overwrite_existing);
  try {
    Trainer<Model<float>>::resume(dir + "/c2");
    FAIL() << "mixed checkpoint accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different steps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Trainer<Model<float>>::resume(dir + "/nowhere"), Error);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, NonFiniteLossStopsNamingStepAndPass) {
  const std::string dir = temp_dir("nan");
  Trainer<Model<float>> t(tiny(dir));
  t.train_step(), t.train_step();
  t.model.params.value("model.embed_tokens.weight")[48 * 32] = std::numeric_limits<float>::quiet_NaN();  // the row of '0'
  try {
    t.train_step();
    FAIL() << "NaN did not stop training";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("step 2"), std::string::npos) << m;
    EXPECT_NE(m.find("pass 1"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

TEST(Trainer, SequentialLossWithoutFeedbackEqualsParallelPassOne) {
  // float: agreement within 1e-5 relative (different summation orders of the same model)
  for (const std::string fuser : {"none", "glu"}) with_model<float>([&] {
    TrainConfig c = tiny(temp_dir("seq"));
    c.model.fuser = fuser;
    return c.model;
  }(), [&](auto tag) {
    TrainConfig c = tiny(temp_dir("seq"));
    c.model.fuser = fuser;
    if (fuser == "none") c.schedule.feedback_start = 1.0;
    c.eval_windows = 2, c.seq_eval_windows = 2;
    Trainer<typename decltype(tag)::type> t(c);
    for (int i = 0; i < 3; ++i) t.train_step();
    const EvalReport e = t.evaluate();
    EXPECT_NEAR(e.seq_loss_standard, e.val_loss[0], 1e-5 * e.val_loss[0]) << fuser;
    if (fuser == "glu") {
      EXPECT_EQ(e.val_loss.size(), 3u);
      EXPECT_FALSE(std::isnan(e.seq_loss_soft));
      EXPECT_NE(e.seq_loss_soft, e.seq_loss_standard);
      ASSERT_EQ(e.contraction.loss.size(), 4u);
      EXPECT_EQ(e.contraction.delta[0], 0.0);
      EXPECT_GT(e.contraction.delta[1], 0.0);
      EXPECT_NEAR(e.contraction.loss[0], e.val_loss[0], 0.5) << "monitor batch is a subset of validation";
    }
  });
}

TEST(Trainer, RunWritesLogsAndCheckpoint) {
  const std::string dir = temp_dir("run");
  TrainConfig c = tiny(dir);
  c.steps = 4, c.eval_every = 2;
  Trainer<Model<float>> t(c);
  t.run(nullptr);
  std::ifstream log(dir + "/train.jsonl"), elog(dir + "/eval.jsonl");
  std::string line;
  int n = 0, ne = 0;
  while (std::getline(log, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<long>(), n);
    EXPECT_EQ(j["loss"].size(), j["K"].get<size_t>());
    ++n;
  }
  while (std::getline(elog, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["val_loss"].size(), 3u);
    EXPECT_TRUE(j.contains("contraction"));
    EXPECT_FALSE(j.contains("optimal_loss")) << "addition has no known optimum";
    EXPECT_FALSE(j["loss_by_position"].contains("optimal"));
    EXPECT_EQ(j["loss_by_position"]["pass"].size(), 3u);
    ++ne;
  }
  EXPECT_EQ(n, 4);
  EXPECT_EQ(ne, 2);
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint/model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint/train_state.safetensors"));
  const Model<float> m = load_model<Model<float>>(dir + "/checkpoint/model.safetensors");
  EXPECT_EQ(std::memcmp(m.params.values(), t.model.params.values(), m.params.size() * sizeof(float)), 0);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, StepObserverSeesEveryStepAndItsFalseStopsWithACheckpoint) {
  const std::string dir = temp_dir("observer");
  TrainConfig c = tiny(dir + "/straight");
  c.seq_eval_windows = 0, c.monitor_passes = 0;
  Trainer<Model<float>> straight(c);
  std::vector<std::vector<double>> seen;
  straight.on_step = [&](const StepReport& r) {
    EXPECT_EQ(r.step, long(seen.size()));
    seen.push_back(r.loss);
    return true;
  };
  straight.run(nullptr);
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_FALSE(straight.stopped_by_observer);

  c.out_dir = dir + "/stopped";
  Trainer<Model<float>> stopped(c);
  int calls = 0;
  stopped.on_step = [&](const StepReport& r) {
    ++calls;
    EXPECT_EQ(r.loss, seen[std::size_t(r.step)]) << "the observer gets the step's own losses (step " << r.step << ")";
    return r.step < 2;  // false after the third step
  };
  stopped.run(nullptr);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(stopped.step, 3);
  EXPECT_TRUE(stopped.stopped_by_observer);
  EXPECT_EQ(stopped.stopped_by, 0) << "no signal stopped it";
  auto resumed = Trainer<Model<float>>::resume(dir + "/stopped/checkpoint");
  EXPECT_EQ(resumed->step, 3) << "the checkpoint is the stopping step's";
  resumed->run(nullptr);
  EXPECT_TRUE(same_bits(straight.model.params, resumed->model.params)) << "stopped by the observer + resume = one run";

  Trainer<Model<float>> thrown(tiny(dir + "/thrown"));
  thrown.on_step = [](const StepReport& r) -> bool {
    if (r.step == 1) throw std::runtime_error("observer failed");
    return true;
  };
  EXPECT_THROW(thrown.run(nullptr), std::runtime_error);
  EXPECT_EQ(thrown.step, 2) << "the exception leaves run() right after the observer's step";
  std::filesystem::remove_all(dir);
}

TEST(Trainer, EvaluationCarriesTheOptimumAndLossesByPosition) {
  // a running-state task: the optimum beside every loss, every loss by position, all sequential windows
  const std::string dir = temp_dir("optimum");
  TrainConfig c = tiny(dir);
  c.data = "task:running_sum", c.task_difficulty = 4, c.task_length = 12, c.seq_len = 32;
  c.steps = 2, c.eval_every = 0, c.eval_windows = 3, c.seq_eval_windows = -1, c.monitor_passes = 0;
  Trainer<Model<float>> t(c);
  t.run(nullptr);
  std::ifstream elog(dir + "/eval.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(elog, line));
  const auto j = nlohmann::json::parse(line);
  const StateTaskDataset data(state_task_config(c));
  const int nw = data.num_eval_windows(c.seq_len);
  ASSERT_GT(nw, 3);
  EXPECT_NEAR(j["optimal_loss"].get<double>(), data.mean_optimal_loss(c.seq_len, 3), 1e-12);
  EXPECT_NEAR(j["seq_optimal_loss"].get<double>(), data.mean_optimal_loss(c.seq_len, nw), 1e-12) << "seq_eval_windows -1: every window";
  const auto& b = j["loss_by_position"];
  const std::size_t P = std::size_t(c.seq_len) + 1;
  for (const char* k : {"count", "optimal", "seq_count", "seq_standard", "seq_soft", "seq_optimal"}) EXPECT_EQ(b[k].size(), P) << k;
  ASSERT_EQ(b["pass"].size(), 3u);
  auto weighted = [&](const nlohmann::json& mean, const nlohmann::json& count) {
    double s = 0, n = 0;
    for (std::size_t i = 0; i < P; ++i)
      if (count[i].get<long>() > 0) s += mean[i].get<double>() * count[i].get<long>(), n += count[i].get<long>();
      else EXPECT_TRUE(mean[i].is_null()) << "no target at position " << i;
    return s / n;
  };
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(weighted(b["pass"][k], b["count"]), j["val_loss"][k].get<double>(), 1e-9) << "pass " << k + 1;
  EXPECT_NEAR(weighted(b["optimal"], b["count"]), j["optimal_loss"].get<double>(), 1e-12);
  EXPECT_NEAR(weighted(b["seq_soft"], b["seq_count"]), j["seq_loss_soft"].get<double>(), 1e-9);
  EXPECT_NEAR(weighted(b["seq_standard"], b["seq_count"]), j["seq_loss_standard"].get<double>(), 1e-9);
  EXPECT_NEAR(weighted(b["seq_optimal"], b["seq_count"]), j["seq_optimal_loss"].get<double>(), 1e-12);
  long n = 0;
  for (const auto& x : b["seq_count"]) n += x.get<long>();
  EXPECT_EQ(n, long(nw) * c.seq_len);
  // the same report from evaluate(), as eval_losses_json writes it
  const EvalReport e = t.evaluate();
  EXPECT_EQ(eval_losses_json(e)["optimal_loss"], j["optimal_loss"]);
  EXPECT_EQ(e.by_position.pass.size(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, BadDataAndConfigAreRefusedClearly) {
  TrainConfig c = tiny(temp_dir("bad"));
  c.data = "/nonexistent/corpus.txt";
  try {
    Trainer<Model<float>> t(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus.txt"), std::string::npos) << e.what();
  }
  c = tiny(temp_dir("bad"));
  c.data = "task:sorting";
  EXPECT_THROW(Trainer<Model<float>> t(c), Error);
  c = tiny(temp_dir("bad"));
  c.model.fuser = "none";  // a baseline with the feedback schedule
  using BaselineTrainer = Trainer<Model<float, NoFuser<float>>>;
  EXPECT_THROW(BaselineTrainer t(c), Error);
  c = tiny(temp_dir("bad"));
  c.model.fuser = "concat";  // a config for another model type (a concrete fuser type)
  using GluTrainer = Trainer<Model<float, GluFuser<float>>>;
  EXPECT_THROW(GluTrainer t(c), Error);
  EXPECT_THROW(set_config_field(c, "hidden", "3"), Error);
  EXPECT_THROW(set_config_field(c, "hidden_size", "three"), Error);
  set_config_field(c, "pass_mix", "2:0.5,3:0.5");
  EXPECT_EQ(c.schedule.pass_mix.at(3), 0.5);
}

/// Rewrites checkpoint `dir`'s train_state.safetensors with metadata field `key` set to `value` (the
/// tensors kept): a forged or damaged training state.
void forge_state(const std::string& dir, const std::string& key, const std::string& value) {
  const std::string p = dir + "/train_state.safetensors";
  const SafetensorsFile f = read_safetensors(p);
  std::vector<TensorRef> refs;
  for (const auto& e : f.tensors) refs.push_back({e.name, e.dtype, e.shape, f.bytes(e)});
  auto meta = f.metadata;
  meta[key] = value;
  save_safetensors(p, refs, meta);
}

std::string resume_error(const std::string& dir) {
  try {
    Trainer<Model<float>>::resume(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no throw>";
}

TEST(Trainer, ResumeRefusesEveryBadFieldOfTheTrainingState) {
  // a data_rng of "garbage" used to resume with exit 0 on different batches
  const std::string dir = temp_dir("forged");
  {
    Trainer<Model<float>> t(tiny(dir));
    t.train_step(), t.train_step();
    t.save_checkpoint(dir + "/good");
  }
  ASSERT_EQ(resume_error(dir + "/good"), "<no throw>");
  const Rng fresh(5);
  std::string shifted = fresh.state();
  shifted = shifted.substr(0, shifted.rfind(' ')) + " nan";  // a spare normal that is not finite
  std::string big_word = fresh.state();
  big_word.replace(0, big_word.find(' '), "4294967296");  // a 33-bit engine word
  const std::vector<std::tuple<const char*, std::string, const char*>> cases = {
      {"data_rng", "garbage", "data_rng"},
      {"data_rng", "", "data_rng"},
      {"sched_rng", fresh.state() + " 1", "sched_rng"},
      {"sched_rng", shifted, "spare normal"},
      {"data_rng", big_word, "entry 0"},
      {"trainer_step", "-1", "trainer_step"},
      {"trainer_step", "9", "trainer_step"},  // beyond the run's 8 steps
      {"trainer_step", "two", "trainer_step"},
      {"trainer_step", "99999999999999999999", "trainer_step"},
      {"tokens", "-5", "tokens"},
      {"tokens", "nan", "tokens"},
      {"tokens", "1e300", "tokens"},
      {"compute_tokens", "0", "compute_tokens"},
      {"compute_tokens", "1e300", "compute_tokens"},
      {"train_config", "{\"lr\": 1, \"lr\": 2}", "duplicate key"},
      {"train_config", "{\"grad_clip\": -1}", "grad_clip"},
      {"train_config", "{\"rope_theta\": \"inf\"}", "rope_theta"},
  };
  for (const auto& [key, value, part] : cases) {
    std::filesystem::remove_all(dir + "/bad");
    std::filesystem::copy(dir + "/good", dir + "/bad");
    forge_state(dir + "/bad", key, value);
    const std::string e = resume_error(dir + "/bad");
    EXPECT_NE(e.find(part), std::string::npos) << key << " = \"" << value << "\": " << e;
    EXPECT_NE(e.find("train_state.safetensors"), std::string::npos) << key << ": the message must name the file: " << e;
  }
  // the AdamW step must agree with the trainer's step
  std::filesystem::remove_all(dir + "/bad");
  std::filesystem::copy(dir + "/good", dir + "/bad");
  forge_state(dir + "/bad", "step", "1");
  EXPECT_NE(resume_error(dir + "/bad").find("trainer_step"), std::string::npos) << resume_error(dir + "/bad");
  std::filesystem::remove_all(dir);
}

TEST(Trainer, ResumeRefusesStepsBelowTheCheckpoint) {
  const std::string dir = temp_dir("steps_back");
  Trainer<Model<float>> t(tiny(dir));
  for (int i = 0; i < 3; ++i) t.train_step();
  t.save_checkpoint(dir + "/ck");
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(dir + "/ck", [](TrainConfig& c) { c.steps = 2; }), "steps 2", "step 3");
  std::filesystem::remove_all(dir);
}

TEST(Trainer, RefusesARunThatCannotFitBeforeAllocatingIt) {
  // --batch_size 1e9 printed a 350 TB estimate and tried it; now the estimate is checked first
  TrainConfig c = tiny(temp_dir("memory"));
  c.batch_size = 1000000000, c.seq_len = 2;
  c.max_memory_gb = 64;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FBT_ERROR(Trainer<Model<float>> t(c), "needs an estimated", "batch_size 1000000000", "max_memory_gb = 64 GB");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // the exact step workspace, once the model exists: the config-only estimate is a lower bound of it, and
  // a limit between the two passes the first check and is refused by the second
  c = tiny(temp_dir("memory"));
  Trainer<Model<float>> ok(c);
  const double exact = double(ok.model.params.size()) * 16 + double(ok.step_bytes() + ok.eval_bytes());
  const double lower = estimate_train_memory(c).total();
  ASSERT_LT(lower, exact) << "the estimate before allocation must not exceed what the trainer allocates";
  c.max_memory_gb = 0.5 * (lower + exact) / 1e9;
  EXPECT_FBT_ERROR(Trainer<Model<float>> t(c), "step workspace", "max_memory_gb");
  c.max_memory_gb = 64;
  EXPECT_NO_THROW(Trainer<Model<float>> t(c));
}

TEST(Trainer, ReadsMemAvailable) {
  EXPECT_EQ(detail::parse_mem_available("MemTotal:       16000000 kB\nMemFree:   100 kB\nMemAvailable:    8000000 kB\n"), 8000000ull * 1024);
  EXPECT_EQ(detail::parse_mem_available("MemTotal: 1 kB\n"), 0u);
  EXPECT_EQ(detail::parse_mem_available("MemAvailable: lots\n"), 0u);
  EXPECT_EQ(detail::fmt_bytes(3.5e14), "350 TB");
  EXPECT_EQ(detail::fmt_bytes(512), "512 B");
}

// Issue 47: resume did not notice swapped weights of the same shape (another save's model.safetensors at the
// same step) or a data file changed since the checkpoint. The state records the weights' hash and the data
// files' identity (size and hash); either mismatch is refused, naming the file.
TEST(Trainer, ResumeRefusesSwappedWeightsAndChangedData) {
  const std::string dir = temp_dir("identity");
  TrainConfig ca = tiny(dir + "/a"), cb = tiny(dir + "/b");
  cb.seed = 2;
  Trainer<Model<float>> a(ca), b(cb);
  a.train_step(), b.train_step();
  a.save_checkpoint(dir + "/a/checkpoint"), b.save_checkpoint(dir + "/b/checkpoint");
  std::filesystem::copy_file(dir + "/a/checkpoint/model.safetensors", dir + "/b/checkpoint/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(dir + "/b/checkpoint"), dir + "/b/checkpoint",
                   "model.safetensors is not the file its train_state.safetensors was saved with");
  EXPECT_NO_THROW(Trainer<Model<float>>::resume(dir + "/a/checkpoint"));

  std::string text;
  for (int i = 0; i < 200; ++i) text += "paragraph " + std::to_string(i) + " of a small corpus for the test\n\n";
  const std::string corpus = dir + "/corpus.txt";
  std::ofstream(corpus) << text;
  TrainConfig ct = tiny(dir + "/t");
  ct.data = corpus;
  Trainer<Model<float>> t(ct);
  t.train_step();
  t.save_checkpoint(dir + "/t/checkpoint");
  std::ofstream(corpus) << text.substr(0, text.size() - 1) << "X";  // the same size, one byte changed
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(dir + "/t/checkpoint"), "the run's data changed since it was saved", corpus);
  std::ofstream(corpus) << text;
  EXPECT_EQ(Trainer<Model<float>>::resume(dir + "/t/checkpoint")->step, 1);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, RecordsATextFileByItsAbsolutePath) {
  // a relative --data was stored as given, so eval from another directory could not find it
  const std::string dir = temp_dir("relative");
  std::filesystem::create_directories(dir);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "paragraph " + std::to_string(i) + " of a small corpus for the test\n\n";
  std::ofstream(dir + "/corpus.txt") << text;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  TrainConfig c = tiny(dir + "/run");
  c.data = "corpus.txt";
  std::string recorded;
  try {
    Trainer<Model<float>> t(c);
    t.train_step();
    t.save_checkpoint(dir + "/run/checkpoint");
    recorded = read_train_config(dir + "/run/checkpoint").data;
  } catch (...) {
    std::filesystem::current_path(cwd);
    throw;
  }
  std::filesystem::current_path(cwd);
  EXPECT_EQ(recorded, dir + "/corpus.txt");
  std::filesystem::remove_all(dir);
}

TEST(TrainConfig, JsonRoundTripKeepsEveryField) {
  TrainConfig a = tiny("x");
  a.model.fuser = "concat", a.schedule.prefix = "5", a.schedule.detach = true, a.lr = 1.25e-3, a.seed = 77;
  TrainConfig b;
  apply_json(b, to_json(a), "test");
  EXPECT_EQ(to_json(a).dump(), to_json(b).dump());
  EXPECT_THROW(apply_json(b, nlohmann::json{{"nonsense", 1}}, "test"), Error);
}

}  // namespace

}  // namespace test_train_trainer
