/* The index kernels against plain reference twins written here.
 *
 * Each reference walks the positions of the op's shape in row-major order
 * with an odometer and does one element at a time, stating the op's
 * definition directly: gathers read src at the position plus index * step,
 * scatters combine in row-major order of the source (which is what the
 * kernels promise when the source is contiguous, for any thread count),
 * nonzero and masked_select scan in row-major order. Element values are
 * converted with scalar_types.h, whose conversions test_ops checks
 * exhaustively; data is integer-valued where the reference would otherwise
 * need the kernel's exact rounding sequence.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "child.h"
#include "ops/engine/scalar_types.h"

/* ---- buffers, views, values ------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int64_t rng_range(int64_t lo, int64_t hi) { return lo + (int64_t)(rng() % (uint64_t)(hi - lo)); }

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(nrt_malloc(0, bytes ? bytes : 1, &p));
  return p;
}
static void *host(void *dev) { return nrt_device_to_host(dev); }

static nrt_tensor_view view(void *data, nrt_dtype t, int ndim, const int64_t *shape, const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = t;
  v.ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

static double get(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_BOOL: case NRT_UINT8: return *(const uint8_t *)p;
    case NRT_INT8: return *(const int8_t *)p;
    case NRT_INT16: return *(const int16_t *)p;
    case NRT_INT32: return *(const int32_t *)p;
    case NRT_INT64: return (double)*(const int64_t *)p;
    case NRT_FLOAT16: return rt_half_to_float(*(const uint16_t *)p);
    case NRT_BFLOAT16: return rt_bfloat16_to_float(*(const uint16_t *)p);
    case NRT_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

static void set(nrt_dtype t, void *p, double v) {
  switch (t) {
    case NRT_BOOL: *(uint8_t *)p = v != 0; break;
    case NRT_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case NRT_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
    case NRT_INT16: *(int16_t *)p = (int16_t)(int64_t)v; break;
    case NRT_INT32: *(int32_t *)p = (int32_t)(int64_t)v; break;
    case NRT_INT64: *(int64_t *)p = (int64_t)v; break;
    case NRT_FLOAT16: *(uint16_t *)p = rt_half_from_float((float)v); break;
    case NRT_BFLOAT16: *(uint16_t *)p = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
  }
}

static int is_float(nrt_dtype t) { return t >= NRT_FLOAT16; }

/* Small integer values (exact in every dtype; bool: 0/1). */
static void fill_random(nrt_dtype t, void *p, int64_t n) {
  size_t size = nrt_dtype_size(t);
  for (int64_t i = 0; i < n; i++)
    set(t, (char *)p + i * (int64_t)size, t == NRT_BOOL ? (double)(rng() & 1) : (double)rng_range(t == NRT_UINT8 ? 0 : -4, 5));
}

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* Advances a row-major coordinate; returns 0 after the last position. */
static int next(int ndim, const int64_t *shape, int64_t *coord) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++coord[d] < shape[d]) return 1;
    coord[d] = 0;
  }
  return 0;
}

static int64_t offset_of(int ndim, const int64_t *coord, const int64_t *strides) {
  int64_t o = 0;
  for (int d = 0; d < ndim; d++) o += coord[d] * strides[d];
  return o;
}

static int64_t index_value(const nrt_tensor_view *idx, const int64_t *coord) {
  const char *p = (const char *)host(idx->data) +
                  offset_of(idx->ndim, coord, idx->strides) * (int64_t)nrt_dtype_size(idx->dtype);
  return idx->dtype == NRT_INT32 ? *(const int32_t *)p : *(const int64_t *)p;
}

static nrt_op index_op(nrt_op_code code, int k) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_operands = 3 + k;
  op.num_outputs = 1;
  return op;
}

static nrt_status launch_and_sync(const nrt_op *op) {
  nrt_stream_t s;
  nrt_status st = nrt_stream_get_default(0, &s);
  if (!st) st = nrt_launch(s, op);
  if (!st) st = nrt_stream_synchronize(s);
  return st;
}

/* ---- gather-like: reference ------------------------------------------- */

/* out[p] = src[p + sum idx_j[p] * step_j]; returns the first bad index value
 * in row-major order through *bad (and 0), or 1 when all are good. */
static int ref_gather(const nrt_op *op, int wrap, void *out_host, int64_t *bad) {
  const nrt_tensor_view *out = &op->operands[0], *src = &op->operands[1], *g = &op->operands[2];
  int k = op->num_operands - 3, ndim = out->ndim;
  size_t size = nrt_dtype_size(out->dtype);
  int64_t coord[NRT_MAX_DIMS] = {0};
  if (numel_of(ndim, out->shape) == 0) return 1;
  do {
    int64_t off = offset_of(ndim, coord, src->strides);
    for (int j = 0; j < k; j++) {
      int64_t v = index_value(&op->operands[3 + j], coord);
      if (wrap && v < 0) v += g->shape[j];
      if (v < 0 || v >= g->shape[j]) {
        *bad = index_value(&op->operands[3 + j], coord);
        return 0;
      }
      off += v * g->strides[j];
    }
    memcpy((char *)out_host + offset_of(ndim, coord, out->strides) * (int64_t)size,
           (const char *)host(src->data) + off * (int64_t)size, size);
  } while (next(ndim, out->shape, coord));
  return 1;
}

