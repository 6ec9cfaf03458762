/* Matrix-vector products (n == 1: mv, addmv, dot): y = alpha * A x + beta * yin.
 *
 * Packing would cost as much as the product itself here, so A is read in
 * place: rows contiguous along k give one dot product per row (fixed lanes,
 * combined pairwise: the order never depends on threads); columns
 * contiguous give column updates of a block of y. x is first converted to a
 * contiguous vector of the compute type. Rows are shared out in fixed
 * blocks across the kernel thread pool.
 */
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/gemm/gemm.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"

#define ROW_BLOCK 64      /* rows per unit when rows are contiguous (dot products) */
#define COLUMN_BLOCK 1024 /* rows per unit when columns are: long contiguous column reads */
#define LANES_F32 64
#define LANES_F64 32

static inline float conv_f32(float v) { return v; }
static inline float conv_bf16(rt_bfloat16 v) { return rt_bfloat16_to_float(v); }
static inline float conv_f16(rt_half v) { return rt_half_to_float(v); }
static inline double conv_f64(double v) { return v; }

/* sum_p a[p] * x[p] over k contiguous values, in LANES partial sums. */
#define DEFINE_DOT(NAME, S, T, CONV, LANES)                                            \
  RT_SIMD_RETURNS(T, NAME, (const S *a, const T *x, int64_t k), (a, x, k)) {            \
    T acc[LANES] = {0};                                                                 \
    int64_t p = 0;                                                                      \
    for (; p + LANES <= k; p += LANES)                                                  \
      for (int l = 0; l < LANES; l++) acc[l] += CONV(a[p + l]) * x[p + l];              \
    for (int l = 0; p + l < k; l++) acc[l] += CONV(a[p + l]) * x[p + l];                \
    for (int w = LANES / 2; w > 0; w /= 2)                                              \
      for (int l = 0; l < w; l++) acc[l] += acc[l + w];                                 \
    return acc[0];                                                                      \
  }

/* acc[r] += x[0] a[r] + x[1] a[r + cs] + ... for r < rows: `cols` (1 to 4)
 * columns of a row block, cs apart, added in order. */
#define DEFINE_AXPY(NAME, S, T, CONV)                                                          \
  RT_SIMD_VOID(NAME, (T *acc, const S *a, int64_t cs, const T *x, int cols, int64_t rows),      \
                     (acc, a, cs, x, cols, rows)) {                                             \
    if (cols == 4) {                                                                            \
      const S *a1 = a + cs, *a2 = a + 2 * cs, *a3 = a + 3 * cs;                                 \
      for (int64_t r = 0; r < rows; r++)                                                        \
        acc[r] = acc[r] + x[0] * CONV(a[r]) + x[1] * CONV(a1[r]) + x[2] * CONV(a2[r]) +         \
                 x[3] * CONV(a3[r]);                                                            \
      return;                                                                                   \
    }                                                                                           \
    for (int c = 0; c < cols; c++)                                                              \
      for (int64_t r = 0; r < rows; r++) acc[r] += x[c] * CONV(a[c * cs + r]);                  \
  }

DEFINE_DOT(dot_f32, float, float, conv_f32, LANES_F32)
DEFINE_DOT(dot_bf16, rt_bfloat16, float, conv_bf16, LANES_F32)
DEFINE_DOT(dot_f16, rt_half, float, conv_f16, LANES_F32)
DEFINE_DOT(dot_f64, double, double, conv_f64, LANES_F64)
DEFINE_AXPY(axpy_f32, float, float, conv_f32)
DEFINE_AXPY(axpy_bf16, rt_bfloat16, float, conv_bf16)
DEFINE_AXPY(axpy_f16, rt_half, float, conv_f16)
DEFINE_AXPY(axpy_f64, double, double, conv_f64)

typedef struct gemv_job {
  const rt_gemm_args *g;
  int64_t block, row_blocks;
  int failed;
} gemv_job;

