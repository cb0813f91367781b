#include "prepost/engine.h"
#include "prepost/names.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/app.h"
#include "prepost/p2p.h"

static const char *const patterns[] = {
#define PP_X(id, name, desc) [PP_PATTERN_##id] = name,
    PP_PATTERN_LIST(PP_X)
#undef PP_X
};

const char *pp_pattern_name(enum pp_pattern p)
{
  return pp_name_of(patterns, PP_PATTERN_COUNT, p);
}

int pp_pattern_from_name(const char *name)
{
  return pp_name_index(patterns, PP_PATTERN_COUNT, name);
}

int pp_workload_dest(const struct pp_workload *w, uint32_t rank, uint32_t nranks)
{
  if (nranks < 2 || rank >= nranks)
    return -1;
  switch (w->pattern) {
  case PP_PATTERN_PAIR:
    return rank % 2 == 0 && rank + 1 < nranks ? (int)rank + 1 : -1;
  case PP_PATTERN_RING:
    return (int)((rank + 1) % nranks);
  default:
    return -1;
  }
}

int pp_workload_source(const struct pp_workload *w, uint32_t rank, uint32_t nranks)
{
  if (nranks < 2 || rank >= nranks)
    return -1;
  switch (w->pattern) {
  case PP_PATTERN_PAIR:
    return rank % 2 == 1 ? (int)rank - 1 : -1;
  case PP_PATTERN_RING:
    return (int)((rank + nranks - 1) % nranks);
  default:
    return -1;
  }
}

/* "'traffic'" or "'a' or 'b'": the workloads that take pattern alltoall */
static const char *alltoall_workloads(void)
{
  static char buf[128];
  size_t n = 0;
  const struct pp_workload_def *d;
  for (uint32_t k = 0; (d = pp_workload_get(k)) && n < sizeof buf; k++)
    if (d->alltoall)
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%s'%s'", n ? " or " : "", d->name);
  return n ? buf : "(none)";
}

