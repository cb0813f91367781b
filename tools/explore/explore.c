/*
 * `prepost explore`: the command line of the explorer (tools/explore/explore.h): seeds, replay of
 * scenario files (regressions), exhaustive enumeration of orderings, failure reports, shrinking.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/bugs.h"
#include "prepost/param.h"
#include "prepost/proto.h"
#include "tools/cli/plugin.h"
#include "tools/cli/buildinfo.h"
#include "tools/cli/cli_util.h"
#include "tools/explore/explore.h"
#include "tools/explore/explore_fleet.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

const char *const pp_explore_usage =
    "usage: prepost explore [--seeds N | --time T] [--from SEED] [--protocol P] [--faults LIST]\n"
    "                       [--jobs J] [OPTIONS (all below)]\n"
    "       prepost explore --replay FILE|DIR... [--jobs J]\n"
    "       prepost explore --exhaustive K [--window T] --from SEED [OPTIONS]\n"
    "       prepost explore --list\n"
    "       prepost explore merge [--out DIR] [--junit FILE] [--partial] DIR...\n"
    "       prepost explore --program PROG -n N ... (an MPI program; --program x --help)\n"
    "\n"
    "Deterministic simulation testing: for each seed, generate a scenario (ranks, protocol and\n"
    "its parameters, sizes, counts, posting order and delays, platform, NIC, faults), run it on\n"
    "the simulated backend in a child process, check the invariants. A failing seed is printed\n"
    "with the one-line command that reproduces it, written as a scenario file (and a trace),\n"
    "and shrunk to a smaller scenario failing the same invariant.\n"
    "\n"
    "  --seeds N          run N seeds (default 100)\n"
    "  --time T           run seeds for T of wall-clock time (a duration: 30s, 5min, 1h)\n"
    "  --from SEED        the first seed (default 1); seeds are consecutive\n"
    "  --shard K/N        run shard K (1..N) of the seeds: from+K-1, from+K-1+N, ... (the N\n"
    "                     shards of a range run exactly its seeds, each once; with --time each\n"
    "                     shard runs its own seeds for the time given)\n"
    "  --json             write OUT/summary.json: build (version, commit), mix, seeds, failures\n"
    "                     per invariant, every failure, rates (`explore merge` combines them)\n"
    "  --junit FILE       write a JUnit XML report (one testcase per invariant) for CI systems\n"
    "  --progress T       off a terminal, a progress line on stderr every T (seeds done of\n"
    "                     total, rate, ETA, failures; default 60s, 0: none)\n"
    "  --protocol P       only protocol P (default: the mix of the flow-controlled protocols;\n"
    "                     one without flow control (--list) is a positive control: its RNR\n"
    "                     failures must be found)\n"
    "  --faults LIST      faults a seed may draw, comma-separated, 'all' (default: all but\n"
    "                     the opt-in byzantine) or 'none'\n"
    "  --fault-rate P     probability that each of them is on in a seed (default 0.3)\n"
    "  --max-ranks N      (default 8)   --max-messages N (default 200)\n"
    "  --max-size SIZE    (default 64KiB)\n"
    "  --bug NAME         switch a test-only protocol bug on (engine/core/bugs.h; repeatable)\n"
    "  --jobs J           runs in parallel (default 1)\n"
    "  --timeout T        wall-clock bound per run (default 60s): past it the run is killed\n"
    "                     and reported as a hang of the simulator\n"
    "  --out DIR          where failing scenarios, traces and shrunk scenarios go\n"
    "                     (default explore-failures)\n"
    "  --no-shrink        do not shrink   --shrink-runs N: candidates per failure (default 150)\n"
    "  --shrink-max N     shrink the first N failures (default 3)\n"
    "  --stop-after N     stop after N failures (default: never)\n"
    "  --no-trace         do not record a trace of failing seeds\n"
    "  --keep-all         write every seed's scenario into --out with its verdict as the\n"
    "                     expected one (to make regression files)\n"
    "  --replay PATH...   run scenario files (a directory: its *.yaml) and check their verdict\n"
    "                     against their '# expect: INVARIANT' line (default ok)\n"
    "  --exhaustive K     for one seed (--from) or scenario (--replay FILE), run all 2^K\n"
    "                     orderings: wire transfer i < K arrives --window T (simulated, default\n"
    "                     1ns: after whatever else happens at the same instant) late when bit i\n"
    "                     is set\n"
    "  --list             the protocols, faults, invariants and test bugs\n"
    "  -v, --verbose      one line per seed\n"
    "  -h, --help         this help\n"
    "Durations need their unit (30s, 5min, 1h, 250us); sizes take 4096, 64KiB, 1MiB.\n"
    "\n"
    "`prepost explore merge --help`: combining the outputs of shards (tools/explore-slurm and\n"
    "tools/explore-parallel run shards on Slurm and with GNU parallel).\n"
    "\n"
    "Exit codes: 0 no failure (replay: every verdict as expected), 1 failures, 2 usage error.\n";

struct opts {
  struct pp_explore_space sp;
  uint64_t from, seeds;
  double time_s;
  unsigned jobs;
  double timeout_s;
  const char *out;
  bool shrink, trace, verbose, list, keep_all;
  unsigned shrink_runs, shrink_max, stop_after;
  unsigned exhaustive;
  uint64_t window;
  uint32_t shard, shards; /* --shard K/N: 1/1 by default */
  bool json;
  const char *junit;
  double progress_s;
  const char **replay;
  int nreplay;
  bool faults_given;
};

