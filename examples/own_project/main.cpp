// examples/own_project/main.cpp: `mytool`, the `fbt` command with this project's own pieces added
// (train, eval, sample, logits, ablate, demo, export: `mytool train --fuser lowrank --fuser.rank 4 ...`).
#include "fbt/cli.hpp"
#include "my_pieces.hpp"

int main(int argc, char** argv) { return fbt::cli_main<LowRankFuser<float>, GatedBlock<float>, SoftFirstPolicy, SgdMomentum>(argc, argv); }
