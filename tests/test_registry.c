/* engine/core/registry.c: protocols by name (prepost/proto.h). Criterion runs each test in its
 * own process, so a registration never leaks into another test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "fakefabric.h"
#include "prepost/proto.h"
#include "tools/scenario/scenario.h"

/* A protocol of the test: the naive protocol's ops under another name, with a parameter table
 * and hooks that record their calls. */
struct tparams {
  uint32_t depth;
  uint64_t hold_ns;
  bool loud;
};

static const struct pp_param tparams_table[] = {
    PP_PARAM_UINT(struct tparams, depth, 1, 64, 4, "a depth"),
    PP_PARAM_DURATION(struct tparams, hold_ns, 0, 1000000, 500, "a hold"),
    PP_PARAM_BOOL(struct tparams, loud, false, "a switch"),
};

static unsigned checks, mems, asyncs;
static struct pp_async_event last_async;

static enum pp_status tcheck(const struct pp_engine_cfg *cfg, const void *params, char *err,
                             size_t errlen)
{
  (void)cfg;
  const struct tparams *p = params;
  checks++;
  if (p->loud && p->depth > 8) {
    snprintf(err, errlen, "a loud protocol keeps depth <= 8, got %u", p->depth);
    return PP_INVALID;
  }
  return PP_OK;
}

static void tmem(const struct pp_engine_cfg *cfg, const void *params, uint32_t npeers,
                 struct pp_mem_need *out)
{
  (void)cfg;
  const struct tparams *p = params;
  mems++;
  pp_mem_add(out, (uint64_t)npeers * p->depth << 30, "t.depth");
}

static enum pp_status tasync(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev)
{
  (void)e, (void)now;
  asyncs++;
  last_async = *ev;
  return PP_OK;
}

static struct pp_proto_ops tops;

static struct pp_proto_def tdef(const char *name)
{
  tops = pp_naive_ops;
  tops.on_async = tasync;
  return (struct pp_proto_def){.abi = PP_PROTO_ABI,
                               .name = name,
                               .desc = "test",
                               .params = tparams_table,
                               .nparams = 3,
                               .params_size = sizeof(struct tparams),
                               .check = tcheck,
                               .mem_need = tmem,
                               .ops = &tops};
}

static char err[256];

Test(registry, builtins_at_their_ids)
{
  cr_assert_geq(pp_proto_count(), PP_PROTO_COUNT);
  cr_assert_eq(pp_proto_id("naive"), PP_PROTO_NAIVE);
  cr_assert_eq(pp_proto_id("eager"), PP_PROTO_EAGER);
  cr_assert_eq(pp_proto_id("rndv"), PP_PROTO_RNDV);
  cr_assert_eq(pp_proto_id("ring-credits"), PP_PROTO_RING_CREDITS);
  cr_assert_eq(pp_proto_id("ring-cts"), PP_PROTO_RING_CTS);
  cr_assert_str_eq(pp_protocol_name(PP_PROTO_RING_CTS), "ring-cts");
  cr_assert_null(pp_proto_plugin(PP_PROTO_EAGER));
  cr_assert_str_eq(pp_workload_name(PP_WORKLOAD_COLLECTIVE), "collective");
  cr_assert_eq(pp_workload_from_name("traffic"), PP_WORKLOAD_TRAFFIC);
  for (uint32_t i = 0; i < PP_PROTO_COUNT; i++)
    cr_assert_not_null(pp_proto_get(i)->ops->pending, "%s", pp_protocol_name(i));
}

