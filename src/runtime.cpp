// src/runtime.cpp: the fbt::runtime library: every `fbt` subcommand (fbt/cli/run_command.hpp) compiled once, for
// Model<float>, whose fuser and blocks are erased at their slots (layers/any_piece.hpp): the step, the decoder,
// the trainer, evaluation, probes, task evaluation, checkpoints and the grid runner, with the library's own
// pieces registered. A program that links it (FBT_COMPILED_RUNTIME) calls fbt::cli_main<Yours...> and compiles
// only its own pieces' adapters: its pieces join by name, as a plugin's do (docs/PERFORMANCE.md, "Compile time").
#define FBT_BUILDING_RUNTIME 1
#include "fbt/cli.hpp"
