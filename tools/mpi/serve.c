/*
 * The actor side of `prepost mpirun` (serve.h): one state machine per rank process.
 *
 *   NEW --go--> RUNNING --blocking request not satisfied--> BLOCKED --satisfied--> RUNNING
 *   RUNNING --poll or Wtime--> SLEEPING (poll_ns of simulated time) --> RUNNING
 *   RUNNING --FINALIZE--> (reply, then wait for the process to exit) --> EXITED
 *   RUNNING --ABORT, or EOF before FINALIZE--> EXITED, and the run stops
 *
 * While a rank is RUNNING its actor sits in a blocking read of the rank's socket: SimGrid runs one
 * actor at a time, so one rank process runs at a time and the simulation is lock-step.
 */
#define _GNU_SOURCE
#include "serve.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "link.h"
#include "prepost/p2p.h"

enum rstate { R_NEW, R_RUNNING, R_BLOCKED, R_SLEEPING, R_EXITED };

struct slot {
  pp_req req;      /* engine request while running */
  uint32_t gen;    /* handle generation (a stale id is refused) */
  bool used, recv, done;
  int32_t peer, tag;
  uint32_t len;
  void *buf;       /* the send's copy, the receive's landing buffer */
  struct pp_p2p_status st;
};

struct rank {
  int fd;
  pid_t pid;
  enum rstate state;
  bool inited, finalized, aborted;
  int status;                /* wait status once EXITED */
  struct slot *slots;
  uint32_t nfree, *free_list;
  struct pp_link_req blocked; /* the request it waits in (TEST or PROBE with flags 1) */
  uint64_t *ids;              /* the TEST's ids */
  uint64_t blocked_since, wake_at;
};

struct pp_mpi_srv {
  struct pp_mpi_srv_cfg cfg;
  struct rank *r;
  struct pp_sim_hook app;
  bool stop;
  int abort_code, abort_rank; /* MPI_Abort, -1 none */
  int failed_rank;            /* first rank that exited badly, -1 none */
  char why[256];
};

/* ------------------------------------------------------------------ I/O */

