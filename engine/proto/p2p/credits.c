/* p2p: posting, credit accounting, the control queues, and starting the parked sends. */
#include "p2p_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ posting */

enum pp_status p2p_post_rx(struct pp_engine *e, struct rx *r)
{
  return p2p_rx_repost(e, r);
}

/* The NIC refused the SEND of tx slot t: what post_tx did is undone (the send-queue slot, the
 * credits its header handed back stay owed) and the slot is free again. */
static void unpost_tx(struct pp_engine *e, uint32_t t)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = (const struct hdr *)(const void *)tx_buf(p, t);
  struct chan *c = &p->ch[p->tx[t].ch];
  uint32_t *sq = p2p_on_dqp(p, h->type) ? &c->dsq_used : &c->sq_used;
  assert(*sq > 0);
  p2p_sq_release(p, c, sq, 1, e->cfg.qp.sq_depth);
  c->given -= h->credits;
  c->owed += h->credits;
  c->rowed += h->rcredits;
  if (h->type != M_CREDIT)
    p->st.credits_piggybacked -= h->credits + h->rcredits;
  tx_free(p, t);
}

/* SEND t was posted on channel ci's QP (p2p_impl.h: selective signalling): unsignalled, it
 * joins the open run; signalled, it takes the run over (its completion frees the run's slots). */
static inline void run_posted(struct p2p *p, uint32_t ci, uint32_t t, bool sig)
{
  struct tx *x = &p->tx[t];
  assert(p->urun_n == 0 || p->urun_ch == ci); /* (one run open at a time: eager_signal) */
  if (!sig) {
    x->held = true;
    x->rnext = p->urun;
    p->urun = t;
    p->urun_ch = ci;
    p->urun_n++;
  } else if (p->urun_n) {
    assert(p->urun_n < SIG_EVERY);
    x->rnext = p->urun;
    x->run = (uint8_t)p->urun_n;
    x->nwr = (uint16_t)(x->nwr + p->urun_n);
    p->urun = NO_TX;
    p->urun_n = 0;
  }
}

/* Posts tx slot t (its header h already filled) with `len` bytes from the pool whose
 * registration has lkey, signalled unless `!sig` (an EAGER of the fast path only: p2p_impl.h,
 * selective signalling); hands back the owed credits. A refused SEND leaves nothing behind
 * (unpost_tx): the caller decides what fails. Inline in its two callers (start_first: every
 * EAGER and RTS; post_tx: the control messages, never `fast`: see start_first). */
static inline __attribute__((always_inline)) enum pp_status
post_tx_hdr(struct pp_engine *e, struct p2p *p, uint32_t t, struct hdr *h, uint32_t len,
            uint32_t lkey, bool fast, bool sig)
{
  uint32_t ci = p->tx[t].ch;
  struct chan *c = &p->ch[ci];
  uint32_t owed = c->owed, rowed = c->rowed;
  h->credits = (uint16_t)owed;
  h->rcredits = (uint16_t)rowed;
  if (c->credit_pending) /* the CREDIT it waits to send may be piggy-backed now */
    p2p_ctrl_wake(p, ci);
  if (h->type != M_CREDIT)
    p->st.credits_piggybacked += owed + rowed;
  c->given += owed;
  c->owed = c->rowed = 0;
  bool dq = !fast && p2p_on_dqp(p, h->type); /* (fast, the eager path's: no srq) */
  uint32_t *sq = dq ? &c->dsq_used : &c->sq_used;
  struct pp_send_wr *wr = &p->txwr; /* the rest of it stays zero (p2p_impl.h) */
  wr->wr_id = WRID(W_TX, 0, t);
  wr->opcode = PP_WR_SEND;
  wr->send_flags = sig ? PP_SEND_SIGNALED : 0;
  wr->num_sge = 1;
  wr->sg_list[0] = (struct pp_sge){.addr = (uint64_t)(uintptr_t)h, .length = len, .lkey = lkey};
  (*sq)++;
  assert(*sq <= e->cfg.qp.sq_depth); /* every caller checked for room */
  assert(sig || (fast && *sq < e->cfg.qp.sq_depth)); /* (eager_signal) */
  enum pp_status s = (enum pp_status)e->ops->post_send(e->nic, dq ? c->dqpn : c->qpn, wr);
  if (s != PP_OK) {
    unpost_tx(e, t);
    return s;
  }
  if (fast) /* (only an EAGER of the fast path opens or closes a run: see eager_signal) */
    run_posted(p, ci, t, sig);
  assert(fast || p->urun_n == 0);
  return PP_OK;
}

