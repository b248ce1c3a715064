// tools/fbt.cpp: the `fbt` command: train, eval, sample and demo (issue 3).
//
//   fbt train  [--config FILE.json] [--resume CKPT_DIR] [--FIELD VALUE ...]
//   fbt eval   --checkpoint CKPT [--data task:NAME|FILE] [--seq_len T] [--windows N] [--seq_windows N] [--monitor K]
//   fbt sample --checkpoint CKPT --prompt TEXT [--mode standard|soft|fused(k)] [--max_new_tokens N] [--temperature X] ...
//   fbt demo   [--task NAME] [--steps N] [--out_dir DIR]
//   fbt ablate [--grid FILE.json] [--vary FIELD=v1|v2 ...] [--seeds 1,2] [--tokens N] [--jobs N] [--FIELD VALUE ...]
//   fbt logits --checkpoint CKPT (--text TEXT | --text_file FILE) [--passes K] --out FILE.npy
// Every error is one line on stderr naming the file, field or value at fault, and exit status 1.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include <unistd.h>

#include "ablate.hpp"
#include "cli.hpp"
#include "fbt/decode/precision_check.hpp"
#if defined(FBT_HAVE_MPI)
#include "fbt/dist/mpi_comm.hpp"
#endif
#include "fbt/io/npy.hpp"
#include "fbt/train/task_eval.hpp"
#include "fbt/train/trainer.hpp"

using namespace fbt;

