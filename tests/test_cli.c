/* tools/prepost: the command line, run as a child process (PREPOST_CLI): usage, exit codes, the
 * JSON report (checked with a tiny JSON reader below, no python). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prepost/proto.h" /* PP_PROTO_ABI */
#include "scratch.h"

#define SCENARIOS PREPOST_MODELS_DIR "/scenarios/"

/* ================================================================ running the CLI */

static char tmpdir[64];
static char *out, *err; /* stdout and stderr of the last run */

static void setup(void)
{
  scratch_make(tmpdir, sizeof(tmpdir), "cli");
}

static void teardown(void)
{
  free(out);
  free(err);
  out = err = NULL;
  scratch_remove(tmpdir);
}

TestSuite(cli, .init = setup, .fini = teardown);

/* Runs `prepost ARGS` (ARGS is shell text); returns the exit code, output in out/err. */
static int cli(const char *args)
{
  free(out);
  free(err);
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "'%s' %s > '%s/out' 2> '%s/err' < /dev/null", PREPOST_CLI, args,
           tmpdir, tmpdir);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "prepost %s: did not exit normally (status %#x)", args, st);
  char path[128];
  snprintf(path, sizeof(path), "%s/out", tmpdir);
  out = scratch_slurp(path, NULL);
  snprintf(path, sizeof(path), "%s/err", tmpdir);
  err = scratch_slurp(path, NULL);
  return WEXITSTATUS(st);
}

static void write_file(const char *name, const char *text)
{
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  scratch_write(path, text);
}

#define assert_has(hay, needle)                                                \
  cr_assert_not_null(strstr((hay), (needle)), "'%s' not in:\n%s", (needle), (hay))

static void assert_usage_error(int rc, const char *message)
{
  cr_assert_eq(rc, 2, "exit %d, want 2; stderr:\n%s", rc, err);
  assert_has(err, "prepost: ");
  assert_has(err, message);
  assert_has(err, "usage: prepost");
  cr_assert_eq(out[0], '\0', "usage errors print nothing on stdout:\n%s", out);
}

/* ================================================================ usage */

Test(cli, help)
{
  cr_assert_eq(cli("--help"), 0);
  assert_has(out, "usage: prepost");
  assert_has(out, "run SCENARIO");
  assert_has(out, "Exit codes");
  cr_assert_eq(err[0], '\0', "stderr: %s", err);
  cr_assert_eq(cli("-h"), 0);
  assert_has(out, "usage: prepost");
}

Test(cli, run_help)
{
  cr_assert_eq(cli("run --help"), 0);
  assert_has(out, "usage: prepost run SCENARIO");
  assert_has(out, "--seed N");
  assert_has(out, "--log FILE");
  assert_has(out, "--json");
  cr_assert_eq(err[0], '\0');
  cr_assert_eq(cli("run -h"), 0);
  assert_has(out, "usage: prepost run");
  cr_assert_eq(cli("help run"), 0);
  assert_has(out, "usage: prepost run");
}

Test(cli, version)
{
  cr_assert_eq(cli("--version"), 0);
  cr_assert_eq(strncmp(out, "prepost ", 8), 0, "%s", out);
  cr_assert(isdigit((unsigned char)out[8]), "%s", out);
  /* the build tree's program uses the source tree's models (an installed one its prefix's) */
  if (!getenv("PREPOST_MODELS"))
    assert_has(out, "\nmodels: " PREPOST_MODELS_DIR "\n");
}

Test(cli, no_arguments)
{
  assert_usage_error(cli(""), "missing COMMAND");
}

Test(cli, unknown_command)
{
  assert_usage_error(cli("frobnicate"), "unknown command 'frobnicate'");
}

Test(cli, unknown_option)
{
  assert_usage_error(cli("run '" SCENARIOS "fast-consumer.yaml' --frob"), "unknown option '--frob'");
  assert_has(err, "usage: prepost run");
}

Test(cli, missing_scenario_argument)
{
  assert_usage_error(cli("run"), "missing SCENARIO");
  assert_usage_error(cli("run --json"), "missing SCENARIO");
}

Test(cli, two_scenarios)
{
  assert_usage_error(cli("run a.yaml b.yaml"), "one scenario at a time");
}

Test(cli, missing_scenario_file)
{
  int rc = cli("run /nonexistent/nothing-here.yaml");
  cr_assert_eq(rc, 2, "stderr: %s", err);
  assert_has(err, "prepost: ");
  assert_has(err, "nothing-here.yaml");
  cr_assert_eq(out[0], '\0');
}

Test(cli, bad_seed)
{
  static const char *const bad[] = {"abc", "-1", "12x", "''", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char args[512];
    snprintf(args, sizeof(args), "run '" SCENARIOS "fast-consumer.yaml' --seed %s", bad[i]);
    assert_usage_error(cli(args), "--seed");
  }
  assert_usage_error(cli("run '" SCENARIOS "fast-consumer.yaml' --seed"),
                     "option '--seed' needs a value");
}

Test(cli, bad_scenario_content)
{
  write_file("bad.yaml", "name: bad\nranks: 2\nqp:\n  rnr_retry: 9\n");
  char args[256];
  snprintf(args, sizeof(args), "run '%s/bad.yaml'", tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 2, "stderr: %s", err);
  assert_has(err, "bad.yaml");
  assert_has(err, "rnr_retry");
  cr_assert_eq(out[0], '\0');
}

Test(cli, unwritable_log)
{
  int rc = cli("run '" SCENARIOS "fast-consumer.yaml' --log /nonexistent/dir/x.log");
  cr_assert_eq(rc, 2);
  assert_has(err, "/nonexistent/dir/x.log");
}

Test(cli, too_few_hosts)
{
  char text[512];
  snprintf(text, sizeof(text),
           "name: few\nranks: 4\nplatform: %s/platforms/roce-100g-2host.xml\n"
           "workload:\n  messages: 1\n  size: 64\n",
           PREPOST_MODELS_DIR);
  write_file("few.yaml", text);
  char args[256];
  snprintf(args, sizeof(args), "run '%s/few.yaml'", tmpdir);
  cr_assert_eq(cli(args), 2, "stderr: %s", err);
  assert_has(err, "platform has 2 hosts, the scenario needs 4");
}

/* ================================================================ exit codes of runs */

Test(cli, retry0_exits_1)
{
  int rc = cli("run '" SCENARIOS "rnr-slow-consumer-retry0.yaml'");
  cr_assert_eq(rc, 1, "exit %d; stderr:\n%s", rc, err);
  assert_has(out, "outcome  errors");
  assert_has(out, "RNR_RETRY_EXC_ERR=1");
  assert_has(out, "WR_FLUSH_ERR=");
}

Test(cli, completed_run_exits_0_with_a_table)
{
  int rc = cli("run '" SCENARIOS "rnr-slow-consumer.yaml'");
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  assert_has(out, "scenario rnr-slow-consumer");
  assert_has(out, "outcome  completed");
  assert_has(out, "SUCCESS=400");
  /* not "empty": under ASan, SimGrid's context switches print a warning there */
  cr_assert_null(strstr(err, "prepost:"), "stderr: %s", err);
}

