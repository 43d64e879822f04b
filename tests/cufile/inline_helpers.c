/*
 * Calls every helper cufile.h defines inline (cufileop_status_error, IS_CUFILE_ERR,
 * CUFILE_ERRSTR, IS_CUDA_ERR, CU_FILE_CUDA_ERR), on values the compiler cannot fold.
 * no-cufile-symbols.cmake compiles it against the header as installed and checks with nm -u that
 * it needs no symbol of any cuFile library. With -DCALL_THE_LIBRARY it also calls one real entry
 * point: the control showing that the check does see a cuFile reference when there is one.
 */
#include <cufile.h>
#include <stdio.h>

int main(int argc, char** argv) {
  (void)argv;
  const CUfileOpError code = (CUfileOpError)(CUFILEOP_BASE_ERR + argc);
  const CUfileError_t st = {code, (CUresult)argc};
  const ssize_t ret = -(ssize_t)code;
  printf("%s | %s | %d %d %d\n", cufileop_status_error(code), CUFILE_ERRSTR(ret),
         IS_CUFILE_ERR(ret), IS_CUDA_ERR(st), (int)CU_FILE_CUDA_ERR(st));
#ifdef CALL_THE_LIBRARY
  return (int)cuFileDriverOpen().err;
#else
  return 0;
#endif
}
