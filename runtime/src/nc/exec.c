/* The instruction executor: runs a checked program in program order (a
 * plain DMA after a matmul may run during it where no order can show:
 * overlap.c).
 *
 * Vector, Scalar, GpSimd and DMA instructions work one partition at a time:
 * gather the operands' elements of that partition as fp32 (or raw bits,
 * for copies and bitwise ops), compute, round into the destination. The
 * Tensor engine has its own blocked kernels (tensor_engine.c). On-chip
 * memory comes from a small cache of core states so that a run does not
 * fault in tens of MiB of fresh pages; fresh tiles are filled with 0xff
 * bytes (NaN in every float format, junk in integers).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"

#define CORE_CACHE 4

/* Partition rows lie one cache line more than their capacity apart. At
 * exactly 192 KiB (or 16 KiB for PSUM), a multiple of 4 KiB, the same
 * element of every partition would map to the same L1 set (and to a few
 * L2 sets), so an instruction over 128 partitions would evict its own
 * lines from one partition to the next. */
#define PARTITION_PAD 64

typedef struct core_memory {
  uint8_t *sbuf, *psum;
  int64_t sbuf_bytes, psum_bytes;
} core_memory;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static core_memory cache[CORE_CACHE];
static int cached;

static int memory_acquire(int64_t sbuf_bytes, int64_t psum_bytes, core_memory *out) {
  pthread_mutex_lock(&cache_mu);
  for (int k = 0; k < cached; k++) {
    if (cache[k].sbuf_bytes >= sbuf_bytes && cache[k].psum_bytes >= psum_bytes) {
      *out = cache[k];
      cache[k] = cache[--cached];
      pthread_mutex_unlock(&cache_mu);
      return 1;
    }
  }
  pthread_mutex_unlock(&cache_mu);
  out->sbuf = malloc((size_t)sbuf_bytes);
  out->psum = malloc((size_t)psum_bytes);
  out->sbuf_bytes = sbuf_bytes;
  out->psum_bytes = psum_bytes;
  if (out->sbuf && out->psum) return 1;
  free(out->sbuf);
  free(out->psum);
  return 0;
}

static void memory_release(core_memory *m) {
  pthread_mutex_lock(&cache_mu);
  if (cached < CORE_CACHE) {
    cache[cached++] = *m;
    m = NULL;
  }
  pthread_mutex_unlock(&cache_mu);
  if (m) {
    free(m->sbuf);
    free(m->psum);
  }
}

/* Floats in each scratch row at least (nc_run_begin). */
#define SCRATCH_MIN_ROW (3 * 128 * 512)

typedef struct scratch {
  float *a, *b, *c, *d; /* one partition's elements each */
} scratch;

static void fill_fresh(const nc_core *core, int32_t t) {
  const nrt_nc_tensor *tensor = &core->program->tensors[t];
  int sbuf = tensor->buffer == NRT_NC_SBUF;
  uint8_t *mem = sbuf ? core->sbuf : core->psum;
  int64_t pbytes = sbuf ? core->sbuf_pitch : core->psum_pitch;
  for (int32_t p = 0; p < tensor->partitions; p++)
    memset(mem + (tensor->partition_base + p) * pbytes + tensor->byte_offset, 0xff,
           (size_t)tensor->bytes);
}

/* A per-partition scalar operand: the tile's value or the immediate. */
static float scalar_operand(const nc_core *core, const nrt_nc_ap *ap, int64_t p, double imm) {
  if (ap->tensor < 0) return (float)imm;
  return nc_load(ap->dtype, nc_row(core, ap, p));
}

static int is_int_dtype(int32_t dtype) { return dtype <= NRT_NC_INT32; }

/* Whether partition rows of ap are n contiguous elements. */
static int contiguous_rows(const nrt_nc_ap *ap, int64_t n) {
  return ap->count[3] == n && ap->stride[3] == 1;
}

/* A copy's partitions [begin, end): bytes moved directly (same dtype,
 * contiguous rows), through a row of raw elements (same dtype) or converted
 * through a row of fp32 (rows of at most COPY_ROW elements). */
#define COPY_ROW 2048
enum { COPY_DIRECT, COPY_RAW, COPY_CONVERT };
typedef struct copy_job {
  const nc_core *core;
  const nrt_nc_ap *dst, *src;
  int64_t n;
  int mode;
} copy_job;

