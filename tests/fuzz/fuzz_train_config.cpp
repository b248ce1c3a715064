// tests/fuzz/fuzz_train_config.cpp: libFuzzer harness for the training-config readers (docs/fuzzing.md).
//
// The input goes two ways:
//   1. as a config file (`fbt train --config FILE`): fbt::load_train_config_file, then fbt::validate.
//      What an accepted config writes (fbt::to_json, as a training state records it) must read back to
//      the same config (the same record, and the same pass_mix values, the one field whose text form
//      could round): resume re-reads that record, so a field that does not survive the trip makes a
//      resumed run differ from the original.
//   2. as the train_config record of a training state: a file <dir>/ckpt/train_state.safetensors whose
//      metadata holds the input (save_safetensors; an input that is not UTF-8 cannot be stored and is
//      skipped), read with fbt::read_train_config(<dir>/ckpt) as resume and eval do, then validate.
// Neither builds a model or a trainer from the config. fbt::Error is the expected refusal; anything
// else is a finding.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include <fbt/io/safetensors.hpp>
#include <fbt/train/trainer.hpp>

#include "fuzz_common.hpp"

namespace {
std::string g_path, g_out, g_ckpt;

/// Equal keys and bit-identical probabilities (a NaN equals itself here).
bool same_mix(const std::map<int, double>& a, const std::map<int, double>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || std::memcmp(&i->second, &j->second, sizeof(double)) != 0) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fbt_fuzz::init("train_config");
  g_path = dir + "/train.json";
  g_out = dir + "/saved.json";
  g_ckpt = dir + "/ckpt";
  std::filesystem::create_directories(g_ckpt);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  fbt_fuzz::attempt([&] {
    const fbt::TrainConfig c = fbt::load_train_config_file(g_path);
    fbt_fuzz::attempt([&] { fbt::validate(c); });
    const std::string text = fbt::to_json(c).dump();
    fbt_fuzz::write_file(g_out, text.data(), text.size());
    fbt::TrainConfig back;
    // a record holds every value as text (as a checkpoint's train_config does): read back as records are
    if (!fbt_fuzz::attempt([&] { fbt::apply_json(back, fbt::read_json_file(g_out, "record"), "record '" + g_out + "'"); }))
      fbt_fuzz::refusal_finding("the record of an accepted config does not read back: " + text.substr(0, 2000));
    const std::string again = fbt::to_json(back).dump();
    FBT_FUZZ_CHECK(again == text, "the config reads back different: " + text.substr(0, 2000) + " vs " + again.substr(0, 2000));
    // the record is text, so compare the one field whose text may round (pass_mix) by value too
    FBT_FUZZ_CHECK(same_mix(back.schedule.pass_mix, c.schedule.pass_mix),
                   "pass_mix reads back different from its record: \"" + fbt::ScheduleConfig::format_mix(back.schedule.pass_mix) +
                       "\" (the record) is not the config's value");
  });

  const std::string record(reinterpret_cast<const char*>(data), size);
  const std::map<std::string, std::string> meta = {{"format", "fbt-train-state"}, {"step", "0"}, {"train_config", record}};
  if (!fbt_fuzz::attempt([&] { fbt::save_safetensors(g_ckpt + "/train_state.safetensors", {}, meta); })) return 0;  // not UTF-8
  fbt_fuzz::attempt([&] {
    const fbt::TrainConfig c = fbt::read_train_config(g_ckpt);
    fbt_fuzz::attempt([&] { fbt::validate(c); });
  });
  return 0;
}
