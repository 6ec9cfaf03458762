/* bfloat16 tiles that read A's rows where they lie (bf16_rows: W of a
 * transposed small-m product, gemm.c small_m_transposed) against their
 * twins, bit for bit.
 *
 * - Tile: every bfloat16 kernel with bf16_rows (AMX at the host's own
 *   level, AVX512-BF16) against its packed tile (bf16) on the same rows
 *   packed the kernel's way (bf16_pack_a, else pair panels): k pairs
 *   within one AMX step, whole steps and a last short step, row strides
 *   longer than the row, alpha/beta 1, (0.7, -1.3) and beta 0; and row
 *   strides within a line of a multiple of 4 KiB, which the AVX512-BF16
 *   tile reads through staged copies of the rows (gemm_kernels.c
 *   rows_share_l1_sets), and the narrow tiles' columns (bf16_rows_narrow),
 *   whose other columns of C must stay as they were.
 * - Plan: x W^T transposed (W read in place) against the straight plan
 *   (rt_gemm_args.straight) where test_gemm.c's sweep does not reach:
 *   k < 512 with up to the kernel's small_m_bf16_any_k rows (48 on AMX),
 *   n not a multiple of the row tile (a last partial panel of W packed
 *   the kernel's way), and k across k blocks with a short last AMX step.
 *   The kernel's own straight plan is the reference: a product commutes,
 *   so the two must agree exactly.
 * - Plan: x @ W (W row-major [k, n], straight) with few rows, whose AMX
 *   units pack their own B, against the first rows of a 160-row product
 *   (all of B packed once and shared).
 * Values are arbitrary bfloat16 (exponents 110-135): sums round. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cpu_isa.h"
#include "neuronrt/device.h"
#include "ops/gemm/gemm.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* A finite bfloat16 with a biased exponent in [lo, hi] and a random sign. */
static uint16_t random_bf16(int lo, int hi) {
  uint32_t e = (uint32_t)(lo + (int)(rng() % (uint64_t)(hi - lo + 1)));
  return (uint16_t)((uint32_t)(rng() & 1) << 15 | e << 7 | (uint32_t)(rng() & 127));
}

/* 64-byte aligned memory for packed panels (aligned_alloc wants a size
 * that is a multiple of the alignment). */
static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) & ~(size_t)63); }

/* Fresh operands x [m, k] and W [n, k] of random bfloat16 (exponents in
 * [lo, hi]) from the given seed; the caller frees both. */
static void random_x_w(int64_t m, int64_t n, int64_t k, uint64_t seed, int lo, int hi, uint16_t **x, uint16_t **w) {
  *x = malloc((size_t)(m * k) * 2);
  *w = malloc((size_t)(n * k) * 2);
  rng_state = seed;
  for (int64_t q = 0; q < m * k; q++) (*x)[q] = random_bf16(lo, hi);
  for (int64_t q = 0; q < n * k; q++) (*w)[q] = random_bf16(lo, hi);
}

static int kernels_with_rows(const rt_gemm_kernel *const **list) {
  int n = rt_gemm_kernels(NRT_BFLOAT16, list), with = 0;
  for (int i = 0; i < n; i++) with += (*list)[i]->bf16_rows != NULL;
  if (!with) fprintf(stderr, "  (no bfloat16 kernel reads rows at this level: nothing to compare)\n");
  return n;
}

