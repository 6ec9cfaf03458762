/* Rules of rng, rand2, dropout, set_rng_seed and rand_set_state /
 * rand_get_state (the ISA reference's dtype and size constraints).
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

static int is_int(int32_t dtype) { return dtype >= NRT_NC_UINT8 && dtype <= NRT_NC_INT32; }

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
      if ((s = nc_check_per_partition(p, i, 1, "min", diag))) return s;
      if ((s = nc_check_per_partition(p, i, 2, "max", diag))) return s;
      /* NeuronCore-v4 on (nki.isa.rand2); last, so the other rules show on
       * every device. */
      return nc_needs_target(p, i, "rand2", NRT_TARGET_TRN3, diag);
    case NRT_NC_DROPOUT: {
      const nrt_nc_ap *data = &inst->ap[1];
      if (data->tensor < 0) return nc_fail(diag, i, -1, "operand", INVALID, "dropout needs data");
      if (data->partitions != dst->partitions || nc_ap_free_elems(data) != nc_ap_free_elems(dst))
        return nc_fail(diag, i, data->tensor, "shape_mismatch", INVALID,
                       "data has %d x %lld elements but dst %d x %lld", data->partitions,
                       (long long)nc_ap_free_elems(data), dst->partitions,
                       (long long)nc_ap_free_elems(dst));
      if (nc_first_partition(p, data) != nc_first_partition(p, dst))
        return nc_fail(diag, i, data->tensor, "same_partitions", INVALID,
                       "data is on other partitions than dst");
      if (dst->dtype != data->dtype)
        return nc_fail(diag, i, dst->tensor, "dtype", INVALID,
                       "dropout's dst has data's dtype");
      if (is_int(data->dtype) && inst->ap[2].tensor >= 0 && inst->ap[2].dtype != NRT_NC_FLOAT32)
        return nc_fail(diag, i, inst->ap[2].tensor, "dtype", INVALID,
                       "the drop probability of an integer tile is float32");
      return nc_check_per_partition(p, i, 2, "prob", diag);
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
