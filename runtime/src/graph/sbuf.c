/* The growing text buffer (sbuf.h). */
#include "graph/sbuf.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void rt_sbuf_printf(rt_sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    size_t room = b->cap - b->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->text ? b->text + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = 1;
      return;
    }
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= (size_t)n) cap *= 2;
    char *p = realloc(b->text, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->text = p;
    b->cap = cap;
  }
}

nrt_status rt_sbuf_finish(rt_sbuf *b, char **text) {
  if (!b->failed && !b->text) rt_sbuf_printf(b, "%s", "");
  if (b->failed) {
    free(b->text);
    *text = NULL;
    return rt_fail(NRT_ERROR_OUT_OF_MEMORY, "graph text: out of host memory");
  }
  *text = b->text;
  return NRT_SUCCESS;
}
