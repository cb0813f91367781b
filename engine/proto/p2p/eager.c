/* p2p: matching messages (EAGER, RTS) in sequence, to their receives or unexpected; and the
 * completions (p2p_on_wc), so that the eager path's events are one function each. */
#include "p2p_impl.h"
#include "engine/proto/p2p/match_impl.h" /* the eager path's post / arrival, inline */

#include <string.h>

/* ------------------------------------------------------------------ receiving */

/* The eager fast path of the receiver: an EAGER message that arrives in sequence (`fast`)
 * goes through deliver, start_recv and eager_recv always inline, with `fast` a constant at the
 * one call site that passes true (p2p_on_eager_msg, which p2p_on_recv runs for every EAGER that
 * passed its checks), so the type tests fold and the whole receive, from the sequence check
 * to the buffer's re-post, is one function. Legal because the only thing `fast` states is the
 * message's type, which start_recv would test anyway (asserted); a message held out of order
 * behind it, of either type, goes the general way (deliver_run). */
#define RECV_INLINE static inline __attribute__((always_inline))

/* An EAGER message matched receive r (x: its buffer): copied, ACKed when synchronous. */
RECV_INLINE enum pp_status eager_recv(struct pp_engine *e, uint64_t now, struct req *r,
                                      struct rx *x, bool fast)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  r->proto = PP_P2P_EAGER;
  if (r->got)
    memcpy(r->buf, (const uint8_t *)h + HDR, r->got);
  if (h->flags & F_SYNC) {
    struct hdr a = {.type = M_ACK, .sreq = h->sreq};
    p->st.sync_acks++;
    enum pp_status s = p2p_send_reply(e, x->ch, &a, 0, 0, 1);
    if (s != PP_OK)
      return s;
  }
  if (r->state != RQ_DONE) /* else failed with its peer: the ACK could not be posted */
    p2p_complete_as(e, now, r, true); /* (start_recv made it ACTIVE) */
  return fast ? p2p_release_rx_inline(e, x) : p2p_release_rx(e, x);
}

/* eager_recv out of line: the general path's (an EAGER taken by irecv from the unexpected
 * queue, or delivered after a message held out of order). */
static __attribute__((noinline)) enum pp_status eager_recv_call(struct pp_engine *e, uint64_t now,
                                                                struct req *r, struct rx *x)
{
  return eager_recv(e, now, r, x, false);
}

/* Receive r matched the message in x: it takes the message's source, tag and length. */
RECV_INLINE enum pp_status start_recv(struct pp_engine *e, uint64_t now, struct req *r,
                                      struct rx *x, bool fast)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  bool eager = fast || h->type == M_EAGER;
  assert(!fast || h->type == M_EAGER);
  if (!eager)
    p2p_rndv_clear(r);
  r->peer = c->peer;
  r->ch = x->ch;
  r->src = p->peer[c->peer].rank;
  r->mtag = h->tag;
  r->ctx = h->ctx;
  r->msg_len = h->len;
  r->got = h->len < r->len ? h->len : r->len;
  r->err = h->len > r->len ? PP_P2P_E_TRUNCATED : PP_P2P_E_OK;
  r->peer_req = h->sreq;
  p2p_req_move(p, r, RQ_PENDING, RQ_ACTIVE); /* (posted, or just made by irecv) */
  if (fast)
    return eager_recv(e, now, r, x, true);
  if (eager)
    return eager_recv_call(e, now, r, x);
  return p2p_rndv_start(e, now, r, x);
}

enum pp_status p2p_start_recv(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x)
{
  return start_recv(e, now, r, x, false);
}

/* A matching message, in sequence: to its receive, or into the unexpected queue. */
RECV_INLINE enum pp_status deliver(struct pp_engine *e, uint64_t now, struct rx *x, bool fast)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  uint32_t rank = p->peer[p->ch[x->ch].peer].rank;
  if (h->flags & F_ABORT) /* a send given up: it only held its place in the sequence */
    return p2p_release_rx(e, x);
  struct pp_mentry *m = pp_match_arrive_inline(&p->match, h->ctx, rank, h->tag);
  if (m) {
    struct req *r = pp_container_of(m, struct req, me);
    r->flags &= ~R_POSTED;
    return start_recv(e, now, r, x, fast);
  }
  x->state = RX_HELD;
  p->st.unexpected++;
  if (++p->nheld > p->st.unexpected_max)
    p->st.unexpected_max = p->nheld;
  return pp_match_add_unexpected(&p->match, &x->me, h->ctx, rank, h->tag);
}

/* Peer pe's next message in sequence was just delivered (with status s): the next one held
 * out of order, if it is the one that follows now, else NULL. */
