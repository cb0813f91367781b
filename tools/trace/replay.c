/*
 * prepost replay TRACE: exact replay. Each rank's recorded inputs are fed to a fresh engine whose
 * pp_nic_ops table is a checker: every call the engine makes is compared with the next recorded
 * output of that rank and answered with the recorded result (return value, keys, QP numbers), so
 * the engine runs exactly as it did, without a network. The first difference stops the replay:
 * rank, record number, expected versus produced. Addresses of the engine's own buffers differ
 * from run to run: they are compared relative to their MR.
 *
 * prepost replay TRACE --sim: re-runs the trace's configuration on the simulated backend, with
 * what-if overrides (--set KEY=VALUE).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prepost/dump.h"
#include "prepost/hang.h"
#include "tools/cli/cli_util.h"
#include "tools/report/hang_report.h"
#include "tools/report/report.h"
#include "tools/trace/trace_cli.h"
#include "tools/trace/replay_data.h"
#include "tools/trace/trace_sim.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2, EXIT_STALLED = 3 };

/* ---------------------------------------------------------------- replay state */

struct rp_mr {
  uint32_t lkey, rkey;
  uint64_t rec_addr, len; /* as recorded */
  uint64_t live_addr;     /* the replayed engine's buffer */
  bool snapshotted;       /* remote-writable and small: the trace diffs it before each input */
  bool gone;              /* deregistered */
};

struct rp_wr { /* a work request posted and not completed (for the state dump) */
  uint32_t qpn;
  uint64_t wr_id;
  int send; /* 1 send queue, 0 receive queue, 2 SRQ */
  uint32_t opcode, len;
  uint64_t posted_ns;
};

struct rp_qp {
  uint32_t qpn, peer, srq;
  enum pp_qp_state state;
  uint32_t dest_qpn;       /* the peer's QP (from RTR) */
  enum pp_wc_status error; /* the first error completion on it */
  uint64_t error_ns;
};

struct replay;

/* An application's buffers (P2P records): the replay mirrors each 4 GiB window of the recorded
 * address space that holds one (a reservation of twice that, untouched pages cost nothing), so a
 * buffer sits at the same offset from every other one of its window as it did, and registrations
 * rounded to pages (the registration cache) cover the same buffers as they did. */
#define RP_WINDOW (1ull << 32)
struct rp_buf {
  uint64_t rec; /* the window's recorded base */
  uint8_t *live;
};

struct rp_rank {
  struct replay *R;
  uint32_t rank;
  size_t cur; /* next record of this rank (index into t->rank_recs[rank]) */
  struct pp_engine *e;
  bool destroyed;
  uint64_t now;
  size_t input; /* the input record being replayed */
  struct rp_mr *mrs;
  size_t nmr, mr_cap;
  struct rp_qp *qps;
  size_t nqp, qp_cap;
  struct rp_wr *wrs;
  size_t nwr, wr_cap;
  uint64_t inputs, outputs;
  size_t *mem; /* MEM records waiting for the input they come before (record numbers) */
  size_t nmem, mem_cap;
  struct pp_rank_stats final; /* the engine's statistics right before it was destroyed */
  struct rp_buf *bufs;        /* the application's buffers' windows (P2P records) */
  size_t nbuf, buf_cap;
};

struct replay {
  const struct pp_trace *t;
  struct pp_engine_cfg cfg;
  struct rp_rank *ranks;
  struct rpd *data;      /* the payloads moved between the replayed engines */
  uint64_t snapshot_max; /* trace.snapshot_max */
  bool diverged;
  uint32_t div_rank;
  uint64_t div_index; /* the record expected (or the input being replayed) */
  char expected[1024], produced[1024], context[256];
};

