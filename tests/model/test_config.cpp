// Config validation: each broken rule is refused with an fbt::Error naming the field.
// Every size is bounded (ModelLimits), so are the RoPE table and the parameter count, and
// every real must be finite and in range; the error names the field and the value.
#include <gtest/gtest.h>

#include "fbt/io/config_json.hpp"
#include "fbt/model/model.hpp"
#include "../common/io_test.hpp"

#include <limits>

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_config {

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
  c.fuser = "";
  expect_refused(c, "fuser", "empty");
  c = ModelConfig{};
  c.feedback_source = "layer";  // needs feedback_layer in [0, L)
  expect_refused(c, "feedback_layer", "[0, 4)");
  c.feedback_layer = 4;
  expect_refused(c, "feedback_layer", "got 4");
  c = ModelConfig{};
  c.feedback_layer = 1;  // set, but the source is the final norm
  expect_refused(c, "feedback_layer", "post_final_norm");
  c = ModelConfig{};
  c.layer_intermediate_size = {256, 256};  // one per layer (4) or none
  expect_refused(c, "layer_intermediate_size", "one per layer");
  c = ModelConfig{};
  c.layer_num_attention_heads = {4, 4, 4, 0};
  expect_refused(c, "layer_num_attention_heads[3]", "> 0");
  c = ModelConfig{};
  c.layer_num_key_value_heads = {4, 3, 4, 4};  // must divide layer 1's 4 query heads
  expect_refused(c, "layer_num_key_value_heads[1]", "divide");
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

TEST(ModelConfig, TheFuserNameChoosesTheType) {
  // a config names its fuser; the builder's dispatch knows the built-in ones and refuses others by name,
  // and a model type refuses a config that names another fuser
  ModelConfig c;
  c.fuser = "gru";
  EXPECT_NO_THROW(c.validate()) << "any name is valid: a user's fuser has its own";
  try {
    with_model<float>(c, [](auto) {});
    FAIL() << "unknown built-in fuser";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"gru\""), std::string::npos) << e.what();
  }
  try {
    Model<float> m(c, 0);
    FAIL() << "a glu model from a gru config";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gru"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("glu"), std::string::npos) << e.what();
  }
  for (const char* f : {"none", "glu", "gated_add", "concat"}) {
    c.fuser = f;
    std::string got;
    with_model<float>(c, [&](auto tag) { got = typename decltype(tag)::type(c, 0).fuser().type_name(); });
    EXPECT_EQ(got, f);
  }
}

// glu's init and gated_add's alpha are fuser options; the fields glu_init and gated_add_alpha are their
// legacy spellings (every older config and checkpoint holds them): read into the options, both given
// and different refused.
TEST(ModelConfig, LegacyFuserFieldsAreReadAsOptions) {
  ModelConfig c;
  c.glu_init = "fan_in";
  Model<double> m(c, 1);
  EXPECT_EQ(m.cfg.fuser_options, (Options{{"init", OptionValue::of_string("fan_in")}}));
  EXPECT_EQ(m.fuser().get_if<GluFuser<double>>()->init, GluInit::FanIn);
  EXPECT_EQ(to_json(Model<double>::normalized(c)), to_json(m.cfg));
  c.fuser_options = {{"init", OptionValue::of_string("identity_both")}};
  EXPECT_FBT_ERROR(Model<double>(c, 1), "glu_init", "differs from fuser_options.init");
  c.glu_init = "default";
  EXPECT_EQ(Model<double>(c, 1).fuser().get_if<GluFuser<double>>()->init, GluInit::IdentityBoth);
  c.fuser_options = {{"rank", OptionValue::of_int(2)}};
  EXPECT_FBT_ERROR(Model<double>(c, 1), "fuser_options.rank: unknown option of fuser \"glu\" (its options: init)");
  c.fuser = "none";
  EXPECT_FBT_ERROR(Model<double>(c, 1), "fuser_options", "the fuser is none");
  // the record round-trips through JSON: options typed, the block written only when not the built-in one
  c = ModelConfig{};
  c.fuser = "gated_add", c.fuser_options = {{"alpha", OptionValue::of_text("0.25")}};
  const nlohmann::json j = to_json(Model<double, GatedAddFuser<double>>(c, 1).cfg);
  EXPECT_EQ(j.at("fuser_options"), nlohmann::json({{"alpha", 0.25}}));
  EXPECT_FALSE(j.contains("block"));
  EXPECT_FALSE(j.contains("gated_add_alpha"));
  EXPECT_EQ(config_from_json(j, "test").fuser_options.at("alpha").r, 0.25);
}

