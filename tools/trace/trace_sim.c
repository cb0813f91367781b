#define _POSIX_C_SOURCE 200809L
#include "tools/trace/trace_sim.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli/cli_util.h"
/* scenario.h's opening comment trips -Wcomment in some includers (as tools/explore/explore.h) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

/* Format 2 writes every member of struct pp_sim_config but `engine` as one of these keys (its
 * own type: U64, F64 as its bits, STR) and the engine's as pp_trace_kv_engine_cfg()'s keys;
 * format 1 wrote the struct's bytes too (sim.cfg, read back when their size is this build's).
 * A member added to the struct needs its line here (tests/test_trace_cfg.c checks the round
 * trip with every member set). */
enum skind { S_UINT, S_BOOL, S_F64, S_STR, S_NZ /* a UINT written only when nonzero */ };

#define F(key, field, kind)                                                    \
  {key, kind, offsetof(struct pp_sim_config, field), sizeof(((struct pp_sim_config *)0)->field)}

static const struct sfield {
  const char *key;
  enum skind kind;
  size_t off, size;
} SIM_FIELDS[] = {
    F("sim.name", name, S_STR),
    F("sim.seed", seed, S_UINT),
    F("sim.max_sim_time_ns", max_sim_time_ns, S_UINT),
    F("sim.platform.file", platform.file, S_STR),
    F("sim.platform.bandwidth_bps", platform.bandwidth_bps, S_F64),
    F("sim.platform.latency_ns", platform.latency_ns, S_UINT),
    F("sim.nic.name", nic.name, S_STR),
    F("sim.nic.mtu", nic.mtu, S_UINT),
    F("sim.nic.header_bytes", nic.header_bytes, S_UINT),
    F("sim.nic.wqe_ns", nic.wqe_ns, S_UINT),
    F("sim.nic.ack_every", nic.ack_every, S_UINT),
    F("sim.nic.ack_delay_ns", nic.ack_delay_ns, S_UINT),
    F("sim.nic.max_qp", nic.max_qp, S_UINT),
    F("sim.nic.max_qp_wr", nic.max_qp_wr, S_UINT),
    F("sim.nic.max_srq", nic.max_srq, S_UINT),
    F("sim.nic.max_mr", nic.max_mr, S_UINT),
    F("sim.nic.cq_depth", nic.cq_depth, S_UINT),
    F("sim.nic.max_rd_atomic", nic.max_rd_atomic, S_UINT),
    F("sim.nic.train_max", nic.train_max, S_UINT),
    F("sim.nic.line_rate_bps", nic.line_rate_bps, S_F64),
    F("sim.nic.rnr_tick_ns", nic.rnr_tick_ns, S_UINT),
    F("sim.nic.rnr_min_ns", nic.rnr_min_ns, S_UINT),
#define RNR(c) F("sim.nic.rnr_delay_ns." #c, nic.rnr_delay_ns[c], S_NZ)
    RNR(0), RNR(1), RNR(2), RNR(3), RNR(4), RNR(5), RNR(6), RNR(7), RNR(8), RNR(9), RNR(10),
    RNR(11), RNR(12), RNR(13), RNR(14), RNR(15), RNR(16), RNR(17), RNR(18), RNR(19), RNR(20),
    RNR(21), RNR(22), RNR(23), RNR(24), RNR(25), RNR(26), RNR(27), RNR(28), RNR(29), RNR(30),
    RNR(31),
#undef RNR
    F("sim.nic.rc_model", nic.rc_model, S_NZ), /* enum pp_rc_model; absent: ibta */
    F("sim.faults.loss", faults.loss, S_F64),
    F("sim.faults.until_ns", faults.until_ns, S_UINT),
    F("sim.faults.jitter_ns", faults.jitter_ns, S_UINT),
    F("sim.faults.scramble", faults.scramble, S_F64),
    F("sim.faults.scramble_ns", faults.scramble_ns, S_UINT),
    F("sim.faults.srq_delay_ns", faults.srq_delay_ns, S_UINT),
    F("sim.faults.qp_error_ns", faults.qp_error_ns, S_UINT),
    F("sim.faults.qp_error_host", faults.qp_error_host, S_UINT),
    F("sim.faults.qp_error_qp", faults.qp_error_qp, S_UINT),
    F("sim.faults.rkey_ns", faults.rkey_ns, S_UINT),
    F("sim.faults.rkey_host", faults.rkey_host, S_UINT),
    F("sim.faults.cq_delay_ns", faults.cq_delay_ns, S_UINT),
    F("sim.faults.pause_ranks", faults.pause_ranks, S_UINT),
    F("sim.faults.pause_at_ns", faults.pause_at_ns, S_UINT),
    F("sim.faults.pause_ns", faults.pause_ns, S_UINT),
    F("sim.faults.order_bits", faults.order_bits, S_UINT),
    F("sim.faults.order_mask", faults.order_mask, S_UINT),
    F("sim.faults.order_window_ns", faults.order_window_ns, S_UINT),
    F("sim.faults.byzantine", faults.byzantine, S_F64),
    F("sim.faults.byzantine_rank", faults.byzantine_rank, S_UINT),
    F("sim.faults.byzantine_data_lies", faults.byzantine_data_lies, S_BOOL),
    F("sim.memory_limit", memory_limit, S_UINT),
    F("sim.no_progress_ns", no_progress_ns, S_UINT),
};
#undef F
#define NSIM (sizeof(SIM_FIELDS) / sizeof(SIM_FIELDS[0]))

