/* The shape-family kernels against plain reference twins written here:
 * SORT, SORT_ROWS, TOPK and KTHVALUE against qsort of indices with
 * PyTorch's order (NaN above every number, -0.0 == 0.0, ties by index);
 * the radix sort of pairs against qsort of (key, index); CAT, ROLL,
 * TRIL/TRIU, ARANGE, LINSPACE and UNIQUE_* against direct index formulas. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/shape/sort_keys.h"

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}

static void *host(void *dev) { return nrt_device_to_host(dev); }

static nrt_tensor_view view(void *data, nrt_dtype dtype, int ndim, const int64_t *shape,
                            const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  for (int d = 0; d < ndim; d++) v.shape[d] = shape[d], v.strides[d] = strides[d];
  return v;
}

static nrt_tensor_view contiguous(void *data, nrt_dtype dtype, int ndim, const int64_t *shape) {
  int64_t strides[NRT_MAX_DIMS], s = 1;
  for (int d = ndim - 1; d >= 0; d--) strides[d] = s, s *= shape[d];
  return view(data, dtype, ndim, shape, strides);
}

static nrt_op make_op(nrt_op_code code, int outputs, int nops, const nrt_tensor_view *ops,
                      int nscalars, const int64_t *scalars) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = outputs;
  op.num_operands = nops;
  for (int k = 0; k < nops; k++) op.operands[k] = ops[k];
  op.num_scalars = nscalars;
  for (int k = 0; k < nscalars; k++) op.scalars[k].i = scalars[k];
  return op;
}

static const nrt_dtype all_dtypes[] = {NRT_BOOL,  NRT_UINT8,   NRT_INT8,     NRT_INT16,   NRT_INT32,
                                       NRT_INT64, NRT_FLOAT16, NRT_BFLOAT16, NRT_FLOAT32, NRT_FLOAT64};
#define NUM_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* ---- the reference order --------------------------------------------------------- */

static double half_value(uint16_t h) {
  double sign = h & 0x8000 ? -1.0 : 1.0;
  int exp = (h >> 10) & 31, mant = h & 1023;
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  if (exp == 0) return sign * ldexp(mant, -24);
  return sign * ldexp(1024 + mant, exp - 25);
}

