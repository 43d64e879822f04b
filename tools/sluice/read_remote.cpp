// sluice read URL: an http:// or https:// object -> host memory -> OUT, through RemoteReader
// (docs/remote.md). The range is read in pieces of in_flight x part_size (at most 1 GiB), so a
// piece keeps every request slot busy and memory stays bounded whatever the object's size.
#include "read_remote.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

// Request latency (sent to last byte) of this read's GETs: what a slow endpoint shows first.
nlohmann::json remote_latency_json(const LatencyHistogram& us) {
  auto at = [&](double p) { return us.value_at_percentile(p); };
  return {{"count", us.count()}, {"p50", at(50)}, {"p90", at(90)}, {"p99", at(99)},
          {"max", us.max()}};
}

std::string remote_summary(const RemoteRead& a, const RemoteReader& reader, const TransferResult& r,
                           double cpu) {
  const double gib_s = r.seconds > 0 ? static_cast<double>(r.bytes) / GiB / r.seconds : 0.0;
  if (!a.json) {
    return fmt::format(
        "read {} from '{}' in {:.3f} s ({:.2f} GiB/s, {:.2f} CPU s)\npath: remote ({})",
        format_size(r.bytes), reader.url(), r.seconds, gib_s, cpu, reader.reason());
  }
  const RemoteStats& st = reader.stats();
  nlohmann::json j = {{"op", "read"},
                      {"file", reader.url()},
                      {"path", "remote"},
                      {"reason", reader.reason()},
                      {"bytes", r.bytes},
                      {"seconds", r.seconds},
                      {"gib_per_s", gib_s},
                      {"cpu_seconds", cpu},
                      {"ios", st.requests},
                      {"endpoint", reader.endpoint()},
                      {"connections", st.connections},
                      {"retries", st.retries},
                      {"lowest_in_flight", st.lowest_in_flight},
                      {"latency_us", remote_latency_json(st.latency_us)}};
  return j.dump();
}

}  // namespace

int run_remote_read(const RemoteRead& a) {
  RemoteOptions opt = RemoteOptions::from_environment();
  if (!a.part_size.empty()) opt.part_size = to_size(a.part_size, "--part-size");
  if (a.in_flight > 0) opt.in_flight = a.in_flight;
  RemoteReader reader(a.url, opt);
  // At most 1 GiB a piece (a part when parts are larger): 128 parts of 1 GiB would not fit.
  const std::uint64_t piece = std::max(opt.part_size, std::min<std::uint64_t>(opt.part_size * opt.in_flight, GiB));
  const std::uint64_t length = a.length ? *a.length : ~std::uint64_t{0} - a.offset;
  std::vector<char> buf(
      static_cast<std::size_t>(std::min(piece, std::max<std::uint64_t>(length, 1))));

  const bool to_stdout = a.out == "-";
  const int out_fd = open_output(a.out);
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  TransferResult total;
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t ask = std::min<std::uint64_t>(buf.size(), length - done);
    const TransferResult r = reader.read(buf.data(), ask, a.offset + done);
    write_all(out_fd, buf.data(), r.bytes, to_stdout ? std::string("stdout") : a.out);
    done += r.bytes;
    total.bytes += r.bytes;
    if (r.bytes < ask) break;  // the end of the object
  }
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!to_stdout && ::close(out_fd) != 0)
    throw_os_error(errno, {.op = "close", .path = a.out}, "cannot close output");
  FILE* report = to_stdout ? stderr : stdout;
  std::fputs(remote_summary(a, reader, total, cpu_seconds() - cpu0).c_str(), report);
  std::fputc('\n', report);
  return 0;
}

}  // namespace sluice::cli