enum pp_status pp_engine_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_qp_params *q = &c->qp;
  const struct pp_workload *w = &c->workload;
  CHECK(c->nranks >= 1 && c->nranks <= PP_MAX_RANKS, "ranks must be 1..%u, got %u",
        PP_MAX_RANKS, c->nranks);
  CHECK(c->rank < c->nranks, "rank %u out of 0..%u", c->rank, c->nranks - 1);
  const struct pp_proto_def *pd = pp_proto_get(c->protocol);
  const struct pp_workload_def *wd = pp_workload_get((uint32_t)w->kind);
  CHECK(pd, "unknown protocol %d", (int)c->protocol);
  CHECK(wd, "unknown workload %d", (int)w->kind);
  CHECK((unsigned)w->pattern < PP_PATTERN_COUNT, "unknown pattern %d", (int)w->pattern);
  CHECK(w->pattern != PP_PATTERN_PAIR || c->nranks % 2 == 0 || wd->pair_odd,
        "pattern 'pair' needs an even number of ranks, got %u", c->nranks);
  CHECK(c->nranks >= 2, "a workload needs at least 2 ranks, got %u", c->nranks);
  /* the app workload's program sends what it likes: pattern, messages and size are not its */
  bool app = w->kind == PP_WORKLOAD_APP;
  CHECK(app || (w->messages >= 1 && w->messages <= PP_MAX_MESSAGES),
        "messages must be 1..%u, got %u", PP_MAX_MESSAGES, w->messages);
  CHECK(app || (w->size >= PP_MSG_HEADER && w->size <= PP_MAX_MSG_SIZE),
        "message size must be %u..%u bytes, got %u", PP_MSG_HEADER, PP_MAX_MSG_SIZE, w->size);
  CHECK(q->min_rnr_timer <= 31, "min_rnr_timer must be 0..31, got %u", q->min_rnr_timer);
  CHECK(q->rnr_retry <= 7, "rnr_retry must be 0..7, got %u", q->rnr_retry);
  CHECK(q->timeout <= 31, "timeout must be 0..31, got %u", q->timeout);
  CHECK(q->retry_cnt <= 7, "retry_cnt must be 0..7, got %u", q->retry_cnt);
  CHECK(q->max_rd_atomic >= 1, "max_rd_atomic must be >= 1");
  CHECK(pp_mtu_from_bytes(q->mtu) != 0, "mtu must be 256, 512, 1024, 2048 or 4096, got %u",
        q->mtu);
  CHECK(q->sq_depth >= 1 && q->sq_depth <= PP_MAX_QUEUE_DEPTH, "sq_depth must be 1..%u, got %u",
        PP_MAX_QUEUE_DEPTH, q->sq_depth);
  CHECK(q->rq_depth >= 1 && q->rq_depth <= PP_MAX_QUEUE_DEPTH, "rq_depth must be 1..%u, got %u",
        PP_MAX_QUEUE_DEPTH, q->rq_depth);
  uint64_t pool = ((uint64_t)q->sq_depth + q->rq_depth) * w->size;
  CHECK(pool <= (1ull << 32), "buffer pools (sq_depth + rq_depth) * size = %llu bytes exceed 4 GiB",
        (unsigned long long)pool);
  /* the protocol's own parameters: the bounds of its field table, then its check */
  const void *prm = pp_engine_cfg_proto_params_c(c);
  if (pd->nparams && pp_params_check(pd->params, pd->nparams, prm, err, errlen) != PP_OK)
    return PP_INVALID;
  if (pd->check && pd->check(c, prm, err, errlen) != PP_OK)
    return PP_INVALID;
  if (wd->check && wd->check(c, err, errlen) != PP_OK)
    return PP_INVALID;
  CHECK(w->pattern != PP_PATTERN_ALLTOALL || wd->alltoall,
        "pattern 'alltoall' is only for workload %s", alltoall_workloads());
  return PP_OK;
}

/* ------------------------------------------------------------------ memory estimate */

void pp_mem_add(struct pp_mem_need *m, uint64_t bytes, const char *what)
{
  m->bytes += bytes;
  if (bytes > m->biggest_bytes) {
    m->biggest_bytes = bytes;
    m->biggest = what;
  }
}

/* The engine, then the protocol's terms (its hook), then the workload's, the latency histogram
 * and the allocator's rounding: the first largest term names `biggest`. */
void pp_engine_mem_need(const struct pp_engine_cfg *cfg, struct pp_mem_need *out)
{
  const struct pp_proto_def *pd = pp_proto_get(cfg->protocol);
  const struct pp_workload_def *wd = pp_workload_get((uint32_t)cfg->workload.kind);
  struct pp_mem_need app = {0};
  uint32_t npeers = 0;
  uint64_t lat = 0;
  if (wd)
    wd->mem_need(cfg, &app, &npeers, &lat);
  if (npeers > cfg->nranks - 1)
    npeers = cfg->nranks - 1;
  npeers = npeers < PP_MAX_PEERS ? npeers : PP_MAX_PEERS;
  *out = (struct pp_mem_need){.qps = npeers,
                              .send_wqes = (uint64_t)npeers * cfg->qp.sq_depth,
                              .recv_wqes = (uint64_t)npeers * cfg->qp.rq_depth};
  pp_mem_add(out, sizeof(struct pp_engine) + ((uint64_t)cfg->qp.rq_depth * 2 + 64) *
                                               sizeof(struct pp_timer), "the engine");
  if (pd && pd->mem_need)
    pd->mem_need(cfg, pp_engine_cfg_proto_params_c(cfg), npeers, out);
  out->bytes += app.bytes;
  if (app.biggest_bytes > out->biggest_bytes) {
    out->biggest_bytes = app.biggest_bytes;
    out->biggest = app.biggest;
  }
  pp_mem_add(out, lat ? sizeof(struct pp_hist) : 0, "the latency histogram");
  pp_mem_add(out, 16 * 4096, "the allocator's rounding"); /* a page per large buffer */
}

