/* Runs a test program at one ISA level: `isa_gate LEVEL PROGRAM [ARGS...]`
 * sets TORCHNEURON_ISA=LEVEL and executes PROGRAM, or, when this CPU cannot
 * run LEVEL, prints why and exits with 77, which ctest reports as Skipped.
 * So every level is a test of its own, and a run on a host without AVX-512
 * shows the AVX-512 variants as skipped rather than hiding them.
 *
 * `isa_gate amx PROGRAM` runs PROGRAM at the host's own level (no
 * TORCHNEURON_ISA, which AMX needs: a forced level never uses it) where the
 * CPU has AMX-BF16, and skips it elsewhere: there the host's own level is
 * the highest one the gated runs already cover. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_isa.h"

#define SKIPPED 77

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "amx") == 0) {
    /* Unset before the runtime first reads it (rt_isa_amx_bf16 decides). */
    if (unsetenv("TORCHNEURON_ISA") != 0) {
      perror("isa_gate: unsetenv");
      return 2;
    }
    if (!rt_isa_amx_bf16()) {
      printf("isa_gate: amx skipped: this CPU has no AMX-BF16 (the %s run covers its own level)\n",
             rt_isa_name(rt_isa_host_best()));
      return SKIPPED;
    }
    printf("isa_gate: %s at the host's own level, with AMX\n", argv[2]);
    fflush(stdout);
    execv(argv[2], argv + 2);
    perror("isa_gate: execv");
    return 2;
  }
  nrt_isa level;
  if (argc < 3 || !rt_isa_parse(argv[1], &level)) {
    fprintf(stderr, "usage: isa_gate baseline|avx2|avx512|amx PROGRAM [ARGS...]\n");
    return 2;
  }
  nrt_isa best = rt_isa_host_best();
  if (level > best) {
    printf("isa_gate: %s skipped: this CPU supports at most %s\n", argv[1], rt_isa_name(best));
    return SKIPPED;
  }
  if (setenv("TORCHNEURON_ISA", argv[1], 1) != 0) {
    perror("isa_gate: setenv");
    return 2;
  }
  printf("isa_gate: %s at TORCHNEURON_ISA=%s (host's best: %s)\n", argv[2], argv[1],
         rt_isa_name(best));
  fflush(stdout);
  execv(argv[2], argv + 2);
  perror("isa_gate: execv");
  return 2;
}
