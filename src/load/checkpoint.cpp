// Opening the files of a checkpoint: single files, sharded safetensors indexes and folders.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/load.hpp"
#include "sluice/remote.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t max_index_bytes = 64 * MiB;

[[noreturn]] void bad_index(const std::string& path, const std::string& what) {
  throw Error(ErrorDomain::data, EINVAL, {.op = "safetensors index", .path = path}, what);
}

// The first MiB of an object by one ranged GET covers the 8-byte length and the header of most
// safetensors files (and any .npy header); a larger header costs a second read of the rest.
constexpr std::uint64_t remote_head_bytes = MiB;

TensorFileLayout read_remote_layout(RemoteReader& reader) {
  std::vector<std::byte> head(static_cast<std::size_t>(remote_head_bytes));
  head.resize(static_cast<std::size_t>(reader.read(head.data(), head.size(), 0).bytes));
  const std::uint64_t size = reader.size().value_or(head.size());
  const std::string& path = reader.url();
  const TensorFormat format = formats::detect_format(std::span(head).first(std::min<std::size_t>(head.size(), 16)));
  const std::uint64_t extent = formats::header_extent(format, std::span(head).first(std::min<std::size_t>(head.size(), 16)), size, path);
  if (extent > head.size()) {
    const std::size_t had = head.size();
    head.resize(static_cast<std::size_t>(extent));
    const auto n = reader.read(head.data() + had, extent - had, had).bytes;
    if (n != extent - had) {
      throw Error(ErrorDomain::data, EIO, {.op = "load", .path = path},
                  fmt::format("the object shrank while its header was read ({} of {} bytes)", had + n, extent));
    }
  }
  if (format == TensorFormat::safetensors) return formats::parse_safetensors(head, size, path);
  std::string name = path.substr(0, path.find('?'));
  if (const auto slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
  return formats::parse_npy(head, size, path, name);
}

std::string read_remote_text(const std::string& url) {
  RemoteReader reader(url);
  std::string text(static_cast<std::size_t>(remote_head_bytes), '\0');
  text.resize(static_cast<std::size_t>(reader.read(text.data(), text.size(), 0).bytes));
  const std::uint64_t size = reader.size().value_or(text.size());
  if (size > max_index_bytes) {
    bad_index(reader.url(), fmt::format("the index has {} bytes, more than the limit of {}", size, max_index_bytes));
  }
  if (size > text.size()) {
    const std::size_t had = text.size();
    text.resize(static_cast<std::size_t>(size));
    text.resize(had + static_cast<std::size_t>(reader.read(text.data() + had, size - had, had).bytes));
  }
  return text;
}

std::string read_text_file(const std::string& path) {
  if (is_remote_url(path)) return read_remote_text(path);
  File f = File::open(path, OpenMode::read);
  const std::uint64_t size = f.size();
  if (size > max_index_bytes) {
    bad_index(path, fmt::format("the index has {} bytes, more than the limit of {}", size, max_index_bytes));
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  const auto n = read(f, text.data(), size, 0).bytes;
  text.resize(static_cast<std::size_t>(n));
  return text;
}

bool is_index(const std::string& path) { return path.ends_with(".index.json"); }

// The shard files an index names, in name order, each checked to stay inside the index's folder.
std::vector<std::pair<std::string, std::vector<std::string>>> read_index(const std::string& path) {
  const std::string text = read_text_file(path);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad_index(path, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!doc.is_object() || !doc.contains("weight_map")) bad_index(path, "field 'weight_map' is missing");
  const json& map = doc["weight_map"];
  if (!map.is_object()) bad_index(path, "field 'weight_map' is not an object");
  std::map<std::string, std::vector<std::string>> shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it.value().is_string()) {
      bad_index(path, fmt::format("field 'weight_map'.'{}' is not a file name", it.key()));
    }
    const std::string shard = it.value().get<std::string>();
    const fs::path p(shard);
    bool escapes = shard.empty() || p.is_absolute();
    for (const auto& part : p) escapes = escapes || part == "..";
    if (escapes) {
      bad_index(path, fmt::format("field 'weight_map'.'{}' names '{}', which is not a file beside the index",
                                  it.key(), shard));
    }
    shards[shard].push_back(it.key());
  }
  if (shards.empty()) bad_index(path, "field 'weight_map' names no tensors");
  const fs::path dir = fs::path(path).parent_path();
  // A URL's shards are beside it: the URL up to its last '/' (a query string is not carried over).
  const std::string url_dir = is_remote_url(path) ? path.substr(0, path.rfind('/', path.find('?')) + 1) : "";
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (auto& [shard, names] : shards) {
    out.emplace_back(url_dir.empty() ? (dir / shard).string() : url_dir + shard, std::move(names));
  }
  return out;
}

