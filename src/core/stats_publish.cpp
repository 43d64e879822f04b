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
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

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

// When process `pid` started (ns since the epoch), from /proc/<pid>/stat and the boot time in
// /proc/stat (whole seconds, so within about a second); nullopt when either cannot be read.
std::optional<std::uint64_t> process_start_unix_ns(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  const auto paren = line.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {  // field 22 is starttime, in clock ticks
  }
  std::uint64_t boot_s = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;) {
    if (key == "btime") {
      proc_stat >> boot_s;
      break;
    }
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (!fields || boot_s == 0 || ticks <= 0) return std::nullopt;
  const auto start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  return boot_s * 1'000'000'000ULL + start_ticks * (1'000'000'000ULL / static_cast<std::uint64_t>(ticks));
}

// The segment's writer still runs: process `pid` exists and started before the segment was made
// (a later process that got the same pid is not its writer).
bool writer_alive(int pid, std::uint64_t segment_start_ns) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  constexpr std::uint64_t slack_ns = 2'000'000'000;  // the boot time is in whole seconds
  const auto started = process_start_unix_ns(pid);
  return !started || *started <= segment_start_ns + slack_ns;
}

// The uid process `pid` runs as (the owner of /proc/<pid>), or nullopt when it is gone.
std::optional<uid_t> process_uid(int pid) {
  struct stat st {};
  if (::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0) return std::nullopt;
  return st.st_uid;
}

// The pids of the segments under /dev/shm, by name.
std::vector<int> segment_pids() {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string n = e.path().filename().string();
    constexpr std::string_view prefix = "sluice-stats.";
    if (!n.starts_with(prefix)) continue;
    const std::string digits = n.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(std::atoi(digits.c_str()));
  }
  return out;
}

// Removes the segments this user's dead processes left behind (killed by a signal, or replaced
// by exec), so they do not pile up in /dev/shm. Never another user's.
void remove_stale_segments() {
  for (const int pid : segment_pids()) {
    if (pid == ::getpid()) continue;
    std::string why;
    const auto s = read_published(pid, &why);
    struct stat st {};
    if (s && !s->alive && ::stat(stats_segment_path(pid).c_str(), &st) == 0 && st.st_uid == ::geteuid()) {
      ::shm_unlink(shm_name(pid).c_str());
    }
  }
}

