/*
 * prepost bench: latency and bandwidth on an RDMA device, in perftest's units (latency: usec,
 * half a round trip, typical = median; bandwidth: MB/sec with MB = 2^20 bytes), for
 *  - raw verbs through the backend (backends/verbs/verbsnic.c), no engine: SEND ping-pong
 *    latency (ib_send_lat's method) and RDMA WRITE streaming bandwidth (ib_write_bw's);
 *  - the engine's paths (each protocol of engine.h run through the verbs driver): latency is half
 *    of each round trip of the pingpong workload (engine/workload/pingpong.c: rank 0 sends, rank
 *    1 answers with a message of the same size), back to back as the raw rows and perftest;
 *    bandwidth is received bytes over the wall-clock time of a back-to-back stream (the stream
 *    workload).
 * A protocol that is not in this build, or that the workloads cannot drive, is reported as
 * skipped with the reason. tools/guest/bench.sh runs this next to perftest and ucx_perftest in
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
#include "prepost/hist.h"
#include "prepost/p2p.h"
#include "prepost/param.h"
#include "prepost/ring.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/cli_verbs.h"
#include "tools/cli/rc_qp.h"
#include "tools/scenario/scenario.h"

const char *const pp_cli_bench_usage =
    "usage: prepost bench [--backend verbs] [--device NAME] [--gid-index N] [--iters N]\n"
    "                     [-a | --sizes LIST] [--lat-size SIZE] [--bw-size SIZE] [--rows LIST]\n"
    "                     [--test lat|bw|both] [--report_gbits] [--progress busy|event]\n"
    "                     [--busy-poll] [--lat-interval DURATION] [--ring-slots N|auto]\n"
    "                     [--ring-credit-batch N|auto] [--json] [-h|--help]\n"
    "\n"
    "Measures on an RDMA device (two processes on one device), in perftest's conventions, one\n"
    "row per path and message size:\n"
    "  raw_send, raw_write, raw_read   raw verbs through the backend, no engine: latency as\n"
    "                     ib_send_lat / ib_write_lat (ping-pong, half a round trip) and\n"
    "                     ib_read_lat (one RDMA READ); bandwidth as ib_send_bw / ib_write_bw /\n"
    "                     ib_read_bw (a stream of 2 x N operations, 128 outstanding)\n"
    "  raw_rget           latency only: a ping-pong of the rget row's work requests without\n"
    "                     the engine (each side SENDs 64 B, the other READs the message from\n"
    "                     it, then SENDs its own), half a round trip\n"
    "  eager, rget, rput   the engine's point-to-point paths (protocol eager with eager_limit at\n"
    "                     the size; rndv with RGET; rndv with RPUT)\n"
    "  ring-credits, ring-cts   the ring FIFO protocols\n"
    "Latency, usec: t_min, t_typical (the median), t_avg, t_max, the 99th and 99.9th percentiles\n"
    "of half a round trip (raw_read: of one READ, as ib_read_lat); the engine's rows too: the\n"
    "pingpong workload, rank 0 sends a message, rank 1 answers with one of the same size, rank 0\n"
    "records half the round trip, the next starting at once (as ib_send_lat, osu_latency; no\n"
    "warm-up iterations, as the raw rows). Bandwidth: bytes received over the wall time of a\n"
    "back-to-back stream, MB/sec (2^20 bytes), or Gb/sec (10^9 bits) with --report_gbits, and\n"
    "the message rate. Emulated devices (rxe) give meaningful ratios only between figures of\n"
    "the same run.\n"
    "\n"
    "  --iters N      latency iterations (default 1000; bandwidth uses 2 x N messages)\n"
    "  -a, --all      every size from 2 to 2^23 bytes, powers of two (perftest's -a)\n"
    "  --sizes LIST   sizes for both tests, 1 byte..8MiB each, e.g. 64,4KiB,64KiB,1MiB\n"
    "  --lat-size S   latency size without -a/--sizes, 1 byte..8MiB (default 64)\n"
    "  --bw-size S    bandwidth size without -a/--sizes, 1 byte..8MiB (default 64KiB)\n"
    "  --rows LIST    the rows to run (default all): raw_send,raw_write,raw_read,raw_rget,eager,\n"
    "                 rget,rput,ring-credits,ring-cts\n"
    "  --test T       lat, bw or both (default)\n"
    "  --lat-interval D  engine latency rows: a pause of D between a reply and the next ping\n"
    "                 (default 0: back to back; at most 10s)\n"
    "  --ring-slots N the ring rows' slots per channel (of ring.slot_size, 128 KiB), 1..4096;\n"
    "                 auto (the default): the protocol's default (8) for latency, and for\n"
    "                 bandwidth enough to hold two messages (at least 8), as NCCL_BUFFSIZE is\n"
    "                 raised for large transfers; each row's note says what it used\n"
    "  --ring-credit-batch N  the ring rows' ring.credit_batch, 1..slots (credits return once N\n"
    "                 slots are released, or 1 ms after the first when the channel is idle);\n"
    "                 auto (the default): half the slots for latency (a ping-pong then posts\n"
    "                 one credit write per N messages, not one per message: on rxe a second\n"
    "                 WQE posted behind the reply reaches the peer about a round trip late),\n"
    "                 the protocol's default (1) for bandwidth; the row's note says it\n"
    "  --report_gbits bandwidth in Gb/sec instead of MB/sec\n"
    "  --progress M   how the engine's ranks wait: busy (default) polls the CQs, event sleeps\n"
    "                 on the completion channel when idle (as `prepost run`); --busy-poll = busy\n"
    "  --json         one JSON object on stdout\n"
    "  --device NAME, --gid-index N: as for `prepost run --backend verbs`\n"
    "\n"
    "Exit codes: 0 measured, 2 usage error, 4 no usable device or the raw measurement failed\n"
    "(a failed engine row is reported as failed, with the reason).\n";

/* The rows, in the order they run. X(id, name, raw) */
#define BENCH_ROWS(X)                                                                         \
  X(RAW_SEND, "raw_send", 1)                                                                  \
  X(RAW_WRITE, "raw_write", 1)                                                                \
  X(RAW_READ, "raw_read", 1)                                                                  \
  X(RAW_RGET, "raw_rget", 1)                                                                  \
  X(EAGER, "eager", 0)                                                                        \
  X(RGET, "rget", 0)                                                                          \
  X(RPUT, "rput", 0)                                                                          \
  X(RING_CREDITS, "ring-credits", 0)                                                          \
  X(RING_CTS, "ring-cts", 0)

