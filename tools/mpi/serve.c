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
 *
 * A rank's messages to itself never reach the engine (it has no loopback QP): the actor matches
 * them with MPI's rules. A send to itself goes to the earliest posted receive that matches it,
 * a receive from itself (or from MPI_ANY_SOURCE) of the rank, by posting order: a wildcard
 * receive already posted on the engine is taken back with pp_p2p_cancel when it has not matched
 * yet; else the message waits in the rank's own FIFO queue (non-overtaking), which receives,
 * probes and matched probes from itself or from MPI_ANY_SOURCE look at first. A standard send
 * to itself completes at once (the actor holds the copy), a synchronous one when it matches, and
 * one that has not matched can be cancelled.
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
#include "prepost/trace.h"

enum rstate { R_NEW, R_RUNNING, R_BLOCKED, R_SLEEPING, R_EXITED };

struct slot {
  pp_req req;      /* engine request while running */
  uint32_t gen;    /* handle generation (a stale id is refused) */
  bool used, recv, done;
  bool local;      /* no engine request (a message of the rank to itself): `done` says it all */
  bool engine_buf; /* `buf` was handed to the engine: its registrations go before it is freed */
  bool want;       /* a receive the rank's send to itself may still match */
  uint32_t ctx;
  uint64_t seq;    /* receives: posting order */
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
  struct selfmsg *selfq;      /* its messages to itself no receive took yet, in order */
  uint32_t nself;
  uint64_t recv_seq;
  uint64_t served;            /* requests read from the rank (progress, on verbs) */
  struct pp_trace_rank *tr; /* its recorder (mpirun --trace), else NULL */
  struct pp_engine *e;      /* its engine, the step being served's */
  uint64_t now;             /* the time of the step being served */
};

/* A message of a rank to itself waiting for its receive. */
struct selfmsg {
  uint32_t ctx;
  int32_t tag;
  uint32_t len;
  void *buf;
  uint64_t sync; /* the synchronous send's id, completed when it matches; 0 none */
};

#define PP_SELF_MAX 4096u /* a rank's messages to itself waiting for their receives */

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

/* ------------------------------------------------------------------ the engine */

/* Every call into the engine goes through the rank's recorder (pp_sim_rank_trace: NULL unless
 * `mpirun --trace`), so a trace has the program's side of the engine's inputs too. The rank's
 * step time and recorder are set by app_step (a call may let other actors run: registering
 * memory takes simulated time, so the rank's own fields, not one global). */
static bool e_test(struct rank *r, struct pp_engine *e, pp_req *req, struct pp_p2p_status *st)
{
  return pp_tr_p2p_test(r->tr, e, r->now, req, st);
}

static bool e_iprobe(struct rank *r, struct pp_engine *e, uint32_t src, uint32_t tag, uint32_t ctx,
                     struct pp_p2p_status *st)
{
  return pp_tr_p2p_iprobe(r->tr, e, r->now, src, tag, ctx, st);
}

static enum pp_status e_cancel(struct rank *r, struct pp_engine *e, uint64_t now, pp_req req)
{
  return pp_tr_p2p_cancel(r->tr, e, now, req);
}

static enum pp_status e_irecv(struct rank *r, struct pp_engine *e, uint64_t now, void *buf, uint32_t len, uint32_t src,
                              uint32_t tag, uint32_t ctx, uint64_t cookie, pp_req *req)
{
  return pp_tr_p2p_irecv(r->tr, e, now, buf, len, src, tag, ctx, cookie, req);
}

