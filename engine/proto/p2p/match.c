/* Matching queues hashed by (context, source, tag); see match.h. */
#include "engine/proto/p2p/match.h"

#include <stdlib.h>
#include <string.h>

struct pp_mqueue {
  uint32_t ctx, src, tag;
  uint32_t link; /* which link slot of the entries this sub-queue threads */
  uint32_t slot; /* its bucket (the key's hash, masked) */
  struct pp_mentry *head, *tail;
  struct pp_mqueue *hnext; /* hash chain, or free list */
};

static uint32_t pow2_at_least(uint64_t n)
{
  uint32_t p = 16;
  while (p < n && p < (1u << 30))
    p <<= 1;
  return p;
}

static uint32_t hash3(uint32_t ctx, uint32_t src, uint32_t tag)
{
  uint64_t x = (uint64_t)src << 32 | tag;
  x ^= (uint64_t)ctx * 0x9e3779b97f4a7c15ull;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 29;
  return (uint32_t)x;
}

enum pp_status pp_match_init(struct pp_match *m, uint32_t max_posted, uint32_t max_unexpected)
{
  memset(m, 0, sizeof(*m));
  m->max_posted = max_posted;
  m->max_unexpected = max_unexpected;
  /* a receive uses one sub-queue, an unexpected message up to four */
  uint64_t nq = (uint64_t)max_posted + 4ull * max_unexpected;
  m->posted.mask = pow2_at_least(2ull * max_posted) - 1;
  m->unexpected.mask = pow2_at_least(8ull * max_unexpected) - 1;
  m->posted.bucket = calloc((size_t)m->posted.mask + 1, sizeof(*m->posted.bucket));
  m->unexpected.bucket = calloc((size_t)m->unexpected.mask + 1, sizeof(*m->unexpected.bucket));
  m->pool = calloc(nq ? nq : 1, sizeof(*m->pool));
  if (!m->posted.bucket || !m->unexpected.bucket || !m->pool) {
    pp_match_fini(m);
    return PP_NOMEM;
  }
  for (uint64_t i = nq; i-- > 0;) {
    m->pool[i].hnext = m->free;
    m->free = &m->pool[i];
  }
  return PP_OK;
}

void pp_match_fini(struct pp_match *m)
{
  free(m->posted.bucket);
  free(m->unexpected.bucket);
  free(m->pool);
  memset(m, 0, sizeof(*m));
}

static struct pp_mqueue *lookup_in(const struct pp_mtable *t, uint32_t slot, uint32_t ctx,
                                   uint32_t src, uint32_t tag)
{
  for (struct pp_mqueue *q = t->bucket[slot]; q; q = q->hnext)
    if (q->ctx == ctx && q->src == src && q->tag == tag)
      return q;
  return NULL;
}

static bool same_key(const struct pp_mqueue *q, uint32_t ctx, uint32_t src, uint32_t tag)
{
  return q && q->ctx == ctx && q->src == src && q->tag == tag;
}

/* Inline: a run of one key (the eager path's) costs a comparison with t->last, no call. */
static inline struct pp_mqueue *lookup(const struct pp_mtable *t, uint32_t ctx, uint32_t src,
                                       uint32_t tag)
{
  if (same_key(t->last, ctx, src, tag))
    return t->last;
  return lookup_in(t, hash3(ctx, src, tag) & t->mask, ctx, src, tag);
}

/* get_queue's key not being t->last's: the sub-queue found in its bucket, or a new one. */
static struct pp_mqueue *find_queue(struct pp_match *m, struct pp_mtable *t, uint32_t ctx,
                                    uint32_t src, uint32_t tag, uint32_t link)
{
  uint32_t slot = hash3(ctx, src, tag) & t->mask; /* hashed once: lookup and insertion */
  struct pp_mqueue *q = lookup_in(t, slot, ctx, src, tag);
  if (q)
    return t->last = q;
  q = m->free;
  m->free = q->hnext;
  struct pp_mqueue **s = &t->bucket[slot];
  *q = (struct pp_mqueue){.ctx = ctx, .src = src, .tag = tag, .link = link, .slot = slot,
                          .hnext = *s};
  *s = q;
  return t->last = q;
}

/* The sub-queue for the key, created when missing (the pool is sized so that it never runs
 * out while the entry counts stay within their bounds). Inline as lookup is. */
static inline struct pp_mqueue *get_queue(struct pp_match *m, struct pp_mtable *t, uint32_t ctx,
                                          uint32_t src, uint32_t tag, uint32_t link)
{
  if (same_key(t->last, ctx, src, tag))
    return t->last;
  return find_queue(m, t, ctx, src, tag, link);
}

static void append(struct pp_mqueue *q, struct pp_mentry *e)
{
  uint32_t l = q->link;
  e->q[l] = q;
  e->next[l] = NULL;
  e->prev[l] = q->tail;
  if (q->tail)
    q->tail->next[l] = e;
  else
    q->head = e;
  q->tail = e;
}

