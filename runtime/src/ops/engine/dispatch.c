/* The op table: names and kernels from NRT_OP_LIST, descriptor checks, and
 * the translation of device addresses to the runtime's host aliases. */
#include <string.h>
#include <stdint.h>
#include "internal.h"
#include "ops/engine/convert.h"

#define NAME_ENTRY_(CODE, name) [NRT_OP_##CODE] = #name,
static const char *const op_names[NRT_OP_COUNT] = {NRT_OP_LIST(NAME_ENTRY_)};
#undef NAME_ENTRY_

#define KERNEL_ENTRY_(CODE, name) [NRT_OP_##CODE] = rt_kernel_##name,
static const rt_kernel_fn kernels[NRT_OP_COUNT] = {NRT_OP_LIST(KERNEL_ENTRY_)};
#undef KERNEL_ENTRY_

const char *nrt_op_name(nrt_op_code code) {
  return (unsigned)code < NRT_OP_COUNT ? op_names[code] : "unknown_op";
}

int64_t nrt_view_numel(const nrt_tensor_view *view) {
  int64_t n = 1;
  for (int32_t d = 0; d < view->ndim; d++) n *= view->shape[d];
  return n;
}

/* Checks one view: rank, non-negative sizes, and that every element lies in
 * the device arena that holds its first element. Extents are computed with
 * overflow checks: a wrapped extent could pass the arena check while the
 * elements in between lie anywhere. A host view (nrt_op_execute_host) is
 * memory the caller vouches for: its shape is checked, not where it lies. */
static nrt_status validate_view(const char *op, int index, const nrt_tensor_view *v, int host) {
  if ((unsigned)v->dtype >= NRT_DTYPE_COUNT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d has an invalid dtype", op, index);
  if (v->ndim < 0 || v->ndim > NRT_MAX_DIMS)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: operand %d has %d dimensions; at most %d are supported",
                   op, index, v->ndim, NRT_MAX_DIMS);
  int empty = 0;
  for (int32_t d = 0; d < v->ndim; d++) {
    if (v->shape[d] < 0)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operand %d has negative size %lld in dim %d",
                     op, index, (long long)v->shape[d], d);
    if (v->shape[d] == 0) empty = 1;
  }
  if (empty) return NRT_SUCCESS; /* nothing is touched */
  int64_t elem = (int64_t)nrt_dtype_size(v->dtype);
  int64_t lo = 0, hi = 0, numel = 1; /* byte offsets of the lowest and highest element */
  for (int32_t d = 0; d < v->ndim; d++) {
    int64_t extent;
    if (__builtin_mul_overflow(v->shape[d] - 1, v->strides[d], &extent) ||
        __builtin_mul_overflow(extent, elem, &extent) ||
        (extent < 0 ? __builtin_add_overflow(lo, extent, &lo)
                    : __builtin_add_overflow(hi, extent, &hi)) ||
        __builtin_mul_overflow(numel, v->shape[d], &numel))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "%s: operand %d is too large (its size or extent overflows 64 bits)", op, index);
  }
  if (host)
    return v->data ? NRT_SUCCESS
                   : rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: host operand %d is NULL", op, index);
  int32_t first_dev, last_dev;
  uintptr_t base = (uintptr_t)v->data;
  if (nrt_pointer_get_device((const void *)(base + (uintptr_t)lo), &first_dev) != NRT_SUCCESS ||
      nrt_pointer_get_device((const void *)(base + (uintptr_t)hi + (uintptr_t)elem - 1),
                             &last_dev) != NRT_SUCCESS ||
      first_dev != last_dev)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: operand %d is not entirely in neuron device memory", op, index);
  return NRT_SUCCESS;
}

/* The ops with kernels for the storage dtypes (uint16 and up, op.h). */
int nrt_op_accepts_dtype(nrt_op_code code, nrt_dtype dtype) {
  if ((unsigned)dtype < NRT_UINT16) return 1;
  if ((unsigned)dtype >= NRT_DTYPE_COUNT) return 0;
  switch (code) {
    case NRT_OP_COPY: /* conversions between every pair */
    case NRT_OP_FILL:
    case NRT_OP_CAT: /* byte moves and COPY */
    case NRT_OP_ROLL:
      return 1;
    case NRT_OP_RANDOM: /* random_(from, to): int64 draws in range, converted exactly */
      return dtype == NRT_UINT16 || dtype == NRT_UINT32 || dtype == NRT_UINT64;
    case NRT_OP_SORT: /* unsigned keys (sort_keys.h), and unique's runs */
    case NRT_OP_SORT_ROWS:
    case NRT_OP_UNIQUE_SCAN:
    case NRT_OP_UNIQUE_COLLECT:
      return dtype == NRT_UINT16 || dtype == NRT_UINT32 || dtype == NRT_UINT64;
    case NRT_OP_GATHER: /* elements of up to 8 bytes */
    case NRT_OP_INDEX_SELECT:
      return nrt_dtype_size(dtype) <= 8;
    case NRT_OP_ADD: /* a + alpha * b in the CPU's complex arithmetic (pointwise_binary.c) */
      return dtype == NRT_COMPLEX64 || dtype == NRT_COMPLEX128;
    case NRT_OP_LOGCUMSUMEXP: /* a sequential scan whose branch of log must be the CPU's */
      return dtype == NRT_COMPLEX64 || dtype == NRT_COMPLEX128; /* the CPU has none for complex32 */
    case NRT_OP_LINALG_LU_FACTOR: /* complex matrices (linalg.h) */
    case NRT_OP_LINALG_LU_PIVOT:
    case NRT_OP_LINALG_TRIANGULAR_SOLVE:
    case NRT_OP_LINALG_CHOLESKY:
    case NRT_OP_LINALG_GEQRF:
    case NRT_OP_LINALG_ORMQR:
    case NRT_OP_LINALG_MATRIX_EXP:
    case NRT_OP_LINALG_EIG:
    case NRT_OP_LINALG_EIGH:
    case NRT_OP_LINALG_SVD:
    case NRT_OP_LINALG_LSTSQ:
    case NRT_OP_LINALG_LDL_FACTOR:
    case NRT_OP_LINALG_LDL_SOLVE:
      return dtype == NRT_COMPLEX64 || dtype == NRT_COMPLEX128;
    default:
      return 0;
  }
}

