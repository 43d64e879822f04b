// sluice_residency_bench: the cost of asking the page cache what it holds, as reads with
// cache_policy=auto ask it (one probe per chunk), with Google Benchmark.
//
//   sluice_residency_bench FILE [--benchmark_* flags]
//
// FILE is probed as it is (warm, cold or partly cached: bench/warm-cache.sh runs this on its
// 1 GiB file warm and cold). Cases: one probe of a 1 MiB chunk and of a 4 MiB chunk, every page
// (probe) and edges first (probe_edges, what reads use); the whole file chunk by chunk at 1 MiB
// both ways (what a read of the file pays), and the whole file in one call; each with cachestat
// (where the kernel has it) and with the mincore fallback. The mincore cases exclude the one
// mmap of the range a read makes (BM_ProbeSetUp).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sluice/residency.hpp"

namespace {

int g_fd = -1;
std::uint64_t g_size = 0;
constexpr std::uint64_t MiB = 1 << 20;

sluice::ResidencyMethod method_of(const benchmark::State& state) {
  return state.range(0) == 0 ? sluice::ResidencyMethod::cachestat
                             : sluice::ResidencyMethod::mincore;
}

bool usable(benchmark::State& state, const sluice::ResidencyProbe& p) {
  if (p.method() == method_of(state)) return true;
  state.SkipWithError("method not available on this kernel");
  return false;
}

sluice::Residency ask(const sluice::ResidencyProbe& p, bool edges, std::uint64_t at,
                      std::uint64_t n) {
  return edges ? p.probe_edges(at, n) : p.probe(at, n);
}

void BM_ProbeChunk(benchmark::State& state) {
  const std::uint64_t chunk = static_cast<std::uint64_t>(state.range(1)) * MiB;
  const bool edges = state.range(2) != 0;
  const sluice::ResidencyProbe probe(g_fd, 0, g_size, method_of(state));
  if (!usable(state, probe)) return;
  std::uint64_t at = 0, cached = 0;
  for (auto _ : state) {
    cached += ask(probe, edges, at, chunk).cached;
    at = at + 2 * chunk <= g_size ? at + chunk : 0;
  }
  benchmark::DoNotOptimize(cached);
  state.SetLabel(std::string(to_string(probe.method())));
}

// What one read of the whole file pays: a probe per 1 MiB chunk.
void BM_ProbeFileByChunks(benchmark::State& state) {
  const bool edges = state.range(1) != 0;
  const sluice::ResidencyProbe probe(g_fd, 0, g_size, method_of(state));
  if (!usable(state, probe)) return;
  std::uint64_t cached = 0;
  for (auto _ : state) {
    for (std::uint64_t at = 0; at + MiB <= g_size; at += MiB)
      cached += ask(probe, edges, at, MiB).cached;
  }
  benchmark::DoNotOptimize(cached);
  state.counters["probes"] = static_cast<double>(g_size / MiB);
  state.counters["cached_fraction"] = static_cast<double>(probe.probe(0, g_size).cached) /
                                      static_cast<double>((g_size + 4095) / 4096);
}

void BM_ProbeFileAtOnce(benchmark::State& state) {
  const sluice::ResidencyProbe probe(g_fd, 0, g_size, method_of(state));
  if (!usable(state, probe)) return;
  std::uint64_t cached = 0;
  for (auto _ : state) cached += probe.probe(0, g_size).cached;
  benchmark::DoNotOptimize(cached);
}

// The set-up a request pays once: the cachestat check, or the mapping for mincore.
void BM_ProbeSetUp(benchmark::State& state) {
  for (auto _ : state) {
    const sluice::ResidencyProbe probe(g_fd, 0, g_size, method_of(state));
    benchmark::DoNotOptimize(probe.method());
  }
}

void chunk_cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"mincore", "MiB", "edges"});
  for (int m : {0, 1}) {
    for (int mib : {1, 4}) {
      for (int e : {0, 1}) b->Args({m, mib, e});
    }
  }
}

BENCHMARK(BM_ProbeChunk)->Apply(chunk_cases);
BENCHMARK(BM_ProbeFileByChunks)
    ->ArgNames({"mincore", "edges"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProbeFileAtOnce)->ArgNames({"mincore"})->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ProbeSetUp)->ArgNames({"mincore"})->Arg(0)->Arg(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: sluice_residency_bench FILE [--benchmark_* flags]\n");
    return 2;
  }
  g_fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (g_fd < 0 || ::fstat(g_fd, &st) != 0 || st.st_size < static_cast<off_t>(4 * MiB)) {
    std::fprintf(stderr, "sluice_residency_bench: %s: cannot open, or smaller than 4 MiB\n",
                 argv[1]);
    return 1;
  }
  g_size = static_cast<std::uint64_t>(st.st_size);
  benchmark::AddCustomContext("file", argv[1]);
  benchmark::AddCustomContext("cachestat", sluice::have_cachestat() ? "yes" : "no");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ::close(g_fd);
  return 0;
}
