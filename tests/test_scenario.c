/* Scenario and NIC-profile parser: shipped models, defaults, unit syntax, every error class with
 * its file:line, and hostile input (truncations, byte substitutions, odd documents). */
#define _POSIX_C_SOURCE 200809L

#include "tools/scenario/scenario.h"
#include "scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODELS PREPOST_MODELS_DIR

static char err[1024];

/* Parses text (an exact-size heap copy, so a read past len is an ASan error) as "t.yaml". */
static enum pp_status parse_n(const char *text, size_t len, struct pp_scenario *sc)
{
  char *copy = malloc(len ? len : 1);
  cr_assert(copy);
  memcpy(copy, text, len);
  memset(err, 'X', sizeof err);
  enum pp_status st = pp_scenario_parse(copy, len, "t.yaml", MODELS, sc, err, sizeof err);
  free(copy);
  return st;
}

static enum pp_status parse(const char *text, struct pp_scenario *sc)
{
  return parse_n(text, strlen(text), sc);
}

/* Asserts that text fails with status st and exactly the message msg. */
static void expect_error(const char *text, enum pp_status st, const char *msg)
{
  struct pp_scenario sc;
  enum pp_status got = parse(text, &sc);
  cr_assert_eq(got, st, "input:\n%s\nexpected %s, got %s (%s)", text, pp_status_name(st),
               pp_status_name(got), err);
  cr_assert_str_eq(err, msg, "input:\n%s", text);
}

/* Asserts that text fails with status st and a message starting with prefix. */
static void expect_prefix_n(const char *text, size_t len, enum pp_status st, const char *prefix)
{
  struct pp_scenario sc;
  enum pp_status got = parse_n(text, len, &sc);
  cr_assert_eq(got, st, "expected %s, got %s (%s)", pp_status_name(st), pp_status_name(got), err);
  cr_assert(strncmp(err, prefix, strlen(prefix)) == 0, "'%s' does not start with '%s'", err,
            prefix);
}

static void expect_prefix(const char *text, enum pp_status st, const char *prefix)
{
  expect_prefix_n(text, strlen(text), st, prefix);
}

static void expect_ok(const char *text, struct pp_scenario *sc)
{
  enum pp_status st = parse(text, sc);
  cr_assert_eq(st, PP_OK, "input:\n%s\n-> %s: %s", text, pp_status_name(st), err);
  cr_assert_str_eq(err, "");
}

static void load_scenario(const char *name, struct pp_scenario *sc)
{
  char path[PP_PATH_MAX];
  snprintf(path, sizeof path, "%s/scenarios/%s.yaml", MODELS, name);
  enum pp_status st = pp_scenario_load(path, MODELS, sc, err, sizeof err);
  cr_assert_eq(st, PP_OK, "%s: %s", name, err);
}

/* Field by field: struct padding is not guaranteed to compare equal. */
static void assert_nic_eq(const struct pp_nic_profile *a, const struct pp_nic_profile *b)
{
  cr_assert_str_eq(a->name, b->name);
  cr_assert_eq(a->mtu, b->mtu);
  cr_assert_eq(a->header_bytes, b->header_bytes);
  cr_assert_eq(a->wqe_ns, b->wqe_ns);
  cr_assert_eq(a->ack_every, b->ack_every);
  cr_assert_eq(a->ack_delay_ns, b->ack_delay_ns);
  cr_assert_eq(a->max_qp, b->max_qp);
  cr_assert_eq(a->max_qp_wr, b->max_qp_wr);
  cr_assert_eq(a->max_srq, b->max_srq);
  cr_assert_eq(a->max_mr, b->max_mr);
  cr_assert_eq(a->cq_depth, b->cq_depth);
  cr_assert_eq(a->max_rd_atomic, b->max_rd_atomic);
}

static void assert_engine_eq(const struct pp_engine_cfg *a, const struct pp_engine_cfg *b)
{
  cr_assert_eq(a->rank, b->rank);
  cr_assert_eq(a->nranks, b->nranks);
  cr_assert_eq(a->protocol, b->protocol);
  cr_assert_eq(a->seed, b->seed);
  cr_assert_eq(a->qp.min_rnr_timer, b->qp.min_rnr_timer);
  cr_assert_eq(a->qp.rnr_retry, b->qp.rnr_retry);
  cr_assert_eq(a->qp.timeout, b->qp.timeout);
  cr_assert_eq(a->qp.retry_cnt, b->qp.retry_cnt);
  cr_assert_eq(a->qp.max_rd_atomic, b->qp.max_rd_atomic);
  cr_assert_eq(a->qp.mtu, b->qp.mtu);
  cr_assert_eq(a->qp.sq_depth, b->qp.sq_depth);
  cr_assert_eq(a->qp.rq_depth, b->qp.rq_depth);
  cr_assert_eq(a->workload.pattern, b->workload.pattern);
  cr_assert_eq(a->workload.messages, b->workload.messages);
  cr_assert_eq(a->workload.size, b->workload.size);
  cr_assert_eq(a->workload.interval_ns, b->workload.interval_ns);
  cr_assert_eq(a->workload.consume_ns, b->workload.consume_ns);
  cr_assert_eq(a->workload.consume_ranks, b->workload.consume_ranks);
}

static bool ends_with(const char *s, const char *tail)
{
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

/* ------------------------------------------------------------------------------------------ */

Test(shipped, every_scenario_and_nic_file_loads)
{
  static const char *const dirs[] = {"scenarios", "nics"};
  for (int d = 0; d < 2; d++) {
    char dir[PP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", MODELS, dirs[d]);
    DIR *dp = opendir(dir);
    cr_assert(dp, "cannot open %s", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
      if (!ends_with(de->d_name, ".yaml"))
        continue;
      char path[PP_PATH_MAX * 2];
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      enum pp_status st;
      if (d == 0) {
        struct pp_scenario sc;
        st = pp_scenario_load(path, MODELS, &sc, err, sizeof err);
        cr_assert_eq(st, PP_OK, "%s: %s", path, err);
        cr_assert_str_eq(sc.path, path);
        /* Each scenario's name matches its file name. */
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(de->d_name) - 5), de->d_name);
        cr_assert_str_eq(sc.sim.name, base);
      } else {
        struct pp_nic_profile p;
        st = pp_nic_profile_load(path, &p, err, sizeof err);
        cr_assert_eq(st, PP_OK, "%s: %s", path, err);
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(de->d_name) - 5), de->d_name);
        cr_assert_str_eq(p.name, base);
      }
      n++;
    }
    closedir(dp);
    cr_assert_geq(n, d == 0 ? 8 : 3, "only %d files in %s", n, dir);
  }
}

Test(shipped, rnr_slow_consumer_values)
{
  struct pp_scenario sc;
  load_scenario("rnr-slow-consumer", &sc);
  const struct pp_sim_config *s = &sc.sim;
  cr_assert_str_eq(s->name, "rnr-slow-consumer");
  cr_assert_eq(s->engine.nranks, 2);
  cr_assert_eq(s->seed, 1);
  cr_assert_eq(s->engine.seed, 1);
  cr_assert(ends_with(s->platform.file, "/platforms/roce-100g-2host.xml"), "%s", s->platform.file);
  cr_assert_str_eq(s->nic.name, "cx6-roce-100g");
  cr_assert_eq(s->engine.protocol, PP_PROTO_NAIVE);
  cr_assert_eq(s->engine.workload.pattern, PP_PATTERN_PAIR);
  cr_assert_eq(s->engine.workload.messages, 200);
  cr_assert_eq(s->engine.workload.size, 4096);
  cr_assert_eq(s->engine.workload.interval_ns, 2000);
  cr_assert_eq(s->engine.workload.consume_ns, 100000);
  cr_assert_eq(s->engine.workload.consume_ranks, 1u << 1);
  cr_assert_eq(s->engine.qp.rnr_retry, 7);
  cr_assert_eq(s->engine.qp.min_rnr_timer, 1);
  cr_assert_eq(s->engine.qp.rq_depth, 8);
  cr_assert_eq(s->engine.qp.sq_depth, 256);
  cr_assert_eq(s->faults.loss, 0.0);

  load_scenario("rnr-slow-consumer-retry0", &sc);
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 0);
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 8);
  cr_assert_eq(sc.sim.engine.workload.consume_ns, 100000);
  load_scenario("rnr-slow-consumer-retry3", &sc);
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 3);
  cr_assert_eq(sc.sim.engine.qp.min_rnr_timer, 1);
}

Test(shipped, other_scenario_values)
{
  struct pp_scenario sc;
  load_scenario("fast-consumer", &sc);
  cr_assert_eq(sc.sim.engine.workload.consume_ns, 0);
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 256);
  cr_assert_eq(sc.sim.engine.workload.messages, 200);

  load_scenario("ring-64", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 64);
  cr_assert_str_eq(sc.sim.platform.file, "");
  cr_assert_eq(sc.sim.platform.bandwidth_bps, 100e9);
  cr_assert_eq(sc.sim.platform.latency_ns, 1000);
  cr_assert_eq(sc.sim.engine.workload.pattern, PP_PATTERN_RING);
  cr_assert_eq(sc.sim.engine.workload.messages, 1000);
  cr_assert_eq(sc.sim.engine.workload.size, 64);
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 1024);
  cr_assert_eq(sc.sim.engine.qp.sq_depth, 1024);

  load_scenario("hdr-pair", &sc);
  cr_assert(ends_with(sc.sim.platform.file, "/platforms/hdr-200g-2host.xml"));
  cr_assert_str_eq(sc.sim.nic.name, "hdr-ib-200g");
  cr_assert_eq(sc.sim.nic.header_bytes, 26);
  cr_assert_eq(sc.sim.engine.workload.size, 64 * 1024);
  cr_assert_eq(sc.sim.engine.workload.messages, 1000);
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 256);

  load_scenario("lossy", &sc);
  cr_assert_float_eq(sc.sim.faults.loss, 0.01, 1e-12);
  cr_assert_eq(sc.sim.engine.qp.timeout, 10);
  cr_assert_eq(sc.sim.engine.workload.consume_ns, 0);
}

Test(shipped, nic_profile_values)
{
  struct pp_nic_profile p;
  cr_assert_eq(pp_nic_profile_load(MODELS "/nics/cx6-roce-100g.yaml", &p, err, sizeof err), PP_OK,
               "%s", err);
  cr_assert_eq(p.mtu, 4096);
  cr_assert_eq(p.header_bytes, 82);
  cr_assert_eq(p.wqe_ns, 50);
  cr_assert_eq(p.ack_every, 16);
  cr_assert_eq(p.ack_delay_ns, 1000);
  cr_assert_eq(p.max_qp, 4096);
  cr_assert_eq(p.max_qp_wr, 16384);
  cr_assert_eq(p.max_srq, 1024);
  cr_assert_eq(p.max_mr, 65536);
  cr_assert_eq(p.cq_depth, 65536);
  cr_assert_eq(p.max_rd_atomic, 16);

  cr_assert_eq(pp_nic_profile_load(MODELS "/nics/hdr-ib-200g.yaml", &p, err, sizeof err), PP_OK,
               "%s", err);
  cr_assert_eq(p.header_bytes, 26);
  cr_assert_eq(p.wqe_ns, 40);
  cr_assert_eq(p.max_qp_wr, 16384);

  cr_assert_eq(pp_nic_profile_load(MODELS "/nics/ideal.yaml", &p, err, sizeof err), PP_OK, "%s",
               err);
  cr_assert_eq(p.wqe_ns, 0);
  cr_assert_eq(p.ack_every, 1);
  cr_assert_eq(p.ack_delay_ns, 0);
}

/* The profile prepost calibrate made in the guest: it loads, and says what rxe does there: RNR
 * delays rounded far above the IBTA table's short codes, an ACK per request. */
