/* Vision ops: pooling, upsampling and convolution (see op_list.h).
 *
 * Every image operand is a 4-d view [N, C, H, W] with any strides (NCHW,
 * channels_last, transposed or sliced); 1-d ops are the 2-d ones with H = 1.
 * Outputs are written in full (backward ops zero what nothing reaches).
 * Results do not depend on the number of kernel threads.
 *
 * Pooling. Floating dtypes accumulate in float32 (float64 for float64).
 *   MAX_POOL2D           [out, indices: int64, in]  out and in of one dtype
 *                        (any numeric dtype); scalars [kH, kW, sH, sW, pH,
 *                        pW, dH, dW]. Window (oh, ow) covers rows oh*sH - pH
 *                        + i*dH, i < kH, inside the input (same for columns);
 *                        out is its maximum (NaN wins, the first maximum
 *                        otherwise), indices its position h * W + w.
 *   ADAPTIVE_MAX_POOL2D  [out, indices, in]: as MAX_POOL2D over the windows
 *                        rows [floor(oh*H/OH), ceil((oh+1)*H/OH)).
 *   MAX_POOL2D_BACKWARD  [grad_in, grad_out, indices]: grad_in = 0, then
 *                        grad_in[n, c, i / W, i % W] += grad_out for each
 *                        index i (both max pools); floating dtypes. An index
 *                        outside [0, H*W) fails with INDEX_OUT_OF_RANGE.
 *   AVG_POOL2D           [out, in] floating, or integer (int64 sums divided
 *                        as integers); scalars [kH, kW, sH, sW, pH, pW,
 *                        count_include_pad, divisor_override (0: none)].
 *                        out = sum of the window (rows oh*sH - pH + i, i <
 *                        kH, clipped to the input) / divisor: the override,
 *                        else the window's size clipped to the padded input
 *                        (count_include_pad) or to the input.
 *   AVG_POOL2D_BACKWARD  [grad_in, grad_out], scalars as AVG_POOL2D.
 *   ADAPTIVE_AVG_POOL2D  [out, in]: mean over the adaptive windows.
 *   ADAPTIVE_AVG_POOL2D_BACKWARD  [grad_in, grad_out].
 *
 * Volumetric pooling: the same over 5-d views [N, C, D, H, W] (any strides,
 * floating dtypes, sums in double); indices are positions (d * H + h) * W
 * + w in a plane. Kernel, stride, padding and dilation scalars pack their
 * (D, H, W) values as three 21-bit fields, D highest.
 *   MAX_POOL3D           [out, indices: int64, in]; scalars [kernel,
 *                        stride, padding, dilation] (packed)
 *   ADAPTIVE_MAX_POOL3D  [out, indices, in]
 *   MAX_POOL3D_BACKWARD  [grad_in, grad_out, indices] (both max pools)
 *   AVG_POOL3D           [out, in]; scalars [kernel, stride, padding
 *                        (packed), count_include_pad, divisor_override]
 *   AVG_POOL3D_BACKWARD  [grad_in, grad_out], scalars as AVG_POOL3D
 *   ADAPTIVE_AVG_POOL3D  [out, in]
 *   ADAPTIVE_AVG_POOL3D_BACKWARD  [grad_in, grad_out]
 *   FRACTIONAL_MAX_POOL  [out, indices: int64, in, samples [N, C, S]] over
 *                        5-d views (a 2-d image has D = 1 and S = 2
 *                        samples per plane, (w, h); S = 3 is (d, h, w));
 *                        scalars [kD, kH, kW]. Windows start at PyTorch's
 *                        pseudo-random sequence floor((o + u) a) -
 *                        floor(u a), a = (in - k) / (out - 1), the last
 *                        at in - k, computed in the samples' dtype;
 *                        indices and NaN rule as MAX_POOL3D. The backward
 *                        is MAX_POOL2D_BACKWARD / MAX_POOL3D_BACKWARD.
 *
 * Upsampling. scalars [scale_h, scale_w, flag]: a scale > 0 is the user's
 * scale factor (the source step is 1 / scale), otherwise in / out.
 *   UPSAMPLE_NEAREST2D   [out, in] any dtype of one size; flag = exact:
 *                        source row floor(oh * step) (PyTorch's "nearest",
 *                        which copies when the sizes agree and takes oh / 2
 *                        when out = 2 * in) or floor((oh + 0.5) * step)
 *                        ("nearest-exact"), at most H - 1. Index math in
 *                        float32, as PyTorch's.
 *   UPSAMPLE_NEAREST2D_BACKWARD   [grad_in, grad_out] floating: sums.
 *   UPSAMPLE_BILINEAR2D  [out, in] floating; flag = align_corners.
 *   UPSAMPLE_BILINEAR2D_BACKWARD  [grad_in, grad_out].
 *   UPSAMPLE_BICUBIC2D   [out, in] floating; flag = align_corners: Keys'
 *                        cubic (a = -0.75) over the 4 x 4 source pixels
 *                        around PyTorch's source position, indices clamped
 *                        into the image; the width first, then the height.
 *   UPSAMPLE_BICUBIC2D_BACKWARD   [grad_in, grad_out]: its adjoint.
 *   UPSAMPLE_AA2D        [out, in] floating; scalars [scale_h, scale_w,
 *                        align_corners, filter]: antialiased resampling
 *                        (PyTorch's _upsample_<filter>2d_aa, PIL's
 *                        filters) with filter 0 bilinear (triangle), 1
 *                        bicubic (Keys, a = -0.5), 2 Lanczos (a = 3); the
 *                        support widens by the downscaling factor and each
 *                        output's weights are normalised to sum 1.
 *   UPSAMPLE_AA2D_BACKWARD        [grad_in, grad_out], scalars as forward.
 * UPSAMPLE_BILINEAR2D, UPSAMPLE_BICUBIC2D and UPSAMPLE_AA2D (all filters)
 * also take uint8 [out, in] (forward only), computed in PyTorch's CPU
 * fixed point: per axis int16 weights (the double weights, taps outside
 * the image added onto the border one, scaled by 2^p, p < 22 the largest
 * with round(max weight * 2^(p+1)) < 2^15), the width resampled first into
 * uint8, then the height, each output clamp((2^(p-1) + sum w x) >> p, 0,
 * 255); an axis whose size is unchanged is skipped.
 * The 3-d ones take 5-d views [N, C, D, H, W] and scalars [scale_d,
 * scale_h, scale_w, flag], the same rules per dim:
 *   UPSAMPLE_NEAREST3D   [out, in] floating or uint8; flag = exact
 *   UPSAMPLE_NEAREST3D_BACKWARD   [grad_in, grad_out] floating
 *   UPSAMPLE_TRILINEAR3D [out, in] floating; flag = align_corners
 *   UPSAMPLE_TRILINEAR3D_BACKWARD [grad_in, grad_out]
 *
 * Convolution, in terms of an image I [N, C, H, W] and a column side
 * O [N, K, OH, OW] tied by the weight w [K, C / groups, kH, kW]: output
 * position (oh, ow) of channel k in group g = k / (K / groups) sees the
 * image rows oh*sH - pH + i*dH (i < kH, inside the image), columns alike,
 * of the group's channels. scalars [sH, sW, pH, pW, dH, dW, groups].
 * Floating dtypes, one per op; float16 and bfloat16 compute in float32.
 *   CONV2D               [O, I, w (, bias [K])]: O = conv(I, w) + bias.
 *   CONV2D_INPUT_GRAD    [I, O, w (, bias [C])]: I = conv^T(O, w) + bias,
 *                        the gradient of CONV2D wrt its image, and the
 *                        forward of a transposed convolution (whose image
 *                        is its output; output_padding only enlarges it).
 *   CONV2D_WEIGHT_GRAD   [w, I, O]: w = gradient of sum(O * CONV2D(I, w))
 *                        wrt w, summed over the batch.
 *
 * Volumetric convolution: the same three ops over 5-d views, an image
 * I [N, C, D, H, W], a column side O [N, K, OD, OH, OW] and a weight
 * w [K, C / groups, kD, kH, kW], any strides. scalars [stride, padding,
 * dilation, groups]: each of the first three packs its (D, H, W) values as
 * three 21-bit fields, D highest (d << 42 | h << 21 | w).
 *   CONV3D               [O, I, w (, bias [K])]
 *   CONV3D_INPUT_GRAD    [I, O, w (, bias [C])]
 *   CONV3D_WEIGHT_GRAD   [w, I, O]
 *
 * Padding of the last three dims of [planes, D, H, W] views (1-d and 2-d
 * padding have D = H = 1 or D = 1); scalars [mode, pad_d, pad_h, pad_w]:
 * mode 0 reflect (without repeating the edge), 1 replicate; a
 * pad is the count added before the first element (negative crops); the
 * padded sizes are the out view's. Output index o of a dim reads input
 * index o - pad mapped into the dim by the mode.
 *   PAD                  [out, in] any dtype, one for both
 *   PAD_BACKWARD         [grad_in, grad_out] floating: grad_in = the sum
 *                        of grad_out over the outputs that read each input
 *
 * Sliding-window patches (nn.Unfold / nn.Fold): an image [N, C, H, W] and
 * its columns [N, C*kH*kW, OH, OW] (row (c*kH + i)*kW + j holds tap (i, j)
 * of channel c for every window), both of one dtype and any strides;
 * scalars [kH, kW, dH, dW, pH, pW, sH, sW]. Window (oh, ow)'s tap (i, j)
 * is pixel (oh*sH - pH + i*dH, ow*sW - pW + j*dW), zero outside the image;
 * OH = (H + 2 pH - dH (kH - 1) - 1) / sH + 1, OW alike.
 *   IM2COL               [cols, image] any dtype: copies the taps
 *   COL2IM               [image, cols] floating or bool (or): each pixel
 *                        = the sum of the column entries of its taps
 *                        (IM2COL's adjoint)
 */
