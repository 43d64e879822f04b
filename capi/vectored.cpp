// cuFileReadv / cuFileWritev (CUDA 13.4): one contiguous file range to or from `iovcnt` buffers,
// in order. Each segment is a cuFileRead/cuFileWrite-shaped transfer (run_io: the same checks,
// path choice and reasons, any alignment, host or device memory); the segments run at once, the
// calling thread taking its share beside Sluice's thread pool, so a vector of many small buffers
// keeps many requests in flight and a call never waits on a pool another call has filled.
//
// The result follows the scalar calls: the bytes moved, short only where a read meets the end of
// the file (the segments after it move nothing); or the first failing segment's error, -1 with
// errno or -CUfileOpError, as cuFileRead reports a failure anywhere in its range.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "exports.hpp"
#include "io.hpp"
#include "log.hpp"
#include "sluice/thread_pool.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

// The segments of one call and the progress of its workers: shared with the pool's jobs, which
// may start after the call has returned (they then find nothing left to do).
struct Vector {
  std::vector<IoRequest> segments;
  std::vector<IoOutcome> outcomes;
  const char* api = "";
  std::mutex mu;
  std::condition_variable cv;
  std::size_t next = 0;  // the first segment nobody has taken
  std::size_t done = 0;
};

// Takes segments until none is left; true when this worker finished the last one.
void work(Vector& v) noexcept {
  for (;;) {
    std::size_t i = 0;
    {
      std::lock_guard lock(v.mu);
      if (v.next == v.segments.size()) return;
      i = v.next++;
    }
    const IoOutcome out = run_io(v.segments[i], v.api);
    std::lock_guard lock(v.mu);
    v.outcomes[i] = out;
    if (++v.done == v.segments.size()) v.cv.notify_all();
  }
}

void run_all(const std::shared_ptr<Vector>& v) {
  const std::size_t n = v->segments.size();
  ThreadPool& pool = default_pool();
  const std::size_t helpers = std::min<std::size_t>(n - 1, pool.size());
  for (std::size_t k = 0; k < helpers; ++k) pool.post([v] { work(*v); });
  work(*v);  // the caller works too: a busy pool delays the call, never blocks it
  std::unique_lock lock(v->mu);
  v->cv.wait(lock, [&] { return v->done == n; });
}

// The call's arguments as segments, or the refusal of arguments no transfer can use.
std::optional<IoOutcome> split(bool write, CUfileHandle_t fh, const CUfileIOVec_t* iov,
                               std::size_t iovcnt, off_t file_offset, unsigned flags, Vector& v) {
  const IoOutcome invalid{-static_cast<ssize_t>(CU_FILE_INVALID_VALUE), 0};
  if (flags != 0 || file_offset < 0 || (iov == nullptr && iovcnt != 0)) return invalid;
  std::uint64_t offset = static_cast<std::uint64_t>(file_offset);
  for (std::size_t i = 0; i < iovcnt; ++i) {
    const std::uint64_t len = iov[i].len;
    if (len > static_cast<std::uint64_t>(SSIZE_MAX) || offset > INT64_MAX - len) return invalid;
    if (len == 0) continue;
    IoRequest r{write, fh, iov[i].base, iov[i].len, static_cast<off_t>(offset), 0};
    r.counted = false;
    v.segments.push_back(r);
    offset += len;
  }
  if (offset - static_cast<std::uint64_t>(file_offset) > static_cast<std::uint64_t>(SSIZE_MAX))
    return invalid;
  return std::nullopt;
}

// The call's result from its segments' outcomes, in file order.
IoOutcome combine(const Vector& v) {
  IoOutcome total{0, 0};
  for (std::size_t i = 0; i < v.segments.size(); ++i) {
    const IoOutcome& o = v.outcomes[i];
    if (o.ret < 0) return o;
    total.ret += o.ret;
    if (static_cast<std::size_t>(o.ret) < v.segments[i].size) break;  // the end of the file
  }
  return total;
}

ssize_t vectored(bool write, CUfileHandle_t fh, const CUfileIOVec_t* iov, std::size_t iovcnt,
                 off_t file_offset, unsigned flags, const char* api) noexcept {
  const auto t0 = std::chrono::steady_clock::now();
  IoOutcome out;
  try {
    auto v = std::make_shared<Vector>();
    v->api = api;
    if (auto refused = split(write, fh, iov, iovcnt, file_offset, flags, *v)) {
      log(LogLevel::info, "{}: invalid arguments ({} segments at {}, flags {})", api, iovcnt,
          file_offset, flags);
      out = *refused;
    } else if (v->segments.empty()) {
      // Nothing to move; the handle is still checked, as cuFileRead checks it for 0 bytes.
      if (!State::get().find_handle(fh))
        out = {-static_cast<ssize_t>(CU_FILE_HANDLE_NOT_REGISTERED), 0};
    } else {
      v->outcomes.resize(v->segments.size());
      run_all(v);
      out = combine(*v);
    }
  } catch (const std::bad_alloc&) {
    out = {-static_cast<ssize_t>(CU_FILE_NOMEM_ERROR), 0};
  } catch (const std::exception& e) {
    log(LogLevel::error, "{}: internal error: {}", api, e.what());
    out = {-static_cast<ssize_t>(CU_FILE_INTERNAL_ERROR), 0};
  }
  const auto us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  count_vectored(write, out.ret >= 0, out.ret >= 0 ? static_cast<std::uint64_t>(out.ret) : 0, us);
  if (out.ret == -1) errno = out.err_no;
  return out.ret;
}

}  // namespace
}  // namespace sluice::capi

CUFILE_API ssize_t cuFileReadv(CUfileHandle_t fh, const CUfileIOVec_t* iov, size_t iovcnt,
                               off_t file_offset, unsigned flags) {
  return sluice::capi::vectored(false, fh, iov, iovcnt, file_offset, flags, "cuFileReadv");
}

CUFILE_API ssize_t cuFileWritev(CUfileHandle_t fh, const CUfileIOVec_t* iov, size_t iovcnt,
                                off_t file_offset, unsigned flags) {
  return sluice::capi::vectored(true, fh, iov, iovcnt, file_offset, flags, "cuFileWritev");
}
