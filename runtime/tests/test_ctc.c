/* CTC_LOSS and CTC_LOSS_BACKWARD against brute force.
 *
 * The twin enumerates every alignment (C^T label paths) of a small input,
 * collapses each (repeats merged, then blanks removed) and sums the
 * probabilities of those that give the target: -log of that sum is the
 * loss, and for each (t, c) the share of that sum carried by paths through
 * c at t gives the gradient, exp(lp) - share / P (PyTorch's convention: the
 * gradient as seen through a log_softmax). Impossible targets give an
 * infinite loss and NaN gradients, or zeros with zero_infinity; steps past
 * an item's input length get zero gradient. Operands are host memory
 * (nrt_op_execute_host), with log_probs in a transposed layout and targets
 * both concatenated and padded.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

enum { T = 5, N = 5, C = 3 };

typedef struct item {
  int64_t input_length, target_length;
  int64_t labels[3];
} item;

/* Tn = 5 with two labels; a repeated label needing a blank between; an
 * empty target; an empty input with a label (impossible); a repeated label
 * that cannot fit (impossible). */
static const item items[N] = {
    {5, 2, {1, 2}}, {4, 2, {1, 1}}, {3, 0, {0}}, {0, 1, {2}}, {2, 2, {2, 2}},
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

/* Brute force over the C^Tn paths of one item: loss and d loss / d lp. */
static void twin(const double lp[T][C], const item *it, int64_t blank, int zero_infinity, double *nll,
                 double grad[T][C]) {
  const int64_t Tn = it->input_length;
  double total = 0, through[T][C];
  memset(through, 0, sizeof through);
  int64_t paths = 1;
  for (int64_t t = 0; t < Tn; t++) paths *= C;
  for (int64_t p = 0; p < paths; p++) {
    int64_t path[T], code = p, out[T], len = 0, prev = -1;
    double logp = 0;
    for (int64_t t = 0; t < Tn; t++) {
      path[t] = code % C;
      code /= C;
      logp += lp[t][path[t]];
      if (path[t] != prev && path[t] != blank) out[len++] = path[t];
      prev = path[t];
    }
    if (len != it->target_length) continue;
    int same = 1;
    for (int64_t k = 0; k < len; k++) same &= out[k] == it->labels[k];
    if (!same) continue;
    double w = exp(logp);
    total += w;
    for (int64_t t = 0; t < Tn; t++) through[t][path[t]] += w;
  }
  *nll = total > 0 ? -log(total) : INFINITY;
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < C; c++) {
      if (t >= Tn || (zero_infinity && *nll == INFINITY))
        grad[t][c] = 0;
      else
        grad[t][c] = total > 0 ? exp(lp[t][c]) - through[t][c] / total : NAN;
    }
}

static nrt_tensor_view view(void *data, nrt_dtype dtype, int ndim, const int64_t *shape, const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

static nrt_status execute(nrt_op_code code, int nout, int nops, const nrt_tensor_view *ops, int nsc,
                          const nrt_scalar *sc) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.compute_dtype = ops[nout].dtype;
  op.num_outputs = nout;
  op.num_operands = nops;
  op.num_scalars = nsc;
  for (int k = 0; k < nops; k++) op.operands[k] = ops[k];
  for (int k = 0; k < nsc; k++) op.scalars[k] = sc[k];
  return nrt_op_execute_host(&op, (1u << nops) - 1);
}

static nrt_scalar is(int64_t v) { return (nrt_scalar){.i = v, .f = (double)v}; }

