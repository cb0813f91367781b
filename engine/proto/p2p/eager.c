/* p2p: matching messages (EAGER, RTS) in sequence, to their receives or unexpected. */
#include "p2p_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ receiving */

/* The eager fast path of the receiver: an EAGER message that arrives in sequence (`fast`)
 * goes through deliver, start_recv and eager_recv always inline, with `fast` a constant at the
 * one call site that passes true (p2p_on_eager_msg, which wire.c calls for every EAGER that
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
    p2p_complete(e, now, r);
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
  p2p_req_set(p, r, RQ_ACTIVE);
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
  struct pp_mentry *m = pp_match_arrive(&p->match, h->ctx, rank, h->tag);
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

enum pp_status p2p_on_match_msg(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  struct peer *pe = in_seq(p, x);
  if (!pe)
    return hold_ooo(e, now, &p->peer[p->ch[x->ch].peer], x);
  return deliver_run(e, now, pe, x);
}

/* The eager fast path (see RECV_INLINE): an EAGER message that arrives in sequence is delivered
 * by the specialised deliver; what follows it out of order, by the general one. */
enum pp_status p2p_on_eager_msg(struct pp_engine *e, uint64_t now, struct rx *x)
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