// Creates this process's segment exclusively (0644: any user may read the counters, only this
// process writes them). One left at this pid by this user (an exec'd image, or an earlier process
// that had the pid) is replaced; one of another user's is left alone and nothing is published.
int create_segment(const std::string& name) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)::fchmod(fd, 0644);  // whatever the umask
      return fd;
    }
    if (errno != EEXIST) break;
    struct stat st {};
    if (::stat(("/dev/shm" + name).c_str(), &st) != 0 || st.st_uid != ::geteuid()) {
      errno = EEXIST;
      break;
    }
    ::shm_unlink(name.c_str());
  }
  return -1;
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
  remove_stale_segments();
  const int fd = create_segment(name);
  if (fd < 0) {
    std::fprintf(stderr, "sluice: SLUICE_STATS=1 but cannot create /dev/shm%s: %s%s\n", name.c_str(),
                 std::strerror(errno), errno == EEXIST ? " (it belongs to another user)" : "");
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

namespace {

// Whether a segment owned by `owner` may be believed to be process `pid`'s: written by that
// process's user (any user's, for a process of this user's), or, once the process is gone, by
// this user. Anything else may be another user's forgery; it is refused, not shown.
std::string owner_mismatch(int pid, uid_t owner) {
  if (owner == ::geteuid()) return {};
  const auto uid = detail::process_uid(pid);
  if (uid && *uid == owner) return {};
  return uid ? fmt::format("{} is owned by uid {}, but process {} runs as uid {}", stats_segment_path(pid), owner,
                           pid, *uid)
             : fmt::format("{} is owned by uid {} and process {} is gone", stats_segment_path(pid), owner, pid);
}

// The checks of a mapped segment's header; empty when it can be read.
std::string header_mismatch(int pid, const detail::SharedStats& s) {
  if (s.magic != detail::stats_magic) return fmt::format("{} is not a sluice stats segment", stats_segment_path(pid));
  if (s.version != stats_layout_version) {
    return fmt::format("{} has stats layout version {}, this sluice reads version {}", stats_segment_path(pid),
                       s.version, stats_layout_version);
  }
  if (s.size != sizeof(detail::SharedStats)) {
    return fmt::format("{} says it holds {} bytes, but stats layout version {} is {} bytes", stats_segment_path(pid),
                       s.size, stats_layout_version, sizeof(detail::SharedStats));
  }
  if (s.pid != pid) return fmt::format("{} says it is process {}'s", stats_segment_path(pid), s.pid);
  return {};
}

}  // namespace

std::optional<PublishedStats> read_published(int pid, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<PublishedStats> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  const std::string name = detail::shm_name(pid);
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) {
    return fail(
        errno == ENOENT
            ? fmt::format("process {} publishes no stats (no {}; start it with SLUICE_STATS=1)",
                          pid, stats_segment_path(pid))
            : fmt::format("cannot open {}: {}", stats_segment_path(pid), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::size_t>(st.st_size) < sizeof(detail::SharedStats)) {
    ::close(fd);
    return fail(fmt::format("{} is too small for stats layout version {}", stats_segment_path(pid),
                            stats_layout_version));
  }
  if (std::string why = owner_mismatch(pid, st.st_uid); !why.empty()) {
    ::close(fd);
    return fail(std::move(why));
  }
  void* p = ::mmap(nullptr, sizeof(detail::SharedStats), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return fail(fmt::format("cannot map {}: {}", stats_segment_path(pid), std::strerror(errno)));
  const auto* s = static_cast<const detail::SharedStats*>(p);
  if (std::string why = header_mismatch(pid, *s); !why.empty()) {
    ::munmap(p, sizeof(detail::SharedStats));
    return fail(std::move(why));
  }
  PublishedStats r;
  r.pid = s->pid;
  r.command.assign(s->command, strnlen(s->command, sizeof(s->command)));
  r.start_unix_ns = s->start_unix_ns;
  r.alive = detail::writer_alive(pid, r.start_unix_ns);
  // A writer that died mid-update never finishes it; one stopped (SIGSTOP, a debugger) may not
  // for long: after a second, the row is read as it stands.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  r.snapshot = detail::load(*s, [&] {
    return std::chrono::steady_clock::now() > deadline || !detail::writer_alive(pid, r.start_unix_ns);
  });
  r.updated_unix_ns = s->updated_unix_ns.load(std::memory_order_relaxed);  // after the rows
  ::munmap(p, sizeof(detail::SharedStats));
  return r;
}

std::vector<PublishedStats> list_published() {
  std::vector<PublishedStats> out;
  for (const int pid : detail::segment_pids()) {
    if (auto s = read_published(pid)) out.push_back(std::move(*s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

namespace {

const char* direction_label(Direction d) { return d == Direction::read ? "read" : "write"; }

// The per-path counters: one series per process, path and direction.
void add_path_counters(std::string& out, const std::vector<PublishedStats>& stats) {
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
  for (const Metric& m : metrics) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", m.name, m.help, m.name, m.type);
    for (const auto& s : stats) {
      for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
        for (auto d : {Direction::read, Direction::write}) {
          const double v = static_cast<double>(s.snapshot.at(p, d).*m.field) * m.scale;
          out += fmt::format("{}{{pid=\"{}\",path=\"{}\",direction=\"{}\"}} {}\n", m.name, s.pid,
                             to_string(p), direction_label(d), v);
        }
      }
    }
  }
}

// Counters kept per key (device, file system): sluice_WHAT_bytes_total{LABEL="key",...}.
void add_keyed_counters(std::string& out, const std::vector<PublishedStats>& stats, const char* what,
                        const char* label, std::vector<KeyedCounters> StatsSnapshot::*list) {
  struct KeyedMetric {
    const char* name;
    const char* help;
    std::uint64_t PathCounters::*field;
  };
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
                             label, detail::label_value(k.key), direction_label(d),
                             k.dirs[static_cast<std::size_t>(d)].*m.field);
        }
      }
    }
  }
}

void add_fallbacks(std::string& out, const std::vector<PublishedStats>& stats) {
  out +=
      "# HELP sluice_fallbacks_total GPU transfers that could not take the direct path, by reason.\n"
      "# TYPE sluice_fallbacks_total counter\n";
  for (const auto& s : stats) {
    for (std::size_t f = 0; f < fallback_count; ++f) {
      out += fmt::format("sluice_fallbacks_total{{pid=\"{}\",reason=\"{}\"}} {}\n", s.pid,
                         to_string(static_cast<Fallback>(f)), s.snapshot.fallbacks[f]);
    }
  }
}

// A summary per path and direction that saw a transfer: quantiles, sum and count.
void add_latency_summaries(std::string& out, const std::vector<PublishedStats>& stats) {
  out +=
      "# HELP sluice_transfer_latency_seconds Wall time per transfer.\n"
      "# TYPE sluice_transfer_latency_seconds summary\n";
  for (const auto& s : stats) {
    for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
      for (auto d : {Direction::read, Direction::write}) {
        const PathCounters& c = s.snapshot.at(p, d);
        if (c.ops == 0) continue;
        const std::string labels = fmt::format("pid=\"{}\",path=\"{}\",direction=\"{}\"", s.pid,
                                               to_string(p), direction_label(d));
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
}

void add_process_gauges(std::string& out, const std::vector<PublishedStats>& stats) {
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
}

}  // namespace

std::string to_prometheus(const std::vector<PublishedStats>& stats) {
  std::string out;
  add_path_counters(out, stats);
  add_keyed_counters(out, stats, "device", "device", &StatsSnapshot::devices);
  add_keyed_counters(out, stats, "filesystem", "fs", &StatsSnapshot::filesystems);
  add_fallbacks(out, stats);
  add_latency_summaries(out, stats);
  add_process_gauges(out, stats);
  return out;
}

}  // namespace sluice