std::vector<std::string> expand_folder(const std::string& path) {
  std::vector<std::string> indexes;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;
    if (name == "model.safetensors.index.json") return {entry.path().string()};
    if (is_index(name) && name.find("safetensors") != std::string::npos) indexes.push_back(entry.path().string());
    if (name.ends_with(".safetensors") || name.ends_with(".npy")) files.push_back(entry.path().string());
  }
  if (ec) throw_os_error(ec.value(), {.op = "open", .path = path}, "cannot list the folder");
  if (indexes.size() == 1) return indexes;
  if (indexes.size() > 1) {
    throw_usage_error({.op = "load", .path = path},
                      "the folder holds more than one safetensors index; name the one to load");
  }
  if (files.empty()) {
    throw_usage_error({.op = "load", .path = path}, "the folder holds no .safetensors, .npy or index file");
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string_view to_string(LoadTarget t) noexcept {
  switch (t) {
    case LoadTarget::device: return "device";
    case LoadTarget::pinned_host: return "pinned_host";
    case LoadTarget::pageable_host: return "pageable_host";
  }
  return "?";
}

std::string_view to_string(HostLoad h) noexcept {
  switch (h) {
    case HostLoad::automatic: return "auto";
    case HostLoad::read: return "read";
    case HostLoad::mapped: return "mapped";
  }
  return "?";
}

std::optional<HostLoad> parse_host_load(std::string_view s) noexcept {
  for (auto h : {HostLoad::automatic, HostLoad::read, HostLoad::mapped}) {
    if (to_string(h) == s) return h;
  }
  return std::nullopt;
}

void Checkpoint::add(TensorFileLayout layout, std::unique_ptr<File> file, std::shared_ptr<RemoteReader> remote) {
  const std::size_t index = layouts_.size();
  for (TensorInfo& t : layout.tensors) t.file_index = index;
  layouts_.push_back(std::move(layout));
  files_.push_back(std::move(file));
  remotes_.push_back(std::move(remote));
}

const File& Checkpoint::file(std::size_t index) const {
  if (files_.at(index) == nullptr) {
    throw_usage_error({.op = "load", .path = layouts_.at(index).path},
                      "a remote object has no local file: read it through Checkpoint::remote()");
  }
  return *files_[index];
}

RemoteReader* Checkpoint::remote(std::size_t index) const { return remotes_.at(index).get(); }

void Checkpoint::index_tensors() {
  tensors_.clear();
  by_name_.clear();
  for (const auto& layout : layouts_) {
    for (const TensorInfo& t : layout.tensors) {
      auto [it, fresh] = by_name_.emplace(t.name, tensors_.size());
      if (!fresh) {
        throw Error(ErrorDomain::data, EINVAL, {.op = "load", .path = layout.path},
                    fmt::format("tensor '{}' is also in '{}': tensor names must be unique across files", t.name,
                                layouts_[tensors_[it->second].file_index].path));
      }
      tensors_.push_back(t);
    }
  }
}

Checkpoint Checkpoint::open(std::span<const std::string> paths) {
  if (paths.empty()) throw_usage_error({.op = "load"}, "no files given");
  Checkpoint cp;
  std::set<std::string> seen;
  auto open_one = [&](const std::string& p) {
    const bool remote = is_remote_url(p);
    if (!seen.insert(remote ? p : fs::weakly_canonical(p).string()).second) {
      throw_usage_error({.op = "load", .path = p}, "the file is given twice");
    }
    if (remote) {
      auto reader = std::make_shared<RemoteReader>(p);
      TensorFileLayout layout = read_remote_layout(*reader);
      cp.add(std::move(layout), nullptr, std::move(reader));
      return;
    }
    auto file = std::make_unique<File>(File::open(p, OpenMode::read));
    TensorFileLayout layout = formats::read_layout(*file);
    cp.add(std::move(layout), std::move(file));
  };
  for (const std::string& given : paths) {
    std::vector<std::string> expanded{given};
    std::error_code ec;
    if (!is_remote_url(given) && fs::is_directory(given, ec)) expanded = expand_folder(given);
    for (const std::string& p : expanded) {
      if (!is_index(p)) {
        open_one(p);
        continue;
      }
      for (const auto& [shard, names] : read_index(p)) {
        open_one(shard);
        const TensorFileLayout& layout = cp.layouts_.back();
        std::set<std::string_view> listed(names.begin(), names.end());
        for (const TensorInfo& t : layout.tensors) {
          if (listed.erase(t.name) == 0) {
            bad_index(p, fmt::format("shard '{}' holds tensor '{}', which the weight_map does not list", shard, t.name));
          }
        }
        if (!listed.empty()) {
          bad_index(p, fmt::format("field 'weight_map' puts tensor '{}' in '{}', which does not hold it",
                                   *listed.begin(), shard));
        }
      }
    }
  }
  cp.index_tensors();
  return cp;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Checkpoint::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) {
    throw_usage_error({.op = "load"}, fmt::format("no tensor named '{}' in the {} file(s) given",
                                                  name, layouts_.size()));
  }
  return *t;
}

