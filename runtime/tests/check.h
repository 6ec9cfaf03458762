/* A minimal test harness: CHECK(cond) and CHECK_OK(status) report the file
 * and line and count failures; RUN(test) runs a test function; main returns
 * the failure count so ctest sees it. */
#ifndef NEURONRT_TEST_CHECK_H
#define NEURONRT_TEST_CHECK_H

#include <stdio.h>
#include "neuronrt/nrt.h"

static int check_failures;

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                   \
      check_failures++;                                                 \
    }                                                                   \
  } while (0)

#define CHECK_STATUS(expr, expected)                                        \
  do {                                                                      \
    nrt_status check_s_ = (expr);                                           \
    if (check_s_ != (expected)) {                                           \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__, \
              __LINE__, #expr, nrt_status_string(check_s_), nrt_last_error(), \
              nrt_status_string(expected));                                 \
      check_failures++;                                                     \
    }                                                                       \
  } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, NRT_SUCCESS)

/* For a test's oracle and array helpers: plain loops over the test's own
 * arrays, run on the test's thread before or after a kernel. ThreadSanitizer
 * has no race to find there, and instrumenting them took most of the TSan
 * run (test_gemm: 4 minutes, 80% of it in the twin's element reads). */
#define ORACLE_CODE __attribute__((no_sanitize("thread")))

#define RUN(test)                          \
  do {                                     \
    int before_ = check_failures;          \
    test();                                \
    fprintf(stderr, "%s %s\n",             \
            check_failures == before_ ? "ok  " : "FAIL", #test); \
  } while (0)

#define CHECK_MAIN_RESULT() (check_failures == 0 ? 0 : 1)

#endif