static int usage_error(const char *fmt, const char *arg)
{
  return pp_cli_usage_error("prepost explore", pp_explore_usage, fmt, arg);
}

/* A wall-clock option in seconds, through the one duration parser (a unit is needed). */
static int opt_seconds(const struct pp_cli_opts *g, uint64_t lo_ns, double *out)
{
  uint64_t ns;
  if (pp_cli_opt_duration(g, lo_ns, 1000000ull * 1000000000ull, &ns))
    return EXIT_USAGE;
  *out = (double)ns / 1e9;
  return 0;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
  pp_explore_space_default(&o->sp);
  o->from = 1;
  o->jobs = 1;
  o->timeout_s = 60;
  o->out = "explore-failures";
  o->shrink = o->trace = true;
  o->shrink_runs = 150;
  o->shrink_max = 3;
  o->window = 1;
  o->shard = o->shards = 1;
  o->progress_s = 60;
  bool have_seeds = false;
  enum { X_SEEDS = 256, X_FROM, X_JOBS, X_MAX_RANKS, X_MAX_MESSAGES, X_MAX_SIZE, X_SHRINK_RUNS,
         X_SHRINK_MAX, X_STOP_AFTER, X_EXHAUSTIVE, X_WINDOW, X_TIME, X_TIMEOUT, X_FAULT_RATE,
         X_PROTOCOL, X_FAULTS, X_BUG, X_OUT, X_JUNIT, X_SHARD, X_PROGRESS, X_NO_SHRINK,
         X_NO_TRACE, X_LIST, X_KEEP_ALL, X_JSON, X_REPLAY };
  static const struct option opts[] = {
      {"seeds", required_argument, NULL, X_SEEDS},
      {"from", required_argument, NULL, X_FROM},
      {"jobs", required_argument, NULL, X_JOBS},
      {"max-ranks", required_argument, NULL, X_MAX_RANKS},
      {"max-messages", required_argument, NULL, X_MAX_MESSAGES},
      {"max-size", required_argument, NULL, X_MAX_SIZE},
      {"shrink-runs", required_argument, NULL, X_SHRINK_RUNS},
      {"shrink-max", required_argument, NULL, X_SHRINK_MAX},
      {"stop-after", required_argument, NULL, X_STOP_AFTER},
      {"exhaustive", required_argument, NULL, X_EXHAUSTIVE},
      {"window", required_argument, NULL, X_WINDOW},
      {"time", required_argument, NULL, X_TIME},
      {"timeout", required_argument, NULL, X_TIMEOUT},
      {"fault-rate", required_argument, NULL, X_FAULT_RATE},
      {"protocol", required_argument, NULL, X_PROTOCOL},
      {"faults", required_argument, NULL, X_FAULTS},
      {"bug", required_argument, NULL, X_BUG},
      {"out", required_argument, NULL, X_OUT},
      {"junit", required_argument, NULL, X_JUNIT},
      {"shard", required_argument, NULL, X_SHARD},
      {"progress", required_argument, NULL, X_PROGRESS},
      {"no-shrink", no_argument, NULL, X_NO_SHRINK},
      {"no-trace", no_argument, NULL, X_NO_TRACE},
      {"list", no_argument, NULL, X_LIST},
      {"keep-all", no_argument, NULL, X_KEEP_ALL},
      {"json", no_argument, NULL, X_JSON},
      {"replay", no_argument, NULL, X_REPLAY},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "hv", .longs = opts,
                          .who = "prepost explore", .usage = pp_explore_usage};
  bool replay = false;
  int bug_gen = -1; /* the entry of the protocol whose own bug --bug named */
  int c;
  uint64_t x;
  char err[512];
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return EXIT_USAGE;
    case 'h':
      fputs(pp_explore_usage, stdout);
      return EXIT_OK + 100;
    case 'v':
      o->verbose = true;
      break;
    case X_NO_SHRINK:
      o->shrink = false;
      break;
    case X_NO_TRACE:
      o->trace = false;
      break;
    case X_LIST:
      o->list = true;
      break;
    case X_KEEP_ALL:
      o->keep_all = true;
      break;
    case X_JSON:
      o->json = true;
      break;
    case X_REPLAY:
      replay = true;
      break;
    case X_SEEDS:
    case X_FROM:
    case X_JOBS:
    case X_MAX_RANKS:
    case X_MAX_MESSAGES:
    case X_SHRINK_RUNS:
    case X_SHRINK_MAX:
    case X_STOP_AFTER:
    case X_EXHAUSTIVE:
      if (pp_cli_opt_uint(&g, 0, UINT64_MAX, &x))
        return EXIT_USAGE;
      if (c == X_SEEDS)
        o->seeds = x, have_seeds = true;
      else if (c == X_FROM)
        o->from = x;
      else if (c == X_JOBS)
        o->jobs = x < 1 ? 1 : x > 64 ? 64 : (unsigned)x;
      else if (c == X_MAX_RANKS)
        o->sp.max_ranks = x < 2 ? 2 : x > 64 ? 64 : (uint32_t)x;
      else if (c == X_MAX_MESSAGES)
        o->sp.max_messages = x < 1 ? 1 : x > 100000 ? 100000 : (uint32_t)x;
      else if (c == X_SHRINK_RUNS)
        o->shrink_runs = x > UINT_MAX ? UINT_MAX : (unsigned)x;
      else if (c == X_SHRINK_MAX)
        o->shrink_max = x > UINT_MAX ? UINT_MAX : (unsigned)x;
      else if (c == X_STOP_AFTER)
        o->stop_after = x > UINT_MAX ? UINT_MAX : (unsigned)x;
      else
        o->exhaustive = x > 16 ? 16 : (unsigned)x;
      break;
    case X_MAX_SIZE:
      if (pp_cli_opt_size(&g, 0, UINT64_MAX, &x))
        return EXIT_USAGE;
      o->sp.max_size = x < PP_MSG_HEADER ? PP_MSG_HEADER : x > (1u << 24) ? 1u << 24 : (uint32_t)x;
      break;
    case X_WINDOW:
      if (pp_cli_opt_duration(&g, 0, UINT64_MAX, &o->window))
        return EXIT_USAGE;
      break;
    case X_TIME:
      if (opt_seconds(&g, 0, &o->time_s))
        return EXIT_USAGE;
      break;
    case X_TIMEOUT:
      if (opt_seconds(&g, 1000000, &o->timeout_s)) /* at least 1 ms */
        return EXIT_USAGE;
      break;
    case X_PROGRESS:
      if (opt_seconds(&g, 0, &o->progress_s))
        return EXIT_USAGE;
      break;
    case X_FAULT_RATE: {
      char *end;
      errno = 0;
      double p = strtod(g.arg, &end);
      if (errno || end == g.arg || *end || !(p >= 0 && p <= 1))
        return pp_cli_opt_error(&g, "must be a probability 0..1, got '%s'", g.arg);
      o->sp.fault_rate = p;
      break;
    }
    case X_PROTOCOL:
      if ((o->sp.gen = pp_explore_gen_by_name(g.arg)) < 0)
        return usage_error("unknown protocol '%s' (see --list)", g.arg);
      break;
    case X_FAULTS:
      if (pp_faults_parse(g.arg, &o->sp.faults, err, sizeof err))
        return usage_error("%s", err);
      o->faults_given = true;
      break;
    case X_BUG: {
      int b = pp_bug_from_name(g.arg);
      uint32_t proto;
      if (b < 0 && (b = pp_proto_bug_find(g.arg, &proto)) >= 0) {
        /* a protocol's own bug (its bits are its own): explore that protocol */
        const struct pp_explore_gen *e = pp_explore_gen_of(proto);
        int gi = e ? (int)(e - pp_explore_gens) : -1;
        if (gi < 0)
          return usage_error("test bug '%s' belongs to a protocol without explorer hooks", g.arg);
        if (bug_gen >= 0 && bug_gen != gi)
          return usage_error("test bug '%s' belongs to another protocol than the other --bug",
                             g.arg);
        bug_gen = gi;
      }
      if (b < 0)
        return usage_error("unknown test bug '%s' (see --list)", g.arg);
      o->sp.bugs |= 1u << b;
      break;
    }
    case X_OUT:
      o->out = g.arg;
      break;
    case X_JUNIT:
      o->junit = g.arg;
      break;
    case X_SHARD:
      if (pp_fleet_parse_shard(g.arg, &o->shard, &o->shards))
        return pp_cli_opt_error(&g, "must be K/N with 1 <= K <= N, got '%s'", g.arg);
      break;
    default:
      return pp_cli_opt_error(&g, "is not handled%s", "");
    }
  }
  if (replay) {
    o->replay = (const char **)argv + g.rest;
    o->nreplay = argc - g.rest;
    if (!o->nreplay)
      return usage_error("%s", "--replay needs at least one file or directory");
  } else if (g.rest < argc) {
    return usage_error("unexpected argument '%s' (scenario files go after --replay)",
                       argv[g.rest]);
  }
  if (bug_gen >= 0 && o->sp.gen >= 0 && o->sp.gen != bug_gen)
    return usage_error("--bug names a bug of protocol %s, not of --protocol",
                       pp_explore_gens[bug_gen].name);
  if (bug_gen >= 0)
    o->sp.gen = bug_gen;
  if (!have_seeds && !(o->time_s > 0))
    o->seeds = 100;
  if (have_seeds && o->time_s > 0)
    return usage_error("%s", "--seeds and --time exclude each other");
  return -1;
}

