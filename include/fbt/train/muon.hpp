// fbt/train/muon.hpp: the matrix optimizers Muon and NorMuon, the parameter groups, and the grouped step
// (matrices by Muon or NorMuon, everything else by AdamW), written once over a backend like adamw_update.
//
// Muon (K. Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks",
// kellerjordan.github.io/posts/muon; github.com/KellerJordan/Muon muon.py, as in modded-nanogpt): SGD with
// Nesterov momentum whose update matrix is orthogonalised by five quintic Newton-Schulz steps and scaled
// by sqrt(max(1, rows / cols)). NorMuon (Z. Li, L. Liu, C. Liang, W. Chen, T. Zhao 2025, "NorMuon: Making
// Muon more efficient and scalable", arXiv:2510.05491, Algorithm 1): Muon's orthogonalised momentum, each
// row (output neuron) divided by the root of an EMA of its mean square, and the update rescaled to an RMS
// of 0.2 lr. Both decay the weights decoupled, by lr x weight_decay (as torch.optim.AdamW). The paper this
// project follows trains matrices with NorMuon (lr 1e-2, weight decay 0.01) and the rest with Adam
// (lr 5e-4, no weight decay) (spec section 10).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "adamw.hpp"

namespace fbt {

// ============================================================================== parameter groups

/// Which optimizer of a grouped step updates a tensor.
enum class ParamGroup {
  Matrix,  ///< Muon / NorMuon: the hidden weight matrices
  Adam,    ///< AdamW: norm gains, biases, the embedding, the LM head
};

/// \brief The group of a parameter, from its name and shape.
///
/// Matrix: every rank-2 tensor (attention and MLP projections, the feedback fuser's matrices) except the
/// two that map tokens: the embedding table ("...embed_tokens.weight", a lookup whose rows are touched
/// sparsely) and the LM head ("lm_head.weight"). Adam: those two and every tensor of another rank (norm
/// gains, biases). This is the split of Muon's and NorMuon's reference code ("hidden 2D weight matrices;
/// embeddings, the classifier head, and gains/biases should be optimized with AdamW").
inline ParamGroup param_group(const ParamSpec& s) {
  auto ends_with = [&](const std::string& suffix) {
    return s.name.size() >= suffix.size() && s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (s.shape.size() != 2) return ParamGroup::Adam;
  if (ends_with("embed_tokens.weight") || s.name == "lm_head.weight") return ParamGroup::Adam;
  return ParamGroup::Matrix;
}
inline const char* param_group_name(ParamGroup g) { return g == ParamGroup::Matrix ? "matrix" : "adam"; }

// ============================================================================== configuration

/// Which matrix optimizer a grouped step runs.
enum class MuonVariant { Muon, NorMuon };

/// \brief Muon / NorMuon hyper-parameters. The lr is not here: muon_update takes the scheduled one.
struct MuonConfig {
  MuonVariant variant = MuonVariant::NorMuon;
  double momentum = 0.95;      ///< beta (Muon) / beta1 (NorMuon) of the momentum EMA
  double beta2 = 0.95;         ///< NorMuon: decay of the neuron-wise second moment
  int ns_steps = 5;            ///< Newton-Schulz iterations
  double weight_decay = 0.01;  ///< decoupled decay lambda (times the lr)
  double eps = 1e-10;          ///< NorMuon: added to sqrt(v) (the reference code's 1e-10)
  double rms = 0.2;            ///< NorMuon: RMS of the update per unit lr (the paper's 0.2: Adam's typical update RMS)
};

/// The quintic Newton-Schulz coefficients (a, b, c) of Muon (maximal slope at zero; Keller Jordan 2024).
constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;
/// Added to ||G||_F before the division that puts the spectral norm below 1 (muon.py).
constexpr double kNsEps = 1e-7;

namespace detail {
inline void check_muon(const MuonConfig& c, double lr) {
  FBT_ASSERT(c.momentum >= 0.0 && c.momentum < 1.0, "Muon momentum = " + std::to_string(c.momentum) + " must be in [0, 1)");
  FBT_ASSERT(c.beta2 >= 0.0 && c.beta2 < 1.0, "NorMuon beta2 = " + std::to_string(c.beta2) + " must be in [0, 1)");
  FBT_ASSERT(c.ns_steps >= 1, "Muon ns_steps = " + std::to_string(c.ns_steps) + " must be >= 1");
  FBT_ASSERT(c.weight_decay >= 0.0, "Muon weight_decay = " + std::to_string(c.weight_decay) + " must be >= 0");
  FBT_ASSERT(c.eps > 0.0 && c.rms > 0.0, "NorMuon eps and rms must be > 0");
  FBT_ASSERT(std::isfinite(lr) && lr >= 0.0, "Muon lr = " + std::to_string(lr) + " must be finite and >= 0");
}
/// Rows and columns of a matrix-group tensor (its leading dimension, and the rest).
inline std::pair<long, long> matrix_dims(const ParamSpec& p) { return {long(p.shape[0]), long(p.size) / long(p.shape[0])}; }
}  // namespace detail

/// \brief The scratch of muon_update, in the backend's memory, sized for the largest matrix it has seen
/// (grown on demand, never inside a step of the same model after the first).
template <class Be> struct MuonWorkspace {
  using T = typename Be::Scalar;
  typename Be::template Buf<T> x, y;        ///< (R, C) the Newton-Schulz iterate and the next one
  typename Be::template Buf<T> gram, poly;  ///< (s, s), s = min(R, C): A = X X^T and B = b A + c A A
  typename Be::template Buf<T> rows;        ///< (R) NorMuon: each row's sum of squares
  /// Makes room for an (R, C) matrix.
  void reserve(long R, long C) {
    const std::size_t n = std::size_t(R) * std::size_t(C), s = std::size_t(std::min(R, C));
    if (x.size() < n) x.resize(n), y.resize(n);
    if (gram.size() < s * s) gram.resize(s * s), poly.resize(s * s);
    if (rows.size() < std::size_t(R)) rows.resize(std::size_t(R));
  }
};

// ============================================================================== Newton-Schulz

/// \brief Orthogonalises G (R, C) by `steps` quintic Newton-Schulz iterations (muon.py
/// zeropower_via_newtonschulz5), on backend `be`; returns the buffer of ws that holds the result (R, C).
///
/// \code
///   X_0 = G / (||G||_F + 1e-7)                 spectral norm <= 1
///   repeat steps times:
///     A = X X^T                                (R <= C)   or  A = X^T X   (R > C)
///     B = b A + c A A
///     X = a X + B X                            (R <= C)   or  X = a X + X B   (R > C)
///   (a, b, c) = (3.4445, -4.7750, 2.0315)
/// \endcode
/// Each iteration maps every singular value s of X to a s + b s^3 + c s^5 (the singular vectors stay),
/// pushing the ones in (0, 1] towards a band around 1: after five steps they lie in about [0.68, 1.13]
/// (Muon's "US'V^T" with S' near I) unless they started very small. The reference transposes a tall G so
/// that the Gram matrix is the small one; since B is symmetric, (B X^T)^T = X B, so a tall X is iterated
/// in place with X^T X and X B instead. The reference computes in bf16; this is in T (float or double).
/// \param g    (R, C) input, in the backend's memory; may be ws.x once ws is reserved for (R, C) (then it
///             is overwritten)
template <class Be, class T> T* newton_schulz(Be& be, const T* g, long R, long C, int steps, MuonWorkspace<Be>& ws) {
  ws.reserve(R, C);
  const std::size_t n = std::size_t(R) * std::size_t(C);
  const long s = std::min(R, C);
  const bool tall = R > C;
  T* X = ws.x.data();
  T* Y = ws.y.data();
  T* A = ws.gram.data();
  T* B = ws.poly.data();
  // X_0 = G / (||G||_F + eps): the Frobenius norm bounds the spectral norm, so every singular value is <= 1
  const double norm = std::sqrt(be.sum_squares(g, n));
  be.copy(X, g, n);
  be.scale(X, 1.0 / (norm + kNsEps), n);
  for (int k = 0; k < steps; ++k) {
    if (tall) be.gemm(A, s, X, C, true, X, C, false, s, s, R, false);  // A (C, C) = X^T X
    else be.gemm(A, s, X, C, false, X, C, true, s, s, C, false);       // A (R, R) = X X^T
    be.gemm(B, s, A, s, false, A, s, false, s, s, s, false);           // B = A A
    be.axpby(B, T(kNsB), A, T(kNsC), std::size_t(s) * s);             // B = b A + c A A
    be.axpby(Y, T(kNsA), X, T(0), n);                                  // Y = a X
    if (tall) be.gemm(Y, C, X, C, false, B, s, false, R, C, C, true);  // Y += X B
    else be.gemm(Y, C, B, s, false, X, C, false, R, C, R, true);       // Y += B X
    std::swap(X, Y);
  }
  return X;
}

// ============================================================================== Muon / NorMuon

/// \brief One Muon or NorMuon step of every matrix-group tensor (param_group), in place, on backend `be`.
/// The step counter and the Adam group are left alone (grouped_update does both groups).
///
/// For each matrix W (R, C) with gradient G and momentum M (the store's first-moment buffer, adam_m):
/// \code
///   Muon (muon.py muon_update + Muon.step):
///     M = beta M + (1 - beta) G                      momentum EMA (momentum.lerp_(grad, 1 - beta))
///     U = beta M + (1 - beta) G                      Nesterov look-ahead (grad.lerp_(momentum, beta))
///     O = NS(U)
///     W = W - lr wd W - lr sqrt(max(1, R / C)) O
///   NorMuon (arXiv:2510.05491, Algorithm 1):
///     M = beta1 M + (1 - beta1) G
///     O = NS(M)
///     v = beta2 v + (1 - beta2) mean_c(O ⊙ O)        v (R): one second moment per row (output neuron)
///     Ô = O / (sqrt(v) + eps)                        row r divided by sqrt(v_r) + eps
///     lr_hat = rms lr sqrt(R C) / ||Ô||_F            the update's RMS is rms x lr (rms = 0.2)
///     W = W - lr wd W - lr_hat Ô
/// \endcode
/// v lives in s.row_v at ParamSpec::row_offset (ParamStore::row_moments). It has no bias correction: that
/// would scale Ô by a constant, which the rescaling to ||Ô||_F undoes. A zero update (all-zero momentum)
/// leaves only the decay. The decay uses W before this step, as AdamW's does; `lr` is this step's matrix
/// learning rate (the schedule's multiplier times the group's peak), so the decay follows the schedule.
/// Where the official NorMuon code (github.com/zichongli5/NorMuon) differs from its paper (a Nesterov
/// look-ahead, ||Ô|| kept equal to ||O|| and then Muon's shape factor), this follows the paper.
///
/// Arithmetic: in T on the backend (GEMMs through be.gemm); the norms in double; the scalars computed in
/// double and rounded to T once. Sequential over specs in registration order: deterministic on the CPU.
template <class Be, class T> void muon_update(Be& be, const OptimState<T>& s, const MuonConfig& cfg, double lr, MuonWorkspace<Be>& ws) {
  detail::check_muon(cfg, lr);
  const bool nor = cfg.variant == MuonVariant::NorMuon;
  FBT_ASSERT(!nor || s.row_v, "NorMuon needs the row-moment buffer (OptimState::row_v, ParamStore::row_moments())");
  const T beta = T(cfg.momentum), ibeta = T(1.0 - cfg.momentum), keep = T(1.0 - lr * cfg.weight_decay);
  for (const ParamSpec& p : *s.specs) {
    if (param_group(p) != ParamGroup::Matrix) continue;
    const auto [R, C] = detail::matrix_dims(p);
    const std::size_t n = p.size;
    T* W = s.value + p.offset;  // (R, C)
    const T* G = s.grad + p.offset;  // (R, C)
    T* M = s.m + p.offset;  // (R, C)
    ws.reserve(R, C);
    be.axpby(M, ibeta, G, beta, n);  // M = beta M + (1 - beta) G
    if (!nor) {
      // Muon: orthogonalise the Nesterov look-ahead U = beta M + (1 - beta) G, built in ws.x
      be.copy(ws.x.data(), G, n);
      be.axpby(ws.x.data(), beta, M, ibeta, n);
      const T* O = newton_schulz(be, ws.x.data(), R, C, cfg.ns_steps, ws);
      const double shape = std::sqrt(std::max(1.0, double(R) / double(C)));
      be.axpby(W, T(-lr * shape), O, keep, n);  // W = (1 - lr wd) W - lr shape O
      continue;
    }
    // NorMuon: orthogonalise the momentum itself
    T* O = newton_schulz(be, M, R, C, cfg.ns_steps, ws);
    T* v = s.row_v + p.row_offset;  // (R)
    be.row_sumsq(ws.rows.data(), O, int(R), int(C));                         // rows = sum_c O^2
    be.axpby(v, T((1.0 - cfg.beta2) / double(C)), ws.rows.data(), T(cfg.beta2), std::size_t(R));  // v = beta2 v + (1 - beta2) rows / C
    be.row_div_sqrt(O, v, int(R), int(C), T(cfg.eps));                     // Ô = O / (sqrt(v) + eps)
    const double norm = std::sqrt(be.sum_squares(O, n));                   // ||Ô||_F
    const double lr_hat = norm > 0 ? cfg.rms * lr * std::sqrt(double(R) * double(C)) / norm : 0.0;
    be.axpby(W, T(-lr_hat), O, keep, n);  // W = (1 - lr wd) W - lr_hat Ô
  }
}

/// \brief One step of a grouped optimizer on backend `be`: the matrix group (param_group) by Muon or
/// NorMuon at `matrix_lr`, the Adam group by AdamW at `lr` (AdamW's own weight decay, on its tensors of
/// rank >= 2: the embedding and the LM head). Increments `*s.step` once; AdamW's bias corrections use it.
/// Both rates are this step's (each group's peak times the schedule's multiplier).
template <class Be, class T>
void grouped_update(Be& be, const OptimState<T>& s, const AdamWConfig& adam, double lr, const MuonConfig& muon, double matrix_lr,
                    MuonWorkspace<Be>& ws) {
  detail::check_adamw(adam, lr);
  detail::check_muon(muon, matrix_lr);
  const long t = ++*s.step;  // 1 on the first update
  adamw_apply(be, s, adam, lr, t, [](const ParamSpec& p) { return param_group(p) == ParamGroup::Adam; });
  muon_update(be, s, muon, matrix_lr, ws);
}

/// The OptimState of a store for a grouped step: optim_state(ps), plus the row moments for NorMuon.
template <class T> OptimState<T> grouped_optim_state(ParamStore<T>& ps, const MuonConfig& muon) {
  OptimState<T> s = optim_state(ps);
  if (muon.variant == MuonVariant::NorMuon) s.row_v = ps.row_moments();
  return s;
}

/// \brief One grouped step over the store, on the CPU (see above).
template <class T>
void grouped_update(ParamStore<T>& ps, const AdamWConfig& adam, double lr, const MuonConfig& muon, double matrix_lr, MuonWorkspace<CpuBackend<T>>& ws) {
  CpuBackend<T> be;
  grouped_update(be, grouped_optim_state(ps, muon), adam, lr, muon, matrix_lr, ws);
}

}  // namespace fbt
