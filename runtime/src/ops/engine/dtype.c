/* Facts about element types. */
#include "neuronrt/op.h"

#include "ops/engine/dtype_size.h"

static const struct {
  const char *name;
  int floating; /* 2: complex */
} dtypes[NRT_DTYPE_COUNT] = {
    [NRT_BOOL] = {"bool", 0},         [NRT_UINT8] = {"uint8", 0},
    [NRT_INT8] = {"int8", 0},         [NRT_INT16] = {"int16", 0},
    [NRT_INT32] = {"int32", 0},       [NRT_INT64] = {"int64", 0},
    [NRT_FLOAT16] = {"float16", 1},   [NRT_BFLOAT16] = {"bfloat16", 1},
    [NRT_FLOAT32] = {"float32", 1},   [NRT_FLOAT64] = {"float64", 1},
    [NRT_UINT16] = {"uint16", 0},     [NRT_UINT32] = {"uint32", 0},
    [NRT_UINT64] = {"uint64", 0},     [NRT_COMPLEX64] = {"complex64", 2},
    [NRT_COMPLEX128] = {"complex128", 2}, [NRT_COMPLEX32] = {"complex32", 2},
};

const unsigned char rt_dtype_bytes[NRT_DTYPE_COUNT] = {
    [NRT_BOOL] = 1,     [NRT_UINT8] = 1,      [NRT_INT8] = 1,       [NRT_INT16] = 2,
    [NRT_INT32] = 4,    [NRT_INT64] = 8,      [NRT_FLOAT16] = 2,    [NRT_BFLOAT16] = 2,
    [NRT_FLOAT32] = 4,  [NRT_FLOAT64] = 8,    [NRT_UINT16] = 2,     [NRT_UINT32] = 4,
    [NRT_UINT64] = 8,   [NRT_COMPLEX64] = 8,  [NRT_COMPLEX128] = 16, [NRT_COMPLEX32] = 4,
};

size_t nrt_dtype_size(nrt_dtype dtype) { return rt_dtype_size(dtype); }

const char *nrt_dtype_name(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT ? dtypes[dtype].name : "invalid";
}

int nrt_dtype_is_floating(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT && dtypes[dtype].floating == 1;
}

int nrt_dtype_is_complex(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT && dtypes[dtype].floating == 2;
}
