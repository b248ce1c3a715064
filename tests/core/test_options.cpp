// A piece's options (core/options.hpp): defaults filled in, text from the command line read as the declared
// type, typed values from a file kept, and every refusal naming the key: unknown, wrong type, out of range.
#include <gtest/gtest.h>

#include "fbt/core/options.hpp"
#include "../common/io_test.hpp"

namespace test_core_options {

using namespace fbt;

OptionList decl() {
  OptionList o;
  o.add_int("rank", 8, 1, 1024, "rank");
  o.add_real("alpha", 0.1, -1, 1, "alpha");
  o.add_bool("tied", false, "tied");
  o.add_string("init", "default", {"default", "fan_in"}, "init");
  return o;
}

TEST(Options, DefaultsFillInAndTextIsReadAsTheDeclaredType) {
  const OptionValues d = OptionValues::resolve(decl(), {}, "fuser_options", "fuser \"x\"");
  EXPECT_EQ(d.get_int("rank"), 8);
  EXPECT_EQ(d.get_real("alpha"), 0.1);
  EXPECT_FALSE(d.get_bool("tied"));
  EXPECT_EQ(d.get_string("init"), "default");
  const Options given{{"rank", OptionValue::of_text("4")}, {"alpha", OptionValue::of_text("-0.5")}, {"tied", OptionValue::of_text("true")},
                      {"init", OptionValue::of_text("fan_in")}};
  const OptionValues v = OptionValues::resolve(decl(), given, "fuser_options", "fuser \"x\"");
  EXPECT_EQ(v.get_int("rank"), 4);
  EXPECT_EQ(v.get_real("alpha"), -0.5);
  EXPECT_TRUE(v.get_bool("tied"));
  EXPECT_EQ(v.get_string("init"), "fan_in");
  EXPECT_EQ(v.values().at("rank").kind, OptionValue::Int);  // resolved values are typed: what a checkpoint records
  // a typed integer is a valid real
  EXPECT_EQ(OptionValues::resolve(decl(), {{"alpha", OptionValue::of_int(1)}}, "p", "o").get_real("alpha"), 1.0);
}

TEST(Options, RefusalsNameTheKey) {
  auto refuse = [](const Options& o, const std::string& what) {
    EXPECT_FBT_ERROR(OptionValues::resolve(decl(), o, "fuser_options", "fuser \"lowrank\""), what);
  };
  refuse({{"rnak", OptionValue::of_int(4)}}, "fuser_options.rnak: unknown option of fuser \"lowrank\" (its options: rank, alpha, tied, init)");
  refuse({{"rank", OptionValue::of_string("8")}}, "fuser_options.rank: expected an integer, got \"8\"");  // a string in a file is not a number
  refuse({{"rank", OptionValue::of_text("8x")}}, "fuser_options.rank: expected an integer, got \"8x\"");
  refuse({{"rank", OptionValue::of_real(2.5)}}, "fuser_options.rank: expected an integer, got 2.5");
  refuse({{"rank", OptionValue::of_int(0)}}, "fuser_options.rank: must be in [1, 1024], got 0");
  refuse({{"alpha", OptionValue::of_text("nan")}}, "fuser_options.alpha: expected a number");
  refuse({{"alpha", OptionValue::of_real(3)}}, "fuser_options.alpha: must be a finite number in [-1, 1], got 3");
  refuse({{"tied", OptionValue::of_text("yes")}}, "fuser_options.tied: expected a boolean (true or false), got \"yes\"");
  refuse({{"init", OptionValue::of_string("zero")}}, "fuser_options.init: unknown value \"zero\" (expected one of: default, fan_in)");
  refuse({{"init", OptionValue::of_bool(true)}}, "fuser_options.init: expected a string, got true");
  // reading an option nobody declared is a program error, named
  EXPECT_FBT_ERROR(OptionValues().get_int("rank"), "option \"rank\" has no value");
}

}  // namespace test_core_options
