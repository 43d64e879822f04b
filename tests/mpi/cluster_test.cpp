// The pieces of `sluice bench` under MPI that need no MPI: the launcher variables, placeholder
// expansion, --rotate's partner, the aggregate over ranks (IOR's common window, exact histogram
// merge, slowest rank, stonewall figures), the wire format and the JSON report, and a whole
// plan through run_plan_on_cluster on the single-process communicator; for `sluice load`, the
// share each rank loads and load_on_cluster against a scripted communicator (rank 0 and not).
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "load/tensor_files.hpp"
#include "sluice/error.hpp"
#include "sluice/tools/bench_cluster.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/tools/load_cluster.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using nlohmann::json;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ClusterEnv, NoLauncherIsRankZeroOfOne) {
  const ClusterEnv e = detect_cluster_env(env_of({}));
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.launcher, Launcher::none);
}

TEST(ClusterEnv, EachLauncher) {
  struct Case {
    std::map<std::string, std::string> vars;
    Launcher launcher;
    int rank, local_rank, world;
  };
  const std::vector<Case> cases = {
      {{{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
       Launcher::openmpi,
       3,
       1,
       8},
      {{{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "2"}}, Launcher::pmi, 5, 2, 6},
      {{{"SLURM_PROCID", "7"},
        {"SLURM_NTASKS", "16"},
        {"SLURM_LOCALID", "3"},
        {"SLURM_STEP_ID", "0"}},
       Launcher::slurm,
       7,
       3,
       16},
      {{{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}, Launcher::torchrun, 2, 0, 4},
      // Open MPI's variables win over torchrun's left in the environment.
      {{{"RANK", "9"},
        {"WORLD_SIZE", "10"},
        {"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"}},
       Launcher::openmpi,
       1,
       0,
       2},
  };
  for (const Case& c : cases) {
    const ClusterEnv e = detect_cluster_env(env_of(c.vars));
    EXPECT_EQ(e.launcher, c.launcher) << to_string(c.launcher);
    EXPECT_EQ(e.rank, c.rank) << to_string(c.launcher);
    EXPECT_EQ(e.local_rank, c.local_rank) << to_string(c.launcher);
    EXPECT_EQ(e.world_size, c.world) << to_string(c.launcher);
  }
}

TEST(ClusterEnv, SlurmBatchScriptIsNotAStep) {
  // sbatch sets SLURM_PROCID=0 and SLURM_NTASKS for the batch script itself: not rank 0 of N.
  const ClusterEnv e = detect_cluster_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "64"}}));
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.launcher, Launcher::none);
}

TEST(ClusterEnv, BadVariablesAreUsageErrors) {
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"RANK", "4"}, {"WORLD_SIZE", "4"}},
           {{"PMI_RANK", "0"}, {"PMI_SIZE", "-1"}}}) {
    try {
      (void)detect_cluster_env(env_of(vars));
      ADD_FAILURE() << "accepted " << vars.begin()->first << "=" << vars.begin()->second;
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), ErrorDomain::usage);
    }
  }
}

TEST(Placeholders, Expand) {
  ClusterEnv e;
  e.rank = 12;
  e.local_rank = 3;
  e.world_size = 64;
  e.host = "node7";
  EXPECT_EQ(expand_placeholders("/data/{host}/f.{rank}", e), "/data/node7/f.12");
  EXPECT_EQ(expand_placeholders("cuda:{local_rank}", e), "cuda:3");
  EXPECT_EQ(expand_placeholders("{rank}-of-{world_size}", e), "12-of-64");
  EXPECT_EQ(expand_placeholders("a{{b}}c", e), "a{b}c");
  EXPECT_EQ(expand_placeholders("plain", e), "plain");
  EXPECT_TRUE(has_placeholders("x.{rank}"));
  EXPECT_FALSE(has_placeholders("x.{other}"));
  EXPECT_THROW((void)expand_placeholders("f.{ranks}", e), Error);
  EXPECT_THROW((void)expand_placeholders("f.{rank", e), Error);
}

