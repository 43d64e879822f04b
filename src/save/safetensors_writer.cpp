// Writing one safetensors file. The header is built here, byte for byte what the reference writer
// (huggingface/safetensors, tensor.rs prepare()) emits: serde_json's compact form, keys in file
// order with "__metadata__" first, the string escapes serde_json and nlohmann share (\" \\ \b \f
// \n \r \t, \u00xx for other control characters, UTF-8 as is), spaces to a multiple of 8.
//
// The body goes out as writes of at most max_write bytes, cut at file offsets that are multiples
// of max_write (so only tensor boundaries fall inside a block), through write_async within an
// in-flight budget; a failure stops the issuing, every write in flight is waited for (they use
// the caller's memory), and the AtomicFile's destructor removes the temporary.
#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "save/remote_save.hpp"
#include "sluice/atomic_file.hpp"
#include "sluice/error.hpp"
#include "sluice/formats.hpp"
#include "sluice/remote.hpp"
#include "sluice/save.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void bad_tensor(const std::string& name, const std::string& why) {
  throw_usage_error({.op = "save"}, fmt::format("tensor '{}': {}", name, why));
}

// Position of a dtype in the specification's order (by alignment): the writer sorts on it.
std::size_t dtype_rank(std::string_view name) {
  const auto all = formats::safetensors_dtypes();
  return static_cast<std::size_t>(std::find(all.begin(), all.end(), name) - all.begin());
}

// A JSON string as serde_json writes it (nlohmann escapes the same characters the same way).
std::string quoted(const std::string& s, const std::string& what) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw_usage_error({.op = "save"}, fmt::format("{} is not valid UTF-8", what));
  }
}

std::uint64_t checked_bytes(const SaveTensor& t) {
  const std::uint32_t bits = element_bits(t.dtype);
  std::uint64_t elements = 1;
  for (const std::uint64_t d : t.shape) {
    if (d != 0 && elements > UINT64_MAX / d) bad_tensor(t.name, "the shape's element count overflows");
    elements *= d;
  }
  if (elements > UINT64_MAX / bits) bad_tensor(t.name, "the shape's size overflows");
  if (elements * bits % 8 != 0) {
    bad_tensor(t.name, fmt::format("{} elements of {} bits are not a whole number of bytes", elements, bits));
  }
  const std::uint64_t want = elements * bits / 8;
  if (t.bytes != want) {
    bad_tensor(t.name, fmt::format("{} bytes given, but its shape and dtype make {}", t.bytes, want));
  }
  if (t.bytes > 0 && t.data == nullptr) bad_tensor(t.name, "null data");
  return want;
}

// The results of the body's writes, by path: bytes and the first reason of each.
struct WriteTally {
  std::map<Path, std::pair<std::uint64_t, std::string>> by_path;
  std::uint64_t ios = 0;

  void add(const TransferResult& r) {
    auto& [bytes, reason] = by_path[r.path];
    bytes += r.bytes;
    if (reason.empty()) reason = r.reason;
    ios += r.ios;
  }
  void fill(TransferResult& out) const {
    std::uint64_t best = 0;
    for (const auto& [p, v] : by_path) {
      out.bytes += v.first;
      if (v.first >= best) {
        best = v.first;
        out.path = p;
        out.reason = v.second;
      }
    }
    out.ios = ios;
    if (by_path.size() > 1) {
      out.reason = "mixed:";
      for (const auto& [p, v] : by_path) out.reason += fmt::format(" {} {} ({});", to_string(p), format_size(v.first), v.second);
      out.reason.pop_back();
    }
  }
};

struct Piece {
  const std::byte* data;
  std::uint64_t size;
  std::uint64_t offset;
};

// The writes of the file: the prefix, then each tensor cut at multiples of max_write.
std::vector<Piece> cut(const SafetensorsLayout& layout, std::span<const SaveTensor> tensors,
                       std::uint64_t max_write) {
  std::vector<Piece> pieces{{layout.prefix.data(), layout.prefix.size(), 0}};
  for (std::size_t k = 0; k < layout.order.size(); ++k) {
    const SaveTensor& t = tensors[layout.order[k]];
    const auto* base = static_cast<const std::byte*>(t.data);
    std::uint64_t at = layout.offsets[k];
    const std::uint64_t end = at + t.bytes;
    while (at < end) {
      const std::uint64_t next = std::min(end, (at / max_write + 1) * max_write);
      pieces.push_back({base + (at - layout.offsets[k]), next - at, at});
      at = next;
    }
  }
  return pieces;
}

