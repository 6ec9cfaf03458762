/* The order in which PyTorch's CPU unique(dim=) sorts rows that hold NaN.
 *
 * The CPU sorts row numbers with std::sort and a comparator that walks the
 * columns and decides at the first pair ordered by < or >: a NaN is neither,
 * so it passes to the next column, and a row of NaNs sorts "equal" to every
 * row. That is not a strict weak order, so the result is whatever the
 * algorithm does with it: libstdc++'s introsort (the library of PyTorch's
 * Linux builds). rt_sort_rows_cpu_order runs the same algorithm (median of
 * three pivot, unguarded partition, heap sort past the depth limit, a final
 * insertion sort of runs of 16) with the same comparator, so the rows, the
 * inverse and the counts come out as the CPU's. Without NaN any sort gives
 * the CPU's result; this one is only needed with NaN. The unguarded loops
 * carry bounds checks the CPU's lack (they never fire where the CPU stays in
 * bounds).
 */
#ifndef NEURONRT_OPS_SORT_ROWS_CPU_ORDER_H
#define NEURONRT_OPS_SORT_ROWS_CPU_ORDER_H

#include <stdint.h>
#include "internal.h"

/* 1 if the 2-d floating view holds a NaN. */
int rt_rows_have_nan(const nrt_tensor_view *in);

/* perm[0..n) (row numbers) in the CPU's order of in's rows. Returns 0, or -1
 * when out of host memory. */
int rt_sort_rows_cpu_order(const nrt_tensor_view *in, uint32_t *perm, int64_t n);

#endif
