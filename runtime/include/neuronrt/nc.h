/* The simulated NeuronCore: runs NKI programs on SBUF/PSUM.
 *
 * A program is a list of engine instructions over a table of tensors: HBM
 * tensors (bound to memory when the program runs) and on-chip allocations in
 * SBUF or PSUM (placed by nrt_nc_program_create). Every access pattern is
 * static, so creation checks every hardware rule once (tile limits, buffer
 * placement per engine, bounds, capacity) and reports the first violation
 * with the rule's name and the instruction's index; running a created
 * program cannot fail. Creation also runs the cost model, which estimates
 * the program's latency on the configured generation.
 *
 * Element addressing. An access pattern (nrt_nc_ap) is a partition dimension
 * plus up to four free dimensions, each [stride, count] in elements of the
 * pattern's dtype. On chip, partition p of the pattern is partition
 * (allocation base + partition_start + p * partition_step) and free element
 * (i0..i3) sits offset + sum(stride * i) elements past the allocation's
 * byte offset within that partition. For HBM, the partition dimension is an
 * ordinary outer dimension: element = offset + p * partition_step + sum(...).
 */
#ifndef NEURONRT_NC_H
#define NEURONRT_NC_H

#include <stdint.h>
#include "neuronrt/device.h"
#include "neuronrt/status.h"
#include "neuronrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_nc_dtype {
  NRT_NC_BOOL = 0, /* stored as uint8 */
  NRT_NC_UINT8,
  NRT_NC_INT8,
  NRT_NC_UINT16,
  NRT_NC_INT16,
  NRT_NC_UINT32,
  NRT_NC_INT32,
  NRT_NC_FLOAT8_E4M3, /* IEEE-style: bias 7, max 240, exponent 15 is inf/NaN */
  NRT_NC_FLOAT8_E5M2,
  NRT_NC_FLOAT16,
  NRT_NC_BFLOAT16,
  NRT_NC_TFLOAT32, /* 4 bytes, mantissa rounded to 10 bits */
  NRT_NC_FLOAT32,
  /* Packed MX element types (nki.isa.quantize_mx / nc_matmul_mx only; other
   * instructions may only copy them bit-exactly). Element i of a word is
   * logical value i of four consecutive values along the free dim. */
  NRT_NC_FLOAT8_E4M3FN_X4, /* 4 bytes: byte i = float8_e4m3fn (bias 7, max 448, no inf) */
  NRT_NC_FLOAT8_E5M2_X4,   /* 4 bytes: byte i = float8_e5m2 */
  NRT_NC_FLOAT4_E2M1FN_X4, /* 2 bytes: bits 4i..4i+3 = float4_e2m1fn (bias 1, max 6) */
  /* OCP MX scale: 1 byte b = 2^(b - 127), 255 NaN; no sign, no zero. Stores
   * round to the nearest power of two (ties up, as torch.float8_e8m0fnu). */
  NRT_NC_FLOAT8_E8M0FNU,
  /* A 64-bit device scalar (nki.isa.NkiScalar of nl.int64): only [1, 1]
   * words, moved by DMA bit-exactly, combined by SCALAR_INT (add, subtract,
   * multiply) and read as an HBM access's scalar_offset. */
  NRT_NC_INT64,
  NRT_NC_DTYPE_COUNT
} nrt_nc_dtype;

typedef enum nrt_nc_buffer { NRT_NC_SBUF = 0, NRT_NC_PSUM, NRT_NC_HBM } nrt_nc_buffer;

typedef enum nrt_nc_engine {
  NRT_NC_ENGINE_TENSOR = 0,
  NRT_NC_ENGINE_VECTOR,
  NRT_NC_ENGINE_SCALAR,
  NRT_NC_ENGINE_GPSIMD,
  NRT_NC_ENGINE_DMA,
  NRT_NC_ENGINE_COUNT
} nrt_nc_engine;

