// fbt.register_fuser(cls): a fuser written in Python (fbt/python/py_fuser.hpp), a part of the extension in a file
// of its own (FBT_PYTHON_PART). fbt.check_fuser, its central-difference check, is Python (python/fbt/__init__.py).
#include "fbt/python.hpp"
#include "fbt/python/py_fuser.hpp"

FBT_PYTHON_PART(py_fuser, m) {
  namespace nb = nanobind;
  using namespace nb::literals;
  m.def(
      "register_fuser", [](nb::object cls) { fbt::python::register_py_fuser(cls); }, "cls"_a,
      "Registers a fuser written in Python (a class with `name`, optional `options`, `parameters()`, `forward(params, s, e)`\n"
      "-> (u, ctx) and `backward(params, ctx, s, e, du)` -> (ds, de, dparams)): Model, train, Decoder and checkpoints then\n"
      "know it by its name, as a C++ fuser. It runs on the CPU, with the GIL taken inside its calls only. Check it first\n"
      "with fbt.check_fuser(cls). Registering a class of the same name again replaces it (docs/python.md, \"A fuser in Python\").");
}
