/*
 * prepost mpirun --backend verbs (tools/mpi/README.md, "Verbs"): the same MPI program on an
 * ibverbs device (rxe, mlx5), one engine process per rank on this machine.
 *
 *   launcher (the hub) --fork--> rank process R --fork+exec--> the MPI program of rank R
 *
 * Rank process R forks its MPI program first (before it opens the device: a fork after memory
 * registration would leave the registered pages copy-on-write), then opens the device and creates
 * its engine (prepost/verbsapp.h, "the program's exchange"), and meets the others through the
 * hub over a socketpair: INFO (its connection information for every peer) -> PEERS (what every
 * peer published for it) -> connect -> READY -> GO (the job's clock origin). Then it runs one
 * loop: a progress pass of the device and engine, then serve.c's step for its rank (the link's
 * requests of the MPI program, exactly as the simulation's actor serves them), and every
 * millisecond a look at the hub's socket. When the program has exited it says DONE (its exit
 * code) and keeps progressing, so that its peers finish their transfers, until the hub says BYE
 * (every rank done, or the job is stopped: MPI_Abort, a rank that failed, a hang).
 *
 * Hangs: every `no_progress` of wall time the hub asks every rank (PROBE) whether it is blocked
 * in an MPI call and how far it got (requests served, the engine's progress mark); when every
 * rank that has not exited is blocked and none moved since the previous probe, the job hangs:
 * each rank's blocked call is reported as in the simulation, with the wait-for cycle, exit 3.
 */
#define _GNU_SOURCE
#include "mpirun_verbs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mpirun.h"
#include "serve.h"

#include "prepost/hang.h"
#include "prepost/verbsapp.h"

#define EXIT_BACKEND 4
#define PROBE_ANSWER_NS 5000000000ull /* a probe's answer awaited; later: the rank is busy */

/* hub <-> rank messages, fixed size: the header, then `len` bytes */
enum hmsg {
  H_INFO,  /* rank -> hub: nranks struct pp_verbs_peer_info (its own slot zero) */
  H_FAIL,  /* rank -> hub: a sentence */
  H_PEERS, /* hub -> rank: nranks struct pp_verbs_peer_info (what each peer published for it) */
  H_READY, /* rank -> hub: connected */
  H_GO,    /* hub -> rank: u64 clock origin (CLOCK_MONOTONIC ns) */
  H_DONE,  /* rank -> hub: struct done_msg */
  H_PROBE, /* hub -> rank */
  H_STATE, /* rank -> hub: struct state_msg */
  H_BYE,   /* hub -> rank: stop (kill the program if it still runs) and exit */
};

struct hhdr {
  uint32_t type, len;
};

struct done_msg {
  int32_t code;
  uint8_t aborted;
  char why[256];
};

