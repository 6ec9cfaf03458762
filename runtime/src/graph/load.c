/* The loader: parses the binary form of graph.h with a bounded reader and
 * validates every field. Counts are checked against the bytes left before
 * anything is allocated for them, so a corrupt count fails instead of
 * allocating: what is allocated stays within a small multiple of the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/crc32.h"
#include "graph/ir.h"

typedef struct reader {
  const uint8_t *p;
  size_t size, at;
} reader;

#define BAD(...) rt_fail(NRT_ERROR_INVALID_DATA, "nrt_graph_load: " __VA_ARGS__)

static nrt_status need(const reader *r, size_t bytes, const char *what) {
  if (r->size - r->at < bytes)
    return BAD("truncated: %s needs %zu bytes at offset %zu, %zu left", what, bytes, r->at,
               r->size - r->at);
  return NRT_SUCCESS;
}

static uint64_t take(reader *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->at + (size_t)i] << (8 * i);
  r->at += (size_t)bytes;
  return v;
}

static nrt_status u32(reader *r, const char *what, uint32_t *v) {
  nrt_status s = need(r, 4, what);
  if (!s) *v = (uint32_t)take(r, 4);
  return s;
}

static nrt_status i32(reader *r, const char *what, int32_t *v) {
  uint32_t u = 0;
  nrt_status s = u32(r, what, &u);
  *v = (int32_t)u;
  return s;
}

/* A count of items of at least min_bytes each, at most max of them. */
static nrt_status count(reader *r, const char *what, uint32_t max, size_t min_bytes, uint32_t *n) {
  nrt_status s = u32(r, what, n);
  if (s) return s;
  if (*n > max) return BAD("%s %u exceeds the limit %u", what, *n, max);
  if ((size_t)*n * min_bytes > r->size - r->at)
    return BAD("%s %u needs at least %zu bytes at offset %zu, %zu left", what, *n,
               (size_t)*n * min_bytes, r->at, r->size - r->at);
  return NRT_SUCCESS;
}

/* { i32 is_float; f64 f; i64 i } */
static nrt_status scalar(reader *r, const char *what, nrt_scalar *x) {
  nrt_status s = need(r, 20, what);
  if (s) return s;
  x->is_float = (int32_t)take(r, 4);
  uint64_t bits = take(r, 8);
  memcpy(&x->f, &bits, 8);
  x->i = (int64_t)take(r, 8);
  return NRT_SUCCESS;
}

static void destroy(struct nrt_graph *g) {
  for (uint32_t b = 0; g->blobs && b < g->num_blobs; b++) free(g->blobs[b].data);
  free(g->blobs);
  free(g->exprs);
  free(g->terms);
  free(g->buffers);
  free(g->nodes);
  free(g->operands);
  free(g->input_buffer);
  free(g->output_buffer);
  free(g);
}

void rt_graph_retain(struct nrt_graph *g) { atomic_fetch_add(&g->refs, 1); }

void rt_graph_release(struct nrt_graph *g) {
  if (g && atomic_fetch_sub(&g->refs, 1) == 1) destroy(g);
}

void nrt_graph_destroy(nrt_graph_t g) { rt_graph_release(g); }

