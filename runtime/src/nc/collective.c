/* Programs of one launch grid run interleaved, meeting at collective calls.
 *
 * Each program runs on its own simulated core up to its next collective
 * call (program 0 first, then 1, ...: a deterministic order); when every
 * program has arrived, the call is checked (same call number and kind
 * everywhere, peers and slots that exist, matching sizes and dtypes), then
 * every source is staged and only then every destination written, so a
 * call whose source and destination overlap reads the values from before
 * the call, as on hardware where the transfers read before the barrier
 * releases the writers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nc/access.h"
#include "nc/numerics.h"

/* The kinds (func[2]) as the tracer numbers them (torchneuron/nki/collectives.py). */
static const char *const kind_names[] = {
    "?", "core_barrier", "sendrecv", "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
    "collective_permute", "all_gather_v", "all_to_all_v", "collective_permute_implicit",
    "collective_permute_implicit_reduce", "sendrecv_compute"};

static const char *kind_name(int32_t kind) {
  int n = (int)(sizeof kind_names / sizeof *kind_names);
  return kind >= 0 && kind < n ? kind_names[kind] : "?";
}

typedef struct staged {
  uint8_t *bytes; /* partition-major, packed */
  int64_t elems;
  int32_t dtype;
} staged;

typedef struct call_site {
  const nrt_nc_inst *insts; /* the call's first instruction */
  int32_t count;
  staged *slots;
  int owned; /* slots and their bytes are this process's (else in a received message) */
} call_site;

static int64_t ap_elems(const nrt_nc_ap *ap) { return (int64_t)ap->partitions * nc_ap_free_elems(ap); }

static int32_t call_length(const nrt_nc_program_t p, int32_t at) {
  int32_t n = 1;
  while (at + n < p->num_insts && p->insts[at + n].opcode == NRT_NC_COLLECTIVE &&
         p->insts[at + n].imm[3] == p->insts[at].imm[3])
    n++;
  return n;
}

/* The call's sources and destinations agree across programs. */
static nrt_status check_call(const call_site *sites, int32_t n, int32_t call) {
  for (int32_t k = 0; k < n; k++)
    for (int32_t j = 0; j < sites[k].count; j++) {
      const nrt_nc_inst *inst = &sites[k].insts[j];
      const nrt_nc_ap *dst = &inst->ap[0];
      int32_t action = inst->func[0], slot = (int32_t)inst->imm[2];
      if (action == NRT_NC_COLLECTIVE_COPY) {
        int32_t peer = (int32_t)inst->imm[1];
        if (peer < 0 || peer >= n || slot < 0 || slot >= sites[peer].count ||
            sites[peer].insts[slot].ap[1].tensor < 0)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d receives from program %d, which "
                         "sends nothing there", call, kind_name(inst->func[2]), k, peer);
        const nrt_nc_ap *src = &sites[peer].insts[slot].ap[1];
        if (src->dtype != dst->dtype || ap_elems(src) != ap_elems(dst))
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d receives %lld elements of dtype %d "
                         "from program %d, which sends %lld of dtype %d", call,
                         kind_name(inst->func[2]), k, (long long)ap_elems(dst), dst->dtype, peer,
                         (long long)ap_elems(src), src->dtype);
      } else if (action == NRT_NC_COLLECTIVE_PAIR_REDUCE || action == NRT_NC_COLLECTIVE_GATHER_V ||
                 action == NRT_NC_COLLECTIVE_ALLTOALL_V) {
        int32_t peer = (int32_t)inst->imm[1];
        if (peer < 0 || peer >= n || slot < 0 || slot + 1 >= sites[peer].count ||
            sites[peer].insts[slot].ap[1].tensor < 0 || sites[peer].insts[slot + 1].ap[1].tensor < 0)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d receives from program %d, which "
                         "sends nothing there", call, kind_name(inst->func[2]), k, peer);
        const nrt_nc_ap *a = &sites[peer].insts[slot].ap[1], *b = &sites[peer].insts[slot + 1].ap[1];
        if (action == NRT_NC_COLLECTIVE_PAIR_REDUCE && (ap_elems(a) != ap_elems(dst) ||
                                                        ap_elems(b) != ap_elems(dst)))
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d reduces %lld elements, program %d "
                         "sends %lld and %lld", call, kind_name(inst->func[2]), k,
                         (long long)ap_elems(dst), peer, (long long)ap_elems(a),
                         (long long)ap_elems(b));
        if (action != NRT_NC_COLLECTIVE_PAIR_REDUCE &&
            (a->dtype != dst->dtype || b->dtype != NRT_NC_UINT32 || ap_elems(b) < 2 * n ||
             ap_elems(b) % n))
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d's data must have dst's dtype and "
                         "its metadata be uint32 [rows, %d]", call, kind_name(inst->func[2]),
                         peer, n);
      } else if (action == NRT_NC_COLLECTIVE_REDUCE) {
        uint64_t mask = (uint64_t)inst->imm[0];
        if (n < 64 && (mask >> n) != 0)
          return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                         "collective call %d (%s): program %d reduces over programs that are "
                         "not in the launch", call, kind_name(inst->func[2]), k);
        for (int32_t m = 0; m < n; m++) {
          if (!((mask >> m) & 1)) continue;
          if (slot < 0 || slot >= sites[m].count || sites[m].insts[slot].ap[1].tensor < 0 ||
              ap_elems(&sites[m].insts[slot].ap[1]) != ap_elems(dst))
            return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                           "collective call %d (%s): program %d reduces %lld elements, but "
                           "program %d contributes no source of that size", call,
                           kind_name(inst->func[2]), k, (long long)ap_elems(dst), m);
        }
      }
    }
  return NRT_SUCCESS;
}

