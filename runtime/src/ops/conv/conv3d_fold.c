/* Volumetric convolution by depth folding (see conv3d_fold.h).
 *
 * The folded operands are dense [n][depth][channel][tap a][H][W] buffers
 * filled by plane copies, one 5-d view per depth tap a: for a fixed a the
 * output depths that read inside the image form one range; the slices
 * outside the image are zero planes. float32 input gradients fold the
 * image side instead (fold_input_grad_sum) and sum the depth taps after;
 * bfloat16 ones fold grad_output by depth phases (fold_input_grad).
 * Images go to the 2-d convolution in chunks of a few (one when the output
 * view has no single stride over (n, depth), as NCDHW has). */
#include "ops/conv/conv3d_fold.h"
#include "ops/conv/conv3d_fold_copy.h"

#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/thread_pool.h"
#include "ops/shape/shape_common.h"

#define FOLD_CHUNK_ELEMS (1 << 22) /* folded elements per 2-d call (forward, input gradient) */
#define FOLD_WGRAD_ELEMS (1 << 24) /* folded elements of a weight gradient's whole-batch call */
#define RT_FOLD_GRAIN 16384        /* elements per copy task */
#define RT_FOLD_MAX_KD 64          /* depth taps of the folded input gradients */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Working buffers hold at most this many folded elements (a piece is
 * never less than one 2-d image); tests lower it to reach the pieces. */
static int64_t budget_override;
void rt_conv3d_fold_set_budget(int64_t elems) { budget_override = elems; }
static int64_t budget(int64_t dflt) { return budget_override > 0 ? budget_override : dflt; }

/* A piece of the folded batch: images [n0, n0 + nb) with all output depths,
 * or depths [od0, od0 + odc) of the one image n0. */
typedef struct piece {
  int64_t n0, nb, od0, odc;
} piece;

/* Images per piece (*nb, with *odc = depth) when whole images of per_od *
 * depth elements fit the budget, else one image and *odc depths per piece.
 * uniform: the views allow one (n, depth) stride, else pieces hold one image. */
static void plan_pieces(int64_t n, int64_t depth, int64_t per_od, int64_t limit, int uniform, int64_t *nb,
                        int64_t *odc) {
  int64_t per_image = per_od * depth;
  if (per_image <= limit) {
    *nb = !uniform ? 1 : per_image > 0 ? min64(n, limit / per_image) : n;
    *odc = depth;
  } else {
    *nb = 1;
    *odc = per_od > 0 ? min64(depth, max64(1, limit / per_od)) : depth;
  }
  if (*nb < 1) *nb = 1;
}

/* Steps *pc (zeroed to start) to the next piece of the (n, depth) grid, in
 * order; 0 after the last. */
static int next_piece(piece *pc, int64_t n, int64_t depth, int64_t nb, int64_t odc) {
  if (pc->nb == 0)
    pc->n0 = 0, pc->od0 = 0;
  else if (pc->od0 + pc->odc < depth)
    pc->od0 += pc->odc;
  else
    pc->n0 += pc->nb, pc->od0 = 0;
  if (pc->n0 >= n || depth <= 0) return 0;
  pc->nb = min64(nb, n - pc->n0);
  pc->odc = min64(odc, depth - pc->od0);
  return 1;
}

static nrt_tensor_view view_of(void *data, nrt_dtype t, int ndim, const int64_t *shape, const int64_t *strides) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = t;
  v.ndim = ndim;
  for (int d = 0; d < ndim; d++) v.shape[d] = shape[d], v.strides[d] = strides[d];
  return v;
}

static char *at(const nrt_tensor_view *v, int64_t elems) {
  return (char *)v->data + (size_t)elems * nrt_dtype_size(v->dtype);
}

/* Plane copies of the folding: dst and src are 5-d views of one shape
 * whose last two dims are planes, dense in dst. A plane dense in src too is
 * one memcpy, a row with unit stride one memcpy per row, else a strided
 * gather (channels_last_3d). Tasks are planes. */
typedef struct plane_copy {
  const nrt_tensor_view *dst, *src;
} plane_copy;

static void copy_planes(int64_t begin, int64_t end, void *ctx) {
  const plane_copy *pc = ctx;
  const nrt_tensor_view *d = pc->dst, *s = pc->src;
  int64_t H = d->shape[3], W = d->shape[4], d1 = d->shape[1], d2 = d->shape[2];
  int64_t ssh = s->strides[3], ssw = s->strides[4];
  size_t es = nrt_dtype_size(d->dtype);
  for (int64_t t = begin; t < end; t++) {
    int64_t i2 = t % d2, i1 = t / d2 % d1, i0 = t / (d1 * d2);
    char *dp = at(d, i0 * d->strides[0] + i1 * d->strides[1] + i2 * d->strides[2]);
    const char *sp = at(s, i0 * s->strides[0] + i1 * s->strides[1] + i2 * s->strides[2]);
    if (ssw == 1 && ssh == W) {
      memcpy(dp, sp, (size_t)(H * W) * es);
    } else if (ssw == 1) {
      for (int64_t h = 0; h < H; h++) memcpy(dp + (size_t)(h * W) * es, sp + (size_t)(h * ssh) * es, (size_t)W * es);
    } else if (es == 2) {
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) ((uint16_t *)dp)[h * W + w] = ((const uint16_t *)sp)[h * ssh + w * ssw];
    } else {
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) ((uint32_t *)dp)[h * W + w] = ((const uint32_t *)sp)[h * ssh + w * ssw];
    }
  }
}

/* The same copy from a source whose dim 2 (the channels) has unit stride
 * (channels_last_3d): task (dim 0, dim 1), each source row of W x C
 * elements transposed by tiles into its C destination rows. */
static void copy_channel_rows(int64_t begin, int64_t end, void *ctx) {
  const plane_copy *pc = ctx;
  const nrt_tensor_view *d = pc->dst, *s = pc->src;
  int64_t C = d->shape[2], H = d->shape[3], W = d->shape[4], d1 = d->shape[1];
  int64_t ssh = s->strides[3], ssw = s->strides[4], dsc = d->strides[2];
  size_t es = nrt_dtype_size(d->dtype);
  for (int64_t t = begin; t < end; t++) {
    int64_t i1 = t % d1, i0 = t / d1;
    char *dp = at(d, i0 * d->strides[0] + i1 * d->strides[1]);
    const char *sp = at(s, i0 * s->strides[0] + i1 * s->strides[1]);
    for (int64_t h = 0; h < H; h++)
      rt_fold_transpose_row(dp + (size_t)(h * W) * es, dsc, sp + (size_t)(h * ssh) * es, ssw, C, W, es);
  }
}