namespace {

using cli::Args;
using cli::int_option;
using cli::no_leftovers;
using cli::precision_option;
using cli::real_option;
using cli::take;
using cli::wants_help;

/// Set once a command has started printing live progress lines (training, a demo, a grid): from then on
/// an error starts on a line of its own. Refusals before that are exactly one line on stderr.
bool g_progress_started = false;

const char* kUsage =
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
std::vector<std::string> split(const std::string& s, char sep) {
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
std::unique_ptr<MpiSession> g_mpi;
std::unique_ptr<MpiComm> g_comm;
#endif
/// The communicator of MPI_COMM_WORLD (MPI initialised on first use); refused, saying how to get MPI, in a
/// build without it.
Communicator& mpi_world(const char* cmd) {
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

int cmd_train(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt train [--config FILE.json] [--resume CHECKPOINT_DIR] [--FIELD VALUE ...]\n\n"
        "Trains with the multi-pass schedule (spec section 3). The config file is one JSON object with the\n"
        "field names below; flags override it. --preset v1|paper (the flag's, else the file's; default v1)\n"
        "sets the fields listed below first, then the file's and the flags' fields change them. A baseline\n"
        "(--fuser none) trains single-pass. --resume continues a run bit-identically from\n"
        "OUT_DIR/checkpoint (flags then may change only steps, eval/checkpoint cadence, out_dir, progress).\n\n"
        "fields (default):\n");
    const TrainConfig d;
    for (const auto& f : train_config_fields()) std::printf("  --%-24s %s (%s)\n", f.name.c_str(), f.help.c_str(), f.get(d).c_str());
    std::printf("\npresets (the fields each sets):\n");
    for (const auto& [name, fields] : train_presets()) {
      std::string line;
      for (const auto& [f, v] : fields) line += (line.empty() ? "" : ", ") + f + " " + v;
      std::printf("  %-6s %s\n", name.c_str(), line.c_str());
    }
    return 0;
  }
  const std::string resume = take(a, "resume", ""), config = take(a, "config", "");
  if (!resume.empty()) {
    static const char* allowed[] = {"steps",        "eval_every",       "checkpoint_every", "out_dir",     "progress",
                                    "eval_windows", "seq_eval_windows", "monitor_passes",   "max_memory_gb", "distributed",
                                    "dist_check_every", "dist_overlap",     "dist_bucket_mb"};
    for (const auto& kv : a)
      if (std::find_if(std::begin(allowed), std::end(allowed), [&](const char* s) { return kv.first == s; }) == std::end(allowed))
        throw Error("fbt train --resume: --" + detail::excerpt(kv.first) +
                    " would change the run's math; only steps, cadence, output options and max_memory_gb may change");
    with_model<float>(read_train_config(resume).model, [&](auto tag) {
      using M = typename decltype(tag)::type;
      auto t = Trainer<M>::resume(resume, [&](TrainConfig& c) {
        const long before = c.steps;
        for (const auto& kv : a) set_config_field(c, kv.first, kv.second);
        if (c.steps != before)
          std::fprintf(stderr, "note: steps %ld -> %ld also moves the LR schedule and the feedback start (both are set by the run's length)\n",
                       before, c.steps);
      });
      attach_distributed(*t, t->cfg.distributed);
      if (t->communicator().rank() == 0) std::fprintf(stderr, "resumed from %s at step %ld\n", resume.c_str(), t->step);
      g_progress_started = true;
      t->run(stderr);
    });
    return 0;
  }
  // the preset, the checkpoint's stack (--init_from), the config file, the flags; a baseline made single-pass
  TrainConfig c = make_train_config(config, a, [](const std::string& ck) { return cli::checkpoint_config_any_vocab(ck); });
  check_train_memory(c);  // before anything is allocated: a config far too large is refused with its estimate
  validate(c);
  resolve_data_path(c);   // the run's record names its corpus by absolute path (eval works from anywhere)
  with_model<float>(c.model, [&](auto tag) {
    Trainer<typename decltype(tag)::type> t(c);
    attach_distributed(t, c.distributed);
    g_progress_started = true;
    t.run(stderr);
  });
  return 0;
}

// ------------------------------------------------------------------------------------------- eval
int cmd_eval(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt eval --checkpoint CKPT [--data task:NAME|FILE] [--task_difficulty N] [--task_length L] [--task_reveal Q] [--seq_len T] [--windows N]\n"
        "         [--seq_windows N] [--monitor K] [--passes K] [--doc_split blank_line|none] [--val_fraction X]\n"
        "         [--val_data FILE] [--doc_sep_id N] [--token_dtype auto|uint16|uint32|int32|int64]\n"
        "         [--precision fp32|bf16] [--precision_check N]\n\n"
        "The data options and --precision default to those the checkpoint's run was trained with (read from its\n"
        "train_state.safetensors); --windows 0 and --seq_windows -1 evaluate every validation window.\n"
        "--data FILE.bin or FILE.npy is a token file of the model's vocabulary (val_data, doc_sep_id and\n"
        "token_dtype as in fbt train); another FILE is text, read as bytes.\n"
        "Prints the per-pass validation losses (pass k = fused(k-1) prefill at every position), the\n"
        "sequential-exact losses (token by token, standard and soft) and the contraction monitor L(k), delta_k\n"
        "(spec section 6), and beside them the data's optimal loss over the same windows where it is known\n"
        "(the running-state tasks). CKPT is a checkpoint directory or a model.safetensors file.\n"
        "--precision_check N decodes N validation windows token by token in fp32 and in bf16 and prints how often\n"
        "the greedy token is the same (teacher-forced: fed the window's tokens; free-running: 64 new tokens after a\n"
        "16-token prompt), in standard and (with feedback) soft mode: decode/precision_check.hpp.\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", "");
  if (ck.empty()) throw Error("fbt eval: --checkpoint is required");
  TrainConfig c;
  // a checkpoint directory from fbt train records its run: its data settings are the defaults here
  const std::string state = ck + "/train_state.safetensors";
  std::error_code ec;
  if (std::filesystem::is_directory(ck, ec) && std::filesystem::exists(state, ec)) {
    detail::require_regular_file(state, "training state");
    const SafetensorsFile f = read_safetensors(state);
    if (f.metadata.count("train_config")) {
      const std::string where = "training state '" + state + "' (train_config)";
      apply_json(c, detail::parse_json_strict(f.metadata.at("train_config"), where), where);
    }
  }
  const std::string data_opt = take(a, "data", "");
  if (!data_opt.empty()) {
    c.data = data_opt;
    resolve_data_path(c);  // a path given here is relative to the current directory
  } else if (c.data.rfind("task:", 0) != 0 && std::filesystem::path(c.data).is_relative() && !std::filesystem::exists(c.data, ec)) {
    // runs from before data paths were recorded absolute stored them as given
    throw Error("the checkpoint's run recorded its data as the relative path '" + detail::excerpt(c.data, 200) +
                "', which does not exist from this directory; give --data PATH");
  }
  c.task_difficulty = int_option<int>("task_difficulty", take(a, "task_difficulty", std::to_string(c.task_difficulty)), 1,
                                      std::numeric_limits<int>::max());
  c.task_length = int_option<int>("task_length", take(a, "task_length", std::to_string(c.task_length)), 1, kMaxStateTaskLength, "symbols per document");
  c.task_reveal = real_option("task_reveal", take(a, "task_reveal", detail::num(c.task_reveal)), 0, false, 1, false);
  c.doc_split = take(a, "doc_split", c.doc_split);
  c.token_dtype = take(a, "token_dtype", c.token_dtype);
  c.doc_sep_id = int_option<int>("doc_sep_id", take(a, "doc_sep_id", std::to_string(c.doc_sep_id)), -1, std::numeric_limits<int>::max(),
                                 "the document separator id, -1 = none");
  const std::string val_data = take(a, "val_data", c.val_data);
  if (val_data != c.val_data) c.val_data = val_data, resolve_data_path(c);  // a path given here is relative to the current directory
  c.val_fraction = real_option("val_fraction", take(a, "val_fraction", detail::num(c.val_fraction)), 0, false, 1, true);
  c.seq_len = int_option<int>("seq_len", take(a, "seq_len", std::to_string(c.seq_len)), 2, std::numeric_limits<int>::max(), "tokens per window");
  const int windows = int_option<int>("windows", take(a, "windows", "32"), 0, std::numeric_limits<int>::max(), "0 = every validation window");
  const int seq_windows = int_option<int>("seq_windows", take(a, "seq_windows", "2"), -1, std::numeric_limits<int>::max(), "0 = none, -1 = all");
  const int monitor = int_option<int>("monitor", take(a, "monitor", "30"), 0, kMaxPasses, "passes of the contraction monitor, 0 = off");
  const std::string passes = take(a, "passes", "");
  const int K_opt = passes.empty() ? 0 : int_option<int>("passes", passes, 1, kMaxPasses, "passes to evaluate");
  const Precision prec = precision_option(take(a, "precision", c.precision));
  const int check_windows = int_option<int>("precision_check", take(a, "precision_check", "0"), 0, 100000, "windows decoded in fp32 and bf16, 0 = off");
  if (check_windows > 0 && !bf16_available()) throw Error("--precision_check: " + bf16_unavailable_reason());
  no_leftovers(a, "eval");
  const ModelConfig mc = is_token_data(c) ? cli::checkpoint_config_any_vocab(ck) : cli::checkpoint_config(ck);
  c.model.vocab_size = mc.vocab_size;
  validate_data(c);
  if (c.seq_len > mc.max_position_embeddings)
    throw Error("--seq_len " + std::to_string(c.seq_len) + ": exceeds the model's max_position_embeddings (" +
                std::to_string(mc.max_position_embeddings) + ")");
  if (K_opt > 1 && !mc.feedback()) throw Error("--passes " + std::to_string(K_opt) + ": the checkpoint is a baseline (fuser none), which has 1 pass");
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m = load_checkpoint<M>(ck);
    c.model = m.cfg;
    auto data = make_data_source(c);
    const int K = K_opt > 0 ? K_opt : (M::has_feedback ? 3 : 1);
    Workspace<M> w;
    std::printf("checkpoint %s: %zu parameters, fuser %s; data %s%s\n", ck.c_str(), m.params.size(), m.cfg.fuser.c_str(), data->describe().c_str(),
                prec == Precision::bf16 ? "; bf16 products" : "");
    const auto vl = evaluate_passes(m, w, *data, c.seq_len, K, windows);
    for (int k = 0; k < K; ++k) std::printf("  pass %d validation loss %.4f%s\n", k + 1, vl[k], k == 0 ? "  (standard)" : "");
    const int nw = detail::parallel_eval_windows(*data, c.seq_len, windows);
    const double opt = data->mean_optimal_loss(c.seq_len, nw);
    if (!std::isnan(opt)) std::printf("  optimal loss %.4f  (the data's closed form, same %d windows)\n", opt, nw);
    Decoder<M> dec(m, data->doc_sep());
    if (seq_windows != 0) {
      std::printf("  sequential (standard) loss %.4f\n", sequential_loss(dec, *data, c.seq_len, seq_windows, DecodeModeSpec{}));
      if (M::has_feedback)
        std::printf("  sequential (soft) loss %.4f\n", sequential_loss(dec, *data, c.seq_len, seq_windows, DecodeModeSpec::parse("soft")));
      const int ns = detail::sequential_eval_windows(*data, c.seq_len, seq_windows);
      const double sopt = data->mean_optimal_loss(c.seq_len, ns);
      if (!std::isnan(sopt)) std::printf("  optimal loss %.4f  (the same %d windows as the sequential losses)\n", sopt, ns);
    }
    if (check_windows > 0) {
      std::vector<std::vector<int>> wins;
      std::vector<int> tok, tgt;
      std::vector<std::uint8_t> ds;
      const int nw_all = data->num_eval_windows(c.seq_len);
      for (int i = 0; i < std::min(check_windows, nw_all); ++i) {
        data->eval_window(i, c.seq_len, tok, tgt, ds);
        wins.push_back(tok);
      }
      const int prompt = std::min(16, c.seq_len - 1);
      for (const char* mode : {"standard", "soft"}) {
        if (!M::has_feedback && std::string(mode) == "soft") continue;
        const GreedyAgreement g = greedy_agreement(dec, wins, DecodeModeSpec::parse(mode), Precision::fp32, Precision::bf16, prompt, 64);
        long never = 0;
        for (int f : g.first_divergence) never += f < 0;
        std::printf("  bf16 vs fp32 greedy tokens (%s, %zu windows): teacher-forced %ld of %ld the same (%.2f%%); free-running %ld of %ld (%.2f%%), "
                    "%ld of %zu continuations identical\n",
                    mode, wins.size(), g.same, g.positions, 100 * g.rate(), g.generated_same, g.generated, 100 * g.free_rate(), never, wins.size());
      }
    }
    if (M::has_feedback && monitor > 0) {
      std::vector<int> tok, tgt;
      std::vector<std::uint8_t> ds;
      data->eval_window(0, c.seq_len, tok, tgt, ds);
      const auto cc = contraction_monitor(m, w, Batch{1, c.seq_len, tok.data(), tgt.data(), ds.data()}, monitor);
      std::printf("  contraction monitor (k: L(k), delta_k):");
      for (std::size_t k = 0; k < cc.loss.size(); ++k) std::printf("%s %zu: %.4f %.2e", k % 5 ? "," : "\n   ", k + 1, cc.loss[k], cc.delta[k]);
      std::printf("\n");
    }
  });
  return 0;
}

