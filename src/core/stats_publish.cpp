// Publishing the process-wide counters to other processes, and reading them back. The segment is
// a POSIX shared-memory object (shm_open) holding detail::SharedStats; the writer only adds with
// relaxed atomics, readers only load, so no lock is shared between processes and a reader can
// never stall a writer.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>

#include <fmt/format.h>

#include "core/shared_stats.hpp"
#include "sluice/stats.hpp"

namespace sluice {
namespace detail {
namespace {

std::string shm_name(int pid) {
  return fmt::format("/sluice-stats.{}", pid);
}

// Removes the segment at normal exit; only the process that made it (not a forked child).
struct Segment {
  int owner = 0;
  ~Segment() {
    if (owner != 0 && owner == ::getpid()) ::shm_unlink(shm_name(owner).c_str());
    // The mapping stays: a static destructor that runs later may still record.
  }
};

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool pid_alive(int pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

std::uint64_t unix_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

SharedStats* attach_published_stats() noexcept {
  const char* env = std::getenv("SLUICE_STATS");
  if (env == nullptr || std::strcmp(env, "1") != 0) return nullptr;
  static Segment segment;
  const int pid = ::getpid();
  const std::string name = shm_name(pid);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "sluice: SLUICE_STATS=1 but cannot create /dev/shm%s: %s\n", name.c_str(),
                 std::strerror(errno));
    return nullptr;
  }
  void* p = MAP_FAILED;
  if (::ftruncate(fd, sizeof(SharedStats)) == 0) {
    p = ::mmap(nullptr, sizeof(SharedStats), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    std::fprintf(stderr, "sluice: SLUICE_STATS=1 but cannot map /dev/shm%s: %s\n", name.c_str(),
                 std::strerror(err));
    return nullptr;
  }
  auto* s = new (p) SharedStats();
  s->pid = pid;
  s->start_unix_ns = unix_ns();
  FILE* comm = std::fopen("/proc/self/comm", "r");
  if (comm != nullptr) {
    if (std::fgets(s->command, sizeof(s->command), comm) != nullptr) {
      s->command[std::strcspn(s->command, "\n")] = '\0';
    }
    std::fclose(comm);
  }
  segment.owner = pid;
  return s;
}

}  // namespace detail

std::string stats_segment_path(int pid) {
  return fmt::format("/dev/shm/sluice-stats.{}", pid);
}

bool stats_published() noexcept {
  const char* env = std::getenv("SLUICE_STATS");
  return env != nullptr && std::strcmp(env, "1") == 0 &&
         ::access(stats_segment_path(::getpid()).c_str(), F_OK) == 0;
}

std::optional<PublishedStats> read_published(int pid, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<PublishedStats> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  const std::string name = detail::shm_name(pid);
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    return fail(
        errno == ENOENT
            ? fmt::format("process {} publishes no stats (no {}; start it with SLUICE_STATS=1)",
                          pid, stats_segment_path(pid))
            : fmt::format("cannot open {}: {}", stats_segment_path(pid), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(detail::SharedStats)) {
    ::close(fd);
    return fail(fmt::format("{} is too small for stats layout version {}", stats_segment_path(pid),
                            stats_layout_version));
  }
  void* p = ::mmap(nullptr, sizeof(detail::SharedStats), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return fail(fmt::format("cannot map {}: {}", stats_segment_path(pid), std::strerror(errno)));
  const auto* s = static_cast<const detail::SharedStats*>(p);
  if (s->magic != detail::stats_magic || s->version != stats_layout_version ||
      s->size != sizeof(detail::SharedStats)) {
    const std::uint32_t v = s->version;
    ::munmap(p, sizeof(detail::SharedStats));
    return fail(fmt::format("{} has stats layout version {}, this sluice reads version {}",
                            stats_segment_path(pid), v, stats_layout_version));
  }
  PublishedStats r;
  r.pid = s->pid;
  r.alive = detail::pid_alive(s->pid);
  r.command.assign(s->command, strnlen(s->command, sizeof(s->command)));
  r.start_unix_ns = s->start_unix_ns;
  r.updated_unix_ns = s->updated_unix_ns.load(std::memory_order_relaxed);
  r.snapshot = detail::load(*s);
  ::munmap(p, sizeof(detail::SharedStats));
  return r;
}

std::vector<PublishedStats> list_published() {
  std::vector<PublishedStats> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string n = e.path().filename().string();
    constexpr std::string_view prefix = "sluice-stats.";
    if (!n.starts_with(prefix)) continue;
    const std::string digits = n.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (auto s = read_published(std::atoi(digits.c_str()))) out.push_back(std::move(*s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

std::string to_prometheus(const std::vector<PublishedStats>& stats) {
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t PathCounters::*field;
    double scale;
  };
  static constexpr Metric metrics[] = {
      {"sluice_bytes_total", "counter", "Bytes moved by finished transfers.", &PathCounters::bytes,
       1},
      {"sluice_transfers_total", "counter", "Transfers (API calls) finished.", &PathCounters::ops,
       1},
      {"sluice_ios_total", "counter", "I/O requests submitted to the I/O engine.",
       &PathCounters::ios, 1},
      {"sluice_errors_total", "counter", "Transfers that failed.", &PathCounters::errors, 1},
      {"sluice_transfer_seconds_total", "counter", "Summed wall time of transfers, seconds.",
       &PathCounters::nanoseconds, 1e-9},
  };
  std::string out;
  for (const Metric& m : metrics) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", m.name, m.help, m.name, m.type);
    for (const auto& s : stats) {
      for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
        for (auto d : {Direction::read, Direction::write}) {
          const double v = static_cast<double>(s.snapshot.at(p, d).*m.field) * m.scale;
          out += fmt::format("{}{{pid=\"{}\",path=\"{}\",direction=\"{}\"}} {}\n", m.name, s.pid,
                             to_string(p), d == Direction::read ? "read" : "write", v);
        }
      }
    }
  }
  struct KeyedMetric {
    const char* name;
    const char* help;
    std::uint64_t PathCounters::*field;
  };
  auto keyed = [&](const char* what, const char* label,
                   std::vector<KeyedCounters> StatsSnapshot::*list) {
    static constexpr KeyedMetric keyed_metrics[] = {
        {"bytes_total", "Bytes moved by finished transfers", &PathCounters::bytes},
        {"transfers_total", "Transfers finished", &PathCounters::ops},
        {"errors_total", "Transfers that failed", &PathCounters::errors},
    };
    for (const KeyedMetric& m : keyed_metrics) {
      const std::string name = fmt::format("sluice_{}_{}", what, m.name);
      out += fmt::format("# HELP {} {}, by {}.\n# TYPE {} counter\n", name, m.help, what, name);
      for (const auto& s : stats) {
        for (const KeyedCounters& k : s.snapshot.*list) {
          for (auto d : {Direction::read, Direction::write}) {
            out += fmt::format("{}{{pid=\"{}\",{}=\"{}\",direction=\"{}\"}} {}\n", name, s.pid,
                               label, detail::label_value(k.key), d == Direction::read ? "read" : "write",
                               k.dirs[static_cast<std::size_t>(d)].*m.field);
          }
        }
      }
    }
  };
  keyed("device", "device", &StatsSnapshot::devices);
  keyed("filesystem", "fs", &StatsSnapshot::filesystems);
  out +=
      "# HELP sluice_fallbacks_total GPU transfers that could not take the direct path, by reason.\n"
      "# TYPE sluice_fallbacks_total counter\n";
  for (const auto& s : stats) {
    for (std::size_t f = 0; f < fallback_count; ++f) {
      out += fmt::format("sluice_fallbacks_total{{pid=\"{}\",reason=\"{}\"}} {}\n", s.pid,
                         to_string(static_cast<Fallback>(f)), s.snapshot.fallbacks[f]);
    }
  }
  out +=
      "# HELP sluice_transfer_latency_seconds Wall time per transfer.\n"
      "# TYPE sluice_transfer_latency_seconds summary\n";
  for (const auto& s : stats) {
    for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
      for (auto d : {Direction::read, Direction::write}) {
        const PathCounters& c = s.snapshot.at(p, d);
        if (c.ops == 0) continue;
        const std::string labels = fmt::format("pid=\"{}\",path=\"{}\",direction=\"{}\"", s.pid,
                                               to_string(p), d == Direction::read ? "read" : "write");
        const LatencyHistogram& h = s.snapshot.latency_of(p, d);
        for (const double q : {0.5, 0.9, 0.99, 0.999}) {
          out += fmt::format("sluice_transfer_latency_seconds{{{},quantile=\"{}\"}} {}\n", labels, q,
                             static_cast<double>(h.value_at_percentile(q * 100)) * 1e-9);
        }
        out += fmt::format("sluice_transfer_latency_seconds_sum{{{}}} {}\n", labels,
                           static_cast<double>(c.nanoseconds) * 1e-9);
        out += fmt::format("sluice_transfer_latency_seconds_count{{{}}} {}\n", labels, c.ops);
      }
    }
  }
  out +=
      "# HELP sluice_staging_waits_total Times a worker waited for a free staging buffer.\n"
      "# TYPE sluice_staging_waits_total counter\n";
  for (const auto& s : stats)
    out += fmt::format("sluice_staging_waits_total{{pid=\"{}\"}} {}\n", s.pid,
                       s.snapshot.staging_waits);
  out +=
      "# HELP sluice_last_update_seconds Unix time of the last counter update (0: none yet).\n"
      "# TYPE sluice_last_update_seconds gauge\n";
  for (const auto& s : stats) {
    out += fmt::format("sluice_last_update_seconds{{pid=\"{}\"}} {}\n", s.pid,
                       static_cast<double>(s.updated_unix_ns) * 1e-9);
  }
  return out;
}

}  // namespace sluice
