/* Rules of activate2, tensor_scalar_cumulative, select_reduce, range_select,
 * nonzero_with_count and dma_transpose (the constraints their ISA reference
 * pages state), checked once when a program is created.
 */
#include "nc/nc_internal.h"

/* dma_transpose flags (torchneuron/nki/isa_select.py). */
#define NC_DMA_TRANSPOSE_INDIRECT 1u
#define INVALID NRT_ERROR_INVALID_ARGUMENT

/* Operand k is absent, or has dst's shape (per_partition 0) or one value
 * per partition (per_partition 1), on dst's partitions. */
static nrt_status check_operand(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                                int per_partition, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *ap = &inst->ap[k], *dst = &inst->ap[0];
  if (ap->tensor < 0) return NRT_SUCCESS;
  int64_t want = per_partition ? 1 : nc_ap_free_elems(dst);
  if (ap->partitions != dst->partitions || nc_ap_free_elems(ap) != want)
    return nc_fail(diag, i, ap->tensor, per_partition ? "operand_shape" : "shape_mismatch", INVALID,
                   "%s must be [%d, %lld], got [%d, %lld]", name, dst->partitions, (long long)want,
                   ap->partitions, (long long)nc_ap_free_elems(ap));
  if (nc_first_partition(p, ap) != nc_first_partition(p, dst) || ap->partition_step != dst->partition_step)
    return nc_fail(diag, i, ap->tensor, "same_partitions", INVALID,
                   "%s is on other partitions than dst; the engine reads and writes the same "
                   "partitions", name);
  return NRT_SUCCESS;
}

static int is_float(int32_t dtype) { return dtype >= NRT_NC_FLOAT8_E4M3; }
static int is_32bit_int(int32_t dtype) { return dtype == NRT_NC_INT32 || dtype == NRT_NC_UINT32; }
static int is_compare(int32_t op) { return op >= NRT_NC_ALU_EQUAL && op <= NRT_NC_ALU_LESS_EQUAL; }
static int is_arith(int32_t op) {
  return (op >= NRT_NC_ALU_ADD && op <= NRT_NC_ALU_MOD) || op == NRT_NC_ALU_ABS_MIN ||
         op == NRT_NC_ALU_FMOD;
}
static int is_min_max_add(int32_t op) {
  return op == NRT_NC_ALU_ADD || op == NRT_NC_ALU_MAXIMUM || op == NRT_NC_ALU_MINIMUM;
}

static nrt_status check_activate2(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int32_t op0 = inst->func[1], op1 = inst->func[2];
  /* The six (op0, op1) pairs the ISA reference lists. */
  int ok = (op0 == NRT_NC_ALU_MULTIPLY && (op1 == NRT_NC_ALU_ADD || op1 == NRT_NC_ALU_SUBTRACT ||
                                           op1 == NRT_NC_ALU_NONE)) ||
           ((op0 == NRT_NC_ALU_ADD || op0 == NRT_NC_ALU_SUBTRACT || op0 == NRT_NC_ALU_NONE) &&
            op1 == NRT_NC_ALU_NONE);
  if (!ok)
    return nc_fail(diag, i, -1, "activate2_ops", INVALID,
                   "activate2's (op0, op1) must be (multiply, add), (multiply, subtract), "
                   "(multiply, bypass), (add, bypass), (subtract, bypass) or (bypass, bypass); "
                   "got ALU ops %d, %d", op0, op1);
  int relu_tile = (inst->flags & NRT_NC_FLAG_RELU_TILE) != 0;
  if (relu_tile != (inst->ap[5].tensor >= 0))
    return nc_fail(diag, i, -1, "operand", INVALID,
                   "activate2's relu_param tile (operand 5) and its flag RELU_TILE disagree");
  int reduces = inst->ap[4].tensor >= 0 ||
                (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD));
  if (reduces && !is_min_max_add(inst->axes))
    return nc_fail(diag, i, -1, "activate2_ops", INVALID,
                   "activate2 reduces with add, maximum or minimum");
  if (reduces && inst->engine != NRT_NC_ENGINE_SCALAR)
    return nc_fail(diag, i, -1, "engine", INVALID,
                   "only the Scalar engine reduces in activate2 (the GpSimd form cannot)");
  return NRT_SUCCESS;
}