TEST(Rotate, PartnerIsOnAnotherHostWhereThereAreSeveral) {
  const std::vector<std::string> one = {"a", "a", "a", "a"};
  EXPECT_EQ(bench::rotate_partner(0, one), 1);
  EXPECT_EQ(bench::rotate_partner(3, one), 0);
  const std::vector<std::string> two = {"a", "a", "b", "b"};
  for (int r = 0; r < 4; ++r) {
    const int p = bench::rotate_partner(r, two);
    EXPECT_NE(two[static_cast<std::size_t>(p)], two[static_cast<std::size_t>(r)]) << r;
  }
  EXPECT_EQ(bench::rotate_partner(0, {"a"}), 0);
}

bench::RankRun rank(int r, std::string host, std::uint64_t bytes, double start, double end,
                    std::vector<std::uint64_t> lat_ns) {
  bench::RankRun rr;
  rr.rank = r;
  rr.host = std::move(host);
  rr.result.bytes = bytes;
  rr.result.reads.bytes = bytes;
  rr.result.ios = lat_ns.size();
  rr.result.reads.ios = lat_ns.size();
  rr.result.start_unix = start;
  rr.result.end_unix = end;
  rr.result.seconds = end - start;
  rr.result.block_size = MiB;
  for (auto v : lat_ns) {
    rr.result.latency.record(v);
    rr.result.reads.latency.record(v);
  }
  rr.result.paths.push_back({"host", "cpu-only", lat_ns.size()});
  rr.result.verified = true;
  return rr;
}

TEST(Aggregate, CommonWindowMergedHistogramSlowestRank) {
  const std::vector<bench::RankRun> ranks = {
      rank(0, "a", 4 * GiB, 100.0, 104.0, {1000, 2000}),        // 1 GiB/s
      rank(1, "a", 4 * GiB, 100.5, 102.5, {3000}),              // 2 GiB/s
      rank(2, "b", 2 * GiB, 100.2, 106.0, {4000, 5000, 6000}),  // 0.34 GiB/s
  };
  const bench::ClusterRun c = bench::aggregate_ranks(ranks);
  EXPECT_EQ(c.world_size, 3);
  EXPECT_EQ(c.hosts, 2);
  EXPECT_DOUBLE_EQ(c.window_start, 100.0);
  EXPECT_DOUBLE_EQ(c.window_end, 106.0);
  EXPECT_DOUBLE_EQ(c.aggregate.seconds, 6.0);
  EXPECT_EQ(c.aggregate.bytes, 10 * GiB);
  // IOR's aggregate: all bytes over the common window, not the sum of the ranks' rates (3.34).
  EXPECT_DOUBLE_EQ(c.aggregate.gib_per_s(), 10.0 / 6.0);
  EXPECT_EQ(c.aggregate.latency.count(), 6U);
  EXPECT_EQ(c.aggregate.latency.max(), 6000U);
  EXPECT_EQ(c.aggregate.ios, 6U);
  EXPECT_EQ(c.slowest.rank, 2);
  EXPECT_EQ(c.slowest.host, "b");
  EXPECT_DOUBLE_EQ(c.slowest.median_gib_per_s, 1.0);
  EXPECT_NEAR(c.slowest.gap_pct, 100 * (1.0 - 2.0 / 5.8), 1e-9);
  ASSERT_EQ(c.aggregate.paths.size(), 1U);
  EXPECT_EQ(c.aggregate.paths[0].ios, 6U);
  EXPECT_TRUE(c.aggregate.error.empty());
  EXPECT_FALSE(c.stonewall.has_value());
}

TEST(Aggregate, FailedRankNamedInTheError) {
  std::vector<bench::RankRun> ranks = {rank(0, "a", GiB, 0, 1, {1}), rank(1, "b", GiB, 0, 1, {1})};
  ranks[1].result.error = "read failed: EIO";
  const bench::ClusterRun c = bench::aggregate_ranks(ranks);
  EXPECT_EQ(c.aggregate.error, "rank 1 on b: read failed: EIO");
  EXPECT_EQ(c.ranks[1].error, "read failed: EIO");
}

