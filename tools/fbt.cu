// tools/fbt.cu: the `fbt` command compiled by nvcc (target fbt_cuda, build/tools/fbt_cuda; tests/cuda/CMakeLists.txt):
// tools/fbt.cpp with the GPU among its devices, `fbt train|eval|sample --device cuda` (cli/common.hpp with_device).
#include "fbt.cpp"
