/*
 * engine/core/engine.c, engine/workload/stream.c and engine/proto/naive/naive.c, sans-I/O: the stream workload over the
 * naive protocol over a fake backend. The fake records each call (reg_mr, create_qp, modify_qp,
 * post_recv, post_send, ...), can refuse or fail some of them on request, and lets the test
 * complete work requests by handing crafted pp_wc to pp_engine_on_wc(). Error completions carry
 * only wr_id, status and qp_num (the other fields are garbage), as with ibverbs.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/engine.h"
#include "engine/core/engine_impl.h"

/* Under ASan, each test that creates engines asks LeakSanitizer for leaks at its end (at exit it
 * would be too late: the test has already been reported as passed, and a failure in a .fini is
 * only a warning). */
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* scenario.h's opening comment trips -Wcomment (see tools/scenario/scenario.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

/* ================================================================ the fake backend */

#define MAXLOG 4096

enum call_kind {
  C_REG_MR,
  C_DEREG_MR,
  C_CREATE_SRQ,
  C_MODIFY_SRQ,
  C_DESTROY_SRQ,
  C_CREATE_QP,
  C_MODIFY_QP,
  C_DESTROY_QP,
  C_POST_SEND,
  C_POST_RECV,
  C_POST_SRQ_RECV,
  C_QUERY_COUNTERS,
};

struct fake_mr {
  void *addr;
  size_t len;
  unsigned access;
  struct pp_mr mr;
  unsigned deregs; /* dereg_mr calls naming this MR */
};

struct fake_qp {
  struct pp_qp_init_attr init;
  uint32_t qpn;
  enum pp_qp_state state;
  unsigned destroys; /* destroy_qp calls naming this QP */
};

struct fake_modify {
  uint32_t qpn;
  struct pp_qp_attr attr;
  unsigned mask;
};

struct fake_send {
  uint32_t qpn;
  struct pp_send_wr wr;
  uint8_t head[64]; /* the first bytes of the payload at post time */
};

struct fake_recv {
  uint32_t qpn;
  struct pp_recv_wr wr;
};

struct fake {
  unsigned id;
  enum call_kind log[MAXLOG];
  unsigned ncalls;
  struct fake_mr mrs[8];
  unsigned nmr, ndereg;
  struct fake_qp qps[8];
  unsigned nqp, ndestroy;
  struct fake_modify mods[32];
  unsigned nmod;
  struct fake_send sends[MAXLOG];
  unsigned nsend;
  struct fake_recv recvs[MAXLOG];
  unsigned nrecv;
  unsigned again;   /* post_send returns PP_AGAIN while this is > 0 */
  unsigned refused; /* post_send calls answered PP_AGAIN */
  unsigned outstanding, max_outstanding; /* sends posted and not yet completed by the test */
  unsigned send_head, recv_head;         /* next send / receive the test completes */
  unsigned reg_calls, qp_calls, recv_calls; /* reg_mr / create_qp / post_recv calls so far */
  unsigned fail_reg_at, fail_qp_at, fail_recv_at; /* that call (1-based) fails */
  enum pp_status fail_status;            /* with this status */
};

static struct fake F0, F1;

static void fake_init(struct fake *f, unsigned id)
{
  memset(f, 0, sizeof(*f));
  f->id = id;
}

static void fake_log(struct fake *f, enum call_kind k)
{
  cr_assert_lt(f->ncalls, MAXLOG, "fake call log overflow");
  f->log[f->ncalls++] = k;
}

static struct fake_qp *fake_qp(struct fake *f, uint32_t qpn)
{
  for (unsigned i = 0; i < f->nqp; i++)
    if (f->qps[i].qpn == qpn)
      return &f->qps[i];
  return NULL;
}

static int fk_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  struct fake *f = nic;
  fake_log(f, C_REG_MR);
  if (++f->reg_calls == f->fail_reg_at)
    return f->fail_status;
  cr_assert_lt(f->nmr, 8);
  struct fake_mr *m = &f->mrs[f->nmr];
  *m = (struct fake_mr){.addr = addr,
                        .len = length,
                        .access = access,
                        .mr = {.addr = (uint64_t)(uintptr_t)addr,
                               .length = length,
                               .lkey = 0x1000 + f->id * 0x100 + f->nmr,
                               .rkey = 0x2000 + f->id * 0x100 + f->nmr,
                               .access = access}};
  f->nmr++;
  *mr = m->mr;
  return PP_OK;
}

static int fk_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct fake *f = nic;
  fake_log(f, C_DEREG_MR);
  f->ndereg++;
  for (unsigned i = 0; i < f->nmr; i++) {
    if (f->mrs[i].mr.lkey == mr->lkey) {
      cr_assert_eq(f->mrs[i].deregs, 0, "MR lkey %#x deregistered twice", mr->lkey);
      cr_assert_eq(mr->addr, f->mrs[i].mr.addr);
      cr_assert_eq(mr->rkey, f->mrs[i].mr.rkey);
      f->mrs[i].deregs++;
      return PP_OK;
    }
  }
  cr_assert_fail("dereg_mr of an MR never registered (lkey %#x)", mr->lkey);
  return PP_NOTFOUND;
}

static int fk_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *srq)
{
  (void)a, (void)srq;
  fake_log(nic, C_CREATE_SRQ);
  return PP_UNSUPPORTED;
}

static int fk_modify_srq(void *nic, uint32_t srq, uint32_t limit)
{
  (void)srq, (void)limit;
  fake_log(nic, C_MODIFY_SRQ);
  return PP_UNSUPPORTED;
}

static int fk_destroy_srq(void *nic, uint32_t srq)
{
  (void)srq;
  fake_log(nic, C_DESTROY_SRQ);
  return PP_UNSUPPORTED;
}

static int fk_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qpn)
{
  struct fake *f = nic;
  fake_log(f, C_CREATE_QP);
  if (++f->qp_calls == f->fail_qp_at)
    return f->fail_status;
  cr_assert_lt(f->nqp, 8);
  struct fake_qp *q = &f->qps[f->nqp];
  q->init = *a;
  q->qpn = 0x100 * (f->id + 1) + 0x11 + f->nqp;
  q->state = PP_QPS_RESET;
  f->nqp++;
  *qpn = q->qpn;
  return PP_OK;
}

static int fk_modify_qp(void *nic, uint32_t qpn, const struct pp_qp_attr *attr, unsigned mask)
{
  struct fake *f = nic;
  fake_log(f, C_MODIFY_QP);
  struct fake_qp *q = fake_qp(f, qpn);
  if (!q)
    return PP_NOTFOUND;
  cr_assert_lt(f->nmod, 32);
  f->mods[f->nmod++] = (struct fake_modify){qpn, *attr, mask};
  if (mask & PP_QP_STATE) {
    if (!pp_qp_transition_ok(q->state, attr->qp_state))
      return PP_STATE;
    q->state = attr->qp_state;
  }
  return PP_OK;
}

static int fk_destroy_qp(void *nic, uint32_t qpn)
{
  struct fake *f = nic;
  fake_log(f, C_DESTROY_QP);
  f->ndestroy++;
  struct fake_qp *q = fake_qp(f, qpn);
  cr_assert_not_null(q, "destroy_qp of a QP never created (%#x)", qpn);
  cr_assert_eq(q->destroys, 0, "QP %#x destroyed twice", qpn);
  q->destroys++;
  return PP_OK;
}

static int fk_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *wr)
{
  struct fake *f = nic;
  fake_log(f, C_POST_SEND);
  struct fake_qp *q = fake_qp(f, qpn);
  if (!q || q->destroys)
    return PP_NOTFOUND;
  if (q->state != PP_QPS_RTS)
    return PP_STATE;
  if (f->again > 0) {
    f->again--;
    f->refused++;
    return PP_AGAIN;
  }
  cr_assert_lt(f->nsend, MAXLOG);
  struct fake_send *s = &f->sends[f->nsend++];
  s->qpn = qpn;
  s->wr = *wr;
  uint32_t n = wr->num_sge ? wr->sg_list[0].length : 0;
  memcpy(s->head, (const void *)(uintptr_t)wr->sg_list[0].addr, n < 64 ? n : 64);
  if (++f->outstanding > f->max_outstanding)
    f->max_outstanding = f->outstanding;
  return PP_OK;
}

static int fk_post_recv(void *nic, uint32_t qpn, const struct pp_recv_wr *wr)
{
  struct fake *f = nic;
  fake_log(f, C_POST_RECV);
  struct fake_qp *q = fake_qp(f, qpn);
  if (!q || q->destroys)
    return PP_NOTFOUND;
  if (q->state == PP_QPS_RESET || q->state == PP_QPS_ERR)
    return PP_STATE;
  if (++f->recv_calls == f->fail_recv_at)
    return f->fail_status;
  cr_assert_lt(f->nrecv, MAXLOG);
  f->recvs[f->nrecv++] = (struct fake_recv){qpn, *wr};
  return PP_OK;
}

static int fk_post_srq_recv(void *nic, uint32_t srq, const struct pp_recv_wr *wr)
{
  (void)srq, (void)wr;
  fake_log(nic, C_POST_SRQ_RECV);
  return PP_UNSUPPORTED;
}

static int fk_query_counters(void *nic, struct pp_nic_counters *out)
{
  fake_log(nic, C_QUERY_COUNTERS);
  memset(out, 0, sizeof(*out));
  return PP_OK;
}

static const struct pp_nic_ops fake_ops = {
    .name = "fake",
    .reg_mr = fk_reg_mr,
    .dereg_mr = fk_dereg_mr,
    .create_srq = fk_create_srq,
    .modify_srq = fk_modify_srq,
    .destroy_srq = fk_destroy_srq,
    .create_qp = fk_create_qp,
    .modify_qp = fk_modify_qp,
    .destroy_qp = fk_destroy_qp,
    .post_send = fk_post_send,
    .post_recv = fk_post_recv,
    .post_srq_recv = fk_post_srq_recv,
    .query_counters = fk_query_counters,
};

static unsigned count_calls(const struct fake *f, enum call_kind k)
{
  unsigned n = 0;
  for (unsigned i = 0; i < f->ncalls; i++)
    n += f->log[i] == k;
  return n;
}

/* Every MR registered was deregistered once, every QP created destroyed once. */
static void check_released(const struct fake *f)
{
  for (unsigned i = 0; i < f->nmr; i++)
    cr_assert_eq(f->mrs[i].deregs, 1, "MR %u (lkey %#x) deregistered %u times", i,
                 f->mrs[i].mr.lkey, f->mrs[i].deregs);
  for (unsigned i = 0; i < f->nqp; i++)
    cr_assert_eq(f->qps[i].destroys, 1, "QP %#x destroyed %u times", f->qps[i].qpn,
                 f->qps[i].destroys);
  cr_assert_eq(f->ndereg, f->nmr);
  cr_assert_eq(f->ndestroy, f->nqp);
}

/* ================================================================ helpers */

/* The naive protocol's wr_ids: the stream workload's buffer slot, with bit 63 set for a send. */
#define SEND_WR (1ull << 63)

static void setup(void)
{
  fake_init(&F0, 0);
  fake_init(&F1, 1);
}

/* Nothing the engine allocated is left unreachable (checked only under ASan). */
static void check_no_leaks(void)
{
#ifdef HAVE_LSAN
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (see above)");
#endif
}

TestSuite(engine, .init = setup);

