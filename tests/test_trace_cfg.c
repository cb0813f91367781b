/*
 * engine/trace/trace_cfg.c and tools/trace/trace_sim.c: the configuration in a trace header as
 * keys (format 2). cfg -> header -> cfg is identical for every built-in protocol and workload,
 * with every member of every section drawn at random (derived 0s and values a check would refuse
 * included), a script with every op kind, and a plug-in's parameters; the simulated backend's
 * configuration the same; the header holds no raw struct bytes; a header with a key this build
 * does not know, a missing key or a bad line is refused with a sentence that names it.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/proto.h"
#include "prepost/simrun.h"
#include "prepost/trace.h"
#include "tools/trace/trace_sim.h"

/* ================================================================ a trace in memory */

struct membuf {
  uint8_t *p;
  size_t n, cap;
};

static int mem_sink(void *ctx, const void *buf, size_t len)
{
  struct membuf *m = ctx;
  if (m->n + len > m->cap) {
    m->cap = (m->n + len) * 2;
    m->p = realloc(m->p, m->cap);
    cr_assert_not_null(m->p);
  }
  memcpy(m->p + m->n, buf, len);
  m->n += len;
  return 0;
}

static struct membuf M;
static struct pp_trace T;
static bool opened;

static struct pp_trace_writer *writer(uint32_t nranks)
{
  free(M.p);
  M = (struct membuf){0};
  struct pp_trace_info info = {.version = "test", .backend = "fake", .scenario = "cfg",
                               .nranks = nranks ? nranks : 1};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(mem_sink, &M, &info, &w), PP_OK);
  return w;
}

static void finish(struct pp_trace_writer *w)
{
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  if (opened)
    pp_trace_close(&T);
  char err[256];
  cr_assert_eq(pp_trace_open(M.p, M.n, 0, &T, err, sizeof err), PP_OK, "%s", err);
  opened = true;
}

static void cleanup(void)
{
  if (opened)
    pp_trace_close(&T);
  opened = false;
  free(M.p);
  M = (struct membuf){0};
}

TestSuite(trace_cfg, .fini = cleanup);