Test(shipped, the_calibrated_rxe_profile)
{
  struct pp_nic_profile p;
  cr_assert_eq(pp_nic_profile_load(MODELS "/nics/rxe-tcg.yaml", &p, err, sizeof err), PP_OK,
               "%s", err);
  cr_assert_str_eq(p.name, "rxe-tcg");
  cr_assert_gt(p.rnr_min_ns, 2 * pp_rnr_timer_ns(1), "a floor above code 1's 10 us");
  for (unsigned c = 1; c <= 14; c++)
    cr_assert_geq(simnic_rnr_delay_ns(&p, c), p.rnr_min_ns, "code %u", c);
  cr_assert_gt(p.rnr_delay_ns[1], 0, "code 1 measured");
  cr_assert_eq(p.ack_every, 1);
  cr_assert_gt(p.wqe_ns, 1000, "emulation: microseconds a WQE, not nanoseconds");
  cr_assert_eq(p.rc_model, PP_RC_RXE, "Soft-RoCE's retry rules");
}

/* The hardware profiles and the ideal NIC keep the IBTA's retry rules; rc_model is read by name
 * and a wrong one is refused, naming the key and the names it takes. */
Test(shipped, hardware_profiles_follow_the_ibta_retry_rules)
{
  static const char *const hw[] = {"cx6-roce-100g", "hdr-ib-200g", "ideal"};
  for (size_t i = 0; i < sizeof hw / sizeof hw[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, MODELS "/nics/%s.yaml", hw[i]);
    struct pp_nic_profile p;
    cr_assert_eq(pp_nic_profile_load(path, &p, err, sizeof err), PP_OK, "%s", err);
    cr_assert_eq(p.rc_model, PP_RC_IBTA, "%s", hw[i]);
  }
  static struct pp_scenario s;
  char e[512];
  const char *ok = "ranks: 2\nnic:\n  rc_model: rxe\n";
  cr_assert_eq(pp_scenario_parse(ok, strlen(ok), "t.yaml", MODELS, &s, e, sizeof e), PP_OK,
               "%s", e);
  cr_assert_eq(s.sim.nic.rc_model, PP_RC_RXE);
  const char *bad = "ranks: 2\nnic:\n  rc_model: mlx5\n";
  cr_assert_neq(pp_scenario_parse(bad, strlen(bad), "t.yaml", MODELS, &s, e, sizeof e), PP_OK);
  cr_assert(strstr(e, "rc_model") && strstr(e, "ibta") && strstr(e, "rxe"), "%s", e);
}

Test(shipped, platform_files_are_simgrid_4_1)
{
  static const char *const files[][3] = {
      {"roce-100g-2host.xml", "bandwidth=\"100Gbps\"", "latency=\"1us\""},
      {"hdr-200g-2host.xml", "bandwidth=\"200Gbps\"", "latency=\"600ns\""},
  };
  for (int i = 0; i < 2; i++) {
    char path[PP_PATH_MAX];
    snprintf(path, sizeof path, "%s/platforms/%s", MODELS, files[i][0]);
    size_t len;
    char *xml = scratch_slurp(path, &len);
    cr_assert(strstr(xml, "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"));
    cr_assert(strstr(xml, "<platform version=\"4.1\">"));
    cr_assert(strstr(xml, "routing=\"Full\""));
    cr_assert(strstr(xml, "<host id=\"host0\""));
    cr_assert(strstr(xml, "<host id=\"host1\""));
    cr_assert(strstr(xml, files[i][1]), "%s", files[i][0]);
    cr_assert(strstr(xml, files[i][2]), "%s", files[i][0]);
    free(xml);
  }
}

/* ------------------------------------------------------------------------------------------ */

Test(defaults, scenario_defaults)
{
  struct pp_scenario sc;
  memset(&sc, 0x5a, sizeof sc);
  pp_scenario_defaults(&sc);
  const struct pp_sim_config *s = &sc.sim;
  struct pp_nic_profile nic;
  pp_nic_profile_default(&nic);
  cr_assert_eq(s->seed, 1);
  cr_assert_eq(s->engine.seed, 1);
  cr_assert_eq(s->engine.nranks, 2);
  cr_assert_str_eq(s->platform.file, "");
  cr_assert_eq(s->platform.bandwidth_bps, 100e9);
  cr_assert_eq(s->platform.latency_ns, 1000);
  assert_nic_eq(&s->nic, &nic);
  cr_assert_eq(s->engine.protocol, PP_PROTO_NAIVE);
  cr_assert_eq(s->engine.workload.pattern, PP_PATTERN_PAIR);
  cr_assert_eq(s->engine.workload.messages, 100);
  cr_assert_eq(s->engine.workload.size, 4096);
  cr_assert_eq(s->engine.workload.interval_ns, 0);
  cr_assert_eq(s->engine.workload.consume_ns, 0);
  cr_assert_eq(s->engine.workload.consume_ranks, 0);
  cr_assert_eq(s->engine.qp.min_rnr_timer, 12);
  cr_assert_eq(s->engine.qp.rnr_retry, 7);
  cr_assert_eq(s->engine.qp.timeout, 14);
  cr_assert_eq(s->engine.qp.retry_cnt, 7);
  cr_assert_eq(s->engine.qp.max_rd_atomic, 16);
  cr_assert_eq(s->engine.qp.mtu, 4096);
  cr_assert_eq(s->engine.qp.sq_depth, 128);
  cr_assert_eq(s->engine.qp.rq_depth, 64);
  cr_assert_eq(s->faults.loss, 0.0);
  cr_assert_eq(s->max_sim_time_ns, 60000000000ull);
  cr_assert_eq(s->no_progress_ns, PP_NO_PROGRESS_DEFAULT_NS);
  cr_assert_eq(s->no_progress_ns, 1000000000ull, "1 s unless the scenario says");
}

Test(defaults, minimal_scenario_takes_every_default)
{
  struct pp_scenario sc, def;
  expect_ok("ranks: 2\n", &sc);
  pp_scenario_defaults(&def);
  cr_assert_str_eq(sc.path, "t.yaml");
  cr_assert_str_eq(sc.sim.name, "t");
  /* Everything but the path and the name equals the defaults. */
  assert_nic_eq(&sc.sim.nic, &def.sim.nic);
  assert_engine_eq(&sc.sim.engine, &def.sim.engine);
  cr_assert_eq(sc.sim.max_sim_time_ns, def.sim.max_sim_time_ns);
  cr_assert_eq(sc.sim.seed, 1);
  cr_assert_eq(sc.sim.faults.loss, 0.0);
  cr_assert_str_eq(sc.sim.platform.file, "");
  cr_assert_eq(sc.sim.platform.bandwidth_bps, def.sim.platform.bandwidth_bps);
  cr_assert_eq(sc.sim.platform.latency_ns, def.sim.platform.latency_ns);
  /* Empty sections are allowed and change nothing. */
  expect_ok("ranks: 2\nqp:\nworkload: {}\nfaults:\nlimits: {}\n", &sc);
  assert_engine_eq(&sc.sim.engine, &def.sim.engine);
}

Test(defaults, name_seed_and_path)
{
  struct pp_scenario sc;
  char path[] = "some/dir/my-case.yml";
  cr_assert_eq(pp_scenario_parse("ranks: 4\n", 9, path, MODELS, &sc, err, sizeof err), PP_OK, "%s",
               err);
  cr_assert_str_eq(sc.sim.name, "my-case");
  cr_assert_str_eq(sc.path, path);
  cr_assert_eq(sc.sim.engine.nranks, 4);
  expect_ok("name: other\nseed: 18446744073709551615\nranks: 2\n", &sc);
  cr_assert_str_eq(sc.sim.name, "other");
  cr_assert_eq(sc.sim.seed, UINT64_MAX);
  cr_assert_eq(sc.sim.engine.seed, UINT64_MAX);
  /* A NULL path is allowed for text that comes from nowhere. */
  cr_assert_eq(pp_scenario_parse("ranks: 2", 8, NULL, MODELS, &sc, err, sizeof err), PP_OK);
  cr_assert_str_eq(sc.sim.name, "scenario");
}

Test(defaults, qp_defaults_follow_a_smaller_nic)
{
  struct pp_scenario sc;
  expect_ok("ranks: 2\nnic: {mtu: 1024, max_rd_atomic: 4, max_qp_wr: 32}\n", &sc);
  cr_assert_eq(sc.sim.nic.mtu, 1024);
  cr_assert_eq(sc.sim.engine.qp.mtu, 1024);
  cr_assert_eq(sc.sim.engine.qp.max_rd_atomic, 4);
  cr_assert_eq(sc.sim.engine.qp.sq_depth, 32);
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 32);
  /* Inline profiles start from the default profile. */
  struct pp_nic_profile def;
  pp_nic_profile_default(&def);
  cr_assert_str_eq(sc.sim.nic.name, def.name);
  cr_assert_eq(sc.sim.nic.header_bytes, def.header_bytes);
}

/* ------------------------------------------------------------------------------------------ */

struct unit_case {
  const char *text;
  uint64_t value;
};

Test(units, durations)
{
  static const struct unit_case ok[] = {
      {"0", 0},           {"7", 7},
      {"250ns", 250},     {"2us", 2000},
      {"1.5ms", 1500000}, {"10s", 10000000000ull},
      {"1.25us", 1250},   {"1.5ns", 2},
      {"0.4ns", 0},       {"0.0000000015s", 2},
      {"100 us", 100000}, {"\"3ms\"", 3000000},
      {"18446744073709551615", UINT64_MAX},
      {"0.123456789123s", 123456789},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[256];
    struct pp_scenario sc;
    snprintf(text, sizeof text, "ranks: 2\nworkload:\n  interval: %s\n", ok[i].text);
    expect_ok(text, &sc);
    cr_assert_eq(sc.sim.engine.workload.interval_ns, ok[i].value, "%s -> %llu", ok[i].text,
                 (unsigned long long)sc.sim.engine.workload.interval_ns);
  }
  static const struct {
    const char *text;
    enum pp_status st;
  } bad[] = {
      {"2 parsecs", PP_PARSE}, {"1.5", PP_PARSE},   {"us", PP_PARSE},
      {"1e3us", PP_PARSE},     {"''", PP_PARSE},    {"2US", PP_PARSE},
      {"[1]", PP_PARSE},       {"-5us", PP_INVALID}, {"18446744073709551616", PP_INVALID},
      {"18446744074s", PP_INVALID},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "ranks: 2\nworkload:\n  consume: %s\n", bad[i].text);
    expect_prefix(text, bad[i].st, "t.yaml:3: 'consume' must");
  }
  expect_error("ranks: 2\nworkload:\n  consume: 2 parsecs\n", PP_PARSE,
               "t.yaml:3: 'consume' must be a duration such as 500ns, 2us, 1.5ms or 10s (a bare "
               "integer is ns), got '2 parsecs'");
  struct pp_scenario sc;
  expect_ok("ranks: 2\nlimits: {max_sim_time: 1.5s}\n", &sc);
  cr_assert_eq(sc.sim.max_sim_time_ns, 1500000000ull);
  expect_error("ranks: 2\nlimits: {max_sim_time: 0s}\n", PP_INVALID,
               "t.yaml:2: 'max_sim_time' must be > 0, got '0s'");
}

Test(units, memory_limit)
{
  struct pp_scenario sc;
  expect_ok("ranks: 2\n", &sc);
  cr_assert_eq(sc.sim.memory_limit, 0, "no limit unless the scenario says");
  expect_ok("ranks: 2\nlimits:\n  memory: 6GiB\n", &sc);
  cr_assert_eq(sc.sim.memory_limit, 6ull << 30);
  expect_prefix("ranks: 2\nlimits:\n  memory: 1000\n", PP_INVALID, "t.yaml:3: 'memory' must be");
  expect_prefix("ranks: 2\nlimits:\n  memory: lots\n", PP_PARSE, "t.yaml:3: 'memory' must be");
}

