// fbt/io/checkpoint.hpp: model checkpoints and training state as safetensors files (spec sections 8-9).
//
// A checkpoint holds every ParamStore tensor under its spec name (the Hugging Face Qwen3 names, plus
// model.feedback.* for the fuser), matrices (out, in) as nn.Linear stores them, in F32 for Model<float>
// and F64 for Model<double>, with __metadata__ {"format": "pt", "config": <config JSON>} so the file is
// self-describing. A baseline (fuser none) checkpoint is thus a plain Qwen3 state dict.
// Loading checks before it allocates: the file is read by read_safetensors (mapped, bounded, tiled);
// "format" must be "pt" and the config complete and within ModelLimits (config_from_json); then the
// tensors the config implies (Model::plan, computed without allocating them) are compared with the
// file's entries and data size, and the constant tables with the parameters, before the model is
// built. So a small file that claims a huge model is refused in milliseconds with a line naming the
// file and the field, never a bad_alloc. Loading refuses (fbt::Error naming the file and the tensor
// or field) a dtype or shape that does not match, unknown or missing tensors, non-finite values, and
// an lm_head.weight in a tied model unless it equals the embedding exactly. F32, F64, BF16 and F16
// data are accepted and converted to T, straight from the mapped file into the model (load_model
// builds a model whose gradients and optimizer moments are never allocated unless training asks).
// The training state (AdamW moments and step, NorMuon's row moments when the run uses it, plus whatever
// the trainer adds: the optimizer's name, schedule position, RNG states, data position) is a second file,
// restored bit for bit. All writes are atomic (tmp + rename).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "../model/model.hpp"
#include "config_json.hpp"
#include "safetensors.hpp"

