// sluice_uring_shapes: io_uring loop shapes against each other on one file, in short slices
// alternated within one process, so that a shared machine's background load falls on every
// variant alike. Each variant sets up its own ring for each slice (registered buffers and file,
// O_DIRECT random reads) and runs until the slice ends; the totals give each variant's IOPS and
// CPU time per I/O (of this thread: user + system). This is the evidence behind the ring set-up
// and the submission grouping of sluice's I/O loops (docs/tuning.md, "Small random reads"); it
// uses liburing alone, not libsluice, so the shapes are compared and nothing else.
//
//   sluice_uring_shapes FILE [--time 30] [--slice 0.2] [--bs 4096] [--iodepth 32] VARIANT...
//
// VARIANT is NAME:SETUP:SHAPE[:WAIT]: SETUP is `defer` (single issuer, deferred task running,
// as sluice's engine and fio 3.33), `coop` (cooperative task running), `ringfd` (defer, with the
// ring's descriptor registered) or `sqpoll` (a kernel thread polls the submission queue, idling
// after 10 ms); SHAPE is `fio` (one
// io_uring_enter per new request, one completion collected per wait: fio's default loop) or a
// group size N (every free slot refilled, each N new requests submitted by an io_uring_enter of
// their own, the rest with the wait); WAIT is how many completions a wait asks for (default 1).
// Example: sluice_uring_shapes /mnt/fast/f fio:defer:fio g2:defer:2 g32:defer:32 g2coop:coop:2
#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Variant {
  std::string name;
  unsigned flags = 0;
  bool fio = false;
  unsigned group = 1;
  unsigned wait = 1;
  bool ring_fd = false;  // the ring's descriptor registered (io_uring_register_ring_fd)
  double seconds = 0;
  double cpu = 0;
  std::uint64_t ios = 0;
};

struct Options {
  std::string file;
  double total = 30;
  double slice = 0.2;
  unsigned bs = 4096;
  unsigned depth = 32;
  std::vector<Variant> variants;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t p; (p = s.find(sep, start)) != std::string::npos; start = p + 1)
    out.push_back(s.substr(start, p - start));
  out.push_back(s.substr(start));
  return out;
}

Variant parse_variant(const std::string& text) {
  const auto f = split(text, ':');
  const std::string& setup = f.size() >= 2 ? f[1] : text;
  if (f.size() < 3 || f.size() > 4 ||
      (setup != "defer" && setup != "coop" && setup != "ringfd" && setup != "sqpoll")) {
    throw std::runtime_error("bad variant '" + text +
                             "' (NAME:defer|coop|ringfd|sqpoll:fio|N[:WAIT])");
  }
  Variant v;
  v.name = f[0];
  constexpr unsigned defer = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                             IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  v.flags = setup == "coop"     ? IORING_SETUP_COOP_TASKRUN
            : setup == "sqpoll" ? IORING_SETUP_SQPOLL
                                : defer;
  v.ring_fd = setup == "ringfd";
  v.fio = f[2] == "fio";
  v.group = v.fio ? 1 : static_cast<unsigned>(std::stoul(f[2]));
  v.wait = f.size() == 4 ? static_cast<unsigned>(std::stoul(f[3])) : 1;
  if (v.group == 0 || v.wait == 0) throw std::runtime_error("group and wait must be at least 1");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--time") {
      o.total = std::stod(value());
    } else if (a == "--slice") {
      o.slice = std::stod(value());
    } else if (a == "--bs") {
      o.bs = static_cast<unsigned>(std::stoul(value()));
    } else if (a == "--iodepth") {
      o.depth = static_cast<unsigned>(std::stoul(value()));
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      o.variants.push_back(parse_variant(a));
    }
  }
  if (o.file.empty() || o.variants.empty())
    throw std::runtime_error("usage: sluice_uring_shapes FILE [options] VARIANT...");
  return o;
}