static enum pp_status e_isend(struct rank *r, struct pp_engine *e, uint64_t now, bool sync, const void *buf, uint32_t len,
                              uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                              pp_req *req)
{
  return pp_tr_p2p_isend(r->tr, e, now, sync, buf, len, dest, tag, ctx, cookie, req);
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

/* Frees a buffer the engine was given. The engine's registration cache may still hold a
 * registration of it (a rendezvous registers the send's copy and the receive's landing buffer
 * and keeps them for the next message there): on a real NIC that registration pins the pages
 * the buffer had, and a later buffer malloc returns at the same address (the heap trimmed and
 * grown again, or a new mmap) has other pages, so a cache hit would let the NIC read or write
 * the old ones (osu bw on rxe: 64 MiB of receives freed each window, the next window's data
 * landed in pages the program never saw). pp_p2p_mem_free drops those registrations first. */
static void engine_free(struct rank *r, void *buf, uint32_t len)
{
  assert(r->e);
  (void)pp_tr_p2p_mem_free(r->tr, r->e, r->now, buf, len ? len : 1);
  free(buf);
}

static void slot_free(struct rank *r, struct slot *sl)
{
  assert(sl->used && r->nfree < UINT32_MAX);
  if (sl->engine_buf && sl->buf)
    engine_free(r, sl->buf, sl->len);
  else
    free(sl->buf);
  sl->engine_buf = false;
  sl->buf = NULL;
  sl->used = false;
  r->free_list[r->nfree++] = (uint32_t)(sl - r->slots);
}

static bool slot_done(struct rank *r, struct pp_engine *e, struct slot *sl)
{
  if (!sl->done && !sl->local && e_test(r, e, &sl->req, &sl->st))
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
    if (!sl || slot_done(r, e, sl))
      ndone++;
  }
  return q->mode == PP_LINK_ALL ? ndone == q->nreq : ndone > 0 || q->nreq == 0;
}

/* Sends the TEST's reply: the completed requests the mode reports, each with its data. */
static bool test_reply(struct pp_mpi_srv *s, struct rank *r, const struct pp_link_req *q,
                       const uint64_t *ids, bool ready, uint64_t now)
{
  bool keep = q->flags & 4; /* Request_get_status: the request goes on */
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
    if (sl && !keep)
      slot_free(r, sl);
    sent++;
  }
  return true;
}

/* ------------------------------------------------------------------ messages to oneself */

static bool tag_fits(int32_t want, int32_t tag)
{
  return want < 0 || want == tag;
}

/* The rank's earliest message to itself a receive (ctx, tag) gets, or -1. */
static int32_t self_find(const struct rank *r, uint32_t ctx, int32_t tag)
{
  for (uint32_t i = 0; i < r->nself; i++)
    if (r->selfq[i].ctx == ctx && tag_fits(tag, r->selfq[i].tag))
      return (int32_t)i;
  return -1;
}

/* Takes message i off the queue; its synchronous send completes (it matched). */
static struct selfmsg self_take(struct pp_mpi_srv *s, struct rank *r, uint32_t rank, uint32_t i)
{
  struct selfmsg m = r->selfq[i];
  memmove(&r->selfq[i], &r->selfq[i + 1], (r->nself - i - 1) * sizeof(*r->selfq));
  r->nself--;
  struct slot *snd = m.sync ? slot_of(s, r, m.sync) : NULL;
  if (snd && !snd->done) {
    snd->done = true;
    snd->st = (struct pp_p2p_status){.source = rank, .tag = (uint32_t)m.tag, .ctx = m.ctx,
                                     .len = m.len, .msg_len = m.len};
  }
  return m;
}

/* A receive slot gets a message of the rank itself. */
static void self_deliver(struct slot *rv, uint32_t rank, const struct selfmsg *m)
{
  uint32_t n = m->len < rv->len ? m->len : rv->len;
  if (n)
    memcpy(rv->buf, m->buf, n);
  rv->st = (struct pp_p2p_status){.source = rank, .tag = (uint32_t)m->tag, .ctx = m->ctx,
                                  .len = n, .msg_len = m->len,
                                  .error = m->len > rv->len ? PP_P2P_E_TRUNCATED : PP_P2P_E_OK};
  rv->done = rv->local = true;
  rv->want = false;
}

/* The earliest posted receive of the rank a message (ctx, tag) of its own matches: from itself,
 * or a wildcard one that is taken back from the engine if it has not matched there yet. */