static void list_all(void)
{
  pp_explore_gens_sync();
  printf("protocols (--protocol):\n");
  for (size_t i = 0; i < pp_explore_gen_count(); i++) {
    const struct pp_explore_gen *g = &pp_explore_gens[i];
    printf("  %-14s %s%s\n", g->name, g->flow_controlled ? "flow-controlled" : "no flow control",
           g->in_mix ? ", in the default mix" : " (positive control: not in the default mix)");
  }
  printf("faults (--faults):\n");
  for (int f = 0; f < PP_FAULT_COUNT; f++)
    printf("  %-14s %s\n", pp_fault_name((enum pp_fault)f), pp_fault_desc((enum pp_fault)f));
  printf("invariants:\n");
  for (int i = 1; i < PP_INV_COUNT; i++)
    printf("  %-14s %s\n", pp_inv_name((enum pp_inv)i), pp_inv_desc((enum pp_inv)i));
  printf("test bugs (--bug):\n");
  for (int b = 0; b < PP_BUG_COUNT; b++)
    printf("  %-14s %s\n", pp_bug_name((enum pp_bug)b), pp_bug_desc((enum pp_bug)b));
  for (size_t i = 0; i < pp_explore_gen_count(); i++) /* the registered protocols' own */
    for (uint32_t b = 0; pp_explore_gens[i].def && b < pp_explore_gens[i].def->nbugs; b++)
      printf("  %-14s %s: %s\n", pp_explore_gens[i].def->bugs[b].name, pp_explore_gens[i].name,
             pp_explore_gens[i].def->bugs[b].doc);
}

