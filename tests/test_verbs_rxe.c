/*
 * The verbs backend on a real device (Soft-RoCE rxe in the test guest: tests/verbs/suite.sh via
 * tools/guest/run; not a ctest). Asserts outcomes, never timing: the RC rules of the IBTA spec
 * (as summarised in backends/simgrid/README.md) as rxe applies them through backends/verbs/verbsnic.c, and the driver's bootstrap
 * failures with a device present. Scenario runs and the simulator parity are in
 * tests/verbs/scenarios.py.
 *
 * Two QPs of one process on one device, connected to each other (loopback), as in the recipe's
 * RNR probe. Environment: VERBS_DEVICE (default: the first ACTIVE port).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/verbs/boot.h"
#include "prepost/verbsnic.h"
#include "prepost/verbsrun.h"
#include "scratch.h"

#define SCENARIOS PREPOST_MODELS_DIR "/scenarios/"
#define BUF 65536

struct pair {
  struct vnic *n;
  uint32_t qa, qb; /* qa is rank 0's QP to rank 1, qb the other way */
  uint32_t srq;
  struct pp_mr ma, mb;
  uint8_t *a, *b;
};

static struct pair P;

static struct vnic_config nic_cfg(void)
{
  struct vnic_config c = {.gid_index = -1};
  const char *d = getenv("VERBS_DEVICE");
  if (d)
    snprintf(c.device, sizeof(c.device), "%s", d);
  return c;
}

static void open_nic(void)
{
  char err[600];
  struct vnic_config c = nic_cfg();
  enum pp_status s = vnic_open(&c, 2, &P.n, err, sizeof(err));
  cr_assert_eq(s, PP_OK, "these tests need an RDMA device (run them in the guest: "
                         "tools/guest/run tests/verbs/suite.sh): %s", err);
  struct vnic_addr me;
  vnic_local_addr(P.n, &me);
  vnic_set_peer_addr(P.n, 0, &me);
  vnic_set_peer_addr(P.n, 1, &me);
}

static void reg(unsigned access_b)
{
  P.a = aligned_alloc(4096, BUF);
  P.b = aligned_alloc(4096, BUF);
  memset(P.a, 0, BUF);
  memset(P.b, 0, BUF);
  cr_assert_eq(vnic_ops.reg_mr(P.n, P.a, BUF, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_READ, &P.ma),
               PP_OK);
  cr_assert_eq(vnic_ops.reg_mr(P.n, P.b, BUF, access_b, &P.mb), PP_OK);
}

static uint32_t qp(uint32_t peer, uint32_t srq)
{
  uint32_t q;
  struct pp_qp_init_attr ia = {.srq_num = srq, .max_send_wr = 16, .max_recv_wr = srq ? 0 : 16,
                               .max_send_sge = 1, .max_recv_sge = 1, .peer = peer};
  cr_assert_eq(vnic_ops.create_qp(P.n, &ia, &q), PP_OK);
  struct pp_qp_attr init = {.qp_state = PP_QPS_INIT,
                            .qp_access_flags = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE |
                                               PP_ACCESS_REMOTE_READ};
  cr_assert_eq(vnic_ops.modify_qp(P.n, q, &init, PP_QP_STATE | PP_QP_ACCESS_FLAGS), PP_OK);
  return q;
}

static void connect_qp(uint32_t q, uint32_t dest, uint8_t rnr_retry)
{
  struct pp_qp_attr rtr = {.qp_state = PP_QPS_RTR, .path_mtu = PP_MTU_4096, .dest_qp_num = dest,
                           .rq_psn = 7, .max_dest_rd_atomic = 4, .min_rnr_timer = 1};
  cr_assert_eq(vnic_ops.modify_qp(P.n, q, &rtr,
                                  PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN |
                                      PP_QP_MAX_DEST_RD_ATOMIC | PP_QP_MIN_RNR_TIMER),
               PP_OK, "RTR (the path MTU above the active MTU is clamped)");
  struct pp_qp_attr rts = {.qp_state = PP_QPS_RTS, .sq_psn = 7, .timeout = 14, .retry_cnt = 7,
                           .rnr_retry = rnr_retry, .max_rd_atomic = 4};
  cr_assert_eq(vnic_ops.modify_qp(P.n, q, &rts,
                                  PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                                      PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC),
               PP_OK);
}