/* Distinct QP values so that a mixed-up field shows. */
static struct pp_engine_cfg base_cfg(void)
{
  return (struct pp_engine_cfg){
      .rank = 0,
      .nranks = 2,
      .protocol = PP_PROTO_NAIVE,
      .qp = {.min_rnr_timer = 12,
             .rnr_retry = 5,
             .timeout = 14,
             .retry_cnt = 6,
             .max_rd_atomic = 2,
             .mtu = 2048,
             .sq_depth = 4,
             .rq_depth = 8},
      .workload = {.kind = PP_WORKLOAD_STREAM,
                   .pattern = PP_PATTERN_PAIR,
                   .messages = 10,
                   .size = 64,
                   .interval_ns = 0,
                   .consume_ns = 0,
                   .consume_ranks = 0},
      .seed = 1,
  };
}

static const struct pp_conn_info fake_peer = {.nchannels = 1, .qp_num = {0x777}, .psn = {0x123456}};

static struct pp_engine *create(struct pp_engine_cfg cfg, struct fake *f)
{
  struct pp_engine *e = NULL;
  enum pp_status s = pp_engine_create(&cfg, &fake_ops, f, &e);
  cr_assert_eq(s, PP_OK, "pp_engine_create: %s", pp_status_name(s));
  cr_assert_not_null(e);
  return e;
}

/* A rank-0 sender of a pair, connected to a made-up peer and started at `now`. */
static struct pp_engine *sender(struct pp_engine_cfg cfg, uint64_t now)
{
  cfg.rank = 0;
  struct pp_engine *e = create(cfg, &F0);
  cr_assert_eq(pp_engine_connect(e, now, 1, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, now), PP_OK);
  return e;
}

/* A rank-1 receiver of a pair, connected and started at `now`. */
static struct pp_engine *receiver(struct pp_engine_cfg cfg, uint64_t now)
{
  cfg.rank = 1;
  struct pp_engine *e = create(cfg, &F1);
  cr_assert_eq(pp_engine_connect(e, now, 0, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, now), PP_OK);
  return e;
}

static uint64_t sent_seq(const struct fake_send *s)
{
  uint64_t q;
  memcpy(&q, s->head, 8);
  return q;
}

/* An error completion as ibverbs gives it: wr_id, status and qp_num are valid, the rest is
 * garbage (here an opcode of neither kind and a huge byte_len). */
static struct pp_wc error_wc(uint64_t wr_id, enum pp_wc_status status, uint32_t qpn)
{
  struct pp_wc wc;
  memset(&wc, 0xa5, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = status;
  wc.qp_num = qpn;
  return wc;
}

/* Completes the oldest uncompleted send of f with `status`. */
static enum pp_status complete_send(struct pp_engine *e, struct fake *f, enum pp_wc_status status,
                                    uint64_t now)
{
  cr_assert_lt(f->send_head, f->nsend, "no send left to complete");
  const struct fake_send *s = &f->sends[f->send_head++];
  struct pp_wc wc = {
      .wr_id = s->wr.wr_id,
      .status = status,
      .opcode = PP_WC_OP_SEND,
      .byte_len = s->wr.sg_list[0].length,
      .qp_num = s->qpn,
  };
  if (status != PP_WC_SUCCESS)
    wc = error_wc(s->wr.wr_id, status, s->qpn);
  f->outstanding--;
  return pp_engine_on_wc(e, now, &wc);
}

/* Fills the oldest unconsumed receive WQE of f with `len` bytes and completes it. */
static enum pp_status deliver(struct pp_engine *e, struct fake *f, const void *bytes, uint32_t len,
                              enum pp_wc_status status, uint64_t now)
{
  cr_assert_lt(f->recv_head, f->nrecv, "no receive WQE posted");
  const struct fake_recv *r = &f->recvs[f->recv_head++];
  if (status == PP_WC_SUCCESS) {
    cr_assert_leq(len, r->wr.sg_list[0].length);
    memcpy((void *)(uintptr_t)r->wr.sg_list[0].addr, bytes, len);
  }
  struct pp_wc wc = {
      .wr_id = r->wr.wr_id,
      .status = status,
      .opcode = PP_WC_OP_RECV,
      .byte_len = len,
      .qp_num = r->qpn,
      .src_qp = fake_peer.qp_num[0],
  };
  if (status != PP_WC_SUCCESS)
    wc = error_wc(r->wr.wr_id, status, r->qpn);
  return pp_engine_on_wc(e, now, &wc);
}

/* Delivers message `seq` from rank `src` built with pp_msg_fill. */
static enum pp_status deliver_msg(struct pp_engine *e, struct fake *f, uint32_t size, uint32_t src,
                                  uint64_t seq, uint64_t now)
{
  uint8_t *buf = malloc(size);
  pp_msg_fill(buf, size, src, seq);
  enum pp_status s = deliver(e, f, buf, size, PP_WC_SUCCESS, now);
  free(buf);
  return s;
}

/* ================================================================ configuration */

Test(engine, cfg_base_is_valid)
{
  struct pp_engine_cfg c = base_cfg();
  char err[256] = "";
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "%s", err);
  c.workload.pattern = PP_PATTERN_RING;
  c.nranks = 3;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "ring of 3: %s", err);
  c.nranks = PP_MAX_RANKS;
  c.rank = PP_MAX_RANKS - 1;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "%s", err);
  c = base_cfg();
  c.workload.size = PP_MSG_HEADER;
  c.qp.min_rnr_timer = 31;
  c.qp.rnr_retry = 7;
  c.qp.timeout = 31;
  c.qp.retry_cnt = 7;
  c.qp.mtu = 4096;
  c.qp.sq_depth = PP_MAX_QUEUE_DEPTH;
  c.qp.rq_depth = 1;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "bounds inclusive: %s", err);
}

struct bad_cfg {
  const char *what;
  void (*mutate)(struct pp_engine_cfg *c);
  const char *keyword; /* the message must name the field */
};

#define BAD(name, stmt, kw)                                                    \
  static void bad_##name(struct pp_engine_cfg *c) { stmt; }
BAD(ranks0, c->nranks = 0, "ranks")
BAD(ranks_big, c->nranks = PP_MAX_RANKS + 1, "ranks")
BAD(rank_out, c->rank = 2, "rank")
BAD(protocol, c->protocol = (enum pp_protocol)PP_PROTO_COUNT, "protocol")
BAD(pattern, c->workload.pattern = (enum pp_pattern)PP_PATTERN_COUNT, "pattern")
BAD(workload, c->workload.kind = (enum pp_workload_kind)PP_WORKLOAD_COUNT, "workload")
BAD(workload_neg, c->workload.kind = (enum pp_workload_kind)-1, "workload")
BAD(odd_pair, (c->nranks = 3, c->rank = 0), "even")
BAD(one_rank, (c->nranks = 1, c->workload.pattern = PP_PATTERN_RING), "2 ranks")
BAD(messages0, c->workload.messages = 0, "messages")
BAD(messages_big, c->workload.messages = PP_MAX_MESSAGES + 1, "messages")
BAD(size_small, c->workload.size = PP_MSG_HEADER - 1, "size")
BAD(size_big, c->workload.size = PP_MAX_MSG_SIZE + 1, "size")
BAD(min_rnr_timer, c->qp.min_rnr_timer = 32, "min_rnr_timer")
BAD(rnr_retry, c->qp.rnr_retry = 8, "rnr_retry")
BAD(timeout, c->qp.timeout = 32, "timeout")
BAD(retry_cnt, c->qp.retry_cnt = 8, "retry_cnt")
BAD(max_rd_atomic, c->qp.max_rd_atomic = 0, "max_rd_atomic")
BAD(mtu1000, c->qp.mtu = 1000, "mtu")
BAD(mtu0, c->qp.mtu = 0, "mtu")
BAD(mtu8192, c->qp.mtu = 8192, "mtu")
BAD(sq0, c->qp.sq_depth = 0, "sq_depth")
BAD(sq_big, c->qp.sq_depth = PP_MAX_QUEUE_DEPTH + 1, "sq_depth")
BAD(rq0, c->qp.rq_depth = 0, "rq_depth")
BAD(rq_big, c->qp.rq_depth = PP_MAX_QUEUE_DEPTH + 1, "rq_depth")
BAD(pool, (c->qp.sq_depth = 4096, c->qp.rq_depth = 4096, c->workload.size = 1u << 20), "GiB")
BAD(alltoall_stream, c->workload.pattern = PP_PATTERN_ALLTOALL, "only for workload 'traffic'")
#undef BAD

static const struct bad_cfg bad_cfgs[] = {
#define B(name, kw) {#name, bad_##name, kw}
    B(ranks0, "ranks"),
    B(ranks_big, "ranks"),
    B(rank_out, "rank"),
    B(protocol, "protocol"),
    B(pattern, "pattern"),
    B(workload, "workload"),
    B(workload_neg, "workload"),
    B(odd_pair, "even"),
    B(one_rank, "2 ranks"),
    B(messages0, "messages"),
    B(messages_big, "messages"),
    B(size_small, "size"),
    B(size_big, "size"),
    B(min_rnr_timer, "min_rnr_timer"),
    B(rnr_retry, "rnr_retry"),
    B(timeout, "timeout"),
    B(retry_cnt, "retry_cnt"),
    B(max_rd_atomic, "max_rd_atomic"),
    B(alltoall_stream, "only for workload 'traffic'"),
    B(mtu1000, "mtu"),
    B(mtu0, "mtu"),
    B(mtu8192, "mtu"),
    B(sq0, "sq_depth"),
    B(sq_big, "sq_depth"),
    B(rq0, "rq_depth"),
    B(rq_big, "rq_depth"),
    B(pool, "GiB"),
#undef B
};

Test(engine, cfg_check_rejects_each_bad_field)
{
  for (size_t i = 0; i < sizeof(bad_cfgs) / sizeof(bad_cfgs[0]); i++) {
    struct pp_engine_cfg c = base_cfg();
    bad_cfgs[i].mutate(&c);
    char err[256] = "";
    cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID, "%s accepted",
                 bad_cfgs[i].what);
    cr_assert(strlen(err) > 10, "%s: no message", bad_cfgs[i].what);
    cr_assert_not_null(strstr(err, bad_cfgs[i].keyword), "%s: message '%s' does not mention '%s'",
                       bad_cfgs[i].what, err, bad_cfgs[i].keyword);
    /* a tiny buffer is truncated, never overrun */
    char small[8];
    memset(small, 'x', sizeof(small));
    cr_assert_eq(pp_engine_cfg_check(&c, small, sizeof(small)), PP_INVALID);
    cr_assert_eq(small[7], '\0');
    /* and the engine refuses it without touching the backend */
    struct pp_engine *e = (struct pp_engine *)&c;
    cr_assert_eq(pp_engine_create(&c, &fake_ops, &F0, &e), PP_INVALID, "%s", bad_cfgs[i].what);
    cr_assert_null(e);
    cr_assert_eq(F0.ncalls, 0, "%s: %u backend calls", bad_cfgs[i].what, F0.ncalls);
  }
}

/* A rank exchanges messages with at most PP_MAX_PEERS peers: adding one it has is a no-op,
 * adding one past the bound is refused (PP_LIMIT) and changes nothing. */
Test(engine, peers_are_added_once_and_bounded)
{
  struct pp_engine_cfg c = base_cfg();
  c.nranks = PP_MAX_PEERS + 2;
  struct pp_engine *e = create(c, &F0);
  uint32_t n = pp_engine_npeers(e);
  cr_assert_eq(n, 1, "a pair's sender: its receiver");
  uint32_t first = pp_engine_peer(e, 0);
  cr_assert_eq(pp_engine_add_peer(e, first), PP_OK);
  cr_assert_eq(pp_engine_npeers(e), 1, "once");
  for (uint32_t r = 2; pp_engine_npeers(e) < PP_MAX_PEERS; r++)
    cr_assert_eq(pp_engine_add_peer(e, r), PP_OK, "peer %u", r);
  cr_assert_eq(pp_engine_add_peer(e, PP_MAX_PEERS + 1), PP_LIMIT);
  cr_assert_eq(pp_engine_npeers(e), PP_MAX_PEERS, "nothing added past the bound");
  cr_assert_eq(pp_engine_add_peer(e, first), PP_OK, "one it has is still found");
  pp_engine_destroy(e);
}

