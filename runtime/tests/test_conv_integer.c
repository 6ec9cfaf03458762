/* Integer convolution (ops/conv/conv_integer.c) against its plain twin
 * written here: the definition, every tap of every output position
 * (forward) and the same sum scattered to the image (input gradient, a
 * transposed convolution's forward), summed in wrapping 64-bit arithmetic
 * and truncated to the dtype, which is what PyTorch's CPU computes. Values
 * span each dtype's whole range, so sums wrap. Operands are NCDHW or
 * channels-last (by strides), with bias, groups, stride, padding and
 * dilation, through CONV3D and, for depth-1 cases, CONV2D with 4-d views;
 * each case runs the kernels the op chooses (columns when a group has
 * several output channels) and the direct loops, their reference twin.
 * Also checks that bad descriptors fail cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "tensor5d.h"
#include "ops/conv/conv_integer.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* The value at p, sign-extended (uint8 zero-extended) to 64 bits. */
ORACLE_CODE static uint64_t get(nrt_dtype t, const void *p) {
  switch (t) {
    case NRT_UINT8: return *(const uint8_t *)p;
    case NRT_INT8: return (uint64_t)(int64_t) * (const int8_t *)p;
    case NRT_INT16: return (uint64_t)(int64_t) * (const int16_t *)p;
    case NRT_INT32: return (uint64_t)(int64_t) * (const int32_t *)p;
    default: return (uint64_t) * (const int64_t *)p;
  }
}

/* Stores v truncated to the dtype (memcpy of the low bytes: little endian). */
ORACLE_CODE static void set(nrt_dtype t, void *p, uint64_t v) { memcpy(p, &v, nrt_dtype_size(t)); }

/* v truncated to the dtype, as get reads it back. */
ORACLE_CODE static uint64_t wrap(nrt_dtype t, uint64_t v) {
  char buf[8];
  set(t, buf, v);
  return get(t, buf);
}

static tensor make_vector(nrt_dtype t, int64_t n) {
  int64_t s[5] = {n, 1, 1, 1, 1};
  tensor x = make(t, s, 0);
  x.v.ndim = 1;
  return x;
}

/* A depth-1 5-d view as the 4-d [N, C, H, W] one. */
static nrt_tensor_view drop_depth(nrt_tensor_view v) {
  v.ndim = 4;
  v.shape[2] = v.shape[3], v.strides[2] = v.strides[3];
  v.shape[3] = v.shape[4], v.strides[3] = v.strides[4];
  return v;
}

ORACLE_CODE static void *at5(const tensor *x, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  int64_t i[5] = {a, b, c, d, e}, off = 0;
  for (int k = 0; k < x->v.ndim; k++) off += i[k] * x->v.strides[k];
  return (char *)nrt_device_to_host(x->v.data) + off * (int64_t)nrt_dtype_size(x->v.dtype);
}

ORACLE_CODE static uint64_t val(const tensor *x, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  return get(x->v.dtype, at5(x, a, b, c, d, e));
}

ORACLE_CODE static void fill(tensor *x) {
  for (int64_t k = 0; k < x->numel; k++) {
    int64_t i[5] = {0}, r = k;
    for (int d = x->v.ndim - 1; d >= 0; d--) i[d] = r % x->v.shape[d], r /= x->v.shape[d];
    set(x->v.dtype, at5(x, i[0], i[1], i[2], i[3], i[4]), rnd());
  }
}

/* Every element of x (5-d) against want (row-major, wrapping sums). */
ORACLE_CODE static int equal_to(const tensor *x, const uint64_t *want) {
  for (int64_t k = 0; k < x->numel; k++) {
    int64_t i[5], r = k;
    for (int d = 4; d >= 0; d--) i[d] = r % x->v.shape[d], r /= x->v.shape[d];
    uint64_t got = val(x, i[0], i[1], i[2], i[3], i[4]), w = wrap(x->v.dtype, want[k]);
    if (got != w) {
      fprintf(stderr, "  %s at %lld: got %llx want %llx\n", nrt_dtype_name(x->v.dtype), (long long)k,
              (unsigned long long)got, (unsigned long long)w);
      return 0;
    }
  }
  return 1;
}

static nrt_op new_op(nrt_op_code code) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.num_outputs = 1;
  return op;
}

typedef struct ci_case {
  int64_t n, c, k, groups;
  int64_t in[3], ker[3], s[3], p[3], dl[3];
} ci_case;

static int64_t pack(const int64_t v[3]) { return v[0] << 42 | v[1] << 21 | v[2]; }