static inline struct rx *next_in_seq(struct p2p *p, struct peer *pe, enum pp_status s)
{
  pe->recv_seq++;
  if (s != PP_OK || !pe->ooo || rx_hdr(p, pe->ooo)->seq != pe->recv_seq)
    return NULL;
  struct rx *x = pe->ooo;
  pe->ooo = x->ooo_next;
  return x;
}

/* x, in sequence, then the messages held out of order that follow it (any type). */
RECV_INLINE enum pp_status deliver_run(struct pp_engine *e, uint64_t now, struct peer *pe,
                                       struct rx *x)
{
  struct p2p *p = P2P(e);
  for (;;) {
    enum pp_status s = deliver(e, now, x, false);
    struct rx *n = next_in_seq(p, pe, s);
    if (!n)
      return s;
    x = n;
  }
}

/* deliver_run out of line: after an EAGER of the fast path, the messages held behind it. */
static __attribute__((noinline)) enum pp_status deliver_run_call(struct pp_engine *e,
                                                                 uint64_t now, struct peer *pe,
                                                                 struct rx *x)
{
  return deliver_run(e, now, pe, x);
}

/* x (from peer pe) arrived before an earlier message of its peer (it came on another channel):
 * held, sorted by sequence number, until the gap closes. */
static enum pp_status hold_ooo(struct pp_engine *e, uint64_t now, struct peer *pe, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct rx **pp = &pe->ooo;
  while (*pp && (int32_t)(rx_hdr(p, *pp)->seq - h->seq) < 0)
    pp = &(*pp)->ooo_next;
  if (*pp && rx_hdr(p, *pp)->seq == h->seq) /* a second message with this number */
    return p2p_violation(e, now, x, h->type, PP_VF_SEQ, h->seq, pe->recv_seq, false);
  p->st.out_of_order++;
  p->ch[x->ch].inuse++;
  x->state = RX_HELD;
  x->ooo_next = *pp;
  *pp = x;
  return PP_OK;
}

/* x's peer: in sequence (x may be delivered now: it holds a buffer and a credit till it is
 * consumed), else NULL (held out of order by hold_ooo). */
static inline struct peer *in_seq(struct p2p *p, struct rx *x)
{
  struct chan *c = &p->ch[x->ch];
  struct peer *pe = &p->peer[c->peer];
  if (rx_hdr(p, x)->seq != pe->recv_seq) /* an earlier one is on its way on another channel */
    return NULL;
  c->inuse++;
  x->state = RX_HELD;
  return pe;
}

/* A matching message that passed the checks (p2p_on_recv). */
static enum pp_status p2p_on_match_msg(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  struct peer *pe = in_seq(p, x);
  if (!pe)
    return hold_ooo(e, now, &p->peer[p->ch[x->ch].peer], x);
  return deliver_run(e, now, pe, x);
}

/* The eager fast path (see RECV_INLINE): an EAGER message that arrives in sequence is delivered
 * by the specialised deliver; what follows it out of order, by the general one. Inline in
 * p2p_on_recv. */
RECV_INLINE enum pp_status p2p_on_eager_msg(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  assert(rx_hdr(p, x)->type == M_EAGER);
  struct peer *pe = in_seq(p, x);
  if (!pe)
    return hold_ooo(e, now, &p->peer[p->ch[x->ch].peer], x);
  enum pp_status s = deliver(e, now, x, true);
  struct rx *n = next_in_seq(p, pe, s);
  return n ? deliver_run_call(e, now, pe, n) : s;
}

/* ------------------------------------------------------------------ the wire checks */

/* A matching message (EAGER, RTS) as its header says: its length against the bytes that came,
 * its flags, its tag and its sequence number against the window the credits allow (every
 * message of the peer not yet delivered holds one of the credits of its channel). Static: it
 * is inlined into p2p_on_recv, the eager path's (wire checks and delivery in one function). */
