/* nrt_dtype_size inlined for kernels' per-row address arithmetic: the public
 * function is a call through the PLT, and row loops of the normalisation and
 * attention kernels made tens of thousands of them per training step (about
 * 1% of a small GPT's step). Same table, read in place. */
#ifndef NEURONRT_OPS_ENGINE_DTYPE_SIZE_H
#define NEURONRT_OPS_ENGINE_DTYPE_SIZE_H

#include <stddef.h>
#include "neuronrt/op.h"

/* Bytes per element of each dtype (dtype.c; nrt_dtype_size reads it too). */
extern const unsigned char rt_dtype_bytes[NRT_DTYPE_COUNT];

static inline size_t rt_dtype_size(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT ? rt_dtype_bytes[dtype] : 0;
}

#endif
