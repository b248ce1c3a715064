// Optimizers as types (train/optimizer.hpp): a program's own optimizer, with an option and a state tensor of
// its own, trains through the Trainer, is saved in the checkpoint and resumed bit for bit; the built-in
// ones are found by name; unknown names and bad options are refused naming them; and a program's own
// data source is asked for again on resume (a missing or different one is refused, never swapped).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "fbt/train/trainer.hpp"
#include "../common/io_test.hpp"

namespace test_train_optimizer {

using namespace fbt;

/// Sign descent with momentum: v = beta v + g (the store's first moment), w -= lr sign(v); a step counter
/// per parameter tensor as its own state ("opt.count", one value per tensor), to test that such state
/// is saved and restored.
struct SignMomentum {
  static constexpr const char* name = "test_signum";
  double beta = 0.9;
  std::vector<double> count_d;
  std::vector<float> count_f;
  static void declare_options(OptionList& o) { o.add_real("beta", 0.9, 0.0, 0.999, "momentum"); }
  explicit SignMomentum(const OptimizerArgs& a) : beta(a.options.get_real("beta")) {}
  template <class T> std::vector<T>& counts() {
    if constexpr (std::is_same<T, float>::value) return count_f;
    else return count_d;
  }
  template <class T> void init(ParamStore<T>& ps) { counts<T>().assign(ps.specs().size(), T(0)); }
  template <class T> void step(ParamStore<T>& ps, const OptimizerStep& s) {
    T* w = ps.values();
    T* v = ps.adam_m();
    const T* g = ps.grads();
    for (std::size_t i = 0; i < ps.size(); ++i) v[i] = T(beta) * v[i] + g[i], w[i] -= T(s.lr) * T((v[i] > 0) - (v[i] < 0));
    for (auto& c : counts<T>()) c += T(1);
    ++ps.step;
  }
  template <class T> void state(ParamStore<T>& ps, std::vector<StateTensor<T>>& out) {
    out.push_back({"count", Shape{long(ps.specs().size())}, counts<T>().data()});
  }
};

std::string temp_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "fbt_optimizer_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

TrainConfig tiny(const std::string& out) {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:running_sum", c.task_length = 12;
  c.batch_size = 4, c.seq_len = 32, c.steps = 8, c.warmup_steps = 2, c.lr = 1e-3;
  c.schedule.feedback_start = 0.25;
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 2, c.progress = false, c.out_dir = out;
  return c;
}

bool same_values(const ParamStore<float>& a, const ParamStore<float>& b) {
  return a.size() == b.size() && std::memcmp(a.values(), b.values(), a.size() * sizeof(float)) == 0 &&
         std::memcmp(a.adam_m(), b.adam_m(), a.size() * sizeof(float)) == 0 && a.step == b.step;
}

TEST(Optimizer, AProgramsOwnOptimizerTrainsSavesAndResumesBitForBit) {
  register_optimizer<SignMomentum>();
  const std::string dir = temp_dir("own");
  TrainConfig c = tiny(dir + "/a");
  c.optimizer = "test_signum", c.optimizer_options = {{"beta", OptionValue::of_text("0.8")}};
  Trainer<Model<float>> straight(c);
  for (int i = 0; i < 8; ++i) straight.train_step();
  c.out_dir = dir + "/b";
  Trainer<Model<float>> first(c);
  for (int i = 0; i < 4; ++i) first.train_step();
  first.save_checkpoint(dir + "/b/checkpoint");
  auto resumed = Trainer<Model<float>>::resume(dir + "/b/checkpoint");
  for (int i = 0; i < 4; ++i) resumed->train_step();
  EXPECT_TRUE(same_values(straight.model.params, resumed->model.params));
  const auto st = resumed->optimizer->state(resumed->model.params);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].data[0], 8.0f) << "the optimizer's own state was restored (4 saved + 4 new steps)";
  // a state tensor of its own missing from the file is refused by name
  EXPECT_FBT_ERROR(load_train_state(dir + "/b/checkpoint/train_state.safetensors", first.model.params,
                                    std::vector<TensorRef>{{"opt.other", "F32", Shape{3}, st[0].data}}),
                   "unknown optimizer state tensor", "opt.count");
  std::filesystem::remove_all(dir);
}

TEST(Optimizer, BuiltInsAreFoundAndBadNamesOrOptionsAreRefused) {
  for (const char* n : {"adamw", "muon", "normuon"}) EXPECT_TRUE(OptimizerRegistry::global().known(n)) << n;
  TrainConfig c = tiny("unused");
  c.optimizer = "adamz";
  EXPECT_FBT_ERROR(validate(c), "optimizer", "expected one of", "adamw", "\"adamz\"");
  register_optimizer<SignMomentum>();
  c.optimizer = "test_signum", c.optimizer_options = {{"beta", OptionValue::of_text("1.5")}};
  EXPECT_FBT_ERROR(validate(c), "optimizer_options.beta: must be a finite number in [0, 0.999], got 1.5");
  c.optimizer_options = {{"gamma", OptionValue::of_text("1")}};
  EXPECT_FBT_ERROR(validate(c), "optimizer_options.gamma: unknown option of optimizer \"test_signum\" (its options: beta)");
  set_config_field(c, "optimizer.beta", "0.5");
  EXPECT_EQ(c.optimizer_options.at("beta").s, "0.5");
}

/// A data source of the program's own: the running-sum task, described by a tag.
struct OwnSource : DataSource {
  std::unique_ptr<DataSource> inner;
  std::string tag;
  OwnSource(const TrainConfig& c, std::string t) : inner(make_data_source(c)), tag(std::move(t)) {}
  void sample_batch(Rng& r, int B, int T, std::vector<int>& x, std::vector<int>& y, std::vector<std::uint8_t>& d) const override {
    inner->sample_batch(r, B, T, x, y, d);
  }
  int num_eval_windows(int T) const override { return inner->num_eval_windows(T); }
  void eval_window(int i, int T, std::vector<int>& x, std::vector<int>& y, std::vector<std::uint8_t>& d) const override {
    inner->eval_window(i, T, x, y, d);
  }
  std::string describe() const override { return "own source " + tag; }
};

TEST(Trainer, ResumeKeepsTheProgramsOwnDataSource) {
  const std::string dir = temp_dir("source");
  const TrainConfig c = tiny(dir + "/a");
  Trainer<Model<float>> straight(c, std::make_unique<OwnSource>(c, "A"));
  for (int i = 0; i < 8; ++i) straight.train_step();
  Trainer<Model<float>> first(c, std::make_unique<OwnSource>(c, "A"));
  for (int i = 0; i < 4; ++i) first.train_step();
  const std::string ck = dir + "/b/checkpoint";
  first.save_checkpoint(ck);
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(ck), "trained on a data source of its program's own (own source A)");
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(ck, {}, std::make_unique<OwnSource>(c, "B")), "own source B", "own source A");
  auto resumed = Trainer<Model<float>>::resume(ck, {}, std::make_unique<OwnSource>(c, "A"));
  for (int i = 0; i < 4; ++i) resumed->train_step();
  EXPECT_TRUE(same_values(straight.model.params, resumed->model.params));
  // a run on its config's data is not resumed with another source
  Trainer<Model<float>> plain(c);
  plain.train_step();
  plain.save_checkpoint(dir + "/c/checkpoint");
  EXPECT_FBT_ERROR(Trainer<Model<float>>::resume(dir + "/c/checkpoint", {}, std::make_unique<OwnSource>(c, "A")),
                   "resume was given a data source (own source A)", "task:running_sum");
  std::filesystem::remove_all(dir);
}

}  // namespace test_train_optimizer
