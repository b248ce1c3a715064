// tests/common/stage_rig.hpp: one piece of a layer (an attention stage, layers/attention.hpp) with its own
// ParamStore (names under `scope`) and buffers laid out once, on a backend Be (the CPU by default; the
// host stand-in of the CUDA backend in tests/cuda). Stages take (N) or (B, T) and have no common alloc
// signature, so the test gives the declare and alloc calls as lambdas.
#pragma once

#include <string>

#include "fbt/backend/cpu.hpp"
#include "fbt/core/arena.hpp"
#include "fbt/core/params.hpp"
#include "fbt/layers/common.hpp"

namespace fbt_test {

template <class T, class Be = fbt::CpuBackend<T>> struct StageRig {
  fbt::ParamStore<T> ps;
  Be be;
  typename Be::template Buf<T> mem;
  /// declare(const ParamRegistry<T>&) registers the piece's parameters; alloc(Carver<T>& keep, Carver<T>& temp) lays out its caches.
  template <class Declare, class Alloc> StageRig(const std::string& scope, Declare&& declare, Alloc&& alloc) {
    declare(fbt::ParamRegistry<T>(ps, scope));
    ps.finalize();
    fbt::lay_out_regions<T>(mem, [&](fbt::Regions<T>& r) {
      fbt::Carver<T> tmp = r.temp();
      alloc(r.keep, tmp);
      r.done(tmp);
    });
  }
  StageRig(const StageRig&) = delete;
  fbt::Weights<T> w() { return fbt::host_weights(ps); }
};

}  // namespace fbt_test
