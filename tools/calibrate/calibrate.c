/*
 * prepost calibrate --backend verbs: measures a device and writes the NIC profile the simulator
 * loads (calib.h). One process opens the device twice (two struct vnic, as two ranks would) and
 * connects one RC QP on each; every measurement is a fresh pair of QPs:
 *  - latency by size: post -> send completion of one SEND at a time, the receive pre-posted;
 *  - bandwidth by size: a stream of RDMA WRITEs, CAL_DEPTH outstanding;
 *  - per-WQE cost: the message rate of a stream of one-packet WRITEs;
 *  - ACKs: the device's sent_pkts counter over that stream, less the requests (rxe's
 *    hw_counters; other devices: not measured);
 *  - the RNR delay per min_rnr_timer code: post -> RNR_RETRY_EXC_ERR of a SEND the responder has
 *    no receive for, rnr_retry 0 and N (the difference is N delays);
 *  - retransmission: post -> RETRY_EXC_ERR of a SEND to a destroyed QP, retry_cnt 0 and 1;
 *  - retry rules: the same with retry_cnt 7, RETRY_EXC_ERR or not within 16 timeouts (rc_model).
 * Emulated devices (rxe under TCG) are noisy: every figure is a median of repetitions, and the
 * profile's comments give the spread.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "prepost/verbsnic.h"
#include "tools/calibrate/calib.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/cli_verbs.h"
#include "tools/cli/rc_qp.h"

const char *const pp_cli_calibrate_usage =
    "usage: prepost calibrate --backend verbs [--device NAME] [--gid-index N] [--name NAME]\n"
    "                         [--codes LIST] [--reps N] [--iters N] [--sizes LIST] -o FILE\n"
    "                         [-h|--help]\n"
    "\n"
    "Measures an RDMA device (two QPs on it, one process) and writes a NIC profile\n"
    "(models/nics/, keys in models/scenarios/README.md) that `prepost run` loads with\n"
    "`nic: FILE`: latency and bandwidth by size, the per-WQE cost, the ACKs the responder sends\n"
    "(rxe's packet counters), the RNR delay the device actually waits per min_rnr_timer code\n"
    "(rnr_delay, rnr_min), the ACK timeout it waits before a retransmission and whether\n"
    "retry_cnt 7 ever gives up on a dead peer (rc_model: rxe when it does not). Every\n"
    "measurement is written into the profile as a comment.\n"
    "\n"
    "  -o, --output FILE  the profile to write\n"
    "  --name NAME    the profile's name (default: FILE's name without .yaml)\n"
    "  --codes LIST   min_rnr_timer codes to measure (default 1,12,14,16,18,20)\n"
    "  --reps N       repetitions of each RNR and timeout measurement (default 3)\n"
    "  --iters N      latency iterations per size (default 200; bandwidth: 4 x N)\n"
    "  --sizes LIST   message sizes, 1 byte..1MiB each (default 64,1KiB,4KiB,64KiB)\n"
    "  --device NAME, --gid-index N: as for `prepost run --backend verbs`\n"
    "\n"
    "Exit codes: 0 profile written, 2 usage error, 4 no usable device or a measurement failed.\n";

#define CAL_DEPTH 64u
#define CAL_MAX_SIZE (1u << 20)
#define CAL_STEP_NS 120000000000ull /* one measurement at most this long */
#define CAL_MAX_REPS 15u

struct cal {
  struct vnic *n[2];
  struct pp_mr mr[2];
  uint8_t *buf[2];
  uint32_t qp[2];
  bool have_qp;
  uint32_t psn;
};

struct qp_knobs {
  uint8_t min_rnr_timer, rnr_retry, timeout, retry_cnt;
};

static uint64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t median(uint64_t *v, uint32_t n)
{
  for (uint32_t i = 1; i < n; i++) /* insertion sort: n is small */
    for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
      uint64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? v[n / 2] : 0;
}

