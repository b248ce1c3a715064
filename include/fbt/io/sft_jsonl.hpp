// fbt/io/sft_jsonl.hpp: prompt/response data for supervised fine-tuning (docs/file-formats.md, "SFT JSONL").
//
// One example per line, a JSON object with two fields (others are ignored):
//   {"prompt": "What is 2+3?\n", "response": "#### 5\n"}        text: bytes (the byte tokenizer, ids 0..255)
//   {"prompt": [101, 2054, 2003], "response": [1019, 102]}       ids: token ids of the model's vocabulary
// A file is all text or all ids (the first example decides). Blank lines are skipped. The prompt may be
// empty, the response may not. Every refusal is one line naming the file and the line:
//   fbt: sft data 'train.jsonl' line 7: "response" is missing
// Lines are parsed with parse_json_strict (io/json.hpp), so a duplicate key is refused too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json.hpp"

namespace fbt {

/// One prompt/response pair as token ids (text: its bytes).
struct SftExample {
  std::vector<int> prompt;    ///< (P) ids, P >= 0
  std::vector<int> response;  ///< (R) ids, R >= 1
};

/// A whole SFT file: its examples in file order and their form.
struct SftFile {
  std::string path;
  bool ids = false;  ///< true: token-id arrays; false: text (bytes)
  std::vector<SftExample> examples;
};

/// The largest SFT file read (bytes).
constexpr std::uint64_t kMaxSftFileBytes = std::uint64_t(4) << 30;

/// \brief Reads an SFT JSONL file. `vocab_size` bounds the ids of the id form (and must be >= 256 for the
/// text form, whose ids are bytes). Throws fbt::Error "fbt: sft data '<path>' line <n>: <what>" on a line
/// that is not a JSON object, a missing field, a field that is neither a string nor an array of integers,
/// an empty response, an id outside [0, vocab_size), a form other than the first line's; and on a file
/// without examples.
inline SftFile read_sft_jsonl(const std::string& path, int vocab_size) {
  const std::string text = detail::read_file_bytes(path, "read_sft_jsonl", kMaxSftFileBytes);
  SftFile f;
  f.path = path;
  int form = -1;  // -1 unknown, 0 text, 1 ids
  std::size_t b = 0;
  for (long line = 1; b < text.size(); ++line) {
    std::size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    const std::string where = "fbt: sft data '" + path + "' line " + std::to_string(line);
    const char* lb = text.data() + b;
    const char* le = text.data() + e;
    b = e + 1;
    bool blank = true;
    for (const char* p = lb; p < le; ++p) blank = blank && (*p == ' ' || *p == '\t' || *p == '\r');
    if (blank) continue;
    nlohmann::json j;
    try {
      j = detail::parse_json_strict(lb, le, where);
    } catch (const Error& ex) {  // one line: the parser's message after the place
      std::string m = ex.what();
      const std::size_t nl = m.find('\n');
      throw Error(nl == std::string::npos ? m : m.substr(0, nl));
    }
    if (!j.is_object()) throw Error(where + ": expected a JSON object {\"prompt\": ..., \"response\": ...}, got " + detail::json_brief(j));
    SftExample ex;
    for (const char* field : {"prompt", "response"}) {
      if (!j.contains(field)) throw Error(where + ": \"" + field + "\" is missing");
      const nlohmann::json& v = j[field];
      std::vector<int>& out = std::string(field) == "prompt" ? ex.prompt : ex.response;
      int this_form;
      if (v.is_string()) {
        this_form = 0;
        for (unsigned char ch : v.get_ref<const std::string&>()) out.push_back(int(ch));
      } else if (v.is_array()) {
        this_form = 1;
        for (std::size_t i = 0; i < v.size(); ++i) {
          const nlohmann::json& x = v[i];
          if (!x.is_number_integer())
            throw Error(where + ": \"" + field + "\"[" + std::to_string(i) + "] is " + detail::json_brief(x) + ", not an integer token id");
          const std::int64_t id = x.get<std::int64_t>();
          if (id < 0 || id >= vocab_size)
            throw Error(where + ": \"" + field + "\"[" + std::to_string(i) + "] = " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(vocab_size) + ")");
          out.push_back(int(id));
        }
      } else {
        throw Error(where + ": \"" + field + "\" must be a string (bytes) or an array of token ids, got " + detail::json_brief(v));
      }
      if (form < 0) form = this_form;
      if (this_form != form)
        throw Error(where + ": \"" + field + "\" is " + (this_form ? "token ids" : "text") + " but the file's first example is " +
                    (form ? "token ids" : "text") + " (one form per file)");
    }
    if (ex.response.empty()) throw Error(where + ": \"response\" is empty (nothing to train on)");
    f.examples.push_back(std::move(ex));
  }
  if (f.examples.empty()) throw Error("fbt: sft data '" + path + "': no examples (one JSON object per line)");
  f.ids = form == 1;
  if (!f.ids && vocab_size < 256)
    throw Error("fbt: sft data '" + path + "': text examples are bytes (ids 0..255) but the vocabulary has " + std::to_string(vocab_size) + " ids");
  return f;
}

}  // namespace fbt
