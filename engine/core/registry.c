/*
 * The registries of protocols and workloads: fixed arrays of pointers to const defs, filled by
 * engine/core/builtin.c at the first lookup and by plug-ins after it. An id is the registration
 * order (the built-ins first, so theirs are enum pp_protocol / enum pp_workload_kind). The core
 * (engine.c) dispatches through these and names no protocol or workload itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/engine_impl.h"

#define MAX_WORKLOADS 16u

/* Every protocol keeps its parameters in pp_engine_cfg.proto_params: a plug-in's start at its
 * field table's defaults, a built-in's at its defaults function's. */
struct proto_entry {
  const struct pp_proto_def *def;
  const char *plugin;              /* NULL: built in */
  void (*defaults)(void *params);  /* a built-in's; NULL: the table's */
};

static struct proto_entry protos[PP_MAX_PROTOCOLS];
static uint32_t nprotos;
static const struct pp_workload_def *workloads[MAX_WORKLOADS];
static uint32_t nworkloads;
static bool builtins; /* registered (or being registered) */

static void ensure_builtins(void)
{
  if (!builtins) {
    builtins = true;
    pp_builtin_register();
  }
}

/* [a-z0-9-]+, at most 31 characters */
static bool good_name(const char *n)
{
  size_t len = n ? strlen(n) : 0;
  if (len == 0 || len > 31)
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '-'))
      return false;
  return true;
}

#define FAIL(st, ...)                                                          \
  do {                                                                         \
    if (errlen)                                                                \
      snprintf(err, errlen, __VA_ARGS__);                                      \
    return st;                                                                 \
  } while (0)

static enum pp_status check_ops(const struct pp_proto_ops *o, char *err, size_t errlen)
{
  static const char *const slot[] = {"create", "destroy", "local_info", "connect", "send",
                                     "recv",   "on_wc",   "on_timer",   "quiet",   "pending"};
  const bool set[] = {o->create != NULL,  o->destroy != NULL, o->local_info != NULL,
                      o->connect != NULL, o->send != NULL,    o->recv != NULL,
                      o->on_wc != NULL,   o->on_timer != NULL, o->quiet != NULL,
                      o->pending != NULL};
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
    if (!set[i])
      FAIL(PP_INVALID, "its ops table has no '%s'", slot[i]);
  return PP_OK;
}

static enum pp_status check_def(const struct pp_proto_def *d, char *err, size_t errlen)
{
  if (!d)
    FAIL(PP_INVALID, "no definition");
  if (d->abi != PP_PROTO_ABI)
    FAIL(PP_INVALID, "built against protocol ABI %u, this prepost has %u: rebuild it against "
         "this version", d->abi, PP_PROTO_ABI);
  if (!good_name(d->name))
    FAIL(PP_INVALID, "protocol name '%s' must be 1..31 of [a-z0-9-]", d->name ? d->name : "");
  if (!d->ops)
    FAIL(PP_INVALID, "protocol '%s' has no ops table", d->name);
  char why[192];
  if (check_ops(d->ops, why, sizeof why) != PP_OK)
    FAIL(PP_INVALID, "protocol '%s': %s", d->name, why);
  if (d->nbugs > PP_PROTO_MAX_BUGS || (d->nbugs && !d->bugs))
    FAIL(PP_INVALID, "protocol '%s': at most %u test bugs, got %u", d->name, PP_PROTO_MAX_BUGS,
         d->nbugs);
  for (uint32_t i = 0; i < d->nbugs; i++)
    if (!good_name(d->bugs[i].name) || !d->bugs[i].doc)
      FAIL(PP_INVALID, "protocol '%s': test bug %u needs a [a-z0-9-] name and a doc", d->name, i);
  return PP_OK;
}

static enum pp_status add(const struct pp_proto_def *d, const char *plugin,
                          void (*defaults)(void *), char *err, size_t errlen)
{
  enum pp_status s = check_def(d, err, errlen);
  if (s != PP_OK)
    return s;
  for (uint32_t i = 0; i < nprotos; i++)
    if (!strcmp(protos[i].def->name, d->name))
      FAIL(PP_EXISTS, "protocol '%s' is registered already%s%s", d->name,
           protos[i].plugin ? " by plug-in " : " (built in)",
           protos[i].plugin ? protos[i].plugin : "");
  if (nprotos == PP_MAX_PROTOCOLS)
    FAIL(PP_LIMIT, "protocol '%s': the registry holds %u protocols already", d->name,
         PP_MAX_PROTOCOLS);
  protos[nprotos++] = (struct proto_entry){.def = d, .plugin = plugin, .defaults = defaults};
  return PP_OK;
}

enum pp_status pp_proto_register_builtin(const struct pp_proto_def *def,
                                         void (*defaults)(void *params))
{
  if (def->params_size > PP_PROTO_PARAMS_MAX)
    return PP_INVALID;
  return add(def, NULL, defaults, NULL, 0);
}

enum pp_status pp_proto_register_from(const struct pp_proto_def *d, const char *plugin,
                                      char *err, size_t errlen)
{
  ensure_builtins();
  enum pp_status s = check_def(d, err, errlen);
  if (s != PP_OK)
    return s;
  if (d->params_size > PP_PROTO_PARAMS_MAX)
    FAIL(PP_INVALID, "protocol '%s': parameters of %zu bytes, at most %u", d->name,
         d->params_size, PP_PROTO_PARAMS_MAX);
  if (d->nparams && !d->params)
    FAIL(PP_INVALID, "protocol '%s': %zu parameters but no table", d->name, d->nparams);
  char why[192];
  if (d->nparams && !pp_params_valid(d->params, d->nparams, d->params_size, why, sizeof why))
    FAIL(PP_INVALID, "protocol '%s': its parameter table: %s", d->name, why);
  return add(d, plugin, NULL, err, errlen);
}

