/* A fake RC fabric for engine tests (see fakefabric.h). */
#include "fakefabric.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define CQ_CAP (1u << 16)

static uint64_t rnd(struct ff *f)
{
  uint64_t x = f->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  f->rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

struct ff_qp *ff_qp(struct ff *f, uint32_t rank, uint32_t qpn)
{
  for (uint32_t i = 0; i < FF_MAX_QPS; i++)
    if (f->nic[rank].qps[i].used && f->nic[rank].qps[i].qpn == qpn)
      return &f->nic[rank].qps[i];
  return NULL;
}

struct ff_qp *ff_qp_at(struct ff *f, uint32_t rank, uint32_t i)
{
  return i < FF_MAX_QPS && f->nic[rank].qps[i].used ? &f->nic[rank].qps[i] : NULL;
}

uint32_t ff_qp_count(const struct ff *f, uint32_t rank)
{
  uint32_t n = 0;
  for (uint32_t i = 0; i < FF_MAX_QPS; i++)
    n += f->nic[rank].qps[i].used;
  return n;
}

static const struct pp_mr *mr_by(const struct ff_nic *n, uint32_t key, bool remote)
{
  for (uint32_t i = 0; i < FF_MAX_MRS; i++)
    if (n->mrs[i].used && (remote ? n->mrs[i].mr.rkey : n->mrs[i].mr.lkey) == key)
      return &n->mrs[i].mr;
  return NULL;
}

static bool covers(const struct pp_mr *m, uint64_t addr, uint64_t len, unsigned access)
{
  return m && (m->access & access) == access && addr >= m->addr && len <= m->length &&
         addr - m->addr <= m->length - len;
}

static void push_wc(struct ff_nic *n, const struct pp_wc *wc)
{
  cr_assert_lt(n->cq_count, n->cq_cap, "fake CQ overflow on rank %u", n->rank);
  n->cq[(n->cq_head + n->cq_count++) % n->cq_cap] = *wc;
}

/* ---------------------------------------------------------------- verbs */

static int ff_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *out)
{
  struct ff_nic *n = nic;
  for (uint32_t i = 0; i < FF_MAX_MRS; i++) {
    if (n->mrs[i].used)
      continue;
    uint32_t lkey = (n->rank + 1) << 16 | (i + 1);
    n->mrs[i] = (struct ff_mr){true,
                               {.addr = (uint64_t)(uintptr_t)addr,
                                .length = length,
                                .lkey = lkey,
                                .rkey = lkey | 0x80000000u,
                                .access = access}};
    *out = n->mrs[i].mr;
    return PP_OK;
  }
  return PP_LIMIT;
}

static int ff_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct ff_nic *n = nic;
  for (uint32_t i = 0; i < FF_MAX_MRS; i++)
    if (n->mrs[i].used && n->mrs[i].mr.lkey == mr->lkey) {
      n->mrs[i].used = false;
      return PP_OK;
    }
  return PP_NOTFOUND;
}

static int ff_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *srq)
{
  (void)nic, (void)a, (void)srq;
  return PP_UNSUPPORTED;
}

static int ff_modify_srq(void *nic, uint32_t srq, uint32_t limit)
{
  (void)nic, (void)srq, (void)limit;
  return PP_UNSUPPORTED;
}

static int ff_destroy_srq(void *nic, uint32_t srq)
{
  (void)nic, (void)srq;
  return PP_UNSUPPORTED;
}

static int ff_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qpn)
{
  struct ff_nic *n = nic;
  if (a->srq_num || a->max_send_wr == 0 || a->max_send_wr > FF_MAX_WR ||
      a->max_recv_wr > FF_MAX_WR)
    return PP_INVALID;
  for (uint32_t i = 0; i < FF_MAX_QPS; i++) {
    struct ff_qp *q = &n->qps[i];
    if (q->used)
      continue;
    *q = (struct ff_qp){.used = true,
                        .qpn = (n->rank + 1) << 8 | (i + 1),
                        .peer = a->peer,
                        .state = PP_QPS_RESET,
                        .init = *a};
    q->sq = calloc(a->max_send_wr, sizeof(*q->sq));
    q->rq = calloc(a->max_recv_wr ? a->max_recv_wr : 1, sizeof(*q->rq));
    cr_assert(q->sq && q->rq);
    *qpn = q->qpn;
    return PP_OK;
  }
  return PP_LIMIT;
}