/* ================================================================ random configurations */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t draw(void)
{
  rng ^= rng << 13; /* xorshift64 */
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Every member of table t in obj: any value of its width (enum: one of its names, bool 0/1),
 * now and then 0 or the table's own default. */
static void draw_table(const struct pp_param *t, size_t n, void *obj)
{
  for (size_t i = 0; i < n; i++) {
    const struct pp_param *p = &t[i];
    uint64_t v = draw(), r = draw() % 8;
    if (p->kind == PP_PARAM_ENUM)
      v = p->min + v % (p->max - p->min + 1);
    else if (p->kind == PP_PARAM_BOOL)
      v &= 1;
    else if (p->width < 8)
      v &= (1ull << (8 * p->width)) - 1;
    if (r == 0 && p->kind != PP_PARAM_ENUM)
      v = 0;
    else if (r == 1)
      v = p->def;
    pp_param_put(p, obj, v);
  }
}

static void draw_script(struct pp_script *sc)
{
  memset(sc, 0, sizeof *sc);
  sc->nops = PP_SCRIPT_MAX_OPS - (uint16_t)(draw() % 8);
  sc->nprogs = PP_SCRIPT_MAX_PROGS - (uint16_t)(draw() % 4);
  for (unsigned i = 0; i < sc->nops; i++) {
    struct pp_script_op *op = &sc->op[i];
    op->kind = (uint8_t)(i % PP_SOP_COUNT); /* every kind, many times */
    op->peer = draw() % 5 == 0 ? PP_ANY_SOURCE : (uint32_t)draw();
    op->tag = draw() % 5 == 0 ? PP_ANY_TAG : (uint32_t)draw();
    op->comm = (uint32_t)draw();
    op->size = draw() % 3 ? (uint32_t)draw() : (uint32_t)(draw() % 64) << 10; /* KiB units */
    op->count = (uint32_t)draw();
    op->ns = draw() % 3 ? draw() : draw() % 1000 * 1000000; /* ms units */
  }
  for (unsigned i = 0; i < sc->nprogs; i++) {
    struct pp_script_prog *pg = &sc->prog[i];
    unsigned shape = i % 4; /* none, all, alternating bits, random */
    for (unsigned w = 0; w < 1024 / 64; w++)
      pg->ranks[w] = shape == 0 ? 0 : shape == 1 ? UINT64_MAX
                                     : shape == 2 ? 0x5555555555555555ull : draw();
    pg->first = (uint16_t)draw();
    pg->n = (uint16_t)draw();
    pg->repeat = (uint32_t)draw();
  }
}

/* A configuration with every member drawn: the core values, the protocol's parameters and the
 * workload's (a table's, the collective's root and slow_ranks, the script). */
static void draw_cfg(struct pp_engine_cfg *c, const char *protocol, uint32_t workload)
{
  memset(c, 0, sizeof *c);
  cr_assert_eq(pp_engine_cfg_protocol(c, protocol), PP_OK, "%s", protocol);
  draw_table(pp_qp_param_table, pp_qp_param_count, &c->qp);
  draw_table(pp_workload_param_table, pp_workload_param_count, &c->workload);
  cr_assert_eq(pp_engine_cfg_workload(c, workload), PP_OK);
  if (workload == PP_WORKLOAD_TRAFFIC)
    draw_table(pp_traffic_param_table, pp_traffic_param_count, pp_traffic_of(c));
  if (pp_engine_cfg_is_p2p(c))
    draw_table(pp_p2p_param_table, pp_p2p_param_count, pp_p2p_params_of(c));
  if (pp_engine_cfg_is_ring(c))
    draw_table(pp_ring_param_table, pp_ring_param_count, pp_ring_params_of(c));
  if (workload == PP_WORKLOAD_COLLECTIVE) {
    draw_table(pp_coll_param_table, pp_coll_param_count, pp_coll_params_of(c));
    pp_coll_params_of(c)->root = (uint32_t)draw();
    pp_coll_params_of(c)->slow_ranks = draw();
  }
  const struct pp_proto_def *d = pp_proto_get(c->protocol);
  if (pp_proto_plugin(c->protocol))
    draw_table(d->params, d->nparams, c->proto_params);
  c->workload.consume_ranks = draw();
  c->nranks = (uint32_t)draw();
  c->seed = draw();
  c->test_bugs = (uint32_t)draw();
  if (workload == PP_WORKLOAD_SCRIPT)
    draw_script(pp_script_of(c));
}

/* cfg -> header -> cfg, compared byte for byte (padding included: both start zeroed). */
static void round_trip(const struct pp_engine_cfg *c)
{
  struct pp_trace_writer *w = writer(2);
  cr_assert_eq(pp_trace_kv_engine_cfg(w, c), PP_OK);
  finish(w);
  cr_assert_null(pp_trace_kv_find(&T, "engine.cfg"), "no raw struct bytes");
  cr_assert_null(pp_trace_kv_find(&T, "engine.cfg_size"));
  for (size_t i = 0; i < T.nkv; i++)
    cr_assert_neq(T.kv[i].type, PP_TKV_BYTES, "%s holds bytes", T.kv[i].key);
  struct pp_engine_cfg back;
  char note[512];
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_str_empty(note, "exact: no warning");
  for (size_t i = 0; i < sizeof back; i++)
    cr_assert_eq(((const uint8_t *)&back)[i], ((const uint8_t *)c)[i],
                 "byte %zu of struct pp_engine_cfg differs (protocol %s, workload %s)", i,
                 pp_protocol_name(c->protocol), pp_workload_name(c->workload.kind));
}

Test(trace_cfg, every_builtin_protocol_and_workload_round_trips)
{
  for (uint32_t p = 0; p < PP_PROTO_COUNT; p++)
    for (uint32_t k = 0; k < PP_WORKLOAD_COUNT; k++)
      for (int round = 0; round < 3; round++) {
        struct pp_engine_cfg c;
        draw_cfg(&c, pp_protocol_name(p), k);
        round_trip(&c);
      }
}

Test(trace_cfg, defaults_and_an_empty_script_round_trip)
{
  struct pp_engine_cfg c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(pp_engine_cfg_protocol(&c, "eager"), PP_OK);
  round_trip(&c);
  pp_params_defaults(pp_p2p_param_table, pp_p2p_param_count, pp_p2p_params_of(&c));
  c.nranks = 2;
  round_trip(&c);
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.p2p.eager_limit")->s, "12KiB");
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.p2p.frag_size")->s, "0", "derived: 0 kept");
  /* only the sections of the protocol and the workload that run */
  cr_assert_null(pp_trace_kv_find(&T, "engine.collective.op"));
  cr_assert_null(pp_trace_kv_find(&T, "engine.ring.slots"));
  cr_assert_null(pp_trace_kv_find(&T, "engine.script.ops"));
  cr_assert_eq(pp_engine_cfg_workload(&c, PP_WORKLOAD_COLLECTIVE), PP_OK);
  round_trip(&c);
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.collective.op")->s, "allreduce");
  cr_assert_eq(pp_engine_cfg_workload(&c, PP_WORKLOAD_SCRIPT), PP_OK);
  round_trip(&c);
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.script.ops")->s, "0");
  cr_assert_null(pp_trace_kv_find(&T, "engine.script.op.0"));
}

/* The script's lines as trace dump shows them. */
Test(trace_cfg, script_lines_are_readable)
{
  struct pp_engine_cfg c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(pp_engine_cfg_protocol(&c, "eager"), PP_OK);
  c.nranks = 8;
  c.workload.kind = PP_WORKLOAD_SCRIPT;
  pp_script_of(&c)->nprogs = 1;
  pp_script_of(&c)->nops = 2;
  pp_script_of(&c)->prog[0] = (struct pp_script_prog){.ranks = {0x2f}, .first = 0, .n = 2, .repeat = 3};
  pp_script_of(&c)->op[0] = (struct pp_script_op){.kind = PP_SOP_IRECV, .peer = PP_ANY_SOURCE,
                                         .tag = 5, .size = 64, .count = 2};
  pp_script_of(&c)->op[1] = (struct pp_script_op){.kind = PP_SOP_COMPUTE, .count = 1, .ns = 10000};
  round_trip(&c);
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.script.prog.0")->s,
                   "ranks=0-3,5 first=0 n=2 repeat=3");
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.script.op.0")->s,
                   "irecv peer=any tag=5 comm=0 size=64 count=2 ns=0ns");
  cr_assert_str_eq(pp_trace_kv_find(&T, "engine.script.op.1")->s,
                   "compute peer=0 tag=0 comm=0 size=0 count=1 ns=10us");
}