static nrt_status check_cumulative(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int32_t op0 = inst->func[0], op1 = inst->func[1];
  if (!is_arith(op0))
    return nc_fail(diag, i, -1, "cumulative_ops", INVALID,
                   "tensor_scalar_cumulative's op0 must be an arithmetic op, got ALU op %d", op0);
  if (op1 != NRT_NC_ALU_ADD && op1 != NRT_NC_ALU_SUBTRACT && op1 != NRT_NC_ALU_MULTIPLY &&
      op1 != NRT_NC_ALU_MAXIMUM && op1 != NRT_NC_ALU_MINIMUM)
    return nc_fail(diag, i, -1, "cumulative_ops", INVALID,
                   "tensor_scalar_cumulative accumulates with add, subtract, multiply, maximum or "
                   "minimum, got ALU op %d", op1);
  for (int k = 0; k < 2; k++) {
    int32_t d = inst->ap[k].dtype;
    if (is_32bit_int(d) || d == NRT_NC_TFLOAT32)
      return nc_fail(diag, i, inst->ap[k].tensor, "dtype", INVALID,
                     "tensor_scalar_cumulative takes bf16, fp16, fp32, fp8 and 8/16-bit integer "
                     "tiles (no int32/uint32)");
  }
  return NRT_SUCCESS;
}

static nrt_status check_select_reduce(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int32_t pred = inst->ap[1].dtype, on_true = inst->ap[2].dtype;
  if (inst->ap[1].tensor < 0 || inst->ap[2].tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "select_reduce needs predicate and on_true");
  if (pred != NRT_NC_INT8 && pred != NRT_NC_UINT8 && pred != NRT_NC_INT16 && pred != NRT_NC_UINT16)
    return nc_fail(diag, i, inst->ap[1].tensor, "dtype", INVALID,
                   "select_reduce's predicate is an int8/uint8/int16/uint16 tile");
  if (is_32bit_int(on_true) || on_true == NRT_NC_TFLOAT32)
    return nc_fail(diag, i, inst->ap[2].tensor, "dtype", INVALID,
                   "select_reduce's on_true cannot be tfloat32, int32 or uint32");
  if (inst->ap[4].tensor >= 0 && !is_float(inst->ap[4].dtype))
    return nc_fail(diag, i, inst->ap[4].tensor, "dtype", INVALID,
                   "select_reduce's reduce_res is a float tile");
  return NRT_SUCCESS;
}

static nrt_status check_range_select(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  if (inst->ap[1].tensor < 0 || inst->ap[2].tensor < 0 || inst->ap[3].tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID,
                   "range_select needs on_true_tile, bound0 and bound1");
  if (!is_compare(inst->func[0]) || !is_compare(inst->func[1]))
    return nc_fail(diag, i, -1, "range_select_ops", INVALID,
                   "range_select's comp_op0 / comp_op1 must be comparisons (nl.less, "
                   "nl.greater_equal, ...)");
  if (!is_min_max_add(inst->func[2]))
    return nc_fail(diag, i, -1, "range_select_ops", INVALID,
                   "range_select reduces with maximum, minimum or add");
  return NRT_SUCCESS;
}

static nrt_status check_nonzero(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  if (src->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "nonzero_with_count needs src");
  if (dst->partitions != src->partitions || nc_ap_free_elems(dst) != nc_ap_free_elems(src) + 1)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst must be [%d, %lld] (one more element than src, for the count), got "
                   "[%d, %lld]", src->partitions, (long long)nc_ap_free_elems(src) + 1,
                   dst->partitions, (long long)nc_ap_free_elems(dst));
  if (!is_32bit_int(dst->dtype))
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "nonzero_with_count writes int32 / uint32 indices");
  if (nc_first_partition(p, src) != nc_first_partition(p, dst))
    return nc_fail(diag, i, src->tensor, "same_partitions", INVALID,
                   "src and dst must start at the same partition (each GpSimd core reads and "
                   "writes its own first partition)");
  return NRT_SUCCESS;
}

