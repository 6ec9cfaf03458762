/* The Tensor engine: nc_matmul and the PE-array transpose.
 *
 * A matmul instruction multiplies stationary [K, M] by moving [K, N] into a
 * PSUM tile [M, N] in fp32 (K <= 128, M <= 128, N <= 512). Each element is
 * accumulated over k in order with fused multiply-adds, so every kernel
 * below gives bit-identical results. Operands are converted to fp32 rows,
 * then a BLIS-style macro loop (portable C) walks 8 x 32 blocks of the
 * result and hands full blocks to a register-blocked micro-kernel chosen
 * once at run time (AVX-512, AVX2+FMA, or the plain reference twin, which
 * also covers edge blocks). Row blocks are shared out on the kernel thread
 * pool. When the destination rows are contiguous fp32 (the usual PSUM
 * tile), the kernel accumulates straight into PSUM.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "ops/engine/thread_pool.h"
#include "nc/access.h"

#define MR 8
#define NR 32
#define MAX_K 128
#define MAX_M 128
#define MAX_N 512

/* C[m0.., n0..] += sum_k A[k][m] * B[k][n] over an mr x nr block. A has rows
 * of lda floats (index m), B and C rows of ldb / ldc floats (index n). */
typedef void (*block_fn)(int64_t k_count, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int64_t mr, int64_t nr);