static void diverge(struct rp_rank *k, uint64_t index, const char *expected, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void diverge(struct rp_rank *k, uint64_t index, const char *expected, const char *fmt, ...)
{
  struct replay *R = k->R;
  if (R->diverged)
    return;
  R->diverged = true;
  R->div_rank = k->rank;
  R->div_index = index;
  snprintf(R->expected, sizeof(R->expected), "%s", expected);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(R->produced, sizeof(R->produced), fmt, ap);
  va_end(ap);
  struct pp_trace_rec in;
  if (pp_trace_get(R->t, k->input, &in) == PP_OK)
    snprintf(R->context, sizeof(R->context), "while replaying record %zu (%s at %" PRIu64 " ns)",
             k->input, pp_trace_rec_name(in.type), in.ts);
}

static const char *fmt_rec(const struct pp_trace_rec *r, char *buf, size_t len)
{
  pp_trace_rec_format(r, buf, len);
  return buf;
}

static bool skippable(unsigned type)
{
  return pp_trace_rec_class(type) == PP_TCLASS_NOTE ||
         pp_trace_rec_class(type) == PP_TCLASS_UNKNOWN;
}

/* Skips this rank's notes; the global index of its next record, or SIZE_MAX at its end. */
static size_t peek(struct rp_rank *k)
{
  const struct pp_trace *t = k->R->t;
  while (k->cur < t->rank_nrecs[k->rank] && skippable(t->idx[t->rank_recs[k->rank][k->cur]].type))
    k->cur++;
  return k->cur < t->rank_nrecs[k->rank] ? t->rank_recs[k->rank][k->cur] : SIZE_MAX;
}

static int add_mr(struct rp_rank *k, const struct pp_trace_rec *r, uint64_t live)
{
  if (k->nmr == k->mr_cap) {
    size_t cap = k->mr_cap ? k->mr_cap * 2 : 8;
    struct rp_mr *n = realloc(k->mrs, cap * sizeof(*n));
    if (!n)
      return -1;
    k->mrs = n;
    k->mr_cap = cap;
  }
  k->mrs[k->nmr++] = (struct rp_mr){.lkey = r->u.mr.lkey, .rkey = r->u.mr.rkey,
                                    .rec_addr = r->u.mr.addr, .len = r->u.mr.length,
                                    .live_addr = live,
                                    .snapshotted = (r->u.mr.access & PP_ACCESS_REMOTE_WRITE) &&
                                                   r->u.mr.length > 0 &&
                                                   r->u.mr.length <= k->R->snapshot_max};
  return 0;
}

static const struct rp_mr *mr_of(const struct rp_rank *k, uint32_t key, bool remote)
{
  for (size_t i = 0; i < k->nmr; i++)
    if ((remote ? k->mrs[i].rkey : k->mrs[i].lkey) == key)
      return &k->mrs[i];
  return NULL;
}

/*
 * A live address of this rank's engine in the recorded address space: the same offset from the
 * start of the first-registered MR around it. Not the MR the key names: a registration cache
 * registers whole pages around a buffer, and where a buffer sits in its page depends on the heap,
 * which differs from run to run; the buffer's own registration (the workload's, at creation,
 * before any cache entry) does not. Addresses outside every MR stay as they are.
 */
static uint64_t to_rec(const struct rp_rank *k, uint32_t key, bool remote, uint64_t live)
{
  const struct rp_mr *best = NULL;
  for (size_t i = 0; i < k->nmr && !best; i++) {
    const struct rp_mr *m = &k->mrs[i];
    if (live >= m->live_addr && live - m->live_addr <= m->len)
      best = m;
  }
  if (!best)
    best = mr_of(k, key, remote);
  if (!best || live < best->live_addr || live - best->live_addr > best->len)
    return live;
  return best->rec_addr + (live - best->live_addr);
}

static struct rp_qp *qp_of(struct rp_rank *k, uint32_t qpn)
{
  for (size_t i = 0; i < k->nqp; i++)
    if (k->qps[i].qpn == qpn)
      return &k->qps[i];
  return NULL;
}

/* ---- what the payload mover (replay_data.h) asks */

static bool env_qp(void *ctx, uint32_t rank, uint32_t qpn, uint32_t *peer, uint32_t *dest,
                   uint32_t *srq)
{
  struct replay *R = ctx;
  struct rp_qp *q = rank < R->t->nranks ? qp_of(&R->ranks[rank], qpn) : NULL;
  if (!q)
    return false;
  *peer = q->peer;
  *dest = q->dest_qpn;
  *srq = q->srq;
  return true;
}

static bool mr_holds(const struct rp_mr *m, uint64_t addr, uint64_t len)
{
  return !m->gone && addr >= m->rec_addr && addr - m->rec_addr <= m->len &&
         len <= m->len - (addr - m->rec_addr);
}

/* The recorded address inside the region rkey names, in the replayed engine's memory: through
 * the first-registered region around it, as to_rec() maps the other way. */
static void *env_remote(void *ctx, uint32_t rank, uint32_t rkey, uint64_t addr, uint64_t len,
                        bool *recorded)
{
  struct replay *R = ctx;
  *recorded = false;
  const struct rp_rank *k = rank < R->t->nranks ? &R->ranks[rank] : NULL;
  if (!k || !k->e || k->destroyed)
    return NULL;
  const struct rp_mr *key = NULL;
  for (size_t i = 0; i < k->nmr && !key; i++)
    if (k->mrs[i].rkey == rkey && mr_holds(&k->mrs[i], addr, len))
      key = &k->mrs[i];
  if (!key)
    return NULL; /* not where the key lets a peer write or read */
  *recorded = key->snapshotted;
  for (size_t i = 0; i < k->nmr; i++)
    if (mr_holds(&k->mrs[i], addr, len))
      return (void *)(uintptr_t)(k->mrs[i].live_addr + (addr - k->mrs[i].rec_addr));
  return NULL;
}

static void wr_add(struct rp_rank *k, uint32_t qpn, uint64_t wr_id, int send, uint32_t opcode,
                   const struct pp_sge *sg, uint32_t nsge)
{
  if (k->nwr == k->wr_cap) {
    size_t cap = k->wr_cap ? k->wr_cap * 2 : 64;
    struct rp_wr *n = realloc(k->wrs, cap * sizeof(*n));
    if (!n)
      return;
    k->wrs = n;
    k->wr_cap = cap;
  }
  uint32_t len = 0;
  for (uint32_t i = 0; i < nsge && i < PP_MAX_SGE; i++)
    len += sg[i].length;
  k->wrs[k->nwr++] = (struct rp_wr){qpn, wr_id, send, opcode, len, k->now};
}

/* A completion: the oldest matching outstanding WR leaves (SRQ receives match by wr_id). */
static void wr_done(struct rp_rank *k, const struct pp_wc *wc)
{
  const struct rp_qp *q = qp_of(k, wc->qp_num);
  for (size_t i = 0; i < k->nwr; i++) {
    const struct rp_wr *w = &k->wrs[i];
    bool same_q = w->qpn == wc->qp_num || (w->send == 2 && q && q->srq == w->qpn);
    if (same_q && w->wr_id == wc->wr_id) {
      memmove(&k->wrs[i], &k->wrs[i + 1], (k->nwr - i - 1) * sizeof(*w));
      k->nwr--;
      return;
    }
  }
}

/* The next recorded output of the rank, which must be of `type`; NULL (and the divergence set)
 * when it is not. `produced` describes the call the engine made. */
static bool expect(struct rp_rank *k, unsigned type, struct pp_trace_rec *r, const char *produced)
{
  if (k->R->diverged)
    return false;
  size_t i = peek(k);
  char buf[1024];
  if (i == SIZE_MAX) {
    diverge(k, k->R->t->nrecs, "(the rank's records end here)", "%s", produced);
    return false;
  }
  if (pp_trace_get(k->R->t, i, r) != PP_OK) {
    diverge(k, i, "(a record that does not decode)", "%s", produced);
    return false;
  }
  if (r->type != type) {
    diverge(k, i, fmt_rec(r, buf, sizeof(buf)), "%s", produced);
    return false;
  }
  k->cur++;
  k->outputs++;
  return true;
}

static void mismatch(struct rp_rank *k, const struct pp_trace_rec *r, const char *what,
                     const char *produced)
{
  char buf[1024];
  diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "%s (%s differs)", produced, what);
}

/* ---- the checker ops table */

static int ck_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "reg_mr len %zu access 0x%x", length, access);
  if (!expect(k, PP_TREC_REG_MR, &r, p))
    return PP_INVALID;
  if (r.u.mr.length != length || r.u.mr.access != access) {
    mismatch(k, &r, "length or access", p);
    return PP_INVALID;
  }
  if (r.ret == PP_OK) {
    *mr = (struct pp_mr){.addr = (uint64_t)(uintptr_t)addr, .length = length,
                         .lkey = r.u.mr.lkey, .rkey = r.u.mr.rkey, .access = access};
    if (add_mr(k, &r, (uint64_t)(uintptr_t)addr))
      return PP_NOMEM;
  }
  return r.ret;
}

static int ck_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "dereg_mr lkey 0x%x len %" PRIu64, mr->lkey, mr->length);
  if (!expect(k, PP_TREC_DEREG_MR, &r, p))
    return PP_INVALID;
  if (r.u.mr.lkey != mr->lkey || r.u.mr.length != mr->length)
    mismatch(k, &r, "lkey or length", p);
  for (size_t i = 0; r.ret == PP_OK && i < k->nmr; i++)
    if (k->mrs[i].lkey == mr->lkey && !k->mrs[i].gone) {
      k->mrs[i].gone = true; /* no payload goes there any more */
      break;
    }
  return r.ret;
}

static int ck_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *srq_num)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "create_srq max_wr %u max_sge %u limit %u", a->max_wr, a->max_sge,
           a->srq_limit);
  if (!expect(k, PP_TREC_CREATE_SRQ, &r, p))
    return PP_INVALID;
  if (memcmp(&r.u.srq.attr, a, sizeof(*a)) != 0)
    mismatch(k, &r, "attributes", p);
  *srq_num = r.u.srq.srq_num;
  return r.ret;
}

static int ck_modify_srq(void *nic, uint32_t srq_num, uint32_t limit)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "modify_srq srq %u limit %u", srq_num, limit);
  if (!expect(k, PP_TREC_MODIFY_SRQ, &r, p))
    return PP_INVALID;
  if (r.u.srq.srq_num != srq_num || r.u.srq.attr.srq_limit != limit)
    mismatch(k, &r, "srq or limit", p);
  return r.ret;
}

static int ck_destroy_srq(void *nic, uint32_t srq_num)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "destroy_srq srq %u", srq_num);
  if (!expect(k, PP_TREC_DESTROY_SRQ, &r, p))
    return PP_INVALID;
  if (r.u.srq.srq_num != srq_num)
    mismatch(k, &r, "srq", p);
  return r.ret;
}

static int ck_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qp_num)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "create_qp peer %u srq %u send_wr %u recv_wr %u", a->peer, a->srq_num,
           a->max_send_wr, a->max_recv_wr);
  if (!expect(k, PP_TREC_CREATE_QP, &r, p))
    return PP_INVALID;
  if (memcmp(&r.u.cqp.attr, a, sizeof(*a)) != 0)
    mismatch(k, &r, "attributes", p);
  *qp_num = r.u.cqp.qp_num;
  if (r.ret == PP_OK && k->nqp < 4096) {
    if (k->nqp == k->qp_cap) {
      size_t cap = k->qp_cap ? k->qp_cap * 2 : 8;
      struct rp_qp *n = realloc(k->qps, cap * sizeof(*n));
      if (!n)
        return PP_NOMEM;
      k->qps = n;
      k->qp_cap = cap;
    }
    k->qps[k->nqp++] = (struct rp_qp){.qpn = r.u.cqp.qp_num, .peer = a->peer, .srq = a->srq_num,
                                      .state = PP_QPS_RESET};
  }
  return r.ret;
}

