/*
 * MPI message matching: the posted-receive queue and the unexpected-message queue of one rank.
 *
 * Entries are intrusive (struct pp_mentry embedded in the caller's request or message record), so
 * nothing is allocated after pp_match_init(). Both queues are split into FIFO sub-queues hashed by
 * their key (context, source, tag), so an exact lookup costs the same at 10 or 10,000 entries:
 *
 * - a posted receive lives in the one sub-queue of its own pattern (source and tag may be ANY);
 *   an arriving message (ctx, s, t) looks at the heads of (ctx,s,t), (ctx,s,ANY), (ctx,ANY,t) and
 *   (ctx,ANY,ANY) and takes the one posted first (every post gets a sequence number), which is
 *   MPI's rule: the first posted receive that matches;
 * - an unexpected message lives in four sub-queues at once, (ctx,s,t), (ctx,s,ANY), (ctx,ANY,t)
 *   and (ctx,ANY,ANY), in arrival order; a new receive looks at the head of the one sub-queue
 *   named by its own pattern and gets the earliest message it matches.
 *
 * The caller feeds messages of one source in that source's send order (eager.c holds out-of-order
 * arrivals back by per-peer sequence numbers), which makes arrival order the non-overtaking order.
 */
#ifndef PP_MATCH_H
#define PP_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "prepost/p2p_cfg.h"
#include "prepost/status.h"

struct pp_mqueue;

struct pp_mentry {
  struct pp_mentry *next[4], *prev[4];
  struct pp_mqueue *q[4];
  uint64_t order; /* post order (receives) or arrival order (unexpected messages) */
  uint32_t ctx, src, tag;
  uint32_t kind; /* a posted receive's kind (nkind's index), set by pp_match_post (in what was
                    the struct's padding: its size is the same) */
};

struct pp_mtable {
  struct pp_mqueue **bucket;
  struct pp_mqueue *last; /* the sub-queue found or made last (NULL once it went back to the
                             pool): a run of one key, as a window of receives from one peer and
                             tag, is looked up without hashing */
  uint32_t mask;
};

struct pp_match {
  struct pp_mtable posted, unexpected;
  struct pp_mqueue *pool, *free;
  uint64_t next_order;
  uint32_t nposted, nunexpected;
  uint32_t nkind[4]; /* posted receives by kind: exact, ANY_TAG, ANY_SOURCE, both */
  uint32_t max_posted, max_unexpected;
  bool bug_exact_first; /* test-only bug wildcard-order (engine/core/bugs.h), set by p2p.c's create */
};

/* Sizes the tables for at most max_posted receives and max_unexpected messages. */
enum pp_status pp_match_init(struct pp_match *m, uint32_t max_posted, uint32_t max_unexpected);
void pp_match_fini(struct pp_match *m);

/* Appends a receive for (ctx, src or PP_ANY_SOURCE, tag or PP_ANY_TAG) to the posted queue.
 * The caller first looks for an unexpected message with pp_match_find_unexpected().
 * PP_LIMIT past max_posted. */
enum pp_status pp_match_post(struct pp_match *m, struct pp_mentry *r, uint32_t ctx, uint32_t src,
                             uint32_t tag);
/* An arriving message (never ANY): removes and returns the earliest-posted receive that matches,
 * or NULL (then the caller queues it with pp_match_add_unexpected()). */
struct pp_mentry *pp_match_arrive(struct pp_match *m, uint32_t ctx, uint32_t src, uint32_t tag);
/* Removes a posted receive (cancel). */
void pp_match_remove_posted(struct pp_match *m, struct pp_mentry *r);

/* Queues a message nobody has asked for yet. PP_LIMIT past max_unexpected. */
enum pp_status pp_match_add_unexpected(struct pp_match *m, struct pp_mentry *u, uint32_t ctx,
                                       uint32_t src, uint32_t tag);
/* The earliest unexpected message a receive (ctx, src|ANY, tag|ANY) would get; it stays queued
 * (probe) until pp_match_remove_unexpected(). NULL when none. */
struct pp_mentry *pp_match_find_unexpected(const struct pp_match *m, uint32_t ctx, uint32_t src,
                                           uint32_t tag);
void pp_match_remove_unexpected(struct pp_match *m, struct pp_mentry *u);

#endif
