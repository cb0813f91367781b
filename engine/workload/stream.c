/*
 * The stream workload: each sending rank sends `messages` messages of `size` bytes to its
 * destination (pattern pair or ring), one submitted every interval_ns; each receiving rank keeps
 * rq_depth receive buffers posted and, on a slow rank, re-posts a buffer only consume_ns after its
 * message arrived (the classic usleep(100)-between-receives consumer). Every byte is checked, and the order.
 * It drives whatever protocol the engine runs through pp_proto_ops.send/recv.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/bugs.h"
#include "engine/core/engine_impl.h"

#define SUBMIT_TIMER UINT32_MAX

struct pp_stream {
  int dest, source; /* peer ranks, -1 when none */
  bool slow;        /* holds each received buffer consume_ns before re-posting it */
  /* sender: `window` message buffers */
  uint8_t *sbuf;
  struct pp_mr smr;
  uint32_t window;
  uint32_t *sfree;
  uint32_t nsfree;
  uint64_t *slot_seq;
  uint64_t submitted, posted, completed;
  bool send_failed;
  /* receiver: rq_depth buffers, each posted as a receive */
  uint8_t *rbuf;
  struct pp_mr rmr;
  uint32_t nrbuf;
  uint64_t expected_seq, received;
  uint32_t recvs_out;
  bool recv_failed;
  uint64_t *held;  /* slow consumer: 1 + seq of the message a held buffer holds, 0 if not held */
  bool bug_fired;  /* test bugs (engine/core/bugs.h) that act once */
};

static uint64_t pattern_base(uint32_t src, uint64_t seq)
{
  return (seq + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(src + 1) * 0xc2b2ae3d27d4eb4full;
}

#define PATTERN_STEP 0x165667b19e3779f9ull

/* The word at byte offset i of message (src, seq) (i a multiple of 8, host order). */
static uint64_t pattern_word(uint32_t src, uint64_t seq, uint64_t i)
{
  uint64_t x = pattern_base(src, seq) ^ i * PATTERN_STEP;
  return x ^ (x >> 29);
}

static uint32_t header_check(uint32_t src, uint64_t seq)
{
  return (uint32_t)(pattern_word(src, seq, UINT64_MAX) >> 32);
}

/* Eight pattern words at a time, as four pairs (the GNU vector extension: SSE2 on x86-64, NEON
 * on arm64; any other target gets the same words from scalar code the compiler makes of it).
 * pattern_word's x ^ (x >> 29), x = base ^ m (m = i * STEP), is (base ^ (base >> 29)) ^ (m ^
 * (m >> 29)), a logical shift distributing over XOR: per pair, one shift and two XORs of the
 * pair's m, which moves by 64 bytes a step. */
typedef uint64_t pp_u64x2 __attribute__((vector_size(16)));

struct pattern_gen {
  pp_u64x2 fold;           /* base ^ (base >> 29), both lanes */
  pp_u64x2 m0, m1, m2, m3; /* {i, i + 8} * STEP, ... {i + 48, i + 56} * STEP of the next 64 bytes */
};

static struct pattern_gen pattern_at(uint32_t src, uint64_t seq, uint64_t i)
{
  uint64_t b = pattern_base(src, seq), f = b ^ (b >> 29), s = PATTERN_STEP;
  return (struct pattern_gen){.fold = {f, f},
                              .m0 = {i * s, (i + 8) * s},
                              .m1 = {(i + 16) * s, (i + 24) * s},
                              .m2 = {(i + 32) * s, (i + 40) * s},
                              .m3 = {(i + 48) * s, (i + 56) * s}};
}

/* The word pair of m (written out four times rather than a loop over an array, which -O2 would
 * keep in memory). */
#define PATTERN_PAIR(g, m) ((g)->fold ^ (g)->m ^ ((g)->m >> 29))

/* The generator's offset moves 64 bytes on. */
static inline void pattern_next(struct pattern_gen *g)
{
  const pp_u64x2 step = {64 * PATTERN_STEP, 64 * PATTERN_STEP};
  g->m0 += step;
  g->m1 += step;
  g->m2 += step;
  g->m3 += step;
}

void pp_msg_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  uint32_t check = header_check(src, seq);
  memcpy(buf, &seq, 8);
  memcpy(buf + 8, &src, 4);
  memcpy(buf + 12, &check, 4);
  uint32_t i = PP_MSG_HEADER;
  struct pattern_gen g = pattern_at(src, seq, i);
  for (; i + 64 <= size; i += 64) {
    pp_u64x2 w0 = PATTERN_PAIR(&g, m0), w1 = PATTERN_PAIR(&g, m1), w2 = PATTERN_PAIR(&g, m2),
             w3 = PATTERN_PAIR(&g, m3);
    memcpy(buf + i, &w0, 16);
    memcpy(buf + i + 16, &w1, 16);
    memcpy(buf + i + 32, &w2, 16);
    memcpy(buf + i + 48, &w3, 16);
    pattern_next(&g);
  }
  for (; i + 8 <= size; i += 8) {
    uint64_t w = pattern_word(src, seq, i);
    memcpy(buf + i, &w, 8);
  }
  if (i < size) {
    uint64_t w = pattern_word(src, seq, i);
    memcpy(buf + i, &w, size - i);
  }
}

