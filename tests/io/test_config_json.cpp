// tests/io/test_config_json.cpp: ModelConfig <-> JSON (fbt/io/config_json.hpp; spec sections 8-9).
//
// Every field survives a round trip (in memory and through a file, written atomically); head_dim is
// written resolved; a baseline config names Qwen3ForCausalLM; unknown keys, wrong types and invalid
// values are fbt::Errors naming the field and the source; the HF keys fbt ignores are accepted, except
// with values that would change the model.
#include <gtest/gtest.h>

#include <fbt/io/config_json.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

#include "common/io_test.hpp"

using fbt_test::read_bytes;

namespace {

class ConfigJson : public fbt_test::TempDirTest {};

void write_text(const std::string& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

// The brief's tiny config: V 11, D 8, L 2, 2 heads sharing 1 kv head, SwiGLU 12.
fbt::ModelConfig tiny() {
  fbt::ModelConfig c;
  c.vocab_size = 11, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 12;
  return c;
}

// Every field away from its default (and valid).
fbt::ModelConfig all_fields_changed() {
  fbt::ModelConfig c = tiny();
  c.num_hidden_layers = 3, c.head_dim = 6, c.max_position_embeddings = 77, c.rope_theta = 123456.5, c.rms_norm_eps = 1.25e-5;
  c.tie_word_embeddings = false, c.qk_norm = false, c.initializer_range = 0.03, c.z_loss = 1e-4, c.doc_attention = "causal";
  c.fuser = "gated_add", c.feedback_source = "pre_final_norm", c.input_norm = "fused_only", c.glu_init = "fan_in";
  c.gated_add_alpha = 0.3;
  return c;
}

void expect_same(const fbt::ModelConfig& a, const fbt::ModelConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.hs(), b.hs());
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rope_theta, b.rope_theta);  // exact: JSON numbers round-trip doubles
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.initializer_range, b.initializer_range);
  EXPECT_EQ(a.z_loss, b.z_loss);
  EXPECT_EQ(a.doc_attention, b.doc_attention);
  EXPECT_EQ(a.fuser, b.fuser);
  EXPECT_EQ(a.feedback_source, b.feedback_source);
  EXPECT_EQ(a.input_norm, b.input_norm);
  EXPECT_EQ(a.glu_init, b.glu_init);
  EXPECT_EQ(a.gated_add_alpha, b.gated_add_alpha);
  EXPECT_EQ(a.feedback_layer, b.feedback_layer);
  EXPECT_EQ(a.layer_intermediate_size, b.layer_intermediate_size);
  EXPECT_EQ(a.layer_num_attention_heads, b.layer_num_attention_heads);
  EXPECT_EQ(a.layer_num_key_value_heads, b.layer_num_key_value_heads);
}

TEST_F(ConfigJson, RoundTripKeepsEveryField) {
  const fbt::ModelConfig c = all_fields_changed();
  const json j = fbt::to_json(c);
  // Every ModelConfig member under its own name, plus the HF keys.
  for (const char* k : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                        "intermediate_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "qk_norm",
                        "initializer_range", "z_loss", "doc_attention", "fuser", "feedback_source", "input_norm", "glu_init",
                        "gated_add_alpha", "model_type", "hidden_act", "attention_bias"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j.size(), 23u) << j.dump();
  EXPECT_EQ(j["model_type"], "fbt");
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(j["head_dim"], 6);
  EXPECT_EQ(j["fuser"], "gated_add");

  expect_same(fbt::config_from_json(json::parse(j.dump()), "mem"), c);  // through text

  const std::string p = path("config.json");
  fbt::save_config_json(p, c);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  expect_same(fbt::config_from_json_file(p), c);

  // The defaults too (head_dim 0 comes back as its resolved value, hidden_size / heads).
  const fbt::ModelConfig d;
  const fbt::ModelConfig r = fbt::config_from_json(fbt::to_json(d), "mem");
  expect_same(r, d);
  EXPECT_EQ(fbt::to_json(d)["head_dim"], d.hidden_size / d.num_attention_heads);
  EXPECT_EQ(fbt::to_json(r), fbt::to_json(d));
}

