/* The NeuronCore simulator from C: programs built by hand, run on host
 * memory; rule checks, placement, numerics and the cost model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "nc/numerics.h"
#include "nc/numerics_mx.h"
#include "cpu_isa.h"

void nc_tensor_engine_force_reference(int on);
long nc_tensor_engine_pair_products(void);
long nc_tensor_engine_pack_hits(void);
long nc_tensor_engine_pack_misses(void);
long nc_exec_joined_copies(void);
int rt_num_threads(void);

static nrt_nc_ap ap2d(int32_t tensor, int32_t dtype, int32_t partitions, int64_t pstep,
                      int64_t free, int64_t offset) {
  nrt_nc_ap ap = {.tensor = tensor, .dtype = dtype, .partitions = partitions,
                  .partition_step = pstep, .offset = offset, .num_free = 1};
  ap.stride[0] = 1;
  ap.count[0] = free;
  return ap;
}

static nrt_nc_ap none(void) { return (nrt_nc_ap){.tensor = -1}; }

static nrt_nc_inst inst_of(int32_t opcode, int32_t engine) {
  nrt_nc_inst inst = {.opcode = opcode, .engine = engine};
  for (int k = 0; k < NRT_NC_MAX_APS; k++) inst.ap[k] = none();
  return inst;
}

static nrt_nc_tensor hbm(int64_t bytes) { return (nrt_nc_tensor){.buffer = NRT_NC_HBM, .bytes = bytes}; }
static nrt_nc_tensor tile(int32_t buffer, int32_t partitions, int64_t bytes) {
  return (nrt_nc_tensor){.buffer = buffer, .partitions = partitions, .bytes = bytes};
}

static nrt_status create(const nrt_nc_inst *insts, int32_t ni, const nrt_nc_tensor *tensors,
                         int32_t nt, nrt_nc_program_t *out, nrt_nc_diagnostic *diag) {
  nrt_nc_geometry g;
  nrt_device_properties props;
  CHECK_OK(nrt_nc_geometry_of_device(0, &g));
  CHECK_OK(nrt_device_get_properties(0, &props));
  return nrt_nc_program_create(insts, ni, tensors, nt, &g, &props, out, diag);
}

/* out = a + b for [rows, cols] fp32 via SBUF. */
static void test_add_program(void) {
  enum { R = 100, C = 300 };
  nrt_nc_tensor t[] = {hbm(R * C * 4), hbm(R * C * 4), hbm(R * C * 4),
                       tile(NRT_NC_SBUF, R, C * 4), tile(NRT_NC_SBUF, R, C * 4),
                       tile(NRT_NC_SBUF, R, C * 2)};
  nrt_nc_inst in[5];
  in[0] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[0].ap[0] = ap2d(3, NRT_NC_FLOAT32, R, 1, C, 0);
  in[0].ap[1] = ap2d(0, NRT_NC_FLOAT32, R, C, C, 0);
  in[1] = in[0];
  in[1].ap[0].tensor = 4;
  in[1].ap[1].tensor = 1;
  in[2] = inst_of(NRT_NC_TENSOR_TENSOR, NRT_NC_ENGINE_VECTOR);
  in[2].func[0] = NRT_NC_ALU_ADD;
  in[2].ap[0] = ap2d(5, NRT_NC_BFLOAT16, R, 1, C, 0);
  in[2].ap[1] = ap2d(3, NRT_NC_FLOAT32, R, 1, C, 0);
  in[2].ap[2] = ap2d(4, NRT_NC_FLOAT32, R, 1, C, 0);
  in[3] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[3].ap[0] = ap2d(2, NRT_NC_FLOAT32, R, C, C, 0);
  in[3].ap[1] = ap2d(5, NRT_NC_BFLOAT16, R, 1, C, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 4, t, 6, &prog, &diag));
  float *a = malloc(R * C * 4), *b = malloc(R * C * 4), *out = malloc(R * C * 4);
  for (int i = 0; i < R * C; i++) a[i] = (float)i * 0.25f, b[i] = 1.0f / (float)(i + 1);
  void *ptrs[] = {a, b, out, NULL, NULL, NULL};
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  int bad = 0;
  for (int i = 0; i < R * C; i++)
    bad += out[i] != rt_bfloat16_to_float(rt_bfloat16_from_float(a[i] + b[i]));
  CHECK(bad == 0);
  nrt_nc_estimate est;
  CHECK_OK(nrt_nc_program_estimate(prog, &est, NULL, NULL, NULL));
  CHECK(est.total_ns > 2 * 1300.0);
  CHECK(est.instructions[NRT_NC_ENGINE_DMA] == 3 && est.instructions[NRT_NC_ENGINE_VECTOR] == 1);
  CHECK(est.dma_bytes == 3 * R * C * 4);
  nrt_nc_program_destroy(prog);
  free(a), free(b), free(out);
}

/* Matmul with K accumulation through PSUM, optimised against reference.
 * special: if nonzero, stationary's element 5 (bf16 bits); first_acc: the
 * first matmul accumulates into the fresh PSUM tile (all-ones bits, NaN). */
