/* The gradient scaler's kernels against a reference twin.
 *
 * AMP_UNSCALE: the twin multiplies each (dtype-rounded) element by
 * inv_scale in the compute dtype and tests finiteness with isfinite, one
 * element at a time. Cases: every floating dtype, contiguous and strided
 * (every third element), sizes below and above the parallel grain, with an
 * infinity or NaN placed at the start, the middle or the end (and none),
 * inv_scale 1 (check only) and found_inf already set. AMP_UPDATE_SCALE:
 * backoff, growth at the interval, growth that would overflow, counting.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "ops/engine/scalar_types.h"
#include "vector_buf.h"

/* The twin: one element of dtype d, unscaled; sets *bad when not finite. */
static void twin_element(nrt_dtype d, char *p, float inv, int *bad) {
  switch (d) {
    case NRT_FLOAT32: {
      float v = *(float *)p;
      if (!isfinite(v)) *bad = 1;
      if (inv != 1.0f) *(float *)p = v * inv;
      break;
    }
    case NRT_FLOAT64: {
      double v = *(double *)p;
      if (!isfinite(v)) *bad = 1;
      if (inv != 1.0f) *(double *)p = v * (double)inv;
      break;
    }
    case NRT_BFLOAT16: {
      float v = rt_bfloat16_to_float(*(uint16_t *)p);
      if (!isfinite(v)) *bad = 1;
      if (inv != 1.0f) *(uint16_t *)p = rt_bfloat16_from_float(v * inv);
      break;
    }
    default: {
      float v = rt_half_to_float(*(uint16_t *)p);
      if (!isfinite(v)) *bad = 1;
      if (inv != 1.0f) *(uint16_t *)p = rt_half_from_float(v * inv);
      break;
    }
  }
}

static uint64_t rng_state = 7;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static const nrt_dtype dtypes[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};

/* where: -1 none, else the index of the non-finite element; special: its value. */
static void unscale_case(nrt_dtype d, int64_t n, int stride, int64_t where, double special,
                         float inv, float found_before) {
  buf g = make(d, n, stride), ref = make(d, n, stride), found = make(NRT_FLOAT32, 1, 1),
      scale = make(NRT_FLOAT32, 1, 1);
  for (int64_t i = 0; i < n; i++) put(&g, i, (urand() - 0.5) * 3e4);
  if (where >= 0) put(&g, where, special);
  memcpy(nrt_device_to_host(ref.dev), nrt_device_to_host(g.dev),
         (size_t)(n * stride) * nrt_dtype_size(d));
  put(&found, 0, found_before);
  put(&scale, 0, inv);
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_AMP_UNSCALE;
  op.num_outputs = 2;
  op.num_operands = 3;
  op.operands[0] = g.view, op.operands[1] = found.view, op.operands[2] = scale.view;
  CHECK_OK(nrt_op_execute(&op));
  int bad = found_before != 0;
  for (int64_t i = 0; i < n; i++) twin_element(d, at(&ref, i), inv, &bad);
  /* Bitwise, the elements between the strided ones included. */
  int same = memcmp(nrt_device_to_host(g.dev), nrt_device_to_host(ref.dev),
                    (size_t)(n * stride) * nrt_dtype_size(d)) == 0;
  if (!same || get(&found, 0) != (bad ? 1.0 : found_before))
    fprintf(stderr, "  unscale dtype %s n %lld stride %d where %lld inv %g: same %d found %g\n",
            nrt_dtype_name(d), (long long)n, stride, (long long)where, inv, same, get(&found, 0));
  CHECK(same);
  CHECK(get(&found, 0) == (bad ? 1.0 : found_before));
  nrt_free(g.dev), nrt_free(ref.dev), nrt_free(found.dev), nrt_free(scale.dev);
}

