/*
 * The NCCL-style ring FIFO protocols, ring-credits and ring-cts (design: ring.h).
 *
 * Per connection (this rank <-> one peer) and channel (one RC QP):
 *
 *   receiver memory   slots[S] of slot_size bytes         written by the peer (data)
 *   sender memory     ring-credits: head (u64)            written by the peer (credit)
 *                     ring-cts: fifo[S] of 32-byte CTS entries
 *
 * Counters, all free-running u64:
 *   sender    tail      chunks written on the channel
 *             head      (ring-credits) slots released, as announced by the credit updates seen:
 *                       may write while tail < head + S
 *             granted   (ring-cts) CTS entries [0, granted) landed: may write while tail < granted
 *   receiver  arrived   chunks whose WRITE_WITH_IMM completed (all bytes landed)
 *             consumed  chunks copied out to the application (their slots are released)
 *             published consumed value last returned to the sender as credit
 *
 * Invariants (checked at run time, counted in pp_ring_stats.violations):
 *  - RNR is impossible: the QP starts with 2S receive WQEs (S for the data of the receive
 *    direction, S for the credit updates of the send direction; the WQEs carry no buffer, so
 *    either kind of WRITE_WITH_IMM may consume any). A data WQE is re-posted in publish(), before
 *    the credit write that lets the sender use the slot; a credit WQE is re-posted as soon as its
 *    completion is seen, and at most S credit updates are unseen: each carries a strictly larger
 *    value, all within (head, head + S] since the sender only uses credit it has seen.
 *  - The sender never overwrites a slot the receiver has not released: tail < head + S /
 *    tail < granted; the receiver checks arrived - consumed < S on every arrival.
 *  - Arrival is the WRITE_WITH_IMM completion, never a byte of the payload; a CTS entry is read
 *    only after the completion of the credit write that carried it (RC writes land in order), and
 *    is 32-byte aligned and self-identifying (idx, tag).
 *  - No allocation after create, no busy wait: a send without credit waits in the bounded send
 *    queue for the credit update's completion.
 *
 * Reply first: the credit write a consume() owes only releases the sender's slots; in a
 * ping-pong the application answers the message just consumed, and its data write queued behind
 * the credit write on the same send queue waits a whole NIC scheduling round (rxe: 19-163 us).
 * So consume() does not publish after the last chunk of its pass (while the pass goes on, no
 * reply can come first: credit_batch is honoured within it as before): it marks the channel
 * (publish_deferred, on the ring's deferred list) and publish() runs, unchanged, at the first
 * of: the end of the application's next send (ring_send, after its chunks were posted or found
 * no credit), DEFER_TIMER at the same `now` (armed with the deferral: the application may never
 * send), or the start of the next event (ring_on_wc, ring_on_timer). The list is linked through
 * the channels, so its flush visits only what it publishes: no scan of every connection per
 * message (the kick's consume() of every connection is not used for it). Why nothing breaks:
 *  - publish() is deferred whole: the receive WQEs of the released slots are still posted
 *    before the credit write that lets the sender use them, so RNR stays impossible; credit is
 *    cumulative, so one deferred publish returns every slot consumed meanwhile;
 *  - the credit is never lost: the timer bounds its wait (no timer to spare: published at once);
 *    a failed connection publishes nothing, as before;
 *  - the data write that overtakes it uses the peer's credit, not ours, and the send queue is
 *    sized for both (credit_wr_max, max_send_wr): if the data took the room, publish() is
 *    blocked until the next send completion, as it always could be;
 *  - ring_quiet is false while a credit is deferred, so a run does not end with one held back.
 */
#include "prepost/ring.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/bugs.h"
#include "engine/core/engine_impl.h"

/* wr_id: kind | connection | channel | message sequence */
enum { WR_DATA = 1, WR_CREDIT = 2, WR_RECV = 3 };
#define WR_KIND_SHIFT 60
#define WR_CONN_SHIFT 52
#define WR_CHAN_SHIFT 44
#define WR_SEQ_MASK ((1ull << WR_CHAN_SHIFT) - 1)

/* Immediate data. Data: LAST flag and the chunk's sequence number on its channel (mod 2^30).
 * Credit: CREDIT flag and the head (ring-credits) or the end of the CTS grants (ring-cts). */
#define IMM_CREDIT PP_RING_IMM_CREDIT
#define IMM_LAST PP_RING_IMM_LAST
#define IMM_SEQ_MASK (IMM_LAST - 1)
#define IMM_VAL_MASK (IMM_CREDIT - 1)
#define IMM_VAL_SIGN (IMM_CREDIT >> 1) /* credit values compare as 31-bit serial numbers */

#define KICK_TIMER UINT32_MAX
/* reply first: the deferred credit writes go (an idle timer's arg, idx << 8 | k, has k < C) */
#define DEFER_TIMER (UINT32_MAX - 1)
#define NO_DEFER UINT32_MAX /* end of the deferred list */
#define HEAD_STRIDE 64u /* one head counter per channel, a cache line apart */
#define ALIGN 64u

struct cts_entry {
  uint64_t addr;
  uint32_t size;
  uint32_t rkey;
  uint64_t tag;
  uint32_t idx;
  uint32_t pad;
};
_Static_assert(sizeof(struct cts_entry) == 32, "CTS entries are 32 bytes");

struct slot_meta {
  uint32_t len;
  bool last;
};

struct chan {
  uint32_t qpn, psn;
  uint32_t rq_posted;           /* receive WQEs on the QP */
  uint32_t sq_data, sq_credit;  /* send WRs outstanding */
  uint64_t tail, head, granted; /* send side */
  struct slot_meta *meta;       /* receive side: S entries */
  uint64_t arrived, consumed, published;
  bool publish_blocked; /* no send queue room: publish on the next completion */
  bool publish_deferred; /* consumed slots to publish once the reply went (reply first) */
  uint32_t defer_next;   /* the next deferred channel (conn idx << 8 | k), or NO_DEFER */
  uint32_t repost_owed; /* test bug early-credit (engine/core/bugs.h): WQEs re-posted late */
  bool idle_timer;      /* a credit_idle timer is armed */
};

struct smsg {
  struct pp_msg m;
  uint32_t off; /* bytes posted */
  uint32_t nchunks, chunks_posted, chunks_done;
  enum pp_wc_status st;
};

struct rmsg {
  struct pp_msg m;
  uint32_t off; /* bytes received */
  enum pp_wc_status st;
};

