// fbt evaluation (train/evaluate.hpp): target positions within a document, the per-pass losses against
// multipass_step's, losses by position that sum back to the overall loss (weighted by counts) for every
// pass, sequential mode and the optimum, pass 1 against standard sequential decoding position by position,
// and the all-windows sequential loss against the per-window losses averaged.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fbt/data/state_tasks.hpp"
#include "fbt/train/evaluate.hpp"
#include "../common/tiny_model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_evaluate {

using namespace fbt;

namespace {

// A small double model over the byte vocabulary (the data sources' tokens).
ModelConfig byte_config(const std::string& fuser) {
  ModelConfig c;
  c.vocab_size = ByteTokenizer::kVocabSize, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 24, c.max_position_embeddings = 128, c.fuser = fuser;
  return c;
}

StateTaskDataset small_data(const std::string& name = "running_sum", int L = 12) {
  StateTaskConfig c;
  c.name = name, c.difficulty = 3, c.length = L;
  StateTaskDatasetOptions o;
  o.val_documents = 40;
  return StateTaskDataset(c, o);
}

// One validation window of another source, as a source of its own.
struct OneWindow : DataSource {
  const DataSource& inner;
  int index;
  OneWindow(const DataSource& d, int i) : inner(d), index(i) {}
  void sample_batch(Rng&, int, int, std::vector<int>&, std::vector<int>&, std::vector<std::uint8_t>&) const override {}
  int num_eval_windows(int) const override { return 1; }
  void eval_window(int, int T, std::vector<int>& a, std::vector<int>& b, std::vector<std::uint8_t>& c) const override { inner.eval_window(index, T, a, b, c); }
  std::string describe() const override { return "one window"; }
};

double weighted(const PositionSums& p) {  // sum_i mean_i count_i / sum_i count_i, from the means
  const std::vector<double> m = p.mean();
  double s = 0;
  long c = 0;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (p.count[i] > 0) s += m[i] * double(p.count[i]), c += p.count[i];
  return s / double(c);
}

}  // namespace

TEST(Evaluate, TargetPositionsCountFromEachDocumentsSeparator) {
  // window tokens  S a b S c d e   (S = kSep), and the token after the window, f
  const int S = kSep;
  const std::vector<int> tok = {S, 'a', 'b', S, 'c', 'd', 'e'}, tgt = {'a', 'b', S, 'c', 'd', 'e', 'f'};
  const std::vector<std::uint8_t> ds = {1, 0, 0, 1, 0, 0, 0};
  std::vector<int> pos(7);
  target_positions(tgt.data(), ds.data(), 7, pos.data());
  EXPECT_EQ(pos, (std::vector<int>{1, 2, 0, 1, 2, 3, 4}));
  // a window that starts inside a document (text data): counted from the window's first token
  const std::vector<int> tok2 = {'x', 'y', S, 'z'}, tgt2 = {'y', S, 'z', 'w'};
  const std::vector<std::uint8_t> ds2 = {1, 0, 1, 0};
  std::vector<int> pos2(4);
  target_positions(tgt2.data(), ds2.data(), 4, pos2.data());
  EXPECT_EQ(pos2, (std::vector<int>{1, 0, 1, 2}));
  // the table: one entry per position up to min(T, 256), the last pooling everything beyond
  EXPECT_EQ(loss_positions(128), 129);
  EXPECT_EQ(loss_positions(1024), kMaxLossPositions + 1);
  PositionSums p;
  p.reset(4);
  p.add(0, 1.0), p.add(2, 3.0), p.add(3, 5.0), p.add(9, 7.0);
  EXPECT_EQ(p.count, (std::vector<long>{1, 0, 1, 2}));
  EXPECT_TRUE(std::isnan(p.mean()[1]));
  EXPECT_EQ(p.mean()[3], 6.0);
  EXPECT_EQ(p.total_mean(), 4.0);
}

