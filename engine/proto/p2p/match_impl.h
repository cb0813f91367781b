/*
 * The matching queues' internals (match.c's), for the inline forms of pp_match_post and
 * pp_match_arrive: the eager path's post (irecv) and arrival (an EAGER message), inline in p2p.c
 * and eager.c. Private to engine/proto/p2p; match.h is the interface.
 */
#ifndef PP_MATCH_IMPL_H
#define PP_MATCH_IMPL_H

#include <stddef.h>

#include "engine/proto/p2p/match.h"

struct pp_mqueue {
  uint32_t ctx, src, tag;
  uint32_t link; /* which link slot of the entries this sub-queue threads */
  uint32_t slot; /* its bucket (the key's hash, masked) */
  struct pp_mentry *head, *tail;
  struct pp_mqueue *hnext; /* hash chain, or free list */
};

static inline uint32_t hash3(uint32_t ctx, uint32_t src, uint32_t tag)
{
  uint64_t x = (uint64_t)src << 32 | tag;
  x ^= (uint64_t)ctx * 0x9e3779b97f4a7c15ull;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 29;
  return (uint32_t)x;
}

static inline struct pp_mqueue *lookup_in(const struct pp_mtable *t, uint32_t slot, uint32_t ctx,
                                   uint32_t src, uint32_t tag)
{
  for (struct pp_mqueue *q = t->bucket[slot]; q; q = q->hnext)
    if (q->ctx == ctx && q->src == src && q->tag == tag)
      return q;
  return NULL;
}

static inline bool same_key(const struct pp_mqueue *q, uint32_t ctx, uint32_t src, uint32_t tag)
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
static inline struct pp_mqueue *find_queue(struct pp_match *m, struct pp_mtable *t, uint32_t ctx,
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

static inline void append(struct pp_mqueue *q, struct pp_mentry *e)
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

static inline uint32_t kind_of(uint32_t src, uint32_t tag)
{
  return (src == PP_ANY_SOURCE) * 2u + (tag == PP_ANY_TAG);
}

/* An entry's key and its place in the order of posts and arrivals. */
static inline void entry_key(struct pp_match *m, struct pp_mentry *r, uint32_t ctx, uint32_t src,
                             uint32_t tag)
{
  r->ctx = ctx;
  r->src = src;
  r->tag = tag;
  r->order = m->next_order++;
}

static inline __attribute__((always_inline)) enum pp_status
pp_match_post_inline(struct pp_match *m, struct pp_mentry *r, uint32_t ctx, uint32_t src,
                     uint32_t tag)
{
  if (m->nposted == m->max_posted)
    return PP_LIMIT;
  entry_key(m, r, ctx, src, tag);
  append(get_queue(m, &m->posted, ctx, src, tag, 0), r);
  m->nposted++;
  r->kind = kind_of(src, tag);
  m->nkind[r->kind]++;
  return PP_OK;
}

/* pp_match_remove_posted, inline in pp_match_arrive_inline. */
static inline void remove_posted(struct pp_match *m, struct pp_mentry *r)
{
  m->nkind[r->kind]--;
  unlink_entry(m, &m->posted, r, 0);
  m->nposted--;
}

/* The earliest of the receives of every kind posted that match (ctx, src, tag). */
static inline struct pp_mentry *earliest_posted(const struct pp_match *m, uint32_t ctx, uint32_t src,
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

static inline __attribute__((always_inline)) struct pp_mentry *
pp_match_arrive_inline(struct pp_match *m, uint32_t ctx, uint32_t src, uint32_t tag)
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

#endif
