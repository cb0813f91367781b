/*
 * prepost explore: the fault catalogue, the protocol registry, the seed -> scenario generator and
 * the scenario writer (tools/explore/explore.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/bugs.h"
#include "prepost/proto.h"
#include "tools/explore/explore.h"

/* ------------------------------------------------------------------ names */

static const char *const fault_names[] = {
#define PP_X(id, name, desc) name,
    PP_FAULT_LIST(PP_X)
#undef PP_X
};
static const char *const fault_descs[] = {
#define PP_X(id, name, desc) desc,
    PP_FAULT_LIST(PP_X)
#undef PP_X
};
static const char *const inv_names[] = {
#define PP_X(id, name, desc) name,
    PP_INV_LIST(PP_X)
#undef PP_X
};
static const char *const inv_descs[] = {
#define PP_X(id, name, desc) desc,
    PP_INV_LIST(PP_X)
#undef PP_X
};

const char *pp_fault_name(enum pp_fault f)
{
  return (unsigned)f < PP_FAULT_COUNT ? fault_names[f] : "?";
}

const char *pp_fault_desc(enum pp_fault f)
{
  return (unsigned)f < PP_FAULT_COUNT ? fault_descs[f] : "?";
}

const char *pp_inv_name(enum pp_inv i)
{
  return (unsigned)i < PP_INV_COUNT ? inv_names[i] : "?";
}

const char *pp_inv_desc(enum pp_inv i)
{
  return (unsigned)i < PP_INV_COUNT ? inv_descs[i] : "?";
}

int pp_inv_from_name(const char *name)
{
  for (int i = 0; i < PP_INV_COUNT; i++)
    if (!strcmp(name, inv_names[i]))
      return i;
  return -1;
}

int pp_faults_parse(const char *list, uint32_t *mask, char *err, size_t errlen)
{
  uint32_t m = 0;
  char word[64];
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof word) {
      snprintf(err, errlen, "bad fault list '%s'", list);
      return -1;
    }
    memcpy(word, p, n);
    word[n] = '\0';
    p += n + (p[n] == ',');
    if (!strcmp(word, "all")) {
      m |= PP_FAULTS_ALL;
      continue;
    }
    if (!strcmp(word, "none"))
      continue;
    int f = -1;
    for (int i = 0; i < PP_FAULT_COUNT && f < 0; i++)
      if (!strcmp(word, fault_names[i]))
        f = i;
    if (f < 0) {
      char all[256];
      pp_faults_format(PP_FAULTS_ALL | PP_FAULTS_OPT_IN, all, sizeof all);
      snprintf(err, errlen, "unknown fault '%s' (expected all, none or a list of: %s)", word, all);
      return -1;
    }
    m |= 1u << f;
  }
  *mask = m;
  return 0;
}

void pp_faults_format(uint32_t mask, char *buf, size_t len)
{
  size_t at = 0;
  buf[0] = '\0';
  for (int i = 0; i < PP_FAULT_COUNT; i++)
    if (mask >> i & 1 && at < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "," : "", fault_names[i]);
  if (!mask)
    snprintf(buf, len, "none");
}

uint32_t pp_faults_of(const struct pp_scenario *sc)
{
  const struct pp_faults *f = &sc->sim.faults;
  const struct pp_workload *w = &sc->sim.engine.workload;
  uint32_t m = 0;
#define ON(id, cond)                                                           \
  if (cond)                                                                    \
  m |= 1u << PP_FAULT_##id
  ON(LOSS, f->loss > 0);
  ON(JITTER, f->jitter_ns > 0);
  ON(SLOW, w->consume_ns > 0);
  ON(PAUSE, f->pause_ns > 0 && f->pause_ranks);
  ON(POST, w->post_delay_ns > 0 || w->consume_jitter_ns > 0);
  ON(CQ, f->cq_delay_ns > 0);
  ON(SCRAMBLE, f->scramble > 0);
  ON(SRQ, f->srq_delay_ns > 0);
  ON(QP_ERROR, f->qp_error_ns > 0);
  ON(BYZANTINE, f->byzantine > 0);
  ON(RKEY, f->rkey_ns > 0);
#undef ON
  return m;
}

