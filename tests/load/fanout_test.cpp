// The fan-out planner: every needed byte read once per scope group, every rank ending with exactly
// the bytes it needs, the same plan whatever the input order, the balance bound, tensor-parallel
// slices, chunking, and bad input. Each plan is checked byte by byte against the needs by
// verify(), which computes coverage itself rather than trusting the plan's totals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/fanout.hpp"
#include "sluice/load.hpp"
#include "support/test_util.hpp"
#include "tensor_files.hpp"

namespace sluice {
namespace {

using Bits = std::vector<std::vector<std::vector<int>>>;  // [rank][item][byte]

Bits needs_of(const FanoutInput& in) {
  Bits need(in.ranks.size());
  for (const FanoutRank& r : in.ranks) {
    need[r.rank].resize(in.items.size());
    for (std::size_t i = 0; i < in.items.size(); ++i)
      need[r.rank][i].assign(in.items[i].bytes, r.everything ? 1 : 0);
    for (const FanoutNeed& n : r.needs) {
      for (const ByteRange& b : n.ranges) {
        for (std::uint64_t x = b.offset; x < b.offset + b.size; ++x) need[r.rank][n.item][x] = 1;
      }
    }
  }
  return need;
}

unsigned group_of(const FanoutInput& in, unsigned rank) {
  if (in.scope == FanoutScope::job) return 0;
  for (const FanoutRank& r : in.ranks) {
    if (r.rank == rank) return r.node;
  }
  ADD_FAILURE() << "no rank " << rank;
  return 0;
}

// Byte by byte: reads once per group where a member needs the byte and never elsewhere; every
// rank has each needed byte exactly once (its own read or one move) and nothing it does not need;
// the per-rank totals and the amplification match.
void verify(const FanoutInput& in, const FanoutPlan& p) {
  const Bits need = needs_of(in);
  const unsigned groups = in.scope == FanoutScope::node ? in.nodes : 1;
  Bits reads(groups, std::vector<std::vector<int>>(in.items.size()));
  Bits have(in.ranks.size(), std::vector<std::vector<int>>(in.items.size()));
  for (unsigned g = 0; g < groups; ++g) {
    for (std::size_t i = 0; i < in.items.size(); ++i) reads[g][i].assign(in.items[i].bytes, 0);
  }
  for (auto& r : have) {
    for (std::size_t i = 0; i < in.items.size(); ++i) r[i].assign(in.items[i].bytes, 0);
  }
  std::vector<FanoutRankBytes> totals(in.ranks.size());
  std::uint64_t read_bytes = 0;
  for (const FanoutRead& r : p.reads) {
    ASSERT_LE(r.size, in.exchange_budget);
    ASSERT_GT(r.size, 0u);
    ASSERT_EQ(group_of(in, r.reader), r.group);
    ASSERT_EQ(r.file_index, in.items[r.item].file_index);
    ASSERT_EQ(r.file_offset, in.items[r.item].offset + r.offset);
    for (std::uint64_t x = r.offset; x < r.offset + r.size; ++x) {
      ++reads[r.group][r.item][x];
      have[r.reader][r.item][x] += need[r.reader][r.item][x];
    }
    totals[r.reader].read += r.size;
    read_bytes += r.size;
  }
  for (const FanoutMove& m : p.moves) {
    const FanoutRead& r = p.reads.at(m.read);
    ASSERT_EQ(m.source, r.reader);
    ASSERT_FALSE(m.receivers.empty());
    ASSERT_TRUE(std::is_sorted(m.receivers.begin(), m.receivers.end()));
    EXPECT_EQ(m.kind, m.receivers.size() == 1 ? FanoutMoveKind::send : FanoutMoveKind::broadcast);
    for (unsigned to : m.receivers) {
      ASSERT_NE(to, m.source);
      ASSERT_EQ(group_of(in, to), r.group);
      for (std::uint64_t x = r.offset; x < r.offset + r.size; ++x) {
        ASSERT_EQ(need[to][r.item][x], 1) << "rank " << to << " gets a byte it does not need";
        ++have[to][r.item][x];
      }
      totals[to].received += r.size;
      totals[m.source].sent += r.size;
    }
  }
  std::uint64_t unique = 0;
  for (std::size_t i = 0; i < in.items.size(); ++i) {
    for (std::uint64_t x = 0; x < in.items[i].bytes; ++x) {
      std::vector<int> wanted(groups, 0);
      for (const FanoutRank& rk : in.ranks) {
        ASSERT_EQ(have[rk.rank][i][x], need[rk.rank][i][x])
            << "rank " << rk.rank << " item " << i << " byte " << x;
        wanted[group_of(in, rk.rank)] |= need[rk.rank][i][x];
      }
      bool any = false;
      for (unsigned g = 0; g < groups; ++g) {
        ASSERT_EQ(reads[g][i][x], wanted[g]) << "group " << g << " item " << i << " byte " << x;
        any = any || wanted[g] != 0;
      }
      unique += any ? 1 : 0;
    }
  }
  ASSERT_EQ(p.ranks.size(), in.ranks.size());
  for (std::size_t r = 0; r < totals.size(); ++r) {
    EXPECT_EQ(p.ranks[r].read, totals[r].read) << r;
    EXPECT_EQ(p.ranks[r].sent, totals[r].sent) << r;
    EXPECT_EQ(p.ranks[r].received, totals[r].received) << r;
  }
  EXPECT_EQ(p.read_bytes, read_bytes);
  EXPECT_EQ(p.unique_bytes, unique);
}

// Per group: the most any member reads is at most the group's ideal share plus its largest chunk.
void expect_balanced(const FanoutInput& in, const FanoutPlan& p) {
  const unsigned groups = in.scope == FanoutScope::node ? in.nodes : 1;
  for (unsigned g = 0; g < groups; ++g) {
    std::uint64_t total = 0, largest = 0, most = 0, members = 0;
    for (const FanoutRead& r : p.reads) {
      if (r.group != g) continue;
      total += r.size;
      largest = std::max(largest, r.size);
    }
    for (const FanoutRank& r : in.ranks) {
      if (group_of(in, r.rank) != g) continue;
      ++members;
      most = std::max(most, p.ranks[r.rank].read);
    }
    if (members == 0) continue;
    EXPECT_LE(most * members, total + largest * members) << "group " << g;
  }
}

std::string dump(const FanoutPlan& p) {
  std::string s;
  for (const FanoutRead& r : p.reads) {
    s += fmt::format("R {} {} {} {} {} {} {}\n", r.item, r.file_index, r.offset, r.file_offset,
                     r.size, r.reader, r.group);
  }
  for (const FanoutMove& m : p.moves) {
    s += fmt::format("M {} {} {} {}\n", m.read, to_string(m.kind), m.source,
                     fmt::join(m.receivers, ","));
  }
  for (const FanoutRankBytes& b : p.ranks)
    s += fmt::format("B {} {} {}\n", b.read, b.sent, b.received);
  return s + fmt::format("U {} {}\n", p.unique_bytes, p.read_bytes);
}

std::vector<FanoutItem> items_of(const std::vector<std::uint64_t>& sizes) {
  std::vector<FanoutItem> items;
  std::uint64_t at = 100;  // a header before the data, so file offsets differ from item offsets
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    items.push_back(FanoutItem{
        .name = fmt::format("t{}", i), .file_index = i % 2, .offset = at, .bytes = sizes[i]});
    at += sizes[i];
  }
  return items;
}

// `world` replicas, ranks_per_node to a node.
FanoutInput replicas(const std::vector<std::uint64_t>& sizes, unsigned world, unsigned per_node,
                     FanoutScope scope) {
  FanoutInput in{.items = items_of(sizes),
                 .ranks = {},
                 .nodes = (world + per_node - 1) / per_node,
                 .scope = scope};
  for (unsigned r = 0; r < world; ++r)
    in.ranks.push_back(
        FanoutRank{.rank = r, .node = r / per_node, .everything = true, .needs = {}});
  return in;
}

// Tensor parallelism over all ranks of a job: every item is [rows, 16] of 2-byte elements; even
// items by rows, odd items by columns; item 0 (a "bias") is replicated on every rank.
FanoutInput tensor_parallel(unsigned world, unsigned per_node, FanoutScope scope,
                            std::uint64_t rows = 12) {
  FanoutInput in =
      replicas({64, rows * 32, rows * 32, rows * 32, rows * 32}, world, per_node, scope);
  for (FanoutRank& r : in.ranks) {
    r.everything = false;
    r.needs.push_back(FanoutNeed{.item = 0, .ranges = {{0, 64}}});
    for (std::size_t i = 1; i < in.items.size(); ++i) {
      r.needs.push_back(
          FanoutNeed{.item = i,
                     .ranges = i % 2 == 0 ? row_slice_ranges(rows, 16, 2, r.rank, world)
                                          : column_slice_ranges(rows, 16, 2, r.rank, world)});
    }
  }
  return in;
}

TEST(Fanout, SameInputsGiveTheSamePlanWhateverTheRankOrder) {
  FanoutInput in = tensor_parallel(7, 3, FanoutScope::node);
  in.ranks[2].everything = true;  // one replica among the slices
  in.ranks[2].needs.clear();
  in.exchange_budget = 40;
  const std::string want = dump(plan_fanout(in));
  EXPECT_EQ(dump(plan_fanout(in)), want);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    FanoutInput shuffled = in;
    std::shuffle(shuffled.ranks.begin(), shuffled.ranks.end(), rng);
    EXPECT_EQ(dump(plan_fanout(shuffled)), want) << "round " << round;
  }
  verify(in, plan_fanout(in));
}