/* Stages the sources of this process's n programs (sites[0 .. n)). */
static nrt_status stage(nc_run *const *runs, call_site *sites, int32_t n) {
  for (int32_t k = 0; k < n; k++) {
    const nc_core *core = nc_run_core(runs[k]);
    sites[k].owned = 1;
    sites[k].slots = calloc((size_t)sites[k].count, sizeof(staged));
    if (!sites[k].slots) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
    for (int32_t j = 0; j < sites[k].count; j++) {
      const nrt_nc_ap *src = &sites[k].insts[j].ap[1];
      if (src->tensor < 0) continue;
      size_t size = nrt_nc_dtype_size(src->dtype);
      int64_t row = nc_ap_free_elems(src);
      staged *st = &sites[k].slots[j];
      st->bytes = malloc((size_t)(ap_elems(src) ? ap_elems(src) : 1) * size);
      if (!st->bytes) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
      st->elems = ap_elems(src);
      st->dtype = src->dtype;
      for (int64_t p = 0; p < src->partitions; p++)
        nc_gather_raw(core, src, p, st->bytes + (size_t)(p * row) * size);
    }
  }
  return NRT_SUCCESS;
}

static void write_copy(const nc_core *core, const nrt_nc_ap *dst, const staged *st) {
  size_t size = nrt_nc_dtype_size(dst->dtype);
  int64_t row = nc_ap_free_elems(dst);
  for (int64_t p = 0; p < dst->partitions; p++)
    nc_scatter_raw(core, dst, p, st->bytes + (size_t)(p * row) * size);
}

static nrt_status write_reduce(const nc_core *core, const nrt_nc_inst *inst, const call_site *sites,
                               int32_t n) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t row = nc_ap_free_elems(dst);
  int32_t slot = (int32_t)inst->imm[2];
  uint64_t mask = (uint64_t)inst->imm[0];
  float *acc = malloc((size_t)(row ? row : 1) * sizeof(float));
  if (!acc) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
  for (int64_t p = 0; p < dst->partitions; p++) {
    int first = 1;
    for (int32_t m = 0; m < n; m++) {
      if (!((mask >> m) & 1)) continue;
      const staged *st = &sites[m].slots[slot];
      size_t size = nrt_nc_dtype_size(st->dtype);
      const uint8_t *src = st->bytes + (size_t)(p * row) * size;
      for (int64_t j = 0; j < row; j++) {
        float v = nc_load(st->dtype, src + (size_t)j * size);
        acc[j] = first ? v : nc_alu(inst->func[1], acc[j], v);
      }
      first = 0;
    }
    nc_scatter_f32(core, dst, p, acc);
  }
  free(acc);
  return NRT_SUCCESS;
}

