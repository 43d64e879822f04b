/* Two of NVIDIA's GDS samples' call sequences and assertions, as C (the samples are C++ and use a
 * helper library of their own; the cuFile calls, their order and what they assert are theirs):
 *
 *   007                   cufile_sample_007: open, then SetPollMode, SetMaxPinnedMemSize(512),
 *                         SetMaxDirectIOSize(64) and SetMaxCacheSize(64) on the open driver; each
 *                         must succeed (the sample exits on the first failure).
 *   error_and_properties  1_cuFile_Basics/error_and_properties: NVIDIA's error texts, then poll
 *                         mode, a 512 KiB pinned limit and GPU bounce-buffer slabs of 4/16/64 KiB
 *                         (4, 2 and 1 of them) before the open; the properties must show poll
 *                         mode, the threshold, the limit, the largest slab as the direct I/O size
 *                         and the slabs' sum as the cache.
 *
 * usage: nvidia_samples 007|error_and_properties */
#include <stdio.h>
#include <string.h>

#include "c_check.h"
#include "cufile.h"

static void sample_007(void) {
  CUfileDrvProps_t props;
  OK(cuFileDriverOpen());
  OK(cuFileDriverGetProperties(&props));
  OK(cuFileDriverSetPollMode(true, 32768));
  OK(cuFileDriverSetMaxPinnedMemSize(512));
  OK(cuFileDriverSetMaxDirectIOSize(64));
  OK(cuFileDriverSetMaxCacheSize(64));
  OK(cuFileDriverGetProperties(&props));
  OK(cuFileDriverClose());
}

static void error_and_properties(void) {
  CHECK(strcmp(cufileop_status_error(CU_FILE_PLATFORM_NOT_SUPPORTED),
               "GPUDirect Storage not supported on current platform") == 0);
  CHECK(strcmp(cufileop_status_error(CU_FILE_INVALID_VALUE), "invalid arguments") == 0);
  CHECK(strcmp(CUFILE_ERRSTR(-CU_FILE_INVALID_FILE_TYPE), "unsupported file type") == 0);
  const size_t sizes[3] = {4, 16, 64}, counts[3] = {4, 2, 1};
  OK(cuFileDriverSetPollMode(true, 32768));
  OK(cuFileDriverSetMaxPinnedMemSize(512));
  OK(cuFileSetParameterGpuBounceBufferSlabArray(sizes, counts, 3));
  OK(cuFileDriverOpen());
  CUfileDrvProps_t props;
  memset(&props, 0, sizeof props);
  OK(cuFileDriverGetProperties(&props));
  CHECK((props.nvfs.dcontrolflags & (1U << CU_FILE_USE_POLL_MODE)) != 0);
  CHECK(props.nvfs.poll_thresh_size == 32768);
  CHECK(props.max_device_pinned_mem_size == 512);
  CHECK(props.nvfs.max_direct_io_size == 64);                /* the largest slab */
  CHECK(props.max_device_cache_size == 4 * 4 + 16 * 2 + 64); /* the slabs' sum: 112 KiB */
  OK(cuFileDriverClose());
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s 007|error_and_properties\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "007") == 0) {
    sample_007();
  } else if (strcmp(argv[1], "error_and_properties") == 0) {
    error_and_properties();
  } else {
    fprintf(stderr, "unknown sample %s\n", argv[1]);
    return 2;
  }
  if (failures == 0) printf("NVIDIA's sample %s passed\n", argv[1]);
  return failures == 0 ? 0 : 1;
}
