/* The GEMM driver: argument checks, the choice of path, block sizes, and the
 * BLIS loops around the micro-kernel.
 *
 * Work is cut into units (batch item, column block of nc, row block of mc).
 * When all of B, packed, fits SHARED_B_MAX (every training-sized product),
 * B is packed once, k chunk by k chunk, into a buffer shared by the pool
 * (split by panel), and A too when columns are split into several blocks
 * (each would repack it); the threads claim packing tasks and units one at
 * a time, in order, from one sequence over all chunks (run_pipeline): no
 * thread packs B twice, the next chunk is packed while this one runs, and
 * units are small enough (about UNITS_TARGET per product) that two threads
 * finish together even on a loaded machine. On several threads a float32
 * plan whose A is read in place runs as column jobs instead (column_jobs):
 * each packs its own columns of B, so no core reads what another packed.
 * Larger products share units out in contiguous ranges instead; a range
 * packs what its units need itself. A small B in the compute type with
 * unit column stride is not packed at all: the micro-kernels read its rows
 * where they lie (b_in_place); float32 A's full row panels are read in
 * place too when B is narrow (a_in_place). Consecutive units of one column block
 * form a group that shares each packed B chunk:
 *
 *   for each k chunk (kb, a multiple of kc): pack B chunk (kb x nc)
 *     for each row block of the group: for each k block (kc): pack A (mc x kc)
 *       for each column panel (nr): for each row panel (mr): micro-kernel
 *
 * C is updated in place when it is stored in the compute type with unit
 * column stride ("direct"); otherwise each register tile is converted
 * and written out from L1 when k is one block, or a float32/float64
 * workspace for the unit accumulates the k blocks and is written out
 * once, converted. Kernels with thread state (AMX tiles) get begin/end
 * around each unit's micro-kernel calls. A
 * transposed C is handled by computing C^T = B^T A^T; so is a float32 (or,
 * with AVX512-BF16, bfloat16) product with few rows and a transposed
 * row-major B (x W^T, linear), where reading W in place beats repacking W^T
 * on every call (small_m_transposed).
 */
#include "ops/gemm/gemm.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_isa.h"
#include "internal.h"
#include "ops/engine/elementwise.h"
#include "ops/engine/scalar_types.h"
#include "ops/engine/thread_pool.h"

#define K_CHUNK_MAX 2048 /* longest k range of a packed B chunk */
#define MIN_PARALLEL_FLOPS (1 << 18)
#define WORKSPACE_ELEMS (1 << 20) /* per thread, when C is not updated in place */
#define SHARED_B_MAX (1 << 22)    /* packed elements of B shared by all threads (16 MiB) */
#define SHARED_B_CHUNK (1 << 19)  /* ... packed and used a k chunk of about this size at a time */
/* ... for float32 kernels: a chunk (1 MiB) that stays in L2 (2 MiB here) with the A blocks.
 * Against 2 MiB, on one thread (2048x256)^T @ 2048x256 +8%, (2048x1024)^T @ 2048x256 +8%;
 * 512 KiB gained 3% more on one thread but lost up to 10% on two ((2048x128)^T @
 * 2048x512: 8 chunks, each a packing and a unit phase that end in a wait for both threads). */
#define SHARED_B_CHUNK_F32 (1 << 18)
#define A_IN_PLACE_PANELS 16      /* B's column panels, at most, for A read in place (a_in_place) */
#define UNITS_TARGET 24           /* units per product with shared B (any thread count) */
#define MIN_UNIT_PANELS 4         /* rows / columns of a unit, in register tiles */
#define PANEL_GROUP 8             /* B panels packed by one shared-B task, at most */
#define MIN_PACK_TASKS 8          /* ... fewer when that leaves fewer tasks than this */
#define B_IN_PLACE_MAX (1 << 18)  /* bytes of B per batch item read unpacked, at most */
#define B_IN_PLACE_SET_LINES 768  /* ... and a k block x B's row stride in cache lines at most (L1 sets) */
#define BIG_B_BYTES (2 << 20)     /* one k block of packed B larger than this (L2) sets big_b_mc */
#define SHARED_A_MAX (1 << 21)    /* packed elements of A shared by all threads, when columns are split */
#define A_BF16_IN_PLACE_MAX (32 << 10) /* bytes of a bfloat16 A per batch item read in place, at most */
#define SMALL_M_MAX 128          /* rows, at most, of a product computed transposed (small_m_transposed) */
#define SMALL_M_PACK_COLUMNS 8    /* ... when packing B costs about as much as this many more columns */
#define SMALL_M_BIG_B (32.0 * (1 << 20)) /* ... and always when B has this many bytes or more */
#define SMALL_M_UNIT_B_ROWS 128  /* rows, at most, of an AMX product whose units pack their own B (unit_packs_b) */
#define SMALL_M_UNIT_B_COLUMNS 128 /* ... in column blocks of this many */
#define SMALL_M_SPLIT_BYTES (1 << 20) /* ... split over the threads, whatever its flops, from this many bytes of W */
#define SMALL_M_BF16_MIN_K 512    /* ... bfloat16: k at least this (short rows: C's columns cost more) */
#define SMALL_M_BF16_ANY_K 16     /* ... or m at most this (the kernel's small_m_bf16_any_k if set) */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

double rt_gemm_load(nrt_dtype d, const void *base, int64_t i) {
  switch (d) {
    case NRT_FLOAT16: return rt_half_to_float(((const rt_half *)base)[i]);
    case NRT_BFLOAT16: return rt_bfloat16_to_float(((const rt_bfloat16 *)base)[i]);
    case NRT_FLOAT32: return ((const float *)base)[i];
    default: return ((const double *)base)[i];
  }
}

void rt_gemm_store(nrt_dtype d, void *base, int64_t i, double v) {
  switch (d) {
    case NRT_FLOAT16: ((rt_half *)base)[i] = rt_half_from_float((float)v); break;
    case NRT_BFLOAT16: ((rt_bfloat16 *)base)[i] = rt_bfloat16_from_float((float)v); break;
    case NRT_FLOAT32: ((float *)base)[i] = (float)v; break;
    default: ((double *)base)[i] = v; break;
  }
}

static void *alloc_aligned(int64_t bytes) {
  return aligned_alloc(64, (size_t)round_up(bytes > 0 ? bytes : 64, 64));
}

/* Packing buffers are kept per thread between calls: a fresh multi-MiB
 * buffer per call costs page faults comparable to the product itself. */
enum { BUF_A, BUF_B, BUF_WS, BUF_TILE, BUF_SHARED_B, BUF_SHARED_A, BUF_PIPE, BUF_COUNT };
typedef struct scratch_buf {
  void *p;
  int64_t bytes;
} scratch_buf;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
  scratch_buf *b = p;
  for (int i = 0; i < BUF_COUNT; i++) free(b[i].p);
  free(b);
}
static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

/* This thread's buffer `which`, at least `bytes` long (64-byte aligned), or
 * NULL when out of memory. */
static void *scratch(int which, int64_t bytes) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_key_ok) return NULL;
  scratch_buf *b = pthread_getspecific(scratch_key);
  if (!b) {
    b = calloc(BUF_COUNT, sizeof *b);
    if (!b) return NULL;
    if (pthread_setspecific(scratch_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b[which].bytes < bytes || !b[which].p) {
    free(b[which].p);
    b[which].p = alloc_aligned(bytes);
    b[which].bytes = b[which].p ? bytes : 0;
  }
  return b[which].p;
}

enum { A_PACKED, A_KMAJOR, A_ROWS }; /* how the micro-kernels read A */

/* One k chunk of a shared-B plan: its first k and its packed buffers (one
 * of two of each, so that the next chunk is packed while this one runs). */
typedef struct gemm_chunk {
  int64_t kb0;
  void *bsh, *ash;
} gemm_chunk;

typedef struct gemm_plan gemm_plan;
typedef void (*chunk_fn)(gemm_plan *pl, const gemm_chunk *ch, int64_t begin, int64_t end);

struct gemm_plan {
  rt_gemm_args g;
  const rt_gemm_kernel *kern;
  int64_t ktot, mc, kc, nc, kb;
  int64_t m_blocks, n_blocks, units;
  int64_t ws_blocks; /* row blocks a workspace holds (no direct C) */
  int direct, cin_is_c;
  int b_inplace; /* micro-kernels read B where it lies (b_in_place) */
  int small_m_b;  /* few rows, straight: units pack their own B in small column blocks (unit_packs_b) */
  int a_inplace; /* ... and A's full row panels (a_in_place: A_KMAJOR or A_ROWS) */
  int a_bf16_rows; /* bfloat16 C by the kernel (bf16_c) reading A's rows in place (a_bf16_in_place) */
  int failed; /* a worker could not allocate its buffers (atomic) */
  int transposed; /* computing C^T = B^T A^T: swap block coordinates for the epilogue */
  int small_m;    /* ... by choice (small_m_transposed) */
  nrt_status epilogue_status; /* the first failure of an epilogue call (atomic) */
  /* Shared packed B, one k chunk [kb0, kb0 + kb) per buffer: for batch
   * item t, k block kb0 + pc and panel jr at bsh + t*bsh_item + pc/kdiv*npad
   * + jr*(packed kc); two buffers of bsh_item * batch elements (chunks
   * alternate between them); or NULL. */
  void *bsh;
  int64_t bsh_item, npad;
  int64_t group; /* B panels per packing task */
  int64_t pieces; /* ... or k ranges per k block (pack_shared_rows_f32) */
  /* With shared B and several column blocks: A packed once per k chunk and
   * shared too (each column block would repack it), row block ib and k
   * block pc of item t at ash + ((t*m_blocks + ib)*akblocks + pc/kc) *
   * ablock; or NULL. */
  void *ash;
  int64_t akblocks, ablock, ash_elems; /* ... two buffers of ash_elems, as bsh */
  int64_t next_unit; /* the next unit to claim (atomic) */
  /* The shared-B pipeline (run_pipeline): chunk c's tasks are its B
   * packing, its A packing, then its units; all chunks' tasks form one
   * sequence that the threads claim in order (next_unit). */
  chunk_fn pack_b, pack_a, run;
  int64_t bufs;          /* B (and A) buffers: 2 on several threads, 1 alone */
  int64_t psize;         /* bytes per packed element */
  int64_t chunks, tasks; /* k chunks, tasks in all */
  int64_t *packed;       /* per chunk: its packing tasks done (atomic) */
  int64_t *computed;     /* per chunk: its units done (atomic) */
  int64_t *unit_chunks;  /* per unit: chunks it has finished (atomic) */
};

/* c (rows of length nrc, row stride c_rs, unit column stride) =
 * tile + bsrc * src; src NULL means just tile. tile may be c itself. */
#define DEFINE_MERGE(T, SUF)                                                                   \
  static void merge_##SUF(T *c, int64_t c_rs, const T *tile, int64_t ld, int64_t mrc,          \
                          int64_t nrc, const T *src, int64_t s_rs, int64_t s_cs, T bsrc) {     \
    for (int64_t i = 0; i < mrc; i++)                                                          \
      for (int64_t j = 0; j < nrc; j++)                                                        \
        c[i * c_rs + j] = src ? tile[i * ld + j] + bsrc * src[i * s_rs + j * s_cs] : tile[i * ld + j]; \
  }