static void run_matmul_with(int reference, int64_t k_total, int m, int n, float *out,
                            uint16_t special, int first_acc) {
  int kt = (int)((k_total + 127) / 128);
  nrt_nc_tensor t[] = {hbm(k_total * m * 2), hbm(k_total * n * 2), hbm((int64_t)m * n * 4),
                       tile(NRT_NC_SBUF, 128, (int64_t)kt * m * 2),
                       tile(NRT_NC_SBUF, 128, (int64_t)kt * n * 2), tile(NRT_NC_PSUM, m, n * 4),
                       tile(NRT_NC_SBUF, m, n * 4)};
  nrt_nc_inst in[64];
  int ni = 0;
  for (int k = 0; k < kt; k++) {
    int64_t rows = k_total - k * 128 < 128 ? k_total - k * 128 : 128;
    in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
    in[ni].ap[0] = ap2d(3, NRT_NC_BFLOAT16, (int32_t)rows, 1, m, (int64_t)k * m);
    in[ni++].ap[1] = ap2d(0, NRT_NC_BFLOAT16, (int32_t)rows, m, m, (int64_t)k * 128 * m);
    in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
    in[ni].ap[0] = ap2d(4, NRT_NC_BFLOAT16, (int32_t)rows, 1, n, (int64_t)k * n);
    in[ni++].ap[1] = ap2d(1, NRT_NC_BFLOAT16, (int32_t)rows, n, n, (int64_t)k * 128 * n);
    in[ni] = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
    in[ni].flags = k || first_acc ? NRT_NC_FLAG_ACCUMULATE : 0;
    in[ni].ap[0] = ap2d(5, NRT_NC_FLOAT32, m, 1, n, 0);
    in[ni].ap[1] = ap2d(3, NRT_NC_BFLOAT16, (int32_t)rows, 1, m, (int64_t)k * m);
    in[ni++].ap[2] = ap2d(4, NRT_NC_BFLOAT16, (int32_t)rows, 1, n, (int64_t)k * n);
  }
  in[ni] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  in[ni].ap[0] = ap2d(6, NRT_NC_FLOAT32, m, 1, n, 0);
  in[ni++].ap[1] = ap2d(5, NRT_NC_FLOAT32, m, 1, n, 0);
  in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[ni].ap[0] = ap2d(2, NRT_NC_FLOAT32, m, n, n, 0);
  in[ni++].ap[1] = ap2d(6, NRT_NC_FLOAT32, m, 1, n, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, ni, t, 7, &prog, &diag));
  uint16_t *a = malloc((size_t)k_total * m * 2), *b = malloc((size_t)k_total * n * 2);
  for (int64_t i = 0; i < k_total * m; i++) a[i] = rt_bfloat16_from_float(sinf((float)i));
  for (int64_t i = 0; i < k_total * n; i++) b[i] = rt_bfloat16_from_float(cosf((float)i * 0.7f));
  if (special) a[5] = special;
  void *ptrs[] = {a, b, out, NULL, NULL, NULL, NULL};
  nc_tensor_engine_force_reference(reference);
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  nc_tensor_engine_force_reference(0);
  if (first_acc || special) { /* only the bits of the paths are compared */
    nrt_nc_program_destroy(prog);
    free(a), free(b);
    return;
  }
  double worst = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t k = 0; k < k_total; k++)
        acc += (double)rt_bfloat16_to_float(a[k * m + i]) * rt_bfloat16_to_float(b[k * n + j]);
      double err = fabs(acc - out[i * n + j]);
      if (err > worst) worst = err;
    }
  CHECK(worst < 1e-3);
  nrt_nc_program_destroy(prog);
  free(a), free(b);
}

/* Every path gives the bits of the fp32 reference loop: the fp32 blocks,
 * the bf16 pair kernel (reference 0 with bf16 operands in its range) and
 * its reference twin (2), and the fallbacks from the pair path (odd K, a
 * denormal or out-of-range operand, a NaN accumulator). */
static void test_matmul_matches_reference(void) {
  int m = 128, n = 512;
  size_t bytes = (size_t)m * n * 4;
  float *fast = malloc(bytes), *ref = malloc(bytes), *twin = malloc(bytes);
  /* pairs: K tiles that take the pair path (special lands in tile 0). */
  struct { int64_t k; int m, n; uint16_t special; int first_acc, pairs; } cases[] = {
      {300, 128, 512, 0, 0, 3},      /* pair path, K tiles 128, 128, 44 */
      {256, 45, 70, 0, 0, 2},        /* edge blocks on the pair path */
      {77, 45, 70, 0, 0, 0},         /* odd K: fp32 path */
      {256, 128, 512, 0x0003, 0, 1}, /* a denormal operand: tile 0 on the fp32 path */
      {256, 128, 512, 0x1d80, 0, 1}, /* 2^-68: products could be denormal */
      {256, 128, 512, 0x6000, 0, 1}, /* 2^65: products could overflow */
      {256, 128, 512, 0, 1, 2},      /* NaN accumulator (fresh PSUM): reference blocks */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t b = (size_t)cases[i].m * cases[i].n * 4;
    long before = nc_tensor_engine_pair_products();
    run_matmul_with(0, cases[i].k, cases[i].m, cases[i].n, fast, cases[i].special, cases[i].first_acc);
    run_matmul_with(1, cases[i].k, cases[i].m, cases[i].n, ref, cases[i].special, cases[i].first_acc);
    run_matmul_with(2, cases[i].k, cases[i].m, cases[i].n, twin, cases[i].special, cases[i].first_acc);
    long used = nc_tensor_engine_pair_products() - before;
    /* Hosts with AVX512_BF16 (at the AVX-512 level) take the pair path in
     * the fast and twin runs, never in the reference run. */
    if (rt_isa_avx512_bf16()) CHECK(used == 2 * cases[i].pairs);
    else CHECK(used == 0);
    CHECK(memcmp(fast, ref, b) == 0);
    CHECK(memcmp(twin, ref, b) == 0);
  }
  (void)bytes;
  free(fast), free(ref), free(twin);
}

/* The cached packing of a moving tile: two matmuls read it (the second hits
 * the cache), a DMA overwrites it, a third matmul must see the new values. */
