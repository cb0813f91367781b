/*
 * Untrusted peers: a catalogue of hostile-peer cases against the p2p protocols (eager, RGET,
 * RPUT) and both ring protocols. Every case asserts the defined reaction: the message is a
 * violation named by its peer, message kind and field; the connection to that peer only fails
 * (its QPs in ERROR, what involved it completes with an error); honest peers complete; no memory
 * outside the intended buffers changes (guard bytes around every buffer, AddressSanitizer in the
 * asan preset); no remote access survives (registrations with remote access counted).
 *
 * The attacker is rank 2: an engine whose completions and timers are never handed to it, so
 * everything it sends is written by the test, through its own NIC, which reads and writes
 * memory the way a real one does: the simulated RC NIC (backends/simgrid/simnic.c, driven by
 * tests/simnic_harness.c) for p2p, the fake fabric (tests/fakefabric.c) for the rings. What the
 * victim sends the attacker is read off the victim's send queue (the attacker sees every byte
 * of its own traffic). Rank 0 is the victim, rank 1 an honest peer.
 */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/simnic.h"
#include "prepost/engine.h"
#include "engine/core/engine_impl.h"
#include "prepost/hang.h"
#include "prepost/app.h"
#include "prepost/p2p.h"
#include "app_log.h"
#include "fakefabric.h"
#include "probe.h"
#include "simnic_harness.h"
#include "tools/report/report.h"

#define VICTIM 0u
#define HONEST 1u
#define ATTACKER 2u
#define NR 3u

/* The p2p wire header (engine/proto/p2p/p2p_impl.h), as an attacker who read the source writes it. */
struct whdr {
  uint8_t type, flags;
  uint16_t credits;
  uint32_t ctx, seq, tag, len, nfrag;
  uint64_t sreq, rreq, addr;
  uint32_t rkey, flen, off;
  uint16_t rcredits, pad;
};
_Static_assert(sizeof(struct whdr) == 64, "the wire header is 64 bytes");
enum { T_EAGER = 1, T_RTS, T_CTS, T_FIN, T_ACK, T_CREDIT };
enum { WF_SYNC = 1, WF_RGET = 2, WF_ABORT = 4, WF_FIN = 16 };

/* ================================================================ guarded buffers */

#define GUARD 256u
#define MAXBUF 64

static struct {
  uint8_t *block[MAXBUF];
  size_t len[MAXBUF];
  unsigned n;
} G;

/* len bytes with GUARD bytes of 0xA5 on either side; freed at the end of the test. */
static uint8_t *guarded(size_t len, uint8_t fill)
{
  cr_assert_lt(G.n, MAXBUF);
  uint8_t *b = malloc(len + 2 * GUARD);
  cr_assert_not_null(b);
  memset(b, 0xA5, GUARD);
  memset(b + GUARD, fill, len);
  memset(b + GUARD + len, 0xA5, GUARD);
  G.block[G.n] = b;
  G.len[G.n++] = len;
  return b + GUARD;
}

static void guards_intact(void)
{
  for (unsigned i = 0; i < G.n; i++)
    for (size_t k = 0; k < GUARD; k++) {
      cr_assert_eq(G.block[i][k], 0xA5, "buffer %u: guard byte %zu before it changed", i, k);
      cr_assert_eq(G.block[i][GUARD + G.len[i] + k], 0xA5, "buffer %u: guard byte %zu after it",
                   i, k);
    }
}

static void guards_free(void)
{
  for (unsigned i = 0; i < G.n; i++)
    free(G.block[i]);
  memset(&G, 0, sizeof(G));
}

static bool all_bytes(const uint8_t *b, size_t len, uint8_t v)
{
  for (size_t i = 0; i < len; i++)
    if (b[i] != v)
      return false;
  return true;
}

/* ================================================================ p2p on the simulated NIC */

struct posted {
  uint32_t host, qp;
  uint8_t opcode;
  struct whdr h;
  uint64_t raddr;
  uint32_t rkey, len;
};

static struct {
  struct harness *h;
  struct pp_engine *e[NR];
  struct simnic *nic[NR];
  bool frozen[NR]; /* completions and timers of a frozen rank wait (the attacker: always) */
  unsigned remote_live[NR]; /* registrations with remote access alive */
  uint32_t remote_lkeys[NR][64];
  /* what the victim and the honest rank posted: SEND headers and RDMA WRITEs */
  struct posted log[512];
  unsigned nlog;
  /* the attacker's send buffers */
  uint8_t *abuf;
  struct pp_mr amr;
  unsigned aslot;
  uint64_t awr;
} S;

#define ASLOT 16384u
#define NASLOT 64u

static int host_of(void *nic)
{
  for (uint32_t i = 0; i < NR; i++)
    if (S.nic[i] == nic)
      return (int)i;
  cr_assert_fail("unknown NIC");
  return 0;
}

static int w_reg_mr(void *nic, void *addr, size_t len, unsigned access, struct pp_mr *mr)
{
  int h = host_of(nic), s = simnic_ops.reg_mr(nic, addr, len, access, mr);
  if (s == PP_OK && (access & (PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ)))
    for (int i = 0; i < 64; i++)
      if (!S.remote_lkeys[h][i]) {
        S.remote_lkeys[h][i] = mr->lkey;
        S.remote_live[h]++;
        break;
      }
  return s;
}

static int w_dereg_mr(void *nic, const struct pp_mr *mr)
{
  int h = host_of(nic);
  for (int i = 0; i < 64; i++)
    if (S.remote_lkeys[h][i] == mr->lkey) {
      S.remote_lkeys[h][i] = 0;
      S.remote_live[h]--;
    }
  return simnic_ops.dereg_mr(nic, mr);
}

static int w_post_send(void *nic, uint32_t qp, const struct pp_send_wr *wr)
{
  int h = host_of(nic);
  if (S.nlog < 512 && (wr->opcode == PP_WR_SEND || wr->opcode == PP_WR_RDMA_WRITE)) {
    S.log[S.nlog] = (struct posted){.host = (uint32_t)h, .qp = qp, .opcode = (uint8_t)wr->opcode, .raddr = wr->remote_addr,
       .rkey = wr->rkey, .len = wr->sg_list[0].length};
    if (wr->opcode == PP_WR_SEND && wr->sg_list[0].length >= 64)
      memcpy(&S.log[S.nlog].h, (const void *)(uintptr_t)wr->sg_list[0].addr, 64);
    S.nlog++;
  }
  return simnic_ops.post_send(nic, qp, wr);
}

static struct pp_nic_ops wops;

static struct pp_engine_cfg p2p_cfg(void)
{
  struct pp_engine_cfg c = {0};
  c.nranks = NR;
  c.protocol = PP_PROTO_EAGER;
  c.qp = (struct pp_qp_params){.min_rnr_timer = 1,
                               .rnr_retry = 0,
                               .timeout = 14,
                               .retry_cnt = 7,
                               .max_rd_atomic = 4,
                               .mtu = 4096,
                               .sq_depth = 64,
                               .rq_depth = 8};
  c.workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  pp_p2p_params_default(pp_p2p_params_of(&c));
  pp_p2p_params_of(&c)->eager_limit = 4096;
  pp_p2p_params_of(&c)->rget_limit = 64 << 10;
  pp_p2p_params_of(&c)->frag_size = 16 << 10;
  pp_p2p_params_of(&c)->pipeline = 4;
  c.seed = 7;
  return c;
}

static void p2p_up(const struct pp_engine_cfg *cfg)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 64;
  prof.cq_depth = 1 << 16;
  wops = simnic_ops;
  wops.reg_mr = w_reg_mr;
  wops.dereg_mr = w_dereg_mr;
  wops.post_send = w_post_send;
  S.h = h_create(NR, &prof, 0, cfg->seed);
  char err[256] = "";
  cr_assert_eq(pp_engine_cfg_check(cfg, err, sizeof(err)), PP_OK, "%s", err);
  struct pp_app_callbacks cb;
  app_log_callbacks(&cb);
  for (uint32_t r = 0; r < NR; r++) {
    struct pp_engine_cfg c = *cfg;
    c.rank = r;
    S.nic[r] = h_nic(S.h, r);
    cr_assert_eq(pp_engine_create_app(&c, &wops, S.nic[r], &cb, (void *)(uintptr_t)r, &S.e[r]),
                 PP_OK);
  }
  for (uint32_t r = 0; r < NR; r++)
    for (uint32_t p = 0; p < NR; p++) {
      struct pp_conn_info ci;
      if (p != r && pp_engine_local_info(S.e[p], r, &ci))
        cr_assert_eq(pp_engine_connect(S.e[r], 0, p, &ci), PP_OK);
    }
  for (uint32_t r = 0; r < NR; r++)
    cr_assert_eq(pp_engine_start(S.e[r], 0), PP_OK);
  S.frozen[ATTACKER] = true;
  S.abuf = guarded((size_t)ASLOT * NASLOT, 0);
  S.amr = h_reg(S.h, ATTACKER, S.abuf, (size_t)ASLOT * NASLOT,
                PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ);
}

/* The three ranks up on p2p_cfg(). */
static void p2p_up_default(void)
{
  struct pp_engine_cfg c = p2p_cfg();
  p2p_up(&c);
}

static void p2p_down(void)
{
  for (uint32_t r = 0; r < NR; r++)
    pp_engine_destroy(S.e[r]);
  if (S.h)
    h_destroy(S.h);
  memset(&S, 0, sizeof(S));
  guards_free();
  app_log_reset();
}

TestSuite(hostile_p2p, .fini = p2p_down);

static uint64_t now(void)
{
  return S.h->now;
}

