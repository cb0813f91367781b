/* prepost: the command line. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buildinfo.h"
#include "cli_util.h"
#include "cli_verbs.h"
#include "cli/plugin.h"
#include "explore.h"
#include "report.h"
#include "scenario.h"
#include "trace_cli.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2, EXIT_STALLED = 3 };

static const char *const main_usage =
    "usage: prepost [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  run SCENARIO   run a scenario on the simulated backend and report the result\n"
    "                 (--backend verbs: on an RDMA device, one process per rank)\n"
    "  doctor         can this machine run the verbs backend? devices, ports, GIDs, memlock\n"
    "  bench          engine vs raw verbs latency and bandwidth on an RDMA device\n"
    "  trace          dump, summarise or export (pcap, perfetto, svg) a trace\n"
    "  replay TRACE   re-drive the engines with a trace's inputs and check their outputs\n"
    "  explore        seeded exploration of races and faults: invariants, shrinking, replay\n"
    "  help COMMAND   show the help of a command\n"
    "\n"
    "Every command takes --plugin PATH (repeatable; also PREPOST_PLUGINS=a.so:b.so): a shared\n"
    "object that registers protocols of its own (README: Write your own protocol).\n"
    "\n"
    "Exit codes: 0 every operation completed successfully, 1 the run ended with error\n"
    "completions, 2 usage or input error, 3 the run stalled, hit max_sim_time or made no\n"
    "progress with operations pending, 4 (verbs) the backend could not start.\n";

static const char *const run_usage =
    "usage: prepost run SCENARIO [--seed N] [--log FILE] [--json] [--models DIR]\n"
    "                            [--trace FILE [--trace-packets]]\n"
    "\n"
    "Runs SCENARIO (a YAML file, see models/scenarios/README.md) on the SimGrid backend.\n"
    "\n"
    "  --seed N      override the scenario's seed (drives every random choice)\n"
    "  --log FILE    write the NIC event log (one line per packet, completion and QP state\n"
    "                change, stamped with simulated nanoseconds; '-' for stderr)\n"
    "  --json        print one JSON object on stdout instead of the table\n"
    "  --trace FILE  record every rank's inputs and outputs (enough for an exact replay, the\n"
    "                exports but pcap, and hang reports) and the RNR NAK and NAK packets\n"
    "                (traces/FORMAT.md); cheap enough to leave on\n"
    "  --trace-packets  with --trace: record every packet too (data, ACKs, read responses), as\n"
    "                `prepost trace export --pcap` needs; it costs more (traces/FORMAT.md)\n"
    "  --no-progress T  stop when no rank made progress for T (a duration: 500us, 2ms, 1s;\n"
    "                0: never), simulated time; overrides the scenario's limits.no_progress\n"
    "                (default 1s). Progress: a send or receive finished towards the workload,\n"
    "                or a change in what a pending operation waits for (credits, CTS, head)\n"
    "  --backend B   simgrid (default) or verbs (see `prepost run --backend verbs --help`)\n"
    "  --models DIR  where relative platform and NIC paths resolve (default: $PREPOST_MODELS,\n"
    "                else the installation's share/prepost/models, else the source tree's\n"
    "                models/; `prepost --version` prints which)\n"
    "  -h, --help    this help\n"
    "\n"
    "When ranks are not done at the end (stalled at quiescence, timeout, no progress, or\n"
    "errors) a hang report follows the table: per rank what each pending operation waits for,\n"
    "the wait-for graph between ranks, its cycle and the cause (--json: a \"hang\" object).\n"
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
  const char *no_progress; /* --no-progress T, applied over the scenario's limits */
};