static void run_moving_reuse(int reference, float *out) {
  enum { K = 128, M = 128, N = 512 };
  nrt_nc_tensor t[] = {hbm(K * 2 * M * 2), hbm(K * N * 2), hbm(K * N * 2), hbm(3 * M * N * 4),
                       tile(NRT_NC_SBUF, K, 2 * M * 2), tile(NRT_NC_SBUF, K, N * 2),
                       tile(NRT_NC_PSUM, M, N * 4), tile(NRT_NC_PSUM, M, N * 4),
                       tile(NRT_NC_PSUM, M, N * 4), tile(NRT_NC_SBUF, M, 3 * N * 4)};
  nrt_nc_inst in[12];
  int ni = 0;
  in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[ni].ap[0] = ap2d(4, NRT_NC_BFLOAT16, K, 1, 2 * M, 0);
  in[ni++].ap[1] = ap2d(0, NRT_NC_BFLOAT16, K, 2 * M, 2 * M, 0);
  for (int step = 0; step < 3; step++) {
    if (step != 1) { /* load B (step 0), then overwrite the tile with B2 (step 2) */
      in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
      in[ni].ap[0] = ap2d(5, NRT_NC_BFLOAT16, K, 1, N, 0);
      in[ni++].ap[1] = ap2d(step ? 2 : 1, NRT_NC_BFLOAT16, K, N, N, 0);
    }
    in[ni] = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
    in[ni].ap[0] = ap2d(6 + step, NRT_NC_FLOAT32, M, 1, N, 0);
    in[ni].ap[1] = ap2d(4, NRT_NC_BFLOAT16, K, 1, M, step == 1 ? M : 0);
    in[ni++].ap[2] = ap2d(5, NRT_NC_BFLOAT16, K, 1, N, 0);
  }
  for (int step = 0; step < 3; step++) {
    in[ni] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
    in[ni].ap[0] = ap2d(9, NRT_NC_FLOAT32, M, 1, N, step * N);
    in[ni++].ap[1] = ap2d(6 + step, NRT_NC_FLOAT32, M, 1, N, 0);
  }
  in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[ni].ap[0] = ap2d(3, NRT_NC_FLOAT32, M, 3 * N, 3 * N, 0);
  in[ni++].ap[1] = ap2d(9, NRT_NC_FLOAT32, M, 1, 3 * N, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, ni, t, 10, &prog, &diag));
  uint16_t *a = malloc(K * 2 * M * 2), *b = malloc(K * N * 2), *b2 = malloc(K * N * 2);
  for (int i = 0; i < K * 2 * M; i++) a[i] = rt_bfloat16_from_float(sinf((float)i * 0.3f));
  for (int i = 0; i < K * N; i++) b[i] = rt_bfloat16_from_float(cosf((float)i * 0.7f));
  for (int i = 0; i < K * N; i++) b2[i] = rt_bfloat16_from_float(sinf((float)i * 1.3f + 0.5f));
  void *ptrs[] = {a, b, b2, out, NULL, NULL, NULL, NULL, NULL, NULL};
  nc_tensor_engine_force_reference(reference);
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  nc_tensor_engine_force_reference(0);
  nrt_nc_program_destroy(prog);
  free(a), free(b), free(b2);
}

static void test_moving_pack_cache(void) {
  size_t bytes = 3 * 128 * 512 * 4;
  float *fast = malloc(bytes), *ref = malloc(bytes);
  long hits = nc_tensor_engine_pack_hits(), misses = nc_tensor_engine_pack_misses();
  run_moving_reuse(0, fast);
  if (rt_isa_avx512_bf16()) {
    CHECK(nc_tensor_engine_pack_hits() - hits == 1);     /* the second matmul */
    CHECK(nc_tensor_engine_pack_misses() - misses == 2); /* the first and, after the DMA, the third */
  }
  run_moving_reuse(1, ref);
  CHECK(memcmp(fast, ref, bytes) == 0);
  /* The third product used B2, not the stale packing of B. */
  CHECK(memcmp(fast, fast + 2 * 128 * 512, 128 * 512 * 4) != 0);
  free(fast), free(ref);
}

/* The DMA after a matmul runs during it when the two touch disjoint memory
 * (overlap.c): a load into a fresh tile joins; a load into the tile the
 * matmul just read, or into a manual placement aliasing it, does not. The
 * result is that of the instructions run in order. */
static void test_copy_joins_matmul(void) {
  enum { K = 128, M = 128, N = 512, F = 65536 };
  nrt_nc_tensor t[] = {hbm(3 * K * M * 2), hbm(K * N * 2), hbm(M * N * 4),
                       tile(NRT_NC_SBUF, K, M * 2), tile(NRT_NC_SBUF, K, N * 2),
                       tile(NRT_NC_SBUF, K, M * 2), tile(NRT_NC_PSUM, M, N * 4),
                       tile(NRT_NC_SBUF, M, N * 4), tile(NRT_NC_SBUF, K, M * 2),
                       tile(NRT_NC_SBUF, K, M * 2)};
  t[8].fixed = t[9].fixed = 1; /* both at byte F: 9 aliases 8 */
  t[8].byte_offset = t[9].byte_offset = F;
  /* (stationary tile, block of A loaded into it first or -1) per matmul */
  static const int steps[][2] = {{3, 0}, {5, 1}, {5, 2}, {8, 0}, {9, 1}};
  nrt_nc_inst in[16];
  int ni = 0;
  in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[ni].ap[0] = ap2d(4, NRT_NC_BFLOAT16, K, 1, N, 0);
  in[ni++].ap[1] = ap2d(1, NRT_NC_BFLOAT16, K, N, N, 0);
  for (int s = 0; s < 5; s++) {
    in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
    in[ni].ap[0] = ap2d(steps[s][0], NRT_NC_BFLOAT16, K, 1, M, 0);
    in[ni++].ap[1] = ap2d(0, NRT_NC_BFLOAT16, K, M, M, (int64_t)steps[s][1] * K * M);
    in[ni] = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
    in[ni].flags = s ? NRT_NC_FLAG_ACCUMULATE : 0;
    in[ni].ap[0] = ap2d(6, NRT_NC_FLOAT32, M, 1, N, 0);
    in[ni].ap[1] = ap2d(steps[s][0], NRT_NC_BFLOAT16, K, 1, M, 0);
    in[ni++].ap[2] = ap2d(4, NRT_NC_BFLOAT16, K, 1, N, 0);
  }
  in[ni] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  in[ni].ap[0] = ap2d(7, NRT_NC_FLOAT32, M, 1, N, 0);
  in[ni++].ap[1] = ap2d(6, NRT_NC_FLOAT32, M, 1, N, 0);
  in[ni] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[ni].ap[0] = ap2d(2, NRT_NC_FLOAT32, M, N, N, 0);
  in[ni++].ap[1] = ap2d(7, NRT_NC_FLOAT32, M, 1, N, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, ni, t, 10, &prog, &diag));
  uint16_t *a = malloc(3 * K * M * 2), *b = malloc(K * N * 2);
  float *out = malloc(M * N * 4), *ref = malloc(M * N * 4);
  for (int i = 0; i < 3 * K * M; i++) a[i] = rt_bfloat16_from_float(sinf((float)i * 0.37f));
  for (int i = 0; i < K * N; i++) b[i] = rt_bfloat16_from_float(cosf((float)i * 0.7f));
  void *ptrs[] = {a, b, out, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  for (int reference = 0; reference < 2; reference++) {
    long joined = nc_exec_joined_copies();
    nc_tensor_engine_force_reference(reference);
    ptrs[2] = reference ? ref : out;
    CHECK_OK(nrt_nc_program_run(prog, ptrs));
    nc_tensor_engine_force_reference(0);
    /* block 1 into tile 5 and block 0 into tile 8 join (on a pool of
     * several threads); block 2 into tile 5 (just read) and block 1 into
     * tile 9 (over tile 8) do not */
    CHECK(nc_exec_joined_copies() - joined == (rt_num_threads() > 1 ? 2 : 0));
  }
  CHECK(memcmp(out, ref, M * N * 4) == 0);
  double worst = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int s = 0; s < 5; s++)
        for (int k = 0; k < K; k++)
          acc += (double)rt_bfloat16_to_float(a[(steps[s][1] * K + k) * M + i]) *
                 rt_bfloat16_to_float(b[k * N + j]);
      double err = fabs(acc - out[i * N + j]);
      if (err > worst) worst = err;
    }
  CHECK(worst < 1e-3);
  nrt_nc_program_destroy(prog);
  free(a), free(b), free(out), free(ref);
}

