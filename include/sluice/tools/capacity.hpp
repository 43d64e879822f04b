// The capacity model behind `sluice plan`: how much ingest bandwidth a training cluster needs at
// each link between the storage servers and the GPUs, and which link gives out first. Inputs:
// the GPUs, the bytes each must ingest (per step or per second), the fabric (GPUs, storage NICs
// and PCIe switches per node, the core network's oversubscription, the storage servers) and,
// optionally, what one node measured (`sluice bench --json`). Output: per link the bytes per
// second each instance must carry, its capacity, utilisation and headroom; the first bottleneck;
// the largest demand and GPU count the fabric carries. docs/scale.md walks through a 10,000-GPU
// case. Rates are bytes per second (decimal units in the text: GB/s = 1e9 B/s).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"

namespace sluice::capacity {

struct Inputs {
  std::uint64_t gpus = 8;
  /// Demand, one of: bytes per GPU per second, or bytes per GPU per step with the step time.
  double bytes_per_gpu_per_s = 0;
  double bytes_per_gpu_per_step = 0;
  double step_s = 0;
  unsigned gpus_per_node = 8;
  unsigned nics_per_node = 2;           ///< NICs that carry storage traffic
  double nic_bits_per_s = 200e9;        ///< each NIC's line rate (200 Gb/s)
  double nic_efficiency = 0.9;          ///< payload over line rate (headers, RDMA/TCP overhead)
  unsigned pcie_gen = 5;                ///< 3 to 6, x16 links
  unsigned pcie_switches_per_node = 4;  ///< 0: GPUs hang off the root complex directly
  double pcie_efficiency = 0.82;        ///< payload over raw x16 rate (TLP headers, flow control)
  double core_oversubscription = 1;     ///< node uplinks : core capacity (2 means 2:1)
  unsigned storage_servers = 0;         ///< 0: not modelled
  double server_bytes_per_s = 0;        ///< each storage server's deliverable read bandwidth
  /// Measured read bandwidth of one node (sluice bench --json); 0: not given.
  double measured_node_bytes_per_s = 0;
  std::string measured_from;  ///< where the measured figure came from
};

struct SLUICE_API Link {
  std::string name;         ///< "storage servers", "core network", "node NICs", ...
  std::string what;         ///< one line: what the capacity is made of
  std::uint64_t count = 0;  ///< instances in the cluster
  double required = 0;      ///< bytes/s each instance must carry
  double capacity = 0;      ///< bytes/s each instance can carry
  [[nodiscard]] double utilisation() const noexcept {
    return capacity > 0 ? required / capacity : 0;
  }
  /// capacity / required: 1.25 means 25% to spare; below 1 the link cannot keep up.
  [[nodiscard]] double headroom() const noexcept;
};

struct SLUICE_API Result {
  Inputs inputs;
  std::uint64_t nodes = 0;
  double per_gpu = 0;  ///< bytes/s each GPU ingests
  double per_node = 0;
  double total = 0;            ///< the cluster's ingest
  std::vector<Link> links;     ///< from the storage servers to the GPU
  std::size_t bottleneck = 0;  ///< index into links: the highest utilisation
  /// The demand the cluster can carry: total * the bottleneck's headroom.
  [[nodiscard]] double deliverable() const noexcept;
  /// The most GPUs (whole nodes) the shared links (storage, core) carry at this per-GPU demand; 0
  /// when no shared link limits them.
  std::uint64_t max_gpus = 0;
  [[nodiscard]] bool fits() const noexcept;
  [[nodiscard]] const Link& first_bottleneck() const { return links.at(bottleneck); }
};

/// PCIe x16 bandwidth per direction, raw (before efficiency), bytes/s: 3: 15.75e9 ... 6: 126e9.
/// Throws a usage Error for other generations.
[[nodiscard]] SLUICE_API double pcie_x16_bytes_per_s(unsigned gen);

/// Checks the inputs (usage Error naming the bad one) and computes every link.
[[nodiscard]] SLUICE_API Result model(const Inputs& in);

/// The measured read bandwidth per node from a `sluice bench` JSON report: the best read
/// result; under MPI the slowest host's bytes over the common window. Sets
/// measured_node_bytes_per_s and measured_from. Throws a usage Error when the report has no read.
SLUICE_API void use_bench_report(Inputs& in, std::string_view report_json, std::string_view source);

/// "1.2TB/s", "25 GB/s", "3GiB/s", "400Gb/s" (bits), "1e9" (bytes/s) -> bytes per second.
[[nodiscard]] SLUICE_API double parse_rate(std::string_view text);
/// "40GB", "1.5 GiB", "100M" -> bytes.
[[nodiscard]] SLUICE_API double parse_bytes(std::string_view text);
/// 1.25e12 -> "1.25 TB/s".
[[nodiscard]] SLUICE_API std::string format_rate(double bytes_per_s);

/// The human report: inputs, the per-link table, the bottleneck, headroom and the largest demand.
[[nodiscard]] SLUICE_API std::string report_text(const Result& r);
/// The same as JSON (docs/scale.md lists the fields).
[[nodiscard]] SLUICE_API std::string report_json(const Result& r);

}  // namespace sluice::capacity
