/* FILL: every element of dst becomes the scalar, converted to dst's dtype.
 * A complex dst takes an optional second scalar, the imaginary part (a
 * float); without it the imaginary part is 0. */
#include <string.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/iterate.h"
#include "ops/engine/scalar_types.h"

typedef struct fill_value {
  unsigned char bytes[16];
  size_t size;
} fill_value;

#define FILL_LOOP(NAME, T)                                                   \
  static void fill_##NAME(char **data, const int64_t *strides, int64_t n,    \
                          void *ctx) {                                       \
    T v;                                                                     \
    memcpy(&v, ((const fill_value *)ctx)->bytes, sizeof v);                  \
    if (strides[0] == (int64_t)sizeof(T)) {                                  \
      T *d = (T *)data[0];                                                   \
      for (int64_t i = 0; i < n; i++) d[i] = v;                              \
    } else {                                                                 \
      for (int64_t i = 0; i < n; i++) memcpy(data[0] + i * strides[0], &v, sizeof v); \
    }                                                                        \
  }
FILL_LOOP(8, uint8_t)
FILL_LOOP(16, uint16_t)
FILL_LOOP(32, uint32_t)
FILL_LOOP(64, uint64_t)
typedef struct fill_bits128 {
  uint64_t lo, hi;
} fill_bits128;
FILL_LOOP(128, fill_bits128)

nrt_status rt_kernel_fill(const nrt_op *op) {
  const nrt_tensor_view *dst = &op->operands[0];
  int complex = nrt_dtype_is_complex(dst->dtype);
  if (op->num_operands != 1 || op->num_scalars < 1 || op->num_scalars > 1 + complex)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "fill: expects 1 operand and 1 scalar (2 for a complex operand)");
  fill_value value;
  memset(&value, 0, sizeof value);
  value.size = nrt_dtype_size(dst->dtype);
  rt_convert_scalar(dst->dtype, &op->scalars[0], value.bytes);
  if (complex && op->num_scalars == 2) {
    const nrt_scalar *im = &op->scalars[1];
    double v = im->is_float ? im->f : (double)im->i;
    if (dst->dtype == NRT_COMPLEX32) {
      rt_half h = rt_half_from_float((float)v); /* through float, as c10 */
      memcpy(value.bytes + 2, &h, sizeof h);
    } else if (dst->dtype == NRT_COMPLEX64) {
      float f = (float)v;
      memcpy(value.bytes + 4, &f, sizeof f);
    } else {
      memcpy(value.bytes + 8, &v, sizeof v);
    }
  }
  rt_inner_loop loop = value.size == 1 ? fill_8 : value.size == 2 ? fill_16
                       : value.size == 4 ? fill_32 : value.size == 8 ? fill_64 : fill_128;
  rt_iterate(1, dst, loop, &value);
  return NRT_SUCCESS;
}
