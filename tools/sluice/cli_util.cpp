#include "cli_util.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {

int exit_code(const std::exception& e) noexcept {
  if (dynamic_cast<const UsageError*>(&e) != nullptr) return exit_usage;
  // The library's usage errors are the caller's input too (a bad --device, SLUICE_* value, ...).
  const auto* err = dynamic_cast<const Error*>(&e);
  return err != nullptr && err->domain() == ErrorDomain::usage ? exit_usage : exit_failure;
}

CLI::Validator setting_validator(std::string setting) {
  return CLI::Validator(
      [setting](std::string& value) -> std::string {
        try {
          Config().set(setting, value);
          return {};
        } catch (const Error& e) {
          return e.detail();
        }
      },
      "VALUE");
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (!parse_size(value)) return fmt::format("'{}' is not a size (try 4096, 4K, 1M, 2G)", value);
        return {};
      },
      "SIZE");
}

CLI::Validator duration_transformer() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          value = fmt::format("{}", parse_seconds(value, "duration"));
          return {};
        } catch (const Error& e) {
          return e.detail();
        }
      },
      "DURATION");
}

MemoryKind memory_option(const std::string& text) {
  if (auto k = parse_memory_kind(text)) return *k;
  throw UsageError(fmt::format("--memory: unknown memory '{}' (expected device, pinned or pageable; host is pageable)", text));
}

std::string memory_option_help(std::string_view note) {
  return fmt::format("where the bytes go: device | pinned | pageable (host = pageable; {})", note);
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
                      {"gib_per_s", gib_per_s(r)}, {"cpu_seconds", cpu}, {"ios", r.ios},
                      {"cached_bytes", r.cached_bytes}};
  return j.dump();
}

TransferTarget TransferTarget::from_args(const std::string& device, const std::string& path) {
  TransferTarget t;
  const std::optional<Path> p = forced_path(setting_value(&Config::path, "path", path));
  t.options.path = p;
  const bool gpu_path = p && *p != Path::host;
  if (!device.empty()) {
    t.device = open_device(device);
  } else if (gpu_path) {
    t.device = open_device(config()->device);
  }
  t.options.device = t.device;
  return t;
}

PieceBuffer::PieceBuffer(const TransferTarget& target, std::size_t size,
                         const PieceBuffer* share_mirror_of) {
  const std::size_t bytes = std::max<std::size_t>(size, 4096);
  if (target.device && !(target.options.path && *target.options.path == Path::host)) {
    target_ = DeviceBuffer(target.device, bytes);
    const PieceBuffer* other = share_mirror_of;
    if (other != nullptr && !other->target_.empty() && other->host_->size() >= bytes) {
      host_ = other->host_;
    }
  }
  if (!host_) host_ = std::make_shared<HostMapping>(bytes);
}

const std::byte* PieceBuffer::download(std::size_t n) {
  if (!target_.empty() && n > 0) target_.device()->copy_to_host(host_->get(), target_.data(), n);
  return host_->get();
}

void PieceBuffer::upload(std::size_t n) {
  if (!target_.empty() && n > 0) target_.device()->copy_to_device(target_.data(), host_->get(), n);
}

void add_target_options(CLI::App* cmd, std::string& device, std::string& path) {
  cmd->add_option("--device", device,
                  "put the bytes in GPU memory: auto (first CUDA GPU, else sim), sim, cuda:N "
                  "(default: host memory unless --path names a GPU path)");
  cmd->add_option("--path", path, "transfer path: auto | direct | bounce | posix | host")
      ->capture_default_str()
      ->check(setting_validator("path"));
}

void add_cache_policy_option(CLI::App* cmd, std::string& policy) {
  cmd->add_option("--cache-policy", policy,
                  "reads and the page cache: auto (what the cache holds through it, the rest O_DIRECT), "
                  "bypass (O_DIRECT regardless), use (buffered regardless); default: the configuration's "
                  "cache_policy (SLUICE_CACHE_POLICY, else auto)")
      ->check(setting_validator("cache_policy"));
}

void apply_cache_policy(const std::string& policy) {
  if (policy.empty()) return;
  Config cfg = *config();
  cfg.set("cache_policy", policy, ConfigSource::api);
  set_config(std::move(cfg));
}

int open_output(const std::string& out) {
  if (out == "-") return STDOUT_FILENO;
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_os_error(errno, {.op = "open", .path = out}, "cannot create output");
  return fd;
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

bool ProgressLine::due(bool force) {
  if (!enabled_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < std::chrono::milliseconds(100)) return false;
  last_ = now;
  return true;
}

void ProgressLine::show(const std::string& text) {
  std::fprintf(stderr, "\r%s   ", text.c_str());
  shown_ = true;
}

void ProgressLine::finish() {
  if (shown_) std::fputs("\r\033[K", stderr);
  shown_ = false;
}

}  // namespace sluice::cli
