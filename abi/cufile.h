/*
 * cufile.h: Sluice's cuFile C API header.
 *
 * Written for Sluice from the published cuFile API description (Sluice's reference notes,
 * cufile-and-gds.md section 1, and the struct lists of NVIDIA's cuda-python bindings for the
 * statistics types); it is not NVIDIA's file. It is meant to be ABI-compatible with
 * NVIDIA's cufile.h of CUDA 13.4 (GDS 1.19): the same type names, enum values, struct member order
 * and function signatures, so that a program built against either header runs on either library
 * (NVIDIA's libcufile.so.0 or Sluice's libsluice_cufile). Programs built against the headers of
 * CUDA 12.9 - 13.3 run too; only the statistics structs differ (13.4 grew CUfileStatsLevel1_t by
 * the readv/writev counters): docs/cufile.md, "Statistics layouts", says what Sluice does for each.
 *
 * It lives in abi/, a folder of its own: these types are the bottom of the house. libsluice's
 * cuFile loader and its error mapper use them, and capi/ builds libsluice_cufile on top. Where NVIDIA's API guide and its header
 * disagree, this file follows the header (ssize_t *bytes_read_p, unsigned nr,
 * void cuFileHandleDeregister(CUfileHandle_t), max_device_pinned_mem_size).
 *
 * Plain C (C99 or later) and C++. Without <cuda.h> on the include path, CUresult is declared as
 * int: CUDA declares it as an enum whose values all fit an int, which the Linux ABIs lay out and
 * pass exactly like an int, so CUfileError_t has the same size and layout either way. Define
 * SLUICE_CUFILE_NO_CUDA_H to skip <cuda.h> even where it exists, or SLUICE_CUFILE_HAVE_CUDA_TYPES
 * when CUresult and CUstream are already declared. Include <cuda.h> first (or not at all): a
 * <cuda.h> included after the int stand-in would redeclare CUresult.
 */
#ifndef SLUICE_CUFILE_H_
#define SLUICE_CUFILE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* abs() in IS_CUFILE_ERR / CUFILE_ERRSTR */
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* --- CUDA types: from <cuda.h> where it is available, else ABI-equivalent stand-ins. --- */
#if !defined(__cuda_cuda_h__) && !defined(SLUICE_CUFILE_NO_CUDA_H) && defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#endif
#endif
#if !defined(__cuda_cuda_h__) && !defined(SLUICE_CUFILE_HAVE_CUDA_TYPES)
#define SLUICE_CUFILE_HAVE_CUDA_TYPES 1
typedef int CUresult; /* an enum in <cuda.h>; same size, alignment and calling convention */
typedef struct CUstream_st *CUstream;
#endif

/* loff_t is only visible with _GNU_SOURCE/_DEFAULT_SOURCE; glibc's __loff_t is the same type
 * and always there, so strict -std=c11 users still compile. */
#if defined(__GLIBC__)
typedef __loff_t sluice_cufile_loff_t;
#else
typedef loff_t sluice_cufile_loff_t;
#endif

/* Strict C99 <time.h> has no struct timespec; declaring the tag keeps the batch API usable. */
struct timespec;