static void copy_rows(int64_t begin, int64_t end, void *ctx) {
  const copy_job *job = ctx;
  float row[COPY_ROW]; /* 4-byte elements at most */
  size_t bytes = (size_t)job->n * nrt_nc_dtype_size(job->dst->dtype);
  for (int64_t p = begin; p < end; p++) {
    if (job->mode == COPY_DIRECT) {
      memmove(nc_row(job->core, job->dst, p), nc_row(job->core, job->src, p), bytes);
    } else if (job->mode == COPY_RAW) {
      nc_gather_raw(job->core, job->src, p, (uint8_t *)row);
      nc_scatter_raw(job->core, job->dst, p, (const uint8_t *)row);
    } else {
      nc_gather_f32(job->core, job->src, p, row);
      nc_scatter_f32(job->core, job->dst, p, row);
    }
  }
}

/* Whether a copy takes copy_rows (then *job is set up, and *split says
 * whether its partitions may run in any order, on several threads). */
static int copy_plan(const nc_core *core, const nrt_nc_inst *inst, copy_job *job, int *split) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(dst);
  const nrt_nc_tensor *td = &core->program->tensors[dst->tensor];
  const nrt_nc_tensor *ts = &core->program->tensors[src->tensor];
  int same = dst->dtype == src->dtype;
  int direct = same && contiguous_rows(dst, n) && contiguous_rows(src, n);
  if ((inst->flags & NRT_NC_FLAG_ACCUMULATE) || !(direct || n <= COPY_ROW) ||
      nrt_nc_dtype_size(dst->dtype) > 4 || nrt_nc_dtype_size(src->dtype) > 4)
    return 0;
  /* Partitions in parallel only when dst and src cannot overlap: one is on
   * chip and the other in HBM, or two distinct on-chip tensors (both live,
   * so placed apart); HBM arguments may alias each other. Otherwise in
   * partition order, as below (memmove for rows that overlap themselves). */
  int disjoint = (td->buffer == NRT_NC_HBM) != (ts->buffer == NRT_NC_HBM) ||
                 (td->buffer != NRT_NC_HBM && dst->tensor != src->tensor);
  *job = (copy_job){.core = core, .dst = dst, .src = src, .n = n,
                    .mode = direct ? COPY_DIRECT : same ? COPY_RAW : COPY_CONVERT};
  *split = disjoint;
  return 1;
}

/* Whether a copy is worth splitting over the pool on its own. */
static int copy_is_big(const copy_job *job) {
  return job->dst->partitions * job->n * (int64_t)nrt_nc_dtype_size(job->dst->dtype) >= ((int64_t)1 << 16);
}

static void exec_copy(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t n = nc_ap_free_elems(dst);
  copy_job job;
  int split;
  if (copy_plan(core, inst, &job, &split)) {
    if (split && copy_is_big(&job)) rt_parallel_for(dst->partitions, 8, copy_rows, &job);
    else copy_rows(0, dst->partitions, &job);
    return;
  }
  for (int64_t p = 0; p < dst->partitions; p++) {
    if (inst->flags & NRT_NC_FLAG_ACCUMULATE) { /* a DMA's read-modify-write: dst + src in fp32 */
      nc_gather_f32(core, dst, p, s->a);
      nc_gather_f32(core, src, p, s->b);
      for (int64_t j = 0; j < n; j++) s->a[j] += s->b[j];
      nc_scatter_f32(core, dst, p, s->a);
    } else if (dst->dtype == src->dtype) { /* bit-exact */
      nc_gather_raw(core, src, p, (uint8_t *)s->a);
      nc_scatter_raw(core, dst, p, (const uint8_t *)s->a);
    } else {
      nc_gather_f32(core, src, p, s->a);
      nc_scatter_f32(core, dst, p, s->a);
    }
  }
}

/* c = a op b over n elements, with the common ops as plain loops. */
static void alu_rows(int32_t op, const float *a, const float *b, float *c, int64_t n) {
  switch (op) {
    case NRT_NC_ALU_ADD: for (int64_t j = 0; j < n; j++) c[j] = a[j] + b[j]; break;
    case NRT_NC_ALU_SUBTRACT: for (int64_t j = 0; j < n; j++) c[j] = a[j] - b[j]; break;
    case NRT_NC_ALU_MULTIPLY: for (int64_t j = 0; j < n; j++) c[j] = a[j] * b[j]; break;
    default: for (int64_t j = 0; j < n; j++) c[j] = nc_alu(op, a[j], b[j]); break;
  }
}

