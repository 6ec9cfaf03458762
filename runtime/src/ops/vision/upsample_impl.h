/* The upsampling kernels for one floating dtype; included by upsample.c
 * (see vision_common.h for the macros it defines).
 *
 * Forward: planes (any strides) or channel rows (channels_last, vectorised
 * over channels). Backward: tasks of (image, channel block) that own their
 * part of grad_input, accumulated in A in a fixed order. */

RT_SIMD_VOID(VF(bilinear_planes_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  const upsample_job *j = arg;
  const rt_image *in = &j->img, *out = &j->out;
  const A *lh0 = j->lh0, *lh1 = j->lh1, *lw0 = j->lw0, *lw1 = j->lw1;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / in->c, c = p % in->c;
    const T *src = (const T *)in->data + n * in->sn + c * in->sc;
    T *dst = (T *)out->data + n * out->sn + c * out->sc;
    for (int64_t oh = 0; oh < out->h; oh++) {
      const T *r0 = src + j->h0[oh] * in->sh, *r1 = src + j->h1[oh] * in->sh;
      T *d = dst + oh * out->sh;
      for (int64_t ow = 0; ow < out->w; ow++) {
        int64_t a = j->w0[ow] * in->sw, b = j->w1[ow] * in->sw;
        A top = lw0[ow] * LD(r0[a]) + lw1[ow] * LD(r0[b]);
        A bottom = lw0[ow] * LD(r1[a]) + lw1[ow] * LD(r1[b]);
        d[ow * out->sw] = ST(lh0[oh] * top + lh1[oh] * bottom);
      }
    }
  }
}

RT_SIMD_VOID(VF(bilinear_rows_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  const upsample_job *j = arg;
  const rt_image *in = &j->img, *out = &j->out;
  const A *lh0 = j->lh0, *lh1 = j->lh1, *lw0 = j->lw0, *lw1 = j->lw1;
  int64_t C = in->c;
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / out->h, oh = r % out->h;
    const T *r0 = (const T *)in->data + n * in->sn + j->h0[oh] * in->sh;
    const T *r1 = (const T *)in->data + n * in->sn + j->h1[oh] * in->sh;
    A a0 = lh0[oh], a1 = lh1[oh];
    for (int64_t ow = 0; ow < out->w; ow++) {
      const T *x00 = r0 + j->w0[ow] * in->sw, *x01 = r0 + j->w1[ow] * in->sw;
      const T *x10 = r1 + j->w0[ow] * in->sw, *x11 = r1 + j->w1[ow] * in->sw;
      A b0 = lw0[ow], b1 = lw1[ow];
      T *d = (T *)out->data + n * out->sn + oh * out->sh + ow * out->sw;
      for (int64_t c = 0; c < C; c++) {
        A top = b0 * LD(x00[c]) + b1 * LD(x01[c]);
        A bottom = b0 * LD(x10[c]) + b1 * LD(x11[c]);
        d[c * out->sc] = ST(a0 * top + a1 * bottom);
      }
    }
  }
}