enum pp_status pp_engine_add_peer(struct pp_engine *e, uint32_t peer)
{
  for (uint32_t i = 0; i < e->npeers; i++)
    if (e->peers[i] == peer)
      return PP_OK;
  if (e->npeers == PP_MAX_PEERS)
    return PP_LIMIT;
  e->peers[e->npeers++] = peer;
  return PP_OK;
}

void pp_engine_latency(struct pp_engine *e, uint64_t ns)
{
  if (e->lat)
    pp_hist_record(e->lat, ns);
}

enum pp_status pp_app_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st)
{
  e->finished++;
  return e->appops->send_done(e, now, cookie, st);
}

enum pp_status pp_app_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len)
{
  e->finished++;
  return e->appops->recv_done(e, now, cookie, st, src, tag, len);
}


static int peer_index(const struct pp_engine *e, uint32_t peer);

/* The first failure of the connection to peers[i] goes to the workload, once. */
static void peer_failed(struct pp_engine *e, uint64_t now, int i, const struct pp_peer_failure *f)
{
  if (i < 0 || e->peer_down[i])
    return;
  e->peer_down[i] = true;
  if (e->appops->peer_failed)
    e->appops->peer_failed(e, now, f);
}

static int qp_index(const struct pp_engine *e, uint32_t qpn)
{
  for (uint32_t i = 0; i < e->nqps; i++)
    if (e->qps[i].qpn == qpn)
      return (int)i;
  return -1;
}

enum pp_status pp_engine_reg(struct pp_engine *e, void *buf, size_t len, unsigned access,
                             struct pp_mr *mr)
{
  return (enum pp_status)e->ops->reg_mr(e->nic, buf, len, access, mr);
}

void pp_engine_dereg(struct pp_engine *e, const struct pp_mr *mr)
{
  if (mr->lkey)
    (void)e->ops->dereg_mr(e->nic, mr); /* teardown: a failure leaves nothing to undo */
}

enum pp_status pp_engine_qp_open(struct pp_engine *e, uint32_t peer, uint32_t srq_num,
                                 uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t *qpn,
                                 uint32_t *psn)
{
  struct pp_qp_init_attr ia = {
      .srq_num = srq_num,
      .max_send_wr = max_send_wr,
      .max_recv_wr = srq_num ? 0 : max_recv_wr,
      .max_send_sge = 1,
      .max_recv_sge = 1,
      .peer = peer,
  };
  enum pp_status s = (enum pp_status)e->ops->create_qp(e->nic, &ia, qpn);
  if (s != PP_OK)
    return s;
  if (e->nqps < PP_MAX_QPS) /* peers x channels: never more */
    e->qps[e->nqps++] = (struct pp_qp_seen){.qpn = *qpn, .peer = peer};
  struct pp_qp_attr init = {
      .qp_state = PP_QPS_INIT,
      .qp_access_flags = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ,
  };
  *psn = (uint32_t)pp_prng_below(&e->prng, 1u << 24);
  return (enum pp_status)e->ops->modify_qp(e->nic, *qpn, &init, PP_QP_STATE | PP_QP_ACCESS_FLAGS);
}

