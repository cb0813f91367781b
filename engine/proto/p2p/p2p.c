/*
 * The p2p protocols "eager" and "rndv" (prepost/p2p.h): the pp_proto_ops entry points and the
 * public API. How the protocols work is described in p2p_impl.h.
 */
#include "p2p_impl.h"
#include "engine/proto/p2p/match_impl.h" /* the eager path's post / arrival, inline */

#include <stdlib.h>
#include <string.h>

/* The control messages of the channels ctrl_ready names, in index order (the others of
 * ctrl_due would fail as they did). */
static enum pp_status flush_due(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  for (uint32_t w = 0; w < (p->nch + 63) / 64; w++)
    for (uint64_t m = p->ctrl_ready[w]; m;) {
      uint32_t b = (uint32_t)__builtin_ctzll(m), i = w * 64 + b;
      enum pp_status s = p2p_flush_ctrl(e, &p->ch[i]);
      if (s != PP_OK)
        return s;
      m = b == 63 ? 0 : p->ctrl_ready[w] & ~0ull << (b + 1); /* what is ready after i, now */
    }
  return PP_OK;
}

/* Everything that may have become possible: control messages, parked sends, transfers. */
enum pp_status p2p_progress_1(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  enum pp_status s = p->ctrl_sum ? flush_due(e) : PP_OK;
  if (s != PP_OK)
    return s;
  do { /* a registration released: the first in line tries, then the next, ... */
    if (p->reg_wake && p->regq_head)
      p2p_add_work(p, p->regq_head);
    p->reg_wake = false;
    s = p->work ? p2p_run_work(e) : PP_OK;
  } while (s == PP_OK && p->reg_wake && p->regq_head);
  if (s == PP_OK && p2p_may_start(p))
    s = p2p_start_all(e);
  return s;
}

/* ------------------------------------------------------------------ pp_proto_ops */

/* The derived sizes (see p2p_impl.h: D, R, C, T per QP) and the handle nonce. */
static void p2p_sizes(struct pp_engine *e, struct p2p *p)
{
  pp_p2p_params_resolve(&e->cfg, &p->prm);
  const struct pp_p2p_params *m = &p->prm;
  p->D = m->credits;
  p->T = m->credit_threshold;
  p->R = m->reply_slots;
  p->TR = (p->R + 1) / 2;
  p->C = 2 + (p->D - 1) / p->T + (p->R - 1) / p->TR;
  p->P = m->pipeline;
  struct pp_prng g;
  pp_prng_seed(&g, pp_seed_derive(e->cfg.seed, PP_SEED_P2P, e->cfg.rank));
  p->nonce = (uint32_t)pp_prng_next(&g) | 1u << 31; /* bit 31: no handle is PP_REQ_NULL */
  p->gen_seed = pp_prng_next(&g);
  p->nrx = p->D + p->R + p->C;
  p->bsize = (HDR + m->eager_limit + 63) & ~63u;
  p->cbsize = p->bsize;
  p->npeer = e->npeers;
  p->nch = p->npeer * m->channels;
  if (m->srq) { /* srq.c: the channels' own buffers take replies and CREDITs only */
    p->nrx = p->R + p->C;
    p->cbsize = HDR;
    uint32_t least = p->nch + m->srq_limit + 1;
    p->npool = m->srq_buffers > least ? m->srq_buffers : least;
  }
  p->ntotal_rx = p->nch * p->nrx;
  p->window = m->channels * p->D;
}