static void settle(void)
{
  for (bool busy = true; busy;) {
    busy = false;
    for (uint32_t r = 0; r < NR; r++) {
      if (S.frozen[r])
        continue;
      struct pp_wc wc[16];
      simnic_set_now(S.nic[r], now());
      int k = h_poll(S.h, r, wc, 16);
      for (int i = 0; i < k; i++)
        cr_assert_eq(pp_engine_on_wc(S.e[r], now(), &wc[i]), PP_OK, "rank %u wc %s", r,
                     pp_wc_status_name(wc[i].status));
      if (pp_engine_next_deadline(S.e[r]) <= now()) {
        cr_assert_eq(pp_engine_on_timer(S.e[r], now()), PP_OK);
        busy = true;
      }
      busy = busy || k > 0;
    }
  }
}

/* Runs until nothing is left to do (frozen ranks' completions wait in their CQs). */
static void run(void)
{
  for (;;) {
    settle();
    uint64_t t = h_next_time(S.h);
    for (uint32_t r = 0; r < NR; r++) {
      uint64_t d = S.frozen[r] ? UINT64_MAX : pp_engine_next_deadline(S.e[r]);
      t = d < t ? d : t;
    }
    if (t == UINT64_MAX)
      return;
    h_run(S.h, t);
    if (t > S.h->now)
      S.h->now = t;
  }
}

/* The QP of rank r to rank peer (channel 0). */
static uint32_t qp_to(uint32_t r, uint32_t peer)
{
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(S.e[r], peer, &ci));
  return ci.qp_num[0];
}

/* The attacker sends `len` bytes starting with header h (a whole one when len >= 64, its first
 * len bytes else) and `body` after it. */
static void forge(const struct whdr *h, uint32_t len, const void *body, uint32_t blen)
{
  cr_assert_lt(S.aslot, NASLOT);
  uint8_t *b = S.abuf + (size_t)S.aslot++ * ASLOT;
  cr_assert_leq(len, 64 + blen);
  memcpy(b, h, len < 64 ? len : 64);
  if (blen)
    memcpy(b + 64, body, blen);
  cr_assert_eq(h_post_send(S.h, ATTACKER, qp_to(ATTACKER, VICTIM), PP_WR_SEND, ++S.awr, &S.amr, b,
                           len, 0, 0, true),
               PP_OK);
}

static void forge_hdr(const struct whdr *h)
{
  forge(h, 64, NULL, 0);
}

/* The n-th (0-based) SEND header of `type` rank `host` posted to rank `to`, which must exist. */
static struct whdr sent(uint32_t host, uint32_t to, uint8_t type, unsigned n)
{
  uint32_t qp = qp_to(host, to);
  for (unsigned i = 0; i < S.nlog; i++)
    if (S.log[i].host == host && S.log[i].qp == qp && S.log[i].opcode == PP_WR_SEND &&
        S.log[i].h.type == type && n-- == 0)
      return S.log[i].h;
  cr_assert_fail("rank %u sent no such %u message to rank %u", host, type, to);
  return (struct whdr){0};
}

static unsigned count_posted(uint32_t host, uint32_t to, uint8_t opcode, int type)
{
  uint32_t qp = qp_to(host, to);
  unsigned n = 0;
  for (unsigned i = 0; i < S.nlog; i++)
    n += S.log[i].host == host && S.log[i].qp == qp && S.log[i].opcode == opcode &&
         (type < 0 || S.log[i].h.type == type);
  return n;
}

/* Request r of rank `rank` is complete, and its callback reported the same status. */
static struct pp_p2p_status done(uint32_t rank, pp_req *r)
{
  struct pp_p2p_status st;
  const struct app_log_ev *ev = app_log_find(rank, *r);
  cr_assert(pp_p2p_test(S.e[rank], r, &st), "request of rank %u not complete", rank);
  cr_assert_not_null(ev, "rank %u: the completion reached its callback", rank);
  cr_assert(app_log_status_eq(&ev->st, &st), "rank %u: the callback's status (%s) is "
               "the request's (%s)", rank, pp_p2p_err_name(ev->st.error),
               pp_p2p_err_name(st.error));
  return st;
}

static void not_done(uint32_t rank, pp_req *r)
{
  cr_assert_not(pp_p2p_test(S.e[rank], r, NULL), "request of rank %u complete", rank);
}

/* The victim's reaction to a violation: exactly one, by the attacker, in message `msg`, field
 * f; its connection to the attacker in ERROR, the honest one alive; the hang report says so. */
static void expect_violation(const char *msg, enum pp_violation_field f)
{
  struct pp_rank_stats st;
  pp_engine_stats(S.e[VICTIM], &st);
  cr_assert_eq(st.peer_violations, 1, "violations: %llu", (unsigned long long)st.peer_violations);
  char t[256];
  pp_violation_text(&st.first_violation, t, sizeof(t));
  cr_assert_eq(st.first_violation.peer, ATTACKER, "%s", t);
  cr_assert_str_eq(st.first_violation.msg, msg, "%s", t);
  cr_assert_eq(st.first_violation.field, f, "%s (wanted field %s)", t,
               pp_violation_field_name(f));
  cr_assert_eq(simnic_qp_state(S.nic[VICTIM], qp_to(VICTIM, ATTACKER)), PP_QPS_ERR);
  cr_assert_neq(simnic_qp_state(S.nic[VICTIM], qp_to(VICTIM, HONEST)), PP_QPS_ERR);
  /* the application heard of it once, with the violation itself */
  cr_assert_eq(APP_LOG.nfail[VICTIM], 1, "peer failures told the victim: %u",
               APP_LOG.nfail[VICTIM]);
  const struct pp_peer_failure *pf = &APP_LOG.fail[VICTIM][0];
  cr_assert_eq(pf->peer, ATTACKER);
  cr_assert_eq(pf->kind, PP_PEER_FAIL_VIOLATION, "told %s",
               pp_peer_failure_name((enum pp_peer_failure_kind)pf->kind));
  cr_assert_str_eq(pf->violation.msg, msg);
  cr_assert_eq(pf->violation.field, f);
  cr_assert_eq(pf->violation.at_ns, st.first_violation.at_ns);
  cr_assert_eq(APP_LOG.nfail[HONEST], 0, "the honest peer's connections did not fail");
  struct pp_wait w[32];
  size_t n = pp_engine_pending(S.e[VICTIM], w, 32);
  bool said = false;
  for (size_t i = 0; i < n && i < 32; i++)
    said = said || (w[i].kind == PP_WAIT_QP_ERROR && w[i].peer == ATTACKER &&
                    strstr(w[i].what, "broke the protocol") &&
                    strstr(w[i].what, pp_violation_field_name(f)));
  cr_assert(said, "the hang report names the violation");
}

static void expect_no_violation(void)
{
  for (uint32_t r = 0; r < NR; r++) {
    struct pp_rank_stats st;
    pp_engine_stats(S.e[r], &st);
    cr_assert_eq(st.peer_violations, 0, "rank %u", r);
    for (uint32_t i = 0; i < APP_LOG.nfail[r]; i++)
      cr_assert_neq(APP_LOG.fail[r][i].kind, PP_PEER_FAIL_VIOLATION, "rank %u was told of one", r);
  }
}

/* The honest peer and the victim still exchange eager, RGET and RPUT messages both ways; no
 * remote access is left on the victim; every guard byte is intact. */
static void honest_goes_on(void)
{
  static const uint32_t len[] = {100, 20000, 100000};
  pp_req s[6], r[6];
  uint8_t *src[6], *dst[6];
  for (int i = 0; i < 6; i++) {
    uint32_t from = i < 3 ? VICTIM : HONEST, to = i < 3 ? HONEST : VICTIM, l = len[i % 3];
    src[i] = guarded(l, (uint8_t)(0x30 + i));
    dst[i] = guarded(l, 0);
    cr_assert_eq(pp_p2p_irecv(S.e[to], now(), dst[i], l, from, 900 + i, 0, 0, &r[i]), PP_OK);
    cr_assert_eq(pp_p2p_isend(S.e[from], now(), src[i], l, to, 900 + i, 0, 0, &s[i]), PP_OK);
  }
  run();
  for (int i = 0; i < 6; i++) {
    uint32_t from = i < 3 ? VICTIM : HONEST, to = i < 3 ? HONEST : VICTIM;
    cr_assert_eq(done(from, &s[i]).error, PP_P2P_E_OK, "honest send %d", i);
    struct pp_p2p_status st = done(to, &r[i]);
    cr_assert_eq(st.error, PP_P2P_E_OK, "honest receive %d: %s", i, pp_p2p_err_name(st.error));
    cr_assert(all_bytes(dst[i], len[i % 3], (uint8_t)(0x30 + i)), "honest message %d intact", i);
  }
  cr_assert_eq(S.remote_live[VICTIM], 0, "no remote access left on the victim");
  cr_assert_eq(S.remote_live[HONEST], 0, "nor on the honest rank");
  guards_intact();
}

/* A receive of the victim from the attacker that failed with it. */
static void failed_with_peer(uint32_t rank, pp_req *r)
{
  struct pp_p2p_status st = done(rank, r);
  cr_assert_eq(st.error, PP_P2P_E_PEER, "error %s", pp_p2p_err_name(st.error));
  cr_assert_eq(st.wc_status, PP_WC_GENERAL_ERR);
}

static struct whdr eager(uint32_t seq, uint32_t tag, uint32_t len)
{
  return (struct whdr){.type = T_EAGER, .seq = seq, .tag = tag, .len = len, .sreq = 0x1234};
}

/* The attacker sends header h alone: the victim sees the violation (message msg, field f),
 * fails the attacker and goes on with the honest peer. */
