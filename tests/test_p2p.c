/*
 * engine/proto/p2p/: MPI point-to-point semantics and the eager / rendezvous protocols, with two to
 * four engines on simulated NICs driven by the SimGrid-free harness (tests/simnic_harness.c), so
 * every RC rule holds (an RNR NAK is counted, rnr_retry 0 kills the QP) and every test is fast
 * and deterministic. The application is the test itself: its callbacks (prepost/app.h,
 * tests/app_log.c) record every completion, and each request the test completes is checked
 * against what its callback reported; a recording wrapper around the NIC ops counts
 * registrations and what they expose.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/simrun.h"
#include "prepost/app.h"
#include "prepost/engine.h"
#include "prepost/p2p.h"
#include "prepost/hang.h" /* pp_engine_pending */
#include "prepost/proto.h" /* pp_engine_push_timer: filling the timer queue */
#include "app_log.h"
#include "simnic_harness.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

#define MAXR 4
#define ANYS PP_ANY_SOURCE
#define ANYT PP_ANY_TAG

/* ================================================================ NIC ops with a registry */

static struct {
  unsigned remote_live[MAXR]; /* MRs with remote access registered now */
  unsigned remote_max[MAXR];
  unsigned regs[MAXR];
  uint32_t remote_lkeys[MAXR][64];
  struct simnic *nic[MAXR];
} REG;

static int host_of(void *nic)
{
  for (int i = 0; i < MAXR; i++)
    if (REG.nic[i] == nic)
      return i;
  cr_assert_fail("unknown NIC");
  return 0;
}

/* reg_mr refused as by a full MR table (PP_LIMIT): on host `host`, of registrations whose access
 * includes `access` (0: any), after the first `skip` of them, the next `count`. Zeroed: none. */
static struct {
  int host;
  unsigned access;
  unsigned skip, count;
  unsigned seen, refused;
} NOREG;

static bool noreg(int h, unsigned access)
{
  if (NOREG.count == 0 || h != NOREG.host || (access & NOREG.access) != NOREG.access)
    return false;
  if (NOREG.seen++ < NOREG.skip || NOREG.refused == NOREG.count)
    return false;
  NOREG.refused++;
  return true;
}

static int w_reg_mr(void *nic, void *addr, size_t len, unsigned access, struct pp_mr *mr)
{
  int h = host_of(nic);
  if (noreg(h, access))
    return PP_LIMIT;
  int s = simnic_ops.reg_mr(nic, addr, len, access, mr);
  if (s == PP_OK) {
    REG.regs[h]++;
    if (access & (PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ)) {
      for (int i = 0; i < 64; i++)
        if (!REG.remote_lkeys[h][i]) {
          REG.remote_lkeys[h][i] = mr->lkey;
          break;
        }
      if (++REG.remote_live[h] > REG.remote_max[h])
        REG.remote_max[h] = REG.remote_live[h];
    }
  }
  return s;
}

static int w_dereg_mr(void *nic, const struct pp_mr *mr)
{
  int h = host_of(nic);
  for (int i = 0; i < 64; i++)
    if (REG.remote_lkeys[h][i] == mr->lkey) {
      REG.remote_lkeys[h][i] = 0;
      REG.remote_live[h]--;
    }
  return simnic_ops.dereg_mr(nic, mr);
}

/* RDMA READs posted: qp and wr_id, per host */
static struct {
  unsigned n[MAXR];
  uint32_t qp[MAXR][64];
  uint64_t wr_id[MAXR][64];
} READS;

/* post_send refused: on host `host`, of work requests with `opcode`, after the first `skip` of
 * them, the next `count` (the wrapper returns PP_INVALID and the NIC never sees them). Zeroed:
 * nothing is refused. */
static struct {
  int host;
  int opcode;
  unsigned skip, count;
  unsigned seen, refused;
} REFUSE;

static bool refuse(int h, const struct pp_send_wr *wr)
{
  if (REFUSE.count == 0 || h != REFUSE.host || (int)wr->opcode != REFUSE.opcode)
    return false;
  if (REFUSE.seen++ < REFUSE.skip || REFUSE.refused == REFUSE.count)
    return false;
  REFUSE.refused++;
  return true;
}

/* Every work request posted, per host, in post order: its opcode, for a SEND the message type
 * (the first byte of its header: engine/proto/p2p/p2p_impl.h, 2 RTS, 4 FIN), its flags (the
 * second; 16: an RTS carrying a FIN) and the handles it names (sreq, rreq: bytes 24 and 32),
 * and the time. */
enum { T_RTS = 2, T_FIN = 4, TF_FIN = 16 };
static struct {
  unsigned n[MAXR];
  struct {
    int opcode, type, flags;
    bool sig; /* PP_SEND_SIGNALED */
    uint64_t sreq, rreq;
    uint64_t at;
  } wr[MAXR][256];
} POSTS;

static uint64_t now(void);

static void log_post(int h, const struct pp_send_wr *wr)
{
  if (POSTS.n[h] == 256)
    return;
  int type = wr->opcode == PP_WR_SEND && wr->num_sge
                 ? *(const uint8_t *)(uintptr_t)wr->sg_list[0].addr
                 : -1;
  POSTS.wr[h][POSTS.n[h]].opcode = (int)wr->opcode;
  POSTS.wr[h][POSTS.n[h]].type = type;
  POSTS.wr[h][POSTS.n[h]].sig = (wr->send_flags & PP_SEND_SIGNALED) != 0;
  if (type >= 0) {
    const uint8_t *b = (const uint8_t *)(uintptr_t)wr->sg_list[0].addr;
    POSTS.wr[h][POSTS.n[h]].flags = b[1];
    memcpy(&POSTS.wr[h][POSTS.n[h]].sreq, b + 24, 8);
    memcpy(&POSTS.wr[h][POSTS.n[h]].rreq, b + 32, 8);
  }
  POSTS.wr[h][POSTS.n[h]++].at = now();
}

static struct pp_wc LAST_RECV_WC[MAXR]; /* each rank's last receive completion (settle) */

/* The last receive posted to each host's SRQ: its wr_id, its SRQ, and how many were. */
static struct {
  unsigned n[MAXR];
  uint64_t last[MAXR];
  uint32_t srq[MAXR]; /* the SRQ's number */
} SRQ_POSTS;

static int w_post_srq_recv(void *nic, uint32_t srq, const struct pp_recv_wr *wr)
{
  int h = host_of(nic);
  SRQ_POSTS.n[h]++;
  SRQ_POSTS.srq[h] = srq;
  SRQ_POSTS.last[h] = wr->wr_id;
  return simnic_ops.post_srq_recv(nic, srq, wr);
}

static int w_post_send(void *nic, uint32_t qp, const struct pp_send_wr *wr)
{
  int h = host_of(nic);
  if (refuse(h, wr))
    return PP_INVALID;
  log_post(h, wr);
  if (wr->opcode == PP_WR_RDMA_READ && READS.n[h] < 64) {
    READS.qp[h][READS.n[h]] = qp;
    READS.wr_id[h][READS.n[h]++] = wr->wr_id;
  }
  return simnic_ops.post_send(nic, qp, wr);
}

static struct pp_nic_ops wops;
static uint32_t max_mr = 4096; /* the NICs' MR table (tests of registration limits lower it) */

/* ================================================================ the cluster */

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
                               .rnr_retry = 0, /* any RNR NAK would kill the QP */
                               .timeout = 14,
                               .retry_cnt = 7,
                               .max_rd_atomic = 4,
                               .mtu = 4096,
                               .sq_depth = 64,
                               .rq_depth = 8};
  c.workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  pp_p2p_params_default(pp_p2p_params_of(&c));
  c.seed = 1;
  return c;
}

/* The application's answer: once rank `rank` receives a message, its recv_done callback (run
 * from the workload's pump after the event, prepost/app.h) sends `len` bytes back to rank 0, as a
 * ping-pong's answering rank does. Zeroed: no answer. */
static struct reply {
  bool on;
  uint32_t rank, len;
  uint8_t *buf;
  pp_req req;
  uint64_t at; /* when it was sent */
} REPLY;

static enum pp_status (*log_recv_done)(struct pp_engine *, uint64_t, pp_req, uint64_t,
                                       const struct pp_p2p_status *, void *);

static enum pp_status reply_recv_done(struct pp_engine *e, uint64_t t, pp_req req,
                                      uint64_t cookie, const struct pp_p2p_status *st, void *ud)
{
  enum pp_status s = log_recv_done(e, t, req, cookie, st, ud);
  if (s != PP_OK || !REPLY.on || (uint32_t)(uintptr_t)ud != REPLY.rank)
    return s;
  REPLY.on = false;
  REPLY.at = t;
  return pp_p2p_isend(e, t, REPLY.buf, REPLY.len, 0, 9, 0, 0, &REPLY.req);
}

/* up() in two steps: the engines created (create_all), then connected and started. */
static void create_all(const struct pp_engine_cfg *cfg, double loss)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_mr = max_mr;
  prof.max_qp = 64;
  prof.cq_depth = 1 << 16;
  wops = simnic_ops;
  wops.reg_mr = w_reg_mr;
  wops.dereg_mr = w_dereg_mr;
  wops.post_send = w_post_send;
  wops.post_srq_recv = w_post_srq_recv;
  C.n = cfg->nranks;
  C.h = h_create(C.n, &prof, loss, cfg->seed);
  char err[256] = "";
  cr_assert_eq(pp_engine_cfg_check(cfg, err, sizeof(err)), PP_OK, "%s", err);
  struct pp_app_callbacks cb;
  app_log_callbacks(&cb);
  log_recv_done = cb.recv_done;
  cb.recv_done = reply_recv_done;
  for (uint32_t r = 0; r < C.n; r++) {
    struct pp_engine_cfg c = *cfg;
    c.rank = r;
    REG.nic[r] = h_nic(C.h, r);
    cr_assert_eq(pp_engine_create_app(&c, &wops, h_nic(C.h, r), &cb, (void *)(uintptr_t)r,
                                      &C.e[r]),
                 PP_OK);
  }
}

static void connect_and_start(void)
{
  for (uint32_t r = 0; r < C.n; r++)
    for (uint32_t p = 0; p < C.n; p++) {
      struct pp_conn_info ci;
      if (p != r && pp_engine_local_info(C.e[p], r, &ci))
        cr_assert_eq(pp_engine_connect(C.e[r], 0, p, &ci), PP_OK);
    }
  for (uint32_t r = 0; r < C.n; r++)
    cr_assert_eq(pp_engine_start(C.e[r], 0), PP_OK);
}

static void up(const struct pp_engine_cfg *cfg, double loss)
{
  create_all(cfg, loss);
  connect_and_start();
}

static struct pp_scenario sc;
static struct pp_run_result res;

static void down(void)
{
  pp_run_result_free(&res);
  for (uint32_t r = 0; r < C.n; r++)
    pp_engine_destroy(C.e[r]);
  if (C.h)
    h_destroy(C.h);
  memset(&C, 0, sizeof(C));
  memset(&REG, 0, sizeof(REG));
  memset(&READS, 0, sizeof(READS));
  memset(&POSTS, 0, sizeof(POSTS));
  memset(&REPLY, 0, sizeof(REPLY));
  app_log_reset();
  memset(&REFUSE, 0, sizeof(REFUSE));
  memset(&NOREG, 0, sizeof(NOREG));
  memset(&SRQ_POSTS, 0, sizeof(SRQ_POSTS));
  memset(LAST_RECV_WC, 0, sizeof(LAST_RECV_WC));
  max_mr = 4096;
}

TestSuite(p2p, .fini = down);

static uint64_t now(void)
{
  return C.h->now;
}

/* Hands every completion and due timer of every rank to its engine at the current time. */
static void settle(void)
{
  for (bool busy = true; busy;) {
    busy = false;
    for (uint32_t r = 0; r < C.n; r++) {
      struct pp_wc wc[16];
      simnic_set_now(h_nic(C.h, r), now());
      int k = h_poll(C.h, r, wc, 16);
      for (int i = 0; i < k; i++) {
        if (wc[i].opcode == PP_WC_OP_RECV)
          LAST_RECV_WC[r] = wc[i];
        cr_assert_eq(pp_engine_on_wc(C.e[r], now(), &wc[i]), PP_OK, "rank %u wc %s", r,
                     pp_wc_status_name(wc[i].status));
      }
      if (pp_engine_next_deadline(C.e[r]) <= now()) {
        cr_assert_eq(pp_engine_on_timer(C.e[r], now()), PP_OK);
        busy = true;
      }
      busy = busy || k > 0;
    }
  }
}

/* Runs the simulation until nothing is left to do or `until`. */
static void run_until(uint64_t until)
{
  for (;;) {
    settle();
    uint64_t t = h_next_time(C.h);
    for (uint32_t r = 0; r < C.n; r++) {
      uint64_t d = pp_engine_next_deadline(C.e[r]);
      t = d < t ? d : t;
    }
    if (t == UINT64_MAX || t > until) {
      if (until != UINT64_MAX && until > C.h->now)
        C.h->now = until;
      return;
    }
    h_run(C.h, t);
    if (t > C.h->now)
      C.h->now = t;
  }
}

static void run(void)
{
  run_until(UINT64_MAX);
}

static struct pp_nic_counters counters(uint32_t r)
{
  struct pp_nic_counters c;
  simnic_counters(h_nic(C.h, r), &c);
  return c;
}

static uint64_t rnr_total(void)
{
  uint64_t n = 0;
  for (uint32_t r = 0; r < C.n; r++)
    n += counters(r).rnr_naks_sent + counters(r).rnr_naks_received;
  return n;
}

static struct pp_p2p_stats pstats(uint32_t r)
{
  struct pp_p2p_stats s;
  pp_p2p_stats(C.e[r], &s);
  return s;
}

static uint8_t *pattern(uint32_t len, uint32_t seed)
{
  uint8_t *b = malloc(len ? len : 1);
  cr_assert_not_null(b);
  for (uint32_t i = 0; i < len; i++)
    b[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 8));
  return b;
}

/* Tests request r of rank `rank`, which must be complete and reported to its callback with the
 * same status. */
static struct pp_p2p_status done(uint32_t rank, pp_req *r)
{
  struct pp_p2p_status st;
  const struct app_log_ev *ev = app_log_find(rank, *r);
  cr_assert(pp_p2p_test(C.e[rank], r, &st), "request of rank %u not complete", rank);
  cr_assert_eq(*r, PP_REQ_NULL, "a completed request's handle is cleared");
  cr_assert_not_null(ev, "rank %u: the request's completion reached its callback", rank);
  cr_assert(app_log_status_eq(&ev->st, &st),
               "rank %u: the callback's status is the request's (error %s / %s, len %u / %u)",
               rank, pp_p2p_err_name(ev->st.error), pp_p2p_err_name(st.error), ev->st.len,
               st.len);
  return st;
}

