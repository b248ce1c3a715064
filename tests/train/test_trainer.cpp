// The trainer (issue 3): exact resume, non-finite stops naming step and pass, the sequential-exact loss
// with feedback off equals the parallel pass-1 loss, logs and checkpoints on disk, clear refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fbt/train/trainer.hpp"

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
  c.model.fuser = "concat";  // a config for another model type
  EXPECT_THROW(Trainer<Model<float>> t(c), Error);
  EXPECT_THROW(set_config_field(c, "hidden", "3"), Error);
  EXPECT_THROW(set_config_field(c, "hidden_size", "three"), Error);
  set_config_field(c, "pass_mix", "2:0.5,3:0.5");
  EXPECT_EQ(c.schedule.pass_mix.at(3), 0.5);
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
