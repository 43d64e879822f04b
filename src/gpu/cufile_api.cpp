// The cuFile loader: libcufile.so.0 (or $SLUICE_LIBCUFILE) through dlopen, so libsluice links
// nothing it may not find and one build serves machines with and without GDS.
//
// Lifetime: the instance is created, the library loaded and the driver opened once, on the
// first instance() call (a function-local static, so concurrent first calls are safe). It is
// never destroyed: closing the driver from a static destructor would race other static
// destructors still holding handles, and libcufile's own exit-time teardown (its threads and
// atexit handlers); the process exit releases the driver anyway. Tests switch libraries with
// reset_for_tests(), which does close and unload.
#include "gpu/cufile_api.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "cufile.h"

namespace sluice::detail {
namespace {

struct ErrorInfo {
  int code;
  std::string_view name;
  std::string_view text;
};

// Every CUfileOpError of the cuFile reference table (5021 and 5032 are unused).
constexpr ErrorInfo kErrors[] = {
    {CU_FILE_SUCCESS, "CU_FILE_SUCCESS", "success"},
    {CU_FILE_DRIVER_NOT_INITIALIZED, "CU_FILE_DRIVER_NOT_INITIALIZED",
     "nvidia-fs driver not loaded (compat mode needs allow_compat_mode in cufile.json)"},
    {CU_FILE_DRIVER_INVALID_PROPS, "CU_FILE_DRIVER_INVALID_PROPS", "invalid driver property"},
    {CU_FILE_DRIVER_UNSUPPORTED_LIMIT, "CU_FILE_DRIVER_UNSUPPORTED_LIMIT",
     "driver property out of range"},
    {CU_FILE_DRIVER_VERSION_MISMATCH, "CU_FILE_DRIVER_VERSION_MISMATCH",
     "nvidia-fs driver version mismatch"},
    {CU_FILE_DRIVER_VERSION_READ_ERROR, "CU_FILE_DRIVER_VERSION_READ_ERROR",
     "nvidia-fs driver version could not be read"},
    {CU_FILE_DRIVER_CLOSING, "CU_FILE_DRIVER_CLOSING", "driver shutdown in progress"},
    {CU_FILE_PLATFORM_NOT_SUPPORTED, "CU_FILE_PLATFORM_NOT_SUPPORTED",
     "GDS not supported on this platform"},
    {CU_FILE_IO_NOT_SUPPORTED, "CU_FILE_IO_NOT_SUPPORTED",
     "GDS not supported on this file (file system, mount or open flags)"},
    {CU_FILE_DEVICE_NOT_SUPPORTED, "CU_FILE_DEVICE_NOT_SUPPORTED",
     "GDS not supported on this GPU"},
    {CU_FILE_NVFS_DRIVER_ERROR, "CU_FILE_NVFS_DRIVER_ERROR", "nvidia-fs driver ioctl error"},
    {CU_FILE_CUDA_DRIVER_ERROR, "CU_FILE_CUDA_DRIVER_ERROR", "CUDA driver error"},
    {CU_FILE_CUDA_POINTER_INVALID, "CU_FILE_CUDA_POINTER_INVALID", "invalid device pointer"},
    {CU_FILE_CUDA_MEMORY_TYPE_INVALID, "CU_FILE_CUDA_MEMORY_TYPE_INVALID",
     "invalid pointer memory type"},
    {CU_FILE_CUDA_POINTER_RANGE_ERROR, "CU_FILE_CUDA_POINTER_RANGE_ERROR",
     "pointer range exceeds the allocation"},
    {CU_FILE_CUDA_CONTEXT_MISMATCH, "CU_FILE_CUDA_CONTEXT_MISMATCH", "CUDA context mismatch"},
    {CU_FILE_INVALID_MAPPING_SIZE, "CU_FILE_INVALID_MAPPING_SIZE",
     "access beyond the maximum pinned size"},
    {CU_FILE_INVALID_MAPPING_RANGE, "CU_FILE_INVALID_MAPPING_RANGE",
     "access beyond the mapped size"},
    {CU_FILE_INVALID_FILE_TYPE, "CU_FILE_INVALID_FILE_TYPE", "unsupported file type"},
    {CU_FILE_INVALID_FILE_OPEN_FLAG, "CU_FILE_INVALID_FILE_OPEN_FLAG",
     "unsupported file open flags"},
    {CU_FILE_DIO_NOT_SET, "CU_FILE_DIO_NOT_SET", "O_DIRECT not set on the file descriptor"},
    {CU_FILE_INVALID_VALUE, "CU_FILE_INVALID_VALUE", "invalid arguments"},
    {CU_FILE_MEMORY_ALREADY_REGISTERED, "CU_FILE_MEMORY_ALREADY_REGISTERED",
     "buffer already registered"},
    {CU_FILE_MEMORY_NOT_REGISTERED, "CU_FILE_MEMORY_NOT_REGISTERED", "buffer not registered"},
    {CU_FILE_PERMISSION_DENIED, "CU_FILE_PERMISSION_DENIED", "driver or file access denied"},
    {CU_FILE_DRIVER_ALREADY_OPEN, "CU_FILE_DRIVER_ALREADY_OPEN", "driver already open"},
    {CU_FILE_HANDLE_NOT_REGISTERED, "CU_FILE_HANDLE_NOT_REGISTERED",
     "file descriptor not registered"},
    {CU_FILE_HANDLE_ALREADY_REGISTERED, "CU_FILE_HANDLE_ALREADY_REGISTERED",
     "file descriptor already registered"},
    {CU_FILE_DEVICE_NOT_FOUND, "CU_FILE_DEVICE_NOT_FOUND", "GPU not found"},
    {CU_FILE_INTERNAL_ERROR, "CU_FILE_INTERNAL_ERROR", "internal error"},
    {CU_FILE_GETNEWFD_FAILED, "CU_FILE_GETNEWFD_FAILED", "failed to obtain a new file descriptor"},
    {CU_FILE_NVFS_SETUP_ERROR, "CU_FILE_NVFS_SETUP_ERROR", "nvidia-fs driver setup error"},
    {CU_FILE_IO_DISABLED, "CU_FILE_IO_DISABLED", "GDS disabled by configuration for this file"},
    {CU_FILE_BATCH_SUBMIT_FAILED, "CU_FILE_BATCH_SUBMIT_FAILED", "batch submit failed"},
    {CU_FILE_GPU_MEMORY_PINNING_FAILED, "CU_FILE_GPU_MEMORY_PINNING_FAILED",
     "not enough pinned GPU memory (BAR space)"},
    {CU_FILE_BATCH_FULL, "CU_FILE_BATCH_FULL", "batch queue full"},
    {CU_FILE_ASYNC_NOT_SUPPORTED, "CU_FILE_ASYNC_NOT_SUPPORTED", "stream operation not supported"},
    {CU_FILE_INTERNAL_BATCH_SETUP_ERROR, "CU_FILE_INTERNAL_BATCH_SETUP_ERROR",
     "internal batch setup error, retry later"},
    {CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR, "CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR",
     "internal batch submit error, retry later"},
    {CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR, "CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR",
     "internal batch status error, retry later"},
    {CU_FILE_INTERNAL_BATCH_CANCEL_ERROR, "CU_FILE_INTERNAL_BATCH_CANCEL_ERROR",
     "internal batch cancel error, retry later"},
    {CU_FILE_NOMEM_ERROR, "CU_FILE_NOMEM_ERROR", "out of memory, retry later"},
    {CU_FILE_IO_ERROR, "CU_FILE_IO_ERROR", "cuFile IO error"},
    {CU_FILE_INTERNAL_BUF_REGISTER_ERROR, "CU_FILE_INTERNAL_BUF_REGISTER_ERROR",
     "internal buffer registration error"},
    {CU_FILE_HASH_OPR_ERROR, "CU_FILE_HASH_OPR_ERROR", "hash operation error"},
    {CU_FILE_INVALID_CONTEXT_ERROR, "CU_FILE_INVALID_CONTEXT_ERROR", "invalid context"},
    {CU_FILE_NVFS_INTERNAL_DRIVER_ERROR, "CU_FILE_NVFS_INTERNAL_DRIVER_ERROR",
     "nvidia-fs internal driver error"},
    {CU_FILE_BATCH_NOCOMPAT_ERROR, "CU_FILE_BATCH_NOCOMPAT_ERROR",
     "batch IO needs compat mode, which is off"},
    {CU_FILE_IO_MAX_ERROR, "CU_FILE_IO_MAX_ERROR", "highest cuFile error value"},
};

const ErrorInfo* find_error(int code) {
  // cuFileRead/cuFileWrite report -CUfileOpError; control calls report it positive.
  const int c = code < 0 ? -code : code;
  for (const ErrorInfo& e : kErrors) {
    if (e.code == c) return &e;
  }
  return nullptr;
}

// "cuFileHandleRegister: CU_FILE_IO_NOT_SUPPORTED (5008): GDS not supported on this file ..."
std::string describe(std::string_view op, CUfileError_t st) {
  std::string s = fmt::format("{}: {} ({}): {}", op, CuFile::error_name(st.err),
                              static_cast<int>(st.err), CuFile::error_text(st.err));
  if (st.err == CU_FILE_CUDA_DRIVER_ERROR)
    s += fmt::format(" (CUresult {})", static_cast<int>(st.cu_err));
  return s;
}

std::mutex& reset_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

struct CuFile::Handle {
  CUfileHandle_t fh = nullptr;
  int fd = -1;
};

struct CuFile::Impl {
  void* lib = nullptr;
  std::string library;
  std::string reason;
  int version = 0;
  CuFile::Platform platform;
  bool available = false;
  CUfileOpError open_error = CU_FILE_DRIVER_NOT_INITIALIZED;  // what callers get when !available