static void test_rows_tile_matches_packed_tile(void) {
  static const int64_t k2s[] = {1, 7, 16, 17, 23, 32, 48, 375};
  /* Row strides in words: longer than the row, one 4 KiB way (staged), a
   * way and a word (staged), half a way more (6 rows a set: in place). */
  static const int64_t extra_lda[] = {5, -1024, -1025, -1536};
  static const float scalars[][2] = {{1, 0}, {1, 1}, {0.7f, -1.3f}};
  const rt_gemm_kernel *const *list;
  const int nkern = kernels_with_rows(&list);
  for (int kk = 0; kk < nkern; kk++) {
    const rt_gemm_kernel *kern = list[kk];
    if (!kern->bf16_rows) continue;
    const int64_t mr = kern->mr, nr = kern->nr;
    for (size_t z = 0; z < sizeof k2s / sizeof k2s[0]; z++)
    for (size_t e = 0; e < sizeof extra_lda / sizeof extra_lda[0]; e++) {
      /* rows longer than k: a strided W (a negative entry: that stride itself) */
      const int64_t k2 = k2s[z], k = 2 * k2, lda = extra_lda[e] > 0 ? k2 + extra_lda[e] : -extra_lda[e];
      uint16_t *w = malloc((size_t)(mr * lda) * 4);
      uint32_t *b = alloc64((size_t)(k2 * nr) * 4), *ap = alloc64((size_t)(k2 * mr + 64) * 4);
      float *c0 = malloc((size_t)(mr * nr) * 4), *c1 = malloc((size_t)(mr * nr) * 4), *cin = malloc((size_t)(mr * nr) * 4);
      float *c2 = malloc((size_t)(mr * nr) * 4);
      rng_state = 777 + (uint64_t)z;
      for (int64_t q = 0; q < mr * lda * 2; q++) w[q] = random_bf16(110, 135);
      for (int64_t q = 0; q < k2 * nr; q++) b[q] = random_bf16(110, 135) | (uint32_t)random_bf16(110, 135) << 16;
      for (int64_t q = 0; q < mr * nr; q++) cin[q] = (float)(rng() % 2001) / 100.0f - 10.0f;
      const rt_gemm_src src = {.base = (const char *)w, .dtype = NRT_BFLOAT16, .s_r = 2 * lda, .s_k = 1,
                               .s_slice = 0, .k = k};
      if (kern->bf16_pack_a)
        kern->bf16_pack_a(ap, &src, 0, mr, 0, k);
      else
        rt_gemm_pack_panels_bf16x2(ap, (int)mr, &src, 0, mr, 0, k);
      for (size_t sc = 0; sc < sizeof scalars / sizeof scalars[0]; sc++) {
        memcpy(c0, cin, (size_t)(mr * nr) * 4);
        memcpy(c1, cin, (size_t)(mr * nr) * 4);
        if (kern->begin) kern->begin();
        kern->bf16(k2, ap, b, nr, c0, nr, scalars[sc][0], scalars[sc][1]);
        kern->bf16_rows(k2, (const uint32_t *)(const void *)w, lda, b, nr, c1, nr, scalars[sc][0], scalars[sc][1]);
        if (kern->end) kern->end();
        if (memcmp(c0, c1, (size_t)(mr * nr) * 4) != 0) {
          fprintf(stderr, "%s: rows tile differs from packed tile, k2 %lld lda %lld alpha %g beta %g\n", kern->name,
                  (long long)k2, (long long)lda, scalars[sc][0], scalars[sc][1]);
          CHECK(0);
        }
        for (int nw = 0; nw < 3; nw++) {
          const rt_gemm_ukr_bf16_rows narrow = kern->bf16_rows_narrow[nw];
          const int64_t cols = 8 * (nw + 1);
          if (!narrow) continue;
          memcpy(c2, cin, (size_t)(mr * nr) * 4);
          narrow(k2, (const uint32_t *)(const void *)w, lda, b, nr, c2, nr, scalars[sc][0], scalars[sc][1]);
          for (int64_t i = 0; i < mr; i++)
            if (memcmp(c2 + i * nr, c0 + i * nr, (size_t)cols * 4) != 0 ||
                memcmp(c2 + i * nr + cols, cin + i * nr + cols, (size_t)(nr - cols) * 4) != 0) {
              fprintf(stderr, "%s: %lld-column rows tile differs, row %lld, k2 %lld lda %lld alpha %g beta %g\n",
                      kern->name, (long long)cols, (long long)i, (long long)k2, (long long)lda, scalars[sc][0],
                      scalars[sc][1]);
              CHECK(0);
              break;
            }
        }
      }
      free(w), free(b), free(ap), free(c0), free(c1), free(c2), free(cin);
    }
  }
}

/* C = alpha x W^T + beta Cin, x [m, k], W [n, k] row-major; cin_mode 0:
 * none, 1: a bias row, 2: a matrix. */
static nrt_status product(void *c, nrt_dtype cd, const uint16_t *x, const uint16_t *w, const void *cin, int64_t m,
                          int64_t n, int64_t k, int cin_mode, double alpha, double beta, int straight,
                          const rt_gemm_kernel *kern) {
  rt_gemm_args g = {.batch = 1, .m = m, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16, .c_dtype = cd,
                    .a = x, .a_rs = k, .a_cs = 1, .b = w, .b_rs = 1, .b_cs = k, .c = c, .c_rs = n, .c_cs = 1,
                    .cin = cin_mode ? cin : NULL, .cin_rs = cin_mode == 1 ? 0 : n, .cin_cs = 1, .alpha = alpha,
                    .beta = cin_mode ? beta : 0, .straight = straight, .kernel = kern};
  return rt_gemm(&g);
}

