/*
 * prepost mpirun: runs an unmodified MPI program (built by Debian's mpicc.mpich) on the simulated
 * backend, one process per rank, each connected to its rank's actor (serve.c) by a socketpair,
 * with tools/mpi's libmpich.so.12 first on LD_LIBRARY_PATH. tools/mpi/README.md has the design.
 */
#define _GNU_SOURCE
#include "mpirun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/cli/cli_util.h"
#include "link.h"
#include "tools/scenario/scenario.h"
#include "tools/trace/trace_cli.h"
#include "serve.h"
#include "mpirun_verbs.h"

#include "prepost/simapp.h"

#define MPIRUN_MAX_RANKS 256u

/* the launcher turned address randomisation off for --trace (reexec_without_aslr): the ranks
 * get it back */
static bool aslr_was_on;

const char *const pp_mpirun_usage =
    "usage: prepost mpirun -n N [--seed S] [--scenario FILE] [--poll-ns T] [--no-progress T]\n"
    "                      [--trace FILE] [--models DIR] [--backend sim|verbs [--device NAME]\n"
    "                      [--timeout T]] [-h|--help] PROG [ARGS...]\n"
    "\n"
    "Runs the MPI program PROG (built with Debian's mpicc.mpich, unmodified) with N ranks on the\n"
    "simulated backend: one process per rank, run in lock-step with the simulation (one rank\n"
    "process runs at a time), so the same binary, seed and scenario give the same output.\n"
    "MPI_Wtime is simulated time; computing between MPI calls takes no simulated time, and a\n"
    "call that finds nothing to do (a test or probe that fails, MPI_Wtime) takes --poll-ns.\n"
    "\n"
    "  -n N            ranks (1..256)\n"
    "  --seed S        the seed of every random choice of the simulation (default 1)\n"
    "  --scenario FILE platform, NIC, protocol (eager or rndv), p2p and QP parameters and faults\n"
    "                  of a scenario file (models/scenarios/README.md); its ranks and workload\n"
    "                  are replaced. Default: a generated 100 Gb/s cluster, the default NIC,\n"
    "                  protocol eager\n"
    "  --poll-ns T     simulated time an idle test, probe or MPI_Wtime takes (default 100ns)\n"
    "  --no-progress T stop when no rank made progress for T of simulated time (default 1s)\n"
    "  --trace FILE    record the run as `prepost run --trace` does, the program's calls into\n"
    "                  each rank's engine too: `prepost replay FILE` replays it exactly and\n"
    "                  explains a hang (--hang); the header names the program (mpirun.*)\n"
    "  --models DIR    where the scenario's relative paths resolve\n"
    "  --backend B     sim (default) or verbs: the same program on an RDMA device of this\n"
    "                  machine (rxe, mlx5), one engine process per rank next to each rank's\n"
    "                  process; MPI_Wtime is wall time, the scenario's faults are simulated only,\n"
    "                  a hang is no rank moving for --no-progress of wall time (default 5s)\n"
    "  --device NAME   verbs: the device (default: the first with an ACTIVE port)\n"
    "  --timeout T     verbs: end the job after T of wall time (exit 3; default: no bound)\n"
    "  -h, --help      this help\n"
    "\n"
    "Options come before PROG (`-np N` is -n N; `--seed=3` or `--seed 3`; durations with\n"
    "their unit: 100ns, 5s); PROG's own arguments follow it and are not read here.\n"
    "\n"
    "Environment: PREPOST_MPI_LIBDIR, the directory holding libmpich.so.12 (default: the\n"
    "build's tools/mpi).\n"
    "\n"
    "Exit codes: 0 every rank called MPI_Finalize and exited 0; MPI_Abort's error code; a rank's\n"
    "own non-zero exit status (128 + signal when killed); 2 usage or input error; 3 a hang (no\n"
    "rank can make progress: a report names each rank's blocked MPI call and the wait-for\n"
    "cycle); 4 verbs: no usable device, or the bootstrap failed.\n";

struct opts {
  uint32_t n;
  uint64_t seed;
  bool has_seed;
  const char *scenario, *models, *trace;
  uint64_t poll_ns, no_progress_ns, timeout_ns; /* durations with their unit */
  bool has_poll, has_no_progress, has_timeout;
  char **prog;
  bool verbs;         /* --backend verbs */
  const char *device; /* verbs */
};

static int usage_error(const char *what)
{
  return pp_cli_usage_error("prepost mpirun", pp_mpirun_usage, "%s", what);
}