enum row {
#define PP_X(id, name, raw) ROW_##id,
  BENCH_ROWS(PP_X)
#undef PP_X
  NROWS
};
static const char *const row_names[] = {
#define PP_X(id, name, raw) [ROW_##id] = name,
    BENCH_ROWS(PP_X)
#undef PP_X
};
static const bool row_raw[] = {
#define PP_X(id, name, raw) [ROW_##id] = raw,
    BENCH_ROWS(PP_X)
#undef PP_X
};

#define MAX_SIZES 32
#define MAX_SIZE (1u << 23)

struct opts {
  struct vnic_config nic;
  uint32_t iters;
  uint32_t sizes[MAX_SIZES], nsizes; /* -a or --sizes; else lat_size and bw_size */
  uint32_t lat_size, bw_size;
  bool rows[NROWS];
  bool lat, bw, gbits, json;
  enum pp_verbs_progress progress;
  uint64_t lat_interval_ns; /* engine latency rows: pause between round trips (0: none) */
  uint32_t ring_slots;      /* ring rows: slots per channel; 0 = auto (ring_slots_for) */
  uint32_t ring_batch;      /* ring rows: ring.credit_batch; 0 = auto (ring_batch_for) */
};

/* One measurement: a row, a test, a size. */
struct result {
  enum row row;
  bool is_lat;
  uint32_t size, iters;
  bool ok;
  struct pp_hist_summary lat; /* ns, already halved where the row reports half a round trip */
  double bw_bytes_s, msg_rate;
  char note[1200];
};

struct results {
  struct result *r;
  uint32_t n, cap;
};

static struct result *add_result(struct results *rs, enum row row, bool is_lat, uint32_t size)
{
  if (rs->n == rs->cap) {
    uint32_t cap = rs->cap ? 2 * rs->cap : 32;
    struct result *x = realloc(rs->r, cap * sizeof(*x));
    if (!x)
      return NULL;
    rs->r = x;
    rs->cap = cap;
  }
  struct result *r = &rs->r[rs->n++];
  *r = (struct result){.row = row, .is_lat = is_lat, .size = size};
  return r;
}

/* The sizes a test runs. */
static uint32_t sizes_of(const struct opts *o, bool lat, uint32_t *out)
{
  if (o->nsizes) {
    memcpy(out, o->sizes, o->nsizes * sizeof(*out));
    return o->nsizes;
  }
  out[0] = lat ? o->lat_size : o->bw_size;
  return 1;
}

/* ---------------------------------------------------------------- raw verbs */

/* One process's end: a buffer of two halves, `in` (the peer writes and sends into it) and `out`
 * (the source of this side's writes and sends, and of the peer's reads). */
struct raw_ep {
  struct vnic *nic;
  struct pp_mr mr;
  uint8_t *buf;
  size_t half;
  uint32_t qpn, psn;
  uint32_t rposted; /* receives posted */
};

struct raw_wire {
  uint8_t addr[BOOT_ADDR_BYTES];
  uint32_t qpn, psn, rkey;
  uint64_t in, out;
};

#define RAW_DEPTH 128u    /* bandwidth: operations outstanding */
#define RAW_RECVS 16u     /* receives kept posted between steps */
#define RAW_RD_ATOMIC 16u /* READs outstanding */

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

static int sync_peer(int sock)
{
  char a = 's', b;
  return xfer(sock, &a, &b, 1);
}