static void not_done(uint32_t rank, pp_req *r)
{
  pp_req copy = *r;
  cr_assert_not(pp_p2p_test(C.e[rank], r, NULL), "request of rank %u already complete", rank);
  cr_assert_eq(*r, copy);
}

/* ================================================================ delivery and protocols */

Test(p2p, eager_rget_and_rput_chosen_by_size_and_delivered_intact)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 8192;
  pp_p2p_params_of(&cfg)->rget_limit = 256 << 10;
  pp_p2p_params_of(&cfg)->frag_size = 64 << 10;
  up(&cfg, 0);
  const uint32_t len[] = {0, 1, 8192, 8193, 256 << 10, (256 << 10) + 1, 1000000};
  const uint8_t want[] = {PP_P2P_EAGER,    PP_P2P_EAGER,    PP_P2P_EAGER,   PP_P2P_RNDV_GET,
                          PP_P2P_RNDV_GET, PP_P2P_RNDV_PUT, PP_P2P_RNDV_PUT};
  enum { N = sizeof(len) / sizeof(len[0]) };
  uint8_t *src[N], *dst[N];
  pp_req s[N], r[N];
  for (int i = 0; i < N; i++) {
    src[i] = pattern(len[i], (uint32_t)i);
    dst[i] = calloc(len[i] + 1, 1);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], len[i], 0, 10 + i, 0, 0, &r[i]), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], len[i], 1, 10 + i, 0, 0, &s[i]), PP_OK);
  }
  run();
  for (int i = 0; i < N; i++) {
    struct pp_p2p_status a = done(0, &s[i]), b = done(1, &r[i]);
    cr_assert_eq(a.error, PP_P2P_E_OK);
    cr_assert_eq(b.error, PP_P2P_E_OK, "len %u: %s", len[i], pp_p2p_err_name(b.error));
    cr_assert_eq(b.source, 0);
    cr_assert_eq(b.tag, 10u + i);
    cr_assert_eq(b.len, len[i]);
    cr_assert_eq(b.proto, want[i], "len %u went %s", len[i], pp_p2p_proto_name(b.proto));
    cr_assert_eq(a.proto, want[i]);
    cr_assert_eq(memcmp(src[i], dst[i], len[i]), 0, "len %u: bytes differ", len[i]);
    free(src[i]);
    free(dst[i]);
  }
  struct pp_p2p_stats st = pstats(0);
  cr_assert_eq(st.sent[PP_P2P_EAGER], 3);
  cr_assert_eq(st.sent[PP_P2P_RNDV_GET], 2);
  cr_assert_eq(st.sent[PP_P2P_RNDV_PUT], 2);
  cr_assert_eq(st.fragments, 5 + 16, "(256K+1) -> 5 fragments of 64K, 1000000 -> 16");
  cr_assert_eq(pstats(1).received[PP_P2P_RNDV_PUT], 2);
  cr_assert_eq(rnr_total(), 0);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

Test(p2p, protocol_rndv_sends_everything_by_rendezvous)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.protocol = PP_PROTO_RNDV;
  pp_p2p_params_of(&cfg)->rget_limit = 0; /* and every rendezvous by RPUT */
  up(&cfg, 0);
  uint8_t *a = pattern(100, 1), b[100];
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 100, 0, 1, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100, 1, 1, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(done(1, &r).proto, PP_P2P_RNDV_PUT);
  cr_assert_eq(done(0, &s).error, PP_P2P_E_OK);
  cr_assert_eq(memcmp(a, b, 100), 0);
  free(a);
}

Test(p2p, remote_access_is_granted_only_for_the_transfer)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 1024;
  pp_p2p_params_of(&cfg)->rget_limit = 64 << 10;
  pp_p2p_params_of(&cfg)->frag_size = 64 << 10;
  pp_p2p_params_of(&cfg)->pipeline = 2;
  up(&cfg, 0);
  unsigned base0 = REG.remote_live[0], base1 = REG.remote_live[1];
  cr_assert_eq(base0, 0, "nothing is remotely accessible at rest");
  cr_assert_eq(base1, 0);
  uint8_t *big = pattern(1 << 20, 3), *dst = calloc(1, 1 << 20), *mid = pattern(60000, 4),
          *mdst = calloc(1, 60000);
  pp_req s[2], r[2];
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, 1 << 20, 0, 1, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), mdst, 60000, 0, 2, 0, 0, &r[1]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), big, 1 << 20, 1, 1, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), mid, 60000, 1, 2, 0, 0, &s[1]), PP_OK);
  run();
  cr_assert(pp_p2p_testall(C.e[0], 2, s, NULL));
  cr_assert(pp_p2p_testall(C.e[1], 2, r, NULL));
  cr_assert_eq(memcmp(big, dst, 1 << 20), 0);
  cr_assert_eq(memcmp(mid, mdst, 60000), 0);
  cr_assert_eq(REG.remote_live[0], 0, "the RGET source is closed again");
  cr_assert_eq(REG.remote_live[1], 0, "every RPUT fragment window is closed again");
  cr_assert_eq(REG.remote_max[0], 1, "the RGET source was open during its transfer");
  cr_assert_eq(REG.remote_max[1], 2, "at most `pipeline` fragments open at once");
  free(big), free(dst), free(mid), free(mdst);
}

Test(p2p, registration_cache_reuses_and_forgets_freed_memory)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 1024;
  pp_p2p_params_of(&cfg)->rget_limit = 0;
  pp_p2p_params_of(&cfg)->frag_size = 64 << 10;
  up(&cfg, 0);
  uint8_t *a = pattern(256 << 10, 5), *b = calloc(1, 256 << 10);
  for (int round = 0; round < 3; round++) {
    pp_req s, r;
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 256 << 10, 0, 1, 0, 0, &r), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 256 << 10, 1, 1, 0, 0, &s), PP_OK);
    run();
    done(0, &s), done(1, &r);
  }
  struct pp_p2p_stats st = pstats(0);
  cr_assert_eq(st.rcache.misses, 4, "4 fragments registered once");
  cr_assert_eq(st.rcache.hits, 8, "and found again in rounds 2 and 3");
  cr_assert_eq(pp_p2p_mem_free(C.e[0], a, 256 << 10), 4);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 256 << 10, 0, 1, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 256 << 10, 1, 1, 0, 0, &s), PP_OK);
  run();
  done(0, &s), done(1, &r);
  cr_assert_eq(pstats(0).rcache.misses, 8, "freed memory is registered anew");
  cr_assert_eq(memcmp(a, b, 256 << 10), 0);
  free(a), free(b);
}

/* ================================================================ matching */

Test(p2p, unexpected_message_probe_then_receive)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t *a = pattern(300, 1), b[300];
  pp_req s, r;
  struct pp_p2p_status st;
  cr_assert_not(pp_p2p_iprobe(C.e[1], ANYS, ANYT, 0, &st), "nothing yet");
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 300, 1, 42, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(done(0, &s).error, PP_P2P_E_OK, "a standard eager send completes unmatched");
  for (int i = 0; i < 2; i++) { /* probing does not take the message */
    cr_assert(pp_p2p_iprobe(C.e[1], ANYS, ANYT, 0, &st));
    cr_assert_eq(st.source, 0);
    cr_assert_eq(st.tag, 42);
    cr_assert_eq(st.msg_len, 300);
    cr_assert_eq(st.proto, PP_P2P_EAGER);
  }
  cr_assert(pp_p2p_iprobe(C.e[1], 0, 42, 0, NULL));
  cr_assert_not(pp_p2p_iprobe(C.e[1], 0, 41, 0, NULL), "another tag");
  cr_assert_not(pp_p2p_iprobe(C.e[1], ANYS, ANYT, 1, NULL), "another communicator");
  cr_assert_eq(pstats(1).unexpected, 1);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 300, ANYS, 42, 0, 0, &r), PP_OK);
  run();
  st = done(1, &r);
  cr_assert_eq(st.len, 300);
  cr_assert_eq(memcmp(a, b, 300), 0);
  cr_assert_not(pp_p2p_iprobe(C.e[1], ANYS, ANYT, 0, NULL), "taken now");
  free(a);
}

Test(p2p, probe_sees_rendezvous_messages_too)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t *a = pattern(100000, 2), *b = calloc(1, 100000);
  pp_req s, r;
  struct pp_p2p_status st;
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100000, 1, 3, 7, 0, &s), PP_OK);
  run();
  not_done(0, &s); /* a rendezvous send waits for its receive */
  cr_assert(pp_p2p_iprobe(C.e[1], 0, ANYT, 7, &st));
  cr_assert_eq(st.msg_len, 100000);
  cr_assert_eq(st.ctx, 7);
  cr_assert_eq(st.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 100000, 0, 3, 7, 0, &r), PP_OK);
  run();
  done(0, &s), done(1, &r);
  cr_assert_eq(memcmp(a, b, 100000), 0);
  free(a), free(b);
}

Test(p2p, wildcards_and_communicators)
{
  struct pp_engine_cfg cfg = base(3);
  up(&cfg, 0);
  uint32_t v1 = 1, v2 = 2, v3 = 3, got[4] = {0};
  pp_req s[3], r[4];
  /* rank 0: a receive on context 1, then ANY_SOURCE tag 5, then source 2 ANY_TAG, then any */
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), &got[0], 4, ANYS, ANYT, 1, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), &got[1], 4, ANYS, 5, 0, 0, &r[1]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), &got[2], 4, 2, ANYT, 0, 0, &r[2]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[1], now(), &v1, 4, 0, 5, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[2], now(), &v2, 4, 0, 9, 0, 0, &s[1]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[2], now(), &v3, 4, 0, 6, 1, 0, &s[2]), PP_OK);
  run();
  struct pp_p2p_status a = done(0, &r[0]), b = done(0, &r[1]), c = done(0, &r[2]);
  cr_assert_eq(got[0], 3, "context 1 gets only the context-1 message");
  cr_assert_eq(a.source, 2); cr_assert_eq(a.tag, 6); cr_assert_eq(a.ctx, 1);
  cr_assert_eq(got[1], 1); cr_assert_eq(b.source, 1); cr_assert_eq(b.tag, 5);
  cr_assert_eq(got[2], 2); cr_assert_eq(c.source, 2); cr_assert_eq(c.tag, 9);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), &got[3], 4, 1, ANYT, 0, 0, &r[3]), PP_OK);
  run();
  not_done(0, &r[3]);
  pp_p2p_cancel(C.e[0], now(), r[3]);
  run();
  cr_assert_eq(done(0, &r[3]).error, PP_P2P_E_CANCELLED);
}

Test(p2p, wildcard_posted_before_specific_matches_first)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t x[2] = {0}, v[2] = {10, 20};
  pp_req r[2], s[2];
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x[0], 4, ANYS, ANYT, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x[1], 4, 0, 5, 0, 0, &r[1]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v[0], 4, 1, 5, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v[1], 4, 1, 5, 0, 0, &s[1]), PP_OK);
  run();
  cr_assert(pp_p2p_testall(C.e[1], 2, r, NULL));
  cr_assert_eq(x[0], 10, "the wildcard was posted first: it gets the first message");
  cr_assert_eq(x[1], 20);
  /* and the other way round */
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x[0], 4, 0, 5, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x[1], 4, ANYS, ANYT, 0, 0, &r[1]), PP_OK);
  v[0] = 30, v[1] = 40;
  cr_assert(pp_p2p_testall(C.e[0], 2, s, NULL));
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v[0], 4, 1, 5, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v[1], 4, 1, 5, 0, 0, &s[1]), PP_OK);
  run();
  cr_assert(pp_p2p_testall(C.e[1], 2, r, NULL));
  cr_assert_eq(x[0], 30); cr_assert_eq(x[1], 40);
}

/* Mixed sizes on one (source, tag): later small eager messages must not overtake earlier large
 * rendezvous ones in matching, even though they complete first. */
Test(p2p, non_overtaking_across_protocols)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 2048;
  pp_p2p_params_of(&cfg)->rget_limit = 32768;
  pp_p2p_params_of(&cfg)->frag_size = 16384;
  up(&cfg, 0);
  enum { N = 40 };
  static uint8_t src[N][70000], dst[N][70000];
  uint32_t len[N];
  pp_req s[N], r[N];
  for (int i = 0; i < N; i++) {
    len[i] = (uint32_t[]){100, 5000, 60000, 7}[i % 4] + (uint32_t)i;
    memset(src[i], i + 1, len[i]);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], len[i], 1, 3, 0, 0, &s[i]), PP_OK);
  }
  run_until(now() + 20000);
  for (int i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], sizeof(dst[i]), i % 3 ? 0u : ANYS,
                              i % 2 ? 3u : ANYT, 0, 0, &r[i]),
                 PP_OK);
  run();
  for (int i = 0; i < N; i++) {
    struct pp_p2p_status st = done(1, &r[i]);
    cr_assert_eq(st.len, len[i], "receive %d got a message of %u bytes, not %u", i, st.len,
                 len[i]);
    cr_assert_eq(dst[i][0], i + 1);
    cr_assert_eq(dst[i][len[i] - 1], i + 1);
    done(0, &s[i]);
  }
}

/* Two channels (QPs) per peer; the first message's packet is lost once, so the second message
 * arrives first over the other QP (the lost one is sent again at the responder's sequence-error
 * NAK). The receiver holds it back until the first is there. */
static int dropped;
static bool drop_first_request(void *ctx, const struct simnic_pkt_info *in)
{
  (void)ctx;
  if (!dropped && !strcmp(in->kind, "REQ") && in->src_host == 0) {
    dropped = 1;
    return true;
  }
  return false;
}

Test(p2p, non_overtaking_across_channels)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->channels = 2;
  cfg.qp.timeout = 6; /* 262 us: the lost packet is retransmitted soon */
  up(&cfg, 0);
  dropped = 0;
  C.h->drop = drop_first_request;
  uint32_t v[6] = {1, 2, 3, 4, 5, 6}, x[6] = {0};
  pp_req s[6], r[6];
  for (int i = 0; i < 6; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x[i], 4, 0, 8, 0, 0, &r[i]), PP_OK);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v[i], 4, 1, 8, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(dropped, 1);
  cr_assert_geq(pstats(1).out_of_order, 1, "a later message arrived first");
  for (int i = 0; i < 6; i++) {
    done(1, &r[i]);
    cr_assert_eq(x[i], (uint32_t)i + 1, "receive %d got message %u", i, x[i]);
  }
  /* the message behind the lost one on its QP showed the gap: a sequence-error NAK (one retry)
   * well before the ACK timeout */
  cr_assert_eq(counters(0).timeout_retries, 1);
  cr_assert_eq(rnr_total(), 0);
}

