// fbt/train/config_file.hpp: a TrainConfig as JSON: the record a checkpoint keeps (to_json), a config
// object read back (apply_json, typed for a file a person wrote), config files (bounded regular files, duplicate
// keys refused) and a run's config from a file and flags (make_train_config: preset, init_from, file, flags).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "../detail/input.hpp"
#include "../io/json.hpp"
#include "config_fields.hpp"
#include "presets.hpp"
#include "train_config.hpp"

namespace fbt {

/// Largest config or grid file read (bytes): they hold a few dozen fields.
inline constexpr std::uint64_t kMaxConfigFileBytes = std::uint64_t(1) << 20;

inline nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  static const TrainConfig defaults;
  for (const auto& f : train_config_fields())
    if (f.recorded && !(f.omit_default && f.get(c) == f.get(defaults))) j[f.name] = f.get(c);
  return j;
}

namespace detail {
/// \brief Refuses (fbt::Error "<where>: field <key> must be ..., got <type> <value>") a JSON value of a config
/// file whose type is not its field's (ConfigField::kind): a number for an integer or real field, true or
/// false for a boolean, an array (or its text) for a per-layer list, a string for a text field, an object (or its text)
/// for a piece's options. A key that is not a field of the table (fuser.NAME, ...) is not checked here.
inline void check_config_value_type(const std::string& key, const nlohmann::json& v, const std::string& where) {
  using K = ConfigField::Kind;
  for (const auto& f : train_config_fields()) {
    if (f.name != key) continue;
    const char* want = nullptr;
    if ((f.kind == K::integer || f.kind == K::real) && !v.is_number()) want = "a number";
    if (f.kind == K::boolean && !v.is_boolean()) want = "true or false";
    if (f.kind == K::int_list && !v.is_array() && !v.is_string()) want = "an array of integers (or their text, \"256,128\")";
    if (f.kind == K::name_list && !v.is_array() && !v.is_string()) want = "an array of strings (or their text, \"a,b\")";
    if (f.kind == K::text && !v.is_string()) want = "a string";
    if (f.kind == K::object && !v.is_object()) want = "a JSON object {option: value}";  // a string is text to parse: only a flag gives that
    if (want)
      throw Error(where + ": field " + excerpt(key) + " must be " + want + ", got " + v.type_name() + " " + json_brief(v));
    return;
  }
}
}  // namespace detail

