/*
 * The ring protocols' exploration (prepost/proto.h, struct pp_proto_explore): ring-credits and
 * ring-cts over the stream workload, with small slot rings, chunked messages, several channels
 * and batched or idle-timed credits; shrinking towards one channel, fewer and smaller slots and
 * credit at once; the ring's own invariant counters (struct pp_ring_stats.violations) checked.
 */
#include <inttypes.h>
#include <stdio.h>

#include "prepost/proto.h"

#include "engine/core/bugs.h"

static void ring_gen(struct pp_prng *r, const struct pp_explore_limits *lim,
                     struct pp_engine_cfg *cfg, void *params)
{
  (void)lim;
  struct pp_ring_params *p = params;
  p->slots = (uint32_t)pp_prng_log_range(r, 1, 16);
  /* at most 16 chunks a message: chunking is exercised, the run stays short */
  uint32_t size = cfg->workload.size, min = size / 16 > 64 ? size / 16 : 64;
  p->slot_size = (uint32_t)pp_prng_log_range(r, min, min > 64 * 1024 ? min : 64 * 1024);
  p->channels = (uint32_t)pp_prng_range(r, 1, 3);
  p->credit_batch = (uint32_t)pp_prng_range(r, 1, p->slots);
  p->credit_idle_ns = pp_prng_chance(r, 0.5) ? 0 : pp_prng_log_range(r, 100, 20000);
}

static bool halve(uint32_t *v, uint32_t min)
{
  if (*v <= min)
    return false;
  *v = *v / 2 < min ? min : *v / 2;
  return true;
}

static bool ring_reduce(struct pp_engine_cfg *cfg, void *params, unsigned k, const char **what)
{
  (void)cfg;
  struct pp_ring_params *ring = params;
  switch (k) {
  case 0:
    *what = "one ring channel";
    if (ring->channels <= 1)
      return false;
    ring->channels = 1;
    return true;
  case 1:
    *what = "half the ring slots";
    if (!halve(&ring->slots, 1))
      return false;
    if (ring->credit_batch > ring->slots)
      ring->credit_batch = ring->slots;
    return true;
  case 2:
    *what = "half the slot size";
    return halve(&ring->slot_size, 64);
  case 3:
    *what = "credit at once";
    if (ring->credit_batch == 1 && ring->credit_idle_ns == 0)
      return false;
    ring->credit_batch = 1;
    ring->credit_idle_ns = 0;
    return true;
  default:
    return false;
  }
}

static void ring_check(const struct pp_engine_cfg *cfg, const void *params,
                       const struct pp_rank_stats *ranks, uint32_t nranks,
                       struct pp_proto_verdict *v)
{
  (void)cfg;
  (void)params;
  for (uint32_t i = 0; i < nranks && v->ok; i++)
    if (ranks[i].ring.violations) {
      v->ok = false;
      snprintf(v->why, sizeof v->why,
               "rank %u: %" PRIu64 " ring protocol violations (a chunk in an unreleased "
               "slot, out of sequence, a bad CTS entry or head)",
               i, ranks[i].ring.violations);
    }
}

const struct pp_proto_explore pp_ring_explore = {
    .flow_controlled = true,
    .in_mix = true,
    .validates_peers = true,
    .workload = PP_WORKLOAD_STREAM,
    /* the stream workload's, and the ring's own */
    .engine_bugs = 1u << PP_BUG_EARLY_REPOST | 1u << PP_BUG_LOST_REPOST |
                   1u << PP_BUG_SEND_REUSE | 1u << PP_BUG_EARLY_CREDIT,
    .section = "ring",
    .params = pp_ring_param_table,
    .nparams = PP_RING_PARAM_COUNT,
    .gen = ring_gen,
    .reduce = ring_reduce,
    .check = ring_check,
};
