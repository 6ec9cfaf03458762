/* NKI programs: creation (check, place, estimate), lifetime, running.
 *
 * A program is immutable once created and reference counted, so a launch
 * queued on a stream keeps it alive after Python drops its handle. Running
 * needs no checks: creation proved every access in bounds for tensors of
 * the declared sizes, and launch checks that the bound memory has them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profiling.h"
#include "nc/nc_internal.h"

size_t nrt_nc_dtype_size(int32_t dtype) {
  switch (dtype) {
    case NRT_NC_BOOL: case NRT_NC_UINT8: case NRT_NC_INT8:
    case NRT_NC_FLOAT8_E4M3: case NRT_NC_FLOAT8_E5M2: case NRT_NC_FLOAT8_E8M0FNU: return 1;
    case NRT_NC_UINT16: case NRT_NC_INT16: case NRT_NC_FLOAT16: case NRT_NC_BFLOAT16:
    case NRT_NC_FLOAT4_E2M1FN_X4: return 2;
    case NRT_NC_UINT32: case NRT_NC_INT32: case NRT_NC_TFLOAT32: case NRT_NC_FLOAT32:
    case NRT_NC_FLOAT8_E4M3FN_X4: case NRT_NC_FLOAT8_E5M2_X4: return 4;
    case NRT_NC_INT64: return 8;
    default: return 0;
  }
}

nrt_status nc_fail(nrt_nc_diagnostic *diag, int32_t inst, int32_t tensor, const char *rule,
                   nrt_status status, const char *fmt, ...) {
  char message[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  if (diag) {
    diag->inst = inst;
    diag->tensor = tensor;
    snprintf(diag->rule, sizeof diag->rule, "%s", rule);
  }
  return rt_fail(status, "[%s] %s", rule, message);
}

void nc_ap_free_extent(const nrt_nc_ap *ap, int64_t *lo, int64_t *hi) {
  int64_t a = ap->offset, b = ap->offset;
  for (int d = 0; d < NRT_NC_MAX_FREE_DIMS; d++) {
    int64_t span = ap->stride[d] * (ap->count[d] - 1);
    if (span < 0) a += span;
    else b += span;
  }
  *lo = a;
  *hi = b;
}

int64_t nc_ap_free_elems(const nrt_nc_ap *ap) {
  int64_t n = 1;
  for (int d = 0; d < NRT_NC_MAX_FREE_DIMS; d++) n *= ap->count[d];
  return n;
}

int nc_operand_role(const nrt_nc_inst *inst, int k) {
  if (inst->ap[k].tensor < 0) return 0;
  if (inst->opcode == NRT_NC_BRANCH) return 1; /* compares its words */
  if (k == 0 && (inst->opcode == NRT_NC_RNG_SEED || inst->opcode == NRT_NC_RNG_SET_STATE))
    return 1; /* the seed / state source */
  if (k == 0) {
    int reads_dst = ((inst->opcode == NRT_NC_MATMUL || inst->opcode == NRT_NC_DMA_COPY ||
                      inst->opcode == NRT_NC_MATMUL_MX) &&
                     (inst->flags & NRT_NC_FLAG_ACCUMULATE)) ||
                    inst->opcode == NRT_NC_COPY_PREDICATED ||
                    inst->opcode == NRT_NC_NONZERO_WITH_COUNT || /* keeps other partitions */
                    inst->opcode == NRT_NC_TOPK ||               /* keeps unwritten columns */
                    inst->opcode == NRT_NC_STREAM_SHUFFLE;       /* keeps mask-255 partitions */
    return reads_dst ? 3 : 2;
  }
  if (k == 4 && (inst->opcode == NRT_NC_ACTIVATION || inst->opcode == NRT_NC_TENSOR_SCALAR ||
                 inst->opcode == NRT_NC_ACTIVATE2 || inst->opcode == NRT_NC_SELECT_REDUCE ||
                 inst->opcode == NRT_NC_RANGE_SELECT))
    return 2; /* reduce_res */
  if (k == 3 && inst->opcode == NRT_NC_MATCH_REPLACE8) return 2; /* the indices */
  if (k == 2 && inst->opcode == NRT_NC_TOPK) return 3;            /* idx_dst, partly written */
  if (k == 4 && inst->opcode == NRT_NC_EXPONENTIAL) return 2;     /* reduce_res */
  if (k == 2 && inst->opcode == NRT_NC_QUANTIZE_MX) return 3;     /* dst_scale, some rows */
  return 1;
}