/* y rows [i0, i0 + rows) of batch item t, in the compute type T. */
#define DEFINE_ROWS(SUF, T)                                                                    \
  static void rows_##SUF(const rt_gemm_args *g, const T *x, int64_t t, int64_t i0,            \
                         int64_t rows, T *acc) {                                               \
    const int64_t ab = (int64_t)nrt_dtype_size(g->ab_dtype);                                   \
    const char *a = (const char *)g->a + (t * g->a_bs + i0 * g->a_rs) * ab;                    \
    for (int64_t r = 0; r < rows; r++) acc[r] = 0;                                             \
    if (g->a_cs == 1) {                                                                        \
      for (int64_t r = 0; r < rows; r++) {                                                     \
        const char *row = a + r * g->a_rs * ab;                                                \
        switch (g->ab_dtype) {                                                                 \
          DOT_CASES_##SUF                                                                      \
        }                                                                                      \
      }                                                                                        \
    } else if (g->a_rs == 1) {                                                                 \
      for (int64_t p = 0; p < g->k; p += 4) {                                                  \
        const char *col = a + p * g->a_cs * ab;                                                \
        const int cols = g->k - p < 4 ? (int)(g->k - p) : 4;                                   \
        switch (g->ab_dtype) {                                                                 \
          AXPY_CASES_##SUF                                                                     \
        }                                                                                      \
      }                                                                                        \
    } else {                                                                                   \
      for (int64_t r = 0; r < rows; r++)                                                       \
        for (int64_t p = 0; p < g->k; p++)                                                     \
          acc[r] += (T)rt_gemm_load(g->ab_dtype, a, r * g->a_rs + p * g->a_cs) * x[p];         \
    }                                                                                          \
  }

#define DOT_CASES_f32                                                                     \
  case NRT_BFLOAT16: acc[r] = dot_bf16((const rt_bfloat16 *)row, x, g->k); break;         \
  case NRT_FLOAT16: acc[r] = dot_f16((const rt_half *)row, x, g->k); break;               \
  default: acc[r] = dot_f32((const float *)row, x, g->k); break;
#define AXPY_CASES_f32                                                                    \
  case NRT_BFLOAT16: axpy_bf16(acc, (const rt_bfloat16 *)col, g->a_cs, x + p, cols, rows); break; \
  case NRT_FLOAT16: axpy_f16(acc, (const rt_half *)col, g->a_cs, x + p, cols, rows); break;       \
  default: axpy_f32(acc, (const float *)col, g->a_cs, x + p, cols, rows); break;
#define DOT_CASES_f64 \
  default: acc[r] = dot_f64((const double *)row, x, g->k); break;
#define AXPY_CASES_f64 \
  default: axpy_f64(acc, (const double *)col, g->a_cs, x + p, cols, rows); break;

DEFINE_ROWS(f32, float)
DEFINE_ROWS(f64, double)

#define DEFINE_GEMV_RANGE(SUF, T)                                                              \
  static void gemv_range_##SUF(int64_t u0, int64_t u1, void *ctx) {                             \
    gemv_job *job = ctx;                                                                       \
    const rt_gemm_args *g = job->g;                                                            \
    T *x = malloc((size_t)g->k * sizeof(T));                                                   \
    if (!x) {                                                                                  \
      __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);                                     \
      return;                                                                                  \
    }                                                                                          \
    T acc[COLUMN_BLOCK];                                                                       \
    int64_t xt = -1;                                                                           \
    for (int64_t u = u0; u < u1; u++) {                                                        \
      int64_t t = u / job->row_blocks, i0 = u % job->row_blocks * job->block;                  \
      int64_t rows = g->m - i0 < job->block ? g->m - i0 : job->block;                          \
      if (t != xt) {                                                                           \
        for (int64_t p = 0; p < g->k; p++)                                                     \
          x[p] = (T)rt_gemm_load(g->ab_dtype, g->b, t * g->b_bs + p * g->b_rs);                \
        xt = t;                                                                                \
      }                                                                                        \
      rows_##SUF(g, x, t, i0, rows, acc);                                                      \
      T alpha = (T)g->alpha, beta = (T)g->beta;                                                \
      for (int64_t r = 0; r < rows; r++) {                                                     \
        T v = alpha * acc[r];                                                                  \
        if (g->beta != 0)                                                                      \
          v += beta * (T)rt_gemm_load(g->c_dtype, g->cin, t * g->cin_bs + (i0 + r) * g->cin_rs); \
        rt_gemm_store(g->c_dtype, g->c, t * g->c_bs + (i0 + r) * g->c_rs, v);                  \
      }                                                                                        \
    }                                                                                          \
    free(x);                                                                                   \
  }

DEFINE_GEMV_RANGE(f32, float)
DEFINE_GEMV_RANGE(f64, double)

nrt_status rt_gemv(const rt_gemm_args *g) {
  gemv_job job = {.g = g, .block = g->a_cs != 1 && g->a_rs == 1 ? COLUMN_BLOCK : ROW_BLOCK};
  job.row_blocks = (g->m + job.block - 1) / job.block;
  int64_t units = g->batch * job.row_blocks;
  /* A unit reads block * k elements; share out once there are ~64K per thread. */
  int64_t grain = 1 + (1 << 16) / (job.block * g->k);
  rt_parallel_for(units, grain, g->ab_dtype == NRT_FLOAT64 ? gemv_range_f64 : gemv_range_f32, &job);
  if (job.failed) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "gemm: out of host memory for a vector buffer");
  return NRT_SUCCESS;
}
