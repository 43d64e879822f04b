// libsluice_cufile's process-wide state: the driver's use count and device, the registered file
// handles, buffers and streams, the cuFile parameters, and the counters behind the cuFile stats
// API. Every entry point of the library goes through here; see docs/cufile.md for the semantics.
//
// Locking: one mutex guards the registries and parameters (short critical sections, never held
// across I/O). Handles are shared_ptrs, so a transfer keeps its file open even if another thread
// deregisters the handle or closes the driver meanwhile.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cufile.h"
#include "sluice/device.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/internal/cufile_errors.hpp"
#include "sluice/path.hpp"

namespace sluice::capi {

/// A registered file: the caller's fd (which it keeps and closes itself) and Sluice's own File
/// on the same inode, reopened through /proc/self/fd so that Sluice can use O_DIRECT on it.
struct Handle {
  std::uint64_t id = 0;
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  File file;
  std::string name;  ///< what the fd pointed to at registration, for logs
  /// CU_FILE_HANDLE_TYPE_USERSPACE_FS: the file system's own handle and operations (fd is -1
  /// and `file` unused); its read/write callbacks move the bytes (userspace_fs.cpp).
  void* user_handle = nullptr;
  const CUfileFSOps_t* fs_ops = nullptr;
};

struct Buffer {
  std::size_t length = 0;
  MemoryKind kind = MemoryKind::pageable_host;
};

/// cuFile settings that have no Sluice counterpart: kept so Get returns what Set stored and
/// cuFileDriverGetProperties reports them.
/// A slab array (cuFileSet/GetParameter...SlabArray): up to 8 sizes (KiB) with their counts.
struct SlabArray {
  std::array<std::size_t, 8> sizes_kb{};
  std::array<std::size_t, 8> counts{};
  int len = 0;
};

struct Params {
  std::array<std::size_t, 12> size_t_values{};  ///< by CUFileSizeTConfigParameter_t
  std::array<bool, 14> bool_values{};           ///< by CUFileBoolConfigParameter_t
  std::array<std::string, 4> strings{};         ///< by CUFileStringConfigParameter_t
  SlabArray posix_slabs;                        ///< host bounce pool (compat mode)
  SlabArray gpu_slabs;                          ///< GPU bounce buffers (GDS 1.17)
  /// The values given to the cuFileDriverSet* calls and the size parameters that Sluice maps
  /// onto its own units (rounded to what its staging can do): reported back as given.
  std::size_t given_cache_kb = 0, given_direct_io_kb = 0;
  /// The staging buffer size in force before a small cache size shrank it (0: never shrunk),
  /// so a later, larger cache size gets buffers of that size back.
  std::uint64_t unshrunk_buffer_bytes = 0;
  /// cuFileDriverSetP2PFlags, by CUfileDriverStatusFlags_t: the P2P modes asked for (bit 31 set:
  /// asked at all).
  std::array<unsigned, CU_FILE_MAX_TARGET_TYPES> p2p_requested{};
};

/// Per-direction counters for the cuFile stats API (cuFileGetStatsL1/L2/L3).
struct DirectionCounters {
  std::atomic<std::uint64_t> ok{0}, err{0}, bytes{0}, lat_us{0};
  std::atomic<std::uint64_t> direct{0}, staged{0}, unaligned{0};  ///< per path
  std::array<std::atomic<std::uint64_t>, SLUICE_CUFILE_SIZE_HIST_BUCKETS> size_hist{};
};

/// Steady-clock nanoseconds: the clock of Counters::started_ns.
std::int64_t now_ns();

/// cuFileReadv / cuFileWritev (CUDA 13.4's statistics count them apart from read/write): one
/// count a call, whatever its segment count.
struct VectorCounters {
  std::atomic<std::uint64_t> ok{0}, err{0}, bytes{0}, lat_us{0};
};

struct Counters {
  DirectionCounters read, write;
  VectorCounters readv, writev;
  std::atomic<std::uint64_t> hdl_reg_ok{0}, hdl_reg_err{0}, hdl_dereg_ok{0}, hdl_dereg_err{0};
  std::atomic<std::uint64_t> buf_reg_ok{0}, buf_reg_err{0}, buf_dereg_ok{0}, buf_dereg_err{0};
  std::atomic<std::uint64_t> reg_bytes{0};
  std::atomic<std::uint64_t> batch_setup_ok{0}, batch_setup_err{0}, batch_submit_ok{0},
      batch_submit_err{0}, batch_complete_ok{0}, batch_complete_err{0}, batch_cancel_ok{0},
      batch_cancel_err{0}, batch_destroy_ok{0}, batch_destroy_err{0}, batch_enqueued{0};
  std::atomic<std::uint64_t> batch_read_bytes{0}, batch_write_bytes{0};
  std::atomic<std::uint64_t> batch_submit_lat_us{0}, batch_completion_lat_us{0};
  std::atomic<std::int64_t> started_ns{0};  ///< when counting (re)started, for rates
};

class State {
 public:
  static State& get();