/* Unlinks e from its sub-queue on link l; an emptied sub-queue goes back to the pool. */
static inline void unlink_entry(struct pp_match *m, struct pp_mtable *t, struct pp_mentry *e,
                                uint32_t l)
{
  struct pp_mqueue *q = e->q[l];
  if (e->prev[l])
    e->prev[l]->next[l] = e->next[l];
  else
    q->head = e->next[l];
  if (e->next[l])
    e->next[l]->prev[l] = e->prev[l];
  else
    q->tail = e->prev[l];
  e->q[l] = NULL;
  if (q->head)
    return;
  if (t->last == q)
    t->last = NULL;
  struct pp_mqueue **s = &t->bucket[q->slot];
  while (*s != q)
    s = &(*s)->hnext;
  *s = q->hnext;
  q->hnext = m->free;
  m->free = q;
}

static uint32_t kind_of(uint32_t src, uint32_t tag)
{
  return (src == PP_ANY_SOURCE) * 2u + (tag == PP_ANY_TAG);
}

enum pp_status pp_match_post(struct pp_match *m, struct pp_mentry *r, uint32_t ctx, uint32_t src,
                             uint32_t tag)
{
  if (m->nposted == m->max_posted)
    return PP_LIMIT;
  r->ctx = ctx;
  r->src = src;
  r->tag = tag;
  r->order = m->next_order++;
  append(get_queue(m, &m->posted, ctx, src, tag, 0), r);
  m->nposted++;
  m->nkind[kind_of(src, tag)]++;
  return PP_OK;
}

/* pp_match_remove_posted, inline in pp_match_arrive. */
static inline void remove_posted(struct pp_match *m, struct pp_mentry *r)
{
  m->nkind[kind_of(r->src, r->tag)]--;
  unlink_entry(m, &m->posted, r, 0);
  m->nposted--;
}

/* The earliest of the receives of every kind posted that match (ctx, src, tag). */
static struct pp_mentry *earliest_posted(const struct pp_match *m, uint32_t ctx, uint32_t src,
                                         uint32_t tag)
{
  const uint32_t srcs[4] = {src, src, PP_ANY_SOURCE, PP_ANY_SOURCE};
  const uint32_t tags[4] = {tag, PP_ANY_TAG, tag, PP_ANY_TAG};
  struct pp_mentry *best = NULL;
  for (int i = 0; i < 4; i++) {
    if (!m->nkind[i]) /* no receive of that kind posted: skip its lookup */
      continue;
    const struct pp_mqueue *q = lookup(&m->posted, ctx, srcs[i], tags[i]);
    if (q && (!best || q->head->order < best->order))
      best = q->head;
    if (best && m->bug_exact_first) /* the bug: the first kind that has one, not the earliest */
      break;
  }
  return best;
}

struct pp_mentry *pp_match_arrive(struct pp_match *m, uint32_t ctx, uint32_t src, uint32_t tag)
{
  struct pp_mentry *best = NULL;
  if (m->nposted == 0)
    return NULL;
  if (m->nkind[0] == m->nposted) { /* only exact receives posted: one lookup says it all */
    const struct pp_mqueue *q = lookup(&m->posted, ctx, src, tag);
    best = q ? q->head : NULL;
  } else {
    best = earliest_posted(m, ctx, src, tag);
  }
  if (best)
    remove_posted(m, best);
  return best;
}

void pp_match_remove_posted(struct pp_match *m, struct pp_mentry *r)
{
  remove_posted(m, r);
}

enum pp_status pp_match_add_unexpected(struct pp_match *m, struct pp_mentry *u, uint32_t ctx,
                                       uint32_t src, uint32_t tag)
{
  if (m->nunexpected == m->max_unexpected)
    return PP_LIMIT;
  u->ctx = ctx;
  u->src = src;
  u->tag = tag;
  u->order = m->next_order++;
  const uint32_t srcs[4] = {src, src, PP_ANY_SOURCE, PP_ANY_SOURCE};
  const uint32_t tags[4] = {tag, PP_ANY_TAG, tag, PP_ANY_TAG};
  for (uint32_t l = 0; l < 4; l++)
    append(get_queue(m, &m->unexpected, ctx, srcs[l], tags[l], l), u);
  m->nunexpected++;
  return PP_OK;
}

struct pp_mentry *pp_match_find_unexpected(const struct pp_match *m, uint32_t ctx, uint32_t src,
                                           uint32_t tag)
{
  if (m->nunexpected == 0)
    return NULL;
  const struct pp_mqueue *q = lookup(&m->unexpected, ctx, src, tag);
  return q ? q->head : NULL;
}

void pp_match_remove_unexpected(struct pp_match *m, struct pp_mentry *u)
{
  for (uint32_t l = 0; l < 4; l++)
    unlink_entry(m, &m->unexpected, u, l);
  m->nunexpected--;
}
