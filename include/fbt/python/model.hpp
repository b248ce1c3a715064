// fbt/python/model.hpp: fbt.Model, a model of any fuser and blocks this process knows, behind one Python class
// (docs/python.md).
//
//   AnyModel            the model as the bindings see it: its config, sizes, parameters, save, logits and
//                       hidden states; ModelOf<M> implements it for M = Model<float>, whose pieces sit in
//                       their slots (layers/any_piece.hpp)
//   make_model / load_any_model
//                       a model from a config or any checkpoint the `fbt` command loads (the registries know
//                       the pieces by name: the library's and a loaded plugin's)
//   visit_model(am, fn)
//                       fn(M&) with the C++ model, for bindings of one's own (training, probes)
//   PyModel             the class bound as fbt.Model
// The computations are the library's: logits are pass_logits (train/evaluate.hpp: what `fbt logits` writes),
// hidden states are the residual stream of the training forward (model/pass.hpp), read at every depth as
// the probe reads it (train/probe.hpp); both run without the GIL and hand their result buffer to numpy.
#pragma once

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include "../io/checkpoint.hpp"
#include "../io/hf.hpp"
#include "../train/evaluate.hpp"
#include "config.hpp"
#include "decoder.hpp"

namespace fbt {
namespace python {

/// \brief A model of some type M, as the bindings use it.
struct AnyModel {
  virtual ~AnyModel() = default;
  virtual const ModelConfig& config() const = 0;
  virtual bool has_feedback() const = 0;
  virtual int vocab() const = 0;   ///< V
  virtual int hidden() const = 0;  ///< D
  virtual int layers() const = 0;  ///< L
  virtual ParamStore<float>& params() = 0;
  virtual const std::type_info& type() const = 0;  ///< typeid(M)
  /// Writes an fbt checkpoint: `path` ending in .safetensors is the model file, else a directory (created)
  /// that gets model.safetensors.
  virtual void save(const std::string& path) const = 0;
  /// (K, B*T, V) logits of passes 1..K (pass_logits); prefix (B) or null: plain positions of the fed-back passes.
  virtual std::vector<float> logits(const Batch& b, int K, const int* prefix) const = 0;
  /// (n, B*T, D): for each depth of `depths` (0 = the layer-0 input after the fuser and N_in, l = block l-1's
  /// output, L + 1 = the final norm's output), the states of the K-th pass.
  virtual std::vector<float> hidden_states(const Batch& b, int K, const std::vector<int>& depths, const int* prefix) const = 0;
  /// A decoder of this model (owner keeps the model alive while the decoder lives); sep: the document separator.
  virtual std::unique_ptr<AnyDecoder> decoder(std::shared_ptr<const void> owner, int sep) const = 0;
  /// An independent copy: its own parameters (and pieces), the same values.
  virtual std::unique_ptr<AnyModel> clone() const = 0;
};

/// {checkpoint name: array} over one buffer of the store (its values or its gradients, `base`): writable views
/// of the model's own memory, shaped as each parameter, kept alive by `owner` (the Python model).
inline nb::dict named_views(nb::handle owner, ParamStore<float>& ps, float* base) {
  nb::dict d;
  for (const auto& s : ps.specs()) {
    std::vector<std::size_t> shape(s.shape.begin(), s.shape.end());
    d[s.name.c_str()] = nb::ndarray<nb::numpy, float>(base + s.offset, shape.size(), shape.data(), owner);
  }
  return d;
}

template <class M> struct ModelOf final : AnyModel {
  M m;
  explicit ModelOf(M&& model) : m(std::move(model)) {}
  const ModelConfig& config() const override { return m.cfg; }
  bool has_feedback() const override { return m.feedback(); }
  int vocab() const override { return m.V; }
  int hidden() const override { return m.D; }
  int layers() const override { return m.L; }
  ParamStore<float>& params() override { return m.params; }
  const std::type_info& type() const override { return typeid(M); }
  void save(const std::string& path) const override {
    namespace fs = std::filesystem;
    const fs::path p(path);
    if (p.extension() == ".safetensors") return save_model(path, m);
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) throw Error("Model.save: cannot create the directory '" + path + "' (" + ec.message() + ")");
    save_model((p / "model.safetensors").string(), m);
  }
  std::vector<float> logits(const Batch& b, int K, const int* prefix) const override { return pass_logits(m, b, K, prefix); }
  std::vector<float> hidden_states(const Batch& b, int K, const std::vector<int>& depths, const int* prefix) const override {
    std::vector<float> out(depths.size() * std::size_t(b.B) * b.T * m.D);
    CpuBackend<float> be;
    Workspace<M> ws;
    pass_hidden_states(out.data(), be, ws, m, b, K, depths, prefix);
    return out;
  }
  std::unique_ptr<AnyDecoder> decoder(std::shared_ptr<const void> owner, int sep) const override {
    return std::make_unique<DecoderOf<M>>(std::move(owner), m, sep);
  }
  std::unique_ptr<AnyModel> clone() const override { return std::make_unique<ModelOf<M>>(M(m)); }
};

/// \brief A new model of `c` (its fuser and blocks made by name), its parameters initialised from seed.
inline std::unique_ptr<AnyModel> make_model(const ModelConfig& c, std::uint64_t seed) {
  c.validate();
  return with_model<float>(c, [&](auto tag) -> std::unique_ptr<AnyModel> {
    using M = typename decltype(tag)::type;
    return std::make_unique<ModelOf<M>>(M(c, seed));
  });
}
/// \brief Any checkpoint the `fbt` command loads: an fbt checkpoint (directory or model.safetensors) or a
/// Hugging Face directory (config.json + safetensors), any vocabulary.
inline std::unique_ptr<AnyModel> load_any_model(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("Model.load: '" + path + "' does not exist (an fbt checkpoint or a Hugging Face directory)");
  const ModelConfig c = read_checkpoint_config(path);
  return with_model<float>(c, [&](auto tag) -> std::unique_ptr<AnyModel> {
    using M = typename decltype(tag)::type;
    return std::make_unique<ModelOf<M>>(load_checkpoint<M>(path));
  });
}
/// \brief fn(M&) with the C++ model (Model<float>).
template <class Fn> decltype(auto) visit_model(AnyModel& am, Fn&& fn) {
  auto* typed = dynamic_cast<ModelOf<Model<float>>*>(&am);
  FBT_ASSERT(typed != nullptr, "visit_model: the model is not a Model<float>");
  return fn(typed->m);
}

/// \brief The Python class fbt.Model.
struct PyModel {
  std::shared_ptr<AnyModel> impl;  ///< shared with the decoders made from it
  int sep() const { return impl->vocab() == ByteTokenizer::kVocabSize ? ByteTokenizer::kSep : -1; }
};

/// \brief `prefix` of a call: None (no plain prefix), an int for every row, or a sequence of B ints; each in [0, T].
inline std::vector<int> prefix_arg(nb::handle obj, const TokenBatch& tb) {
  std::vector<int> p;
  if (obj.is_none()) return p;
  if (nb::isinstance<nb::int_>(obj)) {
    p.assign(std::size_t(tb.B), 0);
    long long v = 0;
    if (!nb::try_cast(obj, v) || v < 0 || v > tb.T) value_error("prefix: must be in [0, T = " + std::to_string(tb.T) + "], got " + nb::cast<std::string>(nb::repr(obj)));
    for (int& x : p) x = int(v);
    return p;
  }
  nb::object a;
  try {
    a = nb::module_::import_("numpy").attr("asarray")(obj);
  } catch (nb::python_error&) {
    type_error("prefix: expected an int or a sequence of ints, one per row");
  }
  const std::string kind = nb::cast<std::string>(a.attr("dtype").attr("kind"));
  if (kind != "i" && kind != "u") type_error("prefix: expected an int or integers (one per row), got numpy kind '" + kind + "'");
  if (nb::cast<int>(a.attr("ndim")) != 1 || nb::cast<long long>(a.attr("size")) != tb.B)
    value_error("prefix: one value per row: expected " + std::to_string(tb.B) + " values");
  for (nb::handle v : a.attr("tolist")()) {
    const long long x = nb::cast<long long>(v);
    if (x < 0 || x > tb.T) value_error("prefix: " + std::to_string(x) + " is outside [0, T = " + std::to_string(tb.T) + "]");
    p.push_back(int(x));
  }
  return p;
}

/// `passes` of a call: None = 3 for a full-bandwidth model, 1 for a baseline (as `fbt logits`).
inline int passes_arg(const std::optional<int>& passes, const AnyModel& am) {
  const int K = passes ? *passes : (am.has_feedback() ? 3 : 1);
  if (K < 1 || K > kMaxPasses) value_error("passes: must be in [1, " + std::to_string(kMaxPasses) + "], got " + std::to_string(K));
  if (K > 1 && !am.has_feedback()) value_error("passes: " + std::to_string(K) + " passes need a feedback fuser; this model's fuser is none (1 pass)");
  return K;
}

inline void bind_model(nb::module_& mod) {
  using P = PyModel;
  if (nb::type<P>().is_valid()) {
    mod.attr("Model") = nb::type<P>();
    return;
  }
  nb::class_<P> c(mod, "Model",
                  "A full-bandwidth transformer (or a baseline): its config, parameters and forward.\n\n"
                  "Model(config, seed=0) builds and initialises one; Model.load(path) reads an fbt checkpoint or a Hugging\n"
                  "Face Qwen3 directory.");
  c.def("__init__", [](P* self, nb::handle config, std::uint64_t seed) { new (self) P{make_model(config_arg(config), seed)}; },
        nb::sig("def __init__(self, config: ModelConfig | dict, seed: int = 0) -> None"), "config"_a, "seed"_a = 0, "A new model of `config` (a ModelConfig or a dict of its fields), its parameters initialised from `seed`.");
  c.def_static("load", [](const std::string& path) { return P{load_any_model(path)}; }, "path"_a,
               "Reads an fbt checkpoint (a run directory or its model.safetensors) or a Hugging Face Qwen3 directory.");
  c.def("save", [](const P& self, const std::string& path) { self.impl->save(path); }, "path"_a,
        "Writes an fbt checkpoint: `path` ending in .safetensors is the model file, else a directory that gets model.safetensors.");
  mod.def(
      "export_hf",
      [](const P& model, const std::string& dir, bool plain, const std::string& dtype) {
        if (dtype != "F32" && dtype != "BF16") value_error("export_hf: dtype " + fbt::detail::quote_value(dtype) + ": expected F32 or BF16");
        nb::gil_scoped_release nogil;
        visit_model(*model.impl, [&](const Model<float>& m) { save_hf_dir(dir, m, HfExportOptions{plain, dtype}); });
      },
      "model"_a, "dir"_a, "plain"_a = false, "dtype"_a = "F32",
      "export_hf(model, dir, plain=False, dtype='F32'): the model as a Hugging Face directory, as `fbt export --hf DIR` writes it\n"
      "(docs/interop.md): a full-bandwidth model is the remote-code model FbtForCausalLM with its feedback\n"
      "(transformers.AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True): K-pass forward with gradients,\n"
      "generate() in standard, soft and fused(k)); a baseline, or with plain=True the plain part of a full-bandwidth\n"
      "model, is a Qwen3ForCausalLM. fbt.Model.load(dir) reads every export back.");
  c.def_prop_ro("config", [](const P& self) { return self.impl->config(); }, "The model's config (a copy).");
  // copy and pickle: copy.copy and copy.deepcopy give an independent model (its own parameters, as a checkpoint
  // round trip would); a pickle holds the config's JSON and the parameters' fp32 bytes, and is read back by making
  // the model its config names (its pieces must be registered in the reading process, as for a checkpoint)
  c.def("__copy__", [](const P& self) { return P{self.impl->clone()}; }, "An independent copy: its own parameters, the same values.");
  c.def("__deepcopy__", [](const P& self, nb::handle) { return P{self.impl->clone()}; }, "memo"_a, "As __copy__.");
  c.def("__getstate__", [](P& self) {
    ParamStore<float>& ps = self.impl->params();
    return std::make_tuple(to_json(self.impl->config()).dump(), nb::bytes(reinterpret_cast<const char*>(ps.values()), ps.size() * sizeof(float)));
  });
  c.def("__setstate__", [](P& self, const std::tuple<std::string, nb::bytes>& st) {
    const ModelConfig cfg = config_from_json(detail::parse_json_strict(std::get<0>(st), "Model pickle (config)"), "Model pickle (config)");
    std::unique_ptr<AnyModel> m = make_model(cfg, 0);
    const nb::bytes& b = std::get<1>(st);
    ParamStore<float>& ps = m->params();
    if (b.size() != ps.size() * sizeof(float))
      value_error("Model pickle: " + std::to_string(b.size()) + " bytes of parameters, but the config's model has " + std::to_string(ps.size()) +
                  " fp32 parameters (" + std::to_string(ps.size() * sizeof(float)) + " bytes)");
    if (b.size() > 0) std::memcpy(ps.values(), b.c_str(), b.size());
    new (&self) P{std::move(m)};
  });
  c.def_prop_ro("vocab_size", [](const P& self) { return self.impl->vocab(); });
  c.def_prop_ro("hidden_size", [](const P& self) { return self.impl->hidden(); });
  c.def_prop_ro("num_layers", [](const P& self) { return self.impl->layers(); });
  c.def_prop_ro("has_feedback", [](const P& self) { return self.impl->has_feedback(); }, "False for a baseline (fuser none).");
  c.def_prop_ro("num_parameters", [](const P& self) { return self.impl->params().size(); });
  c.def(
      "named_parameters",
      [](nb::handle self_h) {
        ParamStore<float>& ps = nb::cast<P&>(self_h).impl->params();
        return named_views(self_h, ps, ps.values());
      },
      "{name: array} of every parameter under its checkpoint name (Hugging Face Qwen3 names, model.feedback.* for the fuser):\n"
      "writable views of the model's own memory (no copy), valid while the model lives.");
  c.def(
      "logits",
      [](const P& self, nb::handle tokens, std::optional<int> passes, nb::handle prefix, nb::handle doc_starts) {
        const AnyModel& am = *self.impl;
        const int K = passes_arg(passes, am);
        TokenBatch tb = tokens_arg(tokens, "tokens", am.vocab());
        if (tb.T > am.config().max_position_embeddings)
          value_error("tokens: " + std::to_string(tb.T) + " positions, more than the model's max_position_embeddings (" +
                      std::to_string(am.config().max_position_embeddings) + ")");
        const std::vector<std::uint8_t> ds = doc_starts_arg(doc_starts, tb, self.sep());
        const std::vector<int> pre = prefix_arg(prefix, tb);
        std::vector<float> out;
        {
          nb::gil_scoped_release unlocked;
          out = am.logits(Batch{tb.B, tb.T, tb.ids, nullptr, ds.data()}, K, pre.empty() ? nullptr : pre.data());
        }
        return owned_array(std::move(out), {std::size_t(K), std::size_t(tb.B), std::size_t(tb.T), std::size_t(am.vocab())});
      },
      nb::sig("def logits(self, tokens: NDArray | Sequence[int] | Sequence[Sequence[int]] | str | bytes, passes: int | None = None, prefix: int | Sequence[int] | None = None, "
              "doc_starts: NDArray | Sequence[Sequence[int]] | None = None) -> NDArray[numpy.float32]"),
      "tokens"_a.none(), "passes"_a = nb::none(), "prefix"_a.none() = nb::none(), "doc_starts"_a.none() = nb::none(),
      "Logits of passes 1..K of the fed-back chain (pass k = the fused(k-1) prefill at every position; what `fbt logits` writes):\n"
      "a float32 array (K, B, T, V) that owns the library's result buffer (no copy).\n\n"
      "tokens: (T,) or (B, T) integer ids (numpy, list, CPU tensor) or text (str/bytes: one document, kSep + the bytes).\n"
      "passes: K (default 3 for a full-bandwidth model, 1 for a baseline).\n"
      "prefix: positions t < prefix of each row stay plain in every fed-back pass (an int, or one per row; default 0).\n"
      "doc_starts: (B, T) 0/1 where a document starts; default position 0 and every separator id (256 in a byte-level model).");
  c.def(
      "hidden_states",
      [](const P& self, nb::handle tokens, std::optional<int> passes, std::optional<std::vector<int>> layers, nb::handle prefix, nb::handle doc_starts) {
        const AnyModel& am = *self.impl;
        const int K = passes_arg(passes ? passes : std::optional<int>(1), am), L = am.layers();
        TokenBatch tb = tokens_arg(tokens, "tokens", am.vocab());
        if (tb.T > am.config().max_position_embeddings)
          value_error("tokens: " + std::to_string(tb.T) + " positions, more than the model's max_position_embeddings (" +
                      std::to_string(am.config().max_position_embeddings) + ")");
        const std::vector<std::uint8_t> ds = doc_starts_arg(doc_starts, tb, self.sep());
        std::vector<int> depths;
        if (!layers)
          for (int l = 0; l <= L + 1; ++l) depths.push_back(l);
        else
          for (int l : *layers) {
            if (l < -(L + 2) || l > L + 1)
              value_error("layers: depth " + std::to_string(l) + " is outside [0, " + std::to_string(L + 1) + "] (0 = the layer-0 input, " +
                          std::to_string(L + 1) + " = the final norm's output; negative counts from the end)");
            depths.push_back(l < 0 ? l + L + 2 : l);
          }
        if (depths.empty()) value_error("layers: an empty list");
        const std::vector<int> pre = prefix_arg(prefix, tb);
        std::vector<float> out;
        {
          nb::gil_scoped_release unlocked;
          out = am.hidden_states(Batch{tb.B, tb.T, tb.ids, nullptr, ds.data()}, K, depths, pre.empty() ? nullptr : pre.data());
        }
        return owned_array(std::move(out), {depths.size(), std::size_t(tb.B), std::size_t(tb.T), std::size_t(am.hidden())});
      },
      nb::sig("def hidden_states(self, tokens: NDArray | Sequence[int] | Sequence[Sequence[int]] | str | bytes, passes: int | None = None, layers: Sequence[int] | None = None, "
              "prefix: int | Sequence[int] | None = None, doc_starts: NDArray | Sequence[Sequence[int]] | None = None) -> NDArray[numpy.float32]"),
      "tokens"_a.none(), "passes"_a = nb::none(), "layers"_a = nb::none(), "prefix"_a.none() = nb::none(), "doc_starts"_a.none() = nb::none(),
      "The residual stream of pass `passes` (default 1) at each depth: a float32 array (len(layers), B, T, D).\n\n"
      "Depth 0 is the layer-0 input (after the fuser and N_in: what block 0 reads), depth l block l-1's output\n"
      "(L = the last block's, before the final norm), depth L + 1 the final norm's output; the representations\n"
      "`fbt probe` reads. layers: the depths to return (default all L + 2; negative counts from the end). prefix, doc_starts:\n"
      "as logits().");
  c.def("__repr__", [](const P& self) {
    const ModelConfig& cf = self.impl->config();
    return "fbt.Model(fuser=" + cf.fuser + ", block=" + cf.block + ", L=" + std::to_string(cf.num_hidden_layers) + ", D=" + std::to_string(cf.hidden_size) +
           ", V=" + std::to_string(cf.vocab_size) + ", parameters=" + std::to_string(self.impl->params().size()) + ")";
  });
}

}  // namespace python
}  // namespace fbt
