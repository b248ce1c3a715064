// examples/own_project/plugin.cpp: this project's pieces as a plugin, liblowrank.so (fbt_add_plugin in
// CMakeLists.txt), which the stock `fbt` command and `import fbt` load without rebuilding anything of fbt:
//   fbt train --plugin build/liblowrank.so --fuser lowrank --fuser.rank 8 --block gated_attn --optimizer sgdm ...
//   fbt sample --plugin build/liblowrank.so --checkpoint runs/x/checkpoint --mode "soft_first(4)"
//   python: fbt.load_plugin("build/liblowrank.so"); fbt.train(fuser="lowrank", ...)
// The file is the pieces and one line each: the macros register them when the plugin is loaded.
#include "fbt/plugin.hpp"
#include "my_pieces.hpp"

FBT_REGISTER_FUSER(LowRankFuser);
FBT_REGISTER_BLOCK(GatedBlock);
FBT_REGISTER_POLICY(SoftFirstPolicy);
FBT_REGISTER_OPTIMIZER(SgdMomentum);
