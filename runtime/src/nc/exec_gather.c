/* topk, exponential, local_gather, nc_n_gather, sequence_bounds and
 * nc_stream_shuffle.
 *
 * The GpSimd engine's eight cores each own 16 partitions, so topk and
 * local_gather work one 16-partition group at a time; the Vector engine's
 * shuffle moves whole partitions within 32-partition quadrants. Gathers
 * move raw elements (no conversion). An index the reference leaves
 * undefined (out of range) reads as all-ones bytes, NaN in every float
 * format, so that a kernel relying on it shows it.
 */
#include <stdlib.h>
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"
#include "nc/operand.h"

/* Monotone 17-bit key of a bfloat16 for a descending sort: larger values
 * get larger keys, NaN above everything (as max8 treats it). */
static uint32_t bf16_key(uint16_t b) {
  if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu)) return 0x10000u;
  return (b & 0x8000u) ? (uint32_t)(~b & 0xffffu) : (uint32_t)(b | 0x8000u);
}

static int descending_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? 1 : a > b ? -1 : 0;
}

/* Moves the k largest of v[0..n) to the front (in no order): quickselect
 * with a median-of-three pivot, so a top-k costs O(n) plus sorting k. */
static void select_largest(uint64_t *v, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    uint64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
    uint64_t pivot = a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (v[i] > pivot) i++;
      while (v[j] < pivot) j--;
      if (i <= j) {
        uint64_t t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    if (k - 1 <= j) hi = j;
    else if (k - 1 >= i) lo = i;
    else return;
  }
}

/* Per 16-partition group: the k largest of the n snake elements (ties: the
 * lower index first), written back in snake order. */
static void exec_topk(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c,
                      float *d) {
  const nrt_nc_ap *val = &inst->ap[0], *src = &inst->ap[1], *idx = &inst->ap[2];
  int64_t n = (int64_t)inst->imm[0], k = nc_ap_free_elems(val), cols = nc_ap_free_elems(src);
  int64_t written = (k + 15) / 16;
  int descending = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0;
  uint16_t *rows = (uint16_t *)a;
  uint64_t *order = (uint64_t *)b;
  for (int64_t g = 0; g < val->partitions / 16; g++) {
    for (int64_t r = 0; r < 16; r++) nc_gather_raw(core, src, 16 * g + r, (uint8_t *)(rows + r * cols));
    for (int64_t i = 0; i < n; i++) {
      uint16_t bits = rows[(i % 16) * cols + i / 16];
      order[i] = ((uint64_t)bf16_key(bits) << 32) | (uint64_t)(0xffffffffu - (uint32_t)i);
    }
    select_largest(order, n, k);
    qsort(order, (size_t)k, sizeof *order, descending_u64);
    for (int64_t r = 0; r < 16; r++) {
      uint16_t *vrow = (uint16_t *)c;
      uint32_t *irow = (uint32_t *)d;
      nc_gather_raw(core, val, 16 * g + r, (uint8_t *)vrow);
      nc_gather_raw(core, idx, 16 * g + r, (uint8_t *)irow);
      for (int64_t col = 0; col < written; col++) {
        int64_t j = col * 16 + r; /* result j sits at partition j % 16, column j / 16 */
        if (j >= k) { /* the last column is written on all 16 partitions */
          vrow[col] = 0xff80u; /* -inf */
          irow[col] = 0xffffffffu;
          continue;
        }
        uint32_t i = 0xffffffffu - (uint32_t)(order[descending ? j : k - 1 - j] & 0xffffffffu);
        vrow[col] = rows[(i % 16) * cols + i / 16];
        irow[col] = i;
      }
      nc_scatter_raw(core, val, 16 * g + r, (const uint8_t *)vrow);
      nc_scatter_raw(core, idx, 16 * g + r, (const uint8_t *)irow);
    }
  }
}

static void exec_exponential(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int reduce = inst->ap[4].tensor >= 0 ||
               (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_LOAD | NRT_NC_FLAG_REDUCE_FOLD));
  for (int64_t p = 0; p < dst->partitions; p++) {
    float m = nc_operand_or_imm(core, &inst->ap[2], p, inst->imm[0]);
    nc_gather_f32(core, &inst->ap[1], p, a);
    for (int64_t j = 0; j < n; j++) a[j] = rt_vm_expf(a[j] - m);
    nc_scatter_f32(core, dst, p, a);
    if (!reduce) continue;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += a[j];
    float r = nc_reduce_command(core, inst, p, NRT_NC_ALU_ADD, sum);
    if (inst->ap[4].tensor >= 0) nc_store(inst->ap[4].dtype, nc_row(core, &inst->ap[4], p), r);
  }
}

/* Copies `size` bytes of element `from` of row src to element `to` of out,
 * or all-ones bytes when from is outside [0, limit). */
static void move_element(uint8_t *out, int64_t to, const uint8_t *src, int64_t from, int64_t limit,
                         size_t size) {
  if (from >= 0 && from < limit) memcpy(out + to * (int64_t)size, src + from * (int64_t)size, size);
  else memset(out + to * (int64_t)size, 0xff, size);
}