static void drop_qps(struct cal *c)
{
  if (!c->have_qp)
    return;
  for (int s = 0; s < 2; s++)
    if (c->qp[s] && vnic_ops.destroy_qp(c->n[s], c->qp[s]) != PP_OK)
      fprintf(stderr, "prepost calibrate: destroying QP %u failed\n", c->qp[s]);
  c->have_qp = false;
  c->qp[0] = c->qp[1] = 0;
}

static int qp_up(struct cal *c, int s, const struct qp_knobs *k)
{
  enum pp_mtu mtu = pp_mtu_from_bytes(vnic_active_mtu(c->n[s]));
  struct pp_rc_attrs a = {.mtu = mtu ? mtu : PP_MTU_1024, .dest_qpn = c->qp[1 - s],
                          .rq_psn = c->psn + (uint32_t)(1 - s), .sq_psn = c->psn + (uint32_t)s,
                          .max_dest_rd_atomic = 1, .max_rd_atomic = 1,
                          .min_rnr_timer = k->min_rnr_timer, .timeout = k->timeout,
                          .retry_cnt = k->retry_cnt, .rnr_retry = k->rnr_retry};
  return pp_rc_qp_init(c->n[s], c->qp[s],
                       PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ) ||
                 pp_rc_qp_connect(c->n[s], c->qp[s], &a)
             ? -1
             : 0;
}

/* A fresh QP on each side, connected: side 0 is the requester (k's rnr_retry, timeout,
 * retry_cnt), side 1 the responder (k's min_rnr_timer). */
static int connect_pair(struct cal *c, const struct qp_knobs *k)
{
  drop_qps(c);
  c->psn = (c->psn + 4096) & 0xffffff;
  for (int s = 0; s < 2; s++) {
    struct pp_qp_init_attr ia = {.max_send_wr = CAL_DEPTH, .max_recv_wr = CAL_DEPTH,
                                 .max_send_sge = 1, .max_recv_sge = 1, .peer = (uint32_t)(1 - s)};
    if (vnic_ops.create_qp(c->n[s], &ia, &c->qp[s]) != PP_OK)
      return -1;
    c->have_qp = true;
  }
  return qp_up(c, 0, k) || qp_up(c, 1, k) ? -1 : 0;
}

static int post_recv(struct cal *c, uint32_t len)
{
  struct pp_recv_wr w = {.wr_id = 2, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)c->buf[1], .length = len,
                                      .lkey = c->mr[1].lkey}}};
  return vnic_ops.post_recv(c->n[1], c->qp[1], &w) == PP_OK ? 0 : -1;
}

static int post_send(struct cal *c, enum pp_wr_opcode op, uint32_t len)
{
  struct pp_send_wr w = {.wr_id = 1, .opcode = op, .send_flags = PP_SEND_SIGNALED, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)c->buf[0], .length = len,
                                      .lkey = c->mr[0].lkey}},
                         .remote_addr = (uint64_t)(uintptr_t)c->buf[1], .rkey = c->mr[1].rkey};
  return vnic_ops.post_send(c->n[0], c->qp[0], &w);
}

/* Polls both sides until *got reaches `want` send completions of side 0 (it may pass it);
 * *status: the first one that failed, else SUCCESS. -1 after CAL_STEP_NS or when polling
 * fails. The responder's receive completions are drained. */
static int reap(struct cal *c, uint32_t want, uint32_t *got, enum pp_wc_status *status)
{
  uint64_t dl = now_ns() + CAL_STEP_NS;
  while (*got < want) {
    struct pp_wc wc[32], rc[32];
    int n = vnic_poll_cq(c->n[0], wc, 32);
    if (n < 0 || vnic_poll_cq(c->n[1], rc, 32) < 0 || now_ns() > dl)
      return -1;
    for (int i = 0; i < n; i++)
      if (wc[i].opcode < PP_WC_OP_RECV) {
        (*got)++;
        if (wc[i].status != PP_WC_SUCCESS && *status == PP_WC_SUCCESS)
          *status = wc[i].status;
      }
  }
  return 0;
}

static int wait_send(struct cal *c, enum pp_wc_status *status)
{
  uint32_t got = 0;
  *status = PP_WC_SUCCESS;
  return reap(c, 1, &got, status);
}

