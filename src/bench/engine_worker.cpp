// cpu-only threads: the thread's own IoEngine (io_uring unless the configuration says psync),
// `iodepth` block-sized requests in flight on the O_DIRECT descriptor, buffers and file
// registered, latency from prepare() to the completion being reaped. This is the shape of
// fio --ioengine=io_uring --direct=1 --iodepth=N, so the two compare like for like.
#include <sys/mman.h>
#include <sys/uio.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "worker.hpp"

namespace sluice::bench::detail {
namespace {

struct Slot {
  OffsetGen::Op op;
  std::uint64_t done = 0;      // bytes already transferred (a short transfer is continued)
  std::uint64_t start_ns = 0;
};

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

}  // namespace

void run_engine_thread(const ThreadJob& job, ThreadOutcome& out) {
  const Workload& w = *job.w;
  Shared& shared = *job.shared;
  const File& file = *job.file;
  pin_thread(job.cpus);

  const bool direct = w.direct && file.has_direct();
  const int fd = direct ? file.direct_fd() : file.fd();
  const std::string reason =
      direct ? std::string("cpu-only: I/O engine driven directly, O_DIRECT")
             : fmt::format("cpu-only: I/O engine driven directly, buffered: {}",
                           w.direct ? file.direct_reason() : std::string("--buffered"));

  const std::uint64_t stride = round_up(w.block_size, 4096);
  // Transparent huge pages where the system allows them: a 1 MiB O_DIRECT request then maps to
  // a few physically contiguous segments instead of 256 pages, which devices that pay per
  // scatter-gather segment (virtio-blk: 254 segments a request) reward.
  constexpr std::size_t huge = 2 * MiB;
  const std::size_t bytes = round_up(stride * w.iodepth, huge);
  void* raw = nullptr;
  if (posix_memalign(&raw, huge, bytes) != 0) {
    throw_os_error(ENOMEM, {.op = "bench"}, fmt::format("cannot allocate {} of I/O buffers", format_size(bytes)));
  }
  (void)::madvise(raw, bytes, MADV_HUGEPAGE);
  std::unique_ptr<std::byte, AlignedFree> mem(static_cast<std::byte*>(raw));
  fill_pattern(mem.get(), 0, bytes, w.seed ^ 0x5A5A);  // write data for runs that do not verify

  std::unique_ptr<IoEngine> engine = make_engine(resolve_engine(job.cfg->engine), w.iodepth);
  const iovec iov{mem.get(), bytes};
  const bool fixed_buf = engine->register_buffers({&iov, 1});
  const int slot_fd = engine->register_file(fd);

  OffsetGen gen(job.region, w.block_size, w, w.seed + 0x9E37ULL * (job.index + 1));
  std::vector<Slot> slots(w.iodepth);
  std::vector<unsigned> free_slots;
  for (unsigned i = w.iodepth; i-- > 0;) free_slots.push_back(i);
  std::vector<IoCompletion> done(w.iodepth);
  bool exhausted = false;

  auto issue = [&](unsigned i) {
    Slot& s = slots[i];
    IoRequest r;
    r.op = s.op.op;
    r.fd = slot_fd >= 0 ? slot_fd : fd;
    r.fixed_file = slot_fd >= 0;
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
        if (w.verify && s.op.op == IoOp::write) {
          fill_pattern(mem.get() + stride * i, s.op.offset, s.op.len, w.seed);
        }
        s.start_ns = now_ns();
        issue(i);
      }
      if (engine->in_flight() == 0) break;
      const std::size_t n = engine->submit_and_wait(done, 1);
      const std::uint64_t t = now_ns();
      for (std::size_t k = 0; k < n; ++k) {
        const auto i = static_cast<unsigned>(done[k].tag);
        Slot& s = slots[i];
        const std::int64_t res = done[k].result;
        const ErrorContext ctx{.op = s.op.op == IoOp::read ? "read" : "write", .path = file.path(),
                               .offset = s.op.offset + s.done, .size = s.op.len - s.done,
                               .has_range = true};
        if (res < 0) throw Error(ErrorDomain::os, static_cast<int>(-res), ctx);
        if (res == 0) throw Error(ErrorDomain::data, 0, ctx, "unexpected end of file");
        s.done += static_cast<std::uint64_t>(res);
        if (s.done < s.op.len) {  // short transfer: continue it, the latency keeps running
          issue(i);
          continue;
        }
        if (w.verify && s.op.op == IoOp::read) {
          if (auto bad = check_pattern(mem.get() + stride * i, s.op.offset, s.op.len, w.seed)) {
            throw Error(ErrorDomain::data, 0, ctx, mismatch_message(file, *bad, s.op.offset, w.seed));
          }
        }
        out.count(job, s.op.op, s.op.len, t - s.start_ns);
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
  out.paths[{"host", reason}] += out.ios;
  if (slot_fd >= 0) engine->unregister_file(slot_fd);
  if (fixed_buf) engine->unregister_buffers();
}

}  // namespace sluice::bench::detail