static void lone_header_fails(const struct whdr *h, const char *msg, enum pp_violation_field f)
{
  forge_hdr(h);
  run();
  expect_violation(msg, f);
  honest_goes_on();
}

/* ---------------------------------------------------------------- eager */

Test(hostile_p2p, eager_length_past_the_bytes_received)
{
  p2p_up_default();
  uint8_t *big = guarded(2u << 20, 0x11);
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), big, 2u << 20, PP_ANY_SOURCE, 5, 0, 0, &r), PP_OK);
  struct whdr h = eager(0, 5, 1u << 20); /* 1 MiB said, 16 bytes sent */
  uint8_t body[16] = {0};
  forge(&h, 64 + 16, body, 16);
  run();
  expect_violation("EAGER", PP_VF_LEN);
  cr_assert(all_bytes(big, 2u << 20, 0x11), "nothing copied into the receive");
  not_done(VICTIM, &r); /* an ANY_SOURCE receive does not belong to the attacker */
  cr_assert_eq(pp_p2p_cancel(S.e[VICTIM], now(), r), PP_OK);
  honest_goes_on();
}

Test(hostile_p2p, eager_length_short_of_the_bytes_received)
{
  p2p_up_default();
  uint8_t *d = guarded(100, 0);
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 100, ATTACKER, 5, 0, 0, &r), PP_OK);
  struct whdr h = eager(0, 5, 10);
  uint8_t body[100];
  memset(body, 0x77, sizeof(body));
  forge(&h, 64 + 100, body, 100);
  run();
  expect_violation("EAGER", PP_VF_LEN);
  failed_with_peer(VICTIM, &r);
  cr_assert(all_bytes(d, 100, 0));
  honest_goes_on();
}

Test(hostile_p2p, truncated_header)
{
  p2p_up_default();
  pp_req r;
  uint8_t *d = guarded(64, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 64, ATTACKER, 5, 0, 0, &r), PP_OK);
  struct whdr h = eager(0, 5, 0);
  forge(&h, 20, NULL, 0);
  run();
  expect_violation("?", PP_VF_BYTE_LEN); /* the kind is not read from a partial header */
  failed_with_peer(VICTIM, &r);
  honest_goes_on();
}

Test(hostile_p2p, empty_send)
{
  p2p_up_default();
  struct whdr h = {0};
  forge(&h, 0, NULL, 0);
  run();
  expect_violation("?", PP_VF_BYTE_LEN);
  honest_goes_on();
}

Test(hostile_p2p, unknown_message_type)
{
  p2p_up_default();
  struct whdr h = {.type = 9};
  lone_header_fails(&h, "?", PP_VF_TYPE);
}

Test(hostile_p2p, eager_unknown_flags)
{
  p2p_up_default();
  struct whdr h = eager(0, 5, 0);
  h.flags = 0x80;
  lone_header_fails(&h, "EAGER", PP_VF_FLAGS);
}

Test(hostile_p2p, eager_reserved_tag)
{
  p2p_up_default();
  pp_req r;
  uint8_t *d = guarded(64, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 64, ATTACKER, PP_ANY_TAG, 0, 0, &r), PP_OK);
  struct whdr h = eager(0, PP_ANY_TAG, 0);
  forge_hdr(&h);
  run();
  expect_violation("EAGER", PP_VF_TAG);
  failed_with_peer(VICTIM, &r);
  honest_goes_on();
}

Test(hostile_p2p, eager_from_the_future_holds_no_buffer)
{
  p2p_up_default();
  struct whdr h = eager(1000, 5, 0);
  forge_hdr(&h);
  run();
  expect_violation("EAGER", PP_VF_SEQ);
  struct pp_wait w[32];
  size_t n = pp_engine_pending(S.e[VICTIM], w, 32);
  for (size_t i = 0; i < n && i < 32; i++)
    cr_assert(w[i].kind != PP_WAIT_MESSAGE, "no message held: %s", w[i].what);
  honest_goes_on();
}

Test(hostile_p2p, eager_duplicate_of_a_delivered_message)
{
  p2p_up_default();
  pp_req r[2];
  uint8_t *d0 = guarded(8, 0), *d1 = guarded(8, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d0, 8, ATTACKER, 5, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d1, 8, ATTACKER, 5, 0, 0, &r[1]), PP_OK);
  struct whdr h = eager(0, 5, 8);
  uint8_t body[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  forge(&h, 72, body, 8);
  forge(&h, 72, body, 8);
  run();
  expect_violation("EAGER", PP_VF_SEQ);
  cr_assert_eq(done(VICTIM, &r[0]).error, PP_P2P_E_OK, "the first one was fine");
  cr_assert_eq(memcmp(d0, body, 8), 0);
  failed_with_peer(VICTIM, &r[1]);
  cr_assert(all_bytes(d1, 8, 0));
  honest_goes_on();
}

Test(hostile_p2p, eager_duplicate_held_out_of_order)
{
  p2p_up_default();
  struct whdr h = eager(1, 5, 0);
  forge_hdr(&h);
  forge_hdr(&h);
  run();
  expect_violation("EAGER", PP_VF_SEQ);
  honest_goes_on();
}

Test(hostile_p2p, eager_reordered_within_the_window_is_delivered_in_order)
{
  p2p_up_default();
  pp_req r[2];
  uint8_t *d0 = guarded(4, 0), *d1 = guarded(4, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d0, 4, ATTACKER, 5, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d1, 4, ATTACKER, 5, 0, 0, &r[1]), PP_OK);
  struct whdr h1 = eager(1, 5, 4), h0 = eager(0, 5, 4);
  forge(&h1, 68, "BBBB", 4);
  forge(&h0, 68, "AAAA", 4);
  run();
  expect_no_violation();
  cr_assert_eq(done(VICTIM, &r[0]).error, PP_P2P_E_OK);
  cr_assert_eq(done(VICTIM, &r[1]).error, PP_P2P_E_OK);
  cr_assert_eq(memcmp(d0, "AAAA", 4), 0, "sequence 0 matched first");
  cr_assert_eq(memcmp(d1, "BBBB", 4), 0);
  honest_goes_on();
}

Test(hostile_p2p, credits_returned_that_were_never_lent)
{
  p2p_up_default();
  struct whdr h = {.type = T_CREDIT, .credits = 5};
  lone_header_fails(&h, "CREDIT", PP_VF_CREDITS);
}

Test(hostile_p2p, credit_inflation_200_into_a_pool_of_8)
{
  p2p_up_default();
  enum { N = 20 };
  pp_req s[N];
  uint8_t *src = guarded(64, 0x42);
  for (int i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), src, 64, ATTACKER, 1, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_SEND, T_EAGER), 8, "one per credit");
  struct whdr h = {.type = T_CREDIT, .credits = 200};
  forge_hdr(&h);
  run();
  expect_violation("CREDIT", PP_VF_CREDITS);
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_SEND, T_EAGER), 8, "no send past the pool");
  for (int i = 0; i < N; i++) {
    struct pp_p2p_status st = done(VICTIM, &s[i]);
    cr_assert_eq(st.error, i < 8 ? PP_P2P_E_OK : PP_P2P_E_PEER, "send %d: %s", i,
                 pp_p2p_err_name(st.error));
  }
  honest_goes_on();
}

Test(hostile_p2p, credits_returned_exactly_are_taken)
{
  p2p_up_default();
  enum { N = 12 };
  pp_req s[N];
  uint8_t *src = guarded(64, 0x42);
  for (int i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), src, 64, ATTACKER, 1, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_SEND, T_EAGER), 8);
  struct whdr h = {.type = T_CREDIT, .credits = 8};
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_SEND, T_EAGER), N);
  for (int i = 0; i < N; i++)
    cr_assert_eq(done(VICTIM, &s[i]).error, PP_P2P_E_OK);
  honest_goes_on();
}

Test(hostile_p2p, reply_credits_returned_that_were_never_lent)
{
  p2p_up_default();
  struct whdr h = eager(0, 5, 0);
  h.rcredits = 1;
  lone_header_fails(&h, "EAGER", PP_VF_RCREDITS);
}

Test(hostile_p2p, ack_for_a_standard_send)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src = guarded(64, 0x42);
  cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), src, 64, ATTACKER, 1, 0, 0, &s), PP_OK);
  run();
  struct whdr m = sent(VICTIM, ATTACKER, T_EAGER, 0);
  cr_assert_eq(m.flags & WF_SYNC, 0);
  struct whdr h = {.type = T_ACK, .sreq = m.sreq};
  forge_hdr(&h);
  run();
  expect_violation("ACK", PP_VF_HANDLE);
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK, "it had completed before");
  honest_goes_on();
}

Test(hostile_p2p, duplicate_ack)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src = guarded(64, 0x42);
  cr_assert_eq(pp_p2p_issend(S.e[VICTIM], now(), src, 64, ATTACKER, 1, 0, 0, &s), PP_OK);
  run();
  not_done(VICTIM, &s);
  struct whdr m = sent(VICTIM, ATTACKER, T_EAGER, 0);
  struct whdr h = {.type = T_ACK, .sreq = m.sreq};
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK, "the ACK completes the issend");
  forge_hdr(&h);
  run();
  expect_violation("ACK", PP_VF_HANDLE);
  honest_goes_on();
}

