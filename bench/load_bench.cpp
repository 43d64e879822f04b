// sluice load against the same bytes read sequentially through sluice::read, and against a
// plain mmap-and-copy loader written the usual way (mmap each shard, allocate each tensor, copy
// it to the device), in interleaved rounds, printing medians and ratios.
//   sluice_load_bench [--dir D] [--gib G] [--shards N] [--rounds R] [--device sim]
//                     [--cache cold|warm]
//   sluice_load_bench --checkpoint PATH [--device D] [--json]
// The checkpoint (many tensors of mixed sizes over N shards, with its index) is written once
// into D (default /var/tmp/sluice-load-bench) and reused while its size matches.
//
// Like for like (docs/bench.md, "Like for like"):
// - The same page-cache state for every variant, set again before each run: --cache cold (the
//   default) drops the shards from the page cache (fdatasync, then POSIX_FADV_DONTNEED) and
//   sluice reads with O_DIRECT; --cache warm reads every shard through the page cache first and
//   sluice reads buffered (direct_io=false), since its O_DIRECT reads would bypass the cache that
//   the mmap loader enjoys. The fraction of the shards resident in the cache just before each
//   run (mincore) is printed.
// - The whole operation on every side: from before the first allocation to the last byte in
//   device memory (allocation, planning, opening and mapping included; the header parsing of
//   Checkpoint::open happens once before the rounds and serves all three; frees are not timed).
// - The order of the variants rotates from round to round (A B C, B C A, C A B, ...).
// --checkpoint PATH times one whole load of an existing checkpoint (Checkpoint::open to the
// return of sluice::load) after opening the device, for bench/load-vs-torch.sh.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/load.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Writes shard files of mixed tensors (a few large matrices, many medium, many tiny) and the index.
std::vector<std::string> write_checkpoint(const std::string& dir, std::uint64_t total,
                                          unsigned shards) {
  fs::create_directories(dir);
  const std::string index = dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  for (unsigned s = 0; s < shards; ++s)
    files.push_back(fmt::format("{}/model-{:05}-of-{:05}.safetensors", dir, s + 1, shards));
  const std::string stamp = dir + "/.size";
  if (fs::exists(index) && fs::exists(stamp)) {
    std::ifstream in(stamp);
    std::uint64_t had = 0;
    in >> had;
    if (had == total) return files;
  }
  std::mt19937_64 rng(42);
  nlohmann::json weight_map;
  std::vector<char> block(64 << 20);
  for (auto& c : block) c = static_cast<char>(rng());
  const std::uint64_t per_shard = total / shards;
  for (unsigned s = 0; s < shards; ++s) {
    nlohmann::json h;
    std::uint64_t off = 0;
    unsigned i = 0;
    while (off < per_shard) {
      // layer: a big matrix, two medium ones, and small norms/biases of odd sizes.
      const std::uint64_t sizes[] = {64ull << 20, 16ull << 20, 4ull << 20, 8192, 4096 * 2 + 6, 200};
      for (std::uint64_t sz : sizes) {
        if (off >= per_shard) break;
        sz = std::min(sz, per_shard - off);
        sz -= sz % 2;
        if (sz == 0) sz = 2;
        const std::string name = fmt::format("layers.{}.{}.w{}", s, i++, sz);
        h[name] = {{"dtype", "BF16"}, {"shape", {sz / 2}}, {"data_offsets", {off, off + sz}}};
        weight_map[name] = fs::path(files[s]).filename().string();
        off += sz;
      }
    }
    h["__metadata__"] = {{"format", "pt"}};
    std::string text = h.dump();
    while ((8 + text.size()) % 8 != 0) text.push_back(' ');
    std::ofstream out(files[s], std::ios::binary | std::ios::trunc);
    std::uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (std::uint64_t w = 0; w < off; w += block.size()) {
      out.write(block.data(),
                static_cast<std::streamsize>(std::min<std::uint64_t>(block.size(), off - w)));
    }
    if (!out) throw std::runtime_error("cannot write " + files[s]);
  }
  std::ofstream(index)
      << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump();
  std::ofstream(stamp) << total;
  return files;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int open_or_throw(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  return fd;
}

// Cold: the files' pages leave the page cache (written back first: DONTNEED skips dirty pages).
void drop_cache(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    const int fd = open_or_throw(f);
    (void)::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Warm: every byte of the files read once through the page cache.
void warm_cache(const std::vector<std::string>& files) {
  std::vector<char> buf(8 << 20);
  for (const auto& f : files) {
    const int fd = open_or_throw(f);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

// Fraction of the files' pages in the page cache (mincore); what the next run starts from.
double resident_fraction(const std::vector<std::string>& files) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t in = 0, all = 0;
  for (const auto& f : files) {
    const int fd = open_or_throw(f);
    const auto size = static_cast<std::uint64_t>(fs::file_size(f));
    void* map = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (map == MAP_FAILED) continue;
    std::vector<unsigned char> vec((size + page - 1) / page);
    if (::mincore(map, size, vec.data()) == 0) {
      for (unsigned char v : vec) in += v & 1u;
      all += vec.size();
    }
    ::munmap(map, size);
  }
  return all > 0 ? static_cast<double>(in) / static_cast<double>(all) : -1;
}

struct Options {
  std::string dir = "/var/tmp/sluice-load-bench";
  double gib = 2;
  unsigned shards = 4;
  unsigned rounds = 3;
  std::string device_spec = "sim";
  bool warm = false;
  std::string checkpoint;  // --checkpoint: one timed whole load of this checkpoint
  bool json = false;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--dir D] [--gib G] [--shards N] [--rounds R] [--device sim|cuda:N] "
               "[--cache cold|warm]\n"
               "       %s --checkpoint PATH [--device D] [--json]\n",
               argv0, argv0);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) usage(argv[0]);
    const std::string v = argv[++i];
    if (a == "--dir")
      o.dir = v;
    else if (a == "--gib")
      o.gib = std::stod(v);
    else if (a == "--shards")
      o.shards = static_cast<unsigned>(std::stoul(v));
    else if (a == "--rounds")
      o.rounds = static_cast<unsigned>(std::stoul(v));
    else if (a == "--device")
      o.device_spec = v;
    else if (a == "--checkpoint")
      o.checkpoint = v;
    else if (a == "--cache" && (v == "cold" || v == "warm"))
      o.warm = v == "warm";
    else
      usage(argv[0]);
  }
  return o;
}

