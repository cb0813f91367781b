/*
 * prepost trace export --perfetto: Chrome trace event JSON, which ui.perfetto.dev and
 * chrome://tracing load. One process per rank, one thread per QP:
 *  - an async slice per work request, from its post to its completion (category send / recv);
 *  - per message (packet, or consuming send on a verbs trace) a short slice where it leaves and
 *    where it arrives, joined by a flow arrow;
 *  - instant events for error completions and RNR NAKs;
 *  - counter tracks per rank: sends outstanding, receives posted, RNR NAKs received;
 *  - the protocol's messages (every send that consumes a receive, paired with the completion it
 *    caused, on either backend), named as the protocol names them: EAGER, RTS, CTS, FIN, ACK,
 *    CREDIT (p2p: from the header the trace captured at the receiver), data and credit (ring:
 *    from the immediate), data (naive), a registered protocol's own names (its def's msg_name, from
 *    the captured header: DATA and CREDIT of proto-window); a slice at each end and a flow arrow (category
 *    "protocol"); the send slices carry the same names;
 *  - counter tracks per QP: the eager (data) credits a p2p sender holds, the slots a ring sender
 *    may still write (ring credits) and the slots a ring receiver holds that it has not returned
 *    (ring occupancy).
 * Ranks are processes pid 1.. (rank + 1: Perfetto's pid 0 is the idle process), SRQ receives a
 * thread of their own (tid 1). Work requests pair with their completions per queue in post
 * order (below). A time window and an event limit (struct pp_export_opts) keep a big run
 * loadable; --proto writes Perfetto's protobuf format instead (export/perfetto_out.h).
 * Times are microseconds with nanosecond decimals (JSON), nanoseconds (protobuf).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli_util.h"
#include "prepost/p2p.h"
#include "prepost/proto.h"
#include "export/perfetto_out.h"
#include "tools/export/export_msgs.h"
#include "tools/trace/trace_cli.h"

/*
 * Work requests pair with their completions per queue in post order, as an RC QP completes
 * them: a send queue in order (an unsignalled WR ends with the next completion, which covers
 * it), a receive queue in order, an SRQ in the order its WQEs are taken. A completion ends the
 * oldest open WR of its queue with its wr_id (the ring protocols post every receive with the
 * same wr_id, so wr_id alone cannot pair them).
 */
struct wq_ent {
  uint64_t wr_id, id; /* id: the async slice's */
  const char *name;   /* the slice's name (at its begin and its end) */
  size_t next;        /* the next open entry of its queue, SIZE_MAX: none */
  uint32_t rank, tid, lane; /* lane: protobuf's track for the slice (perfetto_out.h) */
  bool recv, signaled, drawn;
};

struct wq {
  uint64_t key; /* rank << 34 | kind << 32 | number, + 1 (0 = empty); kind 0 SQ, 1 RQ, 2 SRQ */
  size_t head, tail;
  uint32_t srq; /* kind 0: the QP's SRQ (0: its own receive queue) */
};

struct wqs {
  struct wq *q;
  size_t cap, n;
  struct wq_ent *e;
  size_t ne, ecap;
};

enum { WQ_SQ = 0, WQ_RQ = 1, WQ_SRQ = 2 };

static uint64_t wq_key(uint32_t rank, unsigned kind, uint32_t num)
{
  return ((uint64_t)rank << 34 | (uint64_t)kind << 32 | num) + 1;
}