Test(hostile_p2p, ack_for_another_peers_send)
{
  p2p_up_default();
  pp_req s, r;
  uint8_t *src = guarded(64, 0x42), *d = guarded(64, 0);
  cr_assert_eq(pp_p2p_issend(S.e[VICTIM], now(), src, 64, HONEST, 1, 0, 0, &s), PP_OK);
  run();
  struct whdr m = sent(VICTIM, HONEST, T_EAGER, 0); /* its handle, leaked to the attacker */
  struct whdr h = {.type = T_ACK, .sreq = m.sreq};
  forge_hdr(&h);
  run();
  expect_violation("ACK", PP_VF_HANDLE);
  not_done(VICTIM, &s);
  cr_assert_eq(pp_p2p_irecv(S.e[HONEST], now(), d, 64, VICTIM, 1, 0, 0, &r), PP_OK);
  run();
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK, "the honest receiver's ACK completes it");
  cr_assert_eq(done(HONEST, &r).error, PP_P2P_E_OK);
  honest_goes_on();
}

Test(hostile_p2p, cts_for_an_eager_synchronous_send)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src = guarded(100, 0x42);
  cr_assert_eq(pp_p2p_issend(S.e[VICTIM], now(), src, 100, ATTACKER, 1, 0, 0, &s), PP_OK);
  run();
  struct whdr m = sent(VICTIM, ATTACKER, T_EAGER, 0);
  uint8_t *trap = S.abuf + (size_t)(NASLOT - 8) * ASLOT; /* 128 KiB of the attacker's */
  struct whdr h = {.type = T_CTS, .sreq = m.sreq, .len = 65536, .nfrag = 4, .flen = 16384,
                   .addr = (uint64_t)(uintptr_t)trap, .rkey = S.amr.rkey, .rreq = 99};
  forge_hdr(&h);
  run();
  expect_violation("CTS", PP_VF_HANDLE);
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_RDMA_WRITE, -1), 0, "nothing written");
  cr_assert(all_bytes(trap, 8 * ASLOT, 0));
  failed_with_peer(VICTIM, &s);
  honest_goes_on();
}

/* ---------------------------------------------------------------- RPUT: the victim sends */

/* The victim starts an RPUT of len bytes to the attacker; returns its RTS. */
static struct whdr rput_to_attacker(uint32_t len, pp_req *s, uint8_t **src)
{
  *src = guarded(len, 0x5c);
  cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), *src, len, ATTACKER, 3, 0, 0, s), PP_OK);
  run();
  struct whdr m = sent(VICTIM, ATTACKER, T_RTS, 0);
  cr_assert_eq(m.flags & WF_RGET, 0, "an RPUT");
  return m;
}

/* The victim sends 20000 bytes (0x61) to the attacker: an RGET, its RTS as sent. */
static struct whdr rget_to_attacker(pp_req *s)
{
  uint8_t *src = guarded(20000, 0x61);
  cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), src, 20000, ATTACKER, 3, 0, 0, s), PP_OK);
  run();
  struct whdr m = sent(VICTIM, ATTACKER, T_RTS, 0);
  cr_assert(m.flags & WF_RGET, "an RGET");
  return m;
}

static struct whdr cts(const struct whdr *rts, uint32_t idx, uint32_t len, uint8_t *dst)
{
  uint32_t frag = 16 << 10, off = idx * frag;
  return (struct whdr){.type = T_CTS, .sreq = rts->sreq, .rreq = 0xabc, .seq = idx, .len = len,
                       .nfrag = (len + frag - 1) / frag, .off = off,
                       .flen = len - off < frag ? len - off : frag,
                       .addr = (uint64_t)(uintptr_t)(dst + off), .rkey = S.amr.rkey};
}

static void rput_send_bad_cts(enum pp_violation_field f, void (*mutate)(struct whdr *))
{
  p2p_up_default();
  pp_req s;
  uint8_t *src;
  struct whdr rts = rput_to_attacker(100000, &s, &src);
  uint8_t *dst = S.abuf + (size_t)(NASLOT - 16) * ASLOT; /* 256 KiB of the attacker's */
  struct whdr h = cts(&rts, 0, 100000, dst);
  mutate(&h);
  forge_hdr(&h);
  run();
  expect_violation("CTS", f);
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_RDMA_WRITE, -1), 0, "nothing written");
  cr_assert(all_bytes(dst, 16 * ASLOT, 0));
  failed_with_peer(VICTIM, &s);
  honest_goes_on();
}

static void off_past(struct whdr *h)
{
  h->off = 200000; /* past the send */
}
static void len_more(struct whdr *h)
{
  h->len = 1u << 20, h->nfrag = 64; /* more than the send has */
}
static void flen_more(struct whdr *h)
{
  h->flen = 65536;
}
static void idx_first_1(struct whdr *h)
{
  h->seq = 1, h->off = 16384;
}
static void nfrag_wrong(struct whdr *h)
{
  h->nfrag = 2;
}

Test(hostile_p2p, rput_cts_offset_past_the_send)
{
  rput_send_bad_cts(PP_VF_OFF, off_past);
}

Test(hostile_p2p, rput_cts_length_beyond_the_send)
{
  rput_send_bad_cts(PP_VF_LEN, len_more);
}

Test(hostile_p2p, rput_cts_fragment_length_beyond_the_fragment)
{
  rput_send_bad_cts(PP_VF_FLEN, flen_more);
}

Test(hostile_p2p, rput_cts_out_of_order)
{
  rput_send_bad_cts(PP_VF_FRAG, idx_first_1);
}

Test(hostile_p2p, rput_cts_fragment_count_wrong)
{
  rput_send_bad_cts(PP_VF_NFRAG, nfrag_wrong);
}

static void flags_sync(struct whdr *h)
{
  h->flags = WF_SYNC; /* a flag no CTS has */
}

Test(hostile_p2p, rput_cts_unknown_flags)
{
  rput_send_bad_cts(PP_VF_FLAGS, flags_sync);
}

/* A first CTS the victim takes (fragment 0 is written), then one for fragment 1 that changes
 * what the first said (mutate): the violation fails the peer, and nothing more is written. */
static void rput_send_bad_second_cts(enum pp_violation_field f, void (*mutate)(struct whdr *))
{
  p2p_up_default();
  pp_req s;
  uint8_t *src;
  struct whdr rts = rput_to_attacker(100000, &s, &src);
  uint8_t *dst = S.abuf + (size_t)(NASLOT - 16) * ASLOT;
  struct whdr h = cts(&rts, 0, 100000, dst);
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_RDMA_WRITE, -1), 1, "fragment 0 written");
  cr_assert(all_bytes(dst, 16384, 0x5c) && all_bytes(dst + 16384, 16 * ASLOT - 16384, 0),
            "exactly fragment 0, where the CTS said");
  h = cts(&rts, 1, 100000, dst);
  mutate(&h);
  forge_hdr(&h);
  run();
  expect_violation("CTS", f);
  cr_assert_eq(count_posted(VICTIM, ATTACKER, PP_WR_RDMA_WRITE, -1), 1, "nothing more written");
  cr_assert(all_bytes(dst + 16384, 16 * ASLOT - 16384, 0));
  failed_with_peer(VICTIM, &s);
  honest_goes_on();
}

static void len_other(struct whdr *h)
{
  h->len = 90000; /* not what the first CTS took (same fragment count) */
}
static void rreq_other(struct whdr *h)
{
  h->rreq = 0xdef; /* another receive than the first CTS's */
}

Test(hostile_p2p, rput_second_cts_with_another_length)
{
  rput_send_bad_second_cts(PP_VF_LEN, len_other);
}

Test(hostile_p2p, rput_second_cts_naming_another_receive)
{
  rput_send_bad_second_cts(PP_VF_HANDLE, rreq_other);
}

static void fragment0_again(struct whdr *h)
{
  h->seq = 0; /* the first CTS again (fragment 1's, moved back to fragment 0) */
  h->addr -= h->off;
  h->off = 0;
  h->flen = 16 << 10;
}

Test(hostile_p2p, rput_cts_duplicate)
{
  rput_send_bad_second_cts(PP_VF_FRAG, fragment0_again);
}

Test(hostile_p2p, rput_to_a_well_behaved_attacker_writes_only_the_send)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src;
  struct whdr rts = rput_to_attacker(100000, &s, &src);
  uint8_t *dst = S.abuf + (size_t)(NASLOT - 16) * ASLOT;
  for (uint32_t i = 0; i < 7; i++) {
    struct whdr h = cts(&rts, i, 100000, dst);
    forge_hdr(&h);
  }
  run();
  expect_no_violation();
  cr_assert(all_bytes(dst, 100000, 0x5c) && all_bytes(dst + 100000, 16 * ASLOT - 100000, 0));
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK);
  honest_goes_on();
}

Test(hostile_p2p, rget_fin_for_an_rput_send)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src;
  struct whdr rts = rput_to_attacker(100000, &s, &src);
  struct whdr h = {.type = T_FIN, .flags = WF_RGET, .sreq = rts.sreq};
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  failed_with_peer(VICTIM, &s);
  honest_goes_on();
}

/* ---------------------------------------------------------------- RGET: the victim sends */

Test(hostile_p2p, rget_duplicate_fin)
{
  p2p_up_default();
  pp_req s;
  struct whdr rts = rget_to_attacker(&s);
  cr_assert_eq(S.remote_live[VICTIM], 1, "the send buffer is readable while it waits");
  struct whdr h = {.type = T_FIN, .flags = WF_RGET, .sreq = rts.sreq};
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK);
  cr_assert_eq(S.remote_live[VICTIM], 0, "not readable after its FIN");
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  honest_goes_on();
}

/* A FIN at the RGET sender with flags a FIN cannot have (F_SYNC; F_FAILED without F_ABORT): the
 * violation fails the peer and the send with it; its buffer is no longer readable. */
