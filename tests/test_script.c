/*
 * engine/workload/script.c (the script and api workloads) and the scenario keys of tools/scenario/scenario_p2p.inc:
 * operation lists parsed from YAML and run on SimGrid (one simulation per Test: Criterion runs
 * each in its own process), checked through the run result and the recorded receives.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/simrun.h"
#include "engine/core/engine_impl.h"
#include "prepost/p2p.h"

#include "sim_case.h"

TestSuite(script, .fini = sim_fini);

/* The parse error of `text`, which must fail with status st. */
static const char *parse_error(const char *text, enum pp_status st)
{
  static char err[1024];
  err[0] = '\0';
  enum pp_status s =
      pp_scenario_parse(text, strlen(text), "e.yaml", PREPOST_MODELS_DIR, &sc, err, sizeof(err));
  cr_assert_eq(s, st, "'%s': got %s (%s)", text, pp_status_name(s), err);
  return err;
}

static uint64_t fill_sum(uint32_t size, uint32_t src, uint64_t seq, uint32_t first)
{
  uint8_t *b = malloc(size);
  pp_msg_fill(b, size, src, seq);
  uint64_t x = pp_p2p_checksum(b, first);
  free(b);
  return x;
}

/* ================================================================ the shipped example */

Test(script, example_script_semantics_and_receive_records)
{
  sim_load("p2p-script");
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "outcome %s", pp_outcome_name(res.outcome));
  const struct pp_rank_result *r0 = &res.ranks[0];
  cr_assert_eq(r0->nreceives, 5);
  const struct pp_recv_record *x = r0->receives;
  /* the two ANY_SOURCE tag-5 receives got one message from each of ranks 1 and 2 */
  cr_assert_eq(x[0].tag, 5);
  cr_assert_eq(x[1].tag, 5);
  cr_assert_eq(x[0].source + x[1].source, 3);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(x[i].size, 64);
    cr_assert_eq(x[i].proto, PP_P2P_EAGER);
    cr_assert_eq(x[i].checksum, fill_sum(64, x[i].source, 0, 64));
  }
  /* rank 2 sent tag 8 (4 MiB) before tag 7 (1 MiB); rank 0 received tag 7 first */
  cr_assert_eq(x[2].source, 2);
  cr_assert_eq(x[2].tag, 7);
  cr_assert_eq(x[2].size, 1 << 20);
  cr_assert_eq(x[2].proto, PP_P2P_RNDV_GET);
  cr_assert_eq(x[2].checksum, fill_sum(1 << 20, 2, 2, 1 << 20), "rank 2's third message");
  cr_assert_eq(x[3].tag, 8);
  cr_assert_eq(x[3].size, 4 << 20);
  cr_assert_eq(x[3].proto, PP_P2P_RNDV_PUT);
  cr_assert_eq(x[3].checksum, fill_sum(4 << 20, 2, 1, 4 << 20));
  /* rank 1's 100-byte ssend into a 10-byte buffer */
  cr_assert_eq(x[4].source, 1);
  cr_assert_eq(x[4].tag, 9);
  cr_assert_eq(x[4].error, PP_P2P_E_TRUNCATED);
  cr_assert_eq(x[4].size, 10);
  cr_assert_eq(x[4].msg_len, 100);
  cr_assert_eq(x[4].checksum, fill_sum(100, 1, 1, 10));
  cr_assert_eq(r0->stats.messages_received, 4, "the truncated one is not counted as delivered");
  cr_assert_eq(r0->stats.corrupt, 0);
  cr_assert_eq(res.ranks[1].nreceives, 1);
  for (uint32_t i = 0; i < 3; i++) {
    cr_assert(res.ranks[i].stats.done);
    cr_assert_eq(res.ranks[i].nic.rnr_naks_received, 0);
  }
  cr_assert_eq(r0->p2p.truncated, 1);
  cr_assert_gt(res.sim_time_ns, 10000, "rank 0 computed 10 us");
}

Test(script, json_report_lists_the_receives)
{
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "'%s' run '%s/scenarios/p2p-script.yaml' --json", PREPOST_CLI,
           PREPOST_MODELS_DIR);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  cr_assert_eq(pclose(f), 0, "exit code");
  const char *rec = strstr(buf, "\"receives\": [{\"rank\": 0, ");
  cr_assert_not_null(rec, "%s", buf);
  cr_assert_not_null(strstr(rec, "\"source\": 2, \"tag\": 8, \"comm\": 0, \"size\": 4194304"));
  cr_assert_not_null(strstr(rec, "\"status\": \"truncated\", \"protocol\": \"eager\""));
  cr_assert_not_null(strstr(rec, "\"protocol\": \"rndv-get\", \"checksum\": \""));
  cr_assert_not_null(strstr(buf, "\"p2p\": [{\"rank\": 0, \"sent\": {\"eager\": 1"));
}

