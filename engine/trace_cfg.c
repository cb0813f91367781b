/*
 * The engine configuration in a trace header, both ways.
 *
 * engine.cfg holds the bytes of struct pp_engine_cfg (plain values, no pointers), which a build
 * with the same struct size reads back exactly. The readable engine.* keys below are for people
 * (trace dump), for what-if overrides (`prepost replay --sim --set engine.qp.rnr_retry=7`) and for
 * builds whose struct differs. When you add a scalar field to struct pp_engine_cfg that someone
 * may want to override, add its line to CFG_FIELDS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  return s;
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

enum pp_status pp_trace_engine_cfg(const struct pp_trace *t, struct pp_engine_cfg *c, char *err,
                                   size_t errlen)
{
  if (errlen)
    err[0] = '\0';
  const struct pp_trace_kv *raw = pp_trace_kv_find(t, "engine.cfg");
  if (raw && raw->type == PP_TKV_BYTES && raw->n == sizeof(*c)) {
    memcpy(c, raw->b, sizeof(*c));
    c->rank = 0;
    return PP_OK;
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
  return PP_OK;
}