static const struct qp_knobs healthy = {.min_rnr_timer = 1, .rnr_retry = 7, .timeout = 14,
                                        .retry_cnt = 7};

static int measure_lat(struct cal *c, uint32_t size, uint32_t iters, uint64_t *out)
{
  uint64_t *t = calloc(iters, sizeof *t);
  enum pp_wc_status st = PP_WC_SUCCESS;
  int rc = t && connect_pair(c, &healthy) == 0 ? 0 : -1;
  for (uint32_t i = 0; rc == 0 && i < iters; i++) {
    uint64_t t0 = now_ns();
    rc = post_recv(c, size) || post_send(c, PP_WR_SEND, size) != PP_OK ||
                 wait_send(c, &st) || st != PP_WC_SUCCESS
             ? -1
             : 0;
    t[i] = now_ns() - t0;
  }
  if (rc == 0)
    *out = median(t, iters);
  free(t);
  return rc;
}

/* n WRITEs of size, CAL_DEPTH outstanding: bytes per second; *packets: the device's sent_pkts
 * over the stream (UINT64_MAX when it has no such counter). */
static int measure_bw(struct cal *c, uint32_t size, uint32_t n, double *bytes_s, uint64_t *packets)
{
  enum pp_wc_status st = PP_WC_SUCCESS;
  if (connect_pair(c, &healthy))
    return -1;
  struct pp_nic_counters a, b;
  bool counted = vnic_ops.query_counters(c->n[0], &a) == PP_OK &&
                 pp_nic_counter_have(&a, PP_NIC_CNT_packets_sent);
  uint64_t t0 = now_ns();
  uint32_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < CAL_DEPTH) {
      if (post_send(c, PP_WR_RDMA_WRITE, size) != PP_OK)
        return -1;
      posted++;
    }
    if (reap(c, done + 1, &done, &st) || st != PP_WC_SUCCESS)
      return -1;
  }
  *bytes_s = (double)n * size / ((now_ns() - t0) / 1e9);
  *packets = UINT64_MAX;
  if (counted && vnic_ops.query_counters(c->n[0], &b) == PP_OK)
    *packets = b.packets_sent - a.packets_sent;
  return 0;
}

/* post -> the failed completion of one SEND with knobs k (the responder has no receive, or no
 * QP when `destroy`); -1 when the completion is not `want`. */
static int time_failure(struct cal *c, const struct qp_knobs *k, bool destroy,
                        enum pp_wc_status want, uint64_t *out)
{
  enum pp_wc_status st;
  if (connect_pair(c, k))
    return -1;
  if (destroy) {
    if (vnic_ops.destroy_qp(c->n[1], c->qp[1]) != PP_OK)
      return -1;
    c->qp[1] = 0;
  }
  uint64_t t0 = now_ns();
  if (post_send(c, PP_WR_SEND, 64) != PP_OK || wait_send(c, &st))
    return -1;
  *out = now_ns() - t0;
  if (st != want) {
    fprintf(stderr, "prepost calibrate: expected %s, got %s\n", pp_wc_status_name(want),
            pp_wc_status_name(st));
    return -1;
  }
  return 0;
}

static int measure_rnr(struct cal *c, uint8_t code, uint32_t reps, struct pp_calib_rnr *r)
{
  uint64_t t0[CAL_MAX_REPS], tr[CAL_MAX_REPS], d[CAL_MAX_REPS];
  *r = (struct pp_calib_rnr){.code = code, .retries = 2, .reps = reps};
  for (uint32_t i = 0; i < reps; i++) {
    struct qp_knobs k = {.min_rnr_timer = code, .rnr_retry = 0, .timeout = 14, .retry_cnt = 7};
    if (time_failure(c, &k, false, PP_WC_RNR_RETRY_EXC_ERR, &t0[i]))
      return -1;
    k.rnr_retry = (uint8_t)r->retries;
    if (time_failure(c, &k, false, PP_WC_RNR_RETRY_EXC_ERR, &tr[i]))
      return -1;
    d[i] = pp_calib_rnr_delay(t0[i], tr[i], r->retries);
  }
  r->t0_ns = median(t0, reps);
  r->tr_ns = median(tr, reps);
  r->delay_ns = median(d, reps); /* sorted now */
  r->delay_min_ns = d[0];
  r->delay_max_ns = d[reps - 1];
  return 0;
}