static int same_bytes(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* gather along dim of src [a, b] (optionally transposed in memory) with an
 * index of shape [a, c] (c <= b when dim is 1). */
static void check_gather(nrt_dtype t, nrt_dtype it, int dim, int transposed, int64_t a, int64_t b) {
  int64_t c = dim == 1 ? rng_range(1, b + 3) : b;
  int64_t rows = dim == 0 ? rng_range(1, a + 3) : a;
  size_t size = nrt_dtype_size(t), isize = nrt_dtype_size(it);
  void *src = dev_alloc((size_t)(a * b) * size), *out = dev_alloc((size_t)(rows * c) * size);
  void *idx = dev_alloc((size_t)(rows * c) * isize);
  fill_random(t, host(src), a * b);
  int64_t bound = dim == 0 ? a : b;
  for (int64_t i = 0; i < rows * c; i++) set(it, (char *)host(idx) + i * (int64_t)isize, (double)rng_range(0, bound));
  int64_t src_strides[2] = {transposed ? 1 : b, transposed ? a : 1};
  int64_t shape[2] = {rows, c}, contiguous[2] = {c, 1};
  int64_t restrided[2] = {dim == 0 ? 0 : src_strides[0], dim == 1 ? 0 : src_strides[1]};
  nrt_op op = index_op(NRT_OP_GATHER, 1);
  op.operands[0] = view(out, t, 2, shape, contiguous);
  op.operands[1] = view(src, t, 2, shape, restrided);
  op.operands[2] = view(src, t, 1, &bound, &src_strides[dim]);
  op.operands[3] = view(idx, it, 2, shape, contiguous);
  op.num_scalars = 1;
  op.scalars[0].i = dim;
  CHECK_OK(nrt_op_execute(&op));
  void *want = calloc((size_t)(rows * c), size);
  int64_t bad;
  CHECK(ref_gather(&op, 0, want, &bad));
  CHECK(same_bytes(host(out), want, (size_t)(rows * c) * size));
  free(want);
  nrt_free(src), nrt_free(out), nrt_free(idx);
}

static void test_gather_matches_reference(void) {
  for (int t = 0; t < NRT_UINT16; t++)
    for (int dim = 0; dim < 2; dim++)
      for (int tr = 0; tr < 2; tr++) {
        check_gather((nrt_dtype)t, NRT_INT64, dim, tr, rng_range(1, 9), rng_range(1, 9));
        check_gather((nrt_dtype)t, NRT_INT32, dim, tr, 300, 200); /* above the parallel grain */
      }
}

/* x[i, j] on x [a, b, c] with i [n, 1] and j [m] broadcast to [n, m],
 * negative indices included; also rows (index_select along dim 0). */
static void test_index_multi_and_rows(void) {
  const int64_t a = 7, b = 5, c = 3, n = 4, m = 6;
  for (int t = 0; t < NRT_UINT16; t++) {
    size_t size = nrt_dtype_size((nrt_dtype)t);
    void *x = dev_alloc((size_t)(a * b * c) * size), *out = dev_alloc((size_t)(n * m * c) * size);
    void *i = dev_alloc(n * 8), *j = dev_alloc(m * 8);
    fill_random((nrt_dtype)t, host(x), a * b * c);
    for (int64_t q = 0; q < n; q++) ((int64_t *)host(i))[q] = rng_range(-a, a);
    for (int64_t q = 0; q < m; q++) ((int64_t *)host(j))[q] = rng_range(-b, b);
    int64_t shape[3] = {n, m, c}, out_strides[3] = {m * c, c, 1}, x_r[3] = {0, 0, 1};
    int64_t gshape[2] = {a, b}, gstrides[2] = {b * c, c};
    int64_t i_strides[3] = {1, 0, 0}, j_strides[3] = {0, 1, 0};
    nrt_op op = index_op(NRT_OP_INDEX, 2);
    op.operands[0] = view(out, (nrt_dtype)t, 3, shape, out_strides);
    op.operands[1] = view(x, (nrt_dtype)t, 3, shape, x_r);
    op.operands[2] = view(x, (nrt_dtype)t, 2, gshape, gstrides);
    op.operands[3] = view(i, NRT_INT64, 3, shape, i_strides);
    op.operands[4] = view(j, NRT_INT64, 3, shape, j_strides);
    op.num_scalars = 2;
    op.scalars[1].i = 1;
    CHECK_OK(nrt_op_execute(&op));
    void *want = calloc((size_t)(n * m * c), size);
    int64_t bad;
    CHECK(ref_gather(&op, 1, want, &bad));
    CHECK(same_bytes(host(out), want, (size_t)(n * m * c) * size));
    free(want);
    nrt_free(x), nrt_free(out), nrt_free(i), nrt_free(j);
  }
  /* Rows of a table: the prefetching fast path, over several threads. */
  const int64_t rows = 5000, width = 37, count = 3000;
  for (int t = 0; t < NRT_UINT16; t++) {
    size_t size = nrt_dtype_size((nrt_dtype)t);
    void *x = dev_alloc((size_t)(rows * width) * size), *out = dev_alloc((size_t)(count * width) * size);
    void *idx = dev_alloc(count * 4);
    fill_random((nrt_dtype)t, host(x), rows * width);
    for (int64_t q = 0; q < count; q++) ((int32_t *)host(idx))[q] = (int32_t)rng_range(0, rows);
    int64_t shape[2] = {count, width}, contiguous[2] = {width, 1}, x_r[2] = {0, 1}, idx_strides[2] = {1, 0};
    int64_t row_stride = width;
    nrt_op op = index_op(NRT_OP_INDEX_SELECT, 1);
    op.operands[0] = view(out, (nrt_dtype)t, 2, shape, contiguous);
    op.operands[1] = view(x, (nrt_dtype)t, 2, shape, x_r);
    op.operands[2] = view(x, (nrt_dtype)t, 1, &rows, &row_stride);
    op.operands[3] = view(idx, NRT_INT32, 2, shape, idx_strides);
    op.num_scalars = 1;
    CHECK_OK(nrt_op_execute(&op));
    void *want = calloc((size_t)(count * width), size);
    int64_t bad;
    CHECK(ref_gather(&op, 0, want, &bad));
    CHECK(same_bytes(host(out), want, (size_t)(count * width) * size));
    free(want);
    nrt_free(x), nrt_free(out), nrt_free(idx);
  }
}

/* A bad index: the status, a message naming the op, the first bad value
 * and the bound; through a stream the error is sticky, later work is
 * skipped, and the stream works again once the error is cleared. */
static void test_gather_out_of_range(void) {
  const int64_t n = 100000, bound = 10;
  void *src = dev_alloc(2 * bound * 4), *out = dev_alloc(2 * n * 4), *idx = dev_alloc(n * 8), *flag = dev_alloc(4);
  for (int64_t q = 0; q < n; q++) ((int64_t *)host(idx))[q] = q % bound;
  ((int64_t *)host(idx))[70000] = 12;
  ((int64_t *)host(idx))[90000] = -1;
  int64_t one = 1, zero = 0;
  for (int rows_path = 0; rows_path < 2; rows_path++) {
    nrt_op op = index_op(NRT_OP_INDEX_SELECT, 1);
    op.operands[0] = view(out, NRT_FLOAT32, 1, &n, &one);
    op.operands[1] = view(src, NRT_FLOAT32, 1, &n, &zero);
    op.operands[2] = view(src, NRT_FLOAT32, 1, &bound, &one);
    op.operands[3] = view(idx, NRT_INT64, 1, &n, &one);
    op.num_scalars = 1;
    if (rows_path) { /* [n, 2]: rows of two elements, the row fast path */
      int64_t shape[2] = {n, 2}, s_out[2] = {2, 1}, s_src[2] = {0, 1}, s_idx[2] = {1, 0}, two = 2;
      op.operands[0] = view(out, NRT_FLOAT32, 2, shape, s_out);
      op.operands[1] = view(src, NRT_FLOAT32, 2, shape, s_src);
      op.operands[2] = view(src, NRT_FLOAT32, 1, &bound, &two);
      op.operands[3] = view(idx, NRT_INT64, 2, shape, s_idx);
    }
    CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
    CHECK(strcmp(nrt_last_error(), "index_select: index 12 is out of bounds for dimension 0 with size 10") == 0);
    nrt_op fill;
    memset(&fill, 0, sizeof fill);
    fill.code = NRT_OP_FILL;
    fill.num_operands = 1;
    fill.num_scalars = 1;
    fill.operands[0] = view(flag, NRT_INT32, 1, &one, &one);
    fill.scalars[0].i = 7;
    *(int32_t *)host(flag) = 0;
    nrt_stream_t s;
    CHECK_OK(nrt_stream_get_default(0, &s));
    CHECK_OK(nrt_launch(s, &op));
    CHECK_SKIPPED_OR_REFUSED(nrt_launch(s, &fill), NRT_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INDEX_OUT_OF_RANGE);
    CHECK(strncmp(nrt_last_error(), "index_select: index 12 is out of bounds", 39) == 0);
    CHECK(*(int32_t *)host(flag) == 0); /* skipped */
    CHECK_STATUS(nrt_stream_synchronize(s), NRT_ERROR_INDEX_OUT_OF_RANGE); /* still */
    CHECK_OK(nrt_stream_clear_error(s));
    CHECK_OK(launch_and_sync(&fill));
    CHECK(*(int32_t *)host(flag) == 7);
  }
  nrt_free(src), nrt_free(out), nrt_free(idx), nrt_free(flag);
}

/* ---- scatter-like: reference ------------------------------------------- */

static double combine(nrt_dtype t, nrt_index_reduce r, double a, double b, double alpha) {
  if (r == NRT_INDEX_ASSIGN) return b;
  if (t == NRT_BOOL) {
    int x = a != 0, y = b != 0;
    return r == NRT_INDEX_SUM ? (x | (y & (alpha != 0))) : (r == NRT_INDEX_PROD || r == NRT_INDEX_AMIN) ? (x & y) : (x | y);
  }
  switch (r) {
    case NRT_INDEX_SUM: case NRT_INDEX_MEAN: return a + alpha * b;
    case NRT_INDEX_PROD: return a * b;
    case NRT_INDEX_AMAX: return isnan(b) || b > a ? b : a;
    case NRT_INDEX_AMIN: return isnan(b) || b < a ? b : a;
    default: return b;
  }
}

static double identity(nrt_dtype t, nrt_index_reduce r) {
  if (r == NRT_INDEX_PROD) return 1;
  if (r == NRT_INDEX_AMAX) return t == NRT_BOOL ? 0 : is_float(t) ? -INFINITY : t == NRT_UINT8 ? 0 : -1e300;
  if (r == NRT_INDEX_AMIN) return t == NRT_BOOL ? 1 : is_float(t) ? INFINITY : 1e300;
  return 0;
}

/* dst[p + idx[p] * step] = combine(dst, src[p]) over positions p of src in
 * row-major order, with PyTorch's include_self and mean rules. Values are
 * kept in double and stored at the end (data is integer-valued). */
static void ref_scatter(const nrt_op *op, nrt_dtype t, void *dst_host, int64_t dst_numel) {
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1], *g = &op->operands[2];
  nrt_index_reduce r = (nrt_index_reduce)op->scalars[0].i;
  int include_self = op->scalars[1].i != 0;
  double alpha = op->scalars[2].is_float ? op->scalars[2].f : (double)op->scalars[2].i;
  int ndim = dst->ndim, k = op->num_operands - 3;
  size_t size = nrt_dtype_size(t);
  double *acc = malloc((size_t)dst_numel * sizeof *acc);
  int64_t *count = calloc((size_t)dst_numel, sizeof *count);
  for (int64_t e = 0; e < dst_numel; e++) acc[e] = get(t, (char *)dst_host + e * (int64_t)size);
  int64_t coord[NRT_MAX_DIMS] = {0};
  const char *src_host = op->immediate_mask & 2 ? NULL : host(src->data);
  do {
    int64_t off = offset_of(ndim, coord, dst->strides);
    for (int j = 0; j < k; j++) {
      int64_t v = index_value(&op->operands[3 + j], coord);
      if (v < 0) v += g->shape[j];
      off += v * g->strides[j];
    }
    double b = src_host ? get(t, src_host + offset_of(ndim, coord, src->strides) * (int64_t)size)
                        : op->immediates[1].f;
    if (r != NRT_INDEX_ASSIGN && !include_self && count[off] == 0) acc[off] = identity(t, r);
    acc[off] = combine(t, r, acc[off], b, alpha);
    count[off]++;
  } while (next(ndim, dst->shape, coord));
  for (int64_t e = 0; e < dst_numel; e++) {
    double v = acc[e];
    if (r == NRT_INDEX_MEAN && count[e]) {
      v /= (double)(count[e] + include_self);
      if (!is_float(t)) v = floor(v);
    }
    set(t, (char *)dst_host + e * (int64_t)size, v);
  }
  free(acc);
  free(count);
}

