/*
 * The hang corpus (the YAML files of traces/hangs): each scenario hangs or dies in a known way; recorded
 * with --trace, `prepost replay TRACE --hang` must exit 3 and its report must name the cause
 * (the QP in ERROR and its status, the wait-for cycle, the silent rank). Scenarios whose fault
 * keys this build's scenario parser does not know yet are skipped.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char dir[64];
static char *out;

static void setup(void)
{
  snprintf(dir, sizeof(dir), "/tmp/prepost-hang-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
  free(out);
  out = NULL;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(hang, .init = setup, .fini = teardown);

static char *slurp(const char *path)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot read %s", path);
  size_t cap = 4096, n = 0, r;
  char *buf = malloc(cap + 1);
  while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap)
      buf = realloc(buf, (cap *= 2) + 1);
  }
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli(const char *fmt, ...)
{
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s > out.txt 2>&1 < /dev/null", dir, PREPOST_CLI,
           args);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s", cmd);
  free(out);
  char path[128];
  snprintf(path, sizeof(path), "%s/out.txt", dir);
  out = slurp(path);
  return WEXITSTATUS(st);
}

/* Records traces/hangs/NAME.yaml (the run must fail: exit 1 or 3), then --hang. */
static void explain(const char *name)
{
  int rc = cli("run " PREPOST_SOURCE_DIR "/traces/hangs/%s.yaml --trace h.trace", name);
  if (rc == 2 && strstr(out, "unknown key"))
    cr_skip_test("%s needs scenario keys this build does not parse yet: %s", name, out);
  cr_assert(rc == 1 || rc == 3, "%s: the run should hang or fail, exit %d: %s", name, rc, out);
  cr_assert_eq(cli("replay h.trace --hang"), 3, "%s: %s", name, out);
  cr_assert(strstr(out, "hang: "), "%s", out);
}

Test(hang, rnr_retry_exceeded_names_the_dead_qp, .timeout = 60)
{
  explain("rnr-retry-exceeded");
  cr_assert(strstr(out, "rank 1 waits:"), "%s", out);
  cr_assert(strstr(out, "in ERROR since"), "%s", out);
  cr_assert(strstr(out, "RNR_RETRY_EXC_ERR"), "the status that killed it: %s", out);
  cr_assert(strstr(out, "1 -> 0 ("), "the wait-for edge: %s", out);
  cr_assert(strstr(out, "no cycle"), "%s", out);
}

Test(hang, send_send_deadlock_is_a_cycle, .timeout = 60)
{
  explain("send-send-deadlock");
  cr_assert(strstr(out, "0 -> 1 ("), "%s", out);
  cr_assert(strstr(out, "1 -> 0 ("), "%s", out);
  cr_assert(strstr(out, "cycle: 0 -> 1 -> 0"), "%s", out);
  cr_assert_eq(cli("replay h.trace --hang --json"), 3);
  cr_assert(strstr(out, "\"cycle\": [0, 1]"), "%s", out);
  cr_assert(strstr(out, "{\"hang\": {\"stuck_ranks\": 2"), "%s", out);
}

Test(hang, rendezvous_waiting_on_an_unposted_receive, .timeout = 60)
{
  explain("rndv-unposted-receive");
  cr_assert(strstr(out, "rank 0 waits:"), "the sender waits (for a CTS): %s", out);
  cr_assert(strstr(out, "rank 1 waits:"), "the receiver waits (for tag 2): %s", out);
  cr_assert(strstr(out, "waits for a message from rank 1"), "%s", out);
}

Test(hang, qp_error_mid_transfer, .timeout = 60)
{
  explain("qp-error-mid-transfer");
  cr_assert(strstr(out, "in ERROR since"), "%s", out);
  cr_assert(strstr(out, "1 -> 0 ("), "%s", out);
}

Test(hang, ring_stalled_by_a_dead_rank, .timeout = 120)
{
  explain("ring-dead-rank");
  cr_assert(strstr(out, "rank 2 has had no input since"), "the frozen rank: %s", out);
}

Test(hang, completed_run_has_no_hang, .timeout = 60)
{
  cr_assert_eq(cli("run " PREPOST_MODELS_DIR "/scenarios/fast-consumer.yaml --trace ok.trace"),
               0);
  cr_assert_eq(cli("replay ok.trace --hang"), 0, "%s", out);
  cr_assert(strstr(out, "no hang"), "%s", out);
  cr_assert_eq(cli("replay ok.trace --hang --sim"), 2);
}
