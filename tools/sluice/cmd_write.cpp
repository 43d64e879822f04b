// sluice write: IN -> (host or GPU) memory -> FILE at OFFSET through the library.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "write_remote.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/remote.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

struct WriteArgs {
  std::string in;
  std::string file;
  std::string offset = "0";
  std::string path = "auto";
  std::string device;
  std::string piece = "256M";
  bool fsync = false;
  bool json = false;
  std::string part_size;   // s3:// only
  unsigned in_flight = 0;  // s3:// only
};

// Fills buf from fd; returns bytes read (less than size only at end of input).
std::size_t read_full(int fd, std::byte* buf, std::size_t size, const std::string& what) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, buf + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_os_error(errno, {.op = "read", .path = what}, "cannot read input");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

// An s3:// URL goes to the remote writer: the whole object from IN, from host memory.
int run_url_write(const WriteArgs& a) {
  if (!a.device.empty() || (a.path != "auto" && a.path != "host"))
    throw UsageError("a URL is written from host memory only (no --device or --path)");
  if (a.offset != "0") throw UsageError("an object is written whole: --offset does not apply to a URL");
  if (a.fsync) throw UsageError("--fsync does not apply to a URL (S3 stores an object durably before it says so)");
  return run_remote_write({.in = a.in, .url = a.file, .part_size = a.part_size, .in_flight = a.in_flight, .json = a.json});
}

int run_write(const WriteArgs& a) {
  if (is_remote_url(a.file)) return run_url_write(a);
  const std::uint64_t offset = to_size(a.offset, "--offset");
  const std::uint64_t piece = to_size(a.piece, "--piece");
  if (piece == 0) throw UsageError("--piece must be larger than 0");
  const TransferTarget target = TransferTarget::from_args(a.device, a.path);

  const bool from_stdin = a.in == "-";
  int in_fd = STDIN_FILENO;
  if (!from_stdin) {
    in_fd = ::open(a.in.c_str(), O_RDONLY | O_CLOEXEC);
    if (in_fd < 0) throw_os_error(errno, {.op = "open", .path = a.in}, "cannot open input");
  }
  File file = File::open(a.file, OpenMode::write);
  const double cpu0 = cpu_seconds();

  PieceBuffer buf(target, static_cast<std::size_t>(piece));
  TransferResult total;
  total.reason = "nothing to write";
  for (;;) {
    const std::size_t n = read_full(in_fd, buf.host(), static_cast<std::size_t>(piece), from_stdin ? "stdin" : a.in);
    if (n == 0) break;
    buf.upload(n);
    TransferResult r = write(file, buf.data(), n, offset + total.bytes, target.options);
    total.bytes += r.bytes;
    total.seconds += r.seconds;
    total.ios += r.ios;
    total.path = r.path;
    total.reason = r.reason;
    if (n < piece) break;
  }
  if (a.fsync) {
    TransferOptions sync_opts;
    sync_opts.sync = SyncMode::full;
    (void)write(file, nullptr, 0, offset, sync_opts);  // flushes everything written above
  }
  if (!from_stdin) ::close(in_fd);
  const double cpu = cpu_seconds() - cpu0;
  std::puts((a.json ? summary_json("write", a.file, total, cpu) : summary_line("write", a.file, total, cpu)).c_str());
  return 0;
}

}  // namespace

Runner add_write_command(CLI::App& app) {
  auto args = std::make_shared<WriteArgs>();
  auto* cmd = app.add_subcommand("write", "Write the bytes of IN into FILE at OFFSET through sluice");
  cmd->add_option("IN", args->in, "input file ('-' for standard input)")->required();
  cmd->add_option("FILE", args->file,
                  "file to write (created if missing, never truncated), or s3://BUCKET/KEY (the "
                  "object is replaced, whole, when the upload completes)")
      ->required();
  cmd->add_option("--offset,-o", args->offset, "where in FILE the bytes go (size units allowed)")
      ->check(size_validator());
  add_target_options(cmd, args->device, args->path);
  cmd->add_option("--piece", args->piece, "bytes per library call while streaming")->capture_default_str()
      ->check(size_validator());
  cmd->add_flag("--fsync", args->fsync, "fsync FILE before exiting");
  cmd->add_option("--part-size", args->part_size,
                  "s3://: bytes per UploadPart (default 8M, or SLUICE_REMOTE_PART_SIZE; at least 5M)")
      ->check(size_validator());
  cmd->add_option("--in-flight", args->in_flight,
                  "s3://: UploadParts in flight at most (default 16, or SLUICE_REMOTE_IN_FLIGHT)")
      ->check(CLI::Range(1, 128));
  cmd->add_flag("--json", args->json, "print one JSON line: path, reason, bytes, seconds");
  return [args] { return run_write(*args); };
}

}  // namespace sluice::cli
