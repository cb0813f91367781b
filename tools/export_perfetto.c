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
 *    from the immediate), data (naive); a slice at each end and a flow arrow (category
 *    "protocol"); the send slices carry the same names;
 *  - counter tracks per QP: the eager (data) credits a p2p sender holds, the slots a ring sender
 *    may still write (ring credits) and the slots a ring receiver holds that it has not returned
 *    (ring occupancy).
 * Times are microseconds with nanosecond decimals.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "prepost/p2p.h"
#include "export_msgs.h"
#include "trace_cli.h"

struct wr_ent {
  uint64_t key, wr_id; /* key = rank << 32 | qpn, + 1 (0 = empty) */
  uint64_t id;         /* async slice id */
  int recv;
  const char *name;    /* the slice's name (at its begin and its end) */
};

struct wrmap {
  struct wr_ent *e;
  size_t cap, n;
};

static size_t wr_hash(uint64_t key, uint64_t wr_id, size_t cap)
{
  uint64_t x = (key * 0x9e3779b97f4a7c15ull) ^ wr_id ^ (wr_id >> 29);
  return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static struct wr_ent *wr_find(struct wrmap *m, uint64_t key, uint64_t wr_id)
{
  if (!m->cap)
    return NULL;
  size_t h = wr_hash(key, wr_id, m->cap);
  while (m->e[h].key) {
    if (m->e[h].key == key && m->e[h].wr_id == wr_id)
      return &m->e[h];
    h = (h + 1) & (m->cap - 1);
  }
  return NULL;
}

static void wr_del(struct wrmap *m, struct wr_ent *e)
{
  size_t i = (size_t)(e - m->e), mask = m->cap - 1, j = i;
  m->e[i].key = 0;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->e[j].key)
      break;
    size_t h = wr_hash(m->e[j].key, m->e[j].wr_id, m->cap);
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      m->e[i] = m->e[j];
      m->e[j].key = 0;
      i = j;
    }
  }
  m->n--;
}

static struct wr_ent *wr_put(struct wrmap *m, uint64_t key, uint64_t wr_id)
{
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    struct wr_ent *n = calloc(cap, sizeof(*n));
    if (!n)
      return NULL;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->e[i].key)
        continue;
      size_t h = wr_hash(m->e[i].key, m->e[i].wr_id, cap);
      while (n[h].key)
        h = (h + 1) & (cap - 1);
      n[h] = m->e[i];
    }
    free(m->e);
    m->e = n;
    m->cap = cap;
  }
  size_t h = wr_hash(key, wr_id, m->cap);
  while (m->e[h].key && !(m->e[h].key == key && m->e[h].wr_id == wr_id))
    h = (h + 1) & (m->cap - 1);
  if (!m->e[h].key)
    m->n++;
  m->e[h].key = key;
  m->e[h].wr_id = wr_id;
  return &m->e[h];
}

struct rank_ctr {
  int64_t sends, recvs;
  uint64_t rnr;
};

