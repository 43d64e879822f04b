// sluice load: tensor files (safetensors, .npy, sharded checkpoints) into device or host memory
// through the loader API, with a per-tensor table, optional XXH3-64 checksums of the bytes as
// they landed, and a summary naming the path taken. The options become LoadOptions here; the
// load, alone or as one rank of a job, is the library's (load_cluster.hpp).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "job.hpp"
#include "sluice/load.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/tools/load_cluster.hpp"
#include "sluice/tools/load_fanout.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

struct LoadArgs {
  std::vector<std::string> paths;
  std::string device;
  std::string path = "auto";
  std::string memory;  // empty: device (pageable host under --path host)
  std::vector<std::string> tensors;
  int rank = -1;
  int world = -1;
  std::string alignment = "256";
  std::string max_read = "64M";
  std::string inflight = "256M";
  std::string cache_policy;
  std::string host_load = "auto";
  bool json = false;
  bool checksum = false;
  bool list = false;
  bool fanout = false;
  std::string scope = "node";
  std::string exchange_budget = "64M";
};

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Bytes loaded of those planned, on a progress line (for loads of 256 MiB or more).
class Progress {
 public:
  Progress(std::uint64_t total, bool enabled) : total_(total), line_(enabled && total >= 256 * MiB) {}
  void add(std::uint64_t bytes) {
    done_ += bytes;
    if (!line_.due(done_ >= total_)) return;
    line_.show(fmt::format("loading: {} of {} ({:.0f}%)", format_size(done_), format_size(total_),
                           100.0 * static_cast<double>(done_) / static_cast<double>(total_)));
  }
  void finish() { line_.finish(); }

 private:
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  ProgressLine line_;
};

// The memory tensors go to: --memory (default device), pageable host memory under --path host
// or --device host (as Python's device="cpu").
LoadTarget load_target(const LoadArgs& a, std::optional<Path> path) {
  if (a.device == "host") {
    if (!a.memory.empty() && memory_option(a.memory) != MemoryKind::pageable_host) {
      throw UsageError("--device host loads into pageable host memory, not --memory " + a.memory);
    }
    return LoadTarget::pageable_host;
  }
  const MemoryKind memory = a.memory.empty() ? MemoryKind::device : memory_option(a.memory);
  if (path == Path::host && memory == MemoryKind::device) {
    if (!a.memory.empty() || !a.device.empty()) throw UsageError("--path host loads into host memory, not --memory device");
    return LoadTarget::pageable_host;
  }
  switch (memory) {
    case MemoryKind::device: return LoadTarget::device;
    case MemoryKind::pinned_host: return LoadTarget::pinned_host;
    case MemoryKind::pageable_host: return LoadTarget::pageable_host;
  }
  return LoadTarget::device;
}

LoadOptions load_options(const LoadArgs& a, const LoadShare& share, const ClusterEnv& env) {
  LoadOptions o;
  o.rank = share.rank;
  o.world = share.world;
  o.alignment = to_size(a.alignment, "--alignment");
  if (o.alignment == 0 || (o.alignment & (o.alignment - 1)) != 0) throw UsageError("--alignment must be a power of two");
  o.max_read = to_size(a.max_read, "--max-read");
  o.inflight_bytes = to_size(a.inflight, "--inflight");
  if (o.max_read == 0 || o.inflight_bytes == 0) throw UsageError("--max-read and --inflight must be larger than 0");
  o.tensors = a.tensors;
  o.path = forced_path(setting_value(&Config::path, "path", a.path));
  o.target = load_target(a, o.path);
  o.host_load = *parse_host_load(a.host_load);  // checked by the option's validator
  if (a.device != "host" && (o.target != LoadTarget::pageable_host || !a.device.empty())) {
    o.device = a.device.empty() ? open_device(config()->device) : open_device(expand_placeholders(a.device, env));
  }
  return o;
}

std::string dtype_of(const Checkpoint& cp, const TensorInfo& t) {
  return dtype_text(t, cp.layouts()[t.file_index].format);
}