Test(units, no_progress)
{
  struct pp_scenario sc;
  expect_ok("ranks: 2\nlimits:\n  no_progress: 250us\n", &sc);
  cr_assert_eq(sc.sim.no_progress_ns, 250000ull);
  cr_assert_eq(sc.sim.max_sim_time_ns, 60000000000ull, "the other limit keeps its default");
  expect_ok("ranks: 2\nlimits: {no_progress: 0, max_sim_time: 2s}\n", &sc);
  cr_assert_eq(sc.sim.no_progress_ns, 0, "0: the bound is off");
  cr_assert_eq(sc.sim.max_sim_time_ns, 2000000000ull);
  expect_error("ranks: 2\nlimits:\n  no_progress: soon\n", PP_PARSE,
               "t.yaml:3: 'no_progress' must be a duration such as 500ns, 2us, 1.5ms or 10s (a "
               "bare integer is ns), got 'soon'");
  expect_error("ranks: 2\nlimits:\n  no_progress: -1ms\n", PP_INVALID,
               "t.yaml:3: 'no_progress' must not be negative, got '-1ms'");
  uint64_t v = 7;
  char err[256];
  cr_assert_eq(pp_duration_parse("1.5ms", "--no-progress", &v, err, sizeof err), PP_OK);
  cr_assert_eq(v, 1500000ull);
  cr_assert_eq(pp_duration_parse("3", "--no-progress", &v, err, sizeof err), PP_OK);
  cr_assert_eq(v, 3ull, "a bare integer is ns");
  cr_assert_eq(pp_duration_parse("3 weeks", "--no-progress", &v, err, sizeof err), PP_PARSE);
  cr_assert(strstr(err, "'--no-progress' must be a duration"), "%s", err);
  cr_assert_eq(v, 3ull, "unchanged on error");
}

Test(units, sizes)
{
  static const struct unit_case ok[] = {
      {"4096", 4096},        {"64B", 64},         {"4KiB", 4096},     {"1MiB", 1048576},
      {"1GiB", 1u << 30},    {"4KB", 4000},       {"1MB", 1000000},   {"0.5KiB", 512},
      {"16", 16},            {"4 KiB", 4096},     {"1.5MiB", 1572864},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[256];
    struct pp_scenario sc;
    if (ok[i].value < 16)
      continue; /* below the message header: checked as an error below */
    snprintf(text, sizeof text, "ranks: 2\nqp: {sq_depth: 1, rq_depth: 1}\nworkload:\n  size: %s\n",
             ok[i].text);
    expect_ok(text, &sc);
    cr_assert_eq(sc.sim.engine.workload.size, ok[i].value, "%s -> %u", ok[i].text,
                 sc.sim.engine.workload.size);
  }
  static const struct {
    const char *text;
    enum pp_status st;
  } bad[] = {
      {"15", PP_INVALID},   {"2.0", PP_INVALID}, {"2GiB", PP_INVALID}, {"1.3B", PP_INVALID},
      {"4kib", PP_PARSE},   {"4K", PP_PARSE},    {"KiB", PP_PARSE},    {"-4KiB", PP_INVALID},
      {"0.1234567891KiB", PP_PARSE}, {"99999999999999999999", PP_INVALID},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "ranks: 2\nqp: {sq_depth: 1, rq_depth: 1}\nworkload:\n  size: %s\n",
             bad[i].text);
    expect_prefix(text, bad[i].st, "t.yaml:4: 'size' ");
  }
  expect_error("ranks: 2\nworkload:\n  size: 2GiB\n", PP_INVALID,
               "t.yaml:3: 'size' must be a size 16..1073741824 bytes, got '2GiB'");
}

Test(units, bandwidths_and_latency)
{
  static const struct {
    const char *text;
    double bps;
  } ok[] = {{"100Gbps", 100e9}, {"25GBps", 200e9}, {"200Gbps", 200e9}, {"1000000", 1e6},
            {"12.5Gbps", 12.5e9}, {"1e9", 1e9},    {"10Mbps", 10e6},    {"1 Tbps", 1e12}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[256];
    struct pp_scenario sc;
    snprintf(text, sizeof text, "ranks: 2\nplatform:\n  cluster: {bandwidth: %s, latency: 600ns}\n",
             ok[i].text);
    expect_ok(text, &sc);
    cr_assert_float_eq(sc.sim.platform.bandwidth_bps, ok[i].bps, ok[i].bps * 1e-12, "%s",
                       ok[i].text);
    cr_assert_eq(sc.sim.platform.latency_ns, 600);
    cr_assert_str_eq(sc.sim.platform.file, "");
  }
  expect_prefix("ranks: 2\nplatform: {cluster: {bandwidth: 100Gbit}}\n", PP_PARSE,
                "t.yaml:2: 'bandwidth' must be a bandwidth such as");
  expect_error("ranks: 2\nplatform: {cluster: {bandwidth: 0Gbps}}\n", PP_INVALID,
               "t.yaml:2: 'bandwidth' must be a finite bandwidth > 0, got '0Gbps'");
  expect_error("ranks: 2\nplatform: {cluster: {bandwidth: -1Gbps}}\n", PP_INVALID,
               "t.yaml:2: 'bandwidth' must be a finite bandwidth > 0, got '-1Gbps'");
  expect_error("ranks: 2\nplatform: {cluster: {bandwidth: 1e999}}\n", PP_INVALID,
               "t.yaml:2: 'bandwidth' must be a finite bandwidth > 0, got '1e999'");
  /* A bare "cluster:" is the default cluster. */
  struct pp_scenario sc;
  expect_ok("ranks: 2\nplatform:\n  cluster:\n", &sc);
  cr_assert_eq(sc.sim.platform.bandwidth_bps, 100e9);
  cr_assert_eq(sc.sim.platform.latency_ns, 1000);
}

/* The faults section reads by its field table: probabilities, durations, ranks below `ranks`. */
Test(units, faults_by_their_table)
{
  struct pp_scenario sc;
  expect_ok("ranks: 4\nfaults: {scramble: 1.0, byzantine: 1, byzantine_rank: 3, jitter: 2us,\n"
            "  until: 5000, qp_error_host: 3, rkey_host: 2, pause_ranks: [1, 3], order_bits: 64,\n"
            "  order_mask: 18446744073709551615}\n",
            &sc);
  const struct pp_faults *f = &sc.sim.faults;
  cr_assert(f->scramble == 1.0 && f->byzantine == 1.0);
  cr_assert_eq(f->byzantine_rank, 3);
  cr_assert_eq(f->jitter_ns, 2000);
  cr_assert_eq(f->until_ns, 5000, "a bare integer is ns");
  cr_assert_eq(f->qp_error_host, 3);
  cr_assert_eq(f->rkey_host, 2);
  cr_assert_eq(f->pause_ranks, 0xa);
  cr_assert_eq(f->order_bits, 64);
  cr_assert_eq(f->order_mask, UINT64_MAX);
  expect_error("ranks: 4\nfaults: {qp_error_host: 4}\n", PP_INVALID,
               "t.yaml:2: 'qp_error_host' must be an integer 0..3, got '4'");
  expect_error("ranks: 2\nfaults: {byzantine_rank: 2}\n", PP_INVALID,
               "t.yaml:2: 'byzantine_rank' must be an integer 0..1, got '2'");
  expect_error("ranks: 2\nfaults: {scramble: 1.01}\n", PP_INVALID,
               "t.yaml:2: 'scramble' must be a number 0 <= p <= 1, got '1.01'");
  expect_error("ranks: 2\nfaults: {byzantine: x}\n", PP_PARSE,
               "t.yaml:2: 'byzantine' must be a number 0 <= p <= 1, got 'x'");
  expect_error("ranks: 2\nfaults: {pause_ranks: [2]}\n", PP_INVALID,
               "t.yaml:2: 'pause_ranks' must be an integer 0..1, got '2'");
  expect_error("ranks: 2\nfaults: {order_bits: 65}\n", PP_INVALID,
               "t.yaml:2: 'order_bits' must be an integer 0..64, got '65'");
  expect_error("ranks: 2\nfaults: {cq_delay: 3parsecs}\n", PP_PARSE,
               "t.yaml:2: 'cq_delay' must be a duration such as 500ns, 2us, 1.5ms or 10s (a bare "
               "integer is ns), got '3parsecs'");
}

Test(units, loss_and_integers)
{
  struct pp_scenario sc;
  expect_ok("ranks: 2\nfaults: {loss: 1e-3}\n", &sc);
  cr_assert_float_eq(sc.sim.faults.loss, 1e-3, 1e-15);
  expect_ok("ranks: 2\nfaults: {loss: 0.999}\n", &sc);
  cr_assert_float_eq(sc.sim.faults.loss, 0.999, 1e-15);
  expect_error("ranks: 2\nfaults: {loss: 1}\n", PP_INVALID,
               "t.yaml:2: 'loss' must be a number 0 <= p < 1, got '1'");
  expect_error("ranks: 2\nfaults: {loss: -0.1}\n", PP_INVALID,
               "t.yaml:2: 'loss' must be a number 0 <= p < 1, got '-0.1'");
  expect_error("ranks: 2\nfaults: {loss: nan}\n", PP_PARSE,
               "t.yaml:2: 'loss' must be a number 0 <= p < 1, got 'nan'");
  expect_error("ranks: 2\nfaults: {loss: 1%}\n", PP_PARSE,
               "t.yaml:2: 'loss' must be a number 0 <= p < 1, got '1%'");
  /* Integers: plain or quoted decimal only. */
  expect_ok("ranks: '4'\nqp: {rnr_retry: +3, timeout: 0}\n", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 4);
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 3);
  cr_assert_eq(sc.sim.engine.qp.timeout, 0);
  expect_error("ranks: 2\nqp: {rnr_retry: 0x3}\n", PP_PARSE,
               "t.yaml:2: 'rnr_retry' must be an integer 0..7, got '0x3'");
  expect_error("ranks: 2\nqp: {rnr_retry: 3.0}\n", PP_PARSE,
               "t.yaml:2: 'rnr_retry' must be an integer 0..7, got '3.0'");
}

/* ------------------------------------------------------------------------------------------ */

