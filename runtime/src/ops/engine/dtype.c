/* Facts about element types. */
#include "neuronrt/op.h"

static const struct {
  const char *name;
  size_t size;
  int floating; /* 2: complex */
} dtypes[NRT_DTYPE_COUNT] = {
    [NRT_BOOL] = {"bool", 1, 0},        [NRT_UINT8] = {"uint8", 1, 0},
    [NRT_INT8] = {"int8", 1, 0},        [NRT_INT16] = {"int16", 2, 0},
    [NRT_INT32] = {"int32", 4, 0},      [NRT_INT64] = {"int64", 8, 0},
    [NRT_FLOAT16] = {"float16", 2, 1},  [NRT_BFLOAT16] = {"bfloat16", 2, 1},
    [NRT_FLOAT32] = {"float32", 4, 1},  [NRT_FLOAT64] = {"float64", 8, 1},
    [NRT_UINT16] = {"uint16", 2, 0},    [NRT_UINT32] = {"uint32", 4, 0},
    [NRT_UINT64] = {"uint64", 8, 0},    [NRT_COMPLEX64] = {"complex64", 8, 2},
    [NRT_COMPLEX128] = {"complex128", 16, 2}, [NRT_COMPLEX32] = {"complex32", 4, 2},
};

size_t nrt_dtype_size(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *nrt_dtype_name(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT ? dtypes[dtype].name : "invalid";
}

int nrt_dtype_is_floating(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT && dtypes[dtype].floating == 1;
}

int nrt_dtype_is_complex(nrt_dtype dtype) {
  return (unsigned)dtype < NRT_DTYPE_COUNT && dtypes[dtype].floating == 2;
}
