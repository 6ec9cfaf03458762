/* Placement of on-chip tensors: liveness, then SBUF bytes and PSUM banks.
 *
 * A tensor is live from the first to the last instruction that touches it.
 * Automatic SBUF tensors get a byte range (the same in every partition,
 * starting at partition 0) chosen next-fit from where the previous one
 * ended, so consecutive loop iterations land in different buffers while
 * space allows: what a kernel author's multi-buffering gives on hardware and
 * what lets the cost model overlap DMA with compute. PSUM tensors take whole
 * 2 KiB banks. Manual placements are kept as given, checked, and reserved
 * for the whole program (automatic tiles go around them). If the
 * live tensors do not fit, creation fails with the capacity rule.
 * Fresh memory is filled (NaN for floats) when a tensor's life begins,
 * unless its first instruction overwrites it completely or it is a manual
 * placement over one used before (an alias, which sees that one's data).
 */
#include <stdlib.h>
#include <string.h>
#include "nc/nc_internal.h"

typedef struct interval {
  int64_t begin, end;
  int32_t tensor;
} interval;

typedef struct arena {
  interval *live; /* sorted by begin */
  int32_t count;
  int64_t capacity, cursor, used;
} arena;

static void arena_remove(arena *a, int32_t tensor) {
  for (int32_t k = 0; k < a->count; k++) {
    if (a->live[k].tensor != tensor) continue;
    a->used -= a->live[k].end - a->live[k].begin;
    memmove(&a->live[k], &a->live[k + 1], (size_t)(a->count - k - 1) * sizeof *a->live);
    a->count--;
    return;
  }
}

static void arena_insert(arena *a, int64_t begin, int64_t end, int32_t tensor) {
  int32_t k = 0;
  while (k < a->count && a->live[k].begin < begin) k++;
  memmove(&a->live[k + 1], &a->live[k], (size_t)(a->count - k) * sizeof *a->live);
  a->live[k] = (interval){.begin = begin, .end = end, .tensor = tensor};
  a->count++;
  a->used += end - begin;
}

/* First gap of size bytes (aligned) at or after from; -1 if none. */
static int64_t arena_gap_from(const arena *a, int64_t from, int64_t bytes, int64_t align) {
  int64_t at = (from + align - 1) / align * align;
  for (int32_t k = 0; k <= a->count; k++) {
    int64_t gap_end = k < a->count ? a->live[k].begin : a->capacity;
    if (k < a->count && a->live[k].end <= at) continue;
    if (at + bytes <= gap_end) return at;
    if (k < a->count) at = (a->live[k].end + align - 1) / align * align;
  }
  return -1;
}

static int64_t arena_place(arena *a, int64_t bytes, int64_t align) {
  int64_t at = arena_gap_from(a, a->cursor, bytes, align);
  if (at < 0) at = arena_gap_from(a, 0, bytes, align);
  if (at >= 0) a->cursor = at + bytes;
  return at;
}

/* Whether instruction i overwrites all of tensor t before reading it. */
static int fully_written_first(const nrt_nc_program_t p, int32_t i, int32_t t) {
  const nrt_nc_inst *inst = &p->insts[i];
  for (int k = 1; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor == t && (nc_operand_role(inst, k) & 1)) return 0;
  if (nc_operand_role(inst, 0) != 2 || inst->ap[0].tensor != t) return 0;
  const nrt_nc_ap *ap = &inst->ap[0];
  const nrt_nc_tensor *tensor = &p->tensors[t];
  if (ap->partition_start != 0 || ap->partition_step != 1 || ap->partitions != tensor->partitions ||
      ap->offset != 0 || ap->stride[NRT_NC_MAX_FREE_DIMS - 1] != 1)
    return 0;
  for (int d = NRT_NC_MAX_FREE_DIMS - 2; d >= 0; d--)
    if (ap->count[d] > 1 && ap->stride[d] != ap->stride[d + 1] * ap->count[d + 1]) return 0;
  return nc_ap_free_elems(ap) * (int64_t)nrt_nc_dtype_size(ap->dtype) == tensor->bytes;
}