/* post_tx_hdr for tx slot t, from its pool. */
static enum pp_status post_tx(struct pp_engine *e, uint32_t t, uint32_t len)
{
  struct p2p *p = P2P(e);
  return post_tx_hdr(e, p, t, (struct hdr *)(void *)tx_buf(p, t), len, tx_mr(p, t)->lkey,
                     false, true);
}

/* A due CREDIT message on channel c (it needs no credit); a refused one fails the peer. */
static void flush_credit(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  c->credit_pending = false;
  if (!p2p_credit_due(p, c)) /* piggy-backed meanwhile */
    return;
  uint32_t t = tx_alloc(p, &p->small);
  if (t == NO_TX) {
    c->credit_pending = true;
    p->ctrl_tx_wait = true;
    return;
  }
  struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
  *h = (struct hdr){.type = M_CREDIT};
  p->tx[t] = (struct tx){.next = NO_TX, .ch = (uint32_t)(c - p->ch), .nwr = 1, .type = M_CREDIT};
  p->st.credit_msgs++;
  if (post_tx(e, t, HDR) != PP_OK) {
    p->st.credit_msgs--;
    p2p_post_refused(e, (uint32_t)(c - p->ch));
  }
}

/* Posts what channel c may: a due CREDIT message first, then the queued replies while reply
 * credits and send-queue slots last. A control message the NIC refuses fails the peer: its
 * credits or its replies would be lost, and the peer's requests would wait for them forever. */
static enum pp_status flush_ctrl_1(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  if (c->failed)
    return PP_OK;
  if (c->credit_pending && c->sq_used < e->cfg.qp.sq_depth)
    flush_credit(e, c);
  while (!c->failed && c->cq_head != NO_TX && c->sq_used < e->cfg.qp.sq_depth &&
         c->rcredits > 0) {
    uint32_t t = c->cq_head;
    c->cq_head = p->tx[t].next;
    if (c->cq_head == NO_TX)
      c->cq_tail = NO_TX;
    p->tx[t].next = NO_TX;
    c->rcredits--;
    if (post_tx(e, t, HDR) != PP_OK) {
      p2p_chan_rcredits(p, c, 1);
      p2p_post_refused(e, (uint32_t)(c - p->ch));
    }
  }
  return PP_OK;
}

/* Sends what channel c owes and can send now; ctrl_due says whether anything is left (it
 * waits for a p2p_ctrl_wake, not ready). */
enum pp_status p2p_flush_ctrl(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  enum pp_status s = flush_ctrl_1(e, c);
  uint32_t i = (uint32_t)(c - p->ch), w = i / 64;
  uint64_t bit = 1ull << (i % 64);
  if (p2p_ctrl_left(c))
    p->ctrl_due[w] |= bit;
  else
    p->ctrl_due[w] &= ~bit;
  if ((p->ctrl_ready[w] & bit) && (p->ctrl_ready[w] &= ~bit) == 0)
    p->ctrl_sum &= (uint8_t)~(1u << w);
  return s;
}

/* A small-pool tx slot holding reply h (copied); NO_TX when the pool is empty. */
static uint32_t reply_tx(struct p2p *p, uint32_t ch, const struct hdr *h, uint64_t req,
                         uint8_t slot, uint16_t nwr)
{
  uint32_t t = tx_alloc(p, &p->small);
  if (t == NO_TX)
    return NO_TX;
  memcpy(tx_buf(p, t), h, HDR);
  p->tx[t] = (struct tx){.next = NO_TX, .ch = ch, .req = req, .nwr = nwr, .type = h->type,
                         .slot = slot};
  return t;
}

/* tx slot t joins the tail of a list of tx slots linked by tx.next (a control queue, the
 * deferred FINs). */
static void tx_append(struct p2p *p, uint32_t *head, uint32_t *tail, uint32_t t)
{
  assert(p->tx[t].next == NO_TX);
  if (*tail == NO_TX)
    *head = t;
  else
    p->tx[*tail].next = t;
  *tail = t;
}

/* Reply slot t joins the tail of channel c's control queue and goes when it can. */
static enum pp_status queue_reply(struct pp_engine *e, struct chan *c, uint32_t t)
{
  tx_append(P2P(e), &c->cq_head, &c->cq_tail, t);
  return p2p_flush_ctrl(e, c);
}