TEST(Fanout, ReplicasReadOncePerNodeOrOncePerJob) {
  const std::vector<std::uint64_t> sizes{1000, 300, 300, 7, 512, 90, 1, 2048};
  for (const unsigned per_node : {1u, 2u, 4u}) {
    const FanoutInput node = replicas(sizes, 8, per_node, FanoutScope::node);
    const FanoutPlan pn = plan_fanout(node);
    verify(node, pn);
    expect_balanced(node, pn);
    EXPECT_DOUBLE_EQ(pn.amplification(), 8.0 / per_node);
    const FanoutInput job = replicas(sizes, 8, per_node, FanoutScope::job);
    const FanoutPlan pj = plan_fanout(job);
    verify(job, pj);
    expect_balanced(job, pj);
    EXPECT_DOUBLE_EQ(pj.amplification(), 1.0);
    for (const FanoutMove& m : pj.moves) EXPECT_EQ(m.receivers.size(), 7u);  // everyone else
  }
}

// One node's plan alone is the whole plan's reads and moves of that node.
TEST(Fanout, OneNodesPlanIsItsPartOfTheWholePlan) {
  FanoutInput in = tensor_parallel(9, 3, FanoutScope::node);
  in.ranks[4].everything = true;
  in.ranks[4].needs.clear();
  in.exchange_budget = 50;
  const FanoutPlan whole = plan_fanout(in);
  std::uint64_t summed = 0;
  for (unsigned g = 0; g < in.nodes; ++g) {
    FanoutInput one = in;
    one.only_node = g;
    const FanoutPlan part = plan_fanout(one);
    std::vector<std::string> want, got;
    for (const FanoutMove& m : whole.moves) {
      const FanoutRead& r = whole.reads[m.read];
      if (r.group == g)
        want.push_back(
            fmt::format("{} {} {} {}", r.item, r.offset, r.reader, fmt::join(m.receivers, ",")));
    }
    for (const FanoutMove& m : part.moves) {
      const FanoutRead& r = part.reads[m.read];
      got.push_back(
          fmt::format("{} {} {} {}", r.item, r.offset, r.reader, fmt::join(m.receivers, ",")));
    }
    EXPECT_EQ(got, want) << "node " << g;
    std::uint64_t reads = 0;
    for (const FanoutRead& r : part.reads) {
      EXPECT_EQ(r.group, g);
      reads += r.size;
    }
    for (const FanoutRank& r : in.ranks) {
      const std::uint64_t want_read = r.node == g ? whole.ranks[r.rank].read : 0;
      EXPECT_EQ(part.ranks[r.rank].read, want_read) << r.rank;
      if (r.node != g) {
        EXPECT_EQ(part.ranks[r.rank].received, 0u) << r.rank;
      }
    }
    EXPECT_EQ(part.read_bytes, reads);
    summed += reads;
  }
  EXPECT_EQ(summed, whole.read_bytes);
  FanoutInput bad = in;
  bad.only_node = 3;
  EXPECT_THROW((void)plan_fanout(bad), Error);
  bad = replicas({10}, 2, 1, FanoutScope::job);
  bad.only_node = 0;
  EXPECT_THROW((void)plan_fanout(bad), Error);
}

