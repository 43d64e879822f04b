/* cuda-python's cuda.bindings.cufile, as a C program: every function it binds (its generated
 * cycufile.pxd for CUDA 12.9 - 13.4, readv/writev included), called in the order and with the
 * expectations of its own tests (cuda_bindings/tests/test_cufile.py): version, parameters and
 * slab arrays before the driver opens, the driver's properties and Set* calls, BAR size, handle
 * and buffer registration, read/write and readv/writev checked byte for byte, batch I/O, stream
 * I/O on the NULL stream, and the statistics of every level. Unchanged cuFile code: it needs
 * only the header and the library. The test harness points SLUICE_SYSFS at a folder where the
 * GPU's PCI function has a BAR1 of 256 MiB (cuda-python's test_get_bar_size_in_kb expects one).
 *
 * The same program runs on NVIDIA's libcufile (bench/cufile-parity.sh, on a GPU machine), so
 * every expectation here is one NVIDIA's library meets too.
 *
 * usage: cuda_python_sequence WORK_DIR */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_check.h"
#include "cufile.h"

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
}

static void parameters_before_open(void) {
  size_t v = 0, lo = 0, hi = 0;
  bool b = false;
  char s[64];
  OK(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 1024));
  OK(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &v));
  CHECK(v == 1024);
  OK(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &lo, &hi));
  CHECK(lo <= 1024 && 1024 <= hi);
  OK(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, true));
  OK(cuFileGetParameterBool(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, &b));
  CHECK(b);
  OK(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, false));
  OK(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "WARN"));
  OK(cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, s, (int)sizeof s));
  CHECK(strcmp(s, "WARN") == 0);
  const size_t sizes[3] = {4, 1024, 16384}, counts[3] = {256, 32, 8};
  size_t got_sizes[3] = {0}, got_counts[3] = {0};
  OK(cuFileSetParameterPosixPoolSlabArray(sizes, counts, 3));
  OK(cuFileGetParameterPosixPoolSlabArray(got_sizes, got_counts, 3));
  CHECK(memcmp(sizes, got_sizes, sizeof sizes) == 0 &&
        memcmp(counts, got_counts, sizeof counts) == 0);
}

static void driver(void) {
  CUfileDrvProps_t props;
  OK(cuFileDriverOpen());
  CHECK(cuFileUseCount() >= 1);
  OK(cuFileDriverGetProperties(&props));
  CHECK(props.nvfs.max_direct_io_size == 1024);
  CHECK(props.max_batch_io_size > 0);
  /* cuda-python's tests call the Set* calls with the driver open: they succeed (and, as NVIDIA
   * documents, change nothing then). */
  OK(cuFileDriverSetPollMode(true, 4));
  OK(cuFileDriverSetMaxDirectIOSize(2048));
  OK(cuFileDriverSetMaxCacheSize(props.max_device_cache_size));
  OK(cuFileDriverSetMaxPinnedMemSize(props.max_device_pinned_mem_size));
  size_t bar_kb = 0;
  OK(cuFileGetBARSizeInKB(0, &bar_kb));
  /* run-with-sysfs.sh's 256 MiB; on a real GPU (bench/cufile-parity.sh), whatever it has. */
  CHECK(getenv("SLUICE_SYSFS") != NULL ? bar_kb == 256 * 1024 : bar_kb > 0);
}

