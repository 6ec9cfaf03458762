/* Size expressions: checks, overflow-checked evaluation, infix text. */
#include "graph/expr.h"
#include <stdio.h>

static int is_binary(uint32_t op) { return op >= NRT_EXPR_ADD && op < NRT_EXPR_OP_COUNT; }

const char *rt_expr_check(const rt_expr *e, uint32_t num_symbols, char *why, size_t cap) {
  if (e->n == 0 || e->n > NRT_GRAPH_MAX_EXPR_TERMS) {
    snprintf(why, cap, "%u terms; 1 to %d allowed", e->n, NRT_GRAPH_MAX_EXPR_TERMS);
    return why;
  }
  uint32_t depth = 0;
  for (uint32_t t = 0; t < e->n; t++) {
    const rt_expr_term *x = &e->terms[t];
    if (x->op >= NRT_EXPR_OP_COUNT) {
      snprintf(why, cap, "term %u has an unknown op %u", t, x->op);
      return why;
    }
    if (x->op == NRT_EXPR_SYM && (x->arg < 0 || x->arg >= (int64_t)num_symbols)) {
      snprintf(why, cap, "term %u names symbol %lld of %u", t, (long long)x->arg, num_symbols);
      return why;
    }
    if (is_binary(x->op)) {
      if (x->arg != 0) {
        snprintf(why, cap, "term %u: a binary op with argument %lld (must be 0)", t,
                 (long long)x->arg);
        return why;
      }
      if (depth < 2) {
        snprintf(why, cap, "term %u pops an empty stack", t);
        return why;
      }
      depth--;
    } else {
      depth++;
    }
  }
  if (depth != 1) {
    snprintf(why, cap, "leaves %u values; must leave one", depth);
    return why;
  }
  return NULL;
}

const char *rt_floordiv(int64_t a, int64_t b, int64_t *q) {
  if (b == 0) return "division by zero";
  if (a == INT64_MIN && b == -1) return "overflow";
  int64_t t = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) t--;
  *q = t;
  return NULL;
}

const char *rt_floormod(int64_t a, int64_t b, int64_t *r) {
  if (b == 0) return "modulo by zero";
  if (b == -1) { /* INT64_MIN % -1 traps on x86 */
    *r = 0;
    return NULL;
  }
  int64_t t = a % b;
  if (t != 0 && ((t < 0) != (b < 0))) t += b;
  *r = t;
  return NULL;
}

const char *rt_expr_eval(const rt_expr *e, const int64_t *symbols, int64_t *value) {
  int64_t stack[NRT_GRAPH_MAX_EXPR_TERMS];
  int depth = 0;
  for (uint32_t t = 0; t < e->n; t++) {
    const rt_expr_term *x = &e->terms[t];
    if (x->op == NRT_EXPR_CONST) {
      stack[depth++] = x->arg;
      continue;
    }
    if (x->op == NRT_EXPR_SYM) {
      stack[depth++] = symbols[x->arg];
      continue;
    }
    int64_t b = stack[--depth], a = stack[depth - 1], r = 0;
    const char *why = NULL;
    switch (x->op) {
      case NRT_EXPR_ADD: if (__builtin_add_overflow(a, b, &r)) why = "overflow"; break;
      case NRT_EXPR_SUB: if (__builtin_sub_overflow(a, b, &r)) why = "overflow"; break;
      case NRT_EXPR_MUL: if (__builtin_mul_overflow(a, b, &r)) why = "overflow"; break;
      case NRT_EXPR_FLOORDIV: why = rt_floordiv(a, b, &r); break;
      case NRT_EXPR_MOD: why = rt_floormod(a, b, &r); break;
      case NRT_EXPR_MAX: r = a > b ? a : b; break;
      default: r = a < b ? a : b; break; /* MIN */
    }
    if (why) return why;
    stack[depth - 1] = r;
  }
  *value = stack[0];
  return NULL;
}

int rt_expr_equal(const rt_expr *a, const rt_expr *b) {
  if (a->n != b->n) return 0;
  for (uint32_t t = 0; t < a->n; t++)
    if (a->terms[t].op != b->terms[t].op || a->terms[t].arg != b->terms[t].arg) return 0;
  return 1;
}

/* ---- infix text ------------------------------------------------------------ */

/* Binding strength: sums < products < atoms (constants, symbols, max/min). */
static int strength(uint32_t op) {
  switch (op) {
    case NRT_EXPR_ADD:
    case NRT_EXPR_SUB: return 1;
    case NRT_EXPR_MUL:
    case NRT_EXPR_FLOORDIV:
    case NRT_EXPR_MOD: return 2;
    default: return 3;
  }
}

typedef struct tree {
  const rt_expr *e;
  int left[NRT_GRAPH_MAX_EXPR_TERMS], right[NRT_GRAPH_MAX_EXPR_TERMS];
} tree;

static void print_term(rt_sbuf *b, const tree *t, int i);

static void print_operand(rt_sbuf *b, const tree *t, int i, int parens) {
  if (parens) rt_sbuf_printf(b, "(");
  print_term(b, t, i);
  if (parens) rt_sbuf_printf(b, ")");
}

static void print_term(rt_sbuf *b, const tree *t, int i) {
  const rt_expr_term *x = &t->e->terms[i];
  if (x->op == NRT_EXPR_CONST) {
    rt_sbuf_printf(b, "%lld", (long long)x->arg);
    return;
  }
  if (x->op == NRT_EXPR_SYM) {
    rt_sbuf_printf(b, "s%lld", (long long)x->arg);
    return;
  }
  if (x->op == NRT_EXPR_MAX || x->op == NRT_EXPR_MIN) {
    rt_sbuf_printf(b, x->op == NRT_EXPR_MAX ? "max(" : "min(");
    print_term(b, t, t->left[i]);
    rt_sbuf_printf(b, ", ");
    print_term(b, t, t->right[i]);
    rt_sbuf_printf(b, ")");
    return;
  }
  static const char *const symbol[] = {[NRT_EXPR_ADD] = " + ", [NRT_EXPR_SUB] = " - ",
                                       [NRT_EXPR_MUL] = "*", [NRT_EXPR_FLOORDIV] = "//",
                                       [NRT_EXPR_MOD] = "%"};
  int s = strength(x->op);
  uint32_t rop = t->e->terms[t->right[i]].op;
  /* Left to right: a weaker left operand needs parentheses; so does a right
   * one as strong, unless both are + or both are *. */
  int rs = strength(rop);
  int right_parens = rs < s || (rs == s && !(rop == x->op && (rop == NRT_EXPR_ADD || rop == NRT_EXPR_MUL)));
  print_operand(b, t, t->left[i], strength(t->e->terms[t->left[i]].op) < s);
  rt_sbuf_printf(b, "%s", symbol[x->op]);
  print_operand(b, t, t->right[i], right_parens);
}

void rt_expr_print(rt_sbuf *b, const rt_expr *e) {
  tree t;
  t.e = e;
  int stack[NRT_GRAPH_MAX_EXPR_TERMS], depth = 0;
  for (uint32_t i = 0; i < e->n; i++) {
    if (is_binary(e->terms[i].op)) {
      t.right[i] = stack[--depth];
      t.left[i] = stack[--depth];
    }
    stack[depth++] = (int)i;
  }
  print_term(b, &t, stack[0]);
}