/* The options that make `--from S --seeds 1` generate the same scenario. */
static void repro_flags(const struct opts *o, char *buf, size_t len)
{
  struct pp_explore_space d;
  pp_explore_space_default(&d);
  size_t at = 0;
  buf[0] = '\0';
#define ADD(...)                                                                                   \
  if (at < len)                                                                                    \
  at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__)
  if (o->sp.gen >= 0)
    ADD(" --protocol %s", pp_explore_gens[o->sp.gen].name);
  if (o->sp.faults != d.faults) {
    char f[256];
    pp_faults_format(o->sp.faults, f, sizeof f);
    ADD(" --faults %s", f);
  }
  if (o->sp.fault_rate != d.fault_rate)
    ADD(" --fault-rate %.17g", o->sp.fault_rate);
  if (o->sp.max_ranks != d.max_ranks)
    ADD(" --max-ranks %u", o->sp.max_ranks);
  if (o->sp.max_messages != d.max_messages)
    ADD(" --max-messages %u", o->sp.max_messages);
  if (o->sp.max_size != d.max_size)
    ADD(" --max-size %u", o->sp.max_size);
  for (int b = 0; b < PP_BUG_COUNT; b++)
    if (o->sp.bugs >> b & 1)
      ADD(" --bug %s", pp_bug_name((enum pp_bug)b));
  const struct pp_proto_def *pd = o->sp.gen >= 0 ? pp_explore_gens[o->sp.gen].def : NULL;
  for (uint32_t b = 0; pd && b < pd->nbugs; b++)
    if (o->sp.bugs >> (PP_PROTO_BUG_SHIFT + b) & 1)
      ADD(" --bug %s", pd->bugs[b].name);
  if (o->timeout_s != 60) {
    char t[32];
    pp_format_duration((uint64_t)llround(o->timeout_s * 1e9), t, sizeof t);
    ADD(" --timeout %s", t);
  }
  for (size_t i = 0; i < pp_plugin_count(); i++) /* what registered the protocol */
    ADD(" --plugin %s", pp_plugin_path(i));
#undef ADD
}

static bool make_dir(const char *dir)
{
  if (mkdir(dir, 0777) == 0 || errno == EEXIST)
    return true;
  fprintf(stderr, "prepost explore: cannot create '%s': %s\n", dir, strerror(errno));
  return false;
}

struct failure {
  uint64_t seed;
  struct pp_verdict v;
};

