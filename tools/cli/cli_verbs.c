/* prepost: the verbs side of the command line (`run --backend verbs`, `doctor`, `bench`). */
#define _POSIX_C_SOURCE 200809L
#include "tools/cli/cli_verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/verbs/boot.h"
#include "backends/verbs/doctor.h"
#include "prepost/verbsrun.h"
#include "tools/cli/buildinfo.h"
#include "tools/cli/cli_util.h"
#include "tools/report/report.h"
#include "tools/scenario/scenario.h"
#include "tools/trace/trace_cli.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2, EXIT_STALLED = 3 };

const char *const pp_cli_verbs_run_usage =
    "usage: prepost run SCENARIO --backend verbs [--device NAME] [--ib-port N] [--gid-index N]\n"
    "                   [--rank R --ranks TABLE] [--launch MODE] [--coordinator HOST[:PORT]]\n"
    "                   [--port P] [--timeout T] [--boot-timeout T]\n"
    "                   [--progress busy|event] [--busy-poll] [--seed N] [--set KEY=VALUE]...\n"
    "                   [--log FILE] [--trace FILE] [--json] [--models DIR] [--no-progress T]\n"
    "                   [-h|--help]\n"
    "\n"
    "Runs SCENARIO on an RDMA device through libibverbs, one process per rank, with the same\n"
    "report as the simulator (counts from real completions; RNR NAKs and retries from the\n"
    "device's counters, rxe or mlx5 names, null where it has none). Platform and NIC model of the\n"
    "scenario are ignored.\n"
    "\n"
    "Without --rank, every rank runs on this machine (forked processes on one device) and this\n"
    "process coordinates. With --rank R --ranks TABLE, this process is rank R only; start one per\n"
    "rank. TABLE is a file with one 'HOST[:PORT] [DEVICE]' line per rank, or 'HOST:PORT,HOST,...';\n"
    "rank 0 listens on its entry (port 18515 by default) and prints the report.\n"
    "\n"
    "Under a PMIx launcher (`mpirun -n N prepost run S --backend verbs`, `srun --mpi=pmix`)\n"
    "rank, size and connection information come through PMIx; rank 0 coordinates and reports.\n"
    "Without PMIx: rank and size from OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/NTASKS, the\n"
    "ranks meet at --coordinator (Slurm: by default SLURM_NODELIST's first host, port 18515).\n"
    "\n"
    "The bootstrap is authenticated by a per-job secret (not encrypted). The launcher makes one\n"
    "for its forked ranks. With --rank, every process reads the same secret from the file named\n"
    "by PREPOST_JOB_SECRET_FILE (32 random bytes or 64 hex digits, mode 0600, copied to every\n"
    "host), or from PREPOST_JOB_SECRET (64 hex digits). Connections without it are dropped and\n"
    "logged. Under PMIx, without either variable, rank 0 makes one and hands it to the others.\n"
    "\n"
    "  --device NAME      RDMA device (default: the first with an ACTIVE port)\n"
    "  --ib-port N        port of the device (default: its first ACTIVE port)\n"
    "  --gid-index N      GID index for RoCE (default: the RoCE v2 IPv4-mapped GID, else the\n"
    "                     first RoCE v2 one)\n"
    "  --launch MODE      auto (default): table with --rank, pmix under a PMIx launcher, env\n"
    "                     with --coordinator, else fork (every rank on this machine); or one of\n"
    "                     fork, table, env, pmix\n"
    "  --coordinator H:P  env: where rank 0 listens and the others connect; pmix: where rank 0's\n"
    "                     coordinator listens (default: its RoCE GID's IPv4 address, any port)\n"
    "  --port P           fork: the TCP port of the coordinator on 127.0.0.1 (default: any)\n"
    "  --timeout T        bound of the data phase, wall-clock (a duration with its unit: 90s,\n"
    "                     2min; default 120s)\n"
    "  --boot-timeout T   bound of each bootstrap step (default 20s)\n"
    "  --progress MODE    busy (default) polls the CQs without sleeping; event sleeps on the\n"
    "                     completion channel when idle (a wake-up per message); --busy-poll = busy\n"
    "  --no-progress T    stop when no rank made progress for T of wall-clock time (a duration:\n"
    "                     500ms, 2s; 0: never; default: the scenario's limits.no_progress, 1s);\n"
    "                     then, as when the ranks stall, each rank's hang report is collected\n"
    "                     and printed (--json: a \"hang\" object)\n"
    "  --seed N, --set KEY=VALUE, --log FILE, --json, --models DIR: as for the simulator (the\n"
    "                     log has one line per completion and async event, stamped with\n"
    "                     wall-clock time)\n"
    "  --trace FILE       record every rank (traces/FORMAT.md; time in ns from the run's start):\n"
    "                     each rank process writes FILE.rankN, merged into FILE at the end\n"
    "                     (with --rank: merge them with `prepost trace merge -o FILE PART...`)\n"
    "\n"
    "Exit codes: 0 completed, 1 error completions, 2 usage or input error, 3 stalled, timeout\n"
    "or no progress, 4 the backend could not start (no device, port down, bootstrap failed: the message says).\n";

