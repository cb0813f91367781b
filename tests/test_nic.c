/* engine/nic: names and numbers equal ibverbs', IB timer tables, MTU helpers, QP transitions,
 * the ops table completeness check. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "prepost/nic.h"

/* enum ibv_wc_status, by value (rdma-core's libibverbs/verbs.h). */
static const char *const ibv_wc_status[] = {
    "SUCCESS",         "LOC_LEN_ERR",        "LOC_QP_OP_ERR",   "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",    "WR_FLUSH_ERR",       "MW_BIND_ERR",     "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",  "REM_INV_REQ_ERR",    "REM_ACCESS_ERR",  "REM_OP_ERR",
    "RETRY_EXC_ERR",   "RNR_RETRY_EXC_ERR",  "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",   "INV_EECN_ERR",       "INV_EEC_STATE_ERR", "FATAL_ERR",
    "RESP_TIMEOUT_ERR", "GENERAL_ERR",
};

Test(nic, wc_status_count_is_ibverbs)
{
  cr_assert_eq(PP_WC_STATUS_COUNT, 22);
  cr_assert_eq(sizeof(ibv_wc_status) / sizeof(ibv_wc_status[0]), 22);
}

Test(nic, wc_status_names_follow_ibverbs_numbering)
{
  for (int i = 0; i < 22; i++)
    cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)i), ibv_wc_status[i], "status %d", i);
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)13), "RNR_RETRY_EXC_ERR");
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)5), "WR_FLUSH_ERR");
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)12), "RETRY_EXC_ERR");
  cr_assert_eq(PP_WC_RNR_RETRY_EXC_ERR, 13);
  cr_assert_eq(PP_WC_WR_FLUSH_ERR, 5);
  cr_assert_eq(PP_WC_GENERAL_ERR, 21);
}

Test(nic, wc_status_out_of_range)
{
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)22), "?");
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)-1), "?");
  cr_assert_str_eq(pp_wc_status_name((enum pp_wc_status)1000), "?");
}

Test(nic, wc_status_from_name_round_trip)
{
  for (int i = 0; i < PP_WC_STATUS_COUNT; i++)
    cr_assert_eq(pp_wc_status_from_name(pp_wc_status_name((enum pp_wc_status)i)), i);
  for (int i = 0; i < 22; i++)
    cr_assert_eq(pp_wc_status_from_name(ibv_wc_status[i]), i);
  cr_assert_eq(pp_wc_status_from_name("RNR_RETRY_EXC_ERR"), 13);
  cr_assert_eq(pp_wc_status_from_name("NOPE"), -1);
  cr_assert_eq(pp_wc_status_from_name(""), -1);
  cr_assert_eq(pp_wc_status_from_name("?"), -1);
  cr_assert_eq(pp_wc_status_from_name("rnr_retry_exc_err"), -1, "names are case-sensitive");
  cr_assert_eq(pp_wc_status_from_name("SUCCESS "), -1);
}

Test(nic, opcode_names)
{
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)0), "SEND");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)1), "RDMA_WRITE");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)2), "RDMA_READ");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)128), "RECV");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)129), "RECV_RDMA_WITH_IMM");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)3), "?");
  cr_assert_str_eq(pp_wc_opcode_name((enum pp_wc_opcode)127), "?");

  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)0), "RDMA_WRITE");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)1), "RDMA_WRITE_WITH_IMM");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)2), "SEND");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)3), "SEND_WITH_IMM");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)4), "RDMA_READ");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)5), "?");
  cr_assert_str_eq(pp_wr_opcode_name((enum pp_wr_opcode)-1), "?");
}

Test(nic, qp_state_names)
{
  static const char *const ibv[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  for (int i = 0; i < 7; i++)
    cr_assert_str_eq(pp_qp_state_name((enum pp_qp_state)i), ibv[i], "state %d", i);
  cr_assert_str_eq(pp_qp_state_name((enum pp_qp_state)7), "?");
  cr_assert_str_eq(pp_qp_state_name((enum pp_qp_state)-1), "?");
}

Test(nic, event_names)
{
  cr_assert_str_eq(pp_event_name((enum pp_event_type)0), "CQ_ERR");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)1), "QP_FATAL");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)2), "QP_REQ_ERR");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)3), "QP_ACCESS_ERR");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)4), "COMM_EST");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)14), "SRQ_ERR");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)15), "SRQ_LIMIT_REACHED");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)16), "QP_LAST_WQE_REACHED");
  /* ibverbs values the subset leaves out */
  cr_assert_str_eq(pp_event_name((enum pp_event_type)5), "?");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)13), "?");
  cr_assert_str_eq(pp_event_name((enum pp_event_type)17), "?");
}