  decltype(&::cuFileDriverOpen) driver_open = nullptr;
  decltype(&::cuFileDriverClose_v2) driver_close = nullptr;
  decltype(&::cuFileHandleRegister) handle_register = nullptr;
  decltype(&::cuFileHandleDeregister) handle_deregister = nullptr;
  decltype(&::cuFileRead) read = nullptr;
  decltype(&::cuFileWrite) write = nullptr;
  decltype(&::cuFileBufRegister) buf_register = nullptr;
  decltype(&::cuFileBufDeregister) buf_deregister = nullptr;
  decltype(&::cuFileGetVersion) get_version = nullptr;

  template <typename Fn>
  bool resolve(Fn& fn, const char* name) {
    dlerror();
    fn = reinterpret_cast<Fn>(dlsym(lib, name));
    return fn != nullptr;
  }

  void load();
  void unload();
};

void CuFile::Impl::load() {
  const char* env = std::getenv("SLUICE_LIBCUFILE");
  const bool from_env = env != nullptr && *env != '\0';
  library = from_env ? env : "libcufile.so.0";
  dlerror();
  lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    const std::string_view why = err != nullptr ? err : "unknown error";
    const bool missing = why.find("No such file") != std::string_view::npos;
    reason = fmt::format("{}{} {} (dlopen: {})", from_env ? "SLUICE_LIBCUFILE=" : "", library,
                         missing ? "not found" : "could not be loaded", why);
    return;
  }