const char *const pp_cli_doctor_usage =
    "usage: prepost doctor [--device NAME] [-h|--help]\n"
    "\n"
    "Checks whether this machine can run the verbs backend: RDMA kernel modules, devices, each\n"
    "port's state, physical state, link layer and active MTU, the GID table with RoCE versions\n"
    "(and the GID prepost picks), hw_counters, a 1 MiB memory registration, and the memlock\n"
    "limit. Ends with a verdict line.\n"
    "\n"
    "Exit codes: 0 ready (possibly with a warning), 1 not ready (no device, port down, ...),\n"
    "2 usage error.\n";

static int exit_code_of(enum pp_outcome o)
{
  return o == PP_OUTCOME_COMPLETED ? EXIT_OK : o == PP_OUTCOME_ERRORS ? EXIT_ERRORS : EXIT_STALLED;
}

/* After the run: the launcher merges its ranks' files into the trace and removes them; a rank of
 * a rank table leaves its own. Parts of ranks that never started are missing: the merge takes
 * what is there. 0, or -1 with a message on stderr. */
static int merge_trace(const struct pp_verbs_opts *o, uint32_t nranks)
{
  char(*names)[1100] = calloc(nranks, sizeof(*names));
  const char **parts = calloc(nranks, sizeof(*parts));
  int rc = -1;
  if (!names || !parts) {
    fprintf(stderr, "prepost: out of memory\n");
    goto out;
  }
  if (o->rank >= 0) {
    pp_verbs_trace_part(o->trace.path, (uint32_t)o->rank, names[0], sizeof(names[0]));
    fprintf(stderr, "prepost: rank %d recorded %s (merge the ranks' files with `prepost trace "
                    "merge -o %s PART...`)\n", o->rank, names[0], o->trace.path);
    rc = 0;
    goto out;
  }
  size_t n = 0;
  for (uint32_t r = 0; r < nranks; r++) {
    pp_verbs_trace_part(o->trace.path, r, names[r], sizeof(names[r]));
    if (access(names[r], R_OK) == 0)
      parts[n++] = names[r];
  }
  for (uint32_t r = 0; n && n < nranks && r < nranks; r++)
    if (access(names[r], R_OK) != 0)
      fprintf(stderr, "prepost: note: rank %u left no trace (%s)\n", r, names[r]);
  char err[1400];
  if (n == 0)
    fprintf(stderr, "prepost: no rank left a trace: %s not written\n", o->trace.path);
  else if (pp_cli_trace_merge(o->trace.path, parts, n, stderr, err, sizeof(err)))
    fprintf(stderr, "prepost: %s (the ranks' files are kept)\n", err);
  else
    rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++)
    remove(parts[i]);
out:
  free(names);
  free(parts);
  return rc;
}

enum { O_BACKEND = 256, O_DEVICE, O_IB_PORT, O_GID_INDEX, O_RANK, O_RANKS, O_PORT, O_TIMEOUT,
       O_BOOT_TIMEOUT, O_SEED, O_SET, O_LOG, O_MODELS, O_NO_PROGRESS, O_TRACE, O_PROGRESS,
       O_JSON, O_BUSY_POLL, O_LAUNCH, O_COORDINATOR };

static const struct option verbs_options[] = {
    {"backend", required_argument, NULL, O_BACKEND},
    {"device", required_argument, NULL, O_DEVICE},
    {"ib-port", required_argument, NULL, O_IB_PORT},
    {"gid-index", required_argument, NULL, O_GID_INDEX},
    {"rank", required_argument, NULL, O_RANK},
    {"ranks", required_argument, NULL, O_RANKS},
    {"port", required_argument, NULL, O_PORT},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"boot-timeout", required_argument, NULL, O_BOOT_TIMEOUT},
    {"seed", required_argument, NULL, O_SEED},
    {"set", required_argument, NULL, O_SET},
    {"log", required_argument, NULL, O_LOG},
    {"models", required_argument, NULL, O_MODELS},
    {"no-progress", required_argument, NULL, O_NO_PROGRESS},
    {"trace", required_argument, NULL, O_TRACE},
    {"progress", required_argument, NULL, O_PROGRESS},
    {"json", no_argument, NULL, O_JSON},
    {"busy-poll", no_argument, NULL, O_BUSY_POLL},
    {"launch", required_argument, NULL, O_LAUNCH},
    {"coordinator", required_argument, NULL, O_COORDINATOR},
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0}};

