// tests/io/test_config_json.cpp: ModelConfig <-> JSON (fbt/io/config_json.hpp; spec sections 8-9).
//
// Every field survives a round trip (in memory and through a file, written atomically); head_dim is
// written resolved; a baseline config names Qwen3ForCausalLM; unknown keys, wrong types and invalid
// values are fbt::Errors naming the field and the source; the HF keys fbt ignores are accepted, except
// with values that would change the model. Every key that changes the model must be present (an
// absent key is an error naming it, never a silent default), except on the documented Hugging Face
// Qwen3 path; deep nesting and huge values are bounded errors; only regular files are read.
#include <gtest/gtest.h>

#include <fbt/io/config_json.hpp>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

#include "common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_io_config_json {

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
  EXPECT_EQ(j.size(), 21u + 4u) << j.dump();  // the 21 of a default config (no legacy glu_init / gated_add_alpha) + these 4
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

// The paper-recipe knobs are written only when they differ from v1's choice, so a v1 model's
// config is what it was before they existed (and its checkpoint re-saves byte for byte); absent, they read
// as v1's; present, they round-trip and are validated.
TEST_F(ConfigJson, PaperKnobsAreWrittenOnlyWhenUsed) {
  for (const char* k : {"gate_norm", "in_norm_init", "block_norm"}) EXPECT_FALSE(fbt::to_json(tiny()).contains(k)) << k;
  fbt::ModelConfig c = tiny();
  c.input_norm = "feedback_passes", c.gate_norm = "shared", c.in_norm_init = "embedding", c.block_norm = "sandwich";
  const json j = fbt::to_json(c);
  EXPECT_EQ(j["gate_norm"], "shared");
  EXPECT_EQ(j["in_norm_init"], "embedding");
  EXPECT_EQ(j["block_norm"], "sandwich");
  const fbt::ModelConfig back = fbt::config_from_json(json::parse(j.dump()), "mem");
  EXPECT_EQ(back.input_norm, "feedback_passes");
  EXPECT_EQ(back.gate_norm, "shared");
  EXPECT_EQ(back.in_norm_init, "embedding");
  EXPECT_EQ(back.block_norm, "sandwich");
  EXPECT_EQ(fbt::to_json(back), j);
  const fbt::ModelConfig old = fbt::config_from_json(fbt::to_json(tiny()), "mem");
  EXPECT_EQ(old.gate_norm, "separate");
  EXPECT_EQ(old.in_norm_init, "one");
  EXPECT_EQ(old.block_norm, "pre");
  json bad = j;
  bad["block_norm"] = "post";
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "mem"), "mem", "block_norm", "\"post\"", "pre, sandwich");
  bad = j;
  bad["gate_norm"] = true;
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "mem"), "mem", "gate_norm");
  // a sandwich baseline is not a Qwen3ForCausalLM
  fbt::ModelConfig b = tiny();
  b.fuser = "none", b.block_norm = "sandwich";
  EXPECT_FALSE(fbt::to_json(b).contains("architectures"));
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

  // fbt's keys that HF does not have take their documented meaning (qwen3_defaults()).
  EXPECT_EQ(c.z_loss, 0.0);
  EXPECT_EQ(c.doc_attention, "masked");
  EXPECT_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_TRUE(c.tie_word_embeddings);

  // The same keys under fbt's own model_type are an incomplete fbt config: refused, naming the first
  // missing key (this used to be accepted with ModelConfig's default fuser "glu" and feedback knobs).
  json j = hf;
  j["model_type"] = "fbt";
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'config.json'"), "'config.json'", "\"qk_norm\"", "missing");
  j.erase("model_type");
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "'config.json'"), "'config.json'", "missing");
  // A feedback fuser under qwen3 makes it an fbt model: its feedback knobs must be given too.
  j = hf;
  j["fuser"] = "concat";
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "mem"), "mem", "missing");
  for (const char* k : {"qk_norm", "z_loss", "doc_attention", "feedback_source", "input_norm"}) j[k] = fbt::to_json(fbt::ModelConfig{})[k];
  EXPECT_EQ(fbt::config_from_json(j, "mem").fuser, "concat");
  // An explicit fuser "none" is still the Qwen3 path.
  j = hf;
  j["fuser"] = "none";
  EXPECT_EQ(fbt::config_from_json(j, "mem").fuser, "none");
  // Every HF key that changes the forward must be there (HF's own defaults differ from fbt's, e.g. head_dim 128).
  for (const auto& k : fbt::qwen3_required_keys()) {
    json m = hf;
    m.erase(k);
    EXPECT_FBT_ERROR(fbt::config_from_json(m, "'config.json'"), "'config.json'", "\"" + k + "\"", "missing", "Qwen3");
  }
  // HF keys whose only value fbt implements may be absent (HF's default is that value).
  json lean = hf;
  for (const char* k : {"hidden_act", "attention_bias", "rope_scaling", "use_sliding_window", "layer_types", "initializer_range"}) lean.erase(k);
  EXPECT_NO_THROW(fbt::config_from_json(lean, "mem"));

  // Allow-listed keys whose value would change the model are refused.
  struct Case {
    const char* field;
    json value;
  };
  const Case bad[] = {{"hidden_act", "gelu"},
                      {"attention_bias", true},
                      {"rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4.0}}},
                      {"use_sliding_window", "yes"},
                      {"sliding_window", 2.5},
                      {"model_type", "llama"},
                      {"layer_types", json::array({"full_attention", "chunked_attention"})}};
  for (const auto& b : bad) {
    json k = hf;
    k[b.field] = b.value;
    EXPECT_FBT_ERROR(fbt::config_from_json(k, "'config.json'"), b.field, "'config.json'");
  }
}

