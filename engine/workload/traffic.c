/*
 * The traffic workload: generated point-to-point messages over the p2p API.
 *
 * Every sender sends `messages` messages to each of its destinations (pattern pair, ring or
 * alltoall); message k from s to d has a size drawn from the configured distribution in
 * [size, size_max] and a tag in 0..tags-1, both pure functions of (seed, s, d, k), so sender and
 * receiver agree on them without talking. Senders keep up to `window` sends in flight, one
 * submitted every `interval`; receivers keep up to `window` receives posted, of the configured
 * kind (specific, any-tag, mixed, any-source, any), and a slow receiver (`consume`,
 * `slow_ranks`) holds each buffer that long before reusing it.
 *
 * Every receive is checked: for specific / any-tag / mixed receives, the k-th receive for source
 * s must be message k of s (source, tag, size, bytes); for wildcard sources, the message must be
 * intact, and of two messages of one source (and one tag, for any-source receives) the earlier
 * one must have matched the receive posted earlier: MPI's non-overtaking rule (checked between
 * neighbours in send order once both have arrived, whatever order they complete in).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/names.h"
#include "prepost/p2p.h"

#define SUBMIT_TIMER 1u
#define CONSUME_TIMER 2u
#define NONE UINT32_MAX
#define MAX_TAGS 256u
#define TRAFFIC_PAGE 4096u /* see page_buf() */
#define MAX_WINDOW 4096u

static const char *const dist_names[] = {
#define PP_X(id, name, desc) [PP_DIST_##id] = name,
    PP_SIZE_DIST_LIST(PP_X)
#undef PP_X
};

static const char *const mode_names[] = {
#define PP_X(id, name, desc) [PP_RECV_##id] = name,
    PP_RECV_MODE_LIST(PP_X)
#undef PP_X
};

const char *pp_size_dist_name(enum pp_size_dist d)
{
  return pp_name_of(dist_names, PP_DIST_COUNT, d);
}

int pp_size_dist_from_name(const char *name)
{
  return pp_name_index(dist_names, PP_DIST_COUNT, name);
}

const char *pp_recv_mode_name(enum pp_recv_mode m)
{
  return pp_name_of(mode_names, PP_RECV_MODE_COUNT, m);
}

int pp_recv_mode_from_name(const char *name)
{
  return pp_name_index(mode_names, PP_RECV_MODE_COUNT, name);
}

struct sslot {
  pp_req h;
  uint64_t t_post;
  uint32_t next;
};

struct rslot {
  pp_req h;
  uint32_t src; /* rank the receive was planned for */
  uint32_t tag; /* tag it was posted with (PP_ANY_TAG for wildcards) */
  uint64_t k;   /* planned message index */
  uint64_t g;   /* posting order of the receive */
  uint32_t next;
};

struct traffic {
  uint32_t dst[PP_MAX_PEERS], src[PP_MAX_PEERS], ndst, nsrc;
  bool slow;
  uint32_t window, size_max;
  /* sending */
  uint8_t *sbuf;
  struct sslot *ss;
  uint32_t sfree;
  uint64_t s_total, s_issued, s_done, s_submitted;
  /* receiving */
  uint8_t *rbuf;
  struct rslot *rs;
  uint32_t rfree;
  uint64_t r_total, r_issued, r_done;
  uint32_t *hold;      /* slots held by a slow consumer, FIFO */
  uint64_t *hold_until;
  uint32_t hold_head, hold_n;
  bool consume_armed;
  uint32_t *matched; /* wildcard checks: [source index][k] = 1 + the receive that got it */
  int32_t src_index[1024];
};

static uint64_t mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Draw k of the pair (s, d) in domain dom (size, tag, mixed): a pure function of the run's seed,
 * so sender and receiver draw the same. */
static uint64_t draw(const struct pp_engine_cfg *c, uint32_t s, uint32_t d, uint64_t k,
                     enum pp_seed_domain dom)
{
  return mix(mix(pp_seed_derive(c->seed, dom, s) ^ d) ^ k);
}