TEST(Fanout, OneReceiverIsPointToPoint) {
  const FanoutInput in = replicas({500}, 2, 2, FanoutScope::node);
  const FanoutPlan p = plan_fanout(in);
  verify(in, p);
  ASSERT_EQ(p.reads.size(), 1u);
  EXPECT_EQ(p.reads[0].reader, 0u);  // tie on load: the lowest id
  ASSERT_EQ(p.moves.size(), 1u);
  EXPECT_EQ(p.moves[0].kind, FanoutMoveKind::send);
  EXPECT_EQ(p.moves[0].receivers, std::vector<unsigned>{1});
  EXPECT_EQ(p.ranks[0].sent, 500u);
  EXPECT_EQ(p.ranks[1].received, 500u);
}

TEST(Fanout, ReadersAreBalancedByBytes) {
  std::mt19937_64 rng(34);
  std::vector<std::uint64_t> sizes;
  for (int i = 0; i < 60; ++i) sizes.push_back(1 + rng() % 3000);
  for (const FanoutScope scope : {FanoutScope::node, FanoutScope::job}) {
    for (const std::uint64_t budget : {std::uint64_t{64} * MiB, std::uint64_t{700}}) {
      FanoutInput in = replicas(sizes, 6, 3, scope);
      in.exchange_budget = budget;
      const FanoutPlan p = plan_fanout(in);
      verify(in, p);
      expect_balanced(in, p);
      for (const FanoutRankBytes& b : p.ranks) EXPECT_GT(b.read, 0u);
    }
  }
}