static size_t wq_hash(uint64_t key, size_t cap)
{
  uint64_t x = key * 0x9e3779b97f4a7c15ull;
  return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static struct wq *wq_find(struct wqs *m, uint64_t key)
{
  if (!m->cap)
    return NULL;
  for (size_t h = wq_hash(key, m->cap); m->q[h].key; h = (h + 1) & (m->cap - 1))
    if (m->q[h].key == key)
      return &m->q[h];
  return NULL;
}

static struct wq *wq_get(struct wqs *m, uint64_t key)
{
  struct wq *q = wq_find(m, key);
  if (q)
    return q;
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    struct wq *n = calloc(cap, sizeof(*n));
    if (!n)
      return NULL;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->q[i].key)
        continue;
      size_t h = wq_hash(m->q[i].key, cap);
      while (n[h].key)
        h = (h + 1) & (cap - 1);
      n[h] = m->q[i];
    }
    free(m->q);
    m->q = n;
    m->cap = cap;
  }
  size_t h = wq_hash(key, m->cap);
  while (m->q[h].key)
    h = (h + 1) & (m->cap - 1);
  m->n++;
  m->q[h] = (struct wq){.key = key, .head = SIZE_MAX, .tail = SIZE_MAX};
  return &m->q[h];
}

/* Appends an open entry to queue `key`; NULL when out of memory. */
static struct wq_ent *wq_push(struct wqs *m, uint64_t key)
{
  struct wq *q = wq_get(m, key);
  if (!q)
    return NULL;
  if (m->ne == m->ecap) {
    size_t c = m->ecap ? m->ecap * 2 : 1024;
    struct wq_ent *x = realloc(m->e, c * sizeof(*x));
    if (!x)
      return NULL;
    m->e = x;
    m->ecap = c;
  }
  size_t i = m->ne++;
  m->e[i] = (struct wq_ent){.next = SIZE_MAX};
  if (q->tail == SIZE_MAX)
    q->head = i;
  else
    m->e[q->tail].next = i;
  q->tail = i;
  return &m->e[i];
}

/* The oldest open entry of queue `key` a completion of wr_id ends (a send queue's unsignalled
 * entries are passed over unless the completion is an error); its index, SIZE_MAX: none. It is
 * unlinked, and on a send queue so are the entries before it, which it covers (unsignalled
 * sends): *covered is the first of them (SIZE_MAX: none), chained by next up to the one taken. */
static size_t wq_take(struct wqs *m, uint64_t key, uint64_t wr_id, bool error, size_t *covered)
{
  struct wq *q = wq_find(m, key);
  *covered = SIZE_MAX;
  if (!q)
    return SIZE_MAX;
  size_t prev = SIZE_MAX;
  for (size_t i = q->head; i != SIZE_MAX; prev = i, i = m->e[i].next) {
    const struct wq_ent *e = &m->e[i];
    if (e->wr_id != wr_id || (!e->recv && !e->signaled && !error))
      continue;
    if (!e->recv) { /* the send queue completes in order */
      if (q->head != i)
        *covered = q->head;
      q->head = e->next;
    } else if (prev == SIZE_MAX) {
      q->head = e->next;
    } else {
      m->e[prev].next = e->next;
    }
    if (q->tail == i)
      q->tail = e->recv ? prev : SIZE_MAX;
    return i;
  }
  return SIZE_MAX;
}

static void wqs_free(struct wqs *m)
{
  free(m->q);
  free(m->e);
}

struct rank_ctr {
  int64_t sends, recvs;
  uint64_t rnr;
};

static void counter(struct pf_out *w, uint32_t pid, uint64_t ts, const struct rank_ctr *c)
{
  static const char *const keys[] = {"sends outstanding", "receives posted"};
  int64_t vals[] = {c->sends, c->recvs};
  pf_counter(w, pid, "work requests", keys, vals, 2, ts);
}

/* What is drawn: events in the time window [from, to), at most max of them (0: no limit), a work
 * request's slice, a counter's change, an error and a message with its arrow counting one each;
 * a slice begun is always ended (its end is not counted). */
struct gate {
  uint64_t from, to, max, n;
  bool cut; /* an event in the window was left out for the limit */
};

static bool admit(struct gate *g, uint64_t ts)
{
  if (ts < g->from || ts >= g->to)
    return false;
  if (g->max && g->n >= g->max) {
    g->cut = true;
    return false;
  }
  g->n++;
  return true;
}

