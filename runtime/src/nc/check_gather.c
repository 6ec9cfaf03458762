/* Rules of topk, exponential, local_gather, nc_n_gather, sequence_bounds and
 * nc_stream_shuffle: the dtype, shape, size and generation constraints of
 * the NKI ISA reference (docs/nki.md lists them by rule name).
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static const char *const target_names[] = {"", "trn1 (NeuronCore-v2)", "trn2 (NeuronCore-v3)",
                                           "trn3 (NeuronCore-v4)"};

/* The instruction exists from generation `since` (an nrt_target) on. */
static nrt_status needs_target(const nrt_nc_program_t p, int32_t i, const char *name,
                               int32_t since, nrt_nc_diagnostic *diag) {
  if (p->target >= since) return NRT_SUCCESS;
  int32_t t = p->target >= 1 && p->target <= 3 ? p->target : 0;
  return nc_fail(diag, i, -1, "nc_version", INVALID,
                 "%s needs %s or newer; the device is %s (NEURON_PLATFORM_TARGET_OVERRIDE)", name,
                 target_names[since], target_names[t]);
}

static nrt_status needs_operand(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                                nrt_nc_diagnostic *diag) {
  if (p->insts[i].ap[k].tensor >= 0) return NRT_SUCCESS;
  return nc_fail(diag, i, -1, "operand", INVALID, "%s is missing", name);
}

static nrt_status dtype_is(const nrt_nc_program_t p, int32_t i, int k, int32_t want,
                           const char *what, nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k];
  if (ap->dtype == want) return NRT_SUCCESS;
  return nc_fail(diag, i, ap->tensor, "dtype", INVALID, "%s", what);
}

static nrt_status same_rows(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                            nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k], *dst = &p->insts[i].ap[0];
  if (ap->partitions != dst->partitions)
    return nc_fail(diag, i, ap->tensor, "shape_mismatch", INVALID,
                   "%s has %d partitions but dst %d", name, ap->partitions, dst->partitions);
  if (nc_first_partition(p, ap) != nc_first_partition(p, dst) || ap->partition_step != dst->partition_step)
    return nc_fail(diag, i, ap->tensor, "same_partitions", INVALID,
                   "%s is on other partitions than dst", name);
  return NRT_SUCCESS;
}

static nrt_status check_topk(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *val = &inst->ap[0], *src = &inst->ap[1], *idx = &inst->ap[2];
  nrt_status s;
  if ((s = needs_target(p, i, "topk", NRT_TARGET_TRN2, diag))) return s;
  if ((s = needs_operand(p, i, 1, "topk's src", diag)) || (s = needs_operand(p, i, 2, "idx_dst", diag)))
    return s;
  if ((s = dtype_is(p, i, 1, NRT_NC_BFLOAT16, "topk's src must be bfloat16", diag)) ||
      (s = dtype_is(p, i, 0, NRT_NC_BFLOAT16, "topk's val_dst must be bfloat16", diag)) ||
      (s = dtype_is(p, i, 2, NRT_NC_UINT32, "topk's idx_dst must be uint32", diag)))
    return s;
  if ((s = same_rows(p, i, 1, "src", diag)) || (s = same_rows(p, i, 2, "idx_dst", diag))) return s;
  if (val->partitions % 16)
    return nc_fail(diag, i, val->tensor, "topk_partitions", INVALID,
                   "topk works on groups of 16 partitions: %d partitions is not a multiple of 16",
                   val->partitions);
  int64_t n = (int64_t)inst->imm[0], k = nc_ap_free_elems(val);
  if (n < 8 || n >= 65536)
    return nc_fail(diag, i, -1, "topk_n", INVALID, "topk needs 8 <= n < 65536, got n = %lld",
                   (long long)n);
  if (k < 1 || k >= 32768 || k > n)
    return nc_fail(diag, i, val->tensor, "topk_k", INVALID,
                   "topk's k (val_dst's free size) must be in [1, 32768) and at most n = %lld, "
                   "got %lld", (long long)n, (long long)k);
  if (nc_ap_free_elems(idx) != k)
    return nc_fail(diag, i, idx->tensor, "shape_mismatch", INVALID,
                   "idx_dst has %lld elements per partition but val_dst %lld",
                   (long long)nc_ap_free_elems(idx), (long long)k);
  if (nc_ap_free_elems(src) * 16 < n)
    return nc_fail(diag, i, src->tensor, "topk_n", INVALID,
                   "n = %lld elements need ceil(n / 16) = %lld columns of src; it has %lld",
                   (long long)n, (long long)((n + 15) / 16), (long long)nc_ap_free_elems(src));
  return NRT_SUCCESS;
}

static int is_float(int32_t dtype) { return dtype >= NRT_NC_FLOAT8_E4M3; }

