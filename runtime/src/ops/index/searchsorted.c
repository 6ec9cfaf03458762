/* SEARCHSORTED: for each value, the first position in its row of the sorted
 * boundaries whose element is >= the value (> with right), through the
 * sorter permutation when one is given.
 *
 * The comparisons are written as "not (element >= value)" so that NaN
 * behaves as in PyTorch's CPU kernel. float16 and bfloat16 compare in float.
 * Integer rows never hold NaN: their "last != last" test is always false.
 * Every sorter entry is checked before the search, so a bad sorter is
 * reported (first bad entry in row-major order) rather than followed.
 */
#include "internal.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"

typedef struct search_job {
  const nrt_tensor_view *out, *seq, *values, *sorter;
  int right;
  int64_t n; /* values per row */
} search_job;

static inline int64_t sorter_at(const nrt_tensor_view *s, int64_t row, int64_t i) {
  return ((const int64_t *)s->data)[row * s->strides[0] + i * s->strides[1]];
}

/* The position in the row goes past element e when this holds. */
#define GOES_PAST(e, v, right) ((right) ? !((e) > (v)) : !((e) >= (v)))

/* A row is searched with a branchless binary search (its probes compile to
 * conditional moves, so no mispredicted branch per step). That is exact
 * when GOES_PAST is monotone over the row, i.e. unless the row ends in NaN
 * (sorting puts NaNs last); then the CPU kernel's own probe sequence is
 * used, so the answer is the CPU's. */
#define SEARCH_FN(NAME, T, C, LD)                                                             \
  static int64_t search_##NAME(const search_job *job, int64_t row, C v) {                    \
    const nrt_tensor_view *seq = job->seq;                                                    \
    const T *base = (const T *)seq->data + row * seq->strides[0];                             \
    const int64_t m = seq->shape[1], step = seq->strides[1];                                  \
    const int64_t *perm = NULL, perm_step = job->sorter ? job->sorter->strides[1] : 0;        \
    const int right = job->right;                                                             \
    if (job->sorter) perm = (const int64_t *)job->sorter->data + row * job->sorter->strides[0]; \
    if (m == 0) return 0;                                                                     \
    C last = LD(base[(perm ? perm[(m - 1) * perm_step] : m - 1) * step]);                     \
    if (last != last) {                                                                       \
      int64_t lo = 0, hi = m;                                                                 \
      while (lo < hi) {                                                                       \
        int64_t mid = lo + (hi - lo) / 2;                                                     \
        C e = LD(base[(perm ? perm[mid * perm_step] : mid) * step]);                          \
        if (GOES_PAST(e, v, right)) lo = mid + 1; else hi = mid;                              \
      }                                                                                       \
      return lo;                                                                              \
    }                                                                                         \
    int64_t first = 0, len = m;                                                               \
    while (len > 1) {                                                                         \
      int64_t half = len / 2, at = first + half;                                              \
      C e = LD(base[(perm ? perm[at * perm_step] : at) * step]);                              \
      first = GOES_PAST(e, v, right) ? at : first;                                            \
      len -= half;                                                                            \
    }                                                                                         \
    C e = LD(base[(perm ? perm[first * perm_step] : first) * step]);                          \
    return first + GOES_PAST(e, v, right);                                                    \
  }                                                                                           \
  static void range_##NAME(int64_t begin, int64_t end, void *arg) {                          \
    const search_job *job = arg;                                                              \
    const nrt_tensor_view *values = job->values, *out = job->out;                             \
    int shared = job->seq->shape[0] == 1;                                                     \
    for (int64_t e = begin; e < end; e++) {                                                   \
      int64_t r = e / job->n, i = e % job->n;                                                 \
      C v = LD(*((const T *)values->data + r * values->strides[0] + i * values->strides[1])); \
      int64_t pos = search_##NAME(job, shared ? 0 : r, v);                                    \
      int64_t at = r * out->strides[0] + i * out->strides[1];                                 \
      if (out->dtype == NRT_INT32)                                                            \
        ((int32_t *)out->data)[at] = (int32_t)pos;                                            \
      else                                                                                    \
        ((int64_t *)out->data)[at] = pos;                                                     \
    }                                                                                         \
  }

