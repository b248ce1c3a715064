// src/kernels.cpp: the fbt::kernels library: the CPU kernels of include/fbt/ops/ and the CPU backend,
// explicitly instantiated for float and double, compiled once here instead of in every file that
// includes fbt. A program built with FBT_COMPILED_KERNELS (which linking fbt::kernels defines) sees
// `extern template` declarations of exactly these and links them from here; the code is the same
// header code, so the numbers are the same as the header-only build compiled with the same flags.
#include "fbt/backend/cpu.hpp"
#include "fbt/ops/activations.hpp"
#include "fbt/ops/attention.hpp"
#include "fbt/ops/embedding.hpp"
#include "fbt/ops/gemm.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/ops/rmsnorm.hpp"
#include "fbt/ops/rope.hpp"
#include "fbt/ops/shift.hpp"
#include "fbt/ops/softmax_xent.hpp"

namespace fbt {

FBT_OPS_GEMM_INSTANTIATE(, float)
FBT_OPS_GEMM_INSTANTIATE(, double)
FBT_OPS_LINEAR_INSTANTIATE(, float)
FBT_OPS_LINEAR_INSTANTIATE(, double)
FBT_OPS_RMSNORM_INSTANTIATE(, float)
FBT_OPS_RMSNORM_INSTANTIATE(, double)
FBT_OPS_ACTIVATIONS_INSTANTIATE(, float)
FBT_OPS_ACTIVATIONS_INSTANTIATE(, double)
FBT_OPS_ATTENTION_INSTANTIATE(, float)
FBT_OPS_ATTENTION_INSTANTIATE(, double)
FBT_OPS_EMBEDDING_INSTANTIATE(, float)
FBT_OPS_EMBEDDING_INSTANTIATE(, double)
FBT_OPS_ROPE_INSTANTIATE(, float)
FBT_OPS_ROPE_INSTANTIATE(, double)
FBT_OPS_SHIFT_INSTANTIATE(, float)
FBT_OPS_SHIFT_INSTANTIATE(, double)
FBT_OPS_SOFTMAX_XENT_INSTANTIATE(, float)
FBT_OPS_SOFTMAX_XENT_INSTANTIATE(, double)

template struct CpuBackend<float>;
template struct CpuBackend<double>;

}  // namespace fbt
