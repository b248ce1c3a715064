// The `fbt` command's shared pieces (fbt/cli/args.hpp): options read with their range checked,
// checkpoints whose vocabulary the byte tokenizer cannot serve refused up front, --text_file read only
// from a regular file, and error text kept to one bounded line. The command's own refusals (exit status,
// one line on stderr) are the cli.* tests of tools/CMakeLists.txt.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "fbt/cli/args.hpp"
#include "fbt/cli/common.hpp"
#include "../common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_tools_cli {

using namespace fbt;
using fbt_test::TempDirTest;

namespace {

TEST(CliOptions, IntegersAreRangeCheckedAndNamed) {
  EXPECT_EQ(cli::int_option<int>("passes", "3", 1, 1000), 3);
  EXPECT_EQ(cli::int_option<int>("max_new_tokens", "2147483647", 1, std::numeric_limits<int>::max()), std::numeric_limits<int>::max());
  EXPECT_FBT_ERROR(cli::int_option<int>("passes", "-1", 1, 1000, "passes to evaluate"), "--passes \"-1\": must be in [1, 1000] (passes to evaluate)");
  EXPECT_FBT_ERROR(cli::int_option<int>("max_new_tokens", "-1", 1, std::numeric_limits<int>::max()), "--max_new_tokens \"-1\": must be >= 1");
  // 4294967300 = 2^32 + 4 used to generate 4 tokens
  EXPECT_FBT_ERROR(cli::int_option<int>("max_new_tokens", "4294967300", 1, std::numeric_limits<int>::max()), "--max_new_tokens",
                   "\"4294967300\" is out of range");
  EXPECT_FBT_ERROR(cli::int_option<int>("n", "0", 1, 1024), "--n \"0\": must be in [1, 1024]");
  EXPECT_FBT_ERROR(cli::int_option<int>("windows", "3x", 0, 10), "--windows: expected an integer, got \"3x\"");
  EXPECT_FBT_ERROR(cli::int_option<std::uint64_t>("seed", "-1", 0, std::numeric_limits<std::uint64_t>::max()), "--seed", "out of range");
}

// Issue 47: under `mpirun -np 2` without --distributed mpi, one rank failed with a misleading "in use by another
// run" and the other trained alone over the 2-rank checkpoint. Refused on every rank from the launcher's
// environment, naming the flag, before anything is written (mpi.cli_resume_without_flag runs it under mpirun).
TEST(CliOptions, SeveralRanksWithoutDistributedMpiAreRefused) {
  const char* keys[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE"};
  for (const char* k : keys) ::unsetenv(k);
  EXPECT_EQ(cli::launcher_world_size(), 1);
  EXPECT_NO_THROW(cli::refuse_ranks_without_mpi("train", "none"));
  for (const char* k : keys) {
    ::setenv(k, "2", 1);
    EXPECT_EQ(cli::launcher_world_size(), 2) << k;
    EXPECT_FBT_ERROR(cli::refuse_ranks_without_mpi("train", "none"), "fbt train", "MPI launcher with 2 ranks", "add --distributed mpi");
    EXPECT_NO_THROW(cli::refuse_ranks_without_mpi("train", "mpi"));
    ::setenv(k, "1", 1);  // one rank (mpirun -np 1): nothing to refuse
    EXPECT_NO_THROW(cli::refuse_ranks_without_mpi("train", "none"));
    ::unsetenv(k);
  }
}

// Issue 47: sample's memory estimate ignored sliding windows (2.1 GB for the full and the windowed model alike);
// a sliding layer's cache holds min(capacity, W) rows (its ring), so the estimate is the decoder's own.
TEST(CliOptions, TheKvCacheEstimateKnowsSlidingWindows) {
  ModelConfig full;
  full.num_hidden_layers = 4, full.hidden_size = 256, full.num_attention_heads = 4, full.num_key_value_heads = 2, full.intermediate_size = 512;
  ModelConfig win = full;
  win.sliding_window = 64, win.layer_types = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"};
  const long long cap = 4096;
  const double per_row = 2.0 * 2 * full.hs() * sizeof(float);  // keys and values of one layer's row
  const cli::CommandMemory a = cli::sample_memory(full, 8, 100, cap, 1), b = cli::sample_memory(win, 8, 100, cap, 1);
  EXPECT_DOUBLE_EQ(a.kv_cache, 8 * 4 * cap * per_row);
  EXPECT_DOUBLE_EQ(b.kv_cache, 8 * (3 * 64 + cap) * per_row);  // three rings of 64 rows and one full layer
  EXPECT_DOUBLE_EQ(cli::sample_memory(win, 1, 10, 32, 1).kv_cache, 4 * 32 * per_row);  // a capacity below W: every layer holds it whole
}

TEST(CliOptions, RealsAreFiniteAndInRange) {
  EXPECT_EQ(cli::real_option("top_p", "0.9", 0, true, 1, false), 0.9);
  EXPECT_FBT_ERROR(cli::real_option("top_p", "0", 0, true, 1, false), "--top_p \"0\": must be in (0, 1]");
  EXPECT_FBT_ERROR(cli::real_option("temperature", "inf", 0, false, HUGE_VAL, true), "--temperature: expected a finite number, got \"inf\"");
  EXPECT_FBT_ERROR(cli::real_option("temperature", "-1", 0, false, HUGE_VAL, true), "--temperature \"-1\": must be in [0, inf)");
}

TEST(CliOptions, ErrorTextIsOneBoundedLine) {
  const std::string long_value(100000, 'x');
  try {
    cli::int_option<int>("steps", long_value, 1, 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << "a hostile value is quoted in part, with its length";
    EXPECT_NE(std::string(e.what()).find("(100000 bytes)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cli::one_line("a\nb"), "a\\x0ab");  // a control character is shown as its byte
  EXPECT_LE(cli::one_line(std::string(10000, 'y')).size(), 4096u + 32u);
}

TEST(CliOptions, ARepeatedOptionIsRefusedNamingIt) {
  // `train` took the last of repeated flags while other commands lost one: every subcommand refuses now
  std::vector<std::string> words{"fbt", "train", "--steps", "2", "--lr=0.1", "--steps=3"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(&w[0]);
  EXPECT_FBT_ERROR(cli::parse_args(int(argv.size()), argv.data(), 2), "option --steps is given twice (\"2\" and \"3\")");
  // a repeatable option (ablate's --vary) may be given again
  std::vector<std::string> grid{"fbt", "ablate", "--vary", "fuser=glu|none", "--vary", "detach=true|false"};
  argv.clear();
  for (auto& w : grid) argv.push_back(&w[0]);
  const cli::Args a = cli::parse_args(int(argv.size()), argv.data(), 2, {"vary"});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].second, "detach=true|false");
  EXPECT_FBT_ERROR(cli::parse_args(int(argv.size()), argv.data(), 2), "option --vary is given twice");
}

class CliFiles : public TempDirTest {};

TEST_F(CliFiles, ACheckpointOfAnotherVocabularyIsRefusedAtLoad) {
  // a 32-token model failed later with a token-id message; now its vocab_size is named up front
  ModelConfig c;
  c.vocab_size = 32, c.hidden_size = 16, c.num_hidden_layers = 1, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 32, c.max_position_embeddings = 64;
  Model<float> m(c, 1);
  save_model(path("model.safetensors"), m);
  EXPECT_FBT_ERROR(cli::checkpoint_config(dir_.string()), "model.safetensors", "vocab_size is 32", "needs 257");
  c.vocab_size = 257;
  Model<float> ok(c, 1);
  save_model(path("model.safetensors"), ok);
  EXPECT_EQ(cli::checkpoint_config(dir_.string()).vocab_size, 257);
  EXPECT_EQ(cli::checkpoint_config(path("model.safetensors")).hidden_size, 16);
}

TEST_F(CliFiles, TextFileOptionReadsOnlyRegularFiles) {
  // a directory gave "basic_string::_M_create"
  EXPECT_FBT_ERROR(cli::read_text_option("text_file", dir_.string()), "--text_file", dir_.string(), "is a directory");
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(cli::read_text_option("text_file", fifo), "--text_file", "not a regular file");
  EXPECT_FBT_ERROR(cli::read_text_option("text_file", "/dev/zero"), "not a regular file");
  std::ofstream(path("t.txt")) << "12+34=?";
  EXPECT_EQ(cli::read_text_option("text_file", path("t.txt")), "12+34=?");
  EXPECT_FBT_ERROR(cli::read_text_option("text_file", path("t.txt"), 3), "over the 3-byte limit");
}

}  // namespace

}  // namespace test_tools_cli