/* Two connected QPs; qa uses rnr_retry `rnr`. B's receives go to an SRQ when srq != 0. */
static void setup_pair(uint8_t rnr, unsigned access_b, uint32_t srq_limit)
{
  open_nic();
  reg(access_b);
  if (srq_limit) {
    struct pp_srq_init_attr sa = {.max_wr = 16, .max_sge = 1, .srq_limit = srq_limit};
    cr_assert_eq(vnic_ops.create_srq(P.n, &sa, &P.srq), PP_OK);
  }
  P.qa = qp(1, 0);
  P.qb = qp(0, P.srq);
  connect_qp(P.qa, P.qb, rnr);
  connect_qp(P.qb, P.qa, 7);
}

static void teardown_pair(void)
{
  if (P.n)
    vnic_close(P.n);
  free(P.a);
  free(P.b);
  memset(&P, 0, sizeof(P));
}

TestSuite(rxe, .fini = teardown_pair);

static int post(uint32_t q, enum pp_wr_opcode op, uint32_t len, uint64_t raddr, uint32_t rkey,
                uint32_t imm, uint64_t id)
{
  struct pp_send_wr w = {.wr_id = id, .opcode = op, .send_flags = PP_SEND_SIGNALED, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)P.a, .length = len,
                                      .lkey = P.ma.lkey}},
                         .remote_addr = raddr, .rkey = rkey, .imm_data = imm};
  return vnic_ops.post_send(P.n, q, &w);
}

static void post_recv_b(uint64_t id, uint32_t off)
{
  struct pp_recv_wr w = {.wr_id = id, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)P.b + off, .length = 4096,
                                      .lkey = P.mb.lkey}}};
  cr_assert_eq(P.srq ? vnic_ops.post_srq_recv(P.n, P.srq, &w) : vnic_ops.post_recv(P.n, P.qb, &w),
               PP_OK);
}

/* The next completion of QP q (others are kept for later calls), within 20 s. */
static struct pp_wc held[64];
static int nheld;

static struct pp_wc wait_wc(uint32_t q)
{
  uint64_t dl = boot_now_ns() + 20000000000ull;
  for (;;) {
    for (int i = 0; i < nheld; i++)
      if (held[i].qp_num == q) {
        struct pp_wc w = held[i];
        memmove(&held[i], &held[i + 1], (size_t)(nheld - i - 1) * sizeof(*held));
        nheld--;
        return w;
      }
    struct pp_wc w[8];
    int n = vnic_poll_cq(P.n, w, 8);
    cr_assert_geq(n, 0);
    for (int i = 0; i < n && nheld < 64; i++)
      held[nheld++] = w[i];
    cr_assert_lt(boot_now_ns(), dl, "no completion on QP %u within 20 s", q);
  }
}

static void sleep_ms(int ms)
{
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

/* ================================================================ RNR */

Test(rxe, rnr_retry_0_send_before_the_receive_fails_and_the_qp_dies)
{
  nheld = 0;
  setup_pair(0, PP_ACCESS_LOCAL_WRITE, 0);
  vnic_counters_mark(P.n);
  cr_assert_eq(post(P.qa, PP_WR_SEND, 64, 0, 0, 0, 1), PP_OK);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_RNR_RETRY_EXC_ERR, "got %s", pp_wc_status_name(w.status));
  cr_assert_eq(w.wr_id, 1);
  /* the QP is in ERROR: what is posted next is flushed */
  cr_assert_eq(post(P.qa, PP_WR_SEND, 64, 0, 0, 0, 2), PP_OK);
  w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_WR_FLUSH_ERR, "got %s", pp_wc_status_name(w.status));
  struct pp_nic_counters c;
  cr_assert_eq(vnic_ops.query_counters(P.n, &c), PP_OK, "rxe has hw_counters");
  cr_assert_geq(c.rnr_naks_received, 1);
  cr_assert_geq(c.rnr_naks_sent, 1);
}

Test(rxe, rnr_retry_0_write_with_imm_consumes_a_receive_too)
{
  nheld = 0;
  setup_pair(0, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE_WITH_IMM, 64, (uint64_t)(uintptr_t)P.b, P.mb.rkey, 9, 1),
               PP_OK);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_RNR_RETRY_EXC_ERR, "got %s", pp_wc_status_name(w.status));
}

