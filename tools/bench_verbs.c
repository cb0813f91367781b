/*
 * prepost bench: latency and bandwidth on an RDMA device, in perftest's units (latency: usec,
 * half a round trip, typical = median; bandwidth: MB/sec with MB = 2^20 bytes), for
 *  - raw verbs through the backend (backends/verbs/verbsnic.c), no engine: SEND ping-pong
 *    latency (ib_send_lat's method) and RDMA WRITE streaming bandwidth (ib_write_bw's);
 *  - the engine's paths (each protocol of engine.h run through the verbs driver): latency is half
 *    of post -> send completion with one message at a time, bandwidth is received bytes over the
 *    wall-clock time of a back-to-back stream.
 * A protocol that is not in this build, or that the stream workload cannot drive, is reported
 * as skipped with the reason. tools/guest/bench.sh runs this next to perftest and ucx_perftest in
 * one guest boot and prints the ratios.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/verbs/boot.h"
#include "prepost/verbsnic.h"
#include "prepost/verbsrun.h"
#include "prepost/p2p.h"
#include "cli_util.h"
#include "cli_verbs.h"
#include "scenario.h"

const char *const pp_cli_bench_usage =
    "usage: prepost bench [--backend verbs] [--device NAME] [--gid-index N] [--iters N]\n"
    "                     [--lat-size SIZE] [--bw-size SIZE] [--progress busy|event]\n"
    "                     [--busy-poll] [--json] [-h|--help]\n"
    "\n"
    "Measures on an RDMA device (two processes on one device), in perftest's units:\n"
    "  raw_send_lat       raw verbs SEND ping-pong, usec (half round trip; typical = median)\n"
    "  raw_write_bw       raw verbs RDMA WRITE stream, MB/sec (2^20 bytes)\n"
    "  <protocol>_lat     the engine, one message at a time: half the wall time per message,\n"
    "                     usec (a post -> completion round trip with the engine on both sides)\n"
    "  <protocol>_bw      the engine, back-to-back stream: received MB/sec over wall time\n"
    "for each protocol of this build (naive, eager, rndv, ring-*; skipped with a reason when the\n"
    "stream workload cannot drive it). Emulated devices (rxe) give meaningful ratios only\n"
    "between figures measured in the same run.\n"
    "\n"
    "  --iters N      latency iterations (default 1000; bandwidth uses 2 x N messages)\n"
    "  --lat-size S   latency message size, 16 bytes..1MiB (default 64)\n"
    "  --bw-size S    bandwidth message size, 16 bytes..64MiB (default 64KiB)\n"
    "  --progress M   how the engine's ranks wait: busy (default) polls the CQs, event sleeps\n"
    "                 on the completion channel when idle (as `prepost run`); --busy-poll = busy\n"
    "  --json         one JSON object on stdout\n"
    "  --device NAME, --gid-index N: as for `prepost run --backend verbs`\n"
    "\n"
    "Exit codes: 0 measured, 2 usage error, 4 no usable device or a run failed.\n";

struct opts {
  struct vnic_config nic;
  uint32_t iters, lat_size, bw_size;
  bool json;
  enum pp_verbs_progress progress;
};

struct result {
  char path[48];
  char unit[16];
  double value;
  double extra; /* latency: average; bandwidth: -1 */
  char note[1400];
};

/* ---------------------------------------------------------------- raw verbs */

struct raw_ep {
  struct vnic *nic;
  struct pp_mr mr;
  uint8_t *buf;
  uint32_t qpn, psn;
};

struct raw_wire {
  uint8_t addr[BOOT_ADDR_BYTES];
  uint32_t qpn, psn, rkey;
  uint64_t raddr;
};