Test(engine, create_refuses_an_incomplete_ops_table)
{
  struct pp_nic_ops ops = fake_ops;
  ops.query_counters = NULL;
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e;
  cr_assert_eq(pp_engine_create(&c, &ops, &F0, &e), PP_INVALID);
  cr_assert_null(e);
  cr_assert_eq(F0.ncalls, 0);
}

Test(engine, names_and_patterns)
{
  cr_assert_str_eq(pp_protocol_name(PP_PROTO_NAIVE), "naive");
  cr_assert_eq(pp_protocol_from_name("naive"), PP_PROTO_NAIVE);
  cr_assert_eq(pp_protocol_from_name("credits?"), -1);
  cr_assert_str_eq(pp_protocol_name((enum pp_protocol)PP_PROTO_COUNT), "?");
  cr_assert_str_eq(pp_pattern_name(PP_PATTERN_PAIR), "pair");
  cr_assert_str_eq(pp_pattern_name(PP_PATTERN_RING), "ring");
  cr_assert_eq(pp_pattern_from_name("ring"), PP_PATTERN_RING);
  cr_assert_eq(pp_pattern_from_name("star"), -1);
  cr_assert_str_eq(pp_pattern_name((enum pp_pattern)-1), "?");
  cr_assert_str_eq(pp_workload_name(PP_WORKLOAD_STREAM), "stream");
  cr_assert_eq(pp_workload_from_name("stream"), PP_WORKLOAD_STREAM);
  cr_assert_eq(pp_workload_from_name("Stream"), -1);
  cr_assert_eq(pp_workload_from_name("streams"), -1);
  cr_assert_eq(pp_workload_from_name(""), -1);
  cr_assert_eq(pp_workload_from_name("naive"), -1, "a protocol is no workload");
  cr_assert_str_eq(pp_workload_name((enum pp_workload_kind)PP_WORKLOAD_COUNT), "?");
  cr_assert_str_eq(pp_workload_name((enum pp_workload_kind)-1), "?");
  for (int k = 0; k < PP_WORKLOAD_COUNT; k++)
    cr_assert_eq(pp_workload_from_name(pp_workload_name((enum pp_workload_kind)k)), k);
  for (int p = 0; p < PP_PROTO_COUNT; p++)
    cr_assert_eq(pp_protocol_from_name(pp_protocol_name((enum pp_protocol)p)), p);

  struct pp_workload pair = {.pattern = PP_PATTERN_PAIR}, ring = {.pattern = PP_PATTERN_RING};
  cr_assert_eq(pp_workload_dest(&pair, 0, 4), 1);
  cr_assert_eq(pp_workload_dest(&pair, 1, 4), -1);
  cr_assert_eq(pp_workload_dest(&pair, 2, 4), 3);
  cr_assert_eq(pp_workload_source(&pair, 3, 4), 2);
  cr_assert_eq(pp_workload_source(&pair, 0, 4), -1);
  cr_assert_eq(pp_workload_dest(&pair, 4, 4), -1);
  cr_assert_eq(pp_workload_dest(&ring, 2, 3), 0);
  cr_assert_eq(pp_workload_source(&ring, 0, 3), 2);
  cr_assert_eq(pp_workload_source(&ring, 1, 3), 0);
  cr_assert_eq(pp_workload_dest(&ring, 0, 1), -1);
  cr_assert_eq(pp_workload_source(&ring, 0, 1), -1, "one rank has no neighbour");
  cr_assert_eq(pp_workload_source(&ring, 3, 3), -1, "no rank 3 of 3");
  struct pp_workload all = {.pattern = PP_PATTERN_ALLTOALL};
  cr_assert_eq(pp_workload_dest(&all, 0, 4), -1, "alltoall has no single destination");
  cr_assert_eq(pp_workload_source(&all, 0, 4), -1, "nor a single source");
}

/* ================================================================ create / connect */

Test(engine, create_sender_registers_and_creates_qp_in_init)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(F0.nmr, 1, "a pure sender registers its send pool only");
  cr_assert_eq(F0.mrs[0].len, (size_t)c.qp.sq_depth * c.workload.size);
  cr_assert(F0.mrs[0].access & PP_ACCESS_LOCAL_WRITE);
  cr_assert_eq(F0.nqp, 1);
  cr_assert_eq(F0.qps[0].init.max_send_wr, c.qp.sq_depth);
  cr_assert_eq(F0.qps[0].init.max_recv_wr, c.qp.rq_depth);
  cr_assert_eq(F0.qps[0].init.srq_num, 0);
  cr_assert_eq(F0.qps[0].init.peer, 1);
  cr_assert_geq(F0.qps[0].init.max_send_sge, 1);
  cr_assert_eq(F0.qps[0].state, PP_QPS_INIT);
  cr_assert_eq(F0.nmod, 1);
  cr_assert(F0.mods[0].mask & PP_QP_STATE);
  cr_assert(F0.mods[0].mask & PP_QP_ACCESS_FLAGS);
  cr_assert_eq(F0.nrecv, 0, "rank 0 of a pair receives nothing");
  cr_assert_eq(F0.nsend, 0, "nothing is sent before start");
  cr_assert_not(pp_engine_done(e), "not done before start");
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(e, 1, &ci));
  cr_assert_eq(ci.nchannels, 1);
  cr_assert_eq(ci.qp_num[0], F0.qps[0].qpn);
  cr_assert_lt(ci.psn[0], 1u << 24, "PSNs are 24 bits");
  cr_assert_not(pp_engine_local_info(e, 0, &ci), "no QP to itself");
  cr_assert_eq(ci.nchannels, 1, "the naive protocol: one QP per peer");
  for (unsigned i = 0; i < PP_MAX_REGIONS; i++)
    cr_assert(ci.region[i].addr == 0 && ci.region[i].rkey == 0 && ci.region[i].len == 0,
              "the naive protocol exposes no memory region (region %u)", i);
  for (unsigned i = 1; i < PP_MAX_CHANNELS; i++)
    cr_assert(ci.qp_num[i] == 0 && ci.psn[i] == 0, "channel %u of 1 is filled", i);
  pp_engine_destroy(e);
  cr_assert_eq(F0.ndestroy, 1, "destroy releases the QP");
  cr_assert_eq(F0.ndereg, 1, "destroy releases the MR");
  check_released(&F0);
  check_no_leaks();
}

Test(engine, create_receiver_posts_rq_depth_receives_in_init)
{
  struct pp_engine_cfg c = base_cfg();
  c.rank = 1;
  struct pp_engine *e = create(c, &F1);
  cr_assert_eq(F1.nmr, 1);
  const struct fake_mr *mr = &F1.mrs[0];
  cr_assert_eq(mr->len, (size_t)c.qp.rq_depth * c.workload.size);
  cr_assert(mr->access & PP_ACCESS_LOCAL_WRITE, "receive buffers need LOCAL_WRITE");
  cr_assert_eq(F1.nqp, 1);
  cr_assert_eq(F1.qps[0].init.peer, 0);
  cr_assert_eq(F1.nrecv, c.qp.rq_depth);
  cr_assert_eq(count_calls(&F1, C_POST_RECV), c.qp.rq_depth);
  /* every receive comes after the QP reached INIT */
  unsigned first_recv = MAXLOG, last_modify = 0;
  for (unsigned i = 0; i < F1.ncalls; i++) {
    if (F1.log[i] == C_POST_RECV && first_recv == MAXLOG)
      first_recv = i;
    if (F1.log[i] == C_MODIFY_QP)
      last_modify = i;
  }
  cr_assert_gt(first_recv, last_modify);
  cr_assert_eq(F1.qps[0].state, PP_QPS_INIT);
  uint64_t lo = (uint64_t)(uintptr_t)mr->addr, hi = lo + mr->len;
  for (unsigned i = 0; i < F1.nrecv; i++) {
    const struct pp_recv_wr *w = &F1.recvs[i].wr;
    cr_assert_eq(F1.recvs[i].qpn, F1.qps[0].qpn);
    cr_assert_eq(w->num_sge, 1);
    cr_assert_eq(w->sg_list[0].length, c.workload.size);
    cr_assert_eq(w->sg_list[0].lkey, mr->mr.lkey, "receive %u uses lkey %#x", i,
                 w->sg_list[0].lkey);
    cr_assert(w->sg_list[0].addr >= lo && w->sg_list[0].addr + c.workload.size <= hi,
              "receive %u outside its MR", i);
    for (unsigned j = 0; j < i; j++) {
      cr_assert_neq(w->wr_id, F1.recvs[j].wr.wr_id, "receives %u and %u share a wr_id", i, j);
      uint64_t a = w->sg_list[0].addr, b = F1.recvs[j].wr.sg_list[0].addr;
      cr_assert(a + c.workload.size <= b || b + c.workload.size <= a, "buffers %u and %u overlap",
                i, j);
    }
  }
  /* the naive protocol's receive wr_id is the workload's cookie, its buffer slot: bit 63 clear */
  for (unsigned i = 0; i < F1.nrecv; i++) {
    cr_assert_eq(F1.recvs[i].wr.wr_id, i, "receive %u: wr_id %#llx", i,
                 (unsigned long long)F1.recvs[i].wr.wr_id);
    cr_assert_eq(F1.recvs[i].wr.sg_list[0].addr, mr->mr.addr + (uint64_t)i * c.workload.size);
  }
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(e, 0, &ci));
  cr_assert_eq(ci.nchannels, 1);
  cr_assert_eq(ci.qp_num[0], F1.qps[0].qpn);
  cr_assert_eq(ci.region[0].addr, 0, "the naive protocol exposes no receive buffer");
  cr_assert_eq(ci.region[0].rkey, 0);
  pp_engine_destroy(e);
  check_released(&F1);
  check_no_leaks();
}

/* Checks the RTR and RTS modify_qp calls of fake f against the QP parameters. */
static void check_connect(const struct fake *f, const struct pp_qp_params *q,
                          const struct pp_conn_info *mine, const struct pp_conn_info *peer)
{
  cr_assert_eq(f->nmod, 3, "INIT, RTR, RTS: %u modify_qp calls", f->nmod);
  const struct fake_modify *rtr = &f->mods[1], *rts = &f->mods[2];
  cr_assert_eq(f->mods[0].attr.qp_state, PP_QPS_INIT);

  cr_assert_eq(rtr->attr.qp_state, PP_QPS_RTR);
  unsigned rtr_need = PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN |
                      PP_QP_MIN_RNR_TIMER | PP_QP_MAX_DEST_RD_ATOMIC;
  cr_assert_eq(rtr->mask & rtr_need, rtr_need, "RTR mask %#x", rtr->mask);
  cr_assert_eq(pp_mtu_bytes(rtr->attr.path_mtu), q->mtu);
  cr_assert_eq(rtr->attr.dest_qp_num, peer->qp_num[0]);
  cr_assert_eq(rtr->attr.rq_psn, peer->psn[0]);
  cr_assert_eq(rtr->attr.min_rnr_timer, q->min_rnr_timer);
  cr_assert_eq(rtr->attr.max_dest_rd_atomic, q->max_rd_atomic);

  cr_assert_eq(rts->attr.qp_state, PP_QPS_RTS);
  unsigned rts_need = PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                      PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC;
  cr_assert_eq(rts->mask & rts_need, rts_need, "RTS mask %#x", rts->mask);
  cr_assert_eq(rts->attr.sq_psn, mine->psn[0], "the SQ starts at the PSN we told the peer");
  cr_assert_eq(rts->attr.timeout, q->timeout);
  cr_assert_eq(rts->attr.retry_cnt, q->retry_cnt);
  cr_assert_eq(rts->attr.rnr_retry, q->rnr_retry);
  cr_assert_eq(rts->attr.max_rd_atomic, q->max_rd_atomic);
  cr_assert_eq(f->qps[0].state, PP_QPS_RTS);
}

