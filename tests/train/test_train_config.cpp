// The training config (train/train_config.hpp): every value read from a flag or a config file is
// parsed whole and range-checked (no wrap, no trailing junk, no inf or nan), every field is validated
// before a run starts (so a run never writes a checkpoint that eval or resume then refuse), and config
// files are regular files of bounded size without duplicate keys.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

#include "fbt/train/trainer.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_train_config {

using namespace fbt;
using fbt_test::TempDirTest;

namespace {

TEST(ParseInteger, WholeTokensInTheTypesRangeOnly) {
  EXPECT_EQ(detail::parse_integer<int>("f", "42"), 42);
  EXPECT_EQ(detail::parse_integer<int>("f", "-7"), -7);
  EXPECT_EQ(detail::parse_integer<int>("f", "1e6"), 1000000);  // a whole number written as a real
  EXPECT_EQ(detail::parse_integer<int>("f", "2147483647"), std::numeric_limits<int>::max());
  EXPECT_EQ(detail::parse_integer<long>("f", "9223372036854775807"), std::numeric_limits<long>::max());
  EXPECT_EQ(detail::parse_integer<std::uint64_t>("f", "18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
  // wrapping values are refused, not truncated: 4294967312 = 2^32 + 16 used to train a 16-wide model
  EXPECT_FBT_ERROR(detail::parse_integer<int>("hidden_size", "4294967312"), "config field hidden_size", "\"4294967312\"", "out of range",
                   "[-2147483648, 2147483647]");
  EXPECT_FBT_ERROR(detail::parse_integer<int>("f", "2147483648"), "out of range");
  EXPECT_FBT_ERROR(detail::parse_integer<int>("f", "1e10"), "out of range");
  EXPECT_FBT_ERROR(detail::parse_integer<long>("steps", "99999999999999999999"), "config field steps", "out of range");
  EXPECT_FBT_ERROR(detail::parse_integer<long>("f", "9223372036854775808"), "out of range");
  EXPECT_FBT_ERROR(detail::parse_integer<std::uint64_t>("seed", "-1"), "config field seed", "out of range");
  EXPECT_FBT_ERROR(detail::parse_integer<std::uint64_t>("seed", "18446744073709551616"), "out of range");
  for (const char* bad : {"", " 3", "3 ", "12abc", "1.5", "0x10", "inf", "nan", "-", "e5", "1e"})
    EXPECT_FBT_ERROR(detail::parse_integer<int>("f", bad), "config field f: expected an integer");
}

TEST(ParseDouble, FiniteWholeNumbersOnly) {
  EXPECT_EQ(detail::parse_double("f", "0.5"), 0.5);
  EXPECT_EQ(detail::parse_double("f", "-1e-3"), -1e-3);
  for (const char* bad : {"inf", "-inf", "nan", "NaN", "infinity", "1e999"})
    EXPECT_FBT_ERROR(detail::parse_double("rope_theta", bad), "config field rope_theta: expected a finite number");
  for (const char* bad : {"", "0.5junk", " 1", "0x1p3", "1,5"}) EXPECT_FBT_ERROR(detail::parse_double("f", bad), "config field f: expected a number");
}

TEST(TrainConfigFields, NonFiniteModelRealsAreRefusedWhenSet) {
  // these trained and exited 0, then the checkpoint held null and eval/resume refused it
  TrainConfig c;
  EXPECT_FBT_ERROR(set_config_field(c, "rope_theta", "inf"), "rope_theta", "\"inf\"");
  EXPECT_FBT_ERROR(set_config_field(c, "rms_norm_eps", "inf"), "rms_norm_eps", "\"inf\"");
  EXPECT_FBT_ERROR(set_config_field(c, "gated_add_alpha", "nan"), "gated_add_alpha", "\"nan\"");
  EXPECT_FBT_ERROR(set_config_field(c, "grad_clip", "nan"), "grad_clip", "\"nan\"");
  EXPECT_FBT_ERROR(set_config_field(c, "hidden_size", "4294967312"), "hidden_size", "out of range");
  EXPECT_EQ(c.model.hidden_size, TrainConfig{}.model.hidden_size);  // unchanged by a refused value
  set_config_field(c, "steps", "1e5");
  EXPECT_EQ(c.steps, 100000);
}

// nanochat's window pattern: S/L tiled over the layers, the last layer full, whatever the order of the flags;
// the config file's keys (window_pattern, sliding_window, layer_types as an array) work too.
// Issue 47: window_pattern and layer_types are two spellings of the layers; given together and different, the
// pattern silently won. Refused naming both; the same value twice is fine; a window with no sliding layer is refused.
TEST(TrainConfigFields, WindowPatternAndLayerTypesThatDisagreeAreRefused) {
  using F = std::vector<std::pair<std::string, std::string>>;
  const F both = {{"num_hidden_layers", "2"}, {"window_pattern", "SL"}, {"sliding_window", "4"}, {"layer_types", "full_attention,full_attention"}};
  try {
    make_train_config("", both);
    ADD_FAILURE() << "window_pattern SL and layer_types full,full were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("window_pattern \"SL\""), std::string::npos) << m;
    EXPECT_NE(m.find("layer_types is given as"), std::string::npos) << m;
  }
  TrainConfig g;  // the grid's base path refuses the same
  EXPECT_THROW(set_config_fields(g, both), Error);
  const F agree = {{"num_hidden_layers", "2"}, {"window_pattern", "SL"}, {"sliding_window", "4"}, {"layer_types", "sliding_attention,full_attention"}};
  EXPECT_NO_THROW(validate(make_train_config("", agree)));
  const F unused = {{"num_hidden_layers", "2"}, {"sliding_window", "4"}};  // --sliding_window with no sliding layer
  try {
    validate(make_train_config("", unused));
    ADD_FAILURE() << "a window with no sliding layer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no layer is sliding_attention"), std::string::npos) << e.what();
  }
}