Test(rxe, plain_rdma_write_never_rnrs)
{
  nheld = 0;
  setup_pair(0, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  memset(P.a, 0x5a, 4096);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE, 4096, (uint64_t)(uintptr_t)P.b + 8192, P.mb.rkey, 0, 1),
               PP_OK);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_SUCCESS, "got %s (no receive posted, rnr_retry 0)",
               pp_wc_status_name(w.status));
  cr_assert_eq(w.opcode, PP_WC_OP_RDMA_WRITE);
  cr_assert_eq(P.b[8192], 0x5a);
  cr_assert_eq(P.b[8192 + 4095], 0x5a);
}

Test(rxe, rnr_retry_7_waits_for_the_late_receive)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE, 0);
  vnic_counters_mark(P.n);
  strcpy((char *)P.a, "hello rnr");
  cr_assert_eq(post(P.qa, PP_WR_SEND, 64, 0, 0, 0, 1), PP_OK);
  sleep_ms(200);
  post_recv_b(2, 0);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_SUCCESS, "got %s", pp_wc_status_name(w.status));
  w = wait_wc(P.qb);
  cr_assert_eq(w.status, PP_WC_SUCCESS);
  cr_assert_eq(w.opcode, PP_WC_OP_RECV);
  cr_assert_eq(w.byte_len, 64);
  cr_assert_str_eq((char *)P.b, "hello rnr");
  struct pp_nic_counters c;
  vnic_ops.query_counters(P.n, &c);
  cr_assert_geq(c.rnr_naks_received, 1, "the send was RNR-NAKed while no receive was posted");
  cr_assert_geq(c.rnr_retries, 1);
}

/* ================================================================ access errors */

Test(rxe, bad_rkey_gives_rem_access_err)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE, 64, (uint64_t)(uintptr_t)P.b, P.mb.rkey ^ 0x5a5a00u,
                    0, 1),
               PP_OK);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_REM_ACCESS_ERR, "got %s", pp_wc_status_name(w.status));
  cr_assert_eq(post(P.qa, PP_WR_SEND, 8, 0, 0, 0, 2), PP_OK);
  cr_assert_eq(wait_wc(P.qa).status, PP_WC_WR_FLUSH_ERR, "the requester QP is in ERROR");
}

Test(rxe, write_outside_the_mr_gives_rem_access_err)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE, 4096, (uint64_t)(uintptr_t)P.b + BUF - 100, P.mb.rkey,
                    0, 1),
               PP_OK);
  cr_assert_eq(wait_wc(P.qa).status, PP_WC_REM_ACCESS_ERR);
}

Test(rxe, write_without_remote_write_access_gives_rem_access_err)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE, 0); /* B registered for local access only */
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE, 64, (uint64_t)(uintptr_t)P.b, P.mb.rkey, 0, 1), PP_OK);
  cr_assert_eq(wait_wc(P.qa).status, PP_WC_REM_ACCESS_ERR);
}

/* ================================================================ data paths */

Test(rxe, write_with_imm_lands_and_carries_the_immediate_in_host_order)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  post_recv_b(5, 0);
  for (int i = 0; i < 4096; i++)
    P.a[i] = (uint8_t)(i * 13);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE_WITH_IMM, 4096, (uint64_t)(uintptr_t)P.b + 16384,
                    P.mb.rkey, 0x01020304u, 1),
               PP_OK);
  cr_assert_eq(wait_wc(P.qa).status, PP_WC_SUCCESS);
  struct pp_wc w = wait_wc(P.qb);
  cr_assert_eq(w.status, PP_WC_SUCCESS);
  cr_assert_eq(w.opcode, PP_WC_OP_RECV_RDMA_WITH_IMM);
  cr_assert(w.wc_flags & PP_WC_WITH_IMM);
  cr_assert_eq(w.imm_data, 0x01020304u);
  cr_assert_eq(w.wr_id, 5);
  cr_assert_eq(memcmp(P.b + 16384, P.a, 4096), 0, "the data went where the requester said");
}

Test(rxe, rdma_read_moves_the_bytes)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_READ | PP_ACCESS_REMOTE_WRITE, 0);
  for (int i = 0; i < 8192; i++)
    P.b[i] = (uint8_t)(i ^ 0x77);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_READ, 8192, (uint64_t)(uintptr_t)P.b, P.mb.rkey, 0, 1),
               PP_OK);
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_SUCCESS, "got %s", pp_wc_status_name(w.status));
  cr_assert_eq(w.opcode, PP_WC_OP_RDMA_READ);
  cr_assert_eq(memcmp(P.a, P.b, 8192), 0);
}

