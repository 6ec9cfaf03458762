/* FFT_C2C, FFT_R2C and FFT_C2R (neuronrt/ops/fft.h).
 *
 * One task per range of lines (every index of the batch dims): each line is
 * gathered into a double buffer (float32 widened), transformed by the
 * cached plan of its length (fft_plan.c) and scattered, scaled, into out.
 * A line is computed the same way whatever thread takes it, so results do
 * not depend on the thread count. The inverse complex transform is
 * conj(DFT(conj(x))). Real transforms of even length n go through a
 * half-length complex transform of the pairs z_j = x_2j + i x_2j+1:
 *   X_k = (Z_k + conj Z_h-k) / 2 - i W^k (Z_k - conj Z_h-k) / 2,  W = e^{-2 pi i / n},
 * and back for FFT_C2R; odd lengths take the full complex transform. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "ops/engine/thread_pool.h"
#include "ops/fft/fft_plan.h"

enum { KIND_C2C, KIND_R2C, KIND_C2R };

typedef struct fft_job {
  const nrt_op *op;
  int kind, forward, onesided, is_double;
  int dims;                 /* logical dims (the pair dim left out) */
  int axis;
  int64_t n;                /* signal length */
  int64_t in_len, out_len;  /* along the axis */
  double scale;
  const fft_plan *plan;     /* length n complex, or (real, n even) the real plan */
  int64_t buffer;           /* complex values of scratch per task */
  int nbatch;
  int64_t bshape[NRT_MAX_DIMS], bstride_out[NRT_MAX_DIMS], bstride_in[NRT_MAX_DIMS];
  int64_t ax_out, ax_in, pair_out, pair_in; /* element strides */
} fft_job;

