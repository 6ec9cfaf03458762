/* The Tensor engine: nc_matmul and the PE-array transpose.
 *
 * A matmul instruction multiplies stationary [K, M] by moving [K, N] into a
 * PSUM tile [M, N] in fp32 (K <= 128, M <= 128, N <= 512). Each element is
 * accumulated over k in order with fused multiply-adds, so every kernel
 * below gives bit-identical results. Operands are converted to fp32 rows,
 * then a BLIS-style macro loop (portable C) walks 8 x 32 blocks of the
 * result and hands full blocks to a register-blocked micro-kernel chosen
 * once at run time (AVX-512, AVX2+FMA, or the plain reference twin, which
 * also covers edge blocks). Row blocks are shared out on the kernel thread
 * pool. When the destination rows are contiguous fp32 (the usual PSUM
 * tile), the kernel accumulates straight into PSUM.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include "ops/engine/thread_pool.h"
#include "nc/access.h"
#include "nc/numerics.h"

#define MR 8
#define NR 32
#define MAX_K 128
#define MAX_M 128
#define MAX_N 512

/* C[m0.., n0..] += sum_k A[k][m] * B[k][n] over an mr x nr block. A has rows
 * of lda floats (index m), B and C rows of ldb / ldc floats (index n). */
typedef void (*block_fn)(int64_t k_count, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int64_t mr, int64_t nr);

