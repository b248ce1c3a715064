// Must NOT compile: an attention whose output stage (layers/attention.hpp) has no backward.
// ctest (contract.output_stage_without_backward) expects the check of the stages (fbt/layers/contract.hpp
// check_attention_stages, run by PreNormBlock's check of its attention) to name the missing member.
#include "fbt/backend/cpu.hpp"
#include "fbt/layers/block.hpp"

template <class T> struct ForwardOnlyOutput : fbt::OutProjection<T> {
  using fbt::OutProjection<T>::OutProjection;
  void backward() const {}  // hides the base's: backward(be, w, cache, x, o, dy, dx, d_o, N) no longer fits
};
template <class T> using MyAttention = fbt::Attention<T, fbt::QkvProjection<T>, fbt::AttentionKernel<T>, ForwardOnlyOutput<T>>;

int main() {
  fbt::LayerSpec s;
  fbt::PreNormBlock<MyAttention<float>, fbt::SwiGLU<float>> block(s.attention(), s.mlp(), 1e-6);
  fbt::Carver<float> keep, temp;
  decltype(block)::Cache c;
  block.alloc(fbt::CpuBackend<float>{}, keep, temp, c, 1, 1, true);
  return 0;
}
