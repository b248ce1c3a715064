// Must NOT compile: a block that cannot decode (no DecodeCache / decode). ctest
// (contract.block_without_decode) expects the compiler's message to say what is missing.
#include "fbt/model/model.hpp"

template <class T> struct TrainOnlyBlock : fbt::DecoderBlock<T> {
  using fbt::DecoderBlock<T>::DecoderBlock;
  struct DecodeCache {};  // hides the base's: alloc_decode / decode no longer fit it
};

int main() {
  fbt::ModelConfig c;
  fbt::Model<float, fbt::GluFuser<float>, TrainOnlyBlock<float>> m(c, 1);
  return 0;
}
