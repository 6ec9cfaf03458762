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
 *     first use comes from L2), and in the packed / k-major tile of the A
 *     column PF_A steps ahead (a k-major A read in place has its columns a
 *     row stride apart: (2048x384)^T @ 2048x128 195 -> 199 GF/s);
 *   - C from L3 (a large product's C does not stay in L2) costs more
 *     than anything in the loop: during its first 12 quads the tile
 *     prefetches the next tile's C (mr rows down, where the macro-kernel's
 *     row loop goes next) into L2, a row per quad, and its own C's 24
 *     lines into L1 TAIL k steps before the end (at the start, as the
 *     twin does, they are evicted again by the A and B panels: C rows a
 *     multiple of 4 KiB apart share two L1 sets). In the macro-kernel's
 *     loops with C from L3 (gemm_tile_time --cblocks 32) this took the tile
 *     from 199 to 218 GF/s, the twin's 199 (peak 229);
 *   - a twin for rows of a row-major A (f32_rows): row i at one of four
 *     base pointers (rows 0, 3, 6, 9) plus 0-2 row strides.
 * C update: alpha 1 and beta 0 stores; alpha 1 and beta 1 (every k block
 * after the first) adds C (c*1 + acc*1 rounds as c + acc); otherwise
 * acc*alpha, then c*beta + that fused, as the twin does.
 */
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define TAIL 32 /* k steps after C's prefetch */
#define PF_B 8  /* B rows prefetched ahead */
#define PF_A 8  /* A columns (k steps) prefetched ahead, packed or k-major A */
#define STR_(x) #x
#define STR(x) STR_(x)

/* Row i of the tile for one k step: broadcast A(i, p) from address ai, two FMAs. */
#define ROW(ai, lo, hi, bc, b0, b1)                                                              \
  "vbroadcastss " ai ", %%zmm" #bc "\n\t"                                                        \
  "vfmadd231ps %%zmm" #b0 ", %%zmm" #bc ", %%zmm" #lo "\n\t"                                      \
  "vfmadd231ps %%zmm" #b1 ", %%zmm" #bc ", %%zmm" #hi "\n\t"
/* One k step: the B row at bb into registers b0, b1 (B PF_B rows ahead
 * prefetched), then the 12 rows, A(i, p) at address a<i>. */
#define STEP_(bb, b0, b1, bc, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)                  \
  "vmovups " bb ", %%zmm" #b0 "\n\t"                                                             \
  "vmovups 64" bb ", %%zmm" #b1 "\n\t"                                                           \
  "prefetcht0 " STR(PF_B) "*128" bb "\n\t"                                                       \
  ROW(a0, 0, 1, bc, b0, b1) ROW(a1, 2, 3, bc, b0, b1) ROW(a2, 4, 5, bc, b0, b1)                  \
  ROW(a3, 6, 7, bc, b0, b1) ROW(a4, 8, 9, bc, b0, b1) ROW(a5, 10, 11, bc, b0, b1)                \
  ROW(a6, 12, 13, bc, b0, b1) ROW(a7, 14, 15, bc, b0, b1) ROW(a8, 16, 17, bc, b0, b1)            \
  ROW(a9, 18, 19, bc, b0, b1) ROW(a10, 20, 21, bc, b0, b1) ROW(a11, 22, 23, bc, b0, b1)
#define STEP(...) STEP_(__VA_ARGS__) /* expands B_U* and the address lists first */
/* B's row u of four, alternating register pairs (24, 25 / 27, 28). */
#define B_U0 "(%[b])", 24, 25, 26
#define B_U1 "(%[b],%[ldb],1)", 27, 28, 29
#define B_U2 "(%[b],%[ldb],2)", 24, 25, 26
#define B_U3 "(%[b],%[ldb3],1)", 27, 28, 29

/* Packed (or k-major) A: column p at %[a] + p*lda, its 12 values in a row. */
#define PK(col) "4*0" col, "4*1" col, "4*2" col, "4*3" col, "4*4" col, "4*5" col, "4*6" col,     \
                "4*7" col, "4*8" col, "4*9" col, "4*10" col, "4*11" col
#define PK_QUAD                                                                                  \
  STEP(B_U0, PK("(%[a])")) STEP(B_U1, PK("(%[a],%[lda],1)")) STEP(B_U2, PK("(%[a],%[lda],2)"))   \
  STEP(B_U3, PK("(%[a],%[lda3],1)"))                                                             \
  "prefetcht0 (%[pa])\n\tprefetcht0 (%[pa],%[lda],1)\n\tprefetcht0 (%[pa],%[lda],2)\n\t"          \
  "prefetcht0 (%[pa],%[lda3],1)\n\tlea (%[pa],%[lda],4), %[pa]\n\t"                             \
  "lea (%[a],%[lda],4), %[a]\n\tlea (%[b],%[ldb],4), %[b]\n\t"
