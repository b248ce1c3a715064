// tools/fbt.cpp: the `fbt` command: train, eval, sample, logits, demo, ablate, export over the library's
// own fusers, blocks, decoding policies and optimizers. A command with your own types is the same line
// with them added: fbt::cli_main<MyFuser<float>, MyPolicy>(argc, argv) (fbt/cli.hpp, docs/api.md).
#include "fbt/cli.hpp"

int main(int argc, char** argv) { return fbt::cli_main<>(argc, argv); }