enum pp_status pp_engine_qp_connect(struct pp_engine *e, uint32_t qpn, uint32_t psn,
                                    uint32_t remote_qpn, uint32_t remote_psn)
{
  const struct pp_qp_params *q = &e->cfg.qp;
  struct pp_qp_attr rtr = {
      .qp_state = PP_QPS_RTR,
      .path_mtu = pp_mtu_from_bytes(q->mtu),
      .dest_qp_num = remote_qpn,
      .rq_psn = remote_psn,
      .max_dest_rd_atomic = q->max_rd_atomic,
      .min_rnr_timer = q->min_rnr_timer,
  };
  enum pp_status s = (enum pp_status)e->ops->modify_qp(
      e->nic, qpn, &rtr,
      PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN | PP_QP_MAX_DEST_RD_ATOMIC |
          PP_QP_MIN_RNR_TIMER);
  if (s != PP_OK)
    return s;
  struct pp_qp_attr rts = {
      .qp_state = PP_QPS_RTS,
      .sq_psn = psn,
      .timeout = q->timeout,
      .retry_cnt = q->retry_cnt,
      .rnr_retry = q->rnr_retry,
      .max_rd_atomic = q->max_rd_atomic,
  };
  return (enum pp_status)e->ops->modify_qp(e->nic, qpn, &rts,
                                           PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT |
                                               PP_QP_RETRY_CNT | PP_QP_RNR_RETRY |
                                               PP_QP_MAX_QP_RD_ATOMIC);
}

enum pp_status pp_engine_push_timer(struct pp_engine *e, uint64_t deadline,
                                    enum pp_timer_owner owner, uint32_t arg)
{
  return pp_timerq_push(&e->timers, deadline, owner, arg);
}

enum pp_status pp_engine_create(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                void *nic, struct pp_engine **out)
{
  return pp_engine_create_with(cfg, ops, nic, NULL, out);
}

enum pp_status pp_engine_create_with(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                     void *nic, const void *app_arg, struct pp_engine **out)
{
  char err[256];
  *out = NULL;
  if (!pp_nic_ops_complete(ops) || pp_engine_cfg_check(cfg, err, sizeof(err)) != PP_OK)
    return PP_INVALID;
  struct pp_engine *e = calloc(1, sizeof(*e));
  if (!e)
    return PP_NOMEM;
  e->cfg = *cfg;
  e->ops = ops;
  e->nic = nic;
  e->proto = pp_proto_get(cfg->protocol)->ops; /* both known: checked above */
  e->appops = pp_workload_get((uint32_t)cfg->workload.kind)->ops;
  e->app_arg = app_arg;
  pp_prng_seed(&e->prng, pp_seed_derive(cfg->seed, PP_SEED_ENGINE, cfg->rank));
  enum pp_status s = pp_timerq_init(&e->timers, cfg->qp.rq_depth * 2 + 64);
  if (s == PP_OK)
    s = e->appops->plan(e);
  if (s == PP_OK && e->lat_cap && !(e->lat = malloc(sizeof(*e->lat))))
    s = PP_NOMEM;
  if (s == PP_OK && e->lat)
    pp_hist_reset(e->lat);
  if (s == PP_OK)
    s = e->proto->create(e);
  if (s == PP_OK)
    s = e->appops->create(e);
  if (s != PP_OK) {
    pp_engine_destroy(e);
    return s;
  }
  *out = e;
  return PP_OK;
}

void pp_engine_destroy(struct pp_engine *e)
{
  if (!e)
    return;
  if (e->appops)
    e->appops->destroy(e);
  if (e->proto)
    e->proto->destroy(e);
  pp_timerq_fini(&e->timers);
  free(e->lat);
  free(e);
}

static int peer_index(const struct pp_engine *e, uint32_t peer)
{
  for (uint32_t i = 0; i < e->npeers; i++)
    if (e->peers[i] == peer)
      return (int)i;
  return -1;
}

static bool is_peer(const struct pp_engine *e, uint32_t peer)
{
  return peer_index(e, peer) >= 0;
}

bool pp_engine_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out)
{
  return is_peer(e, peer) && e->proto->local_info(e, peer, out);
}

enum pp_status pp_engine_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                 const struct pp_conn_info *remote)
{
  int i = peer_index(e, peer);
  if (i < 0)
    return PP_NOTFOUND;
  if (e->started || e->connected[i])
    return PP_STATE;
  if (remote->nchannels < 1 || remote->nchannels > PP_MAX_CHANNELS)
    return PP_INVALID;
  enum pp_status s = e->proto->connect(e, now, peer, remote);
  if (s == PP_OK)
    e->connected[i] = true;
  return s;
}

