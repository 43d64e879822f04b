// A plan: every (block size, round, transfer type) of one benchmark, interleaved as DESIGN.md's
// performance method asks (A B C A B C ...), with medians and ratios over the rounds.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sluice/page_cache.hpp"
#include "sluice/tools/bench.hpp"

namespace sluice::bench {
namespace {

std::vector<std::string> plan_files(const Workload& w) {
  if (!w.dir.empty()) {
    std::vector<std::string> out;
    for (unsigned t = 0; t < w.threads; ++t) out.push_back(fmt::format("{}/sluice-bench.{}", w.dir, t));
    return out;
  }
  return w.files;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string drop_caches(const std::vector<std::string>& files) {
  return drop_page_cache(files, DropScope::system);
}

std::vector<RunResult> run_plan(const Plan& plan, const std::function<void(const RunResult&)>& on_result,
                                const ProgressFn& progress, const PlanHooks& hooks) {
  validate(plan.workload);
  const std::vector<std::uint64_t> sizes =
      plan.block_sizes.empty() ? std::vector<std::uint64_t>{plan.workload.block_size} : plan.block_sizes;
  const std::vector<XferType> xfers =
      plan.xfers.empty() ? std::vector<XferType>{plan.workload.xfer} : plan.xfers;
  std::vector<RunResult> runs;
  auto emit = [&](RunResult r) {
    // The hook decides for every process alike (a failure on one stops them all).
    const bool go_on = hooks.after_run ? hooks.after_run(r) : r.error.empty();
    runs.push_back(std::move(r));
    if (on_result) on_result(runs.back());
    return go_on && runs.back().error.empty();
  };
  for (const std::uint64_t bs : sizes) {
    for (unsigned round = 1; round <= std::max(1U, plan.repeat); ++round) {
      for (const XferType x : xfers) {
        Workload w = plan.workload;
        w.block_size = bs;
        w.xfer = x;
        w.cache = plan.cache;
        if (hooks.before_run) hooks.before_run(w, "run");
        if (plan.drop_caches) (void)drop_caches(plan_files(w));
        RunResult r = run_workload(w, progress, hooks.run);
        r.round = round;
        RunResult written = r;
        if (!emit(std::move(r))) return runs;
        if (w.verify && (w.rw == RwMode::write || w.rw == RwMode::randwrite)) {
          Workload v = w;
          if (hooks.before_run) hooks.before_run(v, "verify");
          if (plan.drop_caches) (void)drop_caches(plan_files(v));
          if (!emit(verify_written(v, written, progress, hooks.run))) return runs;
        }
      }
    }
  }
  return runs;
}

std::vector<Summary> summarize(const std::vector<RunResult>& runs) {
  struct Acc {
    std::vector<double> gib, iops, p50, p99, cpu;
    std::string path;
    std::string cache;  // the state of the rounds, or the first round's label that did not hold
    bool odd = false;
  };
  std::vector<std::pair<std::uint64_t, XferType>> order;
  std::map<std::pair<std::uint64_t, int>, Acc> acc;
  for (const RunResult& r : runs) {
    if (r.phase != "run" || !r.error.empty()) continue;
    const auto key = std::pair{r.block_size, static_cast<int>(r.xfer)};
    if (!acc.contains(key)) order.emplace_back(r.block_size, r.xfer);
    Acc& a = acc[key];
    a.gib.push_back(r.gib_per_s());
    a.iops.push_back(r.iops());
    a.p50.push_back(static_cast<double>(r.latency.value_at_percentile(50)) / 1e3);
    a.p99.push_back(static_cast<double>(r.latency.value_at_percentile(99)) / 1e3);
    a.cpu.push_back(r.cpu_seconds_per_gib());
    if (a.path.empty()) a.path = r.fell_back ? r.path + " (fell back)" : r.path;
    const bool odd = !r.cache.held() || r.cache.rewarmed || !r.cache.known;
    if (a.cache.empty() || (odd && !a.odd)) {
      a.cache = odd || r.cache.state == CacheState::as_is ? r.cache.label() : std::string(to_string(r.cache.state));
      a.odd = odd;
    }
  }
  std::vector<Summary> out;
  std::map<std::uint64_t, double> first;
  for (const auto& [bs, x] : order) {
    const Acc& a = acc[{bs, static_cast<int>(x)}];
    Summary s;
    s.xfer = x;
    s.block_size = bs;
    s.rounds = static_cast<unsigned>(a.gib.size());
    s.gib_per_s = median(a.gib);
    s.iops = median(a.iops);
    s.p50_us = median(a.p50);
    s.p99_us = median(a.p99);
    s.cpu_seconds_per_gib = median(a.cpu);
    s.path = a.path;
    s.cache = a.cache;
    if (!first.contains(bs)) first[bs] = s.gib_per_s;
    s.ratio = first[bs] > 0 ? s.gib_per_s / first[bs] : 0;
    out.push_back(s);
  }
  return out;
}

}  // namespace sluice::bench