/* Pads free dims to exactly four with leading [0, 1] pairs, so the executor
 * walks one fixed loop nest. */
static nrt_status normalise_ap(nrt_nc_ap *ap, int32_t inst, nrt_nc_diagnostic *diag) {
  if (ap->num_free < 0 || ap->num_free > NRT_NC_MAX_FREE_DIMS)
    return nc_fail(diag, inst, ap->tensor, "max_free_dims", NRT_ERROR_INVALID_ARGUMENT,
                   "an access pattern has %d free dimensions; at most %d per partition",
                   ap->num_free, NRT_NC_MAX_FREE_DIMS);
  int shift = NRT_NC_MAX_FREE_DIMS - ap->num_free;
  for (int d = NRT_NC_MAX_FREE_DIMS - 1; d >= 0; d--) {
    ap->stride[d] = d >= shift ? ap->stride[d - shift] : 0;
    ap->count[d] = d >= shift ? ap->count[d - shift] : 1;
  }
  ap->num_free = NRT_NC_MAX_FREE_DIMS;
  return NRT_SUCCESS;
}

static void program_free(nrt_nc_program_t p) {
  if (!p) return;
  free(p->insts);
  free(p->tensors);
  free(p->first_use);
  free(p->needs_fill);
  free(p->fill_start);
  free(p->fill_list);
  free(p->start_ns);
  free(p->end_ns);
  free(p->queue);
  free(p);
}

nrt_status nrt_nc_geometry_of_device(int32_t device, nrt_nc_geometry *out) {
  nrt_device_properties props;
  nrt_status s = nrt_device_get_properties(device, &props);
  if (s) return s;
  if (!out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_geometry_of_device: out is NULL");
  out->partitions = (int32_t)props.sbuf_partitions;
  out->sbuf_partition_bytes = props.sbuf_partition_bytes;
  out->psum_partition_bytes = props.psum_partition_bytes;
  out->psum_banks = (int32_t)props.psum_banks;
  return NRT_SUCCESS;
}

nrt_status nrt_nc_program_create(const nrt_nc_inst *insts, int32_t num_insts,
                                 const nrt_nc_tensor *tensors, int32_t num_tensors,
                                 const nrt_nc_geometry *geometry,
                                 const nrt_device_properties *props,
                                 nrt_nc_program_t *out, nrt_nc_diagnostic *diag) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (diag) {
    diag->inst = -1;
    diag->tensor = -1;
    diag->rule[0] = 0;
  }
  if (!out || !geometry || !props || num_insts < 0 || num_tensors < 0 ||
      (num_insts && !insts) || (num_tensors && !tensors))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_create: invalid argument");
  if (geometry->partitions <= 0 || geometry->partitions > 128 || geometry->psum_banks <= 0 ||
      geometry->sbuf_partition_bytes <= 0 || geometry->psum_partition_bytes <= 0)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_create: invalid geometry");
  nrt_nc_program_t p = calloc(1, sizeof *p);
  size_t ni = (size_t)num_insts, nt = (size_t)num_tensors;
  if (p) {
    p->insts = malloc((ni ? ni : 1) * sizeof *insts);
    p->tensors = malloc((nt ? nt : 1) * sizeof *tensors);
    p->first_use = malloc((nt ? nt : 1) * sizeof *p->first_use);
    p->needs_fill = calloc(nt ? nt : 1, 1);
    p->fill_start = calloc(ni + 1, sizeof *p->fill_start);
    p->fill_list = malloc((nt ? nt : 1) * sizeof *p->fill_list);
    p->start_ns = malloc((ni ? ni : 1) * sizeof(double));
    p->end_ns = malloc((ni ? ni : 1) * sizeof(double));
    p->queue = malloc((ni ? ni : 1) * sizeof(int32_t));
  }
  if (!p || !p->insts || !p->tensors || !p->first_use || !p->needs_fill || !p->fill_start ||
      !p->fill_list || !p->start_ns || !p->end_ns || !p->queue) {
    program_free(p);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory creating an NKI program");
  }
  atomic_init(&p->refs, 1);
  p->num_insts = num_insts;
  p->num_tensors = num_tensors;
  p->geometry = *geometry;
  p->target = (int32_t)props->target;
  memcpy(p->insts, insts, ni * sizeof *insts);
  memcpy(p->tensors, tensors, nt * sizeof *tensors);
  for (int32_t i = 0; i < num_insts && !s; i++)
    for (int k = 0; k < NRT_NC_MAX_APS && !s; k++) s = normalise_ap(&p->insts[i].ap[k], i, diag);
  if (!s) s = nc_check_program(p, diag);
  if (!s) s = nc_place_tensors(p, diag);
  if (!s) s = nc_estimate_program(p, props);
  if (s) {
    program_free(p);
    return s;
  }
  *out = p;
  return NRT_SUCCESS;
}

