/*
 * engine/proto/ring/ring.c: the ring FIFO protocols (ring-credits, ring-cts).
 *
 * Most tests run engines over tests/fakefabric.c, a fake RC fabric that moves real bytes and
 * counts RNRs (a WRITE_WITH_IMM finding no receive WQE) and remote access errors. Protocol-level
 * tests replace the workload by a probe that calls the protocol's send/recv directly and records
 * what it reports. The property tests run many seeds, slot counts, slot and message sizes,
 * channel counts and credit policies, first over the fake fabric with an adversarial scheduler,
 * then over SimGrid (each simulation in a child process: one simulation per process), with
 * rnr_retry 0: any RNR would be a fatal error completion there.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prepost/engine.h"
#include "engine/core/engine_impl.h"
#include "prepost/trace.h"
#include "fakefabric.h"
#include "probe.h"

/* scenario.h's opening comment trips -Wcomment (see tools/scenario/scenario.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

static struct ff F;
static char what[256]; /* the configuration under test, for failure messages */

static void fini(void)
{
  if (F.n)
    ff_fini(&F);
  memset(&F, 0, sizeof(F));
}

TestSuite(ring, .fini = fini);

/* A pair (or ring) of ranks streaming messages over a ring protocol, rnr_retry 0. */
static struct pp_engine_cfg cfg_of(enum pp_protocol proto, uint32_t nranks, uint32_t messages,
                                   uint32_t size)
{
  struct pp_engine_cfg c = {
      .nranks = nranks,
      .protocol = proto,
      .qp = {.min_rnr_timer = 1,
             .rnr_retry = 0,
             .timeout = 14,
             .retry_cnt = 7,
             .max_rd_atomic = 1,
             .mtu = 4096,
             .sq_depth = 16,
             .rq_depth = 8},
      .workload = {.kind = PP_WORKLOAD_STREAM,
                   .pattern = nranks == 2 ? PP_PATTERN_PAIR : PP_PATTERN_RING,
                   .messages = messages,
                   .size = size},
      .seed = 1,
  };
  pp_ring_params_default(pp_ring_params_of(&c));
  pp_ring_params_of(&c)->slots = 4;
  pp_ring_params_of(&c)->slot_size = 1024;
  pp_coll_params_default(pp_coll_params_of(&c));
  return c;
}

static uint64_t total_violations(void)
{
  uint64_t v = 0;
  for (uint32_t r = 0; r < F.n; r++) {
    struct pp_rank_stats st;
    pp_engine_stats(F.e[r], &st);
    v += st.ring.violations;
  }
  return v;
}

static void stats(uint32_t rank, struct pp_rank_stats *st)
{
  pp_engine_stats(F.e[rank], st);
}

/* Every rank done, nothing bad counted, every message intact. */
static void expect_clean_stream(const struct pp_engine_cfg *c)
{
  cr_assert(ff_all_done(&F), "%s: not every rank is done after %llu steps", what,
            (unsigned long long)F.steps);
  cr_assert_eq(F.rnr, 0, "%s: %llu RNRs", what, (unsigned long long)F.rnr);
  cr_assert_eq(F.access_errors, 0, "%s", what);
  cr_assert_eq(F.engine_errors, 0, "%s: engine error %s", what, pp_status_name(F.last_error));
  cr_assert_eq(total_violations(), 0, "%s", what);
  for (uint32_t r = 0; r < F.n; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    cr_assert_eq(st.corrupt, 0, "rank %u", r);
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
      cr_assert_eq(st.status_counts[k], 0, "rank %u: %s", r,
                   pp_wc_status_name((enum pp_wc_status)k));
    if (pp_workload_source(&c->workload, r, c->nranks) >= 0) {
      cr_assert_eq(st.messages_received, c->workload.messages, "rank %u", r);
      cr_assert_eq(st.bytes_received, (uint64_t)c->workload.messages * c->workload.size);
    }
    if (pp_workload_dest(&c->workload, r, c->nranks) >= 0)
      cr_assert_eq(st.messages_sent, c->workload.messages, "rank %u", r);
  }
}

/* ================================================================ the probe workload */

/* tests/probe.h: each rank's record of what the protocol reported. */
static struct probe P[FF_MAX_RANKS];

/* Two ranks connected by `proto` with the probe as their workload. */
static void probe_pair(enum pp_protocol proto, uint32_t slots, uint32_t slot_size,
                       uint32_t channels, uint32_t batch, uint64_t idle_ns)
{
  struct pp_engine_cfg c = cfg_of(proto, 2, 1, 64);
  c.workload.kind = PP_WORKLOAD_COLLECTIVE;
  pp_ring_params_of(&c)->slots = slots;
  pp_ring_params_of(&c)->slot_size = slot_size;
  pp_ring_params_of(&c)->channels = channels;
  pp_ring_params_of(&c)->credit_batch = batch;
  pp_ring_params_of(&c)->credit_idle_ns = idle_ns;
  ff_create(&F, &c, 1);
  for (uint32_t r = 0; r < 2; r++)
    probe_install(F.e[r], &P[r]);
  ff_connect_start(&F);
}

/* A registered buffer of rank r (leaked into the fake's MR table until the fabric goes). */
static uint8_t *buffer(uint32_t r, size_t len, struct pp_mr *mr)
{
  static uint8_t *bufs[64];
  static unsigned nbufs;
  uint8_t *b = calloc(1, len);
  cr_assert_not_null(b);
  cr_assert_eq(pp_engine_reg(F.e[r], b, len,
                             PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ,
                             mr),
               PP_OK);
  if (nbufs == 64) {
    free(bufs[0]);
    memmove(bufs, bufs + 1, sizeof(bufs[0]) * 63);
    nbufs--;
  }
  bufs[nbufs++] = b;
  return b;
}

static enum pp_status psend(uint32_t r, uint8_t *buf, uint32_t len, const struct pp_mr *mr,
                            uint64_t cookie)
{
  struct pp_msg m = {.peer = 1 - r, .buf = buf, .len = len, .mr = mr, .cookie = cookie};
  return F.e[r]->proto->send(F.e[r], F.now, &m);
}

static enum pp_status precv(uint32_t r, uint8_t *buf, uint32_t len, const struct pp_mr *mr,
                            uint64_t cookie, uint64_t tag)
{
  struct pp_msg m = {.peer = 1 - r, .buf = buf, .len = len, .mr = mr, .cookie = cookie,
                     .tag = tag};
  return F.e[r]->proto->recv(F.e[r], F.now, &m);
}

/* The data QP of rank r's channel k (the fake creates QPs in order: channel 0, 1, ...). */
static struct ff_qp *chan_qp(uint32_t r, uint32_t k)
{
  struct ff_qp *q = ff_qp_at(&F, r, k);
  cr_assert_not_null(q);
  return q;
}

static const struct pp_send_wr *sq_wr(const struct ff_qp *q, uint32_t i)
{
  return &q->sq[i % q->init.max_send_wr].wr;
}

/* ================================================================ parameters */

