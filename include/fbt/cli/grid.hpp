// fbt/cli/grid.hpp: `fbt ablate`, the grid runner (fbt/ablate.hpp) over the fusers and blocks a command knows.
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

#include "../ablate.hpp"
#include "common.hpp"

namespace fbt {
namespace cli {

// ----------------------------------------------------------------------------------------- ablate
inline int cmd_ablate(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt ablate [--grid FILE.json] [--vary FIELD=v1|v2|...] [--seeds 1,2,3] [--tokens N] [--evals N]\n"
        "           [--task_examples N] [--task_lengths 1,2,4] [--task_modes standard,soft,...] [--decode_timing 0|1] [--jobs N] [--out_dir DIR] [--dry_run true] [--FIELD VALUE ...]\n\n"
        "Trains every run of a grid: runs x vary x seeds (see fbt/ablate.hpp and docs/EXPERIMENTS.md).\n"
        "The grid file is one JSON object: {\"base\": {field: value}, \"runs\": [{field: value}, ...],\n"
        "\"vary\": {field: [values]}, \"seeds\": [1, 2], \"tokens\": 1e6, \"evals\": 10, \"task_examples\": 100,\n"
        "\"task_lengths\": [1, 2, 4], \"task_modes\": [\"standard\", \"soft\"], \"decode_timing\": 1, \"jobs\": 2, \"out_dir\": \"runs/x\"}. Flags add to it: --vary (repeatable; values split on |),\n"
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
  const std::string tm = take(a, "task_modes", "");
  if (!tm.empty()) g.task_modes = split(tm, ',');
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
    detail::print_same_runs(runs, stdout);
    std::size_t same = 0;
    for (const auto& r : runs) {
      if (!r.same_as.empty()) {
        std::printf("%-60s same run as %s\n", r.name.c_str(), r.same_as.c_str());
        ++same;
        continue;
      }
      MultiPassScheduler s(r.cfg.schedule, r.cfg.steps);
      const double tok = double(r.cfg.steps) * r.cfg.batch_size * r.cfg.seq_len * r.cfg.grad_accum;
      std::printf("%-60s %7ld steps %9.3gM tokens  x%.3f passes\n", r.name.c_str(), r.cfg.steps, tok / 1e6, s.mean_passes());
      steps += r.cfg.steps, compute += tok * s.mean_passes();
    }
    std::printf("%zu runs, %ld steps, %.3gM token-equivalent compute; out_dir %s%s\n", runs.size(), steps, compute / 1e6, g.out_dir.c_str(),
                same ? ("; " + std::to_string(same) + " run(s) the same as an earlier one, trained once").c_str() : "");
    return 0;
  }
  {  // the jobs largest runs side by side, each as estimate_train_memory says, before any starts
    std::vector<double> need;
    for (const auto& r : runs)
      if (r.same_as.empty()) need.push_back(estimate_train_memory(r.cfg).total());
    std::sort(need.rbegin(), need.rend());
    const std::size_t side = std::min<std::size_t>(need.size(), std::size_t(g.base.distributed == "mpi" ? 1 : std::max(g.jobs, 1)));
    CommandMemory m;
    for (std::size_t i = 0; i < side; ++i) m.activations += need[i];
    st.memory_estimate = detail::fmt_bytes(m.total()) + " (the " + std::to_string(side) + " largest of " + std::to_string(need.size()) +
                        " runs side by side: parameters, optimizer state, step activations and data)";
    check_memory("fbt ablate", m.total(),
                 "the " + std::to_string(side) + " largest of the grid's " + std::to_string(need.size()) + " runs at a time (--jobs " +
                     std::to_string(g.jobs) + "), each its parameters, optimizer state, step activations and data",
                 g.base.max_memory_gb, "lower --jobs or the runs' batch_size, seq_len or model size");
  }
  if (g.base.distributed == "mpi" && g.jobs > 1)
    throw Error("fbt ablate --distributed mpi trains the runs one after another, each over all ranks; --jobs " + std::to_string(g.jobs) +
                " (runs side by side) does not combine with it: leave jobs at 1");
  // an error from here may follow a progress line; on a terminal that line has no end of line yet (\r updates),
  // elsewhere (a pipe, a log) every progress line is whole, so an error needs no blank line before it
  st.progress_started = ::isatty(2) != 0;
  if (g.base.distributed == "mpi") {  // the runs one after another, each over all ranks
    Communicator& c = mpi_world(st, "ablate");
    const int failed = run_grid_distributed(g, c, c.rank() == 0 ? stderr : nullptr);
    return failed ? 1 : 0;
  }
  const int failed = run_grid(g, stderr);
  return failed ? 1 : 0;
}

}  // namespace cli
}  // namespace fbt
