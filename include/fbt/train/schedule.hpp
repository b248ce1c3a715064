// fbt/train/schedule.hpp: the multi-pass schedule of spec section 3 (the policy, not the layers).
//
// Before `feedback_start` (a fraction of the run's steps) every batch is single-pass teacher forcing;
// from it on each batch draws its number of passes K from `pass_mix` ({2: 0.88, 3: 0.12} by default,
// which over a run with start 0.75 gives the paper's 75/22/3), or from a named preset of the paper's
// runs (pass_mix_preset: whole-run shares, e.g. paper_200b = 75/22/3 for any start up to 0.75). lambda ramps from 0 to its value over
// `lambda_ramp` steps after the start; prefixes p_j ~ U{0..T-1} per sequence and pass (`prefix`
// "uniform"), none, or a fixed value; sigma, detach and grad_passes pass through to the step.
// All draws come from the Rng the caller passes (the trainer saves its state), so a run is reproducible.
// It also reports token-equivalent compute: tokens x mean passes (75/22/3 costs 1.28x).
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "../config.hpp"
#include "../detail/input.hpp"
#include "../core/rng.hpp"

namespace fbt {

/// Largest K_max, monitor_passes and fused(k) fbt accepts (a bound against runaway sizes, not advice).
inline constexpr int kMaxPasses = 1000;

/// \brief The paper's pass mixes by run (arXiv:2608.08888; spec section 10), as shares of the *whole run's*
/// batches: paper_10b 100% 3-pass; paper_100b 75% 1-pass + 25% 3-pass (the run behind the ~2x claim);
/// paper_200b and paper_400b 75/22/3; two_pass_75_25 75% 1-pass + 25% 2-pass (the mix the paper found to
/// diverge beyond 2 passes). Empty for an unknown name.
inline std::map<int, double> pass_mix_preset(const std::string& name) {
  if (name == "paper_10b") return {{3, 1.0}};
  if (name == "paper_100b") return {{1, 0.75}, {3, 0.25}};
  if (name == "paper_200b" || name == "paper_400b") return {{1, 0.75}, {2, 0.22}, {3, 0.03}};
  if (name == "two_pass_75_25") return {{1, 0.75}, {2, 0.25}};
  return {};
}
inline const char* pass_mix_preset_names() { return "paper_10b, paper_100b, paper_200b, paper_400b, two_pass_75_25"; }

struct ScheduleConfig {
  double feedback_start = 0.75;                       ///< fraction of the steps trained single-pass first
  std::map<int, double> pass_mix{{2, 0.88}, {3, 0.12}};  ///< P(K) after the start (a preset: its whole-run shares)
  std::string pass_preset;                            ///< a pass_mix_preset name, or empty (pass_mix is P(K) after the start)
  int K_max = 3;
  double lambda = 1.0;                                ///< weight of the fed-back passes' mean loss
  long lambda_ramp = 0;                               ///< steps over which lambda ramps 0 -> lambda after the start
  std::string prefix = "uniform";                     ///< uniform | none | a fixed number of plain positions
  double sigma = 0.02;                                ///< jitter of the carried state
  bool detach = false;
  int grad_passes = 0;                                ///< 0 = all passes

