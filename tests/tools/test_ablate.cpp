// The ablation runner of `fbt ablate` (fbt/ablate.hpp): grid expansion and token budgets, refusals that name
// the run and field, a whole grid on disk (results, summary.csv), skipping finished runs, resuming an
// interrupted run to the same result as an uninterrupted one, and a failed run recorded without
// stopping the grid.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fbt/ablate.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_tools_ablate {

using namespace fbt;
using fbt_test::TempDirTest;
namespace fs = std::filesystem;

namespace {

AblationGrid tiny_grid(const std::string& out) {
  AblationGrid g;
  TrainConfig& c = g.base;
  c.model.hidden_size = 16, c.model.num_hidden_layers = 1, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 32, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 1;
  c.batch_size = 2, c.seq_len = 32, c.warmup_steps = 1;
  c.schedule.feedback_start = 0.5;
  c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 3;
  g.tokens = 2 * 32 * 6;  // 6 steps
  g.evals = 2, g.task_examples = 3, g.task_lengths = {1, 2}, g.decode_timing = 0, g.out_dir = out;
  return g;
}

nlohmann::json read_json(const std::string& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::vector<std::string> lines(const std::string& p) {
  std::ifstream f(p);
  std::vector<std::string> v;
  for (std::string s; std::getline(f, s);) v.push_back(s);
  return v;
}

}  // namespace

class AblateFiles : public TempDirTest {};

TEST(AblateGrid, ExpandsRunsTimesVaryTimesSeedsWithTokenBudgets) {
  AblationGrid g = tiny_grid("out");
  g.runs = {{{"fuser", "none"}, {"tokens", "768"}}, {{"fuser", "glu"}}};
  g.vary = {{"detach", {"false", "true"}}};
  g.seeds = {1, 2};
  const auto runs = expand_grid(g);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0].name, "fuser=none+tokens=768+detach=false+seed=1");
  EXPECT_EQ(runs[1].name, "fuser=none+tokens=768+detach=false+seed=2");
  EXPECT_EQ(runs[7].name, "fuser=glu+detach=true+seed=2");
  EXPECT_EQ(runs[0].cfg.steps, 12);  // 768 / (2 x 32)
  EXPECT_EQ(runs[7].cfg.steps, 6);   // the grid's budget
  EXPECT_EQ(runs[7].cfg.seed, 2u);
  EXPECT_TRUE(runs[7].cfg.schedule.detach);
  EXPECT_EQ(runs[7].cfg.out_dir, "out/fuser=glu+detach=true+seed=2");
  EXPECT_EQ(runs[0].cfg.eval_every, 6);  // ceil(12 / 2) evaluations
  // a baseline run is single-pass whatever the base schedule says
  EXPECT_EQ(runs[0].cfg.schedule.feedback_start, 1.0);
  EXPECT_EQ(runs[0].cfg.schedule.K_max, 1);
  EXPECT_EQ(runs[7].cfg.schedule.feedback_start, 0.5);
  // values with characters unfit for a directory name are made safe
  g.runs = {{{"pass_mix", "2:0.75,3:0.25"}}};
  g.vary.clear(), g.seeds = {3};
  EXPECT_EQ(expand_grid(g)[0].name, "pass_mix=2_0.75_3_0.25+seed=3");
}

