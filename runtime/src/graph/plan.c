/* Memory plans: a binding's values, the checks of every view against its
 * buffer, and the packing of the temporaries into one arena; the cache of
 * plans per binding; nrt_program_prepare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/program.h"

#define ARENA_ALIGN ((size_t)64)

void rt_plan_release(rt_plan *plan) {
  if (!plan || atomic_fetch_sub(&plan->refs, 1) != 1) return;
  free(plan->values);
  free(plan->numel);
  free(plan->offset);
  free(plan->bytes);
  free(plan->input_need);
  free(plan->input_need_operand);
  free(plan);
}

nrt_status rt_graph_plan_check(int32_t n, const size_t *offset, const size_t *bytes,
                               const int32_t *first, const int32_t *last, size_t arena_bytes) {
  for (int32_t i = 0; i < n; i++) {
    if (!bytes[i]) continue;
    if (offset[i] % ARENA_ALIGN || offset[i] > arena_bytes || bytes[i] > arena_bytes - offset[i])
      return rt_fail(NRT_ERROR_INTERNAL, "memory plan: buffer %d (%zu bytes at %zu) is outside the "
                     "%zu-byte arena or misaligned", i, bytes[i], offset[i], arena_bytes);
    for (int32_t j = i + 1; j < n; j++) {
      if (!bytes[j] || first[i] > last[j] || first[j] > last[i]) continue;
      if (offset[i] < offset[j] + bytes[j] && offset[j] < offset[i] + bytes[i])
        return rt_fail(NRT_ERROR_INTERNAL, "memory plan: buffers %d and %d are alive at once "
                       "(steps %d-%d, %d-%d) and overlap in memory", i, j, first[i], last[i],
                       first[j], last[j]);
    }
  }
  return NRT_SUCCESS;
}

/* ---- packing ------------------------------------------------------------ */

typedef struct placed {
  size_t offset, bytes;
} placed;

typedef struct sized {
  size_t bytes;
  int32_t buffer;
} sized;

static int by_size(const void *a, const void *b) {
  const sized *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->buffer < y->buffer ? -1 : x->buffer > y->buffer;
}

