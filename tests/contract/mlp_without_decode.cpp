// Must NOT compile: a block whose MLP part cannot decode (its DecodeCache does not fit alloc_decode /
// decode). ctest (contract.mlp_without_decode) expects PreNormBlock's check of its parts
// (fbt/layers/contract.hpp check_mlp) to name the missing member.
#include "fbt/backend/cpu.hpp"
#include "fbt/layers/block.hpp"

template <class T> struct TrainOnlyMlp : fbt::SwiGLU<T> {
  using fbt::SwiGLU<T>::SwiGLU;
  struct DecodeCache {};  // hides the base's: alloc_decode / decode no longer fit it
};

int main() {
  fbt::LayerSpec s;
  fbt::PreNormBlock<fbt::CausalSelfAttention<float>, TrainOnlyMlp<float>> block(s.attention(), s.mlp(), 1e-6);
  fbt::Carver<float> keep, temp;
  decltype(block)::Cache c;
  block.alloc(fbt::CpuBackend<float>{}, keep, temp, c, 1, 1, true);
  return 0;
}