// ----------------------------------------------------------------------------------------- sample
int cmd_sample(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt sample --checkpoint CKPT (--prompt TEXT | --prompt_ids ID,ID,...) [--output text|ids] [--sep_id N]\n"
        "           [--mode standard|soft|fused(k)] [--max_new_tokens N] [--temperature X] [--top_k N] [--top_p X]\n"
        "           [--seed N] [--n N] [--precision fp32|bf16]\n\n"
        "Generates with the KV-cache decoder (spec section 4). CKPT is an fbt checkpoint (directory or\n"
        "model.safetensors) or a Hugging Face directory (config.json + model.safetensors or shards).\n"
        "--prompt is text for byte-level models (vocabulary 257); --prompt_ids gives token ids for a model\n"
        "whose tokenizer is not bytes, and --output ids prints the new tokens as ids (comma-separated).\n"
        "--sep_id: the document separator id (default 256 for a byte-level model, else -1 = none).\n"
        "temperature 0 is greedy. --precision bf16 runs the matrix products with bf16 operands and fp32 sums\n"
        "(default fp32). --n samples several continuations together (batched), each with its own seed\n"
        "(seed, seed+1, ...).\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), prompt = take(a, "prompt", ""), prompt_ids = take(a, "prompt_ids", "");
  const std::string output = take(a, "output", "text"), sep_opt = take(a, "sep_id", "");
  if (ck.empty()) throw Error("fbt sample: --checkpoint is required");
  if (prompt.empty() == prompt_ids.empty()) throw Error("fbt sample: give exactly one of --prompt TEXT and --prompt_ids ID,ID,... (non-empty)");
  if (output != "text" && output != "ids") throw Error("--output " + detail::quote_value(output) + ": expected text or ids");
  GenerateOptions o;
  o.mode = DecodeModeSpec::parse(take(a, "mode", "soft"));
  const int imax = std::numeric_limits<int>::max();
  o.max_new_tokens = int_option<int>("max_new_tokens", take(a, "max_new_tokens", "200"), 1, imax, "tokens to generate");
  o.sampling.temperature = real_option("temperature", take(a, "temperature", "0.8"), 0, false, HUGE_VAL, true, "0 = greedy");
  o.sampling.top_k = int_option<int>("top_k", take(a, "top_k", "0"), 0, imax, "0 = off");
  o.sampling.top_p = real_option("top_p", take(a, "top_p", "1"), 0, true, 1, false, "1 = off");
  o.seed = int_option<std::uint64_t>("seed", take(a, "seed", "1"), 0, std::numeric_limits<std::uint64_t>::max());
  const int n = int_option<int>("n", take(a, "n", "1"), 1, 1024, "samples");
  precision_option(take(a, "precision", "fp32"));
  no_leftovers(a, "sample");
  o.sampling.validate();
  // text in or out needs the byte vocabulary (cli::checkpoint_config refuses another); ids work with any
  const bool bytes = !prompt.empty() || output == "text";
  const ModelConfig mc = bytes ? cli::checkpoint_config(ck) : cli::checkpoint_config_any_vocab(ck);
  const int sep = sep_opt.empty() ? (mc.vocab_size == ByteTokenizer::kVocabSize ? kSep : -1)
                                  : int_option<int>("sep_id", sep_opt, -1, mc.vocab_size - 1, "the document separator id, -1 = none");
  std::vector<int> prompt_tokens;
  if (!prompt.empty()) {
    prompt_tokens = ByteTokenizer::encode_document(prompt);
  } else {
    for (const auto& v : split(prompt_ids, ',')) {
      const std::size_t i = prompt_tokens.size();
      const long long id = int_option<long long>("prompt_ids", v, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max(), "token ids");
      if (id < 0 || id >= mc.vocab_size)
        throw Error("--prompt_ids: id " + std::to_string(id) + " at position " + std::to_string(i) + " is outside the model's vocabulary [0, " +
                    std::to_string(mc.vocab_size) + ")");
      prompt_tokens.push_back(int(id));
    }
  }
  // the prompt and the new tokens must fit the model's positions: said before the weights are loaded
  const long long P = static_cast<long long>(prompt_tokens.size()), maxpos = mc.max_position_embeddings;
  if (P > maxpos)
    throw Error(std::string(prompt.empty() ? "--prompt_ids: " : "--prompt: ") + std::to_string(P) +
                (prompt.empty() ? " tokens" : " tokens (its bytes and the document separator)") + ", more than the model's max_position_embeddings (" +
                std::to_string(maxpos) + ")");
  if (P + o.max_new_tokens > maxpos)
    throw Error("--max_new_tokens " + std::to_string(o.max_new_tokens) + ": the prompt takes " + std::to_string(P) + " of the model's " +
                std::to_string(maxpos) + " positions (max_position_embeddings), so at most " + std::to_string(maxpos - P) + " new tokens fit");
  std::vector<std::vector<int>> outs;
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m = load_checkpoint<M>(ck);
    if (o.mode.mode != DecodeMode::Standard && !M::has_feedback) {
      std::fprintf(stderr, "note: %s is a baseline (fuser none); decoding in standard mode\n", ck.c_str());
      o.mode = DecodeModeSpec{};
    }
    Decoder<M> dec(m, sep);
    std::vector<Request> reqs;
    for (int i = 0; i < n; ++i) {
      reqs.push_back({prompt_tokens, o});
      reqs.back().opts.seed = o.seed + std::uint64_t(i);  // wraps at 2^64 by design: seeds are bit patterns
    }
    outs = generate_batch(dec, reqs);
  });
  for (int i = 0; i < n; ++i) {
    std::printf("--- sample %d (%s, temperature %g, seed %llu)\n", i + 1, o.mode.name().c_str(), o.sampling.temperature,
                (unsigned long long)(o.seed + std::uint64_t(i)));
    if (output == "ids") {
      std::string line;
      for (int t : outs[i]) line += (line.empty() ? "" : ",") + std::to_string(t);
      std::printf("%s\n", line.c_str());
    } else {
      const std::string head = prompt.empty() ? ByteTokenizer::decode_visible(prompt_tokens) : prompt;
      std::printf("%s%s\n", head.c_str(), ByteTokenizer::decode_visible(outs[i]).c_str());
    }
  }
  return 0;
}

