/*
 * engine/workload/app.c, prepost/app.h: the application callbacks. Engines on simulated NICs
 * driven by the SimGrid-free harness (tests/simnic_harness.c); the test's own program runs in
 * the callbacks. Each callback fires with the values the engine has (source, tag, ctx, len,
 * msg_len, error, wc status), the timer at its deadline with its argument, peer failures once
 * with their reason, async events, start once; a callback's status reaches the driver; the
 * program decides when the rank is done.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/app.h"
#include "prepost/engine.h"
#include "prepost/p2p.h"
#include "app_log.h"
#include "simnic_harness.h"

#define MAXR 3

static struct {
  struct harness *h;
  struct pp_engine *e[MAXR];
  uint32_t n;
} C;

static struct pp_engine_cfg base(uint32_t n)
{
  struct pp_engine_cfg c = {0};
  c.nranks = n;
  c.protocol = PP_PROTO_EAGER;
  c.qp = (struct pp_qp_params){.min_rnr_timer = 1,
                               .rnr_retry = 0,
                               .timeout = 14,
                               .retry_cnt = 7,
                               .max_rd_atomic = 4,
                               .mtu = 4096,
                               .sq_depth = 64,
                               .rq_depth = 8};
  pp_p2p_params_default(pp_p2p_params_of(&c));
  c.seed = 3;
  return c;
}

/* Creates n engines with the callbacks cb, user_data[r] (NULL: the rank, as app_log wants). */
static void up_with(const struct pp_engine_cfg *cfg, const struct pp_app_callbacks *cb,
                    void *const *user_data)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 64;
  C.n = cfg->nranks;
  C.h = h_create(C.n, &prof, 0, cfg->seed);
  for (uint32_t r = 0; r < C.n; r++) {
    struct pp_engine_cfg c = *cfg;
    c.rank = r;
    void *ud = user_data ? user_data[r] : (void *)(uintptr_t)r;
    cr_assert_eq(pp_engine_create_app(&c, &simnic_ops, h_nic(C.h, r), cb, ud, &C.e[r]), PP_OK);
  }
  for (uint32_t r = 0; r < C.n; r++)
    for (uint32_t p = 0; p < C.n; p++) {
      struct pp_conn_info ci;
      if (p != r && pp_engine_local_info(C.e[p], r, &ci))
        cr_assert_eq(pp_engine_connect(C.e[r], 0, p, &ci), PP_OK);
    }
  for (uint32_t r = 0; r < C.n; r++)
    cr_assert_eq(pp_engine_start(C.e[r], 0), PP_OK);
}

static void up(const struct pp_engine_cfg *cfg)
{
  struct pp_app_callbacks cb;
  app_log_callbacks(&cb);
  up_with(cfg, &cb, NULL);
}

static void down(void)
{
  for (uint32_t r = 0; r < C.n; r++)
    pp_engine_destroy(C.e[r]);
  if (C.h)
    h_destroy(C.h);
  memset(&C, 0, sizeof(C));
  app_log_reset();
}

TestSuite(app, .fini = down);

static uint64_t now(void)
{
  return C.h->now;
}

/* Every completion and due timer to its engine; the first status other than PP_OK is returned
 * (and the loop stops there). */
static enum pp_status settle(void)
{
  for (bool busy = true; busy;) {
    busy = false;
    for (uint32_t r = 0; r < C.n; r++) {
      struct pp_wc wc[16];
      simnic_set_now(h_nic(C.h, r), now());
      int k = h_poll(C.h, r, wc, 16);
      for (int i = 0; i < k; i++) {
        enum pp_status s = pp_engine_on_wc(C.e[r], now(), &wc[i]);
        if (s != PP_OK)
          return s;
      }
      if (pp_engine_next_deadline(C.e[r]) <= now()) {
        enum pp_status s = pp_engine_on_timer(C.e[r], now());
        if (s != PP_OK)
          return s;
        busy = true;
      }
      busy = busy || k > 0;
    }
  }
  return PP_OK;
}