/* ================================================================ SRQ, async events */

Test(rxe, srq_limit_event_is_reported)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE, 4);
  for (uint32_t i = 0; i < 6; i++)
    post_recv_b(10 + i, i * 4096);
  for (uint32_t i = 0; i < 3; i++) {
    cr_assert_eq(post(P.qa, PP_WR_SEND, 32, 0, 0, 0, i), PP_OK);
    cr_assert_eq(wait_wc(P.qa).status, PP_WC_SUCCESS);
    cr_assert_eq(wait_wc(P.qb).status, PP_WC_SUCCESS);
  }
  /* 3 WQEs left < limit 4: the SRQ_LIMIT_REACHED event */
  struct pp_async_event ev = {0};
  bool got = false;
  uint64_t dl = boot_now_ns() + 10000000000ull;
  while (!got && boot_now_ns() < dl) {
    got = vnic_get_async_event(P.n, &ev) && ev.type == PP_EVENT_SRQ_LIMIT_REACHED;
    if (!got)
      sleep_ms(10);
  }
  cr_assert(got, "no SRQ_LIMIT_REACHED within 10 s");
  cr_assert_eq(ev.srq_num, P.srq);
  /* the limit is one-shot: re-arm through modify_srq */
  cr_assert_eq(vnic_ops.modify_srq(P.n, P.srq, 2), PP_OK);
  cr_assert_eq(vnic_ops.modify_srq(P.n, P.srq, 1000), PP_INVALID);
  cr_assert_eq(vnic_ops.destroy_srq(P.n, P.srq), PP_STATE, "a QP still uses it");
}

Test(rxe, srq_empty_rnr_naks_too)
{
  nheld = 0;
  setup_pair(0, PP_ACCESS_LOCAL_WRITE, 1);
  cr_assert_eq(post(P.qa, PP_WR_SEND, 32, 0, 0, 0, 1), PP_OK);
  cr_assert_eq(wait_wc(P.qa).status, PP_WC_RNR_RETRY_EXC_ERR);
}

/* ================================================================ verbs return codes */

Test(rxe, statuses_of_misuse)
{
  nheld = 0;
  open_nic();
  reg(PP_ACCESS_LOCAL_WRITE);
  uint32_t q = qp(1, 0);
  cr_assert_eq(post(q, PP_WR_SEND, 8, 0, 0, 0, 1), PP_STATE, "post_send on an INIT QP");
  struct pp_qp_attr rts = {.qp_state = PP_QPS_RTS};
  cr_assert_eq(vnic_ops.modify_qp(P.n, q, &rts, PP_QP_STATE), PP_STATE, "INIT -> RTS");
  cr_assert_eq(vnic_ops.post_send(P.n, 12345678, &(struct pp_send_wr){0}), PP_NOTFOUND);
  struct pp_mr bogus = {.lkey = 0xfffffff0u};
  cr_assert_eq(vnic_ops.dereg_mr(P.n, &bogus), PP_NOTFOUND);
  uint32_t x;
  struct pp_qp_init_attr bad_peer = {.max_send_wr = 4, .max_recv_wr = 4, .peer = 9};
  cr_assert_eq(vnic_ops.create_qp(P.n, &bad_peer, &x), PP_INVALID, "peer beyond the rank count");
  cr_assert_eq(vnic_ops.reg_mr(P.n, P.a, 64, PP_ACCESS_REMOTE_WRITE, &bogus), PP_INVALID,
               "remote write needs local write");
  cr_assert_eq(vnic_ops.destroy_qp(P.n, q), PP_OK);
  cr_assert_eq(vnic_ops.destroy_qp(P.n, q), PP_NOTFOUND);
}

Test(rxe, thousands_of_registrations)
{
  /* registration caches register one region per buffer: no small fixed table */
  open_nic();
  uint8_t *buf = aligned_alloc(4096, 2000 * 4096);
  struct pp_mr *mr = calloc(2000, sizeof(*mr));
  for (int i = 0; i < 2000; i++)
    cr_assert_eq(vnic_ops.reg_mr(P.n, buf + (size_t)i * 4096, 4096, PP_ACCESS_LOCAL_WRITE, &mr[i]),
                 PP_OK, "registration %d", i);
  for (int i = 0; i < 2000; i += 2)
    cr_assert_eq(vnic_ops.dereg_mr(P.n, &mr[i]), PP_OK);
  cr_assert_eq(vnic_ops.dereg_mr(P.n, &mr[0]), PP_NOTFOUND);
  free(mr);
  vnic_close(P.n);
  P.n = NULL;
  free(buf);
}