/* The options as every command reads them (tools/cli/cli_util.h: `--seed=3`, unique prefixes,
 * durations with their unit), up to PROG: the first operand ends them, PROG's own arguments
 * follow it (`--` may end them too). `-np N`, MPI launchers' spelling, is `-n N`. argv[0] is
 * "mpirun". */
static int parse(int argc, char **argv, struct opts *o)
{
  enum { O_SEED = 256, O_SCENARIO, O_TRACE, O_MODELS, O_POLL, O_NOPROG, O_BACKEND, O_DEVICE,
         O_TIMEOUT };
  static const struct option longs[] = {
      {"help", no_argument, NULL, 'h'},         {"seed", required_argument, NULL, O_SEED},
      {"scenario", required_argument, NULL, O_SCENARIO},
      {"trace", required_argument, NULL, O_TRACE}, {"models", required_argument, NULL, O_MODELS},
      {"poll-ns", required_argument, NULL, O_POLL},
      {"no-progress", required_argument, NULL, O_NOPROG},
      {"backend", required_argument, NULL, O_BACKEND},
      {"device", required_argument, NULL, O_DEVICE},
      {"timeout", required_argument, NULL, O_TIMEOUT}, {0, 0, 0, 0}};
  /* -np N: rewritten to -n N among the options, never among PROG's arguments (the first
   * word that is neither an option nor an option's value, or what follows --) */
  static char dash_n[] = "-n";
  for (int i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-np"))
      argv[i] = dash_n;
    if (!strcmp(argv[i], "-n") ||
        (a[1] == '-' && !strchr(a, '=') && strncmp(a + 2, "help", strlen(a + 2))))
      i++; /* its value follows */
  }
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "+hn:", .longs = longs,
                          .who = "prepost mpirun", .usage = pp_mpirun_usage};
  int c, rc;
  uint64_t v;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return 2;
    case 'h':
      fputs(pp_mpirun_usage, stdout);
      return 100;
    case 'n':
      if ((rc = pp_cli_opt_uint(&g, 1, MPIRUN_MAX_RANKS, &v)))
        return rc;
      o->n = (uint32_t)v;
      break;
    case O_SEED:
      if ((rc = pp_cli_opt_uint(&g, 0, UINT64_MAX, &o->seed)))
        return rc;
      o->has_seed = true;
      break;
    case O_SCENARIO:
      o->scenario = g.arg;
      break;
    case O_TRACE:
      o->trace = g.arg;
      break;
    case O_MODELS:
      o->models = g.arg;
      break;
    case O_POLL:
      if ((rc = pp_cli_opt_duration(&g, 0, UINT64_MAX, &o->poll_ns)))
        return rc;
      if (o->poll_ns == 0)
        return pp_cli_opt_error(&g, "must be > 0 (a polling loop must let time pass), got '%s'",
                                g.arg);
      o->has_poll = true;
      break;
    case O_NOPROG:
      if ((rc = pp_cli_opt_duration(&g, 0, UINT64_MAX, &o->no_progress_ns)))
        return rc;
      o->has_no_progress = true;
      break;
    case O_BACKEND:
      if (strcmp(g.arg, "sim") && strcmp(g.arg, "verbs"))
        return pp_cli_opt_error(&g, "wants sim or verbs, got '%s'", g.arg);
      o->verbs = !strcmp(g.arg, "verbs");
      break;
    case O_DEVICE:
      if (strlen(g.arg) >= VNIC_NAME_MAX)
        return pp_cli_opt_error(&g, "name too long: %s", g.arg);
      o->device = g.arg;
      break;
    case O_TIMEOUT:
      if ((rc = pp_cli_opt_duration(&g, 0, UINT64_MAX, &o->timeout_ns)))
        return rc;
      o->has_timeout = true;
      break;
    default:
      return usage_error("unexpected option");
    }
  }
  if (!o->n)
    return usage_error("missing -n N");
  if (g.rest >= argc)
    return usage_error("missing PROG");
  if (!o->verbs && (o->device || o->has_timeout))
    return usage_error("--device and --timeout are for --backend verbs");
  if (o->verbs && o->trace) /* serve.c's recorder runs in the simulation's actors only */
    return usage_error("--trace records the simulated backend only, not --backend verbs");
  o->prog = argv + g.rest;
  return -1;
}

