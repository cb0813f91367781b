/* p2p: matching messages (EAGER, RTS) in sequence, to their receives or unexpected. */
#include "p2p_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ receiving */

/* An EAGER message matched receive r (x: its buffer): copied, ACKed when synchronous. */
static inline enum pp_status eager_recv(struct pp_engine *e, uint64_t now, struct req *r,
                                        struct rx *x)
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
    p2p_complete(e, now, r);
  return p2p_release_rx(e, x);
}

/* Receive r matched the message in x: it takes the message's source, tag and length (inline
 * into deliver: an arrival that matched is the eager path's). */
static inline __attribute__((always_inline)) enum pp_status
start_recv(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  if (h->type != M_EAGER)
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
  p2p_req_set(p, r, RQ_ACTIVE);
  if (h->type == M_EAGER)
    return eager_recv(e, now, r, x);
  return p2p_rndv_start(e, now, r, x);
}

enum pp_status p2p_start_recv(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x)
{
  return start_recv(e, now, r, x);
}

/* A matching message, in sequence: to its receive, or into the unexpected queue. */
static inline enum pp_status deliver(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  uint32_t rank = p->peer[p->ch[x->ch].peer].rank;
  if (h->flags & F_ABORT) /* a send given up: it only held its place in the sequence */
    return p2p_release_rx(e, x);
  struct pp_mentry *m = pp_match_arrive(&p->match, h->ctx, rank, h->tag);
  if (m) {
    struct req *r = pp_container_of(m, struct req, me);
    r->flags &= ~R_POSTED;
    return start_recv(e, now, r, x);
  }
  x->state = RX_HELD;
  p->st.unexpected++;
  if (++p->nheld > p->st.unexpected_max)
    p->st.unexpected_max = p->nheld;
  return pp_match_add_unexpected(&p->match, &x->me, h->ctx, rank, h->tag);
}

enum pp_status p2p_on_match_msg(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  struct peer *pe = &p->peer[c->peer];
  if (h->seq != pe->recv_seq) { /* an earlier message is still on its way on another channel */
    struct rx **pp = &pe->ooo;
    while (*pp && (int32_t)(rx_hdr(p, *pp)->seq - h->seq) < 0)
      pp = &(*pp)->ooo_next;
    if (*pp && rx_hdr(p, *pp)->seq == h->seq) /* a second message with this number */
      return p2p_violation(e, now, x, h->type, PP_VF_SEQ, h->seq, pe->recv_seq, false);
    p->st.out_of_order++;
    c->inuse++;
    x->state = RX_HELD;
    x->ooo_next = *pp;
    *pp = x;
    return PP_OK;
  }
  c->inuse++;
  x->state = RX_HELD;
  for (;;) { /* x, then the messages held out of order that follow it in sequence */
    enum pp_status s = deliver(e, now, x);
    pe->recv_seq++;
    if (s != PP_OK || !pe->ooo || rx_hdr(p, pe->ooo)->seq != pe->recv_seq)
      return s;
    x = pe->ooo;
    pe->ooo = x->ooo_next;
  }
}