static void rget_bad_fin_flags(uint8_t flags)
{
  p2p_up_default();
  pp_req s;
  struct whdr rts = rget_to_attacker(&s);
  struct whdr h = {.type = T_FIN, .flags = flags, .sreq = rts.sreq};
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_FLAGS);
  failed_with_peer(VICTIM, &s);
  cr_assert_eq(S.remote_live[VICTIM], 0, "the send buffer is no longer readable");
  honest_goes_on();
}

Test(hostile_p2p, rget_fin_unknown_flags)
{
  rget_bad_fin_flags(WF_RGET | WF_SYNC);
}

Test(hostile_p2p, rget_fin_failed_without_abort)
{
  rget_bad_fin_flags(WF_RGET | 8 /* F_FAILED */);
}

Test(hostile_p2p, rget_fin_from_a_third_rank)
{
  p2p_up_default();
  pp_req s, r;
  uint8_t *src = guarded(20000, 0x61), *d = guarded(20000, 0);
  cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), src, 20000, HONEST, 3, 0, 0, &s), PP_OK);
  run();
  struct whdr rts = sent(VICTIM, HONEST, T_RTS, 0); /* leaked to the attacker */
  struct whdr h = {.type = T_FIN, .flags = WF_RGET, .sreq = rts.sreq};
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  not_done(VICTIM, &s);
  cr_assert_eq(S.remote_live[VICTIM], 1, "the honest transfer's buffer is still exposed");
  cr_assert_eq(pp_p2p_irecv(S.e[HONEST], now(), d, 20000, VICTIM, 3, 0, 0, &r), PP_OK);
  run();
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK);
  cr_assert_eq(done(HONEST, &r).error, PP_P2P_E_OK);
  cr_assert(all_bytes(d, 20000, 0x61));
  honest_goes_on();
}

/* ---------------------------------------------------------------- rendezvous: the victim receives */

static struct whdr rts(uint32_t seq, uint32_t len, bool rget, const uint8_t *src)
{
  return (struct whdr){.type = T_RTS, .flags = rget ? WF_RGET : 0, .seq = seq, .tag = 7,
                       .len = len, .sreq = 0x5151, .addr = (uint64_t)(uintptr_t)src,
                       .rkey = S.amr.rkey};
}

Test(hostile_p2p, rts_with_a_body)
{
  p2p_up_default();
  struct whdr h = rts(0, 100000, false, NULL);
  uint8_t body[100] = {0};
  forge(&h, 64 + 100, body, 100);
  run();
  expect_violation("RTS", PP_VF_BYTE_LEN);
  honest_goes_on();
}

Test(hostile_p2p, rts_of_an_eager_size)
{
  p2p_up_default();
  struct whdr h = rts(0, 100, false, NULL);
  lone_header_fails(&h, "RTS", PP_VF_LEN);
}

Test(hostile_p2p, rts_rget_flag_on_an_rput_size)
{
  p2p_up_default();
  struct whdr h = rts(0, 1u << 20, true, S.abuf);
  lone_header_fails(&h, "RTS", PP_VF_FLAGS);
}

Test(hostile_p2p, rget_from_a_well_behaved_attacker_reads_its_buffer)
{
  p2p_up_default();
  uint8_t *src = S.abuf + (size_t)(NASLOT - 4) * ASLOT;
  memset(src, 0x99, 20000);
  uint8_t *d = guarded(20000, 0);
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 20000, ATTACKER, 7, 0, 0, &r), PP_OK);
  struct whdr h = rts(0, 20000, true, src);
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(done(VICTIM, &r).error, PP_P2P_E_OK);
  cr_assert(all_bytes(d, 20000, 0x99));
  cr_assert_eq(sent(VICTIM, ATTACKER, T_FIN, 0).sreq, 0x5151, "the FIN names its RTS");
  honest_goes_on();
}

/* An RTS may carry the FIN of one of the victim's RGET sends to its sender (F_FIN, rreq: the
 * send's handle; engine/proto/p2p/p2p_impl.h, reply first: carried). A well-behaved one
 * finishes that send and its RTS is delivered too. */
Test(hostile_p2p, rts_carrying_the_fin_of_an_rget)
{
  p2p_up_default();
  pp_req s, r;
  uint8_t *out = guarded(20000, 0x61), *d = guarded(20000, 0);
  uint8_t *src = S.abuf + (size_t)(NASLOT - 4) * ASLOT;
  memset(src, 0x99, 20000);
  cr_assert_eq(pp_p2p_isend(S.e[VICTIM], now(), out, 20000, ATTACKER, 3, 0, 0, &s), PP_OK);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 20000, ATTACKER, 7, 0, 0, &r), PP_OK);
  run();
  struct whdr mine = sent(VICTIM, ATTACKER, T_RTS, 0);
  cr_assert_eq(S.remote_live[VICTIM], 1, "the send buffer is readable while it waits");
  struct whdr h = rts(0, 20000, true, src);
  h.flags |= WF_FIN;
  h.rreq = mine.sreq;
  forge_hdr(&h);
  run();
  expect_no_violation();
  cr_assert_eq(done(VICTIM, &s).error, PP_P2P_E_OK, "the carried FIN finished the send");
  cr_assert_eq(S.remote_live[VICTIM], 0, "not readable after it");
  cr_assert_eq(done(VICTIM, &r).error, PP_P2P_E_OK, "and the RTS was delivered");
  cr_assert(all_bytes(d, 20000, 0x99));
  honest_goes_on();
}

/* ... a carried FIN is checked as a FIN is: naming a handle that is no RGET send of ours (here
 * none at all, then an RPUT send's) fails the peer, the RTS with it. */
Test(hostile_p2p, rts_carrying_a_fin_for_no_send)
{
  p2p_up_default();
  uint8_t *d = guarded(20000, 0);
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 20000, ATTACKER, 7, 0, 0, &r), PP_OK);
  struct whdr h = rts(0, 20000, true, S.abuf);
  h.flags |= WF_FIN;
  h.rreq = 0x7777;
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  failed_with_peer(VICTIM, &r);
  cr_assert(all_bytes(d, 20000, 0), "nothing was read");
  honest_goes_on();
}

Test(hostile_p2p, rts_carrying_a_fin_for_an_rput_send)
{
  p2p_up_default();
  pp_req s;
  uint8_t *src;
  struct whdr mine = rput_to_attacker(100000, &s, &src);
  struct whdr h = rts(0, 20000, true, S.abuf);
  h.flags |= WF_FIN;
  h.rreq = mine.sreq;
  forge_hdr(&h);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  failed_with_peer(VICTIM, &s);
  honest_goes_on();
}

/* Only an RTS carries one: an EAGER with F_FIN is refused for its flags. */
Test(hostile_p2p, eager_carrying_a_fin)
{
  p2p_up_default();
  struct whdr h = {.type = T_EAGER, .flags = WF_FIN, .tag = 7, .len = 0, .rreq = 0x7777};
  lone_header_fails(&h, "EAGER", PP_VF_FLAGS);
}

/* The victim receives an RPUT of len bytes from the attacker: returns its first CTS. */
static struct whdr rput_from_attacker(uint32_t len, pp_req *r, uint8_t **d)
{
  *d = guarded(len, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), *d, len, ATTACKER, 7, 0, 0, r), PP_OK);
  struct whdr h = rts(0, len, false, NULL);
  forge_hdr(&h);
  run();
  cr_assert_eq(S.remote_live[VICTIM], 4, "four fragments exposed (pipeline 4)");
  return sent(VICTIM, ATTACKER, T_CTS, 0);
}

static struct whdr fin(const struct whdr *cts)
{
  return (struct whdr){.type = T_FIN, .seq = cts->seq, .rreq = cts->rreq, .sreq = cts->sreq,
                       .flen = cts->flen, .off = cts->off};
}

/* The attacker writes fragment c as its CTS says (a real RDMA WRITE through its NIC). */
static void write_frag(const struct whdr *c, uint8_t v)
{
  uint8_t *b = S.abuf + (size_t)(S.aslot++) * ASLOT;
  memset(b, v, c->flen);
  cr_assert_eq(h_post_send(S.h, ATTACKER, qp_to(ATTACKER, VICTIM), PP_WR_RDMA_WRITE, ++S.awr,
                           &S.amr, b, c->flen, c->addr, c->rkey, true),
               PP_OK);
}

Test(hostile_p2p, rput_duplicate_fin_does_not_complete_the_receive)
{
  p2p_up_default();
  pp_req r;
  uint8_t *d;
  struct whdr c0 = rput_from_attacker(100000, &r, &d);
  write_frag(&c0, 0x21);
  struct whdr f = fin(&c0);
  forge_hdr(&f);
  run();
  expect_no_violation();
  cr_assert_eq(S.remote_live[VICTIM], 4, "fragment 0 no longer writable, fragment 4 is");
  forge_hdr(&f);
  run();
  expect_violation("FIN", PP_VF_FRAG);
  failed_with_peer(VICTIM, &r);
  cr_assert_eq(S.remote_live[VICTIM], 0, "the buffer is no longer remotely writable");
  honest_goes_on();
}

/* Before writing anything, the attacker sends a FIN for its first CTS, mutated: the receive
 * fails and its buffer is no longer remotely writable. */
static void rput_recv_bad_fin(enum pp_violation_field f, void (*mutate)(struct whdr *))
{
  p2p_up_default();
  pp_req r;
  uint8_t *d;
  struct whdr c0 = rput_from_attacker(100000, &r, &d);
  struct whdr h = fin(&c0);
  mutate(&h);
  forge_hdr(&h);
  run();
  expect_violation("FIN", f);
  failed_with_peer(VICTIM, &r);
  cr_assert_eq(S.remote_live[VICTIM], 0);
  honest_goes_on();
}

static void flen_short(struct whdr *h)
{
  h->flen = 100;
}

