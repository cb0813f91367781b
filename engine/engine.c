#include "prepost/engine.h"
#include "prepost/names.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "prepost/app.h"
#include "prepost/p2p.h"

static const char *const protocols[] = {
#define PP_X(id, name, desc) [PP_PROTO_##id] = name,
    PP_PROTOCOL_LIST(PP_X)
#undef PP_X
};

static const char *const patterns[] = {
#define PP_X(id, name, desc) [PP_PATTERN_##id] = name,
    PP_PATTERN_LIST(PP_X)
#undef PP_X
};

const char *pp_protocol_name(enum pp_protocol p)
{
  return pp_name_of(protocols, PP_PROTO_COUNT, p);
}

int pp_protocol_from_name(const char *name)
{
  return pp_name_index(protocols, PP_PROTO_COUNT, name);
}

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
  CHECK((unsigned)w->kind < PP_WORKLOAD_COUNT, "unknown workload %d", (int)w->kind);
  CHECK((unsigned)w->pattern < PP_PATTERN_COUNT, "unknown pattern %d", (int)w->pattern);
  CHECK(w->pattern != PP_PATTERN_PAIR || c->nranks % 2 == 0 || pp_p2p_app(w->kind),
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
  if ((c->protocol == PP_PROTO_RING_CREDITS || c->protocol == PP_PROTO_RING_CTS) &&
      pp_ring_params_check(&c->ring, err, errlen) != PP_OK)
    return PP_INVALID;
  if ((pp_p2p_proto(c->protocol) || pp_p2p_app(w->kind) || w->pattern == PP_PATTERN_ALLTOALL) &&
      pp_p2p_cfg_check(c, err, errlen) != PP_OK)
    return PP_INVALID;
  if (w->kind == PP_WORKLOAD_COLLECTIVE)
    return pp_coll_params_check(&c->coll, c->nranks, err, errlen);
  return PP_OK;
}

/* ------------------------------------------------------------------ memory estimate */

/* Bookkeeping entries whose types are private to their modules are counted at a bound of their
 * size (asserted by tests/test_engine.c, suite engine_mem, against what creation allocates). */
#define MEM_REQ 1024u   /* p2p.c struct req */
#define MEM_RX 160u     /* p2p.c struct rx */
#define MEM_TX 32u      /* p2p.c struct tx */
#define MEM_MENTRY 128u /* match.h struct pp_mentry, and its bucket */
#define MEM_RCE 128u    /* rcache.h struct pp_rcache_entry, and its bucket */
#define MEM_RING_MSG 80u  /* ring.c struct smsg / rmsg */
#define MEM_RING_CONN 2048u /* ring.c struct conn and its share of struct ring */
#define MEM_APP 8192u   /* a workload's own state */

struct mem {
  uint64_t total, big;
  const char *what;
};

static void mem_add(struct mem *m, uint64_t bytes, const char *what)
{
  m->total += bytes;
  if (bytes > m->big) {
    m->big = bytes;
    m->what = what;
  }
}

static uint64_t pow2_ge(uint64_t x)
{
  uint64_t p = 16;
  while (p < x)
    p *= 2;
  return p;
}

/* At most this many peers for one rank (engine_impl.h: PP_MAX_PEERS). */
static uint32_t mem_peers(const struct pp_engine_cfg *c, uint32_t script_peers)
{
  const struct pp_workload *w = &c->workload;
  uint32_t n = c->nranks - 1;
  if (w->kind == PP_WORKLOAD_SCRIPT)
    n = script_peers;
  else if (w->kind != PP_WORKLOAD_APP && w->pattern != PP_PATTERN_ALLTOALL)
    n = w->pattern == PP_PATTERN_PAIR ? 1 : 2;
  if (n > c->nranks - 1)
    n = c->nranks - 1;
  return n < PP_MAX_PEERS ? n : PP_MAX_PEERS;
}

