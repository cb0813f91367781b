/* p2p: posting, credit accounting, the control queues, and starting the parked sends. */
#include "p2p_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ posting */

enum pp_status p2p_post_rx(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  uint32_t i = (uint32_t)(r - p->rx);
  struct pp_recv_wr wr = {
      .wr_id = WRID(W_RECV, 0, i),
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(p->rxbuf + (size_t)i * p->bsize),
                   .length = p->bsize,
                   .lkey = p->rxmr.lkey}},
  };
  r->state = RX_POSTED;
  if (p->ch[r->ch].failed)
    return PP_OK;
  return (enum pp_status)e->ops->post_recv(e->nic, p->ch[r->ch].qpn, &wr);
}

/* Posts tx slot t (its header already filled) with `len` bytes; hands back the owed credits. */
static enum pp_status post_tx(struct pp_engine *e, uint32_t t, uint32_t len)
{
  struct p2p *p = P2P(e);
  struct tx *x = &p->tx[t];
  struct chan *c = &p->ch[x->ch];
  struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
  h->credits = (uint16_t)c->owed;
  h->rcredits = (uint16_t)c->rowed;
  if (h->type != M_CREDIT)
    p->st.credits_piggybacked += c->owed + c->rowed;
  c->owed = c->rowed = 0;
  struct pp_send_wr wr = {
      .wr_id = WRID(W_TX, 0, t),
      .opcode = PP_WR_SEND,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)h, .length = len, .lkey = tx_mr(p, t)->lkey}},
  };
  c->sq_used++;
  return (enum pp_status)e->ops->post_send(e->nic, c->qpn, &wr);
}

static bool credit_due(const struct p2p *p, const struct chan *c)
{
  return (c->owed > 0 && (c->owed >= p->T || c->inuse + c->owed == p->D)) ||
         (c->rowed > 0 && (c->rowed >= p->TR || c->rowed == p->R));
}

/* Posts what channel c may: a due CREDIT message first (it needs no credit), then the queued
 * replies while reply credits and send-queue slots last. */
enum pp_status p2p_flush_ctrl(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  if (c->failed)
    return PP_OK;
  if (c->credit_pending && c->sq_used < e->cfg.qp.sq_depth) {
    c->credit_pending = false;
    if (credit_due(p, c)) { /* else piggy-backed meanwhile */
      uint32_t t = tx_alloc(p, &p->small);
      if (t == NO_TX) {
        c->credit_pending = true;
        return PP_OK;
      }
      struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
      *h = (struct hdr){.type = M_CREDIT};
      p->tx[t] = (struct tx){.next = NO_TX, .ch = (uint32_t)(c - p->ch), .nwr = 1,
                             .type = M_CREDIT};
      p->st.credit_msgs++;
      enum pp_status s = post_tx(e, t, HDR);
      if (s != PP_OK)
        return s;
    }
  }
  while (c->cq_head != NO_TX && c->sq_used < e->cfg.qp.sq_depth && c->rcredits > 0) {
    uint32_t t = c->cq_head;
    c->cq_head = p->tx[t].next;
    if (c->cq_head == NO_TX)
      c->cq_tail = NO_TX;
    p->tx[t].next = NO_TX;
    c->rcredits--;
    enum pp_status s = post_tx(e, t, HDR);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

/* Queues a reply (CTS, FIN, ACK) on channel ch; h is copied. It leaves with a reply credit. */
enum pp_status p2p_send_reply(struct pp_engine *e, uint32_t ch, const struct hdr *h,
                              uint64_t req, uint8_t slot, uint16_t nwr)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return PP_OK;
  uint32_t t = tx_alloc(p, &p->small);
  if (t == NO_TX)
    return PP_LIMIT; /* cannot happen: the pool covers every reply that can be owed */
  memcpy(tx_buf(p, t), h, HDR);
  p->tx[t] = (struct tx){.next = NO_TX, .ch = ch, .req = req, .nwr = nwr, .type = h->type,
                         .slot = slot};
  if (c->cq_tail == NO_TX)
    c->cq_head = t;
  else
    p->tx[c->cq_tail].next = t;
  c->cq_tail = t;
  return p2p_flush_ctrl(e, c);
}

static enum pp_status credit_check(struct pp_engine *e, uint32_t ch)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->credit_pending || !credit_due(p, c))
    return PP_OK;
  c->credit_pending = true;
  return p2p_flush_ctrl(e, c);
}