static void block_reference(int64_t k_count, const float *a, int64_t lda, const float *b,
                            int64_t ldb, float *c, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t m = 0; m < mr; m++)
    for (int64_t n = 0; n < nr; n++) {
      float acc = c[m * ldc + n];
      for (int64_t k = 0; k < k_count; k++) acc = fmaf(a[k * lda + m], b[k * ldb + n], acc);
      c[m * ldc + n] = acc;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

__attribute__((target("avx512f"))) static void block_avx512(int64_t k_count, const float *a,
                                                             int64_t lda, const float *b,
                                                             int64_t ldb, float *c, int64_t ldc,
                                                             int64_t mr, int64_t nr) {
  (void)mr, (void)nr; /* always MR x NR */
  __m512 acc[MR][2];
  for (int m = 0; m < MR; m++) {
    acc[m][0] = _mm512_loadu_ps(c + m * ldc);
    acc[m][1] = _mm512_loadu_ps(c + m * ldc + 16);
  }
  for (int64_t k = 0; k < k_count; k++) {
    __m512 b0 = _mm512_loadu_ps(b + k * ldb), b1 = _mm512_loadu_ps(b + k * ldb + 16);
    const float *ak = a + k * lda;
    for (int m = 0; m < MR; m++) {
      __m512 am = _mm512_set1_ps(ak[m]);
      acc[m][0] = _mm512_fmadd_ps(am, b0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(am, b1, acc[m][1]);
    }
  }
  for (int m = 0; m < MR; m++) {
    _mm512_storeu_ps(c + m * ldc, acc[m][0]);
    _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
  }
}

/* AVX2 has 16 registers: the 8 x 32 block runs as two 8 x 16 halves. */
__attribute__((target("avx2,fma"))) static void block_avx2(int64_t k_count, const float *a,
                                                           int64_t lda, const float *b, int64_t ldb,
                                                           float *c, int64_t ldc, int64_t mr,
                                                           int64_t nr) {
  (void)mr, (void)nr;
  for (int half = 0; half < 2; half++) {
    const float *bh = b + half * 16;
    float *ch = c + half * 16;
    __m256 acc[MR][2];
    for (int m = 0; m < MR; m++) {
      acc[m][0] = _mm256_loadu_ps(ch + m * ldc);
      acc[m][1] = _mm256_loadu_ps(ch + m * ldc + 8);
    }
    for (int64_t k = 0; k < k_count; k++) {
      __m256 b0 = _mm256_loadu_ps(bh + k * ldb), b1 = _mm256_loadu_ps(bh + k * ldb + 8);
      const float *ak = a + k * lda;
      for (int m = 0; m < MR; m++) {
        __m256 am = _mm256_broadcast_ss(ak + m);
        acc[m][0] = _mm256_fmadd_ps(am, b0, acc[m][0]);
        acc[m][1] = _mm256_fmadd_ps(am, b1, acc[m][1]);
      }
    }
    for (int m = 0; m < MR; m++) {
      _mm256_storeu_ps(ch + m * ldc, acc[m][0]);
      _mm256_storeu_ps(ch + m * ldc + 8, acc[m][1]);
    }
  }
}
#endif

/* bfloat16 pairs. Both operands bf16 (the usual case): products of two
 * bf16 values are exact in fp32, so the k loop can run two steps per
 * AVX512_BF16 dot-product instruction. vdpbf16ps adds, per fp32 lane,
 * odd element's product then even element's, each as a fused multiply-add
 * rounded to nearest even (Intel SDM pseudo-code; checked on the host at
 * selection, below), but it treats denormal inputs and results as zero.
 * So a pair packs step k in the high (odd) half and step k + 1 in the low
 * half, and the path is taken only when no denormal can occur: every bf16
 * operand is zero or has an exponent in [-56, 63] (so every product is a
 * multiple of 2^-126 and below 2^128) and every accumulator value is zero
 * or a finite multiple of 2^-126 (exponent >= -103); then every sum is
 * zero or at least 2^-126 in magnitude, never denormal, and the bits are
 * those of the fp32 reference loop. Otherwise the fp32 path runs (operands
 * out of range: the whole product) or the reference twin (an accumulator
 * out of range: that block; each result element depends only on its own
 * accumulator).
 *
 * Packed layouts (uint32 pairs, hi = step 2q, lo = step 2q + 1): stationary
 * in blocks of MR columns, a[(mb * kp + q) * MR + m % MR]; moving in panels
 * of NR columns, b[(nb * kp + q) * NR + n % NR]; zero-padded to whole
 * blocks. */
typedef int (*pair_block_fn)(int64_t kp, const uint32_t *a, const uint32_t *b, float *c,
                             int64_t ldc, int64_t mr, int64_t nr);

static float pair_hi(uint32_t w) { return rt_f32_from_bits(w & 0xffff0000u); }
static float pair_lo(uint32_t w) { return rt_f32_from_bits(w << 16); }

/* The reference twin of the pair kernel (and its edge blocks): plain fmaf,
 * so any accumulator is fine; returns 1. */
static int pair_block_reference(int64_t kp, const uint32_t *a, const uint32_t *b, float *c,
                                 int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t m = 0; m < mr; m++)
    for (int64_t n = 0; n < nr; n++) {
      float acc = c[m * ldc + n];
      for (int64_t q = 0; q < kp; q++) {
        uint32_t x = a[q * MR + m], y = b[q * NR + n];
        acc = fmaf(pair_hi(x), pair_hi(y), acc);
        acc = fmaf(pair_lo(x), pair_lo(y), acc);
      }
      c[m * ldc + n] = acc;
    }
  return 1;
}

static pair_block_fn pair_block;           /* NULL: no pair kernel on this host */

#if defined(__x86_64__) && defined(__GNUC__)
/* Returns 0, writing nothing, if an accumulator value of the block is
 * denormal, infinite, NaN or nonzero below 2^-103 (exponent field under 24):
 * the caller then runs the reference twin on the block. */
__attribute__((target("avx512f,avx512bf16"))) static int pair_block_avx512(
    int64_t kp, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc, int64_t mr,
    int64_t nr) {
  (void)mr, (void)nr; /* always MR x NR */
  const __m512i mag = _mm512_set1_epi32(0x7fffffff), base = _mm512_set1_epi32(24 << 23);
  const __m512i span = _mm512_set1_epi32((255 - 24) << 23);
  __m512 acc[MR][2];
  __mmask16 unsafe = 0;
  for (int m = 0; m < MR; m++)
    for (int h = 0; h < 2; h++) {
      acc[m][h] = _mm512_loadu_ps(c + m * ldc + 16 * h);
      __m512i v = _mm512_and_si512(_mm512_castps_si512(acc[m][h]), mag);
      unsafe |= _mm512_test_epi32_mask(v, v) & _mm512_cmpge_epu32_mask(_mm512_sub_epi32(v, base), span);
    }
  if (unsafe) return 0;
  for (int64_t q = 0; q < kp; q++, a += MR, b += NR) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
    for (int m = 0; m < MR; m++) {
      __m512bh am = (__m512bh)_mm512_set1_epi32((int)a[m]);
      acc[m][0] = _mm512_dpbf16_ps(acc[m][0], am, b0);
      acc[m][1] = _mm512_dpbf16_ps(acc[m][1], am, b1);
    }
  }
  for (int m = 0; m < MR; m++) {
    _mm512_storeu_ps(c + m * ldc, acc[m][0]);
    _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
  }
  return 1;
}