/* The attributes the mask names are equal. */
static bool qp_attr_eq(const struct pp_qp_attr *a, const struct pp_qp_attr *b, unsigned m)
{
  return (!(m & PP_QP_STATE) || a->qp_state == b->qp_state) &&
         (!(m & PP_QP_ACCESS_FLAGS) || a->qp_access_flags == b->qp_access_flags) &&
         (!(m & PP_QP_PATH_MTU) || a->path_mtu == b->path_mtu) &&
         (!(m & PP_QP_TIMEOUT) || a->timeout == b->timeout) &&
         (!(m & PP_QP_RETRY_CNT) || a->retry_cnt == b->retry_cnt) &&
         (!(m & PP_QP_RNR_RETRY) || a->rnr_retry == b->rnr_retry) &&
         (!(m & PP_QP_RQ_PSN) || a->rq_psn == b->rq_psn) &&
         (!(m & PP_QP_MAX_QP_RD_ATOMIC) || a->max_rd_atomic == b->max_rd_atomic) &&
         (!(m & PP_QP_MIN_RNR_TIMER) || a->min_rnr_timer == b->min_rnr_timer) &&
         (!(m & PP_QP_SQ_PSN) || a->sq_psn == b->sq_psn) &&
         (!(m & PP_QP_MAX_DEST_RD_ATOMIC) || a->max_dest_rd_atomic == b->max_dest_rd_atomic) &&
         (!(m & PP_QP_DEST_QPN) || a->dest_qp_num == b->dest_qp_num);
}

static int ck_modify_qp(void *nic, uint32_t qpn, const struct pp_qp_attr *a, unsigned mask)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "modify_qp qp 0x%x mask 0x%x state %s", qpn, mask,
           pp_qp_state_name(a->qp_state));
  if (!expect(k, PP_TREC_MODIFY_QP, &r, p))
    return PP_INVALID;
  if (r.u.mqp.qp_num != qpn || r.u.mqp.mask != mask || !qp_attr_eq(&r.u.mqp.attr, a, mask))
    mismatch(k, &r, "QP, mask or attributes", p);
  struct rp_qp *q = qp_of(k, qpn);
  if (r.ret == PP_OK && q && (mask & PP_QP_STATE))
    q->state = a->qp_state;
  if (r.ret == PP_OK && q && (mask & PP_QP_DEST_QPN))
    q->dest_qpn = a->dest_qp_num;
  return r.ret;
}

static int ck_destroy_qp(void *nic, uint32_t qpn)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[256];
  snprintf(p, sizeof(p), "destroy_qp qp 0x%x", qpn);
  if (!expect(k, PP_TREC_DESTROY_QP, &r, p))
    return PP_INVALID;
  if (r.u.cqp.qp_num != qpn)
    mismatch(k, &r, "QP", p);
  return r.ret;
}

/* sges: same count, lengths, keys, and MR-relative addresses. */
static bool sges_eq(const struct rp_rank *k, const struct pp_sge *rec, const struct pp_sge *live,
                    uint32_t n)
{
  for (uint32_t i = 0; i < n && i < PP_MAX_SGE; i++)
    if (rec[i].length != live[i].length || rec[i].lkey != live[i].lkey ||
        rec[i].addr != to_rec(k, live[i].lkey, false, live[i].addr))
      return false;
  return true;
}

static void fmt_send(const struct rp_rank *k, char *p, size_t len, uint32_t qpn,
                     const struct pp_send_wr *wr)
{
  struct pp_trace_rec fake = {.type = PP_TREC_POST_SEND, .rank = k->rank, .ts = k->now,
                              .index = 0};
  fake.u.send.qp_num = qpn;
  fake.u.send.wr = *wr;
  for (uint32_t i = 0; i < wr->num_sge && i < PP_MAX_SGE; i++)
    fake.u.send.wr.sg_list[i].addr = to_rec(k, wr->sg_list[i].lkey, false, wr->sg_list[i].addr);
  char buf[1024];
  pp_trace_rec_format(&fake, buf, sizeof(buf));
  const char *s = strstr(buf, "post_send");
  snprintf(p, len, "%s", s ? s : buf);
  char *arrow = strstr(p, " -> ");
  if (arrow)
    *arrow = '\0';
}

static int ck_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *wr)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  char p[1024];
  fmt_send(k, p, sizeof(p), qpn, wr);
  if (!expect(k, PP_TREC_POST_SEND, &r, p))
    return PP_INVALID;
  const struct pp_send_wr *e = &r.u.send.wr;
  if (r.u.send.qp_num != qpn || e->wr_id != wr->wr_id || e->opcode != wr->opcode ||
      e->send_flags != wr->send_flags || e->num_sge != wr->num_sge ||
      !sges_eq(k, e->sg_list, wr->sg_list, wr->num_sge) || e->remote_addr != wr->remote_addr ||
      e->rkey != wr->rkey || e->imm_data != wr->imm_data)
    mismatch(k, &r, "the work request", p);
  else if (r.ret == PP_OK) {
    wr_add(k, qpn, wr->wr_id, 1, wr->opcode, wr->sg_list, wr->num_sge);
    if (rpd_post_send(k->R->data, k->rank, qpn, wr))
      diverge(k, r.index, "(memory for the payload)", "out of memory");
  }
  return r.ret;
}

static int check_recv(struct rp_rank *k, unsigned type, uint32_t q, const struct pp_recv_wr *wr)
{
  struct pp_trace_rec r;
  struct pp_trace_rec fake = {.type = type, .rank = k->rank, .ts = k->now};
  fake.u.recv.qp_num = q;
  fake.u.recv.wr = *wr;
  for (uint32_t i = 0; i < wr->num_sge && i < PP_MAX_SGE; i++)
    fake.u.recv.wr.sg_list[i].addr = to_rec(k, wr->sg_list[i].lkey, false, wr->sg_list[i].addr);
  char buf[1024], p[1024];
  pp_trace_rec_format(&fake, buf, sizeof(buf));
  const char *s = strstr(buf, pp_trace_rec_name(type));
  snprintf(p, sizeof(p), "%s", s ? s : buf);
  char *arrow = strstr(p, " -> ");
  if (arrow)
    *arrow = '\0';
  if (!expect(k, type, &r, p))
    return PP_INVALID;
  const struct pp_recv_wr *e = &r.u.recv.wr;
  if (r.u.recv.qp_num != q || e->wr_id != wr->wr_id || e->num_sge != wr->num_sge ||
      !sges_eq(k, e->sg_list, wr->sg_list, wr->num_sge))
    mismatch(k, &r, "the work request", p);
  else if (r.ret == PP_OK) {
    wr_add(k, q, wr->wr_id, type == PP_TREC_POST_RECV ? 0 : 2, 0, wr->sg_list, wr->num_sge);
    if (rpd_post_recv(k->R->data, k->rank, q, type == PP_TREC_POST_SRQ_RECV, wr))
      diverge(k, r.index, "(memory for the receive)", "out of memory");
  }
  return r.ret;
}

static int ck_post_recv(void *nic, uint32_t qpn, const struct pp_recv_wr *wr)
{
  return check_recv(nic, PP_TREC_POST_RECV, qpn, wr);
}

static int ck_post_srq_recv(void *nic, uint32_t srq, const struct pp_recv_wr *wr)
{
  return check_recv(nic, PP_TREC_POST_SRQ_RECV, srq, wr);
}