static double bf16_value(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* A value to order by: integers exactly as int64 (uint64 shifted by 2^63 into
 * int64's range, order kept), floats as double. */
typedef struct ref_key {
  int is_float, is_nan;
  double f;
  int64_t i;
} ref_key;

static ref_key ref_key_of(nrt_dtype t, const char *p) {
  ref_key k = {0, 0, 0, 0};
  switch (t) {
    case NRT_BOOL:
    case NRT_UINT8: k.i = *(const uint8_t *)p; break;
    case NRT_INT8: k.i = *(const int8_t *)p; break;
    case NRT_INT16: k.i = *(const int16_t *)p; break;
    case NRT_INT32: k.i = *(const int32_t *)p; break;
    case NRT_INT64: k.i = *(const int64_t *)p; break;
    case NRT_UINT16: k.i = *(const uint16_t *)p; break;
    case NRT_UINT32: k.i = *(const uint32_t *)p; break;
    case NRT_UINT64: k.i = (int64_t)(*(const uint64_t *)p ^ (1ull << 63)); break;
    case NRT_FLOAT16: k.is_float = 1, k.f = half_value(*(const uint16_t *)p); break;
    case NRT_BFLOAT16: k.is_float = 1, k.f = bf16_value(*(const uint16_t *)p); break;
    case NRT_FLOAT32: k.is_float = 1, k.f = *(const float *)p; break;
    default: k.is_float = 1, k.f = *(const double *)p; break;
  }
  k.is_nan = k.is_float && isnan(k.f);
  return k;
}

/* -1, 0, 1 in PyTorch's ascending order (NaN last, all NaNs equal). */
static int ref_compare(ref_key a, ref_key b) {
  if (a.is_nan || b.is_nan) return a.is_nan - b.is_nan;
  if (a.is_float) return a.f < b.f ? -1 : a.f > b.f;
  return a.i < b.i ? -1 : a.i > b.i;
}

static struct {
  nrt_dtype dtype;
  const char *base;
  int64_t stride;
  int descending;
} order_ctx;

static int compare_indices(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  int c = ref_compare(ref_key_of(order_ctx.dtype, order_ctx.base + a * order_ctx.stride),
                      ref_key_of(order_ctx.dtype, order_ctx.base + b * order_ctx.stride));
  if (order_ctx.descending) c = -c;
  return c ? c : (a > b) - (a < b);
}

/* The stable sort of a slice: idx receives the sorted element indices. */
static void ref_sort(nrt_dtype t, const char *base, int64_t stride, int64_t n, int descending,
                     int64_t *idx) {
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  order_ctx.dtype = t, order_ctx.base = base, order_ctx.stride = stride;
  order_ctx.descending = descending;
  qsort(idx, (size_t)n, sizeof *idx, compare_indices);
}

/* Random elements of dtype t with many ties, and NaN, infinities and both
 * zeros among the floats. */
static void fill_random(nrt_dtype t, void *data, int64_t n, int range) {
  size_t size = nrt_dtype_size(t);
  for (int64_t i = 0; i < n; i++) {
    char *p = (char *)data + i * (int64_t)size;
    int64_t v = (int64_t)(rng() % (uint64_t)(2 * range + 1)) - range;
    uint64_t r = rng() % 64;
    switch (t) {
      case NRT_BOOL: *(uint8_t *)p = (uint8_t)(v & 1); break;
      case NRT_UINT8: *(uint8_t *)p = (uint8_t)(r == 0 ? 255 : v + range); break;
      case NRT_INT8: *(int8_t *)p = (int8_t)(r == 0 ? -128 : r == 1 ? 127 : v); break;
      case NRT_INT16: *(int16_t *)p = (int16_t)(r == 0 ? INT16_MIN : v * 300); break;
      case NRT_INT32: *(int32_t *)p = (int32_t)(r == 0 ? INT32_MIN : r == 1 ? INT32_MAX : v * 70000); break;
      case NRT_INT64: *(int64_t *)p = r == 0 ? INT64_MIN : r == 1 ? INT64_MAX : v * 5000000000ll; break;
      /* unsigned: the largest value and values with the top bit set (above every signed one) */
      case NRT_UINT16: *(uint16_t *)p = (uint16_t)(r == 0 ? 0xffffu : r < 8 ? 0x8000u + (uint16_t)(v + range)
                                                                  : (uint16_t)(v + range)); break;
      case NRT_UINT32: *(uint32_t *)p = r == 0 ? 0xffffffffu : r < 8 ? 0x80000000u + (uint32_t)(v + range)
                                                                   : (uint32_t)(v + range); break;
      case NRT_UINT64: *(uint64_t *)p = r == 0 ? ~0ull : r < 8 ? (1ull << 63) + (uint64_t)(v + range)
                                                          : (uint64_t)(v + range); break;
      case NRT_FLOAT16:
      case NRT_BFLOAT16: {
        static const uint16_t f16[] = {0x7e00, 0xfe01, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x8001};
        static const uint16_t b16[] = {0x7fc0, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x8001};
        uint16_t h = (uint16_t)rng();
        if (r < 8) h = (t == NRT_FLOAT16 ? f16 : b16)[r];
        else if (r < 40) h = (uint16_t)((h & 0x8003) | (t == NRT_FLOAT16 ? 0x3c00 : 0x3f80));
        *(uint16_t *)p = h;
        break;
      }
      case NRT_FLOAT32: {
        float f = r == 0 ? NAN : r == 1 ? -NAN : r == 2 ? INFINITY : r == 3 ? -INFINITY
                : r == 4 ? 0.0f : r == 5 ? -0.0f : (float)v * 0.25f;
        *(float *)p = f;
        break;
      }
      default: {
        double f = r == 0 ? NAN : r == 1 ? -NAN : r == 2 ? INFINITY : r == 4 ? 0.0 : r == 5 ? -0.0
                 : (double)v * 0.125;
        *(double *)p = f;
        break;
      }
    }
  }
}

static int same_bits(const void *a, const void *b, size_t size) { return memcmp(a, b, size) == 0; }

/* ---- radix sort of pairs ------------------------------------------------------------ */

typedef struct pair64 {
  uint64_t key;
  uint32_t idx;
} pair64;

static int compare_pairs(const void *pa, const void *pb) {
  const pair64 *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

static void check_radix(int64_t n, int wide, int parallel, int spread) {
  uint64_t *keys64 = malloc((size_t)n * 8 * 2);
  uint32_t *keys32 = malloc((size_t)n * 4 * 2);
  uint32_t *idx = malloc((size_t)n * 4 * 2);
  pair64 *ref = malloc((size_t)n * sizeof *ref);
  for (int64_t i = 0; i < n; i++) {
    uint64_t k = rng();
    if (spread == 0) k %= 5;                  /* heavy ties */
    if (spread == 1) k = (k % 3) << 40 | (k & 0xffff); /* uniform middle bytes */
    if (!wide) k &= 0xffffffffu;
    keys64[i] = k, keys32[i] = (uint32_t)k, idx[i] = (uint32_t)i;
    ref[i].key = k, ref[i].idx = (uint32_t)i;
  }
  qsort(ref, (size_t)n, sizeof *ref, compare_pairs);
  int half = wide ? rt_sort_pairs64(keys64, idx, keys64 + n, idx + n, n, parallel)
                  : rt_sort_pairs32(keys32, idx, keys32 + n, idx + n, n, parallel);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t k = wide ? keys64[half * n + i] : keys32[half * n + i];
    bad += k != ref[i].key || idx[half * n + i] != ref[i].idx;
  }
  if (bad) fprintf(stderr, "radix n=%lld wide=%d parallel=%d spread=%d: %lld wrong\n",
                   (long long)n, wide, parallel, spread, (long long)bad);
  CHECK(bad == 0);
  free(keys64), free(keys32), free(idx), free(ref);
}

static void test_radix_sort_matches_qsort(void) {
  static const int64_t sizes[] = {0, 1, 2, 47, 48, 49, 300, 16384, 16385, 70000, 300000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int wide = 0; wide < 2; wide++)
      for (int spread = 0; spread < 3; spread++)
        check_radix(sizes[s], wide, sizes[s] > 60000, spread);
}

/* ---- SORT ------------------------------------------------------------------------------ */

/* Sorts a rows x n tensor along dim (0 or 1) and compares every slice. */
static void check_sort(nrt_dtype t, int64_t rows, int64_t n, int dim, int descending) {
  size_t size = nrt_dtype_size(t);
  int64_t shape[2] = {dim == 1 ? rows : n, dim == 1 ? n : rows}, numel = rows * n;
  void *in = dev_alloc((size_t)numel * size), *values = dev_alloc((size_t)numel * size);
  void *indices = dev_alloc((size_t)numel * 8);
  fill_random(t, host(in), numel, 40);
  nrt_tensor_view ops[3] = {contiguous(values, t, 2, shape), contiguous(indices, NRT_INT64, 2, shape),
                            contiguous(in, t, 2, shape)};
  int64_t scalars[2] = {dim, descending};
  nrt_op op = make_op(NRT_OP_SORT, 2, 3, ops, 2, scalars);
  CHECK_OK(nrt_op_execute(&op));
  int64_t *ref = malloc((size_t)n * 8), bad = 0;
  int64_t slice_stride = dim == 1 ? n : 1, elem_stride = dim == 1 ? 1 : rows;
  for (int64_t r = 0; r < rows; r++) {
    const char *base = (const char *)host(in) + r * slice_stride * (int64_t)size;
    ref_sort(t, base, elem_stride * (int64_t)size, n, descending, ref);
    for (int64_t j = 0; j < n; j++) {
      int64_t at = r * slice_stride + j * elem_stride;
      const char *got = (const char *)host(values) + at * (int64_t)size;
      bad += ((int64_t *)host(indices))[at] != ref[j] ||
             !same_bits(got, base + ref[j] * elem_stride * (int64_t)size, size);
    }
  }
  if (bad) fprintf(stderr, "sort %s rows=%lld n=%lld dim=%d desc=%d: %lld wrong\n", nrt_dtype_name(t),
                   (long long)rows, (long long)n, dim, descending, (long long)bad);
  CHECK(bad == 0);
  free(ref);
  nrt_free(in), nrt_free(values), nrt_free(indices);
}

static void test_sort_matches_reference(void) {
  for (size_t d = 0; d < NUM_DTYPES; d++)
    for (int desc = 0; desc < 2; desc++) {
      check_sort(all_dtypes[d], 7, 1, 1, desc);
      check_sort(all_dtypes[d], 5, 45, 1, desc);
      check_sort(all_dtypes[d], 3, 1000, 0, desc);
      check_sort(all_dtypes[d], 40, 300, 0, desc); /* tiles of 16 neighbouring slices */
      check_sort(all_dtypes[d], 2, 20000, 1, desc);
    }
  check_sort(NRT_FLOAT32, 1, 140000, 1, 0); /* one long slice, sorted by the whole pool */
  check_sort(NRT_INT64, 2, 140000, 1, 1);
  check_sort(NRT_BFLOAT16, 1, 140000, 1, 1);
}

static void test_sort_rejects_bad_descriptors(void) {
  int64_t shape[1] = {4};
  void *a = dev_alloc(64), *b = dev_alloc(64);
  nrt_tensor_view ops[3] = {contiguous(a, NRT_FLOAT32, 1, shape), contiguous(b, NRT_INT64, 1, shape),
                            contiguous(a, NRT_FLOAT32, 1, shape)};
  int64_t bad_dim[2] = {1, 0};
  nrt_op op = make_op(NRT_OP_SORT, 2, 3, ops, 2, bad_dim);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  ops[1].dtype = NRT_INT32;
  int64_t dim0[2] = {0, 0};
  op = make_op(NRT_OP_SORT, 2, 3, ops, 2, dim0);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(a), nrt_free(b);
}

/* ---- SORT_ROWS ---------------------------------------------------------------------------- */

static struct {
  nrt_dtype dtype;
  const char *base;
  int64_t row_stride, col_stride, m;
} rows_ctx;

static int compare_rows(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  for (int64_t k = 0; k < rows_ctx.m; k++) {
    const char *x = rows_ctx.base + a * rows_ctx.row_stride + k * rows_ctx.col_stride;
    const char *y = rows_ctx.base + b * rows_ctx.row_stride + k * rows_ctx.col_stride;
    int c = ref_compare(ref_key_of(rows_ctx.dtype, x), ref_key_of(rows_ctx.dtype, y));
    if (c) return c;
  }
  return (a > b) - (a < b);
}

static void check_sort_rows(nrt_dtype t, int64_t n, int64_t m, int transposed) {
  size_t size = nrt_dtype_size(t);
  int64_t shape[2] = {n, m}, strides[2] = {transposed ? 1 : m, transposed ? n : 1};
  void *in = dev_alloc((size_t)(n * m) * size), *values = dev_alloc((size_t)(n * m) * size);
  void *indices = dev_alloc((size_t)n * 8);
  fill_random(t, host(in), n * m, 2);
  nrt_tensor_view ops[3] = {contiguous(values, t, 2, shape), contiguous(indices, NRT_INT64, 1, shape),
                            view(in, t, 2, shape, strides)};
  nrt_op op = make_op(NRT_OP_SORT_ROWS, 2, 3, ops, 0, NULL);
  CHECK_OK(nrt_op_execute(&op));
  int64_t *ref = malloc((size_t)n * 8), bad = 0;
  for (int64_t i = 0; i < n; i++) ref[i] = i;
  rows_ctx.dtype = t, rows_ctx.base = host(in), rows_ctx.m = m;
  rows_ctx.row_stride = strides[0] * (int64_t)size, rows_ctx.col_stride = strides[1] * (int64_t)size;
  qsort(ref, (size_t)n, sizeof *ref, compare_rows);
  for (int64_t i = 0; i < n; i++) {
    bad += ((int64_t *)host(indices))[i] != ref[i];
    for (int64_t k = 0; k < m; k++)
      bad += !same_bits((char *)host(values) + (i * m + k) * (int64_t)size,
                        rows_ctx.base + ref[i] * rows_ctx.row_stride + k * rows_ctx.col_stride, size);
  }
  if (bad) fprintf(stderr, "sort_rows %s n=%lld m=%lld: %lld wrong\n", nrt_dtype_name(t),
                   (long long)n, (long long)m, (long long)bad);
  CHECK(bad == 0);
  free(ref);
  nrt_free(in), nrt_free(values), nrt_free(indices);
}

static void test_sort_rows_matches_reference(void) {
  for (size_t d = 0; d < NUM_DTYPES; d++) {
    check_sort_rows(all_dtypes[d], 1, 3, 0);
    check_sort_rows(all_dtypes[d], 200, 3, 0);
    check_sort_rows(all_dtypes[d], 90, 4, 1);
  }
  check_sort_rows(NRT_INT32, 20000, 2, 0);
}

/* cpu_order: rows holding NaN in the order PyTorch's CPU unique(dim=0) gave
 * them (torch 2.13 on Linux, recorded here): a NaN orders neither way. */
static void check_sort_rows_cpu_order(int64_t n, int64_t m, const float *rows, const int64_t *want) {
  int64_t shape[2] = {n, m};
  void *in = dev_alloc((size_t)(n * m) * 4), *values = dev_alloc((size_t)(n * m) * 4), *indices = dev_alloc((size_t)n * 8);
  memcpy(host(in), rows, (size_t)(n * m) * 4);
  nrt_tensor_view ops[3] = {contiguous(values, NRT_FLOAT32, 2, shape), contiguous(indices, NRT_INT64, 1, shape),
                            contiguous(in, NRT_FLOAT32, 2, shape)};
  int64_t cpu_order[1] = {1};
  nrt_op op = make_op(NRT_OP_SORT_ROWS, 2, 3, ops, 1, cpu_order);
  CHECK_OK(nrt_op_execute(&op));
  for (int64_t i = 0; i < n; i++) CHECK(((int64_t *)host(indices))[i] == want[i]);
  nrt_free(in), nrt_free(values), nrt_free(indices);
}

static void test_sort_rows_cpu_order_with_nan(void) {
  const float rows6[12] = {NAN, 1, 0, 1, NAN, 1, 0, 1, 1, NAN, 0, 0};
  const int64_t want6[6] = {5, 0, 1, 2, 3, 4};
  check_sort_rows_cpu_order(6, 2, rows6, want6);
  const float rows7[7] = {NAN, 1, NAN, 0, 1, NAN, -1};
  const int64_t want7[7] = {0, 1, 2, 3, 4, 5, 6}; /* insertion sort: nothing passes a NaN */
  check_sort_rows_cpu_order(7, 1, rows7, want7);
  const float rows5[10] = {2, NAN, 1, 1, 2, NAN, 0, 3, 2, 0};
  const int64_t want5[5] = {3, 1, 0, 2, 4};
  check_sort_rows_cpu_order(5, 2, rows5, want5);
}

/* ---- TOPK and KTHVALUE ---------------------------------------------------------------------- */

static void check_topk(nrt_dtype t, int64_t n, int64_t k, int largest) {
  size_t size = nrt_dtype_size(t);
  int64_t rows = 3, in_shape[2] = {rows, n}, out_shape[2] = {rows, k};
  void *in = dev_alloc((size_t)(rows * n) * size), *values = dev_alloc((size_t)(rows * k) * size);
  void *indices = dev_alloc((size_t)(rows * k) * 8);
  fill_random(t, host(in), rows * n, 20);
  nrt_tensor_view ops[3] = {contiguous(values, t, 2, out_shape),
                            contiguous(indices, NRT_INT64, 2, out_shape), contiguous(in, t, 2, in_shape)};
  int64_t scalars[3] = {1, k, largest};
  nrt_op op = make_op(NRT_OP_TOPK, 2, 3, ops, 3, scalars);
  CHECK_OK(nrt_op_execute(&op));
  int64_t *ref = malloc((size_t)n * 8), bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    const char *base = (const char *)host(in) + r * n * (int64_t)size;
    ref_sort(t, base, (int64_t)size, n, largest, ref);
    for (int64_t j = 0; j < k; j++) {
      const char *got = (const char *)host(values) + (r * k + j) * (int64_t)size;
      bad += ((int64_t *)host(indices))[r * k + j] != ref[j] ||
             !same_bits(got, base + ref[j] * (int64_t)size, size);
    }
  }
  if (bad) fprintf(stderr, "topk %s n=%lld k=%lld largest=%d: %lld wrong\n", nrt_dtype_name(t),
                   (long long)n, (long long)k, largest, (long long)bad);
  CHECK(bad == 0);
  free(ref);
  nrt_free(in), nrt_free(values), nrt_free(indices);
}

static void test_topk_matches_reference(void) {
  for (size_t d = 1; d < NUM_DTYPES; d++)
    for (int largest = 0; largest < 2; largest++) {
      check_topk(all_dtypes[d], 1, 1, largest);
      check_topk(all_dtypes[d], 50, 0, largest);
      check_topk(all_dtypes[d], 50, 7, largest);
      check_topk(all_dtypes[d], 50, 50, largest);
      check_topk(all_dtypes[d], 3000, 100, largest); /* radix select */
      check_topk(all_dtypes[d], 3000, 20, largest);  /* heap of the best k */
      check_topk(all_dtypes[d], 5000, 1, largest);
    }
}

/* The index KTHVALUE must pick in one slice (see shape.h for the modes). */
static int64_t ref_kth_index(nrt_dtype t, const char *base, int64_t n, int64_t k, int mode) {
  size_t size = nrt_dtype_size(t);
  int64_t nans = 0, first_nan = -1;
  for (int64_t i = 0; i < n; i++)
    if (ref_key_of(t, base + i * (int64_t)size).is_nan) {
      if (first_nan < 0) first_nan = i;
      nans++;
    }
  if (mode == 1 && nans) return first_nan;
  if (mode == 2 && nans == n) return first_nan;
  if (mode) k = (n - (mode == 2 ? nans : 0) - 1) / 2 + 1;
  int64_t *ref = malloc((size_t)n * 8);
  ref_sort(t, base, (int64_t)size, n, 0, ref);
  int64_t idx = ref[k - 1];
  free(ref);
  return idx;
}

static void test_kthvalue_matches_reference(void) {
  for (size_t d = 1; d < NUM_DTYPES; d++)
    for (int mode = 0; mode < 3; mode++) {
      nrt_dtype t = all_dtypes[d];
      size_t size = nrt_dtype_size(t);
      int64_t rows = 6, n = 31, in_shape[2] = {rows, n}, out_shape[2] = {rows, 1};
      void *in = dev_alloc((size_t)(rows * n) * size), *values = dev_alloc((size_t)rows * size);
      void *indices = dev_alloc((size_t)rows * 8);
      fill_random(t, host(in), rows * n, 6);
      for (int64_t i = 0; i < n && nrt_dtype_is_floating(t); i++) { /* row 1 is all NaN */
        char *p = (char *)host(in) + (n + i) * (int64_t)size;
        if (t == NRT_FLOAT16) *(uint16_t *)p = 0x7e00;
        else if (t == NRT_BFLOAT16) *(uint16_t *)p = 0xffc0;
        else if (t == NRT_FLOAT32) *(float *)p = NAN;
        else *(double *)p = NAN;
      }
      for (int64_t k = 1; k <= n; k += 6) {
        nrt_tensor_view ops[3] = {contiguous(values, t, 2, out_shape),
                                  contiguous(indices, NRT_INT64, 2, out_shape),
                                  contiguous(in, t, 2, in_shape)};
        int64_t scalars[3] = {1, k, mode};
        nrt_op op = make_op(NRT_OP_KTHVALUE, 2, 3, ops, 3, scalars);
        CHECK_OK(nrt_op_execute(&op));
        for (int64_t r = 0; r < rows; r++) {
          const char *base = (const char *)host(in) + r * n * (int64_t)size;
          int64_t want = ref_kth_index(t, base, n, k, mode);
          CHECK(((int64_t *)host(indices))[r] == want);
          CHECK(same_bits((char *)host(values) + r * (int64_t)size, base + want * (int64_t)size, size));
        }
      }
      nrt_free(in), nrt_free(values), nrt_free(indices);
    }
}

/* ---- MODE ---------------------------------------------------------------------------------------- */

/* The mode by counting, O(n^2): the most frequent value, the smallest of
 * equally frequent ones, at its last index; each NaN counts once (it equals
 * nothing), so NaN wins only a slice of NaNs, at the first of them. */
static int64_t ref_mode_index(nrt_dtype t, const char *base, int64_t n) {
  size_t size = nrt_dtype_size(t);
  int64_t best = -1, best_count = 0;
  for (int64_t i = 0; i < n; i++) {
    ref_key v = ref_key_of(t, base + i * (int64_t)size);
    int64_t count = 0, last = i;
    for (int64_t j = 0; j < n && !v.is_nan; j++)
      if (ref_compare(v, ref_key_of(t, base + j * (int64_t)size)) == 0) count++, last = j;
    if (v.is_nan) count = 1;
    int better = best < 0 || count > best_count ||
                 (count == best_count && ref_compare(v, ref_key_of(t, base + best * (int64_t)size)) < 0);
    if (better) best = last, best_count = count;
  }
  return best;
}

static void test_mode_matches_reference(void) {
  for (size_t d = 0; d < NUM_DTYPES; d++) {
    nrt_dtype t = all_dtypes[d];
    size_t size = nrt_dtype_size(t);
    int64_t rows = 7, n = 45, in_shape[2] = {n, rows}, out_shape[2] = {1, rows};
    void *in = dev_alloc((size_t)(rows * n) * size), *values = dev_alloc((size_t)rows * size);
    void *indices = dev_alloc((size_t)rows * 8);
    fill_random(t, host(in), rows * n, 4);
    /* The mode along dim 0 of an (n, rows) tensor: slices are strided. */
    nrt_tensor_view ops[3] = {contiguous(values, t, 2, out_shape),
                              contiguous(indices, NRT_INT64, 2, out_shape),
                              contiguous(in, t, 2, in_shape)};
    int64_t scalars[1] = {0};
    nrt_op op = make_op(NRT_OP_MODE, 2, 3, ops, 1, scalars);
    CHECK_OK(nrt_op_execute(&op));
    char *column = malloc((size_t)n * size);
    for (int64_t r = 0; r < rows; r++) {
      for (int64_t i = 0; i < n; i++)
        memcpy(column + i * (int64_t)size, (char *)host(in) + (i * rows + r) * (int64_t)size, size);
      int64_t want = ref_mode_index(t, column, n);
      CHECK(((int64_t *)host(indices))[r] == want);
      CHECK(same_bits((char *)host(values) + r * (int64_t)size, column + want * (int64_t)size, size));
    }
    free(column);
    /* A wrong output shape is refused, naming the op. */
    int64_t bad_shape[2] = {2, rows};
    ops[0] = contiguous(values, t, 2, bad_shape);
    op = make_op(NRT_OP_MODE, 2, 3, ops, 1, scalars);
    CHECK(nrt_op_execute(&op) == NRT_ERROR_INVALID_ARGUMENT);
    nrt_free(in), nrt_free(values), nrt_free(indices);
  }
}

/* ---- CAT ---------------------------------------------------------------------------------------- */

/* Cats k inputs of shape (2, s_j, 3) along dim 1 (or (s_j, 2, 3) along 0 ...),
 * contiguous or with a transposed input, and compares with the formula. */
static void check_cat(int dim, int k, int transposed_input, nrt_dtype in_dtype) {
  int64_t sizes[7], total = 0;
  void *in[7];
  nrt_tensor_view ops[8];
  for (int j = 0; j < k; j++) sizes[j] = (j * 2 + 1) % 4, total += sizes[j];
  int64_t out_shape[3] = {2, 3, 4};
  out_shape[dim] = total;
  int64_t numel = out_shape[0] * out_shape[1] * out_shape[2];
  void *out = dev_alloc((size_t)numel * 8);
  ops[0] = contiguous(out, NRT_INT64, 3, out_shape);
  for (int j = 0; j < k; j++) {
    int64_t shape[3] = {out_shape[0], out_shape[1], out_shape[2]};
    shape[dim] = sizes[j];
    int64_t n = shape[0] * shape[1] * shape[2];
    in[j] = dev_alloc((size_t)n * nrt_dtype_size(in_dtype));
    ops[j + 1] = contiguous(in[j], in_dtype, 3, shape);
    if (transposed_input && j == 1) { /* same elements, dims 0 and 2 walked column-major */
      ops[j + 1].strides[0] = 1;
      ops[j + 1].strides[1] = shape[0];
      ops[j + 1].strides[2] = shape[0] * shape[1];
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t v = (j + 1) * 1000 + i;
      if (in_dtype == NRT_INT64) ((int64_t *)host(in[j]))[i] = v;
      else ((int32_t *)host(in[j]))[i] = (int32_t)v;
    }
  }
  int64_t scalars[2] = {dim, 0};
  nrt_op op = make_op(NRT_OP_CAT, 1, k + 1, ops, 2, scalars);
  CHECK_OK(nrt_op_execute(&op));
  int64_t bad = 0;
  for (int64_t a = 0; a < out_shape[0]; a++)
    for (int64_t b = 0; b < out_shape[1]; b++)
      for (int64_t c = 0; c < out_shape[2]; c++) {
        int64_t pos[3] = {a, b, c}, at = pos[dim], j = 0;
        while (at >= sizes[j]) at -= sizes[j++];
        pos[dim] = at;
        const nrt_tensor_view *v = &ops[j + 1];
        int64_t off = pos[0] * v->strides[0] + pos[1] * v->strides[1] + pos[2] * v->strides[2];
        int64_t want = in_dtype == NRT_INT64 ? ((int64_t *)host(in[j]))[off]
                                             : ((int32_t *)host(in[j]))[off];
        bad += ((int64_t *)host(out))[(a * out_shape[1] + b) * out_shape[2] + c] != want;
      }
  CHECK(bad == 0);
  nrt_free(out);
  for (int j = 0; j < k; j++) nrt_free(in[j]);
}

static void test_cat_matches_reference(void) {
  for (int dim = 0; dim < 3; dim++)
    for (int k = 1; k <= 7; k++) {
      check_cat(dim, k, 0, NRT_INT64);
      check_cat(dim, k, 1, NRT_INT64);
      check_cat(dim, k, 0, NRT_INT32); /* converted while copied */
    }
}

static void test_cat_large_fast_path(void) {
  /* Two inputs of 3 MiB each: the flat range is split across threads. */
  int64_t rows = 3, a = 1 << 18, b = 3, out_shape[2] = {rows, a + b};
  int64_t sa[2] = {rows, a}, sb[2] = {rows, b};
  float *in_a = dev_alloc((size_t)(rows * a) * 4), *in_b = dev_alloc((size_t)(rows * b) * 4);
  float *out = dev_alloc((size_t)(rows * (a + b)) * 4);
  for (int64_t i = 0; i < rows * a; i++) ((float *)host(in_a))[i] = (float)i;
  for (int64_t i = 0; i < rows * b; i++) ((float *)host(in_b))[i] = -(float)i;
  nrt_tensor_view ops[3] = {contiguous(out, NRT_FLOAT32, 2, out_shape), contiguous(in_a, NRT_FLOAT32, 2, sa),
                            contiguous(in_b, NRT_FLOAT32, 2, sb)};
  int64_t scalars[2] = {1, 0};
  nrt_op op = make_op(NRT_OP_CAT, 1, 3, ops, 2, scalars);
  CHECK_OK(nrt_op_execute(&op));
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < a + b; c++) {
      float want = c < a ? (float)(r * a + c) : -(float)(r * b + c - a);
      bad += ((float *)host(out))[r * (a + b) + c] != want;
    }
  CHECK(bad == 0);
  scalars[1] = 1; /* offset 1: the inputs overrun the output */
  op = make_op(NRT_OP_CAT, 1, 3, ops, 2, scalars);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(in_a), nrt_free(in_b), nrt_free(out);
}