static int ff_modify_qp(void *nic, uint32_t qpn, const struct pp_qp_attr *attr, unsigned mask)
{
  struct ff_nic *n = nic;
  struct ff_qp *q = ff_qp(n->f, n->rank, qpn);
  if (!q)
    return PP_NOTFOUND;
  if (mask & PP_QP_STATE) {
    if (!pp_qp_transition_ok(q->state, attr->qp_state))
      return PP_STATE;
    q->state = attr->qp_state;
  }
  if (mask & PP_QP_DEST_QPN)
    q->dest_qpn = attr->dest_qp_num;
  return PP_OK;
}

static int ff_destroy_qp(void *nic, uint32_t qpn)
{
  struct ff_nic *n = nic;
  struct ff_qp *q = ff_qp(n->f, n->rank, qpn);
  if (!q)
    return PP_NOTFOUND;
  free(q->sq);
  free(q->rq);
  memset(q, 0, sizeof(*q));
  return PP_OK;
}

static enum pp_wc_opcode wc_op(enum pp_wr_opcode op)
{
  return op == PP_WR_RDMA_WRITE || op == PP_WR_RDMA_WRITE_WITH_IMM ? PP_WC_OP_RDMA_WRITE
         : op == PP_WR_RDMA_READ                                   ? PP_WC_OP_RDMA_READ
                                                                   : PP_WC_OP_SEND;
}

static int ff_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *wr)
{
  struct ff_nic *n = nic;
  struct ff_qp *q = ff_qp(n->f, n->rank, qpn);
  if (!q)
    return PP_NOTFOUND;
  if (q->state == PP_QPS_ERR) {
    push_wc(n, &(struct pp_wc){.wr_id = wr->wr_id, .status = PP_WC_WR_FLUSH_ERR, .qp_num = qpn});
    return PP_OK;
  }
  if (q->state != PP_QPS_RTS)
    return PP_STATE;
  if (wr->num_sge > PP_MAX_SGE)
    return PP_INVALID;
  if (q->sq_tail - q->sq_acked == q->init.max_send_wr)
    return PP_AGAIN;
  uint64_t len = 0;
  for (uint32_t i = 0; i < wr->num_sge; i++) {
    const struct pp_sge *s = &wr->sg_list[i];
    if (s->length && !covers(mr_by(n, s->lkey, false), s->addr, s->length, 0))
      n->access_errors++, n->f->access_errors++;
    len += s->length;
  }
  q->sq[q->sq_tail++ % q->init.max_send_wr] = (struct ff_wr){*wr, (uint32_t)len};
  n->posted_sends++;
  if (q->sq_tail - q->sq_acked > n->max_sq)
    n->max_sq = q->sq_tail - q->sq_acked;
  return PP_OK;
}

static int ff_post_recv(void *nic, uint32_t qpn, const struct pp_recv_wr *wr)
{
  struct ff_nic *n = nic;
  struct ff_qp *q = ff_qp(n->f, n->rank, qpn);
  if (!q)
    return PP_NOTFOUND;
  if (q->state == PP_QPS_RESET)
    return PP_STATE;
  if (q->state == PP_QPS_ERR) {
    push_wc(n, &(struct pp_wc){.wr_id = wr->wr_id,
                               .status = PP_WC_WR_FLUSH_ERR,
                               .opcode = PP_WC_OP_RECV,
                               .qp_num = qpn});
    return PP_OK;
  }
  if (q->rq_count == q->init.max_recv_wr)
    return PP_LIMIT;
  q->rq[(q->rq_head + q->rq_count++) % q->init.max_recv_wr] = *wr;
  n->posted_recvs++;
  return PP_OK;
}

static int ff_post_srq_recv(void *nic, uint32_t srq, const struct pp_recv_wr *wr)
{
  (void)nic, (void)srq, (void)wr;
  return PP_UNSUPPORTED;
}

static int ff_query_counters(void *nic, struct pp_nic_counters *out)
{
  struct ff_nic *n = nic;
  *out = (struct pp_nic_counters){.rnr_naks_received = n->rnr, .packets_sent = n->executed};
  return PP_OK;
}

const struct pp_nic_ops ff_ops = {
    .name = "fakefabric",
    .reg_mr = ff_reg_mr,
    .dereg_mr = ff_dereg_mr,
    .create_srq = ff_create_srq,
    .modify_srq = ff_modify_srq,
    .destroy_srq = ff_destroy_srq,
    .create_qp = ff_create_qp,
    .modify_qp = ff_modify_qp,
    .destroy_qp = ff_destroy_qp,
    .post_send = ff_post_send,
    .post_recv = ff_post_recv,
    .post_srq_recv = ff_post_srq_recv,
    .query_counters = ff_query_counters,
};