static bool write_all(int fd, const void *p, size_t n)
{
  const char *c = p;
  while (n) {
    ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

static bool read_all(int fd, void *p, size_t n)
{
  char *c = p;
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

/* ------------------------------------------------------------------ requests */

static uint64_t id_of(const struct rank *r, uint32_t i)
{
  return ((uint64_t)r->slots[i].gen << 32) | (i + 1);
}

static struct slot *slot_of(struct pp_mpi_srv *s, struct rank *r, uint64_t id)
{
  uint32_t i = (uint32_t)id - 1;
  if ((uint32_t)id == 0 || i >= s->cfg.max_requests)
    return NULL;
  struct slot *sl = &r->slots[i];
  return sl->used && sl->gen == (uint32_t)(id >> 32) ? sl : NULL;
}

static struct slot *slot_new(struct rank *r, uint32_t *idx)
{
  if (!r->nfree)
    return NULL;
  *idx = r->free_list[--r->nfree];
  struct slot *sl = &r->slots[*idx];
  uint32_t gen = sl->gen + 1;
  *sl = (struct slot){.gen = gen, .used = true};
  return sl;
}

static void slot_free(struct rank *r, struct slot *sl)
{
  assert(sl->used && r->nfree < UINT32_MAX);
  free(sl->buf);
  sl->buf = NULL;
  sl->used = false;
  r->free_list[r->nfree++] = (uint32_t)(sl - r->slots);
}

static bool slot_done(struct pp_engine *e, struct slot *sl)
{
  if (!sl->done && pp_p2p_test(e, &sl->req, &sl->st))
    sl->done = true;
  return sl->done;
}

/* ------------------------------------------------------------------ the rank's end */

static void exited(struct pp_mpi_srv *s, uint32_t rank)
{
  struct rank *r = &s->r[rank];
  if (r->state == R_EXITED)
    return;
  r->state = R_EXITED;
  close(r->fd);
  r->fd = -1;
  int st = 0;
  while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
    ;
  r->status = st;
  r->pid = 0;
  /* a program that never called MPI_Init (mpirun -n 2 hostname) may exit 0 */
  bool ok = (r->finalized || !r->inited) && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!ok && !r->aborted && s->failed_rank < 0 && s->abort_rank < 0) {
    s->failed_rank = (int)rank;
    if (WIFSIGNALED(st))
      snprintf(s->why, sizeof(s->why), "rank %u was killed by signal %d (%s)%s", rank,
               WTERMSIG(st), strsignal(WTERMSIG(st)), r->finalized ? " after MPI_Finalize" : "");
    else if (r->inited && !r->finalized)
      snprintf(s->why, sizeof(s->why), "rank %u exited with status %d without MPI_Finalize",
               rank, WEXITSTATUS(st));
    else
      snprintf(s->why, sizeof(s->why), "rank %u exited with status %d", rank, WEXITSTATUS(st));
    s->stop = true;
  }
}

static void kill_all(struct pp_mpi_srv *s)
{
  for (uint32_t i = 0; i < s->cfg.nranks; i++)
    if (s->r[i].pid > 0)
      kill(s->r[i].pid, SIGKILL);
}

/* ------------------------------------------------------------------ replies */

static bool reply(struct rank *r, const struct pp_link_rep *rep)
{
  return write_all(r->fd, rep, sizeof(*rep));
}

static struct pp_link_rep rep_of(const struct pp_link_req *q, int32_t status, uint64_t now)
{
  return (struct pp_link_rep){
      .magic = PP_LINK_MAGIC, .op = q->op, .status = status, .now_ns = now};
}

/* The TEST's condition holds? (ALL: every request done; ANY, SOME: one is) */
static bool test_ready(struct pp_engine *e, struct pp_mpi_srv *s, struct rank *r,
                       const struct pp_link_req *q, const uint64_t *ids)
{
  uint32_t ndone = 0;
  for (uint32_t i = 0; i < q->nreq; i++) {
    struct slot *sl = slot_of(s, r, ids[i]);
    if (!sl || slot_done(e, sl))
      ndone++;
  }
  return q->mode == PP_LINK_ALL ? ndone == q->nreq : ndone > 0 || q->nreq == 0;
}

/* Sends the TEST's reply: the completed requests the mode reports, each with its data. */
static bool test_reply(struct pp_mpi_srv *s, struct rank *r, const struct pp_link_req *q,
                       const uint64_t *ids, bool ready, uint64_t now)
{
  struct pp_link_rep rep = rep_of(q, 0, now);
  if (ready)
    for (uint32_t i = 0; i < q->nreq; i++) {
      struct slot *sl = slot_of(s, r, ids[i]);
      rep.ndone += !sl || sl->done;
      if (q->mode == PP_LINK_ANY && rep.ndone)
        break;
    }
  if (!reply(r, &rep))
    return false;
  uint32_t sent = 0;
  for (uint32_t i = 0; i < q->nreq && sent < rep.ndone; i++) {
    struct slot *sl = slot_of(s, r, ids[i]);
    if (sl && !sl->done)
      continue;
    struct pp_link_done d = {.index = i, .source = -1, .tag = -1};
    if (sl) {
      d.source = sl->recv ? (int32_t)sl->st.source : sl->peer;
      d.tag = (int32_t)sl->st.tag;
      d.len = sl->st.len;
      d.msg_len = sl->st.msg_len;
      d.error = sl->st.error;
      d.cancelled = sl->st.error == PP_P2P_E_CANCELLED;
      if (!sl->recv)
        d.len = 0; /* nothing to copy back */
    } else {
      d.error = PP_P2P_E_FAILED; /* a stale id: the library never sends one */
    }
    if (!write_all(r->fd, &d, sizeof(d)) || (d.len && !write_all(r->fd, sl->buf, d.len)))
      return false;
    if (sl)
      slot_free(r, sl);
    sent++;
  }
  return true;
}

static bool probe(struct pp_engine *e, const struct pp_link_req *q, struct pp_link_rep *rep)
{
  struct pp_p2p_status st;
  uint32_t src = q->peer < 0 ? PP_ANY_SOURCE : (uint32_t)q->peer;
  uint32_t tag = q->tag < 0 ? PP_ANY_TAG : (uint32_t)q->tag;
  if (!pp_p2p_iprobe(e, src, tag, q->ctx, &st))
    return false;
  rep->found = 1;
  rep->source = (int32_t)st.source;
  rep->tag = (int32_t)st.tag;
  rep->msg_len = st.msg_len;
  return true;
}

/* ------------------------------------------------------------------ serving */

/* The engine refused a request of the rank's call: say why before the library raises its error
 * (the request table, shared by sends and receives, is p2p.max_requests; the data copies have a
 * slot each). */
static void refused(const struct pp_mpi_srv *s, uint32_t rank, const struct pp_link_req *q,
                    enum pp_status st)
{
  fprintf(stderr, "prepost mpirun: rank %u: %s: the engine refused the %s: %s%s\n", rank,
          q->call.fn, q->op == PP_LINK_ISEND ? "send" : "receive", pp_status_desc(st),
          st == PP_AGAIN || st == PP_LIMIT ? " (more requests outstanding than p2p.max_requests "
                                             "allows; raise it in a --scenario)"
                                           : "");
  (void)s;
}

/* What serving one request leads to. */
enum next { N_READ, N_WAIT, N_SLEEP, N_END };

static enum next do_isend(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank,
                          const struct pp_link_req *q, uint64_t now)
{
  struct rank *r = &s->r[rank];
  void *buf = malloc(q->len ? q->len : 1);
  if (!buf || (q->len && !read_all(r->fd, buf, q->len))) {
    free(buf);
    return N_END;
  }
  uint32_t idx;
  struct slot *sl = slot_new(r, &idx);
  struct pp_link_rep rep = rep_of(q, PP_LIMIT, now);
  if (sl) {
    sl->buf = buf;
    sl->peer = q->peer;
    sl->tag = q->tag;
    sl->len = q->len;
    enum pp_status st =
        (q->flags & 1 ? pp_p2p_issend : pp_p2p_isend)(e, now, buf, q->len, (uint32_t)q->peer,
                                                      (uint32_t)q->tag, q->ctx, idx, &sl->req);
    rep.status = st;
    if (st == PP_OK)
      rep.id = id_of(r, idx);
    else
      slot_free(r, sl);
  } else {
    free(buf);
  }
  if (rep.status != PP_OK)
    refused(s, rank, q, (enum pp_status)rep.status);
  return reply(r, &rep) ? N_READ : N_END;
}

static enum next do_irecv(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank,
                          const struct pp_link_req *q, uint64_t now)
{
  struct rank *r = &s->r[rank];
  uint32_t idx;
  struct slot *sl = slot_new(r, &idx);
  struct pp_link_rep rep = rep_of(q, PP_LIMIT, now);
  if (sl && !(sl->buf = malloc(q->len ? q->len : 1)))
    rep.status = PP_NOMEM;
  if (sl && sl->buf) {
    sl->recv = true;
    sl->peer = q->peer;
    sl->tag = q->tag;
    sl->len = q->len;
    uint32_t src = q->peer < 0 ? PP_ANY_SOURCE : (uint32_t)q->peer;
    uint32_t tag = q->tag < 0 ? PP_ANY_TAG : (uint32_t)q->tag;
    rep.status = pp_p2p_irecv(e, now, sl->buf, q->len, src, tag, q->ctx, idx, &sl->req);
    if (rep.status == PP_OK)
      rep.id = id_of(r, idx);
  }
  if (sl && rep.status != PP_OK)
    slot_free(r, sl);
  if (rep.status != PP_OK)
    refused(s, rank, q, (enum pp_status)rep.status);
  return reply(r, &rep) ? N_READ : N_END;
}

static enum next do_test(struct pp_engine *e, struct pp_mpi_srv *s, struct rank *r,
                         const struct pp_link_req *q, uint64_t now)
{
  if (q->nreq > PP_LINK_MAX_WAIT || (q->nreq && !read_all(r->fd, r->ids, q->nreq * 8ull)))
    return N_END;
  bool ready = test_ready(e, s, r, q, r->ids);
  if (ready)
    return test_reply(s, r, q, r->ids, true, now) ? N_READ : N_END;
  r->blocked = *q;
  r->blocked_since = now;
  return q->flags & 1 ? N_WAIT : N_SLEEP;
}

static enum next do_probe(struct pp_engine *e, struct rank *r, const struct pp_link_req *q,
                          uint64_t now)
{
  struct pp_link_rep rep = rep_of(q, 0, now);
  if (probe(e, q, &rep))
    return reply(r, &rep) ? N_READ : N_END;
  r->blocked = *q;
  r->blocked_since = now;
  return q->flags & 1 ? N_WAIT : N_SLEEP;
}

static enum next serve_one(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank, uint64_t now)
{
  struct rank *r = &s->r[rank];
  struct pp_link_req q;
  if (!read_all(r->fd, &q, sizeof(q)))
    return N_END; /* the process exited (or closed the link) */
  if (q.magic != PP_LINK_MAGIC || q.op >= PP_LINK_OP_COUNT) {
    snprintf(s->why, sizeof(s->why), "rank %u: broken link message", rank);
    return N_END;
  }
  struct pp_link_rep rep = rep_of(&q, 0, now);
  switch ((enum pp_link_op)q.op) {
  case PP_LINK_INIT:
    r->inited = true;
    rep.rank = rank;
    rep.size = s->cfg.nranks;
    return reply(r, &rep) ? N_READ : N_END;
  case PP_LINK_ISEND:
    if (q.len > PP_LINK_MAX_MSG || q.peer < 0 || (uint32_t)q.peer >= s->cfg.nranks)
      return N_END;
    return do_isend(e, s, rank, &q, now);
  case PP_LINK_IRECV:
    return q.len > PP_LINK_MAX_MSG ? N_END : do_irecv(e, s, rank, &q, now);
  case PP_LINK_TEST:
    return do_test(e, s, r, &q, now);
  case PP_LINK_PROBE:
    return do_probe(e, r, &q, now);
  case PP_LINK_CANCEL: {
    struct slot *sl = slot_of(s, r, q.id);
    rep.status = !sl ? PP_NOTFOUND : sl->done ? PP_STATE : pp_p2p_cancel(e, now, sl->req);
    return reply(r, &rep) ? N_READ : N_END;
  }
  case PP_LINK_WTIME:
    r->blocked = q;
    return N_SLEEP;
  case PP_LINK_FINALIZE:
    r->finalized = true;
    if (!reply(r, &rep))
      return N_END;
    char c;
    while (read(r->fd, &c, 1) > 0) /* no MPI call after MPI_Finalize: wait for exit */
      ;
    return N_END;
  case PP_LINK_ABORT:
    r->aborted = true;
    s->abort_rank = (int)rank;
    s->abort_code = q.code;
    snprintf(s->why, sizeof(s->why), "rank %u called MPI_Abort with error code %d", rank, q.code);
    s->stop = true;
    kill_all(s);
    return N_END;
  case PP_LINK_OP_COUNT:
    break;
  }
  return N_END;
}

/* Serves the rank's requests until it blocks, sleeps or ends; returns its next deadline. */
static uint64_t serve(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank, uint64_t now)
{
  struct rank *r = &s->r[rank];
  for (;;) {
    fflush(NULL); /* the launcher's own output before the rank's */
    enum next n = serve_one(e, s, rank, now);
    switch (n) {
    case N_READ:
      continue;
    case N_WAIT:
      r->state = R_BLOCKED;
      return PP_NO_DEADLINE;
    case N_SLEEP:
      r->state = R_SLEEPING;
      r->wake_at = now + s->cfg.poll_ns;
      return r->wake_at;
    case N_END:
      exited(s, rank);
      return PP_NO_DEADLINE;
    }
  }
}

static uint64_t app_step(void *ctx, uint32_t rank, struct pp_engine *e, uint64_t now)
{
  struct pp_mpi_srv *s = ctx;
  if (s->stop || rank >= s->cfg.nranks) /* -n 1: the engine's second rank has no process */
    return PP_NO_DEADLINE;
  struct rank *r = &s->r[rank];
  switch (r->state) {
  case R_NEW: {
    char go = 1;
    r->state = R_RUNNING;
    if (!write_all(r->fd, &go, 1)) {
      exited(s, rank);
      return PP_NO_DEADLINE;
    }
    return serve(e, s, rank, now);
  }
  case R_BLOCKED: {
    const struct pp_link_req *q = &r->blocked;
    if (q->op == PP_LINK_TEST) {
      if (!test_ready(e, s, r, q, r->ids))
        return PP_NO_DEADLINE;
      r->state = R_RUNNING;
      if (!test_reply(s, r, q, r->ids, true, now)) {
        exited(s, rank);
        return PP_NO_DEADLINE;
      }
    } else {
      struct pp_link_rep rep = rep_of(q, 0, now);
      if (!probe(e, q, &rep))
        return PP_NO_DEADLINE;
      r->state = R_RUNNING;
      if (!reply(r, &rep)) {
        exited(s, rank);
        return PP_NO_DEADLINE;
      }
    }
    return serve(e, s, rank, now);
  }
  case R_SLEEPING: { /* the call ends now and reports what holds now */
    if (now < r->wake_at)
      return r->wake_at;
    const struct pp_link_req *q = &r->blocked;
    struct pp_link_rep rep = rep_of(q, 0, now);
    bool ok = q->op == PP_LINK_TEST ? test_reply(s, r, q, r->ids, test_ready(e, s, r, q, r->ids), now)
              : q->op == PP_LINK_PROBE ? (probe(e, q, &rep), reply(r, &rep))
                                       : reply(r, &rep);
    r->state = R_RUNNING;
    if (!ok) {
      exited(s, rank);
      return PP_NO_DEADLINE;
    }
    return serve(e, s, rank, now);
  }
  case R_RUNNING: /* a running rank is served to its next stop, never left running */
    assert(!"rank left running");
    break;
  case R_EXITED:
    break;
  }
  return PP_NO_DEADLINE;
}

static bool app_done(void *ctx, uint32_t rank)
{
  struct pp_mpi_srv *s = ctx;
  return rank >= s->cfg.nranks || s->r[rank].state == R_EXITED;
}

static bool app_stop(void *ctx)
{
  return ((struct pp_mpi_srv *)ctx)->stop;
}

/* ------------------------------------------------------------------ lifecycle */

enum pp_status pp_mpi_srv_create(const struct pp_mpi_srv_cfg *cfg, const int *fds,
                                 const pid_t *pids, struct pp_mpi_srv **out)
{
  struct pp_mpi_srv *s = calloc(1, sizeof(*s));
  if (!s)
    return PP_NOMEM;
  s->cfg = *cfg;
  s->abort_rank = s->failed_rank = -1;
  s->r = calloc(cfg->nranks, sizeof(*s->r));
  if (!s->r)
    goto fail;
  for (uint32_t i = 0; i < cfg->nranks; i++) {
    struct rank *r = &s->r[i];
    r->fd = fds[i];
    r->pid = pids[i];
    r->slots = calloc(cfg->max_requests, sizeof(*r->slots));
    r->free_list = malloc(cfg->max_requests * sizeof(*r->free_list));
    r->ids = malloc(PP_LINK_MAX_WAIT * sizeof(*r->ids));
    if (!r->slots || !r->free_list || !r->ids)
      goto fail;
    for (uint32_t k = 0; k < cfg->max_requests; k++)
      r->free_list[k] = cfg->max_requests - 1 - k;
    r->nfree = cfg->max_requests;
  }
  s->app = (struct pp_sim_hook){.ctx = s, .step = app_step, .done = app_done, .stop = app_stop};
  *out = s;
  return PP_OK;
fail:
  pp_mpi_srv_destroy(s);
  return PP_NOMEM;
}

const struct pp_sim_hook *pp_mpi_srv_app(struct pp_mpi_srv *s)
{
  return &s->app;
}

void pp_mpi_srv_reap(struct pp_mpi_srv *s)
{
  for (uint32_t i = 0; i < s->cfg.nranks; i++)
    if (s->r[i].pid > 0) {
      kill(s->r[i].pid, SIGKILL);
      int st;
      while (waitpid(s->r[i].pid, &st, 0) < 0 && errno == EINTR)
        ;
      s->r[i].pid = 0;
    }
}

int pp_mpi_srv_exit_code(const struct pp_mpi_srv *s)
{
  if (s->abort_rank >= 0)
    return s->abort_code & 0xff ? s->abort_code & 0xff : 1;
  if (s->failed_rank >= 0) {
    int st = s->r[s->failed_rank].status;
    if (WIFSIGNALED(st))
      return 128 + WTERMSIG(st);
    return WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
  }
  for (uint32_t i = 0; i < s->cfg.nranks; i++)
    if (s->r[i].state != R_EXITED)
      return -1;
  return 0;
}

/* The peer rank `rank` waits for in its blocked call, or -1 (any, or none). */
static int32_t waits_for(const struct pp_mpi_srv *s, uint32_t rank, const struct slot **which)
{
  const struct rank *r = &s->r[rank];
  *which = NULL;
  if (r->state != R_BLOCKED)
    return -1;
  if (r->blocked.op == PP_LINK_PROBE)
    return r->blocked.peer;
  for (uint32_t i = 0; i < r->blocked.nreq; i++) {
    const struct slot *sl = slot_of((struct pp_mpi_srv *)s, (struct rank *)r, r->ids[i]);
    if (sl && !sl->done) {
      *which = sl;
      return sl->peer;
    }
  }
  return -1;
}

static void report_rank(const struct pp_mpi_srv *s, uint32_t i, FILE *out)
{
  const struct rank *r = &s->r[i];
  const struct pp_link_call *c = &r->blocked.call;
  const struct slot *sl;
  int32_t peer = waits_for(s, i, &sl);
  switch (r->state) {
  case R_EXITED:
    fprintf(out, "  rank %u: %s\n", i, r->finalized ? "finalized and exited" : "exited");
    return;
  case R_BLOCKED:
    break;
  default:
    fprintf(out, "  rank %u: running\n", i);
    return;
  }
  fprintf(out, "  rank %u: blocked in %s(", i, c->fn);
  if (c->peer >= 0)
    fprintf(out, "peer %d, ", c->peer);
  else if (c->peer == -2)
    fprintf(out, "peer MPI_ANY_SOURCE, ");
  if (c->tag >= 0)
    fprintf(out, "tag %d, ", c->tag);
  else if (c->tag == -1)
    fprintf(out, "tag MPI_ANY_TAG, ");
  fprintf(out, "%s) since %.3f us", c->comm, (double)r->blocked_since / 1e3);
  if (sl)
    fprintf(out, ": its %s %s rank %d (tag %d, %u bytes) is not complete", sl->recv ? "receive" : "send",
            sl->recv ? "from" : "to", peer, sl->tag, sl->len);
  else if (r->blocked.op == PP_LINK_PROBE)
    fprintf(out, ": no matching message from %s", peer >= 0 ? "that rank" : "any rank");
  fputc('\n', out);
}

static void report_cycle(const struct pp_mpi_srv *s, FILE *out)
{
  uint32_t n = s->cfg.nranks;
  for (uint32_t start = 0; start < n; start++) {
    uint32_t cur = start, steps = 0;
    const struct slot *sl;
    int32_t next;
    while ((next = waits_for(s, cur, &sl)) >= 0 && steps <= n) {
      cur = (uint32_t)next;
      steps++;
      if (cur == start)
        break;
    }
    if (cur != start || !steps)
      continue;
    fprintf(out, "  wait-for cycle: rank %u", start);
    cur = start;
    do {
      cur = (uint32_t)waits_for(s, cur, &sl);
      fprintf(out, " -> rank %u", cur);
    } while (cur != start);
    fputs(" (a deadlock: each waits for the next)\n", out);
    return;
  }
  fputs("  no wait-for cycle between the blocked ranks (a receive no rank sends, or a wildcard)\n",
        out);
}

void pp_mpi_srv_report(const struct pp_mpi_srv *s, uint64_t end_ns, FILE *out)
{
  if (s->why[0]) {
    fprintf(out, "prepost mpirun: %s\n", s->why);
    return;
  }
  if (pp_mpi_srv_exit_code(s) != -1)
    return;
  fprintf(out, "prepost mpirun: hang at %.3f us of simulated time: no rank can make progress\n",
          (double)end_ns / 1e3);
  for (uint32_t i = 0; i < s->cfg.nranks; i++)
    report_rank(s, i, out);
  report_cycle(s, out);
}

void pp_mpi_srv_destroy(struct pp_mpi_srv *s)
{
  if (!s)
    return;
  for (uint32_t i = 0; s->r && i < s->cfg.nranks; i++) {
    struct rank *r = &s->r[i];
    for (uint32_t k = 0; r->slots && k < s->cfg.max_requests; k++)
      free(r->slots[k].buf);
    free(r->slots);
    free(r->free_list);
    free(r->ids);
    if (r->fd >= 0 && r->state != R_EXITED)
      close(r->fd);
  }
  free(s->r);
  free(s);
}
