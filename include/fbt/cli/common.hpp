// fbt/cli/common.hpp: what the `fbt` subcommands share beyond option parsing (cli/args.hpp): the usage
// text, the progress flag that puts an error on a line of its own, and MPI for --distributed mpi.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include <unistd.h>

#include "args.hpp"
#if defined(FBT_HAVE_MPI)
#include "../dist/mpi_comm.hpp"
#endif
#include "../train/trainer.hpp"

namespace fbt {
namespace cli {


/// Set once a command has started printing live progress lines (training, a demo, a grid): from then on
/// an error starts on a line of its own. Refusals before that are exactly one line on stderr.
inline bool g_progress_started = false;

inline const char* kUsage =
    "fbt: full-bandwidth transformers (arXiv:2608.08888) on the CPU\n\n"
    "usage: fbt <command> [--option value ...]\n\n"
    "commands:\n"
    "  train    train a model on a built-in task or a text file (the paper's K-pass schedule)\n"
    "  eval     per-pass and sequential validation losses and the contraction monitor of a checkpoint\n"
    "  sample   generate text from a checkpoint in a decoding mode (standard, soft, fused(k))\n"
    "  demo     train a baseline and a full-bandwidth model on the same tokens and compare them\n"
    "  ablate   a grid of training runs (depth, schedule, fuser, detach, prefix, noise ...), resumable, with a summary CSV\n"
    "  logits   per-pass logits of a checkpoint on a text, as .npy (for cross-checks with other implementations)\n"
    "  export   a checkpoint as a Hugging Face directory (Qwen3ForCausalLM: config.json + model.safetensors)\n\n"
    "fbt <command> --help lists the command's options.\n";

/// s cut at every `sep` (an empty s is one empty piece).
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

// ------------------------------------------------------------------------------------------ train
// --distributed mpi: MPI is initialised for the run (the program is started by mpirun -np N); an error on
// any rank is printed with the rank and ends every rank (MPI_Abort in main), so none is left waiting.
#if defined(FBT_HAVE_MPI)
inline std::unique_ptr<MpiSession> g_mpi;
inline std::unique_ptr<MpiComm> g_comm;
#endif
/// The communicator of MPI_COMM_WORLD (MPI initialised on first use); refused, saying how to get MPI, in a
/// build without it.
inline Communicator& mpi_world(const char* cmd) {
#if defined(FBT_HAVE_MPI)
  (void)cmd;
  if (!g_mpi) g_mpi = std::make_unique<MpiSession>(nullptr, nullptr), g_comm = std::make_unique<MpiComm>();
  return *g_comm;
#else
  throw Error(std::string("--distributed mpi: this fbt was built without MPI; install it (Debian: apt-get install libopenmpi-dev openmpi-bin, "
              "or scripts/setup.sh), rebuild, and start the run with mpirun -np N fbt ") + cmd + " ... --distributed mpi");
#endif
}
template <class Tr> void attach_distributed(Tr& t, const std::string& mode) {
  if (mode == "mpi") t.set_communicator(mpi_world("train"));
}

}  // namespace cli
}  // namespace fbt