static uint64_t uget(const void *p, size_t size)
{
  uint64_t v = 0;
  if (size == 1)
    v = *(const uint8_t *)p;
  else if (size == 2) {
    uint16_t x;
    memcpy(&x, p, 2);
    v = x;
  } else if (size == 4) {
    uint32_t x;
    memcpy(&x, p, 4);
    v = x;
  } else
    memcpy(&v, p, 8);
  return v;
}

static int uset(void *p, size_t size, uint64_t v)
{
  if (size < 8 && v >> (8 * size))
    return -1;
  if (size == 1)
    *(uint8_t *)p = (uint8_t)v;
  else if (size == 2) {
    uint16_t x = (uint16_t)v;
    memcpy(p, &x, 2);
  } else if (size == 4) {
    uint32_t x = (uint32_t)v;
    memcpy(p, &x, 4);
  } else
    memcpy(p, &v, 8);
  return 0;
}

/* Format 1's sim.cfg: struct pp_sim_config of prepost 0.1 (LP64), the engine's part at
 * V1_SIM_ENGINE. A change of the members before it needs their old layout frozen here, as
 * engine/trace/trace_cfg.c keeps the engine's. */
#define V1_SIM_ENGINE 1456u
#define V1_ENGINE_SIZE 13096u
#define V1_SIM_SIZE (V1_SIM_ENGINE + V1_ENGINE_SIZE + 4 * 8u)
#define V1_NIC 1168u
#define V1_NIC_SIZE 136u /* format 1's struct pp_nic_profile: up to line_rate_bps */
#define V1_FAULTS 1304u
#define V1_FAULTS_SIZE 152u
_Static_assert(offsetof(struct pp_sim_config, platform) == 128 &&
                   offsetof(struct pp_sim_config, nic) == V1_NIC &&
                   offsetof(struct pp_nic_profile, rnr_tick_ns) == V1_NIC_SIZE &&
                   sizeof(struct pp_faults) == V1_FAULTS_SIZE,
               "format 1's sim.cfg layout before the engine's part");

static char *slurp(const char *path, size_t max, size_t *len)
{
  char *buf, e[128];
  return pp_read_regular(path, max, &buf, len, NULL, e, sizeof e) == 0 ? buf : NULL;
}

enum pp_status pp_trace_kv_sim_cfg(struct pp_trace_writer *w, const struct pp_sim_config *cfg)
{
  enum pp_status s = PP_OK;
  for (size_t i = 0; s == PP_OK && i < NSIM; i++) {
    const struct sfield *f = &SIM_FIELDS[i];
    const uint8_t *p = (const uint8_t *)cfg + f->off;
    if (f->kind == S_NZ && !uget(p, f->size))
      continue; /* absent reads as 0 */
    if (f->kind == S_UINT || f->kind == S_BOOL || f->kind == S_NZ)
      s = pp_trace_kv_u64(w, f->key, uget(p, f->size));
    else if (f->kind == S_F64)
      s = pp_trace_kv_f64(w, f->key, *(const double *)(const void *)p);
    else
      s = pp_trace_kv_str(w, f->key, (const char *)p);
  }
  if (s == PP_OK && cfg->platform.file[0]) {
    size_t n;
    char *xml = slurp(cfg->platform.file, 256 * 1024, &n);
    if (xml && !memchr(xml, 0, n))
      s = pp_trace_kv_str(w, "sim.platform.xml", xml);
    free(xml);
  }
  if (s == PP_OK)
    s = pp_trace_kv_engine_cfg(w, &cfg->engine);
  return s;
}

