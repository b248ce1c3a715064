// fbt/cli/probe.hpp: `fbt probe`, linear probes per (prefill mode, depth) of a checkpoint on probe items
// (train/probe.hpp; docs/probing.md).
#pragma once

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../train/probe_io.hpp"
#include "common.hpp"

namespace fbt {
namespace cli {

/// What `fbt probe` computes, before anything is printed (fbt.probe returns it: quiet, no file unless asked).
struct ProbeRun {
  nlohmann::json json;             ///< what --out gets: probe_json's cells, chance, classes, ... and the run's settings
  std::string table;               ///< the table the command prints (a header line, then a line per cell)
  std::vector<std::string> notes;  ///< what the command says on stderr (a baseline's skipped prefills)
  std::string out;                 ///< --out (empty: none)
};

/// \brief `fbt probe`'s options `a` read, checked and run: the cells, their table and JSON. Throws fbt::Error as the
/// command refuses.
inline ProbeRun probe_command(Args a) {
  const std::string ck = take(a, "checkpoint", ""), items = take(a, "items", ""), task = take(a, "task", ""), out = take(a, "out", "");
  ProbeOptions o;
  o.modes = split(take(a, "prefill", "standard,fused(1),recurrent"), ',');
  for (const auto& m : o.modes) (void)PrefillSpec::parse(m);
  for (const auto& m : o.modes)
    if (m.empty() || m == "policy") throw Error("--prefill: name each prefill (standard, fused(k), recurrent, recurrent(k))");
  o.folds = int_option<int>("folds", take(a, "folds", "4"), 2, 100, "cross-validation folds");
  o.lambda = real_option("l2", take(a, "l2", "1"), 0, true, 1e12, false, "the L2 weight");
  o.seed = int_option<std::uint64_t>("seed", take(a, "seed", "1"), 0, std::numeric_limits<std::uint64_t>::max());
  ProbeTaskOptions t;
  if (const std::string nl = take(a, "null_lines", ""); !nl.empty()) {
    t.null_lines.clear();
    for (const auto& v : split(nl, ',')) t.null_lines.push_back(int_option<int>("null_lines", v, 0, 1024, "null lines"));
  }
  t.groups = int_option<int>("groups", take(a, "groups", "0"), 0, 100000, "0 = the paper's");
  t.registers = int_option<int>("registers", take(a, "registers", "8"), 1, 10);
  t.writes = int_option<int>("writes", take(a, "writes", "2"), 1, 64);
  t.seed = int_option<std::uint64_t>("task_seed", take(a, "task_seed", "1"), 0, std::numeric_limits<std::uint64_t>::max());
  t.difficulty = int_option<int>("task_difficulty", take(a, "task_difficulty", "5"), 2, 64, "modulus / k of S_k / depth cap of a running-state task");
  t.reveal = real_option("task_reveal", take(a, "task_reveal", "0.5"), 0, false, 1, false, "the probability of a state-revealing symbol");
  if (const std::string ps = take(a, "prefix_symbols", ""); !ps.empty()) {
    t.prefix_symbols.clear();
    for (const auto& v : split(ps, ',')) t.prefix_symbols.push_back(int_option<int>("prefix_symbols", v, 1, kMaxStateTaskLength, "symbols before the probe"));
  }
  no_leftovers(a, "probe");
  if (ck.empty()) throw Error("fbt probe: --checkpoint is required");
  if (items.empty() == task.empty()) throw Error("fbt probe: give exactly one of --items FILE.jsonl and --task NAME");
  const ModelConfig mc = task.empty() ? cli::checkpoint_config_any_vocab(ck) : cli::checkpoint_config(ck);
  std::vector<std::string> classes;
  const std::vector<ProbeExample> ex = task.empty() ? read_probe_items(items, mc.vocab_size, classes) : probe_examples(probe_task_items(task, t), classes);
  int longest = 0;
  for (const auto& e : ex) longest = std::max(longest, e.position + 1);
  if (longest > mc.max_position_embeddings)
    throw Error("fbt probe: an item is probed at token " + std::to_string(longest - 1) + ", beyond the model's max_position_embeddings (" +
                std::to_string(mc.max_position_embeddings) + ")");
  const int sep = mc.vocab_size == ByteTokenizer::kVocabSize ? kSep : -1;
  ProbeResult r;
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    const M m = load_checkpoint<M>(ck);
    r = run_probe(m, ex, classes, o, sep);
  });
  ProbeRun p;
  for (const auto& s : r.skipped) p.notes.push_back("note: " + ck + " is a baseline (fuser none): prefill " + s + " skipped");
  char line[512];
  std::snprintf(line, sizeof line, "probe of %s on %s: %zu items, %zu classes, chance %.3f, %d-fold grouped cross-validation, L2 %g\n",
                detail::excerpt(ck, 200).c_str(), detail::excerpt(task.empty() ? items : "task " + task, 200).c_str(), ex.size(), classes.size(),
                r.chance, o.folds, o.lambda);
  p.table += line;
  std::snprintf(line, sizeof line, "%-14s %-12s %6s %9s %17s\n", "prefill", "setting", "depth", "accuracy", "95% CI");
  p.table += line;
  for (const ProbeCell& c : r.cells) {
    std::snprintf(line, sizeof line, "%-14s %-12s %6s %9.3f    [%.3f, %.3f]\n", c.mode.c_str(), c.setting.empty() ? "all" : c.setting.c_str(),
                  c.depth == r.depths - 1 ? "final" : std::to_string(c.depth).c_str(), c.accuracy, c.lo, c.hi);
    p.table += line;
  }
  p.json = probe_json(r);
  p.json["checkpoint"] = ck, p.json["items"] = task.empty() ? items : "task:" + task, p.json["folds"] = o.folds, p.json["l2"] = o.lambda,
  p.json["seed"] = o.seed;
  p.out = out;
  return p;
}

