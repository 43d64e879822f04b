// The process save_kill_test kills: saves the checkpoint of a seed (kill_data.hpp) to a path and
// exits 0. usage: save_kill_child PATH SEED
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "kill_data.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: save_kill_child PATH SEED\n");
    return 2;
  }
  try {
    const sluice::test::KillCheckpoint c(std::strtoull(argv[2], nullptr, 10));
    (void)sluice::save_safetensors(argv[1], c.tensors);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "save_kill_child: %s\n", e.what());
    return 1;
  }
  return 0;
}