namespace fbt {

/// \brief The pieces of `cfg` that came from a plugin (fbt/plugins.hpp), as {"fuser lowrank": "liblowrank.so", ...}
/// (the registries' record of where each piece came from); empty when every piece is built in or compiled in.
inline nlohmann::json plugin_record(const ModelConfig& cfg) {
  nlohmann::json r = nlohmann::json::object();
  auto note = [&](const char* kind, const auto& reg, const std::string& name) {
    if (reg.known(name) && !reg.info(name).origin.empty()) r[std::string(kind) + " " + name] = reg.info(name).origin;
  };
  note("fuser", fuser_registry<float>(), cfg.fuser);
  if (cfg.layer_blocks.empty()) note("block", block_registry<float>(), cfg.block);
  for (const auto& b : cfg.layer_blocks) note("block", block_registry<float>(), b);
  return r;
}

/// \brief The metadata a checkpoint of `cfg` carries: {"format": "pt", "config": to_json(cfg).dump()}, and
/// "plugins" (plugin_record) when a piece came from a plugin: what a program without it names in its refusal.
inline std::map<std::string, std::string> model_metadata(const ModelConfig& cfg) {
  std::map<std::string, std::string> m{{"format", "pt"}, {"config", to_json(cfg).dump()}};
  const nlohmann::json p = plugin_record(cfg);
  if (!p.empty()) m["plugins"] = p.dump();
  return m;
}

/// \brief Every parameter of `m` as a TensorRef: spec order, spec (Qwen3) names, F32 or F64.
/// The refs point into m.params and are valid while m lives.
template <class M> std::vector<TensorRef> model_tensors(const M& m) {
  using T = typename M::Scalar;
  std::vector<TensorRef> out;
  for (const auto& s : m.params.specs()) out.push_back({s.name, safetensors_dtype<T>(), s.shape, m.params.values() + s.offset});
  return out;
}

/// \brief Saves a model checkpoint (atomic: `path + ".tmp"`, then rename).
/// \tparam T float (tensors stored as F32) or double (stored as F64)
template <class M> void save_model(const std::string& path, const M& m) {
  save_safetensors(path, model_tensors(m), model_metadata(m.cfg));
}

namespace detail {

[[noreturn]] inline void ckpt_fail(const char* fn, const std::string& path, const std::string& what) {
  throw Error(std::string("fbt::") + fn + ": '" + path + "': " + what);
}

/// Flat index i of `shape` as "i (= [r, c])".
inline std::string ckpt_index_str(std::size_t i, const Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  std::uint64_t r = i;
  for (std::size_t k = shape.size(); k-- > 0;) {
    idx[k] = std::int64_t(r % std::uint64_t(shape[k]));
    r /= std::uint64_t(shape[k]);
  }
  return std::to_string(i) + " (= " + st_shape_str(Shape(idx.begin(), idx.end())) + ")";
}

inline std::string ckpt_num(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

/// Converts entry e of f into dst (numel(e.shape) elements of T), refusing a dtype fbt does not load
/// and any value that is not finite in the file or after rounding to T.
template <class T> void ckpt_read_tensor(const SafetensorsFile& f, const SafetensorsEntry& e, T* dst, const char* fn) {
  const std::string who = "tensor \"" + st_name(e.name) + "\": ";
  if (e.dtype != "F32" && e.dtype != "F64" && e.dtype != "BF16" && e.dtype != "F16")
    ckpt_fail(fn, f.path, who + "dtype " + e.dtype + " is not one fbt loads (F32, F64, BF16, F16)");
  const std::size_t n = std::size_t(numel(e.shape));
  st_convert(e.dtype, f.bytes(e), n, dst);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(dst[i])) continue;
    const double v = st_float_at(e.dtype, f.bytes(e), i);
    ckpt_fail(fn, f.path, who + (std::isfinite(v) ? "value " + ckpt_num(v) + " overflows " + safetensors_dtype<T>()
                                                  : "non-finite value " + ckpt_num(v)) +
                              " at index " + ckpt_index_str(i, e.shape));
  }
}

/// True for the dtypes a model loads (converted to T).
inline bool ckpt_float_dtype(const std::string& d) { return d == "F32" || d == "F64" || d == "BF16" || d == "F16"; }

/// The config a checkpoint carries in __metadata__ (refuses a missing or wrong format, a missing or
/// invalid config).
inline ModelConfig ckpt_config(const SafetensorsFile& f, const char* fn) {
  auto fm = f.metadata.find("format");
  if (fm == f.metadata.end())
    ckpt_fail(fn, f.path, "__metadata__ has no \"format\" field, expected \"pt\" (a model checkpoint states its format)");
  if (fm->second != "pt")
    ckpt_fail(fn, f.path, "__metadata__ field \"format\" is \"" + excerpt(fm->second) + "\", expected \"pt\" (a model checkpoint)");
  auto c = f.metadata.find("config");
  if (c == f.metadata.end()) ckpt_fail(fn, f.path, "__metadata__ has no \"config\" field (not an fbt checkpoint?)");
  const std::string where = std::string("fbt::") + fn + ": '" + f.path + "': __metadata__ field \"config\"";
  const nlohmann::json cj = parse_json_strict(c->second, where);
  ModelConfig cfg = config_from_json(cj, where);
  // A checkpoint records its fuser's options (every declared one, resolved); a config without them (and without
  // the legacy glu_init / gated_add_alpha of files from before fuser_options) would load at the defaults, which
  // may not be what it was trained with (gated_add at alpha 0.5 read as 0.1): refused, naming fuser_options.
  if (!cj.contains("fuser_options") && !cj.contains("glu_init") && !cj.contains("gated_add_alpha") && fuser_registry<float>().known(cfg.fuser)) {
    const OptionList& declared = fuser_registry<float>().info(cfg.fuser).options;
    if (!declared.specs().empty())
      ckpt_fail(fn, f.path, "__metadata__ field \"config\" records no fuser_options, but fuser " + config_quote(cfg.fuser) + " declares " +
                                declared.names() + ": the values it was trained with are unknown (fbt writes them in every checkpoint; "
                                "add \"fuser_options\" to the config)");
  }
  // a piece of a plugin this program has not loaded: refused here, naming the plugin the file records
  auto pl = f.metadata.find("plugins");
  if (pl != f.metadata.end()) {
    const nlohmann::json rec = parse_json_strict(pl->second, std::string("fbt::") + fn + ": '" + f.path + "': __metadata__ field \"plugins\"");
    if (!rec.is_object()) ckpt_fail(fn, f.path, "__metadata__ field \"plugins\" is not a JSON object");
    std::string unknown, files, python;  // the fuser first, then the blocks
    for (const char* kind : {"fuser", "block"})
      for (auto it = rec.begin(); it != rec.end(); ++it) {
        const std::string piece = it.key(), k = piece.substr(0, piece.find(' ')), name = piece.substr(piece.find(' ') + 1);
        if (k != kind || !it.value().is_string()) continue;
        const bool known = k == "fuser" ? fuser_registry<float>().known(name) : block_registry<float>().known(name);
        if (known) continue;
        const std::string file = excerpt(it.value().get<std::string>());
        unknown += (unknown.empty() ? "" : ", ") + k + " " + config_quote(name);
        if (file.rfind("python:", 0) == 0) python = file.substr(7);  // a fuser written in Python (python/py_fuser.hpp)
        else if (files.find(file) == std::string::npos) files += (files.empty() ? "" : ", ") + file;
      }
    if (!unknown.empty() && !python.empty())
      ckpt_fail(fn, f.path, "unknown " + unknown + ": the checkpoint was made with a fuser written in Python (class " + python +
                                "): register it with fbt.register_fuser(" + python + ") first" + (files.empty() ? "" : ", and load plugin " + files));
    if (!unknown.empty())
      ckpt_fail(fn, f.path, "unknown " + unknown + ": the checkpoint was made with plugin " + files + ", which this program has not loaded (fbt: --plugin PATH/" +
                                files.substr(0, files.find(',')) + "; Python: fbt.load_plugin(PATH))");
  }
  return cfg;
}

}  // namespace detail