Test(registry, unknown_name)
{
  cr_assert_null(pp_proto_find("no-such-protocol"));
  cr_assert_eq(pp_proto_id("no-such-protocol"), -1);
  cr_assert_eq(pp_protocol_from_name(NULL), -1);
  cr_assert_null(pp_proto_get(pp_proto_count()));
  cr_assert_str_eq(pp_protocol_name(pp_proto_count() + 7), "?");
  struct pp_engine_cfg c = {.protocol = PP_PROTO_EAGER};
  cr_assert_eq(pp_engine_cfg_protocol(&c, "no-such-protocol"), PP_NOTFOUND);
  cr_assert_eq(c.protocol, PP_PROTO_EAGER, "unchanged");
  c.protocol = pp_proto_count();
  c.nranks = 2;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "unknown protocol"), "%s", err);
  cr_assert_null(pp_engine_cfg_proto_params(&c));
}

Test(registry, duplicate_name_refused)
{
  struct pp_proto_def d = tdef("naive");
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_EXISTS);
  cr_assert(strstr(err, "'naive' is registered already (built in)"), "%s", err);
  static struct pp_proto_def a, b;
  a = tdef("twice");
  b = a;
  cr_assert_eq(pp_proto_register_from(&a, "libfirst.so", err, sizeof err), PP_OK, "%s", err);
  uint32_t n = pp_proto_count();
  cr_assert_eq(pp_proto_register(&b, err, sizeof err), PP_EXISTS);
  cr_assert(strstr(err, "by plug-in libfirst.so"), "%s", err);
  cr_assert_eq(pp_proto_count(), n, "nothing added");
  cr_assert_eq(pp_proto_find("twice"), &a);
  cr_assert_str_eq(pp_proto_plugin((uint32_t)pp_proto_id("twice")), "libfirst.so");
}

Test(registry, missing_ops_slot_refused)
{
  struct pp_proto_def d = tdef("holey");
  tops.on_wc = NULL;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "'on_wc'"), "%s", err);
  tops = pp_naive_ops;
  tops.pending = NULL;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "'pending'"), "%s", err);
  d.ops = NULL;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert_eq(pp_proto_id("holey"), -1, "nothing registered");
  /* the optional slots may stay empty */
  tops = pp_naive_ops;
  tops.dump = NULL;
  tops.on_async = NULL;
  d.ops = &tops;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_OK, "%s", err);
}

Test(registry, def_validation)
{
  struct pp_proto_def d = tdef("Bad_Name");
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "[a-z0-9-]"), "%s", err);
  d = tdef("other-abi");
  d.abi = PP_PROTO_ABI + 1;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "rebuild it"), "%s", err);
  d = tdef("too-big");
  d.params_size = PP_PROTO_PARAMS_MAX + 8;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  /* a table whose default is out of its bounds */
  static const struct pp_param bad[] = {
      PP_PARAM_UINT(struct tparams, depth, 1, 64, 65, "a depth"),
  };
  d = tdef("bad-table");
  d.params = bad;
  d.nparams = 1;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "parameter table"), "%s", err);
  struct pp_proto_bug bugs[PP_PROTO_MAX_BUGS + 1];
  for (size_t i = 0; i <= PP_PROTO_MAX_BUGS; i++)
    bugs[i] = (struct pp_proto_bug){"a-bug", "a doc"};
  d = tdef("many-bugs");
  d.bugs = bugs;
  d.nbugs = PP_PROTO_MAX_BUGS + 1;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  static const char *const refused[] = {"Bad_Name", "other-abi", "too-big", "bad-table",
                                         "many-bugs"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    cr_assert_eq(pp_proto_id(refused[i]), -1, "%s registered", refused[i]);
}

/* The protocol's parameters: defaults when chosen, bounds of the table and its check in
 * pp_engine_cfg_check, its memory hook in pp_engine_mem_need. */
