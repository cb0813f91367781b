/*
 * prepost trace import: the conversation of each RC connection in a capture. A connection
 * direction is a requester QP and the responder QP it sends to; requests carry only the
 * responder's QP number (BTH DestQP), responses only the requester's, so a direction is found by
 * (requester host, responder host, responder QPN) and its responses are paired to it by hosts
 * and PSN window (the first response names the requester's QPN, and the reverse direction of
 * the same QP pair follows). PSN arithmetic is modulo 2^24 (IBTA 9.7.1).
 */
#define _DEFAULT_SOURCE /* libpcap needs the BSD types (u_char, u_int) */
#include <assert.h>
#include <inttypes.h>
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/nic.h"
#include "prepost/trace.h"
#include "tools/import/import.h"

#define PSN_MASK 0xffffffu

static uint32_t psn_dist(uint32_t a, uint32_t b) /* a - b mod 2^24 */
{
  return (a - b) & PSN_MASK;
}

static bool psn_ahead(uint32_t a, uint32_t b) /* a > b */
{
  uint32_t d = psn_dist(a, b);
  return d != 0 && d < 0x800000u;
}

struct walk {
  struct pp_import *m;
  char *err;
  size_t errlen;
  uint64_t frame;
  size_t last_conn;
  uint32_t mtu; /* the largest payload of a FIRST or MIDDLE packet: the path MTU */
};

static int fail(struct walk *w, const char *what)
{
  snprintf(w->err, w->errlen, "frame %" PRIu64 ": %s", w->frame, what);
  return -1;
}

static int host_of(struct walk *w, const struct pp_ib_addr *a, uint32_t *out)
{
  struct pp_import *m = w->m;
  for (size_t i = 0; i < m->nhosts; i++)
    if (m->hosts[i].fam == a->fam && !memcmp(m->hosts[i].a, a->a, 16)) {
      *out = (uint32_t)i;
      return 0;
    }
  if (m->nhosts >= PP_IMPORT_MAX_HOSTS)
    return fail(w, "more than 1024 hosts in the capture (the importer's limit)");
  struct pp_ib_addr *h = realloc(m->hosts, (m->nhosts + 1) * sizeof(*h));
  if (!h)
    return fail(w, "out of memory");
  m->hosts = h;
  h[m->nhosts] = *a;
  *out = (uint32_t)m->nhosts++;
  return 0;
}

static struct pp_imp_conn *conn_new(struct walk *w, uint32_t req, uint32_t resp)
{
  struct pp_import *m = w->m;
  if (m->nconns >= PP_IMPORT_MAX_CONNS) {
    fail(w, "more than 65536 QP connections in the capture (the importer's limit)");
    return NULL;
  }
  struct pp_imp_conn *c = realloc(m->conns, (m->nconns + 1) * sizeof(*c));
  if (!c) {
    fail(w, "out of memory");
    return NULL;
  }
  m->conns = c;
  c += m->nconns++;
  memset(c, 0, sizeof(*c));
  c->req_host = req;
  c->resp_host = resp;
  c->size_min = UINT64_MAX;
  return c;
}

/* The other direction of a's QP pair, when it exists. */
static struct pp_imp_conn *reverse_of(struct pp_import *m, const struct pp_imp_conn *a)
{
  if (!a->req_qpn_known)
    return NULL;
  for (size_t i = 0; i < m->nconns; i++) {
    struct pp_imp_conn *c = &m->conns[i];
    if (c != a && c->req_host == a->resp_host && c->resp_host == a->req_host &&
        c->resp_qpn == a->req_qpn && c->seen_req)
      return c;
  }
  return NULL;
}

static void learn_req_qpn(struct pp_import *m, struct pp_imp_conn *c, uint32_t qpn)
{
  c->req_qpn = qpn;
  c->req_qpn_known = true;
  struct pp_imp_conn *r = reverse_of(m, c);
  if (r && !r->req_qpn_known) {
    r->req_qpn = c->resp_qpn;
    r->req_qpn_known = true;
  }
}