#define PID(rank) ((rank) + 1u) /* Perfetto's pid 0 is the idle process: ranks are pid 1.. */
#define SRQ_TID 1u             /* SRQ receives' thread (QP 1 is the GSI QP: never RC) */

/* ---------------------------------------------------------------- the protocol's messages */

struct pmsg {
  const char *name;
  bool costs_credit;     /* p2p EAGER, RTS: one data credit of the sender */
  uint32_t credits_back; /* p2p: data credits it hands back to its receiver */
  bool ring_data, ring_credit;
  uint32_t ring_val;     /* ring credit: the 31-bit value of the immediate */
};

struct proto {
  struct pp_xnames names; /* fam: the family; def: a protocol naming its own messages */
  uint32_t credits; /* p2p: a sender's data credits per QP at the start */
  uint32_t slots;   /* ring: slots per channel */
  struct pp_xmsg *m;
  struct pmsg *pm;
  size_t n;
  size_t *by_send; /* record number of a POST_SEND -> message, SIZE_MAX; nrecs entries */
};

/* What the head captured right before a receive completion says (p2p). */
static void name_p2p(const struct pp_trace *t, const struct pp_xmsg *m, struct pmsg *p)
{
  struct pp_p2p_msg_info info;
  p->name = pp_xmsg_name(t, &(struct pp_xnames){.fam = PP_XFAM_P2P}, m);
  if (!pp_xmsg_p2p_info(t, m, &info))
    return; /* not received, or its head not captured: "message" */
  p->costs_credit = info.type == PP_P2P_MSG_EAGER || info.type == PP_P2P_MSG_RTS;
  p->credits_back = info.credits;
}

static const char *one_sided_name(enum pp_xfam fam, enum pp_wr_opcode op)
{
  if (fam == PP_XFAM_RING_CREDITS || fam == PP_XFAM_RING_CTS)
    return "credit"; /* the wrapped head of a CTS range, written ahead of its update */
  return op == PP_WR_RDMA_READ ? "data (RDMA READ)" : "data (RDMA WRITE)";
}

static int proto_load(const struct pp_trace *t, struct proto *P, char *err, size_t errlen)
{
  memset(P, 0, sizeof(*P));
  struct pp_engine_cfg cfg = {0};
  char note[256];
  pp_xnames_of(t, &P->names);
  if (pp_trace_engine_cfg(t, &cfg, note, sizeof(note)) == PP_OK) {
    struct pp_p2p_params prm;
    pp_p2p_params_resolve(&cfg, &prm); /* the defaults the engine applied */
    P->credits = prm.credits;
    P->slots = pp_ring_params_of(&cfg)->slots;
  }
  if (pp_trace_protocol_messages(t, &P->m, &P->n, err, errlen))
    return -1;
  P->pm = calloc(P->n ? P->n : 1, sizeof(*P->pm));
  P->by_send = malloc((t->nrecs ? t->nrecs : 1) * sizeof(*P->by_send));
  if (!P->pm || !P->by_send) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < t->nrecs; i++)
    P->by_send[i] = SIZE_MAX;
  for (size_t i = 0; i < P->n; i++) {
    const struct pp_xmsg *m = &P->m[i];
    struct pmsg *p = &P->pm[i];
    P->by_send[m->send_rec] = i;
    p->name = "data";
    if (P->names.fam == PP_XFAM_P2P) {
      name_p2p(t, m, p);
    } else if (P->names.def && m->opcode != PP_WR_RDMA_WRITE && m->opcode != PP_WR_RDMA_READ) {
      p->name = pp_xmsg_name(t, &P->names, m);
    } else if ((P->names.fam == PP_XFAM_RING_CREDITS || P->names.fam == PP_XFAM_RING_CTS) &&
               m->opcode == PP_WR_RDMA_WRITE_WITH_IMM) {
      struct pp_trace_rec r;
      if (pp_trace_get(t, m->send_rec, &r) != PP_OK)
        continue;
      uint32_t imm = r.u.send.wr.imm_data;
      p->ring_credit = (imm & PP_RING_IMM_CREDIT) != 0;
      p->ring_data = !p->ring_credit;
      p->ring_val = imm & (PP_RING_IMM_CREDIT - 1);
      p->name = p->ring_credit ? "credit" : "data";
    }
  }
  return 0;
}

