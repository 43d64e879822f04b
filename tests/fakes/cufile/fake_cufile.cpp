// A fake libcufile.so.0 for tests: cuFile's entry points, argument checks and return
// conventions, with pread/pwrite for the data path. "Device memory" in these tests is host
// memory (the sim device's heap, or the fake libcuda's), so the bytes go straight to and from
// bufPtr_base + bufPtr_offset. Counters and failure injection: see fake_cufile.h.
//
// Independent of libsluice on purpose: it stands in for NVIDIA's library, and a test of the
// loader must not pass because both sides share code.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

// The library is built with hidden visibility; what these headers declare is its interface.
#pragma GCC visibility push(default)
#include "cufile.h"
#include "fake_cufile.h"
#undef cuFileDriverClose  // exported too: the unversioned symbol of libraries before _v2
extern "C" CUfileError_t cuFileDriverClose(void);
#pragma GCC visibility pop

namespace {

constexpr long kTmpfsMagic = 0x01021994;
constexpr std::uintptr_t kDirectAlign = 4096;

struct HandleRec {
  int fd = -1;
  bool direct = false;  // fd has O_DIRECT: unaligned requests use `buffered`
  int buffered = -1;    // the same file without O_DIRECT, opened on first need
};

struct State {
  std::mutex mu;
  long use_count = 0;
  std::unordered_map<HandleRec*, std::unique_ptr<HandleRec>> handles;
  std::map<std::uintptr_t, std::size_t> buffers;  // base -> length
  std::map<std::string, std::uint64_t, std::less<>> calls;
  std::atomic<std::uint64_t> reads{0}, bytes_read{0}, writes{0}, bytes_written{0};

  ~State() {
    for (auto& [p, h] : handles)
      if (h->buffered >= 0) ::close(h->buffered);
  }
};

State& st() {
  // A plain static: destroyed at dlclose, so reloading the fake starts from scratch.
  static State s;
  return s;
}

CUfileError_t status(CUfileOpError e) {
  return {e, static_cast<CUresult>(e == CU_FILE_CUDA_DRIVER_ERROR ? 999 : 0)};
}

struct Injection {
  bool hit = false;
  int code = 0;      // CUfileOpError, or 0 with err_no / short_io
  int err_no = 0;
  bool short_io = false;
};

// Counts this call of `fn` and decides from FAKE_CUFILE_FAIL whether it fails.
Injection next_call(std::string_view fn) {
  std::uint64_t index = 0;
  {
    State& s = st();
    const std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.calls.find(fn);
    if (it == s.calls.end()) it = s.calls.emplace(std::string(fn), 0).first;
    index = it->second++;
  }
  Injection inj;
  const char* env = std::getenv("FAKE_CUFILE_FAIL");
  if (env == nullptr) return inj;
  std::string_view rest(env);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string entry(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    char name[64] = {}, what[32] = {};
    unsigned long long skip = 0, times = ~0ULL;
    if (std::sscanf(entry.c_str(), "%63[^:]:%31[^:]:%llu:%llu", name, what, &skip, &times) < 2) {
      continue;
    }
    std::string_view n(name);
    if (n == "cuFileDriverClose") n = "cuFileDriverClose_v2";
    if (n != fn || index < skip || index - skip >= times) continue;
    inj.hit = true;
    if (std::strncmp(what, "errno", 5) == 0) {
      inj.err_no = std::atoi(what + 5);
    } else if (std::strcmp(what, "short") == 0) {
      inj.short_io = true;
    } else {
      inj.code = std::atoi(what);
    }
    return inj;
  }
  return inj;
}

// The code a control call returns for an injected failure.
CUfileOpError control_failure(const Injection& inj) {
  if (inj.code > CUFILEOP_BASE_ERR) return static_cast<CUfileOpError>(inj.code);
  return CU_FILE_INTERNAL_ERROR;
}

CUfileOpError open_locked(State& s, const Injection& inj) {
  if (inj.hit) return control_failure(inj);
  ++s.use_count;
  return CU_FILE_SUCCESS;
}

// cuFileDriverOpen is optional: the first handle, buffer or IO call opens the driver.
CUfileOpError ensure_open() {
  State& s = st();
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    if (s.use_count > 0) return CU_FILE_SUCCESS;
  }
  const Injection inj = next_call("cuFileDriverOpen");
  const std::lock_guard<std::mutex> lock(s.mu);
  if (s.use_count > 0) return CU_FILE_SUCCESS;
  return open_locked(s, inj);
}

int buffered_twin(HandleRec& h) {
  if (h.buffered < 0) {
    // /proc/self/fd reopens the same file (even an unlinked one) without O_DIRECT.
    const int fl = ::fcntl(h.fd, F_GETFL);
    const std::string path = "/proc/self/fd/" + std::to_string(h.fd);
    h.buffered = ::open(path.c_str(), (fl & O_ACCMODE) | O_CLOEXEC);
  }
  return h.buffered;
}

