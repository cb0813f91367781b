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
#include "prepost/p2p.h"
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

/* Uniform in [lo, hi]. */
static uint64_t rnd(struct pp_prng *r, uint64_t lo, uint64_t hi)
{
  return hi <= lo ? lo : lo + pp_prng_below(r, hi - lo + 1);
}

/* log2 uniform in [lo, hi]: small values as often as large ones. */
static uint64_t logrnd(struct pp_prng *r, uint64_t lo, uint64_t hi)
{
  if (hi <= lo)
    return lo;
  double a = log((double)lo), b = log((double)hi);
  uint64_t x = (uint64_t)llround(exp(a + (b - a) * pp_prng_unit(r)));
  return x < lo ? lo : x > hi ? hi : x;
}

static bool chance(struct pp_prng *r, double p)
{
  return pp_prng_unit(r) < p;
}

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

static void gen_naive(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  (void)sp;
  /* the positive control: any rnr_retry; a small RNR timer keeps the runs short */
  sc->sim.engine.qp.rnr_retry = (uint8_t)rnd(r, 0, 7);
}

static void gen_ring(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  (void)sp;
  struct pp_ring_params *p = &sc->sim.engine.ring;
  p->slots = (uint32_t)logrnd(r, 1, 16);
  /* at most 16 chunks a message: chunking is exercised, the run stays short */
  uint32_t size = sc->sim.engine.workload.size, min = size / 16 > 64 ? size / 16 : 64;
  p->slot_size = (uint32_t)logrnd(r, min, min > 64 * 1024 ? min : 64 * 1024);
  p->channels = (uint32_t)rnd(r, 1, 3);
  p->credit_batch = (uint32_t)rnd(r, 1, p->slots);
  p->credit_idle_ns = chance(r, 0.5) ? 0 : logrnd(r, 100, 20000);
}

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
    char v[64];
    pp_param_format(&t[i], obj, v, sizeof v);
    fprintf(out, "  %s: %s\n", t[i].key, v);
  }
}

static void write_ring(FILE *out, const struct pp_scenario *sc, const char *section)
{
  const struct pp_ring_params *p = &sc->sim.engine.ring;
  if (strcmp(section, "top"))
    return;
  fprintf(out, "ring:\n");
  write_params(out, pp_ring_param_table, pp_ring_param_count, p, NULL);
}

static bool halve(uint32_t *v, uint32_t min)
{
  if (*v <= min)
    return false;
  *v = *v / 2 < min ? min : *v / 2;
  return true;
}

static bool reduce_ring(struct pp_scenario *sc, unsigned k, const char **what)
{
  struct pp_ring_params *ring = &sc->sim.engine.ring;
  switch (k) {
  case 0:
    *what = "one ring channel";
    if (ring->channels <= 1)
      return false;
    ring->channels = 1;
    return true;
  case 1:
    *what = "half the ring slots";
    if (!halve(&ring->slots, 1))
      return false;
    if (ring->credit_batch > ring->slots)
      ring->credit_batch = ring->slots;
    return true;
  case 2:
    *what = "half the slot size";
    return halve(&ring->slot_size, 64);
  case 3:
    *what = "credit at once";
    if (ring->credit_batch == 1 && ring->credit_idle_ns == 0)
      return false;
    ring->credit_batch = 1;
    ring->credit_idle_ns = 0;
    return true;
  default:
    return false;
  }
}

static enum pp_inv check_ring(const struct pp_scenario *sc, const struct pp_run_result *res,
                              char *why, size_t len)
{
  (void)sc;
  for (uint32_t i = 0; i < res->nranks; i++)
    if (res->ranks[i].stats.ring.violations) {
      snprintf(why, len, "rank %u: %" PRIu64 " ring protocol violations (a chunk in an unreleased "
                         "slot, out of sequence, a bad CTS entry or head)",
               i, res->ranks[i].stats.ring.violations);
      return PP_INV_PROTOCOL;
    }
  return PP_INV_OK;
}

/* The smallest window that keeps a traffic workload safe (no hang whatever the timing). An
 * ANY_SOURCE receive with a specific tag can take another source's message of that tag ahead of
 * the one it was posted for; with several sources and tags and a small window of receives and
 * sends, a receive can be left that no message will ever match while the senders wait for
 * receives posted after it: an unsafe MPI program (explore seed 20770), not a protocol bug. With
 * every receive posted at once each message finds one. The other modes match a source's
 * messages in its send order and need nothing. */