static void proto_free(struct proto *P)
{
  free(P->m);
  free(P->pm);
  free(P->by_send);
}

/* One change of a counter: at ts, on (rank, qpn). */
enum ckind { CK_EAGER, CK_RING_SENT, CK_RING_LIMIT, CK_RING_ARRIVED, CK_RING_CONSUMED };
struct cev {
  uint64_t ts, seq;
  uint32_t rank, qpn, peer;
  enum ckind kind;
  int64_t arg;
};

struct ctrack {
  uint32_t rank, qpn, peer;
  bool ring_rx; /* occupancy (receiving side) rather than credits */
  int64_t credits;
  uint64_t sent, limit, arrived, consumed, last_limit, last_consumed;
};

static int cev_cmp(const void *a, const void *b)
{
  const struct cev *x = a, *y = b;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A 31-bit serial number after `prev`, as a running 64-bit count. */
static uint64_t unwrap31(uint64_t prev, uint32_t v)
{
  uint32_t d = (v - (uint32_t)prev) & 0x7fffffffu;
  return d & 0x40000000u ? prev - (0x80000000u - d) : prev + d;
}

static struct ctrack *ctrack_of(struct ctrack **tr, size_t *n, size_t *cap, const struct cev *e,
                                bool ring_rx, const struct proto *P)
{
  for (size_t i = 0; i < *n; i++)
    if ((*tr)[i].rank == e->rank && (*tr)[i].qpn == e->qpn && (*tr)[i].ring_rx == ring_rx)
      return &(*tr)[i];
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    struct ctrack *x = realloc(*tr, c * sizeof(*x));
    if (!x)
      return NULL;
    *tr = x;
    *cap = c;
  }
  struct ctrack *k = &(*tr)[(*n)++];
  *k = (struct ctrack){.rank = e->rank, .qpn = e->qpn, .peer = e->peer, .ring_rx = ring_rx,
                       .credits = P->credits, .limit = P->slots};
  return k;
}

static int push_cev(struct cev **v, size_t *n, size_t *cap, struct cev e)
{
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 256;
    struct cev *x = realloc(*v, c * sizeof(*x));
    if (!x)
      return -1;
    *v = x;
    *cap = c;
  }
  e.seq = *n;
  (*v)[(*n)++] = e;
  return 0;
}

/* The counter changes each message makes, at its send and at its arrival. */
static int proto_counter_events(const struct proto *P, struct cev **v, size_t *n)
{
  size_t cap = 0;
  for (size_t i = 0; i < P->n; i++) {
    const struct pp_xmsg *m = &P->m[i];
    const struct pmsg *p = &P->pm[i];
    bool arrived = m->t1 != UINT64_MAX;
    struct cev tx = {.ts = m->t0, .rank = m->src, .qpn = m->src_qpn, .peer = m->dst};
    struct cev rx = {.ts = m->t1, .rank = m->dst, .qpn = m->dst_qpn, .peer = m->src};
    int rc = 0;
    if (P->names.fam == PP_XFAM_P2P && P->credits) {
      if (p->costs_credit)
        tx.kind = CK_EAGER, tx.arg = -1, rc |= push_cev(v, n, &cap, tx);
      if (arrived && p->credits_back)
        rx.kind = CK_EAGER, rx.arg = p->credits_back, rc |= push_cev(v, n, &cap, rx);
    } else if (P->names.fam == PP_XFAM_RING_CREDITS || P->names.fam == PP_XFAM_RING_CTS) {
      if (p->ring_data) {
        tx.kind = CK_RING_SENT, rc |= push_cev(v, n, &cap, tx);
        if (arrived)
          rx.kind = CK_RING_ARRIVED, rc |= push_cev(v, n, &cap, rx);
      } else if (p->ring_credit) {
        tx.kind = CK_RING_CONSUMED, tx.arg = p->ring_val, rc |= push_cev(v, n, &cap, tx);
        if (arrived)
          rx.kind = CK_RING_LIMIT, rx.arg = p->ring_val, rc |= push_cev(v, n, &cap, rx);
      }
    }
    if (rc)
      return -1;
  }
  return 0;
}