static int xfer(int sock, const void *out, void *in, size_t n)
{
  if (write(sock, out, n) != (ssize_t)n)
    return -1;
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(sock, (char *)in + got, n - got);
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

static int raw_setup(struct raw_ep *e, const struct vnic_config *nc, uint32_t me, size_t bufsz,
                     uint32_t depth, int sock, struct raw_wire *peer, char *err, size_t errlen)
{
  if (vnic_open(nc, 2, &e->nic, err, errlen) != PP_OK)
    return -1;
  e->buf = aligned_alloc(4096, (bufsz + 4095) / 4096 * 4096);
  if (!e->buf || vnic_ops.reg_mr(e->nic, e->buf, bufsz,
                                 PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, &e->mr)) {
    snprintf(err, errlen, "raw: memory registration failed");
    return -1;
  }
  memset(e->buf, 0, bufsz);
  struct pp_qp_init_attr ia = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
                               .max_recv_sge = 1, .peer = 1 - me};
  struct pp_qp_attr init = {.qp_state = PP_QPS_INIT,
                            .qp_access_flags = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE};
  if (vnic_ops.create_qp(e->nic, &ia, &e->qpn) ||
      vnic_ops.modify_qp(e->nic, e->qpn, &init, PP_QP_STATE | PP_QP_ACCESS_FLAGS)) {
    snprintf(err, errlen, "raw: QP creation failed");
    return -1;
  }
  e->psn = 1000 + me;
  struct vnic_addr a;
  vnic_local_addr(e->nic, &a);
  struct boot_buf b = {0};
  boot_put_addr(&b, &a);
  struct raw_wire mine = {.qpn = e->qpn, .psn = e->psn, .rkey = e->mr.rkey,
                          .raddr = (uint64_t)(uintptr_t)e->buf};
  memcpy(mine.addr, b.p, BOOT_ADDR_BYTES);
  boot_buf_free(&b);
  if (xfer(sock, &mine, peer, sizeof(mine))) {
    snprintf(err, errlen, "raw: exchange with the peer process failed");
    return -1;
  }
  struct boot_buf pb = {.p = peer->addr, .len = BOOT_ADDR_BYTES};
  struct vnic_addr pa;
  boot_get_addr(&pb, &pa);
  vnic_set_peer_addr(e->nic, 1 - me, &pa);
  struct pp_qp_attr rtr = {.qp_state = PP_QPS_RTR, .path_mtu = PP_MTU_4096,
                           .dest_qp_num = peer->qpn, .rq_psn = peer->psn,
                           .max_dest_rd_atomic = 1, .min_rnr_timer = 1};
  struct pp_qp_attr rts = {.qp_state = PP_QPS_RTS, .sq_psn = e->psn, .timeout = 14,
                           .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
  if (vnic_ops.modify_qp(e->nic, e->qpn, &rtr,
                         PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN |
                             PP_QP_MAX_DEST_RD_ATOMIC | PP_QP_MIN_RNR_TIMER) ||
      vnic_ops.modify_qp(e->nic, e->qpn, &rts,
                         PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                             PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC)) {
    snprintf(err, errlen, "raw: modify_qp to RTR/RTS failed");
    return -1;
  }
  return 0;
}

static void raw_close(struct raw_ep *e)
{
  if (e->nic)
    vnic_close(e->nic);
  free(e->buf);
}

static int post_recv(struct raw_ep *e, uint32_t len, uint64_t id)
{
  struct pp_recv_wr w = {.wr_id = id, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)e->buf, .length = len,
                                      .lkey = e->mr.lkey}}};
  return vnic_ops.post_recv(e->nic, e->qpn, &w);
}

static int post_send(struct raw_ep *e, enum pp_wr_opcode op, uint32_t len, const struct raw_wire *peer,
                     uint64_t off)
{
  struct pp_send_wr w = {.wr_id = 1, .opcode = op, .send_flags = PP_SEND_SIGNALED, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)e->buf, .length = len,
                                      .lkey = e->mr.lkey}},
                         .remote_addr = peer->raddr + off, .rkey = peer->rkey};
  return vnic_ops.post_send(e->nic, e->qpn, &w);
}

/* Busy-polls until a completion of the wanted side arrives (recv: opcode >= RECV). Counts the
 * other side's completions in *others. -1 on an error completion or after 30 s. */
