/* GEMM: C = alpha * A @ B + beta * Cin, batched, over any strides.
 *
 * This is the entry point for every kernel that multiplies matrices: the
 * GEMM op (mm, bmm, addmm, mv, dot, ... in the shim) and, from C, later
 * kernels such as convolution (im2col) and attention. It is BLIS-shaped:
 * blocking loops, packing and the macro-kernel are portable C (gemm.c,
 * gemm_pack.c); only the register-blocked micro-kernel is per ISA
 * (gemm_kernels.c), chosen at run time from one table with its block
 * sizes. Products with one output column or row (mv, dot) take a
 * vector path instead (gemm_gemv.c); integer dtypes a plain loop.
 *
 * Numbers. float32, bfloat16 and float16 inputs are read as float32 and
 * accumulated in float32 (as the NeuronCore Tensor engine does); float64 in
 * float64. On CPUs with AVX512_BF16, bfloat16 products use its pair
 * dot-product instruction: still float32 accumulation of exact products,
 * but with subnormal inputs and results flushed to zero, as oneDNN's
 * bfloat16 GEMM (PyTorch's CPU path) does. With AMX (TDPBF16PS), the
 * same, summed as gemm_amx.c describes. alpha, the accumulation over k blocks and beta * Cin are applied
 * in that type and the result is rounded to C's dtype once. beta == 0 never
 * reads Cin (NaN there does not propagate). Integer dtypes accumulate in
 * 64 bits and wrap as PyTorch's integer arithmetic does.
 *
 * Reproducibility. Blocking depends on the problem and the CPU's kernel,
 * never on the thread count, and each output element is computed by one
 * thread in a fixed order (k blocks of kc, each summed by the micro-kernel
 * then added to C): results are bitwise identical for any
 * TORCHNEURON_NUM_THREADS, and for any split of the work into units.
 * Kernels for different ISAs round differently (fused multiply-add or not,
 * summation order; the bfloat16 pair kernel adds two products per step).
 *
 * Memory. Packing buffers are kept per thread between calls (freed when
 * the thread exits): the shared packed B, up to 16 MiB on the calling
 * thread, and each worker's A block, B chunk and workspace.
 */
#ifndef NEURONRT_OPS_GEMM_INTERNAL_H
#define NEURONRT_OPS_GEMM_INTERNAL_H

#include <stdint.h>
#include "neuronrt/op.h"

/* One batched product, described by host pointers and element strides
 * (any sign, zero allowed for inputs).
 *
 *   for t < batch, i < m, j < n:
 *     C[t,i,j] = alpha * sum_{s < kslices, p < k} A[t,s,i,p] * B[t,s,p,j]
 *              + beta * Cin[t,i,j]
 *
 * with X[t,s,i,p] at x + t*x_bs + s*x_ss + i*x_rs + p*x_cs. kslices > 1
 * sums a stack of products into one output (addbmm); otherwise it is 1
 * and the slice strides are ignored. a and b share one dtype (floating or
 * integer); c has a's dtype, or float32 when a is float16/bfloat16; cin
 * has c's dtype, may be c itself (then with c's strides), and is ignored
 * when beta == 0 (it may then be NULL). C must not overlap A, B, or Cin
 * other than as that exact alias. */
typedef struct rt_gemm_args {
  int64_t batch, m, n, k, kslices;
  nrt_dtype ab_dtype, c_dtype;
  const void *a;
  int64_t a_bs, a_ss, a_rs, a_cs;
  const void *b;
  int64_t b_bs, b_ss, b_rs, b_cs;
  void *c;
  int64_t c_bs, c_rs, c_cs;
  const void *cin;
  int64_t cin_bs, cin_rs, cin_cs;
  double alpha, beta;
  /* A kernel from rt_gemm_kernels() to use instead of the best one (tests
   * and benchmarks); NULL for the default. */
  const struct rt_gemm_kernel *kernel;
  /* Nonzero: never compute the product as C^T = B^T A^T by choice (the
   * small-m rule of gemm.c), only when C itself is stored transposed: the
   * straight plan, the twin of the transposed one (tests, benchmarks). */
  int straight;
  /* Optional: called once for every block of C as soon as its final values
   * are stored (rows i0..i0+rows-1, columns j0..j0+cols-1 of batch item t,
   * in the caller's orientation), on the thread that computed it, while
   * the block is in that core's cache: a compiled graph applies its
   * pointwise epilogue there. Blocks are disjoint and together cover C;
   * calls run in parallel. A nonzero status stops the product and is
   * returned by rt_gemm, with no message of its own (the epilogue keeps
   * its message). */
  nrt_status (*epilogue)(void *ctx, int64_t t, int64_t i0, int64_t rows, int64_t j0, int64_t cols);
  void *epilogue_ctx;
} rt_gemm_args;

