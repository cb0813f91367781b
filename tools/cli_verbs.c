/* prepost: the verbs side of the command line (`run --backend verbs`, `doctor`, `bench`). */
#define _POSIX_C_SOURCE 200809L
#include "cli_verbs.h"

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
#include "buildinfo.h"
#include "cli_util.h"
#include "report.h"
#include "scenario.h"
#include "trace_cli.h"

enum { EXIT_OK = 0, EXIT_ERRORS = 1, EXIT_USAGE = 2, EXIT_STALLED = 3 };

const char *const pp_cli_verbs_run_usage =
    "usage: prepost run SCENARIO --backend verbs [--device NAME] [--ib-port N] [--gid-index N]\n"
    "                   [--rank R --ranks TABLE] [--port P] [--timeout S] [--boot-timeout S]\n"
    "                   [--progress busy|event] [--seed N] [--log FILE] [--trace FILE] [--json]\n"
    "                   [--models DIR] [--no-progress T]\n"
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
    "The bootstrap is authenticated by a per-job secret (not encrypted). The launcher makes one\n"
    "for its forked ranks. With --rank, every process reads the same secret from the file named\n"
    "by PREPOST_JOB_SECRET_FILE (32 random bytes or 64 hex digits, mode 0600; make it with\n"
    "`(umask 077; head -c 32 /dev/urandom > job.secret)` and copy it to every host), or from\n"
    "PREPOST_JOB_SECRET (64 hex digits). Connections without it are dropped and logged.\n"
    "\n"
    "  --device NAME      RDMA device (default: the first with an ACTIVE port)\n"
    "  --ib-port N        port of the device (default: its first ACTIVE port)\n"
    "  --gid-index N      GID index for RoCE (default: the RoCE v2 IPv4-mapped GID, else the\n"
    "                     first RoCE v2 one)\n"
    "  --port P           launcher: the TCP port of the coordinator on 127.0.0.1 (default: any)\n"
    "  --timeout S        bound of the data phase in wall-clock seconds (default 120)\n"
    "  --boot-timeout S   bound of each bootstrap step (default 20)\n"
    "  --progress MODE    how ranks wait for completions: busy (default) polls the CQs without\n"
    "                     ever sleeping; event sleeps on the completion channel when there is\n"
    "                     nothing to do (idle CPU, a wake-up per message); --busy-poll = busy\n"
    "  --no-progress T    stop when no rank made progress for T of wall-clock time (a duration:\n"
    "                     500ms, 2s; 0: never; default: the scenario's limits.no_progress, 1s);\n"
    "                     then, as when the ranks stall, each rank's hang report is collected\n"
    "                     and printed (--json: a \"hang\" object)\n"
    "  --seed N, --log FILE, --json, --models DIR: as for the simulator (the log has one line\n"
    "                     per completion and async event, stamped with wall-clock time)\n"
    "  --trace FILE       record every rank (traces/FORMAT.md; time in ns from the run's start):\n"
    "                     each rank process writes FILE.rankN, merged into FILE at the end\n"
    "                     (with --rank: merge them with `prepost trace merge -o FILE PART...`)\n"
    "\n"
    "Exit codes: 0 completed, 1 error completions, 2 usage or input error, 3 stalled, timeout\n"
    "or no progress,\n"
    "4 the backend could not start (no device, port down, bootstrap failed: the message says).\n";

const char *const pp_cli_doctor_usage =
    "usage: prepost doctor [--device NAME]\n"
    "\n"
    "Checks whether this machine can run the verbs backend: RDMA kernel modules, devices, each\n"
    "port's state, physical state, link layer and active MTU, the GID table with RoCE versions\n"
    "(and the GID prepost picks), hw_counters, a 1 MiB memory registration, and the memlock\n"
    "limit. Ends with a verdict line.\n"
    "\n"
    "Exit codes: 0 ready (possibly with a warning), 1 not ready (no device, port down, ...),\n"
    "2 usage error.\n";

static int parse_seconds(const char *s, uint64_t *ns)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v > 0) || v > 1e6)
    return -1;
  *ns = (uint64_t)llround(v * 1e9);
  return 0;
}

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

