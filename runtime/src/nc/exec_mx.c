/* quantize_mx and nc_matmul_mx: MX block-scaled fp8 / fp4 (OCP Microscaling).
 *
 * A block is 8 partitions x one packed element (4 values): 32 values that
 * share an E8M0 scale. quantize_mx picks the scale 2^(floor(log2 amax) -
 * emax + 1), twice the OCP sample algorithm's, as the NKI reference says,
 * so that rounding the largest value never saturates. nc_matmul_mx
 * multiplies each value by its block's scale and accumulates in fp32.
 * Block g's scale row is partition (g / 4) * 32 + g % 4 of the scale
 * pattern (nc.h).
 */
#include <float.h>
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"
#include "nc/numerics_mx.h"

static int64_t scale_row(int64_t g) { return (g / 4) * 32 + g % 4; }

/* Scale exponent of a block whose largest magnitude is amax (NaN when the
 * block holds NaN or infinity), and its E8M0 byte. */
static uint8_t block_scale(float amax, int emax, int *exponent) {
  if (amax != amax) {
    *exponent = 0;
    return 255;
  }
  int e = -127;
  if (amax > 0.0f) {
    frexpf(amax, &e); /* amax in [2^(e-1), 2^e): floor(log2 amax) = e - 1 */
    e = e - 1 - emax + 1;
    if (e < -127) e = -127;
    if (e > 127) e = 127;
  }
  *exponent = e;
  return (uint8_t)(e + 127);
}

static void exec_quantize(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b,
                          float *c, float *d) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1], *sc = &inst->ap[2];
  const nc_mx_format *f = nc_mx_format_of(dst->dtype);
  int emax = nc_mx_emax(f);
  int64_t words = nc_ap_free_elems(dst);
  int32_t *exps = (int32_t *)(void *)b;
  uint32_t *packed = (uint32_t *)(void *)c;
  uint8_t *scales = (uint8_t *)(void *)d;
  for (int64_t g = 0; g < src->partitions / 8; g++) {
    for (int64_t j = 0; j < words; j++) d[j] = 0.0f; /* d: amax per column, then bytes */
    for (int64_t r = 0; r < 8; r++) {
      nc_gather_f32(core, src, g * 8 + r, a);
      for (int64_t j = 0; j < words; j++)
        for (int i = 0; i < 4; i++) {
          float v = fabsf(a[4 * j + i]);
          if (!(v <= FLT_MAX)) d[j] = NAN;
          else if (d[j] == d[j] && v > d[j]) d[j] = v;
        }
    }
    for (int64_t j = 0; j < words; j++) {
      float amax = d[j];
      int e;
      uint8_t byte = block_scale(amax, emax, &e);
      exps[j] = byte == 255 ? INT32_MIN : e;
      scales[j] = byte; /* bytes overwrite d from the front, after reading d[j] */
    }
    nc_scatter_raw(core, sc, scale_row(g), scales);
    for (int64_t r = 0; r < 8; r++) {
      nc_gather_f32(core, src, g * 8 + r, a);
      for (int64_t j = 0; j < words; j++) {
        uint32_t word = 0;
        for (int i = 0; i < 4; i++) {
          float x = exps[j] == INT32_MIN ? NAN : ldexpf(a[4 * j + i], -exps[j]);
          word |= nc_mx_encode(f, x) << (f->bits * i);
        }
        packed[j] = word;
      }
      nc_scatter_raw(core, dst, g * 8 + r, (const uint8_t *)packed);
    }
  }
}

/* Values of every code of a format and of every E8M0 byte: decoding by
 * table keeps ldexpf out of the inner loop. */
static void code_table(const nc_mx_format *f, float *out) {
  for (uint32_t c = 0; c < (1u << f->bits); c++) out[c] = nc_mx_decode(f, c);
}

/* Partition p of a packed pattern, dequantized with its block's scales:
 * value i of element col goes to out[i * ld + col]. */
static void dequant_row(const nc_core *core, const nrt_nc_ap *data, const nrt_nc_ap *scale,
                        int64_t p, const float *codes, const float *scales, uint8_t *raw,
                        uint8_t *bytes, float *out, int64_t ld) {
  const nc_mx_format *f = nc_mx_format_of(data->dtype);
  int64_t n = nc_ap_free_elems(data), size = (int64_t)nrt_nc_dtype_size(data->dtype);
  uint32_t mask = (1u << f->bits) - 1;
  nc_gather_raw(core, data, p, raw);
  nc_gather_raw(core, scale, scale_row(p / 8), bytes);
  for (int64_t col = 0; col < n; col++) {
    uint32_t word = 0;
    memcpy(&word, raw + col * size, (size_t)size);
    float s = scales[bytes[col]];
    for (int i = 0; i < 4; i++) out[i * ld + col] = codes[(word >> (f->bits * i)) & mask] * s;
  }
}

