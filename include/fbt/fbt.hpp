// fbt/fbt.hpp: the whole library in one include (convenience: it costs compile time; include the parts
// you use in larger programs). fbt implements full-bandwidth transformers (arXiv:2608.08888): the
// previous position's top state is fused with the next token's embedding, and training runs the
// scheduled K-pass objective. docs/api.md is the tutorial; docs/architecture.md explains the shape.
// "spec section N" and "invariant K" in the headers' comments refer to docs/spec.md.
//
// A 20-line program: build a model, run one K = 3 step, take an AdamW step, decode, save.
//
//   #include "fbt/fbt.hpp"
//   int main() {
//     fbt::ModelConfig cfg;                          // byte vocabulary, D 128, 4 blocks, fuser "glu"
//     fbt::Model<float> m(cfg, /*seed=*/1);          // Model<T, Fuser = GluFuser<T>, Block = DecoderBlock<T>>
//     std::vector<int> tok(64), tgt(64);             // one row of 64 tokens and their next tokens
//     for (int t = 0; t < 64; ++t) tok[t] = 'a' + t % 26, tgt[t] = 'a' + (t + 1) % 26;
//     fbt::Workspace<fbt::Model<float>> ws;          // every activation of a step, laid out once
//     fbt::StepOptions o;
//     o.K = 3;                                       // a plain pass and two fed-back passes
//     m.params.zero_grad();
//     fbt::StepStats st = fbt::multipass_step(m, ws, fbt::Batch{1, 64, tok.data(), tgt.data()}, o);
//     fbt::adamw_update(m.params, fbt::AdamWConfig{}, 1e-3);
//     fbt::Decoder<fbt::Model<float>> dec(m, fbt::kSep);
//     fbt::GenerateOptions g;
//     g.mode = fbt::DecodeModeSpec::parse("soft");   // decode with the state fed back
//     auto out = fbt::generate(dec, {fbt::kSep, 'a', 'b'}, g);
//     fbt::save_model("m.safetensors", m);           // Hugging Face Qwen3 names + model.feedback.*
//     return st.loss[2] > 0 ? 0 : 1;
//   }
//
// Your own fuser, feedback tap or block: examples/custom_fuser.cpp, feedback_from_layer.cpp,
// heterogeneous_stack.cpp. The CUDA backend is a separate include: fbt/cuda/cuda.cuh.
#pragma once

#include "config.hpp"

#include "backend/cpu.hpp"
#include "check/backend_agreement.hpp"
#include "check/gradcheck.hpp"
#include "check/host_backend.hpp"
#include "core/arena.hpp"
#include "core/params.hpp"
#include "core/rng.hpp"
#include "data/dataset.hpp"
#include "data/tasks.hpp"
#include "data/tokenizer.hpp"
#include "decode/decoder.hpp"
#include "decode/precision_check.hpp"
#include "io/checkpoint.hpp"
#include "io/config_json.hpp"
#include "layers/block.hpp"
#include "layers/concat_fuser.hpp"
#include "layers/contract.hpp"
#include "layers/gated_add_fuser.hpp"
#include "layers/glu_fuser.hpp"
#include "layers/head_gate.hpp"
#include "model/backend_model.hpp"
#include "model/model.hpp"
#include "model/multipass.hpp"
#include "model/parallel_step.hpp"
#include "train/adamw.hpp"
#include "train/clip.hpp"
#include "train/evaluate.hpp"
#include "train/lr_schedule.hpp"
#include "train/muon.hpp"
#include "train/schedule.hpp"
#include "train/probe.hpp"
#include "train/probe_io.hpp"
#include "train/task_eval.hpp"
#include "train/trainer.hpp"