/* Tasks per thread-pool grain of planes of `elems` elements. */
static int64_t pl_grain(int64_t elems) { return elems >= RT_FOLD_GRAIN ? 1 : RT_FOLD_GRAIN / (elems > 0 ? elems : 1); }

static void fold_copy(const nrt_tensor_view *dst, const nrt_tensor_view *src) {
  plane_copy pc = {dst, src};
  int64_t planes = dst->shape[0] * dst->shape[1] * dst->shape[2], pl = dst->shape[3] * dst->shape[4];
  if (planes == 0 || pl == 0) return;
  if (src->strides[2] == 1 && src->strides[4] != 1)
    rt_parallel_for(dst->shape[0] * dst->shape[1], pl_grain(pl * dst->shape[2]), copy_channel_rows, &pc);
  else
    rt_parallel_for(planes, pl_grain(pl), copy_planes, &pc);
}

/* The inverse copy into a channels-inner view (channels_last_3d): dst and
 * src of one 5-d shape, src dense planes, dst's dim 2 (the channels) with
 * unit stride. Task (dim 0, dim 1), each row's C planar runs transposed by
 * tiles into its pixels' channel runs. The 2-d kernels write a planar
 * output with whole-vector stores, where they would store channels_last_3d
 * element by element. */
static void copy_rows_to_channels(int64_t begin, int64_t end, void *ctx) {
  const plane_copy *pc = ctx;
  const nrt_tensor_view *d = pc->dst, *s = pc->src;
  int64_t C = d->shape[2], H = d->shape[3], W = d->shape[4], d1 = d->shape[1];
  size_t es = nrt_dtype_size(d->dtype);
  for (int64_t t = begin; t < end; t++) {
    int64_t i1 = t % d1, i0 = t / d1;
    char *dp = at(d, i0 * d->strides[0] + i1 * d->strides[1]);
    const char *sp = at(s, i0 * s->strides[0] + i1 * s->strides[1]);
    for (int64_t h = 0; h < H; h++) /* roles of C and W swapped: pixels are the rows written */
      rt_fold_transpose_row(dp + (size_t)(h * d->strides[3]) * es, d->strides[4], sp + (size_t)(h * W) * es,
                            s->strides[2], W, C, es);
  }
}

static void unfold_copy(const nrt_tensor_view *dst, const nrt_tensor_view *src) {
  plane_copy pc = {dst, src};
  int64_t rows = dst->shape[0] * dst->shape[1], per_row = dst->shape[2] * dst->shape[3] * dst->shape[4];
  if (rows > 0 && per_row > 0) rt_parallel_for(rows, pl_grain(per_row), copy_rows_to_channels, &pc);
}

/* A problem operand (5-d) whose channels are innermost: channels_last_3d. */
static int channels_inner(const nrt_tensor_view *v) { return v->strides[1] == 1 && v->strides[4] != 1; }

/* Output depths od in [*lo, *hi) read slice od * s0 - p0 + a * dl0 inside
 * the `depth` slices of the image. */
static void tap_range(const rt_conv3d_problem *p, int64_t a, int64_t depth, int64_t out_depth, int64_t *lo,
                      int64_t *hi) {
  int64_t first = p->p[0] - a * p->dl[0], last = depth - 1 + p->p[0] - a * p->dl[0];
  *lo = first <= 0 ? 0 : (first + p->s[0] - 1) / p->s[0];
  *hi = last < 0 ? 0 : min64(last / p->s[0] + 1, out_depth);
  if (*hi < *lo) *hi = *lo;
}

/* The 2-d op: operands in the 2-d order of the role, scalars [sh, sw, ph,
 * pw, dh, dw, groups]. The 3-d op's code names it in errors. */
static nrt_status run_2d(const rt_conv3d_problem *p, const nrt_tensor_view *a, const nrt_tensor_view *b,
                         const nrt_tensor_view *c) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = p->code;
  op.num_outputs = 1;
  op.operands[op.num_operands++] = *a;
  op.operands[op.num_operands++] = *b;
  op.operands[op.num_operands++] = *c;
  if (p->bias && p->role != RT_CONV3D_WEIGHT_GRAD) op.operands[op.num_operands++] = *p->bias;
  int64_t sc[7] = {p->s[1], p->s[2], p->p[1], p->p[2], p->dl[1], p->dl[2], p->groups};
  for (int i = 0; i < 7; i++) op.scalars[i].i = sc[i];
  op.num_scalars = 7;
  if (p->role == RT_CONV3D_FORWARD) return rt_kernel_conv2d(&op);
  if (p->role == RT_CONV3D_INPUT_GRAD) return rt_kernel_conv2d_input_grad(&op);
  return rt_kernel_conv2d_weight_grad(&op);
}

/* buf[n][od - od0][c][a] (planes of H x W) = image pc->n0 + n, channel c,
 * slice od * s0 - p0 + a * dl0, over the piece's images and output depths:
 * the forward's folded image. */
static void fold_image(const rt_conv3d_problem *p, const piece *pc, char *buf) {
  const nrt_tensor_view *im = &p->img;
  int64_t C = im->shape[1], D = im->shape[2], H = im->shape[3], W = im->shape[4], OD = p->out.shape[2];
  int64_t kd = p->k[0], pl = H * W, nb = pc->nb, od0 = pc->od0, odc = pc->odc;
  size_t es = nrt_dtype_size(im->dtype);
  for (int64_t a = 0; a < kd; a++) {
    int64_t lo, hi;
    tap_range(p, a, D, OD, &lo, &hi);
    lo = max64(lo, od0), hi = min64(hi, od0 + odc);
    if (hi < lo) hi = lo;
    if (hi > lo) {
      int64_t shape[5] = {nb, hi - lo, C, H, W};
      int64_t ds[5] = {odc * C * kd * pl, C * kd * pl, kd * pl, W, 1};
      int64_t ss[5] = {im->strides[0], p->s[0] * im->strides[2], im->strides[1], im->strides[3], im->strides[4]};
      int64_t id0 = lo * p->s[0] - p->p[0] + a * p->dl[0];
      nrt_tensor_view dst = view_of(buf + (size_t)(((lo - od0) * C * kd + a) * pl) * es, im->dtype, 5, shape, ds);
      nrt_tensor_view src = view_of(at(im, pc->n0 * im->strides[0] + id0 * im->strides[2]), im->dtype, 5, shape, ss);
      fold_copy(&dst, &src);
    }
    for (int64_t n = 0; n < nb; n++)
      for (int64_t od = od0; od < od0 + odc; od++)
        if (od < lo || od >= hi)
          for (int64_t c = 0; c < C; c++)
            memset(buf + (size_t)((((n * odc + od - od0) * C + c) * kd + a) * pl) * es, 0, (size_t)pl * es);
  }
}

