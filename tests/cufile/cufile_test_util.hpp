// Helpers for the cuFile conformance suite, which is written as a user program would be: only
// <cufile.h>, libc and the CUDA driver API loaded with dlopen (the fake libcuda in CI). Nothing
// here links libsluice.
//
// SLUICE_CUFILE_TEST_MODE says what the CTest entry set up:
//   sim          no libcuda: buffers are host memory, the device is Sluice's simulated one
//   fake_cuda    the fake libcuda (device memory), no libcufile: device memory takes bounce
//   fake_cufile  the fake libcuda and the fake libcufile: aligned device requests take direct
//   self         SLUICE_LIBCUFILE names this library's own drop-in libcufile.so.0: bounce
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cufile.h"

namespace cufile_test {

inline std::string mode() {
  const char* m = std::getenv("SLUICE_CUFILE_TEST_MODE");
  return m != nullptr ? m : "";
}
inline bool device_memory() {
  return mode() == "fake_cuda" || mode() == "fake_cufile" || mode() == "self";
}

/// The CUDA driver API, loaded as an application would (libcuda.so.1 on the library path).
class Cuda {
 public:
  static Cuda& get() {
    static Cuda c;
    return c;
  }
  [[nodiscard]] bool ok() const { return ok_; }
  /// Makes the primary context current on the calling thread (each thread needs it).
  void bind() const {
    if (ok_) set_current_(ctx_);
  }
  void* alloc(std::size_t n) const {
    unsigned long long p = 0;
    return alloc_(&p, n) == 0 ? reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)) : nullptr;
  }
  void free(void* p) const { free_(reinterpret_cast<std::uintptr_t>(p)); }
  bool to_device(void* dst, const void* src, std::size_t n) const {
    return htod_(reinterpret_cast<std::uintptr_t>(dst), src, n, nullptr) == 0 &&
           sync_(nullptr) == 0;
  }
  bool to_host(void* dst, const void* src, std::size_t n) const {
    return dtoh_(dst, reinterpret_cast<std::uintptr_t>(src), n, nullptr) == 0 &&
           sync_(nullptr) == 0;
  }
  CUstream create_stream() const {
    CUstream s = nullptr;
    return stream_create_(&s, 0) == 0 ? s : nullptr;
  }
  int synchronize(CUstream s) const { return sync_(s); }
  void destroy_stream(CUstream s) const { stream_destroy_(s); }

 private:
  template <typename Fn>
  void load(void* lib, Fn& fn, const char* name) {
    void* sym = dlsym(lib, name);
    std::memcpy(&fn, &sym, sizeof fn);
    ok_ = ok_ && sym != nullptr;
  }
  Cuda() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    ok_ = true;
    int (*init)(unsigned) = nullptr;
    int (*device_get)(int*, int) = nullptr;
    int (*retain)(void**, int) = nullptr;
    load(lib, init, "cuInit");
    load(lib, device_get, "cuDeviceGet");
    load(lib, retain, "cuDevicePrimaryCtxRetain");
    load(lib, set_current_, "cuCtxSetCurrent");
    load(lib, alloc_, "cuMemAlloc_v2");
    load(lib, free_, "cuMemFree_v2");
    load(lib, htod_, "cuMemcpyHtoDAsync_v2");
    load(lib, dtoh_, "cuMemcpyDtoHAsync_v2");
    load(lib, sync_, "cuStreamSynchronize");
    load(lib, stream_create_, "cuStreamCreate");
    load(lib, stream_destroy_, "cuStreamDestroy_v2");
    int dev = 0;
    ok_ = ok_ && init(0) == 0 && device_get(&dev, 0) == 0 && retain(&ctx_, dev) == 0;
    bind();
  }
  bool ok_ = false;
  void* ctx_ = nullptr;
  int (*set_current_)(void*) = nullptr;
  int (*alloc_)(unsigned long long*, std::size_t) = nullptr;
  int (*free_)(unsigned long long) = nullptr;
  int (*htod_)(unsigned long long, const void*, std::size_t, CUstream) = nullptr;
  int (*dtoh_)(void*, unsigned long long, std::size_t, CUstream) = nullptr;
  int (*sync_)(CUstream) = nullptr;
  int (*stream_create_)(CUstream*, unsigned) = nullptr;
  int (*stream_destroy_)(CUstream) = nullptr;
};

/// A buffer in device memory (device modes) or page-aligned host memory.
class Buffer {
 public:
  Buffer(std::size_t n, bool device) : size_(n), device_(device) {
    if (device_) {
      p_ = Cuda::get().alloc(n);
    } else if (posix_memalign(&p_, 4096, n) != 0) {
      p_ = nullptr;
    }
  }
  ~Buffer() {
    if (p_ == nullptr) return;
    if (device_) {
      Cuda::get().free(p_);
    } else {
      std::free(p_);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  [[nodiscard]] void* get() const { return p_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  void fill(const std::vector<unsigned char>& bytes, std::size_t at = 0) const {
    if (device_) {
      ASSERT_TRUE(Cuda::get().to_device(static_cast<char*>(p_) + at, bytes.data(), bytes.size()));
    } else {
      std::memcpy(static_cast<char*>(p_) + at, bytes.data(), bytes.size());
    }
  }
  [[nodiscard]] std::vector<unsigned char> bytes(std::size_t at, std::size_t n) const {
    std::vector<unsigned char> out(n);
    if (device_) {
      EXPECT_TRUE(Cuda::get().to_host(out.data(), static_cast<const char*>(p_) + at, n));
    } else {
      std::memcpy(out.data(), static_cast<const char*>(p_) + at, n);
    }
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t size_;
  bool device_;
};

inline std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

/// A scratch folder under TMPDIR, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-cufile-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

inline std::vector<unsigned char> read_file(const std::string& path) {
  std::vector<unsigned char> out(std::filesystem::file_size(path));
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
  ::close(fd);
  return out;
}

/// Opens `path` as a cuFile user does (O_DIRECT where the file system has it).
inline int open_file(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), flags, 0644);
  return fd;
}

inline CUfileError_t register_fd(CUfileHandle_t* fh, int fd) {
  CUfileDescr_t d;
  std::memset(&d, 0, sizeof d);
  d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = fd;
  return cuFileHandleRegister(fh, &d);
}

}  // namespace cufile_test