struct conn {
  uint32_t peer, idx;
  struct chan ch[PP_MAX_CHANNELS];
  uint8_t *rx; /* C * S * slot_size: our slots, written by the peer */
  struct pp_mr rx_mr;
  uint8_t *credit; /* C * area: head counters or CTS FIFOs, written by the peer */
  struct pp_mr credit_mr;
  uint8_t *src; /* C * area: what we write into the peer's credit area */
  struct pp_mr src_mr;
  struct pp_region remote_rx, remote_credit;
  /* application sends: sequence numbers sq_head <= sq_cur <= sq_tail */
  struct smsg *sq;
  uint32_t sq_cap;
  uint64_t sq_head, sq_cur, sq_tail, g_tx;
  bool stalled;
  uint64_t stall_since;
  /* application receives */
  struct rmsg *rq;
  uint32_t rq_cap;
  uint64_t rq_head, rq_tail, g_rx;
  bool failed;
  uint8_t fail_wc; /* what queued operations complete with: WR_FLUSH_ERR, or GENERAL_ERR once
                      the peer broke the protocol */
};

struct ring {
  bool cts;
  uint32_t S, C, slot, batch;
  uint64_t idle_ns;
  uint32_t area; /* bytes of one channel's credit area */
  uint32_t max_send_wr, max_recv_wr, credit_wr_max;
  struct conn *c;
  uint32_t n;
  bool kick_armed, consuming;
  /* reply first: the channels with publish_deferred set, in the order they were deferred
   * (linked through chan.defer_next: a flush costs what it publishes, not a scan of every
   * connection), and whether DEFER_TIMER, which bounds their wait, is armed */
  uint32_t ndeferred, defer_head, defer_tail;
  bool defer_armed;
  struct pp_ring_conn_stats sink; /* statistics of connections past PP_RING_STATS_CONNS */
};

static const unsigned remote_access = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE;

/* ---------------------------------------------------------------- parameters */

_Static_assert(sizeof(struct pp_ring_params) <= PP_PROTO_PARAMS_MAX, "fits pp_engine_cfg.proto_params");

void pp_ring_params_default(struct pp_ring_params *p)
{
  *p = (struct pp_ring_params){.slots = PP_RING_DEFAULT_SLOTS,
                               .slot_size = PP_RING_DEFAULT_SLOT_SIZE,
                               .channels = 1,
                               .credit_batch = 1,
                               .credit_idle_ns = 0};
}

enum pp_status pp_ring_params_check(const struct pp_ring_params *p, char *err, size_t errlen)
{
  const char *what = NULL;
  char buf[128];
  if (p->slots < 1 || p->slots > PP_RING_MAX_SLOTS)
    snprintf(buf, sizeof buf, "ring slots must be 1..%u, got %u", PP_RING_MAX_SLOTS, p->slots),
        what = buf;
  else if (p->slot_size < 1 || p->slot_size > PP_RING_MAX_SLOT_SIZE)
    snprintf(buf, sizeof buf, "ring slot_size must be 1..%u bytes, got %u", PP_RING_MAX_SLOT_SIZE,
             p->slot_size),
        what = buf;
  else if (p->channels < 1 || p->channels > PP_MAX_CHANNELS)
    snprintf(buf, sizeof buf, "ring channels must be 1..%u, got %u", PP_MAX_CHANNELS, p->channels),
        what = buf;
  else if (p->credit_batch < 1 || p->credit_batch > p->slots)
    snprintf(buf, sizeof buf, "ring credit_batch must be 1..slots (%u), got %u", p->slots,
             p->credit_batch),
        what = buf;
  else if ((uint64_t)p->channels * p->slots * p->slot_size > PP_RING_MAX_CONN_BYTES)
    snprintf(buf, sizeof buf, "ring channels * slots * slot_size = %llu bytes exceeds %llu",
             (unsigned long long)p->channels * p->slots * p->slot_size,
             (unsigned long long)PP_RING_MAX_CONN_BYTES),
        what = buf;
  if (!what)
    return PP_OK;
  snprintf(err, errlen, "%s", what);
  return PP_INVALID;
}

/* ---------------------------------------------------------------- helpers */

static uint64_t wr_id(uint32_t kind, uint32_t conn, uint32_t ch, uint64_t seq)
{
  return (uint64_t)kind << WR_KIND_SHIFT | (uint64_t)conn << WR_CONN_SHIFT |
         (uint64_t)ch << WR_CHAN_SHIFT | (seq & WR_SEQ_MASK);
}

/* The 64-bit counter near `ref` whose low 31 bits are v (credit immediates carry 31 bits). */
static uint64_t unwrap31(uint64_t ref, uint32_t v)
{
  uint32_t d = (v - (uint32_t)ref) & IMM_VAL_MASK;
  return d & IMM_VAL_SIGN ? ref - ((uint64_t)IMM_CREDIT - d) : ref + d;
}

static uint64_t conn_tag(uint32_t sender, uint32_t receiver)
{
  return (uint64_t)sender << 32 | receiver;
}

static struct conn *conn_of(const struct pp_engine *e, uint32_t peer)
{
  const struct ring *r = e->ps;
  for (uint32_t i = 0; i < r->n; i++)
    if (r->c[i].peer == peer)
      return &r->c[i];
  return NULL;
}

static struct pp_ring_conn_stats *cstats(struct pp_engine *e, const struct conn *c)
{
  struct ring *r = e->ps;
  return c->idx < PP_RING_STATS_CONNS ? &e->st.ring.conn[c->idx] : &r->sink;
}

static void *zalloc_aligned(size_t n)
{
  size_t sz = (n + ALIGN - 1) / ALIGN * ALIGN;
  void *p = aligned_alloc(ALIGN, sz ? sz : ALIGN);
  if (p)
    memset(p, 0, sz ? sz : ALIGN);
  return p;
}

static uint8_t *slot_ptr(const struct ring *r, const struct conn *c, uint32_t ch, uint64_t i)
{
  return c->rx + ((size_t)ch * r->S + i % r->S) * r->slot;
}

static struct cts_entry *fifo(const struct ring *r, uint8_t *base, uint32_t ch, uint64_t idx)
{
  return (struct cts_entry *)(void *)(base + (size_t)ch * r->area) + idx % r->S;
}

static enum pp_status post_recv_wqe(struct pp_engine *e, struct conn *c, uint32_t ch)
{
  struct pp_recv_wr wr = {.wr_id = wr_id(WR_RECV, c->idx, ch, 0), .num_sge = 0};
  enum pp_status s = (enum pp_status)e->ops->post_recv(e->nic, c->ch[ch].qpn, &wr);
  if (s == PP_OK)
    c->ch[ch].rq_posted++;
  return s;
}

