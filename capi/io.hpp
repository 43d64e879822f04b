// One cuFileRead/cuFileWrite-shaped transfer, shared by the synchronous, batch and stream APIs:
// checks the arguments as cuFile does, hands the bytes to sluice::read/write on the device the
// driver opened, records the path in the stats and the log, and returns cuFile's convention.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "cufile.h"
#include "sluice/device.hpp"

namespace sluice::capi {

struct IoRequest {
  bool write = false;
  CUfileHandle_t fh = nullptr;
  const void* base = nullptr;
  std::size_t size = 0;
  off_t file_offset = 0;
  off_t buf_offset = 0;
  /// Counted in the read/write statistics; false for the segments of a cuFileReadv/Writev call,
  /// which counts once, in its own counters.
  bool counted = true;
};

/// `ret`: bytes moved (short only at the end of the file), -1 with the errno in `err_no`, or
/// -CUfileOpError.
struct IoOutcome {
  ssize_t ret = 0;
  int err_no = 0;
};

IoOutcome run_io(const IoRequest& r, std::string_view api) noexcept;

struct Handle;
/// A transfer on a user-space file system's handle (userspace_fs.cpp): its read or write
/// operation moves the bytes; device memory goes through pinned staging of `dev`.
IoOutcome run_user_fs(const Handle& h, const IoRequest& r, std::byte* buf, MemoryKind kind,
                      Device& dev, std::string_view api);

/// Whether libsluice's own cuFile loader (SLUICE_LIBCUFILE or libcufile.so.0) would load this
/// very library, as it does when libsluice_cufile is installed as libcufile.so.0 for drop-in use.
/// Then the direct path would call back into this library without end, so device memory takes
/// the bounce path instead, with this reason. Checked once, on the first device-memory transfer.
struct LoaderTarget {
  bool is_self = false;
  std::string reason;
};
const LoaderTarget& loader_target();

}  // namespace sluice::capi
