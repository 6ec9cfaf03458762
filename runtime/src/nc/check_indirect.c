/* Rules of dma_copy's indirect form (a gather or scatter of HBM rows named
 * by an index tile), checked once when a program is created. The front end
 * (torchneuron/nki/indirect.py) states them first with the kernel's names;
 * these keep a malformed record from reaching the executor.
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

nrt_status nc_check_indirect_copy(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  uint32_t f = inst->flags;
  int to_rows = (f & NRT_NC_FLAG_INDIRECT_DST) != 0;
  int from_rows = (f & NRT_NC_FLAG_INDIRECT_SRC) != 0;
  const nrt_nc_ap *idx = &inst->ap[2];
  if (to_rows == from_rows || idx->tensor < 0 || inst->ap[1].tensor < 0)
    return nc_fail(diag, i, -1, "indirect_dma", INVALID,
                   "an indirect dma_copy indexes exactly one of src and dst and has an index tile");
  const nrt_nc_ap *rows = to_rows ? &inst->ap[0] : &inst->ap[1];
  const nrt_nc_ap *tile = to_rows ? &inst->ap[1] : &inst->ap[0];
  if (p->tensors[idx->tensor].buffer != NRT_NC_SBUF ||
      (idx->dtype != NRT_NC_INT32 && idx->dtype != NRT_NC_UINT32) || nc_ap_free_elems(idx) != 1)
    return nc_fail(diag, i, idx->tensor, "indirect_indices", INVALID,
                   "the indices of an indirect dma_copy are an int32 / uint32 SBUF tile [P, 1]");
  if (p->tensors[rows->tensor].buffer != NRT_NC_HBM || rows->partitions != 1 ||
      p->tensors[tile->tensor].buffer != NRT_NC_SBUF)
    return nc_fail(diag, i, rows->tensor, "indirect_dma", INVALID,
                   "an indirect dma_copy moves rows of an HBM tensor to or from an SBUF tile");
  if (idx->partitions != tile->partitions || idx->partitions > 128)
    return nc_fail(diag, i, idx->tensor, "indirect_indices", INVALID,
                   "one index per partition: %d indices for a %d-partition tile",
                   idx->partitions, tile->partitions);
  if (nc_ap_free_elems(rows) != nc_ap_free_elems(tile))
    return nc_fail(diag, i, tile->tensor, "shape_mismatch", INVALID,
                   "an indirect dma_copy moves rows of %lld elements, the tile has %lld per "
                   "partition", (long long)nc_ap_free_elems(rows),
                   (long long)nc_ap_free_elems(tile));
  if (!(inst->imm[0] >= 1 && inst->imm[1] >= 0))
    return nc_fail(diag, i, rows->tensor, "indirect_dma", INVALID,
                   "an indirect dma_copy needs the indexed tensor's rows (%g) and row step (%g)",
                   inst->imm[0], inst->imm[1]);
  /* The last row the indices may name lies inside the tensor (the executor
   * trusts it: only the indices are checked at run time). */
  int64_t hi = rows->offset + ((int64_t)inst->imm[0] - 1) * (int64_t)inst->imm[1];
  for (int d = 0; d < rows->num_free; d++)
    if (rows->stride[d] > 0) hi += rows->stride[d] * (rows->count[d] - 1);
  if ((hi + 1) * (int64_t)nrt_nc_dtype_size(rows->dtype) > p->tensors[rows->tensor].bytes)
    return nc_fail(diag, i, rows->tensor, "indirect_dma", INVALID,
                   "the %g rows an indirect dma_copy may index run past the end of the tensor",
                   inst->imm[0]);
  /* NKI ISA reference, nki.isa.dma_copy: with dst_rmw_op only oob_mode.error. */
  if ((f & NRT_NC_FLAG_ACCUMULATE) && (f & NRT_NC_FLAG_OOB_SKIP))
    return nc_fail(diag, i, -1, "indirect_rmw_oob", INVALID,
                   "a read-modify-write dma_copy allows only oob_mode=error");
  return NRT_SUCCESS;
}
