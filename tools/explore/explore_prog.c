/*
 * prepost explore --program PROG -n N: an MPI program (built by mpicc.mpich) run by `prepost
 * mpirun` across seeds, each seed drawing the protocol (eager or rndv) and the faults of the
 * catalogue that an MPI run survives (loss, jitter, cq, pause: the fatal ones, qp-error and rkey,
 * would fail a correct program). A run is judged by mpirun's exit status: 0 passes; an abort, a
 * rank's failure, a hang (3) or a run past the wall-clock bound fails, with a one-line
 * reproduction. Each run is a process of its own (one simulation per process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prepost/prng.h"
#include "tools/cli/cli_util.h"
#include "tools/explore/explore.h"

struct popts {
  const char *prog, *out;
  uint32_t n, seeds;
  uint64_t from;
  uint32_t faults;
  double rate;
  uint32_t timeout_s;
  char **args; /* PROG's arguments, NULL-terminated */
};

static const char *const usage_text =
    "usage: prepost explore --program PROG -n N [--seeds K] [--from S] [--faults LIST]\n"
    "                       [--fault-rate P] [--timeout SECONDS] [--out DIR] [-- ARGS...]\n"
    "Runs the MPI program PROG with N ranks under `prepost mpirun` for seeds S..S+K-1 (default\n"
    "1..20): each seed draws the protocol (eager or rndv) and each fault of LIST (default\n"
    "loss,jitter,cq,pause; only these four apply) with probability P (default 0.5). A seed\n"
    "fails when mpirun's exit status is not 0 (an abort, a failing rank, a hang: 3) or the run\n"
    "takes more than --timeout seconds of wall-clock time (default 120); its scenario is kept\n"
    "in DIR (default .) and a line says how to reproduce it.\n"
    "Exit codes: 0 every seed passed, 1 a seed failed, 2 usage error.\n";

#define PROG_FAULTS                                                                             \
  ((1u << PP_FAULT_LOSS) | (1u << PP_FAULT_JITTER) | (1u << PP_FAULT_CQ) | (1u << PP_FAULT_PAUSE))

static int bad(const char *fmt, const char *arg)
{
  fprintf(stderr, "prepost explore: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", usage_text);
  return 2;
}

static int parse(int argc, char **argv, struct popts *o)
{
  *o = (struct popts){.out = ".", .seeds = 20, .from = 1, .faults = PROG_FAULTS, .rate = 0.5,
                      .timeout_s = 120};
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 100;
    }
    if (i + 1 >= argc)
      return bad("%s needs a value", a);
    const char *v = argv[++i];
    char err[256];
    if (!strcmp(a, "--program")) {
      o->prog = v;
    } else if (!strcmp(a, "-n")) {
      if (pp_cli_parse_u32(v, 1, 256, &o->n))
        return bad("-n wants a number of ranks in 1..256, got '%s'", v);
    } else if (!strcmp(a, "--seeds")) {
      if (pp_cli_parse_u32(v, 1, 1000000, &o->seeds))
        return bad("--seeds wants 1..1000000, got '%s'", v);
    } else if (!strcmp(a, "--from")) {
      if (pp_cli_parse_u64(v, &o->from))
        return bad("--from wants a seed, got '%s'", v);
    } else if (!strcmp(a, "--timeout")) {
      if (pp_cli_parse_u32(v, 1, 86400, &o->timeout_s))
        return bad("--timeout wants seconds in 1..86400, got '%s'", v);
    } else if (!strcmp(a, "--fault-rate")) {
      char *end;
      o->rate = strtod(v, &end);
      if (*end || !(o->rate >= 0 && o->rate <= 1))
        return bad("--fault-rate wants a probability in 0..1, got '%s'", v);
    } else if (!strcmp(a, "--faults")) {
      if (pp_faults_parse(v, &o->faults, err, sizeof err))
        return bad("%s", err);
      if (o->faults & ~PROG_FAULTS) {
        o->faults &= PROG_FAULTS;
        fprintf(stderr, "prepost explore: --program: only loss, jitter, cq and pause apply to an "
                        "MPI run; the others are left out\n");
      }
    } else if (!strcmp(a, "--out")) {
      o->out = v;
    } else {
      return bad("unknown option '%s' with --program", a);
    }
  }
  if (!o->prog)
    return bad("%s", "missing --program PROG");
  if (!o->n)
    return bad("%s", "missing -n N");
  o->args = argv + i;
  return -1;
}

