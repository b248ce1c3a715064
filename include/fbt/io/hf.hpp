// fbt/io/hf.hpp: Hugging Face model directories as checkpoints, and one entry point for every
// kind of checkpoint.
//
// A Hugging Face directory (what `save_pretrained` writes) holds
//   config.json                      the model config: a Qwen3ForCausalLM one (model_type "qwen3"), read by
//                                    config_from_json (io/config_json.hpp), which maps every key that changes
//                                    the forward and refuses by name what fbt does not implement (another
//                                    model_type, rope scaling, attention biases, ...); sliding-window layers load;
//                                    an fbt config (model_type "fbt") is read the same way
//   model.safetensors                the tensors, under the Qwen3 names fbt uses, in F32, BF16, F16 or F64
// or, for a sharded model, instead of model.safetensors:
//   model.safetensors.index.json     {"metadata": {...}, "weight_map": {tensor name: shard file name}}
//   model-00001-of-0000N.safetensors ... the shards, each holding the tensors the index maps to it
// Tied heads: tie_word_embeddings true, and lm_head.weight absent (or an exact copy of the embedding);
// untied: lm_head.weight present. The tensors go through the same checks as an fbt checkpoint's
// (io/checkpoint.hpp: the layout the config implies, before anything of the model's size is allocated;
// dtypes, shapes, unknown and missing tensors, non-finite values), each error naming its shard. The
// index is checked first: a regular file of bounded size, shard names that are plain file names in the
// directory (never a path), at most kHfMaxShards shards, every tensor in the shard the index names.
//
// read_checkpoint_config / load_checkpoint take any checkpoint: an fbt model file, an fbt checkpoint
// directory (its model.safetensors, whose metadata carries the config), or a directory with a config.json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../core/precision.hpp"
#include "checkpoint.hpp"
#include "hf_remote_code.hpp"

namespace fbt {

/// The largest model.safetensors.index.json read (bytes), the most shards it may name, and the most
/// tensors: more than any model within ModelLimits has (11 tensors per layer x 4,096 layers, plus the
/// embedding, the final norm, the head and a fuser's few), so a larger index cannot describe a model fbt
/// builds and is refused as soon as the parse passes that count (bounded time and memory).
constexpr std::uint64_t kHfIndexMaxBytes = std::uint64_t(64) << 20;
constexpr std::size_t kHfMaxShards = 4096;
constexpr std::size_t kHfMaxIndexEntries = 65536;

/// \brief Whether `path` is a model directory in the Hugging Face layout: a directory with a config.json.
/// (An fbt checkpoint directory has none: its config is in model.safetensors' metadata.)
inline bool is_hf_model_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(std::filesystem::path(path) / "config.json", ec);
}

