// Must NOT compile: a fuser without backward, registered for its slot (fbt::register_fuser: the adapter of
// fbt/model/pieces.hpp checks the contract). ctest (contract.slot_fuser_without_backward) expects the compiler's
// message to name the missing member, as for a model of the fuser's own type (fuser_without_backward.cpp).
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
  fbt::register_fuser<HalfFuser<float>>();
  return 0;
}
