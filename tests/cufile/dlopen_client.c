/*
 * dlopen_client DIR: a cuFile client that loads its libraries the way KvikIO, DALI and
 * cuda-python do. It links no cuFile and no CUDA library: "libcufile.so.0" and "libcuda.so.1"
 * are opened with dlopen at run time and every entry point is found with dlsym (its type taken
 * from cufile.h with __typeof__, as KvikIO takes it with decltype). It is linked with
 * -Wl,--no-undefined and run under LD_BIND_NOW=1 (tests/cufile/CMakeLists.txt), so a helper of
 * cufile.h that needed a symbol from a cuFile library would fail its link or its start.
 *
 * It writes a file of known bytes in DIR, reads part of it at an unaligned file offset, size and
 * buffer offset into device memory with cuFileRead, copies that back with cuMemcpyAsync and
 * checks every byte; it also uses each error helper of cufile.h on a real error. On the way it
 * makes the driver calls such clients make: cuCtxPushCurrent/PopCurrent, cuCtxGetCurrent,
 * cuPointerGetAttributes, cuDeviceGetAttribute, cuGetErrorString. Exit status 0: all held.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cufile.h"

/* The driver's types and values (cuda.h), spelled out: this program builds without the toolkit. */
typedef unsigned long long devptr_t;
typedef struct CUctx_st* context_t;
enum {
  kAttrContext = 1, /* CU_POINTER_ATTRIBUTE_CONTEXT */
  kAttrMemoryType = 2,
  kAttrDeviceOrdinal = 9,
  kMemoryTypeDevice = 2,         /* CU_MEMORYTYPE_DEVICE */
  kDeviceUnifiedAddressing = 41, /* CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING */
};

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(int*, int);
  CUresult (*DeviceGetAttribute)(int*, int, int);
  CUresult (*DevicePrimaryCtxRetain)(context_t*, int);
  CUresult (*DevicePrimaryCtxRelease)(int);
  CUresult (*CtxPushCurrent)(context_t);
  CUresult (*CtxPopCurrent)(context_t*);
  CUresult (*CtxGetCurrent)(context_t*);
  CUresult (*MemAlloc)(devptr_t*, size_t);
  CUresult (*MemFree)(devptr_t);
  CUresult (*MemcpyAsync)(devptr_t, devptr_t, size_t, CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*PointerGetAttributes)(unsigned, int*, void**, devptr_t);
  CUresult (*GetErrorString)(CUresult, const char**);
} cu;

/* cuFile's entry points, typed by cufile.h. Naming one inside __typeof__ is no reference to it. */
#define CUFILE_FN(name) __typeof__(name)* name
static struct {
  CUFILE_FN(cuFileDriverOpen);
  CUFILE_FN(cuFileDriverClose); /* the macro: the _v2 entry point, as cufile.h binds it */
  CUFILE_FN(cuFileGetVersion);
  CUFILE_FN(cuFileDriverGetProperties);
  CUFILE_FN(cuFileHandleRegister);
  CUFILE_FN(cuFileHandleDeregister);
  CUFILE_FN(cuFileBufRegister);
  CUFILE_FN(cuFileBufDeregister);
  CUFILE_FN(cuFileRead);
} cf;

/* The symbol name after macro expansion (cuFileDriverClose -> "cuFileDriverClose_v2"). */
#define NAME_OF(x) NAME_OF2(x)
#define NAME_OF2(x) #x

static int failures;

static void fail(const char* what) {
  fprintf(stderr, "dlopen_client: FAILED: %s\n", what);
  ++failures;
}

/* dlsym into *slot; a missing symbol is a failure. */
static void load(void* lib, const char* name, void* slot) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) fprintf(stderr, "dlopen_client: %s: %s\n", name, dlerror());
  if (sym == NULL) fail("a symbol is missing");
  memcpy(slot, &sym, sizeof sym); /* object pointer to function pointer, as POSIX allows */
}

static int cuda_ok(CUresult r, const char* what) {
  if (r == 0) return 1;
  const char* text = NULL;
  if (cu.GetErrorString == NULL || cu.GetErrorString(r, &text) != 0) text = "?";
  fprintf(stderr, "dlopen_client: %s: CUresult %d (%s)\n", what, (int)r, text);
  fail(what);
  return 0;
}

static int cufile_ok(CUfileError_t st, const char* what) {
  if (st.err == CU_FILE_SUCCESS) return 1;
  fprintf(stderr, "dlopen_client: %s: %s (%d)%s\n", what, CUFILE_ERRSTR(st.err), (int)st.err,
          IS_CUDA_ERR(st) ? " (a CUDA error)" : "");
  fail(what);
  return 0;
}