static int ck_query_counters(void *nic, struct pp_nic_counters *c)
{
  struct rp_rank *k = nic;
  struct pp_trace_rec r;
  if (!expect(k, PP_TREC_QUERY_COUNTERS, &r, "query_counters"))
    return PP_INVALID;
  *c = r.u.ctr;
  return r.ret;
}

static const struct pp_nic_ops checker_ops = {
    .name = "replay",
    .reg_mr = ck_reg_mr,
    .dereg_mr = ck_dereg_mr,
    .create_srq = ck_create_srq,
    .modify_srq = ck_modify_srq,
    .destroy_srq = ck_destroy_srq,
    .create_qp = ck_create_qp,
    .modify_qp = ck_modify_qp,
    .destroy_qp = ck_destroy_qp,
    .post_send = ck_post_send,
    .post_recv = ck_post_recv,
    .post_srq_recv = ck_post_srq_recv,
    .query_counters = ck_query_counters,
};

/* ---------------------------------------------------------------- driving */

/* Bytes the NIC placed: into the replayed engine's buffer at the same MR-relative place. */
static void apply_mem(struct rp_rank *k, const struct pp_trace_rec *r)
{
  const struct rp_mr *m = mr_of(k, r->u.mem.key, false);
  char buf[1024];
  if (!m || r->u.mem.offset > m->len || r->u.mem.len > m->len - r->u.mem.offset) {
    diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)),
            "no registered region of the replayed engine holds these bytes");
    return;
  }
  memcpy((void *)(uintptr_t)(m->live_addr + r->u.mem.offset), r->u.mem.data, r->u.mem.len);
}

static bool conn_eq(const struct rp_rank *k, const struct pp_conn_info *rec,
                    const struct pp_conn_info *live)
{
  if (rec->nchannels != live->nchannels)
    return false;
  for (uint32_t i = 0; i < rec->nchannels && i < PP_MAX_CHANNELS; i++)
    if (rec->qp_num[i] != live->qp_num[i] || rec->psn[i] != live->psn[i])
      return false;
  for (uint32_t i = 0; i < PP_MAX_REGIONS; i++)
    if (rec->region[i].rkey != live->region[i].rkey || rec->region[i].len != live->region[i].len ||
        rec->region[i].addr != to_rec(k, live->region[i].rkey, true, live->region[i].addr))
      return false;
  return true;
}

/* After an input: the rank's next record must not be an output the engine did not make, and a
 * RET record gives the status the call returned. */
static void after_input(struct rp_rank *k, enum pp_status got)
{
  if (k->R->diverged)
    return;
  size_t i = peek(k);
  struct pp_trace_rec r;
  char buf[1024];
  int32_t want = PP_OK;
  if (i != SIZE_MAX && pp_trace_get(k->R->t, i, &r) == PP_OK) {
    if (pp_trace_rec_class(r.type) == PP_TCLASS_OUT) {
      diverge(k, i, fmt_rec(&r, buf, sizeof(buf)), "nothing: the engine returned (%s) without "
              "making this call", pp_status_name(got));
      return;
    }
    if (r.type == PP_TREC_RET) {
      want = r.ret;
      k->cur++;
    }
  }
  if ((int32_t)got != want)
    diverge(k, i == SIZE_MAX ? k->input : i, want == PP_OK ? "the call returns OK" : buf,
            "the call returned %s", pp_status_name(got));
}

/* A MEM record is applied right before the next input of its rank, and after the payload that
 * input's completion stands for was moved: what the NIC placed is the record. */
static void defer_mem(struct rp_rank *k, const struct pp_trace_rec *r)
{
  if (k->nmem == k->mem_cap) {
    size_t cap = k->mem_cap ? k->mem_cap * 2 : 16;
    size_t *n = realloc(k->mem, cap * sizeof(*n));
    if (!n) {
      char buf[1024];
      diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "out of memory");
      return;
    }
    k->mem = n;
    k->mem_cap = cap;
  }
  k->mem[k->nmem++] = r->index;
}

static void apply_deferred(struct rp_rank *k)
{
  for (size_t i = 0; i < k->nmem && !k->R->diverged; i++) {
    struct pp_trace_rec m;
    if (pp_trace_get(k->R->t, k->mem[i], &m) == PP_OK)
      apply_mem(k, &m);
  }
  k->nmem = 0;
}

/* The replay's buffer standing for the recorded [addr, addr + len), NULL when out of memory. */
static void *app_buf(struct rp_rank *k, uint64_t addr, uint32_t len)
{
  (void)len; /* at most 1 GiB: it fits in the window's second half */
  uint64_t base = addr & ~(RP_WINDOW - 1);
  for (size_t i = 0; i < k->nbuf; i++)
    if (k->bufs[i].rec == base)
      return k->bufs[i].live + (addr - base);
  if (k->nbuf == k->buf_cap) {
    size_t cap = k->buf_cap ? k->buf_cap * 2 : 4;
    struct rp_buf *n = realloc(k->bufs, cap * sizeof(*n));
    if (!n)
      return NULL;
    k->bufs = n;
    k->buf_cap = cap;
  }
  void *live = mmap(NULL, 2 * RP_WINDOW, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (live == MAP_FAILED)
    return NULL;
  k->bufs[k->nbuf++] = (struct rp_buf){.rec = base, .live = live};
  return (uint8_t *)live + (addr - base);
}

static bool status_eq(const struct pp_p2p_status *a, const struct pp_p2p_status *b)
{
  return a->source == b->source && a->tag == b->tag && a->ctx == b->ctx && a->len == b->len &&
         a->msg_len == b->msg_len && a->error == b->error && a->proto == b->proto &&
         a->wc_status == b->wc_status && a->done_ns == b->done_ns;
}

/* A P2P call record: the call on the replayed engine (its pp_nic_ops calls checked against the
 * outputs that follow), then its results against the P2P result record after them. */
static void feed_p2p(struct rp_rank *k, const struct pp_trace_rec *r)
{
  const struct pp_trace_p2p *c = &r->u.p2p;
  char buf[1024], got[512];
  if (c->op & PP_TRACE_P2P_RESULT) {
    diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "(the results of no call)");
    return;
  }
  struct pp_trace_p2p res = {.op = c->op | PP_TRACE_P2P_RESULT};
  void *b = NULL;
  if ((c->op <= PP_TP2P_IRECV || c->op == PP_TP2P_MEM_FREE) && !(b = app_buf(k, c->addr, c->len))) {
    diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "out of memory for its buffer");
    return;
  }
  pp_req q = c->req;
  switch (c->op) {
  case PP_TP2P_ISEND:
  case PP_TP2P_ISSEND:
    res.ret = (c->op == PP_TP2P_ISSEND ? pp_p2p_issend : pp_p2p_isend)(
        k->e, r->ts, b, c->len, c->peer, c->tag, c->ctx, c->cookie, &q);
    res.req = res.ret == PP_OK ? q : 0;
    break;
  case PP_TP2P_IRECV:
    res.ret = pp_p2p_irecv(k->e, r->ts, b, c->len, c->peer, c->tag, c->ctx, c->cookie, &q);
    res.req = res.ret == PP_OK ? q : 0;
    break;
  case PP_TP2P_TEST:
    res.ret = pp_p2p_test(k->e, &q, &res.st);
    res.req = q;
    break;
  case PP_TP2P_IPROBE:
    res.ret = pp_p2p_iprobe(k->e, c->peer, c->tag, c->ctx, &res.st);
    break;
  case PP_TP2P_CANCEL:
    res.ret = pp_p2p_cancel(k->e, r->ts, q);
    res.req = q;
    break;
  case PP_TP2P_MEM_FREE:
    res.ret = (int32_t)pp_p2p_mem_free(k->e, b, c->len);
    break;
  default:
    diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "(a p2p call this build does not know)");
    return;
  }
  if (k->R->diverged)
    return;
  bool boolean = c->op == PP_TP2P_TEST || c->op == PP_TP2P_IPROBE;
  if (!(boolean && res.ret))
    res.st = (struct pp_p2p_status){0};
  struct pp_trace_rec w;
  size_t i = peek(k);
  struct pp_trace_rec fake = {.type = PP_TREC_P2P, .rank = k->rank, .ts = r->ts, .u.p2p = res};
  fmt_rec(&fake, got, sizeof(got));
  if (i == SIZE_MAX || pp_trace_get(k->R->t, i, &w) != PP_OK) {
    diverge(k, r->index, "(the call's results)", "%s, but the trace ends", got);
    return;
  }
  if (pp_trace_rec_class(w.type) == PP_TCLASS_OUT) {
    diverge(k, i, fmt_rec(&w, buf, sizeof(buf)), "nothing: the call returned without making this "
            "call (%s)", got);
    return;
  }
  const struct pp_trace_p2p *x = &w.u.p2p;
  if (w.type != PP_TREC_P2P || x->op != res.op || x->ret != res.ret || x->req != res.req ||
      !status_eq(&x->st, &res.st)) {
    diverge(k, i, fmt_rec(&w, buf, sizeof(buf)), "%s", got);
    return;
  }
  k->cur++;
}