// Sliding-window layers: written only with a window (in Hugging Face's four keys), read back the same;
// an HF file's use_sliding_window and max_window_layers are read as HF reads them.
TEST_F(ConfigJson, SlidingWindowKeysRoundTripAndReadAsHfReadsThem) {
  fbt::ModelConfig c;
  EXPECT_FALSE(fbt::to_json(c).contains("sliding_window"));
  EXPECT_FALSE(fbt::to_json(c).contains("layer_types"));
  c.num_hidden_layers = 3, c.sliding_window = 64, c.layer_types = {"full_attention", "sliding_attention", "sliding_attention"};
  const json j = fbt::to_json(c);
  EXPECT_EQ(j["sliding_window"], 64);
  EXPECT_EQ(j["use_sliding_window"], true);
  EXPECT_EQ(j["max_window_layers"], 1);
  const fbt::ModelConfig back = fbt::config_from_json(j, "mem");
  EXPECT_EQ(back.sliding_window, 64);
  EXPECT_EQ(back.layer_types, c.layer_types);
  EXPECT_EQ(fbt::to_json(back), j);
  json k = j;  // an fbt file may leave out use_sliding_window and max_window_layers (layer_types decides)
  k.erase("use_sliding_window"), k.erase("max_window_layers");
  EXPECT_EQ(fbt::config_from_json(k, "mem").layer_types, c.layer_types);
  k.erase("layer_types");  // without layer_types, HF's rule: layers max_window_layers (28) on are sliding: none of 3, so no window
  EXPECT_TRUE(fbt::config_from_json(k, "mem").layer_types.empty());
  EXPECT_EQ(fbt::config_from_json(k, "mem").sliding_window, 0);
  k["max_window_layers"] = 2;
  EXPECT_EQ(fbt::config_from_json(k, "mem").layer_window(2), 64);
  EXPECT_EQ(fbt::config_from_json(k, "mem").layer_window(1), 0);
  k["use_sliding_window"] = false;  // HF: no window at all
  EXPECT_TRUE(fbt::config_from_json(k, "mem").layer_types.empty());
  EXPECT_EQ(fbt::config_from_json(k, "mem").sliding_window, 0);
  json bad = j;
  bad["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "layer_types", "expected one per layer (3)");
  bad = j;
  bad["sliding_window"] = -4;
  EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "sliding_window", "got -4");
}

// Issue 47: one validation for every reader of a model config. Sliding layers without a window (sliding_window 0
// or null, or use_sliding_window false) were read as full attention; a wrong-length layer_types was dropped when
// the window was off; a window no layer uses was kept. Each is refused by name, in an fbt file and an HF one.
TEST_F(ConfigJson, WindowsAreRefusedTheSameWayInEveryFile) {
  fbt::ModelConfig c;
  c.num_hidden_layers = 3, c.sliding_window = 64, c.layer_types = {"full_attention", "sliding_attention", "full_attention"};
  const json fbt_file = fbt::to_json(c);
  json qwen = fbt_file;  // the Hugging Face form of the same stack (a baseline, model_type qwen3)
  qwen["model_type"] = "qwen3", qwen["fuser"] = "none";
  for (const json& base : {fbt_file, qwen}) {
    json bad = base;
    bad["sliding_window"] = 0;
    EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "'c.json'", "sliding_window", "sliding_attention");
    bad["sliding_window"] = nullptr;
    EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "sliding_window is null", "sliding_attention");
    bad = base;
    bad["use_sliding_window"] = false;
    EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "use_sliding_window is false", "sliding_attention");
    bad = base;  // the window off and the list too short: still one entry per layer
    bad["use_sliding_window"] = false, bad["layer_types"] = {"full_attention", "full_attention"};
    EXPECT_FBT_ERROR(fbt::config_from_json(bad, "'c.json'"), "layer_types", "2 entries", "expected one per layer (3)");
    json off = base;  // the window off and every layer full: the same model as no window
    off["use_sliding_window"] = false, off["layer_types"] = {"full_attention", "full_attention", "full_attention"};
    EXPECT_EQ(fbt::config_from_json(off, "mem").sliding_window, 0);
    EXPECT_TRUE(fbt::config_from_json(off, "mem").layer_types.empty());
  }
  json unused = fbt_file;  // an fbt file: a window that no listed layer uses is refused
  unused["layer_types"] = {"full_attention", "full_attention", "full_attention"};
  EXPECT_FBT_ERROR(fbt::config_from_json(unused, "'c.json'"), "sliding_window", "no layer is sliding_attention");
  json hf_unused = qwen;  // an HF file as transformers writes it (every layer listed full, use_sliding_window true): no window
  hf_unused["layer_types"] = unused["layer_types"];
  EXPECT_EQ(fbt::config_from_json(hf_unused, "mem").sliding_window, 0);
  fbt::ModelConfig m;  // and validate() itself, which the command line, Python and the checkpoint reader call
  m.sliding_window = 8;
  EXPECT_FBT_ERROR(m.validate(), "sliding_window", "no layer is sliding_attention", "layer_types not given");
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