/* ================================================================ truncation, sync, cancel */

Test(p2p, truncation_is_an_error_of_that_receive_only)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 1024;
  pp_p2p_params_of(&cfg)->rget_limit = 8192;
  pp_p2p_params_of(&cfg)->frag_size = 4096;
  up(&cfg, 0);
  const uint32_t len[] = {500, 5000, 20000}; /* eager, RGET, RPUT */
  for (int i = 0; i < 3; i++) {
    uint8_t *a = pattern(len[i], (uint32_t)i), *b = calloc(1, len[i]);
    pp_req s, r, s2, r2;
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, len[i] / 2 + 1, 0, 1, 0, 0, &r), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, len[i], 1, 1, 0, 0, &s), PP_OK);
    run();
    struct pp_p2p_status st = done(1, &r);
    cr_assert_eq(st.error, PP_P2P_E_TRUNCATED, "%u bytes into %u", len[i], len[i] / 2 + 1);
    cr_assert_eq(st.len, len[i] / 2 + 1);
    cr_assert_eq(st.msg_len, len[i]);
    cr_assert_eq(memcmp(a, b, len[i] / 2 + 1), 0, "what fits is delivered");
    cr_assert_eq(b[len[i] / 2 + 1], 0, "nothing beyond the buffer");
    cr_assert_eq(done(0, &s).error, PP_P2P_E_OK, "the sender does not see an error");
    /* the run goes on */
    memset(b, 0, len[i]);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, len[i], 0, 2, 0, 0, &r2), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, len[i], 1, 2, 0, 0, &s2), PP_OK);
    run();
    cr_assert_eq(done(1, &r2).error, PP_P2P_E_OK);
    cr_assert_eq(memcmp(a, b, len[i]), 0);
    done(0, &s2);
    free(a), free(b);
  }
  cr_assert_eq(pstats(1).truncated, 3);
}

Test(p2p, zero_byte_receive_of_a_rendezvous_message)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 64;
  up(&cfg, 0);
  const uint32_t len[] = {5000, 3 << 20}; /* RGET, RPUT */
  for (int i = 0; i < 2; i++) {
    uint8_t *a = pattern(len[i], 1);
    pp_req s, r;
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), NULL, 0, 0, 1, 0, 0, &r), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, len[i], 1, 1, 0, 0, &s), PP_OK);
    run();
    struct pp_p2p_status st = done(1, &r);
    cr_assert_eq(st.error, PP_P2P_E_TRUNCATED);
    cr_assert_eq(st.proto, i ? PP_P2P_RNDV_PUT : PP_P2P_RNDV_GET);
    cr_assert_eq(done(0, &s).error, PP_P2P_E_OK);
    free(a);
  }
}

Test(p2p, issend_completes_only_after_the_receive_started)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t a[64] = {1}, b[64], c[64] = {2}, d[64];
  pp_req ss, s, r1, r2;
  cr_assert_eq(pp_p2p_issend(C.e[0], now(), a, 64, 1, 1, 0, 0, &ss), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), c, 64, 1, 2, 0, 0, &s), PP_OK);
  run_until(now() + 500000);
  not_done(0, &ss);
  struct pp_p2p_status st = done(0, &s);
  cr_assert_eq(st.error, PP_P2P_E_OK, "the standard send did not wait for a receive");
  uint64_t posted = now();
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 64, 0, 1, 0, 0, &r1), PP_OK);
  run();
  st = done(0, &ss);
  cr_assert_gt(st.done_ns, posted, "the synchronous send completed after the receive was posted");
  cr_assert_eq(done(1, &r1).len, 64);
  cr_assert_eq(pstats(1).sync_acks, 1);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), d, 64, 0, 2, 0, 0, &r2), PP_OK);
  run();
  done(1, &r2);
  /* a synchronous rendezvous send: the handshake itself says the receive started */
  uint8_t *big = pattern(200000, 1), *bd = calloc(1, 200000);
  cr_assert_eq(pp_p2p_issend(C.e[0], now(), big, 200000, 1, 3, 0, 0, &ss), PP_OK);
  run_until(now() + 500000);
  not_done(0, &ss);
  posted = now();
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), bd, 200000, 0, 3, 0, 0, &r1), PP_OK);
  run();
  cr_assert_gt(done(0, &ss).done_ns, posted);
  done(1, &r1);
  free(big), free(bd);
}

Test(p2p, cancel_a_pending_receive)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t x = 0, y = 0, v = 7;
  pp_req r, r2, s;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &x, 4, 0, 1, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r), PP_OK);
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r), PP_STATE, "already cancelled");
  run();
  struct pp_p2p_status st = done(1, &r);
  cr_assert_eq(st.error, PP_P2P_E_CANCELLED);
  cr_assert_eq(st.len, 0);
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r), PP_NOTFOUND, "a cleared handle");
  /* the message goes to the next receive instead */
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v, 4, 1, 1, 0, 0, &s), PP_OK);
  cr_assert_eq(pp_p2p_cancel(C.e[0], now(), s), PP_UNSUPPORTED, "sends are not cancelled");
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &y, 4, 0, 1, 0, 0, &r2), PP_OK);
  run();
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r2), PP_STATE, "matched: too late");
  cr_assert_eq(done(1, &r2).error, PP_P2P_E_OK);
  cr_assert_eq(x, 0);
  cr_assert_eq(y, 7);
  cr_assert_eq(pstats(1).cancelled, 1);
  done(0, &s);
}

/* ================================================================ credits */

Test(p2p, late_receiver_with_rnr_retry_0_no_rnr_senders_parked)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->credits = 4;
  pp_p2p_params_of(&cfg)->credit_threshold = 2;
  up(&cfg, 0);
  enum { N = 100 };
  static uint8_t src[N][512], dst[N][512];
  pp_req s[N], r[N];
  for (int i = 0; i < N; i++) {
    memset(src[i], i, 512);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], 512, 1, 1, 0, 0, &s[i]), PP_OK);
  }
  run_until(now() + 1000000); /* the receiver posts nothing for 1 ms */
  int completed = 0;
  for (int i = 0; i < N; i++)
    completed += pp_p2p_test(C.e[0], &s[i], NULL);
  cr_assert_eq(completed, 4, "exactly one message per receiver buffer went out");
  struct pp_p2p_stats st0 = pstats(0), st1 = pstats(1);
  cr_assert_eq(st0.parked, 1, "the rest waits, parked");
  cr_assert_eq(st1.unexpected_max, 4, "unexpected memory is bounded by the credits");
  cr_assert_eq(rnr_total(), 0);
  for (int i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], 512, 0, 1, 0, 0, &r[i]), PP_OK);
  run();
  for (int i = 0; i < N; i++) {
    done(1, &r[i]);
    cr_assert_eq(memcmp(src[i], dst[i], 512), 0, "message %d", i);
    if (i >= 4)
      done(0, &s[i]);
  }
  cr_assert_eq(rnr_total(), 0);
  cr_assert_eq(counters(0).rnr_retries, 0);
  cr_assert_gt(pstats(1).credit_msgs, 0, "one-way traffic: credits came back by credit message");
}

Test(p2p, credits_ride_on_reverse_traffic)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->credits = 4;
  up(&cfg, 0);
  uint8_t a[128] = {0}, b[128];
  for (int i = 0; i < 50; i++) { /* ping-pong */
    pp_req s, r;
    uint32_t from = (uint32_t)i % 2, to = 1 - from;
    cr_assert_eq(pp_p2p_irecv(C.e[to], now(), b, 128, from, 0, 0, 0, &r), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[from], now(), a, 128, to, 0, 0, 0, &s), PP_OK);
    run();
    done(to, &r), done(from, &s);
  }
  struct pp_p2p_stats s0 = pstats(0), s1 = pstats(1);
  cr_assert_eq(s0.credit_msgs + s1.credit_msgs, 0, "no credit message needed");
  cr_assert_geq(s0.credits_piggybacked + s1.credits_piggybacked, 48);
  cr_assert_eq(s0.parked + s1.parked, 0);
}

/* A receiver that never takes its messages: the sender stops at its credits, nothing is lost,
 * nothing fails, and the run simply has work left. */
Test(p2p, receiver_that_never_receives_holds_the_sender_back)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->credits = 3;
  up(&cfg, 0);
  uint8_t a[64] = {0};
  pp_req s[10];
  for (int i = 0; i < 10; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 64, 1, 1, 0, 0, &s[i]), PP_OK);
  run();
  for (int i = 0; i < 10; i++)
    cr_assert_eq(pp_p2p_test(C.e[0], &s[i], NULL), i < 3, "send %d", i);
  cr_assert_not(pp_engine_done(C.e[0]), "sends still pending");
  cr_assert_eq(pstats(1).unexpected_max, 3);
  cr_assert_eq(pstats(0).failed, 0);
  cr_assert_eq(rnr_total(), 0);
}

/* ================================================================ API edges */

Test(p2p, api_bounds_and_errors)
{
  struct pp_engine_cfg cfg = base(3);
  pp_p2p_params_of(&cfg)->max_requests = 4;
  up(&cfg, 0);
  uint8_t a[8];
  pp_req r[5];
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 8, 0, 1, 0, 0, &r[0]), PP_INVALID, "to itself");
  cr_assert_eq(r[0], PP_REQ_NULL);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 8, 7, 1, 0, 0, &r[0]), PP_INVALID, "no rank 7");
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 8, 1, ANYT, 0, 0, &r[0]), PP_INVALID);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), NULL, 8, 1, 1, 0, 0, &r[0]), PP_INVALID);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), a, 8, 9, 1, 0, 0, &r[0]), PP_INVALID);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[0], now(), a, 8, ANYS, ANYT, 0, 0, &r[i]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), a, 8, ANYS, ANYT, 0, 0, &r[4]), PP_AGAIN,
               "every request in use");
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 8, 1, 1, 0, 0, &r[4]), PP_AGAIN);
  cr_assert_not(pp_p2p_testall(C.e[0], 4, r, NULL));
  pp_req stale = r[0];
  pp_p2p_cancel(C.e[0], now(), r[0]);
  run();
  done(0, &r[0]);
  cr_assert_not(pp_p2p_test(C.e[0], &stale, NULL), "a stale handle is never complete");
  cr_assert_eq(pp_p2p_cancel(C.e[0], now(), stale), PP_NOTFOUND);
  pp_req null = PP_REQ_NULL;
  cr_assert(pp_p2p_test(C.e[0], &null, NULL), "the null request is complete");
  for (int i = 1; i < 4; i++)
    pp_p2p_cancel(C.e[0], now(), r[i]);
  run();
  struct pp_p2p_status st[3];
  cr_assert(pp_p2p_testall(C.e[0], 3, &r[1], st));
  cr_assert_eq(st[2].error, PP_P2P_E_CANCELLED);
  cr_assert_eq(pp_p2p_mem_free(NULL, a, 8), 0);
  cr_assert_not(pp_p2p_iprobe(NULL, ANYS, ANYT, 0, NULL));
}

/* A request tested while it is still on the done list (its completion not delivered yet) is
 * released there: every copy of its handle is stale at once, not only once the list gets to
 * it and the slot is free. */
Test(p2p, a_request_tested_on_the_done_list_is_stale_at_once)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t a[8];
  pp_req r, copy;
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), a, 8, 1, 1, 0, 0, &r), PP_OK);
  copy = r;
  cr_assert_eq(pp_p2p_cancel(C.e[0], now(), r), PP_OK); /* done, on the done list */
  struct pp_p2p_status st;
  cr_assert(pp_p2p_test(C.e[0], &r, &st), "complete (cancelled) before the list is flushed");
  cr_assert_eq(st.error, PP_P2P_E_CANCELLED);
  cr_assert_not(pp_p2p_test(C.e[0], &copy, NULL), "a released request's handle is stale");
  cr_assert_eq(pp_p2p_cancel(C.e[0], now(), copy), PP_NOTFOUND);
  run();
  cr_assert_not(pp_p2p_test(C.e[0], &copy, NULL), "and stays stale once freed");
}

Test(p2p, sends_need_a_started_engine)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.rank = 0;
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  C.h = h_create(2, &prof, 0, 1);
  C.n = 1;
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  cr_assert_eq(pp_engine_create_app(&cfg, &simnic_ops, h_nic(C.h, 0), &cb, NULL, &C.e[0]), PP_OK);
  uint8_t a[8];
  pp_req r;
  cr_assert_eq(pp_p2p_isend(C.e[0], 0, a, 8, 1, 1, 0, 0, &r), PP_STATE);
  cr_assert_eq(pp_p2p_irecv(C.e[0], 0, a, 8, 1, 1, 0, 0, &r), PP_OK,
               "receives may be posted before the start");
}

Test(p2p, configuration_checks)
{
  struct pp_engine_cfg c = base(2);
  char err[256];
  pp_p2p_params_of(&c)->pipeline = 9;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "pipeline"), "%s", err);
  c = base(2);
  pp_p2p_params_of(&c)->credits = 4;
  pp_p2p_params_of(&c)->credit_threshold = 5;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "credit_threshold"), "%s", err);
  c = base(2);
  pp_p2p_params_of(&c)->channels = 5;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  c = base(2);
  c.protocol = PP_PROTO_NAIVE;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "needs protocol eager or rndv"), "%s", err);
  c = base(2);
  pp_p2p_params_of(&c)->rget_limit = 4 << 20;
  pp_p2p_params_of(&c)->rcache_bytes = 1 << 20;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "rcache_bytes"), "%s", err);
  c = base(2);
  pp_p2p_params_of(&c)->credits = 4097;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "credits"), "%s", err);
  c = base(70);
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID, "api: every pair");
  struct pp_p2p_params p;
  c = base(2);
  pp_p2p_params_resolve(&c, &p);
  cr_assert_eq(p.credits, c.qp.rq_depth, "credits default to rq_depth");
  cr_assert_eq(p.credit_threshold, 4);
  cr_assert_eq(p.eager_limit, 12288);
  c.protocol = PP_PROTO_RNDV;
  pp_p2p_params_resolve(&c, &p);
  cr_assert_eq(p.eager_limit, 0);
  cr_assert_str_eq(pp_p2p_proto_name(PP_P2P_RNDV_GET), "rndv-get");
  cr_assert_str_eq(pp_p2p_proto_name(PP_P2P_PROTO_COUNT), "?");
  cr_assert_str_eq(pp_p2p_err_name(PP_P2P_E_TRUNCATED), "truncated");
  cr_assert_str_eq(pp_p2p_err_name(PP_P2P_ERR_COUNT), "?");
}

/* The receive records' checksum tells every byte and the length: each single-bit flip of a
 * buffer (lengths around the 8-byte words and 32-byte blocks it reads) changes it, zero
 * buffers of different lengths differ, and it does not depend on the buffer's alignment. */
