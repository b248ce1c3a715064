// fbt/python.hpp: fbt's Python API as a nanobind module (docs/python.md): the extension fbt._fbt is
// bind_module(m) (python/src/module.cpp) plus the parts other files of python/src/ add.
//
// The classes are over Model<float>, whose fuser and blocks are erased at their slots (layers/any_piece.hpp):
// every fuser and block this process knows (the registries, model/pieces.hpp) is reachable from Python,
// the library's own and those of a plugin loaded with fbt.load_plugin(FILE) (fbt/plugins.hpp): a researcher's
// piece needs no extension module of its own, only a plugin (docs/python.md, "Your own pieces from Python").
#pragma once

#include "cli.hpp"
#include "python/common.hpp"
#include "python/config.hpp"
#include "python/generate.hpp"
#include "python/model.hpp"

namespace fbt {
namespace python {

/// \brief Binds fbt's Python API into `m`: ModelConfig, Model, Decoder, the tokenizer and the error translation.
inline void bind_module(nb::module_& m) {
  register_error_translator();
  bind_config(m);
  bind_model(m);
  bind_decoder(m);
  bind_tokenizer(m);
}

}  // namespace python
}  // namespace fbt
