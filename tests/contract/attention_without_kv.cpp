// Must NOT compile: a block whose attention part has no KV-cache view (kv_width / kv, what a prefill
// commits). ctest (contract.attention_without_kv) expects PreNormBlock's check of its parts
// (fbt/layers/contract.hpp check_attention) to name the missing member.
#include "fbt/backend/cpu.hpp"
#include "fbt/layers/block.hpp"

template <class T> struct NoKvAttention : fbt::CausalSelfAttention<T> {
  using fbt::CausalSelfAttention<T>::CausalSelfAttention;
  int kv_width(int) const { return 0; }  // hides the base's: kv_width() no longer fits
};

int main() {
  fbt::LayerSpec s;
  fbt::PreNormBlock<NoKvAttention<float>, fbt::SwiGLU<float>> block(s.attention(), s.mlp(), 1e-6);
  fbt::Carver<float> keep, temp;
  decltype(block)::Cache c;
  block.alloc(fbt::CpuBackend<float>{}, keep, temp, c, 1, 1, true);
  return 0;
}
