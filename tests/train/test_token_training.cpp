// tests/train/test_token_training.cpp: training on a token file (data ending in .bin or .npy).
//
// A model of a non-byte vocabulary learns a token file's pattern (its validation loss falls far below the
// uniform log V), resumes bit-identically (the file is reopened and the data Rng continues), and starts
// from a Hugging Face directory of the same vocabulary (init_from) on token data: the workflow of
// docs/interop.md through the API. The config refuses a vocabulary other than 257 for text, val_data and
// doc_sep_id for non-token data, a separator outside the vocabulary; the trainer refuses an id outside the
// vocabulary before the first step, naming the file, the offset and the id.
#include <gtest/gtest.h>

#include <fbt/io/hf.hpp>
#include <fbt/train/trainer.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/hf_fixture.hpp"
#include "common/io_test.hpp"
#include "common/token_files.hpp"

namespace test_train_token_training {

using namespace fbt;
using namespace fbt_test;
using Glu = Model<float>;
using Plain = Model<float, NoFuser<float>>;
using Flags = std::vector<std::pair<std::string, std::string>>;

namespace {

constexpr int kV = 50;

// documents: separator 0, then a run start, start+3, start+6, ... (mod 49, + 1): after two ids the rest is
// determined, so a model that learns it scores far below log(50)
std::vector<std::int64_t> pattern_stream(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> v;
  while (int(v.size()) < n) {
    v.push_back(0);
    int x = int(rng.below(kV - 1));
    const int len = 8 + int(rng.below(16));
    for (int i = 0; i < len && int(v.size()) < n; ++i, x = (x + 3) % (kV - 1)) v.push_back(1 + x);
  }
  return v;
}

Flags flags(const std::string& data, const std::string& out) {
  return {{"data", data},           {"vocab_size", std::to_string(kV)}, {"doc_sep_id", "0"},       {"hidden_size", "32"},
          {"num_hidden_layers", "2"}, {"num_attention_heads", "2"},     {"num_key_value_heads", "1"}, {"intermediate_size", "64"},
          {"seq_len", "32"},        {"batch_size", "8"},               {"warmup_steps", "5"},      {"eval_every", "0"},
          {"eval_windows", "8"},    {"seq_eval_windows", "1"},         {"monitor_passes", "0"},    {"progress", "false"},
          {"out_dir", out},         {"feedback_start", "0.5"}};
}

class TokenTraining : public TempDirTest {};

}  // namespace

TEST_F(TokenTraining, ANonByteVocabularyLearnsTheFilesPattern) {
  write_token_bin(path("train.bin"), pattern_stream(6000, 1));
  write_token_npy(path("val.npy"), "<i8", pattern_stream(600, 2));
  Flags f = flags(path("train.bin"), path("run"));
  f.push_back({"val_data", path("val.npy")});
  f.push_back({"steps", "120"});
  f.push_back({"lr", "1e-2"});
  const TrainConfig c = make_train_config("", f);
  validate(c);
  Trainer<Glu> t(c);
  EXPECT_EQ(t.model.V, kV);
  EXPECT_NE(t.data->describe().find("vocabulary 50, separator 0"), std::string::npos) << t.data->describe();
  const double before = t.evaluate().val_loss[0];
  EXPECT_NEAR(before, std::log(double(kV)), 0.5) << "an untrained model is near uniform";
  t.run(nullptr);
  const EvalReport e = t.evaluate();
  // the pattern leaves about 2 uncertain ids per 16-id document (log 49 each): about 0.5 nats a token
  EXPECT_LT(e.val_loss[0], 1.5) << "pass 1 did not learn the pattern (uniform is " << std::log(double(kV)) << ")";
  EXPECT_LT(e.seq_loss_standard, 1.5);
}

TEST_F(TokenTraining, ResumesBitIdentically) {
  write_token_npy(path("train.npy"), "<u2", pattern_stream(3000, 3));
  Flags f = flags(path("train.npy"), path("a"));
  f.push_back({"steps", "8"});
  const TrainConfig c = make_train_config("", f);
  Trainer<Glu> straight(c);
  int fed_back = 0;
  for (int i = 0; i < 8; ++i) fed_back += straight.train_step().K > 1;
  EXPECT_GT(fed_back, 0) << "the run must exercise the fed-back passes";
  Trainer<Glu> first(c);
  for (int i = 0; i < 4; ++i) first.train_step();
  first.save_checkpoint(path("b/checkpoint"));
  auto resumed = Trainer<Glu>::resume(path("b/checkpoint"));  // reopens the token file, restores the data Rng
  EXPECT_EQ(resumed->step, 4);
  for (int i = 0; i < 4; ++i) resumed->train_step();
  ASSERT_EQ(resumed->model.params.size(), straight.model.params.size());
  EXPECT_EQ(std::memcmp(resumed->model.params.values(), straight.model.params.values(), straight.model.params.size() * sizeof(float)), 0)
      << "8 steps vs 4 + save + resume + 4 on a token file";
}

TEST_F(TokenTraining, StartsFromAHuggingFaceModelOfTheSameVocabulary) {
  ModelConfig pc;
  pc.vocab_size = kV, pc.hidden_size = 32, pc.num_hidden_layers = 2, pc.num_attention_heads = 2, pc.num_key_value_heads = 1;
  pc.intermediate_size = 64, pc.max_position_embeddings = 64, pc.fuser = "none", pc.tie_word_embeddings = true;
  Plain base(pc, 7);
  write_hf_fixture(path("hf"), base);
  write_token_bin(path("train.bin"), pattern_stream(3000, 4));
  Flags f = {{"preset", "paper"}, {"init_from", path("hf")}, {"fuser", "glu"}, {"data", path("train.bin")}, {"doc_sep_id", "0"},
             {"seq_len", "32"},   {"batch_size", "4"},       {"steps", "3"},   {"warmup_steps", "1"},     {"eval_every", "0"},
             {"eval_windows", "2"}, {"seq_eval_windows", "1"}, {"monitor_passes", "0"}, {"progress", "false"}, {"out_dir", path("run")}};
  const TrainConfig c = make_train_config("", f, [](const std::string& ck) { return read_checkpoint_config(ck); });
  EXPECT_EQ(c.model.vocab_size, kV) << "the vocabulary comes from the checkpoint";
  validate(c);
  Trainer<Glu> t(c);
  EXPECT_EQ(std::memcmp(t.model.params.value("model.embed_tokens.weight"), base.params.value("model.embed_tokens.weight"),
                        std::size_t(kV) * 32 * sizeof(float)),
            0);
  t.run(nullptr);
  EXPECT_EQ(t.step, 3);
}

TEST_F(TokenTraining, TheConfigAndTheTrainerRefuseWhatCannotWork) {
  write_token_bin(path("train.bin"), pattern_stream(2000, 5));
  TrainConfig c = make_train_config("", flags(path("train.bin"), path("run")));
  EXPECT_NO_THROW(validate(c));
  TrainConfig text = c;
  text.data = path("corpus.txt");
  text.doc_sep_id = -1;
  EXPECT_FBT_ERROR(validate(text), "vocab_size: is 50", "is read as bytes", "257");
  text.model.vocab_size = 257, text.val_data = path("v.bin");
  EXPECT_FBT_ERROR(validate(text), "val_data", "only token data");
  text.val_data.clear(), text.doc_sep_id = 3;
  EXPECT_FBT_ERROR(validate(text), "doc_sep_id", "bytes use their own separator");
  TrainConfig sep = c;
  sep.doc_sep_id = 50;
  EXPECT_FBT_ERROR(validate(sep), "doc_sep_id: 50 is outside the vocabulary [0, 50)");
  TrainConfig small = c;
  small.model.vocab_size = 40;  // the file holds ids up to 49
  EXPECT_FBT_ERROR(Trainer<Glu>{small}, "train.bin", "byte offset", "outside the vocabulary [0, 40) (vocab_size)");
  TrainConfig dt = c;
  dt.token_dtype = "float32";
  EXPECT_FBT_ERROR(validate(dt), "token_dtype", "float32");
}

}  // namespace test_train_token_training