Test(rxe, a_full_send_queue_is_again)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE, 0); /* no receive posted: the sends stay outstanding */
  int s = PP_OK, n = 0;
  while (s == PP_OK && n < 4096)
    s = post(P.qa, PP_WR_SEND, 8, 0, 0, 0, (uint64_t)n++);
  cr_assert_eq(s, PP_AGAIN, "after %d sends: %s", n, pp_status_name((enum pp_status)s));
  cr_assert_geq(n, 17, "max_send_wr was 16");
  cr_assert_geq(vnic_sends_outstanding(P.n), 16);
}

Test(rxe, unsignalled_wrs_are_outstanding_until_a_completion_covers_them)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, 0);
  for (uint32_t i = 0; i < 4; i++) {
    struct pp_send_wr w = {.wr_id = 100 + i, .opcode = PP_WR_RDMA_WRITE,
                           .send_flags = i == 3 ? PP_SEND_SIGNALED : 0, .num_sge = 1,
                           .sg_list = {{.addr = (uint64_t)(uintptr_t)P.a, .length = 256,
                                        .lkey = P.ma.lkey}},
                           .remote_addr = (uint64_t)(uintptr_t)P.b + 256 * i, .rkey = P.mb.rkey};
    cr_assert_eq(vnic_ops.post_send(P.n, P.qa, &w), PP_OK);
  }
  cr_assert_eq(vnic_sends_outstanding(P.n), 4, "unsignalled WRs count until covered");
  struct pp_wc w = wait_wc(P.qa);
  cr_assert_eq(w.status, PP_WC_SUCCESS);
  cr_assert_eq(w.wr_id, 103, "only the signalled WR completes");
  cr_assert_eq(vnic_sends_outstanding(P.n), 0, "its completion covers the three before it");
}

static struct vnic_qp_state state_of(const struct vnic_qp_state *q, size_t n, uint32_t qpn)
{
  for (size_t i = 0; i < n; i++)
    if (q[i].qpn == qpn)
      return q[i];
  cr_assert_fail("no state for qp %u", qpn);
  return q[0];
}

/* The states of the pair's QPs: a is P.qa's, b is P.qb's. */
static void pair_states(struct vnic_qp_state *a, struct vnic_qp_state *b)
{
  struct vnic_qp_state q[4];
  cr_assert_eq(vnic_qp_states(P.n, q, 4), 2);
  *a = state_of(q, 2, P.qa), *b = state_of(q, 2, P.qb);
}

/* What a stopped rank prints about its queues (vnic_describe): the device's own PSNs, so the
 * two sides of a stall can be compared: three SENDs from qa to qb move qa's next send PSN and
 * qb's expected receive PSN from 7 (connect_qp) to 10, and nothing else. And the backend's
 * counts the coordinator pairs them with (vnic_qp_states): before anything is polled, the three
 * SENDs are outstanding and take a receive each, qb has five receives posted; after, none is
 * outstanding and qb keeps the two receives no SEND took. */