/* scatter along dim 0 of dst [a, b] from src [n, b] with index [n, b] full
 * of duplicates; every dtype, reduction and include_self. */
static void test_scatter_reductions(void) {
  const int64_t a = 5, b = 7, n = 23;
  for (int t = 0; t < NRT_UINT16; t++)
    for (int r = NRT_INDEX_ASSIGN; r <= NRT_INDEX_AMIN; r++)
      for (int include_self = 0; include_self < 2; include_self++) {
        if (r == NRT_INDEX_MEAN && t == NRT_BOOL) continue;
        if (r == NRT_INDEX_ASSIGN && !include_self) continue;
        size_t size = nrt_dtype_size((nrt_dtype)t);
        void *dst = dev_alloc((size_t)(a * b) * size), *src = dev_alloc((size_t)(n * b) * size);
        void *idx = dev_alloc((size_t)(n * b) * 8);
        fill_random((nrt_dtype)t, host(dst), a * b);
        fill_random((nrt_dtype)t, host(src), n * b);
        if (r == NRT_INDEX_PROD) /* keep products of ~10 factors finite in float16 */
          for (int64_t q = 0; q < n * b; q++)
            set((nrt_dtype)t, (char *)host(src) + q * (int64_t)size, t == NRT_BOOL ? 1 : (double)rng_range(-2, 3));
        for (int64_t q = 0; q < n * b; q++) ((int64_t *)host(idx))[q] = rng_range(0, a);
        if (r == NRT_INDEX_ASSIGN) /* one writer per destination: no order question */
          for (int64_t q = 0; q < n * b; q++) ((int64_t *)host(idx))[q] = q / b < a ? (q / b + q % b) % a : -1;
        int64_t rows = r == NRT_INDEX_ASSIGN ? a : n;
        void *want = malloc((size_t)(a * b) * size);
        memcpy(want, host(dst), (size_t)(a * b) * size);
        int64_t shape[2] = {rows, b}, contiguous[2] = {b, 1}, dst_r[2] = {0, 1}, step = b;
        nrt_op op = index_op(r == NRT_INDEX_MEAN || r >= NRT_INDEX_AMAX ? NRT_OP_SCATTER_REDUCE : NRT_OP_SCATTER, 1);
        op.operands[0] = view(dst, (nrt_dtype)t, 2, shape, dst_r);
        op.operands[1] = view(src, (nrt_dtype)t, 2, shape, contiguous);
        op.operands[2] = view(dst, (nrt_dtype)t, 1, &a, &step);
        op.operands[3] = view(idx, NRT_INT64, 2, shape, contiguous);
        op.num_scalars = 4;
        op.scalars[0].i = r;
        op.scalars[1].i = include_self;
        op.scalars[2].i = 1;
        ref_scatter(&op, (nrt_dtype)t, want, a * b);
        CHECK_OK(nrt_op_execute(&op));
        int same = same_bytes(host(dst), want, (size_t)(a * b) * size);
        if (!same) fprintf(stderr, "  scatter dtype %s reduce %d include_self %d differs\n",
                           nrt_dtype_name((nrt_dtype)t), r, include_self);
        CHECK(same);
        free(want);
        nrt_free(dst), nrt_free(src), nrt_free(idx);
      }
}

