#include "engine/core/timerq.h"

#include <assert.h>
#include <stdlib.h>

enum pp_status pp_timerq_init(struct pp_timerq *q, uint32_t cap)
{
  q->heap = calloc(cap ? cap : 1, sizeof(*q->heap));
  q->len = 0;
  q->cap = cap;
  q->next_seq = 0;
  return q->heap ? PP_OK : PP_NOMEM;
}

void pp_timerq_fini(struct pp_timerq *q)
{
  free(q->heap);
  q->heap = NULL;
  q->len = q->cap = 0;
}

static int earlier(const struct pp_timer *a, const struct pp_timer *b)
{
  return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void swap(struct pp_timer *a, struct pp_timer *b)
{
  struct pp_timer t = *a;
  *a = *b;
  *b = t;
}

enum pp_status pp_timerq_push(struct pp_timerq *q, uint64_t deadline, uint32_t kind, uint32_t arg)
{
  if (q->len == q->cap)
    return PP_LIMIT;
  uint32_t i = q->len++;
  q->heap[i] = (struct pp_timer){deadline, q->next_seq++, kind, arg};
  while (i > 0 && earlier(&q->heap[i], &q->heap[(i - 1) / 2])) {
    swap(&q->heap[i], &q->heap[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  return PP_OK;
}

uint64_t pp_timerq_next(const struct pp_timerq *q)
{
  return q->len ? q->heap[0].deadline : UINT64_MAX;
}

static void sift_down(struct pp_timerq *q, uint32_t i)
{
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < q->len && earlier(&q->heap[l], &q->heap[m]))
      m = l;
    if (r < q->len && earlier(&q->heap[r], &q->heap[m]))
      m = r;
    if (m == i)
      return;
    swap(&q->heap[i], &q->heap[m]);
    i = m;
  }
}

int pp_timerq_pop_due(struct pp_timerq *q, uint64_t now, struct pp_timer *out)
{
  if (q->len == 0 || q->heap[0].deadline > now)
    return 0;
  *out = q->heap[0];
  q->heap[0] = q->heap[--q->len];
  sift_down(q, 0);
  assert(q->len == 0 || q->heap[0].deadline >= out->deadline);
  return 1;
}