static int raw_setup(struct raw_ep *e, const struct vnic_config *nc, uint32_t me, size_t half,
                     int sock, struct raw_wire *peer, char *err, size_t errlen)
{
  if (vnic_open(nc, 2, &e->nic, err, errlen) != PP_OK)
    return -1;
  e->half = (half + 4095) / 4096 * 4096;
  e->buf = aligned_alloc(4096, 2 * e->half);
  unsigned acc = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ;
  if (!e->buf || vnic_ops.reg_mr(e->nic, e->buf, 2 * e->half, acc, &e->mr)) {
    snprintf(err, errlen, "raw: memory registration of %zu bytes failed", 2 * e->half);
    return -1;
  }
  memset(e->buf, 0, 2 * e->half);
  struct pp_qp_init_attr ia = {.max_send_wr = RAW_DEPTH, .max_recv_wr = 2 * RAW_DEPTH,
                               .max_send_sge = 1, .max_recv_sge = 1, .peer = 1 - me};
  if (vnic_ops.create_qp(e->nic, &ia, &e->qpn) || pp_rc_qp_init(e->nic, e->qpn, acc)) {
    snprintf(err, errlen, "raw: QP creation failed");
    return -1;
  }
  e->psn = 1000 + me;
  struct vnic_addr a;
  vnic_local_addr(e->nic, &a);
  struct boot_buf b = {0};
  boot_put_addr(&b, &a);
  struct raw_wire mine = {.qpn = e->qpn, .psn = e->psn, .rkey = e->mr.rkey,
                          .in = (uint64_t)(uintptr_t)e->buf,
                          .out = (uint64_t)(uintptr_t)(e->buf + e->half)};
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
  struct pp_rc_attrs ra = {.mtu = PP_MTU_4096, .dest_qpn = peer->qpn, .rq_psn = peer->psn,
                           .sq_psn = e->psn, .max_dest_rd_atomic = RAW_RD_ATOMIC,
                           .max_rd_atomic = RAW_RD_ATOMIC, .min_rnr_timer = 1, .timeout = 14,
                           .retry_cnt = 7, .rnr_retry = 7};
  if (pp_rc_qp_connect(e->nic, e->qpn, &ra)) {
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

static int post_recv(struct raw_ep *e)
{
  struct pp_recv_wr w = {.wr_id = 7, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)e->buf,
                                      .length = (uint32_t)e->half, .lkey = e->mr.lkey}}};
  if (vnic_ops.post_recv(e->nic, e->qpn, &w))
    return -1;
  e->rposted++;
  return 0;
}

/* SEND and WRITE go from `out` (WRITE: to the peer's `in`); READ from the peer's `out` into
 * `in`. Signalled. PP_AGAIN when the send queue is full. */
static int post_op(struct raw_ep *e, enum pp_wr_opcode op, uint32_t len, const struct raw_wire *peer)
{
  bool rd = op == PP_WR_RDMA_READ;
  uint8_t *local = rd ? e->buf : e->buf + e->half;
  struct pp_send_wr w = {.wr_id = 1, .opcode = op, .send_flags = PP_SEND_SIGNALED, .num_sge = 1,
                         .sg_list = {{.addr = (uint64_t)(uintptr_t)local, .length = len,
                                      .lkey = e->mr.lkey}},
                         .remote_addr = rd ? peer->out : peer->in, .rkey = peer->rkey};
  return vnic_ops.post_send(e->nic, e->qpn, &w);
}

/* Polls the CQ once: receive and send completions counted; -1 on an error completion. */
static int reap(struct raw_ep *e, uint32_t *recvs, uint32_t *sends)
{
  struct pp_wc wc[32];
  int n = vnic_poll_cq(e->nic, wc, 32);
  for (int i = 0; i < n; i++) {
    if (wc[i].status != PP_WC_SUCCESS)
      return -1;
    if (wc[i].opcode >= PP_WC_OP_RECV) {
      (*recvs)++;
      e->rposted--;
    } else {
      (*sends)++;
    }
  }
  return n < 0 ? -1 : 0;
}

#define RAW_STEP_NS 60000000000ull /* one step (row, test, size) at most this long */

/* Until `want` receives arrived: -1 on an error or after the step's bound. */
static int wait_recvs(struct raw_ep *e, uint32_t want, uint32_t *got, uint64_t dl)
{
  uint32_t sends = 0;
  while (*got < want)
    if (reap(e, got, &sends) || boot_now_ns() > dl)
      return -1;
  return 0;
}

/* The end of a step: every send completed, the receives topped up. */
static int settle(struct raw_ep *e, uint64_t dl)
{
  uint32_t r = 0, s = 0;
  while (vnic_sends_outstanding(e->nic))
    if (reap(e, &r, &s) || boot_now_ns() > dl)
      return -1;
  while (e->rposted < RAW_RECVS)
    if (post_recv(e))
      return -1;
  return 0;
}

/* raw_rget: one round trip of an RGET ping-pong without the engine: each side in turn SENDs 64 B
 * (the RTS); the other, once it arrived, READs `size` bytes from the sender's buffer and, once
 * the READ completed, SENDs its own (no FIN). *sends counts every send-queue completion; a
 * READ is done when all that was posted completed (RC completes a send queue in order). */
static int raw_rget_hop(struct raw_ep *e, uint32_t me, uint32_t size, const struct raw_wire *peer,
                        uint32_t *recvs, uint32_t *sends, uint32_t *posted, uint64_t dl)
{
  for (int turn = 0; turn < 2; turn++) {
    if ((turn == 0) == (me == 0)) {
      if (post_op(e, PP_WR_SEND, size < 64 ? size : 64, peer))
        return -1;
      ++*posted;
      continue;
    }
    uint32_t want = *recvs + 1;
    while (*recvs < want)
      if (reap(e, recvs, sends) || boot_now_ns() > dl)
        return -1;
    if (post_recv(e) || post_op(e, PP_WR_RDMA_READ, size, peer))
      return -1;
    ++*posted;
    while (*sends < *posted)
      if (reap(e, recvs, sends) || boot_now_ns() > dl)
        return -1;
  }
  return 0;
}

/* Latency, one side; the client (me 0) records into h: half a round trip (SEND and WRITE
 * ping-pong, raw_rget) or one READ. */
