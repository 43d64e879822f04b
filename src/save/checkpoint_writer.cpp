// Sharded checkpoints in the Hugging Face layout. The order of a save into a folder:
//   1. begin_checkpoint: the old index goes (durably), so from here the folder has no index
//   2. save_shards: every shard written through an AtomicFile, durable before the call returns
//   3. finish_checkpoint: the new index, atomically and durably; then old shards it does not name
// A save that dies in step 2 leaves no index: the checkpoint is recognisably incomplete, never
// an index over a mix of old and new shards. Under MPI each rank runs step 2 for its own shards;
// rank 0 runs step 1 before a barrier and step 3 after one (docs/save.md).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "save/remote_save.hpp"
#include "sluice/atomic_file.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_writer.hpp"
#include "sluice/error.hpp"
#include "sluice/save.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

std::string index_name(std::string_view prefix) { return fmt::format("{}.safetensors.index.json", prefix); }

// Whether `name` is a shard file of a save with `prefix`: "<prefix>-DDDDD-of-DDDDD.safetensors", or
// with a generation tag, "<prefix>-DDDDD-of-DDDDD-<8 hex>.safetensors" (a save into a folder that
// holds a checkpoint: docs/save.md, "Many ranks").
bool is_shard_name(const std::string& name, const std::string& prefix) {
  const std::string_view rest = std::string_view(name).substr(std::min(name.size(), prefix.size()));
  if (!name.starts_with(prefix) || !rest.ends_with(".safetensors")) return false;
  const std::string_view mid = rest.substr(0, rest.size() - std::string_view(".safetensors").size());
  // "-00001-of-00002"
  const auto of = mid.find("-of-");
  if (mid.size() < 2 || mid[0] != '-' || of == std::string_view::npos) return false;
  auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::string_view total = mid.substr(of + 4);
  if (const auto dash = total.find('-'); dash != std::string_view::npos) {
    const std::string_view tag = total.substr(dash + 1);
    const bool hex = tag.size() == 8 && std::all_of(tag.begin(), tag.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    if (!hex) return false;
    total = total.substr(0, dash);
  }
  return digits(mid.substr(1, of - 1)) && digits(total);
}

// "<directory>/<name>": a file in a folder, or an object under an s3:// prefix.
std::string in_checkpoint(const std::string& directory, const std::string& name) {
  return is_remote_url(directory) ? remote_join(directory, name) : (fs::path(directory) / name).string();
}

void write_text_atomically(const std::string& path, const std::string& text) {
  if (is_remote_url(path)) return detail::write_text_remote(path, text);
  AtomicFile out = AtomicFile::create(path);
  if (!text.empty()) (void)write(out.file(), text.data(), text.size(), 0);
  out.commit(true);
}

}  // namespace

ShardPlan plan_shards(std::span<const ShardEntry> tensors, std::uint64_t max_shard_bytes,
                      std::string_view prefix) {
  if (max_shard_bytes == 0) throw_usage_error({.op = "save"}, "the largest shard size must be at least 1 byte");
  if (prefix.empty() || prefix.find('/') != std::string_view::npos) {
    throw_usage_error({.op = "save"}, fmt::format("shard prefix '{}' is not a file name", prefix));
  }
  ShardPlan plan;
  plan.prefix = std::string(prefix);
  std::set<std::string_view> seen;
  for (const ShardEntry& t : tensors) {
    if (!seen.insert(t.name).second) throw_usage_error({.op = "save"}, fmt::format("tensor '{}' is given twice", t.name));
    plan.total_bytes += t.bytes;
    ShardPlan::Shard* cur = plan.shards.empty() ? nullptr : &plan.shards.back();
    const bool fits = cur != nullptr && cur->rank == t.rank && !cur->tensors.empty() &&
                      cur->bytes + t.bytes <= max_shard_bytes;
    if (!fits) {
      plan.shards.push_back({.file = {}, .rank = t.rank, .tensors = {}, .bytes = 0});
      cur = &plan.shards.back();
    }
    cur->tensors.push_back(t.name);
    cur->bytes += t.bytes;
  }
  if (plan.shards.empty()) plan.shards.push_back({});  // no tensors: one empty file, as HF writes
  const std::size_t n = plan.shards.size();
  if (n == 1) {
    plan.shards[0].file = fmt::format("{}.safetensors", prefix);
  } else {
    for (std::size_t k = 0; k < n; ++k) plan.shards[k].file = fmt::format("{}-{:05}-of-{:05}.safetensors", prefix, k + 1, n);
    plan.index_file = index_name(prefix);
  }
  return plan;
}

