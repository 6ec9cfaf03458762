/* FFT plans and the 1-D complex transform (fft_plan.h).
 *
 * Mixed radix, self-sorting (Stockham): after the stages done so far, whose
 * radices multiply to L, the buffer holds for each of the R = n / L
 * residues r the length-L DFT of the subsequence x[r + R s] at [r + R k].
 * A stage of radix p combines p of those (residues r + R' q, R' = R / p):
 *   A'[r + R' (k + L t)] = sum_q W_{Lp}^{qk} A[r + R' q + R k] W_p^{qt},
 * a twiddled p-point DFT for each (k, r). The inner loop runs over r, with
 * unit stride in both buffers and the twiddles fixed. After the last stage
 * (L = n, R = 1) the buffer holds X in order.
 *
 * Bluestein: jk = (j^2 + k^2 - (k - j)^2) / 2 turns the DFT into
 *   X_k = c_k sum_j (x_j c_j) conj(c_{k-j}),  c_k = exp(-pi i k^2 / n),
 * a circular convolution of length m >= 2n - 1 (the smallest 2^a 3^b 5^c) done with
 * two length-m transforms and the precomputed transform of conj(c). k^2 is
 * reduced modulo 2n in integers so that the chirp keeps its accuracy for
 * large k. */
#include "ops/fft/fft_plan.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const long double kTwoPi = 6.283185307179586476925286766559005768L;

/* exp(-2 pi i num / den), num in [0, den) */
static fft_cplx root(int64_t num, int64_t den) {
  const long double a = kTwoPi * (long double)num / (long double)den;
  fft_cplx w = {(double)cosl(a), -(double)sinl(a)};
  return w;
}

