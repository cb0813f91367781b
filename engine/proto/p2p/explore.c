/*
 * The p2p protocols' exploration (prepost/proto.h, struct pp_proto_explore): eager and rndv over
 * the traffic workload, with sizes across the eager, RGET and RPUT ranges, every receive mode
 * (specific, any-tag, mixed, any-source, any), small credit and buffer pools; shrinking towards
 * a ring of fixed-size specific receives of one tag, one channel, fewer credits and the default
 * pools, p2p.srq (a shared receive queue per rank, engine/proto/p2p/srq.c) in a third of the
 * seeds; the rendezvous' round trips for the explorer's liveness bound.
 */
#include "prepost/p2p.h"
#include "prepost/proto.h"

#include "engine/core/bugs.h"

/* The smallest window that keeps a traffic workload safe (no hang whatever the timing). An
 * ANY_SOURCE receive with a specific tag can take another source's message of that tag ahead of
 * the one it was posted for; with several sources and tags and a small window of receives and
 * sends, a receive can be left that no message will ever match while the senders wait for
 * receives posted after it: an unsafe MPI program (explore seed 20770), not a protocol bug. With
 * every receive posted at once each message finds one. The other modes match a source's
 * messages in its send order and need nothing. Every receive needs a request of its own too
 * (p2p.max_requests, below). */
static uint32_t safe_window_min(const struct pp_engine_cfg *e)
{
  const struct pp_traffic *t = pp_traffic_of(e);
  if (t->recv_mode != PP_RECV_ANY_SOURCE || t->tags <= 1 ||
      e->workload.pattern != PP_PATTERN_ALLTOALL || e->nranks < 3)
    return 1;
  return e->workload.messages * (e->nranks - 1);
}

/* p2p.srq in a third of the seeds, always with its test bug: a small pool, one channel. From a
 * stream of its own (PP_SEED_EXPLORE, stream 1), so the other draws of a seed stay. */
static void srq_gen(const struct pp_explore_limits *lim, struct pp_p2p_params *p)
{
  struct pp_prng q;
  pp_prng_seed(&q, pp_seed_derive(lim->seed, PP_SEED_EXPLORE, 1));
  bool bug = lim->bugs >> PP_BUG_SRQ_NO_CREDITS & 1;
  bool on = pp_prng_chance(&q, 1.0 / 3);
  uint32_t buffers = (uint32_t)pp_prng_log_range(&q, 2, 64);
  uint32_t limit = (uint32_t)pp_prng_range(&q, 1, 8);
  if (!on && !bug)
    return;
  p->srq = true;
  p->channels = 1;
  p->srq_buffers = buffers;
  p->srq_limit = limit;
}

static bool p2p_uses_srq(const void *params)
{
  return ((const struct pp_p2p_params *)params)->srq;
}

static void p2p_gen(struct pp_prng *r, const struct pp_explore_limits *lim,
                    struct pp_engine_cfg *e, void *params)
{
  struct pp_workload *w = &e->workload;
  struct pp_traffic *t = pp_traffic_of(e);
  struct pp_p2p_params *p = params;
  if (e->nranks <= 8 && pp_prng_chance(r, 0.25))
    w->pattern = PP_PATTERN_ALLTOALL;
  uint32_t big = lim->max_size * 4u > w->size ? lim->max_size * 4u : w->size;
  t->size_max = (uint32_t)pp_prng_log_range(r, w->size, big);
  t->dist = (uint8_t)pp_prng_below(r, PP_DIST_COUNT);
  t->recv_mode = (uint8_t)pp_prng_below(r, PP_RECV_MODE_COUNT);
  t->tags = (uint32_t)pp_prng_log_range(r, 1, 16);
  t->window = (uint32_t)pp_prng_log_range(r, 1, 32);
  if (t->window < safe_window_min(e))
    t->window = safe_window_min(e);
  p->eager_limit = (uint32_t)pp_prng_log_range(r, 64, 16384);
  p->rget_limit = pp_prng_chance(r, 0.3) ? 0 : (uint32_t)pp_prng_log_range(r, 1024, 256 * 1024);
  p->frag_size = pp_prng_chance(r, 0.5) ? 0 : (uint32_t)pp_prng_log_range(r, 4096, 64 * 1024);
  p->pipeline = (uint32_t)pp_prng_range(r, 0, 4);
  p->channels = (uint32_t)pp_prng_range(r, 1, 3);
  p->credits = (uint32_t)pp_prng_log_range(r, 1, 32);
  p->credit_threshold = (uint32_t)pp_prng_range(r, 1, p->credits);
  p->reply_slots = pp_prng_chance(r, 0.5) ? 0 : (uint32_t)pp_prng_range(r, 1, 8);
  p->send_buffers = pp_prng_chance(r, 0.5) ? 0 : (uint32_t)pp_prng_log_range(r, 1, 64);
  p->rcache_entries = pp_prng_chance(r, 0.5) ? 0 : (uint32_t)pp_prng_log_range(r, 1, 64);
  /* every receive posted at once takes a request each, beside the sends in flight: with fewer
   * requests than both, some receives wait, and the program is unsafe again (explore
   * --faults byzantine seed 103: 7 ranks, a window of 1,152, 1,024 requests, a hang) */
  if (safe_window_min(e) > 1 && 2ull * t->window > 1024)
    p->max_requests = 2 * t->window;
  srq_gen(lim, p);
}

