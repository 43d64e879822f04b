// The capacity model of `sluice plan`: the 10,000-GPU case of docs/scale.md figure by figure,
// a different first bottleneck for each change of inputs (storage servers, node NICs, PCIe
// switch uplink, core network, a measured node), rate parsing, and bad inputs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/tools/capacity.hpp"

namespace sluice::capacity {
namespace {

// docs/scale.md: 10,000 GPUs, 1 GB per GPU per 8 s step, 2 x 200 Gb/s storage NICs per node,
// PCIe Gen5 with 4 switches, 40 storage servers of 25 GB/s.
Inputs scale_case() {
  Inputs in;
  in.gpus = 10'000;
  in.bytes_per_gpu_per_step = 1e9;
  in.step_s = 8;
  in.storage_servers = 40;
  in.server_bytes_per_s = 25e9;
  return in;
}

const Link& link(const Result& r, const std::string& name) {
  for (const Link& l : r.links) {
    if (l.name == name) return l;
  }
  throw std::runtime_error("no link " + name);
}

TEST(Capacity, TenThousandGpuCaseOfTheDocs) {
  const Result r = model(scale_case());
  EXPECT_EQ(r.nodes, 1250U);
  EXPECT_DOUBLE_EQ(r.per_gpu, 125e6);
  EXPECT_DOUBLE_EQ(r.per_node, 1e9);
  EXPECT_DOUBLE_EQ(r.total, 1.25e12);
  EXPECT_DOUBLE_EQ(link(r, "storage servers").capacity, 1e12);
  EXPECT_DOUBLE_EQ(link(r, "storage servers").utilisation(), 1.25);
  EXPECT_DOUBLE_EQ(link(r, "node NICs").capacity, 45e9);  // 2 x 200 Gb/s x 0.9
  EXPECT_NEAR(link(r, "node NICs").utilisation(), 1.0 / 45, 1e-12);
  EXPECT_DOUBLE_EQ(link(r, "core network").capacity, 1250 * 45e9);
  EXPECT_DOUBLE_EQ(link(r, "PCIe switch uplink").required, 250e6);  // 2 GPUs behind each
  EXPECT_NEAR(link(r, "GPU PCIe link").capacity, 63e9 * 0.82, 1);
  EXPECT_EQ(r.first_bottleneck().name, "storage servers");
  EXPECT_FALSE(r.fits());
  EXPECT_DOUBLE_EQ(r.deliverable(), 1e12);
  EXPECT_EQ(r.max_gpus, 8000U);
  const std::string text = report_text(r);
  EXPECT_NE(text.find("does NOT fit: storage servers"), std::string::npos) << text;
  EXPECT_NE(text.find("1.25 TB/s in all"), std::string::npos) << text;

  Inputs more = scale_case();
  more.storage_servers = 60;  // the fix the walk-through lands on: 1.5 TB/s
  const Result fixed = model(more);
  EXPECT_TRUE(fixed.fits());
  EXPECT_DOUBLE_EQ(fixed.first_bottleneck().headroom(), 1.2);
}

TEST(Capacity, NodeNicsFirstForACheckpointRestore) {
  Inputs in = scale_case();
  in.bytes_per_gpu_per_step = 0;
  in.step_s = 0;
  in.bytes_per_gpu_per_s = 6e9;  // 48 GB/s per node against 45 GB/s of NICs
  in.storage_servers = 3000;     // 75 TB/s: not the limit
  const Result r = model(in);
  EXPECT_EQ(r.first_bottleneck().name, "node NICs");
  EXPECT_NEAR(r.first_bottleneck().utilisation(), 48.0 / 45.0, 1e-12);
}

TEST(Capacity, PcieSwitchUplinkFirstOnGen4WithFourGpusASwitch) {
  Inputs in = scale_case();
  in.bytes_per_gpu_per_step = 0;
  in.step_s = 0;
  in.bytes_per_gpu_per_s = 8e9;
  in.pcie_gen = 4;
  in.pcie_switches_per_node = 2;
  in.nics_per_node = 8;
  in.nic_bits_per_s = 400e9;
  in.storage_servers = 5000;
  const Result r = model(in);
  EXPECT_EQ(r.first_bottleneck().name, "PCIe switch uplink");
  EXPECT_DOUBLE_EQ(r.first_bottleneck().required, 32e9);
}

TEST(Capacity, CoreNetworkFirstWhenOversubscribed) {
  Inputs in = scale_case();
  in.bytes_per_gpu_per_step = 0;
  in.step_s = 0;
  in.bytes_per_gpu_per_s = 1.5e9;  // 12 GB/s per node; the core gives each node 45/4
  in.core_oversubscription = 4;
  in.storage_servers = 1000;
  const Result r = model(in);
  EXPECT_EQ(r.first_bottleneck().name, "core network");
  EXPECT_NEAR(r.first_bottleneck().utilisation(), 12.0 / 11.25, 1e-12);
}

TEST(Capacity, MeasuredNodeFromABenchReport) {
  Inputs in = scale_case();
  in.storage_servers = 100;
  // An MPI report: host a moved 1.6 GB, host b 0.8 GB in a 2 s window -> b, 0.4 GB/s, is the node.
  const nlohmann::json report = {{"results",
                                  {{{"bytes_read", 2400000000ULL},
                                    {"bytes", 2400000000ULL},
                                    {"seconds", 2.0},
                                    {"error", nullptr},
                                    {"xfer", "cpu-only"},
                                    {"rw", "read"},
                                    {"block_size", 1048576},
                                    {"mpi",
                                     {{"world_size", 3},
                                      {"window", {{"seconds", 2.0}}},
                                      {"ranks",
                                       {{{"host", "a"}, {"bytes", 800000000ULL}},
                                        {{"host", "a"}, {"bytes", 800000000ULL}},
                                        {{"host", "b"}, {"bytes", 800000000ULL}}}}}}}}}};
  use_bench_report(in, report.dump(), "r.json");
  EXPECT_DOUBLE_EQ(in.measured_node_bytes_per_s, 0.4e9);
  EXPECT_NE(in.measured_from.find("slowest host b"), std::string::npos) << in.measured_from;
  const Result r = model(in);
  EXPECT_EQ(r.first_bottleneck().name, "measured node");
  EXPECT_DOUBLE_EQ(r.first_bottleneck().utilisation(), 2.5);
  EXPECT_THROW(use_bench_report(in, R"({"results":[]})", "x"), Error);
  EXPECT_THROW(use_bench_report(in, "not json", "x"), Error);
}

TEST(Capacity, RangeOfScales) {
  for (std::uint64_t gpus : {8ULL, 64ULL, 1000ULL, 10'000ULL, 100'000ULL}) {
    Inputs in = scale_case();
    in.gpus = gpus;
    const Result r = model(in);
    EXPECT_DOUBLE_EQ(r.total, 125e6 * static_cast<double>(gpus));
    EXPECT_EQ(r.nodes, (gpus + 7) / 8);
    const nlohmann::json j = nlohmann::json::parse(report_json(r));
    EXPECT_EQ(j["links"].size(), r.links.size());
    EXPECT_EQ(j["bottleneck"]["name"], r.first_bottleneck().name);
  }
}

TEST(Capacity, Rates) {
  EXPECT_DOUBLE_EQ(parse_rate("1.2TB/s"), 1.2e12);
  EXPECT_DOUBLE_EQ(parse_rate("25 GB/s"), 25e9);
  EXPECT_DOUBLE_EQ(parse_rate("400Gb/s"), 50e9);
  EXPECT_DOUBLE_EQ(parse_rate("2GiB/s"), 2.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_rate("1e9"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bytes("40GB"), 40e9);
  EXPECT_EQ(format_rate(1.25e12), "1.25 TB/s");
  EXPECT_THROW((void)parse_rate("fast"), Error);
  EXPECT_THROW((void)parse_rate("3 furlongs"), Error);
  EXPECT_THROW((void)parse_bytes("3Gb"), Error);
  EXPECT_THROW((void)pcie_x16_bytes_per_s(2), Error);
}

TEST(Capacity, BadInputs) {
  Inputs in = scale_case();
  in.bytes_per_gpu_per_s = 1e9;  // and per step: two demands
  EXPECT_THROW((void)model(in), Error);
  in = scale_case();
  in.step_s = 0;
  EXPECT_THROW((void)model(in), Error);
  in = scale_case();
  in.server_bytes_per_s = 0;
  EXPECT_THROW((void)model(in), Error);
  in = scale_case();
  in.core_oversubscription = 0.5;
  EXPECT_THROW((void)model(in), Error);
}

}  // namespace
}  // namespace sluice::capacity
