/* The collective programs the NeuronCore collective tests build: one
 * instruction of NRT_NC_COLLECTIVE over R x C float32 HBM tensors, and a
 * program of two such tensors. Shared by test_nc_collective.c (programs of
 * one process) and test_nc_collective_dist.c (programs over processes). */
#pragma once
#include "check.h"

enum { R = 8, C = 16 };

static inline nrt_nc_ap hbm_ap(int32_t tensor) {
  nrt_nc_ap ap = {.tensor = tensor, .dtype = NRT_NC_FLOAT32, .partitions = R,
                  .partition_step = C, .num_free = 1};
  ap.stride[0] = 1;
  ap.count[0] = C;
  return ap;
}

static inline nrt_nc_inst collective(int32_t action, int32_t dst, int32_t src, double mask, double peer,
                              double call, int32_t kind) {
  nrt_nc_inst inst = {.opcode = NRT_NC_COLLECTIVE, .engine = NRT_NC_ENGINE_DMA};
  for (int k = 0; k < NRT_NC_MAX_APS; k++) inst.ap[k] = (nrt_nc_ap){.tensor = -1};
  if (dst >= 0) inst.ap[0] = hbm_ap(dst);
  if (src >= 0) inst.ap[1] = hbm_ap(src);
  inst.func[0] = action;
  inst.func[1] = NRT_NC_ALU_ADD;
  inst.func[2] = kind;
  inst.imm[0] = mask;
  inst.imm[1] = peer;
  inst.imm[3] = call;
  return inst;
}

static inline nrt_nc_program_t create(const nrt_nc_inst *insts, int32_t ni) {
  nrt_nc_geometry g;
  nrt_device_properties props;
  CHECK_OK(nrt_nc_geometry_of_device(0, &g));
  CHECK_OK(nrt_device_get_properties(0, &props));
  nrt_nc_tensor t[] = {{.buffer = NRT_NC_HBM, .bytes = R * C * 4},
                       {.buffer = NRT_NC_HBM, .bytes = R * C * 4}};
  nrt_nc_program_t p = NULL;
  nrt_nc_diagnostic diag;
  CHECK_OK(nrt_nc_program_create(insts, ni, t, 2, &g, &props, &p, &diag));
  return p;
}