#define MAX_WALL_NS (1000000ull * 1000000000ull) /* 10^6 s */

int pp_cli_run_verbs(int argc, char **argv)
{
  const char *scenario = NULL, *log = NULL, *models = NULL, *ranks = NULL;
  bool json = false, has_seed = false, has_np = false;
  uint64_t seed = 0, v, no_progress = 0;
  struct pp_verbs_opts o;
  pp_verbs_opts_default(&o);
  const char *const U = pp_cli_verbs_run_usage;
  const char **sets = calloc((size_t)argc + 1, sizeof *sets);
  size_t nsets = 0;
  if (!sets)
    return EXIT_USAGE;
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = verbs_options,
                          .who = "prepost", .usage = U};
  int c, rc = -1;
  while (rc < 0 && (c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      rc = EXIT_USAGE;
      break;
    case 'h':
      fputs(U, stdout);
      rc = EXIT_OK;
      break;
    case O_JSON:
      json = true;
      break;
    case O_BUSY_POLL:
      o.progress = PP_VERBS_PROGRESS_BUSY;
      break;
    case O_BACKEND:
      if (strcmp(g.arg, "verbs") && strcmp(g.arg, "simgrid"))
        rc = pp_cli_opt_error(&g, "must be simgrid or verbs, got '%s'", g.arg);
      break;
    case O_PROGRESS: {
      int m = pp_verbs_progress_from_name(g.arg);
      if (m < 0)
        rc = pp_cli_opt_error(&g, "must be busy or event, got '%s'", g.arg);
      else
        o.progress = (enum pp_verbs_progress)m;
      break;
    }
    case O_LAUNCH: {
      int m = pp_verbs_launch_from_name(g.arg);
      if (m < 0)
        rc = pp_cli_opt_error(&g, "must be auto, fork, table, env or pmix, got '%s'", g.arg);
      else
        o.launch = (enum pp_verbs_launch)m;
      break;
    }
    case O_COORDINATOR: {
      char h[256], e2[300];
      uint16_t p;
      if (strlen(g.arg) >= sizeof(o.coordinator) ||
          boot_parse_hostport(g.arg, PP_VERBS_DEFAULT_PORT, h, sizeof(h), &p, e2, sizeof(e2)))
        rc = pp_cli_opt_error(&g, "wants HOST[:PORT], got '%s'", g.arg);
      else
        snprintf(o.coordinator, sizeof(o.coordinator), "%s", g.arg);
      break;
    }
    case O_DEVICE:
      if (strlen(g.arg) >= sizeof(o.nic.device))
        rc = pp_cli_opt_error(&g, "name is too long: '%s'", g.arg);
      else
        snprintf(o.nic.device, sizeof(o.nic.device), "%s", g.arg);
      break;
    case O_IB_PORT:
      if ((rc = pp_cli_opt_uint(&g, 1, 255, &v) ? EXIT_USAGE : -1) < 0)
        o.nic.port = (int)v;
      break;
    case O_GID_INDEX:
      if ((rc = pp_cli_opt_uint(&g, 0, 255, &v) ? EXIT_USAGE : -1) < 0)
        o.nic.gid_index = (int)v;
      break;
    case O_RANK:
      if ((rc = pp_cli_opt_uint(&g, 0, PP_MAX_RANKS - 1, &v) ? EXIT_USAGE : -1) < 0)
        o.rank = (int)v;
      break;
    case O_RANKS:
      ranks = g.arg;
      break;
    case O_PORT:
      if ((rc = pp_cli_opt_uint(&g, 0, 65535, &v) ? EXIT_USAGE : -1) < 0)
        o.coord_port = (uint16_t)v;
      break;
    case O_TIMEOUT:
      rc = pp_cli_opt_duration(&g, 1, MAX_WALL_NS, &o.run_timeout_ns) ? EXIT_USAGE : -1;
      break;
    case O_BOOT_TIMEOUT:
      rc = pp_cli_opt_duration(&g, 1, MAX_WALL_NS, &o.boot_timeout_ns) ? EXIT_USAGE : -1;
      break;
    case O_SEED:
      rc = pp_cli_opt_uint(&g, 0, UINT64_MAX, &seed) ? EXIT_USAGE : -1;
      has_seed = true;
      break;
    case O_SET:
      sets[nsets++] = g.arg;
      break;
    case O_LOG:
      log = g.arg;
      break;
    case O_NO_PROGRESS:
      rc = pp_cli_opt_duration(&g, 0, UINT64_MAX, &no_progress) ? EXIT_USAGE : -1;
      has_np = true;
      break;
    case O_TRACE:
      o.trace.path = g.arg;
      break;
    case O_MODELS:
      models = g.arg;
      break;
    default:
      rc = pp_cli_opt_error(&g, "is not handled%s", "");
    }
  }
  if (rc < 0 && g.rest >= argc)
    rc = pp_cli_usage_error("prepost", U, "%s", "missing SCENARIO");
  else if (rc < 0 && g.rest + 1 < argc)
    rc = pp_cli_usage_error("prepost", U, "one scenario at a time (extra argument '%s')",
                            argv[g.rest + 1]);
  if (rc >= 0) {
    free(sets);
    return rc;
  }
  scenario = argv[g.rest];
  if ((o.rank >= 0) != (ranks != NULL)) {
    free(sets);
    return pp_cli_usage_error("prepost", U, "%s", "--rank and --ranks go together");
  }
  if (!models)
    models = pp_cli_models_dir();
  static struct pp_scenario sc;
  char err[2048];
  enum pp_status ls = pp_scenario_load_set(scenario, models, sets, nsets, &sc, err, sizeof(err));
  free(sets);
  if (ls != PP_OK) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  if (pp_scenario_runs_nothing(&sc, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s: %s\n", scenario, err);
    return EXIT_USAGE;
  }
  if (has_seed)
    sc.sim.seed = sc.sim.engine.seed = seed;
  if (has_np)
    sc.sim.no_progress_ns = no_progress;
  static const struct pp_faults no_faults;
  if (memcmp(&sc.sim.faults, &no_faults, sizeof(no_faults)) != 0)
    fprintf(stderr, "prepost: note: %s: its faults (loss, jitter, ...) are simulated only; the "
                    "verbs backend does not inject them\n",
            scenario);
  if (ranks && pp_verbs_parse_table(ranks, &o.table, &o.ntable, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s\n", err);
    return EXIT_USAGE;
  }
  if (ranks) {
    int k = boot_secret_from_env(o.secret, err, sizeof(err));
    if (k < 0) {
      fprintf(stderr, "prepost: %s\n", err);
      free(o.table);
      return EXIT_USAGE;
    }
    o.has_secret = k > 0; /* none: pp_verbs_run says what to do */
  }
  if (log) {
    o.log_fd = strcmp(log, "-") ? open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)
                                : dup(2);
    if (o.log_fd < 0) {
      fprintf(stderr, "prepost: cannot write log '%s': %s\n", log, strerror(errno));
      free(o.table);
      return EXIT_USAGE;
    }
  }
  if (o.trace.path) {
    o.trace.version = PREPOST_VERSION;
    o.trace.commit = pp_build_commit();
    o.trace.capture_bytes = pp_cli_trace_capture(&sc.sim.engine);
  }
  struct pp_run_result res;
  bool reporter = false;
  static struct pp_run_cfg run; /* the scenario's backend-neutral part (prepost/run.h) */
  pp_sim_run_cfg(&sc.sim, &run);
  enum pp_status s = pp_verbs_run(&run, &o, &res, &reporter, err, sizeof(err));
  if (o.log_fd >= 0)
    close(o.log_fd);
  free(o.table);
  if (o.trace.path && merge_trace(&o, sc.sim.engine.nranks) && s == PP_OK) {
    if (reporter)
      pp_run_result_free(&res);
    return EXIT_USAGE;
  }
  if (s != PP_OK) {
    fprintf(stderr, "prepost: %s: verbs backend: %s\n", scenario, err);
    return s == PP_INVALID ? EXIT_USAGE : PP_EXIT_BACKEND;
  }
  rc = exit_code_of(res.outcome);
  if (reporter) {
    if (json)
      pp_report_json_on(stdout, &sc.sim, &res, "verbs");
    else
      pp_report_table_on(stdout, &sc.sim, &res, "verbs");
    pp_run_result_free(&res);
  } else if (!json) {
    fprintf(stderr, "prepost: rank %d finished; outcome %s (rank 0 prints the report)\n", o.rank,
            pp_outcome_name(res.outcome));
  }
  return rc;
}

int pp_cli_doctor(int argc, char **argv)
{
  static const struct option opts[] = {{"device", required_argument, NULL, 'd'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "h", .longs = opts,
                          .who = "prepost", .usage = pp_cli_doctor_usage};
  const char *device = NULL;
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    if (c == PP_CLI_BAD)
      return EXIT_USAGE;
    if (c == 'h') {
      fputs(pp_cli_doctor_usage, stdout);
      return EXIT_OK;
    }
    device = g.arg;
  }
  if (g.rest < argc)
    return pp_cli_usage_error("prepost", pp_cli_doctor_usage, "unexpected argument '%s'",
                              argv[g.rest]);
  return pp_verbs_doctor(stdout, device);
}

int pp_cli_bench(int argc, char **argv)
{
  return pp_verbs_bench_main(argc, argv);
}