static uint32_t msg_size(const struct pp_engine_cfg *c, uint32_t s, uint32_t d, uint64_t k)
{
  const struct pp_traffic *t = pp_traffic_of(c);
  uint32_t lo = c->workload.size, hi = t->size_max > lo ? t->size_max : lo;
  uint64_t x = draw(c, s, d, k, PP_SEED_TRAFFIC_SIZE);
  switch (t->dist) {
  case PP_DIST_UNIFORM:
    return lo + (uint32_t)(x % ((uint64_t)hi - lo + 1));
  case PP_DIST_LOG_UNIFORM: {
    /* a power of two between lo and hi, then uniform inside that octave */
    uint32_t a = 0, b = 0;
    while ((1ull << (a + 1)) <= lo)
      a++;
    while ((1ull << (b + 1)) <= hi)
      b++;
    uint32_t e = a + (uint32_t)(x % (b - a + 1));
    uint64_t base = 1ull << e, v = base + (x >> 16) % base;
    return v < lo ? lo : v > hi ? hi : (uint32_t)v;
  }
  default:
    return lo;
  }
}

static uint32_t msg_tag(const struct pp_engine_cfg *c, uint32_t s, uint32_t d, uint64_t k)
{
  uint32_t tags = pp_traffic_of(c)->tags ? pp_traffic_of(c)->tags : 1;
  return (uint32_t)(draw(c, s, d, k, PP_SEED_TRAFFIC_TAG) % tags);
}

/* Fills dst/src with the ranks `rank` sends to / receives from. */
static void traffic_peers(const struct pp_engine_cfg *c, uint32_t rank, uint32_t *dst,
                          uint32_t *ndst, uint32_t *src, uint32_t *nsrc)
{
  uint32_t n = c->nranks;
  *ndst = *nsrc = 0;
  switch (c->workload.pattern) {
  case PP_PATTERN_PAIR:
    if (rank % 2 == 0 && rank + 1 < n)
      dst[(*ndst)++] = rank + 1;
    if (rank % 2 == 1)
      src[(*nsrc)++] = rank - 1;
    break;
  case PP_PATTERN_RING:
    dst[(*ndst)++] = (rank + 1) % n;
    src[(*nsrc)++] = (rank + n - 1) % n;
    break;
  default:
    for (uint32_t r = 0; r < n && r <= PP_MAX_PEERS; r++)
      if (r != rank) {
        dst[(*ndst)++] = r;
        src[(*nsrc)++] = r;
      }
    break;
  }
}

int pp_traffic_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_traffic *t = pp_traffic_of(c);
  const struct pp_workload *w = &c->workload;
  uint32_t smax = t->size_max > w->size ? t->size_max : w->size;
  uint32_t window = t->window ? t->window : 16;
  CHECK(t->dist < PP_DIST_COUNT, "unknown size distribution %u", t->dist);
  CHECK(t->recv_mode < PP_RECV_MODE_COUNT, "unknown receive mode %u", t->recv_mode);
  CHECK(smax <= PP_MAX_MSG_SIZE, "size_max must be at most %u bytes, got %u", PP_MAX_MSG_SIZE,
        smax);
  CHECK(t->tags <= MAX_TAGS, "tags must be 1..%u, got %u", MAX_TAGS, t->tags);
  CHECK(window <= MAX_WINDOW, "window must be 1..%u, got %u", MAX_WINDOW, window);
  CHECK(w->pattern != PP_PATTERN_PAIR || c->nranks % 2 == 0,
        "pattern 'pair' needs an even number of ranks, got %u", c->nranks);
  CHECK(w->pattern != PP_PATTERN_ALLTOALL || c->nranks <= PP_MAX_PEERS + 1,
        "pattern 'alltoall' connects every pair of ranks: at most %u ranks, got %u",
        PP_MAX_PEERS + 1, c->nranks);
  uint64_t nsrc = w->pattern == PP_PATTERN_ALLTOALL ? c->nranks - 1 : 1;
  CHECK(t->recv_mode < PP_RECV_ANY_SOURCE || nsrc * w->messages <= (1u << 24),
        "wildcard-source receives check order with 4 bytes per message: at most %u messages "
        "per receiver, got %llu",
        1u << 24, (unsigned long long)(nsrc * w->messages));
  CHECK(2ull * window * smax <= (1ull << 32),
        "buffers 2 * window * size_max = %llu bytes exceed 4 GiB",
        2ull * window * (unsigned long long)smax);
  return PP_OK;
}

