/* The pooling kernels for one dtype; included by pool.c (see
 * vision_common.h for the macros it defines; also IS_NAN(v)).
 *
 * Two walks over the data: planes (any strides; one [H, W] plane of one
 * channel at a time, as NCHW stores it) and channel rows (channels_last:
 * every channel of one pixel at once, in loops the compiler vectorises).
 * Backward kernels accumulate into a scratch block in A and store it once,
 * so overlapping windows add in the same order for any thread count. */

/* One output row of a plane whose column windows all have the same taps
 * (j->col_step): the window walk of max_planes_ with selects in place of
 * branches, across a chunk of columns at a time, so it vectorises. Same
 * taps in the same order, so the same maximum and index. sw is the input's
 * column stride (a literal 1 for contiguous rows, so that loads are not
 * gathers). */
#define MAX_COLS_CHUNK 64
static inline __attribute__((always_inline)) void VF(max_row_uniform_)(const pool_job *j, const T *src, int64_t sw, const rt_window *wh,
                                                                       T *dst, int64_t *idx, int64_t dst_sw,
                                                                       int64_t idx_sw) {
  const rt_image *in = &j->img, *out = &j->pooled;
  const int64_t step = j->col_step, first = j->ww[0].first, kw = j->ww[0].count;
  for (int64_t o0 = 0; o0 < out->w; o0 += MAX_COLS_CHUNK) {
    const int64_t cnt = out->w - o0 < MAX_COLS_CHUNK ? out->w - o0 : MAX_COLS_CHUNK;
    A m[MAX_COLS_CHUNK];
    int64_t mi[MAX_COLS_CHUNK];
    for (int64_t o = 0; o < cnt; o++) {
      m[o] = LOWEST;
      mi[o] = wh->first * in->w + first + (o0 + o) * step;
    }
    for (int64_t a = 0; a < wh->count; a++) {
      const int64_t ih = wh->first + a * j->dh;
      const T *row = src + ih * in->sh;
      for (int64_t b = 0; b < kw; b++) {
        const int64_t iw0 = first + o0 * step + b * j->dw;
        for (int64_t o = 0; o < cnt; o++) {
          const int64_t iw = iw0 + o * step;
          const A v = LD(row[iw * sw]);
          const int take = v > m[o] || IS_NAN(v);
          m[o] = take ? v : m[o];
          mi[o] = take ? ih * in->w + iw : mi[o];
        }
      }
    }
    for (int64_t o = 0; o < cnt; o++) {
      dst[(o0 + o) * dst_sw] = ST(m[o]);
      idx[(o0 + o) * idx_sw] = mi[o];
    }
  }
}

RT_SIMD_VOID(VF(max_planes_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  const pool_job *j = arg;
  const rt_image *in = &j->img, *out = &j->pooled, *ind = &j->ind;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / in->c, c = p % in->c;
    const T *src = (const T *)in->data + n * in->sn + c * in->sc;
    T *dst = (T *)out->data + n * out->sn + c * out->sc;
    int64_t *idx = (int64_t *)ind->data + n * ind->sn + c * ind->sc;
    if (j->col_step > 0) {
      for (int64_t oh = 0; oh < out->h; oh++) {
        T *d = dst + oh * out->sh;
        int64_t *x = idx + oh * ind->sh;
        if (in->sw == 1)
          VF(max_row_uniform_)(j, src, 1, &j->wh[oh], d, x, out->sw, ind->sw);
        else
          VF(max_row_uniform_)(j, src, in->sw, &j->wh[oh], d, x, out->sw, ind->sw);
      }
      continue;
    }
    for (int64_t oh = 0; oh < out->h; oh++) {
      const rt_window *wh = &j->wh[oh];
      for (int64_t ow = 0; ow < out->w; ow++) {
        const rt_window *ww = &j->ww[ow];
        A m = LOWEST;
        int64_t mi = wh->first * in->w + ww->first;
        for (int64_t a = 0; a < wh->count; a++) {
          int64_t ih = wh->first + a * j->dh;
          const T *row = src + ih * in->sh;
          for (int64_t b = 0; b < ww->count; b++) {
            int64_t iw = ww->first + b * j->dw;
            A v = LD(row[iw * in->sw]);
            if (v > m || IS_NAN(v)) {
              m = v;
              mi = ih * in->w + iw;
            }
          }
        }
        dst[oh * out->sh + ow * out->sw] = ST(m);
        idx[oh * ind->sh + ow * ind->sw] = mi;
      }
    }
  }
}

