/* The roofline estimate of neuronrt/roofline.h. */
#include <string.h>
#include "internal.h"
#include "neuronrt/roofline.h"

/* The Tensor engine's systolic array: 128 x 128 multiply-adds per cycle. */
#define PE_COLUMNS 128.0

/* Bytes of a view, each element once: broadcast (stride 0) dimensions
 * are read once, whatever their size. */
static double view_bytes(const nrt_tensor_view *v) {
  if (!v->data) return 0; /* absent, empty or an immediate */
  double n = 1;
  for (int d = 0; d < v->ndim; d++)
    if (v->strides[d] != 0 || v->shape[d] == 0) n *= (double)v->shape[d];
  return n * (double)nrt_dtype_size(v->dtype);
}

void nrt_roofline_add_view(const nrt_tensor_view *v, nrt_roofline *r) { r->bytes += view_bytes(v); }

static double numel(const nrt_tensor_view *v) { return (double)nrt_view_numel(v); }

static double largest_numel(const nrt_op *op) {
  double n = 0;
  for (int k = 0; k < op->num_operands; k++)
    if (numel(&op->operands[k]) > n) n = numel(&op->operands[k]);
  return n;
}

static int wide(nrt_dtype t) { return nrt_dtype_size(t) >= 4; }

/* Multiply-adds of a convolution: output elements times the weight's
 * elements per output channel. */
static double conv_macs(const nrt_tensor_view *out, const nrt_tensor_view *w) {
  return w->ndim > 0 && w->shape[0] > 0 ? numel(out) * numel(w) / (double)w->shape[0] : 0;
}

static void tensor_work(nrt_roofline *r, double flops, nrt_dtype in) {
  r->work[NRT_ROOFLINE_TENSOR] += flops;
  if (wide(in)) r->fp32_tensor = 1;
}

void nrt_roofline_add_op(const nrt_op *op, uint32_t skip_mask, nrt_roofline *r) {
  for (int k = 0; k < op->num_operands; k++)
    if (!(skip_mask >> k & 1u) && !(op->immediate_mask >> k & 1u))
      r->bytes += view_bytes(&op->operands[k]);
  const nrt_tensor_view *v = op->operands;
  double n = largest_numel(op);
  switch (op->code) {
    case NRT_OP_GEMM: { /* out (T?, M, N), a (S?, M, K) */
      const nrt_tensor_view *a = &v[1];
      double k = a->ndim ? (double)a->shape[a->ndim - 1] : 0;
      double s = a->ndim == 3 ? (double)a->shape[0] : 1;
      double mn = v[0].ndim == 3 ? numel(&v[0]) / (double)v[0].shape[0] : numel(&v[0]);
      tensor_work(r, 2 * s * mn * k, a->dtype);
      return;
    }
    case NRT_OP_CONV2D: tensor_work(r, 2 * conv_macs(&v[0], &v[2]), v[1].dtype); return;
    case NRT_OP_CONV2D_INPUT_GRAD: tensor_work(r, 2 * conv_macs(&v[1], &v[2]), v[1].dtype); return;
    case NRT_OP_CONV2D_WEIGHT_GRAD: tensor_work(r, 2 * conv_macs(&v[2], &v[0]), v[1].dtype); return;
    case NRT_OP_SDPA_FORWARD: case NRT_OP_SDPA_BACKWARD_KV: case NRT_OP_SDPA_BACKWARD_Q: {
      /* q (B, H, L, E) and k (B, Hk, S, E): two products of B H L S E
       * forward; the backward recomputes the scores and takes two (Q) or
       * three (KV) more. */
      int qi = op->code == NRT_OP_SDPA_FORWARD ? 2 : op->num_outputs + 1;
      const nrt_tensor_view *q = &v[qi], *key = &v[qi + 1];
      if (q->ndim != 4 || key->ndim != 4) break;
      double pairs = numel(q) * (double)key->shape[2];
      double products = op->code == NRT_OP_SDPA_FORWARD ? 2 : op->code == NRT_OP_SDPA_BACKWARD_Q ? 3 : 4;
      tensor_work(r, 2 * products * pairs, q->dtype);
      r->work[NRT_ROOFLINE_SCALAR] += pairs / (double)q->shape[3]; /* exp of each score */
      return;
    }
    case NRT_OP_SOFTMAX: case NRT_OP_LOG_SOFTMAX:
    case NRT_OP_SOFTMAX_BACKWARD: case NRT_OP_LOG_SOFTMAX_BACKWARD:
    case NRT_OP_LOGSUMEXP:
      r->work[NRT_ROOFLINE_SCALAR] += n; /* exp (or log) of each element */
      r->work[NRT_ROOFLINE_VECTOR] += 3 * n; /* max, sum, scale */
      return;
    case NRT_OP_LAYER_NORM: case NRT_OP_RMS_NORM: case NRT_OP_GROUP_NORM: case NRT_OP_BATCH_NORM:
    case NRT_OP_LAYER_NORM_BACKWARD: case NRT_OP_RMS_NORM_BACKWARD:
    case NRT_OP_GROUP_NORM_BACKWARD: case NRT_OP_BATCH_NORM_BACKWARD:
      r->work[NRT_ROOFLINE_VECTOR] += 4 * n; /* statistics, then normalise */
      return;
#define SCALAR_CASE_(CODE, name) case NRT_OP_##CODE:
    NRT_UNARY_FLOAT_OPS(SCALAR_CASE_)
    NRT_ACTIVATION_OPS(SCALAR_CASE_)
#undef SCALAR_CASE_
      r->work[NRT_ROOFLINE_SCALAR] += n;
      return;
    case NRT_OP_COPY: case NRT_OP_FILL:
      return; /* DMA: bytes only */
    default: break;
  }
  r->work[NRT_ROOFLINE_VECTOR] += n;
}

