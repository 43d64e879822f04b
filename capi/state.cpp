#include "state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <new>
#include <string>
#include <vector>

#include "batch.hpp"
#include "cufile_config.hpp"
#include "log.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"

namespace sluice::capi {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Open-time flags cuFile refuses (reference 1.3). O_NOCTTY is not kept by the kernel after
// open(2), so it cannot be seen here; O_PATH descriptors cannot do I/O at all.
constexpr int kRefusedFlags = O_APPEND | O_NONBLOCK | O_NOATIME | O_NOFOLLOW | O_DIRECTORY |
                              O_PATH | (O_TMPFILE & ~O_DIRECTORY);

std::string fd_target(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::vector<char> buf(PATH_MAX);
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<std::size_t>(n)) : link;
}

Params default_params() {
  Params p;
  // cuFile's defaults (cufile.json, reference 1b) for the values Sluice keeps but does not use.
  p.size_t_values[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = 8192;
  p.size_t_values[CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM] = 4;
  p.size_t_values[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB] = 33554432;
  p.size_t_values[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 128;
  p.size_t_values[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = 4;
  p.size_t_values[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS] = 5;
  p.bool_values[CUFILE_PARAM_EXECUTION_PARALLEL_IO] = true;
  p.bool_values[CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY] = true;
  p.strings[CUFILE_PARAM_LOG_DIR] = "";
  p.strings[CUFILE_PARAM_ENV_LOGFILE_PATH] = "";
  p.posix_slabs.len = 3;
  p.posix_slabs.sizes_kb = {4, 1024, 16384};
  p.posix_slabs.counts = {128, 64, 64};
  return p;
}

}  // namespace

std::string code_name(int code) {
  return fmt::format("{} ({})",
                     cufileop_status_error(static_cast<CUfileOpError>(code < 0 ? -code : code)),
                     code < 0 ? -code : code);
}

State::State() : params_(default_params()) {
  counters_.started_ns = now_ns();
}

State& State::get() {
  // Leaked: application threads and static destructors may still call in during exit.
  static State* const s = new State();
  // Every entry point comes through here first: cufile.json and CUFILE_* take effect before the
  // process's first call does anything (outside the constructor: applying calls back in here).
  apply_cufile_config_once();
  return *s;
}

CUfileError_t State::open() {
  std::lock_guard lock(mu_);
  if (users_ > 0) {
    ++users_;
    return kSuccess;
  }
  std::string spec;
  try {
    const DeviceSetting setting = config()->device;
    spec = to_string(setting);
    if (!device_) device_ = open_device(setting);
  } catch (const Error& e) {
    CUfileError_t st = status(e);
    // A bad device setting (SLUICE_DEVICE, the config file) is a usage error: for the driver,
    // whose properties those settings are, cuFile's name for it is DRIVER_INVALID_PROPS.
    if (e.domain() == ErrorDomain::usage) st = status(CU_FILE_DRIVER_INVALID_PROPS);
    log(LogLevel::error, "cuFileDriverOpen: {}: {}", code_name(st.err), e.what());
    return st;
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  } catch (const std::exception& e) {
    log(LogLevel::error, "cuFileDriverOpen: {}", e.what());
    return status(CU_FILE_INTERNAL_ERROR);
  }
  users_ = 1;
  log(LogLevel::info, "driver open: device {} ({}; {})", device_->info().name, spec,
      device_->selection());
  return kSuccess;
}

CUfileError_t State::ensure_open() {
  {
    std::lock_guard lock(mu_);
    if (users_ > 0) return kSuccess;
  }
  return open();
}

CUfileError_t State::close() {
  {
    std::lock_guard lock(mu_);
    if (users_ == 0) return status(CU_FILE_DRIVER_NOT_INITIALIZED);
    if (--users_ > 0) return kSuccess;
    drop_registrations_locked();
  }
  // Outside the lock: destroying a batch waits for its running entries.
  destroy_all_batches();
  log(LogLevel::info, "driver closed: handles, buffers, streams and batches released");
  return kSuccess;
}

void State::drop_registrations_locked() {
  handles_.clear();  // transfers still running hold their own reference
  handle_by_fd_.clear();
  buffers_.clear();
  streams_.clear();
  counters_.reg_bytes = 0;
}

long State::use_count() {
  std::lock_guard lock(mu_);
  return users_;
}

bool State::is_open() {
  std::lock_guard lock(mu_);
  return users_ > 0;
}

std::shared_ptr<Device> State::device() {
  std::lock_guard lock(mu_);
  return device_;
}

CUfileError_t State::register_handle(CUfileHandle_t* fh, const CUfileDescr_t* descr) {
  if (fh == nullptr || descr == nullptr) return status(CU_FILE_INVALID_VALUE);
  const int type = raw(descr->type);
  if (type == CU_FILE_HANDLE_TYPE_USERSPACE_FS) return register_user_fs(fh, descr);
  if (type == CU_FILE_HANDLE_TYPE_OPAQUE_WIN32) {
    log(LogLevel::info, "cuFileHandleRegister: Windows handles do not exist on Linux");
    return status(CU_FILE_IO_NOT_SUPPORTED);
  }
  if (type != CU_FILE_HANDLE_TYPE_OPAQUE_FD) return status(CU_FILE_INVALID_VALUE);
  const int fd = descr->handle.fd;
  const int fl = fd < 0 ? -1 : ::fcntl(fd, F_GETFL);
  if (fl == -1) {
    log(LogLevel::info, "cuFileHandleRegister: fd {} is not an open file descriptor", fd);
    return status(CU_FILE_INVALID_VALUE);
  }
  if ((fl & kRefusedFlags) != 0) {
    log(LogLevel::info,
        "cuFileHandleRegister: fd {} was opened with flags 0x{:x} (O_APPEND, O_NONBLOCK, "
        "O_NOATIME, O_NOFOLLOW, O_DIRECTORY, O_PATH and O_TMPFILE are refused)",
        fd, fl & kRefusedFlags);
    return status(CU_FILE_INVALID_FILE_OPEN_FLAG);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return status(CU_FILE_INVALID_VALUE);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    log(LogLevel::info, "cuFileHandleRegister: fd {} ({}) is not a regular file or block device",
        fd, fd_target(fd));
    return status(CU_FILE_INVALID_FILE_TYPE);
  }
  if (const CUfileError_t st_open = ensure_open(); st_open.err != CU_FILE_SUCCESS) return st_open;
  {
    std::lock_guard lock(mu_);
    if (handle_by_fd_.count(fd) != 0) return status(CU_FILE_HANDLE_ALREADY_REGISTERED);
  }

  auto h = std::make_shared<Handle>();
  h->fd = fd;
  h->dev = st.st_dev;
  h->ino = st.st_ino;
  h->name = fd_target(fd);
  const int acc = fl & O_ACCMODE;
  const OpenMode mode = acc == O_RDONLY   ? OpenMode::read
                        : acc == O_WRONLY ? OpenMode::write
                                          : OpenMode::read_write;
  try {
    // A second open file description of the same inode, on which Sluice may use O_DIRECT
    // whatever the caller's flags. /proc/self/fd reaches unlinked files too.
    h->file = File::open("/proc/self/fd/" + std::to_string(fd), mode,
                         {.create = false, .truncate = false, .direct = config()->direct_io});
  } catch (const Error& e) {
    log(LogLevel::info, "cuFileHandleRegister: fd {} ({}) cannot be reopened: {}", fd, h->name,
        e.what());
    // A file Sluice cannot open itself is one it cannot serve, unless access was refused.
    const CUfileError_t refused = status(e);
    return refused.err == CU_FILE_PERMISSION_DENIED ? refused : status(CU_FILE_IO_NOT_SUPPORTED);
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  }

  std::lock_guard lock(mu_);
  if (users_ == 0) return status(CU_FILE_DRIVER_CLOSING);  // closed by another thread meanwhile
  if (handle_by_fd_.count(fd) != 0) return status(CU_FILE_HANDLE_ALREADY_REGISTERED);
  handle_by_fd_.emplace(fd, next_handle_id_);
  *fh = add_handle_locked(h);
  log(LogLevel::info, "cuFileHandleRegister: fd {} ({}, {}) -> handle {}; {}", fd, h->name,
      h->file.fs_type(), h->id,
      h->file.has_direct() ? "O_DIRECT available" : "no O_DIRECT: " + h->file.direct_reason());
  return kSuccess;
}

CUfileHandle_t State::add_handle_locked(std::shared_ptr<Handle> h) {
  h->id = next_handle_id_++;
  const std::uint64_t id = h->id;
  handles_.emplace(id, std::move(h));
  return reinterpret_cast<CUfileHandle_t>(static_cast<std::uintptr_t>(id));
}

CUfileError_t State::register_user_fs(CUfileHandle_t* fh, const CUfileDescr_t* descr) {
  const CUfileFSOps_t* ops = descr->fs_ops;
  if (ops == nullptr || (ops->read == nullptr && ops->write == nullptr)) {
    log(LogLevel::info, "cuFileHandleRegister: a user-space file system needs fs_ops with a read "
                        "or a write operation");
    return status(CU_FILE_INVALID_VALUE);
  }
  if (const CUfileError_t st = ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  auto h = std::make_shared<Handle>();
  h->user_handle = descr->handle.handle;
  h->fs_ops = ops;
  const char* type = ops->fs_type != nullptr ? ops->fs_type(descr->handle.handle) : nullptr;
  h->name = fmt::format("user-space file system {} ({})", type != nullptr ? type : "?",
                        descr->handle.handle);
  std::lock_guard lock(mu_);
  if (users_ == 0) return status(CU_FILE_DRIVER_CLOSING);
  *fh = add_handle_locked(h);
  log(LogLevel::info, "cuFileHandleRegister: {} -> handle {}", h->name, h->id);
  return kSuccess;
}

bool State::deregister_handle(CUfileHandle_t fh) {
  const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(fh));
  std::lock_guard lock(mu_);
  const auto it = handles_.find(id);
  if (it == handles_.end()) return false;
  if (it->second->fs_ops == nullptr) handle_by_fd_.erase(it->second->fd);
  handles_.erase(it);
  return true;
}

std::shared_ptr<Handle> State::find_handle(CUfileHandle_t fh) {
  const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(fh));
  std::lock_guard lock(mu_);
  const auto it = handles_.find(id);
  return it == handles_.end() ? nullptr : it->second;
}

CUfileError_t State::register_buffer(const void* base, std::size_t length, int flags) {
  if (base == nullptr || length == 0 ||
      (flags & ~(CU_FILE_RDMA_REGISTER | CU_FILE_RDMA_RELAXED_ORDERING)) != 0 ||
      length > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(base)) {
    return status(CU_FILE_INVALID_VALUE);
  }
  if (const CUfileError_t st = ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  const std::shared_ptr<Device> dev = device();
  if (!dev) return status(CU_FILE_DRIVER_CLOSING);
  MemoryKind kind{};
  try {
    kind = dev->pointer_kind(base);
    if (kind == MemoryKind::device &&
        dev->pointer_kind(static_cast<const std::byte*>(base) + length - 1) != MemoryKind::device) {
      log(LogLevel::info, "cuFileBufRegister: {} bytes at {} run past the device allocation",
          length, base);
      return status(CU_FILE_CUDA_POINTER_RANGE_ERROR);
    }
  } catch (const Error& e) {
    log(LogLevel::info, "cuFileBufRegister: {}", e.what());
    return status(e);
  }
  std::lock_guard lock(mu_);
  if (buffers_.count(base) != 0) return status(CU_FILE_MEMORY_ALREADY_REGISTERED);
  if (kind == MemoryKind::device) {
    // cuFile pins registered device memory and caps it at max_device_pinned_mem_size_kb.
    const std::size_t cap_kb =
        params_.size_t_values[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB];
    const std::uint64_t after = counters_.reg_bytes.load() + length;
    if (after / 1024 > cap_kb) {
      log(LogLevel::info,
          "cuFileBufRegister: {} more bytes exceed max_device_pinned_mem_size_kb {}", length,
          cap_kb);
      return status(CU_FILE_GPU_MEMORY_PINNING_FAILED);
    }
    counters_.reg_bytes = after;
  }
  buffers_.emplace(base, Buffer{length, kind});
  log(LogLevel::info, "cuFileBufRegister: {} bytes of {} memory at {}", length, to_string(kind),
      base);
  return kSuccess;
}

CUfileError_t State::deregister_buffer(const void* base) {
  if (base == nullptr) return status(CU_FILE_INVALID_VALUE);
  std::lock_guard lock(mu_);
  const auto it = buffers_.find(base);
  if (it == buffers_.end()) return status(CU_FILE_MEMORY_NOT_REGISTERED);
  if (it->second.kind == MemoryKind::device) counters_.reg_bytes -= it->second.length;
  buffers_.erase(it);
  return kSuccess;
}

std::size_t State::registered_length(const void* base) {
  std::lock_guard lock(mu_);
  const auto it = buffers_.find(base);
  return it == buffers_.end() ? 0 : it->second.length;
}

CUfileError_t State::register_stream(CUstream stream, unsigned flags) {
  if (flags > 0xF) return status(CU_FILE_INVALID_VALUE);
  if (const CUfileError_t st = ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  const std::shared_ptr<Device> dev = device();
  if (!dev) return status(CU_FILE_DRIVER_CLOSING);
  if (stream != nullptr && dev->info().kind != DeviceKind::cuda) {
    log(LogLevel::info,
        "cuFileStreamRegister: stream {} cannot belong to the {} device (only the NULL stream)",
        static_cast<void*>(stream), to_string(dev->info().kind));
    return status(CU_FILE_INVALID_VALUE);
  }
  {
    std::lock_guard lock(mu_);
    if (streams_.count(stream) != 0) return status(CU_FILE_INVALID_VALUE);
  }
  try {
    dev->synchronize(stream);  // as cuFile does: the stream starts from a known point
  } catch (const Error& e) {
    log(LogLevel::info, "cuFileStreamRegister: {}", e.what());
    return status(e);
  }
  std::lock_guard lock(mu_);
  if (!streams_.emplace(stream, flags).second) return status(CU_FILE_INVALID_VALUE);
  return kSuccess;
}

CUfileError_t State::deregister_stream(CUstream stream) {
  std::lock_guard lock(mu_);
  return streams_.erase(stream) != 0 ? kSuccess : status(CU_FILE_INVALID_VALUE);
}

std::size_t State::batch_capacity() {
  std::lock_guard lock(mu_);
  return params_.size_t_values[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE];
}

void count_transfer(bool write, bool ok, std::uint64_t bytes, std::uint64_t micros, Path path,
                    bool unaligned) {
  State& s = State::get();
  if (!s.stats_running().load(std::memory_order_relaxed)) return;
  DirectionCounters& d = write ? s.counters().write : s.counters().read;
  (ok ? d.ok : d.err).fetch_add(1, std::memory_order_relaxed);
  if (!ok) return;
  d.bytes.fetch_add(bytes, std::memory_order_relaxed);
  d.lat_us.fetch_add(micros, std::memory_order_relaxed);
  if (path == Path::direct) d.direct.fetch_add(1, std::memory_order_relaxed);
  if (path == Path::bounce || path == Path::posix) d.staged.fetch_add(1, std::memory_order_relaxed);
  if (unaligned) d.unaligned.fetch_add(1, std::memory_order_relaxed);
  // Log2 buckets of KiB: [0, 4), [4, 8), [8, 16), ...
  std::size_t bucket = 0;
  for (std::uint64_t kb = bytes / 1024; kb >= 4 && bucket + 1 < d.size_hist.size(); kb >>= 1)
    ++bucket;
  d.size_hist[bucket].fetch_add(1, std::memory_order_relaxed);
}

void count_vectored(bool write, bool ok, std::uint64_t bytes, std::uint64_t micros) {
  State& s = State::get();
  if (!s.stats_running().load(std::memory_order_relaxed)) return;
  VectorCounters& v = write ? s.counters().writev : s.counters().readv;
  (ok ? v.ok : v.err).fetch_add(1, std::memory_order_relaxed);
  if (!ok) return;
  v.bytes.fetch_add(bytes, std::memory_order_relaxed);
  v.lat_us.fetch_add(micros, std::memory_order_relaxed);
}

}  // namespace sluice::capi
