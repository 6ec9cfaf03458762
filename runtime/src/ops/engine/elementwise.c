/* See elementwise.h. */
#include "ops/engine/elementwise.h"

#include <string.h>
#include "ops/engine/convert.h"

#define CHUNK 256

void rt_scalars_from_op(const nrt_op *op, rt_scalars *out) {
  for (int k = 0; k < op->num_scalars; k++) {
    const nrt_scalar *s = &op->scalars[k];
    out->f[k] = s->is_float ? s->f : (double)s->i;
    out->i[k] = s->is_float ? (int64_t)s->f : s->i;
  }
}

typedef struct casting {
  int nops;
  int num_outputs;
  nrt_dtype have[NRT_MAX_OPERANDS];
  nrt_dtype want[NRT_MAX_OPERANDS];
  rt_inner_loop loop;
  void *ctx;
} casting;

/* Presents a run in the wanted dtypes: converts mismatched inputs into
 * buffers, computes, converts buffered outputs back. */
static void casting_loop(char **data, const int64_t *strides, int64_t n, void *arg) {
  const casting *c = arg;
  _Alignas(64) unsigned char buffers[NRT_MAX_OPERANDS][CHUNK * 8];
  char *ptrs[NRT_MAX_OPERANDS];
  int64_t steps[NRT_MAX_OPERANDS];
  for (int64_t done = 0; done < n; done += CHUNK) {
    int64_t count = n - done < CHUNK ? n - done : CHUNK;
    for (int k = 0; k < c->nops; k++) {
      char *at = data[k] + done * strides[k];
      if (c->have[k] == c->want[k]) {
        ptrs[k] = at;
        steps[k] = strides[k];
        continue;
      }
      ptrs[k] = (char *)buffers[k];
      steps[k] = (int64_t)nrt_dtype_size(c->want[k]);
      if (k < c->num_outputs) continue;
      int64_t convert_count = count;
      if (strides[k] == 0) { /* broadcast: convert once, read with stride 0 */
        steps[k] = 0;
        convert_count = 1;
      }
      char *pair[2] = {ptrs[k], at};
      int64_t pair_strides[2] = {steps[k], strides[k]};
      rt_convert_loops[c->want[k]][c->have[k]](pair, pair_strides, convert_count, NULL);
    }
    c->loop(ptrs, steps, count, c->ctx);
    for (int k = 0; k < c->num_outputs; k++) {
      if (c->have[k] == c->want[k]) continue;
      char *pair[2] = {data[k] + done * strides[k], ptrs[k]};
      int64_t pair_strides[2] = {strides[k], steps[k]};
      rt_convert_loops[c->have[k]][c->want[k]](pair, pair_strides, count, NULL);
    }
  }
}

/* One value broadcast over a non-empty shape. */
static int is_single_value(const nrt_tensor_view *v) {
  for (int32_t d = 0; d < v->ndim; d++)
    if (v->shape[d] == 0 || (v->strides[d] != 0 && v->shape[d] != 1)) return 0;
  return v->data != NULL;
}

void rt_run_elementwise(const nrt_op *op, const nrt_dtype *want, rt_inner_loop loop, void *ctx) {
  casting c = {.nops = op->num_operands, .num_outputs = op->num_outputs, .loop = loop, .ctx = ctx};
  /* An input that is one value (a number) in another dtype is converted
   * here, once, to the same bits casting_loop would give it per chunk: a
   * kernel whose only mismatch is such a value (bfloat16 times a float32
   * number) then runs on the tensors directly. */
  nrt_tensor_view views[NRT_MAX_OPERANDS];
  _Alignas(16) unsigned char values[NRT_MAX_OPERANDS][16];
  int matches = 1;
  for (int k = 0; k < op->num_operands; k++) {
    views[k] = op->operands[k];
    if (views[k].dtype != want[k] && k >= op->num_outputs && is_single_value(&views[k]) &&
        nrt_dtype_size(want[k]) <= sizeof values[k]) {
      char *pair[2] = {(char *)values[k], views[k].data};
      int64_t pair_strides[2] = {0, 0};
      rt_convert_loops[want[k]][views[k].dtype](pair, pair_strides, 1, NULL);
      views[k].data = values[k];
      views[k].dtype = want[k];
    }
    c.have[k] = views[k].dtype;
    c.want[k] = want[k];
    matches &= c.have[k] == c.want[k];
  }
  if (matches)
    rt_iterate(op->num_operands, views, loop, ctx);
  else
    rt_iterate(op->num_operands, views, casting_loop, &c);
}
