// fbt/decode/sampling.hpp: next-token choice from logits (spec sections 4 and 9).
//
// Order: temperature, then top-k, then top-p (nucleus), then one draw from the seeded Rng.
// temperature 0 is greedy; greedy ties go to the lowest token id.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"

namespace fbt {

struct SamplingOptions {
  double temperature = 0.0;  ///< 0 = greedy
  int top_k = 0;             ///< 0 = off
  double top_p = 1.0;        ///< 1 = off
  void validate() const {
    if (!(temperature >= 0) || !std::isfinite(temperature))
      throw Error("sampling: temperature must be finite and >= 0, got " + std::to_string(temperature));
    if (top_k < 0) throw Error("sampling: top_k must be >= 0, got " + std::to_string(top_k));
    if (!(top_p > 0 && top_p <= 1)) throw Error("sampling: top_p must be in (0, 1], got " + std::to_string(top_p));
  }
};

/// \brief Greedy choice: the largest logit, the lowest id among ties.
template <class T> int argmax_token(const T* logits, int V) {
  int best = 0;
  for (int v = 1; v < V; ++v)
    if (logits[v] > logits[best]) best = v;
  return best;
}

/// \brief Draws one token. scratch is reused between calls (no allocation once it has grown to V).
template <class T>
int sample_token(const T* logits, int V, const SamplingOptions& o, Rng& rng, std::vector<std::pair<double, int>>& scratch) {
  if (o.temperature == 0.0) return argmax_token(logits, V);
  scratch.resize(V);
  double mx = -INFINITY;
  for (int v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]) / o.temperature);
  for (int v = 0; v < V; ++v) scratch[v] = {std::exp(double(logits[v]) / o.temperature - mx), v};
  // sort by probability, descending; equal probabilities keep the lower id first
  std::sort(scratch.begin(), scratch.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  int keep = V;
  if (o.top_k > 0) keep = std::min(keep, o.top_k);
  double total = 0;
  for (int i = 0; i < keep; ++i) total += scratch[i].first;
  if (o.top_p < 1.0) {  // smallest prefix whose mass reaches top_p of the (top-k) distribution
    double cum = 0;
    for (int i = 0; i < keep; ++i) {
      cum += scratch[i].first;
      if (cum >= o.top_p * total) {
        keep = i + 1;
        break;
      }
    }
    total = 0;
    for (int i = 0; i < keep; ++i) total += scratch[i].first;
  }
  const double u = rng.uniform() * total;
  double cum = 0;
  for (int i = 0; i < keep; ++i) {
    cum += scratch[i].first;
    if (u < cum) return scratch[i].second;
  }
  return scratch[keep - 1].second;
}

}  // namespace fbt