/* Runs the product on the calling thread and the kernel thread pool.
 * Thread-safe. Fails (NRT_ERROR_INVALID_ARGUMENT, message naming "gemm")
 * on inconsistent dtypes or sizes, NRT_ERROR_OUT_OF_MEMORY if packing
 * buffers cannot be allocated; never reads or writes out of the described
 * elements. */
nrt_status rt_gemm(const rt_gemm_args *args);

/* The product an NRT_OP_GEMM op describes (operands [out, a, b(, cin)],
 * scalars [alpha, beta], host pointers), checked: for callers that add an
 * epilogue before calling rt_gemm. out is [batch, m, n] (batch 1 for a
 * 2-d out). */
nrt_status rt_gemm_args_of_op(const nrt_op *op, rt_gemm_args *out);

/* ---- micro-kernels (gemm_kernels.c) ------------------------------------- */

struct rt_gemm_src; /* a packing source, below */

/* The register tile: for i < mr, j < nr
 *   c[i*ldc + j] = alpha * sum_{p < k} a[p*lda + i] * b[p*ldb + j] + beta * c[i*ldc + j]
 * where beta == 0 does not read c. a is a packed panel (lda = mr) or mr
 * rows of a k-major A read where it lies (lda its k stride); b a packed
 * panel (ldb = nr) or nr columns of B read where it lies (ldb its row
 * stride). */
typedef void (*rt_gemm_ukr_f32)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                float *c, int64_t ldc, float alpha, float beta);
typedef void (*rt_gemm_ukr_f64)(int64_t k, const double *a, int64_t lda, const double *b, int64_t ldb,
                                double *c, int64_t ldc, double alpha, double beta);

/* The bfloat16 tile: a and b hold pairs of consecutive k values (k2 = k/2
 * rounded up, the odd one out paired with 0) as 32-bit words, low half the
 * even k; the sum is the float32 sum of their exact products. b is always
 * packed (ldb = nr words). */
typedef void (*rt_gemm_ukr_bf16)(int64_t k2, const uint32_t *a, const uint32_t *b, int64_t ldb,
                                 float *c, int64_t ldc, float alpha, float beta);
/* The same tile reading A's rows where they lie: a row-major bfloat16 A
 * whose k pairs are aligned 32-bit words, row i's pair p at a[i*lda + p]
 * (lda in words); the same sums as rt_gemm_ukr_bf16 on the packed pairs. */
typedef void (*rt_gemm_ukr_bf16_rows)(int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b,
                                      int64_t ldb, float *c, int64_t ldc, float alpha, float beta);

