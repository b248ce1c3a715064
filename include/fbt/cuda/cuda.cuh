// fbt/cuda/cuda.cuh: everything a .cu program needs to train and decode on the GPU.
//
// cuda/ is a thin extension: the backend (backend.cuh), its kernels (kernels.cuh, gemm.cuh), device
// buffers and checks. The K-pass step, the passes, the optimizer and the decoder are the library's own,
// written once over a backend; on the GPU they run as
//   fbt::Model<float, F> m(cfg, seed);
//   fbt::cuda::DeviceModel<decltype(m)> dm(m);            // = fbt::BackendModel<M, CudaBackend>: uploads m
//   fbt::BackendOptimizer<decltype(m), fbt::cuda::CudaBackend> opt(dm);  // AdamW / Muon state on the device
//   dm.zero_grad(); dm.multipass_step(batch, opts, stats); opt.clip_grad_norm(1.0); opt.adamw_update(adam, lr);
//   dm.download(); opt.download();                         // m.params <- device values, grads, moments, step
//   fbt::cuda::DeviceDecoder<decltype(m)> dec(dm, sep);   // = fbt::Decoder<M, CudaBackend>
//   auto out = fbt::generate_batch(dec, requests);
// CUDA-only: include from .cu translation units (nothing outside cuda/ includes a CUDA header).
#pragma once

#include "../decode/decoder.hpp"
#include "../model/backend_model.hpp"
#include "../train/backend_optimizer.hpp"
#include "backend.cuh"

namespace fbt {
namespace cuda {

/// A model's parameters and gradients on the GPU, with the library's step (the optimizer: BackendOptimizer).
template <class M> using DeviceModel = BackendModel<M, CudaBackend>;
/// KV-cached decoding on the GPU, with a DeviceModel's weights.
template <class M> using DeviceDecoder = Decoder<M, CudaBackend>;

}  // namespace cuda
}  // namespace fbt
