/* See sort_keys.h: keys from elements and elements from keys (the sort
 * itself is in radix_sort.c). */
#include "ops/shape/sort_keys.h"

/* ---- keys --------------------------------------------------------------- */

#define LOAD(T, i) (*(const T *)(src + (i) * stride))

static inline uint32_t key_f16_like(uint16_t h, uint16_t inf) {
  uint16_t mag = h & 0x7fffu;
  if (mag > inf) return 0xffffu;
  if (mag == 0) return 0x8000u;
  return h & 0x8000u ? (uint16_t)~h : (uint32_t)(h | 0x8000u);
}

static inline uint32_t key_f32(uint32_t x) {
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0xffffffffu;
  if (mag == 0) return 0x80000000u;
  return x & 0x80000000u ? ~x : x | 0x80000000u;
}

static inline uint64_t key_f64(uint64_t x) {
  uint64_t mag = x & 0x7fffffffffffffffull;
  if (mag > 0x7ff0000000000000ull) return ~0ull;
  if (mag == 0) return 1ull << 63;
  return x & (1ull << 63) ? ~x : x | (1ull << 63);
}

#define KEY_LOOP(K, EXPR)                                  \
  for (int64_t i = 0; i < n; i++) keys[i] = (K)(EXPR) ^ flip;

void rt_make_keys32(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint32_t *keys) {
  uint32_t flip = descending ? 0xffffffffu : 0;
  switch (dtype) {
    case NRT_BOOL:
    case NRT_UINT8: KEY_LOOP(uint32_t, LOAD(uint8_t, i)) break;
    case NRT_INT8: KEY_LOOP(uint32_t, (uint8_t)LOAD(int8_t, i) ^ 0x80u) break;
    case NRT_INT16: KEY_LOOP(uint32_t, (uint16_t)LOAD(int16_t, i) ^ 0x8000u) break;
    case NRT_INT32: KEY_LOOP(uint32_t, (uint32_t)LOAD(int32_t, i) ^ 0x80000000u) break;
    case NRT_UINT16: KEY_LOOP(uint32_t, LOAD(uint16_t, i)) break;
    case NRT_UINT32: KEY_LOOP(uint32_t, LOAD(uint32_t, i)) break;
    case NRT_FLOAT16: KEY_LOOP(uint32_t, key_f16_like(LOAD(uint16_t, i), 0x7c00u)) break;
    case NRT_BFLOAT16: KEY_LOOP(uint32_t, key_f16_like(LOAD(uint16_t, i), 0x7f80u)) break;
    case NRT_FLOAT32: KEY_LOOP(uint32_t, key_f32(LOAD(uint32_t, i))) break;
    default: break;
  }
}

void rt_make_keys64(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint64_t *keys) {
  uint64_t flip = descending ? ~0ull : 0;
  if (dtype == NRT_INT64) {
    KEY_LOOP(uint64_t, (uint64_t)LOAD(int64_t, i) ^ (1ull << 63))
  } else if (dtype == NRT_UINT64) {
    KEY_LOOP(uint64_t, LOAD(uint64_t, i))
  } else if (dtype == NRT_FLOAT64) {
    KEY_LOOP(uint64_t, key_f64(LOAD(uint64_t, i)))
  }
}

/* ---- keys back to values ------------------------------------------------- */

#define STORE(T, j, v) (*(T *)(dst + (j) * dst_stride) = (T)(v))
#define FROM_SRC(T, j) (*(const T *)(src + (int64_t)idx[j] * src_stride))

#define VALUES_LOOP(K, T, EXPR)                  \
  for (int64_t j = 0; j < n; j++) {             \
    K k = keys[j] ^ flip;                        \
    STORE(T, j, EXPR);                           \
  }

/* A float key back to bits: positives carry the sign bit, negatives are
 * complemented; the shared zero and NaN keys read the input. */
#define FLOAT_VALUES(K, T, SIGN, ZERO, NAN_KEY)                                     \
  for (int64_t j = 0; j < n; j++) {                                                 \
    K k = keys[j] ^ flip;                                                           \
    if (k == (K)(ZERO) || k == (K)(NAN_KEY))                                        \
      STORE(T, j, FROM_SRC(T, j));                                                  \
    else                                                                            \
      STORE(T, j, k & (K)(SIGN) ? k ^ (K)(SIGN) : ~k);                              \
  }

void rt_values_from_keys32(nrt_dtype dtype, const uint32_t *keys, const uint32_t *idx,
                           int descending, const char *src, int64_t src_stride, char *dst,
                           int64_t dst_stride, int64_t n) {
  uint32_t flip = descending ? 0xffffffffu : 0;
  switch (dtype) {
    case NRT_BOOL:
    case NRT_UINT8: VALUES_LOOP(uint32_t, uint8_t, k) break;
    case NRT_INT8: VALUES_LOOP(uint32_t, uint8_t, k ^ 0x80u) break;
    case NRT_INT16: VALUES_LOOP(uint32_t, uint16_t, k ^ 0x8000u) break;
    case NRT_INT32: VALUES_LOOP(uint32_t, uint32_t, k ^ 0x80000000u) break;
    case NRT_UINT16: VALUES_LOOP(uint32_t, uint16_t, k) break;
    case NRT_UINT32: VALUES_LOOP(uint32_t, uint32_t, k) break;
    case NRT_FLOAT16:
    case NRT_BFLOAT16: FLOAT_VALUES(uint32_t, uint16_t, 0x8000u, 0x8000u, 0xffffu) break;
    case NRT_FLOAT32: FLOAT_VALUES(uint32_t, uint32_t, 0x80000000u, 0x80000000u, 0xffffffffu) break;
    default: break;
  }
}

void rt_values_from_keys64(nrt_dtype dtype, const uint64_t *keys, const uint32_t *idx,
                           int descending, const char *src, int64_t src_stride, char *dst,
                           int64_t dst_stride, int64_t n) {
  uint64_t flip = descending ? ~0ull : 0;
  const uint64_t sign = 1ull << 63;
  if (dtype == NRT_INT64) {
    VALUES_LOOP(uint64_t, uint64_t, k ^ sign)
  } else if (dtype == NRT_UINT64) {
    VALUES_LOOP(uint64_t, uint64_t, k)
  } else if (dtype == NRT_FLOAT64) {
    FLOAT_VALUES(uint64_t, uint64_t, sign, sign, ~0ull)
  }
}

/* ---- gather --------------------------------------------------------------- */

#define GATHER_LOOP(T)                                                                \
  for (int64_t j = 0; j < n; j++)                                                     \
    *(T *)(dst + j * dst_stride) = *(const T *)(src + (int64_t)idx[j] * src_stride);

void rt_gather_elements(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                        const uint32_t *idx, int64_t n, int64_t elem) {
  switch (elem) {
    case 1: GATHER_LOOP(uint8_t) break;
    case 2: GATHER_LOOP(uint16_t) break;
    case 4: GATHER_LOOP(uint32_t) break;
    default: GATHER_LOOP(uint64_t) break;
  }
}
