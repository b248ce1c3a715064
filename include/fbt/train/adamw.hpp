// fbt/train/adamw.hpp: the AdamW optimizer step over a flat ParamStore (llm.c `gpt2_update`).
//
// Adam (Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization") with decoupled weight decay
// (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", ICLR, Algorithm 2). Weight decay
// is applied only to matrices (ParamSpec::decay, rank >= 2), never to norm gains or biases, as in
// nanoGPT's `configure_optimizers`. The decay is multiplied by the learning rate, as in PyTorch's
// torch.optim.AdamW and llm.c (the paper's schedule multiplier eta_t is our lr / max_lr).
#pragma once

#include <cmath>
#include <cstddef>
#include <string>

#include "../core/params.hpp"

namespace fbt {

/// \brief AdamW hyper-parameters. `lr` is a default only: adamw_update takes the scheduled lr per step.
struct AdamWConfig {
  double lr = 3e-4;            ///< overridden per step by the LrSchedule
  double beta1 = 0.9;          ///< first-moment decay
  double beta2 = 0.95;         ///< second-moment decay (GPT-2/3 and llm.c use 0.95)
  double eps = 1e-8;           ///< added to sqrt(vhat), outside the square root (as in PyTorch)
  double weight_decay = 0.1;   ///< decoupled decay lambda, applied only where ParamSpec::decay
};

/// \brief One AdamW step over every parameter of the store, in place.
///
/// Increments `ps.step` to t, then for every element (g = grad, p = value, m/v = Adam moments):
/// \code
///   m    = beta1 * m + (1 - beta1) * g
///   v    = beta2 * v + (1 - beta2) * g^2
///   mhat = m / (1 - beta1^t)                     // bias correction
///   vhat = v / (1 - beta2^t)
///   p    = p - lr * ( mhat / (sqrt(vhat) + eps) + wd * p )    wd = weight_decay if spec.decay, else 0
/// \endcode
/// The decay term uses p *before* this step (decoupled: it never enters m or v), so this equals
/// PyTorch's AdamW, which first multiplies p by (1 - lr * wd) and then applies the Adam step.
///
/// Arithmetic: in T, one vectorised pass per tensor (the bias corrections and rates are computed in double
/// and rounded to T once per step).
/// The loop is sequential over specs in registration order, so the result is deterministic (bit
/// identical for identical inputs on the same build). Gradients are read, not changed or zeroed.
///
/// \tparam T     float or double (the store's scalar)
/// \param ps     a finalized store whose grads() hold this step's gradients; values, adam_m, adam_v
///               and ps.step are updated
/// \param cfg    betas, eps and weight decay (cfg.lr is ignored; pass the scheduled lr)
/// \param lr     this step's learning rate (from LrSchedule::lr), >= 0
template <class T> void adamw_update(ParamStore<T>& ps, const AdamWConfig& cfg, double lr) {
  FBT_ASSERT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0, "AdamW beta1 = " + std::to_string(cfg.beta1) + " must be in [0, 1)");
  FBT_ASSERT(cfg.beta2 >= 0.0 && cfg.beta2 < 1.0, "AdamW beta2 = " + std::to_string(cfg.beta2) + " must be in [0, 1)");
  FBT_ASSERT(cfg.eps > 0.0, "AdamW eps = " + std::to_string(cfg.eps) + " must be > 0");
  FBT_ASSERT(cfg.weight_decay >= 0.0, "AdamW weight_decay must be >= 0");
  FBT_ASSERT(std::isfinite(lr) && lr >= 0.0, "AdamW lr = " + std::to_string(lr) + " must be finite and >= 0");

  const long t = ++ps.step;  // 1 on the first update
  // Bias corrections undo the zero initialisation of m and v (Kingma & Ba, section 3).
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(t));
  const double bc2 = 1.0 - std::pow(cfg.beta2, double(t));

  T* param = ps.values();
  const T* grad = ps.grads();
  T* m = ps.adam_m();
  T* v = ps.adam_v();
  const T b1 = T(cfg.beta1), b2 = T(cfg.beta2), ib1 = T(1.0 - cfg.beta1), ib2 = T(1.0 - cfg.beta2);
  const T rbc1 = T(1.0 / bc1), rbc2 = T(1.0 / bc2), eps = T(cfg.eps), tlr = T(lr);
  for (const ParamSpec& s : ps.specs()) {
    // Decoupled weight decay only on matrices (embeddings, projections); gains and biases are 1-D.
    const T wd = T(s.decay ? cfg.weight_decay : 0.0);
    const auto n = Eigen::Index(s.size);
    auto P = vec(param + s.offset, n).array();
    auto M = vec(m + s.offset, n).array();
    auto Vv = vec(v + s.offset, n).array();
    const auto G = cvec(grad + s.offset, n).array();
    // one vectorised pass per tensor (Eigen fuses each statement into one loop, no temporaries)
    M = b1 * M + ib1 * G;
    Vv = b2 * Vv + ib2 * G.square();
    P -= tlr * ((M * rbc1) / ((Vv * rbc2).sqrt() + eps) + wd * P);
  }
}

}  // namespace fbt