// Every key to_json writes changes the model: an absent one is refused by name, never
// silently given ModelConfig's default. feedback_layer and the layer_* lists are written only when
// used: absent means a final-norm tap and a uniform stack.
TEST_F(ConfigJson, MissingKeysAreRefusedByName) {
  const json full = fbt::to_json(tiny());
  EXPECT_EQ(fbt::model_config_required_keys().size(), 18u);
  for (const auto& k : fbt::model_config_required_keys()) {
    ASSERT_TRUE(full.contains(k)) << k;
    json j = full;
    j.erase(k);
    EXPECT_FBT_ERROR(fbt::config_from_json(j, "'cfg.json'"), "'cfg.json'", "\"" + k + "\"", "missing");
  }
  // The HF decoration may be absent (it can only take the value fbt implements).
  json lean = full;
  for (const char* k : {"model_type", "hidden_act", "attention_bias"}) lean.erase(k);
  expect_same(fbt::config_from_json(lean, "mem"), tiny());
  // feedback_source "layer" needs its block.
  fbt::ModelConfig c = tiny();
  c.feedback_source = "layer", c.feedback_layer = 1;
  json j = fbt::to_json(c);
  expect_same(fbt::config_from_json(j, "mem"), c);
  j.erase("feedback_layer");
  EXPECT_FBT_ERROR(fbt::config_from_json(j, "mem"), "mem", "\"feedback_layer\"", "missing");
  // A file with a missing key names the file too.
  const std::string p = path("partial.json");
  json k = full;
  k.erase("rms_norm_eps");
  write_text(p, k.dump());
  EXPECT_FBT_ERROR(fbt::config_from_json_file(p), p, "\"rms_norm_eps\"", "missing");
}

// Non-finite reals never reach a model: JSON text has no NaN (nlohmann writes null, refused by type)
// and a number too large for a double (1e400) is a parse error; an infinity put into a json object by a
// program is refused by validate(), by name.
TEST_F(ConfigJson, NonFiniteRealsAreRefused) {
  for (const char* k : {"rope_theta", "rms_norm_eps", "initializer_range", "z_loss"}) {
    std::string t = fbt::to_json(tiny()).dump();
    const auto at = t.find(std::string("\"") + k + "\":") + std::strlen(k) + 3;
    t = t.substr(0, at) + "1e400" + t.substr(t.find_first_of(",}", at));
    EXPECT_FBT_ERROR(fbt::detail::parse_json_strict(t, "'cfg.json'"), "'cfg.json'", "invalid JSON", "number overflow", "1e400");
    json j = fbt::to_json(tiny());
    j[k] = std::numeric_limits<double>::infinity();
    EXPECT_FBT_ERROR(fbt::config_from_json(j, "mem"), "mem", k, "inf");
    j[k] = std::numeric_limits<double>::quiet_NaN();
    EXPECT_FBT_ERROR(fbt::config_from_json(j, "mem"), "mem", k, "nan");
    EXPECT_FBT_ERROR(fbt::config_from_json(json::parse(j.dump()), "mem"), "mem", k, "number");  // NaN written as null
  }
}

