// tests/fuzz/fuzz_config_json.cpp: libFuzzer harness for the model config reader (docs/fuzzing.md).
//
// The input is written as <dir>/config.json and read with fbt::config_from_json_file (a run's
// config.json, a Hugging Face Qwen3 config.json). An accepted config must validate(), and what
// save_config_json writes for it must read back to the same config (to_json equal): a config fbt
// accepts but cannot write back readably is the "checkpoints nothing can load" class of bug.
// The harness builds no model from the config (fuzz_safetensors.cpp does, through load_model).
// fbt::Error is the expected refusal; anything else is a finding.
#include <cstdint>
#include <string>

#include <fbt/io/config_json.hpp>

#include "fuzz_common.hpp"

namespace {
std::string g_path, g_out;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fbt_fuzz::init("config_json");
  g_path = dir + "/config.json";
  g_out = dir + "/saved.json";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  fbt_fuzz::attempt([&] {
    const fbt::ModelConfig c = fbt::config_from_json_file(g_path);
    if (!fbt_fuzz::attempt([&] { c.validate(); })) fbt_fuzz::refusal_finding("config_from_json_file accepted a config that validate() refuses");
    const nlohmann::json j = fbt::to_json(c);
    if (!fbt_fuzz::attempt([&] { fbt::save_config_json(g_out, c); }))
      fbt_fuzz::refusal_finding("save_config_json refused an accepted config: " + j.dump().substr(0, 2000));
    fbt::ModelConfig back;
    if (!fbt_fuzz::attempt([&] { back = fbt::config_from_json_file(g_out); }))
      fbt_fuzz::refusal_finding("the config save_config_json wrote does not read back: " + j.dump().substr(0, 2000));
    FBT_FUZZ_CHECK(fbt::to_json(back) == j, "the config reads back different: " + j.dump().substr(0, 1000) + " vs " +
                                                 fbt::to_json(back).dump().substr(0, 1000));
  });
  return 0;
}
