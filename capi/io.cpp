// cuFileRead / cuFileWrite, and the transfer the batch and stream APIs share with them.
#include "io.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include "exports.hpp"
#include "log.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/internal/cufile_errors.hpp"
#include "sluice/transfer.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

// An address inside this library, for dladdr.
void anchor() {}

LoaderTarget find_loader_target() {
  const char* env = std::getenv("SLUICE_LIBCUFILE");
  const std::string name = env != nullptr && *env != '\0' ? env : "libcufile.so.0";
  // The same lookup the loader makes (it opens with RTLD_NOW | RTLD_LOCAL); a library that is
  // not this one stays loaded, since the loader is about to open it anyway.
  void* lib = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return {};  // nothing to load: the loader reports why itself
  void* theirs = dlsym(lib, "cuFileDriverOpen");
  Dl_info a{};
  Dl_info b{};
  const bool self = theirs != nullptr && dladdr(theirs, &a) != 0 &&
                    dladdr(reinterpret_cast<void*>(&anchor), &b) != 0 && a.dli_fbase == b.dli_fbase;
  if (!self) return {};
  dlclose(lib);
  return {true, fmt::format("{}{} is libsluice_cufile itself ({}), not NVIDIA's cuFile",
                            env != nullptr && *env != '\0' ? "SLUICE_LIBCUFILE=" : "", name,
                            b.dli_fname != nullptr ? b.dli_fname : "?")};
}

std::uint64_t micros_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

IoOutcome cufile_error(CUfileOpError e) {
  return {-static_cast<ssize_t>(e), 0};
}
IoOutcome os_error(int err_no) {
  return {-1, err_no};
}

// The refusal of a request whose buffer, offsets or size cannot work, or that runs past the
// buffer's registered length; nullopt when they are usable.
std::optional<IoOutcome> refuse_range(State& s, const IoRequest& r, std::string_view api) {
  const auto size = static_cast<std::uint64_t>(r.size);
  const auto base = reinterpret_cast<std::uintptr_t>(r.base);
  if (r.base == nullptr || r.file_offset < 0 || r.buf_offset < 0 || r.size > SSIZE_MAX ||
      static_cast<std::uint64_t>(r.file_offset) > static_cast<std::uint64_t>(INT64_MAX) - size ||
      static_cast<std::uint64_t>(r.buf_offset) > UINTPTR_MAX - base ||
      size > UINTPTR_MAX - base - static_cast<std::uint64_t>(r.buf_offset)) {
    log(LogLevel::info,
        "{}: invalid arguments (buffer {}, size {}, file offset {}, buffer offset {})", api, r.base,
        r.size, r.file_offset, r.buf_offset);
    return cufile_error(CU_FILE_INVALID_VALUE);
  }
  if (const std::size_t len = s.registered_length(r.base);
      len != 0 && (static_cast<std::uint64_t>(r.buf_offset) > len ||
                   size > len - static_cast<std::uint64_t>(r.buf_offset))) {
    log(LogLevel::info, "{}: {} bytes at buffer offset {} run past the {} registered bytes at {}",
        api, r.size, r.buf_offset, len, r.base);
    return cufile_error(CU_FILE_INVALID_MAPPING_RANGE);
  }
  return std::nullopt;
}

// EBADF when the handle's descriptor no longer names its file or was not opened for the
// transfer's direction. Sluice reads through its own descriptors; the caller's must still be
// open on the same file, as it would have to be for cuFile.
std::optional<IoOutcome> refuse_descriptor(const Handle& h, const IoRequest& r, std::string_view api) {
  struct stat st {};
  if (::fstat(h.fd, &st) != 0 || st.st_dev != h.dev || st.st_ino != h.ino) {
    log(LogLevel::info, "{}: fd {} of handle {} is closed or no longer {}", api, h.fd, h.id, h.name);
    return os_error(EBADF);
  }
  if (r.write ? !h.file.writable() : !h.file.readable()) return os_error(EBADF);
  return std::nullopt;
}

// Device memory with direct allowed, where libcufile would be this library: bounce (with `note`
// saying why), or IO_NOT_SUPPORTED when the path must be direct.
std::optional<IoOutcome> avoid_self_direct(MemoryKind kind, TransferOptions& opt, std::string& note,
                                           std::string_view api) {
  if (kind != MemoryKind::device) return std::nullopt;
  const PathSetting want = config()->path;
  if (want != PathSetting::automatic && want != PathSetting::direct) return std::nullopt;
  const LoaderTarget& t = loader_target();
  if (!t.is_self) return std::nullopt;
  if (want == PathSetting::direct) {
    log(LogLevel::info, "{}: path direct requested but {}", api, t.reason);
    return cufile_error(CU_FILE_IO_NOT_SUPPORTED);
  }
  opt.path = Path::bounce;
  note = "auto: direct unavailable: " + t.reason + "; ";
  return std::nullopt;
}

