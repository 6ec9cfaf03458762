/* The hardware rules every NKI instruction must obey, checked at creation.
 *
 * All access patterns of a traced program are static, so each rule is
 * checked once per program instead of on every run. The first violation is
 * reported with the rule's short name (the one NKI.md and docs/nki.md use)
 * and the instruction's index, which the front end maps to the kernel's
 * source line.
 */
#include <stdio.h>
#include "nc/nc_internal.h"
#include "nc/numerics.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static const char *const operand_names[NC_OPCODE_END][NRT_NC_MAX_APS] = {
    [NRT_NC_DMA_COPY] = {"dst", "src", "indices"},
    [NRT_NC_MATMUL] = {"dst", "stationary", "moving"},
    [NRT_NC_TRANSPOSE] = {"dst", "data"},
    [NRT_NC_ACTIVATION] = {"dst", "data", "bias", "scale", "reduce_res"},
    [NRT_NC_TENSOR_TENSOR] = {"dst", "data1", "data2"},
    [NRT_NC_TENSOR_SCALAR] = {"dst", "data", "operand0", "operand1", "reduce_res"},
    [NRT_NC_SCALAR_TENSOR_TENSOR] = {"dst", "data", "operand0", "operand1"},
    [NRT_NC_TENSOR_REDUCE] = {"dst", "data"},
    [NRT_NC_TENSOR_COPY] = {"dst", "src", "offset"},
    [NRT_NC_COPY_PREDICATED] = {"dst", "src", "predicate"},
    [NRT_NC_MEMSET] = {"dst"},
    [NRT_NC_IOTA] = {"dst", "pattern"},
    [NRT_NC_AFFINE_SELECT] = {"dst", "pattern", "on_true_tile"},
    [NRT_NC_TENSOR_TENSOR_SCAN] = {"dst", "data0", "data1", "initial"},
    [NRT_NC_BN_STATS] = {"dst", "data"},
    [NRT_NC_BN_AGGR] = {"dst", "data"},
    [NRT_NC_MAX8] = {"dst", "data"},
    [NRT_NC_FIND_INDEX8] = {"dst", "data", "vals"},
    [NRT_NC_MATCH_REPLACE8] = {"dst", "data", "vals", "dst_idx"},
    [NRT_NC_PARTITION_REDUCE] = {"dst", "data"},
    [NRT_NC_ACTIVATE2] = {"dst", "data", "imm0", "imm1", "reduce_res"},
    [NRT_NC_SCALAR_CUMULATIVE] = {"dst", "src", "imm0"},
    [NRT_NC_SELECT_REDUCE] = {"dst", "predicate", "on_true", "on_false", "reduce_res"},
    [NRT_NC_RANGE_SELECT] = {"dst", "on_true_tile", "bound0", "bound1", "reduce_res"},
    [NRT_NC_NONZERO_WITH_COUNT] = {"dst", "src"},
    [NRT_NC_DMA_TRANSPOSE] = {"dst", "src", "indices"},
    [NRT_NC_RNG] = {"dst"},
    [NRT_NC_RAND2] = {"dst", "min", "max"},
    [NRT_NC_DROPOUT] = {"dst", "data", "prob"},
    [NRT_NC_RNG_SEED] = {"src_seeds"},
    [NRT_NC_RNG_SET_STATE] = {"src_seeds"},
    [NRT_NC_RNG_GET_STATE] = {"dst"},
    [NRT_NC_TOPK] = {"val_dst", "src", "idx_dst"},
    [NRT_NC_EXPONENTIAL] = {"dst", "src", "max_value", "operand", "reduce_res"},
    [NRT_NC_LOCAL_GATHER] = {"dst", "src_buffer", "index"},
    [NRT_NC_N_GATHER] = {"dst", "data", "indices"},
    [NRT_NC_SEQUENCE_BOUNDS] = {"dst", "segment_ids"},
    [NRT_NC_STREAM_SHUFFLE] = {"dst", "src"},
    [NRT_NC_QUANTIZE_MX] = {"dst", "src", "dst_scale"},
    [NRT_NC_MATMUL_MX] = {"dst", "stationary", "moving", "stationary_scale", "moving_scale"},
    [NRT_NC_SCALAR_INT] = {"dst", "scalar", "operand"},
};

static const char *const buffer_names[] = {"SBUF", "PSUM", "HBM"};

static const char *operand_name(const nrt_nc_inst *inst, int k) {
  if (inst->opcode == NRT_NC_ACTIVATE2 && k == 5) return "relu_param";
  const char *name = operand_names[inst->opcode][k];
  return name ? name : "operand";
}

static int32_t buffer_of(const nrt_nc_program_t p, const nrt_nc_ap *ap) {
  return p->tensors[ap->tensor].buffer;
}