enum pp_status pp_engine_start(struct pp_engine *e, uint64_t now)
{
  if (e->started)
    return PP_STATE;
  for (uint32_t i = 0; i < e->npeers; i++)
    if (!e->connected[i])
      return PP_STATE;
  e->started = true;
  e->start_ns = now;
  return e->appops->start(e, now);
}

/* A completion in error: the QP's first error is kept (hang reports) and, once the protocol
 * has seen it (a violation it found first is the reason), the peer's failure is told. Out of
 * line: inlined, its failure record on the stack made every completion's frame bigger. */
static __attribute__((noinline)) enum pp_status on_wc_error(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  int q = qp_index(e, wc->qp_num);
  bool first = q >= 0 && e->qps[q].error == PP_WC_SUCCESS;
  if (first) {
    e->qps[q].error = (uint8_t)wc->status;
    e->qps[q].error_ns = now;
  }
  enum pp_status s = e->proto->on_wc(e, now, wc);
  if (s != PP_OK)
    return s;
  if (first)
    peer_failed(e, now, peer_index(e, e->qps[q].peer),
                &(struct pp_peer_failure){.peer = e->qps[q].peer,
                                          .kind = PP_PEER_FAIL_QP_ERROR,
                                          .wc_status = (uint8_t)wc->status,
                                          .qp_num = wc->qp_num,
                                          .at_ns = now});
  return e->appops->pump(e, now);
}

enum pp_status pp_engine_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  if (wc->status != PP_WC_SUCCESS) {
    if ((unsigned)wc->status < PP_WC_STATUS_COUNT)
      e->st.status_counts[wc->status]++;
    return on_wc_error(e, now, wc);
  }
  e->st.status_counts[PP_WC_SUCCESS]++;
  enum pp_status s = e->proto->on_wc(e, now, wc);
  if (s != PP_OK)
    return s;
  return e->appops->pump(e, now);
}

enum pp_status pp_engine_on_async(struct pp_engine *e, uint64_t now,
                                  const struct pp_async_event *ev)
{
  e->st.async_events++;
  int q = ev->type == PP_EVENT_QP_FATAL ? qp_index(e, ev->qp_num) : -1;
  if (q >= 0)
    peer_failed(e, now, peer_index(e, e->qps[q].peer),
                &(struct pp_peer_failure){.peer = e->qps[q].peer,
                                          .kind = PP_PEER_FAIL_QP_FATAL,
                                          .qp_num = ev->qp_num,
                                          .at_ns = now});
  if (e->appops->async_event)
    e->appops->async_event(e, now, ev);
  if (!e->proto->on_async)
    return PP_OK;
  enum pp_status s = e->proto->on_async(e, now, ev);
  if (s != PP_OK || !e->started)
    return s;
  return e->appops->pump(e, now);
}

enum pp_status pp_engine_on_timer(struct pp_engine *e, uint64_t now)
{
  struct pp_timer t;
  while (pp_timerq_pop_due(&e->timers, now, &t)) {
    enum pp_status s = t.kind == PP_TIMER_APP     ? e->appops->on_timer(e, now, t.arg)
                       : t.kind == PP_TIMER_PROTO ? e->proto->on_timer(e, now, t.arg)
                                                  : PP_INVALID;
    if (s != PP_OK)
      return s;
  }
  return e->appops->pump(e, now);
}

uint64_t pp_engine_next_deadline(const struct pp_engine *e)
{
  return pp_timerq_next(&e->timers);
}

bool pp_engine_done(const struct pp_engine *e)
{
  return e->started && e->appops->done(e) && e->proto->quiet(e);
}

