// fbt/train/lr_schedule.hpp: learning-rate schedules (linear warmup, then cosine, WSD or constant).
//
// Steps are counted from 0; W = warmup_steps, N = total_steps.
//   warmup (all kinds), step < W:  lr = max_lr * (step + 1) / W              (llm.c get_learning_rate)
//   cosine, step >= W:   p = clamp((step - W) / max(1, N - W), 0, 1)
//                        lr = min_lr + 0.5 (max_lr - min_lr) (1 + cos(pi p))
//                        (cosine annealing, Loshchilov & Hutter 2017, "SGDR"; nanoGPT/llm.c form)
//   wsd, step >= W:      D = round(decay_frac * N) decay steps, starting at S = N - D;
//                        lr = max_lr for step < S, then lr = max_lr + (min_lr - max_lr) clamp((step - S) / D, 0, 1)
//                        (warmup-stable-decay, Hu et al. 2024 "MiniCPM", Hagele et al. 2024)
//   constant, step >= W: lr = max_lr
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "../config.hpp"
#include "../detail/input.hpp"

namespace fbt {

/// \brief A learning-rate schedule: lr(step) for step = 0, 1, ... (see the file header for formulas).
///
/// Fill the fields (or use make_lr_schedule, which parses the kind name and validates), call
/// validate() once, then lr(step) every step.
struct LrSchedule {
  enum Kind { Cosine, WSD, Constant };
  Kind kind = Cosine;
  double max_lr = 3e-4;      ///< peak lr, reached at the last warmup step (step W - 1)
  double min_lr = 0.0;       ///< final lr of cosine and wsd (unused by constant)
  long warmup_steps = 0;     ///< W: linear warmup length (0: start at max_lr)
  long total_steps = 1;      ///< N: steps of the whole run; lr(step >= N) stays at the final value
  double decay_frac = 0.2;   ///< wsd only: fraction of N spent in the final linear decay

  /// \brief Throws fbt::Error naming the first invalid field: total_steps > 0,
  /// 0 <= warmup_steps <= total_steps, max_lr >= min_lr >= 0 (finite), decay_frac in [0, 1], and for
  /// wsd the warmup must end before the decay phase starts (warmup_steps <= wsd_decay_start()).
  void validate() const;

  /// \brief First step of the WSD decay phase: S = total_steps - round(decay_frac * total_steps)
  /// (round half away from zero, std::llround).
  long wsd_decay_start() const { return total_steps - long(std::llround(decay_frac * double(total_steps))); }

  /// \brief The learning rate for `step` (>= 0), by the formulas in the file header.
  /// Precondition: validate() passed (lr itself never divides by zero, but an invalid
  /// schedule gives meaningless values).
  double lr(long step) const;
};

/// \brief Parses "cosine", "wsd" or "constant" (exact, lowercase); throws fbt::Error naming the bad
/// value and the allowed ones.
inline LrSchedule::Kind parse_lr_schedule_kind(const std::string& name) {
  if (name == "cosine") return LrSchedule::Cosine;
  if (name == "wsd") return LrSchedule::WSD;
  if (name == "constant") return LrSchedule::Constant;
  throw Error("fbt: lr_schedule: unknown lr schedule \"" + detail::excerpt(name) + "\" (allowed: cosine, wsd, constant)");
}

/// \brief The name parse_lr_schedule_kind accepts for `kind`.
inline const char* lr_schedule_kind_name(LrSchedule::Kind kind) {
  switch (kind) {
    case LrSchedule::Cosine: return "cosine";
    case LrSchedule::WSD: return "wsd";
    case LrSchedule::Constant: return "constant";
  }
  return "?";
}

/// \brief Builds and validates a schedule from its kind name; throws fbt::Error on a bad name or field.
inline LrSchedule make_lr_schedule(const std::string& kind, double max_lr, double min_lr, long warmup_steps,
                                   long total_steps, double decay_frac = 0.2) {
  LrSchedule s;
  s.kind = parse_lr_schedule_kind(kind);
  s.max_lr = max_lr;
  s.min_lr = min_lr;
  s.warmup_steps = warmup_steps;
  s.total_steps = total_steps;
  s.decay_frac = decay_frac;
  s.validate();
  return s;
}

namespace detail {
template <class V> std::string num_str(V x) {
  std::ostringstream os;
  os << x;
  return os.str();
}
[[noreturn]] inline void lr_schedule_fail(const std::string& field, const std::string& what) {
  throw Error("fbt: lr schedule: " + field + " " + what);
}
}  // namespace detail

inline void LrSchedule::validate() const {
  using detail::num_str;
  if (total_steps <= 0) detail::lr_schedule_fail("total_steps", "= " + num_str(total_steps) + " must be > 0");
  if (warmup_steps < 0 || warmup_steps > total_steps)
    detail::lr_schedule_fail("warmup_steps", "= " + num_str(warmup_steps) + " must be in [0, total_steps = " +
                                                 num_str(total_steps) + "]");
  if (!std::isfinite(min_lr) || min_lr < 0.0)
    detail::lr_schedule_fail("min_lr", "= " + num_str(min_lr) + " must be finite and >= 0");
  if (!std::isfinite(max_lr) || max_lr < min_lr)
    detail::lr_schedule_fail("max_lr", "= " + num_str(max_lr) + " must be finite and >= min_lr = " + num_str(min_lr));
  if (!(decay_frac >= 0.0 && decay_frac <= 1.0))  // also rejects NaN
    detail::lr_schedule_fail("decay_frac", "= " + num_str(decay_frac) + " must be in [0, 1]");
  if (kind == WSD && warmup_steps > wsd_decay_start())
    detail::lr_schedule_fail("warmup_steps", "= " + num_str(warmup_steps) + " overlaps the wsd decay phase, which starts at step " +
                                                 num_str(wsd_decay_start()) + " (total_steps - round(decay_frac * total_steps)); "
                                                 "lower warmup_steps or decay_frac");
}

inline double LrSchedule::lr(long step) const {
  FBT_ASSERT(step >= 0, "LrSchedule::lr: step = " + std::to_string(step) + " must be >= 0");
  // Linear warmup from max_lr / W at step 0 to max_lr at step W - 1 (never starts at 0).
  if (step < warmup_steps) return max_lr * double(step + 1) / double(warmup_steps);
  switch (kind) {
    case Cosine: {
      const double span = double(std::max(1L, total_steps - warmup_steps));
      const double p = std::clamp(double(step - warmup_steps) / span, 0.0, 1.0);
      const double pi = 3.14159265358979323846;
      return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(pi * p));
    }
    case WSD: {
      const long start = wsd_decay_start();
      const long decay_steps = total_steps - start;
      if (decay_steps <= 0 || step < start) return max_lr;  // stable phase (decay_frac = 0: never decays)
      const double p = std::clamp(double(step - start) / double(decay_steps), 0.0, 1.0);
      return max_lr + (min_lr - max_lr) * p;
    }
    case Constant: return max_lr;
  }
  return max_lr;
}

}  // namespace fbt