/* Operand conventions (ap[0] is always the destination; an operand with
 * tensor == -1 is absent or, where noted, an immediate in imm[]):
 *   DMA_COPY        ap1 src; flags ACCUMULATE: dst = dst + src in fp32 (a DMA's
 *                   read-modify-write); flags INDIRECT_*: ap2 an index tile
 *                   (a gather or scatter of rows, NRT_NC_FLAG_INDIRECT_SRC)
 *   MATMUL          ap1 stationary [K,M], ap2 moving [K,N]; dst [M,N] in PSUM;
 *                   flags ACCUMULATE adds to dst, otherwise overwrites
 *   TRANSPOSE       ap1 src [P,F]; dst [F,P]
 *   ACTIVATION      ap1 data, ap2 bias [P,1], ap3 scale [P,1] (else imm0),
 *                   ap4 reduce_res [P,1] (sum of the results along the row);
 *                   func0 activation
 *   TENSOR_TENSOR   ap1 a, ap2 b; func0 alu op
 *   TENSOR_SCALAR   ap1 data, ap2 operand0 [P,1] (else imm0), ap3 operand1
 *                   (else imm1); func0 op0, func1 op1 (NRT_NC_ALU_NONE: none);
 *                   flags REVERSE0/1 swap the operands of op0/op1;
 *                   ap4 reduce_res [P,1] with func2 reduce op (optional)
 *   SCALAR_TENSOR_TENSOR  ap1 data, ap2 operand0 [P,1] (else imm0), ap3 b:
 *                   (data op0 operand0) op1 b
 *   TENSOR_REDUCE   ap1 data; func0 op; axes trailing free dims of ap1 are
 *                   reduced; flags NEGATE
 *   TENSOR_COPY     ap1 src (bit-exact when dtypes match)
 *   COPY_PREDICATED ap1 src, ap2 predicate: dst = src where predicate != 0
 *   MEMSET          imm0 value
 *   IOTA            ap1 pattern (tensor -1; its free dims give [stride,count]);
 *                   dst[c, i] = imm0 + c * imm1 + sum(stride * i), in int32
 *   AFFINE_SELECT   ap1 pattern as IOTA, ap2 on_true; dst = on_true where
 *                   func0(affine value, 0) holds, else imm2 */