/* The simulation: the scenario's (or the defaults'), N ranks of workload api. */
static int sim_config(const struct opts *o, struct pp_scenario *sc, uint64_t *poll_ns)
{
  char err[1024];
  const char *models = o->models ? o->models : pp_cli_models_dir();
  if (o->scenario) {
    if (pp_scenario_load(o->scenario, models, sc, err, sizeof(err)) != PP_OK) {
      fprintf(stderr, "prepost mpirun: %s\n", err);
      return 2;
    }
    if (sc->sim.engine.protocol != PP_PROTO_EAGER && sc->sim.engine.protocol != PP_PROTO_RNDV) {
      fprintf(stderr, "prepost mpirun: %s: protocol %s: MPI needs eager or rndv\n", o->scenario,
              pp_protocol_name(sc->sim.engine.protocol));
      return 2;
    }
  } else {
    pp_scenario_defaults(sc);
    snprintf(sc->sim.name, sizeof(sc->sim.name), "mpirun");
    pp_engine_cfg_protocol(&sc->sim.engine, "eager"); /* and its defaults */
  }
  /* the engine wants a peer: -n 1 simulates a second rank that runs no process */
  sc->sim.engine.nranks = o->n < 2 ? 2 : o->n;
  sc->sim.engine.workload = (struct pp_workload){
      .kind = PP_WORKLOAD_APP, .pattern = PP_PATTERN_RING, .messages = 1, .size = 4096};
  if (o->has_seed)
    sc->sim.seed = sc->sim.engine.seed = o->seed;
  *poll_ns = o->has_poll ? o->poll_ns : 100;
  if (o->has_no_progress)
    sc->sim.no_progress_ns = o->no_progress_ns;
  if (pp_engine_cfg_check(&sc->sim.engine, err, sizeof(err)) != PP_OK) {
    fprintf(stderr, "prepost mpirun: %s\n", err);
    return 2;
  }
  return -1;
}

/* The directory of tools/mpi's libmpich.so.12. */
static const char *lib_dir(void)
{
  const char *d = getenv("PREPOST_MPI_LIBDIR");
  return d && *d ? d : PREPOST_MPI_LIBDIR;
}

/* In the child: the environment of a rank, then exec. Never returns. */
void pp_mpirun_exec_rank(char **prog, int fd, uint32_t rank, uint32_t n)
{
  char v[32], path[PATH_MAX + 4096];
  signal(SIGPIPE, SIG_DFL);
  snprintf(v, sizeof(v), "%d", fd);
  setenv(PP_LINK_FD_ENV, v, 1);
  snprintf(v, sizeof(v), "%u", rank);
  setenv("PMI_RANK", v, 1);
  snprintf(v, sizeof(v), "%u", n);
  setenv("PMI_SIZE", v, 1);
  const char *old = getenv("LD_LIBRARY_PATH");
  snprintf(path, sizeof(path), "%s%s%s", lib_dir(), old && *old ? ":" : "", old ? old : "");
  setenv("LD_LIBRARY_PATH", path, 1);
#ifdef PREPOST_MPI_PRELOAD
  /* a sanitized library needs its runtime first in a program that was not built with it */
  setenv("LD_PRELOAD", PREPOST_MPI_PRELOAD, 1);
#endif
  execvp(prog[0], prog);
  int err = errno;
  /* in lock-step as the library's constructor would have been: the rank says so only when its
   * actor runs it, so which ranks say it before the job ends is the same in every run */
  char go;
  if (read(fd, &go, 1) == 1)
    fprintf(stderr, "prepost mpirun: cannot run '%s': %s\n", prog[0], strerror(err));
  _exit(127);
}

/* Starts the N rank processes, each stopped in the library's constructor until its actor says go. */
/* Every rank's engine runs the application workload with the no-op callbacks: serve.c drives
 * it through the simulator's hook (pp_sim_set_hook), polling pp_p2p_test. */
static enum pp_status rank_callbacks(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
                                     void **user_data)
{
  (void)rank;
  pp_app_callbacks_default(cb);
  *user_data = ctx;
  return PP_OK;
}

static int spawn(const struct opts *o, int *fds, pid_t *pids)
{
  for (uint32_t i = 0; i < o->n; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      fprintf(stderr, "prepost mpirun: socketpair: %s\n", strerror(errno));
      return -1;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "prepost mpirun: fork: %s\n", strerror(errno));
      close(sv[0]);
      close(sv[1]);
      return -1;
    }
    if (p == 0) {
      int child = fcntl(sv[1], F_DUPFD, 3); /* without CLOEXEC: the program inherits it */
      if (child < 0)
        _exit(127);
      int pers = aslr_was_on ? personality(0xffffffff) : -1;
      if (pers != -1 && personality((unsigned long)pers & ~(unsigned long)ADDR_NO_RANDOMIZE) == -1)
        _exit(127);
      pp_mpirun_exec_rank(o->prog, child, i, o->n);
    }
    close(sv[1]);
    fds[i] = sv[0];
    pids[i] = p;
  }
  return 0;
}