/* Every table and buffer, once (nothing is allocated after creation). */
static enum pp_status p2p_alloc(struct pp_engine *e, struct p2p *p)
{
  const struct pp_p2p_params *m = &p->prm;
  p->peer_of = malloc(e->cfg.nranks * sizeof(*p->peer_of));
  p->ch = calloc(p->nch ? p->nch : 1, sizeof(*p->ch));
  p->rx = calloc(p->ntotal_rx + p->npool ? p->ntotal_rx + p->npool : 1, sizeof(*p->rx));
  p->rxbuf = calloc(p->ntotal_rx ? p->ntotal_rx : 1, p->cbsize);
  p->big = (struct txpool){.first = 0, .n = m->send_buffers, .size = p->bsize};
  /* replies queue per request (at most `pipeline` CTS or FIN, and an ACK) and per channel */
  p->small = (struct txpool){.first = m->send_buffers,
                             .n = p->nch * (p->nrx + 4) + m->max_requests * (p->P + 1) + 1,
                             .size = HDR};
  p->tx = calloc(p->big.n + p->small.n, sizeof(*p->tx));
  p->big.buf = calloc(p->big.n, p->bsize);
  p->small.buf = calloc(p->small.n, HDR);
  p->req = calloc(m->max_requests, sizeof(*p->req));
  p->rec_cap = m->record;
  p->rec = calloc(p->rec_cap ? p->rec_cap : 1, sizeof(*p->rec));
  if (!p->peer_of || !p->ch || !p->rx || !p->rxbuf || !p->tx || !p->big.buf || !p->small.buf ||
      !p->req || !p->rec)
    return PP_NOMEM;
  for (uint32_t i = 0; i < p->ntotal_rx + p->npool; i++)
    p->rx[i].idx = i;
  for (uint32_t i = 0; i < p->ntotal_rx; i++)
    p->rx[i].buf = p->rxbuf + (size_t)i * p->cbsize;
  return PP_OK;
}

/* The free lists (requests, send buffers), the matching queues and the registration cache. */
static enum pp_status p2p_lists(struct pp_engine *e, struct p2p *p)
{
  const struct pp_p2p_params *m = &p->prm;
  for (uint32_t i = 0; i < e->cfg.nranks; i++)
    p->peer_of[i] = -1;
  struct pp_prng g;
  pp_prng_seed(&g, p->gen_seed);
  for (uint32_t i = m->max_requests; i-- > 0;) {
    p->req[i].idx = i; /* (handle 0 from calloc: no live handle) */
    p->req[i].hlo = (i + 1) ^ p->nonce;
    p->req[i].gen = (uint32_t)(pp_prng_next(&g) >> 36); /* its first generation - 1 */
    p->req[i].next = p->freereq;
    p->freereq = &p->req[i];
  }
  p->big.free = p->small.free = NO_TX;
  p->defer_head = p->defer_tail = NO_TX;
  p->urun = NO_TX;
  p->sig_cap = m->channels == 1 ? SIG_EVERY - 1 : 0; /* (eager_signal: one QP per peer only) */
  for (uint32_t t = p->big.n + p->small.n; t-- > 0;)
    tx_free(p, t);
  enum pp_status s = pp_match_init(&p->match, m->max_requests, p->ntotal_rx + p->npool);
  if (s != PP_OK)
    return s;
  p->match_ok = true;
  p->match.bug_exact_first = PP_BUG(&e->cfg, WILDCARD_ORDER);
  s = pp_rcache_init(&p->rc, e->ops, e->nic, m->rcache_entries, m->rcache_bytes,
                     PP_ACCESS_LOCAL_WRITE);
  if (s != PP_OK)
    return s;
  p->rc_ok = true;
  return PP_OK;
}

/* The receive buffers and both send-buffer pools, registered for local access only. */
static enum pp_status p2p_register(struct pp_engine *e, struct p2p *p)
{
  enum pp_status s;
  if ((s = pp_engine_reg(e, p->rxbuf, (size_t)p->ntotal_rx * p->cbsize, PP_ACCESS_LOCAL_WRITE,
                         &p->rxmr)) != PP_OK ||
      (s = pp_engine_reg(e, p->big.buf, (size_t)p->big.n * p->bsize, PP_ACCESS_LOCAL_WRITE,
                         &p->big.mr)) != PP_OK ||
      (s = pp_engine_reg(e, p->small.buf, (size_t)p->small.n * HDR, PP_ACCESS_LOCAL_WRITE,
                         &p->small.mr)) != PP_OK)
    return s;
  return PP_OK;
}