typedef struct rt_gemm_kernel {
  const char *name;
  /* NRT_FLOAT32 (f32 set), NRT_FLOAT64 (f64 set), or NRT_BFLOAT16 (bf16
   * set: bfloat16 inputs only, accumulating in float32). */
  nrt_dtype compute;
  int mr, nr;        /* register tile */
  int mc, kc;        /* cache blocks: A block mc x kc (L2), B micro-panel kc x nr (L1) */
  int64_t b_elems;   /* packed B chunk budget (elements): k chunk x nc lies within it */
  /* Rows of a unit of work at least, when all of B is packed and shared
   * and one k block of it is larger than L2 (each B panel then comes from
   * L3 on its first use in a unit, and serves mc / mr row panels); 0: no
   * minimum. */
  int big_b_mc;
  rt_gemm_ukr_f32 f32;
  /* The same tile reading A's rows where they lie in a row-major A:
   * a[i*lda + p] instead of a[p*lda + i]; NULL when the kernel has none. */
  rt_gemm_ukr_f32 f32_rows;
  /* f32_rows for a last column panel of at most 8 (i + 1) columns, i < 3:
   * the same sums for the first 8 (i + 1) columns of B's panel (row stride
   * ldb), C's first 8 (i + 1) columns stored and no other (a transposed
   * small-m product's x^T, gemm.c small_m_transposed); NULL when there is
   * none. */
  rt_gemm_ukr_f32 f32_rows_narrow[3];
  rt_gemm_ukr_f64 f64;
  rt_gemm_ukr_bf16 bf16;
  /* bf16 reading A's rows in place (W of a transposed small-m product,
   * gemm.c small_m_transposed), and its narrow twins for a last column
   * panel of at most 8 (i + 1) columns as f32_rows_narrow; NULL when the
   * kernel has none. */
  rt_gemm_ukr_bf16_rows bf16_rows;
  rt_gemm_ukr_bf16_rows bf16_rows_narrow[3];
  /* bfloat16 kernels whose A panels are not k-major (AMX): packs A as
   * rt_gemm_pack_panels_bf16x2 does (same panels, same size) but straight
   * into the kernel's own layout; NULL when the kernel reads the k-major
   * panels. */
  void (*bf16_pack_a)(uint32_t *dst, const struct rt_gemm_src *src, int64_t r0, int64_t rows,
                      int64_t kk0, int64_t kc);
  /* Kernels with per-thread state (AMX tiles): begin() before a run of
   * micro-kernel calls on a thread, end() after it, with no other code
   * that may use that state in between; NULL when there is none. */
  void (*begin)(void);
  void (*end)(void);
  /* The tile bf16 computes with beta 0, times alpha, rounded (as
   * rt_bfloat16_from_float) into the first rows x cols values of a
   * bfloat16 C at c (row stride ldc, unit column stride): C straight from
   * the kernel's accumulators, with no float32 tile in between. a is
   * packed (bf16_pack_a's layout) when lda is 0; otherwise it is 32 rows
   * of a row-major bfloat16 A read where they lie, k pairs as words, row
   * stride lda words. Only on CPUs with AVX512-BF16; NULL when the kernel
   * has none. */
  void (*bf16_c)(int64_t k2, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, uint16_t *c,
                 int64_t ldc, int64_t rows, int64_t cols, float alpha);
  /* bf16_c over a block of rows x cols (tiles of mr x nr, column panels
   * outer): row panel i's A at a + i * a_panel (words; lda as bf16_c's),
   * column panel j's B at b + j * b_panel, C's tile (i, j) at c + i * mr *
   * ldc + j * nr. The same values as bf16_c per tile; NULL when the kernel
   * has none. */
  void (*bf16_c_block)(int64_t k2, const uint32_t *a, int64_t a_panel, int64_t lda, const uint32_t *b,
                       int64_t b_panel, int64_t ldb, uint16_t *c, int64_t ldc, int64_t rows, int64_t cols,
                       float alpha);
  /* bf16_c_block takes row panels outer (each A panel stays in L1 while
   * B's panels stream from L2) when its block's packed B is at most this
   * many bytes, else column panels outer. */
  int64_t bf16_c_rows_b_bytes;
  /* Rows, at most, of a bfloat16 product with short rows of W (k < 512)
   * that gemm.c computes transposed (small_m_transposed); 0: its default
   * (16, measured with the AVX512-BF16 kernel). */
  int small_m_bf16_any_k;
  /* A single product (batch 1) of fewer flops than this runs on the
   * calling thread alone; 0: split from MIN_PARALLEL_FLOPS on (gemm.c). */
  double serial_flops;
} rt_gemm_kernel;

