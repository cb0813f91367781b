/*
 * The simulated RC HCA held to the RC rules of backends/simgrid/README.md, driven by the deterministic
 * harness (1 us latency, 12.5 B/ns, FIFO per host pair, no SimGrid). Host A (0) is the requester
 * and host B (1) the responder unless a test says otherwise. Every test asserts exact values:
 * statuses, opcodes, lengths, wr_ids, counters, QP states, bytes, and simulated times.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simnic_harness.h"

#define A 0u
#define B 1u
#define FOREVER UINT64_MAX
#define BUF_BYTES (1u << 20)
#define TAP_MAX 16384
#define LOG_MAX 4096
#define NO_OP (-1) /* expect_wc: do not check the opcode (ibverbs leaves it undefined on error) */
#define RW_ACCESS (PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ)
#define LATENCY 1000u /* the harness' fixed latency, ns */

/* ------------------------------------------------------------------ packet tap */

/* Every packet handed to the wire, with the time it left; some may be dropped on purpose. */
struct pkt_rec {
  uint64_t at;
  struct simnic_pkt_info i;
  bool dropped;
};

struct tap {
  struct harness *h;
  const char *drop_kind; /* NULL: drop nothing */
  uint32_t drop_left;    /* matching packets still to drop; UINT32_MAX: all of them */
  uint32_t n;
  struct pkt_rec rec[TAP_MAX];
};

static bool tap_fn(void *ctx, const struct simnic_pkt_info *i)
{
  struct tap *t = ctx;
  bool drop = t->drop_kind && t->drop_left > 0 && strcmp(i->kind, t->drop_kind) == 0;
  if (drop && t->drop_left != UINT32_MAX)
    t->drop_left--;
  cr_assert_lt(t->n, TAP_MAX, "packet tap full");
  t->rec[t->n++] = (struct pkt_rec){.at = t->h->now, .i = *i, .dropped = drop};
  return drop;
}

static void tap_drop(struct tap *t, const char *kind, uint32_t count)
{
  t->drop_kind = kind;
  t->drop_left = count;
}

static bool rec_is(const struct pkt_rec *r, const char *kind, uint32_t src)
{
  return strcmp(r->i.kind, kind) == 0 && r->i.src_host == src;
}

/* Packets of a kind sent by src (dropped ones included: they were transmitted). */
static uint32_t tap_count(const struct tap *t, const char *kind, uint32_t src)
{
  uint32_t k = 0;
  for (uint32_t i = 0; i < t->n; i++)
    k += rec_is(&t->rec[i], kind, src);
  return k;
}

/* Requests of one opcode sent by src. */
static uint32_t tap_count_req(const struct tap *t, uint32_t src, enum pp_wr_opcode op)
{
  uint32_t k = 0;
  for (uint32_t i = 0; i < t->n; i++)
    k += rec_is(&t->rec[i], "REQ", src) && t->rec[i].i.opcode == op;
  return k;
}

/* The k-th (from 0) packet of a kind sent by src. */
static const struct pkt_rec *tap_nth(const struct tap *t, const char *kind, uint32_t src,
                                     uint32_t k)
{
  for (uint32_t i = 0, seen = 0; i < t->n; i++)
    if (rec_is(&t->rec[i], kind, src) && seen++ == k)
      return &t->rec[i];
  cr_assert_fail("no %s packet #%u from host %u", kind, k, src);
  return NULL;
}

/* ------------------------------------------------------------------ completions */

struct wc_rec {
  uint64_t at;
  uint32_t host;
  struct pp_wc wc;
};

struct wc_log {
  uint32_t n;
  struct wc_rec e[LOG_MAX];
};

static void log_poll(struct harness *h, struct wc_log *l)
{
  struct pp_wc wc;
  for (uint32_t host = 0; host < h->nhosts; host++)
    while (h_poll(h, host, &wc, 1) == 1) {
      cr_assert_lt(l->n, LOG_MAX, "completion log full");
      l->e[l->n++] = (struct wc_rec){.at = h->now, .host = host, .wc = wc};
    }
}

/* Runs up to `until` one instant at a time, stamping each completion with when it appeared. */
static void run_logged(struct harness *h, struct wc_log *l, uint64_t until)
{
  log_poll(h, l);
  for (uint64_t t; (t = h_next_time(h)) != FOREVER && t <= until;) {
    h_run(h, t);
    log_poll(h, l);
  }
}

static const struct wc_rec *log_nth(const struct wc_log *l, uint32_t host, uint32_t k)
{
  for (uint32_t i = 0, seen = 0; i < l->n; i++)
    if (l->e[i].host == host && seen++ == k)
      return &l->e[i];
  cr_assert_fail("no completion #%u on host %u", k, host);
  return NULL;
}

static uint32_t log_count(const struct wc_log *l, uint32_t host)
{
  uint32_t k = 0;
  for (uint32_t i = 0; i < l->n; i++)
    k += l->e[i].host == host;
  return k;
}

static void expect_wc(const struct pp_wc *wc, uint64_t id, enum pp_wc_status st, int op,
                      uint32_t qpn)
{
  cr_assert_eq(wc->wr_id, id, "wr_id %" PRIu64 ", expected %" PRIu64, wc->wr_id, id);
  cr_assert_eq(wc->status, st, "wr_id %" PRIu64 ": %s, expected %s", id,
               pp_wc_status_name(wc->status), pp_wc_status_name(st));
  if (op != NO_OP)
    cr_assert_eq((int)wc->opcode, op, "wr_id %" PRIu64 ": opcode %s, expected %s", id,
                 pp_wc_opcode_name(wc->opcode), pp_wc_opcode_name((enum pp_wc_opcode)op));
  cr_assert_eq(wc->qp_num, qpn, "wr_id %" PRIu64 ": qp_num %u, expected %u", id, wc->qp_num, qpn);
}

/* ------------------------------------------------------------------ setup */

static struct pp_nic_counters ctr(struct harness *h, uint32_t host)
{
  struct pp_nic_counters c;
  simnic_counters(h_nic(h, host), &c);
  return c;
}

static enum pp_qp_state qp_state(struct harness *h, uint32_t host, uint32_t qpn)
{
  return simnic_qp_state(h_nic(h, host), qpn);
}

/* Advances one instant at a time until `host` has received n RNR NAKs. */
static void run_until_rnr_naks(struct harness *h, uint32_t host, uint64_t n)
{
  while (ctr(h, host).rnr_naks_received < n) {
    uint64_t t = h_next_time(h);
    cr_assert_neq(t, FOREVER, "simulation idle after %" PRIu64 " RNR NAKs",
                  ctr(h, host).rnr_naks_received);
    h_run(h, t);
  }
}

/* Two hosts, a 1 MiB buffer registered on each (all access flags), a packet tap on the wire. */
struct pair {
  struct harness *h;
  struct tap *tap;
  uint32_t qa, qb;
  uint8_t *buf[2];
  struct pp_mr mr[2];
};

static struct pair *pair_alloc(const struct pp_nic_profile *prof, double loss, uint64_t seed)
{
  struct pair *p = calloc(1, sizeof(*p));
  cr_assert_not_null(p);
  p->h = h_create(2, prof, loss, seed);
  p->tap = calloc(1, sizeof(*p->tap));
  cr_assert_not_null(p->tap);
  p->tap->h = p->h;
  p->h->drop = tap_fn;
  p->h->drop_ctx = p->tap;
  for (uint32_t host = 0; host < 2; host++) {
    p->buf[host] = calloc(1, BUF_BYTES);
    cr_assert_not_null(p->buf[host]);
    p->mr[host] = h_reg(p->h, host, p->buf[host], BUF_BYTES, RW_ACCESS);
  }
  return p;
}

static void pair_connect(struct pair *p, const struct h_qp_opts *o)
{
  h_connect(p->h, A, B, o, &p->qa, &p->qb);
}

static struct pair *pair_new(const struct h_qp_opts *o)
{
  struct pair *p = pair_alloc(NULL, 0, 1);
  pair_connect(p, o);
  return p;
}

static struct pair *pair_default(void)
{
  struct h_qp_opts o = h_qp_defaults();
  return pair_new(&o);
}

static void pair_free(struct pair *p)
{
  h_destroy(p->h);
  free(p->tap);
  free(p->buf[0]);
  free(p->buf[1]);
  free(p);
}

static uint32_t peer_of(uint32_t host)
{
  return host == A ? B : A;
}

/* One-SGE work request on QP qpn of `host`: local bytes at offset loff of the host's buffer,
 * remote bytes at offset roff of the peer's buffer; imm_data = wr_id. */
static int post_on(struct pair *p, uint32_t host, uint32_t qpn, enum pp_wr_opcode op, uint64_t id,
                   uint32_t loff, uint32_t len, uint32_t roff, bool signaled)
{
  uint32_t peer = peer_of(host);
  return h_post_send(p->h, host, qpn, op, id, &p->mr[host], p->buf[host] + loff, len,
                     (uint64_t)(uintptr_t)(p->buf[peer] + roff), p->mr[peer].rkey, signaled);
}

static void post_ok(struct pair *p, uint32_t host, enum pp_wr_opcode op, uint64_t id,
                    uint32_t loff, uint32_t len, uint32_t roff, bool signaled)
{
  int rc = post_on(p, host, host == A ? p->qa : p->qb, op, id, loff, len, roff, signaled);
  cr_assert_eq(rc, PP_OK, "post_send wr_id %" PRIu64 ": %d", id, rc);
}

static void recv_ok(struct pair *p, uint32_t host, uint64_t id, uint32_t off, uint32_t len)
{
  int rc = h_post_recv(p->h, host, host == A ? p->qa : p->qb, id, &p->mr[host],
                       p->buf[host] + off, len);
  cr_assert_eq(rc, PP_OK, "post_recv wr_id %" PRIu64 ": %d", id, rc);
}

static uint8_t pattern_byte(uint32_t seed, uint32_t j)
{
  return (uint8_t)(seed * 131u + j * 7u + (j >> 8) + 1u);
}

static void fill(uint8_t *b, uint32_t len, uint32_t seed)
{
  for (uint32_t j = 0; j < len; j++)
    b[j] = pattern_byte(seed, j);
}

static void expect_bytes(const uint8_t *b, uint32_t len, uint32_t seed)
{
  for (uint32_t j = 0; j < len; j++)
    cr_assert_eq(b[j], pattern_byte(seed, j), "byte %u of pattern %u: 0x%02x, expected 0x%02x", j,
                 seed, b[j], pattern_byte(seed, j));
}

static void expect_all(const uint8_t *b, uint32_t len, uint8_t v)
{
  for (uint32_t j = 0; j < len; j++)
    cr_assert_eq(b[j], v, "byte %u: 0x%02x, expected 0x%02x", j, b[j], v);
}

/* ------------------------------------------------------------------ QP bring-up by hand */

static int modify(struct harness *h, uint32_t host, uint32_t qpn, struct pp_qp_attr a,
                  unsigned mask)
{
  return simnic_ops.modify_qp(h_nic(h, host), qpn, &a, mask);
}

static int to_state(struct harness *h, uint32_t host, uint32_t qpn, enum pp_qp_state s)
{
  return modify(h, host, qpn, (struct pp_qp_attr){.qp_state = s}, PP_QP_STATE);
}

static int to_init(struct harness *h, uint32_t host, uint32_t qpn)
{
  return modify(h, host, qpn,
                (struct pp_qp_attr){.qp_state = PP_QPS_INIT,
                                    .qp_access_flags =
                                        PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ},
                PP_QP_STATE | PP_QP_ACCESS_FLAGS);
}

#define RTR_MASK                                                                                   \
  (PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN | PP_QP_MAX_DEST_RD_ATOMIC |       \
   PP_QP_MIN_RNR_TIMER)
#define RTS_MASK                                                                                   \
  (PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT | PP_QP_RNR_RETRY |                \
   PP_QP_MAX_QP_RD_ATOMIC)

static int to_rtr(struct harness *h, uint32_t host, uint32_t qpn, uint32_t dest, uint32_t rq_psn,
                  unsigned mask)
{
  return modify(h, host, qpn,
                (struct pp_qp_attr){.qp_state = PP_QPS_RTR,
                                    .path_mtu = PP_MTU_4096,
                                    .dest_qp_num = dest,
                                    .rq_psn = rq_psn,
                                    .max_dest_rd_atomic = 4,
                                    .min_rnr_timer = 1},
                mask);
}

static int to_rts(struct harness *h, uint32_t host, uint32_t qpn, uint32_t sq_psn, unsigned mask)
{
  return modify(h, host, qpn,
                (struct pp_qp_attr){.qp_state = PP_QPS_RTS,
                                    .sq_psn = sq_psn,
                                    .timeout = 14,
                                    .retry_cnt = 7,
                                    .rnr_retry = 7,
                                    .max_rd_atomic = 4},
                mask);
}

static uint32_t new_qp(struct harness *h, uint32_t host)
{
  struct pp_qp_init_attr ia = {.max_send_wr = 16,
                               .max_recv_wr = 16,
                               .max_send_sge = 2,
                               .max_recv_sge = 2,
                               .peer = peer_of(host)};
  uint32_t qpn;
  cr_assert_eq(simnic_ops.create_qp(h_nic(h, host), &ia, &qpn), PP_OK);
  cr_assert_eq(qp_state(h, host, qpn), PP_QPS_RESET);
  return qpn;
}

/* ================================================================== 1. RNR NAK and its timer */

Test(simnic, rnr_timer_uses_ib_table)
{
  cr_assert_eq(pp_rnr_timer_ns(0), 655360000u); /* 655.36 ms */
  cr_assert_eq(pp_rnr_timer_ns(1), 10000u);     /* 10 us */
  cr_assert_eq(pp_rnr_timer_ns(12), 640000u);   /* NCCL's 0.64 ms */
  cr_assert_eq(pp_rnr_timer_ns(14), 1280000u);  /* 1.28 ms */
  cr_assert_eq(pp_rnr_timer_ns(25), 61440000u); /* the IB value, not rxe's 61.41 ms typo */
  cr_assert_eq(pp_rnr_timer_ns(31), 491520000u); /* 491.52 ms */
  cr_assert_eq(pp_ack_timeout_ns(0), 0u);        /* infinite */
  cr_assert_eq(pp_ack_timeout_ns(1), 8192u);
  cr_assert_eq(pp_ack_timeout_ns(14), 67108864u);
}

