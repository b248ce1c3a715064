// Recurrent prefill (decode/policy.hpp PrefillSpec, decode/decoder.hpp), in double:
//   - it is the sequential soft definition: the same logits, state and continuation as decoding the prompt
//     token by token in soft mode from an empty cache (the first token plain; exact: the same arithmetic)
//   - it equals the training forward's pass P on a P-token prompt (full recurrence = fused(P-1), spec 4:
//     pass j is exact at positions < j), an independent computation (tolerance 1e-10 on O(1) logits)
//   - it is not fused(1) (else the tests above could not tell the prefills apart)
//   - recurrent(k) is its definition: a plain prefill of all but the last min(k, P-1) tokens, then those as
//     soft steps (exact); k >= P-1 is recurrent, and each k differs from k+1 below that
//   - a document separator inside the prompt restarts it; the spelling MODE/prefill=P round-trips
#include <gtest/gtest.h>

#include "common/pass_runner.hpp"
#include "fbt/decode/decoder.hpp"

namespace test_decode_recurrent_prefill {

using namespace fbt;
using namespace fbt_test;

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// Logits after prefilling the first P tokens in `mode`, then after each teacher-forced step of the rest;
/// also the state h after the prefill.
template <class M> std::vector<std::vector<double>> run(Decoder<M>& dec, const std::vector<int>& tokens, int P, DecodeModeSpec mode,
                                                       std::vector<double>* h_after_prefill = nullptr) {
  const int V = dec.model().V;
  auto s = dec.new_sequence(int(tokens.size()), mode);
  std::vector<double> lg(V);
  std::vector<std::vector<double>> out;
  dec.prefill(s, tokens.data(), P, lg.data());
  out.push_back(lg);
  if (h_after_prefill) h_after_prefill->assign(s.h.data(), s.h.data() + s.h.size());
  EXPECT_EQ(s.generated, 0) << "a prefill generates nothing";
  auto* sp = &s;
  for (std::size_t t = P; t < tokens.size(); ++t) {
    dec.step(&sp, 1, &tokens[t], lg.data());
    out.push_back(lg);
  }
  return out;
}

/// The sequential soft definition: one plain token, then every prompt token a soft step from an empty cache.
template <class M> std::vector<std::vector<double>> soft_from_empty(Decoder<M>& dec, const std::vector<int>& tokens, int P,
                                                                    std::vector<double>* h_after_prompt) {
  const int V = dec.model().V;
  auto s = dec.new_sequence(int(tokens.size()), DecodeModeSpec::parse("soft"));
  std::vector<double> lg(V);
  std::vector<std::vector<double>> out;
  dec.prefill(s, tokens.data(), 1, lg.data());
  auto* sp = &s;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    if (int(t) == P) out.push_back(lg), h_after_prompt->assign(s.h.data(), s.h.data() + s.h.size());
    dec.step(&sp, 1, &tokens[t], lg.data());
    if (int(t) >= P) out.push_back(lg);
  }
  return out;
}

template <class M> void sequential_case(const std::string& what, const ModelConfig& cfg, bool check_chain) {
  M m(cfg, 81);
  randomize(m, 82);
  Decoder<M> dec(m);
  const TinyBatch tb = tiny_batch(1, 9, cfg.vocab_size, 83);
  const int P = 6;
  std::vector<double> h_rec, h_soft;
  const auto rec = run(dec, tb.tokens, P, DecodeModeSpec::parse("soft/prefill=recurrent"), &h_rec);
  const auto soft = soft_from_empty(dec, tb.tokens, P, &h_soft);
  ASSERT_EQ(rec.size(), soft.size());
  for (std::size_t i = 0; i < rec.size(); ++i) EXPECT_LT(max_diff(rec[i], soft[i]), 1e-12) << what << " position " << P - 1 + int(i);
  EXPECT_LT(max_diff(h_rec, h_soft), 1e-12) << what << ": the state after the prompt";
  // a standard policy with a recurrent prefill: the same prompt logits, then plain steps
  const auto std_rec = run(dec, tb.tokens, P, DecodeModeSpec::parse("standard/prefill=recurrent"));
  EXPECT_LT(max_diff(std_rec[0], rec[0]), 1e-12) << what;
  EXPECT_GT(max_diff(std_rec[1], rec[1]), 1e-8) << what << ": standard generates without feedback";
  const auto f1 = run(dec, tb.tokens, P, DecodeModeSpec::parse("soft/prefill=fused(1)"));
  EXPECT_GT(max_diff(f1[0], rec[0]), 1e-8) << what << ": recurrent prefill is not fused(1) on " << P << " tokens";
  if (check_chain) {  // full recurrence = pass P of the training forward on the prompt
    const std::vector<int> prompt(tb.tokens.begin(), tb.tokens.begin() + P);
    std::vector<int> targets(P, 0);
    const PassRun r = run_passes(m, Batch{1, P, prompt.data(), targets.data(), nullptr}, P);
    EXPECT_LT(max_diff(rec[0], head_logits(m, r.hf[P - 1], P - 1)), 1e-10) << what;
    const auto fk = run(dec, tb.tokens, P, DecodeModeSpec::parse("soft/prefill=fused(" + std::to_string(P - 1) + ")"));
    for (std::size_t i = 0; i < rec.size(); ++i) EXPECT_LT(max_diff(rec[i], fk[i]), 1e-10) << what << " fused(P-1), position " << i;
  }
}

