// The `fbt` command inside the Python package (a part of fbt._fbt, FBT_PYTHON_PART): fbt._fbt._main(argv) runs
// `fbt <command> ...` (fbt/cli/run_command.hpp, every subcommand) in this process and returns its exit status. The
// console script `fbt` that `pip install .` puts on PATH and `python -m fbt` call it (python/fbt/__main__.py), so a
// pip user has the same command as a CMake build, with the pieces registered in this process (fbt.load_plugin,
// fbt.register_fuser) and `--plugin FILE`.
#include <string>
#include <vector>

#include "fbt/cli/run_command.hpp"
#include "fbt/python.hpp"

FBT_PYTHON_PART(command, m) {
  namespace nb = nanobind;
  using namespace nb::literals;
  m.def(
      "_main",
      [](const std::vector<std::string>& argv) {
        std::vector<std::string> args = argv.empty() ? std::vector<std::string>{"fbt"} : argv;
        std::vector<char*> ptrs;
        for (auto& a : args) ptrs.push_back(&a[0]);
        ptrs.push_back(nullptr);
        nb::gil_scoped_release nogil;  // a long command: other Python threads run meanwhile (a Python fuser takes the GIL in its calls)
        return fbt::cli::run_command(int(args.size()), ptrs.data());
      },
      "argv"_a,
      "Runs `fbt <command> ...` with argv (argv[0] the program's name) in this process; returns the exit status. What the\n"
      "console script `fbt` and `python -m fbt` call (docs/python.md, \"The fbt command from pip\").");
}