/* The weight as a dense [K, cg * kd, kh, kw] (channel c * kd + a): w
 * itself when it is contiguous, else a copy in *own. */
static int weight_2d(const rt_conv3d_problem *p, nrt_tensor_view *w2, void **own) {
  const nrt_tensor_view *w = &p->w;
  int64_t K = w->shape[0], cg = w->shape[1], kd = w->shape[2], kh = w->shape[3], kw = w->shape[4];
  int64_t s4[4] = {cg * kd * kh * kw, kh * kw, kw, 1}, sh4[4] = {K, cg * kd, kh, kw};
  *own = NULL;
  if (rt_view_is_contiguous(w)) {
    *w2 = view_of(w->data, w->dtype, 4, sh4, s4);
    return 0;
  }
  *own = malloc((size_t)(K * cg * kd * kh * kw) * nrt_dtype_size(w->dtype) + 1);
  if (!*own) return -1;
  int64_t ds[5] = {cg * kd * kh * kw, kd * kh * kw, kh * kw, kw, 1};
  nrt_tensor_view dst = view_of(*own, w->dtype, 5, w->shape, ds);
  rt_copy_view(&dst, w);
  *w2 = view_of(*own, w->dtype, 4, sh4, s4);
  return 0;
}

static nrt_status oom(const rt_conv3d_problem *p, const char *what) {
  return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %s", nrt_op_name(p->code), what);
}