Test(ring, params_defaults_and_bounds)
{
  struct pp_ring_params p;
  memset(&p, 0x5a, sizeof(p));
  pp_ring_params_default(&p);
  cr_assert_eq(p.slots, 8);
  cr_assert_eq(p.slot_size, 128 * 1024);
  cr_assert_eq(p.channels, 1);
  cr_assert_eq(p.credit_batch, 1);
  cr_assert_eq(p.credit_idle_ns, 0);
  char err[256] = "";
  cr_assert_eq(pp_ring_params_check(&p, err, sizeof(err)), PP_OK, "%s", err);
  static const struct {
    uint32_t slots, slot_size, channels, batch;
    const char *word;
  } cases[] = {
      {0, 1024, 1, 1, "slots"},          {PP_RING_MAX_SLOTS + 1, 1024, 1, 1, "slots"},
      {8, 0, 1, 1, "slot_size"},         {8, PP_RING_MAX_SLOT_SIZE + 1, 1, 1, "slot_size"},
      {8, 1024, 0, 1, "channels"},       {8, 1024, PP_MAX_CHANNELS + 1, 1, "channels"},
      {8, 1024, 1, 0, "credit_batch"},   {8, 1024, 1, 9, "credit_batch"},
      {4096, 1u << 20, 8, 1, "exceeds"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    pp_ring_params_default(&p);
    p.slots = cases[i].slots;
    p.slot_size = cases[i].slot_size;
    p.channels = cases[i].channels;
    p.credit_batch = cases[i].batch;
    err[0] = '\0';
    cr_assert_eq(pp_ring_params_check(&p, err, sizeof(err)), PP_INVALID, "case %zu", i);
    cr_assert_not_null(strstr(err, cases[i].word), "case %zu: '%s' lacks '%s'", i, err,
                       cases[i].word);
  }
  /* the bounds themselves are fine */
  p = (struct pp_ring_params){.slots = PP_RING_MAX_SLOTS, .slot_size = 512, .channels = 8,
                              .credit_batch = PP_RING_MAX_SLOTS};
  cr_assert_eq(pp_ring_params_check(&p, err, sizeof(err)), PP_OK, "%s", err);
  p = (struct pp_ring_params){.slots = 1, .slot_size = PP_RING_MAX_SLOT_SIZE, .channels = 2,
                              .credit_batch = 1};
  cr_assert_eq(pp_ring_params_check(&p, err, sizeof(err)), PP_OK, "%s", err);
}

Test(ring, engine_cfg_check_applies_ring_params_to_ring_protocols_only)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 2, 1, 64);
  char err[256] = "";
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "%s", err);
  pp_ring_params_of(&c)->slots = 0;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert_not_null(strstr(err, "slots"), "%s", err);
  c.protocol = PP_PROTO_RING_CTS;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  c.protocol = PP_PROTO_NAIVE;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "naive ignores ring: %s", err);
}

Test(ring, trace_what_if_keys)
{
  /* prepost replay --sim --set engine.ring.slots=2 ... */
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CTS, 2, 1, 64);
  char err[256] = "";
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.slots", "2", err, sizeof(err)), PP_OK,
               "%s", err);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.channels", "3", err, sizeof(err)), PP_OK);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.credit_idle_ns", "5000", err, sizeof(err)),
               PP_OK);
  c.workload.kind = PP_WORKLOAD_COLLECTIVE; /* cfg_of holds the collective's defaults */
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.coll.chunk", "4096", err, sizeof(err)), PP_OK);
  cr_assert_eq(pp_ring_params_of(&c)->slots, 2);
  cr_assert_eq(pp_ring_params_of(&c)->channels, 3);
  cr_assert_eq(pp_ring_params_of(&c)->credit_idle_ns, 5000);
  cr_assert_eq(pp_coll_params_of(&c)->chunk, 4096);
}

Test(ring, names)
{
  cr_assert_str_eq(pp_protocol_name(PP_PROTO_RING_CREDITS), "ring-credits");
  cr_assert_str_eq(pp_protocol_name(PP_PROTO_RING_CTS), "ring-cts");
  cr_assert_eq(pp_protocol_from_name("ring-credits"), PP_PROTO_RING_CREDITS);
  cr_assert_eq(pp_protocol_from_name("ring-cts"), PP_PROTO_RING_CTS);
  cr_assert_str_eq(pp_ring_credits_ops.name, "ring-credits");
  cr_assert_str_eq(pp_ring_cts_ops.name, "ring-cts");
  /* const ops tables, every slot filled */
  const struct pp_proto_ops *t[] = {&pp_ring_credits_ops, &pp_ring_cts_ops};
  for (int i = 0; i < 2; i++)
    cr_assert(t[i]->create && t[i]->destroy && t[i]->local_info && t[i]->connect && t[i]->send &&
              t[i]->recv && t[i]->on_wc && t[i]->on_timer && t[i]->quiet);
}

/* ================================================================ setup */

static void check_setup(enum pp_protocol proto)
{
  struct pp_engine_cfg c = cfg_of(proto, 2, 4, 64);
  pp_ring_params_of(&c)->slots = 4;
  pp_ring_params_of(&c)->channels = 3;
  ff_create(&F, &c, 1);
  for (uint32_t r = 0; r < 2; r++) {
    cr_assert_eq(ff_qp_count(&F, r), 3, "one QP per channel");
    struct pp_conn_info info;
    cr_assert(pp_engine_local_info(F.e[r], 1 - r, &info));
    cr_assert_eq(info.nchannels, 3);
    for (uint32_t k = 0; k < 3; k++) {
      struct ff_qp *q = chan_qp(r, k);
      cr_assert_eq(q->state, PP_QPS_INIT, "QPs wait in INIT until connect");
      cr_assert_eq(q->peer, 1 - r);
      cr_assert_eq(info.qp_num[k], q->qpn);
      cr_assert_eq(q->init.max_send_wr, 2 * 4 + 4);
      cr_assert_eq(q->init.max_recv_wr, 2 * 4);
      /* S receive WQEs for the peer's data, S for its credit updates: before anyone can send */
      cr_assert_eq(q->rq_count, 2 * 4, "rank %u channel %u", r, k);
      for (uint32_t i = 0; i < q->rq_count; i++)
        cr_assert_eq(q->rq[i].num_sge, 0, "zero-SGE receives: data lands by RDMA WRITE");
    }
    cr_assert_eq(info.region[0].len, 3 * 4 * 1024, "the slots of all channels");
    uint32_t area = proto == PP_PROTO_RING_CTS ? 4 * 32 : 64;
    cr_assert_eq(info.region[1].len, 3 * area, "head counters or CTS FIFOs");
    cr_assert_eq(info.region[1].addr % 32, 0, "CTS entries are 32-byte aligned");
    for (int g = 0; g < 2; g++) {
      bool found = false;
      for (uint32_t i = 0; i < FF_MAX_MRS; i++) {
        const struct ff_mr *m = &F.nic[r].mrs[i];
        if (m->used && m->mr.rkey == info.region[g].rkey) {
          found = true;
          cr_assert(m->mr.access & PP_ACCESS_REMOTE_WRITE);
          cr_assert_eq(m->mr.addr, info.region[g].addr);
        }
      }
      cr_assert(found, "region %d is a registered MR", g);
    }
  }
  /* a peer with another configuration is refused */
  struct pp_conn_info info;
  cr_assert(pp_engine_local_info(F.e[1], 0, &info));
  struct pp_conn_info bad = info;
  bad.nchannels = 2;
  cr_assert_eq(pp_engine_connect(F.e[0], 0, 1, &bad), PP_INVALID);
  bad = info;
  bad.region[0].len /= 2;
  cr_assert_eq(pp_engine_connect(F.e[0], 0, 1, &bad), PP_INVALID);
  bad = info;
  bad.region[1].len += 32;
  cr_assert_eq(pp_engine_connect(F.e[0], 0, 1, &bad), PP_INVALID);
  cr_assert_not(pp_engine_local_info(F.e[0], 5, &info), "not a peer");
  ff_connect_start(&F);
  for (uint32_t k = 0; k < 3; k++)
    cr_assert_eq(chan_qp(0, k)->state, PP_QPS_RTS);
}

