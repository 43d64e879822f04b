// sluice read: the project's dd, file -> (host or GPU) memory -> OUT. The range is read in pieces through the
// library, several in flight, so the next reads run while a piece is written out.
//
// Piece size (unless --piece says), when reads go through the page cache (cache_policy use, or
// auto and the cache holds 90% of the range or more): two chunks (2 x io_size, or 2 x
// bounce_buffer_size into GPU memory). Reading from the cache is a memory copy: small buffers
// stay in the CPU's cache and cost little to map (two 256 MiB buffers made a warm 1 GiB read 2-3x
// slower than dd). Otherwise 16 MiB (16 x io_size, or 4 x bounce_buffer_size: the staging pool's
// 16 buffers across four pieces in flight): reading from the device wants many I/Os in flight,
// which four pieces give (each is split into io_size reads), and a range only partly cached
// wants pieces that mix copies from the cache with O_DIRECT reads in flight.
//
// Pieces of 16 MiB or less go four in flight, larger ones two. A small piece is copied in about
// a millisecond, so a pool thread that finishes one must find the next already queued: with two
// in flight each piece waited for the main thread to wake, take the finished one and hand out
// the next. Warm 1 GiB into host memory, 15 interleaved rounds, 2 cores, medians of wall time
// against dd bs=1M: 4 MiB pieces two in flight 0.97x dd (in-tool 0.122 s), three 1.34x
// (0.084 s); 2 MiB pieces four in flight 1.46x (0.078 s), three 1.26x. Into the sim device
// (11 rounds, wall): 16 MiB pieces two in flight 0.288 s, 8 MiB four in flight 0.256 s, three
// 0.277 s, 4 MiB four in flight 0.262 s.
//
// Piece buffers are fresh memory the process faults in before the first read, and on a VM that
// can cost far more than the reads: the 64 MiB pieces used before (three buffers, 192 MiB) took
// 17-765 ms to fault in when the page cache had just been dropped (the host had taken the freed
// memory back). 1 GiB, 7 interleaved rounds, wall medians: cold, host memory 64 MiB pieces two
// in flight 0.643 s, 16 MiB four 0.454 s, 8 MiB four 0.454 s, 8 MiB eight 0.434 s; half cached
// (every other 16 MiB) 0.634, 0.260, 0.332, 0.319 s (all buffered: 0.421 s); into the sim device
// cold 0.851 -> 0.568 s and half cached 0.777 -> 0.339 s for 64 MiB two -> 16 MiB four.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "read_remote.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/remote.hpp"
#include "sluice/residency.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

struct ReadArgs {
  std::string file;
  std::string offset = "0";
  std::string length;
  std::string out;
  std::string path = "auto";
  std::string device;
  std::string piece = "auto";
  std::string cache_policy;
  std::string part_size;
  unsigned in_flight = 0;
  bool json = false;
};

// The reason of a read made of pieces: the last piece's, unless the page cache served only some
// of the bytes, which it then says (as sluice load's summary does).
struct PieceReasons {
  std::string cached, other;  // the last piece wholly from the cache, and the last that was not
  void add(const TransferResult& r) {
    if (r.bytes > 0) (r.cached_bytes == r.bytes ? cached : other) = r.reason;
  }
  [[nodiscard]] std::string of(const TransferResult& total) const {
    if (other.empty()) return cached.empty() ? "end of file" : cached;
    if (total.cached_bytes == 0) return other;
    return fmt::format("page cache held {}% of the bytes: {} read buffered, {} as: {}",
                       total.cached_bytes * 100 / total.bytes, format_size(total.cached_bytes),
                       format_size(total.bytes - total.cached_bytes), other);
  }
};

constexpr std::uint64_t small_piece = 16 * MiB;  // and smaller: four in flight (top of file)

