/* Selects, cumulative ops, activate2, nonzero_with_count and dma_transpose.
 *
 * The compute ones work one partition at a time in fp32, as the engines do,
 * and several fold their results into the engine's reduce registers (one
 * fp32 per partition lane, kept across instructions: nki.isa.reduce_cmd).
 */
#include <math.h>
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"
#include "nc/operand.h"

/* The reduce register of the lane that partition p of dst sits on. */
static float *lane_register(const nc_core *core, const nrt_nc_inst *inst, int64_t p) {
  const nrt_nc_ap *dst = &inst->ap[0];
  const nrt_nc_tensor *t = &core->program->tensors[dst->tensor];
  int64_t lane = t->partition_base + dst->partition_start + p * dst->partition_step;
  int64_t lanes = core->program->geometry.partitions;
  return core->regs + (int64_t)inst->engine * lanes + lane;
}

float nc_reduce_command(const nc_core *core, const nrt_nc_inst *inst, int64_t p, int32_t op,
                            float row) {
  uint32_t f = inst->flags;
  if (!(f & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_LOAD | NRT_NC_FLAG_REDUCE_FOLD)))
    return row;
  float *reg = lane_register(core, inst, p);
  if (f & NRT_NC_FLAG_REDUCE_RESET) *reg = nc_reduce_init(op);
  if (f & NRT_NC_FLAG_REDUCE_LOAD) *reg = (float)inst->imm[1];
  if (!(f & NRT_NC_FLAG_REDUCE_FOLD)) return *reg;
  *reg = nc_alu(op, *reg, row);
  return *reg;
}

static float reduce_row(int32_t op, const float *a, int64_t n) {
  float acc = nc_reduce_init(op);
  for (int64_t j = 0; j < n; j++) acc = nc_alu(op, acc, a[j]);
  return acc;
}

static void write_reduce_res(const nc_core *core, const nrt_nc_inst *inst, int64_t p, int32_t op,
                             const float *row, int64_t n) {
  float r = nc_reduce_command(core, inst, p, op, reduce_row(op, row, n));
  if (inst->ap[4].tensor >= 0) nc_store(inst->ap[4].dtype, nc_row(core, &inst->ap[4], p), r);
}

/* Out of line so that -O3 does not unswitch the loop on every op pair
 * (see exec_vector.c's scan). */
__attribute__((noinline)) static float alu_step(int32_t op, float x, float y) {
  return nc_alu(op, x, y);
}

static void exec_activate2(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int rev0 = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0, rev1 = (inst->flags & NRT_NC_FLAG_REVERSE1) != 0;
  int relu_tile = (inst->flags & NRT_NC_FLAG_RELU_TILE) != 0;
  for (int64_t p = 0; p < dst->partitions; p++) {
    float slope = relu_tile ? nc_operand_or_imm(core, &inst->ap[5], p, 0.0) : (float)inst->imm[2];
    float s0 = nc_operand_or_imm(core, &inst->ap[2], p, inst->imm[0]);
    float s1 = nc_operand_or_imm(core, &inst->ap[3], p, inst->imm[1]);
    nc_gather_f32(core, &inst->ap[1], p, a);
    for (int64_t j = 0; j < n; j++) {
      float v = a[j];
      if (inst->func[1]) v = rev0 ? alu_step(inst->func[1], s0, v) : alu_step(inst->func[1], v, s0);
      if (inst->func[2]) v = rev1 ? alu_step(inst->func[2], s1, v) : alu_step(inst->func[2], v, s1);
      a[j] = inst->func[0] == NRT_NC_ACT_PRELU ? (v >= 0.0f ? v : slope * v) : nc_act(inst->func[0], v);
    }
    nc_scatter_f32(core, dst, p, a);
    if (inst->ap[4].tensor >= 0 ||
        (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD)))
      write_reduce_res(core, inst, p, inst->axes, a, n);
  }
}

static void exec_cumulative(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int rev0 = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0;
  int32_t op0 = inst->func[0], op1 = inst->func[1];
  uint32_t f = inst->flags;
  for (int64_t p = 0; p < dst->partitions; p++) {
    float s0 = nc_operand_or_imm(core, &inst->ap[2], p, inst->imm[0]);
    float *reg = lane_register(core, inst, p);
    float acc = (f & NRT_NC_FLAG_REDUCE_LOAD) ? (float)inst->imm[1]
                : (f & NRT_NC_FLAG_REDUCE_FOLD) && !(f & NRT_NC_FLAG_REDUCE_RESET) ? *reg
                : nc_reduce_init(op1);
    nc_gather_f32(core, &inst->ap[1], p, a);
    for (int64_t j = 0; j < n; j++) {
      float v = rev0 ? alu_step(op0, s0, a[j]) : alu_step(op0, a[j], s0);
      acc = alu_step(op1, v, acc); /* reg = op1(op0(x, imm0), reg), as the ISA reference writes it */
      a[j] = acc;
    }
    nc_scatter_f32(core, dst, p, a);
    if (f & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_LOAD | NRT_NC_FLAG_REDUCE_FOLD)) *reg = acc;
  }
}

static void exec_select_reduce(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int invert = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0;
  for (int64_t p = 0; p < dst->partitions; p++) {
    float other = nc_operand_or_imm(core, &inst->ap[3], p, inst->imm[0]);
    nc_gather_f32(core, &inst->ap[1], p, a);
    nc_gather_f32(core, &inst->ap[2], p, b);
    for (int64_t j = 0; j < n; j++) a[j] = ((a[j] != 0.0f) != invert) ? b[j] : other;
    nc_scatter_f32(core, dst, p, a);
    if (inst->ap[4].tensor >= 0 || (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD)))
      write_reduce_res(core, inst, p, NRT_NC_ALU_MAXIMUM, a, n);
  }
}