/* ================================================================ semantics in scripts */

Test(script, a_deadlocked_program_stalls)
{
  sim_parse("ranks: 2\nprotocol: eager\nworkload: {kind: script}\nscript:\n"
            "  - {ranks: 0, ops: [{recv: {source: any, tag: 1, size: 8}}, "
            "{send: {dest: 1, tag: 1, size: 8}}]}\n"
            "  - {ranks: 1, ops: [{recv: {source: any, tag: 1, size: 8}}, "
            "{send: {dest: 0, tag: 1, size: 8}}]}\n");
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_STALLED, "both ranks wait for a message first");
  cr_assert_not(res.ranks[0].stats.done);
}

Test(script, ssend_waits_for_the_receive_send_does_not)
{
  sim_parse("ranks: 2\nprotocol: eager\nworkload: {kind: script}\nscript:\n"
            "  - ranks: 0\n    ops:\n"
            "      - ssend: {dest: 1, tag: 1, size: 64}\n"
            "      - send: {dest: 1, tag: 2, size: 64}\n"
            "  - ranks: 1\n    ops:\n"
            "      - compute: 50us\n"
            "      - recv: {source: 0, tag: 1, size: 64}\n"
            "      - compute: 50us\n"
            "      - recv: {source: 0, tag: 2, size: 64}\n");
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  const struct pp_rank_stats *s = &res.ranks[0].stats;
  cr_assert_eq(s->messages_sent, 2);
  cr_assert_geq(s->latency.max, 50000, "the ssend took at least the receiver's 50 us");
  cr_assert_lt(s->latency.p50, 10000, "the standard send completed at once (eager, buffered)");
  cr_assert_eq(res.ranks[1].stats.messages_received, 2);
}

Test(script, probe_then_receive_cancel_and_wait)
{
  sim_parse("ranks: 2\nprotocol: eager\nworkload: {kind: script}\nscript:\n"
            "  - ranks: 0\n    ops:\n"
            "      - compute: 20us\n"
            "      - send: {dest: 1, tag: 3, size: 200}\n"
            "      - isend: {dest: 1, tag: 4, size: 300000, count: 2}\n"
            "      - wait\n"
            "  - ranks: 1\n    ops:\n"
            "      - irecv: {source: 0, tag: 99, size: 8}\n"
            "      - cancel\n"
            "      - probe: {source: any, tag: 3}\n"
            "      - recv: {source: any, tag: any, size: 200}\n"
            "      - irecv: {source: 0, tag: 4, size: 300000, count: 2, comm: 0}\n"
            "      - wait\n"
            "      - waitall\n");
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "outcome %s", pp_outcome_name(res.outcome));
  const struct pp_rank_result *r1 = &res.ranks[1];
  cr_assert_eq(r1->nreceives, 4);
  cr_assert_eq(r1->receives[0].error, PP_P2P_E_CANCELLED);
  cr_assert_eq(r1->receives[0].tag, 99);
  cr_assert_eq(r1->receives[1].tag, 3);
  cr_assert_eq(r1->receives[1].size, 200);
  cr_assert_eq(r1->receives[2].proto, PP_P2P_RNDV_GET);
  cr_assert_eq(r1->stats.messages_received, 3);
  cr_assert_eq(r1->p2p.cancelled, 1);
}

Test(script, repeated_ping_pong_on_several_communicators)
{
  sim_parse("ranks: 2\nprotocol: eager\nworkload: {kind: script}\nscript:\n"
            "  - ranks: [0]\n    repeat: 100\n    ops:\n"
            "      - send: {dest: 1, tag: 0, size: 8B, comm: 1}\n"
            "      - recv: {source: 1, tag: 0, size: 8B, comm: 2}\n"
            "  - ranks: [1]\n    repeat: 100\n    ops:\n"
            "      - recv: {source: 0, tag: 0, size: 8B, comm: 1}\n"
            "      - send: {dest: 0, tag: 0, size: 8B, comm: 2}\n");
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(res.ranks[0].stats.messages_sent, 100);
  cr_assert_eq(res.ranks[1].stats.messages_received, 100);
  cr_assert_eq(res.ranks[0].nreceives, 100);
  cr_assert_eq(res.ranks[0].receives[99].ctx, 2);
  /* a round trip of two 8-byte messages on 1 us links: a few microseconds */
  double rtt = res.sim_time_ns / 100.0;
  cr_assert(rtt > 2000 && rtt < 10000, "round trip %.0f ns", rtt);
}

