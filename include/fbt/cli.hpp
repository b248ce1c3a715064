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
// types go through the same path: the `fbt` binary is cli_main<>() (tools/fbt.cpp).
#pragma once

#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>
#include <tuple>
#include <type_traits>

#include "cli/decode.hpp"
#include "cli/demo.hpp"
#include "cli/grid.hpp"
#include "cli/probe.hpp"
#include "cli/train.hpp"

namespace fbt {

namespace cli {
/// `fbt <command> ...` over the fuser and block lists (cli_main's; the commands' code is in fbt/cli/).
template <class Fusers, class Blocks> int run_command(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::printf("%s", kUsage);
    return argc < 2 ? 1 : 0;
  }
  const std::string cmd = argv[1];
  try {
    Args a = cli::parse_args(argc, argv, 2, cmd == "ablate" ? std::vector<std::string>{"vary"} : std::vector<std::string>{});
    if (cmd == "train") return cmd_train<Fusers, Blocks>(a);
    if (cmd == "eval") return cmd_eval<Fusers, Blocks>(a);
    if (cmd == "sample") return cmd_sample<Fusers, Blocks>(a);
    if (cmd == "demo") return cmd_demo(a);
    if (cmd == "ablate") return cmd_ablate<Fusers, Blocks>(a);
    if (cmd == "logits") return cmd_logits<Fusers, Blocks>(a);
    if (cmd == "export") return cmd_export<Fusers, Blocks>(a);
    if (cmd == "probe") return cmd_probe<Fusers, Blocks>(a);
    std::fprintf(stderr, "fbt: unknown command \"%s\"\n\n%s", cli::one_line(cmd).c_str(), kUsage);
    return 1;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (dynamic_cast<const std::bad_alloc*>(&e))  // one line naming the command and what it was estimated to need
      msg = "out of memory (std::bad_alloc)" + (g_memory_estimate.empty() ? std::string() : "; its estimate before it started was " + g_memory_estimate) +
            "; lower the command's sizes, or give it more memory";
#if defined(FBT_HAVE_MPI)
    if (g_comm && g_comm->size() > 1) {  // every rank stops: the others may be waiting in a collective
      // printed once: by rank 0 when it failed too (an option every rank refuses, or a collective's error,
      // which names the failing rank), else by the failing rank after rank 0 has had time to say it
      if (g_comm->rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
      std::fprintf(stderr, "%sfbt %s (rank %d of %d): error: %s\n", g_progress_started ? "\n" : "", cli::one_line(cmd).c_str(), g_comm->rank(),
                   g_comm->size(), cli::one_line(msg).c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
#endif
    // under mpirun before MPI was started (an option every rank refuses): rank 0 says it, and mpirun ends
    // the others when it exits
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
      if (const char* r = std::getenv(v)) {
        if (std::strcmp(r, "0") != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
        break;
      }
    std::fprintf(stderr, "%sfbt %s: error: %s\n", g_progress_started ? "\n" : "", cli::one_line(cmd).c_str(), cli::one_line(msg).c_str());
    return 1;
  }
}
}  // namespace cli

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

/// The Extras that meet predicate P, as a TypeList.
template <template <class, class = void> class P, class... X> struct FilterTypes {
  using type = TypeList<>;
};
template <template <class, class = void> class P, class H, class... X> struct FilterTypes<P, H, X...> {
  using rest = typename FilterTypes<P, X...>::type;
  using type = std::conditional_t<P<H>::value, typename Concat<TypeList<H>, rest>::type, rest>;
};

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
  using Fusers = typename Concat<BuiltinFusers<float>, typename detail::FilterTypes<detail::is_fuser_type, Extra...>::type>::type;
  using Blocks = typename Concat<BuiltinBlocks<float>, typename detail::FilterTypes<detail::is_block_type, Extra...>::type>::type;
  try {
    // the run-time choices: policies and optimizers are registered by name
    (
        [] {
          if constexpr (detail::is_policy_type<Extra>::value) register_policy<Extra>();
          if constexpr (detail::is_optimizer_type<Extra>::value && !detail::is_fuser_type<Extra>::value && !detail::is_block_type<Extra>::value)
            register_optimizer<Extra>();
        }(),
        ...);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fbt: error: %s\n", cli::one_line(e.what()).c_str());
    return 1;
  }
  return cli::run_command<Fusers, Blocks>(argc, argv);
}

}  // namespace fbt
