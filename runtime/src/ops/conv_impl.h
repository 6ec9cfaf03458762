/* The convolution kernels for one dtype; included by conv.c with T, A, LD,
 * ST, SUFFIX (vision_common.h), T_IS_A (T and A are one type), GEMM
 * (rt_conv_gemm_f32 or _f64) and MAT (its matrix type) defined.
 *
 * Column matrices ("col") hold, for one image and group, row r = (c, i, j)
 * of the kernel window and column q = oh * OW + ow of the output: the image
 * value that weight tap (c, i, j) meets at output position q, or 0 in the
 * padding. Forward is weight x col; the input gradient is weight^T x
 * grad_output scattered back by col2im; the weight gradient is
 * grad_output x col^T summed over images. */

/* col[r * ld + t] for the nt output positions from q0 of image n, group g. */
static void VF(im2col_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, A *col, int64_t ld) {
  const rt_image *im = &j->img;
  int64_t OW = j->out.w;
  for (int64_t c = 0; c < j->cg; c++) {
    const T *src = (const T *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
    for (int64_t i = 0; i < j->kh; i++)
      for (int64_t jj = 0; jj < j->kw; jj++) {
        A *dst = col + ((c * j->kh + i) * j->kw + jj) * ld;
        int64_t oh = q0 / OW, ow = q0 % OW;
        for (int64_t t = 0; t < nt; oh++, ow = 0) {
          int64_t seg = nt - t < OW - ow ? nt - t : OW - ow;
          int64_t ih = oh * j->sh - j->ph + i * j->dh;
          A *d = dst + t;
          t += seg;
          if (ih < 0 || ih >= im->h) {
            for (int64_t u = 0; u < seg; u++) d[u] = 0;
            continue;
          }
          int64_t u0, u1, iw0 = ow * j->sw - j->pw + jj * j->dw;
          conv_valid_range(iw0, j->sw, im->w, seg, &u0, &u1);
          for (int64_t u = 0; u < u0; u++) d[u] = 0;
          if (u1 > u0) {
            const T *row = src + ih * im->sh + (iw0 + u0 * j->sw) * im->sw;
            int64_t step = j->sw * im->sw, m = u1 - u0;
            A *du = d + u0;
            if (step == 1)
              for (int64_t u = 0; u < m; u++) du[u] = LD(row[u]);
            else
              for (int64_t u = 0; u < m; u++) du[u] = LD(row[u * step]);
          }
          for (int64_t u = u1 > u0 ? u1 : u0; u < seg; u++) d[u] = 0;
        }
      }
  }
}

/* The transposed column tile for channels-inner images: colT[t * kk + (i *
 * kw + j) * cg + c], each tap a run of cg channels copied from one pixel. */
static void VF(im2col_rows_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, A *colt) {
  const rt_image *im = &j->img;
  int64_t OW = j->out.w, cg = j->cg, kk = j->kk;
  const T *base = (const T *)im->data + n * im->sn + g * cg * im->sc;
  int64_t oh = q0 / OW, ow = q0 % OW;
  for (int64_t t = 0; t < nt; t++) {
    A *row = colt + t * kk;
    for (int64_t i = 0; i < j->kh; i++) {
      int64_t ih = oh * j->sh - j->ph + i * j->dh;
      for (int64_t jj = 0; jj < j->kw; jj++) {
        int64_t iw = ow * j->sw - j->pw + jj * j->dw;
        A *d = row + (i * j->kw + jj) * cg;
        if (ih < 0 || ih >= im->h || iw < 0 || iw >= im->w) {
          for (int64_t c = 0; c < cg; c++) d[c] = 0;
        } else {
          const T *src = base + ih * im->sh + iw * im->sw;
          for (int64_t c = 0; c < cg; c++) d[c] = LD(src[c]);
        }
      }
    }
    if (++ow == OW) ow = 0, oh++;
  }
}

/* Forward tasks: (image, group, tile of output positions). */
static void VF(forward_tiles_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt, kk = j->kk, kg = j->kg;
  A *col = malloc((size_t)(kk * nt_max + kg * nt_max + (int64_t)rt_conv_gemm_scratch(nt_max)) * sizeof(A));
  if (!col) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  A *tile = col + kk * nt_max, *scratch = tile + kg * nt_max;
  const rt_image *out = &j->out;
  for (int64_t task = begin; task < end; task++) {
    int64_t n = task / (j->groups * j->tiles), g = task / j->tiles % j->groups;
    int64_t q0 = task % j->tiles * nt_max, nt = j->ohw - q0 < nt_max ? j->ohw - q0 : nt_max;
    MAT w = {(A *)j->wmat + g * kg * j->w_rs, j->w_rs, 1}, b = {NULL, 0, 0};
    if (j->pointwise) {
      b = (MAT){(A *)((T *)j->img.data + n * j->img.sn + g * j->cg * j->img.sc + q0 * j->img.sw),
                j->img.sc, j->img.sw};
    } else if (!j->taps_outer) {
      VF(im2col_)(j, n, g, q0, nt, col, nt);
      b = (MAT){col, nt, 1};
    }
    T *o = (T *)out->data + n * out->sn + g * kg * out->sc + q0 * out->sw;
    if (j->taps_outer) {
      /* out^T [nt, kg] = colT [nt, kk] x w^T: rows of positions, as stored. */
      MAT colt;
      if (j->pointwise) {
        colt = b;
        colt.rs = j->img.sw, colt.cs = j->img.sc;
      } else {
        VF(im2col_rows_)(j, n, g, q0, nt, col);
        colt = (MAT){col, kk, 1};
      }
      MAT wt = {w.data, 1, j->w_rs};
      if (j->direct_out) {
        GEMM(nt, kg, kk, colt, wt, (MAT){(A *)o, out->sw, out->sc}, 0, scratch);
      } else {
        GEMM(nt, kg, kk, colt, wt, (MAT){tile, 1, nt}, 0, scratch);
      }
    } else if (j->direct_out) {
      GEMM(kg, nt, kk, w, b, (MAT){(A *)o, out->sc, out->sw}, 0, scratch);
    }
    if (j->direct_out) {
      if (j->bias)
        for (int64_t k = 0; k < kg; k++) {
          A bk = LD(((const T *)j->bias)[(g * kg + k) * j->bias_stride]);
          for (int64_t t = 0; t < nt; t++) ((A *)o)[k * out->sc + t * out->sw] += bk;
        }
      continue;
    }
    if (!j->taps_outer) GEMM(kg, nt, kk, w, b, (MAT){tile, nt, 1}, 0, scratch);
    for (int64_t k = 0; k < kg; k++) {
      A bk = j->bias ? LD(((const T *)j->bias)[(g * kg + k) * j->bias_stride]) : 0;
      for (int64_t t = 0; t < nt; t++) o[k * out->sc + t * out->sw] = ST(tile[k * nt + t] + bk);
    }
  }
  free(col);
}

/* Input gradient, stage 1: col = weight^T x grad_output for images
 * [n0, n0 + chunk), tasks (image, group, tile); col holds every image's
 * [groups][kk][ohw] block. */
static void VF(grad_cols_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt, kk = j->kk, kg = j->kg, ohw = j->ohw;
  A *buf = malloc((size_t)(kg * nt_max + (int64_t)rt_conv_gemm_scratch(nt_max)) * sizeof(A));
  if (!buf) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  A *scratch = buf + kg * nt_max;
  const rt_image *out = &j->out;
  for (int64_t task = begin; task < end; task++) {
    int64_t nl = task / (j->groups * j->tiles), g = task / j->tiles % j->groups, n = j->n0 + nl;
    int64_t q0 = task % j->tiles * nt_max, nt = ohw - q0 < nt_max ? ohw - q0 : nt_max;
    MAT wt = {(A *)j->wmat + g * kg * j->w_rs, 1, j->w_rs}, go;
    const T *o = (const T *)out->data + n * out->sn + g * kg * out->sc + q0 * out->sw;
    if (j->direct_out) {
      go = (MAT){(A *)o, out->sc, out->sw};
    } else {
      for (int64_t k = 0; k < kg; k++)
        for (int64_t t = 0; t < nt; t++) buf[k * nt + t] = LD(o[k * out->sc + t * out->sw]);
      go = (MAT){buf, nt, 1};
    }
    A *col = (A *)j->col + ((nl * j->groups + g) * kk) * ohw + q0;
    GEMM(kk, nt, kg, wt, go, (MAT){col, ohw, 1}, 0, scratch);
  }
  free(buf);
}

/* Input gradient, stage 2: col2im, tasks (image, image channel). */
static void VF(grad_planes_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  const rt_image *im = &j->img;
  int64_t hw = im->h * im->w, OW = j->out.w, OH = j->out.h;
  A *acc = malloc((size_t)hw * sizeof *acc);
  if (!acc) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t task = begin; task < end; task++) {
    int64_t nl = task / im->c, c = task % im->c, n = j->n0 + nl;
    int64_t g = c / j->cg, cl = c % j->cg;
    for (int64_t p = 0; p < hw; p++) acc[p] = 0;
    for (int64_t i = 0; i < j->kh; i++)
      for (int64_t jj = 0; jj < j->kw; jj++) {
        const A *src = (const A *)j->col + ((nl * j->groups + g) * j->kk + (cl * j->kh + i) * j->kw + jj) * j->ohw;
        int64_t iw0 = -j->pw + jj * j->dw, u0, u1;
        conv_valid_range(iw0, j->sw, im->w, OW, &u0, &u1);
        for (int64_t oh = 0; oh < OH; oh++) {
          int64_t ih = oh * j->sh - j->ph + i * j->dh;
          if (ih < 0 || ih >= im->h) continue;
          if (u1 <= u0) continue;
          A *row = acc + ih * im->w + iw0 + u0 * j->sw;
          const A *s = src + oh * OW + u0;
          int64_t m = u1 - u0;
          if (j->sw == 1)
            for (int64_t u = 0; u < m; u++) row[u] += s[u];
          else
            for (int64_t u = 0; u < m; u++) row[u * j->sw] += s[u];
        }
      }
    A bc = j->bias ? LD(((const T *)j->bias)[c * j->bias_stride]) : 0;
    T *dst = (T *)im->data + n * im->sn + c * im->sc;
    for (int64_t h = 0; h < im->h; h++)
      for (int64_t w = 0; w < im->w; w++) dst[h * im->sh + w * im->sw] = ST(acc[h * im->w + w] + bc);
  }
  free(acc);
}