/* ================================================================ a plug-in's parameters */

struct tparams {
  uint32_t depth;
  uint64_t hold_ns;
  bool loud;
  uint8_t mode;
};

static const char *const mode_names[] = {"calm", "busy", "wild"};

static const struct pp_param tparams_table[] = {
    PP_PARAM_UINT(struct tparams, depth, 1, 64, 4, "a depth"),
    PP_PARAM_DURATION(struct tparams, hold_ns, 0, 1000000, 500, "a hold"),
    PP_PARAM_BOOL(struct tparams, loud, false, "a switch"),
    PP_PARAM_ENUM(struct tparams, mode, mode_names, 3, 1, "a mode"),
};

static struct pp_proto_ops tops;

static void register_plugin(void)
{
  static struct pp_proto_def d;
  tops = pp_naive_ops;
  d = (struct pp_proto_def){.abi = PP_PROTO_ABI, .name = "tproto", .desc = "test",
                            .params = tparams_table, .nparams = 4,
                            .params_size = sizeof(struct tparams), .ops = &tops};
  char err[256];
  cr_assert_eq(pp_proto_register_from(&d, "libtproto.so", err, sizeof err), PP_OK, "%s", err);
}

Test(trace_cfg, a_plugins_parameters_round_trip)
{
  register_plugin();
  for (uint32_t k = 0; k < PP_WORKLOAD_COUNT; k++) {
    struct pp_engine_cfg c;
    draw_cfg(&c, "tproto", k);
    round_trip(&c);
    cr_assert_str_eq(pp_trace_kv_find(&T, "engine.plugin")->s, "libtproto.so");
    cr_assert_not_null(pp_trace_kv_find(&T, "proto.mode"));
  }
  struct pp_engine_cfg c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(pp_engine_cfg_protocol(&c, "tproto"), PP_OK);
  round_trip(&c);
  cr_assert_str_eq(pp_trace_kv_find(&T, "proto.hold_ns")->s, "500ns");
  cr_assert_str_eq(pp_trace_kv_find(&T, "proto.mode")->s, "busy");
  cr_assert_null(pp_trace_kv_find(&T, "engine.plugin.nope"));
}