/* ---- ROLL, TRIL, TRIU ------------------------------------------------------------------------------ */

static void test_roll_matches_reference(void) {
  int64_t shape[3] = {3, 4, 5}, n = 60;
  int32_t *in = dev_alloc(n * 4), *out = dev_alloc(n * 4);
  for (int64_t i = 0; i < n; i++) ((int32_t *)host(in))[i] = (int32_t)i;
  static const int64_t cases[][6] = {{0, 1, -1, 0, -1, 0}, {2, -7, -1, 0, -1, 0}, {0, 2, 1, 3, 2, -1},
                                     {1, 4, -1, 0, -1, 0}, {0, 3, 2, 5, -1, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t scalars[6], shift[3] = {0, 0, 0};
    int ns = 0;
    for (int p = 0; p < 3 && cases[c][2 * p] >= 0; p++) {
      scalars[ns++] = cases[c][2 * p];
      scalars[ns++] = cases[c][2 * p + 1];
      shift[cases[c][2 * p]] += cases[c][2 * p + 1];
    }
    nrt_tensor_view ops[2] = {contiguous(out, NRT_INT32, 3, shape), contiguous(in, NRT_INT32, 3, shape)};
    nrt_op op = make_op(NRT_OP_ROLL, 1, 2, ops, ns, scalars);
    CHECK_OK(nrt_op_execute(&op));
    int64_t bad = 0;
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 4; j++)
        for (int64_t k = 0; k < 5; k++) {
          int64_t si = ((i - shift[0]) % 3 + 3) % 3, sj = ((j - shift[1]) % 4 + 4) % 4;
          int64_t sk = ((k - shift[2]) % 5 + 5) % 5;
          bad += ((int32_t *)host(out))[(i * 4 + j) * 5 + k] != (si * 4 + sj) * 5 + sk;
        }
    CHECK(bad == 0);
  }
  nrt_free(in), nrt_free(out);
}

