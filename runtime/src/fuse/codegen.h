/* Generated code per fused group: the tape (tape.h) written out as one C
 * function, compiled by the host's C compiler and loaded (jit.c).
 *
 * The tape makes one pass per instruction over a 256-element block: a
 * load and a store per vector and op. The generated function is one loop
 * over the elements in which every value of the tape is a local, so the
 * whole chain stays in registers, as a hand-written fused loop would. Each
 * op is the same float_exprs.h macro the tape and the unfused kernels
 * evaluate (the headers' text is embedded in the runtime at build time),
 * compiled with the kernels' floating-point flags (ISO C11: no
 * contraction; no trapping math, no errno) for the ISA level the process
 * runs at, so the results are bitwise the tape's. Every loaded kernel is
 * run once on a probe of special values against the tape's scalar twin
 * before it is used.
 *
 * Everything degrades to the tape: no compiler, a compile error, an
 * unusable cache directory, a cached file that fails its checksum (it is
 * recompiled), a probe mismatch. Each is counted (fuse.codegen.fallbacks)
 * and logged once at warning level.
 *
 * The graph compiler asks for a kernel per fused group when it compiles a
 * program (graph/compile.c); adaptive eager groups do not use generated
 * code. TORCHNEURON_CODEGEN=0 turns it off; TORCHNEURON_CC names the
 * compiler (default: the one that built the runtime).
 */
#ifndef NEURONRT_FUSE_CODEGEN_H
#define NEURONRT_FUSE_CODEGEN_H

#include <stddef.h>
#include <stdint.h>
#include "neuronrt/fuse.h"
#include "fuse/tape.h"

/* A generated kernel: n elements; in[k] and out[j] are n contiguous
 * float32 each, and no output overlaps an input or another output. */
typedef void (*rt_gen_fn)(int64_t n, const float *const *in, float *const *out);

/* A loaded kernel. Kernels are kept for the life of the process (shared by
 * every group with the same tape), never unloaded. */
typedef struct rt_gen_kernel {
  rt_gen_fn fn;
  int32_t isa; /* the nrt_isa it was compiled for */
  int32_t num_inputs, num_outputs;
  rt_fuse_tape tape; /* the tape it computes */
  uint64_t key[2];   /* of its source, compiler and flags */
  struct rt_gen_kernel *next;
} rt_gen_kernel;

struct nrt_fuse_group;
struct rt_fuse_box;

/* Where a compiled program's group finds its kernel (codegen_async.c):
 * NULL until the kernel is compiled, loaded and probe-checked, then the
 * kernel, published once with a release store and read with an acquire
 * load, so a run sees the tape or a complete kernel, never a part of one.
 * Reference counted: the program holds one reference, a queued
 * background compile another, so either may go first. */
typedef struct rt_gen_cell {
  _Atomic(const struct rt_gen_kernel *) kernel;
  _Atomic int refs;
} rt_gen_cell;

/* A new cell (one reference), or NULL when out of memory. */
rt_gen_cell *rt_gen_cell_new(void);
void rt_gen_cell_release(rt_gen_cell *c);
/* The cell's kernel, or NULL (NULL cell: NULL). */
const struct rt_gen_kernel *rt_gen_cell_kernel(const rt_gen_cell *c);
void rt_gen_cell_set(rt_gen_cell *c, const struct rt_gen_kernel *k);

/* TORCHNEURON_CODEGEN: 0 off, 1 in the background (default), 2 "sync"
 * (compiled while the graph is compiled, as before). */
int rt_fuse_codegen_mode(void);

/* Fills cell with g's kernel: at once when this process has it or the
 * disk cache does (cheap), else queues g's compile to the background
 * worker (one low-priority thread), which sets the cell when the kernel
 * is compiled, loaded and probe-checked; until then the group runs its
 * tape. Failures degrade to the tape, counted, as rt_fuse_codegen_get. */
void rt_fuse_codegen_request(const struct nrt_fuse_group *g, rt_gen_cell *cell);

/* Waits until no background compile is queued or running, or timeout
 * seconds (negative: no limit) have passed; the compiles still pending. */
