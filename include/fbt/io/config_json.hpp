// fbt/io/config_json.hpp: ModelConfig <-> JSON (the config.json of a run, and the `config` string
// that a checkpoint carries in its safetensors __metadata__, spec sections 8-9).
//
// Keys are ModelConfig's member names, i.e. the Hugging Face Qwen3 names plus the feedback knobs
// (STYLE 2.5). to_json writes every field (head_dim resolved to its actual value) and a few HF keys
// (model_type, hidden_act, attention_bias, and for a plain Qwen3 model `architectures`) so that a
// baseline config reads like a Qwen3 config.json. config_from_json is strict: a wrong type, an unknown
// key or a value that validate() refuses is an fbt::Error naming the field and the source, quoting at
// most a bounded excerpt of the value. A key that changes the model (every field to_json writes,
// model_config_required_keys()) must be present: an absent one is an error naming it, never a silent
// default. Optional: feedback_layer (needed only with feedback_source "layer") and the layer_* lists
// (absent = uniform stack). The one compatibility path is a Hugging Face Qwen3 config.json (model_type
// "qwen3", no fuser or fuser "none"): it must carry HF's own keys (qwen3_required_keys()) and gets
// fbt's meaning for those HF does not have (qwen3_defaults(), docs/file-formats.md). HF keys that fbt
// does not use are accepted from a fixed allow-list (hf_ignored_keys()); the ones that would change
// the computation (hidden_act, attention_bias, rope_scaling, and newer transformers' rope_parameters)
// are accepted only with the value fbt implements. Sliding-window layers use HF's own four keys
// (sliding_window, use_sliding_window, max_window_layers, layer_types), read as HF reads them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "../model/config.hpp"
#include "json.hpp"

namespace fbt {

/// \brief HF config keys that config_from_json accepts and ignores (fbt has no use for them), e.g.
/// from a Qwen3 config.json. Those that would change the model are checked, see config_from_json.
inline const std::vector<std::string>& hf_ignored_keys() {
  static const std::vector<std::string> keys = {
      "architectures", "model_type",   "torch_dtype",        "dtype",          "hidden_act",
      "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id",   "pad_token_id",
      "transformers_version", "use_cache", "rope_scaling", "_name_or_path"};
  return keys;
}

/// \brief The keys an fbt config (model_type "fbt" or absent) must carry: every field to_json always
/// writes, since each of them changes the model or its training (head_dim may be null, meaning
/// hidden_size / num_attention_heads).
inline const std::vector<std::string>& model_config_required_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size",        "hidden_size",     "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
      "head_dim",          "intermediate_size", "max_position_embeddings", "rope_theta",   "rms_norm_eps",
      "tie_word_embeddings", "qk_norm",       "initializer_range", "z_loss",              "doc_attention",
      "fuser",             "feedback_source", "input_norm"};
  return keys;
}

/// \brief The keys a Hugging Face Qwen3 config.json (model_type "qwen3") must carry: the HF keys that
/// change the forward. (Absent HF keys whose only value fbt implements, hidden_act "silu",
/// attention_bias false, rope_scaling null, use_sliding_window false, take that value, as in HF.)
inline const std::vector<std::string>& qwen3_required_keys() {
  static const std::vector<std::string> keys = {
      "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
      "intermediate_size", "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings"};
  return keys;
}

/// \brief What a Hugging Face Qwen3 config gets for the fbt keys it does not have (each may also be
/// given): a plain Qwen3 decoder, fuser "none", qk_norm true (Qwen3 always normalises q and k),
/// z_loss 0, doc_attention "masked" (fbt's default), initializer_range 0.02 (HF's default),
/// feedback_source "post_final_norm", input_norm "all", glu_init "default", gated_add_alpha 0.1 (the
/// last four are unused without a fuser).
inline ModelConfig qwen3_defaults() {
  ModelConfig c;
  c.fuser = "none", c.qk_norm = true, c.z_loss = 0.0, c.doc_attention = "masked", c.initializer_range = 0.02;
  c.feedback_source = "post_final_norm", c.input_norm = "all", c.glu_init = "default", c.gated_add_alpha = 0.1;
  return c;
}

