/* Transposing copies of the depth folding (see conv3d_fold_copy.h).
 *
 * Element by element, a channels_last_3d row costs a strided load and a
 * store per element (perf: most of the channels_last_3d fold). On x86 the
 * copy moves square tiles through SSE2 registers instead, 4 x 4 for 32-bit
 * elements and 8 x 8 for 16-bit ones: whole-vector loads of a pixel's
 * channel run, whole-vector stores of a channel's pixels. A last partial
 * tile is moved back to overlap the one before (its elements are written
 * twice, with the same bits), so only rows narrower than a tile go element
 * by element. SSE2 is in every x86-64 CPU, so no ISA dispatch is needed;
 * other targets go element by element. */
#include "ops/conv/conv3d_fold_copy.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#define FC_X86 1
#endif

/* Start of the tile at i of n: i, or n - t for a last partial tile. */
static inline int64_t tile_at(int64_t i, int64_t n, int64_t t) { return i + t <= n ? i : n - t; }

static void elements32(uint32_t *d, int64_t dsc, const uint32_t *s, int64_t ssw, int64_t C, int64_t W) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t w = 0; w < W; w++) d[c * dsc + w] = s[w * ssw + c];
}

static void elements16(uint16_t *d, int64_t dsc, const uint16_t *s, int64_t ssw, int64_t C, int64_t W) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t w = 0; w < W; w++) d[c * dsc + w] = s[w * ssw + c];
}

static void rows32(uint32_t *d, int64_t dsc, const uint32_t *s, int64_t ssw, int64_t C, int64_t W) {
#ifdef FC_X86
  if (C >= 4 && W >= 4) {
    for (int64_t ci = 0; ci < C; ci += 4)
      for (int64_t wi = 0; wi < W; wi += 4) {
        int64_t c0 = tile_at(ci, C, 4), w0 = tile_at(wi, W, 4);
        const float *sp = (const float *)(s + w0 * ssw + c0);
        float *dp = (float *)(d + c0 * dsc + w0);
        __m128 r0 = _mm_loadu_ps(sp), r1 = _mm_loadu_ps(sp + ssw);
        __m128 r2 = _mm_loadu_ps(sp + 2 * ssw), r3 = _mm_loadu_ps(sp + 3 * ssw);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* shuffles only: the bits move unchanged */
        _mm_storeu_ps(dp, r0);
        _mm_storeu_ps(dp + dsc, r1);
        _mm_storeu_ps(dp + 2 * dsc, r2);
        _mm_storeu_ps(dp + 3 * dsc, r3);
      }
    return;
  }
#endif
  elements32(d, dsc, s, ssw, C, W);
}

static void rows16(uint16_t *d, int64_t dsc, const uint16_t *s, int64_t ssw, int64_t C, int64_t W) {
#ifdef FC_X86
  if (C >= 8 && W >= 8) {
    for (int64_t ci = 0; ci < C; ci += 8)
      for (int64_t wi = 0; wi < W; wi += 8) {
        int64_t c0 = tile_at(ci, C, 8), w0 = tile_at(wi, W, 8);
        __m128i r[8], a[8], b[8];
        for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(s + (w0 + i) * ssw + c0));
        /* pairs of pixels per channel, then quads, then all 8 */
        for (int i = 0; i < 4; i++) {
          a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
          a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 2; i++)
          for (int h = 0; h < 2; h++) {
            b[4 * i + 2 * h] = _mm_unpacklo_epi32(a[4 * i + h], a[4 * i + h + 2]);
            b[4 * i + 2 * h + 1] = _mm_unpackhi_epi32(a[4 * i + h], a[4 * i + h + 2]);
          }
        for (int j = 0; j < 4; j++) {
          _mm_storeu_si128((__m128i *)(d + (c0 + 2 * j) * dsc + w0), _mm_unpacklo_epi64(b[j], b[j + 4]));
          _mm_storeu_si128((__m128i *)(d + (c0 + 2 * j + 1) * dsc + w0), _mm_unpackhi_epi64(b[j], b[j + 4]));
        }
      }
    return;
  }
#endif
  elements16(d, dsc, s, ssw, C, W);
}

void rt_fold_transpose_row(void *dst, int64_t dsc, const void *src, int64_t ssw, int64_t C, int64_t W, size_t es) {
  if (es == 2)
    rows16(dst, dsc, src, ssw, C, W);
  else
    rows32(dst, dsc, src, ssw, C, W);
}