static nrt_status check_exponential(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  nrt_status s;
  if ((s = needs_operand(p, i, 1, "exponential's src", diag))) return s;
  if (dst->dtype == NRT_NC_UINT32 || dst->dtype == NRT_NC_BOOL)
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "exponential writes float8/float16/bfloat16/(t)float32 or int8/16/32 / "
                   "uint8/16 tiles");
  if (src->dtype == NRT_NC_TFLOAT32 || src->dtype == NRT_NC_BOOL)
    return nc_fail(diag, i, src->tensor, "dtype", INVALID,
                   "exponential reads float8/float16/bfloat16/float32 or integer tiles");
  if (src->partitions != dst->partitions || nc_ap_free_elems(src) != nc_ap_free_elems(dst))
    return nc_fail(diag, i, src->tensor, "shape_mismatch", INVALID,
                   "src has %d x %lld elements but dst %d x %lld", src->partitions,
                   (long long)nc_ap_free_elems(src), dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  if ((s = same_rows(p, i, 1, "src", diag))) return s;
  if (inst->ap[2].tensor >= 0 && inst->ap[2].dtype != NRT_NC_FLOAT32)
    return nc_fail(diag, i, inst->ap[2].tensor, "dtype", INVALID, "max_value is float32");
  if ((s = nc_check_per_partition(p, i, 2, "max_value", diag)) ||
      (s = nc_check_per_partition(p, i, 4, "reduce_res", diag)))
    return s;
  if (inst->ap[4].tensor >= 0 && !is_float(inst->ap[4].dtype))
    return nc_fail(diag, i, inst->ap[4].tensor, "dtype", INVALID,
                   "exponential's reduce_res is a float tile");
  if (!(inst->flags & NRT_NC_FLAG_REDUCE_LOAD) && inst->imm[1] != 0.0)
    return nc_fail(diag, i, -1, "reduce_init", INVALID,
                   "reduce_init (%g) is only used by reduce_cmd.load_reduce; leave it 0.0",
                   inst->imm[1]);
  if ((inst->flags & NRT_NC_FLAG_REDUCE_RESET) && !(inst->flags & NRT_NC_FLAG_REDUCE_FOLD))
    return nc_fail(diag, i, -1, "reduce_cmd", INVALID,
                   "exponential supports reduce_cmd idle, reset_reduce, reduce and load_reduce");
  /* Last, so that the other rules can be seen on every generation. */
  return needs_target(p, i, "exponential", NRT_TARGET_TRN3, diag);
}

static nrt_status check_local_gather(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1], *index = &inst->ap[2];
  nrt_status s;
  if ((s = needs_operand(p, i, 1, "src_buffer", diag)) || (s = needs_operand(p, i, 2, "index", diag)))
    return s;
  if (index->dtype != NRT_NC_UINT16)
    return nc_fail(diag, i, index->tensor, "dtype", INVALID, "local_gather's index is uint16");
  if (dst->dtype != src->dtype)
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "local_gather keeps the data type: dst must have src_buffer's dtype");
  if ((s = same_rows(p, i, 1, "src_buffer", diag)) || (s = same_rows(p, i, 2, "index", diag)))
    return s;
  if (src->partitions % 16)
    return nc_fail(diag, i, src->tensor, "local_gather_partitions", INVALID,
                   "local_gather works on groups of 16 partitions (one GpSimd core each): %d "
                   "partitions is not a multiple of 16", src->partitions);
  int64_t e = (int64_t)inst->imm[0], v = (int64_t)inst->imm[1];
  int64_t per_core = 16 * nc_ap_free_elems(index);
  if (e != 1 && e != 2 && e != 4 && e != 8 && e != 16 && e != 32)
    return nc_fail(diag, i, -1, "num_elem_per_idx", INVALID,
                   "num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, got %lld", (long long)e);
  if (v < 1 || v > per_core)
    return nc_fail(diag, i, index->tensor, "num_valid_indices", INVALID,
                   "num_valid_indices must be in [1, %lld] (the indices of a 16-partition slice "
                   "of index), got %lld", (long long)per_core, (long long)v);
  if (v > 4096)
    return nc_fail(diag, i, index->tensor, "num_valid_indices", INVALID,
                   "a GpSimd core gathers at most 4096 indices, got %lld", (long long)v);
  if (nc_ap_free_elems(dst) != v * e)
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst needs num_valid_indices x num_elem_per_idx = %lld elements per "
                   "partition, has %lld", (long long)(v * e), (long long)nc_ap_free_elems(dst));
  return NRT_SUCCESS;
}