static enum pp_status run(void)
{
  for (;;) {
    enum pp_status s = settle();
    if (s != PP_OK)
      return s;
    uint64_t t = h_next_time(C.h);
    for (uint32_t r = 0; r < C.n; r++) {
      uint64_t d = pp_engine_next_deadline(C.e[r]);
      t = d < t ? d : t;
    }
    if (t == UINT64_MAX)
      return PP_OK;
    h_run(C.h, t);
    if (t > C.h->now)
      C.h->now = t;
  }
}

static const struct app_log_ev *only_ev(uint32_t rank, bool recv)
{
  const struct app_log_ev *found = NULL;
  for (uint32_t i = 0; i < APP_LOG.n; i++)
    if (APP_LOG.ev[i].rank == rank && APP_LOG.ev[i].recv == recv) {
      cr_assert_null(found, "rank %u: one %s completion", rank, recv ? "receive" : "send");
      found = &APP_LOG.ev[i];
    }
  cr_assert_not_null(found, "rank %u: a %s completion", rank, recv ? "receive" : "send");
  return found;
}

/* ================================================================ the table */

Test(app, an_incomplete_table_and_the_app_workload_without_callbacks_are_refused)
{
  struct pp_engine_cfg cfg = base(2);
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  C.h = h_create(2, &prof, 0, 1);
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  cr_assert(pp_app_callbacks_complete(&cb));
  struct pp_engine *e = (struct pp_engine *)&cb;
  cb.timer = NULL;
  cr_assert_not(pp_app_callbacks_complete(&cb));
  cr_assert_eq(pp_engine_create_app(&cfg, &simnic_ops, h_nic(C.h, 0), &cb, NULL, &e), PP_INVALID);
  cr_assert_null(e);
  cfg.workload.kind = PP_WORKLOAD_APP;
  cr_assert_eq(pp_engine_create(&cfg, &simnic_ops, h_nic(C.h, 0), &e), PP_INVALID,
               "workload 'app' needs pp_engine_create_app");
  pp_app_callbacks_default(&cb);
  cfg.protocol = PP_PROTO_RING_CTS;
  pp_ring_params_default(pp_ring_params_of(&cfg));
  cr_assert_eq(pp_engine_create_app(&cfg, &simnic_ops, h_nic(C.h, 0), &cb, NULL, &e), PP_INVALID,
               "the p2p API needs a p2p protocol");
  char err[256];
  cr_assert_eq(pp_engine_cfg_check(&cfg, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "workload 'app' needs protocol eager or rndv"), "%s", err);
}

Test(app, the_configurations_workload_is_not_used)
{
  struct pp_engine_cfg cfg = base(3); /* odd ranks: 'pair' would be refused */
  cfg.workload = (struct pp_workload){.kind = PP_WORKLOAD_STREAM, .pattern = PP_PATTERN_PAIR,
                                      .messages = 0, .size = 0};
  up(&cfg);
  for (uint32_t r = 0; r < 3; r++) {
    cr_assert_eq(APP_LOG.starts[r], 1, "start fired once on rank %u", r);
    cr_assert_eq(pp_app_user_data(C.e[r]), (void *)(uintptr_t)r);
    cr_assert(pp_engine_done(C.e[r]), "nothing outstanding, done() says true: done");
  }
}

/* ================================================================ completions */