/// \brief The tensors of a model checkpoint: one safetensors file (an fbt checkpoint), or the shards of a
/// Hugging Face directory (io/hf.hpp). Every name is in exactly one file.
struct CheckpointTensors {
  struct Ref {
    const SafetensorsFile* file;
    const SafetensorsEntry* entry;
  };
  std::string path;                   ///< what messages about the whole set name (the file, or the directory)
  std::vector<SafetensorsFile> files; ///< the files, in the order given
  std::vector<Ref> all;               ///< every tensor, file by file, each file in data order
  std::uint64_t data_bytes = 0;       ///< the files' data sections together

  /// The set of `fs` (names must not repeat across files: refused naming both files); `path` for messages.
  static CheckpointTensors of(std::vector<SafetensorsFile> fs, std::string path) {
    CheckpointTensors t;
    t.path = std::move(path), t.files = std::move(fs);
    for (const auto& f : t.files) {
      t.data_bytes += f.data.size();
      for (const auto& e : f.tensors) {
        const auto [it, fresh] = t.index_.emplace(e.name, t.all.size());
        if (!fresh)
          throw Error("fbt: '" + t.path + "': tensor \"" + detail::st_name(e.name) + "\" is in both '" + t.all[it->second].file->path + "' and '" +
                      f.path + "'");
        t.all.push_back(Ref{&f, &e});
      }
    }
    return t;
  }
  CheckpointTensors() = default;
  CheckpointTensors(CheckpointTensors&& o) noexcept = default;  // the Refs point into files' heap storage: a move keeps them valid
  CheckpointTensors& operator=(CheckpointTensors&&) noexcept = default;
  CheckpointTensors(const CheckpointTensors&) = delete;
  CheckpointTensors& operator=(const CheckpointTensors&) = delete;
  /// The tensor called `name`, or nullptr.
  const Ref* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &all[it->second];
  }

 private:
  std::unordered_map<std::string, std::size_t> index_;
};

