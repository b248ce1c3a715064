// fbt/cli.hpp: the `fbt` command as a library function, so a researcher's own types get every subcommand.
//
//   #include "fbt/cli.hpp"
//   #include "my_pieces.hpp"   // LowRankFuser<T>, GatedBlock<T>, MyPolicy, MyOptimizer
//   int main(int argc, char** argv) {
//     return fbt::cli_main<LowRankFuser<float>, GatedBlock<float>, MyPolicy, MyOptimizer>(argc, argv);
//   }
//
// cli_main<Extra...> runs `fbt train | eval | sample | logits | ablate | demo | export` with each Extra
// added to the library's own pieces, by the contract it meets:
//   a fuser     (layers/fuser.hpp: built from FuserArgs)        a value of --fuser, its options --fuser.NAME
//   a block     (layers/contract.hpp: built from LayerSpec)      a value of --block, its options --block.NAME
//   a policy    (decode/policy.hpp: built from a string)         a value of --mode (sample, eval of tasks)
//   an optimizer (train/optimizer.hpp: built from OptimizerArgs) a value of --optimizer, options --optimizer.NAME
// in configs, grids (--vary fuser=glu|lowrank --vary fuser.rank=4|8) and checkpoints alike. The built-in
// types go through the same path: the `fbt` binary is cli_main<>() (tools/fbt.cpp). Each Extra is registered by
// name (model/pieces.hpp, decode/policy.hpp, train/optimizer.hpp) and the commands, compiled once for every piece,
// look it up: a program that links fbt::runtime compiles here only its pieces' adapters (cli/run_command.hpp).
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>

#include "plugins.hpp"
#if defined(FBT_COMPILED_RUNTIME) && !defined(FBT_BUILDING_RUNTIME)
namespace fbt::cli {
/// `fbt <command> ...` over the pieces this program knows: compiled once, in fbt::runtime (src/runtime.cpp).
int run_command(int argc, char** argv);
}  // namespace fbt::cli
#else
#include "cli/run_command.hpp"
#endif

namespace fbt {

namespace detail {
template <class X, class = void> struct is_fuser_type : std::false_type {};
template <class X>
struct is_fuser_type<X, std::void_t<typename X::Scalar, typename X::Cache, decltype(X::name)>> : std::is_constructible<X, const FuserArgs&> {};
template <class X, class = void> struct is_block_type : std::false_type {};
template <class X>
struct is_block_type<X, std::void_t<typename X::Scalar, typename X::Cache, decltype(X::name)>> : std::is_constructible<X, const LayerSpec&> {};
template <class X, class = void> struct is_policy_type : std::false_type {};
template <class X>
struct is_policy_type<X, std::void_t<decltype(X::name), decltype(std::declval<const X&>().prefill_passes()),
                                     decltype(std::declval<const X&>().feed(std::declval<const PolicyStep&>()))>>
    : std::is_constructible<X, const std::string&> {};
template <class X> struct is_optimizer_type : std::is_constructible<X, const OptimizerArgs&> {};

template <class X> constexpr bool is_some_piece() {
  return is_fuser_type<X>::value || is_block_type<X>::value || is_policy_type<X>::value || is_optimizer_type<X>::value;
}
}  // namespace detail

/// \brief Every subcommand of `fbt`, with the fusers, blocks, decoding policies and optimizers Extra...
/// added to the library's own. Returns the process exit status (0, or 1 after one line on stderr).
template <class... Extra> int cli_main(int argc, char** argv) {
  static_assert((detail::is_some_piece<Extra>() && ...),
                "fbt::cli_main<Extra...>: each Extra must be a fuser (constructible from fbt::FuserArgs, with Scalar, Cache and name), a block "
                "(constructible from fbt::LayerSpec, with Scalar, Cache and name), a decoding policy (constructible from std::string, with name, "
                "prefill_passes() and feed(PolicyStep)) or an optimizer (constructible from fbt::OptimizerArgs)");
  try {
    // every piece is registered by name: the commands are compiled once, for every piece
    (
        [] {
          if constexpr (detail::is_fuser_type<Extra>::value) register_fuser<Extra>();
          if constexpr (detail::is_block_type<Extra>::value) register_block<Extra>();
          if constexpr (detail::is_policy_type<Extra>::value) register_policy<Extra>();
          if constexpr (detail::is_optimizer_type<Extra>::value && !detail::is_fuser_type<Extra>::value && !detail::is_block_type<Extra>::value)
            register_optimizer<Extra>();
        }(),
        ...);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fbt: error: %s\n", detail::excerpt(e.what(), 4096).c_str());
    return 1;
  }
  return cli::run_command(argc, argv);
}

}  // namespace fbt