Test(engine, connect_takes_both_qps_to_rts_with_the_configured_attributes)
{
  struct pp_engine_cfg c = base_cfg();
  c.rank = 0;
  struct pp_engine *s = create(c, &F0);
  c.rank = 1;
  struct pp_engine *r = create(c, &F1);
  struct pp_conn_info si, ri;
  cr_assert(pp_engine_local_info(s, 1, &si));
  cr_assert(pp_engine_local_info(r, 0, &ri));
  cr_assert_eq(pp_engine_start(s, 0), PP_STATE, "start before connect");
  cr_assert_eq(F0.nsend, 0);
  cr_assert_eq(pp_engine_connect(s, 10, 1, &ri), PP_OK);
  cr_assert_eq(pp_engine_connect(r, 10, 0, &si), PP_OK);
  check_connect(&F0, &c.qp, &si, &ri);
  check_connect(&F1, &c.qp, &ri, &si);
  cr_assert_eq(pp_engine_connect(s, 10, 1, &ri), PP_STATE, "connecting twice");
  cr_assert_eq(pp_engine_connect(s, 10, 0, &ri), PP_NOTFOUND, "no QP to that peer");
  cr_assert_eq(F0.nmod, 3, "refused connects reach no modify_qp");
  cr_assert_eq(pp_engine_start(s, 20), PP_OK);
  cr_assert_eq(pp_engine_start(s, 20), PP_STATE, "starting twice");
  pp_engine_destroy(s);
  pp_engine_destroy(r);
  check_no_leaks();
}

Test(engine, connect_and_local_info_only_for_peers)
{
  struct pp_engine_cfg c = base_cfg();
  c.nranks = 4; /* pairs (0, 1) and (2, 3): rank 0 talks to rank 1 only */
  struct pp_engine *e = create(c, &F0);
  static const uint32_t strangers[] = {0, 2, 3, 4, PP_MAX_RANKS, UINT32_MAX};
  for (size_t i = 0; i < sizeof(strangers) / sizeof(strangers[0]); i++) {
    struct pp_conn_info ci, untouched;
    memset(&ci, 0x5a, sizeof(ci));
    memcpy(&untouched, &ci, sizeof(ci));
    cr_assert_not(pp_engine_local_info(e, strangers[i], &ci), "rank %u is no peer", strangers[i]);
    cr_assert_eq(memcmp(&ci, &untouched, sizeof(ci)), 0, "rank %u: out written", strangers[i]);
    cr_assert_eq(pp_engine_connect(e, 0, strangers[i], &fake_peer), PP_NOTFOUND, "rank %u",
                 strangers[i]);
  }
  unsigned nmod = F0.nmod;
  struct pp_conn_info bad = fake_peer;
  bad.nchannels = 0;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_INVALID, "no channel");
  bad.nchannels = PP_MAX_CHANNELS + 1;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_INVALID, "more than PP_MAX_CHANNELS");
  bad.nchannels = UINT32_MAX;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_INVALID);
  bad.nchannels = 2;
  bad.qp_num[1] = 0x778;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_INVALID, "the naive protocol has 1 channel");
  bad.nchannels = PP_MAX_CHANNELS;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_INVALID);
  cr_assert_eq(F0.nmod, nmod, "refused connects reach no modify_qp");
  cr_assert_eq(F0.qps[0].state, PP_QPS_INIT);
  cr_assert_eq(pp_engine_start(e, 0), PP_STATE, "the refused connects connected nothing");
  /* a connect the backend fails leaves the peer unconnected: it can be tried again */
  F0.qps[0].state = PP_QPS_RESET; /* RESET -> RTR is no transition: the fake says PP_STATE */
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_STATE);
  cr_assert_eq(pp_engine_start(e, 0), PP_STATE);
  F0.qps[0].state = PP_QPS_INIT;
  nmod = F0.nmod;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  cr_assert_eq(F0.nmod, nmod + 2, "RTR and RTS");
  cr_assert_eq(F0.mods[nmod].attr.dest_qp_num, fake_peer.qp_num[0]);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_STATE, "connecting twice");
  cr_assert_eq(F0.nsend, 0);
  cr_assert_eq(pp_engine_start(e, 0), PP_OK);
  cr_assert_eq(F0.nsend, c.qp.sq_depth);
  /* after start: the peer is still refused as connected, a stranger still unknown */
  nmod = F0.nmod;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_STATE, "connect after start");
  bad.nchannels = 0;
  cr_assert_eq(pp_engine_connect(e, 0, 1, &bad), PP_STATE, "the state is checked first");
  cr_assert_eq(pp_engine_connect(e, 0, 2, &fake_peer), PP_NOTFOUND);
  cr_assert_eq(F0.nmod, nmod);
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(e, 1, &ci), "local info stays available after start");
  cr_assert_eq(ci.qp_num[0], F0.qps[0].qpn);
  pp_engine_destroy(e);
  check_released(&F0);
  check_no_leaks();
}

Test(engine, receiver_does_not_start_before_connect)
{
  struct pp_engine_cfg c = base_cfg();
  c.rank = 1;
  struct pp_engine *e = create(c, &F1);
  cr_assert_eq(pp_engine_start(e, 0), PP_STATE, "a pure receiver waits for its connection too");
  cr_assert_not(pp_engine_done(e));
  cr_assert_eq(pp_engine_connect(e, 0, 0, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, 0), PP_OK);
  cr_assert_eq(F1.nrecv, c.qp.rq_depth, "start posts nothing more");
  cr_assert_eq(F1.nsend, 0);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, connect_uses_the_scenario_values)
{
  struct pp_scenario sc;
  char err[1024];
  const char *path = PREPOST_MODELS_DIR "/scenarios/rnr-slow-consumer-retry3.yaml";
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK, "%s",
               err);
  struct pp_engine_cfg c = sc.sim.engine;
  /* the values written in the file */
  cr_assert_eq(c.qp.min_rnr_timer, 1);
  cr_assert_eq(c.qp.rnr_retry, 3);
  cr_assert_eq(c.qp.timeout, 14);
  cr_assert_eq(c.qp.retry_cnt, 7);
  cr_assert_eq(c.qp.rq_depth, 8);
  c.rank = 0;
  struct pp_engine *s = create(c, &F0);
  c.rank = 1;
  struct pp_engine *r = create(c, &F1);
  cr_assert_eq(F1.nrecv, 8, "the receiver pre-posts rq_depth = 8 buffers");
  struct pp_conn_info si, ri;
  cr_assert(pp_engine_local_info(s, 1, &si));
  cr_assert(pp_engine_local_info(r, 0, &ri));
  cr_assert_eq(pp_engine_connect(s, 0, 1, &ri), PP_OK);
  cr_assert_eq(pp_engine_connect(r, 0, 0, &si), PP_OK);
  check_connect(&F0, &c.qp, &si, &ri);
  check_connect(&F1, &c.qp, &ri, &si);
  cr_assert_eq(F0.mods[1].attr.min_rnr_timer, 1);
  cr_assert_eq(F0.mods[2].attr.rnr_retry, 3);
  cr_assert_eq(F0.mods[2].attr.timeout, 14);
  cr_assert_eq(F0.mods[2].attr.retry_cnt, 7);
  pp_engine_destroy(s);
  pp_engine_destroy(r);
  check_no_leaks();
}

Test(engine, psn_depends_on_seed_and_rank)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_conn_info a, b, d;
  struct pp_engine *e1 = create(c, &F0), *e2 = create(c, &F1);
  pp_engine_local_info(e1, 1, &a);
  pp_engine_local_info(e2, 1, &b);
  cr_assert_eq(a.psn[0], b.psn[0], "same seed and rank, same PSN");
  pp_engine_destroy(e1);
  pp_engine_destroy(e2);
  c.seed = 2;
  e1 = create(c, &F0);
  pp_engine_local_info(e1, 1, &d);
  cr_assert_neq(a.psn[0], d.psn[0], "another seed, another PSN");
  pp_engine_destroy(e1);
  check_no_leaks();
}

Test(engine, ring_of_four_has_two_qps)
{
  struct pp_engine_cfg c = base_cfg();
  c.nranks = 4;
  c.workload.pattern = PP_PATTERN_RING;
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(F0.nqp, 2);
  cr_assert_eq(F0.nmr, 2, "one send pool, one receive pool");
  unsigned peers = 0;
  for (unsigned i = 0; i < 2; i++)
    peers |= 1u << F0.qps[i].init.peer;
  cr_assert_eq(peers, (1u << 1) | (1u << 3));
  struct pp_conn_info ci;
  cr_assert(pp_engine_local_info(e, 1, &ci));
  cr_assert(pp_engine_local_info(e, 3, &ci));
  cr_assert_not(pp_engine_local_info(e, 2, &ci));
  cr_assert_eq(F0.nrecv, c.qp.rq_depth);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, 0), PP_STATE, "the QP to rank 3 is not connected yet");
  cr_assert_eq(pp_engine_connect(e, 0, 3, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, 0), PP_OK);
  cr_assert_eq(F0.nsend, c.qp.sq_depth);
  for (unsigned i = 0; i < F0.nsend; i++)
    cr_assert_eq(F0.sends[i].qpn, F0.qps[0].init.peer == 1 ? F0.qps[0].qpn : F0.qps[1].qpn,
                 "sends go to the QP of rank 1");
  pp_engine_destroy(e);
  cr_assert_eq(F0.ndestroy, 2);
  cr_assert_eq(F0.ndereg, 2);
  check_released(&F0);
  check_no_leaks();
}

Test(engine, ring_of_two_shares_one_qp)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.pattern = PP_PATTERN_RING;
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(F0.nqp, 1, "sending to and receiving from rank 1: one RC QP");
  cr_assert_eq(F0.nmr, 2);
  cr_assert_eq(F0.nrecv, c.qp.rq_depth);
  pp_engine_destroy(e);
  check_no_leaks();
}

struct create_failure {
  const char *what;
  uint32_t nranks, rank;
  enum pp_pattern pattern;
  unsigned fail_reg_at, fail_qp_at, fail_recv_at;
  enum pp_status status;
  unsigned nqp, nmr, nrecv; /* created / registered / posted before the failure */
};

/* A create failing half-way releases what it had and leaves nothing for the caller to free;
 * under ASan a leak or a double free fails the test too. */