static nrt_status validate_op(const nrt_op *op, uint32_t host_mask) {
  if ((unsigned)op->code >= NRT_OP_COUNT)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "unknown op code %d", (int)op->code);
  const char *name = op_names[op->code];
  if (op->num_operands < 0 || op->num_operands > NRT_MAX_OPERANDS || op->num_scalars < 0 ||
      op->num_scalars > NRT_MAX_SCALARS)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad operand or scalar count", name);
  if (op->num_outputs < 0 || op->num_outputs > op->num_operands)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: bad output count %d", name, op->num_outputs);
  if (op->immediate_mask >> op->num_operands)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: immediate mask names missing operands", name);
  if (!nrt_op_accepts_dtype(op->code, op->compute_dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: dtype %s is not supported on the neuron device",
                   name, nrt_dtype_name(op->compute_dtype));
  for (int i = 0; i < op->num_operands; i++) {
    const nrt_tensor_view *v = &op->operands[i];
    nrt_status s;
    if ((unsigned)v->dtype < NRT_DTYPE_COUNT && !nrt_op_accepts_dtype(op->code, v->dtype))
      return rt_fail(NRT_ERROR_UNSUPPORTED,
                     "%s: operand %d: dtype %s is not supported on the neuron device", name, i,
                     nrt_dtype_name(v->dtype));
    if (op->immediate_mask & (1u << i)) {
      if (i < op->num_outputs)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: output %d cannot be immediate", name, i);
      if ((unsigned)v->dtype >= NRT_DTYPE_COUNT || v->ndim < 0 || v->ndim > NRT_MAX_DIMS)
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: immediate operand %d is malformed", name, i);
      for (int32_t d = 0; d < v->ndim; d++)
        if (v->strides[d] != 0 || v->shape[d] < 0)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "%s: immediate operand %d must be broadcast (stride 0)", name, i);
    } else if ((s = validate_view(name, i, v, (host_mask >> i) & 1))) {
      return s;
    }
  }
  return NRT_SUCCESS;
}

nrt_status rt_op_validate(const nrt_op *op) { return validate_op(op, 0); }

void rt_op_copy_used(nrt_op *dst, const nrt_op *op) {
  dst->code = op->code;
  dst->compute_dtype = op->compute_dtype;
  dst->num_operands = op->num_operands;
  dst->num_outputs = op->num_outputs;
  dst->num_scalars = op->num_scalars;
  dst->immediate_mask = op->immediate_mask;
  memcpy(dst->operands, op->operands, (size_t)op->num_operands * sizeof op->operands[0]);
  memcpy(dst->scalars, op->scalars, (size_t)op->num_scalars * sizeof op->scalars[0]);
  if (op->immediate_mask)
    memcpy(dst->immediates, op->immediates, (size_t)op->num_operands * sizeof op->immediates[0]);
}

/* Runs op with device addresses translated, host operands (host_mask) as
 * they are. */
static nrt_status run_op(const nrt_op *op, uint32_t host_mask) {
  nrt_op local;
  rt_op_copy_used(&local, op); /* the rest unset, as in a launched op */
  uint64_t immediate_values[NRT_MAX_OPERANDS][2]; /* storage of immediate operands (16 bytes: complex128) */
  for (int i = 0; i < local.num_operands; i++) {
    nrt_tensor_view *v = &local.operands[i];
    if (local.immediate_mask & (1u << i)) {
      rt_convert_scalar(v->dtype, &local.immediates[i], immediate_values[i]);
      v->data = immediate_values[i];
    } else if (v->data && !((host_mask >> i) & 1)) {
      v->data = nrt_device_to_host(v->data);
    }
  }
  return kernels[local.code](&local);
}

nrt_status rt_op_run(const nrt_op *op) { return run_op(op, 0); }

nrt_status nrt_op_execute_host(const nrt_op *op, uint32_t host_mask) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!op) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_op_execute_host: NULL op");
  if (op->num_operands >= 0 && op->num_operands <= NRT_MAX_OPERANDS && (host_mask >> op->num_operands))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the host mask names missing operands",
                   nrt_op_name(op->code));
  if (host_mask & op->immediate_mask)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: an operand cannot be both host memory and immediate",
                   nrt_op_name(op->code));
  if ((s = validate_op(op, host_mask))) return s;
  return run_op(op, host_mask);
}

nrt_status nrt_op_execute(const nrt_op *op) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!op) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_op_execute: NULL op");
  if ((s = rt_op_validate(op))) return s;
  return rt_op_run(op);
}