/* Packs rows r0 (step 2q) and r1 (step 2q + 1) of n bf16 values into pairs
 * at dst: element j goes to run j / width (runs `run_step` pairs apart),
 * place j % width (width 8 or a multiple of 16). Returns nonzero if a value
 * is outside the safe range (see above). */
__attribute__((target("avx512f"))) static int pack_pairs_avx512(const uint16_t *r0,
                                                                const uint16_t *r1, int64_t n,
                                                                uint32_t *dst, int64_t width,
                                                                int64_t run_step) {
  const __m512i low = _mm512_set1_epi32(0x7fff), base = _mm512_set1_epi32(71 << 7);
  const __m512i span = _mm512_set1_epi32(120 << 7);
  __mmask16 bad = 0;
  int64_t j = 0;
  /* Runs of 16 pairs (width a multiple of 16) or two runs of 8 (width 8). */
  for (; j + 16 <= n && (width == 8 || (j % width) + 16 <= width); j += 16) {
    __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(r0 + j)));
    __m512i y = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(r1 + j)));
    __m512i mx = _mm512_and_si512(x, low), my = _mm512_and_si512(y, low);
    bad |= _mm512_test_epi32_mask(mx, mx) &
           _mm512_cmpge_epu32_mask(_mm512_sub_epi32(mx, base), span);
    bad |= _mm512_test_epi32_mask(my, my) &
           _mm512_cmpge_epu32_mask(_mm512_sub_epi32(my, base), span);
    __m512i w = _mm512_or_si512(_mm512_slli_epi32(x, 16), y);
    uint32_t *d = dst + (j / width) * run_step + j % width;
    if (width == 8) {
      _mm256_storeu_si256((__m256i *)(void *)d, _mm512_castsi512_si256(w));
      _mm256_storeu_si256((__m256i *)(void *)(d + run_step), _mm512_extracti64x4_epi64(w, 1));
    } else {
      _mm512_storeu_si512((void *)d, w);
    }
  }
  int scalar_bad = 0;
  for (; j < n; j++) {
    uint32_t x = r0[j], y = r1[j];
    uint32_t mx = x & 0x7fff, my = y & 0x7fff;
    scalar_bad |= (mx && mx - (71u << 7) >= (120u << 7)) || (my && my - (71u << 7) >= (120u << 7));
    dst[(j / width) * run_step + j % width] = x << 16 | y;
  }
  return bad != 0 || scalar_bad;
}

/* The pair kernel is used only if it gives the reference twin's bits on
 * this host, including cancellation to zero, signed zeros and overflow. */