namespace detail {

/// The RoPE and other constant tables a model builds are not in the file: at most this many elements,
/// or as many as the file's parameters, whichever is larger (docs/file-formats.md).
constexpr std::size_t kCkptMinConstantBudget = std::size_t(1) << 22;

/// \brief Checks a file's tensors against the layout a config implies (Model::plan), before anything of
/// the model's size is allocated: the constant tables may not be larger than allowed above; every
/// tensor in the file must be planned, with the planned shape and a dtype fbt loads (but an
/// lm_head.weight of the embedding's shape in a tied model); the data section must hold at least 2
/// bytes per parameter (the narrowest dtype fbt loads: the error names the config's sizes); and no
/// planned tensor may be missing.
/// (check_constants false: the model exists already, load_model_into.)
inline void ckpt_check_layout(const CheckpointTensors& ts, const ParamLayout& plan, const ModelConfig& cfg, const char* fn,
                              bool check_constants = true) {
  auto fail = [&](const std::string& what) { ckpt_fail(fn, ts.path, what); };
  if (check_constants && plan.constants > std::max(kCkptMinConstantBudget, plan.params))
    fail("the config's constant tables (RoPE: max_position_embeddings " + std::to_string(cfg.max_position_embeddings) + " x head_dim " +
         std::to_string(cfg.hs()) + ") take " + std::to_string(plan.constants) + " elements, more than the model's " +
         std::to_string(plan.params) + " parameters and than " + std::to_string(kCkptMinConstantBudget) +
         " (lower max_position_embeddings)");
  std::unordered_map<std::string, const ParamSpec*> by_name;
  by_name.reserve(plan.specs.size());
  for (const auto& s : plan.specs) by_name.emplace(s.name, &s);
  const ParamSpec* emb = nullptr;
  {
    auto it = by_name.find("model.embed_tokens.weight");
    if (it != by_name.end()) emb = it->second;
  }
  std::size_t matched = 0;
  for (const auto& r : ts.all) {
    const SafetensorsEntry& e = *r.entry;
    auto tfail = [&](const std::string& what) { ckpt_fail(fn, r.file->path, what); };  // a tensor's error names its own file
    const std::string who = "tensor \"" + st_name(e.name) + "\": ";
    auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      if (e.name == "lm_head.weight" && cfg.tie_word_embeddings && emb) {  // allowed only as a copy of the embedding (checked on load)
        if (e.shape != emb->shape)
          tfail("tensor \"lm_head.weight\": shape " + excerpt(st_shape_str(e.shape), 128) + " in a tied model, expected the embedding's " +
                st_shape_str(emb->shape));
        if (!ckpt_float_dtype(e.dtype)) tfail(who + "dtype " + e.dtype + " is not one fbt loads (F32, F64, BF16, F16)");
        continue;
      }
      tfail(who + "unknown tensor (the model built from the config has no such parameter)");
    }
    const ParamSpec& s = *it->second;
    if (e.shape != s.shape)
      tfail(who + "shape " + excerpt(st_shape_str(e.shape), 128) + " in the file, expected " + st_shape_str(s.shape) + " from the config");
    if (!ckpt_float_dtype(e.dtype)) tfail(who + "dtype " + e.dtype + " is not one fbt loads (F32, F64, BF16, F16)");
    ++matched;
  }
  const std::uint64_t need = 2 * std::uint64_t(plan.params);
  if (ts.data_bytes < need)
    fail("the config (vocab_size " + std::to_string(cfg.vocab_size) + ", hidden_size " + std::to_string(cfg.hidden_size) +
         ", num_hidden_layers " + std::to_string(cfg.num_hidden_layers) + ", intermediate_size " + std::to_string(cfg.intermediate_size) +
         ") implies " + std::to_string(plan.params) + " parameters, at least " + std::to_string(need) +
         " bytes of tensor data, but the file" + (ts.files.size() > 1 ? "s hold " : " holds ") + std::to_string(ts.data_bytes));
  if (matched != plan.specs.size()) {
    std::vector<const ParamSpec*> missing;
    for (const auto& s : plan.specs)
      if (!ts.find(s.name)) missing.push_back(&s);
    if (!missing.empty())
      fail("missing tensor \"" + missing[0]->name + "\" (shape " + st_shape_str(missing[0]->shape) + " from the config)" +
           (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : std::string()));
  }
}

/// A tied model has no lm_head: a checkpoint may carry one (HF writes it sometimes) only as an exact copy
/// of the embedding (same shape, checked before). Refuses, naming `head`'s file and the first index that
/// differs; `why` says who ties the head. Compared in chunks: no copy of the whole matrix.
inline void ckpt_check_tied_head(const CheckpointTensors::Ref& head, const CheckpointTensors::Ref& emb, const std::string& why, const char* fn) {
  const SafetensorsEntry &h = *head.entry, &ee = *emb.entry;
  const std::size_t size = std::size_t(numel(ee.shape));
  const std::size_t chunk = 4096;
  double a[chunk], b[chunk];
  for (std::size_t i0 = 0; i0 < size; i0 += chunk) {
    const std::size_t n = std::min(chunk, size - i0);
    st_convert(h.dtype, head.file->bytes(h) + i0 * safetensors_dtype_size(h.dtype), n, a);
    st_convert(ee.dtype, emb.file->bytes(ee) + i0 * safetensors_dtype_size(ee.dtype), n, b);
    for (std::size_t i = 0; i < n; ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
        ckpt_fail(fn, head.file->path,
                  "tensor \"lm_head.weight\": " + why + " but lm_head.weight differs from model.embed_tokens.weight at index " +
                      ckpt_index_str(i0 + i, ee.shape) + " (" + ckpt_num(a[i]) + " vs " + ckpt_num(b[i]) + ")");
  }
}

/// Loads ts's tensors into m.params after ckpt_check_layout accepted them. With `stage`, the values are
/// converted into a copy first and m is unchanged if anything is refused (load_model_into); without,
/// they are converted straight into m (a model that load_model throws away on a refusal), and each
/// tensor's pages of a mapped file are released once converted, so the load peaks near one copy.
template <class M> void ckpt_load_params(const CheckpointTensors& ts, M& m, const char* fn, bool stage) {
  using T = typename M::Scalar;
  ParamStore<T>& ps = m.params;
  AlignedVector<T> staged;
  if (stage) staged.resize(ps.size());
  T* dst = stage ? staged.data() : ps.values();
  const CheckpointTensors::Ref* tied_head = nullptr;
  for (const auto& r : ts.all) {
    if (!ps.has(r.entry->name)) {
      tied_head = &r;  // ckpt_check_layout allowed it: lm_head.weight of a tied model
      continue;
    }
    ckpt_read_tensor(*r.file, *r.entry, dst + ps.spec(r.entry->name).offset, fn);
    if (!stage) r.file->release(*r.entry);
  }
  if (tied_head) {
    const CheckpointTensors::Ref* emb = ts.find("model.embed_tokens.weight");
    ckpt_check_tied_head(*tied_head, *emb, "the config ties the embeddings (tie_word_embeddings true)", fn);
    if (!stage) tied_head->file->release(*tied_head->entry), emb->file->release(*emb->entry);
  }
  if (stage) std::copy(staged.begin(), staged.end(), ps.values());
}

/// Runs body() and turns a std::bad_alloc into an fbt::Error naming the file.
template <class F> auto ckpt_guard(const char* fn, const std::string& path, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    ckpt_fail(fn, path, "out of memory while loading the checkpoint");
  }
}

}  // namespace detail