// ------------------------------------------------------------------------------------------- demo
struct DemoModel {
  std::string name;
  std::atomic<long> progress{0};
  long steps = 0;
  double tokens = 0, compute_tokens = 0;
  EvalReport eval;
  std::vector<TaskEvalResult> tasks;
  std::map<std::string, double> ms_per_token;
  std::string error;
};

int cmd_demo(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt demo [--task running_sum|permutation|brackets|addition|state_tracking|multihop] [--task_difficulty N]\n"
        "         [--preset paper|v1] [--steps N] [--baseline_2x true|false] [--trace_tag true|false] [--examples N] [--out_dir DIR]\n\n"
        "Trains a full-bandwidth model (glu fuser) and a baseline (fuser none) of the same size on the same tokens\n"
        "under one preset (default paper: the paper's recipe, docs/training.md section 2), and a second baseline\n"
        "on twice the tokens, two at a time (one per core), then prints side by side the validation loss per\n"
        "decoding mode (standard = pass 1, fused(1), fused(2), token by token), the task's optimal loss where\n"
        "it is known, and decode ms/token in standard and soft mode. The default task, running_sum (digits whose\n"
        "next value depends on a running sum mod 5, task_length 32), is one where carried state must help and\n"
        "whose optimum is known; a tiny model (D 64, 2 layers) trains 1200 steps, about 2 minutes on 2 cores.\n"
        "A reasoning task (addition, ...) trains today's default model (D 128, 4 layers) 600 steps and adds task\n"
        "accuracy and median trace length per mode (greedy); its 2x baseline is off by default (--baseline_2x\n"
        "true to add it). --trace_tag true asks each prompt for a level and reports accuracy and trace length per\n"
        "requested level. Logs and checkpoints go to OUT_DIR/<model>, the table also to OUT_DIR/demo.json.\n");
    return 0;
  }
  TrainConfig base;
  const std::string task_name = take(a, "task", "running_sum");
  const std::string preset = take(a, "preset", "paper");
  apply_preset(base, preset);  // first: the demo's own settings below change it
  base.data = "task:" + task_name;
  const bool state = is_state_task_data(base);
  base.task_difficulty = int_option<int>("task_difficulty", take(a, "task_difficulty", state ? "5" : "3"), 1, std::numeric_limits<int>::max());
  base.trace_tag = detail::parse_bool("trace_tag", take(a, "trace_tag", "false"));
  base.steps = int_option<long>("steps", take(a, "steps", state ? "1200" : "600"), 1, std::numeric_limits<long>::max(), "optimizer steps");
  const bool double_baseline = detail::parse_bool("baseline_2x", take(a, "baseline_2x", state ? "true" : "false"));
  const int n_examples = int_option<int>("examples", take(a, "examples", "100"), 0, 1000000, "task examples per decoding mode");
  const std::string out_dir = take(a, "out_dir", "runs/demo");
  no_leftovers(a, "demo");
  base.batch_size = 16, base.seq_len = 128;
  base.warmup_steps = std::min(base.warmup_steps, base.steps / 6);  // the paper's 200 warmup steps are for long runs
  if (state)  // the issue-12 control model: a tiny stack is enough to learn a running state
    base.model.hidden_size = 64, base.model.num_hidden_layers = 2, base.model.num_attention_heads = 4, base.model.num_key_value_heads = 4,
    base.model.intermediate_size = 192;
  base.eval_every = 0, base.eval_windows = state ? 64 : 32, base.seq_eval_windows = state ? -1 : 32, base.monitor_passes = 0, base.progress = false;

  const int n_models = double_baseline ? 3 : 2;
  DemoModel models[3];
  models[0].name = "full-bandwidth", models[1].name = "baseline", models[2].name = "baseline 2x";
  TrainConfig cf = base, cb = base, c2 = base;
  cf.model.fuser = "glu", cf.out_dir = out_dir + "/fbt";
  cb.model.fuser = "none", cb.out_dir = out_dir + "/baseline";
  c2.model.fuser = "none", c2.out_dir = out_dir + "/baseline_2x", c2.steps = 2 * base.steps;
  for (TrainConfig* c : {&cb, &c2}) make_baseline_single_pass(*c);
  validate(cf), validate(cb);  // before the demo removes anything (names the bad option's field, e.g. task_difficulty)
  if (double_baseline) validate(c2);
  // the demo owns its run directories: a new demo replaces the last one's
  for (const TrainConfig* c : {&cf, &cb, &c2}) std::filesystem::remove_all(c->out_dir);
  Trainer<Model<float, GluFuser<float>>> trainer_f(cf);
  Trainer<Model<float, NoFuser<float>>> trainer_b(cb);
  std::unique_ptr<Trainer<Model<float, NoFuser<float>>>> trainer_2;
  if (double_baseline) trainer_2 = std::make_unique<Trainer<Model<float, NoFuser<float>>>>(c2);
  for (int i = 0; i < 3; ++i) models[i].steps = i == 2 ? c2.steps : base.steps;
  std::printf("fbt demo: %s (difficulty %d), preset %s, %ld steps of %d x %d tokens each on the same batches%s\n", base.data.c_str(),
              base.task_difficulty, preset.c_str(), base.steps, base.batch_size, base.seq_len,
              double_baseline ? " (the 2x baseline: the same and as many again)" : "");
  std::printf("  baseline %zu parameters; full-bandwidth %zu (+ the fuser and N_in)\n", trainer_b.model.params.size(), trainer_f.model.params.size());
  const TaskConfig task = task_config(base);
  const auto examples = state ? std::vector<Example>{}
                        : base.trace_tag ? eval_examples_at_levels(task, n_examples, 20261202) : eval_examples(task, n_examples, 20261202);
  const int max_bytes = state ? 0 : max_solution_bytes(task) + 8;
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&](DemoModel& d, auto& trainer, std::vector<std::string> modes) {
    try {
      trainer.progress_counter = &d.progress;
      trainer.run(nullptr);
      d.eval = trainer.evaluate();
      auto& dec = trainer.decoder();
      if (!state)
        for (const auto& md : modes) d.tasks.push_back(evaluate_task(dec, task, examples, DecodeModeSpec::parse(md), max_bytes));
      d.ms_per_token["standard"] = decode_ms_per_token(dec, DecodeModeSpec{}, 32, 96);
      if (trainer.model.feedback()) d.ms_per_token["soft"] = decode_ms_per_token(dec, DecodeModeSpec::parse("soft"), 32, 96);
    } catch (const std::exception& e) {
      d.error = e.what();
    }
    d.tokens = trainer.tokens, d.compute_tokens = trainer.compute_tokens;
    d.progress.store(-1);
  };
  // two workers (one per core) take the jobs longest first: the 2x baseline, the full-bandwidth model, the baseline
  std::vector<std::function<void()>> jobs;
  if (double_baseline) jobs.push_back([&] { work(models[2], *trainer_2, {"standard"}); });
  jobs.push_back([&] { work(models[0], trainer_f, {"standard", "soft", "fused(1)", "fused(2)"}); });
  jobs.push_back([&] { work(models[1], trainer_b, {"standard"}); });
  std::atomic<std::size_t> next{0};
  g_progress_started = true;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < jobs.size();) jobs[i]();
  };
  std::thread w1(worker), w2(worker);
  const bool tty = isatty(fileno(stderr));
  for (int tick = 0;; ++tick) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool done = true;
    std::string line;
    for (int i = 0; i < n_models; ++i) {
      const long p = models[i].progress.load();
      done = done && p < 0;
      line += std::string(i ? ", " : "") + models[i].name + " " + (p < 0 ? std::string("done") : std::to_string(p) + "/" + std::to_string(models[i].steps));
    }
    if (tty || tick % 20 == 0 || done)  // a live line on a terminal, a line every 10 s in a log
      std::fprintf(stderr, "%s  training + evaluation: %s  (%.0f s)   %s", tty ? "\r" : "", line.c_str(), el, tty ? "" : "\n");
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  w1.join(), w2.join();
  std::fprintf(stderr, "\n");
  for (int i = 0; i < n_models; ++i)
    if (!models[i].error.empty()) throw Error(models[i].name + ": " + models[i].error);

  // the side-by-side table: full-bandwidth, baseline, [baseline 2x], [optimum]
  const auto& f = models[0];
  const bool opt = !std::isnan(f.eval.optimal_loss);
  auto cell = [](double v, const char* fmt = "%.4f") {
    char s[32];
    if (std::isnan(v)) return std::string("-");
    std::snprintf(s, sizeof s, fmt, v);
    return std::string(s);
  };
  auto row = [&](const std::string& what, const std::vector<std::string>& cells) {
    std::printf("%-36s", what.c_str());
    for (const auto& c : cells) std::printf(" %14s", c.c_str());
    std::printf("\n");
  };
  auto per_model = [&](const std::function<std::string(const DemoModel&)>& fn, const std::string& optimum = "") {
    std::vector<std::string> c;
    for (int i = 0; i < n_models; ++i) c.push_back(fn(models[i]));
    if (opt) c.push_back(optimum);
    return c;
  };
  std::vector<std::string> head;
  for (int i = 0; i < n_models; ++i) head.push_back(models[i].name);
  if (opt) head.push_back("optimum");
  std::printf("\n");
  row("", head);
  auto pass_loss = [&](int j) { return [j, &cell](const DemoModel& d) { return cell(j < int(d.eval.val_loss.size()) ? d.eval.val_loss[j] : NAN); }; };
  row("validation loss, standard (pass 1)", per_model(pass_loss(0), cell(f.eval.optimal_loss)));
  row("validation loss, fused(1) (pass 2)", per_model(pass_loss(1), cell(f.eval.optimal_loss)));
  row("validation loss, fused(2) (pass 3)", per_model(pass_loss(2), cell(f.eval.optimal_loss)));
  row("validation loss, token by token", per_model([&](const DemoModel& d) { return cell(d.eval.seq_loss_soft); }, cell(f.eval.seq_optimal_loss)));
  row("  (soft: feedback at every token)", {});
  row("validation loss, token by token", per_model([&](const DemoModel& d) { return cell(d.eval.seq_loss_standard); }, cell(f.eval.seq_optimal_loss)));
  row("  (standard: no feedback)", {});
  auto find = [](const DemoModel& d, const std::string& m) -> const TaskEvalResult* {
    for (const auto& t : d.tasks)
      if (t.mode == m) return &t;
    return nullptr;
  };
  for (const char* md : {"standard", "soft", "fused(1)", "fused(2)"}) {
    bool any = false;
    for (int i = 0; i < n_models; ++i) any = any || find(models[i], md);
    if (!any) continue;
    row(std::string("accuracy, ") + md, per_model([&](const DemoModel& d) { auto r = find(d, md); return r ? cell(r->accuracy, "%.3f") : "-"; }));
    row(std::string("median trace bytes, ") + md,
        per_model([&](const DemoModel& d) { auto r = find(d, md); return r ? cell(r->median_trace, "%.1f") : "-"; }));
    for (const std::string& lv : verbosity_levels()) {  // trace_tag: per requested level
      auto level = [&](const DemoModel& d) -> const TaskLevelResult* {
        if (auto r = find(d, md))
          for (const auto& l : r->levels)
            if (l.level == lv) return &l;
        return nullptr;
      };
      bool has = false;
      for (int i = 0; i < n_models; ++i) has = has || level(models[i]);
      if (!has) continue;
      row("  asked " + lv + ": accuracy", per_model([&](const DemoModel& d) { auto l = level(d); return l ? cell(l->accuracy, "%.3f") : "-"; }));
      row("  asked " + lv + ": median trace", per_model([&](const DemoModel& d) { auto l = level(d); return l ? cell(l->median_trace, "%.1f") : "-"; }));
    }
  }
  for (const char* md : {"standard", "soft"})
    row(std::string("decode ms/token, ") + md,
        per_model([&](const DemoModel& d) { return d.ms_per_token.count(md) ? cell(d.ms_per_token.at(md), "%.3f") : std::string("-"); }));

  // what the table says: each mode of the full-bandwidth model against the baselines (lower is better)
  if (double_baseline) {
    const double b1 = models[1].eval.val_loss[0], b2 = models[2].eval.val_loss[0];
    const double s1 = models[1].eval.seq_loss_standard, s2 = models[2].eval.seq_loss_standard;
    std::printf("\nfull-bandwidth against the baselines (each mode's loss against theirs on the same windows):\n");
    auto verdict = [&](const char* mode, double v, double x1, double x2, double o) {
      if (std::isnan(v)) return;
      std::string where = v < x2   ? "below the baseline on 2x the tokens (by " + cell(x2 - v) + ")"
                          : v < x1 ? "between the baselines on 1x and 2x the tokens"
                                   : "not below the baseline on the same tokens (by " + cell(v - x1) + ")";
      const std::string gap = std::isnan(o)  ? ""
                              : v >= o       ? "; " + cell(v - o) + " above the optimum"
                                             : "; at the optimum (" + cell(o - v) + " below it: the optimum is an expected loss, the windows a sample)";
      std::printf("  %-24s %s: %s%s\n", mode, cell(v).c_str(), where.c_str(), gap.c_str());
    };
    verdict("standard (pass 1)", f.eval.val_loss[0], b1, b2, f.eval.optimal_loss);
    if (f.eval.val_loss.size() > 1) verdict("fused(1) (pass 2)", f.eval.val_loss[1], b1, b2, f.eval.optimal_loss);
    if (f.eval.val_loss.size() > 2) verdict("fused(2) (pass 3)", f.eval.val_loss[2], b1, b2, f.eval.optimal_loss);
    verdict("token by token, soft", f.eval.seq_loss_soft, s1, s2, f.eval.seq_optimal_loss);
    std::printf("  (the baselines: %s and %s on the validation windows, %s and %s token by token)\n", cell(b1).c_str(), cell(b2).c_str(),
                cell(s1).c_str(), cell(s2).c_str());
  }
  if (!state) std::printf("\n%d task examples (greedy, at most %d bytes each);", int(examples.size()), max_bytes);
  std::printf("%straining tokens %.3gM (the 2x baseline %.3gM); token-equivalent compute of the full-bandwidth model %.3gM.\n"
              "The decode timings ran while another model was still working, so they are indicative only.\n",
              state ? "\n" : " ", f.tokens / 1e6, double_baseline ? models[2].tokens / 1e6 : 0.0, f.compute_tokens / 1e6);
  nlohmann::json j;
  j["preset"] = preset, j["data"] = base.data, j["task_difficulty"] = base.task_difficulty, j["steps"] = base.steps;
  for (int i = 0; i < n_models; ++i) {
    const DemoModel& d = models[i];
    nlohmann::json m{{"val_loss", d.eval.val_loss}, {"tokens", d.tokens}, {"compute_tokens", d.compute_tokens},
                     {"ms_per_token", d.ms_per_token}, {"steps", d.steps}};
    if (!std::isnan(d.eval.seq_loss_standard)) m["seq_loss_standard"] = d.eval.seq_loss_standard;
    if (!std::isnan(d.eval.seq_loss_soft)) m["seq_loss_soft"] = d.eval.seq_loss_soft;
    if (!std::isnan(d.eval.optimal_loss)) m["optimal_loss"] = d.eval.optimal_loss;
    if (!std::isnan(d.eval.seq_optimal_loss)) m["seq_optimal_loss"] = d.eval.seq_optimal_loss;
    for (const auto& t : d.tasks) {
      m["tasks"][t.mode] = {{"accuracy", t.accuracy}, {"median_trace", t.median_trace}, {"completed", t.completed}};
      for (const auto& l : t.levels)
        m["tasks"][t.mode]["levels"][l.level] = {{"accuracy", l.accuracy}, {"median_trace", l.median_trace}, {"completed", l.completed}};
    }
    j[d.name] = m;
  }
  std::filesystem::create_directories(out_dir);
  std::ofstream(out_dir + "/demo.json") << j.dump(2) << "\n";
  std::printf("table saved to %s/demo.json\n", out_dir.c_str());
  return 0;
}