/* nc_matmul perf_mode=double_row: fp8 stationary [128, 2, 128] x moving
 * [128, 2, 512], the 256-term contraction partition-major (term 2p + j). */
static void run_double_row(int reference, uint8_t *a, uint8_t *b, float *out) {
  const int k = 128, m = 128, n = 512;
  nrt_nc_tensor t[] = {hbm(k * 2 * m), hbm(k * 2 * n), hbm((int64_t)m * n * 4),
                       tile(NRT_NC_SBUF, k, 2 * m), tile(NRT_NC_SBUF, k, 2 * n),
                       tile(NRT_NC_PSUM, m, n * 4), tile(NRT_NC_SBUF, m, n * 4)};
  nrt_nc_inst in[5];
  in[0] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[0].ap[0] = ap2d(3, NRT_NC_FLOAT8_E4M3, k, 1, 2 * m, 0);
  in[0].ap[1] = ap2d(0, NRT_NC_FLOAT8_E4M3, k, 2 * m, 2 * m, 0);
  in[1] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[1].ap[0] = ap2d(4, NRT_NC_FLOAT8_E5M2, k, 1, 2 * n, 0);
  in[1].ap[1] = ap2d(1, NRT_NC_FLOAT8_E5M2, k, 2 * n, 2 * n, 0);
  in[2] = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
  in[2].flags = NRT_NC_FLAG_DOUBLE_ROW;
  in[2].ap[0] = ap2d(5, NRT_NC_FLOAT32, m, 1, n, 0);
  in[2].ap[1] = ap2d(3, NRT_NC_FLOAT8_E4M3, k, 1, 2 * m, 0);
  in[2].ap[2] = ap2d(4, NRT_NC_FLOAT8_E5M2, k, 1, 2 * n, 0);
  in[3] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  in[3].ap[0] = ap2d(6, NRT_NC_FLOAT32, m, 1, n, 0);
  in[3].ap[1] = ap2d(5, NRT_NC_FLOAT32, m, 1, n, 0);
  in[4] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[4].ap[0] = ap2d(2, NRT_NC_FLOAT32, m, n, n, 0);
  in[4].ap[1] = ap2d(6, NRT_NC_FLOAT32, m, 1, n, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 5, t, 7, &prog, &diag));
  void *ptrs[] = {a, b, out, NULL, NULL, NULL, NULL};
  nc_tensor_engine_force_reference(reference);
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  nc_tensor_engine_force_reference(0);
  nrt_nc_program_destroy(prog);
}

static void test_double_row_matches_reference(void) {
  const int k = 128, m = 128, n = 512;
  uint8_t *a = malloc((size_t)k * 2 * m), *b = malloc((size_t)k * 2 * n);
  uint32_t x = 12345;
  /* Random finite fp8 bytes (exponent field never all ones). */
  for (int i = 0; i < k * 2 * m; i++) {
    x = x * 1664525u + 1013904223u;
    a[i] = (uint8_t)(x >> 24) & 0xf7;
  }
  for (int i = 0; i < k * 2 * n; i++) {
    x = x * 1664525u + 1013904223u;
    b[i] = (uint8_t)(x >> 24) & 0xbf;
  }
  float *fast = malloc((size_t)m * n * 4), *ref = malloc((size_t)m * n * 4);
  run_double_row(0, a, b, fast);
  run_double_row(1, a, b, ref);
  CHECK(memcmp(fast, ref, (size_t)m * n * 4) == 0);
  /* Bit-exact against the plain loop in the documented order. */
  int bad = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0;
      for (int p = 0; p < k; p++)
        for (int h = 0; h < 2; h++)
          acc = fmaf(nc_load(NRT_NC_FLOAT8_E4M3, a + p * 2 * m + h * m + i),
                     nc_load(NRT_NC_FLOAT8_E5M2, b + p * 2 * n + h * n + j), acc);
      bad += memcmp(&acc, &fast[i * n + j], 4) != 0;
    }
  CHECK(bad == 0);
  free(a), free(b), free(fast), free(ref);
}