static int proto_counters(struct pf_out *w, const struct proto *P, struct gate *g)
{
  struct cev *v = NULL;
  size_t n = 0, nt = 0, tcap = 0;
  struct ctrack *tr = NULL;
  int rc = proto_counter_events(P, &v, &n);
  if (rc == 0 && n)
    qsort(v, n, sizeof(*v), cev_cmp);
  uint64_t S = P->slots;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const struct cev *e = &v[i];
    bool ring_rx = e->kind == CK_RING_ARRIVED || e->kind == CK_RING_CONSUMED;
    struct ctrack *k = ctrack_of(&tr, &nt, &tcap, e, ring_rx, P);
    if (!k) {
      rc = -1;
      break;
    }
    const char *what;
    int64_t val;
    switch (e->kind) {
    case CK_EAGER:
      k->credits += e->arg;
      what = "eager credits", val = k->credits;
      break;
    case CK_RING_SENT:
    case CK_RING_LIMIT:
      if (e->kind == CK_RING_SENT) {
        k->sent++;
      } else { /* ring-credits: the receiver's head, S slots beyond it; ring-cts: the end */
        k->last_limit = unwrap31(k->last_limit, (uint32_t)e->arg);
        k->limit = k->last_limit + (P->names.fam == PP_XFAM_RING_CREDITS ? S : 0);
      }
      what = "ring credits", val = (int64_t)k->limit - (int64_t)k->sent;
      break;
    default:
      if (e->kind == CK_RING_ARRIVED) {
        k->arrived++;
      } else {
        k->last_consumed = unwrap31(k->last_consumed, (uint32_t)e->arg);
        k->consumed = k->last_consumed - (P->names.fam == PP_XFAM_RING_CTS ? S : 0);
      }
      what = "ring occupancy", val = (int64_t)k->arrived - (int64_t)k->consumed;
      break;
    }
    if (!admit(g, e->ts))
      continue;
    char name[96];
    snprintf(name, sizeof(name), "%s qp 0x%x %s rank %u", what, k->qpn, ring_rx ? "from" : "to",
             k->peer);
    const char *key = ring_rx ? "slots" : "credits";
    pf_counter(w, PID(k->rank), name, &key, &val, 1, e->ts);
  }
  free(v);
  free(tr);
  return rc;
}

/* A slice where each protocol message leaves and where it arrives, joined by a flow arrow. */
static void proto_flows(struct pf_out *w, const struct proto *P, size_t id0, struct gate *g)
{
  for (size_t i = 0; i < P->n; i++) {
    const struct pp_xmsg *m = &P->m[i];
    if (!admit(g, m->t0))
      continue;
    const char *nm = P->pm[i].name;
    bool arrived = m->t1 != UINT64_MAX;
    struct pf_arg tx[] = {{.key = "opcode", .s = pp_wr_opcode_name((enum pp_wr_opcode)m->opcode)},
                          {.key = "bytes", .u = m->len},
                          {.key = "to", .u = m->dst}};
    pf_mark(w, PID(m->src), m->src_qpn, "protocol", nm, m->t0, arrived ? id0 + i + 1 : 0, false,
            tx, 3);
    if (!arrived)
      continue;
    struct pf_arg rx[] = {{.key = "from", .u = m->src}};
    pf_mark(w, PID(m->dst), m->dst_qpn, "protocol", nm, m->t1, id0 + i + 1, true, rx, 1);
  }
}