// ----------------------------------------------------------------------------------------- ablate
int cmd_ablate(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt ablate [--grid FILE.json] [--vary FIELD=v1|v2|...] [--seeds 1,2,3] [--tokens N] [--evals N]\n"
        "           [--task_examples N] [--task_lengths 1,2,4] [--decode_timing 0|1] [--jobs N] [--out_dir DIR] [--dry_run true] [--FIELD VALUE ...]\n\n"
        "Trains every run of a grid: runs x vary x seeds (see tools/ablate.hpp and docs/EXPERIMENTS.md).\n"
        "The grid file is one JSON object: {\"base\": {field: value}, \"runs\": [{field: value}, ...],\n"
        "\"vary\": {field: [values]}, \"seeds\": [1, 2], \"tokens\": 1e6, \"evals\": 10, \"task_examples\": 100,\n"
        "\"task_lengths\": [1, 2, 4], \"decode_timing\": 1, \"jobs\": 2, \"out_dir\": \"runs/x\"}. Flags add to it: --vary (repeatable; values split on |),\n"
        "--seeds, --tokens (token budget per run: steps = tokens / (batch_size x seq_len x grad_accum)), and any\n"
        "training field of fbt train --help as --FIELD VALUE (sets the base). A run's fields may also include\n"
        "tokens. Baselines (fuser none) train single-pass.\n\n"
        "Per run, OUT_DIR/<name>/ holds train.jsonl, eval.jsonl (every evaluation: per-pass, sequential and\n"
        "contraction losses), checkpoint/ and result.json (the final evaluation; on a built-in task, accuracy and\n"
        "median trace length per decoding mode at 1x, 2x, 4x the training problem length; decode ms/token). OUT_DIR/summary.csv has one row per run.\n"
        "Run it again to continue: finished runs are skipped, interrupted ones resume from their last checkpoint.\n"
        "--distributed mpi (under mpirun -np N): the runs one after another, each data-parallel over all N ranks;\n"
        "rank 0 evaluates, writes the results and prints a line per run (--jobs stays 1).\n"
        "Plots: python3 scripts/plots.py OUT_DIR.\n");
    return 0;
  }
  const std::string grid = take(a, "grid", "");
  AblationGrid g = grid.empty() ? AblationGrid{} : load_ablation_grid(grid);
  const std::string seeds = take(a, "seeds", ""), tokens = take(a, "tokens", ""), evals = take(a, "evals", ""),
                    tex = take(a, "task_examples", ""), dt = take(a, "decode_timing", ""), jobs = take(a, "jobs", ""),
                    out = take(a, "out_dir", ""), dry = take(a, "dry_run", "false");
  if (!seeds.empty()) {
    g.seeds.clear();
    for (const auto& s : split(seeds, ','))
      g.seeds.push_back(int_option<std::uint64_t>("seeds", s, 0, std::numeric_limits<std::uint64_t>::max(), "a list like 1,2,3"));
  }
  if (!tokens.empty()) g.tokens = detail::parse_tokens(tokens, "--tokens");
  if (!evals.empty()) g.evals = int_option<int>("evals", evals, 1, std::numeric_limits<int>::max(), "evaluations per run");
  if (!tex.empty()) g.task_examples = int_option<int>("task_examples", tex, 0, kMaxTaskExamples, "greedy examples per decoding mode");
  const std::string tl = take(a, "task_lengths", "");
  if (!tl.empty()) {
    g.task_lengths.clear();
    for (const auto& s : split(tl, ',')) g.task_lengths.push_back(int_option<int>("task_lengths", s, 1, detail::kMaxLengthMult, "a list like 1,2,4"));
  }
  if (!dt.empty()) g.decode_timing = int_option<int>("decode_timing", dt, 0, 1);
  if (!jobs.empty()) g.jobs = int_option<int>("jobs", jobs, 1, 64, "runs at a time");
  if (!out.empty()) g.out_dir = out;
  for (std::string v = take(a, "vary", ""); !v.empty(); v = take(a, "vary", "")) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) throw Error("--vary \"" + detail::excerpt(v) + "\": expected FIELD=v1|v2|...");
    g.vary.push_back({v.substr(0, eq), split(v.substr(eq + 1), '|')});
  }
  set_config_fields(g.base, a);  // the rest: base fields (a preset first)
  for (const auto& kv : a)
    if (kv.first != "preset") g.base_fields[kv.first] = kv.second;
  const auto runs = expand_grid(g);
  if (detail::parse_bool("dry_run", dry)) {
    long steps = 0;
    double compute = 0;
    for (const auto& r : runs) {
      MultiPassScheduler s(r.cfg.schedule, r.cfg.steps);
      const double tok = double(r.cfg.steps) * r.cfg.batch_size * r.cfg.seq_len * r.cfg.grad_accum;
      std::printf("%-60s %7ld steps %9.3gM tokens  x%.3f passes\n", r.name.c_str(), r.cfg.steps, tok / 1e6, s.mean_passes());
      steps += r.cfg.steps, compute += tok * s.mean_passes();
    }
    std::printf("%zu runs, %ld steps, %.3gM token-equivalent compute; out_dir %s\n", runs.size(), steps, compute / 1e6, g.out_dir.c_str());
    return 0;
  }
  g_progress_started = true;
  if (g.base.distributed == "mpi") {  // the runs one after another, each over all ranks
    if (g.jobs > 1)
      throw Error("fbt ablate --distributed mpi trains the runs one after another, each over all ranks; --jobs " + std::to_string(g.jobs) +
                  " (runs side by side) does not combine with it: leave jobs at 1");
    Communicator& c = mpi_world("ablate");
    const int failed = run_grid_distributed(g, c, c.rank() == 0 ? stderr : nullptr);
    return failed ? 1 : 0;
  }
  const int failed = run_grid(g, stderr);
  return failed ? 1 : 0;
}

