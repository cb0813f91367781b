/* prepost: the command line. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/buildinfo.h"
#include "tools/cli/cli_util.h"
#include "tools/cli/cli_verbs.h"
#include "cli/plugin.h"
#include "tools/explore/explore.h"
#include "mpi/mpirun.h"
#include "tools/report/report.h"
#include "tools/scenario/scenario.h"
#include "tools/trace/trace_cli.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2, EXIT_STALLED = 3 };

static const char *const main_usage =
    "usage: prepost [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  run SCENARIO   run a scenario on the simulated backend and report the result\n"
    "                 (--backend verbs: on an RDMA device, one process per rank)\n"
    "  doctor         can this machine run the verbs backend? devices, ports, GIDs, memlock\n"
    "  bench          engine vs raw verbs latency and bandwidth on an RDMA device\n"
    "  calibrate      measure an RDMA device and write the NIC profile the simulator loads\n"
    "  trace          dump, summarise, merge, import or export (pcap, perfetto, svg) a trace\n"
    "  replay TRACE   re-drive the engines with a trace's inputs and check their outputs\n"
    "  explore        seeded exploration of races and faults: invariants, shrinking, replay\n"
    "  mpirun -n N PROG  run an unmodified MPI program (mpicc.mpich) on the simulated backend\n"
    "  help [COMMAND] show the help of a command (`help help`: about the options)\n"
    "\n"
    "Options: `--seed=7` and `--seed 7` are the same, a long option may be shortened to a\n"
    "unique prefix, `--` ends the options. A duration option needs its unit: 500ns, 2us,\n"
    "1.5ms, 10s, 5min, 1h (0 alone is 0); a size option takes 4096, 64B, 4KiB, 1MiB, 1GB.\n"
    "\n"
    "Every command takes --plugin PATH (repeatable; also PREPOST_PLUGINS=a.so:b.so): a shared\n"
    "object that registers protocols of its own (README: Write your own protocol).\n"
    "\n"
    "Exit codes: 0 every operation completed successfully, 1 the run ended with error\n"
    "completions, 2 usage or input error, 3 the run stalled, hit max_sim_time or made no\n"
    "progress with operations pending, 4 (verbs) the backend could not start.\n";

static const char *const help_usage =
    "usage: prepost help [COMMAND]\n"
    "\n"
    "Prints the help of COMMAND (run, doctor, bench, calibrate, trace, replay, explore,\n"
    "mpirun, help), or the list of commands. `prepost COMMAND --help` prints the same.\n"
    "\n"
    "Every command parses its options the same way (getopt_long): `--seed=7` or `--seed 7`;\n"
    "a long option may be shortened to a unique prefix (`--no-sh` for --no-shrink); options\n"
    "and operands mix in any order (mpirun: its options come before PROG, whose own\n"
    "arguments follow it); `--` ends the options. Errors are one of: unknown option\n"
    "'--X', option '--X' needs a value, option '--X' takes no value, ambiguous option '--X';\n"
    "then the command's usage, exit code 2.\n"
    "\n"
    "Values, the same units everywhere (the parsers of scenarios, prepost/param.h):\n"
    "  duration  500ns, 2us, 1.5ms, 10s, 5min, 1h. An option's duration needs its unit (0\n"
    "            alone is 0): `--timeout 10` is refused, not read as 10 s or 10 ns. In a\n"
    "            scenario file and in `--set KEY=VALUE` a bare integer is nanoseconds.\n"
    "  size      4096, 64B, 4KiB, 1MiB, 1GiB (powers of 2), 4KB, 1MB, 1GB (of 10)\n"
    "  integer   decimal digits, no sign\n"
    "\n"
    "Exit codes: 0 help printed, 2 unknown COMMAND.\n";

static const char *const run_usage =
    "usage: prepost run SCENARIO [--seed N] [--set KEY=VALUE]... [--log FILE] [--json]\n"
    "                            [--trace FILE [--trace-packets]] [--no-progress T]\n"
    "                            [--models DIR] [--backend simgrid|verbs] [-h|--help]\n"
    "\n"
    "Runs SCENARIO (a YAML file, see models/scenarios/README.md) on the SimGrid backend.\n"
    "\n"
    "  --seed N      override the scenario's seed (drives every random choice)\n"
    "  --set KEY=VALUE  override one scenario key, written as in the scenario: a top-level key\n"
    "                (ranks=16, protocol=p2p) or SECTION.KEY (qp.rnr_retry=7,\n"
    "                p2p.eager_limit=8KiB, workload.slow_ranks=[1,3]); checked as the file's\n"
    "                own keys (bare integer durations are ns); repeatable, later ones win.\n"
    "                `prepost help keys` lists the keys\n"
    "  --log FILE    write the NIC event log (one line per packet, completion and QP state\n"
    "                change, stamped with simulated nanoseconds; '-' for stderr)\n"
    "  --json        print one JSON object on stdout instead of the table\n"
    "  --trace FILE  record every rank's inputs and outputs (enough for an exact replay, the\n"
    "                exports but pcap, and hang reports) and the RNR NAK and NAK packets\n"
    "                (traces/FORMAT.md); cheap enough to leave on\n"
    "  --trace-packets  with --trace: record every packet too (data, ACKs, read responses), as\n"
    "                `prepost trace export --pcap` needs; it costs more (traces/FORMAT.md)\n"
    "  --no-progress T  stop when no rank made progress for T (a duration with its unit:\n"
    "                500us, 2ms, 1s; 0: never), simulated time; overrides the scenario's\n"
    "                limits.no_progress (default 1s). Progress: a send or receive finished\n"
    "                towards the workload, or a change in what a pending operation waits for\n"
    "                (credits, CTS, head)\n"
    "  --backend B   simgrid (default) or verbs (see `prepost run --backend verbs --help`)\n"
    "  --models DIR  where relative platform and NIC paths resolve after the scenario's own\n"
    "                directory (default: $PREPOST_MODELS, else the installation's\n"
    "                share/prepost/models, else the source tree's models/; `prepost --version`\n"
    "                prints which)\n"
    "  -h, --help    this help\n"
    "\n"
    "When ranks are not done at the end (stalled at quiescence, timeout, no progress, or\n"
    "errors) a hang report follows the table: per rank what each pending operation waits for,\n"
    "the wait-for graph between ranks, its cycle and the cause (--json: a \"hang\" object).\n"
    "A scenario whose workload has nothing to send or receive is refused (exit 2).\n"
    "\n"
    "Exit codes: 0 completed, 1 error completions, 2 usage or input error, 3 stalled, timeout\n"
    "or no progress.\n";

static int exit_code_of(enum pp_outcome o)
{
  switch (o) {
  case PP_OUTCOME_COMPLETED:
    return EXIT_OK;
  case PP_OUTCOME_ERRORS:
    return EXIT_ERRORS;
  default:
    return EXIT_STALLED;
  }
}

struct run_opts {
  const char *scenario;
  const char *log;
  const char *trace;
  const char *models;
  bool json;
  bool trace_packets; /* --trace-packets */
  bool has_seed;
  uint64_t seed;
  bool has_no_progress;
  uint64_t no_progress_ns; /* --no-progress T, applied over the scenario's limits */
  const char **sets;       /* --set KEY=VALUE, in order */
  size_t nsets;
};