/* The direction a request from host `src` to (dst, qpn) belongs to. */
static struct pp_imp_conn *conn_of_request(struct walk *w, uint32_t src, uint32_t dst,
                                           uint32_t qpn)
{
  struct pp_import *m = w->m;
  if (w->last_conn < m->nconns) {
    struct pp_imp_conn *c = &m->conns[w->last_conn];
    if (c->seen_req && c->req_host == src && c->resp_host == dst && c->resp_qpn == qpn)
      return c;
  }
  for (size_t i = 0; i < m->nconns; i++) {
    struct pp_imp_conn *c = &m->conns[i];
    if (c->seen_req && c->req_host == src && c->resp_host == dst && c->resp_qpn == qpn) {
      w->last_conn = i;
      return c;
    }
  }
  /* responses may have come first (the capture started mid-conversation): a direction of this
   * host pair with responses and no requests yet becomes this one */
  struct pp_imp_conn *c = NULL;
  for (size_t i = 0; i < m->nconns && !c; i++)
    if (!m->conns[i].seen_req && m->conns[i].req_host == src && m->conns[i].resp_host == dst)
      c = &m->conns[i];
  if (!c && !(c = conn_new(w, src, dst)))
    return NULL;
  c->resp_qpn = qpn;
  c->seen_req = true;
  for (size_t i = 0; i < m->nconns && !c->req_qpn_known; i++) {
    struct pp_imp_conn *o = &m->conns[i];
    if (o != c && o->req_host == dst && o->resp_host == src && o->req_qpn_known &&
        o->req_qpn == qpn && o->seen_req) {
      c->req_qpn = o->resp_qpn;
      c->req_qpn_known = true;
    }
  }
  w->last_conn = (size_t)(c - m->conns);
  return c;
}

static bool in_window(const struct pp_imp_conn *c, uint32_t psn)
{
  return c->psn_known && !psn_ahead(psn, (c->next_psn - 1) & PSN_MASK) &&
         psn_dist(c->next_psn, psn) <= PP_IMPORT_MAX_OUTSTANDING;
}

/* The direction a response from host `src` (the responder) to (dst, qpn) answers. */
static struct pp_imp_conn *conn_of_response(struct walk *w, uint32_t src, uint32_t dst,
                                            uint32_t qpn, uint32_t psn)
{
  struct pp_import *m = w->m;
  struct pp_imp_conn *cand = NULL, *fit = NULL;
  for (size_t i = 0; i < m->nconns; i++) {
    struct pp_imp_conn *c = &m->conns[i];
    if (c->req_host != dst || c->resp_host != src)
      continue;
    if (c->req_qpn_known && c->req_qpn == qpn)
      return c;
    if (!c->req_qpn_known && c->seen_req) {
      cand = cand ? cand : c;
      if (!fit && in_window(c, psn))
        fit = c;
    }
  }
  struct pp_imp_conn *c = fit ? fit : cand;
  if (!c) { /* requests not in the capture (or before it) */
    if (!(c = conn_new(w, dst, src)))
      return NULL;
  }
  learn_req_qpn(m, c, qpn);
  return c;
}

/* ---------------------------------------------------------------- events for the trace */

static int push_event(struct walk *w, const struct pp_imp_event *e)
{
  struct pp_import *m = w->m;
  if (m->nev == m->evcap) {
    if (m->evcap >= PP_IMPORT_MAX_EVENTS)
      return fail(w, "more than 16M messages in the capture (the importer's limit)");
    size_t cap = m->evcap ? m->evcap * 2 : 1024;
    struct pp_imp_event *n = realloc(m->ev, cap * sizeof(*n));
    if (!n)
      return fail(w, "out of memory");
    m->ev = n;
    m->evcap = cap;
  }
  m->ev[m->nev++] = *e;
  return 0;
}

static int flush_pend(struct walk *w, struct pp_imp_conn *c, int which)
{
  struct pp_imp_pend *p = &c->pend[which];
  if (!p->npkts)
    return 0;
  struct pp_imp_event e = {
      .t0 = p->t0, .t1 = p->t1, .kind = which ? PP_TPKT_READ_RESP : PP_TPKT_REQ,
      .opcode = p->opcode, .psn = p->psn, .npkts = p->npkts, .len = p->len, .rkey = p->rkey,
      .imm = p->imm, .va = p->va};
  e.src_host = which ? c->resp_host : c->req_host;
  e.dst_host = which ? c->req_host : c->resp_host;
  e.src_qpn = which ? c->resp_qpn : c->req_qpn;
  e.dst_qpn = which ? c->req_qpn : c->resp_qpn;
  p->npkts = 0;
  return push_event(w, &e);
}