typedef enum nrt_nc_opcode {
  NRT_NC_DMA_COPY = 0,
  NRT_NC_MATMUL,
  NRT_NC_TRANSPOSE,
  NRT_NC_ACTIVATION,
  NRT_NC_TENSOR_TENSOR,
  NRT_NC_TENSOR_SCALAR,
  NRT_NC_SCALAR_TENSOR_TENSOR,
  NRT_NC_TENSOR_REDUCE,
  NRT_NC_TENSOR_COPY,
  NRT_NC_COPY_PREDICATED,
  NRT_NC_MEMSET,
  NRT_NC_IOTA,
  NRT_NC_AFFINE_SELECT,
  /* Vector-engine scans, statistics and top-8 (runtime/src/nc/exec_vector.c). */
  NRT_NC_TENSOR_TENSOR_SCAN, /* dst[j] = op1(op0(data0[j], dst[j-1]), data1[j]); ap[3] initial */
  NRT_NC_BN_STATS,           /* dst[P, 6] = (count, mean, var*count) of even and odd elements */
  NRT_NC_BN_AGGR,            /* dst[P, 2] = (mean, var) of bn_stats tuples */
  NRT_NC_MAX8,               /* dst[P, 8] = the 8 largest values, descending */
  NRT_NC_FIND_INDEX8,        /* dst[P, 8] = index of the first occurrence of ap[2]'s values */
  NRT_NC_MATCH_REPLACE8,     /* dst = data with those occurrences replaced by imm[0]; ap[3] indices */
  NRT_NC_PARTITION_REDUCE,   /* dst[1, F] = func[0]-reduction of data[P, F] across partitions (GpSimd) */
  /* Selects, cumulative ops and activate2 (runtime/src/nc/exec_select.c). The
   * flags REDUCE_* pick what happens to the engine's per-partition reduce
   * registers (nki.isa.reduce_cmd); reduce_res, when present, receives them. */
  NRT_NC_ACTIVATE2,          /* ap1 data, ap2 imm0 [P,1] (else imm0), ap3 imm1 (else imm1), ap4
                              * reduce_res: func[0](((data op0 imm0) op1 imm1)) with op0 = func[1],
                              * op1 = func[2]; imm2 prelu slope (flag RELU_TILE: ap5 is a [P,1]
                              * slope tile); axes: the reduce ALU op */
  NRT_NC_SCALAR_CUMULATIVE,  /* ap1 src, ap2 imm0 [P,1] (else imm0): reg = func[1](func[0](src[j],
                              * imm0), reg); dst[j] = reg; imm1 the load_reduce value */
  NRT_NC_SELECT_REDUCE,      /* ap1 predicate, ap2 on_true, ap3 on_false [P,1] (else imm0), ap4
                              * reduce_res (max); REVERSE0 inverts the predicate */
  NRT_NC_RANGE_SELECT,       /* ap1 on_true, ap2 bound0 [P,1], ap3 bound1 [P,1], ap4 reduce_res:
                              * on_true where func[0](j + imm0, bound0) and func[1](j + imm0,
                              * bound1), else imm1; reduce func[2] */
  NRT_NC_NONZERO_WITH_COUNT, /* GpSimd, partitions 0, 16, ..., 112 of ap1 src [P, T]: dst[P, T+1] =
                              * indices of nonzeros + imm0, then imm1 padding, then the count */
  NRT_NC_DMA_TRANSPOSE,      /* DMA, same dtype: src [P, M..., L] (imm0 = L, the last logical
                              * dim; 0: the whole free size) to dst [L, M..., P]; 2-D: dst[F, P]
                              * = src[P, F]; 3-D axes (2, 1, 0); 4-D axes (3, 1, 2, 0) */
  /* Random numbers (runtime/src/nc/exec_rng.c). Each engine lane has XORWOW
   * generators (GpSimd 1, Vector 4 streams), kept across instructions. */
  NRT_NC_RNG,                /* dst = 32 random bits per element (low bits if narrower) */
  NRT_NC_RAND2,              /* dst = uniform in [ap1 or imm0, ap2 or imm1) */
  NRT_NC_DROPOUT,            /* ap1 data, ap2 prob [P,1] (else imm0): 0 where u < prob */
  NRT_NC_RNG_SEED,           /* ap0 seed [1,1] (read): seeds every lane of the engine */
  NRT_NC_RNG_SET_STATE,      /* ap0 states [P, 6 * streams] uint32 (read) */
  NRT_NC_RNG_GET_STATE,      /* dst [P, 6 * streams] uint32 = the lanes' states */
  /* Top-k, gathers, shuffles, segment bounds, exponential
   * (runtime/src/nc/exec_gather.c). */
  NRT_NC_TOPK,               /* GpSimd: per 16-partition group, the k = free(ap0) largest of the
                              * first imm0 elements of ap1 (bf16, snake order: element i at
                              * partition i % 16, column i / 16); ap0 values, ap2 uint32 indices,
                              * result j at partition j % 16, column j / 16; ascending, or
                              * descending with REVERSE0 */
  NRT_NC_EXPONENTIAL,        /* Vector: dst = exp(ap1 - (ap2 [P,1] or imm0)); ap4 reduce_res (sum),
                              * reduce flags with imm1 the load_reduce value */
  NRT_NC_LOCAL_GATHER,       /* GpSimd: per 16-partition group, indices ap2 (uint16) flattened
                              * partition-first, the first imm1 of them; dst[p, v*E + e] =
                              * ap1[p, index[v] + e], E = imm0 */
  NRT_NC_N_GATHER,           /* GpSimd: dst[p, j] = ap1[p, ap2[p, j]] (flattened free dims) */
  NRT_NC_SEQUENCE_BOUNDS,    /* GpSimd: dst[1, 2, n] = (start, end) of each element's segment of
                              * ap1[1, n]; id 0 is padding: (n, -1) */
  NRT_NC_STREAM_SHUFFLE,     /* Vector: per 32-partition quadrant, dst partition i = src partition
                              * mask[i] (6 bits each, 8 per imm[q], 63: unchanged) */
  /* MX block-scaled formats (runtime/src/nc/exec_mx.c), NeuronCore-v4. A
   * block is 8 partitions x 4 values (one packed element) sharing one E8M0
   * scale byte (2^(b - 127), 255 NaN). Block (g, j) of a tile with P
   * partitions (g = partition / 8) has its scale at partition
   * (g / 4) * 32 + g % 4 of the scale pattern, column j: four scale rows at
   * the same offset in each 32-partition quadrant. */
  NRT_NC_QUANTIZE_MX,        /* Vector: ap1 src [P, 4F] fp16/bf16 -> ap0 dst [P, F] fp8 x4, ap2
                              * dst_scale uint8; scale 2^(floor(log2 amax) - emax + 1) */
  NRT_NC_MATMUL_MX,          /* Tensor: ap0 dst [M, N] fp32 PSUM = sum over partitions p and
                              * values i of st[p, m, i] * mv[p, n, i], each times its block's
                              * scale; ap1 stationary [K, M] x4, ap2 moving [K, N] x4, ap3
                              * stationary_scale, ap4 moving_scale; flags ACCUMULATE;
                              * imm0 tile start row, imm1 tile rows (row tiling) */
  /* nki.isa.NkiScalar arithmetic (runtime/src/nc/exec_mx.c): exact 32-bit
   * two's-complement integers, wrapping on overflow. */
  NRT_NC_SCALAR_INT,         /* Vector: ap0 dst [1,1] int32 = ap1 [1,1] int32 func[0] (ap2 [1,1]
                              * int32 or imm0); add / subtract / multiply wrap, comparisons give
                              * 0 or 1; REVERSE0 swaps the operands */
  NRT_NC_COLLECTIVE,         /* DMA, across the programs of a group run (nrt_nc_programs_run):
                              * consecutive ones with the same call number imm3 are one call,
                              * where every program of the group meets (see nrt_nc_collective) */
  /* Compiled loops (nl.fori_loop / nl.while_loop; runtime/src/nc/branch.c):
   * the engine sequencers' compare-and-branch on 32-bit words. */
  NRT_NC_BRANCH,             /* jump to instruction imm0 when word ap0 func[0] (a comparison)
                              * word ap1 (or imm1) holds; always when ap0 is absent. ap0 / ap1
                              * [1,1] int32 / uint32 (compared by value). imm2: the loop's trip
                              * count when known at trace time (the cost model's), else -1 */
  NRT_NC_OPCODE_COUNT
} nrt_nc_opcode;

