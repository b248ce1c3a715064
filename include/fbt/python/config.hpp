// fbt/python/config.hpp: fbt.ModelConfig, the model configuration (model/config.hpp) as a Python class
// (docs/python.md). Every field of the C++ config is an attribute of the same name; from_dict/to_dict go
// through the library's JSON reader and writer (io/config_json.hpp), so a dict is checked exactly as a
// config file or a checkpoint's metadata is, and a refusal is a ValueError naming the field.
#pragma once

#include <cmath>
#include <functional>
#include <string>

#include <nanobind/stl/vector.h>

#include "../io/config_json.hpp"
#include "common.hpp"

namespace fbt {
namespace python {

/// nlohmann::json <-> a Python object (dict, list, scalars), through the json module.
inline nb::object json_to_py(const nlohmann::json& j) { return nb::module_::import_("json").attr("loads")(j.dump()); }
/// A dict's non-finite reals are refused by name first (JSON has no nan or inf); numpy scalars are the numbers
/// they hold (plain_number).
inline nlohmann::json py_to_json(nb::handle o, const std::string& arg) {
  // non-finite reals anywhere in nested dicts and lists, named by their path (fuser_options.alpha)
  std::function<void(nb::handle, const std::string&)> finite = [&](nb::handle v, const std::string& path) {
    nb::object x = plain_number(v);
    if (nb::isinstance<nb::float_>(x) && !std::isfinite(nb::cast<double>(x)))
      value_error(arg + ": field \"" + path + "\" must be a finite number, got " + nb::cast<std::string>(nb::repr(v)));
    if (nb::isinstance<nb::dict>(x))
      for (auto kv : nb::borrow<nb::dict>(x)) finite(kv.second, (path.empty() ? "" : path + ".") + nb::cast<std::string>(nb::str(kv.first)));
    else if (nb::isinstance<nb::list>(x) || nb::isinstance<nb::tuple>(x)) {
      std::size_t i = 0;
      for (nb::handle e : x) finite(e, path + "[" + std::to_string(i++) + "]");
    }
  };
  finite(o, "");
  nb::object s;
  try {
    s = nb::module_::import_("json").attr("dumps")(o, "allow_nan"_a = false, "default"_a = nb::cpp_function(json_number));
  } catch (nb::python_error& e) {  // the exception's own message, not what() (which carries Python's traceback)
    const std::string msg = nb::cast<std::string>(nb::str(e.value()));
    type_error(arg + ": not representable as JSON (" + fbt::detail::excerpt(msg, 200) + ")");
  }
  return nlohmann::json::parse(nb::cast<std::string>(s));
}

/// \brief A config from a dict of fields: the defaults (ModelConfig{}) with the dict's fields over them, read by
/// config_from_json (unknown keys, wrong types and every rule of validate() refused: fbt::Error -> ValueError).
/// A Hugging Face Qwen3 config.json's dict (model_type "qwen3") is read as such, without fbt's defaults.
inline ModelConfig config_from_dict(nb::handle d) {
  if (!nb::isinstance<nb::dict>(d)) type_error("ModelConfig.from_dict: expected a dict, got " + py_type_name(d));
  const nlohmann::json given = py_to_json(d, "ModelConfig.from_dict");
  nlohmann::json j = given;
  if (!(given.contains("model_type") && given["model_type"] == "qwen3")) {
    j = to_json(ModelConfig{});
    j["head_dim"] = nullptr;  // hidden_size / num_attention_heads unless given
    for (auto it = given.begin(); it != given.end(); ++it) j[it.key()] = it.value();
  }
  return config_from_json(j, "ModelConfig");
}

inline void bind_config(nb::module_& m) {
  if (nb::type<ModelConfig>().is_valid()) {  // bound by another fbt module (fbt._fbt or a user's): one class for both
    m.attr("ModelConfig") = nb::type<ModelConfig>();
    return;
  }
  nb::class_<ModelConfig> c(m, "ModelConfig",
                            "The model configuration: Hugging Face Qwen3 field names plus the feedback knobs (docs/spec.md sections 1-2, 9).\n\n"
                            "ModelConfig(**fields) starts from the defaults (a 4-layer byte-level model, fuser glu) and sets the given fields;\n"
                            "an unknown field, a value of the wrong type or one validate() refuses is a ValueError naming the field.");
  c.def("__init__", [](ModelConfig* self, const nb::kwargs& kw) { new (self) ModelConfig(config_from_dict(kw)); },
        "Defaults with the given fields set (keyword arguments named as the fields).");
  c.def_static("from_dict", [](const nb::dict& d) { return config_from_dict(d); }, "d"_a,
               "A config from a dict of fields (a to_dict() result, a config.json's contents or a Hugging Face Qwen3 config.json's).");
  c.def("to_dict", [](const ModelConfig& self) { return json_to_py(to_json(self)); },
        "Every field as a dict (the JSON a checkpoint records: head_dim resolved).");
  c.def("validate", [](const ModelConfig& self) { self.validate(); }, "Raises ValueError naming the first field that breaks a rule.");
  c.def("parameter_count", &ModelConfig::parameter_count, "Parameters of the built-in layers for this config.");
  c.def("copy", [](const ModelConfig& self) { return ModelConfig(self); });
  c.def("__copy__", [](const ModelConfig& self) { return ModelConfig(self); });
  c.def("__deepcopy__", [](const ModelConfig& self, nb::handle) { return ModelConfig(self); }, "memo"_a);
  c.def(
      "__eq__",
      [](const ModelConfig& a, nb::handle b) {  // any object (mypy: object.__eq__'s signature); another type is unequal
        ModelConfig* o = nullptr;
        return nb::try_cast<ModelConfig*>(b, o) && o != nullptr && to_json(a) == to_json(*o);
      },
      nb::is_operator(), nb::sig("def __eq__(self, other: object, /) -> bool"));
  c.def("__repr__", [](const ModelConfig& self) { return "fbt.ModelConfig(" + to_json(self).dump() + ")"; });
  c.def("__getstate__", [](const ModelConfig& self) { return to_json(self).dump(); });
  c.def("__setstate__", [](ModelConfig& self, const std::string& s) { new (&self) ModelConfig(config_from_json(nlohmann::json::parse(s), "ModelConfig")); });
  // the fields (model/config.hpp), in its order
  c.def_rw("vocab_size", &ModelConfig::vocab_size)
      .def_rw("hidden_size", &ModelConfig::hidden_size)
      .def_rw("num_hidden_layers", &ModelConfig::num_hidden_layers)
      .def_rw("num_attention_heads", &ModelConfig::num_attention_heads)
      .def_rw("num_key_value_heads", &ModelConfig::num_key_value_heads)
      .def_rw("head_dim", &ModelConfig::head_dim, "0 = hidden_size / num_attention_heads")
      .def_rw("intermediate_size", &ModelConfig::intermediate_size)
      .def_rw("max_position_embeddings", &ModelConfig::max_position_embeddings)
      .def_rw("rope_theta", &ModelConfig::rope_theta)
      .def_rw("rms_norm_eps", &ModelConfig::rms_norm_eps)
      .def_rw("tie_word_embeddings", &ModelConfig::tie_word_embeddings)
      .def_rw("qk_norm", &ModelConfig::qk_norm)
      .def_rw("initializer_range", &ModelConfig::initializer_range)
      .def_rw("z_loss", &ModelConfig::z_loss)
      .def_rw("doc_attention", &ModelConfig::doc_attention)
      .def_rw("layer_intermediate_size", &ModelConfig::layer_intermediate_size)
      .def_rw("layer_num_attention_heads", &ModelConfig::layer_num_attention_heads)
      .def_rw("layer_num_key_value_heads", &ModelConfig::layer_num_key_value_heads)
      .def_rw("sliding_window", &ModelConfig::sliding_window)
      .def_rw("layer_types", &ModelConfig::layer_types)
      .def_rw("fuser", &ModelConfig::fuser)
      .def_prop_rw(
          "fuser_options", [](const ModelConfig& s) { return json_to_py(options_to_json(s.fuser_options)); },
          [](ModelConfig& s, nb::handle d) { s.fuser_options = options_from_json(py_to_json(d, "fuser_options"), "fuser_options", "ModelConfig"); },
          "The fuser's own options, a dict (e.g. {\"rank\": 8})")
      .def_rw("block", &ModelConfig::block)
      .def_prop_rw(
          "block_options", [](const ModelConfig& s) { return json_to_py(options_to_json(s.block_options)); },
          [](ModelConfig& s, nb::handle d) { s.block_options = options_from_json(py_to_json(d, "block_options"), "block_options", "ModelConfig"); },
          "The block type's own options, a dict")
      .def_rw("layer_blocks", &ModelConfig::layer_blocks)
      .def_rw("feedback_source", &ModelConfig::feedback_source)
      .def_rw("feedback_layer", &ModelConfig::feedback_layer)
      .def_rw("input_norm", &ModelConfig::input_norm)
      .def_rw("gate_norm", &ModelConfig::gate_norm)
      .def_rw("in_norm_init", &ModelConfig::in_norm_init)
      .def_rw("block_norm", &ModelConfig::block_norm)
      .def_rw("glu_init", &ModelConfig::glu_init)
      .def_rw("gated_add_alpha", &ModelConfig::gated_add_alpha)
      .def_prop_ro("feedback", &ModelConfig::feedback, "True unless fuser is \"none\"");
}

/// A `config` argument: a ModelConfig or a dict of fields.
inline ModelConfig config_arg(nb::handle o) {
  ModelConfig c;
  if (nb::try_cast(o, c)) return c;
  if (nb::isinstance<nb::dict>(o)) return config_from_dict(o);
  type_error("config: expected an fbt.ModelConfig or a dict of its fields, got " + py_type_name(o));
}

}  // namespace python
}  // namespace fbt
