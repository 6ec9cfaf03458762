/* Negative log-likelihood loss, forward and backward (NLL_LOSS,
 * NLL_LOSS_BACKWARD in neuronrt/ops/nn.h).
 *
 * The input is [batch, classes, spatial] (nll_loss has spatial 1,
 * nll_loss2d the flattened image), the target [batch, spatial]. Positions
 * are cut into fixed blocks of NLL_BLOCK; each block sums its losses and
 * weights in float64, and the blocks are added in order, so a reduced loss
 * does not depend on the thread count. A target out of range is reported
 * with the smallest such position's value.
 */
#include <stdatomic.h>
#include <string.h>
#include "ops/nn/nn_common.h"

#define NLL_BLOCK 4096

enum { REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM };

typedef struct nll_job {
  nn_operand in, grad_in;  /* [batch, classes, spatial] */
  nn_operand target;       /* [1, batch, spatial] */
  nn_operand per_position; /* none: out (forward) or grad_out (backward), [1, batch, spatial] */
  int64_t batch, classes, spatial, positions;
  int reduction;
  int64_t ignore_index;
  const double *weight;    /* [classes] or NULL */
  double scale;            /* backward, reduced: d loss / d (-weight x) */
  double *block_loss, *block_weight;
  atomic_llong bad_position; /* smallest position with a bad target, or INT64_MAX */
  int64_t bad_value;
  atomic_flag bad_lock;
} nll_job;

static void record_bad(nll_job *job, int64_t pos, int64_t value) {
  while (atomic_flag_test_and_set(&job->bad_lock)) {
  }
  if (pos < atomic_load(&job->bad_position)) {
    atomic_store(&job->bad_position, pos);
    job->bad_value = value;
  }
  atomic_flag_clear(&job->bad_lock);
}

static double read_double(const char *p, nrt_dtype t) {
  double v;
  nn_convert(&v, NRT_FLOAT64, 0, p, t, 0, 1);
  return v;
}

static void write_double(char *p, nrt_dtype t, double v) { nn_convert(p, t, 0, &v, NRT_FLOAT64, 0, 1); }

/* The target at position p and its weight; 0 weight for ignore_index. */
static int target_at(nll_job *job, int64_t p, int64_t *t, double *w) {
  int64_t b = p / job->spatial, s = p % job->spatial;
  *t = *(const int64_t *)(const void *)(job->target.base + b * job->target.stride[1] + s * job->target.stride[2]);
  if (*t == job->ignore_index) {
    *w = 0;
    return 0;
  }
  if (*t < 0 || *t >= job->classes) {
    record_bad(job, p, *t);
    *w = 0;
    return 0;
  }
  *w = job->weight ? job->weight[*t] : 1.0;
  return 1;
}

static void nll_forward_range(int64_t begin, int64_t end, void *ctx) {
  nll_job *job = ctx;
  for (int64_t blk = begin; blk < end; blk++) {
    double loss_sum = 0, weight_sum = 0;
    int64_t last = (blk + 1) * NLL_BLOCK < job->positions ? (blk + 1) * NLL_BLOCK : job->positions;
    for (int64_t p = blk * NLL_BLOCK; p < last; p++) {
      int64_t t, b = p / job->spatial, s = p % job->spatial;
      double w, loss = 0;
      if (target_at(job, p, &t, &w))
        loss = -w * read_double(job->in.base + b * job->in.stride[0] + t * job->in.stride[1] +
                                    s * job->in.stride[2],
                                job->in.dtype);
      if (job->reduction == REDUCTION_NONE) {
        const nn_operand *o = &job->per_position;
        write_double(o->base + b * o->stride[1] + s * o->stride[2], o->dtype, loss);
      }
      loss_sum += loss;
      weight_sum += w;
    }
    job->block_loss[blk] = loss_sum;
    job->block_weight[blk] = weight_sum;
  }
}

/* Zeroes grad_in for batch elements [begin, end) and writes their gradients. */
static void nll_backward_range(int64_t begin, int64_t end, void *ctx) {
  nll_job *job = ctx;
  const double zero = 0;
  const nn_operand *g = &job->grad_in;
  const int64_t elem = (int64_t)nrt_dtype_size(g->dtype);
  /* zero (all bits clear in every floating dtype) as one memset per batch
   * element when its [classes, spatial] block is dense, else run by run */
  const int dense = (job->spatial == 1 || g->stride[2] == elem) &&
                    (job->classes == 1 || g->stride[1] == job->spatial * elem);
  for (int64_t b = begin; b < end; b++) {
    char *slab = g->base + b * g->stride[0];
    if (dense)
      memset(slab, 0, (size_t)(job->classes * job->spatial * elem));
    else if (job->spatial == 1)
      nn_convert(slab, g->dtype, g->stride[1], &zero, NRT_FLOAT64, 0, job->classes);
    else
      for (int64_t c = 0; c < job->classes; c++)
        nn_convert(slab + c * g->stride[1], g->dtype, g->stride[2], &zero, NRT_FLOAT64, 0, job->spatial);
    for (int64_t s = 0; s < job->spatial; s++) {
      int64_t t, p = b * job->spatial + s;
      double w;
      if (!target_at(job, p, &t, &w)) continue;
      double scale = job->scale;
      if (job->reduction == REDUCTION_NONE) {
        const nn_operand *o = &job->per_position;
        scale = read_double(o->base + b * o->stride[1] + s * o->stride[2], o->dtype);
      }
      write_double(g->base + b * g->stride[0] + t * g->stride[1] + s * g->stride[2], g->dtype, -w * scale);
    }
  }
}

