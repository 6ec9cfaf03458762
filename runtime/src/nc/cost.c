/* The cost model: estimated device time of an NKI program.
 *
 * Each instruction gets engine cycles from published per-instruction costs
 * (NKI.md "Estimated timing"; N = elements per partition, MIN_II = 64):
 *   matmul        max(min(64, N_stationary), N_moving), 4x for fp32 inputs
 *   transpose     as a matmul with the data as moving (Tensor engine)
 *   activation, tensor_scalar, tensor_copy, memset   max(64, N)
 *   tensor_tensor about 2N (N when one input is in PSUM)
 *   tensor_reduce N of the input
 *   iota, affine_select   150 + N (GpSimd)
 *   activate2, tensor_scalar_cumulative, range_select, nonzero_with_count
 *                 max(64, N) as activation / tensor_scalar (assumed: no
 *                 published formula); select_reduce as tensor_tensor;
 *                 dma_transpose as a DMA of its bytes (assumed)
 *   indirect dma_copy   a DMA of its rows, each its own descriptor (so the
 *                 2 KiB-per-row rule below applies per row), after the GpSimd
 *                 engine generates the descriptors (software DGE, SWDGE_*)
 *   rng, rand2, dropout, the generator state   max(64, N) (assumed)
 *   topk          4 n + k GpSimd cycles (ISA reference, nki.isa.topk)
 *   local_gather  150 + V E / C, C = ((28 + 4 E) / (4 E)) / min(4 / dtype size, E)
 *                 (ISA reference; V indices of E elements)
 *   nc_n_gather   150 per 512-element group + N (assumed, as iota: one group of
 *                 the underlying instruction per 512 elements, per the reference)
 *   sequence_bounds   150 + 2 N (assumed: a forward and a backward sweep)
 *   exponential, nc_stream_shuffle   max(64, N) as activation / tensor_copy (assumed)
 *   quantize_mx   max(64, N of src) as tensor_copy (assumed)
 *   nc_matmul_mx  max(min(64, N_stationary), N_moving) as a bf16 matmul (assumed)
 *   NkiScalar arithmetic   64 (MIN_II, assumed)
 * at the engine's clock, and DMA bytes / per-core DMA bandwidth plus a fixed
 * 1.3 us latency. A DMA moving under 2 KiB per partition is overhead-bound
 * (NKI DMA bandwidth guide: each packet pays a setup cost, payloads of at
 * least 2 KiB per partition are needed): it occupies the bandwidth as long
 * as a 2 KiB-per-partition transfer would. Engines run in parallel, in program order each, ordered
 * across engines only by data: a read waits for the last write of its
 * tensor, a write for the last access, and a tile whose memory reuses an
 * earlier tile's waits for that tile's last access. DMAs spread over 16
 * queues that share the bandwidth. These are estimates, not measurements.
 *
 * Collectives (assumed; no published per-call cost): a call is a barrier,
 * so its instructions start after everything before them and everything
 * after waits for the call; each costs a DMA of the bytes it receives (a
 * reduction receives every member's contribution) plus the DMA fixed
 * latency, plus COLLECTIVE_SYNC_NS of semaphore handshake for the call's
 * first instruction. Every core of the group is assumed to arrive at once
 * (each program's estimate is its own core's).
 *
 * Across processes (nki.distributed; inst->remote): the contributions that
 * come from other processes' ranks travel over the device's share of the
 * target's NeuronLink (props->link_bytes_per_s: trn1 384, trn2 1280, trn3
 * 2560 GB/s per chip, published) or of the instance's EFA
 * (props->efa_bytes_per_s), one transfer at a time on the link, each plus a
 * step latency (LINK_STEP_NS / EFA_STEP_NS, the assumptions the profiler's
 * roofline uses for the process-group backend), in parallel with the
 * on-chip part; the call's handshake is a step on the link instead of the
 * on-chip semaphore.
 */
#include <stdlib.h>
#include "nc/nc_internal.h"