/* ------------------------------------------------------------------ draws */

/* A non-empty random subset of ranks [0, n) (first 64), or of `only` when it is not empty. */
static uint64_t rank_subset(struct pp_prng *r, uint32_t n, uint64_t only)
{
  uint64_t all = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
  if (only & all)
    all &= only;
  uint64_t m = 0;
  while (!m)
    m = pp_prng_next(r) & all;
  return m;
}

/* ------------------------------------------------------------------ protocols */

/* The keys of a field table (prepost/param.h) as "  key: value" lines in its canonical text
 * (64KiB, 1500ns, 2ms: what the scenario parser reads back to the same value), but those in
 * skip (NULL-terminated, may be NULL); a "derived" key still 0 is left out (its default). */
static void write_params(FILE *out, const struct pp_param *t, size_t n, const void *obj,
                         const char *const *skip)
{
  for (size_t i = 0; i < n; i++) {
    bool skipped = false;
    for (const char *const *k = skip; k && *k && !skipped; k++)
      skipped = !strcmp(*k, t[i].key);
    if (skipped || (t[i].flags & PP_PARAM_F_DERIVED && pp_param_get(&t[i], obj) == 0))
      continue;
    char v[320]; /* a rank list of 64 ranks fits */
    pp_param_format(&t[i], obj, v, sizeof v);
    fprintf(out, "  %s: %s\n", t[i].key, v);
  }
}

/* Faults that apply to every protocol running the stream workload. */
#define STREAM_FAULTS                                                                             \
  (PP_FAULTS_ALL & ~(1u << PP_FAULT_SRQ)) /* srq: for protocols that use an SRQ */

/* The faults that apply to a protocol: the traffic workload posts its receives itself (no post
 * fault); the opt-in byzantine fault to a protocol that validates what its peers send. */
static uint32_t faults_of(const struct pp_proto_explore *x)
{
  uint32_t f = STREAM_FAULTS;
  if (x->workload == PP_WORKLOAD_TRAFFIC)
    f &= ~(1u << PP_FAULT_POST);
  if (x->validates_peers)
    f |= PP_FAULTS_OPT_IN;
  if (x->uses_srq) /* drawn only for a scenario whose parameters use the SRQ */
    f |= 1u << PP_FAULT_SRQ;
  return f;
}

/* Every protocol of the registry with explorer hooks (struct pp_proto_def.explore), in the
 * registry's order. */
struct pp_explore_gen pp_explore_gens[PP_MAX_PROTOCOLS];
static size_t pp_explore_ngens;

static const struct pp_proto_def *def_of(const struct pp_scenario *sc)
{
  return pp_proto_get(sc->sim.engine.protocol);
}

static void gen_def(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  struct pp_engine_cfg *e = &sc->sim.engine;
  const struct pp_explore_limits lim = {.max_ranks = sp->max_ranks,
                                        .max_messages = sp->max_messages,
                                        .max_size = sp->max_size,
                                        .bugs = sp->bugs,
                                        .seed = sc->sim.seed};
  def_of(sc)->explore->gen(r, &lim, e, pp_engine_cfg_proto_params(e));
}

/* its field table as its section (the hook's, or the def's under its name) */
static void write_def(FILE *out, const struct pp_scenario *sc, const char *section)
{
  const struct pp_proto_def *d = def_of(sc);
  const struct pp_proto_explore *x = d->explore;
  const struct pp_param *t = x->params ? x->params : d->params;
  size_t n = x->params ? x->nparams : d->nparams;
  if (strcmp(section, "top") || !n)
    return;
  fprintf(out, "%s:\n", x->section ? x->section : d->name);
  write_params(out, t, n, pp_engine_cfg_proto_params_c(&sc->sim.engine), NULL);
}

static bool reduce_def(struct pp_scenario *sc, unsigned k, const char **what)
{
  struct pp_engine_cfg *e = &sc->sim.engine;
  const struct pp_proto_def *d = def_of(sc);
  return d->explore->reduce && d->explore->reduce(e, pp_engine_cfg_proto_params(e), k, what);
}