static nrt_status check_n_gather(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *data = &inst->ap[1], *idx = &inst->ap[2];
  nrt_status s;
  if ((s = needs_operand(p, i, 1, "data", diag)) || (s = needs_operand(p, i, 2, "indices", diag)))
    return s;
  if (idx->dtype != NRT_NC_UINT32)
    return nc_fail(diag, i, idx->tensor, "dtype", INVALID, "nc_n_gather's indices are uint32");
  if (dst->dtype != data->dtype)
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "nc_n_gather keeps the data type: dst must have data's dtype");
  if ((s = same_rows(p, i, 1, "data", diag)) || (s = same_rows(p, i, 2, "indices", diag))) return s;
  if (nc_ap_free_elems(idx) != nc_ap_free_elems(dst))
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst has %lld elements per partition but indices %lld",
                   (long long)nc_ap_free_elems(dst), (long long)nc_ap_free_elems(idx));
  return NRT_SUCCESS;
}

static nrt_status check_sequence_bounds(const nrt_nc_program_t p, int32_t i,
                                        nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *ids = &inst->ap[1];
  nrt_status s;
  if ((s = needs_operand(p, i, 1, "segment_ids", diag))) return s;
  for (int k = 0; k < 2; k++) {
    int32_t d = inst->ap[k].dtype;
    if (d != NRT_NC_FLOAT32 && d != NRT_NC_INT32)
      return nc_fail(diag, i, inst->ap[k].tensor, "dtype", INVALID,
                     "sequence_bounds reads and writes float32 or int32 tiles");
  }
  if (ids->partitions != 1 || dst->partitions != 1)
    return nc_fail(diag, i, ids->partitions != 1 ? ids->tensor : dst->tensor,
                   "sequence_bounds_partitions", INVALID,
                   "sequence_bounds works on one partition, got %d", ids->partitions != 1
                   ? ids->partitions : dst->partitions);
  if ((s = same_rows(p, i, 1, "segment_ids", diag))) return s;
  if (nc_ap_free_elems(dst) != 2 * nc_ap_free_elems(ids))
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst holds (start, end) for each of the %lld segment ids: [1, 2, %lld], got "
                   "%lld elements", (long long)nc_ap_free_elems(ids),
                   (long long)nc_ap_free_elems(ids), (long long)nc_ap_free_elems(dst));
  return NRT_SUCCESS;
}

/* The start rule of a shuffle: 96/128 active partitions start at 0, 64 at
 * 0/64, 32 at 0/32/64/96. */
static int shuffle_start_ok(int64_t start, int64_t active) {
  return active > 64 ? start == 0 : active > 32 ? (start == 0 || start == 64) : start % 32 == 0;
}

static nrt_status check_stream_shuffle(const nrt_nc_program_t p, int32_t i,
                                       nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  nrt_status s;
  if ((s = needs_operand(p, i, 1, "src", diag))) return s;
  if (dst->dtype != src->dtype)
    return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                   "nc_stream_shuffle moves data unconverted: dst must have src's dtype");
  if (nc_ap_free_elems(dst) != nc_ap_free_elems(src))
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "dst has %lld elements per partition but src %lld",
                   (long long)nc_ap_free_elems(dst), (long long)nc_ap_free_elems(src));
  int64_t most = dst->partitions > src->partitions ? dst->partitions : src->partitions;
  int64_t active = (most + 31) / 32 * 32;
  for (int k = 0; k < 2; k++) {
    int64_t start = nc_first_partition(p, &inst->ap[k]);
    if (inst->ap[k].partition_step != 1 || !shuffle_start_ok(start, active))
      return nc_fail(diag, i, inst->ap[k].tensor, "partition_start", INVALID,
                     "nc_stream_shuffle with %lld active partitions: %s must start at %s on "
                     "consecutive partitions, starts at %lld", (long long)active,
                     k ? "src" : "dst", active > 64 ? "0" : active > 32 ? "0 or 64" : "0, 32, 64 or 96",
                     (long long)start);
  }
  for (int q = 0; q * 32 < active; q++)
    for (int m = 0; m < 32; m++) {
      int64_t from = ((int64_t)inst->imm[m / 8] >> (6 * (m % 8))) & 63;
      if (from == 63 || q * 32 + m >= dst->partitions) continue;
      if (from >= 32 || q * 32 + from >= src->partitions)
        return nc_fail(diag, i, src->tensor, "shuffle_mask", INVALID,
                       "shuffle_mask[%d] = %lld reads partition %lld of src, which has %d", m,
                       (long long)from, (long long)(q * 32 + from), src->partitions);
    }
  return NRT_SUCCESS;
}

nrt_status nc_check_gather(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  switch (p->insts[i].opcode) {
    case NRT_NC_TOPK: return check_topk(p, i, diag);
    case NRT_NC_EXPONENTIAL: return check_exponential(p, i, diag);
    case NRT_NC_LOCAL_GATHER: return check_local_gather(p, i, diag);
    case NRT_NC_N_GATHER: return check_n_gather(p, i, diag);
    case NRT_NC_SEQUENCE_BOUNDS: return check_sequence_bounds(p, i, diag);
    default: return check_stream_shuffle(p, i, diag);
  }
}
