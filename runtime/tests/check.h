/* A minimal test harness: CHECK(cond) and CHECK_OK(status) report the file
 * and line and count failures; RUN(test) runs a test function; main returns
 * the failure count so ctest sees it.
 *
 * With CHECK_EXIT_ON_FAILURE=1 in the environment the first failed check
 * ends the process with exit(1) instead: the fault-injection sweep
 * (faultinject.py) sets it, because after an injected out-of-memory the
 * rest of a test would only run on the results of a call that failed, and
 * the first failure is the one that says whether it was a clean status. */
#ifndef NEURONRT_TEST_CHECK_H
#define NEURONRT_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "neuronrt/nrt.h"

static int check_failures;

static inline void check_failed(void) {
  check_failures++;
  const char *stop = getenv("CHECK_EXIT_ON_FAILURE");
  if (stop && strcmp(stop, "1") == 0) exit(1);
}

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                   \
      check_failed();                                                   \
    }                                                                   \
  } while (0)

#define CHECK_STATUS(expr, expected)                                        \
  do {                                                                      \
    nrt_status check_s_ = (expr);                                           \
    if (check_s_ != (expected)) {                                           \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__, \
              __LINE__, #expr, nrt_status_string(check_s_), nrt_last_error(), \
              nrt_status_string(expected));                                 \
      check_failed();                                                       \
    }                                                                       \
  } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, NRT_SUCCESS)

/* Work launched behind work that fails on the same stream is queued and
 * then skipped or, once the failure has happened, refused at once with the
 * failure's status: which one depends on timing, and both are correct. */
#define CHECK_SKIPPED_OR_REFUSED(expr, refused)                               \
  do {                                                                      \
    nrt_status check_s_ = (expr);                                           \
    if (check_s_ != NRT_SUCCESS && check_s_ != (refused)) {                 \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s or %s\n",    \
              __FILE__, __LINE__, #expr, nrt_status_string(check_s_),       \
              nrt_last_error(), nrt_status_string(NRT_SUCCESS),             \
              nrt_status_string(refused));                                  \
      check_failed();                                                       \
    }                                                                       \
  } while (0)

/* For a test's oracle and array helpers: plain loops over the test's own
 * arrays, run on the test's thread before or after a kernel. ThreadSanitizer
 * has no race to find there, and instrumenting them took most of the TSan
 * run (test_gemm: 4 minutes, 80% of it in the twin's element reads); under
 * AddressSanitizer they took half of test_gemm's time, checking the test's
 * own reads rather than the runtime's. */
#define ORACLE_CODE __attribute__((no_sanitize("thread"), no_sanitize("address")))

/* CHECK_SKIP=test_a,test_b skips those tests of a file: the ThreadSanitizer
 * build skips the long sweeps against exact oracles, whose kernels' threads
 * the file's other tests exercise too (runtime/CMakeLists.txt). */
static inline int check_skipped(const char *name) {
  const char *list = getenv("CHECK_SKIP");
  size_t n = strlen(name);
  for (const char *p = list ? strstr(list, name) : NULL; p; p = strstr(p + 1, name))
    if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

#define RUN(test)                          \
  do {                                     \
    if (check_skipped(#test)) {            \
      fprintf(stderr, "skip %s\n", #test); \
      break;                               \
    }                                      \
    int before_ = check_failures;          \
    test();                                \
    fprintf(stderr, "%s %s\n",             \
            check_failures == before_ ? "ok  " : "FAIL", #test); \
  } while (0)

#define CHECK_MAIN_RESULT() (check_failures == 0 ? 0 : 1)

#endif