Test(script, a_scenario_cannot_name_the_app_workload)
{
  cr_assert(strstr(parse_error("ranks: 3\nprotocol: rndv\nworkload: {kind: app}\n", PP_INVALID),
                   "e.yaml:3: workload 'app' is a program's callbacks"));
}

/* ================================================================ scenario errors */

#define HEAD "ranks: 3\nprotocol: eager\nworkload: {kind: script}\n"

Test(script, parse_errors_name_the_line)
{
  static const struct {
    const char *text;
    enum pp_status st;
    const char *want; /* in the message */
  } t[] = {
      {HEAD "script:\n  - {ranks: 0, ops: [jump]}\n", PP_PARSE,
       "e.yaml:5: unknown operation 'jump' (expected one of: isend, issend,"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: {tag: 1}}]}\n", PP_PARSE,
       "'send' needs 'dest'"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: {dest: 1}}]}\n", PP_PARSE,
       "'send' needs 'tag'"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: {dest: any, tag: 1}}]}\n", PP_PARSE,
       "'dest' must be an integer"},
      {HEAD "script:\n  - {ranks: 0, ops: [{recv: {source: 5}}]}\n", PP_INVALID,
       "'source' must be a rank 0..2 or 'any'"},
      {HEAD "script:\n  - {ranks: 0, ops: [{recv: {source: 1, tag: x}}]}\n", PP_PARSE,
       "'tag' must be an integer 0..4294967294 or 'any'"},
      {HEAD "script:\n  - {ranks: 0, ops: [{recv: {source: 1, colour: 2}}]}\n", PP_PARSE,
       "unknown key 'colour' in 'recv'"},
      {HEAD "script:\n  - {ranks: 0, ops: [compute]}\n", PP_PARSE,
       "'compute' needs a duration"},
      {HEAD "script:\n  - {ranks: 0, ops: [{waitall: 3}]}\n", PP_PARSE,
       "'waitall' takes no arguments"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: 1}]}\n", PP_PARSE,
       "'send' needs a mapping of arguments"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: {dest: 1, tag: 1}, x: 1}]}\n", PP_PARSE,
       "an operation is one name"},
      {HEAD "script:\n  - {ops: [waitall]}\n", PP_PARSE,
       "a program needs 'ranks'"},
      {HEAD "script:\n  - {ranks: 0}\n", PP_PARSE,
       "needs 'ops'"},
      {HEAD "script:\n  - {ranks: [0, 7], ops: []}\n", PP_INVALID,
       "'ranks' must be an integer 0..2"},
      {HEAD "script:\n  - {ranks: {a: 1}, ops: []}\n", PP_PARSE,
       "'ranks' must be a rank, a list of ranks or 'all'"},
      {HEAD "script:\n  - {ranks: 0, repeat: 0, ops: []}\n", PP_INVALID,
       "'repeat' must be an integer 1.."},
      {HEAD "script:\n  - {ranks: 0, ops: [], when: now}\n", PP_PARSE,
       "unknown key 'when' in a program"},
      {HEAD "script:\n  - waitall\n", PP_PARSE,
       "a program must be a mapping"},
      {HEAD "script: {ranks: 0}\n", PP_PARSE,
       "'script' must be a list"},
      {HEAD, PP_PARSE,
       "workload 'script' needs a 'script' section"},
      {"ranks: 2\nprotocol: eager\nscript:\n  - {ranks: 0, ops: []}\n", PP_INVALID,
       "'script' needs 'workload: {kind: script}'"},
      {HEAD "script:\n  - {ranks: 0, ops: [{send: {dest: 0, tag: 1}}]}\n", PP_INVALID,
       "rank 0 would talk to itself"},
      {"ranks: 2\nprotocol: naive\nworkload: {kind: script}\nscript:\n  - {ranks: 0, ops: []}\n",
       PP_INVALID,
       "workload 'script' needs protocol eager or rndv"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    const char *err = parse_error(t[i].text, t[i].st);
    cr_assert(strstr(err, t[i].want), "'%s': '%s' not in '%s'", t[i].text, t[i].want, err);
  }
}