/// \brief The model config of a Hugging Face directory: its config.json through config_from_json.
/// `architectures`, when present, must be ["Qwen3ForCausalLM"], or ["FbtForCausalLM"] with model_type "fbt":
/// the full-bandwidth export of save_hf_dir, whose config.json is fbt's config plus auto_map, decode_mode and
/// passes (read by its remote code, checked for their type here). A Qwen3 directory fbt exported
/// also carries "fbt_config", fbt's own config, which is the model; its top-level keys are what
/// transformers builds from, so they are checked as strictly as a config.json without fbt_config (every
/// key that changes the model: implemented, refused by name, or inert; docs/file-formats.md) and every
/// one that fbt_config also states must say the same.
inline ModelConfig read_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const std::string text = detail::read_file_bytes(path, "read_hf_config", kConfigMaxFileBytes);
  nlohmann::json j = detail::parse_json_strict(text, "'" + path + "'");
  if (j.is_object()) {
    const auto ar = j.find("architectures");
    const bool fbt_type = j.contains("model_type") && j["model_type"] == "fbt";
    if (ar != j.end()) {
      if (!ar->is_array()) throw Error("'" + path + "': model config field \"architectures\": must be an array, got " + detail::json_brief(*ar));
      for (const auto& a : *ar)
        if (a != "Qwen3ForCausalLM" && !(fbt_type && a == "FbtForCausalLM"))
          throw Error("'" + path + "': model config field \"architectures\": " + detail::json_brief(a) +
                      " is not an architecture fbt loads (it implements Qwen3ForCausalLM, a causal language model, and its own FbtForCausalLM "
                      "with model_type \"fbt\")");
    }
    if (fbt_type) {  // the remote-code model's keys for transformers (save_hf_dir): checked, then not the model's
      auto need = [&](const char* k, bool ok, const char* what) {
        if (j.contains(k) && !ok) throw Error("'" + path + "': model config field \"" + k + "\": expected " + what + ", got " + detail::json_brief(j[k]));
      };
      need("auto_map", j.contains("auto_map") && j["auto_map"].is_object(), "an object");
      need("decode_mode", j.contains("decode_mode") && j["decode_mode"].is_string(), "a decoding mode string");
      need("passes", j.contains("passes") && j["passes"].is_number_integer() && j["passes"].get<long long>() >= 1, "an integer >= 1");
      for (const char* k : {"auto_map", "decode_mode", "passes"}) j.erase(k);
    }
  }
  if (j.is_object()) {  // transformers reads rope_parameters' theta where both are given: they must agree
    const auto rp = j.find("rope_parameters"), rt = j.find("rope_theta");
    if (rp != j.end() && rt != j.end() && rp->is_object() && rp->contains("rope_theta") && rt->is_number() &&
        (*rp)["rope_theta"].is_number() && (*rp)["rope_theta"].get<double>() != rt->get<double>())
      throw Error("'" + path + "': model config field \"rope_parameters\": rope_theta is " + detail::json_brief((*rp)["rope_theta"]) +
                  " but \"rope_theta\" is " + detail::json_brief(*rt) + " (give one, or both alike)");
  }
  const auto fc = j.is_object() ? j.find("fbt_config") : j.end();
  if (fc == j.end()) return config_from_json(j, "'" + path + "'");
  const ModelConfig c = config_from_json(*fc, "'" + path + "': fbt_config");
  nlohmann::json top = j;
  top.erase("fbt_config");
  const ModelConfig t = config_from_json(top, "'" + path + "'");  // what transformers builds: the same rules
  const nlohmann::json mine = to_json(c), theirs = to_json(t);
  for (auto it = top.begin(); it != top.end(); ++it) {  // each model key both state, as both read it (head_dim resolved)
    const std::string& k = it.key();
    if (k == "model_type" || k == "architectures" || !mine.contains(k) || !theirs.contains(k)) continue;
    if (theirs[k] != mine[k])
      throw Error("'" + path + "': model config field \"" + k + "\" is " + detail::json_brief(*it) + " but fbt_config says " +
                  detail::json_brief(mine[k]) + " (edit both, or neither)");
  }
  for (int l = 0; l < c.num_hidden_layers && l < t.num_hidden_layers; ++l)  // the window each layer gets, as each reads its keys
    if (t.layer_window(l) != c.layer_window(l))
      throw Error("'" + path + "': model config fields \"layer_types\" / \"sliding_window\" / \"use_sliding_window\" give layer " + std::to_string(l) +
                  " a sliding window of " + std::to_string(t.layer_window(l)) + " but fbt_config says " + std::to_string(c.layer_window(l)) +
                  " (0: full attention; edit both, or neither)");
  if (top.contains("rope_parameters") && theirs["rope_theta"] != mine["rope_theta"])
    throw Error("'" + path + "': model config field \"rope_parameters\": rope_theta is " + detail::json_brief(theirs["rope_theta"]) +
                " but fbt_config says " + detail::json_brief(mine["rope_theta"]) + " (edit both, or neither)");
  return c;
}

