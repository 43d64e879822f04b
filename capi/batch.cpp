// The batch API: cuFileBatchIOSetUp / Submit / GetStatus / Cancel / Destroy.
//
// A batch has `nr` slots. Submit takes all its entries or none, and runs each entry as one job
// on Sluice's thread pool (each with its own path choice); a slot is free again once GetStatus
// has returned the entry's event. GetStatus returns finished entries in completion order, each
// once, waiting for min_nr of them (or as many as are outstanding, if fewer) up to `timeout`.
// Cancel marks the entries submitted so far that have not started: they finish as
// CUFILE_CANCELED without I/O; started ones run to the end. The batch may be submitted to again.
// Destroy cancels, waits for running entries, and frees the batch.
#include "batch.hpp"

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "exports.hpp"
#include "guarded.hpp"
#include "io.hpp"
#include "log.hpp"
#include "sluice/thread_pool.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  CUfileIOParams_t params{};
  CUfileStatus_t status = CUFILE_WAITING;
  ssize_t ret = 0;
  Clock::time_point submitted;
  std::uint64_t generation = 0;  // of the Submit call that queued it
};

struct Batch {
  std::uint64_t id = 0;
  unsigned capacity = 0;
  std::mutex mu;
  std::condition_variable cv;
  unsigned outstanding = 0;            // submitted and not yet returned by GetStatus
  unsigned running = 0;                // jobs queued or running on the pool
  std::uint64_t generation = 0;        // Submit calls so far
  std::uint64_t canceled_through = 0;  // jobs of this generation or older skip their I/O
  std::deque<std::shared_ptr<Job>> done;
};

struct Registry {
  std::mutex mu;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::shared_ptr<Batch>> batches;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked, as State
  return *r;
}

std::shared_ptr<Batch> find(CUfileBatchHandle_t h) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto it = r.batches.find(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(h)));
  return it == r.batches.end() ? nullptr : it->second;
}

std::uint64_t micros(Clock::duration d) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

void run_job(const std::shared_ptr<Batch>& b, const std::shared_ptr<Job>& job) noexcept {
  bool skip = false;
  {
    std::lock_guard lock(b->mu);
    skip = job->generation <= b->canceled_through;
    if (!skip) job->status = CUFILE_PENDING;
  }
  IoOutcome out;
  if (!skip) {
    const auto& p = job->params;
    out = run_io(
        {p.opcode == CUFILE_WRITE, p.fh, p.u.batch.devPtr_base, p.u.batch.size,
         p.u.batch.file_offset, p.u.batch.devPtr_offset},
        p.opcode == CUFILE_WRITE ? "cuFileBatchIOSubmit(write)" : "cuFileBatchIOSubmit(read)");
  }
  Counters& c = State::get().counters();
  if (!skip && State::get().stats_running().load(std::memory_order_relaxed)) {
    (out.ret >= 0 ? c.batch_complete_ok : c.batch_complete_err)
        .fetch_add(1, std::memory_order_relaxed);
    if (out.ret > 0) {
      (job->params.opcode == CUFILE_WRITE ? c.batch_write_bytes : c.batch_read_bytes)
          .fetch_add(static_cast<std::uint64_t>(out.ret), std::memory_order_relaxed);
    }
    c.batch_completion_lat_us.fetch_add(micros(Clock::now() - job->submitted),
                                        std::memory_order_relaxed);
  }
  std::lock_guard lock(b->mu);
  if (skip) {
    job->status = CUFILE_CANCELED;
  } else {
    job->status = out.ret >= 0 ? CUFILE_COMPLETE : CUFILE_FAILED;
    // Batch events carry -errno for an OS error (the errno of a -1 is per thread).
    job->ret = out.ret == -1 ? -static_cast<ssize_t>(out.err_no) : out.ret;
  }
  b->done.push_back(job);
  --b->running;
  b->cv.notify_all();
}

void cancel_and_wait(Batch& b) {
  std::unique_lock lock(b.mu);
  b.canceled_through = b.generation;
  b.cv.wait(lock, [&] { return b.running == 0; });
}

