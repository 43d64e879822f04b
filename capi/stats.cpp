// The cuFile statistics API (GDS 1.15) over libsluice_cufile's counters. "posix" counts the
// requests Sluice staged through host memory (its bounce or posix path, cuFile's compat mode),
// "nvfs" those it handed to NVIDIA's cuFile (the direct path); host-memory requests count in
// the totals only. Sluice's own per-path counters (sluice::stats(), `sluice stats`) see the
// same requests.
#include <cstring>

#include "exports.hpp"
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

template <typename T>
CUfileError_t get_stats(T* out, int level, void (*fill)(T&)) {
  if (out == nullptr) return status(CU_FILE_INVALID_VALUE);
  if (State::get().stats_level().load() < level) return status(CU_FILE_INVALID_VALUE);
  fill(*out);
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
