// fbt task evaluation (train/task_eval.hpp): scoring of generated solutions on a hand-made, decoder-free
// case (overall and, with trace_tag, per requested level), and a decoded run whose per-level results
// cover every requested level.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fbt/io/sft_jsonl.hpp"
#include "fbt/train/task_eval.hpp"
#include "../common/tiny_model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_task_eval {

using namespace fbt;

namespace {

TaskConfig addition(bool tag) {
  TaskConfig c;
  c.name = "addition", c.difficulty = 3, c.trace_tag = tag;
  return c;
}

double median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TEST(TaskEval, ScoresEachRequestedLevelOnHandMadeOutputs) {
  const int n = 4;
  const TaskConfig task = addition(true);
  const std::vector<Example> ex = eval_examples_at_levels(task, n, 77);
  ASSERT_EQ(int(ex.size()), 3 * n);
  // full: every reference solution (all right); compressed: the reference for the first problem, the
  // answer alone for the second, a wrong answer for the third, an unfinished trace for the fourth;
  // answer: the answer line (all right)
  std::vector<std::string> out;
  std::vector<int> full_len, comp_len, ans_len;
  for (int i = 0; i < n; ++i) out.push_back(ex[i].solution), full_len.push_back(int(ex[i].solution.size()));
  for (int i = 0; i < n; ++i) {
    const Example& e = ex[std::size_t(n + i)];
    std::string s = i == 0 ? e.solution : i == 1 ? "#### " + e.answer + "\n" : i == 2 ? "1 2 3\n#### 0\n" : "11 13";
    out.push_back(s);
    comp_len.push_back(int(s.size()));
  }
  for (int i = 0; i < n; ++i) {
    const Example& e = ex[std::size_t(2 * n + i)];
    out.push_back("#### " + e.answer + "\n");
    ans_len.push_back(int(out.back().size()));
    EXPECT_EQ(out.back(), e.solution) << "the answer level's reference is the answer line";
  }
  const TaskEvalResult r = score_task_outputs(task, ex, out, "soft");
  EXPECT_EQ(r.mode, "soft");
  EXPECT_EQ(r.examples, 3 * n);
  EXPECT_DOUBLE_EQ(r.accuracy, 10.0 / 12);
  EXPECT_DOUBLE_EQ(r.completed, 11.0 / 12);
  std::vector<int> all = full_len;
  all.insert(all.end(), comp_len.begin(), comp_len.end());
  all.insert(all.end(), ans_len.begin(), ans_len.end());
  EXPECT_DOUBLE_EQ(r.median_trace, median(all));
  ASSERT_EQ(r.levels.size(), 3u);
  const double acc[3] = {1.0, 0.5, 1.0}, done[3] = {1.0, 0.75, 1.0};
  const std::vector<int>* lens[3] = {&full_len, &comp_len, &ans_len};
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(r.levels[l].level, verbosity_levels()[l]);
    EXPECT_EQ(r.levels[l].examples, n);
    EXPECT_DOUBLE_EQ(r.levels[l].accuracy, acc[l]) << r.levels[l].level;
    EXPECT_DOUBLE_EQ(r.levels[l].completed, done[l]) << r.levels[l].level;
    EXPECT_DOUBLE_EQ(r.levels[l].median_trace, median(*lens[l])) << r.levels[l].level;
  }
  EXPECT_LT(r.levels[2].median_trace, r.levels[0].median_trace) << "answer-only solutions are the shortest";
  // without trace_tag: the same overall figures and no per-level results
  const TaskEvalResult plain = score_task_outputs(addition(false), ex, out, "soft");
  EXPECT_TRUE(plain.levels.empty());
  EXPECT_EQ(plain.accuracy, r.accuracy);
  EXPECT_EQ(plain.median_trace, r.median_trace);
  // a level without examples is left out
  const std::vector<Example> two(ex.begin(), ex.begin() + 2 * n);
  const std::vector<std::string> two_out(out.begin(), out.begin() + 2 * n);
  EXPECT_EQ(score_task_outputs(task, two, two_out, "soft").levels.size(), 2u);
  EXPECT_THROW(score_task_outputs(task, two, out, "soft"), Error);
}

