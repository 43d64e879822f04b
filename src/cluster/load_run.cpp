// A load on every rank of a job: the share each rank loads, a barrier before the loads so the
// window is honest, and each rank's span gathered at rank 0 and combined (span.cpp).
#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/tools/load_cluster.hpp"

namespace sluice {

LoadShare load_share(int rank, int world, const ClusterEnv& env) {
  if ((rank >= 0) != (world >= 0)) throw_usage_error({.op = "load"}, "--rank and --world go together");
  if (world >= 0) {
    if (world < 1) throw_usage_error({.op = "load"}, "--world must be at least 1");
    if (rank >= world) {
      throw_usage_error({.op = "load"}, fmt::format("--rank {} must be below --world {}", rank, world));
    }
    return {.rank = static_cast<unsigned>(rank), .world = static_cast<unsigned>(world), .from_env = false};
  }
  if (env.world_size > 1) {
    return {.rank = static_cast<unsigned>(env.rank), .world = static_cast<unsigned>(env.world_size), .from_env = true};
  }
  return {};
}

ClusterLoad load_on_cluster(Communicator* comm, const ClusterEnv& where, const Checkpoint& checkpoint,
                            const LoadOptions& options) {
  if (comm == nullptr) return {.loaded = load(checkpoint, options), .aggregate = std::nullopt};
  comm->barrier();  // every rank starts together: the aggregate's window is honest
  const double started = unix_now();
  ClusterLoad out{.loaded = load(checkpoint, options), .aggregate = std::nullopt};
  const double ended = unix_now();
  const auto all = comm->gather(to_wire({.rank = where.rank, .host = where.host, .bytes = out.loaded.result().bytes,
                                         .start = started, .end = ended, .error = {}}));
  if (comm->rank() != 0) return out;  // rank 0 reports for the job
  std::vector<RankSpan> spans;
  spans.reserve(all.size());
  for (const auto& s : all) spans.push_back(span_from_wire(s));
  out.aggregate = aggregate_spans(spans);
  return out;
}

}  // namespace sluice