static void alu_scalar(int32_t op, const float *a, float s, int reverse, float *c, int64_t n) {
  if (op == NRT_NC_ALU_NONE) {
    if (c != a) memmove(c, a, (size_t)n * sizeof *c);
    return;
  }
  if (reverse) {
    for (int64_t j = 0; j < n; j++) c[j] = nc_alu(op, s, a[j]);
    return;
  }
  switch (op) {
    case NRT_NC_ALU_ADD: for (int64_t j = 0; j < n; j++) c[j] = a[j] + s; break;
    case NRT_NC_ALU_SUBTRACT: for (int64_t j = 0; j < n; j++) c[j] = a[j] - s; break;
    case NRT_NC_ALU_MULTIPLY: for (int64_t j = 0; j < n; j++) c[j] = a[j] * s; break;
    default: for (int64_t j = 0; j < n; j++) c[j] = nc_alu(op, a[j], s); break;
  }
}

/* Maximum (or minimum) of a row as nc_alu's chain from -inf (+inf) gives
 * it: a NaN sticks, and among equal values the later one wins, which only
 * shows for zeros of both signs. Without a NaN and with a nonzero result,
 * every element equal to the result has its bits, so any order of max
 * (min) operations gives them: the vector twin below returns 0 unless the
 * row is of that kind, and the chain runs instead. */
static float extreme_chain(int32_t op, const float *a, int64_t n) {
  float acc = nc_reduce_init(op);
  if (op == NRT_NC_ALU_MAXIMUM)
    for (int64_t j = 0; j < n; j++) acc = acc != acc || acc > a[j] ? acc : a[j];
  else
    for (int64_t j = 0; j < n; j++) acc = acc != acc || acc < a[j] ? acc : a[j];
  return acc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

__attribute__((target("avx512f"))) static int extreme_avx512(int32_t op, const float *a, int64_t n,
                                                            float *out) {
  if (n < 16) return 0;
  int is_max = op == NRT_NC_ALU_MAXIMUM;
  __m512 m = _mm512_loadu_ps(a);
  __mmask16 nan = _mm512_cmp_ps_mask(m, m, _CMP_UNORD_Q);
  for (int64_t j = 16; j < n; j += 16) {
    /* The last block overlaps the one before: max and min do not mind. */
    __m512 x = _mm512_loadu_ps(a + (j + 16 <= n ? j : n - 16));
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    m = is_max ? _mm512_max_ps(m, x) : _mm512_min_ps(m, x);
  }
  float r = is_max ? _mm512_reduce_max_ps(m) : _mm512_reduce_min_ps(m);
  if (nan || r == 0.0f) return 0;
  *out = r;
  return 1;
}
#endif

static float reduce_row(int32_t op, const float *a, int64_t n) {
  float acc = nc_reduce_init(op);
  if (op == NRT_NC_ALU_ADD) {
    for (int64_t j = 0; j < n; j++) acc += a[j];
    return acc;
  }
  if (op == NRT_NC_ALU_MAXIMUM || op == NRT_NC_ALU_MINIMUM) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (rt_isa() >= NRT_ISA_AVX512 && extreme_avx512(op, a, n, &acc)) return acc;
#endif
    return extreme_chain(op, a, n);
  }
  for (int64_t j = 0; j < n; j++) acc = nc_alu(op, acc, a[j]);
  return acc;
}

/* A bitwise reduction of a row of raw bits: bitvec ops see integers as bit
 * patterns, without conversion (the ISA reference's tensor_reduce). */
static int32_t reduce_bits(int32_t op, const int32_t *a, int64_t n) {
  int32_t acc = op == NRT_NC_ALU_BITWISE_AND ? -1 : 0;
  for (int64_t j = 0; j < n; j++) acc = nc_alu_int(op, acc, a[j]);
  return acc;
}

static void exec_tensor_tensor(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int32_t op = inst->func[0];
  for (int64_t p = 0; p < dst->partitions; p++) {
    if (nc_alu_is_bitwise(op)) {
      int32_t *a = (int32_t *)s->a, *b = (int32_t *)s->b;
      nc_gather_bits(core, &inst->ap[1], p, a);
      nc_gather_bits(core, &inst->ap[2], p, b);
      for (int64_t j = 0; j < n; j++) a[j] = nc_alu_int(op, a[j], b[j]);
      nc_scatter_bits(core, dst, p, a);
      continue;
    }
    nc_gather_f32(core, &inst->ap[1], p, s->a);
    nc_gather_f32(core, &inst->ap[2], p, s->b);
    alu_rows(op, s->a, s->b, s->c, n);
    nc_scatter_f32(core, dst, p, s->c);
  }
}

/* tensor_scalar_reduce's reduce_res for a row computed on raw bits: a
 * bitwise reduce_op folds the bits (no reduce registers: the check refuses
 * them), another op reduces the row's integer values in fp32 as the float
 * path does. */
