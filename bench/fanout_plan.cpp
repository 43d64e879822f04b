// What planning a fan-out costs: sluice_fanout_plan_bench RANKS PER_NODE TENSORS node|job
// [replicas|rows] [only_node]. The checkpoint is TENSORS 2-d BF16 tensors [rows, 16384] adding up
// to 810 GB (a 405B-parameter model); every rank needs all of it (replicas) or row slice
// rank % PER_NODE of every tensor (tensor parallelism inside each node). Prints the time of one
// plan_fanout call and what the plan says; docs/scale.md, section 7, quotes runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sluice/fanout.hpp"

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RANKS PER_NODE TENSORS node|job [replicas|rows] [only_node]\n",
                 argv[0]);
    return 2;
  }
  const unsigned world = static_cast<unsigned>(std::atoi(argv[1]));
  const unsigned per_node = static_cast<unsigned>(std::atoi(argv[2]));
  const unsigned tensors = static_cast<unsigned>(std::atoi(argv[3]));
  const bool rows = argc > 5 && std::string(argv[5]) == "rows";
  FanoutInput in{.items = {},
                 .ranks = {},
                 .nodes = (world + per_node - 1) / per_node,
                 .scope = parse_fanout_scope(argv[4])};
  if (argc > 6) in.only_node = 0;
  const std::uint64_t cols = 16384, row_count = 810'000'000'000ULL / tensors / (cols * 2);
  for (unsigned i = 0; i < tensors; ++i) {
    in.items.push_back(FanoutItem{.name = "t" + std::to_string(i),
                                  .file_index = 0,
                                  .offset = i * row_count * cols * 2,
                                  .bytes = row_count * cols * 2});
  }
  for (unsigned r = 0; r < world; ++r) {
    FanoutRank rank{.rank = r, .node = r / per_node, .everything = !rows, .needs = {}};
    for (unsigned i = 0; rows && i < tensors; ++i) {
      rank.needs.push_back(FanoutNeed{
          .item = i, .ranges = row_slice_ranges(row_count, cols, 2, r % per_node, per_node)});
    }
    in.ranks.push_back(std::move(rank));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const FanoutPlan p = plan_fanout(in);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::uint64_t most = 0;
  for (const FanoutRankBytes& b : p.ranks) most = std::max(most, b.read);
  std::printf(
      "ranks %u, %u a node, %u tensors, scope %s%s, %s: %.3f s, %zu reads, %zu moves, "
      "amplification %.1f, "
      "unique %.1f GB, read %.1f GB, most read by one rank %.2f GB\n",
      world, per_node, tensors, argv[4], in.only_node ? " (only_node 0)" : "",
      rows ? "row slices" : "replicas", s, p.reads.size(), p.moves.size(), p.amplification(),
      p.unique_bytes / 1e9, p.read_bytes / 1e9, most / 1e9);
  return 0;
}