TEST(Fanout, RowSlicesAreReadByTheirOwnRanksWithoutMoves) {
  FanoutInput in = replicas({40 * 64, 10 * 64}, 4, 4, FanoutScope::job);
  for (FanoutRank& r : in.ranks) {
    r.everything = false;
    r.needs.push_back(FanoutNeed{.item = 0, .ranges = row_slice_ranges(40, 32, 2, r.rank, 4)});
    r.needs.push_back(FanoutNeed{.item = 1, .ranges = row_slice_ranges(10, 16, 4, r.rank, 4)});
  }
  const FanoutPlan p = plan_fanout(in);
  verify(in, p);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_DOUBLE_EQ(p.amplification(), 1.0);
  for (const FanoutRead& r : p.reads) {
    if (r.item == 0) {
      EXPECT_EQ(r.offset, row_slice_ranges(40, 32, 2, r.reader, 4)[0].offset);
    }
  }
}

TEST(Fanout, ColumnSlicesAndAReplicatedBias) {
  for (const FanoutScope scope : {FanoutScope::node, FanoutScope::job}) {
    const FanoutInput in = tensor_parallel(4, 2, scope);
    const FanoutPlan p = plan_fanout(in);
    verify(in, p);
    expect_balanced(in, p);
    // Only the bias moves: every slice range is needed by one rank, which reads it itself.
    for (const FanoutMove& m : p.moves) EXPECT_EQ(p.reads[m.read].item, 0u);
    EXPECT_FALSE(p.moves.empty());
  }
  const FanoutPlan job = plan_fanout(tensor_parallel(4, 2, FanoutScope::job));
  EXPECT_DOUBLE_EQ(job.amplification(), 1.0);
}