/* ------------------------------------------------------------------ the ops table */

static enum pp_status traffic_plan(struct pp_engine *e)
{
  struct traffic *a = calloc(1, sizeof(*a));
  if (!a)
    return PP_NOMEM;
  e->as = a;
  const struct pp_workload *w = &e->cfg.workload;
  traffic_peers(&e->cfg, e->cfg.rank, a->dst, &a->ndst, a->src, &a->nsrc);
  for (uint32_t i = 0; i < a->ndst; i++)
    if (pp_engine_add_peer(e, a->dst[i]) != PP_OK)
      return PP_LIMIT;
  for (uint32_t i = 0; i < a->nsrc; i++)
    if (pp_engine_add_peer(e, a->src[i]) != PP_OK)
      return PP_LIMIT;
  a->slow = w->consume_ns > 0 &&
            (w->consume_ranks == 0 || (e->cfg.rank < 64 && (w->consume_ranks >> e->cfg.rank) & 1));
  a->window = pp_traffic_of(&e->cfg)->window ? pp_traffic_of(&e->cfg)->window : 16;
  a->size_max = pp_traffic_of(&e->cfg)->size_max > w->size ? pp_traffic_of(&e->cfg)->size_max : w->size;
  a->s_total = (uint64_t)a->ndst * w->messages;
  a->r_total = (uint64_t)a->nsrc * w->messages;
  e->lat_cap = a->s_total < 1000000 ? a->s_total : 1000000;
  return PP_OK;
}

/* A page-aligned, zeroed buffer of n bytes: the registration cache registers whole pages
 * around a user buffer, so a buffer's offset in its page is the same in every run, and an exact
 * replay finds the recorded addresses again (the heap is not the same in the replaying process). */
static uint8_t *page_buf(size_t n)
{
  size_t bytes = (n + TRAFFIC_PAGE - 1) / TRAFFIC_PAGE * TRAFFIC_PAGE;
  uint8_t *p = aligned_alloc(TRAFFIC_PAGE, bytes ? bytes : TRAFFIC_PAGE);
  if (p)
    memset(p, 0, bytes ? bytes : TRAFFIC_PAGE);
  return p;
}

static enum pp_status traffic_create(struct pp_engine *e)
{
  struct traffic *a = e->as;
  uint32_t W = a->window;
  if ((uint64_t)W * a->size_max > SIZE_MAX / 2)
    return PP_NOMEM;
  a->sbuf = page_buf((size_t)W * a->size_max);
  a->rbuf = page_buf((size_t)W * a->size_max);
  a->ss = calloc(W, sizeof(*a->ss));
  a->rs = calloc(W, sizeof(*a->rs));
  a->hold = calloc(W, sizeof(*a->hold));
  a->hold_until = calloc(W, sizeof(*a->hold_until));
  bool wild = pp_traffic_of(&e->cfg)->recv_mode == PP_RECV_ANY_SOURCE ||
              pp_traffic_of(&e->cfg)->recv_mode == PP_RECV_ANY;
  a->matched = calloc(wild ? (size_t)a->nsrc * e->cfg.workload.messages : 1, sizeof(*a->matched));
  if (!a->sbuf || !a->rbuf || !a->ss || !a->rs || !a->hold || !a->hold_until || !a->matched)
    return PP_NOMEM;
  for (uint32_t i = 0; i < 1024; i++)
    a->src_index[i] = -1;
  for (uint32_t i = 0; i < a->nsrc; i++)
    a->src_index[a->src[i]] = (int32_t)i;
  a->sfree = a->rfree = NONE;
  for (uint32_t i = W; i-- > 0;) {
    a->ss[i].next = a->sfree;
    a->sfree = i;
    a->rs[i].next = a->rfree;
    a->rfree = i;
  }
  return PP_OK;
}

