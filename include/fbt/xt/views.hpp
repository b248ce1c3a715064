// fbt/xt/views.hpp: zero-copy xtensor n-d views of memory that fbt owns (params, grads, caches).
//
// Eigen does the compute on 2-d RowMap views; xtensor is the n-d boundary for users, e.g. a
// (P, L, B, T, C) hidden-state dump sliced with xt::view (STYLE.md "Eigen and xtensor: who does what").
// A view is xt::adapt over the raw pointer with no ownership: writing through it writes the buffer.
//
// Layout is pinned row-major (C order) explicitly, never left to XTENSOR_DEFAULT_LAYOUT. Eigen's own
// default is column-major, which is why fbt only ever uses its RowMat/RowMap aliases; with both
// pinned, element (i, j) of mat(p, R, C) and of xt_view(p, {R, C}) is the same p[i * C + j]
// (tests/xt/test_views.cpp checks this).
#pragma once

#include <string>
#include <utility>

#include "../core/params.hpp"
#include "../core/tensor.hpp"
#include "../detail/xtensor_compat.hpp"

namespace fbt {

/// \brief Row-major, non-owning xtensor view of `numel(shape)` elements starting at `data`.
/// \tparam T element type; `const float` gives a read-only view.
/// \param data  first element; must outlive the view and hold at least numel(shape) elements
/// \param shape outermost axis first, e.g. {B, T, C}
template <class T> auto xt_view(T* data, const Shape& shape) {
  auto s = detail::to_xt_shape(shape);
  const auto n = std::size_t(numel(shape));
  // Pass the pointer as an rvalue so the adaptor stores a T* (not a reference to our local).
  return xt::adapt<xt::layout_type::row_major>(std::move(data), n, xt::no_ownership(), std::move(s));
}

/// \brief Read-only row-major view of a mutable buffer (the xtensor analogue of fbt::cmat).
template <class T> auto cxt_view(const T* data, const Shape& shape) { return xt_view<const T>(data, shape); }

/// The type xt_view returns: XtView<float> is mutable, XtView<const float> read-only.
template <class T> using XtView = decltype(xt_view(std::declval<T*>(), std::declval<const Shape&>()));

/// \brief n-d view of a parameter's values, shaped as registered, e.g. (OC, C) for a Linear weight.
/// \param store a finalized ParamStore
/// \param name  checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"; throws fbt::Error if unknown
template <class T> XtView<T> param_view(ParamStore<T>& store, const std::string& name) {
  return xt_view(store.value(name), store.spec(name).shape);
}
/// \brief Read-only n-d view of a parameter's values.
template <class T> XtView<const T> param_view(const ParamStore<T>& store, const std::string& name) {
  return xt_view(store.value(name), store.spec(name).shape);
}

/// \brief n-d view of a parameter's gradient (same shape and offset as its values).
template <class T> XtView<T> grad_view(ParamStore<T>& store, const std::string& name) {
  return xt_view(store.grad(name), store.spec(name).shape);
}
/// \brief Read-only n-d view of a parameter's gradient.
template <class T> XtView<const T> grad_view(const ParamStore<T>& store, const std::string& name) {
  const auto& s = store.spec(name);
  return xt_view(store.grads() + s.offset, s.shape);
}

}  // namespace fbt
