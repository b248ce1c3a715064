// fbt/train/memory.hpp: how much memory a run may take, said before it allocates.
//
// The trainer estimates what a run needs (parameters and AdamW state, the step's workspace, the data)
// and refuses to start when the estimate exceeds the memory it may use: the available memory of the
// machine (MemAvailable in /proc/meminfo, the kernel's estimate of what can be allocated without
// swapping), or the limit the caller gives (TrainConfig::max_memory_gb, `--max_memory_gb`). Where
// /proc/meminfo cannot be read (not Linux, a sandbox) and no limit is given, the check is skipped.
// A limit above the machine's memory is how a user overrides the check. std + POSIX only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "../config.hpp"

namespace fbt {
namespace detail {

/// \brief MemAvailable from the text of /proc/meminfo ("MemAvailable:  123456 kB"), in bytes; 0 when the
/// line is absent or unreadable.
inline std::uint64_t parse_mem_available(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ls(line.substr(13));
    unsigned long long kb = 0;
    std::string unit;
    if (!(ls >> kb)) return 0;
    ls >> unit;
    if (!unit.empty() && unit != "kB") return 0;
    if (kb > (~0ull >> 10)) return 0;
    return std::uint64_t(kb) << 10;
  }
  return 0;
}

/// \brief The machine's available memory in bytes (MemAvailable), 0 when unknown.
inline std::uint64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  if (!f) return 0;
  std::ostringstream s;
  s << f.rdbuf();
  return parse_mem_available(s.str());
}

/// \brief A byte count for people: "812 B", "3.4 MB", "350 TB" (decimal units).
inline std::string fmt_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1000 && u < 6) b /= 1000, ++u;
  char s[48];
  std::snprintf(s, sizeof s, u == 0 ? "%.0f %s" : "%.3g %s", b, units[u]);
  return s;
}

}  // namespace detail

/// \brief Refuses (fbt::Error) when `need_bytes` exceeds the memory a run may use.
/// \param what       what needs it, e.g. "fbt train: the run"
/// \param breakdown  what the estimate is made of, e.g. "step workspace 3 GB for ..., parameters ..."
/// \param max_memory_gb  the caller's limit in GB (1e9 bytes); 0 = the available memory (MemAvailable)
/// \param hint       what to change, e.g. "lower batch_size or seq_len"
/// With max_memory_gb 0 and no /proc/meminfo, nothing is checked.
inline void check_memory(const std::string& what, double need_bytes, const std::string& breakdown, double max_memory_gb,
                         const std::string& hint) {
  double limit = 0;
  std::string source;
  if (max_memory_gb > 0) {
    limit = max_memory_gb * 1e9;
    source = "the limit max_memory_gb = " + detail::fmt_bytes(limit);
  } else {
    const std::uint64_t avail = detail::mem_available_bytes();
    if (avail == 0) return;  // unknown: skip the check
    limit = double(avail);
    source = detail::fmt_bytes(limit) + " available (MemAvailable in /proc/meminfo)";
  }
  if (!(need_bytes > limit)) return;
  throw Error(what + " needs an estimated " + detail::fmt_bytes(need_bytes) + " (" + breakdown + "), more than " + source + "; " + hint +
              ", or set --max_memory_gb (TrainConfig::max_memory_gb) to the limit you accept");
}

}  // namespace fbt