// A middle-layer tap and a heterogeneous stack are recorded (and only then: a uniform model's config
// has exactly the keys it had before these fields existed, so its checkpoint bytes do not change).
TEST_F(ConfigJson, TapAndPerLayerSizesRoundTrip) {
  fbt::ModelConfig c = tiny();
  c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 1;
  c.layer_intermediate_size = {12, 24, 6}, c.layer_num_attention_heads = {2, 4, 2}, c.layer_num_key_value_heads = {1, 2, 2};
  c.head_dim = 4;
  const json j = fbt::to_json(c);
  EXPECT_EQ(j["feedback_layer"], 1);
  EXPECT_EQ(j["layer_intermediate_size"], json::array({12, 24, 6}));
  EXPECT_EQ(j.size(), 23u + 4u) << j.dump();
  expect_same(fbt::config_from_json(json::parse(j.dump()), "mem"), c);
  for (const char* k : {"feedback_layer", "layer_intermediate_size", "layer_num_attention_heads", "layer_num_key_value_heads"})
    EXPECT_FALSE(fbt::to_json(tiny()).contains(k)) << k;
  json bad = j;
  bad["layer_intermediate_size"] = json::array({12, 24});
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "mem"), "mem", "layer_intermediate_size", "one per layer");
  bad = j;
  bad["layer_num_attention_heads"] = "2,4,2";
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "mem"), "mem", "layer_num_attention_heads", "array of integers");
}

TEST_F(ConfigJson, SaveReplacesAnExistingFile) {
  const std::string p = path("config.json");
  write_text(p, "old contents, not JSON");
  fbt::save_config_json(p, tiny());
  EXPECT_EQ(fbt::config_from_json_file(p).hidden_size, 8);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(ConfigJson, BaselineNamesQwen3Architecture) {
  fbt::ModelConfig c = tiny();
  c.fuser = "none";
  EXPECT_EQ(fbt::to_json(c)["architectures"], json::array({"Qwen3ForCausalLM"}));
  c.qk_norm = false;  // Qwen3 always has QK-norm: without it the model is not a Qwen3ForCausalLM
  EXPECT_FALSE(fbt::to_json(c).contains("architectures"));
  c.qk_norm = true, c.fuser = "glu";
  EXPECT_FALSE(fbt::to_json(c).contains("architectures"));
  json j = fbt::to_json(c);  // nlohmann's ADL hook gives the same object
  json k = c;
  EXPECT_EQ(j, k);
}

TEST_F(ConfigJson, UnknownKeyIsRefusedByName) {
  json j = fbt::to_json(tiny());
  j["hiden_size"] = 8;  // a typo must not be silently ignored
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'run/config.json'"), "hiden_size", "run/config.json", "unknown key");
  json k = fbt::to_json(tiny());
  k["schedule"] = json::object();
  EXPECT_FBT_ERROR(fbt::config_from_json(k, "where-it-came-from"), "schedule", "where-it-came-from");
}

TEST_F(ConfigJson, WrongTypeIsRefusedByField) {
  struct Case {
    const char* field;
    json value;
  };
  const Case cases[] = {{"hidden_size", "8"},          {"hidden_size", 8.5},       {"vocab_size", true},
                        {"num_hidden_layers", json()}, {"head_dim", "4"},          {"rope_theta", "1e4"},
                        {"rms_norm_eps", json::array()}, {"tie_word_embeddings", 1}, {"qk_norm", "true"},
                        {"fuser", 3},                  {"feedback_source", json()}, {"gated_add_alpha", "0.1"},
                        {"intermediate_size", 5000000000LL}};
  for (const auto& c : cases) {
    json j = fbt::to_json(tiny());
    j[c.field] = c.value;
    EXPECT_FBT_ERROR(fbt::config_from_json(j, "'cfg.json'"), std::string("\"") + c.field + "\"", "'cfg.json'");
  }
  EXPECT_FBT_ERROR(fbt::config_from_json(json::array({1, 2}), "'cfg.json'"), "'cfg.json'", "object");
}

TEST_F(ConfigJson, IntegersAreAcceptedForRealFields) {
  json j = fbt::to_json(tiny());
  j["rope_theta"] = 1000000;  // as HF Qwen3 configs write it
  j["gated_add_alpha"] = 1;
  const auto c = fbt::config_from_json(j, "mem");
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.gated_add_alpha, 1.0);
}

