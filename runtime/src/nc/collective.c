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

/* A program's staged source: in a call's message (see below), where it is
 * written with the source's offset in the message, which the reader turns
 * into a pointer in place. */
typedef struct staged {
  union {
    uint8_t *bytes;  /* partition-major, packed; NULL: no source */
    uint64_t offset; /* as sent */
  };
  int64_t elems;
  int32_t dtype;
  int32_t present;
} staged;

typedef struct call_site {
  const nrt_nc_inst *insts; /* the call's first instruction */
  int32_t count;
  staged *slots; /* count of them, in the call's message */
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

/* ---- the messages ------------------------------------------------------------
 *
 * Every call's sources travel in one message per process (in a run of one
 * process too, which stages its sources the same way): int32 {state, call,
 * kind, programs}, then per state
 *   AT_CALL: per program int64 count, its count instruction records, count
 *            staged records (offsets in the message) and the staged bytes;
 *   ENDED:   nothing;
 *   FAILED:  int32 {status, 0} and the error text (NUL-terminated).
 * Every item is a multiple of 8 bytes, so records and data lie aligned in
 * a message that starts aligned. Reading a message allocates nothing: the
 * sites point into it. So every process reaches the same verdict on a
 * round, and a process that fails on its own (out of host memory) says so
 * in the next round it takes part in, never skipping one. */
enum { AT_CALL = 0, ENDED = 1, FAILED = 2 };
enum { HEADER = 4 * sizeof(int32_t), FAILED_HEAD = 6 * sizeof(int32_t), FAILED_TEXT = 400 };
_Static_assert(sizeof(nrt_nc_inst) % 8 == 0 && sizeof(staged) % 8 == 0,
               "records in a message stay aligned");

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* A FAILED message, built where it needs no allocation. */
typedef struct failed_msg {
  int32_t h[FAILED_HEAD / sizeof(int32_t)]; /* header, status, 0 */
  char text[FAILED_TEXT + 8];
} failed_msg;

static size_t failed_message(failed_msg *m, int32_t programs, nrt_status status, const char *text) {
  memset(m, 0, sizeof *m);
  m->h[0] = FAILED;
  m->h[3] = programs;
  m->h[4] = (int32_t)status;
  snprintf(m->text, FAILED_TEXT, "%s", text && *text ? text : "(no message)");
  return sizeof m->h + pad8(strlen(m->text) + 1);
}

/* The message this process sends at a call: grown when a call needs more,
 * kept for the next. */
typedef struct outbox {
  uint8_t *buf;
  size_t cap, len;
} outbox;

static size_t call_message_size(const call_site *local, int32_t n) {
  size_t total = HEADER;
  for (int32_t k = 0; k < n; k++) {
    total += 8 + (size_t)local[k].count * (sizeof(nrt_nc_inst) + sizeof(staged));
    for (int32_t j = 0; j < local[k].count; j++) {
      const nrt_nc_ap *src = &local[k].insts[j].ap[1];
      if (src->tensor >= 0) total += pad8((size_t)ap_elems(src) * nrt_nc_dtype_size(src->dtype));
    }
  }
  return total;
}

/* Stages the sources of this process's n programs, at their call, in o. */
static nrt_status build_call(outbox *o, nc_run *const *runs, const call_site *local, int32_t n) {
  size_t need = call_message_size(local, n);
  if (need > o->cap) {
    free(o->buf); /* nothing in it is kept: no copy */
    o->buf = malloc(need);
    o->cap = o->buf ? need : 0;
    if (!o->buf) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory in a collective");
  }
  uint8_t *w = o->buf;
  int32_t h[4] = {AT_CALL, (int32_t)local[0].insts->imm[3], local[0].insts->func[2], n};
  memcpy(w, h, sizeof h);
  size_t at = HEADER;
  for (int32_t k = 0; k < n; k++) {
    const nc_core *core = nc_run_core(runs[k]);
    int64_t count = local[k].count;
    memcpy(w + at, &count, 8);
    at += 8;
    memcpy(w + at, local[k].insts, (size_t)count * sizeof(nrt_nc_inst));
    at += (size_t)count * sizeof(nrt_nc_inst);
    size_t table = at;
    at += (size_t)count * sizeof(staged);
    for (int32_t j = 0; j < count; j++) {
      const nrt_nc_ap *src = &local[k].insts[j].ap[1];
      staged st = {.dtype = src->dtype};
      if (src->tensor >= 0) {
        size_t size = nrt_nc_dtype_size(src->dtype), bytes = (size_t)ap_elems(src) * size;
        int64_t row = nc_ap_free_elems(src);
        st.present = 1;
        st.elems = ap_elems(src);
        st.offset = at;
        for (int64_t p = 0; p < src->partitions; p++)
          nc_gather_raw(core, src, p, w + at + (size_t)(p * row) * size);
        memset(w + at + bytes, 0, pad8(bytes) - bytes);
        at += pad8(bytes);
      }
      memcpy(w + table + (size_t)j * sizeof(staged), &st, sizeof st);
    }
  }
  o->len = at;
  return NRT_SUCCESS;
}

/* Process q's programs' sites, viewing its message (offsets become
 * pointers, in place). Allocates nothing. */
static nrt_status view_sites(uint8_t *buf, size_t len, call_site *sites, int32_t n, int32_t q) {
  size_t at = HEADER;
  for (int32_t k = 0; k < n; k++) {
    int64_t count;
    if (at > len || len - at < 8) goto malformed;
    memcpy(&count, buf + at, 8);
    at += 8;
    if (count < 1 || (uint64_t)count > (len - at) / (sizeof(nrt_nc_inst) + sizeof(staged)))
      goto malformed;
    const nrt_nc_inst *insts = (const nrt_nc_inst *)(buf + at);
    at += (size_t)count * sizeof(nrt_nc_inst);
    staged *slots = (staged *)(buf + at);
    at += (size_t)count * sizeof(staged);
    for (int32_t j = 0; j < count; j++) {
      staged *st = &slots[j];
      const nrt_nc_ap *src = &insts[j].ap[1];
      if (st->present != (src->tensor >= 0)) goto malformed;
      if (!st->present) {
        st->bytes = NULL;
        continue;
      }
      size_t size = nrt_nc_dtype_size(src->dtype);
      /* The data lie in order after the table. */
      if (!size || st->dtype != src->dtype || st->elems < 0 || (uint64_t)st->elems > len ||
          st->elems != ap_elems(src) || st->offset != at ||
          pad8((size_t)st->elems * size) > len - at)
        goto malformed;
      st->bytes = buf + at;
      at += pad8((size_t)st->elems * size);
    }
    sites[k] = (call_site){.insts = insts, .count = (int32_t)count, .slots = slots};
  }
  return NRT_SUCCESS;
malformed:
  return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d's message "
                 "is malformed", q);
}

