// map_host_memory: a fresh mapping every time, 2 MiB aligned and backed by transparent huge pages
// when asked (where the kernel has THP), 4 KiB pages when not, whatever the heap went through
// before. sluice bench's cpu-only buffers come from here: when they came from the heap, a run
// after an earlier run in the same process (doctor's probes, --compare) got recycled 4 KiB
// pages and read 64 KiB O_DIRECT blocks at a quarter of the speed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/host_memory.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

// AnonHugePages (kB) of the mapping that holds `p`, from /proc/self/smaps; -1 when not found.
long anon_huge_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  const auto a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

// What an earlier run leaves in the heap: large blocks freed (glibc then raises its mmap
// threshold, so later multi-MiB allocations come from the heap) and many 64 KiB buffers touched
// and freed (heap pages already faulted in as 4 KiB pages). posix_memalign(2 MiB) + madvise
// after this got 0 kB of huge pages here; map_host_memory must not.
void churn_the_heap() {
  std::vector<void*> blocks;
  auto touch_and_free = [&](std::size_t size, int count) {
    for (int i = 0; i < count; ++i) {
      void* p = nullptr;
      ASSERT_EQ(posix_memalign(&p, 4096, size), 0);
      std::memset(p, 1, size);
      blocks.push_back(p);
    }
    for (void* p : blocks) std::free(p);
    blocks.clear();
  };
  touch_and_free(4 * MiB, 8);
  touch_and_free(64 * KiB, 128);
}

TEST(HostMemory, HugePagesEvenAfterTheHeapWasChurned) {
  churn_the_heap();
  constexpr std::size_t n = 2 * MiB;  // 32 blocks of 64 KiB: a bench thread's buffers
  void* p = map_host_memory(n, true);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (2 * MiB), 0U);
  const auto* b = static_cast<const unsigned char*>(p);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[n - 1], 0);
  const std::string mode = thp_mode();
  if (mode == "always" || mode == "madvise") {
    EXPECT_GE(anon_huge_kb(p), 2048) << "THP mode " << mode << ": the mapping has no huge page";
  } else {
    std::cout << "note: transparent huge pages are '" << mode << "' here; huge pages not checked\n";
  }
  unmap_host_memory(p, n);
}

TEST(HostMemory, FourKibPagesWhenAskedEvenWhereThpIsAlways) {
  churn_the_heap();
  constexpr std::size_t n = 8 * MiB;
  void* p = map_host_memory(n, false);
  EXPECT_EQ(anon_huge_kb(p), 0);
  EXPECT_EQ(static_cast<const unsigned char*>(p)[n / 2], 0);
  unmap_host_memory(p, n);
}

}  // namespace
}  // namespace sluice
