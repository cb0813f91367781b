#include "tools/export/export_msgs.h"

#include "prepost/p2p.h"
#include "prepost/proto.h"
#include "prepost/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vec {
  struct pp_xmsg *m;
  size_t n, cap;
};

static struct pp_xmsg *push(struct vec *v)
{
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 256;
    struct pp_xmsg *m = realloc(v->m, cap * sizeof(*m));
    if (!m)
      return NULL;
    v->m = m;
    v->cap = cap;
  }
  memset(&v->m[v->n], 0, sizeof(v->m[0]));
  return &v->m[v->n++];
}

/* packet id -> message index: ids are dense from 0. errors_only: only RNR NAKs and NAKs. */
static int from_packets(const struct pp_trace *t, struct vec *v, bool errors_only)
{
  size_t cap = 0;
  size_t *by_id = NULL;
  for (size_t i = 0; i < t->nrecs; i++) {
    unsigned type = t->idx[i].type;
    if (type != PP_TREC_PKT_TX && type != PP_TREC_PKT_RX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK)
      goto fail;
    const struct pp_trace_pkt *k = &r.u.pkt;
    if (k->id >= (uint64_t)1 << 40)
      continue; /* not a writer-assigned id */
    if (errors_only && type == PP_TREC_PKT_TX && k->kind != PP_TPKT_RNR_NAK &&
        k->kind != PP_TPKT_NAK)
      continue; /* its arrival finds no message: by_id stays SIZE_MAX */
    if (k->id >= cap) {
      size_t nc = cap ? cap : 1024;
      while (nc <= k->id)
        nc *= 2;
      size_t *nb = realloc(by_id, nc * sizeof(*nb));
      if (!nb)
        goto fail;
      for (size_t j = cap; j < nc; j++)
        nb[j] = SIZE_MAX;
      by_id = nb;
      cap = nc;
    }
    if (type == PP_TREC_PKT_TX) {
      struct pp_xmsg *m = push(v);
      if (!m)
        goto fail;
      *m = (struct pp_xmsg){
          .src = k->src_rank, .dst = k->dst_rank, .src_qpn = k->src_qpn, .dst_qpn = k->dst_qpn,
          .t0 = r.ts, .t1 = UINT64_MAX, .opcode = k->opcode, .psn = k->psn, .len = k->len,
          .syndrome = k->syndrome, .send_rec = SIZE_MAX, .recv_rec = SIZE_MAX,
          .kind = k->kind == PP_TPKT_REQ       ? PP_MK_DATA
                  : k->kind == PP_TPKT_ACK     ? PP_MK_ACK
                  : k->kind == PP_TPKT_RNR_NAK ? PP_MK_RNR_NAK
                  : k->kind == PP_TPKT_NAK     ? PP_MK_NAK
                                               : PP_MK_READ_RESP};
      by_id[k->id] = v->n - 1;
    } else if (k->id < cap && by_id[k->id] != SIZE_MAX) {
      v->m[by_id[k->id]].t1 = r.ts;
    }
  }
  free(by_id);
  return 0;
fail:
  free(by_id);
  return -1;
}

/* A QP of some rank: where its consuming sends go, and the queue of those not yet received. */
struct xqp {
  uint32_t rank, qpn, peer, dest_qpn;
  size_t *fifo; /* message indices */
  size_t head, n, cap;
};

static struct xqp *xqp_of(struct xqp *q, size_t nq, uint32_t rank, uint32_t qpn)
{
  for (size_t i = 0; i < nq; i++)
    if (q[i].rank == rank && q[i].qpn == qpn)
      return &q[i];
  return NULL;
}