/* Every process's message of a round, read alike on every process: on
 * success *all_ended tells whether every process ended; otherwise every
 * process's sites are filled. mine: this process's failure (its text in
 * failure), which it returns once it has read the round. */
static nrt_status read_round(const nrt_nc_exchange *ex, int32_t n, call_site *sites, void **recv,
                             const size_t *recv_bytes, nrt_status mine, const char *failure,
                             int *all_ended) {
  int32_t procs = ex->processes, me = ex->process;
  int32_t states[3] = {0, 0, 0}, first[3] = {-1, -1, -1};
  int32_t head0[4] = {0};
  nrt_status s = NRT_SUCCESS;
  *all_ended = 0;
  for (int32_t q = 0; q < procs && !s; q++) {
    int32_t h[4] = {-1, 0, 0, -1};
    if (recv[q] && recv_bytes[q] >= HEADER) memcpy(h, recv[q], sizeof h);
    if (h[0] < AT_CALL || h[0] > FAILED || h[3] != n) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d runs %d "
                  "programs of the grid, process %d runs %d", me, n, q, h[3]);
      break;
    }
    states[h[0]]++;
    if (first[h[0]] < 0) first[h[0]] = q;
    if (h[0] == FAILED && q != me && !mine) {
      size_t room = recv_bytes[q] > FAILED_HEAD ? recv_bytes[q] - FAILED_HEAD : 0;
      const char *text = (const char *)recv[q] + FAILED_HEAD;
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT, "collective across processes: process %d stopped: "
                  "%.*s", q, (int)(room < FAILED_TEXT ? room : FAILED_TEXT), room ? text : "?");
      break;
    }
    if (h[0] != AT_CALL) continue;
    if (first[AT_CALL] == q) {
      memcpy(head0, h, sizeof h);
    } else if (h[1] != head0[1] || h[2] != head0[2]) {
      s = rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                  "collective deadlock: process %d is at collective call %d (%s) while process "
                  "%d is at call %d (%s)", first[AT_CALL], head0[1], kind_name(head0[2]), q,
                  h[1], kind_name(h[2]));
      break;
    }
    if (!mine) s = view_sites(recv[q], recv_bytes[q], &sites[q * n], n, q);
  }
  if (!s && mine) s = rt_fail(mine, "%s", failure);
  if (!s && states[AT_CALL] && states[ENDED])
    s = rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                "collective deadlock: process %d waits at collective call %d (%s), but process "
                "%d ended without reaching it", first[AT_CALL], head0[1], kind_name(head0[2]),
                first[ENDED]);
  *all_ended = !s && states[ENDED] == procs;
  return s;
}

/* One round as a process that failed (status, text) before it could do
 * anything else, with no allocation: the message and the receive arrays
 * are on the stack. Returns the exchange's status. */
static nrt_status __attribute__((noinline))
fail_round(const nrt_nc_exchange *ex, int32_t programs, nrt_status status, const char *text) {
  failed_msg m;
  void *recv[NRT_NC_MAX_PROCESSES];
  size_t recv_bytes[NRT_NC_MAX_PROCESSES];
  size_t len = failed_message(&m, programs, status, text);
  return ex->fn(ex->ctx, &m, len, recv, recv_bytes);
}

