// Interface between Sluice's own libraries, not for applications (include/sluice/internal/:
// exported by libsluice for libsluice_tools and libsluice_cufile, never installed, changes with
// them). What this process found of NVIDIA's libraries, for `sluice check`: whether libcuda.so.1
// and libcufile.so.0 load and work, and why not. Asking loads them (once per process), as the
// first transfer into device memory would.
#pragma once

#include <string>

#include "sluice/export.hpp"

namespace sluice {

struct CudaLibraryStatus {
  bool available = false;  ///< libcuda loaded, cuInit succeeded and there is at least one GPU
  std::string reason;      ///< why not ("libcuda.so.1 not found", ...); empty when available
  int devices = 0;         ///< CUDA devices (0 when not available)
};
[[nodiscard]] SLUICE_API CudaLibraryStatus cuda_library_status();

struct CuFileLibraryStatus {
  bool available = false;  ///< libcufile loaded and cuFileDriverOpen succeeded
  int version = 0;         ///< cuFileGetVersion() (1000*major + 10*minor), 0 when unknown
  std::string library;     ///< the file that was loaded (or tried)
  std::string reason;      ///< why not; empty when available
  /// What the library's cuFileDriverGetProperties reported (all 0 when not available): the
  /// nvidia-fs version, the file systems it serves (CUfileDriverStatusFlags_t bits) and its
  /// features (CUfileFeatureFlags_t bits). libsluice_cufile passes them on to its clients.
  unsigned nvfs_major = 0, nvfs_minor = 0, dstatusflags = 0, fflags = 0;
};
[[nodiscard]] SLUICE_API CuFileLibraryStatus cufile_library_status();

}  // namespace sluice
