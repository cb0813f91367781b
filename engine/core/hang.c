#include "prepost/hang.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/names.h"

static const char *const kind_names[] = {
#define PP_X(id, name, desc) [PP_WAIT_##id] = name,
    PP_WAIT_KIND_LIST(PP_X)
#undef PP_X
};

const char *pp_wait_kind_name(enum pp_wait_kind k)
{
  return pp_name_of(kind_names, PP_NAMES_COUNT(kind_names), k);
}

bool pp_wait_is_note(enum pp_wait_kind k)
{
  return k == PP_WAIT_UNEXPECTED || k == PP_WAIT_WILDCARD || k == PP_WAIT_TIMER;
}

static const char *const rank_state_names[] = {
#define PP_X(id, name) [PP_HANG_##id] = name,
    PP_HANG_RANK_LIST(PP_X)
#undef PP_X
};

const char *pp_hang_rank_state_name(enum pp_hang_rank_state s)
{
  return pp_name_of(rank_state_names, PP_NAMES_COUNT(rank_state_names), s);
}

static const char *const trigger_names[] = {
#define PP_X(id, name, desc) [PP_HANG_TRIGGER_##id] = name,
    PP_HANG_TRIGGER_LIST(PP_X)
#undef PP_X
};

const char *pp_hang_trigger_name(enum pp_hang_trigger t)
{
  return pp_name_of(trigger_names, PP_NAMES_COUNT(trigger_names), t);
}

static const char *const clock_names[] = {
#define PP_X(id, name, desc) [PP_HANG_CLOCK_##id] = name,
    PP_HANG_CLOCK_LIST(PP_X)
#undef PP_X
};

static const char *const clock_descs[] = {
#define PP_X(id, name, desc) [PP_HANG_CLOCK_##id] = desc,
    PP_HANG_CLOCK_LIST(PP_X)
#undef PP_X
};

const char *pp_hang_clock_name(enum pp_hang_clock c)
{
  return pp_name_of(clock_names, PP_NAMES_COUNT(clock_names), c);
}

const char *pp_hang_clock_desc(enum pp_hang_clock c)
{
  return pp_name_of(clock_descs, PP_NAMES_COUNT(clock_descs), c);
}

void pp_wait_add(struct pp_wait *out, size_t max, size_t *n, enum pp_wait_kind kind,
                 uint32_t peer, uint32_t tag, uint64_t since_ns, const char *fmt, ...)
{
  if (*n < max) {
    struct pp_wait *w = &out[*n];
    *w = (struct pp_wait){.kind = (uint8_t)kind, .peer = peer, .tag = tag, .since_ns = since_ns};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->what, sizeof(w->what), fmt, ap);
    va_end(ap);
  }
  (*n)++;
}

/* ------------------------------------------------------------------ one engine */

static size_t qp_errors(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  size_t n = 0;
  for (uint32_t i = 0; i < e->nqps; i++) {
    const struct pp_qp_seen *q = &e->qps[i];
    if (q->error != PP_WC_SUCCESS)
      pp_wait_add(out, max, &n, PP_WAIT_QP_ERROR, q->peer, PP_WAIT_NOTAG, q->error_ns,
                  "qp 0x%x to rank %u is in ERROR since %" PRIu64 " ns (%s): nothing more "
                  "moves on it", q->qpn, q->peer, q->error_ns,
                  pp_wc_status_name((enum pp_wc_status)q->error));
  }
  for (uint32_t i = 0; i < e->npeers; i++) {
    char t[PP_WAIT_TEXT];
    if (!e->violated[i])
      continue;
    pp_violation_text(&e->viol[i], t, sizeof(t));
    pp_wait_add(out, max, &n, PP_WAIT_QP_ERROR, e->peers[i], PP_WAIT_NOTAG, e->viol[i].at_ns,
                "connection failed, peer broke the protocol: %s", t);
  }
  return n;
}

