// Sliding-window layers (Hugging Face Qwen3's layer_types / sliding_window): the config's rules, what a
// sliding layer's query sees (keys t-W < j <= t inside its document), and the config a model records.
// The windowed backward is checked against finite differences in test_model_gradcheck.cpp (the _window cases).
#include <gtest/gtest.h>

#include "common/pass_runner.hpp"
#include "common/tiny_model.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_sliding_window {

using namespace fbt;
using namespace fbt_test;

namespace {

void expect_refused(ModelConfig c, const std::string& field, const std::string& also) {
  try {
    c.validate();
    FAIL() << "config with bad " << field << " was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_NE(msg.find(also), std::string::npos) << msg;
  }
}

ModelConfig windowed(const std::string& fuser, int W, std::vector<std::string> types) {
  ModelConfig c = tiny_config(fuser);
  c.num_hidden_layers = int(types.size()), c.sliding_window = W, c.layer_types = std::move(types);
  return c;
}

/// Final-norm outputs (T, D) of one row of tokens (one pass, documents at doc).
template <class M> std::vector<double> hidden(M& m, const std::vector<int>& tok, const std::vector<std::uint8_t>* doc = nullptr) {
  std::vector<int> targets(tok.size(), 0);
  const Batch b{1, int(tok.size()), tok.data(), targets.data(), doc ? doc->data() : nullptr};
  return run_passes(m, b, 1).hf[0];
}

/// max |a - b| over position t's row of two (T, D) tensors.
double row_diff(const std::vector<double>& a, const std::vector<double>& b, int t, int D) {
  double d = 0;
  for (int i = 0; i < D; ++i) d = std::max(d, std::abs(a[std::size_t(t) * D + i] - b[std::size_t(t) * D + i]));
  return d;
}

TEST(SlidingWindow, ConfigRulesNameTheField) {
  EXPECT_NO_THROW(windowed("glu", 3, {"sliding_attention", "full_attention"}).validate());
  ModelConfig short_list = windowed("glu", 3, {"sliding_attention", "full_attention"});
  short_list.layer_types.pop_back();
  expect_refused(short_list, "layer_types", "expected one per layer (2)");
  expect_refused(windowed("glu", 3, {"sliding_attention", "local"}), "layer_types[1]", "unknown value \"local\"");
  expect_refused(windowed("glu", 0, {"sliding_attention", "full_attention"}), "layer_types[0]", "sliding_window is 0");
  expect_refused(windowed("glu", -1, {"full_attention", "full_attention"}), "sliding_window", "got -1");
  ModelConfig c = windowed("glu", 3, {"full_attention", "sliding_attention"});
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 3);
  c.layer_types.clear();
  EXPECT_EQ(c.layer_window(1), 0);  // no layer_types: every layer full
}

// One sliding block (W 3) of a baseline: position t's output depends on tokens t-2..t only, so changing
// token 1 changes positions 1..3 and nothing after; a full block sees it everywhere after.
TEST(SlidingWindow, AQuerySeesItsLastWPositionsOnly) {
  const int W = 3, T = 9;
  for (bool sliding : {true, false}) {
    // the full control has no window (a window that no layer uses is refused: issue 47)
    Model<double, NoFuser<double>> m(sliding ? windowed("none", W, {"sliding_attention"}) : windowed("none", 0, {"full_attention"}), 5);
    randomize(m, 6);
    TinyBatch tb = tiny_batch(1, T, m.V, 7);
    std::vector<int> other = tb.tokens;
    other[1] = (other[1] + 1) % m.V;
    const auto a = hidden(m, tb.tokens), b = hidden(m, other);
    EXPECT_EQ(row_diff(a, b, 0, m.D), 0.0);
    for (int t = 1; t < T; ++t) {
      if (t < 1 + W || !sliding) EXPECT_GT(row_diff(a, b, t, m.D), 1e-8) << "position " << t << (sliding ? " sliding" : " full");
      else EXPECT_EQ(row_diff(a, b, t, m.D), 0.0) << "position " << t << " is W=" << W << " or more after the change";
    }
  }
}

// Inside a document the window also stops at the document start: max(doc start, t - W + 1).
TEST(SlidingWindow, TheWindowStopsAtADocumentStart) {
  const int W = 4, T = 10;
  Model<double, NoFuser<double>> m(windowed("none", W, {"sliding_attention"}), 8);
  randomize(m, 9);
  TinyBatch tb = tiny_batch(1, T, m.V, 10);
  std::vector<std::uint8_t> doc(T, 0);
  doc[5] = 1;
  std::vector<int> other = tb.tokens;
  other[4] = (other[4] + 1) % m.V;  // the last token of document 1
  const auto a = hidden(m, tb.tokens, &doc), b = hidden(m, other, &doc);
  EXPECT_GT(row_diff(a, b, 4, m.D), 1e-8);
  for (int t = 5; t < T; ++t) EXPECT_EQ(row_diff(a, b, t, m.D), 0.0) << "position " << t << " is in the next document";
  // the second document alone gives the same outputs (its window starts at its own start)
  const std::vector<int> second(tb.tokens.begin() + 5, tb.tokens.end());
  const auto c = hidden(m, second);
  for (int t = 5; t < T; ++t) {
    double d = 0;
    for (int i = 0; i < m.D; ++i) d = std::max(d, std::abs(a[std::size_t(t) * m.D + i] - c[std::size_t(t - 5) * m.D + i]));
    EXPECT_LT(d, 1e-12) << "position " << t;
  }
}

// A model records its layer types; a model composed from blocks of one window records them too, and two
// windows in one stack are refused (Hugging Face has one sliding_window per model).
TEST(SlidingWindow, TheModelRecordsItsLayerTypes) {
  const ModelConfig c = windowed("glu", 5, {"full_attention", "sliding_attention", "sliding_attention"});
  Model<double> m(c, 1);
  EXPECT_EQ(m.window, 5);
  EXPECT_EQ(m.windows, (std::vector<int>{0, 5, 5}));
  EXPECT_EQ(m.cfg.layer_types, c.layer_types);
  std::vector<DecoderBlock<double>> blocks;
  for (int l = 0; l < 3; ++l) blocks.emplace_back(layer_spec(c, l));
  Model<double> parts(Embedding<double>(c.vocab_size, c.hidden_size, 0.02), blocks, GluFuser<double>(fuser_args(c)),
                      model_options(c), 1);
  EXPECT_EQ(parts.cfg.sliding_window, 5);
  EXPECT_EQ(parts.cfg.layer_types, c.layer_types);
  LayerSpec other = layer_spec(c, 2);
  other.sliding_window = 7;
  blocks[2] = DecoderBlock<double>(other);
  EXPECT_THROW((Model<double>(Embedding<double>(c.vocab_size, c.hidden_size, 0.02), blocks, GluFuser<double>(fuser_args(c)),
                              model_options(c), 1)),
               Error);
}

}  // namespace

}  // namespace test_model_sliding_window