TEST(ModelConfig, DescribesTheModelItBuilds) {
  // the builder reads a config into layers; describe_model reads the layers back: the same config
  for (const char* f : {"none", "glu", "gated_add", "concat"}) {
    ModelConfig c;
    c.fuser = f, c.glu_init = "fan_in", c.gated_add_alpha = 0.3, c.input_norm = "fused_only", c.tie_word_embeddings = false;
    c.feedback_source = "pre_final_norm", c.rope_theta = 500.0, c.z_loss = 1e-4, c.doc_attention = "causal";
    with_model<double>(c, [&](auto tag) {
      typename decltype(tag)::type m(c, 0);
      const ModelConfig got = describe_model(m);
      EXPECT_EQ(got.fuser, f);
      // the legacy fields are read into the fuser's options, which the model records
      EXPECT_EQ(got.glu_init, "default") << f;
      EXPECT_EQ(got.gated_add_alpha, ModelConfig{}.gated_add_alpha) << f;
      Options want;
      if (std::string(f) == "glu") want = {{"init", OptionValue::of_string("fan_in")}};  // each fuser records its own
      if (std::string(f) == "gated_add") want = {{"alpha", OptionValue::of_real(0.3)}};
      EXPECT_EQ(got.fuser_options, want) << f;
      EXPECT_EQ(to_json(got), to_json(m.cfg)) << f << ": the built model's own record";
      EXPECT_EQ(got.block, "decoder");
      EXPECT_EQ(got.feedback_source, "pre_final_norm");
      EXPECT_EQ(got.input_norm, "fused_only");
      EXPECT_EQ(got.doc_attention, "causal");
      EXPECT_EQ(got.rope_theta, 500.0);
      EXPECT_EQ(got.z_loss, 1e-4);
      EXPECT_EQ(got.head_dim, c.hs());
      EXPECT_FALSE(got.tie_word_embeddings);
      EXPECT_TRUE(got.uniform());
    });
  }
  // a middle-layer tap and a heterogeneous stack come back as they were given
  ModelConfig c;
  c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 1;
  c.layer_intermediate_size = {128, 256, 64}, c.layer_num_attention_heads = {4, 2, 4}, c.layer_num_key_value_heads = {2, 2, 1};
  c.head_dim = 32;
  Model<double> m(c, 0);
  const ModelConfig got = describe_model(m);
  EXPECT_EQ(got.feedback_source, "layer");
  EXPECT_EQ(got.feedback_layer, 1);
  EXPECT_EQ(got.layer_intermediate_size, c.layer_intermediate_size);
  EXPECT_EQ(got.layer_num_attention_heads, c.layer_num_attention_heads);
  EXPECT_EQ(got.layer_num_key_value_heads, c.layer_num_key_value_heads);
  EXPECT_EQ(m.params.spec("model.layers.1.mlp.up_proj.weight").shape, (Shape{256, 128}));
  EXPECT_EQ(m.params.spec("model.layers.2.self_attn.k_proj.weight").shape, (Shape{32, 128}));
}

TEST(ModelConfig, ExplicitHeadDimNeedNotDivideWidth) {
  ModelConfig c;
  c.hidden_size = 96, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;  // 4*16 != 96 is legal
  EXPECT_NO_THROW(c.validate());
  Model<double> m(c, 0);
  EXPECT_EQ(m.params.spec("model.layers.0.self_attn.q_proj.weight").shape, (Shape{64, 96}));
  EXPECT_EQ(m.params.spec("model.layers.0.self_attn.o_proj.weight").shape, (Shape{96, 64}));
}