std::uint64_t auto_piece(const File& file, std::uint64_t offset, std::uint64_t length, bool device) {
  const Config& cfg = *config();
  const std::uint64_t chunk = device ? cfg.bounce_buffer_size : cfg.io_size;
  const std::uint64_t from_cache = 2 * chunk;
  const std::uint64_t from_device = device ? 4 * chunk : 16 * chunk;
  if (cfg.cache_policy == CachePolicy::use || !cfg.direct_io || !file.has_direct()) return from_cache;
  const std::uint64_t size = file.size();
  if (cfg.cache_policy == CachePolicy::bypass || offset >= size || length == 0) return from_device;
  // 16 samples of 64 KiB across the range: probing a whole warm GiB takes the kernel ~25 ms.
  const std::uint64_t n = std::min(length, size - offset);
  const ResidencyProbe probe(file.fd(), offset, n);
  constexpr std::uint64_t samples = 16;
  const std::uint64_t window = std::min<std::uint64_t>(ResidencyProbe::edge_bytes, n);
  std::uint64_t pages = 0, cached = 0;
  for (std::uint64_t i = 0; i < samples; ++i) {
    const Residency r = probe.probe(offset + (n - window) / (samples - 1) * i, window);
    pages += r.pages;
    cached += r.cached;
  }
  return 10 * cached >= 9 * pages ? from_cache : from_device;
}

// Reads [offset, offset + length) in pieces, four or two in flight, and writes each out in order
// while the next ones are read: a read never waits for the hand-off that starts the one after it.
// The result's seconds are the wall time of the whole stream.
TransferResult stream_pieces(const File& file, const TransferTarget& target, std::uint64_t offset,
                             std::uint64_t length, std::uint64_t piece, int out_fd, const std::string& out_name) {
  const std::size_t in_flight = piece <= small_piece ? 4 : 2;
  const std::uint64_t pieces = (length + piece - 1) / piece;
  const std::size_t nbufs = static_cast<std::size_t>(std::clamp<std::uint64_t>(pieces, 1, in_flight + 1));
  const auto buf_size = static_cast<std::size_t>(std::min(piece, std::max<std::uint64_t>(length, 1)));
  // Pieces are downloaded and written out one at a time, on this thread: one host mirror serves
  // all of them when they are on a GPU.
  std::vector<std::unique_ptr<PieceBuffer>> bufs;
  for (std::size_t i = 0; i < nbufs; ++i) {
    const PieceBuffer* first = bufs.empty() ? nullptr : bufs.front().get();
    bufs.push_back(std::make_unique<PieceBuffer>(target, buf_size, first));
  }
  struct Pending {
    std::size_t buf;
    std::uint64_t asked;
    TransferFuture result;
  };
  std::deque<Pending> pending;
  // On an error, reads still in flight target the buffers: wait for them before they go.
  struct Drain {
    std::deque<Pending>& q;
    ~Drain() {
      for (auto& p : q) if (p.result.valid()) p.result.wait();
    }
  } drain{pending};

  TransferResult total;
  PieceReasons reasons;
  std::uint64_t issued = 0;
  std::size_t next_buf = 0;
  bool ended = false;  // a piece came back short: the file ended there
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    while (!ended && pending.size() < in_flight && issued < length) {
      const std::uint64_t asked = std::min(piece, length - issued);
      pending.push_back({next_buf, asked, read_async(file, bufs[next_buf]->data(), asked, offset + issued, target.options)});
      issued += asked;
      next_buf = (next_buf + 1) % nbufs;
    }
    if (pending.empty()) break;
    const TransferResult r = pending.front().result.get();
    const Pending done = {pending.front().buf, pending.front().asked, {}};
    pending.pop_front();
    if (ended) continue;  // read past the end the file had: nothing to write
    total.bytes += r.bytes;
    total.ios += r.ios;
    total.cached_bytes += r.cached_bytes;
    total.path = r.path;
    reasons.add(r);
    ended = r.bytes < done.asked;
    write_all(out_fd, bufs[done.buf]->download(r.bytes), r.bytes, out_name);
  }
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  total.reason = reasons.of(total);
  return total;
}