static int close_or_both_nan(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* One configuration: dtype, blank, padded or concatenated int32/int64
 * targets, zero_infinity. */
static void check_case(nrt_dtype dtype, int64_t blank, int padded, nrt_dtype target_dtype, int zero_infinity) {
  const double tol = dtype == NRT_FLOAT64 ? 1e-12 : 2e-5;
  const size_t es = dtype == NRT_FLOAT64 ? 8 : 4;
  /* log_probs stored [N][C][T] and seen as [T, N, C]: a strided layout. */
  double lp[N][T][C];
  char *lp_data = malloc((size_t)(T * N * C) * es);
  for (int64_t n = 0; n < N; n++)
    for (int64_t t = 0; t < T; t++) {
      double z[C], m = 0;
      for (int64_t c = 0; c < C; c++) m += exp(z[c] = 2 * uniform() - 1);
      for (int64_t c = 0; c < C; c++) {
        double v = z[c] - log(m);
        if (dtype == NRT_FLOAT32) v = (float)v;
        lp[n][t][c] = v;
        int64_t off = n * C * T + c * T + t;
        if (dtype == NRT_FLOAT64)
          ((double *)(void *)lp_data)[off] = v;
        else
          ((float *)(void *)lp_data)[off] = (float)v;
      }
    }
  /* The items' labels, with blank and the other classes swapped so that
   * the labels never equal blank. */
  int64_t labels[N][3], max_l = 0;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t k = 0; k < items[n].target_length; k++) {
      int64_t c = items[n].labels[k];
      labels[n][k] = c == blank ? 0 : c;
    }
    if (items[n].target_length > max_l) max_l = items[n].target_length;
  }
  const int64_t width = 3, S = 2 * max_l + 1;
  int64_t meta[N][3], count = 0, tg64[N * 3];
  int32_t tg32[N * 3];
  for (int64_t n = 0; n < N; n++) {
    meta[n][0] = items[n].input_length;
    meta[n][1] = items[n].target_length;
    meta[n][2] = padded ? n * width : count;
    for (int64_t k = 0; k < (padded ? width : items[n].target_length); k++) {
      int64_t v = k < items[n].target_length ? labels[n][k] : 1;
      tg64[count] = v;
      tg32[count++] = (int32_t)v;
    }
  }
  char *nll = calloc(N, es), *alpha = calloc((size_t)(N * T * S), es), *grad = calloc((size_t)(T * N * C), es);
  double *grad_out = malloc(N * sizeof(double));
  for (int64_t n = 0; n < N; n++) grad_out[n] = 0.5 + n;
  char *go = malloc(N * es);
  for (int64_t n = 0; n < N; n++) {
    if (dtype == NRT_FLOAT64)
      ((double *)(void *)go)[n] = grad_out[n];
    else
      ((float *)(void *)go)[n] = (float)grad_out[n];
  }
  nrt_tensor_view v_lp = view(lp_data, dtype, 3, (int64_t[]){T, N, C}, (int64_t[]){1, C * T, T});
  nrt_tensor_view v_tg = view(target_dtype == NRT_INT64 ? (void *)tg64 : (void *)tg32, target_dtype, 1,
                              (int64_t[]){count}, (int64_t[]){1});
  nrt_tensor_view v_meta = view(meta, NRT_INT64, 2, (int64_t[]){N, 3}, (int64_t[]){3, 1});
  nrt_tensor_view v_nll = view(nll, dtype, 1, (int64_t[]){N}, (int64_t[]){1});
  nrt_tensor_view v_alpha = view(alpha, dtype, 3, (int64_t[]){N, T, S}, (int64_t[]){T * S, S, 1});
  nrt_tensor_view v_grad = view(grad, dtype, 3, (int64_t[]){T, N, C}, (int64_t[]){N * C, C, 1});
  nrt_tensor_view v_go = view(go, dtype, 1, (int64_t[]){N}, (int64_t[]){1});

  CHECK_OK(execute(NRT_OP_CTC_LOSS, 2, 5, (nrt_tensor_view[]){v_nll, v_alpha, v_lp, v_tg, v_meta}, 1,
                   (nrt_scalar[]){is(blank)}));
  CHECK_OK(execute(NRT_OP_CTC_LOSS_BACKWARD, 1, 7,
                   (nrt_tensor_view[]){v_grad, v_go, v_lp, v_tg, v_meta, v_nll, v_alpha}, 2,
                   (nrt_scalar[]){is(blank), is(zero_infinity)}));
  for (int64_t n = 0; n < N; n++) {
    item it = items[n];
    memcpy(it.labels, labels[n], sizeof it.labels);
    double want, g[T][C];
    twin((const double(*)[C])lp[n], &it, blank, zero_infinity, &want, g);
    double got = dtype == NRT_FLOAT64 ? ((double *)(void *)nll)[n] : ((float *)(void *)nll)[n];
    if (!close_or_both_nan(got, want, tol)) {
      fprintf(stderr, "  item %lld: nll %.17g, brute force %.17g\n", (long long)n, got, want);
      CHECK(0);
    }
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < C; c++) {
        int64_t off = t * N * C + n * C + c;
        double gv = dtype == NRT_FLOAT64 ? ((double *)(void *)grad)[off] : ((float *)(void *)grad)[off];
        if (!close_or_both_nan(gv, g[t][c] * grad_out[n], tol)) {
          fprintf(stderr, "  item %lld grad[%lld][%lld]: %.17g, brute force %.17g\n", (long long)n, (long long)t,
                  (long long)c, gv, g[t][c] * grad_out[n]);
          CHECK(0);
        }
      }
  }
  free(lp_data);
  free(nll);
  free(alpha);
  free(grad);
  free(grad_out);
  free(go);
}