/* Writes, traces and shrinks one failure; prints the report. */
static void report_failure(const struct opts *o, uint64_t seed, const struct pp_verdict *v,
                           bool shrink)
{
  static struct pp_scenario sc, small;
  pp_explore_generate(seed, &o->sp, &sc);
  char flags[512], desc[512];
  repro_flags(o, flags, sizeof flags);
  pp_explore_describe(&sc, desc, sizeof desc);
  printf("FAIL seed %" PRIu64 " [%s] %s\n", seed, pp_inv_name(v->inv), v->why);
  printf("  scenario:  %s\n", desc);
  printf("  reproduce: prepost explore --from %" PRIu64 " --seeds 1%s\n", seed, flags);
  if (!make_dir(o->out))
    return;
  char path[PP_PATH_MAX], comment[1024];
  snprintf(path, sizeof path, "%s/seed-%" PRIu64 ".yaml", o->out, seed);
  snprintf(comment, sizeof comment,
           "found by: prepost explore --from %" PRIu64 " --seeds 1%s\n"
           "build: prepost %s, commit %s\n%s: %s\nexpect: %s",
           seed, flags, pp_build_version(), pp_build_commit(), pp_inv_name(v->inv), v->why,
           pp_inv_name(v->inv));
  if (pp_scenario_write_file(path, &sc, comment) == 0)
    printf("  written:   %s (prepost explore --replay %s)\n", path, path);
  if (o->trace) {
    char trace[PP_PATH_MAX], log[PP_PATH_MAX];
    snprintf(trace, sizeof trace, "%s/seed-%" PRIu64 ".trace", o->out, seed);
    snprintf(log, sizeof log, "%s/seed-%" PRIu64 ".log", o->out, seed);
    struct pp_verdict again;
    pp_explore_run(&sc, o->timeout_s, trace, log, &again);
    printf("  trace:     %s, NIC log %s%s\n", trace, log,
           again.inv == v->inv ? "" : " (the recorded run did not fail the same way!)");
  }
  if (!shrink)
    return;
  fflush(stdout);
  unsigned runs = pp_explore_shrink(&sc, v->inv, o->shrink_runs, o->timeout_s, &small,
                                    o->verbose ? stdout : NULL);
  pp_explore_describe(&small, desc, sizeof desc);
  snprintf(path, sizeof path, "%s/seed-%" PRIu64 "-shrunk.yaml", o->out, seed);
  snprintf(comment, sizeof comment,
           "shrunk from: prepost explore --from %" PRIu64 " --seeds 1%s\nbuild: prepost %s, commit "
           "%s\nexpect: %s",
           seed, flags, pp_build_version(), pp_build_commit(), pp_inv_name(v->inv));
  printf("  shrunk:    %s (%u runs)\n", desc, runs);
  if (pp_scenario_write_file(path, &small, comment) == 0)
    printf("  reproduce: prepost explore --replay %s\n", path);
}

static void progress(double t0, uint64_t done, unsigned failures, bool final)
{
  double dt = now_s() - t0;
  fprintf(stderr, "\r  %" PRIu64 " seeds, %.1f seeds/s, %u failure%s%s", done,
          dt > 0 ? done / dt : 0.0, failures, failures == 1 ? "" : "s", final ? "\n" : "  ");
  fflush(stderr);
}

static int cmp_fleet_failure(const void *a, const void *b)
{
  uint64_t x = ((const struct pp_fleet_failure *)a)->seed;
  uint64_t y = ((const struct pp_fleet_failure *)b)->seed;
  return x < y ? -1 : x > y;
}

/* The i-th seed of this shard (tools/explore/explore_fleet.h: shard K/N runs from+K-1+i*N). */
static uint64_t seed_at(const struct opts *o, uint64_t i)
{
  return o->from + (o->shard - 1) + i * o->shards;
}