static void mem_p2p(const struct pp_engine_cfg *c, uint32_t npeers, struct mem *m,
                    struct pp_mem_need *q)
{
  struct pp_p2p_params p;
  pp_p2p_params_resolve(c, &p);
  uint64_t R = p.reply_slots, TR = (R + 1) / 2, D = p.credits;
  uint64_t nrx = D + R + 2 + (D - 1) / p.credit_threshold + (R - 1) / TR;
  uint64_t bsize = (64 + (uint64_t)p.eager_limit + 63) & ~63ull, nch = (uint64_t)npeers * p.channels;
  q->qps = (uint32_t)nch;
  q->send_wqes = nch * c->qp.sq_depth;
  q->recv_wqes = nch * nrx;
  uint64_t rx = nch * nrx, small = nch * (nrx + 4) + (uint64_t)p.max_requests * (p.pipeline + 1) + 1;
  mem_add(m, rx * (bsize + MEM_RX), "p2p.credits, p2p.reply_slots and p2p.eager_limit");
  mem_add(m, (uint64_t)p.send_buffers * (bsize + MEM_TX), "p2p.send_buffers and p2p.eager_limit");
  mem_add(m, small * (64 + MEM_TX), "p2p.max_requests and p2p.pipeline");
  mem_add(m, (uint64_t)p.max_requests * MEM_REQ, "p2p.max_requests");
  mem_add(m, (pow2_ge(2ull * p.max_requests) + pow2_ge(8 * rx) + p.max_requests + 4 * rx) *
                 MEM_MENTRY, "p2p.max_requests");
  mem_add(m, (p.rcache_entries + pow2_ge(2ull * p.rcache_entries)) * (uint64_t)MEM_RCE,
          "p2p.rcache_entries");
  mem_add(m, (uint64_t)p.record * sizeof(struct pp_recv_record), "p2p.record");
  mem_add(m, nch * 64 + c->nranks * 4ull + 8192, "ranks");
}

static void mem_ring(const struct pp_engine_cfg *c, uint32_t npeers, struct mem *m,
                     struct pp_mem_need *q)
{
  const struct pp_ring_params *r = &c->ring;
  q->qps = npeers * r->channels;
  q->send_wqes = (uint64_t)q->qps * (2 * r->slots + 4);
  q->recv_wqes = (uint64_t)q->qps * 2 * r->slots;
  uint64_t area = (uint64_t)r->slots * 32 + 64 + 2 * 64; /* and their alignment */
  mem_add(m, (uint64_t)npeers * r->channels * r->slots * r->slot_size,
          "ring.channels, ring.slots and ring.slot_size");
  mem_add(m, (uint64_t)npeers * (2 * r->channels * area + (uint64_t)r->channels * r->slots * 8 +
                                 ((uint64_t)c->qp.sq_depth + c->qp.rq_depth) * MEM_RING_MSG +
                                 MEM_RING_CONN),
          "qp.sq_depth and qp.rq_depth");
}

/* The workload's buffers; *lat: the latency samples it records (kept in one fixed-size
 * histogram, prepost/hist.h, when there are any). */
static void mem_app(const struct pp_engine_cfg *c, uint64_t script_bytes, struct mem *m,
                    uint64_t *lat)
{
  const struct pp_workload *w = &c->workload;
  const struct pp_traffic *t = &c->traffic;
  uint64_t size = w->size;
  switch (w->kind) {
  case PP_WORKLOAD_STREAM:
    mem_add(m, ((uint64_t)c->qp.sq_depth + c->qp.rq_depth) * (size + 16),
            "qp.sq_depth, qp.rq_depth and workload.size");
    *lat = w->messages;
    break;
  case PP_WORKLOAD_TRAFFIC: {
    uint64_t W = t->window ? t->window : 16, smax = t->size_max > size ? t->size_max : size;
    uint64_t nsrc = w->pattern == PP_PATTERN_ALLTOALL ? c->nranks - 1u : 1;
    bool wild = t->recv_mode == PP_RECV_ANY_SOURCE || t->recv_mode == PP_RECV_ANY;
    mem_add(m, 2 * W * (smax + 64), "traffic.window and traffic.size_max");
    mem_add(m, wild ? nsrc * w->messages * 4 : 0, "workload.messages");
    *lat = nsrc * w->messages < 1000000 ? nsrc * w->messages : 1000000;
    break;
  }
  case PP_WORKLOAD_COLLECTIVE: {
    uint64_t W = c->coll.window < c->qp.rq_depth ? c->coll.window : c->qp.rq_depth;
    uint64_t elems = c->coll.bytes / 4 + 1; /* the in-flight flags: at most one per element */
    mem_add(m, c->coll.bytes + elems, "collective.size");
    mem_add(m, W * (c->coll.chunk + 8), "collective.window and collective.chunk");
    *lat = c->coll.iterations;
    break;
  }
  default: /* script, app */
    mem_add(m, script_bytes + 4096 + c->nranks * 8ull, "the script's message sizes and counts");
    *lat = 1000000;
    break;
  }
  mem_add(m, MEM_APP, "workload");
}

