/*
 * The engine configuration in a trace header, both ways.
 *
 * engine.cfg holds the bytes of struct pp_engine_cfg (plain values, no pointers), which a build
 * with the same struct size reads back exactly. The readable engine.* keys below are for people
 * (trace dump), for what-if overrides (`prepost replay --sim --set engine.qp.rnr_retry=7`) and for
 * builds whose struct differs. When you add a scalar field to struct pp_engine_cfg that someone
 * may want to override, add its line to CFG_FIELDS.
 *
 * The protocol is named (engine.protocol) and, when a plug-in registered it, so is the plug-in
 * (engine.plugin); a protocol with a field table stores each parameter as proto.KEY with its
 * canonical text. Reading, the name decides (registry ids depend on the order plug-ins load) and
 * the proto.* keys set the parameters. A raw engine.cfg of the size the struct had before
 * proto_params was appended is read as the prefix it is.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/proto.h"
#include "prepost/trace.h"

enum cfg_kind { K_UINT, K_PROTOCOL, K_WORKLOAD, K_PATTERN };

#define F(key, field, kind)                                                    \
  {key, kind, offsetof(struct pp_engine_cfg, field), sizeof(((struct pp_engine_cfg *)0)->field)}

static const struct cfg_field {
  const char *key;
  enum cfg_kind kind;
  size_t off, size;
} CFG_FIELDS[] = {
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
    F("engine.ring.slots", ring.slots, K_UINT),
    F("engine.ring.slot_size", ring.slot_size, K_UINT),
    F("engine.ring.channels", ring.channels, K_UINT),
    F("engine.ring.credit_batch", ring.credit_batch, K_UINT),
    F("engine.ring.credit_idle_ns", ring.credit_idle_ns, K_UINT),
    F("engine.coll.bytes", coll.bytes, K_UINT),
    F("engine.coll.chunk", coll.chunk, K_UINT),
    F("engine.coll.window", coll.window, K_UINT),
    F("engine.coll.iterations", coll.iterations, K_UINT),
    F("engine.coll.compute_ns", coll.compute_ns, K_UINT),
};
#undef F

#define NFIELDS (sizeof(CFG_FIELDS) / sizeof(CFG_FIELDS[0]))

static uint64_t get_field(const struct pp_engine_cfg *c, const struct cfg_field *f)
{
  const uint8_t *p = (const uint8_t *)c + f->off;
  switch (f->size) {
  case 1:
    return *p;
  case 2: {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  default: {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
  }
  }
}

/* 0 when v fits the field. */
static int set_field(struct pp_engine_cfg *c, const struct cfg_field *f, uint64_t v)
{
  uint8_t *p = (uint8_t *)c + f->off;
  if (f->size < 8 && v >> (8 * f->size))
    return -1;
  switch (f->size) {
  case 1:
    *p = (uint8_t)v;
    break;
  case 2: {
    uint16_t x = (uint16_t)v;
    memcpy(p, &x, 2);
    break;
  }
  case 4: {
    uint32_t x = (uint32_t)v;
    memcpy(p, &x, 4);
    break;
  }
  default:
    memcpy(p, &v, 8);
  }
  return 0;
}

