/*
 * The engine configuration in a trace header, both ways.
 *
 * Format 2 (written): every value of struct pp_engine_cfg as a key with its canonical text (STR),
 * through the field tables that already describe the configuration (prepost/param.h):
 *
 *   engine.protocol            the protocol's registry name; engine.plugin the plug-in's file
 *                              when a plug-in registered it
 *   engine.nranks, engine.seed, engine.test_bugs                  (CORE below)
 *   engine.qp.KEY              pp_qp_param_table
 *   engine.workload.KEY        pp_workload_param_table (kind: the workload registry's name),
 *                              pp_traffic_param_table, and consume_ranks (CORE)
 *   engine.p2p.KEY             pp_p2p_param_table
 *   engine.ring.KEY            pp_ring_param_table
 *   engine.collective.KEY      pp_coll_param_table, and root, slow_ranks (CORE)
 *   engine.script.progs/ops    the number of programs and of operations, then one line each:
 *   engine.script.prog.I       "ranks=0-2,5 first=0 n=7 repeat=0"
 *   engine.script.op.J         "isend peer=1 tag=5 comm=0 size=64 count=1 ns=0ns" (peer and tag
 *                              "any" for PP_ANY_SOURCE / PP_ANY_TAG)
 *   proto.KEY                  a plug-in's parameters (its own field table; the built-ins'
 *                              live in the sections above)
 *
 * The protocol's section (p2p, ring) and the workload's (the traffic keys, collective, script) are
 * written only for the protocol and workload that run: their parameters share the
 * configuration's proto_params / workload_params, so the header holds the whole configuration
 * (the rank is the create record's; the script ops' pad bytes are 0). A header of an older build
 * holds every section: another protocol's or workload's keys are checked and dropped.
 * Reading applies each key through the same table entry with the member's whole range as bounds
 * (0 in a derived key, a value a check would refuse: the header says what ran, the engine's
 * check judges it), refuses a key under engine. that this build does not know (a setting would
 * be lost) and a missing required one, and starts the others from their defaults.
 * tests/test_trace_cfg.c checks cfg -> header -> cfg is identical.
 *
 * Format 1 (read only: traces recorded before, the fuzz corpus): engine.cfg held the bytes of the
 * struct, read through a frozen copy of that layout (struct v1_cfg) when their size is its
 * size (or the size before proto_params was appended), else the readable engine.* keys of
 * V1_FIELDS. pp_trace_engine_cfg_set() still takes those names.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/proto.h"
#include "prepost/trace.h"

/* ------------------------------------------------------------------ format 2: the sections */

/* The values of the configuration no module table holds (ranks bounded by nranks, bitmasks of
 * ranks, the run's identity): keyed after the section they belong to. */
#define E struct pp_engine_cfg
static const struct pp_param CORE[] = {
    PP_PARAM_KEYED("nranks", E, nranks, PP_PARAM_UINT, 0, UINT32_MAX, 0, "ranks", NULL, 0),
    PP_PARAM_KEYED("seed", E, seed, PP_PARAM_UINT, 0, UINT64_MAX, 0, "the seed", NULL, 0),
    PP_PARAM_KEYED("test_bugs", E, test_bugs, PP_PARAM_UINT, 0, UINT32_MAX, 0,
                   "test-only injected bugs (bits)", NULL, 0),
    PP_PARAM_KEYED("workload.consume_ranks", E, workload.consume_ranks, PP_PARAM_UINT, 0,
                   UINT64_MAX, 0, "the slow consumers (bitmask of the first 64 ranks)", NULL, 0),
};
#undef E
#define K struct pp_coll_params
static const struct pp_param COLL_CORE[] = {
    PP_PARAM_KEYED("root", K, root, PP_PARAM_UINT, 0, UINT32_MAX, 0, "broadcast's root", NULL, 0),
    PP_PARAM_KEYED("slow_ranks", K, slow_ranks, PP_PARAM_UINT, 0, UINT64_MAX, 0,
                   "the slow ranks (bitmask of the first 64)", NULL, 0),
};
#undef K
static const size_t CORE_COUNT = sizeof(CORE) / sizeof(CORE[0]);
static const size_t COLL_CORE_COUNT = sizeof(COLL_CORE) / sizeof(COLL_CORE[0]);

/* Where a section's struct is: in the configuration itself (always there), or the protocol's or
 * the workload's parameters (there only for the protocols / the workload they belong to). */
static void *at_cfg(const struct pp_engine_cfg *c)
{
  return (void *)(uintptr_t)c;
}
static void *at_qp(const struct pp_engine_cfg *c)
{
  return (void *)(uintptr_t)&c->qp;
}
static void *at_workload(const struct pp_engine_cfg *c)
{
  return (void *)(uintptr_t)&c->workload;
}
static void *at_traffic(const struct pp_engine_cfg *c)
{
  return c->workload.kind == PP_WORKLOAD_TRAFFIC ? pp_traffic_of(c) : NULL;
}
static void *at_p2p(const struct pp_engine_cfg *c)
{
  return pp_engine_cfg_is_p2p(c) ? pp_p2p_params_of(c) : NULL;
}
static void *at_ring(const struct pp_engine_cfg *c)
{
  return pp_engine_cfg_is_ring(c) ? pp_ring_params_of(c) : NULL;
}
static void *at_coll(const struct pp_engine_cfg *c)
{
  return c->workload.kind == PP_WORKLOAD_COLLECTIVE ? pp_coll_params_of(c) : NULL;
}