Test(app, receive_and_send_completions_carry_the_whole_status)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg);
  uint8_t a[100], b[60];
  for (int i = 0; i < 100; i++)
    a[i] = (uint8_t)(i * 7 + 1);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, sizeof(b), 0, 7, 3, 0xbeef, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, sizeof(a), 1, 7, 3, 0xcafe, &s), PP_OK);
  cr_assert_eq(run(), PP_OK);
  const struct app_log_ev *rx = only_ev(1, true), *tx = only_ev(0, false);
  cr_assert_eq(rx->req, r);
  cr_assert_eq(rx->cookie, 0xbeef);
  cr_assert_eq(rx->st.source, 0);
  cr_assert_eq(rx->st.tag, 7);
  cr_assert_eq(rx->st.ctx, 3);
  cr_assert_eq(rx->st.len, 60, "bytes delivered");
  cr_assert_eq(rx->st.msg_len, 100, "the message's length");
  cr_assert_eq(rx->st.error, PP_P2P_E_TRUNCATED);
  cr_assert_eq(rx->st.proto, PP_P2P_EAGER);
  cr_assert_eq(memcmp(a, b, sizeof(b)), 0);
  cr_assert_eq(tx->req, s);
  cr_assert_eq(tx->cookie, 0xcafe);
  cr_assert_eq(tx->st.source, 1, "a send's source is its destination");
  cr_assert_eq(tx->st.len, 100);
  cr_assert_eq(tx->st.error, PP_P2P_E_OK);
  cr_assert_gt(rx->st.done_ns, 0);
  /* the request stays until pp_p2p_test, which gives the same status */
  struct pp_p2p_status st;
  cr_assert(pp_p2p_test(C.e[1], &r, &st));
  cr_assert(app_log_status_eq(&st, &rx->st));
  struct pp_rank_stats rs;
  pp_engine_stats(C.e[1], &rs);
  cr_assert_eq(rs.messages_received, 1);
  cr_assert_eq(rs.bytes_received, 60);
  pp_engine_stats(C.e[0], &rs);
  cr_assert_eq(rs.messages_sent, 1);
  cr_assert_eq(rs.bytes_sent, 100);
}

Test(app, a_cancelled_receive_is_reported_cancelled)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg);
  uint8_t b[8];
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 8, PP_ANY_SOURCE, PP_ANY_TAG, 0, 5, &r), PP_OK);
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r), PP_OK);
  cr_assert_eq(APP_LOG.n, 0, "reported at the end of an event, not inside the call");
  cr_assert_eq(run(), PP_OK);
  const struct app_log_ev *rx = only_ev(1, true);
  cr_assert_eq(rx->st.error, PP_P2P_E_CANCELLED);
  cr_assert_eq(rx->cookie, 5);
}

/* A ping-pong played entirely from the callbacks: rank 0 sends, rank 1 answers each message, the
 * next round starts from rank 0's receive callback; each callback releases its request; rank 0
 * records round trips with pp_app_latency and is done after ROUNDS. */
#define ROUNDS 20u
#define PSIZE 3000u

struct pinger {
  uint32_t rank, rounds, got;
  uint64_t sent_at;
  uint8_t out[PSIZE], in[PSIZE];
  bool bad;
};

static enum pp_status ping_send(struct pp_engine *e, uint64_t now, struct pinger *p)
{
  for (uint32_t i = 0; i < PSIZE; i++)
    p->out[i] = (uint8_t)(p->rounds * 31 + i);
  pp_req r;
  p->sent_at = now;
  return pp_p2p_isend(e, now, p->out, PSIZE, 1 - p->rank, 1, 0, 0, &r);
}

static enum pp_status ping_recv(struct pp_engine *e, uint64_t now, struct pinger *p)
{
  pp_req r;
  return pp_p2p_irecv(e, now, p->in, PSIZE, 1 - p->rank, 1, 0, 0, &r);
}

static enum pp_status pg_start(struct pp_engine *e, uint64_t now, void *ud)
{
  struct pinger *p = ud;
  enum pp_status s = ping_recv(e, now, p);
  return s == PP_OK && p->rank == 0 ? ping_send(e, now, p) : s;
}

static enum pp_status pg_send_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                                   const struct pp_p2p_status *st, void *ud)
{
  (void)now, (void)cookie, (void)ud;
  cr_assert_eq(st->error, PP_P2P_E_OK);
  cr_assert(pp_p2p_test(e, &req, NULL), "released from its own callback");
  return PP_OK;
}