static void reduce_int_row(const nc_core *core, const nrt_nc_inst *inst, int64_t p,
                           const int32_t *a, float *f, int64_t n) {
  const nrt_nc_ap *res = &inst->ap[4];
  if (nc_alu_is_bitwise(inst->func[2])) {
    nc_store_bits(res->dtype, nc_row(core, res, p), reduce_bits(inst->func[2], a, n));
    return;
  }
  for (int64_t j = 0; j < n; j++) f[j] = (float)a[j];
  float r = nc_reduce_command(core, inst, p, inst->func[2], reduce_row(inst->func[2], f, n));
  if (res->tensor >= 0) nc_store(res->dtype, nc_row(core, res, p), r);
}

static void exec_tensor_scalar(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int bitwise = nc_alu_is_bitwise(inst->func[0]) || nc_alu_is_bitwise(inst->func[1]) ||
                nc_alu_is_bitwise(inst->func[2]);
  for (int64_t p = 0; p < dst->partitions; p++) {
    float s0 = scalar_operand(core, &inst->ap[2], p, inst->imm[0]);
    float s1 = scalar_operand(core, &inst->ap[3], p, inst->imm[1]);
    if (bitwise) {
      int32_t *a = (int32_t *)s->a;
      int32_t i0 = (int32_t)nc_sat_int(s0, INT32_MIN, INT32_MAX);
      int32_t i1 = (int32_t)nc_sat_int(s1, INT32_MIN, INT32_MAX);
      int r0 = (inst->flags & NRT_NC_FLAG_REVERSE0) != 0, r1 = (inst->flags & NRT_NC_FLAG_REVERSE1) != 0;
      nc_gather_bits(core, &inst->ap[1], p, a);
      for (int64_t j = 0; j < n; j++) {
        int32_t v = a[j];
        if (inst->func[0]) v = r0 ? nc_alu_int(inst->func[0], i0, v) : nc_alu_int(inst->func[0], v, i0);
        if (inst->func[1]) v = r1 ? nc_alu_int(inst->func[1], i1, v) : nc_alu_int(inst->func[1], v, i1);
        a[j] = v;
      }
      nc_scatter_bits(core, dst, p, a);
      if (inst->ap[4].tensor >= 0 || (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD)))
        reduce_int_row(core, inst, p, a, s->b, n);
      continue;
    }
    nc_gather_f32(core, &inst->ap[1], p, s->a);
    alu_scalar(inst->func[0], s->a, s0, (inst->flags & NRT_NC_FLAG_REVERSE0) != 0, s->a, n);
    alu_scalar(inst->func[1], s->a, s1, (inst->flags & NRT_NC_FLAG_REVERSE1) != 0, s->a, n);
    nc_scatter_f32(core, dst, p, s->a);
    if (inst->ap[4].tensor >= 0 || (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD))) {
      float r = nc_reduce_command(core, inst, p, inst->func[2], reduce_row(inst->func[2], s->a, n));
      if (inst->ap[4].tensor >= 0) nc_store(inst->ap[4].dtype, nc_row(core, &inst->ap[4], p), r);
    }
  }
}

static void exec_scalar_tensor_tensor(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  for (int64_t p = 0; p < dst->partitions; p++) {
    float s0 = scalar_operand(core, &inst->ap[2], p, inst->imm[0]);
    nc_gather_f32(core, &inst->ap[1], p, s->a);
    nc_gather_f32(core, &inst->ap[3], p, s->b);
    alu_scalar(inst->func[0], s->a, s0, (inst->flags & NRT_NC_FLAG_REVERSE0) != 0, s->a, n);
    if (inst->flags & NRT_NC_FLAG_REVERSE1) alu_rows(inst->func[1], s->b, s->a, s->c, n);
    else alu_rows(inst->func[1], s->a, s->b, s->c, n);
    nc_scatter_f32(core, dst, p, s->c);
  }
}

/* exp(a * scale + bias) over a row: vectorised clones per ISA level, the
 * same bits as one element at a time (fmaf steps, no contraction). */
RT_SIMD_VOID(exp_row, (float *restrict a, int64_t n, float scale, float bias), (a, n, scale, bias)) {
  for (int64_t j = 0; j < n; j++) a[j] = rt_vm_expf(a[j] * scale + bias);
}

/* Row sums of activation's reduce_res, each in index order from +0 as
 * reduce_row adds (a serial chain: one add's latency per element). Up to
 * SUM_GROUP partitions' rows are kept and summed together, chains
 * interleaved, when nothing those partitions read can be the destination
 * of an earlier one's sum (distinct tensors, none placed by hand). */
#define SUM_GROUP 16