/* A packet of a message: FIRST starts one, LAST ends one, ONLY is both. */
static int pend_add(struct walk *w, struct pp_imp_conn *c, int which, uint64_t ts,
                    const struct pp_ib_pkt *k, uint32_t wr_op, bool first, bool last)
{
  struct pp_imp_pend *p = &c->pend[which];
  if ((first || psn_dist(k->psn, p->psn) != p->npkts) && flush_pend(w, c, which))
    return -1;
  if (!p->npkts)
    *p = (struct pp_imp_pend){.t0 = ts, .psn = k->psn, .opcode = wr_op};
  if (k->has_reth)
    p->va = k->va, p->rkey = k->rkey;
  if (k->has_imm)
    p->imm = k->imm;
  if (wr_op != PP_WR_RDMA_WRITE && wr_op != PP_WR_SEND)
    p->opcode = wr_op; /* the LAST packet says whether it carries immediate data */
  p->npkts++;
  p->len += k->opcode == 0x0c ? k->dma_len : k->payload;
  p->t1 = ts;
  return last ? flush_pend(w, c, which) : 0;
}

/* ---------------------------------------------------------------- requests */

static bool op_first(uint8_t op) { return op == 0x00 || op == 0x06 || op == 0x0d; }
static bool op_last(uint8_t op)
{
  return op == 0x02 || op == 0x03 || op == 0x04 || op == 0x05 || op == 0x08 || op == 0x09 ||
         op == 0x0a || op == 0x0b || op == 0x0c || op == 0x0f || op == 0x10 || op == 0x13 ||
         op == 0x14 || op == 0x16 || op == 0x17;
}

static bool op_only(uint8_t op)
{
  return op == 0x04 || op == 0x05 || op == 0x0a || op == 0x0b || op == 0x0c || op == 0x10 ||
         op == 0x13 || op == 0x14 || op == 0x17;
}

static uint32_t wr_opcode(uint8_t op)
{
  if (op == 0x03 || op == 0x05)
    return PP_WR_SEND_WITH_IMM;
  if (op >= 0x06 && op <= 0x0b)
    return op == 0x09 || op == 0x0b ? PP_WR_RDMA_WRITE_WITH_IMM : PP_WR_RDMA_WRITE;
  if (op == 0x0c)
    return PP_WR_RDMA_READ;
  return PP_WR_SEND;
}

static void end_rnr_streak(struct pp_imp_conn *c, uint64_t ts)
{
  uint64_t d = ts - c->rnr_open_since;
  c->rnr_wait_ns += d;
  if (d > c->rnr_wait_max_ns)
    c->rnr_wait_max_ns = d;
  if (!c->rnr_ended)
    c->rnr_end_first = ts, c->rnr_ended = true;
  c->rnr_open = false;
  c->rnr_open_naks = 0;
}

static int push_end(struct walk *w, struct pp_imp_conn *c, uint32_t end_psn)
{
  if (c->ends_n == c->ends_cap) {
    if (c->ends_cap >= PP_IMPORT_MAX_OUTSTANDING)
      return fail(w, "more than 1M unacknowledged messages on one QP (the importer's limit)");
    size_t cap = c->ends_cap ? c->ends_cap * 2 : 64;
    uint64_t *n = malloc(cap * sizeof(*n));
    if (!n)
      return fail(w, "out of memory");
    for (size_t i = 0; i < c->ends_n; i++)
      n[i] = c->ends[(c->ends_head + i) % c->ends_cap];
    free(c->ends);
    c->ends = n;
    c->ends_cap = cap;
    c->ends_head = 0;
  }
  c->ends[(c->ends_head + c->ends_n++) % c->ends_cap] = end_psn;
  return 0;
}

/* Keeps the end PSNs in PSN order (a gap's fill comes later than what followed it). */
static int insert_end(struct walk *w, struct pp_imp_conn *c, uint32_t end_psn)
{
  if (push_end(w, c, end_psn))
    return -1;
  size_t i = c->ends_n - 1;
  while (i > 0) {
    uint64_t *a = &c->ends[(c->ends_head + i - 1) % c->ends_cap];
    uint64_t *b = &c->ends[(c->ends_head + i) % c->ends_cap];
    if (!psn_ahead((uint32_t)*a, (uint32_t)*b))
      break;
    uint64_t t = *a;
    *a = *b;
    *b = t;
    i--;
  }
  return 0;
}

