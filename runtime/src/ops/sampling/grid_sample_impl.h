/* The grid sampler written once for a compute type R (float for float32
 * data, double for float64): the includer defines R and SUFFIX. Arithmetic
 * follows PyTorch's step by step in R (unnormalise, pad, then interpolate):
 * 2-d in the forms of the CPU's vectorised 2-d kernel, 3-d in those of its
 * scalar 3-d kernel (the same as the CUDA kernel's), so that results match
 * the CPU's to its rounding. */

#define GS(name) GS_CAT2_(name, SUFFIX)

/* Grid coordinate in [-1, 1] to a source pixel coordinate. */
static inline R GS(unnormalize)(R coord, int64_t size, int align, int vec2d, R *grad) {
  if (vec2d) { /* the arithmetic of the CPU's vectorised 2-d kernel, whose
                 * compiler fuses (c + 1) scale - 0.5 into one FMA */
    const R scale = align ? (R)(size - 1) / 2 : (R)size / 2;
    if (grad) *grad = scale;
    return align ? (coord + 1) * scale : GS(fma)(coord + 1, scale, (R)-0.5);
  }
  if (align) {
    if (grad) *grad = (R)(size - 1) / 2;
    return ((coord + 1) / 2) * (R)(size - 1);
  }
  if (grad) *grad = (R)size / 2;
  return ((coord + 1) * (R)size - 1) / 2;
}

/* NaN clips to 0, as PyTorch's CUDA kernel and its vectorised 2-d CPU
 * kernel do. */
static inline R GS(clip)(R in, int64_t size, R *grad) {
  if (!(in > 0)) {
    if (grad) *grad = 0;
    return 0;
  }
  R max = (R)(size - 1);
  if (in >= max) {
    if (grad) *grad = 0;
    return max;
  }
  if (grad) *grad = 1;
  return in;
}

/* Reflects in about [twice_low / 2, twice_high / 2] until it lands inside. */
static inline R GS(reflect)(R in, int64_t twice_low, int64_t twice_high, R *grad) {
  if (twice_low == twice_high) {
    if (grad) *grad = 0;
    return 0;
  }
  if (in != in) { /* NaN (or an infinity made NaN by fmod below) reaches the clip as NaN */
    if (grad) *grad = 0;
    return in;
  }
  R min = (R)twice_low / 2, span = (R)(twice_high - twice_low) / 2, sign = 1;
  in = in - min;
  if (in < 0) {
    sign = -1;
    in = -in;
  }
  R extra = GS(fmod)(in, span);
  if (extra != extra) { /* an infinite coordinate */
    if (grad) *grad = 0;
    return extra;
  }
  int64_t flips = (int64_t)GS(fmod)(GS(floor)(in / span), 2);
  if (flips == 0) {
    if (grad) *grad = sign;
    return extra + min;
  }
  if (grad) *grad = -sign;
  return span - extra + min;
}

/* The CPU's vectorised 2-d reflection: the same mirror as reflect, in the
 * arithmetic that kernel uses (|in - low| folded by the period 2 span). */
static inline R GS(reflect2d)(R in, int64_t size, int align, R *grad) {
  if (align && size <= 1) {
    if (grad) *grad = 0;
    return 0;
  }
  const R low = align ? 0 : (R)-0.5, twice_span = align ? (R)(size - 1) * 2 : (R)size * 2;
  const R shifted = in - low, abs_in = GS(fabs)(shifted);
  const R extra = abs_in - GS(trunc)(abs_in / twice_span) * twice_span, other = twice_span - extra;
  const int one_more_flip = extra > other;
  if (grad) *grad = one_more_flip != (shifted < 0) ? -1 : 1;
  return (one_more_flip ? other : extra) + low;
}

/* Padding applied to a source coordinate; non-finite or huge coordinates
 * become -100 (outside every image) so that they convert to integers
 * safely. grad (optional) gets d result / d coord. */