/* SEND without a receive WQE: RNR NAK with the RESPONDER's min_rnr_timer; the requester waits
 * exactly that long after the NAK reaches it (the requester's own code is set to something
 * else), retransmits, and completes once a receive is posted. */
static void check_rnr_wait_prof(const struct pp_nic_profile *prof, uint8_t responder_code,
                                uint8_t requester_code, uint64_t wait)
{
  struct h_qp_opts o = h_qp_defaults();
  o.min_rnr_timer = responder_code;
  struct pair *p = pair_alloc(prof, 0, 1);
  pair_connect(p, &o);
  cr_assert_eq(modify(p->h, A, p->qa, (struct pp_qp_attr){.min_rnr_timer = requester_code},
                      PP_QP_MIN_RNR_TIMER),
               PP_OK);
  fill(p->buf[A], 64, 1);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  run_until_rnr_naks(p->h, A, 2);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0, "no completion while RNR-NAKed");
  recv_ok(p, B, 100, 4096, 256);
  h_run(p->h, FOREVER);

  cr_assert_eq(tap_count(p->tap, "REQ", A), 3);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 2);
  for (uint32_t k = 0; k < 2; k++) {
    uint64_t nak = tap_nth(p->tap, "RNR_NAK", B, k)->at;
    uint64_t retx = tap_nth(p->tap, "REQ", A, k + 1)->at;
    /* the NAK needs LATENCY (+ a few ns of serialisation) to reach the requester */
    cr_assert_geq(retx - nak, LATENCY + wait, "retransmitted %" PRIu64 " ns after the NAK",
                  retx - nak);
    cr_assert_leq(retx - nak, LATENCY + wait + 100, "retransmitted %" PRIu64 " ns after the NAK",
                  retx - nak);
    cr_assert_eq(tap_nth(p->tap, "REQ", A, k + 1)->i.psn, tap_nth(p->tap, "REQ", A, 0)->i.psn,
                 "retransmits from the NAKed PSN");
  }
  struct pp_nic_counters ca = ctr(p->h, A), cb = ctr(p->h, B);
  cr_assert_eq(cb.rnr_naks_sent, 2);
  cr_assert_eq(ca.rnr_naks_received, 2);
  cr_assert_eq(ca.rnr_retries, 2);
  cr_assert_eq(ca.rnr_naks_sent, 0);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(wc[0].byte_len, 64);
  cr_assert_eq(wc[0].wc_flags, 0);
  expect_bytes(p->buf[B] + 4096, 64, 1);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  pair_free(p);
}

static void check_rnr_wait(uint8_t responder_code, uint8_t requester_code)
{
  check_rnr_wait_prof(NULL, responder_code, requester_code, pp_rnr_timer_ns(responder_code));
}

Test(simnic, rnr_nak_waits_responder_timer_10us)
{
  check_rnr_wait(1, 14);
}

Test(simnic, rnr_nak_waits_responder_timer_1280us)
{
  check_rnr_wait(14, 1);
}

/* ------------------------------------------------ the device's RNR delay (NIC profile keys) */

/* A profile with the given RNR model over the harness' default one. */
static struct pp_nic_profile rnr_profile(uint64_t tick, uint64_t min)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.rnr_tick_ns = tick;
  prof.rnr_min_ns = min;
  return prof;
}

Test(simnic, rnr_delay_all_zero_is_the_ib_table)
{
  struct pp_nic_profile prof = rnr_profile(0, 0);
  for (unsigned c = 0; c < 32; c++)
    cr_assert_eq(simnic_rnr_delay_ns(&prof, c), pp_rnr_timer_ns(c), "code %u", c);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 33), pp_rnr_timer_ns(1), "the AETH's 5 bits");
}

Test(simnic, rnr_delay_rounds_up_to_the_tick)
{
  /* a 4 ms jiffy (HZ=250): 10 us, 640 us and 1.28 ms all become one jiffy; 5.12 ms two;
   * 655.36 ms is 163.84 jiffies: 164 */
  struct pp_nic_profile prof = rnr_profile(4000000, 0);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 1), 4000000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 12), 4000000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 14), 4000000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 18), 8000000u); /* 5.12 ms */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 0), 164u * 4000000u);
  prof.rnr_tick_ns = 640000; /* a multiple stays as it is */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 12), 640000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 14), 1280000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 13), 1280000u, "960 us: up to 2 ticks");
}

Test(simnic, rnr_delay_floor_then_table_then_tick)
{
  struct pp_nic_profile prof = rnr_profile(0, 8600000); /* at least 8.6 ms */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 1), 8600000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 0), 655360000u, "longer than the floor: kept");
  prof.rnr_delay_ns[14] = 18600000; /* measured: code 14 waits 18.6 ms */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 14), 18600000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 12), 8600000u, "codes not in the table: the spec's");
  prof.rnr_delay_ns[12] = 1000; /* below the floor: the floor wins */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 12), 8600000u);
  prof.rnr_tick_ns = 4000000; /* then whole ticks */
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 12), 12000000u);
  cr_assert_eq(simnic_rnr_delay_ns(&prof, 14), 20000000u);
}

Test(simnic, rnr_delay_profile_bounds_are_checked)
{
  char err[256];
  struct pp_nic_profile prof = rnr_profile(PP_RNR_DELAY_MAX_NS, PP_RNR_DELAY_MAX_NS);
  prof.rnr_delay_ns[31] = PP_RNR_DELAY_MAX_NS;
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof err), PP_OK, "%s", err);
  cr_assert_leq(simnic_rnr_delay_ns(&prof, 31), 2 * PP_RNR_DELAY_MAX_NS, "no overflow");
  prof.rnr_delay_ns[31] = PP_RNR_DELAY_MAX_NS + 1;
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "rnr_delay"), "%s", err);
  prof = rnr_profile(PP_RNR_DELAY_MAX_NS + 1, 0);
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "rnr_tick"), "%s", err);
}

/* The requester of a ticking device waits the rounded delay on the wire: code 1 (10 us) on a
 * 4 ms tick, and a table entry under a floor. */
Test(simnic, rnr_nak_waits_the_profiles_tick)
{
  struct pp_nic_profile prof = rnr_profile(4000000, 0);
  check_rnr_wait_prof(&prof, 1, 14, 4000000);
}

Test(simnic, rnr_nak_waits_the_profiles_table)
{
  struct pp_nic_profile prof = rnr_profile(0, 0);
  prof.rnr_delay_ns[12] = 12345678;
  check_rnr_wait_prof(&prof, 12, 1, 12345678);
}

/* rnr_retry 3, min_rnr_timer 12, the receive posted 3 ms late: with the spec's 640 us the four
 * transmissions are spent by ~1.9 ms (RNR_RETRY_EXC_ERR); with rxe's rounding to a 4 ms tick
 * the first retransmission comes after the receive (completes, one RNR NAK). */
static enum pp_wc_status late_receive_outcome(const struct pp_nic_profile *prof, uint64_t *naks)
{
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = 3;
  o.min_rnr_timer = 12;
  struct pair *p = pair_alloc(prof, 0, 1);
  pair_connect(p, &o);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  h_run(p->h, p->h->now + 3000000);
  recv_ok(p, B, 100, 4096, 256);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_geq(h_poll(p->h, A, wc, 4), 1);
  *naks = ctr(p->h, A).rnr_naks_received;
  pair_free(p);
  return wc[0].status;
}

Test(simnic, rnr_rounding_decides_a_late_receives_outcome)
{
  uint64_t naks;
  cr_assert_eq(late_receive_outcome(NULL, &naks), PP_WC_RNR_RETRY_EXC_ERR, "the spec's delays");
  cr_assert_eq(naks, 4);
  struct pp_nic_profile prof = rnr_profile(4000000, 0);
  cr_assert_eq(late_receive_outcome(&prof, &naks), PP_WC_SUCCESS, "a 4 ms tick");
  cr_assert_eq(naks, 1);
}

/* ================================================================== 2. which opcodes RNR */

Test(simnic, rnr_with_imm_opcodes)
{
  static const enum pp_wr_opcode ops[] = {PP_WR_SEND_WITH_IMM, PP_WR_RDMA_WRITE_WITH_IMM};
  static const enum pp_wc_opcode wc_ops[] = {PP_WC_OP_SEND, PP_WC_OP_RDMA_WRITE};
  for (int i = 0; i < 2; i++) {
    struct h_qp_opts o = h_qp_defaults();
    o.rnr_retry = 0; /* the first RNR NAK is fatal: makes it visible */
    struct pair *p = pair_new(&o);
    post_ok(p, A, ops[i], 7, 0, 32, 0, true);
    h_run(p->h, FOREVER);
    struct pp_wc wc[4];
    cr_assert_eq(h_poll(p->h, A, wc, 4), 1, "%s", pp_wr_opcode_name(ops[i]));
    expect_wc(&wc[0], 7, PP_WC_RNR_RETRY_EXC_ERR, (int)wc_ops[i], p->qa);
    cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 1, "%s", pp_wr_opcode_name(ops[i]));
    cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 1);
    cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
    expect_all(p->buf[B], 32, 0); /* WRITE_WITH_IMM refused before its data landed */
    pair_free(p);
  }
}

Test(simnic, write_and_read_never_rnr_nor_consume_recv)
{
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = 0; /* any RNR NAK would fail the WR */
  struct pair *p = pair_new(&o);
  struct pp_wc wc[8];
  fill(p->buf[A], 128, 3);
  fill(p->buf[B] + 1024, 128, 4);
  /* empty receive queue */
  post_ok(p, A, PP_WR_RDMA_WRITE, 1, 0, 128, 0, true);
  post_ok(p, A, PP_WR_RDMA_READ, 2, 4096, 128, 1024, true);
  /* one receive WQE posted: WRITE and READ leave it alone */
  recv_ok(p, B, 100, 8192, 256);
  post_ok(p, A, PP_WR_RDMA_WRITE, 3, 0, 128, 2048, true);
  post_ok(p, A, PP_WR_RDMA_READ, 4, 6144, 128, 1024, true);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 8), 4);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  expect_wc(&wc[1], 2, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  expect_wc(&wc[2], 3, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  expect_wc(&wc[3], 4, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 8), 0, "WRITE/READ produce no responder completion");
  cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 0);
  expect_bytes(p->buf[B], 128, 3);
  expect_bytes(p->buf[B] + 2048, 128, 3);
  expect_bytes(p->buf[A] + 4096, 128, 4);
  expect_bytes(p->buf[A] + 6144, 128, 4);
  /* the receive WQE is still there for a SEND */
  fill(p->buf[A] + 512, 32, 5);
  post_ok(p, A, PP_WR_SEND, 5, 512, 32, 0, true);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, B, wc, 8), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(wc[0].byte_len, 32);
  expect_bytes(p->buf[B] + 8192, 32, 5);
  cr_assert_eq(h_poll(p->h, A, wc, 8), 1);
  expect_wc(&wc[0], 5, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 0);
  pair_free(p);
}

/* ================================================================== 3. rnr_retry */

Test(simnic, rnr_retry_7_is_infinite)
{
  struct pair *p = pair_default(); /* rnr_retry 7, min_rnr_timer 1 */
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  run_until_rnr_naks(p->h, A, 50);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  recv_ok(p, B, 100, 0, 64);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(ctr(p->h, A).rnr_naks_received, 50);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 50);
  cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 50);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 51);
  pair_free(p);
}

Test(simnic, rnr_retry_exhausted_flushes_qp)
{
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = 3;
  struct pair *p = pair_new(&o);
  recv_ok(p, A, 200, 0, 64); /* the failing QP's own receive queue */
  recv_ok(p, A, 201, 64, 64);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 0, 64, 0, false);
  post_ok(p, A, PP_WR_RDMA_WRITE, 3, 0, 64, 4096, false);
  post_ok(p, A, PP_WR_SEND, 4, 0, 64, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[8];
  cr_assert_eq(h_poll(p->h, A, wc, 8), 6);
  expect_wc(&wc[0], 1, PP_WC_RNR_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  expect_wc(&wc[1], 2, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa); /* unsignalled, flushed anyway */
  expect_wc(&wc[2], 3, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_wc(&wc[3], 4, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_wc(&wc[4], 200, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_wc(&wc[5], 201, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS, "RNR is no error for the responder");
  cr_assert_eq(h_poll(p->h, B, wc, 8), 0);
  expect_all(p->buf[B] + 4096, 64, 0); /* the WRITE queued behind never executed */
  /* exactly 3 retries: 4 transmissions of WR 1's PSN, 4 RNR NAKs */
  uint32_t psn1 = tap_nth(p->tap, "REQ", A, 0)->i.psn, tx1 = 0;
  for (uint32_t i = 0; i < p->tap->n; i++)
    tx1 += rec_is(&p->tap->rec[i], "REQ", A) && p->tap->rec[i].i.psn == psn1;
  cr_assert_eq(tx1, 4);
  cr_assert_eq(ctr(p->h, A).rnr_naks_received, 4);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 3);
  cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 4);
  pair_free(p);
}

Test(simnic, rnr_retry_0_fails_on_first_nak)
{
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = 0;
  struct pair *p = pair_new(&o);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_RNR_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 1);
  cr_assert_eq(ctr(p->h, A).rnr_naks_received, 1);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 0);
  pair_free(p);
}

/* rxe semantics: the budget is per WQE, refilled when a WQE completes. */
Test(simnic, rnr_budget_resets_after_progress)
{
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = 2;
  struct pair *p = pair_new(&o);
  struct pp_wc wc[4];
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  run_until_rnr_naks(p->h, A, 2); /* the whole budget */
  recv_ok(p, B, 101, 0, 64);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  post_ok(p, A, PP_WR_SEND, 2, 0, 64, 0, true);
  run_until_rnr_naks(p->h, A, 4); /* two more: fatal if the budget had not been refilled */
  recv_ok(p, B, 102, 64, 64);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 2, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  cr_assert_eq(ctr(p->h, A).rnr_naks_received, 4);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 4);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 2);
  expect_wc(&wc[0], 101, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  expect_wc(&wc[1], 102, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  pair_free(p);
}

/* ================================================================== 4. posting and QP state */

Test(simnic, post_to_err_qp_flushes_at_once)
{
  struct pair *p = pair_default();
  cr_assert_eq(to_state(p->h, A, p->qa, PP_QPS_ERR), PP_OK);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0, "nothing outstanding to flush");
  uint64_t t0 = p->h->now;
  post_ok(p, A, PP_WR_SEND, 5, 0, 16, 0, false); /* unsignalled: flushed WRs always complete */
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1, "completed without running the simulation");
  expect_wc(&wc[0], 5, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  recv_ok(p, A, 6, 0, 16);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 6, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(p->h->now, t0);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 0);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
  pair_free(p);
}

