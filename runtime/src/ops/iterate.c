/* See iterate.h. */
#include "iterate.h"
#include "neuronrt/op.h"

typedef struct layout {
  int ndim;                                  /* outermost first */
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_OPERANDS][NRT_MAX_DIMS]; /* bytes */
} layout;

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Builds the walk order: drops size-1 dims, sorts by the output's stride
 * (largest outermost; ties keep PyTorch's order), merges contiguous dims. */
static void plan(int nops, const nrt_tensor_view *views, layout *out) {
  int order[NRT_MAX_DIMS], n = 0;
  const nrt_tensor_view *dst = &views[0];
  for (int d = 0; d < dst->ndim; d++)
    if (dst->shape[d] != 1) order[n++] = d;
  for (int i = 1; i < n; i++) { /* insertion sort: stable, n is tiny */
    int d = order[i], j = i - 1;
    while (j >= 0 && abs64(dst->strides[order[j]]) < abs64(dst->strides[d])) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = d;
  }
  out->ndim = 0;
  for (int i = 0; i < n; i++) {
    int d = order[i];
    int k = out->ndim;
    if (k > 0) {
      int mergeable = 1;
      for (int op = 0; op < nops && mergeable; op++) {
        int64_t elem = (int64_t)nrt_dtype_size(views[op].dtype);
        mergeable = out->strides[op][k - 1] == views[op].strides[d] * elem * dst->shape[d];
      }
      if (mergeable) {
        out->shape[k - 1] *= dst->shape[d];
        for (int op = 0; op < nops; op++)
          out->strides[op][k - 1] = views[op].strides[d] * (int64_t)nrt_dtype_size(views[op].dtype);
        continue;
      }
    }
    out->shape[k] = dst->shape[d];
    for (int op = 0; op < nops; op++)
      out->strides[op][k] = views[op].strides[d] * (int64_t)nrt_dtype_size(views[op].dtype);
    out->ndim++;
  }
}

void rt_iterate(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx) {
  if (nrt_view_numel(&views[0]) == 0) return;
  layout l;
  plan(nops, views, &l);
  char *data[NRT_MAX_OPERANDS];
  int64_t inner_strides[NRT_MAX_OPERANDS];
  for (int op = 0; op < nops; op++) data[op] = views[op].data;
  if (l.ndim == 0) { /* a single element */
    for (int op = 0; op < nops; op++) inner_strides[op] = 0;
    loop(data, inner_strides, 1, ctx);
    return;
  }
  int inner = l.ndim - 1;
  for (int op = 0; op < nops; op++) inner_strides[op] = l.strides[op][inner];
  int64_t index[NRT_MAX_DIMS] = {0};
  for (;;) {
    loop(data, inner_strides, l.shape[inner], ctx);
    int d = inner - 1;
    for (; d >= 0; d--) { /* odometer step over the outer dims */
      for (int op = 0; op < nops; op++) data[op] += l.strides[op][d];
      if (++index[d] < l.shape[d]) break;
      for (int op = 0; op < nops; op++) data[op] -= l.strides[op][d] * l.shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}