// --list: the plan's tensors (this rank's share), loading nothing.
int list_tensors(const Checkpoint& cp, const LoadOptions& o, bool json) {
  const LoadPlan plan = plan_load(cp, o);  // checks --tensors and the rank split
  nlohmann::json j = nlohmann::json::array();
  for (const TensorInfo* t : plan.tensors) {
    const std::string& file = cp.layouts()[t->file_index].path;
    if (json) {
      j.push_back({{"name", t->name}, {"dtype", dtype_of(cp, *t)}, {"shape", t->shape}, {"bytes", t->bytes},
                   {"file", file}, {"offset", t->offset}});
    } else {
      std::printf("%s\t%s\t%s\t%llu\t%s@%llu\n", t->name.c_str(), dtype_of(cp, *t).c_str(), shape_text(t->shape).c_str(),
                  static_cast<unsigned long long>(t->bytes), file.c_str(), static_cast<unsigned long long>(t->offset));
    }
  }
  if (json) std::printf("%s\n", nlohmann::json{{"tensors", j}}.dump().c_str());
  return 0;
}

// What the report of a finished load needs.
struct Finished {
  const LoadArgs& args;
  const Checkpoint& cp;
  const LoadOptions& options;
  const LoadShare& share;
  const ClusterEnv& env;
  const ClusterLoad& done;

  [[nodiscard]] double gib_per_s() const {
    const TransferResult& r = done.loaded.result();
    return r.seconds > 0 ? static_cast<double>(r.bytes) / static_cast<double>(GiB) / r.seconds : 0.0;
  }
  [[nodiscard]] std::string where() const {
    if (done.loaded.result().path == Path::mapped) return "pageable host memory (a private mapping of the files)";
    return options.device ? fmt::format("{} memory of {}", to_string(options.target), options.device->info().name)
                          : std::string("pageable host memory");
  }
};

nlohmann::json mpi_json(const SpanAggregate& agg) {
  return {{"world_size", agg.ranks},         {"bytes", agg.bytes},
          {"seconds", agg.seconds},          {"gib_per_s", agg.gib_per_s},
          {"start", agg.start},              {"end", agg.end},
          {"slowest_rank", agg.slowest_rank}, {"slowest_host", agg.slowest_host},
          {"slowest_gib_per_s", agg.slowest_gib_per_s}};
}

void print_json(const Finished& f) {
  const LoadedTensors& loaded = f.done.loaded;
  nlohmann::json tensors = nlohmann::json::array();
  for (const LoadedTensor& t : loaded.tensors()) {
    nlohmann::json e = {{"name", t.info->name}, {"dtype", dtype_of(f.cp, *t.info)}, {"shape", t.info->shape},
                        {"bytes", t.info->bytes}};
    if (t.info->fortran_order) e["fortran_order"] = true;
    if (f.args.checksum) e["xxh3"] = fmt::format("{:016x}", loaded.xxh3(t));
    tensors.push_back(std::move(e));
  }
  const TransferResult& r = loaded.result();
  nlohmann::json summary = {{"bytes", r.bytes},           {"seconds", r.seconds},
                            {"gib_per_s", f.gib_per_s()}, {"path", loaded.path_name()},
                            {"reason", r.reason},         {"tensors", loaded.tensors().size()},
                            {"files", f.cp.layouts().size()}, {"memory", f.where()}, {"ios", r.ios}};
  if (f.share.world > 1) summary["rank"] = f.share.rank, summary["world"] = f.share.world;
  if (f.done.aggregate) summary["mpi"] = mpi_json(*f.done.aggregate);
  std::printf("%s\n", nlohmann::json{{"tensors", tensors}, {"summary", summary}}.dump().c_str());
}