void pp_engine_mem_need(const struct pp_engine_cfg *cfg, struct pp_mem_need *out)
{
  uint64_t sbytes = 0, lat = 0;
  uint32_t speers = 0;
  if (cfg->workload.kind == PP_WORKLOAD_SCRIPT) /* the busiest rank */
    for (uint32_t r = 0; r < cfg->nranks; r++) {
      uint64_t b;
      uint32_t n;
      pp_script_need(cfg, r, &b, &n);
      sbytes = b > sbytes ? b : sbytes;
      speers = n > speers ? n : speers;
    }
  uint32_t npeers = mem_peers(cfg, speers);
  struct mem m = {0};
  mem_add(&m, sizeof(struct pp_engine) + ((uint64_t)cfg->qp.rq_depth * 2 + 64) *
                                             sizeof(struct pp_timer), "the engine");
  *out = (struct pp_mem_need){.qps = npeers,
                              .send_wqes = (uint64_t)npeers * cfg->qp.sq_depth,
                              .recv_wqes = (uint64_t)npeers * cfg->qp.rq_depth};
  if (pp_p2p_proto(cfg->protocol))
    mem_p2p(cfg, npeers, &m, out);
  else if (cfg->protocol == PP_PROTO_RING_CREDITS || cfg->protocol == PP_PROTO_RING_CTS)
    mem_ring(cfg, npeers, &m, out);
  mem_app(cfg, sbytes, &m, &lat);
  mem_add(&m, lat ? sizeof(struct pp_hist) : 0, "the latency histogram");
  mem_add(&m, 16 * 4096, "the allocator's rounding"); /* a page per large buffer */
  out->bytes = m.total;
  out->biggest = m.what;
}

static const struct pp_proto_ops *const proto_table[PP_PROTO_COUNT] = {
    [PP_PROTO_NAIVE] = &pp_naive_ops,
    [PP_PROTO_EAGER] = &pp_p2p_eager_ops,
    [PP_PROTO_RNDV] = &pp_p2p_rndv_ops,
    [PP_PROTO_RING_CREDITS] = &pp_ring_credits_ops,
    [PP_PROTO_RING_CTS] = &pp_ring_cts_ops,
};

static const struct pp_app_ops *const app_table[PP_WORKLOAD_COUNT] = {
    [PP_WORKLOAD_STREAM] = &pp_stream_ops,
    [PP_WORKLOAD_SCRIPT] = &pp_script_ops,
    [PP_WORKLOAD_TRAFFIC] = &pp_traffic_ops,
    [PP_WORKLOAD_APP] = &pp_app_workload_ops,
    [PP_WORKLOAD_COLLECTIVE] = &pp_collective_ops,
};

static const char *const workload_names[] = {
#define PP_X(id, name, desc) [PP_WORKLOAD_##id] = name,
    PP_WORKLOAD_LIST(PP_X)
#undef PP_X
};

const char *pp_workload_name(enum pp_workload_kind k)
{
  return pp_name_of(workload_names, PP_WORKLOAD_COUNT, k);
}

int pp_workload_from_name(const char *name)
{
  return pp_name_index(workload_names, PP_WORKLOAD_COUNT, name);
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

enum pp_status pp_app_p2p_done(struct pp_engine *e, uint64_t now, bool recv, uint64_t req,
                               uint64_t cookie, const struct pp_p2p_status *st)
{
  e->finished++;
  return e->appops->p2p_done(e, now, recv, req, cookie, st);
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
  e->proto = proto_table[cfg->protocol];
  e->appops = app_table[cfg->workload.kind];
  e->app_arg = app_arg;
  pp_prng_seed(&e->prng, cfg->seed * 0x100000001b3ull + cfg->rank);
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
 * has seen it (a violation it found first is the reason), the peer's failure is told. */
static enum pp_status on_wc_error(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
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
  if ((unsigned)wc->status < PP_WC_STATUS_COUNT)
    e->st.status_counts[wc->status]++;
  if (wc->status != PP_WC_SUCCESS)
    return on_wc_error(e, now, wc);
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
  return PP_OK;
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