static void traffic_destroy(struct pp_engine *e)
{
  struct traffic *a = e->as;
  if (!a)
    return;
  free(a->sbuf);
  free(a->rbuf);
  free(a->ss);
  free(a->rs);
  free(a->hold);
  free(a->hold_until);
  free(a->matched);
  free(a);
  e->as = NULL;
}

static uint64_t submit_time(const struct pp_engine *e, uint64_t g)
{
  return e->start_ns + g * e->cfg.workload.interval_ns;
}

static enum pp_status post_recvs(struct pp_engine *e, uint64_t now)
{
  struct traffic *a = e->as;
  const struct pp_engine_cfg *c = &e->cfg;
  while (a->r_issued < a->r_total && a->rfree != NONE) {
    uint32_t i = a->rfree;
    struct rslot *r = &a->rs[i];
    uint64_t g = a->r_issued, k = g / a->nsrc;
    uint32_t src = a->src[g % a->nsrc], tag = msg_tag(c, src, c->rank, k);
    uint32_t psrc = src, ptag = tag;
    switch (pp_traffic_of(c)->recv_mode) {
    case PP_RECV_ANY_TAG:
      ptag = PP_ANY_TAG;
      break;
    case PP_RECV_MIXED:
      if (draw(c, src, c->rank, k, PP_SEED_TRAFFIC_MIXED) & 1)
        ptag = PP_ANY_TAG;
      break;
    case PP_RECV_ANY_SOURCE:
      psrc = PP_ANY_SOURCE;
      break;
    case PP_RECV_ANY:
      psrc = PP_ANY_SOURCE;
      ptag = PP_ANY_TAG;
      break;
    default:
      break;
    }
    enum pp_status s = pp_p2p_irecv(e, now, a->rbuf + (size_t)i * a->size_max, a->size_max,
                                    psrc, ptag, 0, i, &r->h);
    if (s == PP_AGAIN)
      return PP_OK;
    if (s != PP_OK)
      return s;
    a->rfree = r->next;
    r->src = src;
    r->tag = ptag;
    r->k = k;
    r->g = a->r_issued;
    a->r_issued++;
  }
  return PP_OK;
}

static enum pp_status post_sends(struct pp_engine *e, uint64_t now)
{
  struct traffic *a = e->as;
  const struct pp_engine_cfg *c = &e->cfg;
  uint64_t limit = c->workload.interval_ns ? a->s_submitted : a->s_total;
  while (a->s_issued < limit && a->sfree != NONE) {
    uint32_t i = a->sfree;
    struct sslot *s = &a->ss[i];
    uint64_t g = a->s_issued, k = g / a->ndst;
    uint32_t dst = a->dst[g % a->ndst];
    uint32_t size = msg_size(c, c->rank, dst, k), tag = msg_tag(c, c->rank, dst, k);
    uint8_t *buf = a->sbuf + (size_t)i * a->size_max;
    pp_msg_fill(buf, size, c->rank, k);
    enum pp_status st = pp_p2p_isend(e, now, buf, size, dst, tag, 0, i, &s->h);
    if (st == PP_AGAIN)
      return PP_OK;
    if (st != PP_OK)
      return st;
    a->sfree = s->next;
    s->t_post = c->workload.interval_ns ? submit_time(e, g) : now;
    a->s_issued++;
  }
  return PP_OK;
}

static enum pp_status traffic_pump(struct pp_engine *e, uint64_t now)
{
  if (!e->started)
    return PP_OK;
  enum pp_status s = post_recvs(e, now);
  return s == PP_OK ? post_sends(e, now) : s;
}