static int explore_seeds(const struct opts *o)
{
  struct pp_explore_pool *pool = pp_explore_pool_create(o->jobs, o->timeout_s);
  if (!pool)
    return EXIT_USAGE;
  bool tty = isatty(STDERR_FILENO);
  double t0 = now_s(), last = 0, last_line = t0;
  /* seeds of this shard: started, done; a fixed count or a time budget */
  uint64_t total = o->time_s > 0 ? 0 : pp_fleet_shard_count(o->seeds, o->shard, o->shards);
  uint64_t started = 0, done = 0, messages = 0, sim_ns = 0;
  unsigned nfail = 0, cap = 16;
  unsigned per_inv[PP_INV_COUNT] = {0};
  struct failure *fails = malloc(cap * sizeof *fails);
  static struct pp_scenario sc;
  bool stop = false;
  char faults[256], shard[64] = "";
  if (!fails) {
    pp_explore_pool_destroy(pool);
    return EXIT_USAGE;
  }
  pp_faults_format(o->sp.faults, faults, sizeof faults);
  if (o->shards > 1)
    snprintf(shard, sizeof shard, ", shard %u/%u", o->shard, o->shards);
  printf("explore: seeds from %" PRIu64 "%s, %s, protocol %s, faults %s (rate %.2f), %u job%s\n",
         o->from, shard,
         o->time_s > 0 ? "for a time budget" : "a fixed count",
         o->sp.gen >= 0 ? pp_explore_gens[o->sp.gen].name : "mix", faults, o->sp.fault_rate,
         o->jobs, o->jobs == 1 ? "" : "s");
  fflush(stdout);
  for (;;) {
    bool more = !stop && (o->time_s > 0 ? now_s() - t0 < o->time_s : started < total);
    while (more && pp_explore_pool_running(pool) < o->jobs) {
      uint64_t next = seed_at(o, started);
      pp_explore_generate(next, &o->sp, &sc);
      if (!pp_explore_pool_start(pool, next, &sc)) {
        fprintf(stderr, "prepost explore: cannot start a child process: %s\n", strerror(errno));
        stop = true;
        break;
      }
      started++;
      more = o->time_s > 0 ? now_s() - t0 < o->time_s : started < total;
    }
    if (!pp_explore_pool_running(pool))
      break;
    /* off a terminal, wake up for the progress lines */
    double wait = -1;
    if (tty)
      wait = 0.2;
    else if (o->progress_s > 0 && (wait = last_line + o->progress_s - now_s()) < 0)
      wait = 0;
    if (!tty && o->progress_s > 0 && now_s() - last_line >= o->progress_s) {
      pp_fleet_progress(stderr, done, total, o->time_s, now_s() - t0, nfail);
      last_line = now_s();
      wait = o->progress_s;
    }
    uint64_t seed;
    struct pp_verdict v;
    bool got = pp_explore_pool_wait(pool, wait, &seed, &v);
    if (!got) {
      if (tty)
        progress(t0, done, nfail, false);
      continue;
    }
    done++;
    messages += v.messages;
    sim_ns += v.sim_ns;
    if (o->keep_all && make_dir(o->out)) {
      char path[PP_PATH_MAX], flags[512], comment[1024];
      repro_flags(o, flags, sizeof flags);
      pp_explore_generate(seed, &o->sp, &sc);
      snprintf(path, sizeof path, "%s/seed-%" PRIu64 ".yaml", o->out, seed);
      snprintf(comment, sizeof comment,
               "from: prepost explore --from %" PRIu64 " --seeds 1%s\nexpect: %s", seed, flags,
               pp_inv_name(v.inv));
      if (pp_scenario_write_file(path, &sc, comment))
        fprintf(stderr, "prepost explore: cannot write %s\n", path);
    }
    if (o->verbose) {
      pp_explore_generate(seed, &o->sp, &sc);
      char d[512];
      pp_explore_describe(&sc, d, sizeof d);
      printf("seed %" PRIu64 ": %s (%s, %s) %.3f s %s\n", seed, pp_inv_name(v.inv),
             pp_outcome_name(v.outcome), d, v.wall_s, v.why);
    }
    if (v.inv != PP_INV_OK) {
      per_inv[v.inv]++;
      if (nfail == cap) {
        struct failure *more_fails = realloc(fails, 2 * cap * sizeof *fails);
        if (!more_fails) {
          fprintf(stderr, "prepost explore: out of memory for %u failures\n", nfail + 1);
          stop = true;
          continue;
        }
        fails = more_fails;
        cap *= 2;
      }
      fails[nfail++] = (struct failure){seed, v};
      if (tty)
        fprintf(stderr, "\r\033[K");
      printf("FAIL seed %" PRIu64 " [%s] %s\n", seed, pp_inv_name(v.inv), v.why);
      fflush(stdout);
      if (o->stop_after && nfail >= o->stop_after)
        stop = true;
    }
    if (tty && now_s() - last > 0.2) {
      progress(t0, done, nfail, false);
      last = now_s();
    }
  }
  pp_explore_pool_destroy(pool);
  double dt = now_s() - t0;
  if (tty)
    fprintf(stderr, "\r\033[K");
  /* the reports, in seed order of discovery: written, traced, shrunk */
  for (unsigned i = 0; i < nfail; i++) {
    if (i == 0)
      printf("\n");
    report_failure(o, fails[i].seed, &fails[i].v, o->shrink && i < o->shrink_max);
  }
  printf("explore: %" PRIu64 " seeds (%" PRIu64 "..%" PRIu64 "%s) in %.1f s: %.1f seeds/s, %" PRIu64
         " messages delivered (%.0f simulated messages/s), %u failure%s",
         done, seed_at(o, 0), done ? seed_at(o, done - 1) : seed_at(o, 0),
         o->shards > 1 ? ", every shards-th" : "", dt, dt > 0 ? done / dt : 0.0, messages,
         dt > 0 ? messages / dt : 0.0, nfail, nfail == 1 ? "" : "s");
  const char *sep = " (";
  for (int i = 1; i < PP_INV_COUNT; i++)
    if (per_inv[i]) {
      printf("%s%s %u", sep, pp_inv_name((enum pp_inv)i), per_inv[i]);
      sep = ", ";
    }
  printf("%s\n", *sep == ',' ? ")" : "");
  int rc = nfail ? EXIT_FAIL : EXIT_OK;
  if (o->json || o->junit) {
    struct pp_fleet_failure *ff = calloc(nfail ? nfail : 1, sizeof *ff);
    char flags[512];
    repro_flags(o, flags, sizeof flags);
    for (unsigned i = 0; ff && i < nfail; i++)
      ff[i] = (struct pp_fleet_failure){fails[i].seed, fails[i].v.inv, fails[i].v.why};
    if (ff) /* in seed order, whatever order the jobs ended in (as merge writes them) */
      qsort(ff, nfail, sizeof *ff, cmp_fleet_failure);
    struct pp_fleet_run run = {.sp = &o->sp, .timeout_s = o->timeout_s, .options = flags,
                               .from = o->from, .count = o->time_s > 0 ? 0 : o->seeds,
                               .budget_s = o->time_s, .shard = o->shard, .shards = o->shards,
                               .done = done, .complete = !stop, .messages = messages,
                               .sim_ns = sim_ns, .failures = ff, .nfailures = ff ? nfail : 0,
                               .wall_s = dt, .out = o->out};
    if (!ff || pp_fleet_report(&run, o->json, o->junit))
      rc = EXIT_USAGE;
    free(ff);
  }
  free(fails);
  return rc;
}

