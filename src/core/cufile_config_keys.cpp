// The key table of NVIDIA's cufile.json and CUFILE_* environment (reference 1b): what each key
// does in Sluice. A key with a Sluice counterpart maps to the same setting the cuFile parameter
// API maps its parameter to (capi/driver.cpp), so the file, the environment and the API agree.
// Rows are in the order libsluice_cufile applies them: a cache size after the buffer size it is
// divided by, the GPU slab arrays (which replace both) after the cache size.
#include <array>

#include "cufile.h"
#include "sluice/internal/cufile_config.hpp"

namespace sluice::internal {
namespace {

using E = CufileEffect;
using P = CufileParam;
using T = CufileValueType;

constexpr std::string_view kLogFile = "libsluice_cufile logs to stderr, never to a cufile.log";
constexpr std::string_view kNoRdma = "Sluice has no RDMA path (GDS over distributed file systems)";
constexpr std::string_view kNoNvfs =
    "nvidia-fs tuning per file system or device; Sluice serves every file system through its own "
    "paths, and NVIDIA's library applies its own cufile.json where Sluice's direct path uses it";

constexpr std::array kJsonKeys = {
    CufileKey{"logging.level", T::text, E::sluice_setting, P::string_value,
              CUFILE_PARAM_LOGGING_LEVEL, "log_level",
              "NOTICE and ERROR: error, WARN: warn, INFO: info, DEBUG and TRACE: debug"},
    CufileKey{"logging.dir", T::text, E::kept, P::string_value, CUFILE_PARAM_LOG_DIR, "", kLogFile},
    CufileKey{"logging.max_file_size_mb", T::any, E::no_effect, P::none, 0, "", kLogFile},
    CufileKey{"profile.cufile_stats", T::count, E::cufile_layer, P::size_t_value,
              CUFILE_PARAM_PROFILE_STATS, "", "the level of cuFileGetStatsL1/L2/L3"},
    CufileKey{"profile.nvtx", T::boolean, E::kept, P::bool_value, CUFILE_PARAM_PROFILE_NVTX, "",
              "libsluice_cufile emits no NVTX ranges (deprecated in cuFile too)"},
    CufileKey{"execution.max_io_queue_depth", T::count, E::sluice_setting, P::size_t_value,
              CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH, "queue_depth",
              "I/Os in flight per worker"},
    CufileKey{"execution.max_io_threads", T::count, E::sluice_setting, P::size_t_value,
              CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, "threads",
              "workers sharing one large request; 0 is Sluice's default, min(4, cores)"},
    CufileKey{"execution.parallel_io", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_EXECUTION_PARALLEL_IO, "",
              "Sluice always splits a large request across `threads` workers"},
    CufileKey{"execution.min_io_threshold_size_kb", T::count, E::kept, P::size_t_value,
              CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB, "",
              "Sluice splits requests into io_size pieces"},
    CufileKey{"execution.max_request_parallelism", T::count, E::kept, P::size_t_value,
              CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM, "",
              "`threads` bounds the workers of one request"},
    CufileKey{"properties.per_buffer_cache_size_kb", T::count, E::sluice_setting, P::size_t_value,
              CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB, "bounce_buffer_size",
              "each pinned staging buffer of the bounce path"},
    CufileKey{"properties.max_device_cache_size_kb", T::count, E::sluice_setting, P::size_t_value,
              CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, "bounce_buffers",
              "this size in staging buffers of bounce_buffer_size"},
    CufileKey{"properties.gpu_bounce_buffer_slab_config.slab_size_kb", T::counts, E::sluice_setting,
              P::gpu_slabs, 0, "bounce_buffer_size,bounce_buffers",
              "staging buffers of the largest slab size holding the slabs' total"},
    CufileKey{"properties.gpu_bounce_buffer_slab_config.slab_count", T::counts, E::sluice_setting,
              P::gpu_slabs, 1, "bounce_buffer_size,bounce_buffers",
              "staging buffers of the largest slab size holding the slabs' total"},
    CufileKey{"properties.max_direct_io_size_kb", T::count, E::sluice_setting, P::size_t_value,
              CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, "io_size",
              "the size of one request to storage"},
    CufileKey{"properties.max_device_pinned_mem_size_kb", T::count, E::cufile_layer,
              P::size_t_value, CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB, "",
              "the cap on device memory cuFileBufRegister accepts"},
    CufileKey{"properties.io_batchsize", T::count, E::cufile_layer, P::size_t_value,
              CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, "",
              "the most entries of one cuFileBatchIOSetUp"},
    CufileKey{"properties.max_batch_io_timeout_msecs", T::count, E::kept, P::size_t_value,
              CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS, "",
              "cuFileBatchIOGetStatus waits for the timeout its caller passes"},
    CufileKey{"properties.use_poll_mode", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, "",
              "Sluice's calls block until done, without polling"},
    CufileKey{"properties.poll_mode_max_size_kb", T::count, E::kept, P::size_t_value,
              CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB, "",
              "Sluice's calls block until done, without polling"},
    CufileKey{"properties.allow_compat_mode", T::boolean, E::sluice_setting, P::bool_value,
              CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, "path",
              "false: no fallback, a request the direct path cannot serve fails with "
              "CU_FILE_IO_NOT_SUPPORTED"},
    CufileKey{"properties.force_compat_mode", T::boolean, E::sluice_setting, P::bool_value,
              CUFILE_PARAM_FORCE_COMPAT_MODE, "path",
              "true: all device memory through Sluice's compat mode"},
    CufileKey{"properties.prefer_iouring", T::boolean, E::sluice_setting, P::bool_value,
              CUFILE_PARAM_PREFER_IO_URING, "engine", "true: io_uring"},
    CufileKey{"properties.force_odirect_mode", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_FORCE_ODIRECT_MODE, "",
              "Sluice uses O_DIRECT wherever the file system has it (direct_io)"},
    CufileKey{"properties.allow_system_memory", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY, "",
              "host memory always takes Sluice's host path"},
    CufileKey{"properties.posix_io_mode", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE, "",
              "Sluice chooses its path per request (SLUICE_PATH=posix forces its POSIX path)"},
    CufileKey{"properties.gds_fallback_io", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_GDS_FALLBACK_IO, "",
              "Sluice's fallback is its bounce path, governed by allow_compat_mode"},
    CufileKey{"properties.use_pci_p2pdma", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_USE_PCIP2PDMA, "",
              "NVIDIA's library chooses its own P2P mode where Sluice's direct path uses it"},
    CufileKey{"properties.posix_pool_slab_size_kb", T::counts, E::kept, P::posix_slabs, 0, "",
              "Sluice's host staging pool is staging_buffers x io_size"},
    CufileKey{"properties.posix_pool_slab_count", T::counts, E::kept, P::posix_slabs, 1, "",
              "Sluice's host staging pool is staging_buffers x io_size"},
    CufileKey{"properties.gds_rdma_write_support", T::any, E::no_effect, P::none, 0, "", kNoRdma},
    CufileKey{"properties.rdma_", T::any, E::no_effect, P::none, 0, "", kNoRdma},
    CufileKey{"properties.io_priority", T::any, E::no_effect, P::none, 0, "",
              "the priority of cuFile's internal CUDA streams; Sluice's copies use its own"},
    CufileKey{"miscellaneous.api_check_aggressive", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE, "",
              "libsluice_cufile checks every call's arguments"},
    CufileKey{"miscellaneous.enable_static_routing", T::any, E::no_effect, P::none, 0, "",
              "Sluice detects no PCIe routes for GDS"},
    CufileKey{"miscellaneous.static_routing_filepath", T::any, E::no_effect, P::none, 0, "",
              "Sluice detects no PCIe routes for GDS"},
    CufileKey{"fs.", T::any, E::no_effect, P::none, 0, "", kNoNvfs},
    CufileKey{"block.", T::any, E::no_effect, P::none, 0, "", kNoNvfs},
    CufileKey{"denylist.", T::any, E::no_effect, P::none, 0, "",
              "the drivers, devices, mounts and file systems nvidia-fs must not serve; Sluice has "
              "no nvidia-fs"},
    CufileKey{"sparse.", T::any, E::no_effect, P::none, 0, "",
              "GDS's handling of sparse files over P2P"},
};

constexpr std::array kEnvKeys = {
    CufileKey{"CUFILE_LOGGING_LEVEL", T::text, E::sluice_setting, P::string_value,
              CUFILE_PARAM_LOGGING_LEVEL, "log_level",
              "NOTICE and ERROR: error, WARN: warn, INFO: info, DEBUG and TRACE: debug"},
    CufileKey{"CUFILE_LOGFILE_PATH", T::text, E::kept, P::string_value,
              CUFILE_PARAM_ENV_LOGFILE_PATH, "", kLogFile},
    CufileKey{"CUFILE_LOGFILE_MAX_SIZE_MB", T::any, E::no_effect, P::none, 0, "", kLogFile},
    CufileKey{"CUFILE_ALLOW_COMPAT_MODE", T::boolean, E::sluice_setting, P::bool_value,
              CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, "path",
              "false: no fallback, a request the direct path cannot serve fails with "
              "CU_FILE_IO_NOT_SUPPORTED"},
    CufileKey{"CUFILE_FORCE_COMPAT_MODE", T::boolean, E::sluice_setting, P::bool_value,
              CUFILE_PARAM_FORCE_COMPAT_MODE, "path",
              "true: all device memory through Sluice's compat mode"},
    CufileKey{"CUFILE_USE_PCIP2PDMA", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_USE_PCIP2PDMA, "",
              "NVIDIA's library chooses its own P2P mode where Sluice's direct path uses it"},
    CufileKey{"CUFILE_SKIP_TOPOLOGY_DETECTION", T::boolean, E::kept, P::bool_value,
              CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION, "",
              "Sluice detects no PCIe topology when it starts"},
    CufileKey{"CUFILE_RDMA_", T::any, E::no_effect, P::none, 0, "", kNoRdma},
};

}  // namespace

std::span<const CufileKey> cufile_json_keys() noexcept {
  return kJsonKeys;
}

std::span<const CufileKey> cufile_env_keys() noexcept {
  return kEnvKeys;
}

std::string_view to_string(CufileEffect e) noexcept {
  switch (e) {
    case E::sluice_setting:
      return "sluice_setting";
    case E::cufile_layer:
      return "cufile_layer";
    case E::kept:
      return "kept";
    case E::no_effect:
      return "no_effect";
    case E::unknown:
      return "unknown";
    case E::invalid:
      return "invalid";
    case E::overridden:
      return "overridden";
  }
  return "?";
}

}  // namespace sluice::internal