Test(simnic, post_refused_before_rts)
{
  struct pair *p = pair_alloc(NULL, 0, 1);
  uint32_t q = new_qp(p->h, A);
  /* RESET: neither send nor receive */
  cr_assert_eq(post_on(p, A, q, PP_WR_SEND, 1, 0, 8, 0, true), PP_STATE);
  cr_assert_eq(h_post_recv(p->h, A, q, 2, &p->mr[A], p->buf[A], 8), PP_STATE);
  /* INIT: receives accepted, sends refused */
  cr_assert_eq(to_init(p->h, A, q), PP_OK);
  cr_assert_eq(post_on(p, A, q, PP_WR_SEND, 3, 0, 8, 0, true), PP_STATE);
  cr_assert_eq(h_post_recv(p->h, A, q, 4, &p->mr[A], p->buf[A], 8), PP_OK);
  /* RTR: sends still refused */
  cr_assert_eq(to_rtr(p->h, A, q, 0x100, 0, RTR_MASK), PP_OK);
  cr_assert_eq(post_on(p, A, q, PP_WR_RDMA_WRITE, 5, 0, 8, 0, true), PP_STATE);
  cr_assert_eq(h_post_recv(p->h, A, q, 6, &p->mr[A], p->buf[A], 8), PP_OK);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0);
  cr_assert_eq(p->tap->n, 0);
  /* the receives posted in INIT and RTR are real WQEs: ERR flushes them */
  cr_assert_eq(to_state(p->h, A, q, PP_QPS_ERR), PP_OK);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 2);
  expect_wc(&wc[0], 4, PP_WC_WR_FLUSH_ERR, NO_OP, q);
  expect_wc(&wc[1], 6, PP_WC_WR_FLUSH_ERR, NO_OP, q);
  pair_free(p);
}

/* ================================================================== 5. loss, timeout, retry_cnt */

Test(simnic, ack_timeout_sets_retransmission_time)
{
  static const uint8_t timeouts[] = {8, 12};
  for (int i = 0; i < 2; i++) {
    struct h_qp_opts o = h_qp_defaults();
    o.timeout = timeouts[i];
    struct pair *p = pair_new(&o);
    tap_drop(p->tap, "REQ", 1);
    recv_ok(p, B, 100, 0, 64);
    post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
    h_run(p->h, FOREVER);
    cr_assert_eq(tap_count(p->tap, "REQ", A), 2);
    uint64_t gap = tap_nth(p->tap, "REQ", A, 1)->at - tap_nth(p->tap, "REQ", A, 0)->at;
    cr_assert_eq(gap, 4096ull << timeouts[i], "timeout %u: retransmitted after %" PRIu64 " ns",
                 timeouts[i], gap);
    cr_assert_eq(gap, pp_ack_timeout_ns(timeouts[i]));
    cr_assert_eq(ctr(p->h, A).timeout_retries, 1);
    struct pp_wc wc[4];
    cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
    expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
    cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
    expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
    pair_free(p);
  }
}

Test(simnic, retry_cnt_exhausted_retry_exc_err)
{
  struct h_qp_opts o = h_qp_defaults();
  o.retry_cnt = 2;
  o.timeout = 8;
  struct pair *p = pair_new(&o);
  tap_drop(p->tap, "REQ", UINT32_MAX);
  recv_ok(p, A, 300, 0, 64);
  recv_ok(p, B, 100, 0, 64);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  post_ok(p, A, PP_WR_RDMA_WRITE, 2, 0, 64, 4096, false);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  uint64_t t0 = tap_nth(p->tap, "REQ", A, 0)->at, to = pp_ack_timeout_ns(8);
  /* retry_cnt + 1 transmissions of each WR, one ACK timeout apart */
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_SEND), 3);
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_WRITE), 3);
  for (uint32_t k = 0; k < 3; k++)
    cr_assert_eq(tap_nth(p->tap, "REQ", A, 2 * k)->at, t0 + k * to);
  cr_assert_eq(log_count(l, A), 3);
  cr_assert_eq(log_count(l, B), 0);
  expect_wc(&log_nth(l, A, 0)->wc, 1, PP_WC_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(log_nth(l, A, 0)->at, t0 + 3 * to);
  expect_wc(&log_nth(l, A, 1)->wc, 2, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_wc(&log_nth(l, A, 2)->wc, 300, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 2);
  free(l);
  pair_free(p);
}

Test(simnic, timeout_0_never_retransmits)
{
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 0;
  struct pair *p = pair_new(&o);
  tap_drop(p->tap, "REQ", 1);
  recv_ok(p, B, 100, 0, 64);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  h_run(p->h, 1000ull * 1000 * 1000 * 1000); /* 1000 s */
  cr_assert_eq(h_next_time(p->h), FOREVER, "no timer armed");
  cr_assert_eq(tap_count(p->tap, "REQ", A), 1);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 0);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0, "the WR is still outstanding");
  cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  pair_free(p);
}

Test(simnic, lost_ack_duplicate_not_redelivered)
{
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  struct pair *p = pair_new(&o);
  tap_drop(p->tap, "ACK", 1);
  recv_ok(p, B, 100, 0, 64);
  recv_ok(p, B, 101, 64, 64); /* a second delivery would land here */
  fill(p->buf[A], 64, 9);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1, "delivered exactly once");
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  expect_bytes(p->buf[B], 64, 9);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 2);
  cr_assert_eq(tap_nth(p->tap, "REQ", A, 1)->i.psn, tap_nth(p->tap, "REQ", A, 0)->i.psn);
  cr_assert_eq(tap_count(p->tap, "ACK", B), 2, "the duplicate is ACKed again");
  cr_assert_eq(ctr(p->h, B).acks_sent, 2);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 1);
  /* the second receive WQE is still posted */
  post_ok(p, A, PP_WR_SEND, 2, 0, 8, 0, true);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 101, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  pair_free(p);
}

Test(simnic, random_loss_exactly_once_in_order)
{
  enum { N = 300, LEN = 64 };
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  o.retry_cnt = 7;
  o.max_send_wr = 512;
  o.max_recv_wr = 512;
  struct pair *p = pair_alloc(NULL, 0.05, 7);
  pair_connect(p, &o);
  for (uint32_t i = 0; i < N; i++) {
    fill(p->buf[A] + i * LEN, LEN, i);
    recv_ok(p, B, i, i * LEN, LEN);
  }
  for (uint32_t i = 0; i < N; i++)
    post_ok(p, A, PP_WR_SEND, i, i * LEN, LEN, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[N + 1];
  cr_assert_eq(h_poll(p->h, B, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++) {
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
    cr_assert_eq(wc[i].byte_len, LEN);
    expect_bytes(p->buf[B] + i * LEN, LEN, i);
  }
  cr_assert_eq(h_poll(p->h, A, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++)
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  uint64_t dropped = ctr(p->h, A).packets_dropped + ctr(p->h, B).packets_dropped;
  cr_assert_gt(dropped, 10, "loss was injected (%" PRIu64 " packets)", dropped);
  cr_assert_gt(tap_count(p->tap, "NAK", B), 0, "gaps recovered by sequence-error NAKs");
  cr_assert_eq(simnic_fabric_in_flight(p->h->f), 0);
  pair_free(p);
}

/* A gap in the PSNs (the first SEND lost, the next two arrive): the responder NAKs "PSN sequence
 * error" (AETH 0x60) for the first PSN missing at once, once per gap (the third request is
 * dropped silently), and the requester goes back to it without waiting for its ACK timeout (as
 * rxe's check_psn / check_ack do). */
Test(simnic, psn_gap_nak_sequence_error_goes_back_at_once)
{
  struct pair *p = pair_default(); /* timeout 14: 67 ms */
  tap_drop(p->tap, "REQ", 1);
  for (uint32_t i = 0; i < 3; i++) {
    fill(p->buf[A] + i * 64, 64, 20 + i);
    recv_ok(p, B, 100 + i, i * 64, 64);
  }
  for (uint32_t i = 0; i < 3; i++)
    post_ok(p, A, PP_WR_SEND, 1 + i, i * 64, 64, 0, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1, "one NAK for the gap, not one per request");
  const struct pkt_rec *nak = tap_nth(p->tap, "NAK", B, 0);
  uint32_t psn0 = tap_nth(p->tap, "REQ", A, 0)->i.psn;
  cr_assert_eq(nak->i.syndrome, 0, "PSN sequence error");
  cr_assert_eq(nak->i.psn, psn0, "NAKs the first PSN missing");
  cr_assert_eq(tap_count(p->tap, "REQ", A), 6, "the three SENDs, then all three again");
  const struct pkt_rec *again = tap_nth(p->tap, "REQ", A, 3);
  cr_assert_eq(again->i.psn, psn0);
  cr_assert_lt(again->at - tap_nth(p->tap, "REQ", A, 0)->at, 10 * LATENCY,
               "went back after %" PRIu64 " ns, not after the ACK timeout",
               again->at - tap_nth(p->tap, "REQ", A, 0)->at);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 1, "one go-back (counted as rxe counts it)");
  cr_assert_eq(log_count(l, B), 3, "delivered once each, in order");
  for (uint32_t i = 0; i < 3; i++) {
    expect_wc(&log_nth(l, B, i)->wc, 100 + i, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
    expect_bytes(p->buf[B] + i * 64, 64, 20 + i);
  }
  cr_assert_eq(log_count(l, A), 3);
  for (uint32_t i = 0; i < 3; i++)
    expect_wc(&log_nth(l, A, i)->wc, 1 + i, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  free(l);
  pair_free(p);
}

/* A sequence-error NAK's go-back is a retry like an ACK timeout's: with retry_cnt 0 it ends the
 * WQE with RETRY_EXC_ERR (rxe's COMPST_ERROR_RETRY with no retries left). */
Test(simnic, psn_gap_nak_counts_against_retry_cnt)
{
  struct h_qp_opts o = h_qp_defaults();
  o.retry_cnt = 0;
  struct pair *p = pair_new(&o);
  tap_drop(p->tap, "REQ", 1);
  recv_ok(p, B, 100, 0, 64);
  recv_ok(p, B, 101, 64, 64);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 64, 64, 0, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 2, "no retransmission");
  cr_assert_eq(log_count(l, A), 2);
  expect_wc(&log_nth(l, A, 0)->wc, 1, PP_WC_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_lt(log_nth(l, A, 0)->at, 10 * LATENCY + tap_nth(p->tap, "REQ", A, 0)->at,
               "failed at the NAK, not at an ACK timeout");
  expect_wc(&log_nth(l, A, 1)->wc, 2, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  free(l);
  pair_free(p);
}

/* After an RNR NAK the requests behind the refused one still arrive: the responder NAKs the gap
 * once (as rxe does), and the requester, already waiting out the RNR timer to go back to that
 * PSN, neither goes back twice nor spends a retry on it. */
Test(simnic, seq_nak_behind_rnr_nak_ignored)
{
  struct h_qp_opts o = h_qp_defaults();
  o.retry_cnt = 0; /* a retry spent on the sequence NAK would fail the WQE */
  o.rnr_retry = 1;
  struct pair *p = pair_new(&o);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 64, 64, 0, true);
  run_until_rnr_naks(p->h, A, 1);
  recv_ok(p, B, 100, 0, 64);
  recv_ok(p, B, 101, 64, 64);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 1);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1, "the second SEND is out of sequence");
  cr_assert_eq(tap_count(p->tap, "REQ", A), 4, "sent once, then once again after the RNR wait");
  cr_assert_eq(log_count(l, A), 2);
  expect_wc(&log_nth(l, A, 0)->wc, 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  expect_wc(&log_nth(l, A, 1)->wc, 2, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(log_count(l, B), 2);
  free(l);
  pair_free(p);
}

/* Per packet, as rxe's responder does (rxe_resp.c): a SEND spanning 4 MTU packets with no receive
 * posted is refused at its first packet, one RNR NAK per attempt; its second packet is then
 * beyond the expected PSN and draws one "PSN sequence error" NAK for the SEND's first PSN
 * (check_psn, sent_psn_nak), the rest is dropped. The requester spends one rnr_retry per attempt
 * (the sequence NAK is behind the RNR wait: no retry_cnt spent, no second go-back), so rnr_retry
 * 2 fails on the third RNR NAK exactly as a one-packet SEND does, which draws no sequence NAK. */
Test(simnic, rnr_multi_packet_send_one_rnr_nak_per_attempt)
{
  static const uint32_t lens[] = {4096, 4 * 4096}; /* 1 and 4 packets at MTU 4096 */
  for (uint32_t k = 0; k < 2; k++) {
    struct h_qp_opts o = h_qp_defaults();
    o.rnr_retry = 2;
    o.retry_cnt = 0; /* a retry spent on a sequence NAK would fail the SEND RETRY_EXC_ERR */
    struct pair *p = pair_new(&o);
    post_ok(p, A, PP_WR_SEND, 1, 0, lens[k], 0, true);
    h_run(p->h, FOREVER);
    struct pp_wc wc[2];
    cr_assert_eq(h_poll(p->h, A, wc, 2), 1);
    expect_wc(&wc[0], 1, PP_WC_RNR_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
    uint32_t psn = tap_nth(p->tap, "REQ", A, 0)->i.psn;
    cr_assert_eq(tap_nth(p->tap, "REQ", A, 0)->i.npkts, k ? 4u : 1u);
    cr_assert_eq(tap_count(p->tap, "REQ", A), 3, "%u bytes: 3 attempts", lens[k]);
    cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 3, "%u bytes: one RNR NAK per attempt", lens[k]);
    cr_assert_eq(ctr(p->h, A).rnr_naks_received, 3);
    cr_assert_eq(ctr(p->h, A).rnr_retries, 2);
    cr_assert_eq(ctr(p->h, A).timeout_retries, 0, "no retry_cnt spent");
    cr_assert_eq(tap_count(p->tap, "NAK", B), k ? 3u : 0u,
                 "%u bytes: a sequence NAK for the second packet of each attempt", lens[k]);
    for (uint32_t i = 0; i < p->tap->n && k; i++) { /* each right behind its RNR NAK */
      const struct pkt_rec *r = &p->tap->rec[i];
      if (!rec_is(r, "NAK", B))
        continue;
      cr_assert(i > 0 && rec_is(&p->tap->rec[i - 1], "RNR_NAK", B));
      cr_assert_eq(r->i.psn, psn, "the NAK names the PSN expected: the SEND's first");
      cr_assert_eq(r->i.syndrome, 0, "PSN sequence error");
      cr_assert_eq(r->at, p->tap->rec[i - 1].at);
    }
    cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
    pair_free(p);
  }
}

/* The same SEND finds the receive on its second attempt: one RNR NAK, one sequence NAK, then
 * the whole SEND lands in the receive and completes. */
Test(simnic, rnr_multi_packet_send_heals_on_retry)
{
  enum { LEN = 4 * 4096 };
  struct pair *p = pair_default();
  fill(p->buf[A], LEN, 3);
  post_ok(p, A, PP_WR_SEND, 1, 0, LEN, 0, true);
  run_until_rnr_naks(p->h, A, 1);
  recv_ok(p, B, 100, 65536, LEN);
  h_run(p->h, FOREVER);
  struct pp_wc wc[2];
  cr_assert_eq(h_poll(p->h, A, wc, 2), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 2), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(wc[0].byte_len, LEN);
  expect_bytes(p->buf[B] + 65536, LEN, 3);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 1);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 2);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 0);
  pair_free(p);
}

/* An access error on the first packet of a 4-packet WRITE (a bad rkey; rxe's check_rkey checks
 * the RETH's whole range there): the NAK names the WRITE's first PSN and acknowledges the SEND
 * before it (which completes), not one byte of the WRITE is placed, the WRITE fails
 * REM_ACCESS_ERR and what follows it flushes; the responder QP goes to ERROR, its unused receive
 * flushes. */
Test(simnic, access_error_on_first_packet_of_multi_packet_write)
{
  enum { LEN = 4 * 4096 };
  struct pair *p = pair_default();
  recv_ok(p, B, 100, 0, 64);
  recv_ok(p, B, 101, 64, 64);
  fill(p->buf[A], LEN, 5);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  cr_assert_eq(h_post_send(p->h, A, p->qa, PP_WR_RDMA_WRITE, 2, &p->mr[A], p->buf[A], LEN,
                           (uint64_t)(uintptr_t)(p->buf[B] + 65536), p->mr[B].rkey ^ 0x5a00u,
                           true),
               PP_OK);
  post_ok(p, A, PP_WR_SEND, 3, 0, 64, 0, true);
  post_ok(p, A, PP_WR_RDMA_WRITE, 4, 0, 64, 4096, false);
  h_run(p->h, FOREVER);
  struct pp_wc wc[8];
  cr_assert_eq(h_poll(p->h, A, wc, 8), 4);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  expect_wc(&wc[1], 2, PP_WC_REM_ACCESS_ERR, NO_OP, p->qa);
  expect_wc(&wc[2], 3, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_wc(&wc[3], 4, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 8), 2);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  expect_wc(&wc[1], 101, PP_WC_WR_FLUSH_ERR, NO_OP, p->qb);
  const struct pkt_rec *w = tap_nth(p->tap, "REQ", A, 1);
  cr_assert_eq(w->i.opcode, PP_WR_RDMA_WRITE);
  cr_assert_eq(w->i.npkts, 4);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  const struct pkt_rec *nak = tap_nth(p->tap, "NAK", B, 0);
  cr_assert_eq(nak->i.syndrome, 2, "remote access error");
  cr_assert_eq(nak->i.psn, w->i.psn, "refused at the WRITE's first PSN");
  cr_assert(nak->i.has_ack && nak->i.ack_epsn == w->i.psn, "acknowledges the SEND before it");
  expect_all(p->buf[B] + 65536, LEN, 0);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_ERR);
  pair_free(p);
}