static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(run_usage, stdout);
      return EXIT_OK + 100;
    } else if (!strcmp(a, "--json")) {
      o->json = true;
    } else if (!strcmp(a, "--trace-packets")) {
      o->trace_packets = true;
    } else if (!strcmp(a, "--backend") && i + 1 < argc && !strcmp(argv[i + 1], "simgrid")) {
      i++;
    } else if (!strcmp(a, "--seed") || !strcmp(a, "--log") || !strcmp(a, "--models") ||
               !strcmp(a, "--trace") || !strcmp(a, "--no-progress")) {
      if (i + 1 >= argc)
        return pp_cli_usage_error("prepost", run_usage, "%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--seed")) {
        if (pp_cli_parse_u64(v, &o->seed))
          return pp_cli_usage_error("prepost", run_usage, "--seed wants a non-negative integer, got '%s'", v);
        o->has_seed = true;
      } else if (!strcmp(a, "--log")) {
        o->log = v;
      } else if (!strcmp(a, "--trace")) {
        o->trace = v;
      } else if (!strcmp(a, "--no-progress")) {
        o->no_progress = v;
      } else {
        o->models = v;
      }
    } else if (a[0] == '-' && a[1]) {
      return pp_cli_usage_error("prepost", run_usage, "unknown option '%s'", a);
    } else if (o->scenario) {
      return pp_cli_usage_error("prepost", run_usage, "one scenario at a time (extra argument '%s')", a);
    } else {
      o->scenario = a;
    }
  }
  if (!o->scenario)
    return pp_cli_usage_error("prepost", run_usage, "%s", "missing SCENARIO");
  if (o->trace_packets && !o->trace)
    return pp_cli_usage_error("prepost", run_usage, "%s", "--trace-packets goes with --trace");
  return -1;
}

static int cmd_run(int argc, char **argv)
{
  for (int i = 0; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--backend") && strcmp(argv[i + 1], "simgrid"))
      return pp_cli_run_verbs(argc, argv);
  struct run_opts o = {0};
  int rc = parse_run_args(argc, argv, &o);
  if (rc >= 0)
    return rc == EXIT_OK + 100 ? EXIT_OK : rc;
  if (!o.models)
    o.models = pp_cli_models_dir();
  static struct pp_scenario sc;
  char err[1024];
  if (pp_scenario_load(o.scenario, o.models, &sc, err, sizeof(err)) != PP_OK) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  if (o.has_seed)
    sc.sim.seed = sc.sim.engine.seed = o.seed;
  if (o.no_progress &&
      pp_duration_parse(o.no_progress, "--no-progress", &sc.sim.no_progress_ns, err,
                        sizeof(err)) != PP_OK)
    return pp_cli_usage_error("prepost", run_usage, "%s", err);
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
  if (!strcmp(cmd, "run"))
    return cmd_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "doctor"))
    return pp_cli_doctor(argc - 2, argv + 2);
  if (!strcmp(cmd, "bench"))
    return pp_cli_bench(argc - 2, argv + 2);
  if (!strcmp(cmd, "trace"))
    return pp_cli_trace(argc - 2, argv + 2);
  if (!strcmp(cmd, "replay"))
    return pp_cli_replay(argc - 2, argv + 2);
  if (!strcmp(cmd, "explore"))
    return pp_cli_explore(argc - 2, argv + 2);
  if (!strcmp(cmd, "help")) {
    if (argc > 2 && !strcmp(argv[2], "run")) {
      fputs(run_usage, stdout);
      return EXIT_OK;
    }
    if (argc > 2 && (!strcmp(argv[2], "doctor") || !strcmp(argv[2], "bench"))) {
      fputs(strcmp(argv[2], "doctor") ? pp_cli_bench_usage : pp_cli_doctor_usage, stdout);
      return EXIT_OK;
    }
    if (argc > 2 && (!strcmp(argv[2], "trace") || !strcmp(argv[2], "replay"))) {
      fputs(strcmp(argv[2], "trace") ? pp_replay_usage : pp_trace_usage, stdout);
      return EXIT_OK;
    }
    if (argc > 2 && !strcmp(argv[2], "explore")) {
      fputs(pp_explore_usage, stdout);
      return EXIT_OK;
    }
    fputs(main_usage, stdout);
    return argc > 2 ? EXIT_USAGE : EXIT_OK;
  }
  return pp_cli_usage_error("prepost", main_usage, "unknown command '%s'", cmd);
}
