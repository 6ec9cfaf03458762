/* The attention tile product C += A B on vectors of ATTN_W floats
 * (ATTN_VEC), defined as ATTN_GEMM_NAME; included once per width by
 * attention_tiles.c. A's element (i, p) is A[i * ra + p * ca]. Tiles are 4
 * rows by 2 vectors of C, held in 8 vector registers while p runs; n is a
 * multiple of 16, so the one-vector tail runs at most once for 16 wide and
 * never past n. The window w (see rt_attn_win) limits each group of rows to
 * its range of p and of columns (the first column rounded down to 16, the
 * same at every width). */
#define ATTN_LD(p) (*(ATTN_VEC *)(p))
#define ATTN_LDC(p) (*(const ATTN_VEC *)(p))

RT_ATTN_FMA static inline __attribute__((always_inline)) void ATTN_GEMM_NAME(
    int64_t m, int64_t n, int64_t k, const float *A, int64_t ra, int64_t ca, const float *B,
    int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w) {
  rt_attn_win all = {-m - k - n, m + k + n, -m - k - n};
  if (!w) w = &all;
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    const float *a0 = A + i * ra, *a1 = a0 + ra, *a2 = a1 + ra, *a3 = a2 + ra;
    float *c0 = C + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    int64_t p0 = clamp_to(i + w->p_first, k), p1 = clamp_to(i + 3 + w->p_last + 1, k);
    int64_t j = clamp_to(i + w->col_first, n) & ~(int64_t)15;
    for (; j + 2 * ATTN_W <= n; j += 2 * ATTN_W) {
      ATTN_VEC x00 = ATTN_LD(c0 + j), x01 = ATTN_LD(c0 + j + ATTN_W), x10 = ATTN_LD(c1 + j),
               x11 = ATTN_LD(c1 + j + ATTN_W), x20 = ATTN_LD(c2 + j),
               x21 = ATTN_LD(c2 + j + ATTN_W), x30 = ATTN_LD(c3 + j),
               x31 = ATTN_LD(c3 + j + ATTN_W);
      const float *bp = B + j + p0 * ldb;
      for (int64_t p = p0; p < p1; p++, bp += ldb) {
        ATTN_VEC b0 = ATTN_LDC(bp), b1 = ATTN_LDC(bp + ATTN_W);
        x00 += a0[p * ca] * b0;
        x01 += a0[p * ca] * b1;
        x10 += a1[p * ca] * b0;
        x11 += a1[p * ca] * b1;
        x20 += a2[p * ca] * b0;
        x21 += a2[p * ca] * b1;
        x30 += a3[p * ca] * b0;
        x31 += a3[p * ca] * b1;
      }
      ATTN_LD(c0 + j) = x00, ATTN_LD(c0 + j + ATTN_W) = x01;
      ATTN_LD(c1 + j) = x10, ATTN_LD(c1 + j + ATTN_W) = x11;
      ATTN_LD(c2 + j) = x20, ATTN_LD(c2 + j + ATTN_W) = x21;
      ATTN_LD(c3 + j) = x30, ATTN_LD(c3 + j + ATTN_W) = x31;
    }
    for (; j < n; j += ATTN_W) { /* fewer than 2 vectors of columns left */
      ATTN_VEC x0 = ATTN_LD(c0 + j), x1 = ATTN_LD(c1 + j), x2 = ATTN_LD(c2 + j),
               x3 = ATTN_LD(c3 + j);
      const float *bp = B + j + p0 * ldb;
      for (int64_t p = p0; p < p1; p++, bp += ldb) {
        ATTN_VEC b0 = ATTN_LDC(bp);
        x0 += a0[p * ca] * b0;
        x1 += a1[p * ca] * b0;
        x2 += a2[p * ca] * b0;
        x3 += a3[p * ca] * b0;
      }
      ATTN_LD(c0 + j) = x0, ATTN_LD(c1 + j) = x1, ATTN_LD(c2 + j) = x2, ATTN_LD(c3 + j) = x3;
    }
  }
  for (; i < m; i++) {
    const float *a0 = A + i * ra;
    float *c0 = C + i * ldc;
    int64_t p0 = clamp_to(i + w->p_first, k), p1 = clamp_to(i + w->p_last + 1, k);
    for (int64_t j = clamp_to(i + w->col_first, n) & ~(int64_t)15; j < n; j += ATTN_W) {
      ATTN_VEC x = ATTN_LD(c0 + j);
      const float *bp = B + j + p0 * ldb;
      for (int64_t p = p0; p < p1; p++, bp += ldb) x += a0[p * ca] * ATTN_LDC(bp);
      ATTN_LD(c0 + j) = x;
    }
  }
}

#undef ATTN_LD
#undef ATTN_LDC
#undef ATTN_GEMM_NAME
#undef ATTN_VEC
#undef ATTN_W