// Runs the writes within the budget; throws the first failure once nothing is in flight.
void write_pieces(const File& file, const std::vector<Piece>& pieces, const SaveOptions& o,
                  WriteTally& tally) {
  TransferOptions to;
  to.device = o.device;
  to.path = o.path;
  to.config = o.config;
  std::deque<std::pair<std::uint64_t, TransferFuture>> window;
  std::uint64_t inflight = 0;
  std::exception_ptr failure;
  std::size_t next = 0;
  while (next < pieces.size() || !window.empty()) {
    while (!failure && next < pieces.size() &&
           (window.empty() || inflight + pieces[next].size <= o.inflight_bytes)) {
      const Piece& p = pieces[next++];
      try {
        window.emplace_back(p.size, write_async(file, p.data, p.size, p.offset, to));
        inflight += p.size;
      } catch (...) {
        failure = std::current_exception();
      }
    }
    if (window.empty()) break;
    auto [size, fut] = std::move(window.front());
    window.pop_front();
    inflight -= size;
    try {
      tally.add(fut.get());
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

SafetensorsLayout plan_safetensors(std::span<const SaveTensor> tensors,
                                   const std::optional<SaveMetadata>& metadata) {
  SafetensorsLayout layout;
  std::set<std::string_view> names;
  std::vector<std::size_t> ranks(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SaveTensor& t = tensors[i];
    if (t.name.empty()) bad_tensor(t.name, "an empty name");
    if (t.name == "__metadata__") bad_tensor(t.name, "the name is reserved for the file's metadata");
    if (!names.insert(t.name).second) bad_tensor(t.name, "the name is given twice");
    const std::string_view st = safetensors_name(t.dtype);
    if (st.empty()) bad_tensor(t.name, fmt::format("safetensors has no type for {}", to_string(t.dtype)));
    ranks[i] = dtype_rank(st);
    (void)checked_bytes(t);
  }
  layout.order.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) layout.order[i] = i;
  std::sort(layout.order.begin(), layout.order.end(), [&](std::size_t a, std::size_t b) {
    if (ranks[a] != ranks[b]) return ranks[a] > ranks[b];
    return tensors[a].name < tensors[b].name;
  });

  std::string header = "{";
  if (metadata) {
    std::set<std::string_view> keys;
    std::vector<const std::pair<std::string, std::string>*> sorted;
    for (const auto& kv : *metadata) {
      if (!keys.insert(kv.first).second) throw_usage_error({.op = "save"}, fmt::format("metadata key '{}' is given twice", kv.first));
      sorted.push_back(&kv);
    }
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
    header += "\"__metadata__\":{";
    for (const auto* kv : sorted) {
      header += quoted(kv->first, "a metadata key") + ":" + quoted(kv->second, fmt::format("metadata '{}'", kv->first)) + ",";
    }
    if (!sorted.empty()) header.pop_back();
    header += "},";
  }
  std::uint64_t at = 0;
  std::vector<std::uint64_t> relative;
  for (const std::size_t i : layout.order) {
    const SaveTensor& t = tensors[i];
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}},",
                          quoted(t.name, "a tensor name"), safetensors_name(t.dtype),
                          fmt::join(t.shape, ","), at, at + t.bytes);
    relative.push_back(at);
    at += t.bytes;
  }
  if (header.size() > 1) header.pop_back();
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > formats::safetensors_max_header) {
    throw_usage_error({.op = "save"}, fmt::format("the header would have {} bytes, more than safetensors reads ({})",
                                                  header.size(), formats::safetensors_max_header));
  }
  const std::uint64_t n = header.size();
  layout.prefix.resize(8 + header.size());
  for (int b = 0; b < 8; ++b) layout.prefix[static_cast<std::size_t>(b)] = static_cast<std::byte>(n >> (8 * b));
  std::transform(header.begin(), header.end(), layout.prefix.begin() + 8, [](char c) { return static_cast<std::byte>(c); });
  for (const std::uint64_t r : relative) layout.offsets.push_back(8 + n + r);
  layout.file_bytes = 8 + n + at;
  return layout;
}

SaveResult save_safetensors(const std::string& path, std::span<const SaveTensor> tensors,
                            const SaveOptions& options) {
  const auto t0 = Clock::now();
  if (options.max_write == 0) throw_usage_error({.op = "save", .path = path}, "max_write must be at least 1");
  if (is_remote_url(path)) return detail::save_safetensors_remote(path, tensors, options);
  const SafetensorsLayout layout = plan_safetensors(tensors, options.metadata);
  SaveResult result;
  result.path = path;
  result.file_bytes = layout.file_bytes;
  result.header_bytes = layout.prefix.size() - 8;

  AtomicFile out = AtomicFile::create(path);
  out.reserve(layout.file_bytes);
  WriteTally tally;
  write_pieces(out.file(), cut(layout, tensors, options.max_write), options, tally);
  const auto t_sync = Clock::now();
  out.commit(options.durable);
  const auto t1 = Clock::now();
  tally.fill(result.transfer);
  result.sync_seconds = std::chrono::duration<double>(t1 - t_sync).count();
  result.transfer.seconds = std::chrono::duration<double>(t1 - t0).count();
  return result;
}

}  // namespace sluice