CUfileError_t setup(CUfileBatchHandle_t* batch_idp, unsigned nr) {
  if (batch_idp == nullptr || nr == 0) return status(CU_FILE_INVALID_VALUE);
  const std::size_t cap = State::get().batch_capacity();
  if (nr > cap) {
    log(LogLevel::info, "cuFileBatchIOSetUp: {} entries exceed io_batchsize {}", nr, cap);
    return status(CU_FILE_INVALID_VALUE);
  }
  if (const CUfileError_t st = State::get().ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  auto b = std::make_shared<Batch>();
  b->capacity = nr;
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  b->id = r.next_id++;
  r.batches.emplace(b->id, b);
  *batch_idp = reinterpret_cast<CUfileBatchHandle_t>(static_cast<std::uintptr_t>(b->id));
  return kSuccess;
}

CUfileError_t submit(CUfileBatchHandle_t batch_idp, unsigned nr, const CUfileIOParams_t* iocbp,
                     unsigned flags) {
  const auto t0 = Clock::now();
  const std::shared_ptr<Batch> b = find(batch_idp);
  if (!b || iocbp == nullptr || nr == 0 || flags != 0) return status(CU_FILE_INVALID_VALUE);
  if (const CUfileError_t st = State::get().ensure_open(); st.err != CU_FILE_SUCCESS) return st;
  // All entries or none: check every one before running any.
  for (unsigned i = 0; i < nr; ++i) {
    const CUfileIOParams_t& p = iocbp[i];
    const int opcode = raw(p.opcode);
    if (raw(p.mode) != CUFILE_BATCH || (opcode != CUFILE_READ && opcode != CUFILE_WRITE) ||
        p.u.batch.devPtr_base == nullptr) {
      log(LogLevel::info,
          "cuFileBatchIOSubmit: entry {} is invalid (mode {}, opcode {}, buffer {}, handle {})", i,
          raw(p.mode), opcode, p.u.batch.devPtr_base, p.fh);
      return status(CU_FILE_INVALID_VALUE);
    }
    // The code cuFileRead and cuFileReadAsync give for the same handle.
    if (!State::get().find_handle(p.fh)) {
      log(LogLevel::info, "cuFileBatchIOSubmit: entry {}: handle {} is not registered", i, p.fh);
      return status(CU_FILE_HANDLE_NOT_REGISTERED);
    }
  }
  std::vector<std::shared_ptr<Job>> jobs;
  jobs.reserve(nr);
  {
    std::lock_guard lock(b->mu);
    if (nr > b->capacity) return status(CU_FILE_INVALID_VALUE);
    if (nr > b->capacity - b->outstanding) return status(CU_FILE_BATCH_FULL);
    ++b->generation;
    for (unsigned i = 0; i < nr; ++i) {
      auto job = std::make_shared<Job>();
      job->params = iocbp[i];
      job->submitted = t0;
      job->generation = b->generation;
      jobs.push_back(std::move(job));
    }
    b->outstanding += nr;
    b->running += nr;
  }
  for (auto& job : jobs) default_pool().post([b, job] { run_job(b, job); });
  Counters& c = State::get().counters();
  c.batch_enqueued.fetch_add(nr, std::memory_order_relaxed);
  c.batch_submit_lat_us.fetch_add(micros(Clock::now() - t0), std::memory_order_relaxed);
  return kSuccess;
}

CUfileError_t get_status(CUfileBatchHandle_t batch_idp, unsigned min_nr, unsigned* nr,
                         CUfileIOEvents_t* iocbp, const struct timespec* timeout) {
  const std::shared_ptr<Batch> b = find(batch_idp);
  if (!b || nr == nullptr || iocbp == nullptr || min_nr > *nr ||
      (timeout != nullptr &&
       (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L))) {
    return status(CU_FILE_INVALID_VALUE);
  }
  std::unique_lock lock(b->mu);
  // Never wait for more entries than are outstanding: they could not come.
  const auto enough = [&] {
    return b->done.size() >= std::min<std::size_t>(min_nr, b->outstanding);
  };
  if (timeout == nullptr) {
    b->cv.wait(lock, enough);
  } else {
    const auto limit =
        std::chrono::seconds(timeout->tv_sec) + std::chrono::nanoseconds(timeout->tv_nsec);
    b->cv.wait_for(lock, limit, enough);
  }
  unsigned n = 0;
  while (n < *nr && !b->done.empty()) {
    const std::shared_ptr<Job> job = std::move(b->done.front());
    b->done.pop_front();
    iocbp[n].cookie = job->params.cookie;
    iocbp[n].status = job->status;
    iocbp[n].ret = static_cast<size_t>(job->ret);
    ++n;
  }
  b->outstanding -= n;
  *nr = n;
  return kSuccess;
}

}  // namespace

void destroy_all_batches() {
  std::map<std::uint64_t, std::shared_ptr<Batch>> all;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    all.swap(r.batches);
  }
  for (auto& [id, b] : all) cancel_and_wait(*b);
}

}  // namespace sluice::capi

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below

CUFILE_API CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t* batch_idp, unsigned nr) {
  const CUfileError_t st = guarded("cuFileBatchIOSetUp", [&] { return setup(batch_idp, nr); });
  Counters& c = State::get().counters();
  State::get().count(c.batch_setup_ok, c.batch_setup_err, st.err == CU_FILE_SUCCESS);
  return st;
}

CUFILE_API CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr,
                                             CUfileIOParams_t* iocbp, unsigned int flags) {
  const CUfileError_t st =
      guarded("cuFileBatchIOSubmit", [&] { return submit(batch_idp, nr, iocbp, flags); });
  Counters& c = State::get().counters();
  State::get().count(c.batch_submit_ok, c.batch_submit_err, st.err == CU_FILE_SUCCESS);
  return st;
}

CUFILE_API CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr,
                                                unsigned* nr, CUfileIOEvents_t* iocbp,
                                                struct timespec* timeout) {
  return guarded("cuFileBatchIOGetStatus",
                 [&] { return get_status(batch_idp, min_nr, nr, iocbp, timeout); });
}

CUFILE_API CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp) {
  const std::shared_ptr<Batch> b = find(batch_idp);
  Counters& c = State::get().counters();
  State::get().count(c.batch_cancel_ok, c.batch_cancel_err, b != nullptr);
  if (!b) return status(CU_FILE_INVALID_VALUE);
  std::lock_guard lock(b->mu);
  b->canceled_through = b->generation;
  return kSuccess;
}

CUFILE_API void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp) {
  std::shared_ptr<Batch> b;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    const auto it =
        r.batches.find(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(batch_idp)));
    if (it != r.batches.end()) {
      b = it->second;
      r.batches.erase(it);
    }
  }
  Counters& c = State::get().counters();
  State::get().count(c.batch_destroy_ok, c.batch_destroy_err, b != nullptr);
  if (!b) {
    log(LogLevel::info, "cuFileBatchIODestroy: batch {} does not exist", batch_idp);
    return;
  }
  cancel_and_wait(*b);
}
