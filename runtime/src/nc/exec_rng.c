/* Random numbers: rng, rand2, dropout and the generator state.
 *
 * Each engine lane (partition) has XORWOW generators (Marsaglia, "Xorshift
 * RNGs", 2003: five xorshift words and a Weyl counter), one on GpSimd and
 * four on Vector, the state sizes the ISA reference gives (6 and 24 uint32
 * per lane). Element j of a row draws from stream j % streams. A run starts
 * every lane from seed 0; set_rng_seed / rand_set_state change that.
 */
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"
#include "nc/operand.h"

int nc_rng_streams(int32_t engine) { return engine == NRT_NC_ENGINE_VECTOR ? 4 : 1; }

static uint32_t *lane_state(const nc_core *core, int32_t engine, int64_t lane) {
  return core->rng + ((int64_t)engine * core->program->geometry.partitions + lane) * NC_RNG_WORDS;
}

static uint32_t xorwow(uint32_t *s) {
  uint32_t t = s[0] ^ (s[0] >> 2);
  s[0] = s[1], s[1] = s[2], s[2] = s[3], s[3] = s[4];
  s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
  s[5] += 362437u;
  return s[4] + s[5];
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Every lane and stream of one engine from a 32-bit seed (xorshift words
 * never all zero). */
static void seed_engine(const nc_core *core, int32_t engine, uint32_t seed) {
  for (int64_t lane = 0; lane < core->program->geometry.partitions; lane++) {
    uint32_t *s = lane_state(core, engine, lane);
    uint64_t x = ((uint64_t)seed << 32) ^ (uint64_t)(lane * 8 + engine);
    for (int w = 0; w < NC_RNG_WORDS; w++) s[w] = (uint32_t)splitmix64(&x);
    for (int k = 0; k < NC_RNG_WORDS; k += 6)
      if (!(s[k] | s[k + 1] | s[k + 2] | s[k + 3] | s[k + 4])) s[k] = 1;
  }
}

void nc_rng_init(const nc_core *core) {
  for (int32_t e = 0; e < NRT_NC_ENGINE_COUNT; e++) seed_engine(core, e, 0);
}

static int64_t lane_of(const nc_core *core, const nrt_nc_ap *ap, int64_t p) {
  const nrt_nc_tensor *t = &core->program->tensors[ap->tensor];
  return t->partition_base + ap->partition_start + p * ap->partition_step;
}

/* 32 random bits for each of the n elements of partition p. */
static void draw(const nc_core *core, const nrt_nc_inst *inst, int64_t p, uint32_t *bits,
                 int64_t n) {
  uint32_t *s = lane_state(core, inst->engine, lane_of(core, &inst->ap[0], p));
  int streams = nc_rng_streams(inst->engine);
  for (int64_t j = 0; j < n; j++) bits[j] = xorwow(s + 6 * (j % streams));
}

static float uniform01(uint32_t bits) { return (float)(bits >> 8) * (1.0f / 16777216.0f); }

static void exec_rng(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  uint32_t *bits = (uint32_t *)a;
  size_t size = nrt_nc_dtype_size(dst->dtype);
  uint8_t *packed = (uint8_t *)a;
  for (int64_t p = 0; p < dst->partitions; p++) {
    draw(core, inst, p, bits, n);
    /* The low bytes of each value, in place (little-endian): raw storage. */
    for (int64_t j = 0; j < n; j++) memmove(packed + (size_t)j * size, &bits[j], size);
    nc_scatter_raw(core, dst, p, packed);
  }
}

static void exec_rand2(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  uint32_t *bits = (uint32_t *)a;
  for (int64_t p = 0; p < dst->partitions; p++) {
    float lo = nc_operand_or_imm(core, &inst->ap[1], p, inst->imm[0]);
    float hi = nc_operand_or_imm(core, &inst->ap[2], p, inst->imm[1]);
    draw(core, inst, p, bits, n);
    for (int64_t j = 0; j < n; j++) a[j] = lo + uniform01(bits[j]) * (hi - lo);
    nc_scatter_f32(core, dst, p, a);
  }
}

static void exec_dropout(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t n = nc_ap_free_elems(dst);
  uint32_t *bits = (uint32_t *)b;
  for (int64_t p = 0; p < dst->partitions; p++) {
    float prob = nc_operand_or_imm(core, &inst->ap[2], p, inst->imm[0]);
    nc_gather_f32(core, &inst->ap[1], p, a);
    draw(core, inst, p, bits, n);
    for (int64_t j = 0; j < n; j++)
      if (uniform01(bits[j]) < prob) a[j] = 0.0f;
    nc_scatter_f32(core, dst, p, a);
  }
}

static void exec_state(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  const nrt_nc_ap *ap = &inst->ap[0];
  int words = 6 * nc_rng_streams(inst->engine);
  int32_t *row = (int32_t *)a;
  for (int64_t p = 0; p < ap->partitions; p++) {
    uint32_t *s = lane_state(core, inst->engine, lane_of(core, ap, p));
    if (inst->opcode == NRT_NC_RNG_GET_STATE) {
      memcpy(row, s, (size_t)words * 4);
      nc_scatter_bits(core, ap, p, row);
    } else {
      nc_gather_bits(core, ap, p, row);
      memcpy(s, row, (size_t)words * 4);
    }
  }
}

static void exec_seed(const nc_core *core, const nrt_nc_inst *inst, float *a) {
  int32_t *bits = (int32_t *)a;
  nc_gather_bits(core, &inst->ap[0], 0, bits);
  seed_engine(core, inst->engine, (uint32_t)bits[0]);
}

void nc_exec_rng(const nc_core *core, const nrt_nc_inst *inst, float *a, float *b) {
  switch (inst->opcode) {
    case NRT_NC_RNG: exec_rng(core, inst, a); break;
    case NRT_NC_RAND2: exec_rand2(core, inst, a); break;
    case NRT_NC_DROPOUT: exec_dropout(core, inst, a, b); break;
    case NRT_NC_RNG_SEED: exec_seed(core, inst, a); break;
    case NRT_NC_RNG_SET_STATE: case NRT_NC_RNG_GET_STATE: exec_state(core, inst, a); break;
    default: break;
  }
}
