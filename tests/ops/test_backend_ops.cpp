// Every op of the backend contract on every backend, against the CPU backend in double: one table of
// cases (tests/common/backend_ops.hpp, shared with tests/cuda/test_gpu.cu, which runs it on the CUDA
// backend), each case run on CpuBackend<float> and on the host stand-in of the CUDA backend
// (check/host_backend.hpp: its kernels' algorithms, NaN-filled fresh memory), compared within each
// case's stated relative tolerance (2e-5 of the largest reference magnitude: float against double).
// The table is checked against the contract itself: every op backend/contract.hpp lists has a case.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <common/backend_ops.hpp>

#include "fbt/backend/contract.hpp"
#include "fbt/backend/cpu.hpp"
#include "fbt/check/host_backend.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_backend_ops {

using Ref = fbt::CpuBackend<double>;

template <class Be, class... A> void check_every_case(A&&... be_args) {
  static_assert(fbt::check_backend<Be>(), "");
  const auto ref = fbt_test::op_cases<Ref>();
  const auto cases = fbt_test::op_cases<Be>();
  ASSERT_EQ(cases.size(), ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    Ref rb;
    Be be(std::forward<A>(be_args)...);
    const double err = fbt_test::op_error(cases[i].run(be), ref[i].run(rb));
    EXPECT_LT(err, cases[i].tol) << Be::name << " " << cases[i].name;
    worst = std::max(worst, err);
  }
  std::printf("[ backend %s: %zu op cases, worst relative error %.2e ]\n", Be::name, cases.size(), worst);
}

TEST(BackendOps, CpuFloatMatchesTheDoubleReference) { check_every_case<fbt::CpuBackend<float>>(); }

TEST(BackendOps, HostStandInMatchesTheDoubleReference) { check_every_case<fbt::check::HostBackend>(); }

TEST(BackendOps, TheReferenceAgreesWithItself) {
  // each case draws its own inputs from its own seed: two runs give the same numbers (so a difference
  // above is the backend's, not the table's)
  const auto a = fbt_test::op_cases<Ref>(), b = fbt_test::op_cases<Ref>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    Ref x, y;
    EXPECT_EQ(fbt_test::op_error(a[i].run(x), b[i].run(y)), 0.0) << a[i].name;
  }
}

TEST(BackendOps, EveryOpOfTheContractHasACase) {
  // the ops backend/contract.hpp lists (FBT_BACKEND_OP(name, ...)); memory transfers and the attention
  // sizes are exercised by every case instead of one of their own
  std::ifstream f(std::string(FBT_TEST_SOURCE_DIR) + "/../include/fbt/backend/contract.hpp");
  ASSERT_TRUE(f) << "cannot read include/fbt/backend/contract.hpp";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const std::regex op(R"(\nFBT_BACKEND_OP\((\w+),)");
  std::string names;
  for (const auto& c : fbt_test::op_cases<Ref>()) names += " " + c.name + " ";
  int listed = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), op), end; it != end; ++it) {
    const std::string name = (*it)[1];
    ++listed;
    if (name == "upload" || name == "download" || name == "sync" || name == "attention_state_size" || name == "attention_scratch_size") continue;
    EXPECT_NE(names.find(" " + name + " "), std::string::npos) << "no case in tests/common/backend_ops.hpp runs the contract's op " << name;
  }
  EXPECT_GT(listed, 40) << "the contract's ops were not found in contract.hpp";
}

}  // namespace test_ops_backend_ops