namespace detail {

/// The shard files of an index (model.safetensors.index.json): its weight_map, checked.
inline std::map<std::string, std::string> hf_weight_map(const std::string& index_path) {
  auto fail = [&](const std::string& what) { throw Error("fbt: '" + index_path + "': " + what); };
  const std::string text = read_file_bytes(index_path, "load_checkpoint", kHfIndexMaxBytes);
  JsonLimits lim;  // the parse stops once the document holds more values than an index of the most tensors can
  lim.max_values = kHfMaxIndexEntries + 4096;
  lim.max_values_why = "an index names at most " + std::to_string(kHfMaxIndexEntries) + " tensors, more than a model within fbt's limits has";
  const nlohmann::json j = parse_json_strict(text, "fbt: '" + index_path + "'", lim);
  if (!j.is_object()) fail("must hold one JSON object, got " + std::string(j.type_name()));
  const auto wm = j.find("weight_map");
  if (wm == j.end()) fail("has no \"weight_map\" (a sharded checkpoint's index maps each tensor to its shard file)");
  if (!wm->is_object()) fail("\"weight_map\" must be an object {tensor name: shard file}, got " + std::string(wm->type_name()));
  if (wm->size() > kHfMaxIndexEntries)
    fail("\"weight_map\" names " + std::to_string(wm->size()) + " tensors, more than the " + std::to_string(kHfMaxIndexEntries) +
         " a model within fbt's limits can have");
  std::map<std::string, std::string> out;
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string who = "\"weight_map\" entry \"" + excerpt(it.key(), 128) + "\": ";
    if (!it->is_string()) fail(who + "the shard must be a file name string, got " + json_brief(*it));
    const std::string f = it->get<std::string>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
        f.find('\0') != std::string::npos)
      fail(who + "shard \"" + excerpt(f, 128) + "\" is not a plain file name in the checkpoint's directory");
    shards.insert(f);
    if (shards.size() > kHfMaxShards) fail("names more than " + std::to_string(kHfMaxShards) + " shard files");
    out[it.key()] = f;
  }
  if (out.empty()) fail("\"weight_map\" is empty");
  return out;
}

}  // namespace detail

/// \brief The tensors of a Hugging Face directory: model.safetensors, or the shards its
/// model.safetensors.index.json names (every shard read and checked by read_safetensors; each tensor must
/// be in the shard the index names, and each indexed tensor in its shard). Errors name the file.
inline CheckpointTensors read_hf_tensors(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir), single = d / "model.safetensors", index = d / "model.safetensors.index.json";
  std::error_code ec;
  std::vector<SafetensorsFile> files;
  if (fs::exists(single, ec)) {
    files.push_back(read_safetensors(single.string()));
    return CheckpointTensors::of(std::move(files), single.string());
  }
  if (!fs::exists(index, ec))
    throw Error("fbt: '" + dir + "': a model directory with a config.json needs model.safetensors or model.safetensors.index.json (and its shards)");
  const std::map<std::string, std::string> wm = detail::hf_weight_map(index.string());
  std::set<std::string> order;  // the shards, once each, in name order (HF's model-0000i-of-0000N)
  for (const auto& kv : wm) order.insert(kv.second);
  for (const auto& f : order) files.push_back(read_safetensors((d / f).string()));
  for (const auto& sf : files) {
    const std::string name = fs::path(sf.path).filename().string();
    for (const auto& e : sf.tensors) {
      auto it = wm.find(e.name);
      if (it == wm.end())
        throw Error("fbt: '" + sf.path + "': tensor \"" + detail::st_name(e.name) + "\" is not in the index '" + index.string() + "'");
      if (it->second != name)
        throw Error("fbt: '" + sf.path + "': tensor \"" + detail::st_name(e.name) + "\" is here, but the index '" + index.string() +
                    "' puts it in '" + detail::excerpt(it->second, 128) + "'");
    }
  }
  CheckpointTensors ts = CheckpointTensors::of(std::move(files), dir);
  for (const auto& kv : wm)
    if (!ts.find(kv.first))
      throw Error("fbt: '" + (d / kv.second).string() + "': the index '" + index.string() + "' puts tensor \"" + detail::st_name(kv.first) +
                  "\" in this shard, which does not hold it");
  return ts;
}