Test(ring, setup_credits)
{
  check_setup(PP_PROTO_RING_CREDITS);
}

Test(ring, setup_cts)
{
  check_setup(PP_PROTO_RING_CTS);
}

/* ================================================================ chunking */

static void check_chunks(enum pp_protocol proto, uint32_t channels)
{
  probe_pair(proto, 4, 1000, channels, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 3500, &smr), *d = buffer(1, 4000, &rmr);
  for (uint32_t i = 0; i < 3500; i++)
    s[i] = (uint8_t)(i * 7 + 3);
  cr_assert_eq(psend(0, s, 3500, &smr, 42), PP_OK);
  /* 4 chunks of 1000, 1000, 1000, 500 bytes, striped over the channels, all posted at once */
  struct pp_conn_info peer;
  cr_assert(pp_engine_local_info(F.e[1], 0, &peer));
  uint32_t seen[PP_MAX_CHANNELS] = {0};
  for (uint32_t g = 0; g < 4; g++) {
    uint32_t k = g % channels, j = seen[k]++;
    struct ff_qp *q = chan_qp(0, k);
    cr_assert_gt(q->sq_tail, j, "chunk %u not posted", g);
    const struct pp_send_wr *w = sq_wr(q, j);
    cr_assert_eq(w->opcode, PP_WR_RDMA_WRITE_WITH_IMM);
    cr_assert(w->send_flags & PP_SEND_SIGNALED);
    cr_assert_eq(w->num_sge, 1);
    cr_assert_eq(w->sg_list[0].addr, (uint64_t)(uintptr_t)(s + g * 1000), "zero copy send");
    cr_assert_eq(w->sg_list[0].length, g < 3 ? 1000 : 500);
    cr_assert_eq(w->sg_list[0].lkey, smr.lkey);
    cr_assert_eq(w->rkey, peer.region[0].rkey);
    cr_assert_eq(w->remote_addr, peer.region[0].addr + ((uint64_t)k * 4 + j) * 1000,
                 "chunk %u into slot %u of channel %u", g, j, k);
    cr_assert_eq(w->imm_data & 0x3fffffff, j, "tail: the chunk's sequence on its channel");
    cr_assert_eq((w->imm_data >> 30) & 1, g == 3, "LAST on the message's last chunk only");
    cr_assert_eq(w->imm_data >> 31, 0, "data, not credit");
  }
  /* delivered whole, once, in order, into the receive, with its tag */
  cr_assert_eq(precv(1, d, 4000, &rmr, 7, 99), PP_OK);
  ff_run(&F, 100000);
  cr_assert_eq(P[1].nrecv, 1);
  cr_assert_eq(P[1].recvs[0].cookie, 7);
  cr_assert_eq(P[1].recvs[0].st, PP_WC_SUCCESS);
  cr_assert_eq(P[1].recvs[0].len, 3500);
  cr_assert_eq(P[1].recvs[0].src, 0);
  cr_assert_eq(memcmp(s, d, 3500), 0);
  cr_assert_eq(P[0].nsend, 1);
  cr_assert_eq(P[0].sends[0].cookie, 42);
  cr_assert_eq(P[0].sends[0].st, PP_WC_SUCCESS);
  cr_assert_eq(F.rnr, 0);
  cr_assert(ff_all_done(&F));
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert_eq(st.ring.nconns, 1);
  cr_assert_eq(st.ring.conn[0].peer, 1);
  cr_assert_eq(st.ring.conn[0].chunks_sent, 4);
  stats(1, &st);
  cr_assert_eq(st.ring.conn[0].chunks_received, 4);
  cr_assert_eq(st.ring.conn[0].credit_updates_sent, 4, "one credit per slot (batch 1)");
}

Test(ring, message_is_cut_into_slot_sized_chunks)
{
  check_chunks(PP_PROTO_RING_CREDITS, 1);
}

Test(ring, chunks_striped_over_channels)
{
  check_chunks(PP_PROTO_RING_CREDITS, 2);
}

Test(ring, cts_chunks_over_three_channels)
{
  check_chunks(PP_PROTO_RING_CTS, 3);
}

Test(ring, zero_length_and_back_to_back_messages)
{
  probe_pair(PP_PROTO_RING_CTS, 2, 64, 2, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 1000, &smr), *d = buffer(1, 7 * 256, &rmr);
  for (uint32_t i = 0; i < 1000; i++)
    s[i] = (uint8_t)(i ^ 0x5a);
  static const uint32_t lens[] = {0, 64, 65, 200, 1, 0, 128};
  uint32_t off[7], o = 0;
  for (uint32_t i = 0; i < 7; i++) {
    off[i] = o;
    cr_assert_eq(psend(0, s + o, lens[i], &smr, 100 + i), PP_OK);
    o += lens[i];
  }
  for (uint32_t i = 0; i < 4; i++)
    cr_assert_eq(precv(1, d + i * 256, 256, &rmr, i, 0), PP_OK);
  /* the fifth receive is posted from inside the first recv_done (a re-entrant call) */
  P[1].repost = true;
  P[1].again = (struct pp_msg){.peer = 0, .buf = d + 4 * 256, .len = 256, .mr = &rmr, .cookie = 4};
  ff_run(&F, 20000);
  cr_assert_eq(P[1].repost_status, PP_OK);
  cr_assert_eq(P[1].nrecv, 5);
  /* the last two messages wait in the slots; receives posted now are served by a kick */
  cr_assert_eq(precv(1, d + 5 * 256, 256, &rmr, 5, 0), PP_OK);
  cr_assert_eq(precv(1, d + 6 * 256, 256, &rmr, 6, 0), PP_OK);
  cr_assert_eq(pp_engine_next_deadline(F.e[1]), F.now, "a kick, not a call into the workload");
  cr_assert_eq(P[1].nrecv, 5);
  ff_run(&F, 20000);
  cr_assert_eq(P[0].nsend, 7);
  cr_assert_eq(P[1].nrecv, 7);
  for (uint32_t i = 0; i < 7; i++) {
    cr_assert_eq(P[0].sends[i].cookie, 100 + i, "send completions in order");
    cr_assert_eq(P[0].sends[i].st, PP_WC_SUCCESS);
    cr_assert_eq(P[1].recvs[i].cookie, i, "receives in order");
    cr_assert_eq(P[1].recvs[i].st, PP_WC_SUCCESS);
    cr_assert_eq(P[1].recvs[i].len, lens[i], "message %u", i);
    cr_assert_eq(memcmp(d + i * 256, s + off[i], lens[i]), 0, "message %u bytes", i);
  }
  cr_assert_eq(F.rnr, 0);
}

Test(ring, truncation_is_loc_len_err_and_the_stream_goes_on)
{
  probe_pair(PP_PROTO_RING_CREDITS, 4, 100, 1, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 1000, &smr), *d = buffer(1, 1000, &rmr);
  memset(s, 0x11, 1000);
  cr_assert_eq(psend(0, s, 350, &smr, 1), PP_OK);
  cr_assert_eq(psend(0, s, 50, &smr, 2), PP_OK);
  cr_assert_eq(precv(1, d, 120, &rmr, 1, 0), PP_OK);
  cr_assert_eq(precv(1, d + 500, 100, &rmr, 2, 0), PP_OK);
  ff_run(&F, 10000);
  cr_assert_eq(P[1].nrecv, 2);
  cr_assert_eq(P[1].recvs[0].st, PP_WC_LOC_LEN_ERR, "350 bytes into 120");
  cr_assert_eq(P[1].recvs[1].st, PP_WC_SUCCESS, "the next message is intact");
  cr_assert_eq(P[1].recvs[1].len, 50);
  cr_assert_eq(F.rnr, 0);
}

