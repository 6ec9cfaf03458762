/* COPY: dst = src converted to dst's dtype, any strides on either side.
 * Same-dtype copies move bits (as PyTorch's do: NaN payloads and signs
 * survive, which a round trip through float would not keep for float16 and
 * bfloat16); contiguous ones are a single memmove. Overlap between src and
 * dst is the caller's to rule out (the shim does, as PyTorch does). */
#include <string.h>
#include "internal.h"
#include "ops/engine/convert.h"
#include "ops/engine/thread_pool.h"

/* Byte ranges below which a contiguous copy stays on one thread: one core
 * cannot saturate memory bandwidth on its own, a few do. */
#define PARALLEL_COPY_BYTES (1 << 20)
#define COPY_GRAIN (256 << 10)

typedef struct byte_copy {
  char *dst;
  const char *src;
} byte_copy;

static void copy_bytes_range(int64_t begin, int64_t end, void *ctx) {
  const byte_copy *c = ctx;
  memcpy(c->dst + begin, c->src + begin, (size_t)(end - begin));
}

/* See internal.h: memmove for overlapping ranges (one thread); large
 * disjoint ones are split over the kernel thread pool. */
void rt_copy_bytes(void *dst, const void *src, size_t bytes) {
  const char *d = dst, *s = src;
  int disjoint = d + bytes <= s || s + bytes <= d;
  if (!disjoint || bytes < PARALLEL_COPY_BYTES) {
    memmove(dst, src, bytes);
    return;
  }
  byte_copy c = {dst, src};
  rt_parallel_for((int64_t)bytes, COPY_GRAIN, copy_bytes_range, &c);
}

static int is_contiguous(const nrt_tensor_view *v) {
  int64_t expected = 1;
  for (int32_t d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->strides[d] != expected) return 0;
    expected *= v->shape[d];
  }
  return 1;
}

#define BITS_LOOP(NAME, T)                                                      \
  static void copy_bits_##NAME(char **data, const int64_t *strides, int64_t n,  \
                               void *ctx) {                                     \
    (void)ctx;                                                                  \
    for (int64_t i = 0; i < n; i++)                                             \
      memcpy(data[0] + i * strides[0], data[1] + i * strides[1], sizeof(T));    \
  }
BITS_LOOP(8, uint8_t)
BITS_LOOP(16, uint16_t)
BITS_LOOP(32, uint32_t)
BITS_LOOP(64, uint64_t)

static int same_shape(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

nrt_status rt_kernel_copy(const nrt_op *op) {
  if (op->num_operands != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: expects 2 operands, got %d", op->num_operands);
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1];
  if (!same_shape(dst, src))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: source shape differs from destination shape");
  int64_t n = nrt_view_numel(dst);
  if (n == 0) return NRT_SUCCESS;
  if (dst->dtype == src->dtype && is_contiguous(dst) && is_contiguous(src)) {
    rt_copy_bytes(dst->data, src->data, (size_t)n * nrt_dtype_size(dst->dtype));
    return NRT_SUCCESS;
  }
  rt_inner_loop loop = rt_convert_loops[dst->dtype][src->dtype];
  if (dst->dtype == src->dtype) {
    size_t size = nrt_dtype_size(dst->dtype);
    loop = size == 1 ? copy_bits_8 : size == 2 ? copy_bits_16 : size == 4 ? copy_bits_32 : copy_bits_64;
  }
  rt_iterate(2, op->operands, loop, NULL);
  return NRT_SUCCESS;
}
