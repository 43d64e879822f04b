// sluice ingest: training batches from a dataset (Megatron prefixes, WebDataset shards, .npy
// shards) into GPU or host memory through the library's Loader, as a training job would pull
// them: shuffled, one rank's share, resumable. --step-time stands in for the compute of a step,
// so the stall (how long the consumer waited for each batch) is measured against a real step
// time; --emit writes what each batch held, for comparing runs; --save-state/--resume
// interrupt and continue a run. docs/ingest.md has the rules.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/ingest.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/tools/load_cluster.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {
namespace {

struct IngestArgs {
  std::vector<std::string> paths;
  std::string format;
  std::uint64_t batch_size = 0;
  std::uint64_t seq_len = 0;
  std::uint64_t epochs = 0;
  std::uint64_t steps = 0;
  std::uint64_t seed = 0;
  bool no_shuffle = false;
  bool keep_last = false;
  int rank = -1;
  int world = -1;
  std::string device;
  std::string memory;
  unsigned prefetch = 4;
  std::string memory_budget = "1G";
  double step_time = 0;
  std::string save_state;
  std::uint64_t stop_after = 0;
  std::string resume;
  std::string emit;
  std::string cache_policy;
  bool json = false;
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("cannot read {}", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text << '\n';
  if (!out.flush()) throw UsageError(fmt::format("cannot write {}", path));
}

IngestOptions ingest_options(const IngestArgs& a, const LoadShare& share, const ClusterEnv& env) {
  IngestOptions o;
  o.batch_size = a.batch_size;
  o.seed = a.seed;
  o.shuffle = !a.no_shuffle;
  o.drop_last = !a.keep_last;
  o.rank = share.rank;
  o.world = share.world;
  o.prefetch = a.prefetch;
  o.memory_budget = to_size(a.memory_budget, "--memory-budget");
  const MemoryKind memory = a.memory.empty() ? MemoryKind::device : memory_option(a.memory);
  o.target = memory == MemoryKind::device ? LoadTarget::device
             : memory == MemoryKind::pinned_host ? LoadTarget::pinned_host
                                                 : LoadTarget::pageable_host;
  if (o.target != LoadTarget::pageable_host || !a.device.empty()) {
    o.device = a.device.empty() ? open_device(config()->device) : open_device(expand_placeholders(a.device, env));
  }
  return o;
}

// One --emit line: ids as numbers (Megatron, npy) or "SHARD/KEY" strings (WebDataset).
std::string emit_line(const Batch& b, const Dataset& ds) {
  nlohmann::json ids = nlohmann::json::array();
  nlohmann::json hashes = nlohmann::json::array();
  const bool wds = ds.format() == DatasetFormat::webdataset;
  for (std::size_t i = 0; i < b.samples().size(); ++i) {
    const std::uint64_t k = b.samples()[i];
    if (wds) {
      ids.push_back(ds.sample_id(k));
    } else {
      ids.push_back(k);
    }
    hashes.push_back(fmt::format("{:016x}", b.xxh3(i)));
  }
  return nlohmann::json{{"epoch", b.epoch()}, {"step", b.step()}, {"rank", b.rank()}, {"samples", ids}, {"xxh3", hashes}}
      .dump();
}

struct RunResult {
  std::uint64_t steps = 0;
  std::uint64_t epochs_done = 0;
  bool stopped = false;  // --stop-after-steps ended it
};

RunResult run_batches(const IngestArgs& a, Loader& loader, std::FILE* emit) {
  RunResult r;
  const std::uint64_t epochs = a.steps == 0 && a.epochs == 0 ? 1 : a.epochs;
  ProgressLine progress(!a.json && isatty(STDERR_FILENO) != 0);
  std::uint64_t samples = 0;
  const auto step_time = std::chrono::duration<double>(a.step_time);
  for (;;) {
    if (a.steps > 0 && r.steps >= a.steps) break;
    if (a.stop_after > 0 && r.steps >= a.stop_after) {
      r.stopped = true;
      break;
    }
    std::optional<Batch> b = loader.next();
    if (!b) {
      ++r.epochs_done;
      loader.set_epoch(loader.epoch() + 1);  // a saved state then starts the next epoch
      if (a.steps == 0 && r.epochs_done >= epochs) break;
      if (loader.steps_per_epoch() == 0) break;
      continue;
    }
    if (emit != nullptr) std::fprintf(emit, "%s\n", emit_line(*b, loader.dataset()).c_str());
    if (a.step_time > 0) std::this_thread::sleep_for(step_time);
    ++r.steps;
    samples += b->samples().size();
    if (progress.due()) progress.show(fmt::format("ingest: epoch {}, {} steps, {} samples", b->epoch(), r.steps, samples));
  }
  progress.finish();
  return r;
}

void print_summary(const IngestArgs& a, const Loader& loader, const IngestOptions& o, const RunResult& r,
                   double cpu) {
  const IngestStats s = loader.stats();
  const std::string where = o.device ? fmt::format("{} memory of {}", to_string(o.target), o.device->info().name)
                                     : std::string("pageable host memory");
  if (a.json) {
    nlohmann::json j = {{"dataset", loader.dataset().describe()},
                        {"steps", s.steps},
                        {"samples", s.samples},
                        {"bytes", s.bytes},
                        {"dropped", s.dropped},
                        {"epochs_completed", r.epochs_done},
                        {"stopped_early", r.stopped},
                        {"wall_seconds", s.wall_seconds},
                        {"wait_seconds", s.wait_seconds},
                        {"wait_p50_seconds", s.wait_p50_seconds},
                        {"wait_p99_seconds", s.wait_p99_seconds},
                        {"stall_fraction", s.stall_fraction},
                        {"samples_per_second", s.samples_per_second},
                        {"gib_per_s", s.bytes_per_second / static_cast<double>(GiB)},
                        {"cpu_seconds", cpu},
                        {"path", to_string(s.path)},
                        {"reason", s.reason},
                        {"stall_cause", s.stall_cause},
                        {"memory", where},
                        {"memory_budget", o.memory_budget},
                        {"memory_high_water", loader.memory_high_water()},
                        {"memory_reserved", loader.memory_reserved()},
                        {"rank", o.rank},
                        {"world", o.world},
                        {"state", nlohmann::json::parse(loader.state().to_json())}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s\n", loader.dataset().describe().c_str());
  std::printf("ingested %llu steps, %llu samples, %s in %.3f s into %s%s: %.0f samples/s, %.2f GiB/s, %.2f CPU s\n",
              static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(s.samples),
              format_size(s.bytes).c_str(), s.wall_seconds, where.c_str(),
              o.world > 1 ? fmt::format(", rank {} of {}", o.rank, o.world).c_str() : "", s.samples_per_second,
              s.bytes_per_second / static_cast<double>(GiB), cpu);
  std::printf("stall: waited %.3f s (%.1f%% of wall), per step p50 %.3f ms, p99 %.3f ms\n", s.wait_seconds,
              100.0 * s.stall_fraction, s.wait_p50_seconds * 1e3, s.wait_p99_seconds * 1e3);
  if (!s.stall_cause.empty()) std::printf("stall cause: %s\n", s.stall_cause.c_str());
  if (s.dropped > 0) std::printf("drop_last left out %llu samples of the last epoch\n", static_cast<unsigned long long>(s.dropped));
  std::printf("memory: at most %s in use of %s reserved (budget %s)\npath: %s (%s)\n",
              format_size(loader.memory_high_water()).c_str(), format_size(loader.memory_reserved()).c_str(),
              format_size(o.memory_budget).c_str(), std::string(to_string(s.path)).c_str(), s.reason.c_str());
}

int run_ingest(const IngestArgs& a) {
  if (a.batch_size == 0) throw UsageError("--batch-size must be at least 1");
  if (a.epochs > 0 && a.steps > 0) throw UsageError("give --epochs or --steps, not both");
  apply_cache_policy(a.cache_policy);
  const ClusterEnv env = detect_cluster_env();
  const LoadShare share = load_share(a.rank, a.world, env);
  IngestOptions o = ingest_options(a, share, env);
  DatasetOptions dopt;
  if (!a.format.empty()) {
    dopt.format = parse_dataset_format(a.format);
    if (!dopt.format) throw UsageError(fmt::format("--format {}: not megatron, wds or npy", a.format));
  }
  dopt.seq_len = a.seq_len;
  const auto dataset = Dataset::open(a.paths, dopt);
  Loader loader(dataset, o);
  if (!a.resume.empty()) loader.restore(LoaderState::from_json(read_text_file(a.resume)));
  std::FILE* emit = nullptr;
  if (!a.emit.empty()) {
    emit = std::fopen(a.emit.c_str(), "w");
    if (emit == nullptr) throw UsageError(fmt::format("cannot write {}", a.emit));
  }
  const double cpu0 = cpu_seconds();
  RunResult r;
  try {
    r = run_batches(a, loader, emit);
  } catch (...) {
    if (emit != nullptr) std::fclose(emit);
    throw;
  }
  if (emit != nullptr && std::fclose(emit) != 0) throw UsageError(fmt::format("cannot write {}", a.emit));
  if (!a.save_state.empty()) write_text_file(a.save_state, loader.state().to_json());
  print_summary(a, loader, o, r, cpu_seconds() - cpu0);
  return 0;
}

}  // namespace

Runner add_ingest_command(CLI::App& app) {
  auto args = std::make_shared<IngestArgs>();
  auto* cmd = app.add_subcommand("ingest", "Stream shuffled, sharded, resumable training batches into GPU or host memory, "
                                           "measuring how long each step waited for its batch");
  cmd->add_option("PATH", args->paths, "Megatron prefixes (PREFIX, PREFIX.bin or PREFIX.idx), WebDataset .tar shards or .npy shards")
      ->required();
  cmd->add_option("--format", args->format, "megatron | wds | npy (default: told by the paths)");
  cmd->add_option("--batch-size", args->batch_size, "samples per rank per step")->required();
  cmd->add_option("--seq-len", args->seq_len, "Megatron: tokens per sample (each sample holds seq-len + 1)");
  auto* epochs = cmd->add_option("--epochs", args->epochs, "epochs to run (default 1)");
  cmd->add_option("--steps", args->steps, "steps to run, across epochs")->excludes(epochs);
  cmd->add_option("--seed", args->seed, "seed of the order")->capture_default_str();
  cmd->add_flag("--no-shuffle", args->no_shuffle, "visit samples in dataset order");
  cmd->add_flag("--keep-last", args->keep_last, "keep the short last global batch of an epoch (default: drop it)");
  cmd->add_option("--rank", args->rank, "this process's rank (with --world; default: the launcher's variables)");
  cmd->add_option("--world", args->world, "number of ranks sharing each step");
  cmd->add_option("--device", args->device, "the GPU: auto (first CUDA GPU, else sim), sim, cuda:N (default: configured device)");
  cmd->add_option("--memory", args->memory, memory_option_help("default device"));
  cmd->add_option("--prefetch", args->prefetch, "batches whose reads are in flight ahead of the consumer")->capture_default_str();
  cmd->add_option("--memory-budget", args->memory_budget, "every byte of staging and batch buffers the loader holds")
      ->capture_default_str()
      ->check(size_validator());
  cmd->add_option("--step-time", args->step_time, "simulated compute per step: sleep this long after each batch (20ms)")
      ->transform(duration_transformer());
  add_cache_policy_option(cmd, args->cache_policy);
  cmd->add_option("--save-state", args->save_state, "write the loader state (JSON) here at the end");
  cmd->add_option("--stop-after-steps", args->stop_after, "stop after this many steps (to interrupt a run and --resume it)");
  cmd->add_option("--resume", args->resume, "continue from a state --save-state wrote");
  cmd->add_option("--emit", args->emit, "write one JSON line per batch: epoch, step, rank, sample ids, XXH3-64 of each sample");
  cmd->add_flag("--json", args->json, "print one JSON object");
  return [args] { return run_ingest(*args); };
}

}  // namespace sluice::cli