static nrt_status fold_forward(const rt_conv3d_problem *p) {
  const nrt_tensor_view *im = &p->img, *o = &p->out;
  int64_t N = im->shape[0], C = im->shape[1], H = im->shape[3], W = im->shape[4], OD = o->shape[2];
  int64_t kd = p->k[0], per_od = C * kd * H * W;
  int view = kd == 1 && p->p[0] == 0; /* the image's own slices, no copy */
  int uniform = o->strides[0] == OD * o->strides[2] && (!view || im->strides[0] == OD * p->s[0] * im->strides[2]);
  /* a channels_last_3d output is written planar, then transposed into place */
  int o_rows = channels_inner(o);
  int64_t K = o->shape[1], OH = o->shape[3], OW = o->shape[4];
  int64_t x_od = view ? 0 : per_od, o_od = o_rows ? K * OH * OW : 0;
  int64_t nb = uniform ? N : 1, odc = OD;
  if (x_od + o_od > 0) plan_pieces(N, OD, x_od + o_od, budget(FOLD_CHUNK_ELEMS), uniform, &nb, &odc);
  size_t es = nrt_dtype_size(im->dtype);
  nrt_tensor_view w2;
  void *wown;
  char *buf = NULL;
  if (weight_2d(p, &w2, &wown)) return oom(p, "the weight");
  if (x_od + o_od > 0 && !(buf = malloc((size_t)(nb * odc * (x_od + o_od)) * es))) {
    free(wown);
    return oom(p, "the depth-folded image");
  }
  char *obuf = buf ? buf + (size_t)(nb * odc * x_od) * es : NULL;
  nrt_status s = NRT_SUCCESS;
  piece pc = {0, 0, 0, 0};
  while (!s && next_piece(&pc, N, OD, nb, odc)) {
    int64_t rows = pc.nb * pc.odc;
    int64_t os[4] = {rows, o->shape[1], o->shape[3], o->shape[4]};
    int64_t ost[4] = {o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
    int64_t odense[4] = {K * OH * OW, OH * OW, OW, 1};
    char *o0 = at(o, pc.n0 * o->strides[0] + pc.od0 * o->strides[2]);
    nrt_tensor_view o2 = o_rows ? view_of(obuf, o->dtype, 4, os, odense) : view_of(o0, o->dtype, 4, os, ost), x2;
    int64_t xs[4] = {rows, C * kd, H, W};
    if (view) {
      int64_t xst[4] = {p->s[0] * im->strides[2], im->strides[1], im->strides[3], im->strides[4]};
      x2 = view_of(at(im, pc.n0 * im->strides[0] + pc.od0 * p->s[0] * im->strides[2]), im->dtype, 4, xs, xst);
    } else {
      int64_t xst[4] = {per_od, H * W, W, 1};
      fold_image(p, &pc, buf);
      x2 = view_of(buf, im->dtype, 4, xs, xst);
    }
    s = run_2d(p, &o2, &x2, &w2);
    if (!s && o_rows) {
      int64_t sh5[5] = {pc.nb, pc.odc, K, OH, OW}, ds[5] = {pc.odc * K * OH * OW, K * OH * OW, OH * OW, OW, 1};
      int64_t st5[5] = {o->strides[0], o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
      nrt_tensor_view dst = view_of(o0, o->dtype, 5, sh5, st5), src = view_of(obuf, o->dtype, 5, sh5, ds);
      unfold_copy(&dst, &src);
    }
  }
  free(buf), free(wown);
  return s;
}

/* Input gradient by depth phases (bfloat16: each element rounded once).
 * Image slices id = f + s0 * u of phase f < s0 receive grad_output only
 * through the taps a with (f + p0 - a * dl0) divisible by s0, from depth od
 * = u + q_a, q_a = (f + p0 - a * dl0) / s0. Per phase, Y[n][u] holds those
 * taps' grad_output slices as channels k * m + i (m taps, 0 where od is
 * outside) and the 2-d input gradient with the weight's taps moved to its
 * output channels, W2[k * m + i] = W[k, :, taps[i]], writes the phase's
 * slices. A phase without taps gets the bias (or 0).
 *
 * With C = 8 or 16 image channels on AMX hosts, a 2-d row holds P = 32 / C
 * consecutive slices u = P r + j of the phase instead (its output channels
 * j * C + c fill the direct kernel's 32-channel blocks, where C alone
 * would leave them half or a quarter empty): Y's channels k * M + e read od
 * = P r + qmin + e (M = P + qmax - qmin), and W2[k * M + e][j * C + c] =
 * W[k, c, a] where e = j + q_a - qmin, zero elsewhere. The zeros add exact
 * zeros, so each element is still one sum rounded once. */
typedef struct phase {
  int64_t f, depth, m; /* first slice, slices, taps */
  int64_t taps[RT_FOLD_MAX_KD];
  int64_t P, rows, M, qmin; /* slices per 2-d row, rows, Y channels per grad_output channel */
} phase;

/* q_a of tap a in phase f: grad_output depth od = u + q_a reaches slice u. */
static int64_t tap_q(const rt_conv3d_problem *p, int64_t f, int64_t a) {
  return (f + p->p[0] - a * p->dl[0]) / p->s[0];
}

static void phase_of(const rt_conv3d_problem *p, int64_t f, int64_t P, phase *ph) {
  int64_t ID = p->img.shape[2];
  ph->f = f;
  ph->depth = (ID - f + p->s[0] - 1) / p->s[0];
  ph->m = 0;
  for (int64_t a = 0; a < p->k[0]; a++)
    if ((f + p->p[0] - a * p->dl[0]) % p->s[0] == 0) ph->taps[ph->m++] = a;
  ph->P = P;
  ph->rows = (ph->depth + P - 1) / P;
  ph->M = ph->m, ph->qmin = 0;
  if (P > 1 && ph->m > 0) { /* taps in increasing a: q decreases */
    ph->qmin = tap_q(p, f, ph->taps[ph->m - 1]);
    ph->M = P + tap_q(p, f, ph->taps[0]) - ph->qmin;
  }
}

/* Slices per 2-d row (see above): 1 but for bfloat16 on AMX hosts with 8
 * or 16 image channels and no groups. */
static int64_t slices_per_row(const rt_conv3d_problem *p) {
  int64_t C = p->img.shape[1];
  if (p->img.dtype != NRT_BFLOAT16 || p->groups != 1 || !rt_isa_amx_bf16()) return 1;
  return C == 8 || C == 16 ? 32 / C : 1;
}

/* grad_output depth of Y channel i of row r: P r + y_q(i). */
static int64_t y_q(const rt_conv3d_problem *p, const phase *ph, int64_t i) {
  return ph->P == 1 ? tap_q(p, ph->f, ph->taps[i]) : ph->qmin + i;
}

/* buf[n][r - r0][k][i] (planes of OH x OW) = grad_output pc->n0 + n,
 * channel k, depth P r + y_q(i), or 0, over the piece's images and rows r
 * in [r0 = pc->od0, r0 + pc->odc). */
static void fold_phase(const rt_conv3d_problem *p, const phase *ph, const piece *pc, char *buf) {
  const nrt_tensor_view *o = &p->out;
  int64_t K = o->shape[1], OD = o->shape[2], OH = o->shape[3], OW = o->shape[4], M = ph->M, pl = OH * OW;
  int64_t nb = pc->nb, r0 = pc->od0, rc = pc->odc, P = ph->P;
  size_t es = nrt_dtype_size(o->dtype);
  for (int64_t i = 0; i < M; i++) {
    int64_t q = y_q(p, ph, i);
    int64_t lo = q >= 0 ? 0 : (-q + P - 1) / P, hi = OD - 1 - q >= 0 ? (OD - 1 - q) / P + 1 : 0;
    lo = max64(lo, r0), hi = min64(hi, min64(ph->rows, r0 + rc));
    if (hi < lo) hi = lo;
    if (hi > lo) {
      int64_t shape[5] = {nb, hi - lo, K, OH, OW}, ds[5] = {rc * K * M * pl, K * M * pl, M * pl, OW, 1};
      int64_t ss[5] = {o->strides[0], P * o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
      nrt_tensor_view dst = view_of(buf + (size_t)(((lo - r0) * K * M + i) * pl) * es, o->dtype, 5, shape, ds);
      nrt_tensor_view src =
          view_of(at(o, pc->n0 * o->strides[0] + (P * lo + q) * o->strides[2]), o->dtype, 5, shape, ss);
      fold_copy(&dst, &src);
    }
    for (int64_t n = 0; n < nb; n++)
      for (int64_t r = r0; r < r0 + rc; r++)
        if (r < lo || r >= hi)
          for (int64_t k = 0; k < K; k++)
            memset(buf + (size_t)((((n * rc + r - r0) * K + k) * M + i) * pl) * es, 0, (size_t)pl * es);
  }
}

/* Slices of a phase without taps: the bias's bits (what 0 + bias rounds
 * to), or 0. */
static void fill_phase(const rt_conv3d_problem *p, const phase *ph) {
  const nrt_tensor_view *im = &p->img;
  size_t es = nrt_dtype_size(im->dtype);
  for (int64_t n = 0; n < im->shape[0]; n++)
    for (int64_t c = 0; c < im->shape[1]; c++) {
      char v[8] = {0};
      if (p->bias) memcpy(v, at(p->bias, c * p->bias->strides[0]), es);
      for (int64_t u = 0; u < ph->depth; u++)
        for (int64_t h = 0; h < im->shape[3]; h++)
          for (int64_t w = 0; w < im->shape[4]; w++)
            memcpy(at(im, n * im->strides[0] + c * im->strides[1] + (ph->f + u * p->s[0]) * im->strides[2] +
                              h * im->strides[3] + w * im->strides[4]),
                   v, es);
    }
}

/* dst = src, 5-d views of one shape with src's planes dense: a plane dense
 * in dst too is one memcpy, else element by element. Tasks are planes. */
static void store_planes(int64_t begin, int64_t end, void *ctx) {
  const plane_copy *pc = ctx;
  const nrt_tensor_view *d = pc->dst, *s = pc->src;
  int64_t H = d->shape[3], W = d->shape[4], d1 = d->shape[1], d2 = d->shape[2];
  size_t es = nrt_dtype_size(d->dtype);
  for (int64_t t = begin; t < end; t++) {
    int64_t i2 = t % d2, i1 = t / d2 % d1, i0 = t / (d1 * d2);
    char *dp = at(d, i0 * d->strides[0] + i1 * d->strides[1] + i2 * d->strides[2]);
    const char *sp = at(s, i0 * s->strides[0] + i1 * s->strides[1] + i2 * s->strides[2]);
    if (d->strides[4] == 1 && d->strides[3] == W) {
      memcpy(dp, sp, (size_t)(H * W) * es);
      continue;
    }
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++)
        memcpy(dp + (size_t)(h * d->strides[3] + w * d->strides[4]) * es, sp + (size_t)(h * W + w) * es, es);
  }
}

/* Scratch rows [n][r][j][c] (planes) of the piece into the image slices
 * f + s0 (P r + j) that exist. */
static void store_rows(const rt_conv3d_problem *p, const phase *ph, const piece *pc, const char *ibuf) {
  const nrt_tensor_view *im = &p->img;
  int64_t C = im->shape[1], H = im->shape[3], W = im->shape[4], pl = H * W, P = ph->P, s0 = p->s[0];
  size_t es = nrt_dtype_size(im->dtype);
  for (int64_t j = 0; j < P; j++) {
    int64_t r1 = min64(pc->od0 + pc->odc, (ph->depth - j + P - 1) / P); /* rows whose slice j exists */
    if (r1 <= pc->od0) continue;
    int64_t sh5[5] = {pc->nb, r1 - pc->od0, C, H, W}, ds[5] = {pc->odc * P * C * pl, P * C * pl, pl, W, 1};
    int64_t st5[5] = {im->strides[0], s0 * P * im->strides[2], im->strides[1], im->strides[3], im->strides[4]};
    int64_t first = pc->n0 * im->strides[0] + (ph->f + s0 * (P * pc->od0 + j)) * im->strides[2];
    nrt_tensor_view dst = view_of(at(im, first), im->dtype, 5, sh5, st5);
    nrt_tensor_view src = view_of((void *)(ibuf + (size_t)(j * C * pl) * es), im->dtype, 5, sh5, ds);
    if (channels_inner(im)) {
      unfold_copy(&dst, &src);
    } else {
      plane_copy cp = {&dst, &src};
      int64_t planes = sh5[0] * sh5[1] * C;
      if (planes > 0 && pl > 0) rt_parallel_for(planes, pl_grain(pl), store_planes, &cp);
    }
  }
}

static nrt_status fold_input_grad(const rt_conv3d_problem *p) {
  const nrt_tensor_view *im = &p->img, *o = &p->out, *w = &p->w;
  int64_t N = im->shape[0], ID = im->shape[2], s0 = p->s[0];
  int64_t K = o->shape[1], OH = o->shape[3], OW = o->shape[4];
  int64_t cg = w->shape[1], kh = w->shape[3], kw = w->shape[4], khw = kh * kw;
  size_t es = nrt_dtype_size(im->dtype);
  int64_t P = slices_per_row(p);
  phase ph;
  int64_t most_M = 0, most_rows = 0;
  for (int64_t f = 0; f < s0 && f < ID; f++) {
    phase_of(p, f, P, &ph);
    most_M = max64(most_M, ph.M), most_rows = max64(most_rows, ph.rows);
  }
  /* the image gradient is written planar, then stored into place, for
   * several slices a row or a channels_last_3d image */
  int i_rows = P > 1 || channels_inner(im);
  int64_t C = im->shape[1], H = im->shape[3], W = im->shape[4];
  int64_t y_r = K * most_M * OH * OW, i_r = i_rows ? P * C * H * W : 0;
  int64_t nb, rc;
  /* one image per piece unless the image gradient (or its scratch) has one (n, row) stride in every phase */
  plan_pieces(N, most_rows, y_r + i_r, budget(FOLD_CHUNK_ELEMS),
              i_rows || (ID % s0 == 0 && im->strides[0] == ID * im->strides[2]), &nb, &rc);
  char *buf = malloc((size_t)(nb * rc * (y_r + i_r)) * es + 1);
  char *wbuf = malloc((size_t)(K * most_M * P * cg * khw) * es + 1), *bbuf = malloc((size_t)(P * C) * es + 1);
  if (!buf || !wbuf || !bbuf) {
    free(buf), free(wbuf), free(bbuf);
    return oom(p, "the depth-folded grad_output");
  }
  char *ibuf = buf + (size_t)(nb * rc * y_r) * es;
  /* the bias of a row's P * C channels: the image's, P times */
  rt_conv3d_problem q = *p;
  nrt_tensor_view bias_rows;
  if (p->bias && P > 1) {
    for (int64_t j = 0; j < P; j++)
      for (int64_t c = 0; c < C; c++) memcpy(bbuf + (size_t)(j * C + c) * es, at(p->bias, c * p->bias->strides[0]), es);
    int64_t bs[1] = {P * C}, bst[1] = {1};
    bias_rows = view_of(bbuf, p->bias->dtype, 1, bs, bst);
    q.bias = &bias_rows;
  }
  nrt_status s = NRT_SUCCESS;
  for (int64_t f = 0; f < s0 && f < ID && !s; f++) {
    phase_of(p, f, P, &ph);
    if (ph.m == 0) {
      fill_phase(p, &ph);
      continue;
    }
    /* W2[k * M + e][j * cg + c] = W[k, c, taps[i]], e = i (P = 1) or j + q_i - qmin */
    int64_t M = ph.M;
    memset(wbuf, 0, (size_t)(K * M * P * cg * khw) * es);
    for (int64_t j = 0; j < P; j++)
      for (int64_t i = 0; i < ph.m; i++) {
        int64_t e = P == 1 ? i : j + tap_q(p, f, ph.taps[i]) - ph.qmin;
        int64_t sh4[4] = {K, cg, kh, kw}, ds[4] = {M * P * cg * khw, khw, kw, 1};
        int64_t ss[4] = {w->strides[0], w->strides[1], w->strides[3], w->strides[4]};
        nrt_tensor_view dst = view_of(wbuf + (size_t)((e * P + j) * cg * khw) * es, w->dtype, 4, sh4, ds);
        nrt_tensor_view src = view_of(at(w, ph.taps[i] * w->strides[2]), w->dtype, 4, sh4, ss);
        rt_copy_view(&dst, &src);
      }
    int64_t wsh[4] = {K * M, P * cg, kh, kw}, wst[4] = {P * cg * khw, khw, kw, 1};
    nrt_tensor_view w2 = view_of(wbuf, w->dtype, 4, wsh, wst);
    piece pc = {0, 0, 0, 0};
    while (!s && next_piece(&pc, N, ph.rows, nb, rc)) {
      int64_t rows = pc.nb * pc.odc, first = pc.n0 * im->strides[0] + (f + pc.od0 * s0) * im->strides[2];
      int64_t is[4] = {rows, P * C, H, W};
      int64_t ist[4] = {s0 * im->strides[2], im->strides[1], im->strides[3], im->strides[4]};
      int64_t idense[4] = {P * C * H * W, H * W, W, 1};
      nrt_tensor_view i2 =
          i_rows ? view_of(ibuf, im->dtype, 4, is, idense) : view_of(at(im, first), im->dtype, 4, is, ist);
      int64_t ys[4] = {rows, K * M, OH, OW}, yst[4] = {K * M * OH * OW, OH * OW, OW, 1};
      fold_phase(p, &ph, &pc, buf);
      nrt_tensor_view y2 = view_of(buf, o->dtype, 4, ys, yst);
      s = run_2d(&q, &i2, &y2, &w2);
      if (!s && i_rows) store_rows(p, &ph, &pc, ibuf);
    }
  }
  free(buf), free(wbuf), free(bbuf);
  return s;
}

/* float32 input gradient by the forward's folding: Z = the 2-d input
 * gradient of the folded image (channel c * kd + a of depth od), then
 * I'[n, c, id] = sum over a of Z[n, od, c * kd + a] with od * s0 = id + p0 -
 * a * dl0, in a order, plus the bias. Against fold_input_grad's folded
 * grad_output, the 2-d problem has the forward's shape (K rows, cg * kd
 * output channels) and no zero channels when s0 > 1. */
typedef struct depth_sum {
  const rt_conv3d_problem *p;
  const float *z;
  int64_t n0;
} depth_sum;

/* d[w] = ((0 + src[0][off + w]) + src[1][off + w] + ...) + b for w < n:
 * the depth sum's order, a row at a time so that it vectorises (compiled
 * per ISA level). */
RT_SIMD_VOID(sum_row, (float *restrict d, const float *const *src, int cnt, int64_t off, int64_t n, float b),
             (d, src, cnt, off, n, b)) {
  for (int64_t w = 0; w < n; w++) d[w] = 0.0f;
  for (int i = 0; i < cnt; i++) {
    const float *restrict s = src[i] + off;
    for (int64_t w = 0; w < n; w++) d[w] += s[w];
  }
  for (int64_t w = 0; w < n; w++) d[w] += b;
}

static void depth_sum_planes(int64_t begin, int64_t end, void *ctx) {
  const depth_sum *ds = ctx;
  const rt_conv3d_problem *p = ds->p;
  const nrt_tensor_view *im = &p->img;
  int64_t C = im->shape[1], ID = im->shape[2], H = im->shape[3], W = im->shape[4], OD = p->out.shape[2];
  int64_t kd = p->k[0], pl = H * W, sh = im->strides[3], sw = im->strides[4];
  for (int64_t t = begin; t < end; t++) {
    int64_t id = t % ID, c = t / ID % C, n = t / (ID * C);
    float b = p->bias ? ((const float *)p->bias->data)[c * p->bias->strides[0]] : 0.0f; /* float32 only */
    const float *src[RT_FOLD_MAX_KD];
    int cnt = 0;
    for (int64_t a = 0; a < kd; a++) {
      int64_t u = id + p->p[0] - a * p->dl[0];
      if (u >= 0 && u % p->s[0] == 0 && u / p->s[0] < OD)
        src[cnt++] = ds->z + (((n * OD + u / p->s[0]) * C + c) * kd + a) * pl;
    }
    float *dst = (float *)at(im, (ds->n0 + n) * im->strides[0] + c * im->strides[1] + id * im->strides[2]);
    for (int64_t h = 0; h < H; h++) {
      if (sw == 1) {
        sum_row(dst + h * sh, src, cnt, h * W, W, b);
        continue;
      }
      for (int64_t w = 0; w < W; w++) {
        float v = 0.0f;
        for (int i = 0; i < cnt; i++) v += src[i][h * W + w];
        dst[h * sh + w * sw] = v + b;
      }
    }
  }
}

/* Folded elements per image of fold_input_grad_sum: the folded image's
 * gradient, and grad_output unless it is read in place (W innermost, the
 * 2-d kernels' blocked path), else copied to dense [n][od][k] planes. An
 * image past the budget takes the depth phases instead, in pieces of
 * slices. */
static int64_t sum_per_image(const rt_conv3d_problem *p, int *o_view) {
  const nrt_tensor_view *im = &p->img, *o = &p->out;
  *o_view = o->strides[4] == 1;
  return o->shape[2] * (im->shape[1] * p->k[0] * im->shape[3] * im->shape[4] +
                        (*o_view ? 0 : o->shape[1] * o->shape[3] * o->shape[4]));
}

/* The same sum into a channels-inner image gradient (channels_last_3d):
 * task (image, slice), each row summed into planar rows of W and
 * transposed by tiles into the row's pixels, instead of C strided stores
 * per pixel. */
static void depth_sum_rows(int64_t begin, int64_t end, void *ctx) {
  const depth_sum *ds = ctx;
  const rt_conv3d_problem *p = ds->p;
  const nrt_tensor_view *im = &p->img;
  int64_t C = im->shape[1], ID = im->shape[2], H = im->shape[3], W = im->shape[4], OD = p->out.shape[2];
  int64_t kd = p->k[0], pl = H * W;
  float *row = malloc((size_t)(C * W) * sizeof(float) + 1);
  if (!row) { /* no row buffer: the strided stores, plane by plane */
    for (int64_t t = begin; t < end; t++)
      for (int64_t c = 0; c < C; c++) {
        int64_t plane = (t / ID * C + c) * ID + t % ID;
        depth_sum_planes(plane, plane + 1, ctx);
      }
    return;
  }
  for (int64_t t = begin; t < end; t++) {
    int64_t id = t % ID, n = t / ID;
    const float *src[RT_FOLD_MAX_KD]; /* tap a's plane of channel 0 */
    int cnt = 0;
    for (int64_t a = 0; a < kd; a++) {
      int64_t u = id + p->p[0] - a * p->dl[0];
      if (u >= 0 && u % p->s[0] == 0 && u / p->s[0] < OD)
        src[cnt++] = ds->z + ((n * OD + u / p->s[0]) * C * kd + a) * pl;
    }
    char *dst = at(im, (ds->n0 + n) * im->strides[0] + id * im->strides[2]);
    for (int64_t h = 0; h < H; h++) {
      for (int64_t c = 0; c < C; c++) {
        float b = p->bias ? ((const float *)p->bias->data)[c * p->bias->strides[0]] : 0.0f;
        sum_row(row + c * W, src, cnt, c * kd * pl + h * W, W, b);
      }
      /* row[c][w] to pixel w's channel run: the transposition with the roles of C and W swapped */
      rt_fold_transpose_row(dst + (size_t)(h * im->strides[3]) * sizeof(float), im->strides[4], row, W, W, C,
                            sizeof(float));
    }
  }
  free(row);
}

static nrt_status fold_input_grad_sum(const rt_conv3d_problem *p) {
  const nrt_tensor_view *im = &p->img, *o = &p->out;
  int64_t N = im->shape[0], C = im->shape[1], ID = im->shape[2], H = im->shape[3], W = im->shape[4];
  int64_t K = o->shape[1], OD = o->shape[2], OH = o->shape[3], OW = o->shape[4], kd = p->k[0];
  int64_t per_image = OD * C * kd * H * W, o_image = OD * K * OH * OW;
  int o_view;
  int64_t nb = budget(FOLD_CHUNK_ELEMS) / sum_per_image(p, &o_view);
  if (o_view && o->strides[0] != OD * o->strides[2]) nb = 1; /* no one (n, depth) stride */
  nb = max64(1, min64(nb, N));
  nrt_tensor_view w2;
  void *wown;
  rt_conv3d_problem fp = *p;
  fp.role = RT_CONV3D_FORWARD; /* the weight as the forward folds it */
  if (weight_2d(&fp, &w2, &wown)) return oom(p, "the weight");
  float *z = malloc((size_t)(nb * per_image) * sizeof(float) + 1);
  char *obuf = o_view ? NULL : malloc((size_t)(nb * o_image) * nrt_dtype_size(o->dtype) + 1);
  if (!z || (!o_view && !obuf)) {
    free(wown), free(z), free(obuf);
    return oom(p, "the depth-folded image gradient");
  }
  fp.role = RT_CONV3D_INPUT_GRAD;
  fp.bias = NULL; /* added by the depth sum */
  nrt_status s = NRT_SUCCESS;
  for (int64_t n0 = 0; n0 < N && !s; n0 += nb) {
    int64_t cnt = min64(nb, N - n0);
    int64_t os[4] = {cnt * OD, K, OH, OW}, ost[4] = {o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
    nrt_tensor_view o2;
    if (o_view) {
      o2 = view_of(at(o, n0 * o->strides[0]), o->dtype, 4, os, ost);
    } else {
      int64_t sh5[5] = {cnt, OD, K, OH, OW}, ds[5] = {o_image, K * OH * OW, OH * OW, OW, 1};
      int64_t ss[5] = {o->strides[0], o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
      nrt_tensor_view dst = view_of(obuf, o->dtype, 5, sh5, ds);
      nrt_tensor_view src = view_of(at(o, n0 * o->strides[0]), o->dtype, 5, sh5, ss);
      fold_copy(&dst, &src);
      int64_t dst4[4] = {K * OH * OW, OH * OW, OW, 1};
      o2 = view_of(obuf, o->dtype, 4, os, dst4);
    }
    int64_t zs[4] = {cnt * OD, C * kd, H, W}, zst[4] = {C * kd * H * W, H * W, W, 1};
    nrt_tensor_view z2 = view_of(z, NRT_FLOAT32, 4, zs, zst);
    s = run_2d(&fp, &z2, &o2, &w2);
    if (s) break;
    depth_sum ds = {p, z, n0};
    if (im->strides[1] == 1 && im->strides[4] != 1)
      rt_parallel_for(cnt * ID, pl_grain(C * H * W * kd), depth_sum_rows, &ds);
    else
      rt_parallel_for(cnt * C * ID, pl_grain(H * W * kd), depth_sum_planes, &ds);
  }
  free(z), free(obuf), free(wown);
  return s;
}

/* Folded elements a weight gradient copies per output depth of an image:
 * the image unless it is a view, grad_output unless it has one (n, depth)
 * stride and W innermost. */
static int64_t wgrad_per_od(const rt_conv3d_problem *p, int *x_view, int *o_view) {
  const nrt_tensor_view *im = &p->img, *o = &p->out;
  int64_t OD = o->shape[2];
  *x_view = p->k[0] == 1 && p->p[0] == 0 && im->strides[0] == OD * p->s[0] * im->strides[2];
  *o_view = o->strides[0] == OD * o->strides[2] && o->strides[4] == 1;
  return (*x_view ? 0 : im->shape[1] * p->k[0] * im->shape[3] * im->shape[4]) +
         (*o_view ? 0 : o->shape[1] * o->shape[3] * o->shape[4]);
}

/* The whole batch in one 2-d weight gradient while its copies fit
 * FOLD_WGRAD_ELEMS; else pieces of FOLD_CHUNK_ELEMS (float32 only: their
 * sums are added in piece order; bfloat16 would round each). */
static int wgrad_in_pieces(const rt_conv3d_problem *p, int64_t *per_od) {
  int xv, ov;
  *per_od = wgrad_per_od(p, &xv, &ov);
  return p->img.shape[0] * p->out.shape[2] * *per_od > budget(FOLD_WGRAD_ELEMS);
}

static nrt_status fold_weight_grad(const rt_conv3d_problem *p) {
  const nrt_tensor_view *im = &p->img, *o = &p->out, *w = &p->w;
  int64_t N = im->shape[0], C = im->shape[1], H = im->shape[3], W = im->shape[4];
  int64_t K = o->shape[1], OD = o->shape[2], OH = o->shape[3], OW = o->shape[4], kd = p->k[0];
  int64_t cg = w->shape[1], kh = w->shape[3], kw = w->shape[4], wn = K * cg * kd * kh * kw;
  int64_t xe = C * kd * H * W, per_od, nb = N, odc = OD;
  size_t es = nrt_dtype_size(im->dtype);
  int x_view, o_view;
  wgrad_per_od(p, &x_view, &o_view);
  int pieces = wgrad_in_pieces(p, &per_od);
  if (pieces) plan_pieces(N, OD, per_od, budget(FOLD_CHUNK_ELEMS), 1, &nb, &odc);
  int w_view = rt_view_is_contiguous(w);
  char *buf = malloc((size_t)(nb * odc * per_od) * es + 1), *wbuf = w_view ? NULL : malloc((size_t)wn * es + 1);
  float *part = pieces ? malloc((size_t)wn * sizeof(float) + 1) : NULL;
  if (!buf || (!w_view && !wbuf) || (pieces && !part)) {
    free(buf), free(wbuf), free(part);
    return oom(p, "the depth-folded operands");
  }
  char *acc = w_view ? w->data : wbuf, *obuf = buf + (size_t)(x_view ? 0 : nb * odc * xe) * es;
  int64_t ws[4] = {K, cg * kd, kh, kw}, wst[4] = {cg * kd * kh * kw, kh * kw, kw, 1};
  nrt_status s = NRT_SUCCESS;
  piece pc = {0, 0, 0, 0};
  for (int first = 1; !s && next_piece(&pc, N, OD, nb, odc); first = 0) {
    int64_t rows = pc.nb * pc.odc, xs[4] = {rows, C * kd, H, W}, os[4] = {rows, K, OH, OW};
    nrt_tensor_view x2, o2;
    if (x_view) {
      int64_t xst[4] = {p->s[0] * im->strides[2], im->strides[1], im->strides[3], im->strides[4]};
      x2 = view_of(at(im, pc.n0 * im->strides[0] + pc.od0 * p->s[0] * im->strides[2]), im->dtype, 4, xs, xst);
    } else {
      int64_t xst[4] = {xe, H * W, W, 1};
      fold_image(p, &pc, buf);
      x2 = view_of(buf, im->dtype, 4, xs, xst);
    }
    const char *o0 = at(o, pc.n0 * o->strides[0] + pc.od0 * o->strides[2]);
    if (o_view) {
      int64_t ost[4] = {o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
      o2 = view_of((void *)o0, o->dtype, 4, os, ost);
    } else {
      /* [n][od][k] planes: grad_output with its channel and depth dims swapped */
      int64_t sh5[5] = {pc.nb, pc.odc, K, OH, OW}, ds[5] = {pc.odc * K * OH * OW, K * OH * OW, OH * OW, OW, 1};
      int64_t ss[5] = {o->strides[0], o->strides[2], o->strides[1], o->strides[3], o->strides[4]};
      nrt_tensor_view dst = view_of(obuf, o->dtype, 5, sh5, ds), src = view_of((void *)o0, o->dtype, 5, sh5, ss);
      fold_copy(&dst, &src);
      int64_t ost[4] = {K * OH * OW, OH * OW, OW, 1};
      o2 = view_of(obuf, o->dtype, 4, os, ost);
    }
    nrt_tensor_view w2 = view_of(first ? (void *)acc : (void *)part, w->dtype, 4, ws, wst);
    s = run_2d(p, &w2, &x2, &o2);
    if (!s && !first) /* float32 (wgrad_in_pieces) */
      for (int64_t i = 0; i < wn; i++) ((float *)acc)[i] += part[i];
  }
  if (!s && !w_view) {
    int64_t ds[5] = {cg * kd * kh * kw, kd * kh * kw, kh * kw, kw, 1};
    nrt_tensor_view src = view_of(wbuf, w->dtype, 5, w->shape, ds);
    rt_copy_view(w, &src);
  }
  free(buf), free(wbuf), free(part);
  return s;
}

/* A pointwise convolution (1x1x1 taps, stride 1, no padding) mixes no
 * positions, so depth merges into height when both sides' (D, H) are
 * dense: one 2-d convolution of [N, C, D * H, W] views, no copies. */
static int pointwise(const rt_conv3d_problem *p) {
  int ok = 1;
  for (int d = 0; d < 3; d++)
    ok &= p->k[d] == 1 && p->s[d] == 1 && p->p[d] == 0 && p->img.shape[2 + d] == p->out.shape[2 + d];
  return ok && p->img.strides[2] == p->img.shape[3] * p->img.strides[3] &&
         p->out.strides[2] == p->out.shape[3] * p->out.strides[3];
}

static nrt_tensor_view depth_into_height(const nrt_tensor_view *v) {
  int64_t sh[4] = {v->shape[0], v->shape[1], v->shape[2] * v->shape[3], v->shape[4]};
  int64_t st[4] = {v->strides[0], v->strides[1], v->strides[3], v->strides[4]};
  return view_of(v->data, v->dtype, 4, sh, st);
}

static nrt_status fold_pointwise(const rt_conv3d_problem *p) {
  nrt_tensor_view im = depth_into_height(&p->img), o = depth_into_height(&p->out), w = p->w;
  w.ndim = 4;
  w.shape[2] = w.shape[3], w.shape[3] = w.shape[4];
  w.strides[2] = w.strides[3], w.strides[3] = w.strides[4];
  if (p->role == RT_CONV3D_FORWARD) return run_2d(p, &o, &im, &w);
  if (p->role == RT_CONV3D_INPUT_GRAD) return run_2d(p, &im, &o, &w);
  return run_2d(p, &w, &im, &o);
}

int rt_conv3d_fold_usable(const rt_conv3d_problem *p) {
  nrt_dtype t = p->img.dtype;
  if (t != NRT_FLOAT32 && t != NRT_BFLOAT16) return 0;
  if (nrt_view_numel(&p->img) == 0 || nrt_view_numel(&p->out) == 0 || nrt_view_numel(&p->w) == 0) return 0;
  int64_t cg = p->w.shape[1], kg = p->out.shape[1] / p->groups, per_od;
  if (cg == 1 && kg == 1) return 0; /* depthwise: the reference path's per-channel products */
  if (p->k[0] > RT_FOLD_MAX_KD) return 0;
  /* a bfloat16 weight gradient too large for one call: the reference path rounds once */
  if (p->role == RT_CONV3D_WEIGHT_GRAD && t == NRT_BFLOAT16 && !pointwise(p) && wgrad_in_pieces(p, &per_od))
    return 0;
  return 1;
}

nrt_status rt_conv3d_fold(const rt_conv3d_problem *p) {
  rt_metric_add(NRT_METRIC_CONV3D_FOLD, 1);
  if (pointwise(p)) return fold_pointwise(p);
  int o_view;
  switch (p->role) {
    case RT_CONV3D_FORWARD: return fold_forward(p);
    case RT_CONV3D_INPUT_GRAD:
      return p->img.dtype == NRT_FLOAT32 && sum_per_image(p, &o_view) <= budget(FOLD_CHUNK_ELEMS)
                 ? fold_input_grad_sum(p)
                 : fold_input_grad(p);
    default: return fold_weight_grad(p);
  }
}
