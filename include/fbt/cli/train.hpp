// fbt/cli/train.hpp: `fbt train` and `fbt eval`, over the fusers and blocks this program knows (the
// registries, model/pieces.hpp).
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

#include "../decode/precision_check.hpp"
#include "../train/task_eval.hpp"
#include "common.hpp"

namespace fbt {
namespace cli {

/// One line per piece: its kind, name and options (type, default, range or choices, help).
inline void print_options(const char* kind, const std::string& name, const OptionList& o) {
  std::string line;
  for (const auto& s : o.specs()) {
    std::string range = s.kind == OptionValue::Int || s.kind == OptionValue::Real
                            ? " in [" + OptionValue::of_real(s.lo).str() + ", " + OptionValue::of_real(s.hi).str() + "]"
                            : "";
    if (!s.choices.empty()) {
      range = " of ";
      for (std::size_t i = 0; i < s.choices.size(); ++i) range += (i ? "|" : "") + s.choices[i];
    }
    line += "; " + s.name + " (" + detail::option_kind_name(s.kind) + range + ", default " + s.def.str() + "): " + s.help;
  }
  std::printf("  %-9s %-12s%s\n", kind, name.c_str(), line.empty() ? " (no options)" : line.c_str() + 1);
}
/// Every piece of a registry (model/pieces.hpp) with its options.
template <class R> void print_pieces(const char* kind, const R& reg) {
  for (const auto& n : reg.names()) print_options(kind, n, reg.info(n).options);
}

/// What a run of `fbt train` ended with (run_train).
struct TrainOutcome {
  int rc = 0;                        ///< the command's exit status: 0, or 128 + the signal that stopped it
  long step = 0;                     ///< optimizer steps taken (the step of out_dir/checkpoint)
  long steps = 0;                    ///< the run's steps (its config's)
  std::vector<double> loss;          ///< (K) the last step's loss of each pass (empty: no step was taken)
  std::string out_dir;               ///< the run's directory; its checkpoint is out_dir/checkpoint
  bool stopped_by_observer = false;  ///< TrainHooks::on_step returned false (Trainer::stopped_by_observer)
};

/// How a program runs `fbt train` (run_train): an observer of every step (Trainer::on_step: false stops
/// the run with a checkpoint), whether the command's SIGTERM/SIGINT handlers are installed (a host with
/// its own, such as Python, says no and stops the run through on_step) and where progress goes (null: nowhere).
struct TrainHooks {
  std::function<bool(const StepReport&)> on_step;
  std::function<void(const nlohmann::json&)> on_eval;  ///< every evaluation's eval.jsonl line (Trainer::on_eval)
  bool stop_handlers = true;
  std::FILE* out = stderr;
};

/// \brief `fbt train` with its options `a` (the flags without "--": config, resume, device, preset and
/// every TrainConfig field): the same config, checks, run directory, lock and trainer as the command,
/// which is this function plus its help text. Throws fbt::Error as the command refuses.
inline TrainOutcome run_train(CommandState& st, Args a, const TrainHooks& h = {}) {
  TrainOutcome o;
  auto watch = [&](auto& t) {  // the last step's losses, then the program's observer
    t.on_step = [&o, &h](const StepReport& r) {
      o.loss = r.loss;
      return !h.on_step || h.on_step(r);
    };
    t.on_eval = h.on_eval;
  };
  auto outcome = [&](const auto& t) {
    o.rc = t.stopped_by ? 128 + t.stopped_by : 0;
    o.step = t.step, o.steps = t.cfg.steps, o.out_dir = t.cfg.out_dir, o.stopped_by_observer = t.stopped_by_observer;
  };
  const std::string resume = take(a, "resume", ""), config = take(a, "config", ""), device = take(a, "device", "cpu");
  with_device(device, [](auto) {});  // an unknown device (or cuda in a build without it) is refused before anything starts
  if (!resume.empty()) {
    for (const auto& kv : a)
      if (!resumable_field(kv.first))
        throw Error("fbt train --resume: --" + detail::excerpt(kv.first) + " would change the run's math; only " + resumable_fields() + " may change");
    const TrainConfig rec = read_train_config(resume);
    std::string out_dir = rec.out_dir;
    bool progress = rec.progress;
    for (const auto& kv : a) {
      if (kv.first == "out_dir") out_dir = kv.second;
      if (kv.first == "progress") progress = detail::parse_bool("progress", kv.second);
    }
    const auto lock = lock_out_dir(st, out_dir, a, rec.distributed);
    if (h.stop_handlers) install_stop_handlers();
    with_device(device, [&](auto be_tag) {
      with_model<float>(rec.model, [&](auto tag) {
        using M = typename decltype(tag)::type;
        long before = 0, after = 0;
        auto t = Trainer<M, typename decltype(be_tag)::type>::resume(resume, [&](TrainConfig& c) {
          before = c.steps;
          for (const auto& kv : a) set_config_field(c, kv.first, kv.second);
          after = c.steps;
        });
        if (after != before && t->communicator().rank() == 0)  // said once the resume is accepted (a refusal says only why)
          std::fprintf(stderr, "note: steps %ld -> %ld also moves the LR schedule and the feedback start (both are set by the run's length)\n",
                       before, after);
        attach_distributed(st, *t, t->cfg.distributed);
        if (t->communicator().rank() == 0) std::fprintf(stderr, "resumed from %s at step %ld\n", resume.c_str(), t->step);
        st.progress_started = progress;
        watch(*t);
        t->run(h.out);
        outcome(*t);
      });
    });
    return o;
  }
  // the preset, the checkpoint's stack (--init_from), the config file, the flags; a baseline made single-pass
  TrainConfig c = make_train_config(config, a, [](const std::string& ck) { return cli::checkpoint_config_any_vocab(ck); });
  check_train_memory(c);  // before anything is allocated: a config far too large is refused with its estimate
  st.memory_estimate = detail::fmt_bytes(estimate_train_memory(c).total()) + " (parameters, optimizer state, step activations and data)";
  validate(c);
  // the CPU backend's own options, refused at once for another device (as the trainer refuses them too)
  cpu_only(device, c.threads > 1, "--threads " + std::to_string(c.threads));
  cpu_only(device, c.distributed != "none", "--distributed " + c.distributed);
  // out_dir created and locked before the data and the model are set up: a bad one is one line, at once
  const auto lock = lock_out_dir(st, c.out_dir, {}, c.distributed);
  if (h.stop_handlers) install_stop_handlers();  // SIGTERM, SIGINT: the step under way finishes, a checkpoint is written
  resolve_data_path(c);   // the run's record names its corpus by absolute path (eval works from anywhere)
  with_device(device, [&](auto be_tag) {
    with_model<float>(c.model, [&](auto tag) {
      Trainer<typename decltype(tag)::type, typename decltype(be_tag)::type> t(c);
      attach_distributed(st, t, c.distributed);
      st.progress_started = c.progress;
      watch(t);
      t.run(h.out);
      outcome(t);
    });
  });
  return o;
}

/// `fbt train`: its help text, or run_train.
inline int cmd_train(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt train [--config FILE.json] [--resume CHECKPOINT_DIR] [--FIELD VALUE ...]\n\n"
        "Trains with the multi-pass schedule (spec section 3). The config file is one JSON object with the\n"
        "field names below; flags override it. --preset v1|paper (the flag's, else the file's; default v1)\n"
        "sets the fields listed below first, then the file's and the flags' fields change them. A baseline\n"
        "(--fuser none) trains single-pass. --resume continues a run bit-identically from\n"
        "OUT_DIR/checkpoint (flags then may change only steps, eval/checkpoint cadence, out_dir, progress).\n"
        "--device cpu|cuda|host (default cpu) chooses the backend the step, optimizer, evaluation and decoder run\n"
        "on: cuda is the GPU (the fbt_cuda build of this command), host the CUDA backend's host stand-in (a check\n"
        "of the GPU path without a GPU); threads, distributed and precision bf16 are the CPU's.\n\n"
        "fields (default):\n");
    const TrainConfig d;
    for (const auto& f : train_config_fields()) std::printf("  --%-24s %s (%s)\n", f.name.c_str(), f.help.c_str(), f.get(d).c_str());
    std::printf("\npresets (the fields each sets):\n");
    for (const auto& [name, fields] : train_presets()) {
      std::string line;
      for (const auto& [f, v] : fields) line += (line.empty() ? "" : ", ") + f + " " + v;
      std::printf("  %-6s %s\n", name.c_str(), line.c_str());
    }
    std::printf("\nthe pieces this command knows, with their options (--fuser.NAME VALUE, --block.NAME VALUE, --optimizer.NAME VALUE):\n");
    print_pieces("fuser", fuser_registry<float>());
    print_pieces("block", block_registry<float>());
    for (const auto& n : split(OptimizerRegistry::global().names(), ',')) {
      const std::string name = n.substr(n.find_first_not_of(' '));
      print_options("optimizer", name, OptimizerRegistry::global().options(name));
    }
    return 0;
  }
  return run_train(st, std::move(a)).rc;
}

