/* See sort_rows_cpu_order.h. Rows are read as double (exact for every
 * floating dtype), so comparisons are those of the CPU's. */
#include "ops/shape/sort_rows_cpu_order.h"
#include <math.h>
#include <stdlib.h>
#include "ops/engine/scalar_types.h"

#define INSERTION_RUN 16

typedef struct rows_cmp {
  const double *rows; /* n x m, row-major */
  int64_t m;
} rows_cmp;

static double value_at(const nrt_tensor_view *in, int64_t i, int64_t k) {
  const char *p = (const char *)in->data + (i * in->strides[0] + k * in->strides[1]) * (int64_t)nrt_dtype_size(in->dtype);
  switch (in->dtype) {
    case NRT_FLOAT64: return *(const double *)p;
    case NRT_FLOAT32: return *(const float *)p;
    case NRT_FLOAT16: return rt_half_to_float(*(const rt_half *)p);
    default: return rt_bfloat16_to_float(*(const rt_bfloat16 *)p);
  }
}

int rt_rows_have_nan(const nrt_tensor_view *in) {
  if (in->dtype != NRT_FLOAT16 && in->dtype != NRT_BFLOAT16 && in->dtype != NRT_FLOAT32 && in->dtype != NRT_FLOAT64)
    return 0;
  for (int64_t i = 0; i < in->shape[0]; i++)
    for (int64_t k = 0; k < in->shape[1]; k++)
      if (isnan(value_at(in, i, k))) return 1;
  return 0;
}

/* The CPU's comparator: row a before row b. */
static int less(const rows_cmp *c, uint32_t a, uint32_t b) {
  const double *x = c->rows + (int64_t)a * c->m, *y = c->rows + (int64_t)b * c->m;
  for (int64_t k = 0; k < c->m; k++) {
    if (x[k] < y[k]) return 1;
    if (x[k] > y[k]) return 0;
  }
  return 0;
}

static void swap(uint32_t *a, uint32_t *b) {
  uint32_t t = *a;
  *a = *b;
  *b = t;
}

/* ---- heap sort (past the depth limit) ---- */

static void push_heap(const rows_cmp *c, uint32_t *first, int64_t hole, int64_t top, uint32_t value) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && less(c, first[parent], value)) {
    first[hole] = first[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  first[hole] = value;
}

static void adjust_heap(const rows_cmp *c, uint32_t *first, int64_t hole, int64_t len, uint32_t value) {
  int64_t top = hole, child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (less(c, first[child], first[child - 1])) child--;
    first[hole] = first[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    first[hole] = first[child - 1];
    hole = child - 1;
  }
  push_heap(c, first, hole, top, value);
}

static void heap_sort(const rows_cmp *c, uint32_t *first, int64_t len) {
  if (len >= 2)
    for (int64_t parent = (len - 2) / 2;; parent--) {
      adjust_heap(c, first, parent, len, first[parent]);
      if (parent == 0) break;
    }
  for (int64_t last = len; last > 1;) {
    last--;
    uint32_t value = first[last];
    first[last] = first[0];
    adjust_heap(c, first, 0, last, value);
  }
}

/* ---- introsort ---- */

static void move_median_to_first(const rows_cmp *c, uint32_t *result, uint32_t *a, uint32_t *b, uint32_t *d) {
  if (less(c, *a, *b)) {
    if (less(c, *b, *d)) swap(result, b);
    else if (less(c, *a, *d)) swap(result, d);
    else swap(result, a);
  } else if (less(c, *a, *d)) {
    swap(result, a);
  } else if (less(c, *b, *d)) {
    swap(result, d);
  } else {
    swap(result, b);
  }
}

static uint32_t *partition(const rows_cmp *c, uint32_t *first, uint32_t *last, const uint32_t *pivot) {
  uint32_t *lo = first, *hi = last;
  for (;;) {
    while (lo < last && less(c, *lo, *pivot)) lo++;
    hi--;
    while (hi > first && less(c, *pivot, *hi)) hi--;
    if (!(lo < hi)) return lo;
    swap(lo, hi);
    lo++;
  }
}

static void introsort_loop(const rows_cmp *c, uint32_t *first, uint32_t *last, int64_t depth) {
  while (last - first > INSERTION_RUN) {
    if (depth == 0) {
      heap_sort(c, first, last - first);
      return;
    }
    depth--;
    uint32_t *mid = first + (last - first) / 2;
    move_median_to_first(c, first, first + 1, mid, last - 1);
    uint32_t *cut = partition(c, first + 1, last, first);
    introsort_loop(c, cut, last, depth);
    last = cut;
  }
}

/* Moves *at left past the elements it sorts before (not past `bound`). */
static void linear_insert(const rows_cmp *c, uint32_t *bound, uint32_t *at) {
  uint32_t value = *at;
  uint32_t *next = at - 1;
  while (at > bound && less(c, value, *next)) {
    *at = *next;
    at = next--;
  }
  *at = value;
}

static void insertion_sort(const rows_cmp *c, uint32_t *first, uint32_t *last) {
  if (first == last) return;
  for (uint32_t *i = first + 1; i != last; i++) {
    if (less(c, *i, *first)) {
      uint32_t value = *i;
      for (uint32_t *p = i; p > first; p--) *p = p[-1];
      *first = value;
    } else {
      linear_insert(c, first, i);
    }
  }
}

static int64_t floor_log2(int64_t n) {
  int64_t r = 0;
  while (n > 1) n >>= 1, r++;
  return r;
}

int rt_sort_rows_cpu_order(const nrt_tensor_view *in, uint32_t *perm, int64_t n) {
  int64_t m = in->shape[1];
  double *rows = malloc((size_t)(n * m + 1) * sizeof *rows);
  if (!rows) return -1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < m; k++) rows[i * m + k] = value_at(in, i, k);
  rows_cmp c = {rows, m};
  for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
  if (n > 1) {
    introsort_loop(&c, perm, perm + n, 2 * floor_log2(n));
    if (n > INSERTION_RUN) {
      insertion_sort(&c, perm, perm + INSERTION_RUN);
      for (uint32_t *i = perm + INSERTION_RUN; i != perm + n; i++) linear_insert(&c, perm, i);
    } else {
      insertion_sort(&c, perm, perm + n);
    }
  }
  free(rows);
  return 0;
}
