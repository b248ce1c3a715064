// fbt/io/checkpoint.hpp: model checkpoints and training state as safetensors files (spec sections 8-9).
//
// A checkpoint holds every ParamStore tensor under its spec name (the Hugging Face Qwen3 names, plus
// model.feedback.* for the fuser), matrices (out, in) as nn.Linear stores them, in F32 for Model<float>
// and F64 for Model<double>, with __metadata__ {"format": "pt", "config": <config JSON>} so the file is
// self-describing. A baseline (fuser none) checkpoint is thus a plain Qwen3 state dict.
// Loading builds the model from that config and refuses (fbt::Error naming the file and the tensor or
// field) a dtype or shape that does not match, unknown or missing tensors, non-finite values, and an
// lm_head.weight in a tied model unless it equals the embedding exactly. F32, F64, BF16 and F16 data
// are accepted and converted to T.
// The training state (AdamW moments and step, plus whatever the trainer adds: schedule position, RNG
// states, data position) is a second file, restored bit for bit. All writes are atomic (tmp + rename).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../model/model.hpp"
#include "config_json.hpp"
#include "safetensors.hpp"

namespace fbt {

/// \brief The metadata a checkpoint of `cfg` carries: {"format": "pt", "config": to_json(cfg).dump()}.
inline std::map<std::string, std::string> model_metadata(const ModelConfig& cfg) {
  return {{"format", "pt"}, {"config", to_json(cfg).dump()}};
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
  const std::string who = "tensor \"" + e.name + "\": ";
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

/// The config a checkpoint carries in __metadata__ (refuses a wrong format, a missing or invalid config).
inline ModelConfig ckpt_config(const SafetensorsFile& f, const char* fn) {
  auto fm = f.metadata.find("format");
  if (fm != f.metadata.end() && fm->second != "pt")
    ckpt_fail(fn, f.path, "__metadata__ field \"format\" is \"" + fm->second + "\", expected \"pt\" (a model checkpoint)");
  auto c = f.metadata.find("config");
  if (c == f.metadata.end()) ckpt_fail(fn, f.path, "__metadata__ has no \"config\" field (not an fbt checkpoint?)");
  const std::string where = std::string("fbt::") + fn + ": '" + f.path + "': __metadata__ field \"config\"";
  return config_from_json(parse_json_strict(c->second, where), where);
}

/// Loads f's tensors into m.params after checking all of them; m is unchanged if anything is refused.
template <class M> void ckpt_load_params(const SafetensorsFile& f, M& m, const char* fn) {
  using T = typename M::Scalar;
  auto fail = [&](const std::string& what) { ckpt_fail(fn, f.path, what); };
  ParamStore<T>& ps = m.params;
  AlignedVector<T> staged(ps.size());
  std::set<std::string> seen;
  const SafetensorsEntry* tied_head = nullptr;
  for (const auto& e : f.tensors) {
    if (!ps.has(e.name)) {
      if (e.name == "lm_head.weight" && m.cfg.tie_word_embeddings) {  // allowed only as a copy of the embedding
        tied_head = &e;
        continue;
      }
      fail("tensor \"" + e.name + "\": unknown tensor (the model built from the config has no such parameter)");
    }
    const ParamSpec& s = ps.spec(e.name);
    if (e.shape != s.shape)
      fail("tensor \"" + e.name + "\": shape " + st_shape_str(e.shape) + " in the file, expected " + st_shape_str(s.shape) +
           " from the config");
    ckpt_read_tensor(f, e, staged.data() + s.offset, fn);
    seen.insert(e.name);
  }
  std::vector<std::string> missing;
  for (const auto& s : ps.specs())
    if (!seen.count(s.name)) missing.push_back(s.name);
  if (!missing.empty())
    fail("missing tensor \"" + missing[0] + "\"" +
         (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : std::string()));
  if (tied_head) {
    // A tied model has no lm_head: a file may carry one (HF writes it sometimes) only as an exact copy.
    const ParamSpec& es = ps.spec("model.embed_tokens.weight");
    const SafetensorsEntry* emb = f.find(es.name);
    if (tied_head->shape != es.shape)
      fail("tensor \"lm_head.weight\": shape " + st_shape_str(tied_head->shape) + " in a tied model, expected the embedding's " +
           st_shape_str(es.shape));
    std::vector<double> a(es.size), b(es.size);
    if (tied_head->dtype != "F32" && tied_head->dtype != "F64" && tied_head->dtype != "BF16" && tied_head->dtype != "F16")
      fail("tensor \"lm_head.weight\": dtype " + tied_head->dtype + " is not one fbt loads (F32, F64, BF16, F16)");
    st_convert(tied_head->dtype, f.bytes(*tied_head), es.size, a.data());
    st_convert(emb->dtype, f.bytes(*emb), es.size, b.data());
    for (std::size_t i = 0; i < es.size; ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
        fail("tensor \"lm_head.weight\": the config ties the embeddings (tie_word_embeddings true) but lm_head.weight differs from "
             "model.embed_tokens.weight at index " + ckpt_index_str(i, es.shape) + " (" + ckpt_num(a[i]) + " vs " + ckpt_num(b[i]) + ")");
  }
  std::copy(staged.begin(), staged.end(), ps.values());
}

}  // namespace detail

/// \brief The model config a checkpoint file carries in its __metadata__: what a program reads to choose
/// the model type (fbt::with_model) before loading the file with load_model<M>.
inline ModelConfig read_model_config(const std::string& path) {
  const SafetensorsFile f = read_safetensors(path);
  return detail::ckpt_config(f, "read_model_config");
}

/// \brief Loads a checkpoint into an existing model whose config must equal the file's.
/// Refuses (fbt::Error naming the file and the field) a config that differs in any field, then checks
/// the tensors as load_model does. On any refusal `m` is left unchanged.
template <class M> void load_model_into(const std::string& path, M& m) {
  const char* fn = "load_model_into";
  const SafetensorsFile f = read_safetensors(path);
  const ModelConfig cfg = detail::ckpt_config(f, fn);
  const nlohmann::json a = to_json(cfg), b = to_json(m.cfg);
  for (auto it = b.begin(); it != b.end(); ++it) {
    const auto other = a.find(it.key());
    const std::string in_file = other == a.end() ? std::string("absent") : other->dump();
    if (other == a.end() || *other != it.value())
      detail::ckpt_fail(fn, path, "config field \"" + it.key() + "\" is " + in_file + " in the file but " + it.value().dump() +
                                      " in the model");
  }
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()))
      detail::ckpt_fail(fn, path, "config field \"" + it.key() + "\" is " + it.value().dump() + " in the file but absent in the model");
  detail::ckpt_load_params(f, m, fn);
}