/* Weight gradient, stage 1: tasks (image, group) of images [n0, n0 +
 * chunk): the image's col block and, unless grad_output is read in place,
 * grad_output converted to A ([K][ohw] per image). */
static void VF(wgrad_cols_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  const rt_image *out = &j->out;
  for (int64_t task = begin; task < end; task++) {
    int64_t nl = task / j->groups, g = task % j->groups, n = j->n0 + nl;
    if (!j->pointwise) VF(im2col_)(j, n, g, 0, j->ohw, (A *)j->col + (nl * j->groups + g) * j->kk * j->ohw, j->ohw);
    if (j->direct_out) continue;
    A *dst = (A *)j->omat + (nl * out->c + g * j->kg) * j->ohw;
    const T *o = (const T *)out->data + n * out->sn + g * j->kg * out->sc;
    for (int64_t k = 0; k < j->kg; k++)
      for (int64_t h = 0; h < out->h; h++)
        for (int64_t w = 0; w < out->w; w++)
          dst[(k * out->h + h) * out->w + w] = LD(o[k * out->sc + h * out->sh + w * out->sw]);
  }
}

/* Weight gradient, stage 2: tasks (group, row block, column block) of the
 * [K][kk] accumulator j->dw, each adding its block over the chunk's images
 * in order. */