/* A request packet of a PSN not seen before: messages and bytes. */
static int count_message(struct walk *w, struct pp_imp_conn *c, uint64_t ts,
                         const struct pp_ib_pkt *k, uint32_t npsn)
{
  bool first = op_first(k->opcode) || op_only(k->opcode);
  if (first || !c->pend_open)
    c->pend_open = true, c->message_bytes_acc = 0, c->started++;
  c->message_bytes_acc += k->opcode == 0x0c ? k->dma_len : k->payload;
  if (!op_last(k->opcode))
    return 0;
  uint64_t size = c->message_bytes_acc;
  c->pend_open = false;
  c->messages++;
  c->message_bytes += size;
  c->by_op[wr_opcode(k->opcode) % 5]++;
  c->imm_msgs += k->has_imm;
  if (size < c->size_min)
    c->size_min = size;
  if (size > c->size_max)
    c->size_max = size;
  if (c->messages == 1)
    c->first_msg_ts = ts;
  if (c->nmsg_ts < sizeof(c->msg_ts) / sizeof(c->msg_ts[0]))
    c->msg_ts[c->nmsg_ts++] = ts;
  return insert_end(w, c, (k->psn + npsn - 1) & PSN_MASK);
}

/* PSNs of a gap: the requests the capture did not see (lost before it); a retransmission of
 * one is that PSN's first appearance. */
static void gap_add(struct pp_imp_conn *c, uint32_t lo, uint32_t n)
{
  size_t max = sizeof(c->miss_lo) / sizeof(c->miss_lo[0]);
  if (c->nmiss == max) { /* forget the oldest */
    memmove(c->miss_lo, c->miss_lo + 1, (max - 1) * sizeof(c->miss_lo[0]));
    memmove(c->miss_n, c->miss_n + 1, (max - 1) * sizeof(c->miss_n[0]));
    c->nmiss--;
  }
  c->miss_lo[c->nmiss] = lo;
  c->miss_n[c->nmiss++] = n;
}

static bool gap_fill(struct pp_imp_conn *c, uint32_t psn)
{
  for (size_t i = 0; i < c->nmiss; i++) {
    uint32_t d = psn_dist(psn, c->miss_lo[i]);
    if (d >= c->miss_n[i])
      continue;
    if (d == 0) { /* go-back-N resends in order: the front of the range */
      c->miss_lo[i] = (c->miss_lo[i] + 1) & PSN_MASK;
      c->miss_n[i]--;
    } else {
      c->miss_n[i] = d; /* the rest of the range after it: not expected again */
    }
    if (!c->miss_n[i]) {
      memmove(c->miss_lo + i, c->miss_lo + i + 1, (c->nmiss - i - 1) * sizeof(c->miss_lo[0]));
      memmove(c->miss_n + i, c->miss_n + i + 1, (c->nmiss - i - 1) * sizeof(c->miss_n[0]));
      c->nmiss--;
    }
    return true;
  }
  return false;
}

/* A request packet's length: its payload, a READ's the length it asks for. */
static uint32_t req_len(const struct pp_ib_pkt *k)
{
  return k->opcode == 0x0c ? k->dma_len : k->payload;
}

/* What a PSN first carried, for its retransmissions: a ring indexed by PSN modulo its size (a
 * power of two, so it divides 2^24 and the PSN wrap keeps neighbours apart), each slot holding
 * its PSN, so that an older PSN of the same index is never taken for this one. */
static struct pp_imp_sent *sent_slot(const struct pp_imp_conn *c, uint32_t psn)
{
  return c->sent_cap ? &c->sent[psn & (c->sent_cap - 1)] : NULL;
}

/* Doubles the ring (64 .. PP_IMPORT_SENT_PSNS). PSNs distinct modulo the old size are distinct
 * modulo the new one. */
static int sent_grow(struct walk *w, struct pp_imp_conn *c)
{
  size_t cap = c->sent_cap ? c->sent_cap * 2 : 64;
  assert(cap <= PP_IMPORT_SENT_PSNS && !(cap & (cap - 1)));
  struct pp_imp_sent *n = calloc(cap, sizeof(*n));
  if (!n)
    return fail(w, "out of memory");
  for (size_t i = 0; i < c->sent_cap; i++)
    if (c->sent[i].used)
      n[c->sent[i].psn & (cap - 1)] = c->sent[i];
  free(c->sent);
  c->sent = n;
  c->sent_cap = cap;
  return 0;
}

