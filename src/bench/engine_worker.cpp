// cpu-only threads: the thread's own IoEngine (io_uring unless the configuration says psync),
// `iodepth` block-sized requests in flight on the O_DIRECT descriptor, buffers and file
// registered, latency from prepare() to the completion being reaped. This is the shape of
// fio --ioengine=io_uring --direct=1 --iodepth=N, so the two compare like for like.
//
// Loop shape: by default every completion that is ready is collected at once (one timestamp for
// all of them) and every freed slot is refilled; the new requests go to the kernel a sixteenth of
// the depth at a time (2 at depth 32), each group in an io_uring_enter of its own and the last
// with the io_uring_enter that waits for the next completion. Handing a whole refill over in one
// io_uring_enter, as this loop did first, keeps the device waiting: io_uring plugs a
// multi-request submission, so no request of it reaches the device before the syscall has
// prepared them all, and a fast device (the loop device over tmpfs does a 4 KiB read in a few
// microseconds) drains its queue meanwhile. Against fio's loop in slices alternated within one
// process (4 KiB random reads at depth 32 on that device): one submission per refill 0.66-0.81x,
// groups of 4 0.84-0.91x, of 2 0.93-1.04x, of 1 0.96-1.16x with twice the syscalls; waiting for
// more than one completion did not help (docs/tuning.md, "Small random reads"). fio's default
// loop collects one completion per wait (iodepth_batch_complete_max=1) and submits each new
// request with its own io_uring_enter (iodepth_batch_submit=1); --reap-batch 1 --submit-batch 1
// reproduce that, and --submit-batch N submits every N. The shape does not change what is in
// flight, but it moves where the time spent in other requests' syscalls is charged, so at high
// depth the same device gives another latency median (docs/bench.md, "Comparing with fio").
//
// Completion latency (fio's clat): from the return of the io_uring_enter that submitted a
// request to its completion being reaped, leaving out the submitting syscall. Only a loop that
// submits in syscalls of its own (--submit-batch N, io_uring) has that moment, so only such a
// run measures it; it then also submits a partial batch on its own before waiting, as fio
// commits what it has queued before it waits for completions.
//
// --cache-policy auto: each read block is probed (cachestat) as it is issued, and one the page
// cache holds at least half of goes to the buffered descriptor; the report counts the I/Os of
// each kind under its own reason. use: every read buffered. Writes stay on O_DIRECT.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/residency.hpp"
#include "worker.hpp"

namespace sluice::bench::detail {
namespace {

struct Slot {
  OffsetGen::Op op;
  std::uint64_t done = 0;      // bytes already transferred (a short transfer is continued)
  std::uint64_t start_ns = 0;
  std::uint64_t submitted_ns = 0;  // the submitting io_uring_enter returned (clat runs only)
  unsigned retries = 0;        // EINTR/EAGAIN completions resubmitted (as the library does)
  bool buffered = false;       // a read the page cache holds: on the buffered descriptor
};

// Requests handed to the kernel per io_uring_enter in the default loop: a sixteenth of the depth
// (2 at depth 32), so a refill reaches the device a few requests at a time (see the top).
unsigned default_chunk(unsigned iodepth) {
  return std::max(1U, iodepth / 16);
}

// One engine thread's loop: its slots (one block-sized buffer each, `iodepth` of them), the
// engine with those buffers and the file registered, and the offsets still to issue.
class EngineLoop {
 public:
  EngineLoop(const ThreadJob& job, ThreadOutcome& out);
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Issues and completes until the offsets run out or the run stops; a failure stops every
  // thread (Shared::fail) after the requests in flight drained.
  void run();
  // The path counts into the outcome, and the registrations undone.
  void finish();

 private:
  [[nodiscard]] bool buffered_read(const OffsetGen::Op& op);
  void submit_prepared();
  void issue(unsigned i);
  void refill();
  void reap();
  [[nodiscard]] bool complete(const IoCompletion& c, std::uint64_t t);