Test(nic, flag_and_mask_values_are_ibverbs)
{
  cr_assert_eq(PP_ACCESS_LOCAL_WRITE, 1);
  cr_assert_eq(PP_ACCESS_REMOTE_WRITE, 2);
  cr_assert_eq(PP_ACCESS_REMOTE_READ, 4);
  cr_assert_eq(PP_SEND_SIGNALED, 2);
  cr_assert_eq(PP_WC_WITH_IMM, 2);
  cr_assert_eq(PP_QP_STATE, 1 << 0);
  cr_assert_eq(PP_QP_ACCESS_FLAGS, 1 << 3);
  cr_assert_eq(PP_QP_PATH_MTU, 1 << 8);
  cr_assert_eq(PP_QP_TIMEOUT, 1 << 9);
  cr_assert_eq(PP_QP_RETRY_CNT, 1 << 10);
  cr_assert_eq(PP_QP_RNR_RETRY, 1 << 11);
  cr_assert_eq(PP_QP_RQ_PSN, 1 << 12);
  cr_assert_eq(PP_QP_MAX_QP_RD_ATOMIC, 1 << 13);
  cr_assert_eq(PP_QP_MIN_RNR_TIMER, 1 << 15);
  cr_assert_eq(PP_QP_SQ_PSN, 1 << 16);
  cr_assert_eq(PP_QP_MAX_DEST_RD_ATOMIC, 1 << 17);
  cr_assert_eq(PP_QP_DEST_QPN, 1 << 20);
  cr_assert_eq(PP_MTU_256, 1);
  cr_assert_eq(PP_MTU_4096, 5);
  cr_assert_eq(PP_RNR_RETRY_INFINITE, 7);
}

/* The IB min_rnr_timer encoding (IBTA spec; the Linux rxe driver holds the same table), in ns. */
static const uint64_t rnr_table_ns[32] = {
    655360000, 10000,    20000,    30000,    40000,    60000,     80000,     120000,
    160000,    240000,   320000,   480000,   640000,   960000,    1280000,   1920000,
    2560000,   3840000,  5120000,  7680000,  10240000, 15360000,  20480000,  30720000,
    40960000,  61440000, 81920000, 122880000, 163840000, 245760000, 327680000, 491520000,
};

Test(nic, rnr_timer_matches_ib_table)
{
  for (unsigned code = 0; code < 32; code++)
    cr_assert_eq(pp_rnr_timer_ns(code), rnr_table_ns[code], "code %u: %llu ns, want %llu", code,
                 (unsigned long long)pp_rnr_timer_ns(code),
                 (unsigned long long)rnr_table_ns[code]);
  /* the spot values people remember */
  cr_assert_eq(pp_rnr_timer_ns(1), 10000);     /* 10 us */
  cr_assert_eq(pp_rnr_timer_ns(12), 640000);   /* NCCL's 0.64 ms */
  cr_assert_eq(pp_rnr_timer_ns(25), 61440000); /* not rxe's 61410 us typo */
}

Test(nic, rnr_timer_monotonic_after_code_0)
{
  for (unsigned code = 2; code < 32; code++)
    cr_assert_gt(pp_rnr_timer_ns(code), pp_rnr_timer_ns(code - 1));
  cr_assert_gt(pp_rnr_timer_ns(0), pp_rnr_timer_ns(31), "code 0 is the longest delay");
}

Test(nic, ack_timeout)
{
  cr_assert_eq(pp_ack_timeout_ns(0), 0, "0 means infinite");
  cr_assert_eq(pp_ack_timeout_ns(1), 8192);
  cr_assert_eq(pp_ack_timeout_ns(10), 4096ull << 10);
  cr_assert_eq(pp_ack_timeout_ns(14), 4096ull << 14);
  cr_assert_eq(pp_ack_timeout_ns(14), 67108864ull); /* ~67 ms */
  cr_assert_eq(pp_ack_timeout_ns(31), 4096ull << 31);
  for (unsigned t = 1; t < 32; t++)
    cr_assert_eq(pp_ack_timeout_ns(t), 4096ull << t, "timeout %u", t);
}