TEST(RecurrentPrefill, IsSequentialSoftDecodingFromAnEmptyCache) {
  std::vector<std::pair<std::string, ModelConfig>> cases;
  for (const std::string fuser : {"glu", "gated_add", "concat"}) cases.push_back({fuser, tiny_config(fuser)});
  ModelConfig c = tiny_config("glu");
  c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 0;
  cases.push_back({"glu tap layer 0", c});
  for (const auto& [what, cfg] : cases)
    with_model<double>(cfg, [&, what = what, cfg = cfg](auto tag) { sequential_case<typename decltype(tag)::type>(what, cfg, true); });
  // the paper's norms: N_in on every row of a fed-back pass, so fused(P-1) differs; the definition still holds
  const ModelConfig pn = paper_norms(tiny_config("glu"));
  with_model<double>(pn, [&](auto tag) { sequential_case<typename decltype(tag)::type>("glu paper norms", pn, false); });
}

/// The sequential definition of recurrent(k) on a P-token prompt: a plain prefill of its first Q = P - min(k, P-1)
/// tokens, then the rest as soft steps; logits at the last prompt position and after each later step.
template <class M> std::vector<std::vector<double>> standard_then_soft(Decoder<M>& dec, const std::vector<int>& tokens, int P, int Q,
                                                                       std::vector<double>* h_after_prompt) {
  const int V = dec.model().V;
  auto s = dec.new_sequence(int(tokens.size()), DecodeModeSpec::parse("soft"));
  std::vector<double> lg(V);
  std::vector<std::vector<double>> out;
  dec.prefill(s, tokens.data(), Q, lg.data());
  if (Q == P) out.push_back(lg), h_after_prompt->assign(s.h.data(), s.h.data() + s.h.size());
  auto* sp = &s;
  for (std::size_t t = Q; t < tokens.size(); ++t) {
    dec.step(&sp, 1, &tokens[t], lg.data());
    if (int(t) + 1 >= P) out.push_back(lg);
    if (int(t) + 1 == P) h_after_prompt->assign(s.h.data(), s.h.data() + s.h.size());
  }
  return out;
}

template <class M> void suffix_case(const std::string& what, const ModelConfig& cfg) {
  M m(cfg, 81);
  randomize(m, 82);
  Decoder<M> dec(m);
  const TinyBatch tb = tiny_batch(1, 9, cfg.vocab_size, 83);
  const int P = 6;
  const auto full = run(dec, tb.tokens, P, DecodeModeSpec::parse("soft/prefill=recurrent"));
  std::vector<std::vector<std::vector<double>>> by_k;
  for (int k = 1; k <= 7; ++k) {
    const std::string mode = "soft/prefill=recurrent(" + std::to_string(k) + ")";
    std::vector<double> h_rec, h_def;
    const auto rec = run(dec, tb.tokens, P, DecodeModeSpec::parse(mode), &h_rec);
    const auto def = standard_then_soft(dec, tb.tokens, P, P - std::min(k, P - 1), &h_def);
    ASSERT_EQ(rec.size(), def.size());
    for (std::size_t i = 0; i < rec.size(); ++i) EXPECT_LT(max_diff(rec[i], def[i]), 1e-12) << what << " " << mode << " position " << P - 1 + int(i);
    EXPECT_LT(max_diff(h_rec, h_def), 1e-12) << what << " " << mode << ": the state after the prompt";
    if (k >= P - 1)
      for (std::size_t i = 0; i < rec.size(); ++i) EXPECT_EQ(max_diff(rec[i], full[i]), 0.0) << what << " " << mode << " is recurrent";
    by_k.push_back(rec);
  }
  for (int k = 1; k < P - 1; ++k) EXPECT_GT(max_diff(by_k[k - 1][0], by_k[k][0]), 1e-8) << what << ": recurrent(" << k << ") vs (" << k + 1 << ")";
  const auto plain = run(dec, tb.tokens, P, DecodeModeSpec::parse("soft/prefill=standard"));
  EXPECT_GT(max_diff(plain[0], by_k[0][0]), 1e-8) << what << ": recurrent(1) is not standard";
}