TEST(Fanout, OneRankReadsEverythingAndMovesNothing) {
  const FanoutInput in = replicas({10, 0, 300}, 1, 1, FanoutScope::node);
  const FanoutPlan p = plan_fanout(in);
  verify(in, p);
  EXPECT_TRUE(p.moves.empty());
  EXPECT_EQ(p.ranks[0].read, 310u);
  EXPECT_DOUBLE_EQ(p.amplification(), 1.0);
}

TEST(Fanout, MoreRanksThanTensors) {
  FanoutInput in = replicas({1000, 600}, 8, 8, FanoutScope::node);
  FanoutPlan p = plan_fanout(in);
  verify(in, p);
  EXPECT_EQ(p.reads.size(), 2u);  // two readers, six ranks only receive
  in.exchange_budget = 100;       // chunks spread the reads over every rank
  p = plan_fanout(in);
  verify(in, p);
  expect_balanced(in, p);
  EXPECT_EQ(p.reads.size(), 16u);
  for (const FanoutRankBytes& b : p.ranks) EXPECT_EQ(b.read, 200u);
}

TEST(Fanout, EmptyTensorsAndEmptyRangesReadNothing) {
  FanoutInput in = replicas({0, 0, 0}, 3, 1, FanoutScope::node);
  FanoutPlan p = plan_fanout(in);
  verify(in, p);
  EXPECT_TRUE(p.reads.empty());
  EXPECT_TRUE(p.moves.empty());
  EXPECT_EQ(p.unique_bytes, 0u);
  EXPECT_DOUBLE_EQ(p.amplification(), 1.0);
  in = replicas({0, 50}, 2, 2, FanoutScope::node);
  in.ranks[1].everything = false;
  in.ranks[1].needs.push_back(FanoutNeed{.item = 1, .ranges = {{10, 0}, {50, 0}}});
  p = plan_fanout(in);
  verify(in, p);
  EXPECT_EQ(p.read_bytes, 50u);
  EXPECT_TRUE(p.moves.empty());
}

TEST(Fanout, OverlappingNeedsOfOneRankCountOnce) {
  FanoutInput in = replicas({100}, 2, 2, FanoutScope::job);
  for (FanoutRank& r : in.ranks) {
    r.everything = false;
    r.needs.push_back(FanoutNeed{.item = 0, .ranges = {{0, 60}, {40, 30}, {0, 10}}});
  }
  in.ranks[1].needs[0].ranges = {{50, 50}};
  const FanoutPlan p = plan_fanout(in);
  verify(in, p);
  EXPECT_EQ(p.unique_bytes, 100u);
}

TEST(Fanout, LargeRangesAreCutAtTheExchangeBudget) {
  FanoutInput in = replicas({1000, 250}, 2, 2, FanoutScope::node);
  in.exchange_budget = 300;
  const FanoutPlan p = plan_fanout(in);
  verify(in, p);
  std::vector<std::uint64_t> sizes, offsets;
  for (const FanoutRead& r : p.reads) {
    if (r.item == 0) sizes.push_back(r.size), offsets.push_back(r.offset);
  }
  EXPECT_EQ(sizes, (std::vector<std::uint64_t>{300, 300, 300, 100}));
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{0, 300, 600, 900}));
  EXPECT_EQ(FanoutInput{}.exchange_budget, 64 * MiB);  // the documented default
}

