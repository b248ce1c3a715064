// The extension fbt._fbt: fbt's Python API over the library's own fusers and blocks (fbt/python.hpp), and
// the parts that other source files of python/src/ add (FBT_PYTHON_PART, fbt/python/common.hpp).
#include "fbt/python.hpp"

NB_MODULE(_fbt, m) {
  m.doc() = "fbt: full-bandwidth transformers (arXiv:2608.08888), the C++ library's Python API (docs/python.md)";
  m.attr("__version__") = FBT_VERSION_STRING;
  fbt::python::bind_module(m);
  fbt::python::bind_parts(m);
}