struct state_msg {
  uint8_t blocked, ended;
  int32_t waits_for;
  uint64_t mark;
  char line[400];
};

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool put(int fd, uint32_t type, const void *p, uint32_t len)
{
  struct hhdr h = {.type = type, .len = len};
  const char *parts[2] = {(const char *)&h, p};
  size_t lens[2] = {sizeof(h), len};
  for (int k = 0; k < 2; k++)
    for (size_t off = 0; off < lens[k];) {
      ssize_t w = send(fd, parts[k] + off, lens[k] - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return false;
      off += (size_t)w;
    }
  return true;
}

static bool get_n(int fd, void *p, size_t n)
{
  for (size_t off = 0; off < n;) {
    ssize_t k = read(fd, (char *)p + off, n - off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    off += (size_t)k;
  }
  return true;
}

/* One message of at most max bytes into p; its type, or -1 (EOF, too long). */
static int get(int fd, void *p, uint32_t max, uint32_t *len)
{
  struct hhdr h;
  if (!get_n(fd, &h, sizeof(h)) || h.len > max || !get_n(fd, p, h.len))
    return -1;
  *len = h.len;
  return (int)h.type;
}

/* ------------------------------------------------------------------ the rank process */

struct rankp {
  const struct pp_mpirun_verbs_cfg *c;
  uint32_t rank;
  int hub;
  pid_t prog;
  int link; /* our end of the program's link */
  struct pp_verbs_rank *vr;
  struct pp_mpi_srv *srv;
  uint64_t t0;
};

static _Noreturn void rank_fail(struct rankp *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static _Noreturn void rank_fail(struct rankp *p, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (k < 0)
    msg[0] = 0;
  (void)put(p->hub, H_FAIL, msg, (uint32_t)strlen(msg) + 1);
  if (p->prog > 0) {
    kill(p->prog, SIGKILL);
    while (waitpid(p->prog, NULL, 0) < 0 && errno == EINTR)
      ;
  }
  pp_mpi_srv_destroy(p->srv);
  pp_verbs_rank_close(p->vr);
  _exit(EXIT_BACKEND);
}

/* The program of this rank, stopped in the library's constructor until serve.c says go. */
static void start_program(struct rankp *p)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    rank_fail(p, "rank %u: socketpair: %s", p->rank, strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    rank_fail(p, "rank %u: fork: %s", p->rank, strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* its rank process gone: so is it */
    int child = fcntl(sv[1], F_DUPFD, 3); /* without CLOEXEC: the program inherits it */
    if (child < 0)
      _exit(127);
    pp_mpirun_exec_rank(p->c->prog, child, p->rank, p->c->n);
  }
  close(sv[1]);
  p->link = sv[0];
  p->prog = pid;
}

/* Device, engine, connection through the hub; returns at GO. */
static void rank_boot(struct rankp *p)
{
  char err[1024];
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  struct pp_run_cfg cfg = *p->c->run;
  cfg.engine.nranks = p->c->engine_ranks;
  if (pp_verbs_rank_open(&cfg, p->rank, &p->c->nic, &cb, NULL, &p->vr, err, sizeof(err)) != PP_OK)
    rank_fail(p, "%s", err);
  uint32_t n = p->c->engine_ranks;
  size_t bytes = n * sizeof(struct pp_verbs_peer_info);
  struct pp_verbs_peer_info *info = calloc(n, sizeof(*info));
  if (!info)
    rank_fail(p, "rank %u: out of memory", p->rank);
  for (uint32_t q = 0; q < n; q++)
    if (q != p->rank && !pp_verbs_rank_local_info(p->vr, q, &info[q]))
      rank_fail(p, "rank %u: no connection information for rank %u", p->rank, q);
  uint32_t len;
  if (!put(p->hub, H_INFO, info, (uint32_t)bytes) ||
      get(p->hub, info, (uint32_t)bytes, &len) != H_PEERS || len != bytes)
    rank_fail(p, "rank %u: lost the launcher during the bootstrap", p->rank);
  for (uint32_t q = 0; q < n; q++)
    if (q != p->rank && pp_verbs_rank_connect(p->vr, q, &info[q], err, sizeof(err)) != PP_OK) {
      free(info);
      rank_fail(p, "%s", err);
    }
  free(info);
  if (!put(p->hub, H_READY, NULL, 0) || get(p->hub, &p->t0, sizeof(p->t0), &len) != H_GO ||
      len != sizeof(p->t0))
    rank_fail(p, "rank %u: lost the launcher during the bootstrap", p->rank);
  if (pp_verbs_rank_start(p->vr, err, sizeof(err)) != PP_OK)
    rank_fail(p, "%s", err);
}

static void rank_state(struct rankp *p, struct state_msg *m)
{
  memset(m, 0, sizeof(*m));
  m->waits_for = -1;
  if (!p->srv) {
    m->ended = 1;
    return;
  }
  uint64_t served = 0;
  m->ended = pp_mpi_srv_rank_ended(p->srv, p->rank);
  m->blocked = !m->ended && pp_mpi_srv_rank_blocked(p->srv, p->rank, &served);
  m->waits_for = m->blocked ? pp_mpi_srv_rank_waits_for(p->srv, p->rank) : -1;
  m->mark = served * 1000003u + pp_engine_progress_mark(pp_verbs_rank_engine(p->vr));
  FILE *f = fmemopen(m->line, sizeof(m->line) - 1, "w");
  if (f) {
    pp_mpi_srv_report_rank(p->srv, p->rank, f);
    fclose(f);
  }
}

/* The hub's messages waiting now; true: BYE (or the hub is gone). */
static bool rank_hub(struct rankp *p)
{
  struct pollfd pf = {.fd = p->hub, .events = POLLIN};
  while (poll(&pf, 1, 0) > 0) {
    char buf[64];
    uint32_t len;
    int t = get(p->hub, buf, sizeof(buf), &len);
    if (t == H_PROBE) {
      struct state_msg m;
      rank_state(p, &m);
      if (!put(p->hub, H_STATE, &m, sizeof(m)))
        return true;
    } else {
      return true; /* BYE, EOF, or anything else */
    }
  }
  return false;
}

/* The engine's peer of a one-rank job: no program, done at once, progressing until BYE. */
static _Noreturn void rank_idle(struct rankp *p)
{
  char err[1024];
  struct done_msg d = {0};
  if (!put(p->hub, H_DONE, &d, sizeof(d)))
    _exit(0);
  for (;;) {
    if (pp_verbs_rank_progress(p->vr, err, sizeof(err)) != PP_OK)
      rank_fail(p, "%s", err);
    usleep(1000);
    if (rank_hub(p))
      break;
  }
  pp_verbs_rank_close(p->vr);
  _exit(0);
}

static _Noreturn void rank_main(const struct pp_mpirun_verbs_cfg *c, uint32_t rank, int hub)
{
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  struct rankp p = {.c = c, .rank = rank, .hub = hub, .link = -1};
  if (rank < c->n) {
    setenv("PREPOST_MPI_BACKEND", "verbs", 1); /* MPI_Wtime is wall time (tests/mpi/env.c) */
    start_program(&p);
  }
  rank_boot(&p);
  if (rank >= c->n)
    rank_idle(&p);
  int *fds = malloc(c->n * sizeof(*fds));
  pid_t *pids = calloc(c->n, sizeof(*pids));
  if (!fds || !pids)
    rank_fail(&p, "rank %u: out of memory", rank);
  for (uint32_t i = 0; i < c->n; i++)
    fds[i] = -1;
  fds[rank] = p.link;
  pids[rank] = p.prog;
  struct pp_mpi_srv_cfg sc = {.nranks = c->n, .poll_ns = c->poll_ns,
                              .max_requests = c->max_requests};
  if (pp_mpi_srv_create(&sc, fds, pids, &p.srv) != PP_OK)
    rank_fail(&p, "rank %u: out of memory", rank);
  free(fds);
  free(pids);
  struct pp_engine *e = pp_verbs_rank_engine(p.vr);
  char err[1024];
  bool said_done = false;
  uint64_t next_hub = 0;
  for (;;) {
    if (pp_verbs_rank_progress(p.vr, err, sizeof(err)) != PP_OK)
      rank_fail(&p, "%s", err);
    uint64_t now = mono_ns();
    if (!said_done) {
      (void)pp_mpi_srv_step(p.srv, rank, e, now - p.t0);
      if (pp_mpi_srv_rank_ended(p.srv, rank)) {
        struct done_msg d = {0};
        bool ab = false;
        d.code = pp_mpi_srv_rank_exit(p.srv, rank, &ab, d.why, sizeof(d.why));
        d.aborted = ab;
        said_done = true;
        if (!put(hub, H_DONE, &d, sizeof(d)))
          break;
      }
    }
    if (now >= next_hub) {
      next_hub = now + 1000000u;
      if (rank_hub(&p))
        break;
    }
  }
  pp_mpi_srv_reap(p.srv);
  pp_mpi_srv_destroy(p.srv);
  pp_verbs_rank_close(p.vr);
  fflush(NULL);
  _exit(0);
}

/* ------------------------------------------------------------------ the hub */

struct hub {
  const struct pp_mpirun_verbs_cfg *c;
  int *fd;
  pid_t *pid;
  bool *done;
  bool *owed; /* a probe's answer is still to come (the rank was inside a long call) */
  struct done_msg *res;
  uint32_t ndone;
};

static void hub_bye(struct hub *h)
{
  uint32_t n = h->c->engine_ranks;
  for (uint32_t i = 0; i < n; i++)
    if (h->fd[i] >= 0)
      (void)put(h->fd[i], H_BYE, NULL, 0);
  for (uint32_t i = 0; i < n; i++) {
    if (h->pid[i] <= 0)
      continue;
    /* a rank process inside a blocking read of its program (a program computing) gets 2 s */
    int st;
    uint64_t end = mono_ns() + 2000000000ull;
    while (waitpid(h->pid[i], &st, WNOHANG) == 0 && mono_ns() < end)
      usleep(2000);
    if (waitpid(h->pid[i], &st, WNOHANG) == 0) {
      kill(h->pid[i], SIGKILL);
      while (waitpid(h->pid[i], &st, 0) < 0 && errno == EINTR)
        ;
    }
    h->pid[i] = 0;
  }
}

/* A message from rank i; false: that rank's process failed (a sentence printed). */
static bool hub_recv(struct hub *h, uint32_t i, void *buf, uint32_t max, int want, uint32_t *len)
{
  int t = get(h->fd[i], buf, max, len);
  if (t == want)
    return true;
  if (t == H_FAIL) {
    ((char *)buf)[*len ? *len - 1 : 0] = 0;
    fprintf(stderr, "prepost mpirun: verbs backend: %s\n", (char *)buf);
  } else {
    fprintf(stderr, "prepost mpirun: verbs backend: rank %u's process ended during the %s\n", i,
            want == H_DONE ? "run" : "bootstrap");
  }
  return false;
}

static int hub_boot(struct hub *h)
{
  uint32_t n = h->c->engine_ranks, nproc = n;
  size_t row = n * sizeof(struct pp_verbs_peer_info);
  struct pp_verbs_peer_info *all = calloc(n, row), *mine = calloc(n, sizeof(*mine));
  char *buf = malloc(row + 1024);
  int rc = EXIT_BACKEND;
  if (!all || !mine || !buf)
    goto out;
  uint32_t len;
  for (uint32_t i = 0; i < nproc; i++) {
    if (!hub_recv(h, i, buf, (uint32_t)row + 1024, H_INFO, &len))
      goto out;
    if (len != row) {
      fprintf(stderr, "prepost mpirun: verbs backend: rank %u sent %u bytes of connection "
                      "information, not %zu\n", i, len, row);
      goto out;
    }
    memcpy(&all[(size_t)i * n], buf, row);
  }
  for (uint32_t i = 0; i < nproc; i++) {
    for (uint32_t q = 0; q < n; q++)
      mine[q] = all[(size_t)q * n + i];
    if (!put(h->fd[i], H_PEERS, mine, (uint32_t)row))
      goto out;
  }
  for (uint32_t i = 0; i < nproc; i++)
    if (!hub_recv(h, i, buf, 1024, H_READY, &len))
      goto out;
  uint64_t t0 = mono_ns();
  for (uint32_t i = 0; i < nproc; i++)
    if (!put(h->fd[i], H_GO, &t0, sizeof(t0)))
      goto out;
  rc = -1;
out:
  free(all);
  free(mine);
  free(buf);
  return rc;
}

/* Probes every rank; true when the job hangs (every rank not ended blocked, none moved since
 * the previous probe: marks). The answers in st. */
static bool hub_probe(struct hub *h, uint64_t *marks, bool *have, struct state_msg *st,
                      bool *lost)
{
  uint32_t n = h->c->engine_ranks;
  bool hang = true;
  for (uint32_t i = 0; i < n; i++)
    if (!h->done[i] && !h->owed[i]) {
      if (!put(h->fd[i], H_PROBE, NULL, 0))
        *lost = true;
      h->owed[i] = true;
    }
  for (uint32_t i = 0; i < n; i++) {
    if (h->done[i]) {
      st[i] = (struct state_msg){.ended = 1, .waits_for = -1};
      continue;
    }
    /* DONE may come before the answer */
    uint64_t end = mono_ns() + PROBE_ANSWER_NS;
    for (;;) {
      struct pollfd pf = {.fd = h->fd[i], .events = POLLIN};
      uint64_t now = mono_ns();
      if (now >= end || poll(&pf, 1, (int)((end - now) / 1000000u) + 1) <= 0)
        return false; /* busy in a long call (its program computing): not a hang */
      char buf[sizeof(struct state_msg) + sizeof(struct done_msg)];
      uint32_t len;
      int t = get(h->fd[i], buf, sizeof(buf), &len);
      if (t == H_DONE && len == sizeof(struct done_msg)) {
        memcpy(&h->res[i], buf, sizeof(h->res[i]));
        h->done[i] = true;
        h->ndone++;
        if (h->res[i].code != 0 && h->res[i].why[0])
          fprintf(stderr, "prepost mpirun: %s\n", h->res[i].why);
        return false;
      }
      if (t != H_STATE || len != sizeof(struct state_msg)) {
        *lost = true;
        return false;
      }
      h->owed[i] = false;
      memcpy(&st[i], buf, sizeof(st[i]));
      break;
    }
    if (st[i].ended)
      continue;
    if (!st[i].blocked || !have[i] || marks[i] != st[i].mark)
      hang = false;
    marks[i] = st[i].mark;
    have[i] = true;
  }
  return hang;
}

static void hub_hang_report(const struct hub *h, const struct state_msg *st, uint64_t at)
{
  uint32_t n = h->c->n;
  fprintf(stderr, "prepost mpirun: hang at %.3f us: no rank made progress for %.3f s\n",
          (double)at / 1e3, (double)h->c->no_progress_ns / 1e9);
  for (uint32_t i = 0; i < n; i++)
    if (h->done[i])
      fprintf(stderr, "  rank %u: %s\n", i, h->res[i].code == 0 ? "finalized and exited" : "exited");
    else
      fputs(st[i].line, stderr);
  for (uint32_t s = 0; s < n; s++) {
    uint32_t cur = s, steps = 0;
    while (st[cur].waits_for >= 0 && (uint32_t)st[cur].waits_for < n && steps <= n) {
      cur = (uint32_t)st[cur].waits_for;
      if (++steps && cur == s)
        break;
    }
    if (cur != s || !steps)
      continue;
    fprintf(stderr, "  wait-for cycle: rank %u", s);
    do {
      cur = (uint32_t)st[cur].waits_for;
      fprintf(stderr, " -> rank %u", cur);
    } while (cur != s);
    fputs(steps == 1 ? " (a deadlock: the rank waits for a message of its own)\n"
                     : " (a deadlock: each waits for the next)\n",
          stderr);
    return;
  }
  fputs("  no wait-for cycle between the blocked ranks (a receive no rank sends, or a wildcard)\n",
        stderr);
}

/* The exit code of the job from the ranks' DONE, or -1 while some run. */
static int hub_code(const struct hub *h)
{
  uint32_t n = h->c->engine_ranks;
  for (uint32_t i = 0; i < n; i++)
    if (h->done[i] && h->res[i].aborted)
      return h->res[i].code;
  for (uint32_t i = 0; i < n; i++)
    if (h->done[i] && h->res[i].code != 0)
      return h->res[i].code;
  return h->ndone == n ? 0 : -1;
}

static int hub_run(struct hub *h)
{
  uint32_t n = h->c->engine_ranks;
  uint64_t t0 = mono_ns(), next_probe = t0 + h->c->no_progress_ns;
  uint64_t *marks = calloc(n, sizeof(*marks));
  bool *have = calloc(n, sizeof(*have));
  struct state_msg *st = calloc(n, sizeof(*st));
  struct pollfd *pf = calloc(n, sizeof(*pf));
  int rc = EXIT_BACKEND;
  if (!marks || !have || !st || !pf)
    goto out;
  while ((rc = hub_code(h)) < 0) {
    uint64_t now = mono_ns();
    if (h->c->timeout_ns && now - t0 >= h->c->timeout_ns) {
      fprintf(stderr, "prepost mpirun: verbs backend: the job did not end in %.1f s "
                      "(--timeout)\n", (double)h->c->timeout_ns / 1e9);
      rc = 3;
      goto out;
    }
    if (h->c->no_progress_ns && now >= next_probe) {
      bool lost = false;
      if (hub_probe(h, marks, have, st, &lost)) {
        hub_hang_report(h, st, mono_ns() - t0);
        rc = 3;
        goto out;
      }
      if (lost) {
        rc = EXIT_BACKEND;
        goto out;
      }
      next_probe = mono_ns() + h->c->no_progress_ns;
      continue;
    }
    for (uint32_t i = 0; i < n; i++)
      pf[i] = (struct pollfd){.fd = h->done[i] ? -1 : h->fd[i], .events = POLLIN};
    int k = poll(pf, n, 10);
    for (uint32_t i = 0; k > 0 && i < n; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char buf[1024 + sizeof(struct done_msg) + sizeof(struct state_msg)];
      uint32_t len;
      if (h->owed[i] && pf[i].revents & POLLIN) { /* a late probe answer, or DONE */
        int t = get(h->fd[i], buf, sizeof(buf), &len);
        if (t == H_STATE) {
          h->owed[i] = false;
          continue;
        }
        if (t != H_DONE || len != sizeof(struct done_msg))
          goto out;
      } else if (!hub_recv(h, i, buf, sizeof(buf), H_DONE, &len) ||
                 len != sizeof(struct done_msg)) {
        goto out;
      }
      memcpy(&h->res[i], buf, sizeof(h->res[i]));
      h->done[i] = true;
      h->ndone++;
      if (h->res[i].code != 0 && h->res[i].why[0])
        fprintf(stderr, "prepost mpirun: %s\n", h->res[i].why);
    }
  }
out:
  free(marks);
  free(have);
  free(st);
  free(pf);
  return rc;
}

int pp_mpirun_verbs(const struct pp_mpirun_verbs_cfg *c)
{
  struct hub h = {.c = c};
  uint32_t n = c->engine_ranks;
  h.fd = malloc(n * sizeof(*h.fd));
  h.pid = calloc(n, sizeof(*h.pid));
  h.done = calloc(n, sizeof(*h.done));
  h.res = calloc(n, sizeof(*h.res));
  h.owed = calloc(n, sizeof(*h.owed));
  int rc = EXIT_BACKEND;
  if (!h.fd || !h.pid || !h.done || !h.res || !h.owed) {
    fprintf(stderr, "prepost mpirun: out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < n; i++)
    h.fd[i] = -1;
  signal(SIGPIPE, SIG_IGN);
  for (uint32_t i = 0; i < n; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      fprintf(stderr, "prepost mpirun: socketpair: %s\n", strerror(errno));
      goto stop;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "prepost mpirun: fork: %s\n", strerror(errno));
      close(sv[0]);
      close(sv[1]);
      goto stop;
    }
    if (p == 0) {
      for (uint32_t k = 0; k < i; k++)
        close(h.fd[k]);
      close(sv[0]);
      rank_main(c, i, sv[1]);
    }
    close(sv[1]);
    h.fd[i] = sv[0];
    h.pid[i] = p;
  }
  if ((rc = hub_boot(&h)) < 0)
    rc = hub_run(&h);
stop:
  hub_bye(&h);
out:
  for (uint32_t i = 0; h.fd && i < n; i++)
    if (h.fd[i] >= 0)
      close(h.fd[i]);
  free(h.fd);
  free(h.pid);
  free(h.done);
  free(h.res);
  free(h.owed);
  return rc;
}