#define PK_SINGLE                                                                                \
  STEP(B_U0, PK("(%[a])")) "add %[lda], %[a]\n\tadd %[lda], %[pa]\n\tadd %[ldb], %[b]\n\t"

/* Rows of a row-major A: row i at one of %[a], %[a3], %[a6], %[a9] (rows
 * 0, 3, 6, 9) plus 0, 1 or 2 row strides; step u of a quad 4*u bytes on. */
#define RW(u) "4*" #u "(%[a])", "4*" #u "(%[a],%[lda],1)", "4*" #u "(%[a],%[lda],2)",            \
              "4*" #u "(%[a3])", "4*" #u "(%[a3],%[lda],1)", "4*" #u "(%[a3],%[lda],2)",          \
              "4*" #u "(%[a6])", "4*" #u "(%[a6],%[lda],1)", "4*" #u "(%[a6],%[lda],2)",          \
              "4*" #u "(%[a9])", "4*" #u "(%[a9],%[lda],1)", "4*" #u "(%[a9],%[lda],2)"
#define RW_MOVE(bytes)                                                                           \
  "add $" #bytes ", %[a]\n\tadd $" #bytes ", %[a3]\n\tadd $" #bytes ", %[a6]\n\tadd $" #bytes    \
  ", %[a9]\n\t"
#define RW_QUAD                                                                                  \
  STEP(B_U0, RW(0)) STEP(B_U1, RW(1)) STEP(B_U2, RW(2)) STEP(B_U3, RW(3))                        \
  RW_MOVE(16) "lea (%[b],%[ldb],4), %[b]\n\t"
#define RW_SINGLE STEP(B_U0, RW(0)) RW_MOVE(4) "add %[ldb], %[b]\n\t"

/* C's rows, one after another from %[c] (%[t] for prefetches). */
#define PF_ROW(hint) "prefetch" #hint " (%[t])\n\tprefetch" #hint " 64(%[t])\n\tadd %[ldc], %[t]\n\t"
#define ST_ROW(lo, hi)                                                                           \
  "vmovups %%zmm" #lo ", (%[c])\n\tvmovups %%zmm" #hi ", 64(%[c])\n\tadd %[ldc], %[c]\n\t"
/* The updates read all of C's rows (walking %[t]) before storing any: C
 * rows a multiple of 4 KiB apart, a load right after the previous row's
 * store would wait on it (4K aliasing). */
#define ADD_ROW(lo, hi)                                                                          \
  "vaddps (%[t]), %%zmm" #lo ", %%zmm" #lo "\n\tvaddps 64(%[t]), %%zmm" #hi ", %%zmm" #hi "\n\t" \
  "add %[ldc], %[t]\n\t"
#define MUL_ROW(lo, hi)                                                                          \
  "vmulps %%zmm24, %%zmm" #lo ", %%zmm" #lo "\n\tvmulps %%zmm24, %%zmm" #hi ", %%zmm" #hi "\n\t"
#define FMA_ROW(lo, hi)                                                                          \
  MUL_ROW(lo, hi)                                                                                \
  "vfmadd231ps (%[t]), %%zmm25, %%zmm" #lo "\n\tvfmadd231ps 64(%[t]), %%zmm25, %%zmm" #hi "\n\t" \
  "add %[ldc], %[t]\n\t"
#define TWELVE(R)                                                                                \
  R(0, 1) R(2, 3) R(4, 5) R(6, 7) R(8, 9) R(10, 11) R(12, 13) R(14, 15) R(16, 17) R(18, 19)      \
  R(20, 21) R(22, 23)
#define ZERO(lo, hi) "vpxord %%zmm" #lo ", %%zmm" #lo ", %%zmm" #lo "\n\tvmovaps %%zmm" #lo ", %%zmm" #hi "\n\t"
#define PF_TWELVE(hint)                                                                          \
  PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint)     \
  PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint) PF_ROW(hint)

/* The whole tile: zero, the k loop in four runs of one counter (quads that
 * also prefetch the next tile's C row by row into L2, plain quads, C's own
 * prefetch then the last quads, single steps), then C's update. */