Test(registry, params_checked_through_the_def)
{
  static struct pp_proto_def d;
  d = tdef("tparams");
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_OK, "%s", err);
  struct pp_scenario sc;
  pp_scenario_defaults(&sc);
  struct pp_engine_cfg *c = &sc.sim.engine;
  c->nranks = 2;
  cr_assert_eq(pp_engine_cfg_protocol(c, "tparams"), PP_OK);
  const struct tparams *p = pp_engine_cfg_proto_params(c);
  cr_assert_eq((const void *)p, (const void *)c->proto_params);
  cr_assert_eq(p->depth, 4);
  cr_assert_eq(p->hold_ns, 500);
  cr_assert_eq(p->loud, false);
  cr_assert_eq(pp_engine_cfg_check(c, err, sizeof err), PP_OK, "%s", err);
  cr_assert_gt(checks, 0);
  struct tparams *w = pp_engine_cfg_proto_params(c);
  w->depth = 65; /* out of the table's bounds */
  cr_assert_eq(pp_engine_cfg_check(c, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "depth"), "%s", err);
  w->depth = 9;
  w->loud = true; /* the def's own check */
  cr_assert_eq(pp_engine_cfg_check(c, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "a loud protocol keeps depth <= 8, got 9");
  w->loud = false;
  struct pp_mem_need need;
  pp_engine_mem_need(c, &need);
  cr_assert_eq(mems, 1);
  cr_assert_str_eq(need.biggest, "t.depth");
  cr_assert_geq(need.bytes, 9ull << 30);
}

/* A registered protocol runs end to end: a scenario names it, its section sets its parameters
 * (field table), the simulated run completes. */
Test(registry, scenario_runs_a_registered_protocol)
{
  static struct pp_proto_def d;
  d = tdef("tparams");
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_OK, "%s", err);
  const char *text = "ranks: 2\nprotocol: tparams\ntparams:\n  depth: 7\n  hold_ns: 2us\n"
                     "workload:\n  pattern: pair\n  messages: 20\n  size: 256\n"
                     "qp:\n  rq_depth: 64\n";
  static struct pp_scenario sc;
  char e2[512];
  cr_assert_eq(pp_scenario_parse(text, strlen(text), "t.yaml", PREPOST_MODELS_DIR, &sc, e2,
                                 sizeof e2),
               PP_OK, "%s", e2);
  const struct tparams *p = pp_engine_cfg_proto_params(&sc.sim.engine);
  cr_assert_eq(p->depth, 7);
  cr_assert_eq(p->hold_ns, 2000);
  const char *bad = "ranks: 2\nprotocol: tparams\ntparams:\n  depth: 100\n";
  cr_assert_eq(pp_scenario_parse(bad, strlen(bad), "t.yaml", PREPOST_MODELS_DIR, &sc, e2,
                                 sizeof e2),
               PP_INVALID);
  cr_assert(strstr(e2, "tparams.depth"), "%s", e2);
  struct pp_run_result res;
  cr_assert_eq(pp_scenario_parse(text, strlen(text), "t.yaml", PREPOST_MODELS_DIR, &sc, e2,
                                 sizeof e2),
               PP_OK, "%s", e2);
  cr_assert_eq(pp_sim_run(&sc.sim, NULL, &res, e2, sizeof e2), PP_OK, "%s", e2);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(res.ranks[1].stats.messages_received, 20);
  pp_run_result_free(&res);
}

/* on_async: the protocol sees the event after the engine counted it; without the hook the
 * event is only counted. */
Test(registry, on_async_reaches_the_protocol)
{
  static struct pp_proto_def d;
  d = tdef("tasync");
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_OK, "%s", err);
  struct pp_scenario sc;
  pp_scenario_defaults(&sc);
  struct pp_engine_cfg c = sc.sim.engine;
  c.nranks = 2;
  c.workload.pattern = PP_PATTERN_PAIR;
  c.workload.messages = 4;
  c.workload.size = 64;
  cr_assert_eq(pp_engine_cfg_protocol(&c, "tasync"), PP_OK);
  static struct ff f;
  ff_init(&f, &c, 1);
  struct pp_async_event ev = {.type = PP_EVENT_QP_FATAL, .qp_num = 77};
  cr_assert_eq(pp_engine_on_async(f.e[0], 10, &ev), PP_OK);
  cr_assert_eq(asyncs, 1);
  cr_assert_eq(last_async.qp_num, 77);
  struct pp_rank_stats st;
  pp_engine_counts(f.e[0], &st);
  cr_assert_eq(st.async_events, 1);
  ff_fini(&f);
  c.protocol = PP_PROTO_NAIVE; /* no hook: counted only */
  ff_init(&f, &c, 1);
  cr_assert_eq(pp_engine_on_async(f.e[0], 10, &ev), PP_OK);
  pp_engine_counts(f.e[0], &st);
  cr_assert_eq(st.async_events, 1);
  cr_assert_eq(asyncs, 1);
  ff_fini(&f);
}