typedef enum nrt_nc_alu {
  NRT_NC_ALU_NONE = 0, /* bypass: the first operand */
  NRT_NC_ALU_ADD,
  NRT_NC_ALU_SUBTRACT,
  NRT_NC_ALU_MULTIPLY,
  NRT_NC_ALU_DIVIDE,
  NRT_NC_ALU_MAXIMUM,
  NRT_NC_ALU_MINIMUM,
  NRT_NC_ALU_POWER,
  NRT_NC_ALU_ABS_MAX,
  NRT_NC_ALU_MOD, /* numpy.mod: the remainder takes the divisor's sign */
  NRT_NC_ALU_EQUAL,
  NRT_NC_ALU_NOT_EQUAL,
  NRT_NC_ALU_GREATER,
  NRT_NC_ALU_GREATER_EQUAL,
  NRT_NC_ALU_LESS,
  NRT_NC_ALU_LESS_EQUAL,
  NRT_NC_ALU_LOGICAL_AND,
  NRT_NC_ALU_LOGICAL_OR,
  NRT_NC_ALU_LOGICAL_XOR,
  /* Bitwise ops work on raw bits in int32 (see nrt_nc_alu_is_bitwise). */
  NRT_NC_ALU_BITWISE_AND,
  NRT_NC_ALU_BITWISE_OR,
  NRT_NC_ALU_BITWISE_XOR,
  NRT_NC_ALU_LEFT_SHIFT,
  NRT_NC_ALU_RIGHT_SHIFT,
  /* After the bitwise ops, which keep their codes. */
  NRT_NC_ALU_ABS_MIN, /* min(|a|, |b|) */
  NRT_NC_ALU_FMOD, /* C's fmod: the remainder takes the dividend's sign */
  NRT_NC_ALU_COUNT
} nrt_nc_alu;

typedef enum nrt_nc_act {
  NRT_NC_ACT_COPY = 0,
  NRT_NC_ACT_EXP,
  NRT_NC_ACT_LOG,
  NRT_NC_ACT_TANH,
  NRT_NC_ACT_SIGMOID,
  NRT_NC_ACT_RELU,
  NRT_NC_ACT_GELU,
  NRT_NC_ACT_GELU_APPRX_TANH,
  NRT_NC_ACT_SILU,
  NRT_NC_ACT_SOFTPLUS,
  NRT_NC_ACT_SQRT,
  NRT_NC_ACT_RSQRT,
  NRT_NC_ACT_RECIPROCAL,
  NRT_NC_ACT_SQUARE,
  NRT_NC_ACT_ABS,
  NRT_NC_ACT_SIGN,
  NRT_NC_ACT_SIN,
  NRT_NC_ACT_COS,
  NRT_NC_ACT_ARCTAN,
  NRT_NC_ACT_ERF,
  NRT_NC_ACT_NEGATIVE,
  NRT_NC_ACT_TAN,
  NRT_NC_ACT_CEIL,
  NRT_NC_ACT_FLOOR,
  NRT_NC_ACT_TRUNC,
  NRT_NC_ACT_GELU_APPRX_SIGMOID, /* x * sigmoid(1.702 x) */
  /* Derivatives d/dx of the activations named (for backward passes). */
  NRT_NC_ACT_GELU_DX,
  NRT_NC_ACT_GELU_APPRX_SIGMOID_DX,
  NRT_NC_ACT_SILU_DX,
  NRT_NC_ACT_ERF_DX,
  NRT_NC_ACT_PRELU, /* x >= 0 ? x : slope * x (slope: activate2's relu_param) */
  NRT_NC_ACT_COUNT
} nrt_nc_act;

