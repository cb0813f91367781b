/*
 * p2p.srq: eager receives from one shared receive queue (SRQ) per rank, its buffers lent to the
 * peers as credits, so that eager receive memory does not grow with the number of peers (UCX's
 * rc/dc transports and NCCL's IB transport use an SRQ at scale for the same reason).
 *
 * The QPs. With srq, every channel has two RC QPs: the data QP, whose receives come from the
 * SRQ, carries the matching messages (EAGER, RTS) and nothing else; the control QP, with a
 * receive queue of its own of R + C buffers of HDR bytes (reply credits and explicit CREDIT
 * messages, as without srq, p2p_impl.h), carries CTS, FIN, ACK, CREDIT and the RDMA READs and
 * WRITEs (a FIN follows its WRITEs on the same QP, as RC ordering requires). A message of the
 * wrong kind on either QP breaks the protocol; one longer than HDR on the control QP is the
 * NIC's LOC_LEN_ERR, which fails that peer only.
 *
 * The pool. srq_buffers buffers of HDR + eager_limit bytes (raised to peers x channels +
 * srq_limit + 1). Every data credit a channel's sender holds is a pool buffer posted for it;
 * at every moment the buffers posted cover the credits outstanding (lent, not yet back as a
 * held message) plus srq_limit, the headroom never lent:
 *
 *     posted >= sum over channels of (grant - held) + srq_limit
 *
 * so a sender that spends only its credits never finds the SRQ empty: zero RNR. The SRQ's limit
 * is srq_limit: with honest peers it never fires; SRQ_LIMIT_REACHED means a peer is eating into
 * the headroom (sending without credit). Then every spare buffer is posted (refill) and the limit
 * re-armed with ibv_modify_srq, as ibverbs requires (the event is one-shot).
 *
 * Lending. Each channel starts with one credit (grant 1, on both ends without a message) and
 * never drops below it: a peer can always send its next message, so a receiver that waits for
 * one peer's message while others' unexpected messages hold the rest of the pool still gets it
 * (the guarantee that `credits` gives without srq, with 1 in place of `credits`). Every EAGER and
 * RTS says how many sends queued behind it its sender's credits do not cover (hdr.want) and how
 * many credits it had received so far (hdr.nfrag, mod 2^32): the receiver subtracts the credits
 * still on their way to the sender and gets the sender's unmet need exactly. While a channel
 * needs more, the receiver lends it credits out of the pool (up to `credits` per channel: what
 * one peer may hold, unexpected messages included), handed back as owed credits are (piggy-
 * backed or in CREDIT messages); a channel the pool cannot serve now waits in line, served as
 * credits come back. When a message of a channel that needs nothing more is consumed, its credit
 * goes back to the pool instead (down to the first one); its buffer then stays unposted (spare)
 * until a credit needs it.
 *
 * Untrusted peers. The receiver counts what it lent: a matching message that arrives when its
 * channel has nothing outstanding (held + owed >= grant) came without a credit: a violation
 * (PP_VF_NO_CREDIT) that fails that peer's connection, and its buffer goes back to the SRQ. What
 * such a peer can take from the others is bounded by srq_limit: its messages eat the headroom
 * first, and the first one the engine sees fails it (its QPs go to ERROR, so its later packets
 * take no WQE). A peer that lies in `want` gets at most `credits` buffers, as an honest one that
 * needs them. The unexpected messages of a failed peer stay matchable, and hold their buffers
 * until received.
 *
 * Failures. A QP that goes to ERROR flushes its own queues, not the SRQ's WQEs: they stay posted
 * for the other QPs, so the pool needs nothing back but the failed channel's credits
 * (p2p_srq_fail_channel). A channel fails as a whole: whichever of its two QPs failed, the other
 * goes to ERROR too (fail.c), so no WRITE or SEND of a failed request runs afterwards. A data QP
 * has no receive queue of its own: failed with no send outstanding, it makes no completion, and
 * QP_LAST_WQE_REACHED (which a QP on an SRQ raises when it enters ERROR) fails its channel.
 *
 * Test bug srq-no-credits (engine/core/bugs.h): senders ignore their credits and receivers do
 * not check them: RNR NAKs once the pool (posted and spare) runs dry.
 */