Test(script, bounds_of_a_script)
{
  char *text = malloc(1 << 16);
  int o = snprintf(text, 1 << 16, HEAD "script:\n  - ranks: 0\n    ops:\n");
  for (int i = 0; i < 257; i++)
    o += snprintf(text + o, (size_t)((1 << 16) - o), "      - waitall\n");
  cr_assert(strstr(parse_error(text, PP_INVALID), "more than 256 operations"));
  o = snprintf(text, 1 << 16, HEAD "script:\n");
  for (int i = 0; i < 33; i++)
    o += snprintf(text + o, (size_t)((1 << 16) - o), "  - {ranks: 0, ops: []}\n");
  cr_assert(strstr(parse_error(text, PP_INVALID), "more than 32 programs"));
  cr_assert(strstr(parse_error(HEAD "script:\n  - {ranks: 0, ops: [{irecv: {source: 1, size: "
                                    "1GiB, count: 5}}]}\n",
                               PP_INVALID),
                   "needs 5368709120 bytes of buffers"));
  free(text);
  /* the checks behind the parser */
  sim_parse(HEAD "script:\n  - {ranks: 0, ops: [waitall]}\n");
  struct pp_engine_cfg c = sc.sim.engine;
  char err[256];
  c.workload.kind = PP_WORKLOAD_SCRIPT;
  c.protocol = PP_PROTO_EAGER;
  c.nranks = 3;
  memset(pp_script_of(&c), 0, sizeof(struct pp_script));
  pp_script_of(&c)->nprogs = 1;
  pp_script_of(&c)->prog[0] = (struct pp_script_prog){.ranks = {1}, .first = 0, .n = 2};
  pp_script_of(&c)->nops = 1;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "operations out of range"), "%s", err);
  pp_script_of(&c)->nops = 2;
  pp_script_of(&c)->op[0] = (struct pp_script_op){.kind = 200};
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "unknown kind"), "%s", err);
  pp_script_of(&c)->op[0] = (struct pp_script_op){.kind = PP_SOP_SEND, .peer = 1, .count = 0};
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "count must be"), "%s", err);
  pp_script_of(&c)->op[0] = (struct pp_script_op){.kind = PP_SOP_SEND, .peer = 1, .count = 1,
                                         .tag = PP_ANY_TAG};
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "a send needs a tag"), "%s", err);
  pp_script_of(&c)->prog[0].ranks[1] = 1; /* rank 64 of 3 */
  pp_script_of(&c)->op[0].tag = 1;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "names rank 64"), "%s", err);
  cr_assert_str_eq(pp_script_op_name(PP_SOP_PROBE), "probe");
  cr_assert_str_eq(pp_script_op_name(PP_SOP_COUNT), "?");
  cr_assert_eq(pp_script_op_from_name("nothing"), -1);
}

Test(script, p2p_section_keys)
{
  sim_parse("ranks: 2\nprotocol: eager\np2p:\n  eager_limit: 4KiB\n  rget_limit: 0\n"
            "  frag_size: 128KiB\n  pipeline: 2\n  channels: 3\n  credits: 16\n"
            "  credit_threshold: 5\n  reply_slots: 6\n  send_buffers: 10\n  max_requests: 100\n"
            "  rcache_entries: 7\n  rcache_bytes: 64MiB\n  record: 0\n");
  const struct pp_p2p_params *p = pp_p2p_params_of(&sc.sim.engine);
  cr_assert_eq(p->eager_limit, 4096);
  cr_assert_eq(p->rget_limit, 0);
  cr_assert_eq(p->frag_size, 128 << 10);
  cr_assert_eq(p->pipeline, 2);
  cr_assert_eq(p->channels, 3);
  cr_assert_eq(p->credits, 16);
  cr_assert_eq(p->credit_threshold, 5);
  cr_assert_eq(p->reply_slots, 6);
  cr_assert_eq(p->send_buffers, 10);
  cr_assert_eq(p->max_requests, 100);
  cr_assert_eq(p->rcache_entries, 7);
  cr_assert_eq(p->rcache_bytes, 64 << 20);
  cr_assert_eq(p->record, 0);
  sim_parse("ranks: 2\nprotocol: eager\n");
  cr_assert_eq(pp_p2p_params_of(&sc.sim.engine)->eager_limit, 12288, "default eager limit 12 KiB");
  cr_assert_eq(pp_p2p_params_of(&sc.sim.engine)->record, 4096);
  cr_assert(strstr(parse_error("ranks: 2\np2p: {pipeline: 9}\n", PP_INVALID),
                   "'pipeline' must be an integer 1..8"));
  cr_assert(strstr(parse_error("ranks: 2\np2p: {speed: 9}\n", PP_PARSE),
                   "unknown key 'speed' in 'p2p'"));
  cr_assert(strstr(parse_error("ranks: 2\nprotocol: eager\np2p: {credits: 4, credit_threshold: 5}\n",
                               PP_INVALID),
                   "credit_threshold must be 1..credits (4), got 5"));
}
