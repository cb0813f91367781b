/*
 * The pingpong workload: latency as perftest's ib_send_lat and OSU's osu_latency measure it.
 * Two ranks (pattern pair). Rank 0 sends a message of `size` bytes to rank 1; rank 1, on
 * receiving it, sends one of the same size back; rank 0, on receiving the reply, records half
 * the round trip (the reply's receive completion minus the time the iteration started, / 2,
 * integer ns) and starts the next iteration, at once (interval 0: back to back) or after an
 * engine timer of `interval`. `warmup` leading round trips are run and not recorded; `messages`
 * round trips are recorded (messages samples in the latency histogram).
 *
 * It drives whatever protocol the engine runs through pp_proto_ops.send/recv, as the stream
 * workload does. Every byte of every message is the pp_msg_fill() pattern of (sender, iteration)
 * and is checked with pp_msg_check(). Off the measured path where it can be:
 *  - each rank has two send buffers (iteration k uses k % 2), each filled ahead with the next
 *    message it will carry when its previous send completed, so a send is posted at once;
 *  - each rank keeps two receives posted (iteration k lands in buffer k % 2): the receive of
 *    iteration k + 1 is posted before the peer can send it (no RNR, no unexpected message), and
 *    the buffer of iteration k is checked after the reply (rank 1) or the next ping (rank 0)
 *    was posted, then re-posted for iteration k + 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/bugs.h"
#include "engine/core/engine_impl.h"

#define NEXT_TIMER UINT32_MAX

struct pp_pingpong {
  uint32_t peer;
  bool initiator;         /* rank 0: sends the pings and records */
  uint64_t total;         /* warmup + messages round trips */
  uint8_t *sbuf, *rbuf;   /* two buffers each */
  struct pp_mr smr, rmr;
  bool sbusy[2];          /* a send from the buffer is posted, not completed */
  uint64_t sfilled[2];    /* 1 + the iteration the buffer holds, 0 if none */
  uint64_t due;           /* sends the application wants posted (iterations started) */
  uint64_t posted, completed;
  uint64_t received;      /* messages of the peer received (their iteration = their order) */
  uint64_t checked;       /* of those, checked (and their buffers re-posted) */
  uint32_t recvs_out;
  uint64_t start_ns;      /* rank 0: when the current iteration started */
  bool waiting;           /* rank 0: the pause of `interval` before the next iteration runs */
  bool send_failed, recv_failed;
  bool bug_fired;
};

static const unsigned app_access =
    PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ;

static uint64_t total_of(const struct pp_workload *w)
{
  return (uint64_t)w->warmup + w->messages;
}

static enum pp_status pingpong_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  CHECK(c->nranks == 2, "workload 'pingpong' runs between 2 ranks, got %u", c->nranks);
  CHECK(c->workload.pattern == PP_PATTERN_PAIR,
        "workload 'pingpong' needs pattern 'pair' (rank 0 <-> rank 1), got '%s'",
        pp_pattern_name(c->workload.pattern));
  CHECK(c->workload.warmup <= PP_MAX_MESSAGES, "warmup must be 0..%u, got %u", PP_MAX_MESSAGES,
        c->workload.warmup);
  return PP_OK;
}

static enum pp_status post_recv(struct pp_engine *e, uint64_t now, uint64_t iter)
{
  struct pp_pingpong *a = e->as;
  uint32_t size = e->cfg.workload.size, slot = (uint32_t)(iter % 2);
  struct pp_msg m = {
      .peer = a->peer, .buf = a->rbuf + (size_t)slot * size, .len = size, .mr = &a->rmr,
      .cookie = slot};
  enum pp_status s = e->proto->recv(e, now, &m);
  if (s == PP_AGAIN)
    return PP_LIMIT; /* protocols accept rq_depth (>= 2 here) outstanding receives */
  if (s == PP_OK)
    a->recvs_out++;
  return s;
}

/* Buffer k % 2 takes message `k` of this rank when it is free and k is to come. */
static void fill_ahead(struct pp_engine *e, uint64_t k)
{
  struct pp_pingpong *a = e->as;
  uint32_t slot = (uint32_t)(k % 2), size = e->cfg.workload.size;
  if (k >= a->total || a->sbusy[slot] || a->sfilled[slot] == k + 1)
    return;
  if (!a->initiator && k >= 2 && PP_BUG(&e->cfg, PONG_STALE) && !a->bug_fired) {
    a->bug_fired = true; /* the buffer keeps reply k - 2 */
    a->sfilled[slot] = k + 1;
    return;
  }
  pp_msg_fill(a->sbuf + (size_t)slot * size, size, e->cfg.rank, k);
  a->sfilled[slot] = k + 1;
}

static enum pp_status pingpong_plan(struct pp_engine *e)
{
  const struct pp_workload *w = &e->cfg.workload;
  struct pp_pingpong *a = calloc(1, sizeof(*a));
  if (!a)
    return PP_NOMEM;
  e->as = a;
  a->initiator = e->cfg.rank == 0;
  a->peer = 1 - e->cfg.rank; /* pingpong_check: 2 ranks */
  a->total = total_of(w);
  e->lat_cap = a->initiator ? w->messages : 0;
  return pp_engine_add_peer(e, a->peer);
}

