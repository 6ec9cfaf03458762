/* MULTINOMIAL: k category indices per row of a probability matrix (layout
 * and counter use in neuronrt/ops/random.h). Rows run in parallel; each
 * row's draws are its own elements of the stream.
 *
 * With replacement: inverse transform, a binary search of u * total in the
 * row's cumulative sums (double). Without: the exponential-race form of
 * sequential sampling, category c's key being log(u_c) / p_c; the k
 * largest keys, in decreasing order, have exactly the law of k draws that
 * remove each chosen category before the next.
 *
 * Rows are validated as PyTorch validates them (no negative, infinite or
 * NaN entry, a positive sum, enough non-zero categories without
 * replacement); the first failing row is reported by number.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops/engine/convert.h"
#include "ops/random/random_engine.h"
#include "ops/engine/thread_pool.h"

#define WORD_BATCH 1024 /* draws generated at a time */

enum row_error { BAD_ENTRY = 1, ZERO_SUM, TOO_FEW_CATEGORIES, NO_MEMORY };

typedef struct multinomial_ctx {
  rt_philox_stream stream;
  const nrt_tensor_view *out, *probs;
  int64_t categories, samples;
  int replacement;
  rt_random_error error; /* index: row, value: enum row_error */
} multinomial_ctx;

/* A min-heap of (key, category) holding the k best keys seen. A key beats
 * another if larger, or equal with a smaller category. */
typedef struct entry {
  double key;
  int64_t category;
} entry;

static int beats(const entry *a, const entry *b) {
  return a->key > b->key || (a->key == b->key && a->category < b->category);
}

static void sift_down(entry *heap, int64_t size, int64_t at) {
  for (;;) {
    int64_t worst = at, l = 2 * at + 1, r = l + 1;
    if (l < size && beats(&heap[worst], &heap[l])) worst = l;
    if (r < size && beats(&heap[worst], &heap[r])) worst = r;
    if (worst == at) return;
    entry t = heap[at];
    heap[at] = heap[worst];
    heap[worst] = t;
    at = worst;
  }
}

static int by_rank(const void *a, const void *b) {
  return beats(a, b) ? -1 : beats(b, a) ? 1 : 0;
}

/* Loads row r as doubles and checks it; returns 0 or an enum row_error. */
static int load_row(const multinomial_ctx *m, int64_t r, double *p, int64_t *nonzero) {
  const nrt_tensor_view *v = m->probs;
  char *pair[2] = {(char *)p, (char *)v->data + r * v->strides[0] * (int64_t)nrt_dtype_size(v->dtype)};
  int64_t steps[2] = {sizeof(double), v->strides[1] * (int64_t)nrt_dtype_size(v->dtype)};
  rt_convert_loops[NRT_FLOAT64][v->dtype](pair, steps, m->categories, NULL);
  double sum = 0;
  *nonzero = 0;
  for (int64_t c = 0; c < m->categories; c++) {
    if (!(p[c] >= 0 && p[c] < INFINITY)) return BAD_ENTRY;
    sum += p[c];
    *nonzero += p[c] > 0;
  }
  return sum > 0 ? 0 : ZERO_SUM;
}

static void write_sample(const multinomial_ctx *m, int64_t r, int64_t s, int64_t category) {
  int64_t *out = m->out->data;
  out[r * m->out->strides[0] + s * m->out->strides[1]] = category;
}

static void sample_with_replacement(const multinomial_ctx *m, int64_t r, double *cdf) {
  int64_t last = 0; /* the last category with non-zero probability */
  for (int64_t c = 0; c < m->categories; c++) {
    if (cdf[c] > 0) last = c;
    if (c > 0) cdf[c] += cdf[c - 1];
  }
  double total = cdf[m->categories - 1];
  uint32_t w[2 * WORD_BATCH];
  for (int64_t s0 = 0; s0 < m->samples; s0 += WORD_BATCH) {
    int64_t count = m->samples - s0 < WORD_BATCH ? m->samples - s0 : WORD_BATCH;
    rt_philox_words(&m->stream, 2 * (uint64_t)(r * m->samples + s0), 2 * count, w);
    for (int64_t s = 0; s < count; s++) {
      double x = rt_uniform_f64(w[2 * s], w[2 * s + 1]) * total;
      int64_t lo = 0, hi = m->categories; /* first c with cdf[c] > x, in [lo, hi] */
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > x) hi = mid; else lo = mid + 1;
      }
      write_sample(m, r, s0 + s, lo < last ? lo : last);
    }
  }
}