static int wait_wc(struct raw_ep *e, bool recv, uint64_t *others)
{
  struct pp_wc wc[16];
  uint64_t dl = boot_now_ns() + 30000000000ull;
  for (;;) {
    int n = vnic_poll_cq(e->nic, wc, 1);
    for (int i = 0; i < n; i++) {
      if (wc[i].status != PP_WC_SUCCESS)
        return -1;
      bool is_recv = wc[i].opcode >= PP_WC_OP_RECV;
      if (is_recv == recv)
        return 0;
      (*others)++;
    }
    if (n < 0 || boot_now_ns() > dl)
      return -1;
  }
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* One side of the raw measurements; the client (me == 0) fills r. */
static int raw_side(const struct opts *o, uint32_t me, int sock, struct result *lat,
                    struct result *bw, char *err, size_t errlen)
{
  struct raw_ep e = {0};
  struct raw_wire peer;
  size_t bufsz = o->bw_size > o->lat_size ? o->bw_size : o->lat_size;
  const uint32_t depth = 128;
  int rc = -1;
  uint64_t others = 0;
  double *rtt = calloc(o->iters, sizeof(*rtt));
  char sync = 's', got;
  if (!rtt || raw_setup(&e, &o->nic, me, bufsz, depth, sock, &peer, err, errlen))
    goto out;
  /* --- SEND ping-pong */
  for (uint32_t i = 0; i < 16; i++)
    if (post_recv(&e, o->lat_size, 100 + i)) {
      snprintf(err, errlen, "raw: post_recv failed");
      goto out;
    }
  if (xfer(sock, &sync, &got, 1))
    goto out;
  for (uint32_t i = 0; i < o->iters; i++) {
    uint64_t t = boot_now_ns();
    if (me == 0) {
      if (post_send(&e, PP_WR_SEND, o->lat_size, &peer, 0) || wait_wc(&e, true, &others))
        goto fail;
    } else {
      if (wait_wc(&e, true, &others) || post_send(&e, PP_WR_SEND, o->lat_size, &peer, 0))
        goto fail;
    }
    if (post_recv(&e, o->lat_size, 100))
      goto fail;
    rtt[i] = (double)(boot_now_ns() - t); /* send completions are reaped by wait_wc */
  }
  if (me == 0) {
    double sum = 0;
    for (uint32_t i = 0; i < o->iters; i++)
      sum += rtt[i];
    qsort(rtt, o->iters, sizeof(*rtt), cmp_double);
    *lat = (struct result){.value = rtt[o->iters / 2] / 2e3, .extra = sum / o->iters / 2e3};
    snprintf(lat->path, sizeof(lat->path), "raw_send_lat");
    snprintf(lat->unit, sizeof(lat->unit), "usec");
    snprintf(lat->note, sizeof(lat->note), "%u B SEND ping-pong, %u iterations", o->lat_size,
             o->iters);
  }
  /* drain outstanding send completions before the bandwidth part */
  {
    struct pp_wc wc[32];
    uint64_t dl = boot_now_ns() + 2000000000ull;
    while (vnic_sends_outstanding(e.nic) && boot_now_ns() < dl)
      vnic_poll_cq(e.nic, wc, 32);
  }
  if (xfer(sock, &sync, &got, 1))
    goto out;
  /* --- RDMA WRITE stream, client -> server */
  if (me == 0) {
    uint32_t n = 2 * o->iters, posted = 0, done = 0;
    struct pp_wc wc[32];
    uint64_t t0 = boot_now_ns();
    while (done < n) {
      while (posted < n && posted - done < depth) {
        int s = post_send(&e, PP_WR_RDMA_WRITE, o->bw_size, &peer, 0);
        if (s == PP_AGAIN)
          break;
        if (s)
          goto fail;
        posted++;
      }
      int k = vnic_poll_cq(e.nic, wc, 32);
      for (int i = 0; i < k; i++) {
        if (wc[i].status != PP_WC_SUCCESS)
          goto fail;
        if (wc[i].opcode == PP_WC_OP_RDMA_WRITE)
          done++;
      }
      if (k < 0)
        goto fail;
    }
    double s = (boot_now_ns() - t0) / 1e9;
    *bw = (struct result){.value = (double)n * o->bw_size / s / 1048576.0, .extra = -1};
    snprintf(bw->path, sizeof(bw->path), "raw_write_bw");
    snprintf(bw->unit, sizeof(bw->unit), "MB/sec");
    snprintf(bw->note, sizeof(bw->note), "%u B RDMA WRITE x %u, %u outstanding", o->bw_size, n,
             depth);
  }
  if (xfer(sock, &sync, &got, 1))
    goto out;
  rc = 0;
  goto out;
fail:
  snprintf(err, errlen, "raw: a work request failed or timed out");
out:
  free(rtt);
  raw_close(&e);
  return rc;
}

static int raw_bench(const struct opts *o, struct result *lat, struct result *bw, char *err,
                     size_t errlen)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  pid_t p = fork();
  if (p < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(sv[0]);
    char e2[256];
    int rc = raw_side(o, 1, sv[1], NULL, NULL, e2, sizeof(e2));
    if (rc)
      fprintf(stderr, "prepost bench: server: %s\n", e2);
    _exit(rc ? 1 : 0);
  }
  close(sv[1]);
  int rc = raw_side(o, 0, sv[0], lat, bw, err, errlen);
  close(sv[0]);
  int st;
  if (rc)
    kill(p, SIGKILL);
  waitpid(p, &st, 0);
  return rc;
}

