#include "engine.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

static const struct {
  const char *name;
} protocols[] = {
#define PP_X(id, name, desc) [PP_PROTO_##id] = {name},
    PP_PROTOCOL_LIST(PP_X)
#undef PP_X
};

static const struct {
  const char *name;
} patterns[] = {
#define PP_X(id, name, desc) [PP_PATTERN_##id] = {name},
    PP_PATTERN_LIST(PP_X)
#undef PP_X
};

const char *pp_protocol_name(enum pp_protocol p)
{
  return (unsigned)p < PP_PROTO_COUNT ? protocols[p].name : "?";
}

int pp_protocol_from_name(const char *name)
{
  for (int i = 0; i < PP_PROTO_COUNT; i++)
    if (strcmp(protocols[i].name, name) == 0)
      return i;
  return -1;
}

const char *pp_pattern_name(enum pp_pattern p)
{
  return (unsigned)p < PP_PATTERN_COUNT ? patterns[p].name : "?";
}

int pp_pattern_from_name(const char *name)
{
  for (int i = 0; i < PP_PATTERN_COUNT; i++)
    if (strcmp(patterns[i].name, name) == 0)
      return i;
  return -1;
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

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      snprintf(err, errlen, __VA_ARGS__);                                      \
      return PP_INVALID;                                                       \
    }                                                                          \
  } while (0)

enum pp_status pp_engine_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_qp_params *q = &c->qp;
  const struct pp_workload *w = &c->workload;
  CHECK(c->nranks >= 1 && c->nranks <= PP_MAX_RANKS, "ranks must be 1..%u, got %u",
        PP_MAX_RANKS, c->nranks);
  CHECK(c->rank < c->nranks, "rank %u out of 0..%u", c->rank, c->nranks - 1);
  CHECK((unsigned)c->protocol < PP_PROTO_COUNT, "unknown protocol %d", (int)c->protocol);
  CHECK((unsigned)w->pattern < PP_PATTERN_COUNT, "unknown pattern %d", (int)w->pattern);
  CHECK(w->pattern != PP_PATTERN_PAIR || c->nranks % 2 == 0,
        "pattern 'pair' needs an even number of ranks, got %u", c->nranks);
  CHECK(c->nranks >= 2, "a workload needs at least 2 ranks, got %u", c->nranks);
  CHECK(w->messages >= 1 && w->messages <= PP_MAX_MESSAGES, "messages must be 1..%u, got %u",
        PP_MAX_MESSAGES, w->messages);
  CHECK(w->size >= PP_MSG_HEADER && w->size <= PP_MAX_MSG_SIZE,
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
  return PP_OK;
}

static void *zalloc(size_t n, size_t size)
{
  return calloc(n ? n : 1, size);
}

static enum pp_status conn_alloc(struct pp_engine *e, struct pp_conn *c)
{
  const struct pp_qp_params *q = &e->cfg.qp;
  uint32_t size = e->cfg.workload.size;
  if (c->sends) {
    c->sbuf = zalloc(q->sq_depth, size);
    c->sfree = zalloc(q->sq_depth, sizeof(*c->sfree));
    c->slot_seq = zalloc(q->sq_depth, sizeof(*c->slot_seq));
    if (!c->sbuf || !c->sfree || !c->slot_seq)
      return PP_NOMEM;
    for (uint32_t i = 0; i < q->sq_depth; i++)
      c->sfree[i] = q->sq_depth - 1 - i;
    c->nsfree = q->sq_depth;
  }
  if (c->recvs) {
    c->rbuf = zalloc(q->rq_depth, size);
    if (!c->rbuf)
      return PP_NOMEM;
  }
  return PP_OK;
}

static void conn_free(struct pp_engine *e, struct pp_conn *c)
{
  if (c->smr.lkey)
    e->ops->dereg_mr(e->nic, &c->smr);
  if (c->rmr.lkey)
    e->ops->dereg_mr(e->nic, &c->rmr);
  if (c->qp_num)
    e->ops->destroy_qp(e->nic, c->qp_num);
  free(c->sbuf);
  free(c->sfree);
  free(c->slot_seq);
  free(c->rbuf);
}

enum pp_status pp_engine_post_recv(struct pp_engine *e, uint32_t ci, uint32_t slot)
{
  struct pp_conn *c = &e->conns[ci];
  uint32_t size = e->cfg.workload.size;
  struct pp_recv_wr wr = {
      .wr_id = pp_wr_id(ci, PP_WRK_RECV, slot),
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(c->rbuf + (size_t)slot * size),
                   .length = size,
                   .lkey = c->rmr.lkey}},
  };
  return (enum pp_status)e->ops->post_recv(e->nic, c->qp_num, &wr);
}

