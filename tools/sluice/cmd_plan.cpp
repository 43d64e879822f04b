// sluice plan: the ingest capacity model (sluice/tools/capacity.hpp) from the command line. Parses
// the demand and the fabric, optionally reads a `sluice bench --json` report for the measured
// per-node figure, and prints the per-link table or JSON.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/tools/capacity.hpp"

namespace sluice::cli {
namespace {

struct PlanArgs {
  std::uint64_t gpus = 0;
  std::string per_gpu, per_step, total;
  double step_time = 0;
  capacity::Inputs in;
  std::string nic_speed = "200Gb/s";
  std::string server_bandwidth;
  std::string measured;
  bool json = false;
};

int run_plan_command(PlanArgs a) {
  capacity::Inputs in = a.in;
  in.gpus = a.gpus;
  const int demands = static_cast<int>(!a.per_gpu.empty()) + static_cast<int>(!a.per_step.empty()) +
                      static_cast<int>(!a.total.empty());
  if (demands != 1)
    throw UsageError(
        "give the demand once: --per-gpu RATE, --per-step BYTES --step-time S, or --total RATE");
  if (!a.per_gpu.empty()) in.bytes_per_gpu_per_s = capacity::parse_rate(a.per_gpu);
  if (!a.total.empty())
    in.bytes_per_gpu_per_s =
        capacity::parse_rate(a.total) / static_cast<double>(std::max<std::uint64_t>(1, a.gpus));
  if (!a.per_step.empty()) {
    in.bytes_per_gpu_per_step = capacity::parse_bytes(a.per_step);
    if (!(a.step_time > 0))
      throw UsageError("--per-step needs --step-time SECONDS (larger than 0)");
    in.step_s = a.step_time;
  } else if (a.step_time != 0) {
    throw UsageError("--step-time goes with --per-step");
  }
  in.nic_bits_per_s = capacity::parse_rate(a.nic_speed) * 8;
  if (!a.server_bandwidth.empty()) in.server_bytes_per_s = capacity::parse_rate(a.server_bandwidth);
  if (!a.measured.empty()) {
    std::ifstream f(a.measured);
    if (!f) throw UsageError(fmt::format("--measured: cannot read '{}'", a.measured));
    std::stringstream ss;
    ss << f.rdbuf();
    capacity::use_bench_report(in, ss.str(), a.measured);
  }
  const capacity::Result r = capacity::model(in);
  std::fputs((a.json ? capacity::report_json(r) + "\n" : capacity::report_text(r)).c_str(), stdout);
  return 0;
}

}  // namespace

Runner add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* c = app.add_subcommand(
      "plan",
      "Capacity plan for ingest: per-node and per-link bandwidth from storage to "
      "GPUs, the first bottleneck and the headroom (docs/scale.md)");
  c->add_option("--gpus", a->gpus, "GPUs in the job (8 to 100,000 and beyond)")->required();
  c->add_option("--per-gpu", a->per_gpu,
                "demand: bytes each GPU ingests per second (125MB/s, 2GB/s)");
  c->add_option("--per-step", a->per_step,
                "demand: bytes each GPU ingests per step (with --step-time)");
  c->add_option("--step-time", a->step_time, "time per training step (2, 2s, 500ms)")->transform(duration_transformer());
  c->add_option("--total", a->total,
                "demand: the whole job's ingest (1.2TB/s), shared by the GPUs");
  c->add_option("--gpus-per-node", a->in.gpus_per_node, "GPUs per node")->capture_default_str();
  c->add_option("--nics-per-node", a->in.nics_per_node, "NICs per node that carry storage traffic")
      ->capture_default_str();
  c->add_option("--nic-speed", a->nic_speed, "line rate of each NIC (200Gb/s, 400Gb/s)")
      ->capture_default_str();
  c->add_option("--nic-efficiency", a->in.nic_efficiency, "payload / line rate")
      ->capture_default_str();
  c->add_option("--pcie-gen", a->in.pcie_gen,
                "PCIe generation of the GPU and switch links (3-6, x16)")
      ->capture_default_str();
  c->add_option("--pcie-switches", a->in.pcie_switches_per_node, "PCIe switches per node (0: none)")
      ->capture_default_str();
  c->add_option("--pcie-efficiency", a->in.pcie_efficiency, "payload / raw PCIe rate")
      ->capture_default_str();
  c->add_option("--oversubscription", a->in.core_oversubscription,
                "core network oversubscription (2 = 2:1)")
      ->capture_default_str();
  c->add_option("--storage-servers", a->in.storage_servers,
                "storage servers (with --server-bandwidth)");
  c->add_option("--server-bandwidth", a->server_bandwidth,
                "read bandwidth each storage server delivers (25GB/s)");
  c->add_option("--measured", a->measured,
                "a sluice bench --json report: its read bandwidth per node is a link");
  c->add_flag("--json", a->json, "print the plan as JSON");
  return [a] { return run_plan_command(*a); };
}

}  // namespace sluice::cli