static const struct sfield *sfield_of(const char *key)
{
  for (size_t i = 0; i < NSIM; i++)
    if (!strcmp(SIM_FIELDS[i].key, key))
      return &SIM_FIELDS[i];
  return NULL;
}

static enum pp_status set_text(struct pp_sim_config *cfg, const struct sfield *f, const char *v,
                               char *err, size_t errlen)
{
  uint8_t *p = (uint8_t *)cfg + f->off;
  char *end;
  errno = 0;
  if (f->kind == S_STR) {
    if (strlen(v) >= f->size) {
      snprintf(err, errlen, "%s: at most %zu bytes", f->key, f->size - 1);
      return PP_INVALID;
    }
    memset(p, 0, f->size);
    snprintf((char *)p, f->size, "%s", v);
  } else if (f->kind == S_F64) {
    double d = strtod(v, &end);
    if (!*v || *end || errno || !(d >= 0)) {
      snprintf(err, errlen, "%s: expected a non-negative number, got '%s'", f->key, v);
      return PP_INVALID;
    }
    memcpy(p, &d, sizeof(d));
  } else {
    unsigned long long u = strtoull(v, &end, 0);
    if (!*v || *v == '-' || *end || errno || (f->kind == S_BOOL && u > 1) ||
        uset(p, f->size, u)) {
      snprintf(err, errlen, "%s: expected an integer that fits the field, got '%s'", f->key, v);
      return PP_INVALID;
    }
  }
  return PP_OK;
}

/* The part of the configuration a scenario section's field table describes, by section and
 * table (prepost/param.h); NULL with the reason in *why when the configuration does not use it
 * (a protocol or workload it does not run, a cluster it does not generate). The keys are the
 * scenario parser's own (pp_scenario_section_table): a key the scenario takes, --set takes. */
static void *section_obj(struct pp_sim_config *cfg, const char *section, const struct pp_param *t,
                         const char **why)
{
  struct pp_engine_cfg *e = &cfg->engine;
  static const char not_run[] = "run";
  *why = not_run;
  if (!strcmp(section, "qp"))
    return &e->qp;
  if (!strcmp(section, "workload"))
    return t != pp_traffic_param_table                ? (void *)&e->workload
           : e->workload.kind == PP_WORKLOAD_TRAFFIC ? (void *)pp_traffic_of(e)
                                                      : NULL;
  if (!strcmp(section, "p2p"))
    return pp_engine_cfg_is_p2p(e) ? pp_p2p_params_of(e) : NULL;
  if (!strcmp(section, "ring"))
    return pp_engine_cfg_is_ring(e) ? pp_ring_params_of(e) : NULL;
  if (!strcmp(section, "collective"))
    return e->workload.kind == PP_WORKLOAD_COLLECTIVE ? pp_coll_params_of(e) : NULL;
  if (!strcmp(section, "nic"))
    return &cfg->nic;
  if (!strcmp(section, "limits"))
    return cfg;
  if (!strcmp(section, "faults"))
    return &cfg->faults;
  if (!strcmp(section, "platform.cluster")) {
    *why = "platform";
    return cfg->platform.file[0] ? NULL : &cfg->platform;
  }
  *why = NULL; /* "platform": only its composite key */
  return NULL;
}

/* SECTION.KEY as a scenario writes it (qp.rnr_retry, p2p.eager_limit=8KiB, nic.line_rate=25Gbps,
 * platform.cluster.latency=2us): the section's field tables (prepost/param.h, as the scenario
 * parser lists them) on its part of the configuration. PP_NOTFOUND when no table has it. */