static bool halve(uint32_t *v, uint32_t min)
{
  if (*v <= min)
    return false;
  *v = *v / 2 < min ? min : *v / 2;
  return true;
}

static bool p2p_reduce(struct pp_engine_cfg *e, void *params, unsigned k, const char **what)
{
  struct pp_traffic *t = pp_traffic_of(e);
  struct pp_p2p_params *p = params;
  switch (k) {
  case 0:
    *what = "pattern ring";
    if (e->workload.pattern != PP_PATTERN_ALLTOALL)
      return false;
    e->workload.pattern = PP_PATTERN_RING;
    return true;
  case 1:
    *what = "one p2p channel";
    if (p->channels <= 1)
      return false;
    p->channels = 1;
    return true;
  case 2:
    *what = "half the largest size";
    return halve(&t->size_max, e->workload.size);
  case 3:
    *what = "fixed sizes";
    if (t->dist == PP_DIST_FIXED)
      return false;
    t->dist = PP_DIST_FIXED;
    return true;
  case 4:
    *what = "specific receives";
    if (t->recv_mode == PP_RECV_SPECIFIC)
      return false;
    t->recv_mode = PP_RECV_SPECIFIC;
    return true;
  case 5:
    *what = "one tag";
    if (t->tags <= 1)
      return false;
    t->tags = 1;
    return true;
  case 6:
    *what = "half the window";
    return halve(&t->window, safe_window_min(e));
  case 7:
    *what = "half the credits";
    if (!halve(&p->credits, 1))
      return false;
    if (p->credit_threshold > p->credits)
      p->credit_threshold = p->credits;
    return true;
  case 8:
    *what = "pipeline 1";
    if (p->pipeline == 1)
      return false;
    p->pipeline = 1;
    return true;
  case 9:
    *what = "default pools";
    if (!p->reply_slots && !p->send_buffers && !p->rcache_entries)
      return false;
    p->reply_slots = p->send_buffers = p->rcache_entries = 0;
    return true;
  case 10:
    *what = "no srq";
    if (!p->srq)
      return false;
    p->srq = false;
    p->srq_buffers = p->srq_limit = 0;
    return true;
  default:
    return false;
  }
}

/* eager: one trip; a rendezvous: its RTS, then a CTS and a FIN per fragment */
static uint64_t p2p_round_trips(const struct pp_engine_cfg *c, const void *params, uint32_t size)
{
  (void)params;
  struct pp_p2p_params p;
  pp_p2p_params_resolve(c, &p);
  return size <= p.eager_limit ? 1 : 2 + 2 * ((uint64_t)size / p.frag_size + 1);
}

const struct pp_proto_explore pp_p2p_explore = {
    .flow_controlled = true,
    .in_mix = true,
    .validates_peers = true,
    .workload = PP_WORKLOAD_TRAFFIC,
    .engine_bugs = 1u << PP_BUG_EARLY_CTS | 1u << PP_BUG_WILDCARD_ORDER |
                   1u << PP_BUG_SRQ_NO_CREDITS,
    .section = "p2p",
    .params = pp_p2p_param_table,
    .nparams = PP_P2P_PARAM_COUNT,
    .gen = p2p_gen,
    .reduce = p2p_reduce,
    .round_trips = p2p_round_trips,
    .uses_srq = p2p_uses_srq,
};
