/* Tiles of the attention kernels: argument checks, loading and storing
 * blocks as float32, the bias and dropout factors of a block, the small
 * matrix products between tiles (with their causal windows) and a row scale.
 */
#include "ops/attention/attention_tiles.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/dtype_size.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/vmath.h"

/* The tile products are the hot loops: contracting a * b + c to one fused
 * multiply-add is what makes them fast, and it only changes rounding. */
#define RT_ATTN_FMA __attribute__((optimize("fp-contract=fast")))

typedef float rt_v16f __attribute__((vector_size(64)));

/* ---- arguments ------------------------------------------------------------ */

static int qkv_dtype_ok(nrt_dtype d) {
  return d == NRT_FLOAT32 || d == NRT_BFLOAT16 || d == NRT_FLOAT16;
}

static double scalar_f(const nrt_op *op, int k) {
  return op->scalars[k].is_float ? op->scalars[k].f : (double)op->scalars[k].i;
}

nrt_status rt_attn_parse(const nrt_op *op, int q_index, int mask_after, rt_attn *a) {
  const char *name = nrt_op_name(op->code);
  memset(a, 0, sizeof *a);
  a->name = name;
  if (op->num_scalars < 5 || op->num_operands < q_index + 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects q, k, v operands and scalars [scale, causal, dropout_p, seed, "
                   "offset]",
                   name);
  a->q = &op->operands[q_index];
  a->k = &op->operands[q_index + 1];
  a->v = &op->operands[q_index + 2];
  int mask_index = q_index + 3 + mask_after;
  a->mask = op->num_operands > mask_index ? &op->operands[mask_index] : NULL;
  if (op->num_operands > mask_index + 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: too many operands", name);
  const nrt_tensor_view *q = a->q, *k = a->k, *v = a->v;
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: q, k and v must be 4-d (B, H, L, E)", name);
  if (q->dtype != k->dtype || q->dtype != v->dtype || !qkv_dtype_ok(q->dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED,
                   "%s: q, k, v must share a dtype among float32, bfloat16, float16 (got %s, %s, "
                   "%s)",
                   name, nrt_dtype_name(q->dtype), nrt_dtype_name(k->dtype),
                   nrt_dtype_name(v->dtype));
  a->B = q->shape[0];
  a->H = q->shape[1];
  a->L = q->shape[2];
  a->E = q->shape[3];
  a->Hk = k->shape[1];
  a->S = k->shape[2];
  a->Ev = v->shape[3];
  if (k->shape[0] != a->B || v->shape[0] != a->B || v->shape[1] != a->Hk ||
      v->shape[2] != a->S || k->shape[3] != a->E)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: shapes of q (B, H, L, E), k (B, Hk, S, E), v (B, Hk, S, Ev) disagree", name);
  if (a->Hk == 0 ? a->H != 0 : a->H % a->Hk != 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: the number of query heads (%lld) must be a multiple of key/value heads "
                   "(%lld)",
                   name, (long long)a->H, (long long)a->Hk);
  a->group = a->Hk ? a->H / a->Hk : 1;
  if (a->E > NRT_ATTENTION_MAX_HEAD_DIM || a->Ev > NRT_ATTENTION_MAX_HEAD_DIM)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: head dimensions above %d are not supported", name,
                   NRT_ATTENTION_MAX_HEAD_DIM);
  if (a->mask) {
    const nrt_tensor_view *m = a->mask;
    if (m->ndim != 4 || m->shape[0] != a->B || m->shape[1] != a->H || m->shape[2] != a->L ||
        m->shape[3] != a->S)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the mask must be (B, H, L, S), broadcast",
                     name);
    if (m->dtype != NRT_BOOL && !nrt_dtype_is_floating(m->dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: the mask must be bool or floating, got %s", name,
                     nrt_dtype_name(m->dtype));
  }
  a->scale = (float)scalar_f(op, 0);
  a->causal = scalar_f(op, 1) != 0;
  double p = scalar_f(op, 2);
  if (!(p >= 0 && p <= 1))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: dropout_p %g is outside [0, 1]", name, p);
  a->dropout = p > 0;
  double t = ceil((1 - p) * 0x1p32);
  a->keep_all = t >= 0x1p32;
  a->threshold = a->keep_all ? UINT32_MAX : (uint32_t)t;
  a->keep_scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
  a->stream.seed = (uint64_t)op->scalars[3].i;
  a->stream.offset = (uint64_t)op->scalars[4].i;
  return NRT_SUCCESS;
}

/* ---- loading and storing ---------------------------------------------------- */

/* Row r of item (b, h), computed here rather than through the exported
 * rt_attn_item: a call through the PLT per row otherwise. */
static const char *elem_ptr(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r) {
  return (const char *)v->data +
         (b * v->strides[0] + h * v->strides[1] + r * v->strides[2]) * (int64_t)rt_dtype_size(v->dtype);
}

const char *rt_attn_item(const nrt_tensor_view *v, int64_t b, int64_t h) { return elem_ptr(v, b, h, 0); }

/* n elements of dtype d at p (element stride st) as floats at out[c * os]. */
static void read_floats(const char *p, nrt_dtype d, int64_t st, int64_t n, float *out,
                        int64_t os) {
  switch (d) {
    case NRT_FLOAT32:
      if (st == 1 && os == 1) {
        memcpy(out, p, (size_t)n * sizeof(float));
      } else {
        for (int64_t c = 0; c < n; c++) out[c * os] = ((const float *)p)[c * st];
      }
      break;
    case NRT_BFLOAT16:
      for (int64_t c = 0; c < n; c++) out[c * os] = rt_bfloat16_to_float(((const uint16_t *)p)[c * st]);
      break;
    case NRT_FLOAT16:
      for (int64_t c = 0; c < n; c++) out[c * os] = rt_half_to_float(((const uint16_t *)p)[c * st]);
      break;
    case NRT_FLOAT64:
      for (int64_t c = 0; c < n; c++) out[c * os] = (float)((const double *)p)[c * st];
      break;
    case NRT_BOOL: /* a mask: true attends (0), false does not (-inf) */
      for (int64_t c = 0; c < n; c++) out[c * os] = ((const uint8_t *)p)[c * st] ? 0.0f : -INFINITY;
      break;
    default:
      break; /* rejected by rt_attn_parse */
  }
}

void rt_attn_load(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                  int64_t nc, float *dst, int64_t ld, int64_t pad_rows) {
  for (int64_t r = 0; r < nr; r++) {
    read_floats(elem_ptr(v, b, h, r0 + r), v->dtype, v->strides[3], nc, dst + r * ld, 1);
    memset(dst + r * ld + nc, 0, (size_t)(ld - nc) * sizeof(float));
  }
  if (pad_rows > nr) memset(dst + nr * ld, 0, (size_t)((pad_rows - nr) * ld) * sizeof(float));
}

const float *rt_attn_direct(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t ncols,
                            int as_b, int64_t *ld) {
  if (v->dtype != NRT_FLOAT32 || v->strides[3] != 1) return NULL;
  const float *p = (const float *)elem_ptr(v, b, h, 0);
  *ld = v->strides[2];
  if (as_b && (ncols % 16 || *ld % 16 || (uintptr_t)p % 64)) return NULL;
  return p;
}

typedef float rt_v4f __attribute__((vector_size(16)));
typedef int32_t rt_v4i __attribute__((vector_size(16)));

/* dst[c * ld + r] = src[r * rs + c] for r, c < 4, on 4-float vectors. */
static void transpose4(const float *src, int64_t rs, float *dst, int64_t ld) {
  rt_v4f x0, x1, x2, x3;
  memcpy(&x0, src, 16), memcpy(&x1, src + rs, 16);
  memcpy(&x2, src + 2 * rs, 16), memcpy(&x3, src + 3 * rs, 16);
  rt_v4f t0 = __builtin_shuffle(x0, x1, (rt_v4i){0, 4, 1, 5});
  rt_v4f t1 = __builtin_shuffle(x0, x1, (rt_v4i){2, 6, 3, 7});
  rt_v4f t2 = __builtin_shuffle(x2, x3, (rt_v4i){0, 4, 1, 5});
  rt_v4f t3 = __builtin_shuffle(x2, x3, (rt_v4i){2, 6, 3, 7});
  rt_v4f y0 = __builtin_shuffle(t0, t2, (rt_v4i){0, 1, 4, 5});
  rt_v4f y1 = __builtin_shuffle(t0, t2, (rt_v4i){2, 3, 6, 7});
  rt_v4f y2 = __builtin_shuffle(t1, t3, (rt_v4i){0, 1, 4, 5});
  rt_v4f y3 = __builtin_shuffle(t1, t3, (rt_v4i){2, 3, 6, 7});
  memcpy(dst, &y0, 16), memcpy(dst + ld, &y1, 16);
  memcpy(dst + 2 * ld, &y2, 16), memcpy(dst + 3 * ld, &y3, 16);
}

void rt_attn_load_t(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                    int64_t nc, float *dst, int64_t ld, int64_t pad_c) {
  if (v->dtype == NRT_FLOAT32 && nr > 0) { /* the common case without a call per row */
    const float *base = (const float *)elem_ptr(v, b, h, r0);
    int64_t rs = v->strides[2], cs = v->strides[3];
    int64_t r4 = cs == 1 ? nr & ~(int64_t)3 : 0, c4 = nc & ~(int64_t)3;
    for (int64_t r = 0; r < r4; r += 4) /* 4 x 4 blocks through shuffles */
      for (int64_t c = 0; c < c4; c += 4) transpose4(base + r * rs + c, rs, dst + c * ld + r, ld);
    for (int64_t c = 0; c < nc; c++) { /* the rest one by one */
      const float *src = base + c * cs;
      float *d = dst + c * ld;
      for (int64_t r = c < c4 ? r4 : 0; r < nr; r++) d[r] = src[r * rs];
    }
  } else {
    for (int64_t r = 0; r < nr; r++)
      read_floats(elem_ptr(v, b, h, r0 + r), v->dtype, v->strides[3], nc, dst + r, ld);
  }
  if (nr < ld)
    for (int64_t c = 0; c < nc; c++) memset(dst + c * ld + nr, 0, (size_t)(ld - nr) * sizeof(float));
  if (pad_c > nc) memset(dst + nc * ld, 0, (size_t)((pad_c - nc) * ld) * sizeof(float));
}

/* A contiguous bfloat16 row, vectorised. */
RT_SIMD_VOID(bf16_row, (const float *s, int64_t n, uint16_t *p), (s, n, p)) {
  for (int64_t c = 0; c < n; c++) p[c] = rt_bfloat16_from_float(s[c]);
}

void rt_attn_store(const nrt_tensor_view *v, int64_t b, int64_t h, int64_t r0, int64_t nr,
                   int64_t c0, int64_t nc, const float *src, int64_t ld) {
  int64_t st = v->strides[3];
  for (int64_t r = 0; r < nr; r++) {
    char *p = (char *)elem_ptr(v, b, h, r0 + r) + c0 * st * (int64_t)rt_dtype_size(v->dtype);
    const float *s = src + r * ld;
    switch (v->dtype) {
      case NRT_FLOAT32:
        if (st == 1) {
          memcpy(p, s, (size_t)nc * sizeof(float));
        } else {
          for (int64_t c = 0; c < nc; c++) ((float *)p)[c * st] = s[c];
        }
        break;
      case NRT_BFLOAT16:
        if (st == 1) {
          bf16_row(s, nc, (uint16_t *)p);
        } else {
          for (int64_t c = 0; c < nc; c++) ((uint16_t *)p)[c * st] = rt_bfloat16_from_float(s[c]);
        }
        break;
      case NRT_FLOAT16:
        for (int64_t c = 0; c < nc; c++) ((uint16_t *)p)[c * st] = rt_half_from_float(s[c]);
        break;
      default:
        break;
    }
  }
}

/* ---- bias and dropout of a block --------------------------------------------- */

int rt_attn_bias(const rt_attn *a, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0,
                 int64_t nk, float *bias, int64_t ld, int transposed) {
  int causal = a->causal && k0 + nk - 1 > q0;
  int64_t cols = transposed ? nq : nk; /* valid columns of a bias row */
  if (!a->mask && !causal && cols == ld) return 0;
  int64_t rows = transposed ? nk : nq;
  if (a->mask) {
    /* mask row i holds keys j: read it into row i (or column i) */
    for (int64_t i = 0; i < nq; i++)
      read_floats(elem_ptr(a->mask, b, h, q0 + i) + k0 * a->mask->strides[3] *
                                                        (int64_t)rt_dtype_size(a->mask->dtype),
                  a->mask->dtype, a->mask->strides[3], nk, transposed ? bias + i : bias + i * ld,
                  transposed ? ld : 1);
  } else {
    for (int64_t r = 0; r < rows; r++) memset(bias + r * ld, 0, (size_t)cols * sizeof(float));
  }
  for (int64_t r = 0; r < rows; r++) {
    float *row = bias + r * ld;
    for (int64_t c = cols; c < ld; c++) row[c] = -INFINITY;
  }
  if (causal)
    for (int64_t i = 0; i < nq; i++)
      for (int64_t j = 0; j < nk; j++)
        if (k0 + j > q0 + i) bias[transposed ? j * ld + i : i * ld + j] = -INFINITY;
  return 1;
}

void rt_attn_dropout(const rt_attn *a, int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0,
                     int64_t nk, float *z, int64_t ld, int transposed) {
  uint32_t words[RT_ATTN_BK > RT_ATTN_BQ ? RT_ATTN_BK : RT_ATTN_BQ];
  int64_t rows = transposed ? nk : nq;
  memset(z, 0, (size_t)(rows * ld) * sizeof(float));
  for (int64_t i = 0; i < nq; i++) {
    uint64_t first = (uint64_t)(((b * a->H + h) * a->L + q0 + i) * a->S + k0);
    rt_philox_words(&a->stream, first, nk, words);
    for (int64_t j = 0; j < nk; j++) {
      float f = (words[j] < a->threshold || a->keep_all) ? a->keep_scale : 0.0f;
      z[transposed ? j * ld + i : i * ld + j] = f;
    }
  }
}

/* ---- the tile product ------------------------------------------------------------- */

static inline int64_t clamp_to(int64_t x, int64_t n) { return x < 0 ? 0 : x > n ? n : x; }

/* The tile product at each ISA level's vector width (attention_gemm_impl.h):
 * 16 floats for AVX-512, 8 for AVX2, 4 for the baseline, so that a tile's
 * accumulators stay in registers (16-float vectors on AVX2 are lowered to
 * pieces through the stack and ran 10-20 times slower). Each element of C
 * is summed over p in the same order at every width. */
typedef float rt_v8f __attribute__((vector_size(32)));
#define ATTN_GEMM_NAME gemm_strided_v16
#define ATTN_VEC rt_v16f
#define ATTN_W 16
#include "ops/attention/attention_gemm_impl.h"
#define ATTN_GEMM_NAME gemm_strided_v8
#define ATTN_VEC rt_v8f
#define ATTN_W 8
#include "ops/attention/attention_gemm_impl.h"
#define ATTN_GEMM_NAME gemm_strided_v4
#define ATTN_VEC rt_v4f
#define ATTN_W 4
#include "ops/attention/attention_gemm_impl.h"

#define ATTN_GEMM_PARAMS                                                                          \
  int64_t m, int64_t n, int64_t k, const float *A, int64_t ra, int64_t ca, const float *B,      \
      int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w
#define ATTN_GEMM_ARGS m, n, k, A, ra, ca, B, ldb, C, ldc, w

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("arch=x86-64-v4"))) RT_ATTN_FMA static void gemm_avx512(ATTN_GEMM_PARAMS) {
  gemm_strided_v16(ATTN_GEMM_ARGS);
}
__attribute__((target("arch=x86-64-v3"))) RT_ATTN_FMA static void gemm_avx2(ATTN_GEMM_PARAMS) {
  gemm_strided_v8(ATTN_GEMM_ARGS);
}
#endif
RT_ATTN_FMA static void gemm_baseline(ATTN_GEMM_PARAMS) { gemm_strided_v4(ATTN_GEMM_ARGS); }