/* index_add with alpha and INDEX_PUT (negative indices wrap, accumulate),
 * both along dim 1 of a transposed destination, plus a value immediate. */
static void test_index_add_and_put(void) {
  const int64_t a = 6, b = 9, n = 40;
  for (int t = 0; t < NRT_UINT16; t++)
    for (int which = 0; which < 3; which++) {
      nrt_dtype dt = (nrt_dtype)t;
      size_t size = nrt_dtype_size(dt);
      void *dst = dev_alloc((size_t)(a * b) * size), *src = dev_alloc((size_t)(a * n) * size), *idx = dev_alloc(n * 8);
      fill_random(dt, host(dst), a * b);
      fill_random(dt, host(src), a * n);
      for (int64_t q = 0; q < n; q++) ((int64_t *)host(idx))[q] = rng_range(which == 0 ? 0 : -b, b);
      void *want = malloc((size_t)(a * b) * size);
      memcpy(want, host(dst), (size_t)(a * b) * size);
      /* dst is [a, b] stored transposed: strides {1, a}. */
      int64_t shape[2] = {a, n}, src_strides[2] = {n, 1}, dst_r[2] = {1, 0}, idx_strides[2] = {0, 1}, step = a;
      nrt_op op = index_op(which == 0 ? NRT_OP_INDEX_ADD : NRT_OP_INDEX_PUT, 1);
      op.operands[0] = view(dst, dt, 2, shape, dst_r);
      op.operands[1] = view(src, dt, 2, shape, src_strides);
      op.operands[2] = view(dst, dt, 1, &b, &step);
      op.operands[3] = view(idx, NRT_INT64, 2, shape, idx_strides);
      op.num_scalars = 4;
      op.scalars[0].i = NRT_INDEX_SUM;
      op.scalars[1].i = 1;
      op.scalars[2].i = which == 0 ? 3 : 1;
      op.scalars[3].i = 1;
      if (which == 2) { /* index_put_ of a value, accumulating */
        int64_t zeros[2] = {0, 0};
        op.operands[1] = view(NULL, dt, 2, shape, zeros);
        op.immediate_mask = 2;
        op.immediates[1].is_float = 1;
        op.immediates[1].f = dt == NRT_BOOL ? 1 : 2;
      }
      /* The reference walks the destination in storage order: its
       * strides are what it reads, so give it dst's element order. */
      ref_scatter(&op, dt, want, a * b);
      CHECK_OK(nrt_op_execute(&op));
      CHECK(same_bytes(host(dst), want, (size_t)(a * b) * size));
      free(want);
      nrt_free(dst), nrt_free(src), nrt_free(idx);
    }
}