Test(cli, timeout_exits_3)
{
  char text[1024];
  snprintf(text, sizeof(text),
           "name: short\nranks: 2\nplatform: platforms/roce-100g-2host.xml\n"
           "workload:\n  pattern: pair\n  messages: 200\n  size: 4KiB\n  interval: 2us\n"
           "  consume: 100us\nqp:\n  rq_depth: 8\n  sq_depth: 256\nlimits:\n  max_sim_time: 100us\n");
  write_file("short.yaml", text);
  char args[256];
  snprintf(args, sizeof(args), "run '%s/short.yaml' --models '%s'", tmpdir, PREPOST_MODELS_DIR);
  int rc = cli(args);
  cr_assert_eq(rc, 3, "exit %d; stdout:\n%s\nstderr:\n%s", rc, out, err);
  assert_has(out, "outcome  timeout");
  assert_has(out, "hang: 2 of 2 ranks are not done (the time limit at 100000 ns)");
}

Test(cli, log_to_a_file)
{
  char args[512];
  snprintf(args, sizeof(args), "run '" SCENARIOS "fast-consumer.yaml' --log '%s/run.log'", tmpdir);
  cr_assert_eq(cli(args), 0);
  char path[128];
  snprintf(path, sizeof(path), "%s/run.log", tmpdir);
  char *log = scratch_slurp(path, NULL);
  assert_has(log, "RESET -> INIT");
  assert_has(log, "RTR -> RTS");
  assert_has(log, "SEND SUCCESS");
  assert_has(log, "RECV SUCCESS");
  free(log);
}

/* ================================================================ a tiny JSON reader */

static const char *ws(const char *p)
{
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
    p++;
  return p;
}

/* Returns the end of the JSON value at p, or NULL when it is malformed. */
static const char *skip_value(const char *p, int depth)
{
  p = ws(p);
  if (depth > 32)
    return NULL;
  if (*p == '"') {
    for (p++; *p != '"'; p++) {
      if (!*p || (unsigned char)*p < 0x20)
        return NULL;
      if (*p == '\\' && !*++p)
        return NULL;
    }
    return p + 1;
  }
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    bool obj = *p == '{';
    p = ws(p + 1);
    if (*p == close)
      return p + 1;
    for (;;) {
      if (obj) {
        if (*p != '"' || !(p = skip_value(p, depth + 1)))
          return NULL;
        p = ws(p);
        if (*p++ != ':')
          return NULL;
      }
      if (!(p = skip_value(p, depth + 1)))
        return NULL;
      p = ws(p);
      if (*p == close)
        return p + 1;
      if (*p++ != ',')
        return NULL;
      p = ws(p);
    }
  }
  if (*p == '-' || isdigit((unsigned char)*p)) {
    char *end;
    strtod(p, &end);
    return end > p ? end : NULL;
  }
  for (const char *const *lit = (const char *const[]){"true", "false", "null", NULL}; *lit; lit++)
    if (strncmp(p, *lit, strlen(*lit)) == 0)
      return p + strlen(*lit);
  return NULL;
}

/* The value of member `key` of the object at p (not recursive), or NULL. */
static const char *member(const char *p, const char *key)
{
  p = ws(p);
  if (*p != '{')
    return NULL;
  p = ws(p + 1);
  size_t klen = strlen(key);
  while (*p == '"') {
    const char *k = p + 1;
    const char *kend = skip_value(p, 0);
    if (!kend)
      return NULL;
    p = ws(kend);
    if (*p++ != ':')
      return NULL;
    p = ws(p);
    if ((size_t)(kend - 1 - k) == klen && strncmp(k, key, klen) == 0)
      return p;
    if (!(p = skip_value(p, 0)))
      return NULL;
    p = ws(p);
    if (*p == ',')
      p = ws(p + 1);
  }
  return NULL;
}

/* Follows a dotted path ("latency_ns.p50") from the object at p. */
static const char *path_of(const char *p, const char *path)
{
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *tok = strtok(buf, "."); tok && p; tok = strtok(NULL, "."))
    p = member(p, tok);
  return p;
}

static unsigned long long num(const char *obj, const char *path)
{
  const char *v = path_of(obj, path);
  cr_assert_not_null(v, "no key '%s' in %s", path, obj);
  cr_assert(isdigit((unsigned char)*v), "'%s' is not a non-negative number: %.20s", path, v);
  return strtoull(v, NULL, 10);
}

static bool str_is(const char *obj, const char *path, const char *want)
{
  const char *v = path_of(obj, path);
  cr_assert_not_null(v, "no key '%s'", path);
  size_t n = strlen(want);
  return v[0] == '"' && strncmp(v + 1, want, n) == 0 && v[n + 1] == '"';
}

/* The i-th element of the array at p, or NULL past its end. */
static const char *element(const char *p, unsigned i)
{
  p = ws(p);
  if (*p != '[')
    return NULL;
  p = ws(p + 1);
  if (*p == ']')
    return NULL;
  for (unsigned k = 0;; k++) {
    if (k == i)
      return p;
    if (!(p = skip_value(p, 0)))
      return NULL;
    p = ws(p);
    if (*p != ',')
      return NULL;
    p = ws(p + 1);
  }
}

Test(cli, tiny_json_reader_works)
{
  const char *doc = "{\"a\": 1, \"b\": {\"c\": [1, {\"d\": \"x\\\"y\"}], \"e\": 22}, \"f\": true}";
  const char *end = skip_value(doc, 0);
  cr_assert_not_null(end);
  cr_assert_eq(*ws(end), '\0');
  cr_assert_eq(num(doc, "a"), 1);
  cr_assert_eq(num(doc, "b.e"), 22);
  cr_assert_null(path_of(doc, "b.x"));
  cr_assert_null(path_of(doc, "c"), "members are looked up at one level only");
  cr_assert_not_null(element(path_of(doc, "b.c"), 1));
  cr_assert_null(element(path_of(doc, "b.c"), 2));
  cr_assert_null(skip_value("{\"a\": 1,}", 0));
  cr_assert_null(skip_value("{\"a\" 1}", 0));
  cr_assert_null(skip_value("[1 2]", 0));
}

static const char *const count_keys[] = {"messages", "bytes", "rnr_naks", "retries",
                                         "latency_ns.p50", "latency_ns.p99", "latency_ns.max"};