void nrt_roofline_finish(const nrt_device_properties *props, nrt_roofline *r) {
  double lanes = (double)props->sbuf_partitions;
  double rate[NRT_ROOFLINE_ENGINE_COUNT] = {0};
  rate[NRT_ROOFLINE_TENSOR] = 2 * lanes * PE_COLUMNS * (double)props->tensor_engine_hz /
                              (r->fp32_tensor ? 4 : 1);
  rate[NRT_ROOFLINE_VECTOR] = lanes * (double)props->vector_engine_hz;
  rate[NRT_ROOFLINE_SCALAR] = lanes * (double)props->scalar_engine_hz;
  r->memory_ns = r->bytes / (double)props->hbm_bytes_per_s * 1e9;
  r->compute_ns = 0;
  r->engine = NRT_ROOFLINE_NONE;
  for (int e = NRT_ROOFLINE_TENSOR; e < NRT_ROOFLINE_ENGINE_COUNT; e++) {
    double t = rate[e] > 0 ? r->work[e] / rate[e] * 1e9 : 0;
    if (t > r->compute_ns) {
      r->compute_ns = t;
      r->engine = e;
    }
  }
  r->est_ns = r->memory_ns > r->compute_ns ? r->memory_ns : r->compute_ns;
  if (r->link_ns > r->est_ns) r->est_ns = r->link_ns;
  r->bound = nrt_roofline_bound(r);
}

int32_t nrt_roofline_bound(const nrt_roofline *r) {
  if (r->est_ns <= 0) return NRT_BOUND_UNKNOWN;
  if (r->link_ns > 0 && r->link_ns >= r->memory_ns && r->link_ns >= r->compute_ns) return NRT_BOUND_LINK;
  return r->memory_ns >= r->compute_ns ? NRT_BOUND_MEMORY : NRT_BOUND_COMPUTE;
}

nrt_status nrt_roofline_op(int32_t device, const nrt_op *op, nrt_roofline *out) {
  nrt_status s = rt_ensure_init();
  if (s || (s = rt_check_device(device))) return s;
  if (!op || !out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_roofline_op: NULL argument");
  memset(out, 0, sizeof *out);
  nrt_roofline_add_op(op, 0, out);
  nrt_roofline_finish(rt_device_props(device), out);
  return NRT_SUCCESS;
}

const char *nrt_roofline_engine_name(int32_t engine) {
  static const char *names[] = {"none", "tensor", "vector", "scalar"};
  return engine >= 0 && engine < NRT_ROOFLINE_ENGINE_COUNT ? names[engine] : "none";
}

const char *nrt_bound_name(int32_t bound) {
  return bound == NRT_BOUND_MEMORY    ? "memory"
         : bound == NRT_BOUND_COMPUTE ? "compute"
         : bound == NRT_BOUND_LINK    ? "link"
                                      : "unknown";
}
