/* The integer convolution loops for one dtype; included by conv_integer.c
 * with T (storage), ACC (unsigned accumulator, at least T's width: wraps
 * without undefined behaviour), WIDEN(x) (T -> ACC, sign-extending),
 * MUL(a, b) (the ACC product, computed unsigned), DACC (the direct
 * loops' accumulator: 32 bits at least, whose vectors hold enough of a
 * short row), KB (output channels per
 * register block: KB x CI_NT sums take at most half of AVX-512's
 * registers) and SUFFIX defined.
 *
 * Direct loops (the reference twin, and the kernels of groups with one
 * output channel, such as depthwise): a task is one plane (image, channel)
 * of the side written, summed into a private ACC buffer one row at a time:
 * for each tap, the rows of positions it reaches (valid ranges computed
 * once per tap, no test per element), scaled by the tap's weight. The
 * forward reads img rows and writes out planes; the input gradient reads
 * out rows and scatters them into img planes at the stride.
 *
 * Columns (groups of several output channels): a forward task is a tile of
 * CI_NT output positions of one image and group; its columns [taps][CI_NT]
 * are built once in ACC, then every KB output channels sum weight x
 * columns in a register-sized block. An input-gradient task is (image,
 * block of image channels): per tile of output positions, the transposed
 * weight times out's tile [kg][CI_NT] gives the block's (channel, tap)
 * rows, each scattered into its channel's private plane. */

RT_SIMD_VOID(VF(ci_forward_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t plane = out->d * out->h * out->w;
  DACC *acc = malloc((size_t)(plane > 0 ? plane : 1) * sizeof *acc);
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
            DACC wv = (DACC)(((const T *)j->w.data)[ci_weight_at(j, k, c, a, b, e)]);
            ci_range r;
            if (!wv || !ci_tap_range(j, a, b, e, &r)) continue;
            int64_t step = j->s[2] * im->sw, m = r.w1 - r.w0;
            for (int64_t od = r.d0; od < r.d1; od++)
              for (int64_t oh = r.h0; oh < r.h1; oh++) {
                const T *restrict x = src + (od * j->s[0] - j->p[0] + a * j->dl[0]) * im->sd +
                                      (oh * j->s[1] - j->p[1] + b * j->dl[1]) * im->sh +
                                      (r.w0 * j->s[2] - j->p[2] + e * j->dl[2]) * im->sw;
                DACC *restrict row = acc + (od * out->h + oh) * out->w + r.w0;
                if (step == 1) {
                  /* blocks of 16: one vector of 32-bit sums, whatever T's
                   * width (rows are short; a loop sized by T's width would
                   * run its scalar tail) */
                  int64_t u = 0;
                  for (; u + 16 <= m; u += 16)
                    for (int v = 0; v < 16; v++) row[u + v] += wv * (DACC)x[u + v];
                  for (; u < m; u++) row[u] += wv * (DACC)x[u];
                } else
                  for (int64_t u = 0; u < m; u++) row[u] += wv * (DACC)x[u * step];
              }
          }
    }
    DACC bias = j->bias ? (DACC)(((const T *)j->bias)[k * j->bias_stride]) : 0;
    T *dst = (T *)out->data + n * out->sn + k * out->sc;
    for (int64_t od = 0; od < out->d; od++)
      for (int64_t oh = 0; oh < out->h; oh++) {
        T *d = dst + od * out->sd + oh * out->sh;
        const DACC *s = acc + (od * out->h + oh) * out->w;
        CI_STORE_RUN(d, out->sw, s, bias, out->w, DACC);
      }
  }
  free(acc);
}