/* Shape and bounds of one access pattern against its tensor. */
static nrt_status check_ap(const nrt_nc_program_t p, int32_t i, int k, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *ap = &inst->ap[k];
  const char *name = operand_name(inst, k);
  if (ap->tensor >= p->num_tensors)
    return nc_fail(diag, i, -1, "operand", INVALID, "%s names tensor %d of %d", name, ap->tensor,
                   p->num_tensors);
  if (nrt_nc_dtype_size(ap->dtype) == 0)
    return nc_fail(diag, i, ap->tensor, "dtype", INVALID, "%s has an unknown dtype %d", name,
                   ap->dtype);
  for (int d = 0; d < NRT_NC_MAX_FREE_DIMS; d++)
    if (ap->count[d] < 1)
      return nc_fail(diag, i, ap->tensor, "shape", INVALID, "%s has an empty free dimension", name);
  if (ap->partitions < 1)
    return nc_fail(diag, i, ap->tensor, "shape", INVALID, "%s has no partitions", name);
  const nrt_nc_tensor *t = &p->tensors[ap->tensor];
  int64_t size = (int64_t)nrt_nc_dtype_size(ap->dtype), lo, hi;
  nc_ap_free_extent(ap, &lo, &hi);
  int64_t last_p = ap->partition_start + ap->partition_step * (ap->partitions - 1);
  if (t->buffer == NRT_NC_HBM) {
    int64_t outer = ap->partition_step * (ap->partitions - 1);
    int64_t a = lo + (outer < 0 ? outer : 0), b = hi + (outer > 0 ? outer : 0);
    if (a < 0 || (b + 1) * size > t->bytes)
      return nc_fail(diag, i, ap->tensor, "out_of_bounds", INVALID,
                     "%s reads/writes HBM elements %lld..%lld of a tensor of %lld elements", name,
                     (long long)a, (long long)b, (long long)(t->bytes / size));
    return NRT_SUCCESS;
  }
  if (ap->partitions > p->geometry.partitions)
    return nc_fail(diag, i, ap->tensor, "pmax", INVALID,
                   "%s spans %d partitions; a tile has at most nl.tile_size.pmax = %d", name,
                   ap->partitions, p->geometry.partitions);
  int64_t p_lo = ap->partition_start < last_p ? ap->partition_start : last_p;
  int64_t p_hi = ap->partition_start < last_p ? last_p : ap->partition_start;
  if (p_lo < 0 || p_hi >= t->partitions)
    return nc_fail(diag, i, ap->tensor, "out_of_bounds", INVALID,
                   "%s uses partitions %lld..%lld of a %s tile with %d partitions", name,
                   (long long)p_lo, (long long)p_hi, buffer_names[t->buffer], t->partitions);
  if (lo < 0 || (hi + 1) * size > t->bytes)
    return nc_fail(diag, i, ap->tensor, "out_of_bounds", INVALID,
                   "%s uses bytes %lld..%lld of each partition of a %s tile of %lld bytes per "
                   "partition", name, (long long)(lo * size), (long long)((hi + 1) * size - 1),
                   buffer_names[t->buffer], (long long)t->bytes);
  return NRT_SUCCESS;
}

/* The partition-start rule of compute engines: > 64 partitions start at 0,
 * 33-64 at 0 or 64, <= 32 at 0, 32, 64 or 96. */
static nrt_status check_partition_start(const nrt_nc_program_t p, int32_t i, int k,
                                        nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k];
  int64_t start = nc_first_partition(p, ap);
  int n = ap->partitions;
  int ok = n > 64 ? start == 0 : n > 32 ? (start == 0 || start == 64) : start % 32 == 0;
  if (ok) return NRT_SUCCESS;
  return nc_fail(diag, i, ap->tensor, "partition_start", INVALID,
                 "%s starts at partition %lld with %d partitions; an access of %s must start at %s",
                 operand_name(&p->insts[i], k), (long long)start, n,
                 n > 64 ? "more than 64 partitions" : n > 32 ? "33-64 partitions" : "up to 32 partitions",
                 n > 64 ? "0" : n > 32 ? "0 or 64" : "0, 32, 64 or 96");
}

static int is_scalar_operand(const nrt_nc_inst *inst, int k) {
  switch (inst->opcode) {
    case NRT_NC_ACTIVATION: return k >= 2;
    case NRT_NC_TENSOR_SCALAR: return k >= 2;
    case NRT_NC_SCALAR_TENSOR_TENSOR: return k == 2;
    case NRT_NC_TENSOR_TENSOR_SCAN: return k == 3;
    default: return 0;
  }
}

/* Element-count agreement and the same-partitions rule of Vector, Scalar
 * and GpSimd instructions. */