struct Setup {
  const sluice::Checkpoint& cp;
  std::shared_ptr<sluice::Device> dev;
  std::shared_ptr<const sluice::Config> cfg;  // direct_io off in warm mode
};

// A: sluice load, whole (plan, one allocation, reads); the path it took goes to *path_line and
// its own reads-only figure (allocation and planning excluded) to *reads_only.
double time_load(const Setup& s, std::string* path_line, double* reads_only) {
  sluice::LoadOptions o;
  o.device = s.dev;
  o.config = s.cfg;
  const auto t0 = Clock::now();
  auto got = sluice::load(s.cp, o);
  const double t = since(t0);
  if (got.result().bytes != s.cp.total_bytes())
    throw std::runtime_error("load moved the wrong number of bytes");
  *path_line = fmt::format("{} ({})", sluice::to_string(got.result().path), got.result().reason);
  *reads_only = got.result().seconds;
  return t;
}

// B: the same bytes, one buffer and one sequential sluice::read per shard's data section.
double time_sequential(const Setup& s) {
  sluice::TransferOptions topts;
  topts.device = s.dev;
  topts.config = s.cfg;
  std::vector<sluice::DeviceBuffer> bufs;
  const auto t0 = Clock::now();
  for (const auto& l : s.cp.layouts()) bufs.emplace_back(s.dev, l.file_size - l.data_offset);
  for (std::size_t i = 0; i < s.cp.layouts().size(); ++i) {
    const auto& l = s.cp.layouts()[i];
    (void)sluice::read(s.cp.file(i), bufs[i].data(), l.file_size - l.data_offset, l.data_offset,
                       topts);
  }
  return since(t0);
}

