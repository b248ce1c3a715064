// tests/decode/test_bf16_weight_copies.cpp: the bf16 copies of the weights (ops/bf16_weights.hpp) as the
// decoder and the K-pass step make them.
//
// Checks: a bf16 decoder whose model's weights changed between two sequences decodes the second with the
// new weights: its logits equal, bit for bit, those of a copy of the changed model (weights at other
// addresses, so copies of their own) and differ from the first sequence's; two bf16 steps with an
// optimizer-like change of the weights between them: the second step's losses and gradients equal those
// of the same step on a copy of the changed model, bit for bit (each step packs anew).
#include <gtest/gtest.h>

#include "common/tiny_model.hpp"
#include "fbt/decode/decoder.hpp"
#include "fbt/model/model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_decode_bf16_weight_copies {

using namespace fbt;
using namespace fbt_test;

namespace {

ModelConfig config() {
  ModelConfig c = tiny_config("glu");
  c.vocab_size = 40, c.hidden_size = 48, c.intermediate_size = 96, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  return c;
}

/// The logits of a soft-decoded sequence: the prefill of prompt's first 4 tokens, then a step per token.
std::vector<float> soft_logits(Decoder<Model<float>>& dec, const std::vector<int>& prompt) {
  const Model<float>& m = dec.model();
  auto s = dec.new_sequence(int(prompt.size()), DecodeModeSpec::parse("soft"));
  std::vector<float> lg(std::size_t(m.V)), all;
  dec.prefill(s, prompt.data(), 4, lg.data());
  all.insert(all.end(), lg.begin(), lg.end());
  auto* sp = &s;
  for (std::size_t t = 4; t < prompt.size(); ++t) {
    dec.step(&sp, 1, &prompt[t], lg.data());
    all.insert(all.end(), lg.begin(), lg.end());
  }
  return all;
}

void change(Model<float>& m) {  // every weight moved, as an optimizer step would
  for (std::size_t i = 0; i < m.params.size(); ++i) m.params.values()[i] *= 1.01f;
}

}  // namespace

TEST(Bf16WeightCopies, DecoderReadsTheWeightsOfEachPrefill) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  Model<float> m(config(), 5);
  randomize(m, 6);
  const std::vector<int> prompt = {1, 7, 3, 9, 2, 11, 4, 30, 8};
  Decoder<Model<float>> dec(m);  // one decoder across the change, as a trainer's evaluation keeps it
  const std::vector<float> before = soft_logits(dec, prompt);
  change(m);
  const std::vector<float> after = soft_logits(dec, prompt);
  const Model<float> copy = m;  // the changed weights at other addresses
  Decoder<Model<float>> dec2(copy);
  EXPECT_EQ(after, soft_logits(dec2, prompt));
  EXPECT_NE(after, before);
}

TEST(Bf16WeightCopies, EachStepPacksTheCurrentWeights) {
  if (!bf16_available()) GTEST_SKIP() << bf16_unavailable_reason();
  ScopedMatmulPrecision bf16(Precision::bf16);
  Model<float> m(config(), 7);
  randomize(m, 8);
  const TinyBatch tb = tiny_batch(2, 9, m.V, 9);
  StepOptions o;
  o.K = 3;
  Workspace<Model<float>> ws;
  m.params.zero_grad();
  const StepStats first = multipass_step(m, ws, tb.batch(), o);
  change(m);
  m.params.zero_grad();
  const StepStats second = multipass_step(m, ws, tb.batch(), o);
  Model<float> copy = m;
  Workspace<Model<float>> ws2;
  copy.params.zero_grad();
  const StepStats ref = multipass_step(copy, ws2, tb.batch(), o);
  EXPECT_EQ(second.loss, ref.loss);
  EXPECT_NE(second.loss, first.loss);
  for (std::size_t i = 0; i < m.params.size(); ++i) ASSERT_EQ(m.params.grads()[i], copy.params.grads()[i]) << i;
}

}  // namespace test_decode_bf16_weight_copies