// Deeply nested values and huge values are bounded errors; only regular files are read.
TEST_F(ConfigJson, HostileFilesAreBoundedErrors) {
  const std::string p = path("hostile.json");
  write_text(p, "{\"vocab_size\":" + std::string(150000, '['));
  EXPECT_FBT_ERROR(fbt::config_from_json_file(p), p, "nesting deeper than 64 levels at byte 77");
  json full = fbt::to_json(tiny());
  full.erase("vocab_size");
  std::string text = full.dump();  // well-formed and 75,000 deep: the old error path dump()ed it, overflowing the stack
  write_text(p, text.substr(0, text.size() - 1) + ",\"vocab_size\":" + std::string(75000, '[') + std::string(75000, ']') + "}");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(p), p, "nesting deeper than 64 levels at byte");
  // A deeply nested but well-formed value handed to config_from_json directly (built by the program, not parsed).
  for (const char* k : {"vocab_size", "layer_intermediate_size", "fuser"}) {
    json j = fbt::to_json(tiny());
    json* cur = &(j[k] = json::array());
    for (int i = 0; i < 10000; ++i) cur = &cur->emplace_back(json::array());  // built in place: no recursive copies
    EXPECT_FBT_ERROR(fbt::config_from_json(j, "mem"), "mem", std::string("\"") + k + "\"", "array");
  }
  // A 20 MB string value: one short line.
  for (const char* k : {"fuser", "doc_attention", "bogus_key"}) {
    json h = fbt::to_json(tiny());
    h[k] = std::string(20000000, 'v');
    write_text(p, h.dump());
    try {
      fbt::config_from_json_file(p);
      ADD_FAILURE() << k << " accepted";
    } catch (const fbt::Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 500u) << k;
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << k << ": " << e.what();
    }
    h = fbt::to_json(tiny());
    h[k] = std::string(5000000, 'v');  // under the string limit: refused by the field's rules, quoted briefly
    try {
      fbt::config_from_json(h, "mem");
      ADD_FAILURE() << k << " accepted";
    } catch (const fbt::Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 500u) << k;
      EXPECT_NE(std::string(e.what()).find(k), std::string::npos) << e.what();
    }
  }
  // An unknown key 20 MB long is quoted briefly too.
  json u = fbt::to_json(tiny());
  u[std::string(20000000, 'u')] = 1;
  try {
    fbt::config_from_json(u, "mem");
    ADD_FAILURE() << "accepted";
  } catch (const fbt::Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 500u);
  }
  // FIFO, device, directory.
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(fbt::config_from_json_file(fifo), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::config_from_json_file("/dev/zero"), "/dev/zero", "not a regular file");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(dir_.string()), "is a directory");
}

// A config that is not valid UTF-8 (a stray 0xff, a control byte in a key): the error quotes the bytes
// escaped as \xNN, never raw, so the message is printable text on one line.
// A NUL byte ended nlohmann's parse as if the text stopped there: {"a":1}\0{"b":2} read as {"a":1}, and a config.json
// with keys after a NUL loaded without them. parse_json_strict refuses any NUL byte, naming its offset; so does every
// reader built on it (config files, HF config.json, SFT lines, probe items, grid files).
TEST_F(ConfigJson, ANulByteIsRefusedNotTheEndOfTheDocument) {
  const std::string t = std::string("{\"vocab_size\": 257}") + '\0' + "{\"hidden_act\": \"gelu\"}";
  EXPECT_FBT_ERROR(fbt::detail::parse_json_strict(t, "'cfg.json'"), "'cfg.json'", "a NUL byte at offset 19");
  const std::string inside = std::string("{\"a\": \"x") + '\0' + "y\"}";
  EXPECT_FBT_ERROR(fbt::detail::parse_json_strict(inside, "'x.json'"), "a NUL byte at offset 8");
  const fbt::ModelConfig c;
  const std::string nul = path("nul_config.json");
  std::ofstream(nul, std::ios::binary) << fbt::to_json(c).dump() << '\0' << "{\"attention_bias\":true,\"hidden_act\":\"gelu\"}";
  EXPECT_FBT_ERROR(fbt::config_from_json_file(nul), nul, "NUL byte");
}

TEST_F(ConfigJson, ErrorTextEscapesBytesThatAreNotPrintable) {
  const std::string bad_utf8 = path("bad_utf8.json"), bad_key = path("bad_key.json");
  write_text(bad_utf8, "{\"vocab_size\": \"ab\xff\xfe\"}");
  write_text(bad_key, "{\"caf\xc3\xa9\\u0001\": 1}");  // a JSON escape: the key holds byte 0x01
  for (const std::string& p : {bad_utf8, bad_key}) {
    std::string msg;
    try {
      fbt::config_from_json_file(p);
      ADD_FAILURE() << p << " accepted";
    } catch (const fbt::Error& e) {
      msg = e.what();
    }
    for (const char c : msg) {
      const unsigned char u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u >= 0x20 && u != 0x7f && !(p == bad_utf8 && u >= 0x80)) << "raw byte " << int(u) << " in: " << msg;
    }
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
  EXPECT_FBT_ERROR(fbt::config_from_json_file(bad_utf8), "\\xff");
  EXPECT_FBT_ERROR(fbt::config_from_json_file(bad_key), "caf\xc3\xa9\\x01", "unknown key");  // valid UTF-8 is kept
}

}  // namespace

}  // namespace test_io_config_json