/* Writes the scratch block (H x W x cb, channel innermost) to grad_input. */
static void VF(store_block_)(const A *scratch, const rt_image *im, T *dst, int64_t cb) {
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

/* One plane's gradient (a channel block of one): the scalar loop without
 * the block's inner loop. */
static void VF(backward_plane_)(const upsample_job *j, const T *g, A *scratch) {
  const rt_image *gin = &j->img, *gout = &j->out;
  const A *lh0 = j->lh0, *lh1 = j->lh1, *lw0 = j->lw0, *lw1 = j->lw1;
  int64_t W = gin->w;
  for (int64_t oh = 0; oh < gout->h; oh++) {
    const T *row = g + oh * gout->sh;
    A *r0 = scratch + j->h0[oh] * W;
    if (!lh0) { /* nearest: h1/w1 are not filled in */
      for (int64_t ow = 0; ow < gout->w; ow++) r0[j->w0[ow]] += LD(row[ow * gout->sw]);
      continue;
    }
    A *r1 = scratch + j->h1[oh] * W;
    A a0 = lh0[oh], a1 = lh1[oh];
    for (int64_t ow = 0; ow < gout->w; ow++) {
      A v = LD(row[ow * gout->sw]);
      int64_t x0 = j->w0[ow], x1 = j->w1[ow];
      r0[x0] += a0 * lw0[ow] * v;
      r0[x1] += a0 * lw1[ow] * v;
      r1[x0] += a1 * lw0[ow] * v;
      r1[x1] += a1 * lw1[ow] * v;
    }
  }
}

/* Backward of both modes: nearest has one tap per direction (lambdas NULL). */
RT_SIMD_VOID(VF(backward_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  upsample_job *j = arg;
  const rt_image *gin = &j->img, *gout = &j->out;
  const A *lh0 = j->lh0, *lh1 = j->lh1, *lw0 = j->lw0, *lw1 = j->lw1;
  int64_t cb_max = j->cblock, blocks = (gin->c + cb_max - 1) / cb_max, W = gin->w;
  A *scratch = malloc((size_t)(gin->h * W * cb_max) * sizeof *scratch);
  if (!scratch) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t n = t / blocks, c0 = t % blocks * cb_max;
    int64_t cb = gin->c - c0 < cb_max ? gin->c - c0 : cb_max;
    for (int64_t i = 0; i < gin->h * W * cb; i++) scratch[i] = 0;
    const T *g = (const T *)gout->data + n * gout->sn + c0 * gout->sc;
    if (cb == 1) {
      VF(backward_plane_)(j, g, scratch);
      VF(store_block_)(scratch, gin, (T *)gin->data + n * gin->sn + c0 * gin->sc, cb);
      continue;
    }
    for (int64_t oh = 0; oh < gout->h; oh++)
      for (int64_t ow = 0; ow < gout->w; ow++) {
        const T *gp = g + oh * gout->sh + ow * gout->sw;
        A *s00 = scratch + (j->h0[oh] * W + j->w0[ow]) * cb;
        if (!lh0) {
          for (int64_t k = 0; k < cb; k++) s00[k] += LD(gp[k * gout->sc]);
          continue;
        }
        A *s01 = scratch + (j->h0[oh] * W + j->w1[ow]) * cb;
        A *s10 = scratch + (j->h1[oh] * W + j->w0[ow]) * cb;
        A *s11 = scratch + (j->h1[oh] * W + j->w1[ow]) * cb;
        A f00 = lh0[oh] * lw0[ow], f01 = lh0[oh] * lw1[ow], f10 = lh1[oh] * lw0[ow],
          f11 = lh1[oh] * lw1[ow];
        /* Taps may coincide at the border: add them one after another. */
        for (int64_t k = 0; k < cb; k++) s00[k] += f00 * LD(gp[k * gout->sc]);
        for (int64_t k = 0; k < cb; k++) s01[k] += f01 * LD(gp[k * gout->sc]);
        for (int64_t k = 0; k < cb; k++) s10[k] += f10 * LD(gp[k * gout->sc]);
        for (int64_t k = 0; k < cb; k++) s11[k] += f11 * LD(gp[k * gout->sc]);
      }
    VF(store_block_)(scratch, gin, (T *)gin->data + n * gin->sn + c0 * gin->sc, cb);
  }
  free(scratch);
}

/* PyTorch's source index and weights (UpSample.h), in A. */
static void VF(linear_table_)(int64_t out, int64_t in, int align_corners, double scale, int64_t *i0,
                              int64_t *i1, A *l0, A *l1) {
  A ratio;
  if (align_corners)
    ratio = out > 1 ? (A)(in - 1) / (A)(out - 1) : (A)0;
  else
    ratio = scale > 0 ? (A)(1.0 / scale) : (A)in / (A)out;
  for (int64_t o = 0; o < out; o++) {
    if (out == in) {
      i0[o] = i1[o] = o;
      l0[o] = 1;
      l1[o] = 0;
      continue;
    }
    A real = align_corners ? ratio * (A)o : ratio * ((A)o + (A)0.5) - (A)0.5;
    if (!align_corners && real < 0) real = 0;
    int64_t i = (int64_t)floor(real);
    if (i > in - 1) i = in - 1;
    A lambda = real - (A)i;
    lambda = lambda < 0 ? 0 : lambda > 1 ? 1 : lambda;
    i0[o] = i;
    i1[o] = i + (i < in - 1 ? 1 : 0);
    l1[o] = lambda;
    l0[o] = (A)1 - lambda;
  }
}

#undef T
#undef A
#undef SUFFIX
