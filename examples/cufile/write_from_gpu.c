/*
 * write_from_gpu FILE SIZE: fills SIZE bytes of GPU memory, writes them to FILE with
 * cuFileWrite (one aligned write of the whole buffer, then a rewrite of an unaligned piece from
 * an offset inside the registered buffer), and checks the file with pread(2).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_memory.h"

static int write_all(CUfileHandle_t fh, const void* dev, size_t size, off_t file_offset,
                     off_t buf_offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n =
        cuFileWrite(fh, dev, size - done, file_offset + (off_t)done, buf_offset + (off_t)done);
    if (n <= 0) {
      fprintf(stderr, "cuFileWrite at %lld: %s\n", (long long)(file_offset + (off_t)done),
              n < 0 ? cufile_error_text(n) : "no progress");
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE SIZE\n", argv[0]);
    return 2;
  }
  const size_t size = strtoull(argv[2], NULL, 0);
  if (size < 2) {
    fprintf(stderr, "SIZE must be at least 2\n");
    return 2;
  }
  int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) {
    fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  /* The file ends one byte longer than the buffer (see below). */
  unsigned char *host = malloc(size + 1), *back = malloc(size + 1);
  if (host == NULL || back == NULL) return 1;
  for (size_t i = 0; i < size; ++i) host[i] = (unsigned char)(i * 7 + 3);

  gpu_init();
  CUfileError_t status = cuFileDriverOpen();
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileDriverOpen: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  void* dev = gpu_alloc(size);
  if (dev == NULL || gpu_copy_to_device(dev, host, size) != 0) {
    fprintf(stderr, "cannot fill %zu bytes of GPU memory\n", size);
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

  /* The whole buffer at offset 0, then its second half again one byte further on: cuFile
   * accepts any file offset, buffer offset and size. */
  const size_t half = size / 2;
  int ok = write_all(fh, dev, size, 0, 0) == 0 &&
           write_all(fh, dev, size - half, (off_t)half + 1, (off_t)half) == 0;
  memmove(host + half + 1, host + half, size - half); /* what the file should hold now */
  const int plain = open(argv[1], O_RDONLY);          /* fd may be O_DIRECT: no unaligned pread */
  ok = ok && plain >= 0 && pread(plain, back, size + 1, 0) == (ssize_t)(size + 1) &&
       memcmp(back, host, size + 1) == 0;
  if (plain >= 0) close(plain);
  printf("write_from_gpu: wrote %zu bytes from %s memory: %s\n", size + 1,
         gpu.on_gpu ? "GPU" : "host", ok ? "file contents match" : "MISMATCH");

  cuFileHandleDeregister(fh);
  cuFileBufDeregister(dev);
  gpu_free(dev);
  close(fd);
  free(host);
  free(back);
  cuFileDriverClose();
  return ok ? 0 : 1;
}
