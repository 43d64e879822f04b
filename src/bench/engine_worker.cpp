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

constexpr unsigned max_retries = 64;

// Requests handed to the kernel per io_uring_enter in the default loop: a sixteenth of the depth
// (2 at depth 32), so a refill reaches the device a few requests at a time (see the top).
unsigned default_chunk(unsigned iodepth) {
  return std::max(1U, iodepth / 16);
}

}  // namespace

void run_engine_thread(const ThreadJob& job, ThreadOutcome& out) {
  const Workload& w = *job.w;
  Shared& shared = *job.shared;
  const File& file = *job.file;
  pin_thread(job.cpus);

  const bool direct = w.direct && file.has_direct();
  const int fd = direct ? file.direct_fd() : file.fd();
  const std::string pages = w.huge_pages ? "huge-page buffers" : "4 KiB-page buffers";
  const std::string reason =
      direct ? fmt::format("cpu-only: I/O engine driven directly, O_DIRECT, {}", pages)
             : fmt::format("cpu-only: I/O engine driven directly, {}, buffered: {}", pages,
                           w.direct ? file.direct_reason() : std::string("--buffered"));
  const std::string cached_reason = fmt::format(
      "cpu-only: I/O engine driven directly, {}, buffered: {}", pages,
      w.cache_policy == CachePolicy::use ? "--cache-policy use" : "the page cache held the block (--cache-policy auto)");
  std::optional<ResidencyProbe> residency;
  if (direct && w.cache_policy == CachePolicy::automatic && does_reads(w.rw)) {
    residency.emplace(file.fd(), job.region.lo, job.region.hi - job.region.lo);
  }
  // Whether a new block goes to the buffered descriptor (reads only).
  auto buffered_read = [&](const OffsetGen::Op& op) {
    if (!direct || op.op != IoOp::read || w.cache_policy == CachePolicy::bypass) return false;
    if (!residency) return true;  // use
    const Residency r = residency->probe_edges(op.offset, op.len);
    return 2 * r.cached >= r.pages;
  };
  std::uint64_t cached_ios = 0;

  const std::uint64_t stride = round_up(w.block_size, 4096);
  // Transparent huge pages where the system allows them: a 1 MiB O_DIRECT request then maps to
  // a few physically contiguous segments instead of 256 pages, which devices that pay per
  // scatter-gather segment (virtio-blk: 254 segments a request) reward. --no-hugepages keeps
  // 4 KiB pages, as fio's default malloc'd buffers have. A fresh mapping, not the heap: after
  // an earlier run in this process (doctor's probes, --compare, sweeps) the heap hands back
  // pages already faulted in as 4 KiB pages, which read 64 KiB blocks at a quarter of the speed.
  // Whole 2 MiB pages when huge, even for one 4 KiB block.
  const std::size_t bytes =
      static_cast<std::size_t>(round_up(stride * w.iodepth, w.huge_pages ? 2 * MiB : 4096));
  const HostMapping mem(bytes, w.huge_pages);

  std::unique_ptr<IoEngine> engine = make_engine(resolve_engine(job.cfg->engine), w.iodepth);
  // The pages were faulted in by the kernel in one tight loop (map_host_memory populates the
  // mapping, as fio --fixedbufs's registration of untouched memory does): on a busy machine they
  // come out far more physically contiguous than pages faulted one by one from user space while
  // other processes allocate (1 MiB reads at depth 32 into 4 KiB pages on a busy virtio-blk VM:
  // median 0.76 against 0.38 GiB/s over 4 interleaved rounds).
  const iovec iov{mem.get(), bytes};
  const bool fixed_buf = engine->register_buffers({&iov, 1});
  const int slot_fd = engine->register_file(fd);
  fill_pattern(mem.get(), 0, bytes, w.seed ^ 0x5A5A);  // write data for runs that do not verify

  OffsetGen gen(job.region, w.block_size, w, w.seed + 0x9E37ULL * (job.index + 1));
  std::vector<Slot> slots(w.iodepth);
  std::vector<unsigned> free_slots;
  for (unsigned i = w.iodepth; i-- > 0;) free_slots.push_back(i);
  std::vector<IoCompletion> done(w.iodepth);
  const std::size_t reap = w.reap_batch > 0 ? std::min<std::size_t>(w.reap_batch, done.size()) : done.size();
  bool exhausted = false;
  const bool clat = w.submit_batch > 0 && engine->kind() == EngineKind::uring;
  const unsigned chunk = default_chunk(w.iodepth);  // the default loop's submission size
  unsigned unsent = 0;
  std::vector<unsigned> unsubmitted;  // prepared, not yet handed to the kernel
  unsubmitted.reserve(w.iodepth);
  auto submit_prepared = [&] {
    (void)engine->submit_and_wait({}, 0);  // submit only: completions wait for the reap
    const std::uint64_t t = now_ns();
    for (unsigned i : unsubmitted) slots[i].submitted_ns = t;
    unsubmitted.clear();
  };

  auto issue = [&](unsigned i) {
    Slot& s = slots[i];
    IoRequest r;
    r.op = s.op.op;
    r.fd = s.buffered ? file.cache_fd() : (slot_fd >= 0 ? slot_fd : fd);
    r.fixed_file = !s.buffered && slot_fd >= 0;
    r.buf = mem.get() + stride * i + s.done;
    r.len = static_cast<std::uint32_t>(s.op.len - s.done);
    r.offset = s.op.offset + s.done;
    r.tag = i;
    r.buf_index = fixed_buf ? 0 : -1;
    engine->prepare(r);
  };

  try {
    for (;;) {
      while (!free_slots.empty() && !exhausted && !shared.stop.load(std::memory_order_relaxed)) {
        const unsigned i = free_slots.back();
        Slot& s = slots[i];
        if (!gen.next(s.op)) {
          exhausted = true;
          break;
        }
        free_slots.pop_back();
        s.done = 0;
        s.retries = 0;
        s.buffered = buffered_read(s.op);
        if (w.verify && s.op.op == IoOp::write) {
          fill_pattern(mem.get() + stride * i, s.op.offset, s.op.len, w.seed);
        }
        s.start_ns = now_ns();
        issue(i);
        if (w.submit_batch > 0) {
          unsubmitted.push_back(i);
          if (unsubmitted.size() == w.submit_batch) submit_prepared();
        } else if (++unsent == chunk && !free_slots.empty()) {
          // Submit only, while more of the refill follow; the last group goes with the wait (at
          // depth 1: the request and the wait in one syscall).
          (void)engine->submit_and_wait({}, 0);
          unsent = 0;
        }
      }
      if (clat && !unsubmitted.empty()) submit_prepared();
      unsubmitted.clear();  // without clat, the wait below submits them
      unsent = 0;
      if (engine->in_flight() == 0) break;
      const std::size_t n = engine->submit_and_wait(std::span(done).first(reap), 1);
      const std::uint64_t t = now_ns();
      for (std::size_t k = 0; k < n; ++k) {
        const auto i = static_cast<unsigned>(done[k].tag);
        Slot& s = slots[i];
        const std::int64_t res = done[k].result;
        const ErrorContext ctx{.op = s.op.op == IoOp::read ? "read" : "write", .path = file.path(),
                               .offset = s.op.offset + s.done, .size = s.op.len - s.done,
                               .has_range = true};
        if ((res == -EINTR || res == -EAGAIN) && s.retries++ < max_retries) {
          issue(i);  // the kernel asks to try again: the remaining bytes, latency still running
          continue;
        }
        if (res < 0) throw Error(ErrorDomain::os, static_cast<int>(-res), ctx);
        if (res == 0) throw Error(ErrorDomain::data, EIO, ctx, "unexpected end of file");
        s.done += static_cast<std::uint64_t>(res);
        if (s.done < s.op.len) {  // short transfer: continue it, both latencies keep running
          issue(i);
          continue;
        }
        if (w.verify && s.op.op == IoOp::read) {
          if (auto bad = check_pattern(mem.get() + stride * i, s.op.offset, s.op.len, w.seed)) {
            throw Error(ErrorDomain::data, EIO, ctx, mismatch_message(file, *bad, s.op.offset, w.seed));
          }
        }
        out.count(job, s.op.op, s.op.len, t - s.start_ns);
        if (s.buffered) ++cached_ios;
        if (clat) out.clat.record(t - s.submitted_ns);
        free_slots.push_back(i);
      }
      if (shared.past_deadline(t)) shared.stop.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    shared.fail(e.what());
    // Drain: the kernel may still be writing into our buffers.
    while (engine->in_flight() > 0) {
      try {
        engine->submit_and_wait(done, 1);
      } catch (...) {
        break;
      }
    }
  }
  out.issued = gen.issued();
  if (cached_ios < out.ios || cached_ios == 0) out.paths[{"host", reason}] += out.ios - cached_ios;
  if (cached_ios > 0) out.paths[{"host", cached_reason}] += cached_ios;
  if (slot_fd >= 0) engine->unregister_file(slot_fd);
  if (fixed_buf) engine->unregister_buffers();
}

}  // namespace sluice::bench::detail