static int pair_kernel_agrees(void) {
  enum { KP = 6 };
  static const uint16_t vals[] = {0x3f80, 0xbf80, 0x4049, 0x0000, 0x8000, 0x5f00,
                                  0xdf7f, 0x3c23, 0xc2f7, 0x2401, 0x5a5a, 0xa5a5};
  uint32_t a[KP * MR], b[KP * NR];
  float c0[MR * NR], c1[MR * NR];
  for (int i = 0; i < KP * MR; i++) a[i] = (uint32_t)vals[i % 12] << 16 | vals[(i * 7 + 3) % 12];
  for (int i = 0; i < KP * NR; i++) b[i] = (uint32_t)vals[(i * 5 + 1) % 12] << 16 | vals[(i * 11) % 12];
  for (int i = 0; i < MR * NR; i++) {
    static const float init[] = {0.0f, -0.0f, 1.0f, -3.3e38f, 2.5e-30f, -7.0f};
    c0[i] = c1[i] = init[i % 6];
  }
  pair_block_reference(KP, a, b, c0, NR, MR, NR);
  return pair_block_avx512(KP, a, b, c1, NR, MR, NR) && memcmp(c0, c1, sizeof c0) == 0;
}
#endif

static block_fn full_block = block_reference;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static void select_kernel(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX512) full_block = block_avx512;
  else if (rt_isa() >= NRT_ISA_AVX2) full_block = block_avx2;
  if (rt_isa_avx512_bf16() && pair_kernel_agrees()) pair_block = pair_block_avx512;
#endif
}

typedef struct matmul_job {
  int64_t k, m, n;
  const float *a, *b;
  float *c;
  int64_t ldc;
  int reference; /* force the reference twin (tests) */
  nc_side_task *side;
} matmul_job;

static void matmul_rows(int64_t begin, int64_t end, void *ctx) {
  const matmul_job *job = ctx;
  nc_side_task_step(job->side); /* a piece per range while any is left */
  block_fn fast = job->reference ? block_reference : full_block;
  for (int64_t n0 = 0; n0 < job->n; n0 += NR)
    for (int64_t mb = begin; mb < end; mb++) {
      int64_t m0 = mb * MR, mr = job->m - m0 < MR ? job->m - m0 : MR;
      int64_t nr = job->n - n0 < NR ? job->n - n0 : NR;
      block_fn fn = (mr == MR && nr == NR) ? fast : block_reference;
      fn(job->k, job->a + m0, job->m, job->b + n0, job->n, job->c + m0 * job->ldc + n0, job->ldc,
         mr, nr);
    }
}

/* Whether partition rows of ap are n contiguous fp32 elements. */
static int contiguous_f32_rows(const nrt_nc_ap *ap, int64_t n) {
  return ap->dtype == NRT_NC_FLOAT32 && ap->count[3] == n && ap->stride[3] == 1;
}

static int force_reference;

/* For tests: 1 makes every product run the fp32 path on its reference twin;
 * 2 makes the bf16 pair path (where it applies) use its reference twin. */
void nc_tensor_engine_force_reference(int on);
void nc_tensor_engine_force_reference(int on) { force_reference = on; }

/* For tests: how many products the pair path has run. */
static atomic_long pair_products, pack_hits, pack_misses;
long nc_tensor_engine_pair_products(void);
long nc_tensor_engine_pair_products(void) { return atomic_load(&pair_products); }
/* For tests: products whose moving packing came from / went into the cache. */
long nc_tensor_engine_pack_hits(void);
long nc_tensor_engine_pack_hits(void) { return atomic_load(&pack_hits); }
long nc_tensor_engine_pack_misses(void);
long nc_tensor_engine_pack_misses(void) { return atomic_load(&pack_misses); }

/* Partition rows [begin, end) of both operands, converted to fp32. */
typedef struct operand_job {
  const nc_core *core;
  const nrt_nc_ap *st, *mv;
  float *a, *b;
  int64_t m, n;
} operand_job;

static void gather_operands(int64_t begin, int64_t end, void *ctx) {
  const operand_job *job = ctx;
  for (int64_t p = begin; p < end; p++) {
    nc_gather_f32(job->core, job->st, p, job->a + p * job->m);
    nc_gather_f32(job->core, job->mv, p, job->b + p * job->n);
  }
}

/* The packed moving tiles of a run: a moving tile usually serves several
 * matmuls (one per stationary block), so its packing is kept, keyed by the
 * access pattern and the tile's write generation (nc_core.gen). Eight
 * entries, replaced in turn; caches are pooled across runs so that their
 * memory stays faulted in. */