#define NRT_NC_FLAG_ACCUMULATE 1u
#define NRT_NC_FLAG_REVERSE0 2u
#define NRT_NC_FLAG_REVERSE1 4u
#define NRT_NC_FLAG_NEGATE 8u
/* nki.isa.reduce_cmd for the engines' reduce registers: RESET sets them to
 * the reduce op's identity (LOAD: to imm[1]) before the instruction, REDUCE
 * folds this instruction's results into them. Neither: reduce_res gets the
 * reduction of this instruction's results alone and the registers stay. */
#define NRT_NC_FLAG_REDUCE_RESET 16u
#define NRT_NC_FLAG_REDUCE_LOAD 32u
#define NRT_NC_FLAG_REDUCE_FOLD 64u
/* nc_matmul perf_mode=double_row (NeuronCore-v3 on): fp8 operands
 * stationary [K, 2, M] and moving [K, 2, N] (free elements 2M and 2N, the
 * most major free dim of size 2); the contraction runs over the K
 * partitions and that dim, 2K terms, partition-major (term 2p + j). */
#define NRT_NC_FLAG_DOUBLE_ROW 128u
/* activate2: ap5 is relu_param, a [P, 1] tile of per-partition prelu slopes
 * (read) instead of the immediate imm2. */
#define NRT_NC_FLAG_RELU_TILE 256u
/* dma_copy's indirect forms (software DGE): ap2 is an index tile [P, 1]
 * (int32 / uint32, in SBUF) and the HBM side's ap is its row 0 ([1, F]):
 * row p of the transfer is row index[p] of the imm0 rows, imm1 elements
 * apart. INDIRECT_SRC gathers rows into an SBUF dst, INDIRECT_DST scatters
 * an SBUF src into rows (with ACCUMULATE: adds, duplicates included). An
 * index past the rows fails the run (OOB_SKIP: skips that row); with
 * UNIQUE_INDICES a read-modify-write scatter whose indices repeat fails the
 * run (the kernel promised unique indices). */
#define NRT_NC_FLAG_INDIRECT_SRC 512u
#define NRT_NC_FLAG_INDIRECT_DST 1024u
#define NRT_NC_FLAG_OOB_SKIP 2048u
#define NRT_NC_FLAG_UNIQUE_INDICES 4096u
#define NRT_NC_FLAG_INDIRECT (NRT_NC_FLAG_INDIRECT_SRC | NRT_NC_FLAG_INDIRECT_DST)
/* With INDIRECT_*, the indexed side's ap may instead be [P, F] with a
 * partition step: partition p then starts at offset + p * partition_step +
 * index[p] * imm1 (an index on a dim other than the first). SCALAR_OFFSET:
 * ap2 is one int32 / uint32 word (an access pattern's scalar_offset) that
 * moves the whole indexed side (any buffer, any partitions) by word * imm1
 * elements, the word lying in [0, imm0); the copy is otherwise a plain
 * dma_copy. HWDGE: the descriptors come from the hardware DGE block, not
 * the GpSimd engine (costed without GpSimd time). */
#define NRT_NC_FLAG_SCALAR_OFFSET 8192u
#define NRT_NC_FLAG_HWDGE 16384u

#define NRT_NC_MAX_FREE_DIMS 4
#define NRT_NC_MAX_APS 6