static void sample_without_replacement(const multinomial_ctx *m, int64_t r, const double *p,
                                       entry *heap) {
  int64_t size = 0, k = m->samples;
  uint32_t w[2 * WORD_BATCH];
  for (int64_t c0 = 0; c0 < m->categories; c0 += WORD_BATCH) {
    int64_t count = m->categories - c0 < WORD_BATCH ? m->categories - c0 : WORD_BATCH;
    rt_philox_words(&m->stream, 2 * (uint64_t)(r * m->categories + c0), 2 * count, w);
    for (int64_t i = 0; i < count; i++) {
      int64_t c = c0 + i;
      if (p[c] == 0) continue;
      entry e = {log(rt_uniform_open_f64(w[2 * i], w[2 * i + 1])) / p[c], c};
      if (size < k) {
        heap[size] = e;
        for (int64_t at = size++; at > 0 && beats(&heap[(at - 1) / 2], &heap[at]); at = (at - 1) / 2) {
          entry t = heap[at];
          heap[at] = heap[(at - 1) / 2];
          heap[(at - 1) / 2] = t;
        }
      } else if (beats(&e, &heap[0])) {
        heap[0] = e;
        sift_down(heap, size, 0);
      }
    }
  }
  qsort(heap, (size_t)size, sizeof *heap, by_rank);
  for (int64_t s = 0; s < size; s++) write_sample(m, r, s, heap[s].category);
}

static void run_rows(int64_t begin, int64_t end, void *arg) {
  multinomial_ctx *m = arg;
  double *p = malloc((size_t)m->categories * sizeof *p);
  entry *heap = m->replacement ? NULL : malloc((size_t)m->samples * sizeof *heap + 1);
  if (!p || (!m->replacement && !heap)) {
    rt_random_error_record(&m->error, begin, NO_MEMORY);
  } else {
    for (int64_t r = begin; r < end; r++) {
      int64_t nonzero;
      int bad = load_row(m, r, p, &nonzero);
      if (!bad && !m->replacement && nonzero < m->samples) bad = TOO_FEW_CATEGORIES;
      if (bad) {
        rt_random_error_record(&m->error, r, bad);
        continue;
      }
      if (m->replacement)
        sample_with_replacement(m, r, p);
      else
        sample_without_replacement(m, r, p, heap);
    }
  }
  free(p);
  free(heap);
}

static nrt_status report(const multinomial_ctx *m) {
  long long row = (long long)m->error.index;
  switch ((int)m->error.value) {
    case BAD_ENTRY:
      return rt_fail(NRT_ERROR_INVALID_DATA,
                     "multinomial: probability tensor contains either inf, nan or element < 0 "
                     "(row %lld)", row);
    case ZERO_SUM:
      return rt_fail(NRT_ERROR_INVALID_DATA,
                     "multinomial: invalid multinomial distribution (sum of probabilities <= 0) "
                     "(row %lld)", row);
    case TOO_FEW_CATEGORIES:
      return rt_fail(NRT_ERROR_INVALID_DATA,
                     "multinomial: invalid multinomial distribution (with replacement=False, not "
                     "enough non-zero categories to sample) (row %lld)", row);
    default:
      return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "multinomial: cannot allocate host scratch");
  }
}

nrt_status rt_kernel_multinomial(const nrt_op *op) {
  multinomial_ctx m = {.error = RT_RANDOM_ERROR_INIT};
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 3)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "multinomial: expects operands (out, probs) and scalars (seed, offset, replacement)");
  m.stream.seed = (uint64_t)op->scalars[0].i;
  m.stream.offset = (uint64_t)op->scalars[1].i;
  m.replacement = rt_random_scalar_i(op, 2) != 0;
  m.out = &op->operands[0];
  m.probs = &op->operands[1];
  if (m.out->ndim != 2 || m.probs->ndim != 2 || m.out->shape[0] != m.probs->shape[0])
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "multinomial: expects out (rows, samples) and probs (rows, categories)");
  if (m.out->dtype != NRT_INT64 || !nrt_dtype_is_floating(m.probs->dtype))
    return rt_fail(NRT_ERROR_UNSUPPORTED,
                   "multinomial: expects int64 out and floating probabilities, got %s and %s",
                   nrt_dtype_name(m.out->dtype), nrt_dtype_name(m.probs->dtype));
  int64_t rows = m.out->shape[0];
  m.samples = m.out->shape[1];
  m.categories = m.probs->shape[1];
  if (rows == 0 || m.samples == 0) return NRT_SUCCESS;
  if (m.categories == 0 || (!m.replacement && m.samples > m.categories))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "multinomial: cannot take %lld samples from %lld categories%s",
                   (long long)m.samples, (long long)m.categories,
                   m.replacement ? "" : " without replacement");
  int64_t work = m.categories + m.samples;
  rt_parallel_for(rows, work >= RT_PARALLEL_GRAIN ? 1 : RT_PARALLEL_GRAIN / work, run_rows, &m);
  return m.error.set ? report(&m) : NRT_SUCCESS;
}