/* The seed's scenario, written to path: 0, or -1. */
static int write_scenario(const char *path, const struct popts *o, uint64_t seed, char *what,
                          size_t wlen)
{
  struct pp_prng g;
  pp_prng_seed(&g, pp_seed_derive(seed, PP_SEED_EXPLORE, 2)); /* 0, 1: the generator's own */
  bool on[PP_FAULT_COUNT];
  for (int f = 0; f < PP_FAULT_COUNT; f++)
    on[f] = (o->faults >> f & 1) && pp_prng_unit(&g) < o->rate;
  const char *proto = pp_prng_below(&g, 2) ? "rndv" : "eager";
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  fprintf(f, "# prepost explore --program: seed %llu\nname: program-seed-%llu\nranks: %u\n"
             "protocol: %s\nworkload:\n  pattern: ring\nqp:\n  timeout: 8\n  retry_cnt: 7\nfaults:\n",
          (unsigned long long)seed, (unsigned long long)seed, o->n < 2 ? 2 : o->n, proto);
  int w = snprintf(what, wlen, "%s", proto);
  size_t at = w > 0 && (size_t)w < wlen ? (size_t)w : 0;
  bool any = false;
#define ADD(...)                                                                                \
  do {                                                                                          \
    int k = snprintf(what + at, wlen - at, __VA_ARGS__);                                        \
    if (k > 0 && (size_t)k < wlen - at)                                                         \
      at += (size_t)k;                                                                          \
  } while (0)
  if (on[PP_FAULT_LOSS]) {
    double p = 0.001 * (double)pp_prng_range(&g, 1, 20);
    fprintf(f, "  loss: %.3f\n", p);
    ADD(", loss %.3f", p);
    any = true;
  }
  if (on[PP_FAULT_JITTER]) {
    uint64_t ns = pp_prng_log_range(&g, 100, 20000);
    fprintf(f, "  jitter: %lluns\n", (unsigned long long)ns);
    ADD(", jitter %lluns", (unsigned long long)ns);
    any = true;
  }
  if (on[PP_FAULT_CQ]) {
    uint64_t ns = pp_prng_log_range(&g, 100, 50000);
    fprintf(f, "  cq_delay: %lluns\n", (unsigned long long)ns);
    ADD(", cq_delay %lluns", (unsigned long long)ns);
    any = true;
  }
  if (on[PP_FAULT_PAUSE]) {
    uint32_t r = (uint32_t)pp_prng_below(&g, o->n);
    uint64_t at_ns = pp_prng_log_range(&g, 1000, 1000000), len = pp_prng_log_range(&g, 1000, 1000000);
    fprintf(f, "  pause_ranks: [%u]\n  pause_at: %lluns\n  pause: %lluns\n", r,
            (unsigned long long)at_ns, (unsigned long long)len);
    ADD(", pause rank %u", r);
    any = true;
  }
#undef ADD
  if (!any)
    fprintf(f, "  loss: 0\n");
  return fclose(f) == 0 ? 0 : -1;
}

/* Runs mpirun for one seed: its exit status (128 + signal), -1 when it could not start, -2 past
 * the wall-clock bound; the last line of its stderr in last. */
static int run_one(const struct popts *o, uint64_t seed, const char *scen, char *last, size_t n)
{
  char logpath[] = "/tmp/prepost-explore-prog-XXXXXX";
  int fd = mkstemp(logpath);
  if (fd < 0)
    return -1;
  unlink(logpath);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    return -1;
  }
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    setpgid(0, 0); /* its ranks with it, to be killed together past the bound */
    char seedarg[32], narg[16];
    snprintf(seedarg, sizeof seedarg, "%llu", (unsigned long long)seed);
    snprintf(narg, sizeof narg, "%u", o->n);
    size_t na = 0;
    while (o->args[na])
      na++;
    char **av = calloc(na + 12, sizeof *av);
    if (!av)
      _exit(126);
    size_t k = 0;
    av[k++] = "prepost";
    av[k++] = "mpirun";
    av[k++] = "-n";
    av[k++] = narg;
    av[k++] = "--seed";
    av[k++] = seedarg;
    av[k++] = "--scenario";
    av[k++] = (char *)scen;
    av[k++] = (char *)o->prog;
    for (size_t i = 0; i < na; i++)
      av[k++] = o->args[i];
    execv("/proc/self/exe", av);
    _exit(126);
  }
  int st = 0, rc;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) {
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (w < 0 || t.tv_sec - t0.tv_sec >= (time_t)o->timeout_s) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      rc = -2;
      break;
    }
    usleep(20000);
  }
  last[0] = '\0';
  FILE *f = fdopen(fd, "r");
  if (f) {
    rewind(f);
    char line[512];
    while (fgets(line, sizeof line, f))
      if (line[0] != '\n') {
        line[strcspn(line, "\n")] = '\0';
        snprintf(last, n, "%s", line);
      }
    fclose(f);
  } else {
    close(fd);
  }
  return rc;
}

int pp_explore_program(int argc, char **argv)
{
  struct popts o;
  int rc = parse(argc, argv, &o);
  if (rc >= 0)
    return rc == 100 ? 0 : rc;
  if (mkdir(o.out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "prepost explore: cannot create '%s': %s\n", o.out, strerror(errno));
    return 2;
  }
  const char *base = strrchr(o.prog, '/') ? strrchr(o.prog, '/') + 1 : o.prog;
  uint32_t failed = 0;
  for (uint64_t seed = o.from; seed < o.from + o.seeds; seed++) {
    char scen[4096], what[256], last[512];
    int w = snprintf(scen, sizeof scen, "%s/%s-seed-%llu.yaml", o.out, base,
                     (unsigned long long)seed);
    if (w < 0 || (size_t)w >= sizeof scen || write_scenario(scen, &o, seed, what, sizeof what)) {
      fprintf(stderr, "prepost explore: cannot write a scenario in '%s'\n", o.out);
      return 2;
    }
    int r = run_one(&o, seed, scen, last, sizeof last);
    if (r == 0) {
      printf("seed %llu: ok (%s)\n", (unsigned long long)seed, what);
      unlink(scen);
      continue;
    }
    failed++;
    if (r == -2)
      printf("seed %llu: FAIL (%s): killed after %u s of wall-clock time\n",
             (unsigned long long)seed, what, o.timeout_s);
    else
      printf("seed %llu: FAIL (%s): exit %d%s%s%s\n", (unsigned long long)seed, what, r,
             r == 3 ? " (a hang)" : "", last[0] ? ": " : "", last);
    printf("  reproduce: prepost mpirun -n %u --seed %llu --scenario %s %s", o.n,
           (unsigned long long)seed, scen, o.prog);
    for (char **a = o.args; *a; a++)
      printf(" %s", *a);
    printf("\n");
  }
  printf("%u of %u seeds failed\n", failed, o.seeds);
  return failed ? 1 : 0;
}