Test(registry, protocol_bugs_by_name)
{
  static const struct pp_proto_bug bugs[] = {{"first-bug", "one"}, {"second-bug", "two"}};
  static struct pp_proto_def d;
  d = tdef("buggy");
  d.bugs = bugs;
  d.nbugs = 2;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_OK, "%s", err);
  uint32_t id = (uint32_t)pp_proto_id("buggy"), which = 0;
  cr_assert_eq(pp_proto_bug_bit(id, "second-bug"), (int)PP_PROTO_BUG_SHIFT + 1);
  cr_assert_eq(pp_proto_bug_bit(id, "third-bug"), -1);
  cr_assert_eq(pp_proto_bug_bit(PP_PROTO_EAGER, "first-bug"), -1);
  cr_assert_eq(pp_proto_bug_find("first-bug", &which), (int)PP_PROTO_BUG_SHIFT);
  cr_assert_eq(which, id);
}

/* What check_def refuses besides names, ABIs and sizes: no definition at all, a test bug with
 * no doc or a bad name, a parameter count with no table. Nothing of them is registered. */
Test(registry, def_validation_of_bugs_and_tables)
{
  cr_assert_eq(pp_proto_register(NULL, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "no definition");
  struct pp_proto_bug nodoc[] = {{"a-bug", NULL}}, badname[] = {{"A bug", "a doc"}};
  struct pp_proto_def d = tdef("undocumented");
  d.bugs = nodoc;
  d.nbugs = 1;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "test bug 0 needs a [a-z0-9-] name and a doc"), "%s", err);
  d = tdef("badly-named-bug");
  d.bugs = badname;
  d.nbugs = 1;
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "test bug 0"), "%s", err);
  d = tdef("no-bug-table");
  d.nbugs = 1; /* and bugs NULL */
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "test bugs"), "%s", err);
  d = tdef("no-table");
  d.params = NULL; /* nparams 3 */
  cr_assert_eq(pp_proto_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "3 parameters but no table"), "%s", err);
  static const char *const refused[] = {"undocumented", "badly-named-bug", "no-bug-table",
                                         "no-table"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    cr_assert_eq(pp_proto_id(refused[i]), -1, "%s registered", refused[i]);
}

/* The registry holds PP_MAX_PROTOCOLS: the next registration is refused with PP_LIMIT and a
 * sentence that says so, and changes nothing. */
Test(registry, a_full_registry_refuses_with_a_clear_error)
{
  static char names[PP_MAX_PROTOCOLS][16];
  static struct pp_proto_def defs[PP_MAX_PROTOCOLS];
  uint32_t n = pp_proto_count(), added = 0;
  cr_assert_lt(n, PP_MAX_PROTOCOLS);
  for (uint32_t i = 0; n + i < PP_MAX_PROTOCOLS; i++, added++) {
    snprintf(names[i], sizeof names[i], "filler-%u", i);
    defs[i] = tdef(names[i]);
    cr_assert_eq(pp_proto_register(&defs[i], err, sizeof err), PP_OK, "%s", err);
  }
  cr_assert_eq(pp_proto_count(), PP_MAX_PROTOCOLS);
  static struct pp_proto_def one;
  one = tdef("one-too-many");
  cr_assert_eq(pp_proto_register(&one, err, sizeof err), PP_LIMIT);
  char want[96];
  snprintf(want, sizeof want, "'one-too-many': the registry holds %u protocols already",
           PP_MAX_PROTOCOLS);
  cr_assert(strstr(err, want), "%s", err);
  cr_assert_eq(pp_proto_count(), PP_MAX_PROTOCOLS, "nothing added");
  cr_assert_eq(pp_proto_id("one-too-many"), -1);
  cr_assert_eq(pp_proto_find(names[added - 1]), &defs[added - 1], "the last one that fit");
}