/// \brief The model config a checkpoint file carries in its __metadata__: what a program reads to choose
/// the model type (fbt::with_model) before loading the file with load_model<M>.
inline ModelConfig read_model_config(const std::string& path) {
  const char* fn = "read_model_config";
  return detail::ckpt_guard(fn, path, [&] {
    const SafetensorsFile f = read_safetensors(path);
    return detail::ckpt_config(f, fn);
  });
}

namespace detail {
/// The message of the fbt::Error fn() throws ("" when it throws none).
template <class Fn> std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}
/// Refuses a checkpoint whose fuser or block is not model type M's (naming both); for
/// Model<T> (erased pieces): refuses one whose fuser or block types this program does not know.
template <class M> void ckpt_check_types(const ModelConfig& cfg, const std::string& path, const char* fn) {
  using T = typename M::Scalar;
  if constexpr (is_any_fuser<typename M::Fuser>::value) {
    if (!fuser_registry<T>().known(cfg.fuser)) ckpt_fail(fn, path, error_of([&] { (void)fuser_registry<T>().info(cfg.fuser); }));
  } else if (cfg.fuser != M::Fuser::name) {
    ckpt_fail(fn, path, "the checkpoint's fuser is \"" + cfg.fuser + "\" but the model type's is \"" + M::Fuser::name + "\"");
  }
  if constexpr (is_any_block<typename M::Block>::value) {
    const std::string e = error_of([&] { (void)erased_block_option_list<T>(cfg); });
    if (!e.empty()) ckpt_fail(fn, path, e);
  } else if (cfg.block != M::Block::name) {
    ckpt_fail(fn, path, "the checkpoint's block is \"" + cfg.block + "\" but the model type's is \"" + M::Block::name + "\"");
  }
}
}  // namespace detail

/// \brief Loads a checkpoint into an existing model whose config must equal the file's.
/// Refuses (fbt::Error naming the file and the field) a config that differs in any field, then checks
/// the tensors as load_model does. On any refusal `m` is left unchanged (the values are converted into
/// a copy first).
template <class M> void load_model_into(const std::string& path, M& m) {
  const char* fn = "load_model_into";
  detail::ckpt_guard(fn, path, [&] {
    const SafetensorsFile f = read_safetensors(path);
    const ModelConfig cfg = detail::ckpt_config(f, fn);
    detail::ckpt_check_types<M>(cfg, path, fn);
    // both as a model of type M records them (options resolved, legacy fields folded): a file from before
    // fuser_options equals the model it describes
    const std::size_t nl = std::max(cfg.layer_blocks.size(), m.cfg.layer_blocks.size());
    for (std::size_t l = 0; l < nl; ++l) {  // a mixed stack: the first layer whose block type differs
      auto at = [l](const std::vector<std::string>& v) { return l < v.size() ? "\"" + detail::excerpt(v[l]) + "\"" : std::string("absent"); };
      if (at(cfg.layer_blocks) != at(m.cfg.layer_blocks))
        detail::ckpt_fail(fn, path, "config field \"layer_blocks[" + std::to_string(l) + "]\" is " + at(cfg.layer_blocks) + " in the file but " +
                                        at(m.cfg.layer_blocks) + " in the model");
    }
    const nlohmann::json a = to_json(M::normalized(cfg)), b = to_json(M::normalized(m.cfg));
    for (auto it = b.begin(); it != b.end(); ++it) {
      const auto other = a.find(it.key());
      // an object (a piece's options) is shown whole, bounded
      // an object (a piece's options) or an array (per-layer lists) is shown whole, bounded, so the message shows the difference
      auto brief = [](const nlohmann::json& v) { return v.is_object() || v.is_array() ? detail::excerpt(v.dump(), 200) : detail::json_brief(v); };
      const std::string in_file = other == a.end() ? std::string("absent") : brief(*other);
      if (other == a.end() || *other != it.value())
        detail::ckpt_fail(fn, path, "config field \"" + it.key() + "\" is " + in_file + " in the file but " + brief(it.value()) + " in the model");
    }
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()))
        detail::ckpt_fail(fn, path, "config field \"" + it.key() + "\" is " + detail::json_brief(it.value()) + " in the file but absent in the model");
    const auto ts = CheckpointTensors::of({f}, path);
    detail::ckpt_check_layout(ts, m.params.layout(), m.cfg, fn, /*check_constants=*/false);
    detail::ckpt_load_params(ts, m, fn, /*stage=*/true);
  });
}