void print_text(const Finished& f) {
  const LoadedTensors& loaded = f.done.loaded;
  for (const LoadedTensor& t : loaded.tensors()) {
    std::string line = fmt::format("{}  {}  {}{}  {}", t.info->name, dtype_of(f.cp, *t.info), shape_text(t.info->shape),
                                   t.info->fortran_order ? " (fortran order)" : "", t.info->bytes);
    if (f.args.checksum) line += fmt::format("  {:016x}", loaded.xxh3(t));
    std::printf("%s\n", line.c_str());
  }
  const TransferResult& r = loaded.result();
  std::printf("loaded %zu tensors, %s from %zu file(s) in %.3f s (%.2f GiB/s) into %s%s\npath: %s (%s)\n",
              loaded.tensors().size(), format_size(r.bytes).c_str(), f.cp.layouts().size(), r.seconds, f.gib_per_s(),
              f.where().c_str(), f.share.world > 1 ? fmt::format(", rank {} of {}", f.share.rank, f.share.world).c_str() : "",
              std::string(loaded.path_name()).c_str(), r.reason.c_str());
  if (const auto& agg = f.done.aggregate) {
    std::printf("all %d ranks: %s in %.3f s (latest end - earliest start) = %.2f GiB/s; slowest rank %d on %s "
                "(%.2f GiB/s)\n",
                agg->ranks, format_size(agg->bytes).c_str(), agg->seconds, agg->gib_per_s, agg->slowest_rank,
                agg->slowest_host.c_str(), agg->slowest_gib_per_s);
  } else if (f.share.from_env) {
    std::printf("(rank %d of %d from %s's variables; no MPI here, so no aggregate: each rank reports its share)\n",
                f.env.rank, f.env.world_size, std::string(to_string(f.env.launcher)).c_str());
  }
}

// --fanout: what one rank did, as rank 0 gathers it.
nlohmann::json fanout_rank_json(const LoadArgs& a, const ClusterEnv& env, int rank, const Checkpoint& cp,
                                 const FanoutLoaded& got) {
  const FanoutLoadStats& s = got.stats;
  nlohmann::json j = {{"rank", rank},           {"host", env.host},
                      {"read_bytes", s.read_bytes}, {"sent_bytes", s.sent_bytes},
                      {"received_bytes", s.received_bytes}, {"read_seconds", s.read_seconds},
                      {"move_seconds", s.move_seconds}, {"seconds", s.seconds}};
  if (a.checksum) {
    nlohmann::json h = nlohmann::json::object();
    for (std::size_t i = 0; i < got.tensors.size(); ++i) h[cp.tensors()[i].name] = fmt::format("{:016x}", host_xxh3(got.tensors[i]));
    j["xxh3"] = std::move(h);
  }
  return j;
}

std::string fanout_reason(const FanoutLoadStats& s, int ranks) {
  if (s.scope == FanoutScope::job || s.nodes == 1) {
    return fmt::format("fan-out, scope {}: each byte read once by one of {} ranks (read amplification {:.1f}x)",
                       to_string(s.scope), ranks, s.amplification());
  }
  return fmt::format("fan-out, scope node: each of {} nodes read the checkpoint once: read amplification {:.1f}x; "
                     "--scope job reads it once", s.nodes, s.amplification());
}