TEST(Aggregate, StonewallFigures) {
  std::vector<bench::RankRun> ranks = {rank(0, "a", 3 * GiB, 10, 13, {1}),
                                       rank(1, "a", GiB, 10, 11, {1})};
  ranks[0].result.stopped_bytes = 2 * GiB;  // stopped at 2 s; in-flight transfers added 1 GiB
  ranks[0].result.stopped_s = 2;
  const bench::ClusterRun c = bench::aggregate_ranks(ranks, "deadline");
  ASSERT_TRUE(c.stonewall.has_value());
  EXPECT_EQ(c.stonewall->mode, "deadline");
  EXPECT_EQ(c.stonewall->stonewalled_bytes, 3 * GiB);  // rank 1 finished before: counts whole
  EXPECT_DOUBLE_EQ(c.stonewall->seconds, 2.0);
  EXPECT_DOUBLE_EQ(c.stonewall->stonewalled_gib_per_s, 1.5);
  EXPECT_EQ(c.stonewall->completed_bytes, 4 * GiB);
  EXPECT_DOUBLE_EQ(c.stonewall->completed_gib_per_s, 4.0 / 3.0);
}

TEST(Wire, RoundTripKeepsHistogramsExactly) {
  bench::RankRun rr = rank(4, "node-x", 123456789, 1.5, 2.75, {100, 1'000'000, 77'777});
  rr.local_rank = 2;
  rr.numa_node = 1;
  rr.result.error = "boom \"quoted\"";
  rr.result.stopped_bytes = 42;
  const bench::RankRun back = bench::rank_run_from_wire(bench::rank_run_to_wire(rr));
  EXPECT_EQ(back.rank, 4);
  EXPECT_EQ(back.host, "node-x");
  EXPECT_EQ(back.local_rank, 2);
  EXPECT_EQ(back.numa_node, 1);
  EXPECT_EQ(back.result.bytes, rr.result.bytes);
  EXPECT_DOUBLE_EQ(back.result.start_unix, 1.5);
  EXPECT_DOUBLE_EQ(back.result.end_unix, 2.75);
  EXPECT_TRUE(back.result.latency == rr.result.latency);
  EXPECT_TRUE(back.result.reads.latency == rr.result.reads.latency);
  EXPECT_EQ(back.result.error, rr.result.error);
  EXPECT_EQ(back.result.stopped_bytes, std::optional<std::uint64_t>(42));
  EXPECT_THROW((void)bench::rank_run_from_wire("{}"), Error);
}

TEST(Report, MpiFieldsRecomputeTheAggregate) {
  const std::vector<bench::RankRun> ranks = {rank(0, "a", 2 * GiB, 50, 52, {10}),
                                             rank(1, "b", GiB, 51, 54, {20})};
  const bench::ClusterRun c = bench::aggregate_ranks(ranks);
  bench::Plan plan;
  plan.workload.files = {"/x/f.{rank}"};
  const json doc = json::parse(bench::cluster_report_json(plan, "sluice bench", {c},
                                                          {.world_size = 2,
                                                           .hosts = {"a", "b"},
                                                           .launcher = "openmpi",
                                                           .rotate = false,
                                                           .stonewall_s = 0}));
  EXPECT_EQ(doc["mpi"]["world_size"], 2);
  EXPECT_EQ(doc["mpi"]["hosts"], json::array({"a", "b"}));
  const json& r = doc["results"][0];
  const json& m = r["mpi"];
  std::uint64_t sum = 0;
  double lo = 1e300, hi = 0;
  for (const json& k : m["ranks"]) {
    sum += k["bytes"].get<std::uint64_t>();
    lo = std::min(lo, k["start"].get<double>());
    hi = std::max(hi, k["end"].get<double>());
  }
  EXPECT_EQ(sum, r["bytes"].get<std::uint64_t>());
  EXPECT_DOUBLE_EQ(m["window"]["seconds"].get<double>(), hi - lo);
  EXPECT_DOUBLE_EQ(r["gib_per_s"].get<double>(),
                   static_cast<double>(sum) / static_cast<double>(GiB) / (hi - lo));
  EXPECT_EQ(r["latency_histogram_ns"]["count"], 2);
  EXPECT_EQ(m["slowest"]["rank"], 1);
  EXPECT_TRUE(m["stonewall"].is_null());
  EXPECT_EQ(m["ranks"][1]["host"], "b");
  EXPECT_TRUE(m["ranks"][0]["latency_us"].contains("p99"));
  const std::string csv = bench::cluster_csv({c});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);  // header, all, two ranks
  EXPECT_EQ(csv.rfind("rank,host,xfer,", 0), 0U);
}

TEST(ClusterRun, SingleProcessPlanWithPlaceholdersAndStonewall) {
  test::TempDir dir("/var/tmp", "sluice-cluster-");
  auto comm = make_single_communicator();
  ClusterEnv where;
  where.host = "here";
  bench::Plan plan;
  plan.workload.files = {dir.path() + "/f.{rank}.{host}"};
  plan.workload.size = 4 * MiB;
  plan.workload.block_size = 256 * KiB;
  plan.workload.rw = bench::RwMode::write;
  plan.workload.verify = true;
  plan.workload.direct = false;
  int phases = 0;
  const auto runs =
      bench::run_plan_on_cluster(*comm, where, plan, {.rotate = true, .stonewall_s = 30},
                                 [&](const bench::ClusterRun&) { ++phases; });
  ASSERT_EQ(runs.size(), 2U);  // the write and its read-back
  EXPECT_EQ(phases, 2);
  EXPECT_EQ(test::file_size(dir.path() + "/f.0.here"), 4 * MiB);
  EXPECT_EQ(runs[1].aggregate.phase, "verify");
  EXPECT_TRUE(runs[1].aggregate.verified);
  EXPECT_EQ(runs[1].aggregate.bytes, 4 * MiB);
  ASSERT_TRUE(runs[0].stonewall.has_value());
  EXPECT_EQ(runs[0].stonewall->stonewalled_bytes, 4 * MiB);  // finished long before 30 s
  EXPECT_TRUE(runs[0].aggregate.error.empty());
}

TEST(ClusterRun, RotateNeedsAFilePerRank) {
  auto comm = make_single_communicator();
  bench::Plan plan;
  plan.workload.files = {"/var/tmp/shared"};
  plan.workload.size = MiB;
  EXPECT_THROW(
      (void)bench::run_plan_on_cluster(*comm, {}, plan, {.rotate = true, .stonewall_s = 0}), Error);
}

TEST(LoadShare, FlagsThenLauncherThenAlone) {
  ClusterEnv alone;
  ClusterEnv torchrun{.rank = 3, .local_rank = 1, .world_size = 4, .local_size = 2,
                      .launcher = Launcher::torchrun, .host = "h"};
  const LoadShare flags = load_share(1, 2, torchrun);  // the flags win over the variables
  EXPECT_EQ(flags.rank, 1U);
  EXPECT_EQ(flags.world, 2U);
  EXPECT_FALSE(flags.from_env);
  const LoadShare env = load_share(-1, -1, torchrun);
  EXPECT_EQ(env.rank, 3U);
  EXPECT_EQ(env.world, 4U);
  EXPECT_TRUE(env.from_env);
  const LoadShare one = load_share(-1, -1, alone);
  EXPECT_EQ(one.rank, 0U);
  EXPECT_EQ(one.world, 1U);
  EXPECT_FALSE(one.from_env);
}

TEST(LoadShare, BadFlagsAreUsageErrors) {
  for (auto [rank, world] : {std::pair{1, -1}, {-1, 2}, {0, 0}, {2, 2}, {5, 3}}) {
    try {
      (void)load_share(rank, world, {});
      ADD_FAILURE() << "--rank " << rank << " --world " << world << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.domain(), ErrorDomain::usage) << e.what();
      EXPECT_NE(std::string(e.what()).find("--"), std::string::npos) << "names the flag: " << e.what();
    }
  }
}

