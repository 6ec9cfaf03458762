/* Rules of quantize_mx and nc_matmul_mx (NKI ISA reference, NeuronCore-v4),
 * and where the packed MX dtypes may appear at all. docs/nki.md lists the
 * rules by name.
 */
#include "nc/nc_internal.h"
#include "nc/numerics_mx.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static const char *const target_names[] = {"", "trn1 (NeuronCore-v2)", "trn2 (NeuronCore-v3)",
                                           "trn3 (NeuronCore-v4)"};

nrt_status nc_needs_target(const nrt_nc_program_t p, int32_t i, const char *name, int32_t since,
                           nrt_nc_diagnostic *diag) {
  if (p->target >= since) return NRT_SUCCESS;
  int32_t t = p->target >= 1 && p->target <= 3 ? p->target : 0;
  return nc_fail(diag, i, -1, "nc_version", INVALID,
                 "%s needs %s or newer; the device is %s (NEURON_PLATFORM_TARGET_OVERRIDE)", name,
                 target_names[since], target_names[t]);
}

static int is_fp8_x4(int32_t dtype) {
  return dtype == NRT_NC_FLOAT8_E4M3FN_X4 || dtype == NRT_NC_FLOAT8_E5M2_X4;
}

/* Packed dtypes are read only by nc_matmul_mx, written only by quantize_mx,
 * and otherwise only copied bit-exactly (same dtype on both sides). */
nrt_status nc_check_packed(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int op = inst->opcode;
  for (int k = 0; k < NRT_NC_MAX_APS; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0 || !nc_is_packed_dtype(ap->dtype)) continue;
    if (op == NRT_NC_QUANTIZE_MX && k == 0) continue;
    if (op == NRT_NC_MATMUL_MX && (k == 1 || k == 2)) continue;
    if ((op == NRT_NC_DMA_COPY || op == NRT_NC_TENSOR_COPY) && k <= 1 &&
        inst->ap[0].dtype == inst->ap[1].dtype && !(inst->flags & NRT_NC_FLAG_ACCUMULATE))
      continue;
    return nc_fail(diag, i, ap->tensor, "packed_dtype", INVALID,
                   "operand %d has a packed MX dtype (float8_e4m3fn_x4 / float8_e5m2_x4 / "
                   "float4_e2m1fn_x4): only quantize_mx writes it, nc_matmul_mx reads it, and "
                   "copies move it unchanged (same dtype on both sides)", k);
  }
  return NRT_SUCCESS;
}

static nrt_status all_sbuf(const nrt_nc_program_t p, int32_t i, int first, int last,
                           const char *name, nrt_nc_diagnostic *diag) {
  for (int k = first; k <= last; k++) {
    const nrt_nc_ap *ap = &p->insts[i].ap[k];
    if (ap->tensor >= 0 && p->tensors[ap->tensor].buffer != NRT_NC_SBUF)
      return nc_fail(diag, i, ap->tensor, "mx_sbuf", INVALID,
                     "%s reads and writes SBUF only; operand %d is not in SBUF", name, k);
  }
  return NRT_SUCCESS;
}

/* A scale pattern for `partitions` data partitions (one row per block of 8,
 * four rows per 32-partition quadrant) and `cols` columns. */
static nrt_status scale_shape(const nrt_nc_program_t p, int32_t i, int k, int32_t partitions,
                              int64_t cols, const char *name, nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k];
  if (ap->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "%s is missing", name);
  if (ap->dtype != NRT_NC_FLOAT8_E8M0FNU && ap->dtype != NRT_NC_UINT8)
    return nc_fail(diag, i, ap->tensor, "dtype", INVALID,
                   "%s must be float8_e8m0fnu (or uint8 holding E8M0 bytes)", name);
  int32_t blocks = partitions / 8, rows = (blocks - 1) / 4 * 32 + (blocks - 1) % 4 + 1;
  if (ap->partitions < rows || nc_ap_free_elems(ap) != cols)
    return nc_fail(diag, i, ap->tensor, "mx_scale_shape", INVALID,
                   "%s needs at least %d partitions (4 per 32-partition quadrant of the data) "
                   "and %lld elements per partition, got [%d, %lld]", name, rows,
                   (long long)cols, ap->partitions, (long long)nc_ap_free_elems(ap));
  return NRT_SUCCESS;
}