static void test_rules(void) {
  nrt_nc_tensor t[] = {tile(NRT_NC_SBUF, 128, 128 * 2), tile(NRT_NC_SBUF, 128, 1024 * 2),
                       tile(NRT_NC_PSUM, 128, 2048)};
  nrt_nc_inst in = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
  in.ap[0] = ap2d(2, NRT_NC_FLOAT32, 128, 1, 512, 0);
  in.ap[1] = ap2d(0, NRT_NC_BFLOAT16, 128, 1, 128, 0);
  in.ap[2] = ap2d(1, NRT_NC_BFLOAT16, 128, 1, 1024, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_STATUS(create(&in, 1, t, 3, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "gemm_moving_fmax") == 0 && diag.inst == 0);
  CHECK(strstr(nrt_last_error(), "gemm_moving_fmax") != NULL);
  in.ap[2].count[0] = 512;
  in.ap[0].tensor = 1; /* dst in SBUF */
  CHECK_STATUS(create(&in, 1, t, 3, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "tensor_engine_writes_psum") == 0);
  /* 40 partitions starting at 8 break the partition-start rule. */
  nrt_nc_inst cp = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  cp.ap[0] = ap2d(0, NRT_NC_BFLOAT16, 40, 1, 64, 0);
  cp.ap[0].partition_start = 8;
  cp.ap[1] = cp.ap[0];
  cp.ap[1].tensor = 1;
  CHECK_STATUS(create(&cp, 1, t, 3, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "partition_start") == 0);
  /* Reading past the end of a tile. */
  cp.ap[0].partition_start = cp.ap[1].partition_start = 0;
  cp.ap[1].offset = 1000;
  CHECK_STATUS(create(&cp, 1, t, 3, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "out_of_bounds") == 0);
}

/* Records only the C API can malform: each is refused under its rule. */
static void expect_rule(const nrt_nc_inst *in, const nrt_nc_tensor *t, int32_t nt, const char *rule) {
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_STATUS(create(in, 1, t, nt, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, rule) == 0);
}

static void test_malformed_records(void) {
  nrt_nc_tensor t[] = {tile(NRT_NC_SBUF, 128, 512), tile(NRT_NC_SBUF, 128, 512)};
  nrt_nc_inst cp = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  cp.ap[0] = ap2d(0, NRT_NC_FLOAT32, 128, 1, 128, 0);
  cp.ap[1] = ap2d(1, NRT_NC_FLOAT32, 128, 1, 128, 0);
  nrt_nc_inst bad = cp;
  bad.opcode = 99;
  expect_rule(&bad, t, 2, "opcode");
  bad = cp;
  bad.ap[1].tensor = 5;
  expect_rule(&bad, t, 2, "operand");
  bad = cp;
  bad.ap[0] = none();
  expect_rule(&bad, t, 2, "operand");
  bad = cp;
  bad.ap[1].dtype = 99;
  expect_rule(&bad, t, 2, "dtype");
  bad = cp;
  bad.ap[1].count[0] = 0;
  expect_rule(&bad, t, 2, "shape");
  bad = cp;
  bad.ap[1].num_free = 5;
  expect_rule(&bad, t, 2, "max_free_dims");
  nrt_nc_tensor broken[] = {t[0], {.buffer = 7, .bytes = 4}};
  expect_rule(&cp, broken, 2, "tensor");
  nrt_nc_tensor with_psum[] = {tile(NRT_NC_PSUM, 128, 512), t[1]};
  nrt_nc_inst mm = inst_of(NRT_NC_MATMUL, NRT_NC_ENGINE_TENSOR);
  mm.ap[0] = ap2d(0, NRT_NC_FLOAT32, 128, 1, 128, 0);
  mm.ap[1] = ap2d(1, NRT_NC_BFLOAT16, 128, 1, 128, 0);
  expect_rule(&mm, with_psum, 2, "operand"); /* no moving operand */
}

/* A compiled loop: cnt += 3 while i < n (n read at run time), i += 1. */
static void loop_program(nrt_nc_inst in[8], nrt_nc_tensor t[5], double trips) {
  t[0] = hbm(4), t[1] = hbm(4);
  for (int k = 2; k < 5; k++) t[k] = tile(NRT_NC_SBUF, 1, 4);
  in[0] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA); /* bound = n */
  in[0].ap[0] = ap2d(4, NRT_NC_INT32, 1, 1, 1, 0);
  in[0].ap[1] = ap2d(0, NRT_NC_INT32, 1, 1, 1, 0);
  for (int k = 1; k <= 2; k++) { /* i = 0, cnt = 0 */
    in[k] = inst_of(NRT_NC_MEMSET, NRT_NC_ENGINE_VECTOR);
    in[k].ap[0] = ap2d(k + 1, NRT_NC_INT32, 1, 1, 1, 0);
  }
  in[3] = inst_of(NRT_NC_BRANCH, NRT_NC_ENGINE_VECTOR); /* exit when i >= bound */
  in[3].ap[0] = ap2d(2, NRT_NC_INT32, 1, 1, 1, 0);
  in[3].ap[1] = ap2d(4, NRT_NC_INT32, 1, 1, 1, 0);
  in[3].func[0] = NRT_NC_ALU_GREATER_EQUAL;
  in[3].imm[0] = 7, in[3].imm[2] = trips;
  for (int k = 4; k <= 5; k++) { /* cnt += 3; i += 1 */
    int32_t word = k == 4 ? 3 : 2;
    in[k] = inst_of(NRT_NC_SCALAR_INT, NRT_NC_ENGINE_VECTOR);
    in[k].ap[0] = in[k].ap[1] = ap2d(word, NRT_NC_INT32, 1, 1, 1, 0);
    in[k].func[0] = NRT_NC_ALU_ADD;
    in[k].imm[0] = k == 4 ? 3 : 1;
  }
  in[6] = inst_of(NRT_NC_BRANCH, NRT_NC_ENGINE_VECTOR); /* back to the head */
  in[6].imm[0] = 3;
  in[7] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA); /* out = cnt */
  in[7].ap[0] = ap2d(1, NRT_NC_INT32, 1, 1, 1, 0);
  in[7].ap[1] = ap2d(3, NRT_NC_INT32, 1, 1, 1, 0);
}

