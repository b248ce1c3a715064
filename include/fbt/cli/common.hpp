// fbt/cli/common.hpp: what the `fbt` subcommands share beyond option parsing (cli/args.hpp): the usage
// text, the progress flag that puts an error on a line of its own, and MPI for --distributed mpi.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#if defined(FBT_HOST_DEVICE)
#include "../check/host_backend.hpp"
#endif
#include "../train/trainer.hpp"
#if defined(__CUDACC__)  // the command compiled by nvcc (target fbt_cuda): --device cuda
#include "../cuda/backend.cuh"
#endif

namespace fbt {
namespace cli {


/// \brief What one `fbt` command keeps while it runs, owned by run_command and passed to the command (no
/// global state): whether it has started printing live progress lines (from then on an error starts on a
/// line of its own; refusals before that are exactly one line on stderr), its memory estimate (named when it
/// still runs out of memory, std::bad_alloc) and, with --distributed mpi, the MPI session and MPI_COMM_WORLD
/// (started on first use, finalised when the command returns).
struct CommandState {
  bool progress_started = false;
  std::string memory_estimate;  ///< "1.2 GB (parameters ..., KV cache ...)": what the command was estimated to need
#if defined(FBT_HAVE_MPI)
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<MpiComm> comm;
#endif
  /// The ranks of MPI_COMM_WORLD when MPI was started, else 1 (rank: 0).
  int ranks() const {
#if defined(FBT_HAVE_MPI)
    if (comm) return comm->size();
#endif
    return 1;
  }
  int rank() const {
#if defined(FBT_HAVE_MPI)
    if (comm) return comm->rank();
#endif
    return 0;
  }
};

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
    "  export   a checkpoint as a Hugging Face directory (Qwen3ForCausalLM: config.json + model.safetensors)\n"
    "  probe    linear probes per prefill mode and depth of a checkpoint on probe items or the paper's probing tasks\n\n"
    "fbt <command> --help lists the command's options. Every command takes --plugin FILE (repeatable): a shared object\n"
    "of your own fusers, blocks, policies or optimizers, built with fbt_add_plugin (docs/api.md, \"your own piece in a plugin\").\n";

// ----------------------------------------------------------------------------------------- memory

/// What a command needs at least, from its options and the model's config, before any weight is read.
struct CommandMemory {
  double params = 0;       ///< the weights (fp32)
  double kv_cache = 0;     ///< the decoders' K/V caches: every sequence's capacity x every layer's K and V
  double logits = 0;       ///< logits kept or written (sample: a row per sequence; logits: K x T x V)
  double activations = 0;  ///< the forward workspace: the logits and four D-wide tensors per layer, per position and pass
  double data = 0;         ///< a text file's bytes, documents and tokens (7 bytes per byte); a token file is mapped: 0
  double total() const { return params + kv_cache + logits + activations + data; }
  std::string breakdown() const {
    std::string b = "weights " + detail::fmt_bytes(params);
    if (kv_cache > 0) b += ", KV cache " + detail::fmt_bytes(kv_cache);
    if (logits > 0) b += ", logits " + detail::fmt_bytes(logits);
    if (activations > 0) b += ", activations " + detail::fmt_bytes(activations);
    if (data > 0) b += ", data " + detail::fmt_bytes(data);
    return b;
  }
};

/// Floats of one sequence's KV cache of `capacity` positions: keys and values of every layer, a sliding layer
/// holding only min(capacity, W) rows (its ring, decode/decoder.hpp), so a windowed model's estimate is its own.
inline double kv_cache_floats(const ModelConfig& c, long long capacity) {
  double n = 0;
  for (int l = 0; l < std::max(0, c.num_hidden_layers); ++l) {
    const int nkv = std::size_t(l) < c.layer_num_key_value_heads.size() ? c.layer_num_key_value_heads[l] : c.num_key_value_heads;
    const int W = std::size_t(l) < c.layer_types.size() ? c.layer_window(l) : 0;
    const double rows = W > 0 ? double(std::min<long long>(capacity, W)) : double(capacity);
    n += 2.0 * std::max(0, nkv) * std::max(0, c.num_attention_heads > 0 ? c.hs() : 0) * rows;
  }
  return n;
}
/// Floats of one position's forward workspace in one pass (the lower bound estimate_train_memory uses).
inline double forward_floats_per_position(const ModelConfig& c) {
  return double(std::max(0, c.vocab_size)) + 4.0 * std::max(0, c.hidden_size) * std::max(0, c.num_hidden_layers);
}

/// \brief `fbt sample`: n sequences of `capacity` positions (prompt + new tokens), a prefill of
/// `prompt` tokens in `passes` passes.
inline CommandMemory sample_memory(const ModelConfig& c, int n, long long prompt, long long capacity, int passes) {
  CommandMemory m;
  m.params = detail::estimate_param_count(c) * sizeof(float);
  m.kv_cache = double(n) * kv_cache_floats(c, capacity) * sizeof(float);
  m.logits = 2.0 * n * std::max(0, c.vocab_size) * sizeof(float);
  m.activations = double(std::max(passes, 1)) * double(prompt) * forward_floats_per_position(c) * sizeof(float);
  return m;
}
/// \brief `fbt logits`: K passes over T tokens, their (K, T, V) logits kept and written.
inline CommandMemory logits_memory(const ModelConfig& c, int K, long long T) {
  CommandMemory m;
  m.params = detail::estimate_param_count(c) * sizeof(float);
  m.logits = double(K) * double(T) * std::max(0, c.vocab_size) * sizeof(float);
  m.activations = double(K) * double(T) * forward_floats_per_position(c) * sizeof(float);
  return m;
}
/// \brief `fbt eval`: 8 windows of seq_len at a time in K passes, a sequential decoder over one window, the data.
inline CommandMemory eval_memory(const TrainConfig& c, const ModelConfig& mc, int K) {
  CommandMemory m;
  m.params = detail::estimate_param_count(mc) * sizeof(float);
  m.kv_cache = kv_cache_floats(mc, c.seq_len) * sizeof(float);
  m.activations = 8.0 * K * double(c.seq_len) * forward_floats_per_position(mc) * sizeof(float);
  TrainConfig d = c;
  d.model = mc, d.batch_size = 0;
  m.data = estimate_train_memory(d).data;
  return m;
}

/// \brief Refuses the command `cmd` (fbt::Error naming the estimate, its parts and the limit) when its
/// estimate exceeds --max_memory_gb, else MemAvailable (check_memory); records the estimate for run_command's
/// out-of-memory line (CommandState::memory_estimate).
inline void check_command_memory(CommandState& st, const char* cmd, const CommandMemory& m, double max_memory_gb, const std::string& hint) {
  st.memory_estimate = detail::fmt_bytes(m.total()) + " (" + m.breakdown() + ")";
  check_memory(std::string("fbt ") + cmd, m.total(), m.breakdown(), max_memory_gb, hint);
}
/// --max_memory_gb of sample, eval, logits: GB (1e9 bytes) the command may use, 0 = MemAvailable.
inline double max_memory_option(Args& a) {
  return real_option("max_memory_gb", take(a, "max_memory_gb", "0"), 0, false, HUGE_VAL, true, "GB; 0 = the available memory");
}

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
/// The communicator of MPI_COMM_WORLD (MPI initialised on first use, held by the command's state); refused,
/// saying how to get MPI, in a build without it.
inline Communicator& mpi_world(CommandState& st, const char* cmd) {
#if defined(FBT_HAVE_MPI)
  (void)cmd;
  if (!st.mpi) st.mpi = std::make_unique<MpiSession>(nullptr, nullptr), st.comm = std::make_unique<MpiComm>();
  return *st.comm;
#else
  (void)st;
  throw Error(std::string("--distributed mpi: this fbt was built without MPI; install it (Debian: apt-get install libopenmpi-dev openmpi-bin, "
              "or scripts/setup.sh), rebuild, and start the run with mpirun -np N fbt ") + cmd + " ... --distributed mpi");
#endif
}
template <class Tr> void attach_distributed(CommandState& st, Tr& t, const std::string& mode) {
  if (mode == "mpi") t.set_communicator(mpi_world(st, "train"));
}

/// A backend type as a value (with_device's argument).
template <class Be> struct BackendTag {
  using type = Be;
};
/// \brief Calls f(BackendTag<Be>{}) for the backend --device names: cpu (CpuBackend<float>: threads, MPI,
/// bf16), host (check::HostBackend, the CUDA backend's host stand-in: the GPU path checked without a GPU;
/// only in a command compiled with FBT_HOST_DEVICE, the test build's: a production command does not carry a
/// third copy of the loop for a check) or cuda (CudaBackend; only in the command compiled by nvcc, fbt_cuda).
/// Refuses any other name, and host or cuda in a build without it, saying how to get it.
template <class F> void with_device(const std::string& device, F&& f) {
  if (device == "cpu") return f(BackendTag<CpuBackend<float>>{});
#if defined(FBT_HOST_DEVICE)
  if (device == "host") return f(BackendTag<check::HostBackend>{});
#else
  if (device == "host")
    throw Error("--device host: the CUDA backend's host stand-in (a check of the GPU path without a GPU) is not in this fbt command; "
                "configure fbt with -DFBT_HOST_DEVICE=ON (scripts/test.sh does) and rebuild");
#endif
#if defined(__CUDACC__)
  if (device == "cuda") return f(BackendTag<cuda::CudaBackend>{});
#else
  if (device == "cuda")
    throw Error("--device cuda: this fbt command was compiled without CUDA; configure fbt where nvcc is installed (FBT_WITH_CUDA, "
                "on by default) and build the target fbt_cuda (build/tools/fbt_cuda), the same command with the GPU");
#endif
  throw Error("--device " + detail::quote_value(device) + ": expected cpu, cuda (a GPU) or host (the CUDA backend's host stand-in, for checks)");
}

/// \brief Calls f(be, weights, decoder) with a model's weights on the backend Be: the host model's own on
/// the CPU, uploaded into a BackendModel elsewhere (eval and sample --device).
template <class Be, class M, class F> void on_backend(M& m, int sep, F&& f) {
  if constexpr (std::is_same<Be, CpuBackend<typename M::Scalar>>::value) {
    Be be;
    Decoder<M> dec(m, sep);
    f(be, m.weights(), dec);
  } else {
    BackendModel<M, Be> dm(m);
    Decoder<M, Be> dec(dm, sep);
    f(dm.backend(), dm.weights(), dec);
  }
}
/// --device's refusals for a command whose CPU-only options were given (precision bf16, ...).
inline void cpu_only(const std::string& device, bool given, const std::string& what) {
  if (device != "cpu" && given) throw Error(what + " runs on the CPU backend only (not with --device " + device + ")");
}

/// \brief The number of processes an MPI launcher started this one among (mpirun / mpiexec of Open MPI,
/// MPICH, Intel MPI, MVAPICH set these in every rank's environment), 1 when none did.
inline long launcher_world_size() {
  for (const char* k : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    const char* v = std::getenv(k);
    char* end = nullptr;
    const long n = v && *v ? std::strtol(v, &end, 10) : 0;
    if (n > 1 && end && *end == '\0') return n;
  }
  return 1;
}

/// \brief Refuses, at once and the same on every rank, a command started by an MPI launcher with several ranks
/// but without --distributed mpi: each rank would run the whole job alone and write the same files.
inline void refuse_ranks_without_mpi(const std::string& command, const std::string& mode) {
  const long n = launcher_world_size();
  if (n > 1 && mode != "mpi")
    throw Error("fbt " + command + ": started by an MPI launcher with " + std::to_string(n) + " ranks but without --distributed mpi: every rank would run " +
                "the whole job alone on the same out_dir; add --distributed mpi (or start one process)");
}

/// \brief The run directory of `fbt train`, checked, created and locked (prepare_out_dir, lock_run_dir)
/// before the data and the model are set up; with --distributed mpi (the flag's, else `mode`) by rank 0
/// alone (null elsewhere).
inline std::shared_ptr<RunDirLock> lock_out_dir(CommandState& st, const std::string& dir, const Args& flags, std::string mode) {
  for (const auto& kv : flags)
    if (kv.first == "distributed") mode = kv.second;
  refuse_ranks_without_mpi("train", mode);  // before anything is written
  if (mode != "mpi") {
    prepare_out_dir(dir);
    return lock_run_dir(dir);
  }
  Communicator& comm = mpi_world(st, "train");
  std::shared_ptr<RunDirLock> lock;
  std::string err;
  if (comm.rank() == 0) {
    try {
      prepare_out_dir(dir);
      lock = lock_run_dir(dir);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  comm.agree(err.empty(), err);  // every rank stops, with rank 0's message, when rank 0 cannot hold the directory
  return lock;
}

}  // namespace cli
}  // namespace fbt
