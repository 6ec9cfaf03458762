/* The driver of the elementwise random kernels.
 *
 * A random value belongs to an element's logical (row-major) index, not to
 * a memory position, so these kernels cannot use the iteration engine's
 * memory-order walk. This driver cuts the logical index space into chunks
 * of RT_RANDOM_CHUNK elements, runs the chunks across the thread pool and
 * presents each chunk to the kernel as contiguous arrays in the dtypes it
 * asks for: operands that are contiguous in that dtype are used in place,
 * others are gathered (inputs) or scattered (outputs) through small
 * buffers with PyTorch's conversions.
 */
#ifndef NEURONRT_OPS_RANDOM_ENGINE_H
#define NEURONRT_OPS_RANDOM_ENGINE_H

#include <pthread.h>
#include <stdint.h>
#include "internal.h"
#include "ops/random/philox.h"

/* Elements per chunk: a multiple of 8, so chunks start on block and
 * Box-Muller pair boundaries in every mapping of random.h. */
#define RT_RANDOM_CHUNK 1024

typedef struct rt_random_chunk {
  int64_t first; /* logical index of data[k][0]; a multiple of RT_RANDOM_CHUNK */
  int64_t count;
  char *data[NRT_MAX_OPERANDS];
} rt_random_chunk;

/* Fills a chunk's outputs. Called concurrently for disjoint chunks. */
typedef void (*rt_random_fn)(const rt_random_chunk *chunk, void *ctx);

/* Runs fn over every element of op's operands (one shape; inputs may be
 * broadcast or immediate), each presented in want[k]. */
void rt_random_run(const nrt_op *op, const nrt_dtype *want, rt_random_fn fn, void *ctx);

/* Checks the layout every random op shares (operand and output counts,
 * at least `scalars` scalars, every operand of the output's shape) and
 * reads the launch's stream from scalars [seed, offset] (if stream is not
 * NULL). Fails naming the op. */
nrt_status rt_random_check(const nrt_op *op, int operands, int outputs, int scalars,
                           rt_philox_stream *stream);

/* A data error found by concurrent chunks (a probability outside [0, 1],
 * ...): the one at the lowest index is kept, so the message does not
 * depend on thread timing; the kernel reports it once it is done. */
typedef struct rt_random_error {
  pthread_mutex_t mu;
  int set;
  int64_t index;
  double value;
} rt_random_error;

#define RT_RANDOM_ERROR_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

void rt_random_error_record(rt_random_error *e, int64_t index, double value);

/* Scalar k of op as a double or an int64, whichever the producer set. */
static inline double rt_random_scalar_f(const nrt_op *op, int k) {
  return op->scalars[k].is_float ? op->scalars[k].f : (double)op->scalars[k].i;
}

static inline int64_t rt_random_scalar_i(const nrt_op *op, int k) {
  return op->scalars[k].is_float ? (int64_t)op->scalars[k].f : op->scalars[k].i;
}

/* 64-bit random integers from two words; the high half of x * range. */
static inline uint64_t rt_random_u64(uint32_t lo, uint32_t hi) { return (uint64_t)hi << 32 | lo; }

static inline uint64_t rt_mulhi_u64(uint64_t a, uint64_t b) {
  __extension__ typedef unsigned __int128 u128;
  return (uint64_t)(((u128)a * b) >> 64);
}

#endif