#define DMA_QUEUES 16
#define DMA_FIXED_NS 1300.0
#define MIN_II 64.0
/* Payload per partition below which a DMA is overhead-bound (DMA bandwidth guide). */
#define DMA_MIN_EFFICIENT_ROW_BYTES 2048.0
/* One cross-core semaphore round trip (assumed: about a DMA's fixed latency). */
#define COLLECTIVE_SYNC_NS 1300.0
/* One step (a transfer's synchronisation and setup) between processes:
 * assumed, as runtime/src/roofline_collective.c (not published). */
#define LINK_STEP_NS 2000.0
#define EFA_STEP_NS 10000.0
/* Software DGE (an indirect dma_copy): the GpSimd engine writes the
 * descriptors, one per row, while the instruction runs (ISA reference,
 * nki.isa.dma_copy). Reading the indices from SBUF costs about 140 cycles
 * (ISA reference, tensor_copy_dynamic_src's dynamic-index overhead); one
 * cycle per descriptor is assumed (no published figure). */
#define SWDGE_INDEX_READ_CYCLES 140.0
#define SWDGE_DESCRIPTOR_CYCLES 1.0

/* Iterations of one loop entry that the estimate walks; later ones repeat
 * the last walked iteration's time and work (a steady state), so a long
 * compiled loop costs no more to estimate than a short one. */
#define LOOP_WALKED_TRIPS 64

static double max2(double a, double b) { return a > b ? a : b; }

/* A loop head's clocks at its previous visit. */
typedef struct loop_mark {
  double total, busy[NRT_NC_ENGINE_COUNT];
  int64_t instructions[NRT_NC_ENGINE_COUNT], dma_bytes;
} loop_mark;

static loop_mark mark_of(const nrt_nc_estimate *e) {
  loop_mark m = {.total = e->total_ns, .dma_bytes = e->dma_bytes};
  for (int k = 0; k < NRT_NC_ENGINE_COUNT; k++) {
    m.busy[k] = e->busy_ns[k];
    m.instructions[k] = e->instructions[k];
  }
  return m;
}

/* The estimate's clocks, which a skipped run of iterations moves forward. */
typedef struct clocks {
  double engine_free[NRT_NC_ENGINE_COUNT], queue_free[DMA_QUEUES], bandwidth_free, link_free, fence;
  double *last_write, *last_access;
} clocks;

/* Adds `count` more iterations like the one since mark m: every clock moves
 * by their time, every total by their work. */
static void later(double *clock, double since, double shift) {
  if (*clock > since) *clock += shift; /* set during the last iteration */
}

static void repeat_iterations(clocks *c, int32_t nt, nrt_nc_estimate *e, const loop_mark *m,
                              int64_t count) {
  double shift = (e->total_ns - m->total) * (double)count, since = m->total;
  for (int k = 0; k < NRT_NC_ENGINE_COUNT; k++) {
    later(&c->engine_free[k], since, shift);
    e->busy_ns[k] += (e->busy_ns[k] - m->busy[k]) * (double)count;
    e->instructions[k] += (e->instructions[k] - m->instructions[k]) * count;
  }
  for (int q = 0; q < DMA_QUEUES; q++) later(&c->queue_free[q], since, shift);
  later(&c->bandwidth_free, since, shift);
  later(&c->link_free, since, shift);
  later(&c->fence, since, shift);
  for (int32_t t = 0; t < nt; t++) {
    later(&c->last_write[t], since, shift);
    later(&c->last_access[t], since, shift);
  }
  e->dma_bytes += (e->dma_bytes - m->dma_bytes) * count;
  e->total_ns += shift;
}

static int64_t max_free(const nrt_nc_inst *inst) {
  int64_t n = 1;
  for (int k = 0; k < NRT_NC_MAX_APS; k++)
    if (inst->ap[k].tensor >= 0 && nc_ap_free_elems(&inst->ap[k]) > n) n = nc_ap_free_elems(&inst->ap[k]);
  return n;
}