/* The name of a send slice: its protocol message, or what a one-sided operation carries. */
static const char *send_name(const struct proto *P, size_t rec, enum pp_wr_opcode op)
{
  size_t k = P->by_send[rec];
  if (k != SIZE_MAX)
    return P->pm[k].name;
  if (op == PP_WR_RDMA_WRITE || op == PP_WR_RDMA_READ)
    return one_sided_name(P->names.fam, op);
  return pp_wr_opcode_name(op);
}

static void slice_end(struct pf_out *w, const struct wq_ent *e, uint64_t ts, const char *status,
                      uint32_t byte_len)
{
  struct pf_arg a[] = {{.key = "status", .s = status}, {.key = "byte_len", .u = byte_len}};
  pf_end(w, PID(e->rank), e->tid, e->recv ? "recv" : "send", e->name, e->id, ts, a, 2, e->lane);
}

static int perfetto_post(struct pf_out *w, struct wqs *W, const struct proto *P, struct gate *g,
                         const struct pp_trace_rec *r, size_t i, uint64_t *next_id,
                         struct rank_ctr *c)
{
  unsigned type = r->type;
  bool recv = type != PP_TREC_POST_SEND;
  uint32_t q = recv ? r->u.recv.qp_num : r->u.send.qp_num;
  uint64_t key = wq_key(r->rank, type == PP_TREC_POST_SEND ? WQ_SQ
                                 : type == PP_TREC_POST_RECV ? WQ_RQ
                                                             : WQ_SRQ, q);
  struct wq_ent *e = wq_push(W, key);
  if (!e)
    return -1;
  e->wr_id = recv ? r->u.recv.wr.wr_id : r->u.send.wr.wr_id;
  e->recv = recv;
  e->signaled = recv || (r->u.send.wr.send_flags & PP_SEND_SIGNALED);
  e->rank = r->rank;
  e->tid = type == PP_TREC_POST_SRQ_RECV ? SRQ_TID : q;
  e->name = recv ? "receive WQE" : send_name(P, i, r->u.send.wr.opcode);
  if (recv)
    c->recvs++;
  else
    c->sends++;
  if (!(e->drawn = admit(g, r->ts)))
    return 0;
  e->id = (*next_id)++;
  uint32_t len = 0;
  const struct pp_sge *sg = recv ? r->u.recv.wr.sg_list : r->u.send.wr.sg_list;
  uint32_t nsge = recv ? r->u.recv.wr.num_sge : r->u.send.wr.num_sge;
  for (uint32_t s = 0; s < nsge && s < PP_MAX_SGE; s++)
    len += sg[s].length;
  char wr_id[24];
  snprintf(wr_id, sizeof(wr_id), "0x%" PRIx64, e->wr_id);
  struct pf_arg a[] = {{.key = "wr_id", .s = wr_id},
                       {.key = "bytes", .u = len},
                       {.key = "opcode", .s = recv ? "RECV" : pp_wr_opcode_name(r->u.send.wr.opcode)}};
  pf_begin(w, PID(r->rank), e->tid, recv ? "recv" : "send", e->name, e->id, r->ts, a, 3,
           &e->lane);
  if (admit(g, r->ts))
    counter(w, PID(r->rank), r->ts, c);
  return 0;
}

/* The WR a completion ends: on its send queue, or on its receive queue or SRQ (an error's
 * opcode is undefined in ibverbs: the send queue first, then the receive side). */
