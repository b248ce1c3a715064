// fbt/python.hpp: fbt's Python API for a module of one's own (docs/python.md, "Your own pieces from Python").
//
//   #include "fbt/python.hpp"
//   #include "my_fuser.hpp"                      // LowRankFuser<float>, as for fbt::cli_main
//   NB_MODULE(my_fbt, m) { fbt::python::bind_module<LowRankFuser<float>>(m); }
//
// gives the module my_fbt the classes of the built-in fbt._fbt (ModelConfig, Model, Decoder, ...) over the
// library's fusers and blocks plus the Extra ones: Model.load reads a checkpoint of LowRankFuser, Model(config)
// builds one whose config names it. Build it with nanobind_add_module and link fbt::cli (python/CMakeLists.txt
// is an example). The built-in module is bind_module<>() (python/src/module.cpp): one code path for both.
// ModelConfig is one class for every fbt module in a process (a second module reuses the first's); Model and
// Decoder are a class per module (their C++ types differ by the type lists).
#pragma once

#include "cli.hpp"
#include "python/common.hpp"
#include "python/config.hpp"
#include "python/generate.hpp"
#include "python/model.hpp"

namespace fbt {
namespace python {

/// The fusers and blocks a module binds: the library's own plus the Extra ones (as cli_main<Extra...>).
template <class... Extra> struct ModuleTypes {
  using Fusers = typename Concat<BuiltinFusers<float>, typename fbt::detail::FilterTypes<fbt::detail::is_fuser_type, Extra...>::type>::type;
  using Blocks = typename Concat<BuiltinBlocks<float>, typename fbt::detail::FilterTypes<fbt::detail::is_block_type, Extra...>::type>::type;
};

/// \brief Binds fbt's Python API into `m` for the model types of exactly the lists Fusers and Blocks (TypeList,
/// model/builder.hpp): what bind_module does with the library's lists plus the Extra ones. A module that wants
/// fewer types (a smaller, faster-compiling extension) calls it with its own lists.
template <class Fusers, class Blocks> void bind_types(nb::module_& m) {
  register_error_translator();
  bind_config(m);
  bind_model<Fusers, Blocks>(m);
  bind_decoder<Fusers, Blocks>(m);
  bind_tokenizer(m);
}

/// \brief Binds fbt's Python API into `m` for the library's pieces and the Extra fusers and blocks.
template <class... Extra> void bind_module(nb::module_& m) {
  static_assert(((fbt::detail::is_fuser_type<Extra>::value || fbt::detail::is_block_type<Extra>::value) && ...),
                "fbt::python::bind_module<Extra...>: each Extra must be a fuser (constructible from fbt::FuserArgs) or a block "
                "(constructible from fbt::LayerSpec), with Scalar, Cache and name");
  using Types = ModuleTypes<Extra...>;
  bind_types<typename Types::Fusers, typename Types::Blocks>(m);
}

}  // namespace python
}  // namespace fbt
