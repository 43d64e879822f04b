// sluice/internal/gpu_stack.hpp: the loaders' answers, for libraries that may not see the loaders.
#include "sluice/internal/gpu_stack.hpp"

#include "gpu/cuda_device.hpp"
#include "gpu/cufile_api.hpp"

namespace sluice {

CudaLibraryStatus cuda_library_status() {
  CudaLibraryStatus s;
  s.available = detail::cuda_available(&s.reason);
  if (s.available) {
    s.reason.clear();
    s.devices = detail::cuda_device_count();
  }
  return s;
}

CuFileLibraryStatus cufile_library_status() {
  const auto& cf = detail::CuFile::instance();
  CuFileLibraryStatus s;
  s.available = cf.available();
  s.version = cf.version();
  s.library = cf.library();
  if (!s.available) s.reason = cf.reason();
  const detail::CuFile::Platform p = cf.platform();
  s.nvfs_major = p.nvfs_major;
  s.nvfs_minor = p.nvfs_minor;
  s.dstatusflags = p.dstatusflags;
  s.fflags = p.fflags;
  return s;
}

}  // namespace sluice