static enum pp_status pingpong_create(struct pp_engine *e)
{
  struct pp_pingpong *a = e->as;
  uint32_t size = e->cfg.workload.size;
  if (!(a->sbuf = calloc(2, size)) || !(a->rbuf = calloc(2, size)))
    return PP_NOMEM;
  enum pp_status s = pp_engine_reg(e, a->sbuf, 2 * (size_t)size, app_access, &a->smr);
  if (s == PP_OK)
    s = pp_engine_reg(e, a->rbuf, 2 * (size_t)size, app_access, &a->rmr);
  fill_ahead(e, 0);
  fill_ahead(e, 1);
  /* both receives are posted before anyone can send: the QPs are only in INIT */
  for (uint64_t k = 0; s == PP_OK && k < 2 && k < a->total; k++)
    s = post_recv(e, 0, k);
  return s;
}

static void pingpong_destroy(struct pp_engine *e)
{
  struct pp_pingpong *a = e->as;
  if (!a)
    return;
  pp_engine_dereg(e, &a->smr);
  pp_engine_dereg(e, &a->rmr);
  free(a->sbuf);
  free(a->rbuf);
  free(a);
  e->as = NULL;
}

static bool failed(const struct pp_pingpong *a)
{
  return a->send_failed || a->recv_failed;
}

/* Posts the sends due, in order (each waits for its buffer's previous send to complete). */
static enum pp_status post_sends(struct pp_engine *e, uint64_t now)
{
  struct pp_pingpong *a = e->as;
  uint32_t size = e->cfg.workload.size;
  while (!failed(a) && a->posted < a->due) {
    uint64_t k = a->posted;
    uint32_t slot = (uint32_t)(k % 2);
    if (a->sbusy[slot])
      return PP_OK; /* its send_done comes */
    fill_ahead(e, k);
    struct pp_msg m = {.peer = a->peer, .buf = a->sbuf + (size_t)slot * size, .len = size,
                       .mr = &a->smr, .cookie = slot};
    enum pp_status s = e->proto->send(e, now, &m);
    if (s == PP_AGAIN) {
      /* retried after the next event, as stream does; none can come: an error */
      bool event_ahead = a->posted > a->completed || a->recvs_out > 0 || !e->proto->quiet(e) ||
                         pp_engine_next_deadline(e) != PP_NO_DEADLINE;
      return event_ahead ? PP_OK : PP_AGAIN;
    }
    if (s != PP_OK)
      return s;
    a->sbusy[slot] = true;
    a->sfilled[slot] = 0; /* the bytes are the NIC's until the completion */
    a->posted++;
  }
  return PP_OK;
}

/* The messages received and not yet checked, each checked and its buffer re-posted for the
 * message two on (never before the check: the bytes are the application's until then). */
static void check_received(struct pp_engine *e, uint64_t now)
{
  struct pp_pingpong *a = e->as;
  uint32_t size = e->cfg.workload.size;
  for (; a->checked < a->received; a->checked++) {
    uint64_t k = a->checked;
    if (pp_msg_check(a->rbuf + (size_t)(k % 2) * size, size, a->peer, k) == 0) {
      e->st.messages_received++;
      e->st.bytes_received += size;
    } else {
      e->st.corrupt++;
    }
    if (!a->recv_failed && k + 2 < a->total && post_recv(e, now, k + 2) != PP_OK)
      a->recv_failed = true;
  }
}

/* After every event (the engine's pump, and the start): the sends due first, then the checks,
 * so that a reply (rank 1) or the next ping (rank 0) never waits for a check. */
static enum pp_status pingpong_pump(struct pp_engine *e, uint64_t now)
{
  enum pp_status s = post_sends(e, now);
  check_received(e, now);
  return s;
}

/* Rank 0: iteration `due` starts now (its ping goes at the pump after this event). */
static void next_ping(struct pp_engine *e, uint64_t now)
{
  struct pp_pingpong *a = e->as;
  a->start_ns = now;
  a->due++;
}

static enum pp_status pingpong_start(struct pp_engine *e, uint64_t now)
{
  struct pp_pingpong *a = e->as;
  if (a->initiator)
    next_ping(e, now);
  return pingpong_pump(e, now);
}

static enum pp_status pingpong_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                         enum pp_wc_status st)
{
  struct pp_pingpong *a = e->as;
  (void)now;
  if (cookie >= 2 || !a->sbusy[cookie])
    return PP_INVALID; /* not a buffer, or no send outstanding from it */
  uint32_t slot = (uint32_t)cookie;
  a->sbusy[slot] = false;
  a->completed++;
  if (st != PP_WC_SUCCESS) {
    a->send_failed = true;
    return PP_OK;
  }
  e->st.messages_sent++;
  e->st.bytes_sent += e->cfg.workload.size;
  /* the next message this buffer carries: two iterations on (sends complete in order) */
  fill_ahead(e, a->completed + 1);
  return PP_OK; /* the engine pumps after the event: a send waiting for this buffer goes */
}