static void perfetto_wc(struct pf_out *w, struct wqs *W, struct gate *g,
                        const struct pp_trace_rec *r, struct rank_ctr *c)
{
  const struct pp_wc *wc = &r->u.wc;
  bool error = wc->status != PP_WC_SUCCESS;
  bool is_recv = wc->opcode == PP_WC_OP_RECV || wc->opcode == PP_WC_OP_RECV_RDMA_WITH_IMM;
  const struct wq *sq = wq_find(W, wq_key(r->rank, WQ_SQ, wc->qp_num));
  uint32_t srq = sq ? sq->srq : 0;
  uint64_t rkey = srq ? wq_key(r->rank, WQ_SRQ, srq) : wq_key(r->rank, WQ_RQ, wc->qp_num);
  size_t cov = SIZE_MAX, k = SIZE_MAX;
  if (!is_recv || error)
    k = wq_take(W, wq_key(r->rank, WQ_SQ, wc->qp_num), wc->wr_id, error, &cov);
  if (k == SIZE_MAX && (is_recv || error))
    k = wq_take(W, rkey, wc->wr_id, error, &cov);
  if (error && admit(g, r->ts)) {
    char wr_id[24];
    snprintf(wr_id, sizeof(wr_id), "0x%" PRIx64, wc->wr_id);
    struct pf_arg a[] = {{.key = "wr_id", .s = wr_id}};
    pf_instant(w, PID(r->rank), wc->qp_num, pp_wc_status_name(wc->status), r->ts, a, 1);
  }
  if (k == SIZE_MAX)
    return;
  for (size_t j = cov; j != SIZE_MAX && j != k; j = W->e[j].next) {
    c->sends--; /* unsignalled, covered by this completion */
    if (W->e[j].drawn)
      slice_end(w, &W->e[j], r->ts, "covered", 0);
  }
  const struct wq_ent *e = &W->e[k];
  if (e->recv)
    c->recvs--;
  else
    c->sends--;
  if (e->drawn)
    slice_end(w, e, r->ts, pp_wc_status_name(wc->status), wc->byte_len);
  if (admit(g, r->ts))
    counter(w, PID(r->rank), r->ts, c);
}

static void perfetto_wire(struct pf_out *w, const struct pp_trace *t,
                          const struct pp_xnames *names, const struct pp_xmsg *msgs, size_t nmsg,
                          struct gate *g)
{
  for (size_t i = 0; i < nmsg; i++) {
    const struct pp_xmsg *m = &msgs[i];
    if (!admit(g, m->t0))
      continue;
    const char *nm = pp_xmsg_name(t, names, m);
    bool arrived = m->t1 != UINT64_MAX; /* lost or still in flight: no arrow */
    bool psn = pp_xmsg_has_psn(m);      /* the args without a PSN the trace does not have */
    struct pf_arg tx[] = {{.key = "bytes", .u = m->len}, {.key = "to", .u = m->dst},
                          {.key = "psn", .u = m->psn}};
    pf_mark(w, PID(m->src), m->src_qpn, "wire", nm, m->t0, arrived ? i + 1 : 0, false, tx,
            psn ? 3 : 2);
    if (!arrived)
      continue;
    struct pf_arg rx[] = {{.key = "from", .u = m->src}, {.key = "psn", .u = m->psn}};
    pf_mark(w, PID(m->dst), m->dst_qpn, "wire", nm, m->t1, i + 1, true, rx, psn ? 2 : 1);
  }
}