#define PACK_ENTRIES 8
#define PACK_WORDS (MAX_K / 2 * MAX_N)
typedef struct pack_entry {
  int valid;
  nrt_nc_ap ap;
  uint64_t gen;
  uint32_t *words; /* PACK_WORDS, allocated on first use */
} pack_entry;

struct nc_pack_cache {
  pack_entry e[PACK_ENTRIES];
  int next;
  struct nc_pack_cache *pooled;
};

static pthread_mutex_t pack_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nc_pack_cache *pack_pool;

struct nc_pack_cache *nc_pack_cache_new(void) {
  pthread_mutex_lock(&pack_pool_mu);
  struct nc_pack_cache *c = pack_pool;
  if (c) pack_pool = c->pooled;
  pthread_mutex_unlock(&pack_pool_mu);
  if (!c) c = calloc(1, sizeof *c);
  if (!c) return NULL; /* no caching */
  for (int i = 0; i < PACK_ENTRIES; i++) c->e[i].valid = 0;
  c->next = 0;
  return c;
}

void nc_pack_cache_free(struct nc_pack_cache *c) {
  if (!c) return;
  pthread_mutex_lock(&pack_pool_mu);
  c->pooled = pack_pool;
  pack_pool = c;
  pthread_mutex_unlock(&pack_pool_mu);
}

/* The pair path's packing (rows 2q, 2q + 1 of both operands, q in a range)
 * and its blocks. */
typedef struct pair_job {
  const nc_core *core;
  const nrt_nc_ap *st, *mv;
  uint32_t *a, *b;
  int64_t m, n, kp;
  float *c;
  int64_t ldc;
  int reference, zero; /* zero: start from 0 (no accumulate), blocks cleared here */
  int pack_moving;      /* 0: b already holds moving's packing (cached) */
  atomic_int unsafe;
  nc_side_task *side;
} pair_job;

/* Partition p of a bf16 pattern as n contiguous values (in place when the
 * pattern's row is contiguous, else copied to tmp). */
static const uint16_t *bf16_row(const nc_core *core, const nrt_nc_ap *ap, int64_t p, int64_t n,
                                uint16_t *tmp) {
  if (ap->count[3] == n && ap->stride[3] == 1) return (const uint16_t *)(const void *)nc_row(core, ap, p);
  nc_gather_raw(core, ap, p, (uint8_t *)tmp);
  return tmp;
}

#if defined(__x86_64__) && defined(__GNUC__)
static void pack_operands(int64_t begin, int64_t end, void *ctx) {
  pair_job *job = ctx;
  uint16_t t0[MAX_N], t1[MAX_N];
  int unsafe = 0;
  for (int64_t q = begin; q < end; q++) {
    const uint16_t *r0 = bf16_row(job->core, job->st, 2 * q, job->m, t0);
    const uint16_t *r1 = bf16_row(job->core, job->st, 2 * q + 1, job->m, t1);
    unsafe |= pack_pairs_avx512(r0, r1, job->m, job->a + q * MR, MR, job->kp * MR);
    if (!job->pack_moving) continue;
    r0 = bf16_row(job->core, job->mv, 2 * q, job->n, t0);
    r1 = bf16_row(job->core, job->mv, 2 * q + 1, job->n, t1);
    unsafe |= pack_pairs_avx512(r0, r1, job->n, job->b + q * NR, NR, job->kp * NR);
  }
  if (unsafe) atomic_store(&job->unsafe, 1);
}
#endif

static void pair_rows(int64_t begin, int64_t end, void *ctx) {
  const pair_job *job = ctx;
  nc_side_task_step(job->side); /* a piece per range while any is left */
  for (int64_t n0 = 0; n0 < job->n; n0 += NR)
    for (int64_t mb = begin; mb < end; mb++) {
      int64_t m0 = mb * MR, mr = job->m - m0 < MR ? job->m - m0 : MR;
      int64_t nr = job->n - n0 < NR ? job->n - n0 : NR;
      pair_block_fn fn = (mr == MR && nr == NR && !job->reference) ? pair_block : pair_block_reference;
      const uint32_t *a = job->a + mb * job->kp * MR, *b = job->b + (n0 / NR) * job->kp * NR;
      float *c = job->c + m0 * job->ldc + n0;
      if (job->zero)
        for (int64_t r = 0; r < mr; r++) memset(c + r * job->ldc, 0, (size_t)nr * sizeof(float));
      if (!fn(job->kp, a, b, c, job->ldc, mr, nr)) pair_block_reference(job->kp, a, b, c, job->ldc, mr, nr);
    }
}