#define TILE_ASM(QUAD, SINGLE)                                                                   \
  TWELVE(ZERO)                                                                                   \
  "mov %[n_early], %[n]\n\ttest %[n], %[n]\n\tjz 2f\n\t"                                         \
  "1:\n\t" QUAD PF_ROW(t1) "dec %[n]\n\tjnz 1b\n\t"                                              \
  "2:\n\tmov %[n_before], %[n]\n\ttest %[n], %[n]\n\tjz 4f\n\t"                                  \
  "3:\n\t" QUAD "dec %[n]\n\tjnz 3b\n\t"                                                         \
  "4:\n\tmov %[c], %[t]\n\t" PF_TWELVE(t0)                                                       \
  "mov %[n_after], %[n]\n\ttest %[n], %[n]\n\tjz 6f\n\t"                                         \
  "5:\n\t" QUAD "dec %[n]\n\tjnz 5b\n\t"                                                         \
  "6:\n\tmov %[n_single], %[n]\n\ttest %[n], %[n]\n\tjz 8f\n\t"                                  \
  "7:\n\t" SINGLE "dec %[n]\n\tjnz 7b\n\t"                                                       \
  "8:\n\t"                                                                                       \
  "mov %[c], %[t]\n\tcmpl $1, %[mode]\n\tjb 10f\n\tje 11f\n\t"                                     \
  "vbroadcastss %[alpha], %%zmm24\n\tvbroadcastss %[beta], %%zmm25\n\t"                          \
  "cmpl $2, %[mode]\n\tje 12f\n\t"                                                               \
  TWELVE(FMA_ROW) "jmp 10f\n\t"                                                                  \
  "11:\n\t" TWELVE(ADD_ROW) "jmp 10f\n\t"                                                        \
  "12:\n\t" TWELVE(MUL_ROW)                                                                      \
  "10:\n\t" TWELVE(ST_ROW)                                                                       \
  "vzeroupper\n\t"
#define TILE_CLOBBERS                                                                            \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",  \
      "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",   \
      "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "cc", "memory"

/* The loop counts for k, the C update's case, and where the next tile's C
 * (mr rows down, as the macro-kernel's row loop goes) lies. */
typedef struct tile_plan {
  int64_t n_early, n_before, n_after, n_single;
  int mode;
} tile_plan;

static tile_plan plan_tile(int64_t k, float alpha, float beta) {
  tile_plan p;
  int64_t before = k > TAIL ? (k - TAIL) / 4 : 0;
  p.n_early = before < 12 ? before : 12; /* one row of the next C per quad */
  p.n_before = before - p.n_early;
  p.n_after = (k - 4 * before) / 4;
  p.n_single = k % 4;
  p.mode = alpha == 1 && beta == 0 ? 0 : alpha == 1 && beta == 1 ? 1 : beta == 0 ? 2 : 3;
  return p;
}

#define TILE_INPUTS                                                                              \
  [ldb] "r"(ldb * 4), [ldb3] "r"(ldb * 12), [ldc] "r"(ldc * 4), [n_early] "m"(p.n_early),          \
      [n_before] "m"(p.n_before), [n_after] "m"(p.n_after), [n_single] "m"(p.n_single),            \
      [mode] "m"(p.mode), [alpha] "m"(alpha), [beta] "m"(beta)

__attribute__((target("avx512f"))) void rt_gemm_ukr_f32_avx512_12x32(int64_t k, const float *a, int64_t lda,
                                                                      const float *b, int64_t ldb, float *c,
                                                                      int64_t ldc, float alpha, float beta) {
  const tile_plan p = plan_tile(k, alpha, beta);
  const float *t = c + 12 * ldc, *pa = a + PF_A * lda;
  int64_t n;
  __asm__ volatile(TILE_ASM(PK_QUAD, PK_SINGLE)
                   : [a] "+r"(a), [b] "+r"(b), [c] "+r"(c), [t] "+r"(t), [n] "=&r"(n), [pa] "+r"(pa)
                   : [lda] "r"(lda * 4), [lda3] "r"(lda * 12), TILE_INPUTS
                   : TILE_CLOBBERS);
}

/* The same tile over rows of a row-major A: A(i, p) at a[i*lda + p]. */
__attribute__((target("avx512f"))) void rt_gemm_ukr_f32_avx512_12x32_rows(int64_t k, const float *a, int64_t lda,
                                                                           const float *b, int64_t ldb, float *c,
                                                                           int64_t ldc, float alpha, float beta) {
  const tile_plan p = plan_tile(k, alpha, beta);
  const float *t = c + 12 * ldc, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
  int64_t n;
  __asm__ volatile(TILE_ASM(RW_QUAD, RW_SINGLE)
                   : [a] "+r"(a), [a3] "+r"(a3), [a6] "+r"(a6), [a9] "+r"(a9), [b] "+r"(b), [c] "+r"(c),
                     [t] "+r"(t), [n] "=&r"(n)
                   : [lda] "r"(lda * 4), TILE_INPUTS
                   : TILE_CLOBBERS);
}

#endif