static int by_offset(const void *a, const void *b) {
  const placed *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* First fit by decreasing size: each temporary goes at the lowest offset
 * free of the ones already placed whose lifetimes meet its own. */
static nrt_status pack(const struct nrt_program *p, rt_plan *plan) {
  const struct nrt_graph *g = p->graph;
  int32_t n = 0;
  sized *order = malloc((g->num_buffers ? g->num_buffers : 1) * sizeof *order);
  placed *near = malloc((g->num_buffers ? g->num_buffers : 1) * sizeof *near);
  if (!order || !near) {
    free(order);
    free(near);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_prepare: out of host memory");
  }
  for (uint32_t b = 0; b < g->num_buffers; b++)
    if (plan->bytes[b]) order[n++] = (sized){plan->bytes[b], (int32_t)b};
  qsort(order, (size_t)n, sizeof *order, by_size);
  size_t arena = 0;
  nrt_status s = NRT_SUCCESS;
  for (int32_t i = 0; i < n && !s; i++) {
    int32_t b = order[i].buffer;
    int32_t m = 0;
    for (int32_t j = 0; j < i; j++) {
      int32_t o = order[j].buffer;
      if (p->first_step[o] <= p->last_step[b] && p->first_step[b] <= p->last_step[o])
        near[m++] = (placed){plan->offset[o], plan->bytes[o]};
    }
    qsort(near, (size_t)m, sizeof *near, by_offset);
    size_t at = 0;
    for (int32_t j = 0; j < m; j++) {
      if (near[j].offset >= at && near[j].offset - at >= plan->bytes[b]) break;
      if (near[j].offset + near[j].bytes > at) at = near[j].offset + near[j].bytes;
    }
    plan->offset[b] = at;
    if (at > SIZE_MAX - plan->bytes[b])
      s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_prepare: the arena's size overflows");
    else if (at + plan->bytes[b] > arena)
      arena = at + plan->bytes[b];
  }
  free(order);
  free(near);
  plan->arena_bytes = arena;
  return s;
}

/* ---- a binding's plan ----------------------------------------------------- */

#define PREP_FAIL(...) rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_prepare: " __VA_ARGS__)

static nrt_status check_view(const struct nrt_graph *g, rt_plan *plan, uint32_t node, int k) {
  const rt_gnode *n = &g->nodes[node];
  const rt_goperand *o = rt_gnode_operand(g, n, k);
  const char *name = rt_gnode_name(n->code);
  int64_t numel = 1;
  for (int d = 0; d < o->ndim; d++) {
    int64_t size = plan->values[o->shape_expr[d]];
    if (size < 0)
      return PREP_FAIL("node %u (%s) operand %d: size %lld in dim %d", node, name, k, (long long)size, d);
    if (__builtin_mul_overflow(numel, size, &numel))
      return PREP_FAIL("node %u (%s) operand %d: its element count overflows", node, name, k);
  }
  if (o->is_immediate) {
    for (int d = 0; d < o->ndim; d++)
      if (plan->values[o->stride_expr[d]] != 0)
        return PREP_FAIL("node %u (%s) operand %d: an immediate with stride %lld in dim %d (must be 0)",
                         node, name, k, (long long)plan->values[o->stride_expr[d]], d);
    return NRT_SUCCESS;
  }
  if (o->buffer < 0) {
    if (numel != 0)
      return PREP_FAIL("node %u (%s) operand %d: an absent operand with %lld elements (must be 0)",
                       node, name, k, (long long)numel);
    return NRT_SUCCESS;
  }
  if (n->code == (nrt_op_code)NRT_GRAPH_NKI) {
    /* The program reads and writes its HBM tensors as flat bytes. */
    int32_t t;
    nrt_nc_tensor rec;
    memcpy(&t, rt_gnode_blob(g, n, 2)->data + 4 * k, 4);
    memcpy(&rec, rt_gnode_blob(g, n, 1)->data + (size_t)t * sizeof rec, sizeof rec);
    int64_t expect = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
      if (plan->values[o->shape_expr[d]] != 1 && plan->values[o->stride_expr[d]] != expect)
        return PREP_FAIL("node %u (%s) operand %d: not row-major contiguous", node, name, k);
      expect *= plan->values[o->shape_expr[d]];
    }
    if ((double)numel * (double)nrt_dtype_size(o->dtype) < (double)rec.bytes)
      return PREP_FAIL("node %u (%s) operand %d: %lld elements hold fewer than its tensor's %lld bytes",
                       node, name, k, (long long)numel, (long long)rec.bytes);
  }
  if (numel == 0) return NRT_SUCCESS; /* touches nothing */
  int64_t lo = plan->values[o->offset_expr], hi = lo;
  for (int d = 0; d < o->ndim; d++) {
    int64_t span;
    if (__builtin_mul_overflow(plan->values[o->shape_expr[d]] - 1, plan->values[o->stride_expr[d]], &span) ||
        (span < 0 ? __builtin_add_overflow(lo, span, &lo) : __builtin_add_overflow(hi, span, &hi)))
      return PREP_FAIL("node %u (%s) operand %d: its extent overflows 64 bits", node, name, k);
  }
  const rt_gbuffer *b = &g->buffers[o->buffer];
  if (lo < 0)
    return PREP_FAIL("node %u (%s) operand %d: reaches element %lld of buffer %d, before its start",
                     node, name, k, (long long)lo, o->buffer);
  if (b->kind == NRT_BUFFER_INPUT) {
    if (hi + 1 > plan->input_need[b->slot]) {
      plan->input_need[b->slot] = hi + 1;
      plan->input_need_operand[b->slot] = n->first_operand + (uint32_t)k;
    }
  } else if (hi >= plan->numel[o->buffer]) {
    return PREP_FAIL("node %u (%s) operand %d: reaches element %lld of buffer %d, which has %lld",
                     node, name, k, (long long)hi, o->buffer, (long long)plan->numel[o->buffer]);
  }
  return NRT_SUCCESS;
}