static void program_release(nrt_nc_program_t p) {
  if (atomic_fetch_sub(&p->refs, 1) == 1) program_free(p);
}

nrt_status nrt_nc_program_destroy(nrt_nc_program_t program) {
  if (program) program_release(program);
  return NRT_SUCCESS;
}

int32_t nrt_nc_program_num_insts(nrt_nc_program_t program) { return program->num_insts; }

nrt_status nrt_nc_program_placement(nrt_nc_program_t p, int32_t tensor, int32_t *partition_base,
                                    int64_t *byte_offset) {
  if (!p || tensor < 0 || tensor >= p->num_tensors || p->tensors[tensor].buffer == NRT_NC_HBM)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_placement: not an on-chip tensor");
  *partition_base = p->tensors[tensor].partition_base;
  *byte_offset = p->tensors[tensor].byte_offset;
  return NRT_SUCCESS;
}

nrt_status nrt_nc_program_estimate(nrt_nc_program_t p, nrt_nc_estimate *out, double *start_ns,
                                   double *end_ns, int32_t *queue) {
  if (!p || !out) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_estimate: NULL argument");
  *out = p->estimate;
  size_t n = (size_t)p->num_insts;
  if (start_ns) memcpy(start_ns, p->start_ns, n * sizeof(double));
  if (end_ns) memcpy(end_ns, p->end_ns, n * sizeof(double));
  if (queue) memcpy(queue, p->queue, n * sizeof(int32_t));
  return NRT_SUCCESS;
}

nrt_status nrt_nc_program_run(nrt_nc_program_t p, void *const *hbm) {
  if (!p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_run: NULL program");
  for (int32_t t = 0; t < p->num_tensors; t++)
    if (p->tensors[t].buffer == NRT_NC_HBM && p->tensors[t].bytes > 0 && (!hbm || !hbm[t]))
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_run: HBM tensor %d is unbound", t);
  return nc_execute(p, hbm);
}

static nrt_status check_exchange(const nrt_nc_exchange *ex, const char *who) {
  if (ex && (!ex->fn || ex->processes < 1 || ex->processes > NRT_NC_MAX_PROCESSES ||
             ex->process < 0 || ex->process >= ex->processes))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: process %d of %d, exchange %s", who,
                   ex->process, ex->processes, ex->fn ? "set" : "NULL");
  return NRT_SUCCESS;
}

nrt_status nrt_nc_programs_run(const nrt_nc_program_t *programs, int32_t count,
                               void *const *const *hbm) {
  return nrt_nc_programs_run_dist(programs, count, hbm, NULL);
}