// A communicator whose other ranks are scripted: it records the calls and, at rank 0, answers
// the gather with this rank's record and the ones given.
class ScriptedComm final : public Communicator {
 public:
  ScriptedComm(int rank, int size, std::vector<RankSpan> others) : rank_(rank), size_(size), others_(std::move(others)) {}
  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::string_view kind() const noexcept override { return "scripted"; }
  void barrier() override { ++barriers; }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    ++gathers;
    sent = mine;
    if (rank_ != root) return {};
    std::vector<std::string> all{mine};
    for (const RankSpan& s : others_) all.push_back(to_wire(s));
    return all;
  }
  std::string broadcast(const std::string& value, int) override { return value; }
  [[noreturn]] void abort(int code) override { throw std::runtime_error("abort " + std::to_string(code)); }

  int barriers = 0;
  int gathers = 0;
  std::string sent;

 private:
  int rank_;
  int size_;
  std::vector<RankSpan> others_;
};

class LoadOnCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<test::StTensor> ts;
    for (int i = 0; i < 4; ++i) {
      ts.push_back({"t" + std::to_string(i), "U8", {64 * KiB}, std::vector<std::byte>(64 * KiB, std::byte(i))});
    }
    test::write_file(dir_.file("m.safetensors"), test::safetensors_file(ts));
    options_.target = LoadTarget::pageable_host;
    options_.world = 2;
  }
  [[nodiscard]] Checkpoint open_checkpoint() const {
    const std::vector<std::string> paths{dir_.file("m.safetensors")};
    return Checkpoint::open(paths);
  }
  test::TempDir dir_{"/var/tmp", "sluice-load-cluster-"};
  LoadOptions options_;
  ClusterEnv where_{.rank = 0, .local_rank = 0, .world_size = 2, .local_size = 2,
                    .launcher = Launcher::openmpi, .host = "here"};
};