static nrt_status build_plan(const struct nrt_program *p, const int64_t *symbols, rt_plan **out) {
  const struct nrt_graph *g = p->graph;
  rt_plan *plan = calloc(1, sizeof *plan);
  if (!plan) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_prepare: out of host memory");
  atomic_init(&plan->refs, 1);
  atomic_init(&plan->fused_checked, 0);
  size_t nb = g->num_buffers ? g->num_buffers : 1, ni = g->num_inputs ? g->num_inputs : 1;
  plan->values = malloc((g->num_exprs ? g->num_exprs : 1) * sizeof *plan->values);
  plan->numel = malloc(nb * sizeof *plan->numel);
  plan->offset = malloc(nb * sizeof *plan->offset);
  plan->bytes = calloc(nb, sizeof *plan->bytes);
  plan->input_need = calloc(ni, sizeof *plan->input_need);
  plan->input_need_operand = calloc(ni, sizeof *plan->input_need_operand);
  nrt_status s = NRT_SUCCESS;
  if (!plan->values || !plan->numel || !plan->offset || !plan->bytes || !plan->input_need ||
      !plan->input_need_operand) {
    s = rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_program_prepare: out of host memory");
    goto done;
  }
  if (g->num_symbols) memcpy(plan->symbols, symbols, g->num_symbols * sizeof *symbols);
  for (uint32_t e = 0; e < g->num_exprs; e++) {
    const char *why = rt_expr_eval(&g->exprs[e], plan->symbols, &plan->values[e]);
    if (why) {
      rt_sbuf text = {0};
      rt_expr_print(&text, &g->exprs[e]);
      s = PREP_FAIL("expr %u (%s): %s", e, text.text ? text.text : "?", why);
      free(text.text);
      goto done;
    }
  }
  for (uint32_t b = 0; b < g->num_buffers; b++) {
    const rt_gbuffer *x = &g->buffers[b];
    int64_t numel = plan->values[x->numel_expr];
    size_t bytes;
    plan->numel[b] = numel;
    plan->offset[b] = SIZE_MAX;
    if (numel < 0) {
      s = PREP_FAIL("buffer %u: %lld elements", b, (long long)numel);
      goto done;
    }
    if (__builtin_mul_overflow((size_t)numel, nrt_dtype_size(x->dtype), &bytes) ||
        bytes > SIZE_MAX - ARENA_ALIGN) {
      s = PREP_FAIL("buffer %u: %lld elements overflow its size in bytes", b, (long long)numel);
      goto done;
    }
    /* Arena space: temporaries in memory that some step touches. */
    if (x->kind == NRT_BUFFER_TEMP && p->first_step[b] >= 0)
      plan->bytes[b] = (bytes + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
  }
  for (uint32_t i = 0; i < g->num_nodes && !s; i++)
    for (int k = 0; k < g->nodes[i].num_operands && !s; k++) s = check_view(g, plan, i, k);
  for (uint32_t slot = 0; slot < g->num_inputs && !s; slot++) {
    size_t bytes;
    if (__builtin_mul_overflow((size_t)plan->input_need[slot],
                               nrt_dtype_size(g->buffers[g->input_buffer[slot]].dtype), &bytes))
      s = PREP_FAIL("input %u: its views reach beyond 64-bit addresses", slot);
  }
  /* A result written in place over an input takes that input's space. */
  for (uint32_t b = 0; b < g->num_buffers && !s; b++) {
    if (p->share[b] < 0) continue;
    int32_t o = rt_program_space_owner(p, (int32_t)b);
    if (plan->bytes[b] > plan->bytes[o]) plan->bytes[o] = plan->bytes[b];
    plan->bytes[b] = 0;
  }
  if (s || (s = pack(p, plan))) goto done;
  for (uint32_t b = 0; b < g->num_buffers; b++)
    if (p->share[b] >= 0) plan->offset[b] = plan->offset[rt_program_space_owner(p, (int32_t)b)];
  /* The packer's own check, where it is cheap. */
  if (g->num_buffers <= 2048)
    s = rt_graph_plan_check((int32_t)g->num_buffers, plan->offset, plan->bytes, p->first_step,
                            p->last_step, plan->arena_bytes);
done:
  if (s) {
    rt_plan_release(plan);
    return s;
  }
  *out = plan;
  return NRT_SUCCESS;
}

/* ---- the cache ------------------------------------------------------------ */

static int binding_is(const rt_plan *plan, const int64_t *symbols, uint32_t n) {
  return plan && (n == 0 || !memcmp(plan->symbols, symbols, n * sizeof *symbols));
}

static rt_plan *cache_find(struct nrt_program *p, const int64_t *symbols) {
  for (int i = 0; i < RT_PLAN_CACHE; i++)
    if (binding_is(p->cache[i], symbols, p->graph->num_symbols)) {
      p->cache_used[i] = ++p->clock;
      atomic_fetch_add(&p->cache[i]->refs, 1);
      return p->cache[i];
    }
  return NULL;
}

nrt_status rt_program_plan_get(struct nrt_program *p, const int64_t *symbols, int32_t num_symbols,
                               rt_plan **out) {
  if (num_symbols < 0 || (uint32_t)num_symbols != p->graph->num_symbols)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "compiled graph %s: %d symbol values for %u symbols",
                   p->graph->name, num_symbols, p->graph->num_symbols);
  if (num_symbols && !symbols)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "compiled graph %s: NULL symbol values", p->graph->name);
  pthread_mutex_lock(&p->lock);
  rt_plan *plan = cache_find(p, symbols);
  pthread_mutex_unlock(&p->lock);
  if (plan) {
    *out = plan;
    return NRT_SUCCESS;
  }
  /* Built outside the lock; a binding built twice at once is cached once. */
  rt_plan *built = NULL;
  nrt_status s = build_plan(p, symbols, &built);
  if (s) return s;
  pthread_mutex_lock(&p->lock);
  if ((plan = cache_find(p, symbols))) {
    pthread_mutex_unlock(&p->lock);
    rt_plan_release(built);
    *out = plan;
    return NRT_SUCCESS;
  }
  int victim = 0; /* an empty entry, else the least recently used */
  for (int i = 0; i < RT_PLAN_CACHE; i++) {
    if (!p->cache[i]) {
      victim = i;
      break;
    }
    if (p->cache_used[i] < p->cache_used[victim]) victim = i;
  }
  rt_plan_release(p->cache[victim]);
  p->cache[victim] = built;
  p->cache_used[victim] = ++p->clock;
  atomic_fetch_add(&built->refs, 1); /* the caller's */
  pthread_mutex_unlock(&p->lock);
  *out = built;
  return NRT_SUCCESS;
}

