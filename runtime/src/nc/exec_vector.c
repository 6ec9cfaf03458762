/* Vector-engine instructions beyond the element-wise ones: the scan,
 * bn_stats / bn_aggr and the top-8 family (max8, nc_find_index8,
 * nc_match_replace8); and GpSimd's reduction across partitions. Each works one partition at a time in fp32, as the
 * engine does, rounding into the destination's dtype.
 */
#include <math.h>
#include "nc/access.h"
#include "nc/numerics.h"

static float scalar_or_imm(const nc_core *core, const nrt_nc_ap *ap, int64_t p, double imm) {
  if (ap->tensor < 0) return (float)imm;
  return nc_load(ap->dtype, nc_row(core, ap, p));
}

/* Out of line on purpose: the scan is a serial chain, and inlining nc_alu
 * twice in its loop let -O3 unswitch on both ALU ops (one loop copy per
 * pair of ops), which took cc1 minutes and gigabytes for no speed. */
__attribute__((noinline)) static float scan_alu(int32_t op, float x, float y) {
  return nc_alu(op, x, y);
}

/* One partition's chain: out[j] = op1(op0(x0[j], prev), x1[j]) (operands
 * swapped by the reverse flags). The linear recurrence (multiply, then add;
 * two roundings, no contraction in C11) runs without the ALU dispatch. */
static void scan_row(const nrt_nc_inst *inst, const float *x0, const float *x1, float *out,
                     int64_t n, float prev) {
  int rev0 = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0, rev1 = (inst->flags & NRT_NC_FLAG_REVERSE1) != 0;
  if (inst->func[0] == NRT_NC_ALU_MULTIPLY && inst->func[1] == NRT_NC_ALU_ADD && !rev0 && !rev1) {
    for (int64_t j = 0; j < n; j++) {
      float x = x0[j] * prev;
      prev = x + x1[j];
      out[j] = prev;
    }
    return;
  }
  for (int64_t j = 0; j < n; j++) {
    float x = rev0 ? scan_alu(inst->func[0], prev, x0[j]) : scan_alu(inst->func[0], x0[j], prev);
    prev = rev1 ? scan_alu(inst->func[1], x1[j], x) : scan_alu(inst->func[1], x, x1[j]);
    out[j] = prev;
  }
}

/* Whether a run of n floats at src can be read element by element while
 * the run at dst is written: the same run, or none of it shared. */
static int reads_before_writes(const float *src, const float *dst, int64_t n) {
  return src == dst || src + n <= dst || dst + n <= src;
}

static void exec_scan(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src0 = &inst->ap[1], *src1 = &inst->ap[2];
  int64_t n = nc_ap_free_elems(dst);
  /* Contiguous fp32 rows are read and written where they lie (a scan of
   * small chunks is otherwise mostly copying), one row step apart. */
  int in_place = nc_f32_contiguous(dst) && nc_f32_contiguous(src0) && nc_f32_contiguous(src1);
  uint8_t *row_d = NULL, *row_0 = NULL, *row_1 = NULL;
  int64_t step_d = 0, step_0 = 0, step_1 = 0;
  if (in_place) {
    row_d = nc_row(core, dst, 0), row_0 = nc_row(core, src0, 0), row_1 = nc_row(core, src1, 0);
    step_d = nc_row_step(core, dst), step_0 = nc_row_step(core, src0), step_1 = nc_row_step(core, src1);
  }
  for (int64_t p = 0; p < dst->partitions; p++) {
    float prev = scalar_or_imm(core, &inst->ap[3], p, inst->imm[0]);
    if (in_place) {
      float *out = (float *)(void *)(row_d + p * step_d);
      const float *x0 = (const float *)(const void *)(row_0 + p * step_0);
      const float *x1 = (const float *)(const void *)(row_1 + p * step_1);
      if (reads_before_writes(x0, out, n) && reads_before_writes(x1, out, n)) {
        scan_row(inst, x0, x1, out, n, prev);
        continue;
      }
    }
    nc_gather_f32(core, src0, p, a);
    nc_gather_f32(core, src1, p, b);
    scan_row(inst, a, b, a, n, prev);
    nc_scatter_f32(core, dst, p, a);
  }
}

/* (count, mean, variance * count) of a[start], a[start + 2], ... */
static void stats_of(const float *a, int64_t n, int64_t start, float *out) {
  int64_t count = 0;
  float sum = 0.0f;
  for (int64_t j = start; j < n; j += 2, count++) sum += a[j];
  float mean = count ? sum / (float)count : 0.0f, m2 = 0.0f;
  for (int64_t j = start; j < n; j += 2) m2 += (a[j] - mean) * (a[j] - mean);
  out[0] = (float)count;
  out[1] = mean;
  out[2] = m2;
}

static void exec_bn_stats(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(src);
  for (int64_t p = 0; p < dst->partitions; p++) {
    nc_gather_f32(core, src, p, a);
    stats_of(a, n, 0, b);
    stats_of(a, n, 1, b + 3);
    nc_scatter_f32(core, dst, p, b);
  }
}