TEST(Evaluate, PerPassLossesEqualTheMultipassStepsAndSumBackByPosition) {
  const StateTaskDataset data = small_data();
  const int Tn = 30, K = 3;
  Model<double> m(byte_config("glu"), 3);
  fbt_test::randomize(m, 4);
  Workspace<Model<double>> w;
  std::vector<PositionSums> by_pos;
  const int nw = data.num_eval_windows(Tn);
  ASSERT_GE(nw, 10);
  const std::vector<double> vl = evaluate_passes(m, w, data, Tn, K, 0, 4, &by_pos);
  ASSERT_EQ(vl.size(), std::size_t(K));
  ASSERT_EQ(by_pos.size(), std::size_t(K));
  // the same numbers from multipass_step on the same windows (forward only, no prefix, no noise)
  std::vector<int> tok, tgt, rt, rg;
  std::vector<std::uint8_t> ds, rd;
  for (int i = 0; i < nw; ++i) {
    data.eval_window(i, Tn, rt, rg, rd);
    tok.insert(tok.end(), rt.begin(), rt.end()), tgt.insert(tgt.end(), rg.begin(), rg.end()), ds.insert(ds.end(), rd.begin(), rd.end());
  }
  StepOptions o;
  o.K = K, o.backward = false;
  Workspace<Model<double>> w2;
  const StepStats st = multipass_step(m, w2, Batch{nw, Tn, tok.data(), tgt.data(), ds.data()}, o);
  for (int k = 0; k < K; ++k) {
    EXPECT_NEAR(vl[k], st.loss[k], 1e-12 * vl[k]) << "pass " << k + 1;
    // by position: every target counted once, and the count-weighted means give the overall loss back
    long n = 0;
    for (long c : by_pos[k].count) n += c;
    EXPECT_EQ(n, long(nw) * Tn);
    EXPECT_NEAR(weighted(by_pos[k]), vl[k], 1e-12 * vl[k]) << "pass " << k + 1;
    EXPECT_NEAR(by_pos[k].total_mean(), vl[k], 1e-12 * vl[k]);
  }
  EXPECT_NE(vl[0], vl[1]) << "the passes differ (else the test could not tell them apart)";
  // positions: 12 symbols + kSep + '\n' = 14 tokens per document, so positions 0..13 only
  EXPECT_EQ(by_pos[0].count.size(), std::size_t(Tn + 1));
  for (std::size_t i = 14; i < by_pos[0].count.size(); ++i) EXPECT_EQ(by_pos[0].count[i], 0);
  for (std::size_t i = 0; i < 14; ++i) EXPECT_GT(by_pos[0].count[i], 0);
  // the optimum by position: the same targets, its mean = the data's mean optimal loss
  PositionSums opt;
  ASSERT_TRUE(optimal_by_position(data, Tn, nw, opt));
  EXPECT_EQ(opt.count, by_pos[0].count);
  EXPECT_NEAR(weighted(opt), data.mean_optimal_loss(Tn, nw), 1e-12);
  EXPECT_EQ(opt.mean()[0], 0.0) << "a new document's kSep is certain";
  EXPECT_NEAR(opt.mean()[1], reveal_mixture_entropy(0.5, 3), 1e-15);
  EXPECT_EQ(opt.mean()[13], 0.0) << "the final newline is certain";
  // a source without an optimum
  const TextDataset text = TextDataset::from_string(std::string(300, 'x') + "\n\n" + std::string(300, 'y'));
  EXPECT_FALSE(optimal_by_position(text, Tn, 2, opt));
  EXPECT_TRUE(opt.count.empty());
}

TEST(Evaluate, SequentialLossesByPositionSumBackAndStandardMatchesPassOne) {
  const StateTaskDataset data = small_data("brackets", 20);
  const int Tn = 40;
  Model<double> m(byte_config("glu"), 5);
  fbt_test::randomize(m, 6);
  Workspace<Model<double>> w;
  Decoder<Model<double>> dec(m, kSep);
  std::vector<PositionSums> par;
  const int nw = 6;
  const std::vector<double> vl = evaluate_passes(m, w, data, Tn, 2, nw, 8, &par);
  PositionSums st, so;
  const double ls = sequential_loss(dec, data, Tn, nw, DecodeModeSpec{}, &st);
  const double lf = sequential_loss(dec, data, Tn, nw, DecodeModeSpec::parse("soft"), &so);
  EXPECT_NEAR(weighted(st), ls, 1e-12 * ls);
  EXPECT_NEAR(weighted(so), lf, 1e-12 * lf);
  EXPECT_EQ(st.count, par[0].count);
  EXPECT_EQ(so.count, par[0].count);
  // standard decoding is the plain pass, position by position (different code paths: KV cache vs the stack)
  const std::vector<double> a = st.mean(), b = par[0].mean();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (st.count[i] == 0) continue;
    EXPECT_NEAR(a[i], b[i], 1e-9 * std::abs(b[i])) << "position " << i;
  }
  EXPECT_NEAR(ls, vl[0], 1e-9 * vl[0]);
  EXPECT_GT(std::abs(lf - ls), 1e-6) << "soft decoding differs from standard";
}

TEST(Evaluate, AllWindowsSequentialLossIsThePerWindowLossesAveraged) {
  const StateTaskDataset data = small_data("permutation", 10);
  const int Tn = 25;
  Model<double> m(byte_config("glu"), 7);
  fbt_test::randomize(m, 8);
  Decoder<Model<double>> dec(m, kSep);
  const int nw = data.num_eval_windows(Tn);
  ASSERT_GE(nw, 5);
  for (const char* mode : {"soft", "standard"}) {
    const DecodeModeSpec ms = DecodeModeSpec::parse(mode);
    double mean = 0;
    for (int i = 0; i < nw; ++i) mean += sequential_loss(dec, OneWindow(data, i), Tn, 1, ms) / nw;  // every window has Tn targets
    const double all = sequential_loss(dec, data, Tn, -1, ms);
    EXPECT_NEAR(all, mean, 1e-12 * mean) << mode;
    EXPECT_EQ(sequential_loss(dec, data, Tn, nw + 100, ms), all) << "more windows than there are: all of them";
    EXPECT_NE(sequential_loss(dec, data, Tn, 2, ms), all);
  }
  EXPECT_THROW(sequential_loss(dec, data, Tn, 0, DecodeModeSpec{}), Error);
}

}  // namespace test_train_evaluate