Test(p2p, checksum_sees_every_bit_and_the_length)
{
  uint8_t b[80 + 8], z[80] = {0};
  uint64_t zero[81];
  for (size_t len = 0; len <= 80; len++) {
    zero[len] = pp_p2p_checksum(z, len);
    for (size_t k = 0; k < len; k++)
      cr_assert_neq(zero[len], zero[k], "zero buffers of %zu and %zu bytes", len, k);
  }
  for (size_t len = 1; len <= 80; len++) {
    for (size_t i = 0; i < len; i++)
      b[i] = (uint8_t)(i * 37 + len);
    uint64_t base = pp_p2p_checksum(b, len);
    memmove(b + 3, b, len);
    cr_assert_eq(pp_p2p_checksum(b + 3, len), base, "unaligned, %zu bytes", len);
    memmove(b, b + 3, len);
    for (size_t i = 0; i < len; i++)
      for (int bit = 0; bit < 8; bit++) {
        b[i] ^= (uint8_t)(1u << bit);
        cr_assert_neq(pp_p2p_checksum(b, len), base, "%zu bytes, bit %d of byte %zu", len, bit, i);
        b[i] ^= (uint8_t)(1u << bit);
      }
  }
}

Test(p2p, receives_are_recorded_in_completion_order)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->record = 2;
  up(&cfg, 0);
  uint8_t a[3][40], b[3][40];
  pp_req s[3], r[3];
  for (int i = 0; i < 3; i++) {
    memset(a[i], 'a' + i, 40);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b[i], i == 1 ? 20 : 40, 0, (uint32_t)i, 0, 0, &r[i]),
                 PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a[i], 40, 1, (uint32_t)i, 0, 0, &s[i]), PP_OK);
  }
  run();
  const struct pp_recv_record *rec;
  uint64_t dropped;
  cr_assert_eq(pp_p2p_receives(C.e[1], &rec, &dropped), 2);
  cr_assert_eq(dropped, 1, "the third went beyond the bound");
  cr_assert_eq(rec[0].tag, 0);
  cr_assert_eq(rec[0].rank, 1);
  cr_assert_eq(rec[0].size, 40);
  cr_assert_eq(rec[0].checksum, pp_p2p_checksum(a[0], 40));
  cr_assert_eq(rec[1].error, PP_P2P_E_TRUNCATED);
  cr_assert_eq(rec[1].size, 20);
  cr_assert_eq(rec[1].msg_len, 40);
  cr_assert_eq(rec[1].checksum, pp_p2p_checksum(a[1], 20));
  struct pp_recv_record *copy;
  cr_assert_eq(pp_p2p_receives_copy(C.e[1], &copy, NULL), 2);
  cr_assert_eq(memcmp(copy, rec, 2 * sizeof(*rec)), 0);
  free(copy);
  cr_assert_eq(pp_p2p_receives(C.e[0], &rec, NULL), 0);
}

/* ================================================================ failures */

static bool drop_everything(void *ctx, const struct simnic_pkt_info *in)
{
  (void)ctx, (void)in;
  return true;
}

Test(p2p, a_dead_peer_fails_its_requests_and_nothing_else_hangs)
{
  struct pp_engine_cfg cfg = base(3);
  cfg.qp.timeout = 4;
  cfg.qp.retry_cnt = 1;
  up(&cfg, 0);
  uint8_t a[100] = {0}, b[100], big[50000] = {0}, x[4];
  pp_req s[3], r[3];
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 100, 0, 1, 0, 0, &r[0]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), x, 4, 1, 1, 0, 0, &r[1]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), x, 4, ANYS, 9, 0, 0, &r[2]), PP_OK);
  C.h->drop = drop_everything;
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100, 1, 1, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), big, 50000, 1, 1, 0, 0, &s[1]), PP_OK);
  run();
  struct pp_p2p_status st = done(0, &s[0]);
  cr_assert_eq(st.error, PP_P2P_E_FAILED);
  cr_assert_eq(st.wc_status, PP_WC_RETRY_EXC_ERR);
  cr_assert_eq(done(0, &s[1]).error, PP_P2P_E_FAILED);
  cr_assert_eq(done(0, &r[1]).error, PP_P2P_E_FAILED, "a receive from the dead peer fails");
  not_done(0, &r[2]); /* ANY_SOURCE: another rank may still send */
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100, 1, 1, 0, 0, &s[2]), PP_OK);
  run();
  cr_assert_eq(done(0, &s[2]).error, PP_P2P_E_FAILED, "new sends to it fail at once");
  cr_assert_eq(pp_p2p_issend(C.e[0], now(), a, 100, 1, 1, 0, 0, &s[2]), PP_OK);
  run();
  st = done(0, &s[2]);
  cr_assert_eq(st.error, PP_P2P_E_FAILED, "synchronous ones too");
  cr_assert_eq(st.wc_status, PP_WC_RETRY_EXC_ERR, "with the peer's failure");
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), x, 4, 1, 1, 0, 0, &r[1]), PP_OK);
  run();
  cr_assert_eq(done(0, &r[1]).error, PP_P2P_E_FAILED);
  cr_assert_geq(pstats(0).failed, 5);
  cr_assert(pp_engine_done(C.e[0]), "nothing left to wait for: the dead channel's work flushed");
}

/* Two channels; the receiver's RGET READs are on both. Channel 1's QP fails while channel 0's
 * READ has already completed successfully in the CQ, not yet polled: the failure takes the whole
 * peer down (its requests fail, its other channel is closed), and the READ's success, polled
 * afterwards, is a stale completion of a failed request, not invalid input. */
Test(p2p, a_completion_of_a_request_that_failed_with_its_peer_is_stale_not_invalid)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.protocol = PP_PROTO_RNDV;
  pp_p2p_params_of(&cfg)->channels = 2;
  cfg.qp.timeout = 4;
  cfg.qp.retry_cnt = 1;
  up(&cfg, 0);
  static uint8_t a[2][2000], b[2][2000];
  pp_req s[2], r[2];
  for (int i = 0; i < 2; i++) {
    memset(a[i], i + 1, sizeof(a[i]));
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b[i], 2000, 0, 1, 0, 0, &r[i]), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a[i], 2000, 1, 1, 0, 0, &s[i]), PP_OK);
  }
  while (READS.n[1] < 2) { /* until the receiver posted both READs */
    settle();
    uint64_t t = h_next_time(C.h);
    cr_assert_neq(t, UINT64_MAX, "the READs were never posted");
    h_run(C.h, t);
    C.h->now = t > C.h->now ? t : C.h->now;
  }
  cr_assert_neq(READS.qp[1][0], READS.qp[1][1], "one READ per channel");
  /* the NIC completes READ 0; the engine does not poll yet */
  struct pp_wc held[16], wc[16];
  int nheld = 0;
  bool read0 = false;
  while (!read0) {
    uint64_t t = h_next_time(C.h);
    cr_assert_neq(t, UINT64_MAX, "READ 0 never completed");
    h_run(C.h, t);
    C.h->now = t > C.h->now ? t : C.h->now;
    simnic_set_now(h_nic(C.h, 1), now());
    int k = h_poll(C.h, 1, held + nheld, 16 - nheld);
    for (int i = nheld; i < nheld + k; i++)
      read0 = read0 || held[i].wr_id == READS.wr_id[1][0];
    nheld += k;
  }
  /* then channel 1's QP fails: its READ is flushed */
  struct pp_qp_attr err = {.qp_state = PP_QPS_ERR};
  cr_assert_eq(simnic_ops.modify_qp(h_nic(C.h, 1), READS.qp[1][1], &err, PP_QP_STATE), PP_OK);
  int k = h_poll(C.h, 1, wc, 16);
  cr_assert_gt(k, 0);
  for (int i = 0; i < k; i++)
    cr_assert_eq(pp_engine_on_wc(C.e[1], now(), &wc[i]), PP_OK, "flush %s",
                 pp_wc_status_name(wc[i].status));
  cr_assert_eq(simnic_qp_state(h_nic(C.h, 1), READS.qp[1][0]), PP_QPS_ERR,
               "the dead peer's other channel is closed");
  for (int i = 0; i < nheld; i++)
    cr_assert_eq(pp_engine_on_wc(C.e[1], now(), &held[i]), PP_OK, "held wc %s wr_id %#llx",
                 pp_wc_status_name(held[i].status), (unsigned long long)held[i].wr_id);
  run();
  for (int i = 0; i < 2; i++) {
    struct pp_p2p_status st = done(1, &r[i]);
    cr_assert_eq(st.error, PP_P2P_E_FAILED, "receive %d: %s", i, pp_p2p_err_name(st.error));
  }
  cr_assert(pp_engine_done(C.e[1]), "nothing of the dead peer left to wait for");
}

/* The NICs' MR tables hold the engine's own 3 registrations and 2 more. Four RPUT receives of 3
 * fragments match at once; each fragment needs a registration on both sides (the receiver
 * exposes it, the sender's registration cache registers its source, and keeps it after use).
 * Registrations are handed out in line, in the order the transfers asked: nothing is stuck
 * (cached registrations nobody uses make room when the NIC's table is full), no later receive
 * overtakes an earlier one. */
Test(p2p, a_full_mr_table_makes_transfers_wait_in_line_never_stuck)
{
  max_mr = 3 + 2;
  struct pp_engine_cfg cfg = base(2);
  cfg.protocol = PP_PROTO_RNDV;
  pp_p2p_params_of(&cfg)->rget_limit = 0;
  pp_p2p_params_of(&cfg)->frag_size = 4096;
  pp_p2p_params_of(&cfg)->pipeline = 2;
  up(&cfg, 0);
  enum { N = 4, LEN = 3 * 4096 };
  uint8_t *src[N], *dst[N];
  pp_req s[N], r[N];
  for (int i = 0; i < N; i++) {
    src[i] = aligned_alloc(4096, LEN);
    dst[i] = aligned_alloc(4096, LEN);
    memset(src[i], i + 1, LEN);
    memset(dst[i], 0, LEN);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], LEN, 0, (uint32_t)i, 0, 0, &r[i]), PP_OK);
  }
  for (int i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], LEN, 1, (uint32_t)i, 0, 0, &s[i]), PP_OK);
  run();
  for (int i = 0; i < N; i++) {
    pp_req copy = r[i];
    cr_assert(pp_p2p_test(C.e[1], &copy, NULL), "receive %d stuck", i);
    cr_assert(pp_p2p_test(C.e[0], &s[i], NULL), "send %d stuck", i);
  }
  const struct pp_recv_record *rec;
  cr_assert_eq(pp_p2p_receives(C.e[1], &rec, NULL), N);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(rec[i].error, PP_P2P_E_OK, "receive %d: %s", i, pp_p2p_err_name(rec[i].error));
    cr_assert_eq(rec[i].tag, (uint32_t)i, "completion %d was receive %u: overtaken", i,
                 rec[i].tag);
    cr_assert_eq(memcmp(src[i], dst[i], LEN), 0, "message %d", i);
    free(src[i]), free(dst[i]);
  }
  cr_assert_gt(pstats(0).rcache.evictions, 0, "the sender's unused registrations made room");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* The MR tables hold the engines' own registrations and nothing more: a transfer that needs one
 * could wait for ever, so it fails with PP_P2P_E_NO_MR on both sides, and the messages after it
 * still arrive, in order. */
Test(p2p, no_registration_to_wait_for_is_a_clear_error_not_a_hang)
{
  max_mr = 3;
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->eager_limit = 1024;
  pp_p2p_params_of(&cfg)->rget_limit = 8192;
  pp_p2p_params_of(&cfg)->frag_size = 4096;
  up(&cfg, 0);
  static uint8_t a[3][20000], b[3][20000];
  const uint32_t len[3] = {5000, 20000, 100}; /* RGET, RPUT, eager */
  pp_req s[3], r[3];
  for (int i = 0; i < 3; i++) {
    memset(a[i], i + 1, len[i]);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b[i], 20000, 0, 5, 0, 0, &r[i]), PP_OK);
  }
  for (int i = 0; i < 3; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a[i], len[i], 1, 5, 0, 0, &s[i]), PP_OK);
  run();
  struct pp_p2p_status st = done(0, &s[0]);
  cr_assert_eq(st.error, PP_P2P_E_NO_MR, "RGET source: %s", pp_p2p_err_name(st.error));
  cr_assert_eq(done(0, &s[1]).error, PP_P2P_E_NO_MR, "RPUT: the receiver could not expose");
  cr_assert_eq(done(0, &s[2]).error, PP_P2P_E_OK);
  /* the RGET never reached a receive: the first receive got the RPUT, the second the eager */
  cr_assert_eq(done(1, &r[0]).error, PP_P2P_E_NO_MR);
  st = done(1, &r[1]);
  cr_assert_eq(st.error, PP_P2P_E_OK);
  cr_assert_eq(st.len, 100);
  cr_assert_eq(memcmp(a[2], b[1], 100), 0);
  not_done(1, &r[2]);
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r[2]), PP_OK);
  run();
  cr_assert_eq(done(1, &r[2]).error, PP_P2P_E_CANCELLED);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* The RPUT sender posts a fragment's WRITE unsignalled (its send-queue slot comes back with the
 * FIN's completion), except into the last free slot: there it is signalled, else the FIN would
 * wait for a slot that only its own completion frees. Every depth from 1 completes. */
Test(p2p, rput_completes_at_every_send_queue_depth)
{
  for (uint32_t depth = 1; depth <= 4; depth++) {
    struct pp_engine_cfg cfg = base(2);
    cfg.protocol = PP_PROTO_RNDV;
    pp_p2p_params_of(&cfg)->rget_limit = 0;
    pp_p2p_params_of(&cfg)->frag_size = 4096;
    pp_p2p_params_of(&cfg)->pipeline = 4;
    cfg.qp.sq_depth = depth;
    up(&cfg, 0);
    enum { N = 3, LEN = 5 * 4096 + 100 };
    static uint8_t src[N][LEN], dst[N][LEN];
    pp_req s[N], r[N];
    for (int i = 0; i < N; i++) {
      memset(src[i], i + 7, LEN);
      memset(dst[i], 0, LEN);
      cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], LEN, 0, 2, 0, 0, &r[i]), PP_OK);
      cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], LEN, 1, 2, 0, 0, &s[i]), PP_OK);
    }
    run();
    for (int i = 0; i < N; i++) {
      struct pp_p2p_status st = done(1, &r[i]);
      cr_assert_eq(st.error, PP_P2P_E_OK, "sq_depth %u: %s", depth, pp_p2p_err_name(st.error));
      cr_assert_eq(st.proto, PP_P2P_RNDV_PUT);
      cr_assert_eq(memcmp(src[i], dst[i], LEN), 0, "sq_depth %u message %d", depth, i);
      cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK);
    }
    cr_assert_eq(pstats(0).fragments, N * 6);
    cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "sq_depth %u", depth);
    down();
  }
}

