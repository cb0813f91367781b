/* A bounded min-heap of timers keyed by integer-nanosecond deadline. Ties fire in insertion
 * order, so runs are deterministic. */
#ifndef PP_TIMERQ_H
#define PP_TIMERQ_H

#include <stdint.h>

#include "prepost/status.h"

struct pp_timer {
  uint64_t deadline;
  uint64_t seq; /* insertion order, breaks ties */
  uint32_t kind;
  uint32_t arg;
};

struct pp_timerq {
  struct pp_timer *heap;
  uint32_t len, cap;
  uint64_t next_seq;
};

enum pp_status pp_timerq_init(struct pp_timerq *q, uint32_t cap);
void pp_timerq_fini(struct pp_timerq *q);
/* PP_LIMIT when full. */
enum pp_status pp_timerq_push(struct pp_timerq *q, uint64_t deadline, uint32_t kind, uint32_t arg);
/* UINT64_MAX when empty. */
uint64_t pp_timerq_next(const struct pp_timerq *q);
/* Pops the earliest timer whose deadline is <= now into *out; 0 when none is due. */
int pp_timerq_pop_due(struct pp_timerq *q, uint64_t now, struct pp_timer *out);

#endif