static void feed(struct rp_rank *k, const struct pp_trace_rec *r)
{
  struct replay *R = k->R;
  if (r->type != PP_TREC_MEM) {
    if (r->type == PP_TREC_WC && k->e && !k->destroyed)
      rpd_wc(R->data, k->rank, &r->u.wc);
    apply_deferred(k);
  }
  k->input = r->index;
  k->now = r->ts;
  k->inputs++;
  char buf[1024];
  enum pp_status s = PP_OK;
  switch (r->type) {
  case PP_TREC_CREATE: {
    if (k->e) {
      diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "a second create for this rank");
      return;
    }
    struct pp_engine_cfg c = R->cfg;
    c.rank = k->rank;
    if (c.workload.kind == PP_WORKLOAD_APP) { /* the program's calls are the P2P records */
      struct pp_app_callbacks cb;
      pp_app_callbacks_default(&cb);
      s = pp_engine_create_app(&c, &checker_ops, k, &cb, NULL, &k->e);
    } else {
      s = pp_engine_create(&c, &checker_ops, k, &k->e);
    }
    break;
  }
  case PP_TREC_MEM:
    defer_mem(k, r);
    return;
  case PP_TREC_RET:
    diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "(a status with no call before it)");
    return;
  default:
    if (!k->e || k->destroyed) {
      diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "no engine: it was %s",
              k->e ? "destroyed" : "never created");
      return;
    }
  }
  switch (r->type) {
  case PP_TREC_LOCAL_INFO: {
    struct pp_conn_info info = {0};
    bool ok = pp_engine_local_info(k->e, r->u.conn.peer, &info);
    if (ok != (bool)r->u.conn.ok || (ok && !conn_eq(k, &r->u.conn.info, &info)))
      diverge(k, r->index, fmt_rec(r, buf, sizeof(buf)), "local_info peer %u -> %s, qp 0x%x",
              r->u.conn.peer, ok ? "true" : "false", info.qp_num[0]);
    return; /* a query: no status */
  }
  case PP_TREC_CONNECT:
    s = pp_engine_connect(k->e, r->ts, r->u.conn.peer, &r->u.conn.info);
    break;
  case PP_TREC_START:
    s = pp_engine_start(k->e, r->ts);
    break;
  case PP_TREC_WC: {
    wr_done(k, &r->u.wc);
    struct rp_qp *q = qp_of(k, r->u.wc.qp_num);
    if (q && r->u.wc.status != PP_WC_SUCCESS) {
      q->state = PP_QPS_ERR; /* an error completion: the QP is in ERROR */
      if (!q->error) {
        q->error = r->u.wc.status;
        q->error_ns = r->ts;
      }
    }
    s = pp_engine_on_wc(k->e, r->ts, &r->u.wc);
    break;
  }
  case PP_TREC_ASYNC: {
    struct rp_qp *q = qp_of(k, r->u.ev.qp_num);
    if (q && (r->u.ev.type == PP_EVENT_QP_FATAL || r->u.ev.type == PP_EVENT_QP_REQ_ERR ||
              r->u.ev.type == PP_EVENT_QP_ACCESS_ERR))
      q->state = PP_QPS_ERR;
    s = pp_engine_on_async(k->e, r->ts, &r->u.ev);
    break;
  }
  case PP_TREC_TIMER:
    s = pp_engine_on_timer(k->e, r->ts);
    break;
  case PP_TREC_P2P:
    feed_p2p(k, r);
    return;
  case PP_TREC_DESTROY:
    pp_engine_stats(k->e, &k->final);
    pp_engine_destroy(k->e);
    k->destroyed = true;
    break;
  default:
    break;
  }
  after_input(k, s);
}

/* ---------------------------------------------------------------- state dump */

static void dump_rank(FILE *out, struct rp_rank *k)
{
  fprintf(out, "rank %u: %" PRIu64 " inputs and %" PRIu64 " outputs replayed, time %" PRIu64
          " ns\n", k->rank, k->inputs, k->outputs, k->now);
  if (!k->e || k->destroyed) {
    fprintf(out, "  engine: %s\n", k->e ? "destroyed" : "not created yet");
    return;
  }
  struct pp_rank_stats st;
  pp_engine_stats(k->e, &st);
  uint64_t dl = pp_engine_next_deadline(k->e);
  fprintf(out, "  engine: done %s, next deadline %s", st.done ? "yes" : "no",
          dl == PP_NO_DEADLINE ? "none" : "");
  if (dl != PP_NO_DEADLINE)
    fprintf(out, "%" PRIu64 " ns (in %" PRId64 " ns)", dl, (int64_t)(dl - k->now));
  fprintf(out, "\n  sent %" PRIu64 " received %" PRIu64 " corrupt %" PRIu64 " async %" PRIu64
          "; completions:", st.messages_sent, st.messages_received, st.corrupt,
          st.async_events);
  for (int s = 0; s < PP_WC_STATUS_COUNT; s++)
    if (st.status_counts[s])
      fprintf(out, " %s=%" PRIu64, pp_wc_status_name((enum pp_wc_status)s), st.status_counts[s]);
  fputc('\n', out);
  for (size_t i = 0; i < k->nqp; i++) {
    const struct rp_qp *q = &k->qps[i];
    uint64_t ns = 0, nr = 0, oldest = UINT64_MAX;
    for (size_t j = 0; j < k->nwr; j++) {
      const struct rp_wr *w = &k->wrs[j];
      if (w->qpn != q->qpn || w->send == 2)
        continue;
      if (w->send)
        ns++;
      else
        nr++;
      if (w->send && w->posted_ns < oldest)
        oldest = w->posted_ns;
    }
    fprintf(out, "  qp 0x%x -> rank %u: %s, %" PRIu64 " sends outstanding, %" PRIu64
            " receives posted", q->qpn, q->peer, pp_qp_state_name(q->state), ns, nr);
    if (q->srq)
      fprintf(out, " (srq %u)", q->srq);
    if (oldest != UINT64_MAX)
      fprintf(out, ", oldest send posted %" PRIu64 " ns ago", k->now - oldest);
    fputc('\n', out);
    uint64_t shown = 0;
    for (size_t j = 0; j < k->nwr && shown < 8; j++) {
      const struct rp_wr *w = &k->wrs[j];
      if (w->qpn != q->qpn || !w->send)
        continue;
      fprintf(out, "    send wr_id 0x%" PRIx64 " %s len %u posted at %" PRIu64 " ns\n", w->wr_id,
              pp_wr_opcode_name((enum pp_wr_opcode)w->opcode), w->len, w->posted_ns);
      shown++;
    }
    if (ns > shown)
      fprintf(out, "    ... %" PRIu64 " more\n", ns - shown);
  }
  char *buf = malloc(1 << 16);
  if (buf) {
    size_t n = pp_engine_dump(k->e, buf, 1 << 16);
    if (n)
      fprintf(out, "%s%s", buf, buf[strlen(buf) - 1] == '\n' ? "" : "\n");
    free(buf);
  }
}