/* The wire as the link carries it: every 4 KiB packet of a RoCEv2/IPv4 request costs 82 bytes
 * besides its payload (preamble+SFD 8, Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4,
 * inter-frame gap 12), so back-to-back 64 KiB WRITEs at 100 Gb/s carry at most 4096/4178 of the
 * line rate as payload (98.04 Gb/s; 58 header bytes made it 98.57, above the physical limit). */
Test(simnic, line_rate_payload_never_exceeds_wire_limit)
{
  enum { N = 8, LEN = 65536 };
  struct pair *p = pair_default();
  simnic_set_line_rate(h_nic(p->h, A), 100e9);
  for (uint32_t i = 0; i < N; i++)
    post_ok(p, A, PP_WR_RDMA_WRITE, 1 + i, i * LEN, LEN, i * LEN, i == N - 1);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], N, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(tap_count(p->tap, "REQ", A), N);
  uint64_t span = tap_nth(p->tap, "REQ", A, N - 1)->at - tap_nth(p->tap, "REQ", A, 0)->at;
  double gbps = (double)(N - 1) * LEN * 8 / (double)span, limit = 100.0 * 4096 / (4096 + 82);
  cr_assert_leq(gbps, limit, "payload at %.3f Gb/s, above the wire's %.3f", gbps, limit);
  cr_assert_geq(gbps, 0.999 * limit, "payload at %.3f Gb/s, the wire allows %.3f", gbps, limit);
  pair_free(p);
}

/* ================================================================== 6. receive too small */

Test(simnic, recv_too_small_loc_len_err)
{
  struct pair *p = pair_default();
  recv_ok(p, B, 100, 0, 8);
  recv_ok(p, B, 101, 64, 256);
  post_ok(p, A, PP_WR_SEND, 1, 0, 16, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 0, 16, 0, false);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 2);
  expect_wc(&wc[0], 100, PP_WC_LOC_LEN_ERR, NO_OP, p->qb);
  expect_wc(&wc[1], 101, PP_WC_WR_FLUSH_ERR, NO_OP, p->qb);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 2);
  expect_wc(&wc[0], 1, PP_WC_REM_INV_REQ_ERR, PP_WC_OP_SEND, p->qa);
  expect_wc(&wc[1], 2, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_ERR);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  pair_free(p);
}

/* ================================================================== 7. remote access errors */

/* B exposes a 4 KiB window at offset 65536 of its buffer with `access`; A runs `good` (if any)
 * then `bad` against it. The bad one fails REM_ACCESS_ERR, both QPs go to ERR (rxe class C),
 * the window keeps its bytes and B gets no completion. */
struct access_case {
  unsigned access;
  enum pp_wr_opcode op;
  int64_t addr_shift; /* from the window's start */
  uint32_t len;
  bool bad_rkey;
  bool control; /* first run the same op at the last valid position, expecting SUCCESS */
};

static void check_rem_access(const struct access_case *c)
{
  enum { WIN = 65536, WIN_LEN = 4096 };
  struct pair *p = pair_default();
  struct pp_mr win = h_reg(p->h, B, p->buf[B] + WIN, WIN_LEN, c->access);
  memset(p->buf[B] + WIN, 0xab, WIN_LEN);
  fill(p->buf[A], 4096, 11);
  struct pp_wc wc[4];
  uint64_t base = (uint64_t)(uintptr_t)(p->buf[B] + WIN);
  if (c->control) {
    cr_assert_eq(h_post_send(p->h, A, p->qa, c->op, 1, &p->mr[A], p->buf[A] + 8192, c->len,
                             base + WIN_LEN - c->len, win.rkey, true),
                 PP_OK);
    h_run(p->h, FOREVER);
    cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
    expect_wc(&wc[0], 1, PP_WC_SUCCESS, NO_OP, p->qa);
    memset(p->buf[B] + WIN, 0xab, WIN_LEN);
  }
  uint32_t rkey = c->bad_rkey ? 0x12345678u : win.rkey;
  cr_assert_eq(h_post_send(p->h, A, p->qa, c->op, 2, &p->mr[A], p->buf[A], c->len,
                           (uint64_t)((int64_t)base + c->addr_shift), rkey, true),
               PP_OK);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 2, PP_WC_REM_ACCESS_ERR,
            c->op == PP_WR_RDMA_READ ? PP_WC_OP_RDMA_READ : PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_ERR);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
  expect_all(p->buf[B] + WIN, WIN_LEN, 0xab);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  pair_free(p);
}

Test(simnic, rem_access_bad_rkey)
{
  check_rem_access(&(struct access_case){.access = RW_ACCESS,
                                         .op = PP_WR_RDMA_WRITE,
                                         .len = 64,
                                         .bad_rkey = true});
}

Test(simnic, rem_access_one_byte_past_mr)
{
  /* the last 64 bytes of the window work; the same 64 bytes shifted by one do not */
  check_rem_access(&(struct access_case){.access = RW_ACCESS,
                                         .op = PP_WR_RDMA_WRITE,
                                         .addr_shift = 4096 - 63,
                                         .len = 64,
                                         .control = true});
}

Test(simnic, rem_access_missing_remote_write)
{
  check_rem_access(&(struct access_case){.access = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_READ,
                                         .op = PP_WR_RDMA_WRITE,
                                         .len = 64});
}

Test(simnic, rem_access_missing_remote_read)
{
  check_rem_access(&(struct access_case){.access = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE,
                                         .op = PP_WR_RDMA_READ,
                                         .len = 64});
}

/* A zero-length RDMA WRITE or READ names no memory: no rkey or address is checked (IB C9-88,
 * rxe's check_rkey), it completes successfully and both QPs stay up; one byte with the same bogus
 * rkey is a remote access error. */
Test(simnic, rem_access_zero_length_checks_no_rkey)
{
  static const enum pp_wr_opcode ops[] = {PP_WR_RDMA_WRITE, PP_WR_RDMA_READ};
  for (int i = 0; i < 2; i++) {
    struct pair *p = pair_default();
    struct pp_wc wc[4];
    cr_assert_eq(h_post_send(p->h, A, p->qa, ops[i], 1, NULL, NULL, 0, 0, 0x12345678u, true),
                 PP_OK);
    h_run(p->h, FOREVER);
    cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
    expect_wc(&wc[0], 1, PP_WC_SUCCESS, NO_OP, p->qa);
    cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
    cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
    pair_free(p);
  }
  check_rem_access(&(struct access_case){.access = RW_ACCESS,
                                         .op = PP_WR_RDMA_WRITE,
                                         .len = 1,
                                         .bad_rkey = true});
}

/* The responder QP's own qp_access_flags (the MR allows everything): an RDMA WRITE (with or
 * without immediate) without REMOTE_WRITE, or a READ without REMOTE_READ, is NAKed "invalid
 * request" before any receive WQE is consumed (rxe: check_op_valid, class C): REM_INV_REQ_ERR at
 * the requester, both QPs in ERROR, the receive flushed, no byte written. */
static void check_qp_access(unsigned qp_access, enum pp_wr_opcode op)
{
  struct pair *p = pair_default();
  cr_assert_eq(modify(p->h, B, p->qb, (struct pp_qp_attr){.qp_access_flags = qp_access},
                      PP_QP_ACCESS_FLAGS),
               PP_OK);
  recv_ok(p, B, 100, 0, 64);
  memset(p->buf[B] + 8192, 0xab, 64);
  fill(p->buf[A], 64, 3);
  uint64_t raddr = (uint64_t)(uintptr_t)(p->buf[B] + 8192);
  cr_assert_eq(h_post_send(p->h, A, p->qa, op, 1, &p->mr[A], p->buf[A], 64, raddr,
                           p->mr[B].rkey, true),
               PP_OK);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_REM_INV_REQ_ERR,
            op == PP_WR_RDMA_READ ? PP_WC_OP_RDMA_READ : PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_ERR);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1, "the receive is not consumed, only flushed");
  cr_assert_eq(wc[0].status, PP_WC_WR_FLUSH_ERR);
  cr_assert_eq(wc[0].wr_id, 100);
  expect_all(p->buf[B] + 8192, 64, 0xab);
  cr_assert_eq(tap_count(p->tap, "NAK", B), 1);
  pair_free(p);
}

Test(simnic, qp_access_write_not_enabled)
{
  check_qp_access(PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_READ, PP_WR_RDMA_WRITE);
}

Test(simnic, qp_access_write_with_imm_not_enabled)
{
  check_qp_access(PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_READ, PP_WR_RDMA_WRITE_WITH_IMM);
}

Test(simnic, qp_access_read_not_enabled)
{
  check_qp_access(PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, PP_WR_RDMA_READ);
}

/* ================================================================== 8. completions and order */