static enum pp_status arm_kick(struct pp_engine *e, uint64_t now)
{
  struct ring *r = e->ps;
  if (r->kick_armed)
    return PP_OK;
  enum pp_status s = pp_engine_push_timer(e, now, PP_TIMER_PROTO, KICK_TIMER);
  if (s == PP_OK)
    r->kick_armed = true;
  return s;
}

static void stall_end(struct pp_engine *e, struct conn *c, uint64_t now)
{
  if (c->stalled) {
    cstats(e, c)->credit_stall_ns += now - c->stall_since;
    c->stalled = false;
  }
}

/* ---------------------------------------------------------------- create / connect */

static void ring_destroy(struct pp_engine *e)
{
  struct ring *r = e->ps;
  if (!r)
    return;
  for (uint32_t i = 0; i < r->n; i++) {
    struct conn *c = &r->c[i];
    for (uint32_t k = 0; k < r->C; k++) {
      if (c->ch[k].qpn)
        e->ops->destroy_qp(e->nic, c->ch[k].qpn);
      free(c->ch[k].meta);
    }
    if (c->rx_mr.lkey)
      e->ops->dereg_mr(e->nic, &c->rx_mr);
    if (c->credit_mr.lkey)
      e->ops->dereg_mr(e->nic, &c->credit_mr);
    if (c->src_mr.lkey)
      e->ops->dereg_mr(e->nic, &c->src_mr);
    free(c->rx);
    free(c->credit);
    free(c->src);
    free(c->sq);
    free(c->rq);
  }
  free(r->c);
  free(r);
  e->ps = NULL;
}

static enum pp_status conn_create(struct pp_engine *e, struct conn *c)
{
  struct ring *r = e->ps;
  size_t rx_bytes = (size_t)r->C * r->S * r->slot, area_bytes = (size_t)r->C * r->area;
  c->sq_cap = e->cfg.qp.sq_depth;
  c->rq_cap = e->cfg.qp.rq_depth;
  c->sq = calloc(c->sq_cap, sizeof(*c->sq));
  c->rq = calloc(c->rq_cap, sizeof(*c->rq));
  c->rx = calloc(1, rx_bytes);
  c->credit = zalloc_aligned(area_bytes);
  c->src = zalloc_aligned(area_bytes);
  if (!c->sq || !c->rq || !c->rx || !c->credit || !c->src)
    return PP_NOMEM;
  enum pp_status s = pp_engine_reg(e, c->rx, rx_bytes, remote_access, &c->rx_mr);
  if (s == PP_OK)
    s = pp_engine_reg(e, c->credit, area_bytes, remote_access, &c->credit_mr);
  if (s == PP_OK)
    s = pp_engine_reg(e, c->src, area_bytes, PP_ACCESS_LOCAL_WRITE, &c->src_mr);
  for (uint32_t k = 0; s == PP_OK && k < r->C; k++) {
    struct chan *h = &c->ch[k];
    if (!(h->meta = calloc(r->S, sizeof(*h->meta))))
      return PP_NOMEM;
    s = pp_engine_qp_open(e, c->peer, 0, r->max_send_wr, r->max_recv_wr, &h->qpn, &h->psn);
    /* S WQEs for the data the peer may write before any credit returns, S for credit updates;
     * posted while the QP is in INIT, before anyone can send */
    for (uint32_t i = 0; s == PP_OK && i < 2 * r->S; i++)
      s = post_recv_wqe(e, c, k);
  }
  return s;
}

static enum pp_status ring_create(struct pp_engine *e)
{
  const struct pp_ring_params *p = pp_ring_params_of(&e->cfg);
  struct ring *r = calloc(1, sizeof(*r));
  if (!r)
    return PP_NOMEM;
  e->ps = r;
  r->cts = e->cfg.protocol == PP_PROTO_RING_CTS;
  r->S = p->slots;
  r->C = p->channels;
  r->slot = p->slot_size;
  r->batch = p->credit_batch;
  r->idle_ns = p->credit_idle_ns;
  r->area = r->cts ? r->S * (uint32_t)sizeof(struct cts_entry) : HEAD_STRIDE;
  /* data writes: at most S per channel wait for their ACK in the usual case (credit bounds
   * them; a credit can overtake an ACK, then the send queue bound waits); credit writes: at
   * most S + 2 (publish() defers when they would exceed it) */
  r->credit_wr_max = r->S + 2;
  r->max_send_wr = 2 * r->S + 4;
  r->max_recv_wr = 2 * r->S;
  r->defer_head = r->defer_tail = NO_DEFER;
  if (!(r->c = calloc(e->npeers ? e->npeers : 1, sizeof(*r->c))))
    return PP_NOMEM;
  e->st.ring.nconns = e->npeers < PP_RING_STATS_CONNS ? e->npeers : PP_RING_STATS_CONNS;
  for (uint32_t i = 0; i < e->npeers; i++) {
    struct conn *c = &r->c[r->n++];
    c->peer = e->peers[i];
    c->idx = i;
    for (uint32_t k = 0; k < PP_MAX_CHANNELS; k++)
      c->ch[k].defer_next = NO_DEFER;
    cstats(e, c)->peer = c->peer;
    enum pp_status s = conn_create(e, c);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static bool ring_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out)
{
  const struct ring *r = e->ps;
  const struct conn *c = conn_of(e, peer);
  if (!c)
    return false;
  *out = (struct pp_conn_info){.nchannels = r->C};
  for (uint32_t k = 0; k < r->C; k++) {
    out->qp_num[k] = c->ch[k].qpn;
    out->psn[k] = c->ch[k].psn;
  }
  out->region[0] = (struct pp_region){.addr = c->rx_mr.addr,
                                      .rkey = c->rx_mr.rkey,
                                      .len = (uint32_t)c->rx_mr.length};
  out->region[1] = (struct pp_region){.addr = c->credit_mr.addr,
                                      .rkey = c->credit_mr.rkey,
                                      .len = (uint32_t)c->credit_mr.length};
  return true;
}

static enum pp_status ring_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                   const struct pp_conn_info *remote)
{
  (void)now;
  struct ring *r = e->ps;
  struct conn *c = conn_of(e, peer);
  if (!c)
    return PP_NOTFOUND;
  if (remote->nchannels != r->C || remote->region[0].len != (uint64_t)r->C * r->S * r->slot ||
      remote->region[1].len != (uint64_t)r->C * r->area)
    return PP_INVALID; /* the peer runs another configuration */
  c->remote_rx = remote->region[0];
  c->remote_credit = remote->region[1];
  for (uint32_t k = 0; k < r->C; k++) {
    enum pp_status s = pp_engine_qp_connect(e, c->ch[k].qpn, c->ch[k].psn, remote->qp_num[k],
                                            remote->psn[k]);
    if (s != PP_OK)
      return s;
    if (r->cts) {
      /* the first S clear-to-sends come with the connection (the peer posted their receive
       * WQEs at creation): as if the peer had written them into our FIFO */
      for (uint32_t i = 0; i < r->S; i++)
        *fifo(r, c->credit, k, i) = (struct cts_entry){
            .addr = c->remote_rx.addr + ((uint64_t)k * r->S + i) * r->slot,
            .size = r->slot,
            .rkey = c->remote_rx.rkey,
            .tag = conn_tag(e->cfg.rank, peer),
            .idx = i};
      c->ch[k].granted = r->S;
    }
  }
  return PP_OK;
}

