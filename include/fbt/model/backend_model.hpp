// fbt/model/backend_model.hpp: a model's trainable state in a backend's memory, with the K-pass step and
// the optimizer run there: what a GPU (or any backend that is not the host) trains with.
//
//   fbt::BackendModel<M, fbt::cuda::CudaBackend> dm(m);   // uploads m's values, moments and step
//   dm.zero_grad(); dm.multipass_step(batch, opts, stats); dm.clip_grad_norm(1.0); dm.adamw_update(adam, lr);
//   (or dm.grouped_update(adam, lr, muon, matrix_lr): NorMuon / Muon for the matrices, train/muon.hpp)
//   dm.download();                                         // m.params now holds the trained state
//   fbt::Decoder<M, fbt::cuda::CudaBackend> dec(dm, sep);  // KV-cached decoding on the device
// The parameters, gradients and AdamW moments are four flat buffers with the host ParamStore's layout
// (the same offsets: a copy either way is one transfer), the constants (RoPE tables) a fifth, and
// NorMuon's row moments (ParamStore::row_moments, one value per matrix row) a small sixth. The
// step, the passes, the optimizer and the decoder are the library's own (model/multipass.hpp,
// train/adamw.hpp, decode/decoder.hpp): the backend only supplies memory and kernels.
#pragma once

#include <cstdint>
#include <utility>

#include "../train/muon.hpp"
#include "../train/clip.hpp"
#include "multipass.hpp"

namespace fbt {

template <class M, class Be> class BackendModel {
 public:
  using T = typename M::Scalar;
  using Backend = Be;
  template <class U> using Buf = typename Be::template Buf<U>;

  /// \brief Uploads host's values, AdamW moments, step and constants; zero gradients. be_args construct the backend.
  template <class... A> explicit BackendModel(M& host, A&&... be_args) : host_(host), be_(std::forward<A>(be_args)...) {
    const std::size_t n = host_.params.size();
    value_.resize(n), grad_.resize(n), m_.resize(n), v_.resize(n);
    row_v_.resize(std::max<std::size_t>(1, host_.params.row_moments_size()));
    consts_.resize(std::max<std::size_t>(1, host_.params.constants_size()));
    be_.upload(consts_.data(), host_.params.constants(), host_.params.constants_size());
    upload();
    zero_grad();
  }
  BackendModel(const BackendModel&) = delete;
  BackendModel& operator=(const BackendModel&) = delete;

  M& host() { return host_; }
  const M& host() const { return host_; }
  Be& backend() { return be_; }
  std::size_t size() const { return host_.params.size(); }
  long step() const { return step_; }
  /// Changes whenever the weights here change (upload, adamw_update): a decoder's per-token tables key.
  std::uint64_t version() const { return version_; }
  /// The parameters as the backend sees them (what the step and the decoder read).
  Weights<T> weights() { return Weights<T>{value_.data(), grad_.data(), consts_.data()}; }
  OptimState<T> optim() { return OptimState<T>{value_.data(), grad_.data(), m_.data(), v_.data(), &host_.params.specs(), &step_, row_v_.data()}; }

  // ---- host <-> backend -----------------------------------------------------------------------
  /// Host values, AdamW moments, row moments (zero if the host has none) and step -> backend (after the
  /// host weights were changed or loaded).
  void upload() {
    const std::size_t n = size();
    be_.upload(value_.data(), host_.params.values(), n);
    be_.upload(m_.data(), host_.params.adam_m(), n);
    be_.upload(v_.data(), host_.params.adam_v(), n);
    if (host_.params.has_row_moments()) be_.upload(row_v_.data(), host_.params.row_moments(), host_.params.row_moments_size());
    else be_.zero(row_v_.data(), row_v_.size());
    step_ = host_.params.step;
    ++version_;
  }
  /// Backend values, gradients, AdamW moments, step, and the row moments when the host has them or a
  /// NorMuon step ran here -> the host ParamStore (e.g. to save a checkpoint).
  void download() {
    const std::size_t n = size();
    be_.download(host_.params.values(), value_.data(), n);
    be_.download(host_.params.grads(), grad_.data(), n);
    be_.download(host_.params.adam_m(), m_.data(), n);
    be_.download(host_.params.adam_v(), v_.data(), n);
    if (rows_used_ || host_.params.has_row_moments())
      be_.download(host_.params.row_moments(), row_v_.data(), host_.params.row_moments_size());
    host_.params.step = step_;
  }
  void download_values(T* dst) { be_.download(dst, value_.data(), size()); }
  void download_grads(T* dst) { be_.download(dst, grad_.data(), size()); }
  void zero_grad() { be_.zero(grad_.data(), size()); }

  // ---- optimizer (train/adamw.hpp, train/clip.hpp) ----------------------------------------------
  double grad_global_norm() { return fbt::grad_global_norm(be_, grad_.data(), size()); }
  double clip_grad_norm(double max_norm) { return fbt::clip_grad_norm(be_, grad_.data(), size(), max_norm); }
  void adamw_update(const AdamWConfig& cfg, double lr) {
    fbt::adamw_update(be_, optim(), cfg, lr);
    ++version_;
  }
  /// One grouped step here (train/muon.hpp): matrices by Muon / NorMuon at matrix_lr, the rest by AdamW at lr.
  void grouped_update(const AdamWConfig& adam, double lr, const MuonConfig& muon, double matrix_lr) {
    fbt::grouped_update(be_, optim(), adam, lr, muon, matrix_lr, muon_ws_);
    rows_used_ = rows_used_ || muon.variant == MuonVariant::NorMuon;
    ++version_;
  }

  // ---- the step (model/multipass.hpp) -----------------------------------------------------------
  /// Bytes of the workspace a step of this shape needs (known before it runs).
  std::size_t workspace_bytes(int B, int Tn, const StepOptions& o) const { return step_workspace_bytes(host_, B, Tn, o, be_); }
  /// Bytes of the parameter buffers (values, gradients, two moments).
  std::size_t param_bytes() const { return 4 * size() * sizeof(T); }
  /// \brief One K-pass step here: gradients ACCUMULATED into the backend's gradients.
  void multipass_step(const Batch& b, const StepOptions& o, StepStats& st) { multipass_step(ws_, b, o, st); }
  StepStats multipass_step(const Batch& b, const StepOptions& o) {
    StepStats st;
    multipass_step(ws_, b, o, st);
    return st;
  }
  /// As above with a caller-owned workspace.
  void multipass_step(Workspace<M, Be>& w, const Batch& b, const StepOptions& o, StepStats& st) {
    fbt::multipass_step(be_, host_, weights(), w, b, o, st);
  }

 private:
  M& host_;
  Be be_;
  Buf<T> value_, grad_, m_, v_, consts_;
  Buf<T> row_v_;            // (row_moments_size) NorMuon's neuron-wise second moments
  bool rows_used_ = false;  // a NorMuon step ran here: download() brings row_v_ back
  MuonWorkspace<Be> muon_ws_;
  long step_ = 0;
  std::uint64_t version_ = 0;
  Workspace<M, Be> ws_;
};

}  // namespace fbt