static const struct section {
  const char *prefix;
  const struct pp_param *t;
  const size_t *n;
  void *(*at)(const struct pp_engine_cfg *c); /* its struct; NULL: not this configuration's */
  bool own; /* a protocol's or workload's parameters */
} SECTIONS[] = {
    {"engine.", CORE, &CORE_COUNT, at_cfg, false},
    {"engine.qp.", pp_qp_param_table, &pp_qp_param_count, at_qp, false},
    {"engine.workload.", pp_workload_param_table, &pp_workload_param_count, at_workload, false},
    {"engine.workload.", pp_traffic_param_table, &pp_traffic_param_count, at_traffic, true},
    {"engine.p2p.", pp_p2p_param_table, &pp_p2p_param_count, at_p2p, true},
    {"engine.ring.", pp_ring_param_table, &pp_ring_param_count, at_ring, true},
    {"engine.collective.", pp_coll_param_table, &pp_coll_param_count, at_coll, true},
    {"engine.collective.", COLL_CORE, &COLL_CORE_COUNT, at_coll, true},
};
#define NSECTIONS (sizeof(SECTIONS) / sizeof(SECTIONS[0]))

static size_t sec_count(const struct section *s)
{
  return *s->n;
}

/* The workload's kind is the workload registry's id (a plug-in's beyond the built-in names). */
static bool is_kind(const struct section *s, const struct pp_param *p)
{
  return s->t == pp_workload_param_table && p->offset == offsetof(struct pp_workload, kind);
}

static size_t format_entry(const struct section *s, const struct pp_param *p,
                           const struct pp_engine_cfg *c, char *buf, size_t len)
{
  const void *obj = s->at(c);
  if (is_kind(s, p)) {
    int w = snprintf(buf, len, "%s", pp_workload_name((enum pp_workload_kind)c->workload.kind));
    return w < 0 ? 0 : (size_t)w;
  }
  return pp_param_format(p, obj, buf, len);
}

/* The text through entry p into obj, within the member's whole range (enum: its names; strict:
 * the table's bounds, for settings a user gives). */
static enum pp_status set_entry(const struct section *s, const struct pp_param *p,
                                struct pp_engine_cfg *c, void *obj, const char *text, bool strict,
                                char *why, size_t whylen)
{
  if (is_kind(s, p)) {
    int k = pp_workload_from_name(text);
    if (k < 0) {
      snprintf(why, whylen, "must name a workload (stream, script, traffic, app, collective, "
                            "pingpong or a plug-in's)");
      return PP_INVALID;
    }
    return pp_engine_cfg_workload(c, (uint32_t)k); /* and its parameters' defaults */
  }
  struct pp_param q = *p;
  if (!strict && q.kind != PP_PARAM_ENUM) {
    q.min = 0;
    q.max = q.width == 8 ? UINT64_MAX : (1ull << (8 * q.width)) - 1;
  }
  return pp_param_set(&q, obj, text, strlen(text), why, whylen);
}

static const struct pp_param *entry_of(const char *key, const struct section **sec)
{
  for (size_t i = 0; i < NSECTIONS; i++) {
    size_t pl = strlen(SECTIONS[i].prefix);
    if (strncmp(key, SECTIONS[i].prefix, pl))
      continue;
    const struct pp_param *p = pp_param_find(SECTIONS[i].t, sec_count(&SECTIONS[i]), key + pl);
    if (p) {
      *sec = &SECTIONS[i];
      return p;
    }
  }
  return NULL;
}

/* ------------------------------------------------------------------ format 2: the script */

static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t put(char *buf, size_t len, size_t at, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, fmt, ap);
  va_end(ap);
  return at + (w < 0 ? 0 : (size_t)w);
}

/* "0-2,5" ("none" for no rank): at most 1024 ranks, about 2.6 KB for alternating bits. */
#define PROG_TEXT_MAX 4096

static size_t format_ranks(const uint64_t *bits, char *buf, size_t len, size_t at)
{
  bool any = false;
  for (uint32_t r = 0; r < 1024; r++) {
    if (!(bits[r / 64] >> (r % 64) & 1))
      continue;
    uint32_t e = r;
    while (e + 1 < 1024 && bits[(e + 1) / 64] >> ((e + 1) % 64) & 1)
      e++;
    at = put(buf, len, at, e == r ? "%s%" PRIu32 : "%s%" PRIu32 "-%" PRIu32, any ? "," : "", r,
             e);
    any = true;
    r = e;
  }
  return any ? at : put(buf, len, at, "none");
}

static size_t format_prog(const struct pp_script_prog *pg, char *buf, size_t len)
{
  size_t at = format_ranks(pg->ranks, buf, len, put(buf, len, 0, "ranks="));
  return put(buf, len, at, " first=%u n=%u repeat=%" PRIu32, pg->first, pg->n, pg->repeat);
}

static size_t format_any(uint32_t v, char *buf, size_t len, size_t at)
{
  return v == UINT32_MAX ? put(buf, len, at, "any") : put(buf, len, at, "%" PRIu32, v);
}

static size_t format_op(const struct pp_script_op *op, char *buf, size_t len)
{
  char size[32], ns[32];
  pp_format_size(op->size, size, sizeof size);
  pp_format_duration(op->ns, ns, sizeof ns);
  size_t at = put(buf, len, 0, "%s peer=", pp_script_op_name((enum pp_script_op_kind)op->kind));
  at = format_any(op->peer, buf, len, at);
  at = format_any(op->tag, buf, len, put(buf, len, at, " tag="));
  return put(buf, len, at, " comm=%" PRIu32 " size=%s count=%" PRIu32 " ns=%s", op->comm, size,
             op->count, ns);
}

/* The next blank-separated word of *s as [*w, *w + *n). */
static bool word(const char **s, const char **w, size_t *n)
{
  while (**s == ' ')
    (*s)++;
  *w = *s;
  while (**s && **s != ' ')
    (*s)++;
  *n = (size_t)(*s - *w);
  return *n > 0;
}