// C: the usual loader: mmap each shard, allocate each tensor, copy it over.
double time_mmap_copy(const Setup& s) {
  std::vector<sluice::DeviceBuffer> bufs;
  bufs.reserve(s.cp.tensors().size());
  const auto t0 = Clock::now();
  for (const auto& t : s.cp.tensors())
    bufs.emplace_back(s.dev, std::max<std::uint64_t>(t.bytes, 1));
  std::size_t k = 0;
  for (const auto& l : s.cp.layouts()) {
    const int fd = open_or_throw(l.path);
    void* map = ::mmap(nullptr, l.file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw std::runtime_error("mmap " + l.path);
    for (const auto& t : l.tensors) {
      s.dev->copy_to_device(bufs[k++].data(), static_cast<const char*>(map) + t.offset, t.bytes);
    }
    ::munmap(map, l.file_size);
  }
  return since(t0);
}

void print_summary(const char* const names[3], const std::vector<double> secs[3],
                   const std::vector<double>& reads_only, const double res[2], std::uint64_t bytes,
                   bool warm, const std::string& path_line) {
  const auto gibs = [&](double s) { return static_cast<double>(bytes) / sluice::GiB / s; };
  const double g[3] = {gibs(median(secs[0])), gibs(median(secs[1])), gibs(median(secs[2]))};
  std::printf("median: %s %.2f GiB/s, %s %.2f GiB/s, %s %.2f GiB/s\n", names[0], g[0], names[1],
              g[1], names[2], g[2]);
  std::printf("ratio load/sequential %.2f (target >= 0.90), load/mmap+copy %.2f\n", g[0] / g[1],
              g[0] / g[2]);
  std::printf(
      "(for reference, not compared: load's own reads-only figure, allocation and planning "
      "excluded, "
      "%.2f GiB/s)\n",
      gibs(median(reads_only)));
  std::printf(
      "cache: %s; resident before each run %.0f-%.0f%%\n",
      warm ? "warm on every side (shards read through the page cache before each run; sluice reads "
             "buffered, direct_io=false)"
           : "cold on every side (shards dropped before each run; sluice reads with O_DIRECT)",
      100 * res[0], 100 * res[1]);
  std::printf(
      "timed: whole operation on every side (allocation to last byte on the device; header parsing "
      "shared, frees excluded); order rotated each round\n");
  std::printf("load path: %s\n", path_line.c_str());
}

int run_rounds(const Options& opt) {
  const auto total = static_cast<std::uint64_t>(opt.gib * static_cast<double>(sluice::GiB));
  const auto t_write = Clock::now();
  const auto files = write_checkpoint(opt.dir, total, opt.shards);
  std::printf("checkpoint: %s (%u shards, %s) ready in %.1f s\n", opt.dir.c_str(), opt.shards,
              sluice::format_size(total).c_str(), since(t_write));
  auto dev = sluice::open_device(opt.device_spec);
  const std::vector<std::string> index{opt.dir + "/model.safetensors.index.json"};
  const sluice::Checkpoint cp = sluice::Checkpoint::open(index);
  const std::uint64_t bytes = cp.total_bytes();
  std::printf("%zu tensors, %s of tensor data, device %s, cache %s\n", cp.tensors().size(),
              sluice::format_size(bytes).c_str(), dev->info().name.c_str(),
              opt.warm ? "warm" : "cold");
  auto cfg = std::make_shared<sluice::Config>(*sluice::config());
  if (opt.warm) cfg->direct_io = false;
  const Setup setup{cp, dev, cfg};

  const char* const names[3] = {"load", "sequential read", "mmap+copy"};
  std::vector<double> secs[3], reads_only;
  double res[2] = {1, 0};  // min, max resident fraction seen before a run
  std::string path_line;
  for (unsigned r = 0; r < opt.rounds; ++r) {
    std::string line;
    for (unsigned k = 0; k < 3; ++k) {
      const unsigned v = (k + r) % 3;  // rotate the order each round
      if (opt.warm)
        warm_cache(files);
      else
        drop_cache(files);
      const double resident = resident_fraction(files);
      res[0] = std::min(res[0], resident);
      res[1] = std::max(res[1], resident);
      double load_reads = 0;
      const double t = v == 0   ? time_load(setup, &path_line, &load_reads)
                       : v == 1 ? time_sequential(setup)
                                : time_mmap_copy(setup);
      secs[v].push_back(t);
      if (v == 0) reads_only.push_back(load_reads);
      line += fmt::format("  {} {:.2f} GiB/s (cached {:.0f}%)", names[v],
                          static_cast<double>(bytes) / sluice::GiB / t, 100 * resident);
    }
    std::printf("round %u:%s\n", r + 1, line.c_str());
  }
  print_summary(names, secs, reads_only, res, bytes, opt.warm, path_line);
  return 0;
}

// One whole load of an existing checkpoint: the device is opened (and its context made) first,
// as the torch side creates its CUDA context before its clock starts.
int run_one(const Options& opt) {
  auto dev = sluice::open_device(opt.device_spec);
  { sluice::DeviceBuffer warmup(dev, 1); }
  const std::vector<std::string> paths{opt.checkpoint};
  const auto t0 = Clock::now();
  const sluice::Checkpoint cp = sluice::Checkpoint::open(paths);
  sluice::LoadOptions o;
  o.device = dev;
  auto got = sluice::load(cp, o);
  const double whole = since(t0);
  const auto& r = got.result();
  if (opt.json) {
    std::printf("%s\n", nlohmann::json{{"seconds", whole},
                                       {"read_seconds", r.seconds},
                                       {"bytes", r.bytes},
                                       {"tensors", got.tensors().size()},
                                       {"path", sluice::to_string(r.path)},
                                       {"reason", r.reason},
                                       {"direct_io", sluice::config()->direct_io}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s in %.3f s whole (reads %.3f s), path %s (%s)\n",
                sluice::format_size(r.bytes).c_str(), whole, r.seconds,
                std::string(sluice::to_string(r.path)).c_str(), r.reason.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    return opt.checkpoint.empty() ? run_rounds(opt) : run_one(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
}