static inline fft_cplx cmul(fft_cplx a, fft_cplx b) {
  fft_cplx r = {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  return r;
}

/* ---- factoring and making plans ------------------------------------------ */

static int factor(int64_t n, int *radix) {
  int count = 0;
  while (n % 4 == 0) radix[count++] = 4, n /= 4;
  if (n % 2 == 0) radix[count++] = 2, n /= 2;
  for (int64_t p = 3; n > 1; p += 2) {
    if (p > FFT_MAX_GENERIC_RADIX) return -1; /* a large prime factor: Bluestein */
    while (n % p == 0) radix[count++] = (int)p, n /= p;
  }
  return count;
}

static void plan_free(fft_plan *p) {
  if (!p) return;
  free(p->tw), free(p->roots), free(p->chirp), free(p->kernel), free(p->rtw);
  free(p);
}

static fft_plan *make_mixed(int64_t n, const int *radix, int count) {
  fft_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->nstages = count;
  int64_t tw_total = 0, roots_total = 0, L = 1;
  for (int s = 0; s < count; s++) {
    p->radix[s] = radix[s];
    p->tw_offset[s] = tw_total;
    tw_total += L * (radix[s] - 1);
    p->roots_offset[s] = roots_total;
    if (radix[s] > 5) roots_total += radix[s];
    L *= radix[s];
  }
  p->tw = malloc(sizeof(fft_cplx) * (size_t)(tw_total + 1));
  p->roots = malloc(sizeof(fft_cplx) * (size_t)(roots_total + 1));
  if (!p->tw || !p->roots) {
    plan_free(p);
    return NULL;
  }
  L = 1;
  for (int s = 0; s < count; s++) {
    const int r = radix[s];
    fft_cplx *t = p->tw + p->tw_offset[s];
    for (int64_t k = 0; k < L; k++)
      for (int q = 1; q < r; q++) t[k * (r - 1) + (q - 1)] = root((q * k) % (L * r), L * r);
    if (r > 5)
      for (int j = 0; j < r; j++) p->roots[p->roots_offset[s] + j] = root(j, r);
    L *= r;
  }
  return p;
}

/* The smallest 2^a 3^b 5^c >= n: the convolution length. */
static int64_t smooth_at_least(int64_t n) {
  int64_t best = 1;
  while (best < n) best *= 2;
  for (int64_t f5 = 1; f5 < best; f5 *= 5)
    for (int64_t f35 = f5; f35 < best; f35 *= 3) {
      int64_t v = f35;
      while (v < n) v *= 2;
      if (v < best) best = v;
    }
  return best;
}

static fft_plan *make_bluestein(int64_t n) {
  const int64_t m = smooth_at_least(2 * n - 1);
  const fft_plan *sub = fft_plan_get(m, 0);
  if (!sub) return NULL;
  fft_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->m = m;
  p->sub = sub;
  p->chirp = malloc(sizeof(fft_cplx) * (size_t)n);
  p->kernel = malloc(sizeof(fft_cplx) * (size_t)m);
  fft_cplx *scratch = malloc(sizeof(fft_cplx) * (size_t)fft_work(sub));
  if (!p->chirp || !p->kernel || !scratch) {
    free(scratch);
    plan_free(p);
    return NULL;
  }
  int64_t sq = 0; /* k^2 mod 2n */
  for (int64_t k = 0; k < n; k++) {
    p->chirp[k] = root(sq, 2 * n);
    sq += 2 * k + 1;
    while (sq >= 2 * n) sq -= 2 * n;
  }
  memset(p->kernel, 0, sizeof(fft_cplx) * (size_t)m);
  for (int64_t k = 0; k < n; k++) {
    const fft_cplx c = {p->chirp[k].re, -p->chirp[k].im};
    p->kernel[k] = c;
    if (k) p->kernel[m - k] = c;
  }
  fft_run(sub, p->kernel, scratch);
  for (int64_t j = 0; j < m; j++) p->kernel[j].re /= (double)m, p->kernel[j].im /= (double)m;
  free(scratch);
  return p;
}

static fft_plan *make_real(int64_t n) {
  const fft_plan *half = fft_plan_get(n / 2, 0);
  if (!half) return NULL;
  fft_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->half = half;
  p->rtw = malloc(sizeof(fft_cplx) * (size_t)(n / 2 + 1));
  if (!p->rtw) {
    plan_free(p);
    return NULL;
  }
  for (int64_t k = 0; k <= n / 2; k++) p->rtw[k] = root(k, n);
  return p;
}

static fft_plan *make_plan(int64_t n, int real) {
  if (real) return make_real(n);
  int radix[FFT_MAX_STAGES];
  const int count = factor(n, radix);
  return count < 0 ? make_bluestein(n) : make_mixed(n, radix, count);
}

/* ---- the cache ------------------------------------------------------------- */

typedef struct cache_entry {
  int64_t n;
  int real;
  fft_plan *plan;
  struct cache_entry *next;
} cache_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache_head;

static fft_plan *lookup(int64_t n, int real) {
  for (cache_entry *e = cache_head; e; e = e->next)
    if (e->n == n && e->real == real) return e->plan;
  return NULL;
}

const fft_plan *fft_plan_get(int64_t n, int real) {
  if (n < 1 || (real && n % 2)) return NULL;
  pthread_mutex_lock(&cache_mu);
  fft_plan *found = lookup(n, real);
  pthread_mutex_unlock(&cache_mu);
  if (found) return found;
  /* made outside the lock (a Bluestein or real plan gets its sub-plan
   * through this function); a plan another thread made meanwhile wins */
  fft_plan *made = make_plan(n, real);
  cache_entry *e = malloc(sizeof *e);
  if (!made || !e) {
    plan_free(made);
    free(e);
    return NULL;
  }
  pthread_mutex_lock(&cache_mu);
  found = lookup(n, real);
  if (!found) {
    e->n = n, e->real = real, e->plan = made, e->next = cache_head;
    cache_head = e;
  }
  pthread_mutex_unlock(&cache_mu);
  if (found) {
    plan_free(made);
    free(e);
    return found;
  }
  return made;
}

int64_t fft_work(const fft_plan *p) { return p->m ? p->m : p->n; }

/* ---- the stages ------------------------------------------------------------ */

static void stage(const fft_cplx *restrict a, fft_cplx *restrict b, int64_t L, int64_t Rp, int p,
                  const fft_cplx *restrict tw, const fft_cplx *restrict roots) {
  const int64_t R = Rp * p, out_stride = Rp * L;
  for (int64_t k = 0; k < L; k++) {
    const fft_cplx *in = a + R * k, *t = tw + k * (p - 1);
    fft_cplx *out = b + Rp * k;
    switch (p) {
      case 2: {
        const fft_cplx w1 = t[0];
        for (int64_t r = 0; r < Rp; r++) {
          const fft_cplx a0 = in[r], a1 = cmul(in[r + Rp], w1);
          out[r].re = a0.re + a1.re, out[r].im = a0.im + a1.im;
          out[r + out_stride].re = a0.re - a1.re, out[r + out_stride].im = a0.im - a1.im;
        }
        break;
      }
      case 3: {
        const double s = 0.86602540378443864676;
        const fft_cplx w1 = t[0], w2 = t[1];
        for (int64_t r = 0; r < Rp; r++) {
          const fft_cplx a0 = in[r], a1 = cmul(in[r + Rp], w1), a2 = cmul(in[r + 2 * Rp], w2);
          const double tr = a1.re + a2.re, ti = a1.im + a2.im, dr = s * (a1.re - a2.re), di = s * (a1.im - a2.im);
          const double mr = a0.re - 0.5 * tr, mi = a0.im - 0.5 * ti;
          out[r].re = a0.re + tr, out[r].im = a0.im + ti;
          out[r + out_stride].re = mr + di, out[r + out_stride].im = mi - dr; /* m - i d */
          out[r + 2 * out_stride].re = mr - di, out[r + 2 * out_stride].im = mi + dr;
        }
        break;
      }
      case 4: {
        const fft_cplx w1 = t[0], w2 = t[1], w3 = t[2];
        for (int64_t r = 0; r < Rp; r++) {
          const fft_cplx a0 = in[r], a1 = cmul(in[r + Rp], w1), a2 = cmul(in[r + 2 * Rp], w2),
                         a3 = cmul(in[r + 3 * Rp], w3);
          const double t0r = a0.re + a2.re, t0i = a0.im + a2.im, t1r = a0.re - a2.re, t1i = a0.im - a2.im;
          const double t2r = a1.re + a3.re, t2i = a1.im + a3.im, t3r = a1.re - a3.re, t3i = a1.im - a3.im;
          out[r].re = t0r + t2r, out[r].im = t0i + t2i;
          out[r + 2 * out_stride].re = t0r - t2r, out[r + 2 * out_stride].im = t0i - t2i;
          out[r + out_stride].re = t1r + t3i, out[r + out_stride].im = t1i - t3r; /* t1 - i t3 */
          out[r + 3 * out_stride].re = t1r - t3i, out[r + 3 * out_stride].im = t1i + t3r;
        }
        break;
      }
      case 5: {
        const double c1 = 0.30901699437494742410, c2 = -0.80901699437494742410, s1 = 0.95105651629515357212,
                     s2 = 0.58778525229247312917;
        const fft_cplx w1 = t[0], w2 = t[1], w3 = t[2], w4 = t[3];
        for (int64_t r = 0; r < Rp; r++) {
          const fft_cplx a0 = in[r], a1 = cmul(in[r + Rp], w1), a2 = cmul(in[r + 2 * Rp], w2),
                         a3 = cmul(in[r + 3 * Rp], w3), a4 = cmul(in[r + 4 * Rp], w4);
          const double t1r = a1.re + a4.re, t1i = a1.im + a4.im, t2r = a2.re + a3.re, t2i = a2.im + a3.im;
          const double d1r = a1.re - a4.re, d1i = a1.im - a4.im, d2r = a2.re - a3.re, d2i = a2.im - a3.im;
          const double m1r = a0.re + c1 * t1r + c2 * t2r, m1i = a0.im + c1 * t1i + c2 * t2i;
          const double m2r = a0.re + c2 * t1r + c1 * t2r, m2i = a0.im + c2 * t1i + c1 * t2i;
          const double n1r = s1 * d1r + s2 * d2r, n1i = s1 * d1i + s2 * d2i;
          const double n2r = s2 * d1r - s1 * d2r, n2i = s2 * d1i - s1 * d2i;
          out[r].re = a0.re + t1r + t2r, out[r].im = a0.im + t1i + t2i;
          out[r + out_stride].re = m1r + n1i, out[r + out_stride].im = m1i - n1r;
          out[r + 4 * out_stride].re = m1r - n1i, out[r + 4 * out_stride].im = m1i + n1r;
          out[r + 2 * out_stride].re = m2r + n2i, out[r + 2 * out_stride].im = m2i - n2r;
          out[r + 3 * out_stride].re = m2r - n2i, out[r + 3 * out_stride].im = m2i + n2r;
        }
        break;
      }
      default: { /* an odd radix up to FFT_MAX_GENERIC_RADIX: a direct DFT */
        fft_cplx v[FFT_MAX_GENERIC_RADIX];
        for (int64_t r = 0; r < Rp; r++) {
          v[0] = in[r];
          for (int q = 1; q < p; q++) v[q] = cmul(in[r + q * Rp], t[q - 1]);
          for (int u = 0; u < p; u++) {
            double sr = v[0].re, si = v[0].im;
            int idx = 0;
            for (int q = 1; q < p; q++) {
              idx += u;
              if (idx >= p) idx -= p;
              sr += v[q].re * roots[idx].re - v[q].im * roots[idx].im;
              si += v[q].re * roots[idx].im + v[q].im * roots[idx].re;
            }
            out[r + u * out_stride].re = sr, out[r + u * out_stride].im = si;
          }
        }
        break;
      }
    }
  }
}

static void run_bluestein(const fft_plan *p, fft_cplx *data, fft_cplx *scratch) {
  const int64_t n = p->n, m = p->m;
  for (int64_t k = 0; k < n; k++) data[k] = cmul(data[k], p->chirp[k]);
  memset(data + n, 0, sizeof(fft_cplx) * (size_t)(m - n));
  fft_run(p->sub, data, scratch);
  /* the inverse transform as conj(DFT(conj(.))) */
  for (int64_t j = 0; j < m; j++) {
    const fft_cplx v = cmul(data[j], p->kernel[j]);
    data[j].re = v.re, data[j].im = -v.im;
  }
  fft_run(p->sub, data, scratch);
  for (int64_t k = 0; k < n; k++) {
    const fft_cplx v = {data[k].re, -data[k].im};
    data[k] = cmul(v, p->chirp[k]);
  }
}

void fft_run(const fft_plan *p, fft_cplx *data, fft_cplx *scratch) {
  if (p->m) {
    run_bluestein(p, data, scratch);
    return;
  }
  fft_cplx *a = data, *b = scratch;
  int64_t L = 1;
  for (int s = 0; s < p->nstages; s++) {
    const int r = p->radix[s];
    const int64_t Rp = p->n / (L * r);
    stage(a, b, L, Rp, r, p->tw + p->tw_offset[s], p->roots + p->roots_offset[s]);
    fft_cplx *t = a;
    a = b, b = t;
    L *= r;
  }
  if (a != data) memcpy(data, a, sizeof(fft_cplx) * (size_t)p->n);
}