/* Rows are (n, oh); the running maximum of every channel lives in acc. */
RT_SIMD_VOID(VF(max_rows_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  pool_job *j = arg;
  const rt_image *in = &j->img, *out = &j->pooled, *ind = &j->ind;
  int64_t C = in->c;
  A *acc = malloc((size_t)C * sizeof *acc);
  int64_t *arg_max = malloc((size_t)C * sizeof *arg_max);
  if (!acc || !arg_max) {
    atomic_store(&j->out_of_memory, 1);
    free(acc);
    free(arg_max);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / out->h, oh = r % out->h;
    const rt_window *wh = &j->wh[oh];
    for (int64_t ow = 0; ow < out->w; ow++) {
      const rt_window *ww = &j->ww[ow];
      int64_t first = wh->first * in->w + ww->first;
      for (int64_t c = 0; c < C; c++) {
        acc[c] = LOWEST;
        arg_max[c] = first;
      }
      for (int64_t a = 0; a < wh->count; a++) {
        int64_t ih = wh->first + a * j->dh;
        for (int64_t b = 0; b < ww->count; b++) {
          int64_t iw = ww->first + b * j->dw, pos = ih * in->w + iw;
          const T *src = (const T *)in->data + n * in->sn + ih * in->sh + iw * in->sw;
          for (int64_t c = 0; c < C; c++) {
            A v = LD(src[c]);
            int take = v > acc[c] || IS_NAN(v);
            acc[c] = take ? v : acc[c];
            arg_max[c] = take ? pos : arg_max[c];
          }
        }
      }
      T *dst = (T *)out->data + n * out->sn + oh * out->sh + ow * out->sw;
      int64_t *idx = (int64_t *)ind->data + n * ind->sn + oh * ind->sh + ow * ind->sw;
      for (int64_t c = 0; c < C; c++) {
        dst[c * out->sc] = ST(acc[c]);
        idx[c * ind->sc] = arg_max[c];
      }
    }
  }
  free(acc);
  free(arg_max);
}

static inline A VF(divide_)(const pool_job *j, A sum, const rt_window *wh, const rt_window *ww) {
  switch (j->divisor_kind) {
    case POOL_DIVIDE_ADAPTIVE: return sum / (A)wh->size / (A)ww->size;
    case POOL_DIVIDE_OVERRIDE: return sum / (A)j->divisor;
    default: return sum / (A)(wh->size * ww->size);
  }
}

/* Writes block (scratch, rows x cols x cb, channel innermost) to the image
 * plane block at dst: channel k of the block is at dst + k * sc. Inlined
 * into the backward kernels, so that it is compiled for their ISA level:
 * a contiguous plane (NCHW) is then one vector loop. Called
 * apart at the baseline level with the stride unknown, it was a third of
 * bfloat16 max-pool backward's time (Zen 4, one thread, 64x32x32x32). */
static inline __attribute__((always_inline)) void VF(store_block_)(const A *scratch, const rt_image *im, T *dst,
                                                                   int64_t cb) {
  if (cb == 1 && im->sw == 1 && im->sh == im->w) { /* a whole contiguous plane */
    for (int64_t i = 0; i < im->h * im->w; i++) dst[i] = ST(scratch[i]);
    return;
  }
  if (cb == 1) {
    for (int64_t h = 0; h < im->h; h++) {
      const A *s = scratch + h * im->w;
      T *d = dst + h * im->sh;
      for (int64_t w = 0; w < im->w; w++) d[w * im->sw] = ST(s[w]);
    }
    return;
  }
  for (int64_t h = 0; h < im->h; h++)
    for (int64_t w = 0; w < im->w; w++) {
      const A *s = scratch + (h * im->w + w) * cb;
      T *d = dst + h * im->sh + w * im->sw;
      for (int64_t k = 0; k < cb; k++) d[k * im->sc] = ST(s[k]);
    }
}

RT_SIMD_VOID(VF(avg_planes_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  const pool_job *j = arg;
  const rt_image *in = &j->img, *out = &j->pooled;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / in->c, c = p % in->c;
    const T *src = (const T *)in->data + n * in->sn + c * in->sc;
    T *dst = (T *)out->data + n * out->sn + c * out->sc;
    for (int64_t oh = 0; oh < out->h; oh++) {
      const rt_window *wh = &j->wh[oh];
      for (int64_t ow = 0; ow < out->w; ow++) {
        const rt_window *ww = &j->ww[ow];
        A sum = 0;
        for (int64_t ih = wh->first; ih < wh->first + wh->count; ih++)
          for (int64_t iw = ww->first; iw < ww->first + ww->count; iw++)
            sum += LD(src[ih * in->sh + iw * in->sw]);
        dst[oh * out->sh + ow * out->sw] = ST(VF(divide_)(j, sum, wh, ww));
      }
    }
  }
}

RT_SIMD_VOID(VF(avg_rows_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  pool_job *j = arg;
  const rt_image *in = &j->img, *out = &j->pooled;
  int64_t C = in->c;
  A *acc = malloc((size_t)C * sizeof *acc);
  if (!acc) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / out->h, oh = r % out->h;
    const rt_window *wh = &j->wh[oh];
    for (int64_t ow = 0; ow < out->w; ow++) {
      const rt_window *ww = &j->ww[ow];
      for (int64_t c = 0; c < C; c++) acc[c] = 0;
      for (int64_t ih = wh->first; ih < wh->first + wh->count; ih++)
        for (int64_t iw = ww->first; iw < ww->first + ww->count; iw++) {
          const T *src = (const T *)in->data + n * in->sn + ih * in->sh + iw * in->sw;
          for (int64_t c = 0; c < C; c++) acc[c] += LD(src[c]);
        }
      T *dst = (T *)out->data + n * out->sn + oh * out->sh + ow * out->sw;
      for (int64_t c = 0; c < C; c++) dst[c * out->sc] = ST(VF(divide_)(j, acc[c], wh, ww));
    }
  }
  free(acc);
}

/* Backward tasks are (n, channel block) pairs; a block is one channel for
 * planes, j->cblock channels for channel rows. */
RT_SIMD_VOID(VF(avg_backward_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  pool_job *j = arg;
  const rt_image *gin = &j->img, *gout = &j->pooled;
  int64_t cb_max = j->cblock, blocks = (gin->c + cb_max - 1) / cb_max;
  A *scratch = malloc((size_t)(gin->h * gin->w * cb_max) * sizeof *scratch);
  A *delta = malloc((size_t)cb_max * sizeof *delta);
  if (!scratch || !delta) {
    atomic_store(&j->out_of_memory, 1);
    free(scratch);
    free(delta);
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t n = t / blocks, c0 = t % blocks * cb_max;
    int64_t cb = gin->c - c0 < cb_max ? gin->c - c0 : cb_max;
    for (int64_t i = 0; i < gin->h * gin->w * cb; i++) scratch[i] = 0;
    const T *g = (const T *)gout->data + n * gout->sn + c0 * gout->sc;
    if (cb == 1) { /* one plane: no inner channel loop */
      for (int64_t oh = 0; oh < gout->h; oh++) {
        const rt_window *wh = &j->wh[oh];
        for (int64_t ow = 0; ow < gout->w; ow++) {
          const rt_window *ww = &j->ww[ow];
          A d = VF(divide_)(j, LD(g[oh * gout->sh + ow * gout->sw]), wh, ww);
          for (int64_t ih = wh->first; ih < wh->first + wh->count; ih++) {
            A *s = scratch + ih * gin->w + ww->first;
            for (int64_t b = 0; b < ww->count; b++) s[b] += d;
          }
        }
      }
      VF(store_block_)(scratch, gin, (T *)gin->data + n * gin->sn + c0 * gin->sc, 1);
      continue;
    }
    for (int64_t oh = 0; oh < gout->h; oh++) {
      const rt_window *wh = &j->wh[oh];
      for (int64_t ow = 0; ow < gout->w; ow++) {
        const rt_window *ww = &j->ww[ow];
        const T *gp = g + oh * gout->sh + ow * gout->sw;
        for (int64_t k = 0; k < cb; k++) delta[k] = VF(divide_)(j, LD(gp[k * gout->sc]), wh, ww);
        for (int64_t ih = wh->first; ih < wh->first + wh->count; ih++)
          for (int64_t iw = ww->first; iw < ww->first + ww->count; iw++) {
            A *s = scratch + (ih * gin->w + iw) * cb;
            for (int64_t k = 0; k < cb; k++) s[k] += delta[k];
          }
      }
    }
    VF(store_block_)(scratch, gin, (T *)gin->data + n * gin->sn + c0 * gin->sc, cb);
  }
  free(scratch);
  free(delta);
}

RT_SIMD_VOID(VF(max_backward_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  pool_job *j = arg;
  const rt_image *gin = &j->img, *gout = &j->pooled, *ind = &j->ind;
  int64_t cb_max = j->cblock, blocks = (gin->c + cb_max - 1) / cb_max, plane = gin->h * gin->w;
  A *scratch = malloc((size_t)(plane * cb_max) * sizeof *scratch);
  if (!scratch) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t n = t / blocks, c0 = t % blocks * cb_max;
    int64_t cb = gin->c - c0 < cb_max ? gin->c - c0 : cb_max;
    for (int64_t i = 0; i < plane * cb; i++) scratch[i] = 0;
    const T *g = (const T *)gout->data + n * gout->sn + c0 * gout->sc;
    const int64_t *x = (const int64_t *)ind->data + n * ind->sn + c0 * ind->sc;
    for (int64_t oh = 0; oh < gout->h; oh++)
      for (int64_t ow = 0; ow < gout->w; ow++) {
        const T *gp = g + oh * gout->sh + ow * gout->sw;
        const int64_t *xp = x + oh * ind->sh + ow * ind->sw;
        for (int64_t k = 0; k < cb; k++) {
          int64_t i = xp[k * ind->sc];
          if (i < 0 || i >= plane) {
            atomic_store(&j->bad_index, i);
            atomic_store(&j->failed, 1);
            goto done;
          }
          scratch[i * cb + k] += LD(gp[k * gout->sc]);
        }
      }
    VF(store_block_)(scratch, gin, (T *)gin->data + n * gin->sn + c0 * gin->sc, cb);
  }
done:
  free(scratch);
}


#undef T
#undef A
#undef SUFFIX
#undef LOWEST
#undef IS_NAN