static nrt_status check_dma_transpose(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  if (src->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "dma_transpose needs src");
  if (nrt_nc_dtype_size(src->dtype) != 2 || dst->dtype != src->dtype)
    return nc_fail(diag, i, src->tensor, "dma_transpose_dtype", INVALID,
                   "dma_transpose moves 2-byte elements (bf16, fp16, int16, uint16) without "
                   "conversion: src and dst share one such dtype");
  int64_t f = nc_ap_free_elems(src);
  int32_t parts = src->partitions;
  if (inst->flags & NC_DMA_TRANSPOSE_INDIRECT) {
    /* src is row 0 of the gathered rows (one partition of the HBM tensor),
     * imm1 the rows gathered, imm2 the tensor's rows, imm3 its row step;
     * ap2 the uint32 SBUF index tile. */
    const nrt_nc_ap *idx = &inst->ap[2];
    if (idx->tensor < 0 || idx->dtype != NRT_NC_UINT32 ||
        p->tensors[idx->tensor].buffer != NRT_NC_SBUF)
      return nc_fail(diag, i, idx->tensor, "dma_transpose_indirect", INVALID,
                     "the indirect dma_transpose needs a uint32 SBUF index tile");
    if (p->tensors[src->tensor].buffer != NRT_NC_HBM || src->partitions != 1)
      return nc_fail(diag, i, src->tensor, "dma_transpose_indirect", INVALID,
                     "the indirect dma_transpose reads rows of an HBM tensor");
    int64_t count = (int64_t)inst->imm[1];
    if (!(inst->imm[1] >= 1 && inst->imm[2] >= 1 && inst->imm[3] >= 0) ||
        count != (int64_t)idx->partitions * nc_ap_free_elems(idx) || count > 128 * 128)
      return nc_fail(diag, i, idx->tensor, "dma_transpose_indirect", INVALID,
                     "the indirect dma_transpose gathers one row per index (%g rows, %lld "
                     "indices)", inst->imm[1],
                     (long long)idx->partitions * nc_ap_free_elems(idx));
    parts = (int32_t)count;
    nrt_status s = nc_needs_target(p, i, "dma_transpose (indirect)", NRT_TARGET_TRN2, diag);
    if (s) return s;
  } else if (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) {
    nrt_status s = nc_check_transpose_offset(p, i, diag);
    if (s) return s;
  } else if (inst->ap[2].tensor >= 0) {
    return nc_fail(diag, i, inst->ap[2].tensor, "operand", INVALID,
                   "only the indirect dma_transpose takes indices");
  }
  double last_imm = inst->imm[0];
  if (!(last_imm >= 0 && last_imm <= (double)f) || (last_imm > 0 && f % (int64_t)last_imm))
    return nc_fail(diag, i, src->tensor, "dma_transpose_axes", INVALID,
                   "dma_transpose: the last dim %g does not divide src's %lld elements per "
                   "partition", last_imm, (long long)f);
  int64_t last = last_imm > 0 ? (int64_t)last_imm : f, mid = f / last;
  if (dst->partitions != last || nc_ap_free_elems(dst) != mid * parts)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "transposing [%d, %lld x %lld] needs dst [%lld, %lld x %d], got [%d, %lld]",
                   parts, (long long)mid, (long long)last, (long long)last,
                   (long long)mid, parts, dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  return NRT_SUCCESS;
}

nrt_status nc_check_select(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  nrt_status s;
  switch (inst->opcode) {
    case NRT_NC_DMA_TRANSPOSE: return check_dma_transpose(p, i, diag);
    case NRT_NC_NONZERO_WITH_COUNT:
      if ((s = check_nonzero(p, i, diag))) return s;
      /* Generation rules last, so that the others show on every device. */
      return nc_needs_target(p, i, "nonzero_with_count", NRT_TARGET_TRN2, diag);
    case NRT_NC_ACTIVATE2:
      if ((s = check_activate2(p, i, diag))) return s;
      break;
    case NRT_NC_SCALAR_CUMULATIVE:
      if ((s = check_cumulative(p, i, diag))) return s;
      break;
    case NRT_NC_SELECT_REDUCE:
      if ((s = check_select_reduce(p, i, diag))) return s;
      break;
    case NRT_NC_RANGE_SELECT:
      if ((s = check_range_select(p, i, diag))) return s;
      break;
    default: return NRT_SUCCESS;
  }
  /* Element-wise operands: which ones are per-partition scalars. */
  static const char per_partition[][NRT_NC_MAX_APS] = {
      {0, 0, 1, 1, 1, 1}, /* activate2: data, imm0, imm1, reduce_res, relu_param */
      {0, 0, 1, 0, 0}, /* cumulative: src, imm0 */
      {0, 0, 0, 1, 1}, /* select_reduce: predicate, on_true, on_false, reduce_res */
      {0, 0, 1, 1, 1}, /* range_select: on_true, bound0, bound1, reduce_res */
  };
  const char *row = per_partition[inst->opcode - NRT_NC_ACTIVATE2];
  static const char *const names[][NRT_NC_MAX_APS] = {
      {"dst", "data", "imm0", "imm1", "reduce_res", "relu_param"},
      {"dst", "src", "imm0", "", "", ""},
      {"dst", "predicate", "on_true", "on_false", "reduce_res", ""},
      {"dst", "on_true_tile", "bound0", "bound1", "reduce_res", ""},
  };
  for (int k = 1; k < NRT_NC_MAX_APS; k++)
    if ((s = check_operand(p, i, k, names[inst->opcode - NRT_NC_ACTIVATE2][k], row[k], diag)))
      return s;
  if (inst->opcode == NRT_NC_RANGE_SELECT)
    return nc_needs_target(p, i, "range_select", NRT_TARGET_TRN2, diag);
  /* "Available only on NeuronCore-v4 and newer" (nki.isa.activate2). */
  if (inst->opcode == NRT_NC_ACTIVATE2)
    return nc_needs_target(p, i, "activate2", NRT_TARGET_TRN3, diag);
  return NRT_SUCCESS;
}
