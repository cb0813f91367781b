/*
 * The p2p protocols (eager, rndv) in the registry: their check and their memory estimate. The
 * parameters are struct pp_p2p_params (prepost/p2p_cfg.h) in pp_engine_cfg.proto_params
 * (pp_p2p_params_of); 0 fields take their defaults (pp_p2p_params_resolve).
 */
#include "prepost/p2p.h"

#include "engine/core/engine_impl.h"

/* Bookkeeping entries whose types are private to p2p.c, match.c and rcache.c, counted at a bound
 * of their size (asserted by tests/test_engine.c, suite engine_mem, against what creation
 * allocates). */
#define MEM_REQ 1024u   /* p2p.c struct req */
#define MEM_RX 160u     /* p2p.c struct rx */
#define MEM_TX 32u      /* p2p.c struct tx */
#define MEM_MENTRY 128u /* match.h struct pp_mentry, and its bucket */
#define MEM_RCE 128u    /* rcache.h struct pp_rcache_entry, and its bucket */

static uint64_t pow2_ge(uint64_t x)
{
  uint64_t p = 16;
  while (p < x)
    p *= 2;
  return p;
}

static enum pp_status p2p_def_check(const struct pp_engine_cfg *c, const void *params, char *err,
                                    size_t errlen)
{
  (void)params;
  return pp_p2p_cfg_check(c, err, errlen) == PP_OK ? PP_OK : PP_INVALID;
}

static void p2p_mem_need(const struct pp_engine_cfg *c, const void *params, uint32_t npeers,
                         struct pp_mem_need *q)
{
  (void)params;
  struct pp_p2p_params p;
  pp_p2p_params_resolve(c, &p);
  uint64_t R = p.reply_slots, TR = (R + 1) / 2, D = p.credits;
  uint64_t nrx = D + R + 2 + (D - 1) / p.credit_threshold + (R - 1) / TR;
  uint64_t bsize = (64 + (uint64_t)p.eager_limit + 63) & ~63ull, nch = (uint64_t)npeers * p.channels;
  uint64_t pool = 0, cbsize = bsize;
  if (p.srq) { /* srq.c: the pool, and per channel R + C control buffers of 64 bytes */
    nrx -= D;
    cbsize = 64;
    pool = nch + p.srq_limit + 1 > p.srq_buffers ? nch + p.srq_limit + 1 : p.srq_buffers;
  }
  q->qps = (uint32_t)(p.srq ? 2 * nch : nch);
  q->send_wqes = q->qps * (uint64_t)c->qp.sq_depth;
  q->recv_wqes = nch * nrx + pool;
  uint64_t rx = nch * nrx, small = nch * (nrx + 4) + (uint64_t)p.max_requests * (p.pipeline + 1) + 1;
  if (p.srq)
    pp_mem_add(q, pool * (bsize + MEM_RX), "p2p.srq_buffers and p2p.eager_limit");
  pp_mem_add(q, rx * (cbsize + MEM_RX), p.srq ? "p2p.reply_slots and p2p.credits"
                                              : "p2p.credits, p2p.reply_slots and p2p.eager_limit");
  pp_mem_add(q, (uint64_t)p.send_buffers * (bsize + MEM_TX), "p2p.send_buffers and p2p.eager_limit");
  pp_mem_add(q, small * (64 + MEM_TX), "p2p.max_requests and p2p.pipeline");
  pp_mem_add(q, (uint64_t)p.max_requests * MEM_REQ, "p2p.max_requests");
  pp_mem_add(q, (pow2_ge(2ull * p.max_requests) + pow2_ge(8 * (rx + pool)) + p.max_requests +
                 4 * (rx + pool)) *
                    MEM_MENTRY, "p2p.max_requests");
  pp_mem_add(q, (p.rcache_entries + pow2_ge(2ull * p.rcache_entries)) * (uint64_t)MEM_RCE,
             "p2p.rcache_entries");
  pp_mem_add(q, (uint64_t)p.record * sizeof(struct pp_recv_record), "p2p.record");
  pp_mem_add(q, nch * 64 + c->nranks * 4ull + 8192, "ranks");
  if (p.srq) /* the pool's line, spare stack and QP map */
    pp_mem_add(q, nch * 12 + pool * 4 + 256, "p2p.srq_buffers");
}

extern const struct pp_proto_explore pp_p2p_explore; /* explore.c */

const struct pp_proto_def pp_p2p_eager_def = {
    .abi = PP_PROTO_ABI,
    .name = "eager",
    .desc = "tag matching, eager + credits, rendezvous above a limit",
    .params_size = sizeof(struct pp_p2p_params),
    .check = p2p_def_check,
    .mem_need = p2p_mem_need,
    .ops = &pp_p2p_eager_ops,
    .explore = &pp_p2p_explore,
};

const struct pp_proto_def pp_p2p_rndv_def = {
    .abi = PP_PROTO_ABI,
    .name = "rndv",
    .desc = "tag matching, every message by rendezvous",
    .params_size = sizeof(struct pp_p2p_params),
    .check = p2p_def_check,
    .mem_need = p2p_mem_need,
    .ops = &pp_p2p_rndv_ops,
    .explore = &pp_p2p_explore,
};