static enum pp_inv check_def(const struct pp_scenario *sc, const struct pp_run_result *res,
                             char *why, size_t len)
{
  const struct pp_proto_def *d = def_of(sc);
  if (!d->explore->check || res->nranks == 0)
    return PP_INV_OK;
  struct pp_rank_stats *st = calloc(res->nranks, sizeof *st);
  if (!st) {
    snprintf(why, len, "out of memory for the protocol's check");
    return PP_INV_PROTOCOL;
  }
  for (uint32_t i = 0; i < res->nranks; i++)
    st[i] = res->ranks[i].stats;
  struct pp_proto_verdict v = {.ok = true};
  d->explore->check(&sc->sim.engine, pp_engine_cfg_proto_params_c(&sc->sim.engine), st,
                    res->nranks, &v);
  free(st);
  if (v.ok)
    return PP_INV_OK;
  snprintf(why, len, "%s", v.why);
  return PP_INV_PROTOCOL;
}

static bool have_gen(uint32_t id)
{
  for (size_t i = 0; i < pp_explore_ngens; i++)
    if (pp_explore_gens[i].protocol == id)
      return true;
  return false;
}

void pp_explore_gens_sync(void)
{
  for (uint32_t id = 0; id < pp_proto_count(); id++) {
    const struct pp_proto_def *d = pp_proto_get(id);
    const struct pp_proto_explore *x = d->explore;
    if (!x || !x->gen || have_gen(id) || pp_explore_ngens == PP_MAX_PROTOCOLS)
      continue;
    uint32_t bugs = x->engine_bugs & ((1u << PP_PROTO_BUG_SHIFT) - 1);
    for (uint32_t b = 0; b < d->nbugs; b++)
      bugs |= 1u << (PP_PROTO_BUG_SHIFT + b);
    pp_explore_gens[pp_explore_ngens++] = (struct pp_explore_gen){
        .name = d->name,
        .protocol = id,
        .flow_controlled = x->flow_controlled,
        .in_mix = x->in_mix,
        .faults = faults_of(x),
        .bugs = bugs,
        .gen = gen_def,
        .write = write_def,
        .reduce = reduce_def,
        .check = check_def,
        .def = d};
  }
}

size_t pp_explore_gen_count(void)
{
  pp_explore_gens_sync();
  return pp_explore_ngens;
}

int pp_explore_gen_by_name(const char *name)
{
  pp_explore_gens_sync();
  for (size_t i = 0; i < pp_explore_ngens; i++)
    if (!strcmp(name, pp_explore_gens[i].name))
      return (int)i;
  return -1;
}

const struct pp_explore_gen *pp_explore_gen_of(uint32_t p)
{
  pp_explore_gens_sync();
  for (size_t i = 0; i < pp_explore_ngens; i++)
    if (pp_explore_gens[i].protocol == p)
      return &pp_explore_gens[i];
  return NULL;
}

/* ------------------------------------------------------------------ generator */

void pp_explore_space_default(struct pp_explore_space *s)
{
  *s = (struct pp_explore_space){.gen = -1,
                                 .faults = PP_FAULTS_ALL,
                                 .fault_rate = 0.3,
                                 .max_ranks = 8,
                                 .max_messages = 200,
                                 .max_size = 64 * 1024};
}

static const struct pp_explore_gen *pick_gen(struct pp_prng *r, const struct pp_explore_space *sp)
{
  pp_explore_gens_sync();
  if (sp->gen >= 0 && (size_t)sp->gen < pp_explore_ngens)
    return &pp_explore_gens[sp->gen];
  /* with test bugs on, the mix is the protocols that have one of them (if any has) */
  uint32_t want = 0;
  for (size_t i = 0; i < pp_explore_ngens; i++)
    if (pp_explore_gens[i].in_mix && (pp_explore_gens[i].bugs & sp->bugs))
      want = sp->bugs;
  size_t n = 0;
  for (size_t i = 0; i < pp_explore_ngens; i++)
    n += pp_explore_gens[i].in_mix && (!want || (pp_explore_gens[i].bugs & want));
  size_t k = (size_t)pp_prng_below(r, n ? n : 1);
  for (size_t i = 0; i < pp_explore_ngens; i++)
    if (pp_explore_gens[i].in_mix && (!want || (pp_explore_gens[i].bugs & want)) && k-- == 0)
      return &pp_explore_gens[i];
  return &pp_explore_gens[0];
}