static struct slot *self_match_recv(struct pp_engine *e, struct pp_mpi_srv *s, struct rank *r,
                                    uint64_t now, uint32_t ctx, int32_t tag)
{
  for (;;) {
    struct slot *best = NULL;
    for (uint32_t i = 0; i < s->cfg.max_requests; i++) {
      struct slot *sl = &r->slots[i];
      if (sl->used && sl->recv && sl->want && !sl->done && sl->ctx == ctx &&
          tag_fits(sl->tag, tag) && (!best || sl->seq < best->seq))
        best = sl;
    }
    if (!best || best->local)
      return best;
    /* a wildcard receive on the engine: still unmatched? */
    best->want = false;
    if (!slot_done(r, e, best) && e_cancel(r, e, now, best->req) == PP_OK) {
      struct pp_p2p_status st;
      bool took = e_test(r, e, &best->req, &st);
      assert(took && st.error == PP_P2P_E_CANCELLED);
      (void)took;
      best->local = true;
      return best;
    }
  }
}

/* A message (source, tag, length) a probe (q->peer, q->tag, q->ctx) sees: the rank's own queue
 * first when it may come from itself, then the engine. self: it is the rank's own (index). */
static bool probe_find(struct pp_engine *e, struct rank *r, uint32_t rank,
                       const struct pp_link_req *q, struct pp_p2p_status *st, int32_t *self)
{
  *self = -1;
  if (q->peer < 0 || (uint32_t)q->peer == rank) {
    int32_t i = self_find(r, q->ctx, q->tag);
    if (i >= 0) {
      *self = i;
      *st = (struct pp_p2p_status){.source = rank, .tag = (uint32_t)r->selfq[i].tag,
                                   .ctx = q->ctx, .len = r->selfq[i].len,
                                   .msg_len = r->selfq[i].len};
      return true;
    }
    if (q->peer >= 0)
      return false;
  }
  uint32_t src = q->peer < 0 ? PP_ANY_SOURCE : (uint32_t)q->peer;
  uint32_t tag = q->tag < 0 ? PP_ANY_TAG : (uint32_t)q->tag;
  return e_iprobe(r, e, src, tag, q->ctx, st);
}

/* PROBE: reports the message; MPROBE: takes it too, into a receive slot whose id goes back
 * (a message on the engine gets a receive of exactly its source and tag: it is the earliest
 * of that source the probe matched, so that receive takes it). false: nothing there. */
static bool probe(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank,
                  const struct pp_link_req *q, struct pp_link_rep *rep, uint64_t now)
{
  struct rank *r = &s->r[rank];
  struct pp_p2p_status st;
  int32_t self;
  if (!probe_find(e, r, rank, q, &st, &self))
    return false;
  rep->found = 1;
  rep->source = (int32_t)st.source;
  rep->tag = (int32_t)st.tag;
  rep->msg_len = st.msg_len;
  if (q->op != PP_LINK_MPROBE)
    return true;
  uint32_t idx;
  struct slot *sl = slot_new(r, &idx);
  if (!sl || !(sl->buf = malloc(st.msg_len ? st.msg_len : 1))) {
    if (sl)
      slot_free(r, sl);
    rep->found = 0;
    rep->status = sl ? PP_NOMEM : PP_LIMIT;
    return true;
  }
  sl->recv = true;
  sl->peer = (int32_t)st.source;
  sl->tag = (int32_t)st.tag;
  sl->len = st.msg_len;
  sl->ctx = q->ctx;
  if (self >= 0) {
    struct selfmsg m = self_take(s, r, rank, (uint32_t)self);
    self_deliver(sl, rank, &m);
    free(m.buf);
  } else {
    sl->engine_buf = true;
    enum pp_status ps = e_irecv(r, e, now, sl->buf, st.msg_len, st.source, st.tag, q->ctx, idx, &sl->req);
    if (ps != PP_OK) {
      slot_free(r, sl);
      rep->found = 0;
      rep->status = ps;
      return true;
    }
  }
  rep->id = id_of(r, idx);
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
                                             "allows; raise it in a --scenario; or more than "
                                             "4096 messages of the rank to itself unreceived)"
                                           : "");
  (void)s;
}

/* What serving one request leads to. */
enum next { N_READ, N_WAIT, N_SLEEP, N_END };

