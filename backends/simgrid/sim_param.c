/* Field tables of the simulated backend's settings: a NIC profile's integer keys (struct
 * pp_nic_profile, prepost/simnic.h), the fault catalogue (struct pp_faults, the same), the
 * scenario's `limits` (struct pp_sim_config, prepost/simrun.h) and its generated cluster
 * (`platform.cluster`, struct pp_platform, the same). Defaults: pp_nic_profile_default() and a scenario that does not say
 * (tests/test_param.c checks). */
#include "prepost/param.h"
#include "prepost/simnic.h"
#include "prepost/simrun.h"

const char *const pp_rc_model_names[PP_RC_MODEL_COUNT] = {[PP_RC_IBTA] = "ibta",
                                                           [PP_RC_RXE] = "rxe"};

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
    PP_PARAM_KEYED("rc_model", N, rc_model, PP_PARAM_ENUM, 0, PP_RC_MODEL_COUNT - 1, PP_RC_IBTA,
                   "retry rules: ibta (the spec's) or rxe (Soft-RoCE's: retry_cnt 7 retries "
                   "forever, the ACK timer runs through RNR waits, a WRITE_WITH_IMM RNR-NAKed at its "
                   "last packet)",
                   pp_rc_model_names, 0),
};
#undef N
const size_t pp_nic_param_count = sizeof pp_nic_param_table / sizeof pp_nic_param_table[0];

#define F struct pp_faults
#define DUR(key, m, doc) PP_PARAM_KEYED(key, F, m, PP_PARAM_DURATION, 0, UINT64_MAX, 0, doc, NULL, 0)
#define RANK(key, m, doc)                                                      \
  PP_PARAM_KEYED(key, F, m, PP_PARAM_UINT, 0, UINT32_MAX, 0, doc, NULL, PP_PARAM_F_RANK)
/* In the order the explorer writes them (tools/explore/explore_gen.c). */
const struct pp_param pp_faults_param_table[] = {
    PP_PARAM_PROB_KEYED("loss", F, loss, PP_PARAM_PROB_BELOW_ONE,
                        "probability that any packet (request, response, ACK) is dropped"),
    DUR("until", until_ns, "the faults stop at this simulated time (0: never; not byzantine)"),
    DUR("jitter", jitter_ns,
        "each wire transfer leaves its NIC U[0, jitter] late (never overtaking an earlier one)"),
    PP_PARAM_PROB_KEYED("scramble", F, scramble, PP_PARAM_PROB_ONE,
                        "probability that an RDMA WRITE over 64 B is placed out of order"),
    DUR("scramble_delay", scramble_ns,
        "the rest of a scrambled WRITE lands this much later (or with the QP's next packet)"),
    DUR("srq_delay", srq_delay_ns, "a WQE posted to an SRQ becomes usable only this much later"),
    DUR("qp_error_at", qp_error_ns,
        "at this time a QP of qp_error_host is forced to ERROR (0: never)"),
    RANK("qp_error_host", qp_error_host, "the host whose QP qp_error_at breaks"),
    PP_PARAM_KEYED("qp_error_qp", F, qp_error_qp, PP_PARAM_UINT, 0, UINT32_MAX, 0,
                   "which QP (its number mod the live QPs)", NULL, 0),
    DUR("rkey_invalidate_at", rkey_ns,
        "at this time every remotely accessible MR of rkey_host gets a new rkey (0: never)"),
    RANK("rkey_host", rkey_host, "the host whose rkeys rkey_invalidate_at changes"),
    DUR("cq_delay", cq_delay_ns, "a rank polls a completion U[0, cq_delay] after it is queued"),
    PP_PARAM_RANKS_KEYED("pause_ranks", F, pause_ranks,
                         "these ranks (0..63) freeze, no polling or timers, during the pause"),
    DUR("pause_at", pause_at_ns, "the pause starts at this time"),
    DUR("pause", pause_ns, "and lasts this long (0: no pause)"),
    PP_PARAM_KEYED("order_bits", F, order_bits, PP_PARAM_UINT, 0, 64, 0,
                   "exhaustive mode: the first this many wire transfers of the fabric ...", NULL,
                   0),
    PP_PARAM_KEYED("order_mask", F, order_mask, PP_PARAM_UINT, 0, UINT64_MAX, 0,
                   "... leave order_window late when their bit is set here", NULL, 0),
    DUR("order_window", order_window_ns, "how late a transfer order_mask selects leaves"),
    PP_PARAM_PROB_KEYED("byzantine", F, byzantine, PP_PARAM_PROB_ONE,
                        "probability that a message byzantine_rank sends is mutated (0: off)"),
    RANK("byzantine_rank", byzantine_rank, "the lying rank"),
};
#undef RANK
#undef DUR
#undef F
const size_t pp_faults_param_count =
    sizeof pp_faults_param_table / sizeof pp_faults_param_table[0];

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

#define P struct pp_platform
const struct pp_param pp_cluster_param_table[] = {
    PP_PARAM_BANDWIDTH_KEYED("bandwidth", P, bandwidth_bps, PP_PARAM_BW_100G,
                             "each host's link to the one switch, bits/s"),
    PP_PARAM_KEYED("latency", P, latency_ns, PP_PARAM_DURATION, 0, UINT64_MAX, 1000,
                   "each host link's latency", NULL, 0),
};
#undef P
const size_t pp_cluster_param_count =
    sizeof pp_cluster_param_table / sizeof pp_cluster_param_table[0];
