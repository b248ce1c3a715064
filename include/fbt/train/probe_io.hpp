// fbt/train/probe_io.hpp: probe items from JSONL and a probe's result as JSON (train/probe.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe.hpp"
#include "../io/json.hpp"

namespace fbt {

/// The largest probe items file read (bytes): far more items than a probe can fit features for.
constexpr std::uint64_t kProbeItemsMaxBytes = std::uint64_t(256) << 20;

/// \brief Reads probe items from a JSONL file: one object per line (blank lines skipped) with
///   "text" (a string: bytes, read as kSep + bytes) or "tokens" (an array of token ids in [0, vocab)),
///   "label" (an integer or a string), optional "position" (0-based index of the probed byte of text, or of
///   tokens; default the last), optional "group" (a 64-bit integer; default the line number: items held out alone).
/// The file is read as every JSON input is (io/json.hpp): a regular file of at most kProbeItemsMaxBytes (a FIFO or
/// a device is refused before it is opened), each line parsed strictly (a NUL byte, anything after the object and a
/// duplicate key are refused). A bad line is refused with one line naming the file and the line, quoting at most
/// a bounded excerpt of the value.
inline std::vector<ProbeExample> read_probe_items(const std::string& path, int vocab, std::vector<std::string>& classes) {
  const std::string text = detail::read_file_bytes(path, "read_probe_items", kProbeItemsMaxBytes);
  std::vector<ProbeExample> out;
  std::size_t pos = 0;
  long long ln = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++ln;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(ln) + ": ";
    const nlohmann::json j = detail::parse_json_strict(line, path + ":" + std::to_string(ln));
    auto brief = [](const nlohmann::json& v) { return detail::json_brief(v); };
    if (!j.is_object()) throw Error(where + "expected a JSON object {\"text\": ..., \"label\": ...}, got " + std::string(j.type_name()));
    ProbeExample e;
    const bool has_text = j.contains("text"), has_tokens = j.contains("tokens");
    if (has_text == has_tokens) throw Error(where + "give exactly one of \"text\" (a string) and \"tokens\" (an array of ids)");
    if (has_text) {
      if (!j["text"].is_string()) throw Error(where + "\"text\" must be a string, got " + std::string(j["text"].type_name()));
      if (j["text"].get<std::string>().empty()) throw Error(where + "\"text\" is empty");
      if (vocab < ByteTokenizer::kVocabSize) throw Error(where + "\"text\" needs a byte-level model (vocabulary 257); give \"tokens\"");
      e.tokens = ByteTokenizer::encode_document(j["text"].get<std::string>());
    } else {
      if (!j["tokens"].is_array() || j["tokens"].empty()) throw Error(where + "\"tokens\" must be a non-empty array of token ids");
      for (const auto& t : j["tokens"]) {
        if (!t.is_number_integer()) throw Error(where + "\"tokens\" holds a non-integer " + brief(t));
        if (t.is_number_unsigned() && t.get<std::uint64_t>() > std::uint64_t(vocab))
          throw Error(where + "token id " + brief(t) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        const long long v = t.get<long long>();
        if (v < 0 || v >= vocab) throw Error(where + "token id " + brief(t) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        e.tokens.push_back(int(v));
      }
    }
    if (!j.contains("label")) throw Error(where + "missing field \"label\"");
    const auto& lb = j["label"];
    std::string label;
    if (lb.is_string()) label = lb.get<std::string>();
    else if (lb.is_number_integer()) label = lb.dump();  // the integer's own digits, any size
    else throw Error(where + "\"label\" must be an integer or a string, got " + brief(lb));
    if (label.size() > 256) throw Error(where + "\"label\" is " + std::to_string(label.size()) + " bytes long (at most 256): \"" + detail::excerpt(label) + "\"");
    auto c = std::find(classes.begin(), classes.end(), label);
    e.label = int(c - classes.begin());
    if (c == classes.end()) classes.push_back(label);
    const int len = has_text ? int(e.tokens.size()) - 1 : int(e.tokens.size());  // probe-able positions
    e.position = int(e.tokens.size()) - 1;
    if (j.contains("position")) {
      const auto& pj = j["position"];
      if (!pj.is_number_integer()) throw Error(where + "\"position\" must be an integer, got " + brief(pj));
      if (pj.is_number_unsigned() ? pj.get<std::uint64_t>() >= std::uint64_t(len) : (pj.get<long long>() < 0 || pj.get<long long>() >= len))
        throw Error(where + "position " + brief(pj) + " is outside the " + (has_text ? "text" : "tokens") + " [0, " + std::to_string(len) + ")");
      e.position = int(pj.get<long long>()) + (has_text ? 1 : 0);
    }
    e.group = ln;
    if (j.contains("group")) {
      const auto& g = j["group"];
      if (!g.is_number_integer() || (g.is_number_unsigned() && g.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
        throw Error(where + "\"group\" must be an integer in [-2^63, 2^63), got " + brief(g));
      e.group = g.get<std::int64_t>();
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) throw Error(path + ": no probe items");
  return out;
}

/// The result as JSON: {"classes", "chance", "depths", "cells": [{mode, setting, depth, correct, n, accuracy, ci95}], "skipped"}.
inline nlohmann::json probe_json(const ProbeResult& r) {
  nlohmann::json j;
  j["classes"] = r.classes, j["chance"] = r.chance, j["depths"] = r.depths, j["skipped"] = r.skipped;
  j["cells"] = nlohmann::json::array();
  for (const ProbeCell& c : r.cells)
    j["cells"].push_back({{"mode", c.mode}, {"setting", c.setting}, {"depth", c.depth}, {"correct", c.correct}, {"n", c.n},
                          {"accuracy", c.accuracy}, {"ci95", {c.lo, c.hi}}});
  return j;
}

}  // namespace fbt
