// tests/fuzz/fuzz_safetensors.cpp: libFuzzer harness for the safetensors reader through model loading
// and resuming (docs/fuzzing.md).
//
// The input is written as <dir>/train_state.safetensors and goes the way the `fbt` command takes a file:
//   1. fbt::read_safetensors; an accepted file must satisfy what the reader promises (entries sorted and
//      tiling the data section exactly, each entry's bytes = numel x dtype size, find() by name);
//   2. a model checkpoint (no "format" or "pt"): fbt::read_model_config, fbt::with_model<float> picks the
//      type, fbt::load_model<M> (eval, sample, logits in tools/fbt.cpp). An accepted checkpoint must hold
//      finite values only, load again with load_model_into into a model of its own config, and save
//      (save_model) to a file that loads back bit for bit. load_train_state on it must refuse.
//   3. a training state ("fbt-train-state"): the resume path (Trainer::resume): fbt::read_train_config on
//      the directory, validate, a model built from the recorded config, fbt::load_train_state into its
//      parameters; accepted moments must be finite (second moments >= 0) and save_train_state must write
//      a file that loads back bit for bit; the recorded RNG states are restored (Rng::set_state).
// fbt::Error is the expected refusal; anything else (another exception, a crash, a sanitizer report, a
// broken invariant, a timeout, an allocation over libFuzzer's limits) is a finding.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include <fbt/io/checkpoint.hpp>
#include <fbt/train/trainer.hpp>

#include "fuzz_common.hpp"

namespace {

std::string g_dir, g_path, g_out;

/// What read_safetensors promises about a file it accepts.
void check_file(const fbt::SafetensorsFile& f) {
  std::uint64_t at = 0;
  for (const auto& e : f.tensors) {
    FBT_FUZZ_CHECK(e.begin == at, "tensor \"" + e.name + "\" does not start where the previous one ends");
    FBT_FUZZ_CHECK(e.begin <= e.end && e.end <= f.data.size(), "tensor \"" + e.name + "\" lies outside the data section");
    const std::size_t elem = fbt::safetensors_dtype_size(e.dtype);
    FBT_FUZZ_CHECK(elem > 0, "tensor \"" + e.name + "\" has an unknown dtype " + e.dtype);
    unsigned __int128 n = elem;
    for (auto d : e.shape) {
      FBT_FUZZ_CHECK(d >= 0, "tensor \"" + e.name + "\" has a negative dimension");
      n *= std::uint64_t(d);
      if (n > std::numeric_limits<std::uint64_t>::max()) break;
    }
    FBT_FUZZ_CHECK(n == e.nbytes(), "tensor \"" + e.name + "\": nbytes differs from numel x dtype size");
    FBT_FUZZ_CHECK(f.find(e.name) == &e, "find(\"" + e.name + "\") does not return its entry");
    at = e.end;
  }
  FBT_FUZZ_CHECK(at == f.data.size(), "the tensors do not cover the data section exactly");
}

template <class T> bool same_bits(const T* a, const T* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n * sizeof(T)) == 0; }

/// The CLI's way to open a checkpoint (tools/fbt.cpp), then the properties of an accepted one.
void model_checkpoint() {
  const fbt::ModelConfig cfg = fbt::read_model_config(g_path);
  fbt::with_model<float>(cfg, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m = fbt::load_model<M>(g_path);
    for (std::size_t i = 0; i < m.params.size(); ++i)
      FBT_FUZZ_CHECK(std::isfinite(m.params.values()[i]), "load_model accepted a non-finite value at " + std::to_string(i));

    M again(m.cfg, 1);
    if (!fbt_fuzz::attempt([&] { fbt::load_model_into(g_path, again); }))
      fbt_fuzz::refusal_finding("load_model accepted the file but load_model_into refused it into a model of the file's own config");
    FBT_FUZZ_CHECK(same_bits(again.params.values(), m.params.values(), m.params.size()), "load_model_into loaded other values");

    if (!fbt_fuzz::attempt([&] { fbt::save_model(g_out, m); })) fbt_fuzz::refusal_finding("save_model refused a model that load_model accepted");
    bool reloaded = false;
    fbt_fuzz::attempt([&] {
      M back = fbt::load_model<M>(g_out);
      reloaded = true;
      FBT_FUZZ_CHECK(back.params.size() == m.params.size() && same_bits(back.params.values(), m.params.values(), m.params.size()),
                     "a saved checkpoint loads back with other values");
    });
    if (!reloaded) fbt_fuzz::refusal_finding("save_model wrote a checkpoint of an accepted model that load_model refuses");

    if (fbt_fuzz::attempt([&] { fbt::load_train_state(g_path, m.params); }))
      fbt_fuzz::finding("load_train_state accepted a model checkpoint (format not fbt-train-state)");
  });
}

/// The resume path (Trainer::resume): the recorded config, a model built from it, the moments.
void training_state(const fbt::SafetensorsFile& f) {
  const fbt::TrainConfig tc = fbt::read_train_config(g_dir);
  fbt::validate(tc);
  fbt::with_model<float>(tc.model, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m(tc.model, tc.seed);
    const std::map<std::string, std::string> meta = fbt::load_train_state(g_path, m.params);
    FBT_FUZZ_CHECK(meta == f.metadata, "load_train_state returned other metadata than read_safetensors");
    const auto& ps = m.params;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      FBT_FUZZ_CHECK(std::isfinite(ps.adam_m()[i]) && std::isfinite(ps.adam_v()[i]), "a non-finite moment was accepted");
      FBT_FUZZ_CHECK(ps.adam_v()[i] >= 0, "a negative second moment was accepted");
    }

    std::map<std::string, std::string> extra = meta;
    extra.erase("format");
    extra.erase("step");
    if (!fbt_fuzz::attempt([&] { fbt::save_train_state(g_out, ps, extra); }))
      fbt_fuzz::refusal_finding("save_train_state refused the state and metadata that load_train_state accepted");
    M other(tc.model, tc.seed);
    bool reloaded = false;
    fbt_fuzz::attempt([&] {
      const auto meta2 = fbt::load_train_state(g_out, other.params);
      reloaded = true;
      FBT_FUZZ_CHECK(meta2 == meta, "a saved training state loads back with other metadata");
      FBT_FUZZ_CHECK(other.params.step == ps.step && same_bits(other.params.adam_m(), ps.adam_m(), ps.size()) &&
                         same_bits(other.params.adam_v(), ps.adam_v(), ps.size()),
                     "a saved training state loads back with other moments or step");
    });
    if (!reloaded) fbt_fuzz::refusal_finding("save_train_state wrote a state that load_train_state refuses");

    fbt::Rng rng(0);  // what Trainer::resume restores
    for (const char* k : {"data_rng", "sched_rng"})
      if (meta.count(k)) rng.set_state(meta.at(k)), (void)rng.next_u32();
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = fbt_fuzz::init("safetensors");
  g_path = g_dir + "/train_state.safetensors";  // the name read_train_config(dir) opens
  g_out = g_dir + "/saved.safetensors";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  fbt_fuzz::attempt([&] {
    const fbt::SafetensorsFile f = fbt::read_safetensors(g_path);
    check_file(f);
    const auto fm = f.metadata.find("format");
    if (fm != f.metadata.end() && fm->second == "fbt-train-state") fbt_fuzz::attempt([&] { training_state(f); });
    else fbt_fuzz::attempt(model_checkpoint);
  });
  return 0;
}