DEFINE_MERGE(float, f32)
DEFINE_MERGE(double, f64)

/* A block of a float32 workspace (rows x n, row stride ld) written to C:
 * c = w + beta * in (in NULL: just w), rounded once to C's dtype. One call
 * per block, not per row: per register tile it is called for 32 x 32
 * values, and the unit-stride loops are the ones the compiler vectorises. */
static inline float f32_id(float v) { return v; }
#define DEFINE_FLUSH(NAME, ST, TO, FROM)                                                       \
  RT_SIMD_VOID(NAME, (ST *c, int64_t c_rs, int64_t cs, const float *w, int64_t ld, const ST *in, \
                      int64_t i_rs, int64_t ics, float beta, int64_t rows, int64_t n),         \
               (c, c_rs, cs, w, ld, in, i_rs, ics, beta, rows, n)) {                           \
    for (int64_t i = 0; i < rows; i++, c += c_rs, w += ld) {                                   \
      const ST *ir = in ? in + i * i_rs : NULL;                                                \
      if (cs == 1 && !ir) {                                                                    \
        for (int64_t j = 0; j < n; j++) c[j] = TO(w[j]);                                       \
      } else if (cs == 1 && ics == 1) {                                                        \
        for (int64_t j = 0; j < n; j++) c[j] = TO(w[j] + beta * FROM(ir[j]));                  \
      } else if (!ir) {                                                                        \
        for (int64_t j = 0; j < n; j++) c[j * cs] = TO(w[j]);                                  \
      } else {                                                                                 \
        for (int64_t j = 0; j < n; j++) c[j * cs] = TO(w[j] + beta * FROM(ir[j * ics]));       \
      }                                                                                        \
    }                                                                                          \
  }
DEFINE_FLUSH(flush_f32, float, f32_id, f32_id)
DEFINE_FLUSH(flush_bf16, rt_bfloat16, rt_bfloat16_from_float, rt_bfloat16_to_float)
DEFINE_FLUSH(flush_f16, rt_half, rt_half_from_float, rt_half_to_float)

/* The same for a float32 C stored transposed (row stride 1, column stride
 * cs: the caller's C of a product computed as C^T = B^T A^T): column j of
 * the block is a run of rows contiguous values of C, written in one pass
 * (by rows, each value would fall in a different cache line). The same
 * sums as flush_f32, in another order of stores. */
RT_SIMD_VOID(flush_cols_f32, (float *c, int64_t cs, const float *w, int64_t ld, const float *in, int64_t i_rs,
                              int64_t ics, float beta, int64_t rows, int64_t n),
             (c, cs, w, ld, in, i_rs, ics, beta, rows, n)) {
  for (int64_t j = 0; j < n; j++, c += cs) {
    if (!in) {
      for (int64_t i = 0; i < rows; i++) c[i] = w[i * ld + j];
    } else if (i_rs == 1) {
      const float *ir = in + j * ics;
      for (int64_t i = 0; i < rows; i++) c[i] = w[i * ld + j] + beta * ir[i];
    } else {
      const float *ir = in + j * ics;
      for (int64_t i = 0; i < rows; i++) c[i] = w[i * ld + j] + beta * ir[i * i_rs];
    }
  }
}

/* The same for a bfloat16 C stored transposed (a small-m bfloat16 product
 * computed as C^T = W x^T): each value rounded as flush_bf16 rounds it,
 * column j of the block written as one run (by rows, scalar strided
 * stores: 1024x256 at m = 128 took 1.4x the straight plan's time). */
RT_SIMD_VOID(flush_cols_bf16, (rt_bfloat16 *c, int64_t cs, const float *w, int64_t ld, const rt_bfloat16 *in,
                               int64_t i_rs, int64_t ics, float beta, int64_t rows, int64_t n),
             (c, cs, w, ld, in, i_rs, ics, beta, rows, n)) {
  for (int64_t j = 0; j < n; j++, c += cs) {
    if (!in) {
      for (int64_t i = 0; i < rows; i++) c[i] = rt_bfloat16_from_float(w[i * ld + j]);
    } else {
      const rt_bfloat16 *ir = in + j * ics;
      for (int64_t i = 0; i < rows; i++)
        c[i] = rt_bfloat16_from_float(w[i * ld + j] + beta * rt_bfloat16_to_float(ir[i * i_rs]));
    }
  }
}

/* Writes a unit's workspace (mrows x ncols, row stride ld) to C at (t, i0,
 * j0): C = ws + beta * Cin, rounded once to C's dtype. */
static void flush_workspace_f32(const gemm_plan *pl, const float *ws, int64_t ld, int64_t t,
                                int64_t i0, int64_t j0, int64_t mrows, int64_t ncols, int with_cin) {
  const rt_gemm_args *g = &pl->g;
  float beta = (float)g->beta;
  int64_t cb = (int64_t)nrt_dtype_size(g->c_dtype);
  char *c = (char *)g->c + (t * g->c_bs + i0 * g->c_rs + j0 * g->c_cs) * cb;
  const char *in = g->cin && with_cin ? (const char *)g->cin + (t * g->cin_bs + i0 * g->cin_rs + j0 * g->cin_cs) * cb : NULL;
  switch (g->c_dtype) {
    case NRT_BFLOAT16:
      if (g->c_cs == 1 && (!in || g->cin_cs == 1) &&
          rt_gemm_flush_bf16_rows((rt_bfloat16 *)c, g->c_rs, ws, ld, (const rt_bfloat16 *)in, g->cin_rs, beta,
                                  mrows, ncols))
        break;
      if (g->c_rs == 1 && g->c_cs != 1) {
        flush_cols_bf16((rt_bfloat16 *)c, g->c_cs, ws, ld, (const rt_bfloat16 *)in, g->cin_rs, g->cin_cs, beta,
                        mrows, ncols);
        break;
      }
      flush_bf16((rt_bfloat16 *)c, g->c_rs, g->c_cs, ws, ld, (const rt_bfloat16 *)in, g->cin_rs, g->cin_cs,
                 beta, mrows, ncols);
      break;
    case NRT_FLOAT16:
      flush_f16((rt_half *)c, g->c_rs, g->c_cs, ws, ld, (const rt_half *)in, g->cin_rs, g->cin_cs, beta,
                mrows, ncols);
      break;
    default:
      if (g->c_rs == 1 && g->c_cs != 1) {
        flush_cols_f32((float *)c, g->c_cs, ws, ld, (const float *)in, g->cin_rs, g->cin_cs, beta, mrows, ncols);
        break;
      }
      flush_f32((float *)c, g->c_rs, g->c_cs, ws, ld, (const float *)in, g->cin_rs, g->cin_cs, beta, mrows,
                ncols);
      break;
  }
}

static void flush_workspace_f64(const gemm_plan *pl, const double *ws, int64_t ld, int64_t t,
                                int64_t i0, int64_t j0, int64_t mrows, int64_t ncols, int with_cin) {
  const rt_gemm_args *g = &pl->g;
  for (int64_t i = 0; i < mrows; i++) {
    const double *w = ws + i * ld;
    double *crow = (double *)g->c + t * g->c_bs + (i0 + i) * g->c_rs + j0 * g->c_cs;
    const double *irow = g->beta != 0 && with_cin ? (const double *)g->cin + t * g->cin_bs +
                                            (i0 + i) * g->cin_rs + j0 * g->cin_cs
                                      : NULL;
    for (int64_t j = 0; j < ncols; j++)
      crow[j * g->c_cs] = irow ? w[j] + g->beta * irow[j * g->cin_cs] : w[j];
  }
}