/* Every resource at its minimum: one credit, one reply credit, two send-queue slots, one eager
 * send buffer, one cached registration; everything still gets through, by waiting. */
Test(p2p, starved_resources_wait_never_fail)
{
  struct pp_engine_cfg cfg = base(3);
  cfg.qp.sq_depth = 2;
  pp_p2p_params_of(&cfg)->credits = 1;
  pp_p2p_params_of(&cfg)->credit_threshold = 1;
  pp_p2p_params_of(&cfg)->reply_slots = 1;
  pp_p2p_params_of(&cfg)->send_buffers = 1;
  pp_p2p_params_of(&cfg)->rcache_entries = 1;
  pp_p2p_params_of(&cfg)->pipeline = 2;
  pp_p2p_params_of(&cfg)->eager_limit = 256;
  pp_p2p_params_of(&cfg)->rget_limit = 8192;
  pp_p2p_params_of(&cfg)->frag_size = 4096;
  pp_p2p_params_of(&cfg)->rcache_bytes = 16384;
  up(&cfg, 0);
  enum { N = 24 };
  static uint8_t src[2][N][20000], dst[2][N][20000];
  pp_req s[2][N], r[2][N];
  for (int i = 0; i < N; i++)
    for (uint32_t k = 0; k < 2; k++) {
      uint32_t len = (uint32_t[]){100, 5000, 20000, 0}[i % 4];
      memset(src[k][i], i + 1, len);
      cr_assert_eq(pp_p2p_irecv(C.e[2], now(), dst[k][i], 20000, k, (uint32_t)i, 0, 0, &r[k][i]),
                   PP_OK);
      cr_assert_eq((i % 3 ? pp_p2p_isend : pp_p2p_issend)(C.e[k], now(), src[k][i], len, 2,
                                                           (uint32_t)i, 0, 0, &s[k][i]),
                   PP_OK);
    }
  run();
  for (int i = 0; i < N; i++)
    for (uint32_t k = 0; k < 2; k++) {
      uint32_t len = (uint32_t[]){100, 5000, 20000, 0}[i % 4];
      struct pp_p2p_status st = done(2, &r[k][i]);
      cr_assert_eq(st.error, PP_P2P_E_OK);
      cr_assert_eq(st.len, len);
      cr_assert_eq(memcmp(src[k][i], dst[k][i], len), 0, "rank %u message %d", k, i);
      cr_assert_eq(done(k, &s[k][i]).error, PP_P2P_E_OK);
    }
  cr_assert_eq(rnr_total(), 0);
  cr_assert_gt(pstats(0).parked, 0);
  cr_assert_gt(pstats(2).credit_msgs, 0);
  for (uint32_t k = 0; k < 3; k++)
    cr_assert(pp_engine_done(C.e[k]));
}

/* ================================================================ the slow consumer, on SimGrid */

/* The stream workload of the naive RNR experiment, unchanged, over the p2p protocols. */
static void slow_consumer(const char *name, enum pp_p2p_proto proto)
{
  char path[PP_PATH_MAX], err[1024] = "";
  snprintf(path, sizeof(path), "%s/scenarios/%s.yaml", PREPOST_MODELS_DIR, name);
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK, "%s", err);
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 0, "the first RNR NAK would be fatal");
  cr_assert_eq(sc.sim.engine.workload.kind, PP_WORKLOAD_STREAM);
  cr_assert_eq(pp_sim_run(&sc.sim, NULL, &res, err, sizeof(err)), PP_OK, "%s", err);
  const struct pp_rank_result *s = &res.ranks[0], *r = &res.ranks[1];
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "outcome %s", pp_outcome_name(res.outcome));
  cr_assert_eq(s->nic.rnr_naks_received + r->nic.rnr_naks_sent, 0, "zero RNR NAKs");
  cr_assert_eq(s->stats.messages_sent, 200);
  cr_assert_eq(r->stats.messages_received, 200, "every message, checked byte by byte, in order");
  cr_assert_eq(r->stats.corrupt, 0);
  cr_assert_eq(s->p2p.sent[proto], 200);
  cr_assert_gt(s->p2p.parked, 0, "out of credits, the sender waited");
  cr_assert_gt(r->p2p.credit_msgs, 0, "one-way traffic: credits came back by credit message");
  cr_assert_leq(r->p2p.unexpected_max, pp_p2p_params_of(&sc.sim.engine)->credits);
  cr_assert_eq(r->nreceives, 200);
  /* paced by the consumer: 8 buffers, each held 100 us */
  cr_assert_geq(res.sim_time_ns, (200 / 8 - 1) * 100000ull);
}

Test(p2p, seed_slow_consumer_eager_with_credits_no_rnr)
{
  slow_consumer("rnr-slow-consumer-eager", PP_P2P_EAGER);
}

Test(p2p, seed_slow_consumer_rendezvous_no_rnr)
{
  slow_consumer("rnr-slow-consumer-rndv", PP_P2P_RNDV_GET);
  cr_assert_eq(res.ranks[1].receives[0].proto, PP_P2P_RNDV_GET);
}

/* ================================================================ posts the NIC refuses */

/* Refuses the `count` work requests of `opcode` that host `host` posts after its first `skip`. */
static void refuse_posts(int host, enum pp_wr_opcode opcode, unsigned skip, unsigned count)
{
  REFUSE.host = host;
  REFUSE.opcode = (int)opcode;
  REFUSE.skip = skip;
  REFUSE.count = count;
}

/* One more transfer from rank 0 to rank 1 of len bytes, which must arrive intact. */
static void transfer_ok(uint32_t len, uint32_t tag)
{
  uint8_t *src = pattern(len, tag), *dst = calloc(1, len);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, tag, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, tag, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(done(0, &s).error, PP_P2P_E_OK);
  cr_assert_eq(done(1, &r).error, PP_P2P_E_OK);
  cr_assert_eq(memcmp(src, dst, len), 0);
  free(src);
  free(dst);
}

Test(p2p, a_refused_read_fails_both_sides_and_revokes_the_remote_access)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t len = 64 << 10; /* RGET */
  uint8_t *src = pattern(len, 1), *dst = calloc(1, len);
  refuse_posts(1, PP_WR_RDMA_READ, 0, 1);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, 5, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(REFUSE.refused, 1);
  struct pp_p2p_status rs = done(1, &r), ss = done(0, &s);
  cr_assert_eq(rs.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(rs.error));
  cr_assert_eq(rs.wc_status, PP_WC_LOC_QP_OP_ERR);
  cr_assert_eq(rs.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(ss.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(ss.error));
  cr_assert_eq(ss.wc_status, PP_WC_REM_ABORT_ERR);
  cr_assert_eq(REG.remote_max[0], 1);
  cr_assert_eq(REG.remote_live[0], 0, "the sender's buffer is no longer remotely readable");
  cr_assert_eq(pstats(0).failed, 1);
  cr_assert_eq(pstats(1).failed, 1);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing left behind");
  transfer_ok(len, 6); /* the connection goes on: the next READ is posted and completes */
  free(src);
  free(dst);
}

/* Two ranks whose sends over the eager limit are RPUTs of 64 KiB fragments, `pipeline` of them
 * in flight. */
static void rput_up(uint32_t pipeline)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->rget_limit = 0; /* RPUT */
  pp_p2p_params_of(&cfg)->frag_size = 64 << 10;
  pp_p2p_params_of(&cfg)->pipeline = pipeline;
  up(&cfg, 0);
}

Test(p2p, a_refused_write_fails_both_sides_and_every_fragment_window_closes)
{
  rput_up(2);
  uint32_t len = 512 << 10; /* 8 fragments */
  uint8_t *src = pattern(len, 2), *dst = calloc(1, len);
  refuse_posts(0, PP_WR_RDMA_WRITE, 2, 1); /* the third fragment's WRITE */
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, 5, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(REFUSE.refused, 1);
  struct pp_p2p_status rs = done(1, &r), ss = done(0, &s);
  cr_assert_eq(ss.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(ss.error));
  cr_assert_eq(ss.wc_status, PP_WC_LOC_QP_OP_ERR);
  cr_assert_eq(rs.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(rs.error));
  cr_assert_eq(rs.wc_status, PP_WC_REM_ABORT_ERR);
  cr_assert_eq(pstats(0).fragments, 2, "no fragment is written after the refused one");
  cr_assert_eq(REG.remote_live[1], 0, "every fragment window is closed again");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing left behind");
  transfer_ok(len, 6);
  free(src);
  free(dst);
}

Test(p2p, refused_sends_fail_alone_and_leak_no_send_queue_slot)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.qp.sq_depth = 4;
  up(&cfg, 0);
  refuse_posts(0, PP_WR_SEND, 0, cfg.qp.sq_depth); /* as many as the send queue holds */
  uint8_t *src = pattern(100, 1);
  pp_req s[4];
  for (uint32_t i = 0; i < 4; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, 100, 1, 1 + i, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(REFUSE.refused, 4);
  for (uint32_t i = 0; i < 4; i++) {
    struct pp_p2p_status st = done(0, &s[i]);
    cr_assert_eq(st.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(st.error));
    cr_assert_eq(st.wc_status, PP_WC_LOC_QP_OP_ERR);
  }
  for (uint32_t i = 0; i < 3 * cfg.qp.sq_depth; i++)
    transfer_ok(100 + i, 10 + i); /* every send-queue slot is there for them */
  cr_assert_eq(pstats(0).failed, 4);
  free(src);
}

Test(p2p, a_refused_send_leaves_no_gap_in_the_peer_order)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->credits = 2; /* the later sends queue behind the refused one */
  pp_p2p_params_of(&cfg)->credit_threshold = 1;
  up(&cfg, 0);
  refuse_posts(0, PP_WR_SEND, 2, 1); /* the third message */
  enum { N = 8 };
  uint8_t *src[N], *dst[N];
  pp_req s[N], r[N];
  for (uint32_t i = 0; i < N; i++) {
    src[i] = pattern(1000, i);
    dst[i] = calloc(1, 1000);
    r[i] = PP_REQ_NULL;
    if (i != 2)
      cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], 1000, 0, ANYT, 0, 0, &r[i]), PP_OK);
  }
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], 1000, 1, i, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(REFUSE.refused, 1);
  cr_assert_eq(done(0, &s[2]).error, PP_P2P_E_FAILED);
  for (uint32_t i = 0; i < N; i++) {
    if (i == 2)
      continue;
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK);
    struct pp_p2p_status st = done(1, &r[i]);
    cr_assert_eq(st.error, PP_P2P_E_OK, "message %u: %s", i, pp_p2p_err_name(st.error));
    cr_assert_eq(st.tag, i, "ANY_TAG receives take the messages in send order");
    cr_assert_eq(memcmp(dst[i], src[i], 1000), 0);
  }
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing held out of order");
  for (uint32_t i = 0; i < N; i++)
    free(src[i]), free(dst[i]);
}

/* ================================================================ selective signalling */

enum { T_EAGER = 1 };

/* Host h's SEND posts of message type `type`: how many, how many unsignalled, and the longest
 * run of unsignalled ones in a row. */
static void eager_posts(int h, unsigned *n, unsigned *unsig, unsigned *run)
{
  *n = *unsig = *run = 0;
  unsigned cur = 0;
  for (unsigned i = 0; i < POSTS.n[h]; i++) {
    if (POSTS.wr[h][i].opcode != PP_WR_SEND || POSTS.wr[h][i].type != T_EAGER)
      continue;
    (*n)++;
    cur = POSTS.wr[h][i].sig ? 0 : cur + 1;
    *unsig += !POSTS.wr[h][i].sig;
    *run = cur > *run ? cur : *run;
  }
}

/* Rank 1 posts n receives of 100 bytes (tags 0..n-1) into dst[], then rank 0 sends n messages
 * of 100 bytes from src to them: the first `plain` with isend, the rest with issend. */
static void burst_post(uint32_t n, uint32_t plain, const uint8_t *src, uint8_t (*dst)[100],
                       pp_req *s, pp_req *r)
{
  for (uint32_t i = 0; i < n; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], 100, 0, i, 0, 0, &r[i]), PP_OK);
  for (uint32_t i = 0; i < n; i++)
    cr_assert_eq((i < plain ? pp_p2p_isend : pp_p2p_issend)(C.e[0], now(), src, 100, 1, i, 0, 0,
                                                            &s[i]),
                 PP_OK);
}

/* Runs the fabric one step at a time until rank 0 has posted `want` EAGERs (the rest of the
 * run is the caller's); their unsignalled count and longest run in *unsig, *longest. */
static void run_until_posted(unsigned want, unsigned *unsig, unsigned *longest)
{
  unsigned n = 0;
  for (;;) {
    settle();
    eager_posts(0, &n, unsig, longest);
    if (n >= want)
      break;
    uint64_t t = h_next_time(C.h);
    cr_assert_neq(t, UINT64_MAX, "the burst never started");
    h_run(C.h, t);
    C.h->now = t > C.h->now ? t : C.h->now;
  }
  cr_assert_eq(n, want, "no EAGER past the ones awaited");
}

/* Bursts of EAGERs (parked sends started when credits come back) go mostly unsignalled, at most
 * 15 in a row, through a send queue of sq_depth slots and a pool of `buffers` send buffers:
 * neither overflows (the NIC refuses a post into a full send queue: the request would fail; an
 * empty pool would leave the rest waiting), every buffer and send-queue slot comes back and
 * every message arrives intact; the unsignalled sends' requests complete without a completion
 * of their own. */
static void bursts_through(uint32_t sq_depth, uint32_t buffers)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.qp.sq_depth = sq_depth;
  pp_p2p_params_of(&cfg)->send_buffers = buffers;
  pp_p2p_params_of(&cfg)->credits = 40;
  pp_p2p_params_of(&cfg)->credit_threshold = 40;
  up(&cfg, 0);
  enum { N = 200 };
  static uint8_t dst[N][100];
  uint8_t *src[N];
  pp_req s[N], r[N];
  for (uint32_t i = 0; i < N; i++) {
    src[i] = pattern(100, i);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], 100, 0, i, 0, 0, &r[i]), PP_OK);
  }
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], 100, 1, i, 0, 0, &s[i]), PP_OK);
  run();
  for (uint32_t i = 0; i < N; i++) {
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
    cr_assert_eq(done(1, &r[i]).error, PP_P2P_E_OK, "receive %u", i);
    cr_assert_eq(memcmp(dst[i], src[i], 100), 0);
    free(src[i]);
  }
  unsigned n, unsig, longest;
  eager_posts(0, &n, &unsig, &longest);
  cr_assert_eq(n, N);
  cr_assert_gt(unsig, N / 4, "EAGERs went unsignalled");
  cr_assert_lt(longest, 16, "at most SIG_EVERY - 1 unsignalled in a row");
  cr_assert(pp_engine_done(C.e[0]), "every send-queue slot came back");
  cr_assert_eq(rnr_total(), 0);
}