/* ---------------------------------------------------------------- actions */

/* Copies the gather list of w into dst. */
static void gather(const struct ff_wr *w, uint8_t *dst)
{
  for (uint32_t i = 0; i < w->wr.num_sge; i++) {
    const struct pp_sge *s = &w->wr.sg_list[i];
    if (s->length)
      memmove(dst, (const void *)(uintptr_t)s->addr, s->length);
    dst += s->length;
  }
}

bool ff_exec(struct ff *f, uint32_t rank, uint32_t qpn)
{
  struct ff_nic *n = &f->nic[rank];
  struct ff_qp *q = ff_qp(f, rank, qpn);
  if (!q || q->state != PP_QPS_RTS || q->sq_exec == q->sq_tail)
    return false;
  struct ff_wr *w = &q->sq[q->sq_exec % q->init.max_send_wr];
  struct ff_nic *rn = &f->nic[q->peer];
  struct ff_qp *rq = ff_qp(f, q->peer, q->dest_qpn);
  cr_assert_not_null(rq, "rank %u QP %#x: no remote QP %#x on rank %u", rank, qpn, q->dest_qpn,
                     q->peer);
  if (rq->state == PP_QPS_ERR) {
    /* RC: the peer's QP in ERROR never acknowledges the request; the retries run out, the
     * request completes with RETRY_EXC_ERR and the QP goes to ERROR (the rest flushed) */
    ff_break_qp(f, rank, qpn, PP_WC_RETRY_EXC_ERR);
    return true;
  }
  cr_assert(rq->state == PP_QPS_RTR || rq->state == PP_QPS_RTS, "remote QP not ready");
  bool consumes = pp_wr_consumes_recv(w->wr.opcode);
  if (consumes && rq->rq_count == 0) {
    n->rnr++; /* RNR NAK: the request stays at the head and is retried */
    f->rnr++;
    return true;
  }
  struct pp_recv_wr r = {0};
  if (consumes) {
    r = rq->rq[rq->rq_head];
    rq->rq_head = (rq->rq_head + 1) % rq->init.max_recv_wr;
    rq->rq_count--;
  }
  switch (w->wr.opcode) {
  case PP_WR_RDMA_WRITE:
  case PP_WR_RDMA_WRITE_WITH_IMM:
    if (!covers(mr_by(rn, w->wr.rkey, true), w->wr.remote_addr, w->len, PP_ACCESS_REMOTE_WRITE)) {
      n->access_errors++;
      f->access_errors++;
    } else if (w->len) {
      gather(w, (uint8_t *)(uintptr_t)w->wr.remote_addr);
      if (!(w->wr.imm_data >> 31) && ++f->data_writes == f->flip_at)
        ((uint8_t *)(uintptr_t)w->wr.remote_addr)[w->len / 2] ^= 0x10;
    }
    if (consumes)
      push_wc(rn, &(struct pp_wc){.wr_id = r.wr_id,
                                  .status = PP_WC_SUCCESS,
                                  .opcode = PP_WC_OP_RECV_RDMA_WITH_IMM,
                                  .byte_len = w->len,
                                  .imm_data = w->wr.imm_data,
                                  .qp_num = rq->qpn,
                                  .src_qp = q->qpn,
                                  .wc_flags = PP_WC_WITH_IMM});
    break;
  case PP_WR_SEND:
  case PP_WR_SEND_WITH_IMM: {
    uint64_t cap = 0;
    for (uint32_t i = 0; i < r.num_sge; i++)
      cap += r.sg_list[i].length;
    cr_assert_leq(w->len, cap, "SEND larger than the receive buffer");
    if (w->len) {
      gather(w, (uint8_t *)(uintptr_t)r.sg_list[0].addr); /* single-SGE receives */
      if (++f->data_writes == f->flip_at)
        ((uint8_t *)(uintptr_t)r.sg_list[0].addr)[w->len / 2] ^= 0x10;
    }
    push_wc(rn, &(struct pp_wc){.wr_id = r.wr_id,
                                .status = PP_WC_SUCCESS,
                                .opcode = PP_WC_OP_RECV,
                                .byte_len = w->len,
                                .imm_data = w->wr.imm_data,
                                .qp_num = rq->qpn,
                                .src_qp = q->qpn,
                                .wc_flags = w->wr.opcode == PP_WR_SEND_WITH_IMM ? PP_WC_WITH_IMM
                                                                                : 0});
    break;
  }
  default:
    cr_assert_fail("fake fabric: opcode %d not modelled", (int)w->wr.opcode);
  }
  q->sq_exec++;
  n->executed++;
  return true;
}

