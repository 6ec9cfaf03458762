/* Profiling (neuronrt/profile.h) and the roofline estimate
 * (neuronrt/roofline.h): records carry the launch's correlation id, kind,
 * times in order and the estimate; nothing is recorded while profiling is
 * off; the estimate follows its formula exactly for a matrix product and
 * an addition (trn2's published figures, read from the device). */
#include <math.h>
#include <string.h>
#include "check.h"

static nrt_tensor_view view_2d(void *data, nrt_dtype dtype, int64_t rows, int64_t cols) {
  nrt_tensor_view v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dtype;
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = cols;
  v.strides[0] = cols;
  v.strides[1] = 1;
  return v;
}

static nrt_op gemm(void *out, void *a, void *b, int64_t m, int64_t k, int64_t n) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_GEMM;
  op.compute_dtype = NRT_FLOAT32;
  op.num_operands = 3;
  op.num_outputs = 1;
  op.num_scalars = 2;
  op.operands[0] = view_2d(out, NRT_FLOAT32, m, n);
  op.operands[1] = view_2d(a, NRT_FLOAT32, m, k);
  op.operands[2] = view_2d(b, NRT_FLOAT32, k, n);
  op.scalars[0] = (nrt_scalar){.is_float = 1, .f = 1.0};
  op.scalars[1] = (nrt_scalar){.is_float = 1, .f = 0.0};
  return op;
}