  /// Throws fbt::Error naming the field and its value.
  void validate() const {
    auto fail = [](const std::string& f, const std::string& why) { throw Error("invalid schedule: " + f + ": " + why); };
    auto real = [](double x) {
      std::ostringstream os;
      os << x;
      return os.str();
    };
    if (!(feedback_start >= 0 && feedback_start <= 1)) fail("feedback_start", "must be a fraction in [0, 1], got " + real(feedback_start));
    if (K_max < 1 || K_max > kMaxPasses) fail("K_max", "must be in [1, " + std::to_string(kMaxPasses) + "], got " + std::to_string(K_max));
    if (!pass_preset.empty()) {
      const auto run = pass_mix_preset(pass_preset);
      if (run.empty()) fail("pass_mix", "unknown preset \"" + detail::excerpt(pass_preset) + "\" (known: " + pass_mix_preset_names() + ")");
      const double p1 = run.count(1) ? run.at(1) : 0.0;
      if (feedback_start > p1 + 1e-12)
        fail("feedback_start", real(feedback_start) + " is later than pass_mix " + pass_preset + " allows: it trains " + real(100 * p1) +
                                   "% of the run's batches single-pass, so feedback must start by " + real(p1) + " of the steps");
      if (feedback_start >= 1.0 && p1 < 1.0) fail("feedback_start", "is 1 (no feedback), but pass_mix " + pass_preset + " needs fed-back batches");
    }
    double total = 0;
    for (const auto& [k, p] : pass_mix) {
      if (k < 1 || k > K_max) fail("pass_mix", "K = " + std::to_string(k) + " is outside [1, K_max = " + std::to_string(K_max) + "]");
      if (!(p >= 0) || !std::isfinite(p)) fail("pass_mix", "probability of K = " + std::to_string(k) + " must be finite and >= 0, got " + real(p));
      total += p;
    }
    if (pass_mix.empty() || !(total > 0)) fail("pass_mix", "needs at least one K with positive probability");
    if (!(lambda >= 0) || !std::isfinite(lambda)) fail("lambda", "must be finite and >= 0, got " + real(lambda));
    if (lambda_ramp < 0) fail("lambda_ramp", "must be >= 0, got " + std::to_string(lambda_ramp));
    if (prefix != "uniform" && prefix != "none") {
      const bool digits = !prefix.empty() && prefix.size() <= 9 && prefix.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) fail("prefix", "must be uniform, none or a number in [0, 999999999], got \"" + detail::excerpt(prefix) + "\"");
    }
    if (!(sigma >= 0) || !std::isfinite(sigma)) fail("sigma", "must be finite and >= 0, got " + real(sigma));
    if (grad_passes < 0 || grad_passes > K_max)
      fail("grad_passes", "must be in [0, K_max = " + std::to_string(K_max) + "] (0 = all), got " + std::to_string(grad_passes));
  }

  /// \brief Parses "2:0.88,3:0.12": comma-separated K:probability pairs, each K a whole integer and each
  /// probability a whole finite number (no trailing text: "2:0.5junk" is refused), no K twice.
  static std::map<int, double> parse_mix(const std::string& s) {
    auto fail = [&](const std::string& why) {
      throw Error("invalid schedule: pass_mix: " + why + " (expected K:probability pairs like 2:0.88,3:0.12), got \"" + detail::excerpt(s) + "\"");
    };
    std::map<int, double> m;
    std::size_t i = 0;
    while (i <= s.size()) {
      const std::size_t j = std::min(s.find(',', i), s.size());
      const std::string item = s.substr(i, j - i);
      const auto c = item.find(':');
      if (c == std::string::npos) fail("item \"" + detail::excerpt(item) + "\" has no ':'");
      const std::string ks = item.substr(0, c), ps = item.substr(c + 1);
      if (ks.empty() || ks.size() > 4 || ks.find_first_not_of("0123456789") != std::string::npos)
        fail("K \"" + detail::excerpt(ks) + "\" is not a whole number in [1, 9999]");
      const int k = std::atoi(ks.c_str());
      char* end = nullptr;
      const double p = std::strtod(ps.c_str(), &end);
      if (ps.empty() || end == ps.c_str() || *end != 0) fail("probability \"" + detail::excerpt(ps) + "\" of K = " + ks + " is not a number");
      if (!std::isfinite(p) || p < 0) fail("probability \"" + detail::excerpt(ps) + "\" of K = " + ks + " must be finite and >= 0");
      if (ps.find_first_not_of("0123456789.eE+-") != std::string::npos)  // hex and the like
        fail("probability \"" + detail::excerpt(ps) + "\" of K = " + ks + " is not a decimal number");
      if (!m.emplace(k, p).second) fail("K = " + ks + " appears twice");
      i = j + 1;
    }
    return m;
  }
  /// \brief P(K) for the batches from feedback_start on: pass_mix itself, or for a preset the mix that
  /// gives its whole-run shares P_k: P'(1) = (P_1 - f) / (1 - f), P'(k) = P_k / (1 - f) with f = feedback_start
  /// (the single-pass steps before the start count towards P_1). Call after validate().
  std::map<int, double> after_start_mix() const {
    if (pass_preset.empty()) return pass_mix;
    const double f = feedback_start;
    std::map<int, double> m;
    for (const auto& [k, p] : pass_mix_preset(pass_preset)) {
      const double q = k == 1 ? std::max(0.0, p - f) / (1.0 - f) : p / (1.0 - f);
      if (q > 0) m[k] = q;
    }
    return m;
  }
  /// \brief Makes the schedule a baseline's: single-pass throughout (feedback_start 1, pass_mix 1:1, K_max 1).
  void make_single_pass() {
    feedback_start = 1.0, pass_mix = {{1, 1.0}}, pass_preset.clear(), K_max = 1, grad_passes = 0;
  }
  /// pass_mix as a config records it: the preset's name, or the mix (format_mix).
  std::string mix_text() const { return pass_preset.empty() ? format_mix(pass_mix) : pass_preset; }
  /// Sets pass_mix from a config's text: a preset name or "K:p,..." (parse_mix).
  void set_mix_text(const std::string& s) {
    const auto run = pass_mix_preset(s);
    if (!run.empty()) pass_preset = s, pass_mix = run;
    else pass_preset.clear(), pass_mix = parse_mix(s);
  }