/* "KEY=VALUE" words, each of keys[] exactly once: vals[i] / lens[i]. */
static bool kv_words(const char *s, const char *const *keys, size_t nkeys, const char **vals,
                     size_t *lens, const char **bad)
{
  const char *w;
  size_t n;
  for (size_t i = 0; i < nkeys; i++)
    vals[i] = NULL;
  while (word(&s, &w, &n)) {
    const char *eq = memchr(w, '=', n);
    size_t i = 0;
    while (eq && i < nkeys && (strlen(keys[i]) != (size_t)(eq - w) || memcmp(w, keys[i], (size_t)(eq - w))))
      i++;
    if (!eq || i == nkeys || vals[i]) {
      *bad = w;
      return false;
    }
    vals[i] = eq + 1;
    lens[i] = n - (size_t)(eq + 1 - w);
  }
  for (size_t i = 0; i < nkeys; i++)
    if (!vals[i]) {
      *bad = keys[i];
      return false;
    }
  return true;
}

static bool parse_u32_any(const char *s, size_t n, bool any_ok, uint32_t *out)
{
  uint64_t v;
  if (any_ok && n == 3 && !memcmp(s, "any", 3)) {
    *out = UINT32_MAX;
    return true;
  }
  if (pp_parse_uint(s, n, 0, UINT32_MAX, &v, NULL, 0) != PP_OK)
    return false;
  *out = (uint32_t)v;
  return true;
}

static bool parse_ranks(const char *s, size_t n, uint64_t *bits)
{
  memset(bits, 0, 1024 / 8);
  if (n == 4 && !memcmp(s, "none", 4))
    return true;
  const char *end = s + n;
  while (s < end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *stop = comma ? comma : end, *dash = memchr(s, '-', (size_t)(stop - s));
    uint64_t a, b;
    if (pp_parse_uint(s, (size_t)((dash ? dash : stop) - s), 0, 1023, &a, NULL, 0) != PP_OK ||
        (dash && pp_parse_uint(dash + 1, (size_t)(stop - dash - 1), a, 1023, &b, NULL, 0) != PP_OK))
      return false;
    for (uint64_t r = a; r <= (dash ? b : a); r++)
      bits[r / 64] |= 1ull << (r % 64);
    if (comma && comma + 1 == end)
      return false;
    s = comma ? comma + 1 : end;
  }
  return true;
}

static enum pp_status parse_prog(const char *s, struct pp_script_prog *pg, char *why,
                                 size_t whylen)
{
  static const char *const keys[] = {"ranks", "first", "n", "repeat"};
  const char *v[4], *bad = NULL;
  size_t l[4];
  uint64_t first, n, repeat;
  if (!kv_words(s, keys, 4, v, l, &bad) || !parse_ranks(v[0], l[0], pg->ranks) ||
      pp_parse_uint(v[1], l[1], 0, UINT16_MAX, &first, NULL, 0) != PP_OK ||
      pp_parse_uint(v[2], l[2], 0, UINT16_MAX, &n, NULL, 0) != PP_OK ||
      pp_parse_uint(v[3], l[3], 0, UINT32_MAX, &repeat, NULL, 0) != PP_OK) {
    snprintf(why, whylen, "'%s' is not 'ranks=R first=F n=N repeat=K'", s);
    return PP_PARSE;
  }
  pg->first = (uint16_t)first;
  pg->n = (uint16_t)n;
  pg->repeat = (uint32_t)repeat;
  return PP_OK;
}

static enum pp_status parse_op(const char *s, struct pp_script_op *op, char *why, size_t whylen)
{
  static const char *const keys[] = {"peer", "tag", "comm", "size", "count", "ns"};
  const char *w, *v[6], *bad = NULL, *rest = s;
  size_t n, l[6];
  char name[32];
  uint64_t size;
  memset(op, 0, sizeof *op);
  int k = word(&rest, &w, &n) && n < sizeof name ? (memcpy(name, w, n), name[n] = '\0',
                                                    pp_script_op_from_name(name))
                                                 : -1;
  if (k < 0 || !kv_words(rest, keys, 6, v, l, &bad) ||
      !parse_u32_any(v[0], l[0], true, &op->peer) || !parse_u32_any(v[1], l[1], true, &op->tag) ||
      !parse_u32_any(v[2], l[2], false, &op->comm) ||
      pp_parse_size(v[3], l[3], 0, UINT32_MAX, &size, NULL, 0) != PP_OK ||
      !parse_u32_any(v[4], l[4], false, &op->count) ||
      pp_parse_duration(v[5], l[5], 0, UINT64_MAX, &op->ns, NULL, 0) != PP_OK) {
    snprintf(why, whylen, "'%s' is not 'OP peer=P tag=T comm=C size=S count=N ns=D'", s);
    return PP_PARSE;
  }
  op->kind = (uint8_t)k;
  op->size = (uint32_t)size;
  return PP_OK;
}

/* ------------------------------------------------------------------ format 2: writing */

struct emit {
  enum pp_status (*fn)(void *ctx, const char *key, const char *value);
  void *ctx;
};

static enum pp_status each_key(const struct pp_engine_cfg *c, const struct emit *em)
{
  char key[128], val[PROG_TEXT_MAX];
  enum pp_status s = em->fn(em->ctx, "engine.protocol", pp_protocol_name(c->protocol));
  for (size_t i = 0; s == PP_OK && i < NSECTIONS; i++)
    for (size_t j = 0; s == PP_OK && SECTIONS[i].at(c) && j < sec_count(&SECTIONS[i]); j++) {
      const struct pp_param *p = &SECTIONS[i].t[j];
      snprintf(key, sizeof key, "%s%s", SECTIONS[i].prefix, p->key);
      format_entry(&SECTIONS[i], p, c, val, sizeof val);
      s = em->fn(em->ctx, key, val);
    }
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  const void *prm = pp_engine_cfg_proto_params_c(c);
  const char *plugin = pp_proto_plugin(c->protocol);
  if (prm && plugin) { /* a plug-in's: the built-ins' are sections */
    if (s == PP_OK && plugin)
      s = em->fn(em->ctx, "engine.plugin", plugin);
    for (size_t i = 0; s == PP_OK && d && i < d->nparams; i++) {
      snprintf(key, sizeof key, "proto.%s", d->params[i].key);
      pp_param_format(&d->params[i], prm, val, sizeof val);
      s = em->fn(em->ctx, key, val);
    }
  }
  const struct pp_script *sc = pp_script_of(c);
  if (c->workload.kind != PP_WORKLOAD_SCRIPT)
    return s;
  snprintf(val, sizeof val, "%u", sc->nprogs);
  if (s == PP_OK)
    s = em->fn(em->ctx, "engine.script.progs", val);
  snprintf(val, sizeof val, "%u", sc->nops);
  if (s == PP_OK)
    s = em->fn(em->ctx, "engine.script.ops", val);
  for (unsigned i = 0; s == PP_OK && i < sc->nprogs && i < PP_SCRIPT_MAX_PROGS; i++) {
    snprintf(key, sizeof key, "engine.script.prog.%u", i);
    format_prog(&sc->prog[i], val, sizeof val);
    s = em->fn(em->ctx, key, val);
  }
  for (unsigned i = 0; s == PP_OK && i < sc->nops && i < PP_SCRIPT_MAX_OPS; i++) {
    snprintf(key, sizeof key, "engine.script.op.%u", i);
    format_op(&sc->op[i], val, sizeof val);
    s = em->fn(em->ctx, key, val);
  }
  return s;
}