static void exec_local_gather(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b,
                              float *c) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1], *index = &inst->ap[2];
  int64_t e = (int64_t)inst->imm[0], v = (int64_t)inst->imm[1], cols = nc_ap_free_elems(index);
  int64_t limit = nc_ap_free_elems(src);
  size_t size = nrt_nc_dtype_size(src->dtype);
  int32_t *flat = (int32_t *)a, *row = (int32_t *)c;
  for (int64_t g = 0; g < dst->partitions / 16; g++) {
    /* The group's indices, flattened partition first (column-major). */
    for (int64_t r = 0; r < 16; r++) {
      nc_gather_bits(core, index, 16 * g + r, row);
      for (int64_t col = 0; col < cols; col++) flat[col * 16 + r] = row[col] & 0xffff;
    }
    for (int64_t r = 0; r < 16; r++) {
      uint8_t *in = (uint8_t *)b, *out = (uint8_t *)c;
      nc_gather_raw(core, src, 16 * g + r, in);
      for (int64_t t = 0; t < v; t++)
        for (int64_t j = 0; j < e; j++) move_element(out, t * e + j, in, flat[t] + j, limit, size);
      nc_scatter_raw(core, dst, 16 * g + r, out);
    }
  }
}

static void exec_n_gather(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b,
                          float *c) {
  const nrt_nc_ap *dst = &inst->ap[0], *data = &inst->ap[1];
  int64_t n = nc_ap_free_elems(dst), limit = nc_ap_free_elems(data);
  size_t size = nrt_nc_dtype_size(data->dtype);
  for (int64_t p = 0; p < dst->partitions; p++) {
    uint8_t *in = (uint8_t *)a, *out = (uint8_t *)c;
    int32_t *idx = (int32_t *)b;
    nc_gather_raw(core, data, p, in);
    nc_gather_bits(core, &inst->ap[2], p, idx);
    for (int64_t j = 0; j < n; j++) move_element(out, j, in, (int64_t)(uint32_t)idx[j], limit, size);
    nc_scatter_raw(core, dst, p, out);
  }
}

/* The reference's two sweeps: starts forward, (exclusive) ends backward;
 * id 0 is padding with bounds (n, -1). */
static void exec_sequence_bounds(const nc_core *core, const nrt_nc_inst *inst, float *a,
                                 float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *ids = &inst->ap[1];
  int64_t n = nc_ap_free_elems(ids);
  int32_t *id = (int32_t *)a;
  if (ids->dtype == NRT_NC_INT32) {
    nc_gather_bits(core, ids, 0, id);
  } else { /* float ids compare as floats: their bit patterns order the same for equality */
    nc_gather_f32(core, ids, 0, a);
    for (int64_t i = 0; i < n; i++) {
      float f = a[i];
      id[i] = f == 0.0f ? 0 : (int32_t)rt_f32_bits(f);
    }
  }
  float *start = b, *end = b + n;
  for (int64_t i = 0; i < n; i++)
    start[i] = id[i] == 0 ? (float)n : (i > 0 && id[i] == id[i - 1]) ? start[i - 1] : (float)i;
  for (int64_t i = n - 1; i >= 0; i--)
    end[i] = id[i] == 0 ? -1.0f : (i < n - 1 && id[i] == id[i + 1]) ? end[i + 1] : (float)(i + 1);
  nc_scatter_f32(core, dst, 0, b);
}

static void exec_stream_shuffle(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t bytes = nc_ap_free_elems(src) * (int64_t)nrt_nc_dtype_size(src->dtype);
  int64_t most = dst->partitions > src->partitions ? dst->partitions : src->partitions;
  uint8_t *held = (uint8_t *)a; /* the quadrant's source rows, read before any write (in place) */
  for (int64_t q = 0; q * 32 < most; q++) {
    for (int64_t m = 0; m < 32 && q * 32 + m < src->partitions; m++)
      nc_gather_raw(core, src, q * 32 + m, held + m * bytes);
    for (int64_t m = 0; m < 32 && q * 32 + m < dst->partitions; m++) {
      int64_t from = ((int64_t)inst->imm[m / 8] >> (6 * (m % 8))) & 63;
      if (from != 63) nc_scatter_raw(core, dst, q * 32 + m, held + from * bytes);
    }
  }
}

void nc_exec_gather(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c,
                    float *d) {
  switch (inst->opcode) {
    case NRT_NC_TOPK: exec_topk(core, inst, a, b, c, d); break;
    case NRT_NC_EXPONENTIAL: exec_exponential(core, inst, a); break;
    case NRT_NC_LOCAL_GATHER: exec_local_gather(core, inst, a, b, c); break;
    case NRT_NC_N_GATHER: exec_n_gather(core, inst, a, b, c); break;
    case NRT_NC_SEQUENCE_BOUNDS: exec_sequence_bounds(core, inst, a, b); break;
    default: exec_stream_shuffle(core, inst, a); break;
  }
}
