// The C header test compiled as C++: cufile.h must be usable from both languages.
#include "header_c_test.c"