/* ================================================================ credits */

static void check_waits_without_credit(enum pp_protocol proto)
{
  probe_pair(proto, 2, 100, 1, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 1000, &smr), *d = buffer(1, 1000, &rmr);
  for (uint32_t i = 0; i < 6; i++)
    cr_assert_eq(psend(0, s + i * 100, 100, &smr, i), PP_OK);
  /* nobody posts a receive: two chunks fill the two slots, then the sender waits */
  ff_run(&F, 10000);
  cr_assert_eq(chan_qp(0, 0)->sq_tail, 2, "only S chunks without credit");
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(P[0].nsend, 2, "the chunks that landed are complete");
  F.now += 5000;
  cr_assert_eq(precv(1, d, 100, &rmr, 0, 0), PP_OK);
  ff_run(&F, 10000);
  cr_assert_eq(chan_qp(0, 0)->sq_tail, 3, "one slot released, one more chunk");
  for (uint32_t i = 1; i < 6; i++)
    cr_assert_eq(precv(1, d + i * 100, 100, &rmr, i, 0), PP_OK);
  ff_run(&F, 10000);
  cr_assert_eq(P[1].nrecv, 6);
  cr_assert_eq(P[0].nsend, 6);
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert_geq(st.ring.conn[0].credit_stalls, 1);
  cr_assert_geq(st.ring.conn[0].credit_stall_ns, 5000, "stalled at least while time moved");
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(total_violations(), 0);
}

Test(ring, sender_waits_for_credit_credits)
{
  check_waits_without_credit(PP_PROTO_RING_CREDITS);
}

Test(ring, sender_waits_for_credit_cts)
{
  check_waits_without_credit(PP_PROTO_RING_CTS);
}

Test(ring, send_and_receive_queues_are_bounded)
{
  probe_pair(PP_PROTO_RING_CREDITS, 2, 100, 1, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 100, &smr), *d = buffer(1, 100, &rmr);
  uint32_t sq = F.e[0]->cfg.qp.sq_depth, rq = F.e[0]->cfg.qp.rq_depth;
  for (uint32_t i = 0; i < sq; i++)
    cr_assert_eq(psend(0, s, 10, &smr, i), PP_OK);
  cr_assert_eq(psend(0, s, 10, &smr, 99), PP_AGAIN, "sq_depth messages at most");
  for (uint32_t i = 0; i < rq; i++)
    cr_assert_eq(precv(1, d, 10, &rmr, i, 0), PP_OK);
  cr_assert_eq(precv(1, d, 10, &rmr, 99, 0), PP_AGAIN, "rq_depth receives at most");
  struct pp_msg m = {.peer = 7, .buf = s, .len = 10, .mr = &smr};
  cr_assert_eq(F.e[0]->proto->send(F.e[0], 0, &m), PP_INVALID, "not a peer");
  cr_assert_eq(F.e[0]->proto->recv(F.e[0], 0, &m), PP_INVALID, "not a peer");
  m = (struct pp_msg){.peer = 1, .buf = NULL, .len = 10};
  cr_assert_eq(F.e[0]->proto->send(F.e[0], 0, &m), PP_INVALID, "no buffer");
  cr_assert_eq(F.e[0]->proto->recv(F.e[0], 0, &m), PP_INVALID, "no buffer");
}

/* Rank 1 lets 8 chunks arrive before it posts any receive, then consumes them in one pass: with
 * batch k the backlog returns credit every k slots (and the rest when idle). */
static unsigned backlog_credits(enum pp_protocol proto, uint32_t batch, uint64_t idle_ns)
{
  probe_pair(proto, 8, 64, 1, batch, idle_ns);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 64 * 8, &smr), *d = buffer(1, 64 * 8, &rmr);
  for (uint32_t i = 0; i < 8; i++)
    cr_assert_eq(psend(0, s + i * 64, 64, &smr, i), PP_OK);
  struct ff_qp *q = chan_qp(0, 0);
  while (ff_exec(&F, 0, q->qpn))
    ;
  cr_assert_eq(F.nic[1].cq_count, 8, "eight arrivals queued");
  while (ff_deliver(&F, 1))
    ;
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 0, "nothing consumed, no credit");
  for (uint32_t i = 0; i < 8; i++)
    cr_assert_eq(precv(1, d + i * 64, 64, &rmr, i, 0), PP_OK);
  ff_advance(&F, F.now); /* the kick */
  cr_assert_eq(P[1].nrecv, 8);
  return chan_qp(1, 0)->sq_tail; /* credit writes posted by the receiver */
}

Test(ring, credit_batch_returns_every_k_slots)
{
  cr_assert_eq(backlog_credits(PP_PROTO_RING_CREDITS, 1, 0), 8);
  fini();
  cr_assert_eq(backlog_credits(PP_PROTO_RING_CREDITS, 4, 0), 2);
  fini();
  cr_assert_eq(backlog_credits(PP_PROTO_RING_CREDITS, 5, 0), 2, "5, then 3 once idle");
  fini();
  cr_assert_eq(backlog_credits(PP_PROTO_RING_CREDITS, 3, 1000000), 2, "3, 6, then a timer");
  ff_advance(&F, F.now + 999999);
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 2);
  ff_advance(&F, F.now + 1);
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 3, "the idle timer returned the last 2");
  fini();
  cr_assert_eq(backlog_credits(PP_PROTO_RING_CTS, 8, 0), 1, "one CTS write for 8 entries");
}

Test(ring, credit_idle_waits_then_returns)
{
  probe_pair(PP_PROTO_RING_CREDITS, 4, 64, 1, 4, 2000);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 64, &smr), *d = buffer(1, 64, &rmr);
  cr_assert_eq(psend(0, s, 64, &smr, 0), PP_OK);
  cr_assert_eq(precv(1, d, 64, &rmr, 0, 0), PP_OK);
  ff_exec(&F, 0, chan_qp(0, 0)->qpn);
  ff_deliver(&F, 1);
  cr_assert_eq(P[1].nrecv, 1);
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 0, "one release, batch 4: not yet");
  uint64_t t = F.now;
  cr_assert_eq(pp_engine_next_deadline(F.e[1]), t + 2000, "idle timer");
  ff_advance(&F, t + 1999);
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 0);
  ff_advance(&F, t + 2000);
  cr_assert_eq(chan_qp(1, 0)->sq_tail, 1, "returned once idle for credit_idle");
  const struct pp_send_wr *w = sq_wr(chan_qp(1, 0), 0);
  cr_assert_eq(w->opcode, PP_WR_RDMA_WRITE_WITH_IMM);
  cr_assert_eq(w->imm_data, (1u << 31) | 1, "credit flag, head 1");
  cr_assert_eq(w->sg_list[0].length, 8, "the 8-byte head");
  uint64_t head;
  memcpy(&head, (const void *)(uintptr_t)w->sg_list[0].addr, 8);
  cr_assert_eq(head, 1);
}

