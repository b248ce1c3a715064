// fbt/plugin.hpp: what a plugin's source file includes: a researcher's own pieces in a shared object that
// the stock `fbt` command (`--plugin FILE`) and `import fbt` (fbt.load_plugin) load, without rebuilding fbt.
//
//   // lowrank.cpp                                         # CMakeLists.txt (find_package(fbt) first)
//   #include "fbt/plugin.hpp"                              fbt_add_plugin(lowrank lowrank.cpp)
//   template <class T> struct LowRankFuser { ... };        # -> liblowrank.so
//   FBT_REGISTER_FUSER(LowRankFuser);                      # fbt train --plugin ./liblowrank.so --fuser lowrank
//
// The macros (FBT_REGISTER_FUSER, FBT_REGISTER_BLOCK for a template over the scalar type; FBT_REGISTER_POLICY,
// FBT_REGISTER_OPTIMIZER for a type) queue the plugin's pieces when it is loaded; the entry point below runs
// that queue on the loading program's registries, once its ABI tag matched (fbt/plugins.hpp). The piece's code
// is compiled here, once, against the erased interfaces (AnyBackend<T>, layers/any_piece.hpp): a plugin needs
// no part of the library compiled into it but its own pieces, and runs on every backend the program has.
// Build it with hidden visibility (fbt_add_plugin does): the plugin's own copies of fbt's inline functions then
// stay its own, and only the two entry points are exported.
#pragma once

#include <cstring>
#include <exception>

#include "plugins.hpp"

#if defined(__GNUC__)
#define FBT_PLUGIN_EXPORT __attribute__((visibility("default"), used))
#else
#define FBT_PLUGIN_EXPORT
#endif

namespace fbt {
namespace detail {
/// Runs this plugin's queued registrations of registry type R on the program's registry (host).
template <class R> void register_into(void* host) {
  std::size_t from = 0;
  run_queued(*static_cast<R*>(host), from);
}
}  // namespace detail
}  // namespace fbt

/// The plugin's ABI tag: what the loading program compares with its own before it runs anything here.
extern "C" FBT_PLUGIN_EXPORT inline const char* fbt_plugin_abi() {
  static const std::string tag = fbt::plugin_abi_tag();
  return tag.c_str();
}

/// Registers the plugin's pieces into the program's registries (host, in fbt::detail::PluginTable's order).
/// Returns 0, or 1 with the reason in err.
extern "C" FBT_PLUGIN_EXPORT inline int fbt_plugin_register(void* const* host, int n, char* err, int err_len) {
  namespace d = fbt::detail;
  try {
    if (n != d::kPluginTables) throw fbt::Error("the program passed " + std::to_string(n) + " registries, expected " + std::to_string(int(d::kPluginTables)));
    d::register_into<fbt::FuserRegistry<float>>(host[d::kFusersFloat]);
    d::register_into<fbt::FuserRegistry<double>>(host[d::kFusersDouble]);
    d::register_into<fbt::BlockRegistry<float>>(host[d::kBlocksFloat]);
    d::register_into<fbt::BlockRegistry<double>>(host[d::kBlocksDouble]);
    d::register_into<fbt::PolicyRegistry>(host[d::kPolicies]);
    d::register_into<fbt::OptimizerRegistry>(host[d::kOptimizers]);
    return 0;
  } catch (const std::exception& e) {
    if (err && err_len > 0) std::strncpy(err, e.what(), std::size_t(err_len) - 1), err[err_len - 1] = 0;
    return 1;
  }
}
