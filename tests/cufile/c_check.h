/* The checks of the C cuFile programs (cuda_python_sequence.c, nvidia_samples.c): a failed one
 * prints its line and condition and counts, so a run reports every difference, not the first. */
#ifndef SLUICE_TESTS_CUFILE_C_CHECK_H_
#define SLUICE_TESTS_CUFILE_C_CHECK_H_

#include <stdio.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)
#define OK(call) CHECK((call).err == CU_FILE_SUCCESS)

#endif /* SLUICE_TESTS_CUFILE_C_CHECK_H_ */
