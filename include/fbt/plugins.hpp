// fbt/plugins.hpp: loading a plugin, a shared object of a researcher's own pieces (fusers, blocks, decoding
// policies, optimizers), into a program that was compiled without them: the stock `fbt` command
// (`--plugin FILE`, any subcommand) and `import fbt` (fbt.load_plugin(FILE)).
//
//   const PluginInfo p = fbt::load_plugin("./liblowrank.so");   // p.pieces: "fuser lowrank", ...
//
// A plugin is built from the user's own file with fbt/plugin.hpp included (CMake: fbt_add_plugin(name file.cpp)
// in the installed package, cmake/fbtHelpers.cmake); its FBT_REGISTER_* lines queue its pieces, and its entry
// point runs that queue on this program's registries (model/pieces.hpp, decode/policy.hpp, train/optimizer.hpp).
// Before that the loader compares the plugin's ABI tag with its own (fbt's version, the revision of the
// plugin interface, the C++ library's ABI): a plugin built against another fbt, or that registers no piece for
// the program's scalar type (float), is refused with a message naming the file, never run. Loading the same
// file twice is a no-op; a plugin stays loaded for the life of the process (its code is in the registries).
// A piece's origin (the plugin's file) is kept in its registry, so a checkpoint records which plugins it
// needs (io/checkpoint.hpp) and a program without one says which file to load.
#pragma once

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "decode/policy.hpp"
#include "model/pieces.hpp"
#include "train/optimizer.hpp"

/// The plugin interface's revision: raised whenever AnyBackend, AnyFuser, AnyBlock, the registries or the
/// entry point change layout, so an older plugin is refused instead of crashing.
#ifndef FBT_PLUGIN_ABI_REVISION
#define FBT_PLUGIN_ABI_REVISION 1
#endif

namespace fbt {

/// \brief The tag a plugin and the program that loads it must share: fbt's version, the plugin interface's
/// revision, the C++ standard library's string ABI and the pointer width.
inline std::string plugin_abi_tag() {
#if defined(_GLIBCXX_USE_CXX11_ABI)
  const int cxx11 = _GLIBCXX_USE_CXX11_ABI;
#else
  const int cxx11 = -1;
#endif
  return std::string("fbt ") + FBT_VERSION_STRING + ", plugin interface " + std::to_string(FBT_PLUGIN_ABI_REVISION) + ", libstdc++ cxx11 abi " +
         std::to_string(cxx11) + ", " + std::to_string(8 * sizeof(void*)) + "-bit";
}

namespace detail {
/// The registries a plugin's entry point registers into, in this order (the entry point's `host` array).
enum PluginTable { kFusersFloat, kFusersDouble, kBlocksFloat, kBlocksDouble, kPolicies, kOptimizers, kPluginTables };
using PluginAbiFn = const char* (*)();
using PluginRegisterFn = int (*)(void* const* host, int n, char* err, int err_len);
}  // namespace detail

/// What a loaded plugin added.
struct PluginInfo {
  std::string path;                 ///< the file, as given
  std::string file;                 ///< its file name (what a checkpoint records)
  std::vector<std::string> pieces;  ///< "fuser lowrank", "block gated_attn", "policy soft_first", "optimizer sgdm"
};

namespace detail {
inline std::mutex& plugins_mu() {
  static std::mutex m;
  return m;
}
inline std::map<std::string, PluginInfo>& loaded_plugins() {
  static std::map<std::string, PluginInfo> m;  // by the file's canonical path
  return m;
}
inline std::string file_name_of(const std::string& path) {
  const auto s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}
template <class R> std::vector<std::string> names_of(const R& r) { return r.names(); }
inline std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> r;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) r.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) r.push_back(cur);
  return r;
}
inline std::vector<std::string> added(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  std::vector<std::string> r;
  for (const auto& n : after) {
    bool old = false;
    for (const auto& b : before) old = old || b == n;
    if (!old) r.push_back(n);
  }
  return r;
}
}  // namespace detail