static nrt_op add(void *out, void *a, void *b, int64_t rows, int64_t cols) {
  nrt_op op;
  memset(&op, 0, sizeof op);
  op.code = NRT_OP_ADD;
  op.compute_dtype = NRT_FLOAT32;
  op.num_operands = 3;
  op.num_outputs = 1;
  op.num_scalars = 1;
  op.operands[0] = view_2d(out, NRT_FLOAT32, rows, cols);
  op.operands[1] = view_2d(a, NRT_FLOAT32, rows, cols);
  op.operands[2] = view_2d(b, NRT_FLOAT32, rows, cols);
  op.scalars[0] = (nrt_scalar){.is_float = 1, .f = 1.0};
  return op;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static void test_roofline_follows_its_formula(void) {
  nrt_device_properties p;
  CHECK_OK(nrt_device_get_properties(0, &p));
  void *buf;
  CHECK_OK(nrt_malloc(0, 3 * 512 * 512 * 4, &buf));
  char *x = buf;
  nrt_roofline r;
  /* 512^3 float32: 2 M N K FLOPs at a quarter of 2 x 128 x 128 per cycle. */
  nrt_op g = gemm(x, x + 512 * 512 * 4, x + 2 * 512 * 512 * 4, 512, 512, 512);
  CHECK_OK(nrt_roofline_op(0, &g, &r));
  double flops = 2.0 * 512 * 512 * 512, bytes = 3.0 * 512 * 512 * 4;
  CHECK(close_to(r.work[NRT_ROOFLINE_TENSOR], flops));
  CHECK(close_to(r.bytes, bytes));
  CHECK(close_to(r.compute_ns, flops / (2.0 * 128 * 128 * (double)p.tensor_engine_hz / 4) * 1e9));
  CHECK(close_to(r.memory_ns, bytes / (double)p.hbm_bytes_per_s * 1e9));
  CHECK(r.engine == NRT_ROOFLINE_TENSOR);
  CHECK(close_to(r.est_ns, fmax(r.compute_ns, r.memory_ns)));
  CHECK(r.bound == (r.compute_ns > r.memory_ns ? NRT_BOUND_COMPUTE : NRT_BOUND_MEMORY));
  /* An addition moves 12 bytes per element for one Vector-engine element:
   * memory-bound on every target. */
  nrt_op a = add(x, x + 512 * 512 * 4, x + 2 * 512 * 512 * 4, 512, 512);
  CHECK_OK(nrt_roofline_op(0, &a, &r));
  CHECK(close_to(r.work[NRT_ROOFLINE_VECTOR], 512.0 * 512));
  CHECK(close_to(r.compute_ns, 512.0 * 512 / (128.0 * (double)p.vector_engine_hz) * 1e9));
  CHECK(r.bound == NRT_BOUND_MEMORY);
  CHECK(strcmp(nrt_bound_name(r.bound), "memory") == 0);
  /* A broadcast operand (stride 0) is read once. */
  a.operands[2].strides[0] = 0;
  CHECK_OK(nrt_roofline_op(0, &a, &r));
  CHECK(close_to(r.bytes, (2.0 * 512 * 512 + 512) * 4));
  CHECK_OK(nrt_free(buf));
}

typedef struct seen {
  int n;
  nrt_profile_record r[16];
} seen;

/* The link term: ring bytes over the device's link share plus the steps'
 * latency; EFA's share once the ranks span hosts; bad input fails. */
static void test_collective_estimates(void) {
  nrt_device_properties p;
  CHECK_OK(nrt_device_get_properties(0, &p));
  CHECK(p.link_bytes_per_s > 0 && p.efa_bytes_per_s > 0 && p.efa_bytes_per_s < p.link_bytes_per_s);
  const double mib = 1 << 20;
  nrt_roofline r;
  memset(&r, 0, sizeof r);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 4, 1, 64 * mib, 4, &r));
  nrt_roofline_finish(&p, &r);
  double sent = 2 * 64 * mib * 3 / 4;
  CHECK(close_to(r.link_bytes, sent));
  CHECK(close_to(r.link_ns, sent / (double)p.link_bytes_per_s * 1e9 + 6 * 2000.0));
  CHECK(close_to(r.work[NRT_ROOFLINE_VECTOR], 64 * mib / 4 * 3 / 4));
  CHECK(close_to(r.est_ns, fmax(r.link_ns, fmax(r.memory_ns, r.compute_ns))));
  CHECK(r.bound == NRT_BOUND_LINK && strcmp(nrt_bound_name(r.bound), "link") == 0);

  /* Two hosts: the same bytes at EFA's share, EFA's step latency. */
  nrt_roofline x;
  memset(&x, 0, sizeof x);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 4, 2, 64 * mib, 4, &x));
  CHECK(close_to(x.link_ns, sent / (double)p.efa_bytes_per_s * 1e9 + 6 * 10000.0));

  /* all_gather moves (n - 1) / n of the gathered output in n - 1 steps;
   * send/receive the message in one; a barrier nothing in log2 rounds. */
  memset(&x, 0, sizeof x);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_GATHER, 8, 1, mib, 0, &x));
  CHECK(close_to(x.link_bytes, mib * 7 / 8) && x.work[NRT_ROOFLINE_VECTOR] == 0);
  CHECK(close_to(x.link_ns, mib * 7 / 8 / (double)p.link_bytes_per_s * 1e9 + 7 * 2000.0));
  memset(&x, 0, sizeof x);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_SEND_RECV, 2, 1, mib, 0, &x));
  CHECK(close_to(x.link_ns, mib / (double)p.link_bytes_per_s * 1e9 + 2000.0));
  memset(&x, 0, sizeof x);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_BARRIER, 5, 1, 0, 0, &x));
  CHECK(x.link_bytes == 0 && close_to(x.link_ns, 3 * 2000.0));
  /* One rank: nothing leaves the device. */
  memset(&x, 0, sizeof x);
  CHECK_OK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 1, 1, mib, 4, &x));
  CHECK(x.link_ns == 0 && x.bytes == 0);

  CHECK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_COUNT, 2, 1, mib, 0, &x) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "unknown collective") != NULL);
  CHECK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 2, 3, mib, 4, &x) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 0, 1, mib, 4, &x) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_roofline_add_collective(&p, NRT_COLLECTIVE_ALL_REDUCE, 2, 1, -1, 4, &x) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_roofline_add_collective(NULL, NRT_COLLECTIVE_ALL_REDUCE, 2, 1, mib, 4, &x) == NRT_ERROR_INVALID_ARGUMENT);
}

