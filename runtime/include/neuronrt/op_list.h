/* The op vocabulary: the one list every layer shares.
 *
 * X(CODE, name, operands) expands into the op enum (NRT_OP_CODE), the name
 * table (nrt_op_name) and the kernel dispatch table (nrt_kernel_name).
 * Adding an op is one line here plus its kernel.
 *
 *   FILL  operands: [dst]       scalars: [value]
 *   COPY  operands: [dst, src]  src has dst's shape (broadcast with stride 0);
 *                               dtypes may differ (PyTorch conversion rules)
 */
#ifndef NEURONRT_OP_LIST_H
#define NEURONRT_OP_LIST_H

#define NRT_OP_LIST(X) \
  X(FILL, fill)        \
  X(COPY, copy)

#endif