static nrt_status check_elementwise(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t dst_free = nc_ap_free_elems(dst);
  for (int k = 1; k < NRT_NC_MAX_APS; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0) continue;
    const char *name = operand_name(inst, k);
    if (is_scalar_operand(inst, k)) {
      if (nc_ap_free_elems(ap) != 1 || ap->partitions != dst->partitions)
        return nc_fail(diag, i, ap->tensor, "operand_shape", INVALID,
                       "%s must be a [%d, 1] tile (one value per partition), got %d partitions x "
                       "%lld elements", name, dst->partitions, ap->partitions,
                       (long long)nc_ap_free_elems(ap));
    } else if (inst->opcode == NRT_NC_TENSOR_REDUCE) {
      int64_t kept = 1;
      for (int d = 0; d < NRT_NC_MAX_FREE_DIMS - inst->axes; d++) kept *= ap->count[d];
      if (inst->axes < 1 || inst->axes > NRT_NC_MAX_FREE_DIMS || kept != dst_free ||
          ap->partitions != dst->partitions)
        return nc_fail(diag, i, ap->tensor, "shape_mismatch", INVALID,
                       "reducing %d trailing axes of %s leaves %d x %lld elements but dst has "
                       "%d x %lld", inst->axes, name, ap->partitions, (long long)kept,
                       dst->partitions, (long long)dst_free);
    } else if (ap->partitions != dst->partitions || nc_ap_free_elems(ap) != dst_free) {
      return nc_fail(diag, i, ap->tensor, "shape_mismatch", INVALID,
                     "%s has %d partitions x %lld elements but dst has %d x %lld", name,
                     ap->partitions, (long long)nc_ap_free_elems(ap), dst->partitions,
                     (long long)dst_free);
    }
    if (nc_first_partition(p, ap) != nc_first_partition(p, dst) ||
        ap->partition_step != dst->partition_step)
      return nc_fail(diag, i, ap->tensor, "same_partitions", INVALID,
                     "%s is on partitions from %lld (step %lld) but dst from %lld (step %lld); "
                     "this engine reads and writes the same partitions", name,
                     (long long)nc_first_partition(p, ap), (long long)ap->partition_step,
                     (long long)nc_first_partition(p, dst), (long long)dst->partition_step);
  }
  return NRT_SUCCESS;
}

/* The Tensor engine's tile limits, shared by nc_matmul and nc_matmul_mx:
 * stationary free size <= 128, moving free size <= 512, dst [M, N]. */
nrt_status nc_check_gemm_sizes(nrt_nc_diagnostic *diag, int32_t i, const nrt_nc_ap *dst,
                               const nrt_nc_ap *st, const nrt_nc_ap *mv) {
  const int64_t m = nc_ap_free_elems(st), n = nc_ap_free_elems(mv);
  if (m > 128)
    return nc_fail(diag, i, st->tensor, "gemm_stationary_fmax", INVALID,
                   "stationary free size %lld exceeds nl.tile_size.gemm_stationary_fmax = 128",
                   (long long)m);
  if (n > 512)
    return nc_fail(diag, i, mv->tensor, "gemm_moving_fmax", INVALID,
                   "moving free size %lld exceeds nl.tile_size.gemm_moving_fmax = 512",
                   (long long)n);
  if (dst->partitions != m || nc_ap_free_elems(dst) != n)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst must be [%lld, %lld] (stationary free x moving free), got [%d, %lld]",
                   (long long)m, (long long)n, dst->partitions, (long long)nc_ap_free_elems(dst));
  return NRT_SUCCESS;
}

/* Floats the engines compute with (float8_e8m0fnu is a scale format only:
 * stored and loaded by value, never a Tensor-engine operand). */
static int is_float_dtype(int32_t dtype) {
  return dtype >= NRT_NC_FLOAT8_E4M3 && dtype != NRT_NC_FLOAT8_E8M0FNU;
}

static int is_fp8(int32_t dtype) {
  return dtype == NRT_NC_FLOAT8_E4M3 || dtype == NRT_NC_FLOAT8_E5M2;
}

/* nc_matmul perf_mode=double_row (Trainium2 architecture guide, "Double FP8
 * Matmul Performance"; nki.isa.nc_matmul): NeuronCore-v3 on, fp8 operands
 * (e4m3 / e5m2, mixed allowed), stationary [K, 2, M <= 128] and moving
 * [K, 2, N <= 512] with K <= 128 partitions, dst [M, N] fp32. The tracer
 * checks the size-2 major free dim; the records here only show 2M and 2N
 * free elements. */
