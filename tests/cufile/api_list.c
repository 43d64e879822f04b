/* Every function and type of NVIDIA's cufile.h as of CUDA 13.4 (GDS 1.19), listed here from
 * NVIDIA's header and API reference (Sluice's reference notes, cufile-coverage.md section 1):
 * compiling this file proves abi/cufile.h declares each one with NVIDIA's signature (each is
 * assigned to a pointer of NVIDIA's function type), linking it against libsluice_cufile with
 * --no-undefined proves the library defines each, and running it proves each is exported under
 * its own name (dlsym finds the same address the linker bound). A name added to NVIDIA's header
 * belongs in this list; a missing one fails the build, not a run. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cufile.h"

/* The types of the 13.4 header: a missing one is a compile error. */
/* clang-format off */
static const size_t type_sizes[] = {
    sizeof(CUfileOpError),
    sizeof(CUfileError_t),
    sizeof(CUfileDriverStatusFlags_t),
    sizeof(CUfileDriverControlFlags_t),
    sizeof(CUfileFeatureFlags_t),
    sizeof(CUfileP2PFlags_t),
    sizeof(CUfileDrvProps_t),
    sizeof(CUFileSizeTConfigParameter_t),
    sizeof(CUFileBoolConfigParameter_t),
    sizeof(CUFileStringConfigParameter_t),
    sizeof(CUFileArrayConfigParameter_t),
    sizeof(CUfileOpCounter_t),
    sizeof(CUfileStatsLevel1_t),
    sizeof(CUfileStatsLevel2_t),
    sizeof(CUfilePerGpuStats_t),
    sizeof(CUfileStatsLevel3_t),
    sizeof(enum CUfileFileHandleType),
    sizeof(sockaddr_t),
    sizeof(cufileRDMAInfo_t),
    sizeof(CUfileFSOps_t),
    sizeof(CUfileDescr_t),
    sizeof(CUfileHandle_t),
    sizeof(CUfileIOVec_t),
    sizeof(CUfileOpcode_t),
    sizeof(CUfileStatus_t),
    sizeof(CUfileBatchMode_t),
    sizeof(CUfileIOParams_t),
    sizeof(CUfileIOEvents_t),
    sizeof(CUfileBatchHandle_t)};
/* clang-format on */

struct entry {
  const char* name;
  void (*fn)(void);
};

/* NVIDIA's signature, checked by assigning the function to a pointer of that type. */
#define SLUICE_FN(ret, name, args) {#name, (void (*)(void))(ret(*) args)name}

/* cuFileDriverClose is a macro naming cuFileDriverClose_v2, as in NVIDIA's header; the plain
 * symbol is exported too (programs built against headers before the macro bind to it). */
CUfileError_t cuFileDriverClose_plain(void) __asm__("cuFileDriverClose");

