/* The resampling kernels for one floating dtype; included by resample.c
 * (see vision_common.h for the macros it defines: T, A, SUFFIX, LD, ST).
 *
 * Forward: out = Wh * X * Ww^T per plane, as two passes: along the width
 * into a [H, OW] scratch, then along the height (the CPU's order: bicubic
 * interpolates each of its four rows along x first, the antialiased
 * kernels resample the width first). Backward: the adjoint, the same two
 * passes reversed, scattered in a fixed order. Tables hold the weights
 * in A, computed as the CPU computes them in its compute type. */

/* PyTorch's area_pixel_compute_scale in A. */
static A VF(rs_scale_)(int64_t in, int64_t out, int align, double user_scale) {
  if (align) return out > 1 ? (A)(in - 1) / (A)(out - 1) : (A)0;
  return user_scale > 0 ? (A)(1.0 / user_scale) : (A)in / (A)out;
}

/* Keys' cubic convolution kernel for |x| <= 1 and 1 < |x| < 2. */
static A VF(rs_cubic1_)(A x, A a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static A VF(rs_cubic2_)(A x, A a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

static A VF(rs_filter_)(int filter, A x) {
  if (x < 0) x = -x;
  switch (filter) {
    case RS_AA_BILINEAR:
      return x < 1 ? 1 - x : 0;
    case RS_AA_BICUBIC: /* a = -0.5, as PIL */
      return x < 1 ? VF(rs_cubic1_)(x, (A)-0.5) : x < 2 ? VF(rs_cubic2_)(x, (A)-0.5) : 0;
    default: { /* Lanczos, a = 3: sinc(x) sinc(x / 3) */
      if (x >= 3) return 0;
      if (x == 0) return 1;
      A px = (A)3.14159265358979323846 * x;
      return (A)3 * (A)sin((double)px) * (A)sin((double)(px / 3)) / (px * px);
    }
  }
}

/* Fills one axis's table; ax->taps is already set (rs_taps). */
static void VF(rs_table_)(rs_axis *ax, int kind, int64_t in, int align, double user_scale) {
  A *w = (A *)ax->w;
  A scale = VF(rs_scale_)(in, ax->out, align, user_scale);
  int64_t taps = ax->taps;
  if (kind == RS_BICUBIC) {
    const A a = (A)-0.75;
    for (int64_t o = 0; o < ax->out; o++) {
      A real = align ? scale * (A)o : scale * ((A)o + (A)0.5) - (A)0.5;
      A fl = (A)floor((double)real);
      int64_t ix = (int64_t)fl;
      A t = real - fl;
      w[o * 4 + 0] = VF(rs_cubic2_)(t + 1, a);
      w[o * 4 + 1] = VF(rs_cubic1_)(t, a);
      w[o * 4 + 2] = VF(rs_cubic1_)(1 - t, a);
      w[o * 4 + 3] = VF(rs_cubic2_)(2 - t, a);
      for (int k = 0; k < 4; k++) {
        int64_t i = ix - 1 + k;
        ax->idx[o * 4 + k] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
      }
      ax->count[o] = 4;
    }
    return;
  }
  int filter = kind;
  A support = (A)rs_support(kind, (double)scale);
  int64_t cap = (int64_t)ceil((double)support) * 2 + 1; /* PyTorch's max_interp_size */
  if (cap > taps) cap = taps;
  for (int64_t o = 0; o < ax->out; o++) {
    A center = scale * (A)((double)o + 0.5);
    A invscale = scale >= 1 ? (A)1 / scale : (A)1;
    int64_t lo = (int64_t)(center - support + (A)0.5);
    if (lo < 0) lo = 0;
    int64_t hi = (int64_t)(center + support + (A)0.5);
    if (hi > in) hi = in;
    int64_t n = hi - lo;
    n = n < 0 ? 0 : n > cap ? cap : n;
    A total = 0;
    for (int64_t j = 0; j < n; j++) {
      A v = VF(rs_filter_)(filter, ((A)(j + lo) - center + (A)0.5) * invscale);
      w[o * taps + j] = v;
      total += v;
    }
    if (total != 0)
      for (int64_t j = 0; j < n; j++) w[o * taps + j] /= total;
    for (int64_t j = 0; j < n; j++) ax->idx[o * taps + j] = lo + j;
    ax->count[o] = n;
  }
}

/* Forward over planes [begin, end). */
static void VF(rs_forward_)(int64_t begin, int64_t end, void *arg) {
  rs_job *j = arg;
  const rt_image *in = &j->src, *out = &j->dst;
  const rs_axis *ah = &j->h, *aw = &j->w;
  const A *wh = (const A *)ah->w, *ww = (const A *)aw->w;
  A *tmp = malloc((size_t)(in->h * out->w) * sizeof *tmp);
  if (!tmp) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / in->c, c = p % in->c;
    const T *src = (const T *)in->data + n * in->sn + c * in->sc;
    T *dst = (T *)out->data + n * out->sn + c * out->sc;
    for (int64_t ih = 0; ih < in->h; ih++) { /* along the width */
      const T *row = src + ih * in->sh;
      A *t = tmp + ih * out->w;
      for (int64_t ow = 0; ow < out->w; ow++) {
        const int64_t *ix = aw->idx + ow * aw->taps;
        const A *wx = ww + ow * aw->taps;
        A s = 0;
        for (int64_t k = 0; k < aw->count[ow]; k++) s += wx[k] * LD(row[ix[k] * in->sw]);
        t[ow] = s;
      }
    }
    for (int64_t oh = 0; oh < out->h; oh++) { /* along the height */
      const int64_t *iy = ah->idx + oh * ah->taps;
      const A *wy = wh + oh * ah->taps;
      T *d = dst + oh * out->sh;
      for (int64_t ow = 0; ow < out->w; ow++) {
        A s = 0;
        for (int64_t k = 0; k < ah->count[oh]; k++) s += wy[k] * tmp[iy[k] * out->w + ow];
        d[ow * out->sw] = ST(s);
      }
    }
  }
  free(tmp);
}

/* Backward over planes [begin, end): src is grad_output [OH, OW], dst is
 * grad_input [H, W], written in full. */
static void VF(rs_backward_)(int64_t begin, int64_t end, void *arg) {
  rs_job *j = arg;
  const rt_image *gout = &j->src, *gin = &j->dst;
  const rs_axis *ah = &j->h, *aw = &j->w;
  const A *wh = (const A *)ah->w, *ww = (const A *)aw->w;
  int64_t H = gin->h, W = gin->w, OW = gout->w;
  A *tmp = malloc((size_t)(H * OW + W) * sizeof *tmp);
  if (!tmp) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  A *acc = tmp + H * OW;
  for (int64_t p = begin; p < end; p++) {
    int64_t n = p / gin->c, c = p % gin->c;
    const T *g = (const T *)gout->data + n * gout->sn + c * gout->sc;
    T *dst = (T *)gin->data + n * gin->sn + c * gin->sc;
    for (int64_t i = 0; i < H * OW; i++) tmp[i] = 0;
    for (int64_t oh = 0; oh < gout->h; oh++) { /* the height's adjoint */
      const int64_t *iy = ah->idx + oh * ah->taps;
      const A *wy = wh + oh * ah->taps;
      const T *grow = g + oh * gout->sh;
      for (int64_t k = 0; k < ah->count[oh]; k++) {
        A *t = tmp + iy[k] * OW;
        A f = wy[k];
        for (int64_t ow = 0; ow < OW; ow++) t[ow] += f * LD(grow[ow * gout->sw]);
      }
    }
    for (int64_t ih = 0; ih < H; ih++) { /* the width's adjoint */
      const A *t = tmp + ih * OW;
      for (int64_t iw = 0; iw < W; iw++) acc[iw] = 0;
      for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t *ix = aw->idx + ow * aw->taps;
        const A *wx = ww + ow * aw->taps;
        for (int64_t k = 0; k < aw->count[ow]; k++) acc[ix[k]] += wx[k] * t[ow];
      }
      T *d = dst + ih * gin->sh;
      for (int64_t iw = 0; iw < W; iw++) d[iw * gin->sw] = ST(acc[iw]);
    }
  }
  free(tmp);
}

#undef T
#undef A
#undef SUFFIX