static enum pp_status traffic_start(struct pp_engine *e, uint64_t now)
{
  struct traffic *a = e->as;
  if (e->cfg.workload.interval_ns && a->s_total) {
    a->s_submitted = 1;
    if (a->s_total > 1) {
      enum pp_status s = pp_engine_push_timer(e, submit_time(e, 1), PP_TIMER_APP, SUBMIT_TIMER);
      if (s != PP_OK)
        return s;
    }
  }
  return traffic_pump(e, now);
}

static enum pp_status arm_consume(struct pp_engine *e)
{
  struct traffic *a = e->as;
  if (a->consume_armed || a->hold_n == 0)
    return PP_OK;
  a->consume_armed = true;
  return pp_engine_push_timer(e, a->hold_until[a->hold_head], PP_TIMER_APP, CONSUME_TIMER);
}

static enum pp_status traffic_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct traffic *a = e->as;
  if (arg == SUBMIT_TIMER) {
    a->s_submitted++;
    if (a->s_submitted < a->s_total) {
      enum pp_status s = pp_engine_push_timer(e, submit_time(e, a->s_submitted), PP_TIMER_APP,
                                              SUBMIT_TIMER);
      if (s != PP_OK)
        return s;
    }
    return traffic_pump(e, now);
  }
  if (arg != CONSUME_TIMER)
    return PP_INVALID;
  a->consume_armed = false;
  while (a->hold_n && a->hold_until[a->hold_head] <= now) {
    uint32_t i = a->hold[a->hold_head];
    a->hold_head = (a->hold_head + 1) % a->window;
    a->hold_n--;
    a->rs[i].next = a->rfree;
    a->rfree = i;
  }
  enum pp_status s = arm_consume(e);
  return s == PP_OK ? traffic_pump(e, now) : s;
}

static enum pp_status traffic_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                        enum pp_wc_status wst)
{
  (void)now, (void)wst;
  struct traffic *a = e->as;
  if (cookie >= a->window)
    return PP_INVALID;
  struct sslot *s = &a->ss[cookie];
  struct pp_p2p_status st;
  if (!pp_p2p_test(e, &s->h, &st))
    return PP_INVALID;
  if (st.error == PP_P2P_E_OK) {
    e->st.messages_sent++;
    e->st.bytes_sent += st.len;
    pp_engine_latency(e, st.done_ns - s->t_post);
  }
  a->s_done++;
  s->next = a->sfree;
  a->sfree = (uint32_t)cookie;
  return PP_OK;
}

/* Is this receive the message it must be? */
static bool check(struct pp_engine *e, const struct rslot *r, const struct pp_p2p_status *st,
                  const uint8_t *buf)
{
  struct traffic *a = e->as;
  const struct pp_engine_cfg *c = &e->cfg;
  uint32_t me = c->rank;
  uint64_t k;
  uint32_t hsrc;
  if (st->error != PP_P2P_E_OK || st->len < PP_MSG_HEADER)
    return false;
  memcpy(&k, buf, 8);
  memcpy(&hsrc, buf + 8, 4);
  if (hsrc != st->source || hsrc >= c->nranks || k >= c->workload.messages ||
      st->len != msg_size(c, hsrc, me, k) || st->tag != msg_tag(c, hsrc, me, k) ||
      pp_msg_check(buf, st->len, hsrc, k) != 0)
    return false;
  switch (pp_traffic_of(c)->recv_mode) {
  case PP_RECV_ANY_SOURCE:
  case PP_RECV_ANY: {
    /* non-overtaking: against the neighbours in send order (same tag for any-source) */
    bool by_tag = pp_traffic_of(c)->recv_mode == PP_RECV_ANY_SOURCE;
    int32_t si = a->src_index[hsrc];
    uint32_t *m = a->matched + (size_t)(si < 0 ? 0 : si) * c->workload.messages;
    if (si < 0 || m[k] || (by_tag && st->tag != r->tag))
      return false;
    m[k] = (uint32_t)r->g + 1;
    for (uint64_t j = k; j-- > 0;)
      if (!by_tag || msg_tag(c, hsrc, me, j) == st->tag) {
        if (m[j] && m[j] > m[k])
          return false;
        break;
      }
    for (uint64_t j = k + 1; j < c->workload.messages; j++)
      if (!by_tag || msg_tag(c, hsrc, me, j) == st->tag) {
        if (m[j] && m[j] < m[k])
          return false;
        break;
      }
    return true;
  }
  default: /* exactly the message planned */
    return hsrc == r->src && k == r->k;
  }
}

