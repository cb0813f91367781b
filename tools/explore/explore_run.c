/*
 * prepost explore: runs scenarios in child processes (SimGrid allows one simulation per process),
 * each bounded in wall-clock time, its verdict sent back through a pipe (tools/explore/explore.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/explore/explore.h"
#include "tools/trace/trace_cli.h"

#ifndef PREPOST_VERSION
#define PREPOST_VERSION "?"
#endif

#ifdef PREPOST_GCOV
void __gcov_dump(void); /* libgcov: write the counters (a child leaves by _exit) */
#endif

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void write_all(int fd, const void *buf, size_t n)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return;
    p += k;
    n -= (size_t)k;
  }
}

/* In the child: run, judge, send the verdict, leave without running the parent's atexit
 * handlers or flushing its stdio buffers. */
static void child_main(const struct pp_scenario *sc, int fd, const char *trace, const char *log)
{
  static struct pp_verdict v;
  char err[512] = "";
  memset(&v, 0, sizeof v);
  FILE *lf = log ? fopen(log, "w") : NULL;
  struct pp_cli_trace *tr = NULL;
  /* one failing seed: every packet, for the pictures and the pcap of its diagnosis */
  if (trace && !(tr = pp_cli_trace_start(trace, &sc->sim, PREPOST_VERSION, true, err, sizeof err)))
    fprintf(stderr, "prepost explore: %s\n", err);
  struct pp_run_result res;
  enum pp_status st = pp_sim_run(&sc->sim, lf, &res, err, sizeof err);
  char terr[256];
  if (tr && pp_cli_trace_end(tr, terr, sizeof terr))
    fprintf(stderr, "prepost explore: %s\n", terr);
  if (lf)
    fclose(lf);
  if (st != PP_OK) {
    /* the driver names the rank when an engine failed during the run (simrun.c: fail()) */
    v.inv = strncmp(err, "rank ", 5) ? PP_INV_SETUP : PP_INV_ENGINE;
    snprintf(v.why, sizeof v.why, "%s: %.200s", pp_status_name(st), err);
  } else {
    v.inv = pp_explore_check(sc, &res, v.why, sizeof v.why);
    v.outcome = res.outcome;
    v.sim_ns = res.sim_time_ns;
    for (uint32_t i = 0; i < res.nranks; i++) {
      const struct pp_rank_result *r = &res.ranks[i];
      v.messages += r->stats.messages_received;
      v.rnr_naks += r->nic.rnr_naks_received;
      v.dropped += r->nic.packets_dropped;
      v.async += r->stats.async_events;
      for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
        v.errors += r->stats.status_counts[k];
      const uint64_t *a = (const uint64_t *)(const void *)&r->faults;
      uint64_t *b = (uint64_t *)(void *)&v.fired;
      for (size_t k = 0; k < sizeof v.fired / sizeof(uint64_t); k++)
        b[k] += a[k];
    }
    pp_run_result_free(&res);
  }
  write_all(fd, &v, sizeof v);
  close(fd);
#ifdef PREPOST_GCOV
  __gcov_dump();
#endif
  _exit(0);
}

struct job {
  bool busy;
  pid_t pid;
  int fd;
  int errfd; /* the child's stderr (a deleted temporary file): the tail goes into a crash
                verdict, the rest (SimGrid's and sanitizers' chatter) is dropped */
  uint64_t id;
  double start;
  size_t got;
  struct pp_verdict v;
};

struct pp_explore_pool {
  unsigned n;
  double timeout_s;
  const char *trace, *log;
  struct job *jobs;
};

struct pp_explore_pool *pp_explore_pool_create(unsigned jobs, double timeout_s)
{
  struct pp_explore_pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->n = jobs ? jobs : 1;
  p->timeout_s = timeout_s;
  p->jobs = calloc(p->n, sizeof *p->jobs);
  if (!p->jobs) {
    free(p);
    return NULL;
  }
  return p;
}