#ifdef __cplusplus
extern "C" {
#endif

/* ============================== errors (reference 1.1) ============================== */

#define CUFILEOP_BASE_ERR 5000

/* Control APIs return these in CUfileError_t.err; cuFileRead/cuFileWrite return their negation. */
typedef enum CUfileOpError {
  CU_FILE_SUCCESS = 0,
  CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
  CU_FILE_DRIVER_INVALID_PROPS = 5002,
  CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
  CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
  CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
  CU_FILE_DRIVER_CLOSING = 5006,
  CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
  CU_FILE_IO_NOT_SUPPORTED = 5008,
  CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
  CU_FILE_NVFS_DRIVER_ERROR = 5010,
  CU_FILE_CUDA_DRIVER_ERROR = 5011,
  CU_FILE_CUDA_POINTER_INVALID = 5012,
  CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
  CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
  CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
  CU_FILE_INVALID_MAPPING_SIZE = 5016,
  CU_FILE_INVALID_MAPPING_RANGE = 5017,
  CU_FILE_INVALID_FILE_TYPE = 5018,
  CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
  CU_FILE_DIO_NOT_SET = 5020,
  /* 5021 is unused */
  CU_FILE_INVALID_VALUE = 5022,
  CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
  CU_FILE_MEMORY_NOT_REGISTERED = 5024,
  CU_FILE_PERMISSION_DENIED = 5025,
  CU_FILE_DRIVER_ALREADY_OPEN = 5026,
  CU_FILE_HANDLE_NOT_REGISTERED = 5027,
  CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
  CU_FILE_DEVICE_NOT_FOUND = 5029,
  CU_FILE_INTERNAL_ERROR = 5030,
  CU_FILE_GETNEWFD_FAILED = 5031,
  /* 5032 is unused */
  CU_FILE_NVFS_SETUP_ERROR = 5033,
  CU_FILE_IO_DISABLED = 5034,
  CU_FILE_BATCH_SUBMIT_FAILED = 5035,
  CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
  CU_FILE_BATCH_FULL = 5037,
  CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
  CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
  CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR = 5040,
  CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR = 5041,
  CU_FILE_INTERNAL_BATCH_CANCEL_ERROR = 5042,
  CU_FILE_NOMEM_ERROR = 5043,
  CU_FILE_IO_ERROR = 5044,
  CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
  CU_FILE_HASH_OPR_ERROR = 5046,
  CU_FILE_INVALID_CONTEXT_ERROR = 5047,
  CU_FILE_NVFS_INTERNAL_DRIVER_ERROR = 5048,
  CU_FILE_BATCH_NOCOMPAT_ERROR = 5049,
  CU_FILE_IO_MAX_ERROR = 5050 /* sentinel, not returned */
} CUfileOpError;

typedef struct CUfileError {
  CUfileOpError err; /* CU_FILE_SUCCESS or the failure */
  CUresult cu_err;   /* the CUDA driver result when err == CU_FILE_CUDA_DRIVER_ERROR */
} CUfileError_t;

/* The text for a code (its absolute value): NVIDIA's texts, character for character (programs
 * and NVIDIA's own samples compare them; NVIDIA's header makes each by stringizing its tokens,
 * hence "nvidia - fs"). static inline, as in NVIDIA's header: a program that loads libcufile
 * with dlopen (KvikIO, DALI, cuda-python) links no cuFile library, so no helper of this header
 * may need a symbol from one. libsluice's loader keeps its own, more specific texts
 * (src/gpu/cufile_api.cpp) for Sluice's reasons and errors. */
/* clang-format off: one line a code reads as a table */
static inline const char *cufileop_status_error(CUfileOpError status) {
  switch (status) {
    case CU_FILE_SUCCESS: return "cufile success";
    case CU_FILE_DRIVER_NOT_INITIALIZED:
      return "nvidia - fs driver is not loaded.Set allow_compat_mode to true in cufile.json file to enable compatible mode";
    case CU_FILE_DRIVER_INVALID_PROPS: return "invalid property";
    case CU_FILE_DRIVER_UNSUPPORTED_LIMIT: return "property range error";
    case CU_FILE_DRIVER_VERSION_MISMATCH: return "nvidia - fs driver version mismatch";
    case CU_FILE_DRIVER_VERSION_READ_ERROR: return "nvidia - fs driver version read error";
    case CU_FILE_DRIVER_CLOSING: return "driver shutdown in progress";
    case CU_FILE_PLATFORM_NOT_SUPPORTED:
      return "GPUDirect Storage not supported on current platform";
    case CU_FILE_IO_NOT_SUPPORTED: return "GPUDirect Storage not supported on current file";
    case CU_FILE_DEVICE_NOT_SUPPORTED: return "GPUDirect Storage not supported on current GPU";
    case CU_FILE_NVFS_DRIVER_ERROR: return "nvidia - fs driver ioctl error";
    case CU_FILE_CUDA_DRIVER_ERROR: return "CUDA Driver API error";
    case CU_FILE_CUDA_POINTER_INVALID: return "invalid device pointer";
    case CU_FILE_CUDA_MEMORY_TYPE_INVALID: return "invalid pointer memory type";
    case CU_FILE_CUDA_POINTER_RANGE_ERROR: return "pointer range exceeds allocated address range";
    case CU_FILE_CUDA_CONTEXT_MISMATCH: return "cuda context mismatch";
    case CU_FILE_INVALID_MAPPING_SIZE: return "access beyond maximum pinned size";
    case CU_FILE_INVALID_MAPPING_RANGE: return "access beyond mapped size";
    case CU_FILE_INVALID_FILE_TYPE: return "unsupported file type";
    case CU_FILE_INVALID_FILE_OPEN_FLAG: return "unsupported file open flags";
    case CU_FILE_DIO_NOT_SET: return "fd direct IO not set";
    case CU_FILE_INVALID_VALUE: return "invalid arguments";
    case CU_FILE_MEMORY_ALREADY_REGISTERED: return "device pointer already registered";
    case CU_FILE_MEMORY_NOT_REGISTERED: return "device pointer lookup failure";
    case CU_FILE_PERMISSION_DENIED: return "driver or file access error";
    case CU_FILE_DRIVER_ALREADY_OPEN: return "driver is already open";
    case CU_FILE_HANDLE_NOT_REGISTERED: return "file descriptor is not registered";
    case CU_FILE_HANDLE_ALREADY_REGISTERED: return "file descriptor is already registered";
    case CU_FILE_DEVICE_NOT_FOUND: return "GPU device not found";
    case CU_FILE_INTERNAL_ERROR: return "internal error";
    case CU_FILE_GETNEWFD_FAILED: return "failed to obtain new file descriptor";
    case CU_FILE_NVFS_SETUP_ERROR: return "NVFS driver initialization error";
    case CU_FILE_IO_DISABLED: return "GPUDirect Storage disabled by config on current file";
    case CU_FILE_BATCH_SUBMIT_FAILED: return "failed to submit batch operation";
    case CU_FILE_GPU_MEMORY_PINNING_FAILED: return "Failed to allocate pinned GPU Memory";
    case CU_FILE_BATCH_FULL: return "queue full for batch operation";
    case CU_FILE_ASYNC_NOT_SUPPORTED: return "cuFile stream operation not supported";
    case CU_FILE_INTERNAL_BATCH_SETUP_ERROR: return "batch setup internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR: return "batch submit internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR:
      return "batch get status internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_CANCEL_ERROR: return "batch cancel internal error - retry later";
    case CU_FILE_NOMEM_ERROR: return "cufile no memory error - retry later";
    case CU_FILE_IO_ERROR: return "cufile io error";
    case CU_FILE_INTERNAL_BUF_REGISTER_ERROR: return "cufile buf registration error";
    case CU_FILE_HASH_OPR_ERROR: return "cufile hash operation error";
    case CU_FILE_INVALID_CONTEXT_ERROR: return "cufile invalid context error";
    case CU_FILE_NVFS_INTERNAL_DRIVER_ERROR: return "nvfs internal driver error";
    case CU_FILE_BATCH_NOCOMPAT_ERROR: return "compat mode off error";
    case CU_FILE_IO_MAX_ERROR: return "GPUDirect Storage Max Error";
    default: return "unknown cufile error";
  }
}
/* clang-format on */

/* `err` may be a CUfileOpError or a negative cuFileRead/cuFileWrite result. The int cast is the
 * conversion abs() makes anyway in NVIDIA's form of these macros; spelled out, -Wextra does not
 * warn about an ssize_t argument or an enum whose values are all positive. */
#define IS_CUFILE_ERR(err) (abs((int)(err)) > CUFILEOP_BASE_ERR)
#define CUFILE_ERRSTR(err) cufileop_status_error((CUfileOpError)abs((int)(err)))
#define IS_CUDA_ERR(status) ((status).err == CU_FILE_CUDA_DRIVER_ERROR)
#define CU_FILE_CUDA_ERR(status) ((status).cu_err)

/* ============================== driver (reference 1.2) ============================== */

/* Bit numbers in CUfileDrvProps_t.nvfs.dstatusflags: which file systems / transports GDS serves. */
typedef enum CUfileDriverStatusFlags {
  CU_FILE_LUSTRE_SUPPORTED = 0,
  CU_FILE_WEKAFS_SUPPORTED = 1,
  CU_FILE_NFS_SUPPORTED = 2,
  CU_FILE_GPFS_SUPPORTED = 3,
  CU_FILE_NVME_SUPPORTED = 4,
  CU_FILE_NVMEOF_SUPPORTED = 5,
  CU_FILE_SCSI_SUPPORTED = 6,
  CU_FILE_SCALEFLUX_CSD_SUPPORTED = 7,
  CU_FILE_NVMESH_SUPPORTED = 8,
  CU_FILE_BEEGFS_SUPPORTED = 9,
  /* 10 is reserved (YRCloudFile) */
  CU_FILE_NVME_P2P_SUPPORTED = 11, /* deprecated */
  CU_FILE_SCATEFS_SUPPORTED = 12,
  CU_FILE_VIRTIOFS_SUPPORTED = 13,
  CU_FILE_MAX_TARGET_TYPES = 14 /* GDS 1.16: one past the last file system */
} CUfileDriverStatusFlags_t;

/* Bit numbers in CUfileDrvProps_t.nvfs.dcontrolflags. */
typedef enum CUfileDriverControlFlags {
  CU_FILE_USE_POLL_MODE = 0,
  CU_FILE_ALLOW_COMPAT_MODE = 1,
  CU_FILE_POSIX_IO_MODE = 2,         /* properties.posix_io_mode: plain POSIX I/O */
  CU_FILE_VANILLA_POSIX_IO_MODE = 2, /* CUDA 13.4's name for the same bit */
  CU_FILE_FALLBACK_IO_MODE = 4       /* properties.gds_fallback_io */
} CUfileDriverControlFlags_t;

/* Bit numbers in CUfileDrvProps_t.fflags. */
typedef enum CUfileFeatureFlags {
  CU_FILE_DYN_ROUTING_SUPPORTED = 0,
  CU_FILE_BATCH_IO_SUPPORTED = 1,
  CU_FILE_STREAMS_SUPPORTED = 2,
  CU_FILE_PARALLEL_IO_SUPPORTED = 3,
  CU_FILE_P2P_SUPPORTED = 4
} CUfileFeatureFlags_t;

/* Bit numbers for cuFileDriverSetP2PFlags / cuFileDriverGetP2PFlags (GDS 1.16). */
typedef enum CUfileP2PFlags {
  CUFILE_P2PDMA = 0,
  CUFILE_NVFS = 1,
  CUFILE_DMABUF = 2,
  CUFILE_C2C = 3,
  CUFILE_NVIDIA_PEERMEM = 4
} CUfileP2PFlags_t;

/* The masks cuFileDriverSetP2PFlags / cuFileDriverGetP2PFlags take and give (GDS 1.16). */
#define CU_FILE_P2P_FLAG_PCI_P2PDMA ((CUfileP2PFlags_t)(1 << CUFILE_P2PDMA))
#define CU_FILE_P2P_FLAG_NVFS ((CUfileP2PFlags_t)(1 << CUFILE_NVFS))
#define CU_FILE_P2P_FLAG_DMABUF ((CUfileP2PFlags_t)(1 << CUFILE_DMABUF))
#define CU_FILE_P2P_FLAG_C2C ((CUfileP2PFlags_t)(1 << CUFILE_C2C))

typedef struct CUfileDrvProps {
  struct {
    unsigned int major_version;
    unsigned int minor_version;
    size_t poll_thresh_size;   /* KiB */
    size_t max_direct_io_size; /* KiB */
    unsigned int dstatusflags;  /* bits: CUfileDriverStatusFlags_t */
    unsigned int dcontrolflags; /* bits: CUfileDriverControlFlags_t */
  } nvfs;
  unsigned int fflags; /* bits: CUfileFeatureFlags_t */
  unsigned int max_device_cache_size;
  unsigned int per_buffer_cache_size;
  unsigned int max_device_pinned_mem_size;
  unsigned int max_batch_io_size;
  unsigned int max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

/* Configuration parameters (GDS 1.14+); set them before cuFileDriverOpen. Order fixes values. */
typedef enum CUFileSizeTConfigParameter_t {
  CUFILE_PARAM_PROFILE_STATS,
  CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
  CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
  CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
  CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
  CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB,
  CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB,
  CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB,
  CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
  CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE,
  CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB,
  CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS
} CUFileSizeTConfigParameter_t;

typedef enum CUFileBoolConfigParameter_t {
  CUFILE_PARAM_PROPERTIES_USE_POLL_MODE,
  CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
  CUFILE_PARAM_FORCE_COMPAT_MODE,
  CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE,
  CUFILE_PARAM_EXECUTION_PARALLEL_IO,
  CUFILE_PARAM_PROFILE_NVTX, /* deprecated */
  CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY,
  CUFILE_PARAM_USE_PCIP2PDMA,
  CUFILE_PARAM_PREFER_IO_URING,
  CUFILE_PARAM_FORCE_ODIRECT_MODE,
  CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION,
  CUFILE_PARAM_STREAM_MEMOPS_BYPASS,
  CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE, /* CUDA 13.4 */
  CUFILE_PARAM_GDS_FALLBACK_IO           /* CUDA 13.4 */
} CUFileBoolConfigParameter_t;

typedef enum CUFileStringConfigParameter_t {
  CUFILE_PARAM_LOGGING_LEVEL,
  CUFILE_PARAM_ENV_LOGFILE_PATH,
  CUFILE_PARAM_LOG_DIR,
  CUFILE_PARAM_RDMA_TRANSPORT /* CUDA 13.4 */
} CUFileStringConfigParameter_t;

typedef enum CUFileArrayConfigParameter_t {
  CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB,
  CUFILE_PARAM_POSIX_POOL_SLAB_COUNT,
  CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB, /* GDS 1.17 */
  CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT
} CUFileArrayConfigParameter_t;

/* Statistics (GDS 1.15+), read with cuFileGetStatsL1/L2/L3 after cuFileSetStatsLevel. */
typedef struct CUfileOpCounter {
  uint64_t ok;
  uint64_t err;
} CUfileOpCounter_t;

#define CUFILE_GPU_UUID_LEN 16
#define SLUICE_CUFILE_GPU_UUID_LEN CUFILE_GPU_UUID_LEN /* Sluice's earlier name */
#define SLUICE_CUFILE_MAX_GPUS 16
#define SLUICE_CUFILE_SIZE_HIST_BUCKETS 32

typedef struct CUfileStatsLevel1 {
  CUfileOpCounter_t read_ops, write_ops;
  CUfileOpCounter_t hdl_register_ops, hdl_deregister_ops;
  CUfileOpCounter_t buf_register_ops, buf_deregister_ops;
  uint64_t read_bytes, write_bytes;
  uint64_t read_bw_bytes_per_sec, write_bw_bytes_per_sec;
  uint64_t read_lat_avg_us, write_lat_avg_us;
  uint64_t read_ops_per_sec, write_ops_per_sec;
  uint64_t read_lat_sum_us, write_lat_sum_us;
  CUfileOpCounter_t batch_submit_ops, batch_complete_ops, batch_setup_ops, batch_cancel_ops;
  CUfileOpCounter_t batch_destroy_ops, batch_enqueued_ops, batch_posix_enqueued_ops;
  CUfileOpCounter_t batch_processed_ops, batch_posix_processed_ops, batch_nvfs_submit_ops;
  CUfileOpCounter_t batch_p2p_submit_ops, batch_aio_submit_ops, batch_iouring_submit_ops;
  CUfileOpCounter_t batch_mixed_io_submit_ops, batch_total_submit_ops;
  uint64_t batch_read_bytes, batch_write_bytes;
  uint64_t batch_read_bw_bytes, batch_write_bw_bytes;
  uint64_t batch_submit_lat_avg_us, batch_completion_lat_avg_us;
  uint64_t batch_submit_ops_per_sec, batch_complete_ops_per_sec;
  uint64_t batch_submit_lat_sum_us, batch_completion_lat_sum_us;
  uint64_t last_batch_read_bytes, last_batch_write_bytes;
  /* CUDA 13.4: the vectored calls, counted apart from read/write above (624 bytes in all; the
   * struct ended here, at 512 bytes, in CUDA 12.9 - 13.3). */
  CUfileOpCounter_t readv_ops, writev_ops;
  uint64_t readv_bytes, writev_bytes;
  uint64_t readv_bw_bytes_per_sec, writev_bw_bytes_per_sec;
  uint64_t readv_lat_avg_us, writev_lat_avg_us;
  uint64_t readv_ops_per_sec, writev_ops_per_sec;
  uint64_t readv_lat_sum_us, writev_lat_sum_us;
} CUfileStatsLevel1_t;

typedef struct CUfileStatsLevel2 {
  CUfileStatsLevel1_t basic;
  uint64_t read_size_kb_hist[SLUICE_CUFILE_SIZE_HIST_BUCKETS];
  uint64_t write_size_kb_hist[SLUICE_CUFILE_SIZE_HIST_BUCKETS];
} CUfileStatsLevel2_t;

typedef struct CUfilePerGpuStats {
  char uuid[SLUICE_CUFILE_GPU_UUID_LEN];
  uint64_t read_bytes, read_bw_bytes_per_sec, read_utilization, read_duration_us;
  uint64_t n_total_reads, n_p2p_reads, n_nvfs_reads, n_posix_reads, n_unaligned_reads;
  uint64_t n_dr_reads, n_sparse_regions, n_inline_regions, n_reads_err;
  uint64_t writes_bytes, write_bw_bytes_per_sec, write_utilization, write_duration_us;
  uint64_t n_total_writes, n_p2p_writes, n_nvfs_writes, n_posix_writes, n_unaligned_writes;
  uint64_t n_dr_writes, n_writes_err;
  uint64_t n_mmap, n_mmap_ok, n_mmap_err, n_mmap_free;
  uint64_t reg_bytes;
} CUfilePerGpuStats_t;

typedef struct CUfileStatsLevel3 {
  CUfileStatsLevel2_t detailed;
  uint32_t num_gpus;
  CUfilePerGpuStats_t per_gpu_stats[SLUICE_CUFILE_MAX_GPUS];
} CUfileStatsLevel3_t;

/* cuFileDriverOpen is optional (the first handle/buffer/IO call opens the driver); it succeeds
 * when already open. cuFileDriverClose is a macro, as in NVIDIA's header, so that callers bind
 * to the _v2 symbol. */
CUfileError_t cuFileDriverOpen(void);
CUfileError_t cuFileDriverClose_v2(void);
#define cuFileDriverClose cuFileDriverClose_v2
long cuFileUseCount(void);
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props);
CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size);
CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size);
CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size);
CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size);
/* 1000 * major + 10 * minor, e.g. 1140 for 1.14. */
CUfileError_t cuFileGetVersion(int *version);

CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value);
CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value);
CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param, const char *desc_str);
CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value);
CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value);
CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str,
                                       int len);
CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t *min_value,
                                            size_t *max_value);
CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values,
                                                   const size_t *count_values, int len);
CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t *count_values,
                                                   int len);
/* GDS 1.17: the GPU bounce buffers as slabs of sizes (KiB) and counts; before cuFileDriverOpen. */
CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t *size_values,
                                                         const size_t *count_values, int len);
CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t *size_values,
                                                         size_t *count_values, int len);
CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize);
CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                      CUfileP2PFlags_t p2p_flags);
CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                      CUfileP2PFlags_t *p2p_flags);

CUfileError_t cuFileSetStatsLevel(int level); /* 0 (off) .. 3 */
CUfileError_t cuFileGetStatsLevel(int *level);
CUfileError_t cuFileStatsStart(void);
CUfileError_t cuFileStatsStop(void);
CUfileError_t cuFileStatsReset(void);
CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t *stats);
CUfileError_t cuFileGetStatsL2(CUfileStatsLevel2_t *stats);
CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t *stats);

/* ======================== file handle registration (reference 1.3) ======================== */

typedef enum CUfileFileHandleType {
  CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,    /* a Linux file descriptor */
  CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2, /* not supported on Linux */
  CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3  /* a user-space file system with CUfileFSOps_t */
} CUfileFileHandleType;