static void test_tril_triu_match_reference(void) {
  int64_t shape[3] = {2, 4, 5}, n = 40;
  int16_t *in = dev_alloc(n * 2), *out = dev_alloc(n * 2);
  for (int upper = 0; upper < 2; upper++)
    for (int64_t diag = -5; diag <= 6; diag++)
      for (int in_place = 0; in_place < 2; in_place++) {
        for (int64_t i = 0; i < n; i++) ((int16_t *)host(in))[i] = (int16_t)(i + 1);
        int16_t *dst = in_place ? in : out;
        /* The input read column-major within each matrix. */
        int64_t strides[3] = {20, 1, 4};
        nrt_tensor_view ops[2] = {in_place ? view(dst, NRT_INT16, 3, shape, strides)
                                           : contiguous(dst, NRT_INT16, 3, shape),
                                  view(in, NRT_INT16, 3, shape, strides)};
        nrt_op op = make_op(upper ? NRT_OP_TRIU : NRT_OP_TRIL, 1, 2, ops, 1, &diag);
        CHECK_OK(nrt_op_execute(&op));
        int64_t bad = 0;
        for (int64_t b = 0; b < 2; b++)
          for (int64_t r = 0; r < 4; r++)
            for (int64_t c = 0; c < 5; c++) {
              int keep = upper ? c - r >= diag : c - r <= diag;
              int64_t src = b * 20 + r + c * 4;
              int64_t at = in_place ? src : (b * 4 + r) * 5 + c;
              bad += ((int16_t *)host(dst))[at] != (keep ? src + 1 : 0);
            }
        CHECK(bad == 0);
      }
  nrt_free(in), nrt_free(out);
}