#define LOAD_CU(name, member) load(lib, name, &cu.member)
static int load_cuda(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == NULL) {
    fprintf(stderr, "dlopen_client: %s\n", dlerror());
    return 0;
  }
  LOAD_CU("cuInit", Init);
  LOAD_CU("cuDeviceGet", DeviceGet);
  LOAD_CU("cuDeviceGetAttribute", DeviceGetAttribute);
  LOAD_CU("cuDevicePrimaryCtxRetain", DevicePrimaryCtxRetain);
  LOAD_CU("cuDevicePrimaryCtxRelease_v2", DevicePrimaryCtxRelease);
  LOAD_CU("cuCtxPushCurrent_v2", CtxPushCurrent);
  LOAD_CU("cuCtxPopCurrent_v2", CtxPopCurrent);
  LOAD_CU("cuCtxGetCurrent", CtxGetCurrent);
  LOAD_CU("cuMemAlloc_v2", MemAlloc);
  LOAD_CU("cuMemFree_v2", MemFree);
  LOAD_CU("cuMemcpyAsync", MemcpyAsync);
  LOAD_CU("cuStreamSynchronize", StreamSynchronize);
  LOAD_CU("cuPointerGetAttributes", PointerGetAttributes);
  LOAD_CU("cuGetErrorString", GetErrorString);
  return failures == 0;
}

#define LOAD_CUFILE(name) load(lib, NAME_OF(name), &cf.name)
static int load_cufile(void) {
  /* Nothing linked it in: it is loaded here for the first time. */
  if (dlopen("libcufile.so.0", RTLD_LAZY | RTLD_NOLOAD) != NULL) fail("libcufile.so.0 was linked");
  void* lib = dlopen("libcufile.so.0", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == NULL) {
    fprintf(stderr, "dlopen_client: %s\n", dlerror());
    return 0;
  }
  LOAD_CUFILE(cuFileDriverOpen);
  LOAD_CUFILE(cuFileDriverClose);
  LOAD_CUFILE(cuFileGetVersion);
  LOAD_CUFILE(cuFileDriverGetProperties);
  LOAD_CUFILE(cuFileHandleRegister);
  LOAD_CUFILE(cuFileHandleDeregister);
  LOAD_CUFILE(cuFileBufRegister);
  LOAD_CUFILE(cuFileBufDeregister);
  LOAD_CUFILE(cuFileRead);
  return failures == 0;
}

/* The byte at file offset i. */
static unsigned char pattern(size_t i) {
  uint32_t x = (uint32_t)i * 2654435761u;
  return (unsigned char)(x >> 24 ^ x >> 11);
}

static int write_data_file(const char* path, size_t size) {
  unsigned char* buf = malloc(size);
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int ok = buf != NULL && fd >= 0;
  for (size_t i = 0; ok && i < size; ++i) buf[i] = pattern(i);
  ok = ok && write(fd, buf, size) == (ssize_t)size && fsync(fd) == 0;
  if (fd >= 0) close(fd);
  free(buf);
  if (!ok) fprintf(stderr, "dlopen_client: %s: %s\n", path, strerror(errno));
  return ok;
}

/* The device memory's pointer attributes, as a client asks them before using a buffer. */
static void check_pointer(devptr_t mem, context_t ctx) {
  unsigned type = 0;
  context_t owner = NULL;
  int ordinal = -1;
  int attrs[] = {kAttrMemoryType, kAttrContext, kAttrDeviceOrdinal};
  void* data[] = {&type, &owner, &ordinal};
  if (!cuda_ok(cu.PointerGetAttributes(3, attrs, data, mem), "cuPointerGetAttributes")) return;
  if (type != kMemoryTypeDevice) fail("the buffer is not device memory");
  if (owner != ctx) fail("the buffer's context is not the one it was allocated in");
  if (ordinal != 0) fail("the buffer's device ordinal is not 0");
}

/* Each error helper of cufile.h, on errors the library really returned. */
static void check_error_helpers(CUfileHandle_t stale, devptr_t mem) {
  const ssize_t ret = cf.cuFileRead(stale, (void*)(uintptr_t)mem, 4096, 0, 0);
  if (!(ret < 0 && IS_CUFILE_ERR(ret))) fail("a stale handle is no cuFile error");
  if (strcmp(CUFILE_ERRSTR(ret), cufileop_status_error(CU_FILE_HANDLE_NOT_REGISTERED)) != 0)
    fail("CUFILE_ERRSTR of a stale handle's read");
  if (IS_CUFILE_ERR(-EBADF)) fail("an errno counts as a cuFile error");
  const CUfileError_t cuda_err = {CU_FILE_CUDA_DRIVER_ERROR, (CUresult)700};
  const char* text = NULL;
  if (!IS_CUDA_ERR(cuda_err) || cu.GetErrorString(CU_FILE_CUDA_ERR(cuda_err), &text) != 0 ||
      text == NULL)
    fail("IS_CUDA_ERR / CU_FILE_CUDA_ERR");
  CUfileDrvProps_t props;
  const CUfileError_t st = cf.cuFileDriverGetProperties(&props);
  if (!cufile_ok(st, "cuFileDriverGetProperties") || IS_CUDA_ERR(st)) fail("success is no error");
}