int pp_msg_check(const uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  uint64_t hseq;
  uint32_t hsrc, hcheck;
  if (size < PP_MSG_HEADER)
    return -1;
  memcpy(&hseq, buf, 8);
  memcpy(&hsrc, buf + 8, 4);
  memcpy(&hcheck, buf + 12, 4);
  if (hseq != seq || hsrc != src || hcheck != header_check(src, seq))
    return -1;
  uint32_t i = PP_MSG_HEADER;
  struct pattern_gen g = pattern_at(src, seq, i);
  /* got ^ m ^ (m >> 29) is fold wherever the bytes are right: over blocks of 256 bytes, the OR
   * and the AND of those are fold if and only if every one is (a bit set where fold has 0 shows
   * in the OR, a bit clear where fold has 1 in the AND), which spares XORing each with fold */
  while (i + 64 <= size) {
    pp_u64x2 any = {0, 0}, all = {~0ull, ~0ull};
    for (uint32_t end = i + 256 < size ? i + 256 : size; i + 64 <= end; i += 64) {
      pp_u64x2 g0, g1, g2, g3;
      memcpy(&g0, buf + i, 16);
      memcpy(&g1, buf + i + 16, 16);
      memcpy(&g2, buf + i + 32, 16);
      memcpy(&g3, buf + i + 48, 16);
      g0 ^= g.m0 ^ (g.m0 >> 29);
      g1 ^= g.m1 ^ (g.m1 >> 29);
      g2 ^= g.m2 ^ (g.m2 >> 29);
      g3 ^= g.m3 ^ (g.m3 >> 29);
      any |= (g0 | g1) | (g2 | g3);
      all &= (g0 & g1) & (g2 & g3);
      pattern_next(&g);
    }
    pp_u64x2 bad = (any ^ g.fold) | (all ^ g.fold);
    if (bad[0] | bad[1])
      return -1;
  }
  for (; i + 8 <= size; i += 8) {
    uint64_t w = pattern_word(src, seq, i);
    if (memcmp(buf + i, &w, 8) != 0)
      return -1;
  }
  if (i < size) {
    uint64_t w = pattern_word(src, seq, i);
    if (memcmp(buf + i, &w, size - i) != 0)
      return -1;
  }
  return 0;
}

static const unsigned app_access =
    PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ;

static uint64_t submit_time(const struct pp_engine *e, uint64_t seq)
{
  return e->start_ns + seq * e->cfg.workload.interval_ns;
}

static enum pp_status post_recv(struct pp_engine *e, uint64_t now, uint32_t slot)
{
  struct pp_stream *a = e->as;
  uint32_t size = e->cfg.workload.size;
  struct pp_msg m = {
      .peer = (uint32_t)a->source,
      .buf = a->rbuf + (size_t)slot * size,
      .len = size,
      .mr = &a->rmr,
      .cookie = slot,
  };
  enum pp_status s = e->proto->recv(e, now, &m);
  if (s == PP_AGAIN)
    return PP_LIMIT; /* protocols accept rq_depth outstanding receives */
  if (s == PP_OK)
    a->recvs_out++;
  return s;
}

