// fbt/train/presets.hpp: the recipes a run starts from (v1, paper: spec section 10) and the baseline's
// single-pass schedule.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config_values.hpp"
#include "train_config.hpp"

namespace fbt {

/// \brief The presets: each a list of (field, value) that `preset` applies before any other field. Both
/// set the same fields, so switching presets leaves nothing of the other behind.
///   v1:    fbt's first defaults (input norm on every input, a separate gate norm, pre-norm blocks, AdamW
///          lr 3e-3 with cosine decay, feedback from 75% of the steps with 2:0.88,3:0.12), so v1's results
///          stay reproducible.
///   paper: the paper's recipe as published (spec section 10): pass 1 on the raw embedding and the one
///          input norm on every row of a fed-back pass and on the gate side; sandwich block norms; NorMuon
///          (lr 1e-2, wd 0.01) for matrices and Adam (lr 5e-4, no wd) for the rest; warmup-stable-decay, 200
///          warmup steps and a 25% cooldown to zero with z-loss 1e-5; the 75/22/3 pass mix. Where the paper
///          is silent, this preset's choice: feedback starts at 50% of the steps, in the stable phase a
///          quarter of the run before the cooldown (paper_200b's whole-run 75/22/3 then means 1:0.5,
///          2:0.44, 3:0.06 from there); N_in's gain starts at 1 (PyTorch's RMSNorm default); the GLU init is
///          the spec's (W_U = I, W_G ~ N(0, 1e-6/D)).
inline const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>& train_presets() {
  static const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> p = {
      {"v1",
       {{"input_norm", "all"}, {"gate_norm", "separate"}, {"in_norm_init", "one"}, {"block_norm", "pre"}, {"glu_init", "default"},
        {"z_loss", "0"}, {"cooldown_z_loss", "0"}, {"lr_schedule", "cosine"}, {"lr", "0.003"}, {"min_lr", "0.0003"}, {"warmup_steps", "50"},
        {"wsd_decay_frac", "0.2"}, {"weight_decay", "0.1"}, {"optimizer", "adamw"}, {"matrix_lr", "0.01"}, {"matrix_weight_decay", "0.01"},
        {"sigma", "0.02"}, {"lambda", "1"}, {"K_max", "3"}, {"feedback_start", "0.75"}, {"pass_mix", "2:0.88,3:0.12"}}},
      {"paper",
       {{"input_norm", "feedback_passes"}, {"gate_norm", "shared"}, {"in_norm_init", "one"}, {"block_norm", "sandwich"}, {"glu_init", "default"},
        {"z_loss", "0"}, {"cooldown_z_loss", "1e-05"}, {"lr_schedule", "wsd"}, {"lr", "0.0005"}, {"min_lr", "0"}, {"warmup_steps", "200"},
        {"wsd_decay_frac", "0.25"}, {"weight_decay", "0"}, {"optimizer", "normuon"}, {"matrix_lr", "0.01"}, {"matrix_weight_decay", "0.01"},
        {"sigma", "0.02"}, {"lambda", "1"}, {"K_max", "3"}, {"feedback_start", "0.5"}, {"pass_mix", "paper_200b"}}},
  };
  return p;
}

/// \brief A baseline (fuser none) trains single-pass: its schedule is made so (feedback_start 1, pass_mix
/// 1:1, K_max 1), whatever the preset or the defaults say, as `fbt ablate` always did.
inline void make_baseline_single_pass(TrainConfig& c) {
  if (!c.model.feedback()) c.schedule.make_single_pass();
}

}  // namespace fbt