void print_fanout(const LoadArgs& a, const Checkpoint& cp, const FanoutLoaded& got, const std::vector<nlohmann::json>& ranks) {
  const FanoutLoadStats& s = got.stats;
  const std::string reason = fanout_reason(s, static_cast<int>(ranks.size()));
  if (!a.json) {
    for (std::size_t i = 0; i < got.tensors.size(); ++i) {
      const TensorInfo& t = cp.tensors()[i];
      std::string line = fmt::format("{}  {}  {}  {}", t.name, dtype_of(cp, t), shape_text(t.shape), t.bytes);
      if (a.checksum) line += fmt::format("  {:016x}", host_xxh3(got.tensors[i]));
      std::printf("%s\n", line.c_str());
    }
    std::printf("loaded %zu tensors, %s from %zu file(s) into pageable host memory on every one of %zu ranks\n"
                "reason: %s\n", got.tensors.size(), format_size(s.unique_bytes).c_str(), cp.layouts().size(), ranks.size(),
                reason.c_str());
    for (const auto& r : ranks) {
      std::printf("rank %d on %s: read %s, sent %s, received %s; reading %.3f s, moves %.3f s, total %.3f s\n",
                  r["rank"].get<int>(), r["host"].get<std::string>().c_str(),
                  format_size(r["read_bytes"].get<std::uint64_t>()).c_str(),
                  format_size(r["sent_bytes"].get<std::uint64_t>()).c_str(),
                  format_size(r["received_bytes"].get<std::uint64_t>()).c_str(), r["read_seconds"].get<double>(),
                  r["move_seconds"].get<double>(), r["seconds"].get<double>());
    }
    return;
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    const TensorInfo& t = cp.tensors()[i];
    nlohmann::json e = {{"name", t.name}, {"dtype", dtype_of(cp, t)}, {"shape", t.shape}, {"bytes", t.bytes}};
    if (a.checksum) e["xxh3"] = fmt::format("{:016x}", host_xxh3(got.tensors[i]));
    tensors.push_back(std::move(e));
  }
  nlohmann::json fan = {{"scope", to_string(s.scope)},      {"nodes", s.nodes},
                        {"exchange_budget", to_size(a.exchange_budget, "--exchange-budget")},
                        {"reads", s.reads},                 {"unique_bytes", s.unique_bytes},
                        {"read_bytes", s.job_read_bytes},   {"read_amplification", s.amplification()},
                        {"ranks", ranks}};
  nlohmann::json summary = {{"bytes", s.unique_bytes}, {"seconds", s.seconds}, {"path", "fanout"},
                            {"reason", reason},        {"tensors", got.tensors.size()},
                            {"files", cp.layouts().size()}, {"memory", "pageable host memory"},
                            {"world", ranks.size()},   {"fanout", std::move(fan)}};
  std::printf("%s\n", nlohmann::json{{"tensors", tensors}, {"summary", summary}}.dump().c_str());
}

// --fanout: every rank of the job loads the whole checkpoint, the job reading each byte once
// (per node with --scope node); rank 0 prints every rank's figures.
int run_fanout(const LoadArgs& a, const ClusterEnv& env) {
  if (a.rank >= 0 || a.world >= 0) throw UsageError("--fanout takes the ranks from the launcher (mpirun), not --rank/--world");
  if (!a.tensors.empty() || a.list) throw UsageError("--fanout loads the whole checkpoint: not with --tensors or --list");
  if ((!a.device.empty() && a.device != "host") || (!a.memory.empty() && memory_option(a.memory) != MemoryKind::pageable_host)) {
    throw UsageError("--fanout loads into pageable host memory (--device host)");
  }
  const FanoutScope scope = parse_fanout_scope(a.scope);
  const std::uint64_t budget = to_size(a.exchange_budget, "--exchange-budget");
  if (budget == 0) throw UsageError("--exchange-budget must be larger than 0");
  std::unique_ptr<Communicator> comm = env.world_size > 1 ? mpi_communicator_if_any(env) : make_single_communicator();
  if (!comm) throw UsageError("--fanout across processes needs MPI: this sluice has none, or MPI did not start");
  std::optional<Checkpoint> cp;
  std::optional<FanoutLoaded> got;
  try {
    cp.emplace(open_on_every_rank(*comm, a.paths));
    got.emplace(load_fanout(*comm, env, *cp, scope, budget));
  } catch (const FanoutJobError& e) {  // every rank has it: each reports, then all end together
    std::fprintf(stderr, "sluice load: rank %d on %s: error: %s\n", comm->rank(), env.host.c_str(), e.what());
    std::fflush(stderr);
    comm->barrier();
    return exit_code(e);
  } catch (const std::exception& e) {
    end_job(*comm, env, "load", e);  // this rank alone: the others wait in a collective call
  }
  const std::vector<std::string> all = comm->gather(fanout_rank_json(a, env, comm->rank(), *cp, *got).dump());
  if (comm->rank() != 0) return 0;  // rank 0 reports for the job
  std::vector<nlohmann::json> ranks;
  for (const auto& r : all) ranks.push_back(nlohmann::json::parse(r));
  print_fanout(a, *cp, *got, ranks);
  return 0;
}