/* Channel ci to peer i: its QP, with its nrx receive buffers posted. */
static enum pp_status open_channel(struct pp_engine *e, struct p2p *p, uint32_t i, uint32_t ci)
{
  struct chan *c = &p->ch[ci];
  *c = (struct chan){.peer = i, .rx0 = ci * p->nrx, .credits = p->D, .rcredits = p->R,
                     .cq_head = NO_TX, .cq_tail = NO_TX, .defer_fin = NO_TX};
  enum pp_status s =
      pp_engine_qp_open(e, p->peer[i].rank, 0, e->cfg.qp.sq_depth, p->nrx, &c->qpn, &c->psn);
  if (p->srq) { /* srq.c: the data QP, on the SRQ; one credit to start with, on both ends */
    c->credits = c->grant = 1;
    if (s == PP_OK)
      s = pp_engine_qp_open(e, p->peer[i].rank, p2p_srq_num(p), e->cfg.qp.sq_depth, 0, &c->dqpn,
                            &c->dpsn);
  }
  for (uint32_t j = 0; s == PP_OK && j < p->nrx; j++) {
    p->rx[c->rx0 + j].ch = ci;
    s = p2p_post_rx(e, &p->rx[c->rx0 + j]);
  }
  return s;
}

static enum pp_status p2p_create(struct pp_engine *e)
{
  struct p2p *p = calloc(1, sizeof(*p));
  if (!p)
    return PP_NOMEM;
  e->ps = p;
  p2p_sizes(e, p);
  enum pp_status s;
  if ((s = p2p_alloc(e, p)) != PP_OK || (s = p2p_lists(e, p)) != PP_OK ||
      (s = p2p_register(e, p)) != PP_OK || (p->npool && (s = p2p_srq_create(e)) != PP_OK))
    return s;
  for (uint32_t i = 0; i < p->npeer; i++) {
    struct peer *pe = &p->peer[i];
    pe->rank = e->peers[i];
    pe->ch0 = i * p->prm.channels;
    p->peer_of[pe->rank] = (int32_t)i;
    for (uint32_t k = 0; k < p->prm.channels; k++)
      if ((s = open_channel(e, p, i, pe->ch0 + k)) != PP_OK)
        return s;
  }
  if (p->srq)
    p2p_srq_map(p);
  p->st.eager_rx_bytes = (uint64_t)p->ntotal_rx * p->cbsize + (uint64_t)p->npool * p->bsize;
  return PP_OK;
}

static void p2p_destroy(struct pp_engine *e)
{
  struct p2p *p = e->ps;
  if (!p)
    return;
  for (uint32_t i = 0; p->req && i < p->prm.max_requests; i++)
    if (p->req[i].state != RQ_FREE)
      p2p_release_regs(e, &p->req[i]);
  for (uint32_t i = 0; p->ch && i < p->nch; i++) {
    if (p->ch[i].qpn)
      e->ops->destroy_qp(e->nic, p->ch[i].qpn);
    if (p->ch[i].dqpn)
      e->ops->destroy_qp(e->nic, p->ch[i].dqpn);
  }
  p2p_srq_destroy(e); /* after its QPs */
  pp_engine_dereg(e, &p->rxmr);
  pp_engine_dereg(e, &p->big.mr);
  pp_engine_dereg(e, &p->small.mr);
  if (p->rc_ok)
    pp_rcache_fini(&p->rc);
  if (p->match_ok)
    pp_match_fini(&p->match);
  free(p->peer_of);
  free(p->ch);
  free(p->rx);
  free(p->rxbuf);
  free(p->tx);
  free(p->big.buf);
  free(p->small.buf);
  free(p->req);
  free(p->rec);
  free(p);
  e->ps = NULL;
}

static int peer_idx(const struct p2p *p, const struct pp_engine *e, uint32_t rank)
{
  return rank < e->cfg.nranks ? p->peer_of[rank] : -1;
}

static bool p2p_local_info(const struct pp_engine *e, uint32_t rank, struct pp_conn_info *out)
{
  const struct p2p *p = P2P(e);
  int i = peer_idx(p, e, rank);
  if (i < 0)
    return false;
  uint32_t n = p->prm.channels;
  *out = (struct pp_conn_info){.nchannels = p->srq ? 2 * n : n};
  for (uint32_t k = 0; k < n; k++) {
    const struct chan *c = &p->ch[p->peer[i].ch0 + k];
    out->qp_num[k] = c->qpn;
    out->psn[k] = c->psn;
    if (p->srq) { /* srq: the data QPs after the control QPs */
      out->qp_num[n + k] = c->dqpn;
      out->psn[n + k] = c->dpsn;
    }
  }
  return true;
}