/* The op with its operands (4-d views for CONV2D*) and scalars. */
static nrt_op make_op(nrt_op_code code, const ci_case *g, const tensor *const *ops, int count) {
  nrt_op op = new_op(code);
  int two_d = code == NRT_OP_CONV2D || code == NRT_OP_CONV2D_INPUT_GRAD;
  for (int i = 0; i < count; i++)
    op.operands[op.num_operands++] = two_d && i < 3 ? drop_depth(ops[i]->v) : ops[i]->v;
  if (two_d) {
    int64_t sc[7] = {g->s[1], g->s[2], g->p[1], g->p[2], g->dl[1], g->dl[2], g->groups};
    for (int i = 0; i < 7; i++) op.scalars[i].i = sc[i];
    op.num_scalars = 7;
  } else {
    op.scalars[0].i = pack(g->s);
    op.scalars[1].i = pack(g->p);
    op.scalars[2].i = pack(g->dl);
    op.scalars[3].i = g->groups;
    op.num_scalars = 4;
  }
  return op;
}

ORACLE_CODE static void check_case(const ci_case *g, nrt_dtype t, int cl, int with_bias, int two_d) {
  int64_t o[3];
  for (int d = 0; d < 3; d++) o[d] = (g->in[d] + 2 * g->p[d] - g->dl[d] * (g->ker[d] - 1) - 1) / g->s[d] + 1;
  int64_t cg = g->c / g->groups, kg = g->k / g->groups;
  int64_t xs[5] = {g->n, g->c, g->in[0], g->in[1], g->in[2]}, ys[5] = {g->n, g->k, o[0], o[1], o[2]};
  int64_t ws[5] = {g->k, cg, g->ker[0], g->ker[1], g->ker[2]};
  tensor x = make(t, xs, cl), y = make(t, ys, cl), gy = make(t, ys, !cl), gx = make(t, xs, cl);
  tensor w = make(t, ws, cl), b = make_vector(t, g->k), bx = make_vector(t, g->c);
  fill(&x), fill(&w), fill(&gy), fill(&b), fill(&bx);
  uint64_t *want_y = calloc((size_t)(y.numel + 1), sizeof(uint64_t));
  uint64_t *want_gx = calloc((size_t)(gx.numel + 1), sizeof(uint64_t));
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t k = 0; k < g->k; k++)
      for (int64_t od = 0; od < o[0]; od++)
        for (int64_t oh = 0; oh < o[1]; oh++)
          for (int64_t ow = 0; ow < o[2]; ow++)
            for (int64_t cl_ = 0; cl_ < cg; cl_++)
              for (int64_t a = 0; a < g->ker[0]; a++)
                for (int64_t bb = 0; bb < g->ker[1]; bb++)
                  for (int64_t e = 0; e < g->ker[2]; e++) {
                    int64_t c = k / kg * cg + cl_;
                    int64_t id = od * g->s[0] - g->p[0] + a * g->dl[0];
                    int64_t ih = oh * g->s[1] - g->p[1] + bb * g->dl[1];
                    int64_t iw = ow * g->s[2] - g->p[2] + e * g->dl[2];
                    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 || iw >= g->in[2]) continue;
                    uint64_t wv = val(&w, k, cl_, a, bb, e);
                    want_y[(((n * g->k + k) * o[0] + od) * o[1] + oh) * o[2] + ow] += val(&x, n, c, id, ih, iw) * wv;
                    want_gx[(((n * g->c + c) * g->in[0] + id) * g->in[1] + ih) * g->in[2] + iw] +=
                        val(&gy, n, k, od, oh, ow) * wv;
                  }
  if (with_bias) {
    int64_t op_ = o[0] * o[1] * o[2], ip = g->in[0] * g->in[1] * g->in[2];
    for (int64_t i = 0; i < y.numel; i++) want_y[i] += val(&b, i / op_ % g->k, 0, 0, 0, 0);
    for (int64_t i = 0; i < gx.numel; i++) want_gx[i] += val(&bx, i / ip % g->c, 0, 0, 0, 0);
  }
  const tensor *fwd[4] = {&y, &x, &w, &b}, *bwd[4] = {&gx, &gy, &w, &bx};
  nrt_op op = make_op(two_d ? NRT_OP_CONV2D : NRT_OP_CONV3D, g, fwd, with_bias ? 4 : 3);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(equal_to(&y, want_y));
  op = make_op(two_d ? NRT_OP_CONV2D_INPUT_GRAD : NRT_OP_CONV3D_INPUT_GRAD, g, bwd, with_bias ? 4 : 3);
  CHECK_OK(nrt_op_execute(&op));
  CHECK(equal_to(&gx, want_gx));
  if (!two_d) { /* the reference twin, called directly on host views */
    memset(nrt_device_to_host(y.v.data), 0, (size_t)y.numel * nrt_dtype_size(t));
    memset(nrt_device_to_host(gx.v.data), 0, (size_t)gx.numel * nrt_dtype_size(t));
    for (int role = 0; role < 2; role++) {
      rt_conv_int c = {.img = role ? gx.v : x.v, .out = role ? gy.v : y.v, .w = w.v, .groups = g->groups,
                       .input_grad = role, .reference = 1};
      nrt_tensor_view bias = role ? bx.v : b.v;
      nrt_tensor_view *views[4] = {&c.img, &c.out, &c.w, &bias};
      for (int i = 0; i < 4; i++) views[i]->data = nrt_device_to_host(views[i]->data);
      c.bias = with_bias ? &bias : NULL;
      for (int d = 0; d < 3; d++) c.s[d] = g->s[d], c.p[d] = g->p[d], c.dl[d] = g->dl[d];
      CHECK_OK(rt_conv_integer(&c, "reference"));
    }
    CHECK(equal_to(&y, want_y));
    CHECK(equal_to(&gx, want_gx));
  }
  free(want_y), free(want_gx);
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(gy.v.data), nrt_free(gx.v.data);
  nrt_free(w.v.data), nrt_free(b.v.data), nrt_free(bx.v.data);
}