nrt_status nrt_nc_exchange_fail(const nrt_nc_exchange *ex, int32_t programs, const char *why) {
  if (!ex || !ex->fn || ex->processes < 1 || ex->processes > NRT_NC_MAX_PROCESSES || programs < 1)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_nc_exchange_fail: no exchange or programs");
  return fail_round(ex, programs, NRT_ERROR_INVALID_ARGUMENT, why);
}

/* What a group run holds from its first round to its last. */
typedef struct group_state {
  nc_run **runs;
  int32_t *at;
  call_site *sites; /* every process's programs, global rank order */
  void **recv;      /* the round's messages, owned by the exchange */
  size_t *recv_bytes;
  outbox out;
} group_state;

static void group_state_free(group_state *g, int32_t n) {
  for (int32_t k = 0; g->runs && k < n; k++) nc_run_end(g->runs[k]);
  free(g->runs);
  free(g->at);
  free(g->sites);
  free(g->recv);
  free(g->recv_bytes);
  free(g->out.buf);
}

/* One round of a run across processes: sends this process's message (its
 * call's, ENDED, or FAILED with s's text) and reads every process's. */
static nrt_status exchange_round(const nrt_nc_exchange *ex, int32_t n, group_state *g,
                                 nrt_status s, int done, int *all_ended) {
  failed_msg fail;
  int32_t ended[4] = {ENDED, 0, 0, n};
  const void *send = g->out.buf;
  size_t len = g->out.len;
  /* The error text survives the exchange (which may reset the thread's message). */
  if (s) {
    len = failed_message(&fail, n, s, nrt_last_error());
    send = &fail;
  } else if (done) {
    send = ended;
    len = sizeof ended;
  }
  memset(g->recv, 0, (size_t)ex->processes * sizeof *g->recv);
  memset(g->recv_bytes, 0, (size_t)ex->processes * sizeof *g->recv_bytes);
  nrt_status e = ex->fn(ex->ctx, send, len, g->recv, g->recv_bytes);
  if (e) return e; /* the transport failed: it fails every process's round */
  return read_round(ex, n, g->sites, g->recv, g->recv_bytes, s, s ? fail.text : NULL, all_ended);
}

nrt_status nc_execute_group_ex(const nrt_nc_program_t *programs, int32_t n,
                               void *const *const *hbm, const nrt_nc_exchange *ex) {
  int32_t procs = ex ? ex->processes : 1, base = ex ? ex->process * n : 0, total = n * procs;
  group_state g = {0};
  g.runs = calloc((size_t)n, sizeof *g.runs);
  g.at = calloc((size_t)n, sizeof *g.at);
  g.sites = calloc((size_t)total, sizeof *g.sites);
  if (ex) {
    g.recv = calloc((size_t)procs, sizeof *g.recv);
    g.recv_bytes = calloc((size_t)procs, sizeof *g.recv_bytes);
  }
  nrt_status s = NRT_SUCCESS;
  if (!g.runs || !g.at || !g.sites || (ex && (!g.recv || !g.recv_bytes))) {
    group_state_free(&g, n);
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory running NKI programs");
    if (ex) { /* the peers still hear of it, in the round they wait in */
      char why[FAILED_TEXT];
      snprintf(why, sizeof why, "%s", nrt_last_error());
      fail_round(ex, n, s, why);
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "%s", why);
    }
    return s;
  }
  for (int32_t k = 0; k < n && !s; k++) s = nc_run_begin(programs[k], hbm[k], &g.runs[k]);
  call_site *local = &g.sites[base];
  for (;;) {
    int done = 0;
    if (!s) {
      for (int32_t k = 0; k < n; k++) g.at[k] = nc_run_to_sync(g.runs[k]);
      for (int32_t k = 0; k < n && !s; k++) s = nc_run_fault(g.runs[k]);
      if (!s) s = check_arrival(programs, g.at, n, &done);
    }
    if (!s && !done) {
      for (int32_t k = 0; k < n; k++) {
        local[k] = (call_site){.insts = &programs[k]->insts[g.at[k]],
                               .count = call_length(programs[k], g.at[k])};
        nc_run_fill_call(g.runs[k], local[k].count);
      }
      s = build_call(&g.out, g.runs, local, n);
    }
    if (!ex) {
      if (s || done) break;
      s = view_sites(g.out.buf, g.out.len, g.sites, n, 0);
      if (!s) s = check_call(g.sites, n, (int32_t)g.sites[0].insts->imm[3]);
    } else {
      /* A process that failed says so, and every process stops together. */
      int ended = 0;
      nrt_status e = exchange_round(ex, n, &g, s, done, &ended);
      if (!e && !ended) e = check_call(g.sites, total, (int32_t)local[0].insts->imm[3]);
      if (e || ended) {
        s = e;
        break;
      }
    }
    if (s) break;
    s = write_call(g.runs, g.sites, total, base, n); /* across processes: a failure goes out next round */
    for (int32_t k = 0; k < n && !s; k++) nc_run_advance(g.runs[k], local[k].count);
    if (s && !ex) break;
  }
  group_state_free(&g, n);
  return s;
}

nrt_status nc_execute_group(const nrt_nc_program_t *programs, int32_t n, void *const *const *hbm) {
  return nc_execute_group_ex(programs, n, hbm, NULL);
}
