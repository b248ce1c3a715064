// fbt/check/backend_agreement.hpp: does a model of one's own (a fuser, a block) run on every backend?
// Runs a K-pass step (every pass's loss, every gradient) and a few KV-cached decoding steps (in every
// mode the model has) on the CPU backend and on another backend (by default the host stand-in of the
// CUDA backend, check/host_backend.hpp: the GPU kernels' algorithms, NaN-filled fresh memory, so no GPU
// is needed), and reports the largest relative difference of each quantity, named.
//
//   fbt::Model<float, MyFuser<float>> m(cfg, 1);
//   fbt::StepOptions o; o.K = 3;
//   auto r = fbt::check::check_backend_agreement(m, batch, o);
//   std::printf("%s", r.str().c_str());                         // one line per quantity, the worst first
//   if (!r.ok(1e-4)) return 1;                                   // float on two backends: ~1e-6 when right
// Error measure: max |backend - cpu| / max |cpu| over a quantity's elements (a loss, a gradient tensor,
// a step's logits); +inf when the backend's value is not finite (e.g. an element never written). A piece
// whose backward or decode uses an op the backend lacks does not compile (backend/contract.hpp names it);
// one that reads memory it did not write, or that is only right on the CPU, shows here.
// Afterwards m's gradients hold the CPU step's; its weights are unchanged.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../decode/decoder.hpp"
#include "../model/backend_model.hpp"
#include "host_backend.hpp"

namespace fbt::check {

/// What check_backend_agreement found: the largest relative difference of each quantity.
struct BackendAgreement {
  std::string backend;                                   ///< the backend compared with the CPU
  std::vector<std::pair<std::string, double>> quantity;  ///< (name, max |x - cpu| / max |cpu|), in the order checked

  /// The worst difference (+inf when one is not finite) and its quantity.
  double worst() const {
    double w = 0;
    for (const auto& q : quantity)
      if (!(q.second <= w)) w = q.second;
    return w;
  }
  std::string worst_name() const {
    double w = -1;
    std::string n;
    for (const auto& q : quantity)
      if (!(q.second <= w)) w = q.second, n = q.first;
    return n;
  }
  bool ok(double tol) const { return worst() < tol; }
  /// One line per quantity, the worst first.
  std::string str() const {
    auto q = quantity;
    std::stable_sort(q.begin(), q.end(), [](const auto& a, const auto& b) { return !(a.second <= b.second); });
    std::string s = "backend " + backend + " against the CPU: " + std::to_string(q.size()) + " quantities\n";
    char line[64];
    for (const auto& [name, e] : q) {
      std::snprintf(line, sizeof line, "  %.3e  ", e);
      s += line + name + "\n";
    }
    return s;
  }
};

namespace detail {
template <class T> double agreement_error(const T* x, const T* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(double(x[i]))) return INFINITY;
    num = std::max(num, std::fabs(double(x[i]) - double(ref[i]))), den = std::max(den, std::fabs(double(ref[i])));
  }
  return num / std::max(den, 1e-30);
}
}  // namespace detail

/// \brief The step (losses of every pass, every gradient tensor) and `decode_steps` decoding steps after a
/// prefill of the batch's first row (standard; soft and fused(1) with a feedback fuser; logits, teacher
/// forced on that row's tokens), on the CPU and on Be (constructed from be_args), compared.
/// o.rng, when set, is restored between the two steps so both draw the same jitter.
template <class Be = HostBackend, class M, class... A>
BackendAgreement check_backend_agreement(M& m, const Batch& b, const StepOptions& o = StepOptions{}, int decode_steps = 4, A&&... be_args) {
  using T = typename M::Scalar;
  static_assert(std::is_same<T, typename Be::Scalar>::value, "check_backend_agreement: the model's scalar must be the backend's (float)");
  FBT_ASSERT(decode_steps >= 0 && decode_steps < b.T, "check_backend_agreement: decode_steps " + std::to_string(decode_steps) +
                                                          " must be in [0, T) (T = " + std::to_string(b.T) + ")");
  BackendAgreement r;
  r.backend = Be::name;
  const std::string rng_state = o.rng ? o.rng->state() : std::string();
  // the step on the CPU, then on Be from the same weights (and the same jitter)
  Workspace<M> ws;
  StepStats sc, sd;
  m.params.zero_grad();
  multipass_step(m, ws, b, o, sc);
  BackendModel<M, Be> dm(m, std::forward<A>(be_args)...);
  if (o.rng) o.rng->set_state(rng_state);
  dm.multipass_step(b, o, sd);
  std::vector<T> g(m.params.size());
  dm.download_grads(g.data());
  for (std::size_t j = 0; j < sc.loss.size(); ++j)
    r.quantity.push_back({"loss pass " + std::to_string(j + 1), j < sd.loss.size() ? detail::agreement_error(&sd.loss[j], &sc.loss[j], 1) : INFINITY});
  for (const auto& sp : m.params.specs())
    r.quantity.push_back({"grad " + sp.name, detail::agreement_error(g.data() + sp.offset, m.params.grads() + sp.offset, sp.size)});
  // decoding: a prefill of the first row's first tokens, then decode_steps steps on its next tokens
  std::vector<std::string> modes{"standard"};
  if (m.feedback()) modes.push_back("soft"), modes.push_back("fused(1)");
  const int V = m.V, P = b.T - decode_steps;
  std::vector<T> lc(static_cast<std::size_t>(V)), ld(static_cast<std::size_t>(V));  // (V) logits
  for (const auto& mode : modes) {
    const DecodeModeSpec ms = DecodeModeSpec::parse(mode);
    Decoder<M> cd(m);
    Decoder<M, Be> dd(dm);
    auto cs = cd.new_sequence(b.T, ms);
    auto ds = dd.new_sequence(b.T, ms);
    cd.prefill(cs, b.tokens, P, lc.data());
    dd.prefill(ds, b.tokens, P, ld.data());
    r.quantity.push_back({"decode " + mode + " prefill logits", detail::agreement_error(ld.data(), lc.data(), lc.size())});
    auto* cp = &cs;
    auto* dp = &ds;
    for (int t = P; t < b.T; ++t) {
      cd.step(&cp, 1, &b.tokens[t], lc.data());
      dd.step(&dp, 1, &b.tokens[t], ld.data());
      r.quantity.push_back({"decode " + mode + " step " + std::to_string(t - P + 1) + " logits", detail::agreement_error(ld.data(), lc.data(), lc.size())});
    }
  }
  return r;
}

}  // namespace fbt::check