static nrt_status read_exprs(reader *r, struct nrt_graph *g) {
  nrt_status s = count(r, "expression count", NRT_GRAPH_MAX_EXPRS, 4, &g->num_exprs);
  if (s) return s;
  /* Each term takes 12 bytes of input: what is left bounds the total. */
  size_t max_terms = (r->size - r->at) / 12;
  g->exprs = calloc(g->num_exprs ? g->num_exprs : 1, sizeof *g->exprs);
  g->terms = malloc((max_terms ? max_terms : 1) * sizeof *g->terms);
  if (!g->exprs || !g->terms) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  size_t used = 0;
  for (uint32_t e = 0; e < g->num_exprs; e++) {
    uint32_t n;
    if ((s = u32(r, "expression length", &n))) return s;
    if (n == 0 || n > NRT_GRAPH_MAX_EXPR_TERMS)
      return BAD("expr %u: %u terms; 1 to %d allowed", e, n, NRT_GRAPH_MAX_EXPR_TERMS);
    if ((s = need(r, (size_t)n * 12, "expression terms"))) return s;
    for (uint32_t t = 0; t < n; t++) {
      g->terms[used + t].op = (uint32_t)take(r, 4);
      g->terms[used + t].arg = (int64_t)take(r, 8);
    }
    g->exprs[e].n = n;
    used += n;
  }
  if (used && used < max_terms) {
    rt_expr_term *fit = realloc(g->terms, used * sizeof *fit);
    if (fit) g->terms = fit;
  }
  /* Pointers only once the pool is complete. */
  used = 0;
  for (uint32_t e = 0; e < g->num_exprs; e++) {
    g->exprs[e].terms = g->terms + used;
    used += g->exprs[e].n;
    char why[160];
    if (rt_expr_check(&g->exprs[e], g->num_symbols, why, sizeof why)) return BAD("expr %u: %s", e, why);
  }
  return NRT_SUCCESS;
}

static nrt_status check_expr_id(const struct nrt_graph *g, uint32_t id, const char *where, uint32_t a,
                                const char *field) {
  if (id >= g->num_exprs)
    return BAD("%s %u: %s names expr %u of %u", where, a, field, id, g->num_exprs);
  return NRT_SUCCESS;
}

static nrt_status read_buffers(reader *r, struct nrt_graph *g) {
  nrt_status s = count(r, "buffer count", NRT_GRAPH_MAX_BUFFERS, 16, &g->num_buffers);
  if (s) return s;
  g->buffers = calloc(g->num_buffers ? g->num_buffers : 1, sizeof *g->buffers);
  if (!g->buffers) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  for (uint32_t b = 0; b < g->num_buffers; b++) {
    rt_gbuffer *x = &g->buffers[b];
    int32_t dtype = 0;
    uint32_t kind = 0;
    u32(r, "buffer", &kind); /* the count guaranteed the 16 bytes */
    i32(r, "buffer", &dtype);
    u32(r, "buffer", &x->slot);
    u32(r, "buffer", &x->numel_expr);
    if (kind > NRT_BUFFER_TEMP) return BAD("buffer %u: unknown kind %u", b, kind);
    if (dtype < 0 || dtype >= NRT_DTYPE_COUNT) return BAD("buffer %u: invalid dtype %d", b, dtype);
    x->kind = kind;
    x->dtype = (nrt_dtype)dtype;
    if ((s = check_expr_id(g, x->numel_expr, "buffer", b, "numel"))) return s;
    if (kind == NRT_BUFFER_INPUT) g->num_inputs++;
    else if (kind == NRT_BUFFER_OUTPUT) g->num_outputs++;
    else if (x->slot != 0) return BAD("buffer %u: a temporary with slot %u (must be 0)", b, x->slot);
  }
  /* Slots: 0..I-1 and 0..O-1, each once. */
  g->input_buffer = malloc((g->num_inputs ? g->num_inputs : 1) * sizeof(int32_t));
  g->output_buffer = malloc((g->num_outputs ? g->num_outputs : 1) * sizeof(int32_t));
  if (!g->input_buffer || !g->output_buffer)
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  for (uint32_t i = 0; i < g->num_inputs; i++) g->input_buffer[i] = -1;
  for (uint32_t i = 0; i < g->num_outputs; i++) g->output_buffer[i] = -1;
  for (uint32_t b = 0; b < g->num_buffers; b++) {
    const rt_gbuffer *x = &g->buffers[b];
    if (x->kind == NRT_BUFFER_TEMP) continue;
    int in = x->kind == NRT_BUFFER_INPUT;
    uint32_t n = in ? g->num_inputs : g->num_outputs;
    int32_t *slots = in ? g->input_buffer : g->output_buffer;
    if (x->slot >= n)
      return BAD("buffer %u: %s slot %u, but the graph has %u %ss", b, in ? "input" : "output",
                 x->slot, n, in ? "input" : "output");
    if (slots[x->slot] >= 0)
      return BAD("buffer %u: %s slot %u is also buffer %d's", b, in ? "input" : "output", x->slot,
                 slots[x->slot]);
    slots[x->slot] = (int32_t)b;
  }
  return NRT_SUCCESS;
}