static enum pp_status check_match_msg(struct pp_engine *e, uint64_t now, struct rx *x,
                                      const struct hdr *h, uint32_t body)
{
  struct p2p *p = P2P(e);
  const struct peer *pe = &p->peer[p->ch[x->ch].peer];
  uint32_t window = p->window, d = h->seq - pe->recv_seq;
  if (h->type == M_EAGER) {
    if (h->len != body)
      return p2p_violation(e, now, x, h->type, PP_VF_LEN, h->len, body, false);
    if (h->len > p->prm.eager_limit)
      return p2p_violation(e, now, x, h->type, PP_VF_LEN, h->len, p->prm.eager_limit, true);
    if (h->flags & ~F_SYNC)
      return p2p_violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_SYNC, true);
  } else {
    if (body)
      return p2p_violation(e, now, x, h->type, PP_VF_BYTE_LEN, body + HDR, HDR, false);
    if (h->len <= p->prm.eager_limit || h->len > PP_MAX_MSG_SIZE)
      return p2p_violation(e, now, x, h->type, PP_VF_LEN, h->len,
                           h->len > PP_MAX_MSG_SIZE ? PP_MAX_MSG_SIZE : p->prm.eager_limit + 1ull,
                           h->len > PP_MAX_MSG_SIZE);
    if ((h->flags & ~(F_SYNC | F_RGET | F_ABORT | F_FIN)) ||
        ((h->flags & F_RGET) != 0) != (h->len <= p->prm.rget_limit))
      return p2p_violation(e, now, x, h->type, PP_VF_FLAGS, h->flags,
                           h->len <= p->prm.rget_limit ? F_RGET : 0, false);
  }
  if (h->tag == PP_ANY_TAG)
    return p2p_violation(e, now, x, h->type, PP_VF_TAG, h->tag, PP_ANY_TAG - 1ull, true);
  if (d >= window)
    return p2p_violation(e, now, x, h->type, PP_VF_SEQ, h->seq, pe->recv_seq + (uint64_t)window - 1,
                         true);
  return PP_OK;
}

/* A received message: the header checked against the receiver's state (untrusted peers), its
 * credits, then by type. Inline in p2p_on_wc, with p2p_on_eager_msg: the eager path, from the
 * completion to the buffer's re-post and the callback, is one function. */
RECV_INLINE enum pp_status p2p_on_recv(struct pp_engine *e, uint64_t now, struct rx *x,
                                       const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  if (wc->byte_len < HDR) /* the rest of the header is an older message's: never read it */
    return p2p_violation(e, now, x, 0, PP_VF_BYTE_LEN, wc->byte_len, HDR, false);
  /* Credits handed back: none at all (every message the receiver of a one-way stream gets)
   * passes every check and changes nothing (the pools are never exceeded: D - credits and
   * R - rcredits are >= 0), so the checks are for a header that hands some back. */
  if (h->credits | h->rcredits) {
    bool blind = p->srq && PP_BUG(&e->cfg, SRQ_NO_CREDITS); /* test bug: credits not counted */
    if (h->credits > p->D - c->credits && !blind)
      return p2p_violation(e, now, x, h->type, PP_VF_CREDITS, h->credits, p->D - c->credits,
                           true);
    if (h->rcredits > p->R - c->rcredits)
      return p2p_violation(e, now, x, h->type, PP_VF_RCREDITS, h->rcredits, p->R - c->rcredits,
                           true);
    /* the blind test bug tops up to the pool instead of refusing the excess */
    p2p_chan_credits(p, c, blind && h->credits > p->D - c->credits ? p->D - c->credits
                                                                     : h->credits);
    p2p_chan_rcredits(p, c, h->rcredits);
    c->seen += h->credits;
  }
  assert(c->credits <= p->D && c->rcredits <= p->R); /* never above the pools (checked above) */
  struct req *r;
  enum pp_status s;
  if (p->srq && x->pool != (h->type == M_EAGER || h->type == M_RTS)) /* srq.c: on its QP */
    return p2p_violation(e, now, x, h->type, PP_VF_TYPE, h->type, x->pool ? M_RTS : M_CREDIT,
                         true);
  if (h->type == M_EAGER || h->type == M_RTS) { /* (before the switch: two tests, no table) */
    if (x->pool && ((s = p2p_srq_arrive(e, now, x, h)) != PP_OK || x->state == RX_DEAD))
      return s;
    if ((s = check_match_msg(e, now, x, h, wc->byte_len - HDR)) != PP_OK || x->state == RX_DEAD)
      return s;
    if (h->type == M_EAGER)
      return p2p_on_eager_msg(e, now, x);
    if ((h->flags & F_FIN) && !p2p_fin_carried(e, now, x, h))
      return PP_OK; /* (the peer failed: x went with it) */
    return p2p_on_match_msg(e, now, x);
  }
  switch (h->type) {
  case M_CTS:
    return p2p_on_cts(e, now, x, h);
  case M_FIN:
    return p2p_on_fin(e, now, x, h);
  case M_ACK:
    r = p2p_reply_req(p, h->sreq, K_SEND, c->peer);
    if (!r || r->proto != PP_P2P_EAGER || !(r->flags & R_SYNC) || !r->await)
      return p2p_violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
    r->await = false;
    p2p_maybe_complete_active(e, now, r); /* (p2p_reply_req: ACTIVE) */
    return p2p_reply_consumed(e, x);
  case M_CREDIT:
    return p2p_post_rx(e, x);
  default:
    return p2p_violation(e, now, x, h->type, PP_VF_TYPE, h->type, M_CREDIT, true);
  }
}