static enum pp_status stream_plan(struct pp_engine *e)
{
  const struct pp_workload *w = &e->cfg.workload;
  struct pp_stream *a = calloc(1, sizeof(*a));
  if (!a)
    return PP_NOMEM;
  e->as = a;
  a->dest = pp_workload_dest(w, e->cfg.rank, e->cfg.nranks);
  a->source = pp_workload_source(w, e->cfg.rank, e->cfg.nranks);
  a->slow = (w->consume_ns > 0 || w->consume_jitter_ns > 0) &&
            (w->consume_ranks == 0 || (e->cfg.rank < 64 && (w->consume_ranks >> e->cfg.rank) & 1));
  if (a->dest >= 0)
    pp_engine_add_peer(e, (uint32_t)a->dest);
  if (a->source >= 0)
    pp_engine_add_peer(e, (uint32_t)a->source);
  e->lat_cap = a->dest >= 0 ? w->messages : 0;
  return PP_OK;
}

static enum pp_status stream_create(struct pp_engine *e)
{
  struct pp_stream *a = e->as;
  const struct pp_workload *w = &e->cfg.workload;
  uint32_t size = w->size;
  enum pp_status s = PP_OK;
  if (a->dest >= 0) {
    a->window = e->cfg.qp.sq_depth;
    a->sbuf = calloc(a->window, size);
    a->sfree = calloc(a->window, sizeof(*a->sfree));
    a->slot_seq = calloc(a->window, sizeof(*a->slot_seq));
    if (!a->sbuf || !a->sfree || !a->slot_seq)
      return PP_NOMEM;
    for (uint32_t i = 0; i < a->window; i++)
      a->sfree[i] = a->window - 1 - i;
    a->nsfree = a->window;
    s = pp_engine_reg(e, a->sbuf, (size_t)a->window * size, app_access, &a->smr);
  }
  if (s == PP_OK && a->source >= 0) {
    a->nrbuf = e->cfg.qp.rq_depth;
    if (!(a->rbuf = calloc(a->nrbuf, size)) || !(a->held = calloc(a->nrbuf, sizeof(*a->held))))
      return PP_NOMEM;
    s = pp_engine_reg(e, a->rbuf, (size_t)a->nrbuf * size, app_access, &a->rmr);
    /* receives are posted before anyone can send: the QPs are only in INIT (unless
     * post_delay_ns, a fault: then stream_start posts them late) */
    for (uint32_t i = 0; s == PP_OK && !w->post_delay_ns && i < a->nrbuf && i < w->messages; i++)
      s = post_recv(e, 0, i);
  }
  return s;
}

static void stream_destroy(struct pp_engine *e)
{
  struct pp_stream *a = e->as;
  if (!a)
    return;
  pp_engine_dereg(e, &a->smr);
  pp_engine_dereg(e, &a->rmr);
  free(a->sbuf);
  free(a->sfree);
  free(a->slot_seq);
  free(a->rbuf);
  free(a->held);
  free(a);
  e->as = NULL;
}

/* consume_ns + U[0, consume_jitter_ns] */
static uint64_t hold_ns(struct pp_engine *e)
{
  const struct pp_workload *w = &e->cfg.workload;
  return w->consume_ns + (w->consume_jitter_ns ? pp_prng_below(&e->prng, w->consume_jitter_ns + 1) : 0);
}

static enum pp_status stream_pump(struct pp_engine *e, uint64_t now)
{
  struct pp_stream *a = e->as;
  uint32_t size = e->cfg.workload.size;
  while (a->dest >= 0 && !a->send_failed && a->posted < a->submitted && a->nsfree > 0) {
    uint32_t slot = a->sfree[a->nsfree - 1];
    uint8_t *buf = a->sbuf + (size_t)slot * size;
    if (PP_BUG(&e->cfg, SEND_REUSE) && a->posted % 2 == 1 && a->nsfree < a->window)
      buf = a->sbuf + (size_t)a->sfree[a->nsfree] * size; /* the buffer of the previous send */
    uint64_t seq = a->posted;
    pp_msg_fill(buf, size, e->cfg.rank, seq);
    struct pp_msg m = {
        .peer = (uint32_t)a->dest, .buf = buf, .len = size, .mr = &a->smr, .cookie = slot};
    enum pp_status s = e->proto->send(e, now, &m);
    if (s == PP_AGAIN) {
      /* not now: retried after the next event, when one can come (a completion of something
       * outstanding or a timer); else nothing would ever retry it, so it is an error */
      bool event_ahead = a->posted > a->completed || a->recvs_out > 0 || !e->proto->quiet(e) ||
                         pp_engine_next_deadline(e) != PP_NO_DEADLINE;
      return event_ahead ? PP_OK : PP_AGAIN;
    }
    if (s != PP_OK)
      return s;
    a->nsfree--;
    a->slot_seq[slot] = seq;
    a->posted++;
  }
  return PP_OK;
}

