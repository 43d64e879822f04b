// The remote reader's settings (defaults, environment, checks) and its statistics, per reader
// and per endpoint for the whole process (sluice/remote.hpp).
#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/remote.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

std::mutex registry_mutex;
std::map<std::string, RemoteStats>& registry() {
  static auto* r = new std::map<std::string, RemoteStats>;  // never destroyed: read at exit
  return *r;
}

std::optional<std::uint64_t> env_size(const char* name, bool units) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const std::optional<std::uint64_t> n = parse_size(v);  // a plain number parses too
  if (!n ||
      (!units && std::string_view(v).find_first_not_of("0123456789") != std::string_view::npos)) {
    throw_usage_error({.op = "config"},
                      fmt::format("{}={}: not a {}", name, v, units ? "size" : "number"));
  }
  return n;
}

}  // namespace

bool is_remote_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

RemoteOptions RemoteOptions::from_environment() {
  RemoteOptions o;
  if (const auto v = env_size("SLUICE_REMOTE_PART_SIZE", true)) o.part_size = *v;
  if (const auto v = env_size("SLUICE_REMOTE_IN_FLIGHT", false)) {
    o.in_flight = static_cast<unsigned>(std::min<std::uint64_t>(*v, 1U << 20));
  } else if (const auto bw = env_size("SLUICE_REMOTE_BANDWIDTH", true)) {
    o.in_flight = in_flight_for(*bw);
  }
  if (const auto v = env_size("SLUICE_REMOTE_MAX_ATTEMPTS", false)) {
    o.max_attempts = static_cast<unsigned>(std::min<std::uint64_t>(*v, 1U << 20));
  }
  o.validate();
  return o;
}

unsigned RemoteOptions::in_flight_for(std::uint64_t bytes_per_second) noexcept {
  constexpr std::uint64_t per_request = 85'000'000;
  const std::uint64_t n = bytes_per_second / per_request + (bytes_per_second % per_request != 0);
  return static_cast<unsigned>(std::clamp<std::uint64_t>(n, 8, 128));
}

void RemoteOptions::validate() const {
  const auto bad = [](std::string_view what) { throw_usage_error({.op = "config"}, what); };
  if (part_size < 64 * KiB || part_size > 1 * GiB) bad("remote part size must be 64K..1G");
  if (in_flight < 1 || in_flight > 128) bad("remote requests in flight must be 1..128");
  if (max_attempts < 1 || max_attempts > 100) bad("remote max attempts must be 1..100");
  if (backoff_cap_ms < backoff_base_ms) bad("remote backoff cap must be >= its base");
  if (low_speed_seconds < 1) bad("remote low-speed time must be >= 1 s");
}

std::uint64_t RemoteStats::retry_count() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [cause, count] : retries) n += count;
  return n;
}

void RemoteStats::merge(const RemoteStats& other) {
  requests += other.requests;
  bytes += other.bytes;
  connections += other.connections;
  for (const auto& [cause, count] : other.retries) retries[cause] += count;
  if (other.lowest_in_flight > 0) {
    lowest_in_flight = lowest_in_flight == 0 ? other.lowest_in_flight
                                             : std::min(lowest_in_flight, other.lowest_in_flight);
  }
  latency_us.merge(other.latency_us);
}

std::map<std::string, RemoteStats> remote_endpoint_stats() {
  const std::lock_guard lock(registry_mutex);
  return registry();
}

namespace remote {
void publish_stats(const std::string& endpoint, const RemoteStats& delta) {
  const std::lock_guard lock(registry_mutex);
  registry()[endpoint].merge(delta);
}
}  // namespace remote

}  // namespace sluice
