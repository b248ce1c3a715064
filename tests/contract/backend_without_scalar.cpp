// Must NOT compile: a backend without its Scalar type. ctest (contract.backend_without_scalar) expects
// the message of backend/contract.hpp that names it.
#include "fbt/backend/contract.hpp"
#include "fbt/backend/cpu.hpp"

struct NoScalar {
  static constexpr const char* name = "none";
};

static_assert(fbt::check_backend<NoScalar>(), "");

int main() { return 0; }
