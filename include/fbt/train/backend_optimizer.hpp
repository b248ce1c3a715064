// fbt/train/backend_optimizer.hpp: the optimizer's state and update on a backend, for a model whose
// weights live there (model/backend_model.hpp): AdamW, the grouped Muon / NorMuon step, and gradient
// clipping, run by the library's own optimizer code (train/adamw.hpp, train/muon.hpp, train/clip.hpp).
//
//   fbt::BackendModel<M, Be> dm(m);          // the weights on the backend
//   fbt::BackendOptimizer<M, Be> opt(dm);    // uploads m's AdamW moments, step and NorMuon row moments
//   dm.zero_grad(); dm.multipass_step(batch, o, st); opt.clip_grad_norm(1.0); opt.adamw_update(adam, lr);
//   (or opt.grouped_update(adam, lr, muon, matrix_lr): NorMuon / Muon for the matrices)
//   dm.download(); opt.download();           // m.params holds the trained state (e.g. to save a checkpoint)
// The AdamW moments are two flat buffers with the host ParamStore's layout, NorMuon's row moments
// (ParamStore::row_moments, one value per matrix row) a small third. It implements BackendUpdates
// (train/optimizer.hpp), what an optimizer type's backend step calls (Trainer<M, Be>).
#pragma once

#include <algorithm>
#include <cstdint>

#include "../model/backend_model.hpp"
#include "adamw.hpp"
#include "clip.hpp"
#include "muon.hpp"
#include "optimizer.hpp"

namespace fbt {

template <class M, class Be> class BackendOptimizer final : public BackendUpdates<typename M::Scalar> {
 public:
  using T = typename M::Scalar;
  template <class U> using Buf = typename Be::template Buf<U>;

  /// \brief Uploads the host's AdamW moments, row moments and step. dm must outlive this.
  explicit BackendOptimizer(BackendModel<M, Be>& dm) : dm_(dm) {
    const std::size_t n = dm_.size();
    m_.resize(n), v_.resize(n);
    row_v_.resize(std::max<std::size_t>(1, dm_.host().params.row_moments_size()));
    upload();
  }
  BackendOptimizer(const BackendOptimizer&) = delete;
  BackendOptimizer& operator=(const BackendOptimizer&) = delete;

  long step() const { return step_; }
  OptimState<T> state() {
    return OptimState<T>{dm_.values(), dm_.grads(), m_.data(), v_.data(), &dm_.host().params.specs(), &step_, row_v_.data()};
  }

  /// Host AdamW moments, row moments (zero if the host has none) and step -> backend (after a load).
  void upload() {
    auto& ps = dm_.host().params;
    Be& be = dm_.backend();
    be.upload(m_.data(), ps.adam_m(), dm_.size());
    be.upload(v_.data(), ps.adam_v(), dm_.size());
    if (ps.has_row_moments()) be.upload(row_v_.data(), ps.row_moments(), ps.row_moments_size());
    else be.zero(row_v_.data(), row_v_.size());
    step_ = ps.step;
  }
  /// Backend AdamW moments, step, and the row moments when the host has them or a NorMuon step ran
  /// here -> the host ParamStore.
  void download() {
    auto& ps = dm_.host().params;
    Be& be = dm_.backend();
    be.download(ps.adam_m(), m_.data(), dm_.size());
    be.download(ps.adam_v(), v_.data(), dm_.size());
    if (rows_used_ || ps.has_row_moments()) be.download(ps.row_moments(), row_v_.data(), ps.row_moments_size());
    ps.step = step_;
  }

  double grad_global_norm() { return fbt::grad_global_norm(dm_.backend(), dm_.grads(), dm_.size()); }
  double clip_grad_norm(double max_norm) { return fbt::clip_grad_norm(dm_.backend(), dm_.grads(), dm_.size(), max_norm); }
  void adamw_update(const AdamWConfig& cfg, double lr) override {
    fbt::adamw_update(dm_.backend(), state(), cfg, lr);
    dm_.changed();
  }
  /// One grouped step here (train/muon.hpp): matrices by Muon / NorMuon at matrix_lr, the rest by AdamW at lr.
  void grouped_update(const AdamWConfig& adam, double lr, const MuonConfig& muon, double matrix_lr) override {
    fbt::grouped_update(dm_.backend(), state(), adam, lr, muon, matrix_lr, muon_ws_);
    rows_used_ = rows_used_ || muon.variant == MuonVariant::NorMuon;
    dm_.changed();
  }

 private:
  BackendModel<M, Be>& dm_;
  Buf<T> m_, v_;            // (size) AdamW's moments
  Buf<T> row_v_;            // (row_moments_size) NorMuon's neuron-wise second moments
  bool rows_used_ = false;  // a NorMuon step ran here: download() brings row_v_ back
  MuonWorkspace<Be> muon_ws_;
  long step_ = 0;
};

}  // namespace fbt