TEST(TaskEval, DecodedRunReportsEveryRequestedLevel) {
  ModelConfig c;
  c.vocab_size = ByteTokenizer::kVocabSize, c.hidden_size = 16, c.num_hidden_layers = 1, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 24, c.max_position_embeddings = 128, c.fuser = "glu";
  Model<float> m(c, 9);
  Decoder<Model<float>> dec(m, kSep);
  const TaskConfig task = addition(true);
  const int n = 3;
  const std::vector<Example> ex = eval_examples_at_levels(task, n, 5);
  const int budget = 12;
  const TaskEvalResult r = evaluate_task(dec, task, ex, DecodeModeSpec::parse("soft"), budget);
  ASSERT_EQ(r.levels.size(), 3u);
  double acc = 0;
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(r.levels[l].examples, n);
    EXPECT_LE(r.levels[l].median_trace, budget);
    acc += r.levels[l].accuracy / 3;
  }
  EXPECT_DOUBLE_EQ(r.accuracy, acc) << "equal counts: the overall accuracy is the levels' mean";
  EXPECT_TRUE(evaluate_task(dec, addition(false), ex, DecodeModeSpec{}, budget).levels.empty());
}

TEST(TaskEval, TracesRoundTripThroughTheSftReader) {
  // a model's own decodes written as SFT JSONL and read back: prompt and response byte for byte, in order;
  // an empty output and a non-ASCII one are left out (the reader refuses an empty response), and with
  // correct_only a wrong answer too
  const TaskConfig task = addition(false);
  const std::vector<Example> ex = eval_examples(task, 5, 91);
  std::vector<std::string> out = {ex[0].solution, "7 7\n#### 1\n", "", std::string("\xc3 #### 2\n"), "\"quoted\"\\ #### " + ex[4].answer + "\n"};
  const TaskEvalResult r = score_task_outputs(task, ex, out, "soft");
  ASSERT_EQ(r.outputs, out);
  const std::string path = ::testing::TempDir() + "fbt_traces_roundtrip.jsonl";
  const TracesWritten all = write_traces_jsonl(path, ex, r, false);
  EXPECT_EQ(all.written, 3);
  EXPECT_EQ(all.empty, 1);
  EXPECT_EQ(all.not_text, 1);
  EXPECT_EQ(all.wrong, 0);
  SftFile f = read_sft_jsonl(path, ByteTokenizer::kVocabSize);
  EXPECT_FALSE(f.ids);
  ASSERT_EQ(f.examples.size(), 3u);
  const std::vector<int> kept = {0, 1, 4};
  for (int j = 0; j < 3; ++j) {
    const int i = kept[j];
    EXPECT_EQ(ByteTokenizer::decode(f.examples[j].prompt), ex[i].prompt) << i;
    EXPECT_EQ(ByteTokenizer::decode(f.examples[j].response), out[i]) << i;
  }
  // correct only: example 0 (the reference) and 4 (the right answer after a quoted trace) stay, 1 is wrong
  const TracesWritten right = write_traces_jsonl(path, ex, r, true);
  EXPECT_EQ(right.written, 2);
  EXPECT_EQ(right.wrong, 1);
  f = read_sft_jsonl(path, ByteTokenizer::kVocabSize);
  ASSERT_EQ(f.examples.size(), 2u);
  EXPECT_EQ(ByteTokenizer::decode(f.examples[1].response), out[4]);
  // append adds to the file
  (void)write_traces_jsonl(path, ex, r, true, true);
  EXPECT_EQ(read_sft_jsonl(path, ByteTokenizer::kVocabSize).examples.size(), 4u);
}

}  // namespace test_train_task_eval