#include "p2p_impl.h"

#include <stdlib.h>

struct qmap {
  uint32_t qpn, ch;
};

struct p2p_srq {
  uint32_t num;        /* srq_num */
  uint32_t n, limit;   /* buffers, watermark (the headroom never lent) */
  uint32_t rx0;        /* p->rx index of the first pool buffer */
  uint32_t posted;     /* pool buffers in the SRQ, as completions processed say */
  uint32_t out;        /* sum of the channels' grant - held */
  uint32_t lent;       /* sum of the grants */
  uint32_t *spare, nspare;       /* consumed, their credit back in the pool, not posted */
  uint32_t *line, lhead, ln;     /* channels waiting for credits (a ring of nch) */
  struct rx *dead;               /* buffers of broken messages, posted at the end of the event */
  struct qmap *map;              /* data QPs by qpn, sorted */
  uint8_t *buf;
  struct pp_mr mr;
};

uint32_t p2p_srq_num(const struct p2p *p)
{
  return p->srq ? p->srq->num : 0;
}

static int qmap_cmp(const void *a, const void *b)
{
  const struct qmap *x = a, *y = b;
  return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

enum pp_status p2p_srq_post(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  struct pp_recv_wr wr = {
      .wr_id = WRID(W_RECV, 0, r->idx),
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)r->buf, .length = p->bsize, .lkey = q->mr.lkey}},
  };
  r->state = RX_POSTED;
  r->over = false;
  enum pp_status s = (enum pp_status)e->ops->post_srq_recv(e->nic, q->num, &wr);
  if (s == PP_OK)
    q->posted++;
  return s;
}

/* Posts spare buffers until `k` more credits are covered; returns how many are. */
static uint32_t cover(struct pp_engine *e, uint32_t k)
{
  struct p2p_srq *q = P2P(e)->srq;
  while (q->nspare && q->posted < q->out + q->limit + k)
    if (p2p_srq_post(e, &P2P(e)->rx[q->spare[--q->nspare]]) != PP_OK)
      break;
  uint64_t have = q->posted > (uint64_t)q->out + q->limit ? q->posted - q->out - q->limit : 0;
  return have < k ? (uint32_t)have : k;
}

/* Lends channel c what it needs, as far as the pool and its bound allow. */
static void lend(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  uint32_t k = c->need < p->D - c->grant ? c->need : p->D - c->grant;
  k = k ? cover(e, k) : 0;
  c->grant += k;
  c->owed += k;
  c->need -= k;
  q->out += k;
  q->lent += k;
  p->st.srq_lent += k;
  if (q->lent > p->st.srq_lent_max)
    p->st.srq_lent_max = q->lent;
  if (c->need && c->grant < p->D && !c->waiting) {
    c->waiting = true;
    q->line[(q->lhead + q->ln++) % p->nch] = (uint32_t)(c - p->ch);
  }
}

/* Credits came back to the pool: the channels in line get them, first come first served. */
static enum pp_status serve(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  while (q->ln) {
    struct chan *c = &p->ch[q->line[q->lhead]];
    q->lhead = (q->lhead + 1) % p->nch;
    q->ln--;
    c->waiting = false;
    if (c->failed || !c->need || c->grant >= p->D)
      continue;
    uint32_t before = c->grant;
    lend(e, c); /* still short: back in line, at the end */
    if (c->grant != before) {
      enum pp_status s = p2p_credits_due(e, (uint32_t)(c - p->ch));
      if (s != PP_OK)
        return s;
    }
    if (c->waiting) /* the pool is dry: the others wait too */
      break;
  }
  return PP_OK;
}