static void test_ctc_matches_brute_force(void) {
  for (int d = 0; d < 2; d++)
    for (int64_t blank = 0; blank < C; blank += 2)
      for (int padded = 0; padded < 2; padded++)
        for (int zi = 0; zi < 2; zi++)
          check_case(d ? NRT_FLOAT64 : NRT_FLOAT32, blank, padded, padded ? NRT_INT32 : NRT_INT64, zi);
}

static void test_ctc_rejects_bad_operands(void) {
  float lp[2 * 1 * 3] = {0}, nll[1], alpha[2 * 3];
  int64_t tg[1] = {3}, meta[3] = {2, 1, 0};
  nrt_tensor_view v_lp = view(lp, NRT_FLOAT32, 3, (int64_t[]){2, 1, 3}, (int64_t[]){3, 3, 1});
  nrt_tensor_view v_tg = view(tg, NRT_INT64, 1, (int64_t[]){1}, (int64_t[]){1});
  nrt_tensor_view v_meta = view(meta, NRT_INT64, 2, (int64_t[]){1, 3}, (int64_t[]){3, 1});
  nrt_tensor_view v_nll = view(nll, NRT_FLOAT32, 1, (int64_t[]){1}, (int64_t[]){1});
  nrt_tensor_view v_alpha = view(alpha, NRT_FLOAT32, 3, (int64_t[]){1, 2, 3}, (int64_t[]){6, 3, 1});
  nrt_tensor_view ops[5] = {v_nll, v_alpha, v_lp, v_tg, v_meta};
  /* A label equal to C: found in the data. */
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INDEX_OUT_OF_RANGE);
  tg[0] = 1;
  CHECK_OK(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}));
  /* blank out of range, input longer than T, target past the states. */
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(3)}), NRT_ERROR_INVALID_ARGUMENT);
  meta[0] = 3;
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INVALID_ARGUMENT);
  meta[0] = 2;
  meta[1] = 2;
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INVALID_ARGUMENT);
  meta[1] = 1;
  /* Integer log_probs, a mismatched nll, too few operands. */
  ops[2].dtype = NRT_INT32;
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INVALID_ARGUMENT);
  ops[2].dtype = NRT_FLOAT32;
  ops[0].dtype = NRT_FLOAT64;
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 5, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INVALID_ARGUMENT);
  ops[0].dtype = NRT_FLOAT32;
  CHECK_STATUS(execute(NRT_OP_CTC_LOSS, 2, 4, ops, 1, (nrt_scalar[]){is(0)}), NRT_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  RUN(test_ctc_matches_brute_force);
  RUN(test_ctc_rejects_bad_operands);
  return CHECK_MAIN_RESULT();
}
