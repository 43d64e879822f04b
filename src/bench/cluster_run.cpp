// A plan run in step on every rank of a job: placeholders expanded per rank, threads bound to
// the GPU's NUMA node, a barrier just before each measured phase (after files are laid out), and
// after each phase every rank's result gathered at rank 0, which combines them and tells every
// rank whether to go on. The stonewall is a local deadline from the common start: no messages
// while the transfers run.
#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "sluice/device.hpp"
#include "sluice/error.hpp"
#include "sluice/tools/bench_cluster.hpp"
#include "worker.hpp"

namespace sluice::bench {

Workload expand_workload(const Workload& w, const ClusterEnv& where) {
  Workload out = w;
  for (auto& f : out.files) f = expand_placeholders(f, where);
  out.dir = expand_placeholders(w.dir, where);
  out.device = expand_placeholders(w.device, where);
  return out;
}

int rotate_partner(int rank, const std::vector<std::string>& hosts) {
  const int n = static_cast<int>(hosts.size());
  if (n <= 1) return rank;
  const auto here = static_cast<int>(
      std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)]));
  const int shift = here < n ? here : 1;
  return (rank + shift) % n;
}

std::vector<ClusterRun> run_plan_on_cluster(Communicator& comm, const ClusterEnv& where,
                                            const Plan& plan, const ClusterOptions& options,
                                            const std::function<void(const ClusterRun&)>& on_phase,
                                            const ProgressFn& progress,
                                            std::vector<std::string>* hosts_out) {
  if (options.rotate && plan.workload.time_s > 0) {
    throw_usage_error({.op = "bench"},
                      "--rotate needs a size-bound run (no --time): each rank reads exactly "
                      "what its partner wrote");
  }
  const bool shared_files = plan.workload.dir.empty() &&
                            std::none_of(plan.workload.files.begin(), plan.workload.files.end(),
                                         [](const std::string& f) { return has_placeholders(f); });
  if (options.rotate && shared_files) {
    throw_usage_error({.op = "bench"},
                      "--rotate needs a file per rank: put {rank} in --file (or use --dir "
                      "with {rank})");
  }
  // Every rank's host, at every rank (--rotate's partner, the report's host list).
  std::string joined;
  for (const auto& h : comm.gather(where.host)) joined += h + '\n';
  joined = comm.broadcast(joined);
  std::vector<std::string> hosts;
  for (std::size_t pos = 0; pos < joined.size();) {
    const std::size_t nl = joined.find('\n', pos);
    hosts.push_back(joined.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (hosts_out != nullptr) *hosts_out = hosts;

  Plan mine = plan;
  mine.workload = expand_workload(plan.workload, where);
  int numa = mine.workload.numa_node;
  // Threads near the GPU, where sysfs knows its node (an explicit --numa-node wins).
  if (numa < 0 && mine.workload.device.rfind("cuda", 0) == 0 && uses_gpu(mine.workload.xfer)) {
    try {
      numa = pci_numa_node(open_device(mine.workload.device)->info().pci_bus_id);
      mine.workload.numa_node = numa;
    } catch (const Error&) {
      // The run itself opens the device and reports why it cannot.
    }
  }

  ClusterEnv partner = where;
  partner.rank = rotate_partner(where.rank, hosts);
  partner.host = hosts[static_cast<std::size_t>(partner.rank)];

  std::vector<ClusterRun> out;
  PlanHooks hooks;
  hooks.before_run = [&](Workload& w, const std::string& phase) {
    const bool reads_only = phase == "verify" || !does_writes(w.rw);
    if (!options.rotate || !reads_only) return;
    const Workload theirs = expand_workload(plan.workload, partner);
    w.files = theirs.files;
    w.dir = theirs.dir;
  };
  std::uint64_t started = 0;
  hooks.run.at_start = [&] {
    comm.barrier();
    started = detail::now_ns();
  };
  if (options.stonewall_s > 0) {
    const auto limit = static_cast<std::uint64_t>(options.stonewall_s * 1e9);
    hooks.run.poll = [&, limit](std::uint64_t) { return detail::now_ns() - started >= limit; };
  } else if (options.stonewall_first_done) {
    // Armed before the barrier, so no rank can finish before every receive is posted.
    hooks.run.at_start = [&] {
      comm.arm_done();
      comm.barrier();
      started = detail::now_ns();
    };
    hooks.run.poll = [&](std::uint64_t) { return comm.done_raised(); };
  }
  const std::string stonewall_mode = options.stonewall_s > 0        ? "deadline"
                                     : options.stonewall_first_done ? "first_done"
                                                                    : "";
  hooks.after_run = [&](RunResult& r) {
    if (options.stonewall_first_done) {
      if (!r.stopped_bytes) comm.raise_done();  // finished on its own: the others stop
      comm.settle_done();
    }
    RankRun rr{.rank = where.rank,
               .host = where.host,
               .local_rank = where.local_rank,
               .numa_node = numa,
               .result = r};
    const std::vector<std::string> all = comm.gather(rank_run_to_wire(rr));
    std::string verdict;
    if (comm.rank() == 0) {
      std::vector<RankRun> runs;
      runs.reserve(all.size());
      for (const auto& s : all) runs.push_back(rank_run_from_wire(s));
      ClusterRun c = aggregate_ranks(runs, stonewall_mode);
      verdict = c.aggregate.error;
      out.push_back(std::move(c));
      if (on_phase) on_phase(out.back());
    }
    verdict = comm.broadcast(verdict);
    // Every rank stops after a phase that failed anywhere, so none waits in a barrier alone.
    if (!verdict.empty() && r.error.empty()) r.error = verdict;
    return verdict.empty();
  };
  (void)run_plan(mine, {}, comm.rank() == 0 ? progress : ProgressFn{}, hooks);
  return out;
}

}  // namespace sluice::bench