static nrt_status read_operand(reader *r, struct nrt_graph *g, uint32_t node, int k, int immediate,
                               rt_goperand *o) {
  int32_t dtype;
  uint32_t ndim;
  nrt_status s;
  if ((s = i32(r, "operand buffer", &o->buffer)) || (s = i32(r, "operand dtype", &dtype)) ||
      (s = u32(r, "operand ndim", &ndim)) || (s = u32(r, "operand offset", &o->offset_expr)))
    return s;
  if (o->buffer < -1 || o->buffer >= (int64_t)g->num_buffers)
    return BAD("node %u operand %d: buffer %d of %u", node, k, o->buffer, g->num_buffers);
  if (dtype < 0 || dtype >= NRT_DTYPE_COUNT)
    return BAD("node %u operand %d: invalid dtype %d", node, k, dtype);
  if (ndim > NRT_MAX_DIMS)
    return BAD("node %u operand %d: %u dimensions; at most %d", node, k, ndim, NRT_MAX_DIMS);
  o->dtype = (nrt_dtype)dtype;
  o->ndim = (int32_t)ndim;
  if ((s = need(r, (size_t)ndim * 8, "operand shape and strides"))) return s;
  for (uint32_t d = 0; d < ndim; d++) o->shape_expr[d] = (uint32_t)take(r, 4);
  for (uint32_t d = 0; d < ndim; d++) o->stride_expr[d] = (uint32_t)take(r, 4);
  if (o->offset_expr >= g->num_exprs)
    return BAD("node %u operand %d: offset names expr %u of %u", node, k, o->offset_expr, g->num_exprs);
  for (uint32_t d = 0; d < ndim; d++)
    if (o->shape_expr[d] >= g->num_exprs || o->stride_expr[d] >= g->num_exprs)
      return BAD("node %u operand %d: dim %u names expr %u of %u", node, k, d,
                 o->shape_expr[d] >= g->num_exprs ? o->shape_expr[d] : o->stride_expr[d],
                 g->num_exprs);
  o->is_immediate = immediate;
  if (immediate) {
    if ((s = scalar(r, "immediate", &o->immediate))) return s;
    if (o->immediate.is_float != 0 && o->immediate.is_float != 1)
      return BAD("node %u operand %d: immediate is_float %d (0 or 1)", node, k, o->immediate.is_float);
    if (o->buffer != -1)
      return BAD("node %u operand %d: an immediate names buffer %d (must be -1)", node, k, o->buffer);
  } else if (o->buffer >= 0 && g->buffers[o->buffer].dtype != o->dtype) {
    return BAD("node %u operand %d: a %s view of buffer %d, which is %s", node, k,
               nrt_dtype_name(o->dtype), o->buffer, nrt_dtype_name(g->buffers[o->buffer].dtype));
  }
  return NRT_SUCCESS;
}

