/* Out-of-range enum values, as a C caller may pass them. Made here in C, where any int converts
 * to an enum type; in C++ such a value is undefined behaviour (and UBSan says so). */
#include "raw_enums.h"

void cufile_test_set_handle_type(CUfileDescr_t* d, int type) {
  d->type = (CUfileFileHandleType)type;
}
void cufile_test_set_opcode(CUfileIOParams_t* p, int opcode) {
  p->opcode = (CUfileOpcode_t)opcode;
}

CUfileError_t cufile_test_set_size_param(int param, size_t value) {
  return cuFileSetParameterSizeT((CUFileSizeTConfigParameter_t)param, value);
}
CUfileError_t cufile_test_get_size_param(int param, size_t* value) {
  return cuFileGetParameterSizeT((CUFileSizeTConfigParameter_t)param, value);
}
CUfileError_t cufile_test_set_bool_param(int param, bool value) {
  return cuFileSetParameterBool((CUFileBoolConfigParameter_t)param, value);
}
CUfileError_t cufile_test_get_string_param(int param, char* value, int len) {
  return cuFileGetParameterString((CUFileStringConfigParameter_t)param, value, len);
}