static void row_sums(const float *rows, int64_t n, int64_t count, float *out) {
  float acc[SUM_GROUP];
  for (int64_t g = 0; g < count; g++) acc[g] = nc_reduce_init(NRT_NC_ALU_ADD);
  for (int64_t j = 0; j < n; j++)
    for (int64_t g = 0; g < count; g++) acc[g] += rows[g * n + j];
  for (int64_t g = 0; g < count; g++) out[g] = acc[g];
}

static int sums_can_wait(const nc_core *core, const nrt_nc_inst *inst) {
  int32_t t = inst->ap[4].tensor;
  if (t < 0) return 1;
  if (core->program->tensors[t].fixed) return 0;
  for (int k = 0; k < 4; k++)
    if (inst->ap[k].tensor == t) return 0;
  return 1;
}

static void exec_activation(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int32_t fn = inst->func[0];
  int reduce = inst->ap[4].tensor >= 0 || (inst->flags & (NRT_NC_FLAG_REDUCE_RESET | NRT_NC_FLAG_REDUCE_FOLD));
  int64_t group = reduce && n * SUM_GROUP <= SCRATCH_MIN_ROW && sums_can_wait(core, inst) ? SUM_GROUP : 1;
  for (int64_t p0 = 0; p0 < dst->partitions; p0 += group) {
    int64_t count = dst->partitions - p0 < group ? dst->partitions - p0 : group;
    for (int64_t g = 0; g < count; g++) {
      int64_t p = p0 + g;
      float bias = scalar_operand(core, &inst->ap[2], p, 0.0);
      float scale = scalar_operand(core, &inst->ap[3], p, inst->imm[0]);
      float *a = group > 1 ? s->b + g * n : s->a;
      nc_gather_f32(core, &inst->ap[1], p, a);
      if (fn == NRT_NC_ACT_EXP) {
        exp_row(a, n, scale, bias);
      } else if (fn == NRT_NC_ACT_COPY) {
        for (int64_t j = 0; j < n; j++) a[j] = a[j] * scale + bias;
      } else {
        for (int64_t j = 0; j < n; j++) a[j] = nc_act(fn, a[j] * scale + bias);
      }
      nc_scatter_f32(core, dst, p, a);
    }
    if (!reduce) continue;
    float sums[SUM_GROUP];
    if (group > 1) row_sums(s->b, n, count, sums);
    else sums[0] = reduce_row(NRT_NC_ALU_ADD, s->a, n);
    for (int64_t g = 0; g < count; g++) {
      float r = nc_reduce_command(core, inst, p0 + g, NRT_NC_ALU_ADD, sums[g]);
      if (inst->ap[4].tensor >= 0) nc_store(inst->ap[4].dtype, nc_row(core, &inst->ap[4], p0 + g), r);
    }
  }
}

static void exec_tensor_reduce(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t group = 1;
  for (int d = NRT_NC_MAX_FREE_DIMS - inst->axes; d < NRT_NC_MAX_FREE_DIMS; d++) group *= src->count[d];
  int64_t groups = nc_ap_free_elems(src) / group;
  if (nc_alu_is_bitwise(inst->func[0])) { /* on raw bits; negate is for arithmetic ops */
    int32_t *a = (int32_t *)s->a, *b = (int32_t *)s->b;
    for (int64_t p = 0; p < dst->partitions; p++) {
      nc_gather_bits(core, src, p, a);
      for (int64_t g = 0; g < groups; g++) b[g] = reduce_bits(inst->func[0], a + g * group, group);
      nc_scatter_bits(core, dst, p, b);
    }
    return;
  }
  for (int64_t p = 0; p < dst->partitions; p++) {
    nc_gather_f32(core, src, p, s->a);
    for (int64_t g = 0; g < groups; g++) {
      float r = reduce_row(inst->func[0], s->a + g * group, group);
      s->b[g] = (inst->flags & NRT_NC_FLAG_NEGATE) ? -r : r;
    }
    nc_scatter_f32(core, dst, p, s->b);
  }
}

static void exec_copy_predicated(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  for (int64_t p = 0; p < dst->partitions; p++) {
    nc_gather_f32(core, dst, p, s->a);
    nc_gather_f32(core, &inst->ap[1], p, s->b);
    nc_gather_f32(core, &inst->ap[2], p, s->c);
    for (int64_t j = 0; j < n; j++)
      if (s->c[j] != 0.0f) s->a[j] = s->b[j];
    nc_scatter_f32(core, dst, p, s->a);
  }
}