static enum pp_status emit_kv(void *ctx, const char *key, const char *value)
{
  return pp_trace_kv_str(ctx, key, value);
}

enum pp_status pp_trace_kv_engine_cfg(struct pp_trace_writer *w, const struct pp_engine_cfg *c)
{
  return each_key(c, &(struct emit){emit_kv, w});
}

struct each_ctx {
  void (*fn)(void *ctx, const char *key, const char *value);
  void *ctx;
};

static enum pp_status emit_each(void *ctx, const char *key, const char *value)
{
  struct each_ctx *e = ctx;
  e->fn(e->ctx, key, value);
  return PP_OK;
}

void pp_trace_engine_cfg_each(const struct pp_engine_cfg *c,
                              void (*fn)(void *ctx, const char *key, const char *value),
                              void *ctx)
{
  struct each_ctx e = {fn, ctx};
  (void)each_key(c, &(struct emit){emit_each, &e}); /* emit_each cannot fail */
}

/* ------------------------------------------------------------------ format 1 */

enum cfg_kind { K_UINT, K_PROTOCOL, K_WORKLOAD, K_PATTERN };

#define F(key, field, kind)                                                    \
  {key, kind, at_cfg, offsetof(struct pp_engine_cfg, field),                   \
   sizeof(((struct pp_engine_cfg *)0)->field)}
#define FR(key, field)                                                         \
  {key, K_UINT, at_ring, offsetof(struct pp_ring_params, field),               \
   sizeof(((struct pp_ring_params *)0)->field)}
#define FC(key, field)                                                         \
  {key, K_UINT, at_coll, offsetof(struct pp_coll_params, field),               \
   sizeof(((struct pp_coll_params *)0)->field)}

/* The readable keys format 1 wrote beside the raw bytes (U64, or STR for the names): of the
 * configuration, or of its protocol's / workload's parameters (at: NULL when they are another's;
 * such a key is then dropped). */
static const struct cfg_field {
  const char *key;
  enum cfg_kind kind;
  void *(*at)(const struct pp_engine_cfg *c);
  size_t off, size;
} V1_FIELDS[] = {
    F("engine.nranks", nranks, K_UINT),
    F("engine.protocol", protocol, K_PROTOCOL),
    F("engine.seed", seed, K_UINT),
    F("engine.qp.min_rnr_timer", qp.min_rnr_timer, K_UINT),
    F("engine.qp.rnr_retry", qp.rnr_retry, K_UINT),
    F("engine.qp.timeout", qp.timeout, K_UINT),
    F("engine.qp.retry_cnt", qp.retry_cnt, K_UINT),
    F("engine.qp.max_rd_atomic", qp.max_rd_atomic, K_UINT),
    F("engine.qp.mtu", qp.mtu, K_UINT),
    F("engine.qp.sq_depth", qp.sq_depth, K_UINT),
    F("engine.qp.rq_depth", qp.rq_depth, K_UINT),
    F("engine.workload.kind", workload.kind, K_WORKLOAD),
    F("engine.workload.pattern", workload.pattern, K_PATTERN),
    F("engine.workload.messages", workload.messages, K_UINT),
    F("engine.workload.size", workload.size, K_UINT),
    F("engine.workload.interval_ns", workload.interval_ns, K_UINT),
    F("engine.workload.consume_ns", workload.consume_ns, K_UINT),
    F("engine.workload.consume_ranks", workload.consume_ranks, K_UINT),
    FR("engine.ring.slots", slots),
    FR("engine.ring.slot_size", slot_size),
    FR("engine.ring.channels", channels),
    FR("engine.ring.credit_batch", credit_batch),
    FR("engine.ring.credit_idle_ns", credit_idle_ns),
    FC("engine.coll.bytes", bytes),
    FC("engine.coll.chunk", chunk),
    FC("engine.coll.window", window),
    FC("engine.coll.iterations", iterations),
    FC("engine.coll.compute_ns", compute_ns),
};
#undef F
#undef FR
#undef FC

#define NV1 (sizeof(V1_FIELDS) / sizeof(V1_FIELDS[0]))

/* 0 when v fits the field (dropped when it is another protocol's or workload's). The protocol
 * and the workload kind are chosen with their parameters' defaults. */
static int set_field(struct pp_engine_cfg *c, const struct cfg_field *f, uint64_t v)
{
  if (f->size < 8 && v >> (8 * f->size))
    return -1;
  if (f->kind == K_PROTOCOL)
    return pp_engine_cfg_protocol(c, pp_protocol_name((uint32_t)v)) == PP_OK ? 0 : -1;
  if (f->kind == K_WORKLOAD)
    return pp_engine_cfg_workload(c, (uint32_t)v) == PP_OK ? 0 : -1;
  void *obj = f->at(c);
  if (obj)
    pp_param_put(&(struct pp_param){.width = (uint8_t)f->size, .offset = (uint32_t)f->off}, obj,
                 v);
  return 0;
}