static const struct pp_proto_explore *explore_of(const struct pp_sim_config *s)
{
  const struct pp_proto_def *d = pp_proto_get(s->engine.protocol);
  return d ? d->explore : NULL;
}

/* How long the run should take without faults, generously (ns). */
static uint64_t estimate_ns(const struct pp_sim_config *s)
{
  const struct pp_proto_explore *x = explore_of(s);
  const struct pp_workload *w = &s->engine.workload;
  double bytes_ns = s->platform.bandwidth_bps / 8e9;
  uint64_t xfer = (uint64_t)(w->size / bytes_ns) + s->platform.latency_ns;
  uint64_t per_msg = w->interval_ns + 2 * xfer + 2000 + w->consume_ns + w->consume_jitter_ns;
  uint64_t t = 50000 + (uint64_t)w->messages * per_msg;
  if (x && !x->flow_controlled) /* RNR NAKs: each costs a timer */
    t += (uint64_t)w->messages * pp_rnr_timer_ns(s->engine.qp.min_rnr_timer);
  return t;
}

/* How long the run may take without faults: estimate_ns(), which times the faults, or for the
 * traffic workload a bound that counts its largest messages to every destination one at a time
 * with every round trip (an alltoall of rendezvous messages through a send queue of one WR
 * took 10 times the estimate). */
static uint64_t liveness_ns(const struct pp_sim_config *s)
{
  const struct pp_workload *w = &s->engine.workload;
  uint64_t t = estimate_ns(s);
  if (w->kind == PP_WORKLOAD_TRAFFIC) {
    double bytes_ns = s->platform.bandwidth_bps / 8e9;
    const struct pp_proto_explore *x = explore_of(s);
    uint32_t size = pp_traffic_of(&s->engine)->size_max > w->size ? pp_traffic_of(&s->engine)->size_max : w->size;
    uint64_t msgs = (uint64_t)w->messages *
                    (w->pattern == PP_PATTERN_ALLTOALL ? s->engine.nranks - 1 : 1);
    /* the protocol's round trips for the message (a rendezvous: RTS, then a CTS and a FIN per
     * fragment); with a send queue of one WR each WR also waits for its ACK */
    uint64_t rtt = 2 * s->platform.latency_ns + s->nic.ack_delay_ns + 2000;
    uint64_t trips = x && x->round_trips ? x->round_trips(&s->engine,
                                                          pp_engine_cfg_proto_params_c(&s->engine),
                                                          size)
                                         : 1;
    uint64_t xfer = (uint64_t)(size / bytes_ns) + s->platform.latency_ns;
    uint64_t per_msg =
        w->interval_ns + 2 * xfer + trips * rtt + w->consume_ns + w->consume_jitter_ns;
    if (50000 + msgs * per_msg > t)
      t = 50000 + msgs * per_msg;
  }
  return t;
}