static void test_triangle_indices_match_reference(void) {
  static const int64_t cases[][3] = {{4, 4, 0}, {3, 5, 1}, {5, 3, -2}, {3, 3, 9}, {3, 3, -9}, {1, 6, 2}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int upper = 0; upper < 2; upper++) {
      int64_t rows = cases[k][0], cols = cases[k][1], offset = cases[k][2], count = 0;
      int64_t ref[2][64];
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
          if (upper ? c - r >= offset : c - r <= offset) ref[0][count] = r, ref[1][count++] = c;
      int64_t shape[2] = {2, count};
      int64_t *out = dev_alloc((size_t)(2 * count) * 8);
      nrt_tensor_view v = contiguous(out, NRT_INT64, 2, shape);
      nrt_op op = make_op(upper ? NRT_OP_TRIU_INDICES : NRT_OP_TRIL_INDICES, 1, 1, &v, 3, cases[k]);
      CHECK_OK(nrt_op_execute(&op));
      for (int64_t i = 0; i < count; i++)
        CHECK(((int64_t *)host(out))[i] == ref[0][i] && ((int64_t *)host(out))[count + i] == ref[1][i]);
      v.shape[1] = count + 1; /* a wrong size is refused */
      op = make_op(upper ? NRT_OP_TRIU_INDICES : NRT_OP_TRIL_INDICES, 1, 1, &v, 3, cases[k]);
      CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
      nrt_free(out);
    }
}