TEST(TrainConfigFields, WindowPatternMapsToLayerTypes) {
  using V = std::vector<std::string>;
  const std::string S = "sliding_attention", L = "full_attention";
  EXPECT_EQ(window_pattern_layer_types("SSSL", 6), (V{S, S, S, L, S, L}));  // the last layer full (nanochat)
  EXPECT_EQ(window_pattern_layer_types("sl", 3), (V{S, L, L}));
  EXPECT_EQ(window_pattern_layer_types("L", 2), (V{L, L}));
  EXPECT_THROW(window_pattern_layer_types("SXL", 4), Error);
  EXPECT_THROW(window_pattern_layer_types("", 4), Error);
  for (bool layers_first : {true, false}) {
    std::vector<std::pair<std::string, std::string>> flags = {{"window_pattern", "SSSL"}, {"sliding_window", "64"}};
    flags.insert(layers_first ? flags.begin() : flags.end(), {"num_hidden_layers", "8"});
    const TrainConfig c = make_train_config("", flags);
    EXPECT_EQ(c.model.layer_types, (V{S, S, S, L, S, S, S, L}));
    EXPECT_EQ(c.model.sliding_window, 64);
    EXPECT_NO_THROW(validate(c));
    // recorded and read back: the same model
    TrainConfig back;
    apply_json(back, to_json(c), "record");
    EXPECT_EQ(back.model.layer_types, c.model.layer_types);
    EXPECT_EQ(back.window_pattern, "SSSL");
  }
  TrainConfig c;
  set_config_field(c, "window_pattern", "SL");
  EXPECT_THROW(validate(c), Error);  // layer_types not applied: validate names the mismatch
  try {
    validate(c);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window_pattern"), std::string::npos) << e.what();
  }
  apply_window_pattern(c);
  set_config_field(c, "sliding_window", "16");
  EXPECT_NO_THROW(validate(c));
  TrainConfig f;  // a config file's keys
  apply_json(f, nlohmann::json{{"num_hidden_layers", 3}, {"sliding_window", 8}, {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}}},
             "file", true);
  EXPECT_EQ(f.model.layer_window(2), 8);
  EXPECT_NO_THROW(validate(f));
  EXPECT_FALSE(to_json(TrainConfig{}).contains("window_pattern"));  // an older record is unchanged
  EXPECT_FALSE(to_json(TrainConfig{}).contains("layer_types"));
}

