/*
 * GPU memory for the cuFile examples, without a build-time CUDA dependency: the CUDA driver API
 * is loaded with dlopen("libcuda.so.1"). A real program would call cudaMalloc / cudaMemcpy;
 * these few driver calls do the same. Without a CUDA driver (or a GPU) the examples fall back
 * to host memory, which cuFile accepts too (GDS 1.7+).
 */
#ifndef SLUICE_EXAMPLES_GPU_MEMORY_H_
#define SLUICE_EXAMPLES_GPU_MEMORY_H_

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cufile.h>

/* The driver entry points used here; CUresult is an int-sized enum, CUdeviceptr 64 bits. */
typedef int (*drv_init_fn)(unsigned);
typedef int (*drv_device_get_fn)(int*, int);
typedef int (*drv_ctx_retain_fn)(void**, int);
typedef int (*drv_ctx_set_fn)(void*);
typedef int (*drv_alloc_fn)(unsigned long long*, size_t);
typedef int (*drv_free_fn)(unsigned long long);
typedef int (*drv_copy_fn)(unsigned long long, const void*, size_t, CUstream);
typedef int (*drv_copy_back_fn)(void*, unsigned long long, size_t, CUstream);
typedef int (*drv_stream_create_fn)(CUstream*, unsigned);
typedef int (*drv_stream_fn)(CUstream);
typedef int (*drv_host_alloc_fn)(void**, size_t, unsigned);
typedef int (*drv_host_free_fn)(void*);

static struct {
  int on_gpu; /* 1: device memory through libcuda; 0: host memory */
  drv_alloc_fn alloc;
  drv_free_fn free;
  drv_copy_fn to_gpu;
  drv_copy_back_fn to_host;
  drv_stream_create_fn stream_create;
  drv_stream_fn stream_sync;
  drv_stream_fn stream_destroy;
  drv_host_alloc_fn host_alloc;
  drv_host_free_fn host_free;
} gpu;

/* dlsym into a function pointer, in the form strict ISO C accepts. */
#define GPU_LOAD(lib, fn, name)        \
  do {                                 \
    void* sym_ = dlsym((lib), (name)); \
    memcpy(&(fn), &sym_, sizeof(fn));  \
  } while (0)

/* Loads libcuda and makes GPU 0's primary context current, as the CUDA runtime would. */
static inline void gpu_init(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void* ctx = NULL;
  int dev = 0;
  if (lib == NULL) {
    printf("no CUDA driver (%s): using host memory\n", dlerror());
    return;
  }
  drv_init_fn init;
  drv_device_get_fn device_get;
  drv_ctx_retain_fn retain;
  drv_ctx_set_fn set_current;
  GPU_LOAD(lib, init, "cuInit");
  GPU_LOAD(lib, device_get, "cuDeviceGet");
  GPU_LOAD(lib, retain, "cuDevicePrimaryCtxRetain");
  GPU_LOAD(lib, set_current, "cuCtxSetCurrent");
  GPU_LOAD(lib, gpu.alloc, "cuMemAlloc_v2");
  GPU_LOAD(lib, gpu.free, "cuMemFree_v2");
  GPU_LOAD(lib, gpu.to_gpu, "cuMemcpyHtoDAsync_v2");
  GPU_LOAD(lib, gpu.to_host, "cuMemcpyDtoHAsync_v2");
  GPU_LOAD(lib, gpu.stream_create, "cuStreamCreate");
  GPU_LOAD(lib, gpu.stream_sync, "cuStreamSynchronize");
  GPU_LOAD(lib, gpu.stream_destroy, "cuStreamDestroy_v2");
  GPU_LOAD(lib, gpu.host_alloc, "cuMemHostAlloc");
  GPU_LOAD(lib, gpu.host_free, "cuMemFreeHost");
  if (!init || !device_get || !retain || !set_current || !gpu.alloc || !gpu.free || !gpu.to_gpu ||
      !gpu.to_host || !gpu.stream_create || !gpu.stream_sync || !gpu.stream_destroy ||
      !gpu.host_alloc || !gpu.host_free || init(0) != 0 || device_get(&dev, 0) != 0 ||
      retain(&ctx, dev) != 0 || set_current(ctx) != 0) {
    printf("no usable CUDA GPU: using host memory\n");
    return;
  }
  gpu.on_gpu = 1;
}

static inline void* gpu_alloc(size_t bytes) {
  unsigned long long p = 0;
  void* host = NULL;
  if (gpu.on_gpu) return gpu.alloc(&p, bytes) == 0 ? (void*)(uintptr_t)p : NULL;
  return posix_memalign(&host, 4096, bytes) == 0 ? host : NULL;
}

static inline void gpu_free(void* p) {
  if (gpu.on_gpu) {
    gpu.free((unsigned long long)(uintptr_t)p);
  } else {
    free(p);
  }
}

/* Page-locked host memory (cudaMallocHost), e.g. for the stream API's size and offset arguments. */
static inline void* gpu_alloc_pinned(size_t bytes) {
  void* p = NULL;
  if (gpu.on_gpu) return gpu.host_alloc(&p, bytes, 0) == 0 ? p : NULL;
  return malloc(bytes);
}

static inline void gpu_free_pinned(void* p) {
  if (gpu.on_gpu) {
    gpu.host_free(p);
  } else {
    free(p);
  }
}

/* Synchronous copies on the NULL stream (cudaMemcpy). Return 0 on success. */
static inline int gpu_copy_to_device(void* dst, const void* src, size_t bytes) {
  if (!gpu.on_gpu) {
    memcpy(dst, src, bytes);
    return 0;
  }
  return gpu.to_gpu((unsigned long long)(uintptr_t)dst, src, bytes, NULL) || gpu.stream_sync(NULL);
}

static inline int gpu_copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!gpu.on_gpu) {
    memcpy(dst, src, bytes);
    return 0;
  }
  return gpu.to_host(dst, (unsigned long long)(uintptr_t)src, bytes, NULL) || gpu.stream_sync(NULL);
}

/* cuFile's error idiom (NVIDIA's samples: cuFileGetErrorString): cuFile codes or errno. */
static inline const char* cufile_error_text(ssize_t ret) {
  return IS_CUFILE_ERR(ret) ? CUFILE_ERRSTR(ret) : strerror(errno);
}

#endif /* SLUICE_EXAMPLES_GPU_MEMORY_H_ */
