/* Rules of dma_copy's indirect form (a gather or scatter of HBM rows named
 * by an index tile, or a copy moved by one scalar_offset word), checked
 * once when a program is created. The front end
 * (torchneuron/nki/indirect.py) states them first with the kernel's names;
 * these keep a malformed record from reaching the executor.
 */
#include "nc/nc_internal.h"

#define INVALID NRT_ERROR_INVALID_ARGUMENT

/* The furthest element the indexed side reaches with the largest index
 * (count - 1, step elements apart): inside the tensor (HBM) or its
 * partition (on chip), since the executor trusts it and checks only the
 * indices at run time. */
static int reach_fits(const nrt_nc_program_t p, const nrt_nc_ap *rows, double count, double step) {
  const nrt_nc_tensor *t = &p->tensors[rows->tensor];
  int64_t hi = rows->offset + ((int64_t)count - 1) * (int64_t)step;
  if (t->buffer == NRT_NC_HBM && rows->partitions > 1 && rows->partition_step > 0)
    hi += rows->partition_step * (rows->partitions - 1);
  for (int d = 0; d < rows->num_free; d++)
    if (rows->stride[d] > 0) hi += rows->stride[d] * (rows->count[d] - 1);
  return (hi + 1) * (int64_t)nrt_nc_dtype_size(rows->dtype) <= t->bytes;
}

/* An access pattern's scalar_offset: one word moves a whole plain copy. */
static nrt_status check_scalar_offset(const nrt_nc_program_t p, int32_t i, const nrt_nc_ap *rows,
                                      const nrt_nc_ap *other, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  if (rows->partitions != other->partitions ||
      nc_ap_free_elems(rows) != nc_ap_free_elems(other))
    return nc_fail(diag, i, rows->tensor, "shape_mismatch", INVALID,
                   "dma_copy: src has %d x %lld elements, dst %d x %lld", inst->ap[1].partitions,
                   (long long)nc_ap_free_elems(&inst->ap[1]), inst->ap[0].partitions,
                   (long long)nc_ap_free_elems(&inst->ap[0]));
  if (p->tensors[rows->tensor].buffer != NRT_NC_HBM && inst->ap[2].dtype != NRT_NC_INT32)
    return nc_fail(diag, i, inst->ap[2].tensor, "indirect_indices", INVALID,
                   "a scalar_offset on an SBUF or PSUM operand is int32");
  return NRT_SUCCESS;
}

