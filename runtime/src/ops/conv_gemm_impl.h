/* The blocked product for one type; included by conv_gemm.c with T, VT (a
 * vector of VW lanes of T), MR, NR = 2 * VW and SUFFIX defined. */

#define GF(name) VCAT2_(name, SUFFIX)
#define MATRIX VCAT2_(rt_matrix, SUFFIX)

/* Packs rows [0, m) x cols [0, kc) of A into MR-row slivers, column-major
 * within a sliver, zero-padding the last sliver. */
static void GF(pack_a_)(int64_t m, int64_t kc, const T *a, int64_t rs, int64_t cs, T *dst) {
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    int64_t mr = m - i0 < MR ? m - i0 : MR;
    for (int64_t p = 0; p < kc; p++) {
      const T *src = a + i0 * rs + p * cs;
      for (int64_t i = 0; i < mr; i++) dst[i] = src[i * rs];
      for (int64_t i = mr; i < MR; i++) dst[i] = 0;
      dst += MR;
    }
  }
}

/* Packs rows [0, kc) x cols [0, n) of B into NR-column slivers, row-major
 * within a sliver. Row by row, so that a row-major B is read in order. */
static void GF(pack_b_)(int64_t kc, int64_t n, const T *b, int64_t rs, int64_t cs, T *dst) {
  int64_t full = n / NR * NR;
  for (int64_t p = 0; p < kc; p++) {
    const T *src = b + p * rs;
    T *d = dst + p * NR;
    if (cs == 1) {
      for (int64_t j0 = 0; j0 < full; j0 += NR, d += kc * NR)
        for (int64_t j = 0; j < NR; j++) d[j] = src[j0 + j];
    } else {
      for (int64_t j0 = 0; j0 < full; j0 += NR, d += kc * NR)
        for (int64_t j = 0; j < NR; j++) d[j] = src[(j0 + j) * cs];
    }
    if (full < n) {
      for (int64_t j = 0; j < n - full; j++) d[j] = src[(full + j) * cs];
      for (int64_t j = n - full; j < NR; j++) d[j] = 0;
    }
  }
}

/* acc = a_sliver * b_sliver over kc, then C (mr x nr) = acc (+ C). The
 * accumulators are MR x 2 vectors of VW lanes (GNU vector extensions) that
 * stay in registers: 12 of the 16 AVX2 ones. */
RT_SIMD_CLONES RT_GEMM_CONTRACT static void GF(micro_)(int64_t kc, const T *restrict a, const T *restrict b,
                                                       T *c, int64_t rs, int64_t cs, int64_t mr, int64_t nr,
                                                       int accumulate) {
  VT acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = (VT){0};
  for (int64_t p = 0; p < kc; p++) {
    VT b0, b1;
    memcpy(&b0, b, sizeof b0);
    memcpy(&b1, b + VW, sizeof b1);
    for (int i = 0; i < MR; i++) {
      VT ai = (VT){0} + a[i];
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
    a += MR;
    b += NR;
  }
  T tile[MR][NR];
  memcpy(tile, acc, sizeof tile);
  if (mr == MR && nr == NR && cs == 1) {
    for (int i = 0; i < MR; i++) {
      T *ci = c + i * rs;
      if (accumulate)
        for (int j = 0; j < NR; j++) ci[j] += tile[i][j];
      else
        for (int j = 0; j < NR; j++) ci[j] = tile[i][j];
    }
    return;
  }
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) {
      T *cij = c + i * rs + j * cs;
      *cij = accumulate ? *cij + tile[i][j] : tile[i][j];
    }
}

void GF(rt_conv_gemm)(int64_t m, int64_t n, int64_t k, MATRIX a, MATRIX b, MATRIX c, int accumulate,
                      T *scratch) {
  T *pa = scratch, *pb = scratch + GEMM_MC * GEMM_KC;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c.data[i * c.rs + j * c.cs] = 0;
    return;
  }
  for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
    int64_t nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
    for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
      int64_t kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
      int acc = accumulate || pc > 0;
      GF(pack_b_)(kc, nc, b.data + pc * b.rs + jc * b.cs, b.rs, b.cs, pb);
      for (int64_t ic = 0; ic < m; ic += GEMM_MC) {
        int64_t mc = m - ic < GEMM_MC ? m - ic : GEMM_MC;
        GF(pack_a_)(mc, kc, a.data + ic * a.rs + pc * a.cs, a.rs, a.cs, pa);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int64_t nr = nc - jr < NR ? nc - jr : NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int64_t mr = mc - ir < MR ? mc - ir : MR;
            T *cp = c.data + (ic + ir) * c.rs + (jc + jr) * c.cs;
            GF(micro_)(kc, pa + ir * kc, pb + jr * kc, cp, c.rs, c.cs, mr, nr, acc);
          }
        }
      }
    }
  }
}

#undef GF
#undef MATRIX
#undef T
#undef VT
#undef VW
#undef MR
#undef NR
#undef SUFFIX
