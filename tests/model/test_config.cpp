// Config validation (issue 2): each broken rule is refused with an fbt::Error naming the field.
#include <gtest/gtest.h>

#include "fbt/model/model.hpp"

using namespace fbt;

namespace {

void expect_refused(ModelConfig c, const std::string& field, const std::string& also = "") {
  try {
    c.validate();
    FAIL() << "config with bad " << field << " was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    if (!also.empty()) EXPECT_NE(msg.find(also), std::string::npos) << msg;
  }
}

TEST(ModelConfig, DefaultsAreValid) { EXPECT_NO_THROW(ModelConfig{}.validate()); }

TEST(ModelConfig, RefusesEachBrokenRuleNamingTheField) {
  ModelConfig c;
  c.num_attention_heads = 3;  // 128 % 3 != 0
  expect_refused(c, "num_attention_heads", "divide hidden_size");
  c = ModelConfig{};
  c.num_key_value_heads = 3;  // 4 % 3 != 0
  expect_refused(c, "num_key_value_heads", "divide num_attention_heads");
  for (auto f : {&ModelConfig::vocab_size, &ModelConfig::hidden_size, &ModelConfig::num_hidden_layers, &ModelConfig::intermediate_size,
                 &ModelConfig::num_key_value_heads}) {
    c = ModelConfig{};
    c.*f = 0;
    EXPECT_THROW(c.validate(), Error);
  }
  c = ModelConfig{};
  c.hidden_size = 0;
  expect_refused(c, "hidden_size", "> 0");
  c = ModelConfig{};
  c.num_hidden_layers = -1;
  expect_refused(c, "num_hidden_layers");
  c = ModelConfig{};
  c.fuser = "gru";
  expect_refused(c, "fuser", "gru");
  c = ModelConfig{};
  c.feedback_source = "top";
  expect_refused(c, "feedback_source");
  c = ModelConfig{};
  c.input_norm = "some";
  expect_refused(c, "input_norm");
  c = ModelConfig{};
  c.glu_init = "zeros";
  expect_refused(c, "glu_init");
  c = ModelConfig{};
  c.doc_attention = "none";
  expect_refused(c, "doc_attention");
  c = ModelConfig{};
  c.head_dim = 5;  // odd: RoPE rotates pairs
  expect_refused(c, "head_dim", "even");
  c = ModelConfig{};
  c.rms_norm_eps = 0;
  expect_refused(c, "rms_norm_eps");
  c = ModelConfig{};
  c.rope_theta = -1;
  expect_refused(c, "rope_theta");
}

TEST(ModelConfig, ModelConstructorValidates) {
  ModelConfig c;
  c.num_key_value_heads = 3;
  EXPECT_THROW(Model<float>(c, 0), Error);
}

TEST(ModelConfig, ExplicitHeadDimNeedNotDivideWidth) {
  ModelConfig c;
  c.hidden_size = 96, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;  // 4*16 != 96 is legal
  EXPECT_NO_THROW(c.validate());
  Model<double> m(c, 0);
  EXPECT_EQ(m.params.spec("model.layers.0.self_attn.q_proj.weight").shape, (Shape{64, 96}));
  EXPECT_EQ(m.params.spec("model.layers.0.self_attn.o_proj.weight").shape, (Shape{96, 64}));
}

}  // namespace
