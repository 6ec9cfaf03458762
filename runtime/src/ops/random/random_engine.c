/* See random_engine.h. */
#include "ops/random/random_engine.h"

#include <string.h>
#include "ops/engine/convert.h"
#include "ops/engine/thread_pool.h"

/* The logical walk: size-1 dims dropped, neighbours merged where every
 * operand steps through them as one dim (which keeps row-major order). */
typedef struct walk {
  int nops;
  int num_outputs;
  int ndim;
  int64_t numel;
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_OPERANDS][NRT_MAX_DIMS]; /* bytes */
  char *base[NRT_MAX_OPERANDS];
  nrt_dtype have[NRT_MAX_OPERANDS];
  nrt_dtype want[NRT_MAX_OPERANDS];
  int direct[NRT_MAX_OPERANDS]; /* contiguous and already in the wanted dtype */
  rt_random_fn fn;
  void *ctx;
} walk;

static void walk_build(const nrt_op *op, const nrt_dtype *want, walk *w) {
  const nrt_tensor_view *out = &op->operands[0];
  w->nops = op->num_operands;
  w->num_outputs = op->num_outputs;
  w->numel = nrt_view_numel(out);
  w->ndim = 0;
  for (int k = 0; k < w->nops; k++) {
    w->base[k] = op->operands[k].data;
    w->have[k] = op->operands[k].dtype;
    w->want[k] = want[k];
  }
  for (int d = 0; d < out->ndim; d++) {
    if (out->shape[d] == 1) continue;
    int n = w->ndim, merge = n > 0;
    for (int k = 0; k < w->nops && merge; k++) {
      int64_t stride = op->operands[k].strides[d] * (int64_t)nrt_dtype_size(w->have[k]);
      merge = w->strides[k][n - 1] == stride * out->shape[d];
    }
    if (merge) {
      w->shape[n - 1] *= out->shape[d];
    } else {
      w->shape[n] = out->shape[d];
      w->ndim++;
    }
    for (int k = 0; k < w->nops; k++)
      w->strides[k][w->ndim - 1] = op->operands[k].strides[d] * (int64_t)nrt_dtype_size(w->have[k]);
  }
  for (int k = 0; k < w->nops; k++) {
    int64_t size = (int64_t)nrt_dtype_size(w->have[k]);
    w->direct[k] = w->have[k] == w->want[k] &&
                   (w->ndim == 0 || (w->ndim == 1 && w->strides[k][0] == size));
  }
}

/* Moves elements [first, first + count) of operand k between the tensor
 * and buf (contiguous, wanted dtype), converting; to_buffer says which
 * way. */
static void transfer(const walk *w, int k, int64_t first, int64_t count, char *buf, int to_buffer) {
  const int64_t *strides = w->strides[k];
  int64_t bsize = (int64_t)nrt_dtype_size(w->want[k]);
  rt_inner_loop loop = to_buffer ? rt_convert_loops[w->want[k]][w->have[k]]
                                 : rt_convert_loops[w->have[k]][w->want[k]];
  if (w->ndim == 0) {
    char *pair[2] = {to_buffer ? buf : w->base[k], to_buffer ? w->base[k] : buf};
    int64_t steps[2] = {0, 0};
    loop(pair, steps, 1, NULL);
    return;
  }
  int inner = w->ndim - 1;
  int64_t index[NRT_MAX_DIMS], rest = first;
  char *p = w->base[k];
  for (int d = inner; d >= 0; d--) {
    index[d] = rest % w->shape[d];
    rest /= w->shape[d];
    p += index[d] * strides[d];
  }
  while (count > 0) {
    int64_t n = w->shape[inner] - index[inner];
    if (n > count) n = count;
    char *pair[2] = {to_buffer ? buf : p, to_buffer ? p : buf};
    int64_t steps[2] = {to_buffer ? bsize : strides[inner], to_buffer ? strides[inner] : bsize};
    loop(pair, steps, n, NULL);
    buf += n * bsize;
    count -= n;
    index[inner] += n;
    p += n * strides[inner];
    if (index[inner] < w->shape[inner]) continue;
    p -= w->shape[inner] * strides[inner];
    index[inner] = 0;
    for (int d = inner - 1; d >= 0; d--) { /* odometer over the outer dims */
      p += strides[d];
      if (++index[d] < w->shape[d]) break;
      p -= w->shape[d] * strides[d];
      index[d] = 0;
    }
  }
}

static void run_chunks(int64_t begin, int64_t end, void *arg) {
  const walk *w = arg;
  _Alignas(64) char buffers[NRT_MAX_OPERANDS][RT_RANDOM_CHUNK * 8];
  for (int64_t c = begin; c < end; c++) {
    rt_random_chunk chunk;
    chunk.first = c * RT_RANDOM_CHUNK;
    chunk.count = w->numel - chunk.first < RT_RANDOM_CHUNK ? w->numel - chunk.first : RT_RANDOM_CHUNK;
    for (int k = 0; k < w->nops; k++) {
      if (w->direct[k]) {
        chunk.data[k] = w->base[k] + chunk.first * (int64_t)nrt_dtype_size(w->have[k]);
        continue;
      }
      chunk.data[k] = buffers[k];
      if (k >= w->num_outputs) transfer(w, k, chunk.first, chunk.count, buffers[k], 1);
    }
    w->fn(&chunk, w->ctx);
    for (int k = 0; k < w->num_outputs; k++)
      if (!w->direct[k]) transfer(w, k, chunk.first, chunk.count, buffers[k], 0);
  }
}

void rt_random_run(const nrt_op *op, const nrt_dtype *want, rt_random_fn fn, void *ctx) {
  walk w;
  walk_build(op, want, &w);
  if (w.numel == 0) return;
  w.fn = fn;
  w.ctx = ctx;
  int64_t chunks = (w.numel + RT_RANDOM_CHUNK - 1) / RT_RANDOM_CHUNK;
  rt_parallel_for(chunks, RT_PARALLEL_GRAIN / RT_RANDOM_CHUNK, run_chunks, &w);
}

nrt_status rt_random_check(const nrt_op *op, int operands, int outputs, int scalars,
                           rt_philox_stream *stream) {
  const char *name = nrt_op_name(op->code);
  if (op->num_operands != operands || op->num_outputs != outputs)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d operands (%d outputs), got %d (%d)",
                   name, operands, outputs, op->num_operands, op->num_outputs);
  if (op->num_scalars < scalars)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects %d scalars, got %d", name, scalars,
                   op->num_scalars);
  const nrt_tensor_view *out = &op->operands[0];
  for (int k = 1; k < operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    if (v->ndim != out->ndim || memcmp(v->shape, out->shape, (size_t)out->ndim * sizeof out->shape[0]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d's shape differs from the output's",
                     name, k);
  }
  if (stream) {
    stream->seed = (uint64_t)op->scalars[0].i;
    stream->offset = (uint64_t)op->scalars[1].i;
  }
  return NRT_SUCCESS;
}

void rt_random_error_record(rt_random_error *e, int64_t index, double value) {
  pthread_mutex_lock(&e->mu);
  if (!e->set || index < e->index) {
    e->set = 1;
    e->index = index;
    e->value = value;
  }
  pthread_mutex_unlock(&e->mu);
}