typedef struct sockaddr sockaddr_t;

typedef struct cufileRDMAInfo {
  int version;
  int desc_len;
  const char *desc_str;
} cufileRDMAInfo_t;

/* Operations of a user-space file system; a NULL member selects the default behaviour. */
typedef struct CUfileFSOps {
  const char *(*fs_type)(const void *handle); /* NULL: discovered with fstat */
  int (*getRDMADeviceList)(const void *handle, sockaddr_t **hostaddrs);
  int (*getRDMADevicePriority)(const void *handle, char *, size_t, sluice_cufile_loff_t,
                               const sockaddr_t *hostaddr);
  ssize_t (*read)(const void *handle, char *, size_t, sluice_cufile_loff_t,
                  const cufileRDMAInfo_t *); /* NULL: through the VFS */
  ssize_t (*write)(const void *handle, const char *, size_t, sluice_cufile_loff_t,
                   const cufileRDMAInfo_t *);
} CUfileFSOps_t;

typedef struct CUfileDescr_t {
  CUfileFileHandleType type;
  union {
    int fd;       /* CU_FILE_HANDLE_TYPE_OPAQUE_FD */
    void *handle; /* CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 / USERSPACE_FS */
  } handle;
  const CUfileFSOps_t *fs_ops;
} CUfileDescr_t;