ssize_t do_io(bool is_write, CUfileHandle_t fh, const void* base, std::size_t size,
              off_t file_offset, off_t buf_offset) {
  const Injection inj = next_call(is_write ? "cuFileWrite" : "cuFileRead");
  if (const CUfileOpError e = ensure_open(); e != CU_FILE_SUCCESS) return -static_cast<ssize_t>(e);
  if (fh == nullptr || base == nullptr || file_offset < 0 || buf_offset < 0)
    return -static_cast<ssize_t>(CU_FILE_INVALID_VALUE);

  State& s = st();
  int fd = -1;
  char* p = static_cast<char*>(const_cast<void*>(base)) + buf_offset;
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.handles.find(static_cast<HandleRec*>(fh));
    if (it == s.handles.end()) return -static_cast<ssize_t>(CU_FILE_HANDLE_NOT_REGISTERED);
    // A registered buffer must contain the whole range.
    auto b = s.buffers.find(reinterpret_cast<std::uintptr_t>(base));
    if (b != s.buffers.end() && static_cast<std::size_t>(buf_offset) + size > b->second)
      return -static_cast<ssize_t>(CU_FILE_INVALID_MAPPING_RANGE);
    HandleRec& h = *it->second;
    fd = h.fd;
    // cuFile accepts any alignment; O_DIRECT does not, so unaligned requests go buffered.
    const auto misaligned = reinterpret_cast<std::uintptr_t>(p) |
                            static_cast<std::uintptr_t>(file_offset) | size;
    if (h.direct && (misaligned % kDirectAlign) != 0) fd = buffered_twin(h);
  }
  if (inj.hit && !inj.short_io) {
    if (inj.err_no != 0) {
      errno = inj.err_no;
      return -1;
    }
    return -static_cast<ssize_t>(control_failure(inj));
  }
  if (fd < 0) return -1;  // errno from the reopen
  const std::size_t want = inj.short_io && size > 1 ? size / 2 : size;

  std::size_t done = 0;
  while (done < want) {
    const off_t at = file_offset + static_cast<off_t>(done);
    const ssize_t r = is_write ? ::pwrite(fd, p + done, want - done, at)
                               : ::pread(fd, p + done, want - done, at);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      if (done > 0) break;  // report the bytes moved; the caller sees the error next call
      return -1;
    }
    if (r == 0) break;  // end of file
    done += static_cast<std::size_t>(r);
  }
  if (is_write) {
    s.writes.fetch_add(1);
    s.bytes_written.fetch_add(done);
  } else {
    s.reads.fetch_add(1);
    s.bytes_read.fetch_add(done);
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

extern "C" {

CUfileError_t cuFileDriverOpen(void) {
  const Injection inj = next_call("cuFileDriverOpen");
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  return status(open_locked(s, inj));
}

CUfileError_t cuFileDriverClose_v2(void) {
  const Injection inj = next_call("cuFileDriverClose_v2");
  if (inj.hit) return status(control_failure(inj));
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  if (s.use_count == 0) return status(CU_FILE_DRIVER_NOT_INITIALIZED);
  if (--s.use_count == 0) {
    // Closing the driver drops every registration, as cuFile's does.
    for (auto& [p, h] : s.handles)
      if (h->buffered >= 0) ::close(h->buffered);
    s.handles.clear();
    s.buffers.clear();
  }
  return status(CU_FILE_SUCCESS);
}

CUfileError_t cuFileDriverClose(void) { return cuFileDriverClose_v2(); }

long cuFileUseCount(void) {
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  return s.use_count;
}

CUfileError_t cuFileGetVersion(int* version) {
  const Injection inj = next_call("cuFileGetVersion");
  if (inj.hit) return status(control_failure(inj));
  if (version == nullptr) return status(CU_FILE_INVALID_VALUE);
  const char* env = std::getenv("FAKE_CUFILE_VERSION");
  *version = env != nullptr ? std::atoi(env) : 1140;
  return status(CU_FILE_SUCCESS);
}

CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t* props) {
  const Injection inj = next_call("cuFileDriverGetProperties");
  if (inj.hit) return status(control_failure(inj));
  if (props == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (cuFileUseCount() == 0) return status(CU_FILE_DRIVER_NOT_INITIALIZED);
  *props = CUfileDrvProps_t{};
  props->nvfs.major_version = 2;
  props->nvfs.minor_version = 17;
  props->nvfs.poll_thresh_size = 4;
  props->nvfs.max_direct_io_size = 16384;
  props->nvfs.dstatusflags = 1U << CU_FILE_NVME_SUPPORTED;
  props->nvfs.dcontrolflags = 1U << CU_FILE_ALLOW_COMPAT_MODE;
  props->fflags = (1U << CU_FILE_BATCH_IO_SUPPORTED) | (1U << CU_FILE_STREAMS_SUPPORTED) |
                  (1U << CU_FILE_PARALLEL_IO_SUPPORTED);
  props->max_device_cache_size = 131072;
  props->per_buffer_cache_size = 1024;
  props->max_device_pinned_mem_size = 33554432;
  props->max_batch_io_size = 128;
  props->max_batch_io_timeout_msecs = 5;
  return status(CU_FILE_SUCCESS);
}

CUfileError_t cuFileHandleRegister(CUfileHandle_t* fh, CUfileDescr_t* descr) {
  const Injection inj = next_call("cuFileHandleRegister");
  if (fh == nullptr || descr == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD) return status(CU_FILE_INVALID_VALUE);
  if (const CUfileOpError e = ensure_open(); e != CU_FILE_SUCCESS) return status(e);
  if (inj.hit) return status(control_failure(inj));

  const int fd = descr->handle.fd;
  struct stat sb {};
  if (fd < 0 || ::fstat(fd, &sb) != 0) return status(CU_FILE_INVALID_VALUE);
  if (!S_ISREG(sb.st_mode) && !S_ISBLK(sb.st_mode)) return status(CU_FILE_INVALID_FILE_TYPE);
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return status(CU_FILE_INVALID_VALUE);
  constexpr int kRefused = O_APPEND | O_NOCTTY | O_NONBLOCK | O_DIRECTORY | O_NOFOLLOW | O_NOATIME;
  if ((fl & kRefused) != 0 || (fl & O_TMPFILE) == O_TMPFILE)
    return status(CU_FILE_INVALID_FILE_OPEN_FLAG);
  // GDS serves block-backed and network file systems, not memory ones. (A block device's own
  // fstatfs names devtmpfs, so only regular files are checked.)
  struct statfs fs {};
  if (S_ISREG(sb.st_mode) && ::fstatfs(fd, &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic)
    return status(CU_FILE_IO_NOT_SUPPORTED);

  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [p, h] : s.handles)
    if (h->fd == fd) return status(CU_FILE_HANDLE_ALREADY_REGISTERED);
  auto rec = std::make_unique<HandleRec>();
  rec->fd = fd;
  rec->direct = (fl & O_DIRECT) != 0;
  HandleRec* raw = rec.get();
  s.handles.emplace(raw, std::move(rec));
  *fh = raw;
  return status(CU_FILE_SUCCESS);
}

void cuFileHandleDeregister(CUfileHandle_t fh) {
  next_call("cuFileHandleDeregister");
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  // Looked up before use: a stale or foreign handle is ignored, never dereferenced.
  auto it = s.handles.find(static_cast<HandleRec*>(fh));
  if (it == s.handles.end()) return;
  if (it->second->buffered >= 0) ::close(it->second->buffered);
  s.handles.erase(it);
}

CUfileError_t cuFileBufRegister(const void* base, std::size_t length, int flags) {
  const Injection inj = next_call("cuFileBufRegister");
  if (base == nullptr || length == 0 || (flags & ~CU_FILE_RDMA_REGISTER) != 0)
    return status(CU_FILE_INVALID_VALUE);
  if (const CUfileOpError e = ensure_open(); e != CU_FILE_SUCCESS) return status(e);
  if (inj.hit) return status(control_failure(inj));
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  if (!s.buffers.emplace(reinterpret_cast<std::uintptr_t>(base), length).second)
    return status(CU_FILE_MEMORY_ALREADY_REGISTERED);
  return status(CU_FILE_SUCCESS);
}

CUfileError_t cuFileBufDeregister(const void* base) {
  const Injection inj = next_call("cuFileBufDeregister");
  if (base == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (inj.hit) return status(control_failure(inj));
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  if (s.buffers.erase(reinterpret_cast<std::uintptr_t>(base)) == 0)
    return status(CU_FILE_MEMORY_NOT_REGISTERED);
  return status(CU_FILE_SUCCESS);
}

ssize_t cuFileRead(CUfileHandle_t fh, void* base, std::size_t size, off_t file_offset,
                   off_t buf_offset) {
  return do_io(false, fh, base, size, file_offset, buf_offset);
}

ssize_t cuFileWrite(CUfileHandle_t fh, const void* base, std::size_t size, off_t file_offset,
                    off_t buf_offset) {
  return do_io(true, fh, base, size, file_offset, buf_offset);
}

// --- test hooks (fake_cufile.h) ---

uint64_t fake_cufile_reads(void) { return st().reads.load(); }
uint64_t fake_cufile_bytes_read(void) { return st().bytes_read.load(); }
uint64_t fake_cufile_writes(void) { return st().writes.load(); }
uint64_t fake_cufile_bytes_written(void) { return st().bytes_written.load(); }

uint64_t fake_cufile_live_handles(void) {
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  return s.handles.size();
}

uint64_t fake_cufile_live_buffers(void) {
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  return s.buffers.size();
}

uint64_t fake_cufile_calls(const char* function) {
  if (function == nullptr) return 0;
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.calls.find(std::string_view(function));
  return it == s.calls.end() ? 0 : it->second;
}

void fake_cufile_reset_counters(void) {
  State& s = st();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.calls.clear();
  s.reads = 0;
  s.bytes_read = 0;
  s.writes = 0;
  s.bytes_written = 0;
}

}  // extern "C"