static int raw_lat(struct raw_ep *e, uint32_t me, enum row row, uint32_t size, uint32_t iters,
                   const struct raw_wire *peer, struct pp_hist *h)
{
  uint64_t dl = boot_now_ns() + RAW_STEP_NS;
  volatile uint8_t *in_last = e->buf + size - 1;
  uint8_t *out_last = e->buf + e->half + size - 1;
  uint32_t recvs = 0, sends = 0, posted = 0; /* posted: raw_rget's signalled WRs */
  for (uint32_t i = 0; i < iters; i++) {
    uint8_t seq = (uint8_t)(i % 250 + 1);
    uint64_t t = boot_now_ns();
    if (row == ROW_RAW_RGET) {
      if (raw_rget_hop(e, me, size, peer, &recvs, &sends, &posted, dl))
        return -1;
      if (me == 0)
        pp_hist_record(h, (boot_now_ns() - t) / 2);
      continue;
    }
    if (row == ROW_RAW_READ) {
      if (me == 0) {
        uint32_t want = sends + 1;
        if (post_op(e, PP_WR_RDMA_READ, size, peer))
          return -1;
        while (sends < want)
          if (reap(e, &recvs, &sends) || boot_now_ns() > dl)
            return -1;
        pp_hist_record(h, boot_now_ns() - t);
      }
      continue;
    }
    enum pp_wr_opcode op = row == ROW_RAW_SEND ? PP_WR_SEND : PP_WR_RDMA_WRITE;
    for (int turn = 0; turn < 2; turn++) {
      if ((turn == 0) == (me == 0)) { /* the client sends first, the server answers */
        *out_last = seq;
        if (post_op(e, op, size, peer))
          return -1;
      } else if (op == PP_WR_SEND) {
        if (wait_recvs(e, recvs + 1, &recvs, dl) || post_recv(e))
          return -1;
      } else {
        while (*in_last != seq) /* the last byte of a WRITE lands last (rxe, like perftest) */
          if (reap(e, &recvs, &sends) || boot_now_ns() > dl)
            return -1;
      }
    }
    if (me == 0)
      pp_hist_record(h, (boot_now_ns() - t) / 2);
  }
  return 0;
}

/* Bandwidth: the client streams 2 x iters operations, RAW_DEPTH outstanding; the server
 * receives (SEND). The client's bytes per second of wall time, from the first post to the last
 * completion. */
static int raw_bw(struct raw_ep *e, uint32_t me, enum row row, uint32_t size, uint32_t n,
                  const struct raw_wire *peer, double *bytes_s)
{
  uint64_t dl = boot_now_ns() + RAW_STEP_NS;
  uint32_t recvs = 0, sends = 0, posted = 0;
  enum pp_wr_opcode op = row == ROW_RAW_SEND    ? PP_WR_SEND
                         : row == ROW_RAW_WRITE ? PP_WR_RDMA_WRITE
                                                : PP_WR_RDMA_READ;
  if (me == 1) {
    if (op != PP_WR_SEND)
      return 0;
    while (e->rposted < RAW_DEPTH)
      if (post_recv(e))
        return -1;
    while (recvs < n) {
      uint32_t before = recvs;
      if (reap(e, &recvs, &sends) || boot_now_ns() > dl)
        return -1;
      for (uint32_t k = before; k < recvs; k++)
        if (post_recv(e))
          return -1;
    }
    return 0;
  }
  uint64_t t0 = boot_now_ns();
  while (sends < n) {
    while (posted < n && posted - sends < RAW_DEPTH) {
      int s = post_op(e, op, size, peer);
      if (s == PP_AGAIN)
        break;
      if (s)
        return -1;
      posted++;
    }
    if (reap(e, &recvs, &sends) || boot_now_ns() > dl)
      return -1;
  }
  *bytes_s = (double)n * size / ((boot_now_ns() - t0) / 1e9);
  return 0;
}