/* ---------------------------------------------------------------- engine paths */

/* The protocols to measure, by name: those not in this build are reported as skipped. New
 * protocols land here. */
static const char *const protocols[] = {"naive", "eager", "rndv", "ring-credits", "ring-cts"};

static int engine_run(const struct opts *o, struct pp_sim_config *sc, struct pp_run_result *res,
                      char *err, size_t errlen)
{
  struct pp_verbs_opts vo;
  pp_verbs_opts_default(&vo);
  vo.nic = o->nic;
  vo.progress = o->progress;
  vo.run_timeout_ns = 120000000000ull;
  bool reporter;
  static struct pp_run_cfg rc;
  pp_sim_run_cfg(sc, &rc);
  enum pp_status s = pp_verbs_run(&rc, &vo, res, &reporter, err, errlen);
  if (s != PP_OK)
    return -1;
  if (res->outcome != PP_OUTCOME_COMPLETED) {
    snprintf(err, errlen, "the run ended %s", pp_outcome_name(res->outcome));
    pp_run_result_free(res);
    return -1;
  }
  return 0;
}

/* Which p2p paths the messages of a run took ("eager 2000", "rndv-get 2000"...), or "". */
static void p2p_paths(const struct pp_run_result *res, char *buf, size_t len)
{
  static const char *const names[] = {[PP_P2P_EAGER] = "eager", [PP_P2P_RNDV_PUT] = "rndv-put",
                                      [PP_P2P_RNDV_GET] = "rndv-get"};
  uint64_t n[3] = {0};
  for (uint32_t i = 0; i < res->nranks; i++)
    for (int k = 0; k < 3; k++)
      n[k] += res->ranks[i].p2p.sent[k];
  buf[0] = '\0';
  for (int k = 0; k < 3; k++)
    if (n[k]) {
      size_t at = strlen(buf);
      snprintf(buf + at, len - at, "%s%s %" PRIu64, at ? ", " : "; ", names[k], n[k]);
    }
}