// A URL goes to the remote reader (host memory only so far: docs/remote.md).
int run_url_read(const ReadArgs& a) {
  if (!a.device.empty() || (a.path != "auto" && a.path != "host")) {
    throw UsageError("a URL is read into host memory only so far (no --device or --path)");
  }
  RemoteRead r{.url = a.file, .offset = to_size(a.offset, "--offset"), .length = {}, .out = a.out,
               .part_size = a.part_size, .in_flight = a.in_flight, .json = a.json};
  if (!a.length.empty()) r.length = to_size(a.length, "--length");
  return run_remote_read(r);
}

int run_read(const ReadArgs& a) {
  if (is_remote_url(a.file)) return run_url_read(a);
  const std::uint64_t offset = to_size(a.offset, "--offset");
  apply_cache_policy(a.cache_policy);
  const TransferTarget target = TransferTarget::from_args(a.device, a.path);

  File file = File::open(a.file, OpenMode::read);
  const std::uint64_t file_size = file.size();
  std::uint64_t length = a.length.empty() ? (offset < file_size ? file_size - offset : 0)
                                          : to_size(a.length, "--length");
  const std::uint64_t piece = a.piece == "auto" ? auto_piece(file, offset, length, target.device != nullptr) : to_size(a.piece, "--piece");
  if (piece == 0) throw UsageError("--piece must be larger than 0");

  const bool to_stdout = a.out == "-";
  const int out_fd = open_output(a.out);

  const double cpu0 = cpu_seconds();
  TransferResult total =
      stream_pieces(file, target, offset, length, piece, out_fd, to_stdout ? std::string("stdout") : a.out);
  if (!to_stdout && ::close(out_fd) != 0) throw_os_error(errno, {.op = "close", .path = a.out}, "cannot close output");

  const double cpu = cpu_seconds() - cpu0;
  FILE* report = to_stdout ? stderr : stdout;
  std::fputs((a.json ? summary_json("read", a.file, total, cpu) : summary_line("read", a.file, total, cpu)).c_str(), report);
  std::fputc('\n', report);
  return 0;
}

}  // namespace

Runner add_read_command(CLI::App& app) {
  auto args = std::make_shared<ReadArgs>();
  auto* cmd = app.add_subcommand("read", "Read a byte range of FILE through sluice and write it to OUT");
  cmd->add_option("FILE", args->file, "file, block device or http(s):// URL to read")->required();
  cmd->add_option("--offset,-o", args->offset, "first byte to read (size units allowed)")
      ->check(size_validator());
  cmd->add_option("--length,-n", args->length, "bytes to read (default: to the end of the file)")
      ->check(size_validator());
  cmd->add_option("--out", args->out, "where the bytes go ('-' for standard output)")->required();
  add_target_options(cmd, args->device, args->path);
  add_cache_policy_option(cmd, args->cache_policy);
  cmd->add_option("--piece", args->piece,
                  "bytes per library call while streaming (auto: 2 x io_size, or 2 x "
                  "bounce_buffer_size into GPU memory, when the page cache holds 90% of the range "
                  "or more, else 16 x io_size, or 4 x bounce_buffer_size); pieces of 16M or less "
                  "go four in flight, larger ones two")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto"}) | size_validator());
  cmd->add_option("--part-size", args->part_size,
                  "URLs: bytes per ranged GET (default 8M, or SLUICE_REMOTE_PART_SIZE)")
      ->check(size_validator());
  cmd->add_option("--in-flight", args->in_flight,
                  "URLs: ranged GETs in flight at most (default 16, or SLUICE_REMOTE_IN_FLIGHT)")
      ->check(CLI::Range(1, 128));
  cmd->add_flag("--json", args->json, "print one JSON line: path, reason, bytes, seconds");
  return [args] { return run_read(*args); };
}

}  // namespace sluice::cli