enum { OPT_SEED = 256, OPT_LOG, OPT_JSON, OPT_TRACE, OPT_TRACE_PACKETS, OPT_NO_PROGRESS,
       OPT_BACKEND, OPT_MODELS, OPT_SET };

static const struct option run_options[] = {
    {"seed", required_argument, NULL, OPT_SEED},
    {"set", required_argument, NULL, OPT_SET},
    {"log", required_argument, NULL, OPT_LOG},
    {"json", no_argument, NULL, OPT_JSON},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"trace-packets", no_argument, NULL, OPT_TRACE_PACKETS},
    {"no-progress", required_argument, NULL, OPT_NO_PROGRESS},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"models", required_argument, NULL, OPT_MODELS},
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0}};

/* -1 to go on, else the exit code (EXIT_OK + 100: help printed). */
static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = run_options,
                          .who = "prepost", .usage = run_usage};
  int c, rc;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return EXIT_USAGE;
    case 'h':
      fputs(run_usage, stdout);
      return EXIT_OK + 100;
    case OPT_JSON:
      o->json = true;
      break;
    case OPT_TRACE_PACKETS:
      o->trace_packets = true;
      break;
    case OPT_BACKEND:
      if (strcmp(g.arg, "simgrid"))
        return pp_cli_opt_error(&g, "must be simgrid or verbs, got '%s'", g.arg);
      break;
    case OPT_SEED:
      if ((rc = pp_cli_opt_uint(&g, 0, UINT64_MAX, &o->seed)))
        return rc;
      o->has_seed = true;
      break;
    case OPT_SET:
      o->sets[o->nsets++] = g.arg;
      break;
    case OPT_LOG:
      o->log = g.arg;
      break;
    case OPT_TRACE:
      o->trace = g.arg;
      break;
    case OPT_NO_PROGRESS:
      if ((rc = pp_cli_opt_duration(&g, 0, UINT64_MAX, &o->no_progress_ns)))
        return rc;
      o->has_no_progress = true;
      break;
    case OPT_MODELS:
      o->models = g.arg;
      break;
    default:
      return pp_cli_usage_error("prepost", run_usage, "unhandled option '%s'", g.name);
    }
  }
  if (g.rest >= argc)
    return pp_cli_usage_error("prepost", run_usage, "%s", "missing SCENARIO");
  if (g.rest + 1 < argc)
    return pp_cli_usage_error("prepost", run_usage, "one scenario at a time (extra argument '%s')",
                              argv[g.rest + 1]);
  o->scenario = argv[g.rest];
  if (o->trace_packets && !o->trace)
    return pp_cli_usage_error("prepost", run_usage, "%s", "--trace-packets goes with --trace");
  return -1;
}