/* Queues a reply (CTS, FIN, ACK) on channel ch; h is copied. It leaves with a reply credit. */
enum pp_status p2p_send_reply(struct pp_engine *e, uint32_t ch, const struct hdr *h,
                              uint64_t req, uint8_t slot, uint16_t nwr)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return PP_OK;
  uint32_t t = reply_tx(p, ch, h, req, slot, nwr);
  if (t == NO_TX)
    return PP_LIMIT; /* cannot happen: the pool covers every reply that can be owed */
  return queue_reply(e, c, t);
}

/* An RGET FIN h on channel ch, held back until the application's next send or the flush timer
 * at `now` (p2p_impl.h: reply first). No timer to spare: it is queued at once. */
enum pp_status p2p_defer_reply(struct pp_engine *e, uint64_t now, uint32_t ch,
                               const struct hdr *h)
{
  struct p2p *p = P2P(e);
  if (p->ch[ch].failed)
    return PP_OK;
  if (!p->flush_armed) {
    if (pp_engine_push_timer(e, now, PP_TIMER_PROTO, FLUSH_TIMER) != PP_OK)
      return p2p_send_reply(e, ch, h, 0, 0, 1);
    p->flush_armed = true;
  }
  uint32_t t = reply_tx(p, ch, h, 0, 0, 1);
  if (t == NO_TX)
    return PP_LIMIT; /* cannot happen: the pool covers every reply that can be owed */
  tx_append(p, &p->defer_head, &p->defer_tail, t);
  p->ch[ch].defer_fin = t; /* the channel's next RTS may carry it (p2p_impl.h: carried) */
  assert(p->flush_armed); /* what bounds its wait */
  return PP_OK;
}

/* The deferred FINs join their channels' control queues, in the order they were deferred (a
 * failed channel's are dropped: its control queue would drop them; one an RTS carried, type 0,
 * is done). */
enum pp_status p2p_flush_deferred(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  enum pp_status s = PP_OK;
  while (p->defer_head != NO_TX) {
    uint32_t t = p->defer_head;
    p->defer_head = p->tx[t].next;
    p->tx[t].next = NO_TX;
    struct chan *c = &p->ch[p->tx[t].ch];
    c->defer_fin = NO_TX;
    if (c->failed || p->tx[t].type == 0) {
      tx_free(p, t);
      continue;
    }
    enum pp_status f = queue_reply(e, c, t);
    if (s == PP_OK)
      s = f;
  }
  p->defer_tail = NO_TX;
  return s;
}

enum pp_status p2p_credits_due(struct pp_engine *e, uint32_t ch)
{
  return p2p_chan_credits_due(e, &P2P(e)->ch[ch]);
}

/* A reply was consumed: its buffer goes back at once, a reply credit is owed. */
enum pp_status p2p_reply_consumed(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  enum pp_status s = p2p_post_rx(e, r);
  p->ch[r->ch].rowed++;
  return s == PP_OK ? p2p_credits_due(e, r->ch) : s;
}

/* A consumed buffer goes back to the NIC (p2p_impl.h: p2p_release_rx_inline). */
enum pp_status p2p_release_rx(struct pp_engine *e, struct rx *r)
{
  return p2p_release_rx_inline(e, r);
}

/* ------------------------------------------------------------------ sending */

/* The eager fast path: an EAGER message without p2p.srq (`fast`) starts through the same
 * helpers as every other send, always inline, with `fast` a constant at the one call site that
 * passes true (start_sends), so the compiler drops what such a message never needs: the data QP
 * and its `want` (srq), an RGET's registration and its abort, the small pool, the rendezvous
 * fields. Legal because each of those branches depends on r->proto and p->srq alone, which is
 * what `fast` states (asserted in start_first). */
#define SEND_INLINE static inline __attribute__((always_inline))

/* A channel to peer pe with a data credit and send-queue room, round robin; UINT32_MAX: none.
 * (srq: the data QP's send queue; test bug srq-no-credits: no credit needed.) */
SEND_INLINE uint32_t send_channel(const struct pp_engine *e, const struct p2p *p,
                                  const struct peer *pe, bool fast)
{
  uint32_t depth = e->cfg.qp.sq_depth, n = p->prm.channels;
  if (!fast && p->srq) {
    const struct chan *c = &p->ch[pe->ch0]; /* srq: one channel */
    bool credit = c->credits || PP_BUG(&e->cfg, SRQ_NO_CREDITS);
    return credit && c->dsq_used < depth ? pe->ch0 : UINT32_MAX;
  }
  if (n == 1) { /* the common case: no round robin */
    const struct chan *c = &p->ch[pe->ch0];
    return c->credits && c->sq_used < depth ? pe->ch0 : UINT32_MAX;
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = pe->ch0 + (pe->next_ch + k) % n;
    const struct chan *c = &p->ch[i];
    if (c->credits && c->sq_used < depth)
      return i;
  }
  return UINT32_MAX;
}