int32_t rt_fuse_codegen_wait(double timeout);
/* Background compiles queued or running now. */
int32_t rt_fuse_codegen_pending(void);

/* codegen.c: g's kernel from this process's kernels or the disk cache
 * only: NULL with *missed 1 when it would have to be compiled (NULL with
 * *missed 0: no tape, off, or failed, counted). */
const rt_gen_kernel *rt_fuse_codegen_lookup(const struct nrt_fuse_group *g, int *missed);
/* codegen.c: fallbacks are neither counted nor logged from now on (the
 * process is exiting and its compiles are being stopped). */
void rt_fuse_codegen_quiet(void);

/* Whether generated code is wanted (TORCHNEURON_CODEGEN is not "0"). */
int rt_fuse_codegen_enabled(void);

/* Fills the parts of g that the tape depends on (dtypes, instructions,
 * immediates, outputs) and builds its tape; g->tape.num_ops is 0 when the
 * group has none. For callers that have a group's description but no
 * tensors (the graph compiler). */
void rt_fuse_tape_for(struct nrt_fuse_group *g, int32_t num_inputs, const nrt_dtype *input_dtypes,
                      int32_t num_registers, const nrt_dtype *registers, int32_t num_insts,
                      const nrt_fuse_inst *insts, int32_t num_outputs, const int32_t *output_registers);

/* The C source of g's tape as one function named sym (malloc'd, NUL
 * terminated), or NULL when out of memory or the tape is empty. */
char *rt_fuse_codegen_source(const struct nrt_fuse_group *g, const char *sym);

/* The kernel of g's tape (g built by rt_fuse_tape_for or a group init):
 * from this process's kernels, the disk cache, or compiled now. NULL when
 * g has no tape, generated code is off, or it failed (counted and logged
 * once). */
const rt_gen_kernel *rt_fuse_codegen_get(const struct nrt_fuse_group *g);

/* Forgets this process's kernels (they stay loaded), so that the next
 * rt_fuse_codegen_get goes to the disk cache. For tests; no group may
 * still point at one. */
void rt_fuse_codegen_forget(void);

/* k if it computes g's tape at the ISA level the process runs at now,
 * else NULL (counted as a fallback when k is not NULL). */
const rt_gen_kernel *rt_fuse_codegen_match(const rt_gen_kernel *k, const struct nrt_fuse_group *g);

/* Runs g->gen over box b (scratch: rt_fuse_tape_scratch_bytes of g's
 * tape) and stores its outputs, as rt_fuse_tape_run does. */
void rt_fuse_codegen_run(const struct nrt_fuse_group *g, const struct rt_fuse_box *b, char *scratch);

/* jit.c: compiles source (defining sym) with the C compiler, caches the
 * shared object on disk and loads it; the function, or NULL with the
 * reason in why. *from_cache: 1 if it came from the disk cache. With
 * may_compile 0 it only looks in the disk cache: NULL and *missed 1 when
 * the kernel is not there (any other failure leaves *missed 0). */
rt_gen_fn rt_jit_load(const char *source, const char *sym, int32_t isa, uint64_t key_out[2],
                      int *from_cache, int may_compile, int *missed, char *why, size_t why_len);

/* jit.c: the compilers the calling thread runs are the background
 * worker's (a process group each, stopped by rt_jit_stop_compilers). */
void rt_jit_track_thread(void);
/* jit.c: stops the worker's running compiler (SIGTERM to its process
 * group) and refuses to start others. */
void rt_jit_stop_compilers(void);
/* jit.c: in a forked child, forgets the parent's compiler. */
void rt_jit_after_fork_child(void);

/* jit.c: 128 bits of hash of bytes (two 64-bit hashes). */
void rt_jit_hash(const void *data, size_t len, uint64_t h[2]);

/* Embedded header texts (generated at build time from the sources). */
extern const unsigned char rt_embedded_vmath_h[];
extern const unsigned char rt_embedded_float_exprs_h[];
extern const unsigned char rt_embedded_vmath_sigmoid_tame_h[];

#endif