Test(scenario, a_nic_line_rate_is_a_bandwidth_and_never_zero)
{
  static struct pp_scenario s;
  char err[512];
  const char *ok = "ranks: 2\nnic:\n  line_rate: 25Gbps\n";
  cr_assert_eq(pp_scenario_parse(ok, strlen(ok), "t.yaml", MODELS, &s, err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert_eq(s.sim.nic.line_rate_bps, 25e9);
  const char *def = "ranks: 2\n";
  cr_assert_eq(pp_scenario_parse(def, strlen(def), "t.yaml", MODELS, &s, err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert_eq(s.sim.nic.line_rate_bps, 100e9, "the default NIC's 100 Gb/s port");
  const char *hdr = "ranks: 2\nnic: nics/hdr-ib-200g.yaml\n";
  cr_assert_eq(pp_scenario_parse(hdr, strlen(hdr), "t.yaml", MODELS, &s, err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert_eq(s.sim.nic.line_rate_bps, 200e9);
  const char *zero = "ranks: 2\nnic:\n  line_rate: 0\n";
  cr_assert_neq(pp_scenario_parse(zero, strlen(zero), "t.yaml", MODELS, &s, err,
                                  sizeof(err)), PP_OK);
  cr_assert(strstr(err, "line_rate"), "%s", err);
}

Test(scenario, a_nic_rnr_delay_model_is_read_and_checked)
{
  static struct pp_scenario s;
  char err[512];
  const char *ok = "ranks: 2\nnic:\n  rnr_tick: 4ms\n  rnr_min: 8.6ms\n"
                   "  rnr_delay: {1: 9ms, 14: 18.6ms}\n";
  cr_assert_eq(pp_scenario_parse(ok, strlen(ok), "t.yaml", MODELS, &s, err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert_eq(s.sim.nic.rnr_tick_ns, 4000000u);
  cr_assert_eq(s.sim.nic.rnr_min_ns, 8600000u);
  cr_assert_eq(s.sim.nic.rnr_delay_ns[1], 9000000u);
  cr_assert_eq(s.sim.nic.rnr_delay_ns[14], 18600000u);
  cr_assert_eq(s.sim.nic.rnr_delay_ns[12], 0u, "not given: the spec's");
  cr_assert_eq(simnic_rnr_delay_ns(&s.sim.nic, 14), 20000000u, "18.6 ms in 4 ms ticks");
  const char *def = "ranks: 2\n";
  cr_assert_eq(pp_scenario_parse(def, strlen(def), "t.yaml", MODELS, &s, err, sizeof(err)),
               PP_OK, "%s", err);
  cr_assert_eq(s.sim.nic.rnr_tick_ns + s.sim.nic.rnr_min_ns, 0u, "the default: the spec");
  for (unsigned c = 0; c < 32; c++)
    cr_assert_eq(simnic_rnr_delay_ns(&s.sim.nic, c), pp_rnr_timer_ns(c));
  static const char *const bad[][2] = {
      {"ranks: 2\nnic:\n  rnr_delay: {32: 1ms}\n", "t.yaml:3: 'rnr_delay code'"},
      {"ranks: 2\nnic:\n  rnr_delay: {1: 0}\n", "rnr_delay of code 1 must be > 0"},
      {"ranks: 2\nnic:\n  rnr_delay: {1: 61s}\n", "at most 60s"},
      {"ranks: 2\nnic:\n  rnr_delay: 4ms\n", "'rnr_delay' must be a mapping"},
      {"ranks: 2\nnic:\n  rnr_tick: 2min\n", "rnr_tick"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_neq(pp_scenario_parse(bad[i][0], strlen(bad[i][0]), "t.yaml", MODELS, &s, err,
                                    sizeof(err)),
                  PP_OK, "%s", bad[i][0]);
    cr_assert(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
  }
}

Test(errors, unknown_keys)
{
  expect_error("ranks: 2\nqp:\n  rnr_retry: 3\n  foo: 1\n", PP_PARSE,
               "t.yaml:4: unknown key 'foo' in 'qp' (expected one of: min_rnr_timer, rnr_retry, "
               "timeout, retry_cnt, max_rd_atomic, mtu, sq_depth, rq_depth)");
  expect_error("ranks: 2\n\nbogus: 1\n", PP_PARSE,
               "t.yaml:3: unknown key 'bogus' at top level (expected one of: name, seed, ranks, "
               "platform, nic, protocol, workload, qp, faults, limits, ring, collective, p2p, "
               "script, test_bugs)");
  expect_error("ranks: 2\nworkload:\n  pattern: ring\n  count: 3\n", PP_PARSE,
               "t.yaml:4: unknown key 'count' in 'workload' (expected one of: kind, pattern, "
               "messages, size, interval, consume, consume_jitter, post_delay, warmup, slow_ranks, "
               "size_max, size_dist, receives, tags, window)");
  expect_error("ranks: 2\nplatform:\n  cluster:\n    latency: 1us\n    speed: 1Gf\n", PP_PARSE,
               "t.yaml:5: unknown key 'speed' in 'platform.cluster' (expected one of: bandwidth, "
               "latency)");
  expect_error("ranks: 2\nplatform: {grid: 1}\n", PP_PARSE,
               "t.yaml:2: unknown key 'grid' in 'platform' (expected one of: cluster)");
  expect_error("ranks: 2\nnic:\n  mtu: 1024\n  speed: 5\n", PP_PARSE,
               "t.yaml:4: unknown key 'speed' in 'nic' (expected one of: name, mtu, header_bytes, "
               "wqe, ack_every, ack_delay, max_qp, max_qp_wr, max_srq, max_mr, cq_depth, "
               "max_rd_atomic, train, rnr_tick, rnr_min, rc_model, line_rate, rnr_delay)");
  expect_error("ranks: 2\nfaults: {loss: 0, bogus: 1}\n", PP_PARSE,
               "t.yaml:2: unknown key 'bogus' in 'faults' (expected one of: loss, until, jitter, "
               "scramble, scramble_delay, srq_delay, qp_error_at, qp_error_host, qp_error_qp, "
               "rkey_invalidate_at, rkey_host, cq_delay, pause_ranks, pause_at, pause, order_bits, "
               "order_mask, order_window, byzantine, byzantine_rank)");
  expect_error("ranks: 2\nlimits:\n  max_time: 1s\n", PP_PARSE,
               "t.yaml:3: unknown key 'max_time' in 'limits' (expected one of: max_sim_time, no_progress, memory)");
  /* Merge keys are not special: they are unknown keys. */
  expect_prefix("ranks: 2\nqp:\n  <<: {}\n", PP_PARSE, "t.yaml:3: unknown key '<<' in 'qp'");
  /* Non-scalar keys. */
  expect_prefix("ranks: 2\n? [a]\n: 1\n", PP_PARSE, "t.yaml:2: keys must be plain words");
}

Test(errors, wrong_types)
{
  expect_error("ranks: 2\nqp:\n  rnr_retry: x\n", PP_PARSE,
               "t.yaml:3: 'rnr_retry' must be an integer 0..7, got 'x'");
  expect_error("ranks: 2\nqp:\n  rnr_retry: [7]\n", PP_PARSE,
               "t.yaml:3: 'rnr_retry' must be an integer 0..7, got a sequence");
  expect_error("ranks:\n", PP_PARSE, "t.yaml:1: 'ranks' must be an integer 1..1024, got ''");
  expect_error("ranks: 2\nqp: 5\n", PP_PARSE, "t.yaml:2: 'qp' must be a mapping, got '5'");
  expect_error("ranks: 2\nworkload: [a]\n", PP_PARSE,
               "t.yaml:2: 'workload' must be a mapping, got a sequence");
  expect_error("ranks: 2\nname: {a: 1}\n", PP_PARSE,
               "t.yaml:2: 'name' must be a string, got a mapping");
  expect_error("ranks: 2\nplatform: [a]\n", PP_PARSE,
               "t.yaml:2: 'platform' must be a file path or { cluster: { bandwidth: ..., latency: "
               "... } }, got a sequence");
  expect_error("ranks: 2\nnic: [a]\n", PP_PARSE,
               "t.yaml:2: 'nic' must be a profile file path or a mapping of profile keys, got a "
               "sequence");
  expect_error("ranks: 2\nworkload: {slow_ranks: 1}\n", PP_PARSE,
               "t.yaml:2: 'slow_ranks' must be a list of ranks such as [1, 3], got '1'");
  expect_error("ranks: 2\nworkload: {pattern: [pair]}\n", PP_PARSE,
               "t.yaml:2: 'pattern' must be one of: pair, ring, alltoall, got a sequence");
  expect_error("ranks: 2\nname: \"a\\0b\"\n", PP_PARSE,
               "t.yaml:2: 'name' must not contain control characters, got 'a?b'");
  expect_error("ranks: 2\nname: |\n  two\n  lines\n", PP_PARSE,
               "t.yaml:2: 'name' must not contain control characters, got 'two?lines?'");
  expect_error("ranks: 2\nqp: {mtu: big}\n", PP_PARSE,
               "t.yaml:2: 'mtu' must be one of 256, 512, 1024, 2048, 4096, got 'big'");
}

Test(errors, out_of_range)
{
  expect_error("ranks: 2\nqp:\n  rnr_retry: 8\n", PP_INVALID,
               "t.yaml:3: 'rnr_retry' must be an integer 0..7, got '8'");
  expect_error("ranks: -1\n", PP_INVALID, "t.yaml:1: 'ranks' must be an integer 1..1024, got '-1'");
  expect_error("ranks: 1025\n", PP_INVALID,
               "t.yaml:1: 'ranks' must be an integer 1..1024, got '1025'");
  expect_error("ranks: 99999999999999999999999999\n", PP_INVALID,
               "t.yaml:1: 'ranks' must be an integer 1..1024, got '99999999999999999999999999'");
  expect_error("seed: 18446744073709551616\nranks: 2\n", PP_INVALID,
               "t.yaml:1: 'seed' must be an integer 0..18446744073709551615, got "
               "'18446744073709551616'");
  expect_error("ranks: 2\nqp: {min_rnr_timer: 32}\n", PP_INVALID,
               "t.yaml:2: 'min_rnr_timer' must be an integer 0..31, got '32'");
  expect_error("ranks: 2\nqp: {mtu: 1000}\n", PP_INVALID,
               "t.yaml:2: 'mtu' must be one of 256, 512, 1024, 2048, 4096, got '1000'");
  expect_error("ranks: 2\nqp: {sq_depth: 0}\n", PP_INVALID,
               "t.yaml:2: 'sq_depth' must be an integer 1..16384, got '0'");
  expect_error("ranks: 2\nworkload: {messages: 10000001}\n", PP_INVALID,
               "t.yaml:2: 'messages' must be an integer 1..10000000, got '10000001'");
  expect_error("ranks: 2\nprotocol: smart\n", PP_INVALID,
               "t.yaml:2: unknown protocol 'smart' (expected one of: naive, eager, rndv, "
               "ring-credits, ring-cts); a plug-in's protocol needs --plugin PATH");
  expect_error("ranks: 2\nworkload: {pattern: star}\n", PP_INVALID,
               "t.yaml:2: unknown pattern 'star' (expected one of: pair, ring, alltoall)");
  expect_error("ranks: 2\nworkload: {slow_ranks: [2]}\n", PP_INVALID,
               "t.yaml:2: 'slow_ranks' must be an integer 0..1, got '2'");
  expect_error("ranks: 128\nworkload: {pattern: ring, slow_ranks: [3, 64]}\n", PP_INVALID,
               "t.yaml:2: 'slow_ranks' must be an integer 0..63, got '64'");
  expect_error("ranks: 2\nworkload: {slow_ranks: []}\n", PP_INVALID,
               "t.yaml:2: 'slow_ranks' must list at least one rank");
  char longname[300] = "ranks: 2\nname: ";
  memset(longname + strlen(longname), 'n', 200);
  expect_prefix(longname, PP_INVALID, "t.yaml:2: 'name' is too long (200 bytes, at most 127)");
  expect_error("ranks: 2\nname: ''\n", PP_INVALID, "t.yaml:2: 'name' must not be empty");

  struct pp_scenario sc;
  expect_ok("ranks: 4\nworkload:\n  slow_ranks: [0, 3, 3]\n", &sc);
  cr_assert_eq(sc.sim.engine.workload.consume_ranks, 0x9);
}

Test(errors, qp_against_nic)
{
  expect_error("ranks: 2\nnic: {mtu: 1024}\nqp:\n  mtu: 4096\n", PP_INVALID,
               "t.yaml:4: 'mtu' must be at most the NIC's mtu (1024), got '4096'");
  expect_error("ranks: 2\nnic: {max_rd_atomic: 4}\nqp:\n  max_rd_atomic: 8\n", PP_INVALID,
               "t.yaml:4: 'max_rd_atomic' must be at most the NIC's max_rd_atomic (4), got '8'");
  expect_error("ranks: 2\nnic: {max_qp_wr: 64}\nqp:\n  sq_depth: 128\n", PP_INVALID,
               "t.yaml:4: 'sq_depth' must be at most the NIC's max_qp_wr (64), got '128'");
  expect_error("ranks: 2\nnic: {max_qp_wr: 64}\nqp:\n  rq_depth: 65\n", PP_INVALID,
               "t.yaml:4: 'rq_depth' must be at most the NIC's max_qp_wr (64), got '65'");
  /* The checks of pp_engine_cfg_check() and pp_nic_profile_check() come back as errors too. */
  expect_prefix("ranks: 3\n", PP_INVALID, "t.yaml:1: ");
  expect_prefix("ranks: 2\nnic: {max_mr: 100000}\n", PP_INVALID, "t.yaml:2: ");
}

Test(errors, missing_files)
{
  struct pp_scenario sc;
  cr_assert_eq(pp_scenario_load("/nonexistent-dir/none.yaml", MODELS, &sc, err, sizeof err), PP_IO);
  cr_assert_str_eq(err, "/nonexistent-dir/none.yaml: cannot open: No such file or directory");
  struct pp_nic_profile p;
  cr_assert_eq(pp_nic_profile_load("/nonexistent-dir/nic.yaml", &p, err, sizeof err), PP_IO);
  cr_assert_str_eq(err, "/nonexistent-dir/nic.yaml: cannot open: No such file or directory");
  cr_assert_eq(pp_scenario_load(MODELS, MODELS, &sc, err, sizeof err), PP_IO);
  cr_assert_str_eq(err, MODELS ": cannot open: is a directory");
  /* a FIFO would block its reader: refused at the key's line, never opened for reading */
  char fifo[] = "/tmp/prepost-scenario-fifo-XXXXXX";
  cr_assert_not_null(mkdtemp(fifo));
  char path[128], text[256];
  snprintf(path, sizeof path, "%s/p", fifo);
  cr_assert_eq(mkfifo(path, 0600), 0);
  snprintf(text, sizeof text, "ranks: 2\nnic: %s\n", path);
  char want[256];
  snprintf(want, sizeof want, "t.yaml:2: nic file '%s': is a FIFO, not a regular file", path);
  expect_error(text, PP_IO, want);
  cr_assert_eq(pp_scenario_load(path, MODELS, &sc, err, sizeof err), PP_IO);
  snprintf(want, sizeof want, "%s: cannot open: is a FIFO, not a regular file", path);
  cr_assert_str_eq(err, want);
  unlink(path);
  rmdir(fifo);

  /* A relative path: next to the scenario ("." for t.yaml), then the models directory. */
  expect_error("ranks: 2\nplatform: platforms/x.xml\n", PP_IO,
               "t.yaml:2: platform file 'platforms/x.xml' not found (searched next to the "
               "scenario, then the models directory: ., " MODELS ")");
  expect_error("ranks: 2\nplatform: /nonexistent-dir/x.xml\n", PP_IO,
               "t.yaml:2: platform file '/nonexistent-dir/x.xml' not found");
  expect_error("ranks: 2\nplatform: ''\n", PP_PARSE,
               "t.yaml:2: 'platform' must be a file path or { cluster: { bandwidth: ..., latency: "
               "... } }");
  expect_error("ranks: 2\n\nnic: nics/none.yaml\n", PP_IO,
               "t.yaml:3: nic file 'nics/none.yaml' not found (searched next to the scenario, "
               "then the models directory: ., " MODELS ")");
  /* Absolute paths are used as they are. */
  expect_ok("ranks: 2\nplatform: " MODELS "/platforms/hdr-200g-2host.xml\nnic: " MODELS
            "/nics/ideal.yaml\n",
            &sc);
  cr_assert_str_eq(sc.sim.platform.file, MODELS "/platforms/hdr-200g-2host.xml");
  cr_assert_str_eq(sc.sim.nic.name, "ideal");
}

Test(errors, yaml_syntax_and_document_shape)
{
  expect_error("ranks: 2\nqp: [1, 2\n", PP_PARSE,
               "t.yaml:3: YAML syntax error: did not find expected ',' or ']' while parsing a flow "
               "sequence at line 2");
  expect_error("ranks: 2\nqp:\n  a: 1\n b: 2\n", PP_PARSE,
               "t.yaml:4: YAML syntax error: did not find expected key while parsing a block "
               "mapping at line 1");
  expect_error("ranks: 2\nname: \"abc\n", PP_PARSE,
               "t.yaml:3: YAML syntax error: found unexpected end of stream while scanning a "
               "quoted scalar at line 2");
  expect_error("", PP_PARSE, "t.yaml:1: empty scenario (expected a mapping with at least 'ranks')");
  expect_error("# only a comment\n\n", PP_PARSE,
               "t.yaml:1: empty scenario (expected a mapping with at least 'ranks')");
  expect_error("- a\n- b\n", PP_PARSE, "t.yaml:1: expected a mapping at top level, got a sequence");
  expect_error("\n\nhello\n", PP_PARSE, "t.yaml:3: expected a mapping at top level, got a scalar");
  expect_error("---\n", PP_PARSE, "t.yaml:2: expected a mapping at top level, got a scalar");
  expect_error("ranks: 2\n---\nranks: 4\n", PP_PARSE,
               "t.yaml:2: only one YAML document is allowed");
  expect_error("seed: 3\n", PP_PARSE, "t.yaml:1: missing required key 'ranks'");
  expect_error("ranks: 2\nranks: 4\n", PP_PARSE,
               "t.yaml:2: duplicate key 'ranks' at top level (first given at line 1)");
  expect_error("ranks: &r 2\nseed: *r\n", PP_PARSE,
               "t.yaml:2: aliases (*name) are not supported: write the value out");
  /* An anchor alone is harmless. */
  struct pp_scenario sc;
  expect_ok("ranks: &r 2\n", &sc);
  /* Control characters, NUL included, are rejected by libyaml's reader with their line. */
  expect_prefix_n("ranks: 2\nseed: 1\0\n", 17, PP_PARSE,
                  "t.yaml:2: YAML syntax error: control characters");
  expect_prefix("ranks: 2\x01\n", PP_PARSE, "t.yaml:1: YAML syntax error: control characters");
  expect_prefix("ranks: \xff\n", PP_PARSE, "t.yaml:1: YAML syntax error: invalid");
}

Test(errors, nic_file_errors_name_the_nic_file)
{
  char dir[] = "/tmp/pp-scenario-XXXXXX";
  cr_assert(mkdtemp(dir));
  char nic[128], scen[256], want[1024];
  snprintf(nic, sizeof nic, "%s/bad-nic.yaml", dir);
  scratch_write(nic, "name: bad\n# the next line is wrong\nmtu: 1000\n");

  struct pp_nic_profile p;
  memset(&p, 0, sizeof p);
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_INVALID);
  snprintf(want, sizeof want, "%s:3: 'mtu' must be one of 256, 512, 1024, 2048, 4096, got '1000'",
           nic);
  cr_assert_str_eq(err, want);
  cr_assert_str_eq(p.name, "", "the profile is left alone on error");

  /* Through a scenario that names the file: the message still points into the NIC file. */
  snprintf(scen, sizeof scen, "ranks: 2\nnic: %s\n", nic);
  struct pp_scenario sc;
  cr_assert_eq(parse(scen, &sc), PP_INVALID);
  cr_assert_str_eq(err, want);

  scratch_write(nic, "mtu: 2048\nwqe: 1us\nack_every: 0\n");
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_INVALID);
  snprintf(want, sizeof want, "%s:3: 'ack_every' must be an integer 1..4294967295, got '0'", nic);
  cr_assert_str_eq(err, want);

  scratch_write(nic, "mtu: 2048\nwqe: 1us\nacks: 3\n");
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_PARSE);
  snprintf(want, sizeof want,
           "%s:3: unknown key 'acks' in the NIC profile (expected one of: name, mtu, "
           "header_bytes, wqe, ack_every, ack_delay, max_qp, max_qp_wr, max_srq, max_mr, "
           "cq_depth, max_rd_atomic, train, rnr_tick, rnr_min, rc_model, line_rate, rnr_delay)",
           nic);
  cr_assert_str_eq(err, want);

  /* A profile without a name is named after its file; missing keys keep the defaults. */
  scratch_write(nic, "mtu: 2048\nwqe: 1us\n");
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_OK, "%s", err);
  struct pp_nic_profile def;
  pp_nic_profile_default(&def);
  cr_assert_str_eq(p.name, "bad-nic");
  cr_assert_eq(p.mtu, 2048);
  cr_assert_eq(p.wqe_ns, 1000);
  cr_assert_eq(p.header_bytes, def.header_bytes);
  cr_assert_eq(p.max_qp_wr, def.max_qp_wr);

  scratch_write(nic, "- 1\n");
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_PARSE);
  snprintf(want, sizeof want, "%s:1: expected a mapping at top level, got a sequence", nic);
  cr_assert_str_eq(err, want);

  scratch_write(nic, "");
  cr_assert_eq(pp_nic_profile_load(nic, &p, err, sizeof err), PP_PARSE);
  snprintf(want, sizeof want, "%s:1: empty NIC profile (expected a mapping of profile keys)", nic);
  cr_assert_str_eq(err, want);

  unlink(nic);
  rmdir(dir);
}

Test(errors, error_buffer_handling)
{
  struct pp_scenario sc;
  pp_scenario_defaults(&sc);
  snprintf(sc.sim.name, sizeof sc.sim.name, "%s", "untouched");
  char small[8];
  memset(small, 'X', sizeof small);
  cr_assert_eq(pp_scenario_parse("ranks: x", 8, "t.yaml", MODELS, &sc, small, sizeof small),
               PP_PARSE);
  cr_assert_str_eq(small, "t.yaml:");
  cr_assert_str_eq(sc.sim.name, "untouched", "the scenario is left alone on error");
  cr_assert_eq(pp_scenario_parse("ranks: x", 8, "t.yaml", MODELS, &sc, NULL, 0), PP_PARSE);
  cr_assert_eq(pp_scenario_parse(NULL, 0, "t.yaml", MODELS, &sc, err, sizeof err), PP_PARSE);
  cr_assert_eq(pp_scenario_parse("ranks: 2", 8, "t.yaml", MODELS, NULL, err, sizeof err),
               PP_INVALID);
  /* Without a models dir, relative paths are taken from the scenario's directory only. */
  cr_assert_eq(pp_scenario_parse("ranks: 2\nnic: nics/ideal.yaml", 29, "t.yaml", NULL, &sc, err,
                                 sizeof err),
               PP_IO);
  cr_assert_str_eq(err, "t.yaml:2: nic file 'nics/ideal.yaml' not found (searched next to the "
                        "scenario: .)");
  /* Without a scenario file, the models dir only. */
  cr_assert_eq(pp_scenario_parse("ranks: 2\nnic: nics/none.yaml", 28, NULL, MODELS, &sc, err,
                                 sizeof err),
               PP_IO);
  cr_assert_str_eq(err, "<scenario>:2: nic file 'nics/none.yaml' not found (searched the models "
                        "directory: " MODELS ")");
}

/* ------------------------------------------------------------------------------------------ */

/* Parse must either succeed with an empty message or fail with a known status and a message
 * that names a file. */
static void check_outcome(enum pp_status st, const char *what, size_t at)
{
  if (st == PP_OK) {
    cr_assert_str_eq(err, "", "%s @%zu", what, at);
    return;
  }
  cr_assert(st == PP_PARSE || st == PP_INVALID || st == PP_IO, "%s @%zu: status %s", what, at,
            pp_status_name(st));
  cr_assert(memchr(err, '\0', sizeof err), "%s @%zu: message not terminated", what, at);
  cr_assert(strncmp(err, "t.yaml:", 7) == 0 || strncmp(err, MODELS, strlen(MODELS)) == 0,
            "%s @%zu: '%s'", what, at, err);
}

Test(hostile, truncations_of_every_shipped_scenario)
{
  static const char *const names[] = {"rnr-slow-consumer", "ring-64", "hdr-pair", "lossy"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char path[PP_PATH_MAX];
    snprintf(path, sizeof path, "%s/scenarios/%s.yaml", MODELS, names[k]);
    size_t len;
    char *text = scratch_slurp(path, &len);
    int ok = 0;
    for (size_t cut = 0; cut <= len; cut++) {
      struct pp_scenario sc;
      enum pp_status st = parse_n(text, cut, &sc);
      check_outcome(st, names[k], cut);
      ok += st == PP_OK;
    }
    /* The whole file parses, the empty prefix does not. */
    struct pp_scenario sc;
    cr_assert_eq(parse_n(text, len, &sc), PP_OK, "%s", err);
    cr_assert_eq(parse_n(text, 0, &sc), PP_PARSE);
    cr_assert_gt(ok, 0);
    free(text);
  }
}

Test(hostile, byte_substitutions)
{
  size_t len;
  char *text = scratch_slurp(MODELS "/scenarios/rnr-slow-consumer.yaml", &len);
  static const char subst[] = {'\0', ':', '[', '{', '&', '*', '-', '"', '\'', '\t', '9', '\xff'};
  char *mut = malloc(len);
  cr_assert(mut);
  for (size_t i = 0; i < len; i++)
    for (size_t s = 0; s < sizeof subst; s++) {
      memcpy(mut, text, len);
      mut[i] = subst[s];
      struct pp_scenario sc;
      check_outcome(parse_n(mut, len, &sc), "substitution", i);
    }
  free(mut);
  free(text);
}

Test(hostile, odd_documents)
{
  static const char *const inputs[] = {
      "\0",
      ":",
      "[",
      "{",
      "]",
      "}}}}",
      "&a",
      "*a",
      "&a [*a, *a]",
      "a: &a [*a]",
      "!!binary aGVsbG8=",
      "ranks: !!int 2",
      "ranks: !custom 2",
      "%YAML 1.1\n---\nranks: 2\n",
      "%YAML 9.9\n---\nranks: 2\n",
      "%TAG ! tag:x,2000:\n---\nranks: 2\n",
      "\xef\xbb\xbfranks: 2\n",
      "\xff\xfer\0a\0n\0k\0s\0:\0 \0002\0",
      "\xfe\xff\0r",
      "ranks: 2\n...\n",
      "ranks: 2\nqp:\n  - 1\n",
      "ranks: 2\nworkload:\n  slow_ranks: [[1]]\n",
      "ranks: 2\nworkload:\n  slow_ranks: [{a: 1}]\n",
      "ranks: 2\nworkload:\n  slow_ranks: [-1]\n",
      "ranks: 2\nnic: {name: \"\\0\"}\n",
      "ranks: 2\nnic:\n",
      "ranks: 2\nplatform: {cluster: [1]}\n",
      "ranks: 2\nplatform: {}\n",
      "ranks: 1\nworkload: {pattern: ring}\n",
      "ranks: 0\n",
      "ranks: 2\nqp: {sq_depth: 16384, rq_depth: 16384}\nworkload: {size: 1GiB}\n",
      "ranks: 1e3\n",
      "ranks: 2\nseed: -18446744073709551616\n",
      "ranks: 2\nworkload: {interval: 99999999999999999999999999999999999999999999ms}\n",
      "ranks: 2\nworkload: {interval: 1.99999999999999999999999999999999999999s}\n",
      "ranks: 2\nfaults: {loss: 0.00000000000000000000000000000000000000000000000001}\n",
      "ranks: 2\nfaults: {loss: 00000000000000000000000000000000000000000000000000000000000.1}\n",
      "? ranks\n",
      "ranks: 2\n? name\n",
      "ranks: 2\n\"name\": x\n",
      "ranks: 2\nname: |\n  multi\n  line\n",
      "'ranks': 2\n'ranks': 3\n",
      "ranks: 2 # comment\n",
  };
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    struct pp_scenario sc;
    size_t len = strlen(inputs[i]);
    if (i == 0)
      len = 1;
    if (inputs[i][0] == '\xff')
      len = 18;
    if (inputs[i][0] == '\xfe')
      len = 4;
    check_outcome(parse_n(inputs[i], len, &sc), inputs[i], i);
  }
  /* The ones that must parse. */
  struct pp_scenario sc;
  expect_ok("%YAML 1.1\n---\nranks: 2\n", &sc);
  expect_ok("\xef\xbb\xbfranks: 2\n", &sc);
  expect_ok("ranks: 2\n\"name\": x\n", &sc);
  cr_assert_str_eq(sc.sim.name, "x");
  expect_ok("ranks: 2 # comment\n", &sc);
  cr_assert_eq(parse_n("\xff\xfer\0a\0n\0k\0s\0:\0 \0002\0", 18, &sc), PP_OK, "%s", err);
  cr_assert_eq(sc.sim.engine.nranks, 2);
  /* And ones that must not. */
  expect_prefix("ranks: 2\nqp:\n  - 1\n", PP_PARSE, "t.yaml:3: 'qp' must be a mapping");
  expect_prefix("ranks: 0\n", PP_INVALID, "t.yaml:1: 'ranks' must be an integer 1..1024");
}

Test(hostile, deep_nesting_and_big_inputs)
{
  size_t n = 200000;
  char *deep = malloc(2 * n + 16);
  cr_assert(deep);
  memcpy(deep, "ranks: ", 7);
  memset(deep + 7, '[', n);
  memset(deep + 7 + n, ']', n);
  expect_prefix_n(deep, 7 + 2 * n, PP_PARSE, "t.yaml:1: nesting deeper than 64 levels");
  /* Block nesting too. */
  size_t o = 0;
  for (int d = 0; d < 100 && o + 300 < 2 * n; d++) {
    memset(deep + o, ' ', (size_t)d);
    o += (size_t)d;
    memcpy(deep + o, "k:\n", 3);
    o += 3;
  }
  expect_prefix_n(deep, o, PP_PARSE, "t.yaml:65: nesting deeper than 64 levels");
  free(deep);

  /* A long scalar (bounded copies) and a long key. */
  size_t big = 512 * 1024;
  char *s = malloc(big + 64);
  cr_assert(s);
  o = (size_t)sprintf(s, "ranks: 2\nname: ");
  memset(s + o, 'a', big);
  expect_prefix_n(s, o + big, PP_INVALID,
                  "t.yaml:2: 'name' is too long (524288 bytes, at most 127), got 'aaaa");
  o = (size_t)sprintf(s, "ranks: 2\n");
  memset(s + o, 'k', 1000);
  memcpy(s + o + 1000, ": 1\n", 4);
  expect_prefix_n(s, o + 1004, PP_PARSE,
                  "t.yaml:2: unknown key '"
                  "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...' at top level");
  free(s);
  /* Too big, too many values. */
  char *huge = malloc((1 << 20) + 2);
  cr_assert(huge);
  memset(huge, '#', (1 << 20) + 1);
  expect_prefix_n(huge, (1 << 20) + 1, PP_INVALID, "t.yaml: input is larger than 1048576 bytes");
  o = (size_t)sprintf(huge, "ranks: 2\nx: [");
  for (int i = 0; i < 100001; i++)
    o += (size_t)sprintf(huge + o, "0,");
  huge[o++] = ']';
  expect_prefix_n(huge, o, PP_INVALID, "t.yaml:2: more than 100000 values in one document");
  free(huge);
  /* Many keys: duplicates are found whatever their number. */
  size_t cap = 200000;
  char *many = malloc(cap);
  cr_assert(many);
  o = (size_t)sprintf(many, "ranks: 2\nqp:\n");
  for (int i = 0; i < 2000; i++)
    o += (size_t)sprintf(many + o, "  rq_depth: %d\n", i + 1);
  {
    struct pp_scenario sc;
    cr_assert_eq(parse_n(many, o, &sc), PP_PARSE);
    cr_assert_str_eq(err, "t.yaml:4: duplicate key 'rq_depth' in 'qp' (first given at line 3)");
  }
  free(many);
}

/* ------------------------------------------------------------------------------------------ */
/* The ring protocols and the collective workload: workload.kind, sections ring and collective */

Test(ring_keys, defaults)
{
  struct pp_scenario sc;
  expect_ok("ranks: 2\n", &sc);
  const struct pp_engine_cfg *e = &sc.sim.engine;
  cr_assert_eq(e->workload.kind, PP_WORKLOAD_STREAM);
  /* the ring protocols' and the collective's defaults, once they are chosen */
  expect_ok("ranks: 2\nprotocol: ring-cts\nworkload: {kind: collective}\n", &sc);
  cr_assert_eq(pp_ring_params_of(e)->slots, 8);
  cr_assert_eq(pp_ring_params_of(e)->slot_size, 128 * 1024);
  cr_assert_eq(pp_ring_params_of(e)->channels, 1);
  cr_assert_eq(pp_ring_params_of(e)->credit_batch, 1);
  cr_assert_eq(pp_ring_params_of(e)->credit_idle_ns, 0);
  cr_assert_eq(pp_coll_params_of(e)->op, PP_COLL_ALLREDUCE);
  cr_assert_eq(pp_coll_params_of(e)->dtype, PP_DTYPE_F32);
  cr_assert_eq(pp_coll_params_of(e)->bytes, 1 << 20);
  cr_assert_eq(pp_coll_params_of(e)->iterations, 1);
  cr_assert_eq(pp_coll_params_of(e)->warmup, 0);
  cr_assert_eq(pp_coll_params_of(e)->chunk, 128 * 1024);
  cr_assert_eq(pp_coll_params_of(e)->window, 4);
  cr_assert_eq(pp_coll_params_of(e)->slow_ranks, 0);
  cr_assert(pp_coll_params_of(e)->check);
}

Test(ring_keys, every_key)
{
  struct pp_scenario sc;
  expect_ok("ranks: 5\n"
            "protocol: ring-cts\n"
            "workload:\n"
            "  kind: collective\n"
            "ring:\n"
            "  slots: 16\n"
            "  slot_size: 64KiB\n"
            "  channels: 3\n"
            "  credit_batch: 4\n"
            "  credit_idle: 2us\n"
            "collective:\n"
            "  op: allgather\n"
            "  datatype: int64\n"
            "  size: 40KiB\n"
            "  iterations: 9\n"
            "  warmup: 2\n"
            "  root: 4\n"
            "  chunk: 8KiB\n"
            "  window: 6\n"
            "  compute: 1.5us\n"
            "  slow_ranks: [1, 3]\n"
            "  slow_compute: 30us\n"
            "  slow_from: 3\n"
            "  slow_until: 6\n"
            "  check: false\n",
            &sc);
  const struct pp_engine_cfg *e = &sc.sim.engine;
  cr_assert_eq(e->protocol, PP_PROTO_RING_CTS);
  cr_assert_eq(e->workload.kind, PP_WORKLOAD_COLLECTIVE);
  cr_assert_eq(e->workload.pattern, PP_PATTERN_RING, "a collective runs on a ring");
  cr_assert_eq(pp_ring_params_of(e)->slots, 16);
  cr_assert_eq(pp_ring_params_of(e)->slot_size, 64 * 1024);
  cr_assert_eq(pp_ring_params_of(e)->channels, 3);
  cr_assert_eq(pp_ring_params_of(e)->credit_batch, 4);
  cr_assert_eq(pp_ring_params_of(e)->credit_idle_ns, 2000);
  cr_assert_eq(pp_coll_params_of(e)->op, PP_COLL_ALLGATHER);
  cr_assert_eq(pp_coll_params_of(e)->dtype, PP_DTYPE_I64);
  cr_assert_eq(pp_coll_params_of(e)->bytes, 40 * 1024);
  cr_assert_eq(pp_coll_params_of(e)->iterations, 9);
  cr_assert_eq(pp_coll_params_of(e)->warmup, 2);
  cr_assert_eq(pp_coll_params_of(e)->root, 4);
  cr_assert_eq(pp_coll_params_of(e)->chunk, 8 * 1024);
  cr_assert_eq(pp_coll_params_of(e)->window, 6);
  cr_assert_eq(pp_coll_params_of(e)->compute_ns, 1500);
  cr_assert_eq(pp_coll_params_of(e)->slow_ranks, (1u << 1) | (1u << 3));
  cr_assert_eq(pp_coll_params_of(e)->slow_compute_ns, 30000);
  cr_assert_eq(pp_coll_params_of(e)->slow_from, 3);
  cr_assert_eq(pp_coll_params_of(e)->slow_until, 6);
  cr_assert_not(pp_coll_params_of(e)->check);
  /* slow ranks without a window are slow throughout */
  expect_ok("ranks: 3\nworkload: {kind: collective}\n"
            "collective: {slow_ranks: [2], slow_compute: 1us, check: true}\n",
            &sc);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->slow_from, 0);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->slow_until, PP_COLL_MAX_ITERATIONS);
  cr_assert(pp_coll_params_of(&sc.sim.engine)->check);
  /* an explicit pattern stays; the stream workload keeps its default pattern */
  expect_ok("ranks: 2\nworkload: {kind: collective, pattern: pair}\n", &sc);
  cr_assert_eq(sc.sim.engine.workload.pattern, PP_PATTERN_PAIR);
  expect_ok("ranks: 2\nprotocol: ring-credits\nworkload: {kind: stream}\nring:\n", &sc);
  cr_assert_eq(sc.sim.engine.workload.kind, PP_WORKLOAD_STREAM);
  cr_assert_eq(sc.sim.engine.workload.pattern, PP_PATTERN_PAIR);
  cr_assert_eq(sc.sim.engine.protocol, PP_PROTO_RING_CREDITS);
}

Test(ring_keys, errors)
{
  expect_error("ranks: 2\nring:\n  slot: 4\n", PP_PARSE,
               "t.yaml:3: unknown key 'slot' in 'ring' (expected one of: slots, slot_size, "
               "channels, credit_batch, credit_idle)");
  expect_error("ranks: 2\nring: 8\n", PP_PARSE, "t.yaml:2: 'ring' must be a mapping, got '8'");
  expect_error("ranks: 2\nring:\n  slots: 0\n", PP_INVALID,
               "t.yaml:3: 'slots' must be an integer 1..4096, got '0'");
  expect_error("ranks: 2\nring:\n  channels: 9\n", PP_INVALID,
               "t.yaml:3: 'channels' must be an integer 1..8, got '9'");
  expect_error("ranks: 2\nring:\n  slot_size: 2GiB\n", PP_INVALID,
               "t.yaml:3: 'slot_size' must be a size 1..1073741824 bytes, got '2GiB'");
  expect_error("ranks: 2\nring:\n  credit_idle: soon\n", PP_PARSE,
               "t.yaml:3: 'credit_idle' must be a duration such as 500ns, 2us, 1.5ms or 10s (a "
               "bare integer is ns), got 'soon'");
  expect_error("ranks: 2\nring:\n  slots: 4\n  credit_batch: 5\n", PP_INVALID,
               "t.yaml:3: ring credit_batch must be 1..slots (4), got 5");
  expect_error("ranks: 2\nring: {slots: 4096, slot_size: 1MiB}\n", PP_INVALID,
               "t.yaml:2: ring channels * slots * slot_size = 4294967296 bytes exceeds "
               "2147483648");
  expect_prefix("ranks: 2\nworkload:\n  kind: batch\n", PP_INVALID,
                "t.yaml:3: unknown kind 'batch' (expected one of: stream, ");
  expect_error("ranks: 2\ncollective:\n  op: alltoall\n", PP_INVALID,
               "t.yaml:3: unknown op 'alltoall' (expected one of: allreduce, allgather, "
               "broadcast)");
  expect_error("ranks: 2\ncollective:\n  datatype: float16\n", PP_INVALID,
               "t.yaml:3: unknown datatype 'float16' (expected one of: float32, float64, int32, "
               "int64)");
  expect_error("ranks: 2\ncollective:\n  check: maybe\n", PP_PARSE,
               "t.yaml:3: 'check' must be true or false, got 'maybe'");
  expect_error("ranks: 2\ncollective:\n  slow_ranks: 1\n", PP_PARSE,
               "t.yaml:3: 'slow_ranks' must be a list of ranks such as [1, 3], got '1'");
  expect_error("ranks: 2\ncollective:\n  slow_ranks: []\n", PP_INVALID,
               "t.yaml:3: 'slow_ranks' must list at least one rank");
  expect_error("ranks: 2\ncollective:\n  slow_ranks: [2]\n", PP_INVALID,
               "t.yaml:3: 'slow_ranks' must be an integer 0..1, got '2'");
  expect_error("ranks: 2\ncollective:\n  root: 2\n", PP_INVALID,
               "t.yaml:3: 'root' must be an integer 0..1, got '2'");
  expect_error("ranks: 3\ncollective:\n  op: allgather\n  size: 4KiB\n", PP_INVALID,
               "t.yaml:3: allgather size must split into 3 equal blocks of whole elements, got "
               "4096 bytes");
  expect_error("ranks: 2\ncollective:\n  datatype: float64\n  size: 100\n", PP_INVALID,
               "t.yaml:3: collective size must be a multiple of the float64 size (8 bytes) in "
               "8..1073741824, got 100");
  expect_error("ranks: 2\ncollective:\n  chunk: 6\n", PP_INVALID,
               "t.yaml:3: collective chunk must be a multiple of the float32 size (4 bytes) in "
               "4..1073741824, got 6");
  expect_error("ranks: 2\ncollective:\n  iterations: 3\n  warmup: 3\n", PP_INVALID,
               "t.yaml:3: collective warmup must be below iterations (3), got 3");
  expect_error("ranks: 2\ncollective:\n  slow_from: 5\n  slow_until: 4\n", PP_INVALID,
               "t.yaml:3: collective slow_from (5) must not be after slow_until (4)");
  expect_error("ranks: 2\ncollective:\n  iterations: 0\n", PP_INVALID,
               "t.yaml:3: 'iterations' must be an integer 1..1000000, got '0'");
  expect_error("ranks: 3\nworkload: {kind: collective, pattern: pair}\n", PP_INVALID,
               "t.yaml:1: invalid scenario: pattern 'pair' needs an even number of ranks, got 3");
}

Test(ring_keys, shipped_ring_scenarios)
{
  struct pp_scenario sc;
  load_scenario("rnr-slow-consumer-ring", &sc);
  cr_assert_eq(sc.sim.engine.protocol, PP_PROTO_RING_CREDITS);
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 0, "any RNR would be fatal");
  cr_assert_eq(sc.sim.engine.workload.consume_ns, 100000, "the same consumer as the naive run");
  cr_assert_eq(sc.sim.engine.qp.rq_depth, 8);
  cr_assert_eq(sc.sim.engine.workload.messages, 200);
  load_scenario("ring-allreduce-2-64m", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 2);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->bytes, 64u << 20);
  cr_assert_eq(sc.sim.engine.workload.kind, PP_WORKLOAD_COLLECTIVE);
  load_scenario("ring-allreduce-8-1m", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 8);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->bytes, 1u << 20);
  load_scenario("ring-allreduce-64-4k", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 64);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->bytes, 4096);
  load_scenario("ring-slow-rank", &sc);
  cr_assert_eq(sc.sim.engine.nranks, 8);
  cr_assert_eq(pp_coll_params_of(&sc.sim.engine)->slow_ranks, 1u << 3);
  cr_assert_lt(pp_coll_params_of(&sc.sim.engine)->slow_from, pp_coll_params_of(&sc.sim.engine)->slow_until);
  cr_assert_gt(pp_coll_params_of(&sc.sim.engine)->iterations, pp_coll_params_of(&sc.sim.engine)->slow_until, "it recovers");
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Relative platform: and nic: paths: next to the scenario first, then the models directory    */