class Slice {
 public:
  Slice(const Options& o, const Variant& v, int fd, char* mem, std::mt19937_64& rng,
        std::uint64_t blocks)
      : o_(o), v_(v), mem_(mem), rng_(rng), blocks_(blocks) {
    io_uring_params p{};
    p.flags = v.flags;
    p.sq_thread_idle = 10;  // ms, SQPOLL only
    if (const int rc = io_uring_queue_init_params(o.depth, &ring_, &p); rc < 0) {
      throw std::runtime_error(std::string("io_uring_setup: ") + std::strerror(-rc));
    }
    if (v.ring_fd && io_uring_register_ring_fd(&ring_) != 1)
      throw std::runtime_error("cannot register the ring");
    const iovec iov{mem, static_cast<std::size_t>(o.depth) * o.bs};
    if (io_uring_register_buffers(&ring_, &iov, 1) != 0 ||
        io_uring_register_files(&ring_, &fd, 1) != 0) {
      throw std::runtime_error("cannot register the buffers or the file");
    }
    for (unsigned i = 0; i < o.depth; ++i) free_.push_back(i);
  }
  ~Slice() { io_uring_queue_exit(&ring_); }
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;

  // Runs until `end`, then drains; returns the requests completed.
  std::uint64_t run(double end) {
    for (;;) {
      const bool stop = now() >= end;
      unsigned unsent = 0;
      while (!free_.empty() && !stop) {
        prep(free_.back());
        free_.pop_back();
        ++in_flight_;
        if (++unsent == v_.group) {
          io_uring_submit(&ring_);
          unsent = 0;
        }
      }
      if (in_flight_ == 0) return done_;
      if (v_.fio) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe(&ring_, &cqe) == 0) complete(&cqe, 1);
      } else {
        io_uring_submit_and_wait(&ring_, std::min(v_.wait, in_flight_));
        io_uring_cqe* cqes[64];
        complete(cqes, io_uring_peek_batch_cqe(&ring_, cqes, 64));
      }
    }
  }

 private:
  void prep(unsigned slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_read_fixed(sqe, 0, mem_ + static_cast<std::size_t>(slot) * o_.bs, o_.bs,
                             (rng_() % blocks_) * o_.bs, 0);
    sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, slot);
  }
  void complete(io_uring_cqe** cqes, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      if (cqes[i]->res != static_cast<int>(o_.bs))
        throw std::runtime_error("a read failed or came back short");
      free_.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqes[i])));
    }
    io_uring_cq_advance(&ring_, n);
    in_flight_ -= n;
    done_ += n;
  }

  const Options& o_;
  const Variant& v_;
  char* mem_;
  std::mt19937_64& rng_;
  std::uint64_t blocks_;
  io_uring ring_{};
  std::vector<unsigned> free_;
  unsigned in_flight_ = 0;
  std::uint64_t done_ = 0;
};

}  // namespace

int main(int argc, char** argv) try {
  Options o = parse(argc, argv);
  const int fd = ::open(o.file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(o.file + ": " + std::strerror(errno));
  const std::uint64_t blocks = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END)) / o.bs;
  if (blocks == 0) throw std::runtime_error("the file is smaller than one block");
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, static_cast<std::size_t>(o.depth) * o.bs) != 0)
    throw std::runtime_error("out of memory");
  std::memset(raw, 0, static_cast<std::size_t>(o.depth) * o.bs);
  std::mt19937_64 rng(1);
  const double end = now() + o.total;
  for (unsigned round = 0; now() < end; ++round) {
    for (std::size_t k0 = 0; k0 < o.variants.size(); ++k0) {  // the order rotates every round
      Variant& v = o.variants[(k0 + round) % o.variants.size()];
      Slice s(o, v, fd, static_cast<char*>(raw), rng, blocks);
      const double t0 = now(), c0 = thread_cpu();
      v.ios += s.run(t0 + o.slice);
      v.seconds += now() - t0;
      v.cpu += thread_cpu() - c0;
    }
  }
  const double first = static_cast<double>(o.variants[0].ios) / o.variants[0].seconds;
  for (const Variant& v : o.variants) {
    const double iops = static_cast<double>(v.ios) / v.seconds;
    std::printf("%-12s %9.0f IOPS  %5.3fx %s  %5.2f us CPU per I/O  (%.1f s)\n", v.name.c_str(),
                iops, iops / first, o.variants[0].name.c_str(),
                v.cpu * 1e6 / static_cast<double>(v.ios), v.seconds);
  }
  std::free(raw);
  ::close(fd);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sluice_uring_shapes: %s\n", e.what());
  return 2;
}
