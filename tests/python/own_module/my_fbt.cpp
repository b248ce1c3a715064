// tests/python/own_module/my_fbt.cpp: a user's own extension module with fbt's Python API over a fuser of the
// user's (LowRankFuser of examples/own_project/my_pieces.hpp), as docs/python.md shows it; test_own_module.py
// imports it. Its lists hold the user's fuser only (bind_types, what bind_module<Extra...>
// calls with the library's lists added), so the test's extension compiles in a fraction of fbt._fbt's time.
#include "fbt/python.hpp"
#include "my_pieces.hpp"

NB_MODULE(my_fbt, m) {
  fbt::python::bind_types<fbt::TypeList<LowRankFuser<float>>, fbt::BuiltinBlocks<float>>(m);
}