static void test_unscale_matches_twin(void) {
  const int64_t sizes[] = {1, 37, 100003};
  for (int t = 0; t < 4; t++)
    for (int s = 0; s < 3; s++)
      for (int stride = 1; stride <= 3; stride += 2) {
        int64_t n = sizes[s];
        unscale_case(dtypes[t], n, stride, -1, 0, 0.125f, 0);
        unscale_case(dtypes[t], n, stride, -1, 0, 1.0f / 3.0f, 0);
        unscale_case(dtypes[t], n, stride, 0, INFINITY, 0.5f, 0);
        unscale_case(dtypes[t], n, stride, n / 2, -INFINITY, 0.25f, 0);
        unscale_case(dtypes[t], n, stride, n - 1, NAN, 0.25f, 0);
        unscale_case(dtypes[t], n, stride, n - 1, NAN, 1.0f, 0);  /* check only */
        unscale_case(dtypes[t], n, stride, -1, 0, 1.0f, 0);
        unscale_case(dtypes[t], n, stride, -1, 0, 0.5f, 1.0f);   /* found_inf stays set */
      }
}

/* One AMP_UPDATE_SCALE: returns the new scale and tracker. */
static void update(float *scale, int32_t *tracker, float found_inf, double growth, double backoff,
                   int64_t interval) {
  buf s = make(NRT_FLOAT32, 1, 1), t = make(NRT_INT32, 1, 1), f = make(NRT_FLOAT32, 1, 1);
  put(&s, 0, *scale), put(&t, 0, *tracker), put(&f, 0, found_inf);
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_AMP_UPDATE_SCALE;
  op.num_outputs = 2;
  op.num_operands = 3;
  op.operands[0] = s.view, op.operands[1] = t.view, op.operands[2] = f.view;
  op.num_scalars = 3;
  op.scalars[0].is_float = 1, op.scalars[0].f = growth;
  op.scalars[1].is_float = 1, op.scalars[1].f = backoff;
  op.scalars[2].i = interval;
  CHECK_OK(nrt_op_execute(&op));
  *scale = (float)get(&s, 0);
  *tracker = (int32_t)get(&t, 0);
  nrt_free(s.dev), nrt_free(t.dev), nrt_free(f.dev);
}

static void test_update_scale(void) {
  float s = 1024;
  int32_t t = 5;
  update(&s, &t, 1, 2, 0.5, 3); /* overflow: back off, restart */
  CHECK(s == 512 && t == 0);
  update(&s, &t, 0, 2, 0.5, 3);
  CHECK(s == 512 && t == 1);
  update(&s, &t, 0, 2, 0.5, 3);
  CHECK(s == 512 && t == 2);
  update(&s, &t, 0, 2, 0.5, 3); /* the third success grows the scale */
  CHECK(s == 1024 && t == 0);
  update(&s, &t, NAN, 2, 0.5, 3); /* NaN counts as found */
  CHECK(s == 512 && t == 0);
  s = 3e38f, t = 0;
  update(&s, &t, 0, 2, 0.5, 1); /* growth to infinity is refused, the tracker restarts */
  CHECK(s == 3e38f && t == 0);
  s = 1, t = 0;
  update(&s, &t, 0, 1.5, 0.3, 1);
  CHECK(s == 1.5f && t == 0);
  update(&s, &t, 1, 1.5, 0.3, 1);
  CHECK(s == (float)(1.5 * 0.3) && t == 0);
}

static void test_bad_arguments(void) {
  buf g = make(NRT_INT32, 4, 1), f = make(NRT_FLOAT32, 1, 1), two = make(NRT_FLOAT32, 2, 1),
      d = make(NRT_FLOAT64, 1, 1);
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_AMP_UNSCALE;
  op.num_outputs = 2;
  op.num_operands = 3;
  op.operands[0] = g.view, op.operands[1] = f.view, op.operands[2] = f.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_UNSUPPORTED); /* integer gradient */
  op.operands[0] = two.view, op.operands[2] = two.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* inv_scale of two elements */
  op.operands[2] = d.view;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* float64 inv_scale */
  op.code = NRT_OP_AMP_UPDATE_SCALE;
  op.operands[0] = f.view, op.operands[1] = f.view, op.operands[2] = f.view;
  op.num_scalars = 3;
  CHECK_STATUS(nrt_op_execute(&op), NRT_ERROR_INVALID_ARGUMENT); /* float growth tracker */
  nrt_free(g.dev), nrt_free(f.dev), nrt_free(two.dev), nrt_free(d.dev);
}

int main(void) {
  RUN(test_unscale_matches_twin);
  RUN(test_update_scale);
  RUN(test_bad_arguments);
  return CHECK_MAIN_RESULT();
}
