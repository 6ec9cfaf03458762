/* COPY: dst = src converted to dst's dtype, any strides on either side.
 * An optional scalar holds flags applied to the result, for PyTorch's
 * conjugate and negative bits: bit 0 conjugates (negates imaginary parts;
 * nothing for a real dst), bit 1 negates. Floating negation flips the sign
 * bit, as -x does (NaN payloads kept); integers negate modulo 2^n.
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
  rt_parallel_for_light((int64_t)bytes, COPY_GRAIN, copy_bytes_range, &c);
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
typedef struct bits128 {
  uint64_t lo, hi;
} bits128;
BITS_LOOP(128, bits128)

static int same_shape(const nrt_tensor_view *a, const nrt_tensor_view *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* The flag pass over dst: sign flips of the chosen components. */
typedef struct sign_flip {
  int complex, conj, neg;
  size_t size; /* of a component */
} sign_flip;

static void flip_component(char *p, size_t size, int integer) {
  if (integer) {
    if (size == 1) *(uint8_t *)p = (uint8_t)(0u - *(uint8_t *)p);
    else if (size == 2) { uint16_t v; memcpy(&v, p, 2); v = (uint16_t)(0u - v); memcpy(p, &v, 2); }
    else if (size == 4) { uint32_t v; memcpy(&v, p, 4); v = 0u - v; memcpy(p, &v, 4); }
    else { uint64_t v; memcpy(&v, p, 8); v = 0u - v; memcpy(p, &v, 8); }
    return;
  }
  p[size - 1] ^= (char)0x80; /* little-endian: the sign bit is in the last byte */
}

static void sign_flip_loop(char **data, const int64_t *strides, int64_t n, void *ctx) {
  const sign_flip *f = ctx;
  for (int64_t i = 0; i < n; i++) {
    char *p = data[0] + i * strides[0];
    if (f->complex) {
      if (f->neg) flip_component(p, f->size, 0);
      if (f->neg != f->conj) flip_component(p + f->size, f->size, 0);
    } else {
      flip_component(p, f->size, 0);
    }
  }
}

static void sign_flip_int_loop(char **data, const int64_t *strides, int64_t n, void *ctx) {
  const sign_flip *f = ctx;
  for (int64_t i = 0; i < n; i++) flip_component(data[0] + i * strides[0], f->size, 1);
}

static void apply_flags(const nrt_tensor_view *dst, int64_t flags) {
  sign_flip f;
  f.complex = nrt_dtype_is_complex(dst->dtype);
  f.conj = (int)(flags & 1) && f.complex;
  f.neg = (int)((flags >> 1) & 1);
  f.size = nrt_dtype_size(dst->dtype) / (f.complex ? 2 : 1);
  if (!f.conj && !f.neg) return;
  if (dst->dtype == NRT_BOOL) return; /* -x of a bool is x (no negative bit on bools anyway) */
  int integer = !f.complex && !nrt_dtype_is_floating(dst->dtype);
  rt_iterate(1, dst, integer ? sign_flip_int_loop : sign_flip_loop, &f);
}

nrt_status rt_kernel_copy(const nrt_op *op) {
  if (op->num_operands != 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: expects 2 operands, got %d", op->num_operands);
  if (op->num_scalars > 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: expects at most 1 scalar (flags), got %d",
                   op->num_scalars);
  int64_t flags = op->num_scalars ? op->scalars[0].i : 0;
  if (flags & ~(int64_t)3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: unknown flags 0x%llx", (long long)flags);
  const nrt_tensor_view *dst = &op->operands[0], *src = &op->operands[1];
  if (!same_shape(dst, src))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "copy: source shape differs from destination shape");
  int64_t n = nrt_view_numel(dst);
  if (n == 0) return NRT_SUCCESS;
  if (dst->dtype == src->dtype && is_contiguous(dst) && is_contiguous(src)) {
    rt_copy_bytes(dst->data, src->data, (size_t)n * nrt_dtype_size(dst->dtype));
    apply_flags(dst, flags);
    return NRT_SUCCESS;
  }
  rt_inner_loop loop = rt_convert_loops[dst->dtype][src->dtype];
  if (dst->dtype == src->dtype) {
    size_t size = nrt_dtype_size(dst->dtype);
    loop = size == 1 ? copy_bits_8 : size == 2 ? copy_bits_16 : size == 4 ? copy_bits_32
         : size == 8 ? copy_bits_64 : copy_bits_128;
  }
  rt_iterate(2, op->operands, loop, NULL);
  apply_flags(dst, flags);
  return NRT_SUCCESS;
}
