/* Comparison vocabulary of the extreme reductions (reduce_minmax.c,
 * reduce_aminmax.c), per compute type C: NaN tests, the replace rules of
 * PyTorch's CPU kernels (NaN wins over any number) and the identities. */
#ifndef NEURONRT_OPS_REDUCE_EXTREME_H
#define NEURONRT_OPS_REDUCE_EXTREME_H

#include "ops/reduce/reduce.h"

#define NAN_uint8_t(v) 0
#define NAN_int8_t(v) 0
#define NAN_int16_t(v) 0
#define NAN_int32_t(v) 0
#define NAN_int64_t(v) 0
#define NAN_float(v) ((v) != (v))
#define NAN_double(v) ((v) != (v))

#define NAN_VALUE_uint8_t 0
#define NAN_VALUE_int8_t 0
#define NAN_VALUE_int16_t 0
#define NAN_VALUE_int32_t 0
#define NAN_VALUE_int64_t 0
#define NAN_VALUE_float NAN
#define NAN_VALUE_double NAN

/* Does x replace the current extreme m (x comes later)? Bitwise
 * operators keep the loops free of branches, so they vectorise. */
#define MAX_TAKES(C, x, m) (((x) > (m)) | (NAN_##C(x) & !NAN_##C(m)))
#define MIN_TAKES(C, x, m) (((x) < (m)) | (NAN_##C(x) & !NAN_##C(m)))
/* Plain order of numbers (false for NaN). */
#define GREATER(x, m) ((x) > (m))
#define LESS(x, m) ((x) < (m))
/* Does (x, ix) beat (m, im) whatever their order? */
#define BEATS(C, TAKES, x, ix, m, im)                                                               \
  (TAKES(C, x, m) | ((((x) == (m)) | (NAN_##C(x) & NAN_##C(m))) & ((ix) < (im))))

/* Row numbers within a block, as wide as the compared values. */
#define IDX_uint8_t int8_t
#define IDX_int8_t int8_t
#define IDX_int16_t int16_t
#define IDX_int32_t int32_t
#define IDX_int64_t int64_t
#define IDX_float int32_t
#define IDX_double int64_t
#define BLOCK_COLS 512

/* Identities: the value an empty extreme starts from. */
#define LOWEST_uint8_t 0
#define LOWEST_int8_t INT8_MIN
#define LOWEST_int16_t INT16_MIN
#define LOWEST_int32_t INT32_MIN
#define LOWEST_int64_t INT64_MIN
#define LOWEST_float (-INFINITY)
#define LOWEST_double (-INFINITY)
#define HIGHEST_uint8_t UINT8_MAX
#define HIGHEST_int8_t INT8_MAX
#define HIGHEST_int16_t INT16_MAX
#define HIGHEST_int32_t INT32_MAX
#define HIGHEST_int64_t INT64_MAX
#define HIGHEST_float INFINITY
#define HIGHEST_double INFINITY

#endif