static double engine_cycles(const nrt_nc_program_t p, const nrt_nc_inst *inst) {
  double n = (double)nc_ap_free_elems(&inst->ap[0]);
  switch (inst->opcode) {
    case NRT_NC_MATMUL: {
      double m = (double)nc_ap_free_elems(&inst->ap[1]), mv = (double)nc_ap_free_elems(&inst->ap[2]);
      /* double_row: the 2K-term contraction takes the time of a K-term one
       * (Trainium2 architecture guide: "the same amount of time as the
       * regular BF16/FP16 LoadStationary/MultiplyMoving ... with a 128
       * contraction dimension"), so the cost is that of [K, M] x [K, N]. */
      if (inst->flags & NRT_NC_FLAG_DOUBLE_ROW) return max2(m / 2 < 64 ? m / 2 : 64, mv / 2);
      double c = max2(m < 64 ? m : 64, mv);
      int fp32 = inst->ap[1].dtype == NRT_NC_FLOAT32 || inst->ap[2].dtype == NRT_NC_FLOAT32;
      return fp32 ? 4 * c : c;
    }
    case NRT_NC_TRANSPOSE: {
      double f = (double)nc_ap_free_elems(&inst->ap[1]);
      double c = max2(MIN_II, inst->engine == NRT_NC_ENGINE_TENSOR ? f : n);
      return inst->ap[1].dtype == NRT_NC_FLOAT32 && inst->engine == NRT_NC_ENGINE_TENSOR ? 4 * c : c;
    }
    /* select_reduce streams two tiles (predicate, on_true) like tensor_tensor. */
    case NRT_NC_TENSOR_TENSOR: case NRT_NC_SCALAR_TENSOR_TENSOR: case NRT_NC_COPY_PREDICATED:
    case NRT_NC_SELECT_REDUCE: {
      int in_psum = 0;
      for (int k = 1; k < NRT_NC_MAX_APS; k++)
        if (inst->ap[k].tensor >= 0 && p->tensors[inst->ap[k].tensor].buffer == NRT_NC_PSUM) in_psum = 1;
      return max2(MIN_II, in_psum ? n : 2 * n);
    }
    case NRT_NC_TENSOR_REDUCE: return max2(MIN_II, (double)nc_ap_free_elems(&inst->ap[1]));
    case NRT_NC_IOTA: case NRT_NC_AFFINE_SELECT: return 150 + n;
    /* tensor_copy_dynamic_src / _dst: max(MIN_II_DYNAMIC, N), MIN_II_DYNAMIC
     * "roughly 600 engine cycles" (ISA reference). */
    case NRT_NC_TENSOR_COPY:
      return max2(inst->flags & NRT_NC_FLAG_SCALAR_OFFSET ? 600.0 : MIN_II, (double)max_free(inst));
    /* The scan is costed as tensor_tensor (two inputs per element). */
    case NRT_NC_TENSOR_TENSOR_SCAN: return max2(MIN_II, 2 * n);
    /* bn_aggr: max(MIN_II, 13 * N / 3) Vector cycles (ISA reference). */
    /* Across partitions (no published formula): every element once, spread
     * over GpSimd's 8 cores (Trainium architecture guide), one per cycle. */
    case NRT_NC_PARTITION_REDUCE:
      return max2(MIN_II, (double)inst->ap[1].partitions * (double)nc_ap_free_elems(&inst->ap[1]) / 8.0);
    case NRT_NC_BN_AGGR: return max2(MIN_II, 13.0 * (double)nc_ap_free_elems(&inst->ap[1]) / 3.0);
    case NRT_NC_TOPK: return 4.0 * inst->imm[0] + n;
    case NRT_NC_LOCAL_GATHER: {
      double e = inst->imm[0], v = inst->imm[1], size = (double)nrt_nc_dtype_size(inst->ap[1].dtype);
      double per = 4.0 / size < e ? 4.0 / size : e;
      return 150.0 + v * e / (((28.0 + 4.0 * e) / (4.0 * e)) / per);
    }
    case NRT_NC_N_GATHER: return 150.0 * (double)((nc_ap_free_elems(&inst->ap[0]) + 511) / 512) + n;
    case NRT_NC_SEQUENCE_BOUNDS: return 150.0 + n;
    /* nc_matmul_mx: as a bf16 nc_matmul of the same free sizes (assumed: each
     * PE row takes a packed element, 4 values, per cycle; the Trainium3
     * architecture page gives 2,517 MXFP8/MXFP4 vs 671 BF16 TFLOPS). */
    case NRT_NC_MATMUL_MX: {
      double m = (double)nc_ap_free_elems(&inst->ap[1]), mv = (double)nc_ap_free_elems(&inst->ap[2]);
      return max2(m < 64 ? m : 64, mv);
    }
    /* quantize_mx: one pass over src, max(64, N) like tensor_copy (assumed). */
    case NRT_NC_QUANTIZE_MX: return max2(MIN_II, (double)nc_ap_free_elems(&inst->ap[1]));
    default: return max2(MIN_II, (double)max_free(inst));
  }
}

