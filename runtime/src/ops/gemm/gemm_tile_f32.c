/* The float32 AVX-512 register tile (12 x 32) scheduled by hand.
 *
 * The same products summed in the same order as the compiler-scheduled tile
 * of gemm_kernels.c (its twin, bit for bit: per element one fused
 * multiply-add per k, from zero, then alpha and beta as there), written as
 * one asm block so that the loop holds nothing but what the tile needs:
 *   - zmm0-23 the 24 accumulators, row i in zmm(2i), zmm(2i+1);
 *   - k unrolled by 4, the four A columns and B rows addressed from one
 *     pointer each (a, a+lda, a+2lda, a+3lda) so that a quad costs two
 *     pointer increments and a counter (scalar ops compete with the FMAs
 *     for ports 0 and 5); B rows alternate between two register pairs;
 *   - one prefetch per k step of the B row PF_B rows ahead (a B panel's
 *     first use comes from L2), none of A (a sequential stream the hardware
 *     prefetcher follows, panels one after another);
 *   - C's 24 lines prefetched TAIL k steps before the end rather than at
 *     the start: with kc = 256 the A and B panels fill L1 meanwhile (C
 *     rows a multiple of 4 KiB apart share two L1 sets), so lines fetched
 *     at the start were gone again by the end.
 * C update: alpha 1 and beta 0 stores; alpha 1 and beta 1 (every k block
 * after the first) adds C (c*1 + acc*1 rounds as c + acc); otherwise
 * acc*alpha, then c*beta + that fused, as the twin does.
 */
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define TAIL 16 /* k steps after C's prefetch */
#define PF_B 8  /* B rows prefetched ahead */
#define STR_(x) #x
#define STR(x) STR_(x)

/* Row i of the tile for one k step: broadcast A(i, p), two FMAs. */
#define ROW(i, lo, hi, ab, bc, b0, b1)                                                           \
  "vbroadcastss 4*" #i ab ", %%zmm" #bc "\n\t"                                                   \
  "vfmadd231ps %%zmm" #b0 ", %%zmm" #bc ", %%zmm" #lo "\n\t"                                      \
  "vfmadd231ps %%zmm" #b1 ", %%zmm" #bc ", %%zmm" #hi "\n\t"
/* One k step: A column at address ab, B row at bb, into registers b0, b1. */
#define STEP(ab, bb, b0, b1, bc)                                                                 \
  "vmovups " bb ", %%zmm" #b0 "\n\t"                                                             \
  "vmovups 64" bb ", %%zmm" #b1 "\n\t"                                                           \
  "prefetcht0 " STR(PF_B) "*128" bb "\n\t"                                                           \
  ROW(0, 0, 1, ab, bc, b0, b1) ROW(1, 2, 3, ab, bc, b0, b1) ROW(2, 4, 5, ab, bc, b0, b1)         \
  ROW(3, 6, 7, ab, bc, b0, b1) ROW(4, 8, 9, ab, bc, b0, b1) ROW(5, 10, 11, ab, bc, b0, b1)       \
  ROW(6, 12, 13, ab, bc, b0, b1) ROW(7, 14, 15, ab, bc, b0, b1) ROW(8, 16, 17, ab, bc, b0, b1)   \
  ROW(9, 18, 19, ab, bc, b0, b1) ROW(10, 20, 21, ab, bc, b0, b1) ROW(11, 22, 23, ab, bc, b0, b1)
/* Four k steps, then both pointers move on by four rows. */
#define QUAD                                                                                     \
  STEP("(%[a])", "(%[b])", 24, 25, 26)                                                           \
  STEP("(%[a],%[lda],1)", "(%[b],%[ldb],1)", 27, 28, 29)                                         \
  STEP("(%[a],%[lda],2)", "(%[b],%[ldb],2)", 24, 25, 26)                                         \
  STEP("(%[a],%[lda3],1)", "(%[b],%[ldb3],1)", 27, 28, 29)                                       \
  "lea (%[a],%[lda],4), %[a]\n\t"                                                                \
  "lea (%[b],%[ldb],4), %[b]\n\t"
#define SINGLE                                                                                   \
  STEP("(%[a])", "(%[b])", 24, 25, 26)                                                           \
  "add %[lda], %[a]\n\t"                                                                         \
  "add %[ldb], %[b]\n\t"