static void exec_memset(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int integer = is_int_dtype(dst->dtype) && dst->dtype != NRT_NC_BOOL;
  for (int64_t j = 0; j < n; j++) {
    if (integer) ((int32_t *)s->a)[j] = (int32_t)inst->imm[0];
    else s->a[j] = (float)inst->imm[0];
  }
  for (int64_t p = 0; p < dst->partitions; p++) {
    if (integer) nc_scatter_bits(core, dst, p, (const int32_t *)s->a);
    else nc_scatter_f32(core, dst, p, s->a);
  }
}

/* The affine values of iota/affine_select for partition c, as int32. */
static void affine_row(const nrt_nc_inst *inst, int64_t c, int32_t *out) {
  const nrt_nc_ap *pat = &inst->ap[1];
  int64_t base = (int64_t)inst->imm[0] + c * (int64_t)inst->imm[1], j = 0;
  for (int64_t i0 = 0; i0 < pat->count[0]; i0++)
    for (int64_t i1 = 0; i1 < pat->count[1]; i1++)
      for (int64_t i2 = 0; i2 < pat->count[2]; i2++)
        for (int64_t i3 = 0; i3 < pat->count[3]; i3++)
          out[j++] = (int32_t)(base + i0 * pat->stride[0] + i1 * pat->stride[1] +
                               i2 * pat->stride[2] + i3 * pat->stride[3]);
}

static void exec_iota(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int32_t *v = (int32_t *)s->a;
  for (int64_t p = 0; p < dst->partitions; p++) {
    affine_row(inst, p, v);
    if (is_int_dtype(dst->dtype)) {
      nc_scatter_bits(core, dst, p, v);
      continue;
    }
    for (int64_t j = 0; j < n; j++) s->b[j] = (float)v[j];
    nc_scatter_f32(core, dst, p, s->b);
  }
}

static void exec_affine_select(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  int32_t *v = (int32_t *)s->a;
  float other = (float)inst->imm[2];
  for (int64_t p = 0; p < dst->partitions; p++) {
    affine_row(inst, p, v);
    nc_gather_f32(core, &inst->ap[2], p, s->b);
    for (int64_t j = 0; j < n; j++)
      s->c[j] = nc_alu(inst->func[0], (float)v[j], 0.0f) != 0.0f ? s->b[j] : other;
    nc_scatter_f32(core, dst, p, s->c);
  }
}

static void exec_inst(const nc_core *core, const nrt_nc_inst *inst, scratch *s) {
  switch (inst->opcode) {
    case NRT_NC_DMA_COPY:
      if (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) {
        nrt_nc_inst moved;
        if (nc_scalar_offset_copy(core, inst, &moved)) exec_copy(core, &moved, s);
      } else if (inst->flags & NRT_NC_FLAG_INDIRECT) {
        nc_exec_indirect_copy(core, inst, s->a, s->b);
      } else {
        exec_copy(core, inst, s);
      }
      break;
    case NRT_NC_TENSOR_COPY:
      if (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) { /* tensor_copy_dynamic_src / _dst */
        nrt_nc_inst moved;
        if (nc_scalar_offset_move(core, inst, (int64_t)inst->imm[2], (int64_t)inst->imm[3], &moved))
          exec_copy(core, &moved, s);
      } else {
        exec_copy(core, inst, s);
      }
      break;
    case NRT_NC_MATMUL: nc_exec_matmul(core, inst, s->a, NULL); break;
    case NRT_NC_TRANSPOSE: nc_exec_transpose(core, inst, s->a); break;
    case NRT_NC_ACTIVATION: exec_activation(core, inst, s); break;
    case NRT_NC_TENSOR_TENSOR: exec_tensor_tensor(core, inst, s); break;
    case NRT_NC_TENSOR_SCALAR: exec_tensor_scalar(core, inst, s); break;
    case NRT_NC_SCALAR_TENSOR_TENSOR: exec_scalar_tensor_tensor(core, inst, s); break;
    case NRT_NC_TENSOR_REDUCE: exec_tensor_reduce(core, inst, s); break;
    case NRT_NC_COPY_PREDICATED: exec_copy_predicated(core, inst, s); break;
    case NRT_NC_MEMSET: exec_memset(core, inst, s); break;
    case NRT_NC_IOTA: exec_iota(core, inst, s); break;
    case NRT_NC_AFFINE_SELECT: exec_affine_select(core, inst, s); break;
    case NRT_NC_ACTIVATE2: case NRT_NC_SCALAR_CUMULATIVE: case NRT_NC_SELECT_REDUCE:
    case NRT_NC_RANGE_SELECT: case NRT_NC_NONZERO_WITH_COUNT: case NRT_NC_DMA_TRANSPOSE:
      nc_exec_select(core, inst, s->a, s->b);
      break;
    case NRT_NC_RNG: case NRT_NC_RAND2: case NRT_NC_DROPOUT: case NRT_NC_RNG_SEED:
    case NRT_NC_RNG_SET_STATE: case NRT_NC_RNG_GET_STATE:
      nc_exec_rng(core, inst, s->a, s->b);
      break;
    case NRT_NC_TOPK: case NRT_NC_EXPONENTIAL: case NRT_NC_LOCAL_GATHER: case NRT_NC_N_GATHER:
    case NRT_NC_SEQUENCE_BOUNDS: case NRT_NC_STREAM_SHUFFLE:
      nc_exec_gather(core, inst, s->a, s->b, s->c, s->d);
      break;
    case NRT_NC_QUANTIZE_MX: case NRT_NC_MATMUL_MX: nc_exec_mx(core, inst, s->a, s->b, s->c, s->d); break;
    case NRT_NC_SCALAR_INT: nc_exec_scalar_int(core, inst); break;
    default: nc_exec_vector_ext(core, inst, s->a, s->b, s->c); break;
  }
}