typedef void *CUfileHandle_t;

/* cuFileBufRegister flags: RDMA_REGISTER is legacy; RELAXED_ORDERING asks for relaxed PCIe
 * ordering on the buffer's RDMA registration. */
#define CU_FILE_RDMA_REGISTER 1
#define CU_FILE_RDMA_RELAXED_ORDERING (1 << 1)

CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
/* Only with no IO outstanding on fh; the caller still closes the fd. */
void cuFileHandleDeregister(CUfileHandle_t fh);

/* ========================== buffer registration (reference 1.4) ========================== */

/* IO on a registered buffer must pass the same base pointer plus a bufPtr_offset. */
CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags);
CUfileError_t cuFileBufDeregister(const void *bufPtr_base);

/* ============================ synchronous IO (reference 1.5) ============================ */

/* Bytes transferred (short at end of file), or -1 with errno set, or -CUfileOpError. */
ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset,
                   off_t bufPtr_offset);
ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset,
                    off_t bufPtr_offset);

/* ======================== vectored IO (CUDA 13.4, GDS 1.19) ======================== */

typedef struct CUfileIOVec {
  void *base; /* device or host memory */
  size_t len;
} CUfileIOVec_t;

/* One contiguous file range from (or to) iovcnt buffers, in order: bytes transferred (short only
 * at end of file), or -1 with errno set, or -CUfileOpError, as cuFileRead/cuFileWrite. flags is
 * reserved: pass 0. */