static void VF(wgrad_blocks_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  A *scratch = malloc(rt_conv_gemm_scratch(j->nb) * sizeof(A));
  if (!scratch) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  int64_t mblocks = (j->kg + j->mb - 1) / j->mb, nblocks = (j->kk + j->nb - 1) / j->nb;
  const rt_image *out = &j->out, *im = &j->img;
  for (int64_t task = begin; task < end; task++) {
    int64_t g = task / (mblocks * nblocks), m0 = task / nblocks % mblocks * j->mb, c0 = task % nblocks * j->nb;
    int64_t m = j->kg - m0 < j->mb ? j->kg - m0 : j->mb, nc = j->kk - c0 < j->nb ? j->kk - c0 : j->nb;
    MAT dw = {(A *)j->wgrad + (g * j->kg + m0) * j->kk + c0, j->kk, 1};
    for (int64_t nl = 0; nl < j->chunk; nl++) {
      int64_t n = j->n0 + nl;
      MAT go, colt;
      if (j->direct_out)
        go = (MAT){(A *)((T *)out->data + n * out->sn + (g * j->kg + m0) * out->sc), out->sc, out->sw};
      else
        go = (MAT){(A *)j->omat + (nl * out->c + g * j->kg + m0) * j->ohw, j->ohw, 1};
      if (j->pointwise)
        colt = (MAT){(A *)((T *)im->data + n * im->sn + (g * j->cg + c0) * im->sc), im->sw, im->sc};
      else
        colt = (MAT){(A *)j->col + ((nl * j->groups + g) * j->kk + c0) * j->ohw, 1, j->ohw};
      GEMM(m, nc, j->ohw, go, colt, dw, j->started || nl > 0, scratch);
    }
  }
  free(scratch);
}