Test(engine, failed_create_releases_everything)
{
  static const struct create_failure cases[] = {
      /* ring of 4, rank 0: 2 QPs (peers 1 and 3), then the send pool, then the receive pool */
      {"2nd reg_mr", 4, 0, PP_PATTERN_RING, 2, 0, 0, PP_PROTECTION, 2, 1, 0},
      {"1st reg_mr", 4, 0, PP_PATTERN_RING, 1, 0, 0, PP_NOMEM, 2, 0, 0},
      {"2nd create_qp", 4, 0, PP_PATTERN_RING, 0, 2, 0, PP_LIMIT, 1, 0, 0},
      {"1st create_qp", 4, 0, PP_PATTERN_RING, 0, 1, 0, PP_IO, 0, 0, 0},
      {"3rd post_recv", 4, 0, PP_PATTERN_RING, 0, 0, 3, PP_IO, 2, 2, 2},
      /* ring of 2: one QP, two pools */
      {"ring of 2, 2nd reg_mr", 2, 0, PP_PATTERN_RING, 2, 0, 0, PP_PROTECTION, 1, 1, 0},
      /* pair receiver: one QP, one pool */
      {"receiver, 1st reg_mr", 2, 1, PP_PATTERN_PAIR, 1, 0, 0, PP_NOMEM, 1, 0, 0},
      {"receiver, 1st post_recv", 2, 1, PP_PATTERN_PAIR, 0, 0, 1, PP_STATE, 1, 1, 0},
      {"receiver, last post_recv", 2, 1, PP_PATTERN_PAIR, 0, 0, 8, PP_IO, 1, 1, 7},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct create_failure *k = &cases[i];
    fake_init(&F0, 0);
    F0.fail_reg_at = k->fail_reg_at;
    F0.fail_qp_at = k->fail_qp_at;
    F0.fail_recv_at = k->fail_recv_at;
    F0.fail_status = k->status;
    struct pp_engine_cfg c = base_cfg();
    c.nranks = k->nranks;
    c.rank = k->rank;
    c.workload.pattern = k->pattern;
    struct pp_engine *e = (struct pp_engine *)&c;
    enum pp_status s = pp_engine_create(&c, &fake_ops, &F0, &e);
    cr_assert_eq(s, k->status, "%s: create returned %s", k->what, pp_status_name(s));
    cr_assert_null(e, "%s", k->what);
    cr_assert_eq(F0.nqp, k->nqp, "%s: %u QPs", k->what, F0.nqp);
    cr_assert_eq(F0.nmr, k->nmr, "%s: %u MRs", k->what, F0.nmr);
    cr_assert_eq(F0.nrecv, k->nrecv, "%s: %u receives", k->what, F0.nrecv);
    check_released(&F0);
    cr_assert_eq(count_calls(&F0, C_POST_SEND), 0);
    check_no_leaks();
  }
  pp_engine_destroy(NULL); /* a no-op */
  check_no_leaks();
}

/* ================================================================ sending */

static void check_send(const struct fake *f, unsigned i, const struct pp_engine_cfg *c,
                       uint64_t seq)
{
  const struct fake_send *s = &f->sends[i];
  cr_assert_eq(s->qpn, f->qps[0].qpn);
  cr_assert_eq(s->wr.opcode, PP_WR_SEND);
  cr_assert(s->wr.send_flags & PP_SEND_SIGNALED, "send %u is unsignalled", i);
  cr_assert_eq(s->wr.num_sge, 1);
  cr_assert_eq(s->wr.sg_list[0].length, c->workload.size);
  cr_assert_eq(s->wr.sg_list[0].lkey, f->mrs[0].mr.lkey);
  uint64_t lo = f->mrs[0].mr.addr, hi = lo + f->mrs[0].mr.length;
  cr_assert(s->wr.sg_list[0].addr >= lo && s->wr.sg_list[0].addr + c->workload.size <= hi);
  cr_assert_eq(sent_seq(s), seq, "send %u carries seq %llu, want %llu", i,
               (unsigned long long)sent_seq(s), (unsigned long long)seq);
  if (c->workload.size <= 64)
    cr_assert_eq(pp_msg_check(s->head, c->workload.size, c->rank, seq), 0,
                 "send %u: payload does not check", i);
}

Test(engine, start_back_to_back_fills_the_send_queue)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, 10 messages */
  struct pp_engine *e = sender(c, 1000);
  cr_assert_eq(F0.nsend, 4);
  for (unsigned i = 0; i < 4; i++)
    check_send(&F0, i, &c, i);
  for (unsigned i = 0; i < 4; i++)
    for (unsigned j = 0; j < i; j++) {
      cr_assert_neq(F0.sends[i].wr.wr_id, F0.sends[j].wr.wr_id);
      cr_assert_neq(F0.sends[i].wr.sg_list[0].addr, F0.sends[j].wr.sg_list[0].addr,
                    "two outstanding sends share a buffer");
    }
  /* the naive protocol's send wr_id: bit 63 | the workload's slot, slots taken 0, 1, 2, 3 */
  for (unsigned i = 0; i < 4; i++) {
    cr_assert_eq(F0.sends[i].wr.wr_id, SEND_WR | i, "send %u: wr_id %#llx", i,
                 (unsigned long long)F0.sends[i].wr.wr_id);
    cr_assert_eq(F0.sends[i].wr.sg_list[0].addr, F0.mrs[0].mr.addr + (uint64_t)i * c.workload.size);
  }
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE, "nothing timed when back to back");
  cr_assert_not(pp_engine_done(e));
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, start_posts_all_messages_when_they_fit)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 16;
  c.workload.messages = 3;
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 3);
  for (unsigned i = 0; i < 3; i++)
    check_send(&F0, i, &c, i);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receiver_of_a_pair_sends_nothing)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nsend, 0);
  cr_assert_eq(count_calls(&F1, C_POST_SEND), 0);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, completions_post_pending_messages_never_exceeding_sq_depth)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, 10 messages */
  struct pp_engine *e = sender(c, 0);
  /* first completion: exactly one more send, in the freed slot */
  uint64_t freed = F0.sends[0].wr.sg_list[0].addr;
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 100), PP_OK);
  cr_assert_eq(F0.nsend, 5);
  check_send(&F0, 4, &c, 4);
  cr_assert_eq(F0.sends[4].wr.sg_list[0].addr, freed, "the freed slot is reused");
  uint64_t now = 100;
  while (F0.send_head < F0.nsend) {
    now += 100;
    cr_assert_not(pp_engine_done(e));
    cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, now), PP_OK);
    cr_assert_leq(F0.outstanding, c.qp.sq_depth);
  }
  cr_assert_eq(F0.nsend, 10, "each message posted exactly once");
  for (unsigned i = 0; i < 10; i++)
    check_send(&F0, i, &c, i);
  cr_assert_eq(F0.max_outstanding, c.qp.sq_depth);
  cr_assert(pp_engine_done(e));
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert(st.done);
  cr_assert_eq(st.messages_sent, 10);
  cr_assert_eq(st.bytes_sent, 10 * c.workload.size);
  cr_assert_eq(st.status_counts[PP_WC_SUCCESS], 10);
  for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
    cr_assert_eq(st.status_counts[k], 0);
  cr_assert_eq(st.messages_received, 0);
  const struct pp_hist *lat = pp_engine_latency_hist(e);
  cr_assert_eq(lat->count, 10);
  /* back to back: every message was submitted at start (0); latency = completion time: one
   * sample in the bucket of each of 100, 200, ... 1000 (distinct buckets: prepost/hist.h) */
  for (unsigned i = 0; i < 10; i++)
    cr_assert_eq(lat->bucket[pp_hist_index(100 * (i + 1))], 1, "sample %u", i);
  cr_assert_eq(st.latency.count, 10);
  cr_assert_eq(st.latency.min, 100);
  cr_assert_eq(st.latency.max, 1000);
  cr_assert_eq(st.latency.p50, 500); /* bucket [500, 501]: its midpoint is 500 */
  cr_assert_eq(st.latency.p99, 1000);
  cr_assert_eq(st.latency.mean, 550);
  /* nothing more happens after the last completion */
  unsigned calls = F0.ncalls;
  cr_assert_eq(pp_engine_on_timer(e, UINT64_MAX - 1), PP_OK);
  cr_assert_eq(F0.ncalls, calls);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, interval_posts_one_then_one_per_timer)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 8;
  c.workload.messages = 3;
  c.workload.interval_ns = 1000;
  struct pp_engine *e = sender(c, 5000);
  cr_assert_eq(F0.nsend, 1);
  check_send(&F0, 0, &c, 0);
  cr_assert_eq(pp_engine_next_deadline(e), 6000);
  unsigned calls = F0.ncalls;
  cr_assert_eq(pp_engine_on_timer(e, 5999), PP_OK);
  cr_assert_eq(F0.ncalls, calls, "an early timer call does nothing");
  cr_assert_eq(pp_engine_on_timer(e, 6000), PP_OK);
  cr_assert_eq(F0.nsend, 2);
  check_send(&F0, 1, &c, 1);
  cr_assert_eq(pp_engine_next_deadline(e), 7000);
  cr_assert_eq(pp_engine_on_timer(e, 7000), PP_OK);
  cr_assert_eq(F0.nsend, 3);
  check_send(&F0, 2, &c, 2);
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE, "every message submitted");
  /* latency runs from the application's submit time (start + seq * interval) */
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 7100), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 7200), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 7300), PP_OK);
  const struct pp_hist *lat = pp_engine_latency_hist(e);
  cr_assert_eq(lat->count, 3);
  cr_assert_eq(lat->bucket[pp_hist_index(7100 - 5000)], 1);
  cr_assert_eq(lat->bucket[pp_hist_index(7200 - 6000)], 1);
  cr_assert_eq(lat->min, 7300 - 7000);
  cr_assert_eq(lat->max, 7100 - 5000);
  cr_assert(pp_engine_done(e));
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, late_timer_catches_up)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 8;
  c.workload.messages = 10;
  c.workload.interval_ns = 1000;
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(pp_engine_on_timer(e, 4500), PP_OK);
  cr_assert_eq(F0.nsend, 5, "submits due at 1000..4000 are all posted");
  for (unsigned i = 0; i < 5; i++)
    check_send(&F0, i, &c, i);
  cr_assert_eq(pp_engine_next_deadline(e), 5000);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, interval_submissions_queue_when_the_send_queue_is_full)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 2;
  c.workload.messages = 6;
  c.workload.interval_ns = 100;
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(pp_engine_on_timer(e, 500), PP_OK);
  cr_assert_eq(F0.nsend, 2, "6 submitted, 2 slots");
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 600), PP_OK);
  cr_assert_eq(F0.nsend, 3);
  check_send(&F0, 2, &c, 2);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 700), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 800), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 900), PP_OK);
  cr_assert_eq(F0.nsend, 6);
  cr_assert_leq(F0.max_outstanding, 2);
  /* queueing time counts: seq k was submitted at 100 k and completed at 600 + 100 k */
  const struct pp_hist *lat = pp_engine_latency_hist(e);
  cr_assert_eq(lat->count, 4);
  cr_assert(lat->min == 600 && lat->max == 600, "%llu..%llu", (unsigned long long)lat->min,
            (unsigned long long)lat->max);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, error_completion_stops_posting_and_flushes_are_counted)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, 10 messages */
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 4);
  cr_assert_eq(complete_send(e, &F0, PP_WC_RNR_RETRY_EXC_ERR, 100), PP_OK);
  cr_assert_eq(F0.nsend, 4, "no post after an error completion");
  cr_assert_not(pp_engine_done(e), "three sends still outstanding");
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(complete_send(e, &F0, PP_WC_WR_FLUSH_ERR, 100), PP_OK);
    cr_assert_eq(F0.nsend, 4, "no post after a flush");
    cr_assert_eq(pp_engine_done(e), i == 2, "done only once every posted WR completed");
  }
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert(st.done);
  cr_assert_eq(st.status_counts[PP_WC_RNR_RETRY_EXC_ERR], 1);
  cr_assert_eq(st.status_counts[PP_WC_WR_FLUSH_ERR], 3);
  cr_assert_eq(st.status_counts[PP_WC_SUCCESS], 0);
  cr_assert_eq(st.messages_sent, 0);
  cr_assert_eq(st.bytes_sent, 0);
  cr_assert_eq(pp_engine_latency_hist(e)->count, 0, "failed sends have no latency");
  cr_assert_eq(st.latency.max, 0);
  cr_assert_eq(st.latency.count, 0);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, error_after_successes_keeps_the_successes)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 10), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 20), PP_OK);
  cr_assert_eq(F0.nsend, 6);
  cr_assert_eq(complete_send(e, &F0, PP_WC_RETRY_EXC_ERR, 30), PP_OK);
  while (F0.send_head < F0.nsend)
    cr_assert_eq(complete_send(e, &F0, PP_WC_WR_FLUSH_ERR, 40), PP_OK);
  cr_assert_eq(F0.nsend, 6);
  cr_assert(pp_engine_done(e));
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_sent, 2);
  cr_assert_eq(st.status_counts[PP_WC_SUCCESS], 2);
  cr_assert_eq(st.status_counts[PP_WC_RETRY_EXC_ERR], 1);
  cr_assert_eq(st.status_counts[PP_WC_WR_FLUSH_ERR], 3);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, error_stops_the_submit_timer)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.interval_ns = 1000;
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 1);
  cr_assert_eq(complete_send(e, &F0, PP_WC_RNR_RETRY_EXC_ERR, 500), PP_OK);
  cr_assert(pp_engine_done(e));
  cr_assert_eq(pp_engine_on_timer(e, 1000), PP_OK);
  cr_assert_eq(F0.nsend, 1, "a failed QP gets no more sends");
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE, "and the submit timer stops");
  pp_engine_destroy(e);
  check_no_leaks();
}