/// \brief Builds a model from the config in a checkpoint's metadata and loads its tensors.
/// \tparam M the model type (its scalar float or double; F32, F64, BF16 and F16 tensors are converted to
/// it); the file's fuser must be M's (fbt::with_model picks the type a file's config names).
///
/// Refuses, with an fbt::Error naming the file and the tensor or field: anything read_safetensors
/// refuses; a "format" other than "pt"; a missing or invalid config; a tensor whose dtype is not
/// floating-point or whose shape differs from the config's (expected and found shapes); an unknown
/// tensor; a missing tensor; a non-finite value (or one that overflows T), with its index; an
/// lm_head.weight in a tied model that is not exactly the embedding (an equal one is ignored).
template <class M> M load_model(const std::string& path) {
  const char* fn = "load_model";
  const SafetensorsFile f = read_safetensors(path);
  const ModelConfig cfg = detail::ckpt_config(f, fn);
  if (cfg.fuser != M::Fuser::name)
    detail::ckpt_fail(fn, path, "the file's fuser is \"" + cfg.fuser + "\" but the model type's is \"" + M::Fuser::name + "\"");
  M m(cfg, 0);
  detail::ckpt_load_params(f, m, fn);
  return m;
}

/// \brief Saves the AdamW state of `ps` (atomic): tensors "adam_m.<name>" and "adam_v.<name>" for every
/// parameter, in T's dtype (F32 / F64); metadata {"format": "fbt-train-state", "step": ps.step} plus
/// every key of `extra` (schedule position, RNG states, data position: the trainer's to choose).
/// Refuses an `extra` key "format" or "step" (reserved).
template <class T>
void save_train_state(const std::string& path, const ParamStore<T>& ps, const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> meta = extra;
  for (const char* k : {"format", "step"})
    if (meta.count(k)) detail::ckpt_fail("save_train_state", path, std::string("extra metadata key \"") + k + "\" is reserved");
  meta["format"] = "fbt-train-state";
  meta["step"] = std::to_string(ps.step);
  std::vector<TensorRef> t;
  for (const auto& s : ps.specs()) t.push_back({"adam_m." + s.name, safetensors_dtype<T>(), s.shape, ps.adam_m() + s.offset});
  for (const auto& s : ps.specs()) t.push_back({"adam_v." + s.name, safetensors_dtype<T>(), s.shape, ps.adam_v() + s.offset});
  save_safetensors(path, t, meta);
}

