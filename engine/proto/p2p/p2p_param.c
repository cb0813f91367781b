/* Field table of the p2p protocols' section `p2p` (struct pp_p2p_params, prepost/p2p_cfg.h).
 * Keys whose default is "derived" are 0 until pp_p2p_params_resolve() derives them from the QP
 * attributes and each other; the others are pp_p2p_params_default()'s (tests/test_param.c). */
#include "prepost/p2p_cfg.h"
#include "prepost/engine.h"
#include "prepost/param.h"
#include "prepost/rcache.h"

#define P struct pp_p2p_params
#define D PP_PARAM_F_DERIVED
const struct pp_param pp_p2p_param_table[] = {
    PP_PARAM_SIZE(P, eager_limit, 0, PP_P2P_MAX_EAGER, 12u << 10,
                  "payload bytes sent eagerly (protocol eager; rndv: 0)"),
    PP_PARAM_SIZE(P, rget_limit, 0, PP_MAX_MSG_SIZE, 1u << 20,
                  "rendezvous messages up to this size use RDMA READ (RGET), larger ones RPUT"),
    PP_PARAM_KEYED("frag_size", P, frag_size, PP_PARAM_SIZE, 4096, PP_MAX_MSG_SIZE, 0,
                   "RPUT fragment the receiver exposes at once (derived: 512KiB)", NULL, D),
    PP_PARAM_KEYED("pipeline", P, pipeline, PP_PARAM_UINT, 1, 8, 0,
                   "RPUT fragments in flight per transfer (derived: 4)", NULL, D),
    PP_PARAM_KEYED("channels", P, channels, PP_PARAM_UINT, 1, PP_P2P_MAX_CHANNELS, 0,
                   "RC QPs per peer, messages striped round robin (derived: 1)", NULL, D),
    PP_PARAM_KEYED("credits", P, credits, PP_PARAM_UINT, 1, PP_P2P_MAX_CREDITS, 0,
                   "eager buffers per peer and channel (derived: qp.rq_depth)", NULL, D),
    PP_PARAM_KEYED("credit_threshold", P, credit_threshold, PP_PARAM_UINT, 1, PP_P2P_MAX_CREDITS,
                   0, "an explicit credit message once this many are owed (derived: half)",
                   NULL, D),
    PP_PARAM_KEYED("reply_slots", P, reply_slots, PP_PARAM_UINT, 1, PP_P2P_MAX_CREDITS, 0,
                   "receive buffers per channel for CTS/FIN/ACK (derived: max(8, pipeline))",
                   NULL, D),
    PP_PARAM_KEYED("send_buffers", P, send_buffers, PP_PARAM_UINT, 1, 65536, 0,
                   "eager send buffers shared by all peers (derived: 64)", NULL, D),
    PP_PARAM_KEYED("max_requests", P, max_requests, PP_PARAM_UINT, 1, PP_P2P_MAX_REQUESTS, 0,
                   "outstanding requests, posted receives included (derived: 2 x (sq + rq "
                   "depth), at least 1024)",
                   NULL, D),
    PP_PARAM_KEYED("rcache_entries", P, rcache_entries, PP_PARAM_UINT, 1, 65536, 0,
                   "registration cache entries (derived: 256)", NULL, D),
    PP_PARAM_KEYED("rcache_bytes", P, rcache_bytes, PP_PARAM_SIZE, PP_RCACHE_PAGE * 2ull,
                   1ull << 40, 0, "bytes the registration cache covers (derived)", NULL, D),
    PP_PARAM_UINT(P, record, 0, PP_P2P_MAX_RECORD, 4096,
                  "completed receives recorded per rank for the report"),
    PP_PARAM_BOOL(P, srq, 0,
                  "eager receives from one shared receive queue per rank, credits lent from its "
                  "pool (needs channels 1)"),
    PP_PARAM_KEYED("srq_buffers", P, srq_buffers, PP_PARAM_UINT, 2, PP_P2P_MAX_SRQ, 0,
                   "srq: eager buffers of the shared pool (derived: 256; raised to peers x "
                   "channels + srq_limit + 1)",
                   NULL, D),
    PP_PARAM_KEYED("srq_limit", P, srq_limit, PP_PARAM_UINT, 1, PP_P2P_MAX_SRQ - 1, 0,
                   "srq: the SRQ's limit watermark, buffers never lent (derived: srq_buffers / "
                   "16, at least 1)",
                   NULL, D),
};
#undef P
#undef D
const size_t pp_p2p_param_count = sizeof pp_p2p_param_table / sizeof pp_p2p_param_table[0];
_Static_assert(sizeof pp_p2p_param_table / sizeof pp_p2p_param_table[0] == PP_P2P_PARAM_COUNT,
               "PP_P2P_PARAM_COUNT (prepost/p2p_cfg.h) is the table's entry count");
