// The cuFile statistics API (GDS 1.15) over libsluice_cufile's counters. "posix" counts the
// requests Sluice staged through host memory (its bounce or posix path, cuFile's compat mode),
// "nvfs" those it handed to NVIDIA's cuFile (the direct path); host-memory requests count in
// the totals only. Sluice's own per-path counters (sluice::stats(), `sluice stats`) see the
// same requests.
//
// Layouts: CUDA 13.4 appended the readv/writev counters to CUfileStatsLevel1_t (512 -> 624
// bytes), and L2/L3, which embed L1 first, moved with it. A caller's struct carries no size, so
// the layout is a setting: 13.4's by default (the header's, and what NVIDIA's 13.4 library
// writes), or 13.3's with SLUICE_CUFILE_STATS_ABI=13.3 (or 12.9 .. 13.2) for programs built
// against the headers of CUDA 12.9 - 13.3, which would otherwise get 112 bytes written past
// their struct.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "exports.hpp"
#include "log.hpp"
#include "state.hpp"

using namespace sluice::capi;  // NOLINT(google-build-using-namespace): the C entry points below

namespace {

std::uint64_t ld(const std::atomic<std::uint64_t>& a) {
  return a.load(std::memory_order_relaxed);
}
CUfileOpCounter_t op(const std::atomic<std::uint64_t>& ok, const std::atomic<std::uint64_t>& err) {
  return {ld(ok), ld(err)};
}
std::uint64_t ratio(std::uint64_t num, std::uint64_t den) {
  return den == 0 ? 0 : num / den;
}

template <typename PerSec>
void fill_vectored(const VectorCounters& v, PerSec per_sec, CUfileOpCounter_t& ops,
                   std::uint64_t& bytes, std::uint64_t& lat_sum, std::uint64_t& lat_avg,
                   std::uint64_t& bw, std::uint64_t& ops_per_sec) {
  ops = op(v.ok, v.err);
  bytes = ld(v.bytes);
  lat_sum = ld(v.lat_us);
  lat_avg = ratio(lat_sum, ops.ok);
  bw = ratio(bytes * 1000000, lat_sum);
  ops_per_sec = per_sec(ops.ok);
}

void fill_l1(CUfileStatsLevel1_t& s) {
  Counters& c = State::get().counters();
  const double secs = static_cast<double>(now_ns() - c.started_ns.load()) / 1e9;
  const auto per_sec = [secs](std::uint64_t n) {
    return secs > 0 ? static_cast<std::uint64_t>(static_cast<double>(n) / secs) : 0;
  };
  s = CUfileStatsLevel1_t{};
  s.read_ops = op(c.read.ok, c.read.err);
  s.write_ops = op(c.write.ok, c.write.err);
  s.hdl_register_ops = op(c.hdl_reg_ok, c.hdl_reg_err);
  s.hdl_deregister_ops = op(c.hdl_dereg_ok, c.hdl_dereg_err);
  s.buf_register_ops = op(c.buf_reg_ok, c.buf_reg_err);
  s.buf_deregister_ops = op(c.buf_dereg_ok, c.buf_dereg_err);
  s.read_bytes = ld(c.read.bytes);
  s.write_bytes = ld(c.write.bytes);
  s.read_lat_sum_us = ld(c.read.lat_us);
  s.write_lat_sum_us = ld(c.write.lat_us);
  // Bandwidth over the time spent in calls, as gds_stats shows it.
  s.read_bw_bytes_per_sec = ratio(s.read_bytes * 1000000, s.read_lat_sum_us);
  s.write_bw_bytes_per_sec = ratio(s.write_bytes * 1000000, s.write_lat_sum_us);
  s.read_lat_avg_us = ratio(s.read_lat_sum_us, s.read_ops.ok);
  s.write_lat_avg_us = ratio(s.write_lat_sum_us, s.write_ops.ok);
  s.read_ops_per_sec = per_sec(s.read_ops.ok);
  s.write_ops_per_sec = per_sec(s.write_ops.ok);
  s.batch_setup_ops = op(c.batch_setup_ok, c.batch_setup_err);
  s.batch_submit_ops = op(c.batch_submit_ok, c.batch_submit_err);
  s.batch_complete_ops = op(c.batch_complete_ok, c.batch_complete_err);
  s.batch_cancel_ops = op(c.batch_cancel_ok, c.batch_cancel_err);
  s.batch_destroy_ops = op(c.batch_destroy_ok, c.batch_destroy_err);
  s.batch_enqueued_ops = {ld(c.batch_enqueued), 0};
  s.batch_posix_enqueued_ops = s.batch_enqueued_ops;  // every entry runs on Sluice's pool
  s.batch_processed_ops = s.batch_complete_ops;
  s.batch_posix_processed_ops = s.batch_complete_ops;
  s.batch_total_submit_ops = s.batch_submit_ops;
  s.batch_read_bytes = ld(c.batch_read_bytes);
  s.batch_write_bytes = ld(c.batch_write_bytes);
  s.batch_submit_lat_sum_us = ld(c.batch_submit_lat_us);
  s.batch_completion_lat_sum_us = ld(c.batch_completion_lat_us);
  s.batch_submit_lat_avg_us = ratio(s.batch_submit_lat_sum_us, s.batch_submit_ops.ok);
  s.batch_completion_lat_avg_us = ratio(s.batch_completion_lat_sum_us, s.batch_complete_ops.ok);
  s.batch_read_bw_bytes = ratio(s.batch_read_bytes * 1000000, s.batch_completion_lat_sum_us);
  s.batch_write_bw_bytes = ratio(s.batch_write_bytes * 1000000, s.batch_completion_lat_sum_us);
  s.batch_submit_ops_per_sec = per_sec(s.batch_submit_ops.ok);
  s.batch_complete_ops_per_sec = per_sec(s.batch_complete_ops.ok);
  fill_vectored(c.readv, per_sec, s.readv_ops, s.readv_bytes, s.readv_lat_sum_us,
                s.readv_lat_avg_us, s.readv_bw_bytes_per_sec, s.readv_ops_per_sec);
  fill_vectored(c.writev, per_sec, s.writev_ops, s.writev_bytes, s.writev_lat_sum_us,
                s.writev_lat_avg_us, s.writev_bw_bytes_per_sec, s.writev_ops_per_sec);
}

void fill_l2(CUfileStatsLevel2_t& s) {
  fill_l1(s.basic);
  Counters& c = State::get().counters();
  for (std::size_t i = 0; i < SLUICE_CUFILE_SIZE_HIST_BUCKETS; ++i) {
    s.read_size_kb_hist[i] = ld(c.read.size_hist[i]);
    s.write_size_kb_hist[i] = ld(c.write.size_hist[i]);
  }
}

void fill_l3(CUfileStatsLevel3_t& s) {
  fill_l2(s.detailed);
  Counters& c = State::get().counters();
  const double secs = static_cast<double>(now_ns() - c.started_ns.load()) / 1e9;
  const auto util = [secs](std::uint64_t busy_us) {
    return secs > 0 ? static_cast<std::uint64_t>(static_cast<double>(busy_us) / 1e4 / secs) : 0;
  };
  s.num_gpus = 1;  // the one device the driver opened
  std::memset(s.per_gpu_stats, 0, sizeof(s.per_gpu_stats));
  CUfilePerGpuStats_t& g = s.per_gpu_stats[0];
  const CUfileStatsLevel1_t& b = s.detailed.basic;
  g.read_bytes = b.read_bytes;
  g.read_bw_bytes_per_sec = b.read_bw_bytes_per_sec;
  g.read_duration_us = b.read_lat_sum_us;
  g.read_utilization = util(g.read_duration_us);
  g.n_total_reads = b.read_ops.ok + b.read_ops.err;
  g.n_nvfs_reads = ld(c.read.direct);
  g.n_posix_reads = ld(c.read.staged);
  g.n_unaligned_reads = ld(c.read.unaligned);
  g.n_reads_err = b.read_ops.err;
  g.writes_bytes = b.write_bytes;
  g.write_bw_bytes_per_sec = b.write_bw_bytes_per_sec;
  g.write_duration_us = b.write_lat_sum_us;
  g.write_utilization = util(g.write_duration_us);
  g.n_total_writes = b.write_ops.ok + b.write_ops.err;
  g.n_nvfs_writes = ld(c.write.direct);
  g.n_posix_writes = ld(c.write.staged);
  g.n_unaligned_writes = ld(c.write.unaligned);
  g.n_writes_err = b.write_ops.err;
  g.reg_bytes = ld(c.reg_bytes);
}

// CUDA 12.9 - 13.3's sizes: L1 ended before the readv/writev counters.
constexpr std::size_t kL1Size133 = offsetof(CUfileStatsLevel1_t, readv_ops);
constexpr std::size_t kHistBytes = sizeof(CUfileStatsLevel2_t::read_size_kb_hist);
static_assert(kL1Size133 == 512 && sizeof(CUfileStatsLevel1_t) == 624);

// True when the caller's structs have CUDA 13.3's layout (read once).
bool layout_133() {
  static const bool old = [] {
    const char* v = std::getenv("SLUICE_CUFILE_STATS_ABI");
    const std::string_view s = v != nullptr ? v : "";
    // Every header before 13.4 that has the statistics API has 13.3's layout.
    for (const std::string_view before_134 : {"12.9", "13.0", "13.1", "13.2", "13.3"})
      if (s == before_134) return true;
    if (!s.empty() && s != "13.4")
      log(LogLevel::error, "SLUICE_CUFILE_STATS_ABI={}: not a CUDA version 12.9 .. 13.4; using 13.4's layout", s);
    return false;
  }();
  return old;
}

// Writes `l2` (and, for level 3, the per-GPU part of `l3`) in 13.3's layout: L1's first 512
// bytes, then the histograms, then num_gpus and the per-GPU array.
void store_133(void* out, int level, const CUfileStatsLevel3_t& l3) {
  auto* p = static_cast<unsigned char*>(out);
  std::memcpy(p, &l3.detailed.basic, kL1Size133);
  if (level < 2) return;
  std::memcpy(p + kL1Size133, l3.detailed.read_size_kb_hist, kHistBytes);
  std::memcpy(p + kL1Size133 + kHistBytes, l3.detailed.write_size_kb_hist, kHistBytes);
  if (level < 3) return;
  const std::size_t l2_size = kL1Size133 + 2 * kHistBytes;
  std::memcpy(p + l2_size, &l3.num_gpus, sizeof l3.num_gpus);
  std::memcpy(p + l2_size + (offsetof(CUfileStatsLevel3_t, per_gpu_stats) - sizeof(l3.detailed)),
              l3.per_gpu_stats, sizeof l3.per_gpu_stats);
}

template <typename T>
CUfileError_t get_stats(T* out, int level, void (*fill)(T&)) {
  if (out == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (State::get().stats_level().load() < level) return status(CU_FILE_INVALID_VALUE);
  if (!layout_133()) {
    fill(*out);
    return kSuccess;
  }
  auto l3 = std::make_unique<CUfileStatsLevel3_t>();
  if (level == 3) fill_l3(*l3);
  else if (level == 2) fill_l2(l3->detailed);
  else fill_l1(l3->detailed.basic);
  store_133(out, level, *l3);
  return kSuccess;
}

void reset(DirectionCounters& d) {
  for (auto* a : {&d.ok, &d.err, &d.bytes, &d.lat_us, &d.direct, &d.staged, &d.unaligned})
    a->store(0);
  for (auto& h : d.size_hist) h.store(0);
}

}  // namespace

CUFILE_API CUfileError_t cuFileSetStatsLevel(int level) {
  if (level < 0 || level > 3) return status(CU_FILE_INVALID_VALUE);
  State::get().stats_level() = level;
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileGetStatsLevel(int* level) {
  if (level == nullptr) return status(CU_FILE_INVALID_VALUE);
  *level = State::get().stats_level().load();
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileStatsStart(void) {
  State::get().stats_running() = true;
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileStatsStop(void) {
  State::get().stats_running() = false;
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileStatsReset(void) {
  Counters& c = State::get().counters();
  reset(c.read);
  reset(c.write);
  for (VectorCounters* v : {&c.readv, &c.writev})
    for (auto* a : {&v->ok, &v->err, &v->bytes, &v->lat_us}) a->store(0);
  for (auto* a : {&c.hdl_reg_ok,
                  &c.hdl_reg_err,
                  &c.hdl_dereg_ok,
                  &c.hdl_dereg_err,
                  &c.buf_reg_ok,
                  &c.buf_reg_err,
                  &c.buf_dereg_ok,
                  &c.buf_dereg_err,
                  &c.batch_setup_ok,
                  &c.batch_setup_err,
                  &c.batch_submit_ok,
                  &c.batch_submit_err,
                  &c.batch_complete_ok,
                  &c.batch_complete_err,
                  &c.batch_cancel_ok,
                  &c.batch_cancel_err,
                  &c.batch_destroy_ok,
                  &c.batch_destroy_err,
                  &c.batch_enqueued,
                  &c.batch_read_bytes,
                  &c.batch_write_bytes,
                  &c.batch_submit_lat_us,
                  &c.batch_completion_lat_us}) {
    a->store(0);
  }
  c.started_ns = now_ns();  // reg_bytes is live state, not a counter: it stays
  return kSuccess;
}

CUFILE_API CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t* stats) {
  return get_stats(stats, 1, &fill_l1);
}
CUFILE_API CUfileError_t cuFileGetStatsL2(CUfileStatsLevel2_t* stats) {
  return get_stats(stats, 2, &fill_l2);
}
CUFILE_API CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t* stats) {
  return get_stats(stats, 3, &fill_l3);
}