/* Error completions carry no opcode: a receive flushed with an opcode that reads SEND (0, as
 * ibverbs often leaves it) and a send failed with one that reads RECV are still told apart by
 * bit 63 of their wr_id. */
Test(engine, error_completions_are_routed_by_the_wr_id_bit)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, rq_depth 8, 10 messages */
  c.workload.pattern = PP_PATTERN_RING; /* one QP, sends and receives */
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 4);
  cr_assert_eq(F0.nrecv, 8);
  uint32_t qpn = F0.qps[0].qpn;

  /* a receive error is no send completion: no send slot is freed, nothing posted */
  struct pp_wc wc = error_wc(F0.recvs[0].wr.wr_id, PP_WC_WR_FLUSH_ERR, qpn);
  wc.opcode = PP_WC_OP_SEND;
  wc.byte_len = 0;
  cr_assert_eq(pp_engine_on_wc(e, 100, &wc), PP_OK);
  F0.recv_head = 1;
  cr_assert_eq(F0.nsend, 4, "a receive error freed a send slot");
  cr_assert_eq(F0.nrecv, 8, "a failed receive is not re-posted");
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.corrupt, 0);
  cr_assert_eq(st.messages_received, 0);
  /* the send side still works */
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 200), PP_OK);
  cr_assert_eq(F0.nsend, 5);
  check_send(&F0, 4, &c, 4);
  pp_engine_destroy(e);

  /* a send error is no receive completion: the receive side keeps going */
  fake_init(&F0, 0);
  e = sender(c, 0);
  qpn = F0.qps[0].qpn;
  wc = error_wc(F0.sends[0].wr.wr_id, PP_WC_RNR_RETRY_EXC_ERR, qpn);
  wc.opcode = PP_WC_OP_RECV;
  wc.byte_len = c.workload.size;
  cr_assert_eq(pp_engine_on_wc(e, 100, &wc), PP_OK);
  F0.send_head = 1;
  F0.outstanding--;
  cr_assert_eq(F0.nsend, 4, "no post after a send error");
  cr_assert_eq(F0.nrecv, 8);
  pp_engine_stats(e, &st);
  cr_assert_eq(st.corrupt, 0, "a send error was taken for a received message");
  cr_assert_eq(st.messages_sent, 0);
  cr_assert_eq(deliver_msg(e, &F0, 64, 1, 0, 200), PP_OK);
  cr_assert_eq(F0.nrecv, 9, "the receive side is intact: re-posted");
  for (int i = 0; i < 3; i++)
    cr_assert_eq(complete_send(e, &F0, PP_WC_WR_FLUSH_ERR, 300), PP_OK);
  cr_assert_eq(F0.nsend, 4);
  cr_assert_not(pp_engine_done(e), "the sends are over, 9 messages are still to come");
  /* then the receives flush, whatever their garbage opcode says */
  for (unsigned i = 1; i < F0.nrecv; i++) {
    wc = error_wc(F0.recvs[i].wr.wr_id, PP_WC_WR_FLUSH_ERR, qpn);
    wc.opcode = i % 2 ? PP_WC_OP_SEND : PP_WC_OP_RDMA_WRITE;
    cr_assert_eq(pp_engine_on_wc(e, 400, &wc), PP_OK, "receive %u", i);
    cr_assert(pp_engine_done(e), "a receive side that failed is done");
  }
  cr_assert_eq(F0.nrecv, 9);
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_sent, 0);
  cr_assert_eq(st.messages_received, 1);
  cr_assert_eq(st.corrupt, 0);
  cr_assert_eq(st.status_counts[PP_WC_SUCCESS], 1);
  cr_assert_eq(st.status_counts[PP_WC_RNR_RETRY_EXC_ERR], 1);
  cr_assert_eq(st.status_counts[PP_WC_WR_FLUSH_ERR], 3 + 8);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, post_send_again_keeps_the_message_pending)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, 10 messages */
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 4);
  F0.again = 1; /* the NIC refuses the next post */
  enum pp_status s = complete_send(e, &F0, PP_WC_SUCCESS, 100);
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(F0.nsend, 4, "the refused send is not posted");
  cr_assert_eq(s, PP_OK,
               "the completion was consumed; a refused post with sends outstanding is retried at "
               "the next completion, not an error of this completion (got %s)",
               pp_status_name(s));
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 200), PP_OK);
  cr_assert_eq(F0.nsend, 6, "both free slots used at the next completion");
  check_send(&F0, 4, &c, 4);
  check_send(&F0, 5, &c, 5);
  while (F0.send_head < F0.nsend)
    cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 300), PP_OK);
  cr_assert_eq(F0.nsend, 10, "no message lost or duplicated");
  for (unsigned i = 0; i < 10; i++)
    check_send(&F0, i, &c, i);
  cr_assert_leq(F0.max_outstanding, 4);
  cr_assert(pp_engine_done(e));
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, post_send_again_on_timer_is_retried)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 8;
  c.workload.messages = 4;
  c.workload.interval_ns = 1000;
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 1);
  F0.again = 1;
  enum pp_status s = pp_engine_on_timer(e, 1000);
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(F0.nsend, 1, "one attempt per event: no retry within the same timer call");
  cr_assert_eq(s, PP_OK, "seq 0 is outstanding: the refused post is retried (got %s)",
               pp_status_name(s));
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 1500), PP_OK);
  cr_assert_eq(F0.nsend, 2);
  check_send(&F0, 1, &c, 1);
  cr_assert_eq(pp_engine_on_timer(e, 3000), PP_OK);
  cr_assert_eq(F0.nsend, 4);
  check_send(&F0, 2, &c, 2);
  check_send(&F0, 3, &c, 3);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, post_send_again_at_start_is_retried_at_the_next_submit)
{
  struct pp_engine_cfg c = base_cfg();
  c.qp.sq_depth = 8;
  c.workload.messages = 3;
  c.workload.interval_ns = 1000;
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  F0.again = 1;
  cr_assert_eq(pp_engine_start(e, 0), PP_OK, "the submit timer at 1000 will retry");
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(F0.nsend, 0);
  cr_assert_eq(pp_engine_next_deadline(e), 1000);
  cr_assert_not(pp_engine_done(e));
  cr_assert_eq(pp_engine_on_timer(e, 1000), PP_OK);
  cr_assert_eq(F0.nsend, 2, "seq 0 retried, seq 1 submitted");
  check_send(&F0, 0, &c, 0);
  check_send(&F0, 1, &c, 1);
  cr_assert_eq(F0.sends[0].wr.wr_id, SEND_WR | 0, "the refused slot is the one used");
  cr_assert_eq(pp_engine_on_timer(e, 2000), PP_OK);
  cr_assert_eq(F0.nsend, 3);
  check_send(&F0, 2, &c, 2);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 2100), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 2200), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 2300), PP_OK);
  const struct pp_hist *lat = pp_engine_latency_hist(e);
  cr_assert_eq(lat->count, 3);
  cr_assert_eq(lat->max, 2100, "seq 0 was submitted at 0: the wait counts");
  cr_assert_eq(lat->bucket[pp_hist_index(2200 - 1000)], 1);
  cr_assert_eq(lat->min, 2300 - 2000);
  cr_assert(pp_engine_done(e));
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, post_send_again_is_retried_after_a_receive_completion)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, rq_depth 8, 10 messages */
  c.workload.pattern = PP_PATTERN_RING; /* rank 0 sends to and receives from rank 1 */
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  F0.again = 1;
  cr_assert_eq(pp_engine_start(e, 0), PP_OK, "8 receives outstanding: an event will come");
  cr_assert_eq(F0.nsend, 0);
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(deliver_msg(e, &F0, 64, 1, 0, 100), PP_OK);
  cr_assert_eq(F0.nsend, 4, "the receive completion retried the sends");
  for (unsigned i = 0; i < 4; i++)
    check_send(&F0, i, &c, i);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 1);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, post_send_again_with_nothing_to_retry_it_is_an_error)
{
  /* back to back, nothing outstanding, no timer: no event would ever retry the send */
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  F0.again = 1;
  enum pp_status s = pp_engine_start(e, 0);
  cr_assert_eq(s, PP_AGAIN, "got %s", pp_status_name(s));
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(F0.nsend, 0);
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE);
  pp_engine_destroy(e);

  /* the last outstanding send completes and the next post is refused */
  fake_init(&F0, 0);
  c.qp.sq_depth = 1;
  c.workload.messages = 2;
  e = sender(c, 0);
  cr_assert_eq(F0.nsend, 1);
  F0.again = 1;
  s = complete_send(e, &F0, PP_WC_SUCCESS, 100);
  cr_assert_eq(s, PP_AGAIN, "got %s", pp_status_name(s));
  cr_assert_eq(F0.refused, 1);
  cr_assert_eq(F0.nsend, 1);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_sent, 1, "the completion itself was taken");
  cr_assert_not(st.done);
  pp_engine_destroy(e);
  check_no_leaks();
}

/* ================================================================ receiving */

