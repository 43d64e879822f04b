/*
 * batch_read FILE: reads FILE into GPU memory as one batch of 8 reads (cuFileBatchIOSetUp,
 * cuFileBatchIOSubmit, then cuFileBatchIOGetStatus until every entry is back) and compares the
 * bytes with pread(2). The pieces need not be aligned.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu_memory.h"

enum { ENTRIES = 8 };

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_RDONLY | O_DIRECT);
  if (fd < 0 && errno == EINVAL) fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < ENTRIES) {
    fprintf(stderr, "%s: %s\n", argv[1], fd < 0 ? strerror(errno) : "needs at least 8 bytes");
    return 1;
  }
  const size_t size = (size_t)st.st_size, piece = size / ENTRIES;

  gpu_init();
  CUfileError_t status = cuFileDriverOpen();
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileDriverOpen: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  void* dev = gpu_alloc(size);
  CUfileDescr_t descr;
  memset(&descr, 0, sizeof descr);
  descr.handle.fd = fd;
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  CUfileHandle_t fh;
  status = cuFileHandleRegister(&fh, &descr);
  if (dev == NULL || status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "set-up failed: %s\n",
            dev == NULL ? "no GPU memory" : CUFILE_ERRSTR(status.err));
    return 1;
  }

  CUfileBatchHandle_t batch;
  status = cuFileBatchIOSetUp(&batch, ENTRIES);
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileBatchIOSetUp: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  CUfileIOParams_t io[ENTRIES];
  CUfileIOEvents_t events[ENTRIES];
  size_t expected[ENTRIES];
  memset(io, 0, sizeof io);
  for (int i = 0; i < ENTRIES; ++i) {
    expected[i] =
        i == ENTRIES - 1 ? size - piece * (ENTRIES - 1) : piece; /* the last takes the rest */
    io[i].mode = CUFILE_BATCH;
    io[i].fh = fh;
    io[i].opcode = CUFILE_READ;
    io[i].cookie = &expected[i];
    io[i].u.batch.devPtr_base = dev;
    io[i].u.batch.file_offset = (off_t)(piece * (size_t)i);
    io[i].u.batch.devPtr_offset = (off_t)(piece * (size_t)i);
    io[i].u.batch.size = expected[i];
  }
  status = cuFileBatchIOSubmit(batch, ENTRIES, io, 0);
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileBatchIOSubmit: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  int ok = 1;
  unsigned completed = 0;
  while (completed < ENTRIES) {
    unsigned nr = ENTRIES;
    struct timespec timeout = {1, 0};
    status = cuFileBatchIOGetStatus(batch, 1, &nr, events, &timeout);
    if (status.err != CU_FILE_SUCCESS) {
      fprintf(stderr, "cuFileBatchIOGetStatus: %s\n", CUFILE_ERRSTR(status.err));
      return 1;
    }
    for (unsigned i = 0; i < nr; ++i) {
      const size_t want = *(const size_t*)events[i].cookie;
      if (events[i].status != CUFILE_COMPLETE || events[i].ret != want) {
        fprintf(stderr, "entry failed: status 0x%x, ret %zd\n", (unsigned)events[i].status,
                (ssize_t)events[i].ret);
        ok = 0;
      }
    }
    completed += nr;
  }
  cuFileBatchIODestroy(batch);

  char *got = malloc(size), *want = malloc(size);
  const int plain = open(argv[1], O_RDONLY);
  ok = ok && got != NULL && want != NULL && plain >= 0 && gpu_copy_to_host(got, dev, size) == 0 &&
       pread(plain, want, size, 0) == (ssize_t)size && memcmp(got, want, size) == 0;
  printf("batch_read: %d entries, %zu bytes into %s memory: %s\n", ENTRIES, size,
         gpu.on_gpu ? "GPU" : "host", ok ? "contents match" : "MISMATCH");
  if (plain >= 0) close(plain);
  free(got);
  free(want);
  cuFileHandleDeregister(fh);
  gpu_free(dev);
  close(fd);
  cuFileDriverClose();
  return ok ? 0 : 1;
}