static nrt_status check_quantize(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  nrt_status s;
  if (src->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "quantize_mx needs src");
  if ((s = all_sbuf(p, i, 0, 2, "quantize_mx", diag))) return s;
  if (src->dtype != NRT_NC_FLOAT16 && src->dtype != NRT_NC_BFLOAT16)
    return nc_fail(diag, i, src->tensor, "dtype", INVALID, "quantize_mx's src is float16 or bfloat16");
  if (!is_fp8_x4(dst->dtype))
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "quantize_mx's dst is float8_e4m3fn_x4 or float8_e5m2_x4");
  if (src->partitions % 32)
    return nc_fail(diag, i, src->tensor, "mx_partitions", INVALID,
                   "quantize_mx's src has %d partitions; it needs a multiple of 32 (at most 128)",
                   src->partitions);
  int64_t f = nc_ap_free_elems(src);
  if (f % 4)
    return nc_fail(diag, i, src->tensor, "mx_free_size", INVALID,
                   "quantize_mx's src has %lld elements per partition; it needs a multiple of 4",
                   (long long)f);
  if (dst->partitions != src->partitions || nc_ap_free_elems(dst) * 4 != f)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst must be [%d, %lld] (four values per packed element), got [%d, %lld]",
                   src->partitions, (long long)(f / 4), dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  if ((s = scale_shape(p, i, 2, src->partitions, f / 4, "dst_scale", diag))) return s;
  return nc_needs_target(p, i, "quantize_mx", NRT_TARGET_TRN3, diag);
}

static nrt_status check_matmul(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  nrt_status s;
  if (st->tensor < 0 || mv->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "nc_matmul_mx needs stationary and moving");
  if ((s = all_sbuf(p, i, 1, 4, "nc_matmul_mx (inputs)", diag))) return s;
  if (!nc_is_packed_dtype(st->dtype) || !nc_is_packed_dtype(mv->dtype))
    return nc_fail(diag, i, nc_is_packed_dtype(st->dtype) ? mv->tensor : st->tensor, "dtype",
                   INVALID, "nc_matmul_mx multiplies float8_e4m3fn_x4 / float8_e5m2_x4 / "
                   "float4_e2m1fn_x4 tiles");
  if (st->partitions != mv->partitions)
    return nc_fail(diag, i, mv->tensor, "matmul_contraction", INVALID,
                   "the contraction dim is the partition dim of both operands: stationary has "
                   "%d partitions, moving %d", st->partitions, mv->partitions);
  if (st->partitions % 32)
    return nc_fail(diag, i, st->tensor, "mx_partitions", INVALID,
                   "nc_matmul_mx's operands have %d partitions; blocks of 8 partitions need a "
                   "multiple of 32 (at most 128)", st->partitions);
  int64_t m = nc_ap_free_elems(st), n = nc_ap_free_elems(mv);
  if ((s = nc_check_gemm_sizes(diag, i, dst, st, mv))) return s;
  if (dst->dtype != NRT_NC_FLOAT32)
    return nc_fail(diag, i, dst->tensor, "psum_dtype", INVALID,
                   "nc_matmul_mx accumulates in fp32: dst must be float32");
  if ((s = scale_shape(p, i, 3, st->partitions, m, "stationary_scale", diag)) ||
      (s = scale_shape(p, i, 4, mv->partitions, n, "moving_scale", diag)))
    return s;
  /* Row tiling: tiles of 32, 64 or 128 PE rows, starting on a multiple of
   * the tile size; the stationary fits its tile. */
  int64_t start = (int64_t)inst->imm[0], rows = (int64_t)inst->imm[1];
  if ((rows != 32 && rows != 64 && rows != 128) || start < 0 || start % rows ||
      start + rows > 128 || st->partitions > rows)
    return nc_fail(diag, i, st->tensor, "mx_tile_position", INVALID,
                   "tile_size rows %lld / tile_position row %lld: rows must be 32, 64 or 128, "
                   "the start a multiple of them within the 128 PE rows, and the stationary's "
                   "%d partitions must fit", (long long)rows, (long long)start, st->partitions);
  return nc_needs_target(p, i, "nc_matmul_mx", NRT_TARGET_TRN3, diag);
}