TEST(TrainConfigFields, PassMixIsParsedWhole) {
  TrainConfig c;
  set_config_field(c, "pass_mix", "2:0.5,3:0.5");
  EXPECT_EQ(c.schedule.pass_mix, (std::map<int, double>{{2, 0.5}, {3, 0.5}}));
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2:0.5junk"), "pass_mix", "\"0.5junk\"", "not a number");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2:inf,3:1"), "pass_mix", "\"inf\"", "finite");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2:nan"), "pass_mix", "finite");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2x:0.5"), "pass_mix", "\"2x\"");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2:0.5,2:0.5"), "pass_mix", "K = 2 appears twice");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "2:0.5,"), "pass_mix", "no ':'");
  EXPECT_FBT_ERROR(set_config_field(c, "pass_mix", "99999999999:1"), "pass_mix");
}

/// validate(c) with one field set from text: the message names the field (and the rule's words).
void expect_refused(const char* field, const char* value, const std::string& part) {
  TrainConfig c;
  set_config_field(c, field, value);
  EXPECT_FBT_ERROR(validate(c), field, part);
}

TEST(TrainConfigValidate, EveryFieldIsRangeChecked) {
  EXPECT_NO_THROW(validate(TrainConfig{}));
  expect_refused("grad_clip", "-1", "must be finite and in [0, inf)");
  expect_refused("lr", "0", "(0, inf)");
  expect_refused("min_lr", "1", "[0, lr]");
  expect_refused("weight_decay", "-0.1", "[0, inf)");
  expect_refused("beta1", "1", "[0, 1)");
  expect_refused("beta2", "-0.5", "[0, 1)");
  expect_refused("adam_eps", "0", "(0, inf)");
  expect_refused("wsd_decay_frac", "1.5", "[0, 1]");
  expect_refused("sigma", "-1", "must be finite and >= 0");
  expect_refused("lambda", "-1", "must be finite and >= 0");
  expect_refused("feedback_start", "1.5", "[0, 1]");
  expect_refused("warmup_steps", "-1", ">= 0");
  expect_refused("lambda_ramp", "-3", ">= 0");
  expect_refused("eval_every", "-1", ">= 0");
  expect_refused("eval_windows", "-1", ">= 0");
  expect_refused("seq_eval_windows", "-5", ">= -1");
  expect_refused("monitor_passes", "-1", ">= 0");
  expect_refused("monitor_passes", "1001", "<= 1000");
  expect_refused("checkpoint_every", "-1", ">= 0");
  expect_refused("K_max", "1001", "[1, 1000]");
  expect_refused("grad_passes", "4", "[0, K_max = 3]");
  expect_refused("prefix", "-3", "uniform, none or a number");
  expect_refused("prefix", "99999999999999999999", "uniform, none or a number");
  expect_refused("val_fraction", "1", "[0, 1)");
  expect_refused("doc_split", "paragraphs", "blank_line or none");
  expect_refused("p_full", "-1", "finite and >= 0");
  expect_refused("batch_size", "0", ">= 1");
  expect_refused("grad_accum", "0", ">= 1");
  expect_refused("steps", "0", ">= 1");
  expect_refused("threads", "0", "[1, 256]");
  expect_refused("lr_schedule", "linear", "linear");
  expect_refused("max_memory_gb", "-1", "[0, inf)");
  expect_refused("task_difficulty", "100000", "[1, 1000] for task addition (digits), got 100000");
  expect_refused("out_dir", "", "empty");
  TrainConfig c;
  c.batch_size = 1 << 20, c.seq_len = 4096;
  EXPECT_FBT_ERROR(validate(c), "batch_size", "positions per micro-batch");
}