static enum pp_status p2p_connect(struct pp_engine *e, uint64_t now, uint32_t rank,
                                  const struct pp_conn_info *remote)
{
  (void)now;
  struct p2p *p = P2P(e);
  int i = peer_idx(p, e, rank);
  if (i < 0)
    return PP_NOTFOUND;
  uint32_t n = p->prm.channels;
  if (remote->nchannels != (p->srq ? 2 * n : n))
    return PP_INVALID;
  for (uint32_t k = 0; k < n; k++) {
    const struct chan *c = &p->ch[p->peer[i].ch0 + k];
    enum pp_status s =
        pp_engine_qp_connect(e, c->qpn, c->psn, remote->qp_num[k], remote->psn[k]);
    if (s == PP_OK && p->srq)
      s = pp_engine_qp_connect(e, c->dqpn, c->dpsn, remote->qp_num[n + k], remote->psn[n + k]);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static enum pp_status p2p_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct p2p *p = P2P(e);
  if (arg != FLUSH_TIMER)
    return PP_INVALID;
  p->flush_armed = false;
  return p2p_finish(e, now, p2p_event_start(e, now));
}

/* The NIC's async events. With srq: SRQ_LIMIT_REACHED (srq.c), and QP_LAST_WQE_REACHED, which
 * a QP attached to an SRQ raises when it enters ERROR (the SRQ's WQEs are not flushed, they stay
 * posted for its other QPs). A data QP has no receive queue of its own, so when it fails with no
 * send outstanding no completion says so: this event fails its channel (the peer), as a
 * flushed completion would. Without srq no QP has an SRQ: completions say it all. */
static enum pp_status p2p_on_async(struct pp_engine *e, uint64_t now,
                                   const struct pp_async_event *ev)
{
  struct p2p *p = P2P(e);
  if (!p->srq)
    return PP_OK;
  if (ev->type != PP_EVENT_QP_LAST_WQE_REACHED)
    return p2p_srq_on_async(e, now, ev);
  uint32_t ch = p2p_srq_chan_of(p, ev->qp_num);
  if (ch == UINT32_MAX || p->ch[ch].failed)
    return PP_OK; /* not ours, or closed already (close_channel moved it to ERROR) */
  enum pp_status s = p2p_event_start(e, now);
  p2p_fail_channel(e, now, ch, ev->qp_num, PP_WC_WR_FLUSH_ERR);
  return p2p_finish(e, now, s);
}

static bool p2p_quiet(const struct pp_engine *e)
{
  const struct p2p *p = P2P(e);
  if (p->npending || p->nactive || p->work || p->done_head || p->defer_head != NO_TX)
    return false;
  for (uint32_t i = 0; i < p->nch; i++) /* a failed channel's work requests are flushed */
    if (!p->ch[i].failed &&
        (p->ch[i].sq_used || p->ch[i].dsq_used || p->ch[i].cq_head != NO_TX))
      return false;
  return true;
}

/* pp_proto_ops send/recv: a pp_msg becomes an auto-freed request on context 0. */
static enum pp_status p2p_send(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  pp_req r;
  if (m->tag >= PP_ANY_TAG)
    return PP_INVALID;
  enum pp_status s =
      pp_p2p_isend(e, now, m->buf, m->len, m->peer, (uint32_t)m->tag, 0, m->cookie, &r);
  if (s == PP_OK)
    req_of(P2P(e), r)->flags |= R_AUTO;
  return s;
}

static enum pp_status p2p_recv(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  pp_req r;
  if (m->tag >= PP_ANY_TAG)
    return PP_INVALID;
  enum pp_status s =
      pp_p2p_irecv(e, now, m->buf, m->len, m->peer, (uint32_t)m->tag, 0, m->cookie, &r);
  if (s == PP_OK)
    req_of(P2P(e), r)->flags |= R_AUTO;
  return s;
}

/* ------------------------------------------------------------------ the API */

static struct p2p *api(const struct pp_engine *e)
{
  return e && p2p_proto_ok(e->cfg.protocol) ? e->ps : NULL;
}

/* After an API call: the work it made possible, and the completions it caused reach the
 * workload through a timer at `now` unless an event is being processed. Inline in the API
 * calls (isend and irecv: the eager path's). */
static inline __attribute__((always_inline)) enum pp_status
api_done_of(struct pp_engine *e, struct p2p *p, uint64_t now, enum pp_status s)
{
  if (p->depth == 0)
    p->now = now;
  if (s == PP_OK && e->started && p->depth == 0)
    s = p2p_progress_of(e, p);
  p2p_arm_flush_of(e, p, now);
  return s;
}

static inline __attribute__((always_inline)) enum pp_status
api_done(struct pp_engine *e, uint64_t now, enum pp_status s)
{
  return api_done_of(e, P2P(e), now, s);
}

/* A request on the done list at once: its peer failed already. */
static enum pp_status fail_at_once(struct pp_engine *e, uint64_t now, struct req *r,
                                   const struct peer *pe)
{
  r->err = pe->fail_err;
  r->wc = pe->fail_wc;
  p2p_complete(e, now, r);
  return api_done(e, now, PP_OK);
}

/* Send r takes the next sequence number of its peer (r->peer) and waits in its line to start. */
static void send_queue(struct p2p *p, struct req *r)
{
  struct peer *pe = &p->peer[r->peer];
  uint64_t bit = 1ull << r->peer; /* (the index, not pe - p->peer: no division by its size) */
  r->seq = pe->send_seq++;
  r->next = NULL;
  assert(!pe->pend_tail || (p->pend_mask & bit)); /* a peer's bit: its line is not empty */
  if (pe->pend_tail) {
    pe->pend_tail->next = r;
  } else { /* r is first in line: what an earlier first waited for says nothing about r */
    pe->pend_head = r;
    p->wait_chan &= ~bit;
    p->wait_tx &= ~bit;
    p->prog = true; /* (behind others, r changes nothing progress looks at: pend_mask has bit) */
  }
  pe->pend_tail = r;
  p->pend_mask |= bit;
  p->npending++;
}

/* An API call that starts nothing: its request handle, if asked for, is PP_REQ_NULL. */
static enum pp_status refused(pp_req *out, enum pp_status s)
{
  if (out)
    *out = PP_REQ_NULL;
  return s;
}

/* isend and issend (inline in both: no call with ten arguments, four of them on the stack). */
static inline __attribute__((always_inline)) enum pp_status
send_common(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len, uint32_t dest,
            uint32_t tag, uint32_t ctx, uint64_t cookie, pp_req *out, bool sync)
{
  struct p2p *p = api(e);
  if (!p || (!buf && len))
    return refused(out, PP_INVALID);
  int pi = peer_idx(p, e, dest);
  if (pi < 0 || tag == PP_ANY_TAG || len > PP_MAX_MSG_SIZE)
    return refused(out, PP_INVALID);
  if (!e->started)
    return refused(out, PP_STATE);
  struct req *r = req_alloc(p);
  if (!r)
    return refused(out, PP_AGAIN);
  struct peer *pe = &p->peer[pi];
  r->kind = K_SEND;
  p2p_req_move(p, r, RQ_FREE, RQ_PENDING);
  r->flags = sync ? R_SYNC : 0;
  r->peer = (uint32_t)pi;
  r->rank = dest;
  r->tag = tag;
  r->ctx = ctx;
  r->buf = (uint8_t *)(uintptr_t)buf;
  r->len = len;
  r->cookie = cookie;
  r->proto = (uint8_t)p2p_msg_proto(p, len);
  r->src = dest;
  r->mtag = tag;
  r->got = r->msg_len = len;
  if (out)
    *out = handle_of(p, r);
  if (pe->failed)
    return fail_at_once(e, now, r, pe);
  bool direct = p->depth == 0 && !pe->pend_head && p2p_progress_idle(p);
  send_queue(p, r);
  enum pp_status s = PP_OK;
  if (!direct) {
    s = api_done_of(e, p, now, PP_OK);
  } else {
    p->now = now; /* what api_done does, progress being start_all alone */
    p2p_start_direct(e, (uint32_t)pi);
    p2p_arm_flush_of(e, p, now);
  }
  /* the send went (or waits in its line): now the FINs it overtook (p2p_impl.h: reply first) */
  if (p->defer_head != NO_TX) {
    enum pp_status f = p2p_flush_deferred(e);
    if (s == PP_OK)
      s = f;
  }
  return s;
}

enum pp_status pp_p2p_isend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                            uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *req)
{
  return send_common(e, now, buf, len, dest, tag, ctx, cookie, req, false);
}

