/* p2p: failures of channels and peers. */
#include "p2p_impl.h"

/* Channel ch is out of use: its queued control messages will never go. A channel that is
 * still alive (its QP has not failed) goes to ERROR: every work request on it is flushed, so no
 * transfer of a request that fails with the peer touches its buffer afterwards. Completions that
 * were already in the CQ still arrive: on_send_wc takes them as stale. */
static void close_channel(struct pp_engine *e, uint32_t ch, bool alive)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  c->failed = true;
  while (c->cq_head != NO_TX) {
    uint32_t t = c->cq_head;
    c->cq_head = p->tx[t].next;
    tx_free(p, t);
  }
  c->cq_tail = NO_TX;
  if (alive && c->qpn) {
    struct pp_qp_attr a = {.qp_state = PP_QPS_ERR};
    e->ops->modify_qp(e->nic, c->qpn, &a, PP_QP_STATE);
  }
  if (p->srq) { /* its data QP too (whichever failed), and its credits back to the pool */
    struct pp_qp_attr a = {.qp_state = PP_QPS_ERR};
    if (c->dqpn)
      e->ops->modify_qp(e->nic, c->dqpn, &a, PP_QP_STATE);
    p2p_srq_fail_channel(e, c);
  }
}

/* The peer pi is gone: every channel to it that is still alive goes to ERROR (except `dead`,
 * whose QP failed already), the messages it had held out of order are dropped, and everything
 * that involves it fails with err / wc. */
void p2p_fail_peer(struct pp_engine *e, uint64_t now, uint32_t pi, uint32_t dead, uint8_t err,
                   uint8_t wc)
{
  struct p2p *p = P2P(e);
  struct peer *pe = &p->peer[pi];
  if (pe->failed)
    return;
  pe->failed = true;
  pe->fail_wc = wc;
  pe->fail_err = err;
  for (uint32_t k = 0; k < p->prm.channels; k++)
    if (!p->ch[pe->ch0 + k].failed)
      close_channel(e, pe->ch0 + k, pe->ch0 + k != dead);
  for (struct rx *x = pe->ooo, *n; x; x = n) {
    n = x->ooo_next;
    if (x->pool)
      p2p_srq_recycle(e, x);
    else
      x->state = RX_DEAD;
  }
  pe->ooo = NULL;
  while (pe->pend_head) {
    struct req *r = pe->pend_head;
    pe->pend_head = r->next;
    assert(p->npending > 0);
    p->npending--;
    p2p_fail_as(e, now, r, err, wc);
  }
  pe->pend_tail = NULL;
  p->pend_mask &= ~(1ull << pi);
  for (uint32_t i = 0; i < p->prm.max_requests; i++) {
    struct req *r = &p->req[i];
    if (r->state == RQ_FREE || r->state == RQ_DONE)
      continue;
    if (r->peer == pi || (r->kind == K_RECV && (r->flags & R_POSTED) && r->rank == pe->rank))
      p2p_fail_as(e, now, r, err, wc);
  }
}

/* A completion failed on channel ch: the peer is gone (its messages are sequenced across all
 * its channels, one lost channel breaks the order of all). Its other channels are closed and
 * everything that involves it fails. */
void p2p_fail_channel(struct pp_engine *e, uint64_t now, uint32_t ch, uint8_t wc)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return;
  close_channel(e, ch, false);
  p2p_fail_peer(e, now, c->peer, ch, PP_P2P_E_FAILED, wc);
}


/* The NIC refused to post a control message (CREDIT, CTS, FIN, ACK) on channel ch: the credits
 * or the reply it carried are lost, so the peer's requests would wait for them forever. The
 * peer fails as if its QP had (every channel to ERROR, its requests PP_P2P_E_FAILED). */
void p2p_post_refused(struct pp_engine *e, uint32_t ch)
{
  struct p2p *p = P2P(e);
  p2p_fail_peer(e, p->now, p->ch[ch].peer, UINT32_MAX, PP_P2P_E_FAILED, PP_WC_LOC_QP_OP_ERR);
}
