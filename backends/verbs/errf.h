/*
 * The verbs backend's one way to fill a caller's error buffer: printf-style into err (len
 * bytes), nothing when err is NULL or len 0. Static in every file that includes it, so that the
 * library exports no such symbol.
 */
#ifndef PP_VERBS_ERRF_H
#define PP_VERBS_ERRF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void errf(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void errf(char *err, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (err && len)
    vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

#endif