/* ---------------------------------------------------------------- sending */

/* Completes, in order, the application sends whose chunks have all completed. */
static enum pp_status complete_sends(struct pp_engine *e, struct conn *c, uint64_t now)
{
  while (c->sq_head < c->sq_tail) {
    struct smsg *m = &c->sq[c->sq_head % c->sq_cap];
    if (m->chunks_posted < m->nchunks || m->chunks_done < m->chunks_posted)
      return PP_OK;
    uint64_t cookie = m->m.cookie;
    enum pp_wc_status st = m->st;
    c->sq_head++;
    if (c->sq_cur < c->sq_head)
      c->sq_cur = c->sq_head;
    enum pp_status s = pp_app_send_done(e, now, cookie, st);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static void violation(struct pp_engine *e, struct conn *c, uint64_t now, const char *msg,
                      enum pp_violation_field f, uint64_t value, uint64_t limit, bool at_most);

/* May the channel's next chunk go? 1 and the destination when it may, 0 when it has no credit,
 * -1 when the CTS entry is not the one expected (torn, misplaced or forged: a protocol
 * violation, the connection has failed). The entry must name exactly slot tail mod S of the
 * peer's ring, with its key: the peer chooses where we write, never outside its slots. */
static int credit(struct pp_engine *e, struct conn *c, uint32_t k, uint64_t now, uint64_t *addr,
                  uint32_t *rkey)
{
  struct ring *r = e->ps;
  struct chan *h = &c->ch[k];
  if (!r->cts) {
    if (h->tail >= h->head + r->S)
      return 0;
    *addr = c->remote_rx.addr + ((uint64_t)k * r->S + h->tail % r->S) * r->slot;
    *rkey = c->remote_rx.rkey;
    return 1;
  }
  if (h->tail >= h->granted)
    return 0;
  const struct cts_entry *t = fifo(r, c->credit, k, h->tail);
  uint64_t want = c->remote_rx.addr + ((uint64_t)k * r->S + h->tail % r->S) * r->slot;
  if (t->idx != (uint32_t)h->tail || t->tag != conn_tag(e->cfg.rank, c->peer) ||
      t->size != r->slot || t->addr != want || t->rkey != c->remote_rx.rkey) {
    violation(e, c, now, "cts", PP_VF_CTS_ENTRY,
              t->idx != (uint32_t)h->tail ? t->idx : t->addr != want ? t->addr : t->size,
              t->idx != (uint32_t)h->tail ? (uint32_t)h->tail : t->addr != want ? want : r->slot,
              false);
    return -1;
  }
  *addr = t->addr;
  *rkey = t->rkey;
  return 1;
}

/* Posts the chunks the credits allow, in global chunk order. */
static enum pp_status tx_progress(struct pp_engine *e, struct conn *c, uint64_t now)
{
  struct ring *r = e->ps;
  while (!c->failed && c->sq_cur < c->sq_tail) {
    struct smsg *m = &c->sq[c->sq_cur % c->sq_cap];
    if (m->chunks_posted == m->nchunks) {
      c->sq_cur++;
      continue;
    }
    uint32_t k = (uint32_t)(c->g_tx % r->C);
    struct chan *h = &c->ch[k];
    uint64_t addr;
    uint32_t rkey;
    int ok = credit(e, c, k, now, &addr, &rkey);
    if (ok < 0)
      return PP_OK; /* the connection failed: the kick completes what it held */
    if (ok == 0) {
      if (!c->stalled) {
        c->stalled = true;
        c->stall_since = now;
        cstats(e, c)->credit_stalls++;
      }
      return PP_OK; /* not now: the credit update's completion resumes it */
    }
    if (h->sq_data + h->sq_credit >= r->max_send_wr)
      return PP_OK; /* a completion resumes it */
    uint32_t len = m->m.len - m->off < r->slot ? m->m.len - m->off : r->slot;
    bool last = m->chunks_posted + 1 == m->nchunks;
    struct pp_send_wr wr = {
        .wr_id = wr_id(WR_DATA, c->idx, k, c->sq_cur),
        .opcode = PP_WR_RDMA_WRITE_WITH_IMM,
        .send_flags = PP_SEND_SIGNALED,
        .num_sge = len ? 1 : 0,
        .sg_list = {{.addr = (uint64_t)(uintptr_t)(m->m.buf + m->off),
                     .length = len,
                     .lkey = len ? m->m.mr->lkey : 0}},
        .remote_addr = addr,
        .rkey = rkey,
        .imm_data = (last ? IMM_LAST : 0) | (uint32_t)(h->tail & IMM_SEQ_MASK),
    };
    enum pp_status s = (enum pp_status)e->ops->post_send(e->nic, h->qpn, &wr);
    if (s == PP_AGAIN)
      return PP_OK; /* the NIC's send queue is full: a completion resumes it */
    if (s != PP_OK)
      return s;
    stall_end(e, c, now);
    h->tail++;
    h->sq_data++;
    c->g_tx++;
    m->off += len;
    m->chunks_posted++;
    cstats(e, c)->chunks_sent++;
  }
  return PP_OK;
}

static enum pp_status publish_deferred(struct pp_engine *e);

static enum pp_status ring_send(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  struct ring *r = e->ps;
  struct conn *c = conn_of(e, m->peer);
  if (!c || (m->len && (!m->buf || !m->mr)))
    return PP_INVALID;
  if (c->sq_tail - c->sq_head == c->sq_cap)
    return PP_AGAIN;
  c->sq[c->sq_tail++ % c->sq_cap] = (struct smsg){
      .m = *m,
      .nchunks = m->len ? (uint32_t)((m->len + (uint64_t)r->slot - 1) / r->slot) : 1,
      .st = PP_WC_SUCCESS};
  if (c->failed)
    return arm_kick(e, now); /* flushed by the kick */
  enum pp_status s = tx_progress(e, c, now);
  /* the send went (or waits for credit): now the credits it overtook (reply first, at the top) */
  return s == PP_OK && r->ndeferred ? publish_deferred(e) : s;
}

/* ---------------------------------------------------------------- receiving */

/* Returns the slots consumed on channel k as credit: first the receive WQEs the sender's next
 * chunks will consume, then the head / CTS entries that let it write them. */
static enum pp_status publish(struct pp_engine *e, struct conn *c, uint32_t k)
{
  struct ring *r = e->ps;
  struct chan *h = &c->ch[k];
  uint64_t n = h->consumed - h->published;
  if (n == 0 || c->failed)
    return PP_OK;
  uint32_t first = (uint32_t)(h->published % r->S);
  uint32_t nwr = r->cts && first + n > r->S ? 2 : 1;
  if (h->sq_credit + nwr > r->credit_wr_max || h->sq_data + h->sq_credit + nwr > r->max_send_wr) {
    h->publish_blocked = true; /* credit is cumulative: the next completion publishes it all */
    return PP_OK;
  }
  for (uint64_t i = 0; i < n && !PP_BUG(&e->cfg, EARLY_CREDIT); i++) {
    enum pp_status s = post_recv_wqe(e, c, k);
    if (s != PP_OK)
      return s;
  }
  if (PP_BUG(&e->cfg, EARLY_CREDIT)) /* re-posted when the credit write completes: too late */
    h->repost_owed += (uint32_t)n;
  struct pp_send_wr wr = {
      .wr_id = wr_id(WR_CREDIT, c->idx, k, 0),
      .opcode = PP_WR_RDMA_WRITE_WITH_IMM,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .rkey = c->remote_credit.rkey,
  };
  if (!r->cts) {
    uint8_t *src = c->src + (size_t)k * r->area;
    memcpy(src, &h->consumed, sizeof(h->consumed));
    wr.sg_list[0] = (struct pp_sge){(uint64_t)(uintptr_t)src, sizeof(h->consumed), c->src_mr.lkey};
    wr.remote_addr = c->remote_credit.addr + (uint64_t)k * r->area;
    wr.imm_data = IMM_CREDIT | (uint32_t)(h->consumed & IMM_VAL_MASK);
  } else {
    /* entry idx lets the sender write its chunk idx into slot idx mod S */
    for (uint64_t idx = h->published + r->S; idx < h->consumed + r->S; idx++)
      *fifo(r, c->src, k, idx) = (struct cts_entry){
          .addr = (uint64_t)(uintptr_t)slot_ptr(r, c, k, idx),
          .size = r->slot,
          .rkey = c->rx_mr.rkey,
          .tag = conn_tag(c->peer, e->cfg.rank),
          .idx = (uint32_t)idx};
    uint32_t n1 = nwr == 2 ? r->S - first : (uint32_t)n;
    uint64_t base_local = (uint64_t)(uintptr_t)(c->src + (size_t)k * r->area);
    uint64_t base_remote = c->remote_credit.addr + (uint64_t)k * r->area;
    const uint32_t esz = sizeof(struct cts_entry);
    if (nwr == 2) { /* the wrapped head of the range: a plain write, ordered before the imm */
      struct pp_send_wr w1 = wr;
      w1.opcode = PP_WR_RDMA_WRITE;
      w1.sg_list[0] = (struct pp_sge){base_local + (uint64_t)first * esz, n1 * esz,
                                      c->src_mr.lkey};
      w1.remote_addr = base_remote + (uint64_t)first * esz;
      enum pp_status s = (enum pp_status)e->ops->post_send(e->nic, h->qpn, &w1);
      if (s != PP_OK)
        return s == PP_AGAIN ? PP_LIMIT : s;
      h->sq_credit++;
      first = 0;
    }
    uint32_t n2 = (uint32_t)n - (nwr == 2 ? n1 : 0);
    wr.sg_list[0] = (struct pp_sge){base_local + (uint64_t)first * esz, n2 * esz, c->src_mr.lkey};
    wr.remote_addr = base_remote + (uint64_t)first * esz;
    wr.imm_data = IMM_CREDIT | (uint32_t)((h->consumed + r->S) & IMM_VAL_MASK);
  }
  enum pp_status s = (enum pp_status)e->ops->post_send(e->nic, h->qpn, &wr);
  if (s != PP_OK)
    return s == PP_AGAIN ? PP_LIMIT : s; /* cannot happen: the queue was sized for it */
  h->sq_credit++;
  h->published = h->consumed;
  h->publish_blocked = false;
  cstats(e, c)->credit_updates_sent++;
  return PP_OK;
}

/* consume()'s publish of channel k, held back for the application's reply (reply first, at the
 * top); bounded by DEFER_TIMER at `now`, or done at once when no timer is left. */
static enum pp_status publish_later(struct pp_engine *e, struct conn *c, uint32_t k,
                                    uint64_t now)
{
  struct ring *r = e->ps;
  struct chan *h = &c->ch[k];
  if (h->publish_deferred)
    return PP_OK; /* cumulative: that publish returns these slots too */
  if (!r->defer_armed) {
    if (pp_engine_push_timer(e, now, PP_TIMER_PROTO, DEFER_TIMER) != PP_OK)
      return publish(e, c, k);
    r->defer_armed = true;
  }
  uint32_t id = c->idx << 8 | k;
  h->publish_deferred = true;
  if (r->defer_tail == NO_DEFER)
    r->defer_head = id;
  else
    r->c[r->defer_tail >> 8].ch[r->defer_tail & 0xff].defer_next = id;
  r->defer_tail = id;
  r->ndeferred++;
  assert(r->defer_armed && h->defer_next == NO_DEFER && r->ndeferred <= r->n * r->C);
  return PP_OK;
}

/* The deferred publishes, in the order they were deferred. */
static enum pp_status publish_deferred(struct pp_engine *e)
{
  struct ring *r = e->ps;
  while (r->defer_head != NO_DEFER) {
    uint32_t id = r->defer_head;
    struct conn *c = &r->c[id >> 8];
    struct chan *h = &c->ch[id & 0xff];
    assert(h->publish_deferred && r->ndeferred > 0);
    r->defer_head = h->defer_next;
    if (r->defer_head == NO_DEFER)
      r->defer_tail = NO_DEFER;
    h->defer_next = NO_DEFER;
    h->publish_deferred = false;
    r->ndeferred--;
    enum pp_status s = publish(e, c, id & 0xff);
    if (s != PP_OK)
      return s;
  }
  assert(r->ndeferred == 0);
  return PP_OK;
}

/* After a pass over the arrived chunks: channels with unreturned credit are idle. */
static enum pp_status idle_credit(struct pp_engine *e, struct conn *c, uint64_t now)
{
  struct ring *r = e->ps;
  for (uint32_t k = 0; k < r->C; k++) {
    struct chan *h = &c->ch[k];
    if (h->consumed == h->published || h->publish_blocked)
      continue;
    enum pp_status s = PP_OK;
    if (r->idle_ns == 0) {
      s = publish_later(e, c, k, now);
    } else if (!h->idle_timer) {
      s = pp_engine_push_timer(e, now + r->idle_ns, PP_TIMER_PROTO, c->idx << 8 | k);
      if (s == PP_OK)
        h->idle_timer = true;
      else if (s == PP_LIMIT)
        s = publish(e, c, k); /* no timer to spare: return it now */
    }
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

/* consume() takes another chunk right after the one just consumed (last: the end of its
 * message): it has arrived and a receive takes it. No reply can come before it. */
static bool pass_goes_on(const struct ring *r, const struct conn *c, bool last)
{
  const struct chan *n = &c->ch[c->g_rx % r->C];
  return n->arrived > n->consumed && c->rq_head + (last ? 1u : 0u) < c->rq_tail;
}

/* Copies arrived chunks, in global chunk order, into the posted receives. */
static enum pp_status consume(struct pp_engine *e, struct conn *c, uint64_t now)
{
  struct ring *r = e->ps;
  enum pp_status s = PP_OK;
  r->consuming = true;
  while (s == PP_OK && !c->failed && c->rq_head < c->rq_tail) {
    uint32_t k = (uint32_t)(c->g_rx % r->C);
    struct chan *h = &c->ch[k];
    if (h->arrived == h->consumed)
      break;
    const struct slot_meta *sm = &h->meta[h->consumed % r->S];
    struct rmsg *m = &c->rq[c->rq_head % c->rq_cap];
    if (sm->len > m->m.len - m->off) {
      m->st = PP_WC_LOC_LEN_ERR; /* the message is larger than the receive: truncation */
      m->off = m->m.len;
    } else {
      if (sm->len)
        memcpy(m->m.buf + m->off, slot_ptr(r, c, k, h->consumed), sm->len);
      m->off += sm->len;
    }
    bool last = sm->last;
    h->consumed++; /* the slot is released */
    c->g_rx++;
    cstats(e, c)->chunks_received++;
    if (h->consumed - h->published >= r->batch) /* the pass's last publish waits for a reply */
      s = pass_goes_on(r, c, last) ? publish(e, c, k) : publish_later(e, c, k, now);
    if (s == PP_OK && last) {
      struct rmsg done = *m;
      c->rq_head++;
      s = pp_app_recv_done(e, now, done.m.cookie, done.st, c->peer, done.m.tag, done.off);
    }
  }
  r->consuming = false;
  return s == PP_OK ? idle_credit(e, c, now) : s;
}

static enum pp_status ring_recv(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  struct ring *r = e->ps;
  struct conn *c = conn_of(e, m->peer);
  if (!c || (m->len && !m->buf))
    return PP_INVALID;
  if (c->rq_tail - c->rq_head == c->rq_cap)
    return PP_AGAIN;
  c->rq[c->rq_tail++ % c->rq_cap] = (struct rmsg){.m = *m, .st = PP_WC_SUCCESS};
  /* chunks may be waiting in the slots: consume them from the protocol's own timer, never from
   * inside the application's call */
  if (c->failed || (!r->consuming && c->ch[c->g_rx % r->C].arrived > c->ch[c->g_rx % r->C].consumed))
    return arm_kick(e, now);
  return PP_OK;
}

static enum pp_status data_arrived(struct pp_engine *e, struct conn *c, uint32_t k,
                                   const struct pp_wc *wc, uint64_t now)
{
  struct ring *r = e->ps;
  struct chan *h = &c->ch[k];
  /* an unreleased slot overwritten, a chunk larger than a slot, or out of sequence */
  if (h->arrived - h->consumed >= r->S) {
    violation(e, c, now, "data", PP_VF_SLOT, h->arrived, h->consumed + r->S - 1, true);
    return PP_OK;
  }
  if (wc->byte_len > r->slot) {
    violation(e, c, now, "data", PP_VF_BYTE_LEN, wc->byte_len, r->slot, true);
    return PP_OK;
  }
  if ((wc->imm_data & IMM_SEQ_MASK) != (uint32_t)(h->arrived & IMM_SEQ_MASK)) {
    violation(e, c, now, "data", PP_VF_SEQ, wc->imm_data & IMM_SEQ_MASK,
              h->arrived & IMM_SEQ_MASK, false);
    return PP_OK;
  }
  h->meta[h->arrived % r->S] = (struct slot_meta){wc->byte_len, (wc->imm_data & IMM_LAST) != 0};
  h->arrived++;
  return consume(e, c, now);
}

static enum pp_status credit_arrived(struct pp_engine *e, struct conn *c, uint32_t k,
                                     uint32_t imm, uint64_t now)
{
  struct ring *r = e->ps;
  struct chan *h = &c->ch[k];
  enum pp_status s = post_recv_wqe(e, c, k); /* the next credit update's WQE */
  if (s != PP_OK)
    return s;
  cstats(e, c)->credit_updates_received++;
  if (!r->cts) {
    /* The counter holds at least what this update announces (it landed before the imm), maybe
     * more: later updates may have landed too. The sender advances to the announced value only:
     * a credit is used once its update's completion has been seen, so the updates not yet seen
     * (each consuming a receive WQE) carry heads in (head, head + S], at most S of them. */
    uint64_t mem, announced = unwrap31(h->head, imm);
    memcpy(&mem, c->credit + (size_t)k * r->area, sizeof(mem));
    /* each update announces strictly more than the last, at most the chunks written */
    if (announced <= h->head || announced > h->tail) {
      violation(e, c, now, "credit", PP_VF_HEAD, announced,
                announced <= h->head ? h->head + 1 : h->tail, announced > h->head);
      return PP_OK;
    }
    if (mem > h->tail || mem < announced) {
      violation(e, c, now, "credit", PP_VF_HEAD, mem, mem < announced ? announced : h->tail,
                mem > h->tail);
      return PP_OK;
    }
    h->head = announced;
  } else {
    uint64_t end = unwrap31(h->granted, imm);
    if (end <= h->granted || end > h->tail + r->S) {
      violation(e, c, now, "credit", PP_VF_HEAD, end,
                end <= h->granted ? h->granted + 1 : h->tail + r->S, end > h->granted);
      return PP_OK;
    }
    h->granted = end;
  }
  return tx_progress(e, c, now);
}

/* ---------------------------------------------------------------- errors */

/* The connection is broken: what is queued completes with WR_FLUSH_ERR (chunks already posted
 * complete through the NIC's own flush). */
static enum pp_status flush(struct pp_engine *e, struct conn *c, uint64_t now)
{
  stall_end(e, c, now);
  for (uint64_t i = c->sq_head; i < c->sq_tail; i++) {
    struct smsg *m = &c->sq[i % c->sq_cap];
    if (m->chunks_posted < m->nchunks) {
      m->nchunks = m->chunks_posted;
      if (m->st == PP_WC_SUCCESS)
        m->st = c->fail_wc ? c->fail_wc : PP_WC_WR_FLUSH_ERR;
    }
  }
  c->sq_cur = c->sq_tail;
  enum pp_status s = complete_sends(e, c, now);
  for (uint64_t end = c->rq_tail; s == PP_OK && c->rq_head < end;) {
    struct rmsg m = c->rq[c->rq_head++ % c->rq_cap];
    s = pp_app_recv_done(e, now, m.m.cookie, c->fail_wc ? c->fail_wc : PP_WC_WR_FLUSH_ERR,
                         c->peer, m.m.tag, 0);
  }
  return s;
}

static enum pp_status fail(struct pp_engine *e, struct conn *c, uint64_t now)
{
  c->failed = true;
  return flush(e, c, now);
}

/* Untrusted peers: a write of the peer (a chunk, a credit update, a CTS entry) broke the
 * protocol. It is reported, every channel of the connection goes to ERROR, our slots and credit
 * area stop being remotely writable (deregistered), and what the connection held completes
 * with GENERAL_ERR from the protocol's timer (this may be inside an application's call). */
static void violation(struct pp_engine *e, struct conn *c, uint64_t now, const char *msg,
                      enum pp_violation_field f, uint64_t value, uint64_t limit, bool at_most)
{
  struct ring *r = e->ps;
  struct pp_violation v = {.peer = c->peer, .field = (uint8_t)f, .at_most = at_most,
                           .value = value, .limit = limit};
  snprintf(v.msg, sizeof(v.msg), "%s", msg);
  pp_engine_violation(e, now, &v);
  e->st.ring.violations++;
  if (c->failed)
    return;
  c->failed = true;
  c->fail_wc = PP_WC_GENERAL_ERR;
  stall_end(e, c, now);
  for (uint32_t k = 0; k < r->C; k++) {
    struct pp_qp_attr a = {.qp_state = PP_QPS_ERR};
    if (c->ch[k].qpn)
      e->ops->modify_qp(e->nic, c->ch[k].qpn, &a, PP_QP_STATE);
  }
  if (c->rx_mr.lkey)
    e->ops->dereg_mr(e->nic, &c->rx_mr);
  if (c->credit_mr.lkey)
    e->ops->dereg_mr(e->nic, &c->credit_mr);
  c->rx_mr = c->credit_mr = (struct pp_mr){0};
  if (arm_kick(e, now) != PP_OK) /* no timer left: it stays failed, flushed by the next kick */
    return;
}

/* ---------------------------------------------------------------- events */

static enum pp_status ring_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct ring *r = e->ps;
  enum pp_status s0 = r->ndeferred ? publish_deferred(e) : PP_OK; /* reply first, at the top */
  if (s0 != PP_OK)
    return s0;
  uint32_t kind = (uint32_t)(wc->wr_id >> WR_KIND_SHIFT);
  uint32_t ci = (uint32_t)(wc->wr_id >> WR_CONN_SHIFT) & 0xff;
  uint32_t k = (uint32_t)(wc->wr_id >> WR_CHAN_SHIFT) & 0xff;
  if (ci >= r->n || k >= r->C || r->c[ci].ch[k].qpn != wc->qp_num || kind < WR_DATA ||
      kind > WR_RECV)
    return PP_INVALID;
  struct conn *c = &r->c[ci];
  struct chan *h = &c->ch[k];
  struct smsg *m = NULL;
  if (kind == WR_DATA) {
    uint64_t seq = c->sq_head + (((wc->wr_id & WR_SEQ_MASK) - c->sq_head) & WR_SEQ_MASK);
    if (seq >= c->sq_cur + (c->sq_cur < c->sq_tail) || h->sq_data == 0)
      return PP_INVALID;
    m = &c->sq[seq % c->sq_cap];
    if (m->chunks_done >= m->chunks_posted)
      return PP_INVALID;
    h->sq_data--;
    m->chunks_done++;
  } else if (kind == WR_CREDIT) {
    if (h->sq_credit == 0)
      return PP_INVALID;
    h->sq_credit--;
    for (; h->repost_owed && wc->status == PP_WC_SUCCESS; h->repost_owed--) {
      enum pp_status s = post_recv_wqe(e, c, k);
      if (s != PP_OK)
        return s;
    }
  } else {
    if (h->rq_posted == 0)
      return PP_INVALID;
    h->rq_posted--;
  }
  if (wc->status != PP_WC_SUCCESS) {
    if (m && m->st == PP_WC_SUCCESS)
      m->st = wc->status;
    return fail(e, c, now);
  }
  if (kind != WR_RECV) {
    enum pp_status s = h->publish_blocked ? publish(e, c, k) : PP_OK;
    if (s == PP_OK && kind == WR_DATA)
      s = complete_sends(e, c, now);
    return s == PP_OK ? tx_progress(e, c, now) : s;
  }
  {
    if (wc->opcode != PP_WC_OP_RECV_RDMA_WITH_IMM || !(wc->wc_flags & PP_WC_WITH_IMM)) {
      /* only WRITE_WITH_IMM may consume our WQEs */
      violation(e, c, now, "data", PP_VF_OPCODE, wc->opcode, PP_WC_OP_RECV_RDMA_WITH_IMM, false);
      return PP_OK;
    }
    if (wc->imm_data & IMM_CREDIT)
      return credit_arrived(e, c, k, wc->imm_data, now);
    return data_arrived(e, c, k, wc, now);
  }
}

static enum pp_status ring_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct ring *r = e->ps;
  enum pp_status s0 = r->ndeferred ? publish_deferred(e) : PP_OK; /* reply first, at the top */
  if (s0 != PP_OK)
    return s0;
  if (arg == DEFER_TIMER) {
    r->defer_armed = false; /* the publishes it bounded went at the top */
    return PP_OK;
  }
  if (arg == KICK_TIMER) {
    r->kick_armed = false;
    for (uint32_t i = 0; i < r->n; i++) {
      enum pp_status s = r->c[i].failed ? flush(e, &r->c[i], now) : consume(e, &r->c[i], now);
      if (s != PP_OK)
        return s;
    }
    return PP_OK;
  }
  uint32_t ci = arg >> 8, k = arg & 0xff;
  if (ci >= r->n || k >= r->C || !r->c[ci].ch[k].idle_timer)
    return PP_INVALID;
  r->c[ci].ch[k].idle_timer = false;
  return publish(e, &r->c[ci], k);
}

static bool ring_quiet(const struct pp_engine *e)
{
  const struct ring *r = e->ps;
  for (uint32_t i = 0; i < r->n; i++)
    for (uint32_t k = 0; k < r->C; k++) {
      const struct chan *h = &r->c[i].ch[k];
      if (h->sq_data || h->sq_credit || h->publish_blocked || h->publish_deferred)
        return false;
    }
  return true;
}

/* What the connection's pending sends and receives wait for (hang reports). */
static void conn_pending(const struct ring *r, const struct conn *c, struct pp_wait *out,
                         size_t max, size_t *n)
{
  if (c->sq_cur < c->sq_tail) {
    for (uint32_t k = 0; k < r->C; k++) {
      const struct chan *h = &c->ch[k];
      uint64_t limit = r->cts ? h->granted : h->head + r->S;
      if (h->tail < limit)
        continue;
      pp_wait_add(out, max, n, PP_WAIT_RING_SLOT, c->peer, PP_WAIT_NOTAG,
                  c->stalled ? c->stall_since : 0,
                  "slot %llu of the connection to rank %u (channel %u): consumer stopped, %s "
                  "%llu, tail %llu (%u slots)", (unsigned long long)(h->tail % r->S), c->peer, k,
                  r->cts ? "granted" : "head", (unsigned long long)(r->cts ? h->granted : h->head),
                  (unsigned long long)h->tail, r->S);
    }
  } else if (c->sq_head < c->sq_tail) {
    pp_wait_add(out, max, n, PP_WAIT_SEND_WC, c->peer, PP_WAIT_NOTAG, 0,
                "%llu sends to rank %u posted, waiting for their completions",
                (unsigned long long)(c->sq_tail - c->sq_head), c->peer);
  }
  if (c->rq_head < c->rq_tail)
    pp_wait_add(out, max, n, PP_WAIT_RING_DATA, c->peer, PP_WAIT_NOTAG, 0,
                "%llu receives from rank %u wait for data (channel 0: arrived %llu, consumed "
                "%llu)", (unsigned long long)(c->rq_tail - c->rq_head), c->peer,
                (unsigned long long)c->ch[0].arrived, (unsigned long long)c->ch[0].consumed);
}

static size_t ring_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct ring *r = e->ps;
  size_t n = 0;
  for (uint32_t i = 0; r && i < r->n; i++)
    if (!r->c[i].failed) /* a failed connection's QP is in ERROR: the engine says so */
      conn_pending(r, &r->c[i], out, max, &n);
  return n;
}

const struct pp_proto_ops pp_ring_credits_ops = {
    .name = "ring-credits",
    .create = ring_create,
    .destroy = ring_destroy,
    .local_info = ring_local_info,
    .connect = ring_connect,
    .send = ring_send,
    .recv = ring_recv,
    .on_wc = ring_on_wc,
    .on_timer = ring_on_timer,
    .quiet = ring_quiet,
    .pending = ring_pending,
};

const struct pp_proto_ops pp_ring_cts_ops = {
    .name = "ring-cts",
    .create = ring_create,
    .destroy = ring_destroy,
    .local_info = ring_local_info,
    .connect = ring_connect,
    .send = ring_send,
    .recv = ring_recv,
    .on_wc = ring_on_wc,
    .on_timer = ring_on_timer,
    .quiet = ring_quiet,
    .pending = ring_pending,
};

/* ------------------------------------------------------------------ registry */

#define MEM_RING_MSG 80u    /* struct smsg / rmsg */
#define MEM_RING_CONN 2048u /* struct conn and its share of struct ring */

static enum pp_status ring_def_check(const struct pp_engine_cfg *c, const void *params,
                                     char *err, size_t errlen)
{
  (void)c;
  return pp_ring_params_check(params, err, errlen);
}

static void ring_mem_need(const struct pp_engine_cfg *c, const void *params, uint32_t npeers,
                          struct pp_mem_need *q)
{
  const struct pp_ring_params *r = params;
  q->qps = npeers * r->channels;
  q->send_wqes = (uint64_t)q->qps * (2 * r->slots + 4);
  q->recv_wqes = (uint64_t)q->qps * 2 * r->slots;
  uint64_t area = (uint64_t)r->slots * 32 + 64 + 2 * 64; /* and their alignment */
  pp_mem_add(q, (uint64_t)npeers * r->channels * r->slots * r->slot_size,
             "ring.channels, ring.slots and ring.slot_size");
  pp_mem_add(q, (uint64_t)npeers * (2 * r->channels * area + (uint64_t)r->channels * r->slots * 8 +
                                    ((uint64_t)c->qp.sq_depth + c->qp.rq_depth) * MEM_RING_MSG +
                                    MEM_RING_CONN),
             "qp.sq_depth and qp.rq_depth");
}

extern const struct pp_proto_explore pp_ring_explore; /* explore.c */

const struct pp_proto_def pp_ring_credits_def = {
    .abi = PP_PROTO_ABI,
    .name = "ring-credits",
    .desc = "slot FIFO, head credits written back",
    .params_size = sizeof(struct pp_ring_params),
    .check = ring_def_check,
    .mem_need = ring_mem_need,
    .ops = &pp_ring_credits_ops,
    .explore = &pp_ring_explore,
};

const struct pp_proto_def pp_ring_cts_def = {
    .abi = PP_PROTO_ABI,
    .name = "ring-cts",
    .desc = "slot FIFO, receiver-posted CTS entries",
    .params_size = sizeof(struct pp_ring_params),
    .check = ring_def_check,
    .mem_need = ring_mem_need,
    .ops = &pp_ring_cts_ops,
    .explore = &pp_ring_explore,
};