static int measure_timeout(struct cal *c, uint8_t code, uint32_t reps, struct pp_calib_timeout *t)
{
  uint64_t t0[CAL_MAX_REPS], t1[CAL_MAX_REPS];
  *t = (struct pp_calib_timeout){.code = code};
  for (uint32_t i = 0; i < reps; i++) {
    struct qp_knobs k = {.min_rnr_timer = 1, .rnr_retry = 7, .timeout = code, .retry_cnt = 0};
    if (time_failure(c, &k, true, PP_WC_RETRY_EXC_ERR, &t0[i]))
      return -1;
    k.retry_cnt = 1;
    if (time_failure(c, &k, true, PP_WC_RETRY_EXC_ERR, &t1[i]))
      return -1;
  }
  t->t0_ns = median(t0, reps);
  t->t1_ns = median(t1, reps);
  return 0;
}

/* retry_cnt 7, ACK timeout t->code, a SEND to a destroyed QP: RETRY_EXC_ERR within 16 timeouts
 * (the IBTA's rules give up after 8), or still retrying then (rxe's). A timeout is taken as the
 * longest of what t measured (t1 - t0, or t0 alone: one timeout and the failure; one short
 * repetition under emulation gave 2.6 ms and 12.4 ms for code 10) and the IBTA's, so noise
 * cannot shorten the bound below 8 of them. The requester is then taken to ERROR and its
 * flushed completion reaped. */
static int measure_retry7(struct cal *c, const struct pp_calib_timeout *t,
                          struct pp_calib_retry7 *r)
{
  struct qp_knobs k = {.min_rnr_timer = 1, .rnr_retry = 7, .timeout = t->code, .retry_cnt = 7};
  uint64_t each = t->t1_ns > t->t0_ns ? t->t1_ns - t->t0_ns : 0;
  each = each > t->t0_ns ? each : t->t0_ns;
  each = each > pp_ack_timeout_ns(t->code) ? each : pp_ack_timeout_ns(t->code);
  *r = (struct pp_calib_retry7){.code = t->code, .bound_ns = t->t0_ns + 16 * each};
  if (connect_pair(c, &k) || vnic_ops.destroy_qp(c->n[1], c->qp[1]) != PP_OK)
    return -1;
  c->qp[1] = 0;
  uint64_t t0 = now_ns();
  if (post_send(c, PP_WR_SEND, 64) != PP_OK)
    return -1;
  while (!r->failed && now_ns() - t0 < r->bound_ns) {
    struct pp_wc wc[4];
    int n = vnic_poll_cq(c->n[0], wc, 4);
    if (n < 0)
      return -1;
    for (int i = 0; i < n; i++)
      if (wc[i].opcode < PP_WC_OP_RECV && wc[i].status == PP_WC_RETRY_EXC_ERR)
        r->failed = true, r->t_ns = now_ns() - t0;
  }
  enum pp_wc_status st;
  struct pp_qp_attr err = {.qp_state = PP_QPS_ERR};
  if (!r->failed &&
      (vnic_ops.modify_qp(c->n[0], c->qp[0], &err, PP_QP_STATE) != PP_OK || wait_send(c, &st)))
    return -1;
  r->measured = true;
  return 0;
}

static void query_limits(struct cal *c, struct pp_calib *r)
{
  int n = 0;
  struct ibv_device **l = ibv_get_device_list(&n);
  for (int i = 0; l && i < n; i++) {
    if (strcmp(ibv_get_device_name(l[i]), vnic_device_name(c->n[0])))
      continue;
    struct ibv_context *ctx = ibv_open_device(l[i]);
    struct ibv_device_attr a;
    if (ctx && ibv_query_device(ctx, &a) == 0) {
      r->max_qp = (uint32_t)a.max_qp, r->max_qp_wr = (uint32_t)a.max_qp_wr;
      r->max_srq = (uint32_t)a.max_srq, r->max_mr = (uint32_t)a.max_mr;
      r->cq_depth = (uint32_t)a.max_cqe, r->max_rd_atomic = (uint32_t)a.max_qp_rd_atom;
    }
    if (ctx)
      ibv_close_device(ctx);
  }
  if (l)
    ibv_free_device_list(l);
}