void nc_tensor_engine_gemm(int64_t k, int64_t m, int64_t n, const float *a, const float *b,
                           float *c, int64_t ldc); /* tensor_engine.c */

/* 32 partitions (128 rows of k) at a time: the dequantized operands of a
 * chunk and the [M, N] accumulator fit one scratch row. k runs over
 * (partition, value) in order, so the fp32 sums are those of one pass. */
#define MX_CHUNK 32

static void exec_matmul(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  int64_t m = nc_ap_free_elems(st), n = nc_ap_free_elems(mv);
  float *acc = a, *sf = acc + m * n, *mf = sf + 4 * MX_CHUNK * m;
  uint8_t *raw = (uint8_t *)(void *)(mf + 4 * MX_CHUNK * n), *bytes = raw + 4 * (m > n ? m : n);
  for (int64_t r = 0; r < m; r++) {
    if (inst->flags & NRT_NC_FLAG_ACCUMULATE) nc_gather_f32(core, dst, r, acc + r * n);
    else memset(acc + r * n, 0, (size_t)n * sizeof(float));
  }
  float st_codes[256], mv_codes[256], scales[256];
  code_table(nc_mx_format_of(st->dtype), st_codes);
  code_table(nc_mx_format_of(mv->dtype), mv_codes);
  for (int b = 0; b < 256; b++) scales[b] = nc_e8m0_decode((uint8_t)b);
  for (int64_t p0 = 0; p0 < st->partitions; p0 += MX_CHUNK) {
    int64_t rows = st->partitions - p0 < MX_CHUNK ? st->partitions - p0 : MX_CHUNK;
    for (int64_t p = 0; p < rows; p++) {
      dequant_row(core, st, &inst->ap[3], p0 + p, st_codes, scales, raw, bytes, sf + 4 * p * m, m);
      dequant_row(core, mv, &inst->ap[4], p0 + p, mv_codes, scales, raw, bytes, mf + 4 * p * n, n);
    }
    nc_tensor_engine_gemm(4 * rows, m, n, sf, mf, acc, n);
  }
  for (int64_t r = 0; r < m; r++) nc_scatter_f32(core, dst, r, acc + r * n);
}

void nc_exec_mx(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b, float *c,
                float *d) {
  if (inst->opcode == NRT_NC_QUANTIZE_MX) exec_quantize(core, inst, a, b, c, d);
  else exec_matmul(core, inst, a);
}

/* 64-bit NkiScalar arithmetic: add, subtract, multiply, wrapping (unsigned
 * math); imm0 holds an immediate that fits a double exactly (|x| < 2^53). */
static void scalar_int64(const nc_core *core, const nrt_nc_inst *inst) {
  int64_t a, b = (int64_t)inst->imm[0];
  memcpy(&a, nc_row(core, &inst->ap[1], 0), 8);
  if (inst->ap[2].tensor >= 0) memcpy(&b, nc_row(core, &inst->ap[2], 0), 8);
  if (inst->flags & NRT_NC_FLAG_REVERSE0) {
    int64_t t = a;
    a = b;
    b = t;
  }
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  uint64_t r = inst->func[0] == NRT_NC_ALU_ADD        ? ua + ub
               : inst->func[0] == NRT_NC_ALU_SUBTRACT ? ua - ub
                                                      : ua * ub;
  memcpy(nc_row(core, &inst->ap[0], 0), &r, 8);
}

/* NkiScalar arithmetic: wraps like the 32-bit device scalar (unsigned math). */
void nc_exec_scalar_int(const nc_core *core, const nrt_nc_inst *inst) {
  if (inst->ap[0].dtype == NRT_NC_INT64) {
    scalar_int64(core, inst);
    return;
  }
  int32_t a, b = (int32_t)inst->imm[0];
  memcpy(&a, nc_row(core, &inst->ap[1], 0), 4);
  if (inst->ap[2].tensor >= 0) memcpy(&b, nc_row(core, &inst->ap[2], 0), 4);
  if (inst->flags & NRT_NC_FLAG_REVERSE0) {
    int32_t t = a;
    a = b;
    b = t;
  }
  uint32_t ua = (uint32_t)a, ub = (uint32_t)b, r;
  switch (inst->func[0]) {
    case NRT_NC_ALU_ADD: r = ua + ub; break;
    case NRT_NC_ALU_SUBTRACT: r = ua - ub; break;
    case NRT_NC_ALU_MULTIPLY: r = ua * ub; break;
    case NRT_NC_ALU_EQUAL: r = a == b; break;
    case NRT_NC_ALU_NOT_EQUAL: r = a != b; break;
    case NRT_NC_ALU_GREATER: r = a > b; break;
    case NRT_NC_ALU_GREATER_EQUAL: r = a >= b; break;
    case NRT_NC_ALU_LESS: r = a < b; break;
    default: r = a <= b; break; /* LESS_EQUAL, the last op the checker lets through */
  }
  memcpy(nc_row(core, &inst->ap[0], 0), &r, 4);
}
