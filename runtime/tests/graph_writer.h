/* A writer of the binary graph form (neuronrt/graph.h) for the tests:
 * expressions built from terms (each kept on the host, so that they
 * compose), buffers, nodes of views and immediates, and the trailer. */
#ifndef NEURONRT_TEST_GRAPH_WRITER_H
#define NEURONRT_TEST_GRAPH_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/crc32.h"
#include "neuronrt/graph.h"

typedef struct gw_bytes {
  uint8_t *p;
  size_t len, cap;
} gw_bytes;

static inline void gw_put(gw_bytes *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) abort();
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
}
static inline void gw_u32(gw_bytes *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  gw_put(b, x, 4);
}
static inline void gw_u64(gw_bytes *b, uint64_t v) {
  gw_u32(b, (uint32_t)v);
  gw_u32(b, (uint32_t)(v >> 32));
}
static inline void gw_scalar(gw_bytes *b, nrt_scalar s) {
  uint64_t bits;
  memcpy(&bits, &s.f, 8);
  gw_u32(b, (uint32_t)s.is_float);
  gw_u64(b, bits);
  gw_u64(b, (uint64_t)s.i);
}

#define GW_MAX_EXPRS 4096

typedef struct gw_term {
  uint32_t op;
  int64_t arg;
} gw_term;

typedef struct gw_graph {
  uint32_t num_symbols, num_exprs, num_buffers, num_nodes;
  uint32_t expr_len[GW_MAX_EXPRS];
  gw_term expr_terms[GW_MAX_EXPRS][NRT_GRAPH_MAX_EXPR_TERMS];
  gw_bytes buffers, nodes;
  char name[256];
} gw_graph;

static gw_graph *gw_new(uint32_t num_symbols, const char *name) {
  gw_graph *g = calloc(1, sizeof *g);
  if (!g) abort();
  g->num_symbols = num_symbols;
  snprintf(g->name, sizeof g->name, "%s", name);
  return g;
}
static inline void gw_free(gw_graph *g) {
  free(g->buffers.p);
  free(g->nodes.p);
  free(g);
}

static inline uint32_t gw_expr(gw_graph *g, uint32_t n, const gw_term *terms) {
  if (g->num_exprs == GW_MAX_EXPRS || n > NRT_GRAPH_MAX_EXPR_TERMS) abort();
  g->expr_len[g->num_exprs] = n;
  memcpy(g->expr_terms[g->num_exprs], terms, n * sizeof *terms);
  return g->num_exprs++;
}
static inline uint32_t gw_const(gw_graph *g, int64_t v) {
  gw_term t = {NRT_EXPR_CONST, v};
  return gw_expr(g, 1, &t);
}
static inline uint32_t gw_sym(gw_graph *g, int64_t k) {
  gw_term t = {NRT_EXPR_SYM, k};
  return gw_expr(g, 1, &t);
}
/* a op b, from the terms of expressions a and b. */
static inline uint32_t gw_bin(gw_graph *g, uint32_t op, uint32_t a, uint32_t b) {
  gw_term t[NRT_GRAPH_MAX_EXPR_TERMS];
  uint32_t na = g->expr_len[a], nb = g->expr_len[b];
  if (na + nb + 1 > NRT_GRAPH_MAX_EXPR_TERMS) abort();
  memcpy(t, g->expr_terms[a], na * sizeof *t);
  memcpy(t + na, g->expr_terms[b], nb * sizeof *t);
  t[na + nb] = (gw_term){op, 0};
  return gw_expr(g, na + nb + 1, t);
}

static inline uint32_t gw_buffer(gw_graph *g, uint32_t kind, nrt_dtype dtype, uint32_t slot, uint32_t numel) {
  gw_u32(&g->buffers, kind);
  gw_u32(&g->buffers, (uint32_t)dtype);
  gw_u32(&g->buffers, slot);
  gw_u32(&g->buffers, numel);
  return g->num_buffers++;
}

typedef struct gw_operand {
  int32_t buffer;
  nrt_dtype dtype;
  uint32_t ndim, offset;
  uint32_t shape[NRT_MAX_DIMS], stride[NRT_MAX_DIMS];
  int immediate;
  nrt_scalar value;
} gw_operand;