/* Sums of random (non-integer) floats with many duplicates, large enough
 * for every thread to own part of the destination: the result must equal a
 * serial row-major walk bit for bit. Run in children with 1 and 3 threads. */
static int scatter_matches_serial_walk(void) {
  const int64_t rows = 20000, width = 16, table = 300;
  void *dst = dev_alloc(table * width * 4), *src = dev_alloc(rows * width * 4), *idx = dev_alloc(rows * 8);
  void *gw = dev_alloc(table * width * 4);
  float *want = malloc(table * width * sizeof *want);
  for (int64_t q = 0; q < rows * width; q++) ((float *)host(src))[q] = (float)(rng() % 100000) / 997.0f;
  for (int64_t q = 0; q < rows; q++) ((int64_t *)host(idx))[q] = rng_range(0, table);
  for (int64_t q = 0; q < table * width; q++) ((float *)host(dst))[q] = want[q] = (float)q / 3.0f;
  for (int64_t q = 0; q < rows; q++) {
    int64_t r = ((int64_t *)host(idx))[q];
    for (int64_t c = 0; c < width; c++) want[r * width + c] += ((float *)host(src))[q * width + c];
  }
  int64_t shape[2] = {rows, width}, contiguous[2] = {width, 1}, dst_r[2] = {0, 1}, idx_strides[2] = {1, 0};
  nrt_op op = index_op(NRT_OP_INDEX_PUT, 1);
  op.operands[0] = view(dst, NRT_FLOAT32, 2, shape, dst_r);
  op.operands[1] = view(src, NRT_FLOAT32, 2, shape, contiguous);
  op.operands[2] = view(dst, NRT_FLOAT32, 1, &table, &width);
  op.operands[3] = view(idx, NRT_INT64, 2, shape, idx_strides);
  op.num_scalars = 4;
  op.scalars[0].i = NRT_INDEX_SUM;
  op.scalars[1].i = 1;
  op.scalars[2].i = 1;
  CHECK_OK(nrt_op_execute(&op));
  CHECK(same_bytes(host(dst), want, table * width * 4));
  /* embedding backward of the same data: the same sums from zero */
  for (int64_t q = 0; q < table * width; q++) want[q] = 0;
  for (int64_t q = 0; q < rows; q++) {
    int64_t r = ((int64_t *)host(idx))[q];
    for (int64_t c = 0; c < width; c++) want[r * width + c] += ((float *)host(src))[q * width + c];
  }
  int64_t gshape[2] = {table, width}, one = 1;
  nrt_op eb;
  memset(&eb, 0, sizeof eb);
  eb.code = NRT_OP_EMBEDDING_DENSE_BACKWARD;
  eb.num_operands = 3;
  eb.num_outputs = 1;
  eb.operands[0] = view(gw, NRT_FLOAT32, 2, gshape, contiguous);
  eb.operands[1] = view(src, NRT_FLOAT32, 2, shape, contiguous);
  eb.operands[2] = view(idx, NRT_INT64, 1, &rows, &one);
  eb.num_scalars = 2;
  eb.scalars[0].i = -1;
  CHECK_OK(nrt_op_execute(&eb));
  CHECK(same_bytes(host(gw), want, table * width * 4));
  free(want);
  nrt_free(dst), nrt_free(src), nrt_free(idx), nrt_free(gw);
  return CHECK_MAIN_RESULT();
}