/* The first request packet of a PSN seen. A slot of another PSN: a later one stays; one less
 * than PP_IMPORT_SENT_PSNS earlier makes the ring grow (the size divides that distance, so it
 * stays within the bound) while it is under twice the connection's packets, so that memory
 * follows the capture, not PSN jumps a hostile one makes; else the earlier PSN goes. */
static int sent_record(struct walk *w, struct pp_imp_conn *c, const struct pp_ib_pkt *k)
{
  struct pp_imp_sent *s = sent_slot(c, k->psn);
  uint32_t age = s && s->used ? psn_dist(k->psn, s->psn) : 0;
  if (age >= 0x800000u)
    return 0;
  if (!s || (age && age < PP_IMPORT_SENT_PSNS &&
             c->sent_cap < 2 * (c->req_pkts + c->resp_pkts))) {
    if (sent_grow(w, c))
      return -1;
    s = sent_slot(c, k->psn);
  }
  *s = (struct pp_imp_sent){.psn = k->psn, .len = req_len(k), .opcode = k->opcode, .used = true};
  return 0;
}

/* SEND (also with invalidate) and RDMA WRITE */
static bool op_send_write(uint8_t op) { return op <= 0x0b || op == 0x16 || op == 0x17; }

/* A retransmission must repeat its PSN's first packet (the responder takes a duplicate for the
 * original, and a go-back's packets for the originals it lost): for SEND and RDMA WRITE the same
 * opcode and payload length. A READ's retry may ask for less (what came already); not compared. */
static void resent_check(struct pp_imp_conn *c, uint64_t ts, const struct pp_ib_pkt *k)
{
  const struct pp_imp_sent *s = sent_slot(c, k->psn);
  if (!s || !s->used || s->psn != k->psn)
    return; /* first sent before the capture, or more than the ring ago */
  if (!op_send_write(s->opcode) && !op_send_write(k->opcode))
    return;
  if (s->opcode == k->opcode && s->len == req_len(k))
    return;
  if (!c->retrans_mismatch++)
    c->mismatch = (struct pp_imp_mismatch){.ts = ts, .psn = k->psn, .len0 = s->len,
                                           .len1 = req_len(k), .op0 = s->opcode,
                                           .op1 = k->opcode};
}

/* A new (not retransmitted) request packet: the next PSN, then its message. */
static int new_request(struct walk *w, struct pp_imp_conn *c, uint64_t ts,
                       const struct pp_ib_pkt *k)
{
  uint32_t npsn = 1;
  c->read_slack = 0;
  if (k->opcode == 0x0c) { /* a READ consumes one PSN per response packet: MTU unknown yet */
    uint32_t lo = (k->dma_len + 4095) / 4096, hi = (k->dma_len + 255) / 256;
    if (w->mtu >= 256)
      lo = hi = (k->dma_len + w->mtu - 1) / w->mtu;
    npsn = lo ? lo : 1;
    c->read_slack = hi > npsn ? hi - npsn : 0;
  }
  c->next_psn = (k->psn + npsn) & PSN_MASK;
  return count_message(w, c, ts, k, npsn);
}