/* Reads size bytes at file_offset into mem + buf_offset and checks them; 1 when all held. */
static int read_and_check(const char* path, devptr_t mem, size_t size, off_t file_offset,
                          off_t buf_offset) {
  const int fd = open(path, O_RDONLY);
  CUfileDescr_t descr;
  memset(&descr, 0, sizeof descr);
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = fd;
  CUfileHandle_t fh = NULL;
  if (fd < 0 || !cufile_ok(cf.cuFileHandleRegister(&fh, &descr), "cuFileHandleRegister")) {
    if (fd >= 0) close(fd);
    return 0;
  }
  const ssize_t got = cf.cuFileRead(fh, (void*)(uintptr_t)mem, size, file_offset, buf_offset);
  if (got != (ssize_t)size) {
    fprintf(stderr, "dlopen_client: cuFileRead: %zd (%s), want %zu\n", got,
            got < 0 && IS_CUFILE_ERR(got) ? CUFILE_ERRSTR(got) : strerror(errno), size);
    fail("cuFileRead");
  }
  unsigned char* back = calloc(size, 1);
  if (back != NULL &&
      cuda_ok(cu.MemcpyAsync((devptr_t)(uintptr_t)back, mem + (devptr_t)buf_offset, size, NULL),
              "cuMemcpyAsync") &&
      cuda_ok(cu.StreamSynchronize(NULL), "cuStreamSynchronize")) {
    for (size_t i = 0; i < size; ++i) {
      if (back[i] != pattern((size_t)file_offset + i)) {
        fprintf(stderr, "dlopen_client: byte %zu differs\n", i);
        fail("the bytes in device memory");
        break;
      }
    }
  }
  free(back);
  cf.cuFileHandleDeregister(fh);
  check_error_helpers(fh, mem); /* fh is stale now: handles are never reused */
  close(fd);
  return failures == 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const char* bind_now = getenv("LD_BIND_NOW");
  if (bind_now == NULL || *bind_now == '\0') fail("run with LD_BIND_NOW=1 (ctest sets it)");
  char path[4096];
  snprintf(path, sizeof path, "%s/dlopen_client.bin", argv[1]);
  const size_t file_size = (1u << 20) + 12345, size = (1u << 20) + 1000;
  const off_t file_offset = 777, buf_offset = 333;
  if (!write_data_file(path, file_size) || !load_cuda() || !load_cufile()) return 1;

  int dev = -1, unified = 0, version = 0;
  context_t ctx = NULL, current = NULL, popped = NULL;
  devptr_t mem = 0;
  if (!cuda_ok(cu.Init(0), "cuInit") || !cuda_ok(cu.DeviceGet(&dev, 0), "cuDeviceGet") ||
      !cuda_ok(cu.DeviceGetAttribute(&unified, kDeviceUnifiedAddressing, dev), "attribute") ||
      !cuda_ok(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
      !cuda_ok(cu.CtxPushCurrent(ctx), "cuCtxPushCurrent") ||
      !cuda_ok(cu.CtxGetCurrent(&current), "cuCtxGetCurrent") ||
      !cuda_ok(cu.MemAlloc(&mem, size + (size_t)buf_offset), "cuMemAlloc"))
    return 1;
  if (!unified) fail("no unified addressing");
  if (current != ctx) fail("the pushed context is not current");
  check_pointer(mem, ctx);

  if (cufile_ok(cf.cuFileDriverOpen(), "cuFileDriverOpen") &&
      cufile_ok(cf.cuFileGetVersion(&version), "cuFileGetVersion") &&
      cufile_ok(cf.cuFileBufRegister((void*)(uintptr_t)mem, size + (size_t)buf_offset, 0),
                "cuFileBufRegister")) {
    read_and_check(path, mem, size, file_offset, buf_offset);
    cufile_ok(cf.cuFileBufDeregister((void*)(uintptr_t)mem), "cuFileBufDeregister");
  }
  cufile_ok(cf.cuFileDriverClose(), "cuFileDriverClose");
  cuda_ok(cu.MemFree(mem), "cuMemFree");
  if (cuda_ok(cu.CtxPopCurrent(&popped), "cuCtxPopCurrent") && popped != ctx)
    fail("cuCtxPopCurrent gave another context");
  cuda_ok(cu.DevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
  unlink(path);
  if (failures != 0) return 1;
  printf(
      "dlopen_client: %zu bytes at file offset %lld into device memory + %lld: all right "
      "(cuFile API %d)\n",
      size, (long long)file_offset, (long long)buf_offset, version);
  return 0;
}
