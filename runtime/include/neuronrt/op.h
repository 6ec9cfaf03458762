/* Op descriptors: op code + tensor views + scalar attributes.
 *
 * Eager calls, fused groups and compiled graphs all describe device work with
 * an nrt_op. Views hold device addresses; strides are in elements and may be
 * zero (broadcast) or negative.
 */
#ifndef NEURONRT_OP_H
#define NEURONRT_OP_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/status.h"
#include "neuronrt/op_list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_dtype {
  NRT_BOOL = 0,
  NRT_UINT8,
  NRT_INT8,
  NRT_INT16,
  NRT_INT32,
  NRT_INT64,
  NRT_FLOAT16,
  NRT_BFLOAT16,
  NRT_FLOAT32,
  NRT_FLOAT64,
  /* Storage dtypes: added after the others so that the values above (kept
   * in compiled graphs) do not move. Complex values are (real, imaginary)
   * pairs of float32 / float64 (float16 for complex32, PyTorch's chalf), as
   * std::complex lays them out. Only the ops
   * nrt_op_accepts_dtype() names take these; every other op refuses them. */
  NRT_UINT16,
  NRT_UINT32,
  NRT_UINT64,
  NRT_COMPLEX64,
  NRT_COMPLEX128,
  NRT_COMPLEX32,
  NRT_DTYPE_COUNT
} nrt_dtype;

size_t nrt_dtype_size(nrt_dtype dtype);
const char *nrt_dtype_name(nrt_dtype dtype);
int nrt_dtype_is_floating(nrt_dtype dtype);
int nrt_dtype_is_complex(nrt_dtype dtype);

/* 25 dims, as CUDA's kernels take (MAX_TENSORINFO_DIMS): PyTorch's own
 * tests go that far. */
#define NRT_MAX_DIMS 25
#define NRT_MAX_OPERANDS 8
#define NRT_MAX_SCALARS 8

typedef struct nrt_tensor_view {
  void *data;       /* device address of element (0, ..., 0) */
  nrt_dtype dtype;
  int32_t ndim;     /* 0 for a scalar */
  int64_t shape[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_DIMS];
} nrt_tensor_view;

/* A scalar attribute: integral ops read .i, floating ops read .f; is_float
 * says which one the producer filled. */
typedef struct nrt_scalar {
  int32_t is_float;
  double f;
  int64_t i;
} nrt_scalar;

typedef enum nrt_op_code {
#define NRT_OP_ENUM_(CODE, name) NRT_OP_##CODE,
  NRT_OP_LIST(NRT_OP_ENUM_)
#undef NRT_OP_ENUM_
  NRT_OP_COUNT
} nrt_op_code;

/* An op: outputs come first among the operands. An operand whose bit is
 * set in immediate_mask is a host value, not memory: its data is NULL, its
 * strides are 0 (it is broadcast) and its value is immediates[k], read as
 * the view's dtype. This carries Python numbers and CPU 0-d tensors into
 * device ops without a copy to device memory. Pointwise kernels compute in
 * compute_dtype (float32 when it is float16 or bfloat16, as PyTorch's CPU
 * kernels do) and convert operands stored in other dtypes on the fly. */
typedef struct nrt_op {
  nrt_op_code code;
  nrt_dtype compute_dtype; /* PyTorch's common dtype of the inputs (pointwise ops) */
  int32_t num_operands;
  int32_t num_outputs;
  int32_t num_scalars;
  uint32_t immediate_mask;
  nrt_tensor_view operands[NRT_MAX_OPERANDS];
  nrt_scalar scalars[NRT_MAX_SCALARS];
  nrt_scalar immediates[NRT_MAX_OPERANDS];
} nrt_op;

const char *nrt_op_name(nrt_op_code code);

/* 1 if op `code` has a kernel for operands of this dtype. The ten original
 * dtypes are every op's business (each kernel checks its own); the storage
 * dtypes (uint16 and up) reach only the ops that handle them, and the
 * runtime refuses any other op with such an operand before it runs. */
int nrt_op_accepts_dtype(nrt_op_code code, nrt_dtype dtype);

/* Number of elements of a view (product of its shape). */
int64_t nrt_view_numel(const nrt_tensor_view *view);

/* Runs an op synchronously on the calling thread, outside any stream. For
 * tests and for the runtime's own workers; views must be device memory. */
nrt_status nrt_op_execute(const nrt_op *op);

/* nrt_op_execute where the operands whose bit is set in host_mask hold host
 * addresses (memory the caller has mapped, large enough for the view), not
 * device ones: for data outside every device, such as the shared-memory
 * segment between the processes of the distributed backend. The other
 * operands are checked as nrt_op_execute checks them. */
nrt_status nrt_op_execute_host(const nrt_op *op, uint32_t host_mask);

#ifdef __cplusplus
}
#endif
#endif
