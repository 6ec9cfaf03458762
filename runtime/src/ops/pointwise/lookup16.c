/* The lookup loop of the 16-bit tables (RT_DEFINE_TABLE16), see
 * pointwise.h. */
#include "ops/pointwise/pointwise.h"

/* Four lookups packed into one 64-bit word, each 16-bit lane in place (so
 * on either byte order). The indices are read one by one: a load is
 * cheaper than the shifts and masks that split a 64-bit word of them (an
 * ALU-bound loop, 1.2x slower). */
static inline uint64_t lookup4(const uint16_t *table, const uint16_t *x) {
  return (uint64_t)table[x[0]] | (uint64_t)table[x[1]] << 16 | (uint64_t)table[x[2]] << 32 |
         (uint64_t)table[x[3]] << 48;
}

void rt_lookup16(const uint16_t *table, char **data, const int64_t *strides, int64_t n) {
  char *out = data[0];
  const uint16_t *in = (const uint16_t *)(const void *)data[1];
  if (strides[0] != 2 || strides[1] != 2) {
    rt_lookup16_reference(table, data, strides, n);
    return;
  }
  int64_t i = 0;
  /* Four per step, read before written: in place (out == in) every
   * element is read before its slot is overwritten. */
  for (; i + 4 <= n; i += 4) {
    uint64_t r = lookup4(table, in + i);
    memcpy(out + 2 * i, &r, sizeof r);
  }
  for (; i < n; i++) memcpy(out + 2 * i, &table[in[i]], 2);
}

/* One element at a time: the twin, and the strided path. */
void rt_lookup16_reference(const uint16_t *table, char **data, const int64_t *strides, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint16_t x;
    memcpy(&x, data[1] + i * strides[1], 2);
    memcpy(data[0] + i * strides[0], &table[x], 2);
  }
}