Test(hostile_p2p, rput_fin_before_any_write_out_of_order)
{
  rput_recv_bad_fin(PP_VF_FRAG, idx_first_1);
}

Test(hostile_p2p, rput_fin_with_the_wrong_length)
{
  rput_recv_bad_fin(PP_VF_FLEN, flen_short);
}

Test(hostile_p2p, rput_fin_unknown_flags)
{
  rput_recv_bad_fin(PP_VF_FLAGS, flags_sync);
}

Test(hostile_p2p, rput_fin_naming_another_senders_transfer)
{
  p2p_up_default();
  pp_req s, r;
  uint8_t *src = guarded(100000, 0x3d), *d = guarded(100000, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 100000, HONEST, 3, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(S.e[HONEST], now(), src, 100000, VICTIM, 3, 0, 0, &s), PP_OK);
  settle(); /* the RTS is posted; then the honest sender waits */
  S.frozen[HONEST] = true;
  run();
  struct whdr c0 = sent(VICTIM, HONEST, T_CTS, 0); /* leaked to the attacker */
  struct whdr f = fin(&c0);
  forge_hdr(&f);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  not_done(VICTIM, &r);
  S.frozen[HONEST] = false;
  run();
  cr_assert_eq(done(VICTIM, &r).error, PP_P2P_E_OK, "the honest transfer completes");
  cr_assert_eq(done(HONEST, &s).error, PP_P2P_E_OK);
  cr_assert(all_bytes(d, 100000, 0x3d));
  honest_goes_on();
}

Test(hostile_p2p, fin_for_a_receive_not_matched_yet)
{
  p2p_up_default();
  pp_req r;
  uint8_t *d = guarded(100000, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 100000, ATTACKER, 7, 0, 0, &r), PP_OK);
  /* its handle, as a guessing attacker would have it: the API handle is the wire's */
  struct whdr f = {.type = T_FIN, .rreq = r, .flen = 16384};
  forge_hdr(&f);
  run();
  expect_violation("FIN", PP_VF_HANDLE);
  failed_with_peer(VICTIM, &r);
  cr_assert(all_bytes(d, 100000, 0));
  honest_goes_on();
}

/* ---------------------------------------------------------------- handles */

/* ---------------------------------------------------------------- p2p.srq */

/* p2p.srq (engine/proto/p2p/srq.c): the pool of 2 peers + srq_limit 2 + 1 buffers, 4 posted. */
static struct pp_engine_cfg srq_cfg(void)
{
  struct pp_engine_cfg c = p2p_cfg();
  pp_p2p_params_of(&c)->srq = true;
  pp_p2p_params_of(&c)->srq_buffers = 2;
  pp_p2p_params_of(&c)->srq_limit = 2;
  return c;
}

/* The attacker's data QP to the victim (srq: after the control QPs). */
static uint32_t dqp_to_victim(void)
{
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(S.e[ATTACKER], VICTIM, &ci));
  cr_assert_eq(ci.nchannels, 2, "srq: a control and a data QP");
  return ci.qp_num[1];
}

static void forge_data(const struct whdr *h)
{
  cr_assert_lt(S.aslot, NASLOT);
  uint8_t *b = S.abuf + (size_t)S.aslot++ * ASLOT;
  memcpy(b, h, 64);
  cr_assert_eq(h_post_send(S.h, ATTACKER, dqp_to_victim(), PP_WR_SEND, ++S.awr, &S.amr, b, 64, 0,
                           0, true),
               PP_OK);
}

/* Each channel starts with one credit: the second EAGER came without one. A burst of six, more
 * than the headroom: the victim fails the attacker at the first it sees, its buffers go back to
 * the SRQ, and the honest peer (rnr_retry 0: an RNR NAK would kill its QP) goes on. */
Test(hostile_p2p, srq_eager_without_a_credit_of_the_pool)
{
  struct pp_engine_cfg c = srq_cfg();
  p2p_up(&c);
  for (uint32_t i = 0; i < 6; i++) {
    struct whdr h = eager(i, 5, 0);
    forge_data(&h);
  }
  run();
  expect_violation("EAGER", PP_VF_NO_CREDIT);
  struct pp_p2p_stats st;
  pp_p2p_stats(S.e[VICTIM], &st);
  cr_assert_eq(st.srq_overruns, 1, "the first one seen failed it: its QP took no more");
  cr_assert_eq(st.srq_limit_events, 0, "the burst never reached the headroom");
  honest_goes_on();
  for (uint32_t r = 0; r < NR; r++) {
    if (r == ATTACKER) /* its own burst may meet an empty SRQ: its problem */
      continue;
    struct pp_nic_counters n;
    simnic_counters(S.nic[r], &n);
    cr_assert_eq(n.rnr_naks_received, 0, "rank %u", r);
  }
}

Test(hostile_p2p, srq_eager_on_the_control_qp)
{
  struct pp_engine_cfg c = srq_cfg();
  p2p_up(&c);
  struct whdr h = eager(0, 5, 0);
  lone_header_fails(&h, "EAGER", PP_VF_TYPE); /* the control QP: replies and credits only */
}

Test(hostile_p2p, srq_credit_on_the_data_qp)
{
  struct pp_engine_cfg c = srq_cfg();
  p2p_up(&c);
  struct whdr h = {.type = T_CREDIT};
  forge_data(&h); /* the data QP: EAGER and RTS only */
  run();
  expect_violation("CREDIT", PP_VF_TYPE);
  honest_goes_on();
}

/* A handle tells nothing of its slot (the nonce), slots start at generations of their own (four
 * receives in four slots: four generations), engines differ, a slot's next request has another
 * handle and the old one is stale; the same seed gives the same handles. What keeps a peer out
 * of another peer's requests is not this but the binding (ack_for_another_peers_send,
 * rput_fin_naming_another_senders_transfer). */
Test(hostile_p2p, handles_differ_per_slot_and_engine_go_stale_and_are_deterministic_per_seed)
{
  struct pp_engine_cfg c = p2p_cfg();
  p2p_up(&c);
  uint8_t *d = guarded(8, 0);
  pp_req a[4], b;
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 8, HONEST, (uint32_t)i, 0, 0, &a[i]), PP_OK);
    cr_assert_gt(a[i] & 0xffffffffu, 1u << 20, "not an index: %llx", (unsigned long long)a[i]);
  }
  for (int i = 1; i < 4; i++)
    cr_assert_neq(a[0] >> 32, a[i] >> 32, "slot %d starts at a generation of its own", i);
  cr_assert_eq(pp_p2p_irecv(S.e[HONEST], now(), d, 8, VICTIM, 0, 0, 0, &b), PP_OK);
  cr_assert_neq(a[0], b, "each engine has its own");
  /* the same slot again: another handle, and the old one is stale */
  cr_assert_eq(pp_p2p_cancel(S.e[VICTIM], now(), a[3]), PP_OK);
  run();
  pp_req old = a[3];
  done(VICTIM, &a[3]);
  pp_req again;
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 8, HONEST, 9, 0, 0, &again), PP_OK);
  cr_assert_neq(again, old);
  cr_assert_eq(pp_p2p_cancel(S.e[VICTIM], now(), old), PP_NOTFOUND);
  /* deterministic: the same configuration and seed give the same handles */
  pp_req first = a[0];
  p2p_down();
  p2p_up(&c);
  d = guarded(8, 0);
  cr_assert_eq(pp_p2p_irecv(S.e[VICTIM], now(), d, 8, HONEST, 0, 0, 0, &b), PP_OK);
  cr_assert_eq(b, first);
}

/* ================================================================ the rings, on the fake fabric */

static struct ff RF;
static struct {
  uint8_t *abuf; /* the attacker's send buffers */
  struct pp_mr amr;
  unsigned used;
} RA;

/* The probe workload (tests/probe.h): the test calls the protocol's send/recv and the probe
 * records what it reports. */
static struct probe PR[NR];

#define SLOTS 4u
#define SLOT 1024u

static void ring_up(enum pp_protocol proto)
{
  struct pp_engine_cfg c = {
      .nranks = NR,
      .protocol = proto,
      .qp = {.min_rnr_timer = 1, .rnr_retry = 0, .timeout = 14, .retry_cnt = 7,
             .max_rd_atomic = 1, .mtu = 4096, .sq_depth = 16, .rq_depth = 8},
      .workload = {.kind = PP_WORKLOAD_COLLECTIVE, .pattern = PP_PATTERN_RING, .messages = 1,
                   .size = 64},
      .seed = 3,
  };
  pp_ring_params_default(pp_ring_params_of(&c));
  pp_ring_params_of(&c)->slots = SLOTS;
  pp_ring_params_of(&c)->slot_size = SLOT;
  pp_coll_params_default(pp_coll_params_of(&c));
  ff_create(&RF, &c, 1);
  for (uint32_t r = 0; r < NR; r++)
    probe_install(RF.e[r], &PR[r]);
  ff_connect_start(&RF);
}

static void ring_down(void)
{
  if (RF.n)
    ff_fini(&RF);
  memset(&RF, 0, sizeof(RF));
  memset(&RA, 0, sizeof(RA));
  guards_free();
}

TestSuite(hostile_ring, .fini = ring_down);

/* Moves everything that can move: requests executed and acknowledged, completions handed to
 * the honest engines (the attacker's are dropped), their timers; a QP the engine took to ERROR
 * is flushed as a NIC flushes it. */