/// \brief Loads the plugin at `path` and registers its pieces into this program (see the file comment).
/// Throws fbt::Error naming the file: not found, not a plugin, another ABI, or its registration failed.
inline PluginInfo load_plugin(const std::string& path) {
  auto fail = [&](const std::string& why) -> PluginInfo { throw Error("plugin '" + detail::excerpt(path, 200) + "': " + why); };
  if (path.empty()) return fail("the file name is empty");
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return fail("no such file (give the shared object a plugin build wrote, e.g. build/liblowrank.so)");
  const std::string canon = real;
  std::free(real);
  std::lock_guard<std::mutex> g(detail::plugins_mu());
  auto known = detail::loaded_plugins().find(canon);
  if (known != detail::loaded_plugins().end()) return known->second;
  // a file name without a slash would be searched on the library path: always open the file itself
  void* h = ::dlopen(canon.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    return fail(std::string("cannot load it (") + detail::excerpt(e ? e : "dlopen failed", 300) + ")");
  }
  auto abi = reinterpret_cast<detail::PluginAbiFn>(::dlsym(h, "fbt_plugin_abi"));
  auto reg = reinterpret_cast<detail::PluginRegisterFn>(::dlsym(h, "fbt_plugin_register"));
  if (!abi || !reg) {
    ::dlclose(h);
    return fail("not an fbt plugin (it has no fbt_plugin_abi / fbt_plugin_register: build it with fbt_add_plugin, or include fbt/plugin.hpp in it)");
  }
  const std::string theirs = abi(), ours = plugin_abi_tag();
  if (theirs != ours) {
    ::dlclose(h);
    return fail("built for another fbt (its ABI tag is \"" + detail::excerpt(theirs, 200) + "\", this program's is \"" + ours +
                "\"): rebuild the plugin against this fbt");
  }
  FuserRegistry<float>& ff = fuser_registry<float>();
  FuserRegistry<double>& fd = fuser_registry<double>();
  BlockRegistry<float>& bf = block_registry<float>();
  BlockRegistry<double>& bd = block_registry<double>();
  PolicyRegistry& pr = PolicyRegistry::global();
  OptimizerRegistry& opt = OptimizerRegistry::global();
  const auto ff0 = ff.names(), fd0 = fd.names(), bf0 = bf.names(), bd0 = bd.names();
  const auto pr0 = detail::split_names(pr.names()), op0 = detail::split_names(opt.names());
  void* host[detail::kPluginTables] = {&ff, &fd, &bf, &bd, &pr, &opt};
  char err[1024] = {0};
  if (reg(host, detail::kPluginTables, err, int(sizeof(err))) != 0)  // stays loaded: what it registered may point into it
    return fail(std::string("its registration failed: ") + err);
  PluginInfo info{path, detail::file_name_of(canon), {}};
  const auto new_ff = detail::added(ff0, ff.names()), new_bf = detail::added(bf0, bf.names());
  const auto new_fd = detail::added(fd0, fd.names()), new_bd = detail::added(bd0, bd.names());
  for (const auto& n : new_ff) ff.set_origin(n, info.file), info.pieces.push_back("fuser " + n);
  for (const auto& n : new_bf) bf.set_origin(n, info.file), info.pieces.push_back("block " + n);
  for (const auto& n : new_fd) fd.set_origin(n, info.file);
  for (const auto& n : new_bd) bd.set_origin(n, info.file);
  for (const auto& n : detail::added(pr0, detail::split_names(pr.names()))) info.pieces.push_back("policy " + n);
  for (const auto& n : detail::added(op0, detail::split_names(opt.names()))) info.pieces.push_back("optimizer " + n);
  if (new_ff.empty() && new_bf.empty() && (!new_fd.empty() || !new_bd.empty()))
    return fail("it registers its pieces for double only, and this program runs in float: register the float type too "
                "(FBT_REGISTER_FUSER / FBT_REGISTER_BLOCK register both)");
  if (info.pieces.empty())
    return fail("it registers no piece this program does not know already (does its file say FBT_REGISTER_FUSER, _BLOCK, _POLICY or "
                "_OPTIMIZER? or is every piece it registers compiled into this program too?)");
  detail::loaded_plugins()[canon] = info;
  return info;
}

/// The plugins this process has loaded.
inline std::vector<PluginInfo> loaded_plugins() {
  std::lock_guard<std::mutex> g(detail::plugins_mu());
  std::vector<PluginInfo> r;
  for (const auto& kv : detail::loaded_plugins()) r.push_back(kv.second);
  return r;
}

}  // namespace fbt