Test(simnic, send_completion_waits_for_ack)
{
  struct pair *p = pair_default();
  recv_ok(p, B, 100, 0, 64);
  uint64_t t0 = p->h->now;
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(log_count(l, A), 1);
  cr_assert_eq(log_count(l, B), 1);
  const struct wc_rec *recv = log_nth(l, B, 0), *send = log_nth(l, A, 0);
  expect_wc(&send->wc, 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(tap_count(p->tap, "ACK", B), 1);
  uint64_t ack = tap_nth(p->tap, "ACK", B, 0)->at;
  cr_assert_geq(recv->at, t0 + LATENCY, "the message needs LATENCY to arrive");
  cr_assert_geq(ack, recv->at);
  cr_assert_geq(send->at, ack + LATENCY, "send completion before its ACK could arrive");
  cr_assert_leq(send->at, ack + LATENCY + 100);
  cr_assert_geq(send->at, t0 + 2 * LATENCY);
  free(l);
  pair_free(p);
}

/* The NIC serialises at its profile's line rate from the start (no driver call needed), and a
 * rate that would make the bandwidth infinite, or no rate, is refused. */
Test(simnic, a_nic_serialises_at_its_profiles_line_rate)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  cr_assert_eq(prof.line_rate_bps, 100e9, "the default profile's port: 100 Gb/s");
  prof.wqe_ns = 0;
  prof.line_rate_bps = 1e9; /* 8 ns per byte */
  struct pair *p = pair_alloc(&prof, 0, 1);
  struct h_qp_opts o = h_qp_defaults();
  pair_connect(p, &o);
  recv_ok(p, B, 100, 0, 4096);
  recv_ok(p, B, 101, 4096, 4096);
  uint64_t t0 = p->h->now;
  post_ok(p, A, PP_WR_SEND, 1, 0, 4096, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 4096, 4096, 0, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(log_count(l, B), 2);
  uint64_t second = log_nth(l, B, 1)->at;
  /* the second leaves once the first has been serialised (the wire itself is the harness') */
  cr_assert_geq(second, t0 + 4096 * 8, "two 4 KiB messages one after the other at 1 Gb/s: "
                "the second arrived at %" PRIu64 " ns", second - t0);
  cr_assert_lt(second, t0 + 4200 * 8 + 4 * LATENCY);
  struct simnic *n = h_nic(p->h, A);
  cr_assert_eq(simnic_set_line_rate(n, 0), PP_INVALID);
  cr_assert_eq(simnic_set_line_rate(n, -1), PP_INVALID);
  cr_assert_eq(simnic_set_line_rate(n, INFINITY), PP_INVALID);
  cr_assert_eq(simnic_set_line_rate(n, NAN), PP_INVALID);
  cr_assert_eq(simnic_set_line_rate(n, 25e9), PP_OK);
  char err[128];
  prof.line_rate_bps = 0;
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "line_rate"), "%s", err);
  free(l);
  pair_free(p);
}

Test(simnic, unsignalled_covered_by_signalled)
{
  struct h_qp_opts o = h_qp_defaults();
  o.max_send_wr = 8;
  struct pair *p = pair_new(&o);
  struct pp_wc wc[16];
  for (uint32_t round = 0; round < 2; round++) {
    for (uint32_t i = 1; i <= 8; i++) /* 7 unsignalled, then 1 signalled */
      post_ok(p, A, PP_WR_RDMA_WRITE, round * 8 + i, 0, 64, 64 * i, i == 8);
    cr_assert_eq(post_on(p, A, p->qa, PP_WR_RDMA_WRITE, 99, 0, 64, 0, true), PP_AGAIN,
                 "send queue full");
    h_run(p->h, FOREVER);
    cr_assert_eq(h_poll(p->h, A, wc, 16), 1, "round %u", round);
    expect_wc(&wc[0], round * 8 + 8, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
    /* the signalled completion covers the 7 before it: 8 slots free again */
  }
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_WRITE), 16);
  pair_free(p);
}

/* Unsignalled WRs occupy send-queue slots until a signalled completion covers them,
 * even once they are acknowledged (a protocol that never signals fills its send queue). */
Test(simnic, unsignalled_hold_sq_slots)
{
  struct h_qp_opts o = h_qp_defaults();
  o.max_send_wr = 8;
  struct pair *p = pair_new(&o);
  fill(p->buf[A], 64, 21);
  for (uint32_t i = 1; i <= 8; i++)
    post_ok(p, A, PP_WR_RDMA_WRITE, i, 0, 64, 64 * i, false);
  h_run(p->h, FOREVER);
  for (uint32_t i = 1; i <= 8; i++)
    expect_bytes(p->buf[B] + 64 * i, 64, 21);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0);
  cr_assert_eq(post_on(p, A, p->qa, PP_WR_RDMA_WRITE, 9, 0, 64, 0, true), PP_AGAIN,
               "acknowledged unsignalled WRs still hold their slots");
  pair_free(p);
}

Test(simnic, in_order_delivery_100_sends)
{
  enum { N = 100, SLOT = 8192 };
  struct h_qp_opts o = h_qp_defaults();
  o.max_send_wr = 128;
  o.max_recv_wr = 128;
  struct pair *p = pair_new(&o);
  uint32_t len[N];
  for (uint32_t i = 0; i < N; i++) {
    len[i] = 1 + (i * 997u) % 6000; /* up to two MTU packets */
    fill(p->buf[A] + i * SLOT, len[i], i);
    recv_ok(p, B, 1000 + i, i * SLOT, SLOT);
  }
  for (uint32_t i = 0; i < N; i++)
    post_ok(p, A, PP_WR_SEND, i, i * SLOT, len[i], 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[N + 1];
  cr_assert_eq(h_poll(p->h, B, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++) {
    expect_wc(&wc[i], 1000 + i, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
    cr_assert_eq(wc[i].byte_len, len[i]);
    cr_assert_eq(wc[i].src_qp, p->qa);
    expect_bytes(p->buf[B] + i * SLOT, len[i], i);
  }
  cr_assert_eq(h_poll(p->h, A, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++)
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  pair_free(p);
}

/* The harness starts B's send PSNs at 0xfffff0: B -> A traffic crosses 2^24 and PSNs, 24-bit
 * fields, wrap to 0. */
Test(simnic, psn_wraps_at_2_24)
{
  enum { N = 40, LEN = 10000, SLOT = 16384 }; /* 3 MTU packets each: 120 PSNs */
  struct pair *p = pair_default();
  for (uint32_t i = 0; i < N; i++) {
    fill(p->buf[B] + i * SLOT, LEN, 50 + i);
    recv_ok(p, A, i, i * SLOT, SLOT);
  }
  for (uint32_t i = 0; i < N; i++)
    post_ok(p, B, PP_WR_SEND, i, i * SLOT, LEN, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[N + 1];
  cr_assert_eq(h_poll(p->h, A, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++) {
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qa);
    cr_assert_eq(wc[i].byte_len, LEN);
    expect_bytes(p->buf[A] + i * SLOT, LEN, 50 + i);
  }
  cr_assert_eq(h_poll(p->h, B, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++)
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qb);
  cr_assert_eq(tap_count(p->tap, "REQ", B), N, "no retransmission");
  for (uint32_t i = 0; i < N; i++)
    cr_assert_eq(tap_nth(p->tap, "REQ", B, i)->i.psn, (0xfffff0u + 3 * i) & 0xffffffu,
                 "message %u", i);
  for (uint32_t i = 0; i < p->tap->n; i++)
    cr_assert_lt(p->tap->rec[i].i.psn, 1u << 24, "%s psn 0x%x is not 24-bit",
                 p->tap->rec[i].i.kind, p->tap->rec[i].i.psn);
  cr_assert_eq(ctr(p->h, B).timeout_retries, 0);
  pair_free(p);
}

/* ================================================================== 9. WRITE_WITH_IMM */

Test(simnic, write_with_imm_consumes_recv)
{
  struct pair *p = pair_default();
  memset(p->buf[B] + 60000, 0xee, 256);
  recv_ok(p, B, 100, 60000, 256); /* a WQE with a buffer: the data must not go there */
  cr_assert_eq(h_post_recv(p->h, B, p->qb, 101, NULL, NULL, 0), PP_OK); /* zero SGE */
  fill(p->buf[A], 100, 31);
  fill(p->buf[A] + 200, 50, 32);
  post_ok(p, A, PP_WR_RDMA_WRITE_WITH_IMM, 0x1234, 0, 100, 0, true);
  post_ok(p, A, PP_WR_RDMA_WRITE_WITH_IMM, 0x5678, 200, 50, 1000, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 2);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, p->qb);
  cr_assert_eq(wc[0].imm_data, 0x1234);
  cr_assert_eq(wc[0].wc_flags, PP_WC_WITH_IMM);
  cr_assert_eq(wc[0].byte_len, 100);
  cr_assert_eq(wc[0].src_qp, p->qa);
  expect_wc(&wc[1], 101, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, p->qb);
  cr_assert_eq(wc[1].imm_data, 0x5678);
  cr_assert_eq(wc[1].wc_flags, PP_WC_WITH_IMM);
  cr_assert_eq(wc[1].byte_len, 50);
  expect_bytes(p->buf[B], 100, 31);
  expect_bytes(p->buf[B] + 1000, 50, 32);
  expect_all(p->buf[B] + 60000, 256, 0xee);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 2);
  expect_wc(&wc[0], 0x1234, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  expect_wc(&wc[1], 0x5678, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(ctr(p->h, B).rnr_naks_sent, 0);
  pair_free(p);
}

/* SEND_WITH_IMM for comparison: data in the WQE's buffer, RECV with the immediate. */
Test(simnic, send_with_imm_delivers_imm)
{
  struct pair *p = pair_default();
  recv_ok(p, B, 100, 4096, 64);
  fill(p->buf[A], 40, 33);
  post_ok(p, A, PP_WR_SEND_WITH_IMM, 0xabcd, 0, 40, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(wc[0].imm_data, 0xabcd);
  cr_assert_eq(wc[0].wc_flags, PP_WC_WITH_IMM);
  cr_assert_eq(wc[0].byte_len, 40);
  expect_bytes(p->buf[B] + 4096, 40, 33);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 0xabcd, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  pair_free(p);
}

/* ================================================================== 10. RDMA READ */

Test(simnic, read_moves_bytes)
{
  struct pair *p = pair_default();
  fill(p->buf[B] + 4096, 10000, 41); /* 3 MTU packets */
  post_ok(p, A, PP_WR_RDMA_READ, 9, 0, 10000, 4096, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 9, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  cr_assert_eq(wc[0].byte_len, 10000);
  expect_bytes(p->buf[A], 10000, 41);
  expect_all(p->buf[A] + 10000, 64, 0);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
  cr_assert_eq(tap_count(p->tap, "READ_RESP", B), 1);
  pair_free(p);
}

Test(simnic, read_bounded_by_max_rd_atomic)
{
  enum { N = 10, LEN = 8192 };
  struct h_qp_opts o = h_qp_defaults();
  o.max_rd_atomic = 2;
  struct pair *p = pair_new(&o);
  for (uint32_t i = 0; i < N; i++) {
    fill(p->buf[B] + i * LEN, LEN, 60 + i);
    post_ok(p, A, PP_WR_RDMA_READ, i, i * LEN, LEN, i * LEN, true);
  }
  h_run(p->h, FOREVER);
  int out = 0, most = 0;
  for (uint32_t i = 0; i < p->tap->n; i++) {
    const struct pkt_rec *r = &p->tap->rec[i];
    if (rec_is(r, "REQ", A) && r->i.opcode == PP_WR_RDMA_READ)
      out++;
    else if (rec_is(r, "READ_RESP", B))
      out--;
    if (out > most)
      most = out;
  }
  cr_assert_eq(most, 2, "at most max_rd_atomic READs in flight (saw %d)", most);
  cr_assert_eq(out, 0);
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_READ), N);
  cr_assert_eq(tap_count(p->tap, "READ_RESP", B), N);
  struct pp_wc wc[N + 1];
  cr_assert_eq(h_poll(p->h, A, wc, N + 1), N);
  for (uint32_t i = 0; i < N; i++) {
    expect_wc(&wc[i], i, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
    cr_assert_eq(wc[i].byte_len, LEN);
    expect_bytes(p->buf[A] + i * LEN, LEN, 60 + i);
  }
  pair_free(p);
}

Test(simnic, read_response_lost_recovered)
{
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  struct pair *p = pair_new(&o);
  tap_drop(p->tap, "READ_RESP", 1);
  fill(p->buf[B], 512, 71);
  post_ok(p, A, PP_WR_RDMA_READ, 1, 0, 512, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1, "completes once");
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  cr_assert_eq(wc[0].byte_len, 512);
  expect_bytes(p->buf[A], 512, 71);
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_READ), 2, "READ retransmitted");
  cr_assert_eq(tap_count(p->tap, "READ_RESP", B), 2);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 1);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  pair_free(p);
}

/* A later ACK covering a READ whose response was lost must not complete the READ: the
 * requester asks again (without waiting for its ACK timeout) and completes it once. */
Test(simnic, read_response_lost_then_acked_send)
{
  struct pair *p = pair_default(); /* timeout 14: 67 ms, far beyond this exchange */
  tap_drop(p->tap, "READ_RESP", 1);
  fill(p->buf[B], 512, 72);
  recv_ok(p, B, 100, 8192, 64);
  recv_ok(p, B, 101, 8192 + 64, 64);
  post_ok(p, A, PP_WR_RDMA_READ, 1, 0, 512, 0, true);
  post_ok(p, A, PP_WR_SEND, 2, 4096, 16, 0, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_READ), 2, "READ asked again");
  cr_assert_eq(ctr(p->h, A).timeout_retries, 0, "recovered without an ACK timeout");
  cr_assert_eq(log_count(l, A), 2);
  const struct wc_rec *rd = log_nth(l, A, 0);
  expect_wc(&rd->wc, 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  cr_assert_eq(rd->wc.byte_len, 512);
  cr_assert_geq(rd->at, tap_nth(p->tap, "READ_RESP", B, 1)->at + LATENCY,
                "READ completed before its (second) response arrived");
  expect_wc(&log_nth(l, A, 1)->wc, 2, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  expect_bytes(p->buf[A], 512, 72);
  cr_assert_eq(log_count(l, B), 1, "the SEND, retransmitted with the READ, delivered once");
  expect_wc(&log_nth(l, B, 0)->wc, 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  free(l);
  pair_free(p);
}

/* The first READ's response is lost; the responses of the READs behind it, already on their
 * way, each also show that it was lost (they acknowledge past it). One retransmission answers
 * them all: the READs are asked again once, not once per response (a storm of go-back-N rounds,
 * each raising more responses, that ran for ever in a 4-rank scenario: explore seed 2803). */
Test(simnic, read_response_lost_one_retransmission)
{
  struct pair *p = pair_default();
  tap_drop(p->tap, "READ_RESP", 1);
  fill(p->buf[B], 4 * 512, 73);
  for (uint32_t i = 0; i < 4; i++)
    post_ok(p, A, PP_WR_RDMA_READ, 1 + i, i * 512, 512, i * 512, true);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count_req(p->tap, A, PP_WR_RDMA_READ), 8, "each READ sent twice, no more");
  cr_assert_eq(ctr(p->h, A).timeout_retries, 0, "recovered without an ACK timeout");
  cr_assert_eq(log_count(l, A), 4);
  for (uint32_t i = 0; i < 4; i++)
    expect_wc(&log_nth(l, A, i)->wc, 1 + i, PP_WC_SUCCESS, PP_WC_OP_RDMA_READ, p->qa);
  expect_bytes(p->buf[A], 4 * 512, 73);
  free(l);
  pair_free(p);
}

/* ================================================================== 11. SRQ */

/* Two QPs on B share one SRQ (max_wr 16, srq_limit `limit`); p->qa/qb is the first pair. */
struct srq_setup {
  struct pair *p;
  uint32_t srq, qa2, qb2;
};

static struct srq_setup srq_setup(uint32_t limit)
{
  struct srq_setup s = {.p = pair_alloc(NULL, 0, 1)};
  struct pp_srq_init_attr sa = {.max_wr = 16, .max_sge = 2, .srq_limit = limit};
  cr_assert_eq(simnic_ops.create_srq(h_nic(s.p->h, B), &sa, &s.srq), PP_OK);
  struct h_qp_opts o = h_qp_defaults();
  o.srq_b = s.srq;
  pair_connect(s.p, &o);
  h_connect(s.p->h, A, B, &o, &s.qa2, &s.qb2);
  return s;
}

static void srq_recv_ok(struct srq_setup *s, uint64_t id)
{
  struct pp_recv_wr wr = {
      .wr_id = id,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(s->p->buf[B] + id * 256),
                   .length = 256,
                   .lkey = s->p->mr[B].lkey}},
  };
  cr_assert_eq(simnic_ops.post_srq_recv(h_nic(s->p->h, B), s->srq, &wr), PP_OK);
}

/* SEND of 16 bytes with pattern `id` on A's QP qpn. */
static void srq_send(struct srq_setup *s, uint32_t qpn, uint64_t id)
{
  fill(s->p->buf[A] + id * 64, 16, (uint32_t)id);
  cr_assert_eq(post_on(s->p, A, qpn, PP_WR_SEND, id, (uint32_t)id * 64, 16, 0, true), PP_OK);
}

static void expect_srq_recv(struct srq_setup *s, uint64_t id, uint32_t qb, uint64_t sent_id)
{
  struct pp_wc wc;
  cr_assert_eq(h_poll(s->p->h, B, &wc, 1), 1);
  expect_wc(&wc, id, PP_WC_SUCCESS, PP_WC_OP_RECV, qb);
  cr_assert_eq(wc.byte_len, 16);
  expect_bytes(s->p->buf[B] + id * 256, 16, (uint32_t)sent_id);
}

Test(simnic, srq_shared_by_two_qps)
{
  struct srq_setup s = srq_setup(0);
  cr_assert_eq(h_post_recv(s.p->h, B, s.p->qb, 1, &s.p->mr[B], s.p->buf[B], 8), PP_INVALID,
               "a QP on an SRQ has no receive queue of its own");
  for (uint64_t id = 100; id < 104; id++)
    srq_recv_ok(&s, id);
  srq_send(&s, s.p->qa, 1);
  srq_send(&s, s.qa2, 2);
  h_run(s.p->h, FOREVER);
  srq_send(&s, s.qa2, 3);
  h_run(s.p->h, FOREVER);
  srq_send(&s, s.p->qa, 4);
  h_run(s.p->h, FOREVER);
  expect_srq_recv(&s, 100, s.p->qb, 1);
  expect_srq_recv(&s, 101, s.qb2, 2);
  expect_srq_recv(&s, 102, s.qb2, 3);
  expect_srq_recv(&s, 103, s.p->qb, 4);
  struct pp_wc wc[8];
  cr_assert_eq(h_poll(s.p->h, B, wc, 8), 0);
  cr_assert_eq(h_poll(s.p->h, A, wc, 8), 4);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(wc[i].status, PP_WC_SUCCESS);
  pair_free(s.p);
}

Test(simnic, srq_limit_event_once_and_rearm)
{
  struct srq_setup s = srq_setup(3);
  struct simnic *nb = h_nic(s.p->h, B);
  struct pp_async_event ev;
  for (uint64_t id = 100; id < 105; id++)
    srq_recv_ok(&s, id); /* 5 WQEs */
  srq_send(&s, s.p->qa, 1); /* 4 left */
  srq_send(&s, s.qa2, 2);   /* 3 left: not below the limit yet */
  h_run(s.p->h, FOREVER);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 0);
  srq_send(&s, s.p->qa, 3); /* 2 left: below 3 */
  h_run(s.p->h, FOREVER);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 1);
  cr_assert_eq(ev.type, PP_EVENT_SRQ_LIMIT_REACHED);
  cr_assert_eq(ev.srq_num, s.srq);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 0, "exactly once");
  srq_send(&s, s.qa2, 4); /* 1 left: the limit is disarmed */
  h_run(s.p->h, FOREVER);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 0);
  cr_assert_eq(simnic_ops.modify_srq(nb, s.srq, 2), PP_OK); /* re-arm */
  cr_assert_eq(simnic_ops.modify_srq(nb, s.srq, 17), PP_INVALID, "above max_wr");
  srq_send(&s, s.p->qa, 5); /* 0 left: below 2 */
  h_run(s.p->h, FOREVER);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 1);
  cr_assert_eq(ev.type, PP_EVENT_SRQ_LIMIT_REACHED);
  cr_assert_eq(ev.srq_num, s.srq);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 0);
  cr_assert_eq(simnic_get_async_event(h_nic(s.p->h, A), &ev), 0);
  struct pp_wc wc[8];
  cr_assert_eq(h_poll(s.p->h, B, wc, 8), 5);
  for (int i = 0; i < 5; i++)
    cr_assert_eq(wc[i].wr_id, 100u + (unsigned)i);
  pair_free(s.p);
}