// ----------------------------------------------------------------------------------------- logits
// ----------------------------------------------------------------------------------------- export
int cmd_export(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt export --checkpoint CKPT --hf DIR [--plain true] [--dtype F32|BF16]\n\n"
        "Writes the checkpoint as a Hugging Face directory that transformers' Qwen3ForCausalLM.from_pretrained\n"
        "loads (docs/interop.md): config.json (the Qwen3 keys, and fbt_config) and model.safetensors. A baseline,\n"
        "or with --plain true the plain part (pass 1) of a full-bandwidth model, loads with no missing or\n"
        "unexpected keys; a full-bandwidth model without --plain also carries its model.feedback.* tensors (which\n"
        "transformers leaves unused) and loads back into fbt as itself. CKPT may itself be a Hugging Face directory.\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), dir = take(a, "hf", ""), dtype = take(a, "dtype", "F32");
  const bool plain = detail::parse_bool("plain", take(a, "plain", "false"));
  no_leftovers(a, "export");
  if (ck.empty()) throw Error("fbt export: --checkpoint is required");
  if (dir.empty()) throw Error("fbt export: --hf DIR (the directory to write) is required");
  if (dtype != "F32" && dtype != "BF16") throw Error("--dtype " + detail::quote_value(dtype) + ": expected F32 or BF16");
  const ModelConfig mc = cli::checkpoint_config_any_vocab(ck);
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    const M m = load_checkpoint<M>(ck);
    save_hf_dir(dir, m, HfExportOptions{plain, dtype});
    std::printf("wrote %s: %s%s, %s (config.json, model.safetensors)\n", dir.c_str(), M::has_feedback && !plain ? "full-bandwidth model, fuser " : "Qwen3ForCausalLM",
                M::has_feedback && !plain ? m.cfg.fuser.c_str() : (M::has_feedback ? " (the plain part)" : ""), dtype.c_str());
  });
  return 0;
}