Test(p2p, unsignalled_eager_bursts_overflow_no_send_queue)
{
  bursts_through(3, 64);
}

Test(p2p, unsignalled_eager_bursts_empty_no_send_buffer_pool)
{
  bursts_through(64, 3);
}

/* The same with big send buffers only: long bursts, capped at 15 unsignalled in a row. */
Test(p2p, unsignalled_eager_runs_are_capped)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->credits = 40;
  pp_p2p_params_of(&cfg)->credit_threshold = 40;
  up(&cfg, 0);
  enum { N = 120 };
  static uint8_t src[100], dst[N][100];
  pp_req s[N], r[N];
  burst_post(N, N, src, dst, s, r);
  run();
  for (uint32_t i = 0; i < N; i++) {
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
    cr_assert_eq(done(1, &r[i]).error, PP_P2P_E_OK, "receive %u", i);
  }
  unsigned n, unsig, longest;
  eager_posts(0, &n, &unsig, &longest);
  cr_assert_eq(longest, 15, "runs of SIG_EVERY - 1 (bursts of 40)");
  cr_assert_geq(unsig, 70);
  cr_assert(pp_engine_done(C.e[0]));
}

/* Rank 0 to rank 1: N0 sends that start at once (credits for all), then a burst of B that
 * start when rank 1's CREDIT comes back, of which all but the last go unsignalled; then the
 * link dies before any of the burst leaves. The burst's unsignalled SENDs fail (retry
 * exceeded, then flushed): each completion names its send buffer by wr_id, the channel and
 * the peer fail (the signalled last one's request and the sends still parked fail with
 * PP_P2P_E_FAILED), and every send buffer of the burst comes back: rank 2 then gets as many
 * messages as there are buffers, twice over. The unsignalled ones completed when posted (their
 * payloads were in the send buffers). */
Test(p2p, a_failed_unsignalled_burst_fails_the_peer_and_gives_every_buffer_back)
{
  struct pp_engine_cfg cfg = base(3);
  cfg.qp.timeout = 4;
  cfg.qp.retry_cnt = 1;
  enum { D = 8, B = 8, P = 2, N = D + B + P };
  pp_p2p_params_of(&cfg)->credits = D;
  pp_p2p_params_of(&cfg)->credit_threshold = D;
  pp_p2p_params_of(&cfg)->send_buffers = B;
  up(&cfg, 0);
  static uint8_t src[100], dst[N][100];
  pp_req s[N], r[N];
  burst_post(N, N, src, dst, s, r);
  unsigned unsig, longest;
  run_until_posted(D + B, &unsig, &longest); /* the burst (in the event of rank 1's CREDIT) */
  cr_assert_eq(unsig, B - 1, "the burst but its last went unsignalled");
  for (uint32_t i = D; i < D + B - 1; i++) /* completed once posted */
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
  C.h->drop = drop_everything;
  run();
  for (uint32_t i = 0; i < D; i++)
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
  struct pp_p2p_status st = done(0, &s[D + B - 1]);
  cr_assert_eq(st.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(st.error));
  cr_assert_eq(st.wc_status, PP_WC_RETRY_EXC_ERR, "%s", pp_wc_status_name(st.wc_status));
  for (uint32_t i = D + B; i < N; i++)
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_FAILED, "parked send %u", i);
  cr_assert(pp_engine_done(C.e[0]), "the failed channel's work requests all completed");
  C.h->drop = NULL;
  static uint8_t a[2 * B][100], b[2 * B][100];
  pp_req rs[2 * B], rr[2 * B];
  for (uint32_t k = 0; k < 2 * B; k++) { /* every buffer back: else these would wait */
    memset(a[k], (int)k, sizeof(a[k]));
    cr_assert_eq(pp_p2p_irecv(C.e[2], now(), b[k], 100, 0, 50 + k, 0, 0, &rr[k]), PP_OK);
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), a[k], 100, 2, 50 + k, 0, 0, &rs[k]), PP_OK);
  }
  run();
  for (uint32_t k = 0; k < 2 * B; k++) {
    cr_assert_eq(done(0, &rs[k]).error, PP_P2P_E_OK, "send %u to rank 2", k);
    cr_assert_eq(done(2, &rr[k]).error, PP_P2P_E_OK);
    cr_assert_eq(memcmp(a[k], b[k], 100), 0);
  }
  cr_assert(pp_engine_done(C.e[0]));
}

/* A burst of synchronous EAGERs (parked behind D plain ones, started by the CREDIT message that
 * hands back D credits): those that go unsignalled still complete only at their ACK (the
 * matching receive started), not when posted. */
Test(p2p, an_unsignalled_issend_still_waits_for_its_ack)
{
  struct pp_engine_cfg cfg = base(2);
  enum { D = 8, N = 24 };
  pp_p2p_params_of(&cfg)->credits = D;
  pp_p2p_params_of(&cfg)->credit_threshold = D;
  up(&cfg, 0);
  static uint8_t src[100], dst[N][100];
  pp_req s[N], r[N];
  burst_post(N, D, src, dst, s, r);
  unsigned unsig, longest;
  run_until_posted(2 * D, &unsig, &longest); /* the first burst */
  cr_assert_eq(unsig, D - 1, "the burst but its last went unsignalled");
  not_done(0, &s[D]); /* posted unsignalled, its ACK not back yet */
  run();
  for (uint32_t i = 0; i < N; i++) {
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
    cr_assert_eq(done(1, &r[i]).error, PP_P2P_E_OK, "receive %u", i);
  }
  cr_assert_eq(pstats(1).sync_acks, N - D);
  cr_assert(pp_engine_done(C.e[0]));
}

/* The NIC refuses the post of the EAGER that was to follow (and cover) an unsignalled one: the
 * refused send fails alone as any refused send does, and since the unsignalled one before it
 * would otherwise wait for ever for a completion, the peer fails too (its QP to ERROR, which
 * flushes that SEND: its buffer comes back); the unsignalled one had completed once posted. */
Test(p2p, a_refused_post_after_an_unsignalled_send_fails_the_peer_and_hangs_nothing)
{
  struct pp_engine_cfg cfg = base(2);
  enum { D = 8, N = 20 };
  pp_p2p_params_of(&cfg)->credits = D;
  pp_p2p_params_of(&cfg)->credit_threshold = D;
  up(&cfg, 0);
  refuse_posts(0, PP_WR_SEND, D + 1, 1); /* the second of the burst */
  static uint8_t src[100], dst[N][100];
  pp_req s[N], r[N];
  burst_post(N, N, src, dst, s, r);
  run();
  cr_assert_eq(REFUSE.refused, 1);
  cr_assert_not(POSTS.wr[0][D].sig, "the first of the burst went unsignalled");
  for (uint32_t i = 0; i <= D; i++)
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
  struct pp_p2p_status st = done(0, &s[D + 1]);
  cr_assert_eq(st.error, PP_P2P_E_FAILED);
  cr_assert_eq(st.wc_status, PP_WC_LOC_QP_OP_ERR);
  for (uint32_t i = D + 2; i < N; i++)
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_FAILED, "send %u: its peer failed", i);
  cr_assert(pp_engine_done(C.e[0]), "nothing outstanding: the unsignalled SEND was flushed");
}

/* ================================================================ reply first */

/* The index in host h's post log of the first post at or after `from` of opcode op (and SEND
 * type `type`, -1: any); -1 when none. */
static int find_post(int h, unsigned from, int op, int type)
{
  for (unsigned i = from; i < POSTS.n[h]; i++)
    if (POSTS.wr[h][i].opcode == op && (type < 0 || POSTS.wr[h][i].type == type))
      return (int)i;
  return -1;
}

/* An RGET ping from rank 0 and rank 1's answer of alen bytes from the pump (REPLY), as in a
 * ping-pong: the buffers, and rank 0's receive for the answer, rank 1's for the ping and the
 * ping itself posted (the run is the caller's). */
struct rget_ping {
  uint32_t len, alen;
  uint8_t *src, *dst, *back;
  pp_req s, r, rb;
  struct pp_p2p_status ping, answer; /* rget_ping_all_ok: the sends' statuses */
};

static void rget_ping_post(struct rget_ping *g, uint32_t len, uint32_t alen)
{
  *g = (struct rget_ping){.len = len, .alen = alen, .src = pattern(len, 1),
                          .dst = calloc(1, len), .back = calloc(1, alen)};
  REPLY = (struct reply){.on = true, .rank = 1, .len = alen, .buf = pattern(alen, 2)};
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), g->back, alen, 1, 9, 0, 0, &g->rb), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), g->dst, len, 0, 5, 0, 0, &g->r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), g->src, len, 1, 5, 0, 0, &g->s), PP_OK);
}

/* Both transfers completed without error (the sends' statuses kept in g). */
static void rget_ping_all_ok(struct rget_ping *g)
{
  g->ping = done(0, &g->s);
  struct pp_p2p_status b = done(1, &g->r);
  g->answer = done(1, &REPLY.req);
  struct pp_p2p_status d = done(0, &g->rb);
  cr_assert(g->ping.error == PP_P2P_E_OK && b.error == PP_P2P_E_OK &&
            g->answer.error == PP_P2P_E_OK && d.error == PP_P2P_E_OK);
}

static void rget_ping_free(struct rget_ping *g)
{
  free(g->src);
  free(g->dst);
  free(g->back);
  free(REPLY.buf);
}

/* An RGET and its answer, as in a ping-pong: rank 1's READ completes and its application answers
 * from the pump after that event. The answer's RTS is the first WQE posted after the READ and
 * carries the FIN (engine/proto/p2p/p2p_impl.h: reply first, carried): no FIN of its own, and
 * both transfers complete. */
Test(p2p, rget_answer_rts_carries_the_fin)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  struct rget_ping g;
  rget_ping_post(&g, 64 << 10, 64 << 10); /* an RGET ping and answer */
  run();
  int read = find_post(1, 0, PP_WR_RDMA_READ, -1);
  cr_assert_geq(read, 0, "rank 1 read the message");
  int rts = find_post(1, (unsigned)read + 1, PP_WR_SEND, T_RTS);
  int ping = find_post(0, 0, PP_WR_SEND, T_RTS);
  cr_assert(rts >= 0 && ping >= 0, "rank 0 posted the ping's RTS, rank 1 the answer's");
  cr_assert_eq(rts, read + 1, "the answer's RTS is the first WQE after the READ");
  cr_assert_eq(POSTS.wr[1][rts].at, REPLY.at);
  cr_assert(POSTS.wr[1][rts].flags & TF_FIN, "it carries the FIN");
  cr_assert_eq(POSTS.wr[1][rts].rreq, POSTS.wr[0][ping].sreq, "of the ping");
  cr_assert_eq(find_post(1, 0, PP_WR_SEND, T_FIN), -1, "and no FIN of its own went");
  rget_ping_all_ok(&g);
  cr_assert_eq(g.ping.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(g.answer.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(memcmp(g.src, g.dst, g.len), 0);
  cr_assert_eq(memcmp(REPLY.buf, g.back, g.alen), 0);
  cr_assert_eq(rnr_total(), 0);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing held back at the end");
  rget_ping_free(&g);
}

/* An EAGER answer carries no FIN (only an RTS does: the eager path tests nothing more): the
 * FIN goes right behind it, in the same pass. */
Test(p2p, rget_eager_answer_is_followed_by_the_fin)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  struct rget_ping g;
  rget_ping_post(&g, 64 << 10, 1024); /* an RGET ping, an EAGER answer */
  run();
  int read = find_post(1, 0, PP_WR_RDMA_READ, -1);
  cr_assert_geq(read, 0);
  int ping = find_post(0, 0, PP_WR_SEND, T_RTS);
  cr_assert_eq(POSTS.wr[1][read + 1].type, 1, "the answer's EAGER is the first WQE after the READ");
  cr_assert_eq(POSTS.wr[1][read + 1].flags & TF_FIN, 0, "carrying no FIN");
  int fin = find_post(1, (unsigned)read + 1, PP_WR_SEND, T_FIN);
  cr_assert_eq(fin, read + 2, "the FIN right behind it");
  cr_assert_eq(POSTS.wr[1][fin].at, POSTS.wr[1][read + 1].at, "in the same pass");
  cr_assert_eq(POSTS.wr[1][fin].sreq, POSTS.wr[0][ping].sreq, "the ping's");
  rget_ping_all_ok(&g);
  cr_assert_eq(memcmp(REPLY.buf, g.back, g.alen), 0);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
  rget_ping_free(&g);
}

/* The answer's RTS refused by the NIC: the FIN it was to carry did not go with it, so it goes
 * alone (it stayed deferred), and the ping completes; the answer fails. */
Test(p2p, rget_fin_of_a_refused_answer_goes_alone)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  REFUSE.host = 1;
  REFUSE.opcode = PP_WR_SEND;
  REFUSE.count = 1; /* rank 1's first SEND: the answer's RTS */
  struct rget_ping g;
  rget_ping_post(&g, 64 << 10, 64 << 10); /* an RGET ping and answer */
  run();
  cr_assert_eq(REFUSE.refused, 1);
  int ping = find_post(0, 0, PP_WR_SEND, T_RTS);
  int fin = find_post(1, 0, PP_WR_SEND, T_FIN);
  cr_assert_geq(fin, 0, "the FIN went alone");
  cr_assert_eq(POSTS.wr[1][fin].sreq, POSTS.wr[0][ping].sreq);
  cr_assert_eq(find_post(1, 0, PP_WR_SEND, T_RTS), -1, "no RTS of rank 1 reached the NIC");
  cr_assert_eq(done(0, &g.s).error, PP_P2P_E_OK, "the ping completed");
  cr_assert_eq(done(1, &g.r).error, PP_P2P_E_OK);
  cr_assert_eq(done(1, &REPLY.req).error, PP_P2P_E_FAILED, "the refused answer failed");
  rget_ping_free(&g);
}

/* No timer to spare when the FIN would be held back (rank 1's timer queue filled with far-off
 * timers of the application's): it goes at once, at the READ's completion and before the
 * answer, which then carries none (p2p_defer_reply's fallback), and both transfers complete. */