/* The send buffer of r's EAGER or RTS on channel ch (none: UINT32_MAX) from *pool and, for an
 * RGET, the registration that exposes r's buffer; NO_TX when r must wait (*wait: the peer's bit
 * of the wait mask that says for what, none for a registration). *abort: that registration
 * failed and none of ours will ever be released (the RTS goes only to keep the sequence). */
SEND_INLINE uint32_t send_resources(struct pp_engine *e, struct p2p *p, const struct req *r,
                                    uint32_t ch, struct txpool **pool, struct pp_mr *xmr,
                                    bool *abort, uint64_t **wait, bool fast)
{
  if (ch == UINT32_MAX) {
    *wait = &p->wait_chan;
    return NO_TX;
  }
  *pool = (fast || r->proto == PP_P2P_EAGER) && r->len > 0 ? &p->big : &p->small;
  uint32_t t = tx_alloc(p, *pool);
  if (t == NO_TX)
    *wait = &p->wait_tx;
  if (!fast && t != NO_TX && r->proto == PP_P2P_RNDV_GET &&
      p2p_reg_xmr(e, r->buf, r->len, PP_ACCESS_REMOTE_READ, xmr) != PP_OK) {
    *abort = p->nregs == 0; /* no registration of ours left to wait for */
    if (!*abort) {
      tx_free(p, t);
      t = NO_TX;
    }
  }
  return t;
}

/* r stays first in its peer's line (counted once as parked). */
static void park(struct p2p *p, struct req *r)
{
  if (!(r->flags & R_PARKED)) {
    r->flags |= R_PARKED;
    p->st.parked++;
  }
}

/* r leaves its peer's line and starts on channel ch, with one of its data credits. */
SEND_INLINE void send_begin(struct p2p *p, struct peer *pe, struct req *r, uint32_t ch,
                            struct pp_mr xmr, bool fast)
{
  assert(pe == &p->peer[r->peer]);
  pe->pend_head = r->next;
  if (!pe->pend_head) {
    pe->pend_tail = NULL;
    p->pend_mask &= ~(1ull << r->peer);
  }
  assert(p->npending > 0);
  p->npending--;
  assert(p->ch[ch].credits > 0 || p->srq);
  if (p->ch[ch].credits) /* (none only under test bug srq-no-credits) */
    p->ch[ch].credits--;
  if (p->prm.channels > 1)
    pe->next_ch = (ch - pe->ch0 + 1) % p->prm.channels;
  r->ch = ch;
  p2p_req_move(p, r, RQ_PENDING, RQ_ACTIVE); /* (the first in its peer's line) */
  bool eager = fast || r->proto == PP_P2P_EAGER;
  if (!eager)
    p2p_rndv_clear(r);
  r->wrs = 1;
  r->await = !eager || (r->flags & R_SYNC);
  if (!fast && xmr.lkey) { /* (else xmr[0] is empty already, as in every request that starts) */
    r->xmr[0] = xmr;
    p2p_reg_held(p, r);
  }
  p->st.sent[r->proto]++;
}

/* Fills send buffer t (its header h) with r's EAGER (header and payload) or RTS; returns its
 * length. Every byte of the header is written (the fields it does not use are 0). */