static void exec_range_select(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  float start = (float)inst->imm[0], other = (float)inst->imm[1];
  for (int64_t p = 0; p < dst->partitions; p++) {
    float b0 = nc_operand_or_imm(core, &inst->ap[2], p, 0.0);
    float b1 = nc_operand_or_imm(core, &inst->ap[3], p, 0.0);
    nc_gather_f32(core, &inst->ap[1], p, a);
    for (int64_t j = 0; j < n; j++) {
      float index = (float)j + start;
      int keep = alu_step(inst->func[0], index, b0) != 0.0f && alu_step(inst->func[1], index, b1) != 0.0f;
      if (!keep) a[j] = other;
    }
    nc_scatter_f32(core, dst, p, a);
    if (inst->ap[4].tensor >= 0 || (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD)))
      write_reduce_res(core, inst, p, inst->func[2], a, n);
  }
}

/* GpSimd: each of the 8 cores reads and writes its first partition only. */
static void exec_nonzero(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(src);
  int32_t *out = (int32_t *)b;
  int32_t offset = (int32_t)inst->imm[0], pad = (int32_t)inst->imm[1];
  for (int64_t p = 0; p < src->partitions; p += 16) {
    nc_gather_f32(core, src, p, a);
    int32_t count = 0;
    for (int64_t j = 0; j < n; j++)
      if (a[j] != 0.0f) out[count++] = (int32_t)j + offset;
    for (int64_t j = count; j < n; j++) out[j] = pad;
    out[n] = count;
    nc_scatter_bits(core, dst, p, out);
  }
}

/* Address of free element j of partition p of ap. */
static uint8_t *element(const nc_core *core, const nrt_nc_ap *ap, int64_t p, int64_t j) {
  int64_t off = 0;
  for (int d = NRT_NC_MAX_FREE_DIMS - 1; d >= 0; d--) {
    off += (j % ap->count[d]) * ap->stride[d];
    j /= ap->count[d];
  }
  return nc_row(core, ap, p) + off * (int64_t)nrt_nc_dtype_size(ap->dtype);
}

/* The indirect form's index of gathered row r: the index tile read
 * partition first (row r = column r / P, partition r % P). */
static uint32_t gathered_index(const nc_core *core, const nrt_nc_ap *idx, int64_t r, uint8_t *buf) {
  int64_t parts = idx->partitions, cols = nc_ap_free_elems(idx);
  nc_gather_raw(core, idx, r % parts, buf);
  uint32_t v;
  memcpy(&v, buf + (size_t)((r / parts) % (cols ? cols : 1)) * 4, 4);
  return v;
}

static void exec_dma_transpose(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  if (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) { /* src where the word puts it (imm2, imm3) */
    nrt_nc_inst moved;
    if (nc_scalar_offset_move(core, inst, (int64_t)inst->imm[2], (int64_t)inst->imm[3], &moved))
      exec_dma_transpose(core, &moved, a);
    return;
  }
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t f = nc_ap_free_elems(src);
  /* src [P, M, L] (M the middle dims, flattened) to dst [L, M, P]: element
   * (p, m, l) goes to partition l, free index m * P + p. The indirect form
   * reads row p of src from the HBM row its index names; an index past the
   * tensor's rows fails the run (oob_mode=error) or, with oob_mode=skip,
   * leaves that row's elements of dst as they were. */
  int indirect = (inst->flags & 1u) != 0;
  int64_t last = inst->imm[0] > 0 ? (int64_t)inst->imm[0] : f,
          parts = indirect ? (int64_t)inst->imm[1] : src->partitions;
  size_t size = nrt_nc_dtype_size(src->dtype);
  uint8_t *row = (uint8_t *)a;
  uint8_t *index_row = row + (size_t)(f ? f : 1) * size;
  for (int64_t p = 0; indirect && !(inst->flags & 2u) && p < parts; p++) { /* oob_mode=error */
    uint32_t at = gathered_index(core, &inst->ap[2], p, index_row);
    if ((double)at >= inst->imm[2]) {
      *core->fault = rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE,
                             "NKI instruction %d: [oob_mode] index %u (row %lld of the gathered "
                             "rows) is out of bounds for the %g rows of the indexed tensor "
                             "(oob_mode=error; oob_mode=skip skips it)",
                             (int)(inst - core->program->insts), at, (long long)p, inst->imm[2]);
      return;
    }
  }
  for (int64_t p = 0; p < parts; p++) {
    if (indirect) {
      uint32_t at = gathered_index(core, &inst->ap[2], p, index_row);
      if ((double)at >= inst->imm[2]) continue;
      nrt_nc_ap one = *src;
      one.offset += (int64_t)at * (int64_t)inst->imm[3];
      nc_gather_raw(core, &one, 0, row);
    } else {
      nc_gather_raw(core, src, p, row);
    }
    for (int64_t j = 0; j < f; j++)
      memcpy(element(core, dst, j % last, (j / last) * parts + p), row + (size_t)j * size, size);
  }
}

void nc_exec_select(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  switch (inst->opcode) {
    case NRT_NC_ACTIVATE2: exec_activate2(core, inst, a); break;
    case NRT_NC_SCALAR_CUMULATIVE: exec_cumulative(core, inst, a); break;
    case NRT_NC_SELECT_REDUCE: exec_select_reduce(core, inst, a, b); break;
    case NRT_NC_RANGE_SELECT: exec_range_select(core, inst, a); break;
    case NRT_NC_NONZERO_WITH_COUNT: exec_nonzero(core, inst, a, b); break;
    case NRT_NC_DMA_TRANSPOSE: exec_dma_transpose(core, inst, a); break;
    default: break;
  }
}
