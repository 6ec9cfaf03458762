/* A common iteration space for queued pointwise ops (iteration_space.h). */
#include <string.h>
#include "fuse/iteration_space.h"

/* op's output dims of size > 1 in memory order, outermost first: their
 * count, or -1 when the output is not dense. */
static int memory_order(const nrt_op *op, int *dims) {
  const nrt_tensor_view *y = &op->operands[0];
  int n = 0;
  for (int d = 0; d < y->ndim; d++) {
    if (y->shape[d] <= 1) continue;
    int at = n++;
    while (at > 0 && y->strides[dims[at - 1]] < y->strides[d]) {
      dims[at] = dims[at - 1];
      at--;
    }
    dims[at] = d;
  }
  int64_t expect = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (y->strides[dims[i]] != expect) return -1;
    expect *= y->shape[dims[i]];
  }
  return n;
}

/* The bounds of op's own dims (see rt_iteration_space), or -1. */
static int own_bounds(const nrt_op *op, int64_t *bounds) {
  int dims[NRT_MAX_DIMS];
  int n = memory_order(op, dims);
  int64_t p = 1;
  for (int i = n - 1; i >= 0; i--) bounds[n - 1 - i] = p *= op->operands[0].shape[dims[i]];
  return n;
}

static void set_shape(rt_iteration_space *space) {
  for (int j = 0; j < space->ndim; j++) /* j counts from the innermost dim */
    space->shape[space->ndim - 1 - j] = space->bounds[j] / (j ? space->bounds[j - 1] : 1);
}

int rt_space_start(rt_iteration_space *space, const nrt_op *op) {
  int n = own_bounds(op, space->bounds);
  if (n < 1) return 0; /* not dense, or a single element */
  space->ndim = n;
  space->numel = space->bounds[n - 1];
  set_shape(space);
  return 1;
}

int rt_space_join(rt_iteration_space *space, const nrt_op *op) {
  int64_t theirs[NRT_MAX_DIMS], merged[NRT_MAX_DIMS];
  int n = own_bounds(op, theirs);
  if (n < 1 || theirs[n - 1] != space->numel) return 0;
  int i = 0, j = 0, m = 0;
  while (i < space->ndim || j < n) {
    int64_t next = j == n || (i < space->ndim && space->bounds[i] <= theirs[j]) ? space->bounds[i]
                                                                                 : theirs[j];
    if (i < space->ndim && space->bounds[i] == next) i++;
    if (j < n && theirs[j] == next) j++;
    if (m && next % merged[m - 1]) return 0; /* the two orders do not nest */
    if (m == NRT_MAX_DIMS) return 0;
    merged[m++] = next;
  }
  space->ndim = m;
  memcpy(space->bounds, merged, (size_t)m * sizeof merged[0]);
  set_shape(space);
  return 1;
}

void rt_space_express(const rt_iteration_space *space, const nrt_op *op, nrt_op *out) {
  *out = *op;
  int dims[NRT_MAX_DIMS];
  int n = memory_order(op, dims);
  for (int k = 0; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    nrt_tensor_view *w = &out->operands[k];
    w->ndim = space->ndim;
    memcpy(w->shape, space->shape, sizeof w->shape);
    /* Walk the op's dims from the innermost, and the space's inside them. */
    int i = n - 1;
    int64_t below = 1; /* elements inside op dim dims[i] */
    for (int j = 0; j < space->ndim; j++) {
      int64_t step = j ? space->bounds[j - 1] : 1;
      while (step >= below * op->operands[0].shape[dims[i]]) below *= op->operands[0].shape[dims[i--]];
      w->strides[space->ndim - 1 - j] = v->strides[dims[i]] * (step / below);
    }
  }
}