static void test_scatter_independent_of_threads(void) {
  unsetenv("TORCHNEURON_NUM_THREADS");
  CHECK(child_run("serial_walk", (const char *[]){"TORCHNEURON_NUM_THREADS=1", NULL}) == 0);
  CHECK(child_run("serial_walk", (const char *[]){"TORCHNEURON_NUM_THREADS=3", NULL}) == 0);
}

static void test_scatter_out_of_range(void) {
  const int64_t n = 50, bound = 8, one = 1, zero = 0;
  void *dst = dev_alloc(bound * 4), *src = dev_alloc(n * 4), *idx = dev_alloc(n * 4);
  for (int64_t q = 0; q < n; q++) ((int32_t *)host(idx))[q] = (int32_t)(q % bound);
  ((int32_t *)host(idx))[20] = -9;
  ((int32_t *)host(idx))[30] = 8;
  nrt_op op = index_op(NRT_OP_INDEX_PUT, 1);
  op.operands[0] = view(dst, NRT_FLOAT32, 1, &n, &zero);
  op.operands[1] = view(src, NRT_FLOAT32, 1, &n, &one);
  op.operands[2] = view(dst, NRT_FLOAT32, 1, &bound, &one);
  op.operands[3] = view(idx, NRT_INT32, 1, &n, &one);
  op.num_scalars = 4;
  op.scalars[0].i = NRT_INDEX_SUM;
  op.scalars[1].i = 1;
  op.scalars[2].i = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE); /* -9 wraps to -1: still bad */
  CHECK(strcmp(nrt_last_error(), "index_put: index -9 is out of bounds for dimension 0 with size 8") == 0);
  op.code = NRT_OP_SCATTER_ADD;
  ((int32_t *)host(idx))[20] = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
  CHECK(strcmp(nrt_last_error(), "scatter_add: index 8 is out of bounds for dimension 0 with size 8") == 0);
  nrt_free(dst), nrt_free(src), nrt_free(idx);
}

/* ---- nonzero, masked_select, index_bounds -------------------------------- */

/* x [a, b] viewed transposed ([b, a]), values mostly zero, with -0.0 and
 * NaN for floats; a * b above one chunk so several chunks count in parallel. */
static void test_nonzero_family(void) {
  const int64_t a = 300, b = 190, n = a * b;
  for (int t = 0; t < NRT_UINT16; t++) {
    nrt_dtype dt = (nrt_dtype)t;
    size_t size = nrt_dtype_size(dt);
    void *x = dev_alloc((size_t)n * size), *mask = dev_alloc((size_t)n);
    void *counts = dev_alloc((1 + NRT_NONZERO_CHUNKS) * 8), *bounds = dev_alloc(16);
    for (int64_t q = 0; q < n; q++) set(dt, (char *)host(x) + q * (int64_t)size, rng() % 5 == 0 ? (double)rng_range(1, 3) : 0);
    if (is_float(dt)) {
      set(dt, host(x), -0.0);
      set(dt, (char *)host(x) + size, NAN);
    }
    for (int64_t q = 0; q < n; q++) ((uint8_t *)host(mask))[q] = rng() % 3 == 0;
    int64_t shape[2] = {b, a}, strides[2] = {1, b}, cshape = 1 + NRT_NONZERO_CHUNKS, one = 1;
    /* reference: row-major over the [b, a] view */
    int64_t total = 0, selected = 0;
    int64_t *coords = malloc((size_t)n * 2 * sizeof *coords);
    unsigned char *picked = malloc((size_t)n * size);
    int64_t coord[2] = {0, 0};
    do {
      int64_t off = coord[0] * strides[0] + coord[1] * strides[1];
      double v = get(dt, (char *)host(x) + off * (int64_t)size);
      if (v != 0 || isnan(v)) {
        coords[2 * total] = coord[0];
        coords[2 * total + 1] = coord[1];
        total++;
      }
      if (((uint8_t *)host(mask))[off]) memcpy(picked + selected++ * size, (char *)host(x) + off * (int64_t)size, size);
    } while (next(2, shape, coord));

    nrt_op count;
    memset(&count, 0, sizeof count);
    count.code = NRT_OP_NONZERO_COUNT;
    count.num_operands = 2;
    count.num_outputs = 1;
    count.operands[0] = view(counts, NRT_INT64, 1, &cshape, &one);
    count.operands[1] = view(x, dt, 2, shape, strides);
    CHECK_OK(nrt_op_execute(&count));
    CHECK(((int64_t *)host(counts))[0] == total);
    /* nonzero with those counts; then nonzero_static (own counts) with padding */
    for (int pass = 0; pass < 2; pass++) {
      int64_t rows = pass == 0 ? total : total + 5;
      void *out = dev_alloc((size_t)rows * 16);
      int64_t oshape[2] = {rows, 2}, ostrides[2] = {2, 1};
      nrt_op nz;
      memset(&nz, 0, sizeof nz);
      nz.code = NRT_OP_NONZERO;
      nz.num_operands = pass == 0 ? 3 : 2;
      nz.num_outputs = 1;
      nz.operands[0] = view(out, NRT_INT64, 2, oshape, ostrides);
      nz.operands[1] = count.operands[1];
      nz.operands[2] = count.operands[0];
      nz.num_scalars = 1;
      nz.scalars[0].i = -7;
      CHECK_OK(nrt_op_execute(&nz));
      CHECK(memcmp(host(out), coords, (size_t)total * 16) == 0);
      for (int64_t q = 2 * total; q < 2 * rows; q++) CHECK(((int64_t *)host(out))[q] == -7);
      nrt_free(out);
    }
    /* masked_select over the same view, mask counted first */
    count.operands[1] = view(mask, NRT_BOOL, 2, shape, strides);
    CHECK_OK(nrt_op_execute(&count));
    CHECK(((int64_t *)host(counts))[0] == selected);
    void *out = dev_alloc((size_t)selected * size + 1);
    nrt_op ms;
    memset(&ms, 0, sizeof ms);
    ms.code = NRT_OP_MASKED_SELECT;
    ms.num_operands = 4;
    ms.num_outputs = 1;
    ms.operands[0] = view(out, dt, 1, &selected, &one);
    ms.operands[1] = view(x, dt, 2, shape, strides);
    ms.operands[2] = view(mask, NRT_BOOL, 2, shape, strides);
    ms.operands[3] = count.operands[0];
    CHECK_OK(nrt_op_execute(&ms));
    CHECK(memcmp(host(out), picked, (size_t)selected * size) == 0);
    if (dt >= NRT_UINT8 && dt <= NRT_INT64) {
      set(dt, (char *)host(x) + 777 * (int64_t)size, -3);
      set(dt, (char *)host(x) + 778 * (int64_t)size, 9);
      int64_t two = 2;
      nrt_op bd;
      memset(&bd, 0, sizeof bd);
      bd.code = NRT_OP_INDEX_BOUNDS;
      bd.num_operands = 2;
      bd.num_outputs = 1;
      bd.operands[0] = view(bounds, NRT_INT64, 1, &two, &one);
      bd.operands[1] = view(x, dt, 2, shape, strides);
      CHECK_OK(nrt_op_execute(&bd));
      CHECK(((int64_t *)host(bounds))[0] == (dt == NRT_UINT8 ? 0 : -3));
      CHECK(((int64_t *)host(bounds))[1] == (dt == NRT_UINT8 ? 253 : 9));
    }
    free(coords);
    free(picked);
    nrt_free(x), nrt_free(mask), nrt_free(counts), nrt_free(bounds), nrt_free(out);
  }
}