enum pp_status pp_p2p_issend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                             uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                             pp_req *req)
{
  return send_common(e, now, buf, len, dest, tag, ctx, cookie, req, true);
}

/* Receive r takes the earliest unexpected message it matches, or joins the posted queue. */
static enum pp_status recv_match(struct pp_engine *e, struct p2p *p, uint64_t now, struct req *r)
{
  struct pp_mentry *m = p->match.nunexpected
                            ? pp_match_find_unexpected(&p->match, r->ctx, r->rank, r->tag)
                            : NULL; /* (what it finds in an empty queue) */
  enum pp_status s;
  if (m) {
    struct rx *x = pp_container_of(m, struct rx, me);
    pp_match_remove_unexpected(&p->match, m);
    assert(p->nheld > 0);
    p->nheld--;
    p->depth++; /* start_recv may complete it: the workload hears of it after this call */
    s = p2p_start_recv(e, now, r, x);
    p->depth--;
  } else {
    s = pp_match_post_inline(&p->match, &r->me, r->ctx, r->rank, r->tag);
    if (s == PP_OK)
      r->flags |= R_POSTED;
    else
      p2p_req_free(p, r);
  }
  return s;
}

enum pp_status pp_p2p_irecv(struct pp_engine *e, uint64_t now, void *buf, uint32_t len,
                            uint32_t source, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *out)
{
  struct p2p *p = api(e);
  if (!p || (!buf && len) || len > PP_MAX_MSG_SIZE)
    return refused(out, PP_INVALID);
  int pi = source == PP_ANY_SOURCE ? -1 : peer_idx(p, e, source);
  if (source != PP_ANY_SOURCE && pi < 0)
    return refused(out, PP_INVALID);
  struct req *r = req_alloc(p);
  if (!r)
    return refused(out, PP_AGAIN);
  r->kind = K_RECV;
  p2p_req_move(p, r, RQ_FREE, RQ_PENDING);
  r->rank = source;
  r->tag = tag;
  r->ctx = ctx;
  r->buf = buf;
  r->len = len;
  r->cookie = cookie;
  if (out)
    *out = handle_of(p, r);
  if (pi >= 0 && p->peer[pi].failed)
    return fail_at_once(e, now, r, &p->peer[pi]);
  return api_done_of(e, p, now, recv_match(e, p, now, r));
}