TEST(TrainConfigValidate, RunningStateTasksAndTheirFieldsAreChecked) {
  // the running-state tasks (data/state_tasks.hpp): task_difficulty's range is the task's own
  auto state = [](const char* name, int d) {
    TrainConfig c;
    c.data = std::string("task:") + name, c.task_difficulty = d;
    return c;
  };
  for (const auto& [name, lo, hi] : {std::tuple<const char*, int, int>{"running_sum", 2, 10}, {"permutation", 3, 4}, {"brackets", 2, 64}}) {
    EXPECT_NO_THROW(validate(state(name, lo))) << name;
    EXPECT_NO_THROW(validate(state(name, hi))) << name;
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "] for task " + name;
    EXPECT_FBT_ERROR(validate(state(name, lo - 1)), "invalid training config: task_difficulty", range, "got " + std::to_string(lo - 1));
    EXPECT_FBT_ERROR(validate(state(name, hi + 1)), "invalid training config: task_difficulty", range, "got " + std::to_string(hi + 1));
  }
  expect_refused("task_reveal", "1.5", "[0, 1]");
  expect_refused("task_reveal", "-0.25", "[0, 1]");
  expect_refused("task_length", "0", "[1, 4096]");
  expect_refused("task_length", "4097", "[1, 4096]");
  TrainConfig c = state("brackets", 3);
  c.task_reveal = std::nan("");
  EXPECT_FBT_ERROR(validate(c), "task_reveal");
  c = state("sorting", 3);
  EXPECT_FBT_ERROR(validate(c), "data", "unknown task \"sorting\"", "running_sum, permutation, brackets");
  // the new fields read back from the run's record; trace_tag is a boolean
  c = state("permutation", 4);
  c.task_length = 77, c.task_reveal = 0.25, c.trace_tag = true;
  TrainConfig back;
  apply_json(back, to_json(c), "test");
  EXPECT_EQ(back.task_length, 77);
  EXPECT_EQ(back.task_reveal, 0.25);
  EXPECT_TRUE(back.trace_tag);
  EXPECT_FBT_ERROR(set_config_field(c, "trace_tag", "maybe"), "trace_tag", "true or false");
  EXPECT_EQ(TrainConfig{}.task_length, 32);
  EXPECT_EQ(TrainConfig{}.task_reveal, 0.5);
  EXPECT_FALSE(TrainConfig{}.trace_tag);
  // the data source each names
  EXPECT_NE(dynamic_cast<StateTaskDataset*>(make_data_source(state("running_sum", 2)).get()), nullptr);
  TrainConfig a;
  a.trace_tag = true;
  const auto src = make_data_source(a);
  const auto* tasks = dynamic_cast<TaskDataset*>(src.get());
  ASSERT_NE(tasks, nullptr);
  EXPECT_TRUE(tasks->config().trace_tag);
}

TEST(TrainConfigValidate, TrainingDifficultyRangesAreCheckedPerTaskFamily) {
  auto with = [](const char* data, int d, int lo, int hi) {
    TrainConfig c;
    c.data = data, c.task_difficulty = d, c.task_min_difficulty = lo, c.task_max_difficulty = hi;
    return c;
  };
  // a reasoning task: the range reaches the data source; -1 = task_difficulty; written to the record only when set
  TrainConfig c = with("task:addition", 3, 1, 6);
  EXPECT_NO_THROW(validate(c));
  const auto src = make_data_source(c);
  const auto* tasks = dynamic_cast<TaskDataset*>(src.get());
  ASSERT_NE(tasks, nullptr);
  EXPECT_EQ(tasks->config().train_lo(), 1);
  EXPECT_EQ(tasks->config().train_hi(), 6);
  EXPECT_EQ(tasks->config().difficulty, 3);
  TrainConfig back;
  apply_json(back, to_json(c), "test");
  EXPECT_EQ(back.task_min_difficulty, 1);
  EXPECT_EQ(back.task_max_difficulty, 6);
  EXPECT_EQ(to_json(TrainConfig{}).count("task_min_difficulty"), 0u);  // old records unchanged
  EXPECT_EQ(task_config(with("task:addition", 3, -1, 5)).train_lo(), 3);
  EXPECT_FBT_ERROR(validate(with("task:addition", 3, 5, -1)), "invalid training config: task_min_difficulty", "is 5, above task_max_difficulty 3");
  EXPECT_FBT_ERROR(validate(with("task:addition", 3, 0, 6)), "invalid training config: task_min_difficulty", "[1, 1000]", "or -1", "got 0");
  EXPECT_FBT_ERROR(validate(with("task:multihop", 3, 1, 86)), "invalid training config: task_max_difficulty", "[1, 85]", "got 86");
  // a probing task: writes per register (latest_write) from 1, null lines from 0
  EXPECT_NO_THROW(validate(with("task:latest_write", 2, 1, 2)));
  EXPECT_NO_THROW(validate(with("task:completion", 8, 0, 32)));
  EXPECT_FBT_ERROR(validate(with("task:latest_write", 2, 0, 2)), "invalid training config: task_min_difficulty", "writes per register", "got 0");
  EXPECT_NE(make_data_source(with("task:latest_write", 2, 1, 2))->describe().find("trained on 1..2"), std::string::npos);
  // a running-state task or a file has no such range
  EXPECT_FBT_ERROR(validate(with("task:running_sum", 5, 2, 5)), "invalid training config: task_min_difficulty", "modulus", "task_length");
  EXPECT_FBT_ERROR(validate(with("notes.txt", 3, -1, 4)), "invalid training config: task_max_difficulty", "applies to task:<name> data", "notes.txt");
}