static enum pp_status traffic_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                        enum pp_wc_status wst, uint32_t src, uint64_t tag,
                                        uint32_t len)
{
  (void)wst, (void)src, (void)tag, (void)len;
  struct traffic *a = e->as;
  if (cookie >= a->window)
    return PP_INVALID;
  struct rslot *r = &a->rs[cookie];
  struct pp_p2p_status st;
  if (!pp_p2p_test(e, &r->h, &st))
    return PP_INVALID;
  if (check(e, r, &st, a->rbuf + (size_t)cookie * a->size_max)) {
    e->st.messages_received++;
    e->st.bytes_received += st.len;
  } else if (st.error != PP_P2P_E_FAILED && st.error != PP_P2P_E_PEER) {
    e->st.corrupt++; /* PEER: a lie detected, the peer failed (peer_violations counts it) */
  }
  a->r_done++;
  if (a->slow && a->r_issued < a->r_total) {
    uint32_t at = (a->hold_head + a->hold_n) % a->window;
    a->hold[at] = (uint32_t)cookie;
    a->hold_until[at] = now + e->cfg.workload.consume_ns;
    a->hold_n++;
    return arm_consume(e);
  }
  r->next = a->rfree;
  a->rfree = (uint32_t)cookie;
  return PP_OK;
}

static bool traffic_done(const struct pp_engine *e)
{
  const struct traffic *a = e->as;
  return a->s_done == a->s_total && a->r_done == a->r_total;
}

const struct pp_app_ops pp_traffic_ops = {
    .name = "traffic",
    .plan = traffic_plan,
    .create = traffic_create,
    .destroy = traffic_destroy,
    .start = traffic_start,
    .pump = traffic_pump,
    .on_timer = traffic_on_timer,
    .send_done = traffic_send_done,
    .recv_done = traffic_recv_done,
    .done = traffic_done,
};

/* ------------------------------------------------------------------ registry */

static void traffic_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m,
                             uint32_t *npeers, uint64_t *lat)
{
  const struct pp_workload *w = &c->workload;
  const struct pp_traffic *t = pp_traffic_of(c);
  bool all = w->pattern == PP_PATTERN_ALLTOALL;
  *npeers = all ? c->nranks - 1 : w->pattern == PP_PATTERN_PAIR ? 1 : 2;
  uint64_t W = t->window ? t->window : 16, smax = t->size_max > w->size ? t->size_max : w->size;
  uint64_t nsrc = all ? c->nranks - 1u : 1;
  bool wild = t->recv_mode == PP_RECV_ANY_SOURCE || t->recv_mode == PP_RECV_ANY;
  pp_mem_add(m, 2 * W * (smax + 64), "traffic.window and traffic.size_max");
  pp_mem_add(m, wild ? nsrc * w->messages * 4 : 0, "workload.messages");
  pp_mem_add(m, 8192, "workload");
  *lat = nsrc * w->messages < 1000000 ? nsrc * w->messages : 1000000;
}

static enum pp_status traffic_def_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  return pp_p2p_cfg_check(c, err, errlen) == PP_OK ? PP_OK : PP_INVALID;
}

_Static_assert(sizeof(struct pp_traffic) <= PP_WORKLOAD_PARAMS_MAX, "fits pp_engine_cfg.workload_params");

const struct pp_workload_def pp_traffic_def = {
    .name = "traffic",
    .desc = "generated p2p messages, checked",
    .params_size = sizeof(struct pp_traffic),
    .alltoall = true,
    .pair_odd = true,
    .check = traffic_def_check,
    .mem_need = traffic_mem_need,
    .ops = &pp_traffic_ops,
};