static void reap(struct job *j, bool kill_it)
{
  if (kill_it)
    kill(j->pid, SIGKILL);
  int status = 0;
  while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
    ;
  close(j->fd);
  j->busy = false;
  if (kill_it || j->got == sizeof j->v) {
    close(j->errfd);
    return;
  }
  memset(&j->v, 0, sizeof j->v);
  j->v.inv = PP_INV_CRASH;
  int at;
  if (WIFSIGNALED(status))
    at = snprintf(j->v.why, sizeof j->v.why, "the simulation process died of signal %d (%s)",
                  WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    at = snprintf(j->v.why, sizeof j->v.why, "the simulation process exited with status %d and "
                                             "no verdict",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  /* the last line of what it said on stderr that names an error */
  char tail[4096];
  off_t end = lseek(j->errfd, 0, SEEK_END);
  off_t from = end > (off_t)sizeof tail - 1 ? end - (off_t)sizeof tail + 1 : 0;
  ssize_t n = end > 0 ? pread(j->errfd, tail, sizeof tail - 1, from) : 0;
  close(j->errfd);
  if (n <= 0 || at < 0 || (size_t)at >= sizeof j->v.why)
    return;
  tail[n] = '\0';
  char *line = NULL;
  for (char *p = strtok(tail, "\n"); p; p = strtok(NULL, "\n"))
    if (strstr(p, "ERROR") || strstr(p, "rror:") || strstr(p, "ssert") || !line)
      line = p;
  if (line)
    snprintf(j->v.why + at, sizeof j->v.why - (size_t)at, ": %s", line);
}

void pp_explore_pool_destroy(struct pp_explore_pool *p)
{
  if (!p)
    return;
  for (unsigned i = 0; i < p->n; i++)
    if (p->jobs[i].busy)
      reap(&p->jobs[i], true);
  free(p->jobs);
  free(p);
}

unsigned pp_explore_pool_running(const struct pp_explore_pool *p)
{
  unsigned k = 0;
  for (unsigned i = 0; i < p->n; i++)
    k += p->jobs[i].busy;
  return k;
}

bool pp_explore_pool_start(struct pp_explore_pool *p, uint64_t id, const struct pp_scenario *sc)
{
  struct job *j = NULL;
  for (unsigned i = 0; i < p->n && !j; i++)
    if (!p->jobs[i].busy)
      j = &p->jobs[i];
  if (!j)
    return false;
  int fds[2];
  char errpath[] = "/tmp/prepost-explore-XXXXXX";
  int errfd = mkstemp(errpath);
  if (errfd < 0)
    return false;
  unlink(errpath);
  if (pipe(fds) != 0) {
    close(errfd);
    return false;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    close(errfd);
    return false;
  }
  if (pid == 0) {
    close(fds[0]);
    for (unsigned i = 0; i < p->n; i++)
      if (p->jobs[i].busy) {
        close(p->jobs[i].fd);
        close(p->jobs[i].errfd);
      }
    dup2(errfd, STDERR_FILENO);
    close(errfd);
    /* the child's stdout is the parent's: keep it clean (SimGrid is set to critical only) */
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      close(devnull);
    }
    child_main(sc, fds[1], p->trace, p->log);
  }
  close(fds[1]);
  *j = (struct job){
      .busy = true, .pid = pid, .fd = fds[0], .errfd = errfd, .id = id, .start = now_s()};
  return true;
}

bool pp_explore_pool_wait(struct pp_explore_pool *p, double wait_s, uint64_t *id,
                          struct pp_verdict *v)
{
  double until = wait_s < 0 ? -1 : now_s() + wait_s;
  for (;;) {
    struct pollfd pfd[64];
    struct job *which[64];
    nfds_t n = 0;
    double t = now_s(), next = until;
    for (unsigned i = 0; i < p->n && n < 64; i++) {
      struct job *j = &p->jobs[i];
      if (!j->busy)
        continue;
      if (p->timeout_s > 0 && t - j->start >= p->timeout_s) { /* a hang of the simulator */
        reap(j, true);
        memset(&j->v, 0, sizeof j->v);
        j->v.inv = PP_INV_WALLCLOCK;
        snprintf(j->v.why, sizeof j->v.why, "killed after %.1f s of wall-clock time",
                 p->timeout_s);
        j->v.wall_s = t - j->start;
        *id = j->id;
        *v = j->v;
        return true;
      }
      if (p->timeout_s > 0 && (next < 0 || j->start + p->timeout_s < next))
        next = j->start + p->timeout_s;
      pfd[n] = (struct pollfd){.fd = j->fd, .events = POLLIN};
      which[n++] = j;
    }
    if (n == 0)
      return false;
    int ms = next < 0 ? -1 : (int)((next - t) * 1000) + 1;
    if (ms < -1)
      ms = 0;
    int k = poll(pfd, n, ms);
    if (k < 0 && errno != EINTR)
      return false;
    for (nfds_t i = 0; k > 0 && i < n; i++) {
      if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      struct job *j = which[i];
      ssize_t r = read(j->fd, (char *)&j->v + j->got, sizeof j->v - j->got);
      if (r > 0)
        j->got += (size_t)r;
      if (r <= 0 || j->got == sizeof j->v) {
        reap(j, false);
        j->v.wall_s = now_s() - j->start;
        *id = j->id;
        *v = j->v;
        return true;
      }
    }
    if (until >= 0 && now_s() >= until)
      return false;
  }
}

void pp_explore_run(const struct pp_scenario *sc, double timeout_s, const char *trace,
                    const char *log, struct pp_verdict *v)
{
  struct pp_explore_pool *p = pp_explore_pool_create(1, timeout_s);
  uint64_t id;
  memset(v, 0, sizeof *v);
  if (!p) {
    v->inv = PP_INV_SETUP;
    snprintf(v->why, sizeof v->why, "out of memory");
    return;
  }
  p->trace = trace;
  p->log = log;
  if (!pp_explore_pool_start(p, 0, sc)) {
    v->inv = PP_INV_SETUP;
    snprintf(v->why, sizeof v->why, "cannot start a child process: %s", strerror(errno));
  } else {
    while (!pp_explore_pool_wait(p, -1, &id, v))
      ;
  }
  pp_explore_pool_destroy(p);
}