static uint32_t safe_window_min(const struct pp_scenario *sc)
{
  const struct pp_engine_cfg *e = &sc->sim.engine;
  const struct pp_traffic *t = &e->traffic;
  if (t->recv_mode != PP_RECV_ANY_SOURCE || t->tags <= 1 ||
      e->workload.pattern != PP_PATTERN_ALLTOALL || e->nranks < 3)
    return 1;
  return e->workload.messages * (e->nranks - 1);
}

/* p2p.srq (engine/proto/p2p/srq.c) in a third of the p2p seeds, always with its test bug: a
 * small pool, one channel; with the srq fault (the NIC hides posted WQEs: RNR whatever the
 * credits) rnr_retry 7. Drawn from a stream of its own, so the other draws of a seed stay. */
static void gen_p2p_srq(const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  struct pp_prng q;
  pp_prng_seed(&q, sc->sim.seed ^ 0x5e05e0f5e05ull);
  struct pp_p2p_params *p = &sc->sim.engine.p2p;
  bool bug = sp->bugs >> PP_BUG_SRQ_NO_CREDITS & 1;
  bool on = chance(&q, 1.0 / 3);
  uint32_t buffers = (uint32_t)logrnd(&q, 2, 64), limit = (uint32_t)rnd(&q, 1, 8);
  bool fault = chance(&q, sp->fault_rate);
  uint64_t delay = logrnd(&q, 100, 20000);
  if (!on && !bug)
    return;
  p->srq = true;
  p->channels = 1;
  p->srq_buffers = buffers;
  p->srq_limit = limit;
  if (fault && (sp->faults >> PP_FAULT_SRQ & 1)) {
    sc->sim.faults.srq_delay_ns = delay;
    sc->sim.engine.qp.rnr_retry = 7;
  }
}

/* eager / rndv over the traffic workload: sizes across the eager, RGET and RPUT ranges, every
 * receive mode (specific, any-tag, mixed, any-source, any), small credit and buffer pools. */
static void gen_p2p(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  struct pp_engine_cfg *e = &sc->sim.engine;
  struct pp_workload *w = &e->workload;
  struct pp_traffic *t = &e->traffic;
  struct pp_p2p_params *p = &e->p2p;
  w->kind = PP_WORKLOAD_TRAFFIC;
  if (e->nranks <= 8 && chance(r, 0.25))
    w->pattern = PP_PATTERN_ALLTOALL;
  uint32_t big = sp->max_size * 4u > w->size ? sp->max_size * 4u : w->size;
  t->size_max = (uint32_t)logrnd(r, w->size, big);
  t->dist = (uint8_t)pp_prng_below(r, PP_DIST_COUNT);
  t->recv_mode = (uint8_t)pp_prng_below(r, PP_RECV_MODE_COUNT);
  t->tags = (uint32_t)logrnd(r, 1, 16);
  t->window = (uint32_t)logrnd(r, 1, 32);
  if (t->window < safe_window_min(sc))
    t->window = safe_window_min(sc);
  p->eager_limit = (uint32_t)logrnd(r, 64, 16384);
  p->rget_limit = chance(r, 0.3) ? 0 : (uint32_t)logrnd(r, 1024, 256 * 1024);
  p->frag_size = chance(r, 0.5) ? 0 : (uint32_t)logrnd(r, 4096, 64 * 1024);
  p->pipeline = (uint32_t)rnd(r, 0, 4);
  p->channels = (uint32_t)rnd(r, 1, 3);
  p->credits = (uint32_t)logrnd(r, 1, 32);
  p->credit_threshold = (uint32_t)rnd(r, 1, p->credits);
  p->reply_slots = chance(r, 0.5) ? 0 : (uint32_t)rnd(r, 1, 8);
  p->send_buffers = chance(r, 0.5) ? 0 : (uint32_t)logrnd(r, 1, 64);
  p->rcache_entries = chance(r, 0.5) ? 0 : (uint32_t)logrnd(r, 1, 64);
  gen_p2p_srq(sp, sc);
}

