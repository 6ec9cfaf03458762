/* TRIL and TRIU: keep one triangle of each matrix (the last two dims) and
 * zero the rest. Every row is a kept span and a zeroed span; all-zero bits
 * are 0 in every dtype, so the kernel moves bytes without knowing types.
 * TRIL_INDICES and TRIU_INDICES list a triangle's coordinates. */
#include <string.h>
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"

typedef struct triangle {
  rt_slices rows; /* every row of every matrix, out and in */
  char *out;
  const char *in;
  int64_t cols, out_col_stride, in_col_stride, elem; /* strides in bytes */
  int64_t rows_per_matrix, diagonal;
  int upper, in_place;
} triangle;

static void copy_elems(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                       int64_t n, int64_t elem) {
  if (dst_stride == elem && src_stride == elem) {
    memcpy(dst, src, (size_t)(n * elem));
    return;
  }
  for (int64_t j = 0; j < n; j++) memcpy(dst + j * dst_stride, src + j * src_stride, (size_t)elem);
}

static void zero_elems(char *dst, int64_t stride, int64_t n, int64_t elem) {
  if (stride == elem) {
    memset(dst, 0, (size_t)(n * elem));
    return;
  }
  for (int64_t j = 0; j < n; j++) memset(dst + j * stride, 0, (size_t)elem);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void triangle_rows(int64_t begin, int64_t end, void *arg) {
  const triangle *t = arg;
  for (int64_t r = begin; r < end; r++) {
    char *out = t->out + rt_slices_offset(&t->rows, 0, r);
    const char *in = t->in + rt_slices_offset(&t->rows, 1, r);
    int64_t i = r % t->rows_per_matrix;
    /* Columns [0, split) are below the diagonal line j - i = diagonal + upper. */
    int64_t split = clamp64(i + t->diagonal + (t->upper ? 0 : 1), 0, t->cols);
    int64_t keep_from = t->upper ? split : 0, keep_to = t->upper ? t->cols : split;
    int64_t zero_from = t->upper ? 0 : split, zero_to = t->upper ? split : t->cols;
    if (!t->in_place)
      copy_elems(out + keep_from * t->out_col_stride, t->out_col_stride,
                 in + keep_from * t->in_col_stride, t->in_col_stride, keep_to - keep_from, t->elem);
    zero_elems(out + zero_from * t->out_col_stride, t->out_col_stride, zero_to - zero_from, t->elem);
  }
}

static nrt_status run_triangle(const nrt_op *op, int upper) {
  const char *name = upper ? "triu" : "tril";
  nrt_status s = rt_check_arity(op, 2, 1);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0], *in = &op->operands[1];
  if (!rt_same_shape(out, in) || out->dtype != in->dtype || out->ndim < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects output and input of one shape and dtype, at least 2-d", name);
  int64_t numel = nrt_view_numel(out);
  if (numel == 0) return NRT_SUCCESS;
  int nd = out->ndim;
  triangle t;
  /* Rows are the slices along the column dim; the row dim is the innermost
   * of the others, so slice r is row r % rows of its matrix (rt_slices
   * drops size-1 dims, which keeps that true). */
  const nrt_tensor_view *views[2] = {out, in};
  rt_slices_init(&t.rows, 2, views, nd - 1);
  t.out = out->data;
  t.in = in->data;
  t.elem = (int64_t)nrt_dtype_size(out->dtype);
  t.cols = out->shape[nd - 1];
  t.out_col_stride = out->strides[nd - 1] * t.elem;
  t.in_col_stride = in->strides[nd - 1] * t.elem;
  t.rows_per_matrix = out->shape[nd - 2];
  t.diagonal = clamp64(rt_scalar_int(op, 0), -t.rows_per_matrix - 1, t.cols + 1);
  t.upper = upper;
  t.in_place = out->data == in->data && out->strides[nd - 1] == in->strides[nd - 1];
  int64_t grain = t.cols >= 4096 ? 1 : 4096 / t.cols;
  rt_parallel_for(t.rows.count, grain, triangle_rows, &t);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_tril(const nrt_op *op) { return run_triangle(op, 0); }
nrt_status rt_kernel_triu(const nrt_op *op) { return run_triangle(op, 1); }

/* The first and last column (exclusive) of row r inside the triangle. */
static void triangle_span(int upper, int64_t r, int64_t cols, int64_t offset, int64_t *from,
                          int64_t *to) {
  *from = upper ? clamp64(r + offset, 0, cols) : 0;
  *to = upper ? cols : clamp64(r + offset + 1, 0, cols);
}

static nrt_status triangle_indices(const nrt_op *op, int upper) {
  const char *name = upper ? "triu_indices" : "tril_indices";
  nrt_status s = rt_check_arity(op, 1, 3);
  if (s) return s;
  const nrt_tensor_view *out = &op->operands[0];
  int64_t rows = rt_scalar_int(op, 0), cols = rt_scalar_int(op, 1);
  int64_t offset = clamp64(rt_scalar_int(op, 2), -rows - 1, cols + 1); /* no overflow below */
  if (out->ndim != 2 || out->shape[0] != 2 || (out->dtype != NRT_INT32 && out->dtype != NRT_INT64) ||
      rows < 0 || cols < 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects a (2, count) int32 or int64 output",
                   name);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t from, to;
    triangle_span(upper, r, cols, offset, &from, &to);
    count += to - from;
  }
  if (count != out->shape[1])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the output holds %lld coordinates, not %lld",
                   name, (long long)out->shape[1], (long long)count);
  int64_t elem = (int64_t)nrt_dtype_size(out->dtype), i = 0;
  char *row_of = out->data, *col_of = (char *)out->data + out->strides[0] * elem;
  for (int64_t r = 0; r < rows; r++) {
    int64_t from, to;
    triangle_span(upper, r, cols, offset, &from, &to);
    for (int64_t c = from; c < to; c++, i++) {
      int64_t at = i * out->strides[1] * elem;
      if (elem == 8) {
        *(int64_t *)(row_of + at) = r;
        *(int64_t *)(col_of + at) = c;
      } else {
        *(int32_t *)(row_of + at) = (int32_t)r;
        *(int32_t *)(col_of + at) = (int32_t)c;
      }
    }
  }
  return NRT_SUCCESS;
}

nrt_status rt_kernel_tril_indices(const nrt_op *op) { return triangle_indices(op, 0); }
nrt_status rt_kernel_triu_indices(const nrt_op *op) { return triangle_indices(op, 1); }