bool ff_ack(struct ff *f, uint32_t rank, uint32_t qpn)
{
  struct ff_qp *q = ff_qp(f, rank, qpn);
  if (!q || q->state != PP_QPS_RTS || q->sq_acked == q->sq_exec)
    return false;
  struct ff_wr *w = &q->sq[q->sq_acked++ % q->init.max_send_wr];
  if (w->wr.send_flags & PP_SEND_SIGNALED)
    push_wc(&f->nic[rank], &(struct pp_wc){.wr_id = w->wr.wr_id,
                                           .status = PP_WC_SUCCESS,
                                           .opcode = wc_op(w->wr.opcode),
                                           .byte_len = w->len,
                                           .qp_num = qpn,
                                           .src_qp = q->dest_qpn});
  return true;
}

bool ff_deliver(struct ff *f, uint32_t rank)
{
  struct ff_nic *n = &f->nic[rank];
  if (n->cq_count == 0)
    return false;
  struct pp_wc wc = n->cq[n->cq_head];
  n->cq_head = (n->cq_head + 1) % n->cq_cap;
  n->cq_count--;
  enum pp_status s = pp_engine_on_wc(f->e[rank], f->now, &wc);
  if (s != PP_OK) {
    f->engine_errors++;
    f->last_error = s;
  }
  return true;
}

void ff_deliver_all(struct ff *f)
{
  for (bool any = true; any;) {
    any = false;
    for (uint32_t r = 0; r < f->n; r++)
      while (ff_deliver(f, r))
        any = true;
  }
}

static bool fire(struct ff *f, uint32_t rank)
{
  if (pp_engine_next_deadline(f->e[rank]) > f->now)
    return false;
  enum pp_status s = pp_engine_on_timer(f->e[rank], f->now);
  if (s != PP_OK) {
    f->engine_errors++;
    f->last_error = s;
  }
  return true;
}

void ff_advance(struct ff *f, uint64_t now)
{
  if (now > f->now)
    f->now = now;
  for (uint32_t r = 0; r < f->n; r++)
    fire(f, r);
}

void ff_break_qp(struct ff *f, uint32_t rank, uint32_t qpn, enum pp_wc_status status)
{
  struct ff_nic *n = &f->nic[rank];
  struct ff_qp *q = ff_qp(f, rank, qpn);
  cr_assert_not_null(q);
  q->state = PP_QPS_ERR;
  for (bool first = true; q->sq_acked != q->sq_tail; first = false) {
    struct ff_wr *w = &q->sq[q->sq_acked++ % q->init.max_send_wr];
    push_wc(n, &(struct pp_wc){.wr_id = w->wr.wr_id,
                               .status = first ? status : PP_WC_WR_FLUSH_ERR,
                               .qp_num = qpn});
  }
  q->sq_exec = q->sq_tail;
  for (; q->rq_count; q->rq_count--, q->rq_head = (q->rq_head + 1) % q->init.max_recv_wr)
    push_wc(n, &(struct pp_wc){.wr_id = q->rq[q->rq_head].wr_id,
                               .status = PP_WC_WR_FLUSH_ERR,
                               .opcode = PP_WC_OP_RECV,
                               .qp_num = qpn});
}

/* ---------------------------------------------------------------- scheduler */

enum act { A_EXEC, A_ACK, A_CQ, A_TIMER };

struct cand {
  enum act kind;
  uint32_t rank, qpn;
};

