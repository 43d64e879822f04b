// Recording and reading the counters. The process's own counters and the published segment
// share one layout (detail::SharedStats), so each update is the same few relaxed atomic adds,
// applied to the local copy and, when publishing, to the segment.
#include "sluice/stats.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/shared_stats.hpp"
#include "sluice/testing/stats.hpp"

namespace sluice {
namespace detail {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;

// A path row's seqlock is kept without fences (ThreadSanitizer does not model them, and GCC
// refuses them under -fsanitize=thread): each add to a row is a release and each load of it an
// acquire, so a reader that sees any part of an update also sees the `begun` before it. On x86
// both cost nothing over relaxed (a locked add, a plain load).
constexpr auto release = std::memory_order_release;
constexpr auto acquire = std::memory_order_acquire;

void add(SharedCounters& c, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns, bool error,
         std::memory_order order = relaxed) noexcept {
  c.bytes.fetch_add(bytes, order);
  c.ops.fetch_add(1, order);
  c.ios.fetch_add(ios, order);
  c.nanoseconds.fetch_add(ns, order);
  if (error) c.errors.fetch_add(1, order);
}

PathCounters load(const SharedCounters& a, std::memory_order order = relaxed) {
  return {a.bytes.load(order), a.ops.load(order), a.ios.load(order), a.errors.load(order),
          a.nanoseconds.load(order)};
}

void zero(SharedCounters& a) noexcept {
  a.bytes.store(0, relaxed);
  a.ops.store(0, relaxed);
  a.ios.store(0, relaxed);
  a.errors.store(0, relaxed);
  a.nanoseconds.store(0, relaxed);
}

bool same_key(const SharedKeyed& slot, std::string_view key) {
  return std::strncmp(slot.key, key.data(), key.size()) == 0 && slot.key[key.size()] == '\0';
}

// The slot of `key`, claimed on first use. Claiming writes the key before publishing state 2, so
// a reader (in this process or another) that sees 2 sees the whole key. A key that finds every
// slot but the last taken is counted in the last, under "other".
SharedKeyed& slot_for(SharedKeyed (&slots)[keyed_slots], std::string_view key) noexcept {
  key = key.substr(0, key_bytes - 1);
  for (std::size_t i = 0; i < keyed_slots; ++i) {
    SharedKeyed& slot = slots[i];
    if (i == keyed_slots - 1) key = "other";
    std::uint32_t state = slot.state.load(std::memory_order_acquire);
    if (state == 0) {
      if (slot.state.compare_exchange_strong(state, 1, std::memory_order_acquire)) {
        std::memcpy(slot.key, key.data(), key.size());
        slot.key[key.size()] = '\0';
        slot.state.store(2, std::memory_order_release);
        return slot;
      }
    }
    while (state == 1) state = slot.state.load(std::memory_order_acquire);  // a 32-byte copy
    if (same_key(slot, key)) return slot;
  }
  return slots[keyed_slots - 1];
}

std::vector<KeyedCounters> load(const SharedKeyed (&slots)[keyed_slots]) {
  std::vector<KeyedCounters> out;
  for (const SharedKeyed& slot : slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    KeyedCounters k;
    k.key.assign(slot.key, strnlen(slot.key, key_bytes));
    k.dirs = {load(slot.dirs[0]), load(slot.dirs[1])};
    out.push_back(std::move(k));
  }
  return out;
}

// One path row between updates (see SharedSeq). The window is a dozen loads, so under a flood of
// transfers a quiet moment comes within a few tries; a writer preempted mid-update holds the row
// for a time slice, and the reader waits it out (yielding). Only a writer that will never finish
// (its process died mid-update) makes `give_up` true, and the row is then taken as it stands.
void load_row(const SharedStats& s, std::size_t p, std::size_t d, PathCounters& counters,
              LatencyHistogram& latency, const std::function<bool()>& give_up) {
  const SharedSeq& seq = s.seq[p][d];
  std::vector<std::uint64_t> counts(LatencyHistogram::bucket_count);
  std::size_t first = 0, end = 0;
  for (std::uint64_t attempt = 1;; ++attempt) {
    const std::uint64_t ended = seq.ended.load(acquire);
    counters = load(s.paths[p][d], acquire);
    first = seq.first_bucket.load(acquire);
    end = std::min<std::size_t>(seq.end_bucket.load(acquire), LatencyHistogram::bucket_count);
    for (std::size_t i = first; i < end; ++i) counts[i] = s.latency[p][d].buckets[i].load(acquire);
    if (seq.begun.load(relaxed) == ended) break;
    if (attempt % 64 == 0) {
      if (give_up && give_up()) break;
      std::this_thread::yield();
    }
  }
  latency = LatencyHistogram{};
  for (std::size_t i = first; i < end; ++i) {
    if (counts[i] != 0) latency.record_n(LatencyHistogram::lowest_in(i), counts[i]);
  }
}

}  // namespace

void add_path(SharedStats& s, Path p, Direction d, std::uint64_t bytes, std::uint64_t ios,
              std::uint64_t ns, bool error) noexcept {
  const auto pi = static_cast<std::size_t>(p);
  const auto di = static_cast<std::size_t>(d);
  const auto bucket = static_cast<std::uint32_t>(LatencyHistogram::index_of(ns));
  SharedSeq& seq = s.seq[pi][di];
  seq.begun.fetch_add(1, relaxed);
  add(s.paths[pi][di], bytes, ios, ns, error, release);
  for (auto first = seq.first_bucket.load(relaxed); bucket < first;) {
    if (seq.first_bucket.compare_exchange_weak(first, bucket, release, relaxed)) break;
  }
  for (auto end = seq.end_bucket.load(relaxed); bucket + 1 > end;) {
    if (seq.end_bucket.compare_exchange_weak(end, bucket + 1, release, relaxed)) break;
  }
  s.latency[pi][di].buckets[bucket].fetch_add(1, release);
  seq.ended.fetch_add(1, release);
}

void add_target(SharedStats& s, std::string_view device, std::string_view fs, Direction d,
                std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns, bool error) noexcept {
  const auto di = static_cast<std::size_t>(d);
  add(slot_for(s.devices, device).dirs[di], bytes, ios, ns, error);
  add(slot_for(s.filesystems, fs).dirs[di], bytes, ios, ns, error);
}

StatsSnapshot load(const SharedStats& s, const std::function<bool()>& give_up) {
  StatsSnapshot r;
  for (std::size_t p = 0; p < path_count; ++p) {
    for (std::size_t d = 0; d < 2; ++d) load_row(s, p, d, r.paths[p][d], r.latency[p][d], give_up);
  }
  r.staging_waits = s.staging_waits.load(relaxed);
  for (std::size_t f = 0; f < fallback_count; ++f) r.fallbacks[f] = s.fallbacks[f].load(relaxed);
  r.devices = load(s.devices);
  r.filesystems = load(s.filesystems);
  return r;
}

void zero(SharedStats& s) noexcept {
  for (auto& row : s.paths) {
    for (auto& c : row) zero(c);
  }
  for (auto& row : s.latency) {
    for (auto& h : row) {
      for (auto& b : h.buckets) b.store(0, relaxed);
    }
  }
  for (auto& row : s.seq) {
    for (auto& q : row) {
      q.begun.store(0, relaxed);
      q.ended.store(0, relaxed);
      q.first_bucket.store(LatencyHistogram::bucket_count, relaxed);
      q.end_bucket.store(0, relaxed);
    }
  }
  s.staging_waits.store(0, relaxed);
  for (auto& f : s.fallbacks) f.store(0, relaxed);
  for (auto* slots : {&s.devices, &s.filesystems}) {
    for (SharedKeyed& slot : *slots) {
      zero(slot.dirs[0]);
      zero(slot.dirs[1]);
      std::memset(slot.key, 0, key_bytes);
      slot.state.store(0, std::memory_order_release);
    }
  }
}

}  // namespace detail

