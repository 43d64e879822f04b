/* Compile-time check of abi/cufile.h: it builds as strict C11 and as C++ (header_cxx_test.cpp
 * includes this file), with and without <cuda.h>, and its layouts and values are the ones
 * NVIDIA's cufile.h has on LP64 Linux, so either header's programs run on either library. */
#include "cufile.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__LP64__)
/* Layouts are pinned for LP64 (x86_64, aarch64), the only targets libcufile ships for. */
static_assert(sizeof(CUresult) == sizeof(int), "CUresult is int-sized in both headers");
static_assert(sizeof(CUfileOpError) == 4, "enums are int-sized");
static_assert(sizeof(CUfileError_t) == 8, "CUfileError_t: {err, cu_err}");
static_assert(offsetof(CUfileError_t, cu_err) == 4, "cu_err follows err");

static_assert(offsetof(CUfileDrvProps_t, nvfs.poll_thresh_size) == 8, "");
static_assert(offsetof(CUfileDrvProps_t, nvfs.dstatusflags) == 24, "");
static_assert(offsetof(CUfileDrvProps_t, fflags) == 32, "fflags follows the nvfs block");
static_assert(offsetof(CUfileDrvProps_t, max_batch_io_timeout_msecs) == 52, "");
static_assert(sizeof(CUfileDrvProps_t) == 56, "");

static_assert(offsetof(CUfileDescr_t, handle) == 8, "the fd/handle union is pointer-aligned");
static_assert(offsetof(CUfileDescr_t, fs_ops) == 16, "");
static_assert(sizeof(CUfileDescr_t) == 24, "");
static_assert(sizeof(CUfileFSOps_t) == 5 * sizeof(void *), "five function pointers");
static_assert(sizeof(cufileRDMAInfo_t) == 16, "");

static_assert(offsetof(CUfileIOParams_t, mode) == 0, "mode must be first");
static_assert(offsetof(CUfileIOParams_t, u) == 8, "u follows mode, pointer-aligned");
static_assert(offsetof(CUfileIOParams_t, u.batch.file_offset) == 16, "");
static_assert(offsetof(CUfileIOParams_t, u.batch.size) == 32, "");
static_assert(offsetof(CUfileIOParams_t, fh) == 40, "");
static_assert(offsetof(CUfileIOParams_t, opcode) == 48, "");
static_assert(offsetof(CUfileIOParams_t, cookie) == 56, "");
static_assert(sizeof(CUfileIOParams_t) == 64, "");
static_assert(offsetof(CUfileIOEvents_t, status) == 8, "");
static_assert(offsetof(CUfileIOEvents_t, ret) == 16, "");
static_assert(sizeof(CUfileIOEvents_t) == 24, "");

/* CUDA 13.4's statistics layouts (cuda-python#2794): L1 grew from 512 to 624 bytes by the
 * readv/writev counters at its end; L2 and L3 embed it first and shift with it. */
static_assert(sizeof(CUfileStatsLevel1_t) == 23 * 16 + 32 * 8, "23 op counters, 32 uint64s");
static_assert(sizeof(CUfileStatsLevel1_t) == 624, "CUDA 13.4");
static_assert(offsetof(CUfileStatsLevel1_t, last_batch_write_bytes) == 504, "the 13.3 end");
static_assert(offsetof(CUfileStatsLevel1_t, readv_ops) == 512, "13.4: appended after 13.3's");
static_assert(offsetof(CUfileStatsLevel1_t, writev_ops) == 528, "");
static_assert(offsetof(CUfileStatsLevel1_t, readv_bytes) == 544, "");
static_assert(offsetof(CUfileStatsLevel1_t, writev_lat_sum_us) == 616, "");
static_assert(sizeof(CUfilePerGpuStats_t) == 16 + 29 * 8, "uuid + 29 uint64s");
static_assert(sizeof(CUfileStatsLevel2_t) == 1136, "624 + 2 histograms of 32 buckets");
static_assert(offsetof(CUfileStatsLevel2_t, read_size_kb_hist) == 624, "");
static_assert(offsetof(CUfileStatsLevel3_t, num_gpus) == 1136, "");
static_assert(offsetof(CUfileStatsLevel3_t, per_gpu_stats) == sizeof(CUfileStatsLevel2_t) + 8,
              "num_gpus is padded to the uint64 alignment of the per-GPU array");
static_assert(sizeof(CUfileStatsLevel3_t) == 5112, "1144 + 16 GPUs of 248 bytes");
static_assert(sizeof(CUfileIOVec_t) == 16 && offsetof(CUfileIOVec_t, len) == 8, "{base, len}");
#endif