#ifndef NEURONRT_OPS_VISION_H
#define NEURONRT_OPS_VISION_H

#define NRT_VISION_OPS(X)                                        \
  X(MAX_POOL2D, max_pool2d)                                      \
  X(ADAPTIVE_MAX_POOL2D, adaptive_max_pool2d)                    \
  X(MAX_POOL2D_BACKWARD, max_pool2d_backward)                    \
  X(AVG_POOL2D, avg_pool2d)                                      \
  X(AVG_POOL2D_BACKWARD, avg_pool2d_backward)                    \
  X(ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d)                    \
  X(ADAPTIVE_AVG_POOL2D_BACKWARD, adaptive_avg_pool2d_backward)  \
  X(MAX_POOL3D, max_pool3d)                                      \
  X(ADAPTIVE_MAX_POOL3D, adaptive_max_pool3d)                    \
  X(MAX_POOL3D_BACKWARD, max_pool3d_backward)                    \
  X(AVG_POOL3D, avg_pool3d)                                      \
  X(AVG_POOL3D_BACKWARD, avg_pool3d_backward)                    \
  X(ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d)                    \
  X(ADAPTIVE_AVG_POOL3D_BACKWARD, adaptive_avg_pool3d_backward)  \
  X(FRACTIONAL_MAX_POOL, fractional_max_pool)                    \
  X(UPSAMPLE_NEAREST2D, upsample_nearest2d)                      \
  X(UPSAMPLE_NEAREST2D_BACKWARD, upsample_nearest2d_backward)    \
  X(UPSAMPLE_BILINEAR2D, upsample_bilinear2d)                    \
  X(UPSAMPLE_BILINEAR2D_BACKWARD, upsample_bilinear2d_backward)  \
  X(UPSAMPLE_BICUBIC2D, upsample_bicubic2d)                      \
  X(UPSAMPLE_BICUBIC2D_BACKWARD, upsample_bicubic2d_backward)    \
  X(UPSAMPLE_AA2D, upsample_aa2d)                                \
  X(UPSAMPLE_AA2D_BACKWARD, upsample_aa2d_backward)              \
  X(UPSAMPLE_NEAREST3D, upsample_nearest3d)                      \
  X(UPSAMPLE_NEAREST3D_BACKWARD, upsample_nearest3d_backward)    \
  X(UPSAMPLE_TRILINEAR3D, upsample_trilinear3d)                  \
  X(UPSAMPLE_TRILINEAR3D_BACKWARD, upsample_trilinear3d_backward) \
  X(CONV2D, conv2d)                                              \
  X(CONV2D_INPUT_GRAD, conv2d_input_grad)                        \
  X(CONV2D_WEIGHT_GRAD, conv2d_weight_grad)                      \
  X(CONV3D, conv3d)                                              \
  X(CONV3D_INPUT_GRAD, conv3d_input_grad)                        \
  X(CONV3D_WEIGHT_GRAD, conv3d_weight_grad)                      \
  X(PAD, pad)                                                    \
  X(PAD_BACKWARD, pad_backward)                                  \
  X(IM2COL, im2col)                                              \
  X(COL2IM, col2im)

#endif