static void keep(const nrt_profile_record *r, void *arg) {
  seen *s = arg;
  if (s->n < 16) s->r[s->n] = *r;
  s->n++;
}

static nrt_status nothing(void *arg) {
  (void)arg;
  return NRT_SUCCESS;
}

static void test_records_of_launches(void) {
  nrt_stream_t s;
  CHECK_OK(nrt_stream_get_default(0, &s));
  void *buf;
  CHECK_OK(nrt_malloc(0, 3 * 64 * 64 * 4, &buf));
  char *x = buf, host[256] = {0};
  nrt_op g = gemm(x, x + 64 * 64 * 4, x + 2 * 64 * 64 * 4, 64, 64, 64);
  /* Off: nothing is recorded. */
  CHECK_OK(nrt_launch(s, &g));
  CHECK_OK(nrt_stream_synchronize(s));
  seen none = {0};
  CHECK(nrt_profile_drain(keep, &none) == 0);
  CHECK(none.n == 0);

  CHECK_OK(nrt_profile_start());
  CHECK(nrt_profile_active());
  nrt_profile_push_correlation(41);
  CHECK_OK(nrt_launch(s, &g));
  nrt_profile_push_correlation(42); /* nested: the innermost id wins */
  CHECK_OK(nrt_memcpy_async(s, x, host, sizeof host));
  nrt_profile_pop_correlation();
  CHECK_OK(nrt_launch_host_task(s, "my task", nothing, NULL, NULL));
  nrt_profile_pop_correlation();
  CHECK_OK(nrt_launch(s, &g)); /* no CPU op around it */
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_profile_stop();
  CHECK(!nrt_profile_active());
  CHECK_OK(nrt_launch(s, &g)); /* after stop: not recorded */
  CHECK_OK(nrt_stream_synchronize(s));

  seen got = {0};
  CHECK(nrt_profile_drain(keep, &got) == 0);
  CHECK(got.n == 4);
  if (got.n != 4) return;
  const int32_t kinds[4] = {NRT_PROFILE_KERNEL, NRT_PROFILE_COPY, NRT_PROFILE_HOST_TASK, NRT_PROFILE_KERNEL};
  const uint64_t corr[4] = {41, 42, 41, 0};
  const char *names[4] = {"gemm", "memcpy", "my task", "gemm"};
  for (int i = 0; i < 4; i++) {
    const nrt_profile_record *r = &got.r[i];
    CHECK(r->kind == kinds[i]);
    CHECK(r->correlation == corr[i]);
    CHECK(strcmp(r->name, names[i]) == 0);
    CHECK(r->device == 0 && r->stream == 0);
    CHECK(r->launch_ns > 0 && r->launch_ns <= r->launched_ns && r->launched_ns <= r->start_ns);
    CHECK(r->start_ns <= r->end_ns);
    CHECK(r->worker_tid > 0 && r->launch_tid > 0 && r->worker_tid != r->launch_tid);
    if (i > 0) CHECK(r->launch_id > got.r[i - 1].launch_id && r->start_ns >= got.r[i - 1].end_ns);
  }
  CHECK(got.r[0].est_ns > 0 && got.r[0].flops == 2.0 * 64 * 64 * 64);
  CHECK(got.r[1].est_ns > 0 && got.r[1].bytes == 256 && got.r[1].bound == NRT_BOUND_MEMORY);
  CHECK(got.r[2].est_ns == 0 && got.r[2].bound == NRT_BOUND_UNKNOWN);
  /* A second drain finds nothing new. */
  seen again = {0};
  nrt_profile_drain(keep, &again);
  CHECK(again.n == 0);
  CHECK_OK(nrt_free(buf));
}

int main(void) {
  RUN(test_roofline_follows_its_formula);
  RUN(test_collective_estimates);
  RUN(test_records_of_launches);
  return CHECK_MAIN_RESULT();
}