static void ring_run(void)
{
  for (int guard = 0; guard < 100000; guard++) {
    bool any = false;
    for (uint32_t r = 0; r < NR; r++) {
      for (uint32_t i = 0; i < FF_MAX_QPS; i++) {
        struct ff_qp *q = &RF.nic[r].qps[i];
        if (!q->used)
          continue;
        if (q->state == PP_QPS_ERR && (q->sq_acked != q->sq_tail || q->rq_count)) {
          ff_break_qp(&RF, r, q->qpn, PP_WC_WR_FLUSH_ERR);
          any = true;
          continue;
        }
        struct ff_qp *peer = ff_qp(&RF, q->peer, q->dest_qpn);
        if (peer && (peer->state == PP_QPS_RTR || peer->state == PP_QPS_RTS))
          while (ff_exec(&RF, r, q->qpn))
            any = true;
        while (ff_ack(&RF, r, q->qpn))
          any = true;
      }
      if (r == ATTACKER) {
        any = any || RF.nic[r].cq_count;
        RF.nic[r].cq_head = (RF.nic[r].cq_head + RF.nic[r].cq_count) % RF.nic[r].cq_cap;
        RF.nic[r].cq_count = 0;
        continue;
      }
      while (ff_deliver(&RF, r))
        any = true;
      if (pp_engine_next_deadline(RF.e[r]) <= RF.now) {
        cr_assert_eq(pp_engine_on_timer(RF.e[r], RF.now), PP_OK);
        any = true;
      }
    }
    if (any)
      continue;
    uint64_t d = PP_NO_DEADLINE;
    for (uint32_t r = 0; r < NR; r++)
      if (r != ATTACKER && pp_engine_next_deadline(RF.e[r]) < d)
        d = pp_engine_next_deadline(RF.e[r]);
    if (d == PP_NO_DEADLINE)
      return;
    RF.now = d > RF.now ? d : RF.now;
  }
  cr_assert_fail("the fabric never settled");
}

/* A buffer of rank r registered with the NIC (the probe's application memory). */
static uint8_t *rbuf(uint32_t r, size_t len, uint8_t fill, struct pp_mr *mr)
{
  uint8_t *b = guarded(len, fill);
  cr_assert_eq(pp_engine_reg(RF.e[r], b, len,
                             PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ,
                             mr),
               PP_OK);
  return b;
}

static enum pp_status rsend(uint32_t r, uint32_t to, uint8_t *buf, uint32_t len,
                            const struct pp_mr *mr, uint64_t cookie)
{
  struct pp_msg m = {.peer = to, .buf = buf, .len = len, .mr = mr, .cookie = cookie};
  return RF.e[r]->proto->send(RF.e[r], RF.now, &m);
}

static enum pp_status rrecv(uint32_t r, uint32_t from, uint8_t *buf, uint32_t len,
                            const struct pp_mr *mr, uint64_t cookie)
{
  struct pp_msg m = {.peer = from, .buf = buf, .len = len, .mr = mr, .cookie = cookie};
  return RF.e[r]->proto->recv(RF.e[r], RF.now, &m);
}

static struct pp_conn_info rinfo(uint32_t r, uint32_t peer)
{
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(RF.e[r], peer, &ci));
  return ci;
}

/* The attacker RDMA-writes len bytes of `src` (its own registered memory) to addr with opcode
 * op and the immediate imm, through its QP to the victim. */
static void ring_forge(enum pp_wr_opcode op, const void *src, uint32_t len, uint64_t addr,
                       uint32_t rkey, uint32_t imm)
{
  uint8_t *abuf = RA.abuf;
  struct pp_mr amr = RA.amr;
  unsigned used = RA.used;
  if (!abuf || used == 32) {
    abuf = guarded(32 * 2048, 0);
    cr_assert_eq(ff_ops.reg_mr(&RF.nic[ATTACKER], abuf, 32 * 2048,
                               PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, &amr),
                 PP_OK);
    used = 0;
  }
  cr_assert_leq(len, 2048);
  uint8_t *b = abuf + (size_t)used++ * 2048;
  RA.abuf = abuf, RA.amr = amr, RA.used = used;
  if (len)
    memcpy(b, src, len);
  struct pp_send_wr wr = {.wr_id = 0xa77ac, .opcode = op, .send_flags = PP_SEND_SIGNALED,
                          .num_sge = len ? 1 : 0,
                          .sg_list = {{.addr = (uint64_t)(uintptr_t)b, .length = len,
                                       .lkey = amr.lkey}},
                          .remote_addr = addr, .rkey = rkey, .imm_data = imm};
  cr_assert_eq(ff_ops.post_send(&RF.nic[ATTACKER], rinfo(ATTACKER, VICTIM).qp_num[0], &wr), PP_OK);
}

/* A chunk of len bytes into slot i of the victim's ring for the attacker, immediate imm. */
static void forge_chunk(uint32_t i, uint32_t len, uint32_t imm)
{
  static uint8_t data[2048];
  memset(data, 0x6b, sizeof(data));
  struct pp_conn_info v = rinfo(VICTIM, ATTACKER);
  ring_forge(PP_WR_RDMA_WRITE_WITH_IMM, data, len, v.region[0].addr + (uint64_t)i * SLOT,
             v.region[0].rkey, imm);
}

/* ring-credits: the attacker writes head into the victim's counter and announces `imm`. */
static void forge_head(uint64_t head, uint32_t imm)
{
  struct pp_conn_info v = rinfo(VICTIM, ATTACKER);
  ring_forge(PP_WR_RDMA_WRITE_WITH_IMM, &head, 8, v.region[1].addr, v.region[1].rkey,
             PP_RING_IMM_CREDIT | imm);
}

/* ring-cts: the attacker writes a CTS entry at FIFO position pos and announces end. */
struct wcts {
  uint64_t addr;
  uint32_t size, rkey;
  uint64_t tag;
  uint32_t idx, pad;
};
_Static_assert(sizeof(struct wcts) == 32, "the ring's CTS entries are 32 bytes");

static void forge_cts(uint32_t pos, const struct wcts *t, uint32_t end)
{
  struct pp_conn_info v = rinfo(VICTIM, ATTACKER);
  ring_forge(PP_WR_RDMA_WRITE_WITH_IMM, t, 32, v.region[1].addr + (uint64_t)pos * 32,
             v.region[1].rkey, PP_RING_IMM_CREDIT | end);
}

/* The entry an honest attacker would write for chunk idx. */
static struct wcts honest_cts(uint32_t idx)
{
  struct pp_conn_info a = rinfo(ATTACKER, VICTIM);
  return (struct wcts){.addr = a.region[0].addr + (uint64_t)(idx % SLOTS) * SLOT, .size = SLOT,
                       .rkey = a.region[0].rkey, .tag = (uint64_t)VICTIM << 32 | ATTACKER,
                       .idx = idx};
}

static bool victim_mr_at(uint64_t addr)
{
  for (uint32_t i = 0; i < FF_MAX_MRS; i++)
    if (RF.nic[VICTIM].mrs[i].used && RF.nic[VICTIM].mrs[i].mr.addr == addr)
      return true;
  return false;
}

/* The reaction: one violation of the attacker's, message msg, field f; its QP in ERROR, the
 * victim's slots and credit area for it deregistered, the honest connection alive and working
 * both ways, guards intact. */
static void expect_ring_violation(const char *msg, enum pp_violation_field f)
{
  struct pp_conn_info v = rinfo(VICTIM, ATTACKER);
  struct pp_rank_stats st;
  pp_engine_stats(RF.e[VICTIM], &st);
  char t[256];
  pp_violation_text(&st.first_violation, t, sizeof(t));
  cr_assert_eq(st.peer_violations, 1, "%s", t);
  cr_assert_eq(st.first_violation.peer, ATTACKER, "%s", t);
  cr_assert_str_eq(st.first_violation.msg, msg, "%s", t);
  cr_assert_eq(st.first_violation.field, f, "%s (wanted %s)", t, pp_violation_field_name(f));
  cr_assert_eq(ff_qp(&RF, VICTIM, v.qp_num[0])->state, PP_QPS_ERR);
  cr_assert_not(victim_mr_at(v.region[0].addr), "the slots are no longer registered");
  cr_assert_not(victim_mr_at(v.region[1].addr), "nor the credit area");
  /* the honest connection: one message each way */
  struct pp_mr m[4];
  uint8_t *a = rbuf(VICTIM, 3000, 0x1a, &m[0]), *b = rbuf(HONEST, 3000, 0, &m[1]);
  uint8_t *c = rbuf(HONEST, 3000, 0x2b, &m[2]), *d = rbuf(VICTIM, 3000, 0, &m[3]);
  unsigned s0 = PR[VICTIM].nsend, r0 = PR[VICTIM].nrecv, s1 = PR[HONEST].nsend,
           r1 = PR[HONEST].nrecv;
  cr_assert_eq(rrecv(HONEST, VICTIM, b, 3000, &m[1], 501), PP_OK);
  cr_assert_eq(rrecv(VICTIM, HONEST, d, 3000, &m[3], 502), PP_OK);
  cr_assert_eq(rsend(VICTIM, HONEST, a, 3000, &m[0], 503), PP_OK);
  cr_assert_eq(rsend(HONEST, VICTIM, c, 3000, &m[2], 504), PP_OK);
  ring_run();
  cr_assert_eq(PR[VICTIM].nsend, s0 + 1);
  cr_assert_eq(PR[VICTIM].sends[s0].st, PP_WC_SUCCESS);
  cr_assert_eq(PR[VICTIM].nrecv, r0 + 1);
  cr_assert_eq(PR[VICTIM].recvs[r0].st, PP_WC_SUCCESS);
  cr_assert_eq(PR[HONEST].nsend, s1 + 1);
  cr_assert_eq(PR[HONEST].nrecv, r1 + 1);
  cr_assert(all_bytes(b, 3000, 0x1a) && all_bytes(d, 3000, 0x2b), "honest bytes intact");
  cr_assert_eq(RF.access_errors, 0);
  guards_intact();
}