static int enum_value(enum cfg_kind k, const char *name)
{
  switch (k) {
  case K_PROTOCOL:
    return pp_protocol_from_name(name);
  case K_WORKLOAD:
    return pp_workload_from_name(name);
  case K_PATTERN:
    return pp_pattern_from_name(name);
  default:
    return -1;
  }
}

static const struct cfg_field *v1_field_of(const char *key)
{
  for (size_t i = 0; i < NV1; i++)
    if (!strcmp(V1_FIELDS[i].key, key))
      return &V1_FIELDS[i];
  return NULL;
}

static enum pp_status v1_set(struct pp_engine_cfg *c, const struct cfg_field *f, const char *key,
                             const char *value, char *err, size_t errlen)
{
  if (!f->at(c)) {
    snprintf(err, errlen, "%s: not a parameter of protocol '%s' with workload '%s'", key,
             pp_protocol_name(c->protocol),
             pp_workload_name((enum pp_workload_kind)c->workload.kind));
    return PP_INVALID;
  }
  if (f->kind != K_UINT) {
    int v = enum_value(f->kind, value);
    if (v < 0) {
      snprintf(err, errlen, "%s: unknown name '%s'", key, value);
      return PP_INVALID;
    }
    set_field(c, f, (uint64_t)v);
    return PP_OK;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(value, &end, 0);
  if (!*value || *value == '-' || errno || *end || set_field(c, f, v)) {
    snprintf(err, errlen, "%s: '%s' is not an integer that fits the field", key, value);
    return PP_INVALID;
  }
  return PP_OK;
}

enum pp_status pp_trace_engine_cfg_set(struct pp_engine_cfg *c, const char *key,
                                       const char *value, char *err, size_t errlen)
{
  const struct section *sec;
  const struct pp_param *p = entry_of(key, &sec);
  if (p) {
    char why[160];
    void *obj = sec->at(c);
    if (!obj) {
      snprintf(err, errlen, "%s: not a parameter of protocol '%s' with workload '%s'", key,
               pp_protocol_name(c->protocol),
               pp_workload_name((enum pp_workload_kind)c->workload.kind));
      return PP_INVALID;
    }
    if (set_entry(sec, p, c, obj, value, true, why, sizeof why) == PP_OK)
      return PP_OK;
    snprintf(err, errlen, "%s %s, got '%s'", key, why, value);
    return PP_INVALID;
  }
  if (!strcmp(key, "engine.protocol")) {
    if (pp_engine_cfg_protocol(c, value) == PP_OK)
      return PP_OK;
    snprintf(err, errlen, "%s: unknown protocol '%s'", key, value);
    return PP_INVALID;
  }
  const struct cfg_field *f = v1_field_of(key); /* the names format 1 used */
  if (f)
    return v1_set(c, f, key, value, err, errlen);
  snprintf(err, errlen, "unknown engine key '%s'", key);
  return PP_NOTFOUND;
}

/* The protocol by its name (and its plug-in when the name is unknown); PP_NOTFOUND with the
 * sentence in err. Its parameters at their defaults. */
static enum pp_status set_protocol(const struct pp_trace *t, const char *name,
                                   struct pp_engine_cfg *c, char *err, size_t errlen)
{
  if (pp_engine_cfg_protocol(c, name) == PP_OK)
    return PP_OK;
  const struct pp_trace_kv *pl = pp_trace_kv_find(t, "engine.plugin");
  if (pl && pl->type == PP_TKV_STR)
    snprintf(err, errlen, "the trace's protocol '%s' comes from the plug-in %s, which is not "
             "loaded: give it with --plugin PATH (or PREPOST_PLUGINS)", name, pl->s);
  else
    snprintf(err, errlen, "the trace's protocol '%s' is not known to this build", name);
  return PP_NOTFOUND;
}

/* A plug-in's proto.* keys (the built-ins' parameters are in the struct or the sections). */
static enum pp_status proto_keys(const struct pp_trace *t, struct pp_engine_cfg *c, bool strict,
                                 size_t *used, char *err, size_t errlen)
{
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  void *prm = pp_engine_cfg_proto_params(c);
  if (!prm || !pp_proto_plugin(c->protocol))
    return PP_OK;
  for (size_t i = 0; d && i < d->nparams; i++) {
    char key[96], why[160];
    snprintf(key, sizeof key, "proto.%s", d->params[i].key);
    const struct pp_trace_kv *kv = pp_trace_kv_find(t, key);
    if (!kv)
      continue;
    ++*used;
    struct pp_param q = d->params[i];
    if (!strict && q.kind != PP_PARAM_ENUM) { /* as the sections: what ran, the check judges */
      q.min = 0;
      q.max = q.width == 8 ? UINT64_MAX : (1ull << (8 * q.width)) - 1;
    }
    if (kv->type != PP_TKV_STR ||
        pp_param_set(&q, prm, kv->s, strlen(kv->s), why, sizeof why) != PP_OK) {
      snprintf(err, errlen, "header key %s: %s", key, kv->type == PP_TKV_STR ? why : "not text");
      return PP_PARSE;
    }
  }
  return PP_OK;
}

/* Format 1 with the raw bytes: the protocol by its name, a plug-in's proto.* keys. */
static enum pp_status v1_proto(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                               size_t errlen)
{
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "engine.protocol");
  if (!name || name->type != PP_TKV_STR)
    return PP_OK; /* an older trace: the raw bytes' id stands */
  struct pp_engine_cfg keep = *c;
  enum pp_status s = set_protocol(t, name->s, c, err, errlen);
  if (s != PP_OK)
    return s;
  if (!pp_proto_plugin(c->protocol)) { /* a built-in: its parameters are the struct's */
    uint32_t id = c->protocol;
    *c = keep;
    c->protocol = id;
    return PP_OK;
  }
  size_t used = 0;
  return proto_keys(t, c, true, &used, err, errlen);
}