static enum pp_status stream_start(struct pp_engine *e, uint64_t now)
{
  struct pp_stream *a = e->as;
  const struct pp_workload *w = &e->cfg.workload;
  for (uint32_t i = 0; a->source >= 0 && w->post_delay_ns && i < a->nrbuf && i < w->messages; i++) {
    uint64_t at = now + w->post_delay_ns +
                  (w->consume_jitter_ns ? pp_prng_below(&e->prng, w->consume_jitter_ns + 1) : 0);
    enum pp_status s = pp_engine_push_timer(e, at, PP_TIMER_APP, i);
    if (s != PP_OK)
      return s;
  }
  if (a->dest < 0)
    return PP_OK;
  if (w->interval_ns == 0) {
    a->submitted = w->messages;
  } else {
    a->submitted = 1;
    if (w->messages > 1) {
      enum pp_status s = pp_engine_push_timer(e, submit_time(e, 1), PP_TIMER_APP, SUBMIT_TIMER);
      if (s != PP_OK)
        return s;
    }
  }
  return stream_pump(e, now);
}

static enum pp_status stream_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                       enum pp_wc_status st)
{
  struct pp_stream *a = e->as;
  if (cookie >= a->window || a->nsfree >= a->window)
    return PP_INVALID; /* not a slot, or no send outstanding */
  uint32_t slot = (uint32_t)cookie;
  a->sfree[a->nsfree++] = slot;
  a->completed++;
  if (st != PP_WC_SUCCESS) {
    a->send_failed = true;
    return PP_OK;
  }
  e->st.messages_sent++;
  e->st.bytes_sent += e->cfg.workload.size;
  pp_engine_latency(e, now - submit_time(e, a->slot_seq[slot]));
  return PP_OK;
}

static enum pp_status stream_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                       enum pp_wc_status st, uint32_t src, uint64_t tag,
                                       uint32_t len)
{
  struct pp_stream *a = e->as;
  (void)tag;
  if (cookie >= a->nrbuf || a->recvs_out == 0)
    return PP_INVALID; /* not a slot, or no receive outstanding */
  uint32_t slot = (uint32_t)cookie, size = e->cfg.workload.size;
  a->recvs_out--;
  if (st != PP_WC_SUCCESS) {
    a->recv_failed = true;
    return PP_OK;
  }
  const uint8_t *buf = a->rbuf + (size_t)slot * size;
  if (len == size && src == (uint32_t)a->source &&
      pp_msg_check(buf, size, src, a->expected_seq) == 0) {
    e->st.messages_received++;
    e->st.bytes_received += size;
  } else {
    e->st.corrupt++;
  }
  a->expected_seq++;
  a->received++;
  if (a->received + a->recvs_out >= e->cfg.workload.messages)
    return PP_OK; /* the receives still posted cover every message to come */
  if (PP_BUG(&e->cfg, LOST_REPOST) && !a->bug_fired) {
    a->bug_fired = true;
    return PP_OK;
  }
  if (a->slow) {
    /* the application reads the buffer until the timer; it checks then that the network left
     * it alone (a re-post before the release would let the next message in) */
    bool pending = a->held[slot] != 0;
    if (pending) /* a message landed in a buffer the application still holds */
      e->st.early_reuse++;
    a->held[slot] = a->expected_seq; /* 1 + this message's seq */
    if (!pending && pp_engine_push_timer(e, now + hold_ns(e), PP_TIMER_APP, slot) != PP_OK)
      e->st.corrupt++; /* cannot happen: the queue holds rq_depth re-posts */
    if (PP_BUG(&e->cfg, EARLY_REPOST) && post_recv(e, now, slot) != PP_OK)
      a->recv_failed = true;
    return PP_OK;
  }
  if (post_recv(e, now, slot) != PP_OK)
    a->recv_failed = true;
  return PP_OK;
}