static nrt_status read_nodes(reader *r, struct nrt_graph *g) {
  nrt_status s = count(r, "node count", NRT_GRAPH_MAX_NODES, 24, &g->num_nodes);
  if (s) return s;
  /* An operand takes at least 16 bytes of input. */
  size_t max_operands = (r->size - r->at) / 16;
  if (max_operands > (size_t)g->num_nodes * NRT_MAX_OPERANDS)
    max_operands = (size_t)g->num_nodes * NRT_MAX_OPERANDS;
  g->nodes = calloc(g->num_nodes ? g->num_nodes : 1, sizeof *g->nodes);
  g->operands = calloc(max_operands ? max_operands : 1, sizeof *g->operands);
  uint8_t *written = calloc(g->num_buffers ? g->num_buffers : 1, 1);
  if (!g->nodes || !g->operands || !written) {
    free(written);
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  }
  for (uint32_t i = 0; i < g->num_nodes && !s; i++) {
    rt_gnode *n = &g->nodes[i];
    uint32_t code, nops, nouts, nscalars;
    int32_t compute;
    if ((s = u32(r, "node", &code)) || (s = i32(r, "node", &compute)) || (s = u32(r, "node", &nops)) ||
        (s = u32(r, "node", &nouts)) || (s = u32(r, "node", &nscalars)) ||
        (s = u32(r, "node", &n->immediate_mask)))
      break;
    if (code >= NRT_OP_COUNT && code != NRT_GRAPH_NKI) s = BAD("node %u: unknown op code %u", i, code);
    else if (compute < 0 || compute >= NRT_DTYPE_COUNT)
      s = BAD("node %u (%s): invalid compute dtype %d", i, rt_gnode_name(code), compute);
    else if (nops > NRT_MAX_OPERANDS)
      s = BAD("node %u (%s): %u operands; at most %d", i, rt_gnode_name(code), nops, NRT_MAX_OPERANDS);
    else if (nouts > nops)
      s = BAD("node %u (%s): %u outputs of %u operands", i, rt_gnode_name(code), nouts, nops);
    else if (nscalars > NRT_MAX_SCALARS)
      s = BAD("node %u (%s): %u scalars; at most %d", i, rt_gnode_name(code), nscalars, NRT_MAX_SCALARS);
    else if (n->immediate_mask >> nops)
      s = BAD("node %u (%s): immediate mask 0x%x names missing operands", i, rt_gnode_name(code),
              n->immediate_mask);
    else if (n->immediate_mask & ((1u << (code == NRT_OP_COPY && nouts == 0 && nops ? 1 : nouts)) - 1u))
      s = BAD("node %u (%s): an output is immediate (mask 0x%x)", i, rt_gnode_name(code),
              n->immediate_mask);
    if (s) break;
    n->code = (nrt_op_code)code;
    n->compute_dtype = (nrt_dtype)compute;
    n->num_operands = (int32_t)nops;
    n->num_outputs = (int32_t)nouts;
    n->num_scalars = (int32_t)nscalars;
    for (uint32_t j = 0; j < nscalars && !s; j++) {
      if ((s = scalar(r, "scalar", &n->scalars[j]))) break;
      if (n->scalars[j].is_float != 0 && n->scalars[j].is_float != 1)
        s = BAD("node %u scalar %u: is_float %d (0 or 1)", i, j, n->scalars[j].is_float);
    }
    if (s) break;
    if (g->num_operands + nops > max_operands) {
      s = need(r, (size_t)nops * 16, "operands"); /* fails: fewer bytes than operands */
      if (!s) s = rt_fail(NRT_ERROR_INTERNAL, "nrt_graph_load: operand bound broken");
      break;
    }
    n->first_operand = g->num_operands;
    g->num_operands += nops;
    for (int k = 0; k < (int)nops && !s; k++)
      s = read_operand(r, g, i, k, (n->immediate_mask >> k) & 1u, &g->operands[n->first_operand + (uint32_t)k]);
    if (s) break;
    /* The storage dtypes reach only the ops that take them (op.h). */
    for (int k = 0; k < (int)nops && !s && code < NRT_OP_COUNT; k++) {
      nrt_dtype dt = g->operands[n->first_operand + (uint32_t)k].dtype;
      if (!nrt_op_accepts_dtype((nrt_op_code)code, dt))
        s = BAD("node %u (%s) operand %d: dtype %s is not supported by this op", i,
                rt_gnode_name(code), k, nrt_dtype_name(dt));
    }
    if (!s && code < NRT_OP_COUNT && !nrt_op_accepts_dtype((nrt_op_code)code, n->compute_dtype))
      s = BAD("node %u (%s): compute dtype %s is not supported by this op", i, rt_gnode_name(code),
              nrt_dtype_name(n->compute_dtype));
    if (s) break;
    /* Inputs first: a node cannot read a temporary only it writes. */
    int32_t writes = rt_gnode_writes(n);
    for (int k = writes; k < (int)nops && !s; k++) {
      int32_t b = g->operands[n->first_operand + (uint32_t)k].buffer;
      if (b >= 0 && g->buffers[b].kind == NRT_BUFFER_TEMP && !written[b])
        s = BAD("node %u (%s) operand %d reads temporary buffer %d before any node writes it", i,
                rt_gnode_name(code), k, b);
    }
    for (int k = 0; k < writes; k++) {
      int32_t b = g->operands[n->first_operand + (uint32_t)k].buffer;
      if (b >= 0) written[b] = 1;
    }
  }
  free(written);
  /* The bound was generous: keep what the operands use. */
  if (!s && g->num_operands && g->num_operands < max_operands) {
    rt_goperand *fit = realloc(g->operands, g->num_operands * sizeof *fit);
    if (fit) g->operands = fit;
  }
  return s;
}

