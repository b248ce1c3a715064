// tests/fuzz/fuzz_sft_jsonl.cpp: libFuzzer harness for the prompt/response lines of SFT data (io/sft_jsonl.hpp,
// data/sft_dataset.hpp; docs/fuzzing.md, issue 47).
//
// The input is an SFT file (`fbt train --data FILE.jsonl`), read three ways: as text examples (vocabulary 257)
// and as token ids of a 300-token vocabulary (fbt::read_sft_jsonl), then as a training data source
// (fbt::SftDataset::open, its seq_len check at 16 tokens). An accepted file must keep its promises: every
// example has a response, every id is in the vocabulary, and the data source's batches and validation
// windows hold only ids of the vocabulary and targets that are -1 or ids. fbt::Error is the expected
// refusal; anything else is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include <fbt/data/sft_dataset.hpp>

#include "fuzz_common.hpp"

namespace {
std::string g_path;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_path = fbt_fuzz::init("sft_jsonl") + "/sft.jsonl";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fbt_fuzz::write_file(g_path, data, size);
  for (int vocab : {fbt::ByteTokenizer::kVocabSize, 300})
    fbt_fuzz::attempt([&] {
      const fbt::SftFile f = fbt::read_sft_jsonl(g_path, vocab);
      FBT_FUZZ_CHECK(!f.examples.empty(), "an accepted SFT file holds an example");
      for (const auto& e : f.examples) {
        FBT_FUZZ_CHECK(!e.response.empty(), "every accepted example has a response");
        for (const auto* part : {&e.prompt, &e.response})
          for (int t : *part) FBT_FUZZ_CHECK(t >= 0 && t < vocab, "an accepted id is in the vocabulary: " + std::to_string(t));
      }
    });
  fbt_fuzz::attempt([&] {
    fbt::SftDatasetOptions o;
    fbt::SftDataset d = fbt::SftDataset::open(g_path, o);
    const int T = 16;
    d.check_seq_len(T);
    fbt::Rng rng(1);
    std::vector<int> tok, tgt;
    std::vector<std::uint8_t> ds;
    d.sample_batch(rng, 2, T, tok, tgt, ds);
    auto check = [&] {
      FBT_FUZZ_CHECK(tok.size() == tgt.size() && tok.size() == ds.size(), "a window's three arrays have one length");
      for (std::size_t i = 0; i < tok.size(); ++i) {
        FBT_FUZZ_CHECK(tok[i] >= 0 && tok[i] < d.vocab_size(), "a token is in the vocabulary");
        FBT_FUZZ_CHECK(tgt[i] >= -1 && tgt[i] < d.vocab_size(), "a target is -1 or in the vocabulary");
      }
    };
    check();
    const int n = d.num_eval_windows(T);
    for (int i = 0; i < n && i < 8; ++i) d.eval_window(i, T, tok, tgt, ds), check();
  });
  return 0;
}