  /// The mix as "K:w,K:w", each weight with the fewest digits (up to 17) that read back to the same
  /// double, so a run's recorded pass_mix resumes with exactly the probabilities it trained with.
  static std::string format_mix(const std::map<int, double>& m) {
    std::string out;
    for (auto it = m.begin(); it != m.end(); ++it) {
      std::string w;
      for (int prec = 6; prec <= 17; ++prec) {
        std::ostringstream os;
        os.precision(prec);
        os << it->second;
        w = os.str();
        if (std::strtod(w.c_str(), nullptr) == it->second) break;
      }
      out += (it == m.begin() ? "" : ",") + std::to_string(it->first) + ":" + w;
    }
    return out;
  }
};

/// What one batch is trained with.
struct PassPlan {
  int K = 1;
  double lambda = 1.0;
  std::vector<int> prefix;  ///< (K, B): plain positions per pass and sequence (row 0 unused)
};

class MultiPassScheduler {
 public:
  MultiPassScheduler(const ScheduleConfig& c, long total_steps) : c_(c), total_(total_steps) {
    c_.validate();
    FBT_ASSERT(total_steps > 0, "schedule: total_steps must be > 0");
    const auto mix = c_.after_start_mix();
    double tot = 0;
    for (const auto& kv : mix) tot += kv.second;
    for (const auto& kv : mix) cdf_.push_back({kv.first, (cum_ += kv.second / tot)});
  }
  const ScheduleConfig& config() const { return c_; }
  /// First step with feedback.
  long start_step() const { return long(c_.feedback_start * double(total_) + 0.5); }

  /// \brief The plan of step `step` for a (B, T) batch; draws K and the prefixes from rng.
  void plan(long step, int B, int T, Rng& rng, PassPlan& out) const {
    out.K = 1;
    out.lambda = c_.lambda;
    if (step >= start_step()) {
      const double u = rng.uniform();
      out.K = cdf_.back().first;
      for (const auto& [k, c] : cdf_)
        if (u < c) {
          out.K = k;
          break;
        }
      if (c_.lambda_ramp > 0) out.lambda = c_.lambda * std::min(1.0, double(step - start_step() + 1) / double(c_.lambda_ramp));
    }
    out.prefix.assign(std::size_t(out.K) * B, 0);
    for (int j = 1; j < out.K; ++j)
      for (int b = 0; b < B; ++b) {
        int p = 0;
        if (c_.prefix == "uniform") p = int(rng.below(std::uint32_t(T)));
        else if (c_.prefix != "none") p = std::min(T, std::atoi(c_.prefix.c_str()));
        out.prefix[std::size_t(j) * B + b] = p;
      }
  }

  /// Mean passes per batch over the whole run (token-equivalent compute / tokens): 75/22/3 -> 1.28.
  double mean_passes() const {
    double after = 0;
    double prev = 0;
    for (const auto& [k, c] : cdf_) after += k * (c - prev), prev = c;
    const double f = double(start_step()) / double(total_);
    return f * 1.0 + (1.0 - f) * after;
  }

 private:
  ScheduleConfig c_;
  long total_;
  double cum_ = 0;
  std::vector<std::pair<int, double>> cdf_;
};

}  // namespace fbt