/* ---- ARANGE, LINSPACE ------------------------------------------------------------------------------ */

static void test_arange_linspace_match_formulas(void) {
  int64_t n = 100001, shape[1] = {n};
  float *f = dev_alloc((size_t)n * 4);
  int32_t *i32 = dev_alloc((size_t)n * 4);
  nrt_tensor_view fv = contiguous(f, NRT_FLOAT32, 1, shape), iv = contiguous(i32, NRT_INT32, 1, shape);
  nrt_op op = make_op(NRT_OP_ARANGE, 1, 1, &fv, 2, (int64_t[]){0, 0});
  op.scalars[0].is_float = op.scalars[1].is_float = 1;
  op.scalars[0].f = -2.5, op.scalars[1].f = 0.001;
  CHECK_OK(nrt_op_execute(&op));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += ((float *)host(f))[i] != (float)(-2.5 + 0.001 * (double)i);
  CHECK(bad == 0);
  op = make_op(NRT_OP_ARANGE, 1, 1, &iv, 2, (int64_t[]){7, -3});
  CHECK_OK(nrt_op_execute(&op));
  bad = 0;
  for (int64_t i = 0; i < n; i++) bad += ((int32_t *)host(i32))[i] != (int32_t)(7 - 3 * i);
  CHECK(bad == 0);
  op = make_op(NRT_OP_LINSPACE, 1, 1, &fv, 2, (int64_t[]){0, 0});
  op.scalars[0].is_float = op.scalars[1].is_float = 1;
  op.scalars[0].f = -3.0, op.scalars[1].f = 7.0;
  CHECK_OK(nrt_op_execute(&op));
  bad = 0;
  float step = 10.0f / (float)(n - 1);
  for (int64_t i = 0; i < n; i++) {
    float want = i < n / 2 ? -3.0f + step * (float)i : 7.0f - step * (float)(n - 1 - i);
    bad += ((float *)host(f))[i] != want;
  }
  CHECK(bad == 0);
  CHECK(((float *)host(f))[0] == -3.0f && ((float *)host(f))[n - 1] == 7.0f);
  op = make_op(NRT_OP_LINSPACE, 1, 1, &iv, 2, (int64_t[]){-10, 10});
  CHECK_OK(nrt_op_execute(&op));
  bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double s = 20.0 / (double)(n - 1);
    double want = i < n / 2 ? -10.0 + s * (double)i : 10.0 - s * (double)(n - 1 - i);
    bad += ((int32_t *)host(i32))[i] != (int32_t)want;
  }
  CHECK(bad == 0);
  iv.dtype = NRT_BOOL;
  op = make_op(NRT_OP_ARANGE, 1, 1, &iv, 2, (int64_t[]){0, 1});
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED);
  nrt_free(f), nrt_free(i32);
}