/// \brief Reads a config object: {"field": value, ...}. With `typed` (a file a person wrote: a config file,
/// a grid's base) each value must have its field's JSON type (detail::check_config_value_type: {"steps": "2"}
/// is refused); without it (the library's own records, which hold every value as text) strings are read
/// as the flags are.
inline void apply_json(TrainConfig& c, const nlohmann::json& j, const std::string& where, bool typed = false) {
  if (!j.is_object()) throw Error(where + ": a config file must hold one JSON object");
  if (typed)
    for (auto it = j.begin(); it != j.end(); ++it) detail::check_config_value_type(it.key(), it.value(), where);
  if (j.contains("preset")) {  // first: the other fields change the preset's
    if (!j["preset"].is_string()) throw Error(where + ": field preset must be a string, got " + std::string(j["preset"].type_name()));
    try {
      set_config_field(c, "preset", j["preset"].get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
  std::vector<std::pair<std::string, std::string>> as_text;  // the file's values as the flags give them (check_option_spellings)
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = detail::excerpt(it.key());
    if (it.key() == "preset") continue;
    std::string v;
    if (it->is_string()) v = it->get<std::string>();
    else if (it->is_boolean()) v = it->get<bool>() ? "true" : "false";
    else if (it->is_number_unsigned()) v = std::to_string(it->get<unsigned long long>());  // 2^64 - 1 stays itself, not -1
    else if (it->is_number_integer()) v = std::to_string(it->get<long long>());
    else if (it->is_number()) v = detail::num(it->get<double>());
    else if (it->is_array()) {  // per-layer sizes: [256, 128] is "256,128"; per-layer names (layer_types, layer_blocks) likewise
      for (const auto& x : *it) {
        if (x.is_string() && (it.key() == "layer_blocks" || it.key() == "layer_types")) {
          v += (v.empty() ? "" : ",") + x.get<std::string>();
          continue;
        }
        if (!x.is_number_integer()) throw Error(where + ": field " + key + " must be an array of integers");
        v += (v.empty() ? "" : ",") + (x.is_number_unsigned() ? std::to_string(x.get<unsigned long long>()) : std::to_string(x.get<long long>()));
      }
    } else if (it->is_object() && (it.key() == "fuser_options" || it.key() == "block_options" || it.key() == "optimizer_options")) {
      v = it->dump();  // the piece's options: typed as the file gives them
    } else throw Error(where + ": field " + key + " must be a string, number, boolean or array of integers, got " + it->type_name());
    as_text.push_back({it.key(), v});
  }
  try {
    check_option_spellings(as_text, "");
    for (const auto& kv : as_text) set_config_field(c, kv.first, kv.second);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

/// \brief Parses a JSON file; `what` names it in errors ("config file", "grid file", ...). The file must be
/// a regular file of at most kMaxConfigFileBytes; duplicate keys are refused (detail::parse_json_strict).
inline nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("cannot open " + what + " '" + path + "'");
  detail::regular_file_size(path, kMaxConfigFileBytes, what, "a " + what);  // not a directory, FIFO or device, not huge
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + what + " '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error("cannot read " + what + " '" + path + "'");
  return detail::parse_json_strict(text, what + " '" + path + "'");
}

inline TrainConfig load_train_config_file(const std::string& path, TrainConfig base = {}) {
  apply_json(base, read_json_file(path, "config file"), "config file '" + path + "'", true);
  return base;
}

/// \brief The model fields a run started from a checkpoint takes from it (--init_from): the stack's sizes and
/// its numerics (vocabulary, hidden size, layers, heads, head_dim, MLP width, per-layer lists, positions,
/// RoPE theta, norm eps, tied head, QK-norm, block norms, document attention). The feedback fields stay
/// the run's own.
inline void init_from_stack(ModelConfig& m, const ModelConfig& from) {
  m.vocab_size = from.vocab_size, m.hidden_size = from.hidden_size, m.num_hidden_layers = from.num_hidden_layers;
  m.num_attention_heads = from.num_attention_heads, m.num_key_value_heads = from.num_key_value_heads, m.head_dim = from.head_dim;
  m.intermediate_size = from.intermediate_size, m.layer_intermediate_size = from.layer_intermediate_size;
  m.layer_num_attention_heads = from.layer_num_attention_heads, m.layer_num_key_value_heads = from.layer_num_key_value_heads;
  m.max_position_embeddings = from.max_position_embeddings, m.rope_theta = from.rope_theta, m.rms_norm_eps = from.rms_norm_eps;
  m.tie_word_embeddings = from.tie_word_embeddings, m.qk_norm = from.qk_norm, m.block_norm = from.block_norm;
  m.doc_attention = from.doc_attention, m.sliding_window = from.sliding_window, m.layer_types = from.layer_types;
}

/// \brief A run's config from an optional config file and (field, value) flags, in the order a reader
/// expects: the preset (the flags' if given, else the file's, else v1), then the file's fields, then the
/// flags'. A baseline (fuser none) is then made single-pass (make_baseline_single_pass). When the config
/// names init_from, the stack fields of `read_config(init_from)` are set
/// after the preset and before the file's and the flags' fields (so an explicit flag still wins, and the
/// trainer then refuses a stack that does not match the checkpoint's tensors).
template <class Range>
TrainConfig make_train_config(const std::string& config_file, const Range& flags, const std::function<ModelConfig(const std::string&)>& read_config) {
  TrainConfig c;
  nlohmann::json file = nlohmann::json::object();
  if (!config_file.empty()) file = read_json_file(config_file, "config file");
  const std::string where = "config file '" + config_file + "'";
  std::string preset;
  for (const auto& kv : flags)
    if (kv.first == "preset") preset = kv.second;
  if (preset.empty() && file.is_object() && file.contains("preset")) {
    if (!file["preset"].is_string()) throw Error(where + ": field preset must be a string, got " + std::string(file["preset"].type_name()));
    preset = file["preset"].get<std::string>();
  }
  if (!preset.empty()) apply_preset(c, preset);
  if (file.is_object()) file.erase("preset");
  std::string init_from;
  if (file.is_object() && file.contains("init_from")) {
    detail::check_config_value_type("init_from", file["init_from"], where);
    init_from = file["init_from"].get<std::string>();
  }
  for (const auto& kv : flags)
    if (kv.first == "init_from") init_from = kv.second;
  if (!init_from.empty() && read_config) init_from_stack(c.model, read_config(init_from));
  if (!config_file.empty()) apply_json(c, file, where, true);
  check_option_spellings(flags, "invalid training config: ");
  // a file's layer_types count as given unless the file also has window_pattern (a run's record, which has both)
  bool layer_types_given = file.is_object() && file.contains("layer_types") && !file.contains("window_pattern");
  for (const auto& kv : flags)
    if (kv.first != "preset") set_config_field(c, kv.first, kv.second), layer_types_given = layer_types_given || kv.first == "layer_types";
  apply_window_pattern(c, layer_types_given);
  make_baseline_single_pass(c);
  return c;
}

/// make_train_config without a checkpoint to start from (see above).
template <class Range> TrainConfig make_train_config(const std::string& config_file, const Range& flags) {
  return make_train_config(config_file, flags, std::function<ModelConfig(const std::string&)>());
}

}  // namespace fbt