nrt_status rt_plan_check_inputs(const struct nrt_program *p, const rt_plan *plan,
                                const int64_t *input_capacity, const char *caller) {
  const struct nrt_graph *g = p->graph;
  if (g->num_inputs && !input_capacity)
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: NULL input capacities", caller);
  for (uint32_t slot = 0; slot < g->num_inputs; slot++) {
    if (plan->input_need[slot] <= input_capacity[slot]) continue;
    uint32_t id = plan->input_need_operand[slot], node = 0;
    while (node + 1 < g->num_nodes && g->nodes[node + 1].first_operand <= id) node++;
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT,
                   "%s: input %u (buffer %d) holds %lld elements, but node %u (%s) operand %u "
                   "reaches element %lld",
                   caller, slot, g->input_buffer[slot], (long long)input_capacity[slot], node,
                   rt_gnode_name(g->nodes[node].code), id - g->nodes[node].first_operand,
                   (long long)(plan->input_need[slot] - 1));
  }
  return NRT_SUCCESS;
}

nrt_status nrt_program_prepare(nrt_program_t p, const int64_t *symbols, int32_t num_symbols,
                               const int64_t *input_capacity, size_t *arena_bytes,
                               int64_t *output_numels) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!p || !arena_bytes || (p->graph->num_outputs && !output_numels))
    return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_program_prepare: NULL argument");
  rt_plan *plan;
  if ((s = rt_program_plan_get(p, symbols, num_symbols, &plan))) return s;
  if (!(s = rt_plan_check_inputs(p, plan, input_capacity, "nrt_program_prepare"))) {
    *arena_bytes = plan->arena_bytes;
    for (uint32_t slot = 0; slot < p->graph->num_outputs; slot++)
      output_numels[slot] = plan->numel[p->graph->output_buffer[slot]];
  }
  rt_plan_release(plan);
  return s;
}