/* ---- UNIQUE_SCAN, UNIQUE_COLLECT ---------------------------------------------------------------------- */

static void check_unique(nrt_dtype t, int64_t n, int with_perm) {
  size_t size = nrt_dtype_size(t);
  int64_t shape[1] = {n}, scalar_shape[1] = {0};
  void *in = dev_alloc((size_t)n * size), *inverse = dev_alloc((size_t)n * 8);
  void *perm = dev_alloc((size_t)n * 8), *count = dev_alloc(8);
  fill_random(t, host(in), n, 3);
  for (int64_t i = 0; i < n; i++) ((int64_t *)host(perm))[i] = n - 1 - i;
  nrt_tensor_view ops[4] = {view(count, NRT_INT64, 0, scalar_shape, scalar_shape),
                            contiguous(inverse, NRT_INT64, 1, shape), contiguous(in, t, 1, shape),
                            contiguous(perm, NRT_INT64, 1, shape)};
  int64_t scalars[2] = {1, with_perm};
  nrt_op op = make_op(NRT_OP_UNIQUE_SCAN, 2, 4, ops, 2, scalars);
  CHECK_OK(nrt_op_execute(&op));
  /* Reference runs: a new run wherever an element is not == its predecessor. */
  int64_t runs = 0, bad = 0;
  int64_t *starts = malloc((size_t)(n + 1) * 8);
  for (int64_t i = 0; i < n; i++) {
    const char *p = (const char *)host(in) + i * (int64_t)size;
    int start = i == 0;
    if (!start) {
      ref_key a = ref_key_of(t, p - size), b = ref_key_of(t, p);
      start = a.is_nan || b.is_nan || ref_compare(a, b) != 0;
    }
    if (start) starts[runs++] = i;
    int64_t at = with_perm ? n - 1 - i : i;
    bad += ((int64_t *)host(inverse))[at] != runs - 1;
  }
  starts[runs] = n;
  CHECK(*(int64_t *)host(count) == runs);
  CHECK(bad == 0);
  int64_t u_shape[1] = {runs};
  void *values = dev_alloc((size_t)runs * size), *counts = dev_alloc((size_t)runs * 8);
  nrt_tensor_view cops[3] = {contiguous(values, t, 1, u_shape), contiguous(counts, NRT_INT64, 1, u_shape),
                             contiguous(in, t, 1, shape)};
  int64_t has_counts = 1;
  op = make_op(NRT_OP_UNIQUE_COLLECT, 2, 3, cops, 1, &has_counts);
  CHECK_OK(nrt_op_execute(&op));
  bad = 0;
  for (int64_t r = 0; r < runs; r++)
    bad += !same_bits((char *)host(values) + r * (int64_t)size,
                      (char *)host(in) + starts[r] * (int64_t)size, size) ||
           ((int64_t *)host(counts))[r] != starts[r + 1] - starts[r];
  CHECK(bad == 0);
  cops[0].shape[0] = cops[1].shape[0] = runs + 1; /* a wrong run count is refused */
  op = make_op(NRT_OP_UNIQUE_COLLECT, 2, 3, cops, 1, &has_counts);
  if (runs > 0) CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  free(starts);
  nrt_free(in), nrt_free(inverse), nrt_free(perm), nrt_free(count), nrt_free(values), nrt_free(counts);
}