static inline R GS(pad)(R coord, int64_t size, int padding, int align, int vec2d, R *grad) {
  R g = 1, g2 = 1;
  if (padding == GS_BORDER) {
    coord = GS(clip)(coord, size, grad ? &g : NULL);
  } else if (padding == GS_REFLECTION) {
    if (vec2d)
      coord = GS(reflect2d)(coord, size, align, grad ? &g : NULL);
    else
      coord = align ? GS(reflect)(coord, 0, 2 * (size - 1), grad ? &g : NULL)
                    : GS(reflect)(coord, -1, 2 * size - 1, grad ? &g : NULL);
    coord = GS(clip)(coord, size, grad ? &g2 : NULL);
  }
  if (grad) *grad = g * g2;
  if (!(coord > -(R)INT32_MAX && coord < (R)INT32_MAX)) coord = -100; /* NaN included */
  return coord;
}

/* Source coordinate of a grid value along a dim of `size`, with its
 * derivative (optional). */
static inline R GS(source)(R coord, int64_t size, int padding, int align, int vec2d, R *grad) {
  R gu, gp;
  coord = GS(unnormalize)(coord, size, align, vec2d, grad ? &gu : NULL);
  coord = GS(pad)(coord, size, padding, align, vec2d, grad ? &gp : NULL);
  if (grad) *grad = gu * gp;
  return coord;
}

