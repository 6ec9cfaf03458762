/* See iterate.h. */
#include "ops/engine/iterate.h"
#include "ops/engine/thread_pool.h"

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* Builds the walk order: drops size-1 dims, sorts by the output's stride
 * (largest outermost; ties keep PyTorch's order), merges contiguous dims. */
void rt_plan_build(int nops, const nrt_tensor_view *views, rt_plan *plan) {
  int order[NRT_MAX_DIMS], n = 0;
  const nrt_tensor_view *dst = &views[0];
  plan->nops = nops;
  plan->numel = nrt_view_numel(dst);
  for (int op = 0; op < nops; op++) plan->data[op] = views[op].data;
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
  plan->ndim = 0;
  for (int i = 0; i < n; i++) {
    int d = order[i];
    int k = plan->ndim;
    if (k > 0) {
      int mergeable = 1;
      for (int op = 0; op < nops && mergeable; op++) {
        int64_t elem = (int64_t)nrt_dtype_size(views[op].dtype);
        mergeable = plan->strides[op][k - 1] == views[op].strides[d] * elem * dst->shape[d];
      }
      if (mergeable) {
        plan->shape[k - 1] *= dst->shape[d];
        for (int op = 0; op < nops; op++)
          plan->strides[op][k - 1] = views[op].strides[d] * (int64_t)nrt_dtype_size(views[op].dtype);
        continue;
      }
    }
    plan->shape[k] = dst->shape[d];
    for (int op = 0; op < nops; op++)
      plan->strides[op][k] = views[op].strides[d] * (int64_t)nrt_dtype_size(views[op].dtype);
    plan->ndim++;
  }
}

void rt_plan_run(const rt_plan *plan, int64_t begin, int64_t end, rt_inner_loop loop, void *ctx) {
  int nops = plan->nops;
  char *data[NRT_MAX_OPERANDS];
  int64_t inner_strides[NRT_MAX_OPERANDS];
  if (begin >= end) return;
  if (plan->ndim == 0) { /* a single element */
    for (int op = 0; op < nops; op++) data[op] = plan->data[op], inner_strides[op] = 0;
    loop(data, inner_strides, 1, ctx);
    return;
  }
  int inner = plan->ndim - 1;
  int64_t index[NRT_MAX_DIMS];
  int64_t rest = begin;
  for (int d = inner; d >= 0; d--) { /* position of `begin` in the walk */
    index[d] = rest % plan->shape[d];
    rest /= plan->shape[d];
  }
  for (int op = 0; op < nops; op++) {
    data[op] = plan->data[op];
    for (int d = 0; d <= inner; d++) data[op] += index[d] * plan->strides[op][d];
    inner_strides[op] = plan->strides[op][inner];
  }
  int64_t remaining = end - begin;
  for (;;) {
    int64_t n = plan->shape[inner] - index[inner];
    if (n > remaining) n = remaining;
    loop(data, inner_strides, n, ctx);
    remaining -= n;
    if (remaining == 0) return;
    for (int op = 0; op < nops; op++) data[op] -= index[inner] * plan->strides[op][inner];
    index[inner] = 0;
    for (int d = inner - 1; d >= 0; d--) { /* odometer step over the outer dims */
      for (int op = 0; op < nops; op++) data[op] += plan->strides[op][d];
      if (++index[d] < plan->shape[d]) break;
      for (int op = 0; op < nops; op++) data[op] -= plan->strides[op][d] * plan->shape[d];
      index[d] = 0;
    }
  }
}

typedef struct range_job {
  const rt_plan *plan;
  rt_inner_loop loop;
  void *ctx;
} range_job;

static void run_range(int64_t begin, int64_t end, void *arg) {
  const range_job *job = arg;
  rt_plan_run(job->plan, begin, end, job->loop, job->ctx);
}

void rt_iterate(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx) {
  rt_plan plan;
  rt_plan_build(nops, views, &plan);
  if (plan.numel == 0) return;
  range_job job = {.plan = &plan, .loop = loop, .ctx = ctx};
  rt_parallel_for_light(plan.numel, RT_PARALLEL_GRAIN, run_range, &job);
}

void rt_iterate_serial(int nops, const nrt_tensor_view *views, rt_inner_loop loop, void *ctx) {
  rt_plan plan;
  rt_plan_build(nops, views, &plan);
  rt_plan_run(&plan, 0, plan.numel, loop, ctx);
}