enum pp_status p2p_srq_create(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = calloc(1, sizeof(*q));
  if (!q)
    return PP_NOMEM;
  p->srq = q;
  q->n = p->npool;
  q->limit = p->prm.srq_limit;
  q->rx0 = p->ntotal_rx;
  q->spare = calloc(q->n, sizeof(*q->spare));
  q->line = calloc(p->nch ? p->nch : 1, sizeof(*q->line));
  q->map = calloc(p->nch ? p->nch : 1, sizeof(*q->map));
  q->buf = calloc(q->n, p->bsize);
  if (!q->spare || !q->line || !q->map || !q->buf)
    return PP_NOMEM;
  enum pp_status s = pp_engine_reg(e, q->buf, (size_t)q->n * p->bsize, PP_ACCESS_LOCAL_WRITE,
                                   &q->mr);
  if (s != PP_OK)
    return s;
  struct pp_srq_init_attr a = {.max_wr = q->n, .max_sge = 1, .srq_limit = q->limit};
  if ((s = pp_nic_create_srq(e, &a, &q->num)) != PP_OK)
    return s;
  for (uint32_t i = 0; i < q->n; i++) {
    struct rx *r = &p->rx[q->rx0 + i];
    r->buf = q->buf + (size_t)i * p->bsize;
    r->pool = true;
    r->state = RX_HELD;
    q->spare[q->nspare++] = q->rx0 + q->n - 1 - i; /* posted from the first */
  }
  q->out = q->lent = p->nch; /* every channel's first credit */
  p->st.srq_lent_max = q->lent;
  return cover(e, 0) == 0 && q->posted >= q->out + q->limit ? PP_OK : PP_NOMEM;
}

/* After the channels were opened: the data QPs, sorted for p2p_srq_rx. */
void p2p_srq_map(struct p2p *p)
{
  struct p2p_srq *q = p->srq;
  for (uint32_t i = 0; i < p->nch; i++)
    q->map[i] = (struct qmap){.qpn = p->ch[i].dqpn, .ch = i};
  qsort(q->map, p->nch, sizeof(*q->map), qmap_cmp);
}

void p2p_srq_destroy(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  if (!q)
    return;
  if (q->num)
    pp_nic_destroy_srq(e, q->num);
  if (q->mr.lkey)
    e->ops->dereg_mr(e->nic, &q->mr);
  free(q->spare);
  free(q->line);
  free(q->map);
  free(q->buf);
  free(q);
  p->srq = NULL;
}

uint32_t p2p_srq_chan_of(const struct p2p *p, uint32_t qpn)
{
  const struct p2p_srq *q = p->srq;
  uint32_t lo = 0, hi = p->nch;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (q->map[mid].qpn < qpn)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < p->nch && q->map[lo].qpn == qpn ? q->map[lo].ch : UINT32_MAX;
}

/* The pool buffer of receive completion wr index i, its channel the data QP's (NULL: none). */
struct rx *p2p_srq_rx(struct pp_engine *e, uint32_t i, const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  if (i < q->rx0 || i - q->rx0 >= q->n || p->rx[i].state != RX_POSTED)
    return NULL;
  uint32_t ch = p2p_srq_chan_of(p, wc->qp_num);
  if (ch == UINT32_MAX)
    return NULL;
  struct rx *r = &p->rx[i];
  r->ch = ch;
  r->over = true; /* holds no credit until p2p_srq_arrive says it does */
  assert(q->posted > 0);
  q->posted--;
  return r;
}

/* A matching message in pool buffer x (its credits already taken): it must have come with a
 * credit; what its sender says it still needs is lent if the pool has it. */