static void us(FILE *o, uint64_t ns)
{
  fprintf(o, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void counter(FILE *o, const char **sep, uint32_t rank, uint64_t ts,
                    const struct rank_ctr *c)
{
  fprintf(o, "%s{\"ph\":\"C\",\"name\":\"work requests\",\"pid\":%u,\"ts\":", *sep, rank);
  us(o, ts);
  fprintf(o, ",\"args\":{\"sends outstanding\":%" PRId64 ",\"receives posted\":%" PRId64 "}}",
          c->sends, c->recvs);
  *sep = ",\n";
}

static const char *msg_name(const struct pp_xmsg *m)
{
  switch (m->kind) {
  case PP_MK_DATA:
    return pp_wr_opcode_name((enum pp_wr_opcode)m->opcode);
  case PP_MK_ACK:
    return "ACK";
  case PP_MK_RNR_NAK:
    return "RNR NAK";
  case PP_MK_NAK:
    return "NAK";
  default:
    return "READ RESPONSE";
  }
}

/* ---------------------------------------------------------------- the protocol's messages */

enum family { FAM_PLAIN, FAM_P2P, FAM_RING_CREDITS, FAM_RING_CTS };

struct pmsg {
  const char *name;
  bool costs_credit;     /* p2p EAGER, RTS: one data credit of the sender */
  uint32_t credits_back; /* p2p: data credits it hands back to its receiver */
  bool ring_data, ring_credit;
  uint32_t ring_val;     /* ring credit: the 31-bit value of the immediate */
};

struct proto {
  enum family fam;
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
  struct pp_trace_rec r;
  struct pp_p2p_msg_info info;
  size_t i = m->recv_rec;
  if (i == SIZE_MAX || i == 0 || t->idx[i - 1].type != PP_TREC_MEM ||
      t->idx[i - 1].rank != m->dst || pp_trace_get(t, i - 1, &r) != PP_OK ||
      !pp_p2p_msg_describe(r.u.mem.data, r.u.mem.len, &info)) {
    p->name = "message"; /* not received, or its head not captured */
    return;
  }
  p->name = pp_p2p_msg_name(info.type);
  p->costs_credit = info.type == PP_P2P_MSG_EAGER || info.type == PP_P2P_MSG_RTS;
  p->credits_back = info.credits;
}

static const char *one_sided_name(enum family fam, enum pp_wr_opcode op)
{
  if (fam == FAM_RING_CREDITS || fam == FAM_RING_CTS)
    return "credit"; /* the wrapped head of a CTS range, written ahead of its update */
  return op == PP_WR_RDMA_READ ? "data (RDMA READ)" : "data (RDMA WRITE)";
}

static int proto_load(const struct pp_trace *t, struct proto *P, char *err, size_t errlen)
{
  memset(P, 0, sizeof(*P));
  struct pp_engine_cfg cfg = {0};
  char note[256];
  if (pp_trace_engine_cfg(t, &cfg, note, sizeof(note)) == PP_OK) {
    P->fam = cfg.protocol == PP_PROTO_EAGER || cfg.protocol == PP_PROTO_RNDV ? FAM_P2P
             : cfg.protocol == PP_PROTO_RING_CREDITS                          ? FAM_RING_CREDITS
             : cfg.protocol == PP_PROTO_RING_CTS                              ? FAM_RING_CTS
                                                                              : FAM_PLAIN;
    struct pp_p2p_params prm;
    pp_p2p_params_resolve(&cfg, &prm); /* the defaults the engine applied */
    P->credits = prm.credits;
    P->slots = cfg.ring.slots;
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
    if (P->fam == FAM_P2P) {
      name_p2p(t, m, p);
    } else if ((P->fam == FAM_RING_CREDITS || P->fam == FAM_RING_CTS) &&
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
    if (P->fam == FAM_P2P && P->credits) {
      if (p->costs_credit)
        tx.kind = CK_EAGER, tx.arg = -1, rc |= push_cev(v, n, &cap, tx);
      if (arrived && p->credits_back)
        rx.kind = CK_EAGER, rx.arg = p->credits_back, rc |= push_cev(v, n, &cap, rx);
    } else if (P->fam == FAM_RING_CREDITS || P->fam == FAM_RING_CTS) {
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

static int proto_counters(FILE *o, const char **sep, const struct proto *P)
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
        k->limit = k->last_limit + (P->fam == FAM_RING_CREDITS ? S : 0);
      }
      what = "ring credits", val = (int64_t)k->limit - (int64_t)k->sent;
      break;
    default:
      if (e->kind == CK_RING_ARRIVED) {
        k->arrived++;
      } else {
        k->last_consumed = unwrap31(k->last_consumed, (uint32_t)e->arg);
        k->consumed = k->last_consumed - (P->fam == FAM_RING_CTS ? S : 0);
      }
      what = "ring occupancy", val = (int64_t)k->arrived - (int64_t)k->consumed;
      break;
    }
    fprintf(o, "%s{\"ph\":\"C\",\"name\":\"%s qp 0x%x %s rank %u\",\"pid\":%u,\"ts\":", *sep,
            what, k->qpn, ring_rx ? "from" : "to", k->peer, k->rank);
    us(o, e->ts);
    fprintf(o, ",\"args\":{\"%s\":%" PRId64 "}}", ring_rx ? "slots" : "credits", val);
    *sep = ",\n";
  }
  free(v);
  free(tr);
  return rc;
}

/* A slice where each protocol message leaves and where it arrives, joined by a flow arrow. */
static void proto_flows(FILE *o, const char **sep, const struct proto *P, size_t id0)
{
  for (size_t i = 0; i < P->n; i++) {
    const struct pp_xmsg *m = &P->m[i];
    const char *nm = P->pm[i].name;
    fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"protocol\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
            "\"ts\":", *sep, nm, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"opcode\":\"%s\",\"bytes\":%u,\"to\":%u}}",
            pp_wr_opcode_name((enum pp_wr_opcode)m->opcode), m->len, m->dst);
    *sep = ",\n";
    if (m->t1 == UINT64_MAX)
      continue;
    fprintf(o, "%s{\"ph\":\"s\",\"cat\":\"protocol\",\"name\":\"%s\",\"id\":%zu,\"pid\":%u,"
            "\"tid\":%u,\"ts\":", *sep, nm, id0 + i + 1, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, "}%s{\"ph\":\"X\",\"cat\":\"protocol\",\"name\":\"%s arrives\",\"pid\":%u,"
            "\"tid\":%u,\"ts\":", *sep, nm, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"from\":%u}}", m->src);
    fprintf(o, "%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"protocol\",\"name\":\"%s\",\"id\":"
            "%zu,\"pid\":%u,\"tid\":%u,\"ts\":", *sep, nm, id0 + i + 1, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, "}");
  }
}

/* The name of a send slice: its protocol message, or what a one-sided operation carries. */
static const char *send_name(const struct proto *P, size_t rec, enum pp_wr_opcode op)
{
  size_t k = P->by_send[rec];
  if (k != SIZE_MAX)
    return P->pm[k].name;
  if (op == PP_WR_RDMA_WRITE || op == PP_WR_RDMA_READ)
    return one_sided_name(P->fam, op);
  return pp_wr_opcode_name(op);
}

int pp_export_perfetto(const struct pp_trace *t, FILE *o, const struct pp_export_opts *opts,
                       char *err, size_t errlen)
{
  (void)opts;
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
  struct rank_ctr *ctr = calloc(t->nranks, sizeof(*ctr));
  struct wrmap wrs = {0};
  if (!ctr) {
    proto_free(&P);
    free(msgs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *sep = "";
  uint64_t end_ts = 0, next_id = 1;
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "scenario.name");
  fprintf(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"scenario\":");
  pp_json_string(o, name && name->type == PP_TKV_STR ? name->s : "?");
  fprintf(o, "},\"traceEvents\":[\n");
  for (uint32_t r = 0; r < t->nranks; r++) {
    fprintf(o, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"rank %u\"}}",
            sep, r, r);
    sep = ",\n";
    fprintf(o, "%s{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"args\":"
            "{\"sort_index\":%u}}", sep, r, r);
  }
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < t->nrecs; i++) {
    unsigned type = t->idx[i].type;
    if (type != PP_TREC_CREATE_QP && type != PP_TREC_POST_SEND && type != PP_TREC_POST_RECV &&
        type != PP_TREC_POST_SRQ_RECV && type != PP_TREC_WC && type != PP_TREC_PKT_TX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK) {
      rc = -1;
      break;
    }
    end_ts = r.ts > end_ts ? r.ts : end_ts;
    struct rank_ctr *c = &ctr[r.rank];
    switch (type) {
    case PP_TREC_CREATE_QP:
      if (r.ret == PP_OK)
        fprintf(o, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
                "{\"name\":\"qp 0x%x to rank %u\"}}", sep, r.rank, r.u.cqp.qp_num,
                r.u.cqp.qp_num, r.u.cqp.attr.peer);
      break;
    case PP_TREC_POST_SEND:
    case PP_TREC_POST_RECV:
    case PP_TREC_POST_SRQ_RECV: {
      if (r.ret != PP_OK)
        break;
      bool recv = type != PP_TREC_POST_SEND;
      uint32_t q = recv ? r.u.recv.qp_num : r.u.send.qp_num;
      uint64_t wr_id = recv ? r.u.recv.wr.wr_id : r.u.send.wr.wr_id;
      uint64_t key = ((uint64_t)r.rank << 32 | q) + 1;
      if (type == PP_TREC_POST_SRQ_RECV)
        key |= 1ull << 63;
      struct wr_ent *e = wr_put(&wrs, key, wr_id);
      if (!e) {
        rc = -1;
        break;
      }
      e->id = next_id++;
      e->recv = recv;
      e->name = recv ? "receive WQE" : send_name(&P, i, r.u.send.wr.opcode);
      uint32_t len = 0;
      const struct pp_sge *sg = recv ? r.u.recv.wr.sg_list : r.u.send.wr.sg_list;
      uint32_t nsge = recv ? r.u.recv.wr.num_sge : r.u.send.wr.num_sge;
      for (uint32_t s = 0; s < nsge && s < PP_MAX_SGE; s++)
        len += sg[s].length;
      fprintf(o, "%s{\"ph\":\"b\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
              ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, recv ? "recv" : "send", e->name, e->id, r.rank,
              type == PP_TREC_POST_SRQ_RECV ? 0 : q);
      us(o, r.ts);
      fprintf(o, ",\"args\":{\"wr_id\":\"0x%" PRIx64 "\",\"bytes\":%u,\"opcode\":\"%s\"}}", wr_id,
              len, recv ? "RECV" : pp_wr_opcode_name(r.u.send.wr.opcode));
      if (recv)
        c->recvs++;
      else
        c->sends++;
      counter(o, &sep, r.rank, r.ts, c);
      break;
    }
    case PP_TREC_WC: {
      const struct pp_wc *w = &r.u.wc;
      uint64_t key = ((uint64_t)r.rank << 32 | w->qp_num) + 1;
      struct wr_ent *e = wr_find(&wrs, key, w->wr_id);
      if (!e) { /* an SRQ receive: any SRQ of the rank with this wr_id */
        for (size_t h = 0; h < wrs.cap && !e; h++)
          if (wrs.e[h].key && (wrs.e[h].key & (1ull << 63)) &&
              ((wrs.e[h].key & ~(1ull << 63)) - 1) >> 32 == r.rank && wrs.e[h].wr_id == w->wr_id)
            e = &wrs.e[h];
      }
      if (w->status != PP_WC_SUCCESS) {
        fprintf(o, "%s{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
                sep, pp_wc_status_name(w->status), r.rank, w->qp_num);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"wr_id\":\"0x%" PRIx64 "\"}}", w->wr_id);
      }
      if (e) {
        fprintf(o, "%s{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
                ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, e->recv ? "recv" : "send", e->name, e->id,
                r.rank,
                (e->key >> 63) ? 0 : w->qp_num);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"status\":\"%s\",\"byte_len\":%u}}", pp_wc_status_name(w->status),
                w->byte_len);
        if (e->recv)
          c->recvs--;
        else
          c->sends--;
        wr_del(&wrs, e);
        counter(o, &sep, r.rank, r.ts, c);
      }
      break;
    }
    case PP_TREC_PKT_TX:
      if (r.u.pkt.kind == PP_TPKT_RNR_NAK && r.u.pkt.dst_rank < t->nranks) {
        struct rank_ctr *d = &ctr[r.u.pkt.dst_rank];
        d->rnr++;
        fprintf(o, "%s{\"ph\":\"C\",\"name\":\"RNR NAKs received\",\"pid\":%u,\"ts\":", sep,
                r.u.pkt.dst_rank);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"RNR NAKs\":%" PRIu64 "}}", d->rnr);
      }
      break;
    }
  }
  /* work requests never completed end with the trace */
  for (size_t h = 0; rc == 0 && h < wrs.cap; h++) {
    const struct wr_ent *e = &wrs.e[h];
    if (!e->key)
      continue;
    uint64_t k = (e->key & ~(1ull << 63)) - 1;
    fprintf(o, "%s{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
            ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, e->recv ? "recv" : "send", e->name, e->id,
            (uint32_t)(k >> 32), (e->key >> 63) ? 0 : (uint32_t)k);
    us(o, end_ts);
    fprintf(o, ",\"args\":{\"status\":\"pending\"}}");
  }
  /* messages: a short slice at each end, joined by a flow arrow */
  for (size_t i = 0; rc == 0 && i < nmsg; i++) {
    const struct pp_xmsg *m = &msgs[i];
    const char *nm = msg_name(m);
    fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"wire\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
            sep, nm, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"psn\":%u,\"bytes\":%u,\"to\":%u}}", m->psn, m->len,
            m->dst);
    if (m->t1 == UINT64_MAX)
      continue; /* lost or still in flight: no arrow */
    fprintf(o, "%s{\"ph\":\"s\",\"cat\":\"wire\",\"name\":\"%s\",\"id\":%zu,\"pid\":%u,"
            "\"tid\":%u,\"ts\":", sep, nm, i + 1, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, "}");
    fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"wire\",\"name\":\"%s arrives\",\"pid\":%u,\"tid\":%u,"
            "\"ts\":", sep, nm, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"psn\":%u,\"from\":%u}}", m->psn, m->src);
    fprintf(o, "%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wire\",\"name\":\"%s\",\"id\":%zu,"
            "\"pid\":%u,\"tid\":%u,\"ts\":", sep, nm, i + 1, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, "}");
  }
  if (rc == 0) {
    proto_flows(o, &sep, &P, nmsg); /* flow ids after the wire's */
    rc = proto_counters(o, &sep, &P);
  }
  fprintf(o, "\n]}\n");
  proto_free(&P);
  free(wrs.e);
  free(ctr);
  free(msgs);
  if (rc || ferror(o)) {
    snprintf(err, errlen, "writing the JSON failed");
    return -1;
  }
  return 0;
}
