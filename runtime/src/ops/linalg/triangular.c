/* LINALG_TRIANGULAR_SOLVE (layout in neuronrt/ops/linalg.h).
 *
 * Work items are (batch element, block of right-hand-side columns): each
 * packs its block of X into row-major scratch, where substitution runs
 * along contiguous rows, and reads A in place at its own strides (each
 * element of A is read once per block, against n/2 multiply-adds per row
 * of the block). With few right-hand sides (vectors, mostly) the rows
 * would be too short to vectorise: each column is solved by dot products
 * along A's rows or by axpys along its columns, whichever is contiguous (A
 * is packed row-major when neither is, and when it is to be conjugated). */
#include <stdlib.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/linalg/batch.h"
#include "ops/linalg/dense.h"

enum { COLUMN_BLOCK = 256, FEW_COLUMNS = 8 };

typedef struct solve_job {
  const nrt_tensor_view *x, *a;
  int64_t n, k, blocks;
  int upper, unit, conj;
  la_failure failure;
} solve_job;

static void solve_range(int64_t begin, int64_t end, void *ctx) {
  solve_job *job = ctx;
  const nrt_tensor_view *x = job->x, *a = job->a;
  const la_dense_ops *la = la_dense_ops_of(x->dtype);
  const size_t esize = la->esize;
  const int64_t n = job->n, width = job->k < COLUMN_BLOCK ? job->k : COLUMN_BLOCK;
  const int few = job->k <= FEW_COLUMNS;
  const int64_t ars = a->strides[a->ndim - 2], acs = a->strides[a->ndim - 1];
  /* conj(A) is packed (row-major) once per work item; so is A for few
   * columns when neither its rows nor its columns are contiguous. */
  const int pack_a = job->conj || (few && acs != 1 && ars != 1);
  const int64_t elems = n * width + (pack_a ? n * n : 0);
  char *scratch = malloc((size_t)elems * esize + 1);
  if (!scratch) {
    la_fail_at(&job->failure, NRT_ERROR_OUT_OF_MEMORY, begin, elems * (int64_t)esize);
    return;
  }
  char *ap = scratch + (size_t)(n * width) * esize;
  const int64_t xrs = x->strides[x->ndim - 2], xcs = x->strides[x->ndim - 1];
  for (int64_t item = begin; item < end; item++) {
    const int64_t b = item / job->blocks, c0 = (item % job->blocks) * COLUMN_BLOCK;
    const int64_t w = job->k - c0 < COLUMN_BLOCK ? job->k - c0 : COLUMN_BLOCK;
    char *xb = la_batch_at(x, 2, b) + c0 * xcs * (int64_t)esize;
    const char *ab = la_batch_at(a, 2, b);
    int64_t rs = ars, cs = acs;
    if (pack_a) {
      (job->conj ? la->pack_conj : la->pack)(ab, n, n, ars, acs, ap);
      ab = ap, rs = n, cs = 1;
    }
    if (few) { /* X^T packed; A read by rows or by columns, whichever is contiguous */
      la->pack(xb, w, n, xcs, xrs, scratch);
      for (int64_t c = 0; c < w; c++) {
        char *xc = scratch + (size_t)(c * n) * esize;
        if (cs == 1) la->trsv_rows(ab, rs, n, xc, job->upper, job->unit);
        else la->trsv_cols(ab, cs, n, xc, job->upper, job->unit);
      }
      la->unpack(scratch, w, n, xb, xcs, xrs);
      continue;
    }
    la->pack(xb, n, w, xrs, xcs, scratch);
    la->trsm(ab, rs, cs, n, scratch, w, job->upper, job->unit);
    la->unpack(scratch, n, w, xb, xrs, xcs);
  }
  free(scratch);
}

nrt_status rt_kernel_linalg_triangular_solve(const nrt_op *op) {
  static const char *name = "linalg_triangular_solve";
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < 2)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expected X, A, upper and unitriangular", name);
  const nrt_tensor_view *x = &op->operands[0], *a = &op->operands[1];
  if (x->ndim < 2) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: X must have 2 or more dims", name);
  nrt_status s;
  if ((s = la_check_dtype(name, "X", x, LA_OR_COMPLEX)) || (s = la_check_batch(name, "A", a, 2, x, 2))) return s;
  if (a->dtype != x->dtype)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A is %s but X is %s", name,
                   nrt_dtype_name(a->dtype), nrt_dtype_name(x->dtype));
  const int64_t n = x->shape[x->ndim - 2], k = x->shape[x->ndim - 1];
  if (a->shape[a->ndim - 2] != n || a->shape[a->ndim - 1] != n)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: A is %lld x %lld, expected %lld x %lld", name,
                   (long long)a->shape[a->ndim - 2], (long long)a->shape[a->ndim - 1], (long long)n,
                   (long long)n);
  const int64_t batch = la_batch_count(x, 2);
  if (batch == 0 || n == 0 || k == 0) return NRT_SUCCESS;
  const int64_t blocks = (k + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
  const int conj = op->num_scalars > 2 && op->scalars[2].i != 0;
  solve_job job = {x, a, n, k, blocks, op->scalars[0].i != 0, op->scalars[1].i != 0, conj,
                   {NRT_SUCCESS, 0, 0}};
  const int64_t width = k < COLUMN_BLOCK ? k : COLUMN_BLOCK;
  rt_parallel_for(batch * blocks, la_grain((double)n * n * width), solve_range, &job);
  if (job.failure.status != NRT_SUCCESS)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %lld bytes of scratch", name,
                   (long long)job.failure.value);
  return NRT_SUCCESS;
}