int run_load(const LoadArgs& a) {
  apply_cache_policy(a.cache_policy);
  const ClusterEnv env = detect_cluster_env();
  if (a.fanout) return run_fanout(a, env);
  const LoadShare share = load_share(a.rank, a.world, env);
  LoadOptions o = load_options(a, share, env);
  const Checkpoint cp = Checkpoint::open(a.paths);
  if (a.list) return list_tensors(cp, o, a.json);

  std::uint64_t planned = 0;
  for (const TensorInfo* t : plan_load(cp, o).tensors) planned += t->bytes;
  // Several processes from the launcher's variables: MPI for the aggregate where there is MPI.
  std::unique_ptr<Communicator> comm = share.from_env ? mpi_communicator_if_any(env) : nullptr;
  Progress progress(planned, !a.json && isatty(STDERR_FILENO) != 0 && (!comm || comm->rank() == 0));
  o.on_tensor = [&progress](const LoadedTensor& t) { progress.add(t.info->bytes); };
  std::optional<ClusterLoad> done;
  try {
    done.emplace(load_on_cluster(comm.get(), env, cp, o));
  } catch (const std::exception& e) {
    if (!comm) throw;
    end_job(*comm, env, "load", e);  // the others wait for this rank's figures
  }
  progress.finish();
  if (comm && comm->rank() != 0) return 0;  // rank 0 reports for the job
  const Finished finished{.args = a, .cp = cp, .options = o, .share = share, .env = env, .done = *done};
  if (a.json) {
    print_json(finished);
  } else {
    print_text(finished);
  }
  return 0;
}

}  // namespace

Runner add_load_command(CLI::App& app) {
  auto args = std::make_shared<LoadArgs>();
  auto* cmd = app.add_subcommand("load", "Load safetensors and .npy files (or a sharded checkpoint) into GPU or host memory");
  cmd->add_option("PATH", args->paths, "files, a *.safetensors.index.json, or folders")->required();
  cmd->add_option("--device", args->device, "the GPU: auto (first CUDA GPU, else sim), sim, cuda:N (default: configured device); host: pageable host memory, no GPU");
  cmd->add_option("--path", args->path, "transfer path: auto | direct | bounce | posix | host")
      ->capture_default_str()
      ->check(setting_validator("path"));
  cmd->add_option("--memory", args->memory, memory_option_help("default device; pageable under --path host"));
  add_cache_policy_option(cmd, args->cache_policy);
  cmd->add_option("--host-load", args->host_load,
                  "pageable host memory: auto (mapped where the page cache holds the files, else read) | read "
                  "(a copy in fresh memory) | mapped (views of a private mapping of the file)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "read", "mapped"}));
  cmd->add_option("--tensors", args->tensors, "load only these tensors (comma-separated names)")->delimiter(',');
  cmd->add_option("--rank", args->rank, "this process's rank (with --world)");
  cmd->add_option("--world", args->world, "number of ranks sharing the load");
  cmd->add_option("--alignment", args->alignment, "address alignment of every tensor")->capture_default_str()
      ->check(size_validator());
  cmd->add_option("--max-read", args->max_read, "largest single read")->capture_default_str()->check(size_validator());
  cmd->add_option("--inflight", args->inflight, "bytes of reads in flight (staging budget)")->capture_default_str()
      ->check(size_validator());
  cmd->add_flag("--checksum", args->checksum, "print the XXH3-64 of each tensor's bytes as they landed in memory");
  cmd->add_flag("--list", args->list, "list the tensors (name, dtype, shape, bytes, file@offset) without loading");
  cmd->add_flag("--fanout", args->fanout,
                "every rank of the job (mpirun) loads the whole checkpoint into host memory, the job reading each "
                "byte once (per node with --scope node) and moving it over MPI");
  cmd->add_option("--scope", args->scope, "with --fanout: where each byte is read once: node | job")
      ->capture_default_str()
      ->check(CLI::IsMember({"node", "job"}));
  cmd->add_option("--exchange-budget", args->exchange_budget, "with --fanout: largest read and move (chunk)")
      ->capture_default_str()
      ->check(size_validator());
  cmd->add_flag("--json", args->json, "print one JSON object: tensors[] and summary");
  return [args] { return run_load(*args); };
}

}  // namespace sluice::cli