/* A contiguous view of buffer at offset, of the given shape expressions. */
static inline gw_operand gw_dense(gw_graph *g, int32_t buffer, nrt_dtype dtype, uint32_t offset, uint32_t ndim,
                           const uint32_t *shape) {
  gw_operand o;
  memset(&o, 0, sizeof o);
  o.buffer = buffer, o.dtype = dtype, o.ndim = ndim, o.offset = offset;
  uint32_t stride = gw_const(g, 1);
  for (int d = (int)ndim - 1; d >= 0; d--) {
    o.shape[d] = shape[d];
    o.stride[d] = stride;
    if (d) stride = d == (int)ndim - 1 ? shape[d] : gw_bin(g, NRT_EXPR_MUL, stride, shape[d]);
  }
  return o;
}
static inline gw_operand gw_imm(gw_graph *g, nrt_dtype dtype, uint32_t ndim, const uint32_t *shape, nrt_scalar v) {
  gw_operand o;
  memset(&o, 0, sizeof o);
  o.buffer = -1, o.dtype = dtype, o.ndim = ndim, o.offset = gw_const(g, 0);
  uint32_t zero = o.offset;
  for (uint32_t d = 0; d < ndim; d++) o.shape[d] = shape[d], o.stride[d] = zero;
  o.immediate = 1;
  o.value = v;
  return o;
}
static inline gw_operand gw_none(gw_graph *g, nrt_dtype dtype) {
  gw_operand o;
  memset(&o, 0, sizeof o);
  o.buffer = -1, o.dtype = dtype, o.ndim = 1, o.offset = gw_const(g, 0);
  o.shape[0] = o.offset;
  o.stride[0] = gw_const(g, 1);
  return o;
}

static inline void gw_node(gw_graph *g, nrt_op_code code, nrt_dtype compute, uint32_t num_outputs,
                    uint32_t num_operands, const gw_operand *ops, uint32_t num_scalars,
                    const nrt_scalar *scalars) {
  gw_bytes *b = &g->nodes;
  uint32_t mask = 0;
  for (uint32_t k = 0; k < num_operands; k++) mask |= ops[k].immediate ? 1u << k : 0;
  gw_u32(b, (uint32_t)code);
  gw_u32(b, (uint32_t)compute);
  gw_u32(b, num_operands);
  gw_u32(b, num_outputs);
  gw_u32(b, num_scalars);
  gw_u32(b, mask);
  for (uint32_t j = 0; j < num_scalars; j++) gw_scalar(b, scalars[j]);
  for (uint32_t k = 0; k < num_operands; k++) {
    const gw_operand *o = &ops[k];
    gw_u32(b, (uint32_t)o->buffer);
    gw_u32(b, (uint32_t)o->dtype);
    gw_u32(b, o->ndim);
    gw_u32(b, o->offset);
    /* ndim may exceed NRT_MAX_DIMS in the tests of malformed graphs */
    for (uint32_t d = 0; d < o->ndim; d++) gw_u32(b, d < NRT_MAX_DIMS ? o->shape[d] : 0);
    for (uint32_t d = 0; d < o->ndim; d++) gw_u32(b, d < NRT_MAX_DIMS ? o->stride[d] : 0);
    if (o->immediate) gw_scalar(b, o->value);
  }
  g->num_nodes++;
}

/* The serialized graph, malloc'd. */
static uint8_t *gw_finish(const gw_graph *g, size_t *size) {
  gw_bytes b = {0};
  gw_u32(&b, NRT_GRAPH_MAGIC);
  gw_u32(&b, NRT_GRAPH_VERSION);
  gw_u32(&b, g->num_symbols);
  gw_u32(&b, g->num_exprs);
  for (uint32_t e = 0; e < g->num_exprs; e++) {
    gw_u32(&b, g->expr_len[e]);
    for (uint32_t t = 0; t < g->expr_len[e]; t++) {
      gw_u32(&b, g->expr_terms[e][t].op);
      gw_u64(&b, (uint64_t)g->expr_terms[e][t].arg);
    }
  }
  gw_u32(&b, g->num_buffers);
  if (g->buffers.len) gw_put(&b, g->buffers.p, g->buffers.len);
  gw_u32(&b, g->num_nodes);
  if (g->nodes.len) gw_put(&b, g->nodes.p, g->nodes.len);
  gw_u32(&b, 0); /* no blobs (NKI programs) */
  uint32_t name_len = (uint32_t)strlen(g->name);
  gw_u32(&b, name_len);
  if (name_len) gw_put(&b, g->name, name_len);
  gw_u32(&b, rt_crc32(b.p, b.len));
  *size = b.len;
  return b.p;
}

/* Rewrites the trailer after a change to the bytes before it. */
static inline void gw_fix_crc(uint8_t *p, size_t size) {
  if (size < 4) return;
  uint32_t c = rt_crc32(p, size - 4);
  for (int i = 0; i < 4; i++) p[size - 4 + (size_t)i] = (uint8_t)(c >> (8 * i));
}

#endif