Test(simnic, srq_empty_rnr_naks)
{
  struct srq_setup s = srq_setup(0);
  srq_send(&s, s.qa2, 1);
  run_until_rnr_naks(s.p->h, A, 2);
  cr_assert_eq(ctr(s.p->h, B).rnr_naks_sent, 2);
  cr_assert_eq(tap_count(s.p->tap, "RNR_NAK", B), 2);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(s.p->h, A, wc, 4), 0);
  srq_recv_ok(&s, 100);
  h_run(s.p->h, FOREVER);
  expect_srq_recv(&s, 100, s.qb2, 1);
  cr_assert_eq(h_poll(s.p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, s.qa2);
  cr_assert_eq(ctr(s.p->h, B).rnr_naks_sent, 2);
  pair_free(s.p);
}

/* A QP on an SRQ that goes to ERROR flushes no SRQ WQE (they serve its other QPs) and raises
 * QP_LAST_WQE_REACHED, once (rxe: flush_recv_queue; the IB spec's Last WQE Reached event): the
 * only sign of its failure when it had nothing of its own outstanding. A QP without an SRQ does
 * not raise it. */
Test(simnic, srq_not_flushed_on_qp_error)
{
  struct srq_setup s = srq_setup(0);
  struct simnic *nb = h_nic(s.p->h, B);
  struct pp_async_event ev;
  srq_recv_ok(&s, 100);
  srq_recv_ok(&s, 101);
  cr_assert_eq(to_state(s.p->h, B, s.p->qb, PP_QPS_ERR), PP_OK);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(s.p->h, B, wc, 4), 0, "SRQ WQEs belong to the SRQ, not to the QP");
  cr_assert_eq(simnic_get_async_event(nb, &ev), 1);
  cr_assert_eq(ev.type, PP_EVENT_QP_LAST_WQE_REACHED);
  cr_assert_eq(ev.qp_num, s.p->qb);
  cr_assert_eq(to_state(s.p->h, B, s.p->qb, PP_QPS_ERR), PP_OK);
  cr_assert_eq(simnic_get_async_event(nb, &ev), 0, "once: ERROR to ERROR changes nothing");
  cr_assert_eq(to_state(s.p->h, A, s.p->qa, PP_QPS_ERR), PP_OK);
  cr_assert_eq(simnic_get_async_event(h_nic(s.p->h, A), &ev), 0, "not for a QP without SRQ");
  srq_send(&s, s.qa2, 1);
  srq_send(&s, s.qa2, 2);
  h_run(s.p->h, FOREVER);
  expect_srq_recv(&s, 100, s.qb2, 1);
  expect_srq_recv(&s, 101, s.qb2, 2);
  cr_assert_eq(h_poll(s.p->h, A, wc, 4), 2);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, s.qa2);
  expect_wc(&wc[1], 2, PP_WC_SUCCESS, PP_WC_OP_SEND, s.qa2);
  cr_assert_eq(qp_state(s.p->h, B, s.qb2), PP_QPS_RTS);
  pair_free(s.p);
}

/* ================================================================== 12. QP state machine */

Test(simnic, qp_state_transitions)
{
  struct pair *p = pair_alloc(NULL, 0, 1);
  struct harness *h = p->h;
  uint32_t q = new_qp(h, A);
  /* invalid from RESET */
  cr_assert_eq(to_rtr(h, A, q, 0x100, 0, RTR_MASK), PP_STATE);
  cr_assert_eq(to_rts(h, A, q, 0, RTS_MASK), PP_STATE);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_RESET);
  cr_assert_eq(to_init(h, A, q), PP_OK);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_INIT);
  cr_assert_eq(to_rts(h, A, q, 0, RTS_MASK), PP_STATE, "INIT -> RTS");
  /* missing required attributes */
  cr_assert_eq(to_rtr(h, A, q, 0x100, 0, RTR_MASK & ~(unsigned)PP_QP_DEST_QPN), PP_INVALID);
  cr_assert_eq(to_rtr(h, A, q, 0x100, 0, RTR_MASK & ~(unsigned)PP_QP_PATH_MTU), PP_INVALID);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_INIT);
  cr_assert_eq(to_rtr(h, A, q, 0x100, 0, RTR_MASK), PP_OK);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_RTR);
  cr_assert_eq(to_init(h, A, q), PP_STATE, "RTR -> INIT");
  cr_assert_eq(to_rts(h, A, q, 0, RTS_MASK & ~(unsigned)PP_QP_SQ_PSN), PP_INVALID);
  cr_assert_eq(to_rts(h, A, q, 0, RTS_MASK & ~(unsigned)PP_QP_RNR_RETRY), PP_INVALID);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_RTR);
  cr_assert_eq(to_rts(h, A, q, 0, RTS_MASK), PP_OK);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_RTS);
  cr_assert_eq(to_rtr(h, A, q, 0x100, 0, RTR_MASK), PP_STATE, "RTS -> RTR");
  cr_assert_eq(to_init(h, A, q), PP_STATE, "RTS -> INIT");
  cr_assert_eq(qp_state(h, A, q), PP_QPS_RTS);
  /* any -> ERR */
  cr_assert_eq(to_state(h, A, q, PP_QPS_ERR), PP_OK);
  cr_assert_eq(qp_state(h, A, q), PP_QPS_ERR);
  for (uint32_t from = PP_QPS_RESET; from <= PP_QPS_RTR; from++) {
    uint32_t q2 = new_qp(h, A);
    if (from >= PP_QPS_INIT)
      cr_assert_eq(to_init(h, A, q2), PP_OK);
    if (from >= PP_QPS_RTR)
      cr_assert_eq(to_rtr(h, A, q2, 0x100, 0, RTR_MASK), PP_OK);
    cr_assert_eq(qp_state(h, A, q2), from);
    cr_assert_eq(to_state(h, A, q2, PP_QPS_ERR), PP_OK, "%s -> ERR",
                 pp_qp_state_name((enum pp_qp_state)from));
    cr_assert_eq(qp_state(h, A, q2), PP_QPS_ERR);
    cr_assert_eq(simnic_ops.destroy_qp(h_nic(h, A), q2), PP_OK);
  }
  /* any -> RESET */
  uint32_t q3 = new_qp(h, A);
  cr_assert_eq(to_init(h, A, q3), PP_OK);
  cr_assert_eq(to_rtr(h, A, q3, 0x100, 0, RTR_MASK), PP_OK);
  cr_assert_eq(to_state(h, A, q3, PP_QPS_RESET), PP_OK);
  cr_assert_eq(qp_state(h, A, q3), PP_QPS_RESET);
  cr_assert_eq(to_init(h, A, q3), PP_OK);
  cr_assert_eq(qp_state(h, A, q3), PP_QPS_INIT);
  pair_free(p);
}