/* ================================================================ what the reader refuses */

static enum pp_status read_back(char *note, size_t len)
{
  struct pp_engine_cfg back;
  return pp_trace_engine_cfg(&T, &back, note, len);
}

/* The header of c, without key `skip`, with key=value replaced or added, opened as T. */
static void write_cfg_plus(const struct pp_engine_cfg *c, const char *skip, const char *key,
                           const char *value)
{
  struct pp_trace_writer *w = writer(2);
  cr_assert_eq(pp_trace_kv_engine_cfg(w, c), PP_OK);
  finish(w);
  struct membuf first = M; /* T reads it */
  M = (struct membuf){0};
  struct pp_trace_info info = {.version = "test", .backend = "fake", .scenario = "cfg",
                               .nranks = 2};
  cr_assert_eq(pp_trace_writer_create(mem_sink, &M, &info, &w), PP_OK);
  bool replaced = false;
  for (size_t i = 0; i < T.nkv; i++) {
    const struct pp_trace_kv *kv = &T.kv[i];
    if (strncmp(kv->key, "engine.", 7) && strncmp(kv->key, "proto.", 6))
      continue;
    if (skip && !strcmp(kv->key, skip))
      continue;
    replaced |= key && !strcmp(kv->key, key);
    cr_assert_eq(pp_trace_kv_str(w, kv->key, key && !strcmp(kv->key, key) ? value : kv->s),
                 PP_OK);
  }
  if (key && !replaced)
    cr_assert_eq(pp_trace_kv_str(w, key, value), PP_OK);
  finish(w); /* closes the first trace, opens this one */
  free(first.p);
}