Test(p2p, rget_fin_goes_at_once_when_no_timer_is_left)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  const uint64_t far = 1000000000000ull; /* 1,000 s: the run is over long before */
  unsigned pushed = 0;
  while (pp_engine_push_timer(C.e[1], far, PP_TIMER_APP, 0) == PP_OK)
    pushed++;
  cr_assert_gt(pushed, 0);
  struct rget_ping g;
  rget_ping_post(&g, 64 << 10, 64 << 10); /* an RGET ping and answer */
  run_until(far - 1);
  int read = find_post(1, 0, PP_WR_RDMA_READ, -1);
  cr_assert_geq(read, 0);
  int fin = find_post(1, (unsigned)read + 1, PP_WR_SEND, T_FIN);
  int rts = find_post(1, (unsigned)read + 1, PP_WR_SEND, T_RTS);
  cr_assert_eq(fin, read + 1, "the FIN at once, right after the READ");
  cr_assert_eq(rts, fin + 1, "the answer behind it");
  cr_assert_eq(POSTS.wr[1][rts].flags & TF_FIN, 0, "carrying none");
  rget_ping_all_ok(&g);
  cr_assert_eq(memcmp(g.src, g.dst, g.len), 0);
  cr_assert_eq(memcmp(REPLY.buf, g.back, g.alen), 0);
  cr_assert_eq(rnr_total(), 0);
  rget_ping_free(&g);
}

/* No answer: the FIN held back for one still goes, at the time the READ completed (the flush
 * timer at the same `now`), and the sender completes. */
Test(p2p, rget_fin_goes_when_nothing_answers)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t len = 64 << 10;
  uint8_t *src = pattern(len, 1), *dst = calloc(1, len);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, 5, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  int read = find_post(1, 0, PP_WR_RDMA_READ, -1);
  int fin = find_post(1, (unsigned)read + 1, PP_WR_SEND, T_FIN);
  cr_assert(read >= 0 && fin == read + 1, "the FIN follows the READ");
  const struct app_log_ev *ev = app_log_find(1, r);
  cr_assert_not_null(ev);
  cr_assert_eq(POSTS.wr[1][fin].at, ev->now, "posted when the READ's completion was handled");
  struct pp_p2p_status a = done(0, &s), b = done(1, &r);
  cr_assert(a.error == PP_P2P_E_OK && b.error == PP_P2P_E_OK);
  cr_assert_eq(memcmp(src, dst, len), 0);
  cr_assert_eq(rnr_total(), 0);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
  free(src);
  free(dst);
}

/* ================================================================ more refusals */

/* Refuses (PP_LIMIT) the `count` registrations with `access` that host `host` asks for after
 * its first `skip`. */
static void refuse_regs(int host, unsigned access, unsigned skip, unsigned count)
{
  NOREG.host = host;
  NOREG.access = access;
  NOREG.skip = skip;
  NOREG.count = count;
}

/* Rank 1 only receives, so the credits it owes go back in CREDIT messages; the NIC refuses the
 * first one. Those credits are lost and rank 0 would wait for them for ever, so rank 1 fails
 * its peer (flush_credit): the receives still posted fail with PP_P2P_E_FAILED, the refused
 * CREDIT is not counted as sent, and nothing of rank 1's is left outstanding. */
Test(p2p, a_refused_credit_message_fails_the_peer)
{
  struct pp_engine_cfg cfg = base(2);
  enum { D = 4, N = 8 };
  pp_p2p_params_of(&cfg)->credits = D;
  pp_p2p_params_of(&cfg)->credit_threshold = 2;
  up(&cfg, 0);
  refuse_posts(1, PP_WR_SEND, 0, 1); /* rank 1's first SEND: its first CREDIT */
  static uint8_t src[100], dst[N][100];
  pp_req s[N], r[N];
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], 100, 0, i, 0, 0, &r[i]), PP_OK);
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, 100, 1, i, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(REFUSE.refused, 1);
  cr_assert_eq(pstats(1).credit_msgs, 0, "the refused CREDIT was not sent");
  uint32_t ok = 0, failed = 0;
  for (uint32_t i = 0; i < N; i++) {
    struct pp_p2p_status st = done(1, &r[i]);
    if (st.error == PP_P2P_E_OK) {
      cr_assert_eq(failed, 0, "receive %u completed after one that failed", i);
      ok++;
      continue;
    }
    cr_assert_eq(st.error, PP_P2P_E_FAILED, "receive %u: %s", i, pp_p2p_err_name(st.error));
    cr_assert_eq(st.wc_status, PP_WC_LOC_QP_OP_ERR, "receive %u: %s", i,
                 pp_wc_status_name(st.wc_status));
    failed++;
  }
  cr_assert_geq(ok, 2, "the messages consumed before the CREDIT was due were delivered");
  cr_assert_leq(ok, D, "no message beyond the credits rank 0 held");
  cr_assert_eq(pstats(1).failed, failed);
  cr_assert(pp_engine_done(C.e[1]), "nothing of rank 1's outstanding");
}

/* The RGET receiver cannot register its buffer (the NIC's table is full) and holds no
 * registration whose release it could wait for: the READ never goes, the receive fails with
 * PP_P2P_E_NO_MR (rget_abort), the sender is told by its FIN (aborted) and fails the same way,
 * its buffer no longer remotely readable; the next transfer goes through. */
Test(p2p, an_rget_receiver_that_cannot_register_fails_both_sides_with_no_mr)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t len = 64 << 10; /* RGET */
  uint8_t *src = pattern(len, 1), *dst = calloc(1, len);
  refuse_regs(1, PP_ACCESS_LOCAL_WRITE, 0, 1);
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, 5, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(NOREG.refused, 1);
  cr_assert_eq(READS.n[1], 0, "no READ was posted");
  struct pp_p2p_status rs = done(1, &r), ss = done(0, &s);
  cr_assert_eq(rs.error, PP_P2P_E_NO_MR, "%s", pp_p2p_err_name(rs.error));
  cr_assert_eq(rs.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(ss.error, PP_P2P_E_NO_MR, "%s", pp_p2p_err_name(ss.error));
  cr_assert_eq(REG.remote_max[0], 1);
  cr_assert_eq(REG.remote_live[0], 0, "the sender's buffer is no longer remotely readable");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing left behind");
  transfer_ok(len, 6);
  free(src);
  free(dst);
}

/* The RPUT sender cannot register the source of a fragment and holds no registration to wait
 * for: that fragment and every later one go as a FIN without data (frag_reg), so the receiver
 * fails with PP_P2P_E_NO_MR and so does the send; the fragments written before it arrived
 * intact, every window the receiver opened is closed again, and the next transfer goes
 * through. */
Test(p2p, an_rput_sender_that_cannot_register_a_fragment_fails_both_sides_with_no_mr)
{
  rput_up(1);
  uint32_t len = 256 << 10; /* 4 fragments */
  uint8_t *src = pattern(len, 2), *dst = calloc(1, len);
  refuse_regs(0, 0, 1, 2); /* the second fragment's source, and again once the first's
                              * cached registration was evicted to make room */
  pp_req s, r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, 0, 5, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(NOREG.refused, 2);
  cr_assert_eq(pstats(0).rcache.evictions, 1, "the first fragment's registration made room");
  struct pp_p2p_status ss = done(0, &s), rs = done(1, &r);
  cr_assert_eq(ss.error, PP_P2P_E_NO_MR, "%s", pp_p2p_err_name(ss.error));
  cr_assert_eq(ss.proto, PP_P2P_RNDV_PUT);
  cr_assert_eq(rs.error, PP_P2P_E_NO_MR, "%s", pp_p2p_err_name(rs.error));
  cr_assert_eq(pstats(0).fragments, 1, "only the fragment before the refused one was written");
  cr_assert_eq(memcmp(src, dst, 64 << 10), 0, "and it arrived intact");
  cr_assert_eq(REG.remote_live[1], 0, "every fragment window is closed again");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]), "nothing left behind");
  NOREG.count = 0;
  transfer_ok(len, 6);
  free(src);
  free(dst);
}

/* Two RGETs to rank 1; the registration of the second's source is refused while the first's is
 * held: the second does not fail (a release is to come, send_resources) but waits first in its
 * line, and starts at a later event, when its registration succeeds. Both arrive intact. */
Test(p2p, an_rget_source_that_cannot_register_waits_for_a_release_then_goes)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint32_t len = 64 << 10; /* RGET */
  uint8_t *src[2] = {pattern(len, 1), pattern(len, 2)};
  uint8_t *dst[2] = {calloc(1, len), calloc(1, len)};
  refuse_regs(0, PP_ACCESS_REMOTE_READ, 1, 1);
  pp_req s[2], r[2];
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], len, 0, 5, 0, 0, &r[i]), PP_OK);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], len, 1, 5, 0, 0, &s[i]), PP_OK);
  cr_assert_eq(NOREG.refused, 1);
  cr_assert_eq(find_post(0, 0, PP_WR_SEND, T_RTS), 0, "the first RTS went");
  cr_assert_eq(find_post(0, 1, PP_WR_SEND, T_RTS), -1, "the second waits");
  run();
  for (int i = 0; i < 2; i++) {
    struct pp_p2p_status ss = done(0, &s[i]), rs = done(1, &r[i]);
    cr_assert_eq(ss.error, PP_P2P_E_OK, "send %d: %s", i, pp_p2p_err_name(ss.error));
    cr_assert_eq(rs.error, PP_P2P_E_OK, "receive %d: %s", i, pp_p2p_err_name(rs.error));
    cr_assert_eq(rs.proto, PP_P2P_RNDV_GET);
    cr_assert_eq(memcmp(src[i], dst[i], len), 0, "message %d", i);
    free(src[i]), free(dst[i]);
  }
  int second = find_post(0, 1, PP_WR_SEND, T_RTS);
  cr_assert_gt(second, 0, "the second RTS went");
  cr_assert_gt(POSTS.wr[0][second].at, POSTS.wr[0][0].at, "later, at a later event");
  cr_assert_eq(REG.remote_live[0], 0, "both sources closed again");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* ================================================================ completions never posted */

/* Work-request ids as the engine makes them (engine/proto/p2p/p2p_impl.h: WRID, kind in the top
 * four bits, a generation, the index in the low 32). */
enum { W_RECV = 1, W_TX = 2, W_READ = 4 };
static uint64_t wrid(uint64_t kind, uint64_t gen, uint32_t idx)
{
  return kind << 60 | gen << 32 | idx;
}

/* Successful completions of work requests rank 0 never posted (a faulty or hostile NIC): a send
 * buffer, a receive buffer or a request out of range, an unknown kind are rejected
 * (PP_INVALID); a READ of a request slot whose generation is not the completion's is stale and
 * ignored. None of them touches any state: the next transfers go through, and nothing is left
 * behind. */
Test(p2p, completions_never_posted_are_rejected_and_change_nothing)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  transfer_ok(100, 1);
  struct pp_wc wc = {.status = PP_WC_SUCCESS}; /* (successful: its QP is not looked at) */
  const struct {
    uint64_t wr_id;
    int opcode;
    enum pp_status want;
    const char *what;
  } bad[] = {
      {wrid(W_TX, 0, UINT32_MAX), PP_WC_OP_SEND, PP_INVALID, "a send buffer out of range"},
      {wrid(W_RECV, 0, UINT32_MAX), PP_WC_OP_RECV, PP_INVALID, "a receive buffer out of range"},
      {wrid(W_READ, 0, UINT32_MAX), PP_WC_OP_RDMA_READ, PP_INVALID, "a request out of range"},
      {wrid(0, 0, 0), PP_WC_OP_SEND, PP_INVALID, "kind 0"},
      {wrid(7, 0, 0), PP_WC_OP_SEND, PP_INVALID, "an unknown kind"},
      {wrid(W_READ, 12345, 0), PP_WC_OP_RDMA_READ, PP_OK, "a READ of another generation"},
  };
  struct pp_p2p_stats before = pstats(0);
  for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    wc.wr_id = bad[i].wr_id;
    wc.opcode = (enum pp_wc_opcode)bad[i].opcode;
    cr_assert_eq(pp_engine_on_wc(C.e[0], now(), &wc), bad[i].want, "%s", bad[i].what);
  }
  struct pp_p2p_stats after = pstats(0);
  cr_assert_eq(after.failed, before.failed, "no request failed");
  cr_assert_eq(after.received[PP_P2P_EAGER], before.received[PP_P2P_EAGER], "none was received");
  cr_assert(pp_engine_done(C.e[0]), "nothing outstanding");
  transfer_ok(100, 2);
  transfer_ok(64 << 10, 3); /* an RGET: a READ of slot 0's generation completes as it should */
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* The null request is complete and its status empty (MPI_STATUS of MPI_REQUEST_NULL), alone and
 * within testall; irecv refuses a length past the largest message, clearing the handle. */
Test(p2p, the_null_request_has_an_empty_status_and_oversized_receives_are_refused)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t a[8];
  pp_req r = 42;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), a, PP_MAX_MSG_SIZE + 1u, 0, 1, 0, 0, &r), PP_INVALID);
  cr_assert_eq(r, PP_REQ_NULL, "a refused call leaves the null handle");
  struct pp_p2p_status st;
  memset(&st, 0xa5, sizeof(st));
  cr_assert(pp_p2p_test(C.e[1], &r, &st));
  struct pp_p2p_status zero;
  memset(&zero, 0, sizeof(zero));
  cr_assert_eq(memcmp(&st, &zero, sizeof(st)), 0, "the null request's status is empty");
  uint32_t v = 7, w = 0;
  pp_req rs[3] = {PP_REQ_NULL, PP_REQ_NULL, PP_REQ_NULL}, s;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), &w, 4, 0, 3, 0, 0, &rs[1]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), &v, 4, 1, 3, 0, 0, &s), PP_OK);
  run();
  struct pp_p2p_status sts[3];
  memset(sts, 0xa5, sizeof(sts));
  cr_assert(pp_p2p_testall(C.e[1], 3, rs, sts), "the null entries do not hold testall back");
  cr_assert_eq(memcmp(&sts[0], &zero, sizeof(zero)), 0);
  cr_assert_eq(memcmp(&sts[2], &zero, sizeof(zero)), 0);
  cr_assert_eq(sts[1].error, PP_P2P_E_OK);
  cr_assert_eq(sts[1].len, 4);
  cr_assert_eq(w, 7);
  cr_assert_eq(rs[1], PP_REQ_NULL);
  done(0, &s);
}

/* The receive completion of an unexpected message delivered a second time (a NIC that
 * duplicates completions): its buffer is held, not posted, so the copy is rejected
 * (PP_INVALID); the message is received once, intact, and nothing else arrives. */