nrt_status nrt_nc_programs_run_dist(const nrt_nc_program_t *programs, int32_t count,
                                    void *const *const *hbm, const nrt_nc_exchange *ex) {
  nrt_status s = check_exchange(ex, "nrt_nc_programs_run");
  if (s) return s;
  if (!programs || !hbm || count < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_programs_run: no programs");
  for (int32_t k = 0; k < count; k++) {
    const nrt_nc_program_t p = programs[k];
    if (!p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_programs_run: NULL program");
    for (int32_t t = 0; t < p->num_tensors; t++)
      if (p->tensors[t].buffer == NRT_NC_HBM && p->tensors[t].bytes > 0 && (!hbm[k] || !hbm[k][t]))
        return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                       "nrt_nc_programs_run: HBM tensor %d of program %d is unbound", t, k);
  }
  return nc_execute_group_ex(programs, count, hbm, ex);
}

/* ---- asynchronous launch ----------------------------------------------- */

typedef struct group_task {
  int32_t count;
  int has_exchange;
  int ran;          /* the stream ran it (else the peers hear it will not) */
  char failure[256]; /* why it was not launched, if it was not */
  nrt_nc_exchange exchange;
  nrt_nc_program_t *programs;
  void ***hbm; /* per program, host aliases */
} group_task;

static nrt_status run_group_task(void *arg) {
  group_task *task = arg;
  task->ran = 1;
  if (__builtin_expect(rt_profile_current != NULL, 0))
    for (int32_t k = 0; k < task->count; k++) {
      nrt_roofline est;
      rt_profile_nki_estimate(&task->programs[k]->estimate, &est);
      rt_profile_add_estimate(&est);
    }
  return nc_execute_group_ex(task->programs, task->count, (void *const *const *)task->hbm,
                             task->has_exchange ? &task->exchange : NULL);
}

static void release_group_task(void *arg) {
  group_task *task = arg;
  if (task->has_exchange && !task->ran) {
    /* A run across processes that will not run here (its launch failed,
     * or the stream skips it after an earlier error): the peers, waiting
     * in its first round, hear so now. The thread's error is kept. */
    char kept[512];
    snprintf(kept, sizeof kept, "%s", nrt_last_error());
    nrt_nc_exchange_fail(&task->exchange, task->count,
                         task->failure[0] ? task->failure
                                          : "did not run the NKI kernel (its stream had failed "
                                            "before it, or its launch failed)");
    rt_set_error(kept);
  }
  if (task->has_exchange && task->exchange.release) task->exchange.release(task->exchange.ctx);
  for (int32_t k = 0; k < task->count; k++) {
    if (task->programs[k]) program_release(task->programs[k]);
    free(task->hbm[k]);
  }
  free(task->programs);
  free(task->hbm);
  free(task);
}

typedef struct launch_task {
  nrt_nc_program_t program;
  void *hbm[]; /* host aliases */
} launch_task;

/* Creation proved the program legal and launch bound memory of the right
 * sizes, so the only error left is running out of host memory. */
static nrt_status run_task(void *arg) {
  launch_task *task = arg;
  if (__builtin_expect(rt_profile_current != NULL, 0)) { /* profiled: the cost model's estimate */
    nrt_roofline est;
    rt_profile_nki_estimate(&task->program->estimate, &est);
    rt_profile_add_estimate(&est);
  }
  return nc_execute(task->program, task->hbm);
}

static nrt_status bind_device_hbm(nrt_stream_t stream, nrt_nc_program_t p, void *const *hbm,
                                  void **out);

static void release_task(void *arg) {
  launch_task *task = arg;
  program_release(task->program);
  free(task);
}

nrt_status nrt_nc_program_launch(nrt_stream_t stream, nrt_nc_program_t p, void *const *hbm,
                                 const char *name) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!stream || !p) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_program_launch: NULL argument");
  launch_task *task = calloc(1, sizeof *task + (size_t)p->num_tensors * sizeof(void *));
  if (!task) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory launching an NKI program");
  if ((s = bind_device_hbm(stream, p, hbm, task->hbm))) {
    free(task);
    return s;
  }
  task->program = p;
  atomic_fetch_add(&p->refs, 1);
  return rt_launch_host_task_kind(stream, NRT_PROFILE_NKI, name ? name : "NKI program", run_task,
                                  release_task, task);
}

nrt_status nrt_nc_programs_launch(nrt_stream_t stream, const nrt_nc_program_t *programs,
                                  int32_t count, void *const *const *hbm, const char *name) {
  return nrt_nc_programs_launch_dist(stream, programs, count, hbm, name, NULL);
}

/* A launch across processes that failed before its run could be queued:
 * its one FAILED round, queued on the stream like the run would have been
 * (the exchange's transport carries the stream's runs in order, so the
 * round must not overtake one of them). Run or skipped, it takes part. */
typedef struct fail_task {
  nrt_nc_exchange exchange;
  int32_t count;
  int done;
  char why[256];
} fail_task;

static nrt_status run_fail_task(void *arg) {
  fail_task *t = arg;
  t->done = 1;
  nrt_nc_exchange_fail(&t->exchange, t->count, t->why);
  return NRT_SUCCESS; /* the launch reported its own error */
}

static void release_fail_task(void *arg) {
  fail_task *t = arg;
  if (!t->done) {
    char kept[512];
    snprintf(kept, sizeof kept, "%s", nrt_last_error());
    nrt_nc_exchange_fail(&t->exchange, t->count, t->why);
    rt_set_error(kept);
  }
  if (t->exchange.release) t->exchange.release(t->exchange.ctx);
  free(t);
}