static bool reduce_p2p(struct pp_scenario *sc, unsigned k, const char **what)
{
  struct pp_engine_cfg *e = &sc->sim.engine;
  struct pp_traffic *t = &e->traffic;
  struct pp_p2p_params *p = &e->p2p;
  switch (k) {
  case 0:
    *what = "pattern ring";
    if (e->workload.pattern != PP_PATTERN_ALLTOALL)
      return false;
    e->workload.pattern = PP_PATTERN_RING;
    return true;
  case 1:
    *what = "one p2p channel";
    if (p->channels <= 1)
      return false;
    p->channels = 1;
    return true;
  case 2:
    *what = "half the largest size";
    return halve(&t->size_max, e->workload.size);
  case 3:
    *what = "fixed sizes";
    if (t->dist == PP_DIST_FIXED)
      return false;
    t->dist = PP_DIST_FIXED;
    return true;
  case 4:
    *what = "specific receives";
    if (t->recv_mode == PP_RECV_SPECIFIC)
      return false;
    t->recv_mode = PP_RECV_SPECIFIC;
    return true;
  case 5:
    *what = "one tag";
    if (t->tags <= 1)
      return false;
    t->tags = 1;
    return true;
  case 6:
    *what = "half the window";
    return halve(&t->window, safe_window_min(sc));
  case 7:
    *what = "half the credits";
    if (!halve(&p->credits, 1))
      return false;
    if (p->credit_threshold > p->credits)
      p->credit_threshold = p->credits;
    return true;
  case 8:
    *what = "pipeline 1";
    if (p->pipeline == 1)
      return false;
    p->pipeline = 1;
    return true;
  case 9:
    *what = "default pools";
    if (!p->reply_slots && !p->send_buffers && !p->rcache_entries)
      return false;
    p->reply_slots = p->send_buffers = p->rcache_entries = 0;
    return true;
  case 10:
    *what = "no srq";
    if (!p->srq)
      return false;
    p->srq = false;
    p->srq_buffers = p->srq_limit = 0;
    return true;
  default:
    return false;
  }
}

static void write_p2p(FILE *out, const struct pp_scenario *sc, const char *section)
{
  const struct pp_engine_cfg *e = &sc->sim.engine;
  const struct pp_traffic *t = &e->traffic;
  const struct pp_p2p_params *p = &e->p2p;
  if (!strcmp(section, "workload")) { /* a "derived" key still 0 is left out */
    write_params(out, pp_traffic_param_table, pp_traffic_param_count, t, NULL);
    return;
  }
  fprintf(out, "p2p:\n");
  write_params(out, pp_p2p_param_table, pp_p2p_param_count, p, NULL);
}

/* Faults that apply to every protocol running the stream workload. */
#define STREAM_FAULTS                                                                             \
  (PP_FAULTS_ALL & ~(1u << PP_FAULT_SRQ)) /* srq: for protocols that use an SRQ */

/* The traffic workload posts its receives itself (no post fault); the SRQ fault with p2p.srq,
 * drawn by gen_p2p_srq (draw_faults draws it for no protocol). */
#define TRAFFIC_FAULTS (STREAM_FAULTS & ~(1u << PP_FAULT_POST))
#define P2P_FAULTS (TRAFFIC_FAULTS | 1u << PP_FAULT_SRQ)

/* The test bugs of the stream workload (the naive and ring protocols run it) and of p2p.c. */
#define STREAM_BUGS                                                                               \
  (1u << PP_BUG_EARLY_REPOST | 1u << PP_BUG_LOST_REPOST | 1u << PP_BUG_SEND_REUSE)
#define P2P_BUGS                                                                                  \
  (1u << PP_BUG_EARLY_CTS | 1u << PP_BUG_WILDCARD_ORDER | 1u << PP_BUG_SRQ_NO_CREDITS)