int pp_export_perfetto(const struct pp_trace *t, FILE *o, const struct pp_export_opts *opts,
                       char *err, size_t errlen)
{
  struct pp_xmsg *msgs = NULL;
  size_t nmsg = 0;
  if (pp_trace_messages(t, &msgs, &nmsg, err, errlen))
    return -1;
  struct proto P;
  if (proto_load(t, &P, err, errlen)) {
    proto_free(&P);
    free(msgs);
    return -1;
  }
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "scenario.name");
  struct rank_ctr *ctr = calloc(t->nranks ? t->nranks : 1, sizeof(*ctr));
  struct pf_out *w = pf_open(o, opts->proto, name && name->type == PP_TKV_STR ? name->s : "?");
  struct wqs W = {0};
  if (!ctr || !w) {
    if (w)
      pf_close(w, NULL);
    proto_free(&P);
    free(ctr);
    free(msgs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  struct gate g = {.from = opts->from_ns, .to = opts->to_ns ? opts->to_ns : UINT64_MAX,
                   .max = opts->max_events};
  uint64_t end_ts = 0, next_id = 1;
  for (uint32_t r = 0; r < t->nranks; r++) {
    char pname[32];
    snprintf(pname, sizeof(pname), "rank %u", r);
    pf_process(w, PID(r), pname, r);
    pf_thread(w, PID(r), SRQ_TID, "SRQ receives");
  }
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < t->nrecs; i++) {
    unsigned type = t->idx[i].type;
    if (type != PP_TREC_CREATE_QP && type != PP_TREC_POST_SEND && type != PP_TREC_POST_RECV &&
        type != PP_TREC_POST_SRQ_RECV && type != PP_TREC_WC && type != PP_TREC_PKT_TX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK || r.rank >= t->nranks) {
      rc = -1;
      break;
    }
    end_ts = r.ts > end_ts ? r.ts : end_ts;
    struct rank_ctr *c = &ctr[r.rank];
    switch (type) {
    case PP_TREC_CREATE_QP: {
      if (r.ret != PP_OK)
        break;
      struct wq *q = wq_get(&W, wq_key(r.rank, WQ_SQ, r.u.cqp.qp_num));
      if (!q) {
        rc = -1;
        break;
      }
      q->srq = r.u.cqp.attr.srq_num;
      char tname[48];
      snprintf(tname, sizeof(tname), "qp 0x%x to rank %u", r.u.cqp.qp_num, r.u.cqp.attr.peer);
      pf_thread(w, PID(r.rank), r.u.cqp.qp_num, tname);
      break;
    }
    case PP_TREC_POST_SEND:
    case PP_TREC_POST_RECV:
    case PP_TREC_POST_SRQ_RECV:
      if (r.ret == PP_OK)
        rc = perfetto_post(w, &W, &P, &g, &r, i, &next_id, c);
      break;
    case PP_TREC_WC:
      perfetto_wc(w, &W, &g, &r, c);
      break;
    case PP_TREC_PKT_TX:
      if (r.u.pkt.kind == PP_TPKT_RNR_NAK && r.u.pkt.dst_rank < t->nranks) {
        struct rank_ctr *d = &ctr[r.u.pkt.dst_rank];
        d->rnr++;
        const char *key = "RNR NAKs";
        int64_t v = (int64_t)d->rnr;
        if (admit(&g, r.ts))
          pf_counter(w, PID(r.u.pkt.dst_rank), "RNR NAKs received", &key, &v, 1, r.ts);
      }
      break;
    }
  }
  /* work requests never completed end with the trace */
  for (size_t h = 0; rc == 0 && h < W.cap; h++)
    for (size_t k = W.q[h].key ? W.q[h].head : SIZE_MAX; k != SIZE_MAX; k = W.e[k].next)
      if (W.e[k].drawn)
        slice_end(w, &W.e[k], end_ts, "pending", 0);
  if (rc == 0) {
    perfetto_wire(w, t, &P.names, msgs, nmsg, &g);
    proto_flows(w, &P, nmsg, &g); /* flow ids after the wire's */
    rc = proto_counters(w, &P, &g);
  }
  char meta[256], *mp = NULL;
  if (g.cut || g.from || g.to != UINT64_MAX) {
    snprintf(meta, sizeof(meta), "{\"prepost_window_ns\":[%" PRIu64 ",%" PRIu64 "],"
             "\"prepost_events\":%" PRIu64 ",\"prepost_truncated\":%s}", g.from,
             g.to == UINT64_MAX ? end_ts : g.to, g.n, g.cut ? "true" : "false");
    mp = meta;
    if (g.cut)
      fprintf(stderr, "prepost: perfetto: stopped at %" PRIu64 " events (--max-events); "
              "--window FROM:TO shows a later part\n", g.max);
  }
  int wrc = pf_close(w, mp);
  proto_free(&P);
  wqs_free(&W);
  free(ctr);
  free(msgs);
  if (rc || wrc || ferror(o)) {
    snprintf(err, errlen, rc ? "reading the trace or memory failed" : "writing the trace failed");
    return -1;
  }
  return 0;
}
