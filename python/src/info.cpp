// fbt.build_info() and fbt.model_types(model): what this build of the extension holds, and the C++ model type a
// Model runs as. A part of the extension in a file of its own (FBT_PYTHON_PART, fbt/python/common.hpp), and the
// example of visit_model that docs/python.md shows.
#include <nanobind/stl/pair.h>

#include "fbt/python.hpp"

namespace {
using Types = fbt::python::ModuleTypes<>;                        // the library's fusers and blocks
using PyM = fbt::python::PyModel<Types::Fusers, Types::Blocks>;  // fbt.Model
}  // namespace

FBT_PYTHON_PART(info, m) {
  namespace nb = nanobind;
  using namespace nb::literals;
  m.def(
      "build_info",
      [] {
        nb::dict d;
        d["version"] = FBT_VERSION_STRING;
        d["compiler"] = __VERSION__;
#if defined(__AVX512F__)
        d["simd"] = "avx512";
#elif defined(__AVX2__)
        d["simd"] = "avx2";
#else
        d["simd"] = "baseline (no -march=native: pip install . -Ccmake.define.FBT_NATIVE=ON for this CPU's)";
#endif
#if defined(FBT_HAVE_DNNL)
        d["bf16"] = "oneDNN";
#else
        d["bf16"] = "absent: install oneDNN (Debian: libdnnl-dev) and build with FBT_WITH_DNNL=ON";
#endif
#if defined(FBT_HAVE_MPI)
        d["mpi"] = "yes";
#else
        d["mpi"] = "absent: install MPI (Debian: libopenmpi-dev openmpi-bin) and build with FBT_WITH_MPI=ON";
#endif
        d["cuda"] = "absent: the Python package runs on the CPU (the CUDA backend is the fbt_cuda command's, docs/cuda.md)";
        nb::list fusers, blocks;
        for (const auto& n : fbt::NamedTypes<Types::Fusers>::names()) fusers.append(n);
        for (const auto& n : fbt::NamedTypes<Types::Blocks>::names()) blocks.append(n);
        d["fusers"] = fusers, d["blocks"] = blocks;
        return d;
      },
      "What this build holds: version, compiler, SIMD level, the optional bf16 (oneDNN), MPI and CUDA parts (each\n"
      "absent one says what to install), and the fusers and blocks Model knows.");
  m.def(
      "model_types",
      [](PyM& model) {
        return fbt::python::visit_model<Types::Fusers, Types::Blocks>(*model.impl, [](auto& typed) {
          using M = std::decay_t<decltype(typed)>;
          return std::make_pair(std::string(M::Fuser::name), std::string(M::Block::name));
        });
      },
      "model"_a, "(fuser, block): the names of the C++ types the model runs as (its Model<float, Fuser, Block>).");
}
