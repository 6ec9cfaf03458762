/* Depthwise convolution (one image channel per output channel) for one
 * dtype, as direct loops: a product per channel would be a 1-row matrix
 * times a kh*kw-deep column, all overhead. Included by conv_impl.h, with
 * its macros.
 *
 * Forward: tasks are planes (n, c), accumulating one output row at a time
 * over the taps (vectorised along the row when the stride is 1), or, for
 * channels-inner images, output rows (n, oh) vectorised over channels with
 * the weight transposed to [tap][C] (j->wcols). Weight gradient: tasks are
 * channels, each summing its taps over images and positions in order. */

RT_SIMD_VOID(VF(dw_planes_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  conv_job *j = arg;
  const rt_image *im = &j->img, *out = &j->out;
  A *acc = malloc((size_t)(out->w > 0 ? out->w : 1) * sizeof *acc);
  if (!acc) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / out->c, c = p % out->c;
    const T *src = (const T *)im->data + n * im->sn + c * im->sc;
    T *dst = (T *)out->data + n * out->sn + c * out->sc;
    const A *w = (const A *)j->wmat + c * j->w_rs;
    A bias = j->bias ? LD(((const T *)j->bias)[c * j->bias_stride]) : 0;
    for (int64_t oh = 0; oh < out->h; oh++) {
      for (int64_t u = 0; u < out->w; u++) acc[u] = bias;
      for (int64_t i = 0; i < j->kh; i++) {
        int64_t ih = oh * j->sh - j->ph + i * j->dh;
        if (ih < 0 || ih >= im->h) continue;
        const T *row = src + ih * im->sh;
        for (int64_t jj = 0; jj < j->kw; jj++) {
          int64_t iw0 = -j->pw + jj * j->dw, u0, u1;
          conv_valid_range(iw0, j->sw, im->w, out->w, &u0, &u1);
          if (u1 <= u0) continue;
          A wv = w[i * j->kw + jj];
          const T *x = row + (iw0 + u0 * j->sw) * im->sw;
          int64_t step = j->sw * im->sw, m = u1 - u0;
          A *a = acc + u0;
          if (step == 1)
            for (int64_t u = 0; u < m; u++) a[u] += wv * LD(x[u]);
          else
            for (int64_t u = 0; u < m; u++) a[u] += wv * LD(x[u * step]);
        }
      }
      T *d = dst + oh * out->sh;
      for (int64_t u = 0; u < out->w; u++) d[u * out->sw] = ST(acc[u]);
    }
  }
  free(acc);
}

RT_SIMD_VOID(VF(dw_rows_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  conv_job *j = arg;
  const rt_image *im = &j->img, *out = &j->out;
  int64_t C = out->c;
  A *acc = malloc((size_t)C * sizeof *acc), *bias = malloc((size_t)C * sizeof *bias);
  if (!acc || !bias) {
    atomic_store(&j->out_of_memory, 1);
    free(acc);
    free(bias);
    return;
  }
  for (int64_t c = 0; c < C; c++) bias[c] = j->bias ? LD(((const T *)j->bias)[c * j->bias_stride]) : 0;
  const A *wcols = j->wcols;
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / out->h, oh = r % out->h;
    for (int64_t ow = 0; ow < out->w; ow++) {
      for (int64_t c = 0; c < C; c++) acc[c] = bias[c];
      for (int64_t i = 0; i < j->kh; i++) {
        int64_t ih = oh * j->sh - j->ph + i * j->dh;
        if (ih < 0 || ih >= im->h) continue;
        for (int64_t jj = 0; jj < j->kw; jj++) {
          int64_t iw = ow * j->sw - j->pw + jj * j->dw;
          if (iw < 0 || iw >= im->w) continue;
          const T *x = (const T *)im->data + n * im->sn + ih * im->sh + iw * im->sw;
          const A *w = wcols + (i * j->kw + jj) * C;
          for (int64_t c = 0; c < C; c++) acc[c] += w[c] * LD(x[c]);
        }
      }
      T *d = (T *)out->data + n * out->sn + oh * out->sh + ow * out->sw;
      for (int64_t c = 0; c < C; c++) d[c * out->sc] = ST(acc[c]);
    }
  }
  free(acc);
  free(bias);
}