int cmd_logits(Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt logits --checkpoint CKPT (--text TEXT | --text_file FILE) [--passes K] [--precision fp32|bf16] --out FILE.npy\n\n"
        "Encodes the text as one document (kSep + bytes, at most max_position_embeddings tokens), runs K passes of\n"
        "the training forward (no prefix mixing, no noise: pass k = fused(k-1) prefill at every position) and\n"
        "writes their logits as a float32 .npy of shape (K, T, V); also FILE.tokens.npy (int32, (T)). K defaults\n"
        "to 3 for a full-bandwidth model, 1 for a baseline.\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), text = take(a, "text", ""), tf = take(a, "text_file", ""), out = take(a, "out", "");
  const std::string passes = take(a, "passes", "");
  const int K_opt = passes.empty() ? 0 : int_option<int>("passes", passes, 1, kMaxPasses, "passes whose logits are written");
  precision_option(take(a, "precision", "fp32"));
  no_leftovers(a, "logits");
  if (ck.empty()) throw Error("fbt logits: --checkpoint is required");
  if (out.empty()) throw Error("fbt logits: --out FILE.npy is required");
  if (text.empty() == tf.empty()) throw Error("fbt logits: give exactly one of --text and --text_file");
  const std::string body = tf.empty() ? text : cli::read_text_option("text_file", tf);
  std::vector<float> all;  // (K, T, V)
  std::vector<int> tok = ByteTokenizer::encode_document(body);
  int K = 0, Tn = 0, V = 0;
  const ModelConfig mc = cli::checkpoint_config(ck);
  if (K_opt > 1 && !mc.feedback()) throw Error("--passes " + std::to_string(K_opt) + ": the checkpoint is a baseline (fuser none), which has 1 pass");
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m = load_checkpoint<M>(ck);
    K = K_opt > 0 ? K_opt : (M::has_feedback ? 3 : 1);
    if (int(tok.size()) > m.cfg.max_position_embeddings) tok.resize(m.cfg.max_position_embeddings);
    Tn = int(tok.size()), V = m.V;
    if (Tn < 2) throw Error("fbt logits: the text must hold at least one byte");
    std::vector<std::uint8_t> ds(Tn);
    for (int t = 0; t < Tn; ++t) ds[t] = (t == 0 || tok[t] == kSep) ? 1 : 0;
    all = pass_logits(m, Batch{1, Tn, tok.data(), nullptr, ds.data()}, K);  // pass k = fused(k-1) prefill at every position
  });
  save_npy(out, all.data(), Shape{long(K), long(Tn), long(V)});
  std::vector<std::int32_t> t32(tok.begin(), tok.end());
  const std::string tout = (out.size() > 4 && out.substr(out.size() - 4) == ".npy" ? out.substr(0, out.size() - 4) : out) + ".tokens.npy";
  save_npy(tout, t32.data(), Shape{long(Tn)});
  std::printf("wrote %s (%d passes x %d tokens x %d) and %s\n", out.c_str(), K, Tn, V, tout.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::printf("%s", kUsage);
    return argc < 2 ? 1 : 0;
  }
  const std::string cmd = argv[1];
  try {
    Args a = cli::parse_args(argc, argv, 2);
    if (cmd == "train") return cmd_train(a);
    if (cmd == "eval") return cmd_eval(a);
    if (cmd == "sample") return cmd_sample(a);
    if (cmd == "demo") return cmd_demo(a);
    if (cmd == "ablate") return cmd_ablate(a);
    if (cmd == "logits") return cmd_logits(a);
    if (cmd == "export") return cmd_export(a);
    std::fprintf(stderr, "fbt: unknown command \"%s\"\n\n%s", cli::one_line(cmd).c_str(), kUsage);
    return 1;
  } catch (const std::exception& e) {
#if defined(FBT_HAVE_MPI)
    if (g_comm && g_comm->size() > 1) {  // every rank stops: the others may be waiting in a collective
      std::fprintf(stderr, "%sfbt %s (rank %d of %d): error: %s\n", g_progress_started ? "\n" : "", cli::one_line(cmd).c_str(), g_comm->rank(),
                   g_comm->size(), cli::one_line(e.what()).c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
#endif
    std::fprintf(stderr, "%sfbt %s: error: %s\n", g_progress_started ? "\n" : "", cli::one_line(cmd).c_str(), cli::one_line(e.what()).c_str());
    return 1;
  }
}
