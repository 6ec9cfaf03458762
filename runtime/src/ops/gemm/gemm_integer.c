/* Integer matrix products: plain loops, rows shared across the pool.
 *
 * PyTorch multiplies integers in their own type with wrap-around; wrapping
 * arithmetic modulo 2^64 truncated to the type gives the same bits, so one
 * uint64 loop serves every integer dtype (unsigned: no undefined overflow).
 * Integer matmul is rare in models; it is here so that it stays native and
 * exact, not to be fast.
 */
#include "internal.h"
#include "ops/gemm/gemm.h"
#include "ops/engine/thread_pool.h"

static uint64_t load_int(nrt_dtype d, const void *base, int64_t i) {
  switch (d) {
    case NRT_UINT8: return ((const uint8_t *)base)[i];
    case NRT_INT8: return (uint64_t)(int64_t)((const int8_t *)base)[i];
    case NRT_INT16: return (uint64_t)(int64_t)((const int16_t *)base)[i];
    case NRT_INT32: return (uint64_t)(int64_t)((const int32_t *)base)[i];
    default: return (uint64_t)((const int64_t *)base)[i];
  }
}

static void store_int(nrt_dtype d, void *base, int64_t i, uint64_t v) {
  switch (d) {
    case NRT_UINT8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case NRT_INT8: ((int8_t *)base)[i] = (int8_t)(uint8_t)v; break;
    case NRT_INT16: ((int16_t *)base)[i] = (int16_t)(uint16_t)v; break;
    case NRT_INT32: ((int32_t *)base)[i] = (int32_t)(uint32_t)v; break;
    default: ((int64_t *)base)[i] = (int64_t)v; break;
  }
}

static void integer_rows(int64_t r0, int64_t r1, void *ctx) {
  const rt_gemm_args *g = ctx;
  /* PyTorch casts alpha and beta to the integer type (truncating). */
  uint64_t alpha = (uint64_t)(int64_t)g->alpha, beta = (uint64_t)(int64_t)g->beta;
  for (int64_t row = r0; row < r1; row++) {
    int64_t t = row / g->m, i = row % g->m;
    for (int64_t j = 0; j < g->n; j++) {
      uint64_t acc = 0;
      for (int64_t s = 0; s < g->kslices; s++)
        for (int64_t p = 0; p < g->k; p++)
          acc += load_int(g->ab_dtype, g->a, t * g->a_bs + s * g->a_ss + i * g->a_rs + p * g->a_cs) *
                 load_int(g->ab_dtype, g->b, t * g->b_bs + s * g->b_ss + p * g->b_rs + j * g->b_cs);
      uint64_t v = alpha * acc;
      if (g->beta != 0)
        v += beta * load_int(g->c_dtype, g->cin, t * g->cin_bs + i * g->cin_rs + j * g->cin_cs);
      store_int(g->c_dtype, g->c, t * g->c_bs + i * g->c_rs + j * g->c_cs, v);
    }
  }
}

nrt_status rt_gemm_integer(const rt_gemm_args *g) {
  int64_t per_row = g->n * g->k * g->kslices;
  rt_parallel_for(g->batch * g->m, 1 + (1 << 16) / (per_row > 0 ? per_row : 1), integer_rows, (void *)g);
  return NRT_SUCCESS;
}