nrt_status nc_check_mx(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  return p->insts[i].opcode == NRT_NC_QUANTIZE_MX ? check_quantize(p, i, diag)
                                                  : check_matmul(p, i, diag);
}

/* NkiScalar arithmetic: [1, 1] int32 words, the integer ops of the
 * reference; or int64 words (every operand), which only add, subtract and
 * multiply (the reference rejects 64-bit comparisons). */
nrt_status nc_check_scalar_int(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int32_t op = inst->func[0];
  int wide = inst->ap[0].dtype == NRT_NC_INT64;
  int arith = op == NRT_NC_ALU_ADD || op == NRT_NC_ALU_SUBTRACT || op == NRT_NC_ALU_MULTIPLY;
  int ok = arith || (!wide && op >= NRT_NC_ALU_EQUAL && op <= NRT_NC_ALU_LESS_EQUAL);
  if (!ok)
    return nc_fail(diag, i, -1, "operand", INVALID,
                   "NkiScalar arithmetic is +, -, * and (32-bit only) the comparisons (ALU op %d)",
                   op);
  for (int k = 0; k < 3; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0) {
      if (k < 2) return nc_fail(diag, i, -1, "operand", INVALID, "NkiScalar arithmetic needs %s",
                                k ? "an operand" : "a destination");
      continue;
    }
    if (ap->dtype != (wide ? NRT_NC_INT64 : NRT_NC_INT32))
      return nc_fail(diag, i, ap->tensor, "dtype", INVALID,
                     "an NkiScalar's operands share its width: int32 or int64 words");
    if (ap->partitions != 1 || nc_ap_free_elems(ap) != 1)
      return nc_fail(diag, i, ap->tensor, "operand_shape", INVALID,
                     "an NkiScalar is one [1, 1] word, got [%d, %lld]", ap->partitions,
                     (long long)nc_ap_free_elems(ap));
  }
  return NRT_SUCCESS;
}

/* int64 is the 64-bit NkiScalar's dtype (nki.isa.scalar_load / scalar_store,
 * NKI 0.7): one [1, 1] word that DMA moves bit-exactly (int64 on both
 * sides), SCALAR_INT combines and an HBM access reads as its scalar_offset.
 * No compute engine has 64-bit lanes. */
nrt_status nc_check_int64(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int any = 0;
  for (int k = 0; k < NRT_NC_MAX_APS; k++) any |= inst->ap[k].tensor >= 0 && inst->ap[k].dtype == NRT_NC_INT64;
  if (!any || inst->opcode == NRT_NC_SCALAR_INT) return NRT_SUCCESS;
  int ok = inst->opcode == NRT_NC_DMA_COPY || inst->opcode == NRT_NC_DMA_TRANSPOSE;
  if (ok && (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET)) {
    const nrt_nc_ap *moved = &inst->ap[(inst->flags & NRT_NC_FLAG_INDIRECT_DST) ? 0 : 1];
    ok = inst->ap[0].dtype != NRT_NC_INT64 && inst->ap[1].dtype != NRT_NC_INT64 &&
         p->tensors[moved->tensor].buffer == NRT_NC_HBM; /* the word moves an HBM access */
  } else if (ok) {
    ok = inst->opcode == NRT_NC_DMA_COPY && !(inst->flags & (NRT_NC_FLAG_INDIRECT | NRT_NC_FLAG_ACCUMULATE)) &&
         inst->ap[0].dtype == NRT_NC_INT64 && inst->ap[1].dtype == NRT_NC_INT64 &&
         inst->ap[0].partitions == 1 && nc_ap_free_elems(&inst->ap[0]) == 1;
  }
  if (!ok)
    return nc_fail(diag, i, -1, "int64_operand", NRT_ERROR_INVALID_ARGUMENT,
                   "int64 is a scalar's dtype: a [1, 1] word that a DMA copies (int64 on both "
                   "sides), NkiScalar arithmetic combines, or an HBM access's scalar_offset");
  return NRT_SUCCESS;
}
