#include "cli_util.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (!parse_size(value)) return fmt::format("'{}' is not a size (try 4096, 4K, 1M, 2G)", value);
        return {};
      },
      "SIZE");
}

std::uint64_t to_size(const std::string& text, const char* option) {
  auto v = parse_size(text);
  if (!v) throw UsageError(fmt::format("{}: '{}' is not a size (try 4096, 4K, 1M, 2G)", option, text));
  return *v;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

namespace {
double gib_per_s(const TransferResult& r) {
  return r.seconds > 0 ? static_cast<double>(r.bytes) / static_cast<double>(GiB) / r.seconds : 0.0;
}
}  // namespace

std::string summary_line(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu) {
  return fmt::format("{} {} {} '{}' in {:.3f} s ({:.2f} GiB/s, {:.2f} CPU s)\npath: {} ({})",
                     op == "read" ? "read" : "wrote", format_size(r.bytes),
                     op == "read" ? "from" : "to", file, r.seconds, gib_per_s(r), cpu,
                     to_string(r.path), r.reason);
}

std::string summary_json(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu) {
  nlohmann::json j = {{"op", op},           {"file", file},       {"path", to_string(r.path)},
                      {"reason", r.reason}, {"bytes", r.bytes},   {"seconds", r.seconds},
                      {"gib_per_s", gib_per_s(r)}, {"cpu_seconds", cpu}, {"ios", r.ios}};
  return j.dump();
}

Path host_path_option(const std::string& text) {
  if (text == "auto" || text == "host") return Path::host;
  if (parse_path(text)) {
    throw UsageError(fmt::format("--path {}: this path moves data to GPU memory and needs a device; "
                                 "this build has only the host path (auto, host)", text));
  }
  throw UsageError(fmt::format("--path: unknown path '{}' (expected auto, host, bounce, posix or direct)", text));
}

void write_all(int fd, const void* buf, std::size_t size, const std::string& what) {
  const auto* p = static_cast<const char*>(buf);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error(errno, {.op = "write", .path = what}, "cannot write output");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace sluice::cli