/* The faults of a scenario; until_ns and the liveness bound come after. */
static void draw_faults(struct pp_prng *r, uint32_t mask, double rate, uint64_t est,
                        struct pp_scenario *sc)
{
  struct pp_sim_config *s = &sc->sim;
  struct pp_faults *f = &s->faults;
  struct pp_workload *w = &s->engine.workload;
  uint32_t n = s->engine.nranks;
  uint32_t on = 0;
  for (int i = 0; i < PP_FAULT_COUNT; i++) {
    /* the fatal faults end most runs early: rarer, so the others get whole runs */
    bool fatal = i == PP_FAULT_QP_ERROR || i == PP_FAULT_RKEY;
    if (mask >> i & 1 && pp_prng_chance(r, fatal && rate < 1 ? rate / 3 : rate))
      on |= 1u << i;
  }
  /* each fault draws its parameters whether it is on or not: switching one off (shrinking)
   * leaves the others' draws alone */
  double loss = 0.001 + 0.049 * pp_prng_unit(r);
  uint64_t jitter = pp_prng_log_range(r, 100, 20000);
  uint64_t consume = pp_prng_log_range(r, 1000, 50000), consume_ranks = pp_prng_chance(r, 0.5) ? 0 : rank_subset(r, n, 0);
  uint64_t pause_ranks = rank_subset(r, n, 0), pause_at = pp_prng_range(r, 0, est / 2),
           pause = pp_prng_log_range(r, 1000, 200000);
  uint64_t post_delay = pp_prng_log_range(r, 100, 50000), post_jitter = pp_prng_log_range(r, 100, 20000);
  uint64_t cq = pp_prng_log_range(r, 100, 20000);
  double scramble = 0.2 + 0.8 * pp_prng_unit(r);
  uint64_t scramble_ns = pp_prng_log_range(r, 100, 10000);
  uint64_t srq = pp_prng_log_range(r, 100, 20000);
  uint64_t qp_at = pp_prng_range(r, 1, est), qp_host = pp_prng_range(r, 0, n - 1), qp_idx = pp_prng_range(r, 0, 7);
  uint64_t rkey_at = pp_prng_range(r, 1, est), rkey_host = pp_prng_range(r, 0, n - 1);
  if (on >> PP_FAULT_LOSS & 1) {
    f->loss = loss;
    s->engine.qp.timeout = (uint8_t)pp_prng_range(r, 6, 10); /* retransmit within 0.25..4 ms */
  }
  if (on >> PP_FAULT_JITTER & 1)
    f->jitter_ns = jitter;
  if (on >> PP_FAULT_SLOW & 1) {
    w->consume_ns = consume;
    w->consume_ranks = consume_ranks;
  }
  if (on >> PP_FAULT_PAUSE & 1) {
    f->pause_ranks = pause_ranks;
    f->pause_at_ns = pause_at;
    f->pause_ns = pause;
  }
  if (on >> PP_FAULT_POST & 1) {
    w->post_delay_ns = post_delay;
    w->consume_jitter_ns = post_jitter;
  }
  if (on >> PP_FAULT_CQ & 1)
    f->cq_delay_ns = cq;
  if (on >> PP_FAULT_SCRAMBLE & 1) {
    f->scramble = scramble;
    f->scramble_ns = scramble_ns;
  }
  if (on >> PP_FAULT_SRQ & 1)
    f->srq_delay_ns = srq;
  if (on >> PP_FAULT_QP_ERROR & 1) {
    f->qp_error_ns = qp_at;
    f->qp_error_host = (uint32_t)qp_host;
    f->qp_error_qp = (uint32_t)qp_idx;
  }
  if (on >> PP_FAULT_RKEY & 1) {
    f->rkey_ns = rkey_at;
    f->rkey_host = (uint32_t)rkey_host;
  }
  /* opt-in faults draw only when asked for: the default mix's seeds stay what they were */
  if (mask & PP_FAULTS_OPT_IN) {
    double byz = 0.02 + 0.28 * pp_prng_unit(r);
    uint64_t byz_rank = pp_prng_range(r, 0, n - 1);
    if (on >> PP_FAULT_BYZANTINE & 1) {
      f->byzantine = byz;
      f->byzantine_rank = (uint32_t)byz_rank;
    }
  }
}