#define LD_PLAIN(v) (v)
SEARCH_FN(u8, uint8_t, int64_t, LD_PLAIN)
SEARCH_FN(i8, int8_t, int64_t, LD_PLAIN)
SEARCH_FN(i16, int16_t, int64_t, LD_PLAIN)
SEARCH_FN(i32, int32_t, int64_t, LD_PLAIN)
SEARCH_FN(i64, int64_t, int64_t, LD_PLAIN)
SEARCH_FN(f16, rt_half, float, rt_half_to_float)
SEARCH_FN(bf16, rt_bfloat16, float, rt_bfloat16_to_float)
SEARCH_FN(f32, float, float, LD_PLAIN)
SEARCH_FN(f64, double, double, LD_PLAIN)

static const rt_range_fn ranges[NRT_DTYPE_COUNT] = {
    [NRT_UINT8] = range_u8,     [NRT_INT8] = range_i8,       [NRT_INT16] = range_i16,
    [NRT_INT32] = range_i32,    [NRT_INT64] = range_i64,     [NRT_FLOAT16] = range_f16,
    [NRT_BFLOAT16] = range_bf16, [NRT_FLOAT32] = range_f32,  [NRT_FLOAT64] = range_f64,
};

nrt_status rt_kernel_searchsorted(const nrt_op *op) {
  const char *name = "searchsorted";
  if ((op->num_operands != 3 && op->num_operands != 4) || op->num_outputs != 1 || op->num_scalars < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects operands [out, sorted, values, (sorter)] and a scalar", name);
  const nrt_tensor_view *out = &op->operands[0], *seq = &op->operands[1], *values = &op->operands[2];
  const nrt_tensor_view *sorter = op->num_operands == 4 ? &op->operands[3] : NULL;
  if (out->ndim != 2 || seq->ndim != 2 || values->ndim != 2 || out->shape[0] != values->shape[0] ||
      out->shape[1] != values->shape[1] || (seq->shape[0] != 1 && seq->shape[0] != values->shape[0]) ||
      (out->dtype != NRT_INT32 && out->dtype != NRT_INT64) || seq->dtype != values->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: expects out int32/int64 [R, N], sorted [1 or R, M], values [R, N] of sorted's dtype",
                   name);
  rt_range_fn fn = ranges[seq->dtype];
  if (!fn)
    return rt_fail(NRT_ERROR_UNSUPPORTED, "%s: not implemented for dtype %s", name, nrt_dtype_name(seq->dtype));
  if (sorter) {
    if (sorter->dtype != NRT_INT64 || sorter->ndim != 2 || sorter->shape[0] != seq->shape[0] ||
        sorter->shape[1] != seq->shape[1])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: the sorter must be int64 of the boundaries' shape", name);
    for (int64_t r = 0; r < sorter->shape[0]; r++)
      for (int64_t i = 0; i < sorter->shape[1]; i++) {
        int64_t at = sorter_at(sorter, r, i);
        if (at < 0 || at >= seq->shape[1])
          return rt_fail(NRT_ERROR_INDEX_OUT_OF_RANGE,
                         "%s: sorter index %lld is out of bounds for boundaries of size %lld", name,
                         (long long)at, (long long)seq->shape[1]);
      }
  }
  search_job job = {.out = out, .seq = seq, .values = values, .sorter = sorter,
                    .right = op->scalars[0].i != 0, .n = values->shape[1]};
  int64_t total = nrt_view_numel(values);
  if (total == 0) return NRT_SUCCESS;
  rt_parallel_for(total, 4096, fn, &job);
  return NRT_SUCCESS;
}