/* Reads the geometry, scalars, target and weight shared by both ops. */
static nrt_status nll_setup(const nrt_op *op, int data_k, int target_k, int weight_k, nll_job *job) {
  const char *name = nrt_op_name(op->code);
  const nrt_tensor_view *x = &op->operands[data_k], *t = &op->operands[target_k];
  if (op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects scalars [reduction, ignore_index]", name);
  job->reduction = (int)op->scalars[0].i;
  job->ignore_index = op->scalars[1].i;
  if (job->reduction < REDUCTION_NONE || job->reduction > REDUCTION_SUM)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: unknown reduction %d", name, job->reduction);
  if (x->ndim != 3 || !nn_is_float(x->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the input must be a floating [batch, classes, spatial] view",
                   name);
  job->batch = x->shape[0];
  job->classes = x->shape[1];
  job->spatial = x->shape[2];
  job->positions = job->batch * job->spatial;
  if (t->ndim != 2 || t->shape[0] != job->batch || t->shape[1] != job->spatial || t->dtype != NRT_INT64)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the target must be an int64 [batch, spatial] view", name);
  job->target = nn_operand_of(t);
  atomic_init(&job->bad_position, INT64_MAX);
  atomic_flag_clear(&job->bad_lock);
  void *w = NULL;
  nrt_status s = nn_load_vector(op, weight_k, NRT_FLOAT64, job->classes, &w);
  job->weight = w;
  return s;
}

static nrt_status nll_bad_target(const char *name, nll_job *job) {
  if (atomic_load(&job->bad_position) == INT64_MAX) return NRT_SUCCESS;
  return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE, "%s: Target %lld is out of bounds.", name,
                 (long long)job->bad_value);
}

static nrt_status check_per_position(const nrt_op *op, int k, const nll_job *job) {
  const nrt_tensor_view *v = &op->operands[k];
  if (v->ndim != 2 || v->shape[0] != job->batch || v->shape[1] != job->spatial || !nn_is_float(v->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a floating [batch, spatial] view",
                   nrt_op_name(op->code), k);
  return NRT_SUCCESS;
}

static nrt_status check_single(const nrt_op *op, int k) {
  const nrt_tensor_view *v = &op->operands[k];
  if (nrt_view_numel(v) != 1 || !nn_is_float(v->dtype))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d must be a single floating value",
                   nrt_op_name(op->code), k);
  return NRT_SUCCESS;
}

/* NLL_LOSS [out, total_weight, in, target, weight] scalars [reduction, ignore_index] */
nrt_status rt_kernel_nll_loss(const nrt_op *op) {
  const char *name = "nll_loss";
  nll_job job = {0};
  nrt_status s = nn_check_operands(op, 5, 2, 0x17u);
  if (s || (s = nll_setup(op, 2, 3, 4, &job))) goto done;
  if ((s = check_single(op, 1)) ||
      (s = job.reduction == REDUCTION_NONE ? check_per_position(op, 0, &job) : check_single(op, 0)))
    goto done;
  if (job.reduction == REDUCTION_NONE) job.per_position = nn_operand_of(&op->operands[0]);
  job.in = nn_operand_of(&op->operands[2]);
  int64_t blocks = (job.positions + NLL_BLOCK - 1) / NLL_BLOCK;
  job.block_loss = calloc((size_t)blocks + 1, sizeof(double));
  job.block_weight = calloc((size_t)blocks + 1, sizeof(double));
  if (!job.block_loss || !job.block_weight) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    goto done;
  }
  rt_parallel_for(blocks, 1, nll_forward_range, &job);
  if ((s = nll_bad_target(name, &job))) goto done;
  double loss = 0, weight = 0;
  for (int64_t blk = 0; blk < blocks; blk++) {
    loss += job.block_loss[blk];
    weight += job.block_weight[blk];
  }
  if (job.reduction == REDUCTION_MEAN)
    write_double(op->operands[0].data, op->operands[0].dtype, loss / weight);
  else if (job.reduction == REDUCTION_SUM)
    write_double(op->operands[0].data, op->operands[0].dtype, loss);
  write_double(op->operands[1].data, op->operands[1].dtype, job.reduction == REDUCTION_NONE ? 0 : weight);
done:
  free((void *)job.weight);
  free(job.block_loss);
  free(job.block_weight);
  return s;
}

/* NLL_LOSS_BACKWARD [grad_in, grad_out, target, weight, total_weight]
 * scalars [reduction, ignore_index] */
nrt_status rt_kernel_nll_loss_backward(const nrt_op *op) {
  const char *name = "nll_loss_backward";
  nll_job job = {0};
  nrt_status s = nn_check_operands(op, 5, 1, 0x1bu);
  if (s || (s = nll_setup(op, 0, 2, 3, &job))) goto done;
  if ((s = check_single(op, 4)) ||
      (s = job.reduction == REDUCTION_NONE ? check_per_position(op, 1, &job) : check_single(op, 1)))
    goto done;
  job.grad_in = nn_operand_of(&op->operands[0]);
  if (job.reduction == REDUCTION_NONE) {
    job.per_position = nn_operand_of(&op->operands[1]);
  } else {
    job.scale = read_double(op->operands[1].data, op->operands[1].dtype);
    if (job.reduction == REDUCTION_MEAN) job.scale /= read_double(op->operands[4].data, op->operands[4].dtype);
  }
  if (job.batch * job.classes * job.spatial == 0) goto done;
  rt_parallel_for(job.batch, nn_grain(job.classes * job.spatial), nll_backward_range, &job);
  s = nll_bad_target(name, &job);
done:
  free((void *)job.weight);
  return s;
}
