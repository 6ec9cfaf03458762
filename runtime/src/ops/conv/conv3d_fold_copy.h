/* The transposing copies of the depth folding (conv3d_fold_copy.c): a
 * channels_last_3d row of W pixels, each a run of C channels (pixel stride
 * ssw elements, channels adjacent), into C planar rows of W elements (row
 * stride dsc), for the 2-d kernels' planar images. */
#ifndef NEURONRT_OPS_CONV_CONV3D_FOLD_COPY_H
#define NEURONRT_OPS_CONV_CONV3D_FOLD_COPY_H

#include <stddef.h>
#include <stdint.h>

/* dst[c * dsc + w] = src[w * ssw + c] for c < C, w < W; es is 2 or 4
 * (bytes per element: the bits are moved, not converted). */
void rt_fold_transpose_row(void *dst, int64_t dsc, const void *src, int64_t ssw, int64_t C, int64_t W, size_t es);

#endif