/// \brief Options as a JSON object {name: value}. A value typed on the command line that was never
/// resolved (OptionValue::Text) is written as the JSON literal it reads as (8, 0.5, true), else as a string.
inline nlohmann::json options_to_json(const Options& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : o) {
    switch (v.kind) {
      case OptionValue::Bool: j[k] = v.b; break;
      case OptionValue::Int: j[k] = v.i; break;
      case OptionValue::Real: j[k] = v.r; break;
      case OptionValue::String: j[k] = v.s; break;
      default: {
        nlohmann::json lit = nlohmann::json::parse(v.s, nullptr, /*allow_exceptions=*/false);
        j[k] = (lit.is_number() || lit.is_boolean()) ? lit : nlohmann::json(v.s);
      }
    }
  }
  return j;
}
/// \brief Options from a JSON object {name: value} of booleans, numbers and strings (typed as given).
/// Refuses anything else naming `field` ("fuser_options") and the key; at most 64 options.
inline Options options_from_json(const nlohmann::json& j, const std::string& field, const std::string& where) {
  auto fail = [&](const std::string& what) { throw Error(where + ": " + field + ": " + what); };
  if (!j.is_object()) fail(std::string("must be an object {option: value}, got ") + j.type_name());
  if (j.size() > 64) fail("holds " + std::to_string(j.size()) + " options, more than 64");
  Options o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string k = detail::excerpt(it.key(), 64);
    if (it.key().empty() || it.key().size() > 64) fail("an option name must hold 1 to 64 bytes, got \"" + k + "\"");
    const nlohmann::json& v = it.value();
    if (v.is_boolean()) o[it.key()] = OptionValue::of_bool(v.get<bool>());
    else if (v.is_number_integer() && !v.is_number_unsigned()) o[it.key()] = OptionValue::of_int(v.get<long long>());
    else if (v.is_number_unsigned()) {
      if (v.get<unsigned long long>() > (unsigned long long)std::numeric_limits<long long>::max()) fail(k + ": integer " + v.dump() + " is out of range");
      o[it.key()] = OptionValue::of_int((long long)v.get<unsigned long long>());
    } else if (v.is_number()) o[it.key()] = OptionValue::of_real(v.get<double>());
    else if (v.is_string()) o[it.key()] = OptionValue::of_string(v.get<std::string>());
    else fail(k + ": must be a boolean, number or string, got " + std::string(v.type_name()));
  }
  return o;
}

/// \brief Sliding-window layers in Hugging Face Qwen3's four keys, written only with a window (so a
/// config without one is unchanged): sliding_window, use_sliding_window true, layer_types (which
/// decides), and max_window_layers = the first sliding layer (what HF derives layer_types from without them).
inline void sliding_window_to_json(const ModelConfig& c, nlohmann::json& j) {
  if (c.sliding_window <= 0) return;
  std::vector<std::string> types = c.layer_types;
  if (types.empty()) types.assign(std::size_t(c.num_hidden_layers), "full_attention");
  int first_sliding = c.num_hidden_layers;
  for (int l = c.num_hidden_layers - 1; l >= 0; --l)
    if (types[std::size_t(l)] == "sliding_attention") first_sliding = l;
  j["sliding_window"] = c.sliding_window, j["use_sliding_window"] = true, j["max_window_layers"] = first_sliding, j["layer_types"] = types;
}

