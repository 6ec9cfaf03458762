/* The convolution kernels for one dtype; included by conv.c with T, A, LD,
 * ST, SUFFIX (vision_common.h), T_IS_A (T and A are one type), GEMM
 * (conv_gemm_f32 or _f64: the product, flagging j on failure) and MAT (its
 * matrix type) defined. COL, the type of the columns and of every GEMM
 * input (with COLMAT, LDCOL and COL_IS_T), is A unless conv.c says
 * otherwise: bfloat16 keeps bfloat16 columns for the bfloat16 GEMM, whose
 * outputs (and every sum) stay A.
 *
 * Column matrices ("col") hold, for one image and group, row r = (c, i, j)
 * of the kernel window and column q = oh * OW + ow of the output: the image
 * value that weight tap (c, i, j) meets at output position q, or 0 in the
 * padding. Forward is weight x col; the input gradient is weight^T x
 * grad_output scattered back by col2im; the weight gradient is
 * grad_output x col^T summed over images. */

/* col[r * ld + t] for the nt output positions from q0 of image n, group g. */
#ifndef COL
#define COL A
#define COLMAT MAT
#define LDCOL(x) LD(x)
#define COL_IS_T T_IS_A
#endif

static void VF(im2col_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, COL *col, int64_t ld) {
  const rt_image *im = &j->img;
  int64_t OW = j->out.w;
  for (int64_t c = 0; c < j->cg; c++) {
    const T *src = (const T *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
    for (int64_t i = 0; i < j->kh; i++)
      for (int64_t jj = 0; jj < j->kw; jj++) {
        /* The valid range of a whole output row, the same for every row:
         * small images have many rows and two divisions each would show. */
        int64_t fu0, fu1;
        conv_valid_range(-j->pw + jj * j->dw, j->sw, im->w, OW, &fu0, &fu1);
        COL *dst = col + ((c * j->kh + i) * j->kw + jj) * ld;
        int64_t oh = q0 / OW, ow = q0 % OW;
        for (int64_t t = 0; t < nt; oh++, ow = 0) {
          int64_t seg = nt - t < OW - ow ? nt - t : OW - ow;
          int64_t ih = oh * j->sh - j->ph + i * j->dh;
          COL *d = dst + t;
          t += seg;
          if (ih < 0 || ih >= im->h) {
            for (int64_t u = 0; u < seg; u++) d[u] = 0;
            continue;
          }
          int64_t u0 = fu0, u1 = fu1, iw0 = ow * j->sw - j->pw + jj * j->dw;
          if (seg != OW) conv_valid_range(iw0, j->sw, im->w, seg, &u0, &u1);
          for (int64_t u = 0; u < u0; u++) d[u] = 0;
          if (u1 > u0) {
            const T *row = src + ih * im->sh + (iw0 + u0 * j->sw) * im->sw;
            int64_t step = j->sw * im->sw, m = u1 - u0;
            COL *du = d + u0;
            if (step == 1)
              for (int64_t u = 0; u < m; u++) du[u] = LDCOL(row[u]);
            else
              for (int64_t u = 0; u < m; u++) du[u] = LDCOL(row[u * step]);
          }
          for (int64_t u = u1 > u0 ? u1 : u0; u < seg; u++) d[u] = 0;
        }
      }
  }
}

/* im2col_ through a zero-padded copy of the image rows the tile reads
 * (in COL): every column row is then a plain copy, without the bounds and
 * padding work per output row that dominates small images. Returns -1
 * (nothing written) when the copy cannot be allocated. */
static int VF(im2col_padded_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, COL *col, int64_t ld) {
  const rt_image *im = &j->img;
  int64_t OW = j->out.w;
  /* Image rows [r0, r0 + prow) and columns [-pw, -pw + pcol) are read. */
  int64_t r0 = q0 / OW * j->sh - j->ph;
  int64_t prow = (q0 + nt - 1) / OW * j->sh - j->ph + (j->kh - 1) * j->dh + 1 - r0;
  int64_t pcol = (OW - 1) * j->sw + (j->kw - 1) * j->dw + 1;
  COL *pad = malloc((size_t)(prow * pcol) * sizeof(COL));
  if (!pad) return -1;
  int64_t left = j->pw < pcol ? j->pw : pcol, mid = im->w < pcol - left ? im->w : pcol - left;
  for (int64_t c = 0; c < j->cg; c++) {
    const T *src = (const T *)im->data + n * im->sn + (g * j->cg + c) * im->sc;
    for (int64_t r = 0; r < prow; r++) {
      COL *d = pad + r * pcol;
      int64_t ih = r0 + r;
      if (ih < 0 || ih >= im->h) {
        for (int64_t x = 0; x < pcol; x++) d[x] = 0;
        continue;
      }
      const T *row = src + ih * im->sh;
      for (int64_t x = 0; x < left; x++) d[x] = 0;
      for (int64_t x = 0; x < mid; x++) d[left + x] = LDCOL(row[x * im->sw]);
      for (int64_t x = left + mid; x < pcol; x++) d[x] = 0;
    }
    for (int64_t i = 0; i < j->kh; i++)
      for (int64_t jj = 0; jj < j->kw; jj++) {
        COL *dst = col + ((c * j->kh + i) * j->kw + jj) * ld;
        if (j->sw == 1 && (OW == 8 || OW == 16 || OW == 32) && q0 % OW == 0 && nt % OW == 0) {
          /* Whole rows of a common small width: one fixed-size copy each. */
          const COL *s = pad + (q0 / OW * j->sh - j->ph + i * j->dh - r0) * pcol + jj * j->dw;
          int64_t rows = nt / OW, step = j->sh * pcol;
#define CONV_ROWS_(W)                                                        \
  for (int64_t r = 0; r < rows; r++)                                         \
    for (int v = 0; v < (W); v++) dst[r * (W) + v] = s[r * step + v];
          if (OW == 8) {
            CONV_ROWS_(8)
          } else if (OW == 16) {
            CONV_ROWS_(16)
          } else {
            CONV_ROWS_(32)
          }
#undef CONV_ROWS_
          continue;
        }
        int64_t oh = q0 / OW, ow = q0 % OW;
        for (int64_t t = 0; t < nt; oh++, ow = 0) {
          int64_t seg = nt - t < OW - ow ? nt - t : OW - ow;
          const COL *s = pad + (oh * j->sh - j->ph + i * j->dh - r0) * pcol + ow * j->sw + jj * j->dw;
          COL *d = dst + t;
          t += seg;
          if (j->sw == 1) {
            /* Blocks of a fixed size: short rows, where a memcpy call costs
             * more than the copy. */
            int64_t u = 0;
            for (; u + 16 <= seg; u += 16)
              for (int v = 0; v < 16; v++) d[u + v] = s[u + v];
            for (; u + 8 <= seg; u += 8)
              for (int v = 0; v < 8; v++) d[u + v] = s[u + v];
            for (; u < seg; u++) d[u] = s[u];
          } else {
            for (int64_t u = 0; u < seg; u++) d[u] = s[u * j->sw];
          }
        }
      }
  }
  free(pad);
  return 0;
}

/* The columns of a tile: through the padded copy for windows of several
 * taps (a 1x1 window would copy each element twice). */
static void VF(im2col_tile_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, COL *col, int64_t ld) {
  if (nt > 0 && j->kh * j->kw > 1 && VF(im2col_padded_)(j, n, g, q0, nt, col, ld) == 0) return;
  VF(im2col_)(j, n, g, q0, nt, col, ld);
}

/* The transposed column tile for channels-inner images: colT[t * kk + (i *
 * kw + j) * cg + c], each tap a run of cg channels copied from one pixel. */
static void VF(im2col_rows_)(const conv_job *j, int64_t n, int64_t g, int64_t q0, int64_t nt, COL *colt) {
  const rt_image *im = &j->img;
  int64_t OW = j->out.w, cg = j->cg, kk = j->kk;
  const T *base = (const T *)im->data + n * im->sn + g * cg * im->sc;
  int64_t oh = q0 / OW, ow = q0 % OW;
  for (int64_t t = 0; t < nt; t++) {
    COL *row = colt + t * kk;
    for (int64_t i = 0; i < j->kh; i++) {
      int64_t ih = oh * j->sh - j->ph + i * j->dh;
      for (int64_t jj = 0; jj < j->kw; jj++) {
        int64_t iw = ow * j->sw - j->pw + jj * j->dw;
        COL *d = row + (i * j->kw + jj) * cg;
        if (ih < 0 || ih >= im->h || iw < 0 || iw >= im->w) {
          for (int64_t c = 0; c < cg; c++) d[c] = 0;
        } else {
          const T *src = base + ih * im->sh + iw * im->sw;
          for (int64_t c = 0; c < cg; c++) d[c] = LDCOL(src[c]);
        }
      }
    }
    if (++ow == OW) ow = 0, oh++;
  }
}

/* The columns of one task: positions [q0, q0 + nq) of images [n0, n0 +
 * nb), nb > 1 only when whole images fit a tile (q0 = 0, nq = ohw). The
 * tile's column t is position q0 + t % nq of image n0 + t / nq. */
typedef struct VF(span_) {
  int64_t n0, nb, q0, nq, nt;
} VF(span_);

static VF(span_) VF(span_of_)(const conv_job *j, int64_t block, int64_t tile) {
  VF(span_) s;
  s.n0 = block * j->batch;
  s.nb = j->img.n - s.n0 < j->batch ? j->img.n - s.n0 : j->batch;
  s.q0 = tile * j->nt;
  s.nq = j->ohw - s.q0 < j->nt ? j->ohw - s.q0 : j->nt;
  s.nt = s.nb * s.nq;
  return s;
}

/* Builds the span's columns of group g: col [kk][nt] (ld nt), or colT
 * [nt][kk] when taps_outer. */
static void VF(build_cols_)(const conv_job *j, const VF(span_) *s, int64_t g, COL *col) {
  for (int64_t b = 0; b < s->nb; b++) {
    if (j->taps_outer)
      VF(im2col_rows_)(j, s->n0 + b, g, s->q0, s->nq, col + b * s->nq * j->kk);
    else
      VF(im2col_tile_)(j, s->n0 + b, g, s->q0, s->nq, col + b * s->nq, s->nt);
  }
}

/* O's rows of positions are one stride across the span's images. */
static int VF(uniform_positions_)(const conv_job *j, const rt_image *o, const VF(span_) *s) {
  return s->nb == 1 || o->sn == j->ohw * o->sw;
}

/* d[u * ds] = src[u] + bias for u < n, in T (unit stride vectorises). */
static void VF(store_run_)(T *d, int64_t ds, const A *src, A bias, int64_t n) {
  if (ds == 1)
    for (int64_t u = 0; u < n; u++) d[u] = ST(src[u] + bias);
  else
    for (int64_t u = 0; u < n; u++) d[u * ds] = ST(src[u] + bias);
}

/* Forward tasks: (block of images, group, tile of output positions). */
static void VF(forward_tiles_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt * j->batch, kk = j->kk, kg = j->kg;
  /* The A tile first: it keeps its alignment whatever the columns' size. */
  A *tile = malloc((size_t)(kg * nt_max) * sizeof(A) + (size_t)(kk * nt_max) * sizeof(COL));
  if (!tile) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  COL *col = (COL *)(tile + kg * nt_max);
  const rt_image *out = &j->out, *im = &j->img;
  for (int64_t task = begin; task < end; task++) {
    int64_t g = task / j->tiles % j->groups;
    VF(span_) s = VF(span_of_)(j, task / (j->groups * j->tiles), task % j->tiles);
    int64_t nt = s.nt;
    COLMAT w = {(COL *)j->wmat + g * kg * j->w_rs, j->w_rs, 1}, cols;
    if (j->pointwise && s.nb == 1) {
      COL *x = (COL *)((T *)im->data + s.n0 * im->sn + g * j->cg * im->sc + s.q0 * im->sw);
      cols = j->taps_outer ? (COLMAT){x, im->sw, im->sc} : (COLMAT){x, im->sc, im->sw};
    } else {
      VF(build_cols_)(j, &s, g, col);
      cols = j->taps_outer ? (COLMAT){col, kk, 1} : (COLMAT){col, nt, 1};
    }
    T *o = (T *)out->data + s.n0 * out->sn + g * kg * out->sc + s.q0 * out->sw;
    /* The product's output is A: written in place only when O is A too. */
    int direct = T_IS_A && j->direct_out && (j->taps_outer || s.nb == 1) && VF(uniform_positions_)(j, out, &s);
    /* taps_outer: out^T [nt, kg] = colT [nt, kk] x w^T, rows of positions as
     * channels_last stores them; otherwise out [kg, nt] = w x col. */
    MAT dst = direct ? (j->taps_outer ? (MAT){(A *)o, out->sw, out->sc} : (MAT){(A *)o, out->sc, out->sw})
                     : (j->taps_outer ? (MAT){tile, 1, nt} : (MAT){tile, nt, 1});
    if (j->taps_outer)
      GEMM(j, nt, kg, kk, cols, (COLMAT){w.data, 1, j->w_rs}, dst, 0);
    else
      GEMM(j, kg, nt, kk, w, cols, dst, 0);
    if (direct) {
      if (j->bias)
        for (int64_t k = 0; k < kg; k++) {
          A bk = LD(((const T *)j->bias)[(g * kg + k) * j->bias_stride]);
          for (int64_t t = 0; t < nt; t++) ((A *)o)[k * out->sc + t * out->sw] += bk;
        }
      continue;
    }
    for (int64_t b = 0; b < s.nb; b++) {
      T *ob = (T *)out->data + (s.n0 + b) * out->sn + g * kg * out->sc;
      for (int64_t k = 0; k < kg; k++) {
        A bk = j->bias ? LD(((const T *)j->bias)[(g * kg + k) * j->bias_stride]) : 0;
        const A *tk = tile + k * nt + b * s.nq;
        /* By runs within an output row: no division per element. */
        for (int64_t t = 0, q = s.q0; t < s.nq;) {
          int64_t ow = q % out->w, seg = s.nq - t < out->w - ow ? s.nq - t : out->w - ow;
          VF(store_run_)(ob + k * out->sc + q / out->w * out->sh + ow * out->sw, out->sw, tk + t, bk, seg);
          t += seg;
          q += seg;
        }
      }
    }
  }
  free(tile);
}

/* Input gradient, stage 1: col = weight^T x grad_output for images
 * [n0, n0 + chunk), tasks (image, group, tile); col holds every image's
 * [groups][kk][ohw] block. */
static void VF(grad_cols_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt, kk = j->kk, kg = j->kg, ohw = j->ohw;
  COL *buf = malloc((size_t)(kg * nt_max) * sizeof(COL));
  if (!buf) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  const rt_image *out = &j->out;
  for (int64_t task = begin; task < end; task++) {
    int64_t nl = task / (j->groups * j->tiles), g = task / j->tiles % j->groups, n = j->n0 + nl;
    int64_t q0 = task % j->tiles * nt_max, nt = ohw - q0 < nt_max ? ohw - q0 : nt_max;
    COLMAT wt = {(COL *)j->wmat + g * kg * j->w_rs, 1, j->w_rs}, go;
    const T *o = (const T *)out->data + n * out->sn + g * kg * out->sc + q0 * out->sw;
    if (j->direct_out) {
      go = (COLMAT){(COL *)o, out->sc, out->sw};
    } else {
      for (int64_t k = 0; k < kg; k++)
        for (int64_t t = 0; t < nt; t++) buf[k * nt + t] = LDCOL(o[k * out->sc + t * out->sw]);
      go = (COLMAT){buf, nt, 1};
    }
    A *col = (A *)j->col + ((nl * j->groups + g) * kk) * ohw + q0;
    GEMM(j, kk, nt, kg, wt, go, (MAT){col, ohw, 1}, 0);
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
    if (!j->pointwise) VF(im2col_tile_)(j, n, g, 0, j->ohw, (COL *)j->col + (nl * j->groups + g) * j->kk * j->ohw, j->ohw);
    if (j->direct_out) continue;
    COL *dst = (COL *)j->omat + (nl * out->c + g * j->kg) * j->ohw;
    const T *o = (const T *)out->data + n * out->sn + g * j->kg * out->sc;
    for (int64_t k = 0; k < j->kg; k++)
      for (int64_t h = 0; h < out->h; h++)
        for (int64_t w = 0; w < out->w; w++)
          dst[(k * out->h + h) * out->w + w] = LDCOL(o[k * out->sc + h * out->sh + w * out->sw]);
  }
}

/* Weight gradient, stage 2: tasks (group, row block, column block) of the
 * [K][kk] accumulator j->dw, each adding its block over the chunk's images
 * in order. */
static void VF(wgrad_blocks_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t mblocks = (j->kg + j->mb - 1) / j->mb, nblocks = (j->kk + j->nb - 1) / j->nb;
  const rt_image *out = &j->out, *im = &j->img;
  for (int64_t task = begin; task < end; task++) {
    int64_t g = task / (mblocks * nblocks), m0 = task / nblocks % mblocks * j->mb, c0 = task % nblocks * j->nb;
    int64_t m = j->kg - m0 < j->mb ? j->kg - m0 : j->mb, nc = j->kk - c0 < j->nb ? j->kk - c0 : j->nb;
    MAT dw = {(A *)j->wgrad + (g * j->kg + m0) * j->kk + c0, j->kk, 1};
    for (int64_t nl = 0; nl < j->chunk; nl++) {
      int64_t n = j->n0 + nl;
      COLMAT go, colt;
      if (j->direct_out)
        go = (COLMAT){(COL *)((T *)out->data + n * out->sn + (g * j->kg + m0) * out->sc), out->sc, out->sw};
      else
        go = (COLMAT){(COL *)j->omat + (nl * out->c + g * j->kg + m0) * j->ohw, j->ohw, 1};
      if (j->pointwise)
        colt = (COLMAT){(COL *)((T *)im->data + n * im->sn + (g * j->cg + c0) * im->sc), im->sw, im->sc};
      else
        colt = (COLMAT){(COL *)j->col + ((nl * j->groups + g) * j->kk + c0) * j->ohw, 1, j->ohw};
      GEMM(j, m, nc, j->ohw, go, colt, dw, j->started || nl > 0);
    }
  }
}

/* Weight gradient by tiles, for weights small enough to keep j->parts
 * copies: task p adds the items (image, group, tile) [p * items / parts,
 * (p + 1) * items / parts) into its own accumulator, in order; the copies
 * are then summed in order (sum_parts_). Each tile's columns are built in
 * cache, as in the forward. */
static void VF(wgrad_tiles_)(int64_t begin, int64_t end, void *arg) {
  conv_job *j = arg;
  int64_t nt_max = j->nt * j->batch, kk = j->kk, kg = j->kg;
  int64_t items = (j->img.n + j->batch - 1) / j->batch * j->groups * j->tiles;
  COL *col = malloc((size_t)(kk * nt_max + kg * nt_max) * sizeof(COL));
  if (!col) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  COL *tile = col + kk * nt_max;
  const rt_image *out = &j->out, *im = &j->img;
  for (int64_t part = begin; part < end; part++) {
    A *acc = (A *)j->wgrad + part * j->out.c * kk;
    for (int64_t item = part * items / j->parts; item < (part + 1) * items / j->parts; item++) {
      int64_t g = item / j->tiles % j->groups;
      VF(span_) s = VF(span_of_)(j, item / (j->groups * j->tiles), item % j->tiles);
      int64_t nt = s.nt;
      COLMAT go, colt;
      const T *o = (const T *)out->data + s.n0 * out->sn + g * kg * out->sc + s.q0 * out->sw;
      if (j->direct_out && VF(uniform_positions_)(j, out, &s)) {
        go = (COLMAT){(COL *)o, out->sc, out->sw};
      } else {
        for (int64_t b = 0; b < s.nb; b++)
          for (int64_t k = 0; k < kg; k++) {
            const T *ok = (const T *)out->data + (s.n0 + b) * out->sn + (g * kg + k) * out->sc;
            COL *tk = tile + k * nt + b * s.nq;
            /* By runs within an output row: no division per element. */
            for (int64_t t = 0, q = s.q0; t < s.nq;) {
              int64_t ow = q % out->w, seg = s.nq - t < out->w - ow ? s.nq - t : out->w - ow;
              const T *src = ok + q / out->w * out->sh + ow * out->sw;
              if (out->sw == 1)
                for (int64_t u = 0; u < seg; u++) tk[t + u] = LDCOL(src[u]);
              else
                for (int64_t u = 0; u < seg; u++) tk[t + u] = LDCOL(src[u * out->sw]);
              t += seg;
              q += seg;
            }
          }
        go = (COLMAT){tile, nt, 1};
      }
      if (j->pointwise && s.nb == 1) {
        COL *x = (COL *)((T *)im->data + s.n0 * im->sn + g * j->cg * im->sc + s.q0 * im->sw);
        colt = (COLMAT){x, im->sw, im->sc};
      } else {
        VF(build_cols_)(j, &s, g, col);
        colt = j->taps_outer ? (COLMAT){col, kk, 1} : (COLMAT){col, 1, nt};
      }
      GEMM(j, kg, kk, nt, go, colt, (MAT){acc + g * kg * kk, kk, 1}, 1);
    }
  }
  free(col);
}

static void VF(sum_parts_)(void *parts, int64_t count, int64_t size) {
  A *p = parts;
  for (int64_t k = 1; k < count; k++)
    for (int64_t i = 0; i < size; i++) p[i] += p[k * size + i];
}

/* The weight [K, cg, kh, kw] as a COL matrix [K][kk] (row stride *rs), its
 * taps in (c, i, j) order, or (i, j, c) when taps_outer: in place when it is
 * COL and dense in that order, else converted into buf. */
static const COL *VF(weight_matrix_)(const nrt_tensor_view *w, int64_t kk, COL *buf, int64_t *rs, int taps_outer) {
  const T *src = w->data;
  if (COL_IS_T && conv_weight_dense(w, taps_outer)) {
    *rs = w->strides[0];
    return (const COL *)src;
  }
  for (int64_t k = 0; k < w->shape[0]; k++)
    for (int64_t c = 0; c < w->shape[1]; c++)
      for (int64_t i = 0; i < w->shape[2]; i++)
        for (int64_t jj = 0; jj < w->shape[3]; jj++)
          buf[k * kk + conv_tap_index(w, c, i, jj, taps_outer)] =
              LDCOL(src[k * w->strides[0] + c * w->strides[1] + i * w->strides[2] + jj * w->strides[3]]);
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

/* Depthwise loops read the weight as A: not for bfloat16 columns. */
#ifndef CONV_COLUMNS_ONLY
#include "ops/conv/conv_depthwise_impl.h"
#endif

#undef T
#undef COL
#undef COLMAT
#undef LDCOL
#undef COL_IS_T
#undef A
#undef SUFFIX
#undef GEMM
#undef T_IS_A
#undef MAT