ssize_t cuFileReadv(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
                    unsigned flags);
ssize_t cuFileWritev(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt,
                     off_t file_offset, unsigned flags);

/* ================================ batch IO (reference 1.6) ================================ */

typedef enum CUfileOpcode { CUFILE_READ = 0, CUFILE_WRITE } CUfileOpcode_t;

typedef enum CUFILEStatus_enum {
  CUFILE_WAITING = 0x01,
  CUFILE_PENDING = 0x02,
  CUFILE_INVALID = 0x04,
  CUFILE_CANCELED = 0x08,
  CUFILE_COMPLETE = 0x10,
  CUFILE_TIMEOUT = 0x20,
  CUFILE_FAILED = 0x40
} CUfileStatus_t;

typedef enum cufileBatchMode { CUFILE_BATCH = 1 } CUfileBatchMode_t;

typedef struct CUfileIOParams {
  CUfileBatchMode_t mode; /* must stay the first member */
  union {
    struct {
      void *devPtr_base;
      off_t file_offset;
      off_t devPtr_offset;
      size_t size;
    } batch;
  } u;
  CUfileHandle_t fh;
  CUfileOpcode_t opcode;
  void *cookie;
} CUfileIOParams_t;

typedef struct CUfileIOEvents {
  void *cookie;
  CUfileStatus_t status;
  size_t ret; /* bytes, or a negative error stored in a size_t; valid when CUFILE_COMPLETE */
} CUfileIOEvents_t;