static double engine_hz(const nrt_device_properties *props, int32_t engine) {
  switch (engine) {
    case NRT_NC_ENGINE_TENSOR: return (double)props->tensor_engine_hz;
    case NRT_NC_ENGINE_VECTOR: return (double)props->vector_engine_hz;
    case NRT_NC_ENGINE_SCALAR: return (double)props->scalar_engine_hz;
    default: return (double)props->gpsimd_engine_hz;
  }
}

static int64_t dma_bytes(const nrt_nc_inst *inst) {
  const nrt_nc_ap *dst = &inst->ap[0];
  if (inst->opcode == NRT_NC_COLLECTIVE) {
    if (dst->tensor < 0 || inst->func[0] == NRT_NC_COLLECTIVE_NONE) return 0;
    int64_t members = 1;
    if (inst->func[0] == NRT_NC_COLLECTIVE_REDUCE)
      members = __builtin_popcountll((unsigned long long)inst->imm[0]);
    if (inst->func[0] == NRT_NC_COLLECTIVE_PAIR_REDUCE) members = 2;
    int64_t bytes = (int64_t)dst->partitions * nc_ap_free_elems(dst) *
                    (int64_t)nrt_nc_dtype_size(dst->dtype);
    /* _v: counts are known only at run time; assume an even split. */
    if (inst->func[0] >= NRT_NC_COLLECTIVE_GATHER_V) return bytes / (int64_t)inst->imm[0];
    return members * (int64_t)dst->partitions * nc_ap_free_elems(dst) *
           (int64_t)nrt_nc_dtype_size(dst->dtype);
  }
  if (inst->opcode == NRT_NC_DMA_COPY && (inst->flags & NRT_NC_FLAG_INDIRECT_DST) &&
      !(inst->flags & NRT_NC_FLAG_SCALAR_OFFSET))
    dst = &inst->ap[1]; /* a scatter moves the whole SBUF tile (its dst is row 0) */
  return (int64_t)dst->partitions * nc_ap_free_elems(dst) * (int64_t)nrt_nc_dtype_size(dst->dtype);
}

/* GpSimd cycles of an indirect dma_copy's software descriptor generation:
 * reading the index tile (or scalar_offset word), then one descriptor per
 * row. A scalar_offset copy on hardware DGE leaves the GpSimd engine free. */
static double swdge_cycles(const nrt_nc_inst *inst) {
  int transposed = inst->opcode == NRT_NC_DMA_TRANSPOSE && (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET);
  if ((inst->opcode != NRT_NC_DMA_COPY && !transposed) || !(inst->flags & NRT_NC_FLAG_INDIRECT) ||
      (inst->flags & NRT_NC_FLAG_HWDGE))
    return 0;
  int32_t rows = transposed ? inst->ap[1].partitions /* a descriptor per src row */
                 : (inst->flags & NRT_NC_FLAG_SCALAR_OFFSET) ? inst->ap[0].partitions
                                                             : inst->ap[2].partitions;
  return SWDGE_INDEX_READ_CYCLES + SWDGE_DESCRIPTOR_CYCLES * (double)rows;
}

/* The part of a collective instruction's bytes that comes from other
 * processes' ranks. */
static int64_t remote_bytes(const nrt_nc_inst *inst, int64_t bytes) {
  int32_t remote = NRT_NC_REMOTE_COUNT(inst->remote);
  if (inst->opcode != NRT_NC_COLLECTIVE || remote <= 0 || bytes <= 0) return 0;
  int64_t members = 1;
  if (inst->func[0] == NRT_NC_COLLECTIVE_REDUCE)
    members = __builtin_popcountll((unsigned long long)inst->imm[0]);
  if (inst->func[0] == NRT_NC_COLLECTIVE_PAIR_REDUCE) members = 2;
  if (remote > members) remote = (int32_t)members;
  return bytes / (members ? members : 1) * remote;
}