static nrt_status check_double_row(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  if (!is_fp8(st->dtype) || !is_fp8(mv->dtype))
    return nc_fail(diag, i, is_fp8(st->dtype) ? mv->tensor : st->tensor, "double_row_dtype",
                   INVALID, "perf_mode=double_row multiplies float8_e4m3 / float8_e5m2 "
                   "operands only");
  int64_t m2 = nc_ap_free_elems(st), n2 = nc_ap_free_elems(mv);
  if (m2 % 2 || n2 % 2)
    return nc_fail(diag, i, m2 % 2 ? st->tensor : mv->tensor, "double_row_layout", INVALID,
                   "perf_mode=double_row: stationary [K, 2, M] and moving [K, 2, N] hold an "
                   "even number of elements per partition, got %lld and %lld",
                   (long long)m2, (long long)n2);
  int64_t m = m2 / 2, n = n2 / 2;
  if (m > 128)
    return nc_fail(diag, i, st->tensor, "gemm_stationary_fmax", INVALID,
                   "double_row stationary [K, 2, %lld]: M exceeds "
                   "nl.tile_size.gemm_stationary_fmax = 128", (long long)m);
  if (n > 512)
    return nc_fail(diag, i, mv->tensor, "gemm_moving_fmax", INVALID,
                   "double_row moving [K, 2, %lld]: N exceeds nl.tile_size.gemm_moving_fmax = 512",
                   (long long)n);
  if (dst->partitions != m || nc_ap_free_elems(dst) != n)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "double_row dst must be [%lld, %lld] (M x N), got [%d, %lld]", (long long)m,
                   (long long)n, dst->partitions, (long long)nc_ap_free_elems(dst));
  if (dst->dtype != NRT_NC_FLOAT32)
    return nc_fail(diag, i, dst->tensor, "psum_dtype", INVALID,
                   "nc_matmul accumulates in fp32: dst must be float32");
  return nc_needs_target(p, i, "nc_matmul perf_mode=double_row", NRT_TARGET_TRN2, diag);
}

static nrt_status check_matmul(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  if (st->tensor < 0 || mv->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "nc_matmul needs stationary and moving");
  if (st->partitions != mv->partitions)
    return nc_fail(diag, i, mv->tensor, "matmul_contraction", INVALID,
                   "the contraction dim is the partition dim of both operands: stationary has "
                   "%d partitions, moving %d", st->partitions, mv->partitions);
  if (inst->flags & NRT_NC_FLAG_DOUBLE_ROW) return check_double_row(p, i, diag);
  nrt_status sizes = nc_check_gemm_sizes(diag, i, dst, st, mv);
  if (sizes != NRT_SUCCESS) return sizes;
  if (!is_float_dtype(st->dtype) || !is_float_dtype(mv->dtype))
    return nc_fail(diag, i, st->tensor, "dtype", INVALID,
                   "the Tensor engine multiplies floating-point tiles only");
  if (dst->dtype != NRT_NC_FLOAT32)
    return nc_fail(diag, i, dst->tensor, "psum_dtype", INVALID,
                   "nc_matmul accumulates in fp32: dst must be float32");
  return NRT_SUCCESS;
}

static nrt_status check_transpose(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t f = nc_ap_free_elems(src);
  int limit = inst->engine == NRT_NC_ENGINE_TENSOR ? 128 : 32;
  if (src->partitions > limit || f > limit)
    return nc_fail(diag, i, src->tensor, "transpose_size", INVALID,
                   "nc_transpose on the %s engine handles at most %dx%d, got %dx%lld",
                   inst->engine == NRT_NC_ENGINE_TENSOR ? "Tensor" : "Vector", limit, limit,
                   src->partitions, (long long)f);
  if (dst->partitions != f || nc_ap_free_elems(dst) != src->partitions)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "transposing [%d, %lld] needs dst [%lld, %d], got [%d, %lld]", src->partitions,
                   (long long)f, (long long)f, src->partitions, dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  if (inst->engine == NRT_NC_ENGINE_TENSOR && dst->dtype != src->dtype &&
      dst->dtype != NRT_NC_FLOAT32)
    return nc_fail(diag, i, dst->tensor, "psum_dtype", INVALID,
                   "a Tensor-engine transpose writes PSUM as float32 or the input's dtype");
  return NRT_SUCCESS;
}