static enum pp_status set_scenario_key(struct pp_sim_config *cfg, const char *key, const char *v,
                                       char *err, size_t errlen)
{
  const struct pp_engine_cfg *e = &cfg->engine;
  const char *dot = strrchr(key, '.');
  char section[64];
  if (!dot || (size_t)(dot - key) >= sizeof(section))
    return PP_NOTFOUND;
  memcpy(section, key, (size_t)(dot - key));
  section[dot - key] = '\0';
  const struct pp_param *t, *p = NULL;
  size_t n;
  for (size_t i = 0; !p && pp_scenario_section_table(section, i, &t, &n); i++)
    p = pp_param_find(t, n, dot + 1);
  if (!p)
    return PP_NOTFOUND;
  const char *why_not;
  void *obj = section_obj(cfg, section, t, &why_not);
  if (p->kind == PP_PARAM_COMPOSITE) {
    snprintf(err, errlen,
             "'%s' is not a single value (%s); --set takes its parts as the sim.* keys "
             "(prepost replay TRACE --sim --list-keys shows them)",
             key, p->doc);
    return PP_INVALID;
  }
  if (!obj) {
    if (why_not && !strcmp(why_not, "platform"))
      snprintf(err, errlen, "'%s': the trace's run uses the platform file %s, not a cluster", key,
               cfg->platform.file);
    else
      snprintf(err, errlen, "'%s': not a parameter of protocol '%s' with workload '%s'", key,
               pp_protocol_name(e->protocol),
               pp_workload_name((enum pp_workload_kind)e->workload.kind));
    return PP_INVALID;
  }
  char why[160];
  const struct pp_param b = pp_param_rank_bound(p, e->nranks); /* a rank: below ranks */
  if (pp_param_set(&b, obj, v, strlen(v), why, sizeof(why)) == PP_OK) {
    struct pp_coll_params *k = obj;
    if (!strcmp(key, "collective.slow_ranks") && k->slow_until == 0)
      k->slow_until = PP_COLL_MAX_ITERATIONS; /* as the parser: slow throughout unless a
                                                 window is given (a run had none) */
    return PP_OK;
  }
  snprintf(err, errlen, "'%s' %s, got '%s'", key, why, v);
  return PP_INVALID;
}

/* PP_NOTFOUND (err untouched) for a key nobody knows. */
static enum pp_status set_key(struct pp_sim_config *cfg, const char *key, const char *v, char *err,
                              size_t errlen)
{
  enum pp_status ss = set_scenario_key(cfg, key, v, err, errlen);
  if (ss != PP_NOTFOUND)
    return ss;
  const struct sfield *f = sfield_of(key);
  if (f) {
    enum pp_status s = set_text(cfg, f, v, err, errlen);
    if (s == PP_OK && !strcmp(key, "sim.seed"))
      cfg->engine.seed = cfg->seed;
    return s;
  }
  char e2[256];
  enum pp_status s = pp_trace_engine_cfg_set(&cfg->engine, key, v, e2, sizeof(e2));
  if (s != PP_NOTFOUND && s != PP_OK)
    snprintf(err, errlen, "%s", e2);
  return s;
}

enum pp_status pp_trace_sim_cfg_set(struct pp_sim_config *cfg, const char *assignment, char *err,
                                    size_t errlen)
{
  const char *eq = strchr(assignment, '=');
  char key[128];
  if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof(key)) {
    snprintf(err, errlen, "--set wants KEY=VALUE, got '%s'", assignment);
    return PP_INVALID;
  }
  memcpy(key, assignment, (size_t)(eq - assignment));
  key[eq - assignment] = '\0';
  const char *v = eq + 1;
  enum pp_status s = set_key(cfg, key, v, err, errlen);
  /* short forms: "rnr_retry=7" is "engine.qp.rnr_retry=7" (the first prefix that knows it) */
  static const char *const prefixes[] = {"engine.qp.", "engine.workload.", "engine.",
                                         "sim.nic.", "sim.faults.", "sim.platform.", "sim."};
  for (size_t i = 0; s == PP_NOTFOUND && !strchr(key, '.') &&
                     i < sizeof(prefixes) / sizeof(prefixes[0]);
       i++) {
    char full[160];
    snprintf(full, sizeof(full), "%s%s", prefixes[i], key);
    s = set_key(cfg, full, v, err, errlen);
  }
  if (s == PP_NOTFOUND)
    snprintf(err, errlen, "unknown key '%s' (prepost replay TRACE --sim --list-keys shows them)",
             key);
  return s;
}

static void print_kv(void *ctx, const char *key, const char *value)
{
  fprintf(ctx, "%s=%s\n", key, value);
}

void pp_trace_sim_cfg_print(FILE *out, const struct pp_sim_config *cfg)
{
  for (size_t i = 0; i < NSIM; i++) {
    const struct sfield *f = &SIM_FIELDS[i];
    const uint8_t *p = (const uint8_t *)cfg + f->off;
    if (f->kind == S_NZ && !uget(p, f->size))
      continue;
    if (f->kind == S_UINT || f->kind == S_BOOL || f->kind == S_NZ)
      fprintf(out, "%s=%" PRIu64 "\n", f->key, uget(p, f->size));
    else if (f->kind == S_F64)
      fprintf(out, "%s=%.17g\n", f->key, *(const double *)(const void *)p);
    else
      fprintf(out, "%s=%s\n", f->key, (const char *)p);
  }
  pp_trace_engine_cfg_each(&cfg->engine, print_kv, out);
}

