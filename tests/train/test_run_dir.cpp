// tests/train/test_run_dir.cpp: a run directory's lock (train/run_dir.hpp).
//
// Issue 47: a run.lock that is a symbolic link truncated its target (a user's file went to 0 bytes); two
// fbt.train calls on one out_dir in one process both ran (the lock is shared within a process) and one died
// on a shared checkpoint.tmp.<pid>; a refused run left run.lock behind. Now: a symbolic or hard link as
// run.lock is refused and its target untouched; claim() admits one run per process and Trainer::run takes
// it; the holder removes run.lock when it lets go; each save has its own temporary directory.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fbt/train/run_dir.hpp>
#include <fbt/train/trainer.hpp>

#include "common/io_test.hpp"

namespace test_train_run_dir {

using namespace fbt;
namespace fs = std::filesystem;

class RunDir : public fbt_test::TempDirTest {};

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST_F(RunDir, ALinkAsRunLockIsRefusedAndItsTargetUntouched) {
  const std::string dir = path("run"), victim = path("precious.txt");
  fs::create_directories(dir);
  std::ofstream(victim) << "a user's file";
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/run.lock").c_str()), 0);
  EXPECT_FBT_ERROR(lock_run_dir(dir), dir, "run.lock is a symbolic link");
  EXPECT_EQ(read_all(victim), "a user's file");
  fs::remove(dir + "/run.lock");
  ASSERT_EQ(::link(victim.c_str(), (dir + "/run.lock").c_str()), 0);  // a hard link: the same file under two names
  EXPECT_FBT_ERROR(lock_run_dir(dir), dir, "run.lock has 2 links");
  EXPECT_EQ(read_all(victim), "a user's file");
  fs::remove(dir + "/run.lock");
  ASSERT_EQ(::mkfifo((dir + "/run.lock").c_str(), 0600), 0);
  EXPECT_FBT_ERROR(lock_run_dir(dir), dir, "run.lock is not a regular file");
}

TEST_F(RunDir, TheLockHoldsThePidIsNeverTruncatedAndGoesWithItsHolder) {
  const std::string dir = path("run"), lock = dir + "/run.lock";
  fs::create_directories(dir);
  {
    const auto l = lock_run_dir(dir);
    EXPECT_EQ(lock_run_dir(dir), l);  // shared within the process
    const std::string text = read_all(lock);
    EXPECT_EQ(text.size(), 21u);  // the id padded to a fixed width: written over, never truncated
    EXPECT_EQ(std::stol(text), long(::getpid()));
  }
  EXPECT_FALSE(fs::exists(lock));  // removed by its holder
}

TEST_F(RunDir, OneRunPerOutDirInAProcess) {
  const std::string dir = path("run");
  fs::create_directories(dir);
  const auto l = lock_run_dir(dir);
  {
    const auto c = l->claim();
    EXPECT_FBT_ERROR(l->claim(), dir, "in use by another run in this process");
  }
  EXPECT_NO_THROW(l->claim());  // released with its guard

  // a trainer on an out_dir another run of this process is using is refused before it writes anything
  TrainConfig c;
  c.model.hidden_size = 16, c.model.num_hidden_layers = 1, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 32, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 1, c.batch_size = 2, c.seq_len = 32, c.steps = 2, c.warmup_steps = 1;
  c.eval_every = 0, c.eval_windows = 1, c.seq_eval_windows = 0, c.monitor_passes = 0, c.progress = false, c.out_dir = dir;
  Trainer<Model<float>> first(c), second(c);
  {
    const auto busy = l->claim();  // as the first run's run() holds it
    EXPECT_FBT_ERROR(second.run(nullptr), dir, "in use by another run in this process");
    EXPECT_FALSE(fs::exists(dir + "/train.jsonl"));
  }
  first.run(nullptr);  // the claim is free again: it runs, and its claim ends with run()
  EXPECT_TRUE(fs::exists(dir + "/checkpoint/model.safetensors"));
  c.out_dir = path("other");
  Trainer<Model<float>> third(c);
  third.run(nullptr);
  for (const auto& e : fs::recursive_directory_iterator(path("")))  // no temporary checkpoint directory left anywhere
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

}  // namespace test_train_run_dir
