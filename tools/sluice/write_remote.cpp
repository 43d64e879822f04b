// sluice write IN s3://BUCKET/KEY: IN -> host memory -> an S3 multipart upload through
// RemoteWriter (docs/remote.md, "Writing to S3"). The object appears whole when the command
// succeeds, or not at all. SIGINT and SIGTERM abort the upload (AbortMultipartUpload) before the
// command exits 128 + the signal, so an interrupted write leaves no parts behind; SIGKILL cannot
// be caught: its upload stays in progress, invisible, until the bucket's lifecycle rule ends it.
#include "write_remote.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "sluice/error.hpp"
#include "sluice/remote_writer.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

std::atomic<int> write_stop_signal{0};

extern "C" void on_write_stop_signal(int sig) {
  write_stop_signal.store(sig);
}

// One-shot: a second signal ends the process at once, as it would without the handler.
void catch_write_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_write_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// Reads what fd has (at most size bytes) once it has something: 0 at the end of the input or on
// a stop signal. While a pipe has nothing to read, the parts already appended keep going out
// (w.drive), so a slow producer does not stall the upload.
std::size_t read_available(int fd, char* buf, std::size_t size, const std::string& what,
                           RemoteWriter& w) {
  while (write_stop_signal.load() == 0) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 0) == 0) {
      if (!w.drive(50)) (void)::poll(&p, 1, 100);  // nothing in flight: just wait for input
      continue;
    }
    const ssize_t n = ::read(fd, buf, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error(errno, {.op = "read", .path = what}, "cannot read input");
    }
    return static_cast<std::size_t>(n);
  }
  return 0;
}

std::string write_summary(const RemoteWrite& a, const RemoteWriter& w, const TransferResult& r,
                          double cpu) {
  const double gib_s = r.seconds > 0 ? static_cast<double>(r.bytes) / GiB / r.seconds : 0.0;
  if (!a.json) {
    return fmt::format(
        "wrote {} to '{}' in {:.3f} s ({:.2f} GiB/s, {:.2f} CPU s)\npath: remote ({})",
        format_size(r.bytes), w.url(), r.seconds, gib_s, cpu, w.reason());
  }
  const RemoteStats& st = w.stats();
  nlohmann::json j = {{"op", "write"},
                      {"file", w.url()},
                      {"path", "remote"},
                      {"reason", w.reason()},
                      {"bytes", r.bytes},
                      {"seconds", r.seconds},
                      {"gib_per_s", gib_s},
                      {"cpu_seconds", cpu},
                      {"ios", st.requests},
                      {"endpoint", w.endpoint()},
                      {"connections", st.connections},
                      {"part_size", w.part_size()},
                      {"retries", st.retries}};
  return j.dump();
}

}  // namespace

int run_remote_write(const RemoteWrite& a) {
  RemoteOptions opt = RemoteOptions::from_environment();
  if (!a.part_size.empty()) opt.part_size = to_size(a.part_size, "--part-size");
  if (a.in_flight > 0) opt.in_flight = a.in_flight;
  const bool from_stdin = a.in == "-";
  const std::string in_name = from_stdin ? std::string("stdin") : a.in;
  int in_fd = STDIN_FILENO;
  std::optional<std::uint64_t> size;
  if (!from_stdin) {
    in_fd = ::open(a.in.c_str(), O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) throw_os_error(errno, {.op = "open", .path = a.in}, "cannot open input");
    struct stat st {};
    if (::fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode))
      size = static_cast<std::uint64_t>(st.st_size);
  }
  RemoteWriter w(a.url, opt, size);
  catch_write_stop_signals();
  w.set_cancel([] { return write_stop_signal.load() != 0; });
  ProgressLine progress(!a.json && isatty(STDERR_FILENO) != 0 && size.value_or(0) >= 64 * MiB);
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> buf(static_cast<std::size_t>(w.part_size()));
  try {
    for (;;) {
      const std::size_t n = read_available(in_fd, buf.data(), buf.size(), in_name, w);
      if (n == 0) break;
      w.append(buf.data(), n);
      if (progress.due()) {
        progress.show(fmt::format("write: {} of {} uploaded", format_size(w.bytes_uploaded()),
                                  size ? format_size(*size) : std::string("?")));
      }
    }
    if (write_stop_signal.load() == 0) w.commit();
  } catch (const Error&) {
    if (write_stop_signal.load() == 0) throw;
  }
  progress.finish();
  if (!from_stdin) ::close(in_fd);
  if (const int sig = write_stop_signal.load(); sig != 0) {
    w.abort();
    std::fprintf(stderr, "sluice write: stopped by signal %d: the upload to '%s' was aborted%s%s\n",
                 sig, w.url().c_str(), w.abort_error().empty() ? "" : " (the server said: ",
                 w.abort_error().empty() ? "" : (w.abort_error() + ")").c_str());
    return 128 + sig;
  }
  TransferResult total;
  total.bytes = w.bytes_appended();
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::puts(write_summary(a, w, total, cpu_seconds() - cpu0).c_str());
  return 0;
}

}  // namespace sluice::cli