/* ---- embedding backward and searchsorted ----------------------------------- */

static void test_embedding_backward(void) {
  const int64_t v = 9, d = 5, n = 60;
  nrt_dtype types[3] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT64};
  for (int ti = 0; ti < 3; ti++)
    for (int scale = 0; scale < 2; scale++) {
      nrt_dtype dt = types[ti];
      size_t size = nrt_dtype_size(dt);
      void *gw = dev_alloc((size_t)(v * d) * size), *grad = dev_alloc((size_t)(n * d) * size), *idx = dev_alloc(n * 4);
      fill_random(dt, host(grad), n * d);
      for (int64_t q = 0; q < n; q++) ((int32_t *)host(idx))[q] = (int32_t)rng_range(0, v);
      double want[9 * 5] = {0};
      int64_t counts[9] = {0};
      for (int64_t q = 0; q < n; q++) counts[((int32_t *)host(idx))[q]]++;
      for (int64_t q = 0; q < n; q++) {
        int64_t r = ((int32_t *)host(idx))[q];
        if (r == 2) continue; /* padding_idx */
        for (int64_t c = 0; c < d; c++)
          want[r * d + c] += get(dt, (char *)host(grad) + (q * d + c) * (int64_t)size) / (scale ? (double)counts[r] : 1.0);
      }
      /* grad is read transposed: stored [d, n] */
      void *gradt = dev_alloc((size_t)(n * d) * size);
      for (int64_t q = 0; q < n; q++)
        for (int64_t c = 0; c < d; c++)
          memcpy((char *)host(gradt) + (c * n + q) * (int64_t)size, (char *)host(grad) + (q * d + c) * (int64_t)size, size);
      int64_t gshape[2] = {v, d}, gstrides[2] = {d, 1}, shape[2] = {n, d}, tstrides[2] = {1, n}, one = 1;
      nrt_op op;
      memset(&op, 0, sizeof op);
      op.code = NRT_OP_EMBEDDING_DENSE_BACKWARD;
      op.num_operands = 3;
      op.num_outputs = 1;
      op.operands[0] = view(gw, dt, 2, gshape, gstrides);
      op.operands[1] = view(gradt, dt, 2, shape, tstrides);
      op.operands[2] = view(idx, NRT_INT32, 1, &n, &one);
      op.num_scalars = 2;
      op.scalars[0].i = 2;
      op.scalars[1].i = scale;
      CHECK_OK(nrt_op_execute(&op));
      double tol = dt == NRT_BFLOAT16 ? 0.1 : 1e-5;
      for (int64_t q = 0; q < v * d; q++)
        CHECK(fabs(get(dt, (char *)host(gw) + q * (int64_t)size) - want[q]) <= tol * (1 + fabs(want[q])));
      ((int32_t *)host(idx))[17] = 9;
      CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
      CHECK(strcmp(nrt_last_error(), "embedding_dense_backward: index 9 is out of bounds for dimension 0 with size 9") == 0);
      nrt_free(gw), nrt_free(grad), nrt_free(gradt), nrt_free(idx);
    }
}