Test(cli, json_report_has_every_key)
{
  int rc = cli("run '" SCENARIOS "rnr-slow-consumer.yaml' --json");
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  const char *end = skip_value(out, 0);
  cr_assert_not_null(end, "stdout is not one JSON value:\n%s", out);
  cr_assert_eq(*ws(end), '\0', "trailing text after the JSON object: %s", end);
  cr_assert_eq(*ws(out), '{');

  cr_assert(str_is(out, "scenario", "rnr-slow-consumer"));
  cr_assert(str_is(out, "backend", "simgrid"));
  cr_assert(str_is(out, "protocol", "naive"));
  cr_assert(str_is(out, "outcome", "completed"));
  cr_assert_eq(num(out, "seed"), 1);
  cr_assert_gt(num(out, "sim_time_ns"), 0);
  for (size_t k = 0; k < sizeof(count_keys) / sizeof(count_keys[0]); k++)
    num(out, count_keys[k]);
  cr_assert_eq(num(out, "messages"), 200);
  cr_assert_eq(num(out, "bytes"), 200 * 4096);
  cr_assert_gt(num(out, "rnr_naks"), 0);
  cr_assert_geq(num(out, "retries"), num(out, "rnr_naks"), "each RNR NAK is retried (rnr_retry 7)");
  cr_assert_eq(num(out, "status_counts.SUCCESS"), 400);
  cr_assert_null(path_of(out, "status_counts.WR_FLUSH_ERR"), "only non-zero counts are listed");
  unsigned long long p50 = num(out, "latency_ns.p50"), p99 = num(out, "latency_ns.p99"),
                     max = num(out, "latency_ns.max");
  cr_assert(p50 > 0 && p50 <= p99 && p99 <= max, "p50 %llu p99 %llu max %llu", p50, p99, max);

  const char *ranks = path_of(out, "ranks");
  cr_assert_not_null(ranks);
  cr_assert_eq(*ranks, '[');
  cr_assert_null(element(ranks, 2), "two ranks");
  unsigned long long sum_messages = 0, sum_bytes = 0, sum_naks = 0, sum_success = 0;
  for (unsigned i = 0; i < 2; i++) {
    const char *r = element(ranks, i);
    cr_assert_not_null(r, "rank %u", i);
    cr_assert_eq(num(r, "rank"), i);
    char host[16];
    snprintf(host, sizeof(host), "host%u", i);
    cr_assert(str_is(r, "host", host), "rank %u host", i);
    const char *done = path_of(r, "done");
    cr_assert(done && strncmp(done, "true", 4) == 0, "rank %u not done", i);
    num(r, "messages_sent");
    cr_assert_eq(num(r, "corrupt"), 0);
    for (size_t k = 0; k < sizeof(count_keys) / sizeof(count_keys[0]); k++)
      num(r, count_keys[k]);
    cr_assert_not_null(path_of(r, "status_counts"));
    num(r, "rnr_naks_sent");
    num(r, "timeout_retries");
    num(r, "packets_dropped");
    sum_messages += num(r, "messages");
    sum_bytes += num(r, "bytes");
    sum_naks += num(r, "rnr_naks");
    sum_success += num(r, "status_counts.SUCCESS");
  }
  cr_assert_eq(sum_messages, num(out, "messages"), "totals are the sum of the ranks");
  cr_assert_eq(sum_bytes, num(out, "bytes"));
  cr_assert_eq(sum_naks, num(out, "rnr_naks"));
  cr_assert_eq(sum_success, 400);
  const char *r0 = element(ranks, 0), *r1 = element(ranks, 1);
  cr_assert_eq(num(r0, "messages_sent"), 200);
  cr_assert_eq(num(r1, "messages"), 200);
  cr_assert_eq(num(r1, "rnr_naks_sent"), num(r0, "rnr_naks"), "NAKs sent by 1 = received by 0");
  cr_assert_eq(num(r0, "latency_ns.max"), max, "the sender's latency is the run's");
}

Test(cli, json_report_of_a_failed_run)
{
  int rc = cli("run '" SCENARIOS "rnr-slow-consumer-retry0.yaml' --json --seed 7");
  cr_assert_eq(rc, 1, "exit %d; stderr:\n%s", rc, err);
  cr_assert_not_null(skip_value(out, 0), "not JSON:\n%s", out);
  cr_assert(str_is(out, "outcome", "errors"));
  cr_assert_eq(num(out, "seed"), 7, "--seed overrides the scenario's seed");
  cr_assert_eq(num(out, "status_counts.RNR_RETRY_EXC_ERR"), 1);
  cr_assert_geq(num(out, "status_counts.WR_FLUSH_ERR"), 1);
}

/* ================================================================ hangs (prepost/hang.h) */

/* A naive sender whose receiver posts its buffers only after 5 ms: with rnr_retry 7 the SENDs
 * are retried for ever (RNR NAKs), nothing is delivered, nothing quiesces. */
static void write_rnr_forever(const char *limits)
{
  char text[1024];
  snprintf(text, sizeof(text),
           "name: rnr-forever\nranks: 2\nprotocol: naive\nworkload:\n  pattern: pair\n"
           "  messages: 4\n  size: 1KiB\n  post_delay: 5ms\nqp:\n  min_rnr_timer: 1\n"
           "  rnr_retry: 7\nlimits:\n  max_sim_time: 1s\n%s",
           limits);
  write_file("forever.yaml", text);
}

static int run_forever(const char *opts)
{
  char args[512];
  snprintf(args, sizeof(args), "run '%s/forever.yaml' %s", tmpdir, opts);
  return cli(args);
}

Test(cli, run_help_documents_no_progress)
{
  cr_assert_eq(cli("run --help"), 0);
  assert_has(out, "--no-progress T");
  assert_has(out, "Progress: a send or receive finished");
  assert_has(out, "3 stalled, timeout\nor no progress");
}

Test(cli, bad_no_progress)
{
  assert_usage_error(cli("run '" SCENARIOS "fast-consumer.yaml' --no-progress soon"),
                     "--no-progress must be a duration such as 500ns, 2us, 1.5ms, 10s, 5min or "
                     "1h, got 'soon'");
  assert_usage_error(cli("run '" SCENARIOS "fast-consumer.yaml' --no-progress"),
                     "option '--no-progress' needs a value");
  /* a bare number meant ns here and seconds elsewhere: on the command line it needs its unit */
  assert_usage_error(cli("run '" SCENARIOS "fast-consumer.yaml' --no-progress 5"),
                     "--no-progress needs a unit: a duration such as 500ns");
}

/* ================================================================ options (getopt_long) */

Test(cli, options_take_their_value_with_or_without_an_equals_sign)
{
  cr_assert_eq(cli("run '" SCENARIOS "fast-consumer.yaml' --seed=7 --json"), 0, "%s", err);
  assert_has(out, "\"seed\": 7");
  char *first = strdup(out);
  cr_assert_eq(cli("run --json --seed 7 '" SCENARIOS "fast-consumer.yaml'"), 0, "%s", err);
  cr_assert_str_eq(out, first, "--seed=7 and --seed 7, before or after the scenario: the same run");
  free(first);
  cr_assert_eq(cli("run '" SCENARIOS "fast-consumer.yaml' --no-progress=2ms --backend=simgrid"),
               0, "%s", err);
}