static nrt_status read_blobs(reader *r, struct nrt_graph *g) {
  nrt_status s = count(r, "blob count", NRT_GRAPH_MAX_BLOBS, 4, &g->num_blobs);
  if (s) return s;
  g->blobs = calloc(g->num_blobs ? g->num_blobs : 1, sizeof *g->blobs);
  if (!g->blobs) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  for (uint32_t b = 0; b < g->num_blobs; b++) {
    uint32_t len;
    if ((s = u32(r, "blob length", &len)) || (s = need(r, len, "blob"))) return s;
    g->blobs[b].data = malloc(len ? len : 1);
    if (!g->blobs[b].data) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
    memcpy(g->blobs[b].data, r->p + r->at, len);
    g->blobs[b].len = len;
    r->at += len;
  }
  return NRT_SUCCESS;
}

/* An NKI node: three integer blob indices, well-formed records, operands
 * that are views, each bound to a distinct HBM tensor of the program. */
static nrt_status check_nki_node(const struct nrt_graph *g, uint32_t i) {
  const rt_gnode *n = &g->nodes[i];
  if (n->num_scalars != 3 || n->immediate_mask)
    return BAD("node %u (nki_kernel): %d scalars and immediate mask 0x%x (3 blob indices, no "
               "immediates)", i, n->num_scalars, n->immediate_mask);
  for (int k = 0; k < 3; k++)
    if (n->scalars[k].is_float || n->scalars[k].i < 0 || n->scalars[k].i >= g->num_blobs)
      return BAD("node %u (nki_kernel): scalar %d is not a blob index (%u blobs)", i, k, g->num_blobs);
  const rt_gblob *insts = rt_gnode_blob(g, n, 0), *tensors = rt_gnode_blob(g, n, 1),
                 *map = rt_gnode_blob(g, n, 2);
  if (!insts->len || insts->len % sizeof(nrt_nc_inst) || tensors->len % sizeof(nrt_nc_tensor) ||
      map->len != (uint32_t)n->num_operands * 4u)
    return BAD("node %u (nki_kernel): blobs of %u, %u and %u bytes are not %zu-byte instructions, "
               "%zu-byte tensors and one int32 per operand", i, insts->len, tensors->len, map->len,
               sizeof(nrt_nc_inst), sizeof(nrt_nc_tensor));
  uint32_t num_tensors = tensors->len / (uint32_t)sizeof(nrt_nc_tensor);
  for (int k = 0; k < n->num_operands; k++) {
    int32_t t;
    memcpy(&t, map->data + 4 * k, 4);
    const rt_goperand *o = rt_gnode_operand(g, n, k);
    nrt_nc_tensor rec;
    if (t >= 0 && (uint32_t)t < num_tensors) memcpy(&rec, tensors->data + (size_t)t * sizeof rec, sizeof rec);
    if (t < 0 || (uint32_t)t >= num_tensors || rec.buffer != NRT_NC_HBM)
      return BAD("node %u (nki_kernel) operand %d: binds tensor %d, not an HBM tensor of the "
                 "program's %u", i, k, t, num_tensors);
    if (o->buffer < 0) return BAD("node %u (nki_kernel) operand %d: not a view of a buffer", i, k);
    for (int j = 0; j < k; j++) {
      int32_t u;
      memcpy(&u, map->data + 4 * j, 4);
      if (u == t) return BAD("node %u (nki_kernel): operands %d and %d bind tensor %d", i, j, k, t);
    }
  }
  return NRT_SUCCESS;
}

