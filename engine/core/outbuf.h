/*
 * A bounded text appender for the engine's formatters (dump.c, trace_read.c): pf() writes
 * printf-style at p, never more than `left` bytes with the NUL, cutting what does not fit; n
 * counts the bytes the whole text takes, as snprintf's return does. Static in every file that
 * includes it.
 */
#ifndef PP_ENGINE_OUTBUF_H
#define PP_ENGINE_OUTBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

struct out {
  char *p;
  size_t left, n;
};

static inline void pf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void pf(struct out *o, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->p, o->left, fmt, ap);
  va_end(ap);
  if (k < 0)
    return;
  o->n += (size_t)k;
  size_t adv = (size_t)k < o->left ? (size_t)k : (o->left ? o->left - 1 : 0);
  o->p += adv;
  o->left -= adv;
}

#endif