/* dst = op(slots imm[2], imm[2] + 1 of program imm[1]) in fp32. */
static nrt_status write_pair_reduce(const nc_core *core, const nrt_nc_inst *inst,
                                    const call_site *sites) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int64_t row = nc_ap_free_elems(dst);
  const staged *a = &sites[(int32_t)inst->imm[1]].slots[(int32_t)inst->imm[2]], *b = a + 1;
  size_t sa = nrt_nc_dtype_size(a->dtype), sb = nrt_nc_dtype_size(b->dtype);
  float *acc = malloc((size_t)(row ? row : 1) * sizeof(float));
  if (!acc) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
  for (int64_t p = 0; p < dst->partitions; p++) {
    for (int64_t j = 0; j < row; j++)
      acc[j] = nc_alu(inst->func[1], nc_load(a->dtype, a->bytes + (size_t)(p * row + j) * sa),
                      nc_load(b->dtype, b->bytes + (size_t)(p * row + j) * sb));
    nc_scatter_f32(core, dst, p, acc);
  }
  free(acc);
  return NRT_SUCCESS;
}

static uint32_t meta(const staged *m, int32_t n, int32_t row, int32_t col) {
  if ((int64_t)(row + 1) * n > m->elems) return 0; /* an absent row reads as 0 */
  uint32_t v;
  memcpy(&v, m->bytes + ((size_t)row * (size_t)n + (size_t)col) * 4, 4);
  return v;
}

/* The _V actions: a run-time chunk of program imm[1]'s flat data into dst
 * (read, patched and written back, so the rest of dst is kept). *cursor is
 * where the next ALLTOALL_V chunk of this call lands. */
static nrt_status write_v(const nc_core *core, const nrt_nc_inst *inst, const call_site *sites,
                          int32_t n, int32_t me, int64_t *cursor) {
  const nrt_nc_ap *dst = &inst->ap[0];
  int32_t peer = (int32_t)inst->imm[1], slot = (int32_t)inst->imm[2];
  const staged *data = &sites[peer].slots[slot], *pm = data + 1, *mine = &sites[me].slots[slot + 1];
  int gather = inst->func[0] == NRT_NC_COLLECTIVE_GATHER_V;
  int64_t total = ap_elems(dst), count = meta(pm, n, 0, gather ? 0 : me),
          displ = meta(pm, n, 1, gather ? 0 : me);
  int64_t at = gather ? (int64_t)inst->func[1] * (total / (int64_t)inst->imm[0]) : *cursor;
  if (inst->flags & NRT_NC_COLLECTIVE_RDISPLS) at = meta(mine, n, 3, peer);
  const char *kind = kind_name(inst->func[2]);
  if ((inst->flags & NRT_NC_COLLECTIVE_RCOUNTS) && meta(mine, n, 2, peer) != count)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: program %d expects %u elements from program %d, which sends %lld", kind,
                   me, meta(mine, n, 2, peer), peer, (long long)count);
  if (displ + count > data->elems || at + count > total ||
      (gather && !(inst->flags & NRT_NC_COLLECTIVE_RDISPLS) &&
       count > total / (int64_t)inst->imm[0]))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: program %d sends elements [%lld, %lld) of its %lld to program %d's "
                   "[%lld, %lld) of %lld: out of bounds", kind, peer, (long long)displ,
                   (long long)(displ + count), (long long)data->elems, me, (long long)at,
                   (long long)(at + count), (long long)total);
  *cursor = at + count;
  size_t size = nrt_nc_dtype_size(dst->dtype);
  int64_t row = nc_ap_free_elems(dst);
  uint8_t *buf = malloc((size_t)(total ? total : 1) * size);
  if (!buf) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
  for (int64_t p = 0; p < dst->partitions; p++) nc_gather_raw(core, dst, p, buf + (size_t)(p * row) * size);
  memcpy(buf + (size_t)at * size, data->bytes + (size_t)displ * size, (size_t)count * size);
  for (int64_t p = 0; p < dst->partitions; p++) nc_scatter_raw(core, dst, p, buf + (size_t)(p * row) * size);
  free(buf);
  return NRT_SUCCESS;
}

/* Writes the destinations of this process's n programs, global ranks
 * base .. base + n - 1 of the total sites. */