  const ThreadJob& job_;
  const Workload& w_;
  Shared& shared_;
  const File& file_;
  ThreadOutcome& out_;
  const bool direct_;
  const int fd_;
  std::optional<ResidencyProbe> residency_;
  std::uint64_t cached_ios_ = 0;
  const std::uint64_t stride_;
  const std::size_t bytes_;
  const HostMapping mem_;  // declared before the engine: the engine goes first
  std::unique_ptr<IoEngine> engine_;
  bool fixed_buf_ = false;
  int slot_fd_ = -1;
  OffsetGen gen_;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_slots_;
  std::vector<IoCompletion> done_;
  std::size_t reap_;
  bool exhausted_ = false;
  bool clat_ = false;
  const unsigned chunk_;  // the default loop's submission size
  unsigned unsent_ = 0;
  std::vector<unsigned> unsubmitted_;  // prepared, not yet handed to the kernel
};

// Transparent huge pages where the system allows them: a 1 MiB O_DIRECT request then maps to a
// few physically contiguous segments instead of 256 pages, which devices that pay per
// scatter-gather segment (virtio-blk: 254 segments a request) reward. --no-hugepages keeps 4 KiB
// pages, as fio's default malloc'd buffers have. A fresh mapping, not the heap: after an earlier
// run in this process (doctor's probes, --compare, sweeps) the heap hands back pages already
// faulted in as 4 KiB pages, which read 64 KiB blocks at a quarter of the speed. Whole 2 MiB
// pages when huge, even for one 4 KiB block.
EngineLoop::EngineLoop(const ThreadJob& job, ThreadOutcome& out)
    : job_(job), w_(*job.w), shared_(*job.shared), file_(*job.file), out_(out),
      direct_(w_.direct && file_.has_direct()), fd_(direct_ ? file_.direct_fd() : file_.fd()),
      stride_(round_up(w_.block_size, 4096)),
      bytes_(static_cast<std::size_t>(round_up(stride_ * w_.iodepth, w_.huge_pages ? 2 * MiB : 4096))),
      mem_(bytes_, w_.huge_pages),
      engine_(make_engine(resolve_engine(job.cfg->engine), w_.iodepth)),
      gen_(job.region, w_.block_size, w_, w_.seed + 0x9E37ULL * (job.index + 1)), slots_(w_.iodepth),
      done_(w_.iodepth),
      reap_(w_.reap_batch > 0 ? std::min<std::size_t>(w_.reap_batch, done_.size()) : done_.size()),
      chunk_(default_chunk(w_.iodepth)) {
  if (direct_ && w_.cache_policy == CachePolicy::automatic && does_reads(w_.rw)) {
    residency_.emplace(file_.fd(), job.region.lo, job.region.hi - job.region.lo);
  }
  // The pages were faulted in by the kernel in one tight loop (map_host_memory populates the
  // mapping, as fio --fixedbufs's registration of untouched memory does): on a busy machine they
  // come out far more physically contiguous than pages faulted one by one from user space while
  // other processes allocate (1 MiB reads at depth 32 into 4 KiB pages on a busy virtio-blk VM:
  // median 0.76 against 0.38 GiB/s over 4 interleaved rounds).
  const iovec iov{mem_.get(), bytes_};
  fixed_buf_ = engine_->register_buffers({&iov, 1});
  slot_fd_ = engine_->register_file(fd_);
  fill_pattern(mem_.get(), 0, bytes_, w_.seed ^ 0x5A5A);  // write data for runs that do not verify
  for (unsigned i = w_.iodepth; i-- > 0;) free_slots_.push_back(i);
  clat_ = w_.submit_batch > 0 && engine_->kind() == EngineKind::uring;
  unsubmitted_.reserve(w_.iodepth);
}

// Whether a new block goes to the buffered descriptor (reads only).
bool EngineLoop::buffered_read(const OffsetGen::Op& op) {
  if (!direct_ || op.op != IoOp::read || w_.cache_policy == CachePolicy::bypass) return false;
  if (!residency_) return true;  // use
  const Residency r = residency_->probe_edges(op.offset, op.len);
  return 2 * r.cached >= r.pages;
}

void EngineLoop::submit_prepared() {
  (void)engine_->submit_and_wait({}, 0);  // submit only: completions wait for the reap
  const std::uint64_t t = now_ns();
  for (unsigned i : unsubmitted_) slots_[i].submitted_ns = t;
  unsubmitted_.clear();
}

void EngineLoop::issue(unsigned i) {
  Slot& s = slots_[i];
  IoRequest r;
  r.op = s.op.op;
  r.fd = s.buffered ? file_.cache_fd() : (slot_fd_ >= 0 ? slot_fd_ : fd_);
  r.fixed_file = !s.buffered && slot_fd_ >= 0;
  r.buf = mem_.get() + stride_ * i + s.done;
  r.len = static_cast<std::uint32_t>(s.op.len - s.done);
  r.offset = s.op.offset + s.done;
  r.tag = i;
  r.buf_index = fixed_buf_ ? 0 : -1;
  engine_->prepare(r);
}

// Fills every free slot with the next block (while the run goes on), submitting in the loop's
// shape (see the top of the file).
void EngineLoop::refill() {
  while (!free_slots_.empty() && !exhausted_ && !shared_.stop.load(std::memory_order_relaxed)) {
    const unsigned i = free_slots_.back();
    Slot& s = slots_[i];
    if (!gen_.next(s.op)) {
      exhausted_ = true;
      break;
    }
    free_slots_.pop_back();
    s.done = 0;
    s.retries = 0;
    s.buffered = buffered_read(s.op);
    if (w_.verify && s.op.op == IoOp::write) {
      fill_pattern(mem_.get() + stride_ * i, s.op.offset, s.op.len, w_.seed);
    }
    s.start_ns = now_ns();
    issue(i);
    if (w_.submit_batch > 0) {
      unsubmitted_.push_back(i);
      if (unsubmitted_.size() == w_.submit_batch) submit_prepared();
    } else if (++unsent_ == chunk_ && !free_slots_.empty()) {
      // Submit only, while more of the refill follow; the last group goes with the wait (at
      // depth 1: the request and the wait in one syscall).
      (void)engine_->submit_and_wait({}, 0);
      unsent_ = 0;
    }
  }
  if (clat_ && !unsubmitted_.empty()) submit_prepared();
  unsubmitted_.clear();  // without clat, the wait below submits them
  unsent_ = 0;
}

// Waits for at least one completion and handles every one that is ready.
void EngineLoop::reap() {
  const std::size_t n = engine_->submit_and_wait(std::span(done_).first(reap_), 1);
  const std::uint64_t t = now_ns();
  for (std::size_t k = 0; k < n; ++k) {
    if (complete(done_[k], t)) free_slots_.push_back(static_cast<unsigned>(done_[k].tag));
  }
  if (shared_.past_deadline(t)) shared_.stop.store(true, std::memory_order_relaxed);
}

// One completion: retried or continued (false), or counted (true: its slot is free). Throws on
// an error, an unexpected end of file or a verify mismatch.
bool EngineLoop::complete(const IoCompletion& c, std::uint64_t t) {
  const auto i = static_cast<unsigned>(c.tag);
  Slot& s = slots_[i];
  const std::int64_t res = c.result;
  const ErrorContext ctx{.op = s.op.op == IoOp::read ? "read" : "write", .path = file_.path(),
                         .offset = s.op.offset + s.done, .size = s.op.len - s.done,
                         .has_range = true};
  if ((res == -EINTR || res == -EAGAIN) && s.retries++ < sluice::max_transient_retries) {
    issue(i);  // the kernel asks to try again: the remaining bytes, latency still running
    return false;
  }
  if (res < 0) throw Error(ErrorDomain::os, static_cast<int>(-res), ctx);
  if (res == 0) throw Error(ErrorDomain::data, EIO, ctx, "unexpected end of file");
  s.done += static_cast<std::uint64_t>(res);
  if (s.done < s.op.len) {  // short transfer: continue it, both latencies keep running
    issue(i);
    return false;
  }
  if (w_.verify && s.op.op == IoOp::read) {
    if (auto bad = check_pattern(mem_.get() + stride_ * i, s.op.offset, s.op.len, w_.seed)) {
      throw Error(ErrorDomain::data, EIO, ctx, mismatch_message(file_, *bad, s.op.offset, w_.seed));
    }
  }
  out_.count(job_, s.op.op, s.op.len, t - s.start_ns);
  if (s.buffered) ++cached_ios_;
  if (clat_) out_.clat.record(t - s.submitted_ns);
  return true;
}

void EngineLoop::run() {
  try {
    for (;;) {
      refill();
      if (engine_->in_flight() == 0) break;
      reap();
    }
  } catch (const std::exception& e) {
    shared_.fail(e.what());
    // Drain: the kernel may still be writing into our buffers.
    while (engine_->in_flight() > 0) {
      try {
        engine_->submit_and_wait(done_, 1);
      } catch (...) {
        break;
      }
    }
  }
}

void EngineLoop::finish() {
  const std::string pages = w_.huge_pages ? "huge-page buffers" : "4 KiB-page buffers";
  const std::string reason =
      direct_ ? fmt::format("cpu-only: I/O engine driven directly, O_DIRECT, {}", pages)
              : fmt::format("cpu-only: I/O engine driven directly, {}, buffered: {}", pages,
                            w_.direct ? file_.direct_reason() : std::string("--buffered"));
  const std::string cached_reason = fmt::format(
      "cpu-only: I/O engine driven directly, {}, buffered: {}", pages,
      w_.cache_policy == CachePolicy::use ? "--cache-policy use" : "the page cache held the block (--cache-policy auto)");
  out_.issued = gen_.issued();
  if (cached_ios_ < out_.ios || cached_ios_ == 0) out_.paths[{"host", reason}] += out_.ios - cached_ios_;
  if (cached_ios_ > 0) out_.paths[{"host", cached_reason}] += cached_ios_;
  if (slot_fd_ >= 0) engine_->unregister_file(slot_fd_);
  if (fixed_buf_) engine_->unregister_buffers();
}

}  // namespace

void run_engine_thread(const ThreadJob& job, ThreadOutcome& out) {
  pin_thread(job.cpus);  // before the buffers are mapped: their pages come from this node
  EngineLoop loop(job, out);
  loop.run();
  loop.finish();
}

}  // namespace sluice::bench::detail
