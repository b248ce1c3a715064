// Must NOT compile: a block that cannot decode, registered for its slot by the file-scope macro
// (FBT_REGISTER_BLOCK, fbt/model/pieces.hpp). ctest (contract.slot_block_without_decode) expects the compiler's
// message to say what is missing, as for a model of the block's own type (block_without_decode.cpp).
#include "fbt/model/model.hpp"

template <class T> struct TrainOnlyBlock : fbt::DecoderBlock<T> {
  static constexpr const char* name = "train_only";
  using fbt::DecoderBlock<T>::DecoderBlock;
  struct DecodeCache {};  // hides the base's: alloc_decode / decode no longer fit it
};
FBT_REGISTER_BLOCK(TrainOnlyBlock);

int main() { return 0; }
