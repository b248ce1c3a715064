// tests/train/test_session.cpp: the loop as plain functions (fbt/session.hpp; compiled once in fbt::runtime,
// here inline from the headers). Checks:
// - check_model_gradients passes a correct fuser and fails one whose backward drops a term (the check can fail),
//   and refuses options outside their ranges, naming them;
// - Session::train runs the trainer to the end (its step and evaluation are the trainer's), generate decodes
//   within max_new_tokens in every mode, save + load gives the same prefill logits bit for bit, and the loaded
//   model names its pieces; a loaded model's evaluate() and an empty prompt are refused, naming what to do.
#include <gtest/gtest.h>

#include <cstring>

#include "common/errors.hpp"
#include "common/io_test.hpp"
#include "common/tiny_model.hpp"
#include "fbt/layers/fuser.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/session.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_session {

using namespace fbt;
using namespace fbt_test;

/// u = e + s W^T, with its backward missing `de += du` when Wrong (a mutant the check must catch).
template <class T, bool Wrong> struct AddW {
  using Scalar = T;
  static constexpr const char* name = Wrong ? "test_session_wrong_add" : "test_session_add";
  int D = 0;
  std::size_t w = 0;
  struct Cache {};
  explicit AddW(const FuserArgs& a) : D(a.hidden_size) {}
  void declare(const ParamRegistry<T>& r) { w = r.add("w_a.weight", {D, D}, Init::Zeros); }
  template <class Be> void alloc(const Be&, Carver<T>&, Carver<T>&, Cache&, int, bool) const {}
  template <class Be> void forward(Be& be, const Weights<T>& wt, Cache&, const T* s, const T* e, const T*, T* u, int N) const {
    be.copy(u, e, std::size_t(N) * D);
    linear(be, u, s, wt.value + w, N, D, D, D, true);
  }
  template <class Be>
  void backward(Be& be, const Weights<T>& wt, const Cache&, const T* s, const T*, const T*, const T* du, T* ds, T* de, T*, int N) const {
    if (!Wrong) be.add(de, du, std::size_t(N) * D);
    linear_backward(be, ds, wt.grad + w, du, s, wt.value + w, N, D, D, D);
  }
};
template <class T> using GoodAdd = AddW<T, false>;
template <class T> using WrongAdd = AddW<T, true>;

void register_once() {
  register_fuser<GoodAdd<float>>(), register_fuser<GoodAdd<double>>();
  register_fuser<WrongAdd<float>>(), register_fuser<WrongAdd<double>>();
}

TEST(Session, GradientCheckPassesACorrectFuserAndFailsAWrongOne) {
  register_once();
  ModelConfig c = tiny_config("test_session_add");
  const StepGradReport good = check_model_gradients(c);
  EXPECT_TRUE(good.ok(1e-6)) << good.str();
  EXPECT_GT(good.rows.size(), 5u);  // every tensor: embedding, blocks, the fuser's W, norms
  c.fuser = "test_session_wrong_add";
  const StepGradReport wrong = check_model_gradients(c);
  EXPECT_FALSE(wrong.ok(1e-3)) << wrong.str();  // the embedding's gradient misses the path through e
  ModelCheckOptions o;
  o.K = 0;
  EXPECT_FBT_ERROR(check_model_gradients(c, o), "K must be in [1, ");
  o = {}, o.prefix = 9;
  EXPECT_FBT_ERROR(check_model_gradients(c, o), "prefix (plain positions) must be in [0, seq_len = 8], got 9");
  o = {}, o.prefix = 8;  // every position plain: still a valid objective
  EXPECT_TRUE(check_model_gradients(tiny_config("test_session_add"), o).ok(1e-6));
  o = {}, o.seq_len = 1000;
  EXPECT_FBT_ERROR(check_model_gradients(c, o), "seq_len in [2, max_position_embeddings]");
}

class SessionRun : public TempDirTest {};

TEST_F(SessionRun, TrainsDecodesSavesAndLoads) {
  register_once();
  TrainConfig c;
  c.model.fuser = "test_session_add";
  c.model.hidden_size = 16, c.model.num_hidden_layers = 1, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 32, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 1;
  c.batch_size = 2, c.seq_len = 32, c.steps = 4, c.warmup_steps = 1;
  c.schedule.feedback_start = 0.5;
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 3, c.progress = false;
  c.out_dir = path("run");
  Session s = Session::train(c, nullptr);
  EXPECT_EQ(s.step(), 4);
  EXPECT_EQ(s.config().fuser, "test_session_add");
  const EvalReport e = s.evaluate();
  ASSERT_EQ(e.val_loss.size(), 3u);  // K_max passes
  EXPECT_TRUE(std::isfinite(e.val_loss[0]));
  const std::vector<int> prompt = ByteTokenizer::encode_document("1+2=?\n");
  for (const char* mode : {"standard", "soft", "fused(2)"}) {
    GenerateOptions go;
    go.mode = DecodeModeSpec::parse(mode), go.max_new_tokens = 5;
    const std::vector<int> out = s.generate(prompt, go);
    EXPECT_EQ(out.size(), 5u) << mode;
    for (int t : out) EXPECT_TRUE(t >= 0 && t < c.model.vocab_size) << mode;
  }
  const std::string file = path("add.safetensors");
  s.save(file);
  Session back = Session::load(file);
  EXPECT_EQ(back.config().fuser, "test_session_add");
  EXPECT_EQ(back.step(), 0);
  for (const char* mode : {"standard", "soft", "fused(2)"}) {
    const std::vector<float> a = s.prefill_logits(prompt, DecodeModeSpec::parse(mode));
    const std::vector<float> b = back.prefill_logits(prompt, DecodeModeSpec::parse(mode));
    ASSERT_EQ(a.size(), std::size_t(c.model.vocab_size));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << mode;
  }
  // the run's checkpoint directory loads too
  EXPECT_EQ(Session::load(c.out_dir + "/checkpoint").config().fuser, "test_session_add");
  EXPECT_FBT_ERROR(back.evaluate(), "a loaded model has no validation data", "fbt eval --checkpoint");
  EXPECT_FBT_ERROR(back.prefill_logits({}, DecodeModeSpec::parse("soft")), "the prompt holds 0 tokens");
}

}  // namespace test_train_session