Test(ring, receive_wqes_are_posted_before_the_credit)
{
  probe_pair(PP_PROTO_RING_CTS, 2, 64, 1, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 64 * 4, &smr), *d = buffer(1, 64 * 4, &rmr);
  for (uint32_t i = 0; i < 4; i++)
    cr_assert_eq(psend(0, s + 64 * i, 64, &smr, i), PP_OK);
  struct ff_qp *rq = chan_qp(1, 0);
  uint32_t before = rq->rq_count;
  ff_exec(&F, 0, chan_qp(0, 0)->qpn);
  cr_assert_eq(rq->rq_count, before - 1, "the chunk consumed a WQE");
  cr_assert_eq(precv(1, d, 64, &rmr, 0, 0), PP_OK);
  ff_deliver(&F, 1);
  /* the credit (the WQE with it) waits for a reply, and none comes: the kick at the same time */
  cr_assert_eq(rq->sq_tail, 0, "held for a reply");
  cr_assert_eq(rq->rq_count, before - 1);
  ff_advance(&F, F.now);
  /* the slot was released: first the WQE for the chunk it will hold next, then its CTS */
  cr_assert_eq(rq->rq_count, before, "the WQE is back before the CTS goes out");
  cr_assert_eq(rq->sq_tail, 1);
  const struct pp_send_wr *w = sq_wr(rq, 0);
  cr_assert_eq(w->imm_data, (1u << 31) | 3, "grants up to idx 3 (consumed 1 + S 2)");
  cr_assert_eq(w->sg_list[0].length, 32, "one 32-byte CTS entry");
  struct {
    uint64_t addr;
    uint32_t size, rkey;
    uint64_t tag;
    uint32_t idx, pad;
  } ent;
  memcpy(&ent, (const void *)(uintptr_t)w->sg_list[0].addr, 32);
  struct pp_conn_info info;
  cr_assert(pp_engine_local_info(F.e[1], 0, &info));
  cr_assert_eq(ent.idx, 2, "entry idx 2: the sender's third chunk");
  cr_assert_eq(ent.addr, info.region[0].addr, "goes to slot 0 again");
  cr_assert_eq(ent.size, 64);
  cr_assert_eq(ent.rkey, info.region[0].rkey);
  cr_assert_eq(ent.tag, (uint64_t)0 << 32 | 1, "sender 0, receiver 1");
  cr_assert_eq(w->remote_addr % 32, 0);
  ff_run(&F, 10000);
  cr_assert_eq(F.rnr, 0);
}

Test(ring, cts_publish_across_the_fifo_end_takes_two_writes)
{
  probe_pair(PP_PROTO_RING_CTS, 4, 32, 1, 4, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 32 * 8, &smr), *d = buffer(1, 32 * 8, &rmr);
  for (uint32_t i = 0; i < 8; i++)
    cr_assert_eq(psend(0, s + 32 * i, 32, &smr, i), PP_OK);
  struct ff_qp *sq = chan_qp(0, 0), *rq = chan_qp(1, 0);
  cr_assert_eq(precv(1, d, 32, &rmr, 0, 0), PP_OK);
  ff_exec(&F, 0, sq->qpn);
  ff_deliver_all(&F); /* chunk 0 consumed at once: grant [4, 5) at FIFO position 0 */
  ff_advance(&F, F.now); /* (held for a reply: the kick at the same time sends it) */
  cr_assert_eq(rq->sq_tail, 1);
  cr_assert_eq(sq_wr(rq, 0)->sg_list[0].length, 32);
  while (ff_exec(&F, 1, rq->qpn))
    ;
  ff_deliver_all(&F); /* the sender sees the grant and posts chunk 4 */
  for (int i = 0; i < 4; i++)
    cr_assert(ff_exec(&F, 0, sq->qpn));
  ff_deliver_all(&F); /* chunks 1..4 wait in the slots */
  cr_assert_eq(rq->sq_tail, 1);
  for (uint32_t i = 1; i < 8; i++)
    cr_assert_eq(precv(1, d + 32 * i, 32, &rmr, i, 0), PP_OK);
  ff_advance(&F, F.now); /* one pass, batch 4: grants [5, 9) at positions 1, 2, 3, 0 */
  cr_assert_eq(rq->sq_tail, 3);
  cr_assert_eq(sq_wr(rq, 1)->opcode, PP_WR_RDMA_WRITE, "the part up to the end, no imm");
  cr_assert_eq(sq_wr(rq, 1)->sg_list[0].length, 3 * 32);
  cr_assert_eq(sq_wr(rq, 2)->opcode, PP_WR_RDMA_WRITE_WITH_IMM, "then the wrapped part");
  cr_assert_eq(sq_wr(rq, 2)->sg_list[0].length, 32);
  cr_assert_eq(sq_wr(rq, 2)->remote_addr + 32, sq_wr(rq, 1)->remote_addr);
  cr_assert_eq(sq_wr(rq, 2)->imm_data, (1u << 31) | 9);
  ff_run(&F, 10000);
  cr_assert_eq(P[1].nrecv, 8);
  cr_assert_eq(P[0].nsend, 8);
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(total_violations(), 0);
}

/* A ping-pong's answering rank: a one-chunk message arrives and the application answers it
 * before the engine's next call (as the workload's pump after the event does). The answer's
 * data write is the first WQE on the send queue, the credit write that releases the sender's
 * slot right behind it (engine/proto/ring/ring.c: reply first); then everything completes. */
static void check_answer_before_credit(enum pp_protocol proto)
{
  probe_pair(proto, 4, 64, 1, 1, 0);
  struct pp_mr smr, rmr, amr, bmr;
  uint8_t *s = buffer(0, 64, &smr), *d = buffer(1, 64, &rmr);
  uint8_t *a = buffer(1, 64, &amr), *b = buffer(0, 64, &bmr);
  memset(a, 0x5c, 64);
  struct ff_qp *q1 = chan_qp(1, 0);
  cr_assert_eq(precv(0, b, 64, &bmr, 7, 0), PP_OK);
  cr_assert_eq(precv(1, d, 64, &rmr, 0, 0), PP_OK);
  cr_assert_eq(psend(0, s, 64, &smr, 0), PP_OK);
  ff_exec(&F, 0, chan_qp(0, 0)->qpn);
  ff_deliver(&F, 1);
  cr_assert_eq(P[1].nrecv, 1, "the ping arrived");
  cr_assert_eq(q1->sq_tail, 0, "its credit waits for the answer");
  cr_assert_eq(psend(1, a, 64, &amr, 1), PP_OK);
  cr_assert_eq(q1->sq_tail, 2, "the answer, then the credit, in the same call");
  cr_assert_eq(sq_wr(q1, 0)->imm_data & PP_RING_IMM_CREDIT, 0, "first: the answer's data");
  cr_assert_eq(sq_wr(q1, 0)->sg_list[0].length, 64);
  cr_assert_neq(sq_wr(q1, 1)->imm_data & PP_RING_IMM_CREDIT, 0, "then the credit write");
  ff_run(&F, 10000);
  cr_assert_eq(P[0].nrecv, 1);
  cr_assert_eq(P[0].recvs[0].st, PP_WC_SUCCESS);
  cr_assert_eq(memcmp(b, a, 64), 0);
  cr_assert_eq(P[0].nsend, 1);
  cr_assert_eq(P[1].nsend, 1);
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(total_violations(), 0);
  cr_assert(F.e[0]->proto->quiet(F.e[0]) && F.e[1]->proto->quiet(F.e[1]));
}

Test(ring, answer_is_posted_before_the_credit_credits)
{
  check_answer_before_credit(PP_PROTO_RING_CREDITS);
}

Test(ring, answer_is_posted_before_the_credit_cts)
{
  check_answer_before_credit(PP_PROTO_RING_CTS);
}