static nrt_status write_call(nc_run *const *runs, const call_site *sites, int32_t total,
                             int32_t base, int32_t n) {
  nrt_status s = NRT_SUCCESS;
  for (int32_t k = base; k < base + n && !s; k++) {
    const nc_core *core = nc_run_core(runs[k - base]);
    int64_t cursor = 0;
    for (int32_t j = 0; j < sites[k].count && !s; j++) {
      const nrt_nc_inst *inst = &sites[k].insts[j];
      if (inst->ap[0].tensor < 0) continue;
      switch (inst->func[0]) {
        case NRT_NC_COLLECTIVE_COPY:
          write_copy(core, &inst->ap[0], &sites[(int32_t)inst->imm[1]].slots[(int32_t)inst->imm[2]]);
          break;
        case NRT_NC_COLLECTIVE_REDUCE: s = write_reduce(core, inst, sites, total); break;
        case NRT_NC_COLLECTIVE_PAIR_REDUCE: s = write_pair_reduce(core, inst, sites); break;
        default: s = write_v(core, inst, sites, total, k, &cursor); break;
      }
    }
  }
  return s;
}

static void release_sites(call_site *sites, int32_t total) {
  for (int32_t k = 0; k < total; k++) {
    if (sites[k].slots && sites[k].owned)
      for (int32_t j = 0; j < sites[k].count; j++) free(sites[k].slots[j].bytes);
    free(sites[k].slots);
    sites[k] = (call_site){0};
  }
}

/* Every program is at a call with the same number and kind, or all ended. */
static nrt_status check_arrival(const nrt_nc_program_t *programs, const int32_t *at, int32_t n,
                                int *all_done) {
  *all_done = at[0] < 0;
  for (int32_t k = 1; k < n; k++) {
    int done = at[k] < 0;
    const nrt_nc_inst *a = at[0] >= 0 ? &programs[0]->insts[at[0]] : NULL;
    const nrt_nc_inst *b = done ? NULL : &programs[k]->insts[at[k]];
    if (done == *all_done && (done || (a->imm[3] == b->imm[3] && a->func[2] == b->func[2])))
      continue;
    const nrt_nc_inst *some = a ? a : b;
    int32_t waiting = a ? 0 : k, other = a ? k : 0;
    const nrt_nc_inst *there = a ? b : a;
    if (!there)
      return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                     "collective deadlock: program %d waits at collective call %d (%s), but "
                     "program %d ended without reaching it", waiting, (int)some->imm[3],
                     kind_name(some->func[2]), other);
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "collective deadlock: program 0 is at collective call %d (%s) while program "
                   "%d is at call %d (%s)", (int)a->imm[3], kind_name(a->func[2]), k,
                   (int)b->imm[3], kind_name(b->func[2]));
  }
  return NRT_SUCCESS;
}

/* ---- across processes: the messages of nrt_nc_exchange ------------------------
 *
 * A message: int32 {state, call, kind, programs}, then per state:
 * FAILED: the error text; AT_CALL: per program, int32 count, its count
 * instruction records, and per instruction int64 elements, int32 dtype,
 * int32 present and the staged bytes. Every item is padded to 8 bytes, so
 * records and data in a received message are aligned where they lie. */
enum { AT_CALL = 0, ENDED = 1, FAILED = 2 };

typedef struct msg_out {
  uint8_t *buf;
  size_t len, cap;
  int oom;
} msg_out;

static void put(msg_out *w, const void *data, size_t n) {
  size_t padded = (n + 7) & ~(size_t)7;
  if (w->oom) return;
  if (w->len + padded > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + padded) cap *= 2;
    uint8_t *b = realloc(w->buf, cap);
    if (!b) {
      w->oom = 1;
      return;
    }
    w->buf = b;
    w->cap = cap;
  }
  if (n) memcpy(w->buf + w->len, data, n);
  memset(w->buf + w->len + n, 0, padded - n);
  w->len += padded;
}

typedef struct msg_in {
  const uint8_t *buf;
  size_t len, at;
} msg_in;

static const void *take(msg_in *r, size_t n) {
  size_t padded = (n + 7) & ~(size_t)7;
  if (r->at > r->len || padded > r->len - r->at) return NULL;
  const void *p = r->buf + r->at;
  r->at += padded;
  return p;
}

static void put_header(msg_out *w, int32_t state, int32_t call, int32_t kind, int32_t n) {
  int32_t h[4] = {state, call, kind, n};
  put(w, h, sizeof h);
}