/* Weight gradient by tiles, for weights small enough to keep j->parts
 * copies: task p adds the items (image, group, tile) [p * items / parts,
 * (p + 1) * items / parts) into its own accumulator, in order; the copies
 * are then summed in order (sum_parts_). Each tile's columns are built in
 * cache, as in the forward. */
static void VF(wgrad_tiles_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt, kk = j->kk, kg = j->kg, items = j->img.n * j->groups * j->tiles;
  A *col = malloc((size_t)(kk * nt_max + kg * nt_max + (int64_t)rt_conv_gemm_scratch(kk)) * sizeof(A));
  if (!col) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  A *tile = col + kk * nt_max, *scratch = tile + kg * nt_max;
  const rt_image *out = &j->out, *im = &j->img;
  for (int64_t part = begin; part < end; part++) {
    A *acc = (A *)j->wgrad + part * j->out.c * kk;
    for (int64_t item = part * items / j->parts; item < (part + 1) * items / j->parts; item++) {
      int64_t n = item / (j->groups * j->tiles), g = item / j->tiles % j->groups;
      int64_t q0 = item % j->tiles * nt_max, nt = j->ohw - q0 < nt_max ? j->ohw - q0 : nt_max;
      MAT go, colt;
      const T *o = (const T *)out->data + n * out->sn + g * kg * out->sc + q0 * out->sw;
      if (j->direct_out) {
        go = (MAT){(A *)o, out->sc, out->sw};
      } else {
        for (int64_t k = 0; k < kg; k++) {
          int64_t q = q0;
          for (int64_t t = 0; t < nt; t++, q++)
            tile[k * nt + t] = LD(((const T *)out->data)[n * out->sn + (g * kg + k) * out->sc +
                                                         q / out->w * out->sh + q % out->w * out->sw]);
        }
        go = (MAT){tile, nt, 1};
      }
      if (j->pointwise) {
        colt = (MAT){(A *)((T *)im->data + n * im->sn + g * j->cg * im->sc + q0 * im->sw), im->sw, im->sc};
      } else if (j->taps_outer) {
        VF(im2col_rows_)(j, n, g, q0, nt, col);
        colt = (MAT){col, kk, 1};
      } else {
        VF(im2col_)(j, n, g, q0, nt, col, nt);
        colt = (MAT){col, 1, nt};
      }
      GEMM(kg, kk, nt, go, colt, (MAT){acc + g * kg * kk, kk, 1}, 1, scratch);
    }
  }
  free(col);
}

static void VF(sum_parts_)(void *parts, int64_t count, int64_t size) {
  A *p = parts;
  for (int64_t k = 1; k < count; k++)
    for (int64_t i = 0; i < size; i++) p[i] += p[k * size + i];
}

/* The weight [K, cg, kh, kw] as an A matrix [K][kk] (row stride *rs), its
 * taps in (c, i, j) order, or (i, j, c) when taps_outer: in place when it is
 * A and dense in that order, else converted into buf. */
static const A *VF(weight_matrix_)(const nrt_tensor_view *w, int64_t kk, A *buf, int64_t *rs, int taps_outer) {
  const T *src = w->data;
  if (T_IS_A && conv_weight_dense(w, taps_outer)) {
    *rs = w->strides[0];
    return (const A *)src;
  }
  for (int64_t k = 0; k < w->shape[0]; k++)
    for (int64_t c = 0; c < w->shape[1]; c++)
      for (int64_t i = 0; i < w->shape[2]; i++)
        for (int64_t jj = 0; jj < w->shape[3]; jj++)
          buf[k * kk + conv_tap_index(w, c, i, jj, taps_outer)] =
              LD(src[k * w->strides[0] + c * w->strides[1] + i * w->strides[2] + jj * w->strides[3]]);
  *rs = kk;
  return buf;
}

static void VF(store_weight_)(const A *dw, const nrt_tensor_view *w, int64_t kk, int taps_outer) {
  T *dst = w->data;
  for (int64_t k = 0; k < w->shape[0]; k++)
    for (int64_t c = 0; c < w->shape[1]; c++)
      for (int64_t i = 0; i < w->shape[2]; i++)
        for (int64_t jj = 0; jj < w->shape[3]; jj++)
          dst[k * w->strides[0] + c * w->strides[1] + i * w->strides[2] + jj * w->strides[3]] =
              ST(dw[k * kk + conv_tap_index(w, c, i, jj, taps_outer)]);
}

#undef T
#undef A
#undef SUFFIX
#undef GEMM
#undef T_IS_A
#undef MAT