/* ---------------------------------------------------------------- hang report */

static struct rp_qp *peer_qp(struct replay *R, const struct rp_qp *q)
{
  if (q->peer >= R->t->nranks)
    return NULL;
  return qp_of(&R->ranks[q->peer], q->dest_qpn);
}

static size_t posted_recvs(const struct rp_rank *k, const struct rp_qp *q)
{
  size_t n = 0;
  for (size_t j = 0; j < k->nwr; j++)
    n += (k->wrs[j].send == 0 && k->wrs[j].qpn == q->qpn) ||
         (k->wrs[j].send == 2 && q->srq && k->wrs[j].qpn == q->srq);
  return n;
}

static bool has_qp_error(const struct pp_wait *w, size_t n, uint32_t peer)
{
  for (size_t i = 0; i < n; i++)
    if (w[i].kind == PP_WAIT_QP_ERROR && w[i].peer == peer)
      return true;
  return false;
}

static size_t outstanding_sends(const struct rp_rank *k)
{
  size_t n = 0;
  for (size_t j = 0; j < k->nwr; j++)
    n += k->wrs[j].send == 1;
  return n;
}

/* What the trace says about a rank's QPs (states, outstanding sends, the peer's posted
 * receives), added to what its replayed engine says it waits for. */
static size_t trace_waits(struct replay *R, struct rp_rank *k, struct pp_wait *w, size_t n,
                          size_t max)
{
  size_t eng = n < max ? n : max;
  for (size_t i = 0; i < k->nqp; i++) {
    struct rp_qp *q = &k->qps[i];
    if (q->state == PP_QPS_ERR) {
      if (!has_qp_error(w, eng, q->peer))
        pp_wait_add(w, max, &n, PP_WAIT_QP_ERROR, q->peer, PP_WAIT_NOTAG, q->error_ns,
                    "qp 0x%x to rank %u is in ERROR since %" PRIu64 " ns (%s): nothing more "
                    "moves on it", q->qpn, q->peer, q->error_ns, pp_wc_status_name(q->error));
      continue;
    }
    size_t ns = 0;
    uint64_t oldest = UINT64_MAX;
    for (size_t j = 0; j < k->nwr; j++)
      if (k->wrs[j].send == 1 && k->wrs[j].qpn == q->qpn) {
        ns++;
        oldest = k->wrs[j].posted_ns < oldest ? k->wrs[j].posted_ns : oldest;
      }
    if (!ns)
      continue;
    struct rp_qp *pq = peer_qp(R, q);
    if (pq && posted_recvs(&R->ranks[q->peer], pq) == 0)
      pp_wait_add(w, max, &n, PP_WAIT_SEND_WC, q->peer, PP_WAIT_NOTAG, oldest,
                  "%zu sends on qp 0x%x wait for rank %u to post a receive (it has none on qp "
                  "0x%x: RNR)", ns, q->qpn, q->peer, pq->qpn);
    else
      pp_wait_add(w, max, &n, PP_WAIT_SEND_WC, q->peer, PP_WAIT_NOTAG, oldest,
                  "%zu sends on qp 0x%x to rank %u wait for their acknowledgement", ns, q->qpn,
                  q->peer);
  }
  return n;
}

/*
 * Why the ranks that are not done are stuck, from the state the replay reached: each replayed
 * engine's pending operations (prepost/hang.h) and what the trace says about its QPs; a rank
 * whose engine got no input for the second half of the run is silent (frozen or dead: what it
 * waits for says nothing). Then the wait-for graph, its cycle and the cause (engine/core/hang.c).
 */
static int hang_report(FILE *o, struct replay *R, bool json)
{
  const struct pp_trace *t = R->t;
  struct pp_hang h;
  if (pp_hang_init(&h, t->nranks) != PP_OK)
    return EXIT_USAGE;
  h.trigger = PP_HANG_TRIGGER_REPLAY;
  h.clock = PP_HANG_CLOCK_TRACE;
  uint64_t end = 0;
  for (uint32_t r = 0; r < t->nranks; r++)
    end = R->ranks[r].now > end ? R->ranks[r].now : end;
  h.at_ns = end;
  struct pp_wait w[PP_HANG_MAX_WAITS];
  for (uint32_t r = 0; r < t->nranks; r++) {
    struct rp_rank *k = &R->ranks[r];
    if (!k->e || k->destroyed) {
      pp_hang_set_rank(&h, r, PP_HANG_DONE, 0, NULL, 0);
      continue;
    }
    size_t n = pp_engine_pending(k->e, w, PP_HANG_MAX_WAITS);
    if (pp_engine_done(k->e)) { /* its QPs in ERROR stay: the cause may be there */
      pp_hang_set_rank(&h, r, PP_HANG_DONE, 0, w, n);
      continue;
    }
    n = trace_waits(R, k, w, n, PP_HANG_MAX_WAITS);
    /* silent: no input for the second half of the run although sends of its own are
     * outstanding (their completions wait in its NIC: nobody polls them) */
    bool silent = end > 0 && k->now < end / 2 && outstanding_sends(k);
    pp_hang_set_rank(&h, r, silent ? PP_HANG_SILENT : PP_HANG_STUCK, k->now, w, n);
  }
  pp_hang_analyze(&h);
  if (json) {
    fprintf(o, "{\"hang\": ");
    pp_hang_json(o, &h);
    fprintf(o, "}\n");
  } else {
    pp_hang_print(o, &h);
    /* what prepost mpirun reported when it recorded (TEXT records, 2.1): the MPI-level view */
    bool head = false;
    for (size_t i = 0; i < t->nrecs; i++) {
      struct pp_trace_rec x;
      if (t->idx[i].type != PP_TREC_TEXT || pp_trace_get(t, i, &x) != PP_OK ||
          x.u.text.kind != PP_TTEXT_MPI_REPORT)
        continue;
      if (!head)
        fputs("recorded by prepost mpirun:\n", o);
      head = true;
      fprintf(o, "  %.*s\n", (int)x.u.text.len, x.u.text.data);
    }
  }
  int rc = h.stuck ? EXIT_STALLED : EXIT_OK;
  pp_hang_free(&h);
  return rc;
}

/* ---------------------------------------------------------------- the command */