static enum pp_status pingpong_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                         enum pp_wc_status st, uint32_t src, uint64_t tag,
                                         uint32_t len)
{
  struct pp_pingpong *a = e->as;
  const struct pp_workload *w = &e->cfg.workload;
  (void)tag;
  uint64_t k = a->received;
  if (cookie != k % 2 || a->recvs_out == 0)
    return PP_INVALID; /* not the buffer of the next message, or no receive outstanding */
  a->recvs_out--;
  if (st != PP_WC_SUCCESS) {
    a->recv_failed = true;
    return PP_OK;
  }
  if (len != w->size || src != a->peer) {
    e->st.corrupt++; /* not the message the peer sends: counted, not checked */
    a->recv_failed = true;
    return PP_OK;
  }
  a->received++;
  /* the send this one calls for goes, and the bytes are checked, at the engine's pump after
   * this event, never from inside the protocol's callback (as stream sends) */
  if (!a->initiator) {
    a->due++; /* the reply to ping k */
    return PP_OK;
  }
  if (k >= w->warmup)
    pp_engine_latency(e, (now - a->start_ns) / 2);
  if (a->received == a->total)
    return PP_OK;
  if (!w->interval_ns) {
    next_ping(e, now);
    return PP_OK;
  }
  a->waiting = true;
  return pp_engine_push_timer(e, now + w->interval_ns, PP_TIMER_APP, NEXT_TIMER);
}

static enum pp_status pingpong_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct pp_pingpong *a = e->as;
  if (arg != NEXT_TIMER || !a->waiting)
    return PP_INVALID;
  a->waiting = false;
  if (!failed(a))
    next_ping(e, now);
  return PP_OK; /* the engine pumps after the due timers */
}

static bool pingpong_done(const struct pp_engine *e)
{
  const struct pp_pingpong *a = e->as;
  if (a->posted != a->completed || a->checked != a->received)
    return false;
  return failed(a) || (a->received == a->total && a->completed == a->total);
}

static size_t pingpong_dump(const struct pp_engine *e, char *buf, size_t len)
{
  const struct pp_pingpong *a = e->as;
  if (!a)
    return 0;
  int n = snprintf(buf, len,
                   "  pingpong: %s rank %u: %llu of %llu round trips (%u warm-up), %llu sends due, "
                   "%llu posted, %llu completed, %llu received, %u receives posted%s%s%s\n",
                   a->initiator ? "pinging" : "answering", a->peer,
                   (unsigned long long)a->received, (unsigned long long)a->total,
                   e->cfg.workload.warmup, (unsigned long long)a->due,
                   (unsigned long long)a->posted, (unsigned long long)a->completed,
                   (unsigned long long)a->received, a->recvs_out,
                   a->waiting ? ", pausing before the next ping" : "",
                   a->send_failed ? ", a send failed" : "",
                   a->recv_failed ? ", a receive failed" : "");
  return n > 0 ? (size_t)n : 0;
}

static size_t pingpong_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct pp_pingpong *a = e->as;
  size_t n = 0;
  if (!a)
    return 0;
  if (a->posted > a->completed)
    pp_wait_add(out, max, &n, PP_WAIT_SEND_WC, a->peer, PP_WAIT_NOTAG, 0,
                "%s %llu to rank %u posted, not completed", a->initiator ? "ping" : "reply",
                (unsigned long long)a->completed, a->peer);
  if (!failed(a) && a->received < a->total && (!a->initiator || a->received < a->posted))
    pp_wait_add(out, max, &n, PP_WAIT_MESSAGE, a->peer, PP_WAIT_NOTAG,
                a->initiator ? a->start_ns : 0,
                "waits for the %s of round trip %llu from rank %u (%llu of %llu received, %u "
                "receives posted)",
                a->initiator ? "reply" : "ping", (unsigned long long)a->received, a->peer,
                (unsigned long long)a->received, (unsigned long long)a->total, a->recvs_out);
  return n;
}

const struct pp_app_ops pp_pingpong_ops = {
    .name = "pingpong",
    .plan = pingpong_plan,
    .create = pingpong_create,
    .destroy = pingpong_destroy,
    .start = pingpong_start,
    .pump = pingpong_pump,
    .on_timer = pingpong_on_timer,
    .send_done = pingpong_send_done,
    .recv_done = pingpong_recv_done,
    .done = pingpong_done,
    .dump = pingpong_dump,
    .pending = pingpong_pending,
};

/* ------------------------------------------------------------------ registry */

static void pingpong_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m,
                              uint32_t *npeers, uint64_t *lat)
{
  *npeers = 1;
  pp_mem_add(m, 4 * (c->workload.size + 16ull), "workload.size (2 send and 2 receive buffers)");
  pp_mem_add(m, 4096, "workload");
  *lat = c->workload.messages;
}

const struct pp_workload_def pp_pingpong_def = {
    .name = "pingpong",
    .desc = "rank 0 <-> rank 1 round trips, half of each recorded (perftest/OSU latency)",
    .pair_odd = true, /* so that 3 ranks get pingpong_check's sentence, not the pattern's */
    .check = pingpong_check,
    .mem_need = pingpong_mem_need,
    .ops = &pp_pingpong_ops,
};
