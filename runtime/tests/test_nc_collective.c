/* Programs of a launch grid run interleaved at their collective calls
 * (nrt_nc_programs_run): a reduction, a swap through staged sources, and
 * programs that disagree on their calls. */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nc_collective_program.h"

/* Each program: out = sum over both of in (call 0), then in = the peer's out
 * (call 1), in place of its own source: staged before written. */
static void test_reduce_then_swap(void) {
  float in[2][R * C], out[2][R * C];
  for (int i = 0; i < R * C; i++) in[0][i] = (float)i, in[1][i] = 0.5f * (float)i + 1;
  nrt_nc_program_t p[2];
  for (int k = 0; k < 2; k++) {
    nrt_nc_inst insts[3] = {collective(NRT_NC_COLLECTIVE_REDUCE, 1, 0, 3, 0, 0, 3),
                            collective(NRT_NC_COLLECTIVE_NONE, -1, 1, 0, 0, 1, 3),
                            collective(NRT_NC_COLLECTIVE_COPY, 0, -1, 0, 1 - k, 1, 3)};
    insts[1].func[2] = insts[2].func[2] = 7;
    p[k] = create(insts, 3);
  }
  void *h0[] = {in[0], out[0]}, *h1[] = {in[1], out[1]};
  void *const *hbm[] = {h0, h1};
  CHECK_OK(nrt_nc_programs_run(p, 2, hbm));
  int bad = 0;
  for (int i = 0; i < R * C; i++) {
    float sum = (float)i + (0.5f * (float)i + 1);
    bad += out[0][i] != sum || out[1][i] != sum || in[0][i] != sum || in[1][i] != sum;
  }
  CHECK(bad == 0);
  nrt_nc_estimate est;
  CHECK_OK(nrt_nc_program_estimate(p[0], &est, NULL, NULL, NULL));
  CHECK(est.dma_bytes == 2 * R * C * 4 + R * C * 4); /* both contributions, then one copy */
  nrt_nc_program_destroy(p[0]);
  nrt_nc_program_destroy(p[1]);
}

/* Program 1 makes no call: program 0 would wait for ever. */
static void test_disagreeing_programs_fail(void) {
  nrt_nc_inst barrier = collective(NRT_NC_COLLECTIVE_NONE, -1, -1, 0, 0, 0, 3);
  barrier.func[2] = 1;
  nrt_nc_inst copy = {.opcode = NRT_NC_DMA_COPY, .engine = NRT_NC_ENGINE_DMA};
  for (int k = 0; k < NRT_NC_MAX_APS; k++) copy.ap[k] = (nrt_nc_ap){.tensor = -1};
  copy.ap[0] = hbm_ap(1);
  copy.ap[1] = hbm_ap(0);
  nrt_nc_program_t p[2] = {create(&barrier, 1), create(&copy, 1)};
  float in[R * C] = {0}, out[R * C];
  void *h[] = {in, out};
  void *const *hbm[] = {h, h};
  CHECK_STATUS(nrt_nc_programs_run(p, 2, hbm), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "deadlock") && strstr(nrt_last_error(), "core_barrier"));
  /* A receive from a peer whose slot sends nothing. */
  nrt_nc_inst recv = collective(NRT_NC_COLLECTIVE_COPY, 1, -1, 0, 1, 0, 3);
  recv.func[2] = 1;
  nrt_nc_program_t q[2] = {create(&recv, 1), create(&barrier, 1)};
  CHECK_STATUS(nrt_nc_programs_run(q, 2, hbm), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "sends nothing") != NULL);
  for (int k = 0; k < 2; k++) nrt_nc_program_destroy(p[k]), nrt_nc_program_destroy(q[k]);
}

int main(void) {
  RUN(test_reduce_then_swap);
  RUN(test_disagreeing_programs_fail);
  return CHECK_MAIN_RESULT();
}