bool pp_p2p_test(struct pp_engine *e, pp_req *req, struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  if (*req == PP_REQ_NULL) {
    if (st)
      *st = (struct pp_p2p_status){0};
    return true;
  }
  struct req *r = p ? req_of(p, *req) : NULL;
  if (!r || r->state != RQ_DONE || (r->flags & R_AUTO))
    return false;
  if (st)
    p2p_fill_status(p, r, st);
  *req = PP_REQ_NULL;
  if (r->flags & R_DONEQ) { /* still on the done list: freed when the list gets there */
    r->flags |= R_RELEASED;
    req_stale(r);
  } else {
    p2p_req_free(p, r);
  }
  return true;
}

bool pp_p2p_testall(struct pp_engine *e, uint32_t n, pp_req *reqs, struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  for (uint32_t i = 0; i < n; i++) {
    if (reqs[i] == PP_REQ_NULL)
      continue;
    const struct req *r = p ? req_of(p, reqs[i]) : NULL;
    if (!r || r->state != RQ_DONE || (r->flags & R_AUTO))
      return false;
  }
  for (uint32_t i = 0; i < n; i++)
    pp_p2p_test(e, &reqs[i], st ? &st[i] : NULL);
  return true;
}

bool pp_p2p_iprobe(struct pp_engine *e, uint32_t source, uint32_t tag, uint32_t ctx,
                   struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  if (!p)
    return false;
  const struct pp_mentry *m = pp_match_find_unexpected(&p->match, ctx, source, tag);
  if (!m)
    return false;
  if (st) {
    const struct rx *x = pp_container_of(m, const struct rx, me);
    const struct hdr *h = rx_hdr(p, x);
    *st = (struct pp_p2p_status){
        .source = m->src,
        .tag = h->tag,
        .ctx = h->ctx,
        .len = h->len,
        .msg_len = h->len,
        .proto = (uint8_t)(h->type == M_EAGER          ? PP_P2P_EAGER
                           : (h->flags & F_RGET) != 0 ? PP_P2P_RNDV_GET
                                                      : PP_P2P_RNDV_PUT),
    };
  }
  return true;
}

