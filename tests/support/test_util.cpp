#include "test_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <linux/magic.h>

#include "io/psync_engine.hpp"
#include "io/uring_engine.hpp"

namespace sluice::test {
namespace {

[[noreturn]] void fail_errno(std::string_view what, const std::string& path) {
  throw std::runtime_error(fmt::format("{} '{}': {}", what, path, std::strerror(errno)));
}

}  // namespace

ScopedFd::~ScopedFd() {
  if (fd >= 0) ::close(fd);
}

TempDir::TempDir(const std::string& parent, std::string_view prefix) {
  std::string templ = fmt::format("{}/{}XXXXXX", parent, prefix);
  if (::mkdtemp(templ.data()) == nullptr) fail_errno("mkdtemp", templ);
  path_ = std::move(templ);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(std::string_view name) const { return fmt::format("{}/{}", path_, name); }

std::string_view to_string(Folder f) noexcept { return f == Folder::disk ? "disk" : "tmpfs"; }

std::optional<std::string> folder_root(Folder f, std::string* why) {
  const char* env = std::getenv(f == Folder::disk ? "SLUICE_TEST_DISK_DIR" : "SLUICE_TEST_TMPFS_DIR");
  std::string root = env != nullptr && *env != '\0' ? env : (f == Folder::disk ? "/var/tmp" : "/dev/shm");
  struct statfs sfs {};
  if (::statfs(root.c_str(), &sfs) != 0 || ::access(root.c_str(), W_OK) != 0) {
    if (why != nullptr) *why = fmt::format("{} is not a writable folder here", root);
    return std::nullopt;
  }
  const bool memory = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
  if (f == Folder::tmpfs && !memory) {
    if (why != nullptr) *why = fmt::format("{} is not tmpfs on this machine", root);
    return std::nullopt;
  }
  if (f == Folder::disk && memory) {
    if (why != nullptr) *why = fmt::format("{} is memory-backed on this machine", root);
    return std::nullopt;
  }
  return root;
}

GuardedBuffer::GuardedBuffer(std::size_t size, std::size_t shift) : size_(size) {
  total_ = guard + shift + size + guard;
  total_ = (total_ + 4095) / 4096 * 4096;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, total_) != 0) throw std::bad_alloc();
  base_ = static_cast<std::byte*>(p);
  std::memset(base_, static_cast<int>(pattern), total_);
  data_ = base_ + guard + shift;
}

GuardedBuffer::~GuardedBuffer() { std::free(base_); }

void GuardedBuffer::fill(std::byte b) noexcept { std::memset(data_, static_cast<int>(b), size_); }

::testing::AssertionResult GuardedBuffer::guards_intact() const {
  for (std::byte* p = base_; p < data_; ++p) {
    if (*p != pattern) {
      return ::testing::AssertionFailure()
             << "byte " << (data_ - p) << " before the buffer was overwritten";
    }
  }
  for (std::byte* p = data_ + size_; p < base_ + total_; ++p) {
    if (*p != pattern) {
      return ::testing::AssertionFailure()
             << "byte " << (p - (data_ + size_)) << " after the buffer was overwritten";
    }
  }
  return ::testing::AssertionSuccess();
}

std::uint64_t test_seed(std::uint64_t fallback) {
  if (const char* s = std::getenv("SLUICE_TEST_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  return fallback;
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  if (i < n) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, n - i);
  }
  return out;
}

void write_file(const std::string& path, std::span<const std::byte> data) {
  ScopedFd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail_errno("open", path);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(f.fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path);
    }
    done += static_cast<std::size_t>(n);
  }
}

void pwrite_file(const std::string& path, std::span<const std::byte> data, std::uint64_t offset) {
  ScopedFd f{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail_errno("open", path);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(f.fd, data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("pwrite", path);
    }
    done += static_cast<std::size_t>(n);
  }
}

std::vector<std::byte> pread_file(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail_errno("open", path);
  std::vector<std::byte> out(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(f.fd, out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("pread", path);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

std::vector<std::byte> read_whole(const std::string& path) { return pread_file(path, 0, file_size(path)); }

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail_errno("stat", path);
  return static_cast<std::uint64_t>(st.st_size);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) return line;
  }
  return {};
}