// Issue 47: a grid varies window_pattern and sliding_window like any other key (the runs were refused with
// "...but layer_types is ''": the pattern was never applied to a run).
TEST(AblateGrid, RunsVaryWindowPatternAndSlidingWindow) {
  AblationGrid g = tiny_grid("out");
  g.base.model.num_hidden_layers = 3;
  g.vary = {{"window_pattern", {"SL", "S"}}, {"sliding_window", {"4", "8"}}};
  const auto runs = expand_grid(g);
  ASSERT_EQ(runs.size(), 4u);
  const std::string S = "sliding_attention", L = "full_attention";
  const std::vector<std::string> sll = {S, L, L}, ssl = {S, S, L};  // the last layer is always full (nanochat)
  EXPECT_EQ(runs[0].cfg.model.layer_types, sll);
  EXPECT_EQ(runs[0].cfg.model.sliding_window, 4);
  EXPECT_EQ(runs[1].cfg.model.layer_window(0), 8);
  EXPECT_EQ(runs[2].cfg.model.layer_types, ssl);
  EXPECT_EQ(runs[3].cfg.model.layer_window(1), 8);
  for (const auto& r : runs) EXPECT_NO_THROW(validate(r.cfg)) << r.name;
  // a run whose pattern has no sliding layer but keeps a window is refused, naming the run (give sliding_window 0)
  g.vary = {{"window_pattern", {"L"}}};
  g.base.model.sliding_window = 4;
  EXPECT_FBT_ERROR(expand_grid(g), "ablate run window_pattern=L", "no layer is sliding_attention");
  g.vary.clear();  // grid runs entries too; a run's layer_types replace the base's pattern, and a run giving both must agree
  g.base.window_pattern = "SL";
  g.runs = {{{"window_pattern", "S"}}, {{"layer_types", "full_attention,full_attention,full_attention"}, {"sliding_window", "0"}},
            {{"window_pattern", "L"}, {"sliding_window", "0"}}};
  const auto r2 = expand_grid(g);
  ASSERT_EQ(r2.size(), 3u);
  EXPECT_EQ(r2[0].cfg.model.layer_types, ssl);
  EXPECT_EQ(r2[1].cfg.model.layer_types, (std::vector<std::string>{L, L, L}));
  EXPECT_EQ(r2[1].cfg.model.sliding_window, 0);
  for (const auto& r : r2) EXPECT_NO_THROW(validate(r.cfg)) << r.name;
  g.runs = {{{"window_pattern", "SL"}, {"layer_types", "full_attention,full_attention,full_attention"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "window_pattern \"SL\" gives layer_types", "layer_types is given as");
}

// A baseline crossed with schedule settings is single-pass whatever they say: runs whose effective config is
// the same are trained once and reported under every name, with the values they did not use said.
TEST(AblateGrid, RunsWithTheSameEffectiveConfigAreOneRun) {
  AblationGrid g = tiny_grid("out");
  g.vary = {{"fuser", {"none", "glu"}}, {"feedback_start", {"0.25", "0.75"}}};
  const auto runs = expand_grid(g);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].name, "fuser=none+feedback_start=0.25+seed=1");
  EXPECT_EQ(runs[0].same_as, "");
  EXPECT_EQ(runs[1].name, "fuser=none+feedback_start=0.75+seed=1");
  EXPECT_EQ(runs[1].same_as, "fuser=none+feedback_start=0.25+seed=1");
  ASSERT_EQ(runs[1].overridden.size(), 1u);
  EXPECT_NE(runs[1].overridden[0].find("feedback_start=0.75 (fuser none trains single-pass: feedback_start 1)"), std::string::npos)
      << runs[1].overridden[0];
  EXPECT_EQ(runs[2].same_as, "");  // glu at 0.25 and at 0.75 differ
  EXPECT_EQ(runs[3].same_as, "");
  // an option of another axis's fuser is dropped where it does not apply, and said so
  g.vary = {{"fuser", {"none", "gated_add"}}, {"fuser.alpha", {"0.1", "0.5"}}};
  const auto r2 = expand_grid(g);
  ASSERT_EQ(r2.size(), 4u);
  EXPECT_EQ(r2[1].same_as, r2[0].name);
  EXPECT_NE(r2[0].overridden.at(0).find("fuser.alpha=0.1 (fuser none has no such option)"), std::string::npos) << r2[0].overridden.at(0);
  // issue 47: an option no run's piece declares (a typo) was dropped from every run with a note; refused
  g.vary = {{"fuser", {"none", "gated_add"}}, {"fuser.alhpa", {"0.1", "0.5"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "option fuser.alhpa is declared by no run's fuser", "alpha", "a typo?");
  EXPECT_EQ(r2[3].same_as, "");
  EXPECT_EQ(r2[3].cfg.model.fuser_options.at("alpha").s, "0.5");
}

TEST_F(AblateFiles, ARunTrainedOnceIsReportedUnderEveryName) {
  AblationGrid g = tiny_grid(path("grid"));
  g.vary = {{"fuser", {"none"}}, {"feedback_start", {"0.25", "0.75"}}};
  g.task_examples = 0;
  ASSERT_EQ(run_grid(g, nullptr), 0);
  const std::string a = "fuser=none+feedback_start=0.25+seed=1", b = "fuser=none+feedback_start=0.75+seed=1";
  EXPECT_TRUE(fs::exists(path("grid/" + a + "/checkpoint")));
  EXPECT_FALSE(fs::exists(path("grid/" + b + "/checkpoint")));  // not trained again
  const nlohmann::json rb = read_json(path("grid/" + b + "/result.json"));
  EXPECT_EQ(rb["same_as"], a);
  EXPECT_EQ(rb["name"], b);
  EXPECT_EQ(rb["eval"], read_json(path("grid/" + a + "/result.json"))["eval"]);
  const auto rows = lines(path("grid/summary.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(rows[2].find(b), std::string::npos);
  EXPECT_NE(rows[2].find(a), std::string::npos);  // the same_as column
}

// The decoding modes of the task evaluation are the grid's to choose (any registered policy, a program's
// own too); a mode this program does not know is refused before any run starts.
TEST_F(AblateFiles, TaskModesAreTheGridsToChoose) {
  AblationGrid g = tiny_grid(path("modes"));
  g.task_lengths = {1};
  g.task_modes = {"sfot"};
  EXPECT_FBT_ERROR(expand_grid(g), "task_modes", "unknown decoding mode \"sfot\"");
  g.task_modes = {"standard", "fused(3)"};
  g.vary = {{"fuser", {"none", "glu"}}};
  ASSERT_EQ(run_grid(g, nullptr), 0);
  const nlohmann::json glu = read_json(path("modes/fuser=glu+seed=1/result.json")), none = read_json(path("modes/fuser=none+seed=1/result.json"));
  EXPECT_TRUE(glu["tasks"].contains("fused(3)@1x"));
  EXPECT_TRUE(glu["tasks"].contains("standard@1x"));
  EXPECT_FALSE(glu["tasks"].contains("soft@1x"));
  EXPECT_FALSE(none["tasks"].contains("fused(3)@1x")) << "a mode that feeds back is skipped on a baseline";
  EXPECT_TRUE(none["tasks"].contains("standard@1x"));
}

TEST(AblateGrid, RefusesBadInputNamingTheRunAndField) {
  AblationGrid g = tiny_grid("out");
  g.vary = {{"fuser", {"glu", "bogus"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "fuser=bogus");
  g.vary = {{"no_such_field", {"1"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "no_such_field");
  g.vary = {{"seed", {"1"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "seed is set by the grid");
  g.vary = {{"tokens", {"-5"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "tokens must be a positive number");
  g.vary = {{"fuser", {"glu", "glu"}}};
  EXPECT_FBT_ERROR(expand_grid(g), "same name");
  g.vary.clear(), g.seeds.clear();
  EXPECT_FBT_ERROR(expand_grid(g), "seed list is empty");
}


TEST_F(AblateFiles, GridFileIsReadAndUnknownKeysAreRefused) {
  const std::string p = path("grid.json");
  std::ofstream(p) << R"({"comment": "x", "base": {"hidden_size": 24, "data": "task:multihop"}, "runs": [{"fuser": "none"}, {"fuser": "glu"}],
                          "vary": {"sigma": [0, 0.05]}, "seeds": [4, 5], "tokens": 1000, "evals": 3, "task_lengths": [1, 3], "jobs": 2, "out_dir": "o"})";
  const AblationGrid g = load_ablation_grid(p);
  EXPECT_EQ(g.base.model.hidden_size, 24);
  EXPECT_EQ(g.base.data, "task:multihop");
  ASSERT_EQ(g.runs.size(), 2u);
  ASSERT_EQ(g.vary.size(), 1u);
  EXPECT_EQ(g.vary[0].second, (std::vector<std::string>{"0", "0.05"}));
  EXPECT_EQ(g.seeds, (std::vector<std::uint64_t>{4, 5}));
  EXPECT_EQ(g.tokens, 1000);
  EXPECT_EQ(g.evals, 3);
  EXPECT_EQ(g.task_lengths, (std::vector<int>{1, 3}));
  EXPECT_EQ(g.jobs, 2);
  EXPECT_EQ(g.out_dir, "o");
  std::ofstream(p) << R"({"vary": {"sigma": [0]}, "sedes": [1]})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "unknown key \"sedes\"");
  std::ofstream(p) << R"({"base": {"hiden_size": 3}})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "hiden_size");
  std::ofstream(p) << R"({"vary": {"sigma": []}})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "vary.sigma");
  std::ofstream(p) << R"({"seeds": [1.5]})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "seeds must be an integer");
  std::ofstream(p) << "{\"seeds\": [1";
  EXPECT_FBT_ERROR(load_ablation_grid(p), p, "JSON");
  EXPECT_FBT_ERROR(load_ablation_grid(path("none.json")), "cannot open grid file");
}

TEST_F(AblateFiles, GridNumbersAreRangeCheckedAndKeysUnique) {
  // integers were read as long long and cast to int: 4294967297 jobs was 1 job
  const std::string p = path("grid.json");
  std::ofstream(p) << R"({"jobs": 4294967297})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), p, "jobs must be in [1, 64], got 4294967297");
  std::ofstream(p) << R"({"evals": 0})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "evals must be in [1, ");
  std::ofstream(p) << R"({"task_lengths": [1, 65]})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "task_lengths must be in [1, 64]");
  std::ofstream(p) << R"({"decode_timing": 2})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "decode_timing must be in [0, 1]");
  std::ofstream(p) << R"({"seeds": [-1]})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "seeds must be an integer");
  std::ofstream(p) << R"({"seeds": [18446744073709551615]})";
  EXPECT_EQ(load_ablation_grid(p).seeds, (std::vector<std::uint64_t>{18446744073709551615ull}));
  std::ofstream(p) << R"({"tokens": 1e300})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "at most 1e15");
  std::ofstream(p) << R"({"jobs": 2, "jobs": 3})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "duplicate key \"jobs\"");
  std::ofstream(p) << R"({"base": {"hidden_size": 4294967312}})";
  EXPECT_FBT_ERROR(load_ablation_grid(p), "hidden_size", "out of range");
}

TEST(AblateGrid, LongRunsKeepTheirCadenceInRange) {
  // eval_every = ceil(steps / evals) was computed in long and cast to int
  AblationGrid g = tiny_grid("out");
  g.tokens = 0, g.base.steps = 100000000000L, g.evals = 2;
  EXPECT_FBT_ERROR(expand_grid(g), "largest eval_every", "raise evals");
  g.evals = 1000;
  EXPECT_EQ(expand_grid(g)[0].cfg.eval_every, 100000000);
}

TEST_F(AblateFiles, RunsAGridWritesResultsAndSummaryAndSkipsFinishedRuns) {
  AblationGrid g = tiny_grid(path("grid"));
  g.runs = {{{"fuser", "none"}}, {{"fuser", "glu"}}};
  g.jobs = 2;
  ASSERT_EQ(run_grid(g, nullptr), 0);
  for (const char* name : {"fuser=none+seed=1", "fuser=glu+seed=1"}) {
    const std::string d = g.out_dir + "/" + name;
    const auto r = read_json(d + "/result.json");
    EXPECT_EQ(r.at("status"), "done") << r.dump();
    EXPECT_EQ(r.at("steps"), 6);
    EXPECT_EQ(r.at("tokens").get<double>(), 6 * 64);
    EXPECT_TRUE(fs::exists(d + "/checkpoint/model.safetensors"));
    EXPECT_EQ(lines(d + "/train.jsonl").size(), 6u);
    EXPECT_EQ(lines(d + "/eval.jsonl").size(), 2u);  // evals = 2
    const bool fb = std::string(name).find("glu") != std::string::npos;
    EXPECT_EQ(r.at("eval").at("val_loss").size(), fb ? 3u : 1u);
    EXPECT_EQ(r.at("tasks").size(), fb ? 8u : 2u);  // standard (+ soft, fused(1), fused(2)) at 1x and 2x
    EXPECT_TRUE(r.at("tasks").contains("standard@2x"));
    EXPECT_EQ(r.at("tasks").at("standard@2x").at("length_mult"), 2);
    if (fb) EXPECT_EQ(r.at("eval").at("contraction").at("loss").size(), 3u);
    // the run's compute: its thread's CPU time (threads 1), positive and within its wall time (two jobs at once
    // on however many cores: never more than the run's own wall seconds, plus the clocks' granularity)
    ASSERT_TRUE(r.contains("cpu_seconds")) << r.dump();
    EXPECT_GT(r.at("cpu_seconds").get<double>(), 0);
    EXPECT_LE(r.at("cpu_seconds").get<double>(), r.at("seconds").get<double>() + 0.01);
  }
  auto csv = lines(g.out_dir + "/summary.csv");
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0].rfind("name,fuser,seed,status,steps,tokens,compute_tokens,seconds,val_loss_pass1", 0), 0u) << csv[0];
  EXPECT_NE(csv[0].find("accuracy_fused(2)@2x"), std::string::npos);
  EXPECT_EQ(csv[1].rfind("fuser=none+seed=1,none,1,done,6,", 0), 0u) << csv[1];

  // a second call skips both runs (their results are untouched)
  const auto before = fs::last_write_time(g.out_dir + "/fuser=glu+seed=1/result.json");
  ASSERT_EQ(run_grid(g, nullptr), 0);
  EXPECT_EQ(fs::last_write_time(g.out_dir + "/fuser=glu+seed=1/result.json"), before);
  // ... unless the grid now asks for something else under the same name
  g.base.lr = 1e-3;
  EXPECT_FBT_ERROR(run_grid(g, nullptr), "was made with another config");
}

TEST_F(AblateFiles, AnInterruptedRunResumesToTheSameResultAsAnUninterruptedOne) {
  AblationGrid g = tiny_grid(path("straight"));
  g.runs = {{{"fuser", "glu"}}};
  g.tokens = 2 * 32 * 8, g.evals = 2;  // 8 steps, checkpoints at 4 and 8
  ASSERT_EQ(run_grid(g, nullptr), 0);
  const auto straight = read_json(g.out_dir + "/fuser=glu+seed=1/result.json");

  // what a run killed after its first checkpoint leaves behind: train.jsonl and checkpoint/ at step 4
  AblationGrid h = g;
  h.out_dir = path("killed");
  const AblationRun run = expand_grid(h)[0];
  {
    Trainer<Model<float>> t(run.cfg);
    for (int i = 0; i < 4; ++i) t.train_step();
    t.save_checkpoint(run.cfg.out_dir + "/checkpoint");
  }
  ASSERT_EQ(run_grid(h, nullptr), 0);
  const auto resumed = read_json(h.out_dir + "/fuser=glu+seed=1/result.json");
  EXPECT_EQ(resumed.at("eval").at("val_loss"), straight.at("eval").at("val_loss"));  // bit for bit (JSON keeps 17 digits)
  EXPECT_EQ(resumed.at("eval").at("contraction"), straight.at("eval").at("contraction"));
  EXPECT_EQ(resumed.at("compute_tokens"), straight.at("compute_tokens"));
  // it did continue (a fresh start would have logged steps 0..7): only steps 4..7 are in its log
  const auto log = lines(run.cfg.out_dir + "/train.jsonl");
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(nlohmann::json::parse(log[0]).at("step"), 4);
}

TEST_F(AblateFiles, AFailedRunIsRecordedAndTheGridGoesOn) {
  AblationGrid g = tiny_grid(path("grid"));
  g.runs = {{{"lr", "1e30"}, {"grad_clip", "0"}}, {{"lr", "0.001"}}};  // the first diverges to a non-finite loss
  g.task_examples = 0;
  EXPECT_EQ(run_grid(g, nullptr), 1);
  const auto bad = read_json(g.out_dir + "/lr=1e30+grad_clip=0+seed=1/result.json");
  EXPECT_EQ(bad.at("status"), "failed");
  EXPECT_NE(bad.at("error").get<std::string>().find("training stopped at step"), std::string::npos) << bad.dump();
  EXPECT_EQ(read_json(g.out_dir + "/lr=0.001+seed=1/result.json").at("status"), "done");
  const auto csv = lines(g.out_dir + "/summary.csv");
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_NE(csv[0].find(",error"), std::string::npos);
  EXPECT_NE(csv[1].find("failed"), std::string::npos);
}

TEST_F(AblateFiles, RunningStateTasksRecordTheOptimumAndTraceTagRunsReportEachLevel) {
  AblationGrid g = tiny_grid(path("grid"));
  g.runs = {{{"data", "task:brackets"}, {"task_difficulty", "3"}, {"task_length", "10"}},
            {{"trace_tag", "true"}}};
  g.task_lengths = {1};
  ASSERT_EQ(run_grid(g, nullptr), 0);
  // the running-state run: its optimum beside the losses, losses by position, no answers to check
  const auto s = read_json(g.out_dir + "/data=task_brackets+task_difficulty=3+task_length=10+seed=1/result.json");
  ASSERT_EQ(s.at("status"), "done") << s.dump();
  const auto& e = s.at("eval");
  StateTaskConfig sc;
  sc.name = "brackets", sc.difficulty = 3, sc.length = 10;
  EXPECT_NEAR(e.at("optimal_loss").get<double>(), StateTaskDataset(sc).mean_optimal_loss(32, 2), 1e-12);
  EXPECT_TRUE(e.contains("seq_optimal_loss"));
  EXPECT_EQ(e.at("loss_by_position").at("optimal").size(), 33u);
  EXPECT_FALSE(s.contains("tasks"));
  // the trace_tag run: every requested level, on the same task_examples problems
  const auto r = read_json(g.out_dir + "/trace_tag=true+seed=1/result.json");
  ASSERT_EQ(r.at("status"), "done") << r.dump();
  EXPECT_FALSE(r.at("eval").contains("optimal_loss"));
  const auto& t = r.at("tasks").at("soft@1x");
  EXPECT_EQ(t.at("examples"), 3 * g.task_examples);
  for (const char* lv : {"full", "compressed", "answer"}) EXPECT_EQ(t.at("levels").at(lv).at("examples"), g.task_examples) << lv;
  const auto csv = lines(g.out_dir + "/summary.csv");
  ASSERT_EQ(csv.size(), 3u);
  for (const char* col : {",optimal_loss,", ",seq_optimal_loss", ",accuracy_soft@1x_answer,", ",median_trace_fused(2)@1x_full"})
    EXPECT_NE(csv[0].find(col), std::string::npos) << col << " in " << csv[0];
}

}  // namespace test_tools_ablate
