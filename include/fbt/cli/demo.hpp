// fbt/cli/demo.hpp: `fbt demo`, a full-bandwidth model (glu) against baselines on the same tokens.
#pragma once

#include <algorithm>
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
#include "../train/task_eval.hpp"
#include "common.hpp"

namespace fbt {
namespace cli {

// ------------------------------------------------------------------------------------------- demo
struct DemoModel {
  std::string name;
  std::atomic<long> progress{0};
  long steps = 0;
  double tokens = 0, compute_tokens = 0;
  EvalReport eval;
  std::vector<std::vector<double>> window_loss;  ///< (passes, windows) each validation window's loss: the paired t-intervals' pairs
  std::vector<TaskEvalResult> tasks;
  std::map<int, std::vector<TaskEvalResult>> tasks_at;  ///< --eval_lengths: the same modes at m x the training length (m > 1)
  std::map<std::string, double> ms_per_token;
  std::string error;
};

inline int cmd_demo(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt demo [--task running_sum|permutation|brackets|addition|state_tracking|multihop] [--task_difficulty N]\n"
        "         [--preset paper|v1] [--steps N] [--baseline_2x true|false] [--trace_tag true|false] [--examples N]\n"
        "         [--eval_lengths 1,2,4] [--out_dir DIR]\n\n"
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
        "requested level. Every two modes (and models) evaluated on the same problems get McNemar's exact test, and\n"
        "every two validation losses a paired 95%% t-interval over the same windows. --eval_lengths also evaluates\n"
        "the task at those multiples of the training difficulty (length generalisation; RoPE positions up to the\n"
        "model's max_position_embeddings, a longer length is refused). Logs and checkpoints go to OUT_DIR/<model>,\n"
        "the table also to OUT_DIR/demo.json.\n");
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
  std::vector<int> lengths;  // --eval_lengths: multiples of the training difficulty beyond 1x
  for (const auto& x : split(take(a, "eval_lengths", "1"), ',')) {
    const int m = int_option<int>("eval_lengths", x, 1, detail::kMaxLengthMult, "a list like 1,2,4");
    if (m > 1 && std::find(lengths.begin(), lengths.end(), m) == lengths.end()) lengths.push_back(m);
  }
  if (state && !lengths.empty())
    throw Error("--eval_lengths: " + task_name + " is a running-state task, evaluated by its losses; lengths apply to the reasoning tasks' answers");
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
  for (int m : lengths) check_eval_length(task_config(base), m, cf.model.max_position_embeddings);  // before anything is removed or trained
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
  std::map<int, std::vector<Example>> examples_at;  // the same seed at every length: different problems, one per example
  for (int m : lengths) examples_at[m] = base.trace_tag ? eval_examples_at_levels(task, n_examples, 20261202, m) : eval_examples(task, n_examples, 20261202, m);
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&](DemoModel& d, auto& trainer, std::vector<std::string> modes) {
    try {
      trainer.progress_counter = &d.progress;
      trainer.run(nullptr);
      d.eval = trainer.evaluate();
      {  // the same windows' losses one by one, for the paired t-intervals
        using TM = std::decay_t<decltype(trainer.model)>;
        Workspace<TM> ws;
        const int K = trainer.model.feedback() ? std::max(trainer.cfg.schedule.K_max, 1) : 1;
        evaluate_passes(trainer.model, ws, *trainer.data, trainer.cfg.seq_len, K, trainer.cfg.eval_windows, 8, nullptr, &d.window_loss);
      }
      auto& dec = trainer.decoder();
      if (!state)
        for (const auto& md : modes) d.tasks.push_back(evaluate_task(dec, task, examples, DecodeModeSpec::parse(md), max_bytes));
      for (int m : lengths)
        for (const auto& md : modes)
          d.tasks_at[m].push_back(evaluate_task(dec, task, examples_at[m], DecodeModeSpec::parse(md), max_solution_bytes(task, m) + 8));
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
  st.progress_started = true;
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
  // paired tests: every comparison of two modes (or two models) on the same problems and windows
  nlohmann::json paired{{"mcnemar", nlohmann::json::array()}, {"loss", nlohmann::json::array()}};
  if (!state) {
    std::vector<std::pair<std::string, const TaskEvalResult*>> runs;
    for (int i = 0; i < n_models; ++i)
      for (const auto& t : models[i].tasks) runs.push_back({models[i].name + " " + t.mode, &t});
    std::printf("\npaired tests on the same %d problems (McNemar's exact test, two-sided; b = right only under the first):\n", int(examples.size()));
    for (const ModePairTest& t : mode_pair_tests(runs)) {
      std::printf("  %s\n", format_pair_test(t).c_str());
      paired["mcnemar"].push_back({{"a", t.a}, {"b", t.b}, {"n", t.test.n}, {"both", t.test.both}, {"neither", t.test.neither},
                                   {"b_only", t.test.b}, {"c_only", t.test.c}, {"p_value", t.test.p_value}});
    }
  }
  for (int m : lengths) {  // length generalisation: the same modes at m x the training difficulty
    std::printf("\nat %dx the training length (%s difficulty %d, %d examples, at most %d bytes each; positions up to %d of max_position_embeddings %d):\n", m,
                task.name.c_str(), task.difficulty * m, int(examples_at[m].size()), max_solution_bytes(task, m) + 8, task_positions_needed(task, m),
                cf.model.max_position_embeddings);
    auto find_at = [m](const DemoModel& d, const std::string& md) -> const TaskEvalResult* {
      auto it = d.tasks_at.find(m);
      if (it == d.tasks_at.end()) return nullptr;
      for (const auto& t : it->second)
        if (t.mode == md) return &t;
      return nullptr;
    };
    row("", head);
    for (const char* md : {"standard", "soft", "fused(1)", "fused(2)"}) {
      bool any = false;
      for (int i = 0; i < n_models; ++i) any = any || find_at(models[i], md);
      if (!any) continue;
      row(std::string("accuracy, ") + md, per_model([&](const DemoModel& d) { auto r = find_at(d, md); return r ? cell(r->accuracy, "%.3f") : "-"; }));
      row(std::string("median trace bytes, ") + md,
          per_model([&](const DemoModel& d) { auto r = find_at(d, md); return r ? cell(r->median_trace, "%.1f") : "-"; }));
    }
    std::vector<std::pair<std::string, const TaskEvalResult*>> runs;
    for (int i = 0; i < n_models; ++i)
      if (models[i].tasks_at.count(m))
        for (const auto& t : models[i].tasks_at.at(m)) runs.push_back({models[i].name + " " + t.mode, &t});
    std::printf("paired tests at %dx (McNemar's exact test):\n", m);
    for (const ModePairTest& t : mode_pair_tests(runs)) {
      std::printf("  %s\n", format_pair_test(t).c_str());
      paired["mcnemar_at"][std::to_string(m) + "x"].push_back({{"a", t.a}, {"b", t.b}, {"n", t.test.n}, {"both", t.test.both}, {"neither", t.test.neither},
                                                             {"b_only", t.test.b}, {"c_only", t.test.c}, {"p_value", t.test.p_value}});
    }
  }
  {
    const char* pass_name[3] = {"standard (pass 1)", "fused(1) (pass 2)", "fused(2) (pass 3)"};
    auto interval = [&](int ma, int pa, int mb, int pb) {
      const auto &wa = models[ma].window_loss, &wb = models[mb].window_loss;
      if (pa >= int(wa.size()) || pb >= int(wb.size())) return;
      const PairedInterval r = paired_t_interval_where_both(wa[pa], wb[pb]);  // the windows where both have a loss
      const std::string a = models[ma].name + " " + pass_name[pa], b = models[mb].name + " " + pass_name[pb];
      std::printf("  %s - %s: %s [%s, %s] over %d windows\n", a.c_str(), b.c_str(), cell(r.mean).c_str(), cell(r.lo).c_str(), cell(r.hi).c_str(), r.n);
      paired["loss"].push_back({{"a", a}, {"b", b}, {"windows", r.n}, {"mean_difference", r.mean}, {"ci95", {r.lo, r.hi}}});
    };
    std::printf("\nvalidation loss differences on the same windows (mean, paired 95%% t-interval; < 0: the first is lower):\n");
    for (int k = 1; k < int(f.window_loss.size()); ++k) interval(0, k, 0, 0);
    for (int i = 1; i < n_models; ++i)
      for (int k = 0; k < int(f.window_loss.size()); ++k) interval(0, k, i, 0);
    if (double_baseline) interval(2, 0, 1, 0);
  }
  if (!state) std::printf("\n%d task examples (greedy, at most %d bytes each);", int(examples.size()), max_bytes);
  std::printf("%straining tokens %.3gM (the 2x baseline %.3gM); token-equivalent compute of the full-bandwidth model %.3gM.\n"
              "The decode timings ran while another model was still working, so they are indicative only.\n",
              state ? "\n" : " ", f.tokens / 1e6, double_baseline ? models[2].tokens / 1e6 : 0.0, f.compute_tokens / 1e6);
  nlohmann::json j;
  j["eval_lengths"] = lengths, j["max_position_embeddings"] = cf.model.max_position_embeddings;
  j["preset"] = preset, j["data"] = base.data, j["task_difficulty"] = base.task_difficulty, j["steps"] = base.steps;
  for (int i = 0; i < n_models; ++i) {
    const DemoModel& d = models[i];
    nlohmann::json m{{"val_loss", d.eval.val_loss}, {"tokens", d.tokens}, {"compute_tokens", d.compute_tokens},
                     {"ms_per_token", d.ms_per_token}, {"steps", d.steps}};
    if (!std::isnan(d.eval.seq_loss_standard)) m["seq_loss_standard"] = d.eval.seq_loss_standard;
    if (!std::isnan(d.eval.seq_loss_soft)) m["seq_loss_soft"] = d.eval.seq_loss_soft;
    if (!std::isnan(d.eval.optimal_loss)) m["optimal_loss"] = d.eval.optimal_loss;
    if (!std::isnan(d.eval.seq_optimal_loss)) m["seq_optimal_loss"] = d.eval.seq_optimal_loss;
    for (const auto& [len, rs] : d.tasks_at)
      for (const auto& t : rs)
        m["tasks_at"][std::to_string(len) + "x"][t.mode] = {{"accuracy", t.accuracy}, {"median_trace", t.median_trace}, {"completed", t.completed}};
    for (const auto& t : d.tasks) {
      m["tasks"][t.mode] = {{"accuracy", t.accuracy}, {"median_trace", t.median_trace}, {"completed", t.completed}};
      for (const auto& l : t.levels)
        m["tasks"][t.mode]["levels"][l.level] = {{"accuracy", l.accuracy}, {"median_trace", l.median_trace}, {"completed", l.completed}};
    }
    j[d.name] = m;
  }
  j["paired"] = paired;
  std::filesystem::create_directories(out_dir);
  std::ofstream(out_dir + "/demo.json") << j.dump(2) << "\n";
  std::printf("table saved to %s/demo.json\n", out_dir.c_str());
  return 0;
}

}  // namespace cli
}  // namespace fbt