Test(rxe, describe_gives_each_qp_its_psns_and_the_counts)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE, 0);
  for (uint32_t i = 0; i < 5; i++)
    post_recv_b(20 + i, 4096 * i);
  for (uint32_t i = 0; i < 3; i++)
    cr_assert_eq(post(P.qa, PP_WR_SEND, 64, 0, 0, 0, 10 + i), PP_OK);
  struct vnic_qp_state a, b;
  pair_states(&a, &b);
  cr_assert_eq(a.sq_outstanding, 3, "nothing polled yet");
  cr_assert_eq(a.sq_takes_recv, 3, "a SEND takes a receive");
  cr_assert_eq(b.rq_posted, 5);
  cr_assert_eq(b.srq_num, 0);
  for (uint32_t i = 0; i < 3; i++) {
    cr_assert_eq(wait_wc(P.qa).status, PP_WC_SUCCESS);
    cr_assert_eq(wait_wc(P.qb).status, PP_WC_SUCCESS);
  }
  pair_states(&a, &b);
  cr_assert_eq(a.sq_outstanding, 0);
  cr_assert_eq(a.sq_takes_recv, 0);
  cr_assert_eq(b.rq_posted, 2, "three of five taken");
  cr_assert_eq(a.rq_posted, 0);
  char buf[2048], want[256];
  size_t k = vnic_describe(P.n, buf, sizeof(buf));
  cr_assert_eq(k, strlen(buf));
  cr_assert(strstr(buf, ": completions polled 3 send, 3 receive; posted 3 send, 5 receive WRs; "
                        "0 send WRs outstanding\n"), "%s", buf);
  snprintf(want, sizeof(want),
           "  qp %u (peer 1, remote qp %u): RTS, next send psn 10, expected receive psn 7, 0 send "
           "WRs outstanding (0 take a receive), 0 receives posted\n", P.qa, P.qb);
  cr_assert(strstr(buf, want), "%s\nwanted %s", buf, want);
  snprintf(want, sizeof(want),
           "  qp %u (peer 0, remote qp %u): RTS, next send psn 7, expected receive psn 10, 0 send "
           "WRs outstanding (0 take a receive), 2 receives posted\n", P.qb, P.qa);
  cr_assert(strstr(buf, want), "%s\nwanted %s", buf, want);
  char small[16];
  cr_assert_eq(vnic_describe(P.n, small, sizeof(small)), k, "cut, it still counts the whole");
  cr_assert_eq(strlen(small), sizeof(small) - 1);
}

/* A READ or a WRITE takes no receive at the responder; receives posted to an SRQ are the SRQ's,
 * reported with every QP on it. */
Test(rxe, reads_and_writes_take_no_receive_and_srq_receives_are_counted)
{
  nheld = 0;
  setup_pair(7, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ, 1);
  for (uint32_t i = 0; i < 3; i++)
    post_recv_b(20 + i, 4096 * i);
  uint64_t rb = (uint64_t)(uintptr_t)P.b + 8 * 4096;
  cr_assert_eq(post(P.qa, PP_WR_RDMA_READ, 64, rb, P.mb.rkey, 0, 1), PP_OK);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE, 64, rb, P.mb.rkey, 0, 2), PP_OK);
  cr_assert_eq(post(P.qa, PP_WR_RDMA_WRITE_WITH_IMM, 64, rb, P.mb.rkey, 5, 3), PP_OK);
  struct vnic_qp_state a, b;
  pair_states(&a, &b);
  cr_assert_eq(a.sq_outstanding, 3);
  cr_assert_eq(a.sq_takes_recv, 1, "only the WRITE_WITH_IMM takes one");
  cr_assert_eq(b.srq_num, P.srq);
  cr_assert_eq(b.rq_posted, 3, "the SRQ's receives");
  for (uint32_t i = 0; i < 3; i++)
    cr_assert_eq(wait_wc(P.qa).status, PP_WC_SUCCESS);
  cr_assert_eq(wait_wc(P.qb).status, PP_WC_SUCCESS);
  pair_states(&a, &b);
  cr_assert_eq(a.sq_takes_recv, 0);
  cr_assert_eq(b.rq_posted, 2);
  char buf[2048];
  vnic_describe(P.n, buf, sizeof(buf));
  cr_assert(strstr(buf, "2 receives posted (its SRQ's)\n"), "%s", buf);
}

/* ================================================================ driver: bootstrap with a device */

static char tmpdir[64], *out, *errs;

/* Runs a shell command line with PREPOST as the CLI; returns its exit code and the seconds it
 * took. */
static int sh(const char *line, double *secs)
{
  if (!tmpdir[0])
    scratch_make(tmpdir, sizeof(tmpdir), "rxe");
  free(out);
  free(errs);
  char cmd[4096], p[128];
  snprintf(cmd, sizeof(cmd), "PREPOST='%s'; S='%s'; (%s) > '%s/out' 2> '%s/err' < /dev/null",
           PREPOST_CLI, SCENARIOS, line, tmpdir, tmpdir);
  uint64_t t0 = boot_now_ns();
  int st = system(cmd);
  if (secs)
    *secs = (boot_now_ns() - t0) / 1e9;
  snprintf(p, sizeof(p), "%s/out", tmpdir);
  out = scratch_slurp(p, NULL);
  snprintf(p, sizeof(p), "%s/err", tmpdir);
  errs = scratch_slurp(p, NULL);
  cr_assert(WIFEXITED(st));
  return WEXITSTATUS(st);
}