static enum pp_status conn_setup(struct pp_engine *e, uint32_t ci)
{
  struct pp_conn *c = &e->conns[ci];
  const struct pp_qp_params *q = &e->cfg.qp;
  size_t size = e->cfg.workload.size;
  enum pp_status s = conn_alloc(e, c);
  if (s != PP_OK)
    return s;
  if (c->sends && (s = e->ops->reg_mr(e->nic, c->sbuf, (size_t)q->sq_depth * size,
                                      PP_ACCESS_LOCAL_WRITE, &c->smr)) != PP_OK)
    return s;
  if (c->recvs && (s = e->ops->reg_mr(e->nic, c->rbuf, (size_t)q->rq_depth * size,
                                      PP_ACCESS_LOCAL_WRITE, &c->rmr)) != PP_OK)
    return s;
  struct pp_qp_init_attr ia = {
      .max_send_wr = q->sq_depth,
      .max_recv_wr = q->rq_depth,
      .max_send_sge = 1,
      .max_recv_sge = 1,
      .peer = c->peer,
  };
  if ((s = e->ops->create_qp(e->nic, &ia, &c->qp_num)) != PP_OK)
    return s;
  struct pp_qp_attr init = {.qp_state = PP_QPS_INIT, .qp_access_flags = PP_ACCESS_LOCAL_WRITE};
  if ((s = e->ops->modify_qp(e->nic, c->qp_num, &init, PP_QP_STATE | PP_QP_ACCESS_FLAGS)) != PP_OK)
    return s;
  c->psn = (uint32_t)pp_prng_below(&e->prng, 1u << 24);
  for (uint32_t i = 0; c->recvs && i < q->rq_depth; i++)
    if ((s = pp_engine_post_recv(e, ci, i)) != PP_OK)
      return s;
  return PP_OK;
}

static void add_conn(struct pp_engine *e, int peer, bool sends)
{
  for (uint32_t i = 0; i < e->nconns; i++) {
    if (e->conns[i].peer == (uint32_t)peer) {
      if (sends)
        e->conns[i].sends = true;
      else
        e->conns[i].recvs = true;
      if (sends)
        e->dest = (int)i;
      else
        e->source = (int)i;
      return;
    }
  }
  struct pp_conn *c = &e->conns[e->nconns];
  c->peer = (uint32_t)peer;
  c->sends = sends;
  c->recvs = !sends;
  if (sends)
    e->dest = (int)e->nconns;
  else
    e->source = (int)e->nconns;
  e->nconns++;
}

enum pp_status pp_engine_create(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                void *nic, struct pp_engine **out)
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
  e->dest = e->source = -1;
  pp_prng_seed(&e->prng, cfg->seed * 0x100000001b3ull + cfg->rank);
  const struct pp_workload *w = &cfg->workload;
  int dest = pp_workload_dest(w, cfg->rank, cfg->nranks);
  int src = pp_workload_source(w, cfg->rank, cfg->nranks);
  if (dest >= 0)
    add_conn(e, dest, true);
  if (src >= 0)
    add_conn(e, src, false);
  e->slow = w->consume_ns > 0 &&
            (w->consume_ranks == 0 || (cfg->rank < 64 && (w->consume_ranks >> cfg->rank) & 1));
  enum pp_status s = pp_timerq_init(&e->timers, cfg->qp.rq_depth * 2 + 4);
  if (s == PP_OK && dest >= 0 && !(e->lat = zalloc(w->messages, sizeof(*e->lat))))
    s = PP_NOMEM;
  for (uint32_t i = 0; s == PP_OK && i < e->nconns; i++)
    s = conn_setup(e, i);
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
  for (uint32_t i = 0; i < e->nconns; i++)
    conn_free(e, &e->conns[i]);
  pp_timerq_fini(&e->timers);
  free(e->lat);
  free(e);
}

static struct pp_conn *conn_to(const struct pp_engine *e, uint32_t peer, uint32_t *index)
{
  for (uint32_t i = 0; i < e->nconns; i++) {
    if (e->conns[i].peer == peer) {
      if (index)
        *index = i;
      return (struct pp_conn *)&e->conns[i];
    }
  }
  return NULL;
}

bool pp_engine_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out)
{
  const struct pp_conn *c = conn_to(e, peer, NULL);
  if (!c)
    return false;
  *out = (struct pp_conn_info){
      .qp_num = c->qp_num,
      .psn = c->psn,
      .buf_addr = c->rmr.addr,
      .buf_rkey = c->rmr.rkey,
      .buf_len = (uint32_t)c->rmr.length,
  };
  return true;
}