::testing::AssertionResult same_bytes(std::span<const std::byte> got, std::span<const std::byte> want) {
  const std::size_t n = std::min(got.size(), want.size());
  if (n > 0 && std::memcmp(got.data(), want.data(), n) != 0) {
    std::size_t i = 0;
    while (got[i] == want[i]) ++i;
    std::size_t run = i;
    while (run < n && got[run] != want[run]) ++run;
    return ::testing::AssertionFailure()
           << "bytes differ from offset " << i << " (first " << (run - i)
           << " differing bytes in a row): got 0x" << std::hex
           << std::to_integer<int>(got[i]) << ", want 0x" << std::to_integer<int>(want[i])
           << std::dec << " (lengths " << got.size() << " and " << want.size() << ")";
  }
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "lengths differ: got " << got.size() << " bytes, want " << want.size();
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<const Config> make_config(std::string_view engine, const Shape& s) {
  Config cfg;
  cfg.set("engine", engine);
  cfg.set("io_size", std::to_string(s.io_size));
  cfg.set("threads", std::to_string(s.threads));
  cfg.set("queue_depth", std::to_string(s.queue_depth));
  cfg.set("direct_io", s.direct_io ? "true" : "false");
  cfg.set("cache_policy", s.cache_policy);
  return std::make_shared<const Config>(std::move(cfg));
}

TransferOptions options_for(std::shared_ptr<const Config> cfg) {
  TransferOptions o;
  o.config = std::move(cfg);
  return o;
}

bool engine_usable(std::string_view engine, std::string* why) {
  if (engine != "uring") return true;
  return uring_available(why);
}

std::optional<DirectFile> direct_file(std::string_view name, std::size_t size, std::uint64_t seed, std::string* why) {
  if (!engine_usable("uring", why)) return std::nullopt;
  const auto root = folder_root(Folder::disk, why);
  if (!root) return std::nullopt;
  DirectFile f;
  f.dir = std::make_unique<TempDir>(*root);
  f.path = f.dir->file(name);
  f.data = random_bytes(size, test_seed(seed));
  write_file(f.path, f.data);
  f.file = File::open(f.path, OpenMode::read_write);
  if (!f.file.has_direct()) {
    *why = "no O_DIRECT here: " + f.file.direct_reason();
    return std::nullopt;
  }
  return f;
}

bool engine_runs_here(std::string_view engine) {
  std::string why;
  if (engine_usable(engine, &why)) return true;
  skip_part(fmt::format("the {} passes: io_uring unavailable: {}", engine, why));
  return false;
}

std::unique_ptr<IoEngine> make_inner_engine(EngineKind kind, unsigned depth) {
  if (kind == EngineKind::uring) return std::make_unique<UringEngine>(depth);
  return std::make_unique<PsyncEngine>(depth);
}

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* v = std::getenv(name_.c_str()); v != nullptr) old_ = v;
  if (value) {
    ::setenv(name_.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    ::setenv(name_.c_str(), old_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

bool strict_mode() {
  const char* v = std::getenv("SLUICE_TEST_STRICT");
  return v != nullptr && std::string_view(v) == "1";
}

std::string strict_failure(std::string_view what) {
  return fmt::format("{} (SLUICE_TEST_STRICT=1: what make deps installs and CI provides must be "
                     "here, so this is a failure, not a skip)",
                     what);
}

void skip_part(std::string_view what) {
  if (strict_mode()) {
    ADD_FAILURE() << strict_failure(what);
    return;
  }
  std::cout << "SLUICE_PART_SKIPPED: " << what << std::endl;
}

bool have_program(std::string_view cmd) {
  return shell(fmt::format("PATH=\"$PATH:/sbin:/usr/sbin\" command -v {} >/dev/null 2>&1",
                           shell_quote(cmd))) == 0;
}

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

CliRun run_captured(const std::string& program, const std::string& args, const std::string& scratch_dir,
                    const std::string& prefix, const std::string& stdin_path) {
  const std::string out = scratch_dir + "/stdout";
  const std::string err = scratch_dir + "/stderr";
  CliRun r;
  r.rc = shell(fmt::format("{} {} {} <{} >{} 2>{}", prefix, shell_quote(program), args, shell_quote(stdin_path),
                           shell_quote(out), shell_quote(err)));
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

CleanSluiceEnv::CleanSluiceEnv() {
  env_.push_back(std::make_unique<ScopedEnv>("SLUICE_CONFIG", std::nullopt));
  for (const auto& e : Config().entries()) env_.push_back(std::make_unique<ScopedEnv>(e.env, std::nullopt));
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace sluice::test