/* Which buffers the engine of an instruction may touch. */
static nrt_status check_buffers(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  for (int k = 0; k < NRT_NC_MAX_APS; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0) continue;
    int32_t b = buffer_of(p, ap);
    const char *name = operand_name(inst, k);
    if (inst->engine == NRT_NC_ENGINE_DMA) {
      if (b == NRT_NC_PSUM)
        return nc_fail(diag, i, ap->tensor, "dma_no_psum", INVALID,
                       "DMA cannot access PSUM (%s); move PSUM data to SBUF with a compute "
                       "instruction first", name);
      continue;
    }
    if (b == NRT_NC_HBM)
      return nc_fail(diag, i, ap->tensor, "on_chip_only", INVALID,
                     "%s is in HBM; compute engines read and write SBUF/PSUM only (use "
                     "dma_copy / nl.load)", name);
    if (inst->engine == NRT_NC_ENGINE_TENSOR) {
      if (k == 0 && b != NRT_NC_PSUM)
        return nc_fail(diag, i, ap->tensor, "tensor_engine_writes_psum", INVALID,
                       "the Tensor engine writes PSUM only; dst is in SBUF");
      if (k > 0 && b != NRT_NC_SBUF)
        return nc_fail(diag, i, ap->tensor, "tensor_engine_reads_sbuf", INVALID,
                       "the Tensor engine reads SBUF only; %s is in PSUM", name);
    } else if (inst->engine == NRT_NC_ENGINE_GPSIMD && b == NRT_NC_PSUM) {
      return nc_fail(diag, i, ap->tensor, "gpsimd_no_psum", INVALID,
                     "the GpSimd engine cannot access PSUM (%s)", name);
    }
  }
  if (inst->opcode == NRT_NC_TENSOR_TENSOR_SCAN && inst->ap[1].tensor >= 0 &&
      inst->ap[2].tensor >= 0 && buffer_of(p, &inst->ap[1]) == NRT_NC_PSUM &&
      buffer_of(p, &inst->ap[2]) == NRT_NC_PSUM)
    return nc_fail(diag, i, inst->ap[1].tensor, "tensor_tensor_psum_inputs", INVALID,
                   "tensor_tensor_scan cannot read both data0 and data1 from PSUM");
  if ((inst->opcode == NRT_NC_TENSOR_TENSOR || inst->opcode == NRT_NC_SELECT_REDUCE) &&
      inst->ap[1].tensor >= 0 && inst->ap[2].tensor >= 0 &&
      buffer_of(p, &inst->ap[1]) == NRT_NC_PSUM && buffer_of(p, &inst->ap[2]) == NRT_NC_PSUM)
    return nc_fail(diag, i, inst->ap[1].tensor, "tensor_tensor_psum_inputs", INVALID,
                   "%s cannot read both inputs from PSUM",
                   inst->opcode == NRT_NC_TENSOR_TENSOR ? "tensor_tensor" : "select_reduce");
  return NRT_SUCCESS;
}

static nrt_status check_engine(const nrt_nc_inst *inst, int32_t i, nrt_nc_diagnostic *diag) {
  int e = inst->engine, op = inst->opcode;
  int ok = e >= 0 && e < NRT_NC_ENGINE_COUNT;
  if (ok && op == NRT_NC_DMA_COPY) ok = e == NRT_NC_ENGINE_DMA;
  else if (ok && op == NRT_NC_MATMUL) ok = e == NRT_NC_ENGINE_TENSOR;
  else if (ok && op == NRT_NC_TRANSPOSE) ok = e == NRT_NC_ENGINE_TENSOR || e == NRT_NC_ENGINE_VECTOR;
  else if (ok && op == NRT_NC_ACTIVATION) ok = e == NRT_NC_ENGINE_SCALAR;
  else if (ok && (op == NRT_NC_PARTITION_REDUCE || op == NRT_NC_NONZERO_WITH_COUNT))
    ok = e == NRT_NC_ENGINE_GPSIMD;
  else if (ok && op == NRT_NC_ACTIVATE2) ok = e == NRT_NC_ENGINE_SCALAR || e == NRT_NC_ENGINE_GPSIMD;
  else if (ok && op == NRT_NC_DMA_TRANSPOSE) ok = e == NRT_NC_ENGINE_DMA;
  else if (ok && (op == NRT_NC_RNG || op == NRT_NC_RNG_SET_STATE || op == NRT_NC_RNG_GET_STATE))
    ok = e == NRT_NC_ENGINE_VECTOR || e == NRT_NC_ENGINE_GPSIMD;
  else if (ok && (op == NRT_NC_TOPK || op == NRT_NC_LOCAL_GATHER || op == NRT_NC_N_GATHER ||
                   op == NRT_NC_SEQUENCE_BOUNDS))
    ok = e == NRT_NC_ENGINE_GPSIMD;
  else if (ok && op == NRT_NC_MATMUL_MX) ok = e == NRT_NC_ENGINE_TENSOR;
  else if (ok && op >= NRT_NC_TENSOR_TENSOR_SCAN) ok = e == NRT_NC_ENGINE_VECTOR;
  else if (ok) ok = e != NRT_NC_ENGINE_TENSOR && e != NRT_NC_ENGINE_DMA;
  if (ok) return NRT_SUCCESS;
  return nc_fail(diag, i, -1, "engine", INVALID, "this instruction cannot run on engine %d", e);
}

