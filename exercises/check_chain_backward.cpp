// exercises/check_chain_backward.cpp: the checker of exercise E2 (docs/course/03-exercises.md).
//
// Includes <chain_backward.hpp> with ANGLE brackets, so the include path picks the file under test:
//   target exercise_chain_backward_student   -I exercises/            -> your exercises/chain_backward.hpp
//   target exercise_chain_backward_solution  -I exercises/solutions/  -> the reference solution
// Toy chain (exercises/given/toy_chain.hpp) in double: B = 2 sequences of T = 5 positions, D = 4, K = 3,
// lambda = 1. Checks:
//   1. dA, dW, dX against central finite differences of the whole K-pass loss (tests/common/gradcheck.hpp;
//      PASS when rel err < 1e-6 and the gradient is not all zero). B = 2 catches a carry that leaks from
//      one sequence into the next;
//   2. the gradients accumulate (+=);
//   3. (given code, the lesson's claim) the chain is a Jacobi iteration: pass k equals the token-by-token
//      recurrence H*[t] = tanh(A x_t + W H*[t-1]) exactly at t <= k (invariant 1 with p = 0), and
//      delta_k = rms(H_k - H_{k-1}) reaches 0 once k > T (the fixed point is reached after T passes).
// Exit status 0 iff every line says PASS.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <chain_backward.hpp>    // yours or the solution: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

using namespace fbt_course;

namespace {

constexpr int B = 2, Tn = 5, D = 4, K = 3, N = B * Tn;
int failures = 0;

void report(const std::string& what, bool ok, const std::string& detail) {
  std::printf("  %-4s  %-40s %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  if (!ok) ++failures;
}
std::string fmt(const char* f, double a, double b = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}
double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

}  // namespace

int main() {
  std::printf("exercise E2: backward of a K-pass chain (B = %d sequences x T = %d positions, D = %d, K = %d, double)\n", B, Tn, D, K);
  fbt::Rng rng(7);
  std::vector<double> A(D * D), W(D * D);  // (D, D) each
  std::vector<double> X(N * D), R(N * D);  // (N, D) each
  fbt_test::randn(A.data(), A.size(), rng, 0.6);
  fbt_test::randn(W.data(), W.size(), rng, 0.6);
  fbt_test::randn(X.data(), X.size(), rng);
  fbt_test::randn(R.data(), R.size(), rng);
  ToyChain<double> p;
  p.B = B, p.T_ = Tn, p.D = D, p.K = K, p.lambda = 1.0, p.A = A.data(), p.W = W.data();
  ToyChainCache<double> cache;
  auto f = [&]() {
    ToyChainCache<double> c;
    return toy_chain_forward(p, c, X.data(), R.data());
  };

  toy_chain_forward(p, cache, X.data(), R.data());
  std::vector<double> dX(N * D, 0.0), dA(D * D, 0.0), dW(D * D, 0.0);
  toy_chain_backward(p, cache, X.data(), R.data(), dX.data(), dA.data(), dW.data());

  std::printf("1. against central finite differences of the K-pass loss (PASS: rel err < 1e-6, gradient not all zero)\n");
  struct Item { const char* name; std::vector<double>* x; std::vector<double>* grad; };
  const Item items[] = {{"dA  (D, D)  stack, every pass", &A, &dA}, {"dW  (D, D)  fuser, passes 2..K", &W, &dW},
                        {"dX  (N, D)  inputs, every pass", &X, &dX}};
  for (const auto& it : items) {
    const fbt_test::GradCheck r = fbt_test::check_gradient(f, it.x->data(), it.grad->data(), it.x->size());
    report(it.name, r.err < 1e-6 && norm(*it.grad) > 1e-8, fmt("rel err %.2e   |g| %.3g", r.err, norm(*it.grad)));
  }

  std::printf("2. gradients accumulate (+=): a second call adds the same amount again\n");
  std::vector<double> dX2 = dX, dA2 = dA, dW2 = dW;
  toy_chain_backward(p, cache, X.data(), R.data(), dX2.data(), dA2.data(), dW2.data());
  double worst = 0;
  for (auto [a, b] : {std::pair{&dX2, &dX}, {&dA2, &dA}, {&dW2, &dW}})
    for (std::size_t i = 0; i < a->size(); ++i) worst = std::max(worst, std::abs((*a)[i] - 2 * (*b)[i]));
  report("dX, dA, dW", worst < 1e-12 && norm(dA) > 0, fmt("max diff %.2e", worst));

  std::printf("3. (given code) the chain is a Jacobi iteration: pass k exact for t <= k, fixed point after T passes\n");
  // the token-by-token recurrence (soft decoding, teacher-forced): H*[b, t] = tanh(A x + W H*[b, t-1]), H*[b, -1] = 0
  std::vector<double> Hs(N * D, 0.0);  // (N, D)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      for (int o = 0; o < D; ++o) {
        const int n = b * Tn + t;
        double z = 0;
        for (int c = 0; c < D; ++c) z += X[n * D + c] * A[o * D + c] + (t > 0 ? Hs[(n - 1) * D + c] * W[o * D + c] : 0.0);
        Hs[n * D + o] = std::tanh(z);
      }
  ToyChain<double> longer = p;
  longer.K = Tn + 2;  // unroll past T
  ToyChainCache<double> lc;
  toy_chain_forward(longer, lc, X.data(), R.data());
  for (int k = 1; k <= longer.K; ++k) {
    const std::vector<double>& H = lc.H[k - 1];
    int exact = Tn;  // the longest run of positions t = 1..exact (1-based) equal to H* in every sequence
    for (int b = 0; b < B; ++b) {
      int run = 0;
      while (run < Tn) {
        double d = 0;
        for (int c = 0; c < D; ++c) d = std::max(d, std::abs(H[(b * Tn + run) * D + c] - Hs[(b * Tn + run) * D + c]));
        if (d > 1e-14) break;
        ++run;
      }
      exact = std::min(exact, run);
    }
    double d2 = 0;
    if (k > 1)
      for (std::size_t i = 0; i < H.size(); ++i) d2 += (H[i] - lc.H[k - 2][i]) * (H[i] - lc.H[k - 2][i]);
    const double delta = std::sqrt(d2 / double(H.size()));
    const int predicted = std::min(k, Tn);
    report("pass " + std::to_string(k) + ": exact for t <= " + std::to_string(exact) + " (predicted " + std::to_string(predicted) + ")",
           exact == predicted, k > 1 ? fmt("delta_k %.2e", delta) : std::string("delta_1 (no previous pass)"));
  }

  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