/* --backend verbs: the same configuration on a device (mpirun_verbs.c). */
static int run_verbs(const struct opts *o, struct pp_scenario *sc, uint64_t poll_ns)
{
  static struct pp_run_cfg run;
  static const struct pp_faults no_faults;
  if (memcmp(&sc->sim.faults, &no_faults, sizeof(no_faults)) != 0)
    fprintf(stderr, "prepost mpirun: note: %s: its faults (loss, jitter, ...) are simulated only; "
                    "the verbs backend does not inject them\n",
            o->scenario);
  pp_sim_run_cfg(&sc->sim, &run);
  struct pp_p2p_params prm;
  pp_p2p_params_resolve(&sc->sim.engine, &prm);
  struct pp_mpirun_verbs_cfg c = {.n = o->n, .engine_ranks = sc->sim.engine.nranks,
                                  .prog = o->prog, .run = &run, .nic = {.gid_index = -1},
                                  .poll_ns = poll_ns, .no_progress_ns = 5000000000ull,
                                  .max_requests = prm.max_requests};
  if (o->device)
    snprintf(c.nic.device, sizeof(c.nic.device), "%s", o->device);
  if (o->has_no_progress)
    c.no_progress_ns = sc->sim.no_progress_ns;
  if (o->has_timeout)
    c.timeout_ns = o->timeout_ns;
  return pp_mpirun_verbs(&c);
}

/* --trace: the run's trace, its header naming the program and the launcher's settings */
static struct pp_cli_trace *trace_start(const struct opts *o, const struct pp_sim_config *cfg,
                                        uint64_t poll_ns, char *err, size_t errlen)
{
  enum { MAX_KEYS = 40 };
  struct pp_cli_trace_key k[MAX_KEYS] = {
      {.key = "mpirun.program", .str = o->prog[0]},
      {.key = "mpirun.n", .u = o->n},
      {.key = "mpirun.poll_ns", .u = poll_ns},
  };
  size_t n = 3, nargs = 0;
  char names[MAX_KEYS][32];
  for (char **a = o->prog + 1; *a && n < MAX_KEYS; a++, n++, nargs++) {
    int w = snprintf(names[n], sizeof names[n], "mpirun.arg.%zu", nargs + 1);
    if (w < 0 || (size_t)w >= sizeof names[n])
      break;
    k[n] = (struct pp_cli_trace_key){.key = names[n], .str = *a};
  }
  return pp_cli_trace_start_keys(o->trace, cfg, PREPOST_VERSION, false, k, n, err, errlen);
}

/*
 * --trace: the trace holds the launcher's addresses: the engines' buffers, the copies of the
 * program's buffers (serve.c), and the rendezvous headers that carry them from rank to rank
 * (captured in MEM records, and fed back to the engines by the replay). With address space
 * randomisation they move from run to run, everything else in the trace is the same; so the
 * launcher runs itself again, once, with ADDR_NO_RANDOMIZE (as setarch -R, rr and gdb do): the
 * same binary, seed and scenario then give a byte-identical trace. The rank processes are given
 * their randomisation back (spawn). Where personality() is refused (a seccomp filter), the run
 * goes on as it is and says that its trace's addresses will differ.
 */
static void reexec_without_aslr(char **self)
{
  const char *mark = getenv("PREPOST_MPIRUN_ASLR");
  if (mark) { /* the re-executed launcher: give the ranks their randomisation back */
    aslr_was_on = !strcmp(mark, "1");
    if (unsetenv("PREPOST_MPIRUN_ASLR") != 0)
      fprintf(stderr, "prepost mpirun: note: unsetenv: %s\n", strerror(errno));
    return;
  }
  int cur = personality(0xffffffff);
  if (cur == -1 || (cur & ADDR_NO_RANDOMIZE))
    return;
  if (personality((unsigned long)cur | ADDR_NO_RANDOMIZE) == -1) {
    fprintf(stderr, "prepost mpirun: note: cannot turn address randomisation off (%s): the "
                    "trace's addresses differ from run to run\n", strerror(errno));
    return;
  }
  if (setenv("PREPOST_MPIRUN_ASLR", "1", 1) == 0)
    execv("/proc/self/exe", self);
  int e = errno; /* still here: run on as we are */
  if (unsetenv("PREPOST_MPIRUN_ASLR") != 0 || personality((unsigned long)cur) == -1)
    e = errno;
  fprintf(stderr, "prepost mpirun: note: cannot run itself again without address randomisation "
                  "(%s): the trace's addresses differ from run to run\n", strerror(e));
}