static void io(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/cuda_python.bin", dir);
  const int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
  CHECK(fd >= 0);
  CUfileDescr_t descr;
  memset(&descr, 0, sizeof descr);
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = fd;
  CUfileHandle_t fh = NULL;
  OK(cuFileHandleRegister(&fh, &descr));
  const size_t n = 1 << 20;
  unsigned char *src = aligned_alloc(4096, n), *dst = aligned_alloc(4096, n);
  fill(src, n, 1);
  OK(cuFileBufRegister(src, n, 0));
  OK(cuFileBufRegister(dst, n, 0));
  CHECK(cuFileWrite(fh, src, n, 0, 0) == (ssize_t)n);
  memset(dst, 0, n);
  CHECK(cuFileRead(fh, dst, n, 0, 0) == (ssize_t)n);
  CHECK(memcmp(src, dst, n) == 0);
  /* readv/writev (CUDA 13.4): three buffers, one file range. */
  CUfileIOVec_t iov[3] = {{dst, 4096}, {dst + 8192, 100}, {dst + 16384, 65536}};
  memset(dst, 0, n);
  CHECK(cuFileReadv(fh, iov, 3, 4096, 0) == 4096 + 100 + 65536);
  CHECK(memcmp(dst, src + 4096, 4096) == 0 && memcmp(dst + 8192, src + 8192, 100) == 0 &&
        memcmp(dst + 16384, src + 8292, 65536) == 0);
  CHECK(cuFileWritev(fh, iov, 3, 0, 0) == 4096 + 100 + 65536);
  OK(cuFileBufDeregister(src));
  OK(cuFileBufDeregister(dst));

  /* Batch: four reads, collected with GetStatus. */
  CUfileBatchHandle_t batch = NULL;
  OK(cuFileBatchIOSetUp(&batch, 4));
  CUfileIOParams_t params[4];
  memset(params, 0, sizeof params);
  for (int i = 0; i < 4; ++i) {
    params[i].mode = CUFILE_BATCH;
    params[i].fh = fh;
    params[i].opcode = CUFILE_READ;
    params[i].u.batch.devPtr_base = dst;
    params[i].u.batch.devPtr_offset = i * 65536;
    params[i].u.batch.file_offset = 100000 + i * 65536;
    params[i].u.batch.size = 65536;
  }
  OK(cuFileBatchIOSubmit(batch, 4, params, 0));
  CUfileIOEvents_t events[4];
  unsigned done = 0;
  for (int tries = 0; done < 4 && tries < 100; ++tries) { /* GetStatus waits for min_nr */
    unsigned nr = 4 - done;
    const CUfileError_t st = cuFileBatchIOGetStatus(batch, nr, &nr, events + done, NULL);
    OK(st);
    if (st.err != CU_FILE_SUCCESS) break;
    for (unsigned k = done; k < done + nr; ++k) CHECK(events[k].status == CUFILE_COMPLETE);
    done += nr;
  }
  CHECK(done == 4);
  cuFileBatchIODestroy(batch);

  /* Stream I/O on the NULL stream (cuda-python's tests use the default stream). */
  OK(cuFileStreamRegister(NULL, 0));
  size_t size = 8192;
  off_t file_off = 0, buf_off = 0;
  ssize_t got = 0;
  OK(cuFileReadAsync(fh, dst, &size, &file_off, &buf_off, &got, NULL));
  CHECK(got == 8192);
  OK(cuFileStreamDeregister(NULL));
  cuFileHandleDeregister(fh);
  close(fd);
  free(src);
  free(dst);
}

static void statistics(const char* dir) {
  int level = -1;
  OK(cuFileSetStatsLevel(3));
  OK(cuFileGetStatsLevel(&level));
  CHECK(level == 3);
  OK(cuFileStatsStart());
  OK(cuFileStatsReset());
  io(dir);
  CUfileStatsLevel1_t l1;
  CUfileStatsLevel2_t l2;
  CUfileStatsLevel3_t* l3 = malloc(sizeof *l3);
  OK(cuFileGetStatsL1(&l1));
  CHECK(l1.read_ops.ok >= 1 && l1.write_ops.ok >= 1 && l1.readv_ops.ok == 1 &&
        l1.writev_ops.ok == 1);
  CHECK(l1.read_bytes >= (1 << 20) && l1.readv_bytes == 4096 + 100 + 65536);
  OK(cuFileGetStatsL2(&l2));
  CHECK(l2.basic.read_ops.ok == l1.read_ops.ok);
  OK(cuFileGetStatsL3(l3));
  CHECK(l3->num_gpus >= 1);
  OK(cuFileStatsStop());
  OK(cuFileSetStatsLevel(0));
  free(l3);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s WORK_DIR\n", argv[0]);
    return 2;
  }
  int version = 0;
  OK(cuFileGetVersion(&version));
  CHECK(version >= 1140); /* the parameter API; readv/writev need 1190 and fail to bind before */
  printf("cuFileGetVersion: %d\n", version);
  parameters_before_open();
  driver();
  statistics(argv[1]);
  OK(cuFileDriverClose());
  CHECK(cuFileUseCount() == 0);
  if (failures == 0) printf("cuda-python's call sequence passed\n");
  return failures == 0 ? 0 : 1;
}