static int from_completions(const struct pp_trace *t, struct vec *v)
{
  struct xqp *q = NULL;
  size_t nq = 0, qcap = 0;
  int rc = -1;
  for (size_t i = 0; i < t->nrecs; i++) {
    unsigned type = t->idx[i].type;
    if (type != PP_TREC_CREATE_QP && type != PP_TREC_MODIFY_QP && type != PP_TREC_POST_SEND &&
        type != PP_TREC_WC)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK)
      goto out;
    if (type == PP_TREC_CREATE_QP && r.ret == PP_OK) {
      if (nq == qcap) {
        size_t c = qcap ? qcap * 2 : 16;
        struct xqp *nqp = realloc(q, c * sizeof(*nqp));
        if (!nqp)
          goto out;
        q = nqp;
        qcap = c;
      }
      q[nq++] = (struct xqp){.rank = r.rank, .qpn = r.u.cqp.qp_num, .peer = r.u.cqp.attr.peer};
    } else if (type == PP_TREC_MODIFY_QP && (r.u.mqp.mask & PP_QP_DEST_QPN)) {
      struct xqp *x = xqp_of(q, nq, r.rank, r.u.mqp.qp_num);
      if (x)
        x->dest_qpn = r.u.mqp.attr.dest_qp_num;
    } else if (type == PP_TREC_POST_SEND && r.ret == PP_OK &&
               pp_wr_consumes_recv(r.u.send.wr.opcode)) {
      struct xqp *x = xqp_of(q, nq, r.rank, r.u.send.qp_num);
      struct xqp *d = x ? xqp_of(q, nq, x->peer, x->dest_qpn) : NULL;
      struct pp_xmsg *m = push(v);
      if (!m)
        goto out;
      uint32_t len = 0;
      for (uint32_t s = 0; s < r.u.send.wr.num_sge && s < PP_MAX_SGE; s++)
        len += r.u.send.wr.sg_list[s].length;
      *m = (struct pp_xmsg){.src = r.rank, .dst = x ? x->peer : r.rank, .src_qpn = r.u.send.qp_num,
                            .dst_qpn = x ? x->dest_qpn : 0, .t0 = r.ts, .t1 = UINT64_MAX,
                            .kind = PP_MK_DATA, .opcode = r.u.send.wr.opcode, .len = len,
                            .send_rec = i, .recv_rec = SIZE_MAX};
      if (d) {
        if (d->head + d->n == d->cap) {
          if (d->head) {
            memmove(d->fifo, d->fifo + d->head, d->n * sizeof(size_t));
            d->head = 0;
          } else {
            size_t c = d->cap ? d->cap * 2 : 64;
            size_t *f = realloc(d->fifo, c * sizeof(size_t));
            if (!f)
              goto out;
            d->fifo = f;
            d->cap = c;
          }
        }
        d->fifo[d->head + d->n++] = v->n - 1;
      }
    } else if (type == PP_TREC_WC && r.u.wc.status == PP_WC_SUCCESS &&
               (r.u.wc.opcode == PP_WC_OP_RECV || r.u.wc.opcode == PP_WC_OP_RECV_RDMA_WITH_IMM)) {
      struct xqp *d = xqp_of(q, nq, r.rank, r.u.wc.qp_num);
      if (d && d->n) {
        v->m[d->fifo[d->head]].t1 = r.ts;
        v->m[d->fifo[d->head]].recv_rec = i;
        d->head++;
        d->n--;
      }
    }
  }
  rc = 0;
out:
  for (size_t i = 0; i < nq; i++)
    free(q[i].fifo);
  free(q);
  return rc;
}

/* Merges two lists in the order they were sent (each is); b's go after a's at the same time. */
static int merge(struct vec *a, struct vec *b, struct vec *out)
{
  size_t i = 0, j = 0;
  while (i < a->n || j < b->n) {
    struct pp_xmsg *m = push(out);
    if (!m)
      return -1;
    *m = j == b->n || (i < a->n && a->m[i].t0 <= b->m[j].t0) ? a->m[i++] : b->m[j++];
  }
  return 0;
}

int pp_trace_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n, char *err,
                      size_t errlen)
{
  struct vec v = {0}, a = {0}, b = {0};
  int rc;
  switch (pp_trace_packets(t)) {
  case PP_TRACE_PACKETS_ALL:
    rc = from_packets(t, &v, false);
    break;
  case PP_TRACE_PACKETS_ERRORS: /* the protocol's messages, with the RNR NAKs and NAKs */
    rc = from_completions(t, &a) || from_packets(t, &b, true) || merge(&a, &b, &v) ? -1 : 0;
    break;
  default:
    rc = from_completions(t, &v);
    break;
  }
  free(a.m);
  free(b.m);
  if (rc != 0) {
    free(v.m);
    snprintf(err, errlen, "out of memory collecting the messages");
    return -1;
  }
  *out = v.m;
  *n = v.n;
  return 0;
}