static atomic_int injected_failures;

void nrt_nc_inject_run_failures(int32_t count) { atomic_store(&injected_failures, count); }

/* Whether this run is one that nrt_nc_inject_run_failures asked to fail. */
static int injected_failure(void) {
  int left = atomic_load(&injected_failures);
  while (left > 0)
    if (atomic_compare_exchange_weak(&injected_failures, &left, left - 1)) return 1;
  return 0;
}

/* One program's run in progress: its core, memory and next instruction. */
struct nc_run {
  nc_core core;
  core_memory mem;
  float *rows;
  scratch s;
  int32_t pc;
  int64_t jumps_back; /* loop iterations so far (branch.c's limit) */
  nrt_status fault; /* set by an instruction that failed at run time */
};

nrt_status nc_run_begin(const nrt_nc_program_t p, void *const *hbm, nc_run **out) {
  *out = NULL;
  if (injected_failure())
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory running an NKI program "
                   "(injected failure)");
  const nrt_nc_geometry *g = &p->geometry;
  /* Scratch rows hold one partition of the largest operand; the Tensor
   * engine takes four rows from the first on (tensor_engine.c): a double_row
   * matmul's 256 x 128 stationary, 256 x 512 moving and 128 x 512 result
   * in fp32. */
  int64_t row = SCRATCH_MIN_ROW;
  for (int32_t i = 0; i < p->num_insts; i++)
    for (int k = 0; k < NRT_NC_MAX_APS; k++) {
      int64_t n = nc_ap_free_elems(&p->insts[i].ap[k]) + 16;
      int32_t op = p->insts[i].opcode;
      /* A whole 16- or 32-partition group of rows at once (and topk's sort keys). */
      if (op == NRT_NC_TOPK || op == NRT_NC_LOCAL_GATHER || op == NRT_NC_STREAM_SHUFFLE) n = 32 * n;
      if (p->insts[i].ap[k].tensor >= 0 && n > row) row = n;
    }
  nc_run *r = calloc(1, sizeof *r);
  int64_t regs = (int64_t)NRT_NC_ENGINE_COUNT * g->partitions;
  float *rows = malloc((size_t)(row * 4 + regs) * sizeof(float) + (size_t)regs * NC_RNG_WORDS * 4);
  uint64_t *gen = calloc((size_t)p->num_tensors + 1, sizeof *gen);
  int64_t sbuf_pitch = g->sbuf_partition_bytes + PARTITION_PAD;
  int64_t psum_pitch = g->psum_partition_bytes + PARTITION_PAD;
  if (!r || !rows || !gen ||
      !memory_acquire(g->partitions * sbuf_pitch, g->partitions * psum_pitch, &r->mem)) {
    free(gen);
    free(rows);
    free(r);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory running an NKI program");
  }
  r->rows = rows;
  r->core = (nc_core){.program = p, .hbm = hbm, .sbuf = r->mem.sbuf, .psum = r->mem.psum,
                      .sbuf_pitch = sbuf_pitch, .psum_pitch = psum_pitch, .regs = rows + 4 * row,
                      .gen = gen, .fault = &r->fault};
  /* Packed operands are cached by tensor and write generation, which is
   * sound only if a tile's memory changes through its own writes: not with
   * manually placed on-chip tensors, which may overlap live ones. */
  int fixed = 0;
  for (int32_t t = 0; t < p->num_tensors; t++)
    fixed |= p->tensors[t].buffer != NRT_NC_HBM && p->tensors[t].fixed;
  if (!fixed) r->core.packs = nc_pack_cache_new();
  memset(r->core.regs, 0, (size_t)regs * sizeof(float));
  r->core.rng = (uint32_t *)(r->core.regs + regs);
  nc_rng_init(&r->core);
  r->s = (scratch){.a = rows, .b = rows + row, .c = rows + 2 * row, .d = rows + 3 * row};
  *out = r;
  return NRT_SUCCESS;
}