nrt_status nrt_nc_exchange_fail_launch(nrt_stream_t stream, const nrt_nc_exchange *exchange,
                                       int32_t count, const char *why) {
  if (!exchange || check_exchange(exchange, "nrt_nc_exchange_fail_launch") || count < 1) {
    if (exchange && exchange->release) exchange->release(exchange->ctx);
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_exchange_fail_launch: no exchange");
  }
  char kept[512];
  snprintf(kept, sizeof kept, "%s", nrt_last_error());
  fail_task *t = calloc(1, sizeof *t);
  nrt_status s = NRT_SUCCESS;
  if (!t || !stream) { /* last resort: at once, on this thread */
    s = nrt_nc_exchange_fail(exchange, count, why);
    if (exchange->release) exchange->release(exchange->ctx);
    free(t);
  } else {
    t->exchange = *exchange;
    t->count = count;
    snprintf(t->why, sizeof t->why, "%s", why ? why : "its launch failed");
    s = rt_launch_host_task_kind(stream, NRT_PROFILE_NKI, "NKI launch failure", run_fail_task,
                                 release_fail_task, t);
  }
  rt_set_error(kept);
  return s;
}

/* The task owns exchange's ctx from here on: released with the task, or
 * now if the launch fails. */
nrt_status nrt_nc_programs_launch_dist(nrt_stream_t stream, const nrt_nc_program_t *programs,
                                       int32_t count, void *const *const *hbm, const char *name,
                                       const nrt_nc_exchange *exchange) {
  nrt_status s = rt_ensure_init();
  if (!s) s = check_exchange(exchange, "nrt_nc_programs_launch");
  if (s) {
    if (exchange && exchange->release) exchange->release(exchange->ctx);
    return s;
  }
  if (!stream || !programs || !hbm || count < 1) {
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_programs_launch: NULL argument");
    if (exchange && count >= 1)
      nrt_nc_exchange_fail_launch(stream, exchange, count, "its launch failed");
    else if (exchange && exchange->release)
      exchange->release(exchange->ctx);
    return s;
  }
  group_task *task = calloc(1, sizeof *task);
  if (task) {
    task->programs = calloc((size_t)count, sizeof *task->programs);
    task->hbm = calloc((size_t)count, sizeof *task->hbm);
  }
  if (!task || !task->programs || !task->hbm) {
    if (task) {
      free(task->programs);
      free(task->hbm);
    }
    free(task);
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory launching NKI programs");
    if (exchange)
      nrt_nc_exchange_fail_launch(stream, exchange, count, "its launch failed: out of host memory");
    return s;
  }
  task->count = count;
  if (exchange) {
    task->has_exchange = 1;
    task->exchange = *exchange;
  }
  for (int32_t k = 0; k < count && !s; k++) {
    nrt_nc_program_t p = programs[k];
    if (!p) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_programs_launch: NULL program");
      break;
    }
    task->hbm[k] = calloc((size_t)(p->num_tensors ? p->num_tensors : 1), sizeof(void *));
    if (!task->hbm[k]) {
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory launching NKI programs");
      break;
    }
    if ((s = bind_device_hbm(stream, p, hbm[k], task->hbm[k]))) break;
    task->programs[k] = p;
    atomic_fetch_add(&p->refs, 1);
  }
  if (s) {
    snprintf(task->failure, sizeof task->failure, "its launch failed: %s", nrt_last_error());
    release_group_task(task);
    return s;
  }
  return rt_launch_host_task_kind(stream, NRT_PROFILE_NKI, name ? name : "NKI programs",
                                  run_group_task, release_group_task, task);
}

/* Host aliases of hbm[t], each checked to be memory of the stream's device. */
static nrt_status bind_device_hbm(nrt_stream_t stream, nrt_nc_program_t p, void *const *hbm,
                                  void **out) {
  int32_t device = nrt_stream_device(stream);
  for (int32_t t = 0; t < p->num_tensors; t++) {
    const nrt_nc_tensor *tensor = &p->tensors[t];
    if (tensor->buffer != NRT_NC_HBM || tensor->bytes == 0) continue;
    int32_t first_dev = -1, last_dev = -1;
    const char *ptr = hbm ? hbm[t] : NULL;
    if (!ptr || nrt_pointer_get_device(ptr, &first_dev) != NRT_SUCCESS ||
        nrt_pointer_get_device(ptr + tensor->bytes - 1, &last_dev) != NRT_SUCCESS ||
        first_dev != device || last_dev != device) {
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "NKI launch: HBM tensor %d (%lld bytes) is not memory of neuron:%d", t,
                     (long long)tensor->bytes, device);
    }
    out[t] = nrt_device_to_host(ptr);
  }
  return NRT_SUCCESS;
}
