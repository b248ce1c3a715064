// Must NOT compile: a fuser without its name. ctest (contract.fuser_without_name) expects the message.
#include "fbt/model/model.hpp"

template <class T> struct Nameless {
  using Scalar = T;
  struct Cache {};
};

int main() {
  fbt::ModelConfig c;
  fbt::Model<float, Nameless<float>> m(c, 1);
  return 0;
}
