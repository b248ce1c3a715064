// fbt/detail/xtensor_compat.hpp: the one place that knows where xtensor keeps its headers.
//
// xtensor 0.26 moved its headers into area folders (<xtensor/io/xnpy.hpp>, <xtensor/containers/...>,
// <xtensor/views/...>); Debian 12 ships 0.24.3 with the old flat layout (<xtensor/xnpy.hpp>). We pick
// the path with __has_include so fbt builds against both. Only fbt/io/npy.hpp and fbt/xt/ include
// this file: core/ ops/ layers/ model/ train/ stay Eigen + std (STYLE.md 2.1).
#pragma once

#include <cstddef>
#include <vector>

#include "../config.hpp"
#include "../core/tensor.hpp"

#if !FBT_HAS_XTENSOR
#error "fbt/io/npy.hpp and fbt/xt/*.hpp need xtensor: install it and link the fbt::io target"
#endif

#if __has_include(<xtensor/io/xnpy.hpp>)  // xtensor >= 0.26: headers grouped by area
#include <xtensor/containers/xadapt.hpp>
#include <xtensor/containers/xarray.hpp>
#include <xtensor/io/xnpy.hpp>
#include <xtensor/views/xview.hpp>
#else  // xtensor 0.24 / 0.25: flat headers
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xview.hpp>
#endif

namespace fbt::detail {

/// \brief fbt::Shape (signed, as in safetensors) -> xtensor's shape type (std::size_t per axis).
inline std::vector<std::size_t> to_xt_shape(const Shape& shape) {
  std::vector<std::size_t> s;
  s.reserve(shape.size());
  for (auto d : shape) {
    FBT_ASSERT(d >= 0, "negative dimension " + std::to_string(d) + " in a shape");
    s.push_back(std::size_t(d));
  }
  return s;
}

}  // namespace fbt::detail