bool ff_step(struct ff *f)
{
  static struct cand c[FF_MAX_RANKS * (2 * FF_MAX_QPS + 2)];
  unsigned weight[] = {f->exec_weight, f->ack_weight, f->cq_weight, f->cq_weight};
  uint32_t nc = 0;
  uint64_t total = 0;
  for (uint32_t r = 0; r < f->n; r++) {
    for (uint32_t i = 0; i < FF_MAX_QPS; i++) {
      const struct ff_qp *q = &f->nic[r].qps[i];
      if (!q->used || q->state != PP_QPS_RTS)
        continue;
      if (q->sq_exec != q->sq_tail)
        c[nc++] = (struct cand){A_EXEC, r, q->qpn};
      if (q->sq_acked != q->sq_exec && !f->hold_acks)
        c[nc++] = (struct cand){A_ACK, r, q->qpn};
    }
    if (f->nic[r].cq_count)
      c[nc++] = (struct cand){A_CQ, r, 0};
    if (pp_engine_next_deadline(f->e[r]) <= f->now)
      c[nc++] = (struct cand){A_TIMER, r, 0};
  }
  f->steps++;
  if (nc == 0) {
    uint64_t d = PP_NO_DEADLINE;
    for (uint32_t r = 0; r < f->n; r++) {
      uint64_t x = pp_engine_next_deadline(f->e[r]);
      if (x < d)
        d = x;
    }
    if (d == PP_NO_DEADLINE)
      return false;
    ff_advance(f, d);
    return true;
  }
  for (uint32_t i = 0; i < nc; i++)
    total += weight[c[i].kind] ? weight[c[i].kind] : 1;
  uint64_t x = rnd(f) % total;
  uint32_t k = 0;
  for (;; k++) {
    uint64_t w = weight[c[k].kind] ? weight[c[k].kind] : 1;
    if (x < w)
      break;
    x -= w;
  }
  switch (c[k].kind) {
  case A_EXEC:
    ff_exec(f, c[k].rank, c[k].qpn);
    break;
  case A_ACK:
    ff_ack(f, c[k].rank, c[k].qpn);
    break;
  case A_CQ:
    ff_deliver(f, c[k].rank);
    break;
  case A_TIMER:
    fire(f, c[k].rank);
    break;
  }
  if (f->max_step_ns)
    f->now += rnd(f) % (f->max_step_ns + 1);
  return true;
}

uint64_t ff_run(struct ff *f, uint64_t max_steps)
{
  uint64_t n = 0;
  while (n < max_steps && ff_step(f))
    n++;
  return n;
}

bool ff_all_done(const struct ff *f)
{
  for (uint32_t r = 0; r < f->n; r++)
    if (!pp_engine_done(f->e[r]))
      return false;
  return true;
}

/* ---------------------------------------------------------------- setup */

void ff_create(struct ff *f, const struct pp_engine_cfg *cfg, uint64_t seed)
{
  memset(f, 0, sizeof(*f));
  cr_assert_leq(cfg->nranks, FF_MAX_RANKS);
  f->n = cfg->nranks;
  f->rng = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
  if (!f->rng)
    f->rng = 1;
  f->exec_weight = 3;
  f->ack_weight = 2;
  f->cq_weight = 3;
  f->max_step_ns = 50;
  for (uint32_t r = 0; r < f->n; r++) {
    struct ff_nic *n = &f->nic[r];
    n->f = f;
    n->rank = r;
    n->cq_cap = CQ_CAP;
    n->cq = calloc(CQ_CAP, sizeof(*n->cq));
    cr_assert_not_null(n->cq);
    struct pp_engine_cfg c = *cfg;
    c.rank = r;
    enum pp_status s = pp_engine_create(&c, &ff_ops, n, &f->e[r]);
    cr_assert_eq(s, PP_OK, "rank %u: pp_engine_create: %s", r, pp_status_name(s));
  }
}

void ff_connect_start(struct ff *f)
{
  for (uint32_t r = 0; r < f->n; r++)
    for (uint32_t p = 0; p < f->n; p++) {
      struct pp_conn_info info;
      if (p == r || !pp_engine_local_info(f->e[p], r, &info))
        continue;
      enum pp_status s = pp_engine_connect(f->e[r], 0, p, &info);
      cr_assert_eq(s, PP_OK, "rank %u -> %u: connect: %s", r, p, pp_status_name(s));
    }
  for (uint32_t r = 0; r < f->n; r++) {
    enum pp_status s = pp_engine_start(f->e[r], f->now);
    cr_assert_eq(s, PP_OK, "rank %u: start: %s", r, pp_status_name(s));
  }
}

void ff_init(struct ff *f, const struct pp_engine_cfg *cfg, uint64_t seed)
{
  ff_create(f, cfg, seed);
  ff_connect_start(f);
}

void ff_fini(struct ff *f)
{
  for (uint32_t r = 0; r < f->n; r++) {
    pp_engine_destroy(f->e[r]);
    f->e[r] = NULL;
    for (uint32_t i = 0; i < FF_MAX_QPS; i++)
      if (f->nic[r].qps[i].used) {
        free(f->nic[r].qps[i].sq);
        free(f->nic[r].qps[i].rq);
        f->nic[r].qps[i].used = false;
      }
    free(f->nic[r].cq);
    f->nic[r].cq = NULL;
  }
}