nrt_status nrt_graph_load(const void *data, size_t size, nrt_graph_t *out) {
  nrt_status s = rt_ensure_init();
  if (s) return s;
  if (!out || (!data && size)) return rt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_graph_load: NULL argument");
  *out = NULL;
  reader r = {.p = data, .size = size, .at = 0};
  if (size < 16) return BAD("%zu bytes are too few for a graph", size);
  uint32_t magic = (uint32_t)take(&r, 4), version = (uint32_t)take(&r, 4);
  if (magic != NRT_GRAPH_MAGIC) return BAD("bad magic 0x%08x (expected 0x%08x, \"NRTG\")", magic, NRT_GRAPH_MAGIC);
  if (version != NRT_GRAPH_VERSION)
    return BAD("version %u; this runtime reads version %u", version, NRT_GRAPH_VERSION);
  r.size = size - 4; /* the trailer is not part of the body */
  uint32_t stored = 0;
  for (int i = 0; i < 4; i++) stored |= (uint32_t)r.p[size - 4 + (size_t)i] << (8 * i);
  uint32_t crc = rt_crc32(data, size - 4);
  if (crc != stored) return BAD("bad checksum: CRC-32 0x%08x, trailer says 0x%08x", crc, stored);

  struct nrt_graph *g = calloc(1, sizeof *g);
  if (!g) return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "nrt_graph_load: out of host memory");
  atomic_init(&g->refs, 1);
  uint32_t name_len = 0;
  if ((s = u32(&r, "symbol count", &g->num_symbols))) goto fail;
  if (g->num_symbols > NRT_GRAPH_MAX_SYMBOLS) {
    s = BAD("%u symbols; at most %d", g->num_symbols, NRT_GRAPH_MAX_SYMBOLS);
    goto fail;
  }
  if ((s = read_exprs(&r, g)) || (s = read_buffers(&r, g)) || (s = read_nodes(&r, g)) ||
      (s = read_blobs(&r, g)))
    goto fail;
  for (uint32_t i = 0; i < g->num_nodes; i++)
    if (g->nodes[i].code == (nrt_op_code)NRT_GRAPH_NKI && (s = check_nki_node(g, i))) goto fail;
  if ((s = u32(&r, "name length", &name_len))) goto fail;
  if (name_len > NRT_GRAPH_MAX_NAME) {
    s = BAD("name of %u bytes; at most %d", name_len, NRT_GRAPH_MAX_NAME);
    goto fail;
  }
  if ((s = need(&r, name_len, "name"))) goto fail;
  if (memchr(r.p + r.at, 0, name_len)) {
    s = BAD("the name contains a NUL byte");
    goto fail;
  }
  memcpy(g->name, r.p + r.at, name_len);
  r.at += name_len;
  if (r.at != r.size) {
    s = BAD("%zu trailing bytes after the name, at offset %zu", r.size - r.at, r.at);
    goto fail;
  }
  *out = g;
  return NRT_SUCCESS;
fail:
  destroy(g);
  return s;
}