const char *const pp_replay_usage =
    "usage: prepost replay TRACE [--until N] [--at T] [--rank R] [--partial] [--quiet]\n"
    "       prepost replay TRACE --hang [--json] [--partial]\n"
    "       prepost replay TRACE --sim [--set KEY=VALUE]... [--json] [--log FILE]\n"
    "                                  [--trace FILE [--trace-packets]]\n"
    "       prepost replay TRACE --sim --list-keys\n"
    "       prepost replay -h|--help\n"
    "\n"
    "Exact mode (default): feeds each rank's recorded inputs to a fresh engine and checks that\n"
    "it makes exactly the recorded calls (addresses compared relative to their MR); stops at\n"
    "the first divergence and names the rank, the record and what was expected and produced.\n"
    "  --until N   stop before record N (trace dump numbers them) and dump the engines' state:\n"
    "              QP states, outstanding work requests, the protocol's queues and credits\n"
    "  --at T      stop before the first input after simulated time T (a duration with its\n"
    "              unit: 250us, 1.5ms) and dump the state (past the end: the state the run\n"
    "              ended in)\n"
    "  --rank R    dump only rank R\n"
    "  --partial   replay a trace cut short (no END chunk)\n"
    "  --hang      replay to the end of the run and explain why ranks are not done: QPs in\n"
    "              ERROR, sends waiting for a receive (RNR) or an ACK, ranks waiting for a\n"
    "              message, the wait-for graph between ranks and its cycle (--json: a \"hang\"\n"
    "              object); then each stuck rank's state. Exit 3 when a rank is stuck\n"
    "\n"
    "--sim: runs the trace's configuration again on the simulated backend, with what-ifs:\n"
    "  --set KEY=VALUE   override one key: as a scenario writes it (qp.rnr_retry=7,\n"
    "                    p2p.eager_limit=8KiB, ring.slot_size=64KiB, nic.line_rate=25Gbps,\n"
    "                    platform.cluster.latency=2us: `prepost help keys`), a\n"
    "                    header key (engine.qp.rnr_retry=7, sim.nic.mtu=2048) or short\n"
    "                    (rnr_retry=7, messages=100, loss=0.01, seed=3); --list-keys\n"
    "  --json, --trace FILE, --trace-packets, --log FILE as for `prepost run` (the new trace\n"
    "                    has every packet also when TRACE had them)\n"
    "\n"
    "Exit codes: exact mode 0 the replay matched the trace, 1 it diverged, 2 usage or unreadable\n"
    "trace; --hang 3 when a rank is stuck; --sim as for `prepost run` (0 completed, 1 errors,\n"
    "3 stalled/timeout).\n";

static int usage(const char *fmt, const char *arg)
{
  return pp_cli_usage_error("prepost", pp_replay_usage, fmt, arg);
}

/* What the payloads say after a replay: receives whose bytes the replay could not move, and a
 * rank whose replayed statistics differ from the recorded end of the run. */
static void data_notes(struct replay *R)
{
  struct rpd_stats ds;
  rpd_stats(R->data, &ds);
  if (ds.no_sender)
    printf("note: %" PRIu64 " receives had no replayed sender (a rank missing from the trace): "
           "beyond the bytes the trace holds, their payload is not known and may count as "
           "corrupt\n", ds.no_sender);
  for (uint32_t r = 0; r < R->t->nranks; r++) {
    struct rp_rank *k = &R->ranks[r];
    struct pp_trace_rec e;
    size_t i = SIZE_MAX; /* the rank's end of run: its last RANK_END record */
    for (size_t j = R->t->rank_nrecs[r]; j-- > 0 && i == SIZE_MAX;)
      if (R->t->idx[R->t->rank_recs[r][j]].type == PP_TREC_RANK_END)
        i = R->t->rank_recs[r][j];
    if (!k->e || i == SIZE_MAX || pp_trace_get(R->t, i, &e) != PP_OK)
      continue;
    struct pp_rank_stats st = k->final;
    if (!k->destroyed)
      pp_engine_stats(k->e, &st);
    if (st.messages_received != e.u.end.messages_received || st.corrupt != e.u.end.corrupt)
      printf("note: rank %u: replayed %" PRIu64 " received, %" PRIu64 " corrupt; the run "
             "recorded %" PRIu64 " and %" PRIu64 "\n", r, st.messages_received, st.corrupt,
             e.u.end.messages_received, e.u.end.corrupt);
  }
}

static int replay_exact(const struct pp_trace *t, uint64_t until, uint64_t at, uint64_t only,
                        bool quiet, bool hang, bool json)
{
  struct replay R = {.t = t};
  char note[512];
  if (pp_trace_engine_cfg(t, &R.cfg, note, sizeof(note)) != PP_OK) {
    fprintf(stderr, "prepost: %s\n", note);
    return EXIT_USAGE;
  }
  if (note[0])
    fprintf(stderr, "prepost: warning: %s\n", note);
  const struct pp_trace_kv *snap = pp_trace_kv_find(t, "trace.snapshot_max");
  R.snapshot_max = snap && snap->type == PP_TKV_U64 ? snap->u : 0;
  R.ranks = calloc(t->nranks ? t->nranks : 1, sizeof(*R.ranks));
  R.data = rpd_create(t->nranks, (struct rpd_env){.ctx = &R, .qp = env_qp, .remote = env_remote});
  if (!R.ranks || !R.data) {
    fprintf(stderr, "prepost: out of memory\n");
    free(R.ranks);
    rpd_free(R.data);
    return EXIT_USAGE;
  }
  for (uint32_t r = 0; r < t->nranks; r++)
    R.ranks[r] = (struct rp_rank){.R = &R, .rank = r};
  size_t i = 0;
  bool stopped = false;
  for (; i < t->nrecs && !R.diverged; i++) {
    const struct pp_trace_idx *x = &t->idx[i];
    if (i >= until || (pp_trace_rec_class(x->type) == PP_TCLASS_IN && x->ts > at) ||
        (x->type == PP_TREC_DESTROY && (at != UINT64_MAX || hang))) {
      stopped = true;
      break;
    }
    struct rp_rank *k = &R.ranks[x->rank];
    size_t next = peek(k);
    if (next == SIZE_MAX || next > i)
      continue; /* a note, or an output consumed while its input ran */
    struct pp_trace_rec r;
    char buf[1024];
    if (pp_trace_get(t, i, &r) != PP_OK) {
      diverge(k, i, "(a record that does not decode)", "-");
      break;
    }
    if (pp_trace_rec_class(r.type) != PP_TCLASS_IN) {
      k->input = i;
      diverge(k, i, fmt_rec(&r, buf, sizeof(buf)), "nothing: no input of this rank was running");
      break;
    }
    k->cur++;
    feed(k, &r);
  }
  int rc = EXIT_OK;
  if (hang && !R.diverged) {
    rc = hang_report(stdout, &R, json);
    quiet = true;
  } else if (R.diverged) {
    printf("replay diverged at rank %u, record %" PRIu64 " %s\n  expected: %s\n  produced: %s\n",
           R.div_rank, R.div_index, R.context, R.expected, R.produced);
    rc = EXIT_ERRORS;
  } else if (!quiet) {
    uint64_t in = 0, out = 0;
    for (uint32_t r = 0; r < t->nranks; r++) {
      in += R.ranks[r].inputs;
      out += R.ranks[r].outputs;
    }
    if (stopped)
      printf("replay stopped before record %zu: %" PRIu64 " inputs and %" PRIu64
             " outputs matched so far\n", i, in, out);
    else
      printf("replay matched: %u ranks, %zu records, %" PRIu64 " inputs, %" PRIu64
             " outputs\n", t->nranks, t->nrecs, in, out);
    data_notes(&R);
  }
  if ((stopped || R.diverged || until != UINT64_MAX || at != UINT64_MAX) && !(hang && json))
    for (uint32_t r = 0; r < t->nranks; r++)
      if (only == UINT64_MAX || only == r)
        dump_rank(stdout, &R.ranks[r]);
  for (uint32_t r = 0; r < t->nranks; r++) {
    struct rp_rank *k = &R.ranks[r];
    if (k->e && !k->destroyed) {
      /* destroying calls dereg_mr/destroy_qp: answer them without checking */
      R.diverged = true;
      pp_engine_destroy(k->e);
    }
    free(k->mrs);
    free(k->qps);
    free(k->wrs);
    free(k->mem);
    for (size_t j = 0; j < k->nbuf; j++)
      munmap(k->bufs[j].live, 2 * RP_WINDOW);
    free(k->bufs);
  }
  free(R.ranks);
  rpd_free(R.data);
  return rc;
}