/* The quiet phase: faults stop at until_ns; every operation must be done by max_sim_time. */
void pp_explore_set_bounds(struct pp_scenario *sc, uint64_t until)
{
  struct pp_sim_config *s = &sc->sim;
  struct pp_faults *f = &s->faults;
  uint64_t est = liveness_ns(s);
  if (f->pause_ns && until < f->pause_at_ns + f->pause_ns)
    until = f->pause_at_ns + f->pause_ns;
  f->until_ns = pp_faults_of(sc) ? until : 0;
  /* liveness bound: twice the estimate after the faults stop, plus room for the longest
   * recovery timers (ACK timeouts with every retry, RNR timers) */
  uint64_t timers = pp_ack_timeout_ns(s->engine.qp.timeout) * (s->engine.qp.retry_cnt + 1u) +
                    8 * pp_rnr_timer_ns(s->engine.qp.min_rnr_timer);
  s->max_sim_time_ns = f->until_ns + 2 * est + timers + 20000000ull;
}

void pp_explore_generate(uint64_t seed, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  struct pp_prng r;
  pp_prng_seed(&r, pp_seed_derive(seed, PP_SEED_EXPLORE, 0));
  pp_scenario_defaults(sc);
  struct pp_sim_config *s = &sc->sim;
  const struct pp_explore_gen *g = pick_gen(&r, sp);
  snprintf(s->name, sizeof s->name, "explore-%" PRIu64, seed);
  s->seed = s->engine.seed = seed;
  pp_engine_cfg_protocol(&s->engine, pp_protocol_name(g->protocol)); /* and its defaults */
  s->engine.test_bugs = sp->bugs;
  /* ranks: mostly 2, sometimes a few more */
  uint32_t maxr = sp->max_ranks < 2 ? 2 : sp->max_ranks;
  uint32_t n = pp_prng_chance(&r, 0.5) ? 2 : (uint32_t)pp_prng_range(&r, 2, maxr < 4 ? maxr : 4);
  if (pp_prng_chance(&r, 0.15))
    n = (uint32_t)pp_prng_range(&r, 2, maxr);
  s->engine.nranks = n;
  /* platform and NIC */
  static const double bw[] = {25e9, 100e9, 200e9};
  s->platform.bandwidth_bps = bw[pp_prng_below(&r, 3)];
  s->platform.latency_ns = pp_prng_range(&r, 300, 5000);
  s->nic.train_max = pp_prng_chance(&r, 0.5) ? 16 : 1;
  s->nic.ack_every = (uint32_t)pp_prng_log_range(&r, 1, 32);
  s->nic.ack_delay_ns = pp_prng_chance(&r, 0.2) ? 0 : pp_prng_range(&r, 100, 4000);
  static const uint32_t mtus[] = {1024, 2048, 4096};
  /* QP */
  struct pp_qp_params *q = &s->engine.qp;
  q->min_rnr_timer = (uint8_t)pp_prng_range(&r, 1, 8);
  q->rnr_retry = pp_prng_chance(&r, 0.5) ? 7 : 0; /* RNR must be impossible: 0 is safe */
  q->timeout = (uint8_t)pp_prng_range(&r, 10, 14);
  q->retry_cnt = 7;
  q->max_rd_atomic = (uint8_t)pp_prng_range(&r, 1, 16);
  q->mtu = mtus[pp_prng_below(&r, 3)];
  q->sq_depth = (uint32_t)pp_prng_log_range(&r, 1, 256);
  q->rq_depth = (uint32_t)pp_prng_log_range(&r, 1, 128);
  /* workload */
  struct pp_workload *w = &s->engine.workload;
  w->kind = (enum pp_workload_kind)g->def->explore->workload; /* the protocol's gen draws its
                                                                 parameters */
  w->pattern = n % 2 == 0 && pp_prng_chance(&r, 0.5) ? PP_PATTERN_PAIR : PP_PATTERN_RING;
  w->messages = (uint32_t)pp_prng_log_range(&r, 1, sp->max_messages ? sp->max_messages : 1);
  uint32_t maxsz = sp->max_size < PP_MSG_HEADER ? PP_MSG_HEADER : sp->max_size;
  w->size = (uint32_t)pp_prng_log_range(&r, PP_MSG_HEADER, maxsz);
  w->interval_ns = pp_prng_chance(&r, 0.5) ? 0 : pp_prng_log_range(&r, 10, 5000);
  /* a bounded amount of work per sender (about 4 MiB): seeds stay fast under sanitizers */
  uint32_t pages = (w->size + 4095) / 4096, most = 1000 / pages;
  if (w->messages > most)
    w->messages = most ? most : 1;
  g->gen(&r, sp, sc);
  uint64_t est = estimate_ns(s);
  uint32_t mask = sp->faults & g->faults & ~(1u << PP_FAULT_SRQ);
  const struct pp_proto_explore *x = g->def->explore;
  if (x->uses_srq && x->uses_srq(pp_engine_cfg_proto_params_c(&s->engine)))
    mask |= sp->faults & g->faults & 1u << PP_FAULT_SRQ;
  draw_faults(&r, mask, sp->fault_rate, est, sc);
  if (s->faults.srq_delay_ns)
    s->engine.qp.rnr_retry = 7; /* WQEs the NIC hides: RNR whatever the credits, retried */
  est = estimate_ns(s);
  pp_explore_set_bounds(sc, pp_prng_range(&r, est / 4, est));
}

