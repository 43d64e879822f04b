// The aggregate of a job-wide operation over its ranks (sluice load under MPI), IOR's way: the
// bytes of every rank over the common window from the earliest start to the latest end.
#include <algorithm>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/units.hpp"

namespace sluice {

std::string to_wire(const RankSpan& s) {
  return nlohmann::json{{"rank", s.rank},   {"host", s.host}, {"bytes", s.bytes},
                        {"start", s.start}, {"end", s.end},   {"error", s.error}}
      .dump();
}

RankSpan span_from_wire(std::string_view text) {
  try {
    const auto j = nlohmann::json::parse(text);
    return {.rank = j.at("rank"),
            .host = j.at("host"),
            .bytes = j.at("bytes"),
            .start = j.at("start"),
            .end = j.at("end"),
            .error = j.at("error")};
  } catch (const nlohmann::json::exception& e) {
    throw_usage_error({.op = "cluster"}, fmt::format("malformed rank record: {}", e.what()));
  }
}

SpanAggregate aggregate_spans(const std::vector<RankSpan>& spans) {
  SpanAggregate a;
  if (spans.empty()) return a;
  a.ranks = static_cast<int>(spans.size());
  a.start = spans.front().start;
  a.end = spans.front().end;
  double slowest = -1;
  for (const RankSpan& s : spans) {
    a.bytes += s.bytes;
    a.start = std::min(a.start, s.start);
    a.end = std::max(a.end, s.end);
    const double own = s.end > s.start ? static_cast<double>(s.bytes) / static_cast<double>(GiB) /
                                             (s.end - s.start)
                                       : 0;
    if (slowest < 0 || own < slowest) {
      slowest = own;
      a.slowest_rank = s.rank;
      a.slowest_host = s.host;
    }
    if (!s.error.empty() && a.error.empty())
      a.error = fmt::format("rank {} on {}: {}", s.rank, s.host, s.error);
  }
  a.slowest_gib_per_s = slowest;
  a.seconds = a.end - a.start;
  a.gib_per_s =
      a.seconds > 0 ? static_cast<double>(a.bytes) / static_cast<double>(GiB) / a.seconds : 0;
  return a;
}

double unix_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace sluice
