/* Rules of rng, rand2, dropout, set_rng_seed and rand_set_state /
 * rand_get_state (the ISA reference's dtype and size constraints).
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static int is_int(int32_t dtype) { return dtype >= NRT_NC_UINT8 && dtype <= NRT_NC_INT32; }

static int64_t first_partition(const nrt_nc_program_t p, const nrt_nc_ap *ap) {
  const nrt_nc_tensor *t = &p->tensors[ap->tensor];
  return (t->fixed ? t->partition_base : 0) + ap->partition_start;
}

/* A per-partition operand k of dst's partitions ([P, 1]), or absent. */
static nrt_status per_partition(const nrt_nc_program_t p, int32_t i, int k, const char *name,
                                nrt_nc_diagnostic *diag) {
  const nrt_nc_ap *ap = &p->insts[i].ap[k], *dst = &p->insts[i].ap[0];
  if (ap->tensor < 0) return NRT_SUCCESS;
  if (ap->partitions != dst->partitions || nc_ap_free_elems(ap) != 1)
    return nc_fail(diag, i, ap->tensor, "operand_shape", INVALID,
                   "%s must be a [%d, 1] tile (one value per partition), got [%d, %lld]", name,
                   dst->partitions, ap->partitions, (long long)nc_ap_free_elems(ap));
  if (first_partition(p, ap) != first_partition(p, dst))
    return nc_fail(diag, i, ap->tensor, "same_partitions", INVALID,
                   "%s is on other partitions than dst", name);
  return NRT_SUCCESS;
}

nrt_status nc_check_rng(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0];
  nrt_status s;
  switch (inst->opcode) {
    case NRT_NC_RNG:
      if (!is_int(dst->dtype))
        return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                       "rng writes random bits to an integer tile (int8/16/32, uint8/16/32)");
      return NRT_SUCCESS;
    case NRT_NC_RAND2:
      if (inst->ap[1].tensor < 0 && inst->ap[2].tensor < 0 && !(inst->imm[0] < inst->imm[1]))
        return nc_fail(diag, i, -1, "rand2_range", INVALID,
                       "rand2 needs min < max, got [%g, %g]", inst->imm[0], inst->imm[1]);
      if ((s = per_partition(p, i, 1, "min", diag))) return s;
      return per_partition(p, i, 2, "max", diag);
    case NRT_NC_DROPOUT: {
      const nrt_nc_ap *data = &inst->ap[1];
      if (data->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "dropout needs data");
      if (data->partitions != dst->partitions || nc_ap_free_elems(data) != nc_ap_free_elems(dst))
        return nc_fail(diag, i, data->tensor, "shape_mismatch", INVALID,
                       "data has %d x %lld elements but dst %d x %lld", data->partitions,
                       (long long)nc_ap_free_elems(data), dst->partitions,
                       (long long)nc_ap_free_elems(dst));
      if (first_partition(p, data) != first_partition(p, dst))
        return nc_fail(diag, i, data->tensor, "same_partitions", INVALID,
                       "data is on other partitions than dst");
      if (dst->dtype != data->dtype)
        return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                       "dropout's dst has data's dtype");
      if (is_int(data->dtype) && inst->ap[2].tensor >= 0 && inst->ap[2].dtype != NRT_NC_FLOAT32)
        return nc_fail(diag, i, inst->ap[2].tensor, "dtype", INVALID,
                       "the drop probability of an integer tile is float32");
      return per_partition(p, i, 2, "prob", diag);
    }
    case NRT_NC_RNG_SEED:
      if (dst->partitions != 1 || nc_ap_free_elems(dst) != 1 || nrt_nc_dtype_size(dst->dtype) != 4)
        return nc_fail(diag, i, dst->tensor, "rng_state_size", INVALID,
                       "set_rng_seed takes one 32-bit value (a [1, 1] tile)");
      return NRT_SUCCESS;
    default: { /* rand_set_state / rand_get_state */
      int64_t words = inst->engine == NRT_NC_ENGINE_VECTOR ? 24 : 6;
      if (nc_ap_free_elems(dst) != words)
        return nc_fail(diag, i, dst->tensor, "rng_state_size", INVALID,
                       "the %s engine's generator state is %lld uint32 per partition, got %lld",
                       inst->engine == NRT_NC_ENGINE_VECTOR ? "Vector" : "GpSimd",
                       (long long)words, (long long)nc_ap_free_elems(dst));
      if (dst->dtype != NRT_NC_UINT32)
        return nc_fail(diag, i, dst->tensor, "dtype", INVALID, "generator states are uint32");
      return NRT_SUCCESS;
    }
  }
}
