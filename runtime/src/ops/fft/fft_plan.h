/* FFT plans (fft_plan.c): 1-D complex transforms of any length in double.
 *
 * A plan of length n is either a self-sorting (Stockham) mixed-radix
 * transform over the factors 4, 2, 3, 5 and any other odd factor up to
 * FFT_MAX_GENERIC_RADIX (a direct DFT of that size per butterfly), or, when
 * n has a larger prime factor, Bluestein's chirp-z transform through a
 * plan of a length 2^a 3^b 5^c >= 2n - 1. Twiddles are computed in long double and stored in
 * double. Plans are cached by length (thread-safe) and never change once
 * made, so one plan serves every thread. */
#ifndef NEURONRT_OPS_FFT_PLAN_H
#define NEURONRT_OPS_FFT_PLAN_H

#include <stdint.h>

#define FFT_MAX_GENERIC_RADIX 31
#define FFT_MAX_STAGES 64

typedef struct fft_cplx {
  double re, im;
} fft_cplx;

typedef struct fft_plan fft_plan;
struct fft_plan {
  int64_t n;
  /* mixed radix */
  int nstages;
  int radix[FFT_MAX_STAGES];
  int64_t tw_offset[FFT_MAX_STAGES]; /* into tw: (radix - 1) twiddles per k < L */
  fft_cplx *tw;
  fft_cplx *roots; /* per generic-radix stage: its p roots of unity, at roots_offset */
  int64_t roots_offset[FFT_MAX_STAGES];
  /* Bluestein */
  int64_t m;            /* 0 for mixed radix */
  const fft_plan *sub;  /* the length-m plan */
  fft_cplx *chirp;      /* exp(-pi i k^2 / n), k < n */
  fft_cplx *kernel;     /* DFT_m of the conjugate chirp, divided by m */
  /* real transforms of even n: the half-length plan and exp(-2 pi i k / n), k <= n/2 */
  const fft_plan *half;
  fft_cplx *rtw;
};

/* The plan for length n >= 1 (cached), or NULL if memory runs out. With
 * real set, n is even and the plan also holds half and rtw. */
const fft_plan *fft_plan_get(int64_t n, int real);

/* Complex values of work space that fft_run needs beside the data: the data
 * buffer must hold fft_work(p) values, the scratch as many. */
int64_t fft_work(const fft_plan *p);

/* Forward DFT (exp(-2 pi i jk/n)) of data[0, n) in place; scratch holds
 * fft_work(p) values, data too. */
void fft_run(const fft_plan *p, fft_cplx *data, fft_cplx *scratch);

#endif