  /// cuFileDriverOpen: opens the device on the first open and counts one more user.
  CUfileError_t open();
  /// For the calls that open the driver implicitly: opens it if nobody has.
  CUfileError_t ensure_open();
  CUfileError_t close();
  long use_count();
  bool is_open();
  /// The device buffers may live on (open() sets it); null before the first open.
  std::shared_ptr<Device> device();

  // --- handles ---
  CUfileError_t register_handle(CUfileHandle_t* fh, const CUfileDescr_t* descr);
  /// CU_FILE_HANDLE_TYPE_USERSPACE_FS: a handle served by the caller's CUfileFSOps_t.
  CUfileError_t register_user_fs(CUfileHandle_t* fh, const CUfileDescr_t* descr);
  /// False for an unknown handle.
  bool deregister_handle(CUfileHandle_t fh);
  std::shared_ptr<Handle> find_handle(CUfileHandle_t fh);

  // --- buffers ---
  CUfileError_t register_buffer(const void* base, std::size_t length, int flags);
  CUfileError_t deregister_buffer(const void* base);
  /// The registered length of `base`, or 0 when it is not registered.
  std::size_t registered_length(const void* base);

  // --- streams ---
  CUfileError_t register_stream(CUstream stream, unsigned flags);
  CUfileError_t deregister_stream(CUstream stream);

  // --- parameters ---
  std::mutex& mutex() { return mu_; }
  [[nodiscard]] bool open_locked() const { return users_ > 0; }  ///< under mutex()
  Params& params() { return params_; }                           ///< under mutex()
  std::size_t batch_capacity();                                  ///< properties.io_batchsize

  Counters& counters() { return counters_; }
  std::atomic<int>& stats_level() { return stats_level_; }
  std::atomic<bool>& stats_running() { return stats_running_; }
  /// Counts one call in its ok or err counter, while the stats are running.
  void count(std::atomic<std::uint64_t>& ok, std::atomic<std::uint64_t>& err, bool success) {
    if (stats_running_.load(std::memory_order_relaxed)) (success ? ok : err).fetch_add(1, std::memory_order_relaxed);
  }

 private:
  State();
  void drop_registrations_locked();
  CUfileHandle_t add_handle_locked(std::shared_ptr<Handle> h);

  std::mutex mu_;
  long users_ = 0;
  std::shared_ptr<Device> device_;
  std::uint64_t next_handle_id_ = 1;
  std::map<std::uint64_t, std::shared_ptr<Handle>> handles_;  // by id
  std::map<int, std::uint64_t> handle_by_fd_;
  std::map<const void*, Buffer> buffers_;
  std::map<CUstream, unsigned> streams_;
  Params params_;
  Counters counters_;
  std::atomic<int> stats_level_{0};
  std::atomic<bool> stats_running_{true};
};

/// The cuFile error as a CUfileError_t.
inline CUfileError_t status(CUfileOpError e, CUresult cu = CUresult{}) {
  return {e, cu};
}
inline constexpr CUfileError_t kSuccess{CU_FILE_SUCCESS, CUresult{}};
/// The status a control call returns for `e`: libsluice's one mapping
/// (sluice/internal/cufile_errors.hpp).
inline CUfileError_t status(const Error& e) {
  const CuFileStatus st = to_cufile_status(e);
  return {static_cast<CUfileOpError>(st.err), static_cast<CUresult>(st.cu_err)};
}

/// What cuFileGetVersion reports: the cuFile API level this library implements (GDS 1.19, CUDA
/// 13.4: vectored I/O, GPU bounce-buffer slabs, P2P flags and topology export included).
inline constexpr int kApiVersion = 1190;

/// The integer a C caller stored in a cuFile enum. C lets any int through, while in C++ a value
/// outside the enumerators' range must not even be loaded as the enum type.
template <typename Enum>
int raw(const Enum& e) noexcept {
  static_assert(sizeof(Enum) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// "CU_FILE_INVALID_VALUE (5022)" for logs.
std::string code_name(int code);

/// Reads one transfer into the counters of the stats API.
void count_transfer(bool write, bool ok, std::uint64_t bytes, std::uint64_t micros, Path path,
                    bool unaligned);
/// Reads one cuFileReadv/cuFileWritev call into the counters of the stats API.
void count_vectored(bool write, bool ok, std::uint64_t bytes, std::uint64_t micros);

}  // namespace sluice::capi