enum pp_status p2p_srq_arrive(struct pp_engine *e, uint64_t now, struct rx *x,
                              const struct hdr *h)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  uint32_t ci = x->ch;
  struct chan *c = &p->ch[ci];
  if (c->held + c->owed >= c->grant) {
    p->st.srq_overruns++;
    if (!PP_BUG(&e->cfg, SRQ_NO_CREDITS))
      return p2p_violation(e, now, x, h->type, PP_VF_NO_CREDIT, c->held + c->owed,
                           c->grant - 1ull, true);
  } else {
    x->over = false;
    c->held++;
    q->out--;
  }
  int64_t need = (int64_t)h->want - (int64_t)(uint32_t)(c->given - h->nfrag);
  c->need = need > 0 ? (uint32_t)need : 0;
  if (!c->need || c->grant >= p->D)
    return PP_OK;
  uint32_t before = c->grant;
  lend(e, c);
  return c->grant != before ? p2p_credits_due(e, ci) : PP_OK;
}

/* Pool buffer r was consumed: it goes back to the SRQ with its credit owed to the peer again,
 * or, when the peer needs nothing more, its credit goes back to the pool (the channel keeps one)
 * and the buffer waits, spare. */
enum pp_status p2p_srq_release(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  struct chan *c = &p->ch[r->ch];
  assert(c->inuse > 0);
  c->inuse--;
  if (r->over)
    return p2p_srq_post(e, r);
  assert(c->held > 0);
  c->held--;
  if (!c->failed && (c->need || c->grant <= 1)) {
    enum pp_status s = p2p_srq_post(e, r);
    if (s != PP_OK)
      return s;
    c->need -= c->need > 0;
    c->owed++;
    q->out++;
    return p2p_credits_due(e, r->ch);
  }
  c->grant--;
  q->lent--;
  p->st.srq_reclaimed++;
  r->state = RX_HELD;
  q->spare[q->nspare++] = r->idx;
  enum pp_status s = c->failed ? PP_OK : p2p_credits_due(e, r->ch); /* it may be dry now */
  return s == PP_OK && q->ln ? serve(e) : s;
}

/* A pool buffer whose message broke the protocol (or whose peer failed): its credit is gone
 * with the channel, the buffer goes back to the SRQ at the end of the event. */
void p2p_srq_recycle(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  struct chan *c = &p->ch[r->ch];
  if (!r->over) {
    assert(c->held > 0 && c->grant > 0);
    c->held--;
    c->grant--;
    q->lent--;
    r->over = true;
  }
  r->state = RX_DEAD;
  r->ooo_next = q->dead;
  q->dead = r;
}

enum pp_status p2p_srq_flush_dead(struct pp_engine *e)
{
  struct p2p_srq *q = P2P(e)->srq;
  enum pp_status s = PP_OK;
  while (q->dead && s == PP_OK) {
    struct rx *r = q->dead;
    q->dead = r->ooo_next;
    r->ooo_next = NULL;
    s = p2p_srq_post(e, r);
  }
  return s;
}

/* Channel c failed: its QPs take no more messages, so what it had outstanding comes back. */
void p2p_srq_fail_channel(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  uint32_t back = c->grant - c->held;
  q->out -= back;
  q->lent -= back;
  c->grant = c->held;
  c->need = 0;
  c->owed = 0;
}

enum pp_status p2p_srq_on_async(struct pp_engine *e, uint64_t now,
                                const struct pp_async_event *ev)
{
  (void)now;
  struct p2p *p = P2P(e);
  struct p2p_srq *q = p->srq;
  if (!q || ev->type != PP_EVENT_SRQ_LIMIT_REACHED || ev->srq_num != q->num)
    return PP_OK;
  p->st.srq_limit_events++;
  enum pp_status s = PP_OK;
  while (q->nspare && s == PP_OK) {
    s = p2p_srq_post(e, &p->rx[q->spare[--q->nspare]]);
    p->st.srq_refilled += s == PP_OK;
  }
  if (s == PP_OK) /* one-shot: armed again, as ibv_modify_srq(IBV_SRQ_LIMIT) does */
    s = pp_nic_modify_srq(e, q->num, q->limit);
  return s;
}

void p2p_srq_stats(const struct p2p *p, struct pp_p2p_stats *out)
{
  out->srq_buffers = p->srq ? p->srq->n : 0;
}