/* `--backend verbs` (or --backend=verbs, or a prefix of --backend) anywhere before `--`. */
static bool wants_verbs(int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
    const char *a = argv[i], *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n < 5 || strncmp(a, "--backend", n))
      continue;
    const char *v = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(v, "simgrid"))
      return true;
  }
  return false;
}

static int cmd_run(int argc, char **argv)
{
  if (wants_verbs(argc, argv))
    return pp_cli_run_verbs(argc, argv);
  struct run_opts o = {0};
  o.sets = calloc((size_t)argc + 1, sizeof *o.sets);
  if (!o.sets)
    return EXIT_USAGE;
  int rc = parse_run_args(argc, argv, &o);
  if (rc >= 0) {
    free(o.sets);
    return rc == EXIT_OK + 100 ? EXIT_OK : rc;
  }
  if (!o.models)
    o.models = pp_cli_models_dir();
  static struct pp_scenario sc;
  char err[1024];
  enum pp_status ls = pp_scenario_load_set(o.scenario, o.models, o.sets, o.nsets, &sc, err,
                                           sizeof(err));
  free(o.sets);
  if (ls != PP_OK) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  if (o.has_seed)
    sc.sim.seed = sc.sim.engine.seed = o.seed;
  if (o.has_no_progress)
    sc.sim.no_progress_ns = o.no_progress_ns;
  if (pp_scenario_runs_nothing(&sc, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s: %s\n", o.scenario, err);
    return EXIT_USAGE;
  }
  FILE *log = NULL;
  if (o.log) {
    log = strcmp(o.log, "-") ? fopen(o.log, "w") : stderr;
    if (!log) {
      fprintf(stderr, "prepost: cannot write log '%s': %s\n", o.log, strerror(errno));
      return EXIT_USAGE;
    }
  }
  struct pp_cli_trace *tr = NULL;
  if (o.trace && !(tr = pp_cli_trace_start(o.trace, &sc.sim, PREPOST_VERSION, o.trace_packets, err,
                                           sizeof(err)))) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  struct pp_run_result res;
  enum pp_status s = pp_sim_run(&sc.sim, log, &res, err, sizeof(err));
  char terr[512];
  if (tr && pp_cli_trace_end(tr, terr, sizeof(terr)) && s == PP_OK) {
    fprintf(stderr, "prepost: %s\n", terr);
    pp_run_result_free(&res);
    return EXIT_USAGE;
  }
  if (log && log != stderr)
    fclose(log);
  if (s != PP_OK) {
    fprintf(stderr, "prepost: %s: %s\n", o.scenario, err);
    return EXIT_USAGE;
  }
  if (o.json)
    pp_report_json(stdout, &sc.sim, &res);
  else
    pp_report_table(stdout, &sc.sim, &res);
  rc = exit_code_of(res.outcome);
  pp_run_result_free(&res);
  return rc;
}

/* The usage of a command, or NULL. */
static const char *usage_of(const char *cmd)
{
  static const struct {
    const char *name;
    const char *const *usage;
  } cmds[] = {{"run", &run_usage},
              {"doctor", &pp_cli_doctor_usage},
              {"bench", &pp_cli_bench_usage},
              {"calibrate", &pp_cli_calibrate_usage},
              {"trace", &pp_trace_usage},
              {"replay", &pp_replay_usage},
              {"explore", &pp_explore_usage},
              {"mpirun", &pp_mpirun_usage},
              {"help", &help_usage}};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(cmd, cmds[i].name))
      return *cmds[i].usage;
  return NULL;
}