/* ------------------------------------------------------------------ workloads */

extern const struct pp_workload_def pp_stream_def; /* engine/workload/stream.c */

/* A workload of the test: the stream workload's ops and memory estimate under another name. */
static struct pp_workload_def wdef(const char *name)
{
  return (struct pp_workload_def){.name = name, .desc = "test", .mem_need = pp_stream_def.mem_need,
                                  .ops = &pp_stream_ops};
}

/* A workload registration is refused with a sentence when it has no name of [a-z0-9-], no ops
 * table or memory estimate, an ops table with a slot missing, parameters past
 * PP_WORKLOAD_PARAMS_MAX, or a name taken; none of them is registered. A good one gets the next
 * kind and is found by name. */
Test(registry, workload_registration_refusals)
{
  cr_assert_eq(pp_workload_register(NULL, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "a workload needs"), "%s", err);
  struct pp_workload_def d = wdef("Bad_Name");
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_INVALID);
  d = wdef("no-mem");
  d.mem_need = NULL;
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_INVALID);
  d = wdef("no-ops");
  d.ops = NULL;
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_INVALID);
  static struct pp_app_ops holey;
  holey = pp_stream_ops;
  holey.done = NULL;
  d = wdef("holey");
  d.ops = &holey;
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "'holey': its ops table misses a slot"), "%s", err);
  d = wdef("too-big");
  d.params_size = PP_WORKLOAD_PARAMS_MAX + 8;
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "parameters of"), "%s", err);
  d = wdef("stream");
  cr_assert_eq(pp_workload_register(&d, err, sizeof err), PP_EXISTS);
  cr_assert(strstr(err, "'stream' is registered already"), "%s", err);
  static const char *const refused[] = {"Bad_Name", "no-mem", "no-ops", "holey", "too-big"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    cr_assert_eq(pp_workload_from_name(refused[i]), -1, "%s registered", refused[i]);
  uint32_t n = 0;
  while (pp_workload_get(n))
    n++;
  static struct pp_workload_def good;
  good = wdef("good");
  cr_assert_eq(pp_workload_register(&good, err, sizeof err), PP_OK, "%s", err);
  cr_assert_eq(pp_workload_from_name("good"), (int)n, "the next kind");
  cr_assert_eq(pp_workload_get(n), &good);
}

/* The workload registry holds 16: the next one is refused with PP_LIMIT. */
Test(registry, a_full_workload_registry_refuses_with_a_clear_error)
{
  static char names[16][16];
  static struct pp_workload_def defs[16];
  uint32_t n = 0;
  while (pp_workload_get(n))
    n++;
  cr_assert_lt(n, 16);
  for (uint32_t i = 0; n + i < 16; i++) {
    snprintf(names[i], sizeof names[i], "filler-%u", i);
    defs[i] = wdef(names[i]);
    cr_assert_eq(pp_workload_register(&defs[i], err, sizeof err), PP_OK, "%s", err);
  }
  cr_assert_not_null(pp_workload_get(15));
  static struct pp_workload_def one;
  one = wdef("one-too-many");
  cr_assert_eq(pp_workload_register(&one, err, sizeof err), PP_LIMIT);
  cr_assert(strstr(err, "'one-too-many': the registry holds 16 workloads already"), "%s", err);
  cr_assert_null(pp_workload_get(16), "nothing added");
  cr_assert_eq(pp_workload_from_name("one-too-many"), -1);
}