/* Hands a finished block to the caller's epilogue, in its orientation. */
static void finish_block(gemm_plan *pl, int64_t t, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  const rt_gemm_args *g = &pl->g;
  if (!g->epilogue || __atomic_load_n(&pl->epilogue_status, __ATOMIC_RELAXED)) return;
  nrt_status s = pl->transposed ? g->epilogue(g->epilogue_ctx, t, j0, cols, i0, rows)
                                : g->epilogue(g->epilogue_ctx, t, i0, rows, j0, cols);
  if (s) {
    nrt_status none = NRT_SUCCESS;
    __atomic_compare_exchange_n(&pl->epilogue_status, &none, s, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
}

/* The units [u0, u1) of a plan, for compute type T. Consecutive units of
 * one batch item and column block form a group that shares each packed B
 * chunk; without direct C, a group is at most ws_blocks row blocks (its
 * workspace). */
#define DEFINE_UNITS(PT, CT, SUF, CSUF, UKR, KDIV)                                                               \
  static void units_##SUF(gemm_plan *pl, const gemm_chunk *ch, int64_t u0, int64_t u1) {       \
    const rt_gemm_args *g = &pl->g;                                                             \
    const rt_gemm_kernel *kern = pl->kern;                                                      \
    const int64_t mr = kern->mr, nr = kern->nr, kdiv = KDIV; /* k values per packed element */  \
    const int64_t ncpad = round_up(pl->nc, nr), mcpad = round_up(pl->mc, mr);                   \
    const CT alpha = (CT)g->alpha, beta = (CT)g->beta;                                             \
    const int64_t ab = (int64_t)nrt_dtype_size(g->ab_dtype);                                    \
    PT *ap = scratch(BUF_A, mcpad * KP(pl->kc) * (int64_t)sizeof(PT));                          \
    const int b_packed = !pl->bsh && !pl->b_inplace; /* B packed here, per unit */             \
    PT *bp = b_packed ? scratch(BUF_B, (pl->kb / kdiv + 1) * ncpad * (int64_t)sizeof(PT)) : NULL; \
    /* One k block and C not direct: each register tile is written out as    \
     * soon as computed, from L1, instead of through a workspace. */          \
    const int tile_flush = !pl->direct && pl->ktot <= pl->kc;                                   \
    /* One k block, beta 0, C direct and A's rows read in place: a last      \
     * partial row panel is computed as a full tile ending at the block's    \
     * last row, so it needs neither packing nor the tile buffer. The rows   \
     * it shares with the panel before are stored again with the same bits  \
     * (a row's sums do not depend on the other rows of its tile). */        \
    const int shift_edge = pl->a_inplace && pl->direct && pl->ktot <= pl->kc && g->beta == 0;   \
    const int use_ws = !pl->direct && !tile_flush;                                              \
    /* A workspace in C's own type (C transposed): beta * Cin joins it after \
     * the first k block, as it joins a direct C, so that the sums and their \
     * order do not depend on C's layout. */                                  \
    const int ws_cin = use_ws && g->cin && g->c_dtype == (sizeof(CT) == 8 ? NRT_FLOAT64 : NRT_FLOAT32); \
    /* ... and bfloat16 C without Cin: rounded by the kernel itself (bf16_c). */               \
    const int c_bf16 = tile_flush && kern->bf16_c && g->c_dtype == NRT_BFLOAT16 && g->c_cs == 1 && \
                       !g->cin && rt_isa_avx512_bf16();                                         \
    CT *ws = use_ws ? scratch(BUF_WS, pl->ws_blocks * mcpad * ncpad * (int64_t)sizeof(CT)) : NULL; \
    CT *tile = scratch(BUF_TILE, mr * nr * (int64_t)sizeof(CT));                                \
    if (!ap || (b_packed && !bp) || !tile || (use_ws && !ws)) {                                 \
      __atomic_store_n(&pl->failed, 1, __ATOMIC_RELAXED);                                       \
      return;                                                                                   \
    }                                                                                           \
    for (int64_t u = u0; u < u1;) {                                                             \
      const int64_t tj = u / pl->m_blocks, ib0 = u % pl->m_blocks;                              \
      const int64_t t = tj / pl->n_blocks, jb = tj % pl->n_blocks;                              \
      int64_t nib = min64(u1, (tj + 1) * pl->m_blocks) - u;                                     \
      if (use_ws) nib = min64(nib, pl->ws_blocks);                                              \
      const int64_t j0 = jb * pl->nc, ncur = min64(pl->nc, g->n - j0);                          \
      const rt_gemm_src sa = {.base = (const char *)g->a + t * g->a_bs * ab, .dtype = g->ab_dtype, \
                              .s_r = g->a_rs, .s_k = g->a_cs, .s_slice = g->a_ss, .k = g->k};  \
      const rt_gemm_src sb = {.base = (const char *)g->b + t * g->b_bs * ab, .dtype = g->ab_dtype, \
                              .s_r = g->b_cs, .s_k = g->b_rs, .s_slice = g->b_ss, .k = g->k};  \
      if (kern->begin) kern->begin();                                                           \
      for (int64_t kb0 = pl->bsh ? ch->kb0 : 0; kb0 < (pl->bsh ? ch->kb0 + 1 : pl->ktot); kb0 += pl->kb) { \
        const int64_t kbcur = min64(pl->kb, pl->ktot - kb0);                                    \
        /* The B chunk: shared (packed already; one chunk of all k) or this unit's. */          \
        const PT *bbase = pl->bsh ? (const PT *)ch->bsh + t * pl->bsh_item : bp;                 \
        const int64_t bld = pl->bsh ? pl->npad : ncpad, bj0 = pl->bsh ? j0 : 0;                 \
        for (int64_t pc = 0; pc < kbcur && b_packed; pc += pl->kc) {                            \
          const int64_t kcur = min64(pl->kc, kbcur - pc);                                       \
          rt_gemm_pack_panels_##SUF(bp + pc / kdiv * ncpad, (int)nr, &sb, j0, ncur, kb0 + pc, kcur); \
        }                                                                                       \
        for (int64_t ib = ib0; ib < ib0 + nib; ib++) {                                          \
          const int64_t i0 = ib * pl->mc, mcur = min64(pl->mc, g->m - i0);                      \
          CT *cunit = pl->direct ? (CT *)g->c + t * g->c_bs + i0 * g->c_rs + j0 : NULL;           \
          CT *wunit = use_ws ? ws + (ib - ib0) * mcpad * ncpad : NULL;                           \
          const CT *iunit = g->cin ? (const CT *)g->cin + t * g->cin_bs + i0 * g->cin_rs + j0 * g->cin_cs : NULL; \
          for (int64_t pc = 0; pc < kbcur; pc += pl->kc) {                                      \
            const int64_t kcur = min64(pl->kc, kbcur - pc);                                     \
            const int first = kb0 + pc == 0;                                                    \
            const PT *apk = pl->a_inplace ? (const PT *)sa.base + ((kb0 + pc) * g->a_cs + i0 * g->a_rs) / kdiv \
                            : pl->ash ? (const PT *)ch->ash + ((t * pl->m_blocks + ib) * pl->akblocks + pc / pl->kc) * pl->ablock : ap; \
            /* A in place: a last partial row panel is packed (the kernel reads mr rows), \
             * in the kernel's own layout where it has one (AMX). */                            \
            const int shift = shift_edge && mcur >= mr;                                          \
            const int64_t a_edge = pl->a_inplace && mcur % mr && !shift ? mcur / mr * mr : mcur; \
            if (pl->a_inplace && a_edge < mcur && kern->bf16_pack_a)                            \
              kern->bf16_pack_a((uint32_t *)(void *)ap, &sa, i0 + a_edge, mcur - a_edge, kb0 + pc, kcur); \
            else if (pl->a_inplace && a_edge < mcur)                                            \
              rt_gemm_pack_panels_##SUF(ap, (int)mr, &sa, i0 + a_edge, mcur - a_edge, kb0 + pc, kcur); \
            else if (pl->a_inplace || pl->ash || pl->a_bf16_rows)                               \
              ; /* packed already, or read in place */                                          \
            else if (kern->bf16_pack_a)                                                         \
              kern->bf16_pack_a((uint32_t *)(void *)ap, &sa, i0, mcur, kb0 + pc, kcur);         \
            else                                                                                \
              rt_gemm_pack_panels_##SUF(ap, (int)mr, &sa, i0, mcur, kb0 + pc, kcur);            \
            /* B's panels: packed (kc x nr each, one after another) or in place. */             \
            const PT *bpc = pl->b_inplace ? (const PT *)sb.base + (kb0 + pc) * g->b_rs + j0       \
                                          : bbase + pc / kdiv * bld + bj0 * KP(kcur);           \
            const int64_t bstep = pl->b_inplace ? 1 : KP(kcur), ldb = pl->b_inplace ? g->b_rs : nr; \
            if (c_bf16 && kern->bf16_c_block && !pl->a_inplace) { /* the whole block in one call */  \
              const int rows_in = pl->a_bf16_rows;                                              \
              const void *ab0 = rows_in ? (const void *)((const uint16_t *)(const void *)sa.base + i0 * g->a_rs + kb0 + pc) \
                                        : (const void *)apk;                                    \
              kern->bf16_c_block(KP(kcur), ab0, rows_in ? mr * g->a_rs / 2 : mr * KP(kcur), rows_in ? g->a_rs / 2 : 0, \
                                 (const uint32_t *)(const void *)bpc, nr * bstep, ldb,          \
                                 (uint16_t *)g->c + t * g->c_bs + i0 * g->c_rs + j0, g->c_rs, mcur, ncur, (float)g->alpha); \
              continue;                                                                         \
            }                                                                                   \
            for (int64_t jr = 0; jr < ncur; jr += nr) {                                         \
              const int64_t nrc = min64(nr, ncur - jr);                                         \
              for (int64_t ir0 = 0; ir0 < mcur; ir0 += mr) {                                    \
                const int64_t ir = shift && ir0 + mr > mcur ? mcur - mr : ir0;                  \
                const int64_t mrc = min64(mr, mcur - ir);                                       \
                const int in_a = pl->a_inplace && ir < a_edge;                                  \
                const PT *apan = in_a ? apk + ir * g->a_rs / kdiv : pl->a_inplace ? ap : apk + ir * KP(kcur); \
                const PT *bpan = bpc + jr * bstep;                                              \
                const int64_t lda = in_a ? (pl->a_inplace == A_ROWS ? g->a_rs / kdiv : g->a_cs) : mr; \
                const int a_rows = in_a && pl->a_inplace == A_ROWS;                             \
                (void)a_rows;                                                                   \
                (void)lda;                                                                      \
                if (c_bf16) {                                                                   \
                  const void *abf = pl->a_bf16_rows ? (const void *)((const uint16_t *)(const void *)sa.base + \
                                                      (i0 + ir) * g->a_rs + kb0 + pc) : (const void *)apan; \
                  kern->bf16_c(KP(kcur), abf, pl->a_bf16_rows ? g->a_rs / 2 : a_rows ? lda : 0,\
                               (const uint32_t *)(const void *)bpan,                            \
                               ldb, (uint16_t *)g->c + t * g->c_bs + (i0 + ir) * g->c_rs + j0 + jr, g->c_rs, \
                               mrc, nrc, (float)g->alpha);                                     \
                  continue;                                                                     \
                }                                                                               \
                if (tile_flush) {                                                               \
                  UKR(KP(kcur), apan, lda, bpan, ldb, tile, nr, alpha, 0);                           \
                  flush_workspace_##CSUF(pl, tile, nr, t, i0 + ir, j0 + jr, mrc, nrc, 1);       \
                  continue;                                                                     \
                }                                                                               \
                if (use_ws) {                                                                   \
                  CT *wt = wunit + ir * ncpad + jr;                                             \
                  UKR(KP(kcur), apan, lda, bpan, ldb, wt, ncpad, alpha, first ? 0 : 1);         \
                  if (first && ws_cin)                                                          \
                    merge_##CSUF(wt, ncpad, wt, ncpad, mrc, nrc, iunit + ir * g->cin_rs + jr * g->cin_cs, \
                                 g->cin_rs, g->cin_cs, beta);                                   \
                  continue;                                                                     \
                }                                                                               \
                CT *cp = cunit + ir * g->c_rs + jr;                                              \
                /* What is added to alpha*AB: beta*Cin on the first k block, C after. */        \
                const CT *src = cp;                                                              \
                int64_t s_rs = g->c_rs, s_cs = 1;                                               \
                CT bsrc = 1;                                                                     \
                if (first) {                                                                    \
                  bsrc = beta;                                                                  \
                  if (g->beta == 0) {                                                           \
                    src = NULL;                                                                 \
                  } else if (!pl->cin_is_c) {                                                   \
                    src = iunit + ir * g->cin_rs + jr * g->cin_cs;                              \
                    s_rs = g->cin_rs, s_cs = g->cin_cs;                                         \
                  }                                                                             \
                }                                                                               \
                if (mrc == mr && nrc == nr) {                                                   \
                  if (src == cp || !src) {                                                      \
                    UKR(KP(kcur), apan, lda, bpan, ldb, cp, g->c_rs, alpha, src ? bsrc : 0);         \
                  } else {                                                                      \
                    UKR(KP(kcur), apan, lda, bpan, ldb, cp, g->c_rs, alpha, 0);                      \
                    merge_##CSUF(cp, g->c_rs, cp, g->c_rs, mr, nr, src, s_rs, s_cs, bsrc);       \
                  }                                                                             \
                } else {                                                                        \
                  UKR(KP(kcur), apan, lda, bpan, ldb, tile, nr, alpha, 0);                           \
                  merge_##CSUF(cp, g->c_rs, tile, nr, mrc, nrc, src, s_rs, s_cs, bsrc);          \
                }                                                                               \
              }                                                                                 \
            }                                                                                   \
          }                                                                                     \
        }                                                                                       \
      }                                                                                         \
      if (kern->end) kern->end();                                                               \
      /* A block is final after the last k chunk (of the last shared-B phase). */              \
      const int final = !pl->bsh || ch->kb0 + pl->kb >= pl->ktot;                               \
      for (int64_t ib = ib0; ib < ib0 + nib; ib++) {                                            \
        const int64_t i0 = ib * pl->mc, mcur = min64(pl->mc, g->m - i0);                        \
        if (use_ws) flush_workspace_##CSUF(pl, ws + (ib - ib0) * mcpad * ncpad, ncpad, t, i0, j0, mcur, ncur, !ws_cin); \
        if (final) finish_block(pl, t, i0, mcur, j0, ncur);                                     \
      }                                                                                         \
      u += nib;                                                                                 \
    }                                                                                           \
  }                                                                                             \
                                                                                                \
  /* Units [u0, u1) of a plan without shared B. */                                             \
  static void run_units_##SUF(int64_t u0, int64_t u1, void *ctx) {                              \
    const gemm_chunk all = {0};                                                                 \
    units_##SUF(ctx, &all, u0, u1);                                                             \
  }                                                                                             \
                                                                                                \
  /* Shared B: packs tasks [p0, p1) of a chunk (batch item, k block, group of panels). */     \
  static void pack_shared_##SUF(gemm_plan *pl, const gemm_chunk *ch, int64_t p0, int64_t p1) {  \
    const rt_gemm_args *g = &pl->g;                                                             \
    const int64_t nr = pl->kern->nr, kdiv = KDIV, groups = ceil_div(g->n, pl->group * nr);    \
    const int64_t ab = (int64_t)nrt_dtype_size(g->ab_dtype);                                    \
    const int64_t kbcur = min64(pl->kb, pl->ktot - ch->kb0), kblocks = ceil_div(kbcur, pl->kc); \
    for (int64_t task = p0; task < p1; task++) {                                                \
      const int64_t jr = task % groups * pl->group * nr, rest = task / groups;                \
      const int64_t pc = rest % kblocks * pl->kc, t = rest / kblocks;                           \
      const int64_t kcur = min64(pl->kc, kbcur - pc);                                           \
      const rt_gemm_src sb = {.base = (const char *)g->b + t * g->b_bs * ab, .dtype = g->ab_dtype, \
                              .s_r = g->b_cs, .s_k = g->b_rs, .s_slice = g->b_ss, .k = g->k};  \
      PT *dst = (PT *)ch->bsh + t * pl->bsh_item + pc / kdiv * pl->npad + jr * KP(kcur);        \
      rt_gemm_pack_panels_##SUF(dst, (int)nr, &sb, jr, min64(pl->group * nr, g->n - jr),     \
                                ch->kb0 + pc, kcur);                                            \
    }                                                                                           \
  }                                                                                             \
                                                                                                \
  /* Shared A (with shared B): packs tasks [p0, p1) of a chunk (batch item, row block, k block). */ \
  static void pack_shared_a_##SUF(gemm_plan *pl, const gemm_chunk *ch, int64_t p0, int64_t p1) { \
    const rt_gemm_args *g = &pl->g;                                                             \
    const int64_t ab = (int64_t)nrt_dtype_size(g->ab_dtype);                                    \
    const int64_t kbcur = min64(pl->kb, pl->ktot - ch->kb0), kblocks = ceil_div(kbcur, pl->kc); \
    for (int64_t task = p0; task < p1; task++) {                                                \
      const int64_t pc = task % kblocks * pl->kc, rest = task / kblocks;                        \
      const int64_t ib = rest % pl->m_blocks, t = rest / pl->m_blocks;                          \
      const int64_t i0 = ib * pl->mc, mcur = min64(pl->mc, g->m - i0), kcur = min64(pl->kc, kbcur - pc); \
      const rt_gemm_src sa = {.base = (const char *)g->a + t * g->a_bs * ab, .dtype = g->ab_dtype, \
                              .s_r = g->a_rs, .s_k = g->a_cs, .s_slice = g->a_ss, .k = g->k};  \
      PT *dst = (PT *)ch->ash + ((t * pl->m_blocks + ib) * pl->akblocks + pc / pl->kc) * pl->ablock; \
      if (pl->kern->bf16_pack_a)                                                                \
        pl->kern->bf16_pack_a((uint32_t *)(void *)dst, &sa, i0, mcur, ch->kb0 + pc, kcur);      \
      else                                                                                      \
        rt_gemm_pack_panels_##SUF(dst, pl->kern->mr, &sa, i0, mcur, ch->kb0 + pc, kcur);        \
    }                                                                                           \
  }                                                                                             \
                                                                                                \
  /* B read in place: each thread claims units until none is left. */                          \
  static void claim_units_##SUF(int64_t w0, int64_t w1, void *ctx) {                            \
    (void)w0, (void)w1;                                                                         \
    gemm_plan *pl = ctx;                                                                        \
    for (;;) {                                                                                  \
      int64_t u = __atomic_fetch_add(&pl->next_unit, 1, __ATOMIC_RELAXED);                      \
      if (u >= pl->units || __atomic_load_n(&pl->failed, __ATOMIC_RELAXED) ||                  \
          __atomic_load_n(&pl->epilogue_status, __ATOMIC_RELAXED))                              \
        return;                                                                                 \
      run_units_##SUF(u, u + 1, ctx);                                                           \
    }                                                                                           \
  }