/* clang-format off: one function a line reads as the header's list */
static const struct entry functions[] = {
    SLUICE_FN(CUfileError_t, cuFileDriverOpen, (void)),
    SLUICE_FN(CUfileError_t, cuFileDriverClose_v2, (void)),
    {"cuFileDriverClose", (void (*)(void))(CUfileError_t(*)(void))cuFileDriverClose_plain},
    SLUICE_FN(long, cuFileUseCount, (void)),
    SLUICE_FN(CUfileError_t, cuFileDriverGetProperties, (CUfileDrvProps_t *)),
    SLUICE_FN(CUfileError_t, cuFileDriverSetPollMode, (bool, size_t)),
    SLUICE_FN(CUfileError_t, cuFileDriverSetMaxDirectIOSize, (size_t)),
    SLUICE_FN(CUfileError_t, cuFileDriverSetMaxCacheSize, (size_t)),
    SLUICE_FN(CUfileError_t, cuFileDriverSetMaxPinnedMemSize, (size_t)),
    SLUICE_FN(CUfileError_t, cuFileGetVersion, (int *)),
    SLUICE_FN(CUfileError_t, cuFileSetParameterSizeT, (CUFileSizeTConfigParameter_t, size_t)),
    SLUICE_FN(CUfileError_t, cuFileSetParameterBool, (CUFileBoolConfigParameter_t, bool)),
    SLUICE_FN(CUfileError_t, cuFileSetParameterString, (CUFileStringConfigParameter_t, const char *)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterSizeT, (CUFileSizeTConfigParameter_t, size_t *)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterBool, (CUFileBoolConfigParameter_t, bool *)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterString, (CUFileStringConfigParameter_t, char *, int)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterMinMaxValue, (CUFileSizeTConfigParameter_t, size_t *, size_t *)),
    SLUICE_FN(CUfileError_t, cuFileSetParameterPosixPoolSlabArray, (const size_t *, const size_t *, int)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterPosixPoolSlabArray, (size_t *, size_t *, int)),
    SLUICE_FN(CUfileError_t, cuFileSetParameterGpuBounceBufferSlabArray, (const size_t *, const size_t *, int)),
    SLUICE_FN(CUfileError_t, cuFileGetParameterGpuBounceBufferSlabArray, (size_t *, size_t *, int)),
    SLUICE_FN(CUfileError_t, cuFileGetBARSizeInKB, (int, size_t *)),
    SLUICE_FN(CUfileError_t, cuFileDriverSetP2PFlags, (CUfileDriverStatusFlags_t, CUfileP2PFlags_t)),
    SLUICE_FN(CUfileError_t, cuFileDriverGetP2PFlags, (CUfileDriverStatusFlags_t, CUfileP2PFlags_t *)),
    SLUICE_FN(CUfileError_t, cuFileSetStatsLevel, (int)),
    SLUICE_FN(CUfileError_t, cuFileGetStatsLevel, (int *)),
    SLUICE_FN(CUfileError_t, cuFileStatsStart, (void)),
    SLUICE_FN(CUfileError_t, cuFileStatsStop, (void)),
    SLUICE_FN(CUfileError_t, cuFileStatsReset, (void)),
    SLUICE_FN(CUfileError_t, cuFileGetStatsL1, (CUfileStatsLevel1_t *)),
    SLUICE_FN(CUfileError_t, cuFileGetStatsL2, (CUfileStatsLevel2_t *)),
    SLUICE_FN(CUfileError_t, cuFileGetStatsL3, (CUfileStatsLevel3_t *)),
    SLUICE_FN(CUfileError_t, cuFileHandleRegister, (CUfileHandle_t *, CUfileDescr_t *)),
    SLUICE_FN(void, cuFileHandleDeregister, (CUfileHandle_t)),
    SLUICE_FN(CUfileError_t, cuFileBufRegister, (const void *, size_t, int)),
    SLUICE_FN(CUfileError_t, cuFileBufDeregister, (const void *)),
    SLUICE_FN(ssize_t, cuFileRead, (CUfileHandle_t, void *, size_t, off_t, off_t)),
    SLUICE_FN(ssize_t, cuFileWrite, (CUfileHandle_t, const void *, size_t, off_t, off_t)),
    SLUICE_FN(ssize_t, cuFileReadv, (CUfileHandle_t, const CUfileIOVec_t *, size_t, off_t, unsigned)),
    SLUICE_FN(ssize_t, cuFileWritev, (CUfileHandle_t, const CUfileIOVec_t *, size_t, off_t, unsigned)),
    SLUICE_FN(CUfileError_t, cuFileBatchIOSetUp, (CUfileBatchHandle_t *, unsigned)),
    SLUICE_FN(CUfileError_t, cuFileBatchIOSubmit, (CUfileBatchHandle_t, unsigned, CUfileIOParams_t *, unsigned int)),
    SLUICE_FN(CUfileError_t, cuFileBatchIOGetStatus, (CUfileBatchHandle_t, unsigned, unsigned *, CUfileIOEvents_t *, struct timespec *)),
    SLUICE_FN(CUfileError_t, cuFileBatchIOCancel, (CUfileBatchHandle_t)),
    SLUICE_FN(void, cuFileBatchIODestroy, (CUfileBatchHandle_t)),
    SLUICE_FN(CUfileError_t, cuFileStreamRegister, (CUstream, unsigned)),
    SLUICE_FN(CUfileError_t, cuFileStreamDeregister, (CUstream)),
    SLUICE_FN(CUfileError_t, cuFileReadAsync, (CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream)),
    SLUICE_FN(CUfileError_t, cuFileWriteAsync, (CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream)),
    SLUICE_FN(CUfileError_t, cuFileExportPCIeTopology, (const char *))
};
/* clang-format on */
#undef SLUICE_FN

int main(void) {
  const size_t n = sizeof functions / sizeof functions[0];
  int failed = 0;
  for (size_t i = 0; i < n; ++i) {
    void* found = dlsym(RTLD_DEFAULT, functions[i].name);
    void* bound = NULL;
    memcpy(&bound, &functions[i].fn, sizeof bound);
    if (found == NULL || found != bound) {
      fprintf(stderr, "%s: %s\n", functions[i].name,
              found == NULL ? "not exported" : "exported at another address");
      failed = 1;
    }
  }
  if (n != 50 || sizeof type_sizes / sizeof type_sizes[0] != 29) {
    fprintf(stderr, "the list has %zu functions and %zu types; CUDA 13.4 has 50 and 29\n", n,
            sizeof type_sizes / sizeof type_sizes[0]);
    failed = 1;
  }
  if (!failed) printf("all %zu functions of CUDA 13.4's cufile.h are declared and exported\n", n);
  return failed;
}
