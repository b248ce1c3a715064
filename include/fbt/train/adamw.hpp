// fbt/train/adamw.hpp: the AdamW optimizer step over the flat parameter buffers (llm.c `gpt2_update`),
// written once over a backend (the CPU's, or a GPU's for a model trained there).
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
#include <vector>

#include "../backend/cpu.hpp"
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

/// \brief A backend's view of the trainable state: the four flat buffers (ParamStore layout), the
/// layout table and the step counter. For the CPU it is the ParamStore's own (optim_state(ps)); a model on
/// another backend gives its device copies (model/backend_model.hpp).
template <class T> struct OptimState {
  T* value = nullptr;
  const T* grad = nullptr;
  T* m = nullptr;
  T* v = nullptr;
  const std::vector<ParamSpec>* specs = nullptr;  ///< the layout (offsets, sizes, weight-decay mask)
  long* step = nullptr;                           ///< AdamW's t
  T* row_v = nullptr;  ///< NorMuon's neuron-wise second moments (ParamStore::row_moments layout); null unless NorMuon runs
};
template <class T> OptimState<T> optim_state(ParamStore<T>& ps) {
  return OptimState<T>{ps.values(), ps.grads(), ps.adam_m(), ps.adam_v(), &ps.specs(), &ps.step};
}

namespace detail {
/// Refuses (fbt::Error naming the value) betas outside [0, 1), eps <= 0, a negative decay, a bad lr.
inline void check_adamw(const AdamWConfig& cfg, double lr) {
  FBT_ASSERT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0, "AdamW beta1 = " + std::to_string(cfg.beta1) + " must be in [0, 1)");
  FBT_ASSERT(cfg.beta2 >= 0.0 && cfg.beta2 < 1.0, "AdamW beta2 = " + std::to_string(cfg.beta2) + " must be in [0, 1)");
  FBT_ASSERT(cfg.eps > 0.0, "AdamW eps = " + std::to_string(cfg.eps) + " must be > 0");
  FBT_ASSERT(cfg.weight_decay >= 0.0, "AdamW weight_decay must be >= 0");
  FBT_ASSERT(std::isfinite(lr) && lr >= 0.0, "AdamW lr = " + std::to_string(lr) + " must be finite and >= 0");
}
}  // namespace detail

/// \brief The AdamW step number t (>= 1) of the tensors that `pick(spec)` selects, on backend `be`; the
/// step counter is left alone. What adamw_update runs over every tensor, and a grouped optimizer
/// (train/muon.hpp) over its Adam group. cfg and lr as adamw_update checks them.
template <class Be, class T, class Pick> void adamw_apply(Be& be, const OptimState<T>& s, const AdamWConfig& cfg, double lr, long t, Pick pick) {
  // Bias corrections undo the zero initialisation of m and v (Kingma & Ba, section 3).
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(t));
  const double bc2 = 1.0 - std::pow(cfg.beta2, double(t));
  const AdamWRates<T> r{T(cfg.beta1), T(cfg.beta2), T(1.0 - cfg.beta1), T(1.0 - cfg.beta2), T(1.0 / bc1), T(1.0 / bc2), T(cfg.eps), T(lr)};
  for (const ParamSpec& p : *s.specs)  // decoupled weight decay only on matrices (embeddings, projections)
    if (pick(p)) be.adamw(s.value + p.offset, s.grad + p.offset, s.m + p.offset, s.v + p.offset, p.size, r, T(p.decay ? cfg.weight_decay : 0.0));
}

/// \brief One AdamW step over every parameter, in place, on backend `be`.
///
/// Increments `*s.step` to t, then for every element (g = grad, p = value, m/v = Adam moments):
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
/// Arithmetic: in T, one pass per tensor (the bias corrections and rates are computed in double and
/// rounded to T once per step). The loop is sequential over specs in registration order, so the result
/// is deterministic (bit identical for identical inputs on the same build). Gradients are read only.
/// \param cfg    betas, eps and weight decay (cfg.lr is ignored; pass the scheduled lr)
/// \param lr     this step's learning rate (from LrSchedule::lr), >= 0
template <class Be, class T> void adamw_update(Be& be, const OptimState<T>& s, const AdamWConfig& cfg, double lr) {
  detail::check_adamw(cfg, lr);
  const long t = ++*s.step;  // 1 on the first update
  adamw_apply(be, s, cfg, lr, t, [](const ParamSpec&) { return true; });
}

/// \brief One AdamW step over every parameter of the store, on the CPU (see above).
template <class T> void adamw_update(ParamStore<T>& ps, const AdamWConfig& cfg, double lr) {
  CpuBackend<T> be;
  adamw_update(be, optim_state(ps), cfg, lr);
}

}  // namespace fbt