static int64_t ref_search(const double *row, const int64_t *sorter, int64_t m, double v, int right) {
  int64_t i = 0; /* linear scan: the definition, not a binary search */
  while (i < m) {
    double e = row[sorter ? sorter[i] : i];
    if (right ? !(e > v) : !(e >= v)) i++;
    else break;
  }
  return i;
}

static void test_searchsorted(void) {
  const int64_t rows = 3, m = 11, n = 17;
  for (int t = NRT_UINT8; t < NRT_UINT16; t++)
    for (int variant = 0; variant < 4; variant++) {
      nrt_dtype dt = (nrt_dtype)t;
      int right = variant & 1, with_sorter = variant >> 1;
      size_t size = nrt_dtype_size(dt);
      void *seq = dev_alloc((size_t)(rows * m) * size), *vals = dev_alloc((size_t)(rows * n) * size);
      void *out = dev_alloc((size_t)(rows * n) * 8), *sorter = dev_alloc((size_t)(rows * m) * 8);
      double sorted[3][11];
      int64_t perm[3][11];
      for (int64_t r = 0; r < rows; r++) {
        double x = (double)rng_range(0, 3);
        for (int64_t i = 0; i < m; i++) {
          sorted[r][i] = x;
          x += (double)rng_range(0, 2);
          perm[r][i] = i;
        }
        for (int64_t i = m - 1; i > 0; i--) { /* shuffle storage; the sorter undoes it */
          int64_t j = rng_range(0, i + 1), tmp = perm[r][i];
          perm[r][i] = perm[r][j];
          perm[r][j] = tmp;
        }
        for (int64_t i = 0; i < m; i++) {
          int64_t at = with_sorter ? perm[r][i] : i;
          set(dt, (char *)host(seq) + (r * m + at) * (int64_t)size, sorted[r][i]);
          ((int64_t *)host(sorter))[r * m + i] = perm[r][i];
        }
        for (int64_t i = 0; i < n; i++) set(dt, (char *)host(vals) + (r * n + i) * (int64_t)size, (double)rng_range(0, 16));
      }
      if (is_float(dt)) set(dt, host(vals), NAN);
      int64_t sshape[2] = {rows, m}, sstrides[2] = {m, 1}, vshape[2] = {rows, n}, vstrides[2] = {n, 1};
      nrt_op op;
      memset(&op, 0, sizeof op);
      op.code = NRT_OP_SEARCHSORTED;
      op.num_operands = with_sorter ? 4 : 3;
      op.num_outputs = 1;
      op.operands[0] = view(out, NRT_INT64, 2, vshape, vstrides);
      op.operands[1] = view(seq, dt, 2, sshape, sstrides);
      op.operands[2] = view(vals, dt, 2, vshape, vstrides);
      op.operands[3] = view(sorter, NRT_INT64, 2, sshape, sstrides);
      op.num_scalars = 1;
      op.scalars[0].i = right;
      CHECK_OK(nrt_op_execute(&op));
      for (int64_t r = 0; r < rows; r++) {
        double stored[11];
        for (int64_t i = 0; i < m; i++) stored[i] = get(dt, (char *)host(seq) + (r * m + i) * (int64_t)size);
        for (int64_t i = 0; i < n; i++) {
          double v = get(dt, (char *)host(vals) + (r * n + i) * (int64_t)size);
          int64_t want = ref_search(stored, with_sorter ? perm[r] : NULL, m, v, right);
          CHECK(((int64_t *)host(out))[r * n + i] == want);
        }
      }
      if (with_sorter) {
        ((int64_t *)host(sorter))[m + 4] = m;
        CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INDEX_OUT_OF_RANGE);
        CHECK(strcmp(nrt_last_error(), "searchsorted: sorter index 11 is out of bounds for boundaries of size 11") == 0);
      }
      nrt_free(seq), nrt_free(vals), nrt_free(out), nrt_free(sorter);
    }
}

/* Malformed descriptors are refused with a status, never followed. */
static void test_validation(void) {
  const int64_t n = 4, one = 1, zero = 0;
  void *a = dev_alloc(64), *idx = dev_alloc(64);
  nrt_op op = index_op(NRT_OP_GATHER, 1);
  op.operands[0] = view(a, NRT_FLOAT32, 1, &n, &one);
  op.operands[1] = view(a, NRT_FLOAT32, 1, &n, &zero);
  op.operands[2] = view(a, NRT_FLOAT32, 1, &n, &one);
  op.operands[3] = view(idx, NRT_FLOAT32, 1, &n, &one);
  op.num_scalars = 1;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* float index */
  op.operands[3].dtype = NRT_INT64;
  op.operands[2].data = (char *)a + 4; /* geometry elsewhere */
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  op.operands[2].data = a;
  op.num_scalars = 0;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* no dims */
  op.num_operands = 2;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT);
  nrt_free(a), nrt_free(idx);
}

int main(int argc, char **argv) {
  if (child_is_case(argc, argv)) return scatter_matches_serial_walk();
  RUN(test_gather_matches_reference);
  RUN(test_index_multi_and_rows);
  RUN(test_gather_out_of_range);
  RUN(test_scatter_reductions);
  RUN(test_index_add_and_put);
  RUN(test_scatter_out_of_range);
  RUN(test_scatter_independent_of_threads);
  RUN(test_nonzero_family);
  RUN(test_embedding_backward);
  RUN(test_searchsorted);
  RUN(test_validation);
  return CHECK_MAIN_RESULT();
}