/// \brief The config as a JSON object: every ModelConfig field under its member name (head_dim
/// resolved to hs()), plus "model_type": "fbt", "hidden_act": "silu", "attention_bias": false and,
/// for a plain Qwen3 model (fuser "none" with qk_norm), "architectures": ["Qwen3ForCausalLM"].
inline nlohmann::json to_json(const ModelConfig& c) {
  nlohmann::json j;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.hs();
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["qk_norm"] = c.qk_norm;
  j["initializer_range"] = c.initializer_range;
  j["z_loss"] = c.z_loss;
  j["doc_attention"] = c.doc_attention;
  j["fuser"] = c.fuser;
  j["feedback_source"] = c.feedback_source;
  j["input_norm"] = c.input_norm;
  // a fuser's and a block's own options, and the block type, written when there are any / it is not the
  // built-in one; the legacy glu_init / gated_add_alpha only when they still hold a value of their own
  // (a config not yet built into a model: a model records them as fuser_options)
  if (!c.fuser_options.empty()) j["fuser_options"] = options_to_json(c.fuser_options);
  if (c.block != "decoder") j["block"] = c.block;
  if (!c.block_options.empty()) j["block_options"] = options_to_json(c.block_options);
  if (c.glu_init != "default") j["glu_init"] = c.glu_init;
  if (c.gated_add_alpha != 0.1) j["gated_add_alpha"] = c.gated_add_alpha;
  // written only when used, so a uniform model's config is the same as before these fields existed
  if (c.feedback_source == "layer") j["feedback_layer"] = c.feedback_layer;
  if (!c.layer_intermediate_size.empty()) j["layer_intermediate_size"] = c.layer_intermediate_size;
  if (!c.layer_num_attention_heads.empty()) j["layer_num_attention_heads"] = c.layer_num_attention_heads;
  if (!c.layer_num_key_value_heads.empty()) j["layer_num_key_value_heads"] = c.layer_num_key_value_heads;
  sliding_window_to_json(c, j);
  if (!c.layer_blocks.empty()) j["layer_blocks"] = c.layer_blocks;
  // the paper-recipe knobs (spec 10), likewise written only when not v1's choice (absent = v1's value)
  if (c.gate_norm != "separate") j["gate_norm"] = c.gate_norm;
  if (c.in_norm_init != "one") j["in_norm_init"] = c.in_norm_init;
  if (c.block_norm != "pre") j["block_norm"] = c.block_norm;
  // HF keys, so that a baseline config reads like a Qwen3 config.json. Qwen3 always has QK-norm, so
  // a model without it is not a Qwen3ForCausalLM even with feedback off.
  j["model_type"] = "fbt";
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  if (!c.feedback() && c.qk_norm && c.block_norm == "pre") j["architectures"] = nlohmann::json::array({"Qwen3ForCausalLM"});
  return j;
}

/// \brief nlohmann's ADL hook, so that `nlohmann::json j = cfg;` works.
inline void to_json(nlohmann::json& j, const ModelConfig& c) { j = to_json(c); }