static int cal_open(struct cal *c, const struct vnic_config *cfg, char *err, size_t errlen)
{
  unsigned acc = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ;
  for (int s = 0; s < 2; s++) {
    if (vnic_open(cfg, 2, &c->n[s], err, errlen) != PP_OK)
      return -1;
    c->buf[s] = aligned_alloc(4096, CAL_MAX_SIZE);
    if (!c->buf[s] || vnic_ops.reg_mr(c->n[s], c->buf[s], CAL_MAX_SIZE, acc, &c->mr[s])) {
      snprintf(err, errlen, "registering %u bytes failed", CAL_MAX_SIZE);
      return -1;
    }
    memset(c->buf[s], 0, CAL_MAX_SIZE);
  }
  for (int s = 0; s < 2; s++) {
    struct vnic_addr a;
    vnic_local_addr(c->n[1 - s], &a);
    if (vnic_set_peer_addr(c->n[s], (uint32_t)(1 - s), &a) != PP_OK) {
      snprintf(err, errlen, "setting the peer address failed");
      return -1;
    }
  }
  return 0;
}

static void cal_close(struct cal *c)
{
  drop_qps(c);
  for (int s = 0; s < 2; s++) {
    if (c->n[s])
      vnic_close(c->n[s]);
    free(c->buf[s]);
  }
}

struct copts {
  struct vnic_config nic;
  const char *out, *name;
  uint8_t codes[PP_CALIB_MAX_CODES];
  uint32_t ncodes, reps, iters;
  uint32_t sizes[PP_CALIB_MAX_SIZES], nsizes;
};

static int run_sizes(struct cal *c, const struct copts *o, struct pp_calib *r, char *err,
                     size_t errlen)
{
  uint64_t pkts;
  for (uint32_t i = 0; i < o->nsizes; i++) {
    struct pp_calib_size *s = &r->sizes[r->nsizes++];
    s->size = o->sizes[i];
    if (measure_lat(c, s->size, o->iters, &s->lat_ns) ||
        measure_bw(c, s->size, 4 * o->iters, &s->bw_bytes_s, &pkts)) {
      snprintf(err, errlen, "latency or bandwidth at %u bytes failed", s->size);
      return -1;
    }
    fprintf(stderr, "  %u B: latency %.1f us, bandwidth %.1f MB/s\n", s->size, s->lat_ns / 1e3,
            s->bw_bytes_s / 1048576.0);
  }
  double bps;
  r->wqe_size = 64;
  uint32_t n = 8 * o->iters;
  if (measure_bw(c, r->wqe_size, n, &bps, &pkts)) {
    snprintf(err, errlen, "the per-WQE stream failed");
    return -1;
  }
  r->wqe_rate = bps / r->wqe_size;
  if (pkts != UINT64_MAX && pkts >= n)
    r->ack_msgs = n, r->ack_packets = pkts - n;
  fprintf(stderr, "  %.0f WQEs/s; %" PRIu64 " ACK packets for %" PRIu64 " WRITEs\n", r->wqe_rate,
          r->ack_packets, r->ack_msgs);
  return 0;
}