static void put_sites(msg_out *w, const call_site *sites, int32_t n) {
  for (int32_t k = 0; k < n; k++) {
    put(w, &sites[k].count, sizeof(int32_t));
    put(w, sites[k].insts, (size_t)sites[k].count * sizeof(nrt_nc_inst));
    for (int32_t j = 0; j < sites[k].count; j++) {
      const staged *st = &sites[k].slots[j];
      int64_t elems = st->bytes ? st->elems : 0;
      int32_t meta[2] = {st->dtype, st->bytes != NULL};
      put(w, &elems, sizeof elems);
      put(w, meta, sizeof meta);
      put(w, st->bytes, st->bytes ? (size_t)elems * nrt_nc_dtype_size(st->dtype) : 0);
    }
  }
}

/* Process q's programs' sites from its message (pointing into it). */
static nrt_status take_sites(msg_in *r, call_site *sites, int32_t n, int32_t q) {
  for (int32_t k = 0; k < n; k++) {
    const int32_t *count = take(r, sizeof(int32_t));
    const nrt_nc_inst *insts = count && *count > 0 ? take(r, (size_t)*count * sizeof(nrt_nc_inst)) : NULL;
    if (!insts) goto malformed;
    sites[k] = (call_site){.insts = insts, .count = *count};
    sites[k].slots = calloc((size_t)*count, sizeof(staged));
    if (!sites[k].slots) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
    for (int32_t j = 0; j < *count; j++) {
      const int64_t *elems = take(r, sizeof(int64_t));
      const int32_t *meta = take(r, 2 * sizeof(int32_t));
      if (!elems || !meta || *elems < 0) goto malformed;
      if (!meta[1]) continue;
      size_t bytes = (size_t)*elems * nrt_nc_dtype_size(meta[0]);
      const uint8_t *data = take(r, bytes);
      if (!data && bytes) goto malformed;
      sites[k].slots[j] = (staged){.bytes = (uint8_t *)data, .elems = *elems, .dtype = meta[0]};
      if (!bytes) sites[k].slots[j].bytes = (uint8_t *)r->buf; /* present, empty */
    }
  }
  return NRT_SUCCESS;
malformed:
  return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d's message "
                 "is malformed", q);
}

/* One round of a distributed run: sends this process's state and reads
 * every process's. On success *all_ended tells whether every process ended;
 * otherwise the sites of every process are filled (this one's staged). */
static nrt_status exchange_round(const nrt_nc_exchange *ex, int32_t n, call_site *sites,
                                 nrt_status mine, int local_done, int *all_ended,
                                 void ***messages) {
  int32_t procs = ex->processes, me = ex->process;
  call_site *local = &sites[me * n];
  msg_out w = {0};
  if (mine) {
    const char *text = nrt_last_error();
    put_header(&w, FAILED, 0, 0, n);
    put(&w, text, strlen(text) + 1);
  } else if (local_done) {
    put_header(&w, ENDED, 0, 0, n);
  } else {
    put_header(&w, AT_CALL, (int32_t)local[0].insts->imm[3], local[0].insts->func[2], n);
    put_sites(&w, local, n);
  }
  if (w.oom) {
    /* Still take part in the round, with the shortest message. */
    free(w.buf);
    w = (msg_out){0};
    put_header(&w, FAILED, 0, 0, n);
    put(&w, "out of host memory", 19);
    if (w.oom) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
    mine = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
  }
  void **recv = calloc((size_t)procs, sizeof *recv);
  size_t *recv_bytes = calloc((size_t)procs, sizeof *recv_bytes);
  nrt_status s = recv && recv_bytes ? NRT_SUCCESS
                                    : rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                                              "out of host memory in a collective");
  /* The error text survives the exchange (it may reset the thread's message). */
  char failure[512] = "";
  if (mine) snprintf(failure, sizeof failure, "%s", nrt_last_error());
  if (!s) s = ex->fn(ex->ctx, w.buf, w.len, recv, recv_bytes);
  free(w.buf);
  int32_t states[3] = {0, 0, 0};
  int32_t first[3] = {-1, -1, -1};
  const int32_t *head0 = NULL;
  for (int32_t q = 0; q < procs && !s; q++) {
    msg_in r = {recv[q], recv_bytes[q], 0};
    const int32_t *h = take(&r, 4 * sizeof(int32_t));
    if (!h || h[0] < AT_CALL || h[0] > FAILED || h[3] != n) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d runs %d "
                  "programs of the grid, process %d runs %d", me, n, q, h ? h[3] : -1);
      break;
    }
    states[h[0]]++;
    if (first[h[0]] < 0) first[h[0]] = q;
    if (h[0] == FAILED && q != me && !mine) {
      const char *text = take(&r, 1);
      int room = text ? (int)(recv_bytes[q] - 16 < 400 ? recv_bytes[q] - 16 : 400) : 1;
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d stopped: %.*s",
                  q, room, text ? text : "?");
      break;
    }
    if (h[0] != AT_CALL) continue;
    if (!head0) {
      head0 = h;
    } else if (h[1] != head0[1] || h[2] != head0[2]) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                  "collective deadlock: process %d is at collective call %d (%s) while process "
                  "%d is at call %d (%s)", first[AT_CALL], head0[1], kind_name(head0[2]), q,
                  h[1], kind_name(h[2]));
      break;
    }
    if (q != me) s = take_sites(&r, &sites[q * n], n, q);
  }
  if (!s && mine) s = rt_fail(mine, "%s", failure);
  if (!s && states[AT_CALL] && states[ENDED])
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                "collective deadlock: process %d waits at collective call %d (%s), but process "
                "%d ended without reaching it", first[AT_CALL], head0[1], kind_name(head0[2]),
                first[ENDED]);
  *all_ended = !s && states[ENDED] == procs;
  free(recv_bytes);
  *messages = recv;
  return s;
}