static void test_unique_matches_reference(void) {
  for (size_t d = 0; d < NUM_DTYPES; d++) {
    check_unique(all_dtypes[d], 1, 0);
    check_unique(all_dtypes[d], 200, 1);
  }
  check_unique(NRT_INT32, 200000, 1); /* several blocks */
}

static void test_unique_scan_rejects_a_bad_permutation(void) {
  int64_t n = 4, shape[1] = {4}, none[1] = {0};
  void *in = dev_alloc(32), *inverse = dev_alloc(32), *perm = dev_alloc(32), *count = dev_alloc(8);
  memset(host(in), 0, 32);
  for (int64_t i = 0; i < n; i++) ((int64_t *)host(perm))[i] = i == 2 ? 9 : i;
  nrt_tensor_view ops[4] = {view(count, NRT_INT64, 0, none, none), contiguous(inverse, NRT_INT64, 1, shape),
                            contiguous(in, NRT_INT64, 1, shape), contiguous(perm, NRT_INT64, 1, shape)};
  int64_t scalars[2] = {1, 1};
  nrt_op op = make_op(NRT_OP_UNIQUE_SCAN, 2, 4, ops, 2, scalars);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  CHECK(strstr(nrt_last_error(), "unique_scan") != NULL);
  nrt_free(in), nrt_free(inverse), nrt_free(perm), nrt_free(count);
}

/* ---- uint16/32/64: SORT and SORT_ROWS in unsigned order, unique's runs by bits -------------------- */

static void test_sort_and_unique_of_wide_unsigned(void) {
  const nrt_dtype types[] = {NRT_UINT16, NRT_UINT32, NRT_UINT64};
  for (int k = 0; k < 3; k++) {
    for (int desc = 0; desc < 2; desc++) {
      check_sort(types[k], 5, 45, 1, desc);
      check_sort(types[k], 3, 1000, 0, desc);
      check_sort(types[k], 1, 70000, 1, desc); /* one long slice */
    }
    check_sort_rows(types[k], 200, 3, 0);
    check_sort_rows(types[k], 200, 3, 1);
    check_unique(types[k], 200, 1);
  }
}

int main(void) {
  RUN(test_radix_sort_matches_qsort);
  RUN(test_sort_matches_reference);
  RUN(test_sort_rejects_bad_descriptors);
  RUN(test_sort_rows_matches_reference);
  RUN(test_sort_rows_cpu_order_with_nan);
  RUN(test_topk_matches_reference);
  RUN(test_kthvalue_matches_reference);
  RUN(test_mode_matches_reference);
  RUN(test_cat_matches_reference);
  RUN(test_cat_large_fast_path);
  RUN(test_roll_matches_reference);
  RUN(test_tril_triu_match_reference);
  RUN(test_triangle_indices_match_reference);
  RUN(test_arange_linspace_match_formulas);
  RUN(test_unique_matches_reference);
  RUN(test_unique_scan_rejects_a_bad_permutation);
  RUN(test_sort_and_unique_of_wide_unsigned);
  return CHECK_MAIN_RESULT();
}
