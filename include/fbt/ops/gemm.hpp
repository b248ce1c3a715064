// fbt/ops/gemm.hpp: the one matrix product every kernel uses, C = alpha op(A) op(B) (+ C).
//
// It calls Eigen's own blocked GEMM (general_matrix_matrix_product, the kernel behind `noalias() =
// A * B`) directly, with packing buffers that fbt owns: Eigen's expression path allocates its packing
// blocks on the heap for every product larger than EIGEN_STACK_ALLOCATION_LIMIT, which would put an
// allocation inside every training step. Here the buffers are thread-local and grow to the largest
// product seen, so after the first step of a shape no product allocates (tests/model/test_no_alloc.cpp).
// All matrices are row-major views (RowMapS); op(X) = X or X^T is a change of storage order, not a copy.
#pragma once

#include <Eigen/Core>

#include "../core/tensor.hpp"

namespace fbt {
namespace detail {

template <class T> struct GemmScratch {
  AlignedVector<T> a, b;  // packed blocks of the left / right operand
};
template <class T> GemmScratch<T>& gemm_scratch() {
  thread_local GemmScratch<T> s;
  return s;
}

/// Eigen's cache blocking (kc, mc, nc chosen by computeProductBlockingSizes) over fbt-owned buffers.
template <class T> class FixedBlocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  FixedBlocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = rows, this->m_nc = cols, this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(this->m_kc, this->m_mc, this->m_nc, Eigen::Index(1));
    auto& s = gemm_scratch<T>();
    const std::size_t na = std::size_t(this->m_kc * this->m_mc), nb = std::size_t(this->m_kc * this->m_nc);
    if (s.a.size() < na) s.a.resize(na);  // grows on the first product of a size, never inside a repeat
    if (s.b.size() < nb) s.b.resize(nb);
    this->m_blockA = s.a.data(), this->m_blockB = s.b.data();
  }
};

template <class T, int LhsOrder, int RhsOrder>
void gemm_run(T* C, Eigen::Index ldc, const T* A, Eigen::Index lda, const T* B, Eigen::Index ldb, Eigen::Index M, Eigen::Index N,
              Eigen::Index K, T alpha) {
  // a row-major result is computed by Eigen as the column-major C^T = op(B)^T op(A)^T: blocking for (N, M, K)
  FixedBlocking<T> blocking(N, M, K);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, LhsOrder, false, T, RhsOrder, false, Eigen::RowMajor, 1>::run(
      M, N, K, A, lda, B, ldb, C, 1, ldc, alpha, blocking, nullptr);
}

}  // namespace detail

/// \brief C (M, N) = alpha op(A) op(B), or C += alpha op(A) op(B) when accumulate.
/// op(A) is (M, K): A itself (transA false, A (M, K)) or A^T (transA true, A (K, M)); likewise op(B) (K, N).
template <class T>
void gemm(RowMapS<T> C, CRowMapS<T> A, bool transA, CRowMapS<T> B, bool transB, bool accumulate, T alpha = T(1)) {
  const Eigen::Index M = transA ? A.cols() : A.rows(), K = transA ? A.rows() : A.cols();
  const Eigen::Index N = transB ? B.rows() : B.cols(), KB = transB ? B.cols() : B.rows();
  FBT_ASSERT(K == KB && C.rows() == M && C.cols() == N,
             "gemm: shapes (" + std::to_string(M) + "x" + std::to_string(K) + ") x (" + std::to_string(KB) + "x" + std::to_string(N) +
                 ") -> (" + std::to_string(C.rows()) + "x" + std::to_string(C.cols()) + ")");
  if (!accumulate) C.setZero();
  if (M == 0 || N == 0 || K == 0) return;
  using namespace Eigen;
  const Index lda = A.outerStride(), ldb = B.outerStride(), ldc = C.outerStride();
  if (!transA && !transB) detail::gemm_run<T, RowMajor, RowMajor>(C.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, alpha);
  else if (!transA && transB) detail::gemm_run<T, RowMajor, ColMajor>(C.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, alpha);
  else if (transA && !transB) detail::gemm_run<T, ColMajor, RowMajor>(C.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, alpha);
  else detail::gemm_run<T, ColMajor, ColMajor>(C.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, alpha);
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_GEMM_INSTANTIATE(EXTERN, T) \
  EXTERN template void gemm<T>(RowMapS<T>, CRowMapS<T>, bool, CRowMapS<T>, bool, bool, T);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_GEMM_INSTANTIATE(extern, float)
FBT_OPS_GEMM_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