/* ------------------------------------------------------------------ replay */

/* The invariant named by a "# expect: NAME" line of the file, OK when there is none; -1 when
 * the line names no invariant. */
static int expected_of(const char *path)
{
  char e[128];
  FILE *f = pp_open_regular(path, e, sizeof e);
  if (!f)
    return PP_INV_OK; /* and loading the scenario says why */
  char line[512];
  int inv = PP_INV_OK;
  while (fgets(line, sizeof line, f)) {
    const char *p = line;
    if (*p != '#')
      continue;
    p++;
    while (*p == ' ')
      p++;
    if (strncmp(p, "expect:", 7))
      continue;
    p += 7;
    while (*p == ' ')
      p++;
    char name[64];
    size_t n = strcspn(p, " \t\r\n");
    if (n >= sizeof name)
      n = sizeof name - 1;
    memcpy(name, p, n);
    name[n] = '\0';
    inv = pp_inv_from_name(name);
  }
  fclose(f);
  return inv;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files to replay: each argument, or the *.yaml of a directory, sorted. */
static int collect_files(const struct opts *o, char ***out)
{
  int n = 0, cap = 16;
  char **v = malloc(cap * sizeof *v);
  for (int i = 0; v && i < o->nreplay; i++) {
    struct stat st;
    const char *p = o->replay[i];
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(p);
      struct dirent *e;
      while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml"))
          continue;
        if (n == cap)
          v = realloc(v, (cap *= 2) * sizeof *v);
        size_t sz = strlen(p) + l + 2;
        v[n] = malloc(sz);
        snprintf(v[n++], sz, "%s/%s", p, e->d_name);
      }
      if (d)
        closedir(d);
    } else {
      if (n == cap)
        v = realloc(v, (cap *= 2) * sizeof *v);
      v[n++] = strdup(p);
    }
  }
  if (v)
    qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  return n;
}

static int replay(const struct opts *o)
{
  const char *models = pp_cli_models_dir();
  char **files;
  int n = collect_files(o, &files);
  if (n == 0) {
    fprintf(stderr, "prepost explore: nothing to replay\n");
    free(files);
    return EXIT_USAGE;
  }
  static struct pp_scenario sc;
  int bad = 0;
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    char err[1024];
    int expect = expected_of(files[i]);
    if (pp_scenario_load(files[i], models, &sc, err, sizeof err) != PP_OK) {
      printf("ERROR %s: %s\n", files[i], err);
      bad++;
      continue;
    }
    if (expect < 0) {
      printf("ERROR %s: its '# expect:' line names no invariant\n", files[i]);
      bad++;
      continue;
    }
    struct pp_verdict v;
    pp_explore_run(&sc, o->timeout_s, NULL, NULL, &v);
    bool ok = (int)v.inv == expect;
    bad += !ok;
    printf("%s %s: %s%s%s (expected %s) %.2f s\n", ok ? "ok  " : "FAIL", files[i],
           pp_inv_name(v.inv), v.why[0] ? ": " : "", v.why, pp_inv_name((enum pp_inv)expect),
           v.wall_s);
    fflush(stdout);
  }
  printf("replay: %d scenario%s in %.1f s, %d as expected, %d not\n", n, n == 1 ? "" : "s",
         now_s() - t0, n - bad, bad);
  for (int i = 0; i < n; i++)
    free(files[i]);
  free(files);
  return bad ? EXIT_FAIL : EXIT_OK;
}

/* ------------------------------------------------------------------ exhaustive */

/* One seed's scenario, every combination of K ordering bits: transfer i < K of the run leaves
 * `window` ns late when bit i is set. With the default window of 1 ns a delayed transfer arrives
 * after everything else its destination does at that instant (an engine timer due then, the
 * completions it polls, another rank's packet) instead of before: the 2^K runs enumerate the
 * orderings of the first K transfers against the events of the same instant, without luck. A
 * larger window enumerates the orderings within it (a transfer behind a later timer). Order per
 * source is kept (a delayed transfer holds back the later ones of its NIC). */