static int run_timers(struct cal *c, const struct copts *o, struct pp_calib *r, char *err,
                      size_t errlen)
{
  for (uint32_t i = 0; i < o->ncodes; i++) {
    struct pp_calib_rnr *x = &r->rnr[r->nrnr++];
    if (measure_rnr(c, o->codes[i], o->reps, x)) {
      snprintf(err, errlen, "the RNR delay of code %u could not be measured", o->codes[i]);
      return -1;
    }
    fprintf(stderr, "  RNR code %u: IBTA %.3f ms, measured %.3f ms (%.3f..%.3f)\n", x->code,
            pp_rnr_timer_ns(x->code) / 1e6, x->delay_ns / 1e6, x->delay_min_ns / 1e6,
            x->delay_max_ns / 1e6);
  }
  static const uint8_t tmo_codes[] = {10, 14};
  for (uint32_t i = 0; i < sizeof tmo_codes; i++) {
    struct pp_calib_timeout *t = &r->tmo[r->ntmo];
    if (measure_timeout(c, tmo_codes[i], o->reps, t)) {
      fprintf(stderr, "  ACK timeout code %u: not measured\n", tmo_codes[i]);
      continue; /* the profile has no key for it: a comment less */
    }
    r->ntmo++;
    fprintf(stderr, "  ACK timeout code %u: %.3f ms (retry_cnt 0), %.3f ms (1)\n", t->code,
            t->t0_ns / 1e6, t->t1_ns / 1e6);
  }
  struct pp_calib_retry7 *r7 = &r->retry7;
  if (r->ntmo && measure_retry7(c, &r->tmo[0], r7) == 0)
    fprintf(stderr, "  retry_cnt 7, a dead peer: %s %.3f ms\n",
            r7->failed ? "RETRY_EXC_ERR after" : "still retrying after",
            (r7->failed ? r7->t_ns : r7->bound_ns) / 1e6);
  else
    fprintf(stderr, "  retry_cnt 7, a dead peer: not measured\n");
  return 0;
}

static int calibrate(const struct copts *o, struct pp_calib *r, char *err, size_t errlen)
{
  struct cal c = {.psn = 4242};
  int rc = cal_open(&c, &o->nic, err, errlen);
  if (rc == 0) {
    snprintf(r->device, sizeof r->device, "%s", vnic_device_name(c.n[0]));
    r->mtu = vnic_active_mtu(c.n[0]);
    query_limits(&c, r);
    fprintf(stderr, "prepost calibrate: device %s, active MTU %u\n", r->device, r->mtu);
    rc = run_sizes(&c, o, r, err, errlen);
  }
  if (rc == 0)
    rc = run_timers(&c, o, r, err, errlen);
  cal_close(&c);
  return rc;
}

static int parse_list(struct pp_cli_opts *g, bool sizes, struct copts *o)
{
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", g->arg) >= (int)sizeof buf)
    return pp_cli_opt_error(g, "list is too long: '%s'", g->arg);
  uint32_t *n = sizes ? &o->nsizes : &o->ncodes, max = sizes ? PP_CALIB_MAX_SIZES : 32;
  *n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    uint64_t v;
    char why[160];
    enum pp_status s = sizes ? pp_parse_size(t, strlen(t), 1, CAL_MAX_SIZE, &v, why, sizeof why)
                             : pp_parse_uint(t, strlen(t), 0, 31, &v, why, sizeof why);
    if (s != PP_OK || *n == max)
      return pp_cli_opt_error(g, sizes ? "must list up to 16 sizes of 1 byte..1MiB, got '%s'"
                                       : "must list min_rnr_timer codes 0..31, got '%s'",
                              g->arg);
    if (sizes)
      o->sizes[(*n)++] = (uint32_t)v;
    else
      o->codes[(*n)++] = (uint8_t)v;
  }
  return *n ? 0 : pp_cli_opt_error(g, "must not be empty, got '%s'", g->arg);
}

static void default_opts(struct copts *o)
{
  static const uint8_t codes[] = {1, 12, 14, 16, 18, 20};
  static const uint32_t sizes[] = {64, 1024, 4096, 65536};
  *o = (struct copts){.reps = 3, .iters = 200};
  o->nic.gid_index = -1;
  memcpy(o->codes, codes, sizeof codes);
  o->ncodes = sizeof codes;
  memcpy(o->sizes, sizes, sizeof sizes);
  o->nsizes = sizeof sizes / sizeof sizes[0];
}

