// fbt/cli/run_command.hpp: `fbt <command> ...`, every subcommand, over the pieces this program knows (the
// registries, model/pieces.hpp): the loop compiled once. fbt::cli_main (fbt/cli.hpp) registers a program's own
// pieces and calls it. A program that links fbt::runtime (FBT_COMPILED_RUNTIME) gets run_command compiled there
// (src/runtime.cpp) and does not include this file; a program of headers only compiles it itself.
#pragma once

#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>

#include "../plugins.hpp"
#include "decode.hpp"
#include "demo.hpp"
#include "grid.hpp"
#include "probe.hpp"
#include "train.hpp"

// inline in a program of headers only; an ordinary function in the one file that compiles it into fbt::runtime
#if defined(FBT_BUILDING_RUNTIME)
#define FBT_RUNTIME_FN
#else
#define FBT_RUNTIME_FN inline
#endif

namespace fbt {

namespace cli {
/// `fbt <command> ...` with the pieces this program knows (the registries; the commands' code is in fbt/cli/).
FBT_RUNTIME_FN int run_command(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::printf("%s", kUsage);
    return argc < 2 ? 1 : 0;
  }
  const std::string cmd = argv[1];
  CommandState st;  // the command's own state: progress lines started, its memory estimate, MPI
  try {
    // --plugin FILE (any command, repeatable): its pieces join this program's before anything reads a config
    std::vector<char*> rest{argv[0], argv[1]};
    for (int i = 2; i < argc; ++i) {
      const std::string s = argv[i];
      if (s == "--plugin" || s.rfind("--plugin=", 0) == 0) {
        const bool eq = s != "--plugin";
        if (!eq && i + 1 >= argc) throw Error("--plugin: expected a file after it (a plugin built with fbt_add_plugin, e.g. ./liblowrank.so)");
        load_plugin(eq ? s.substr(9) : std::string(argv[++i]));
        continue;
      }
      rest.push_back(argv[i]);
    }
    Args a = cli::parse_args(int(rest.size()), rest.data(), 2, cmd == "ablate" ? std::vector<std::string>{"vary"} : std::vector<std::string>{});
    if (cmd == "train") return cmd_train(st, a);
    if (cmd == "eval") return cmd_eval(st, a);
    if (cmd == "sample") return cmd_sample(st, a);
    if (cmd == "demo") return cmd_demo(st, a);
    if (cmd == "ablate") return cmd_ablate(st, a);
    if (cmd == "logits") return cmd_logits(st, a);
    if (cmd == "export") return cmd_export(st, a);
    if (cmd == "probe") return cmd_probe(st, a);
    std::fprintf(stderr, "fbt: unknown command \"%s\"\n\n%s", cli::one_line(cmd).c_str(), kUsage);
    return 1;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (dynamic_cast<const std::bad_alloc*>(&e))  // one line naming the command and what it was estimated to need
      msg = "out of memory (std::bad_alloc)" + (st.memory_estimate.empty() ? std::string() : "; its estimate before it started was " + st.memory_estimate) +
            "; lower the command's sizes, or give it more memory";
#if defined(FBT_HAVE_MPI)
    if (st.ranks() > 1) {  // every rank stops: the others may be waiting in a collective
      // printed once: by rank 0 when it failed too (an option every rank refuses, or a collective's error,
      // which names the failing rank), else by the failing rank after rank 0 has had time to say it
      if (st.rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
      std::fprintf(stderr, "%sfbt %s (rank %d of %d): error: %s\n", st.progress_started ? "\n" : "", cli::one_line(cmd).c_str(), st.rank(),
                   st.ranks(), cli::one_line(msg).c_str());
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
    std::fprintf(stderr, "%sfbt %s: error: %s\n", st.progress_started ? "\n" : "", cli::one_line(cmd).c_str(), cli::one_line(msg).c_str());
    return 1;
  }
}
}  // namespace cli

}  // namespace fbt