/* Runs the product on the pair path if its inputs allow (see above);
 * returns 0 (nothing written) when they do not. out holds the accumulator. */
static int try_pairs(const nc_core *core, const nrt_nc_ap *st, const nrt_nc_ap *mv, int64_t k,
                     int64_t m, int64_t n, float *out, int64_t ldc, int accumulate,
                     uint32_t *a, uint32_t *b, int big, nc_side_task *side) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!pair_block || force_reference == 1 || st->dtype != NRT_NC_BFLOAT16 ||
      mv->dtype != NRT_NC_BFLOAT16 || k % 2 != 0)
    return 0;
  pair_job job = {.core = core, .st = st, .mv = mv, .a = a, .b = b, .m = m, .n = n, .kp = k / 2,
                  .c = out, .ldc = ldc, .reference = force_reference == 2,
                  .zero = !accumulate, .pack_moving = 1, .side = side};
  atomic_init(&job.unsafe, 0);
  /* A cached packing of moving (only packings of safe values are kept). */
  struct nc_pack_cache *cache = core->packs;
  pack_entry *fill = NULL;
  if (cache) {
    uint64_t gen = core->gen[mv->tensor];
    for (int i = 0; i < PACK_ENTRIES && job.pack_moving; i++) {
      pack_entry *e = &cache->e[i];
      if (e->valid && e->gen == gen && memcmp(&e->ap, mv, sizeof *mv) == 0)
        job.b = e->words, job.pack_moving = 0;
    }
    if (job.pack_moving) {
      fill = &cache->e[cache->next];
      if (!fill->words) fill->words = malloc(PACK_WORDS * sizeof(uint32_t));
      if (fill->words) {
        cache->next = (cache->next + 1) % PACK_ENTRIES;
        fill->valid = 0;
        job.b = fill->words;
      } else {
        fill = NULL;
      }
    }
  }
  if (big) rt_parallel_for(job.kp, 8, pack_operands, &job);
  else pack_operands(0, job.kp, &job);
  if (atomic_load(&job.unsafe)) return 0;
  if (fill) {
    fill->ap = *mv;
    fill->gen = core->gen[mv->tensor];
    fill->valid = 1;
    atomic_fetch_add_explicit(&pack_misses, 1, memory_order_relaxed);
  } else if (!job.pack_moving) {
    atomic_fetch_add_explicit(&pack_hits, 1, memory_order_relaxed);
  }
  int64_t row_blocks = (m + MR - 1) / MR;
  if (big) rt_parallel_for(row_blocks, 1, pair_rows, &job);
  else pair_rows(0, row_blocks, &job);
  atomic_fetch_add_explicit(&pair_products, 1, memory_order_relaxed);
  return 1;
#else
  (void)core, (void)st, (void)mv, (void)k, (void)m, (void)n, (void)out, (void)ldc;
  (void)accumulate, (void)a, (void)b, (void)big, (void)side;
  return 0;
#endif
}

