// fbt/train/probe_io.hpp: probe items from JSONL and a probe's result as JSON (train/probe.hpp).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "probe.hpp"
#include "../io/json.hpp"

namespace fbt {

/// \brief Reads probe items from a JSONL file: one object per line (blank lines skipped) with
///   "text" (a string: bytes, read as kSep + bytes) or "tokens" (an array of token ids in [0, vocab)),
///   "label" (an integer or a string), optional "position" (0-based index of the probed byte of text, or of
///   tokens; default the last), optional "group" (an integer; default the line number: items held out alone).
/// A bad line is refused with one line naming the file and the line.
inline std::vector<ProbeExample> read_probe_items(const std::string& path, int vocab, std::vector<std::string>& classes) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the probe items file");
  std::vector<ProbeExample> out;
  std::string line;
  int ln = 0;
  while (std::getline(in, line)) {
    ++ln;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(ln) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      throw Error(where + "not valid JSON");
    }
    if (!j.is_object()) throw Error(where + "expected a JSON object {\"text\": ..., \"label\": ...}, got " + std::string(j.type_name()));
    ProbeExample e;
    const bool has_text = j.contains("text"), has_tokens = j.contains("tokens");
    if (has_text == has_tokens) throw Error(where + "give exactly one of \"text\" (a string) and \"tokens\" (an array of ids)");
    if (has_text) {
      if (!j["text"].is_string()) throw Error(where + "\"text\" must be a string, got " + std::string(j["text"].type_name()));
      if (j["text"].get<std::string>().empty()) throw Error(where + "\"text\" is empty");
      e.tokens = ByteTokenizer::encode_document(j["text"].get<std::string>());
      if (vocab < ByteTokenizer::kVocabSize) throw Error(where + "\"text\" needs a byte-level model (vocabulary 257); give \"tokens\"");
    } else {
      if (!j["tokens"].is_array() || j["tokens"].empty()) throw Error(where + "\"tokens\" must be a non-empty array of token ids");
      for (const auto& t : j["tokens"]) {
        if (!t.is_number_integer()) throw Error(where + "\"tokens\" holds a non-integer " + t.dump());
        const long long v = t.get<long long>();
        if (v < 0 || v >= vocab) throw Error(where + "token id " + std::to_string(v) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        e.tokens.push_back(int(v));
      }
    }
    if (!j.contains("label")) throw Error(where + "missing field \"label\"");
    const auto& lb = j["label"];
    std::string label;
    if (lb.is_string()) label = lb.get<std::string>();
    else if (lb.is_number_integer()) label = std::to_string(lb.get<long long>());
    else throw Error(where + "\"label\" must be an integer or a string, got " + lb.dump());
    auto c = std::find(classes.begin(), classes.end(), label);
    e.label = int(c - classes.begin());
    if (c == classes.end()) classes.push_back(label);
    const int len = has_text ? int(e.tokens.size()) - 1 : int(e.tokens.size());  // probe-able positions
    e.position = int(e.tokens.size()) - 1;
    if (j.contains("position")) {
      if (!j["position"].is_number_integer()) throw Error(where + "\"position\" must be an integer, got " + j["position"].dump());
      const long long p = j["position"].get<long long>();
      if (p < 0 || p >= len)
        throw Error(where + "position " + std::to_string(p) + " is outside the " + (has_text ? "text" : "tokens") + " [0, " + std::to_string(len) + ")");
      e.position = int(p) + (has_text ? 1 : 0);
    }
    e.group = ln;
    if (j.contains("group")) {
      if (!j["group"].is_number_integer()) throw Error(where + "\"group\" must be an integer, got " + j["group"].dump());
      e.group = int(j["group"].get<long long>());
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
