/* cuFileReadv of N segments against N cuFileRead calls over the same file range into the same
 * buffers, interleaved in each round (readv first in even rounds, the loop first in odd ones), as
 * a cuFile program calls them. Host memory, or device memory through the fake/real libcuda is not
 * needed: the question is what one vectored call saves over a loop of scalar ones.
 *
 * usage: sluice_cufile_readv_bench FILE SEGMENT_BYTES SEGMENTS ROUNDS [cold|warm]
 *   cold (default): the file's pages are dropped (posix_fadvise DONTNEED) before each timed call
 *   warm: the file is read once into the page cache first and left there
 * prints one line a round and the medians' ratio (loop time / readv time: > 1 means readv is
 * faster). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cufile.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds for one call shape, after dropping the pages when cold. */
static double timed(int vectored, int fd, CUfileHandle_t fh, CUfileIOVec_t *iov, int n, int cold,
                    ssize_t *bytes) {
  if (cold) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  const double t0 = now();
  ssize_t got = 0;
  if (vectored) {
    got = cuFileReadv(fh, iov, (size_t)n, 0, 0);
  } else {
    off_t at = 0;
    for (int i = 0; i < n; ++i) {
      const ssize_t r = cuFileRead(fh, iov[i].base, iov[i].len, at, 0);
      if (r < 0) {
        got = r;
        break;
      }
      got += r;
      at += (off_t)iov[i].len;
    }
  }
  *bytes = got;
  return now() - t0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s FILE SEGMENT_BYTES SEGMENTS ROUNDS [cold|warm]\n", argv[0]);
    return 2;
  }
  const size_t seg = strtoull(argv[2], NULL, 10);
  const int n = atoi(argv[3]), rounds = atoi(argv[4]);
  const int cold = argc < 6 || strcmp(argv[5], "warm") != 0;
  if (seg == 0 || n <= 0 || rounds <= 0 || rounds > 1000) return 2;
  const int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  CUfileDescr_t d;
  memset(&d, 0, sizeof d);
  d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = fd;
  CUfileHandle_t fh = NULL;
  const CUfileError_t st = cuFileHandleRegister(&fh, &d);
  if (st.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileHandleRegister: %s\n", cufileop_status_error(st.err));
    return 1;
  }
  CUfileIOVec_t *iov = calloc((size_t)n, sizeof *iov);
  for (int i = 0; i < n; ++i) {
    iov[i].base = aligned_alloc(4096, (seg + 4095) / 4096 * 4096);
    memset(iov[i].base, 0, seg); /* first touch outside the timing */
    iov[i].len = seg;
  }
  ssize_t bytes = 0;
  if (!cold) timed(1, fd, fh, iov, n, 0, &bytes);
  double *tv = calloc((size_t)rounds, sizeof *tv), *tl = calloc((size_t)rounds, sizeof *tl);
  for (int r = 0; r < rounds; ++r) {
    ssize_t bv = 0, bl = 0;
    if (r % 2 == 0) {
      tv[r] = timed(1, fd, fh, iov, n, cold, &bv);
      tl[r] = timed(0, fd, fh, iov, n, cold, &bl);
    } else {
      tl[r] = timed(0, fd, fh, iov, n, cold, &bl);
      tv[r] = timed(1, fd, fh, iov, n, cold, &bv);
    }
    if (bv < 0 || bl < 0 || bv != bl) {
      fprintf(stderr, "round %d: readv %zd bytes, loop %zd\n", r, bv, bl);
      return 1;
    }
    printf("round %d: readv %.3f GB/s, loop of cuFileRead %.3f GB/s (%zd bytes, %s)\n", r,
           (double)bv / tv[r] / 1e9, (double)bl / tl[r] / 1e9, bv, cold ? "cold" : "warm");
  }
  const double mv = median(tv, rounds), ml = median(tl, rounds);
  printf("%d x %zu B %s: readv / loop of cuFileRead throughput, medians: %.2fx\n", n, seg,
         cold ? "cold" : "warm", ml / mv);
  cuFileHandleDeregister(fh);
  close(fd);
  return 0;
}
