/* See raw_enums.c. */
#ifndef SLUICE_CUFILE_TEST_RAW_ENUMS_H_
#define SLUICE_CUFILE_TEST_RAW_ENUMS_H_

#include "cufile.h"

#ifdef __cplusplus
extern "C" {
#endif

void cufile_test_set_handle_type(CUfileDescr_t* d, int type);
void cufile_test_set_opcode(CUfileIOParams_t* p, int opcode);
CUfileError_t cufile_test_set_size_param(int param, size_t value);
CUfileError_t cufile_test_get_size_param(int param, size_t* value);
CUfileError_t cufile_test_set_bool_param(int param, bool value);
CUfileError_t cufile_test_get_string_param(int param, char* value, int len);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CUFILE_TEST_RAW_ENUMS_H_ */
