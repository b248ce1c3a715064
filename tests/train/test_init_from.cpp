// tests/train/test_init_from.cpp: a full-bandwidth run started from a plain checkpoint (TrainConfig::init_from,
// fbt train --init_from).
//
// From an fbt baseline checkpoint and from a Hugging Face directory (tests/common/hf_fixture.hpp): the stack's
// sizes come from the checkpoint (make_train_config's init_from_stack), every stack tensor is the
// checkpoint's bit for bit, the feedback tensors are what the seed initialises, the optimizer starts fresh
// (step 0, zero moments). Under the paper preset, whose pass 1 reads the raw embedding, pass 1 of the new
// model computes the loaded model's logits exactly at step 0; under v1 (input_norm all: pass 1 reads
// N_in(e)) it does not, which the docs say. The run then trains, and resumes without reading init_from
// again. Refused, naming the tensor: a stack flag that contradicts the checkpoint.
#include <gtest/gtest.h>

#include <fbt/io/hf.hpp>
#include <fbt/train/evaluate.hpp>
#include <fbt/train/trainer.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/hf_fixture.hpp"
#include "common/io_test.hpp"
#include "common/tiny_model.hpp"

namespace test_train_init_from {

namespace fs = std::filesystem;
using namespace fbt;
using namespace fbt_test;
using Plain = Model<float, NoFuser<float>>;
using Glu = Model<float>;
using Flags = std::vector<std::pair<std::string, std::string>>;

namespace {

ModelConfig plain_config() {
  ModelConfig c;
  c.vocab_size = 257, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.head_dim = 12, c.intermediate_size = 48, c.max_position_embeddings = 64, c.fuser = "none", c.tie_word_embeddings = true;
  return c;
}

Flags run_flags(const std::string& preset, const std::string& from, const std::string& out) {
  return {{"preset", preset},  {"init_from", from},     {"fuser", "glu"},        {"data", "task:addition"}, {"task_difficulty", "2"},
          {"batch_size", "4"}, {"seq_len", "32"},       {"steps", "4"},          {"warmup_steps", "1"},     {"eval_every", "0"},
          {"eval_windows", "2"}, {"seq_eval_windows", "1"}, {"monitor_passes", "2"}, {"progress", "false"}, {"out_dir", out}};
}

TrainConfig config_for(const Flags& f) {
  return make_train_config("", f, [](const std::string& ck) { return read_checkpoint_config(ck); });
}

class InitFrom : public TempDirTest {};

}  // namespace

TEST_F(InitFrom, TheStackIsTheCheckpointsAndPassOneItsLogits) {
  Plain base(plain_config(), 3);
  randomize(base, 4);
  fs::create_directories(path("fbt"));
  save_model(path("fbt/model.safetensors"), base);
  write_hf_fixture(path("hf"), base);
  const TinyBatch tb = tiny_batch(2, 12, 257, 5);
  const std::vector<float> want = pass_logits(base, tb.batch(), 1);
  for (const std::string& from : {path("fbt"), path("hf")}) {
    const TrainConfig c = config_for(run_flags("paper", from, path("run_paper")));
    EXPECT_EQ(c.model.hidden_size, 32) << "the stack's sizes come from the checkpoint";
    EXPECT_EQ(c.model.head_dim, 12);
    EXPECT_EQ(c.model.num_key_value_heads, 2);
    Trainer<Glu> t(c);
    for (const auto& sp : base.params.specs())
      EXPECT_EQ(std::memcmp(t.model.params.value(sp.name), base.params.value(sp.name), sp.size * sizeof(float)), 0) << from << ": " << sp.name;
    const Glu fresh(c.model, c.seed);  // the feedback tensors: as the seed initialises them
    for (const auto& sp : t.model.params.specs())
      if (sp.name.rfind("model.feedback.", 0) == 0)
        EXPECT_EQ(std::memcmp(t.model.params.value(sp.name), fresh.params.value(sp.name), sp.size * sizeof(float)), 0) << sp.name;
    EXPECT_EQ(t.model.params.step, 0);
    EXPECT_EQ(t.step, 0);
    // the paper's pass 1 reads the raw embedding: the loaded model's logits, exactly
    EXPECT_EQ(pass_logits(t.model, tb.batch(), 1), want) << from;
    fs::remove_all(path("run_paper"));
  }
  // v1: pass 1 reads N_in(e), so it is not the loaded model at step 0
  const TrainConfig v1 = config_for(run_flags("v1", path("hf"), path("run_v1")));
  ASSERT_EQ(v1.model.input_norm, "all");
  Trainer<Glu> t1(v1);
  EXPECT_NE(pass_logits(t1.model, tb.batch(), 1), want);
}

TEST_F(InitFrom, TrainsAndResumesWithoutReadingTheCheckpointAgain) {
  Plain base(plain_config(), 3);
  randomize(base, 6);
  write_hf_fixture(path("hf"), base);
  const TrainConfig c = config_for(run_flags("paper", path("hf"), path("run")));
  {
    Trainer<Glu> t(c);
    t.run(nullptr);
    EXPECT_EQ(t.step, 4);
  }
  fs::remove_all(path("hf"));  // a resume needs only the run's own checkpoint
  auto r = Trainer<Glu>::resume(path("run/checkpoint"), [](TrainConfig& x) { x.steps = 6; });
  EXPECT_EQ(r->cfg.init_from, path("hf")) << "the run still records where it started";
  r->run(nullptr);
  EXPECT_EQ(r->step, 6);
}

TEST_F(InitFrom, AStackThatContradictsTheCheckpointIsRefused) {
  Plain base(plain_config(), 3);
  write_hf_fixture(path("hf"), base);
  Flags f = run_flags("paper", path("hf"), path("run"));
  f.push_back({"intermediate_size", "64"});  // an explicit flag wins over the checkpoint's 48, and the tensors say otherwise
  const TrainConfig c = config_for(f);
  EXPECT_EQ(c.model.intermediate_size, 64);
  EXPECT_FBT_ERROR(Trainer<Glu>{c}, "model.layers.0.mlp.", "in the checkpoint, but the run's model has", "64");
}

}  // namespace test_train_init_from