static void test_compiled_loops(void) {
  nrt_nc_inst in[8];
  nrt_nc_tensor t[5];
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  loop_program(in, t, 4);
  CHECK_OK(create(in, 8, t, 5, &prog, &diag));
  for (int32_t n = 0; n <= 6; n += 3) {
    int32_t out = -1;
    void *ptrs[] = {&n, &out, NULL, NULL, NULL};
    CHECK_OK(nrt_nc_program_run(prog, ptrs));
    CHECK(out == 3 * n);
  }
  /* The estimate runs the body its trip count (imm2) times. */
  nrt_nc_estimate est;
  CHECK_OK(nrt_nc_program_estimate(prog, &est, NULL, NULL, NULL));
  CHECK(est.instructions[NRT_NC_ENGINE_VECTOR] == 2 + 2 * 4);
  nrt_nc_program_destroy(prog);
  /* Rules: a target inside the program, a forward jump only when it
   * compares, a comparison, 32-bit integer words. */
  loop_program(in, t, 4);
  in[6].imm[0] = 99;
  CHECK_STATUS(create(in, 8, t, 5, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "loop") == 0 && diag.inst == 6);
  loop_program(in, t, 4);
  in[6].imm[0] = 7;
  CHECK_STATUS(create(in, 8, t, 5, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "loop") == 0);
  loop_program(in, t, 4);
  in[3].func[0] = NRT_NC_ALU_ADD;
  CHECK_STATUS(create(in, 8, t, 5, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "loop") == 0);
  loop_program(in, t, 4);
  in[3].ap[1].dtype = NRT_NC_FLOAT32;
  CHECK_STATUS(create(in, 8, t, 5, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "loop_operand") == 0);
}

static void test_capacity_and_reuse(void) {
  /* Ten live 32 KiB tiles do not fit a 224 KiB partition; tiles that die
   * in turn do. */
  enum { N = 10 };
  nrt_nc_tensor t[N];
  nrt_nc_inst in[2 * N];
  for (int i = 0; i < N; i++) {
    t[i] = tile(NRT_NC_SBUF, 128, 32 * 1024);
    in[i] = inst_of(NRT_NC_MEMSET, NRT_NC_ENGINE_VECTOR);
    in[i].ap[0] = ap2d(i, NRT_NC_FLOAT32, 128, 1, 8 * 1024, 0);
    in[N + i] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
    in[N + i].ap[0] = ap2d(i, NRT_NC_FLOAT32, 128, 1, 8 * 1024, 0);
    in[N + i].ap[1] = in[N + i].ap[0];
  }
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_STATUS(create(in, 2 * N, t, N, &prog, &diag), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strcmp(diag.rule, "sbuf_capacity") == 0 && diag.inst == 7);
  CHECK_OK(create(in, N, t, N, &prog, &diag));
  nrt_nc_program_destroy(prog);
}

static void test_fresh_memory_is_nan(void) {
  nrt_nc_tensor t[] = {hbm(16 * 4), tile(NRT_NC_SBUF, 4, 16)};
  nrt_nc_inst in = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in.ap[0] = ap2d(0, NRT_NC_FLOAT32, 4, 4, 4, 0);
  in.ap[1] = ap2d(1, NRT_NC_FLOAT32, 4, 1, 4, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(&in, 1, t, 2, &prog, &diag));
  float out[16] = {0};
  void *ptrs[] = {out, NULL};
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  for (int i = 0; i < 16; i++) CHECK(isnan(out[i]));
  nrt_nc_program_destroy(prog);
}

static void test_numerics(void) {
  CHECK(nc_fp8_to_float(nc_fp8_from_float(1.0f, 4, 3), 4, 3) == 1.0f);
  CHECK(nc_fp8_to_float(nc_fp8_from_float(240.0f, 4, 3), 4, 3) == 240.0f);
  CHECK(isinf(nc_fp8_to_float(nc_fp8_from_float(1000.0f, 4, 3), 4, 3)));
  CHECK(nc_fp8_to_float(nc_fp8_from_float(57344.0f, 5, 2), 5, 2) == 57344.0f);
  CHECK(nc_fp8_to_float(nc_fp8_from_float(0.09375f, 4, 3), 4, 3) == 0.09375f);
  /* 1.0625 is halfway between 1.0 and 1.125 in e4m3: ties to even (1.0). */
  CHECK(nc_fp8_to_float(nc_fp8_from_float(1.0625f, 4, 3), 4, 3) == 1.0f);
  CHECK(nc_fp8_to_float(nc_fp8_from_float(ldexpf(1.0f, -9), 4, 3), 4, 3) == ldexpf(1.0f, -9));
  CHECK(nc_sat_int(300.0f, INT8_MIN, INT8_MAX) == 127 && nc_sat_int(NAN, 0, 255) == 0);
  CHECK(nc_sat_int(2.5f, INT8_MIN, INT8_MAX) == 2);
  CHECK(nc_tf32_round(1.0f + ldexpf(1.0f, -11)) == 1.0f);
}

/* out = in * in for N fp32 values through one SBUF partition. */
enum { SQ_N = 64 };

static void square_program(nrt_nc_inst in[3], nrt_nc_tensor t[3]) {
  t[0] = hbm(SQ_N * 4);
  t[1] = hbm(SQ_N * 4);
  t[2] = tile(NRT_NC_SBUF, 1, SQ_N * 4);
  in[0] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[0].ap[0] = ap2d(2, NRT_NC_FLOAT32, 1, 0, SQ_N, 0);
  in[0].ap[1] = ap2d(0, NRT_NC_FLOAT32, 1, 0, SQ_N, 0);
  in[1] = inst_of(NRT_NC_ACTIVATION, NRT_NC_ENGINE_SCALAR);
  in[1].func[0] = NRT_NC_ACT_SQUARE;
  in[1].imm[0] = 1.0;
  in[1].ap[0] = in[1].ap[1] = in[0].ap[0];
  in[2] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[2].ap[0] = ap2d(1, NRT_NC_FLOAT32, 1, 0, SQ_N, 0);
  in[2].ap[1] = in[0].ap[0];
}