TEST(TrainConfigValidate, NonFiniteValuesSetInCodeAreRefusedToo) {
  // a program (not the parser) may put inf or nan in a config: validate names each such field
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  TrainConfig c;
  c.model.rope_theta = inf;
  EXPECT_FBT_ERROR(validate(c), "rope_theta");
  c = TrainConfig{};
  c.model.gated_add_alpha = nan;
  EXPECT_FBT_ERROR(validate(c), "gated_add_alpha");
  c = TrainConfig{};
  c.grad_clip = nan;
  EXPECT_FBT_ERROR(validate(c), "grad_clip");
  c = TrainConfig{};
  c.schedule.pass_mix = {{2, inf}};
  EXPECT_FBT_ERROR(validate(c), "pass_mix", "finite");
  c = TrainConfig{};
  c.schedule.lambda = inf;
  EXPECT_FBT_ERROR(validate(c), "lambda");
  c = TrainConfig{};
  c.lr = inf;
  EXPECT_FBT_ERROR(validate(c), "lr");
}

TEST(TrainConfigValidate, AConfigWhoseRecordCannotBeWrittenIsRefused) {
  // a knob that is not UTF-8 cannot be written to the checkpoint's JSON metadata: refused up front, not
  // at the end of the run when the checkpoint is saved
  TrainConfig c;
  c.out_dir = std::string("runs/\xff\xfe");
  EXPECT_FBT_ERROR(validate(c), "invalid training config: config");
}

class TrainConfigFile : public TempDirTest {};

TEST_F(TrainConfigFile, DuplicateKeysAreRefused) {
  const std::string p = path("c.json");
  std::ofstream(p) << R"({"lr": 0.01, "steps": 5, "lr": 0.02})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "duplicate key \"lr\"");
  std::ofstream(p) << R"({"lr": 0.01, "steps": 5})";
  const TrainConfig c = load_train_config_file(p);
  EXPECT_EQ(c.lr, 0.01);
  EXPECT_EQ(c.steps, 5);
}

TEST_F(TrainConfigFile, IntegersInAFileAreRangeCheckedToo) {
  const std::string p = path("c.json");
  std::ofstream(p) << R"({"hidden_size": 4294967312})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "hidden_size", "out of range");
  std::ofstream(p) << R"({"seed": 18446744073709551615})";  // an unsigned JSON integer keeps its value
  EXPECT_EQ(load_train_config_file(p).seed, std::numeric_limits<std::uint64_t>::max());
  std::ofstream(p) << R"({"seq_len": 1e9})";
  EXPECT_EQ(load_train_config_file(p).seq_len, 1000000000);
  std::ofstream(p) << R"({"lr": "inf"})";  // JSON has no inf: a string where a number belongs
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field lr must be a number, got string \"inf\"");
  std::ofstream(p) << R"({"lr": null})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "lr");
}

TEST_F(TrainConfigFile, ValuesMustHaveTheirFieldsType) {
  // {"steps": "2"} was read as 2: a file's values are typed (flags and the library's records are text)
  const std::string p = path("c.json");
  std::ofstream(p) << R"({"steps": "2"})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field steps must be a number, got string \"2\"");
  std::ofstream(p) << R"({"progress": 1})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field progress must be true or false, got number 1");
  std::ofstream(p) << R"({"data": 5})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field data must be a string, got number 5");
  std::ofstream(p) << R"({"layer_intermediate_size": 64})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field layer_intermediate_size must be an array of integers");
  std::ofstream(p) << R"({"steps": 2, "progress": false, "data": "task:addition", "layer_intermediate_size": [64, 32], "num_hidden_layers": 2,
                          "fuser_options": {"init": "default"}})";
  const TrainConfig c = load_train_config_file(p);
  EXPECT_EQ(c.steps, 2);
  EXPECT_FALSE(c.progress);
  EXPECT_EQ(c.model.layer_intermediate_size, (std::vector<int>{64, 32}));
  // a checkpoint's record holds every value as text, and reads back
  TrainConfig back;
  apply_json(back, to_json(c), "record");
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_FBT_ERROR(apply_json(back, to_json(c), "record", true), "record: field");
  // issue 47: layer_blocks is an array of names in a file, as layer_types is (it was refused as "must be a string")
  std::ofstream(p) << R"({"num_hidden_layers": 2, "layer_blocks": ["decoder", "decoder"], "layer_types": ["full_attention", "full_attention"]})";
  const TrainConfig lb = load_train_config_file(p);
  EXPECT_EQ(lb.model.layer_blocks, (std::vector<std::string>{"decoder", "decoder"}));
  EXPECT_EQ(lb.model.block, "mixed");
  // issue 47: a piece's options in a file are an object; a string (text only a flag gives) was accepted
  std::ofstream(p) << R"({"fuser": "gated_add", "fuser_options": "{\"alpha\": 0.5}"})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "field fuser_options must be a JSON object", "got string");
}