Test(nic, mtu_bytes)
{
  cr_assert_eq(pp_mtu_bytes(PP_MTU_256), 256);
  cr_assert_eq(pp_mtu_bytes(PP_MTU_512), 512);
  cr_assert_eq(pp_mtu_bytes(PP_MTU_1024), 1024);
  cr_assert_eq(pp_mtu_bytes(PP_MTU_2048), 2048);
  cr_assert_eq(pp_mtu_bytes(PP_MTU_4096), 4096);
  cr_assert_eq(pp_mtu_bytes((enum pp_mtu)0), 0);
  cr_assert_eq(pp_mtu_bytes((enum pp_mtu)6), 0);
  cr_assert_eq(pp_mtu_bytes((enum pp_mtu)-1), 0);
}

Test(nic, mtu_from_bytes)
{
  for (int m = PP_MTU_256; m <= PP_MTU_4096; m++)
    cr_assert_eq(pp_mtu_from_bytes(pp_mtu_bytes((enum pp_mtu)m)), m);
  cr_assert_eq(pp_mtu_from_bytes(4096), PP_MTU_4096);
  cr_assert_eq(pp_mtu_from_bytes(0), 0);
  cr_assert_eq(pp_mtu_from_bytes(1000), 0);
  cr_assert_eq(pp_mtu_from_bytes(1500), 0);
  cr_assert_eq(pp_mtu_from_bytes(9000), 0);
  cr_assert_eq(pp_mtu_from_bytes(8192), 0);
  cr_assert_eq(pp_mtu_from_bytes(128), 0);
  cr_assert_eq(pp_mtu_from_bytes(257), 0);
}

Test(nic, wr_consumes_recv)
{
  cr_assert(pp_wr_consumes_recv(PP_WR_SEND));
  cr_assert(pp_wr_consumes_recv(PP_WR_SEND_WITH_IMM));
  cr_assert(pp_wr_consumes_recv(PP_WR_RDMA_WRITE_WITH_IMM));
  cr_assert_not(pp_wr_consumes_recv(PP_WR_RDMA_WRITE));
  cr_assert_not(pp_wr_consumes_recv(PP_WR_RDMA_READ));
  cr_assert_not(pp_wr_consumes_recv((enum pp_wr_opcode)99));
}

Test(nic, qp_transitions_for_rc)
{
  enum { R = PP_QPS_RESET, I = PP_QPS_INIT, RTR = PP_QPS_RTR, RTS = PP_QPS_RTS, E = PP_QPS_ERR };
  static const int states[] = {R, I, RTR, RTS, E};
  /* ok[from][to] over RESET, INIT, RTR, RTS, ERR: ibverbs' RC table (kernel qp_state_table) */
  static const int ok[5][5] = {
      /*           RESET INIT RTR RTS ERR */
      /* RESET */ {1, 1, 0, 0, 1},
      /* INIT  */ {1, 1, 1, 0, 1},
      /* RTR   */ {1, 0, 0, 1, 1},
      /* RTS   */ {1, 0, 0, 1, 1},
      /* ERR   */ {1, 0, 0, 0, 1},
  };
  for (int f = 0; f < 5; f++)
    for (int t = 0; t < 5; t++)
      cr_assert_eq(!!pp_qp_transition_ok((enum pp_qp_state)states[f], (enum pp_qp_state)states[t]),
                   ok[f][t], "%s -> %s", pp_qp_state_name((enum pp_qp_state)states[f]),
                   pp_qp_state_name((enum pp_qp_state)states[t]));
  /* every state may be reset or moved to ERR */
  for (int s = PP_QPS_RESET; s <= PP_QPS_ERR; s++) {
    cr_assert(pp_qp_transition_ok((enum pp_qp_state)s, PP_QPS_RESET));
    cr_assert(pp_qp_transition_ok((enum pp_qp_state)s, PP_QPS_ERR));
  }
  /* ERR is absorbing until reset */
  cr_assert_not(pp_qp_transition_ok(PP_QPS_ERR, PP_QPS_RTS));
  cr_assert_not(pp_qp_transition_ok(PP_QPS_ERR, PP_QPS_INIT));
}

