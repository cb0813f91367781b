/* p2p: failures of channels and peers. */
#include "p2p_impl.h"

/* Channel ch is out of use: its queued control messages will never go. Every QP of it that is
 * still alive (all but `dead`, the QP that failed, 0 for none) goes to ERROR: every work request
 * on it is flushed, so no transfer of a request that fails with the peer touches its buffer
 * afterwards. With srq a channel has two QPs and either may be the one that failed: the other
 * goes to ERROR too (a WRITE queued on the control QP behind a failed data QP would otherwise
 * still read its send buffer after the request failed and the application reused it).
 * Completions that were already in the CQ still arrive: on_send_wc takes them as stale. */
static void close_channel(struct pp_engine *e, uint32_t ch, uint32_t dead)
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
  struct pp_qp_attr a = {.qp_state = PP_QPS_ERR};
  if (c->qpn && c->qpn != dead)
    e->ops->modify_qp(e->nic, c->qpn, &a, PP_QP_STATE);
  if (p->srq) { /* its data QP too, and its credits back to the pool */
    if (c->dqpn && c->dqpn != dead)
      e->ops->modify_qp(e->nic, c->dqpn, &a, PP_QP_STATE);
    p2p_srq_fail_channel(e, c);
  }
}

/* The peer pi is gone: every QP to it that is still alive goes to ERROR (all but `dead`, the
 * QP that failed already, 0 for none), the messages it had held out of order are dropped, and
 * everything that involves it fails with err / wc. */
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
      close_channel(e, pe->ch0 + k, dead);
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

/* QP `dead` of channel ch failed (a completion with an error says so, or, for a data QP of
 * p2p.srq, QP_LAST_WQE_REACHED): the peer is gone (its messages are sequenced across all its
 * channels, one lost channel breaks the order of all). Its other QPs and channels are closed and
 * everything that involves it fails. `dead` is the QP the completion came from, which need not
 * be one of ch's: a late completion of a duplicated work request (the byzantine wrapper makes
 * them) names a send slot that another channel has taken since; then every QP of ch goes to
 * ERROR. */
void p2p_fail_channel(struct pp_engine *e, uint64_t now, uint32_t ch, uint32_t dead, uint8_t wc)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return;
  close_channel(e, ch, dead);
  p2p_fail_peer(e, now, c->peer, dead, PP_P2P_E_FAILED, wc);
}


/* The NIC refused to post a control message (CREDIT, CTS, FIN, ACK) on channel ch: the credits
 * or the reply it carried are lost, so the peer's requests would wait for them forever. The
 * peer fails as if its QP had (every channel to ERROR, its requests PP_P2P_E_FAILED). */
void p2p_post_refused(struct pp_engine *e, uint32_t ch)
{
  struct p2p *p = P2P(e);
  p2p_fail_peer(e, p->now, p->ch[ch].peer, 0, PP_P2P_E_FAILED, PP_WC_LOC_QP_OP_ERR);
}
