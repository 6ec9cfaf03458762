/* The graph's size expressions: postfix programs over int64 (graph.h). */
#ifndef NEURONRT_GRAPH_EXPR_H
#define NEURONRT_GRAPH_EXPR_H

#include <stddef.h>
#include <stdint.h>
#include "graph/sbuf.h"
#include "neuronrt/graph.h"

typedef struct rt_expr_term {
  uint32_t op; /* nrt_expr_op */
  int64_t arg; /* CONST: the value; SYM: the symbol; 0 for the others */
} rt_expr_term;

typedef struct rt_expr {
  uint32_t n;
  const rt_expr_term *terms;
} rt_expr;

/* NULL if e is well formed over num_symbols symbols, else why not (in
 * why, of cap bytes). */
const char *rt_expr_check(const rt_expr *e, uint32_t num_symbols, char *why, size_t cap);

/* Evaluates a checked expression; NULL, or why it fails (overflow,
 * division by zero): a constant string. */
const char *rt_expr_eval(const rt_expr *e, const int64_t *symbols, int64_t *value);

/* Same terms (so the same value for every binding). */
int rt_expr_equal(const rt_expr *a, const rt_expr *b);

/* Appends e as infix text: s0*128, (s0 + 1)//2, max(s0, 4). */
void rt_expr_print(rt_sbuf *b, const rt_expr *e);

/* Python's // and % (rounding toward negative infinity); NULL or why not. */
const char *rt_floordiv(int64_t a, int64_t b, int64_t *q);
const char *rt_floormod(int64_t a, int64_t b, int64_t *r);

#endif