static void block_reference(int64_t k_count, const float *a, int64_t lda, const float *b,
                            int64_t ldb, float *c, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t m = 0; m < mr; m++)
    for (int64_t n = 0; n < nr; n++) {
      float acc = c[m * ldc + n];
      for (int64_t k = 0; k < k_count; k++) acc = fmaf(a[k * lda + m], b[k * ldb + n], acc);
      c[m * ldc + n] = acc;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "cpu_isa.h"

__attribute__((target("avx512f"))) static void block_avx512(int64_t k_count, const float *a,
                                                             int64_t lda, const float *b,
                                                             int64_t ldb, float *c, int64_t ldc,
                                                             int64_t mr, int64_t nr) {
  (void)mr, (void)nr; /* always MR x NR */
  __m512 acc[MR][2];
  for (int m = 0; m < MR; m++) {
    acc[m][0] = _mm512_loadu_ps(c + m * ldc);
    acc[m][1] = _mm512_loadu_ps(c + m * ldc + 16);
  }
  for (int64_t k = 0; k < k_count; k++) {
    __m512 b0 = _mm512_loadu_ps(b + k * ldb), b1 = _mm512_loadu_ps(b + k * ldb + 16);
    const float *ak = a + k * lda;
    for (int m = 0; m < MR; m++) {
      __m512 am = _mm512_set1_ps(ak[m]);
      acc[m][0] = _mm512_fmadd_ps(am, b0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(am, b1, acc[m][1]);
    }
  }
  for (int m = 0; m < MR; m++) {
    _mm512_storeu_ps(c + m * ldc, acc[m][0]);
    _mm512_storeu_ps(c + m * ldc + 16, acc[m][1]);
  }
}

/* AVX2 has 16 registers: the 8 x 32 block runs as two 8 x 16 halves. */
__attribute__((target("avx2,fma"))) static void block_avx2(int64_t k_count, const float *a,
                                                           int64_t lda, const float *b, int64_t ldb,
                                                           float *c, int64_t ldc, int64_t mr,
                                                           int64_t nr) {
  (void)mr, (void)nr;
  for (int half = 0; half < 2; half++) {
    const float *bh = b + half * 16;
    float *ch = c + half * 16;
    __m256 acc[MR][2];
    for (int m = 0; m < MR; m++) {
      acc[m][0] = _mm256_loadu_ps(ch + m * ldc);
      acc[m][1] = _mm256_loadu_ps(ch + m * ldc + 8);
    }
    for (int64_t k = 0; k < k_count; k++) {
      __m256 b0 = _mm256_loadu_ps(bh + k * ldb), b1 = _mm256_loadu_ps(bh + k * ldb + 8);
      const float *ak = a + k * lda;
      for (int m = 0; m < MR; m++) {
        __m256 am = _mm256_broadcast_ss(ak + m);
        acc[m][0] = _mm256_fmadd_ps(am, b0, acc[m][0]);
        acc[m][1] = _mm256_fmadd_ps(am, b1, acc[m][1]);
      }
    }
    for (int m = 0; m < MR; m++) {
      _mm256_storeu_ps(ch + m * ldc, acc[m][0]);
      _mm256_storeu_ps(ch + m * ldc + 8, acc[m][1]);
    }
  }
}
#endif

static block_fn full_block = block_reference;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static void select_kernel(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (rt_isa() >= NRT_ISA_AVX512) full_block = block_avx512;
  else if (rt_isa() >= NRT_ISA_AVX2) full_block = block_avx2;
#endif
}

typedef struct matmul_job {
  int64_t k, m, n;
  const float *a, *b;
  float *c;
  int64_t ldc;
  int reference; /* force the reference twin (tests) */
} matmul_job;

static void matmul_rows(int64_t begin, int64_t end, void *ctx) {
  const matmul_job *job = ctx;
  block_fn fast = job->reference ? block_reference : full_block;
  for (int64_t n0 = 0; n0 < job->n; n0 += NR)
    for (int64_t mb = begin; mb < end; mb++) {
      int64_t m0 = mb * MR, mr = job->m - m0 < MR ? job->m - m0 : MR;
      int64_t nr = job->n - n0 < NR ? job->n - n0 : NR;
      block_fn fn = (mr == MR && nr == NR) ? fast : block_reference;
      fn(job->k, job->a + m0, job->m, job->b + n0, job->n, job->c + m0 * job->ldc + n0, job->ldc,
         mr, nr);
    }
}

/* Whether partition rows of ap are n contiguous fp32 elements. */
static int contiguous_f32_rows(const nrt_nc_ap *ap, int64_t n) {
  return ap->dtype == NRT_NC_FLOAT32 && ap->count[3] == n && ap->stride[3] == 1;
}

static int force_reference;

/* For tests: 1 makes every block use the reference twin. */
void nc_tensor_engine_force_reference(int on);
void nc_tensor_engine_force_reference(int on) { force_reference = on; }

/* Partition rows [begin, end) of both operands, converted to fp32. */
typedef struct operand_job {
  const nc_core *core;
  const nrt_nc_ap *st, *mv;
  float *a, *b;
  int64_t m, n;
} operand_job;

static void gather_operands(int64_t begin, int64_t end, void *ctx) {
  const operand_job *job = ctx;
  for (int64_t p = begin; p < end; p++) {
    nc_gather_f32(job->core, job->st, p, job->a + p * job->m);
    nc_gather_f32(job->core, job->mv, p, job->b + p * job->n);
  }
}

void nc_exec_matmul(const nc_core *core, const nrt_nc_inst *inst, float *scratch) {
  pthread_once(&select_once, select_kernel);
  const nrt_nc_ap *dst = &inst->ap[0], *st = &inst->ap[1], *mv = &inst->ap[2];
  int64_t k = st->partitions, m = nc_ap_free_elems(st), n = nc_ap_free_elems(mv);
  /* double_row: partition p's row of stationary is [2, M] (and moving's
   * [2, N]); gathered as it is, row p holds terms 2p and 2p + 1 of a 2K-term
   * contraction, which the same kernels run partition-major (the order in
   * which a PE adds its pair of products before passing the sum on). */
  int pairs = (inst->flags & NRT_NC_FLAG_DOUBLE_ROW) != 0;
  float *a = scratch, *b = a + 2 * MAX_K * MAX_M, *c = b + 2 * MAX_K * MAX_N;
  operand_job ops = {.core = core, .st = st, .mv = mv, .a = a, .b = b, .m = m, .n = n};
  if (pairs) k *= 2, m /= 2, n /= 2;
  int big = m * n * k >= (int64_t)1 << 18; /* small products are not worth waking the pool for */
  /* Converting the operands is a serial share of the time unless it is split too. */
  if (big) rt_parallel_for(st->partitions, 16, gather_operands, &ops);
  else gather_operands(0, st->partitions, &ops);
  int accumulate = (inst->flags & NRT_NC_FLAG_ACCUMULATE) != 0;
  /* PSUM rows are one partition apart: accumulate in place when possible. */
  int in_place = contiguous_f32_rows(dst, n) && (dst->partitions == 1 || dst->partition_step == 1);
  float *out = in_place ? (float *)(void *)nc_row(core, dst, 0) : c;
  int64_t ldc = in_place ? core->psum_partition_bytes / 4 : n;
  for (int64_t r = 0; r < m; r++) {
    if (!accumulate) memset(out + r * ldc, 0, (size_t)n * sizeof(float));
    else if (!in_place) nc_gather_f32(core, dst, r, out + r * ldc);
  }
  matmul_job job = {.k = k, .m = m, .n = n, .a = a, .b = b, .c = out, .ldc = ldc,
                    .reference = force_reference};
  int64_t row_blocks = (m + MR - 1) / MR;
  if (big) rt_parallel_for(row_blocks, 1, matmul_rows, &job);
  else matmul_rows(0, row_blocks, &job);
  if (!in_place)
    for (int64_t r = 0; r < m; r++) nc_scatter_f32(core, dst, r, out + r * ldc);
}

/* c[m][n] (rows ldc apart) += sum over k of a[k][m] * b[k][n], fp32 with
 * in-order fused multiply-adds, on the same blocked kernels as nc_matmul
 * (exec_mx.c's nc_matmul_mx, whose k is partitions x 4 values). */
void nc_tensor_engine_gemm(int64_t k, int64_t m, int64_t n, const float *a, const float *b,
                           float *c, int64_t ldc);
void nc_tensor_engine_gemm(int64_t k, int64_t m, int64_t n, const float *a, const float *b,
                           float *c, int64_t ldc) {
  pthread_once(&select_once, select_kernel);
  matmul_job job = {.k = k, .m = m, .n = n, .a = a, .b = b, .c = c, .ldc = ldc,
                    .reference = force_reference};
  int64_t row_blocks = (m + MR - 1) / MR;
  if (m * n * k >= (int64_t)1 << 18) rt_parallel_for(row_blocks, 1, matmul_rows, &job);
  else matmul_rows(0, row_blocks, &job);
}

void nc_exec_transpose(const nc_core *core, const nrt_nc_inst *inst, float *scratch) {
  const nrt_nc_ap *dst = &inst->ap[0], *src = &inst->ap[1];
  int64_t rows = src->partitions, cols = nc_ap_free_elems(src);
  float *t = scratch, *row = scratch + rows * cols;
  for (int64_t p = 0; p < rows; p++) nc_gather_f32(core, src, p, t + p * cols);
  for (int64_t f = 0; f < cols; f++) {
    for (int64_t p = 0; p < rows; p++) row[p] = t[p * cols + f];
    nc_scatter_f32(core, dst, f, row);
  }
}