enum pp_status pp_trace_sim_cfg(const struct pp_trace *t, struct pp_sim_config *cfg,
                                bool *tmp_platform, char *note, size_t notelen)
{
  *tmp_platform = false;
  if (notelen)
    note[0] = '\0';
  const struct pp_trace_kv *raw = pp_trace_kv_find(t, "sim.cfg");
  if (raw && raw->type == PP_TKV_BYTES && raw->n == V1_SIM_SIZE) {
    /* format 1: the members before the engine's as they are (the asserts below keep them in
     * place), the engine's from engine.cfg through its frozen layout, the four after it */
    memset(cfg, 0, sizeof(*cfg));
    memcpy(cfg, raw->b, V1_NIC); /* name, platform */
    memcpy(&cfg->nic, raw->b + V1_NIC, V1_NIC_SIZE); /* format 1 had no RNR delay model */
    memcpy(&cfg->faults, raw->b + V1_FAULTS, V1_FAULTS_SIZE);
    uint64_t tail[4];
    memcpy(tail, raw->b + V1_SIM_ENGINE + V1_ENGINE_SIZE, sizeof tail);
    cfg->seed = tail[0], cfg->max_sim_time_ns = tail[1], cfg->memory_limit = tail[2];
    cfg->no_progress_ns = tail[3];
    cfg->faults.byzantine_data_lies =
        raw->b[V1_FAULTS + offsetof(struct pp_faults, byzantine_data_lies)] != 0;
    cfg->name[sizeof(cfg->name) - 1] = '\0';
    cfg->platform.file[sizeof(cfg->platform.file) - 1] = '\0';
    cfg->nic.name[sizeof(cfg->nic.name) - 1] = '\0';
    char enote[256];
    enum pp_status s = pp_trace_engine_cfg(t, &cfg->engine, enote, sizeof(enote));
    if (s != PP_OK || enote[0]) {
      snprintf(note, notelen, "%s", enote);
      if (s != PP_OK)
        return s;
    }
  } else {
    memset(cfg, 0, sizeof(*cfg));
    pp_nic_profile_default(&cfg->nic);
    cfg->platform.bandwidth_bps = 100e9;
    cfg->platform.latency_ns = 1000;
    cfg->max_sim_time_ns = 60ull * 1000000000ull;
    for (size_t i = 0; i < NSIM; i++) {
      const struct sfield *f = &SIM_FIELDS[i];
      const struct pp_trace_kv *kv = pp_trace_kv_find(t, f->key);
      uint8_t *p = (uint8_t *)cfg + f->off;
      if (!kv)
        continue;
      bool ok = true;
      if (f->kind == S_UINT || f->kind == S_BOOL || f->kind == S_NZ)
        ok = kv->type == PP_TKV_U64 && (f->kind != S_BOOL || kv->u <= 1) &&
             uset(p, f->size, kv->u) == 0;
      else if (f->kind == S_F64)
        ok = kv->type == PP_TKV_F64 && (memcpy(p, &kv->f, sizeof(double)), true);
      else
        ok = kv->type == PP_TKV_STR && strlen(kv->s) < f->size &&
             (memset(p, 0, f->size), snprintf((char *)p, f->size, "%s", kv->s), true);
      if (!ok) {
        snprintf(note, notelen, "header key %s: wrong type or out of range", f->key);
        return PP_PARSE;
      }
    }
    char enote[256];
    enum pp_status s = pp_trace_engine_cfg(t, &cfg->engine, enote, sizeof(enote));
    if (s != PP_OK) {
      snprintf(note, notelen, "%s", enote);
      return s;
    }
    if (raw || t->major < 2) /* format 2 has only the keys: exact */
      snprintf(note, notelen, "the trace's sim.cfg does not match this build: the run uses the "
               "readable sim.* and engine.* keys");
  }
  const struct pp_trace_kv *xml = pp_trace_kv_find(t, "sim.platform.xml");
  if (cfg->platform.file[0] && access(cfg->platform.file, R_OK) != 0 && xml &&
      xml->type == PP_TKV_STR) {
    char path[] = "/tmp/prepost-replay-platform-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
      if (fd >= 0)
        close(fd);
      snprintf(note, notelen, "cannot write the recorded platform to a temporary file: %s",
               strerror(errno));
      return PP_IO;
    }
    fputs(xml->s, f);
    fclose(f);
    snprintf(cfg->platform.file, sizeof(cfg->platform.file), "%s", path);
    *tmp_platform = true;
  }
  return PP_OK;
}