static int exhaustive(const struct opts *o)
{
  static struct pp_scenario base, sc;
  if (o->nreplay) { /* a scenario file instead of a seed */
    const char *models = pp_cli_models_dir();
    char err[1024];
    if (o->nreplay != 1 ||
        pp_scenario_load(o->replay[0], models, &base, err,
                         sizeof err) != PP_OK) {
      fprintf(stderr, "prepost explore: --exhaustive takes one scenario file: %s\n",
              o->nreplay != 1 ? "more than one given" : err);
      return EXIT_USAGE;
    }
  } else {
    pp_explore_generate(o->from, &o->sp, &base);
  }
  unsigned k = o->exhaustive;
  uint64_t total = 1ull << k;
  char desc[512], flags[512];
  pp_explore_describe(&base, desc, sizeof desc);
  repro_flags(o, flags, sizeof flags);
  printf("exhaustive: seed %" PRIu64 " (%s): 2^%u = %" PRIu64 " orderings, window %" PRIu64
         " ns\n",
         o->from, desc, k, total, o->window);
  struct pp_explore_pool *pool = pp_explore_pool_create(o->jobs, o->timeout_s);
  if (!pool)
    return EXIT_USAGE;
  uint64_t next = 0, done = 0;
  unsigned nfail = 0, per_inv[PP_INV_COUNT] = {0};
  uint64_t first_fail = UINT64_MAX;
  double t0 = now_s();
  while (done < total) {
    while (next < total && pp_explore_pool_running(pool) < o->jobs) {
      sc = base;
      sc.sim.faults.order_bits = k;
      sc.sim.faults.order_mask = next;
      sc.sim.faults.order_window_ns = o->window;
      pp_explore_set_bounds(&sc, base.sim.faults.until_ns);
      if (!pp_explore_pool_start(pool, next, &sc))
        break;
      next++;
    }
    uint64_t mask;
    struct pp_verdict v;
    if (!pp_explore_pool_wait(pool, -1, &mask, &v))
      break;
    done++;
    if (o->verbose)
      printf("mask 0x%" PRIx64 ": %s %s\n", mask, pp_inv_name(v.inv), v.why);
    if (v.inv != PP_INV_OK) {
      per_inv[v.inv]++;
      nfail++;
      if (mask < first_fail)
        first_fail = mask;
    }
  }
  pp_explore_pool_destroy(pool);
  printf("exhaustive: %" PRIu64 " orderings in %.1f s, %u failing", done, now_s() - t0, nfail);
  const char *sep = " (";
  for (int i = 1; i < PP_INV_COUNT; i++)
    if (per_inv[i]) {
      printf("%s%s %u", sep, pp_inv_name((enum pp_inv)i), per_inv[i]);
      sep = ", ";
    }
  printf("%s\n", *sep == ',' ? ")" : "");
  if (nfail && make_dir(o->out)) {
    sc = base;
    sc.sim.faults.order_bits = k;
    sc.sim.faults.order_mask = first_fail;
    sc.sim.faults.order_window_ns = o->window;
    pp_explore_set_bounds(&sc, base.sim.faults.until_ns);
    struct pp_verdict v;
    pp_explore_run(&sc, o->timeout_s, NULL, NULL, &v);
    char path[PP_PATH_MAX], comment[2 * PP_PATH_MAX];
    snprintf(path, sizeof path, "%s/seed-%" PRIu64 "-order-%" PRIx64 ".yaml", o->out, o->from,
             first_fail);
    char from[PP_PATH_MAX + 32];
    if (o->nreplay)
      snprintf(from, sizeof from, "--replay %s", o->replay[0]);
    else
      snprintf(from, sizeof from, "--from %" PRIu64 "%s", o->from, flags);
    snprintf(comment, sizeof comment,
             "found by: prepost explore --exhaustive %u --window %" PRIu64
             "ns %s (ordering 0x%" PRIx64 ")\nbuild: prepost %s, commit %s\nexpect: %s",
             k, o->window, from, first_fail, pp_build_version(), pp_build_commit(),
             pp_inv_name(v.inv));
    printf("FAIL ordering 0x%" PRIx64 " [%s] %s\n", first_fail, pp_inv_name(v.inv), v.why);
    if (pp_scenario_write_file(path, &sc, comment) == 0)
      printf("  reproduce: prepost explore --replay %s\n", path);
  }
  return nfail ? EXIT_FAIL : EXIT_OK;
}

int pp_cli_explore(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "merge"))
    return pp_cli_explore_merge(argc - 1, argv + 1); /* argv[0]: "merge" */
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--program")) /* an MPI program's runs (explore_prog.c) */
      return pp_explore_program(argc, argv);
  static struct opts o;
  memset(&o, 0, sizeof o);
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0)
    return rc == EXIT_OK + 100 ? EXIT_OK : rc;
  if (o.list) {
    list_all();
    return EXIT_OK;
  }
  if (o.exhaustive)
    return exhaustive(&o);
  if (o.nreplay)
    return replay(&o);
  return explore_seeds(&o);
}