Test(trace_cfg, a_header_this_build_cannot_read_fully_is_refused)
{
  struct pp_engine_cfg c;
  draw_cfg(&c, "eager", PP_WORKLOAD_SCRIPT);
  pp_script_of(&c)->nops = 3;
  pp_script_of(&c)->nprogs = 1;
  char note[512];
  write_cfg_plus(&c, NULL, NULL, NULL);
  cr_assert_eq(read_back(note, sizeof note), PP_OK, "the copy reads: %s", note);

  write_cfg_plus(&c, NULL, "engine.p2p.new_knob", "3");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE);
  cr_assert(strstr(note, "engine.p2p.new_knob is not known to this build"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.script.op.3", "waitall peer=0 tag=0 comm=0 size=0 count=1 "
                                                 "ns=0ns");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "an op beyond engine.script.ops");
  cr_assert(strstr(note, "engine.script.op.3"), "%s", note);

  write_cfg_plus(&c, "engine.script.op.1", NULL, NULL);
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE);
  cr_assert(strstr(note, "no engine.script.op.1"), "%s", note);

  write_cfg_plus(&c, "engine.protocol", NULL, NULL);
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE);
  cr_assert(strstr(note, "engine.protocol"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.protocol", "nosuch");
  cr_assert_eq(read_back(note, sizeof note), PP_NOTFOUND);
  cr_assert(strstr(note, "'nosuch' is not known"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.script.op.0", "isend peer=1 tag=2 comm=0 size=64 count=1");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "ns= missing");
  cr_assert(strstr(note, "engine.script.op.0"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.script.op.0", "fly peer=1 tag=2 comm=0 size=64 count=1 ns=0");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "no such op");

  write_cfg_plus(&c, NULL, "engine.script.prog.0", "ranks=3-1 first=0 n=1 repeat=0");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "a range backwards");
  cr_assert(strstr(note, "engine.script.prog.0"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.qp.rnr_retry", "300");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "300 does not fit a uint8_t");
  cr_assert(strstr(note, "engine.qp.rnr_retry"), "%s", note);

  write_cfg_plus(&c, NULL, "engine.collective.op", "median");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE);

  write_cfg_plus(&c, NULL, "engine.workload.kind", "dance");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE);
  cr_assert(strstr(note, "engine.workload.kind"), "%s", note);

  write_cfg_plus(&c, NULL, "proto.depth", "3");
  cr_assert_eq(read_back(note, sizeof note), PP_PARSE, "proto.* for a built-in protocol");
  cr_assert(strstr(note, "proto.depth"), "%s", note);

  /* a missing section key takes its table's default */
  write_cfg_plus(&c, "engine.p2p.eager_limit", NULL, NULL);
  struct pp_engine_cfg back;
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_eq(pp_p2p_params_of(&back)->eager_limit, 12u << 10);
  /* another protocol's section (an older build wrote every one): checked, dropped */
  write_cfg_plus(&c, NULL, "engine.ring.slots", "4");
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_eq(memcmp(pp_p2p_params_of(&back), pp_p2p_params_of(&c), sizeof(struct pp_p2p_params)),
               0);
}

/* --set and --list-keys: the format 2 names with their tables' bounds, format 1's names too. */
Test(trace_cfg, keys_are_set_by_name)
{
  struct pp_engine_cfg c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(pp_engine_cfg_protocol(&c, "eager"), PP_OK);
  char err[256];
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.p2p.eager_limit", "8KiB", err, sizeof err),
               PP_OK, "%s", err);
  cr_assert_eq(pp_p2p_params_of(&c)->eager_limit, 8192);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.p2p.pipeline", "9", err, sizeof err),
               PP_INVALID, "the table's bound 1..8");
  cr_assert(strstr(err, "engine.p2p.pipeline must be an integer 1..8"), "%s", err);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.credit_idle", "5us", err, sizeof err),
               PP_INVALID, "not a parameter of eager");
  cr_assert(strstr(err, "not a parameter of protocol 'eager'"), "%s", err);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.protocol", "ring-cts", err, sizeof err), PP_OK);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.credit_idle", "5us", err, sizeof err),
               PP_OK);
  cr_assert_eq(pp_ring_params_of(&c)->credit_idle_ns, 5000);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.ring.credit_idle_ns", "7000", err, sizeof err),
               PP_OK, "format 1's name");
  cr_assert_eq(pp_ring_params_of(&c)->credit_idle_ns, 7000);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.coll.chunk", "4096", err, sizeof err),
               PP_INVALID, "the workload is stream");
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.workload.kind", "collective", err, sizeof err),
               PP_OK);
  cr_assert_eq(pp_coll_params_of(&c)->chunk, 128u << 10, "the collective's defaults");
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.coll.chunk", "4096", err, sizeof err), PP_OK);
  cr_assert_eq(pp_coll_params_of(&c)->chunk, 4096);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.workload.kind", "traffic", err, sizeof err),
               PP_OK);
  cr_assert_eq(c.workload.kind, PP_WORKLOAD_TRAFFIC);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.protocol", "ring-cts", err, sizeof err), PP_OK);
  cr_assert_eq(c.protocol, PP_PROTO_RING_CTS);
  cr_assert_eq(pp_trace_engine_cfg_set(&c, "engine.script.op.0", "waitall", err, sizeof err),
               PP_NOTFOUND, "the script is not set by key");
}

/* ================================================================ the simulated backend */