void nc_exec_matmul(const nc_core *core, const nrt_nc_inst *inst, float *scratch,
                    nc_side_task *side) {
  pthread_once(&select_once, select_kernel);
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  int64_t k = st->partitions, m = nc_ap_free_elems(st), n = nc_ap_free_elems(mv);
  /* double_row: partition p's row of stationary is [2, M] (and moving's
   * [2, N]); gathered as it is, row p holds terms 2p and 2p + 1 of a 2K-term
   * contraction, which the same kernels run partition-major (the order in
   * which a PE adds its pair of products before passing the sum on). */
  int pairs = (inst->flags & NRT_NC_FLAG_DOUBLE_ROW) != 0;
  float *a = scratch, *b = a + 2 * MAX_K * MAX_M, *c = b + 2 * MAX_K * MAX_N;
  operand_job ops = {.core = core, .st = st, .mv = mv, .a = a, .b = b, .m = m, .n = n};
  if (pairs) k *= 2, m /= 2, n /= 2;
  int big = m * n * k >= (int64_t)1 << 18; /* small products are not worth waking the pool for */
  int accumulate = (inst->flags & NRT_NC_FLAG_ACCUMULATE) != 0;
  /* PSUM rows are one partition apart: accumulate in place when possible. */
  int in_place = contiguous_f32_rows(dst, n) && (dst->partitions == 1 || dst->partition_step == 1);
  float *out = in_place ? (float *)(void *)nc_row(core, dst, 0) : c;
  int64_t ldc = in_place ? core->psum_pitch / 4 : n;
  if (accumulate && !in_place)
    for (int64_t r = 0; r < m; r++) nc_gather_f32(core, dst, r, out + r * ldc);
  /* The pair path clears its own blocks when not accumulating. */
  if (!pairs && try_pairs(core, st, mv, k, m, n, out, ldc, accumulate, (uint32_t *)(void *)a,
                          (uint32_t *)(void *)b, big, side)) {
    if (!in_place)
      for (int64_t r = 0; r < m; r++) nc_scatter_f32(core, dst, r, out + r * ldc);
    nc_side_task_finish(side);
    return;
  }
  if (!accumulate)
    for (int64_t r = 0; r < m; r++) memset(out + r * ldc, 0, (size_t)n * sizeof(float));
  /* Converting the operands is a serial share of the time unless it is split too. */
  if (big) rt_parallel_for(st->partitions, 16, gather_operands, &ops);
  else gather_operands(0, st->partitions, &ops);
  matmul_job job = {.k = k, .m = m, .n = n, .a = a, .b = b, .c = out, .ldc = ldc,
                    .reference = force_reference == 1, .side = side};
  int64_t row_blocks = (m + MR - 1) / MR;
  if (big) rt_parallel_for(row_blocks, 1, matmul_rows, &job);
  else matmul_rows(0, row_blocks, &job);
  if (!in_place)
    for (int64_t r = 0; r < m; r++) nc_scatter_f32(core, dst, r, out + r * ldc);
  nc_side_task_finish(side);
}

/* c[m][n] (rows ldc apart) += sum over k of a[k][m] * b[k][n], fp32 with
 * in-order fused multiply-adds, on the same blocked kernels as nc_matmul
 * (exec_mx.c's nc_matmul_mx, whose k is partitions x 4 values). */
void nc_tensor_engine_gemm(int64_t k, int64_t m, int64_t n, const float *a, const float *b,
                           float *c, int64_t ldc);
void nc_tensor_engine_gemm(int64_t k, int64_t m, int64_t n, const float *a, const float *b,
                           float *c, int64_t ldc) {
  pthread_once(&select_once, select_kernel);
  matmul_job job = {.k = k, .m = m, .n = n, .a = a, .b = b, .c = c, .ldc = ldc,
                    .reference = force_reference == 1};
  int64_t row_blocks = (m + MR - 1) / MR;
  if (m * n * k >= (int64_t)1 << 18) rt_parallel_for(row_blocks, 1, matmul_rows, &job);
  else matmul_rows(0, row_blocks, &job);
}

void nc_exec_transpose(const nc_core *core, const nrt_nc_inst *inst, float *scratch) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t rows = src->partitions, cols = nc_ap_free_elems(src);
  float *t = scratch, *row = scratch + rows * cols;
  for (int64_t p = 0; p < rows; p++) nc_gather_f32(core, src, p, t + p * cols);
  for (int64_t f = 0; f < cols; f++) {
    for (int64_t p = 0; p < rows; p++) row[p] = t[p * cols + f];
    nc_scatter_f32(core, dst, f, row);
  }
}