/* Chan et al.'s pairwise combination of (count, mean, M2) tuples. */
static void exec_bn_aggr(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t tuples = nc_ap_free_elems(src) / 3;
  for (int64_t p = 0; p < dst->partitions; p++) {
    nc_gather_f32(core, src, p, a);
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int64_t t = 0; t < tuples; t++) {
      float nb = a[3 * t], mb = a[3 * t + 1], m2b = a[3 * t + 2];
      if (nb <= 0.0f) continue;
      float total = count + nb, delta = mb - mean;
      mean += delta * (nb / total);
      m2 += m2b + delta * delta * (count * nb / total);
      count = total;
    }
    b[0] = mean;
    b[1] = count > 0.0f ? m2 / count : 0.0f;
    nc_scatter_f32(core, dst, p, b);
  }
}

/* NaN sorts above every number, as the largest value. */
static int greater(float x, float y) { return isnan(x) ? !isnan(y) : x > y; }

static void exec_max8(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(src);
  for (int64_t p = 0; p < dst->partitions; p++) {
    nc_gather_f32(core, src, p, a);
    int k = 0; /* b[0..k) sorted descending: insertion keeps the 8 largest */
    for (int64_t j = 0; j < n; j++) {
      if (k == 8 && !greater(a[j], b[7])) continue;
      int at = k < 8 ? k++ : 7;
      while (at > 0 && greater(a[j], b[at - 1])) b[at] = b[at - 1], at--;
      b[at] = a[j];
    }
    nc_scatter_f32(core, dst, p, b);
  }
}

static int same_value(float x, float y) { return x == y || (isnan(x) && isnan(y)); }

/* For each of the 8 values, the first index of data holding it that an
 * earlier value has not claimed (so repeated maxima get distinct indices);
 * 0xffffffff when absent. */
static void first_indices(const float *data, int64_t n, const float *vals, float *idx, int *taken) {
  for (int v = 0; v < 8; v++) {
    idx[v] = 4294967295.0f;
    for (int64_t j = 0; j < n; j++) {
      if (!same_value(data[j], vals[v])) continue;
      int used = 0;
      for (int u = 0; u < v; u++) used |= taken[u] == (int)j;
      if (used) continue;
      idx[v] = (float)j;
      taken[v] = (int)j;
      break;
    }
    if (idx[v] > 4e9f) taken[v] = -1;
  }
}

static void exec_find8(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(src);
  int replace = inst->opcode == NRT_NC_MATCH_REPLACE8;
  for (int64_t p = 0; p < dst->partitions; p++) {
    int taken[8];
    nc_gather_f32(core, src, p, a);
    nc_gather_f32(core, &inst->ap[2], p, b);
    first_indices(a, n, b, c, taken);
    if (!replace) {
      nc_scatter_f32(core, dst, p, c);
      continue;
    }
    for (int v = 0; v < 8; v++)
      if (taken[v] >= 0) a[taken[v]] = (float)inst->imm[0];
    nc_scatter_f32(core, dst, p, a);
    if (inst->ap[3].tensor >= 0) nc_scatter_f32(core, &inst->ap[3], p, c);
  }
}

/* GpSimd: reduces across partitions, in fp32 or (bitwise ops) on raw bits. */
static void exec_partition_reduce(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(src);
  int32_t op = inst->func[0];
  if (nc_alu_is_bitwise(op)) {
    int32_t *acc = (int32_t *)b, *row = (int32_t *)a;
    nc_gather_bits(core, src, 0, acc);
    for (int64_t p = 1; p < src->partitions; p++) {
      nc_gather_bits(core, src, p, row);
      for (int64_t j = 0; j < n; j++)
        acc[j] = op == NRT_NC_ALU_BITWISE_AND ? (acc[j] & row[j])
                 : op == NRT_NC_ALU_BITWISE_OR ? (acc[j] | row[j]) : (acc[j] ^ row[j]);
    }
    nc_scatter_bits(core, dst, 0, acc);
    return;
  }
  nc_gather_f32(core, src, 0, b);
  for (int64_t p = 1; p < src->partitions; p++) {
    nc_gather_f32(core, src, p, a);
    for (int64_t j = 0; j < n; j++) b[j] = nc_alu(op, b[j], a[j]);
  }
  nc_scatter_f32(core, dst, 0, b);
}

void nc_exec_vector_ext(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c) {
  switch (inst->opcode) {
    case NRT_NC_TENSOR_TENSOR_SCAN: exec_scan(core, inst, a, b); break;
    case NRT_NC_BN_STATS: exec_bn_stats(core, inst, a, b); break;
    case NRT_NC_BN_AGGR: exec_bn_aggr(core, inst, a, b); break;
    case NRT_NC_MAX8: exec_max8(core, inst, a, b); break;
    case NRT_NC_FIND_INDEX8: case NRT_NC_MATCH_REPLACE8: exec_find8(core, inst, a, b, c); break;
    case NRT_NC_PARTITION_REDUCE: exec_partition_reduce(core, inst, a, b); break;
    default: break;
  }
}