static void fill_sim(struct pp_sim_config *s)
{
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "every field");
  snprintf(s->platform.file, sizeof s->platform.file, "/nonexistent/platform.xml");
  s->platform.bandwidth_bps = 12.5e9 + 0.1;
  s->platform.latency_ns = draw();
  snprintf(s->nic.name, sizeof s->nic.name, "nic-x");
  draw_table(pp_nic_param_table, pp_nic_param_count, &s->nic);
  s->nic.line_rate_bps = 99.99e9;
  for (unsigned c = 0; c < 32; c += 3) /* some codes: the others stay 0, absent from the header */
    s->nic.rnr_delay_ns[c] = draw();
  struct pp_faults *f = &s->faults;
  f->loss = 0.125;
  f->until_ns = draw();
  f->jitter_ns = draw();
  f->scramble = 1.0 / 3;
  f->scramble_ns = draw();
  f->srq_delay_ns = draw();
  f->qp_error_ns = draw();
  f->qp_error_host = (uint32_t)draw();
  f->qp_error_qp = (uint32_t)draw();
  f->rkey_ns = draw();
  f->rkey_host = (uint32_t)draw();
  f->cq_delay_ns = draw();
  f->pause_ranks = draw();
  f->pause_at_ns = draw();
  f->pause_ns = draw();
  f->order_bits = (uint32_t)draw();
  f->order_mask = draw();
  f->order_window_ns = draw();
  f->byzantine = 0.3;
  f->byzantine_rank = (uint32_t)draw();
  f->byzantine_data_lies = true;
  draw_cfg(&s->engine, "ring-credits", PP_WORKLOAD_COLLECTIVE);
  s->seed = draw();
  s->max_sim_time_ns = draw();
  s->memory_limit = draw();
  s->no_progress_ns = draw();
}

Test(trace_cfg, the_sim_config_round_trips)
{
  struct pp_sim_config s, back;
  fill_sim(&s);
  struct pp_trace_writer *w = writer(2);
  cr_assert_eq(pp_trace_kv_sim_cfg(w, &s), PP_OK);
  finish(w);
  cr_assert_null(pp_trace_kv_find(&T, "sim.cfg"), "no raw struct bytes");
  for (size_t i = 0; i < T.nkv; i++)
    cr_assert_neq(T.kv[i].type, PP_TKV_BYTES, "%s holds bytes", T.kv[i].key);
  bool tmp;
  char note[512];
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_sim_cfg(&T, &back, &tmp, note, sizeof note), PP_OK, "%s", note);
  cr_assert_str_empty(note, "exact: no warning");
  cr_assert_not(tmp);
  back.engine.rank = s.engine.rank;
  for (size_t i = 0; i < sizeof back; i++)
    cr_assert_eq(((const uint8_t *)&back)[i], ((const uint8_t *)&s)[i],
                 "byte %zu of struct pp_sim_config differs", i);
}

/* A member added to these structs needs its header key (trace_cfg.c's sections or tables, or
 * trace_sim.c's SIM_FIELDS) and a value in the round trips above; then update its size here. */
Test(trace_cfg, struct_sizes_are_the_ones_the_keys_cover)
{
  cr_assert_eq(sizeof(struct pp_qp_params), 20);
  cr_assert_eq(sizeof(struct pp_workload), 64);
  cr_assert_eq(sizeof(struct pp_p2p_params), 72);
  cr_assert_eq(sizeof(struct pp_traffic), 16);
  cr_assert_eq(sizeof(struct pp_ring_params), 24);
  cr_assert_eq(sizeof(struct pp_coll_params), 80);
  cr_assert_eq(sizeof(struct pp_script_op), 32);
  cr_assert_eq(sizeof(struct pp_script_prog), 136);
  cr_assert_eq(sizeof(struct pp_engine_cfg), 12920);
  cr_assert_eq(sizeof(struct pp_faults), 152);
  cr_assert_eq(sizeof(struct pp_nic_profile),
               136 + 2 * 8 + 32 * 8 + 8); /* + the RNR delay model + rc_model (and padding) */
}

/* ================================================================ format 1 stays readable */

