// Running a load plan: allocate once, keep reads in flight within the staging budget, hand each
// tensor out as the read holding its last byte completes, and sum up the paths taken.
#include <atomic>
#include <deque>
#include <exception>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "mapped.hpp"
#include "memory_hash.hpp"
#include "sluice/error.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/load.hpp"
#include "sluice/remote.hpp"
#include "transfer/transfer_promise.hpp"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<std::uint64_t> g_loaded_bytes{0};

// A token that counts `bytes` in g_loaded_bytes until its last copy goes.
std::shared_ptr<const std::uint64_t> count_loaded(std::uint64_t bytes) {
  g_loaded_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return {new std::uint64_t(bytes), [](const std::uint64_t* n) {
            g_loaded_bytes.fetch_sub(*n, std::memory_order_relaxed);
            delete n;
          }};
}

template <typename Memory>
Memory allocate(LoadTarget target, const std::shared_ptr<Device>& dev, std::uint64_t bytes) {
  const auto n = static_cast<std::size_t>(std::max<std::uint64_t>(bytes, 1));
  switch (target) {
    case LoadTarget::device: return Memory(std::in_place_type<DeviceBuffer>, dev, n);
    case LoadTarget::pinned_host: return Memory(std::in_place_type<PinnedBuffer>, dev, n);
    // Not populated here: the reads fault the pages in, on their workers (host_memory.hpp).
    case LoadTarget::pageable_host: return Memory(std::in_place_type<HostMapping>, n, true, false);
  }
  return {};
}

// The reads of one path: their bytes, those the page cache served, and the first reason of a
// read wholly from the cache and of one that was not.
struct PathTally {
  std::uint64_t bytes = 0;
  std::uint64_t cached = 0;
  std::string cached_reason;
  std::string other_reason;

  void add(const TransferResult& r) {
    bytes += r.bytes;
    cached += r.cached_bytes;
    std::string& slot = r.cached_bytes == r.bytes && r.bytes > 0 ? cached_reason : other_reason;
    if (slot.empty()) slot = r.reason;
  }
  [[nodiscard]] std::string reason() const {
    if (cached == 0 || other_reason.empty()) return other_reason.empty() ? cached_reason : other_reason;
    return fmt::format("page cache held {}% of the bytes: {} read buffered, {} as: {}",
                       cached * 100 / std::max<std::uint64_t>(bytes, 1), format_size(cached),
                       format_size(bytes - cached), other_reason);
  }
};

std::string path_summary(const std::map<Path, PathTally>& by_path, Path* main) {
  std::uint64_t best = 0;
  std::string reason;
  for (const auto& [p, v] : by_path) {
    if (v.bytes >= best) {
      best = v.bytes;
      *main = p;
      reason = v.reason();
    }
  }
  if (by_path.size() <= 1) return reason;
  std::string mix = "mixed:";
  for (const auto& [p, v] : by_path) mix += fmt::format(" {} {} ({});", to_string(p), format_size(v.bytes), v.reason());
  mix.pop_back();
  return mix;
}

// The plan's reads, kept in flight within the staging budget (always at least one), completed
// in issue order; each tensor is handed out as the read holding its last byte completes. After
// a failure no read is issued, those in flight are waited for, and the first failure is thrown.
class ReadWindow {
 public:
  ReadWindow(const Checkpoint& cp, const LoadPlan& plan, const LoadOptions& o,
             const std::vector<LoadedTensor>& tensors, void* base)
      : cp_(cp), plan_(plan), o_(o), tensors_(tensors), base_(base) {
    topts_.device = o.device;
    topts_.path = o.path;
    topts_.config = o.config;
  }

  TransferResult run() {
    const auto t0 = Clock::now();
    while (next_ < plan_.reads.size() || !window_.empty()) {
      issue();
      if (window_.empty()) break;
      complete_front();
    }
    total_.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (failure_) std::rethrow_exception(failure_);
    if (remote_bytes_ > 0) {
      total_.reason = remote_reason();
      total_.path = o_.target == LoadTarget::device ? Path::bounce : Path::host;
    } else if (by_path_.empty()) {
      total_.path = o_.target == LoadTarget::device ? Path::bounce : Path::host;
      total_.reason = "nothing to read";
    } else {
      total_.reason = path_summary(by_path_, &total_.path);
    }
    return total_;
  }

 private:
  struct InFlight {
    std::size_t read;
    TransferFuture result;
  };

  std::byte* dest_of(const LoadRead& r) const {
    auto* base = static_cast<std::byte*>(o_.destination ? tensors_[r.group].data : base_);
    return base + r.dest_offset;
  }