/* bn_stats / bn_aggr / the top-8 family: fixed output widths, the input
 * size limits of the ISA reference, and the same partitions throughout. */
static nrt_status check_vector_ext(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int op = inst->opcode;
  if (src->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "%s needs its data operand", operand_name(inst, 1));
  int64_t n = nc_ap_free_elems(src), want;
  if (op == NRT_NC_BN_STATS) {
    want = 6;
    if (n > 512)
      return nc_fail(diag, i, src->tensor, "bn_stats_fmax", INVALID,
                     "bn_stats takes at most nl.tile_size.bn_stats_fmax = 512 elements per "
                     "partition, got %lld", (long long)n);
  } else if (op == NRT_NC_BN_AGGR) {
    want = 2;
    if (n % 3)
      return nc_fail(diag, i, src->tensor, "shape_mismatch", INVALID,
                     "bn_aggr reads (count, mean, variance*count) tuples: %lld elements per "
                     "partition is not a multiple of 3", (long long)n);
  } else {
    want = op == NRT_NC_MATCH_REPLACE8 ? n : 8;
    if (n < 8 || n > 16384)
      return nc_fail(diag, i, src->tensor, "max8_size", INVALID,
                     "%s takes 8 to 16384 elements per partition, got %lld",
                     op == NRT_NC_MAX8 ? "max8" : op == NRT_NC_FIND_INDEX8 ? "nc_find_index8"
                                                                          : "nc_match_replace8",
                     (long long)n);
  }
  if (nc_ap_free_elems(dst) != want || dst->partitions != src->partitions)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst must be [%d, %lld], got [%d, %lld]", src->partitions, (long long)want,
                   dst->partitions, (long long)nc_ap_free_elems(dst));
  for (int k = 2; k < NRT_NC_MAX_APS; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor < 0) continue;
    if (ap->partitions != src->partitions || nc_ap_free_elems(ap) != 8)
      return nc_fail(diag, i, ap->tensor, "shape_mismatch", INVALID,
                     "%s must be [%d, 8], got [%d, %lld]", operand_name(inst, k), src->partitions,
                     ap->partitions, (long long)nc_ap_free_elems(ap));
  }
  if ((op == NRT_NC_FIND_INDEX8 && dst->dtype != NRT_NC_UINT32 && dst->dtype != NRT_NC_INT32) ||
      (op == NRT_NC_MATCH_REPLACE8 && inst->ap[3].tensor >= 0 &&
       inst->ap[3].dtype != NRT_NC_UINT32 && inst->ap[3].dtype != NRT_NC_INT32))
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID, "indices are written as uint32 / int32");
  for (int k = 1; k < NRT_NC_MAX_APS; k++) {
    const nrt_nc_ap *ap = &inst->ap[k];
    if (ap->tensor >= 0 && (nc_first_partition(p, ap) != nc_first_partition(p, dst) ||
                            ap->partition_step != dst->partition_step))
      return nc_fail(diag, i, ap->tensor, "same_partitions", INVALID,
                     "%s is on other partitions than dst; the Vector engine reads and writes the "
                     "same partitions", operand_name(inst, k));
  }
  return NRT_SUCCESS;
}

/* A bitwise reduction (tensor_reduce's op, tensor_scalar_reduce's
 * reduce_op) folds raw bits: the ISA reference asks integer tiles for
 * bitvec ops there, and the reduce registers (reduce_cmd) hold fp32. */
static nrt_status check_bitwise_reduce(const nrt_nc_program_t p, int32_t i,
                                       nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  int scalar = inst->opcode == NRT_NC_TENSOR_SCALAR;
  int32_t op = scalar ? inst->func[2] : inst->func[0];
  if (!(scalar || inst->opcode == NRT_NC_TENSOR_REDUCE) || !nc_alu_is_bitwise(op))
    return NRT_SUCCESS;
  if (scalar && inst->ap[4].tensor < 0 &&
      !(inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD)))
    return NRT_SUCCESS; /* func[2] unused: no reduce */
  const nrt_nc_ap *src = &inst->ap[1], *res = scalar ? &inst->ap[4] : &inst->ap[0];
  if (is_float_dtype(src->dtype) || is_float_dtype(inst->ap[0].dtype) ||
      (res->tensor >= 0 && is_float_dtype(res->dtype)))
    return nc_fail(diag, i, src->tensor, "dtype", INVALID,
                   "a bitwise reduction works on integer tiles (data, dst and reduce_res)");
  if (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD | NRT_NC_FLAG_REDUCE_LOAD))
    return nc_fail(diag, i, -1, "reduce_cmd", INVALID,
                   "a bitwise reduce_op takes reduce_cmd idle: the reduce registers hold fp32");
  return NRT_SUCCESS;
}