static enum pp_status stream_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct pp_stream *a = e->as;
  if (arg == SUBMIT_TIMER) {
    if (a->send_failed)
      return PP_OK;
    a->submitted++;
    if (a->submitted < e->cfg.workload.messages) {
      enum pp_status s =
          pp_engine_push_timer(e, submit_time(e, a->submitted), PP_TIMER_APP, SUBMIT_TIMER);
      if (s != PP_OK)
        return s;
    }
    return PP_OK; /* the engine pumps once after the due timers */
  }
  if (arg >= a->nrbuf)
    return PP_INVALID;
  uint32_t size = e->cfg.workload.size;
  if (a->held[arg]) { /* the end of a hold: the bytes must be those the application got */
    if (pp_msg_check(a->rbuf + (size_t)arg * size, size, (uint32_t)a->source, a->held[arg] - 1))
      e->st.early_reuse++;
    a->held[arg] = 0;
    if (PP_BUG(&e->cfg, EARLY_REPOST))
      return PP_OK; /* re-posted at arrival already */
  }
  if (a->recv_failed)
    return PP_OK;
  return post_recv(e, now, arg);
}

static bool stream_done(const struct pp_engine *e)
{
  const struct pp_stream *a = e->as;
  uint64_t n = e->cfg.workload.messages;
  if (a->dest >= 0 && (a->posted != a->completed || (!a->send_failed && a->completed < n)))
    return false;
  if (a->source >= 0 && !a->recv_failed && a->received < n)
    return false;
  return true;
}

static size_t stream_dump(const struct pp_engine *e, char *buf, size_t len)
{
  const struct pp_stream *a = e->as;
  int n = 0;
  if (a && a->dest >= 0)
    n = snprintf(buf, len,
                 "  stream: sending to rank %d: %llu of %u submitted, %llu posted, %llu completed, "
                 "%u of %u send buffers free%s\n",
                 a->dest, (unsigned long long)a->submitted, e->cfg.workload.messages,
                 (unsigned long long)a->posted, (unsigned long long)a->completed, a->nsfree,
                 a->window, a->send_failed ? ", a send failed" : "");
  int m = 0;
  size_t at = n > 0 ? (size_t)n : 0;
  if (a && a->source >= 0)
    m = snprintf(buf + (at < len ? at : len), at < len ? len - at : 0,
                 "  stream: receiving from rank %d: %llu of %u received (next seq %llu), %u "
                 "receives posted of %u buffers%s%s\n",
                 a->source, (unsigned long long)a->received, e->cfg.workload.messages,
                 (unsigned long long)a->expected_seq, a->recvs_out, a->nrbuf,
                 a->slow ? ", slow consumer" : "", a->recv_failed ? ", a receive failed" : "");
  return at + (m > 0 ? (size_t)m : 0);
}

static size_t stream_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct pp_stream *a = e->as;
  size_t n = 0;
  uint64_t msgs = e->cfg.workload.messages;
  if (a && a->dest >= 0 && a->posted > a->completed)
    pp_wait_add(out, max, &n, PP_WAIT_SEND_WC, (uint32_t)a->dest, PP_WAIT_NOTAG, 0,
                "%llu sends to rank %d posted, not completed",
                (unsigned long long)(a->posted - a->completed), a->dest);
  if (a && a->source >= 0 && !a->recv_failed && a->received < msgs)
    pp_wait_add(out, max, &n, PP_WAIT_MESSAGE, (uint32_t)a->source, PP_WAIT_NOTAG, 0,
                "waits for a message from rank %d (%llu of %llu received, %u receives posted)",
                a->source, (unsigned long long)a->received, (unsigned long long)msgs,
                a->recvs_out);
  return n;
}

const struct pp_app_ops pp_stream_ops = {
    .name = "stream",
    .plan = stream_plan,
    .create = stream_create,
    .destroy = stream_destroy,
    .start = stream_start,
    .pump = stream_pump,
    .on_timer = stream_on_timer,
    .send_done = stream_send_done,
    .recv_done = stream_recv_done,
    .done = stream_done,
    .dump = stream_dump,
    .pending = stream_pending,
};

/* ------------------------------------------------------------------ registry */

static void stream_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m,
                            uint32_t *npeers, uint64_t *lat)
{
  *npeers = c->workload.pattern == PP_PATTERN_PAIR ? 1 : 2;
  pp_mem_add(m, ((uint64_t)c->qp.sq_depth + c->qp.rq_depth) * (c->workload.size + 16ull),
             "qp.sq_depth, qp.rq_depth and workload.size");
  pp_mem_add(m, 8192, "workload");
  *lat = c->workload.messages;
}

const struct pp_workload_def pp_stream_def = {
    .name = "stream",
    .desc = "a stream of messages per pattern, checked byte by byte",
    .mem_need = stream_mem_need,
    .ops = &pp_stream_ops,
};