/// \brief Builds the model a Hugging Face directory describes and loads its tensors (converted to M's
/// scalar): config.json (read_hf_config), model.safetensors or the shards (read_hf_tensors), checked as
/// load_model checks an fbt checkpoint. The config's fuser must be M's (fbt::with_model picks the type).
template <class M> M load_hf_model(const std::string& dir) {
  const char* fn = "load_hf_model";
  return detail::ckpt_guard(fn, dir, [&]() -> M {
    const ModelConfig cfg = read_hf_config(dir);
    return load_model_from<M>(read_hf_tensors(dir), cfg, fn);
  });
}

namespace detail {
/// Whether `name` is a shard file name as save_pretrained writes them: model-NNNNN-of-NNNNN.safetensors.
inline bool is_hf_export_shard_name(const std::string& name) {
  const std::string pre = "model-", mid = "-of-", post = ".safetensors";
  if (name.size() != pre.size() + 5 + mid.size() + 5 + post.size()) return false;
  if (name.compare(0, pre.size(), pre) != 0 || name.compare(pre.size() + 5, mid.size(), mid) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return false;
  for (std::size_t i : {pre.size(), pre.size() + 5 + mid.size()})
    for (std::size_t k = 0; k < 5; ++k)
      if (name[i + k] < '0' || name[i + k] > '9') return false;
  return true;
}
}  // namespace detail

/// The byte vocabulary's size and its document separator (data/tokenizer.hpp's ByteTokenizer, which io/ may not
/// include): an export of a model of this vocabulary declares the separator as bos/eos/pad and names the byte
/// tokenizer; tests/io/test_hf.cpp checks that the two agree.
constexpr int kHfByteVocabSize = 257, kHfByteSep = 256;

/// How save_hf_dir writes a model.
struct HfExportOptions {
  bool plain = false;         ///< a full-bandwidth model: only its plain part (pass 1) as a Qwen3ForCausalLM
  std::string dtype = "F32";  ///< F32 | BF16 (rounded to nearest even)
};

/// \brief Whether a Qwen3ForCausalLM can hold the stack of config c (QK-norm, pre-norm blocks of the built-in
/// decoder, one size for every layer); "" when it can, else why not (naming the knob).
inline std::string qwen3_cannot_hold(const ModelConfig& c) {
  if (!c.qk_norm) return "qk_norm false: a Qwen3ForCausalLM always normalises q and k";
  if (c.block_norm != "pre") return "block_norm \"" + c.block_norm + "\": a Qwen3ForCausalLM has no norms after its attention and MLP";
  if (c.block != "decoder") return "block \"" + c.block + "\": a Qwen3ForCausalLM's layers are the built-in decoder block";
  if (!c.uniform()) return "per-layer sizes (layer_*): a Qwen3ForCausalLM's layers are all alike";
  return "";
}

/// \brief Whether the remote-code model (python/fbt/hf) computes config c: fbt's built-in fusers (none, glu, gated_add,
/// concat) and decoder block; a user's fuser or block (a plugin's) has no PyTorch code.
inline bool hf_remote_code_implements(const ModelConfig& c) {
  return (c.fuser == "none" || c.fuser == "glu" || c.fuser == "gated_add" || c.fuser == "concat") && c.block == "decoder" && c.layer_blocks.empty();
}

/// \brief Writes `m` as a Hugging Face directory, in one of two forms (docs/interop.md):
///
/// **The full-bandwidth model** (a model with feedback, unless o.plain; and a baseline whose stack a
/// Qwen3ForCausalLM cannot hold): `AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)` loads
/// it as FbtForCausalLM, with its feedback (the K-pass forward with gradients; generate() in standard, soft
/// and fused(k)):
///   config.json        fbt's config at the top level (to_json: every field) with model_type "fbt",
///                      architectures ["FbtForCausalLM"], auto_map (AutoConfig, AutoModelForCausalLM), the
///                      default decode_mode "soft" and passes 1, torch_dtype, and for the byte vocabulary the
///                      separator (256) as bos/eos/pad
///   model.safetensors  every tensor under fbt's own names (model.feedback.* included)
///   configuration_fbt.py, modeling_fbt.py, fbt_torch.py, tokenization_fbt.py   the remote code
///                      (hf_remote_code.hpp: python/fbt/hf/*.py), and for the byte vocabulary
///                      tokenizer_config.json naming the byte tokenizer (AutoTokenizer).
/// fbt reads it back as itself. A model with a user's fuser (a plugin's) is written in the Qwen3 form below with its
/// model.feedback.* tensors (which transformers leaves unused) and its full fbt_config, so that fbt reads it back.
///
/// **A Qwen3ForCausalLM** (a baseline a Qwen3 can hold, or with o.plain the plain part of a full-bandwidth
/// model): config.json with the Qwen3 keys (model_type "qwen3", architectures ["Qwen3ForCausalLM"], sizes,
/// rope_theta, rms_norm_eps, tie_word_embeddings, the separator as bos/eos for the byte vocabulary, ...) and
/// "fbt_config", fbt's own config of what was written (read back by read_hf_config; transformers keeps it as
/// an unused attribute); model.safetensors with the tensors under their Qwen3 names (lm_head.weight only
/// when untied): no missing or unexpected keys. When the plain pass reads N_in(e) rather than e
/// (input_norm "all"), N_in is folded into the written embedding (row v := N_in(E[v]), exactly the vectors
/// fbt feeds the stack) and the head, if tied, is written untied as the original E, so that the directory
/// computes fbt's pass 1. A Qwen3 form of a stack a Qwen3ForCausalLM cannot hold is refused, naming the knob.
///
/// Tensors are written in o.dtype. Each file is written atomically (tmp + rename), config.json's temporary
/// file first and renamed last, so a failure while writing (a full disk) leaves the directory as it was and
/// removes the temporary files. Afterwards the files of an earlier sharded export in `dir` are removed
/// (model.safetensors.index.json and every model-NNNNN-of-NNNNN.safetensors), so that the directory holds
/// one model; nothing else in it is touched.
template <class M> void save_hf_dir(const std::string& dir, const M& m, const HfExportOptions& o = {}) {
  using T = typename M::Scalar;
  const ModelConfig& c = m.cfg;
  auto refuse = [&](const std::string& why) { throw Error("fbt::save_hf_dir: '" + dir + "': " + why); };
  if (o.dtype != "F32" && o.dtype != "BF16") refuse("dtype \"" + detail::excerpt(o.dtype) + "\": expected F32 or BF16");
  const std::string no_qwen3 = qwen3_cannot_hold(c);
  const bool builtin = hf_remote_code_implements(c);
  // the form: FbtForCausalLM for fbt's built-in pieces (a full-bandwidth model, or a baseline a Qwen3 cannot hold);
  // otherwise a Qwen3ForCausalLM (a user's fuser keeps its feedback tensors and fbt_config beside it, for fbt)
  const bool remote = builtin && (m.feedback() ? !o.plain : !no_qwen3.empty());
  if (!remote && !no_qwen3.empty())
    refuse(no_qwen3 + (!builtin ? " (and the remote-code model implements fbt's built-in fusers and block, not a user's: save it as an fbt checkpoint)"
                                : " (leave --plain off: the full-bandwidth export holds it)"));
  const bool plain = !remote && (o.plain || !m.feedback());
  const bool fold = plain && m.input().norm_plain_pass();  // pass 1 reads N_in(e)
  const bool byte_vocab = c.vocab_size == kHfByteVocabSize;
  // the config of what is written
  ModelConfig out = c;
  if (plain && m.feedback()) {
    ModelConfig q = qwen3_defaults();  // the plain stack's fields, the feedback knobs at their defaults
    q.vocab_size = c.vocab_size, q.hidden_size = c.hidden_size, q.num_hidden_layers = c.num_hidden_layers;
    q.num_attention_heads = c.num_attention_heads, q.num_key_value_heads = c.num_key_value_heads, q.head_dim = c.head_dim;
    q.intermediate_size = c.intermediate_size, q.max_position_embeddings = c.max_position_embeddings, q.rope_theta = c.rope_theta;
    q.rms_norm_eps = c.rms_norm_eps, q.tie_word_embeddings = c.tie_word_embeddings, q.qk_norm = c.qk_norm;
    q.initializer_range = c.initializer_range, q.z_loss = c.z_loss, q.doc_attention = c.doc_attention;
    q.sliding_window = c.sliding_window, q.layer_types = c.layer_types;
    out = q;
  }
  if (fold) out.tie_word_embeddings = false;
  nlohmann::json j;
  if (remote) {
    j = to_json(out);
    j["architectures"] = nlohmann::json::array({"FbtForCausalLM"});
    j["auto_map"] = {{"AutoConfig", "configuration_fbt.FbtConfig"}, {"AutoModelForCausalLM", "modeling_fbt.FbtForCausalLM"}};
    j["decode_mode"] = "soft", j["passes"] = 1;
  } else {
    j["architectures"] = nlohmann::json::array({"Qwen3ForCausalLM"});
    j["model_type"] = "qwen3";
    j["attention_bias"] = false, j["attention_dropout"] = 0.0, j["hidden_act"] = "silu";
    j["vocab_size"] = out.vocab_size, j["hidden_size"] = out.hidden_size, j["num_hidden_layers"] = out.num_hidden_layers;
    j["num_attention_heads"] = out.num_attention_heads, j["num_key_value_heads"] = out.num_key_value_heads, j["head_dim"] = out.hs();
    j["intermediate_size"] = out.intermediate_size, j["max_position_embeddings"] = out.max_position_embeddings;
    j["rope_theta"] = out.rope_theta, j["rope_scaling"] = nullptr, j["rms_norm_eps"] = out.rms_norm_eps;
    j["tie_word_embeddings"] = out.tie_word_embeddings, j["initializer_range"] = out.initializer_range;
    j["use_sliding_window"] = false, j["sliding_window"] = nullptr;
    sliding_window_to_json(out, j);  // a windowed model: its layer_types, sliding_window and use_sliding_window true
    j["fbt_config"] = to_json(out);
  }
  if (byte_vocab) j["bos_token_id"] = kHfByteSep, j["eos_token_id"] = kHfByteSep;
  if (byte_vocab && remote) j["pad_token_id"] = kHfByteSep;
  j["use_cache"] = true, j["torch_dtype"] = o.dtype == "F32" ? "float32" : "bfloat16";
  // the tensors, converted to the file's dtype
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<TensorRef> refs;
  auto add = [&](const std::string& name, const Shape& shape, const T* v, std::size_t n) {
    std::vector<std::uint8_t> b(n * (o.dtype == "F32" ? 4 : 2));
    for (std::size_t i = 0; i < n; ++i) {
      const float x = float(v[i]);
      if (o.dtype == "F32") std::memcpy(b.data() + 4 * i, &x, 4);
      else {
        const std::uint16_t h = float_to_bf16(x);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
    }
    bytes.push_back(std::move(b));
    refs.push_back({name, o.dtype, shape, nullptr});
  };
  std::vector<T> folded;
  for (const auto& sp : m.params.specs()) {
    if (plain && sp.name.rfind("model.feedback.", 0) == 0) continue;
    const T* v = m.params.values() + sp.offset;
    if (fold && sp.name == "model.embed_tokens.weight") {
      if constexpr (M::may_feed_back) {
        folded.resize(sp.size);
        std::vector<T> rstd(std::size_t(m.V));
        CpuBackend<T> be;
        m.input().plain_forward(be, m.weights(), m.V, v, folded.data(), rstd.data());  // row v: what pass 1 feeds the stack for token v
      }
      add(sp.name, sp.shape, folded.data(), sp.size);
      if (c.tie_word_embeddings) add("lm_head.weight", sp.shape, v, sp.size);  // the head keeps the original E
      continue;
    }
    add(sp.name, sp.shape, v, sp.size);
  }
  for (std::size_t i = 0; i < refs.size(); ++i) refs[i].data = bytes[i].data();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) refuse("cannot create the directory (" + ec.message() + ")");
  detail::AtomicFile f((fs::path(dir) / "config.json").string(), "save_hf_dir");
  f.write(j.dump(2) + "\n");
  f.sync();  // a failure here leaves the directory as it was
  save_safetensors((fs::path(dir) / "model.safetensors").string(), refs, {{"format", "pt"}});
  if (remote) {  // the remote code, and the byte tokenizer's config
    std::vector<std::pair<std::string, std::string>> files = hf_remote_code_files();
    if (byte_vocab) {
      const nlohmann::json tc = {{"tokenizer_class", "FbtByteTokenizer"},
                                 {"auto_map", {{"AutoTokenizer", nlohmann::json::array({"tokenization_fbt.FbtByteTokenizer", nullptr})}}},
                                 {"bos_token", "<|sep|>"}, {"eos_token", "<|sep|>"}, {"pad_token", "<|sep|>"}, {"unk_token", "<|sep|>"},
                                 {"add_bos_token", true}, {"model_max_length", c.max_position_embeddings}};
      files.emplace_back("tokenizer_config.json", tc.dump(2) + "\n");
    }
    for (const auto& [name, text] : files) {
      detail::AtomicFile pf((fs::path(dir) / name).string(), "save_hf_dir");
      pf.write(text);
      pf.sync();
      pf.commit();
    }
  }
  f.commit();
  // an earlier sharded export: its index would point transformers and fbt at the old shards' names
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (detail::is_hf_export_shard_name(it->path().filename().string())) stale.push_back(it->path());
  if (ec) refuse("cannot list the directory for an earlier export's shards (" + ec.message() + ")");
  stale.push_back(fs::path(dir) / "model.safetensors.index.json");
  for (const fs::path& p : stale)
    if (!fs::remove(p, ec) && ec) refuse("cannot remove '" + p.filename().string() + "' of an earlier sharded export (" + ec.message() + ")");
}

/// The model file of an fbt checkpoint: `path` itself, or `path`/model.safetensors for a directory.
inline std::string checkpoint_model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return (std::filesystem::path(path) / "model.safetensors").string();
  return path;
}