  // The reads from next_ on that one remote read can bring in together: back to back in the same
  // object and in memory, up to in_flight x part_size bytes (every request slot of the reader
  // busy, not max_read's share of them).
  std::size_t remote_run(const RemoteReader& remote) const {
    const LoadRead& first = plan_.reads[next_];
    const std::uint64_t limit = std::uint64_t{remote.options().in_flight} * remote.options().part_size;
    std::uint64_t bytes = first.size;
    std::size_t end = next_ + 1;
    for (; end < plan_.reads.size(); ++end) {
      const LoadRead& prev = plan_.reads[end - 1];
      const LoadRead& r = plan_.reads[end];
      if (r.size == 0 || r.file_index != first.file_index || r.offset != prev.offset + prev.size ||
          dest_of(r) != dest_of(prev) + prev.size || bytes + r.size > limit) {
        break;
      }
      bytes += r.size;
    }
    return end;
  }

  // Reads [next_, end) of a URL on this thread, as one RemoteReader read (parts in flight together),
  // straight into host memory, or for device memory into a host buffer and then copied (the
  // transfer pipeline does not take a remote source yet: docs/remote.md, "the seam"). Each read
  // gets a completed future with its share of the bytes (a short object leaves the last short).
  void issue_remote(RemoteReader& remote) {
    const std::size_t end = remote_run(remote);
    const LoadRead& first = plan_.reads[next_];
    const LoadRead& last = plan_.reads[end - 1];
    const std::uint64_t size = last.offset + last.size - first.offset;
    TransferResult res;
    if (o_.target != LoadTarget::device) {
      res = remote.read(dest_of(first), size, first.offset);
    } else {
      if (!staging_ || staging_->size() < size) staging_.emplace(static_cast<std::size_t>(size));
      res = remote.read(staging_->get(), size, first.offset);
      o_.device->copy_to_device(dest_of(first), staging_->get(), static_cast<std::size_t>(res.bytes));
      res.path = Path::bounce;
    }
    std::uint64_t left = res.bytes;
    for (; next_ < end; ++next_) {
      TransferResult share = res;
      share.bytes = std::min(left, plan_.reads[next_].size);
      share.ios = next_ + 1 == end ? res.ios : 0;
      left -= share.bytes;
      window_.push_back({next_, detail::ready_future(std::move(share))});
      inflight_ += plan_.reads[next_].size;
    }
  }

  // Reads while within the budget (always at least one in flight).
  void issue() {
    while (!failure_ && next_ < plan_.reads.size() &&
           (window_.empty() || inflight_ + plan_.reads[next_].size <= o_.inflight_bytes)) {
      const LoadRead& r = plan_.reads[next_];
      TransferFuture f;
      if (r.size == 0) {
        f = detail::ready_future({});
      } else if (RemoteReader* remote = cp_.remote(r.file_index)) {
        try {
          issue_remote(*remote);
        } catch (...) {
          failure_ = std::current_exception();
        }
        continue;
      } else {
        f = read_async(cp_.file(r.file_index), dest_of(r), r.size, r.offset, topts_);
      }
      window_.push_back({next_, std::move(f)});
      inflight_ += r.size;
      ++next_;
    }
  }

  void complete_front() {
    InFlight done = std::move(window_.front());
    window_.pop_front();
    const LoadRead& r = plan_.reads[done.read];
    inflight_ -= r.size;
    try {
      const TransferResult res = done.result.get();
      if (failure_) return;
      if (res.bytes != r.size) {
        throw Error(ErrorDomain::data, EIO,
                    {.op = "load", .path = cp_.layouts()[r.file_index].path, .offset = r.offset, .size = r.size,
                     .has_range = true},
                    fmt::format("the file ended after {} of these bytes: it shrank after its header was read", res.bytes));
      }
      if (r.size > 0 && cp_.remote(r.file_index) != nullptr) {
        remote_bytes_ += res.bytes;
        remote_files_.insert(r.file_index);
        total_.bytes += res.bytes;
        total_.ios += res.ios;
      } else if (r.size > 0) {
        by_path_[res.path].add(res);
        total_.bytes += res.bytes;
        total_.ios += res.ios;
        total_.cached_bytes += res.cached_bytes;
      }
      if (o_.on_tensor) {
        for (std::size_t k : r.completes) o_.on_tensor(tensors_[k]);
      }
    } catch (...) {
      if (!failure_) failure_ = std::current_exception();
    }
  }

  const Checkpoint& cp_;
  const LoadPlan& plan_;
  const LoadOptions& o_;
  const std::vector<LoadedTensor>& tensors_;
  void* base_;
  TransferOptions topts_;
  std::deque<InFlight> window_;
  std::uint64_t inflight_ = 0;
  std::size_t next_ = 0;
  // The readers' reasons (their requests so far, the header's included), then, when local files
  // were read too, their bytes by path.
  [[nodiscard]] std::string remote_reason() const {
    std::string reason;
    for (std::size_t fi : remote_files_) reason += (reason.empty() ? "" : "; ") + cp_.remote(fi)->reason();
    if (o_.target == LoadTarget::device) reason += ", staged in host memory then copied to the device";
    if (by_path_.empty()) return reason;
    Path main = Path::host;
    return fmt::format("mixed: remote {} ({}); {}", format_size(remote_bytes_), reason, path_summary(by_path_, &main));
  }