static void free_messages(void **messages, int32_t procs) {
  for (int32_t q = 0; messages && q < procs; q++) free(messages[q]);
  free(messages);
}

nrt_status nc_execute_group_ex(const nrt_nc_program_t *programs, int32_t n,
                               void *const *const *hbm, const nrt_nc_exchange *ex) {
  int32_t procs = ex ? ex->processes : 1, base = ex ? ex->process * n : 0, total = n * procs;
  nc_run **runs = calloc((size_t)n, sizeof *runs);
  int32_t *at = calloc((size_t)n, sizeof *at);
  call_site *sites = calloc((size_t)total, sizeof *sites);
  nrt_status s = runs && at && sites ? NRT_SUCCESS
                                     : rt_fail(NRT_ERROR_OUT_OF_MEMORY,
                                               "out of host memory running NKI programs");
  if (!sites) { /* nothing to run or exchange with */
    free(runs);
    free(at);
    return s;
  }
  for (int32_t k = 0; k < n && !s; k++) s = nc_run_begin(programs[k], hbm[k], &runs[k]);
  for (;;) {
    int done = 0;
    if (!s) {
      for (int32_t k = 0; k < n; k++) at[k] = nc_run_to_sync(runs[k]);
      s = check_arrival(programs, at, n, &done);
    }
    call_site *local = &sites[base];
    if (!s && !done) {
      for (int32_t k = 0; k < n; k++) {
        local[k] = (call_site){.insts = &programs[k]->insts[at[k]],
                               .count = call_length(programs[k], at[k])};
        nc_run_fill_call(runs[k], local[k].count);
      }
      s = stage(runs, local, n);
    }
    if (!ex) {
      if (!s && !done) s = check_call(sites, n, (int32_t)sites[0].insts->imm[3]);
    } else {
      /* A process that failed says so, and every process stops together. */
      void **messages = NULL;
      int ended = 0;
      nrt_status e = exchange_round(ex, n, sites, s, done, &ended, &messages);
      if (!e && !ended) e = check_call(sites, total, (int32_t)local[0].insts->imm[3]);
      if (e || ended) {
        release_sites(sites, total);
        free_messages(messages, procs);
        s = e;
        break;
      }
      if (!s) {
        s = write_call(runs, sites, total, base, n); /* a failure goes out next round */
        for (int32_t k = 0; k < n && !s; k++) nc_run_advance(runs[k], local[k].count);
      }
      release_sites(sites, total);
      free_messages(messages, procs);
      continue;
    }
    if (s || done) {
      release_sites(sites, total);
      break;
    }
    s = write_call(runs, sites, n, 0, n);
    for (int32_t k = 0; k < n && !s; k++) nc_run_advance(runs[k], sites[k].count);
    release_sites(sites, total);
    if (s) break;
  }
  for (int32_t k = 0; runs && k < n; k++) nc_run_end(runs[k]);
  free(runs);
  free(at);
  free(sites);
  return s;
}

nrt_status nc_execute_group(const nrt_nc_program_t *programs, int32_t n, void *const *const *hbm) {
  return nc_execute_group_ex(programs, n, hbm, NULL);
}