/* tensor_partition_reduce: data [P, F] into dst [1, F] with add, max, min
 * or a bitwise op (the ops of the ISA reference). */
static nrt_status check_partition_reduce(const nrt_nc_program_t p, int32_t i,
                                         nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int32_t op = inst->func[0];
  if (src->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "tensor_partition_reduce needs data");
  if (op != NRT_NC_ALU_ADD && op != NRT_NC_ALU_MAXIMUM && op != NRT_NC_ALU_MINIMUM &&
      op != NRT_NC_ALU_BITWISE_AND && op != NRT_NC_ALU_BITWISE_OR && op != NRT_NC_ALU_BITWISE_XOR)
    return nc_fail(diag, i, -1, "operand", INVALID,
                   "tensor_partition_reduce reduces with add, maximum, minimum or a bitwise op");
  if (nc_alu_is_bitwise(op) && (is_float_dtype(src->dtype) || is_float_dtype(dst->dtype)))
    return nc_fail(diag, i, src->tensor, "dtype", INVALID,
                   "bitwise partition reductions work on integer tiles");
  if (dst->partitions != 1 || nc_ap_free_elems(dst) != nc_ap_free_elems(src))
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst must be [1, %lld] (one partition), got [%d, %lld]",
                   (long long)nc_ap_free_elems(src), dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  return NRT_SUCCESS;
}

static nrt_status check_inst(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  nrt_status s;
  if (inst->opcode < 0 || inst->opcode >= NC_OPCODE_END)
    return nc_fail(diag, i, -1, "opcode", INVALID, "unknown opcode %d", inst->opcode);
  if (inst->opcode == NRT_NC_BRANCH) {
    for (int k = 0; k < 2; k++)
      if (inst->ap[k].tensor >= 0 && (s = check_ap(p, i, k, diag))) return s;
    return nc_check_branch(p, i, diag);
  }
  if (inst->opcode == NRT_NC_COLLECTIVE) {
    for (int k = 0; k < NRT_NC_MAX_APS; k++)
      if (inst->ap[k].tensor >= 0 && (s = check_ap(p, i, k, diag))) return s;
    if ((s = check_buffers(p, i, diag))) return s;
    return nc_check_collective(p, i, diag);
  }
  if ((s = check_engine(inst, i, diag))) return s;
  if (inst->ap[0].tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID, "the instruction has no destination");
  for (int k = 0; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor >= 0 && (s = check_ap(p, i, k, diag))) return s;
  if ((s = check_buffers(p, i, diag))) return s;
  if ((s = nc_check_packed(p, i, diag))) return s;
  if ((s = nc_check_int64(p, i, diag))) return s;
  switch (inst->opcode) {
    case NRT_NC_DMA_COPY:
      if ((inst->flags & NRT_NC_FLAG_INDIRECT) || inst->ap[2].tensor >= 0)
        return nc_check_indirect_copy(p, i, diag);
      if (inst->ap[1].tensor < 0 || nc_ap_free_elems(&inst->ap[1]) != nc_ap_free_elems(&inst->ap[0]) ||
          inst->ap[1].partitions != inst->ap[0].partitions)
        return nc_fail(diag, i, inst->ap[0].tensor, "shape_mismatch", INVALID,
                       "dma_copy: src has %d x %lld elements, dst %d x %lld",
                       inst->ap[1].partitions, (long long)nc_ap_free_elems(&inst->ap[1]),
                       inst->ap[0].partitions, (long long)nc_ap_free_elems(&inst->ap[0]));
      return NRT_SUCCESS;
    case NRT_NC_TENSOR_COPY:
      if (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) {
        if ((s = nc_check_copy_offset(p, i, diag))) return s;
        const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
        if (nc_first_partition(p, src) != nc_first_partition(p, dst) ||
            src->partition_step != dst->partition_step)
          return nc_fail(diag, i, src->tensor, "same_partitions", INVALID,
                         "a dynamic tensor_copy reads and writes the same partitions");
        break;
      }
      if (inst->ap[2].tensor >= 0)
        return nc_fail(diag, i, inst->ap[2].tensor, "operand", INVALID,
                       "only a dynamic tensor_copy takes an offset word");
      if ((s = check_elementwise(p, i, diag))) return s;
      break;
    case NRT_NC_MATMUL:
      if ((s = check_matmul(p, i, diag))) return s;
      break;
    case NRT_NC_TRANSPOSE:
      if ((s = check_transpose(p, i, diag))) return s;
      break;
    case NRT_NC_BN_STATS: case NRT_NC_BN_AGGR: case NRT_NC_MAX8: case NRT_NC_FIND_INDEX8:
    case NRT_NC_MATCH_REPLACE8:
      if ((s = check_vector_ext(p, i, diag))) return s;
      break;
    case NRT_NC_PARTITION_REDUCE:
      if ((s = check_partition_reduce(p, i, diag))) return s;
      break;
    case NRT_NC_DMA_TRANSPOSE:
      return nc_check_select(p, i, diag);
    case NRT_NC_ACTIVATE2: case NRT_NC_SCALAR_CUMULATIVE: case NRT_NC_SELECT_REDUCE:
    case NRT_NC_RANGE_SELECT: case NRT_NC_NONZERO_WITH_COUNT:
      if ((s = nc_check_select(p, i, diag))) return s;
      break;
    case NRT_NC_RNG: case NRT_NC_RAND2: case NRT_NC_DROPOUT: case NRT_NC_RNG_SEED:
    case NRT_NC_RNG_SET_STATE: case NRT_NC_RNG_GET_STATE:
      if ((s = nc_check_rng(p, i, diag))) return s;
      break;
    case NRT_NC_STREAM_SHUFFLE: /* its own partition-start rule */
      return nc_check_gather(p, i, diag);
    case NRT_NC_TOPK: case NRT_NC_EXPONENTIAL: case NRT_NC_LOCAL_GATHER: case NRT_NC_N_GATHER:
    case NRT_NC_SEQUENCE_BOUNDS:
      if ((s = nc_check_gather(p, i, diag))) return s;
      break;
    case NRT_NC_QUANTIZE_MX: case NRT_NC_MATMUL_MX:
      if ((s = nc_check_mx(p, i, diag))) return s;
      break;
    case NRT_NC_SCALAR_INT: /* one word; no partition-start rule */
      return nc_check_scalar_int(p, i, diag);
    default:
      if ((s = check_elementwise(p, i, diag))) return s;
      if ((s = check_bitwise_reduce(p, i, diag))) return s;
      break;
  }
  for (int k = 0; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor >= 0 && (s = check_partition_start(p, i, k, diag))) return s;
  return NRT_SUCCESS;
}