void pp_engine_stats(const struct pp_engine *e, struct pp_rank_stats *out)
{
  *out = e->st;
  out->done = pp_engine_done(e);
  if (e->lat)
    pp_hist_summarize(e->lat, &out->latency);
  else
    out->latency = (struct pp_hist_summary){0};
}

void pp_engine_counts(const struct pp_engine *e, struct pp_rank_stats *out)
{
  *out = e->st;
  out->done = pp_engine_done(e);
  out->latency = (struct pp_hist_summary){0};
}

const struct pp_hist *pp_engine_latency_hist(const struct pp_engine *e)
{
  return e->lat;
}

/* ---------------------------------------------------------------- for protocols */

const struct pp_engine_cfg *pp_engine_config(const struct pp_engine *e)
{
  return &e->cfg;
}

const void *pp_engine_proto_params(const struct pp_engine *e)
{
  return pp_engine_cfg_proto_params_c(&e->cfg);
}

void *pp_engine_proto_state(const struct pp_engine *e)
{
  return e->ps;
}

void pp_engine_set_proto_state(struct pp_engine *e, void *state)
{
  e->ps = state;
}

uint32_t pp_engine_npeers(const struct pp_engine *e)
{
  return e->npeers;
}

uint32_t pp_engine_peer(const struct pp_engine *e, uint32_t i)
{
  assert(i < e->npeers);
  return e->peers[i];
}

struct pp_prng *pp_engine_prng(struct pp_engine *e)
{
  return &e->prng;
}

const struct pp_nic_ops *pp_engine_nic_ops(const struct pp_engine *e)
{
  return e->ops;
}

void *pp_engine_nic(const struct pp_engine *e)
{
  return e->nic;
}

bool pp_engine_proto_bug(const struct pp_engine *e, unsigned i)
{
#ifdef PREPOST_NO_TEST_BUGS
  (void)e, (void)i;
  return false;
#else
  return i < PP_PROTO_MAX_BUGS && (e->cfg.test_bugs >> (PP_PROTO_BUG_SHIFT + i) & 1u);
#endif
}

/* ---------------------------------------------------------------- untrusted peers */

static const char *const violation_names[] = {
#define PP_X(id, name, desc) [PP_VF_##id] = name,
    PP_VIOLATION_LIST(PP_X)
#undef PP_X
};

static const char *const violation_descs[] = {
#define PP_X(id, name, desc) [PP_VF_##id] = desc,
    PP_VIOLATION_LIST(PP_X)
#undef PP_X
};

const char *pp_violation_field_name(enum pp_violation_field f)
{
  return pp_name_of(violation_names, PP_VF_COUNT, f);
}

const char *pp_violation_field_desc(enum pp_violation_field f)
{
  return (unsigned)f < PP_VF_COUNT ? violation_descs[f] : "?";
}

void pp_violation_text(const struct pp_violation *v, char *buf, size_t len)
{
  snprintf(buf, len, "%.*s from rank %u: %s %llu, %s %llu (%s)", (int)sizeof(v->msg), v->msg,
           v->peer, pp_violation_field_name((enum pp_violation_field)v->field),
           (unsigned long long)v->value, v->at_most ? "at most" : "expected",
           (unsigned long long)v->limit, pp_violation_field_desc((enum pp_violation_field)v->field));
}

void pp_engine_violation(struct pp_engine *e, uint64_t now, const struct pp_violation *v)
{
  int i = peer_index(e, v->peer);
  if (e->st.peer_violations++ == 0) {
    e->st.first_violation = *v;
    e->st.first_violation.at_ns = now;
  }
  if (i >= 0 && !e->violated[i]) {
    e->violated[i] = true;
    e->viol[i] = *v;
    e->viol[i].at_ns = now;
    peer_failed(e, now, i,
                &(struct pp_peer_failure){.peer = v->peer,
                                          .kind = PP_PEER_FAIL_VIOLATION,
                                          .violation = e->viol[i],
                                          .at_ns = now});
  }
}