/* Weight gradient: j->wgrad[c][tap] for channels [begin, end). */
RT_SIMD_VOID(VF(dw_wgrad_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  conv_job *j = arg;
  const rt_image *im = &j->img, *out = &j->out;
  for (int64_t c = begin; c < end; c++) {
    A *acc = (A *)j->wgrad + c * j->kk;
    for (int64_t t = 0; t < j->kk; t++) acc[t] = 0;
    for (int64_t n = 0; n < out->n; n++) {
      const T *src = (const T *)im->data + n * im->sn + c * im->sc;
      const T *g = (const T *)out->data + n * out->sn + c * out->sc;
      for (int64_t i = 0; i < j->kh; i++)
        for (int64_t jj = 0; jj < j->kw; jj++) {
          int64_t iw0 = -j->pw + jj * j->dw, u0, u1;
          conv_valid_range(iw0, j->sw, im->w, out->w, &u0, &u1);
          A sum = 0;
          for (int64_t oh = 0; oh < out->h; oh++) {
            int64_t ih = oh * j->sh - j->ph + i * j->dh;
            if (ih < 0 || ih >= im->h || u1 <= u0) continue;
            const T *x = src + ih * im->sh + (iw0 + u0 * j->sw) * im->sw;
            const T *gy = g + oh * out->sh + u0 * out->sw;
            int64_t step = j->sw * im->sw;
            for (int64_t u = 0; u < u1 - u0; u++) sum += LD(gy[u * out->sw]) * LD(x[u * step]);
          }
          acc[i * j->kw + jj] += sum;
        }
    }
  }
}

/* Weight gradient for channels-inner images: tasks are blocks of
 * DW_CBLOCK channels, vectorised over the block, summing over images and
 * positions in order. */
RT_SIMD_VOID(VF(dw_wgrad_rows_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  conv_job *j = arg;
  const rt_image *im = &j->img, *out = &j->out;
  int64_t kk = j->kk;
  A *acc = malloc((size_t)(kk * DW_CBLOCK) * sizeof *acc), *gy = malloc(DW_CBLOCK * sizeof *gy);
  if (!acc || !gy) {
    atomic_store(&j->out_of_memory, 1);
    free(acc);
    free(gy);
    return;
  }
  for (int64_t blk = begin; blk < end; blk++) {
    int64_t c0 = blk * DW_CBLOCK, cb = out->c - c0 < DW_CBLOCK ? out->c - c0 : DW_CBLOCK;
    for (int64_t t = 0; t < kk * cb; t++) acc[t] = 0;
    for (int64_t n = 0; n < out->n; n++)
      for (int64_t oh = 0; oh < out->h; oh++)
        for (int64_t ow = 0; ow < out->w; ow++) {
          const T *g = (const T *)out->data + n * out->sn + c0 * out->sc + oh * out->sh + ow * out->sw;
          for (int64_t c = 0; c < cb; c++) gy[c] = LD(g[c * out->sc]);
          for (int64_t i = 0; i < j->kh; i++) {
            int64_t ih = oh * j->sh - j->ph + i * j->dh;
            if (ih < 0 || ih >= im->h) continue;
            for (int64_t jj = 0; jj < j->kw; jj++) {
              int64_t iw = ow * j->sw - j->pw + jj * j->dw;
              if (iw < 0 || iw >= im->w) continue;
              const T *x = (const T *)im->data + n * im->sn + c0 + ih * im->sh + iw * im->sw;
              A *a = acc + (i * j->kw + jj) * cb;
              for (int64_t c = 0; c < cb; c++) a[c] += gy[c] * LD(x[c]);
            }
          }
        }
    for (int64_t c = 0; c < cb; c++)
      for (int64_t t = 0; t < kk; t++) ((A *)j->wgrad)[(c0 + c) * kk + t] = acc[t * cb + c];
  }
  free(acc);
  free(gy);
}
