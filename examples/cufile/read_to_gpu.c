/*
 * read_to_gpu FILE [SIZE] [--check]: reads SIZE bytes (default: the whole file) of FILE into GPU
 * memory with cuFileRead and prints the throughput on one line. --check copies the bytes back
 * and compares them with pread(2).
 *
 * Builds against NVIDIA's cufile.h or Sluice's and runs on either library, e.g. built once with
 *   cc -I<sluice>/include/sluice read_to_gpu.c -L<dir of libcufile.so> -lcufile -ldl
 * and run with LD_LIBRARY_PATH=<sluice>/lib/sluice (Sluice) or NVIDIA's lib folder (NVIDIA).
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

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int check_bytes(const char* path, const void* dev, size_t size) {
  char *got = malloc(size), *want = malloc(size);
  size_t done = 0;
  const int fd =
      open(path, O_RDONLY); /* not the O_DIRECT descriptor: these buffers are unaligned */
  int ok = fd >= 0 && got != NULL && want != NULL && gpu_copy_to_host(got, dev, size) == 0;
  while (ok && done < size) {
    const ssize_t n = pread(fd, want + done, size - done, (off_t)done);
    ok = n > 0;
    done += ok ? (size_t)n : 0;
  }
  ok = ok && memcmp(got, want, size) == 0;
  printf("read_to_gpu: check %s\n", ok ? "passed" : "FAILED");
  if (fd >= 0) close(fd);
  free(got);
  free(want);
  return ok;
}

int main(int argc, char** argv) {
  const int check = argc > 2 && strcmp(argv[argc - 1], "--check") == 0;
  const int nargs = argc - check;
  if (nargs < 2 || nargs > 3) {
    fprintf(stderr, "usage: %s FILE [SIZE] [--check]\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_RDONLY | O_DIRECT);
  if (fd < 0 && errno == EINVAL) fd = open(argv[1], O_RDONLY); /* no O_DIRECT here (tmpfs) */
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  const size_t size = nargs == 3 ? strtoull(argv[2], NULL, 0) : (size_t)st.st_size;
  if (size == 0) {
    fprintf(stderr, "nothing to read\n");
    return 2;
  }

  gpu_init();
  CUfileError_t status = cuFileDriverOpen();
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileDriverOpen: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  void* dev = gpu_alloc(size);
  if (dev == NULL) {
    fprintf(stderr, "cannot allocate %zu bytes of GPU memory\n", size);
    return 1;
  }
  status = cuFileBufRegister(dev, size, 0);
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileBufRegister: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  CUfileDescr_t descr;
  memset(&descr, 0, sizeof descr);
  descr.handle.fd = fd;
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  CUfileHandle_t fh;
  status = cuFileHandleRegister(&fh, &descr);
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileHandleRegister: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }

  /* One small read first, so that one-time set-up is not timed. */
  const ssize_t first = cuFileRead(fh, dev, size < 4096 ? size : 4096, 0, 0);
  if (first < 0) {
    fprintf(stderr, "cuFileRead: %s\n", cufile_error_text(first));
    return 1;
  }
  const double t0 = seconds();
  size_t done = 0;
  while (done < size) { /* cuFileRead may return fewer bytes: at the end of the file */
    const ssize_t n = cuFileRead(fh, dev, size - done, (off_t)done, (off_t)done);
    if (n < 0) {
      fprintf(stderr, "cuFileRead at %zu: %s\n", done, cufile_error_text(n));
      return 1;
    }
    if (n == 0) break;
    done += (size_t)n;
  }
  const double secs = seconds() - t0;
  printf("read_to_gpu: %zu bytes in %.3f s = %.2f GB/s\n", done, secs, (double)done / secs / 1e9);
  const int ok = !check || check_bytes(argv[1], dev, done);

  cuFileHandleDeregister(fh);
  cuFileBufDeregister(dev);
  gpu_free(dev);
  close(fd);
  cuFileDriverClose();
  return ok ? 0 : 1;
}
