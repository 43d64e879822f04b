// What `sluice report` reads out of the bench JSON documents: the inputs (validated), their
// results, and the results grouped into the cases the charts draw (one case = one transfer type
// at one block size, depth, thread count and mode, in one series; its rounds give the spread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sluice/tools/report.hpp"

namespace sluice::report::detail {

using nlohmann::json;

struct Source {
  std::string path;
  std::string label;
  std::string version;
  std::string command;
  std::string finished;
  int schema = 0;  ///< 0: written before the field existed (read as the current layout)
  json doc;        ///< the whole document (config, system, results)
};

/// One entry of a document's results[].
struct Row {
  const Source* source = nullptr;
  const json* j = nullptr;
  std::string xfer, path, reason, rw, phase, error, memory;
  std::string cache;        ///< the cache column ("cold 0%"); "" in documents older than it
  std::string cache_state;  ///< "cold" | "warm" | "as-is" | ""
  bool cache_odd = false;   ///< did not start in the state asked for, or was rewarmed
  bool fell_back = false;
  std::uint64_t block_size = 0, threads = 0, iodepth = 0;
  int round = 0;
  double gib_per_s = 0, iops = 0, seconds = 0;
};

/// The latency of a case: every round's histogram merged (percentiles in microseconds).
struct Latency {
  bool from_histogram = false;
  std::uint64_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  /// Share of I/Os (0..1) per latency bin [lo_us, hi_us), 4 bins per power of two.
  struct Bin {
    double lo_us, hi_us, share;
  };
  std::vector<Bin> bins;
};

/// The successful "run" rounds of one case in one series.
struct Case {
  std::string series;   ///< the input label
  std::string name;     ///< transfer type plus the parameters that vary in the report
  std::string setting;  ///< the parameters that vary, without the transfer type ("4K", "")
  std::string xfer, path, rw;
  std::uint64_t block_size = 0, threads = 0, iodepth = 0;
  std::vector<const Row*> rows;
  double median = 0, min = 0, max = 0, iops_median = 0;
  bool fell_back = false;
  std::string reason;         ///< the reason of the first round (why this path)
  std::string cache;          ///< the rounds' cache state, or the first odd round's label
  std::size_t reason_id = 0;  ///< index into Model::reasons
  Latency latency;
};

/// One distinct (path, reason) of the cases, listed once on the page with the cases that share
/// it: a sweep of five block sizes falls back for the same reason in every one of them.
struct Reason {
  std::string path;
  std::string text;
  bool fell_back = false;
  std::vector<std::size_t> cases;  ///< indexes into Model::cases, in order
};

struct Model {
  std::vector<Source> sources;
  std::vector<Row> rows;    ///< every result, all phases, failed ones too
  std::vector<Case> cases;  ///< in first-seen order
  /// Fallbacks first, then the other reasons, each in first-seen order.
  std::vector<Reason> reasons;
  /// Which of "block_size", "iodepth", "threads", "rw", "xfer" take more than one value.
  std::map<std::string, bool> varies;
  std::vector<std::string> labels;  ///< distinct series, in input order
};

/// Parses and checks every input (throws a usage Error naming the bad one), then groups.
[[nodiscard]] Model build_model(const std::vector<Input>& inputs);

/// The reason a row's path is explained by in Model::reasons, if a case has it.
[[nodiscard]] const Reason* reason_of(const Model& m, const std::string& path,
                                      const std::string& text);
/// The cases of a reason, compact: "gpu-direct: 4K, 16K, 1M" per transfer type (and input).
[[nodiscard]] std::vector<std::string> reason_cases(const Model& m, const Reason& r);

/// "4K", "1M", "1.5M": block sizes as people write them on the command line.
[[nodiscard]] std::string short_size(std::uint64_t bytes);
/// A latency in microseconds with sensible precision ("3.1 ms", "820 us").
[[nodiscard]] std::string format_us(double us);

}  // namespace sluice::report::detail
