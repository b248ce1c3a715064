// fbt/cuda/model.cuh: the GPU train step and decoder behind the CPU API, selected at run time (issue 5).
//
//   fbt::cuda::DeviceModel    the engine (engine.cuh) over CudaBackend: a Model<float>'s parameters,
//                             gradients and AdamW moments in device memory; multipass_step (the whole
//                             K-pass chain), zero_grad, clip_grad_norm, adamw_update; download() copies
//                             everything back into the host ParamStore on demand.
//   fbt::cuda::DeviceDecoder  KV-cached decoding (standard, soft, fused(k)) with decode/decoder.hpp's
//                             prefill / step API; fbt::cuda::generate_batch drives it like the CPU one.
//   fbt::cuda::Trainer        one step API that runs on the GPU when device_available(), else on the CPU
//   fbt::cuda::Generator      the same for decoding.
// Example (a .cu file, compiled when fbt is built with CUDA):
//   fbt::Model<float> m(cfg, seed);
//   fbt::cuda::Trainer tr(m);                    // GPU if one is present
//   tr.zero_grad(); tr.multipass_step(batch, opts, stats); tr.adamw_update(adam, lr);
//   tr.sync_to_host();                           // m.params now holds the trained weights
// CUDA-only: include from .cu translation units; nothing under fbt/{core,ops,layers,model,...} includes it.
#pragma once

#include <memory>
#include <string>

#include "../train/clip.hpp"
#include "backend.cuh"
#include "engine.cuh"

namespace fbt {
namespace cuda {

using DeviceModel = DeviceModelT<CudaBackend>;
using DeviceDecoder = DeviceDecoderT<CudaBackend>;
using DeviceSequence = DeviceSequenceT<CudaBackend>;

/// \brief The training step API on the GPU when one is present (and wanted), else the CPU path.
class Trainer {
 public:
  /// \param use_gpu false forces the CPU path; true uses the GPU when device_available().
  explicit Trainer(Model<float>& m, bool use_gpu = true, GemmMode mode = GemmMode::fp32) : m_(m) {
    if (use_gpu && device_available()) gpu_ = std::make_unique<DeviceModel>(m, mode);
  }
  bool on_gpu() const { return gpu_ != nullptr; }
  /// "cpu" or the device's name.
  std::string device() const { return gpu_ ? device_name() : std::string("cpu"); }
  DeviceModel* device_model() { return gpu_.get(); }

  void zero_grad() { gpu_ ? gpu_->zero_grad() : m_.params.zero_grad(); }
  /// As fbt::multipass_step (gradients accumulated).
  void multipass_step(const Batch& b, const StepOptions& o, StepStats& st) {
    if (gpu_) gpu_->multipass_step(b, o, st);
    else fbt::multipass_step(m_, ws_, b, o, st);
  }
  double clip_grad_norm(double max_norm) { return gpu_ ? gpu_->clip_grad_norm(max_norm) : fbt::clip_grad_norm(m_.params, max_norm); }
  void adamw_update(const AdamWConfig& cfg, double lr) { gpu_ ? gpu_->adamw_update(cfg, lr) : fbt::adamw_update(m_.params, cfg, lr); }
  /// Device weights, gradients, moments and step -> m.params (no-op on the CPU path).
  void sync_to_host() {
    if (gpu_) gpu_->download();
  }
  /// m.params -> device (after the host weights were changed or loaded; no-op on the CPU path).
  void sync_from_host() {
    if (gpu_) gpu_->upload();
  }

 private:
  Model<float>& m_;
  std::unique_ptr<DeviceModel> gpu_;
  Workspace<float> ws_;
};

/// \brief generate_batch on the GPU when one is present (and wanted), else with the CPU Decoder.
class Generator {
 public:
  /// Decodes with m's current weights (a GPU generator uploads them at construction: call refresh()
  /// after changing them). sep_token as for Decoder.
  explicit Generator(Model<float>& m, int sep_token = -1, bool use_gpu = true) : cpu_(m, sep_token) {
    if (use_gpu && device_available()) {
      own_ = std::make_unique<DeviceModel>(m);
      gpu_ = std::make_unique<DeviceDecoder>(*own_, sep_token);
    }
  }
  /// Decodes with a DeviceModel's weights (e.g. a Trainer's, during training).
  Generator(DeviceModel& dm, int sep_token = -1) : cpu_(dm.host(), sep_token) {
    gpu_ = std::make_unique<DeviceDecoder>(dm, sep_token);
  }
  bool on_gpu() const { return gpu_ != nullptr; }
  void refresh() {
    if (own_) own_->upload();
  }
  std::vector<std::vector<int>> generate_batch(const std::vector<Request>& reqs) {
    return gpu_ ? cuda::generate_batch(*gpu_, reqs) : fbt::generate_batch(cpu_, reqs);
  }

 private:
  Decoder<float> cpu_;
  std::unique_ptr<DeviceModel> own_;
  std::unique_ptr<DeviceDecoder> gpu_;
};

}  // namespace cuda
}  // namespace fbt