/* ------------------------------------------------------------------ description */

void pp_explore_describe(const struct pp_scenario *sc, char *buf, size_t len)
{
  const struct pp_sim_config *s = &sc->sim;
  const struct pp_workload *w = &s->engine.workload;
  char faults[256];
  pp_faults_format(pp_faults_of(sc), faults, sizeof faults);
  int at = snprintf(buf, len, "%s, %u ranks %s, %u x %u B, faults %s",
                    pp_protocol_name(s->engine.protocol), s->engine.nranks,
                    pp_pattern_name(w->pattern), w->messages, w->size, faults);
  for (int b = 0; b < PP_BUG_COUNT && at > 0 && (size_t)at < len; b++)
    if (s->engine.test_bugs >> b & 1)
      at += snprintf(buf + at, len - (size_t)at, ", bug %s", pp_bug_name((enum pp_bug)b));
  const struct pp_proto_def *d = pp_proto_get(s->engine.protocol);
  for (uint32_t b = 0; d && b < d->nbugs && at > 0 && (size_t)at < len; b++)
    if (s->engine.test_bugs >> (PP_PROTO_BUG_SHIFT + b) & 1)
      at += snprintf(buf + at, len - (size_t)at, ", bug %s", d->bugs[b].name);
}

/* ------------------------------------------------------------------ writer */

/* The keys of a scenario section beyond its main table `main` (and the traffic table, which the
 * writer gives its own place), as the parser lists them (pp_scenario_section_table): the NIC's
 * line_rate, the workload's slow_ranks. Each is written only when it differs from its default,
 * so a scenario that does not use one reads as before (a default NIC has no line_rate line),
 * and a non-default one survives the round trip. A composite key (nic.name, nic.rnr_delay) has
 * no member for the table to format: its shape is its section's own (a string, a mapping of
 * codes), so the writer writes it by hand. */
static void write_extras(FILE *out, const char *section, const struct pp_param *main,
                         const void *obj)
{
  const struct pp_param *t;
  size_t n;
  for (size_t i = 0; pp_scenario_section_table(section, i, &t, &n); i++)
    for (size_t k = 0; t != main && t != pp_traffic_param_table && k < n; k++) {
      if (t[k].kind == PP_PARAM_COMPOSITE || pp_param_get(&t[k], obj) == t[k].def)
        continue;
      char v[320]; /* a rank list of 64 ranks fits */
      pp_param_format(&t[k], obj, v, sizeof v);
      fprintf(out, "  %s: %s\n", t[k].key, v);
    }
}