#define KP(kvals) (((kvals) + kdiv - 1) / kdiv) /* packed k steps */
/* The float32 tile for nrc columns of A's rows read in place: a narrow
 * twin of f32_rows for a last panel of at most 8, 16 or 24 columns (the
 * same sums; C's other columns are neither read nor stored). */
static inline rt_gemm_ukr_f32 rows_ukr(const rt_gemm_kernel *kern, int64_t nrc) {
  const int64_t w = (nrc + 7) / 8 - 1;
  return w < 3 && nrc < kern->nr && kern->f32_rows_narrow[w] ? kern->f32_rows_narrow[w] : kern->f32_rows;
}
#define UKR_F32_(...) (a_rows ? rows_ukr(kern, nrc) : kern->f32)(__VA_ARGS__)
#define UKR_F64_(...) kern->f64(__VA_ARGS__)
/* The bfloat16 tile: A's rows in place (words, bf16_rows or a narrow twin as
 * rows_ukr picks) or packed pairs. */
static inline rt_gemm_ukr_bf16_rows rows_ukr_bf16(const rt_gemm_kernel *kern, int64_t nrc) {
  const int64_t w = (nrc + 7) / 8 - 1;
  return w < 3 && nrc < kern->nr && kern->bf16_rows_narrow[w] ? kern->bf16_rows_narrow[w] : kern->bf16_rows;
}
#define UKR_BF16_(k, a, lda, ...) \
  (a_rows ? rows_ukr_bf16(kern, nrc)(k, a, lda, __VA_ARGS__) : kern->bf16(k, a, __VA_ARGS__))
DEFINE_UNITS(float, float, f32, f32, UKR_F32_, 1)
DEFINE_UNITS(double, double, f64, f64, UKR_F64_, 1)
DEFINE_UNITS(uint32_t, float, bf16x2, f32, UKR_BF16_, 2)