RT_SIMD_VOID(VF(ci_input_grad_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t plane = im->d * im->h * im->w;
  DACC *acc = malloc((size_t)(plane > 0 ? plane : 1) * sizeof *acc);
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
            DACC wv = (DACC)(((const T *)j->w.data)[ci_weight_at(j, k, c % j->cg, a, b, e)]);
            ci_range r;
            if (!wv || !ci_tap_range(j, a, b, e, &r)) continue;
            int64_t step = j->s[2], m = r.w1 - r.w0;
            for (int64_t od = r.d0; od < r.d1; od++)
              for (int64_t oh = r.h0; oh < r.h1; oh++) {
                const T *restrict x = src + od * out->sd + oh * out->sh + r.w0 * out->sw;
                DACC *restrict row = acc + ((od * j->s[0] - j->p[0] + a * j->dl[0]) * im->h +
                                  (oh * j->s[1] - j->p[1] + b * j->dl[1])) * im->w +
                           (r.w0 * j->s[2] - j->p[2] + e * j->dl[2]);
                if (step == 1 && out->sw == 1)
                  for (int64_t u = 0; u < m; u++) row[u] += wv * (DACC)x[u];
                else
                  for (int64_t u = 0; u < m; u++) row[u * step] += wv * (DACC)x[u * out->sw];
              }
          }
    }
    DACC bias = j->bias ? (DACC)(((const T *)j->bias)[c * j->bias_stride]) : 0;
    T *dst = (T *)im->data + n * im->sn + c * im->sc;
    for (int64_t id = 0; id < im->d; id++)
      for (int64_t ih = 0; ih < im->h; ih++) {
        T *d = dst + id * im->sd + ih * im->sh;
        const DACC *s = acc + (id * im->h + ih) * im->w;
        CI_STORE_RUN(d, im->sw, s, bias, im->w, DACC);
      }
  }
  free(acc);
}

/* The weight as a dense ACC matrix [K][kk], taps in (c, a, b, e) order. */
static void VF(ci_weight_matrix_)(const ci_job *j, void *matrix) {
  ACC *dst = matrix;
  int64_t K = j->w.shape[0];
  for (int64_t k = 0, r = 0; k < K; k++)
    for (int64_t c = 0; c < j->cg; c++)
      for (int64_t a = 0; a < j->k[0]; a++)
        for (int64_t b = 0; b < j->k[1]; b++)
          for (int64_t e = 0; e < j->k[2]; e++, r++)
            dst[r] = WIDEN(((const T *)j->w.data)[ci_weight_at(j, k, c, a, b, e)]);
}

/* col[r][t] (row stride CI_NT) = the image value tap r meets at output
 * position q0 + t of image n, group g; 0 in the padding and past m. By
 * runs within an output row: valid ranges per run, no test per element. */