int pp_trace_protocol_messages(const struct pp_trace *t, struct pp_xmsg **out, size_t *n,
                               char *err, size_t errlen)
{
  struct vec v = {0};
  if (from_completions(t, &v) != 0) {
    free(v.m);
    snprintf(err, errlen, "out of memory collecting the messages");
    return -1;
  }
  *out = v.m;
  *n = v.n;
  return 0;
}

enum pp_xfam pp_xfam_of(const struct pp_trace *t)
{
  struct pp_engine_cfg cfg = {0};
  char note[256];
  if (pp_trace_engine_cfg(t, &cfg, note, sizeof(note)) != PP_OK)
    return PP_XFAM_PLAIN;
  return cfg.protocol == PP_PROTO_EAGER || cfg.protocol == PP_PROTO_RNDV ? PP_XFAM_P2P
         : cfg.protocol == PP_PROTO_RING_CREDITS                          ? PP_XFAM_RING_CREDITS
         : cfg.protocol == PP_PROTO_RING_CTS                              ? PP_XFAM_RING_CTS
                                                                          : PP_XFAM_PLAIN;
}

void pp_xnames_of(const struct pp_trace *t, struct pp_xnames *out)
{
  out->fam = pp_xfam_of(t);
  out->def = NULL;
  struct pp_engine_cfg cfg = {0};
  char note[256];
  if (out->fam == PP_XFAM_PLAIN && pp_trace_engine_cfg(t, &cfg, note, sizeof(note)) == PP_OK) {
    const struct pp_proto_def *d = pp_proto_get(cfg.protocol);
    out->def = d && d->msg_name ? d : NULL;
  }
}

/* The head of message m as captured right before its receive completion; false when it was
 * not received or its head not captured. */
static bool captured_head(const struct pp_trace *t, const struct pp_xmsg *m,
                          struct pp_trace_rec *r)
{
  size_t i = m->recv_rec;
  return i != SIZE_MAX && i != 0 && i < t->nrecs && t->idx[i - 1].type == PP_TREC_MEM &&
         t->idx[i - 1].rank == m->dst && pp_trace_get(t, i - 1, r) == PP_OK;
}

bool pp_xmsg_p2p_info(const struct pp_trace *t, const struct pp_xmsg *m,
                      struct pp_p2p_msg_info *info)
{
  struct pp_trace_rec r;
  return captured_head(t, m, &r) && pp_p2p_msg_describe(r.u.mem.data, r.u.mem.len, info);
}

static const char *packet_name(const struct pp_xmsg *m)
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

const char *pp_xmsg_name(const struct pp_trace *t, const struct pp_xnames *n,
                         const struct pp_xmsg *m)
{
  enum pp_xfam fam = n->fam;
  if (m->send_rec == SIZE_MAX)
    return packet_name(m);
  if (n->def && m->opcode != PP_WR_RDMA_WRITE && m->opcode != PP_WR_RDMA_READ) {
    struct pp_trace_rec r;
    const char *nm = captured_head(t, m, &r) ? n->def->msg_name(r.u.mem.data, r.u.mem.len) : NULL;
    return nm ? nm : "message";
  }
  if (fam == PP_XFAM_P2P) {
    struct pp_p2p_msg_info info;
    return pp_xmsg_p2p_info(t, m, &info) ? pp_p2p_msg_name(info.type) : "message";
  }
  if ((fam == PP_XFAM_RING_CREDITS || fam == PP_XFAM_RING_CTS) &&
      m->opcode == PP_WR_RDMA_WRITE_WITH_IMM) {
    struct pp_trace_rec r;
    if (m->send_rec < t->nrecs && pp_trace_get(t, m->send_rec, &r) == PP_OK &&
        (r.u.send.wr.imm_data & PP_RING_IMM_CREDIT))
      return "credit";
    return "data";
  }
  return packet_name(m); /* a protocol without named messages: the opcode */
}