typedef struct nrt_nc_ap {
  int32_t tensor; /* index into the program's tensor table, -1: none */
  int32_t dtype;  /* nrt_nc_dtype */
  int32_t partition_start;
  int32_t partitions;
  int64_t partition_step;
  int64_t offset;
  int32_t num_free;
  int32_t reserved;
  int64_t stride[NRT_NC_MAX_FREE_DIMS];
  int64_t count[NRT_NC_MAX_FREE_DIMS];
} nrt_nc_ap;

typedef struct nrt_nc_inst {
  int32_t opcode; /* nrt_nc_opcode */
  int32_t engine; /* nrt_nc_engine that executes it */
  int32_t func[3];
  uint32_t flags;
  int32_t axes;
  /* NRT_NC_COLLECTIVE, for the cost model only: how many of the
   * instruction's contributions (members of a reduction, the peer of a
   * copy; 2 for a pair reduction) come from ranks in other processes
   * (nki.distributed), plus NRT_NC_REMOTE_EFA when those cross instances
   * (EFA) rather than chips (NeuronLink). 0 otherwise. */
  int32_t remote;
  nrt_nc_ap ap[NRT_NC_MAX_APS];
  double imm[4];
} nrt_nc_inst;

#define NRT_NC_REMOTE_EFA 0x10000
#define NRT_NC_REMOTE_COUNT(remote) ((remote) & 0xffff)

/* A tensor of the program. On chip: shape [partitions, bytes per partition];
 * placed automatically unless fixed, in which case partition_base and
 * byte_offset give the address. HBM: bytes is the size the bound memory must
 * have; partitions and placement are unused. */
typedef struct nrt_nc_tensor {
  int32_t buffer; /* nrt_nc_buffer */
  int32_t partitions;
  int64_t bytes;
  int32_t fixed;
  int32_t partition_base;
  int64_t byte_offset;
} nrt_nc_tensor;

/* The on-chip geometry a program is checked and run against. */
typedef struct nrt_nc_geometry {
  int32_t partitions;
  int64_t sbuf_partition_bytes;
  int64_t psum_partition_bytes;
  int32_t psum_banks;
} nrt_nc_geometry;

/* Where creation found a rule violation: the instruction (or -1) and the
 * tensor (or -1) it concerns, and the rule's short name, e.g.
 * "gemm_moving_fmax". The message is in nrt_last_error(). */
typedef struct nrt_nc_diagnostic {
  int32_t inst;
  int32_t tensor;
  char rule[40];
} nrt_nc_diagnostic;

typedef struct nrt_nc_program *nrt_nc_program_t;

/* Geometry of a device (SBUF/PSUM of its generation). */
nrt_status nrt_nc_geometry_of_device(int32_t device, nrt_nc_geometry *out);

/* Checks the program against geometry, places its on-chip tensors and runs
 * the cost model for the device's generation (props). The arrays are
 * copied. On a rule violation returns NRT_ERROR_INVALID_ARGUMENT with diag
 * filled; capacity overflow is NRT_ERROR_OUT_OF_MEMORY (rule
 * "sbuf_capacity" / "psum_capacity"). */
nrt_status nrt_nc_program_create(const nrt_nc_inst *insts, int32_t num_insts,
                                 const nrt_nc_tensor *tensors, int32_t num_tensors,
                                 const nrt_nc_geometry *geometry,
                                 const nrt_device_properties *props,
                                 nrt_nc_program_t *out, nrt_nc_diagnostic *diag);
/* Drops the caller's reference; queued launches keep their own. */
nrt_status nrt_nc_program_destroy(nrt_nc_program_t program);

/* Placement chosen for tensor i (on-chip tensors only). */
nrt_status nrt_nc_program_placement(nrt_nc_program_t program, int32_t tensor,
                                    int32_t *partition_base, int64_t *byte_offset);

/* Runs the program now on the calling thread. hbm[i] is the host address of
 * tensor i for HBM tensors (ignored for on-chip ones); each must hold the
 * tensor's bytes. */
nrt_status nrt_nc_program_run(nrt_nc_program_t program, void *const *hbm);