SEND_INLINE uint32_t send_header(struct p2p *p, const struct req *r, uint32_t t, struct hdr *h,
                                 uint32_t rkey, bool abort, bool sig, bool fast)
{
  uint64_t handle = handle_of(p, r);
  bool eager = fast || r->proto == PP_P2P_EAGER;
  uint8_t type = eager ? M_EAGER : M_RTS;
  *h = (struct hdr){
      .type = type,
      .flags = (uint8_t)(((r->flags & R_SYNC) ? F_SYNC : 0) |
                         (!fast && r->proto == PP_P2P_RNDV_GET ? F_RGET : 0) |
                         (!fast && abort ? F_ABORT : 0)),
      .ctx = r->ctx,
      .seq = r->seq,
      .tag = r->tag,
      .len = r->len,
      .sreq = handle,
      .addr = (uint64_t)(uintptr_t)r->buf,
      .rkey = rkey,
  };
  uint32_t fin = fast || eager ? NO_TX : p->ch[r->ch].defer_fin;
  if (fin != NO_TX) { /* it carries the channel's deferred FIN (p2p_impl.h: carried) */
    assert(p->tx[fin].type == M_FIN && p->tx[fin].ch == r->ch);
    h->flags |= F_FIN;
    h->rreq = ((const struct hdr *)tx_buf(p, fin))->sreq;
  }
  if (!fast && p->srq) { /* what the credits do not cover of the sends queued behind r (srq.c) */
    const struct chan *c = &p->ch[r->ch];
    uint32_t behind = p->peer[r->peer].send_seq - r->seq - 1;
    uint32_t want = behind > c->credits ? behind - c->credits : 0;
    h->want = (uint16_t)(want > UINT16_MAX ? UINT16_MAX : want);
    h->nfrag = c->seen;
  }
  uint32_t len = HDR;
  if (eager && r->len) {
    memcpy((uint8_t *)h + HDR, r->buf, r->len);
    len += r->len;
  }
  /* (the slot is as tx_alloc left it: next NO_TX, every other field 0) */
  struct tx *x = &p->tx[t];
  assert(x->next == NO_TX && !x->req && !x->nwr && !x->type && !x->run && !x->held);
  x->ch = (uint16_t)r->ch;
  x->nwr = 1;
  x->type = type;
  if (sig && (fast || !abort)) /* (an unsignalled EAGER's request completes once posted) */
    x->req = handle;
  return len;
}

/* Channel ch's deferred FIN went in the RTS just posted: its tx slot, still on the deferred
 * list, is marked carried (type 0) and freed unsent by the flush. */
static void fin_carried(struct p2p *p, uint32_t ch)
{
  uint32_t fin = p->ch[ch].defer_fin;
  assert(fin != NO_TX && p->tx[fin].type == M_FIN);
  p->tx[fin].type = 0;
  p->ch[ch].defer_fin = NO_TX;
}

/* The NIC refused r's EAGER or RTS: nothing of it went. r fails (its registration, the remote
 * read access of an RGET, is revoked), its data credit comes back, and the sends queued behind
 * it move down one sequence number, so the receiver's per-peer order has no gap. */
static void send_refused(struct pp_engine *e, struct peer *pe, struct req *r)
{
  struct p2p *p = P2P(e);
  p2p_chan_credits(p, &p->ch[r->ch], 1);
  assert(p->ch[r->ch].credits <= p->D);
  for (struct req *q = pe->pend_head; q; q = q->next)
    q->seq--;
  pe->send_seq--;
  p2p_fail_as(e, p->now, r, PP_P2P_E_FAILED, PP_WC_LOC_QP_OP_ERR);
}

/* Is the EAGER of r (fast path, on channel c, just begun: its credit taken, its big-pool slot
 * taken, its send-queue slot not yet) to be signalled? Not when the next send in the line is an
 * EAGER of the fast path that start_sends starts right after it on the same QP, for certain:
 * one channel, a credit, a send-queue slot after r's, a send buffer (r's own is big, and so is
 * the next one's: the small pool, which covers every reply that can be owed, is never held by an
 * unsignalled SEND); and fewer than SIG_EVERY - 1 unsignalled ones before r (p2p_impl.h). */
SEND_INLINE bool eager_signal(const struct pp_engine *e, const struct p2p *p,
                              const struct peer *pe, const struct req *r, const struct chan *c)
{
  const struct req *n = pe->pend_head; /* (send_begin took r out of the line) */
  /* n->len - 1 < eager_limit: an EAGER (its protocol is its length's) that is not empty */
  assert(!n || (n->proto == PP_P2P_EAGER) == (n->len <= p->prm.eager_limit));
  return !n || n->len - 1u >= p->prm.eager_limit || !r->len || p->urun_n >= p->sig_cap ||
         !c->credits || c->sq_used + 2 > e->cfg.qp.sq_depth || p->big.free == NO_TX;
}

/* The NIC refused the post that was to close channel ch's open run (p2p_impl.h: selective
 * signalling): its SENDs free their own slots at their completions, and the peer fails (as for
 * a refused control message), so the QP goes to ERROR and every one of them is flushed. */
static void run_orphaned(struct pp_engine *e, uint32_t ch)
{
  struct p2p *p = P2P(e);
  assert(p->urun_ch == ch);
  for (uint32_t t = p->urun; t != NO_TX; t = p->tx[t].rnext)
    p->tx[t].held = false;
  p->urun = NO_TX;
  p->urun_n = 0;
  p2p_post_refused(e, ch);
}

