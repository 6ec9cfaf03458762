/* Discrete Fourier transforms (torch.fft) along one axis of a strided
 * batch. Complex operands are float32 or float64 views whose last dim holds
 * the (real, imaginary) pair (size 2, any stride: view_as_real of a complex
 * tensor); real operands are float views of the same dtype. Every dim but
 * the transform axis (and the pair dim) is a batch dim, and out and in agree
 * on them. Results are scaled by `scale` (1, 1/sqrt(n) or 1/n: ATen's
 * normalization modes, computed by the caller over all transformed dims).
 *   FFT_C2C [out [..., n, ..., 2], in [..., n, ..., 2]]
 *           scalars [axis, forward (1: exp(-2 pi i jk/n), 0: exp(+...)), scale]
 *   FFT_R2C [out [..., n/2+1 (onesided) or n, ..., 2], in real [..., n, ...]]
 *           scalars [axis, scale, onesided]: the forward transform
 *   FFT_C2R [out real [..., n, ...], in [..., m >= n/2+1, ..., 2]]
 *           scalars [axis, scale]: the inverse transform of the Hermitian
 *           signal whose first n/2+1 values are in's (the imaginary parts
 *           of values 0 and n/2 are ignored, as a real result requires)
 * out may be in itself (FFT_C2C, the same view): each line is read whole
 * before it is written. The axis counts the dims of out. */
#ifndef NEURONRT_OPS_FFT_H
#define NEURONRT_OPS_FFT_H

#define NRT_FFT_OPS(X) X(FFT_C2C, fft_c2c) X(FFT_R2C, fft_r2c) X(FFT_C2R, fft_c2r)

#endif