/* A's element (i, p) at A[i * ra + p * ca]: the scalars broadcast from A
 * cost the same whichever way A is laid out, so A^T B needs no transpose. */
static void gemm_strided(ATTN_GEMM_PARAMS) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  nrt_isa isa = rt_isa();
  if (isa == NRT_ISA_AVX512) {
    gemm_avx512(ATTN_GEMM_ARGS);
    return;
  }
  if (isa == NRT_ISA_AVX2) {
    gemm_avx2(ATTN_GEMM_ARGS);
    return;
  }
#endif
  gemm_baseline(ATTN_GEMM_ARGS);
}

void rt_attn_gemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                  int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w) {
  gemm_strided(m, n, k, A, lda, 1, B, ldb, C, ldc, w);
}

void rt_attn_gemm_at(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float *C, int64_t ldc, const rt_attn_win *w) {
  gemm_strided(m, n, k, A, 1, lda, B, ldb, C, ldc, w);
}

/* ---- rows ------------------------------------------------------------------------- */

RT_SIMD_DEFINE(, , void, , rt_attn_row_scale, (float *x, int64_t n, float s), (x, n, s)) {
  for (int64_t j = 0; j < n; j++) x[j] *= s;
}

float *rt_attn_alloc(int64_t n) {
  size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
  return aligned_alloc(64, bytes ? bytes : 64);
}
