/* CAT: inputs written side by side along one dim of the output.
 *
 * When the output and every input are contiguous and share its dtype, each
 * outer row of the output is the inputs' rows back to back: the group's
 * bytes are copied as one flat range split evenly across threads, whatever
 * the inputs' sizes. Anything else copies input by input with conversion. */
#include <string.h>
#include "ops/shape/shape_common.h"
#include "ops/engine/thread_pool.h"

#define MAX_INPUTS (NRT_MAX_OPERANDS - 1)

typedef struct cat_rows {
  char *out;                       /* first byte of the group in out's row 0 */
  int64_t out_row_bytes;           /* stride of out's outer rows */
  int64_t group_bytes;             /* bytes of one outer row the group fills */
  int ninputs;
  const char *in[MAX_INPUTS];
  int64_t in_row_bytes[MAX_INPUTS]; /* bytes of input j in one outer row */
} cat_rows;

static void cat_rows_range(int64_t begin, int64_t end, void *arg) {
  const cat_rows *c = arg;
  int64_t row = begin / c->group_bytes, pos = begin % c->group_bytes;
  while (begin < end) {
    /* Find the input holding byte pos of this row's group. */
    int j = 0;
    int64_t start = 0;
    while (pos >= start + c->in_row_bytes[j]) start += c->in_row_bytes[j++];
    int64_t within = pos - start;
    int64_t n = c->in_row_bytes[j] - within;
    if (n > end - begin) n = end - begin;
    memcpy(c->out + row * c->out_row_bytes + pos,
           c->in[j] + row * c->in_row_bytes[j] + within, (size_t)n);
    begin += n;
    pos += n;
    if (pos == c->group_bytes) pos = 0, row++;
  }
}

/* Below this many bytes per range a thread is not worth waking. */
#define CAT_GRAIN (1 << 18)

nrt_status rt_kernel_cat(const nrt_op *op) {
  if (op->num_operands < 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cat: expects an output and 2 scalars");
  const nrt_tensor_view *out = &op->operands[0];
  int64_t dim = rt_scalar_int(op, 0), offset = rt_scalar_int(op, 1);
  if (dim < 0 || dim >= out->ndim)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cat: dim %lld out of range for %d dims",
                   (long long)dim, out->ndim);
  int64_t total = offset;
  int all_fast = rt_view_is_contiguous(out);
  cat_rows rows = {.ninputs = 0};
  for (int j = 1; j < op->num_operands; j++) {
    const nrt_tensor_view *in = &op->operands[j];
    int same = in->ndim == out->ndim;
    for (int d = 0; same && d < out->ndim; d++) same = d == dim || in->shape[d] == out->shape[d];
    if (!same)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "cat: input %d's shape differs from the output's outside dim %lld", j - 1,
                     (long long)dim);
    total += in->shape[dim];
    if (in->dtype != out->dtype || !rt_view_is_contiguous(in)) all_fast = 0;
  }
  if (offset < 0 || total > out->shape[dim])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "cat: inputs overrun the output along dim %lld",
                   (long long)dim);
  if (nrt_view_numel(out) == 0) return NRT_SUCCESS;

  int64_t elem = (int64_t)nrt_dtype_size(out->dtype), inner = 1, outer = 1;
  for (int d = (int)dim + 1; d < out->ndim; d++) inner *= out->shape[d];
  for (int d = 0; d < dim; d++) outer *= out->shape[d];
  if (all_fast) {
    rows.out = (char *)out->data + offset * inner * elem;
    rows.out_row_bytes = out->shape[dim] * inner * elem;
    rows.group_bytes = 0;
    for (int j = 1; j < op->num_operands; j++) {
      const nrt_tensor_view *in = &op->operands[j];
      if (in->shape[dim] == 0) continue;
      rows.in[rows.ninputs] = in->data;
      rows.in_row_bytes[rows.ninputs++] = in->shape[dim] * inner * elem;
      rows.group_bytes += in->shape[dim] * inner * elem;
    }
    if (rows.group_bytes > 0)
      rt_parallel_for(outer * rows.group_bytes, CAT_GRAIN, cat_rows_range, &rows);
    return NRT_SUCCESS;
  }
  int64_t at = offset;
  for (int j = 1; j < op->num_operands; j++) {
    const nrt_tensor_view *in = &op->operands[j];
    nrt_tensor_view part = rt_view_narrow(out, (int)dim, at, in->shape[dim]);
    rt_copy_view(&part, in);
    at += in->shape[dim];
  }
  return NRT_SUCCESS;
}