std::string_view to_string(Fallback f) noexcept {
  switch (f) {
    case Fallback::no_cufile: return "no_cufile";
    case Fallback::no_o_direct: return "no_o_direct";
    case Fallback::buffer_unaligned: return "buffer_unaligned";
    case Fallback::offset_unaligned: return "offset_unaligned";
    case Fallback::size_unaligned: return "size_unaligned";
    case Fallback::handle_refused: return "handle_refused";
    case Fallback::io_refused: return "io_refused";
  }
  return "unknown";
}

Stats::Stats() : local_(std::make_unique<detail::SharedStats>()) {}
Stats::~Stats() = default;

void Stats::record(Path p, Direction d, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
                   bool error) noexcept {
  detail::add_path(*local_, p, d, bytes, ios, ns, error);
  if (shared_ != nullptr) {
    // Only readers of the segment look at the time of the last update: no clock read otherwise.
    // Stamped before the counts it dates (add_path's release adds order it), so a reader that
    // loads it after the row never sees counts without a time.
    shared_->updated_unix_ns.store(detail::unix_ns(), detail::relaxed);
    detail::add_path(*shared_, p, d, bytes, ios, ns, error);
  }
}

void Stats::record_target(std::string_view device, std::string_view fs, Direction d,
                          std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
                          bool error) noexcept {
  detail::add_target(*local_, device, fs, d, bytes, ios, ns, error);
  if (shared_ != nullptr) detail::add_target(*shared_, device, fs, d, bytes, ios, ns, error);
}

void Stats::count_fallback(Fallback f) noexcept {
  const auto i = static_cast<std::size_t>(f);
  local_->fallbacks[i].fetch_add(1, detail::relaxed);
  if (shared_ != nullptr) shared_->fallbacks[i].fetch_add(1, detail::relaxed);
}

void Stats::count_staging_wait() noexcept {
  local_->staging_waits.fetch_add(1, detail::relaxed);
  if (shared_ != nullptr) shared_->staging_waits.fetch_add(1, detail::relaxed);
}

StatsSnapshot Stats::snapshot() const { return detail::load(*local_); }

void reset_stats(Stats& s) noexcept {
  detail::zero(*s.local_);
  if (s.shared_ != nullptr) detail::zero(*s.shared_);
}

Stats& stats() noexcept {
  static Stats s;
  static const bool attached = [] {
    s.shared_ = detail::attach_published_stats();
    // A forked child must not add its counts to its parent's segment.
    if (s.shared_ != nullptr) ::pthread_atfork(nullptr, nullptr, [] { stats().shared_ = nullptr; });
    return true;
  }();
  (void)attached;
  return s;
}

namespace {
// Publishing starts when the library loads, so a publisher is visible before its first transfer.
[[maybe_unused]] const bool publish_at_load = (stats(), true);
}  // namespace

}  // namespace sluice
