/* GRID_SAMPLE and its backward against properties that define them.
 *
 * - An identity grid (align_corners, the pixel centres) reproduces the
 *   image in every mode, 2-d and 3-d.
 * - The sample is linear in the image, so grad_in is its adjoint:
 *   <grad_in, v> = <grad_out, sample(v)> for any image v.
 * - grad_grid is the derivative of <grad_out, sample> along each grid
 *   value: checked against central differences in float64, away from the
 *   pixel lattice where the sample has kinks.
 * - Bad operands fail cleanly.
 * Operands are host memory (nrt_op_execute_host).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) * 0x1p-53;
}

static nrt_tensor_view dense(double *data, int ndim, const int64_t *shape) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = NRT_FLOAT64;
  v.ndim = ndim;
  int64_t step = 1;
  for (int d = ndim - 1; d >= 0; d--) v.shape[d] = shape[d], v.strides[d] = step, step *= shape[d];
  return v;
}

static int64_t count(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static nrt_status run(nrt_op_code code, int nout, int nops, const nrt_tensor_view *ops, int mode, int padding,
                      int align) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = code;
  op.compute_dtype = NRT_FLOAT64;
  op.num_outputs = nout;
  op.num_operands = nops;
  for (int k = 0; k < nops; k++) op.operands[k] = ops[k];
  op.num_scalars = 3;
  op.scalars[0].i = mode, op.scalars[1].i = padding, op.scalars[2].i = align;
  return nrt_op_execute_host(&op, (1u << nops) - 1);
}

/* A geometry: image [N, C, (D,) H, W] and grid [N, (Do,) Ho, Wo, dims]. */
typedef struct geometry {
  int dims;
  int64_t image[5], grid[5], out[5];
} geometry;

static geometry make_geometry(int dims, int64_t d, int64_t h, int64_t w, int64_t od, int64_t oh, int64_t ow) {
  geometry g = {.dims = dims};
  int64_t in_sp[3] = {d, h, w}, out_sp[3] = {od, oh, ow};
  g.image[0] = g.out[0] = g.grid[0] = 2;
  g.image[1] = g.out[1] = 3;
  for (int k = 0; k < dims; k++) {
    g.image[2 + k] = in_sp[3 - dims + k];
    g.out[2 + k] = g.grid[1 + k] = out_sp[3 - dims + k];
  }
  g.grid[dims + 1] = dims;
  return g;
}