/* One side of every raw step, in the same order on both; the client (me 0) adds the results. */
static int raw_side(const struct opts *o, uint32_t me, int sock, struct results *rs, char *err,
                    size_t errlen)
{
  struct raw_ep e = {0};
  struct raw_wire peer;
  uint32_t sz[MAX_SIZES], maxsz = 1;
  for (int lat = 1; lat >= 0; lat--)
    for (uint32_t k = 0, n = sizes_of(o, lat, sz); k < n; k++)
      maxsz = sz[k] > maxsz ? sz[k] : maxsz;
  struct pp_hist *h = malloc(sizeof(*h));
  int rc = -1;
  if (!h || raw_setup(&e, &o->nic, me, maxsz, sock, &peer, err, errlen) ||
      settle(&e, boot_now_ns() + RAW_STEP_NS))
    goto out;
  for (int lat = 1; lat >= 0; lat--) {
    if (lat ? !o->lat : !o->bw)
      continue;
    uint32_t n = sizes_of(o, lat, sz);
    for (int row = 0; row < NROWS; row++) {
      if (!row_raw[row] || !o->rows[row] || (!lat && row == ROW_RAW_RGET)) /* latency only */
        continue;
      for (uint32_t k = 0; k < n; k++) {
        memset(e.buf, 0, 2 * e.half);
        if (sync_peer(sock))
          goto lost;
        pp_hist_reset(h);
        double bps = 0;
        uint32_t iters = lat ? o->iters : 2 * o->iters;
        int s = lat ? raw_lat(&e, me, (enum row)row, sz[k], iters, &peer, h)
                    : raw_bw(&e, me, (enum row)row, sz[k], iters, &peer, &bps);
        if (s || settle(&e, boot_now_ns() + RAW_STEP_NS)) {
          snprintf(err, errlen, "raw: %s %s at %u B: a work request failed or timed out",
                   row_names[row], lat ? "latency" : "bandwidth", sz[k]);
          goto out;
        }
        if (sync_peer(sock))
          goto lost;
        if (me != 0)
          continue;
        struct result *r = add_result(rs, (enum row)row, lat, sz[k]);
        if (!r) {
          snprintf(err, errlen, "out of memory");
          goto out;
        }
        r->iters = iters;
        r->ok = true;
        if (lat) {
          pp_hist_summarize(h, &r->lat);
          snprintf(r->note, sizeof(r->note), "%s", row == ROW_RAW_READ
                                                       ? "one RDMA READ (ib_read_lat)"
                                                   : row == ROW_RAW_RGET
                                                       ? "64 B SEND + READ ping-pong, half (the "
                                                         "rget row's work requests, no engine)"
                                                   : row == ROW_RAW_SEND
                                                       ? "SEND ping-pong, half (ib_send_lat)"
                                                       : "WRITE ping-pong, half (ib_write_lat)");
        } else {
          r->bw_bytes_s = bps;
          r->msg_rate = bps / sz[k];
          snprintf(r->note, sizeof(r->note), "%u outstanding (ib_%s_bw)", RAW_DEPTH,
                   row == ROW_RAW_SEND ? "send" : row == ROW_RAW_WRITE ? "write" : "read");
        }
      }
    }
  }
  rc = 0;
  goto out;
lost:
  snprintf(err, errlen, "raw: lost the peer process");
out:
  free(h);
  raw_close(&e);
  return rc;
}

static int raw_bench(const struct opts *o, struct results *rs, char *err, size_t errlen)
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
    int rc = raw_side(o, 1, sv[1], NULL, e2, sizeof(e2));
    if (rc)
      fprintf(stderr, "prepost bench: server: %s\n", e2);
    _exit(rc ? 1 : 0);
  }
  close(sv[1]);
  int rc = raw_side(o, 0, sv[0], rs, err, errlen);
  close(sv[0]);
  int st;
  if (rc)
    kill(p, SIGKILL);
  waitpid(p, &st, 0);
  return rc;
}

/* ---------------------------------------------------------------- engine paths */

