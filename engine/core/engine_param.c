/* Field tables of the core configuration's sections (prepost/engine.h): `qp` (struct
 * pp_qp_params) and the stream keys of `workload` (struct pp_workload). The defaults are those
 * of a scenario that does not say (tools/scenario/scenario.c); tests/test_param.c checks both agree. */
#include "prepost/engine.h"
#include "prepost/param.h"

const struct pp_param pp_qp_param_table[] = {
    PP_PARAM_UINT(struct pp_qp_params, min_rnr_timer, 0, 31, 12,
                  "the RNR NAK timer code a receiver without a buffer asks senders to wait "
                  "(ibverbs min_rnr_timer; 12 = 0.64 ms, 0 = 655 ms)"),
    PP_PARAM_UINT(struct pp_qp_params, rnr_retry, 0, 7, 7,
                  "RNR retries before RNR_RETRY_EXC_ERR (7: for ever)"),
    PP_PARAM_UINT(struct pp_qp_params, timeout, 0, 31, 14,
                  "local ACK timeout code: 4.096 us * 2^timeout (0: infinite)"),
    PP_PARAM_UINT(struct pp_qp_params, retry_cnt, 0, 7, 7,
                  "transport retries (lost packets) before RETRY_EXC_ERR"),
    PP_PARAM_UINT(struct pp_qp_params, max_rd_atomic, 1, 255, 16,
                  "RDMA READs in flight per QP (lowered to the NIC's max_rd_atomic)"),
    PP_PARAM_UINT(struct pp_qp_params, mtu, 256, 4096, 4096,
                  "path MTU in bytes: 256, 512, 1024, 2048 or 4096 (lowered to the NIC's)"),
    PP_PARAM_UINT(struct pp_qp_params, sq_depth, 1, PP_MAX_QUEUE_DEPTH, 128,
                  "send queue slots per QP (lowered to the NIC's max_qp_wr)"),
    PP_PARAM_UINT(struct pp_qp_params, rq_depth, 1, PP_MAX_QUEUE_DEPTH, 64,
                  "receive buffers per QP (lowered to the NIC's max_qp_wr)"),
};
const size_t pp_qp_param_count = sizeof pp_qp_param_table / sizeof pp_qp_param_table[0];

static const char *const workload_names[] = {
#define PP_X(id, name, desc) name,
    PP_WORKLOAD_LIST(PP_X)
#undef PP_X
};
static const char *const pattern_names[] = {
#define PP_X(id, name, desc) name,
    PP_PATTERN_LIST(PP_X)
#undef PP_X
};

#define W struct pp_workload
const struct pp_param pp_workload_param_table[] = {
    PP_PARAM_KEYED("kind", W, kind, PP_PARAM_ENUM, 0, PP_WORKLOAD_COUNT - 1, PP_WORKLOAD_STREAM,
                   "what the ranks do: stream, script, traffic, app, collective or pingpong",
                   workload_names, 0),
    PP_PARAM_KEYED("pattern", W, pattern, PP_PARAM_ENUM, 0, PP_PATTERN_COUNT - 1,
                   PP_PATTERN_PAIR, "who sends to whom (collective: ring)", pattern_names, 0),
    PP_PARAM_UINT(W, messages, 1, PP_MAX_MESSAGES, 100,
                  "messages per sending rank (pingpong: round trips recorded)"),
    PP_PARAM_SIZE(W, size, PP_MSG_HEADER, PP_MAX_MSG_SIZE, 4096,
                  "bytes per message (traffic: the smallest)"),
    PP_PARAM_KEYED("interval", W, interval_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "gap between two posts of a sender (pingpong: pause between round trips; 0: back to back)", NULL, 0),
    PP_PARAM_KEYED("consume", W, consume_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "a receiver holds each buffer this long before re-posting it", NULL, 0),
    PP_PARAM_KEYED("consume_jitter", W, consume_jitter_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "each hold lasts consume + U[0, this] (re-posts late and out of order)", NULL,
                   0),
    PP_PARAM_KEYED("post_delay", W, post_delay_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 0,
                   "receivers post their first buffers this long after the start", NULL, 0),
    PP_PARAM_UINT(W, warmup, 0, PP_MAX_MESSAGES, 0,
                  "pingpong: round trips run before the recorded ones, not recorded"),
};
#undef W
const size_t pp_workload_param_count =
    sizeof pp_workload_param_table / sizeof pp_workload_param_table[0];