/* Whether two on-chip tensors' placements share memory. */
static int overlaps(const nrt_nc_tensor *a, const nrt_nc_tensor *b) {
  return a->buffer == b->buffer && a->partition_base < b->partition_base + b->partitions &&
         b->partition_base < a->partition_base + a->partitions &&
         a->byte_offset < b->byte_offset + b->bytes && b->byte_offset < a->byte_offset + a->bytes;
}

nrt_status nc_estimate_program(nrt_nc_program_t p, const nrt_device_properties *props) {
  int32_t nt = p->num_tensors;
  int32_t ni = p->num_insts;
  /* link_free: the link to other processes, one transfer at a time; fence:
   * the end of the last collective call. */
  clocks c = {.last_write = calloc((size_t)(nt ? nt : 1), sizeof(double)),
              .last_access = calloc((size_t)(nt ? nt : 1), sizeof(double))};
  int32_t *started = calloc((size_t)(nt ? nt : 1), sizeof(int32_t));
  int64_t *visits = calloc((size_t)(ni ? ni : 1), sizeof(int64_t)); /* per loop head */
  loop_mark *marks = calloc((size_t)(ni ? ni : 1), sizeof(loop_mark));
  if (!c.last_write || !c.last_access || !started || !visits || !marks) {
    free(c.last_write);
    free(c.last_access);
    free(started);
    free(visits);
    free(marks);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory estimating an NKI program");
  }
  double *last_write = c.last_write, *last_access = c.last_access;
  double *engine_free = c.engine_free, *queue_free = c.queue_free;
  double dma_bytes_per_ns = (double)props->dma_bytes_per_s * 1e-9;
  double call_step = 0; /* the current call's handshake with other processes */
  nrt_nc_estimate *e = &p->estimate;
  *e = (nrt_nc_estimate){0};
  for (int32_t i = 0; i < ni; i++) {
    const nrt_nc_inst *inst = &p->insts[i];
    if (inst->opcode == NRT_NC_BRANCH) { /* the sequencers' branch: not charged */
      p->start_ns[i] = p->end_ns[i] = e->total_ns;
      p->queue[i] = inst->engine;
      int32_t target = (int32_t)inst->imm[0];
      if (inst->ap[0].tensor < 0) { /* back to the head */
        i = target - 1;
        continue;
      }
      int64_t trips = nc_branch_trips(inst), walked = visits[i]++;
      if (walked == LOOP_WALKED_TRIPS && trips > walked) {
        repeat_iterations(&c, nt, e, &marks[i], trips - walked);
        walked = trips;
      }
      if (walked < trips) {
        marks[i] = mark_of(e);
      } else { /* the loop is over; ready for its next entry */
        visits[i] = 0;
        i = target - 1;
      }
      continue;
    }
    double ready = c.fence;
    int collective = inst->opcode == NRT_NC_COLLECTIVE;
    int call_start = collective && (i == 0 || p->insts[i - 1].opcode != NRT_NC_COLLECTIVE ||
                                    p->insts[i - 1].imm[3] != inst->imm[3]);
    if (collective) ready = max2(ready, e->total_ns);
    for (int k = 0; k < NRT_NC_MAX_APS; k++) {
      int32_t t = inst->ap[k].tensor;
      if (t < 0) continue;
      int role = nc_operand_role(inst, k);
      int hbm = p->tensors[t].buffer == NRT_NC_HBM;
      if (role & 1) ready = max2(ready, last_write[t]);
      if ((role & 2) && !hbm) ready = max2(ready, last_access[t]);
      if (!hbm && !started[t]) { /* memory reused from tiles that died before */
        started[t] = 1;
        for (int32_t u = 0; u < nt; u++)
          if (u != t && started[u] && p->tensors[u].buffer != NRT_NC_HBM &&
              p->first_use[u] < i && overlaps(&p->tensors[t], &p->tensors[u]))
            ready = max2(ready, last_access[u]);
      }
    }
    double start, end;
    int32_t queue = inst->engine;
    if (inst->engine == NRT_NC_ENGINE_DMA) {
      int q = 0;
      for (int k = 1; k < DMA_QUEUES; k++)
        if (queue_free[k] < queue_free[q]) q = k;
      int64_t all_bytes = dma_bytes(inst), far = remote_bytes(inst, all_bytes);
      int64_t bytes = all_bytes - far;
      double transfer = (double)bytes / dma_bytes_per_ns;
      if (call_start) { /* the call's handshake: on the link if it leaves the process */
        call_step = 0;
        for (int32_t j = i; j < p->num_insts && p->insts[j].opcode == NRT_NC_COLLECTIVE &&
                            p->insts[j].imm[3] == inst->imm[3]; j++)
          if (NRT_NC_REMOTE_COUNT(p->insts[j].remote) > 0)
            call_step = (p->insts[j].remote & NRT_NC_REMOTE_EFA) ? EFA_STEP_NS : LINK_STEP_NS;
      }
      double dge = swdge_cycles(inst) / (double)props->gpsimd_engine_hz * 1e9;
      if (dge > 0) { /* the descriptors come first, from the GpSimd engine */
        double dge_start = max2(ready, engine_free[NRT_NC_ENGINE_GPSIMD]);
        ready = engine_free[NRT_NC_ENGINE_GPSIMD] = dge_start + dge;
        e->busy_ns[NRT_NC_ENGINE_GPSIMD] += dge;
      }
      /* Each row is a descriptor of its own: an indirect one's rows are the tile's. */
      const nrt_nc_ap *row_ap = (inst->flags & NRT_NC_FLAG_INDIRECT_DST) && !collective &&
                                        !(inst->flags & NRT_NC_FLAG_SCALAR_OFFSET)
                                    ? &inst->ap[1] : &inst->ap[0];
      int32_t rows = row_ap->partitions > 0 ? row_ap->partitions : 1;
      double row_bytes = (double)bytes / rows;
      if (!collective && bytes > 0 && row_bytes < DMA_MIN_EFFICIENT_ROW_BYTES)
        transfer *= DMA_MIN_EFFICIENT_ROW_BYTES / row_bytes;
      start = max2(ready, queue_free[q]);
      double xfer_start = max2(start, c.bandwidth_free);
      c.bandwidth_free = xfer_start + transfer;
      queue_free[q] = c.bandwidth_free;
      double sync = call_start ? (call_step > 0 ? call_step : COLLECTIVE_SYNC_NS) : 0;
      end = c.bandwidth_free + DMA_FIXED_NS + sync;
      e->busy_ns[NRT_NC_ENGINE_DMA] += transfer;
      e->dma_bytes += bytes;
      queue = NRT_NC_ENGINE_DMA + q;
      if (far > 0) {
        int efa = (inst->remote & NRT_NC_REMOTE_EFA) != 0;
        double rate = (double)(efa ? props->efa_bytes_per_s : props->link_bytes_per_s) * 1e-9;
        double over_link = rate > 0 ? (double)far / rate : 0;
        double link_start = max2(start, c.link_free);
        c.link_free = link_start + over_link;
        end = max2(end, c.link_free + (efa ? EFA_STEP_NS : LINK_STEP_NS) + sync);
        e->link_bytes += far;
        e->link_ns += over_link;
        queue = NRT_NC_LINK_QUEUE;
      }
    } else {
      double duration = engine_cycles(p, inst) / engine_hz(props, inst->engine) * 1e9;
      start = max2(ready, engine_free[inst->engine]);
      end = start + duration;
      engine_free[inst->engine] = end;
      e->busy_ns[inst->engine] += duration;
    }
    e->instructions[inst->engine]++;
    p->start_ns[i] = start;
    p->end_ns[i] = end;
    p->queue[i] = queue;
    e->total_ns = max2(e->total_ns, end);
    if (collective) c.fence = max2(c.fence, end);
    for (int k = 0; k < NRT_NC_MAX_APS; k++) {
      int32_t t = inst->ap[k].tensor;
      if (t < 0) continue;
      if (nc_operand_role(inst, k) & 2) last_write[t] = max2(last_write[t], end);
      last_access[t] = max2(last_access[t], end);
    }
  }
  free(last_write);
  free(last_access);
  free(started);
  free(visits);
  free(marks);
  return NRT_SUCCESS;
}