/* The square program launched on a stream over device memory. */
static void test_launch_on_device_memory(void) {
  nrt_nc_tensor t[3];
  nrt_nc_inst in[3];
  square_program(in, t);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 3, t, 3, &prog, &diag));
  void *src, *dst;
  CHECK_OK(nrt_malloc(0, SQ_N * 4, &src));
  CHECK_OK(nrt_malloc(0, SQ_N * 4, &dst));
  float host[SQ_N], out[SQ_N];
  for (int i = 0; i < SQ_N; i++) host[i] = (float)i;
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_get_default(0, &stream));
  CHECK_OK(nrt_memcpy_async(stream, src, host, sizeof host));
  void *ptrs[] = {src, dst, NULL};
  CHECK_OK(nrt_nc_program_launch(stream, prog, ptrs, "square"));
  CHECK_OK(nrt_nc_program_destroy(prog)); /* the queued launch keeps it alive */
  CHECK_OK(nrt_memcpy_async(stream, out, dst, sizeof out));
  for (int i = 0; i < SQ_N; i++) CHECK(out[i] == (float)(i * i));
  /* Host memory is not device memory: the launch refuses it. */
  CHECK_OK(create(in, 3, t, 3, &prog, &diag));
  void *host_ptrs[] = {host, out, NULL};
  CHECK_STATUS(nrt_nc_program_launch(stream, prog, host_ptrs, "square"),
               NRT_ERROR_INVALID_ARGUMENT);
  nrt_nc_program_destroy(prog);
  nrt_free(src);
  nrt_free(dst);
}

/* A launch that fails while it runs leaves a sticky error naming it, which
 * every later synchronisation returns; launches queued behind it are
 * skipped, and the stream works again once the error is cleared. */
static void test_launch_errors_are_sticky(void) {
  nrt_nc_tensor t[3];
  nrt_nc_inst in[3];
  square_program(in, t);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 3, t, 3, &prog, &diag));
  void *src, *dst;
  CHECK_OK(nrt_malloc(0, SQ_N * 4, &src));
  CHECK_OK(nrt_malloc(0, SQ_N * 4, &dst));
  float host[SQ_N], out[SQ_N], zeros[SQ_N] = {0};
  for (int i = 0; i < SQ_N; i++) host[i] = (float)i + 1;
  nrt_stream_t stream;
  CHECK_OK(nrt_stream_create(0, NRT_STREAM_PRIORITY_NORMAL, &stream));
  CHECK_OK(nrt_memcpy_async(stream, src, host, sizeof host));
  CHECK_OK(nrt_memcpy_async(stream, dst, zeros, sizeof zeros));
  void *ptrs[] = {src, dst, NULL};
  nrt_nc_inject_run_failures(1);
  CHECK_OK(nrt_nc_program_launch(stream, prog, ptrs, "first"));
  CHECK_SKIPPED_OR_REFUSED(nrt_nc_program_launch(stream, prog, ptrs, "second"),
                           NRT_ERROR_OUT_OF_MEMORY);
  CHECK_STATUS(nrt_stream_synchronize(stream), NRT_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(nrt_last_error(), "first: out of host memory") != NULL);
  CHECK_STATUS(nrt_memcpy_async(stream, out, dst, sizeof out), NRT_ERROR_OUT_OF_MEMORY);
  CHECK_OK(nrt_stream_clear_error(stream));
  CHECK_OK(nrt_memcpy_async(stream, out, dst, sizeof out));
  for (int i = 0; i < SQ_N; i++) CHECK(out[i] == 0.0f);
  CHECK_OK(nrt_nc_program_launch(stream, prog, ptrs, "third"));
  CHECK_OK(nrt_memcpy_async(stream, out, dst, sizeof out));
  for (int i = 0; i < SQ_N; i++) CHECK(out[i] == host[i] * host[i]);
  CHECK_OK(nrt_stream_destroy(stream));
  nrt_nc_program_destroy(prog);
  nrt_free(src);
  nrt_free(dst);
}

/* A manual placement holds its bytes for the whole program: an automatic
 * tile that is live at the same time goes elsewhere. */
static void test_manual_placements_are_reserved(void) {
  nrt_nc_tensor t[] = {tile(NRT_NC_SBUF, 128, 4096), tile(NRT_NC_SBUF, 128, 4096)};
  t[1].fixed = 1; /* at (0, 0), first used after the automatic tile */
  nrt_nc_inst in[3];
  in[0] = inst_of(NRT_NC_MEMSET, NRT_NC_ENGINE_VECTOR);
  in[0].ap[0] = ap2d(0, NRT_NC_FLOAT32, 128, 1, 1024, 0);
  in[1] = in[0];
  in[1].ap[0].tensor = 1;
  in[2] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  in[2].ap[0] = in[0].ap[0];
  in[2].ap[1] = in[1].ap[0];
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 3, t, 2, &prog, &diag));
  int32_t partition;
  int64_t offset;
  CHECK_OK(nrt_nc_program_placement(prog, 0, &partition, &offset));
  CHECK(offset >= 4096);
  CHECK_OK(nrt_nc_program_placement(prog, 1, &partition, &offset));
  CHECK(partition == 0 && offset == 0);
  nrt_nc_program_destroy(prog);
}


/* Brute-force nearest finite code of x (ties to the even code, saturating):
 * the oracle of nc_mx_encode, from nc_mx_decode's values of every code. */
static uint32_t mx_oracle(const nc_mx_format *f, float x) {
  uint32_t sign = signbit(x) ? 1u << (f->bits - 1) : 0u;
  if (isnan(x)) return f->nan_code >= 0 ? sign | (uint32_t)f->nan_code : 0u;
  /* Past twice the largest value every distance is exact and the largest wins. */
  double top = (double)nc_mx_decode(f, f->max_code), a = fmin(fabs((double)x), 2 * top);
  double best = INFINITY;
  uint32_t code = 0;
  for (uint32_t c = 0; c <= f->max_code; c++) {
    double d = fabs((double)nc_mx_decode(f, c) - a);
    if (d < best || (d == best && (c & 1u) == 0)) {
      best = d;
      code = c;
    }
  }
  return sign | code;
}