static int parse_opts(int argc, char **argv, struct copts *o)
{
  enum { C_BACKEND = 256, C_DEVICE, C_GID, C_NAME, C_CODES, C_REPS, C_ITERS, C_SIZES };
  static const struct option longs[] = {{"backend", required_argument, NULL, C_BACKEND},
                                        {"device", required_argument, NULL, C_DEVICE},
                                        {"gid-index", required_argument, NULL, C_GID},
                                        {"name", required_argument, NULL, C_NAME},
                                        {"codes", required_argument, NULL, C_CODES},
                                        {"reps", required_argument, NULL, C_REPS},
                                        {"iters", required_argument, NULL, C_ITERS},
                                        {"sizes", required_argument, NULL, C_SIZES},
                                        {"output", required_argument, NULL, 'o'},
                                        {"help", no_argument, NULL, 'h'},
                                        {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ho:", .longs = longs,
                          .who = "prepost", .usage = pp_cli_calibrate_usage};
  int c;
  uint64_t x;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return 2;
    case 'h':
      fputs(pp_cli_calibrate_usage, stdout);
      return -1;
    case 'o':
      o->out = g.arg;
      break;
    case C_NAME:
      if (strlen(g.arg) == 0 || strlen(g.arg) > 63)
        return pp_cli_opt_error(&g, "must be 1..63 bytes, got '%s'", g.arg);
      o->name = g.arg;
      break;
    case C_BACKEND:
      if (strcmp(g.arg, "verbs"))
        return pp_cli_opt_error(&g, "must be verbs (calibrate measures a device), got '%s'",
                                g.arg);
      break;
    case C_DEVICE:
      if (strlen(g.arg) >= sizeof o->nic.device)
        return pp_cli_opt_error(&g, "name is too long: '%s'", g.arg);
      snprintf(o->nic.device, sizeof o->nic.device, "%s", g.arg);
      break;
    case C_GID:
      if (pp_cli_opt_uint(&g, 0, 255, &x))
        return 2;
      o->nic.gid_index = (int)x;
      break;
    case C_REPS:
      if (pp_cli_opt_uint(&g, 1, CAL_MAX_REPS, &x))
        return 2;
      o->reps = (uint32_t)x;
      break;
    case C_ITERS:
      if (pp_cli_opt_uint(&g, 1, 100000, &x))
        return 2;
      o->iters = (uint32_t)x;
      break;
    case C_CODES:
    case C_SIZES:
      if (parse_list(&g, c == C_SIZES, o))
        return 2;
      break;
    }
  }
  if (g.rest < argc)
    return pp_cli_usage_error("prepost", pp_cli_calibrate_usage, "unexpected argument '%s'",
                              argv[g.rest]);
  if (!o->out)
    return pp_cli_usage_error("prepost", pp_cli_calibrate_usage, "%s",
                              "missing -o FILE (the profile to write)");
  return 0;
}

static void name_of(const struct copts *o, struct pp_calib *r)
{
  if (o->name) {
    snprintf(r->name, sizeof r->name, "%s", o->name);
    return;
  }
  const char *b = strrchr(o->out, '/');
  b = b ? b + 1 : o->out;
  size_t n = strlen(b);
  if (n > 5 && !strcmp(b + n - 5, ".yaml"))
    n -= 5;
  snprintf(r->name, sizeof r->name, "%.*s", (int)(n < 63 ? n : 63), b);
}

int pp_cli_calibrate(int argc, char **argv)
{
  struct copts o;
  default_opts(&o);
  int rc = parse_opts(argc, argv, &o);
  if (rc)
    return rc < 0 ? 0 : rc;
  static struct pp_calib r;
  memset(&r, 0, sizeof r);
  name_of(&o, &r);
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm))
    strftime(r.when, sizeof r.when, "%Y-%m-%d %H:%M UTC", &tm);
  char err[512] = "";
  if (calibrate(&o, &r, err, sizeof err)) {
    fprintf(stderr, "prepost calibrate: %s\n", err[0] ? err : "a measurement failed");
    return PP_EXIT_BACKEND;
  }
  FILE *f = fopen(o.out, "w");
  int w = f ? pp_calib_write(f, &r) : -1;
  if (f && fclose(f))
    w = -1;
  if (w) {
    fprintf(stderr, "prepost calibrate: cannot write %s\n", o.out);
    return PP_EXIT_BACKEND;
  }
  fprintf(stderr, "prepost calibrate: wrote %s\n", o.out);
  return 0;
}
