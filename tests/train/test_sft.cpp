// tests/train/test_sft.cpp: fine-tuning on prompt/response data (io/sft_jsonl.hpp, data/sft_dataset.hpp).
//
// The JSONL reader takes text and token-id examples and refuses, in one line naming the file and the line,
// a line that is not an object, a missing field, an empty response, an id outside the vocabulary and a
// mixed file. The loss mask: every prompt target is -1 (and its rows of d loss / d logits are exactly 0,
// so prompt tokens get no gradient), every response target and the end-of-response separator count. On
// data whose prompts are random letters and whose response is fixed, K = 3 training drives the masked
// loss to about 0, while the same training unmasked cannot go below the prompts' entropy. SFT resumes bit
// identically (the JSONL is reopened through the config, the data Rng continues).
#include <gtest/gtest.h>

#include <fbt/io/hf.hpp>
#include <fbt/train/trainer.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "common/hf_fixture.hpp"
#include "common/io_test.hpp"
#include "common/tiny_model.hpp"

namespace test_train_sft {

using namespace fbt;
using namespace fbt_test;
using Glu = Model<float>;
using Flags = std::vector<std::pair<std::string, std::string>>;

namespace {

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// n examples: a prompt of 6 random lowercase letters and '?', the response "ok!\n" (deterministic)
std::string random_prompt_data(int n, std::uint64_t seed) {
  Rng rng(seed);
  std::string s;
  for (int i = 0; i < n; ++i) {
    std::string p;
    for (int j = 0; j < 6; ++j) p += char('a' + rng.below(26));
    s += "{\"prompt\": \"" + p + "?\", \"response\": \"ok!\\n\"}\n";
  }
  return s;
}

Flags flags(const std::string& data, const std::string& out) {
  return {{"data", data},          {"hidden_size", "32"},   {"num_hidden_layers", "2"}, {"num_attention_heads", "2"},
          {"num_key_value_heads", "1"}, {"intermediate_size", "64"}, {"seq_len", "32"},         {"batch_size", "8"},
          {"warmup_steps", "5"},   {"eval_every", "0"},     {"eval_windows", "16"},     {"seq_eval_windows", "0"},
          {"monitor_passes", "0"}, {"progress", "false"},   {"out_dir", out},
          // K = 3 from the first step: the fine-tuning schedule of docs/training.md
          {"feedback_start", "0"}, {"pass_mix", "3:1"},     {"K_max", "3"}};
}

class Sft : public TempDirTest {};

}  // namespace

TEST_F(Sft, ReadsTextAndTokenIdExamples) {
  write_file(path("t.jsonl"), "{\"prompt\": \"ab\", \"response\": \"c\", \"answer\": 1}\n\n{\"prompt\": \"\", \"response\": \"\\u00e9\"}\n");
  const SftFile t = read_sft_jsonl(path("t.jsonl"), 257);
  EXPECT_FALSE(t.ids);
  ASSERT_EQ(t.examples.size(), 2u);  // the blank line is skipped, the extra field ignored
  EXPECT_EQ(t.examples[0].prompt, (std::vector<int>{'a', 'b'}));
  EXPECT_EQ(t.examples[0].response, (std::vector<int>{'c'}));
  EXPECT_TRUE(t.examples[1].prompt.empty());
  EXPECT_EQ(t.examples[1].response, (std::vector<int>{0xC3, 0xA9}));  // UTF-8 bytes
  write_file(path("i.jsonl"), "{\"prompt\": [1, 2, 3], \"response\": [39]}\n");
  const SftFile i = read_sft_jsonl(path("i.jsonl"), 40);
  EXPECT_TRUE(i.ids);
  EXPECT_EQ(i.examples[0].prompt, (std::vector<int>{1, 2, 3}));
}

TEST_F(Sft, RefusesBadLinesNamingTheFileAndTheLine) {
  const std::string ok = "{\"prompt\": \"a\", \"response\": \"b\"}\n";
  struct Case {
    std::string text, line, what;
  };
  const std::vector<Case> cases{
      {ok + "[1, 2]\n", "line 2", "expected a JSON object"},
      {ok + "not json\n", "line 2", "invalid JSON"},
      {ok + ok + "{\"prompt\": \"a\"}\n", "line 3", "\"response\" is missing"},
      {"{\"response\": \"a\"}\n", "line 1", "\"prompt\" is missing"},
      {ok + "{\"prompt\": \"a\", \"response\": \"\"}\n", "line 2", "\"response\" is empty"},
      {"{\"prompt\": [1], \"response\": [7, 40]}\n", "line 1", "\"response\"[1] = 40 is outside the vocabulary [0, 40)"},
      {"{\"prompt\": [1], \"response\": [-1]}\n", "line 1", "outside the vocabulary"},
      {"{\"prompt\": [1.5], \"response\": [1]}\n", "line 1", "not an integer token id"},
      {ok + "{\"prompt\": [1], \"response\": [2]}\n", "line 2", "one form per file"},
      {"{\"prompt\": 3, \"response\": \"a\"}\n", "line 1", "must be a string (bytes) or an array of token ids"},
  };
  for (const Case& c : cases) {
    write_file(path("bad.jsonl"), c.text);
    const std::string m = error_of([&] { read_sft_jsonl(path("bad.jsonl"), 40); });
    EXPECT_TRUE(contains(m, "'" + path("bad.jsonl") + "' " + c.line + ": ")) << m;
    EXPECT_TRUE(contains(m, c.what)) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  }
  write_file(path("empty.jsonl"), "\n");
  EXPECT_TRUE(contains(error_of([&] { read_sft_jsonl(path("empty.jsonl"), 257); }), "no examples"));
  // text needs the byte vocabulary; a config names a validation file that is not .jsonl
  write_file(path("t.jsonl"), ok + ok);
  SftDatasetOptions o;
  o.vocab_size = 300;
  EXPECT_TRUE(contains(error_of([&] { SftDataset::open(path("t.jsonl"), o); }), "give token-id arrays"));
  Flags f = flags(path("t.jsonl"), path("run"));
  f.push_back({"val_data", path("v.bin")});
  EXPECT_TRUE(contains(error_of([&] { validate(make_train_config("", f)); }), "val_data"));
}

TEST_F(Sft, TheMaskCountsResponsesAndTheirEndAndGivesPromptsNoGradient) {
  // two documents per window at most: kSep "pq" "rs" | kSep "x" "yz"
  write_file(path("d.jsonl"), "{\"prompt\": \"pq\", \"response\": \"rs\"}\n{\"prompt\": \"x\", \"response\": \"yz\"}\n"
                              "{\"prompt\": \"v\", \"response\": \"w\"}\n");
  SftDatasetOptions o;
  o.val_fraction = 0.3;  // the last example
  const SftDataset d = SftDataset::open(path("d.jsonl"), o);
  EXPECT_EQ(d.train_examples(), 2u);
  EXPECT_EQ(d.val_examples(), 1u);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  const int T = 9;  // T+1 = 10 tokens: doc 0 (5), doc 1 (4), doc 0 again (1 of 5)
  Rng rng(1);
  for (int draw = 0; draw < 8; ++draw) {
    d.sample_batch(rng, 1, T, tok, tgt, ds);
    ASSERT_EQ(tok[0], kSep);
    for (int t = 0; t < T; ++t) {
      const int next = t + 1 < T ? tok[t + 1] : -2;  // the token target t names (when it is in the row)
      const bool prompt_next = next == 'p' || next == 'q' || next == 'x' || (next == kSep && (tok[t] == 'q' || tok[t] == 'x'));
      if (next == -2) continue;
      if (next == 'r' || next == 's' || next == 'y' || next == 'z') EXPECT_EQ(tgt[t], next) << "a response target, t " << t;
      else if (next == kSep) EXPECT_EQ(tgt[t], kSep) << "the end of a response counts, t " << t;
      else if (prompt_next) EXPECT_EQ(tgt[t], -1) << "a prompt target, t " << t;
      EXPECT_EQ(ds[t], t == 0 || tok[t] == kSep) << "each example is a document";
    }
  }
  // validation: the one example, padded; its response and end count
  ASSERT_EQ(d.num_eval_windows(T), 1);
  d.eval_window(0, T, tok, tgt, ds);
  EXPECT_EQ(tgt[0], -1);   // kSep -> 'v' (prompt)
  EXPECT_EQ(tgt[1], 'w');  // 'v' -> 'w'
  EXPECT_EQ(tgt[2], kSep); // 'w' -> the end
  for (int t = 3; t < T; ++t) EXPECT_EQ(tgt[t], -1) << "padding, t " << t;

  // no gradient from prompt targets: d loss / d logits is exactly 0 on their rows, not on a response's
  ModelConfig mc = tiny_config();
  mc.vocab_size = 257;
  Glu m(mc, 3);
  randomize(m, 4);
  d.sample_batch(rng, 2, T, tok, tgt, ds);
  CpuBackend<float> be;
  Workspace<Glu> w;
  PassRunner<Glu> run(be, m, m.weights(), w);
  run.prepare(2, T, 1, true);
  run.begin_batch(tok.data(), ds.data(), tgt.data());
  auto& p = w.pass[0];
  run.plain_input(p);
  run.stack_forward(p);
  run.head_forward(p, 1.0);  // w.logits now holds d(mean CE)/d logits
  int masked = 0, counted = 0;
  for (int n = 0; n < 2 * T; ++n) {
    double norm = 0;
    for (int v = 0; v < m.V; ++v) norm += std::fabs(double(w.logits[std::size_t(n) * m.V + v]));
    if (tgt[n] < 0) {
      EXPECT_EQ(norm, 0.0) << "row " << n << " (a prompt target) has a gradient";
      ++masked;
    } else {
      EXPECT_GT(norm, 1e-3) << "row " << n;
      ++counted;
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(counted, 0);
}

TEST_F(Sft, TheMaskedLossGoesToZeroWhereTheUnmaskedCannot) {
  write_file(path("sft.jsonl"), random_prompt_data(400, 7));
  Flags f = flags(path("sft.jsonl"), path("masked"));
  f.push_back({"steps", "150"});
  f.push_back({"lr", "1e-2"});
  const TrainConfig c = make_train_config("", f);
  validate(c);
  Trainer<Glu> masked(c);
  EXPECT_TRUE(contains(masked.data->describe(), "the loss counts response tokens only")) << masked.data->describe();
  masked.run(nullptr);
  const EvalReport e = masked.evaluate();
  ASSERT_EQ(e.val_loss.size(), 3u);
  for (double l : e.val_loss) EXPECT_LT(l, 0.05) << "a fixed response after a random prompt is learnable exactly";

  TrainConfig cu = c;
  cu.out_dir = path("unmasked");
  SftDatasetOptions o;
  o.mask_prompt = false;
  Trainer<Glu> unmasked(cu, std::make_unique<SftDataset>(SftDataset::open(path("sft.jsonl"), o)));
  unmasked.run(nullptr);
  // every document: kSep, 6 letters (log 26 each, unpredictable), '?', "ok!\n": 11 targets, 6 of them at
  // least log 26, so the mean cannot go below 6 log(26) / 11 = 1.78 nats (1.5 leaves room for the sample)
  EXPECT_GT(unmasked.evaluate().val_loss[0], 1.5);
}

// Issue 47: SFT data whose every prompt is longer than seq_len trained at loss 0 and gradient norm 0, evaluated
// to -nan and exited 0. Refused before step 1, naming the count and the seq_len needed; a run where only some
// examples are cut stops at the first batch with no target, naming the step.
TEST_F(Sft, NoTargetWithinSeqLenIsRefusedBeforeStepOneAndABatchWithoutTargetsStops) {
  const std::string long_prompt(40, 'x');  // sep + 40 letters + '?': the first response token is token 42
  std::string all_long;
  for (int i = 0; i < 6; ++i) all_long += "{\"prompt\": \"" + long_prompt + "?\", \"response\": \"ok\"}\n";
  write_file(path("long.jsonl"), all_long);
  Flags f = flags(path("long.jsonl"), path("long"));
  f.push_back({"steps", "3"});
  const std::string e = error_of([&] { Trainer<Glu> t(make_train_config("", f)); });
  EXPECT_TRUE(contains(e, "every training example (5) has its prompt cut at seq_len 32")) << e;
  EXPECT_TRUE(contains(e, "seq_len >= 42")) << e;
  for (auto& kv : f)  // long enough: it trains
    if (kv.first == "seq_len") kv.second = "48";
  EXPECT_NO_THROW(Trainer<Glu> t(make_train_config("", f)));

  std::string mixed = "{\"prompt\": \"a?\", \"response\": \"ok\"}\n" + all_long + "{\"prompt\": \"b?\", \"response\": \"ok\"}\n";
  write_file(path("mixed.jsonl"), mixed);  // train: 1 short and 6 long examples; validation: the last (short)
  Flags m = flags(path("mixed.jsonl"), path("mixed"));
  for (auto& kv : m)
    if (kv.first == "batch_size") kv.second = "1";
  m.push_back({"steps", "40"});
  m.push_back({"val_fraction", "0.125"});
  Trainer<Glu> t(make_train_config("", m));
  EXPECT_TRUE(contains(t.data->describe(), "6 of 7 training examples have no response token within seq_len 32")) << t.data->describe();
  const std::string stop = error_of([&] { t.run(nullptr); });
  EXPECT_TRUE(contains(stop, "training stopped at step")) << stop;
  EXPECT_TRUE(contains(stop, "the batch has no target")) << stop;
}

TEST_F(Sft, ResumesBitIdentically) {
  write_file(path("sft.jsonl"), random_prompt_data(60, 9));
  Flags f = flags(path("sft.jsonl"), path("a"));
  f.push_back({"steps", "8"});
  const TrainConfig c = make_train_config("", f);
  Trainer<Glu> straight(c);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(straight.train_step().K, 3);
  Trainer<Glu> first(c);
  for (int i = 0; i < 4; ++i) first.train_step();
  first.save_checkpoint(path("b/checkpoint"));
  auto resumed = Trainer<Glu>::resume(path("b/checkpoint"));  // reopens the JSONL through the config
  EXPECT_EQ(resumed->step, 4);
  for (int i = 0; i < 4; ++i) resumed->train_step();
  ASSERT_EQ(resumed->model.params.size(), straight.model.params.size());
  EXPECT_EQ(std::memcmp(resumed->model.params.values(), straight.model.params.values(), straight.model.params.size() * sizeof(float)), 0)
      << "8 steps vs 4 + save + resume + 4 on sft data";
}

// Token-id SFT from a Hugging Face directory (init_from): the vocabulary comes from the checkpoint, the
// weights are loaded, the ids are checked against it, and the run trains at K = 3.
TEST_F(Sft, StartsFromAHuggingFaceModelOnTokenIds) {
  constexpr int V = 50;
  ModelConfig pc;
  pc.vocab_size = V, pc.hidden_size = 32, pc.num_hidden_layers = 2, pc.num_attention_heads = 2, pc.num_key_value_heads = 1;
  pc.intermediate_size = 64, pc.max_position_embeddings = 64, pc.fuser = "none", pc.tie_word_embeddings = true;
  Model<float, NoFuser<float>> base(pc, 7);
  write_hf_fixture(path("hf"), base);
  Rng rng(3);
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "{\"prompt\": [";
    for (int j = 0; j < 5; ++j) text += (j ? ", " : "") + std::to_string(1 + rng.below(V - 1));
    text += "], \"response\": [7, 8, 9]}\n";
  }
  write_file(path("ids.jsonl"), text);
  Flags f = {{"preset", "paper"}, {"init_from", path("hf")}, {"fuser", "glu"}, {"data", path("ids.jsonl")}, {"doc_sep_id", "0"},
             {"seq_len", "32"},   {"batch_size", "4"},       {"steps", "3"},   {"warmup_steps", "1"},      {"eval_every", "0"},
             {"eval_windows", "2"}, {"seq_eval_windows", "1"}, {"monitor_passes", "0"}, {"progress", "false"}, {"out_dir", path("run")},
             {"feedback_start", "0"}, {"pass_mix", "3:1"},     {"K_max", "3"}};
  const TrainConfig c = make_train_config("", f, [](const std::string& ck) { return read_checkpoint_config(ck); });
  EXPECT_EQ(c.model.vocab_size, V) << "the vocabulary comes from the checkpoint";
  validate(c);
  Trainer<Glu> t(c);
  EXPECT_TRUE(contains(t.data->describe(), "token ids, vocabulary 50, separator 0")) << t.data->describe();
  EXPECT_EQ(std::memcmp(t.model.params.value("model.embed_tokens.weight"), base.params.value("model.embed_tokens.weight"), std::size_t(V) * 32 * sizeof(float)), 0);
  EXPECT_EQ(t.train_step().K, 3);
  // an id the checkpoint's vocabulary does not have is refused, naming the file and the line
  write_file(path("ids.jsonl"), text + "{\"prompt\": [1], \"response\": [50]}\n");
  EXPECT_TRUE(contains(error_of([&] { Trainer<Glu>{c}; }), "line 41: \"response\"[0] = 50 is outside the vocabulary [0, 50)"));
}

}  // namespace test_train_sft