TEST(Fanout, SliceHelpers) {
  EXPECT_EQ(row_slice_ranges(5, 3, 4, 0, 2), (std::vector<ByteRange>{{0, 24}}));
  EXPECT_EQ(row_slice_ranges(5, 3, 4, 1, 2), (std::vector<ByteRange>{{24, 36}}));
  EXPECT_TRUE(row_slice_ranges(2, 3, 4, 0, 4).empty());  // more parts than rows
  EXPECT_EQ(column_slice_ranges(2, 5, 2, 1, 2), (std::vector<ByteRange>{{4, 6}, {14, 6}}));
  TensorInfo t{
      .name = "w", .dtype = DType::raw, .raw_dtype = {}, .element_bits = 16, .shape = {4, 6}};
  EXPECT_EQ(column_slice_ranges(t, 2, 3), column_slice_ranges(4, 6, 2, 2, 3));
  EXPECT_EQ(row_slice_ranges(t, 1, 2), (std::vector<ByteRange>{{24, 24}}));
  const auto is_usage = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.domain() == ErrorDomain::usage;
    }
    return false;
  };
  EXPECT_TRUE(is_usage([] { (void)row_slice_ranges(4, 4, 1, 2, 2); }));
  EXPECT_TRUE(is_usage([] { (void)column_slice_ranges(4, 4, 1, 0, 0); }));
  TensorInfo three = t;
  three.shape = {2, 2, 2};
  EXPECT_TRUE(is_usage([&] { (void)row_slice_ranges(three, 0, 2); }));
  TensorInfo f4 = t;
  f4.element_bits = 4;
  EXPECT_TRUE(is_usage([&] { (void)column_slice_ranges(f4, 0, 2); }));
}

TEST(Fanout, BadInputIsAUsageError) {
  const auto expect_usage = [](const FanoutInput& in, const std::string& words) {
    try {
      (void)plan_fanout(in);
      ADD_FAILURE() << "no error for: " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), ErrorDomain::usage) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const FanoutInput good = replicas({10, 20}, 3, 2, FanoutScope::node);
  FanoutInput in = good;
  in.ranks[1].rank = 3;
  expect_usage(in, "out of range");
  in = good;
  in.ranks[1].rank = 0;
  expect_usage(in, "given twice");
  in = good;
  in.ranks[2].node = 2;
  expect_usage(in, "unknown node");
  in = good;
  in.ranks[0].everything = false;
  in.ranks[0].needs.push_back(FanoutNeed{.item = 2, .ranges = {{0, 1}}});
  expect_usage(in, "unknown item");
  in.ranks[0].needs[0] = FanoutNeed{.item = 1, .ranges = {{15, 6}}};
  expect_usage(in, "past the end");
  in.ranks[0].everything = true;
  in.ranks[0].needs[0] = FanoutNeed{.item = 1, .ranges = {{0, 1}}};
  expect_usage(in, "needs everything");
  in = good;
  in.exchange_budget = 0;
  expect_usage(in, "exchange_budget");
  in = good;
  in.ranks.clear();
  expect_usage(in, "no ranks");
  EXPECT_EQ(parse_fanout_scope("job"), FanoutScope::job);
  EXPECT_EQ(to_string(parse_fanout_scope("node")), "node");
  EXPECT_THROW((void)parse_fanout_scope("rack"), Error);
}

TEST(Fanout, ItemsComeFromTheCheckpointTable) {
  test::TempDir dir{"/var/tmp", "sluice-fanout-"};
  const std::string path = dir.file("m.safetensors");
  test::write_file(path, test::safetensors_file({{"a", "F32", {3, 4}, test::pattern(48)},
                                                 {"b", "BF16", {0}, {}},
                                                 {"c", "U8", {5}, test::pattern(5, 2)}}));
  const std::vector<std::string> paths{path};
  const Checkpoint cp = Checkpoint::open(paths);
  const std::vector<FanoutItem> items = fanout_items(cp);
  ASSERT_EQ(items.size(), cp.tensors().size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i].name, cp.tensors()[i].name);
    EXPECT_EQ(items[i].offset, cp.tensors()[i].offset);
    EXPECT_EQ(items[i].bytes, cp.tensors()[i].bytes);
    EXPECT_EQ(items[i].file_index, cp.tensors()[i].file_index);
  }
  FanoutInput in{.items = items, .ranks = {}, .nodes = 1, .scope = FanoutScope::job};
  for (unsigned r = 0; r < 2; ++r) {
    in.ranks.push_back(FanoutRank{.rank = r, .node = 0, .everything = false, .needs = {}});
    in.ranks.back().needs.push_back(
        FanoutNeed{.item = 0, .ranges = column_slice_ranges(cp.at("a"), r, 2)});
  }
  verify(in, plan_fanout(in));
}

}  // namespace
}  // namespace sluice
