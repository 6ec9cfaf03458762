/* Sampling an image at arbitrary points (see op_list.h): torch's
 * grid_sampler_2d and grid_sampler_3d.
 *
 * Images are [N, C, H, W] (2-d) or [N, C, D, H, W] (3-d) views with any
 * strides; the grid is [N, Ho, Wo, 2] or [N, Do, Ho, Wo, 3] of (x, y[, z])
 * coordinates in [-1, 1] (x along W). float32 or float64, one dtype for
 * every operand; float32 computes in float, as the CPU does.
 *   GRID_SAMPLE [out [N, C, (Do,) Ho, Wo], in, grid]
 *               scalars [mode (0 bilinear, 1 nearest, 2 bicubic: 2-d only),
 *               padding (0 zeros, 1 border, 2 reflection), align_corners]
 *               A grid value becomes a source coordinate by PyTorch's
 *               unnormalisation ((v + 1) / 2 (size - 1) with align_corners,
 *               else ((v + 1) size - 1) / 2) and padding (border clips,
 *               reflection mirrors then clips; NaN clips to 0, an infinity
 *               reflects to NaN and so to 0; under zeros padding a
 *               non-finite coordinate reads nothing), as PyTorch's CUDA
 *               kernel does. Bilinear and trilinear weight the 4 or 8 corners,
 *               nearest rounds half to even, bicubic takes 4 x 4 taps (A =
 *               -0.75), each padded on its own; taps outside the image read 0.
 *   GRID_SAMPLE_BACKWARD [grad_in?, grad_grid?, grad_out, in, grid]
 *               the same scalars; an absent output (empty view) is not
 *               computed. grad_in is written in full.
 */
#ifndef NEURONRT_OPS_SAMPLING_H
#define NEURONRT_OPS_SAMPLING_H

#define NRT_SAMPLING_OPS(X)  \
  X(GRID_SAMPLE, grid_sample) \
  X(GRID_SAMPLE_BACKWARD, grid_sample_backward)

#endif
