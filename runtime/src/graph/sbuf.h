/* A growing text buffer for the graph's text forms. A failed allocation
 * sticks (later appends do nothing) and is reported once at the end. */
#ifndef NEURONRT_GRAPH_SBUF_H
#define NEURONRT_GRAPH_SBUF_H

#include <stddef.h>
#include "internal.h"

typedef struct rt_sbuf {
  char *text;
  size_t len, cap;
  int failed;
} rt_sbuf;

void rt_sbuf_printf(rt_sbuf *b, const char *fmt, ...) RT_PRINTF(2, 3);
/* Hands the text over (*text, to free()) or frees it and fails. */
nrt_status rt_sbuf_finish(rt_sbuf *b, char **text);

#endif