/* ------------------------------------------------------------------ ops table */

static int f_reg_mr(void *n, void *a, size_t l, unsigned acc, struct pp_mr *mr)
{
  (void)n, (void)a, (void)l, (void)acc, (void)mr;
  return PP_OK;
}
static int f_dereg_mr(void *n, const struct pp_mr *mr) { (void)n, (void)mr; return PP_OK; }
static int f_create_srq(void *n, const struct pp_srq_init_attr *a, uint32_t *s)
{
  (void)n, (void)a, (void)s;
  return PP_OK;
}
static int f_modify_srq(void *n, uint32_t s, uint32_t l) { (void)n, (void)s, (void)l; return PP_OK; }
static int f_destroy_srq(void *n, uint32_t s) { (void)n, (void)s; return PP_OK; }
static int f_create_qp(void *n, const struct pp_qp_init_attr *a, uint32_t *q)
{
  (void)n, (void)a, (void)q;
  return PP_OK;
}
static int f_modify_qp(void *n, uint32_t q, const struct pp_qp_attr *a, unsigned m)
{
  (void)n, (void)q, (void)a, (void)m;
  return PP_OK;
}
static int f_destroy_qp(void *n, uint32_t q) { (void)n, (void)q; return PP_OK; }
static int f_post_send(void *n, uint32_t q, const struct pp_send_wr *w)
{
  (void)n, (void)q, (void)w;
  return PP_OK;
}
static int f_post_recv(void *n, uint32_t q, const struct pp_recv_wr *w)
{
  (void)n, (void)q, (void)w;
  return PP_OK;
}
static int f_post_srq_recv(void *n, uint32_t s, const struct pp_recv_wr *w)
{
  (void)n, (void)s, (void)w;
  return PP_OK;
}
static int f_query_counters(void *n, struct pp_nic_counters *c) { (void)n, (void)c; return PP_OK; }

static const struct pp_nic_ops full_ops = {
    .name = "fake",
    .reg_mr = f_reg_mr,
    .dereg_mr = f_dereg_mr,
    .create_srq = f_create_srq,
    .modify_srq = f_modify_srq,
    .destroy_srq = f_destroy_srq,
    .create_qp = f_create_qp,
    .modify_qp = f_modify_qp,
    .destroy_qp = f_destroy_qp,
    .post_send = f_post_send,
    .post_recv = f_post_recv,
    .post_srq_recv = f_post_srq_recv,
    .query_counters = f_query_counters,
};

Test(nic, ops_complete)
{
  cr_assert_eq(pp_nic_ops_complete(&full_ops), 1);
  cr_assert_eq(pp_nic_ops_complete(NULL), 0);
  struct pp_nic_ops empty = {0};
  cr_assert_eq(pp_nic_ops_complete(&empty), 0);
}

Test(nic, ops_missing_any_one_slot_is_incomplete)
{
#define SLOT(f) {#f, offsetof(struct pp_nic_ops, f)}
  static const struct {
    const char *name;
    size_t off;
  } slots[] = {
      SLOT(name),        SLOT(reg_mr),    SLOT(dereg_mr),      SLOT(create_srq),
      SLOT(modify_srq),  SLOT(destroy_srq), SLOT(create_qp),   SLOT(modify_qp),
      SLOT(destroy_qp),  SLOT(post_send), SLOT(post_recv),     SLOT(post_srq_recv),
      SLOT(query_counters),
  };
#undef SLOT
  size_t n = sizeof(slots) / sizeof(slots[0]);
  /* every pointer of the struct is listed above */
  cr_assert_eq(n * sizeof(void *), sizeof(struct pp_nic_ops),
               "struct pp_nic_ops grew: list the new slot here");
  for (size_t i = 0; i < n; i++) {
    struct pp_nic_ops ops = full_ops;
    memset((char *)&ops + slots[i].off, 0, sizeof(void *));
    cr_assert_eq(pp_nic_ops_complete(&ops), 0, "slot %s missing but the table passes",
                 slots[i].name);
  }
}