/* A send of the rank to itself: to its earliest matching receive, else into its queue. */
static enum pp_status self_send(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank,
                                const struct pp_link_req *q, uint64_t now, void *buf,
                                struct slot *sl, uint32_t idx)
{
  struct rank *r = &s->r[rank];
  struct selfmsg m = {.ctx = q->ctx, .tag = q->tag, .len = q->len, .buf = buf};
  struct slot *rv = self_match_recv(e, s, r, now, q->ctx, q->tag);
  sl->local = true;
  sl->peer = (int32_t)rank;
  sl->tag = q->tag;
  sl->len = q->len;
  sl->ctx = q->ctx;
  if (rv) {
    self_deliver(rv, rank, &m);
    free(buf);
  } else {
    if (r->nself == PP_SELF_MAX) {
      free(buf);
      return PP_LIMIT;
    }
    m.sync = q->flags & 1 ? id_of(r, idx) : 0;
    r->selfq[r->nself++] = m;
  }
  /* a standard send is buffered (the queue holds the copy); a synchronous one waits to match */
  if (rv || !(q->flags & 1)) {
    sl->done = true;
    sl->st = (struct pp_p2p_status){.source = rank, .tag = (uint32_t)q->tag, .ctx = q->ctx,
                                    .len = q->len, .msg_len = q->len};
  }
  return PP_OK;
}

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
  if (sl && (uint32_t)q->peer == rank) {
    rep.status = self_send(e, s, rank, q, now, buf, sl, idx);
    if (rep.status == PP_OK)
      rep.id = id_of(r, idx);
    else
      slot_free(r, sl);
  } else if (sl) {
    sl->buf = buf;
    sl->engine_buf = true;
    sl->peer = q->peer;
    sl->tag = q->tag;
    sl->len = q->len;
    enum pp_status st = e_isend(r, e, now, q->flags & 1, buf, q->len, (uint32_t)q->peer,
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
    sl->ctx = q->ctx;
    sl->seq = ++r->recv_seq;
    bool maybe_self = q->peer < 0 || (uint32_t)q->peer == rank;
    int32_t i = maybe_self ? self_find(r, q->ctx, q->tag) : -1;
    if (i >= 0) { /* its own message waits already */
      struct selfmsg m = self_take(s, r, rank, (uint32_t)i);
      self_deliver(sl, rank, &m);
      free(m.buf);
      rep.status = PP_OK;
    } else if (maybe_self && q->peer >= 0) { /* from itself: waits for its own send */
      sl->local = sl->want = true;
      rep.status = PP_OK;
    } else {
      uint32_t src = q->peer < 0 ? PP_ANY_SOURCE : (uint32_t)q->peer;
      uint32_t tag = q->tag < 0 ? PP_ANY_TAG : (uint32_t)q->tag;
      sl->engine_buf = true;
      rep.status = e_irecv(r, e, now, sl->buf, q->len, src, tag, q->ctx, idx, &sl->req);
      sl->want = maybe_self; /* a wildcard: its own send may still take it */
    }
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
  if (ready || (q->flags & 2)) /* 2: what is done now, no time passing */
    return test_reply(s, r, q, r->ids, ready || q->mode != PP_LINK_ALL, now) ? N_READ : N_END;
  r->blocked = *q;
  r->blocked_since = now;
  return q->flags & 1 ? N_WAIT : N_SLEEP;
}

static enum next do_probe(struct pp_engine *e, struct pp_mpi_srv *s, uint32_t rank,
                          const struct pp_link_req *q, uint64_t now)
{
  struct rank *r = &s->r[rank];
  struct pp_link_rep rep = rep_of(q, 0, now);
  if (probe(e, s, rank, q, &rep, now))
    return reply(r, &rep) ? N_READ : N_END;
  r->blocked = *q;
  r->blocked_since = now;
  return q->flags & 1 ? N_WAIT : N_SLEEP;
}

/* A receive that has not matched, or a message of the rank to itself no receive took, is
 * cancelled; a send on the engine cannot be (PP_UNSUPPORTED: it completes normally). */
static enum pp_status do_cancel(struct pp_engine *e, struct pp_mpi_srv *s, struct rank *r,
                                uint64_t id, uint64_t now)
{
  struct slot *sl = slot_of(s, r, id);
  if (!sl)
    return PP_NOTFOUND;
  if (slot_done(r, e, sl))
    return PP_STATE;
  if (!sl->local)
    return sl->recv ? e_cancel(r, e, now, sl->req) : PP_UNSUPPORTED;
  if (!sl->recv) { /* a synchronous send to itself still in the queue */
    for (uint32_t i = 0; i < r->nself; i++)
      if (r->selfq[i].sync == id) {
        free(r->selfq[i].buf);
        memmove(&r->selfq[i], &r->selfq[i + 1], (r->nself - i - 1) * sizeof(*r->selfq));
        r->nself--;
        break;
      }
  }
  sl->done = true;
  sl->want = false;
  sl->st = (struct pp_p2p_status){.error = PP_P2P_E_CANCELLED, .tag = (uint32_t)sl->tag};
  return PP_OK;
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
  r->served++;
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
  case PP_LINK_MPROBE:
    return do_probe(e, s, rank, &q, now);
  case PP_LINK_CANCEL:
    rep.status = do_cancel(e, s, r, q.id, now);
    return reply(r, &rep) ? N_READ : N_END;
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
  r->tr = pp_sim_rank_trace(rank);
  r->e = e;
  r->now = now;
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
      if (!probe(e, s, rank, q, &rep, now))
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
              : q->op == PP_LINK_PROBE || q->op == PP_LINK_MPROBE
                  ? (probe(e, s, rank, q, &rep, now), reply(r, &rep))
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
    r->selfq = malloc(PP_SELF_MAX * sizeof(*r->selfq));
    if (!r->slots || !r->free_list || !r->ids || !r->selfq)
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
  if (r->blocked.op == PP_LINK_PROBE || r->blocked.op == PP_LINK_MPROBE)
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
  else if (r->blocked.op == PP_LINK_PROBE || r->blocked.op == PP_LINK_MPROBE)
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
    fputs(steps == 1 ? " (a deadlock: the rank waits for a message of its own)\n"
                     : " (a deadlock: each waits for the next)\n",
          out);
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
    for (uint32_t k = 0; r->selfq && k < r->nself; k++)
      free(r->selfq[k].buf);
    free(r->selfq);
    if (r->fd >= 0 && r->state != R_EXITED)
      close(r->fd);
  }
  free(s->r);
  free(s);
}