/* The victim's receive from the attacker, posted before the attack: it failed with it. */
static void ring_recv_failed(void)
{
  bool seen = false;
  for (unsigned i = 0; i < PR[VICTIM].nrecv; i++)
    seen = seen || (PR[VICTIM].recvs[i].cookie == 77 && PR[VICTIM].recvs[i].st == PP_WC_GENERAL_ERR);
  cr_assert(seen, "the receive from the attacker completed with GENERAL_ERR");
}

static void victim_receives(void)
{
  struct pp_mr m;
  uint8_t *d = rbuf(VICTIM, 4 * SLOT, 0, &m);
  cr_assert_eq(rrecv(VICTIM, ATTACKER, d, 4 * SLOT, &m, 77), PP_OK);
}

Test(hostile_ring, credits_chunk_out_of_sequence)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_receives();
  forge_chunk(0, 100, 5);
  ring_run();
  expect_ring_violation("data", PP_VF_SEQ);
  ring_recv_failed();
}

Test(hostile_ring, cts_chunk_out_of_sequence)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_receives();
  forge_chunk(1, 100, 1);
  ring_run();
  expect_ring_violation("data", PP_VF_SEQ);
  ring_recv_failed();
}

Test(hostile_ring, chunk_into_a_slot_not_released)
{
  ring_up(PP_PROTO_RING_CREDITS); /* no receive posted: nothing is consumed */
  for (uint32_t i = 0; i <= SLOTS; i++)
    forge_chunk(i % SLOTS, 100, i);
  ring_run();
  expect_ring_violation("data", PP_VF_SLOT);
}

Test(hostile_ring, chunk_larger_than_a_slot)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_receives();
  forge_chunk(0, SLOT + 1, 0);
  ring_run();
  expect_ring_violation("data", PP_VF_BYTE_LEN);
  ring_recv_failed();
}

Test(hostile_ring, a_send_consuming_a_ring_wqe)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_receives();
  ring_forge(PP_WR_SEND, NULL, 0, 0, 0, 0);
  ring_run();
  expect_ring_violation("data", PP_VF_OPCODE);
  ring_recv_failed();
}

Test(hostile_ring, in_sequence_chunks_are_delivered)
{
  ring_up(PP_PROTO_RING_CREDITS);
  struct pp_mr m;
  uint8_t *d = rbuf(VICTIM, 2 * SLOT, 0, &m);
  cr_assert_eq(rrecv(VICTIM, ATTACKER, d, 2 * SLOT, &m, 77), PP_OK);
  forge_chunk(0, SLOT, 0);
  forge_chunk(1, SLOT, 1 | PP_RING_IMM_LAST);
  ring_run();
  cr_assert_eq(PR[VICTIM].nrecv, 1);
  cr_assert_eq(PR[VICTIM].recvs[0].st, PP_WC_SUCCESS);
  cr_assert(all_bytes(d, 2 * SLOT, 0x6b));
  struct pp_rank_stats st;
  pp_engine_stats(RF.e[VICTIM], &st);
  cr_assert_eq(st.peer_violations, 0);
}

/* The victim sends one chunk to the attacker (it lands in the attacker's slot 0). */
static void victim_sends(unsigned n)
{
  struct pp_mr m;
  uint8_t *s = rbuf(VICTIM, 100, 0x3c, &m);
  for (unsigned i = 0; i < n; i++)
    cr_assert_eq(rsend(VICTIM, ATTACKER, s, 100, &m, 60 + i), PP_OK);
  ring_run();
}

static unsigned victim_writes_to_attacker(void)
{
  return ff_qp(&RF, VICTIM, rinfo(VICTIM, ATTACKER).qp_num[0])->sq_tail;
}

Test(hostile_ring, credits_head_beyond_the_chunks_written)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_sends(1);
  forge_head(2, 2);
  ring_run();
  expect_ring_violation("credit", PP_VF_HEAD);
}

Test(hostile_ring, credits_head_not_ahead)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_sends(1);
  forge_head(0, 0);
  ring_run();
  expect_ring_violation("credit", PP_VF_HEAD);
}

Test(hostile_ring, credits_counter_disagrees_with_its_announcement)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_sends(1);
  forge_head(0, 1); /* announces 1, the counter says 0 */
  ring_run();
  expect_ring_violation("credit", PP_VF_HEAD);
}

Test(hostile_ring, credits_from_a_well_behaved_attacker_let_the_sender_go_on)
{
  ring_up(PP_PROTO_RING_CREDITS);
  victim_sends(SLOTS + 2);
  cr_assert_eq(victim_writes_to_attacker(), SLOTS, "S chunks, then no credit");
  forge_head(2, 2);
  ring_run();
  cr_assert_eq(victim_writes_to_attacker(), SLOTS + 2);
  struct pp_rank_stats st;
  pp_engine_stats(RF.e[VICTIM], &st);
  cr_assert_eq(st.peer_violations, 0);
  cr_assert_eq(PR[VICTIM].nsend, SLOTS + 2);
}

Test(hostile_ring, cts_entry_pointing_outside_the_slots)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(SLOTS + 1);
  cr_assert_eq(victim_writes_to_attacker(), SLOTS);
  uint8_t *trap = guarded(4096, 0);
  struct pp_mr tmr;
  cr_assert_eq(ff_ops.reg_mr(&RF.nic[ATTACKER], trap, 4096, PP_ACCESS_REMOTE_WRITE, &tmr), PP_OK);
  struct wcts t = honest_cts(SLOTS);
  t.addr = (uint64_t)(uintptr_t)trap, t.rkey = tmr.rkey, t.size = 4096;
  forge_cts(0, &t, SLOTS + 1);
  ring_run();
  expect_ring_violation("cts", PP_VF_CTS_ENTRY);
  cr_assert_eq(victim_writes_to_attacker(), SLOTS, "nothing written where it said");
  cr_assert(all_bytes(trap, 4096, 0));
  bool failed = false;
  for (unsigned i = 0; i < PR[VICTIM].nsend; i++)
    failed = failed || (PR[VICTIM].sends[i].cookie == 60 + SLOTS &&
                        PR[VICTIM].sends[i].st == PP_WC_GENERAL_ERR);
  cr_assert(failed, "the send that waited completed with GENERAL_ERR");
}

Test(hostile_ring, cts_entry_with_the_wrong_index)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(SLOTS + 1);
  struct wcts t = honest_cts(SLOTS);
  t.idx = 0;
  forge_cts(0, &t, SLOTS + 1);
  ring_run();
  expect_ring_violation("cts", PP_VF_CTS_ENTRY);
  cr_assert_eq(victim_writes_to_attacker(), SLOTS);
}

Test(hostile_ring, cts_entry_with_the_wrong_tag)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(SLOTS + 1);
  struct wcts t = honest_cts(SLOTS);
  t.tag = (uint64_t)HONEST << 32 | ATTACKER; /* another connection's */
  forge_cts(0, &t, SLOTS + 1);
  ring_run();
  expect_ring_violation("cts", PP_VF_CTS_ENTRY);
}

Test(hostile_ring, cts_grant_beyond_the_ring)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(1);
  struct wcts t = honest_cts(SLOTS);
  forge_cts(0, &t, 2 * SLOTS + 5);
  ring_run();
  expect_ring_violation("credit", PP_VF_HEAD);
}

Test(hostile_ring, cts_grant_not_ahead)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(1);
  struct wcts t = honest_cts(SLOTS);
  forge_cts(0, &t, SLOTS); /* the connection granted S already */
  ring_run();
  expect_ring_violation("credit", PP_VF_HEAD);
}

Test(hostile_ring, cts_from_a_well_behaved_attacker_lands_in_its_slot)
{
  ring_up(PP_PROTO_RING_CTS);
  victim_sends(SLOTS + 1);
  struct wcts t = honest_cts(SLOTS);
  forge_cts(0, &t, SLOTS + 1);
  ring_run();
  cr_assert_eq(victim_writes_to_attacker(), SLOTS + 1);
  struct pp_rank_stats st;
  pp_engine_stats(RF.e[VICTIM], &st);
  cr_assert_eq(st.peer_violations, 0);
}

/* ---------------------------------------------------------------- the run's report */

Test(hostile_p2p, the_report_names_the_peer_the_message_and_the_field)
{
  struct pp_engine_cfg c = p2p_cfg();
  p2p_up(&c);
  struct whdr h = eager(0, 5, 1u << 20);
  forge_hdr(&h);
  run();
  expect_violation("EAGER", PP_VF_LEN);
  struct pp_sim_config sc = {.name = "hostile", .engine = c, .seed = c.seed};
  struct pp_rank_result rr[NR];
  memset(rr, 0, sizeof(rr));
  for (uint32_t r = 0; r < NR; r++) {
    pp_engine_stats(S.e[r], &rr[r].stats);
    snprintf(rr[r].host, sizeof(rr[r].host), "h%u", r);
  }
  struct pp_run_result res = {.outcome = PP_OUTCOME_ERRORS, .nranks = NR, .ranks = rr};
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  pp_report_json(f, &sc, &res);
  pp_report_table(f, &sc, &res);
  fclose(f);
  cr_assert(strstr(text, "\"peer_violations\": 1, \"first_violation\": {\"peer\": 2, "
                         "\"message\": \"EAGER\", \"field\": \"len\", \"value\": 1048576"),
            "%s", text);
  cr_assert(strstr(text, "rank 0: 1 message of peers broke the protocol (connection failed), "
                         "first: EAGER from rank 2: len 1048576, expected 0"),
            "%s", text);
  free(text);
}