/// \brief Builds the model of `cfg` and loads the tensors of `ts` into it: the checks and the load of
/// load_model (below), for a tensor set from anywhere (one fbt file, or a Hugging Face directory's shards,
/// io/hf.hpp); `fn` names the caller in messages.
template <class M> M load_model_from(const CheckpointTensors& ts, const ModelConfig& cfg, const char* fn) {
  detail::ckpt_check_types<M>(cfg, ts.path, fn);
  detail::ckpt_check_layout(ts, M::plan(cfg), cfg, fn);  // before anything of the model's size exists
  M m(cfg, 0);
  detail::ckpt_load_params(ts, m, fn, /*stage=*/false);
  return m;
}

/// \brief Builds a model from the config in a checkpoint's metadata and loads its tensors.
/// \tparam M the model type (its scalar float or double; F32, F64, BF16 and F16 tensors are converted to
/// it); the file's fuser must be M's (fbt::with_model picks the type a file's config names).
///
/// Everything is checked before the model is built (see the file comment); the tensors are converted
/// from the mapped file straight into the model, whose gradient and optimizer buffers are not
/// allocated (ParamStore allocates them on first use), so loading peaks near the size of the
/// parameters plus, at most, the file.
/// Refuses, with an fbt::Error naming the file and the tensor or field: anything read_safetensors
/// refuses; a missing "format" or one other than "pt"; a missing, incomplete or invalid config (bounds
/// and finiteness: ModelConfig::validate); a data section smaller than the config's parameters need; a
/// RoPE table larger than the parameters (and over 4,194,304 elements); a tensor whose dtype is not
/// floating-point or whose shape differs from the config's (expected and found shapes); an unknown
/// tensor; a missing tensor; a non-finite value (or one that overflows T), with its index; an
/// lm_head.weight in a tied model that is not exactly the embedding (an equal one is ignored); running
/// out of memory.
template <class M> M load_model(const std::string& path) {
  const char* fn = "load_model";
  return detail::ckpt_guard(fn, path, [&]() -> M {
    std::vector<SafetensorsFile> one;
    one.push_back(read_safetensors(path));
    const ModelConfig cfg = detail::ckpt_config(one[0], fn);
    return load_model_from<M>(CheckpointTensors::of(std::move(one), path), cfg, fn);
  });
}