#if defined(__x86_64__) && defined(__GNUC__)
/* The AMX bfloat16 kernel (gemm_amx.c), listed when rt_isa_amx_bf16(). */
extern const rt_gemm_kernel rt_gemm_kernel_amx_bf16;
/* The hand-scheduled float32 AVX-512 12 x 32 tile (gemm_tile_f32.c): the
 * compiler-scheduled one of gemm_kernels.c (avx512cc_12x32) is its twin. */
void rt_gemm_ukr_f32_avx512_12x32(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                  float *c, int64_t ldc, float alpha, float beta);
void rt_gemm_ukr_f32_avx512_12x32_rows(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                       float *c, int64_t ldc, float alpha, float beta);
#endif

/* The kernels for compute dtype (NRT_FLOAT32, NRT_FLOAT64 or NRT_BFLOAT16)
 * that this CPU runs, best first; for float32 and float64 the last one is
 * portable C. Returns the count (0 for bfloat16 without AVX512_BF16). */
int rt_gemm_kernels(nrt_dtype compute, const rt_gemm_kernel *const **list);

/* ---- internal pieces shared by gemm*.c ----------------------------------- */

/* Packs rows x kc elements of src into dst as kc groups of R values
 * (dst[p*R + r] = src[r*s_r + p*s_k] converted to the compute type), rows
 * <= R, padding rows..R-1 with zeros. The k range may cross slices: it is
 * given as (slice, p0) and continues into the next slice at p = k. */
typedef struct rt_gemm_src {
  const char *base; /* element (0, 0) of the current batch item */
  nrt_dtype dtype;
  int64_t s_r, s_k, s_slice, k; /* strides in elements; k per slice */
} rt_gemm_src;

void rt_gemm_pack_f32(float *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                      int64_t kk0, int64_t kc);
void rt_gemm_pack_f64(double *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                      int64_t kk0, int64_t kc);
/* The same for bfloat16 sources in the pair layout of rt_gemm_ukr_bf16:
 * dst[q*R + r] holds k values 2q and 2q+1 (relative to kk0). */
void rt_gemm_pack_bf16x2(uint32_t *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                         int64_t kk0, int64_t kc);

/* The same for rows > R: ceil(rows / R) panels, panel q (rows r0 + q*R
 * ...) at dst + q * R * (packed kc), the last one zero-padded. */
void rt_gemm_pack_panels_f32(float *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                             int64_t kk0, int64_t kc);
/* k values [kk0, kk0 + len) of those panels, into panels kstride k values
 * long (dst at the first of them): a k range of a packed block. */
void rt_gemm_pack_panels_part_f32(float *dst, int R, int64_t kstride, const rt_gemm_src *src, int64_t r0,
                                  int64_t rows, int64_t kk0, int64_t len);
void rt_gemm_pack_panels_f64(double *dst, int R, const rt_gemm_src *src, int64_t r0, int64_t rows,
                             int64_t kk0, int64_t kc);
void rt_gemm_pack_panels_bf16x2(uint32_t *dst, int R, const rt_gemm_src *src, int64_t r0,
                                int64_t rows, int64_t kk0, int64_t kc);

/* Products with n == 1 (after transposition): y = alpha * A x + beta * yin. */
nrt_status rt_gemv(const rt_gemm_args *args);

/* rows x n float32 values (row stride ld) to bfloat16 C (row stride c_rs,
 * unit column stride): c = w + beta * in (in NULL: just w; else unit column
 * stride, row stride i_rs), rounded as rt_bfloat16_from_float. Returns 0,
 * writing nothing, when the CPU lacks AVX512-BF16 (gemm_round.c). */
int rt_gemm_flush_bf16_rows(uint16_t *c, int64_t c_rs, const float *w, int64_t ld, const uint16_t *in,
                            int64_t i_rs, float beta, int64_t rows, int64_t n);

/* Integer products, plain loops. */
nrt_status rt_gemm_integer(const rt_gemm_args *args);

/* Reads element i of a floating array of dtype d as double / writes it. */
double rt_gemm_load(nrt_dtype d, const void *base, int64_t i);
void rt_gemm_store(nrt_dtype d, void *base, int64_t i, double v);

#endif