Test(paths, relative_model_paths_resolve_next_to_the_scenario_first)
{
  char dir[] = "/tmp/prepost-scn-XXXXXX", path[64], nics[64], prof[128];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(nics, sizeof nics, "%s/nics", dir);
  cr_assert_eq(mkdir(nics, 0700), 0);
  /* the same relative name as a shipped profile (nics/ideal.yaml): the scenario's own wins */
  snprintf(prof, sizeof prof, "%s/ideal.yaml", nics);
  scratch_write(prof, "name: mine\nmtu: 1024\n");
  snprintf(path, sizeof path, "%s/s.yaml", dir);
  scratch_write(path, "ranks: 2\nnic: nics/ideal.yaml\nplatform: platforms/hdr-200g-2host.xml\n");
  static struct pp_scenario sc;
  cr_assert_eq(pp_scenario_load(path, MODELS, &sc, err, sizeof err), PP_OK, "%s", err);
  cr_assert_str_eq(sc.sim.nic.name, "mine");
  cr_assert_eq(sc.sim.nic.mtu, 1024);
  /* not next to it: the models directory's */
  cr_assert_str_eq(sc.sim.platform.file, MODELS "/platforms/hdr-200g-2host.xml");
  /* neither: both directories named */
  scratch_write(path, "ranks: 2\nplatform: platforms/nope.xml\n");
  cr_assert_eq(pp_scenario_load(path, MODELS, &sc, err, sizeof err), PP_IO);
  char want[1024];
  snprintf(want, sizeof want,
           "%s:2: platform file 'platforms/nope.xml' not found (searched next to the scenario, "
           "then the models directory: %s, %s)",
           path, dir, MODELS);
  cr_assert_str_eq(err, want);
  unlink(path);
  unlink(prof);
  rmdir(nics);
  rmdir(dir);
}