CI_INLINE void VF(ci_columns_)(const ci_job *j, int64_t n, int64_t g, int64_t q0, int64_t m, ACC *restrict col) {
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t r = 0;
  for (int64_t c = 0; c < j->cg; c++) {
    const T *src = (const T *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
    for (int64_t a = 0; a < j->k[0]; a++)
      for (int64_t b = 0; b < j->k[1]; b++)
        for (int64_t e = 0; e < j->k[2]; e++, r++) {
          ACC *restrict d = col + r * CI_NT;
          int64_t ow = q0 % out->w, oh = q0 / out->w % out->h, od = q0 / (out->w * out->h);
          for (int64_t t = 0; t < m;) {
            int64_t seg = m - t < out->w - ow ? m - t : out->w - ow;
            int64_t id = od * j->s[0] - j->p[0] + a * j->dl[0], ih = oh * j->s[1] - j->p[1] + b * j->dl[1];
            int64_t iw0 = ow * j->s[2] - j->p[2] + e * j->dl[2], u0 = 0, u1 = 0;
            if (id >= 0 && id < im->d && ih >= 0 && ih < im->h) ci_valid(iw0, j->s[2], im->w, seg, &u0, &u1);
            ACC *restrict du = d + t;
            for (int64_t u = 0; u < u0; u++) du[u] = 0;
            if (u1 > u0) {
              const T *restrict x = src + id * im->sd + ih * im->sh + (iw0 + u0 * j->s[2]) * im->sw;
              int64_t step = j->s[2] * im->sw, run = u1 - u0;
              if (step == 1)
                for (int64_t u = 0; u < run; u++) du[u0 + u] = WIDEN(x[u]);
              else
                for (int64_t u = 0; u < run; u++) du[u0 + u] = WIDEN(x[u * step]);
            }
            for (int64_t u = u1; u < seg; u++) du[u] = 0;
            t += seg;
            ow = 0;
            if (++oh == out->h) oh = 0, od++;
          }
          for (int64_t t = m; t < CI_NT; t++) d[t] = 0;
        }
  }
}

/* acc[i][t] = sum_r w[i * kk + r] * col[r][t] for the kb (<= KB) weight
 * rows; rows past kb stay 0. */
CI_INLINE void VF(ci_block_)(int64_t kk, const ACC *w, int64_t kb, const ACC *col, ACC acc[KB][CI_NT]) {
  for (int i = 0; i < KB; i++)
    for (int t = 0; t < CI_NT; t++) acc[i][t] = 0;
  for (int64_t r = 0; r < kk; r++) {
    const ACC *cr = col + r * CI_NT;
    ACC wv[KB];
    for (int i = 0; i < KB; i++) wv[i] = i < kb ? w[i * kk + r] : 0;
    for (int i = 0; i < KB; i++)
      for (int t = 0; t < CI_NT; t++) acc[i][t] += MUL(wv[i], cr[t]);
  }
}

RT_SIMD_VOID(VF(ci_forward_cols_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *out = &j->out;
  int64_t kk = j->cg * j->k[0] * j->k[1] * j->k[2];
  ACC *col = malloc((size_t)(kk > 0 ? kk : 1) * CI_NT * sizeof *col);
  if (!col) {
    atomic_store(&j->failed, 1);
    return;
  }
  ACC acc[KB][CI_NT];
  for (int64_t task = begin; task < end; task++) {
    int64_t tile = task % j->tiles, g = task / j->tiles % j->groups, n = task / (j->tiles * j->groups);
    int64_t q0 = tile * CI_NT, m = j->opos - q0 < CI_NT ? j->opos - q0 : CI_NT;
    VF(ci_columns_)(j, n, g, q0, m, col);
    for (int64_t k0 = 0; k0 < j->kg; k0 += KB) {
      int64_t kb = j->kg - k0 < KB ? j->kg - k0 : KB;
      VF(ci_block_)(kk, (const ACC *)j->wmat + (g * j->kg + k0) * kk, kb, col, acc);
      for (int64_t i = 0; i < kb; i++) {
        int64_t k = g * j->kg + k0 + i;
        ACC bias = j->bias ? WIDEN(((const T *)j->bias)[k * j->bias_stride]) : 0;
        T *dst = (T *)out->data + n * out->sn + k * out->sc;
        int64_t ow = q0 % out->w, oh = q0 / out->w % out->h, od = q0 / (out->w * out->h);
        for (int64_t t = 0; t < m;) {
          int64_t seg = m - t < out->w - ow ? m - t : out->w - ow;
          T *d = dst + od * out->sd + oh * out->sh + ow * out->sw;
          const ACC *sum = acc[i] + t;
          CI_STORE_RUN(d, out->sw, sum, bias, seg, ACC);
          t += seg;
          ow = 0;
          if (++oh == out->h) oh = 0, od++;
        }
      }
    }
  }
  free(col);
}

/* The weight transposed per group: ACC [groups][cg * taps][kg]. */
static void VF(ci_weight_transposed_)(const ci_job *j, void *matrix) {
  ACC *dst = matrix;
  for (int64_t g = 0; g < j->groups; g++)
    for (int64_t c = 0; c < j->cg; c++)
      for (int64_t a = 0; a < j->k[0]; a++)
        for (int64_t b = 0; b < j->k[1]; b++)
          for (int64_t e = 0; e < j->k[2]; e++)
            for (int64_t k = 0; k < j->kg; k++)
              *dst++ = WIDEN(((const T *)j->w.data)[ci_weight_at(j, g * j->kg + k, c, a, b, e)]);
}

/* go[k][t] (row stride CI_NT) = out[n, g * kg + k, position q0 + t]; 0 past m. */
CI_INLINE void VF(ci_gather_out_)(const ci_job *j, int64_t n, int64_t g, int64_t q0, int64_t m, ACC *restrict go) {
  const ci_vol *out = &j->out;
  for (int64_t k = 0; k < j->kg; k++) {
    const T *src = (const T *)out->data + n * out->sn + (g * j->kg + k) * out->sc;
    ACC *restrict d = go + k * CI_NT;
    int64_t ow = q0 % out->w, oh = q0 / out->w % out->h, od = q0 / (out->w * out->h);
    for (int64_t t = 0; t < m;) {
      int64_t seg = m - t < out->w - ow ? m - t : out->w - ow;
      const T *restrict x = src + od * out->sd + oh * out->sh + ow * out->sw;
      for (int64_t u = 0; u < seg; u++) d[t + u] = WIDEN(x[u * out->sw]);
      t += seg;
      ow = 0;
      if (++oh == out->h) oh = 0, od++;
    }
    for (int64_t t = m; t < CI_NT; t++) d[t] = 0;
  }
}

/* Adds v[t] (t < m, positions q0 + t) to the plane where tap (a, b, e)
 * sends them, by runs within an output row. */
CI_INLINE void VF(ci_scatter_)(const ci_job *j, int64_t a, int64_t b, int64_t e, int64_t q0, int64_t m,
                              const ACC *restrict v, ACC *restrict plane) {
  const ci_vol *im = &j->img, *out = &j->out;
  int64_t ow = q0 % out->w, oh = q0 / out->w % out->h, od = q0 / (out->w * out->h);
  for (int64_t t = 0; t < m;) {
    int64_t seg = m - t < out->w - ow ? m - t : out->w - ow;
    int64_t id = od * j->s[0] - j->p[0] + a * j->dl[0], ih = oh * j->s[1] - j->p[1] + b * j->dl[1];
    int64_t iw0 = ow * j->s[2] - j->p[2] + e * j->dl[2], u0 = 0, u1 = 0;
    if (id >= 0 && id < im->d && ih >= 0 && ih < im->h) ci_valid(iw0, j->s[2], im->w, seg, &u0, &u1);
    if (u1 > u0) {
      ACC *restrict row = plane + (id * im->h + ih) * im->w + iw0 + u0 * j->s[2];
      const ACC *restrict src = v + t + u0;
      int64_t run = u1 - u0;
      if (j->s[2] == 1)
        for (int64_t u = 0; u < run; u++) row[u] += src[u];
      else
        for (int64_t u = 0; u < run; u++) row[u * j->s[2]] += src[u];
    }
    t += seg;
    ow = 0;
    if (++oh == out->h) oh = 0, od++;
  }
}

RT_SIMD_VOID(VF(ci_input_grad_cols_), (int64_t begin, int64_t end, void *arg), (begin, end, arg)) {
  ci_job *j = arg;
  const ci_vol *im = &j->img;
  int64_t taps = j->k[0] * j->k[1] * j->k[2], kk = j->cg * taps, plane = im->d * im->h * im->w;
  int64_t cblocks = (j->cg + j->cb - 1) / j->cb;
  ACC *go = malloc((size_t)(j->kg * CI_NT) * sizeof *go), *acc = malloc((size_t)(j->cb * plane) * sizeof *acc);
  if (!go || !acc) {
    atomic_store(&j->failed, 1);
    free(go), free(acc);
    return;
  }
  ACC blk[KB][CI_NT];
  for (int64_t task = begin; task < end; task++) {
    int64_t cbk = task % cblocks, g = task / cblocks % j->groups, n = task / (cblocks * j->groups);
    int64_t c0 = cbk * j->cb, nc = j->cg - c0 < j->cb ? j->cg - c0 : j->cb;
    for (int64_t x = 0; x < nc * plane; x++) acc[x] = 0;
    for (int64_t tile = 0; tile < j->tiles; tile++) {
      int64_t q0 = tile * CI_NT, m = j->opos - q0 < CI_NT ? j->opos - q0 : CI_NT;
      VF(ci_gather_out_)(j, n, g, q0, m, go);
      for (int64_t r0 = c0 * taps; r0 < (c0 + nc) * taps; r0 += KB) {
        int64_t rb = (c0 + nc) * taps - r0 < KB ? (c0 + nc) * taps - r0 : KB;
        VF(ci_block_)(j->kg, (const ACC *)j->wmat + (g * kk + r0) * j->kg, rb, go, blk);
        for (int64_t i = 0; i < rb; i++) {
          int64_t r = r0 + i, tap = r % taps;
          int64_t e = tap % j->k[2], b = tap / j->k[2] % j->k[1], a = tap / (j->k[2] * j->k[1]);
          VF(ci_scatter_)(j, a, b, e, q0, m, blk[i], acc + (r / taps - c0) * plane);
        }
      }
    }
    for (int64_t c = 0; c < nc; c++) {
      int64_t ch = g * j->cg + c0 + c;
      ACC bias = j->bias ? WIDEN(((const T *)j->bias)[ch * j->bias_stride]) : 0;
      T *dst = (T *)im->data + n * im->sn + ch * im->sc;
      for (int64_t id = 0; id < im->d; id++)
        for (int64_t ih = 0; ih < im->h; ih++) {
          T *d = dst + id * im->sd + ih * im->sh;
          const ACC *sum = acc + c * plane + (id * im->h + ih) * im->w;
          CI_STORE_RUN(d, im->sw, sum, bias, im->w, ACC);
        }
    }
  }
  free(go), free(acc);
}

#undef T
#undef ACC
#undef DACC
#undef WIDEN
#undef MUL
#undef KB
#undef SUFFIX
