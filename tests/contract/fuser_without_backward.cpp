// Must NOT compile: a fuser without backward. ctest (contract.fuser_without_backward) expects the
// compiler's message to name the missing member (fbt/layers/contract.hpp).
#include "fbt/model/model.hpp"

template <class T> struct HalfFuser {
  using Scalar = T;
  static constexpr const char* name = "half";
  struct Cache {};
  explicit HalfFuser(const fbt::FuserArgs&) {}
  void declare(const fbt::ParamRegistry<T>&) {}
  template <class Be> void alloc(const Be&, fbt::Carver<T>&, fbt::Carver<T>&, Cache&, int, bool) const {}
  template <class Be> void forward(Be&, const fbt::Weights<T>&, Cache&, const T*, const T*, const T*, T*, int) const {}
};

int main() {
  fbt::ModelConfig c;
  c.fuser = "half";
  fbt::Model<float, HalfFuser<float>> m(c, 1);
  return 0;
}
