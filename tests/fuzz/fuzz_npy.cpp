// tests/fuzz/fuzz_npy.cpp: libFuzzer harness for the .npy reader (docs/fuzzing.md).
//
// The input is written as <dir>/input.npy and read with fbt::load_npy<float> and fbt::load_npy<double>.
// An accepted array must hold numel(shape) elements, and what save_npy writes for it must load back
// with the same shape and the same bits. fbt::Error is the expected refusal; anything else (another
// exception, a crash, a sanitizer report, a broken invariant, a timeout, an allocation over libFuzzer's
// limits) is a finding.
#include <cstdint>
#include <cstring>
#include <string>

#include <fbt/io/npy.hpp>

#include "fuzz_common.hpp"

namespace {

std::string g_path, g_out;

std::string shape_str(const fbt::Shape& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + ")";
}

template <class T> void load_and_check() {
  const fbt::NpyArray<T> a = fbt::load_npy<T>(g_path);
  FBT_FUZZ_CHECK(std::uint64_t(a.data.size()) == std::uint64_t(fbt::numel(a.shape)), "load_npy returned numel(shape) != data.size()");
  for (auto d : a.shape) FBT_FUZZ_CHECK(d >= 0, "load_npy returned a negative dimension");
  if (!fbt_fuzz::attempt([&] { fbt::save_npy(g_out, a.data.data(), a.shape); }))
    fbt_fuzz::refusal_finding("save_npy refused an array that load_npy accepted, shape " + shape_str(a.shape));
  bool back_ok = false;
  fbt_fuzz::attempt([&] {
    const fbt::NpyArray<T> b = fbt::load_npy<T>(g_out);
    back_ok = true;
    FBT_FUZZ_CHECK(b.shape == a.shape, "a saved array loads back with another shape");
    FBT_FUZZ_CHECK(b.data.size() == a.data.size() &&
                       (a.data.empty() || std::memcmp(b.data.data(), a.data.data(), a.data.size() * sizeof(T)) == 0),
                   "a saved array loads back with other values");
  });
  if (!back_ok) fbt_fuzz::refusal_finding("load_npy refuses what save_npy wrote, shape " + shape_str(a.shape));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = fbt_fuzz::init("npy");
  g_path = dir + "/input.npy";
  g_out = dir + "/saved.npy";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  fbt_fuzz::attempt(load_and_check<float>);
  fbt_fuzz::attempt(load_and_check<double>);
  return 0;
}
