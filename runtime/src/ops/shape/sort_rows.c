/* SORT_ROWS: the rows of a matrix in lexicographic order (for unique along
 * a dim). A stable sort by the last column, then by the one before, ...,
 * then by the first leaves rows ordered by their first column, ties by the
 * second, and so on, with fully equal rows in their original order: an LSD
 * sort whose digits are columns. Each column pass gathers the column in
 * the current row order, makes its sort keys and radix sorts them. With the
 * cpu_order scalar, rows holding NaN take the order of the CPU's unique
 * sort instead (sort_rows_cpu_order.h), where NaN orders neither way. */
#include <stdlib.h>
#include <string.h>
#include "ops/shape/shape_common.h"
#include "ops/shape/sort_keys.h"
#include "ops/shape/sort_rows_cpu_order.h"

#define PARALLEL_ROWS (1 << 17)

typedef struct rows_scratch {
  uint32_t *perm, *next, *idx;
  char *column;
  void *keys;
} rows_scratch;

static void scratch_free(rows_scratch *s) {
  free(s->perm), free(s->next), free(s->idx), free(s->column), free(s->keys);
}

/* Reorders perm by the stable order of column c's keys (in perm order). */
static void sort_by_column(const nrt_tensor_view *in, int64_t c, rows_scratch *s, int64_t n) {
  int64_t elem = (int64_t)nrt_dtype_size(in->dtype);
  const char *col = (const char *)in->data + c * in->strides[1] * elem;
  rt_gather_elements(s->column, elem, col, in->strides[0] * elem, s->perm, n, elem);
  for (int64_t i = 0; i < n; i++) s->idx[i] = (uint32_t)i;
  int half;
  if (rt_key_is_wide(in->dtype)) {
    uint64_t *keys = s->keys;
    rt_make_keys64(in->dtype, s->column, elem, n, 0, keys);
    half = rt_sort_pairs64(keys, s->idx, keys + n, s->idx + n, n, n >= PARALLEL_ROWS);
  } else {
    uint32_t *keys = s->keys;
    rt_make_keys32(in->dtype, s->column, elem, n, 0, keys);
    half = rt_sort_pairs32(keys, s->idx, keys + n, s->idx + n, n, n >= PARALLEL_ROWS);
  }
  const uint32_t *order = s->idx + half * n;
  for (int64_t i = 0; i < n; i++) s->next[i] = s->perm[order[i]];
  uint32_t *t = s->perm;
  s->perm = s->next, s->next = t;
}

nrt_status rt_kernel_sort_rows(const nrt_op *op) {
  nrt_status st = rt_check_arity(op, 3, 0);
  if (st) return st;
  const nrt_tensor_view *values = &op->operands[0], *indices = &op->operands[1],
                        *in = &op->operands[2];
  if (in->ndim != 2 || !rt_same_shape(values, in) || values->dtype != in->dtype ||
      indices->ndim != 1 || indices->dtype != NRT_INT64 || indices->shape[0] != in->shape[0])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "sort_rows: expects a 2-d input, values like it and 1-d int64 indices");
  int64_t n = in->shape[0], m = in->shape[1];
  if (n > (int64_t)UINT32_MAX)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "sort_rows: more than %u rows are not supported",
                   UINT32_MAX);
  if (n == 0) return NRT_SUCCESS;
  int64_t elem = (int64_t)nrt_dtype_size(in->dtype);
  size_t key = rt_key_is_wide(in->dtype) ? 8 : 4;
  rows_scratch s = {malloc((size_t)n * 4), malloc((size_t)n * 4), malloc((size_t)n * 8),
                    malloc((size_t)(n * elem)), malloc((size_t)n * 2 * key)};
  if (!s.perm || !s.next || !s.idx || !s.column || !s.keys) {
    scratch_free(&s);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sort_rows: out of host memory for scratch");
  }
  if (op->num_scalars > 0 && rt_scalar_int(op, 0) && rt_rows_have_nan(in)) {
    if (rt_sort_rows_cpu_order(in, s.perm, n)) {
      scratch_free(&s);
      return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "sort_rows: out of host memory for scratch");
    }
  } else {
    for (int64_t i = 0; i < n; i++) s.perm[i] = (uint32_t)i;
    for (int64_t c = m - 1; c >= 0; c--) sort_by_column(in, c, &s, n);
  }
  const char *src = in->data;
  char *dst = values->data;
  for (int64_t i = 0; i < n; i++) {
    if (m > 0) { /* empty rows have no data pointer */
      const char *row = src + (int64_t)s.perm[i] * in->strides[0] * elem;
      char *out = dst + i * values->strides[0] * elem;
      for (int64_t k = 0; k < m; k++)
        memcpy(out + k * values->strides[1] * elem, row + k * in->strides[1] * elem, (size_t)elem);
    }
    *(int64_t *)((char *)indices->data + i * indices->strides[0] * 8) = s.perm[i];
  }
  scratch_free(&s);
  return NRT_SUCCESS;
}
