/* dma_copy's indirect form: a gather of HBM rows into an SBUF tile, or a
 * scatter of a tile's partitions into HBM rows, the rows named by an index
 * tile read while the program runs (software DGE, NRT_NC_FLAG_INDIRECT_*).
 *
 * Every index is checked before anything moves, as DGE's bounds check does
 * at run time: an index past the rows fails the run (oob_mode=error) or
 * skips its row (oob_mode=skip). Rows move in partition order, so of two
 * plain writes to one row the later partition's lands, and a
 * read-modify-write adds every duplicate's contribution in turn.
 *
 * An access pattern's scalar_offset (NRT_NC_FLAG_SCALAR_OFFSET) is the
 * one-word case: the word, checked the same way, moves the indexed side's
 * start and the copy runs as a plain dma_copy.
 */
#include <stdio.h>
#include <string.h>
#include "nc/access.h"

#define ROWS_MAX 128 /* one index per partition */

/* The row partition p of the index tile names (int32 indices below zero are
 * out of bounds like those past the rows). */
static int64_t index_of(const nc_core *core, const nrt_nc_ap *idx, int64_t p) {
  uint8_t raw[8];
  nc_gather_raw(core, idx, p, raw);
  if (idx->dtype == NRT_NC_INT64) { /* a 64-bit scalar_offset word */
    int64_t v;
    memcpy(&v, raw, 8);
    return v;
  }
  if (idx->dtype == NRT_NC_INT32) {
    int32_t v;
    memcpy(&v, raw, 4);
    return v;
  }
  uint32_t v;
  memcpy(&v, raw, 4);
  return (int64_t)v;
}

static void fail(const nc_core *core, const nrt_nc_inst *inst, nrt_status status, const char *rule,
                 const char *what) {
  *core->fault = rt_fail(status, "NKI instruction %d: [%s] %s",
                         (int)(inst - core->program->insts), rule, what);
}

/* Reads every index; 0 when the run must stop (the fault is set). */
static int read_indices(const nc_core *core, const nrt_nc_inst *inst, int64_t parts, int64_t *at) {
  int64_t rows = (int64_t)inst->imm[0];
  int skip = (inst->flags & NRT_NC_FLAG_OOB_SKIP) != 0;
  char what[200];
  for (int64_t p = 0; p < parts; p++) {
    at[p] = index_of(core, &inst->ap[2], p);
    if ((at[p] < 0 || at[p] >= rows) && !skip) {
      snprintf(what, sizeof what, "index %lld (partition %lld of the indices) is out of bounds "
               "for the %lld rows of the indexed tensor (oob_mode=error; oob_mode=skip skips it)",
               (long long)at[p], (long long)p, (long long)rows);
      fail(core, inst, NRT_ERROR_INDEX_OUT_OF_RANGE, "oob_mode", what);
      return 0;
    }
  }
  int claimed_unique = (inst->flags & (NRT_NC_FLAG_UNIQUE_INDICES | NRT_NC_FLAG_ACCUMULATE)) ==
                       (NRT_NC_FLAG_UNIQUE_INDICES | NRT_NC_FLAG_ACCUMULATE);
  for (int64_t p = 1; claimed_unique && p < parts; p++)
    for (int64_t q = 0; q < p; q++)
      if (at[q] == at[p] && at[p] >= 0 && at[p] < rows) {
        snprintf(what, sizeof what, "index %lld repeats (partitions %lld and %lld) in a "
                 "read-modify-write scatter declared with unique_indices=True (pass "
                 "unique_indices=False to add every duplicate)",
                 (long long)at[p], (long long)q, (long long)p);
        fail(core, inst, NRT_ERROR_INVALID_ARGUMENT, "unique_indices", what);
        return 0;
      }
  return 1;
}

/* One row: tile partition p <-> the HBM row `one` (partition 0 of it). */
static void move_row(const nc_core *core, const nrt_nc_inst *inst, const nrt_nc_ap *dst, int64_t pd,
                     const nrt_nc_ap *src, int64_t ps, float *a, float *b) {
  int64_t n = nc_ap_free_elems(dst);
  if (inst->flags & NRT_NC_FLAG_ACCUMULATE) { /* the DMA's read-modify-write, in fp32 */
    nc_gather_f32(core, dst, pd, a);
    nc_gather_f32(core, src, ps, b);
    for (int64_t j = 0; j < n; j++) a[j] += b[j];
    nc_scatter_f32(core, dst, pd, a);
  } else if (dst->dtype == src->dtype) {
    nc_gather_raw(core, src, ps, (uint8_t *)a);
    nc_scatter_raw(core, dst, pd, (const uint8_t *)a);
  } else {
    nc_gather_f32(core, src, ps, a);
    nc_scatter_f32(core, dst, pd, a);
  }
}

void nc_exec_indirect_copy(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  int scatter = (inst->flags & NRT_NC_FLAG_INDIRECT_DST) != 0;
  const nrt_nc_ap *rows = scatter ? &inst->ap[0] : &inst->ap[1];
  const nrt_nc_ap *tile = scatter ? &inst->ap[1] : &inst->ap[0];
  int64_t parts = tile->partitions, at[ROWS_MAX];
  if (parts > ROWS_MAX || !read_indices(core, inst, parts, at)) return;
  int64_t count = (int64_t)inst->imm[0], step = (int64_t)inst->imm[1];
  for (int64_t p = 0; p < parts; p++) {
    if (at[p] < 0 || at[p] >= count) continue; /* oob_mode=skip */
    nrt_nc_ap one = *rows; /* [1, F], or [P, F] stepping partitions (another dim indexed) */
    one.offset += at[p] * step + (rows->partitions > 1 ? p * rows->partition_step : 0);
    one.partitions = 1;
    if (scatter) move_row(core, inst, &one, 0, tile, p, a, b);
    else move_row(core, inst, tile, p, &one, 0, a, b);
  }
}

int nc_scalar_offset_copy(const nc_core *core, const nrt_nc_inst *inst, nrt_nc_inst *moved) {
  return nc_scalar_offset_move(core, inst, (int64_t)inst->imm[0], (int64_t)inst->imm[1], moved);
}

int nc_scalar_offset_move(const nc_core *core, const nrt_nc_inst *inst, int64_t count,
                          int64_t step, nrt_nc_inst *moved) {
  int64_t v = index_of(core, &inst->ap[2], 0);
  if (v < 0 || v >= count) {
    if (inst->flags & NRT_NC_FLAG_OOB_SKIP) return 0; /* the whole transfer is skipped */
    char what[200];
    snprintf(what, sizeof what, "scalar_offset %lld is out of bounds: the indexed dim allows "
             "0..%lld (oob_mode=error; oob_mode=skip skips the transfer)",
             (long long)v, (long long)count - 1);
    fail(core, inst, NRT_ERROR_INDEX_OUT_OF_RANGE, "oob_mode", what);
    return 0;
  }
  *moved = *inst;
  moved->ap[(inst->flags & NRT_NC_FLAG_INDIRECT_DST) ? 0 : 1].offset += v * step;
  moved->ap[2].tensor = -1;
  moved->flags &= ~(NRT_NC_FLAG_INDIRECT | NRT_NC_FLAG_SCALAR_OFFSET | NRT_NC_FLAG_OOB_SKIP);
  return 1;
}