/* ------------------------------------------------------------------ completions */

/* The run of unsignalled SENDs (n of them, from t) that a signalled one's completion covers
 * (p2p_impl.h: selective signalling): their send buffers are free again. */
static __attribute__((noinline)) void run_done(struct p2p *p, uint32_t t, uint32_t n)
{
  for (; n > 0; n--) {
    uint32_t next = p->tx[t].rnext;
    assert(p->tx[t].held && p->tx[t].req == 0);
    tx_free(p, t);
    t = next;
  }
}

/* The completion of tx slot idx (a SEND: EAGER, RTS or a control message). */
static enum pp_status tx_done(struct pp_engine *e, uint64_t now, const struct pp_wc *wc,
                              uint32_t idx)
{
  struct p2p *p = P2P(e);
  if (idx >= p->big.n + p->small.n)
    return PP_INVALID;
  struct tx x = p->tx[idx];
  if (x.held | x.run) { /* (one test: the rare ones, selective signalling, p2p_impl.h) */
    if (x.held) { /* unsignalled, so failed or flushed: the signalled one after it frees it */
      if (wc->status != PP_WC_SUCCESS)
        p2p_fail_channel(e, now, x.ch, wc->qp_num, (uint8_t)wc->status);
      return PP_OK;
    }
    run_done(p, x.rnext, x.run);
  }
  struct chan *c = &p->ch[x.ch];
  uint32_t *sq = p2p_on_dqp(p, x.type) ? &c->dsq_used : &c->sq_used;
  p2p_sq_release(p, c, sq, x.nwr, e->cfg.qp.sq_depth);
  tx_free(p, idx);
  struct req *r = x.req ? req_of(p, x.req) : NULL;
  if (wc->status != PP_WC_SUCCESS) {
    p2p_fail_channel(e, now, x.ch, wc->qp_num, (uint8_t)wc->status);
    return PP_OK;
  }
  if (!r || r->kind != K_SEND || r->state != RQ_ACTIVE)
    return PP_OK;
  assert(r->wrs > 0);
  r->wrs--;
  if (x.type == M_FIN && x.slot != 0xff && r->rce[x.slot])
    p2p_put_rce(p, r, x.slot);
  if (x.type == M_FIN && r->fnext == r->nfrag && r->fq_n == 0)
    r->await = false;
  p2p_maybe_complete_active(e, now, r); /* (ACTIVE: tested above) */
  return PP_OK;
}

static enum pp_status on_send_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  uint32_t kind = WR_KIND(wc->wr_id), idx = WR_IDX(wc->wr_id);
  if (kind == W_TX)
    return tx_done(e, now, wc, idx);
  if (idx >= p->prm.max_requests || (kind != W_READ && kind != W_WRITE))
    return PP_INVALID;
  struct req *r = &p->req[idx];
  /* not ours any more: the request failed with its peer while the WR was in flight (stale) */
  if (r->gen != WR_GEN(wc->wr_id) || r->state != RQ_ACTIVE)
    return PP_OK;
  return kind == W_READ ? p2p_read_done(e, now, r, wc) : p2p_write_done(e, now, r, wc);
}

/* A completion (pp_proto_ops.on_wc): here, with the receive path, so that an EAGER message's
 * event, from the completion to its callback, is one function. */
enum pp_status p2p_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  enum pp_status s = p2p_event_start(e, now);
  if (s != PP_OK)
    return p2p_finish(e, now, s);
  if (WR_KIND(wc->wr_id) == W_RECV) {
    uint32_t i = WR_IDX(wc->wr_id);
    struct rx *x = i < p->ntotal_rx ? &p->rx[i] : p->srq ? p2p_srq_rx(e, i, wc) : NULL;
    if (!x || x->state != RX_POSTED) {
      s = PP_INVALID;
    } else if (wc->status != PP_WC_SUCCESS) {
      if (x->pool) /* consumed by a message it could not take: back to the SRQ */
        p2p_srq_recycle(e, x);
      else
        x->state = RX_HELD; /* flushed: never re-posted */
      p2p_fail_channel(e, now, x->ch, wc->qp_num, (uint8_t)wc->status);
      s = PP_OK;
    } else {
      s = p2p_on_recv(e, now, x, wc);
    }
  } else {
    s = on_send_wc(e, now, wc);
  }
  return p2p_finish(e, now, s);
}