static int on_request(struct walk *w, struct pp_imp_conn *c, uint64_t ts,
                      const struct pp_ib_pkt *k)
{
  uint64_t since = ts - c->last_req_ts;
  bool acked_prev = c->acked_prev;
  c->acked_prev = false;
  c->req_pkts++;
  c->req_bytes += k->payload;
  c->last_req_ts = ts;
  if ((k->opcode == 0x00 || k->opcode == 0x01 || k->opcode == 0x06 || k->opcode == 0x07) &&
      k->payload > w->mtu && k->payload <= 4096)
    w->mtu = k->payload;
  if (!c->psn_known) {
    c->psn_known = true;
    c->next_psn = k->psn;
    c->acked_psn = (k->psn - 1) & PSN_MASK;
    c->prev_psn = c->acked_psn;
  }
  uint32_t d = psn_dist(k->psn, c->next_psn);
  bool retrans = d >= 0x800000u;
  if (retrans) {
    c->retrans_pkts++;
    /* a go-back: to a PSN not after the previous request's (packets of a retransmission
     * train can be missing: lost before the capture point), or to the first unacknowledged
     * PSN right after an ACK of the train so far, later than the shortest ACK timeout
     * (8.192 us, timeout 1) and than 8 times the train's own pace (a software NIC such as rxe
     * under load sends a train's packets 100s of us apart): a train whose end was lost */
    bool tail = acked_prev && k->psn == ((c->acked_psn + 1) & PSN_MASK) && since >= 8192 &&
                since > 8 * c->train_gap_max;
    if (!c->prev_retrans || !psn_ahead(k->psn, c->prev_psn) || tail) {
      c->train_gap_max = 0;
      c->retries++;
      if (c->rnr_open || c->cause == 1)
        c->rnr_retries++, c->rnr_open_retries += c->rnr_open;
      else if (c->cause == 2)
        c->seq_retries++;
      else
        c->timeout_retries++;
      c->cause = 0;
    } else if (since > c->train_gap_max) {
      c->train_gap_max = since;
    }
  } else if (d > c->read_slack) {
    c->psn_gaps++;
    c->psn_gap_pkts += d;
    gap_add(c, c->next_psn, d);
  }
  c->prev_retrans = retrans;
  c->prev_psn = k->psn;
  if (!retrans && new_request(w, c, ts, k))
    return -1;
  bool filled = retrans && gap_fill(c, k->psn); /* the PSN's first appearance */
  if (filled && count_message(w, c, ts, k, 1))
    return -1;
  if (retrans && !filled)
    resent_check(c, ts, k);
  else if (sent_record(w, c, k))
    return -1;
  return pend_add(w, c, 0, ts, k, wr_opcode(k->opcode), op_first(k->opcode) || op_only(k->opcode),
                  op_last(k->opcode));
}

/* ---------------------------------------------------------------- responses */

/* Every PSN through p is acknowledged (when p is one the requester sent). */
static void ack_through(struct pp_imp_conn *c, uint32_t p, uint64_t ts)
{
  if (!c->psn_known || !in_window(c, p))
    return;
  if (c->any_ack && !psn_ahead(p, c->acked_psn))
    return;
  c->any_ack = true;
  c->acked_psn = p;
  if (!psn_ahead(c->prev_psn, p))
    c->acked_prev = true;
  while (c->ends_n && !psn_ahead((uint32_t)c->ends[c->ends_head], p)) {
    c->ends_head = (c->ends_head + 1) % c->ends_cap;
    c->ends_n--;
    c->delivered++;
  }
  if (c->rnr_open && !psn_ahead(c->rnr_open_psn, p))
    end_rnr_streak(c, ts);
}

static int on_ack(struct walk *w, struct pp_imp_conn *c, uint64_t ts, const struct pp_ib_pkt *k)
{
  unsigned cls = k->syndrome >> 5 & 3, code = k->syndrome & 31;
  if (cls == 0) {
    c->acks++;
    ack_through(c, k->psn, ts);
  } else if (cls == 1) { /* RNR NAK: code is the minimum RNR timer */
    ack_through(c, (k->psn - 1) & PSN_MASK, ts);
    if (!c->rnr_naks)
      c->delivered_before_rnr = c->delivered, c->first_rnr_ts = ts;
    c->rnr_naks++;
    c->rnr_timer_code = code;
    c->rnr_timer_mask |= 1u << code;
    if (c->rnr_open && c->rnr_open_psn != k->psn)
      end_rnr_streak(c, ts);
    if (!c->rnr_open) {
      c->rnr_open = true;
      c->rnr_open_since = ts;
      c->rnr_open_psn = k->psn;
      c->rnr_open_retries = 0;
      c->rnr_streaks++;
    }
    c->rnr_open_naks++;
    c->rnr_last_ts = ts;
    c->cause = 1;
  } else if (cls == 3) {
    ack_through(c, (k->psn - 1) & PSN_MASK, ts);
    if (code < PP_IMP_NAKS)
      c->naks[code]++;
    c->cause = code == 0 ? 2 : 0;
    if (code)
      c->fatal_nak = true, c->fatal_nak_code = code, c->fatal_nak_psn = k->psn;
  } else {
    return fail(w, "an AETH with the reserved syndrome class 2");
  }
  return 0;
}

