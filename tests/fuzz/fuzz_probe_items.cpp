// tests/fuzz/fuzz_probe_items.cpp: libFuzzer harness for the probe's items file (`fbt probe --items FILE`,
// train/probe_io.hpp; docs/fuzzing.md, issue 47).
//
// The input is read with fbt::read_probe_items for a byte-level model (vocabulary 257) and for a token model
// of 300 ids. An accepted file must keep its promises: at least one item, every token in the vocabulary,
// every label's class index within the class list, every position inside its item. fbt::Error is the
// expected refusal; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include <fbt/train/probe_io.hpp>

#include "fuzz_common.hpp"

namespace {
std::string g_path;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_path = fbt_fuzz::init("probe_items") + "/items.jsonl";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  for (int vocab : {fbt::ByteTokenizer::kVocabSize, 300})
    fbt_fuzz::attempt([&] {
      std::vector<std::string> classes;
      const std::vector<fbt::ProbeExample> items = fbt::read_probe_items(g_path, vocab, classes);
      for (const auto& e : items) {
        FBT_FUZZ_CHECK(!e.tokens.empty(), "an accepted item has tokens");
        for (int t : e.tokens) FBT_FUZZ_CHECK(t >= 0 && t < vocab, "an accepted token is in the vocabulary: " + std::to_string(t));
        FBT_FUZZ_CHECK(e.label >= 0 && std::size_t(e.label) < classes.size(), "a label is one of the classes");
        FBT_FUZZ_CHECK(e.position >= 0 && std::size_t(e.position) < e.tokens.size(), "the position is inside the item");
      }
    });
  return 0;
}