Test(cli, one_message_for_each_kind_of_option_error)
{
  const char *const S = "run '" SCENARIOS "fast-consumer.yaml' ";
  const struct {
    const char *args, *message;
  } cases[] = {
      {"--frob", "prepost: unknown option '--frob'\n"},
      {"--frob=1", "prepost: unknown option '--frob'\n"},
      {"-x", "prepost: unknown option '-x'\n"},
      {"--seed", "prepost: option '--seed' needs a value\n"},
      {"--json=yes", "prepost: option '--json' takes no value\n"},
      {"--s 3", "prepost: ambiguous option '--s' (--seed, --set)\n"},
      {"--seed 12x", "prepost: --seed must be an integer 0..18446744073709551615, got '12x'\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[512];
    snprintf(args, sizeof args, "%s%s", S, cases[i].args);
    assert_usage_error(cli(args), cases[i].message);
    cr_assert(!strncmp(err, cases[i].message, strlen(cases[i].message)), "%s:\n%s",
              cases[i].args, err);
  }
  /* the same messages from the other commands */
  assert_usage_error(cli("trace dump --frob x"), "prepost: unknown option '--frob'");
  assert_usage_error(cli("replay x.trace --until"), "prepost: option '--until' needs a value");
  static const char *const explore[][2] = {
      {"explore --list=1", "prepost explore: option '--list' takes no value"},
      {"explore --timeout 60", "prepost explore: --timeout needs a unit"},
      {"explore --time 3", "prepost explore: --time needs a unit"},
  };
  for (size_t i = 0; i < sizeof explore / sizeof explore[0]; i++) {
    cr_assert_eq(cli(explore[i][0]), 2, "%s", explore[i][0]);
    assert_has(err, explore[i][1]);
    assert_has(err, "usage: prepost explore");
  }
  /* bench's latency rows pause --lat-interval between round trips: a duration with its unit,
   * 0 (the default, back to back) .. 10s */
  cr_assert_eq(cli("bench --lat-interval 5"), 2);
  assert_has(err, "prepost: --lat-interval needs a unit");
  cr_assert_eq(cli("bench --lat-interval 11s"), 2);
  assert_has(err, "usage: prepost bench");
  /* the ring rows' slots: a count the protocol takes, or auto */
  cr_assert_eq(cli("bench --ring-slots 0"), 2);
  assert_has(err, "usage: prepost bench");
  cr_assert_eq(cli("bench --ring-slots 4097"), 2);
  cr_assert_eq(cli("bench --ring-slots many"), 2);
  /* the ring rows' credit batch: the same range, or auto */
  cr_assert_eq(cli("bench --ring-credit-batch 0"), 2);
  assert_has(err, "prepost: --ring-credit-batch must be an integer 1..4096, got '0'");
  cr_assert_eq(cli("bench --ring-credit-batch 4097"), 2);
  cr_assert_eq(cli("bench --ring-credit-batch half"), 2);
  assert_has(err, "usage: prepost bench");
  assert_usage_error(cli("trace export --svg --snaplen 64KiB x"),
                     "--snaplen must be a size 0..65535 bytes, got '64KiB'");
}

Test(cli, help_of_every_command_and_of_help)
{
  static const char *const cmds[] = {"run",   "doctor", "bench",   "calibrate",
                                     "trace", "replay", "explore", "mpirun"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    char args[64], want[64];
    snprintf(args, sizeof args, "help %s", cmds[i]);
    cr_assert_eq(cli(args), 0, "%s", args);
    snprintf(want, sizeof want, "usage: prepost %s", cmds[i]);
    assert_has(out, want);
    assert_has(out, "Exit codes:");
    assert_has(out, "--help");
    char *help = strdup(out);
    snprintf(args, sizeof args, "%s --help", cmds[i]);
    cr_assert_eq(cli(args), 0, "%s", args);
    cr_assert_str_eq(out, help, "`help %s` and `%s --help` print the same", cmds[i], cmds[i]);
    free(help);
  }
  cr_assert_eq(cli("help help"), 0);
  assert_has(out, "usage: prepost help [COMMAND]");
  assert_has(out, "`--seed=7` or `--seed 7`");
  assert_has(out, "An option's duration needs its unit");
  assert_has(out, "Exit codes:");
  assert_usage_error(cli("help frob"), "no help for unknown command 'frob'");
}

/* prepost mpirun reads its options as every command does (getopt_long: `--seed=3`, prefixes,
 * durations with their unit, the same messages), up to PROG: PROG's own arguments are PROG's.
 * /bin/sh as PROG: a rank process that never calls MPI_Init, whose exit status is the job's. */
Test(cli, mpirun_options_as_every_command_up_to_prog)
{
  cr_assert_eq(cli("mpirun -n 1 --seed=3 --poll-ns=50ns /bin/true"), 0, "%s", err);
  cr_assert_eq(cli("mpirun -np 1 --sc=/dev/null --help"), 0, "%s", err); /* --help wins */
  assert_has(out, "usage: prepost mpirun");
  cr_assert_eq(cli("mpirun -np 1 --no-progress 0 /bin/true"), 0, "%s", err);
  /* the program's arguments are not options of mpirun: -n, --seed=x reach the program */
  cr_assert_eq(cli("mpirun -n 1 -- /bin/sh -c 'exit 5' --seed=x"), 5, "%s", err);
  cr_assert_eq(cli("mpirun -n 1 /bin/sh -c 'exit 6' -n --frob"), 6, "%s", err);
  static const char *const bad[][2] = {
      {"mpirun -n 1 --frob /bin/true", "prepost mpirun: unknown option '--frob'"},
      {"mpirun -n 1 --frob", "prepost mpirun: unknown option '--frob'"},
      {"mpirun -n 1 --seed", "prepost mpirun: option '--seed' needs a value"},
      {"mpirun -n 1 --help=1 /bin/true", "prepost mpirun: option '--help' takes no value"},
      {"mpirun -n 0 /bin/true", "prepost mpirun: -n must be an integer 1..256, got '0'"},
      {"mpirun -n 1 --no-progress 5 /bin/true", "prepost mpirun: --no-progress needs a unit"},
      {"mpirun -n 1 --poll-ns 100 /bin/true", "prepost mpirun: --poll-ns needs a unit"},
      {"mpirun -n 1 --poll-ns 0 /bin/true", "prepost mpirun: --poll-ns must be > 0"},
      {"mpirun -n 1 --backend verbs --timeout 10 /bin/true", "--timeout needs a unit"},
      {"mpirun -n 1 --timeout 10s /bin/true", "--device and --timeout are for --backend verbs"},
      {"mpirun -n 1", "prepost mpirun: missing PROG"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(cli(bad[i][0]), 2, "%s: exit; stderr:\n%s", bad[i][0], err);
    assert_has(err, bad[i][1]);
    assert_has(err, "usage: prepost mpirun");
  }
}

Test(cli, calibrate_usage_errors_before_any_device)
{
  assert_usage_error(cli("calibrate --backend verbs"), "missing -o FILE");
  assert_usage_error(cli("calibrate --backend sim -o x.yaml"), "must be verbs");
  assert_usage_error(cli("calibrate -o x.yaml --codes 1,32"), "min_rnr_timer codes 0..31");
  assert_usage_error(cli("calibrate -o x.yaml --sizes 2MiB"), "1 byte..1MiB");
  assert_usage_error(cli("calibrate -o x.yaml --reps 0"), "--reps");
  assert_usage_error(cli("calibrate -o x.yaml extra"), "unexpected argument 'extra'");
}

Test(cli, set_overrides_scenario_keys_as_the_file_would)
{
  /* the same run as a scenario file that says it */
  write_file("base.yaml", "ranks: 2\nprotocol: eager\nworkload: {messages: 20, size: 4096}\n");
  write_file("said.yaml", "ranks: 4\nprotocol: eager\nworkload: {messages: 20, size: 64KiB}\n"
                          "qp: {rnr_retry: 3}\np2p: {eager_limit: 8KiB}\n");
  char args[1024];
  snprintf(args, sizeof args, "run '%s/said.yaml' --json", tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  char *said = strdup(strstr(out, "\"protocol\""));
  snprintf(args, sizeof args,
           "run '%s/base.yaml' --json --set ranks=4 --set workload.size=64KiB "
           "--set=qp.rnr_retry=3 --set p2p.eager_limit=8KiB",
           tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  cr_assert_str_eq(strstr(out, "\"protocol\""), said);
  free(said);
  assert_has(out, "\"messages\": 40"); /* 2 pairs of 20 */
  /* checked as the file's own keys, the message names the assignment */
  snprintf(args, sizeof args, "run '%s/base.yaml' --set qp.rnr_retry=9", tmpdir);
  cr_assert_eq(cli(args), 2);
  assert_has(err, "base.yaml: --set qp.rnr_retry=9: 'rnr_retry' must be an integer 0..7, got '9'");
  snprintf(args, sizeof args, "run '%s/base.yaml' --set qp.frob=1", tmpdir);
  cr_assert_eq(cli(args), 2);
  assert_has(err, "--set qp.frob=1: unknown key 'frob' in 'qp' (expected one of:");
  snprintf(args, sizeof args, "run '%s/base.yaml' --set rnr_retry", tmpdir);
  cr_assert_eq(cli(args), 2);
  assert_has(err, "--set rnr_retry: --set wants KEY=VALUE or SECTION.KEY=VALUE");
  snprintf(args, sizeof args, "run '%s/base.yaml' --set workload.messages=5 "
                              "--set workload.messages=7 --json", tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  assert_has(out, "\"messages\": 7,"); /* the later one wins */
}

Test(cli, a_scenario_that_runs_nothing_says_so)
{
  write_file("idle.yaml", "ranks: 2\nprotocol: eager\nworkload: {kind: script}\n"
                          "script:\n  - {ranks: all, ops: [compute: 1us, waitall]}\n");
  char args[512];
  snprintf(args, sizeof args, "run '%s/idle.yaml'", tmpdir);
  cr_assert_eq(cli(args), 2, "%s", out);
  assert_has(err, "the script sends and receives nothing");
  cr_assert_eq(out[0], '\0');
}

Test(cli, no_progress_stops_a_run_that_retries_for_ever)
{
  write_rnr_forever("");
  int rc = run_forever("--no-progress 1ms");
  cr_assert_eq(rc, 3, "exit %d; stdout:\n%s\nstderr:\n%s", rc, out, err);
  assert_has(out, "outcome  no_progress after 1");
  assert_has(out, "hang: 2 of 2 ranks are not done (no progress for 1000000 ns, detected at ");
  assert_has(out, "[send_wc] 4 sends to rank 1 posted, not completed");
  assert_has(out, "[message] waits for a message from rank 0 (0 of 4 received, 0 receives");
  assert_has(out, "[timer] its next timer (workload) fires at 5000000 ns");
  assert_has(out, "cycle: 0 -> 1 -> 0: a rank of it has a timer pending");
  assert_has(out, "cause: cycle through rank 1, but its next timer (workload) fires at 5000000 ns");
  /* detected within bound + bound/8 of the last progress (the start): before 1.2 ms */
  const char *at = strstr(out, "detected at ");
  cr_assert_lt(strtoull(at + strlen("detected at "), NULL, 10), 1200000ull);
}

Test(cli, no_progress_from_the_scenario_and_off)
{
  write_rnr_forever("  no_progress: 2ms\n");
  int rc = run_forever("");
  cr_assert_eq(rc, 3, "exit %d; stdout:\n%s", rc, out);
  assert_has(out, "(no progress for 2000000 ns");
  /* the option overrides the scenario; 0 turns the bound off: the receiver posts at 5 ms and
   * the retried SENDs complete */
  rc = run_forever("--no-progress 0");
  cr_assert_eq(rc, 0, "exit %d; stdout:\n%s", rc, out);
  assert_has(out, "outcome  completed");
  cr_assert_null(strstr(out, "hang:"), "%s", out);
}

Test(cli, json_hang_object)
{
  write_rnr_forever("");
  int rc = run_forever("--no-progress 1ms --json");
  cr_assert_eq(rc, 3, "exit %d; stderr:\n%s", rc, err);
  cr_assert_not_null(skip_value(out, 0), "not JSON:\n%s", out);
  cr_assert(str_is(out, "outcome", "no_progress"));
  cr_assert_eq(num(out, "hang.stuck_ranks"), 2);
  cr_assert(str_is(out, "hang.trigger", "no_progress"));
  cr_assert_eq(num(out, "hang.no_progress_ns"), 1000000);
  const char *r0 = element(path_of(out, "hang.ranks"), 0);
  cr_assert_not_null(r0);
  cr_assert_eq(num(r0, "rank"), 0);
  cr_assert(str_is(r0, "state", "stuck"));
  const char *w0 = element(member(r0, "waits"), 0);
  cr_assert(str_is(w0, "kind", "send_wc"));
  cr_assert_eq(num(w0, "peer"), 1);
  cr_assert_eq(strncmp(member(w0, "tag"), "null", 4), 0, "no tag: null");
  cr_assert_eq(num(element(member(r0, "waits_for"), 0), "rank"), 1);
  cr_assert_eq(num(element(path_of(out, "hang.edges"), 1), "from"), 1);
  const char *cyc = path_of(out, "hang.cycle");
  cr_assert_eq(strtoull(element(cyc, 0), NULL, 10), 0);
  cr_assert_eq(strtoull(element(cyc, 1), NULL, 10), 1);
  cr_assert_null(element(cyc, 2));
  cr_assert(strncmp(path_of(out, "hang.cause"), "\"cycle through rank 1", 21) == 0);
}

Test(cli, stalled_and_timed_out_runs_report_the_hang)
{
  int rc = cli("run '" PREPOST_SOURCE_DIR "/traces/hangs/send-send-deadlock.yaml' --json");
  cr_assert_eq(rc, 3);
  cr_assert(str_is(out, "outcome", "stalled"));
  cr_assert(str_is(out, "hang.trigger", "quiescence"));
  cr_assert_eq(num(out, "hang.stuck_ranks"), 2);
  rc = cli("run '" SCENARIOS "fast-consumer.yaml' --json");
  cr_assert_eq(rc, 0);
  cr_assert_null(path_of(out, "hang"), "a completed run has no hang object");
}

/* ================================================================ limits */

/* ASan reserves terabytes of address space for its shadow memory: an RLIMIT_AS cannot be applied
 * to an instrumented binary at all, so the address-space tests run in the plain builds. */
#if defined(__SANITIZE_ADDRESS__)
#define AS_LIMIT_TESTABLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AS_LIMIT_TESTABLE 0
#endif
#endif
#ifndef AS_LIMIT_TESTABLE
#define AS_LIMIT_TESTABLE 1
#endif

/* Runs `prepost ARGS` under `ulimit -v kib` (RLIMIT_AS), the environment `env` before it. */
static int cli_as(unsigned long kib, const char *env, const char *args)
{
  char a[2048];
  snprintf(a, sizeof(a), "%s", args);
  free(out);
  free(err);
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "ulimit -v %lu && %s '%s' %s > '%s/out' 2> '%s/err' < /dev/null", kib,
           env, PREPOST_CLI, a, tmpdir, tmpdir);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "prepost %s: did not exit normally (status %#x)", args, st);
  char path[128];
  snprintf(path, sizeof(path), "%s/out", tmpdir);
  out = scratch_slurp(path, NULL);
  snprintf(path, sizeof(path), "%s/err", tmpdir);
  err = scratch_slurp(path, NULL);
  return WEXITSTATUS(st);
}

static void write_ring_1024(void)
{
  write_file("ring-1024.yaml", "name: ring-1024\nranks: 1024\nprotocol: naive\n"
                               "workload:\n  pattern: ring\n  messages: 4\n  size: 4KiB\n"
                               "qp:\n  sq_depth: 8\n  rq_depth: 8\n");
}

/* 1,024 ranks, the documented maximum, in 8 GB of address space: SimGrid's default 8 MiB actor
 * stacks alone took 8 GiB and it aborted ("Failed to allocate stack") from about 768 ranks. Both
 * context factories: raw (the default) sizes stacks with contexts/stack-size, thread through
 * the process's default thread attributes. About 0.3 s and 1 s. */
Test(cli, ranks_1024_run_in_8_gb_of_address_space, .timeout = 120)
{
  if (!AS_LIMIT_TESTABLE)
    cr_skip_test("ASan's shadow memory cannot live under an RLIMIT_AS");
  write_ring_1024();
  char args[256];
  snprintf(args, sizeof(args), "run '%s/ring-1024.yaml' --json", tmpdir);
  static const char *const env[] = {"", "PREPOST_SG_CONTEXTS=thread"};
  for (int i = 0; i < 2; i++) {
    int rc = cli_as(8ul << 20, env[i], args);
    cr_assert_eq(rc, 0, "%s: exit %d; stderr:\n%.2000s", env[i], rc, err);
    cr_assert_eq(num(out, "messages"), 1024 * 4, "%s", env[i]);
    cr_assert_null(strstr(err, "prepost:"), "stderr: %s", err);
  }
}

/* The same with the eager protocol: the simulated NICs' QP, MR and CQ tables, sized by the
 * profile's max_qp, max_mr and cq_depth, took 5.9 MiB of address space per rank (the run
 * needed 11.5 GiB and was refused); they grow to what is used (155 KiB). About 1 s. */
Test(cli, eager_ring_1024_runs_in_8_gb_of_address_space, .timeout = 120)
{
  if (!AS_LIMIT_TESTABLE)
    cr_skip_test("ASan's shadow memory cannot live under an RLIMIT_AS");
  write_file("eager-1024.yaml", "name: eager-1024\nranks: 1024\nprotocol: eager\n"
                                "workload:\n  pattern: ring\n  messages: 4\n  size: 4KiB\n");
  char args[256];
  snprintf(args, sizeof(args), "run '%s/eager-1024.yaml' --json", tmpdir);
  int rc = cli_as(8ul << 20, "", args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%.2000s", rc, err);
  cr_assert_eq(num(out, "messages"), 1024 * 4);
}

/* Too little address space: refused before anything is allocated, exit 2, with the amount, its
 * parts and what to lower; never an abort. The naive ring of 1,024 ranks needs about 650 MiB. */
Test(cli, too_little_address_space_is_refused_with_the_amount, .timeout = 60)
{
  if (!AS_LIMIT_TESTABLE)
    cr_skip_test("ASan's shadow memory cannot live under an RLIMIT_AS");
  write_ring_1024();
  char args[256];
  snprintf(args, sizeof(args), "run '%s/ring-1024.yaml'", tmpdir);
  int rc = cli_as(256ul << 10, "", args);
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%.2000s", rc, err);
  assert_has(err, "ring-1024.yaml: the run needs about ");
  assert_has(err, "MiB (1024 ranks x ");
  assert_has(err, "RLIMIT_AS, ulimit -v");
  assert_has(err, "lower ranks or PREPOST_SG_STACK_KIB");
}

Test(cli, limits_memory_refuses_a_run_that_needs_more)
{
  write_file("big.yaml", "name: big\nranks: 8\nworkload:\n  size: 1MiB\n"
                         "qp:\n  sq_depth: 256\n  rq_depth: 256\nlimits:\n  memory: 1GiB\n");
  char args[256];
  snprintf(args, sizeof(args), "run '%s/big.yaml'", tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "the run needs about 4."); /* 4.0 GiB, 4.1 under ASan (1 MiB stacks) */
  assert_has(err, " GiB (8 ranks x ");
  assert_has(err, "more than limits.memory (1.0 GiB)");
  assert_has(err, "lower ranks or qp.sq_depth, qp.rq_depth and workload.size, or raise limits.memory");
  /* and the same run under a limit it fits in */
  write_file("fits.yaml", "name: fits\nranks: 2\nworkload:\n  messages: 4\n  size: 1MiB\n"
                          "qp:\n  sq_depth: 4\n  rq_depth: 4\nlimits:\n  memory: 1GiB\n");
  snprintf(args, sizeof(args), "run '%s/fits.yaml'", tmpdir);
  rc = cli(args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
}

/* Model, scenario and trace paths that are not regular files are refused with file:line: a FIFO
 * named by `nic:` used to hang the CLI in its read (and one named by `platform:` hung SimGrid). */
Test(cli, fifos_directories_and_devices_are_refused_as_model_paths, .timeout = 60)
{
  char fifo[128], text[512], args[512];
  snprintf(fifo, sizeof(fifo), "%s/pipe", tmpdir);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  static const struct {
    const char *key, *path, *why;
  } cases[] = {
      {"nic", NULL, "is a FIFO, not a regular file"},
      {"platform", NULL, "is a FIFO, not a regular file"},
      {"nic", "/tmp", "is a directory"},
      {"platform", "/dev/null", "is a character device, not a regular file"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *path = cases[i].path ? cases[i].path : fifo;
    snprintf(text, sizeof(text), "ranks: 2\n%s: %s\n", cases[i].key, path);
    write_file("s.yaml", text);
    snprintf(args, sizeof(args), "run '%s/s.yaml'", tmpdir);
    int rc = cli(args);
    cr_assert_eq(rc, 2, "%s: %s: exit %d; stderr:\n%s", cases[i].key, path, rc, err);
    char want[512];
    snprintf(want, sizeof(want), "s.yaml:2: %s file '%s': %s", cases[i].key, path, cases[i].why);
    assert_has(err, want);
  }
  /* the scenario itself, and a trace, for every trace command */
  snprintf(args, sizeof(args), "run '%s'", fifo);
  cr_assert_eq(cli(args), 2, "stderr:\n%s", err);
  assert_has(err, "cannot open: is a FIFO, not a regular file");
  static const char *const trace_cmds[] = {"trace dump", "trace stats", "replay",
                                           "trace export --pcap -o /dev/null",
                                           "trace export --svg -o /dev/null"};
  for (size_t i = 0; i < sizeof(trace_cmds) / sizeof(trace_cmds[0]); i++) {
    snprintf(args, sizeof(args), "%s '%s'", trace_cmds[i], fifo);
    cr_assert_eq(cli(args), 2, "%s: stderr:\n%s", trace_cmds[i], err);
    assert_has(err, "is a FIFO, not a regular file");
  }
}

/* ================================================================ what the table shows */

Test(cli, table_shows_the_longest_credit_stalls_first)
{
  /* 20 ranks, rank 18 slow: the stall is on 17->18, past the first 16 connections */
  cr_assert_eq(cli("run '" SCENARIOS "ring-slow-rank.yaml' --set ranks=20 "
                   "--set collective.slow_ranks=[18] --set collective.iterations=6 "
                   "--set collective.size=1MiB"),
               0, "%s", err);
  const char *line = strstr(out, "credit stalls: 17->18 ");
  cr_assert_not_null(line, "the longest stall comes first:\n%s", out);
  cr_assert_not_null(strstr(line, " never stalled\n"), "the others are counted:\n%s", line);
  cr_assert_null(strstr(line, " 0.00 us"), "no connection without a stall is listed:\n%s", line);
}

Test(cli, table_has_a_dash_where_there_are_no_latency_samples)
{
  cr_assert_eq(cli("run '" SCENARIOS "fast-consumer.yaml'"), 0, "%s", err);
  /* rank 1 only receives: no send latency, not 0.00 */
  const char *r1 = strstr(out, "\n1     host1");
  cr_assert_not_null(r1, "%s", out);
  char row[256];
  snprintf(row, sizeof row, "%.*s", (int)strcspn(r1 + 1, "\n"), r1 + 1);
  cr_assert_not_null(strstr(row, "  -           -           -  "), "%s", row);
  cr_assert_null(strstr(row, "0.00"), "%s", row);
}

/* ================================================================ plug-ins (--plugin) */

static const char window_scenario[] =
    "ranks: 2\nseed: 5\nprotocol: window\nwindow:\n  window: 4\n  credit_batch: 2\n"
    "workload:\n  pattern: pair\n  messages: 100\n  size: 2048\nqp:\n  rq_depth: 2\n";

Test(cli, plugin_bad_path)
{
  int rc = cli("--plugin /nonexistent/libnothing.so run x.yaml");
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "prepost: cannot load plug-in /nonexistent/libnothing.so: ");
  assert_has(err, "No such file");
  rc = cli("run x.yaml --plugin");
  cr_assert_eq(rc, 2);
  assert_has(err, "--plugin needs a value");
}

Test(cli, plugin_without_init_refused)
{
  int rc = cli("run x.yaml --plugin " PP_PLUGIN_NOINIT);
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "is not a prepost plug-in: it defines no prepost_plugin_init");
}

Test(cli, plugin_of_another_abi_refused)
{
  int rc = cli("run x.yaml --plugin=" PP_PLUGIN_BADABI);
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
  char want[128];
  snprintf(want, sizeof want, "was built against prepost's plug-in ABI %u, this prepost has ABI %u",
           PP_PROTO_ABI + 1, PP_PROTO_ABI);
  assert_has(err, want);
  assert_has(err, "rebuild it");
}

Test(cli, plugin_protocol_runs_traces_and_replays)
{
  write_file("w.yaml", window_scenario);
  char args[1024];
  snprintf(args, sizeof args, "run %s/w.yaml", tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 2, "without the plug-in: exit %d", rc);
  assert_has(err, "unknown protocol 'window'");
  assert_has(err, "--plugin PATH");
  snprintf(args, sizeof args, "run %s/w.yaml --plugin " PP_PLUGIN_WINDOW " --json --trace %s/w.trace",
           tmpdir, tmpdir);
  rc = cli(args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  assert_has(out, "\"protocol\": \"window\"");
  snprintf(args, sizeof args, "replay %s/w.trace --plugin " PP_PLUGIN_WINDOW, tmpdir);
  rc = cli(args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  assert_has(out, "replay matched");
  snprintf(args, sizeof args, "replay %s/w.trace", tmpdir);
  rc = cli(args);
  cr_assert_eq(rc, 2, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "the trace's protocol 'window' comes from the plug-in libproto-window.so, "
                  "which is not loaded");
  snprintf(args, sizeof args, "trace dump %s/w.trace --plugin " PP_PLUGIN_WINDOW, tmpdir);
  rc = cli(args);
  assert_has(out, "proto.credit_batch = 2");
}

/* A plug-in's trace replays on the simulator (--sim) too, and exports: Perfetto names its
 * messages by the plug-in's own msg_name (DATA, CREDIT), the pcap holds its packets, the SVG its
 * transfers. */
Test(cli, plugin_protocol_replays_with_sim_and_exports, .timeout = 120)
{
  write_file("w.yaml", window_scenario);
  char args[1024];
  snprintf(args, sizeof args,
           "run %s/w.yaml --plugin " PP_PLUGIN_WINDOW " --trace %s/w.trace --trace-packets",
           tmpdir, tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  char *run = strdup(out);
  snprintf(args, sizeof args, "replay %s/w.trace --sim --plugin " PP_PLUGIN_WINDOW, tmpdir);
  rc = cli(args);
  cr_assert_eq(rc, 0, "exit %d; stderr:\n%s", rc, err);
  /* the same run again: the same table (the report's rows from "rank" on) */
  const char *a = strstr(run, "\nrank "), *b = strstr(out, "\nrank ");
  cr_assert(a && b && !strcmp(a, b), "replay --sim differs from the run:\n%s\n---\n%s", run, out);
  free(run);
  snprintf(args, sizeof args, "replay %s/w.trace --sim", tmpdir);
  cr_assert_eq(cli(args), 2, "without the plug-in");
  assert_has(err, "libproto-window.so");
  /* Perfetto: the protocol's messages by its own names */
  snprintf(args, sizeof args, "trace export --perfetto %s/w.trace -o %s/w.json --plugin " PP_PLUGIN_WINDOW,
           tmpdir, tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  char path[256];
  snprintf(path, sizeof path, "%s/w.json", tmpdir);
  char *json = scratch_slurp(path, NULL);
  cr_assert_not_null(json);
  cr_assert_not_null(strstr(json, "\"name\":\"DATA\""), "no DATA message slice");
  cr_assert_not_null(strstr(json, "\"name\":\"CREDIT\""), "no CREDIT message slice");
  cr_assert_null(strstr(json, "\"name\":\"message\""), "a message left unnamed");
  free(json);
  /* pcap: RoCEv2 packets (the magic, then a record) */
  snprintf(args, sizeof args, "trace export --pcap %s/w.trace -o %s/w.pcap --plugin " PP_PLUGIN_WINDOW,
           tmpdir, tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  snprintf(path, sizeof path, "%s/w.pcap", tmpdir);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  unsigned char head[64];
  size_t got = fread(head, 1, sizeof head, f);
  fclose(f);
  cr_assert_eq(got, sizeof head, "the capture holds no packet");
  cr_assert(head[0] == 0x4d && head[1] == 0x3c && head[2] == 0xb2 && head[3] == 0xa1,
            "not a nanosecond pcap");
  /* SVG: the scenario's transfers */
  snprintf(args, sizeof args, "trace export --svg %s/w.trace -o %s/w.svg --plugin " PP_PLUGIN_WINDOW,
           tmpdir, tmpdir);
  cr_assert_eq(cli(args), 0, "%s", err);
  snprintf(path, sizeof path, "%s/w.svg", tmpdir);
  char *svg = scratch_slurp(path, NULL);
  cr_assert(svg && strstr(svg, "<svg") && strstr(svg, ">SEND psn "), "no SEND in the SVG");
  free(svg);
}

/* A plug-in's run that hangs (its test bug: a credit returned for a buffer never re-posted)
 * gets the hang report, with what the plug-in's pending hook says each rank waits for. */
Test(cli, plugin_protocol_hang_report)
{
  write_file("wh.yaml", "ranks: 2\nseed: 5\nprotocol: window\nwindow: {window: 2, credit_batch: 1}\n"
                        "workload: {pattern: pair, messages: 20, size: 64, consume: 20us}\n"
                        "qp: {rq_depth: 2, rnr_retry: 7}\ntest_bugs: [credit-without-repost]\n");
  char args[1024];
  snprintf(args, sizeof args, "run %s/wh.yaml --plugin " PP_PLUGIN_WINDOW " --no-progress 1ms",
           tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 3, "exit %d; stdout:\n%s\nstderr:\n%s", rc, out, err);
  assert_has(out, "hang: 2 of 2 ranks are not done");
  assert_has(out, "[credits] a send waits for credits (0 of 2)");
  assert_has(out, "cycle: 0 -> 1 -> 0");
  /* without the bug it completes */
  write_file("wok.yaml", "ranks: 2\nseed: 5\nprotocol: window\nwindow: {window: 2, credit_batch: 1}\n"
                         "workload: {pattern: pair, messages: 20, size: 64, consume: 20us}\n"
                         "qp: {rq_depth: 2, rnr_retry: 7}\n");
  snprintf(args, sizeof args, "run %s/wok.yaml --plugin " PP_PLUGIN_WINDOW " --no-progress 1ms",
           tmpdir);
  cr_assert_eq(cli(args), 0, "%s%s", out, err);
}

/* The scenarios the verbs suite runs on rxe with the example plug-in (tests/verbs/plugin.list,
 * step plugin of tests/verbs/suite.sh) hold their expectation on the simulator too, which is
 * the other half of the suite's parity check: here, without a device, a list line whose
 * scenario no longer parses, no longer completes or no longer hangs as it says fails. */
Test(cli, plugin_list_of_the_verbs_suite_holds_on_the_simulator, .timeout = 120)
{
  char *list = scratch_slurp(PREPOST_SOURCE_DIR "/tests/verbs/plugin.list", NULL);
  unsigned checked = 0;
  char *save = NULL;
  for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *hash = strchr(line, '#');
    if (hash)
      *hash = '\0';
    char name[256], parity[32], want[64];
    if (sscanf(line, "%255s %31s %63s", name, parity, want) != 3)
      continue; /* a comment or a blank line */
    char args[1024];
    snprintf(args, sizeof args, "run '%s/%s.yaml' --plugin " PP_PLUGIN_WINDOW " --json",
             PREPOST_SOURCE_DIR, name);
    int rc = cli(args);
    if (!strcmp(want, "no-rnr")) {
      cr_assert_eq(rc, 0, "%s: exit %d; stderr:\n%s", name, rc, err);
      assert_has(out, "\"outcome\": \"completed\"");
      /* the run's total comes first, before the ranks' */
      const char *r = strstr(out, "\"rnr_naks\": ");
      cr_assert(r && !strncmp(r, "\"rnr_naks\": 0,", 14), "%s: RNR NAKs:\n%s", name, out);
      cr_assert_null(strstr(out, "\"corrupt\": 1"), "%s: a corrupt message:\n%s", name, out);
    } else if (!strncmp(want, "hang:", 5)) {
      cr_assert_eq(rc, 3, "%s: exit %d; stderr:\n%s", name, rc, err);
      char cause[96];
      snprintf(cause, sizeof cause, "\"cause\": \"%s", want + 5);
      assert_has(out, cause);
    } else {
      cr_assert_fail("%s: expectation '%s' is not checked here: add it", name, want);
    }
    assert_has(out, "\"protocol\": \"window\"");
    checked++;
  }
  free(list);
  cr_assert_geq(checked, 4, "only %u scenarios in tests/verbs/plugin.list", checked);
}

/* The verbs backend runs a plug-in's protocol too: --plugin gets the scenario past the protocol
 * lookup and the run to the device (none here: exit 4, the device named as missing), on the
 * launcher's path and on a rank of a rank table. */
Test(cli, plugin_protocol_reaches_the_verbs_runner)
{
  write_file("w.yaml", window_scenario);
  char args[1024];
  snprintf(args, sizeof args, "run %s/w.yaml --backend verbs --device nosuchdev0", tmpdir);
  cr_assert_eq(cli(args), 2, "without the plug-in: %s", err);
  assert_has(err, "unknown protocol 'window'");
  snprintf(args, sizeof args,
           "run %s/w.yaml --plugin " PP_PLUGIN_WINDOW " --backend verbs --device nosuchdev0", tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 4, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "verbs backend: no RDMA device");
  setenv("PREPOST_JOB_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
         1);
  snprintf(args, sizeof args,
           "run %s/w.yaml --plugin " PP_PLUGIN_WINDOW " --backend verbs --device nosuchdev0 "
           "--rank 1 --ranks 127.0.0.1:1,127.0.0.1 --boot-timeout 1s",
           tmpdir);
  rc = cli(args);
  unsetenv("PREPOST_JOB_SECRET");
  cr_assert_eq(rc, 4, "exit %d; stderr:\n%s", rc, err);
  assert_has(err, "rank 1: no RDMA device");
}

/* PREPOST_PLUGINS, and the explorer finds the plug-in's test bug and shrinks it */
Test(cli, plugin_bug_found_by_explore, .timeout = 120)
{
  char args[1024];
  snprintf(args, sizeof args, "explore --bug credit-without-repost --from 22 --seeds 5 --shrink-max 1 --shrink-runs 40 --timeout 60s --out %s/x",
           tmpdir);
  int rc = cli(args);
  cr_assert_eq(rc, 2, "without the plug-in the bug is unknown: exit %d", rc);
  snprintf(args, sizeof args, "explore --list");
  setenv("PREPOST_PLUGINS", PP_PLUGIN_WINDOW, 1);
  rc = cli(args);
  cr_assert_eq(rc, 0);
  assert_has(out, "credit-without-repost");
  snprintf(args, sizeof args, "explore --bug credit-without-repost --from 22 --seeds 5 --shrink-max 1 --shrink-runs 40 --timeout 60s --out %s/x",
           tmpdir);
  rc = cli(args);
  unsetenv("PREPOST_PLUGINS");
  cr_assert_eq(rc, 1, "exit %d; stdout:\n%s\nstderr:\n%s", rc, out, err);
  assert_has(out, "[rnr]");
  assert_has(out, "shrunk:    window, 2 ranks");
  assert_has(out, "bug credit-without-repost");
}
