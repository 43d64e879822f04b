// A program using the library, for the stats tests: reads FILE through sluice::read into host
// memory, over and over, until SIGTERM or SIGINT (then exits 0, removing its segment as any normal
// exit does), or SECONDS at most. Run with SLUICE_STATS=1 it publishes its counters.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sluice/file.hpp"
#include "sluice/transfer.hpp"

namespace {
std::atomic<bool> stop{false};
extern "C" void on_signal(int) { stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: stats_publisher FILE SECONDS\n");
    return 2;
  }
  ::signal(SIGTERM, on_signal);
  ::signal(SIGINT, on_signal);
  const sluice::File f = sluice::File::open(argv[1], sluice::OpenMode::read);
  const auto size = f.size();
  std::vector<char> buf(size);
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[2]));
  while (!stop.load() && std::chrono::steady_clock::now() < end) {
    if (sluice::read(f, buf.data(), size, 0).bytes != size) return 1;
  }
  return 0;
}