// ------------------------------------------------------------------------------------------- eval
inline int cmd_eval(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt eval --checkpoint CKPT [--data task:NAME|FILE] [--task_difficulty N] [--task_length L] [--task_reveal Q] [--seq_len T] [--windows N]\n"
        "         [--seq_windows N] [--monitor K] [--passes K] [--doc_split blank_line|none] [--val_fraction X]\n"
        "         [--val_data FILE] [--doc_sep_id N] [--token_dtype auto|uint16|uint32|int32|int64]\n"
        "         [--precision fp32|bf16] [--precision_check N] [--max_memory_gb X] [--device cpu|cuda|host]\n"
        "         [--task addition|state_tracking|multihop --task_examples N [--eval_lengths 1,2,4] [--trace_tag true|false]\n"
        "          [--traces_out FILE.jsonl [--traces_mode soft] [--traces_filter all|correct]]]\n\n"
        "The data options and --precision default to those the checkpoint's run was trained with (read from its\n"
        "train_state.safetensors); --windows 0 and --seq_windows -1 evaluate every validation window.\n"
        "--data FILE.bin or FILE.npy is a token file of the model's vocabulary (val_data, doc_sep_id and\n"
        "token_dtype as in fbt train); another FILE is text, read as bytes.\n"
        "Prints the per-pass validation losses (pass k = fused(k-1) prefill at every position) with each fed-back\n"
        "pass's difference from pass 1 (a paired 95%% t-interval over the same windows), the\n"
        "sequential-exact losses (token by token, standard and soft) and the contraction monitor L(k), delta_k\n"
        "(spec section 6), and beside them the data's optimal loss over the same windows where it is known\n"
        "(the running-state tasks). CKPT is a checkpoint directory or a model.safetensors file.\n"
        "--precision_check N decodes N validation windows token by token in fp32 and in bf16 and prints how often\n"
        "the greedy token is the same (teacher-forced: fed the window's tokens; free-running: 64 new tokens after a\n"
        "16-token prompt), in standard and (with feedback) soft mode: decode/precision_check.hpp.\n"
        "--task_examples N also decodes N problems of a reasoning task (the run's own, or --task; e.g. after fine-tuning\n"
        "on .jsonl data) greedily in standard mode and, with feedback, soft, fused(1) and fused(2), at each of\n"
        "--eval_lengths times the difficulty, and prints accuracy, median trace bytes and McNemar's exact test of\n"
        "every two modes on the same problems. They decode on --device's backend.\n"
        "--traces_out FILE.jsonl writes the problems' greedy decodes in --traces_mode (default soft with feedback,\n"
        "else standard; any mode string, e.g. soft/prefill=recurrent) as SFT JSONL {\"prompt\", \"response\"} (every\n"
        "--eval_lengths length; --traces_filter correct keeps right answers only), to fine-tune a model on its own traces.\n"
        "--device: the backend the evaluation runs on (cpu, the default; cuda: the fbt_cuda build; host: the CUDA\n"
        "backend's host stand-in); --precision bf16 and --precision_check are the CPU's (another device uses fp32).\n");
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
  const std::string device = take(a, "device", "cpu");
  with_device(device, [](auto) {});
  const Precision prec = precision_option(take(a, "precision", device == "cpu" ? c.precision : "fp32"));
  const int check_windows = int_option<int>("precision_check", take(a, "precision_check", "0"), 0, 100000, "windows decoded in fp32 and bf16, 0 = off");
  cpu_only(device, prec == Precision::bf16, "--precision bf16");
  cpu_only(device, check_windows > 0, "--precision_check");
  if (check_windows > 0 && !bf16_available()) throw Error("--precision_check: " + bf16_unavailable_reason());
  const double max_memory_gb = max_memory_option(a);
  const int task_examples = int_option<int>("task_examples", take(a, "task_examples", "0"), 0, 1000000, "greedy problems per mode, 0 = none");
  std::string task_name = take(a, "task", c.data.rfind("task:", 0) == 0 ? c.data.substr(5) : "");
  const bool task_tag = detail::parse_bool("trace_tag", take(a, "trace_tag", c.trace_tag ? "true" : "false"));
  std::vector<int> task_lengths;
  for (const auto& x : split(take(a, "eval_lengths", "1"), ','))
    task_lengths.push_back(int_option<int>("eval_lengths", x, 1, detail::kMaxLengthMult, "a list like 1,2,4"));
  const std::string traces_out = take(a, "traces_out", ""), traces_mode_opt = take(a, "traces_mode", ""), traces_filter = take(a, "traces_filter", "all");
  no_leftovers(a, "eval");
  if (traces_filter != "all" && traces_filter != "correct") throw Error("--traces_filter " + detail::quote_value(traces_filter) + ": expected all or correct");
  if (traces_out.empty() && (!traces_mode_opt.empty() || traces_filter != "all")) throw Error("--traces_mode and --traces_filter need --traces_out FILE.jsonl");
  if (!traces_out.empty() && task_examples == 0) throw Error("--traces_out: needs --task_examples N (the problems whose decodes it writes)");
  if (!traces_mode_opt.empty()) (void)DecodeModeSpec::parse(traces_mode_opt);  // a bad spelling is refused before the model loads
  TaskConfig task_cfg;
  if (task_examples > 0) {
    const auto known = builtin_task_names();
    if (task_name.empty() || is_state_task(task_name) || std::find(known.begin(), known.end(), task_name) == known.end())
      throw Error("--task_examples: needs a reasoning task (--task addition|state_tracking|multihop), got " + detail::quote_value(task_name));
    task_cfg = TaskConfig{task_name, c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
    task_cfg.trace_tag = task_tag;
    task_cfg.validate();
  }
  const ModelConfig mc = is_token_data(c) || is_sft_data(c) ? cli::checkpoint_config_any_vocab(ck) : cli::checkpoint_config(ck);
  c.model.vocab_size = mc.vocab_size;
  validate_data(c);
  if (c.seq_len > mc.max_position_embeddings)
    throw Error("--seq_len " + std::to_string(c.seq_len) + ": exceeds the model's max_position_embeddings (" +
                std::to_string(mc.max_position_embeddings) + ")");
  if (K_opt > 1 && !mc.feedback()) throw Error("--passes " + std::to_string(K_opt) + ": the checkpoint is a baseline (fuser none), which has 1 pass");
  check_command_memory(st, "eval", eval_memory(c, mc, K_opt > 0 ? K_opt : (mc.feedback() ? 3 : 1)), max_memory_gb, "lower --seq_len or --passes");
  with_device(device, [&](auto be_tag) {
    using Be = typename decltype(be_tag)::type;
    with_model<float>(mc, [&](auto tag) {
      using M = typename decltype(tag)::type;
      M m = load_checkpoint<M>(ck);
      c.model = m.cfg;
      auto data = make_data_source(c);
      const int K = K_opt > 0 ? K_opt : (m.feedback() ? 3 : 1);
      on_backend<Be>(m, data->doc_sep(), [&](Be& be, const Weights<float>& wt, auto& dec) {
        Workspace<M, Be> w;
        std::printf("checkpoint %s: %zu parameters, fuser %s; data %s%s\n", ck.c_str(), m.params.size(), m.cfg.fuser.c_str(), data->describe().c_str(),
                    prec == Precision::bf16 ? "; bf16 products" : "");
        std::vector<std::vector<double>> wl;  // (K, windows) each window's loss per pass, for the paired intervals
        const auto vl = evaluate_passes(be, m, wt, w, *data, c.seq_len, K, windows, 8, nullptr, &wl);
        for (int k = 0; k < K; ++k) std::printf("  pass %d validation loss %.4f%s\n", k + 1, vl[k], k == 0 ? "  (standard)" : "");
        for (int k = 1; k < K; ++k) {  // every fed-back pass against the plain one, on the same windows
          const PairedInterval r = paired_t_interval_where_both(wl[std::size_t(k)], wl[0]);
          std::printf("  pass %d - pass 1: %+.4f, paired 95%% t-interval [%+.4f, %+.4f] over %d windows\n", k + 1, r.mean, r.lo, r.hi, r.n);
        }
        const int nw = detail::parallel_eval_windows(*data, c.seq_len, windows);
        const double opt = data->mean_optimal_loss(c.seq_len, nw);
        if (!std::isnan(opt)) std::printf("  optimal loss %.4f  (the data's closed form, same %d windows)\n", opt, nw);
        if (seq_windows != 0) {
          std::printf("  sequential (standard) loss %.4f\n", sequential_loss(dec, *data, c.seq_len, seq_windows, DecodeModeSpec{}));
          if (m.feedback())
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
            if (!m.feedback() && std::string(mode) == "soft") continue;
            const GreedyAgreement g = greedy_agreement(dec, wins, DecodeModeSpec::parse(mode), Precision::fp32, Precision::bf16, prompt, 64);
            long never = 0;
            for (int f : g.first_divergence) never += f < 0;
            std::printf("  bf16 vs fp32 greedy tokens (%s, %zu windows): teacher-forced %ld of %ld the same (%.2f%%); free-running %ld of %ld (%.2f%%), "
                        "%ld of %zu continuations identical\n",
                        mode, wins.size(), g.same, g.positions, 100 * g.rate(), g.generated_same, g.generated, 100 * g.free_rate(), never, wins.size());
          }
        }
        if (task_examples > 0) {  // greedy answers per mode and length, paired tests on the same problems
          std::vector<std::string> modes = task_eval_modes(m.feedback());
          std::string traces_mode;
          if (!traces_out.empty()) {
            const DecodeModeSpec tm = DecodeModeSpec::parse(traces_mode_opt.empty() ? (m.feedback() ? "soft" : "standard") : traces_mode_opt);
            if ((tm.feeds_back() || tm.prefill_feeds_back()) && !m.feedback())
              throw Error("--traces_mode " + tm.name() + ": needs a feedback fuser; " + ck + " is a baseline (fuser none)");
            traces_mode = tm.name();
            if (std::find(modes.begin(), modes.end(), traces_mode) == modes.end()) modes.push_back(traces_mode);
          }
          std::unique_ptr<Decoder<M>> kdec;  // the data's separator is not the tasks' kSep: a CPU decoder with kSep
          if (dec.sep_token() != kSep) {
            if constexpr (std::is_same<Be, CpuBackend<float>>::value) kdec = std::make_unique<Decoder<M>>(m, kSep);
            else throw Error("--task_examples with --device " + device + ": the tasks' documents start at kSep (" + std::to_string(kSep) +
                             "), the data's separator is " + std::to_string(dec.sep_token()) + "; give --data task:" + task_cfg.name);
          }
          TracesWritten tw;
          auto on_result = [&](const TaskEvalAtLength& at, const TaskEvalResult& r) {  // a line per mode as it ends; its traces
            if (at.results.size() == 1)
              std::printf("  task %s, difficulty %d x %d, %zu problems (seed 20261202), greedy:\n", task_cfg.name.c_str(), task_cfg.difficulty, at.length_mult,
                          at.examples.size());
            std::printf("    %-9s accuracy %.3f, median trace %.1f bytes, completed %.3f\n", r.mode.c_str(), r.accuracy, r.median_trace, r.completed);
            if (r.mode == traces_mode) {
              const TracesWritten w = write_traces_jsonl(traces_out, at.examples, r, traces_filter == "correct", at.length_mult != task_lengths.front());
              tw.written += w.written, tw.wrong += w.wrong, tw.empty += w.empty, tw.not_text += w.not_text;
            }
          };
          for (int mult : task_lengths) {  // one length at a time, its paired tests after its modes
            auto one = [&](auto& d) { return evaluate_task_lengths(d, task_cfg, modes, {mult}, task_examples, on_result); };
            const std::vector<TaskEvalAtLength> at = kdec ? one(*kdec) : one(dec);
            for (const ModePairTest& t : at.front().paired) std::printf("    %s\n", format_pair_test(t).c_str());
          }
          if (!traces_out.empty())
            std::printf("  wrote %d %s traces to %s (left out: %d wrong, %d empty, %d not ASCII)\n", tw.written, traces_mode.c_str(), traces_out.c_str(), tw.wrong,
                        tw.empty, tw.not_text);
        }
        if (m.feedback() && monitor > 0) {
          std::vector<int> tok, tgt;
          std::vector<std::uint8_t> ds;
          data->eval_window(0, c.seq_len, tok, tgt, ds);
          const auto cc = contraction_monitor(be, m, wt, w, Batch{1, c.seq_len, tok.data(), tgt.data(), ds.data()}, monitor);
          std::printf("  contraction monitor (k: L(k), delta_k):");
          for (std::size_t k = 0; k < cc.loss.size(); ++k) std::printf("%s %zu: %.4f %.2e", k % 5 ? "," : "\n   ", k + 1, cc.loss[k], cc.delta[k]);
          std::printf("\n");
        }
      });
    });
  });
  return 0;
}

}  // namespace cli
}  // namespace fbt