static void test_transposed_plan_matches_straight(void) {
  static const int64_t sizes[][3] = {/* m, n, k (even) */
                                     {2, 70, 64},    {17, 200, 256}, {32, 1024, 256}, {33, 100, 130},
                                     {40, 333, 384}, {48, 96, 510},  {48, 3072, 256}, {30, 1100, 1500},
                                     {5, 65, 2050},  {64, 600, 800}, {128, 130, 1024}, {100, 257, 2080}};
  static const double scalars[][2] = {{1, 1}, {0.7, -1.3}};
  static const nrt_dtype cds[] = {NRT_FLOAT32, NRT_BFLOAT16};
  const rt_gemm_kernel *const *list;
  const int nkern = kernels_with_rows(&list);
  for (int kk = 0; kk < nkern; kk++) {
    const rt_gemm_kernel *kern = list[kk];
    if (!kern->bf16_rows) continue;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const int64_t m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
      uint16_t *x, *w;
      random_x_w(m, n, k, 4321 + (uint64_t)z, 110, 135, &x, &w);
      void *cin = malloc((size_t)(m * n) * 4), *c0 = malloc((size_t)(m * n) * 4), *c1 = malloc((size_t)(m * n) * 4);
      for (size_t d = 0; d < 2; d++) {
        const size_t cb = cds[d] == NRT_FLOAT32 ? 4 : 2;
        for (int64_t q = 0; q < m * n; q++) {
          const uint16_t v = random_bf16(115, 130);
          if (cb == 4) {
            const uint32_t bits = (uint32_t)v << 16;
            memcpy((char *)cin + q * 4, &bits, 4);
          } else {
            ((uint16_t *)cin)[q] = v;
          }
        }
        for (int mode = 0; mode < 3; mode++)
          for (size_t sc = 0; sc < 2; sc++) {
            CHECK_OK(product(c0, cds[d], x, w, cin, m, n, k, mode, scalars[sc][0], scalars[sc][1], 1, kern));
            CHECK_OK(product(c1, cds[d], x, w, cin, m, n, k, mode, scalars[sc][0], scalars[sc][1], 0, kern));
            if (memcmp(c0, c1, (size_t)(m * n) * cb) != 0) {
              fprintf(stderr, "%s: %lldx%lldx%lld C %s cin mode %d alpha %g beta %g: transposed differs from straight\n",
                      kern->name, (long long)m, (long long)n, (long long)k, nrt_dtype_name(cds[d]), mode,
                      scalars[sc][0], scalars[sc][1]);
              CHECK(0);
            }
          }
      }
      free(x), free(w), free(cin), free(c0), free(c1);
    }
  }
}

/* The transposed plan against the double definition, within the bound
 * of a k-term float32 sum (as test_gemm.c's rounding cases), so that two
 * wrong plans cannot agree unnoticed. */
static void test_transposed_plan_within_bound(void) {
  static const int64_t sizes[][3] = {{4, 3072, 768}, {48, 200, 256}, {30, 1100, 1500}};
  const rt_gemm_kernel *const *list;
  const int nkern = kernels_with_rows(&list);
  for (int kk = 0; kk < nkern; kk++) {
    const rt_gemm_kernel *kern = list[kk];
    if (!kern->bf16_rows) continue;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const int64_t m = sizes[z][0], n = sizes[z][1], k = sizes[z][2];
      uint16_t *x, *w;
      random_x_w(m, n, k, 99 + (uint64_t)z, 120, 130, &x, &w);
      float *c = malloc((size_t)(m * n) * 4);
      CHECK_OK(product(c, NRT_FLOAT32, x, w, NULL, m, n, k, 0, 1, 0, 0, kern));
      int bad = 0;
      for (int64_t i = 0; i < m && !bad; i++)
        for (int64_t j = 0; j < n && !bad; j++) {
          double exact = 0, mag = 0;
          for (int64_t p = 0; p < k; p++) {
            uint32_t xb = (uint32_t)x[i * k + p] << 16, wb = (uint32_t)w[j * k + p] << 16;
            float xf, wf;
            memcpy(&xf, &xb, 4), memcpy(&wf, &wb, 4);
            exact += (double)xf * wf, mag += fabs((double)xf * wf);
          }
          if (fabs(c[i * n + j] - exact) > (double)(k + 2) * ldexp(1, -24) * mag) {
            fprintf(stderr, "%s: %lldx%lldx%lld at (%lld, %lld): %.9g, exact %.9g\n", kern->name, (long long)m,
                    (long long)n, (long long)k, (long long)i, (long long)j, c[i * n + j], exact);
            bad = 1;
          }
        }
      CHECK(!bad);
      free(x), free(w), free(c);
    }
  }
}