/* A collective instruction (NRT_NC_COLLECTIVE). Every program of a group
 * run stops at its next call (its consecutive collective instructions of one
 * call number imm[3]); when all have arrived, with the same call number and
 * kind func[2], every instruction's source ap1 (if any) is read ("staged",
 * slot = its index in the call) and then every destination ap0 (if any) is
 * written: action func[0] COPY takes the staged slot imm[2] of program imm[1]
 * (same dtype and element count); REDUCE folds, with ALU op func[1] in fp32,
 * slot imm[2] of every program in the bit mask imm[0], lowest first;
 * PAIR_REDUCE writes op func[1] of slots imm[2] and imm[2] + 1 of program
 * imm[1]; NONE writes nothing (a barrier, or a source only). The _V actions
 * move a run-time count of elements of flat buffers from program imm[1],
 * whose data is slot imm[2] and whose uint32 metadata [rows, programs] is
 * slot imm[2] + 1 (row 0 send counts, 1 send displacements, 2 receive
 * counts, 3 receive displacements, by rank): GATHER_V lands the sender's one
 * chunk (column 0) at position func[1] * (dst elements / imm[0]); ALLTOALL_V
 * the chunk for this program after the earlier ALLTOALL_V instructions'
 * chunks of the call. flags: NRT_NC_COLLECTIVE_RDISPLS (land at this
 * program's row 3 instead), NRT_NC_COLLECTIVE_RCOUNTS (check row 2). */
typedef enum nrt_nc_collective_action {
  NRT_NC_COLLECTIVE_NONE = 0,
  NRT_NC_COLLECTIVE_COPY,
  NRT_NC_COLLECTIVE_REDUCE,
  NRT_NC_COLLECTIVE_PAIR_REDUCE,
  NRT_NC_COLLECTIVE_GATHER_V,
  NRT_NC_COLLECTIVE_ALLTOALL_V
} nrt_nc_collective_action;
#define NRT_NC_COLLECTIVE_RDISPLS 1u
#define NRT_NC_COLLECTIVE_RCOUNTS 2u

/* Runs the programs of one launch grid on the calling thread, interleaved:
 * each runs up to its next collective call, in program order, then the call
 * runs across all of them. hbm[k] binds program k's HBM tensors. Programs
 * that disagree on their calls (count, order or kind) fail with
 * NRT_ERROR_INVALID_ARGUMENT before the mismatched call writes anything. */
nrt_status nrt_nc_programs_run(const nrt_nc_program_t *programs, int32_t count,
                               void *const *const *hbm);

/* As nrt_nc_programs_run, queued on stream like nrt_nc_program_launch. */
nrt_status nrt_nc_programs_launch(nrt_stream_t stream, const nrt_nc_program_t *programs,
                                  int32_t count, void *const *const *hbm, const char *name);

/* Queues the program on stream with hbm[i] device addresses of the stream's
 * device (checked to lie in its memory with the tensor's size). Like a
 * kernel, it is skipped after an earlier error on the stream, and an error
 * while it runs becomes the stream's sticky error, reported by the next
 * synchronisation as "<name>: <message>" (name may be NULL). */
nrt_status nrt_nc_program_launch(nrt_stream_t stream, nrt_nc_program_t program,
                                 void *const *hbm, const char *name);

/* Testing: the next count program runs (nrt_nc_program_run or launched)
 * fail with NRT_ERROR_OUT_OF_MEMORY as if host memory had run out, so the
 * error paths of asynchronous launches can be exercised. */
void nrt_nc_inject_run_failures(int32_t count);

/* The cost model's estimate, in nanoseconds of device time. */
typedef struct nrt_nc_estimate {
  double total_ns;
  double busy_ns[NRT_NC_ENGINE_COUNT];
  int64_t instructions[NRT_NC_ENGINE_COUNT];
  int64_t dma_bytes;  /* moved by the core's DMA (collectives: from this process's ranks) */
  int64_t link_bytes; /* collectives: received from ranks in other processes */
  double link_ns;     /* the link's busy time for them (NeuronLink or EFA) */
} nrt_nc_estimate;

/* The queue number (nrt_nc_program_estimate's queue array) of collective
 * instructions that receive from other processes: the link's lane. */
#define NRT_NC_LINK_QUEUE (NRT_NC_ENGINE_DMA + 16)

/* Totals; and, when the arrays are not NULL, every instruction's start and
 * end time and the engine queue that ran it (DMA queues are numbered from
 * NRT_NC_ENGINE_DMA upward). */
nrt_status nrt_nc_program_estimate(nrt_nc_program_t program, nrt_nc_estimate *out,
                                   double *start_ns, double *end_ns, int32_t *queue);

int32_t nrt_nc_program_num_insts(nrt_nc_program_t program);
size_t nrt_nc_dtype_size(int32_t dtype);

#ifdef __cplusplus
}
#endif
#endif