bool begin_checkpoint(const std::string& directory, const ShardPlan& plan) {
  const std::string& prefix = plan.prefix;
  if (is_remote_url(directory)) {
    // S3 answers a DELETE the same whether the key was there or not.
    remote_delete(in_checkpoint(directory, index_name(prefix)));
    if (!plan.index_file.empty()) remote_delete(in_checkpoint(directory, prefix + ".safetensors"));
    return false;
  }
  bool removed = remove_durably(in_checkpoint(directory, index_name(prefix)));
  if (!plan.index_file.empty()) removed = remove_durably(in_checkpoint(directory, prefix + ".safetensors")) || removed;
  return removed;
}

std::vector<SaveResult> save_shards(const std::string& directory, const ShardPlan& plan, unsigned rank,
                                    std::span<const SaveTensor> tensors, const SaveOptions& options) {
  std::map<std::string_view, const SaveTensor*> by_name;
  for (const SaveTensor& t : tensors) by_name.emplace(t.name, &t);
  std::vector<SaveResult> out;
  for (const ShardPlan::Shard& shard : plan.shards) {
    if (shard.rank != rank) continue;
    std::vector<SaveTensor> mine;
    mine.reserve(shard.tensors.size());
    for (const std::string& name : shard.tensors) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        throw_usage_error({.op = "save", .path = shard.file},
                          fmt::format("tensor '{}' of the plan is not among rank {}'s tensors", name, rank));
      }
      mine.push_back(*it->second);
    }
    out.push_back(save_safetensors(in_checkpoint(directory, shard.file), mine, options));
  }
  return out;
}

void finish_checkpoint(const std::string& directory, const ShardPlan& plan) {
  const std::string& prefix = plan.prefix;
  if (!plan.index_file.empty()) {
    nlohmann::json index;
    index["metadata"] = {{"total_size", plan.total_bytes}};
    index["weight_map"] = nlohmann::json::object();
    for (const auto& shard : plan.shards) {
      for (const std::string& name : shard.tensors) index["weight_map"][name] = shard.file;
    }
    write_text_atomically(in_checkpoint(directory, plan.index_file), index.dump(2) + "\n");
    // A single-file checkpoint of an older save: the new index replaces it (begin_checkpoint
    // removed it already for an s3:// prefix).
    if (!is_remote_url(directory)) (void)remove_durably(in_checkpoint(directory, prefix + ".safetensors"));
  } else if (!is_remote_url(directory)) {
    // An older sharded save's index must go before its shards do, so that no index is left
    // naming missing files; the single file (already renamed into place) is the checkpoint now.
    (void)remove_durably(in_checkpoint(directory, index_name(prefix)));
  }
  // An s3:// prefix is not listed: shards of an older, larger save stay (the index names the
  // current ones; docs/save.md).
  if (is_remote_url(directory)) return;
  // Shards of an older save that this one does not name (it had more of them, or other N).
  std::set<std::string> ours;
  for (const auto& shard : plan.shards) ours.insert(shard.file);
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    if (!ours.contains(name) && is_shard_name(name, prefix)) stale.push_back(entry.path().string());
  }
  for (const std::string& p : stale) (void)remove_durably(p);
}

std::vector<SaveResult> save_checkpoint(const std::string& directory, std::span<const SaveTensor> tensors,
                                        std::uint64_t max_shard_bytes, const SaveOptions& options) {
  std::vector<ShardEntry> entries;
  entries.reserve(tensors.size());
  for (const SaveTensor& t : tensors) entries.push_back({t.name, t.bytes, 0});
  const ShardPlan plan = plan_shards(entries, max_shard_bytes);
  std::error_code ec;
  if (!is_remote_url(directory)) fs::create_directories(directory, ec);
  if (ec) throw_os_error(ec.value(), {.op = "save", .path = directory}, "cannot create the folder");
  (void)begin_checkpoint(directory, plan);
  std::vector<SaveResult> out = save_shards(directory, plan, 0, tensors, options);
  finish_checkpoint(directory, plan);
  return out;
}

}  // namespace sluice