static const char *enum_name(enum cfg_kind k, uint64_t v)
{
  switch (k) {
  case K_PROTOCOL:
    return pp_protocol_name((enum pp_protocol)v);
  case K_WORKLOAD:
    return pp_workload_name((enum pp_workload_kind)v);
  case K_PATTERN:
    return pp_pattern_name((enum pp_pattern)v);
  default:
    return NULL;
  }
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

/* The protocol's parameters as proto.KEY = canonical text. */
static enum pp_status kv_proto_params(struct pp_trace_writer *w, const struct pp_engine_cfg *c)
{
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  const char *plugin = pp_proto_plugin(c->protocol);
  enum pp_status s = plugin ? pp_trace_kv_str(w, "engine.plugin", plugin) : PP_OK;
  const void *prm = pp_engine_cfg_proto_params_c(c);
  for (size_t i = 0; s == PP_OK && d && i < d->nparams; i++) {
    char key[96], val[64];
    snprintf(key, sizeof key, "proto.%s", d->params[i].key);
    pp_param_format(&d->params[i], prm, val, sizeof val);
    s = pp_trace_kv_str(w, key, val);
  }
  return s;
}

enum pp_status pp_trace_kv_engine_cfg(struct pp_trace_writer *w, const struct pp_engine_cfg *c)
{
  enum pp_status s = pp_trace_kv_u64(w, "engine.cfg_size", sizeof(*c));
  if (s == PP_OK)
    s = pp_trace_kv_bytes(w, "engine.cfg", c, sizeof(*c));
  for (size_t i = 0; s == PP_OK && i < NFIELDS; i++) {
    const struct cfg_field *f = &CFG_FIELDS[i];
    uint64_t v = get_field(c, f);
    s = f->kind == K_UINT ? pp_trace_kv_u64(w, f->key, v)
                          : pp_trace_kv_str(w, f->key, enum_name(f->kind, v));
  }
  return s == PP_OK ? kv_proto_params(w, c) : s;
}

void pp_trace_engine_cfg_each(const struct pp_engine_cfg *c,
                              void (*fn)(void *ctx, const char *key, const char *value),
                              void *ctx)
{
  for (size_t i = 0; i < NFIELDS; i++) {
    const struct cfg_field *f = &CFG_FIELDS[i];
    uint64_t v = get_field(c, f);
    char num[32];
    snprintf(num, sizeof(num), "%" PRIu64, v);
    fn(ctx, f->key, f->kind == K_UINT ? num : enum_name(f->kind, v));
  }
}

static const struct cfg_field *field_of(const char *key)
{
  for (size_t i = 0; i < NFIELDS; i++)
    if (!strcmp(CFG_FIELDS[i].key, key))
      return &CFG_FIELDS[i];
  return NULL;
}

enum pp_status pp_trace_engine_cfg_set(struct pp_engine_cfg *c, const char *key,
                                       const char *value, char *err, size_t errlen)
{
  const struct cfg_field *f = field_of(key);
  if (!f) {
    snprintf(err, errlen, "unknown engine key '%s'", key);
    return PP_NOTFOUND;
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

/* The protocol by its name (and its plug-in when the name is unknown), then its proto.* keys. */
static enum pp_status trace_proto(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                                  size_t errlen)
{
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "engine.protocol");
  if (!name || name->type != PP_TKV_STR)
    return PP_OK; /* an older trace: the raw bytes' id stands */
  struct pp_engine_cfg keep = *c;
  if (pp_engine_cfg_protocol(c, name->s) != PP_OK) {
    const struct pp_trace_kv *pl = pp_trace_kv_find(t, "engine.plugin");
    if (pl && pl->type == PP_TKV_STR)
      snprintf(err, errlen, "the trace's protocol '%s' comes from the plug-in %s, which is not "
               "loaded: give it with --plugin PATH (or PREPOST_PLUGINS)", name->s, pl->s);
    else
      snprintf(err, errlen, "the trace's protocol '%s' is not known to this build", name->s);
    return PP_NOTFOUND;
  }
  if (!pp_proto_plugin(c->protocol)) { /* a built-in: its parameters are the struct's */
    uint32_t id = c->protocol;
    *c = keep;
    c->protocol = id;
    return PP_OK;
  }
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  void *prm = pp_engine_cfg_proto_params(c);
  for (size_t i = 0; i < d->nparams; i++) {
    char key[96], why[160];
    snprintf(key, sizeof key, "proto.%s", d->params[i].key);
    const struct pp_trace_kv *kv = pp_trace_kv_find(t, key);
    if (!kv)
      continue;
    if (kv->type != PP_TKV_STR ||
        pp_param_set(&d->params[i], prm, kv->s, strlen(kv->s), why, sizeof why) != PP_OK) {
      snprintf(err, errlen, "header key %s: %s", key, kv->type == PP_TKV_STR ? why : "not text");
      return PP_PARSE;
    }
  }
  return PP_OK;
}

enum pp_status pp_trace_engine_cfg(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                                   size_t errlen)
{
  if (errlen)
    err[0] = '\0';
  const struct pp_trace_kv *raw = pp_trace_kv_find(t, "engine.cfg");
  const size_t v1 = offsetof(struct pp_engine_cfg, proto_params); /* before proto_params */
  if (raw && raw->type == PP_TKV_BYTES && (raw->n == sizeof(*c) || raw->n == v1)) {
    memset(c, 0, sizeof(*c));
    memcpy(c, raw->b, raw->n);
    c->rank = 0;
    return trace_proto(t, c, err, errlen);
  }
  snprintf(err, errlen, "the trace's engine.cfg (%zu bytes) does not match this build's "
           "struct pp_engine_cfg (%zu bytes): only the readable engine.* keys are used",
           raw ? raw->n : (size_t)0, sizeof(*c));
  for (size_t i = 0; i < NFIELDS; i++) {
    const struct cfg_field *f = &CFG_FIELDS[i];
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
  c->rank = 0;
  return trace_proto(t, c, err, errlen);
}