/* A format 1.2 header as that writer wrote it: the struct's bytes, beside readable keys. */
static void write_v1_raw(const struct pp_engine_cfg *c, const void *raw, size_t raw_size)
{
  struct pp_trace_writer *w = writer(2);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.cfg_size", raw_size), PP_OK);
  cr_assert_eq(pp_trace_kv_bytes(w, "engine.cfg", raw, raw_size), PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.nranks", c->nranks), PP_OK);
  cr_assert_eq(pp_trace_kv_str(w, "engine.protocol", pp_protocol_name(c->protocol)), PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.qp.rnr_retry", c->qp.rnr_retry), PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.workload.interval_ns", c->workload.interval_ns),
               PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.coll.chunk", pp_coll_params_of(c)->chunk), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  M.p[8] = 1; /* major 1, minor 2: the file header has no checksum */
  M.p[10] = 2;
  if (opened)
    pp_trace_close(&T);
  char err[256];
  cr_assert_eq(pp_trace_open(M.p, M.n, 0, &T, err, sizeof err), PP_OK, "%s", err);
  opened = true;
  cr_assert_eq(T.major, 1);
}

/* Format 1's bytes of c: the layout it was written in (a0fae12; engine/trace/trace_cfg.c keeps
 * the same frozen copy to read it), where struct pp_p2p_params ended at `record` and every
 * built-in's parameters had a member of their own. c's srq members must be 0 (format 1 had
 * none). Returns the bytes written. */
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
  struct pp_traffic traffic;
  struct pp_script script;
  struct pp_ring_params ring;
  struct pp_coll_params coll;
  uint32_t test_bugs;
  uint64_t proto_params[256 / 8];
};
_Static_assert(sizeof(struct v1_cfg) == 13096, "format 1's engine.cfg was 13096 bytes");
#define V1_BEFORE_PARAMS offsetof(struct v1_cfg, proto_params)

static size_t v1_bytes(const struct pp_engine_cfg *c, uint8_t *out)
{
  static struct v1_cfg v;
  memset(&v, 0, sizeof v);
  v.rank = c->rank, v.nranks = c->nranks, v.protocol = c->protocol, v.seed = c->seed;
  memcpy(&v.qp, &c->qp, sizeof v.qp);
  _Static_assert(sizeof v.qp == sizeof c->qp &&
                     sizeof v.workload == offsetof(struct pp_workload, warmup),
                 "unchanged since format 1 (warmup appended since)");
  cr_assert_eq(c->workload.warmup, 0, "format 1 had no warmup");
  memcpy(&v.workload, &c->workload, sizeof v.workload);
  if (pp_engine_cfg_is_p2p(c)) {
    const struct pp_p2p_params *p = pp_p2p_params_of(c);
    cr_assert(!p->srq && !p->srq_buffers && !p->srq_limit);
    memcpy(&v.p2p, p, sizeof v.p2p);
  }
  if (pp_engine_cfg_is_ring(c))
    v.ring = *pp_ring_params_of(c);
  if (c->workload.kind == PP_WORKLOAD_TRAFFIC)
    v.traffic = *pp_traffic_of(c);
  if (c->workload.kind == PP_WORKLOAD_SCRIPT)
    v.script = *pp_script_of(c);
  if (c->workload.kind == PP_WORKLOAD_COLLECTIVE)
    v.coll = *pp_coll_params_of(c);
  v.test_bugs = c->test_bugs;
  if (pp_proto_plugin(c->protocol))
    memcpy(v.proto_params, c->proto_params, sizeof v.proto_params);
  memcpy(out, &v, sizeof v);
  return sizeof v;
}

static void write_v1(const struct pp_engine_cfg *c, size_t raw_size)
{
  static uint8_t raw[sizeof(struct v1_cfg)];
  size_t n = v1_bytes(c, raw);
  write_v1_raw(c, raw, raw_size == sizeof(struct v1_cfg) ? n : raw_size);
}