static inline R GS(cubic1)(R x, R A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static inline R GS(cubic2)(R x, R A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

/* The four cubic convolution weights at fraction t (A = -0.75), and their
 * derivatives' negatives as PyTorch's backward uses them. */
static inline void GS(cubic_weights)(R t, R w[4]) {
  const R A = (R)-0.75;
  w[0] = GS(cubic2)(t + 1, A);
  w[1] = GS(cubic1)(t, A);
  w[2] = GS(cubic1)(1 - t, A);
  w[3] = GS(cubic2)(1 - t + 1, A);
}

static inline void GS(cubic_weights_grad)(R t, R w[4]) {
  const R A = (R)-0.75;
  R x = -1 - t;
  w[0] = (-3 * A * x - 10 * A) * x - 8 * A;
  x = -t;
  w[1] = (-3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 1 - t;
  w[2] = (3 * (A + 2) * x - 2 * (A + 3)) * x;
  x = 2 - t;
  w[3] = (3 * A * x - 10 * A) * x + 8 * A;
}

static inline R GS(load)(const char *base, int64_t off) { return ((const R *)(const void *)base)[off]; }
static inline R *GS(ptr)(char *base, int64_t off) { return (R *)(void *)base + off; }

/* Grid point p = (n, z, y, x) of the output: its source coordinates
 * (x, y, z order) and, with grads, their derivatives. */
static inline void GS(point)(const gs_job *j, int64_t n, const int64_t pos[3], int raw, R c[3], R g[3]) {
  const int64_t goff = n * j->grid_s[0] + pos[0] * j->grid_s[1] + pos[1] * j->grid_s[2] + pos[2] * j->grid_s[3];
  for (int d = 0; d < j->dims; d++) {
    const int64_t size = j->in_size[2 - d]; /* x is W (in_size[2]), y H, z D */
    R v = GS(load)(j->grid, goff + d * j->grid_s[4]);
    if (raw)
      c[d] = GS(unnormalize)(v, size, j->align, j->dims == 2, g ? &g[d] : NULL);
    else
      c[d] = GS(source)(v, size, j->padding, j->align, j->dims == 2, g ? &g[d] : NULL);
  }
}

/* In-bounds offset of source pixel (x, y, z), or -1. */
static inline int64_t GS(offset)(const gs_job *j, int64_t x, int64_t y, int64_t z) {
  if (x < 0 || x >= j->in_size[2] || y < 0 || y >= j->in_size[1] || z < 0 || z >= j->in_size[0]) return -1;
  return z * j->in_s[2] + y * j->in_s[3] + x * j->in_s[4];
}

/* A bicubic tap: padded like a grid coordinate, then read if in bounds. */
static inline int64_t GS(tap_offset)(const gs_job *j, R x, R y) {
  x = GS(pad)(x, j->in_size[2], j->padding, j->align, 1, NULL);
  y = GS(pad)(y, j->in_size[1], j->padding, j->align, 1, NULL);
  return GS(offset)(j, (int64_t)x, (int64_t)y, 0);
}

/* out[n, :, p] for output points [begin, end) of the flattened (n, p). */
RT_SIMD_VOID(GS(forward_range_isa), (int64_t begin, int64_t end, const gs_job *j), (begin, end, j)) {
  const int64_t P = j->out_size[0] * j->out_size[1] * j->out_size[2];
  for (int64_t q = begin; q < end; q++) {
    const int64_t n = q / P, p = q % P;
    const int64_t pos[3] = {p / (j->out_size[1] * j->out_size[2]), p / j->out_size[2] % j->out_size[1],
                            p % j->out_size[2]};
    const int64_t ooff = n * j->out_s[0] + pos[0] * j->out_s[2] + pos[1] * j->out_s[3] + pos[2] * j->out_s[4];
    const char *in_n = j->in + n * j->in_s[0] * (int64_t)sizeof(R);
    R c[3] = {0, 0, 0};
    GS(point)(j, n, pos, j->mode == GS_BICUBIC, c, NULL);
    if (j->mode == GS_NEAREST) {
      const int64_t at = GS(offset)(j, (int64_t)GS(nearbyint)(c[0]), (int64_t)GS(nearbyint)(c[1]),
                                    j->dims == 3 ? (int64_t)GS(nearbyint)(c[2]) : 0);
      for (int64_t ch = 0; ch < j->channels; ch++)
        *GS(ptr)(j->out, ooff + ch * j->out_s[1]) = at >= 0 ? GS(load)(in_n, at + ch * j->in_s[1]) : 0;
    } else if (j->mode == GS_BILINEAR) {
      const int corners = 1 << j->dims;
      int64_t at[8];
      R w[8], base[3] = {0, 0, 0}, wd[3][2] = {{1, 0}, {1, 0}, {1, 0}};
      for (int d = 0; d < j->dims; d++) {
        base[d] = GS(floor)(c[d]);
        wd[d][1] = c[d] - base[d];
        wd[d][0] = j->dims == 2 ? 1 - wd[d][1] : (base[d] + 1) - c[d]; /* each CPU kernel's form */
      }
      for (int k = 0; k < corners; k++) {
        const int bx = k & 1, by = (k >> 1) & 1, bz = (k >> 2) & 1;
        w[k] = wd[0][bx] * wd[1][by];
        if (j->dims == 3) w[k] = w[k] * wd[2][bz];
        at[k] = GS(offset)(j, (int64_t)base[0] + bx, (int64_t)base[1] + by,
                           j->dims == 3 ? (int64_t)base[2] + bz : 0);
      }
      for (int64_t ch = 0; ch < j->channels; ch++) {
        R acc = 0;
        if (j->dims == 2) { /* as the CPU's 2-d kernel: the first product, then FMAs */
          for (int k = 0; k < corners; k++) {
            const R v = at[k] >= 0 ? GS(load)(in_n, at[k] + ch * j->in_s[1]) : 0;
            acc = k == 0 ? v * w[0] : GS(fma)(v, w[k], acc);
          }
        } else {
          for (int k = 0; k < corners; k++)
            if (at[k] >= 0) acc += GS(load)(in_n, at[k] + ch * j->in_s[1]) * w[k];
        }
        *GS(ptr)(j->out, ooff + ch * j->out_s[1]) = acc;
      }
    } else { /* bicubic, 2-d */
      const R x0 = GS(floor)(c[0]), y0 = GS(floor)(c[1]);
      R wx[4], wy[4];
      GS(cubic_weights)(c[0] - x0, wx);
      GS(cubic_weights)(c[1] - y0, wy);
      int64_t at[16];
      for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++) at[r * 4 + k] = GS(tap_offset)(j, x0 - 1 + k, y0 - 1 + r);
      for (int64_t ch = 0; ch < j->channels; ch++) {
        const int64_t chan = ch * j->in_s[1];
        R rows[4];
        for (int r = 0; r < 4; r++) {
          R v[4];
          for (int k = 0; k < 4; k++) v[k] = at[r * 4 + k] >= 0 ? GS(load)(in_n, at[r * 4 + k] + chan) : 0;
          rows[r] = v[0] * wx[0] + v[1] * wx[1] + v[2] * wx[2] + v[3] * wx[3];
        }
        *GS(ptr)(j->out, ooff + ch * j->out_s[1]) = rows[0] * wy[0] + rows[1] * wy[1] + rows[2] * wy[2] + rows[3] * wy[3];
      }
    }
  }
}

static void GS(forward_range)(int64_t begin, int64_t end, void *ctx) { GS(forward_range_isa)(begin, end, ctx); }

/* grad_in[n, ch] for the flattened (n, ch) planes [begin, end): every grid
 * point of batch n adds its share; one thread owns a plane. */
RT_SIMD_VOID(GS(grad_input_range_isa), (int64_t begin, int64_t end, const gs_job *j), (begin, end, j)) {
  const int64_t P = j->out_size[0] * j->out_size[1] * j->out_size[2];
  for (int64_t q = begin; q < end; q++) {
    const int64_t n = q / j->channels, ch = q % j->channels;
    char *gin = j->grad_in + (n * j->gin_s[0] + ch * j->gin_s[1]) * (int64_t)sizeof(R);
    /* zero the plane */
    for (int64_t z = 0; z < j->in_size[0]; z++)
      for (int64_t y = 0; y < j->in_size[1]; y++)
        for (int64_t x = 0; x < j->in_size[2]; x++) *GS(ptr)(gin, z * j->gin_s[2] + y * j->gin_s[3] + x * j->gin_s[4]) = 0;
    for (int64_t p = 0; p < P; p++) {
      const int64_t pos[3] = {p / (j->out_size[1] * j->out_size[2]), p / j->out_size[2] % j->out_size[1],
                              p % j->out_size[2]};
      const R go = GS(load)(j->grad_out, n * j->gout_s[0] + ch * j->gout_s[1] + pos[0] * j->gout_s[2] +
                                                  pos[1] * j->gout_s[3] + pos[2] * j->gout_s[4]);
      R c[3] = {0, 0, 0};
      GS(point)(j, n, pos, j->mode == GS_BICUBIC, c, NULL);
#define GS_ADD_(X, Y, Z, V)                                                                                 \
  do {                                                                                                      \
    int64_t x_ = (X), y_ = (Y), z_ = (Z);                                                                   \
    if (x_ >= 0 && x_ < j->in_size[2] && y_ >= 0 && y_ < j->in_size[1] && z_ >= 0 && z_ < j->in_size[0])   \
      *GS(ptr)(gin, z_ * j->gin_s[2] + y_ * j->gin_s[3] + x_ * j->gin_s[4]) += (V);                         \
  } while (0)
      if (j->mode == GS_NEAREST) {
        GS_ADD_((int64_t)GS(nearbyint)(c[0]), (int64_t)GS(nearbyint)(c[1]),
                j->dims == 3 ? (int64_t)GS(nearbyint)(c[2]) : 0, go);
      } else if (j->mode == GS_BILINEAR) {
        R base[3] = {0, 0, 0}, wd[3][2] = {{1, 0}, {1, 0}, {1, 0}};
        for (int d = 0; d < j->dims; d++) {
          base[d] = GS(floor)(c[d]);
          wd[d][1] = c[d] - base[d];
          wd[d][0] = j->dims == 2 ? 1 - wd[d][1] : (base[d] + 1) - c[d]; /* each CPU kernel's form */
        }
        for (int k = 0; k < (1 << j->dims); k++) {
          const int bx = k & 1, by = (k >> 1) & 1, bz = (k >> 2) & 1;
          R w = wd[0][bx] * wd[1][by];
          if (j->dims == 3) w = w * wd[2][bz];
          GS_ADD_((int64_t)base[0] + bx, (int64_t)base[1] + by, j->dims == 3 ? (int64_t)base[2] + bz : 0, w * go);
        }
      } else {
        const R x0 = GS(floor)(c[0]), y0 = GS(floor)(c[1]);
        R wx[4], wy[4];
        GS(cubic_weights)(c[0] - x0, wx);
        GS(cubic_weights)(c[1] - y0, wy);
        for (int r = 0; r < 4; r++)
          for (int k = 0; k < 4; k++) {
            R tx = GS(pad)(x0 - 1 + k, j->in_size[2], j->padding, j->align, 1, NULL);
            R ty = GS(pad)(y0 - 1 + r, j->in_size[1], j->padding, j->align, 1, NULL);
            GS_ADD_((int64_t)tx, (int64_t)ty, 0, go * wx[k] * wy[r]);
          }
      }
#undef GS_ADD_
    }
  }
}

static void GS(grad_input_range)(int64_t begin, int64_t end, void *ctx) { GS(grad_input_range_isa)(begin, end, ctx); }

/* grad_grid for the flattened (n, p) points [begin, end): the derivative
 * of every channel's sample along each coordinate, summed over channels. */
RT_SIMD_VOID(GS(grad_grid_range_isa), (int64_t begin, int64_t end, const gs_job *j), (begin, end, j)) {
  const int64_t P = j->out_size[0] * j->out_size[1] * j->out_size[2];
  for (int64_t q = begin; q < end; q++) {
    const int64_t n = q / P, p = q % P;
    const int64_t pos[3] = {p / (j->out_size[1] * j->out_size[2]), p / j->out_size[2] % j->out_size[1],
                            p % j->out_size[2]};
    const int64_t goff = n * j->gout_s[0] + pos[0] * j->gout_s[2] + pos[1] * j->gout_s[3] + pos[2] * j->gout_s[4];
    const char *in_n = j->in + n * j->in_s[0] * (int64_t)sizeof(R);
    R c[3] = {0, 0, 0}, mult[3] = {0, 0, 0}, gc[3] = {0, 0, 0};
    GS(point)(j, n, pos, j->mode == GS_BICUBIC, c, mult);
    if (j->mode == GS_BILINEAR) {
      R base[3] = {0, 0, 0}, wd[3][2] = {{1, 0}, {1, 0}, {1, 0}};
      for (int d = 0; d < j->dims; d++) {
        base[d] = GS(floor)(c[d]);
        wd[d][1] = c[d] - base[d];
        wd[d][0] = j->dims == 2 ? 1 - wd[d][1] : (base[d] + 1) - c[d]; /* each CPU kernel's form */
      }
      for (int64_t ch = 0; ch < j->channels; ch++) {
        const R go = GS(load)(j->grad_out, goff + ch * j->gout_s[1]);
        for (int k = 0; k < (1 << j->dims); k++) {
          const int b[3] = {k & 1, (k >> 1) & 1, (k >> 2) & 1};
          const int64_t at = GS(offset)(j, (int64_t)base[0] + b[0], (int64_t)base[1] + b[1],
                                        j->dims == 3 ? (int64_t)base[2] + b[2] : 0);
          if (at < 0) continue;
          const R v = GS(load)(in_n, at + ch * j->in_s[1]) * go;
          for (int d = 0; d < j->dims; d++) {
            /* d weight / d coord: -1 or +1 along d, the other dims' weights */
            R others = 1;
            for (int e = 0; e < j->dims; e++)
              if (e != d) others = others * wd[e][b[e]];
            gc[d] += b[d] ? v * others : -(v * others);
          }
        }
      }
    } else if (j->mode == GS_BICUBIC) {
      const R x0 = GS(floor)(c[0]), y0 = GS(floor)(c[1]);
      R wx[4], wy[4], gx[4], gy[4];
      GS(cubic_weights)(c[0] - x0, wx);
      GS(cubic_weights)(c[1] - y0, wy);
      GS(cubic_weights_grad)(c[0] - x0, gx);
      GS(cubic_weights_grad)(c[1] - y0, gy);
      int64_t at[16];
      for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++) at[r * 4 + k] = GS(tap_offset)(j, x0 - 1 + k, y0 - 1 + r);
      for (int64_t ch = 0; ch < j->channels; ch++) {
        const R go = GS(load)(j->grad_out, goff + ch * j->gout_s[1]);
        for (int r = 0; r < 4; r++)
          for (int k = 0; k < 4; k++) {
            if (at[r * 4 + k] < 0) continue;
            const R v = GS(load)(in_n, at[r * 4 + k] + ch * j->in_s[1]);
            gc[0] -= v * gx[k] * wy[r] * go;
            gc[1] -= v * gy[r] * wx[k] * go;
          }
      }
    }
    /* nearest: the sample does not move with the grid */
    const int64_t ggo = n * j->ggrid_s[0] + pos[0] * j->ggrid_s[1] + pos[1] * j->ggrid_s[2] + pos[2] * j->ggrid_s[3];
    for (int d = 0; d < j->dims; d++) *GS(ptr)(j->grad_grid, ggo + d * j->ggrid_s[4]) = mult[d] * gc[d];
  }
}

static void GS(grad_grid_range)(int64_t begin, int64_t end, void *ctx) { GS(grad_grid_range_isa)(begin, end, ctx); }

#undef GS
