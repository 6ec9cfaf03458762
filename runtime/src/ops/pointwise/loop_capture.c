/* See loop_capture.h. */
#include "ops/pointwise/loop_capture.h"

#include <string.h>
#include "ops/engine/convert.h"

static _Thread_local rt_loop_capture *active;

void rt_loop_capture_set(rt_loop_capture *c) { active = c; }

static int is_single_value(const nrt_tensor_view *v) {
  for (int d = 0; d < v->ndim; d++)
    if (v->strides[d] != 0 && v->shape[d] != 1) return 0;
  return 1;
}

void rt_loop_capture_record(const nrt_op *op, rt_inner_loop loop, const nrt_dtype *want,
                            const rt_scalars *sc) {
  rt_loop_capture *c = active;
  if (!c) return;
  if (++c->calls > 1 || op->num_operands > NRT_MAX_OPERANDS) {
    c->usable = 0;
    return;
  }
  c->usable = 1;
  c->loop = loop;
  c->sc = *sc;
  c->num_operands = op->num_operands;
  c->converted_mask = 0;
  for (int k = 0; k < op->num_operands; k++) {
    const nrt_tensor_view *v = &op->operands[k];
    c->data[k] = v->data;
    if (v->dtype == want[k]) continue;
    /* The driver converts a mismatched broadcast input once per run; any
     * other mismatch goes through its conversion buffers, which a replay
     * would not. */
    if (k < op->num_outputs || !(op->immediate_mask & (1u << k)) || !is_single_value(v) ||
        (unsigned)want[k] >= NRT_DTYPE_COUNT || (unsigned)v->dtype >= NRT_DTYPE_COUNT) {
      c->usable = 0;
      return;
    }
    char *pair[2] = {(char *)&c->converted[k], v->data};
    int64_t strides[2] = {0, 0};
    rt_convert_loops[want[k]][v->dtype](pair, strides, 1, NULL);
    c->converted_mask |= 1u << k;
  }
}