enum pp_status pp_proto_register(const struct pp_proto_def *def, char *err, size_t errlen)
{
  return pp_proto_register_from(def, NULL, err, errlen);
}

const struct pp_proto_def *pp_proto_get(uint32_t id)
{
  ensure_builtins();
  return id < nprotos ? protos[id].def : NULL;
}

int pp_proto_id(const char *name)
{
  ensure_builtins();
  for (uint32_t i = 0; name && i < nprotos; i++)
    if (!strcmp(protos[i].def->name, name))
      return (int)i;
  return -1;
}

const struct pp_proto_def *pp_proto_find(const char *name)
{
  int i = pp_proto_id(name);
  return i < 0 ? NULL : protos[i].def;
}

uint32_t pp_proto_count(void)
{
  ensure_builtins();
  return nprotos;
}

const char *pp_proto_plugin(uint32_t id)
{
  ensure_builtins();
  return id < nprotos ? protos[id].plugin : NULL;
}

int pp_proto_bug_bit(uint32_t id, const char *name)
{
  const struct pp_proto_def *d = pp_proto_get(id);
  for (uint32_t i = 0; d && name && i < d->nbugs; i++)
    if (!strcmp(d->bugs[i].name, name))
      return (int)(PP_PROTO_BUG_SHIFT + i);
  return -1;
}

int pp_proto_bug_find(const char *name, uint32_t *id)
{
  for (uint32_t p = 0; p < pp_proto_count(); p++) {
    int b = pp_proto_bug_bit(p, name);
    if (b >= 0) {
      *id = p;
      return b;
    }
  }
  return -1;
}

const char *pp_protocol_name(uint32_t p)
{
  const struct pp_proto_def *d = pp_proto_get(p);
  return d ? d->name : "?";
}

int pp_protocol_from_name(const char *name)
{
  return pp_proto_id(name);
}

const void *pp_engine_cfg_proto_params_c(const struct pp_engine_cfg *cfg)
{
  ensure_builtins();
  return cfg->protocol < nprotos ? (const void *)cfg->proto_params : NULL;
}

void *pp_engine_cfg_proto_params(struct pp_engine_cfg *cfg)
{
  return (void *)pp_engine_cfg_proto_params_c(cfg);
}

enum pp_status pp_engine_cfg_protocol(struct pp_engine_cfg *cfg, const char *name)
{
  int id = pp_proto_id(name);
  if (id < 0)
    return PP_NOTFOUND;
  cfg->protocol = (uint32_t)id;
  const struct proto_entry *p = &protos[id];
  memset(cfg->proto_params, 0, sizeof cfg->proto_params);
  if (p->defaults)
    p->defaults(cfg->proto_params);
  else
    pp_params_defaults(p->def->params, p->def->nparams, cfg->proto_params);
  return PP_OK;
}

/* ------------------------------------------------------------------ workloads */

enum pp_status pp_workload_register(const struct pp_workload_def *d, char *err, size_t errlen)
{
  ensure_builtins();
  if (!d || !good_name(d->name) || !d->ops || !d->mem_need)
    FAIL(PP_INVALID, "a workload needs a [a-z0-9-] name, an ops table and a memory estimate");
  const struct pp_app_ops *o = d->ops;
  if (!o->plan || !o->create || !o->destroy || !o->start || !o->pump || !o->on_timer ||
      !o->send_done || !o->recv_done || !o->done)
    FAIL(PP_INVALID, "workload '%s': its ops table misses a slot", d->name);
  if (d->params_size > PP_WORKLOAD_PARAMS_MAX)
    FAIL(PP_INVALID, "workload '%s': parameters of %zu bytes, at most %u", d->name,
         d->params_size, PP_WORKLOAD_PARAMS_MAX);
  for (uint32_t i = 0; i < nworkloads; i++)
    if (!strcmp(workloads[i]->name, d->name))
      FAIL(PP_EXISTS, "workload '%s' is registered already", d->name);
  if (nworkloads == MAX_WORKLOADS)
    FAIL(PP_LIMIT, "workload '%s': the registry holds %u workloads already", d->name,
         MAX_WORKLOADS);
  workloads[nworkloads++] = d;
  return PP_OK;
}

const struct pp_workload_def *pp_workload_get(uint32_t kind)
{
  ensure_builtins();
  return kind < nworkloads ? workloads[kind] : NULL;
}

const char *pp_workload_name(enum pp_workload_kind k)
{
  const struct pp_workload_def *d = pp_workload_get((uint32_t)k);
  return d ? d->name : "?";
}

int pp_workload_from_name(const char *name)
{
  ensure_builtins();
  for (uint32_t i = 0; name && i < nworkloads; i++)
    if (!strcmp(workloads[i]->name, name))
      return (int)i;
  return -1;
}

void pp_engine_cfg_workload_defaults(struct pp_engine_cfg *cfg)
{
  const struct pp_workload_def *d = pp_workload_get((uint32_t)cfg->workload.kind);
  memset(cfg->workload_params, 0, sizeof cfg->workload_params);
  if (d && d->defaults)
    d->defaults(cfg->workload_params);
}

enum pp_status pp_engine_cfg_workload(struct pp_engine_cfg *cfg, uint32_t kind)
{
  if (!pp_workload_get(kind))
    return PP_NOTFOUND;
  cfg->workload.kind = (enum pp_workload_kind)kind;
  pp_engine_cfg_workload_defaults(cfg);
  return PP_OK;
}
