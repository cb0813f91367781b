/* p2p: what pending operations wait for (hang reports). */
#include "p2p_impl.h"

#include <stdio.h>

/* ------------------------------------------------------------------ hang reports */

static const char *src_name(uint32_t rank, char *buf, size_t len)
{
  if (rank == PP_ANY_SOURCE)
    return "ANY_SOURCE";
  snprintf(buf, len, "rank %u", rank);
  return buf;
}

/* The fewest data credits any channel to peer pi holds, and its reply credits. */
static void peer_credits(const struct p2p *p, uint32_t pi, uint32_t *credits, uint32_t *rcredits,
                         uint32_t *sq_used)
{
  const struct peer *pe = &p->peer[pi];
  *credits = *rcredits = *sq_used = UINT32_MAX;
  for (uint32_t k = 0; k < p->prm.channels; k++) {
    const struct chan *c = &p->ch[pe->ch0 + k];
    *credits = c->credits < *credits ? c->credits : *credits;
    *rcredits = c->rcredits < *rcredits ? c->rcredits : *rcredits;
    *sq_used = c->sq_used < *sq_used ? c->sq_used : *sq_used;
  }
}

static void pending_send(const struct pp_engine *e, const struct p2p *p, const struct req *r,
                         struct pp_wait *out, size_t max, size_t *n)
{
  const char *pn = pp_p2p_proto_name((enum pp_p2p_proto)r->proto);
  if (r->state == RQ_PENDING) {
    int32_t pi = p->peer_of[r->rank];
    uint32_t cr = 0, rcr = 0, sq = 0;
    if (pi >= 0)
      peer_credits(p, (uint32_t)pi, &cr, &rcr, &sq);
    if (cr == 0)
      pp_wait_add(out, max, n, PP_WAIT_CREDITS, r->rank, r->tag, 0,
                  "%s send tag %u (%u bytes) to rank %u waits for credits (0 of %u left: the "
                  "receiver has not consumed its messages)", pn, r->tag, r->len, r->rank, p->D);
    else
      pp_wait_add(out, max, n, PP_WAIT_CREDITS, r->rank, r->tag, 0,
                  "%s send tag %u (%u bytes) to rank %u waits to start (%u credits, send queue "
                  "%u of %u used, or no send buffer)", pn, r->tag, r->len, r->rank, cr, sq,
                  e->cfg.qp.sq_depth);
    return;
  }
  if (r->proto == PP_P2P_RNDV_PUT && r->nfrag == 0 && r->fq_n == 0)
    pp_wait_add(out, max, n, PP_WAIT_CTS, r->rank, r->tag, 0,
                "rndv send tag %u (%u bytes) to rank %u waits for CTS (the receiver has not "
                "matched it)", r->tag, r->len, r->rank);
  else if (r->proto == PP_P2P_RNDV_PUT && r->await)
    pp_wait_add(out, max, n, PP_WAIT_CTS, r->rank, r->tag, 0,
                "rndv send tag %u to rank %u waits for the next CTS (%u of %u fragments)", r->tag,
                r->rank, r->fnext, r->nfrag);
  else if (r->proto == PP_P2P_RNDV_GET && r->await)
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->rank, r->tag, 0,
                "rndv (RGET) send tag %u (%u bytes) to rank %u waits for the receiver to match "
                "and read it (FIN)", r->tag, r->len, r->rank);
  else if (r->await)
    pp_wait_add(out, max, n, PP_WAIT_ACK, r->rank, r->tag, 0,
                "synchronous send tag %u to rank %u waits for its ACK (the receiver has not "
                "matched it)", r->tag, r->rank);
  else
    pp_wait_add(out, max, n, PP_WAIT_SEND_WC, r->rank, r->tag, 0,
                "%s send tag %u to rank %u waits for %u send completions", pn, r->tag, r->rank,
                r->wrs);
}

static void pending_recv(const struct p2p *p, const struct req *r, struct pp_wait *out,
                         size_t max, size_t *n)
{
  char b[32];
  if (r->flags & R_POSTED) {
    char t[32];
    if (r->tag == PP_ANY_TAG)
      snprintf(t, sizeof(t), "ANY_TAG");
    else
      snprintf(t, sizeof(t), "tag %u", r->tag);
    pp_wait_add(out, max, n, PP_WAIT_UNMATCHED, r->rank == PP_ANY_SOURCE ? PP_WAIT_NOPEER : r->rank,
                r->tag, 0, "receive (%s, %s) never matched", src_name(r->rank, b, sizeof(b)), t);
    return;
  }
  (void)p;
  if (r->proto == PP_P2P_RNDV_GET)
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->src, r->mtag, 0,
                "rndv (RGET) receive from rank %u tag %u waits for its READ of %u bytes", r->src,
                r->mtag, r->got);
  else
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->src, r->mtag, 0,
                "rndv receive from rank %u tag %u waits for the sender's data and FIN (%u of %u "
                "fragments)", r->src, r->mtag, r->fdone, r->nfrag);
}

static bool in_ooo(const struct p2p *p, const struct rx *x)
{
  const struct peer *pe = &p->peer[p->ch[x->ch].peer];
  for (const struct rx *o = pe->ooo; o; o = o->ooo_next)
    if (o == x)
      return true;
  return false;
}

static void pending_held(const struct p2p *p, struct pp_wait *out, size_t max, size_t *n)
{
  for (uint32_t i = 0; i < p->ntotal_rx; i++) {
    const struct rx *x = &p->rx[i];
    if (x->state != RX_HELD)
      continue;
    const struct hdr *h = rx_hdr(p, x);
    uint32_t rank = p->peer[p->ch[x->ch].peer].rank;
    if (in_ooo(p, x))
      pp_wait_add(out, max, n, PP_WAIT_MESSAGE, rank, h->tag, 0,
                  "message seq %u from rank %u held until an earlier one arrives", h->seq, rank);
    else
      pp_wait_add(out, max, n, PP_WAIT_UNEXPECTED, rank, h->tag, 0,
                  "%s from rank %u tag %u (%u bytes) arrived and no receive matched it",
                  h->type == M_RTS ? "rndv RTS" : "eager message", rank, h->tag, h->len);
  }
}

size_t p2p_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct p2p *p = P2P(e);
  size_t n = 0;
  if (!p || !p->req)
    return 0;
  for (uint32_t i = 0; i < p->prm.max_requests; i++) {
    const struct req *r = &p->req[i];
    if (r->state == RQ_FREE || r->state == RQ_DONE)
      continue;
    if (r->kind == K_SEND)
      pending_send(e, p, r, out, max, &n);
    else
      pending_recv(p, r, out, max, &n);
  }
  pending_held(p, out, max, &n);
  for (uint32_t i = 0; i < p->nch; i++) {
    const struct chan *c = &p->ch[i];
    if (!c->failed && c->cq_head != NO_TX)
      pp_wait_add(out, max, &n, PP_WAIT_CREDITS, p->peer[c->peer].rank, PP_WAIT_NOTAG, 0,
                  "replies (CTS, FIN, ACK) to rank %u wait for reply credits (%u left) or "
                  "send-queue room (%u used)", p->peer[c->peer].rank, c->rcredits, c->sq_used);
  }
  return n;
}

