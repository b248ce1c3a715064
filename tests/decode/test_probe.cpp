// The linear probe (train/probe.hpp, train/probe_io.hpp):
//   - the classifier: a hand-solved L2 logistic regression (the stationarity equation, by bisection;
//     tolerance 1e-6), the Wilson interval against hand-computed values
//   - the representation: depth 0 and depth L+1 equal the training forward's layer-0 input and final-norm
//     output at the probe position (standard, fused(k)), every depth equals the decoder's (observe) rows,
//     recurrent depth 0 is the decoder's fed-back input (1e-12, double); recurrent(k) is the decoder's
//     recurrent(k) prefill at every depth, recurrent(1) has fused(1)'s layer-0 input at the probe position
//   - a constructed case: the label is the token at the probe position, so depth 0 under standard prefill
//     reads it exactly (100%) and the last position, a constant token, reads nothing (exactly chance)
//   - the JSONL refusals name the file and the line
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>

#include "common/io_test.hpp"
#include "common/pass_runner.hpp"
#include "fbt/train/probe_io.hpp"

namespace test_decode_probe {

using namespace fbt;
using namespace fbt_test;

TEST(Probe, LogisticRegressionMatchesTheHandSolvedOptimum) {
  // x = +1 (class 1), x = -1 (class 0); by symmetry W = (-w, w), b = 0 and the objective is
  // lambda w^2 + 2 log(1 + exp(-2w)), stationary at lambda w = 2 sigmoid(-2w)
  for (double lambda : {0.5, 1.0, 4.0}) {
    Eigen::MatrixXd X(2, 1);
    X << 1.0, -1.0;
    const LogisticModel lm = fit_logistic(X, {1, 0}, 2, lambda);
    double lo = 0, hi = 10;
    for (int i = 0; i < 200; ++i) {
      const double w = 0.5 * (lo + hi);
      (lambda * w - 2.0 / (1.0 + std::exp(2 * w)) > 0 ? hi : lo) = w;
    }
    EXPECT_NEAR(lm.W(1, 0), lo, 1e-6) << "lambda " << lambda;
    EXPECT_NEAR(lm.W(0, 0), -lo, 1e-6);
    EXPECT_NEAR(lm.b(1) - lm.b(0), 0.0, 1e-6);
    EXPECT_LT(lm.grad_norm, 1e-6);
  }
  // three separable classes in 2-D are all predicted right, and the fit converges
  Eigen::MatrixXd X(6, 2);
  X << 3, 0, 3.5, 0.5, 0, 3, 0.5, 3.5, -3, -3, -3.5, -2.5;
  const std::vector<int> y = {0, 0, 1, 1, 2, 2};
  const LogisticModel lm = fit_logistic(X, y, 3, 0.1);
  EXPECT_LT(lm.grad_norm, 1e-6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(lm.predict(X.row(i).transpose()), y[i]) << i;
}

TEST(Probe, WilsonIntervalMatchesHandValues) {
  const auto a = wilson_interval(8, 10);  // p = 0.8, z = 1.96: [0.4902, 0.9433]
  EXPECT_NEAR(a.first, 0.4902, 1e-4);
  EXPECT_NEAR(a.second, 0.9433, 1e-4);
  const auto b = wilson_interval(0, 20);  // [0, 0.1611]
  EXPECT_NEAR(b.first, 0.0, 1e-12);
  EXPECT_NEAR(b.second, 0.1611, 1e-4);
}

ModelConfig probe_config() {
  ModelConfig c = tiny_config("glu");
  c.hidden_size = 16, c.head_dim = 4, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  return c;
}

/// n groups of two items of 6 tokens from 0..9, the last always 7, equal but at position `where`: one item
/// has a token < 5 there (label 1), the other one >= 5 (label 0). Probed at `pos`.
std::vector<ProbeExample> constructed(int n, int where, int pos) {
  Rng rng(5);
  std::vector<ProbeExample> ex;
  for (int g = 0; g < n; ++g) {
    ProbeExample e;
    for (int t = 0; t < 5; ++t) e.tokens.push_back(int(rng.below(10)));
    e.tokens.push_back(7);
    e.position = pos, e.group = g;
    for (int label : {1, 0}) {
      e.tokens[where] = int(rng.below(5)) + (label ? 0 : 5);
      e.label = label;
      ex.push_back(e);
    }
  }
  return ex;
}

double max_diff_row(const Eigen::MatrixXd& F, int i, const double* ref, int D) {
  double d = 0;
  for (int k = 0; k < D; ++k) d = std::max(d, std::abs(F(i, k) - ref[k]));
  return d;
}

TEST(Probe, FeaturesAreTheRepresentationAtTheProbePositionAndDepth) {
  const ModelConfig cfg = probe_config();
  Model<double> m(cfg, 7);
  randomize(m, 8);
  const int D = cfg.hidden_size, L = cfg.num_hidden_layers;
  const std::vector<ProbeExample> ex = constructed(3, 2, 3);  // 6 items  // probe position 3 of 6 tokens
  for (const char* mode : {"standard", "fused(2)"}) {
    const PrefillSpec p = PrefillSpec::parse(mode);
    const auto F = probe_features(m, ex, p, -1);
    ASSERT_EQ(int(F.size()), L + 2);
    for (int i = 0; i < 6; ++i) {
      std::vector<int> prompt(ex[i].tokens.begin(), ex[i].tokens.begin() + 4), targets(4, 0);
      const PassRun r = run_passes(m, Batch{1, 4, prompt.data(), targets.data(), nullptr}, p.kind == PrefillSpec::kFused ? 1 + p.k : 1);
      EXPECT_LT(max_diff_row(F[0], i, r.x0.back().data() + 3 * D, D), 1e-12) << mode << " depth 0, item " << i;
      EXPECT_LT(max_diff_row(F[L + 1], i, r.hf.back().data() + 3 * D, D), 1e-12) << mode << " final state, item " << i;
    }
  }
  // every depth against the decoder: a standard prefill of x_0..x_2, then x_3 as a plain step, observed;
  // and recurrent against a recurrent prefill of x_0..x_2 and x_3 as a soft step
  for (const char* mode : {"standard", "recurrent"}) {
    const auto F = probe_features(m, ex, PrefillSpec::parse(mode), -1);
    Decoder<Model<double>> dec(m);
    std::vector<std::vector<double>> rows(L + 2);
    dec.observe = [&](int depth, const double* x, int) { rows[depth].assign(x, x + D); };
    for (int i = 0; i < 6; ++i) {
      const bool rec = std::string(mode) == "recurrent";
      auto s = dec.new_sequence(4, DecodeModeSpec::parse(rec ? "soft/prefill=recurrent" : "standard"));
      std::vector<double> lg(cfg.vocab_size);
      dec.prefill(s, ex[i].tokens.data(), 3, lg.data());  // the prefill's steps overwrite rows; the last step's stay
      auto* sp = &s;
      dec.step(&sp, 1, &ex[i].tokens[3], lg.data());
      for (int d = 0; d < L + 2; ++d) EXPECT_LT(max_diff_row(F[d], i, rows[d].data(), D), 1e-12) << mode << " depth " << d << ", item " << i;
    }
  }
  // recurrent depth 0 differs from standard depth 0 (the state is fed in)
  const auto Fs = probe_features(m, ex, PrefillSpec::parse("standard"), -1), Fr = probe_features(m, ex, PrefillSpec::parse("recurrent"), -1);
  EXPECT_GT((Fs[0] - Fr[0]).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(Probe, RecurrentSuffixFeaturesAreTheDecodersAndRecurrentOneHasFusedOnesLayerZeroInput) {
  const ModelConfig cfg = probe_config();
  Model<double> m(cfg, 7);
  randomize(m, 8);
  const int D = cfg.hidden_size, L = cfg.num_hidden_layers;
  const std::vector<ProbeExample> ex = constructed(3, 2, 3);  // probe position 3: a 4-token prompt
  Decoder<Model<double>> dec(m);
  std::vector<std::vector<double>> rows(L + 2);
  dec.observe = [&](int depth, const double* x, int) { rows[depth].assign(x, x + D); };
  // every depth: the decoder's own recurrent(k) prefill of x_0..x_3 (its last step is the probe position)
  for (int k : {1, 2, 3, 50}) {
    const std::string mode = "recurrent(" + std::to_string(k) + ")";
    const auto F = probe_features(m, ex, PrefillSpec::parse(mode), -1);
    for (int i = 0; i < 6; ++i) {
      auto s = dec.new_sequence(4, DecodeModeSpec::parse("soft/prefill=" + mode));
      std::vector<double> lg(cfg.vocab_size);
      dec.prefill(s, ex[i].tokens.data(), 4, lg.data());
      for (int d = 0; d < L + 2; ++d) EXPECT_LT(max_diff_row(F[d], i, rows[d].data(), D), 1e-12) << mode << " depth " << d << ", item " << i;
    }
  }
  // recurrent(1): the probe position's layer-0 input is fused(1)'s (x_3 fused with the plain pass's state at
  // x_2); deeper, fused(1) attends to fed-back keys of x_0..x_2 and recurrent(1) to plain ones
  const auto F1 = probe_features(m, ex, PrefillSpec::parse("recurrent(1)"), -1), Ff = probe_features(m, ex, PrefillSpec::parse("fused(1)"), -1);
  EXPECT_LT((F1[0] - Ff[0]).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_GT((F1[L + 1] - Ff[L + 1]).cwiseAbs().maxCoeff(), 1e-8);
  // recurrent(k >= 3) is the full recurrence on a 4-token prompt; recurrent(2) is not
  const auto Fr = probe_features(m, ex, PrefillSpec::parse("recurrent"), -1), F3 = probe_features(m, ex, PrefillSpec::parse("recurrent(3)"), -1),
             F2 = probe_features(m, ex, PrefillSpec::parse("recurrent(2)"), -1);
  for (int d = 0; d < L + 2; ++d) EXPECT_EQ((Fr[d] - F3[d]).cwiseAbs().maxCoeff(), 0.0) << "depth " << d;
  EXPECT_GT((Fr[L + 1] - F2[L + 1]).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(Probe, ReadsTheLabelAtLayerZeroOfItsPositionAndNotElsewhere) {
  const ModelConfig cfg = probe_config();
  Model<double> m(cfg, 9);
  randomize(m, 10);
  const std::vector<std::string> classes = {"high", "low"};
  ProbeOptions o;
  o.modes = {"standard"};
  // the label is the token at position 2: depth 0 there is N_in(e(token)), which tells it exactly
  const ProbeResult at = run_probe(m, constructed(40, 2, 2), classes, o, -1);
  // probed at the last position, whose token (7) is the same in every item: depth 0 holds nothing
  const ProbeResult last = run_probe(m, constructed(40, 2, 5), classes, o, -1);
  ASSERT_EQ(int(at.cells.size()), cfg.num_hidden_layers + 2);
  EXPECT_EQ(at.cells[0].depth, 0);
  EXPECT_EQ(at.cells[0].accuracy, 1.0) << "depth 0 at the label's position";
  EXPECT_EQ(last.chance, 0.5);
  EXPECT_EQ(last.cells[0].accuracy, 0.5) << "depth 0 of a constant token: equal features, one prediction per balanced fold";
  EXPECT_GT(at.cells[0].hi, at.cells[0].lo);
}

// Issue 47: a one-class probe reported accuracy 1.000 at chance 1.000, and too few groups for the folds failed an
// internal check (with a source path) after every feature was computed. Both are refused first, in one line.
TEST(Probe, ItemsNoProbeCanScoreAreRefusedBeforeAnyFeature) {
  Model<double> m(probe_config(), 9);
  ProbeOptions o;
  o.modes = {"standard"};
  std::vector<ProbeExample> one = constructed(8, 2, 2);
  for (auto& e : one) e.label = 0;
  EXPECT_FBT_ERROR(run_probe(m, one, {"high"}, o, -1), "probe: the items have 1 class (high)", "at least 2");
  const std::vector<ProbeExample> few = constructed(3, 2, 2);  // 3 groups of 2 items: 3 < 4 folds
  EXPECT_FBT_ERROR(run_probe(m, few, {"high", "low"}, o, -1), "probe: the items hold 3 distinct group(s), fewer than the 4 folds");
  try {
    run_probe(m, few, {"high", "low"}, o, -1);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find(".hpp"), std::string::npos) << "an internal check's source path: " << e.what();
  }
  std::vector<ProbeExample> split = constructed(8, 2, 2);  // a setting with too few groups of its own is named
  for (std::size_t i = 0; i < split.size(); ++i) split[i].setting = i < 4 ? "short" : "long";
  EXPECT_FBT_ERROR(run_probe(m, split, {"high", "low"}, o, -1), "setting \"short\" holds 2 distinct group(s)");
  o.per_setting = false;
  EXPECT_NO_THROW(run_probe(m, split, {"high", "low"}, o, -1));
}

TEST(Probe, StandardPrefillLayerZeroAtTheFinalColonIsExactlyChance) {
  // PROBING.md 3.1: under standard prefill depth 0 is the same ':' input in every prompt, and the folds
  // are label-balanced (whole groups), so the held-out accuracy is exactly 50%
  ModelConfig cfg = probe_config();
  cfg.vocab_size = 257, cfg.max_position_embeddings = 128;
  Model<double> m(cfg, 11);
  randomize(m, 12);
  ProbeTaskOptions t;
  t.null_lines = {0}, t.groups = 16;
  std::vector<std::string> classes;
  const auto ex = probe_examples(probe_task_items("completion", t), classes);
  ProbeOptions o;
  o.modes = {"standard", "recurrent"};
  const ProbeResult r = run_probe(m, ex, classes, o);
  EXPECT_EQ(r.chance, 0.5);
  for (const ProbeCell& c : r.cells)
    if (c.depth == 0 && c.mode == "standard") EXPECT_EQ(c.accuracy, 0.5);
  bool has_recurrent = false;
  for (const ProbeCell& c : r.cells) has_recurrent |= c.mode == "recurrent";
  EXPECT_TRUE(has_recurrent);
}

std::string write_tmp(const std::string& name, const std::string& text) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p) << text;
  return p;
}

TEST(Probe, JsonlItemsAreReadAndBadLinesRefusedNamingFileAndLine) {
  std::vector<std::string> classes;
  const std::string ok = write_tmp("probe_ok.jsonl", "{\"text\": \"ab:\", \"label\": \"x\"}\n\n{\"text\": \"cd:\", \"label\": 3, \"position\": 0, \"group\": 9}\n"
                                                     "{\"tokens\": [1, 2, 3], \"label\": \"x\"}\n");
  const auto ex = read_probe_items(ok, 257, classes);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(classes, (std::vector<std::string>{"x", "3"}));
  EXPECT_EQ(ex[0].position, 3);  // kSep a b ':' -> the ':' is token 3
  EXPECT_EQ(ex[1].position, 1);  // byte 0 of the text is token 1
  EXPECT_EQ(ex[1].group, 9);
  EXPECT_EQ(ex[1].label, 1);
  EXPECT_EQ(ex[2].position, 2);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[1, 2]", "expected a JSON object"},
      {"{\"text\": \"ab\"}", "missing field \"label\""},
      {"{\"text\": \"ab\", \"label\": 1.5}", "\"label\" must be an integer or a string"},
      {"{\"text\": \"ab\", \"label\": true}", "\"label\" must be an integer or a string"},
      {"{\"text\": \"ab\", \"label\": 1, \"position\": 2}", "position 2 is outside the text [0, 2)"},
      {"{\"text\": \"ab\", \"label\": 1, \"position\": -1}", "position -1 is outside"},
      {"{\"tokens\": [1, 300], \"label\": 1}", "token id 300 is outside the vocabulary"},
      {"{\"text\": \"ab\", \"tokens\": [1], \"label\": 1}", "exactly one of"},
      {"{\"text\": 5, \"label\": 1}", "\"text\" must be a string"},
      {"{\"text\": \"ab\", \"label\": 1", "invalid JSON"},
      {"{\"text\": \"ab\", \"label\": 1, \"label\": 0}", "duplicate key \"label\""},
      {std::string("{\"text\": \"ab\", \"label\": 1}") + '\0' + "{\"x\": 1}", "a NUL byte at offset 26"},
      {"{\"text\": \"ab\", \"label\": 1} {\"text\": \"cd\", \"label\": 2}", "invalid JSON"},
      {"{\"text\": \"ab\", \"label\": 1, \"group\": 9223372036854775808}", "\"group\" must be an integer in [-2^63, 2^63)"},
      {"{\"text\": \"ab\", \"label\": \"" + std::string(5000, 'x') + "\"}", "\"label\" is 5000 bytes long (at most 256)"},
      {"{\"tokens\": [1, " + std::string(400, '9') + "], \"label\": 1}", "invalid JSON"},
  };
  for (const auto& [line, want] : bad) {
    const std::string p = write_tmp("probe_bad.jsonl", "{\"text\": \"ok\", \"label\": 0}\n" + line + "\n");
    try {
      read_probe_items(p, 257, classes);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p + ":2: "), std::string::npos) << msg;
      EXPECT_NE(msg.find(want), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_LE(msg.size(), 300u + p.size()) << "a bounded excerpt, not the value: " << msg.size() << " bytes";
    }
  }
}

// Group ids are 64-bit: g and 2^32 + g are two groups (cut to 32 bits they merged, and items leaked across folds);
// a FIFO or a device is refused before it is opened (a FIFO blocked the reader, /dev/zero filled memory).
TEST(Probe, JsonlGroupsAre64BitAndOnlyRegularFilesAreRead) {
  std::vector<std::string> classes;
  const std::string p = write_tmp("probe_groups.jsonl", "{\"text\": \"ab\", \"label\": 0, \"group\": 7}\n"
                                                        "{\"text\": \"cd\", \"label\": 1, \"group\": 4294967303}\n"
                                                        "{\"text\": \"ef\", \"label\": 1, \"group\": -9223372036854775808}\n");
  const auto ex = read_probe_items(p, 257, classes);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].group, 7);
  EXPECT_EQ(ex[1].group, (std::int64_t(1) << 32) + 7);
  EXPECT_EQ(ex[2].group, std::numeric_limits<std::int64_t>::min());
  EXPECT_FBT_ERROR(read_probe_items("/dev/zero", 257, classes), "/dev/zero", "not a regular file");
  const std::string fifo = ::testing::TempDir() + "probe_fifo_" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(read_probe_items(fifo, 257, classes), fifo, "not a regular file");
  std::remove(fifo.c_str());
}

}  // namespace test_decode_probe
