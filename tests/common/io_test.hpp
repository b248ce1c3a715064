// tests/common/io_test.hpp: what the file-format tests share: a fresh directory per test, reading a file's
// bytes, and EXPECT_FBT_ERROR (the statement throws fbt::Error whose message names every given part).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>

#include <unistd.h>

#include "fbt/config.hpp"

namespace fbt_test {

/// A fresh directory per test (named after the suite, the test and the process), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    dir_ = std::filesystem::path(::testing::TempDir()) / ("fbt_" + std::to_string(::getpid()) + "_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

inline std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace fbt_test

/// EXPECT that `stmt` throws fbt::Error whose message contains every string given after it.
#define EXPECT_FBT_ERROR(stmt, ...)                                                   \
  do {                                                                                \
    try {                                                                             \
      stmt;                                                                           \
      ADD_FAILURE() << #stmt " did not throw";                                        \
    } catch (const fbt::Error& e) {                                                   \
      for (const std::string& part : std::initializer_list<std::string>{__VA_ARGS__}) \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)                \
            << "message \"" << e.what() << "\" lacks \"" << part << "\"";             \
    } catch (const std::exception& e) {                                               \
      ADD_FAILURE() << #stmt " threw a non-fbt exception: " << e.what();              \
    }                                                                                 \
  } while (0)