static int cmd_help(int argc, char **argv)
{
  if (argc < 2) {
    fputs(main_usage, stdout);
    return EXIT_OK;
  }
  if (argc > 2)
    return pp_cli_usage_error("prepost", help_usage, "one command at a time (extra argument '%s')",
                              argv[2]);
  if (!strcmp(argv[1], "keys")) {
    pp_scenario_print_keys(stdout);
    return EXIT_OK;
  }
  const char *u = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ? help_usage
                                                                          : usage_of(argv[1]);
  if (!u)
    return pp_cli_usage_error("prepost", main_usage, "no help for unknown command '%s'", argv[1]);
  fputs(u, stdout);
  return EXIT_OK;
}

int main(int argc, char **argv)
{
  char perr[768];
  if (pp_plugins_from_args(&argc, argv, perr, sizeof perr)) { /* --plugin, PREPOST_PLUGINS */
    fprintf(stderr, "prepost: %s\n", perr);
    return EXIT_USAGE;
  }
  if (argc < 2)
    return pp_cli_usage_error("prepost", main_usage, "%s", "missing COMMAND");
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
    fputs(main_usage, stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version")) {
    printf("prepost %s (commit %s)\nmodels: %s\n", PREPOST_VERSION, pp_build_commit(),
           pp_cli_models_dir());
    return EXIT_OK;
  }
  /* each command gets its own name as argv[0] */
  if (!strcmp(cmd, "run"))
    return cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "doctor"))
    return pp_cli_doctor(argc - 1, argv + 1);
  if (!strcmp(cmd, "bench"))
    return pp_cli_bench(argc - 1, argv + 1);
  if (!strcmp(cmd, "calibrate"))
    return pp_cli_calibrate(argc - 1, argv + 1);
  if (!strcmp(cmd, "trace"))
    return pp_cli_trace(argc - 1, argv + 1);
  if (!strcmp(cmd, "replay"))
    return pp_cli_replay(argc - 1, argv + 1);
  if (!strcmp(cmd, "explore"))
    return pp_cli_explore(argc - 1, argv + 1);
  if (!strcmp(cmd, "mpirun")) /* its own parser: PROG's arguments follow it */
    return pp_mpirun_main(argc - 1, argv + 1, argv);
  if (!strcmp(cmd, "help"))
    return cmd_help(argc - 1, argv + 1);
  return pp_cli_usage_error("prepost", main_usage, cmd[0] == '-' ? "unknown option '%s'"
                                                                   : "unknown command '%s'", cmd);
}