/* No answer comes: the credit held back for one goes at the same time (the kick timer at
 * `now`), with the receive WQE before it, and the sender can use the slot again. */
static void check_credit_without_answer(enum pp_protocol proto)
{
  probe_pair(proto, 1, 64, 1, 1, 0); /* one slot: the second send needs the credit */
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 128, &smr), *d = buffer(1, 128, &rmr);
  struct ff_qp *q1 = chan_qp(1, 0);
  cr_assert_eq(precv(1, d, 64, &rmr, 0, 0), PP_OK);
  cr_assert_eq(precv(1, d + 64, 64, &rmr, 1, 0), PP_OK);
  cr_assert_eq(psend(0, s, 64, &smr, 0), PP_OK);
  cr_assert_eq(psend(0, s + 64, 64, &smr, 1), PP_OK);
  ff_exec(&F, 0, chan_qp(0, 0)->qpn);
  uint32_t wqes = q1->rq_count;
  ff_deliver(&F, 1);
  cr_assert_eq(P[1].nrecv, 1);
  cr_assert_eq(q1->sq_tail, 0, "held for an answer");
  cr_assert(!F.e[1]->proto->quiet(F.e[1]), "not quiet while a credit is held");
  cr_assert_eq(pp_engine_next_deadline(F.e[1]), F.now, "bounded: a timer at the same time");
  ff_advance(&F, F.now);
  cr_assert_eq(q1->sq_tail, 1, "the credit went without an answer");
  cr_assert_neq(sq_wr(q1, 0)->imm_data & PP_RING_IMM_CREDIT, 0);
  cr_assert_eq(q1->rq_count, wqes + 1, "the slot's WQE posted first");
  ff_run(&F, 10000);
  cr_assert_eq(P[1].nrecv, 2, "the second message used the returned slot");
  cr_assert_eq(P[0].nsend, 2);
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(total_violations(), 0);
}

Test(ring, credit_goes_when_nothing_answers_credits)
{
  check_credit_without_answer(PP_PROTO_RING_CREDITS);
}

Test(ring, credit_goes_when_nothing_answers_cts)
{
  check_credit_without_answer(PP_PROTO_RING_CTS);
}

/* ================================================================ violations and errors */

Test(ring, torn_cts_entry_is_a_violation)
{
  probe_pair(PP_PROTO_RING_CTS, 2, 64, 1, 1, 0);
  struct pp_conn_info info;
  cr_assert(pp_engine_local_info(F.e[0], 1, &info));
  /* rank 0's FIFO (region 1): entry 0 names the wrong idx, as a half-written entry would */
  uint32_t *idx = (uint32_t *)(uintptr_t)(info.region[1].addr + 24);
  *idx = 77;
  struct pp_mr smr;
  uint8_t *s = buffer(0, 64, &smr);
  cr_assert_eq(psend(0, s, 64, &smr, 0), PP_OK, "the connection fails, the call does not");
  cr_assert_eq(total_violations(), 1);
  cr_assert_eq(chan_qp(0, 0)->sq_tail, 0, "nothing written to a slot it was not given");
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert_eq(st.first_violation.field, PP_VF_CTS_ENTRY);
  cr_assert_eq(chan_qp(0, 0)->state, PP_QPS_ERR);
}

/* Takes the oldest receive WQE of a QP as the NIC would, for a hand-made completion. */
static uint64_t take_wqe(struct ff_qp *q)
{
  cr_assert_gt(q->rq_count, 0);
  uint64_t id = q->rq[q->rq_head].wr_id;
  q->rq_head = (q->rq_head + 1) % q->init.max_recv_wr;
  q->rq_count--;
  return id;
}

/* (tests/test_hostile.c has the rest of the catalogue: overruns, credit updates, ...) */
Test(ring, an_out_of_sequence_chunk_is_a_violation)
{
  probe_pair(PP_PROTO_RING_CREDITS, 2, 64, 1, 1, 0);
  struct ff_qp *q = chan_qp(1, 0);
  struct pp_wc wc = {.status = PP_WC_SUCCESS,
                     .opcode = PP_WC_OP_RECV_RDMA_WITH_IMM,
                     .byte_len = 64,
                     .imm_data = 5, /* expected sequence 0 */
                     .qp_num = q->qpn,
                     .wc_flags = PP_WC_WITH_IMM};
  wc.wr_id = take_wqe(q);
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_OK, "out of sequence: the connection fails");
  cr_assert_eq(total_violations(), 1);
  struct pp_rank_stats st;
  stats(1, &st);
  cr_assert_eq(st.first_violation.field, PP_VF_SEQ);
  cr_assert_eq(st.first_violation.peer, 0);
  cr_assert_eq(q->state, PP_QPS_ERR);
}

Test(ring, bogus_completions_are_rejected)
{
  probe_pair(PP_PROTO_RING_CREDITS, 2, 64, 1, 1, 0);
  struct ff_qp *q = chan_qp(1, 0);
  uint64_t recv_id = q->rq[q->rq_head].wr_id;
  struct pp_wc base = {.wr_id = recv_id,
                       .status = PP_WC_SUCCESS,
                       .opcode = PP_WC_OP_RECV_RDMA_WITH_IMM,
                       .qp_num = q->qpn,
                       .wc_flags = PP_WC_WITH_IMM};
  struct pp_wc wc = base;
  wc.qp_num = 0x9999;
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_INVALID, "wrong QP");
  wc = base;
  wc.wr_id = recv_id | (5ull << 52);
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_INVALID, "no such connection");
  wc = base;
  wc.wr_id = (recv_id & ~(0xfull << 60));
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_INVALID, "kind 0");
  wc = base;
  wc.wr_id = (recv_id & ~(0xfull << 60)) | (1ull << 60);
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_INVALID, "a data write never posted");
  wc.wr_id = (recv_id & ~(0xfull << 60)) | (2ull << 60);
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_INVALID, "a credit write never posted");
  wc = base;
  wc.opcode = PP_WC_OP_RECV;
  wc.wc_flags = 0;
  cr_assert_eq(pp_engine_on_timer(F.e[1], 0), PP_OK, "no timer due: nothing happens");
  cr_assert_eq(F.e[1]->proto->on_timer(F.e[1], 0, 0x3f00), PP_INVALID, "no such idle timer");
  cr_assert_eq(pp_engine_on_wc(F.e[1], 0, &wc), PP_OK, "a SEND consumed a WQE: the peer fails");
  cr_assert_eq(total_violations(), 1);
}

static void check_flush(bool break_sender)
{
  probe_pair(PP_PROTO_RING_CREDITS, 2, 100, 1, 1, 0);
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 1000, &smr), *d = buffer(1, 1000, &rmr);
  for (uint32_t i = 0; i < 4; i++)
    cr_assert_eq(psend(0, s, 150, &smr, i), PP_OK); /* 2 chunks each */
  for (uint32_t i = 0; i < 3; i++)
    cr_assert_eq(precv(1, d, 150, &rmr, i, 0), PP_OK);
  uint32_t r = break_sender ? 0 : 1;
  ff_break_qp(&F, r, chan_qp(r, 0)->qpn, PP_WC_RETRY_EXC_ERR);
  ff_deliver_all(&F);
  if (break_sender) {
    cr_assert_eq(P[0].nsend, 4, "every send completes");
    cr_assert_eq(P[0].sends[0].st, PP_WC_RETRY_EXC_ERR, "the failing one with its status");
    for (uint32_t i = 1; i < 4; i++)
      cr_assert_eq(P[0].sends[i].st, PP_WC_WR_FLUSH_ERR);
    /* later sends on the broken connection are flushed too, from the protocol's timer */
    cr_assert_eq(psend(0, s, 10, &smr, 9), PP_OK);
    ff_advance(&F, F.now);
    cr_assert_eq(P[0].nsend, 5);
    cr_assert_eq(P[0].sends[4].st, PP_WC_WR_FLUSH_ERR);
    cr_assert(F.e[0]->proto->quiet(F.e[0]));
  } else {
    cr_assert_eq(P[1].nrecv, 3, "every posted receive completes");
    for (uint32_t i = 0; i < 3; i++)
      cr_assert_eq(P[1].recvs[i].st, PP_WC_WR_FLUSH_ERR);
    cr_assert_eq(precv(1, d, 10, &rmr, 9, 0), PP_OK);
    ff_advance(&F, F.now);
    cr_assert_eq(P[1].nrecv, 4);
  }
}

