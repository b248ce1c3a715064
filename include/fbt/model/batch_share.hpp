// fbt/model/batch_share.hpp: a K-pass step cut by batch rows into shares, and the shares' statistics
// put back together. Written once for the two places that split a step: threads of one process
// (model/parallel_step.hpp) and ranks of a communicator (dist/distributed_step.hpp).
//
// Rows of a batch are independent in every pass (shift_right, attention and the documents stay inside a
// row), so the step of the whole batch is the sum of the steps of its row shares, when each share's step
//   - starts at its first row r0: row_offset += r0 (the jitter is drawn per global row, spec 3),
//   - takes the prefix plan's columns r0 .. r0 + rows - 1 (one per row and pass),
//   - scales its loss gradient by its share of the batch's targets: grad_scale *= targets_i / targets,
// because the loss is the mean over all targets: d(mean)/d(.) = sum_i (targets_i / targets) d(mean_i)/d(.).
// Shares are as even as can be: parts p of B rows get B / p each, the first B % p one more.
// The statistics combine the same way: each pass's loss weighted by the targets share, the diagnostics
// (state rms, gate mean and std, feedback ratio; per-row means) by the rows share.
#pragma once

#include <string>
#include <vector>

#include "multipass.hpp"

namespace fbt {

/// Rows in share i of B rows cut into `parts` shares.
inline int share_rows(int B, int parts, int i) { return B / parts + (i < B % parts ? 1 : 0); }
/// First row of share i.
inline int share_first_row(int B, int parts, int i) {
  int r0 = 0;
  for (int k = 0; k < i; ++k) r0 += share_rows(B, parts, k);
  return r0;
}
/// Targets (entries >= 0) among rows [r0, r0 + rows) of b.
inline long count_targets(const Batch& b, int r0, int rows) {
  long n = 0;
  for (std::size_t i = std::size_t(r0) * b.T, e = std::size_t(r0 + rows) * b.T; i < e; ++i) n += b.targets[i] >= 0;
  return n;
}

/// \brief Rows [r0, r0 + rows) of a batch as a step of their own (see the file comment). The options'
/// prefix points into this object's own storage: keep it in place while the step runs.
struct BatchShare {
  Batch batch;              ///< the rows (pointers into the whole batch)
  StepOptions opt;          ///< the whole step's options, cut to these rows
  std::vector<int> prefix;  ///< (K, rows) the prefix plan's columns of these rows (when the step has one)
  long targets = 0;         ///< targets in these rows
  double target_share = 0;  ///< targets / the batch's targets (0 when the batch has none)
  double row_share = 0;     ///< rows / B

  void cut(const Batch& b, const StepOptions& o, int r0, int rows, long total_targets) {
    const std::size_t off = std::size_t(r0) * b.T;
    batch = Batch{rows, b.T, b.tokens + off, b.targets + off, b.doc_start ? b.doc_start + off : nullptr};
    targets = count_targets(b, r0, rows);
    target_share = total_targets > 0 ? double(targets) / double(total_targets) : 0.0;
    row_share = double(rows) / double(b.B);
    opt = o;
    opt.row_offset = o.row_offset + r0;
    opt.grad_scale = o.grad_scale * target_share;
    if (o.prefix) {
      prefix.resize(std::size_t(o.K) * rows);
      for (int j = 0; j < o.K; ++j)
        for (int i = 0; i < rows; ++i) prefix[std::size_t(j) * rows + i] = o.prefix[std::size_t(j) * b.B + r0 + i];
      opt.prefix = prefix.data();
    }
  }
};

/// st += a share's statistics, weighted by its shares (st.reset(K) first; finish with finish_share_stats).
inline void add_share_stats(StepStats& st, const StepStats& part, const BatchShare& s) {
  for (std::size_t j = 0; j < st.loss.size(); ++j) {
    st.loss[j] += s.target_share * part.loss[j];
    st.state_rms[j] += s.row_share * part.state_rms[j], st.gate_mean[j] += s.row_share * part.gate_mean[j];
    st.gate_std[j] += s.row_share * part.gate_std[j], st.feedback_ratio[j] += s.row_share * part.feedback_ratio[j];
  }
  st.targets += part.targets;
}
/// The pass weights (those of any share) and the objective sum_j weight_j loss_j of the combined statistics.
inline void finish_share_stats(StepStats& st, const std::vector<double>& weight) {
  st.weight = weight;
  st.objective = 0.0;
  for (std::size_t j = 0; j < st.loss.size(); ++j) st.objective += st.weight[j] * st.loss[j];
}

}  // namespace fbt