static void engine_bench(const struct opts *o, const char *proto, double raw_rtt_ns,
                         struct result *lat, struct result *bw)
{
  snprintf(lat->path, sizeof(lat->path), "%s_lat", proto);
  snprintf(bw->path, sizeof(bw->path), "%s_bw", proto);
  snprintf(lat->unit, sizeof(lat->unit), "usec");
  snprintf(bw->unit, sizeof(bw->unit), "MB/sec");
  lat->value = bw->value = -1;
  int p = pp_protocol_from_name(proto);
  if (p < 0) {
    snprintf(lat->note, sizeof(lat->note), "skipped: protocol '%s' is not in this build", proto);
    snprintf(bw->note, sizeof(bw->note), "%s", lat->note);
    return;
  }
  static struct pp_scenario sc;
  char err[1024];
  /* latency: one message at a time (a window of one), back to back: each message is posted
   * when the previous one completed, so wall time / messages is one post -> completion round
   * trip with the engine's work on both sides; half of it compares with ib_send_lat */
  (void)raw_rtt_ns;
  pp_scenario_defaults(&sc);
  snprintf(sc.sim.name, sizeof(sc.sim.name), "bench-%s-lat", proto);
  struct pp_engine_cfg *c = &sc.sim.engine;
  c->protocol = (enum pp_protocol)p;
  c->qp.sq_depth = 1;
  c->qp.rq_depth = 64;
  c->qp.min_rnr_timer = 1;
  c->workload.messages = o->iters;
  c->workload.size = o->lat_size;
  c->workload.interval_ns = 0;
  struct pp_run_result res;
  if (pp_engine_cfg_check(c, err, sizeof(err)) != PP_OK) {
    snprintf(lat->note, sizeof(lat->note), "skipped: %s", err);
  } else if (engine_run(o, &sc.sim, &res, err, sizeof(err))) {
    snprintf(lat->note, sizeof(lat->note), "failed: %s", err);
  } else {
    char paths[128];
    p2p_paths(&res, paths, sizeof(paths));
    lat->value = (double)res.sim_time_ns / o->iters / 2e3;
    lat->extra = -1;
    snprintf(lat->note, sizeof(lat->note),
             "%u B x %u, one at a time: half of (wall time / messages)%s", o->lat_size, o->iters,
             paths);
    pp_run_result_free(&res);
  }
  /* bandwidth: back to back */
  pp_scenario_defaults(&sc);
  snprintf(sc.sim.name, sizeof(sc.sim.name), "bench-%s-bw", proto);
  c->protocol = (enum pp_protocol)p;
  c->qp.sq_depth = 64;
  c->qp.rq_depth = 256;
  c->qp.min_rnr_timer = 1;
  c->workload.messages = 2 * o->iters;
  c->workload.size = o->bw_size;
  c->workload.interval_ns = 0;
  if (pp_engine_cfg_check(c, err, sizeof(err)) != PP_OK) {
    snprintf(bw->note, sizeof(bw->note), "skipped: %s", err);
  } else if (engine_run(o, &sc.sim, &res, err, sizeof(err))) {
    snprintf(bw->note, sizeof(bw->note), "failed: %s", err);
  } else {
    uint64_t bytes = 0, rnr = 0;
    bool have_rnr = true;
    for (uint32_t i = 0; i < res.nranks; i++) {
      bytes += res.ranks[i].stats.bytes_received;
      rnr += res.ranks[i].nic.rnr_naks_received;
      have_rnr = have_rnr && pp_nic_counter_have(&res.ranks[i].nic, PP_NIC_CNT_rnr_naks_received);
    }
    char rnrs[48];
    if (have_rnr)
      snprintf(rnrs, sizeof(rnrs), "%" PRIu64 " RNR NAKs", rnr);
    else
      snprintf(rnrs, sizeof(rnrs), "RNR NAKs: counter not available");
    char paths[128];
    p2p_paths(&res, paths, sizeof(paths));
    bw->value = (double)bytes / (res.sim_time_ns / 1e9) / 1048576.0;
    bw->extra = -1;
    snprintf(bw->note, sizeof(bw->note), "%u B x %u back to back, %s%s", o->bw_size,
             c->workload.messages, rnrs, paths);
    pp_run_result_free(&res);
  }
}

