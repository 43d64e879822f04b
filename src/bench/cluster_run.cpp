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

namespace {

void check_options(const Plan& plan, const ClusterOptions& options) {
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
}

// Every rank's host, at every rank (--rotate's partner, the report's host list).
std::vector<std::string> every_host(Communicator& comm, const ClusterEnv& where) {
  std::string joined;
  for (const auto& h : comm.gather(where.host)) joined += h + '\n';
  joined = comm.broadcast(joined);
  std::vector<std::string> hosts;
  for (std::size_t pos = 0; pos < joined.size();) {
    const std::size_t nl = joined.find('\n', pos);
    hosts.push_back(joined.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return hosts;
}

// Threads near the GPU, where sysfs knows its node (an explicit --numa-node wins). Returns the
// node the threads run on (-1: not bound).
int bind_near_gpu(Workload& w) {
  if (w.numa_node >= 0 || w.device.rfind("cuda", 0) != 0 || !uses_gpu(w.xfer)) return w.numa_node;
  try {
    w.numa_node = pci_numa_node(open_device(w.device)->info().pci_bus_id);
  } catch (const Error&) {
    // The run itself opens the device and reports why it cannot.
  }
  return w.numa_node;
}

// The hooks that keep the ranks in step: --rotate's reads of the partner's files, a barrier at
// each measured start, the stonewall, and after each phase the gather at rank 0 and its verdict.
class InStep {
 public:
  InStep(Communicator& comm, const ClusterEnv& where, const ClusterEnv& partner, const Plan& plan,
         const ClusterOptions& options, int numa, const std::function<void(const ClusterRun&)>& on_phase)
      : comm_(comm), where_(where), partner_(partner), plan_(plan), options_(options), numa_(numa),
        on_phase_(on_phase),
        stonewall_mode_(options.stonewall_s > 0 ? "deadline" : options.stonewall_first_done ? "first_done" : "") {}

  PlanHooks hooks() {
    PlanHooks h;
    h.before_run = [this](Workload& w, const std::string& phase) { read_partners_files(w, phase); };
    h.run.at_start = [this] { start(); };
    if (options_.stonewall_s > 0) {
      const auto limit = static_cast<std::uint64_t>(options_.stonewall_s * 1e9);
      h.run.poll = [this, limit](std::uint64_t) { return detail::now_ns() - started_ >= limit; };
    } else if (options_.stonewall_first_done) {
      h.run.poll = [this](std::uint64_t) { return comm_.done_raised(); };
    }
    h.after_run = [this](RunResult& r) { return after_run(r); };
    return h;
  }
  std::vector<ClusterRun>& runs() { return out_; }

 private:
  void read_partners_files(Workload& w, const std::string& phase) const {
    const bool reads_only = phase == "verify" || !does_writes(w.rw);
    if (!options_.rotate || !reads_only) return;
    const Workload theirs = expand_workload(plan_.workload, partner_);
    w.files = theirs.files;
    w.dir = theirs.dir;
  }

  void start() {
    // Armed before the barrier, so no rank can finish before every receive is posted.
    if (options_.stonewall_s <= 0 && options_.stonewall_first_done) comm_.arm_done();
    comm_.barrier();
    started_ = detail::now_ns();
  }

  bool after_run(RunResult& r) {
    if (options_.stonewall_first_done) {
      if (!r.stopped_bytes) comm_.raise_done();  // finished on its own: the others stop
      comm_.settle_done();
    }
    RankRun rr{.rank = where_.rank, .host = where_.host, .local_rank = where_.local_rank, .numa_node = numa_, .result = r};
    const std::vector<std::string> all = comm_.gather(rank_run_to_wire(rr));
    std::string verdict;
    if (comm_.rank() == 0) {
      std::vector<RankRun> runs;
      runs.reserve(all.size());
      for (const auto& s : all) runs.push_back(rank_run_from_wire(s));
      ClusterRun c = aggregate_ranks(runs, stonewall_mode_);
      verdict = c.aggregate.error;
      out_.push_back(std::move(c));
      if (on_phase_) on_phase_(out_.back());
    }
    verdict = comm_.broadcast(verdict);
    // Every rank stops after a phase that failed anywhere, so none waits in a barrier alone.
    if (!verdict.empty() && r.error.empty()) r.error = verdict;
    return verdict.empty();
  }

  Communicator& comm_;
  const ClusterEnv& where_;
  ClusterEnv partner_;
  const Plan& plan_;
  const ClusterOptions& options_;
  int numa_;
  const std::function<void(const ClusterRun&)>& on_phase_;
  std::string stonewall_mode_;
  std::uint64_t started_ = 0;
  std::vector<ClusterRun> out_;
};

}  // namespace

std::vector<ClusterRun> run_plan_on_cluster(Communicator& comm, const ClusterEnv& where,
                                            const Plan& plan, const ClusterOptions& options,
                                            const std::function<void(const ClusterRun&)>& on_phase,
                                            const ProgressFn& progress,
                                            std::vector<std::string>* hosts_out) {
  check_options(plan, options);
  const std::vector<std::string> hosts = every_host(comm, where);
  if (hosts_out != nullptr) *hosts_out = hosts;

  Plan mine = plan;
  mine.workload = expand_workload(plan.workload, where);
  const int numa = bind_near_gpu(mine.workload);
  ClusterEnv partner = where;
  partner.rank = rotate_partner(where.rank, hosts);
  partner.host = hosts[static_cast<std::size_t>(partner.rank)];

  InStep in_step(comm, where, partner, plan, options, numa, on_phase);
  (void)run_plan(mine, {}, comm.rank() == 0 ? progress : ProgressFn{}, in_step.hooks());
  return std::move(in_step.runs());
}

}  // namespace sluice::bench