/* x @ W with W [k, n] row-major (B's pairs of k are not words: straight)
 * and few rows: on AMX the units pack their own B in small column blocks
 * and read x's rows in place (gemm.c unit_packs_b); with 160 rows all of B
 * is packed once and shared. A row's sums depend on that row and B only,
 * over the same k blocks: the first m rows of the 160-row product must be
 * the m-row product, bit for bit (C float32 and bfloat16, a bias row and
 * alpha/beta, k in one block and across blocks and chunks). */
static void test_few_rows_straight_match_many_rows(void) {
  static const int64_t ns_ks[][2] = {{200, 130}, {768, 1500}, {96, 3072}, {130, 64}};
  static const int64_t ms[] = {2, 4, 31, 32, 33, 64, 100, 128};
  const int64_t big = 160;
  const rt_gemm_kernel *const *list;
  const int nkern = rt_gemm_kernels(NRT_BFLOAT16, &list);
  for (int kk = 0; kk < nkern; kk++)
    for (size_t z = 0; z < sizeof ns_ks / sizeof ns_ks[0]; z++) {
      const rt_gemm_kernel *kern = list[kk];
      const int64_t n = ns_ks[z][0], k = ns_ks[z][1];
      uint16_t *x = malloc((size_t)(big * k) * 2), *w = malloc((size_t)(k * n) * 2), *bias = malloc((size_t)n * 2);
      void *c0 = malloc((size_t)(big * n) * 4), *c1 = malloc((size_t)(big * n) * 4);
      rng_state = 6060 + (uint64_t)z;
      for (int64_t q = 0; q < big * k; q++) x[q] = random_bf16(110, 135);
      for (int64_t q = 0; q < k * n; q++) w[q] = random_bf16(110, 135);
      for (int64_t q = 0; q < n; q++) bias[q] = random_bf16(115, 130);
      for (int cd = 0; cd < 2; cd++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
          const nrt_dtype ct = cd ? NRT_BFLOAT16 : NRT_FLOAT32;
          const size_t cb = cd ? 2 : 4;
          if (!cd && with_bias) continue; /* a float32 C takes a float32 Cin: bias with bfloat16 C only */
          rt_gemm_args g = {.batch = 1, .m = big, .n = n, .k = k, .kslices = 1, .ab_dtype = NRT_BFLOAT16,
                            .c_dtype = ct, .a = x, .a_rs = k, .a_cs = 1, .b = w, .b_rs = n, .b_cs = 1, .c = c0,
                            .c_rs = n, .c_cs = 1, .cin = with_bias ? bias : NULL, .cin_rs = 0, .cin_cs = 1,
                            .alpha = with_bias ? 0.7 : 1, .beta = with_bias ? -1.3 : 0, .kernel = kern};
          CHECK_OK(rt_gemm(&g));
          for (size_t q = 0; q < sizeof ms / sizeof ms[0]; q++) {
            g.m = ms[q], g.c = c1;
            CHECK_OK(rt_gemm(&g));
            if (memcmp(c0, c1, (size_t)(ms[q] * n) * cb) != 0) {
              fprintf(stderr, "%s: %lldx%lldx%lld @ row-major W, C %s bias %d: differs from the first rows of %lld\n",
                      kern->name, (long long)ms[q], (long long)n, (long long)k, nrt_dtype_name(ct), with_bias,
                      (long long)big);
              CHECK(0);
            }
          }
        }
      free(x), free(w), free(bias), free(c0), free(c1);
    }
}

int main(void) {
  CHECK(nrt_init() == NRT_SUCCESS);
  fprintf(stderr, "ISA %s%s\n", rt_isa_name(rt_isa()), rt_isa_amx_bf16() ? " with AMX" : "");
  RUN(test_rows_tile_matches_packed_tile);
  RUN(test_transposed_plan_matches_straight);
  RUN(test_transposed_plan_within_bound);
  RUN(test_few_rows_straight_match_many_rows);
  return CHECK_MAIN_RESULT();
}