typedef void *CUfileBatchHandle_t;

CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr);
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr,
                                  CUfileIOParams_t *iocbp, unsigned int flags);
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr,
                                     unsigned *nr, CUfileIOEvents_t *iocbp,
                                     struct timespec *timeout);
CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp);
void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp);

/* ============================= stream IO (reference 1.7) ============================= */

/* cuFileStreamRegister flags: which arguments are final at submission time. */
#define CU_FILE_STREAM_FIXED_BUF_OFFSET 1
#define CU_FILE_STREAM_FIXED_FILE_OFFSET 2
#define CU_FILE_STREAM_FIXED_FILE_SIZE 4
#define CU_FILE_STREAM_PAGE_ALIGNED_INPUTS 8

CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags);
CUfileError_t cuFileStreamDeregister(CUstream stream);
/* Arguments are read when the operation executes in stream order; *bytes_read_p must be
 * host-visible and ends as bytes / -1 / -CUfileOpError. */
CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
                              off_t *file_offset_p, off_t *bufPtr_offset_p, ssize_t *bytes_read_p,
                              CUstream stream);
CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
                               off_t *file_offset_p, off_t *bufPtr_offset_p,
                               ssize_t *bytes_written_p, CUstream stream);

/* ============================== topology (GDS 1.17) ============================== */

/* Writes the PCIe topology (the GPUs and NVMe controllers with their PCI functions, NUMA nodes
 * and root ports) as JSON to `filename`. NVIDIA's library writes the file its static routing
 * reads (miscellaneous.static_routing_filepath); Sluice's JSON is its own (docs/cufile.md). */
CUfileError_t cuFileExportPCIeTopology(const char *filename);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CUFILE_H_ */