Test(ring, broken_sender_qp_flushes_the_sends)
{
  check_flush(true);
}

Test(ring, broken_receiver_qp_flushes_the_receives)
{
  check_flush(false);
}

Test(ring, quiet_only_when_nothing_is_outstanding)
{
  probe_pair(PP_PROTO_RING_CREDITS, 2, 100, 1, 1, 0);
  cr_assert(F.e[0]->proto->quiet(F.e[0]));
  struct pp_mr smr;
  uint8_t *s = buffer(0, 100, &smr);
  cr_assert_eq(psend(0, s, 100, &smr, 0), PP_OK);
  cr_assert_not(F.e[0]->proto->quiet(F.e[0]), "a data write is outstanding");
  cr_assert_not(pp_engine_done(F.e[0]));
}

Test(ring, send_queue_full_holds_chunks_until_completions)
{
  /* no ACK comes back for a while: the send queue fills, the NIC says not now, nothing is lost */
  probe_pair(PP_PROTO_RING_CREDITS, 8, 16, 1, 1, 0);
  F.hold_acks = true;
  struct pp_mr smr, rmr;
  uint8_t *s = buffer(0, 64 * 8, &smr), *d = buffer(1, 64 * 8, &rmr);
  for (uint32_t i = 0; i < 8; i++) {
    memset(s + 64 * i, (int)i + 1, 64);
    cr_assert_eq(psend(0, s + 64 * i, 64, &smr, i), PP_OK); /* 4 chunks each */
    cr_assert_eq(precv(1, d + 64 * i, 64, &rmr, i, 0), PP_OK);
  }
  ff_run(&F, 20000);
  cr_assert_leq(F.nic[0].max_sq, 2 * 8 + 4, "the send queue bound");
  cr_assert_gt(F.nic[0].max_sq, 8, "credits overtook the ACKs: more writes than slots out");
  cr_assert_lt(P[1].nrecv, 8);
  F.hold_acks = false;
  ff_run(&F, 200000);
  cr_assert_eq(P[1].nrecv, 8);
  cr_assert_eq(P[0].nsend, 8);
  cr_assert_eq(memcmp(s, d, 64 * 8), 0);
  cr_assert_eq(F.rnr, 0);
  cr_assert_eq(total_violations(), 0);
}

/* ================================================================ the stream workload */

Test(ring, stream_slow_consumer_never_rnr)
{
  for (int proto = PP_PROTO_RING_CREDITS; proto <= PP_PROTO_RING_CTS; proto++) {
    struct pp_engine_cfg c = cfg_of((enum pp_protocol)proto, 2, 40, 300);
    c.workload.interval_ns = 100;
    c.workload.consume_ns = 5000;
    c.workload.consume_ranks = 1u << 1;
    c.qp.rq_depth = 2;
    ff_init(&F, &c, 3);
    ff_run(&F, 1000000);
    expect_clean_stream(&c);
    struct pp_rank_stats st;
    stats(0, &st);
    cr_assert_gt(st.ring.conn[0].credit_stall_ns, 0, "the slow consumer stalls the sender");
    fini();
  }
}

Test(ring, stream_ring_of_five)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CTS, 5, 30, 2500);
  pp_ring_params_of(&c)->channels = 2;
  ff_init(&F, &c, 9);
  ff_run(&F, 1000000);
  expect_clean_stream(&c);
}

/* ================================================================ properties, fake fabric */

Test(ring, property_fake_fabric_many_configurations, .timeout = 120)
{
  static const uint32_t slots[] = {1, 2, 4, 8, 16};
  static const uint32_t slot_sizes[] = {64, 1000, 4096};
  static const uint32_t sizes[] = {16, 777, 5000};
  unsigned runs = 0;
  for (int proto = PP_PROTO_RING_CREDITS; proto <= PP_PROTO_RING_CTS; proto++)
    for (size_t a = 0; a < 5; a++)
      for (uint32_t ch = 1; ch <= 3; ch++)
        for (size_t b = 0; b < 3; b++)
          for (uint64_t seed = 1; seed <= 3; seed++) {
            uint32_t size = sizes[(a + b + seed) % 3];
            uint32_t n = seed == 3 ? 3 : 2;
            struct pp_engine_cfg c = cfg_of((enum pp_protocol)proto, n, 12, size);
            c.seed = seed;
            pp_ring_params_of(&c)->slots = slots[a];
            pp_ring_params_of(&c)->slot_size = slot_sizes[b];
            pp_ring_params_of(&c)->channels = ch;
            pp_ring_params_of(&c)->credit_batch = 1 + (uint32_t)(seed + a) % slots[a];
            pp_ring_params_of(&c)->credit_idle_ns = seed == 2 ? 300 : 0;
            c.qp.rq_depth = 1 + (uint32_t)(seed % 4);
            c.qp.sq_depth = 1 + (uint32_t)(a % 3) * 4;
            c.workload.consume_ns = seed == 1 ? 2000 : 0;
            snprintf(what, sizeof(what),
                     "%s n %u S %u slot %u C %u batch %u idle %llu rq %u sq %u size %u seed %llu",
                     pp_protocol_name(c.protocol), n, pp_ring_params_of(&c)->slots, pp_ring_params_of(&c)->slot_size, ch,
                     pp_ring_params_of(&c)->credit_batch, (unsigned long long)pp_ring_params_of(&c)->credit_idle_ns,
                     c.qp.rq_depth, c.qp.sq_depth, size, (unsigned long long)seed);
            ff_init(&F, &c, seed * 1000 + a * 100 + ch * 10 + b);
            F.exec_weight = 1 + (unsigned)(seed % 3);
            F.ack_weight = 1 + (unsigned)(b % 2) * 3;
            ff_run(&F, 2000000);
            expect_clean_stream(&c);
            fini();
            runs++;
          }
  cr_assert_eq(runs, 2 * 5 * 3 * 3 * 3);
}

/* ================================================================ properties, SimGrid */

/* Runs sc in a child process (one simulation per process); the child checks the invariants and
 * exits 0, or writes what failed to stderr and exits 1. */