  // libsluice_cufile installed as libcufile.so.0 (its drop-in link on LD_LIBRARY_PATH) would be
  // found here: using it would send "direct" requests back through libsluice and report a
  // direct path that never was. A dlopen handle's lookups cover the library's dependencies, so
  // a libsluice symbol found through it means the library is built on libsluice.
  if (dlsym(lib, "_ZN6sluice5statsEv") != nullptr) {  // sluice::stats()
    reason = fmt::format("{}{} is libsluice_cufile (built on libsluice), not NVIDIA's cuFile",
                         from_env ? "SLUICE_LIBCUFILE=" : "", library);
    dlclose(lib);  // nothing in it was called
    lib = nullptr;
    return;
  }

  // cuFileDriverClose_v2 is what NVIDIA's header binds cuFileDriverClose to; very old
  // libraries only have the unversioned symbol.
  const char* missing = nullptr;  // the first entry point not found
  const auto need = [&](auto& fn, const char* name) {
    if (missing == nullptr && !resolve(fn, name)) missing = name;
  };
  need(driver_open, "cuFileDriverOpen");
  if (missing == nullptr && !resolve(driver_close, "cuFileDriverClose_v2"))
    need(driver_close, "cuFileDriverClose");
  need(handle_register, "cuFileHandleRegister");
  need(handle_deregister, "cuFileHandleDeregister");
  need(read, "cuFileRead");
  need(write, "cuFileWrite");
  need(buf_register, "cuFileBufRegister");
  need(buf_deregister, "cuFileBufDeregister");
  if (missing != nullptr) {
    reason = fmt::format("{} lacks {} (not a usable libcufile)", library, missing);
    dlclose(lib);  // nothing in it was called, so unloading is safe
    lib = nullptr;
    return;
  }
  // Optional (older libraries lack it); asked before DriverOpen so that a failed open can
  // still be reported with the version.
  if (resolve(get_version, "cuFileGetVersion")) {
    int v = 0;
    if (get_version(&v).err == CU_FILE_SUCCESS) version = v;
  }

