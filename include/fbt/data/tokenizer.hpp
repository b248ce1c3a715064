// fbt/data/tokenizer.hpp: the byte tokenizer (vocabulary 257 = 256 bytes + one document separator).
//
// Token t in 0..255 is the byte t; token kSep = 256 separates documents. Convention used by every
// fbt data source (BOS style): a document is encoded as  kSep, byte_0, byte_1, ...  so each kSep marks
// the first position of a document (spec section 2: that position is plain, no state crosses it).
// Position 0 of any training or evaluation window is also a start, whatever token sits there.
// The tokenizer itself never inserts kSep: encode() maps bytes only, encode_document() prepends it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../config.hpp"

namespace fbt {

/// \brief Bytes 0..255 plus the document separator kSep = 256 (stateless; every member is static).
struct ByteTokenizer {
  static constexpr int kSep = 256;        ///< document separator (first token of every document)
  static constexpr int kVocabSize = 257;  ///< V: 256 bytes + kSep

  static constexpr int vocab_size() { return kVocabSize; }

  /// \brief Bytes of `text` as tokens 0..255 (no separator added).
  static std::vector<int> encode(const std::string& text) {
    std::vector<int> out(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
    return out;
  }

  /// \brief One document: kSep followed by the bytes of `text`.
  static std::vector<int> encode_document(const std::string& text) {
    std::vector<int> out;
    out.reserve(text.size() + 1);
    out.push_back(kSep);
    for (unsigned char c : text) out.push_back(c);
    return out;
  }

  /// \brief Bytes back to text; kSep is skipped. Throws fbt::Error on a token outside 0..256.
  static std::string decode(const int* tokens, std::size_t n) { return decode_impl(tokens, n, nullptr); }
  static std::string decode(const std::vector<int>& tokens) { return decode(tokens.data(), tokens.size()); }

  /// \brief As decode, but each kSep is rendered as the visible marker "\n<|sep|>\n" (for logs and samples).
  static std::string decode_visible(const int* tokens, std::size_t n) {
    return decode_impl(tokens, n, "\n<|sep|>\n");
  }
  static std::string decode_visible(const std::vector<int>& tokens) {
    return decode_visible(tokens.data(), tokens.size());
  }

 private:
  static std::string decode_impl(const int* tokens, std::size_t n, const char* sep_marker) {
    std::string out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const int t = tokens[i];
      FBT_ASSERT(t >= 0 && t < kVocabSize, "ByteTokenizer::decode: token " + std::to_string(t) +
                                               " at position " + std::to_string(i) + " is outside 0.." +
                                               std::to_string(kVocabSize - 1));
      if (t == kSep) {
        if (sep_marker) out += sep_marker;
      } else {
        out.push_back(static_cast<char>(static_cast<unsigned char>(t)));
      }
    }
    return out;
  }
};

/// The document separator token, as a namespace-level constant (== ByteTokenizer::kSep).
inline constexpr int kSep = ByteTokenizer::kSep;

}  // namespace fbt