enum pp_status pp_p2p_cancel(struct pp_engine *e, uint64_t now, pp_req req)
{
  struct p2p *p = api(e);
  struct req *r = p ? req_of(p, req) : NULL;
  if (!r)
    return PP_NOTFOUND;
  if (r->kind != K_RECV)
    return PP_UNSUPPORTED;
  if (!(r->flags & R_POSTED))
    return PP_STATE;
  pp_match_remove_posted(&p->match, &r->me);
  r->flags &= ~R_POSTED;
  r->err = PP_P2P_E_CANCELLED;
  p2p_complete(e, now, r);
  return api_done(e, now, PP_OK);
}

uint32_t pp_p2p_mem_free(struct pp_engine *e, const void *buf, size_t len)
{
  struct p2p *p = api(e);
  return p ? pp_rcache_invalidate(&p->rc, buf, len) : 0;
}

void pp_p2p_stats(const struct pp_engine *e, struct pp_p2p_stats *out)
{
  const struct p2p *p = api(e);
  *out = p ? p->st : (struct pp_p2p_stats){0};
  if (p) {
    out->rcache = p->rc.st, out->rcache.entries = p->rc.n;
    p2p_srq_stats(p, out);
  }
}

size_t pp_p2p_receives(const struct pp_engine *e, const struct pp_recv_record **out,
                       uint64_t *dropped)
{
  const struct p2p *p = api(e);
  *out = p ? p->rec : NULL;
  if (dropped)
    *dropped = p ? p->rec_dropped : 0;
  return p ? p->nrec : 0;
}

size_t pp_p2p_receives_copy(const struct pp_engine *e, struct pp_recv_record **out,
                            uint64_t *dropped)
{
  const struct pp_recv_record *rec;
  size_t n = pp_p2p_receives(e, &rec, dropped);
  *out = n ? malloc(n * sizeof(*rec)) : NULL;
  if (!*out)
    return 0;
  memcpy(*out, rec, n * sizeof(*rec));
  return n;
}

const struct pp_proto_ops pp_p2p_eager_ops = {
    .name = "eager",
    .create = p2p_create,
    .destroy = p2p_destroy,
    .local_info = p2p_local_info,
    .connect = p2p_connect,
    .send = p2p_send,
    .recv = p2p_recv,
    .on_wc = p2p_on_wc,
    .on_timer = p2p_on_timer,
    .quiet = p2p_quiet,
    .pending = p2p_pending,
    .on_async = p2p_on_async,
};

const struct pp_proto_ops pp_p2p_rndv_ops = {
    .name = "rndv",
    .create = p2p_create,
    .destroy = p2p_destroy,
    .local_info = p2p_local_info,
    .connect = p2p_connect,
    .send = p2p_send,
    .recv = p2p_recv,
    .on_wc = p2p_on_wc,
    .on_timer = p2p_on_timer,
    .quiet = p2p_quiet,
    .pending = p2p_pending,
    .on_async = p2p_on_async,
};