Test(p2p, a_duplicated_receive_completion_is_rejected_and_the_message_received_once)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  uint8_t *src = pattern(300, 4), dst[300] = {0}, more[300];
  pp_req s, r, r2;
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, 300, 1, 3, 0, 0, &s), PP_OK);
  run();
  cr_assert_eq(pstats(1).unexpected, 1, "held: no receive matched it yet");
  struct pp_wc dup = LAST_RECV_WC[1];
  cr_assert_eq(dup.opcode, PP_WC_OP_RECV);
  cr_assert_eq(pp_engine_on_wc(C.e[1], now(), &dup), PP_INVALID, "its buffer is not posted");
  cr_assert_eq(pstats(1).unexpected, 1, "the copy is no second message");
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, 300, 0, 3, 0, 0, &r), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), more, 300, ANYS, ANYT, 0, 0, &r2), PP_OK);
  run();
  struct pp_p2p_status st = done(1, &r);
  cr_assert_eq(st.error, PP_P2P_E_OK);
  cr_assert_eq(st.len, 300);
  cr_assert_eq(memcmp(src, dst, 300), 0);
  not_done(1, &r2); /* nothing else arrived */
  cr_assert_eq(pp_p2p_cancel(C.e[1], now(), r2), PP_OK);
  run();
  cr_assert_eq(done(1, &r2).error, PP_P2P_E_CANCELLED);
  done(0, &s);
  transfer_ok(300, 5);
  free(src);
}

/* With p2p.srq: receive completions that name no buffer of the shared pool (past its end), or
 * a posted pool buffer but a QP that is no data QP of this engine, are rejected (PP_INVALID)
 * and take nothing: the buffer stays posted and the pool whole, the next messages arrive. */
Test(p2p, srq_completions_naming_no_pool_buffer_or_qp_are_rejected)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->srq = true;
  up(&cfg, 0);
  transfer_ok(100, 1);
  cr_assert_gt(SRQ_POSTS.n[1], 0, "rank 1 posted its pool to its SRQ");
  struct pp_wc wc = {.status = PP_WC_SUCCESS, .opcode = PP_WC_OP_RECV, .byte_len = 64};
  wc.wr_id = wrid(W_RECV, 0, UINT32_MAX - 1);
  wc.qp_num = LAST_RECV_WC[1].qp_num; /* a data QP of rank 1's */
  cr_assert_neq(wc.qp_num, 0);
  cr_assert_eq(pp_engine_on_wc(C.e[1], now(), &wc), PP_INVALID, "past the pool");
  wc.wr_id = SRQ_POSTS.last[1]; /* posted, and still */
  wc.qp_num = 0xdead;
  cr_assert_eq(pp_engine_on_wc(C.e[1], now(), &wc), PP_INVALID, "no QP of ours");
  struct pp_p2p_stats st = pstats(1);
  cr_assert_eq(st.srq_overruns, 0);
  cr_assert(pp_engine_done(C.e[1]));
  for (uint32_t i = 0; i < 3 * st.srq_buffers; i++) /* every pool buffer in use again */
    transfer_ok(100, 10 + i);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* An RGET's RTS waits unexpected at rank 1 while its sender fails there (rank 1's own send to
 * it exceeds its retries); an ANY_SOURCE receive that then matches it (one naming the failed
 * rank fails at once without matching) can never read: it fails with the peer's failure
 * (p2p_rndv_start), no READ is posted. */
Test(p2p, a_rendezvous_matched_after_its_sender_failed_fails_without_a_read)
{
  struct pp_engine_cfg cfg = base(2);
  cfg.qp.timeout = 4;
  cfg.qp.retry_cnt = 1;
  up(&cfg, 0);
  uint32_t len = 64 << 10; /* RGET */
  uint8_t *src = pattern(len, 1), *dst = calloc(1, len), x[4] = {0};
  pp_req s, r, s1;
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), src, len, 1, 5, 0, 0, &s), PP_OK);
  run();
  struct pp_p2p_status st;
  cr_assert(pp_p2p_iprobe(C.e[1], 0, 5, 0, &st), "the RTS waits at rank 1");
  cr_assert_eq(st.proto, PP_P2P_RNDV_GET);
  C.h->drop = drop_everything;
  cr_assert_eq(pp_p2p_isend(C.e[1], now(), x, 4, 0, 6, 0, 0, &s1), PP_OK);
  run();
  cr_assert_eq(done(1, &s1).wc_status, PP_WC_RETRY_EXC_ERR, "rank 1 lost its peer");
  cr_assert(pp_p2p_iprobe(C.e[1], ANYS, 5, 0, NULL), "the RTS still waits");
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst, len, ANYS, 5, 0, 0, &r), PP_OK);
  run();
  cr_assert_not(pp_p2p_iprobe(C.e[1], ANYS, ANYT, 0, NULL), "the receive took it");
  st = done(1, &r);
  cr_assert_eq(st.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(st.error));
  cr_assert_eq(st.wc_status, PP_WC_RETRY_EXC_ERR, "the peer's failure, not a READ's");
  cr_assert_eq(st.proto, PP_P2P_RNDV_GET);
  cr_assert_eq(READS.n[1], 0, "no READ was posted");
  cr_assert(pp_engine_done(C.e[1]));
  free(src);
  free(dst);
}

/* Three RGETs into rank 1; the registration of the second's buffer is refused while the first's
 * is held: the second waits in the registration line, and the third, whose registration would
 * succeed, waits behind it (its turn comes after the second's): the READs go and the receives
 * complete in order, all intact. */
Test(p2p, rget_receivers_register_in_line)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  enum { N = 3 };
  uint32_t len = 64 << 10; /* RGET */
  uint8_t *src[N], *dst[N];
  pp_req s[N], r[N];
  refuse_regs(1, PP_ACCESS_LOCAL_WRITE, 1, 1); /* the second receive's buffer, once */
  for (uint32_t i = 0; i < N; i++) {
    src[i] = pattern(len, i);
    dst[i] = calloc(1, len);
    cr_assert_eq(pp_p2p_irecv(C.e[1], now(), dst[i], len, 0, i, 0, 0, &r[i]), PP_OK);
  }
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(pp_p2p_isend(C.e[0], now(), src[i], len, 1, i, 0, 0, &s[i]), PP_OK);
  run();
  cr_assert_eq(NOREG.refused, 1);
  const struct pp_recv_record *rec;
  cr_assert_eq(pp_p2p_receives(C.e[1], &rec, NULL), N);
  for (uint32_t i = 0; i < N; i++) {
    cr_assert_eq(rec[i].tag, i, "completion %u was receive %u: overtaken", i, rec[i].tag);
    cr_assert_eq(done(1, &r[i]).error, PP_P2P_E_OK, "receive %u", i);
    cr_assert_eq(done(0, &s[i]).error, PP_P2P_E_OK, "send %u", i);
    cr_assert_eq(memcmp(src[i], dst[i], len), 0, "message %u", i);
    free(src[i]), free(dst[i]);
  }
  cr_assert_eq(READS.n[1], N);
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
}

/* ================================================================ hang reports */

/* The wait of rank `rank` whose text holds `what`; fails when there is none. */
static struct pp_wait wait_with(uint32_t rank, const char *what)
{
  struct pp_wait w[16];
  size_t n = pp_engine_pending(C.e[rank], w, 16);
  for (size_t i = 0; i < n && i < 16; i++)
    if (strstr(w[i].what, what))
      return w[i];
  cr_assert_fail("rank %u has no wait saying \"%s\" (%zu waits)", rank, what, n);
  return w[0];
}

/* What the hang report of a rank that is not done says of requests stuck in the ways
 * p2p_pending tells apart: a send that has credits but no send buffer (the one buffer is held
 * by the send before it, whose completion never comes: the link is cut), and a receive of
 * ANY_SOURCE, ANY_TAG. */
Test(p2p, pending_names_a_send_without_a_buffer_and_a_wildcard_receive)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->send_buffers = 1;
  cfg.qp.timeout = 31; /* the cut link's retries outlast the test */
  up(&cfg, 0);
  C.h->drop = drop_everything;
  uint8_t a[100] = {0}, b[100];
  pp_req s[2], r;
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100, 1, 7, 0, 0, &s[0]), PP_OK);
  cr_assert_eq(pp_p2p_isend(C.e[0], now(), a, 100, 1, 8, 0, 0, &s[1]), PP_OK);
  cr_assert_eq(pp_p2p_irecv(C.e[0], now(), b, 100, ANYS, ANYT, 0, 0, &r), PP_OK);
  run_until(now() + 1000000);
  not_done(0, &s[1]);
  struct pp_wait w = wait_with(0, "send tag 8 (100 bytes) to rank 1 waits to start");
  cr_assert_eq(w.kind, PP_WAIT_CREDITS);
  cr_assert_eq(w.peer, 1);
  cr_assert_eq(w.tag, 8);
  cr_assert(strstr(w.what, "credits, send queue"), "%s", w.what);
  w = wait_with(0, "send tag 7 to rank 1 waits for 1 send completions");
  cr_assert_eq(w.kind, PP_WAIT_SEND_WC);
  w = wait_with(0, "receive (ANY_SOURCE, ANY_TAG) never matched");
  cr_assert_eq(w.kind, PP_WAIT_UNMATCHED);
  cr_assert_eq(w.peer, PP_WAIT_NOPEER);
  cr_assert_eq(w.tag, ANYT);
}

/* ================================================================ connection */

/* A peer's connection information must name as many QPs as this engine opens to it (channels,
 * twice that with p2p.srq): one that names fewer or more is refused (PP_INVALID), the engine
 * stays unconnected and cannot start; there is no information for a rank that is no peer
 * (itself). The right one then connects, and messages go through. */
Test(p2p, connection_information_of_another_shape_is_refused)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->channels = 2;
  create_all(&cfg, 0);
  struct pp_conn_info ci;
  cr_assert_not(pp_engine_local_info(C.e[0], 0, &ci), "no information for itself");
  cr_assert(pp_engine_local_info(C.e[1], 0, &ci));
  cr_assert_eq(ci.nchannels, 2);
  struct pp_conn_info bad = ci;
  bad.nchannels = 1;
  cr_assert_eq(pp_engine_connect(C.e[0], 0, 1, &bad), PP_INVALID, "one QP of two");
  bad.nchannels = 4;
  cr_assert_eq(pp_engine_connect(C.e[0], 0, 1, &bad), PP_INVALID, "four QPs of two");
  cr_assert_eq(pp_engine_start(C.e[0], 0), PP_STATE, "not connected");
  connect_and_start();
  for (uint32_t i = 0; i < 4; i++)
    transfer_ok(100, 1 + i);
  cr_assert_eq(pstats(0).sent[PP_P2P_EAGER], 4);
}

/* ================================================================ what workloads and the engine hand in */

/* The workloads' send and receive (pp_proto_ops) take a 64-bit tag: one the p2p tags cannot
 * hold (ANY_TAG, or past 32 bits: it would be cut to another tag) is refused (PP_INVALID), and
 * nothing is posted or matched; a protocol timer the protocol never armed is refused, not taken
 * for its flush timer. */
Test(p2p, tags_past_32_bits_and_timers_never_armed_are_refused)
{
  struct pp_engine_cfg cfg = base(2);
  up(&cfg, 0);
  const struct pp_proto_ops *ops = pp_proto_get(cfg.protocol)->ops;
  uint8_t a[8] = {0};
  const uint64_t bad[] = {PP_ANY_TAG, 1ull << 32 | 5};
  for (unsigned i = 0; i < 2; i++) {
    struct pp_msg m = {.peer = 1, .tag = bad[i], .buf = a, .len = 8};
    cr_assert_eq(ops->send(C.e[0], now(), &m), PP_INVALID, "send, tag %llx",
                 (unsigned long long)bad[i]);
    m.peer = 0;
    cr_assert_eq(ops->recv(C.e[1], now(), &m), PP_INVALID, "receive, tag %llx",
                 (unsigned long long)bad[i]);
  }
  run();
  cr_assert_eq(POSTS.n[0], 0, "nothing was sent");
  cr_assert(pp_engine_done(C.e[0]) && pp_engine_done(C.e[1]));
  pp_req r;
  uint8_t b[8];
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 8, 0, 5, 0, 0, &r), PP_OK);
  struct pp_msg m = {.peer = 1, .tag = 5, .buf = a, .len = 8};
  cr_assert_eq(ops->send(C.e[0], now(), &m), PP_OK, "tag 5 itself goes");
  run();
  cr_assert_eq(done(1, &r).tag, 5);
  cr_assert_eq(pp_engine_push_timer(C.e[0], now(), PP_TIMER_PROTO, 77), PP_OK);
  cr_assert_eq(pp_engine_on_timer(C.e[0], now()), PP_INVALID);
}

/* With p2p.srq: an SRQ_LIMIT_REACHED of another SRQ and a QP_LAST_WQE_REACHED of a QP that is
 * not ours change nothing (no limit event counted, no peer failed, transfers go on); the one of
 * rank 1's data QP to rank 0 fails that peer once (a receive from it fails, flushed), and the
 * same event again is ignored. */
Test(p2p, srq_async_events_of_other_queues_change_nothing)
{
  struct pp_engine_cfg cfg = base(2);
  pp_p2p_params_of(&cfg)->srq = true;
  up(&cfg, 0);
  transfer_ok(100, 1);
  uint32_t dqp = LAST_RECV_WC[1].qp_num; /* rank 1's data QP: its receives come from the SRQ */
  cr_assert_neq(dqp, 0);
  cr_assert_neq(SRQ_POSTS.srq[1], 0);
  struct pp_async_event ev = {.type = PP_EVENT_SRQ_LIMIT_REACHED,
                              .srq_num = SRQ_POSTS.srq[1] + 1};
  cr_assert_eq(pp_engine_on_async(C.e[1], now(), &ev), PP_OK);
  cr_assert_eq(pstats(1).srq_limit_events, 0, "another SRQ's limit");
  ev = (struct pp_async_event){.type = PP_EVENT_QP_LAST_WQE_REACHED, .qp_num = dqp + 1000};
  cr_assert_eq(pp_engine_on_async(C.e[1], now(), &ev), PP_OK);
  transfer_ok(100, 2);
  cr_assert_eq(pstats(1).failed, 0, "no peer failed");
  uint8_t b[100];
  pp_req r;
  cr_assert_eq(pp_p2p_irecv(C.e[1], now(), b, 100, 0, 3, 0, 0, &r), PP_OK);
  ev.qp_num = dqp;
  cr_assert_eq(pp_engine_on_async(C.e[1], now(), &ev), PP_OK);
  run();
  struct pp_p2p_status st = done(1, &r);
  cr_assert_eq(st.error, PP_P2P_E_FAILED, "%s", pp_p2p_err_name(st.error));
  cr_assert_eq(st.wc_status, PP_WC_WR_FLUSH_ERR);
  cr_assert_eq(pp_engine_on_async(C.e[1], now(), &ev), PP_OK, "again: closed already");
  cr_assert_eq(pstats(1).failed, 1);
  cr_assert(pp_engine_done(C.e[1]));
}
