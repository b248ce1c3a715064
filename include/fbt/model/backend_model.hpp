// fbt/model/backend_model.hpp: a model's weights in a backend's memory, with the K-pass step run there:
// what a GPU (or any backend that is not the host) trains and decodes with.
//
//   fbt::BackendModel<M, fbt::cuda::CudaBackend> dm(m);   // uploads m's values and constants
//   dm.zero_grad(); dm.multipass_step(batch, opts, stats);
//   fbt::Decoder<M, fbt::cuda::CudaBackend> dec(dm, sep);  // KV-cached decoding on the device
//   dm.download();                                         // m.params' values and gradients <- the device
// The optimizer's state and its update on the backend (AdamW moments, step, NorMuon's row moments,
// clipping) are train/'s: train/backend_optimizer.hpp, BackendOptimizer<M, Be> over a BackendModel.
// The parameters and gradients are two flat buffers with the host ParamStore's layout (the same offsets:
// a copy either way is one transfer), the constants (RoPE tables) a third. The step and the passes are
// the library's own (model/multipass.hpp): the backend only supplies memory and kernels.
#pragma once

#include <cstdint>
#include <utility>

#include "../backend/contract.hpp"
#include "multipass.hpp"

namespace fbt {

template <class M, class Be> class BackendModel {
  static_assert(check_backend<Be>(), "BackendModel: Be is not a backend (backend/contract.hpp)");

 public:
  using T = typename M::Scalar;
  using Backend = Be;
  template <class U> using Buf = typename Be::template Buf<U>;

  /// \brief Uploads host's values and constants; zero gradients. be_args construct the backend.
  template <class... A> explicit BackendModel(M& host, A&&... be_args) : host_(host), be_(std::forward<A>(be_args)...) {
    const std::size_t n = host_.params.size();
    value_.resize(n), grad_.resize(n);
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
  /// Changes whenever the weights here change (upload, an optimizer step: changed()): a decoder's per-token tables key.
  std::uint64_t version() const { return version_; }
  /// Tells the model its weights were changed in place here (an optimizer step on the backend).
  void changed() { ++version_; }
  /// The parameters as the backend sees them (what the step and the decoder read).
  Weights<T> weights() { return Weights<T>{value_.data(), grad_.data(), consts_.data()}; }
  T* values() { return value_.data(); }  ///< (size) the parameters here, what an optimizer updates
  T* grads() { return grad_.data(); }    ///< (size) the gradients here

  // ---- host <-> backend -----------------------------------------------------------------------
  /// Host values -> backend (after the host weights were changed or loaded).
  void upload() {
    be_.upload(value_.data(), host_.params.values(), size());
    ++version_;
  }
  /// Backend values and gradients -> the host ParamStore.
  void download() {
    download_values(host_.params.values());
    download_grads(host_.params.grads());
  }
  void download_values(T* dst) { be_.download(dst, value_.data(), size()); }
  void download_grads(T* dst) { be_.download(dst, grad_.data(), size()); }
  void zero_grad() { be_.zero(grad_.data(), size()); }

  // ---- the step (model/multipass.hpp) -----------------------------------------------------------
  /// Bytes of the workspace a step of this shape needs (known before it runs).
  std::size_t workspace_bytes(int B, int Tn, const StepOptions& o) const { return step_workspace_bytes(host_, B, Tn, o, be_); }
  /// Bytes of the parameter buffers (values, gradients; an optimizer's state is its own).
  std::size_t param_bytes() const { return 2 * size() * sizeof(T); }
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
  Buf<T> value_, grad_, consts_;
  std::uint64_t version_ = 0;
  Workspace<M, Be> ws_;
};

}  // namespace fbt
