// The stream API: cuFileStreamRegister / Deregister, cuFileReadAsync / cuFileWriteAsync.
//
// An asynchronous call is queued on the caller's stream with sluice::run_on_stream: it starts
// when the work before it on the stream has finished, and only then reads *size_p,
// *file_offset_p and *bufPtr_offset_p (a kernel earlier in the stream may compute them, as
// cuFile allows); later work on the stream waits for it. *bytes_p ends as bytes, -1 or
// -CUfileOpError. On the NULL stream the call is synchronous: it waits for the NULL stream,
// then runs at once. Stream registration flags promise that arguments are fixed at submission;
// reading them at execution is equally right then, so the flags are only checked and kept.
#include <new>

#include "exports.hpp"
#include "guarded.hpp"
#include "io.hpp"
#include "log.hpp"
#include "sluice/error.hpp"
#include "sluice/transfer.hpp"
#include "state.hpp"

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below

namespace {

struct AsyncArgs {
  bool write;
  CUfileHandle_t fh;
  void* base;
  size_t* size_p;
  off_t* file_offset_p;
  off_t* buf_offset_p;
  ssize_t* bytes_p;
};

void execute(const AsyncArgs& a, const char* api) noexcept {
  const IoOutcome o =
      run_io({a.write, a.fh, a.base, *a.size_p, *a.file_offset_p, *a.buf_offset_p}, api);
  *a.bytes_p = o.ret;  // -1 for an OS error: cuFile has no room for the errno here
}

CUfileError_t submit(const AsyncArgs& a, CUstream stream, const char* api) {
  if (a.base == nullptr || a.size_p == nullptr || a.file_offset_p == nullptr ||
      a.buf_offset_p == nullptr || a.bytes_p == nullptr) {
    return status(CU_FILE_INVALID_VALUE);
  }
  State& s = State::get();
  if (const CUfileError_t st = s.ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  if (!s.find_handle(a.fh)) {
    log(LogLevel::info, "{}: handle {} is not registered", api, a.fh);
    return status(CU_FILE_HANDLE_NOT_REGISTERED);
  }
  const std::shared_ptr<sluice::Device> dev = s.device();
  if (!dev) return status(CU_FILE_DRIVER_CLOSING);
  try {
    if (stream == nullptr) {
      dev->synchronize(nullptr);
      execute(a, api);
      return kSuccess;
    }
    if (dev->info().kind != sluice::DeviceKind::cuda) {
      log(LogLevel::info, "{}: stream {} cannot belong to the {} device (only the NULL stream)",
          api, static_cast<void*>(stream), to_string(dev->info().kind));
      return status(CU_FILE_INVALID_VALUE);
    }
    // The future is not needed: the work reports through *bytes_p, and never throws.
    (void)sluice::run_on_stream(dev, stream, [a, api] {
      execute(a, api);
      return sluice::TransferResult{};
    });
    return kSuccess;
  } catch (const sluice::Error& e) {
    log(LogLevel::info, "{}: {}", api, e.what());
    return status(e);
  } catch (const std::bad_alloc&) {
    return status(CU_FILE_NOMEM_ERROR);
  } catch (const std::exception& e) {
    log(LogLevel::error, "{}: internal error: {}", api, e.what());
    return status(CU_FILE_INTERNAL_ERROR);
  }
}


}  // namespace

CUFILE_API CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags) {
  return guarded("cuFileStreamRegister",
                 [&] { return State::get().register_stream(stream, flags); });
}

CUFILE_API CUfileError_t cuFileStreamDeregister(CUstream stream) {
  return guarded("cuFileStreamDeregister", [&] { return State::get().deregister_stream(stream); });
}

CUFILE_API CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void* bufPtr_base, size_t* size_p,
                                         off_t* file_offset_p, off_t* bufPtr_offset_p,
                                         ssize_t* bytes_read_p, CUstream stream) {
  return submit({false, fh, bufPtr_base, size_p, file_offset_p, bufPtr_offset_p, bytes_read_p},
                stream, "cuFileReadAsync");
}

CUFILE_API CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void* bufPtr_base, size_t* size_p,
                                          off_t* file_offset_p, off_t* bufPtr_offset_p,
                                          ssize_t* bytes_written_p, CUstream stream) {
  return submit({true, fh, bufPtr_base, size_p, file_offset_p, bufPtr_offset_p, bytes_written_p},
                stream, "cuFileWriteAsync");
}