/* The C row at %[c] for each update, then the next row. */
#define PF_ROW "prefetcht0 (%[t])\n\tprefetcht0 64(%[t])\n\tadd %[ldc], %[t]\n\t"
#define ST_ROW(lo, hi)                                                                           \
  "vmovups %%zmm" #lo ", (%[c])\n\tvmovups %%zmm" #hi ", 64(%[c])\n\tadd %[ldc], %[c]\n\t"
#define ADD_ROW(lo, hi)                                                                          \
  "vaddps (%[c]), %%zmm" #lo ", %%zmm" #lo "\n\tvaddps 64(%[c]), %%zmm" #hi ", %%zmm" #hi "\n\t" \
  ST_ROW(lo, hi)
#define MUL_ROW(lo, hi)                                                                          \
  "vmulps %%zmm24, %%zmm" #lo ", %%zmm" #lo "\n\tvmulps %%zmm24, %%zmm" #hi ", %%zmm" #hi "\n\t" \
  ST_ROW(lo, hi)
#define FMA_ROW(lo, hi)                                                                          \
  "vmulps %%zmm24, %%zmm" #lo ", %%zmm" #lo "\n\tvmulps %%zmm24, %%zmm" #hi ", %%zmm" #hi "\n\t" \
  "vfmadd231ps (%[c]), %%zmm25, %%zmm" #lo "\n\tvfmadd231ps 64(%[c]), %%zmm25, %%zmm" #hi "\n\t" \
  ST_ROW(lo, hi)
#define TWELVE(R)                                                                                \
  R(0, 1) R(2, 3) R(4, 5) R(6, 7) R(8, 9) R(10, 11) R(12, 13) R(14, 15) R(16, 17) R(18, 19)      \
  R(20, 21) R(22, 23)
#define ZERO(lo, hi) "vpxord %%zmm" #lo ", %%zmm" #lo ", %%zmm" #lo "\n\tvmovaps %%zmm" #lo ", %%zmm" #hi "\n\t"

__attribute__((target("avx512f"))) void rt_gemm_ukr_f32_avx512_12x32(int64_t k, const float *a, int64_t lda,
                                                                      const float *b, int64_t ldb, float *c,
                                                                      int64_t ldc, float alpha, float beta) {
  /* Quads before C's prefetch, quads after, single steps last. */
  int64_t before = k > TAIL ? (k - TAIL) / 4 : 0, after = (k - 4 * before) / 4, single = k % 4;
  const int64_t lda_b = lda * 4, ldb_b = ldb * 4, ldc_b = ldc * 4;
  const int64_t lda3 = 3 * lda_b, ldb3 = 3 * ldb_b;
  const int mode = alpha == 1 && beta == 0 ? 0 : alpha == 1 && beta == 1 ? 1 : beta == 0 ? 2 : 3;
  const float *t = NULL;
  __asm__ volatile(
      TWELVE(ZERO)
      "test %[before], %[before]\n\tjz 2f\n\t"
      "1:\n\t" QUAD "dec %[before]\n\tjnz 1b\n\t"
      "2:\n\t"
      "mov %[c], %[t]\n\t" PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW PF_ROW
      "test %[after], %[after]\n\tjz 4f\n\t"
      "3:\n\t" QUAD "dec %[after]\n\tjnz 3b\n\t"
      "4:\n\t"
      "test %[single], %[single]\n\tjz 6f\n\t"
      "5:\n\t" SINGLE "dec %[single]\n\tjnz 5b\n\t"
      "6:\n\t"
      "cmpl $1, %[mode]\n\tjb 10f\n\tje 11f\n\t"
      "vbroadcastss %[alpha], %%zmm24\n\tvbroadcastss %[beta], %%zmm25\n\t"
      "cmpl $2, %[mode]\n\tje 12f\n\t"
      TWELVE(FMA_ROW) "jmp 13f\n\t"
      "10:\n\t" TWELVE(ST_ROW) "jmp 13f\n\t"
      "11:\n\t" TWELVE(ADD_ROW) "jmp 13f\n\t"
      "12:\n\t" TWELVE(MUL_ROW)
      "13:\n\t"
      "vzeroupper\n\t"
      : [a] "+r"(a), [b] "+r"(b), [c] "+r"(c), [t] "+r"(t), [before] "+r"(before), [after] "+r"(after),
        [single] "+r"(single)
      : [lda] "r"(lda_b), [lda3] "r"(lda3), [ldb] "r"(ldb_b), [ldb3] "r"(ldb3), [ldc] "r"(ldc_b),
        [mode] "m"(mode), [alpha] "m"(alpha), [beta] "m"(beta)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
        "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "cc", "memory");
}

#endif
