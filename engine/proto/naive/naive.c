/*
 * The naive protocol, the textbook way to get RNR: a send is one SEND posted at once with no
 * regard for the receiver, a receive is one receive WQE. Nothing prevents RNR: that is the point.
 * It is the positive control for the flow-controlled protocols.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/core/engine_impl.h"

#define SEND_BIT (1ull << 63)

struct naive_conn {
  uint32_t peer, qpn, psn;
};

struct naive {
  struct naive_conn c[2];
  uint32_t n;
};

static struct naive_conn *conn_of(const struct pp_engine *e, uint32_t peer)
{
  struct naive *p = e->ps;
  for (uint32_t i = 0; i < p->n; i++)
    if (p->c[i].peer == peer)
      return &p->c[i];
  return NULL;
}

static enum pp_status naive_create(struct pp_engine *e)
{
  struct naive *p = calloc(1, sizeof(*p));
  if (!p)
    return PP_NOMEM;
  e->ps = p;
  for (uint32_t i = 0; i < e->npeers; i++) {
    struct naive_conn *c = &p->c[p->n++];
    c->peer = e->peers[i];
    enum pp_status s = pp_engine_qp_open(e, c->peer, 0, e->cfg.qp.sq_depth, e->cfg.qp.rq_depth,
                                         &c->qpn, &c->psn);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static void naive_destroy(struct pp_engine *e)
{
  struct naive *p = e->ps;
  for (uint32_t i = 0; p && i < p->n; i++)
    if (p->c[i].qpn)
      e->ops->destroy_qp(e->nic, p->c[i].qpn);
  free(p);
  e->ps = NULL;
}

static bool naive_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out)
{
  const struct naive_conn *c = conn_of(e, peer);
  if (!c)
    return false;
  *out = (struct pp_conn_info){.nchannels = 1, .qp_num = {c->qpn}, .psn = {c->psn}};
  return true;
}

static enum pp_status naive_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                    const struct pp_conn_info *remote)
{
  (void)now;
  const struct naive_conn *c = conn_of(e, peer);
  if (!c)
    return PP_NOTFOUND;
  if (remote->nchannels != 1)
    return PP_INVALID;
  return pp_engine_qp_connect(e, c->qpn, c->psn, remote->qp_num[0], remote->psn[0]);
}

static enum pp_status naive_send(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  (void)now;
  const struct naive_conn *c = conn_of(e, m->peer);
  if (!c || m->cookie & SEND_BIT)
    return PP_INVALID;
  struct pp_send_wr wr = {
      .wr_id = SEND_BIT | m->cookie,
      .opcode = PP_WR_SEND,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)m->buf, .length = m->len, .lkey = m->mr->lkey}},
  };
  return (enum pp_status)e->ops->post_send(e->nic, c->qpn, &wr);
}

static enum pp_status naive_recv(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  (void)now;
  const struct naive_conn *c = conn_of(e, m->peer);
  if (!c || m->cookie & SEND_BIT)
    return PP_INVALID;
  struct pp_recv_wr wr = {
      .wr_id = m->cookie,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)m->buf, .length = m->len, .lkey = m->mr->lkey}},
  };
  return (enum pp_status)e->ops->post_recv(e->nic, c->qpn, &wr);
}

static enum pp_status naive_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  const struct naive *p = e->ps;
  const struct naive_conn *c = NULL;
  for (uint32_t i = 0; i < p->n && !c; i++)
    if (p->c[i].qpn == wc->qp_num)
      c = &p->c[i];
  if (!c)
    return PP_INVALID;
  /* error completions only carry wr_id, status and qp_num: the kind lives in wr_id */
  if (wc->wr_id & SEND_BIT)
    return pp_app_send_done(e, now, wc->wr_id & ~SEND_BIT, wc->status);
  return pp_app_recv_done(e, now, wc->wr_id, wc->status, c->peer, 0, wc->byte_len);
}

static enum pp_status naive_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  (void)e;
  (void)now;
  (void)arg;
  return PP_INVALID; /* the naive protocol sets no timers */
}

static bool naive_quiet(const struct pp_engine *e)
{
  (void)e;
  return true;
}

static size_t naive_dump(const struct pp_engine *e, char *buf, size_t len)
{
  const struct naive *p = e->ps;
  size_t n = 0;
  for (uint32_t i = 0; p && i < p->n; i++) {
    int k = snprintf(buf + (n < len ? n : len), n < len ? len - n : 0,
                     "  naive: peer %u on qp 0x%x (sq_psn 0x%x); no flow control\n", p->c[i].peer,
                     p->c[i].qpn, p->c[i].psn);
    n += k > 0 ? (size_t)k : 0;
  }
  return n;
}

/* The naive protocol keeps no state of its own: its sends are the workload's (which says what
 * they wait for) and a QP in ERROR is the engine's to tell. */
static size_t naive_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  (void)e, (void)out, (void)max;
  return 0;
}

const struct pp_proto_ops pp_naive_ops = {
    .name = "naive",
    .create = naive_create,
    .destroy = naive_destroy,
    .local_info = naive_local_info,
    .connect = naive_connect,
    .send = naive_send,
    .recv = naive_recv,
    .on_wc = naive_on_wc,
    .on_timer = naive_on_timer,
    .quiet = naive_quiet,
    .dump = naive_dump,
    .pending = naive_pending,
};

extern const struct pp_proto_explore pp_naive_explore; /* explore.c */

/* No parameters of its own; one QP per peer with the configured depths (the engine's preset). */
const struct pp_proto_def pp_naive_def = {
    .abi = PP_PROTO_ABI,
    .name = "naive",
    .desc = "SENDs posted with no regard for the receiver",
    .ops = &pp_naive_ops,
    .explore = &pp_naive_explore,
};
