// Names, parsing and checks of benchmark workloads; the verification pattern.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/tools/bench.hpp"

namespace sluice::bench {
namespace {

struct XferName {
  XferType type;
  std::string_view name;
  std::string_view gdsio;
};

constexpr std::array<XferName, 8> xfer_names{{
    {XferType::gpu_direct, "gpu-direct", "GPUD"},
    {XferType::cpu_only, "cpu-only", "CPUONLY"},
    {XferType::cpu_gpu, "cpu-gpu", "CPU_GPU"},
    {XferType::cpu_async_gpu, "cpu-async-gpu", "CPU_ASYNC_GPU"},
    {XferType::cpu_cached_gpu, "cpu-cached-gpu", "CPU_CACHED_GPU"},
    {XferType::gpu_direct_async, "gpu-direct-async", "GPUD_ASYNC"},
    {XferType::gpu_batch, "gpu-batch", "GPU_BATCH"},
    {XferType::automatic, "auto", "AUTO"},
}};

constexpr std::array<std::string_view, 6> rw_names{"read", "write", "randread", "randwrite", "rw",
                                                   "randrw"};

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s) {
    out.push_back(c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string xfer_choices() {
  std::string s;
  for (const auto& x : xfer_names) {
    if (!s.empty()) s += ", ";
    s += x.type == XferType::automatic ? std::string(x.name)
                                       : fmt::format("{} ({})", x.name, static_cast<int>(x.type));
  }
  return s;
}

std::uint64_t splitmix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t pattern_word(std::uint64_t word_index, std::uint64_t seed) noexcept {
  return splitmix(word_index ^ (seed * 0xD1B54A32D192ED03ULL));
}

}  // namespace

std::string_view to_string(XferType x) noexcept {
  for (const auto& n : xfer_names) {
    if (n.type == x) return n.name;
  }
  return "?";
}

std::string_view gdsio_name(XferType x) noexcept {
  for (const auto& n : xfer_names) {
    if (n.type == x) return n.gdsio;
  }
  return "?";
}

XferType parse_xfer(std::string_view text) {
  const std::string t = normalized(text);
  for (const auto& n : xfer_names) {
    if (t == n.name || t == normalized(n.gdsio) ||
        (n.type != XferType::automatic && t == std::to_string(static_cast<int>(n.type)))) {
      return n.type;
    }
  }
  if (t == "gpud-async") return XferType::gpu_direct_async;
  if (t == "7" || t == "gpu-batch-stream") {
    throw_usage_error({.op = "bench"}, "transfer type 7 (gpu-batch-stream) is not supported; "
                                       "valid types: " + xfer_choices());
  }
  throw_usage_error({.op = "bench"},
                    fmt::format("unknown transfer type '{}'; valid types: {}", text, xfer_choices()));
}

std::vector<XferType> all_xfers() {
  return {XferType::cpu_only,       XferType::gpu_direct,       XferType::cpu_async_gpu,
          XferType::cpu_gpu,        XferType::cpu_cached_gpu,   XferType::gpu_direct_async,
          XferType::gpu_batch};
}

std::vector<XferType> parse_xfer_list(std::string_view text) {
  if (normalized(text) == "all") return all_xfers();
  std::vector<XferType> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    if (!item.empty()) out.push_back(parse_xfer(item));
    start = comma + 1;
  }
  if (out.empty()) throw_usage_error({.op = "bench"}, "--compare needs transfer types or 'all'");
  return out;
}

bool uses_gpu(XferType x) noexcept { return x != XferType::cpu_only; }

std::string_view to_string(RwMode m) noexcept { return rw_names[static_cast<std::size_t>(m)]; }

RwMode parse_rw(std::string_view text) {
  const std::string t = normalized(text);
  for (std::size_t i = 0; i < rw_names.size(); ++i) {
    if (t == rw_names[i]) return static_cast<RwMode>(i);
  }
  if (t.size() == 1 && t[0] >= '0' && t[0] <= '3') return static_cast<RwMode>(t[0] - '0');
  if (t == "randrw" || t == "mixed") return RwMode::randrw;
  throw_usage_error({.op = "bench"},
                    fmt::format("unknown I/O type '{}' (expected read, write, randread, randwrite, "
                                "rw, randrw, or gdsio's 0-3)", text));
}

bool is_random(RwMode m) noexcept {
  return m == RwMode::randread || m == RwMode::randwrite || m == RwMode::randrw;
}
bool does_reads(RwMode m) noexcept { return m != RwMode::write && m != RwMode::randwrite; }
bool does_writes(RwMode m) noexcept { return m != RwMode::read && m != RwMode::randread; }

void validate(const Workload& w) {
  const ErrorContext ctx{.op = "bench"};
  if (w.files.empty() && w.dir.empty()) throw_usage_error(ctx, "give --file or --dir");
  if (!w.files.empty() && !w.dir.empty()) throw_usage_error(ctx, "--file and --dir exclude each other");
  if (w.threads == 0) throw_usage_error(ctx, "--threads must be at least 1");
  if (w.iodepth == 0 || w.iodepth > 4096) throw_usage_error(ctx, "--iodepth must be 1 to 4096");
  if (w.block_size == 0) throw_usage_error(ctx, "--block-size must be larger than 0");
  if (w.block_size > std::uint64_t{1} << 31) throw_usage_error(ctx, "--block-size must be at most 2G");
  if (w.mix_read > 100) throw_usage_error(ctx, "--mix is a read percentage, 0 to 100");
  if (w.time_s < 0 || w.warmup_s < 0) throw_usage_error(ctx, "--time and --warmup cannot be negative");
  if (w.verify && w.time_s > 0 && w.rw == RwMode::randwrite) {
    throw_usage_error(ctx, "--verify with --time on random writes cannot work: a time-bound random "
                           "write leaves blocks unwritten; use a size-bound run (no --time)");
  }
  if (w.verify && w.unaligned && does_writes(w.rw)) {
    throw_usage_error(ctx, "--verify with --unaligned writes is not supported (overlapping blocks)");
  }
  if (w.direct && w.xfer == XferType::cpu_cached_gpu) {
    // cpu-cached-gpu is buffered by definition; not an error, the runner ignores --direct.
  }
  if (!w.direct && w.cache_policy == CachePolicy::automatic) {
    throw_usage_error(ctx, "--buffered reads through the page cache; --cache-policy auto contradicts it");
  }
  if (!w.direct && w.xfer == XferType::gpu_direct && w.strict) {
    throw_usage_error(ctx, "gpu-direct needs O_DIRECT; --buffered with --strict cannot run it");
  }
}

std::vector<std::uint64_t> parse_block_sizes(std::string_view spec) {
  const ErrorContext ctx{.op = "bench"};
  auto size_of = [&](std::string_view s) {
    auto v = parse_size(s);
    if (!v || *v == 0) throw_usage_error(ctx, fmt::format("--block-size: '{}' is not a size (try 4K, 1M)", s));
    return *v;
  };
  const std::size_t c1 = spec.find(':');
  if (c1 == std::string_view::npos) return {size_of(spec)};
  const std::size_t c2 = spec.find(':', c1 + 1);
  const std::uint64_t lo = size_of(spec.substr(0, c1));
  const std::uint64_t hi = size_of(spec.substr(c1 + 1, c2 == std::string_view::npos ? spec.npos : c2 - c1 - 1));
  if (hi < lo) throw_usage_error(ctx, fmt::format("--block-size: range '{}' ends below its start", spec));
  std::string_view step = c2 == std::string_view::npos ? std::string_view("x2") : spec.substr(c2 + 1);
  std::vector<std::uint64_t> out;
  if (!step.empty() && (step[0] == 'x' || step[0] == '*')) {
    const std::string factor(step.substr(1));
    char* end = nullptr;
    const unsigned long f = std::strtoul(factor.c_str(), &end, 10);
    if (factor.empty() || *end != '\0' || f < 2) {
      throw_usage_error(ctx, fmt::format("--block-size: step '{}' must be x2 or more", step));
    }
    for (std::uint64_t v = lo; v <= hi && out.size() < 64; v *= f) out.push_back(v);
  } else {
    const std::uint64_t s = size_of(step);
    for (std::uint64_t v = lo; v <= hi && out.size() < 1024; v += s) out.push_back(v);
  }
  return out;
}

void fill_pattern(std::byte* dst, std::uint64_t off, std::size_t len, std::uint64_t seed) {
  std::size_t i = 0;
  while (i < len) {
    const std::uint64_t o = off + i;
    const std::uint64_t word = pattern_word(o / 8, seed);
    if (o % 8 == 0 && len - i >= 8) {
      std::memcpy(dst + i, &word, 8);
      i += 8;
    } else {
      dst[i] = static_cast<std::byte>(word >> (8 * (o % 8)));
      ++i;
    }
  }
}

std::optional<std::uint64_t> check_pattern(const std::byte* src, std::uint64_t off, std::size_t len,
                                           std::uint64_t seed) {
  std::size_t i = 0;
  while (i < len) {
    const std::uint64_t o = off + i;
    const std::uint64_t word = pattern_word(o / 8, seed);
    if (o % 8 == 0 && len - i >= 8) {
      if (std::memcmp(src + i, &word, 8) != 0) {
        for (std::size_t b = 0; b < 8; ++b) {
          if (src[i + b] != static_cast<std::byte>(word >> (8 * b))) return o + b;
        }
      }
      i += 8;
    } else {
      if (src[i] != static_cast<std::byte>(word >> (8 * (o % 8)))) return o;
      ++i;
    }
  }
  return std::nullopt;
}

double RunResult::gib_per_s() const noexcept {
  return seconds > 0 ? static_cast<double>(bytes) / static_cast<double>(GiB) / seconds : 0.0;
}
double RunResult::gb_per_s() const noexcept {
  return seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
}
double RunResult::iops() const noexcept {
  return seconds > 0 ? static_cast<double>(ios) / seconds : 0.0;
}
double RunResult::gib_per_s(const DirectionStats& d) const noexcept {
  return seconds > 0 ? static_cast<double>(d.bytes) / static_cast<double>(GiB) / seconds : 0.0;
}
double RunResult::iops(const DirectionStats& d) const noexcept {
  return seconds > 0 ? static_cast<double>(d.ios) / seconds : 0.0;
}
double RunResult::cpu_seconds_per_gib() const noexcept {
  return bytes > 0 ? (cpu_user_s + cpu_sys_s) / (static_cast<double>(bytes) / static_cast<double>(GiB))
                   : 0.0;
}

}  // namespace sluice::bench