// Issue 47: one option in two spellings with different values (fuser.alpha and fuser_options.alpha) took
// whichever came last. Refused in the flags and in a file, naming both; the same value twice is fine, and a
// flag still overrides a file (two sources, the flags win as for every field).
TEST_F(TrainConfigFile, AnOptionInTwoSpellingsWithDifferentValuesIsRefused) {
  using F = std::vector<std::pair<std::string, std::string>>;
  const F two = {{"fuser", "gated_add"}, {"fuser_options", R"({"alpha": 0.5})"}, {"fuser.alpha", "0.3"}};
  EXPECT_FBT_ERROR(make_train_config("", two), "fuser.alpha is given twice with different values", "0.3", "0.5", "fuser_options");
  const F same = {{"fuser", "gated_add"}, {"fuser_options", R"({"alpha": 0.5})"}, {"fuser.alpha", "0.50"}};
  EXPECT_EQ(make_train_config("", same).model.fuser_options.at("alpha").str(), "0.50");
  const std::string p = path("c.json");
  std::ofstream(p) << R"({"fuser": "gated_add", "fuser_options": {"alpha": 0.5}, "fuser.alpha": "0.3"})";
  EXPECT_FBT_ERROR(load_train_config_file(p), p, "fuser.alpha is given twice");
  std::ofstream(p) << R"({"fuser": "gated_add", "fuser_options": {"alpha": 0.5}})";
  const TrainConfig c = make_train_config(p, F{{"fuser.alpha", "0.3"}});  // the flag overrides the file
  EXPECT_EQ(c.model.fuser_options.at("alpha").str(), "0.3");
  TrainConfig g;
  EXPECT_THROW(set_config_fields(g, two), Error);
}

TEST_F(TrainConfigFile, OnlyRegularFilesOfBoundedSizeAreRead) {
  EXPECT_FBT_ERROR(load_train_config_file(dir_.string()), "is a directory");
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(load_train_config_file(fifo), fifo, "not a regular file");  // before: blocked forever
  const std::string big = path("big.json");
  std::ofstream(big) << "{\"comment\": \"" << std::string(std::size_t(kMaxConfigFileBytes), 'x') << "\"}";
  EXPECT_FBT_ERROR(load_train_config_file(big), big, "limit");
  EXPECT_FBT_ERROR(load_train_config_file(path("missing.json")), "cannot open config file", "missing.json");
}

TEST(TrainConfig, MaxMemoryIsASettingOfTheInvocationNotOfTheRun) {
  TrainConfig c;
  set_config_field(c, "max_memory_gb", "12.5");
  EXPECT_EQ(c.max_memory_gb, 12.5);
  EXPECT_FALSE(to_json(c).contains("max_memory_gb"));  // not recorded: resume and ablate comparisons ignore it
  EXPECT_EQ(to_json(c), to_json(TrainConfig{}));
}

TEST(TrainConfig, RelativeTextPathsAreResolved) {
  TrainConfig c;
  c.data = "corpus.txt";
  resolve_data_path(c);
  EXPECT_TRUE(std::filesystem::path(c.data).is_absolute()) << c.data;
  EXPECT_EQ(c.data, (std::filesystem::current_path() / "corpus.txt").lexically_normal().string());
  c.data = "task:addition";
  resolve_data_path(c);
  EXPECT_EQ(c.data, "task:addition");
  c.data = "/abs/x.txt";
  resolve_data_path(c);
  EXPECT_EQ(c.data, "/abs/x.txt");
}

}  // namespace

}  // namespace test_train_train_config