static int simulate(const struct pp_scenario *sc, bool collective)
{
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    struct pp_run_result res;
    char err[512] = "";
    enum pp_status s = pp_sim_run(&sc->sim, NULL, &res, err, sizeof(err));
    const struct pp_engine_cfg *c = &sc->sim.engine;
    int bad = 0;
#define FAILIF(cond, ...)                                                      \
  do {                                                                         \
    if (cond) {                                                                \
      fprintf(stderr, "%s: ", sc->sim.name);                                   \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      bad = 1;                                                                 \
    }                                                                          \
  } while (0)
    FAILIF(s != PP_OK, "pp_sim_run: %s", err);
    if (s == PP_OK) {
      FAILIF(res.outcome != PP_OUTCOME_COMPLETED, "outcome %s", pp_outcome_name(res.outcome));
      for (uint32_t r = 0; r < res.nranks; r++) {
        const struct pp_rank_result *rr = &res.ranks[r];
        FAILIF(rr->nic.rnr_naks_sent || rr->nic.rnr_naks_received, "rank %u: RNR NAKs", r);
        for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
          FAILIF(rr->stats.status_counts[k], "rank %u: %llu %s", r,
                 (unsigned long long)rr->stats.status_counts[k],
                 pp_wc_status_name((enum pp_wc_status)k));
        FAILIF(rr->stats.corrupt, "rank %u: %llu corrupt", r,
               (unsigned long long)rr->stats.corrupt);
        FAILIF(rr->stats.ring.violations, "rank %u: violations", r);
        FAILIF(!rr->stats.done, "rank %u not done", r);
        if (collective) {
          FAILIF(rr->stats.coll.elements_wrong, "rank %u: wrong elements", r);
          FAILIF(rr->stats.coll.iterations_done != pp_coll_params_of(c)->iterations, "rank %u: iterations", r);
          FAILIF(rr->stats.coll.elements_checked == 0, "rank %u: nothing checked", r);
        } else if (pp_workload_source(&c->workload, r, c->nranks) >= 0) {
          FAILIF(rr->stats.messages_received != c->workload.messages,
                 "rank %u: %llu of %u messages", r,
                 (unsigned long long)rr->stats.messages_received, c->workload.messages);
        }
      }
      pp_run_result_free(&res);
    }
#undef FAILIF
    _exit(bad);
  }
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void base_scenario(struct pp_scenario *sc, const char *name)
{
  pp_scenario_defaults(sc);
  snprintf(sc->sim.name, sizeof(sc->sim.name), "%s", name);
  sc->sim.engine.qp.rnr_retry = 0; /* any RNR NAK would be fatal */
  sc->sim.engine.qp.min_rnr_timer = 1;
  sc->sim.engine.qp.timeout = 8; /* ~1 ms: quick recovery from the injected losses */
  sc->sim.max_sim_time_ns = 5ull * 1000000000ull;
}

Test(ring, property_simgrid_stream_across_seeds, .timeout = 300)
{
  static const uint32_t slots[] = {2, 4, 8, 16};
  unsigned runs = 0, failed = 0;
  for (uint64_t seed = 1; seed <= 4; seed++)
    for (size_t a = 0; a < 4; a++) {
      uint32_t ch = 1 + (uint32_t)((seed + a) % 3);
      {
        struct pp_scenario sc;
        char name[96];
        int proto = (seed + a) % 2 ? PP_PROTO_RING_CREDITS : PP_PROTO_RING_CTS;
        snprintf(name, sizeof(name), "stream-%s-seed%llu-S%u-C%u", pp_protocol_name(proto),
                 (unsigned long long)seed, slots[a], ch);
        base_scenario(&sc, name);
        struct pp_engine_cfg *c = &sc.sim.engine;
        sc.sim.seed = c->seed = seed;
        c->protocol = (enum pp_protocol)proto;
        c->nranks = seed % 2 ? 2 : 3;
        c->workload = (struct pp_workload){.kind = PP_WORKLOAD_STREAM,
                                           .pattern = c->nranks == 2 ? PP_PATTERN_PAIR
                                                                     : PP_PATTERN_RING,
                                           .messages = 60,
                                           .size = 1000 + 1500 * (uint32_t)a,
                                           .interval_ns = seed == 2 ? 1000 : 0,
                                           .consume_ns = seed >= 3 ? 20000 : 0};
        c->qp.rq_depth = 4;
        c->qp.sq_depth = 16;
        pp_ring_params_of(c)->slots = slots[a];
        pp_ring_params_of(c)->slot_size = 2048;
        pp_ring_params_of(c)->channels = ch;
        pp_ring_params_of(c)->credit_batch = seed == 4 ? slots[a] / 2 : 1;
        pp_ring_params_of(c)->credit_idle_ns = seed == 4 ? 3000 : 0;
        sc.sim.faults.loss = seed == 2 ? 0.003 : 0; /* retransmissions: still no RNR */
        int rc = simulate(&sc, false);
        cr_expect_eq(rc, 0, "%s failed (see stderr)", name);
        failed += rc != 0;
        runs++;
      }
    }
  cr_assert_eq(failed, 0, "%u of %u runs failed", failed, runs);
}

Test(ring, property_simgrid_collectives_across_seeds, .timeout = 300)
{
  static const uint32_t slots[] = {2, 4, 8, 16};
  static const enum pp_coll_op ops[] = {PP_COLL_ALLREDUCE, PP_COLL_ALLGATHER, PP_COLL_BROADCAST};
  unsigned runs = 0, failed = 0;
  for (uint64_t seed = 1; seed <= 3; seed++)
    for (size_t a = 0; a < 4; a++) {
      struct pp_scenario sc;
      char name[96];
      enum pp_coll_op op = ops[(seed + a) % 3];
      int proto = (seed + a) % 2 ? PP_PROTO_RING_CREDITS : PP_PROTO_RING_CTS;
      uint32_t n = 2 + (uint32_t)((seed * 3 + a) % 4);
      snprintf(name, sizeof(name), "%s-%s-seed%llu-S%u-n%u", pp_coll_op_name(op),
               pp_protocol_name(proto), (unsigned long long)seed, slots[a], n);
      base_scenario(&sc, name);
      struct pp_engine_cfg *c = &sc.sim.engine;
      sc.sim.seed = c->seed = seed;
      c->protocol = (enum pp_protocol)proto;
      c->nranks = n;
      pp_engine_cfg_workload(c, PP_WORKLOAD_COLLECTIVE); /* and its defaults */
      c->workload.pattern = PP_PATTERN_RING;
      pp_coll_params_of(c)->op = op;
      pp_coll_params_of(c)->dtype = (enum pp_dtype)((seed + a) % PP_DTYPE_COUNT);
      size_t esz = pp_dtype_size(pp_coll_params_of(c)->dtype);
      pp_coll_params_of(c)->bytes = esz * n * (600 + 37 * seed); /* blocks that do not divide into chunks */
      pp_coll_params_of(c)->chunk = (uint32_t)esz * (64 + 50 * (uint32_t)a);
      pp_coll_params_of(c)->iterations = 2;
      pp_coll_params_of(c)->window = 1 + (uint32_t)(seed % 4);
      pp_coll_params_of(c)->root = (uint32_t)seed % n;
      pp_ring_params_of(c)->slots = slots[a];
      pp_ring_params_of(c)->slot_size = 256 << (seed % 3);
      pp_ring_params_of(c)->channels = 1 + (uint32_t)(seed % 3);
      pp_ring_params_of(c)->credit_batch = 1 + (uint32_t)(seed % slots[a]);
      pp_ring_params_of(c)->credit_idle_ns = seed % 3 == 0 ? 2000 : 0;
      sc.sim.faults.loss = seed == 2 ? 0.002 : 0;
      int rc = simulate(&sc, true);
      cr_expect_eq(rc, 0, "%s failed (see stderr)", name);
      failed += rc != 0;
      runs++;
    }
  cr_assert_eq(failed, 0, "%u of %u runs failed", failed, runs);
}
