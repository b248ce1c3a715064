// score_continuations (decode/score.hpp: an evaluation harness's loglikelihood), in double:
//   - each log-probability is the log-softmax, at the continuation token, of the logits decoding itself gives: the
//     prefill's for the first token, each teacher-forced step's for the rest (the same decoder calls; within 1e-12:
//     the batch steps several sequences at once, whose products may round differently), in
//     standard, soft and fused(2), and with a document separator inside the continuation
//   - standard mode equals the training forward's pass 1 on context + continuation (an independent computation,
//     tolerance 1e-10 on O(1) log-probabilities)
//   - soft mode differs from standard on a model whose feedback matters
//   - greedy: true for the greedy decode's own continuation, false once one token of it is changed
//   - batches of 1, 2 and 5 give the same numbers (tolerance 1e-12); the refusals name the request
#include <gtest/gtest.h>

#include <cmath>

#include "common/io_test.hpp"
#include "common/tiny_model.hpp"
#include "fbt/decode/score.hpp"
#include "fbt/train/evaluate.hpp"

namespace test_decode_score {

using namespace fbt;
using namespace fbt_test;
using G = Model<double>;
constexpr int kSep = 10;  // the document separator of these tests (tiny_config's vocabulary is 11: the random tokens are 0..9)

double log_softmax_at(const double* lg, int V, int c) {
  double mx = lg[0];
  for (int v = 1; v < V; ++v) mx = std::max(mx, lg[v]);
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(lg[v] - mx);
  return lg[c] - mx - std::log(s);
}

/// The reference: prefill the context in `mode`, then feed the continuation token by token with Decoder::step.
std::vector<double> by_hand(Decoder<G>& dec, const ScoreRequest& r, const DecodeModeSpec& mode) {
  const int V = dec.model().V;
  auto s = dec.new_sequence(int(r.context.size() + r.continuation.size()), mode);
  std::vector<double> lg(V), out;
  dec.prefill(s, r.context.data(), int(r.context.size()), lg.data());
  auto* sp = &s;
  for (std::size_t j = 0; j < r.continuation.size(); ++j) {
    out.push_back(log_softmax_at(lg.data(), V, r.continuation[j]));
    if (j + 1 < r.continuation.size()) dec.step(&sp, 1, &r.continuation[j], lg.data());
  }
  return out;
}

struct Score : ::testing::Test {
  ModelConfig cfg = tiny_config("glu");
  G m{cfg, 91};
  void SetUp() override { randomize(m, 92); }
  std::vector<ScoreRequest> requests() const {
    const TinyBatch tb = tiny_batch(1, 40, cfg.vocab_size - 1, 93);  // no separator among the random tokens
    std::vector<ScoreRequest> r;
    for (int i = 0; i < 5; ++i) {
      ScoreRequest q;
      q.context.assign(tb.tokens.begin() + i, tb.tokens.begin() + 6 + 3 * i);
      q.continuation.assign(tb.tokens.begin() + 20, tb.tokens.begin() + 21 + i * 3);
      r.push_back(q);
    }
    r[3].continuation[2] = kSep;  // a document starts inside a continuation
    return r;
  }
};

TEST_F(Score, IsTheLogSoftmaxOfWhatDecodingGives) {
  Decoder<G> dec(m, kSep);
  const auto reqs = requests();
  for (const char* mode : {"standard", "soft", "fused(2)", "soft/prefill=recurrent"}) {
    const DecodeModeSpec ms = DecodeModeSpec::parse(mode);
    const auto got = score_continuations(dec, reqs, ms, 16);
    ASSERT_EQ(got.size(), reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const std::vector<double> want = by_hand(dec, reqs[i], ms);
      ASSERT_EQ(got[i].token_logprobs.size(), want.size());
      double sum = 0;
      for (std::size_t j = 0; j < want.size(); ++j) {
        EXPECT_NEAR(got[i].token_logprobs[j], want[j], 1e-12) << mode << " request " << i << " token " << j;
        sum += want[j];
      }
      EXPECT_NEAR(got[i].logprob, sum, 1e-12 * std::abs(sum)) << mode;
    }
  }
}

TEST_F(Score, StandardIsPassOneOfTheForwardAndSoftIsNot) {
  Decoder<G> dec(m, kSep);
  auto reqs = requests();
  reqs.pop_back();  // no separator: one document per row, as the forward below reads it
  reqs[3] = requests()[4];
  reqs[3].continuation[2] = reqs[3].continuation[1];
  const auto std_ = score_continuations(dec, reqs, DecodeModeSpec::parse("standard"), 3);
  const auto soft = score_continuations(dec, reqs, DecodeModeSpec::parse("soft"), 3);
  const int V = cfg.vocab_size;
  double differ = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int> toks = reqs[i].context;
    toks.insert(toks.end(), reqs[i].continuation.begin(), reqs[i].continuation.end());
    const int T = int(toks.size());
    std::vector<int> tg(toks.size(), -1);
    const Batch b{1, T, toks.data(), tg.data(), nullptr};
    const std::vector<double> lg = pass_logits(m, b, 1);  // (1, T, V)
    const std::size_t P = reqs[i].context.size();
    for (std::size_t j = 0; j < reqs[i].continuation.size(); ++j) {
      const double want = log_softmax_at(lg.data() + (P - 1 + j) * V, V, reqs[i].continuation[j]);
      EXPECT_NEAR(std_[i].token_logprobs[j], want, 1e-10) << "request " << i << " token " << j;
      differ = std::max(differ, std::abs(soft[i].token_logprobs[j] - want));
    }
  }
  EXPECT_GT(differ, 1e-3) << "soft decoding feeds the state back: its log-probabilities are not pass 1's";
}