static enum pp_status read_v1_keys(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                                   size_t errlen)
{
  for (size_t i = 0; i < NV1; i++) {
    const struct cfg_field *f = &V1_FIELDS[i];
    const struct pp_trace_kv *kv = pp_trace_kv_find(t, f->key);
    if (!kv)
      continue;
    if (f->kind == K_UINT) {
      if (kv->type != PP_TKV_U64 || set_field(c, f, kv->u)) {
        snprintf(err, errlen, "header key %s: expected an integer that fits the field", f->key);
        return PP_PARSE;
      }
    } else {
      int v = kv->type == PP_TKV_STR ? enum_value(f->kind, kv->s) : -1;
      if (v < 0) {
        snprintf(err, errlen, "header key %s: unknown name '%s'", f->key,
                 kv->type == PP_TKV_STR ? kv->s : "(not a string)");
        return PP_PARSE;
      }
      set_field(c, f, (uint64_t)v);
    }
  }
  return PP_OK;
}

/* The layout format 1 wrote (struct pp_engine_cfg of prepost 0.1, x86-64 and aarch64 LP64),
 * frozen here so the raw bytes stay readable whatever becomes of the live structs: read into
 * this, then copied member by member. Enums are ints, bool one byte. */
struct v1_cfg {
  uint32_t rank, nranks, protocol;
  struct {
    uint8_t min_rnr_timer, rnr_retry, timeout, retry_cnt, max_rd_atomic;
    uint32_t mtu, sq_depth, rq_depth;
  } qp;
  struct {
    int32_t kind, pattern;
    uint32_t messages, size;
    uint64_t interval_ns, consume_ns, consume_ranks, consume_jitter_ns, post_delay_ns;
  } workload;
  uint64_t seed;
  struct {
    uint32_t eager_limit, rget_limit, frag_size, pipeline, channels, credits, credit_threshold,
        reply_slots, send_buffers, max_requests, rcache_entries;
    uint64_t rcache_bytes;
    uint32_t record;
  } p2p;
  struct {
    uint32_t size_max;
    uint8_t dist, recv_mode;
    uint16_t pad;
    uint32_t tags, window;
  } traffic;
  struct {
    uint16_t nprogs, nops;
    struct {
      uint64_t ranks[16];
      uint16_t first, n;
      uint32_t repeat;
    } prog[32];
    struct {
      uint8_t kind, pad[3];
      uint32_t peer, tag, comm, size, count;
      uint64_t ns;
    } op[256];
  } script;
  struct {
    uint32_t slots, slot_size, channels, credit_batch;
    uint64_t credit_idle_ns;
  } ring;
  struct {
    int32_t op, dtype;
    uint64_t bytes;
    uint32_t iterations, warmup, root, chunk, window;
    uint64_t compute_ns, slow_ranks, slow_compute_ns;
    uint32_t slow_from, slow_until;
    bool check;
  } coll;
  uint32_t test_bugs;
  uint64_t proto_params[256 / 8];
};
_Static_assert(sizeof(struct v1_cfg) == 13096, "format 1's engine.cfg was 13096 bytes");
#define V1_BEFORE_PARAMS 12840 /* the size before proto_params was appended */
_Static_assert(offsetof(struct v1_cfg, proto_params) == V1_BEFORE_PARAMS, "format 1's prefix");

static void v1_copy_script(const struct v1_cfg *v, struct pp_script *sc)
{
  sc->nprogs = v->script.nprogs < PP_SCRIPT_MAX_PROGS ? v->script.nprogs : PP_SCRIPT_MAX_PROGS;
  sc->nops = v->script.nops < PP_SCRIPT_MAX_OPS ? v->script.nops : PP_SCRIPT_MAX_OPS;
  for (unsigned i = 0; i < 32 && i < PP_SCRIPT_MAX_PROGS; i++) {
    memcpy(sc->prog[i].ranks, v->script.prog[i].ranks, sizeof sc->prog[i].ranks);
    sc->prog[i].first = v->script.prog[i].first;
    sc->prog[i].n = v->script.prog[i].n;
    sc->prog[i].repeat = v->script.prog[i].repeat;
  }
  for (unsigned i = 0; i < 256 && i < PP_SCRIPT_MAX_OPS; i++) {
    struct pp_script_op *o = &sc->op[i];
    o->kind = v->script.op[i].kind;
    memcpy(o->pad, v->script.op[i].pad, sizeof o->pad);
    o->peer = v->script.op[i].peer;
    o->tag = v->script.op[i].tag;
    o->comm = v->script.op[i].comm;
    o->size = v->script.op[i].size;
    o->count = v->script.op[i].count;
    o->ns = v->script.op[i].ns;
  }
}

