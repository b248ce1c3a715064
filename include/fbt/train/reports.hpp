// fbt/train/reports.hpp: what a training step and an evaluation report (StepReport, EvalReport, the
// losses by position) and the evaluation's JSON (eval.jsonl, an ablation's result.json).
#pragma once

#include <cmath>
#include <vector>

#include "../io/json.hpp"

namespace fbt {

/// The contraction monitor's curve (contraction_monitor, train/evaluate.hpp).
struct ContractionCurve {
  std::vector<double> loss;   ///< (k_max) L(k), k = 1..k_max (k = 1 is the plain pass)
  std::vector<double> delta;  ///< (k_max) delta_k = rms(H_k - H_{k-1}); delta_1 = 0
};

struct StepReport {
  long step = 0;  ///< the step just taken (0-based)
  int K = 1;
  std::vector<double> loss;  ///< (K) mean over micro-batches
  double lr = 0, grad_norm = 0, seconds = 0;
  double matrix_lr = 0;          ///< muon / normuon: the matrices' rate this step (0 with adamw)
  double optimizer_seconds = 0;  ///< of `seconds`, the optimizer update alone (after clipping)
  double comm_seconds = 0;       ///< of `seconds`, data-parallel communication not hidden behind the backward (one rank: 0)
  /// The line train.jsonl gets for this step, every field (tokens, tok_s, state_rms, gate_mean, feedback_ratio, ...):
  /// set by Trainer::run before on_step sees the report (empty from train_step alone).
  nlohmann::json record;
};

/// Losses by position within a document (evaluate.hpp PositionSums, as means; NaN where a position has no
/// target): entry i is position i, the last entry pools every position from it on.
struct LossByPosition {
  std::vector<long> count;                ///< (P) targets at each position in val_loss's windows
  std::vector<std::vector<double>> pass;  ///< (K_max, P) mean loss of each pass
  std::vector<double> optimal;            ///< (P) the data's optimal loss (empty: the data has none)
  std::vector<long> seq_count;            ///< (P) targets at each position in the sequential windows (empty: not run)
  std::vector<double> seq_standard, seq_soft, seq_optimal;  ///< (P) each (empty: not run / no feedback / no optimum)
};

struct EvalReport {
  long step = 0;
  double tokens = 0;
  std::vector<double> val_loss;      ///< (K_max) per-pass validation loss (pass k = fused(k-1) prefill at every position)
  double seq_loss_standard = NAN;    ///< token-by-token, no feedback
  double seq_loss_soft = NAN;        ///< token-by-token with true feedback (the sequential-exact loss)
  ContractionCurve contraction;      ///< L(k), delta_k
  double optimal_loss = NAN;         ///< the data's optimal loss over val_loss's windows (NaN: unknown, e.g. text)
  double seq_optimal_loss = NAN;     ///< ... over the sequential losses' windows
  LossByPosition by_position;        ///< the same losses by position within a document
};

/// \brief The losses of an evaluation as JSON (eval.jsonl, an ablation's result.json): val_loss,
/// seq_loss_standard, seq_loss_soft, optimal_loss, seq_optimal_loss (each when computed), contraction and
/// loss_by_position {count, pass, optimal, seq_count, seq_standard, seq_soft, seq_optimal}.
inline nlohmann::json eval_losses_json(const EvalReport& e) {
  nlohmann::json j{{"val_loss", e.val_loss}};
  if (!std::isnan(e.seq_loss_standard)) j["seq_loss_standard"] = e.seq_loss_standard;
  if (!std::isnan(e.seq_loss_soft)) j["seq_loss_soft"] = e.seq_loss_soft;
  if (!std::isnan(e.optimal_loss)) j["optimal_loss"] = e.optimal_loss;
  if (!std::isnan(e.seq_optimal_loss)) j["seq_optimal_loss"] = e.seq_optimal_loss;
  if (!e.contraction.loss.empty()) j["contraction"] = {{"loss", e.contraction.loss}, {"delta", e.contraction.delta}};
  const LossByPosition& b = e.by_position;
  if (!b.count.empty()) {
    nlohmann::json p{{"count", b.count}, {"pass", b.pass}};  // NaN (no target at a position) is written as null
    if (!b.optimal.empty()) p["optimal"] = b.optimal;
    if (!b.seq_count.empty()) p["seq_count"] = b.seq_count;
    if (!b.seq_standard.empty()) p["seq_standard"] = b.seq_standard;
    if (!b.seq_soft.empty()) p["seq_soft"] = b.seq_soft;
    if (!b.seq_optimal.empty()) p["seq_optimal"] = b.seq_optimal;
    j["loss_by_position"] = p;
  }
  return j;
}

}  // namespace fbt