/// The optimizer names a training state's "optimizer" field may hold (TrainConfig::optimizer); a state
/// without the field is AdamW's (files from before the field existed).
/// An optimizer name as a train state may record it: 1 to 64 bytes of [A-Za-z0-9_.-] (which optimizers a
/// program knows is the trainer's to check: train/optimizer.hpp).
inline bool known_optimizer(const std::string& o) {
  if (o.empty() || o.size() > 64) return false;
  for (char c : o)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

/// \brief Saves the optimizer state of `ps` (atomic): tensors "adam_m.<name>" and "adam_v.<name>" for
/// every parameter and, for NorMuon, "row_v.<name>" (shape[0]: ParamStore::row_moments) for every matrix,
/// in T's dtype (F32 / F64); metadata {"format": "fbt-train-state", "step": ps.step} plus every key of
/// `extra` (the optimizer, schedule position, RNG states, data position: the trainer's to choose).
/// The row moments are written when extra's "optimizer" is "normuon", or, without that key, when `ps`
/// holds them. Refuses an `extra` key "format" or "step" (reserved) and an unknown "optimizer".
template <class T>
void save_train_state(const std::string& path, const ParamStore<T>& ps, const std::map<std::string, std::string>& extra = {},
                      const std::vector<TensorRef>& optimizer_state = {}) {
  std::map<std::string, std::string> meta = extra;
  for (const char* k : {"format", "step"})
    if (meta.count(k)) detail::ckpt_fail("save_train_state", path, std::string("extra metadata key \"") + k + "\" is reserved");
  auto opt = meta.find("optimizer");
  if (opt != meta.end() && !known_optimizer(opt->second))
    detail::ckpt_fail("save_train_state", path, "extra metadata \"optimizer\" is \"" + detail::excerpt(opt->second) + "\", expected an optimizer name (1 to 64 bytes of letters, digits, _ . -)");
  const bool rows = opt != meta.end() ? opt->second == "normuon" : ps.has_row_moments();
  meta["format"] = "fbt-train-state";
  meta["step"] = std::to_string(ps.step);
  std::vector<TensorRef> t;
  for (const auto& s : ps.specs()) t.push_back({"adam_m." + s.name, safetensors_dtype<T>(), s.shape, ps.adam_m() + s.offset});
  for (const auto& s : ps.specs()) t.push_back({"adam_v." + s.name, safetensors_dtype<T>(), s.shape, ps.adam_v() + s.offset});
  if (rows)
    for (const auto& s : ps.specs())
      if (s.shape.size() >= 2) t.push_back({"row_v." + s.name, safetensors_dtype<T>(), Shape{s.shape[0]}, ps.row_moments() + s.row_offset});
  for (const auto& r : optimizer_state) {
    if (r.name.rfind("opt.", 0) != 0) detail::ckpt_fail("save_train_state", path, "optimizer state tensor \"" + detail::excerpt(r.name) + "\" must be named opt.<name>");
    t.push_back(r);
  }
  save_safetensors(path, t, meta);
}

namespace detail {
template <class T>
std::map<std::string, std::string> load_train_state_impl(const std::string& path, ParamStore<T>& ps, const std::vector<TensorRef>& opt_state, const char* fn) {
  auto fail = [&](const std::string& what) { detail::ckpt_fail(fn, path, what); };
  const SafetensorsFile f = read_safetensors(path);
  auto fm = f.metadata.find("format");
  if (fm == f.metadata.end() || fm->second != "fbt-train-state")
    fail("__metadata__ field \"format\" is " + (fm == f.metadata.end() ? std::string("missing") : "\"" + excerpt(fm->second) + "\"") +
         ", expected \"fbt-train-state\"");
  auto st = f.metadata.find("step");
  if (st == f.metadata.end()) fail("__metadata__ has no \"step\" field");
  const std::string& sv = st->second;
  if (sv.empty() || sv.size() > 18 || sv.find_first_not_of("0123456789") != std::string::npos)
    fail("__metadata__ field \"step\" is \"" + excerpt(sv) + "\", expected a non-negative integer");
  const long step = std::stol(sv);
  auto op = f.metadata.find("optimizer");  // absent: a state from before the field (AdamW's)
  if (op != f.metadata.end() && !known_optimizer(op->second))
    fail("__metadata__ field \"optimizer\" is \"" + excerpt(op->second) + "\", expected an optimizer name");

  AlignedVector<T> m(ps.size()), v(ps.size()), rv(ps.row_moments_size());
  std::vector<AlignedVector<T>> ov(opt_state.size());  // the optimizer's own tensors, staged
  std::set<std::string> seen;
  std::size_t rows_seen = 0;
  for (const auto& e : f.tensors) {
    const std::string who = "tensor \"" + st_name(e.name) + "\": ";
    if (e.name.rfind("opt.", 0) == 0) {  // a state tensor of the optimizer's own
      std::size_t k = 0;
      while (k < opt_state.size() && opt_state[k].name != e.name) ++k;
      if (k == opt_state.size()) fail(who + "unknown optimizer state tensor (the run's optimizer declares no such state)");
      if (e.dtype != safetensors_dtype<T>()) fail(who + "dtype " + e.dtype + ", expected " + safetensors_dtype<T>() + " (state is restored bit for bit)");
      if (e.shape != opt_state[k].shape)
        fail(who + "shape " + detail::st_shape_str(e.shape) + " in the file, expected " + detail::st_shape_str(opt_state[k].shape));
      ov[k].assign(std::size_t(numel(e.shape)), T(0));
      detail::ckpt_read_tensor(f, e, ov[k].data(), fn);
      seen.insert(e.name);
      continue;
    }
    const bool is_m = e.name.rfind("adam_m.", 0) == 0, is_v = e.name.rfind("adam_v.", 0) == 0, is_r = e.name.rfind("row_v.", 0) == 0;
    const std::string pname = (is_m || is_v) ? e.name.substr(7) : is_r ? e.name.substr(6) : std::string();
    if (pname.empty() || !ps.has(pname) || (is_r && ps.spec(pname).shape.size() < 2))
      fail(who + "unknown tensor (expected adam_m.<name> / adam_v.<name> of the model's parameters, or row_v.<name> of its matrices)");
    const ParamSpec& s = ps.spec(pname);
    const Shape want = is_r ? Shape{s.shape[0]} : s.shape;
    if (e.dtype != safetensors_dtype<T>())
      fail(who + "dtype " + e.dtype + ", expected " + safetensors_dtype<T>() + " (moments are restored bit for bit)");
    if (e.shape != want)
      fail(who + "shape " + detail::st_shape_str(e.shape) + " in the file, expected " + detail::st_shape_str(want));
    T* dst = is_r ? rv.data() + s.row_offset : (is_m ? m.data() : v.data()) + s.offset;
    detail::ckpt_read_tensor(f, e, dst, fn);
    if (is_v || is_r)
      for (std::size_t i = 0; i < std::size_t(numel(want)); ++i)
        if (dst[i] < T(0))
          fail(who + "negative second moment " + detail::ckpt_num(double(dst[i])) + " at index " +
               detail::ckpt_index_str(i, want));
    seen.insert(e.name);
    rows_seen += is_r;
  }
  for (const char* pre : {"adam_m.", "adam_v."})
    for (const auto& s : ps.specs())
      if (!seen.count(pre + s.name)) fail("missing tensor \"" + std::string(pre) + s.name + "\"");
  // NorMuon's row moments: all of them exactly when the state is NorMuon's
  const bool normuon = op != f.metadata.end() && op->second == "normuon";
  if (rows_seen > 0 || normuon)
    for (const auto& s : ps.specs())
      if (s.shape.size() >= 2 && !seen.count("row_v." + s.name))
        fail("missing tensor \"row_v." + s.name + "\"" + (normuon ? std::string(" (__metadata__ field \"optimizer\" is \"normuon\")") : std::string()));
  if (rows_seen > 0 && op != f.metadata.end() && !normuon)
    fail("__metadata__ field \"optimizer\" is \"" + excerpt(op->second) + "\", but the file holds NorMuon's row moments (row_v.*)");
  for (const auto& r : opt_state)
    if (!seen.count(r.name)) fail("missing optimizer state tensor \"" + r.name + "\"");
  std::copy(m.begin(), m.end(), ps.adam_m());
  std::copy(v.begin(), v.end(), ps.adam_v());
  for (std::size_t k = 0; k < opt_state.size(); ++k) std::copy(ov[k].begin(), ov[k].end(), static_cast<T*>(const_cast<void*>(opt_state[k].data)));
  if (rows_seen > 0) std::copy(rv.begin(), rv.end(), ps.row_moments());
  else if (ps.has_row_moments()) std::fill(ps.row_moments(), ps.row_moments() + ps.row_moments_size(), T(0));
  ps.step = step;
  return f.metadata;
}
}  // namespace detail


/// \brief Restores the AdamW moments, NorMuon's row moments (when the file has them; else zero) and the
/// step of `ps` bit for bit; returns the file's whole metadata (including "format", "step" and the
/// trainer's extra keys, e.g. "optimizer").
///
/// Refuses, with an fbt::Error naming the file and the tensor or field: anything read_safetensors
/// refuses; a "format" other than "fbt-train-state"; a missing or non-integer "step"; an "optimizer"
/// other than adamw, muon or normuon; a tensor that is not adam_m/adam_v of a parameter of `ps` or
/// row_v of one of its matrices, has a dtype other than T's or a different shape; a missing moment (the
/// row moments: all or none, all when "optimizer" is "normuon", none when it is another); a non-finite
/// moment or a negative second moment. On any refusal `ps` is left unchanged.
/// `optimizer_state`: the run's optimizer's own state tensors (train/optimizer.hpp; "opt.<name>"), each
/// required in the file and restored into its buffer.
template <class T>
std::map<std::string, std::string> load_train_state(const std::string& path, ParamStore<T>& ps, const std::vector<TensorRef>& optimizer_state = {}) {
  const char* fn = "load_train_state";
  return detail::ckpt_guard(fn, path, [&] { return detail::load_train_state_impl(path, ps, optimizer_state, fn); });
}

}  // namespace fbt