static const ci_case cases[] = {
    /* n  c  k  groups  in            ker        stride     pad        dilation */
    {2, 3, 4, 1, {1, 6, 7}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}},
    {1, 4, 6, 2, {1, 9, 8}, {1, 3, 2}, {1, 2, 3}, {0, 2, 1}, {1, 2, 1}},
    {2, 4, 4, 4, {1, 5, 5}, {1, 3, 3}, {1, 1, 2}, {0, 1, 0}, {1, 1, 1}}, /* depthwise */
    {1, 5, 3, 1, {1, 4, 6}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, /* 1x1 */
    {1, 2, 2, 1, {1, 3, 3}, {1, 2, 2}, {1, 2, 2}, {0, 3, 3}, {1, 1, 1}}, /* padding past the window */
    {2, 3, 4, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
    {1, 4, 6, 2, {6, 5, 8}, {2, 3, 2}, {2, 1, 3}, {0, 2, 1}, {1, 2, 1}},
    {2, 4, 4, 4, {4, 4, 4}, {3, 1, 2}, {1, 2, 1}, {2, 0, 1}, {2, 1, 1}},
    /* several tiles of positions, register blocks of output channels and
     * blocks of image channels (27 taps: 3 channels per input-gradient task) */
    {1, 8, 9, 1, {4, 5, 20}, {3, 3, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}},
    {2, 6, 10, 2, {1, 13, 11}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}},
};

static void test_matches_wrapping_definition(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT8, NRT_INT16, NRT_INT32, NRT_INT64};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int ti = 0; ti < 5; ti++)
      for (int cl = 0; cl < 2; cl++) {
        int with_bias = (int)((i + (size_t)cl + (size_t)ti) % 2);
        check_case(&cases[i], types[ti], cl, with_bias, 0);
        if (cases[i].in[0] == 1 && cases[i].ker[0] == 1) check_case(&cases[i], types[ti], cl, with_bias, 1);
      }
}

static void test_bad_descriptors_fail_cleanly(void) {
  ci_case g = cases[5];
  int64_t xs[5] = {1, 3, 4, 4, 4}, ys[5] = {1, 4, 4, 4, 4}, ws[5] = {4, 3, 3, 3, 3}, ws2[5] = {4, 2, 3, 3, 3};
  tensor x = make(NRT_INT32, xs, 0), y = make(NRT_INT32, ys, 0), w = make(NRT_INT32, ws, 0);
  tensor w64 = make(NRT_INT64, ws, 0), w2 = make(NRT_INT32, ws2, 0), b = make_vector(NRT_INT32, 3);
  tensor x16 = make(NRT_UINT16, xs, 0), y16 = make(NRT_UINT16, ys, 0), w16 = make(NRT_UINT16, ws, 0);
  const tensor *mixed[3] = {&y, &x, &w64}, *short_w[3] = {&y, &x, &w2}, *bad_bias[4] = {&y, &x, &w, &b};
  const tensor *u16[3] = {&y16, &x16, &w16}, *wgrad[3] = {&w, &x, &y};
  nrt_op op = make_op(NRT_OP_CONV3D, &g, mixed, 3);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* int32 image, int64 weight */
  op = make_op(NRT_OP_CONV3D, &g, short_w, 3);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* 2 weight channels for 3 */
  op = make_op(NRT_OP_CONV3D, &g, bad_bias, 4);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* bias of 3 for 4 channels */
  op = make_op(NRT_OP_CONV3D_INPUT_GRAD, &g, u16, 3);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* uint16 */
  op = make_op(NRT_OP_CONV3D_WEIGHT_GRAD, &g, wgrad, 3);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* integers have no gradient */
  g.s[1] = 0;
  const tensor *ok[3] = {&y, &x, &w};
  op = make_op(NRT_OP_CONV2D, &g, ok, 3);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* stride 0 */
  op = make_op(NRT_OP_CONV3D, &g, ok, 2);
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* missing weight */
  nrt_free(x.v.data), nrt_free(y.v.data), nrt_free(w.v.data), nrt_free(w64.v.data), nrt_free(w2.v.data);
  nrt_free(b.v.data), nrt_free(x16.v.data), nrt_free(y16.v.data), nrt_free(w16.v.data);
}

int main(void) {
  RUN(test_matches_wrapping_definition);
  RUN(test_bad_descriptors_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
