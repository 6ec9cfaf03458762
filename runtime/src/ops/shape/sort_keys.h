/* Sort keys and the radix sort of (key, index) pairs behind SORT, TOPK,
 * KTHVALUE and unique.
 *
 * Every element maps to an unsigned key whose integer order is the order
 * PyTorch sorts in: signed integers flip their sign bit; floats map -0.0
 * to +0.0, negatives to their complement, positives above them, and every
 * NaN to the largest key (NaN is greater than any number, and all NaNs are
 * equal so a stable sort keeps them in index order). Descending order is
 * the complement of the key; unsigned integers (uint16/32/64) are their own
 * keys. Elements of up to 32 bits use 32-bit keys, int64, uint64 and float64
 * 64-bit keys. Slices are at most 2^32 - 1 long, so
 * indices are 32 bits.
 */
#ifndef NEURONRT_OPS_SORT_KEYS_H
#define NEURONRT_OPS_SORT_KEYS_H

#include <stdint.h>
#include "neuronrt/op.h"

/* 1 if the element at p (of dtype) is a NaN; 0 for every integer dtype. */
static inline int rt_elem_is_nan(nrt_dtype dtype, const char *p) {
  switch (dtype) {
    case NRT_FLOAT16: return (*(const uint16_t *)p & 0x7fffu) > 0x7c00u;
    case NRT_BFLOAT16: return (*(const uint16_t *)p & 0x7fffu) > 0x7f80u;
    case NRT_FLOAT32: return *(const float *)p != *(const float *)p;
    case NRT_FLOAT64: return *(const double *)p != *(const double *)p;
    default: return 0;
  }
}

static inline int rt_key_is_wide(nrt_dtype dtype) {
  return dtype == NRT_INT64 || dtype == NRT_UINT64 || dtype == NRT_FLOAT64;
}

/* keys[i] = key of the element at src + i * stride (bytes), i in [0, n);
 * complemented when descending. */
void rt_make_keys32(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint32_t *keys);
void rt_make_keys64(nrt_dtype dtype, const char *src, int64_t stride, int64_t n, int descending,
                    uint64_t *keys);

/* Sorts n pairs (keys[i], idx[i]) by key, stably, using the scratch arrays
 * keys_tmp and idx_tmp (n entries each). Returns 1 if the sorted pairs
 * ended up in the scratch arrays, 0 if in keys and idx. parallel lets it
 * split one large sort across the thread pool; the result is the same. */
int rt_sort_pairs32(uint32_t *keys, uint32_t *idx, uint32_t *keys_tmp, uint32_t *idx_tmp,
                    int64_t n, int parallel);
int rt_sort_pairs64(uint64_t *keys, uint32_t *idx, uint64_t *keys_tmp, uint32_t *idx_tmp,
                    int64_t n, int parallel);

/* Writes the values of n sorted keys (made with the same dtype and
 * descending flag) to dst (byte stride dst_stride) by inverting the key.
 * Keys that several values share (the zeros, the NaNs) are resolved by
 * reading element idx[j] of src instead, so the output holds exactly the
 * input's bits. */
void rt_values_from_keys32(nrt_dtype dtype, const uint32_t *keys, const uint32_t *idx,
                           int descending, const char *src, int64_t src_stride, char *dst,
                           int64_t dst_stride, int64_t n);
void rt_values_from_keys64(nrt_dtype dtype, const uint64_t *keys, const uint32_t *idx,
                           int descending, const char *src, int64_t src_stride, char *dst,
                           int64_t dst_stride, int64_t n);

/* Copies element idx[j] of src (byte stride src_stride) to element j of dst
 * (byte stride dst_stride) for j in [0, n); elem is the element size. */
void rt_gather_elements(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                        const uint32_t *idx, int64_t n, int64_t elem);

#endif