TEST_F(LoadOnCluster, WithoutACommunicatorItIsAPlainLoadOfTheShare) {
  const Checkpoint cp = open_checkpoint();
  options_.rank = 1;
  const ClusterLoad done = load_on_cluster(nullptr, where_, cp, options_);
  EXPECT_FALSE(done.aggregate.has_value());
  ASSERT_EQ(done.loaded.tensors().size(), 2U);  // its half: t2 and t3
  EXPECT_EQ(done.loaded.tensors()[0].info->name, "t2");
  EXPECT_EQ(done.loaded.result().bytes, 128 * KiB);
}

TEST_F(LoadOnCluster, RankZeroStartsAfterTheBarrierAndGetsTheAggregate) {
  const Checkpoint cp = open_checkpoint();
  const double before = unix_now();
  // The other rank: 1 MiB over two seconds that began a second before this one.
  ScriptedComm comm(0, 2, {{.rank = 1, .host = "there", .bytes = MiB, .start = before - 1, .end = before + 1, .error = {}}});
  int barriers_seen = -1;
  options_.on_tensor = [&](const LoadedTensor&) { barriers_seen = comm.barriers; };
  const ClusterLoad done = load_on_cluster(&comm, where_, cp, options_);
  EXPECT_EQ(barriers_seen, 1) << "the load starts after the barrier";
  EXPECT_EQ(comm.gathers, 1);
  const RankSpan mine = span_from_wire(comm.sent);
  EXPECT_EQ(mine.rank, 0);
  EXPECT_EQ(mine.host, "here");
  EXPECT_EQ(mine.bytes, 128 * KiB);
  EXPECT_GE(mine.start, before);
  EXPECT_GE(mine.end, mine.start);
  ASSERT_TRUE(done.aggregate.has_value());
  EXPECT_EQ(done.aggregate->ranks, 2);
  EXPECT_EQ(done.aggregate->bytes, MiB + 128 * KiB);
  EXPECT_DOUBLE_EQ(done.aggregate->start, before - 1);
  EXPECT_DOUBLE_EQ(done.aggregate->end, std::max(before + 1, mine.end));
  EXPECT_EQ(done.loaded.tensors().size(), 2U);
}

TEST_F(LoadOnCluster, OtherRanksSendTheirSpanAndGetNoAggregate) {
  const Checkpoint cp = open_checkpoint();
  options_.rank = 1;
  ClusterEnv where = where_;
  where.rank = 1;
  ScriptedComm comm(1, 2, {});
  const ClusterLoad done = load_on_cluster(&comm, where, cp, options_);
  EXPECT_EQ(comm.barriers, 1);
  EXPECT_EQ(span_from_wire(comm.sent).rank, 1);
  EXPECT_EQ(span_from_wire(comm.sent).bytes, 128 * KiB);
  EXPECT_FALSE(done.aggregate.has_value());
}

TEST_F(LoadOnCluster, AFailedLoadThrowsBeforeTheGather) {
  const Checkpoint cp = open_checkpoint();
  options_.tensors = {"nope"};
  ScriptedComm comm(0, 2, {});
  EXPECT_THROW((void)load_on_cluster(&comm, where_, cp, options_), Error);
  EXPECT_EQ(comm.gathers, 0) << "the caller ends the job; the others wait in the gather";
}

}  // namespace
}  // namespace sluice