#define assert_has(hay, needle)                                                \
  cr_assert_not_null(strstr((hay), (needle)), "'%s' not in:\n%s", (needle), (hay))

static uint16_t free_port(void)
{
  char err[128];
  uint16_t p = 0;
  int fd = boot_listen("127.0.0.1", &p, err, sizeof(err));
  cr_assert_geq(fd, 0);
  close(fd);
  return p;
}

Test(boot, rank_table_mode_runs_two_processes)
{
  char line[1024];
  uint16_t p = free_port();
  cr_assert_eq(sh("true", NULL), 0); /* makes tmpdir */
  /* the job secret in a 0600 file, as on a cluster (backends/verbs/README.md) */
  snprintf(line, sizeof(line),
           "umask 077; head -c 32 /dev/urandom > %s/job.secret; "
           "export PREPOST_JOB_SECRET_FILE=%s/job.secret; "
           "$PREPOST run $S/fast-consumer.yaml --backend verbs --rank 1 --ranks "
           "127.0.0.1:%u,127.0.0.1 --json > %s/r1 2>&1 & r1=$!; "
           "$PREPOST run $S/fast-consumer.yaml --backend verbs --rank 0 --ranks "
           "127.0.0.1:%u,127.0.0.1 --json; rc=$?; wait $r1 || exit 10; exit $rc",
           tmpdir, tmpdir, p, tmpdir, p);
  int rc = sh(line, NULL);
  cr_assert_eq(rc, 0, "exit %d\n%s%s", rc, out, errs);
  assert_has(out, "\"backend\": \"verbs\"");
  assert_has(out, "\"outcome\": \"completed\"");
  assert_has(out, "\"messages\": 200, \"bytes\": 819200, \"rnr_naks\": 0");
}

/* The other bootstrap failures through the driver's entry point in this process (each CLI start
 * costs seconds under emulation; the CLI's mapping of these failures to exit 4 is in
 * tests/test_verbs.c). */

static struct pp_run_cfg fast_consumer(void)
{
  struct pp_run_cfg c = {.seed = 1};
  snprintf(c.name, sizeof(c.name), "fast-consumer");
  c.engine = (struct pp_engine_cfg){.nranks = 2, .protocol = PP_PROTO_NAIVE, .seed = 1};
  c.engine.qp = (struct pp_qp_params){.min_rnr_timer = 1, .rnr_retry = 7, .timeout = 14,
                                      .retry_cnt = 7, .max_rd_atomic = 1, .mtu = 4096,
                                      .sq_depth = 64, .rq_depth = 64};
  c.engine.workload = (struct pp_workload){.pattern = PP_PATTERN_PAIR, .messages = 20,
                                           .size = 4096};
  return c;
}

static enum pp_status drive(const struct pp_run_cfg *c, int rank, const char *table,
                            uint16_t port, const char *device, int gid, double boot_s,
                            char *err, double *secs)
{
  struct pp_verbs_opts o;
  pp_verbs_opts_default(&o);
  o.boot_timeout_ns = (uint64_t)(boot_s * 1e9);
  o.coord_port = port;
  o.nic.gid_index = gid;
  if (device)
    snprintf(o.nic.device, sizeof(o.nic.device), "%s", device);
  o.rank = rank;
  if (rank >= 0) { /* a rank table run: every process holds the same job secret */
    memset(o.secret, 0x5a, sizeof(o.secret));
    o.has_secret = true;
  }
  if (table)
    cr_assert_eq(pp_verbs_parse_table(table, &o.table, &o.ntable, err, 1024), 0, "%s", err);
  struct pp_run_result res;
  bool reporter;
  uint64_t t0 = boot_now_ns();
  enum pp_status s = pp_verbs_run(c, &o, &res, &reporter, err, 1024);
  *secs = (boot_now_ns() - t0) / 1e9;
  if (s == PP_OK && reporter)
    pp_run_result_free(&res);
  free(o.table);
  return s;
}