/* The registry: one entry per built-in protocol, then room for the registered ones. */
#define NBUILTIN_GENS 5
struct pp_explore_gen pp_explore_gens[NBUILTIN_GENS + PP_MAX_PROTOCOLS] = {
    {.name = "naive",
     .protocol = PP_PROTO_NAIVE,
     .flow_controlled = false,
     .in_mix = false,
     .faults = STREAM_FAULTS,
     .bugs = STREAM_BUGS,
     .gen = gen_naive},
    {.name = "ring-credits",
     .protocol = PP_PROTO_RING_CREDITS,
     .flow_controlled = true,
     .in_mix = true,
     .faults = STREAM_FAULTS | PP_FAULTS_OPT_IN,
     .bugs = STREAM_BUGS | 1u << PP_BUG_EARLY_CREDIT,
     .gen = gen_ring,
     .write = write_ring,
     .reduce = reduce_ring,
     .check = check_ring},
    {.name = "ring-cts",
     .protocol = PP_PROTO_RING_CTS,
     .flow_controlled = true,
     .in_mix = true,
     .faults = STREAM_FAULTS | PP_FAULTS_OPT_IN,
     .bugs = STREAM_BUGS | 1u << PP_BUG_EARLY_CREDIT,
     .gen = gen_ring,
     .write = write_ring,
     .reduce = reduce_ring,
     .check = check_ring},
    {.name = "eager",
     .protocol = PP_PROTO_EAGER,
     .flow_controlled = true,
     .in_mix = true,
     .faults = P2P_FAULTS | PP_FAULTS_OPT_IN,
     .bugs = P2P_BUGS,
     .gen = gen_p2p,
     .write = write_p2p,
     .reduce = reduce_p2p},
    {.name = "rndv",
     .protocol = PP_PROTO_RNDV,
     .flow_controlled = true,
     .in_mix = true,
     .faults = P2P_FAULTS | PP_FAULTS_OPT_IN,
     .bugs = P2P_BUGS,
     .gen = gen_p2p,
     .write = write_p2p,
     .reduce = reduce_p2p},
};
size_t pp_explore_ngens = NBUILTIN_GENS;

/* ---- a registered protocol's own hooks (struct pp_proto_explore) ---- */

static const struct pp_proto_def *def_of(const struct pp_scenario *sc)
{
  return pp_proto_get(sc->sim.engine.protocol);
}

static void gen_def(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc)
{
  (void)sp;
  struct pp_engine_cfg *e = &sc->sim.engine;
  def_of(sc)->explore->gen(r, e, pp_engine_cfg_proto_params(e));
}

