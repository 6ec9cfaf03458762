/* Walking access patterns: partition rows of up to four free dims.
 *
 * Every instruction reads its operands one partition at a time into packed
 * scratch rows and writes its result back the same way. The walk visits
 * the three outer free dims and hands each innermost run (count and byte
 * stride) to a converter; the common cases (fp32 and bf16, unit stride)
 * have straight loops the compiler vectorises.
 */
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"

uint8_t *nc_row(const nc_core *core, const nrt_nc_ap *ap, int64_t p) {
  const nrt_nc_tensor *t = &core->program->tensors[ap->tensor];
  int64_t size = (int64_t)nrt_nc_dtype_size(ap->dtype);
  if (t->buffer == NRT_NC_HBM)
    return (uint8_t *)core->hbm[ap->tensor] + (ap->offset + p * ap->partition_step) * size;
  uint8_t *mem = t->buffer == NRT_NC_SBUF ? core->sbuf : core->psum;
  int64_t pbytes = t->buffer == NRT_NC_SBUF ? core->sbuf_pitch : core->psum_pitch;
  int64_t partition = t->partition_base + ap->partition_start + p * ap->partition_step;
  return mem + partition * pbytes + t->byte_offset + ap->offset * size;
}

int64_t nc_row_step(const nc_core *core, const nrt_nc_ap *ap) {
  const nrt_nc_tensor *t = &core->program->tensors[ap->tensor];
  if (t->buffer == NRT_NC_HBM) return ap->partition_step * (int64_t)nrt_nc_dtype_size(ap->dtype);
  return ap->partition_step * (t->buffer == NRT_NC_SBUF ? core->sbuf_pitch : core->psum_pitch);
}

typedef void (*run_fn)(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf);

static void walk(const nc_core *core, const nrt_nc_ap *ap, int64_t p, run_fn fn, void *buf,
                 size_t buf_elem) {
  int64_t size = (int64_t)nrt_nc_dtype_size(ap->dtype);
  uint8_t *base = nc_row(core, ap, p);
  int64_t n = ap->count[3], step = ap->stride[3] * size;
  uint8_t *out = buf;
  for (int64_t i0 = 0; i0 < ap->count[0]; i0++)
    for (int64_t i1 = 0; i1 < ap->count[1]; i1++)
      for (int64_t i2 = 0; i2 < ap->count[2]; i2++) {
        uint8_t *r = base + (i0 * ap->stride[0] + i1 * ap->stride[1] + i2 * ap->stride[2]) * size;
        fn(ap->dtype, r, step, n, out);
        out += (size_t)n * buf_elem;
      }
}

/* bf16 -> fp32 is exact (the bits move up 16 places): the wide twin below
 * gives the same bits as the reference loop. */
static void widen_bf16_reference(const uint16_t *in, float *out, int64_t n) {
  for (int64_t j = 0; j < n; j++) out[j] = rt_f32_from_bits((uint32_t)in[j] << 16);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

__attribute__((target("avx512f"))) static void widen_bf16_avx512(const uint16_t *in, float *out,
                                                                 int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(in + j)));
    _mm512_storeu_si512((void *)(out + j), _mm512_slli_epi32(w, 16));
  }
  widen_bf16_reference(in + j, out + j, n - j);
}

static void widen_bf16(const uint16_t *in, float *out, int64_t n) {
  if (rt_isa() >= NRT_ISA_AVX512) widen_bf16_avx512(in, out, n);
  else widen_bf16_reference(in, out, n);
}
#else
static void widen_bf16(const uint16_t *in, float *out, int64_t n) { widen_bf16_reference(in, out, n); }
#endif

static void load_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  float *out = buf;
  if (dtype == NRT_NC_FLOAT32 && step == 4) {
    memcpy(out, ptr, (size_t)n * 4);
  } else if (dtype == NRT_NC_BFLOAT16 && step == 2) {
    widen_bf16((const uint16_t *)(const void *)ptr, out, n);
  } else {
    for (int64_t j = 0; j < n; j++) out[j] = nc_load(dtype, ptr + j * step);
  }
}

static void store_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  const float *in = buf;
  if (dtype == NRT_NC_FLOAT32 && step == 4) {
    memcpy(ptr, in, (size_t)n * 4);
  } else if (dtype == NRT_NC_BFLOAT16 && step == 2) {
    uint16_t *out = (uint16_t *)(void *)ptr;
    for (int64_t j = 0; j < n; j++) out[j] = rt_bfloat16_from_float(in[j]);
  } else {
    for (int64_t j = 0; j < n; j++) nc_store(dtype, ptr + j * step, in[j]);
  }
}

static void load_bits_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  int32_t *out = buf;
  for (int64_t j = 0; j < n; j++) out[j] = nc_load_bits(dtype, ptr + j * step);
}

static void store_bits_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  const int32_t *in = buf;
  for (int64_t j = 0; j < n; j++) nc_store_bits(dtype, ptr + j * step, in[j]);
}

static void load_raw_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  size_t size = nrt_nc_dtype_size(dtype);
  uint8_t *out = buf;
  if (step == (int64_t)size) {
    memcpy(out, ptr, (size_t)n * size);
    return;
  }
  for (int64_t j = 0; j < n; j++) memcpy(out + (size_t)j * size, ptr + j * step, size);
}

static void store_raw_run(int32_t dtype, uint8_t *ptr, int64_t step, int64_t n, void *buf) {
  size_t size = nrt_nc_dtype_size(dtype);
  const uint8_t *in = buf;
  if (step == (int64_t)size) {
    memcpy(ptr, in, (size_t)n * size);
    return;
  }
  for (int64_t j = 0; j < n; j++) memcpy(ptr + j * step, in + (size_t)j * size, size);
}

int nc_f32_contiguous(const nrt_nc_ap *ap) {
  return ap->dtype == NRT_NC_FLOAT32 && ap->count[0] == 1 && ap->count[1] == 1 &&
         ap->count[2] == 1 && (ap->stride[3] == 1 || ap->count[3] == 1);
}

void nc_gather_f32(const nc_core *core, const nrt_nc_ap *ap, int64_t p, float *out) {
  walk(core, ap, p, load_run, out, sizeof(float));
}

void nc_scatter_f32(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const float *in) {
  walk(core, ap, p, store_run, (void *)in, sizeof(float));
}

void nc_gather_bits(const nc_core *core, const nrt_nc_ap *ap, int64_t p, int32_t *out) {
  walk(core, ap, p, load_bits_run, out, sizeof(int32_t));
}

void nc_scatter_bits(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const int32_t *in) {
  walk(core, ap, p, store_bits_run, (void *)in, sizeof(int32_t));
}

void nc_gather_raw(const nc_core *core, const nrt_nc_ap *ap, int64_t p, uint8_t *out) {
  walk(core, ap, p, load_raw_run, out, nrt_nc_dtype_size(ap->dtype));
}

void nc_scatter_raw(const nc_core *core, const nrt_nc_ap *ap, int64_t p, const uint8_t *in) {
  walk(core, ap, p, store_raw_run, (void *)in, nrt_nc_dtype_size(ap->dtype));
}