Test(simnic, err_absorbing_until_reset)
{
  struct pair *p = pair_default();
  struct harness *h = p->h;
  cr_assert_eq(to_state(h, A, p->qa, PP_QPS_ERR), PP_OK);
  cr_assert_eq(to_rts(h, A, p->qa, 0, RTS_MASK), PP_STATE, "ERR -> RTS");
  cr_assert_eq(to_rtr(h, A, p->qa, p->qb, 0, RTR_MASK), PP_STATE, "ERR -> RTR");
  cr_assert_eq(to_init(h, A, p->qa), PP_STATE, "ERR -> INIT");
  cr_assert_eq(to_state(h, A, p->qa, PP_QPS_ERR), PP_OK, "ERR -> ERR");
  cr_assert_eq(qp_state(h, A, p->qa), PP_QPS_ERR);
  /* still ERR: receives are flushed at once */
  recv_ok(p, A, 50, 0, 64);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(h, A, wc, 4), 1);
  expect_wc(&wc[0], 50, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  /* RESET, then the whole bring-up works again on both sides */
  cr_assert_eq(to_state(h, A, p->qa, PP_QPS_RESET), PP_OK);
  cr_assert_eq(to_state(h, B, p->qb, PP_QPS_RESET), PP_OK);
  cr_assert_eq(to_init(h, A, p->qa), PP_OK);
  cr_assert_eq(to_init(h, B, p->qb), PP_OK);
  cr_assert_eq(to_rtr(h, A, p->qa, p->qb, 5000, RTR_MASK), PP_OK);
  cr_assert_eq(to_rtr(h, B, p->qb, p->qa, 7000, RTR_MASK), PP_OK);
  cr_assert_eq(to_rts(h, A, p->qa, 7000, RTS_MASK), PP_OK);
  cr_assert_eq(to_rts(h, B, p->qb, 5000, RTS_MASK), PP_OK);
  recv_ok(p, B, 100, 0, 64);
  fill(p->buf[A], 64, 81);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  h_run(h, FOREVER);
  cr_assert_eq(h_poll(h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  expect_bytes(p->buf[B], 64, 81);
  cr_assert_eq(h_poll(h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(tap_nth(p->tap, "REQ", A, 0)->i.psn, 7000);
  pair_free(p);
}

/* ================================================================== 13. local protection */

Test(simnic, loc_prot_err_bad_lkey)
{
  for (int variant = 0; variant < 2; variant++) {
    struct pair *p = pair_default();
    recv_ok(p, B, 100, 0, 64);
    struct pp_mr bad = p->mr[A];
    uint8_t *addr = p->buf[A];
    if (variant == 0)
      bad.lkey ^= 0x80; /* unknown key */
    else
      addr += BUF_BYTES - 32; /* valid key, 32 bytes past the end of its MR */
    cr_assert_eq(h_post_send(p->h, A, p->qa, PP_WR_SEND, 1, &bad, addr, 64, 0, 0, true), PP_OK);
    struct pp_wc wc[4];
    cr_assert_eq(h_poll(p->h, A, wc, 4), 1, "detected when the NIC fetches the WQE");
    expect_wc(&wc[0], 1, PP_WC_LOC_PROT_ERR, NO_OP, p->qa);
    cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
    h_run(p->h, FOREVER);
    cr_assert_eq(tap_count(p->tap, "REQ", A), 0);
    cr_assert_eq(h_poll(p->h, B, wc, 4), 0);
    cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
    pair_free(p);
  }
}

/* A WR behind the failing one must not reach the wire: its sender sees WR_FLUSH_ERR. */
Test(simnic, loc_prot_err_stops_send_queue)
{
  struct pair *p = pair_default();
  recv_ok(p, B, 100, 0, 64);
  fill(p->buf[A], 64, 91);
  post_ok(p, A, PP_WR_RDMA_WRITE, 1, 0, 64, 4096, true);
  struct pp_mr bad = p->mr[A];
  bad.lkey ^= 0x80;
  cr_assert_eq(h_post_send(p->h, A, p->qa, PP_WR_SEND, 2, &bad, p->buf[A], 64, 0, 0, true), PP_OK);
  post_ok(p, A, PP_WR_SEND, 3, 0, 64, 0, true);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 3);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  expect_wc(&wc[1], 2, PP_WC_LOC_PROT_ERR, NO_OP, p->qa);
  expect_wc(&wc[2], 3, PP_WC_WR_FLUSH_ERR, NO_OP, p->qa);
  expect_bytes(p->buf[B] + 4096, 64, 91);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 1, "only the WRITE went out");
  cr_assert_eq(h_poll(p->h, B, wc, 4), 0, "the flushed SEND was not delivered");
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
  pair_free(p);
}

/* ================================================================== 14. gather / scatter */

Test(simnic, multi_sge_gather_scatter)
{
  struct pair *p = pair_default();
  uint8_t *extra = calloc(1, 4096); /* the second SGE in a second MR */
  struct pp_mr mx = h_reg(p->h, A, extra, 4096, PP_ACCESS_LOCAL_WRITE);
  uint8_t msg[500];
  fill(msg, sizeof(msg), 101);
  memcpy(p->buf[A] + 100, msg, 300);
  memcpy(extra + 1000, msg + 300, 200);
  memset(p->buf[B], 0x5a, 16384);
  struct pp_recv_wr r = {.wr_id = 100,
                         .num_sge = 2,
                         .sg_list = {{(uint64_t)(uintptr_t)p->buf[B], 150, p->mr[B].lkey},
                                     {(uint64_t)(uintptr_t)(p->buf[B] + 9000), 1000,
                                      p->mr[B].lkey}}};
  cr_assert_eq(simnic_ops.post_recv(h_nic(p->h, B), p->qb, &r), PP_OK);
  struct pp_send_wr s = {.wr_id = 1,
                         .opcode = PP_WR_SEND,
                         .send_flags = PP_SEND_SIGNALED,
                         .num_sge = 2,
                         .sg_list = {{(uint64_t)(uintptr_t)(p->buf[A] + 100), 300, p->mr[A].lkey},
                                     {(uint64_t)(uintptr_t)(extra + 1000), 200, mx.lkey}}};
  simnic_set_now(h_nic(p->h, A), p->h->now);
  cr_assert_eq(simnic_ops.post_send(h_nic(p->h, A), p->qa, &s), PP_OK);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  cr_assert_eq(wc[0].byte_len, 500);
  cr_assert_eq(memcmp(p->buf[B], msg, 150), 0, "first scatter SGE");
  cr_assert_eq(memcmp(p->buf[B] + 9000, msg + 150, 350), 0, "second scatter SGE");
  expect_all(p->buf[B] + 150, 9000 - 150, 0x5a);
  expect_all(p->buf[B] + 9350, 16384 - 9350, 0x5a);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  pair_free(p);
  free(extra);
}

/* ================================================================== 15. ops table */

Test(simnic, ops_table_complete)
{
  cr_assert_eq(pp_nic_ops_complete(&simnic_ops), 1);
  cr_assert_str_eq(simnic_ops.name, "simgrid");
}

/* ================================================================== 16. determinism */

/* 50 SENDs under 10% injected loss; every completion stamped with its time. */
static void lossy_run(uint64_t seed, struct wc_log *l, uint64_t *dropped)
{
  enum { N = 50, LEN = 1000 };
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  struct pair *p = pair_alloc(NULL, 0.1, seed);
  pair_connect(p, &o);
  for (uint32_t i = 0; i < N; i++) {
    recv_ok(p, B, 1000 + i, i * LEN, LEN);
    post_ok(p, A, PP_WR_SEND, i, i * LEN, LEN, 0, true);
  }
  run_logged(p->h, l, FOREVER);
  *dropped = ctr(p->h, A).packets_dropped + ctr(p->h, B).packets_dropped;
  cr_assert_eq(log_count(l, B), N);
  cr_assert_eq(log_count(l, A), N);
  pair_free(p);
}

static bool same_events(const struct wc_log *x, const struct wc_log *y)
{
  if (x->n != y->n)
    return false;
  for (uint32_t i = 0; i < x->n; i++) {
    const struct wc_rec *a = &x->e[i], *b = &y->e[i];
    if (a->at != b->at || a->host != b->host || a->wc.wr_id != b->wc.wr_id ||
        a->wc.status != b->wc.status || a->wc.opcode != b->wc.opcode ||
        a->wc.byte_len != b->wc.byte_len || a->wc.qp_num != b->wc.qp_num ||
        a->wc.imm_data != b->wc.imm_data || a->wc.wc_flags != b->wc.wc_flags)
      return false;
  }
  return true;
}

Test(simnic, same_seed_same_events)
{
  struct wc_log *x = calloc(1, sizeof(*x)), *y = calloc(1, sizeof(*y));
  uint64_t dx, dy;
  lossy_run(1234, x, &dx);
  lossy_run(1234, y, &dy);
  cr_assert_gt(dx, 0, "loss was injected");
  cr_assert_eq(dx, dy);
  cr_assert(same_events(x, y), "same seed, different (time, wc) sequence");
  free(x);
  free(y);
}

Test(simnic, different_seed_different_drops)
{
  struct wc_log *x = calloc(1, sizeof(*x)), *y = calloc(1, sizeof(*y));
  uint64_t dx, dy;
  lossy_run(1234, x, &dx);
  lossy_run(98765, y, &dy);
  cr_assert(dx != dy || !same_events(x, y), "two seeds, identical runs (%" PRIu64 " drops)", dx);
  free(x);
  free(y);
}

/* ================================================================== 17. CQ overflow */

Test(simnic, cq_overflow_async_event)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 16;
  prof.max_mr = 64;
  prof.max_srq = 4;
  prof.cq_depth = 4;
  struct pair *p = pair_alloc(&prof, 0, 1);
  struct h_qp_opts o = h_qp_defaults();
  o.max_send_wr = 16, o.max_recv_wr = 16;
  pair_connect(p, &o);
  for (uint32_t i = 1; i <= 6; i++)
    post_ok(p, A, PP_WR_RDMA_WRITE, i, 0, 64, 64 * i, true);
  h_run(p->h, FOREVER);
  struct pp_async_event ev;
  /* rxe: one CQ_ERR per completion that did not fit */
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(simnic_get_async_event(h_nic(p->h, A), &ev), 1);
    cr_assert_eq(ev.type, PP_EVENT_CQ_ERR);
    cr_assert_eq(ev.qp_num, p->qa);
  }
  cr_assert_eq(simnic_get_async_event(h_nic(p->h, A), &ev), 0);
  struct pp_wc wc[8];
  cr_assert_eq(h_poll(p->h, A, wc, 8), 4);
  for (uint32_t i = 0; i < 4; i++)
    expect_wc(&wc[i], i + 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  /* room again: the next completion is delivered normally */
  post_ok(p, A, PP_WR_RDMA_WRITE, 7, 0, 64, 0, true);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 8), 1);
  expect_wc(&wc[0], 7, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(simnic_get_async_event(h_nic(p->h, A), &ev), 0);
  pair_free(p);
}

/* ================================================================== 18. tables sized by use */

/* The QP, MR and CQ tables start small and grow to what is used, up to the profile's max_qp,
 * max_mr and cq_depth exactly (limits that are not the tables' doubling steps): QP numbers and
 * MR keys stay valid across a growth, and the limits refuse and overflow as before. */
Test(simnic, tables_grow_to_the_profile_limits)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 21;
  prof.max_mr = 37;
  prof.cq_depth = 150;
  struct pair *p = pair_alloc(&prof, 0, 1); /* one MR per host */
  struct h_qp_opts o = h_qp_defaults();
  o.max_send_wr = 256, o.max_recv_wr = 16;
  pair_connect(p, &o); /* one QP per host */
  struct simnic *n = h_nic(p->h, A);
  struct pp_qp_init_attr ia = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
                               .max_recv_sge = 1, .peer = B};
  uint32_t qpn, first = 0;
  for (uint32_t i = 1; i < prof.max_qp; i++) {
    cr_assert_eq(simnic_ops.create_qp(n, &ia, &qpn), PP_OK, "QP %u of %u", i + 1, prof.max_qp);
    cr_assert_eq(qpn, p->qa + i, "QP numbers are the table's slots");
    first = first ? first : qpn;
  }
  cr_assert_eq(simnic_ops.create_qp(n, &ia, &qpn), PP_LIMIT);
  cr_assert_eq(simnic_ops.destroy_qp(n, first), PP_OK);
  cr_assert_eq(simnic_ops.create_qp(n, &ia, &qpn), PP_OK);
  cr_assert_eq(qpn, first, "the lowest free slot again");
  static uint8_t buf[64];
  struct pp_mr mr[64];
  for (uint32_t i = 1; i < prof.max_mr; i++)
    cr_assert_eq(simnic_ops.reg_mr(n, buf, sizeof(buf), PP_ACCESS_LOCAL_WRITE, &mr[i]), PP_OK,
                 "MR %u of %u", i + 1, prof.max_mr);
  cr_assert_eq(simnic_ops.reg_mr(n, buf, sizeof(buf), PP_ACCESS_LOCAL_WRITE, &mr[0]), PP_LIMIT);
  for (uint32_t i = 2; i < prof.max_mr; i++)
    cr_assert_neq(mr[i].lkey, mr[i - 1].lkey);
  for (uint32_t i = 1; i < prof.max_mr; i++)
    cr_assert_eq(simnic_ops.dereg_mr(n, &mr[i]), PP_OK, "MR %u by its key", i + 1);
  /* the host's first MR, registered before the table grew, still moves data under its keys
   * (else LOC_PROT_ERR); cq_depth + 2 completions into a CQ that grows from 64 */
  for (uint32_t i = 1; i <= prof.cq_depth + 2; i++)
    post_ok(p, A, PP_WR_RDMA_WRITE, i, 0, 64, 64, true);
  h_run(p->h, FOREVER);
  struct pp_async_event ev;
  for (int k = 0; k < 2; k++) { /* the two completions beyond cq_depth */
    cr_assert_eq(simnic_get_async_event(n, &ev), 1);
    cr_assert_eq(ev.type, PP_EVENT_CQ_ERR);
  }
  cr_assert_eq(simnic_get_async_event(n, &ev), 0);
  struct pp_wc wc[200];
  cr_assert_eq(h_poll(p->h, A, wc, 200), (int)prof.cq_depth);
  for (uint32_t i = 0; i < prof.cq_depth; i++)
    expect_wc(&wc[i], i + 1, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  pair_free(p);
}

/* ================================================================== 19. rc_model: ibta or rxe */

/* The harness' default profile (small tables) with the given retry rules. */
static struct pp_nic_profile model_profile(enum pp_rc_model m)
{
  struct pp_nic_profile prof;
  pp_nic_profile_default(&prof);
  prof.max_qp = 16;
  prof.max_mr = 64;
  prof.max_srq = 4;
  prof.cq_depth = 4096;
  prof.rc_model = m;
  return prof;
}

/* Advances one instant at a time until `host` has spent n retries of retry_cnt. */
static void run_until_timeouts(struct harness *h, uint32_t host, uint64_t n)
{
  while (ctr(h, host).timeout_retries < n) {
    uint64_t t = h_next_time(h);
    cr_assert_neq(t, FOREVER, "simulation idle after %" PRIu64 " timeouts",
                  ctr(h, host).timeout_retries);
    h_run(h, t);
  }
}

Test(simnic, rc_model_is_checked)
{
  char err[256];
  struct pp_nic_profile prof = model_profile(PP_RC_RXE);
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof err), PP_OK, "%s", err);
  prof.rc_model = PP_RC_MODEL_COUNT;
  cr_assert_eq(pp_nic_profile_check(&prof, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "rc_model must be ibta or rxe"), "%s", err);
  pp_nic_profile_default(&prof);
  cr_assert_eq(prof.rc_model, PP_RC_IBTA, "the default is the spec's");
}

/* A SEND posted to a peer that never answers (every request lost), ACK timeout code 8 (1 ms),
 * under model m with retry_cnt. */
static struct pair *dead_peer_pair(enum pp_rc_model m, uint8_t retry_cnt)
{
  struct pp_nic_profile prof = model_profile(m);
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  o.retry_cnt = retry_cnt;
  struct pair *p = pair_alloc(&prof, 0, 1);
  pair_connect(p, &o);
  tap_drop(p->tap, "REQ", UINT32_MAX);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  return p;
}