Checkpoint Checkpoint::part(std::string_view name, std::uint64_t first, std::uint64_t count) const {
  const TensorInfo* t = &at(name);
  const TensorFileLayout& from = layouts_[t->file_index];
  const ErrorContext ctx{.op = "load", .path = from.path};
  const std::uint64_t bits = t->element_bits;
  // The parser checked bytes == elements x bits / 8, so this is the tensor's element count.
  const std::uint64_t elements = bits == 0 ? 0 : t->bytes * 8 / bits;
  if (first > elements || count > elements - first) {
    throw_usage_error(ctx, fmt::format("elements [{}, {}) of tensor '{}': it has {}", first,
                                       first + count, name, elements));
  }
  if ((first * bits) % 8 != 0 || (count * bits) % 8 != 0) {
    throw_usage_error(
        ctx, fmt::format("elements [{}, {}) of tensor '{}' do not start and end on a byte ({} bits "
                         "per element)",
                         first, first + count, name, bits));
  }
  TensorInfo piece = *t;
  piece.shape = {count};
  piece.offset = t->offset + first * bits / 8;
  piece.bytes = count * bits / 8;
  piece.fortran_order = false;
  TensorFileLayout layout;
  layout.path = from.path;
  layout.format = from.format;
  layout.file_size = from.file_size;
  layout.data_offset = from.data_offset;
  layout.header_bytes = from.header_bytes;
  layout.version = from.version;
  layout.metadata = from.metadata;
  layout.tensors = {std::move(piece)};
  Checkpoint cp;
  const std::size_t fi = t->file_index;
  cp.add(std::move(layout), files_[fi] ? std::make_unique<File>(*files_[fi]) : nullptr, remotes_[fi]);
  cp.index_tensors();
  return cp;
}

std::uint64_t Checkpoint::total_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes;
  return n;
}

}  // namespace sluice