/* Every CUfileOpError value of the reference table. */
static_assert(CU_FILE_SUCCESS == 0 && CUFILEOP_BASE_ERR == 5000, "");
static_assert(CU_FILE_DRIVER_NOT_INITIALIZED == 5001 && CU_FILE_DRIVER_INVALID_PROPS == 5002, "");
static_assert(CU_FILE_DRIVER_UNSUPPORTED_LIMIT == 5003, "");
static_assert(CU_FILE_DRIVER_VERSION_MISMATCH == 5004, "");
static_assert(CU_FILE_DRIVER_VERSION_READ_ERROR == 5005 && CU_FILE_DRIVER_CLOSING == 5006, "");
static_assert(CU_FILE_PLATFORM_NOT_SUPPORTED == 5007 && CU_FILE_IO_NOT_SUPPORTED == 5008, "");
static_assert(CU_FILE_DEVICE_NOT_SUPPORTED == 5009 && CU_FILE_NVFS_DRIVER_ERROR == 5010, "");
static_assert(CU_FILE_CUDA_DRIVER_ERROR == 5011 && CU_FILE_CUDA_POINTER_INVALID == 5012, "");
static_assert(CU_FILE_CUDA_MEMORY_TYPE_INVALID == 5013, "");
static_assert(CU_FILE_CUDA_POINTER_RANGE_ERROR == 5014, "");
static_assert(CU_FILE_CUDA_CONTEXT_MISMATCH == 5015 && CU_FILE_INVALID_MAPPING_SIZE == 5016, "");
static_assert(CU_FILE_INVALID_MAPPING_RANGE == 5017 && CU_FILE_INVALID_FILE_TYPE == 5018, "");
static_assert(CU_FILE_INVALID_FILE_OPEN_FLAG == 5019 && CU_FILE_DIO_NOT_SET == 5020, "");
static_assert(CU_FILE_INVALID_VALUE == 5022 && CU_FILE_MEMORY_ALREADY_REGISTERED == 5023, "");
static_assert(CU_FILE_MEMORY_NOT_REGISTERED == 5024 && CU_FILE_PERMISSION_DENIED == 5025, "");
static_assert(CU_FILE_DRIVER_ALREADY_OPEN == 5026 && CU_FILE_HANDLE_NOT_REGISTERED == 5027, "");
static_assert(CU_FILE_HANDLE_ALREADY_REGISTERED == 5028 && CU_FILE_DEVICE_NOT_FOUND == 5029, "");
static_assert(CU_FILE_INTERNAL_ERROR == 5030 && CU_FILE_GETNEWFD_FAILED == 5031, "");
static_assert(CU_FILE_NVFS_SETUP_ERROR == 5033 && CU_FILE_IO_DISABLED == 5034, "");
static_assert(CU_FILE_BATCH_SUBMIT_FAILED == 5035 && CU_FILE_GPU_MEMORY_PINNING_FAILED == 5036, "");
static_assert(CU_FILE_BATCH_FULL == 5037 && CU_FILE_ASYNC_NOT_SUPPORTED == 5038, "");
static_assert(CU_FILE_INTERNAL_BATCH_SETUP_ERROR == 5039, "");
static_assert(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR == 5040, "");
static_assert(CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR == 5041, "");
static_assert(CU_FILE_INTERNAL_BATCH_CANCEL_ERROR == 5042, "");
static_assert(CU_FILE_NOMEM_ERROR == 5043 && CU_FILE_IO_ERROR == 5044, "");
static_assert(CU_FILE_INTERNAL_BUF_REGISTER_ERROR == 5045 && CU_FILE_HASH_OPR_ERROR == 5046, "");
static_assert(CU_FILE_INVALID_CONTEXT_ERROR == 5047, "");
static_assert(CU_FILE_NVFS_INTERNAL_DRIVER_ERROR == 5048, "");
static_assert(CU_FILE_BATCH_NOCOMPAT_ERROR == 5049 && CU_FILE_IO_MAX_ERROR == 5050, "");

