/* Field tables of the simulated backend's settings: a NIC profile's integer keys (struct
 * pp_nic_profile, prepost/simnic.h) and the scenario's `limits` (struct pp_sim_config,
 * prepost/simrun.h). Defaults: pp_nic_profile_default() and a scenario that does not say
 * (tests/test_param.c checks). */
#include "prepost/param.h"
#include "prepost/simnic.h"
#include "prepost/simrun.h"

#define N struct pp_nic_profile
const struct pp_param pp_nic_param_table[] = {
    PP_PARAM_UINT(N, mtu, 256, 4096, 4096,
                  "largest path MTU of the port: 256, 512, 1024, 2048 or 4096 bytes"),
    PP_PARAM_UINT(N, header_bytes, 0, 4096, 82,
                  "wire overhead per MTU packet (RoCEv2/IPv4: preamble, Ethernet, IPv4, UDP, "
                  "BTH, ICRC, FCS and the inter-frame gap are 82)"),
    PP_PARAM_KEYED("wqe", N, wqe_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 50,
                   "NIC time to process one send WQE (serialises transmissions)", NULL, 0),
    PP_PARAM_UINT(N, ack_every, 1, UINT32_MAX, 16, "the responder ACKs every this many packets"),
    PP_PARAM_KEYED("ack_delay", N, ack_delay_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 1000,
                   "... or this long after the first unacknowledged one (0: at once)", NULL, 0),
    PP_PARAM_UINT(N, max_qp, 1, UINT32_MAX, 4096, "QPs the device has"),
    PP_PARAM_UINT(N, max_qp_wr, 1, UINT32_MAX, 16384, "work requests per queue"),
    PP_PARAM_UINT(N, max_srq, 0, UINT32_MAX, 1024, "shared receive queues"),
    PP_PARAM_UINT(N, max_mr, 1, UINT32_MAX, 65536, "memory registrations"),
    PP_PARAM_UINT(N, cq_depth, 1, UINT32_MAX, 65536, "completion queue entries"),
    PP_PARAM_UINT(N, max_rd_atomic, 1, 255, 16, "RDMA READs in flight per QP (max_qp_rd_atom)"),
    PP_PARAM_KEYED("train", N, train_max, PP_PARAM_UINT, 1, 256, 1,
                   "WQEs of one QP that may leave as one wire transfer (doorbell batching)",
                   NULL, 0),
    PP_PARAM_KEYED("rnr_tick", N, rnr_tick_ns, PP_PARAM_DURATION, 0, PP_RNR_DELAY_MAX_NS, 0,
                   "RNR delays are rounded up to a whole number of these (a kernel timer's "
                   "jiffy; 0: not rounded)",
                   NULL, 0),
    PP_PARAM_KEYED("rnr_min", N, rnr_min_ns, PP_PARAM_DURATION, 0, PP_RNR_DELAY_MAX_NS, 0,
                   "an RNR delay is at least this long (0: the spec's delays)", NULL, 0),
};
#undef N
const size_t pp_nic_param_count = sizeof pp_nic_param_table / sizeof pp_nic_param_table[0];

#define S struct pp_sim_config
const struct pp_param pp_limits_param_table[] = {
    PP_PARAM_KEYED("max_sim_time", S, max_sim_time_ns, PP_PARAM_DURATION, 1, UINT64_MAX,
                   60000000000ull, "the run stops there (outcome timeout, exit 3)", NULL, 0),
    PP_PARAM_KEYED("no_progress", S, no_progress_ns, PP_PARAM_DURATION, 0, UINT64_MAX,
                   1000000000ull,
                   "the run stops when no rank made progress for this long (0: never)", NULL,
                   0),
    PP_PARAM_KEYED("memory", S, memory_limit, PP_PARAM_SIZE, 1ull << 20, 1ull << 50, 0,
                   "refuse a run whose estimated memory exceeds this (derived: only RLIMIT_AS)",
                   NULL, PP_PARAM_F_DERIVED),
};
#undef S
const size_t pp_limits_param_count =
    sizeof pp_limits_param_table / sizeof pp_limits_param_table[0];