Test(boot, absent_peer_ends_in_bounded_time)
{
  struct pp_run_cfg c = fast_consumer();
  char err[1024], table[64];
  double s;
  snprintf(table, sizeof(table), "127.0.0.1:%u,127.0.0.1", free_port());
  cr_assert_eq(drive(&c, 1, table, 0, NULL, -1, 1.5, err, &s), PP_IO);
  cr_assert(strstr(err, "rank 1: bootstrap: cannot reach the coordinator (rank 0) at 127.0.0.1:"),
            "%s", err);
  cr_assert(strstr(err, "Connection refused"), "%s", err);
  cr_assert_lt(s, 20, "%.1f s", s);
  cr_assert_eq(drive(&c, 0, table, 0, NULL, -1, 1.5, err, &s), PP_IO);
  cr_assert(strstr(err, "rank(s) 1 did not connect to the coordinator at 127.0.0.1:"), "%s", err);
  cr_assert_lt(s, 20, "%.1f s", s);
}

Test(boot, wrong_address_is_named)
{
  struct pp_run_cfg c = fast_consumer();
  char err[1024];
  double s;
  /* 192.0.2.0/24 is TEST-NET-1: not an address of this machine, and not routed */
  cr_assert_eq(drive(&c, 0, "192.0.2.1:18999,127.0.0.1", 0, NULL, -1, 2, err, &s), PP_IO);
  cr_assert(strstr(err, "cannot listen on 192.0.2.1:18999"), "%s", err);
  cr_assert(strstr(err, "address not on this machine"), "%s", err);
  cr_assert_eq(drive(&c, 1, "192.0.2.1:18999,127.0.0.1", 0, NULL, -1, 2, err, &s), PP_IO);
  cr_assert(strstr(err, "cannot reach the coordinator (rank 0) at 192.0.2.1:18999"), "%s", err);
  cr_assert_lt(s, 20, "%.1f s", s);
  cr_assert_eq(drive(&c, 1, "no-such-host.invalid,127.0.0.1", 0, NULL, -1, 2, err, &s), PP_IO);
  cr_assert(strstr(err, "cannot resolve 'no-such-host.invalid'"), "%s", err);
}

Test(boot, busy_port_is_named)
{
  struct pp_run_cfg c = fast_consumer();
  char err[1024];
  double s;
  uint16_t p = 0;
  int fd = boot_listen("127.0.0.1", &p, err, sizeof(err));
  cr_assert_geq(fd, 0);
  enum pp_status st = drive(&c, -1, NULL, p, NULL, -1, 2, err, &s);
  close(fd);
  cr_assert_eq(st, PP_IO, "%s", err);
  cr_assert(strstr(err, "port busy"), "%s", err);
}

Test(boot, missing_device_port_and_gid_are_named)
{
  struct pp_run_cfg c = fast_consumer();
  char err[1024];
  double s;
  cr_assert_eq(drive(&c, -1, NULL, 0, "mlx5_9", -1, 2, err, &s), PP_NOTFOUND);
  cr_assert(strstr(err, "no RDMA device named 'mlx5_9' (devices: "), "%s", err);
  struct vnic_config nc = {.port = 2, .gid_index = -1};
  struct vnic *n;
  cr_assert_eq(vnic_open(&nc, 2, &n, err, sizeof(err)), PP_NOTFOUND);
  cr_assert(strstr(err, "port 2 requested"), "%s", err);
  cr_assert_eq(drive(&c, -1, NULL, 0, NULL, 200, 2, err, &s), PP_NOTFOUND);
  cr_assert(strstr(err, "GID index 200"), "%s", err);
}

Test(boot, launcher_runs_the_ranks_in_process_forks)
{
  struct pp_run_cfg c = fast_consumer();
  struct pp_verbs_opts o;
  pp_verbs_opts_default(&o);
  struct pp_run_result res;
  bool reporter;
  char err[1024];
  cr_assert_eq(pp_verbs_run(&c, &o, &res, &reporter, err, sizeof(err)), PP_OK, "%s", err);
  cr_assert(reporter);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(res.nranks, 2);
  cr_assert_eq(res.ranks[0].stats.messages_sent, 20);
  cr_assert_eq(res.ranks[1].stats.messages_received, 20);
  cr_assert_eq(res.ranks[1].stats.corrupt, 0);
  cr_assert_eq(res.ranks[0].stats.status_counts[PP_WC_SUCCESS], 20);
  cr_assert_eq(res.ranks[0].nic.rnr_naks_received, 0, "every receive was pre-posted");
  cr_assert_gt(res.sim_time_ns, 0);
  pp_run_result_free(&res);
}