/* A peer that never answers (every request lost), retry_cnt 7, ACK timeout code 8 (1 ms). The
 * IBTA: 7 retries, then RETRY_EXC_ERR one timeout after the eighth transmission. rxe: 7 is
 * never counted down (rxe_comp.c, rxe_completer, COMPST_ERROR_RETRY), the requester retries
 * every timeout forever; when the peer answers again the SEND completes. */
Test(simnic, retry_cnt_7_against_a_dead_peer_ibta_fails)
{
  struct pair *p = dead_peer_pair(PP_RC_IBTA, 7);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  uint64_t t0 = tap_nth(p->tap, "REQ", A, 0)->at, to = pp_ack_timeout_ns(8);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 8);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 7);
  cr_assert_eq(log_count(l, A), 1);
  expect_wc(&log_nth(l, A, 0)->wc, 1, PP_WC_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(log_nth(l, A, 0)->at, t0 + 8 * to);
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  free(l);
  pair_free(p);
}

Test(simnic, retry_cnt_7_against_a_dead_peer_rxe_retries_forever)
{
  struct pair *p = dead_peer_pair(PP_RC_RXE, 7);
  run_until_timeouts(p->h, A, 100);
  uint64_t t0 = tap_nth(p->tap, "REQ", A, 0)->at, to = pp_ack_timeout_ns(8);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 101);
  for (uint32_t k = 0; k < 101; k++)
    cr_assert_eq(tap_nth(p->tap, "REQ", A, k)->at, t0 + k * to, "one timeout apart");
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0, "no RETRY_EXC_ERR");
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_RTS);
  tap_drop(p->tap, NULL, 0); /* the peer answers again */
  recv_ok(p, B, 100, 0, 64);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV, p->qb);
  pair_free(p);
}

/* Only 7 is infinite on rxe: retry_cnt 6 fails after 6 retries as the IBTA's does. */
Test(simnic, retry_cnt_6_against_a_dead_peer_rxe_fails)
{
  struct pair *p = dead_peer_pair(PP_RC_RXE, 6);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 7);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 6);
  pair_free(p);
}

/* RNR waits of 5 ms (the profile's delay for code 1) with an ACK timeout of 1 ms (code 8),
 * rnr_retry 7, no receive posted: a pair whose profile has these retry rules. */
static struct pair *rnr_wait_pair(enum pp_rc_model m, uint8_t retry_cnt)
{
  struct pp_nic_profile prof = model_profile(m);
  prof.rnr_delay_ns[1] = 5000000;
  struct h_qp_opts o = h_qp_defaults();
  o.timeout = 8;
  o.retry_cnt = retry_cnt;
  struct pair *p = pair_alloc(&prof, 0, 1);
  pair_connect(p, &o);
  post_ok(p, A, PP_WR_SEND, 1, 0, 64, 0, true);
  return p;
}

/* Each retransmission leaves one RNR wait after its RNR NAK arrived: never earlier. */
static void expect_rnr_spacing(const struct pair *p, uint32_t naks)
{
  for (uint32_t k = 0; k < naks; k++) {
    uint64_t nak = tap_nth(p->tap, "RNR_NAK", B, k)->at;
    uint64_t retx = tap_nth(p->tap, "REQ", A, k + 1)->at;
    cr_assert_geq(retx - nak, LATENCY + 5000000, "retransmission %u: %" PRIu64 " ns", k,
                  retx - nak);
    cr_assert_leq(retx - nak, LATENCY + 5000000 + 100, "retransmission %u: %" PRIu64 " ns", k,
                  retx - nak);
  }
}

/* The case of rnr_wait_pair(m, retry_cnt) that survives its waits: ten RNR NAKs without a
 * completion, `spent` ACK timeouts spent in them (why), each retransmission one wait after its
 * NAK; then the receive is posted and the SEND completes. The pair, to check more and free. */
static struct pair *rnr_waits_survived(enum pp_rc_model m, uint8_t retry_cnt, uint64_t spent,
                                       const char *why)
{
  struct pair *p = rnr_wait_pair(m, retry_cnt);
  run_until_rnr_naks(p->h, A, 10);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, A, wc, 4), 0);
  cr_assert_eq(ctr(p->h, A).timeout_retries, spent, "%s", why);
  expect_rnr_spacing(p, 9);
  recv_ok(p, B, 100, 0, 64);
  h_run(p->h, FOREVER);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 1, PP_WC_SUCCESS, PP_WC_OP_SEND, p->qa);
  return p;
}

/* The IBTA: the ACK timer stops for an RNR wait, so the 1 ms timeout never fires in the 5 ms
 * waits; even retry_cnt 0 survives, and the SEND completes once the receive is posted. */
Test(simnic, ack_timeout_in_rnr_wait_ibta_spends_nothing)
{
  struct pair *p = rnr_waits_survived(PP_RC_IBTA, 0, 0, "the ACK timer stops in an RNR wait");
  cr_assert_eq(ctr(p->h, A).timeout_retries, 0, "nor after it");
  pair_free(p);
}

/* rxe: the retransmission timer runs through the RNR wait (rxe_comp.c, rxe_completer:
 * COMPST_RNR_RETRY arms rnr_nak_timer only; rxe_req.c re-arms retrans_timer at a send only when
 * it is not pending), so it fires 1 ms into each 5 ms wait and spends one retry_cnt, without
 * retransmitting early (the requester waits for rnr_nak_timer: wait_for_rnr_timer). retry_cnt 2:
 * the third wait's timeout is RETRY_EXC_ERR, one timeout after the third transmission. */
Test(simnic, ack_timeout_in_rnr_wait_rxe_spends_retry_cnt)
{
  struct pair *p = rnr_wait_pair(PP_RC_RXE, 2);
  struct wc_log *l = calloc(1, sizeof(*l));
  run_logged(p->h, l, FOREVER);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 3);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 3);
  expect_rnr_spacing(p, 2);
  cr_assert_eq(ctr(p->h, A).timeout_retries, 2);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 3);
  cr_assert_eq(log_count(l, A), 1);
  expect_wc(&log_nth(l, A, 0)->wc, 1, PP_WC_RETRY_EXC_ERR, PP_WC_OP_SEND, p->qa);
  cr_assert_eq(log_nth(l, A, 0)->at, tap_nth(p->tap, "REQ", A, 2)->at + pp_ack_timeout_ns(8),
               "failed one ACK timeout after the third transmission");
  cr_assert_eq(qp_state(p->h, A, p->qa), PP_QPS_ERR);
  free(l);
  pair_free(p);
}

/* rxe with retry_cnt 7: a timeout spent in every wait, none ever fatal (both rules together). */
Test(simnic, ack_timeout_in_rnr_wait_rxe_retry_cnt_7_survives)
{
  pair_free(rnr_waits_survived(PP_RC_RXE, 7, 9, "one per wait (the tenth's is 1 ms ahead)"));
}

/* A 4-packet WRITE_WITH_IMM (MTU 4096) to a QP with no receive posted, rnr_retry 2. */
enum { WIMM_LEN = 4 * 4096, WIMM_AT = 65536 };
static struct pair *write_imm_pair(enum pp_rc_model m, uint8_t rnr_retry)
{
  struct pp_nic_profile prof = model_profile(m);
  struct h_qp_opts o = h_qp_defaults();
  o.rnr_retry = rnr_retry;
  struct pair *p = pair_alloc(&prof, 0, 1);
  pair_connect(p, &o);
  fill(p->buf[A], WIMM_LEN, 7);
  post_ok(p, A, PP_WR_RDMA_WRITE_WITH_IMM, 0x77, 0, WIMM_LEN, WIMM_AT, true);
  return p;
}

/* The IBTA model refuses the message whole at its first packet: nothing placed, each attempt the
 * whole message again, each RNR NAK naming its first PSN; rnr_retry 2 fails on the third. */
Test(simnic, write_imm_multi_packet_no_recv_ibta_refused_whole)
{
  struct pair *p = write_imm_pair(PP_RC_IBTA, 2);
  h_run(p->h, FOREVER);
  struct pp_wc wc[2];
  cr_assert_eq(h_poll(p->h, A, wc, 2), 1);
  expect_wc(&wc[0], 0x77, PP_WC_RNR_RETRY_EXC_ERR, PP_WC_OP_RDMA_WRITE, p->qa);
  uint32_t psn = tap_nth(p->tap, "REQ", A, 0)->i.psn;
  cr_assert_eq(tap_count(p->tap, "REQ", A), 3);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 3);
  for (uint32_t k = 0; k < 3; k++) {
    cr_assert_eq(tap_nth(p->tap, "REQ", A, k)->i.npkts, 4);
    cr_assert_eq(tap_nth(p->tap, "RNR_NAK", B, k)->i.psn, psn);
  }
  expect_all(p->buf[B] + WIMM_AT, WIMM_LEN, 0);
  pair_free(p);
}

/* rxe (rxe_opcode.c: only RDMA_WRITE_LAST_WITH_IMMEDIATE has RXE_RWR_MASK; rxe_resp.c,
 * check_resource): the first three packets are placed, the last is RNR-NAKed with its own PSN.
 * The RNR NAK does not move the requester's comp.psn, so the first retry resends the whole
 * message (rxe_req.c, req_retry from comp.psn); the three placed packets are duplicates, ACKed
 * again (duplicate_request), which resets the retry counters and moves comp.psn to the last
 * packet (rxe_comp.c, check_ack, COMPST_UPDATE_COMP), so later retries send only the last
 * packet. rnr_retry 2 thus fails on the fourth RNR NAK, not the third. */
Test(simnic, write_imm_multi_packet_no_recv_rxe_naks_the_last_packet)
{
  struct pair *p = write_imm_pair(PP_RC_RXE, 2);
  run_until_rnr_naks(p->h, A, 1);
  expect_bytes(p->buf[B] + WIMM_AT, 3 * 4096, 7); /* placed before any receive exists */
  expect_all(p->buf[B] + WIMM_AT + 3 * 4096, 4096, 0);
  h_run(p->h, FOREVER);
  struct pp_wc wc[2];
  cr_assert_eq(h_poll(p->h, A, wc, 2), 1);
  expect_wc(&wc[0], 0x77, PP_WC_RNR_RETRY_EXC_ERR, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(h_poll(p->h, B, wc, 2), 0);
  uint32_t psn = tap_nth(p->tap, "REQ", A, 0)->i.psn, last = (psn + 3) & 0xffffff;
  cr_assert_eq(tap_count(p->tap, "REQ", A), 4);
  static const uint32_t npkts[] = {4, 4, 1, 1};
  for (uint32_t k = 0; k < 4; k++) {
    const struct pkt_rec *r = tap_nth(p->tap, "REQ", A, k);
    cr_assert_eq(r->i.npkts, npkts[k], "attempt %u: %u packets", k, r->i.npkts);
    cr_assert_eq(r->i.psn, npkts[k] == 4 ? psn : last, "attempt %u", k);
    cr_assert_eq(r->i.len, npkts[k] * 4096u);
    cr_assert_eq(tap_nth(p->tap, "RNR_NAK", B, k)->i.psn, last, "NAK %u names the last", k);
  }
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 4);
  cr_assert_eq(tap_count(p->tap, "ACK", B), 1, "the duplicates of the second attempt");
  cr_assert_eq(tap_nth(p->tap, "ACK", B, 0)->i.ack_epsn, last);
  cr_assert_eq(ctr(p->h, A).rnr_retries, 3);
  expect_bytes(p->buf[B] + WIMM_AT, 3 * 4096, 7);
  expect_all(p->buf[B] + WIMM_AT + 3 * 4096, 4096, 0);
  cr_assert_eq(qp_state(p->h, B, p->qb), PP_QPS_RTS);
  pair_free(p);
}

/* rxe, the receive posted after the first RNR NAK: the retry's last packet finds it; the
 * completion carries the whole message's length and the immediate, every byte is there. */
Test(simnic, write_imm_multi_packet_rxe_heals_at_the_last_packet)
{
  struct pair *p = write_imm_pair(PP_RC_RXE, 7);
  run_until_rnr_naks(p->h, A, 1);
  cr_assert_eq(h_post_recv(p->h, B, p->qb, 100, NULL, NULL, 0), PP_OK);
  h_run(p->h, FOREVER);
  struct pp_wc wc[2];
  cr_assert_eq(h_poll(p->h, B, wc, 2), 1);
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, p->qb);
  cr_assert_eq(wc[0].byte_len, WIMM_LEN);
  cr_assert_eq(wc[0].imm_data, 0x77);
  expect_bytes(p->buf[B] + WIMM_AT, WIMM_LEN, 7);
  cr_assert_eq(h_poll(p->h, A, wc, 2), 1);
  expect_wc(&wc[0], 0x77, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 2);
  cr_assert_eq(tap_count(p->tap, "RNR_NAK", B), 1);
  pair_free(p);
}

/* rxe, the receive posted after the second RNR NAK: the third attempt is the last packet alone,
 * and the message lands whole, once. */
Test(simnic, write_imm_multi_packet_rxe_resumes_at_the_last_packet)
{
  struct pair *p = write_imm_pair(PP_RC_RXE, 7);
  run_until_rnr_naks(p->h, A, 2);
  cr_assert_eq(h_post_recv(p->h, B, p->qb, 100, NULL, NULL, 0), PP_OK);
  cr_assert_eq(h_post_recv(p->h, B, p->qb, 101, NULL, NULL, 0), PP_OK);
  h_run(p->h, FOREVER);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(p->h, B, wc, 4), 1, "one receive consumed");
  expect_wc(&wc[0], 100, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, p->qb);
  cr_assert_eq(wc[0].byte_len, WIMM_LEN);
  expect_bytes(p->buf[B] + WIMM_AT, WIMM_LEN, 7);
  cr_assert_eq(h_poll(p->h, A, wc, 4), 1);
  expect_wc(&wc[0], 0x77, PP_WC_SUCCESS, PP_WC_OP_RDMA_WRITE, p->qa);
  cr_assert_eq(tap_count(p->tap, "REQ", A), 3);
  const struct pkt_rec *r = tap_nth(p->tap, "REQ", A, 2);
  cr_assert_eq(r->i.npkts, 1);
  cr_assert_eq(r->i.remote_addr, (uint64_t)(uintptr_t)(p->buf[B] + WIMM_AT + 3 * 4096));
  pair_free(p);
}