/* The built-in protocol's and workload's parameters of c's protocol and kind, from v. */
static void v1_params(const struct v1_cfg *v, struct pp_engine_cfg *c)
{
  if (pp_engine_cfg_is_p2p(c)) {
    struct pp_p2p_params *p = pp_p2p_params_of(c);
    memset(c->proto_params, 0, sizeof c->proto_params);
    p->eager_limit = v->p2p.eager_limit, p->rget_limit = v->p2p.rget_limit;
    p->frag_size = v->p2p.frag_size, p->pipeline = v->p2p.pipeline;
    p->channels = v->p2p.channels, p->credits = v->p2p.credits;
    p->credit_threshold = v->p2p.credit_threshold, p->reply_slots = v->p2p.reply_slots;
    p->send_buffers = v->p2p.send_buffers, p->max_requests = v->p2p.max_requests;
    p->rcache_entries = v->p2p.rcache_entries, p->rcache_bytes = v->p2p.rcache_bytes;
    p->record = v->p2p.record;
  }
  if (pp_engine_cfg_is_ring(c)) {
    memset(c->proto_params, 0, sizeof c->proto_params);
    *pp_ring_params_of(c) = (struct pp_ring_params){v->ring.slots, v->ring.slot_size,
                                                    v->ring.channels, v->ring.credit_batch,
                                                    v->ring.credit_idle_ns};
  }
  memset(c->workload_params, 0, sizeof c->workload_params);
  if (c->workload.kind == PP_WORKLOAD_TRAFFIC)
    *pp_traffic_of(c) =
        (struct pp_traffic){v->traffic.size_max, v->traffic.dist, v->traffic.recv_mode,
                            v->traffic.pad, v->traffic.tags, v->traffic.window};
  if (c->workload.kind == PP_WORKLOAD_SCRIPT)
    v1_copy_script(v, pp_script_of(c));
  if (c->workload.kind == PP_WORKLOAD_COLLECTIVE) {
    struct pp_coll_params *k = pp_coll_params_of(c);
    k->op = (enum pp_coll_op)v->coll.op, k->dtype = (enum pp_dtype)v->coll.dtype;
    k->bytes = v->coll.bytes, k->iterations = v->coll.iterations, k->warmup = v->coll.warmup;
    k->root = v->coll.root, k->chunk = v->coll.chunk, k->window = v->coll.window;
    k->compute_ns = v->coll.compute_ns, k->slow_ranks = v->coll.slow_ranks;
    k->slow_compute_ns = v->coll.slow_compute_ns, k->slow_from = v->coll.slow_from;
    k->slow_until = v->coll.slow_until, k->check = v->coll.check;
  }
}

static void v1_copy(const struct v1_cfg *v, struct pp_engine_cfg *c)
{
  memset(c, 0, sizeof(*c));
  c->rank = v->rank, c->nranks = v->nranks, c->protocol = v->protocol, c->seed = v->seed;
  c->qp = (struct pp_qp_params){v->qp.min_rnr_timer, v->qp.rnr_retry, v->qp.timeout,
                                v->qp.retry_cnt, v->qp.max_rd_atomic, v->qp.mtu,
                                v->qp.sq_depth, v->qp.rq_depth};
  c->workload.kind = (enum pp_workload_kind)v->workload.kind;
  c->workload.pattern = (enum pp_pattern)v->workload.pattern;
  c->workload.messages = v->workload.messages, c->workload.size = v->workload.size;
  c->workload.interval_ns = v->workload.interval_ns;
  c->workload.consume_ns = v->workload.consume_ns;
  c->workload.consume_ranks = v->workload.consume_ranks;
  c->workload.consume_jitter_ns = v->workload.consume_jitter_ns;
  c->workload.post_delay_ns = v->workload.post_delay_ns;
  c->test_bugs = v->test_bugs;
  _Static_assert(sizeof c->proto_params >= sizeof v->proto_params, "room for a plug-in's");
  memcpy(c->proto_params, v->proto_params, sizeof v->proto_params);
  v1_params(v, c);
}

static enum pp_status read_v1(const struct pp_trace *t, const struct pp_trace_kv *raw,
                              struct pp_engine_cfg *c, char *err, size_t errlen)
{
  if (raw && raw->type == PP_TKV_BYTES &&
      (raw->n == sizeof(struct v1_cfg) || raw->n == V1_BEFORE_PARAMS)) {
    struct v1_cfg v;
    memset(&v, 0, sizeof v);
    memcpy(&v, raw->b, raw->n);
    v.coll.check = ((const uint8_t *)raw->b)[offsetof(struct v1_cfg, coll.check)] != 0;
    v1_copy(&v, c);
    c->rank = 0;
    return v1_proto(t, c, err, errlen);
  }
  snprintf(err, errlen, "the trace's engine.cfg (%zu bytes) is not format 1's struct "
           "pp_engine_cfg (%zu bytes): only the readable engine.* keys are used",
           raw ? raw->n : (size_t)0, sizeof(struct v1_cfg));
  char e2[256];
  enum pp_status s = read_v1_keys(t, c, e2, sizeof e2);
  if (s == PP_OK)
    s = v1_proto(t, c, e2, sizeof e2);
  if (s != PP_OK)
    snprintf(err, errlen, "%s", e2);
  c->rank = 0;
  return s;
}

/* ------------------------------------------------------------------ format 2: reading */

static const char *str_key(const struct pp_trace *t, const char *key, char *err, size_t errlen,
                           bool required, size_t *used)
{
  const struct pp_trace_kv *kv = pp_trace_kv_find(t, key);
  if (!kv) {
    if (required)
      snprintf(err, errlen, "the trace header has no %s", key);
    return NULL;
  }
  ++*used;
  if (kv->type != PP_TKV_STR) {
    snprintf(err, errlen, "header key %s: expected text", key);
    return NULL;
  }
  return kv->s;
}

static enum pp_status script_count(const struct pp_trace *t, const char *key, uint64_t max,
                                   uint16_t *out, size_t *used, char *err, size_t errlen)
{
  err[0] = '\0';
  const char *v = str_key(t, key, err, errlen, false, used);
  uint64_t n = 0;
  if (!v && err[0])
    return PP_PARSE;
  if (v && pp_parse_uint(v, strlen(v), 0, max, &n, NULL, 0) != PP_OK) {
    snprintf(err, errlen, "header key %s: '%s' must be 0..%" PRIu64, key, v, max);
    return PP_PARSE;
  }
  *out = (uint16_t)n;
  return PP_OK;
}

static enum pp_status read_script(const struct pp_trace *t, struct pp_script *sc, size_t *used,
                                  char *err, size_t errlen)
{
  enum pp_status s =
      script_count(t, "engine.script.progs", PP_SCRIPT_MAX_PROGS, &sc->nprogs, used, err, errlen);
  if (s == PP_OK)
    s = script_count(t, "engine.script.ops", PP_SCRIPT_MAX_OPS, &sc->nops, used, err, errlen);
  for (unsigned i = 0; s == PP_OK && i < sc->nprogs + sc->nops; i++) {
    bool prog = i < sc->nprogs;
    unsigned k = prog ? i : i - sc->nprogs;
    char key[64], why[PROG_TEXT_MAX + 96];
    snprintf(key, sizeof key, prog ? "engine.script.prog.%u" : "engine.script.op.%u", k);
    const char *v = str_key(t, key, err, errlen, true, used);
    if (!v)
      return PP_PARSE;
    s = prog ? parse_prog(v, &sc->prog[k], why, sizeof why)
             : parse_op(v, &sc->op[k], why, sizeof why);
    if (s != PP_OK)
      snprintf(err, errlen, "header key %s: %s", key, why);
  }
  return s;
}