/* ------------------------------------------------------------------------------------------ */
/* --set KEY=VALUE over a scenario file                                                        */

Test(set, assignments_are_scenario_text_checked_as_the_file)
{
  char dir[] = "/tmp/prepost-set-XXXXXX", path[256];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/s.yaml", dir);
  scratch_write(path, "ranks: 2\nprotocol: eager\nqp:\nlimits: {no_progress: 1s}\n");
  static struct pp_scenario sc;
  const char *sets[] = {"ranks=16",          "qp.rnr_retry=3",       "p2p.eager_limit=8KiB",
                        "limits.no_progress=2500", "workload.slow_ranks=[1, 3]",
                        "platform.cluster.latency=2us", "ranks=8"};
  cr_assert_eq(pp_scenario_load_set(path, MODELS, sets, 7, &sc, err, sizeof err), PP_OK, "%s",
               err);
  cr_assert_eq(sc.sim.engine.nranks, 8, "the later assignment wins");
  cr_assert_eq(sc.sim.engine.qp.rnr_retry, 3, "an empty 'qp:' becomes a mapping");
  cr_assert_eq(pp_p2p_params_of(&sc.sim.engine)->eager_limit, 8192);
  cr_assert_eq(sc.sim.no_progress_ns, 2500, "a bare integer is ns, as in the file");
  cr_assert_eq(sc.sim.engine.workload.consume_ranks, (1u << 1) | (1u << 3));
  cr_assert_eq(sc.sim.platform.latency_ns, 2000);
  const struct {
    const char *set, *msg;
  } bad[] = {
      {"qp.rnr_retry=8", "--set qp.rnr_retry=8: 'rnr_retry' must be an integer 0..7, got '8'"},
      {"frob=1", "--set frob=1: unknown key 'frob' at top level (expected one of:"},
      {"protocol.x=1", "--set protocol.x=1: 'protocol' is not a mapping in the scenario (line 2)"},
      {"=1", "--set =1: --set wants KEY=VALUE or SECTION.KEY=VALUE"},
      {"qp..x=1", "--set qp..x=1: --set wants KEY=VALUE or SECTION.KEY=VALUE"},
      {"ranks", "--set ranks: --set wants KEY=VALUE or SECTION.KEY=VALUE"},
      {"workload.size=[1", "--set workload.size=[1: YAML syntax error"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_neq(pp_scenario_load_set(path, MODELS, &bad[i].set, 1, &sc, err, sizeof err), PP_OK,
                  "%s", bad[i].set);
    char want[512];
    snprintf(want, sizeof want, "%s: %s", path, bad[i].msg);
    cr_assert(!strncmp(err, want, strlen(want)), "%s:\n%s\nwanted\n%s", bad[i].set, err, want);
  }
  /* an empty file, all from --set */
  scratch_write(path, "");
  const char *only[] = {"ranks=4"};
  cr_assert_eq(pp_scenario_load_set(path, MODELS, only, 1, &sc, err, sizeof err), PP_OK, "%s",
               err);
  cr_assert_eq(sc.sim.engine.nranks, 4);
  unlink(path);
  rmdir(dir);
}

/* ------------------------------------------------------------------------------------------ */
/* The field tables of the built-in sections (prepost/param.h)                                */

Test(tables, built_in_tables_are_valid_and_their_defaults_are_the_scenario_defaults)
{
  static struct pp_scenario sc;
  pp_scenario_defaults(&sc);
  struct pp_engine_cfg *e = &sc.sim.engine;
  /* each module's parameters at the defaults its protocol or workload starts from */
  struct pp_traffic traffic = {0};
  struct pp_p2p_params p2p;
  struct pp_ring_params ring;
  struct pp_coll_params coll;
  pp_p2p_params_default(&p2p);
  pp_ring_params_default(&ring);
  pp_coll_params_default(&coll);
  const struct {
    const char *name;
    const struct pp_param *t;
    size_t n, size;
    const void *obj;
  } tabs[] = {
      {"qp", pp_qp_param_table, pp_qp_param_count, sizeof e->qp, &e->qp},
      {"workload", pp_workload_param_table, pp_workload_param_count, sizeof e->workload,
       &e->workload},
      {"traffic", pp_traffic_param_table, pp_traffic_param_count, sizeof(struct pp_traffic),
       &traffic},
      {"p2p", pp_p2p_param_table, pp_p2p_param_count, sizeof(struct pp_p2p_params), &p2p},
      {"ring", pp_ring_param_table, pp_ring_param_count, sizeof(struct pp_ring_params), &ring},
      {"collective", pp_coll_param_table, pp_coll_param_count, sizeof(struct pp_coll_params),
       &coll},
      {"nic", pp_nic_param_table, pp_nic_param_count, sizeof sc.sim.nic, &sc.sim.nic},
      {"limits", pp_limits_param_table, pp_limits_param_count, sizeof sc.sim, &sc.sim},
      {"faults", pp_faults_param_table, pp_faults_param_count, sizeof sc.sim.faults,
       &sc.sim.faults},
  };
  for (size_t i = 0; i < sizeof tabs / sizeof tabs[0]; i++) {
    char why[256];
    cr_assert(pp_params_valid(tabs[i].t, tabs[i].n, tabs[i].size, why, sizeof why), "%s: %s",
              tabs[i].name, why);
    for (size_t k = 0; k < tabs[i].n; k++) {
      const struct pp_param *p = &tabs[i].t[k];
      cr_assert_eq(pp_param_get(p, tabs[i].obj), p->def, "%s.%s: the table says %llu",
                   tabs[i].name, p->key, (unsigned long long)p->def);
      cr_assert(p->doc && *p->doc, "%s.%s has a sentence", tabs[i].name, p->key);
    }
    /* every key of the table is a key the section accepts: the parser reads it */
    for (size_t k = 0; k < tabs[i].n; k++) {
      char text[256], fmt[64];
      const struct pp_param *p = &tabs[i].t[k];
      pp_param_format_default(p, fmt, sizeof fmt);
      if (!strcmp(fmt, "derived") || !strcmp(p->key, "root") || p->kind == PP_PARAM_RANKS)
        continue; /* a rank set's default, none, is no list a scenario may give */
      const char *sec = !strcmp(tabs[i].name, "traffic") ? "workload" : tabs[i].name;
      snprintf(text, sizeof text, "ranks: 2\nprotocol: eager\n%s:\n  %s: %s\n", sec, p->key, fmt);
      cr_assert_eq(parse(text, &sc), PP_OK, "%s%s", text, err);
    }
  }
}

Test(tables, canonical_text_reads_back_through_the_parser)
{
  static struct pp_scenario sc;
  cr_assert_eq(parse("ranks: 2\nprotocol: ring-cts\nring: {slot_size: 65536, credit_idle: 1500}\n"
                     "limits: {max_sim_time: 2000000000, memory: 4194304}\n",
                     &sc),
               PP_OK, "%s", err);
  char text[512];
  size_t at = (size_t)snprintf(text, sizeof text, "ranks: 2\nprotocol: ring-cts\nring:\n");
  for (size_t k = 0; k < pp_ring_param_count; k++) {
    char v[64];
    pp_param_format(&pp_ring_param_table[k], pp_ring_params_of(&sc.sim.engine), v, sizeof v);
    at += (size_t)snprintf(text + at, sizeof text - at, "  %s: %s\n", pp_ring_param_table[k].key,
                           v);
  }
  cr_assert(strstr(text, "slot_size: 64KiB\n") && strstr(text, "credit_idle: 1500ns\n"), "%s",
            text);
  struct pp_ring_params before = *pp_ring_params_of(&sc.sim.engine);
  cr_assert_eq(parse(text, &sc), PP_OK, "%s%s", text, err);
  cr_assert_eq(memcmp(&before, pp_ring_params_of(&sc.sim.engine), sizeof before), 0, "%s", text);
}

/* Every section takes its keys from its field tables (pp_scenario_section_table: the module's
 * own, and the parser's for the keys it reads itself, composites such as nic.rnr_delay among
 * them): each table key is accepted (an unknown key's message lists the section's keys, in table
 * order, and no other) and `help keys` lists each with its sentence, so a key added to a table
 * needs no second list anywhere. */
Test(tables, sections_take_their_keys_from_their_tables)
{
  const struct {
    const char *section, *text; /* text: the section's head, then "no_such_key: 1" */
    unsigned line;               /* of that key */
    const char *where;
    const struct pp_param *has[3]; /* module tables that must be among the section's */
  } secs[] = {
      {NULL, "ranks: 2\n", 2, "at top level", {NULL}},
      {"workload", "ranks: 2\nworkload:\n  ", 3, "in 'workload'",
       {pp_workload_param_table, pp_traffic_param_table}},
      {"qp", "ranks: 2\nqp:\n  ", 3, "in 'qp'", {pp_qp_param_table}},
      {"p2p", "ranks: 2\nprotocol: eager\np2p:\n  ", 4, "in 'p2p'", {pp_p2p_param_table}},
      {"ring", "ranks: 2\nring:\n  ", 3, "in 'ring'", {pp_ring_param_table}},
      {"collective", "ranks: 2\ncollective:\n  ", 3, "in 'collective'", {pp_coll_param_table}},
      {"faults", "ranks: 2\nfaults:\n  ", 3, "in 'faults'", {pp_faults_param_table}},
      {"limits", "ranks: 2\nlimits:\n  ", 3, "in 'limits'", {pp_limits_param_table}},
      {"nic", "ranks: 2\nnic:\n  ", 3, "in 'nic'", {pp_nic_param_table}},
      {"platform", "ranks: 2\nplatform:\n  ", 3, "in 'platform'", {NULL}},
      {"platform.cluster", "ranks: 2\nplatform:\n  cluster:\n    ", 4, "in 'platform.cluster'",
       {pp_cluster_param_table}},
  };
  char *help = NULL;
  size_t helplen = 0;
  FILE *hf = open_memstream(&help, &helplen);
  cr_assert(hf);
  pp_scenario_print_keys(hf);
  cr_assert_eq(fclose(hf), 0);
  const char *at = help; /* the sections and their keys, in this order */
  for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
    const char *name = secs[i].section ? secs[i].section : "top level";
    char text[256], msg[1024], line[128];
    snprintf(text, sizeof text, "%sno_such_key: 1\n", secs[i].text);
    int o = snprintf(msg, sizeof msg, "t.yaml:%u: unknown key 'no_such_key' %s (expected one of: ",
                     secs[i].line, secs[i].where);
    snprintf(line, sizeof line, "\n%s:\n", name);
    cr_assert((at = strstr(at, line)), "help keys lists section %s", name);
    const struct pp_param *t;
    size_t n, keys = 0;
    bool has[3] = {false, false, false};
    for (size_t j = 0; pp_scenario_section_table(secs[i].section, j, &t, &n); j++) {
      char why[256];
      cr_assert(pp_params_valid(t, n, SIZE_MAX / 2, why, sizeof why), "%s: %s", name, why);
      for (size_t h = 0; h < 3; h++)
        has[h] = has[h] || secs[i].has[h] == t;
      for (size_t k = 0; k < n; k++, keys++) {
        o += snprintf(msg + o, sizeof msg - (size_t)o, "%s%s", keys ? ", " : "", t[k].key);
        cr_assert(t[k].doc && *t[k].doc, "%s.%s has a sentence", name, t[k].key);
        /* given once in the section */
        const struct pp_param *u;
        size_t m;
        for (size_t jj = 0; pp_scenario_section_table(secs[i].section, jj, &u, &m); jj++)
          for (size_t kk = 0; kk < m; kk++)
            cr_assert(&u[kk] == &t[k] || strcmp(u[kk].key, t[k].key), "%s.%s twice", name,
                      t[k].key);
        char full[64], want[512];
        snprintf(full, sizeof full, "%s%s%s", secs[i].section ? secs[i].section : "",
                 secs[i].section ? "." : "", t[k].key);
        snprintf(line, sizeof line, "\n  %-26s ", full);
        const char *next = strstr(at, line), *end = strstr(at + 1, "\n\n");
        cr_assert(next, "help keys lists %s", full);
        cr_assert(!end || next < end, "help keys lists %s in section %s", full, name);
        if (t[k].kind == PP_PARAM_COMPOSITE) /* its sentence on its line */
          snprintf(want, sizeof want, "\n  %-26s %s\n", full, t[k].doc);
        else /* kind and default, then its sentence */
          snprintf(want, sizeof want, "\n  %-26s %s\n", "", t[k].doc);
        const char *doc = strstr(next, want);
        cr_assert(doc && doc == (t[k].kind == PP_PARAM_COMPOSITE ? next : strchr(next + 1, '\n')),
                  "help keys gives %s its sentence", full);
        at = next;
      }
    }
    cr_assert_gt(keys, 0, "%s has keys", name);
    for (size_t h = 0; h < 3; h++)
      cr_assert(!secs[i].has[h] || has[h], "%s reads table %zu of its module", name, h);
    cr_assert(!pp_scenario_section_table(secs[i].section, 99, &t, &n));
    snprintf(msg + o, sizeof msg - (size_t)o, ")");
    expect_error(text, PP_PARSE, msg);
  }
  cr_assert(!pp_scenario_section_table("no_such_section", 0, &(const struct pp_param *){NULL},
                                       &(size_t){0}));
  free(help);
  /* the generated cluster's defaults are its table's */
  struct pp_scenario sc;
  cr_assert_eq(parse("ranks: 2\n", &sc), PP_OK, "%s", err);
  for (size_t k = 0; k < pp_cluster_param_count; k++)
    cr_assert_eq(pp_param_get(&pp_cluster_param_table[k], &sc.sim.platform),
                 pp_cluster_param_table[k].def, "%s", pp_cluster_param_table[k].key);
}
