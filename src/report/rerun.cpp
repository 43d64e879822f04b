// The command that reruns one result of a bench document: the document's workload (its
// "config") narrowed to that result's transfer type, mode, block size, threads and depth, in
// `sluice bench`'s long options. A sweep or comparison is many results; each gets its own line.
#include "report/rerun.hpp"

#include <fmt/format.h>

namespace sluice::report::detail {
namespace {

std::string quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./:=,+@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string seconds(double s) {
  return fmt::format("{:g}", s);
}

}  // namespace

std::string shell_quote(const std::string& s) {
  return quote(s);
}

std::string rerun_command(const Row& r) {
  const json& cfg = r.source->doc.value("config", json::object());
  const json w = cfg.value("workload", json::object());
  if (w.empty()) return {};
  std::string cmd = "sluice bench";
  if (const std::string dir = w.value("dir", ""); !dir.empty()) {
    cmd += " --dir " + quote(dir);
  } else {
    for (const json& f : w.value("files", json::array())) {
      if (f.is_string()) cmd += " --file " + quote(f.get<std::string>());
    }
  }
  auto u64 = [&](const char* key) {
    return w.contains(key) && w[key].is_number() ? w[key].get<std::uint64_t>() : 0;
  };
  if (u64("size") > 0) cmd += fmt::format(" --size {}", u64("size"));
  if (u64("offset") > 0) cmd += fmt::format(" --offset {}", u64("offset"));
  cmd += " --xfer " + quote(r.xfer);
  cmd += " --rw " + quote(r.rw);
  if (r.rw == "rw" || r.rw == "randrw") cmd += fmt::format(" --mix {}", u64("mix_read"));
  cmd +=
      fmt::format(" --block-size {} --threads {} --iodepth {}", r.block_size, r.threads, r.iodepth);
  if (const double t = w.value("time_s", 0.0); t > 0) cmd += " --time " + seconds(t);
  if (const double t = w.value("warmup_s", 0.0); t > 0) cmd += " --warmup " + seconds(t);
  if (w.value("unaligned", false)) cmd += " --unaligned";
  cmd += fmt::format(" --seed {}", u64("seed"));
  if (w.value("verify", false)) cmd += " --verify";
  if (!w.value("direct", true)) cmd += " --buffered";
  if (const std::string p = w.value("cache_policy", "bypass"); w.value("direct", true) && p != "bypass") {
    cmd += " --cache-policy " + p;
  }
  if (cfg.value("drop_caches", false)) cmd += " --drop-caches";
  if (cfg.value("cache", "cold") == "warm") cmd += " --warm";
  if (w.contains("device") && w["device"].is_string() && !w["device"].get<std::string>().empty()) {
    cmd += " --device " + quote(w["device"].get<std::string>());
  }
  if (w.contains("memory") && w["memory"].is_string())
    cmd += " --memory " + quote(w["memory"].get<std::string>());
  if (w.value("strict", false)) cmd += " --strict";
  if (const int node = w.value("numa_node", -1); node >= 0)
    cmd += fmt::format(" --numa-node {}", node);
  if (const double s = w.value("sample_interval_s", 1.0); s != 1.0)
    cmd += " --sample-interval " + seconds(s);
  if (u64("submit_batch") > 0) cmd += fmt::format(" --submit-batch {}", u64("submit_batch"));
  if (u64("reap_batch") > 0) cmd += fmt::format(" --reap-batch {}", u64("reap_batch"));
  if (!w.value("huge_pages", true)) cmd += " --no-hugepages";
  if (w.value("via_library", false)) cmd += " --via-library";
  return cmd;
}

}  // namespace sluice::report::detail