Test(engine, receive_counts_intact_messages_and_reposts_at_once)
{
  struct pp_engine_cfg c = base_cfg(); /* rq_depth 8, 10 messages, size 64 */
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nrecv, 8);
  cr_assert_eq(deliver_msg(e, &F1, c.workload.size, 0, 0, 100), PP_OK);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 1);
  cr_assert_eq(st.bytes_received, c.workload.size);
  cr_assert_eq(st.corrupt, 0);
  cr_assert_eq(st.status_counts[PP_WC_SUCCESS], 1);
  cr_assert_eq(F1.nrecv, 9, "the buffer is re-posted at once");
  cr_assert_eq(F1.recvs[8].wr.sg_list[0].addr, F1.recvs[0].wr.sg_list[0].addr);
  cr_assert_eq(F1.recvs[8].wr.wr_id, F1.recvs[0].wr.wr_id);
  cr_assert_eq(F1.recvs[8].wr.sg_list[0].length, c.workload.size);
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receive_detects_a_corrupted_byte)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = receiver(c, 0);
  uint8_t buf[64];
  pp_msg_fill(buf, 64, 0, 0);
  buf[40] ^= 0x10;
  cr_assert_eq(deliver(e, &F1, buf, 64, PP_WC_SUCCESS, 100), PP_OK);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.corrupt, 1);
  cr_assert_eq(st.messages_received, 0);
  cr_assert_eq(st.bytes_received, 0);
  /* the next message, intact, still counts (seq 1 is expected next) */
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 1, 200), PP_OK);
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 1);
  cr_assert_eq(st.corrupt, 1);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receive_detects_wrong_seq_source_and_length)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = receiver(c, 0);
  uint8_t buf[64];
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 5, 100), PP_OK); /* seq 0 expected */
  cr_assert_eq(deliver_msg(e, &F1, 64, 3, 1, 200), PP_OK); /* from rank 3 */
  pp_msg_fill(buf, 64, 0, 2);
  cr_assert_eq(deliver(e, &F1, buf, 48, PP_WC_SUCCESS, 300), PP_OK); /* short */
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.corrupt, 3);
  cr_assert_eq(st.messages_received, 0);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 3, 400), PP_OK);
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 1);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receiver_posts_no_more_receives_than_messages)
{
  struct pp_engine_cfg c = base_cfg(); /* rq_depth 8 */
  c.workload.messages = 3;
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nrecv, 3, "3 messages to come: 3 receives, not rq_depth");
  for (uint64_t seq = 0; seq < 3; seq++) {
    cr_assert_not(pp_engine_done(e));
    cr_assert_eq(deliver_msg(e, &F1, 64, 0, seq, 100 * (seq + 1)), PP_OK);
    cr_assert_eq(F1.nrecv, 3, "no repost: the receives posted cover every message to come");
  }
  cr_assert(pp_engine_done(e));
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 3);
  cr_assert(st.done);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receiver_done_after_the_last_message_without_repost)
{
  struct pp_engine_cfg c = base_cfg(); /* rq_depth 8, 10 messages */
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nrecv, 8);
  for (uint64_t seq = 0; seq < 10; seq++) {
    cr_assert_not(pp_engine_done(e));
    cr_assert_eq(deliver_msg(e, &F1, 64, 0, seq, 100 * (seq + 1)), PP_OK);
    /* reposts after messages 0 and 1 only: then 8 receives cover the 8 messages to come */
    cr_assert_eq(F1.nrecv, seq < 2 ? 9 + seq : 10, "after seq %llu: %u receives",
                 (unsigned long long)seq, F1.nrecv);
  }
  cr_assert(pp_engine_done(e));
  cr_assert_eq(F1.recv_head, F1.nrecv, "every receive posted was consumed");
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 10);
  cr_assert_eq(st.corrupt, 0);
  cr_assert(st.done);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, receive_flush_ends_the_receiver)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.consume_ns = 1000;
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 0, 100), PP_OK);
  cr_assert_eq(pp_engine_next_deadline(e), 1100);
  cr_assert_eq(deliver(e, &F1, NULL, 0, PP_WC_WR_FLUSH_ERR, 200), PP_OK);
  cr_assert(pp_engine_done(e), "a receiver whose QP failed is done");
  unsigned n = F1.nrecv;
  cr_assert_eq(pp_engine_on_timer(e, 1100), PP_OK);
  cr_assert_eq(F1.nrecv, n, "no repost on a failed QP");
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.status_counts[PP_WC_WR_FLUSH_ERR], 1);
  cr_assert_eq(st.messages_received, 1);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, slow_consumer_reposts_after_consume_ns)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.consume_ns = 50000;
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nrecv, 8);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 0, 1000), PP_OK);
  cr_assert_eq(F1.nrecv, 8, "no repost while the application holds the buffer");
  cr_assert_eq(pp_engine_next_deadline(e), 51000);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 1, 2000), PP_OK);
  cr_assert_eq(pp_engine_next_deadline(e), 51000);
  cr_assert_eq(pp_engine_on_timer(e, 50999), PP_OK);
  cr_assert_eq(F1.nrecv, 8);
  cr_assert_eq(pp_engine_on_timer(e, 51000), PP_OK);
  cr_assert_eq(F1.nrecv, 9, "one buffer back at now + consume_ns");
  cr_assert_eq(F1.recvs[8].wr.sg_list[0].addr, F1.recvs[0].wr.sg_list[0].addr);
  cr_assert_eq(F1.recvs[8].wr.wr_id, F1.recvs[0].wr.wr_id);
  cr_assert_eq(pp_engine_next_deadline(e), 52000);
  cr_assert_eq(pp_engine_on_timer(e, 60000), PP_OK);
  cr_assert_eq(F1.nrecv, 10);
  cr_assert_eq(F1.recvs[9].wr.sg_list[0].addr, F1.recvs[1].wr.sg_list[0].addr);
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 2);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, consume_ranks_selects_the_slow_receivers)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.consume_ns = 50000;
  c.workload.consume_ranks = 1u << 0; /* only rank 0 is slow; rank 1 receives */
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 0, 1000), PP_OK);
  cr_assert_eq(F1.nrecv, 9, "rank 1 is not in the mask: immediate repost");
  cr_assert_eq(pp_engine_next_deadline(e), PP_NO_DEADLINE);
  pp_engine_destroy(e);

  fake_init(&F1, 1);
  c.workload.consume_ranks = 1u << 1;
  e = receiver(c, 0);
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 0, 1000), PP_OK);
  cr_assert_eq(F1.nrecv, 8, "rank 1 is in the mask: held");
  cr_assert_eq(pp_engine_next_deadline(e), 51000);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, bogus_completions_are_rejected)
{
  struct pp_engine_cfg c = base_cfg(); /* sq_depth 4, 10 messages: slots 0..3 outstanding */
  struct pp_engine *e = sender(c, 0);
  cr_assert_eq(F0.nsend, 4);
  unsigned calls = F0.ncalls;
  struct pp_wc wc = {.status = PP_WC_SUCCESS, .opcode = PP_WC_OP_SEND, .qp_num = F0.qps[0].qpn};
  wc.wr_id = SEND_WR | c.qp.sq_depth;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "send slot out of range");
  wc.wr_id = SEND_WR | 1ull << 32;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "a cookie is not truncated to a slot");
  wc.wr_id = SEND_WR | UINT32_MAX;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "the submit timer's number is no slot");
  wc.wr_id = 0;
  wc.opcode = PP_WC_OP_RECV;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "a sender has no receive side");
  wc.wr_id = SEND_WR | 0;
  wc.opcode = PP_WC_OP_SEND;
  wc.qp_num = F0.qps[0].qpn + 1;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "no such QP");
  wc.qp_num = 0;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "QP number 0");
  cr_assert_eq(F0.ncalls, calls, "a rejected completion reaches no backend call");
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_sent, 0);
  cr_assert_eq(st.bytes_sent, 0);
  cr_assert_not(st.done);
  /* the engine is intact: the real completions still work, each slot reused once */
  uint64_t now = 100;
  while (F0.send_head < F0.nsend)
    cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, now += 100), PP_OK);
  cr_assert_eq(F0.nsend, 10);
  for (unsigned i = 0; i < 10; i++)
    check_send(&F0, i, &c, i);
  cr_assert(pp_engine_done(e));
  /* a second completion of the last send: every slot is already free */
  wc.wr_id = F0.sends[9].wr.wr_id;
  wc.qp_num = F0.qps[0].qpn;
  cr_assert_eq(pp_engine_on_wc(e, now, &wc), PP_INVALID, "completed twice");
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_sent, 10);
  cr_assert_eq(F0.nsend, 10);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, bogus_receive_completions_are_rejected)
{
  struct pp_engine_cfg c = base_cfg(); /* rq_depth 8, 10 messages */
  struct pp_engine *e = receiver(c, 0);
  cr_assert_eq(F1.nrecv, 8);
  unsigned calls = F1.ncalls;
  struct pp_wc wc = {.status = PP_WC_SUCCESS,
                     .opcode = PP_WC_OP_RECV,
                     .byte_len = c.workload.size,
                     .qp_num = F1.qps[0].qpn};
  wc.wr_id = c.qp.rq_depth;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "receive slot out of range");
  wc.wr_id = 1ull << 32;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "a cookie is not truncated to a slot");
  wc.wr_id = SEND_WR | 0;
  wc.opcode = PP_WC_OP_SEND;
  cr_assert_eq(pp_engine_on_wc(e, 0, &wc), PP_INVALID, "a receiver has no send side");
  cr_assert_eq(F1.ncalls, calls);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 0);
  cr_assert_eq(st.corrupt, 0);
  /* still expecting seq 0, with its 8 receives posted */
  cr_assert_eq(deliver_msg(e, &F1, 64, 0, 0, 100), PP_OK);
  pp_engine_stats(e, &st);
  cr_assert_eq(st.messages_received, 1);
  cr_assert_eq(st.corrupt, 0);
  cr_assert_eq(F1.nrecv, 9);
  pp_engine_destroy(e);
  check_no_leaks();
}

Test(engine, async_events_are_counted)
{
  struct pp_engine_cfg c = base_cfg();
  struct pp_engine *e = sender(c, 0);
  unsigned calls = F0.ncalls;
  struct pp_async_event ev = {.type = PP_EVENT_QP_FATAL, .qp_num = F0.qps[0].qpn};
  cr_assert_eq(pp_engine_on_async(e, 10, &ev), PP_OK);
  cr_assert_eq(pp_engine_on_async(e, 20, &ev), PP_OK);
  struct pp_rank_stats st;
  pp_engine_stats(e, &st);
  cr_assert_eq(st.async_events, 2);
  cr_assert_eq(F0.ncalls, calls);
  pp_engine_destroy(e);
  check_no_leaks();
}

/* ================================================================ no hidden work */

Test(engine, no_events_no_calls)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.interval_ns = 1000;
  c.workload.consume_ns = 7000;
  c.nranks = 2;
  c.workload.pattern = PP_PATTERN_RING; /* sends and receives */
  struct pp_engine *e = create(c, &F0);
  cr_assert_eq(pp_engine_connect(e, 0, 1, &fake_peer), PP_OK);
  cr_assert_eq(pp_engine_start(e, 0), PP_OK);
  cr_assert_eq(complete_send(e, &F0, PP_WC_SUCCESS, 300), PP_OK);
  cr_assert_eq(deliver_msg(e, &F0, 64, 1, 0, 400), PP_OK);
  uint64_t d = pp_engine_next_deadline(e);
  cr_assert_eq(d, 1000);
  unsigned calls = F0.ncalls;
  /* queries and early timers do nothing, however often they are called */
  for (int i = 0; i < 100; i++) {
    struct pp_rank_stats st;
    struct pp_conn_info ci;
    cr_assert_eq(pp_engine_next_deadline(e), d);
    pp_engine_done(e);
    pp_engine_stats(e, &st);
    pp_engine_latency_hist(e);
    pp_engine_local_info(e, 1, &ci);
    cr_assert_eq(pp_engine_on_timer(e, d - 1), PP_OK);
  }
  cr_assert_eq(F0.ncalls, calls, "%u backend calls without an event", F0.ncalls - calls);
  cr_assert_eq(pp_engine_next_deadline(e), d);
  pp_engine_destroy(e);
  check_no_leaks();
}

/* ================================================================ statistics */

/* ================================================================ message contents */

Test(engine, msg_fill_check_round_trip)
{
  static const uint32_t sizes[] = {16, 17, 23, 24, 25, 31, 32, 64, 100, 4095, 4096};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    uint32_t size = sizes[k];
    uint8_t *buf = malloc(size + 8);
    memset(buf, 0xa5, size + 8);
    pp_msg_fill(buf, size, 3, 77);
    for (int g = 0; g < 8; g++)
      cr_assert_eq(buf[size + g], 0xa5, "size %u: fill wrote past the end", size);
    cr_assert_eq(pp_msg_check(buf, size, 3, 77), 0, "size %u", size);
    cr_assert_neq(pp_msg_check(buf, size, 3, 78), 0, "size %u: wrong seq accepted", size);
    cr_assert_neq(pp_msg_check(buf, size, 2, 77), 0, "size %u: wrong source accepted", size);
    free(buf);
  }
  uint8_t small[15] = {0};
  cr_assert_neq(pp_msg_check(small, 15, 0, 0), 0, "shorter than the header");
}

/* The payload pattern as it is defined (traces and their replays depend on it): the header,
 * then word i (byte offset, host order) = x ^ (x >> 29), x = base(src, seq) ^ i * STEP. */
