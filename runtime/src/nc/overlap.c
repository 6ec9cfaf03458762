/* Which DMA may run alongside the Tensor engine instruction before it.
 *
 * The simulator runs a program in order. A matmul keeps every thread of the
 * kernel pool busy; the small DMA after it (the next tile's load, in the
 * usual tiled loop) would run on one thread while the others wait. When the
 * two touch disjoint memory, the order of their effects cannot show, so the
 * DMA may run on the threads of the matmul's own parallel job, a share of
 * its rows on each (exec.c, tensor_engine.c's side task): the same bits,
 * without the wait.
 *
 * Disjointness is decided from the placement, conservatively: two operands
 * conflict if they are the same tensor, both in HBM (arguments may alias),
 * or in the same on-chip buffer with intersecting byte ranges (partitions
 * are not compared). A pair conflicts if the DMA's destination meets any
 * operand of the matmul, or the DMA's source meets the matmul's
 * destination. The DMA must be a plain copy (no accumulate, indirection or
 * run-time offset) whose life-starting tiles need no fill.
 */
#include "nc/access.h"

static int operands_conflict(const struct nrt_nc_program *p, const nrt_nc_ap *x, const nrt_nc_ap *y) {
  if (x->tensor < 0 || y->tensor < 0) return 0;
  if (x->tensor == y->tensor) return 1;
  const nrt_nc_tensor *a = &p->tensors[x->tensor], *b = &p->tensors[y->tensor];
  if (a->buffer != b->buffer) return 0;
  if (a->buffer == NRT_NC_HBM) return 1;
  return a->byte_offset < b->byte_offset + b->bytes && b->byte_offset < a->byte_offset + a->bytes;
}

int nc_copy_may_join(const struct nrt_nc_program *p, int32_t i) {
  if (i + 1 >= p->num_insts) return 0;
  const nrt_nc_inst *mm = &p->insts[i], *dma = &p->insts[i + 1];
  if (mm->opcode != NRT_NC_MATMUL || dma->opcode != NRT_NC_DMA_COPY) return 0;
  if ((dma->flags & ~NRT_NC_FLAG_HWDGE) != 0) return 0;
  if (p->fill_start[i + 1] != p->fill_start[i + 2]) return 0;
  const nrt_nc_ap *dst = &dma->ap[0], *src = &dma->ap[1];
  for (int k = 0; k < NRT_NC_MAX_APS; k++)
    if (operands_conflict(p, dst, &mm->ap[k])) return 0;
  return !operands_conflict(p, src, &mm->ap[0]);
}

void nc_side_task_step(nc_side_task *side) {
  if (!side) return;
  int k = atomic_fetch_add_explicit(&side->next, 1, memory_order_relaxed);
  if (k < side->pieces) side->fn(side->ctx, k, side->pieces);
}

void nc_side_task_finish(nc_side_task *side) {
  while (side && atomic_load_explicit(&side->next, memory_order_relaxed) < side->pieces)
    nc_side_task_step(side);
}
