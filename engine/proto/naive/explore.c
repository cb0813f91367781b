/*
 * The naive protocol's exploration (prepost/proto.h, struct pp_proto_explore): the positive
 * control. It posts SENDs with no regard for the receiver, so the explorer must find its RNR
 * failures; it is not in the default mix and not flow-controlled.
 */
#include "prepost/proto.h"

#include "engine/core/bugs.h"

/* any rnr_retry (0: the first RNR NAK is fatal, 7: retried for ever) */
static void naive_gen(struct pp_prng *r, const struct pp_explore_limits *lim,
                      struct pp_engine_cfg *cfg, void *params)
{
  (void)lim;
  (void)params;
  cfg->qp.rnr_retry = (uint8_t)pp_prng_range(r, 0, 7);
}

const struct pp_proto_explore pp_naive_explore = {
    .flow_controlled = false,
    .in_mix = false,
    .workload = PP_WORKLOAD_STREAM,
    /* the stream workload's */
    .engine_bugs = 1u << PP_BUG_EARLY_REPOST | 1u << PP_BUG_LOST_REPOST | 1u << PP_BUG_SEND_REUSE,
    .gen = naive_gen,
};
