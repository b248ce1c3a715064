// Must NOT compile: a backend without gemm (its own hides the CPU's and takes no arguments). ctest
// (contract.backend_without_gemm) expects the message of backend/contract.hpp that names the op.
#include "fbt/model/backend_model.hpp"

struct NoGemm : fbt::CpuBackend<float> {
  void gemm() = delete;
};

int main() {
  fbt::ModelConfig c;
  fbt::Model<float> m(c, 1);
  fbt::BackendModel<fbt::Model<float>, NoGemm> dm(m);
  return 0;
}