/// \brief The model config of any checkpoint: a Hugging Face directory (config.json), an fbt checkpoint
/// directory or an fbt model file (the config in its metadata).
inline ModelConfig read_checkpoint_config(const std::string& path) {
  if (is_hf_model_dir(path)) return read_hf_config(path);
  return read_model_config(checkpoint_model_file(path));
}

/// \brief The tensors of any checkpoint (see read_checkpoint_config).
inline CheckpointTensors read_checkpoint_tensors(const std::string& path) {
  if (is_hf_model_dir(path)) return read_hf_tensors(path);
  const std::string f = checkpoint_model_file(path);
  std::vector<SafetensorsFile> one;
  one.push_back(read_safetensors(f));
  return CheckpointTensors::of(std::move(one), f);
}

/// \brief Loads into `m` every tensor of checkpoint `path` (any kind) that m also has, converted to m's
/// scalar (the start of a run from another model's weights: fbt train --init_from). Returns the names of
/// m's tensors that the checkpoint lacks, which keep their values: only the feedback tensors
/// (model.feedback.*) may be such. Refuses, naming the file and the tensor, before m is changed: a shape
/// that differs; a tensor of m outside model.feedback.* that the checkpoint lacks; a checkpoint tensor m
/// has no use for, except the checkpoint's own feedback tensors (a full-bandwidth checkpoint started as a
/// baseline, or with another fuser) and a tied model's copy of the embedding as lm_head.weight, which
/// must equal the embedding exactly, as load_model requires; a dtype fbt does not load, a non-finite
/// value; and whatever read_checkpoint_config refuses in the checkpoint's config (a Hugging Face key fbt
/// does not implement, with or without fbt_config), as loading the checkpoint would.
template <class M> std::vector<std::string> init_from_checkpoint(M& m, const std::string& path) {
  using T = typename M::Scalar;
  const char* fn = "init_from_checkpoint";
  return detail::ckpt_guard(fn, path, [&] {
    (void)read_checkpoint_config(path);  // the checks of its config that loading it runs; its sizes are the tensors'
    const CheckpointTensors ts = read_checkpoint_tensors(path);
    ParamStore<T>& ps = m.params;
    const bool tied = m.cfg.tie_word_embeddings;
    for (const auto& r : ts.all) {
      const SafetensorsEntry& e = *r.entry;
      const std::string who = "tensor \"" + detail::st_name(e.name) + "\": ";
      if (!ps.has(e.name)) {
        if (e.name.rfind("model.feedback.", 0) == 0) continue;
        if (e.name == "lm_head.weight" && tied) {  // a copy of the embedding (compared below)
          const Shape& es = ps.spec("model.embed_tokens.weight").shape;
          if (e.shape != es)
            detail::ckpt_fail(fn, r.file->path, who + "shape " + detail::st_shape_str(e.shape) + " in a tied model, expected the embedding's " +
                                                    detail::st_shape_str(es));
          if (!detail::ckpt_float_dtype(e.dtype)) detail::ckpt_fail(fn, r.file->path, who + "dtype " + e.dtype + " is not one fbt loads (F32, F64, BF16, F16)");
          continue;
        }
        detail::ckpt_fail(fn, r.file->path, who + "the model has no such tensor (its stack differs from the checkpoint's: " +
                                                "the run's model fields must describe the checkpoint's stack)");
      }
      const ParamSpec& sp = ps.spec(e.name);
      if (e.shape != sp.shape)
        detail::ckpt_fail(fn, r.file->path, who + "shape " + detail::st_shape_str(e.shape) + " in the checkpoint, but the run's model has " +
                                                detail::st_shape_str(sp.shape) + " (the run's model fields must describe the checkpoint's stack)");
      if (!detail::ckpt_float_dtype(e.dtype)) detail::ckpt_fail(fn, r.file->path, who + "dtype " + e.dtype + " is not one fbt loads (F32, F64, BF16, F16)");
    }
    std::vector<std::string> fresh;
    for (const auto& sp : ps.specs())
      if (!ts.find(sp.name)) {
        if (sp.name.rfind("model.feedback.", 0) != 0)
          detail::ckpt_fail(fn, ts.path, "missing tensor \"" + sp.name + "\" (shape " + detail::st_shape_str(sp.shape) + "), which the run's model needs");
        fresh.push_back(sp.name);
      }
    const CheckpointTensors::Ref* head = ts.find("lm_head.weight");
    if (tied && head)  // not dropped unseen: the run's tied head is the embedding, so the checkpoint's must be too
      detail::ckpt_check_tied_head(*head, *ts.find("model.embed_tokens.weight"), "the run's model ties the embeddings (tie_word_embeddings true)", fn);
    AlignedVector<T> staged(ps.values(), ps.values() + ps.size());  // m is unchanged until every tensor converted
    for (const auto& r : ts.all)
      if (ps.has(r.entry->name)) detail::ckpt_read_tensor(*r.file, *r.entry, staged.data() + ps.spec(r.entry->name).offset, fn);
    std::copy(staged.begin(), staged.end(), ps.values());
    return fresh;
  });
}

/// \brief Loads any checkpoint (see read_checkpoint_config) as a model of type M.
template <class M> M load_checkpoint(const std::string& path) {
  if (is_hf_model_dir(path)) return load_hf_model<M>(path);
  return load_model<M>(checkpoint_model_file(path));
}

}  // namespace fbt
