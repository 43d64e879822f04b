// sluice load: tensor files (safetensors, .npy, sharded checkpoints) into device or host memory
// through the loader API, with a per-tensor table, optional XXH3-64 checksums of the bytes as
// they landed, and a summary naming the path taken.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/load.hpp"
#include "sluice/tools/cluster.hpp"
#ifdef SLUICE_WITH_MPI
#include "sluice/tools/mpi.hpp"
#endif
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

struct LoadArgs {
  std::vector<std::string> paths;
  std::string device;
  std::string path = "auto";
  std::string memory = "device";
  std::vector<std::string> tensors;
  int rank = -1;
  int world = -1;
  std::string alignment = "256";
  std::string max_read = "64M";
  std::string inflight = "256M";
  std::string cache_policy;
  bool json = false;
  bool checksum = false;
  bool list = false;
};

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// A one-line progress report on a terminal, at most ten times a second.
class Progress {
 public:
  Progress(std::uint64_t total, bool enabled) : total_(total), enabled_(enabled && total >= 256 * MiB) {}
  void add(std::uint64_t bytes) {
    done_ += bytes;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100) && done_ < total_) return;
    last_ = now;
    std::fprintf(stderr, "\rloading: %s of %s (%.0f%%)   ", format_size(done_).c_str(), format_size(total_).c_str(),
                 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fputs("\r\033[K", stderr);
  }

 private:
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// Under a launcher with several processes and no --rank/--world: MPI when this sluice has it
// and an MPI launcher started the job (for the aggregate); otherwise nullptr, and each process
// loads its share and reports only its own figures (torchrun, or a build without MPI).
std::unique_ptr<Communicator> load_communicator(const ClusterEnv& env) {
#ifdef SLUICE_WITH_MPI
  if (is_mpi_launcher(env.launcher)) {
    auto comm = make_mpi_communicator();
    if (comm->size() == env.world_size) return comm;
  }
#endif
  (void)env;
  return nullptr;
}