/* Whether manual tensor t shares memory with a manual tensor used before it
 * (order[0 .. before) are the tensors placed so far): then its memory is not
 * fresh, and it keeps the data written through the other. */
static int aliases_earlier(const nrt_nc_program_t p, const int32_t *order, int32_t before,
                           int32_t t) {
  const nrt_nc_tensor *a = &p->tensors[t];
  for (int32_t k = 0; k < before; k++) {
    const nrt_nc_tensor *b = &p->tensors[order[k]];
    if (b->fixed && b->buffer == a->buffer &&
        a->partition_base < b->partition_base + b->partitions &&
        b->partition_base < a->partition_base + a->partitions &&
        a->byte_offset < b->byte_offset + b->bytes && b->byte_offset < a->byte_offset + a->bytes)
      return 1;
  }
  return 0;
}

nrt_status nc_check_placement(const nrt_nc_program_t p, int32_t t, nrt_nc_diagnostic *diag) {
  const nrt_nc_tensor *tensor = &p->tensors[t];
  int64_t capacity = tensor->buffer == NRT_NC_SBUF ? p->geometry.sbuf_partition_bytes
                                                   : p->geometry.psum_partition_bytes;
  int64_t bank = p->geometry.psum_partition_bytes / p->geometry.psum_banks;
  if (tensor->partition_base < 0 || tensor->partition_base + tensor->partitions > p->geometry.partitions ||
      tensor->byte_offset < 0 || tensor->byte_offset + tensor->bytes > capacity)
    return nc_fail(diag, -1, t, "out_of_bounds", NRT_ERROR_INVALID_ARGUMENT,
                   "address=(%d, %lld) places %d partitions x %lld bytes outside the %s "
                   "(%d partitions x %lld bytes)", tensor->partition_base,
                   (long long)tensor->byte_offset, tensor->partitions, (long long)tensor->bytes,
                   tensor->buffer == NRT_NC_SBUF ? "SBUF" : "PSUM", p->geometry.partitions,
                   (long long)capacity);
  if (tensor->buffer == NRT_NC_PSUM && tensor->byte_offset % bank != 0)
    return nc_fail(diag, -1, t, "psum_bank_alignment", NRT_ERROR_INVALID_ARGUMENT,
                   "a PSUM placement must start on a bank boundary (a multiple of %lld bytes), "
                   "got byte offset %lld", (long long)bank, (long long)tensor->byte_offset);
  return NRT_SUCCESS;
}

static nrt_status place_one(nrt_nc_program_t p, arena *arenas, int32_t t, nrt_nc_diagnostic *diag) {
  nrt_nc_tensor *tensor = &p->tensors[t];
  arena *a = &arenas[tensor->buffer];
  int64_t bank = p->geometry.psum_partition_bytes / p->geometry.psum_banks;
  if (tensor->fixed) return NRT_SUCCESS; /* reserved for the whole program */
  int psum = tensor->buffer == NRT_NC_PSUM;
  int64_t bytes = psum ? bank : (tensor->bytes + 63) / 64 * 64;
  int64_t at = bytes == 0 ? 0 : arena_place(a, bytes, psum ? bank : 64);
  if (at < 0) {
    if (psum)
      return nc_fail(diag, p->first_use[t], t, "psum_capacity", NRT_ERROR_OUT_OF_MEMORY,
                     "PSUM has %d banks of %lld bytes per partition and all are held by live "
                     "tiles; this tile needs another", p->geometry.psum_banks, (long long)bank);
    return nc_fail(diag, p->first_use[t], t, "sbuf_capacity", NRT_ERROR_OUT_OF_MEMORY,
                   "SBUF partitions hold %lld bytes; live tiles use %lld and this one needs %lld "
                   "more", (long long)a->capacity, (long long)a->used, (long long)bytes);
  }
  tensor->partition_base = 0;
  tensor->byte_offset = at;
  if (bytes) arena_insert(a, at, at + bytes, t);
  return NRT_SUCCESS;
}