/* A reply was consumed: its buffer goes back at once, a reply credit is owed. */
enum pp_status p2p_reply_consumed(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  enum pp_status s = p2p_post_rx(e, r);
  p->ch[r->ch].rowed++;
  return s == PP_OK ? credit_check(e, r->ch) : s;
}

/* A consumed buffer goes back to the NIC; `credits` of the sender's credits become owed. */
enum pp_status p2p_release_rx(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  enum pp_status s = p2p_post_rx(e, r);
  if (s != PP_OK)
    return s;
  c->inuse--;
  c->owed++;
  return credit_check(e, r->ch);
}

/* ------------------------------------------------------------------ sending */

uint32_t p2p_msg_proto(const struct p2p *p, uint32_t len)
{
  if (len <= p->prm.eager_limit)
    return PP_P2P_EAGER;
  return len <= p->prm.rget_limit ? PP_P2P_RNDV_GET : PP_P2P_RNDV_PUT;
}

/* Starts the sends parked at peer pe, in order, while credits, reply slots, send-queue slots
 * and buffers allow. */
static enum pp_status start_sends(struct pp_engine *e, uint32_t pi)
{
  struct p2p *p = P2P(e);
  struct peer *pe = &p->peer[pi];
  while (pe->pend_head) {
    struct req *r = pe->pend_head;
    uint32_t ch = UINT32_MAX;
    for (uint32_t k = 0; k < p->prm.channels && ch == UINT32_MAX; k++) {
      uint32_t i = pe->ch0 + (pe->next_ch + k) % p->prm.channels;
      const struct chan *c = &p->ch[i];
      if (c->credits && c->sq_used < e->cfg.qp.sq_depth)
        ch = i;
    }
    bool big = r->proto == PP_P2P_EAGER && r->len > 0;
    uint32_t t = ch == UINT32_MAX ? NO_TX : tx_alloc(p, big ? &p->big : &p->small);
    struct pp_mr xmr = {0};
    bool abort = false;
    if (t != NO_TX && r->proto == PP_P2P_RNDV_GET &&
        p2p_reg_xmr(e, r->buf, r->len, PP_ACCESS_REMOTE_READ, &xmr) != PP_OK) {
      abort = p->nregs == 0; /* no registration of ours left to wait for */
      if (!abort) {
        tx_free(p, t);
        t = NO_TX;
      }
    }
    if (t == NO_TX) {
      if (!(r->flags & R_PARKED)) {
        r->flags |= R_PARKED;
        p->st.parked++;
      }
      return PP_OK;
    }
    pe->pend_head = r->next;
    if (!pe->pend_head)
      pe->pend_tail = NULL;
    p->npending--;
    struct chan *c = &p->ch[ch];
    c->credits--;
    pe->next_ch = (ch - pe->ch0 + 1) % p->prm.channels;
    r->ch = ch;
    p2p_req_set(p, r, RQ_ACTIVE);
    r->wrs = 1;
    r->await = r->proto != PP_P2P_EAGER || (r->flags & R_SYNC);
    r->xmr[0] = xmr;
    if (xmr.lkey)
      p2p_reg_held(p, r);
    p->st.sent[r->proto]++;
    struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
    *h = (struct hdr){
        .type = r->proto == PP_P2P_EAGER ? M_EAGER : M_RTS,
        .flags = (uint8_t)(((r->flags & R_SYNC) ? F_SYNC : 0) |
                           (r->proto == PP_P2P_RNDV_GET ? F_RGET : 0) | (abort ? F_ABORT : 0)),
        .ctx = r->ctx,
        .seq = r->seq,
        .tag = r->tag,
        .len = r->len,
        .sreq = handle_of(p, r),
        .addr = (uint64_t)(uintptr_t)r->buf,
        .rkey = xmr.rkey,
    };
    uint32_t len = HDR;
    if (r->proto == PP_P2P_EAGER && r->len) {
      memcpy((uint8_t *)h + HDR, r->buf, r->len);
      len += r->len;
    }
    p->tx[t] = (struct tx){.next = NO_TX, .ch = ch, .req = abort ? 0 : handle_of(p, r), .nwr = 1,
                           .type = h->type};
    enum pp_status s = post_tx(e, t, len);
    if (abort) /* the RTS only keeps the sequence: the receiver drops it */
      p2p_fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

enum pp_status p2p_start_all(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  for (uint32_t i = 0; i < p->npeer && p->npending; i++) {
    enum pp_status s = start_sends(e, i);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