/* its field table as the section named after it */
static void write_def(FILE *out, const struct pp_scenario *sc, const char *section)
{
  const struct pp_proto_def *d = def_of(sc);
  if (strcmp(section, "top") || !d->nparams)
    return;
  const void *prm = pp_engine_cfg_proto_params_c(&sc->sim.engine);
  fprintf(out, "%s:\n", d->name);
  for (size_t i = 0; i < d->nparams; i++) {
    char v[64];
    pp_param_format(&d->params[i], prm, v, sizeof v);
    fprintf(out, "  %s: %s\n", d->params[i].key, v);
  }
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

void pp_explore_gens_sync(void)
{
  for (uint32_t id = 0; id < pp_proto_count(); id++) {
    const struct pp_proto_def *d = pp_proto_get(id);
    bool have = false;
    for (size_t i = 0; i < pp_explore_ngens && !have; i++)
      have = pp_explore_gens[i].protocol == id;
    if (have || !d->explore || !d->explore->gen ||
        pp_explore_ngens == NBUILTIN_GENS + PP_MAX_PROTOCOLS)
      continue;
    uint32_t bugs = 0;
    for (uint32_t b = 0; b < d->nbugs; b++)
      bugs |= 1u << (PP_PROTO_BUG_SHIFT + b);
    pp_explore_gens[pp_explore_ngens++] = (struct pp_explore_gen){
        .name = d->name,
        .protocol = id,
        .flow_controlled = d->explore->flow_controlled,
        .in_mix = d->explore->in_mix,
        .faults = STREAM_FAULTS, /* it runs the stream workload, no SRQ */
        .bugs = bugs,
        .gen = gen_def,
        .write = write_def,
        .reduce = reduce_def,
        .check = check_def,
        .def = d};
  }
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

/* How long the run should take without faults, generously (ns). */
static uint64_t estimate_ns(const struct pp_sim_config *s)
{
  const struct pp_workload *w = &s->engine.workload;
  double bytes_ns = s->platform.bandwidth_bps / 8e9;
  uint64_t xfer = (uint64_t)(w->size / bytes_ns) + s->platform.latency_ns;
  uint64_t per_msg = w->interval_ns + 2 * xfer + 2000 + w->consume_ns + w->consume_jitter_ns;
  uint64_t t = 50000 + (uint64_t)w->messages * per_msg;
  if (s->engine.protocol == PP_PROTO_NAIVE) /* RNR NAKs: each costs a timer */
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
    struct pp_p2p_params p;
    pp_p2p_params_resolve(&s->engine, &p);
    uint32_t size = s->engine.traffic.size_max > w->size ? s->engine.traffic.size_max : w->size;
    uint64_t msgs = (uint64_t)w->messages *
                    (w->pattern == PP_PATTERN_ALLTOALL ? s->engine.nranks - 1 : 1);
    /* a rendezvous costs round trips: RTS, then a CTS and a FIN per fragment; with a send
     * queue of one WR each WR also waits for its ACK */
    uint64_t rtt = 2 * s->platform.latency_ns + s->nic.ack_delay_ns + 2000;
    uint64_t trips = size <= p.eager_limit ? 1 : 2 + 2 * ((uint64_t)size / p.frag_size + 1);
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
    if (mask >> i & 1 && chance(r, fatal && rate < 1 ? rate / 3 : rate))
      on |= 1u << i;
  }
  /* each fault draws its parameters whether it is on or not: switching one off (shrinking)
   * leaves the others' draws alone */
  double loss = 0.001 + 0.049 * pp_prng_unit(r);
  uint64_t jitter = logrnd(r, 100, 20000);
  uint64_t consume = logrnd(r, 1000, 50000), consume_ranks = chance(r, 0.5) ? 0 : rank_subset(r, n, 0);
  uint64_t pause_ranks = rank_subset(r, n, 0), pause_at = rnd(r, 0, est / 2),
           pause = logrnd(r, 1000, 200000);
  uint64_t post_delay = logrnd(r, 100, 50000), post_jitter = logrnd(r, 100, 20000);
  uint64_t cq = logrnd(r, 100, 20000);
  double scramble = 0.2 + 0.8 * pp_prng_unit(r);
  uint64_t scramble_ns = logrnd(r, 100, 10000);
  uint64_t srq = logrnd(r, 100, 20000);
  uint64_t qp_at = rnd(r, 1, est), qp_host = rnd(r, 0, n - 1), qp_idx = rnd(r, 0, 7);
  uint64_t rkey_at = rnd(r, 1, est), rkey_host = rnd(r, 0, n - 1);
  if (on >> PP_FAULT_LOSS & 1) {
    f->loss = loss;
    s->engine.qp.timeout = (uint8_t)rnd(r, 6, 10); /* retransmit within 0.25..4 ms */
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
    uint64_t byz_rank = rnd(r, 0, n - 1);
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
  pp_prng_seed(&r, seed ^ 0xe8b10e5eedull);
  pp_scenario_defaults(sc);
  struct pp_sim_config *s = &sc->sim;
  const struct pp_explore_gen *g = pick_gen(&r, sp);
  snprintf(s->name, sizeof s->name, "explore-%" PRIu64, seed);
  s->seed = s->engine.seed = seed;
  pp_engine_cfg_protocol(&s->engine, pp_protocol_name(g->protocol)); /* and its defaults */
  s->engine.test_bugs = sp->bugs;
  /* ranks: mostly 2, sometimes a few more */
  uint32_t maxr = sp->max_ranks < 2 ? 2 : sp->max_ranks;
  uint32_t n = chance(&r, 0.5) ? 2 : (uint32_t)rnd(&r, 2, maxr < 4 ? maxr : 4);
  if (chance(&r, 0.15))
    n = (uint32_t)rnd(&r, 2, maxr);
  s->engine.nranks = n;
  /* platform and NIC */
  static const double bw[] = {25e9, 100e9, 200e9};
  s->platform.bandwidth_bps = bw[pp_prng_below(&r, 3)];
  s->platform.latency_ns = rnd(&r, 300, 5000);
  s->nic.train_max = chance(&r, 0.5) ? 16 : 1;
  s->nic.ack_every = (uint32_t)logrnd(&r, 1, 32);
  s->nic.ack_delay_ns = chance(&r, 0.2) ? 0 : rnd(&r, 100, 4000);
  static const uint32_t mtus[] = {1024, 2048, 4096};
  /* QP */
  struct pp_qp_params *q = &s->engine.qp;
  q->min_rnr_timer = (uint8_t)rnd(&r, 1, 8);
  q->rnr_retry = chance(&r, 0.5) ? 7 : 0; /* RNR must be impossible: 0 is safe */
  q->timeout = (uint8_t)rnd(&r, 10, 14);
  q->retry_cnt = 7;
  q->max_rd_atomic = (uint8_t)rnd(&r, 1, 16);
  q->mtu = mtus[pp_prng_below(&r, 3)];
  q->sq_depth = (uint32_t)logrnd(&r, 1, 256);
  q->rq_depth = (uint32_t)logrnd(&r, 1, 128);
  /* workload */
  struct pp_workload *w = &s->engine.workload;
  w->kind = PP_WORKLOAD_STREAM;
  w->pattern = n % 2 == 0 && chance(&r, 0.5) ? PP_PATTERN_PAIR : PP_PATTERN_RING;
  w->messages = (uint32_t)logrnd(&r, 1, sp->max_messages ? sp->max_messages : 1);
  uint32_t maxsz = sp->max_size < PP_MSG_HEADER ? PP_MSG_HEADER : sp->max_size;
  w->size = (uint32_t)logrnd(&r, PP_MSG_HEADER, maxsz);
  w->interval_ns = chance(&r, 0.5) ? 0 : logrnd(&r, 10, 5000);
  /* a bounded amount of work per sender (about 4 MiB): seeds stay fast under sanitizers */
  uint32_t pages = (w->size + 4095) / 4096, most = 1000 / pages;
  if (w->messages > most)
    w->messages = most ? most : 1;
  g->gen(&r, sp, sc);
  uint64_t est = estimate_ns(s);
  draw_faults(&r, sp->faults & g->faults & ~(1u << PP_FAULT_SRQ), sp->fault_rate, est, sc);
  est = estimate_ns(s);
  pp_explore_set_bounds(sc, rnd(&r, est / 4, est));
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

static void write_mask(FILE *out, const char *key, uint64_t mask)
{
  fprintf(out, "  %s: [", key);
  const char *sep = "";
  for (int i = 0; i < 64; i++)
    if (mask >> i & 1) {
      fprintf(out, "%s%d", sep, i);
      sep = ", ";
    }
  fprintf(out, "]\n");
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
  else
    fprintf(out, "platform:\n  cluster: {bandwidth: %.17g, latency: %" PRIu64 "}\n",
            s->platform.bandwidth_bps, s->platform.latency_ns);
  /* the sections with a field table: every key, in its canonical text */
  fprintf(out, "nic:\n  name: \"%s\"\n", nic->name);
  write_params(out, pp_nic_param_table, pp_nic_param_count, nic, NULL);
  fprintf(out, "protocol: %s\n", pp_protocol_name(e->protocol));
  fprintf(out, "workload:\n");
  write_params(out, pp_workload_param_table, pp_workload_param_count, w, NULL);
  if (w->consume_ranks)
    write_mask(out, "slow_ranks", w->consume_ranks);
  if (g && g->write)
    g->write(out, sc, "workload");
  fprintf(out, "qp:\n");
  write_params(out, pp_qp_param_table, pp_qp_param_count, q, NULL);
  fprintf(out,
          "faults:\n  loss: %.17g\n  until: %" PRIu64 "\n  jitter: %" PRIu64
          "\n  scramble: %.17g\n  scramble_delay: %" PRIu64 "\n  srq_delay: %" PRIu64
          "\n  qp_error_at: %" PRIu64 "\n  qp_error_host: %u\n  qp_error_qp: %u\n"
          "  rkey_invalidate_at: %" PRIu64 "\n  rkey_host: %u\n  cq_delay: %" PRIu64
          "\n  pause_at: %" PRIu64 "\n  pause: %" PRIu64 "\n  order_bits: %u\n"
          "  order_mask: %" PRIu64 "\n  order_window: %" PRIu64 "\n",
          f->loss, f->until_ns, f->jitter_ns, f->scramble, f->scramble_ns, f->srq_delay_ns,
          f->qp_error_ns, f->qp_error_host, f->qp_error_qp, f->rkey_ns, f->rkey_host,
          f->cq_delay_ns, f->pause_at_ns, f->pause_ns, f->order_bits, f->order_mask,
          f->order_window_ns);
  if (f->pause_ranks)
    write_mask(out, "pause_ranks", f->pause_ranks);
  if (f->byzantine > 0) /* opt-in: absent from the other scenarios */
    fprintf(out, "  byzantine: %.17g\n  byzantine_rank: %u\n", f->byzantine, f->byzantine_rank);
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