  const CUfileError_t st = driver_open();
  if (st.err != CU_FILE_SUCCESS) {
    open_error = st.err;
    reason = describe("cuFileDriverOpen", st);
    // The library stays loaded: after a failed open libcufile may have threads running, and
    // unloading code under them is worse than keeping a few pages mapped.
    return;
  }
  available = true;
  decltype(&::cuFileDriverGetProperties) get_properties = nullptr;
  CUfileDrvProps_t props{};
  if (resolve(get_properties, "cuFileDriverGetProperties") &&
      get_properties(&props).err == CU_FILE_SUCCESS) {
    platform = {props.nvfs.major_version, props.nvfs.minor_version, props.nvfs.dstatusflags,
                props.fflags};
  }
}

void CuFile::Impl::unload() {
  if (available && driver_close != nullptr) driver_close();
  available = false;
  if (lib != nullptr) dlclose(lib);
  lib = nullptr;
}

CuFile::CuFile() : impl_(std::make_unique<Impl>()) { impl_->load(); }

CuFile& CuFile::instance() {
  // Leaked on purpose, see the top of this file.
  static CuFile* const self = new CuFile();
  return *self;
}

void CuFile::reset_for_tests() {
  CuFile& self = instance();
  const std::lock_guard<std::mutex> lock(reset_mutex());
  self.impl_->unload();
  auto fresh = std::make_unique<Impl>();
  fresh->load();
  self.impl_ = std::move(fresh);
}

bool CuFile::available() const noexcept { return impl_->available; }
const std::string& CuFile::reason() const noexcept { return impl_->reason; }
int CuFile::version() const noexcept { return impl_->version; }
CuFile::Platform CuFile::platform() const noexcept { return impl_->platform; }
const std::string& CuFile::library() const noexcept { return impl_->library; }

std::shared_ptr<CuFile::Handle> CuFile::register_handle(int fd, std::string* reason, int* code) {
  Impl& im = *impl_;
  if (!im.available) {
    if (reason != nullptr) *reason = im.reason;
    if (code != nullptr) *code = im.open_error;
    return nullptr;
  }
  CUfileDescr_t descr{};
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = fd;
  descr.fs_ops = nullptr;
  CUfileHandle_t fh = nullptr;
  const CUfileError_t st = im.handle_register(&fh, &descr);
  if (st.err != CU_FILE_SUCCESS) {
    if (reason != nullptr) *reason = describe("cuFileHandleRegister", st);
    if (code != nullptr) *code = st.err;
    return nullptr;
  }
  if (code != nullptr) *code = CU_FILE_SUCCESS;
  // The deleter keeps its own copy of the entry point: a handle must not reach back into an
  // Impl that reset_for_tests() may have replaced.
  auto deregister = im.handle_deregister;
  return {new Handle{fh, fd}, [deregister](Handle* h) {
            deregister(h->fh);
            delete h;
          }};
}

ssize_t CuFile::read(const Handle& h, void* buf, std::size_t size, off_t file_offset,
                     off_t buf_offset) {
  if (!impl_->available) return -static_cast<ssize_t>(impl_->open_error);
  return impl_->read(h.fh, buf, size, file_offset, buf_offset);
}

ssize_t CuFile::write(const Handle& h, const void* buf, std::size_t size, off_t file_offset,
                      off_t buf_offset) {
  if (!impl_->available) return -static_cast<ssize_t>(impl_->open_error);
  return impl_->write(h.fh, buf, size, file_offset, buf_offset);
}

int CuFile::buf_register(const void* p, std::size_t size) {
  if (!impl_->available) return impl_->open_error;
  return impl_->buf_register(p, size, 0).err;
}

int CuFile::buf_deregister(const void* p) {
  if (!impl_->available) return impl_->open_error;
  return impl_->buf_deregister(p).err;
}

std::string CuFile::error_name(int code) {
  if (const ErrorInfo* e = find_error(code)) return std::string(e->name);
  return fmt::format("cuFile error {}", code);
}

std::string CuFile::error_text(int code) {
  if (const ErrorInfo* e = find_error(code)) return std::string(e->text);
  return fmt::format("unknown cuFile error {}", code);
}

}  // namespace sluice::detail