static void test_mx_numerics(void) {
  const nc_mx_format *formats[] = {&NC_MX_E4M3FN, &NC_MX_E5M2, &NC_MX_E2M1FN};
  CHECK(nc_mx_decode(&NC_MX_E4M3FN, 0x7e) == 448.0f && isnan(nc_mx_decode(&NC_MX_E4M3FN, 0xff)));
  CHECK(nc_mx_decode(&NC_MX_E4M3FN, 0x01) == ldexpf(1.0f, -9));
  CHECK(nc_mx_decode(&NC_MX_E5M2, 0x7b) == 57344.0f && isinf(nc_mx_decode(&NC_MX_E5M2, 0xfc)));
  CHECK(nc_mx_decode(&NC_MX_E2M1FN, 0x7) == 6.0f && nc_mx_decode(&NC_MX_E2M1FN, 0x9) == -0.5f);
  CHECK(nc_mx_emax(&NC_MX_E4M3FN) == 8 && nc_mx_emax(&NC_MX_E5M2) == 15 &&
        nc_mx_emax(&NC_MX_E2M1FN) == 2);
  CHECK(isnan(nc_e8m0_decode(255)) && nc_e8m0_decode(127) == 1.0f &&
        nc_e8m0_decode(0) == ldexpf(1.0f, -127));
  /* Every float16 and every bfloat16 value (the inputs quantize_mx reads). */
  int bad = 0;
  for (int k = 0; k < 3; k++)
    for (uint32_t bits = 0; bits < 0x10000; bits++) {
      float h = rt_half_to_float((uint16_t)bits), b = rt_bfloat16_to_float((uint16_t)bits);
      if (nc_mx_encode(formats[k], h) != mx_oracle(formats[k], h)) bad++;
      if (nc_mx_encode(formats[k], b) != mx_oracle(formats[k], b)) bad++;
    }
  CHECK(bad == 0);
}

/* tensor_copy_dynamic_src: a Vector copy whose src window starts where an
 * int32 SBUF word says when the program runs; its rules and a start past
 * the tile failing the run. */
static void test_dynamic_copy(void) {
  enum { P = 4, F = 16, W = 5 };
  nrt_nc_tensor t[] = {hbm(P * F * 4), hbm(4), hbm(P * W * 4), tile(NRT_NC_SBUF, P, F * 4),
                       tile(NRT_NC_SBUF, 1, 4), tile(NRT_NC_SBUF, P, W * 4)};
  nrt_nc_inst in[4];
  in[0] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[0].ap[0] = ap2d(3, NRT_NC_FLOAT32, P, 1, F, 0);
  in[0].ap[1] = ap2d(0, NRT_NC_FLOAT32, P, F, F, 0);
  in[1] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[1].ap[0] = ap2d(4, NRT_NC_INT32, 1, 1, 1, 0);
  in[1].ap[1] = ap2d(1, NRT_NC_INT32, 1, 1, 1, 0);
  in[2] = inst_of(NRT_NC_TENSOR_COPY, NRT_NC_ENGINE_VECTOR);
  in[2].flags = NRT_NC_FLAG_SCALAR_OFFSET | NRT_NC_FLAG_INDIRECT_SRC;
  in[2].ap[0] = ap2d(5, NRT_NC_FLOAT32, P, 1, W, 0);
  in[2].ap[1] = ap2d(3, NRT_NC_FLOAT32, P, 1, W, 0);
  in[2].ap[2] = ap2d(4, NRT_NC_INT32, 1, 1, 1, 0);
  in[2].imm[2] = F - W + 1, in[2].imm[3] = 1;
  in[3] = inst_of(NRT_NC_DMA_COPY, NRT_NC_ENGINE_DMA);
  in[3].ap[0] = ap2d(2, NRT_NC_FLOAT32, P, W, W, 0);
  in[3].ap[1] = ap2d(5, NRT_NC_FLOAT32, P, 1, W, 0);
  nrt_nc_program_t prog;
  nrt_nc_diagnostic diag;
  CHECK_OK(create(in, 4, t, 6, &prog, &diag));
  float x[P * F], out[P * W];
  for (int i = 0; i < P * F; i++) x[i] = (float)i;
  int32_t start = 7;
  void *ptrs[] = {x, &start, out, NULL, NULL, NULL};
  CHECK_OK(nrt_nc_program_run(prog, ptrs));
  int bad = 0;
  for (int p = 0; p < P; p++)
    for (int j = 0; j < W; j++) bad += out[p * W + j] != x[p * F + start + j];
  CHECK(bad == 0);
  start = F - W + 1; /* one past the last window */
  CHECK(nrt_nc_program_run(prog, ptrs) != NRT_SUCCESS);
  CHECK(strstr(nrt_last_error(), "out of bounds") != NULL);
  nrt_nc_program_destroy(prog);
  /* the word is one int32; the windows the word may name stay in the tile */
  nrt_nc_inst bad_word[4], bad_reach[4];
  memcpy(bad_word, in, sizeof in), memcpy(bad_reach, in, sizeof in);
  bad_word[2].ap[2].dtype = NRT_NC_FLOAT32;
  CHECK_STATUS(create(bad_word, 4, t, 6, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "indirect_indices") == 0 && diag.inst == 2);
  bad_reach[2].imm[2] = F - W + 2;
  CHECK_STATUS(create(bad_reach, 4, t, 6, &prog, &diag), NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(diag.rule, "dynamic_start") == 0 && diag.inst == 2);
}

int main(void) {
  RUN(test_add_program);
  RUN(test_matmul_matches_reference);
  RUN(test_moving_pack_cache);
  RUN(test_copy_joins_matmul);
  RUN(test_double_row_matches_reference);
  RUN(test_rules);
  RUN(test_malformed_records);
  RUN(test_compiled_loops);
  RUN(test_capacity_and_reuse);
  RUN(test_fresh_memory_is_nan);
  RUN(test_numerics);
  RUN(test_mx_numerics);
  RUN(test_launch_on_device_memory);
  RUN(test_launch_errors_are_sticky);
  RUN(test_manual_placements_are_reserved);
  RUN(test_dynamic_copy);
  return CHECK_MAIN_RESULT();
}