IoOutcome run(const IoRequest& r, std::string_view api) {
  State& s = State::get();
  if (const CUfileError_t st = s.ensure_open(); st.err != CU_FILE_SUCCESS)
    return cufile_error(st.err);
  const std::shared_ptr<Handle> h = s.find_handle(r.fh);
  if (!h) {
    log(LogLevel::info, "{}: handle {} is not registered", api, r.fh);
    return cufile_error(CU_FILE_HANDLE_NOT_REGISTERED);
  }
  if (auto refused = refuse_range(s, r, api)) return *refused;
  if (r.size == 0) return {0, 0};
  const std::shared_ptr<Device> dev = s.device();
  if (!dev) return cufile_error(CU_FILE_DRIVER_CLOSING);
  auto* buf = const_cast<std::byte*>(static_cast<const std::byte*>(r.base)) + r.buf_offset;
  if (h->fs_ops != nullptr) return run_user_fs(*h, r, buf, dev->pointer_kind(buf), *dev, api);
  if (auto refused = refuse_descriptor(*h, r, api)) return *refused;

  TransferOptions opt;
  opt.device = dev;
  std::string note;
  const MemoryKind kind = dev->pointer_kind(buf);
  // cuFile's compat settings (path direct or bounce) are about device memory: host memory takes
  // the host path whatever they say (libsluice refuses a GPU path for host memory as misuse).
  if (kind != MemoryKind::device) opt.path = Path::host;
  if (auto refused = avoid_self_direct(kind, opt, note, api)) return *refused;
  const bool unaligned = reinterpret_cast<std::uintptr_t>(buf) % 4096 != 0 ||
                         r.file_offset % 4096 != 0 || r.size % 4096 != 0;
  const auto size = static_cast<std::uint64_t>(r.size);

  const auto t0 = std::chrono::steady_clock::now();
  IoOutcome out;
  try {
    const TransferResult res =
        r.write ? sluice::write(h->file, buf, size, static_cast<std::uint64_t>(r.file_offset), opt)
                : sluice::read(h->file, buf, size, static_cast<std::uint64_t>(r.file_offset), opt);
    const std::uint64_t us = micros_since(t0);
    if (r.counted) count_transfer(r.write, true, res.bytes, us, res.path, unaligned);
    log(LogLevel::info,
        "{}(handle {}, fd {} {}, {} bytes at {}, {} memory {}+{}) = {} via {} ({}{}) in {} us", api,
        h->id, h->fd, h->name, r.size, r.file_offset, to_string(kind), r.base, r.buf_offset,
        res.bytes, to_string(res.path), note, res.reason, us);
    return {static_cast<ssize_t>(res.bytes), 0};
  } catch (const Error& e) {
    out.ret = to_cufile_result(e, &out.err_no);
    log(LogLevel::info, "{}(handle {}, fd {} {}, {} bytes at {}) failed: {} ({})", api, h->id,
        h->fd, h->name, r.size, r.file_offset,
        out.ret == -1 ? fmt::format("-1, errno {}", out.err_no)
                      : code_name(static_cast<int>(out.ret)),
        e.what());
    return out;
  }
}

}  // namespace

const LoaderTarget& loader_target() {
  static const LoaderTarget target = find_loader_target();
  return target;
}

IoOutcome run_io(const IoRequest& r, std::string_view api) noexcept {
  IoOutcome out;
  try {
    out = run(r, api);
  } catch (const std::bad_alloc&) {
    out = cufile_error(CU_FILE_NOMEM_ERROR);
  } catch (const std::exception& e) {
    log(LogLevel::error, "{}: internal error: {}", api, e.what());
    out = cufile_error(CU_FILE_INTERNAL_ERROR);
  } catch (...) {
    log(LogLevel::error, "{}: internal error", api);
    out = cufile_error(CU_FILE_INTERNAL_ERROR);
  }
  // Successes are counted with their path inside run(); every failure, whatever refused it, here.
  if (out.ret < 0 && r.counted) count_transfer(r.write, false, 0, 0, Path::host, false);
  return out;
}

}  // namespace sluice::capi

using sluice::capi::IoOutcome;
using sluice::capi::IoRequest;
using sluice::capi::run_io;

CUFILE_API ssize_t cuFileRead(CUfileHandle_t fh, void* bufPtr_base, size_t size, off_t file_offset,
                              off_t bufPtr_offset) {
  const IoOutcome o =
      run_io({false, fh, bufPtr_base, size, file_offset, bufPtr_offset}, "cuFileRead");
  if (o.ret == -1) errno = o.err_no;
  return o.ret;
}

CUFILE_API ssize_t cuFileWrite(CUfileHandle_t fh, const void* bufPtr_base, size_t size,
                               off_t file_offset, off_t bufPtr_offset) {
  const IoOutcome o =
      run_io({true, fh, bufPtr_base, size, file_offset, bufPtr_offset}, "cuFileWrite");
  if (o.ret == -1) errno = o.err_no;
  return o.ret;
}
