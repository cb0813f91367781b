#include "prepost/dump.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "engine/core/engine_impl.h"
#include "engine/core/outbuf.h"

/* Lets a protocol or workload write into the rest of the buffer. */
static void sub(struct out *o, size_t (*fn)(const struct pp_engine *, char *, size_t),
                const struct pp_engine *e)
{
  if (!fn)
    return;
  size_t k = fn(e, o->p, o->left);
  o->n += k;
  size_t adv = k < o->left ? k : (o->left ? o->left - 1 : 0);
  o->p += adv;
  o->left -= adv;
}

size_t pp_engine_dump(const struct pp_engine *e, char *buf, size_t len)
{
  struct out o = {buf, len, 0};
  if (len)
    buf[0] = '\0';
  pf(&o, "  protocol %s, workload %s, %s\n", e->proto->name, e->appops->name,
     e->started ? "started" : "not started");
  pf(&o, "  peer ranks:");
  for (uint32_t i = 0; i < e->npeers; i++)
    pf(&o, " %u%s", e->peers[i], e->connected[i] ? "" : " (not connected)");
  pf(&o, "\n  timers: %u pending", e->timers.len);
  if (e->timers.len) {
    const struct pp_timer *t = &e->timers.heap[0]; /* the heap's root is the earliest */
    pf(&o, ", next at %" PRIu64 " ns (%s, arg %u)", t->deadline,
       t->kind == PP_TIMER_APP ? "workload" : t->kind == PP_TIMER_PROTO ? "protocol" : "?",
       t->arg);
  }
  pf(&o, "\n");
  sub(&o, e->proto->dump, e);
  sub(&o, e->appops->dump, e);
  return o.n;
}