/* Shared float32 B whose rows are contiguous and a page or more long
 * (row-major B, as a weight gradient's dy): tasks [p0, p1) (batch item, k
 * block, one of pl->pieces ranges of its k rows) each copy whole rows into
 * all the panels. Split by panels instead, each task read 512 bytes of
 * every page: (2048x256)^T @ 2048x1024 packed 12% of the time, one thread
 * 196 -> 201 GF/s this way. With shorter rows splitting by panels was
 * faster (one thread, (2048x128)^T @ 2048x512 193 -> 189 GF/s,
 * (2048x256)^T @ 2048x256 202 -> 185 by rows). */
#define B_ROWS_PACK_MIN_BYTES 4096
static void pack_shared_rows_f32(gemm_plan *pl, const gemm_chunk *ch, int64_t p0, int64_t p1) {
  const rt_gemm_args *g = &pl->g;
  const int64_t kbcur = min64(pl->kb, pl->ktot - ch->kb0), kblocks = ceil_div(kbcur, pl->kc);
  for (int64_t task = p0; task < p1; task++) {
    const int64_t piece = task % pl->pieces, rest = task / pl->pieces;
    const int64_t pc = rest % kblocks * pl->kc, t = rest / kblocks;
    const int64_t kcur = min64(pl->kc, kbcur - pc), len = ceil_div(kcur, pl->pieces);
    const int64_t q0 = piece * len, qn = min64(len, kcur - q0);
    if (qn <= 0) continue;
    const rt_gemm_src sb = {.base = (const char *)g->b + t * g->b_bs * (int64_t)sizeof(float), .dtype = g->ab_dtype,
                            .s_r = g->b_cs, .s_k = g->b_rs, .s_slice = g->b_ss, .k = g->k};
    float *dst = (float *)ch->bsh + t * pl->bsh_item + pc * pl->npad + q0 * pl->kern->nr;
    rt_gemm_pack_panels_part_f32(dst, pl->kern->nr, kcur, &sb, 0, g->n, ch->kb0 + pc + q0, qn);
  }
}

/* Packing tasks of chunk c: B's (then A's, when shared) for its k blocks. */
static void chunk_packing(const gemm_plan *pl, int64_t c, int64_t *btasks, int64_t *atasks) {
  const rt_gemm_args *g = &pl->g;
  const int64_t kblocks = ceil_div(min64(pl->kb, pl->ktot - c * pl->kb), pl->kc);
  *btasks = g->batch * kblocks * (pl->pieces ? pl->pieces : ceil_div(g->n, pl->group * pl->kern->nr));
  *atasks = pl->ash_elems ? g->batch * pl->m_blocks * kblocks : 0;
}


/* Waits until *cell reaches value; 0 when the product has failed instead.
 * Polls for WAIT_SPIN_NS (the task waited for usually ends within
 * microseconds), then yields: the thread it waits for may have lost its
 * core on a shared host. */
#define WAIT_SPIN_NS 50000
static int wait_for(gemm_plan *pl, const int64_t *cell, int64_t value) {
  uint64_t deadline = 0;
  for (unsigned i = 0; __atomic_load_n(cell, __ATOMIC_ACQUIRE) < value; i++) {
    if (__atomic_load_n(&pl->failed, __ATOMIC_RELAXED) || __atomic_load_n(&pl->epilogue_status, __ATOMIC_RELAXED))
      return 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63) {
      const uint64_t t = rt_now_ns();
      if (!deadline)
        deadline = t + WAIT_SPIN_NS;
      else if (t > deadline)
        sched_yield();
    }
  }
  return 1;
}

/* Shared B, pipelined: each thread claims the next task of the sequence
 * (chunk 0's packing, chunk 0's units, chunk 1's packing, ...) until none
 * is left. A thread that ends its units of chunk c goes on to pack chunk
 * c + 1 into the other buffer while the rest of chunk c runs, instead of
 * two barriers per chunk. Each task waits only for what it needs: a
 * packing task for the units of chunk c - 2 (the last users of its
 * buffer), a unit for its chunk's packing and for the same unit of chunk
 * c - 1 (its C, so that each element still sums the chunks in k order,
 * whatever thread runs what). Tasks only wait for earlier tasks, and those
 * were claimed first, so one thread alone runs the sequence in order. */
static void pipeline_tasks(int64_t w0, int64_t w1, void *ctx) {
  (void)w0, (void)w1;
  gemm_plan *pl = ctx;
  int64_t bfull, afull;
  chunk_packing(pl, 0, &bfull, &afull);
  const int64_t per_chunk = bfull + afull + pl->units;
  for (;;) {
    const int64_t i = __atomic_fetch_add(&pl->next_unit, 1, __ATOMIC_RELAXED);
    if (i >= pl->tasks || __atomic_load_n(&pl->failed, __ATOMIC_RELAXED) ||
        __atomic_load_n(&pl->epilogue_status, __ATOMIC_RELAXED))
      return;
    const int64_t c = min64(i / per_chunk, pl->chunks - 1), task = i - c * per_chunk;
    int64_t bt, at;
    chunk_packing(pl, c, &bt, &at);
    const gemm_chunk ch = {.kb0 = c * pl->kb,
                           .bsh = (char *)pl->bsh + c % pl->bufs * pl->bsh_item * pl->g.batch * pl->psize,
                           .ash = pl->ash ? (char *)pl->ash + c % pl->bufs * pl->ash_elems * pl->psize : NULL};
    if (task < bt + at) {
      if (c >= pl->bufs && !wait_for(pl, &pl->computed[c - pl->bufs], pl->units)) return;
      if (task < bt)
        pl->pack_b(pl, &ch, task, task + 1);
      else
        pl->pack_a(pl, &ch, task - bt, task - bt + 1);
      __atomic_fetch_add(&pl->packed[c], 1, __ATOMIC_RELEASE);
    } else {
      const int64_t u = task - bt - at;
      if (!wait_for(pl, &pl->packed[c], bt + at) || (c >= 1 && !wait_for(pl, &pl->unit_chunks[u], c))) return;
      pl->run(pl, &ch, u, u + 1);
      __atomic_store_n(&pl->unit_chunks[u], c + 1, __ATOMIC_RELEASE);
      __atomic_fetch_add(&pl->computed[c], 1, __ATOMIC_RELEASE);
    }
  }
}

/* Whether a float32 shared-B plan runs as column jobs instead: each job
 * (batch item, column block) packs its own columns of B chunk by chunk
 * and computes all their row blocks, on one thread from start to end. On
 * two threads, sharing packed B cost each unit reads of the half of its
 * chunk the other core had packed (and each packing task the lines the
 * other core had read): units ran about half as fast as alone, and
 * (2048x128)^T @ 2048x512 scaled 1.35-1.4x. Only with helpers, C direct
 * and A read in place (column jobs would each pack A); column blocks are added, if
 * need be, until the jobs share evenly among the threads. Each C element
 * sums the same k blocks in the same order whatever the column blocks and
 * chunks (kb stays a multiple of kc). A job's chunk is one k block, used
 * while it is fresh in L2: on two threads (2048x256)^T @ 2048x256 took
 * 0.67 ms so, 0.72 with the whole of k (1 MiB chunks: 0.73 and 0.78 for
 * (2048x128)^T @ 2048x512). */
static int column_jobs(gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const int64_t threads = rt_num_threads(), nr = pl->kern->nr, cpanels = ceil_div(g->n, nr);
  if (pl->bufs < 2 || pl->ash_elems || !pl->a_inplace || !pl->direct) return 0; /* a workspace takes one row block */
  int64_t nb = pl->n_blocks;
  while (g->batch * nb % threads && g->batch * nb < 4 * threads && nb < cpanels) nb++;
  const int64_t jobs = g->batch * nb;
  if (jobs < threads || (jobs % threads && jobs < 4 * threads)) return 0;
  if (nb != pl->n_blocks) {
    pl->nc = round_up(ceil_div(g->n, nb), nr);
    pl->n_blocks = ceil_div(g->n, pl->nc);
    pl->units = g->batch * pl->n_blocks * pl->m_blocks;
  }
  pl->kb = pl->kc;
  return 1;
}

/* Column jobs [j0, j1): the units of those (batch item, column block) pairs. */
static void column_jobs_f32(int64_t j0, int64_t j1, void *ctx) {
  const gemm_plan *pl = ctx;
  run_units_f32(j0 * pl->m_blocks, j1 * pl->m_blocks, ctx);
}

/* Whether a bfloat16 shared-B plan of several small products (attention's
 * batched ones) runs as batch jobs instead: each job packs one item's B and
 * computes all its units on one thread, as column_jobs does for float32
 * (the same units, so the same sums). Only with helpers, one column block
 * (A is not shared), all of k in one chunk, and C written as its tiles
 * end (direct, or one k block: no workspace, which would take one row
 * block per group). The halves are fixed (one range per thread), so each
 * thread finds its items' packed B and C in its own L2 on the next call.
 * Measured with the AVX512-BF16 kernel (Zen 4) only: AMX kernels (which
 * pack A their own way) keep the pipeline. */
static int batch_jobs(const gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  return !pl->kern->bf16_pack_a && pl->bufs >= 2 && g->batch >= 2 * rt_num_threads() && pl->n_blocks == 1 &&
         !pl->ash_elems && pl->kb == pl->ktot && (pl->direct || pl->ktot <= pl->kc);
}

/* Batch jobs [t0, t1): every unit of those items. */
static void batch_jobs_bf16x2(int64_t t0, int64_t t1, void *ctx) {
  const gemm_plan *pl = ctx;
  run_units_bf16x2(t0 * pl->m_blocks, t1 * pl->m_blocks, ctx);
}

/* Runs a shared-B plan: B (and A) packed chunk by chunk into two
 * alternating buffers, on the pool (or the calling thread alone). */