int run_load(const LoadArgs& a) {
  LoadOptions o;
  apply_cache_policy(a.cache_policy);
  if ((a.rank >= 0) != (a.world >= 0)) throw UsageError("--rank and --world go together");
  const ClusterEnv env = detect_cluster_env();
  const bool from_env = a.world < 0 && env.world_size > 1;
  if (from_env) {
    o.rank = static_cast<unsigned>(env.rank);
    o.world = static_cast<unsigned>(env.world_size);
  }
  if (a.world >= 0) {
    if (a.world < 1) throw UsageError("--world must be at least 1");
    if (a.rank >= a.world) throw UsageError(fmt::format("--rank {} must be below --world {}", a.rank, a.world));
    o.rank = static_cast<unsigned>(a.rank);
    o.world = static_cast<unsigned>(a.world);
  }
  o.alignment = to_size(a.alignment, "--alignment");
  if (o.alignment == 0 || (o.alignment & (o.alignment - 1)) != 0) throw UsageError("--alignment must be a power of two");
  o.max_read = to_size(a.max_read, "--max-read");
  o.inflight_bytes = to_size(a.inflight, "--inflight");
  if (o.max_read == 0 || o.inflight_bytes == 0) throw UsageError("--max-read and --inflight must be larger than 0");
  o.tensors = a.tensors;

  o.path = forced_path(setting_value(&Config::path, "path", a.path));
  if (a.memory == "device") {
    o.target = LoadTarget::device;
  } else if (a.memory == "pinned") {
    o.target = LoadTarget::pinned_host;
  } else if (a.memory == "host") {
    o.target = LoadTarget::pageable_host;
  } else {
    throw UsageError(fmt::format("--memory: unknown memory '{}' (expected device, pinned or host)", a.memory));
  }
  if (o.path == Path::host && o.target == LoadTarget::device) {
    if (a.memory != "device" || !a.device.empty()) throw UsageError("--path host loads into host memory, not --memory device");
    o.target = LoadTarget::pageable_host;
  }
  if (o.target != LoadTarget::pageable_host || !a.device.empty()) {
    o.device = a.device.empty() ? open_device(config()->device) : open_device(expand_placeholders(a.device, env));
  }

  const Checkpoint cp = Checkpoint::open(a.paths);
  if (a.list) {
    const LoadPlan plan = plan_load(cp, o);  // checks --tensors and the rank split
    nlohmann::json j = nlohmann::json::array();
    for (const TensorInfo* t : plan.tensors) {
      if (a.json) {
        j.push_back({{"name", t->name}, {"dtype", dtype_text(*t, cp.layouts()[t->file_index].format)}, {"shape", t->shape}, {"bytes", t->bytes},
                     {"file", cp.layouts()[t->file_index].path}, {"offset", t->offset}});
      } else {
        std::printf("%s\t%s\t%s\t%llu\t%s@%llu\n", t->name.c_str(), dtype_text(*t, cp.layouts()[t->file_index].format).c_str(), shape_text(t->shape).c_str(),
                    static_cast<unsigned long long>(t->bytes), cp.layouts()[t->file_index].path.c_str(),
                    static_cast<unsigned long long>(t->offset));
      }
    }
    if (a.json) std::printf("%s\n", nlohmann::json{{"tensors", j}}.dump().c_str());
    return 0;
  }

  std::uint64_t planned = 0;
  for (const TensorInfo* t : plan_load(cp, o).tensors) planned += t->bytes;
  std::unique_ptr<Communicator> comm = from_env ? load_communicator(env) : nullptr;
  Progress progress(planned, !a.json && isatty(STDERR_FILENO) != 0 && (!comm || comm->rank() == 0));
  o.on_tensor = [&progress](const LoadedTensor& t) { progress.add(t.info->bytes); };
  if (comm) comm->barrier();  // every rank starts together: the aggregate's window is honest
  const double started = unix_now();
  std::optional<LoadedTensors> loaded_or;
  try {
    loaded_or.emplace(load(cp, o));
  } catch (const std::exception& e) {
    if (!comm) throw;
    // The others wait for this rank's figures: end the job, naming the rank.
    std::fprintf(stderr, "sluice load: rank %d on %s: error: %s (ending the job)\n", env.rank, env.host.c_str(), e.what());
    std::fflush(stderr);
    comm->abort(exit_code(e));
  }
  const LoadedTensors& loaded = *loaded_or;
  const double ended = unix_now();
  progress.finish();
  std::optional<SpanAggregate> agg;
  if (comm) {
    const auto all = comm->gather(to_wire({.rank = env.rank, .host = env.host, .bytes = loaded.result().bytes,
                                           .start = started, .end = ended, .error = {}}));
    if (comm->rank() != 0) return 0;  // rank 0 reports for the job
    std::vector<RankSpan> spans;
    for (const auto& s : all) spans.push_back(span_from_wire(s));
    agg = aggregate_spans(spans);
  }

  const TransferResult& r = loaded.result();
  const double gibps = r.seconds > 0 ? static_cast<double>(r.bytes) / static_cast<double>(GiB) / r.seconds : 0.0;
  const std::string where = o.device ? fmt::format("{} memory of {}", to_string(o.target), o.device->info().name)
                                     : std::string("pageable host memory");
  if (a.json) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const LoadedTensor& t : loaded.tensors()) {
      nlohmann::json e = {{"name", t.info->name}, {"dtype", dtype_text(*t.info, cp.layouts()[t.info->file_index].format)}, {"shape", t.info->shape},
                          {"bytes", t.info->bytes}};
      if (t.info->fortran_order) e["fortran_order"] = true;
      if (a.checksum) e["xxh3"] = fmt::format("{:016x}", loaded.xxh3(t));
      tensors.push_back(std::move(e));
    }
    nlohmann::json summary = {{"bytes", r.bytes},           {"seconds", r.seconds},
                              {"gib_per_s", gibps},         {"path", to_string(r.path)},
                              {"reason", r.reason},         {"tensors", loaded.tensors().size()},
                              {"files", cp.layouts().size()}, {"memory", where}, {"ios", r.ios}};
    if (o.world > 1) summary["rank"] = o.rank, summary["world"] = o.world;
    if (agg) {
      summary["mpi"] = {{"world_size", agg->ranks},       {"bytes", agg->bytes},
                        {"seconds", agg->seconds},        {"gib_per_s", agg->gib_per_s},
                        {"start", agg->start},            {"end", agg->end},
                        {"slowest_rank", agg->slowest_rank}, {"slowest_host", agg->slowest_host},
                        {"slowest_gib_per_s", agg->slowest_gib_per_s}};
    }
    std::printf("%s\n", nlohmann::json{{"tensors", tensors}, {"summary", summary}}.dump().c_str());
    return 0;
  }
  for (const LoadedTensor& t : loaded.tensors()) {
    std::string line = fmt::format("{}  {}  {}{}  {}", t.info->name, dtype_text(*t.info, cp.layouts()[t.info->file_index].format), shape_text(t.info->shape),
                                   t.info->fortran_order ? " (fortran order)" : "", t.info->bytes);
    if (a.checksum) line += fmt::format("  {:016x}", loaded.xxh3(t));
    std::printf("%s\n", line.c_str());
  }
  std::printf("loaded %zu tensors, %s from %zu file(s) in %.3f s (%.2f GiB/s) into %s%s\npath: %s (%s)\n",
              loaded.tensors().size(), format_size(r.bytes).c_str(), cp.layouts().size(), r.seconds, gibps,
              where.c_str(), o.world > 1 ? fmt::format(", rank {} of {}", o.rank, o.world).c_str() : "",
              std::string(to_string(r.path)).c_str(), r.reason.c_str());
  if (agg) {
    std::printf("all %d ranks: %s in %.3f s (latest end - earliest start) = %.2f GiB/s; slowest rank %d on %s "
                "(%.2f GiB/s)\n",
                agg->ranks, format_size(agg->bytes).c_str(), agg->seconds, agg->gib_per_s, agg->slowest_rank,
                agg->slowest_host.c_str(), agg->slowest_gib_per_s);
  } else if (from_env) {
    std::printf("(rank %d of %d from %s's variables; no MPI here, so no aggregate: each rank reports its share)\n",
                env.rank, env.world_size, std::string(to_string(env.launcher)).c_str());
  }
  return 0;
}

}  // namespace

Runner add_load_command(CLI::App& app) {
  auto args = std::make_shared<LoadArgs>();
  auto* cmd = app.add_subcommand("load", "Load safetensors and .npy files (or a sharded checkpoint) into GPU or host memory");
  cmd->add_option("PATH", args->paths, "files, a *.safetensors.index.json, or folders")->required();
  cmd->add_option("--device", args->device, "the GPU: auto (first CUDA GPU, else sim), sim, cuda:N (default: configured device)");
  cmd->add_option("--path", args->path, "transfer path: auto | direct | bounce | posix | host")
      ->capture_default_str()
      ->check(setting_validator("path"));
  cmd->add_option("--memory", args->memory, "where tensors go: device | pinned | host")->capture_default_str();
  add_cache_policy_option(cmd, args->cache_policy);
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
  cmd->add_flag("--json", args->json, "print one JSON object: tensors[] and summary");
  return [args] { return run_load(*args); };
}

}  // namespace sluice::cli
