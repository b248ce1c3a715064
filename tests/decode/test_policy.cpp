// Decoding policies (decode/policy.hpp): the built-in modes parse and describe themselves, a bad mode is
// refused naming the known ones, and a program's own policy plugs into the decoder: a policy that feeds
// back for the first n new tokens decodes as soft for those and as its fed-back state dictates after
// (n = 0: exactly standard; n large: exactly soft).
#include <gtest/gtest.h>

#include "common/tiny_model.hpp"
#include "fbt/decode/decoder.hpp"
#include "common/io_test.hpp"

namespace test_decode_policy {

using namespace fbt;
using namespace fbt_test;

struct SoftFirst {
  static constexpr const char* name = "test_soft_first";
  int n = 0;
  explicit SoftFirst(const std::string& arg) : n(arg.empty() ? 0 : std::stoi(arg)) {}
  int prefill_passes() const { return 1; }
  bool feeds_back() const { return true; }
  bool feed(const PolicyStep& s) const { return s.generated < n; }
  std::string describe() const { return "test_soft_first(" + std::to_string(n) + ")"; }
};

std::vector<std::vector<double>> logits(Decoder<Model<double>>& dec, const std::vector<int>& tok, int P, const DecodeModeSpec& mode) {
  const int V = dec.model().V;
  auto s = dec.new_sequence(int(tok.size()), mode);
  std::vector<double> lg(V);
  std::vector<std::vector<double>> out;
  dec.prefill(s, tok.data(), P, lg.data());
  out.push_back(lg);
  auto* sp = &s;
  for (std::size_t t = P; t + 1 < tok.size(); ++t) dec.step(&sp, 1, &tok[t], lg.data()), out.push_back(lg);
  return out;
}

TEST(DecodePolicy, BuiltInModesParseAndBadOnesAreRefused) {
  EXPECT_EQ(DecodeModeSpec::parse("standard").name(), "standard");
  EXPECT_EQ(DecodeModeSpec::parse("soft").name(), "soft");
  EXPECT_EQ(DecodeModeSpec::parse("fused(3)").prefill_passes(), 4);
  EXPECT_EQ(DecodeModeSpec::parse("fused").name(), "fused(1)");
  EXPECT_EQ(DecodeModeSpec::parse("fused2").name(), "fused(2)");
  EXPECT_FALSE(DecodeModeSpec{}.feeds_back());
  EXPECT_EQ(DecodeModeSpec{}.name(), "standard");
  EXPECT_FBT_ERROR(DecodeModeSpec::parse("fused(0)"), "k must be an integer in [1, 1000]");
  EXPECT_FBT_ERROR(DecodeModeSpec::parse("soft(2)"), "soft takes no argument");
  EXPECT_FBT_ERROR(DecodeModeSpec::parse("sfot"), "unknown decoding mode \"sfot\"", "fused", "soft", "standard");
  EXPECT_FBT_ERROR(DecodeModeSpec::parse("fused(2"), "expected NAME or NAME(ARG)");
}

TEST(DecodePolicy, AProgramsOwnPolicyPlugsIntoTheDecoder) {
  register_policy<SoftFirst>();
  register_policy<SoftFirst>();  // the same type again: a no-op
  EXPECT_EQ(DecodeModeSpec::parse("test_soft_first(2)").name(), "test_soft_first(2)");
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 5);
  randomize(m, 6);
  Decoder<Model<double>> dec(m);
  const TinyBatch tb = tiny_batch(1, 9, cfg.vocab_size, 7);
  const std::vector<int> tok(tb.tokens.begin(), tb.tokens.end());
  const auto standard = logits(dec, tok, 3, DecodeModeSpec::parse("standard"));
  const auto soft = logits(dec, tok, 3, DecodeModeSpec::parse("soft"));
  EXPECT_EQ(logits(dec, tok, 3, DecodeModeSpec::parse("test_soft_first(0)")), standard);
  EXPECT_EQ(logits(dec, tok, 3, DecodeModeSpec::of(SoftFirst("100"))), soft);
  const auto two = logits(dec, tok, 3, DecodeModeSpec::parse("test_soft_first(2)"));
  ASSERT_EQ(two.size(), soft.size());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(two[i], soft[i]) << "the prefill and the first two fed-back steps are soft's";
  EXPECT_NE(two[3], soft[3]) << "the third new token is not fed back";
  // a baseline has no feedback: a feeding policy is refused
  ModelConfig base = tiny_config("none");
  Model<double, NoFuser<double>> b(base, 1);
  Decoder<Model<double, NoFuser<double>>> bdec(b);
  EXPECT_FBT_ERROR(bdec.new_sequence(4, DecodeModeSpec::parse("test_soft_first(2)")), "needs a feedback fuser");
}

}  // namespace test_decode_policy