static inline fft_cplx cmul(fft_cplx a, fft_cplx b) {
  fft_cplx r = {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  return r;
}

/* ---- strided lines -------------------------------------------------------- */

static void gather_complex(const fft_job *j, const void *base, int64_t off, int64_t count, int conj,
                           fft_cplx *dst) {
  const double sign = conj ? -1.0 : 1.0;
  const int64_t s = j->ax_in, ps = j->pair_in;
  if (j->is_double) {
    const double *p = (const double *)base + off;
    for (int64_t k = 0; k < count; k++) dst[k].re = p[k * s], dst[k].im = sign * p[k * s + ps];
  } else {
    const float *p = (const float *)base + off;
    for (int64_t k = 0; k < count; k++) dst[k].re = p[k * s], dst[k].im = sign * (double)p[k * s + ps];
  }
}

static void scatter_complex(const fft_job *j, void *base, int64_t off, int64_t count, int conj,
                            const fft_cplx *src) {
  const double scale = j->scale, iscale = conj ? -scale : scale;
  const int64_t s = j->ax_out, ps = j->pair_out;
  if (j->is_double) {
    double *p = (double *)base + off;
    for (int64_t k = 0; k < count; k++) p[k * s] = src[k].re * scale, p[k * s + ps] = src[k].im * iscale;
  } else {
    float *p = (float *)base + off;
    for (int64_t k = 0; k < count; k++)
      p[k * s] = (float)(src[k].re * scale), p[k * s + ps] = (float)(src[k].im * iscale);
  }
}

/* ---- one line of each kind ------------------------------------------------ */

static void line_c2c(const fft_job *j, const void *in, int64_t ioff, void *out, int64_t ooff, fft_cplx *buf) {
  fft_cplx *data = buf, *scratch = buf + fft_work(j->plan);
  const int conj = !j->forward;
  gather_complex(j, in, ioff, j->n, conj, data);
  fft_run(j->plan, data, scratch);
  scatter_complex(j, out, ooff, j->n, conj, data);
}

static void line_r2c(const fft_job *j, const void *in, int64_t ioff, void *out, int64_t ooff, fft_cplx *buf) {
  const int64_t n = j->n, s = j->ax_in;
  const size_t w = (size_t)fft_work(j->plan->half ? j->plan->half : j->plan);
  fft_cplx *data = buf, *scratch = buf + w, *X = buf + 2 * w; /* X: n values */
  if (j->plan->half) {
    const int64_t h = n / 2;
    for (int64_t k = 0; k < h; k++) {
      if (j->is_double) {
        const double *p = (const double *)in + ioff;
        data[k].re = p[2 * k * s], data[k].im = p[(2 * k + 1) * s];
      } else {
        const float *p = (const float *)in + ioff;
        data[k].re = p[2 * k * s], data[k].im = p[(2 * k + 1) * s];
      }
    }
    fft_run(j->plan->half, data, scratch);
    for (int64_t k = 0; k <= h; k++) {
      const fft_cplx zk = data[k == h ? 0 : k], zc = {data[k == 0 ? 0 : h - k].re, -data[k == 0 ? 0 : h - k].im};
      const fft_cplx e = {0.5 * (zk.re + zc.re), 0.5 * (zk.im + zc.im)};
      const fft_cplx o = {0.5 * (zk.im - zc.im), -0.5 * (zk.re - zc.re)}; /* -i (zk - zc) / 2 */
      const fft_cplx wo = cmul(j->plan->rtw[k], o);
      X[k].re = e.re + wo.re, X[k].im = e.im + wo.im;
    }
  } else {
    for (int64_t k = 0; k < n; k++) {
      data[k].re = j->is_double ? ((const double *)in)[ioff + k * s] : ((const float *)in)[ioff + k * s];
      data[k].im = 0;
    }
    fft_run(j->plan, data, scratch);
    memcpy(X, data, sizeof(fft_cplx) * (size_t)(n / 2 + 1));
  }
  for (int64_t k = n / 2 + 1; k < j->out_len; k++) X[k].re = X[n - k].re, X[k].im = -X[n - k].im;
  scatter_complex(j, out, ooff, j->out_len, 0, X);
}

static void line_c2r(const fft_job *j, const void *in, int64_t ioff, void *out, int64_t ooff, fft_cplx *buf) {
  const int64_t n = j->n, h = n / 2, s = j->ax_out;
  const size_t w = (size_t)fft_work(j->plan->half ? j->plan->half : j->plan);
  fft_cplx *data = buf, *scratch = buf + w, *X = buf + 2 * w; /* X: h + 1 values */
  gather_complex(j, in, ioff, h + 1, 0, X);
  X[0].im = 0;
  if (n % 2 == 0) X[h].im = 0;
  if (j->plan->half) {
    for (int64_t k = 0; k < h; k++) {
      const fft_cplx xk = X[k], xc = {X[h - k].re, -X[h - k].im};
      const fft_cplx e = {xk.re + xc.re, xk.im + xc.im};
      const fft_cplx wc = {j->plan->rtw[k].re, -j->plan->rtw[k].im};
      const fft_cplx o = cmul((fft_cplx){xk.re - xc.re, xk.im - xc.im}, wc);
      /* Z = e + i o, conjugated for the inverse through the forward plan */
      data[k].re = e.re - o.im, data[k].im = -(e.im + o.re);
    }
    fft_run(j->plan->half, data, scratch);
    for (int64_t k = 0; k < h; k++) { /* z = conj(result) */
      if (j->is_double) {
        double *p = (double *)out + ooff;
        p[2 * k * s] = data[k].re * j->scale, p[(2 * k + 1) * s] = -data[k].im * j->scale;
      } else {
        float *p = (float *)out + ooff;
        p[2 * k * s] = (float)(data[k].re * j->scale), p[(2 * k + 1) * s] = (float)(-data[k].im * j->scale);
      }
    }
  } else {
    /* the Hermitian extension, conjugated; the real part of the forward
     * transform of conj(Y) is that of the inverse transform of Y */
    for (int64_t k = 0; k <= h; k++) data[k].re = X[k].re, data[k].im = -X[k].im;
    for (int64_t k = 1; k < n - h; k++) data[n - k].re = X[k].re, data[n - k].im = X[k].im;
    fft_run(j->plan, data, scratch);
    for (int64_t k = 0; k < n; k++) {
      if (j->is_double)
        ((double *)out)[ooff + k * s] = data[k].re * j->scale;
      else
        ((float *)out)[ooff + k * s] = (float)(data[k].re * j->scale);
    }
  }
}

/* C2C lines whose elements are far apart (a column pass) but whose
 * neighbours in the innermost batch dim are near: a block of such lines is
 * gathered and scattered together, element k of every line in turn, so
 * each cache line read serves the whole block. The lines are transformed
 * one by one as before: the same results. */
static void c2c_block(const fft_job *j, int64_t ioff, int64_t ooff, int64_t count, fft_cplx *buf) {
  const nrt_tensor_view *out = &j->op->operands[0], *in = &j->op->operands[1];
  const int64_t n = j->n, w = fft_work(j->plan), si = j->bstride_in[j->nbatch - 1],
                so = j->bstride_out[j->nbatch - 1];
  fft_cplx *scratch = buf + count * w;
  const double sign = j->forward ? 1.0 : -1.0;
  for (int64_t k = 0; k < n; k++)
    for (int64_t b = 0; b < count; b++) {
      const int64_t at = ioff + b * si + k * j->ax_in;
      fft_cplx *d = buf + b * w + k;
      if (j->is_double)
        d->re = ((const double *)in->data)[at], d->im = sign * ((const double *)in->data)[at + j->pair_in];
      else
        d->re = ((const float *)in->data)[at], d->im = sign * (double)((const float *)in->data)[at + j->pair_in];
    }
  for (int64_t b = 0; b < count; b++) fft_run(j->plan, buf + b * w, scratch);
  const double scale = j->scale, iscale = sign * scale;
  for (int64_t k = 0; k < n; k++)
    for (int64_t b = 0; b < count; b++) {
      const int64_t at = ooff + b * so + k * j->ax_out;
      const fft_cplx *d = buf + b * w + k;
      if (j->is_double)
        ((double *)out->data)[at] = d->re * scale, ((double *)out->data)[at + j->pair_out] = d->im * iscale;
      else
        ((float *)out->data)[at] = (float)(d->re * scale), ((float *)out->data)[at + j->pair_out] = (float)(d->im * iscale);
    }
}

/* Lines per block for c2c_block (1: no blocking). */
static int64_t block_of(const fft_job *j) {
  if (j->kind != KIND_C2C || j->nbatch == 0) return 1;
  const int64_t inner_in = j->bstride_in[j->nbatch - 1], inner_out = j->bstride_out[j->nbatch - 1];
  const int64_t far = 16; /* elements apart: more than a cache line of float64 pairs */
  if (!((j->ax_in > far || j->ax_in < -far) && inner_in > -far && inner_in < far && inner_out > -far && inner_out < far))
    return 1;
  int64_t block = 65536 / (j->n + 1);
  return block < 1 ? 1 : block > 16 ? 16 : block;
}

static void fft_range(int64_t begin, int64_t end, void *arg) {
  const fft_job *j = arg;
  fft_cplx *buf = malloc(sizeof(fft_cplx) * (size_t)j->buffer);
  if (!buf) return; /* reported by the caller's preflight allocation */
  const nrt_tensor_view *out = &j->op->operands[0], *in = &j->op->operands[1];
  const int64_t block = block_of(j), inner = j->nbatch ? j->bshape[j->nbatch - 1] : 1;
  for (int64_t line = begin; line < end;) {
    int64_t rest = line, ooff = 0, ioff = 0;
    for (int d = j->nbatch - 1; d >= 0; d--) {
      const int64_t idx = rest % j->bshape[d];
      rest /= j->bshape[d];
      ooff += idx * j->bstride_out[d], ioff += idx * j->bstride_in[d];
    }
    if (block > 1) { /* up to `block` lines, not past the innermost dim's end nor the range's */
      int64_t count = inner - line % inner;
      if (count > block) count = block;
      if (count > end - line) count = end - line;
      c2c_block(j, ioff, ooff, count, buf);
      line += count;
      continue;
    }
    if (j->kind == KIND_C2C)
      line_c2c(j, in->data, ioff, out->data, ooff, buf);
    else if (j->kind == KIND_R2C)
      line_r2c(j, in->data, ioff, out->data, ooff, buf);
    else
      line_c2r(j, in->data, ioff, out->data, ooff, buf);
    line++;
  }
  free(buf);
}

/* ---- validation and the launch ---------------------------------------------- */

static nrt_status run_fft(const nrt_op *op, int kind, const char *name) {
  const int want_scalars = kind == KIND_C2C ? 3 : kind == KIND_R2C ? 3 : 2;
  if (op->num_operands != 2 || op->num_outputs != 1 || op->num_scalars < want_scalars)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: expects operands [out, in] and %d scalars", name, want_scalars);
  const nrt_tensor_view *out = &op->operands[0], *in = &op->operands[1];
  if (out->dtype != in->dtype || (out->dtype != NRT_FLOAT32 && out->dtype != NRT_FLOAT64))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: operands must be float32 or float64 views of one dtype", name);
  const int out_complex = kind != KIND_C2R, in_complex = kind != KIND_R2C;
  const int dims = out->ndim - out_complex;
  if (dims < 1 || in->ndim - in_complex != dims)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: out and in must have the same number of dims (and a pair dim "
                   "for complex operands)", name);
  if ((out_complex && out->shape[out->ndim - 1] != 2) || (in_complex && in->shape[in->ndim - 1] != 2))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: a complex operand's last dim must hold the 2 parts", name);
  const int64_t axis = op->scalars[0].i;
  if (axis < 0 || axis >= dims)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: axis %lld out of range for %d dims", name, (long long)axis, dims);
  fft_job j;
  memset(&j, 0, sizeof j);
  j.op = op, j.kind = kind, j.dims = dims, j.axis = (int)axis, j.is_double = out->dtype == NRT_FLOAT64;
  j.out_len = out->shape[axis], j.in_len = in->shape[axis];
  j.ax_out = out->strides[axis], j.ax_in = in->strides[axis];
  j.pair_out = out_complex ? out->strides[out->ndim - 1] : 0;
  j.pair_in = in_complex ? in->strides[in->ndim - 1] : 0;
  int64_t lines = 1;
  for (int d = 0; d < dims; d++) {
    if (d == axis) continue;
    if (out->shape[d] != in->shape[d])
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: out and in differ in batch dim %d (%lld and %lld)", name, d,
                     (long long)out->shape[d], (long long)in->shape[d]);
    j.bshape[j.nbatch] = out->shape[d];
    j.bstride_out[j.nbatch] = out->strides[d], j.bstride_in[j.nbatch] = in->strides[d];
    j.nbatch++;
    lines *= out->shape[d];
  }
  if (kind == KIND_C2C) {
    j.forward = op->scalars[1].i != 0;
    j.scale = op->scalars[2].f;
    j.n = j.out_len;
    if (j.in_len != j.out_len)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fft_c2c: out and in differ in length along the axis (%lld and %lld)",
                     (long long)j.out_len, (long long)j.in_len);
  } else if (kind == KIND_R2C) {
    j.scale = op->scalars[1].f;
    j.onesided = op->scalars[2].i != 0;
    j.n = j.in_len;
    if (j.n < 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fft_r2c: the signal length must be positive");
    if (j.out_len != (j.onesided ? j.n / 2 + 1 : j.n))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fft_r2c: out has %lld values along the axis, expected %lld",
                     (long long)j.out_len, (long long)(j.onesided ? j.n / 2 + 1 : j.n));
  } else {
    j.scale = op->scalars[1].f;
    j.n = j.out_len;
    if (j.n < 1) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fft_c2r: the signal length must be positive");
    if (j.in_len < j.n / 2 + 1)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "fft_c2r: in has %lld values along the axis, needs %lld",
                     (long long)j.in_len, (long long)(j.n / 2 + 1));
  }
  if (lines == 0 || j.n == 0) return NRT_SUCCESS;
  const int real = kind != KIND_C2C && j.n % 2 == 0;
  j.plan = fft_plan_get(j.n, real);
  if (!j.plan) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: cannot make the plan for length %lld", name,
                              (long long)j.n);
  j.buffer = 2 * fft_work(real ? j.plan->half : j.plan) + j.n + 2;
  if (block_of(&j) > 1) j.buffer = (block_of(&j) + 1) * fft_work(j.plan);
  void *probe = malloc(sizeof(fft_cplx) * (size_t)j.buffer);
  if (!probe)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: cannot allocate line buffers of %lld values", name,
                   (long long)j.buffer);
  free(probe);
  rt_parallel_for(lines, 1 + 32768 / (j.n + 1), fft_range, &j);
  return NRT_SUCCESS;
}

nrt_status rt_kernel_fft_c2c(const nrt_op *op) { return run_fft(op, KIND_C2C, "fft_c2c"); }
nrt_status rt_kernel_fft_r2c(const nrt_op *op) { return run_fft(op, KIND_R2C, "fft_r2c"); }
nrt_status rt_kernel_fft_c2r(const nrt_op *op) { return run_fft(op, KIND_C2R, "fft_c2r"); }