static void test_identity_grid_reproduces_the_image(void) {
  for (int dims = 2; dims <= 3; dims++)
    for (int mode = 0; mode < (dims == 2 ? 3 : 2); mode++) {
      geometry g = make_geometry(dims, 3, 4, 5, 3, 4, 5);
      int64_t ni = count(dims + 2, g.image), ng = count(dims + 2, g.grid);
      double *x = malloc(sizeof(double) * (size_t)ni), *out = calloc((size_t)ni, sizeof(double));
      double *grid = malloc(sizeof(double) * (size_t)ng);
      for (int64_t i = 0; i < ni; i++) x[i] = uniform() - 0.5;
      /* grid[n, (z,) y, x] = pixel centre (x, y, z) in [-1, 1] */
      const int64_t W = g.image[dims + 1], H = g.image[dims], D = dims == 3 ? g.image[2] : 1;
      for (int64_t p = 0; p < ng / dims; p++) {
        int64_t xi = p % W, yi = p / W % H, zi = p / (W * H) % D;
        grid[p * dims] = 2.0 * (double)xi / (double)(W - 1) - 1;
        grid[p * dims + 1] = 2.0 * (double)yi / (double)(H - 1) - 1;
        if (dims == 3) grid[p * dims + 2] = 2.0 * (double)zi / (double)(D - 1) - 1;
      }
      nrt_tensor_view ops[3] = {dense(out, dims + 2, g.out), dense(x, dims + 2, g.image), dense(grid, dims + 2, g.grid)};
      for (int padding = 0; padding < 3; padding++) {
        CHECK_OK(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, mode, padding, 1));
        double worst = 0;
        for (int64_t i = 0; i < ni; i++) worst = fmax(worst, fabs(out[i] - x[i]));
        if (worst > 1e-12) fprintf(stderr, "  dims %d mode %d padding %d: off by %g\n", dims, mode, padding, worst);
        CHECK(worst <= 1e-12);
      }
      free(x), free(out), free(grid);
    }
}

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static void test_gradients_are_the_adjoint_and_the_derivative(void) {
  for (int dims = 2; dims <= 3; dims++)
    for (int mode = 0; mode < (dims == 2 ? 3 : 2); mode++)
      for (int padding = 0; padding < 3; padding++)
        for (int align = 0; align < 2; align++) {
          geometry g = make_geometry(dims, 3, 4, 5, 2, 3, 4);
          int64_t ni = count(dims + 2, g.image), ng = count(dims + 2, g.grid), no = count(dims + 2, g.out);
          double *x = malloc(sizeof(double) * (size_t)ni), *v = malloc(sizeof(double) * (size_t)ni);
          double *grid = malloc(sizeof(double) * (size_t)ng), *gout = malloc(sizeof(double) * (size_t)no);
          double *out = malloc(sizeof(double) * (size_t)no), *gin = malloc(sizeof(double) * (size_t)ni);
          double *ggrid = malloc(sizeof(double) * (size_t)ng);
          for (int64_t i = 0; i < ni; i++) x[i] = uniform() - 0.5, v[i] = uniform() - 0.5;
          for (int64_t i = 0; i < no; i++) gout[i] = uniform() - 0.5;
          /* values up to 1.4 (outside too); nudged off the lattice's kinks */
          for (int64_t i = 0; i < ng; i++) grid[i] = 2.8 * uniform() - 1.4;
          nrt_tensor_view vin = dense(x, dims + 2, g.image), vgrid = dense(grid, dims + 2, g.grid);
          nrt_tensor_view vout = dense(out, dims + 2, g.out), vgout = dense(gout, dims + 2, g.out);
          nrt_tensor_view vgin = dense(gin, dims + 2, g.image), vggrid = dense(ggrid, dims + 2, g.grid);
          CHECK_OK(run(NRT_OP_GRID_SAMPLE_BACKWARD, 2, 5, (nrt_tensor_view[]){vgin, vggrid, vgout, vin, vgrid}, mode,
                       padding, align));
          /* adjoint: <gin, v> = <gout, sample(v)> */
          nrt_tensor_view vv = dense(v, dims + 2, g.image);
          CHECK_OK(run(NRT_OP_GRID_SAMPLE, 1, 3, (nrt_tensor_view[]){vout, vv, vgrid}, mode, padding, align));
          double lhs = dot(gin, v, ni), rhs = dot(gout, out, no);
          if (!(fabs(lhs - rhs) <= 1e-12 * (1 + fabs(rhs))))
            fprintf(stderr, "  adjoint dims %d mode %d pad %d align %d: %.17g vs %.17g\n", dims, mode, padding, align,
                    lhs, rhs);
          CHECK(fabs(lhs - rhs) <= 1e-12 * (1 + fabs(rhs)));
          /* derivative along each grid value (nearest: zero) */
          const double h = 1e-6;
          int bad = 0;
          for (int64_t i = 0; i < ng; i++) {
            double keep = grid[i], f[2];
            for (int s = 0; s < 2; s++) {
              grid[i] = keep + (s ? h : -h);
              CHECK_OK(run(NRT_OP_GRID_SAMPLE, 1, 3, (nrt_tensor_view[]){vout, vin, vgrid}, mode, padding, align));
              f[s] = dot(gout, out, no);
            }
            grid[i] = keep;
            double fd = (f[1] - f[0]) / (2 * h), want = mode == 1 ? 0.0 : fd;
            /* a kink inside [keep - h, keep + h] makes the difference a blend: skip those */
            if (mode != 1 && fabs(fd - ggrid[i]) > 1e-5 * (1 + fabs(fd))) {
              double f1[2];
              for (int s = 0; s < 2; s++) {
                grid[i] = keep + (s ? h / 8 : -h / 8);
                CHECK_OK(run(NRT_OP_GRID_SAMPLE, 1, 3, (nrt_tensor_view[]){vout, vin, vgrid}, mode, padding, align));
                f1[s] = dot(gout, out, no);
              }
              grid[i] = keep;
              double fd8 = (f1[1] - f1[0]) / (2 * h / 8);
              if (fabs(fd8 - fd) < 1e-6 * (1 + fabs(fd))) bad++; /* smooth there, and still off */
              continue;
            }
            if (fabs(want - ggrid[i]) > 1e-5 * (1 + fabs(want))) bad++;
          }
          if (bad)
            fprintf(stderr, "  grad_grid dims %d mode %d pad %d align %d: %d of %lld off\n", dims, mode, padding,
                    align, bad, (long long)ng);
          CHECK(bad == 0);
          free(x), free(v), free(grid), free(gout), free(out), free(gin), free(ggrid);
        }
}

static void test_bad_operands_fail_cleanly(void) {
  geometry g = make_geometry(2, 1, 4, 5, 1, 3, 4);
  double x[2 * 3 * 4 * 5] = {0}, grid[2 * 3 * 4 * 2] = {0}, out[2 * 3 * 3 * 4];
  nrt_tensor_view ops[3] = {dense(out, 4, g.out), dense(x, 4, g.image), dense(grid, 4, g.grid)};
  CHECK_OK(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 0, 0));
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 3, 0, 0), NRT_ERROR_INVALID_ARGUMENT); /* mode */
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 3, 0), NRT_ERROR_INVALID_ARGUMENT); /* padding */
  ops[2].shape[3] = 3;                                                                   /* 3 coordinates in 2-d */
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  ops[2].shape[3] = 2;
  ops[0].shape[2] = 2; /* output not the grid's size */
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  ops[0].shape[2] = 3;
  ops[1].dtype = NRT_INT32;
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
  ops[1].dtype = NRT_FLOAT64;
  ops[2].dtype = NRT_FLOAT32;
  CHECK_STATUS(run(NRT_OP_GRID_SAMPLE, 1, 3, ops, 0, 0, 0), NRT_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  RUN(test_identity_grid_reproduces_the_image);
  RUN(test_gradients_are_the_adjoint_and_the_derivative);
  RUN(test_bad_operands_fail_cleanly);
  return CHECK_MAIN_RESULT();
}