static nrt_status run_pipeline(gemm_plan *pl, int parallel) {
  const rt_gemm_args *g = &pl->g;
  pl->chunks = ceil_div(pl->ktot, pl->kb);
  int64_t bfull, afull, blast, alast;
  chunk_packing(pl, 0, &bfull, &afull);
  chunk_packing(pl, pl->chunks - 1, &blast, &alast);
  pl->tasks = (pl->chunks - 1) * (bfull + afull + pl->units) + blast + alast + pl->units;
  if (pl->chunks < 2) pl->bufs = 1; /* one chunk (all of B, maybe 16 MiB): one buffer */
  const int64_t bufs = pl->bufs;
  pl->bsh = scratch(BUF_SHARED_B, bufs * pl->bsh_item * g->batch * pl->psize);
  pl->packed = scratch(BUF_PIPE, (2 * pl->chunks + pl->units) * (int64_t)sizeof(int64_t));
  if (pl->ash_elems) pl->ash = scratch(BUF_SHARED_A, bufs * pl->ash_elems * pl->psize);
  if (!pl->bsh || !pl->packed || (pl->ash_elems && !pl->ash))
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "gemm: out of host memory for packing buffers");
  memset(pl->packed, 0, (size_t)(2 * pl->chunks + pl->units) * sizeof(int64_t));
  pl->computed = pl->packed + pl->chunks;
  pl->unit_chunks = pl->computed + pl->chunks;
  pl->next_unit = 0;
  if (parallel)
    rt_parallel_for(rt_num_threads(), 1, pipeline_tasks, pl);
  else
    pipeline_tasks(0, 1, pl);
  return NRT_SUCCESS;
}

/* Runs every unit of a plan with B read in place: the pool's threads (or the calling
 * thread alone) claim them until none is left. */
static void claim_all_units(gemm_plan *pl, rt_range_fn claim, int parallel) {
  pl->next_unit = 0;
  if (parallel)
    rt_parallel_for(rt_num_threads(), 1, claim, pl);
  else
    claim(0, 1, pl);
}

/* Block sizes for a problem: they depend on its sizes and the kernel only. */
static void plan_blocks(gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const rt_gemm_kernel *kern = pl->kern;
  pl->ktot = g->k * g->kslices;
  pl->kc = ceil_div(pl->ktot, ceil_div(pl->ktot, kern->kc)); /* equal k blocks */
  if (kern->compute == NRT_BFLOAT16) pl->kc = round_up(pl->kc, 2); /* whole pairs */
  pl->kb = pl->ktot <= K_CHUNK_MAX ? pl->ktot : pl->kc * (K_CHUNK_MAX / pl->kc);
  int64_t nc = kern->b_elems / pl->kb / kern->nr * kern->nr;
  if (pl->small_m_b && nc > SMALL_M_UNIT_B_COLUMNS) nc = SMALL_M_UNIT_B_COLUMNS;
  if (nc < kern->nr) nc = kern->nr;
  int64_t n_blocks = ceil_div(g->n, nc);
  int64_t m_blocks = ceil_div(g->m, kern->mc);
  /* Give the pool an even number of units when the work is worth sharing;
   * this depends on the problem only, so results do not change with the
   * thread count. */
  double flops = 2.0 * (double)g->m * (double)g->n * (double)pl->ktot;
  int64_t units = g->batch * n_blocks * m_blocks;
  if (flops * (double)g->batch >= MIN_PARALLEL_FLOPS && units % 2 == 1) {
    if (g->m >= 2 * kern->mr && (m_blocks > 1 || g->n < 2 * kern->nr))
      m_blocks++;
    else if (g->n >= 2 * kern->nr)
      n_blocks++;
  }
  pl->mc = round_up(ceil_div(g->m, m_blocks), kern->mr);
  pl->nc = round_up(ceil_div(g->n, n_blocks), kern->nr);
  pl->m_blocks = ceil_div(g->m, pl->mc);
  pl->n_blocks = ceil_div(g->n, pl->nc);
  pl->units = g->batch * pl->n_blocks * pl->m_blocks;
  int64_t block = round_up(pl->mc, kern->mr) * round_up(pl->nc, kern->nr);
  pl->ws_blocks = WORKSPACE_ELEMS / block < 1 ? 1 : min64(WORKSPACE_ELEMS / block, pl->m_blocks);
}

/* With all of B packed and shared (if it fits SHARED_B_MAX): units of at
 * least MIN_UNIT_PANELS register tiles each way, about UNITS_TARGET of them
 * per product, row blocks first (splitting columns repacks A). Returns 0
 * (plan unchanged) when B does not fit. */
static int plan_shared_b(gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const rt_gemm_kernel *kern = pl->kern;
  const int64_t mr = kern->mr, nr = kern->nr, kdiv = kern->compute == NRT_BFLOAT16 ? 2 : 1;
  pl->ktot = g->k * g->kslices;
  pl->kc = ceil_div(pl->ktot, ceil_div(pl->ktot, kern->kc)); /* equal k blocks */
  if (kdiv == 2) pl->kc = round_up(pl->kc, 2);               /* whole pairs */
  pl->npad = round_up(g->n, nr);
  if ((double)ceil_div(pl->ktot, kdiv) * (double)pl->npad * (double)g->batch > SHARED_B_MAX) return 0;
  /* k chunks that keep the freshly packed B in cache; C accumulates them in
   * place, so a workspace (C not direct) takes all of k at once. */
  pl->kb = pl->ktot;
  if (pl->direct) {
    const int64_t chunk = kern->compute == NRT_FLOAT32 ? SHARED_B_CHUNK_F32 : SHARED_B_CHUNK;
    int64_t blocks = chunk / (pl->kc / kdiv * pl->npad * g->batch);
    if (blocks < 1) blocks = 1;
    pl->kb = min64(pl->ktot, blocks * pl->kc);
  }
  pl->bsh_item = ceil_div(pl->kb, kdiv) * pl->npad;
  int64_t per_item = ceil_div(UNITS_TARGET, g->batch);
  int64_t rpanels = ceil_div(g->m, mr), cpanels = pl->npad / nr;
  int64_t mb = min64(ceil_div(rpanels, MIN_UNIT_PANELS), per_item);
  /* A unit sweeps B's panels once per k block: what must stay in L2 is one k block of B. */
  const double b_block_bytes = (double)ceil_div(pl->kc, kdiv) * (double)pl->npad *
                               (double)(kdiv == 2 ? 4 : (int64_t)nrt_dtype_size(kern->compute));
  if (kern->big_b_mc && b_block_bytes > BIG_B_BYTES) mb = min64(mb, ceil_div(g->m, kern->big_b_mc));
  if (mb < ceil_div(g->m, kern->mc)) mb = ceil_div(g->m, kern->mc);
  pl->mc = round_up(ceil_div(g->m, mb), mr);
  pl->m_blocks = ceil_div(g->m, pl->mc);
  /* Split columns only when rows give few units (A is then packed once and shared). */
  int64_t nb = 2 * pl->m_blocks > per_item ? 1
                                           : min64(ceil_div(per_item, pl->m_blocks),
                                                   ceil_div(cpanels, MIN_UNIT_PANELS));
  if (nb < 1) nb = 1;
  pl->nc = round_up(ceil_div(g->n, nb), nr);
  pl->n_blocks = ceil_div(g->n, pl->nc);
  pl->units = g->batch * pl->n_blocks * pl->m_blocks;
  pl->ws_blocks = 1;
  return 1;
}

/* Whether the micro-kernels read B where it lies instead of packed: B in
 * the compute type with unit column stride, whole nr-column panels (the
 * kernel reads nr values per row), one slice of k, and at most
 * B_IN_PLACE_MAX bytes per batch item. For such small products packing B
 * cost a sixth of the time (12 x 128x64 @ 64x128: 121-128 GFLOP/s packed,
 * 146-155 in place); for B of 1-4 MiB (512^3, 1024^3) reading in place
 * made no difference beyond the noise, and packing keeps the kernel's
 * reads contiguous whatever B's row stride. A panel read in place falls
 * in few L1 sets: rows S cache lines apart use 128 / S of the 64 sets
 * (12 ways), so its kc rows fit only while kc * S stays well under 1536
 * lines; beyond B_IN_PLACE_SET_LINES it went back to L2 between tiles
 * (one thread, CPU time: 2048x128 @ 128x512, S = 32, 207 GF/s in place,
 * 229 packed; 2048x384 @ 384x128, S = 8 and kc = 192, 220 -> 229; the
 * attention products, kc * S = 512, stay in place). */
static int b_in_place(const gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const rt_gemm_kernel *kern = pl->kern;
  return kern->compute != NRT_BFLOAT16 && g->ab_dtype == kern->compute && g->kslices == 1 &&
         g->b_cs == 1 && g->n % kern->nr == 0 &&
         (double)g->k * (double)g->n * (double)nrt_dtype_size(g->ab_dtype) <= B_IN_PLACE_MAX &&
         ceil_div(g->k, ceil_div(g->k, kern->kc)) * ceil_div(llabs(g->b_rs) * (int64_t)nrt_dtype_size(g->ab_dtype), 64) <=
             B_IN_PLACE_SET_LINES;
}

/* How the float32 micro-kernels read A's full row panels (a last partial
 * one is always packed): where they lie when B is narrow, at most
 * A_IN_PLACE_PANELS column panels, so that each A panel serves few B
 * panels and packing it (a transpose for a row-major A) costs more than
 * it saves: rows of a row-major A (A_ROWS), or k rows of a k-major A (a
 * transposed operand, as x^T in a weight gradient) whose stride is under a
 * page (A_KMAJOR; with a page per k row, as m = 1024, it was 5% slower).
 * Measured on one thread against packing (benchmarks/gemm_kernels.py
 * --dtype float32): 2048x128 @ 128x384 +10%, 12 x 128x128 @ 128x64 +24%,
 * (2048x384)^T @ 2048x128 +6%; with 1024 columns or more it was 1-5%
 * slower. */