/* Fresh tiles whose lifetime begins at instruction i are filled. */
static void fill_at(nc_run *r, int32_t i) {
  const struct nrt_nc_program *p = r->core.program;
  for (int32_t f = p->fill_start[i]; f < p->fill_start[i + 1]; f++) {
    fill_fresh(&r->core, p->fill_list[f]);
    r->core.gen[p->fill_list[f]]++;
  }
}

/* Instruction i has written its destination operands. */
static void bump_written(nc_run *r, int32_t i) {
  const nrt_nc_inst *inst = &r->core.program->insts[i];
  for (int k = 0; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor >= 0 && (nc_operand_role(inst, k) & 2)) r->core.gen[inst->ap[k].tensor]++;
}

/* For tests: DMA copies run during the matmul before them. */
static atomic_long joined_copies;
long nc_exec_joined_copies(void);
long nc_exec_joined_copies(void) { return atomic_load(&joined_copies); }

static void copy_piece(void *ctx, int piece, int pieces) {
  copy_job *job = ctx;
  int64_t rows = job->dst->partitions;
  copy_rows(rows * piece / pieces, rows * (piece + 1) / pieces, job);
}

/* Matmul i with the DMA copy after it on the threads of the matmul's job,
 * when the pool has several, the two touch disjoint memory (overlap.c) and
 * the copy is too small to be split over the pool on its own: its rows in
 * one piece per thread (or in order, in one piece, where its own rows may
 * overlap, as exec_copy would run them); 0 if not done. */
static int run_matmul_and_copy(nc_run *r, int32_t i) {
  const struct nrt_nc_program *p = r->core.program;
  copy_job job;
  int split, threads = rt_num_threads();
  if (threads < 2 || !nc_copy_may_join(p, i) ||
      !copy_plan(&r->core, &p->insts[i + 1], &job, &split) || (split && copy_is_big(&job)))
    return 0;
  nc_side_task side = {.fn = copy_piece, .ctx = &job,
                       .pieces = split ? (threads < 8 ? threads : 8) : 1};
  atomic_init(&side.next, 0);
  nc_exec_matmul(&r->core, &p->insts[i], r->s.a, &side);
  atomic_fetch_add_explicit(&joined_copies, 1, memory_order_relaxed);
  bump_written(r, i);
  bump_written(r, i + 1); /* instruction i + 1 needs no fill (overlap.c) */
  r->pc += 2;
  return 1;
}

int32_t nc_run_to_sync(nc_run *r) {
  const struct nrt_nc_program *p = r->core.program;
  while (r->pc < p->num_insts) {
    int32_t i = r->pc;
    fill_at(r, i);
    if (p->insts[i].opcode == NRT_NC_MATMUL && run_matmul_and_copy(r, i)) continue;
    if (p->insts[i].opcode == NRT_NC_COLLECTIVE) return i;
    if (p->insts[i].opcode == NRT_NC_BRANCH) {
      int32_t next = nc_exec_branch(&r->core, &p->insts[i], &r->jumps_back);
      if (next < 0) return -1; /* the run stops at the branch */
      r->pc = next;
      continue;
    }
    exec_inst(&r->core, &p->insts[i], &r->s);
    if (r->fault) return -1; /* the run stops at the failed instruction */
    bump_written(r, i);
    r->pc++;
  }
  return -1;
}

nrt_status nc_run_fault(const nc_run *r) { return r ? r->fault : NRT_SUCCESS; }

void nc_run_fill_call(nc_run *r, int32_t count) {
  for (int32_t k = 1; k < count; k++) fill_at(r, r->pc + k);
}

void nc_run_advance(nc_run *r, int32_t count) {
  for (int32_t k = 0; k < count; k++) bump_written(r, r->pc + k); /* a collective's dsts */
  r->pc += count;
}

const nc_core *nc_run_core(const nc_run *r) { return &r->core; }

void nc_run_end(nc_run *r) {
  if (!r) return;
  memory_release(&r->mem);
  nc_pack_cache_free(r->core.packs);
  free(r->core.gen);
  free(r->rows);
  free(r);
}

nrt_status nc_execute(const nrt_nc_program_t p, void *const *hbm) {
  return nc_execute_group(&p, 1, &hbm);
}
