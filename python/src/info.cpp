// fbt.build_info(), fbt.model_types(model) and fbt.load_plugin(path): what this build of the extension holds, the
// pieces a Model runs, and plugins of one's own pieces (fbt/plugins.hpp). A part of the extension in a file of its
// own (FBT_PYTHON_PART, fbt/python/common.hpp), and the example of visit_model that docs/python.md shows.
#include <nanobind/stl/pair.h>

#include "fbt/python.hpp"

namespace {
using PyM = fbt::python::PyModel;  // fbt.Model
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
        for (const auto& n : fbt::fuser_registry<float>().names()) fusers.append(n);
        for (const auto& n : fbt::block_registry<float>().names()) blocks.append(n);
        d["fusers"] = fusers, d["blocks"] = blocks;
        return d;
      },
      "What this build holds: version, compiler, SIMD level, the optional bf16 (oneDNN), MPI and CUDA parts (each\n"
      "absent one says what to install), and the fusers and blocks Model knows (the library's and the loaded plugins').");
  m.def(
      "model_types",
      [](PyM& model) {
        return fbt::python::visit_model(*model.impl, [](auto& typed) {
          std::string blocks;
          for (const auto& b : typed.blocks) blocks = blocks.empty() || blocks == b.type_name() ? b.type_name() : "mixed";
          return std::make_pair(std::string(typed.fuser().type_name()), blocks);
        });
      },
      "model"_a, "(fuser, block): the names of the pieces in the model's slots (block \"mixed\" when its layers' types differ).");
  m.def(
      "load_plugin",
      [](const std::string& path) {
        const fbt::PluginInfo p = fbt::load_plugin(path);
        nb::dict d;
        d["path"] = p.path, d["file"] = p.file;
        nb::list pieces;
        for (const auto& x : p.pieces) pieces.append(x);
        d["pieces"] = pieces;
        return d;
      },
      "path"_a,
      "Loads a plugin (a shared object of your own fusers, blocks, decoding policies or optimizers, built with fbt_add_plugin)\n"
      "and registers its pieces: Model, train, Decoder and every other call then know them by name. Returns {path, file,\n"
      "pieces}. Loading the same file again is a no-op; a plugin built against another fbt is refused (ValueError).");
}
