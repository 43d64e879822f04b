// The real cuFile (libcufile.so.0, or the file SLUICE_LIBCUFILE names), loaded at run time with
// RTLD_LOCAL. The driver is opened once per process on first use. Nothing here throws: callers
// get codes and reasons, and decide between falling back and failing.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

namespace sluice::detail {

class CuFile {
 public:
  /// The process-wide instance; loads the library and opens the driver on first call.
  static CuFile& instance();

  /// True when the library loaded and cuFileDriverOpen succeeded.
  [[nodiscard]] bool available() const noexcept;
  /// Why not available: "libcufile.so.0 not found (dlopen: ...)",
  /// "cuFileDriverOpen: CU_FILE_DRIVER_NOT_INITIALIZED (5001): nvidia-fs driver not loaded", ...
  [[nodiscard]] const std::string& reason() const noexcept;
  /// cuFileGetVersion() (1000*major + 10*minor), or 0 when unknown.
  [[nodiscard]] int version() const noexcept;
  /// The file that was loaded (or tried).
  [[nodiscard]] const std::string& library() const noexcept;
  /// What the opened library's cuFileDriverGetProperties said of the platform: nvidia-fs's
  /// version, the file systems it serves (dstatusflags) and the features (fflags). All zero when
  /// the library is not available or does not answer.
  struct Platform {
    unsigned nvfs_major = 0, nvfs_minor = 0, dstatusflags = 0, fflags = 0;
  };
  [[nodiscard]] Platform platform() const noexcept;

  /// A registered cuFile handle for `fd`; deregistered when the last copy of the pointer goes.
  /// On failure: null, with `reason` set ("cuFileHandleRegister: CU_FILE_IO_NOT_SUPPORTED (5008): ...")
  /// and `code` the CUfileOpError value.
  struct Handle;
  [[nodiscard]] std::shared_ptr<Handle> register_handle(int fd, std::string* reason, int* code);

  /// cuFileRead/cuFileWrite: bytes, or -1 with errno set, or -CUfileOpError.
  ssize_t read(const Handle& h, void* buf, std::size_t size, off_t file_offset, off_t buf_offset);
  ssize_t write(const Handle& h, const void* buf, std::size_t size, off_t file_offset, off_t buf_offset);

  /// cuFileBufRegister/Deregister; returns the CUfileOpError (0 = success).
  int buf_register(const void* p, std::size_t size);
  int buf_deregister(const void* p);

  /// Reloads from scratch (tests switch between fake libraries with SLUICE_LIBCUFILE).
  /// Only safe while no handle is alive.
  static void reset_for_tests();

  /// "CU_FILE_IO_NOT_SUPPORTED" for 5008 (or -5008); "cuFile error N" for an unknown code.
  [[nodiscard]] static std::string error_name(int code);
  /// The documented meaning: "GDS not supported on this file".
  [[nodiscard]] static std::string error_text(int code);

  struct Impl;

 private:
  CuFile();
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::detail