  std::map<Path, PathTally> by_path_;
  std::uint64_t remote_bytes_ = 0;
  std::set<std::size_t> remote_files_;
  std::optional<HostMapping> staging_;
  TransferResult total_;
  std::exception_ptr failure_;
};

}  // namespace

void* LoadedTensors::base() const noexcept {
  struct Base {
    void* operator()(std::monostate) const noexcept { return nullptr; }
    void* operator()(const DeviceBuffer& m) const noexcept { return m.data(); }
    void* operator()(const PinnedBuffer& m) const noexcept { return m.data(); }
    void* operator()(const HostMapping& m) const noexcept { return m.get(); }
    void* operator()(const Mapped&) const noexcept { return nullptr; }
  };
  return std::visit(Base{}, memory_);
}

std::string_view LoadedTensors::path_name() const noexcept {
  return remote_ ? std::string_view("remote") : to_string(result_.path);
}

const LoadedTensor* LoadedTensors::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::uint64_t LoadedTensors::xxh3(const LoadedTensor& t) const {
  detail::MemoryHash hash(target_ == LoadTarget::device ? device_.get() : nullptr);
  hash.update(t.data, t.info->bytes);
  return hash.digest();
}

std::uint64_t loaded_bytes_in_use() noexcept { return g_loaded_bytes.load(std::memory_order_relaxed); }

// The tensors of a mapped load: views of private mappings of their files, handed out at once.
TransferResult LoadedTensors::map(const Checkpoint& cp, const LoadPlan& plan, const LoadOptions& o,
                                  const detail::HostLoadChoice& choice) {
  const auto t0 = Clock::now();
  detail::MappedFiles files = detail::map_plan(cp, plan, choice.all_cached);
  counted_ = count_loaded(std::max<std::uint64_t>(files.mapped_bytes, 1));
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    tensors_[i].info = &infos_[i];
    tensors_[i].data = files.data[i];
    by_name_.emplace(infos_[i].name, i);
  }
  memory_ = Mapped{std::move(files.maps), std::move(files.copies)};
  TransferResult r;
  r.bytes = plan.bytes;
  r.cached_bytes = plan.bytes;
  r.path = Path::mapped;
  r.reason = choice.reason;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.on_tensor) {
    for (const LoadedTensor& t : tensors_) o.on_tensor(t);
  }
  return r;
}

LoadedTensors load(const Checkpoint& cp, const LoadOptions& o) {
  const LoadPlan plan = plan_load(cp, o);
  if (o.target != LoadTarget::pageable_host && !o.device) {
    throw_usage_error({.op = "load"}, fmt::format("target {} needs a device (LoadOptions::device)", to_string(o.target)));
  }
  const detail::HostLoadChoice choice = detail::choose_host_load(cp, plan, o);
  LoadedTensors out;
  out.device_ = o.device;
  out.target_ = o.target;
  // Copies of the plan's TensorInfo: the tensors point into these, so they outlive the Checkpoint.
  out.infos_.reserve(plan.tensors.size());
  for (const TensorInfo* ti : plan.tensors) out.infos_.push_back(*ti);
  out.tensors_.resize(plan.tensors.size());
  if (choice.mapped) {
    out.result_ = out.map(cp, plan, o, choice);
    return out;
  }
  if (!o.destination) {
    out.memory_ = allocate<LoadedTensors::Memory>(o.target, o.device, plan.allocation_bytes);
    out.counted_ = count_loaded(std::max<std::uint64_t>(plan.allocation_bytes, 1));
  }
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    LoadedTensor& t = out.tensors_[i];
    t.info = &out.infos_[i];
    if (o.destination) {
      t.data = o.destination(*t.info);
      if (t.data == nullptr) {
        throw_usage_error({.op = "load", .path = cp.layouts()[t.info->file_index].path},
                          fmt::format("the destination callback gave no buffer for tensor '{}'", t.info->name));
      }
    } else {
      t.data = static_cast<std::byte*>(out.base()) + plan.placement[i];
    }
    out.by_name_.emplace(t.info->name, i);
  }

  ReadWindow reads(cp, plan, o, out.tensors_, out.base());
  out.result_ = reads.run();
  // Why not mapped, where it could have been (pageable host memory).
  if (!choice.reason.empty()) out.result_.reason += "; " + choice.reason;
  out.remote_ = out.result_.reason.starts_with("remote:");
  return out;
}

}  // namespace sluice