static int engine_run(const struct opts *o, struct pp_sim_config *sc, struct pp_run_result *res,
                      char *err, size_t errlen)
{
  struct pp_verbs_opts vo;
  pp_verbs_opts_default(&vo);
  vo.nic = o->nic;
  vo.progress = o->progress;
  vo.launch = PP_VERBS_LAUNCH_FORK; /* both ranks here, whoever started this process */
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

/* Which p2p paths the messages of a run took ("; eager 2000", "; rndv-get 2000"...), or "". */
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

/* --ring-slots auto: a latency row keeps the protocol's default ring (one message is in flight);
 * a bandwidth row gets a ring that holds two messages, so that the sender can fill one while
 * the receiver drains the other: with the default 8 x 128 KiB a 4 MiB message spans 32 slots,
 * and the sender waited for credit 99.5 % of a 4 MiB run on rxe. */
/* --ring-credit-batch auto: a latency row returns credit for half its slots at a time (the
 * other half keeps the sender going, and the idle bound returns a partial batch), so a
 * ping-pong posts one credit write per slots/2 messages instead of one behind every reply: in
 * the emulated guest's rxe the second of two WQEs posted back to back reached the peer about a
 * round trip after the first (backends/verbs/README.md, "Where the latency goes"). A bandwidth
 * row keeps the protocol's default. Never more than the ring's slots. */
#define RING_LAT_CREDIT_IDLE_NS 1000000ull
static uint32_t ring_batch_for(const struct opts *o, bool lat, uint32_t slots)
{
  uint32_t b = o->ring_batch ? o->ring_batch : lat ? slots / 2 : 0;
  return b > slots ? slots : b;
}

static uint32_t ring_slots_for(const struct opts *o, bool lat, uint32_t size, uint32_t slot_size)
{
  if (o->ring_slots)
    return o->ring_slots;
  if (lat)
    return PP_RING_DEFAULT_SLOTS;
  uint64_t two = ((uint64_t)size * 2 + slot_size - 1) / slot_size;
  return two < PP_RING_DEFAULT_SLOTS ? PP_RING_DEFAULT_SLOTS
         : two > PP_RING_MAX_SLOTS   ? PP_RING_MAX_SLOTS
                                     : (uint32_t)two;
}

/* The scenario of an engine row: latency, rank 0 <-> rank 1 round trips (the pingpong workload);
 * bandwidth, rank 0 streams to rank 1 back to back (the stream workload). */
static void engine_cfg(const struct opts *o, enum row row, bool lat, uint32_t size,
                       struct pp_scenario *sc)
{
  pp_scenario_defaults(sc);
  snprintf(sc->sim.name, sizeof(sc->sim.name), "bench-%s-%s-%u", row_names[row],
           lat ? "lat" : "bw", size);
  struct pp_engine_cfg *c = &sc->sim.engine;
  pp_engine_cfg_protocol(c, pp_protocol_name(row == ROW_EAGER          ? PP_PROTO_EAGER
                                              : row == ROW_RING_CREDITS ? PP_PROTO_RING_CREDITS
                                              : row == ROW_RING_CTS     ? PP_PROTO_RING_CTS
                                                                        : PP_PROTO_RNDV));
  if (row == ROW_EAGER)
    pp_p2p_params_of(c)->eager_limit = size; /* every message eager, however large (the check bounds it) */
  if (row == ROW_RGET && size > pp_p2p_params_of(c)->rget_limit)
    pp_p2p_params_of(c)->rget_limit = size;
  if (row == ROW_RPUT)
    pp_p2p_params_of(c)->rget_limit = 0;
  if (row == ROW_RING_CREDITS || row == ROW_RING_CTS) {
    struct pp_ring_params *rp = pp_ring_params_of(c);
    rp->slots = ring_slots_for(o, lat, size, rp->slot_size);
    uint32_t batch = ring_batch_for(o, lat, rp->slots);
    if (batch > 1) {
      rp->credit_batch = batch;
      rp->credit_idle_ns = RING_LAT_CREDIT_IDLE_NS;
    }
  }
  c->qp.sq_depth = lat ? 16 : 64;
  c->qp.rq_depth = lat ? 64 : 256;
  c->qp.min_rnr_timer = 1;
  if (lat && pp_engine_cfg_workload(c, PP_WORKLOAD_PINGPONG) != PP_OK)
    c->workload.kind = PP_WORKLOAD_COUNT; /* not in this build: the check skips the row, said */
  c->workload.messages = lat ? o->iters : 2 * o->iters;
  c->workload.warmup = 0; /* the raw rows have none either */
  c->workload.size = size;
  /* latency: half of each round trip, back to back unless --lat-interval asks for a pause */
  c->workload.interval_ns = lat ? o->lat_interval_ns : 0;
}

static void engine_bench(const struct opts *o, enum row row, bool lat, uint32_t size,
                         struct result *r)
{
  static struct pp_scenario sc;
  char err[1024], paths[128];
  engine_cfg(o, row, lat, size, &sc);
  r->iters = sc.sim.engine.workload.messages;
  struct pp_run_result res;
  if (pp_engine_cfg_check(&sc.sim.engine, err, sizeof(err)) != PP_OK) {
    snprintf(r->note, sizeof(r->note), "skipped: %s", err);
    return;
  }
  if (engine_run(o, &sc.sim, &res, err, sizeof(err))) {
    snprintf(r->note, sizeof(r->note), "failed: %s", err);
    return;
  }
  p2p_paths(&res, paths, sizeof(paths));
  if (row == ROW_RING_CREDITS || row == ROW_RING_CTS) {
    const struct pp_ring_params *rp = pp_ring_params_of(&sc.sim.engine);
    size_t at = strlen(paths);
    snprintf(paths + at, sizeof(paths) - at, "; ring %u x %u KiB, credit batch %u%s", rp->slots,
             rp->slot_size / 1024, rp->credit_batch, rp->credit_batch > 1 ? " (idle 1 ms)" : "");
  }
  r->ok = true;
  if (lat) {
    /* the pingpong workload records half of each round trip already */
    r->lat = res.latency;
    if (o->lat_interval_ns)
      snprintf(r->note, sizeof(r->note), "ping-pong, half a round trip, %.0f us between%s",
               o->lat_interval_ns / 1e3, paths);
    else
      snprintf(r->note, sizeof(r->note), "ping-pong, half a round trip, back to back%s", paths);
  } else {
    uint64_t bytes = 0, rnr = 0;
    bool have_rnr = true;
    for (uint32_t i = 0; i < res.nranks; i++) {
      bytes += res.ranks[i].stats.bytes_received;
      rnr += res.ranks[i].nic.rnr_naks_received;
      have_rnr = have_rnr && pp_nic_counter_have(&res.ranks[i].nic, PP_NIC_CNT_rnr_naks_received);
    }
    r->bw_bytes_s = (double)bytes / (res.sim_time_ns / 1e9);
    r->msg_rate = r->bw_bytes_s / size;
    if (have_rnr)
      snprintf(r->note, sizeof(r->note), "back to back, %" PRIu64 " RNR NAKs%s", rnr, paths);
    else
      snprintf(r->note, sizeof(r->note), "back to back, RNR NAKs: counter not available%s",
               paths);
  }
  pp_run_result_free(&res);
}

/* ---------------------------------------------------------------- output */

static double bw_value(const struct opts *o, const struct result *r)
{
  return o->gbits ? r->bw_bytes_s * 8 / 1e9 : r->bw_bytes_s / 1048576.0;
}

static void json_str(const char *s)
{
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", (unsigned char)*s);
    else
      putchar(*s);
  }
  putchar('"');
}