TEST_F(ConfigJson, InvalidValueIsRefusedByValidate) {
  json j = fbt::to_json(tiny());
  j["num_key_value_heads"] = 3;  // does not divide 2 heads
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'bad.json'"), "num_key_value_heads", "'bad.json'");
  j = fbt::to_json(tiny());
  j["fuser"] = "";  // any other name may be a user's fuser: the model type that loads it checks it (test_config.cpp)
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'bad.json'"), "fuser", "empty", "'bad.json'");
  j = fbt::to_json(tiny());
  j["hidden_size"] = -8;
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'bad.json'"), "hidden_size", "'bad.json'");

  fbt::ModelConfig c = tiny();
  c.rms_norm_eps = 0;
  const std::string p = path("never.json");
  EXPECT_FBT_ERROR(fbt::save_config_json(p, c), "rms_norm_eps", p);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(ConfigJson, HuggingFaceQwen3ConfigIsAccepted) {
  // The shape of a Qwen3 config.json (values shrunk), with the keys fbt ignores.
  const json hf = json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 4, "hidden_act": "silu", "hidden_size": 8,
    "initializer_range": 0.02, "intermediate_size": 12, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 2, "num_hidden_layers": 2, "num_key_value_heads": 1,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 11, "layer_types": ["full_attention", "full_attention"],
    "pad_token_id": null, "_name_or_path": "Qwen/Qwen3-tiny", "dtype": "bfloat16"})");
  const auto c = fbt::config_from_json(hf, "'config.json'");
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.hs(), 4);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.fuser, "none");  // a Qwen3 config without a fuser is a plain Qwen3 model
  EXPECT_TRUE(c.qk_norm);

  // fbt's own model_type keeps ModelConfig's default fuser; an explicit fuser wins under qwen3.
  json j = hf;
  j["model_type"] = "fbt";
  EXPECT_EQ(fbt::config_from_json(j, "mem").fuser, "glu");
  j["model_type"] = "qwen3";
  j["fuser"] = "concat";
  EXPECT_EQ(fbt::config_from_json(j, "mem").fuser, "concat");

  // Allow-listed keys whose value would change the model are refused.
  struct Case {
    const char* field;
    json value;
  };
  const Case bad[] = {{"hidden_act", "gelu"},
                      {"attention_bias", true},
                      {"rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4.0}}},
                      {"use_sliding_window", true},
                      {"model_type", "llama"},
                      {"layer_types", json::array({"full_attention", "sliding_attention"})}};
  for (const auto& b : bad) {
    json k = hf;
    k[b.field] = b.value;
    EXPECT_FBT_ERROR(fbt::config_from_json(k, "'config.json'"), b.field, "'config.json'");
  }
}

TEST_F(ConfigJson, BadFilesAreRefusedByName) {
  const std::string missing = path("missing.json");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(missing), missing);

  const std::string bad = path("bad.json");
  write_text(bad, R"({"hidden_size": 8,, })");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(bad), bad, "invalid JSON");

  const std::string dup = path("dup.json");
  write_text(dup, R"({"hidden_size": 8, "vocab_size": 11, "hidden_size": 16})");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(dup), dup, "duplicate", "hidden_size");

  const std::string typ = path("type.json");
  write_text(typ, R"({"vocab_size": "eleven"})");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(typ), typ, "vocab_size");
}

}  // namespace
