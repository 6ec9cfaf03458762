/* The integer convolution loops for one dtype; included by conv_integer.c
 * with T (storage), ACC (unsigned accumulator: wraps without undefined
 * behaviour), WIDEN(x) (T -> ACC, sign-extending) and SUFFIX defined.
 *
 * A task is one plane (image, channel) of the side written, summed into a
 * private ACC buffer one row at a time: for each tap, the rows of positions
 * it reaches (valid ranges computed once per tap, no test per element),
 * scaled by the tap's weight. The forward reads img rows and writes out
 * planes; the input gradient reads out rows and scatters them into img
 * planes at the stride. */

RT_SIMD_VOID(VF(ci_forward_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t plane = out->d * out->h * out->w;
  ACC *acc = malloc((size_t)(plane > 0 ? plane : 1) * sizeof *acc);
  if (!acc) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / out->c, k = task % out->c, g = k / j->kg;
    for (int64_t q = 0; q < plane; q++) acc[q] = 0;
    for (int64_t c = 0; c < j->cg; c++) {
      const T *src = (const T *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
      for (int64_t a = 0; a < j->k[0]; a++)
        for (int64_t b = 0; b < j->k[1]; b++)
          for (int64_t e = 0; e < j->k[2]; e++) {
            ACC wv = WIDEN(((const T *)j->w.data)[ci_weight_at(j, k, c, a, b, e)]);
            ci_range r;
            if (!wv || !ci_tap_range(j, a, b, e, &r)) continue;
            int64_t step = j->s[2] * im->sw, m = r.w1 - r.w0;
            for (int64_t od = r.d0; od < r.d1; od++)
              for (int64_t oh = r.h0; oh < r.h1; oh++) {
                const T *x = src + (od * j->s[0] - j->p[0] + a * j->dl[0]) * im->sd +
                             (oh * j->s[1] - j->p[1] + b * j->dl[1]) * im->sh +
                             (r.w0 * j->s[2] - j->p[2] + e * j->dl[2]) * im->sw;
                ACC *row = acc + (od * out->h + oh) * out->w + r.w0;
                if (step == 1)
                  for (int64_t u = 0; u < m; u++) row[u] += wv * WIDEN(x[u]);
                else
                  for (int64_t u = 0; u < m; u++) row[u] += wv * WIDEN(x[u * step]);
              }
          }
    }
    ACC bias = j->bias ? WIDEN(((const T *)j->bias)[k * j->bias_stride]) : 0;
    T *dst = (T *)out->data + n * out->sn + k * out->sc;
    for (int64_t od = 0; od < out->d; od++)
      for (int64_t oh = 0; oh < out->h; oh++) {
        T *d = dst + od * out->sd + oh * out->sh;
        const ACC *s = acc + (od * out->h + oh) * out->w;
        for (int64_t ow = 0; ow < out->w; ow++) d[ow * out->sw] = (T)(s[ow] + bias);
      }
  }
  free(acc);
}

RT_SIMD_VOID(VF(ci_input_grad_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t plane = im->d * im->h * im->w;
  ACC *acc = malloc((size_t)(plane > 0 ? plane : 1) * sizeof *acc);
  if (!acc) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / im->c, c = task % im->c, g = c / j->cg;
    for (int64_t q = 0; q < plane; q++) acc[q] = 0;
    for (int64_t k = g * j->kg; k < (g + 1) * j->kg; k++) {
      const T *src = (const T *)out->data + n * out->sn + k * out->sc;
      for (int64_t a = 0; a < j->k[0]; a++)
        for (int64_t b = 0; b < j->k[1]; b++)
          for (int64_t e = 0; e < j->k[2]; e++) {
            ACC wv = WIDEN(((const T *)j->w.data)[ci_weight_at(j, k, c % j->cg, a, b, e)]);
            ci_range r;
            if (!wv || !ci_tap_range(j, a, b, e, &r)) continue;
            int64_t step = j->s[2], m = r.w1 - r.w0;
            for (int64_t od = r.d0; od < r.d1; od++)
              for (int64_t oh = r.h0; oh < r.h1; oh++) {
                const T *x = src + od * out->sd + oh * out->sh + r.w0 * out->sw;
                ACC *row = acc + ((od * j->s[0] - j->p[0] + a * j->dl[0]) * im->h +
                                  (oh * j->s[1] - j->p[1] + b * j->dl[1])) * im->w +
                           (r.w0 * j->s[2] - j->p[2] + e * j->dl[2]);
                if (step == 1 && out->sw == 1)
                  for (int64_t u = 0; u < m; u++) row[u] += wv * WIDEN(x[u]);
                else
                  for (int64_t u = 0; u < m; u++) row[u * step] += wv * WIDEN(x[u * out->sw]);
              }
          }
    }
    ACC bias = j->bias ? WIDEN(((const T *)j->bias)[c * j->bias_stride]) : 0;
    T *dst = (T *)im->data + n * im->sn + c * im->sc;
    for (int64_t id = 0; id < im->d; id++)
      for (int64_t ih = 0; ih < im->h; ih++) {
        T *d = dst + id * im->sd + ih * im->sh;
        const ACC *s = acc + (id * im->h + ih) * im->w;
        for (int64_t iw = 0; iw < im->w; iw++) d[iw * im->sw] = (T)(s[iw] + bias);
      }
  }
  free(acc);
}

#undef T
#undef ACC
#undef WIDEN
#undef SUFFIX