static enum pp_status pg_recv_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                                   const struct pp_p2p_status *st, void *ud)
{
  (void)cookie;
  struct pinger *p = ud;
  cr_assert(pp_p2p_test(e, &req, NULL));
  uint32_t round = p->rank == 0 ? p->rounds : p->got;
  for (uint32_t i = 0; i < PSIZE; i++)
    p->bad = p->bad || p->in[i] != (uint8_t)(round * 31 + i);
  p->bad = p->bad || st->len != PSIZE || st->error != PP_P2P_E_OK;
  p->got++;
  if (p->rank == 1) { /* echo, and wait for the next one */
    memcpy(p->out, p->in, PSIZE);
    pp_req r;
    enum pp_status s = pp_p2p_isend(e, now, p->out, PSIZE, 0, 1, 0, 0, &r);
    return s == PP_OK && p->got < ROUNDS ? ping_recv(e, now, p) : s;
  }
  pp_app_latency(e, now - p->sent_at);
  if (++p->rounds == ROUNDS)
    return PP_OK;
  enum pp_status s = ping_recv(e, now, p);
  return s == PP_OK ? ping_send(e, now, p) : s;
}

static bool pg_done(const struct pp_engine *e, void *ud)
{
  (void)e;
  const struct pinger *p = ud;
  return p->got == ROUNDS;
}

Test(app, a_ping_pong_runs_from_the_callbacks_and_done_says_when_it_ends)
{
  static struct pinger pg[2] = {{.rank = 0}, {.rank = 1}};
  void *uds[2] = {&pg[0], &pg[1]};
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  cb.start = pg_start;
  cb.send_done = pg_send_done;
  cb.recv_done = pg_recv_done;
  cb.done = pg_done;
  struct pp_engine_cfg cfg = base(2);
  up_with(&cfg, &cb, uds);
  cr_assert_not(pp_engine_done(C.e[0]), "done() says not yet");
  cr_assert_eq(run(), PP_OK);
  cr_assert_eq(pg[0].got, ROUNDS);
  cr_assert_eq(pg[1].got, ROUNDS);
  cr_assert_not(pg[0].bad || pg[1].bad, "every byte of every round");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
  const struct pp_hist *h = pp_engine_latency_hist(C.e[0]);
  cr_assert_not_null(h);
  struct pp_hist_summary hs;
  pp_hist_summarize(h, &hs);
  cr_assert_eq(hs.count, ROUNDS, "one round trip sample per round");
  cr_assert_gt(hs.min, 2000, "a round trip over two 1 us hops: %llu ns",
               (unsigned long long)hs.min);
}

/* ================================================================ a callback's status */

static enum pp_status refuse_recv(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                                  const struct pp_p2p_status *st, void *ud)
{
  (void)e, (void)now, (void)req, (void)cookie, (void)st, (void)ud;
  return PP_IO;
}

Test(app, a_callbacks_status_reaches_the_driver)
{
  struct pp_app_callbacks cb;
  app_log_callbacks(&cb);
  cb.recv_done = refuse_recv;
  struct pp_engine_cfg cfg = base(2);
  up_with(&cfg, &cb, NULL);
  uint8_t a[16] = {1}, b[16];
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 16, 0, 1, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 16, 1, 1, 0, 0, &s), PP_OK);
  cr_assert_eq(run(), PP_IO);
}

/* ================================================================ timers */

Test(app, the_timer_fires_at_its_deadline_with_its_argument)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg);
  cr_assert_eq(pp_app_timer(C.e[0], 5000, 42), PP_OK);
  cr_assert_eq(pp_app_timer(C.e[1], 12345, 7), PP_OK);
  cr_assert_eq(pp_engine_next_deadline(C.e[0]), 5000);
  cr_assert_eq(run(), PP_OK);
  cr_assert_eq(APP_LOG.timers[0], 1);
  cr_assert_eq(APP_LOG.last_timer_arg[0], 42);
  cr_assert_eq(APP_LOG.last_timer_ns[0], 5000);
  cr_assert_eq(APP_LOG.timers[1], 1);
  cr_assert_eq(APP_LOG.last_timer_arg[1], 7);
  cr_assert_eq(APP_LOG.last_timer_ns[1], 12345);
}