/* Starts r, the first in peer pi's line, when credits, a send-queue slot and a buffer allow;
 * false when they do not: r stays (parked) and the wait masks say what it waits for. */
SEND_INLINE bool start_first(struct pp_engine *e, struct p2p *p, uint32_t pi, struct req *r,
                             bool fast)
{
  struct peer *pe = &p->peer[pi];
  assert(r == pe->pend_head && (!fast || (r->proto == PP_P2P_EAGER && !p->srq)));
  struct pp_mr xmr = {0};
  bool abort = false;
  uint64_t *wait = NULL;
  struct txpool *pool = NULL;
  uint32_t ch = send_channel(e, p, pe, fast);
  uint32_t t = send_resources(e, p, r, ch, &pool, &xmr, &abort, &wait, fast);
  if (t == NO_TX) {
    park(p, r);
    if (wait)
      *wait |= 1ull << pi;
    return false;
  }
  send_begin(p, pe, r, ch, xmr, fast);
  struct hdr *h = (struct hdr *)(void *)(pool->buf + (size_t)(t - pool->first) * pool->size);
  struct chan *c = &p->ch[ch];
  bool sig = !fast || eager_signal(e, p, pe, r, c);
  uint32_t len = send_header(p, r, t, h, xmr.rkey, abort, sig, fast);
  if (!sig) /* its request completes once posted (p2p_impl.h): no completion names it */
    r->wrs = 0;
  if (post_tx_hdr(e, p, t, h, len, pool->mr.lkey, fast, sig) != PP_OK) {
    bool open = fast && p->urun_n; /* the run before it relied on this one to close it */
    send_refused(e, pe, r); /* (a FIN it was to carry stays deferred) */
    if (open)
      run_orphaned(e, ch);
  } else if (!sig) { /* (p2p_maybe_complete_active: no work request, fq or registration) */
    assert(!r->fq_n && !(r->flags & R_REGS));
    if (!r->await) /* (else synchronous: its ACK completes it) */
      p2p_complete_as(e, p->now, r, true);
  } else {
    if (!fast && (h->flags & F_FIN))
      fin_carried(p, ch);
    if (!fast && abort) /* the RTS only keeps the sequence: the receiver drops it */
      p2p_fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
  }
  return true;
}

/* Starts the sends parked at peer pi, in order, while credits, send-queue slots and buffers
 * allow; when they do not, the wait masks say what the first one waits for. */
static void start_sends(struct pp_engine *e, uint32_t pi)
{
  struct p2p *p = P2P(e);
  struct peer *pe = &p->peer[pi];
  for (struct req *r; (r = pe->pend_head);) {
    bool fast = r->proto == PP_P2P_EAGER && !p->srq; /* (one test: the two calls are the paths) */
    if (!(fast ? start_first(e, p, pi, r, true) : start_first(e, p, pi, r, false)))
      break;
  }
  assert(p->urun_n == 0); /* every run closed (eager_signal's certainty, or run_orphaned) */
}

/* The peers of mask m that may start sends, in index order, and those after them that may once
 * these started; the others would fail the same way as last time. */
static void start_from(struct pp_engine *e, uint64_t m)
{
  struct p2p *p = P2P(e);
  while (m && p->npending) {
    uint32_t i = (uint32_t)__builtin_ctzll(m);
    start_sends(e, i);
    m = i == 63 ? 0 : p2p_may_start(p) & ~0ull << (i + 1); /* the peers after i, now */
  }
}

/* The peers with sends waiting that may start some (p2p_impl.h: wait_chan, wait_tx), in index
 * order; the others would fail the same way as last time. */
enum pp_status p2p_start_all(struct pp_engine *e)
{
  start_from(e, p2p_may_start(P2P(e)));
  return PP_OK;
}

/* A send was just queued by an API call into the empty line of peer pi (so its wait bits are
 * clear), and progress had nothing else to do (p2p.c's send_common checked): progress would
 * start exactly what start_all starts from pi on, so that starts here, without it. */
void p2p_start_direct(struct pp_engine *e, uint32_t pi)
{
  struct p2p *p = P2P(e);
  assert(p2p_may_start(p) == 1ull << pi && p->npending > 0);
  /* start_from's first round, without its loop: then the peers after pi that became able to
   * start meanwhile (a refused SEND frees its buffer: wait_tx clears), as its next rounds */
  start_sends(e, pi);
  uint64_t m = pi == 63 ? 0 : p2p_may_start(p) & ~0ull << (pi + 1);
  if (m)
    start_from(e, m);
}
