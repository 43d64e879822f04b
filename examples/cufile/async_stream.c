/*
 * async_stream FILE SIZE: writes SIZE bytes of GPU memory to FILE and reads them back into a
 * second buffer with cuFileWriteAsync and cuFileReadAsync on one CUDA stream (the NULL stream
 * without a GPU), then waits for the stream and checks the bytes. The size and offsets are
 * passed by pointer: cuFile reads them when the stream reaches the call.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_memory.h"

/* The stream API's arguments, in page-locked host memory as cuFile asks. */
struct io_args {
  size_t size;
  off_t file_offset, buf_offset;
  ssize_t written, read;
};

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE SIZE\n", argv[0]);
    return 2;
  }
  const size_t size = strtoull(argv[2], NULL, 0);
  int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0644);
  unsigned char *pattern = malloc(size), *back = malloc(size);
  if (fd < 0 || size == 0 || pattern == NULL || back == NULL) {
    fprintf(stderr, "%s: %s\n", argv[1], fd < 0 ? strerror(errno) : "bad SIZE");
    return 1;
  }
  for (size_t i = 0; i < size; ++i) pattern[i] = (unsigned char)(i * 13 + 1);

  gpu_init();
  CUfileError_t status = cuFileDriverOpen();
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileDriverOpen: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  void *src = gpu_alloc(size), *dst = gpu_alloc(size);
  struct io_args* args = gpu_alloc_pinned(sizeof *args);
  CUstream stream = NULL;
  if (src == NULL || dst == NULL || args == NULL || gpu_copy_to_device(src, pattern, size) != 0 ||
      (gpu.on_gpu && gpu.stream_create(&stream, 0) != 0)) {
    fprintf(stderr, "GPU set-up failed\n");
    return 1;
  }
  status = cuFileStreamRegister(stream, 0); /* 0: size and offsets may change until execution */
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFileStreamRegister: %s\n", CUFILE_ERRSTR(status.err));
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

  memset(args, 0, sizeof *args);
  args->size = size;
  status = cuFileWriteAsync(fh, src, &args->size, &args->file_offset, &args->buf_offset,
                            &args->written, stream);
  if (status.err == CU_FILE_SUCCESS) {
    /* Queued behind the write on the same stream, so it reads what the write wrote. */
    status = cuFileReadAsync(fh, dst, &args->size, &args->file_offset, &args->buf_offset,
                             &args->read, stream);
  }
  if (status.err != CU_FILE_SUCCESS) {
    fprintf(stderr, "cuFile async call: %s\n", CUFILE_ERRSTR(status.err));
    return 1;
  }
  if (gpu.on_gpu && gpu.stream_sync(stream) != 0) {
    fprintf(stderr, "cuStreamSynchronize failed\n");
    return 1;
  }
  const int ok = args->written == (ssize_t)size && args->read == (ssize_t)size &&
                 gpu_copy_to_host(back, dst, size) == 0 && memcmp(back, pattern, size) == 0;
  printf("async_stream: wrote %zd and read %zd bytes on %s: %s\n", args->written, args->read,
         stream != NULL ? "a CUDA stream" : "the NULL stream", ok ? "contents match" : "MISMATCH");

  cuFileHandleDeregister(fh);
  cuFileStreamDeregister(stream);
  if (stream != NULL) gpu.stream_destroy(stream);
  gpu_free_pinned(args);
  gpu_free(src);
  gpu_free(dst);
  close(fd);
  free(pattern);
  free(back);
  cuFileDriverClose();
  return ok ? 0 : 1;
}