Test(app, timers_are_for_application_engines_and_bounded)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg);
  cr_assert_eq(pp_app_timer(NULL, 1, 1), PP_STATE);
  uint32_t n = 0;
  enum pp_status s = PP_OK;
  while (s == PP_OK && n < 100000)
    if ((s = pp_app_timer(C.e[0], 1000 + n, n)) == PP_OK)
      n++;
  cr_assert_eq(s, PP_LIMIT, "a full timer queue is a clear error (after %u)", n);
}

/* ================================================================ failures */

Test(app, a_qp_in_error_fails_the_peer_once_and_its_receives_with_it)
{
  struct pp_engine_cfg cfg = base(3);
  up(&cfg);
  uint8_t b[64], c[64];
  pp_req r1, r2;
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), b, 64, 1, 1, 0, 11, &r1), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), c, 64, 2, 1, 0, 12, &r2), PP_OK);
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(C.e[0], 1, &ci));
  struct pp_qp_attr err = {.qp_state = PP_QPS_ERR};
  simnic_set_now(h_nic(C.h, 0), now());
  cr_assert_eq(simnic_ops.modify_qp(h_nic(C.h, 0), ci.qp_num[0], &err, PP_QP_STATE), PP_OK);
  cr_assert_eq(run(), PP_OK);
  cr_assert_eq(APP_LOG.nfail[0], 1, "told once, though every posted receive flushed");
  const struct pp_peer_failure *f = &APP_LOG.fail[0][0];
  cr_assert_eq(f->peer, 1);
  cr_assert_eq(f->kind, PP_PEER_FAIL_QP_ERROR);
  cr_assert_eq(f->wc_status, PP_WC_WR_FLUSH_ERR);
  cr_assert_eq(f->qp_num, ci.qp_num[0]);
  const struct app_log_ev *rx = only_ev(0, true);
  cr_assert_eq(rx->cookie, 11, "the receive from the failed peer completed, the other waits");
  cr_assert_eq(rx->st.error, PP_P2P_E_FAILED);
  cr_assert_eq(rx->st.wc_status, PP_WC_WR_FLUSH_ERR);
  cr_assert_eq(rx->st.source, 1);
  cr_assert_eq(APP_LOG.nfail[2], 0);
}

Test(app, async_events_reach_error_and_a_fatal_qp_fails_its_peer)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg);
  struct pp_async_event cq = {.type = PP_EVENT_CQ_ERR};
  cr_assert_eq(pp_engine_on_async(C.e[1], 10, &cq), PP_OK);
  cr_assert_eq(APP_LOG.errors[1], 1);
  cr_assert_eq(APP_LOG.last_error[1].type, PP_EVENT_CQ_ERR);
  cr_assert_eq(APP_LOG.nfail[1], 0, "a CQ error names no peer");
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(C.e[1], 0, &ci));
  struct pp_async_event fatal = {.type = PP_EVENT_QP_FATAL, .qp_num = ci.qp_num[0]};
  cr_assert_eq(pp_engine_on_async(C.e[1], 20, &fatal), PP_OK);
  cr_assert_eq(APP_LOG.errors[1], 2);
  cr_assert_eq(APP_LOG.nfail[1], 1);
  cr_assert_eq(APP_LOG.fail[1][0].kind, PP_PEER_FAIL_QP_FATAL);
  cr_assert_eq(APP_LOG.fail[1][0].peer, 0);
  cr_assert_eq(APP_LOG.fail[1][0].at_ns, 20);
  cr_assert_eq(pp_engine_on_async(C.e[1], 30, &fatal), PP_OK);
  cr_assert_eq(APP_LOG.nfail[1], 1, "once per peer");
  cr_assert_str_eq(pp_peer_failure_name(PP_PEER_FAIL_QP_FATAL), "qp_fatal");
}