int pp_verbs_bench_main(int argc, char **argv)
{
  struct opts o = {.iters = 1000, .lat_size = 64, .bw_size = 65536};
  o.nic.gid_index = -1;
  enum { B_BACKEND = 256, B_PROGRESS, B_DEVICE, B_GID, B_ITERS, B_LAT, B_BW, B_JSON, B_BUSY };
  static const struct option opts[] = {{"backend", required_argument, NULL, B_BACKEND},
                                       {"progress", required_argument, NULL, B_PROGRESS},
                                       {"device", required_argument, NULL, B_DEVICE},
                                       {"gid-index", required_argument, NULL, B_GID},
                                       {"iters", required_argument, NULL, B_ITERS},
                                       {"lat-size", required_argument, NULL, B_LAT},
                                       {"bw-size", required_argument, NULL, B_BW},
                                       {"json", no_argument, NULL, B_JSON},
                                       {"busy-poll", no_argument, NULL, B_BUSY},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = opts,
                          .who = "prepost", .usage = pp_cli_bench_usage};
  int c, m;
  uint64_t x;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return 2;
    case 'h':
      fputs(pp_cli_bench_usage, stdout);
      return 0;
    case B_JSON:
      o.json = true;
      break;
    case B_BUSY:
      o.progress = PP_VERBS_PROGRESS_BUSY;
      break;
    case B_BACKEND:
      if (strcmp(g.arg, "verbs"))
        return pp_cli_opt_error(&g, "must be verbs (bench runs on the verbs backend only), got "
                                    "'%s'", g.arg);
      break;
    case B_PROGRESS:
      if ((m = pp_verbs_progress_from_name(g.arg)) < 0)
        return pp_cli_opt_error(&g, "must be busy or event, got '%s'", g.arg);
      o.progress = (enum pp_verbs_progress)m;
      break;
    case B_DEVICE:
      if (strlen(g.arg) >= sizeof(o.nic.device))
        return pp_cli_opt_error(&g, "name is too long: '%s'", g.arg);
      snprintf(o.nic.device, sizeof(o.nic.device), "%s", g.arg);
      break;
    case B_GID:
      if (pp_cli_opt_uint(&g, 0, 255, &x))
        return 2;
      o.nic.gid_index = (int)x;
      break;
    case B_ITERS:
      if (pp_cli_opt_uint(&g, 10, 10000000, &x))
        return 2;
      o.iters = (uint32_t)x;
      break;
    case B_LAT:
      if (pp_cli_opt_size(&g, PP_MSG_HEADER, 1u << 20, &x))
        return 2;
      o.lat_size = (uint32_t)x;
      break;
    case B_BW:
      if (pp_cli_opt_size(&g, PP_MSG_HEADER, 1u << 26, &x))
        return 2;
      o.bw_size = (uint32_t)x;
      break;
    default:
      return pp_cli_opt_error(&g, "is not handled%s", "");
    }
  }
  if (g.rest < argc)
    return pp_cli_usage_error("prepost", pp_cli_bench_usage, "unexpected argument '%s'",
                              argv[g.rest]);
  char err[1024];
  struct vnic *probe;
  if (vnic_open(&o.nic, 2, &probe, err, sizeof(err)) != PP_OK) {
    fprintf(stderr, "prepost: bench: %s\n", err);
    return PP_EXIT_BACKEND;
  }
  char dev[VNIC_NAME_MAX];
  snprintf(dev, sizeof(dev), "%s", vnic_device_name(probe));
  int gidx = vnic_gid_index(probe);
  uint32_t mtu = vnic_active_mtu(probe);
  vnic_close(probe);
  enum { NPROTO = sizeof(protocols) / sizeof(protocols[0]) };
  struct result r[2 + 2 * NPROTO];
  memset(r, 0, sizeof(r));
  int nr = 2;
  fprintf(stderr, "prepost bench: raw verbs on %s...\n", dev);
  if (raw_bench(&o, &r[0], &r[1], err, sizeof(err))) {
    fprintf(stderr, "prepost: bench: %s\n", err);
    return PP_EXIT_BACKEND;
  }
  for (int i = 0; i < NPROTO; i++, nr += 2) {
    fprintf(stderr, "prepost bench: engine, protocol %s...\n", protocols[i]);
    engine_bench(&o, protocols[i], r[0].value * 2e3, &r[nr], &r[nr + 1]);
  }
  if (o.json) {
    printf("{\"backend\": \"verbs\", \"device\": \"%s\", \"gid_index\": %d, \"active_mtu\": %u, "
           "\"lat_size\": %u, \"bw_size\": %u, \"iters\": %u, \"results\": [",
           dev, gidx, mtu, o.lat_size, o.bw_size, o.iters);
    for (int i = 0; i < nr; i++) {
      printf("%s{\"path\": \"%s\", \"unit\": \"%s\", ", i ? ", " : "", r[i].path, r[i].unit);
      if (r[i].value >= 0)
        printf("\"value\": %.3f, ", r[i].value);
      else
        printf("\"value\": null, ");
      printf("\"note\": \"");
      for (const char *c = r[i].note; *c; c++)
        printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
      printf("\"}");
    }
    printf("]}\n");
  } else {
    printf("prepost bench on %s (GID index %d, MTU %u): latency %u B, bandwidth %u B\n\n", dev,
           gidx, mtu, o.lat_size, o.bw_size);
    printf("%-20s %12s %-7s  %s\n", "path", "value", "unit", "how");
    for (int i = 0; i < nr; i++) {
      if (r[i].value >= 0)
        printf("%-20s %12.2f %-7s  %s\n", r[i].path, r[i].value, r[i].unit, r[i].note);
      else
        printf("%-20s %12s %-7s  %s\n", r[i].path, "-", r[i].unit, r[i].note);
    }
  }
  return 0;
}