/// \brief Reads a config from a JSON object.
/// \param where names the source in errors (a file, or "'ckpt.safetensors': __metadata__.config")
///
/// Refuses, with an fbt::Error naming the field and `where`: a non-object; a missing key of
/// model_config_required_keys() (or, for a Hugging Face Qwen3 config, of qwen3_required_keys()); a
/// feedback_source "layer" without feedback_layer; a field of the wrong type (integers must be
/// integers, reals any number, flags booleans, knobs strings; head_dim may be null = hidden_size /
/// num_attention_heads); an unknown key not in hf_ignored_keys(); hidden_act other than "silu",
/// attention_bias true, a non-null rope_scaling, model_type other than "fbt"/"qwen3"; and anything
/// validate() refuses (bounds, non-finite reals, a layer type other than full_attention /
/// sliding_attention). The sliding-window keys are read as HF's Qwen3Config reads them: sliding_window
/// counts only with use_sliding_window (absent: false in an HF file, true in an fbt one), and without
/// layer_types the layers from max_window_layers (default 28) on are sliding. A config with model_type "qwen3" and no fuser (or fuser "none") is read as a
/// Hugging Face Qwen3 config.json: qwen3_defaults() gives the keys HF does not have.
inline ModelConfig config_from_json(const nlohmann::json& j, const std::string& where) {
  using detail::excerpt;
  using detail::json_brief;
  auto fail = [&](const std::string& field, const std::string& what) -> void {
    throw Error(where + ": model config field \"" + excerpt(field, 64) + "\": " + what);
  };
  if (!j.is_object()) throw Error(where + ": model config must be a JSON object, got " + std::string(j.type_name()));
  // A Hugging Face Qwen3 config (model_type "qwen3") without a feedback fuser: the compatibility path.
  const auto mt = j.find("model_type"), fz = j.find("fuser");
  const bool hf_qwen3 = mt != j.end() && *mt == "qwen3" && (fz == j.end() || *fz == "none");
  ModelConfig c = hf_qwen3 ? qwen3_defaults() : ModelConfig{};
  auto get_int = [&](const std::string& k, const nlohmann::json& v, int& dst) {  // NOLINT
    if (!v.is_number_integer()) fail(k, std::string("must be an integer, got ") + v.type_name() + " " + json_brief(v));
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<int>::max())
                               : (v.get<std::int64_t>() > std::numeric_limits<int>::max() ||
                                  v.get<std::int64_t>() < std::numeric_limits<int>::min()))
      fail(k, "integer " + json_brief(v) + " is out of range");
    dst = int(v.get<std::int64_t>());
  };
  auto get_real = [&](const std::string& k, const nlohmann::json& v, double& dst) {
    if (!v.is_number()) fail(k, std::string("must be a number, got ") + v.type_name() + " " + json_brief(v));
    dst = v.get<double>();
  };
  auto get_bool = [&](const std::string& k, const nlohmann::json& v, bool& dst) {
    if (!v.is_boolean()) fail(k, std::string("must be true or false, got ") + v.type_name() + " " + json_brief(v));
    dst = v.get<bool>();
  };
  auto get_ints = [&](const std::string& k, const nlohmann::json& v, std::vector<int>& dst) {
    if (!v.is_array()) fail(k, std::string("must be an array of integers (one per layer), got ") + v.type_name());
    if (v.size() > std::size_t(ModelLimits::max_hidden_layers))
      fail(k, "has " + std::to_string(v.size()) + " entries, more than the " + std::to_string(ModelLimits::max_hidden_layers) + " layers fbt allows");
    dst.clear();
    for (const auto& x : v) {
      int i = 0;
      get_int(k, x, i);
      dst.push_back(i);
    }
  };
  auto get_str = [&](const std::string& k, const nlohmann::json& v, std::string& dst) {
    if (!v.is_string()) fail(k, std::string("must be a string, got ") + v.type_name() + " " + json_brief(v));
    dst = v.get<std::string>();
  };
  // Hugging Face Qwen3's sliding-window keys, read after the loop as HF reads them
  bool use_sliding = !hf_qwen3;  // HF's default false; an fbt config's sliding_window is used as given
  int max_window_layers = 28;    // HF's default
  bool has_layer_types = false;
  auto get_strs = [&](const std::string& k, const nlohmann::json& v, std::vector<std::string>& dst) {
    if (!v.is_array()) fail(k, std::string("must be an array of strings (one per layer), got ") + v.type_name());
    if (v.size() > std::size_t(ModelLimits::max_hidden_layers))
      fail(k, "has " + std::to_string(v.size()) + " entries, more than the " + std::to_string(ModelLimits::max_hidden_layers) + " layers fbt allows");
    dst.clear();
    for (const auto& x : v) {
      std::string t;
      get_str(k, x, t);
      dst.push_back(t);
    }
  };
  const auto& ignored = hf_ignored_keys();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    if (k == "vocab_size") get_int(k, v, c.vocab_size);
    else if (k == "hidden_size") get_int(k, v, c.hidden_size);
    else if (k == "num_hidden_layers") get_int(k, v, c.num_hidden_layers);
    else if (k == "num_attention_heads") get_int(k, v, c.num_attention_heads);
    else if (k == "num_key_value_heads") get_int(k, v, c.num_key_value_heads);
    else if (k == "head_dim") {
      if (v.is_null()) c.head_dim = 0;  // HF writes null for "hidden_size / num_attention_heads"
      else get_int(k, v, c.head_dim);
    } else if (k == "intermediate_size") get_int(k, v, c.intermediate_size);
    else if (k == "max_position_embeddings") get_int(k, v, c.max_position_embeddings);
    else if (k == "rope_theta") get_real(k, v, c.rope_theta);
    else if (k == "rms_norm_eps") get_real(k, v, c.rms_norm_eps);
    else if (k == "tie_word_embeddings") get_bool(k, v, c.tie_word_embeddings);
    else if (k == "qk_norm") get_bool(k, v, c.qk_norm);
    else if (k == "initializer_range") get_real(k, v, c.initializer_range);
    else if (k == "z_loss") get_real(k, v, c.z_loss);
    else if (k == "doc_attention") get_str(k, v, c.doc_attention);
    else if (k == "fuser") get_str(k, v, c.fuser);
    else if (k == "feedback_source") get_str(k, v, c.feedback_source);
    else if (k == "feedback_layer") get_int(k, v, c.feedback_layer);
    else if (k == "layer_intermediate_size") get_ints(k, v, c.layer_intermediate_size);
    else if (k == "layer_num_attention_heads") get_ints(k, v, c.layer_num_attention_heads);
    else if (k == "layer_num_key_value_heads") get_ints(k, v, c.layer_num_key_value_heads);
    else if (k == "sliding_window") {
      if (v.is_null()) c.sliding_window = 0;  // HF: no window
      else get_int(k, v, c.sliding_window);
    } else if (k == "use_sliding_window") get_bool(k, v, use_sliding);
    else if (k == "max_window_layers") get_int(k, v, max_window_layers);
    else if (k == "layer_types") get_strs(k, v, c.layer_types), has_layer_types = true;
    else if (k == "input_norm") get_str(k, v, c.input_norm);
    else if (k == "glu_init") get_str(k, v, c.glu_init);
    else if (k == "fuser_options") c.fuser_options = options_from_json(v, k, where);
    else if (k == "block") get_str(k, v, c.block);
    else if (k == "block_options") c.block_options = options_from_json(v, k, where);
    else if (k == "layer_blocks") get_strs(k, v, c.layer_blocks);
    else if (k == "gated_add_alpha") get_real(k, v, c.gated_add_alpha);
    else if (k == "gate_norm") get_str(k, v, c.gate_norm);
    else if (k == "in_norm_init") get_str(k, v, c.in_norm_init);
    else if (k == "block_norm") get_str(k, v, c.block_norm);
    else if (k == "rope_parameters") {  // newer transformers: {"rope_type": "default", "rope_theta": x} replaces rope_theta / rope_scaling
      if (v.is_null()) continue;
      if (!v.is_object()) fail(k, "must be an object {\"rope_type\": \"default\", \"rope_theta\": ...}, got " + json_brief(v));
      for (auto p = v.begin(); p != v.end(); ++p) {
        if (p.key() == "rope_type") {
          if (*p != "default") fail(k, "fbt implements only plain RoPE (rope_type \"default\"), got rope_type " + json_brief(*p));
        } else if (p.key() == "rope_theta") {
          get_real("rope_parameters.rope_theta", *p, c.rope_theta);
        } else {
          fail(k, "key \"" + excerpt(p.key(), 64) + "\": fbt implements only plain RoPE (rope_type and rope_theta), got " + json_brief(*p));
        }
      }
    }
    else if (std::find(ignored.begin(), ignored.end(), k) != ignored.end()) {
      // Ignored, unless the value asks for something fbt does not implement.
      if (k == "hidden_act" && v != "silu") fail(k, "fbt implements only \"silu\" (SwiGLU), got " + json_brief(v));
      if (k == "attention_bias" && v != false) fail(k, "fbt has no attention biases, got " + json_brief(v));
      if (k == "attention_dropout" && !(v.is_number() && v.get<double>() == 0.0)) fail(k, "fbt has no dropout (0), got " + json_brief(v));
      if (k == "rope_scaling" && !v.is_null()) fail(k, "fbt implements only plain RoPE (null), got " + json_brief(v));
      if (k == "model_type" && v != "fbt" && v != "qwen3") fail(k, "expected \"fbt\" or \"qwen3\", got " + json_brief(v));
    } else {
      fail(k, "unknown key (not a ModelConfig field nor an HF key that fbt ignores)");
    }
  }
  // Every key that changes the model must be there: an absent one would silently take a default.
  const auto rp = j.find("rope_parameters");
  const bool theta_in_rope_parameters = rp != j.end() && rp->is_object() && rp->contains("rope_theta");
  for (const auto& k : hf_qwen3 ? qwen3_required_keys() : model_config_required_keys())
    if (!j.contains(k) && !(k == "rope_theta" && theta_in_rope_parameters))
      fail(k, hf_qwen3 ? std::string("missing from a Hugging Face Qwen3 config (model_type \"qwen3\"); fbt needs every key that "
                                     "changes the model")
                       : std::string("missing (a model config must state every field that changes the model; see "
                                     "docs/file-formats.md)"));
  // The window as HF's Qwen3Config reads it: sliding_window only with use_sliding_window; without
  // layer_types, layers max_window_layers.. are sliding; without a window every layer is full attention.
  for (std::size_t l = 0; l < c.layer_types.size(); ++l)  // a type fbt does not compute is refused even where HF's window is off
    if (c.layer_types[l] != "full_attention" && c.layer_types[l] != "sliding_attention")
      fail("layer_types", "entry " + std::to_string(l) + " is \"" + excerpt(c.layer_types[l], 64) +
                              "\": fbt implements full_attention and sliding_attention layers");
  // Given layer_types have one entry per layer whether or not the window is on, and a sliding_attention entry
  // needs a window: HF would silently run it as full attention, fbt refuses it (as the command line does).
  if (has_layer_types && c.layer_types.size() != std::size_t(c.num_hidden_layers))
    fail("layer_types", "has " + std::to_string(c.layer_types.size()) + " entries, expected one per layer (" + std::to_string(c.num_hidden_layers) +
                            ") whether or not the window is on");
  const bool any_sliding = std::find(c.layer_types.begin(), c.layer_types.end(), "sliding_attention") != c.layer_types.end();
  if (any_sliding && (!use_sliding || c.sliding_window == 0))
    fail("sliding_window", std::string(!use_sliding ? "use_sliding_window is false" : "sliding_window is " + json_brief(j.value("sliding_window", nlohmann::json(0)))) +
                               " but layer_types gives sliding_attention layers: give the window (sliding_window >= 1" +
                               (use_sliding ? "" : ", use_sliding_window true") + ") or make every layer full_attention");
  if (!use_sliding) c.sliding_window = 0;
  if (c.sliding_window > 0 && !has_layer_types)  // HF's rule: layers max_window_layers.. are sliding
    for (int l = 0; l < c.num_hidden_layers && l < ModelLimits::max_hidden_layers; ++l)
      c.layer_types.push_back(l >= max_window_layers ? "sliding_attention" : "full_attention");
  // A window that no layer uses: HF's rule derived no sliding layer (or an HF file lists none): no window. An fbt
  // file that lists its layers and a window none of them uses is refused by validate() below.
  const bool uses_window = std::find(c.layer_types.begin(), c.layer_types.end(), "sliding_attention") != c.layer_types.end();
  if (c.sliding_window == 0 || (!uses_window && (!has_layer_types || hf_qwen3))) c.sliding_window = 0, c.layer_types.clear();
  if (c.feedback_source == "layer" && !j.contains("feedback_layer"))
    fail("feedback_layer", "missing: feedback_source \"layer\" needs the block index that is fed back");
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  return c;
}