nrt_status nc_place_tensors(nrt_nc_program_t p, nrt_nc_diagnostic *diag) {
  int32_t nt = p->num_tensors, ni = p->num_insts;
  int32_t *last_use = malloc((size_t)(nt ? nt : 1) * sizeof *last_use);
  int32_t *order = malloc((size_t)(nt ? nt : 1) * sizeof *order);
  interval *live = malloc((size_t)(2 * nt + 2) * sizeof *live);
  nrt_status s = NRT_SUCCESS;
  if (!last_use || !order || !live) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory placing NKI tensors");
    goto done;
  }
  for (int32_t t = 0; t < nt; t++) p->first_use[t] = last_use[t] = -1;
  for (int32_t i = 0; i < ni; i++)
    for (int k = 0; k < NRT_NC_MAX_APS; k++) {
      int32_t t = p->insts[i].ap[k].tensor;
      if (t < 0) continue;
      if (p->first_use[t] < 0) p->first_use[t] = i;
      last_use[t] = i;
    }
  nc_extend_loop_lifetimes(p, last_use);
  arena arenas[2] = {
      {.live = live, .capacity = p->geometry.sbuf_partition_bytes},
      {.live = live + nt + 1, .capacity = p->geometry.psum_partition_bytes},
  };
  /* Tensors in order of first use; a sweep frees the dead ones first.
   * Manual placements hold their bytes for the whole program, so that no
   * automatic tile is ever placed over one. */
  int32_t count = 0;
  for (int32_t t = 0; t < nt; t++) {
    const nrt_nc_tensor *tensor = &p->tensors[t];
    if (tensor->buffer == NRT_NC_HBM) continue;
    if (p->first_use[t] < 0) continue;
    order[count++] = t;
    if (tensor->fixed)
      arena_insert(&arenas[tensor->buffer], tensor->byte_offset,
                   tensor->byte_offset + tensor->bytes, t);
  }
  for (int32_t a = 1; a < count; a++) { /* insertion sort: nearly sorted already */
    int32_t t = order[a], b = a;
    while (b > 0 && p->first_use[order[b - 1]] > p->first_use[t]) order[b] = order[b - 1], b--;
    order[b] = t;
  }
  int32_t next = 0;
  for (int32_t i = 0; i < ni && next < count; i++) {
    if (p->first_use[order[next]] != i) continue;
    for (int b = 0; b < 2; b++)
      for (int32_t k = arenas[b].count - 1; k >= 0; k--)
        if (last_use[arenas[b].live[k].tensor] < i && !p->tensors[arenas[b].live[k].tensor].fixed)
          arena_remove(&arenas[b], arenas[b].live[k].tensor);
    while (next < count && p->first_use[order[next]] == i) {
      int32_t t = order[next++];
      if ((s = place_one(p, arenas, t, diag))) goto done;
      p->needs_fill[t] = !fully_written_first(p, i, t) &&
                         !(p->tensors[t].fixed && aliases_earlier(p, order, next - 1, t));
    }
  }
  /* Fill lists per instruction, for the executor. */
  for (int32_t a = 0; a < count; a++)
    if (p->needs_fill[order[a]]) p->fill_start[p->first_use[order[a]] + 1]++;
  for (int32_t i = 0; i < ni; i++) p->fill_start[i + 1] += p->fill_start[i];
  int32_t filled = 0;
  for (int32_t a = 0; a < count; a++)
    if (p->needs_fill[order[a]]) p->fill_list[filled++] = order[a];
done:
  free(last_use);
  free(order);
  free(live);
  return s;
}
