// tests/ops/test_embedding.cpp: embedding_forward / embedding_backward (fbt/ops/embedding.hpp).
//
//   out[n] = E[tok_n];   dE[tok_n] += dout[n]   (repeated tokens accumulate)
// Checks: forward rows exactly; backward scatter against loops (1e-15) including repeated tokens and
// untouched rows; backward against central finite differences in double w.r.t. E (normwise rel err
// < 1e-6); accumulation; a token outside [0, V) throws fbt::Error naming the token id; float forward
// equals the double one exactly (a copy).
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "fbt/ops/embedding.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_ops_embedding {

using namespace fbt;
using namespace fbt_test;

namespace {

constexpr int V = 11, C = 6, N = 7;
const std::vector<int> kTok = {3, 0, 10, 3, 7, 3, 0};  // 3 three times, 0 twice; rows 1, 2, 4, 5, 6, 8, 9 unused

TEST(Embedding, ForwardLooksUpRows) {
  auto E = randn_vec(V * C, 1);
  std::vector<double> out(N * C, 5.0);
  embedding_forward(smat(out.data(), N, C), kTok.data(), csmat(E.data(), V, C));
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) EXPECT_EQ(out[n * C + c], E[kTok[n] * C + c]) << n << "," << c;
}

TEST(Embedding, BackwardScattersAndAccumulates) {
  const auto dout = random_weights(N * C, 2);
  std::vector<double> dE(V * C, 0.0);
  embedding_backward(smat(dE.data(), V, C), csmat(dout.data(), N, C), kTok.data());
  std::vector<double> ref(V * C, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) ref[kTok[n] * C + c] += dout[n * C + c];
  for (std::size_t i = 0; i < dE.size(); ++i) EXPECT_NEAR(dE[i], ref[i], 1e-15) << i;
  for (int c = 0; c < C; ++c) EXPECT_EQ(dE[5 * C + c], 0.0) << "an unused row got a gradient";
  // a second call adds again
  embedding_backward(smat(dE.data(), V, C), csmat(dout.data(), N, C), kTok.data());
  for (std::size_t i = 0; i < dE.size(); ++i) EXPECT_NEAR(dE[i], 2 * ref[i], 1e-15) << i;
}

TEST(Embedding, BackwardMatchesFiniteDifference) {
  auto E = randn_vec(V * C, 3);
  const auto dout = random_weights(N * C, 4);
  std::vector<double> out(N * C), dE(V * C, 0.0);
  embedding_backward(smat(dE.data(), V, C), csmat(dout.data(), N, C), kTok.data());
  auto f = [&]() {
    embedding_forward(smat(out.data(), N, C), kTok.data(), csmat(E.data(), V, C));
    return dot(dout, out.data());
  };
  expect_input_grad(f, E.data(), dE.data(), dE.size(), "embedding dE");
}

TEST(Embedding, OutOfRangeTokenThrowsNamingIt) {
  auto E = randn_vec(V * C, 5);
  std::vector<double> out(N * C);
  for (int bad : {V, 97, -1}) {
    std::vector<int> tok = kTok;
    tok[4] = bad;
    try {
      embedding_forward(smat(out.data(), N, C), tok.data(), csmat(E.data(), V, C));
      ADD_FAILURE() << "token " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

TEST(Embedding, FloatForwardEqualsDouble) {
  // tolerance: exact (a lookup copies values)
  auto E = randn_vec(V * C, 6);
  auto Ef = cast_vec<float>(E);
  std::vector<double> out(N * C);
  std::vector<float> outf(N * C);
  embedding_forward(smat(out.data(), N, C), kTok.data(), csmat(E.data(), V, C));
  embedding_forward(smat(outf.data(), N, C), kTok.data(), csmat(Ef.data(), V, C));
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(outf[i], float(out[i]));
}

}  // namespace

}  // namespace test_ops_embedding