Test(trace_cfg, format_1_raw_bytes_are_still_read)
{
  struct pp_engine_cfg c, back;
  draw_cfg(&c, "rndv", PP_WORKLOAD_SCRIPT);
  pp_p2p_params_of(&c)->srq = false; /* format 1 had no p2p.srq */
  pp_p2p_params_of(&c)->srq_buffers = pp_p2p_params_of(&c)->srq_limit = 0;
  c.workload.warmup = 0; /* nor workload.warmup */
  write_v1(&c, sizeof(struct v1_cfg));
  char note[512];
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_str_empty(note);
  cr_assert_eq(memcmp(&back, &c, sizeof c), 0, "the raw bytes, exactly");

  /* the size before proto_params was appended */
  c.proto_params[0] = 0;
  write_v1(&c, V1_BEFORE_PARAMS);
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_eq(memcmp(&back, &c, sizeof c), 0, "the prefix, the rest 0");

  /* a bool of the raw bytes that is not 0 or 1 reads as true (not as an invalid bool) */
  pp_coll_params_of(&c)->check = true;
  static uint8_t raw[sizeof(struct v1_cfg)];
  size_t n = v1_bytes(&c, raw);
  raw[offsetof(struct v1_cfg, coll.check)] = 7;
  write_v1_raw(&c, raw, n);
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert_eq(memcmp(&back, &c, sizeof c), 0);

  /* raw bytes of another build's size: the readable keys over the caller's values, said so */
  write_v1(&c, 100);
  memset(&back, 0, sizeof back);
  cr_assert_eq(pp_trace_engine_cfg(&T, &back, note, sizeof note), PP_OK, "%s", note);
  cr_assert(strstr(note, "is not format 1's struct"), "%s", note);
  cr_assert_eq(back.qp.rnr_retry, c.qp.rnr_retry);
  cr_assert_eq(back.workload.interval_ns, c.workload.interval_ns);
  cr_assert_eq(pp_coll_params_of(&back)->chunk, pp_coll_params_of(&c)->chunk);
  cr_assert_eq(back.protocol, PP_PROTO_RNDV);
}

Test(trace_cfg, format_1_sim_cfg_bytes_are_still_read)
{
  static struct pp_sim_config s, back;
  fill_sim(&s);
  s.engine.rank = 0;
  pp_p2p_params_of(&s.engine)->srq = false; /* format 1 had no p2p.srq */
  pp_p2p_params_of(&s.engine)->srq_buffers = pp_p2p_params_of(&s.engine)->srq_limit = 0;
  s.engine.workload.warmup = 0; /* nor workload.warmup */
  /* format 1 had no RNR delay model: its NIC profile ended with line_rate_bps */
  s.nic.rnr_tick_ns = s.nic.rnr_min_ns = 0;
  memset(s.nic.rnr_delay_ns, 0, sizeof s.nic.rnr_delay_ns);
  s.nic.rc_model = PP_RC_IBTA; /* nor rc_model: its NICs were the IBTA's */
  /* format 1's sim.cfg: the members before the engine's (name and platform, the NIC profile's
   * first 136 bytes, the faults: 1456 bytes), format 1's engine, the four after */
  enum { V1_SIM_ENGINE_AT = 1456 };
  static uint8_t eng[sizeof(struct v1_cfg)], sim[V1_SIM_ENGINE_AT + sizeof(struct v1_cfg) + 32];
  size_t ne = v1_bytes(&s.engine, eng), at = V1_SIM_ENGINE_AT;
  size_t tail = offsetof(struct pp_sim_config, engine) + sizeof s.engine;
  memcpy(sim, &s, offsetof(struct pp_sim_config, nic));
  memcpy(sim + 1168, &s.nic, 136);
  memcpy(sim + 1304, &s.faults, sizeof s.faults);
  memcpy(sim + at, eng, ne);
  memcpy(sim + at + ne, (const uint8_t *)&s + tail, 4 * sizeof(uint64_t));
  struct pp_trace_writer *w = writer(2);
  cr_assert_eq(pp_trace_kv_u64(w, "sim.cfg_size", at + ne + 4 * sizeof(uint64_t)), PP_OK);
  cr_assert_eq(pp_trace_kv_bytes(w, "sim.cfg", sim, at + ne + 4 * sizeof(uint64_t)), PP_OK);
  cr_assert_eq(pp_trace_kv_bytes(w, "engine.cfg", eng, ne), PP_OK);
  cr_assert_eq(pp_trace_kv_str(w, "engine.protocol", "ring-credits"), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  M.p[8] = 1;
  M.p[10] = 2;
  char note[512];
  cr_assert_eq(pp_trace_open(M.p, M.n, 0, &T, note, sizeof note), PP_OK, "%s", note);
  opened = true;
  bool tmp;
  memset(&back, 0xee, sizeof back);
  cr_assert_eq(pp_trace_sim_cfg(&T, &back, &tmp, note, sizeof note), PP_OK, "%s", note);
  cr_assert_str_empty(note);
  cr_assert_eq(memcmp(&back, &s, sizeof s), 0, "format 1's bytes, exactly");
}