/// \brief Restores the AdamW moments and step of `ps` bit for bit; returns the file's whole metadata
/// (including "format", "step" and the trainer's extra keys).
///
/// Refuses, with an fbt::Error naming the file and the tensor or field: anything read_safetensors
/// refuses; a "format" other than "fbt-train-state"; a missing or non-integer "step"; a tensor that is
/// not adam_m/adam_v of a parameter of `ps`, has a dtype other than T's or a different shape; a missing
/// moment; a non-finite moment or a negative second moment. On any refusal `ps` is left unchanged.
template <class T> std::map<std::string, std::string> load_train_state(const std::string& path, ParamStore<T>& ps) {
  const char* fn = "load_train_state";
  auto fail = [&](const std::string& what) { detail::ckpt_fail(fn, path, what); };
  const SafetensorsFile f = read_safetensors(path);
  auto fm = f.metadata.find("format");
  if (fm == f.metadata.end() || fm->second != "fbt-train-state")
    fail("__metadata__ field \"format\" is " + (fm == f.metadata.end() ? std::string("missing") : "\"" + fm->second + "\"") +
         ", expected \"fbt-train-state\"");
  auto st = f.metadata.find("step");
  if (st == f.metadata.end()) fail("__metadata__ has no \"step\" field");
  const std::string& sv = st->second;
  if (sv.empty() || sv.size() > 18 || sv.find_first_not_of("0123456789") != std::string::npos)
    fail("__metadata__ field \"step\" is \"" + sv + "\", expected a non-negative integer");
  const long step = std::stol(sv);

  AlignedVector<T> m(ps.size()), v(ps.size());
  std::set<std::string> seen;
  for (const auto& e : f.tensors) {
    const bool is_m = e.name.rfind("adam_m.", 0) == 0, is_v = e.name.rfind("adam_v.", 0) == 0;
    const std::string pname = (is_m || is_v) ? e.name.substr(7) : std::string();
    if (pname.empty() || !ps.has(pname))
      fail("tensor \"" + e.name + "\": unknown tensor (expected adam_m.<name> / adam_v.<name> of the model's parameters)");
    const ParamSpec& s = ps.spec(pname);
    if (e.dtype != safetensors_dtype<T>())
      fail("tensor \"" + e.name + "\": dtype " + e.dtype + ", expected " + safetensors_dtype<T>() + " (moments are restored bit for bit)");
    if (e.shape != s.shape)
      fail("tensor \"" + e.name + "\": shape " + detail::st_shape_str(e.shape) + " in the file, expected " + detail::st_shape_str(s.shape));
    T* dst = (is_m ? m.data() : v.data()) + s.offset;
    detail::ckpt_read_tensor(f, e, dst, fn);
    if (is_v)
      for (std::size_t i = 0; i < s.size; ++i)
        if (dst[i] < T(0))
          fail("tensor \"" + e.name + "\": negative second moment " + detail::ckpt_num(double(dst[i])) + " at index " +
               detail::ckpt_index_str(i, s.shape));
    seen.insert(e.name);
  }
  for (const char* pre : {"adam_m.", "adam_v."})
    for (const auto& s : ps.specs())
      if (!seen.count(pre + s.name)) fail("missing tensor \"" + std::string(pre) + s.name + "\"");
  std::copy(m.begin(), m.end(), ps.adam_m());
  std::copy(v.begin(), v.end(), ps.adam_v());
  ps.step = step;
  return f.metadata;
}

}  // namespace fbt