static int a_in_place(const gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const rt_gemm_kernel *kern = pl->kern;
  /* bfloat16: only W of a transposed small-m product (its word-aligned
   * pairs checked by small_m_transposed). */
  if (kern->compute == NRT_BFLOAT16) {
    /* ... or x of a straight small-m product packing B per unit (which
     * would pack x again for every column block: 15% of 128x3072 @
     * 3072x768), when its pairs of k are aligned words. */
    const int x_words = pl->small_m_b && g->a_cs == 1 && g->k % 2 == 0 && g->a_rs > 0 && g->a_rs % 2 == 0 &&
                        (uintptr_t)g->a % 4 == 0;
    return (pl->small_m || x_words) && kern->bf16_rows && g->m >= kern->mr ? A_ROWS : A_PACKED;
  }
  if (kern->compute != NRT_FLOAT32 || g->ab_dtype != NRT_FLOAT32 || g->kslices != 1 || g->m < kern->mr ||
      g->n > A_IN_PLACE_PANELS * kern->nr)
    return A_PACKED;
  if (g->a_cs == 1 && kern->f32_rows) return A_ROWS;
  if (g->a_rs == 1 && g->a_cs > 0 && g->a_cs * (int64_t)sizeof(float) < 4096) return A_KMAJOR;
  return A_PACKED;
}

/* Whether the AMX kernel rounding bfloat16 C itself (bf16_c) reads A's
 * rows where they lie instead of packed: a row-major bfloat16 A whose k
 * pairs are aligned words (even k and row stride, 4-byte aligned), whole
 * 32-row panels, one slice and one k block, and either at most
 * A_BF16_IN_PLACE_MAX bytes (L1) per batch item or a B small enough that
 * the block kernel takes row panels outer (bf16_c_rows_b_bytes). Measured
 * on one thread (benchmarks/gemm_kernels.py --clock cpu --shapes gemm):
 * attention's 12 x 128x64 @ 64x128 and 12 x 128x128 @ 128x64 +15-23%,
 * where packing served few B panels. Column panels outer, a tile's A
 * comes from L2 for every tile, and A of 0.5-4 MiB read in place was
 * 3-30% slower (16 strided lines instead of one contiguous 1 KiB: 2048x768
 * @ 768x768, 2048x768 @ 768x3072); row panels outer, an A panel is read
 * from memory once and then stays in L1, and the copy into packed panels
 * is saved (it was 16% of 2048x128 @ 128x128): 2048x128 @ 128x128 and
 * 2048x128 @ 128x384 -20%, 2048x256 @ 256x1024 -3-7%. */
static int a_bf16_in_place(const gemm_plan *pl) {
  const rt_gemm_args *g = &pl->g;
  const rt_gemm_kernel *kern = pl->kern;
  const double b_bytes = (double)ceil_div(g->k, 2) * 4 * (double)round_up(g->n, kern->nr);
  return kern->bf16_c && g->ab_dtype == NRT_BFLOAT16 && g->c_dtype == NRT_BFLOAT16 && g->c_cs == 1 && !g->cin &&
         rt_isa_avx512_bf16() && g->kslices == 1 && g->a_cs == 1 && g->k % 2 == 0 && g->a_rs > 0 && g->a_rs % 2 == 0 &&
         g->a_bs % 2 == 0 && (uintptr_t)g->a % 4 == 0 && g->m % kern->mr == 0 && g->k <= kern->kc &&
         (g->m * g->k * 2 <= A_BF16_IN_PLACE_MAX ||
          (kern->bf16_c_block && b_bytes <= (double)kern->bf16_c_rows_b_bytes));
}

/* C^T = B^T A^T: the same product with the roles of rows and columns swapped. */
static void transpose_problem(rt_gemm_args *g) {
  int64_t t;
  const void *p = g->a;
  g->a = g->b, g->b = p;
  t = g->m, g->m = g->n, g->n = t;
  t = g->a_bs, g->a_bs = g->b_bs, g->b_bs = t;
  t = g->a_ss, g->a_ss = g->b_ss, g->b_ss = t;
  int64_t ars = g->a_rs, acs = g->a_cs;
  g->a_rs = g->b_cs, g->a_cs = g->b_rs;
  g->b_rs = acs, g->b_cs = ars;
  t = g->c_rs, g->c_rs = g->c_cs, g->c_cs = t;
  t = g->cin_rs, g->cin_rs = g->cin_cs, g->cin_cs = t;
}

/* Whether a float32 product with few rows and a transposed row-major B
 * (B^T's rows contiguous: a weight W [n, k] read as W^T, what linear and
 * addmm(bias, x, W.t()) compute) runs as C^T = B^T A^T. Straight, all of
 * B is packed (a transpose of n x k values) on every call to serve only
 * ceil(m / mr) row panels; transposed, W is the A operand whose full row
 * panels are read where they lie (a_in_place, A_ROWS), only x^T (k x m) is
 * packed, and C is written transposed (tile_flush / flush_cols_f32, or a
 * workspace). Transposed the m rows become columns, computed nr at a time
 * and a last panel of 8, 16 or 24 by the narrow tiles where the kernel has
 * them (transposed_columns): it pays when the columns it adds over the rows
 * straight (transposed_columns(m) - round_up(m, mr)) cost less than packing
 * B, which was worth about SMALL_M_PACK_COLUMNS of them on one thread (12 x
 * 32 tile, CPU time, docs/performance.md, session s46-smallm: m = 16, 32,
 * 64, 128 transposed 1.1-1.9x, m = 4, 8, 48 with 32-column tiles only
 * 0.55-0.9x), and always when B is too large for the caches (SMALL_M_BIG_B:
 * packing it streams it from memory; 4096 x 4096 at m = 4 and 8: 1.2-1.4x).
 * With the narrow tiles (AVX-512 and AVX2) every m from 2 to 128 qualifies
 * (session s47-gemm19: m = 4-16 1.1-2.4x). Each element's sum is the same
 * in both orientations (one thread, k blocks of the same kc, Cin joining
 * after the first k block: see ws_cin), so the result is bitwise the
 * straight plan's; test_gemm.c compares them. */
/* Columns the tiles compute for m columns of C^T: whole nr-column panels,
 * and a last one of 8, 16 or 24 columns where the kernel has the narrow
 * rows tiles (f32_rows_narrow: units_f32's rows_ukr). */
static int64_t transposed_columns(const rt_gemm_kernel *kern, int64_t m) {
  const int64_t full = m / kern->nr * kern->nr, rest = m - full;
  if (rest == 0) return full;
  const int64_t w = (rest + 7) / 8 - 1;
  const int narrow = w < 3 && (kern->compute == NRT_BFLOAT16 ? kern->bf16_rows_narrow[w] != NULL
                                                             : kern->f32_rows_narrow[w] != NULL);
  return full + (narrow && rest < kern->nr ? 8 * (w + 1) : kern->nr);
}

/* bfloat16 (session s47-bf16rows): the same plan where the kernel has a
 * rows tile (bf16_rows: AVX512-BF16, and AMX since session s48-amxsmall,
 * whose A tile loads take W's rows where they lie), W's pairs of k read as
 * aligned words in place: an even k, an even row stride and a 4-byte
 * aligned W (else straight). Its sums are the straight plan's too (the same
 * pairs, dot products and order; test_gemm.c). */
static int small_m_dtypes(const rt_gemm_args *g, const rt_gemm_kernel *kern) {
  if (kern->compute == NRT_FLOAT32)
    return g->ab_dtype == NRT_FLOAT32 && g->c_dtype == NRT_FLOAT32 && kern->f32_rows;
  return kern->compute == NRT_BFLOAT16 && g->ab_dtype == NRT_BFLOAT16 && kern->bf16_rows && rt_isa_avx512_bf16() &&
         g->k % 2 == 0 && g->b_cs > 0 && g->b_cs % 2 == 0 && (uintptr_t)g->b % 4 == 0;
}

static int small_m_transposed(const rt_gemm_args *g, const rt_gemm_kernel *kern) {
  if (g->straight || !small_m_dtypes(g, kern) ||
      g->batch != 1 || g->kslices != 1 || g->c_cs != 1 || g->b_rs != 1 || g->b_cs == 1 || g->a_cs != 1 ||
      g->m > SMALL_M_MAX || g->n < 2 * kern->nr || g->m < 2)
    return 0;
  /* Cin that is C: straight, the kernel fuses alpha * AB + beta * C, which
   * rounds otherwise than the transposed plan's alpha * AB, then + beta * C
   * (the same only for alpha = beta = 1). */
  if (g->cin == g->c && g->cin_rs == g->c_rs && g->cin_cs == g->c_cs && (g->alpha != 1 || g->beta != 1)) return 0;
  /* bfloat16 with short rows: writing C^T's columns (flush_cols_bf16,
   * scalar) costs more than packing W saves (one thread, 1024x256: m = 50,
   * 100, 128 1.2-1.3x slower transposed; m = 2 1.2x faster, m = 12 even). */
  const int64_t any_k = kern->small_m_bf16_any_k ? kern->small_m_bf16_any_k : SMALL_M_BF16_ANY_K;
  if (kern->compute == NRT_BFLOAT16 && g->k < SMALL_M_BF16_MIN_K && g->m > any_k) return 0;
  if ((double)g->n * (double)g->k * (double)nrt_dtype_size(g->ab_dtype) >= SMALL_M_BIG_B) return 1;
  return transposed_columns(kern, g->m) <= round_up(g->m, kern->mr) + SMALL_M_PACK_COLUMNS;
}