static void print_json(const struct opts *o, const struct results *rs, const char *dev, int gidx,
                       uint32_t mtu)
{
  printf("{\"backend\": \"verbs\", \"device\": ");
  json_str(dev);
  printf(", \"gid_index\": %d, \"active_mtu\": %u, \"iters\": %u, \"progress\": \"%s\", "
         "\"lat_unit\": \"usec\", \"bw_unit\": \"%s\", \"results\": [",
         gidx, mtu, o->iters, pp_verbs_progress_name(o->progress), o->gbits ? "Gb/sec" : "MB/sec");
  for (uint32_t i = 0; i < rs->n; i++) {
    const struct result *r = &rs->r[i];
    printf("%s{\"path\": \"%s_%s\", \"row\": \"%s\", \"test\": \"%s\", \"size\": %u, "
           "\"iters\": %u, \"unit\": \"%s\", ",
           i ? ", " : "", row_names[r->row], r->is_lat ? "lat" : "bw", row_names[r->row],
           r->is_lat ? "lat" : "bw", r->size, r->iters,
           r->is_lat ? "usec" : o->gbits ? "Gb/sec" : "MB/sec");
    if (!r->ok)
      printf("\"value\": null, ");
    else if (r->is_lat)
      printf("\"value\": %.3f, \"t_min\": %.3f, \"t_typical\": %.3f, \"t_avg\": %.3f, "
             "\"t_max\": %.3f, \"p99\": %.3f, \"p99_9\": %.3f, \"samples\": %" PRIu64 ", ",
             r->lat.p50 / 1e3, r->lat.min / 1e3, r->lat.p50 / 1e3, r->lat.mean / 1e3,
             r->lat.max / 1e3, r->lat.p99 / 1e3, r->lat.p999 / 1e3, r->lat.count);
    else
      printf("\"value\": %.6f, \"bw_average\": %.6f, \"msg_rate_mpps\": %.6f, ",
             bw_value(o, r), bw_value(o, r), r->msg_rate / 1e6);
    printf("\"note\": ");
    json_str(r->note);
    printf("}");
  }
  printf("]}\n");
}

/* perftest's columns, one block per row and test. */
static void print_table(const struct opts *o, const struct results *rs, const char *dev, int gidx,
                        uint32_t mtu)
{
  printf("prepost bench on %s (GID index %d, MTU %u), progress %s\n", dev, gidx, mtu,
         pp_verbs_progress_name(o->progress));
  for (uint32_t i = 0; i < rs->n; i++) {
    const struct result *r = &rs->r[i];
    bool head = i == 0 || rs->r[i - 1].row != r->row || rs->r[i - 1].is_lat != r->is_lat;
    if (head) {
      printf("\n %s %s\n", row_names[r->row], r->is_lat ? "latency" : "bandwidth");
      if (r->is_lat)
        printf(" %-8s %-11s %11s %11s %15s %11s %15s %17s\n", "#bytes", "#iterations",
               "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]",
               "99% percentile", "99.9% percentile");
      else
        printf(" %-8s %-11s %20s %14s\n", "#bytes", "#iterations",
               o->gbits ? "BW average[Gb/sec]" : "BW average[MB/sec]", "MsgRate[Mpps]");
    }
    if (!r->ok)
      printf(" %-8u %-11u %s\n", r->size, r->iters, r->note);
    else if (r->is_lat)
      printf(" %-8u %-11u %11.2f %11.2f %15.2f %11.2f %15.2f %17.2f  %s\n", r->size, r->iters,
             r->lat.min / 1e3, r->lat.max / 1e3, r->lat.p50 / 1e3, r->lat.mean / 1e3,
             r->lat.p99 / 1e3, r->lat.p999 / 1e3, r->note);
    else
      printf(" %-8u %-11u %20.2f %14.6f  %s\n", r->size, r->iters, bw_value(o, r),
             r->msg_rate / 1e6, r->note);
  }
}

/* ---------------------------------------------------------------- command line */

/* "64,4KiB,1MiB": up to MAX_SIZES sizes of 1..MAX_SIZE bytes, each through the one size parser
 * (pp_parse_size). 0, or -1 with why set. */
static int parse_sizes(const char *s, struct opts *o, char *why, size_t whylen)
{
  char buf[512];
  if (strlen(s) >= sizeof(buf)) {
    snprintf(why, whylen, "is too long");
    return -1;
  }
  snprintf(buf, sizeof(buf), "%s", s);
  o->nsizes = 0;
  char *save;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    uint64_t v;
    if (o->nsizes >= MAX_SIZES) {
      snprintf(why, whylen, "takes at most %u sizes", MAX_SIZES);
      return -1;
    }
    char w[160];
    if (pp_parse_size(t, strlen(t), 1, MAX_SIZE, &v, w, sizeof(w)) != PP_OK) {
      snprintf(why, whylen, "%s, got '%s'", w, t);
      return -1;
    }
    o->sizes[o->nsizes++] = (uint32_t)v;
  }
  if (!o->nsizes)
    snprintf(why, whylen, "wants a comma-separated list of sizes");
  return o->nsizes ? 0 : -1;
}

static int parse_rows(const char *s, struct opts *o)
{
  char buf[512];
  if (strlen(s) >= sizeof(buf))
    return -1;
  snprintf(buf, sizeof(buf), "%s", s);
  memset(o->rows, 0, sizeof(o->rows));
  char *save;
  int n = 0;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
    int k = 0;
    while (k < NROWS && strcmp(t, row_names[k]))
      k++;
    if (k == NROWS)
      return -1;
    o->rows[k] = true;
  }
  return n ? 0 : -1;
}

