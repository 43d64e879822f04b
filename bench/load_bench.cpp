// sluice load against the same bytes read sequentially through sluice::read, and against a
// plain mmap-and-copy loader written the usual way (mmap each shard, allocate each tensor, copy
// it to the device), in interleaved rounds (A B C A B C ...), printing medians and ratios.
//   sluice_load_bench [--dir D] [--gib G] [--shards N] [--rounds R] [--device sim]
// The checkpoint (many tensors of mixed sizes over N shards, with its index) is written once
// into D (default /var/tmp/sluice-load-bench) and reused while its size matches.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/load.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Writes shard files of mixed tensors (a few large matrices, many medium, many tiny) and the index.
std::vector<std::string> write_checkpoint(const std::string& dir, std::uint64_t total, unsigned shards) {
  fs::create_directories(dir);
  const std::string index = dir + "/model.safetensors.index.json";
  std::vector<std::string> files;
  for (unsigned s = 0; s < shards; ++s) files.push_back(fmt::format("{}/model-{:05}-of-{:05}.safetensors", dir, s + 1, shards));
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
      out.write(block.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(block.size(), off - w)));
    }
    if (!out) throw std::runtime_error("cannot write " + files[s]);
  }
  std::ofstream(index) << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump();
  std::ofstream(stamp) << total;
  return files;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/var/tmp/sluice-load-bench";
  double gib = 2;
  unsigned shards = 4;
  unsigned rounds = 3;
  std::string device_spec = "sim";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--gib") gib = std::stod(argv[i + 1]);
    else if (a == "--shards") shards = static_cast<unsigned>(std::stoul(argv[i + 1]));
    else if (a == "--rounds") rounds = static_cast<unsigned>(std::stoul(argv[i + 1]));
    else if (a == "--device") device_spec = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--dir D] [--gib G] [--shards N] [--rounds R] [--device sim|cuda:N]\n", argv[0]);
      return 2;
    }
  }
  try {
    const auto total = static_cast<std::uint64_t>(gib * static_cast<double>(sluice::GiB));
    const auto t_write = Clock::now();
    const auto files = write_checkpoint(dir, total, shards);
    std::printf("checkpoint: %s (%u shards, %s) ready in %.1f s\n", dir.c_str(), shards,
                sluice::format_size(total).c_str(), since(t_write));
    auto dev = sluice::open_device(device_spec);
    const std::vector<std::string> index{dir + "/model.safetensors.index.json"};
    const sluice::Checkpoint cp = sluice::Checkpoint::open(index);
    const std::uint64_t bytes = cp.total_bytes();
    std::printf("%zu tensors, %s of tensor data, device %s\n", cp.tensors().size(), sluice::format_size(bytes).c_str(),
                dev->info().name.c_str());

    sluice::TransferOptions topts;
    topts.device = dev;
    std::vector<double> load_s, seq_s, mmap_s;
    std::string path_line;
    for (unsigned r = 0; r < rounds; ++r) {
      {  // A: sluice load (reads timed; allocation excluded, as for the others)
        sluice::LoadOptions o;
        o.device = dev;
        auto got = sluice::load(cp, o);
        if (got.result().bytes != bytes) throw std::runtime_error("load moved the wrong number of bytes");
        load_s.push_back(got.result().seconds);
        path_line = fmt::format("{} ({})", sluice::to_string(got.result().path), got.result().reason);
      }
      {  // B: the same bytes, one sequential sluice::read per shard's data section
        std::vector<sluice::DeviceBuffer> bufs;
        for (const auto& l : cp.layouts()) bufs.emplace_back(dev, l.file_size - l.data_offset);
        const auto t0 = Clock::now();
        for (std::size_t i = 0; i < cp.layouts().size(); ++i) {
          const auto& l = cp.layouts()[i];
          (void)sluice::read(cp.file(i), bufs[i].data(), l.file_size - l.data_offset, l.data_offset, topts);
        }
        seq_s.push_back(since(t0));
      }
      {  // C: mmap each shard, allocate each tensor, copy it over (the usual loader)
        std::vector<sluice::DeviceBuffer> bufs;
        bufs.reserve(cp.tensors().size());
        for (const auto& t : cp.tensors()) bufs.emplace_back(dev, std::max<std::uint64_t>(t.bytes, 1));
        const auto t0 = Clock::now();
        std::size_t k = 0;
        for (const auto& l : cp.layouts()) {
          const int fd = ::open(l.path.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) throw std::runtime_error("open " + l.path);
          void* map = ::mmap(nullptr, l.file_size, PROT_READ, MAP_PRIVATE, fd, 0);
          ::close(fd);
          if (map == MAP_FAILED) throw std::runtime_error("mmap " + l.path);
          for (const auto& t : l.tensors) {
            dev->copy_to_device(bufs[k++].data(), static_cast<const char*>(map) + t.offset, t.bytes);
          }
          ::munmap(map, l.file_size);
        }
        mmap_s.push_back(since(t0));
      }
      std::printf("round %u: load %.2f GiB/s  sequential read %.2f GiB/s  mmap+copy %.2f GiB/s\n", r + 1,
                  static_cast<double>(bytes) / sluice::GiB / load_s.back(), static_cast<double>(bytes) / sluice::GiB / seq_s.back(),
                  static_cast<double>(bytes) / sluice::GiB / mmap_s.back());
    }
    const double gl = static_cast<double>(bytes) / sluice::GiB / median(load_s);
    const double gs = static_cast<double>(bytes) / sluice::GiB / median(seq_s);
    const double gm = static_cast<double>(bytes) / sluice::GiB / median(mmap_s);
    std::printf("median: load %.2f GiB/s, sequential read %.2f GiB/s, mmap+copy %.2f GiB/s\n", gl, gs, gm);
    std::printf("ratio load/sequential %.2f (target >= 0.90), load/mmap+copy %.2f\n", gl / gs, gl / gm);
    std::printf("load path: %s\n", path_line.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