/* Whether a bfloat16 product with few rows that stays straight (x @ W with
 * W [k, n] row-major, whose pairs of k are not words in place: the input
 * gradient dy @ W, or an odd k) packs B unit by unit, in column blocks of
 * SMALL_M_UNIT_B_COLUMNS, instead of all of B into the shared buffer first:
 * each block is then used from L2 while just packed, where a shared B of a
 * few MiB went out to L3 between its packing and its use. AMX only (the
 * AVX512-BF16 kernel's choices, measured on the Zen 4, stay). One thread,
 * CPU time, x [m, k] @ W [k, n] (session s48-amxsmall): 768x3072 m = 4
 * 721 -> 468 us, m = 32 723-1034 -> 527-587, m = 64 950-1020 -> 724-743,
 * m = 128 1315-1336 -> 1153-1164; 3072x768 m = 4 622 -> 489, m = 64
 * 907-972 -> 822-863, m = 128 1310-1511 -> 1302-1437; 768x768 m = 4 114
 * -> 83. Columns of 256 or 512 gained less (m = 4: 496, 554). The same
 * sums (k blocks of the same kc, in order): only where B is packed
 * changes. Only for a row-major x (rows read in place or copied): a
 * k-major one (a weight gradient's x^T) would be transposed again for
 * every column block, where the shared plan packs it once (one thread,
 * (2048x128)^T @ 2048x512: 467-564 us shared, 569-582 per unit). */
static int unit_packs_b(const rt_gemm_args *g, const rt_gemm_kernel *kern) {
  return kern->compute == NRT_BFLOAT16 && kern->bf16_pack_a && g->batch == 1 && g->kslices == 1 &&
         g->m <= SMALL_M_UNIT_B_ROWS && g->a_cs == 1;
}

/* k == 0: C = beta * Cin (zeros when beta == 0). */
static void scale_only(const rt_gemm_args *g) {
  for (int64_t t = 0; t < g->batch; t++)
    for (int64_t i = 0; i < g->m; i++)
      for (int64_t j = 0; j < g->n; j++) {
        double v = 0;
        if (g->beta != 0)
          v = g->beta * rt_gemm_load(g->c_dtype, g->cin, t * g->cin_bs + i * g->cin_rs + j * g->cin_cs);
        rt_gemm_store(g->c_dtype, g->c, t * g->c_bs + i * g->c_rs + j * g->c_cs, v);
      }
}

static int is_float16ish(nrt_dtype d) { return d == NRT_FLOAT16 || d == NRT_BFLOAT16; }
static int is_integer(nrt_dtype d) { return d >= NRT_UINT8 && d <= NRT_INT64; }

static nrt_status check_args(const rt_gemm_args *g) {
  if (g->batch < 0 || g->m < 0 || g->n < 0 || g->k < 0 || g->kslices < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: bad sizes batch=%lld m=%lld n=%lld k=%lld kslices=%lld",
                   (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k,
                   (long long)g->kslices);
  nrt_dtype ab = g->ab_dtype, c = g->c_dtype;
  int ok_ab = ab == NRT_FLOAT32 || ab == NRT_FLOAT64 || is_float16ish(ab) || is_integer(ab);
  if (!ok_ab || !(c == ab || (is_float16ish(ab) && c == NRT_FLOAT32)))
    return rt_fail(NRT_ERROR_UNSUPPORTED, "gemm: unsupported dtypes: inputs %s, output %s",
                   (unsigned)ab < NRT_DTYPE_COUNT ? nrt_dtype_name(ab) : "?",
                   (unsigned)c < NRT_DTYPE_COUNT ? nrt_dtype_name(c) : "?");
  if (g->kernel && g->kernel->compute != (ab == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32) &&
      !(g->kernel->compute == NRT_BFLOAT16 && ab == NRT_BFLOAT16))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "gemm: kernel %s does not take %s inputs",
                   g->kernel->name, nrt_dtype_name(ab));
  return NRT_SUCCESS;
}

/* The epilogue of the paths without blocks (k == 0, integers, vectors):
 * each batch item's whole C at once, on the calling thread. */
static nrt_status whole_epilogue(const rt_gemm_args *g) {
  nrt_status s = NRT_SUCCESS;
  for (int64_t t = 0; g->epilogue && t < g->batch && !s; t++) s = g->epilogue(g->epilogue_ctx, t, 0, g->m, 0, g->n);
  return s;
}

nrt_status rt_gemm(const rt_gemm_args *args) {
  nrt_status s = check_args(args);
  if (s != NRT_SUCCESS) return s;
  gemm_plan pl = {.g = *args};
  rt_gemm_args *g = &pl.g;
  if (g->batch == 0 || g->m == 0 || g->n == 0) return NRT_SUCCESS;
  if (g->beta == 0) g->cin = NULL;
  if (g->k == 0) {
    scale_only(g);
    return whole_epilogue(args);
  }
  if (is_integer(g->ab_dtype)) return (s = rt_gemm_integer(g)) ? s : whole_epilogue(args);
  /* Strides of size-1 dimensions are arbitrary: make them harmless. */
  if (g->n == 1) g->c_cs = 1, g->cin_cs = 0;
  if (g->m == 1) g->c_rs = 1, g->cin_rs = 0;
  if (g->kslices == 1 && (g->n == 1 || g->m == 1)) {
    if (g->n != 1) transpose_problem(g);
    return (s = rt_gemv(g)) ? s : whole_epilogue(args);
  }
  if (g->c_cs != 1 && g->c_rs == 1) {
    transpose_problem(g);
    pl.transposed = 1;
  }
  nrt_dtype compute = g->ab_dtype == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32;
  if (g->kernel) {
    pl.kern = g->kernel;
  } else {
    const rt_gemm_kernel *const *list;
    if (g->ab_dtype != NRT_BFLOAT16 || rt_gemm_kernels(NRT_BFLOAT16, &list) == 0)
      rt_gemm_kernels(compute, &list);
    pl.kern = list[0];
  }
  if (!pl.transposed && small_m_transposed(g, pl.kern)) {
    transpose_problem(g);
    pl.transposed = pl.small_m = 1;
  }
  pl.direct = g->c_dtype == compute && g->c_cs == 1;
  pl.cin_is_c = g->cin == g->c && g->cin_bs == g->c_bs && g->cin_rs == g->c_rs && g->cin_cs == g->c_cs;
  const int kind = pl.kern->compute == NRT_FLOAT64 ? 0 : pl.kern->compute == NRT_BFLOAT16 ? 2 : 1;
  static const rt_range_fn run[3] = {run_units_f64, run_units_f32, run_units_bf16x2};
  static const chunk_fn pack_b[3] = {pack_shared_f64, pack_shared_f32, pack_shared_bf16x2};
  static const chunk_fn pack_a[3] = {pack_shared_a_f64, pack_shared_a_f32, pack_shared_a_bf16x2};
  static const chunk_fn units_fn[3] = {units_f64, units_f32, units_bf16x2};
  static const rt_range_fn claim[3] = {claim_units_f64, claim_units_f32, claim_units_bf16x2};
  static const int64_t packed_size[3] = {sizeof(double), sizeof(float), sizeof(uint32_t)};
  double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->kslices * (double)g->batch;
  /* A transposed small-m product streams W (A) from memory or L3 for few
   * flops: its time goes with W's bytes, which two cores read faster. */
  const int streams_w = pl.small_m && (double)g->m * (double)g->k * (double)nrt_dtype_size(g->ab_dtype) >= SMALL_M_SPLIT_BYTES;
  int parallel = flops >= MIN_PARALLEL_FLOPS && !(g->batch == 1 && flops < pl.kern->serial_flops && !streams_w);
  /* Alone, the chunk just used is the one to pack next (it is in L2);
   * with helpers, the next chunk is packed while this one is in use. */
  pl.bufs = parallel && rt_num_threads() > 1 ? 2 : 1;
  pl.b_inplace = b_in_place(&pl);
  pl.small_m_b = !pl.small_m && !pl.transposed && unit_packs_b(g, pl.kern);
  pl.a_inplace = a_in_place(&pl);
  pl.a_bf16_rows = a_bf16_in_place(&pl);
  if (pl.small_m_b || !plan_shared_b(&pl)) {
    plan_blocks(&pl);
    rt_parallel_for(pl.units, parallel ? 1 : pl.units, run[kind], &pl);
  } else if (pl.b_inplace) {
    claim_all_units(&pl, claim[kind], parallel); /* nothing to pack: one pass over all of k */
  } else {
    /* Several column blocks would each pack the same A: pack it once. */
    const int64_t kdiv = kind == 2 ? 2 : 1;
    pl.akblocks = ceil_div(pl.kb, pl.kc);
    pl.ablock = round_up(pl.mc, pl.kern->mr) * ceil_div(pl.kc, kdiv);
    const int64_t ash_elems = g->batch * pl.m_blocks * pl.akblocks * pl.ablock;
    if (pl.n_blocks > 1 && ash_elems <= SHARED_A_MAX && !pl.a_inplace && !pl.a_bf16_rows)
      pl.ash_elems = ash_elems; /* run_pipeline allocates ash */
    /* Packing tasks: groups of panels small enough that every thread packs
     * a share, or k ranges of whole rows (pack_shared_rows_f32). */
    int64_t kblocks = ceil_div(pl.kb, pl.kc);
    int64_t panels = g->batch * kblocks * ceil_div(g->n, pl.kern->nr);
    pl.group = panels >= MIN_PACK_TASKS * PANEL_GROUP ? PANEL_GROUP : ceil_div(panels, MIN_PACK_TASKS);
    pl.pack_b = pack_b[kind];
    if (kind == 1 && g->ab_dtype == NRT_FLOAT32 && g->b_cs == 1 && g->n * (int64_t)sizeof(float) >= B_ROWS_PACK_MIN_BYTES) {
      pl.pieces = ceil_div(MIN_PACK_TASKS, g->batch * kblocks);
      pl.pack_b = pack_shared_rows_f32;
    }
    pl.pack_a = pack_a[kind];
    pl.run = units_fn[kind];
    pl.psize = packed_size[kind];
    if (kind == 1 && column_jobs(&pl))
      rt_parallel_for(g->batch * pl.n_blocks, 1, column_jobs_f32, &pl);
    else if (kind == 2 && batch_jobs(&pl))
      rt_parallel_for(g->batch, ceil_div(g->batch, rt_num_threads()), batch_jobs_bf16x2, &pl);
    else if ((s = run_pipeline(&pl, parallel)))
      return s;
  }
  if (pl.failed) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "gemm: out of host memory for packing buffers");
  return pl.epilogue_status;
}