int pp_verbs_bench_main(int argc, char **argv)
{
  struct opts o = {.iters = 1000, .lat_size = 64, .bw_size = 65536, .lat = true, .bw = true,
                   .lat_interval_ns = 0};
  for (int k = 0; k < NROWS; k++)
    o.rows[k] = true;
  o.nic.gid_index = -1;
  enum { B_BACKEND = 256, B_PROGRESS, B_DEVICE, B_GID, B_ITERS, B_LAT, B_BW, B_JSON, B_BUSY,
         B_SIZES, B_ROWS, B_TEST, B_GBITS, B_LAT_INTERVAL, B_RING_SLOTS, B_RING_BATCH };
  static const struct option opts[] = {{"backend", required_argument, NULL, B_BACKEND},
                                       {"progress", required_argument, NULL, B_PROGRESS},
                                       {"device", required_argument, NULL, B_DEVICE},
                                       {"gid-index", required_argument, NULL, B_GID},
                                       {"iters", required_argument, NULL, B_ITERS},
                                       {"lat-size", required_argument, NULL, B_LAT},
                                       {"bw-size", required_argument, NULL, B_BW},
                                       {"json", no_argument, NULL, B_JSON},
                                       {"busy-poll", no_argument, NULL, B_BUSY},
                                       {"all", no_argument, NULL, 'a'},
                                       {"sizes", required_argument, NULL, B_SIZES},
                                       {"rows", required_argument, NULL, B_ROWS},
                                       {"test", required_argument, NULL, B_TEST},
                                       {"report_gbits", no_argument, NULL, B_GBITS},
                                       {"lat-interval", required_argument, NULL, B_LAT_INTERVAL},
                                       {"ring-slots", required_argument, NULL, B_RING_SLOTS},
                                       {"ring-credit-batch", required_argument, NULL, B_RING_BATCH},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ha", .longs = opts,
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
    case B_GBITS:
      o.gbits = true;
      break;
    case 'a':
      o.nsizes = 0;
      for (uint32_t v = 2; v <= MAX_SIZE; v *= 2)
        o.sizes[o.nsizes++] = v;
      break;
    case B_SIZES: {
      char why[200];
      if (parse_sizes(g.arg, &o, why, sizeof(why)))
        return pp_cli_opt_error(&g, "%s", why);
      break;
    }
    case B_ROWS:
      if (parse_rows(g.arg, &o))
        return pp_cli_opt_error(&g, "must name rows among raw_send, raw_write, raw_read, raw_rget, eager, "
                                    "rget, rput, ring-credits, ring-cts, got '%s'", g.arg);
      break;
    case B_TEST:
      if (strcmp(g.arg, "lat") && strcmp(g.arg, "bw") && strcmp(g.arg, "both"))
        return pp_cli_opt_error(&g, "must be lat, bw or both, got '%s'", g.arg);
      o.lat = strcmp(g.arg, "bw") != 0;
      o.bw = strcmp(g.arg, "lat") != 0;
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
      if (pp_cli_opt_size(&g, 1, MAX_SIZE, &x))
        return 2;
      o.lat_size = (uint32_t)x;
      break;
    case B_BW:
      if (pp_cli_opt_size(&g, 1, MAX_SIZE, &x))
        return 2;
      o.bw_size = (uint32_t)x;
      break;
    case B_LAT_INTERVAL:
      if (pp_cli_opt_duration(&g, 0, 10000000000ull, &o.lat_interval_ns))
        return 2;
      break;
    case B_RING_SLOTS:
      if (!strcmp(g.arg, "auto"))
        o.ring_slots = 0;
      else if (pp_cli_opt_uint(&g, 1, PP_RING_MAX_SLOTS, &x))
        return 2;
      else
        o.ring_slots = (uint32_t)x;
      break;
    case B_RING_BATCH:
      if (!strcmp(g.arg, "auto"))
        o.ring_batch = 0;
      else if (pp_cli_opt_uint(&g, 1, PP_RING_MAX_SLOTS, &x))
        return 2;
      else
        o.ring_batch = (uint32_t)x;
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
  struct results rs = {0};
  bool any_raw = false;
  for (int k = 0; k < NROWS; k++)
    any_raw = any_raw || (row_raw[k] && o.rows[k]);
  if (any_raw) {
    fprintf(stderr, "prepost bench: raw verbs on %s...\n", dev);
    if (raw_bench(&o, &rs, err, sizeof(err))) {
      fprintf(stderr, "prepost: bench: %s\n", err);
      free(rs.r);
      return PP_EXIT_BACKEND;
    }
  }
  uint32_t sz[MAX_SIZES];
  for (int lat = 1; lat >= 0; lat--) {
    if (lat ? !o.lat : !o.bw)
      continue;
    uint32_t n = sizes_of(&o, lat, sz);
    for (int row = 0; row < NROWS; row++) {
      if (row_raw[row] || !o.rows[row])
        continue;
      for (uint32_t k = 0; k < n; k++) {
        fprintf(stderr, "prepost bench: %s %s, %u B...\n", row_names[row],
                lat ? "latency" : "bandwidth", sz[k]);
        struct result *r = add_result(&rs, (enum row)row, lat, sz[k]);
        if (!r) {
          fprintf(stderr, "prepost: bench: out of memory\n");
          free(rs.r);
          return PP_EXIT_BACKEND;
        }
        engine_bench(&o, (enum row)row, lat, sz[k], r);
      }
    }
  }
  /* latency blocks first, then bandwidth, rows in their order */
  if (o.json)
    print_json(&o, &rs, dev, gidx, mtu);
  else
    print_table(&o, &rs, dev, gidx, mtu);
  free(rs.r);
  return 0;
}