TEST_F(Score, GreedyAndBatches) {
  Decoder<G> dec(m, kSep);
  const DecodeModeSpec soft = DecodeModeSpec::parse("soft");
  GenerateOptions o;
  o.mode = soft, o.max_new_tokens = 6;
  const std::vector<int> ctx = requests()[2].context;
  const std::vector<int> gen = generate(dec, ctx, o);
  ASSERT_EQ(gen.size(), 6u);
  std::vector<ScoreRequest> g{{ctx, gen}, {ctx, gen}};
  g[1].continuation[3] = (gen[3] + 1) % (cfg.vocab_size - 1);
  const auto r = score_continuations(dec, g, soft, 2);
  EXPECT_TRUE(r[0].greedy);
  EXPECT_FALSE(r[1].greedy);
  EXPECT_LT(r[1].logprob, r[0].logprob);
  const auto reqs = requests();
  const auto one = score_continuations(dec, reqs, soft, 1);
  for (int batch : {2, 5}) {
    const auto b = score_continuations(dec, reqs, soft, batch);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_NEAR(b[i].logprob, one[i].logprob, 1e-12 * std::abs(one[i].logprob)) << "batch " << batch << " request " << i;
      EXPECT_EQ(b[i].greedy, one[i].greedy);
    }
  }
}

TEST_F(Score, RefusalsNameTheRequest) {
  Decoder<G> dec(m, kSep);
  const DecodeModeSpec soft = DecodeModeSpec::parse("soft");
  std::vector<ScoreRequest> r = requests();
  r[1].continuation.clear();
  EXPECT_FBT_ERROR(score_continuations(dec, r, soft), "request 1", "empty continuation");
  r = requests();
  r[2].context.clear();
  EXPECT_FBT_ERROR(score_continuations(dec, r, soft), "request 2", "empty context");
  r = requests();
  r[4].continuation[0] = cfg.vocab_size;
  EXPECT_FBT_ERROR(score_continuations(dec, r, soft), "request 4", "outside the vocabulary");
  r = requests();
  r[0].continuation.assign(std::size_t(cfg.max_position_embeddings), 1);
  EXPECT_FBT_ERROR(score_continuations(dec, r, soft), "request 0", "max_position_embeddings");
  EXPECT_FBT_ERROR(score_continuations(dec, requests(), soft, 0), "batch must be >= 1");
}

}  // namespace test_decode_score