int pp_cli_run_verbs(int argc, char **argv)
{
  const char *scenario = NULL, *log = NULL, *models = NULL, *ranks = NULL;
  bool json = false, has_seed = false, has_np = false;
  uint64_t seed = 0, v, no_progress = 0;
  struct pp_verbs_opts o;
  pp_verbs_opts_default(&o);
  const char *const U = pp_cli_verbs_run_usage;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(U, stdout);
      return EXIT_OK;
    }
    if (!strcmp(a, "--json")) {
      json = true;
      continue;
    }
    if (!strcmp(a, "--busy-poll")) {
      o.progress = PP_VERBS_PROGRESS_BUSY;
      continue;
    }
    if (a[0] == '-' && a[1]) {
      static const char *const valued[] = {"--backend", "--device", "--ib-port", "--gid-index",
                                           "--rank",    "--ranks",  "--port",    "--timeout",
                                           "--boot-timeout", "--seed", "--log",  "--models",
                                           "--no-progress", "--trace", "--progress"};
      bool known = false;
      for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
        known = known || !strcmp(a, valued[k]);
      if (!known)
        return pp_cli_usage_error("prepost", U, "unknown option '%s'", a);
      if (i + 1 >= argc)
        return pp_cli_usage_error("prepost", U, "%s needs a value", a);
      const char *val = argv[++i];
      if (!strcmp(a, "--backend")) {
        if (strcmp(val, "verbs"))
          return pp_cli_usage_error("prepost", U, "--backend: 'simgrid' or 'verbs', got '%s'", val);
      } else if (!strcmp(a, "--progress")) {
        int m = pp_verbs_progress_from_name(val);
        if (m < 0)
          return pp_cli_usage_error("prepost", U, "--progress: 'busy' or 'event', got '%s'", val);
        o.progress = (enum pp_verbs_progress)m;
      } else if (!strcmp(a, "--device")) {
        if (strlen(val) >= sizeof(o.nic.device))
          return pp_cli_usage_error("prepost", U, "--device: name too long: '%s'", val);
        snprintf(o.nic.device, sizeof(o.nic.device), "%s", val);
      } else if (!strcmp(a, "--ib-port")) {
        if (pp_cli_parse_u64(val, &v) || v < 1 || v > 255)
          return pp_cli_usage_error("prepost", U, "--ib-port wants 1..255, got '%s'", val);
        o.nic.port = (int)v;
      } else if (!strcmp(a, "--gid-index")) {
        if (pp_cli_parse_u64(val, &v) || v > 255)
          return pp_cli_usage_error("prepost", U, "--gid-index wants 0..255, got '%s'", val);
        o.nic.gid_index = (int)v;
      } else if (!strcmp(a, "--rank")) {
        if (pp_cli_parse_u64(val, &v) || v >= PP_MAX_RANKS)
          return pp_cli_usage_error("prepost", U, "--rank wants a rank number, got '%s'", val);
        o.rank = (int)v;
      } else if (!strcmp(a, "--ranks")) {
        ranks = val;
      } else if (!strcmp(a, "--port")) {
        if (pp_cli_parse_u64(val, &v) || v > 65535)
          return pp_cli_usage_error("prepost", U, "--port wants 0..65535, got '%s'", val);
        o.coord_port = (uint16_t)v;
      } else if (!strcmp(a, "--timeout")) {
        if (parse_seconds(val, &o.run_timeout_ns))
          return pp_cli_usage_error("prepost", U, "--timeout wants seconds > 0, got '%s'", val);
      } else if (!strcmp(a, "--boot-timeout")) {
        if (parse_seconds(val, &o.boot_timeout_ns))
          return pp_cli_usage_error("prepost", U, "--boot-timeout wants seconds > 0, got '%s'", val);
      } else if (!strcmp(a, "--seed")) {
        if (pp_cli_parse_u64(val, &seed))
          return pp_cli_usage_error("prepost", U, "--seed wants a non-negative integer, got '%s'", val);
        has_seed = true;
      } else if (!strcmp(a, "--log")) {
        log = val;
      } else if (!strcmp(a, "--no-progress")) {
        char e2[512];
        if (pp_duration_parse(val, "--no-progress", &no_progress, e2, sizeof(e2)) != PP_OK)
          return pp_cli_usage_error("prepost", U, "%s", e2);
        has_np = true;
      } else if (!strcmp(a, "--trace")) {
        o.trace.path = val;
      } else {
        models = val;
      }
      continue;
    }
    if (scenario)
      return pp_cli_usage_error("prepost", U, "one scenario at a time (extra argument '%s')", a);
    scenario = a;
  }
  if (!scenario)
    return pp_cli_usage_error("prepost", U, "%s", "missing SCENARIO");
  if ((o.rank >= 0) != (ranks != NULL))
    return pp_cli_usage_error("prepost", U, "%s", "--rank and --ranks go together");
  if (!models)
    models = pp_cli_models_dir();
  static struct pp_scenario sc;
  char err[2048];
  if (pp_scenario_load(scenario, models, &sc, err, sizeof(err)) != PP_OK) {
    fprintf(stderr, "prepost: %s\n", err);
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
  int rc = exit_code_of(res.outcome);
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
  const char *device = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(pp_cli_doctor_usage, stdout);
      return EXIT_OK;
    }
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      device = argv[++i];
      continue;
    }
    return pp_cli_usage_error("prepost", pp_cli_doctor_usage, "unexpected argument '%s'", argv[i]);
  }
  return pp_verbs_doctor(stdout, device);
}

int pp_cli_bench(int argc, char **argv)
{
  return pp_verbs_bench_main(argc, argv);
}