/// The largest config file config_from_json_file reads (a Qwen3 config.json is about 1 KB).
constexpr std::uint64_t kConfigMaxFileBytes = std::uint64_t(16) << 20;

/// \brief Reads a config JSON file (e.g. a run's config.json); errors name the file and the field.
/// The path must be a regular file of at most 16 MiB (no FIFO, device or directory); the text is parsed
/// by detail::parse_json_strict (duplicate keys, depth and size limits).
inline ModelConfig config_from_json_file(const std::string& path) {
  try {
    const std::string text = detail::read_file_bytes(path, "config_from_json_file", kConfigMaxFileBytes);
    return config_from_json(detail::parse_json_strict(text, "'" + path + "'"), "'" + path + "'");
  } catch (const std::bad_alloc&) {
    throw Error("fbt::config_from_json_file: '" + path + "': out of memory while reading the config");
  }
}

/// \brief Writes the config as indented JSON (atomic: `path + ".tmp"`, then rename).
/// Refuses an invalid config (validate()) before touching the file.
inline void save_config_json(const std::string& path, const ModelConfig& cfg) {
  try {
    cfg.validate();
  } catch (const Error& e) {
    throw Error("fbt::save_config_json: '" + path + "': " + e.what());
  }
  detail::AtomicFile f(path, "save_config_json");
  f.write(to_json(cfg).dump(2) + "\n");
  f.commit();
}

}  // namespace fbt