/* The other enums whose values travel across the ABI. */
static_assert(CU_FILE_HANDLE_TYPE_OPAQUE_FD == 1 && CU_FILE_HANDLE_TYPE_USERSPACE_FS == 3, "");
static_assert(CUFILE_READ == 0 && CUFILE_WRITE == 1 && CUFILE_BATCH == 1, "");
static_assert(CUFILE_WAITING == 1 && CUFILE_COMPLETE == 0x10 && CUFILE_FAILED == 0x40, "");
static_assert(CU_FILE_NVME_SUPPORTED == 4 && CU_FILE_NVME_P2P_SUPPORTED == 11, "");
static_assert(CU_FILE_VIRTIOFS_SUPPORTED == 13 && CU_FILE_ALLOW_COMPAT_MODE == 1, "");
static_assert(CU_FILE_PARALLEL_IO_SUPPORTED == 3 && CUFILE_NVIDIA_PEERMEM == 4, "");
static_assert(CU_FILE_MAX_TARGET_TYPES == 14, "GDS 1.16");
static_assert(CU_FILE_USE_POLL_MODE == 0 && CU_FILE_POSIX_IO_MODE == 2, "");
static_assert(CU_FILE_VANILLA_POSIX_IO_MODE == 2 && CU_FILE_FALLBACK_IO_MODE == 4, "");
static_assert(CU_FILE_DYN_ROUTING_SUPPORTED == 0 && CU_FILE_P2P_SUPPORTED == 4, "");
static_assert(CUFILE_P2PDMA == 0 && CUFILE_NVFS == 1 && CUFILE_DMABUF == 2 && CUFILE_C2C == 3, "");
static_assert(CU_FILE_P2P_FLAG_PCI_P2PDMA == 1 && CU_FILE_P2P_FLAG_NVFS == 2, "");
static_assert(CU_FILE_P2P_FLAG_DMABUF == 4 && CU_FILE_P2P_FLAG_C2C == 8, "");
static_assert(CU_FILE_RDMA_REGISTER == 1 && CU_FILE_RDMA_RELAXED_ORDERING == 2, "");
static_assert(CUFILE_GPU_UUID_LEN == 16, "GDS 1.15");
static_assert(CUFILE_PARAM_PROFILE_STATS == 0 && CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB == 10, "");
static_assert(CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS == 11, "12 size_t parameters");
static_assert(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE == 0 && CUFILE_PARAM_PROFILE_NVTX == 5, "");
static_assert(CUFILE_PARAM_STREAM_MEMOPS_BYPASS == 11, "");
static_assert(CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE == 12, "CUDA 13.4");
static_assert(CUFILE_PARAM_GDS_FALLBACK_IO == 13, "CUDA 13.4: 14 bool parameters");
static_assert(CUFILE_PARAM_LOG_DIR == 2 && CUFILE_PARAM_RDMA_TRANSPORT == 3, "13.4: 4 strings");
static_assert(CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB == 0 && CUFILE_PARAM_POSIX_POOL_SLAB_COUNT == 1,
              "");
static_assert(CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB == 2, "GDS 1.17");
static_assert(CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT == 3, "4 array parameters");
static_assert(CU_FILE_STREAM_FIXED_BUF_OFFSET == 1 && CU_FILE_STREAM_FIXED_FILE_OFFSET == 2, "");
static_assert(CU_FILE_STREAM_FIXED_FILE_SIZE == 4 && CU_FILE_STREAM_PAGE_ALIGNED_INPUTS == 8, "");

/* cuFileDriverClose must bind to the _v2 entry point, as NVIDIA's header makes it. */
#define SLUICE_STR2(x) #x
#define SLUICE_STR(x) SLUICE_STR2(x)

int main(void) {
  /* The error macros on the two kinds of result: a CUfileOpError and a negative ssize_t. */
  /* int, as NVIDIA's samples pass it: abs() of a ssize_t trips C's -Wabsolute-value. */
  int io_result = -(int)CU_FILE_IO_NOT_SUPPORTED;
  CUfileError_t st = {CU_FILE_CUDA_DRIVER_ERROR, (CUresult)700};
  int ok = IS_CUFILE_ERR(io_result) && !IS_CUFILE_ERR(-5) && IS_CUDA_ERR(st) &&
           CU_FILE_CUDA_ERR(st) == (CUresult)700;
  /* Unevaluated: checks CUFILE_ERRSTR compiles without needing the library at link time. */
  ok = ok && sizeof(CUFILE_ERRSTR(io_result)) == sizeof(const char *);
  const char *close_name = SLUICE_STR(cuFileDriverClose);
  ok = ok && close_name[sizeof("cuFileDriverClose") - 1] == '_';
  if (!ok) fprintf(stderr, "cufile.h error macros misbehave\n");
  /* NVIDIA's texts, which programs print and NVIDIA's samples compare. */
  const struct {
    CUfileOpError code;
    const char *text;
  } texts[] = {
      {CU_FILE_SUCCESS, "cufile success"},
      {CU_FILE_PLATFORM_NOT_SUPPORTED, "GPUDirect Storage not supported on current platform"},
      {CU_FILE_IO_NOT_SUPPORTED, "GPUDirect Storage not supported on current file"},
      {CU_FILE_INVALID_VALUE, "invalid arguments"},
      {CU_FILE_DRIVER_UNSUPPORTED_LIMIT, "property range error"},
      {CU_FILE_MEMORY_NOT_REGISTERED, "device pointer lookup failure"},
      {CU_FILE_BATCH_NOCOMPAT_ERROR, "compat mode off error"},
      {(CUfileOpError)5021, "unknown cufile error"},
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i) {
    const char *got = cufileop_status_error(texts[i].code);
    size_t n = 0;
    while (got[n] != '\0' && got[n] == texts[i].text[n]) ++n;
    if (got[n] != texts[i].text[n]) {
      fprintf(stderr, "cufileop_status_error(%d) = \"%s\", NVIDIA's is \"%s\"\n", (int)texts[i].code,
              got, texts[i].text);
      ok = 0;
    }
  }
  return ok ? 0 : 1;
}