nrt_status nc_check_indirect_copy(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  uint32_t f = inst->flags;
  int to_rows = (f & NRT_NC_FLAG_INDIRECT_DST) != 0;
  int from_rows = (f & NRT_NC_FLAG_INDIRECT_SRC) != 0;
  int scalar = (f & NRT_NC_FLAG_SCALAR_OFFSET) != 0;
  const nrt_nc_ap *idx = &inst->ap[2];
  if (to_rows == from_rows || idx->tensor < 0 || inst->ap[1].tensor < 0)
    return nc_fail(diag, i, -1, "indirect_dma", INVALID,
                   "an indirect dma_copy indexes exactly one of src and dst and has an index tile");
  const nrt_nc_ap *rows = to_rows ? &inst->ap[0] : &inst->ap[1];
  const nrt_nc_ap *tile = to_rows ? &inst->ap[1] : &inst->ap[0];
  if (p->tensors[idx->tensor].buffer != NRT_NC_SBUF ||
      (idx->dtype != NRT_NC_INT32 && idx->dtype != NRT_NC_UINT32 &&
       !(scalar && idx->dtype == NRT_NC_INT64)) ||
      nc_ap_free_elems(idx) != 1 || (scalar && idx->partitions != 1))
    return nc_fail(diag, i, idx->tensor, "indirect_indices", INVALID,
                   scalar ? "a scalar_offset is one int32 / uint32 / int64 SBUF word [1, 1]"
                          : "the indices of an indirect dma_copy are an int32 / uint32 SBUF tile "
                            "[P, 1]");
  nrt_status s = NRT_SUCCESS;
  if (scalar) {
    if ((s = check_scalar_offset(p, i, rows, tile, diag))) return s;
  } else {
    if (p->tensors[rows->tensor].buffer != NRT_NC_HBM ||
        (rows->partitions != 1 && rows->partitions != tile->partitions) ||
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
  }
  if (!(inst->imm[0] >= 1 && inst->imm[1] >= 0))
    return nc_fail(diag, i, rows->tensor, "indirect_dma", INVALID,
                   "an indirect dma_copy needs the indexed tensor's rows (%g) and row step (%g)",
                   inst->imm[0], inst->imm[1]);
  if (!reach_fits(p, rows, inst->imm[0], inst->imm[1]))
    return nc_fail(diag, i, rows->tensor, "indirect_dma", INVALID,
                   "the %g rows an indirect dma_copy may index run past the end of the tensor",
                   inst->imm[0]);
  /* NKI ISA reference, nki.isa.dma_copy: with dst_rmw_op only oob_mode.error. */
  if ((f & NRT_NC_FLAG_ACCUMULATE) && (f & NRT_NC_FLAG_OOB_SKIP))
    return nc_fail(diag, i, -1, "indirect_rmw_oob", INVALID,
                   "a read-modify-write dma_copy allows only oob_mode=error");
  return NRT_SUCCESS;
}

/* dma_transpose's src moved by one scalar_offset word (ap2): imm2 the
 * values the word may take, imm3 the elements one step moves. */
nrt_status nc_check_transpose_offset(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *src = &inst->ap[1], *w = &inst->ap[2];
  int on_chip = p->tensors[src->tensor].buffer != NRT_NC_HBM;
  int wide_ok = !on_chip && (w->dtype == NRT_NC_UINT32 || w->dtype == NRT_NC_INT64);
  if ((inst->flags & NRT_NC_FLAG_INDIRECT_DST) || w->tensor < 0)
    return nc_fail(diag, i, -1, "indirect_dma", INVALID,
                   "a dma_transpose's scalar_offset moves its src");
  if (p->tensors[w->tensor].buffer != NRT_NC_SBUF || w->partitions != 1 ||
      nc_ap_free_elems(w) != 1 || (w->dtype != NRT_NC_INT32 && !wide_ok))
    return nc_fail(diag, i, w->tensor, "indirect_indices", INVALID,
                   "a scalar_offset is one int32 / uint32 / int64 SBUF word [1, 1] (int32 on an "
                   "SBUF or PSUM operand)");
  if (!(inst->imm[2] >= 1 && inst->imm[3] >= 0) || !reach_fits(p, src, inst->imm[2], inst->imm[3]))
    return nc_fail(diag, i, src->tensor, "indirect_dma", INVALID,
                   "the %g values a scalar_offset may take move dma_transpose's src past its "
                   "tensor", inst->imm[2]);
  return NRT_SUCCESS;
}

/* tensor_copy_dynamic_src / _dst: a Vector tensor_copy whose src (or dst,
 * NRT_NC_FLAG_INDIRECT_DST) starts where an int32 SBUF word says, on a free
 * dim of an on-chip tile (ISA reference: "the dynamic offset must be a scalar
 * value resided in SBUF"; src and dst have the same partitions and elements
 * per partition). */
nrt_status nc_check_copy_offset(const nrt_nc_program_t p, int32_t i, nrt_nc_diagnostic *diag) {
  const nrt_nc_inst *inst = &p->insts[i];
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1], *w = &inst->ap[2];
  int moves_dst = (inst->flags & NRT_NC_FLAG_INDIRECT_DST) != 0;
  const nrt_nc_ap *moved = moves_dst ? dst : src;
  if (src->tensor < 0 || w->tensor < 0)
    return nc_fail(diag, i, -1, "operand", INVALID,
                   "a dynamic tensor_copy has a src and an offset word");
  if (p->tensors[dst->tensor].buffer == NRT_NC_HBM || p->tensors[src->tensor].buffer == NRT_NC_HBM)
    return nc_fail(diag, i, moved->tensor, "on_chip_only", INVALID,
                   "a dynamic tensor_copy copies within SBUF / PSUM (a DMA moves HBM)");
  if (p->tensors[w->tensor].buffer != NRT_NC_SBUF || w->partitions != 1 ||
      nc_ap_free_elems(w) != 1 || w->dtype != NRT_NC_INT32)
    return nc_fail(diag, i, w->tensor, "indirect_indices", INVALID,
                   "a dynamic tensor_copy's offset is one int32 SBUF word [1, 1]");
  if (src->partitions != dst->partitions || nc_ap_free_elems(src) != nc_ap_free_elems(dst))
    return nc_fail(diag, i, dst->tensor, "shape_mismatch", INVALID,
                   "tensor_copy: src has %d x %lld elements, dst %d x %lld", src->partitions,
                   (long long)nc_ap_free_elems(src), dst->partitions,
                   (long long)nc_ap_free_elems(dst));
  if (!(inst->imm[2] >= 1 && inst->imm[3] >= 0) ||
      !reach_fits(p, moved, inst->imm[2], inst->imm[3]))
    return nc_fail(diag, i, moved->tensor, "dynamic_start", INVALID,
                   "the %g values the offset may take move the copy's %s past its tile",
                   inst->imm[2], moves_dst ? "dst" : "src");
  return NRT_SUCCESS;
}
