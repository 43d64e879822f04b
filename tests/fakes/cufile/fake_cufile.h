/* Test hooks of the fake libcufile.so.0 (tests/fakes/cufile/fake_cufile.cpp).
 *
 * Tests reach these with dlopen(path, RTLD_NOW | RTLD_NOLOAD) + dlsym on the library that
 * sluice::detail::CuFile loaded (CuFile::instance().library()), so they read the counters of
 * the very copy the code under test called. Counters start at zero when the library is loaded
 * and on fake_cufile_reset_counters().
 *
 * Failure injection, read from the environment at every call (setenv works mid-test):
 *   FAKE_CUFILE_FAIL=<entry>[,<entry>...]
 *   <entry> = <function>:<what>[:<skip>[:<times>]]
 *     <function>  cuFileDriverOpen | cuFileDriverClose (or _v2) | cuFileGetVersion |
 *                 cuFileDriverGetProperties | cuFileHandleRegister | cuFileBufRegister |
 *                 cuFileBufDeregister | cuFileRead | cuFileWrite
 *     <what>      5001..5050  the CUfileOpError: control calls return {code, 0}
 *                             ({5011, 999} for CU_FILE_CUDA_DRIVER_ERROR), IO calls -code
 *                 errno<N>    IO calls return -1 with errno = N
 *                             (control calls return CU_FILE_INTERNAL_ERROR)
 *                 short       IO calls move only half the bytes (at least 1) and return that count
 *     <skip>      the first <skip> calls of <function> succeed (default 0)
 *     <times>     then this many calls fail, and later ones succeed again (default: all)
 *   e.g. FAKE_CUFILE_FAIL=cuFileDriverOpen:5001   FAKE_CUFILE_FAIL=cuFileRead:errno5:2:1
 *   A failing cuFileDriverOpen also fails the implicit open of the first handle/buffer/IO call.
 *   FAKE_CUFILE_VERSION=<n>  what cuFileGetVersion reports (default 1140, i.e. GDS 1.14).
 */
#ifndef SLUICE_FAKE_CUFILE_H_
#define SLUICE_FAKE_CUFILE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint64_t fake_cufile_reads(void);         /* cuFileRead calls that returned >= 0 */
uint64_t fake_cufile_bytes_read(void);    /* bytes those calls returned */
uint64_t fake_cufile_writes(void);        /* cuFileWrite calls that returned >= 0 */
uint64_t fake_cufile_bytes_written(void);
uint64_t fake_cufile_live_handles(void);  /* registered and not yet deregistered */
uint64_t fake_cufile_live_buffers(void);
uint64_t fake_cufile_calls(const char *function); /* every call of it, failed ones included */
void fake_cufile_reset_counters(void);

typedef uint64_t (*fake_cufile_counter_fn)(void);
typedef uint64_t (*fake_cufile_calls_fn)(const char *);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_FAKE_CUFILE_H_ */