static void ref_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  uint64_t base = (seq + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(src + 1) * 0xc2b2ae3d27d4eb4full;
  uint64_t hx = base ^ UINT64_MAX * 0x165667b19e3779f9ull;
  uint32_t check = (uint32_t)((hx ^ (hx >> 29)) >> 32);
  memcpy(buf, &seq, 8);
  memcpy(buf + 8, &src, 4);
  memcpy(buf + 12, &check, 4);
  for (uint32_t i = PP_MSG_HEADER; i < size; i += 8) {
    uint64_t x = base ^ (uint64_t)i * 0x165667b19e3779f9ull;
    x ^= x >> 29;
    memcpy(buf + i, &x, size - i < 8 ? size - i : 8);
  }
}

/* The word-pair fill and the block-wise check (engine/workload/stream.c) against the
 * definition, at every size up to 700 bytes and a few larger ones, at any alignment; and the
 * check finds a change of any single byte. */
Test(engine, msg_pattern_matches_definition_and_every_byte_is_checked)
{
  uint8_t *buf = malloc(8192 + 8), *ref = malloc(8192);
  for (uint32_t size = PP_MSG_HEADER; size <= 8192; size = size < 700 ? size + 1 : size * 2 + 3) {
    uint32_t off = size % 8; /* any alignment of the buffer */
    uint64_t seq = 1000003ull * size;
    ref_fill(ref, size, 5, seq);
    pp_msg_fill(buf + off, size, 5, seq);
    cr_assert(memcmp(buf + off, ref, size) == 0, "size %u: not the defined pattern", size);
    cr_assert_eq(pp_msg_check(buf + off, size, 5, seq), 0, "size %u", size);
    for (uint32_t i = 0; i < size; i += size < 700 ? 1 : 61) {
      buf[off + i] ^= 0x10;
      cr_assert_neq(pp_msg_check(buf + off, size, 5, seq), 0, "size %u: byte %u not checked",
                    size, i);
      buf[off + i] ^= 0x10;
    }
  }
  free(buf);
  free(ref);
}

Test(engine, msg_check_detects_any_flipped_byte)
{
  static const uint32_t sizes[] = {16, 29, 100, 4096};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    uint32_t size = sizes[k];
    uint8_t *buf = malloc(size);
    pp_msg_fill(buf, size, 1, 12345);
    for (uint32_t i = 0; i < size; i++) {
      for (int bit = 0; bit < 8; bit += 7) {
        buf[i] ^= (uint8_t)(1u << bit);
        cr_assert_neq(pp_msg_check(buf, size, 1, 12345), 0, "size %u: flip of byte %u bit %d "
                      "undetected", size, i, bit);
        buf[i] ^= (uint8_t)(1u << bit);
      }
    }
    cr_assert_eq(pp_msg_check(buf, size, 1, 12345), 0);
    free(buf);
  }
}

Test(engine, msg_payload_differs_between_messages)
{
  uint8_t a[64], b[64];
  pp_msg_fill(a, 64, 0, 1);
  pp_msg_fill(b, 64, 0, 2);
  cr_assert_neq(memcmp(a + PP_MSG_HEADER, b + PP_MSG_HEADER, 64 - PP_MSG_HEADER), 0,
                "a stale buffer from another message must not check");
  cr_assert_neq(pp_msg_check(a, 64, 0, 2), 0);
  /* header of message 2 on the payload of message 1 */
  memcpy(a, b, PP_MSG_HEADER);
  cr_assert_neq(pp_msg_check(a, 64, 0, 2), 0);
}

/* ================================================================ two engines, end to end */

/* Moves SENDs from F0's log into F1's posted receives (RNR = wait for a repost), completing both
 * sides, and fires both engines' timers, until nothing is left to do. */
static uint64_t run_loopback(struct pp_engine *s, struct pp_engine *r, uint64_t now)
{
  for (int guard = 0; guard < 100000; guard++) {
    bool progress = false;
    while (F0.send_head < F0.nsend && F1.recv_head < F1.nrecv) {
      const struct fake_send *snd = &F0.sends[F0.send_head];
      cr_assert_eq(deliver(r, &F1, (const void *)(uintptr_t)snd->wr.sg_list[0].addr,
                           snd->wr.sg_list[0].length, PP_WC_SUCCESS, now),
                   PP_OK);
      cr_assert_eq(complete_send(s, &F0, PP_WC_SUCCESS, now + 50), PP_OK);
      now += 100;
      progress = true;
    }
    uint64_t d = pp_engine_next_deadline(s), d2 = pp_engine_next_deadline(r);
    d = d < d2 ? d : d2;
    if (d != PP_NO_DEADLINE) {
      now = d > now ? d : now;
      cr_assert_eq(pp_engine_on_timer(s, now), PP_OK);
      cr_assert_eq(pp_engine_on_timer(r, now), PP_OK);
      progress = true;
    }
    if (!progress)
      return now;
  }
  cr_assert_fail("loopback did not settle");
  return now;
}

Test(engine, loopback_slow_consumer_delivers_everything_intact)
{
  struct pp_engine_cfg c = base_cfg();
  c.workload.messages = 50;
  c.workload.size = 1000;
  c.workload.interval_ns = 200;
  c.workload.consume_ns = 5000;
  c.qp.sq_depth = 16;
  c.qp.rq_depth = 4;
  c.rank = 0;
  struct pp_engine *s = create(c, &F0);
  c.rank = 1;
  struct pp_engine *r = create(c, &F1);
  struct pp_conn_info si, ri;
  pp_engine_local_info(s, 1, &si);
  pp_engine_local_info(r, 0, &ri);
  cr_assert_eq(pp_engine_connect(s, 0, 1, &ri), PP_OK);
  cr_assert_eq(pp_engine_connect(r, 0, 0, &si), PP_OK);
  cr_assert_eq(pp_engine_start(s, 0), PP_OK);
  cr_assert_eq(pp_engine_start(r, 0), PP_OK);
  uint64_t end = run_loopback(s, r, 0);
  cr_assert(pp_engine_done(s));
  cr_assert(pp_engine_done(r));
  struct pp_rank_stats ss, rs;
  pp_engine_stats(s, &ss);
  pp_engine_stats(r, &rs);
  cr_assert_eq(ss.messages_sent, 50);
  cr_assert_eq(rs.messages_received, 50);
  cr_assert_eq(rs.corrupt, 0);
  cr_assert_eq(rs.bytes_received, 50 * 1000);
  cr_assert_leq(F0.max_outstanding, 16);
  /* 4 buffers, each held 5 us: the consumer paces the run at ~1.25 us per message */
  cr_assert_geq(end, (50 / 4 - 1) * 5000);
  cr_assert_gt(ss.latency.max, ss.latency.p50, "a backlog builds up behind the slow consumer");
  pp_engine_destroy(s);
  pp_engine_destroy(r);
  check_no_leaks();
}

/* ================================================================ memory estimate */

#if !defined(HAVE_LSAN)
#include <malloc.h>

#include "tests/fakefabric.h"

static struct ff MF;

static uint64_t heap_bytes(void)
{
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/* pp_engine_mem_bytes() against what pp_engine_create() allocates (on the fake fabric, whose own
 * queues are subtracted): never below it (it is what a run is refused on), at most 3x above it
 * plus 128 KiB a rank (it prices every rank as the busiest one: a pair's sender and receiver
 * both pay for the other's buffers). */
static void check_estimate(const struct pp_engine_cfg *c, const char *what)
{
  struct pp_mem_need need;
  pp_engine_mem_need(c, &need);
  uint64_t est = need.bytes * c->nranks;
  cr_assert_not_null(need.biggest, "%s: no largest term named", what);
  uint64_t before = heap_bytes();
  ff_create(&MF, c, 1);
  uint64_t fake = 0;
  for (uint32_t r = 0; r < MF.n; r++) {
    fake += MF.nic[r].cq_cap * sizeof(struct pp_wc);
    uint64_t sw = 0, rw = 0;
    cr_assert_leq(ff_qp_count(&MF, r), need.qps, "%s: rank %u opened %u QPs, estimated %u", what,
                  r, ff_qp_count(&MF, r), need.qps);
    for (uint32_t i = 0; i < ff_qp_count(&MF, r); i++) {
      const struct ff_qp *q = ff_qp_at(&MF, r, i);
      uint32_t rq = q->init.max_recv_wr ? q->init.max_recv_wr : 1;
      fake += q->init.max_send_wr * sizeof(struct ff_wr) + rq * sizeof(struct pp_recv_wr);
      sw += q->init.max_send_wr;
      rw += q->init.max_recv_wr;
    }
    cr_assert_leq(sw, need.send_wqes, "%s: rank %u: %llu send WQEs", what, r,
                  (unsigned long long)sw);
    cr_assert_leq(rw, need.recv_wqes, "%s: rank %u: %llu receive WQEs", what, r,
                  (unsigned long long)rw);
  }
  uint64_t got = heap_bytes() - before - fake;
  ff_fini(&MF);
  cr_assert_geq(est, got, "%s: estimated %llu bytes, created %llu", what,
                (unsigned long long)est, (unsigned long long)got);
  cr_assert_leq(est, 3 * got + c->nranks * (128ull << 10), "%s: estimated %llu bytes, created %llu",
                what, (unsigned long long)est, (unsigned long long)got);
}

Test(engine_mem, estimate_bounds_every_small_model_scenario)
{
  static const char *const names[] = {
      "bench-pair",        "fast-consumer",          "hdr-pair",
      "lossy",             "p2p-script",             "p2p-traffic",
      "parity-rnr",        "ring-allreduce-8-1m",    "ring-slow-rank",
      "rnr-slow-consumer-eager", "rnr-slow-consumer-ring", "rnr-slow-consumer-rndv",
      "rnr-slow-consumer",
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/scenarios/%s.yaml", PREPOST_MODELS_DIR, names[i]);
    static struct pp_scenario sc;
    cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK, "%s",
                 err);
    check_estimate(&sc.sim.engine, names[i]);
  }
}

Test(engine_mem, estimate_follows_the_large_settings)
{
  struct pp_engine_cfg c = base_cfg();
  c.nranks = 4;
  c.workload.pattern = PP_PATTERN_RING;
  c.workload.size = 256 << 10;
  c.qp.sq_depth = 32;
  c.qp.rq_depth = 32;
  struct pp_mem_need need;
  check_estimate(&c, "naive stream, 256 KiB x 64 buffers");
  pp_engine_mem_need(&c, &need);
  cr_assert_not_null(strstr(need.biggest, "qp.sq_depth"), "%s", need.biggest);

  c.protocol = PP_PROTO_RING_CTS;
  *pp_ring_params_of(&c) = (struct pp_ring_params){.slots = 16, .slot_size = 1 << 20, .channels = 2,
                                   .credit_batch = 1};
  check_estimate(&c, "ring-cts, 2 x 16 x 1 MiB slots");
  pp_engine_mem_need(&c, &need);
  cr_assert_not_null(strstr(need.biggest, "ring.slot_size"), "%s", need.biggest);

  c = base_cfg();
  c.nranks = 8;
  c.protocol = PP_PROTO_EAGER;
  c.workload.kind = PP_WORKLOAD_TRAFFIC;
  c.workload.pattern = PP_PATTERN_ALLTOALL;
  c.workload.size = 1024;
  pp_p2p_params_of(&c)->eager_limit = 64 << 10;
  pp_p2p_params_of(&c)->credits = 64;
  check_estimate(&c, "eager alltoall, 64 credits of 64 KiB");
  pp_engine_mem_need(&c, &need);
  cr_assert_not_null(strstr(need.biggest, "p2p.credits"), "%s", need.biggest);
}
#endif