static int on_response(struct walk *w, struct pp_imp_conn *c, uint64_t ts,
                       const struct pp_ib_pkt *k)
{
  c->resp_pkts++;
  c->last_resp_ts = ts;
  if (k->has_aeth) {
    c->msn = k->msn;
    c->msn_seen = true;
  }
  if (k->opcode == 0x11)
    return on_ack(w, c, ts, k);
  if (k->opcode == 0x12) {
    ack_through(c, k->psn, ts);
    return 0;
  }
  /* READ response: FIRST/MIDDLE acknowledge what came before the READ, LAST/ONLY the READ */
  if ((k->opcode == 0x0d || k->opcode == 0x0e) && k->payload > w->mtu && k->payload <= 4096)
    w->mtu = k->payload;
  c->read_resp_pkts++;
  c->read_resp_bytes += k->payload;
  bool last = k->opcode == 0x0f || k->opcode == 0x10;
  if (last && c->read_slack &&
      psn_dist((k->psn + 1) & PSN_MASK, c->next_psn) <= c->read_slack) {
    c->next_psn = (k->psn + 1) & PSN_MASK; /* the READ's PSNs, now known */
    c->read_slack = 0;
  }
  ack_through(c, last ? k->psn : (k->psn - 1) & PSN_MASK, ts);
  return pend_add(w, c, 1, ts, k, PP_WR_RDMA_READ, k->opcode == 0x0d || k->opcode == 0x10,
                  last);
}

static int ack_event(struct walk *w, struct pp_imp_conn *c, uint64_t ts,
                     const struct pp_ib_pkt *k)
{
  unsigned cls = k->syndrome >> 5 & 3;
  struct pp_imp_event e = {.t0 = ts, .t1 = ts, .src_host = c->resp_host, .dst_host = c->req_host,
                           .src_qpn = c->resp_qpn, .dst_qpn = c->req_qpn, .psn = k->psn,
                           .npkts = 1, .has_ack = true, .syndrome = k->syndrome & 31};
  e.kind = cls == 0 ? PP_TPKT_ACK : cls == 1 ? PP_TPKT_RNR_NAK : PP_TPKT_NAK;
  e.ack_psn = cls == 0 ? (k->psn + 1) & PSN_MASK : k->psn;
  if (cls == 0)
    e.syndrome = 0;
  return push_event(w, &e);
}

static int on_packet(struct walk *w, uint64_t ts, const struct pp_ib_pkt *k)
{
  struct pp_import *m = w->m;
  if (k->opcode >> 5) {
    m->non_rc_pkts++;
    return 0;
  }
  if (k->opcode > 0x17 || k->opcode == 0x15) {
    m->unknown_ops++;
    return 0;
  }
  uint32_t src, dst;
  if (host_of(w, &k->src, &src) || host_of(w, &k->dst, &dst))
    return -1;
  bool response = k->opcode >= 0x0d && k->opcode <= 0x12;
  struct pp_imp_conn *c = response ? conn_of_response(w, src, dst, k->dqpn, k->psn)
                                   : conn_of_request(w, src, dst, k->dqpn);
  if (!c)
    return -1;
  if (c->req_pkts + c->resp_pkts == 0)
    c->first_ts = ts;
  c->last_ts = ts;
  if (!response)
    return on_request(w, c, ts, k);
  if (on_response(w, c, ts, k))
    return -1;
  return k->opcode == 0x11 ? ack_event(w, c, ts, k) : 0;
}

/* ---------------------------------------------------------------- the capture */

static void finish(struct pp_import *m)
{
  for (size_t i = 0; i < m->nconns; i++) {
    struct pp_imp_conn *c = &m->conns[i];
    c->outstanding = c->psn_known ? psn_dist(c->next_psn, (c->acked_psn + 1) & PSN_MASK) : 0;
    if (c->size_min == UINT64_MAX)
      c->size_min = 0;
  }
}