/* ------------------------------------------------------------------ one rank (verbs) */

uint64_t pp_mpi_srv_step(struct pp_mpi_srv *s, uint32_t rank, struct pp_engine *e, uint64_t now)
{
  return app_step(s, rank, e, now);
}

bool pp_mpi_srv_rank_ended(const struct pp_mpi_srv *s, uint32_t rank)
{
  return s->stop || s->r[rank].state == R_EXITED;
}

int pp_mpi_srv_rank_exit(const struct pp_mpi_srv *s, uint32_t rank, bool *aborted, char *why,
                         size_t len)
{
  const struct rank *r = &s->r[rank];
  *aborted = r->aborted;
  if (len && snprintf(why, len, "%s", s->why) < 0)
    why[0] = 0;
  if (r->state != R_EXITED)
    return -1;
  return pp_mpi_srv_exit_code(s) == -1 ? 0 : pp_mpi_srv_exit_code(s);
}

bool pp_mpi_srv_rank_blocked(const struct pp_mpi_srv *s, uint32_t rank, uint64_t *served)
{
  *served = s->r[rank].served;
  return s->r[rank].state == R_BLOCKED;
}

int32_t pp_mpi_srv_rank_waits_for(const struct pp_mpi_srv *s, uint32_t rank)
{
  const struct slot *sl;
  return waits_for(s, rank, &sl);
}

void pp_mpi_srv_report_rank(const struct pp_mpi_srv *s, uint32_t rank, FILE *out)
{
  report_rank(s, rank, out);
}