TEST(ModelConfig, RefusesNonFiniteAndOutOfRangeReals) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  struct Case {
    double ModelConfig::*field;
    const char* name;
    std::vector<double> bad;
  };
  const Case cases[] = {{&ModelConfig::rope_theta, "rope_theta", {nan, inf, -inf, 0.0, -1.0}},
                        {&ModelConfig::rms_norm_eps, "rms_norm_eps", {nan, inf, 0.0, -1e-6, 2.0}},
                        {&ModelConfig::gated_add_alpha, "gated_add_alpha", {nan, inf, -inf}},
                        {&ModelConfig::initializer_range, "initializer_range", {nan, inf, 0.0, -0.02}},
                        {&ModelConfig::z_loss, "z_loss", {nan, inf, -1e-4}}};
  for (const auto& c : cases)
    for (double v : c.bad) {
      ModelConfig k;
      k.*c.field = v;
      expect_refused(k, c.name, std::isnan(v) ? "nan" : std::isinf(v) ? "inf" : "got");
    }
  ModelConfig ok;
  ok.gated_add_alpha = -0.5, ok.rms_norm_eps = 1.0, ok.rope_theta = 1e7, ok.z_loss = 0.0;  // the edges that are legal
  EXPECT_NO_THROW(ok.validate());
}

TEST(ModelConfig, BoundsEverySize) {
  struct Case {
    int ModelConfig::*field;
    const char* name;
    long long over;
  };
  const Case cases[] = {{&ModelConfig::vocab_size, "vocab_size", (1LL << 24) + 1},
                        {&ModelConfig::hidden_size, "hidden_size", (1LL << 16) + 1},
                        {&ModelConfig::num_hidden_layers, "num_hidden_layers", 4097},
                        {&ModelConfig::num_attention_heads, "num_attention_heads", 4097},
                        {&ModelConfig::num_key_value_heads, "num_key_value_heads", 4097},
                        {&ModelConfig::head_dim, "head_dim", 4098},
                        {&ModelConfig::intermediate_size, "intermediate_size", (1LL << 20) + 1},
                        {&ModelConfig::max_position_embeddings, "max_position_embeddings", (1LL << 24) + 1},
                        {&ModelConfig::num_hidden_layers, "num_hidden_layers", 1000000},
                        {&ModelConfig::vocab_size, "vocab_size", 2000000000}};
  for (const auto& c : cases) {
    ModelConfig k;
    k.*c.field = int(c.over);
    expect_refused(k, c.name, "<= ");
  }
  ModelConfig k;
  k.layer_intermediate_size = {384, 384, (1 << 20) + 1, 384};
  expect_refused(k, "layer_intermediate_size[2]", "<= 1048576");
  k = ModelConfig{};
  k.layer_num_attention_heads = {4, 4, 4, 8192};
  expect_refused(k, "layer_num_attention_heads[3]", "<= 4096");
  // Within every field's bound, but too much together: the RoPE table, the parameter count.
  k = ModelConfig{};
  k.max_position_embeddings = 1 << 24, k.head_dim = 32;  // 2^29 table elements
  expect_refused(k, "max_position_embeddings", "RoPE table");
  k = ModelConfig{};
  k.vocab_size = 1 << 24, k.hidden_size = 1 << 16, k.num_attention_heads = 512, k.num_key_value_heads = 512;  // 2^40 embedding
  expect_refused(k, "parameters", "68719476736");
  // The largest legal sizes of each field, one at a time, are valid.
  for (int i = 0; i < 8; ++i) {
    const Case& c = cases[i];
    const std::string name = c.name;
    ModelConfig m;
    m.*c.field = int(c.over - 1 - (name == "head_dim" ? 1 : 0));  // (head_dim must be even)
    if (name == "hidden_size") m.num_attention_heads = 16;        // head_dim 4096
    if (name == "num_attention_heads") m.num_key_value_heads = 4096, m.head_dim = 2;
    if (name == "num_key_value_heads") m.num_attention_heads = 4096, m.head_dim = 2;
    if (name == "max_position_embeddings") m.hidden_size = 8;     // head_dim 2: a 2^25-element table
    EXPECT_NO_THROW(m.validate()) << c.name;
  }
}

}  // namespace

}  // namespace test_model_config