static int walk_capture(struct walk *w, pcap_t *pc)
{
  struct pp_import *m = w->m;
  int dlt = pcap_datalink(pc), lt = dlt;
  if (lt == DLT_RAW)
    lt = PP_LT_RAW; /* LINKTYPE_RAW (101) is read as the platform's DLT_RAW */
  const char *ltn = pcap_datalink_val_to_name(dlt); /* (libpcap names DLT_RAW, not 101) */
  snprintf(m->linktype, sizeof(m->linktype), "%s", ltn ? ltn : "?");
  if (!pp_ib_linktype_known(lt)) {
    snprintf(w->err, w->errlen,
             "link type %d (%s) is not one the importer reads (Ethernet, Linux cooked SLL/SLL2, "
             "raw IP, InfiniBand)", lt, ltn ? ltn : "unknown");
    return -1;
  }
  struct pcap_pkthdr *h;
  const u_char *data;
  int r;
  while ((r = pcap_next_ex(pc, &h, &data)) == 1) {
    w->frame++;
    m->frames++;
    struct pp_ib_pkt k;
    char why[256];
    int d = pp_ib_decode(lt, data, h->caplen, h->len, &k, why, sizeof(why));
    if (d < 0)
      return fail(w, why);
    if (d == 0) {
      m->other_pkts++;
      continue;
    }
    uint64_t ts = (uint64_t)h->ts.tv_sec * 1000000000u + (uint64_t)h->ts.tv_usec;
    if (m->ib_pkts++ == 0)
      m->first_ts = ts;
    if (ts < m->last_ts)
      ts = m->last_ts; /* a capture merged out of order: time never goes back here */
    m->last_ts = ts;
    if (on_packet(w, ts, &k))
      return -1;
  }
  if (r == -1) {
    snprintf(w->err, w->errlen, "after frame %" PRIu64 ": %s", w->frame, pcap_geterr(pc));
    return -1;
  }
  for (size_t i = 0; i < m->nconns; i++)
    for (int j = 0; j < 2; j++)
      if (flush_pend(w, &m->conns[i], j))
        return -1;
  finish(m);
  return 0;
}

static int import_open(pcap_t *pc, const char *name, const char *ebuf, struct pp_import **out,
                       char *err, size_t errlen)
{
  *out = NULL;
  if (!pc) {
    snprintf(err, errlen, "%s: not a capture libpcap reads: %s", name, ebuf);
    return -1;
  }
  struct pp_import *m = calloc(1, sizeof(*m));
  char why[512] = "out of memory";
  struct walk w = {.m = m, .err = why, .errlen = sizeof(why), .last_conn = SIZE_MAX};
  int rc = m ? walk_capture(&w, pc) : -1;
  pcap_close(pc);
  if (rc) {
    snprintf(err, errlen, "%s: %s", name, why);
    pp_import_free(m);
    return -1;
  }
  *out = m;
  return 0;
}

int pp_import_pcap(const char *path, struct pp_import **out, char *err, size_t errlen)
{
  char ebuf[PCAP_ERRBUF_SIZE] = "";
  pcap_t *pc = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, ebuf);
  return import_open(pc, path, ebuf, out, err, errlen);
}

int pp_import_pcap_fp(FILE *f, const char *name, struct pp_import **out, char *err,
                      size_t errlen)
{
  char ebuf[PCAP_ERRBUF_SIZE] = "";
  pcap_t *pc = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, ebuf);
  if (!pc)
    fclose(f);
  return import_open(pc, name, ebuf, out, err, errlen);
}

void pp_import_free(struct pp_import *m)
{
  if (!m)
    return;
  for (size_t i = 0; i < m->nconns; i++) {
    free(m->conns[i].ends);
    free(m->conns[i].sent);
  }
  free(m->conns);
  free(m->hosts);
  free(m->ev);
  free(m);
}

void pp_import_totals(const struct pp_import *m, struct pp_imp_totals *t)
{
  memset(t, 0, sizeof(*t));
  for (size_t i = 0; i < m->nconns; i++) {
    const struct pp_imp_conn *c = &m->conns[i];
    t->messages += c->messages;
    t->delivered += c->delivered;
    t->bytes += c->message_bytes;
    t->rnr_naks += c->rnr_naks;
    t->retries += c->retries;
    t->rnr_retries += c->rnr_retries;
    t->seq_retries += c->seq_retries;
    t->timeout_retries += c->timeout_retries;
    for (int j = 0; j < PP_IMP_NAKS; j++)
      t->naks += c->naks[j];
    t->seq_naks += c->naks[0];
    t->psn_gaps += c->psn_gaps;
    t->rnr_wait_ns += c->rnr_wait_ns + (c->rnr_open ? c->rnr_last_ts - c->rnr_open_since : 0);
    t->retrans_pkts += c->retrans_pkts;
    t->retrans_mismatch += c->retrans_mismatch;
    t->read_resp_pkts += c->read_resp_pkts;
  }
}