size_t pp_engine_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  size_t n = qp_errors(e, out, max);
  if (pp_engine_done(e))
    return n;
  n += e->proto->pending(e, n < max ? out + n : NULL, n < max ? max - n : 0);
  if (e->appops->pending) {
    n += e->appops->pending(e, n < max ? out + n : NULL, n < max ? max - n : 0);
  } else if (!e->appops->done(e)) {
    pp_wait_add(out, max, &n, PP_WAIT_WORKLOAD, PP_WAIT_NOPEER, PP_WAIT_NOTAG, 0,
                "workload %s is not done", e->appops->name);
  }
  if (e->timers.len) {
    const struct pp_timer *t = &e->timers.heap[0]; /* the heap's root is the earliest */
    pp_wait_add(out, max, &n, PP_WAIT_TIMER, PP_WAIT_NOPEER, PP_WAIT_NOTAG, t->deadline,
                "its next timer (%s) fires at %" PRIu64 " ns",
                t->kind == PP_TIMER_APP ? "workload" : "protocol", t->deadline);
  }
  return n;
}

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
  const uint8_t *b = p;
  for (size_t i = 0; i < len; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t pp_engine_progress_mark(const struct pp_engine *e)
{
  enum { BATCH = 64 };
  struct pp_wait w[BATCH];
  size_t n = pp_engine_pending(e, w, BATCH);
  uint64_t h = fnv(0xcbf29ce484222325ull, &e->finished, sizeof(e->finished));
  for (size_t i = 0; i < n && i < BATCH; i++) {
    if (w[i].kind == PP_WAIT_TIMER)
      continue; /* a timer re-armed is no progress */
    h = fnv(h, &w[i].kind, 1);
    h = fnv(h, &w[i].peer, sizeof(w[i].peer));
    h = fnv(h, &w[i].tag, sizeof(w[i].tag));
    h = fnv(h, w[i].what, strlen(w[i].what));
  }
  return h;
}

/* ------------------------------------------------------------------ the analysis */

enum pp_status pp_hang_init(struct pp_hang *h, uint32_t nranks)
{
  memset(h, 0, sizeof(*h));
  h->nranks = nranks;
  h->rank = calloc(nranks ? nranks : 1, sizeof(*h->rank));
  h->cycle = calloc(nranks + 1, sizeof(*h->cycle));
  if (!h->rank || !h->cycle) {
    pp_hang_free(h);
    return PP_NOMEM;
  }
  for (uint32_t r = 0; r < nranks; r++)
    h->rank[r].state = PP_HANG_UNKNOWN;
  return PP_OK;
}

void pp_hang_free(struct pp_hang *h)
{
  free(h->rank);
  free(h->edge);
  free(h->cycle);
  h->rank = NULL;
  h->edge = NULL;
  h->cycle = NULL;
  h->nedges = h->ncycle = 0;
}

void pp_hang_set_rank(struct pp_hang *h, uint32_t rank, enum pp_hang_rank_state st,
                      uint64_t last_input_ns, const struct pp_wait *w, size_t total)
{
  assert(rank < h->nranks);
  struct pp_hang_rank *k = &h->rank[rank];
  k->state = (uint8_t)st;
  k->last_input_ns = last_input_ns;
  k->total = (uint32_t)total;
  k->nwaits = total < PP_HANG_MAX_WAITS ? (uint32_t)total : PP_HANG_MAX_WAITS;
  if (k->nwaits)
    memcpy(k->waits, w, k->nwaits * sizeof(*w));
}

void pp_hang_set_engine(struct pp_hang *h, uint32_t rank, const struct pp_engine *e)
{
  struct pp_wait w[PP_HANG_MAX_WAITS];
  bool done = pp_engine_done(e);
  size_t n = pp_engine_pending(e, w, PP_HANG_MAX_WAITS); /* a done rank: its QPs in ERROR */
  pp_hang_set_rank(h, rank, done ? PP_HANG_DONE : PP_HANG_STUCK, 0, w, n);
}

static enum pp_status add_edge_v(struct pp_hang *h, uint32_t from, uint32_t to,
                                 enum pp_wait_kind kind, const char *fmt, va_list ap)
{
  for (uint32_t i = 0; i < h->nedges; i++)
    if (h->edge[i].from == from && h->edge[i].to == to)
      return PP_OK; /* the first reason stays */
  if (h->nedges == PP_HANG_MAX_EDGES)
    return PP_LIMIT;
  if ((h->nedges & (h->nedges - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of 2 */
    uint32_t cap = h->nedges ? h->nedges * 2 : 1;
    struct pp_hang_edge *n = realloc(h->edge, cap * sizeof(*n));
    if (!n)
      return PP_NOMEM;
    h->edge = n;
  }
  struct pp_hang_edge *x = &h->edge[h->nedges++];
  *x = (struct pp_hang_edge){.from = from, .to = to, .kind = (uint8_t)kind};
  vsnprintf(x->why, sizeof(x->why), fmt, ap);
  return PP_OK;
}

enum pp_status pp_hang_add_edge(struct pp_hang *h, uint32_t from, uint32_t to,
                                enum pp_wait_kind kind, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  enum pp_status s = add_edge_v(h, from, to, kind, fmt, ap);
  va_end(ap);
  return s;
}

/* Depth-first search for a cycle; fills h->cycle and h->ncycle (0 when there is none). */
static void find_cycle(struct pp_hang *h)
{
  uint32_t n = h->nranks;
  uint8_t *color = calloc(n ? n : 1, 1); /* 0 new, 1 on the stack, 2 done */
  uint32_t *stack = calloc(n + 1, sizeof(uint32_t));
  uint32_t *next = calloc(n ? n : 1, sizeof(uint32_t));
  for (uint32_t s0 = 0; color && stack && next && s0 < n && !h->ncycle; s0++) {
    if (color[s0])
      continue;
    uint32_t sp = 0;
    stack[sp++] = s0;
    color[s0] = 1;
    while (sp && !h->ncycle) {
      uint32_t u = stack[sp - 1];
      bool pushed = false;
      for (; next[u] < h->nedges && !pushed && !h->ncycle; next[u]++) {
        const struct pp_hang_edge *x = &h->edge[next[u]];
        if (x->from != u || x->to >= n)
          continue;
        if (color[x->to] == 1) { /* back edge: the cycle is to .. u on the stack */
          uint32_t i = sp;
          while (i > 0 && stack[i - 1] != x->to)
            i--;
          for (uint32_t j = i - 1; j < sp; j++)
            h->cycle[h->ncycle++] = stack[j];
        } else if (color[x->to] == 0) {
          color[x->to] = 1;
          stack[sp++] = x->to;
          pushed = true;
        }
      }
      if (!pushed && !h->ncycle) {
        color[u] = 2;
        sp--;
      }
    }
  }
  free(color);
  free(stack);
  free(next);
}

static const struct pp_wait *find_wait(const struct pp_hang_rank *k, enum pp_wait_kind kind,
                                       uint32_t peer)
{
  for (uint32_t i = 0; i < k->nwaits; i++)
    if (k->waits[i].kind == kind && (peer == PP_WAIT_NOPEER || k->waits[i].peer == peer))
      return &k->waits[i];
  return NULL;
}

static const struct pp_hang_edge *edge_of(const struct pp_hang *h, uint32_t from, uint32_t to)
{
  for (uint32_t i = 0; i < h->nedges; i++)
    if (h->edge[i].from == from && h->edge[i].to == to)
      return &h->edge[i];
  return NULL;
}

#define CAUSE(...) snprintf(h->cause, sizeof(h->cause), __VA_ARGS__)

/* A wildcard receive that took the "wrong" sender's message: rank r holds an unexpected message
 * from s2, its receive from s never matches, and an ANY_SOURCE receive of r matched s. */
static bool wildcard_cause(struct pp_hang *h, uint32_t r)
{
  const struct pp_hang_rank *k = &h->rank[r];
  for (uint32_t i = 0; i < k->nwaits; i++) {
    const struct pp_wait *un = &k->waits[i];
    if (un->kind != PP_WAIT_UNMATCHED || un->peer == PP_WAIT_NOPEER)
      continue;
    const struct pp_wait *wild = find_wait(k, PP_WAIT_WILDCARD, un->peer);
    if (!wild)
      continue;
    for (uint32_t j = 0; j < k->nwaits; j++) {
      const struct pp_wait *ux = &k->waits[j];
      if (ux->kind != PP_WAIT_UNEXPECTED || ux->peer == un->peer || ux->peer == PP_WAIT_NOPEER)
        continue;
      CAUSE("wildcard: rank %u's ANY_SOURCE receive matched rank %u's message, so its receive "
            "from rank %u (tag %u) never matches and rank %u's message (tag %u) has no receive: "
            "rank %u stays blocked",
            r, un->peer, un->peer, un->tag, ux->peer, ux->tag, ux->peer);
      return true;
    }
  }
  return false;
}

/* A receive that is never posted: rank r's posted receive from s never matches while s's
 * message to r (another tag) waits unexpected at r. */
static bool mismatch_cause(struct pp_hang *h, uint32_t r)
{
  const struct pp_hang_rank *k = &h->rank[r];
  if (k->state != PP_HANG_STUCK)
    return false;
  for (uint32_t i = 0; i < k->nwaits; i++) {
    const struct pp_wait *un = &k->waits[i];
    if (un->kind != PP_WAIT_UNMATCHED)
      continue;
    for (uint32_t j = 0; j < k->nwaits; j++) {
      const struct pp_wait *ux = &k->waits[j];
      if (ux->kind != PP_WAIT_UNEXPECTED ||
          (un->peer != PP_WAIT_NOPEER && ux->peer != un->peer))
        continue;
      CAUSE("unposted receive: rank %u's message to rank %u (tag %u) has no receive there, and "
            "rank %u's %s: rank %u waits for it",
            ux->peer, r, ux->tag, r, un->what, ux->peer);
      return true;
    }
  }
  return false;
}

/* No cycle: where the chain of waits from the first stuck rank with one ends (at most nranks
 * steps: the graph has no cycle). */
static void find_chain_end(struct pp_hang *h)
{
  h->chain_end = PP_WAIT_NOPEER;
  h->chain_timer = false;
  if (h->ncycle || !h->nedges)
    return;
  uint32_t cur = h->edge[0].from;
  for (uint32_t step = 0; step < h->nranks; step++) {
    uint32_t next = PP_WAIT_NOPEER;
    for (uint32_t i = 0; i < h->nedges && next == PP_WAIT_NOPEER; i++)
      if (h->edge[i].from == cur)
        next = h->edge[i].to;
    if (next == PP_WAIT_NOPEER)
      break;
    cur = next;
  }
  assert(cur < h->nranks);
  h->chain_end = cur;
  h->chain_timer = h->rank[cur].state == PP_HANG_STUCK &&
                   find_wait(&h->rank[cur], PP_WAIT_TIMER, PP_WAIT_NOPEER) != NULL;
}

/* The chain ends at a rank whose timer is pending: it is busy (computing, holding buffers) and
 * will move when it fires; the ranks behind it wait, they are not deadlocked. */
static bool chain_timer_cause(struct pp_hang *h)
{
  uint32_t end = h->chain_end;
  const struct pp_hang_edge *x = NULL;
  for (uint32_t i = 0; i < h->nedges && !x; i++)
    if (h->edge[i].to == end)
      x = &h->edge[i];
  const struct pp_wait *t = find_wait(&h->rank[end], PP_WAIT_TIMER, PP_WAIT_NOPEER);
  const struct pp_wait *w = find_wait(&h->rank[end], PP_WAIT_WORKLOAD, PP_WAIT_NOPEER);
  if (!x || !t)
    return false;
  int n = CAUSE("busy, not stuck: rank %u waits for rank %u (%s), and rank %u is busy until "
                "%s%s%s%s: nothing moves before that timer", x->from, end, x->why, end, t->what,
                w ? " (" : "", w ? w->what : "", w ? ")" : "");
  return n >= 0; /* a cause longer than h->cause is cut */
}

static void name_cause(struct pp_hang *h)
{
  for (uint32_t r = 0; r < h->nranks; r++)
    if (wildcard_cause(h, r))
      return;
  for (uint32_t r = 0; r < h->nranks; r++) {
    const struct pp_wait *q = find_wait(&h->rank[r], PP_WAIT_QP_ERROR, PP_WAIT_NOPEER);
    if (q) {
      CAUSE("qp_error: rank %u: %s", r, q->what);
      return;
    }
  }
  for (uint32_t r = 0; r < h->nranks; r++)
    if (h->rank[r].state == PP_HANG_SILENT) {
      CAUSE("silent: rank %u has had no input since %" PRIu64 " ns: frozen or dead, its "
            "neighbours wait for it", r, h->rank[r].last_input_ns);
      return;
    }
  for (uint32_t r = 0; r < h->nranks; r++)
    if (mismatch_cause(h, r))
      return;
  for (uint32_t i = 0; i < h->ncycle; i++) {
    const struct pp_wait *t = find_wait(&h->rank[h->cycle[i]], PP_WAIT_TIMER, PP_WAIT_NOPEER);
    if (t) {
      CAUSE("cycle through rank %u, but %s: nothing moves before it (a timer, not a "
            "deadlock)", h->cycle[i], t->what);
      return;
    }
  }
  if (h->ncycle) {
    int at = CAUSE("cycle:");
    for (uint32_t i = 0; i < h->ncycle && at > 0 && (size_t)at < sizeof(h->cause); i++)
      at += snprintf(h->cause + at, sizeof(h->cause) - (size_t)at, " %u ->", h->cycle[i]);
    if (at > 0 && (size_t)at < sizeof(h->cause))
      at += snprintf(h->cause + at, sizeof(h->cause) - (size_t)at,
                     " %u: a deadlock, none of them can move first; they wait for", h->cycle[0]);
    for (uint32_t i = 0; i < h->ncycle && at > 0 && (size_t)at < sizeof(h->cause); i++) {
      const struct pp_hang_edge *x = edge_of(h, h->cycle[i], h->cycle[(i + 1) % h->ncycle]);
      at += snprintf(h->cause + at, sizeof(h->cause) - (size_t)at, "%s %s", i ? "," : "",
                     x ? pp_wait_kind_name((enum pp_wait_kind)x->kind) : "?");
    }
    return;
  }
  if (h->chain_timer && chain_timer_cause(h))
    return;
  for (uint32_t r = 0; r < h->nranks; r++) {
    const struct pp_wait *u = find_wait(&h->rank[r], PP_WAIT_UNMATCHED, PP_WAIT_NOPEER);
    if (u) {
      CAUSE("unmatched: rank %u: %s", r, u->what);
      return;
    }
  }
  if (h->stuck)
    CAUSE("chain: the wait-for graph ends at a rank that cannot help (finished, dead or "
          "unknown)");
}

void pp_hang_analyze(struct pp_hang *h)
{
  h->stuck = 0;
  for (uint32_t r = 0; r < h->nranks; r++) {
    const struct pp_hang_rank *k = &h->rank[r];
    if (k->state != PP_HANG_STUCK && k->state != PP_HANG_SILENT)
      continue;
    h->stuck++;
    if (k->state == PP_HANG_SILENT)
      continue; /* frozen or dead: what it waits for says nothing */
    for (uint32_t i = 0; i < k->nwaits; i++) {
      const struct pp_wait *w = &k->waits[i];
      if (pp_wait_is_note((enum pp_wait_kind)w->kind) || w->peer >= h->nranks || w->peer == r)
        continue;
      const struct pp_hang_rank *pk = &h->rank[w->peer];
      const struct pp_wait *pq = find_wait(pk, PP_WAIT_QP_ERROR, r);
      char tail[PP_WAIT_TEXT + 32] = "";
      if (pq && w->kind != PP_WAIT_QP_ERROR)
        snprintf(tail, sizeof(tail), "; rank %u's %s", w->peer, pq->what);
      else if (pk->state == PP_HANG_DONE)
        snprintf(tail, sizeof(tail), " (rank %u is done: nothing comes)", w->peer);
      pp_hang_add_edge(h, r, w->peer, (enum pp_wait_kind)w->kind, "%s%s", w->what, tail);
    }
  }
  find_cycle(h);
  find_chain_end(h);
  h->cause[0] = '\0';
  name_cause(h);
}