TEST(RecurrentPrefill, SuffixOfKTokensIsAStandardPrefillThenKSoftSteps) {
  for (const std::string fuser : {"glu", "gated_add", "concat"}) {
    const ModelConfig c = tiny_config(fuser);
    with_model<double>(c, [&](auto tag) { suffix_case<typename decltype(tag)::type>(fuser, c); });
  }
  const ModelConfig pn = paper_norms(tiny_config("glu"));
  with_model<double>(pn, [&](auto tag) { suffix_case<typename decltype(tag)::type>("glu paper norms", pn); });
}

TEST(RecurrentPrefill, RestartsAtADocumentSeparator) {
  ModelConfig cfg = tiny_config("glu");
  Model<double> m(cfg, 91);
  randomize(m, 92);
  const int sep = cfg.vocab_size - 1;
  Decoder<Model<double>> dec(m, sep);
  const TinyBatch tb = tiny_batch(1, 11, cfg.vocab_size - 1, 93);
  std::vector<int> packed = tb.tokens;  // doc A (4 tokens), then sep + doc B (7 tokens)
  packed[4] = sep;
  const std::vector<int> docB(packed.begin() + 4, packed.end());
  const DecodeModeSpec mode = DecodeModeSpec::parse("soft/prefill=recurrent");
  const auto a = run(dec, packed, 9, mode), b = run(dec, docB, 5, mode);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_diff(a[i], b[i]), 1e-10) << "position " << i;
}

TEST(RecurrentPrefill, SpellingAndRefusals) {
  EXPECT_EQ(DecodeModeSpec::parse("soft/prefill=recurrent").name(), "soft/prefill=recurrent");
  EXPECT_EQ(DecodeModeSpec::parse("standard/prefill=fused3").name(), "standard/prefill=fused(3)");
  EXPECT_EQ(DecodeModeSpec::parse("fused(2)/prefill=standard").prefill_passes(), 1);
  EXPECT_EQ(DecodeModeSpec::parse("soft/prefill=fused(4)").prefill_passes(), 5);
  EXPECT_EQ(DecodeModeSpec::parse("fused(2)").prefill_passes(), 3);
  EXPECT_EQ(DecodeModeSpec::parse("fused(2)/prefill=policy").name(), "fused(2)");
  EXPECT_TRUE(DecodeModeSpec::parse("standard/prefill=recurrent").prefill_feeds_back());
  EXPECT_FALSE(DecodeModeSpec::parse("soft").prefill_feeds_back());
  EXPECT_EQ(DecodeModeSpec::parse("standard/prefill=recurrent(8)").name(), "standard/prefill=recurrent(8)");
  EXPECT_EQ(PrefillSpec::parse("recurrent(3)").recurrent_steps(10), 3);
  EXPECT_EQ(PrefillSpec::parse("recurrent(30)").recurrent_steps(10), 9);
  EXPECT_EQ(PrefillSpec::parse("recurrent").recurrent_steps(10), 9);
  EXPECT_EQ(DecodeModeSpec::parse("soft/prefill=recurrent(2)").prefill_passes(), 1);
  for (const char* bad : {"recurrent(0)", "recurrent()", "recurrent(-1)", "recurrent(2x)", "recurrent(1000001)"}) EXPECT_THROW(PrefillSpec::parse(bad), Error) << bad;
  EXPECT_THROW(PrefillSpec::parse("fused(0)"), Error);
  EXPECT_THROW(PrefillSpec::parse("sideways"), Error);
  ModelConfig cfg = tiny_config("none");
  Model<double, NoFuser<double>> m(cfg, 41);
  Decoder<Model<double, NoFuser<double>>> dec(m);
  EXPECT_THROW(dec.new_sequence(9, DecodeModeSpec::parse("standard/prefill=recurrent")), Error);
  EXPECT_NO_THROW(dec.new_sequence(9, DecodeModeSpec::parse("standard/prefill=standard")));
}

}  // namespace test_decode_recurrent_prefill
