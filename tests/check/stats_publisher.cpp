// A program using the library, for the stats tests: reads FILE through sluice::read into host
// memory, over and over, for SECONDS. Run with SLUICE_STATS=1 it publishes its counters.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sluice/file.hpp"
#include "sluice/transfer.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: stats_publisher FILE SECONDS\n");
    return 2;
  }
  const sluice::File f = sluice::File::open(argv[1], sluice::OpenMode::read);
  const auto size = f.size();
  std::vector<char> buf(size);
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[2]));
  while (std::chrono::steady_clock::now() < end) {
    if (sluice::read(f, buf.data(), size, 0).bytes != size) return 1;
  }
  return 0;
}