static int replay_sim(const struct pp_trace *t, char **sets, int nsets, bool list, bool json,
                      const char *trace_out, bool packets, const char *log_path)
{
  static struct pp_sim_config cfg;
  bool tmp = false;
  char note[512], err[1024];
  if (pp_trace_sim_cfg(t, &cfg, &tmp, note, sizeof(note)) != PP_OK) {
    fprintf(stderr, "prepost: %s\n", note);
    return EXIT_USAGE;
  }
  if (note[0])
    fprintf(stderr, "prepost: warning: %s\n", note);
  int rc = EXIT_OK;
  for (int i = 0; i < nsets; i++)
    if (pp_trace_sim_cfg_set(&cfg, sets[i], err, sizeof(err)) != PP_OK) {
      fprintf(stderr, "prepost: --set %s: %s\n", sets[i], err);
      rc = EXIT_USAGE;
      goto out;
    }
  if (list) {
    pp_trace_sim_cfg_print(stdout, &cfg);
    goto out;
  }
  FILE *log = NULL;
  if (log_path && !(log = strcmp(log_path, "-") ? fopen(log_path, "w") : stderr)) {
    fprintf(stderr, "prepost: cannot write log '%s': %s\n", log_path, strerror(errno));
    rc = EXIT_USAGE;
    goto out;
  }
  struct pp_cli_trace *tr = NULL;
  const struct pp_trace_kv *ver = pp_trace_kv_find(t, "prepost.version");
  packets = packets || pp_trace_packets(t) == PP_TRACE_PACKETS_ALL;
  if (trace_out && !(tr = pp_cli_trace_start(trace_out, &cfg, ver ? ver->s : "?", packets, err,
                                             sizeof(err)))) {
    fprintf(stderr, "prepost: %s\n", err);
    if (log && log != stderr)
      fclose(log);
    rc = EXIT_USAGE;
    goto out;
  }
  struct pp_run_result res;
  enum pp_status s = pp_sim_run(&cfg, log, &res, err, sizeof(err));
  if (log && log != stderr)
    fclose(log);
  char terr[512];
  if (tr && pp_cli_trace_end(tr, terr, sizeof(terr)) && s == PP_OK)
    fprintf(stderr, "prepost: %s\n", terr);
  if (s != PP_OK) {
    fprintf(stderr, "prepost: replay --sim: %s\n", err);
    rc = EXIT_USAGE;
    goto out;
  }
  if (json)
    pp_report_json(stdout, &cfg, &res);
  else
    pp_report_table(stdout, &cfg, &res);
  rc = res.outcome == PP_OUTCOME_COMPLETED ? EXIT_OK
       : res.outcome == PP_OUTCOME_ERRORS  ? EXIT_ERRORS
                                           : EXIT_STALLED;
  pp_run_result_free(&res);
out:
  if (tmp)
    unlink(cfg.platform.file);
  return rc;
}

int pp_cli_replay(int argc, char **argv)
{
  const char *path = NULL, *trace_out = NULL, *log_path = NULL;
  uint64_t until = UINT64_MAX, at = UINT64_MAX, only = UINT64_MAX;
  bool sim = false, list = false, json = false, quiet = false, hang = false, packets = false;
  unsigned flags = 0;
  char **sets = calloc((size_t)argc + 1, sizeof(*sets));
  int nsets = 0;
  if (!sets)
    return EXIT_USAGE;
  int rc = -1, c;
  enum { R_SIM = 256, R_HANG, R_LIST, R_JSON, R_PACKETS, R_QUIET, R_PARTIAL, R_UNTIL, R_AT,
         R_RANK, R_SET, R_TRACE, R_LOG };
  static const struct option opts[] = {{"sim", no_argument, NULL, R_SIM},
                                       {"hang", no_argument, NULL, R_HANG},
                                       {"list-keys", no_argument, NULL, R_LIST},
                                       {"json", no_argument, NULL, R_JSON},
                                       {"trace-packets", no_argument, NULL, R_PACKETS},
                                       {"quiet", no_argument, NULL, R_QUIET},
                                       {"partial", no_argument, NULL, R_PARTIAL},
                                       {"until", required_argument, NULL, R_UNTIL},
                                       {"at", required_argument, NULL, R_AT},
                                       {"rank", required_argument, NULL, R_RANK},
                                       {"set", required_argument, NULL, R_SET},
                                       {"trace", required_argument, NULL, R_TRACE},
                                       {"log", required_argument, NULL, R_LOG},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = opts,
                          .who = "prepost", .usage = pp_replay_usage};
  while (rc < 0 && (c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      rc = EXIT_USAGE;
      break;
    case 'h':
      fputs(pp_replay_usage, stdout);
      rc = EXIT_OK;
      break;
    case R_SIM:
      sim = true;
      break;
    case R_HANG:
      hang = true;
      break;
    case R_LIST:
      list = true;
      break;
    case R_JSON:
      json = true;
      break;
    case R_PACKETS:
      packets = true;
      break;
    case R_QUIET:
      quiet = true;
      break;
    case R_PARTIAL:
      flags |= PP_TRACE_PARTIAL;
      break;
    case R_SET:
      sets[nsets++] = (char *)g.arg;
      break;
    case R_TRACE:
      trace_out = g.arg;
      break;
    case R_LOG:
      log_path = g.arg;
      break;
    case R_AT:
      if (pp_cli_opt_duration(&g, 0, UINT64_MAX, &at))
        rc = EXIT_USAGE;
      break;
    default:
      if (pp_cli_opt_uint(&g, 0, UINT64_MAX, c == R_UNTIL ? &until : &only))
        rc = EXIT_USAGE;
    }
  }
  if (rc < 0 && g.rest + 1 < argc)
    rc = usage("one trace at a time (extra argument '%s')", argv[g.rest + 1]);
  else if (rc < 0 && g.rest < argc)
    path = argv[g.rest];
  if (rc < 0 && !path)
    rc = usage("%s", "missing TRACE");
  if (rc < 0 && !sim && (nsets || list || (json && !hang) || trace_out || packets ||
                      log_path))
    rc = usage("%s", "--set, --list-keys, --trace and --log go with --sim, --json with --sim "
                     "or --hang");
  if (rc < 0 && packets && !trace_out)
    rc = usage("%s", "--trace-packets goes with --trace");
  if (rc < 0 && sim && hang)
    rc = usage("%s", "--hang explains a trace: not with --sim");
  if (rc < 0 && sim && (until != UINT64_MAX || at != UINT64_MAX || only != UINT64_MAX))
    rc = usage("%s", "--until, --at and --rank go with exact replay, not --sim");
  if (rc >= 0) {
    free(sets);
    return rc;
  }
  struct pp_trace_file f;
  char err[1024];
  if (pp_trace_file_load(path, flags, &f, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s\n", err);
    free(sets);
    return EXIT_USAGE;
  }
  if (only != UINT64_MAX && only >= f.t.nranks) {
    fprintf(stderr, "prepost: --rank %" PRIu64 ": the trace has %u ranks\n", only, f.t.nranks);
    rc = EXIT_USAGE;
  } else if (sim) {
    rc = replay_sim(&f.t, sets, nsets, list, json, trace_out, packets, log_path);
  } else {
    rc = replay_exact(&f.t, until, at, only, quiet, hang, json);
  }
  pp_trace_file_free(&f);
  free(sets);
  return rc;
}