int pp_mpirun_main(int argc, char **argv, char **self)
{
  struct opts o = {0};
  int rc = parse(argc, argv, &o);
  if (rc >= 0)
    return rc == 100 ? 0 : rc;
  if (o.trace && self)
    reexec_without_aslr(self);
  static struct pp_scenario sc;
  uint64_t poll_ns;
  if ((rc = sim_config(&o, &sc, &poll_ns)) >= 0)
    return rc;
  if (o.verbs)
    return run_verbs(&o, &sc, poll_ns);
  signal(SIGPIPE, SIG_IGN);
  int *fds = calloc(o.n, sizeof(*fds));
  pid_t *pids = calloc(o.n, sizeof(*pids));
  struct pp_mpi_srv *srv = NULL;
  rc = 2;
  char err[1024];
  struct pp_cli_trace *tr = NULL;
  if (!fds || !pids)
    goto out;
  /* before the ranks start: a trace that cannot be written runs nothing */
  if (o.trace && !(tr = trace_start(&o, &sc.sim, poll_ns, err, sizeof err))) {
    fprintf(stderr, "prepost mpirun: %s\n", err);
    goto out;
  }
  struct pp_p2p_params prm;
  pp_p2p_params_resolve(&sc.sim.engine, &prm);
  struct pp_mpi_srv_cfg cfg = {.nranks = o.n, .poll_ns = poll_ns, .max_requests = prm.max_requests};
  uint32_t started = 0;
  if (spawn(&o, fds, pids) != 0) {
    for (; started < o.n && pids[started] > 0; started++)
      kill(pids[started], SIGKILL);
    goto out;
  }
  if (pp_mpi_srv_create(&cfg, fds, pids, &srv) != PP_OK) {
    fprintf(stderr, "prepost mpirun: out of memory\n");
    goto out;
  }
  pp_sim_set_hook(pp_mpi_srv_app(srv));
  struct pp_run_result res;
  struct pp_sim_app app = {.rank = rank_callbacks, .ctx = srv};
  enum pp_status s = pp_sim_run_app(&sc.sim, &app, NULL, &res, err, sizeof(err));
  pp_sim_set_hook(NULL);
  fflush(NULL);
  /* the report (a hang's lines, or why the job ended) goes to the trace too (TEXT records) */
  char *report = NULL, terr[512];
  size_t report_len = 0;
  FILE *mf = s == PP_OK ? open_memstream(&report, &report_len) : NULL;
  if (mf) {
    pp_mpi_srv_report(srv, res.sim_time_ns, mf);
    if (fclose(mf) != 0) {
      free(report);
      report = NULL;
    }
  }
  int tend = 0;
  if (tr && report && pp_cli_trace_text(tr, res.sim_time_ns, PP_TTEXT_MPI_REPORT, report, terr,
                                        sizeof terr) != 0) {
    fprintf(stderr, "prepost mpirun: %s\n", terr);
    tend = -1;
  }
  char terr1[512];
  if (tr && pp_cli_trace_end(tr, terr1, sizeof terr1) != 0 && !tend) {
    memcpy(terr, terr1, sizeof terr);
    tend = -1;
  }
  tr = NULL;
  if (tend && s == PP_OK) {
    fprintf(stderr, "prepost mpirun: %s\n", terr);
    free(report);
    pp_mpi_srv_reap(srv);
    pp_run_result_free(&res);
    goto out;
  }
  if (s != PP_OK) {
    fprintf(stderr, "prepost mpirun: %s\n", err);
    pp_mpi_srv_reap(srv);
    goto out;
  }
  rc = pp_mpi_srv_exit_code(srv);
  if (report)
    fputs(report, stderr);
  else /* no memory for the copy: straight to stderr */
    pp_mpi_srv_report(srv, res.sim_time_ns, stderr);
  free(report);
  if (rc < 0)
    rc = 3;
  pp_mpi_srv_reap(srv);
  pp_run_result_free(&res);
out:
  if (tr) { /* the run did not happen: the trace's file is left as written so far */
    char terr2[512];
    (void)pp_cli_trace_end(tr, terr2, sizeof terr2);
  }
  pp_mpi_srv_destroy(srv);
  free(fds);
  free(pids);
  return rc;
}