enum pp_status pp_engine_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                 const struct pp_conn_info *remote)
{
  (void)now;
  struct pp_conn *c = conn_to(e, peer, NULL);
  if (!c)
    return PP_NOTFOUND;
  if (c->connected)
    return PP_STATE;
  const struct pp_qp_params *q = &e->cfg.qp;
  struct pp_qp_attr rtr = {
      .qp_state = PP_QPS_RTR,
      .path_mtu = pp_mtu_from_bytes(q->mtu),
      .dest_qp_num = remote->qp_num,
      .rq_psn = remote->psn,
      .max_dest_rd_atomic = q->max_rd_atomic,
      .min_rnr_timer = q->min_rnr_timer,
  };
  enum pp_status s = e->ops->modify_qp(e->nic, c->qp_num, &rtr,
                                       PP_QP_STATE | PP_QP_PATH_MTU | PP_QP_DEST_QPN |
                                           PP_QP_RQ_PSN | PP_QP_MAX_DEST_RD_ATOMIC |
                                           PP_QP_MIN_RNR_TIMER);
  if (s != PP_OK)
    return s;
  struct pp_qp_attr rts = {
      .qp_state = PP_QPS_RTS,
      .sq_psn = c->psn,
      .timeout = q->timeout,
      .retry_cnt = q->retry_cnt,
      .rnr_retry = q->rnr_retry,
      .max_rd_atomic = q->max_rd_atomic,
  };
  s = e->ops->modify_qp(e->nic, c->qp_num, &rts,
                        PP_QP_STATE | PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT |
                            PP_QP_RNR_RETRY | PP_QP_MAX_QP_RD_ATOMIC);
  if (s == PP_OK)
    c->connected = true;
  return s;
}

enum pp_status pp_engine_start(struct pp_engine *e, uint64_t now)
{
  if (e->started)
    return PP_STATE;
  for (uint32_t i = 0; i < e->nconns; i++)
    if (!e->conns[i].connected)
      return PP_STATE;
  e->started = true;
  e->start_ns = now;
  return pp_naive_start(e, now);
}

enum pp_status pp_engine_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  if ((unsigned)wc->status < PP_WC_STATUS_COUNT)
    e->st.status_counts[wc->status]++;
  if (pp_wr_id_conn(wc->wr_id) >= e->nconns)
    return PP_INVALID;
  return pp_naive_on_wc(e, now, wc);
}

enum pp_status pp_engine_on_async(struct pp_engine *e, uint64_t now,
                                  const struct pp_async_event *ev)
{
  (void)now;
  (void)ev;
  e->st.async_events++;
  return PP_OK;
}

enum pp_status pp_engine_on_timer(struct pp_engine *e, uint64_t now)
{
  struct pp_timer t;
  while (pp_timerq_pop_due(&e->timers, now, &t)) {
    enum pp_status s = pp_naive_on_timer(e, now, &t);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

uint64_t pp_engine_next_deadline(const struct pp_engine *e)
{
  return pp_timerq_next(&e->timers);
}

bool pp_engine_done(const struct pp_engine *e)
{
  return e->started && pp_naive_done(e);
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

void pp_latency_of(const uint64_t *samples, uint64_t n, struct pp_latency *out)
{
  *out = (struct pp_latency){0};
  if (n == 0)
    return;
  uint64_t *s = malloc(n * sizeof(*s));
  if (!s)
    return;
  memcpy(s, samples, n * sizeof(*s));
  qsort(s, n, sizeof(*s), cmp_u64);
  /* nearest-rank percentiles */
  out->p50 = s[(n * 50 + 99) / 100 - 1];
  out->p99 = s[(n * 99 + 99) / 100 - 1];
  out->max = s[n - 1];
  free(s);
}

void pp_engine_stats(const struct pp_engine *e, struct pp_rank_stats *out)
{
  *out = e->st;
  out->done = pp_engine_done(e);
  pp_latency_of(e->lat, e->nlat, &out->latency);
}

size_t pp_engine_latency_samples(const struct pp_engine *e, const uint64_t **samples)
{
  *samples = e->lat;
  return e->nlat;
}

enum pp_status pp_engine_push_timer(struct pp_engine *e, uint64_t deadline, uint32_t kind,
                                    uint32_t arg)
{
  return pp_timerq_push(&e->timers, deadline, kind, arg);
}