nrt_status nc_check_program(const nrt_nc_program_t p, nrt_nc_diagnostic *diag) {
  for (int32_t t = 0; t < p->num_tensors; t++) {
    const nrt_nc_tensor *tensor = &p->tensors[t];
    if (tensor->buffer < NRT_NC_SBUF || tensor->buffer > NRT_NC_HBM || tensor->bytes < 0)
      return nc_fail(diag, -1, t, "tensor", INVALID, "tensor %d is malformed", t);
    if (tensor->buffer == NRT_NC_HBM) continue;
    if (tensor->partitions < 1 || tensor->bytes == 0)
      return nc_fail(diag, -1, t, "shape", INVALID,
                     "an on-chip tensor of %d partitions x %lld bytes is empty",
                     tensor->partitions, (long long)tensor->bytes);
    if (tensor->partitions > p->geometry.partitions)
      return nc_fail(diag, -1, t, "pmax", INVALID,
                     "an on-chip tensor has %d partitions; at most nl.tile_size.pmax = %d",
                     tensor->partitions, p->geometry.partitions);
    int64_t bank = p->geometry.psum_partition_bytes / p->geometry.psum_banks;
    if (tensor->buffer == NRT_NC_PSUM && tensor->bytes > bank)
      return nc_fail(diag, -1, t, "psum_fmax", INVALID,
                     "a PSUM tile holds at most %lld bytes per partition (one bank, "
                     "nl.tile_size.psum_fmax = %lld fp32); this one needs %lld",
                     (long long)bank, (long long)(bank / 4), (long long)tensor->bytes);
    nrt_status s = tensor->fixed ? nc_check_placement(p, t, diag) : NRT_SUCCESS;
    if (s) return s;
  }
  for (int32_t i = 0; i < p->num_insts; i++) {
    nrt_status s = check_inst(p, i, diag);
    if (s) return s;
  }
  return NRT_SUCCESS;
}

nrt_status nc_check_per_partition(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                                  nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k], *dst = &p->insts[i].ap[0];
  if (ap->tensor < 0) return NRT_SUCCESS;
  if (ap->partitions != dst->partitions || nc_ap_free_elems(ap) != 1)
    return nc_fail(diag, i, ap->tensor, "operand_shape", NRT_ERROR_INVALID_ARGUMENT,
                   "%s must be a [%d, 1] tile (one value per partition), got [%d, %lld]", name,
                   dst->partitions, ap->partitions, (long long)nc_ap_free_elems(ap));
  if (nc_first_partition(p, ap) != nc_first_partition(p, dst))
    return nc_fail(diag, i, ap->tensor, "same_partitions", NRT_ERROR_INVALID_ARGUMENT,
                   "%s is on other partitions than dst", name);
  return NRT_SUCCESS;
}