/// \brief Writes a probe's JSON to `path` (fbt probe --out), naming the option when it cannot.
inline void write_probe_json(const ProbeRun& p, const std::string& path) {
  std::ofstream f(path);
  if (!(f << p.json.dump(1) << "\n")) throw Error("fbt probe: cannot write --out " + path);
}

inline int cmd_probe(CommandState& /*st*/, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt probe --checkpoint CKPT (--items FILE.jsonl | --task completion|delayed_memory|latest_write|running_sum|permutation|brackets)\n"
        "          [--prefill standard,fused(1),recurrent] [--folds 4] [--l2 1] [--seed 1] [--out FILE.json]\n"
        "          [--null_lines 0,8,32,128,256] [--groups G] [--registers 8] [--writes 2] [--task_seed 1]\n"
        "          [--task_difficulty 5] [--task_reveal 0.5] [--prefix_symbols 8,16,32]\n\n"
        "Reads the representation at each item's probe position at every depth (0 = the layer-0 input after the\n"
        "fuser, l = block l's output, L+1 = the final norm's output) under each prefill (standard, fused(k),\n"
        "recurrent = token by token with feedback, recurrent(k) = its last k tokens so), fits an L2 multinomial\n"
        "logistic regression per (prefill, depth) and prints its held-out accuracy (grouped k-fold cross-validation) with a Wilson 95%% interval and the\n"
        "chance level (the most frequent label's share); --out also writes them as JSON.\n"
        "--items: JSONL, one object a line: {\"text\": ... | \"tokens\": [ids], \"label\": int or string,\n"
        "\"position\": optional (index of the probed byte of text, or token; default the last), \"group\": optional}.\n"
        "--task: the paper's App. F items (data/probe_tasks.hpp), probed at the final ':'; --null_lines (completion,\n"
        "delayed_memory), --registers and --writes (latest_write) and --groups (0 = the paper's) size them.\n"
        "--task running_sum|permutation|brackets: documents of the running-state task (--task_difficulty: modulus /\n"
        "k of S_k / depth cap, --task_reveal: q), probed after each --prefix_symbols count t, labelled with the\n"
        "hidden state after the t-th symbol (running_sum: the sum mod m); --groups documents (0 = 128).\n");
    return 0;
  }
  const ProbeRun p = probe_command(std::move(a));
  for (const auto& n : p.notes) std::fprintf(stderr, "%s\n", n.c_str());
  std::printf("%s", p.table.c_str());
  if (!p.out.empty()) {
    write_probe_json(p, p.out);
    std::printf("wrote %s\n", p.out.c_str());
  }
  return 0;
}

}  // namespace cli
}  // namespace fbt