/* Does format 2 of this build read `k` for configuration c? */
static bool known_key(const struct pp_engine_cfg *c, const char *k)
{
  const struct section *sec;
  unsigned i;
  int n = 0;
  if (entry_of(k, &sec) || !strcmp(k, "engine.protocol") || !strcmp(k, "engine.plugin") ||
      !strcmp(k, "engine.script.progs") || !strcmp(k, "engine.script.ops"))
    return true;
  if (sscanf(k, "engine.script.prog.%u%n", &i, &n) == 1 && !k[n])
    return c->workload.kind == PP_WORKLOAD_SCRIPT && i < pp_script_of(c)->nprogs;
  if (sscanf(k, "engine.script.op.%u%n", &i, &n) == 1 && !k[n])
    return c->workload.kind == PP_WORKLOAD_SCRIPT && i < pp_script_of(c)->nops;
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  return !strncmp(k, "proto.", 6) && d && pp_proto_plugin(c->protocol) &&
         pp_param_find(d->params, d->nparams, k + 6);
}

/* The first engine.* or proto.* key this build does not read. */
static void unknown_key(const struct pp_trace *t, const struct pp_engine_cfg *c, char *err,
                        size_t errlen)
{
  for (size_t i = 0; i < t->nkv; i++) {
    const char *k = t->kv[i].key;
    if ((!strncmp(k, "engine.", 7) || !strncmp(k, "proto.", 6)) && !known_key(c, k)) {
      snprintf(err, errlen, "header key %s is not known to this build (a setting would be "
                            "lost)", k);
      return;
    }
  }
  snprintf(err, errlen, "the header's engine keys could not all be read");
}

static size_t prefixed_keys(const struct pp_trace *t)
{
  size_t n = 0;
  for (size_t i = 0; i < t->nkv; i++)
    n += !strncmp(t->kv[i].key, "engine.", 7) || !strncmp(t->kv[i].key, "proto.", 6);
  return n;
}

static enum pp_status read_v2(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                              size_t errlen)
{
  size_t used = 0;
  /* a section of another protocol or workload (a format 2 header of an older build holds every
   * section): read into scratch, checked, dropped */
  static union {
    struct pp_script script;
    uint64_t any[PP_WORKLOAD_PARAMS_MAX / 8];
  } scratch;
  memset(c, 0, sizeof(*c));
  for (size_t i = 0; i < NSECTIONS; i++)
    if (!SECTIONS[i].own)
      pp_params_defaults(SECTIONS[i].t, sec_count(&SECTIONS[i]), SECTIONS[i].at(c));
  const char *proto = str_key(t, "engine.protocol", err, errlen, true, &used);
  enum pp_status s = proto ? set_protocol(t, proto, c, err, errlen) : PP_PARSE;
  if (s == PP_OK && pp_trace_kv_find(t, "engine.plugin"))
    used++;
  bool wl_defaults = false;
  for (size_t i = 0; s == PP_OK && i < NSECTIONS; i++) {
    if (SECTIONS[i].own && !wl_defaults) { /* workload.kind is read: its parameters' defaults */
      pp_engine_cfg_workload_defaults(c);
      wl_defaults = true;
    }
    void *obj = SECTIONS[i].at(c);
    if (!obj) {
      memset(&scratch, 0, sizeof scratch);
      pp_params_defaults(SECTIONS[i].t, sec_count(&SECTIONS[i]), &scratch);
      obj = &scratch;
    }
    for (size_t j = 0; s == PP_OK && j < sec_count(&SECTIONS[i]); j++) {
      const struct pp_param *p = &SECTIONS[i].t[j];
      char key[128], why[256];
      snprintf(key, sizeof key, "%s%s", SECTIONS[i].prefix, p->key);
      const char *v = str_key(t, key, err, errlen, SECTIONS[i].t == CORE && j == 0, &used);
      if (!v) {
        s = err[0] ? PP_PARSE : PP_OK;
        continue;
      }
      if (set_entry(&SECTIONS[i], p, c, obj, v, false, why, sizeof why) != PP_OK) {
        snprintf(err, errlen, "header key %s: '%s' %s", key, v, why);
        s = PP_PARSE;
      }
    }
  }
  if (s == PP_OK)
    s = proto_keys(t, c, false, &used, err, errlen);
  if (s == PP_OK) {
    bool script = c->workload.kind == PP_WORKLOAD_SCRIPT;
    if (!script)
      memset(&scratch, 0, sizeof scratch);
    s = read_script(t, script ? pp_script_of(c) : &scratch.script, &used, err, errlen);
  }
  if (s == PP_OK && used != prefixed_keys(t)) {
    unknown_key(t, c, err, errlen);
    s = PP_PARSE;
  }
  c->rank = 0;
  if (s == PP_OK && errlen)
    err[0] = '\0';
  return s;
}

enum pp_status pp_trace_engine_cfg(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                                   size_t errlen)
{
  char none[8];
  if (!errlen) {
    err = none;
    errlen = sizeof none;
  }
  err[0] = '\0';
  const struct pp_trace_kv *raw = pp_trace_kv_find(t, "engine.cfg");
  /* format 1 (also a 2.x file that `trace merge` wrote from format 1 parts: it copies keys) */
  if (raw || t->major < 2)
    return read_v1(t, raw, c, err, errlen);
  return read_v2(t, c, err, errlen);
}