int pp_scenario_write(FILE *out, const struct pp_scenario *sc, const char *comment)
{
  const struct pp_sim_config *s = &sc->sim;
  const struct pp_engine_cfg *e = &s->engine;
  const struct pp_workload *w = &e->workload;
  const struct pp_nic_profile *nic = &s->nic;
  const struct pp_qp_params *q = &e->qp;
  const struct pp_faults *f = &s->faults;
  const struct pp_explore_gen *g = pp_explore_gen_of(e->protocol);
  while (comment && *comment) {
    size_t n = strcspn(comment, "\n");
    fprintf(out, "# %.*s\n", (int)n, comment);
    comment += n + (comment[n] == '\n');
  }
  fprintf(out, "name: \"%s\"\nseed: %" PRIu64 "\nranks: %u\n", s->name, s->seed, e->nranks);
  if (s->platform.file[0])
    fprintf(out, "platform: \"%s\"\n", s->platform.file);
  else { /* the generated cluster: its table (bandwidth, latency), in a flow mapping */
    fprintf(out, "platform:\n  cluster: {");
    for (size_t i = 0; i < pp_cluster_param_count; i++) {
      char v[64];
      pp_param_format(&pp_cluster_param_table[i], &s->platform, v, sizeof v);
      fprintf(out, "%s%s: %s", i ? ", " : "", pp_cluster_param_table[i].key, v);
    }
    fprintf(out, "}\n");
  }
  /* the sections with a field table: every key, in its canonical text */
  fprintf(out, "nic:\n  name: \"%s\"\n", nic->name);
  write_params(out, pp_nic_param_table, pp_nic_param_count, nic, NULL);
  write_extras(out, "nic", pp_nic_param_table, nic); /* line_rate when not the default */
  bool rnr_any = false; /* a calibrated profile's RNR delays: composite, see write_extras */
  for (unsigned k = 0; k < 32; k++)
    if (nic->rnr_delay_ns[k]) {
      fprintf(out, "%s%u: %" PRIu64, rnr_any ? ", " : "  rnr_delay: {", k, nic->rnr_delay_ns[k]);
      rnr_any = true;
    }
  if (rnr_any)
    fprintf(out, "}\n");
  fprintf(out, "protocol: %s\n", pp_protocol_name(e->protocol));
  fprintf(out, "workload:\n");
  write_params(out, pp_workload_param_table, pp_workload_param_count, w, NULL);
  write_extras(out, "workload", pp_workload_param_table, w); /* slow_ranks when some */
  if (w->kind == PP_WORKLOAD_TRAFFIC) /* a "derived" key still 0 is left out */
    write_params(out, pp_traffic_param_table, pp_traffic_param_count, pp_traffic_of(e), NULL);
  fprintf(out, "qp:\n");
  write_params(out, pp_qp_param_table, pp_qp_param_count, q, NULL);
  /* every fault key in its canonical text, but the opt-in ones when off (absent from the other
   * scenarios) */
  const char *off[4] = {NULL}, **o = off;
  if (!f->pause_ranks)
    *o++ = "pause_ranks";
  if (!(f->byzantine > 0)) {
    *o++ = "byzantine";
    *o++ = "byzantine_rank";
  }
  fprintf(out, "faults:\n");
  write_params(out, pp_faults_param_table, pp_faults_param_count, f, off);
  static const char *const not_written[] = {"no_progress", "memory", NULL}; /* their defaults */
  fprintf(out, "limits:\n");
  write_params(out, pp_limits_param_table, pp_limits_param_count, s, not_written);
  if (g && g->write)
    g->write(out, sc, "top");
  if (e->test_bugs) {
    fprintf(out, "test_bugs: [");
    const char *sep = "";
    for (int b = 0; b < PP_BUG_COUNT; b++)
      if (e->test_bugs >> b & 1) {
        fprintf(out, "%s%s", sep, pp_bug_name((enum pp_bug)b));
        sep = ", ";
      }
    const struct pp_proto_def *d = pp_proto_get(e->protocol);
    for (uint32_t b = 0; d && b < d->nbugs; b++)
      if (e->test_bugs >> (PP_PROTO_BUG_SHIFT + b) & 1) {
        fprintf(out, "%s%s", sep, d->bugs[b].name);
        sep = ", ";
      }
    fprintf(out, "]\n");
  }
  return ferror(out) ? -1 : 0;
}

int pp_scenario_write_file(const char *path, const struct pp_scenario *sc, const char *comment)
{
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  int rc = pp_scenario_write(f, sc, comment);
  if (fclose(f) != 0)
    rc = -1;
  return rc;
}
