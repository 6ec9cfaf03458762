/* Profiling: the switch, correlation ids, stamps and records
 * (neuronrt/profile.h). The rings themselves live with the streams. */
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "internal.h"
#include "profiling.h"

atomic_int rt_profiling;
_Thread_local rt_profile_ctx *rt_profile_current;

static atomic_uint_fast64_t next_launch_id = 1;

/* Correlation ids nest (an op inside an op): a small stack per thread;
 * deeper nesting keeps counting so that pops stay balanced. */
#define CORRELATION_DEPTH 64
static _Thread_local uint64_t correlation_stack[CORRELATION_DEPTH];
static _Thread_local int correlation_depth;

void nrt_profile_push_correlation(uint64_t id) {
  if (correlation_depth < CORRELATION_DEPTH) correlation_stack[correlation_depth] = id;
  correlation_depth++;
}

void nrt_profile_pop_correlation(void) {
  if (correlation_depth > 0) correlation_depth--;
}

static uint64_t current_correlation(void) {
  int d = correlation_depth;
  if (d <= 0) return 0;
  return correlation_stack[(d <= CORRELATION_DEPTH ? d : CORRELATION_DEPTH) - 1];
}

int32_t rt_gettid(void) {
  static _Thread_local int32_t tid;
  if (!tid) tid = (int32_t)syscall(SYS_gettid);
  return tid;
}

nrt_status nrt_profile_start(void) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  nrt_profile_drain(NULL, NULL); /* what an earlier session left */
  atomic_store(&rt_profiling, 1);
  return NRT_SUCCESS;
}

void nrt_profile_stop(void) { atomic_store(&rt_profiling, 0); }

int nrt_profile_active(void) { return atomic_load(&rt_profiling); }

void rt_profile_stamp(rt_launch_stamp *stamp, int32_t kind) {
  stamp->launch_id = atomic_fetch_add_explicit(&next_launch_id, 1, memory_order_relaxed);
  stamp->correlation = current_correlation();
  stamp->launch_ns = rt_now_ns();
  stamp->launched_ns = stamp->launch_ns;
  stamp->launch_tid = rt_gettid();
  stamp->kind = kind;
}

void rt_profile_record_init(nrt_profile_record *r, nrt_stream_t s, const rt_launch_stamp *stamp,
                            const char *name) {
  memset(r, 0, sizeof *r);
  r->launch_ns = stamp->launch_ns;
  r->launched_ns = stamp->launched_ns;
  r->correlation = stamp->correlation;
  r->launch_id = stamp->launch_id;
  r->launch_tid = stamp->launch_tid;
  r->kind = stamp->kind;
  r->stream = nrt_stream_id(s);
  r->device = nrt_stream_device(s);
  r->worker_tid = rt_gettid();
  snprintf(r->name, sizeof r->name, "%s", name ? name : "");
}

void rt_profile_set_estimate(nrt_profile_record *r, int32_t device, nrt_roofline *est) {
  const nrt_device_properties *props = rt_device_props(device);
  if (!props) return;
  if (est->est_ns <= 0) nrt_roofline_finish(props, est);
  else if (est->bound == NRT_BOUND_UNKNOWN) /* a sum of parts: times already added */
    est->bound = nrt_roofline_bound(est);
  r->est_ns = est->est_ns;
  r->bytes = est->bytes;
  r->link_bytes = est->link_bytes;
  r->flops = est->work[NRT_ROOFLINE_TENSOR];
  r->bound = est->bound;
  r->engine = est->engine;
}

void rt_profile_part(const char *name, uint64_t start_ns, uint64_t end_ns, nrt_roofline *est) {
  rt_profile_ctx *ctx = rt_profile_current;
  if (!ctx) return;
  nrt_profile_record r;
  rt_profile_record_init(&r, ctx->stream, ctx->stamp, name);
  r.launch_ns = r.launched_ns = 0; /* a part: its launch is the command's */
  r.kind = NRT_PROFILE_PROGRAM_STEP;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  if (est) {
    rt_profile_set_estimate(&r, r.device, est);
    rt_profile_add_estimate(est);
  }
  rt_profile_emit(ctx->stream, &r);
}

void rt_profile_add_estimate(const nrt_roofline *est) {
  rt_profile_ctx *ctx = rt_profile_current;
  if (!ctx) return;
  /* Parts run one after another: their times add up. */
  nrt_roofline *sum = &ctx->est;
  sum->bytes += est->bytes;
  for (int e = 0; e < NRT_ROOFLINE_ENGINE_COUNT; e++) sum->work[e] += est->work[e];
  sum->memory_ns += est->memory_ns;
  sum->compute_ns += est->compute_ns;
  sum->link_bytes += est->link_bytes;
  sum->link_ns += est->link_ns;
  sum->est_ns += est->est_ns;
  ctx->has_est = 1;
}

void rt_profile_nki_estimate(const nrt_nc_estimate *e, nrt_roofline *out) {
  memset(out, 0, sizeof *out);
  out->bytes = (double)e->dma_bytes;
  out->memory_ns = e->busy_ns[NRT_NC_ENGINE_DMA];
  for (int k = 0; k < NRT_NC_ENGINE_COUNT; k++)
    if (k != NRT_NC_ENGINE_DMA && e->busy_ns[k] > out->compute_ns) {
      out->compute_ns = e->busy_ns[k];
      out->engine = k == NRT_NC_ENGINE_TENSOR   ? NRT_ROOFLINE_TENSOR
                    : k == NRT_NC_ENGINE_SCALAR ? NRT_ROOFLINE_SCALAR
                                                : NRT_ROOFLINE_VECTOR;
    }
  /* Collectives across processes: what went over NeuronLink / EFA and the
   * link's busy time (nki.benchmark's link_bytes / link_us). */
  out->link_bytes = (double)e->link_bytes;
  out->link_ns = e->link_ns;
  /* The cost model's schedule, not the roofline's max: it knows the
   * dependencies and latencies of the program. */
  out->est_ns = e->total_ns;
  out->bound = nrt_roofline_bound(out);
}

const char *nrt_profile_kind_name(int32_t kind) {
  static const char *names[NRT_PROFILE_KIND_COUNT] = {
      "kernel", "copy", "fused group", "fused member", "compiled program", "program step",
      "NKI kernel", "host task"};
  return kind >= 0 && kind < NRT_PROFILE_KIND_COUNT ? names[kind] : "unknown";
}
