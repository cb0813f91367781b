/*
 * The script workload: each rank runs the programs of pp_script_of(cfg) that name it, one operation
 * after the other (isend, issend, send, ssend, irecv, recv, wait, waitall, probe, cancel,
 * compute). Blocking operations are where the rank's program stops until the event that completes
 * them; nothing spins. Every send carries the pp_msg_fill() pattern of (sender, per-destination
 * sequence number), so each receive of at least PP_MSG_HEADER bytes is checked against the
 * source it reports. An operation's buffers (size * count bytes, allocated at creation) are
 * reused by every repetition of its program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/names.h"
#include "prepost/p2p.h"

struct out {
  pp_req h;
  uint32_t batch;
  uint32_t next; /* free list */
  uint8_t *buf;
  uint64_t t_post;
  uint8_t used, recv;
  uint8_t any; /* an ANY_SOURCE receive */
};

#define WILD_KEEP 8u /* ANY_SOURCE matches remembered for hang reports */

struct wild {
  uint32_t source, tag;
};

struct script {
  uint16_t progs[PP_SCRIPT_MAX_PROGS];
  uint16_t nprogs;
  uint16_t pi, oi; /* program and operation being run */
  uint32_t rep;    /* repetition of the program */
  uint32_t issued; /* requests the current operation has started */
  uint32_t batch;  /* id of the current operation's requests */
  uint32_t last_nb, last_nb_left; /* the last non-blocking operation and its requests left */
  uint32_t last_irecv;
  uint32_t batch_done; /* requests of the current operation completed */
  uint32_t total_left;
  bool timer_armed, timer_fired;
  uint8_t *buf;
  uint64_t op_off[PP_SCRIPT_MAX_OPS];
  struct out *out;
  uint32_t nout, free_out;
  uint32_t *send_seq; /* per destination rank */
  uint64_t probes;
  struct wild wild[WILD_KEEP]; /* the last ANY_SOURCE receives' matches (a ring) */
  uint32_t nwild;
};

#define NONE UINT32_MAX
#define SCRIPT_PAGE 4096u
#define COMPUTE_TIMER 1u

static const char *const op_names[] = {
#define PP_X(id, name, desc) [PP_SOP_##id] = name,
    PP_SCRIPT_OP_LIST(PP_X)
#undef PP_X
};

const char *pp_script_op_name(enum pp_script_op_kind k)
{
  return pp_name_of(op_names, PP_SOP_COUNT, k);
}

int pp_script_op_from_name(const char *name)
{
  return pp_name_index(op_names, PP_SOP_COUNT, name);
}

static bool is_send(unsigned k)
{
  return k == PP_SOP_ISEND || k == PP_SOP_ISSEND || k == PP_SOP_SEND || k == PP_SOP_SSEND;
}

static bool is_recv(unsigned k)
{
  return k == PP_SOP_IRECV || k == PP_SOP_RECV;
}

static bool runs(const struct pp_script_prog *pg, uint32_t rank)
{
  return rank < 1024 && (pg->ranks[rank / 64] >> (rank % 64) & 1);
}

/* Calls add(ctx, peer) for every rank `rank` exchanges messages with; the bytes of buffers it
 * needs in *bytes. */
static void script_peers(const struct pp_engine_cfg *c, uint32_t rank, uint64_t *bytes,
                         void (*add)(void *, uint32_t), void *ctx)
{
  const struct pp_script *s = pp_script_of(c);
  *bytes = 0;
  for (uint32_t pi = 0; pi < s->nprogs; pi++) {
    const struct pp_script_prog *pg = &s->prog[pi];
    bool mine = runs(pg, rank);
    for (uint32_t i = pg->first; i < (uint32_t)pg->first + pg->n && i < s->nops; i++) {
      const struct pp_script_op *op = &s->op[i];
      if (mine && (is_send(op->kind) || is_recv(op->kind))) {
        *bytes += (uint64_t)op->size * op->count;
        if (op->peer != PP_ANY_SOURCE)
          add(ctx, op->peer);
      }
      if (!mine && is_send(op->kind) && op->peer == rank)
        for (uint32_t r = 0; r < c->nranks; r++)
          if (runs(pg, r))
            add(ctx, r);
    }
  }
}

struct peerset {
  uint64_t bits[1024 / 64];
  uint32_t n;
};

static void peerset_add(void *ctx, uint32_t r)
{
  struct peerset *ps = ctx;
  if (r < 1024 && !(ps->bits[r / 64] >> (r % 64) & 1)) {
    ps->bits[r / 64] |= 1ull << (r % 64);
    ps->n++;
  }
}

void pp_script_need(const struct pp_engine_cfg *c, uint32_t rank, uint64_t *bytes, uint32_t *npeers)
{
  struct peerset ps = {0};
  script_peers(c, rank, bytes, peerset_add, &ps);
  *npeers = ps.n;
}

int pp_script_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_script *s = pp_script_of(c);
  CHECK(s->nops <= PP_SCRIPT_MAX_OPS && s->nprogs <= PP_SCRIPT_MAX_PROGS,
        "a script has at most %u programs and %u operations", PP_SCRIPT_MAX_PROGS,
        PP_SCRIPT_MAX_OPS);
  for (uint32_t pi = 0; pi < s->nprogs; pi++) {
    const struct pp_script_prog *pg = &s->prog[pi];
    CHECK((uint32_t)pg->first + pg->n <= s->nops, "program %u: operations out of range", pi);
    CHECK(pg->repeat <= PP_SCRIPT_MAX_REPEAT, "program %u: repeat must be at most %u", pi,
          PP_SCRIPT_MAX_REPEAT);
    for (uint32_t r = c->nranks; r < 1024; r++)
      CHECK(!runs(pg, r), "program %u names rank %u, but there are %u ranks", pi, r, c->nranks);
    for (uint32_t i = pg->first; i < (uint32_t)pg->first + pg->n; i++) {
      const struct pp_script_op *op = &s->op[i];
      CHECK(op->kind < PP_SOP_COUNT, "program %u, operation %u: unknown kind %u", pi,
            i - pg->first, op->kind);
      if (!is_send(op->kind) && !is_recv(op->kind))
        continue;
      const char *name = pp_script_op_name((enum pp_script_op_kind)op->kind);
      CHECK(op->count >= 1 && op->count <= PP_SCRIPT_MAX_COUNT,
            "program %u, %s: count must be 1..%u, got %u", pi, name, PP_SCRIPT_MAX_COUNT,
            op->count);
      CHECK(op->size <= PP_MAX_MSG_SIZE, "program %u, %s: size must be at most %u bytes", pi,
            name, PP_MAX_MSG_SIZE);
      CHECK(op->peer < c->nranks || (is_recv(op->kind) && op->peer == PP_ANY_SOURCE),
            "program %u, %s: rank %u out of 0..%u", pi, name, op->peer, c->nranks - 1);
      CHECK(!is_send(op->kind) || op->tag != PP_ANY_TAG, "program %u, %s: a send needs a tag",
            pi, name);
      CHECK(op->peer == PP_ANY_SOURCE || !runs(pg, op->peer),
            "program %u, %s: rank %u would talk to itself", pi, name, op->peer);
    }
  }
  for (uint32_t r = 0; r < c->nranks; r++) {
    struct peerset ps = {0};
    uint64_t bytes;
    script_peers(c, r, &bytes, peerset_add, &ps);
    CHECK(ps.n <= PP_MAX_PEERS, "rank %u talks to %u ranks, at most %u", r, ps.n, PP_MAX_PEERS);
    CHECK(bytes <= (1ull << 32), "rank %u needs %llu bytes of buffers, at most 4 GiB", r,
          (unsigned long long)bytes);
  }
  return PP_OK;
}

/* ------------------------------------------------------------------ the ops table */

static void plan_add(void *ctx, uint32_t r)
{
  pp_engine_add_peer(ctx, r);
}

static enum pp_status script_plan(struct pp_engine *e)
{
  struct script *s = calloc(1, sizeof(*s));
  if (!s)
    return PP_NOMEM;
  e->as = s;
  uint64_t bytes;
  script_peers(&e->cfg, e->cfg.rank, &bytes, plan_add, e);
  const struct pp_script *sc = pp_script_of(&e->cfg);
  for (uint32_t pi = 0; pi < sc->nprogs; pi++)
    if (runs(&sc->prog[pi], e->cfg.rank))
      s->progs[s->nprogs++] = (uint16_t)pi;
  for (uint32_t i = 0; i < sc->nops; i++)
    if (is_send(sc->op[i].kind))
      e->lat_cap += sc->op[i].count;
  if (e->lat_cap > 1000000)
    e->lat_cap = 1000000;
  return PP_OK;
}

static enum pp_status script_create(struct pp_engine *e)
{
  struct script *s = e->as;
  const struct pp_script *sc = pp_script_of(&e->cfg);
  uint64_t off = 0;
  for (uint32_t k = 0; k < s->nprogs; k++) {
    const struct pp_script_prog *pg = &sc->prog[s->progs[k]];
    for (uint32_t i = pg->first; i < (uint32_t)pg->first + pg->n; i++) {
      s->op_off[i] = off;
      if (is_send(sc->op[i].kind) || is_recv(sc->op[i].kind))
        off += (uint64_t)sc->op[i].size * sc->op[i].count;
    }
  }
  struct pp_p2p_params prm;
  pp_p2p_params_resolve(&e->cfg, &prm);
  s->nout = prm.max_requests;
  /* page-aligned: the p2p registration cache registers whole pages, so the place of a message
   * inside its registration is the same in a run and in its replay (traces/FORMAT.md) */
  uint64_t bytes = (off + SCRIPT_PAGE - 1) / SCRIPT_PAGE * SCRIPT_PAGE;
  s->buf = aligned_alloc(SCRIPT_PAGE, bytes ? bytes : SCRIPT_PAGE);
  if (s->buf)
    memset(s->buf, 0, bytes);
  s->out = calloc(s->nout, sizeof(*s->out));
  s->send_seq = calloc(e->cfg.nranks, sizeof(*s->send_seq));
  if (!s->buf || !s->out || !s->send_seq)
    return PP_NOMEM;
  s->free_out = NONE;
  s->last_nb = s->last_irecv = NONE;
  for (uint32_t i = s->nout; i-- > 0;) {
    s->out[i].next = s->free_out;
    s->free_out = i;
  }
  return PP_OK;
}

static void script_destroy(struct pp_engine *e)
{
  struct script *s = e->as;
  if (!s)
    return;
  free(s->buf);
  free(s->out);
  free(s->send_seq);
  free(s);
  e->as = NULL;
}

static const struct pp_script_op *cur_op(const struct pp_engine *e, const struct script *s)
{
  const struct pp_script *sc = pp_script_of(&e->cfg);
  return &sc->op[sc->prog[s->progs[s->pi]].first + s->oi];
}

static void fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq)
{
  if (size >= PP_MSG_HEADER) {
    pp_msg_fill(buf, size, src, seq);
  } else if (size) {
    uint8_t tmp[PP_MSG_HEADER];
    pp_msg_fill(tmp, PP_MSG_HEADER, src, seq);
    memcpy(buf, tmp, size);
  }
}

/* Starts repetition `issued` of the current send or receive operation. */
static enum pp_status issue(struct pp_engine *e, uint64_t now, struct script *s,
                            const struct pp_script_op *op)
{
  if (s->free_out == NONE)
    return PP_AGAIN;
  uint32_t i = s->free_out;
  struct out *o = &s->out[i];
  uint32_t op_index = (uint32_t)(op - pp_script_of(&e->cfg)->op);
  uint8_t *buf = s->buf + s->op_off[op_index] + (uint64_t)op->size * s->issued;
  enum pp_status st;
  if (is_send(op->kind)) {
    fill(buf, op->size, e->cfg.rank, s->send_seq[op->peer]);
    bool sync = op->kind == PP_SOP_ISSEND || op->kind == PP_SOP_SSEND;
    st = (sync ? pp_p2p_issend : pp_p2p_isend)(e, now, buf, op->size, op->peer, op->tag,
                                                 op->comm, i, &o->h);
    if (st == PP_OK)
      s->send_seq[op->peer]++;
  } else {
    st = pp_p2p_irecv(e, now, buf, op->size, op->peer, op->tag, op->comm, i, &o->h);
  }
  if (st != PP_OK)
    return st;
  s->free_out = o->next;
  o->used = 1;
  o->recv = is_recv(op->kind);
  o->any = o->recv && op->peer == PP_ANY_SOURCE;
  o->buf = buf;
  o->batch = s->batch;
  o->t_post = now;
  s->total_left++;
  return PP_OK;
}

static void advance(struct pp_engine *e, struct script *s)
{
  const struct pp_script_prog *pg = &pp_script_of(&e->cfg)->prog[s->progs[s->pi]];
  s->issued = 0;
  s->batch_done = 0;
  s->timer_armed = s->timer_fired = false;
  s->batch++;
  if (++s->oi < pg->n)
    return;
  s->oi = 0;
  if (++s->rep < (pg->repeat ? pg->repeat : 1))
    return;
  s->rep = 0;
  s->pi++;
}

static enum pp_status script_pump(struct pp_engine *e, uint64_t now)
{
  struct script *s = e->as;
  if (!e->started)
    return PP_OK;
  while (s->pi < s->nprogs) {
    const struct pp_script_prog *pg = &pp_script_of(&e->cfg)->prog[s->progs[s->pi]];
    if (pg->n == 0) {
      s->pi++;
      continue;
    }
    const struct pp_script_op *op = cur_op(e, s);
    switch (op->kind) {
    case PP_SOP_ISEND:
    case PP_SOP_ISSEND:
    case PP_SOP_IRECV:
    case PP_SOP_SEND:
    case PP_SOP_SSEND:
    case PP_SOP_RECV: {
      bool blocking = op->kind == PP_SOP_SEND || op->kind == PP_SOP_SSEND ||
                      op->kind == PP_SOP_RECV;
      while (s->issued < op->count) {
        enum pp_status st = issue(e, now, s, op);
        if (st == PP_AGAIN)
          return PP_OK; /* every request in use: retried after the next completion */
        if (st != PP_OK)
          return st;
        s->issued++;
      }
      if (!blocking) {
        s->last_nb = s->batch;
        s->last_nb_left = op->count - s->batch_done;
        if (op->kind == PP_SOP_IRECV)
          s->last_irecv = s->batch;
      } else if (s->batch_done < op->count) {
        return PP_OK;
      }
      break;
    }
    case PP_SOP_WAIT:
      if (s->last_nb_left)
        return PP_OK;
      break;
    case PP_SOP_WAITALL:
      if (s->total_left)
        return PP_OK;
      break;
    case PP_SOP_PROBE:
      if (!pp_p2p_iprobe(e, op->peer, op->tag, op->comm, NULL))
        return PP_OK;
      s->probes++;
      break;
    case PP_SOP_CANCEL:
      for (uint32_t i = 0; i < s->nout; i++)
        if (s->out[i].used && s->out[i].recv && s->out[i].batch == s->last_irecv)
          pp_p2p_cancel(e, now, s->out[i].h);
      break;
    case PP_SOP_COMPUTE:
      if (!s->timer_armed) {
        s->timer_armed = true;
        enum pp_status st = pp_engine_push_timer(e, now + op->ns, PP_TIMER_APP, COMPUTE_TIMER);
        if (st != PP_OK)
          return st;
      }
      if (!s->timer_fired)
        return PP_OK;
      break;
    default:
      return PP_INVALID;
    }
    advance(e, s);
  }
  return PP_OK;
}

static enum pp_status script_start(struct pp_engine *e, uint64_t now)
{
  return script_pump(e, now);
}

static enum pp_status script_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct script *s = e->as;
  if (arg != COMPUTE_TIMER || !s->timer_armed)
    return PP_INVALID;
  s->timer_fired = true;
  return script_pump(e, now);
}

/* A request of ours completed with status *stp (the p2p layer frees it after this callback,
 * pp_app_ops.p2p_frees): its checks, its slot back. */
static enum pp_status script_p2p_done(struct pp_engine *e, uint64_t now, bool recv, uint64_t req,
                                      uint64_t cookie, const struct pp_p2p_status *stp)
{
  (void)now;
  struct script *s = e->as;
  if (cookie >= s->nout || !s->out[cookie].used || s->out[cookie].recv != recv ||
      s->out[cookie].h != req)
    return PP_INVALID;
  struct out *o = &s->out[cookie];
  const struct pp_p2p_status st = *stp;
  o->h = PP_REQ_NULL;
  if (recv && o->any && st.error != PP_P2P_E_CANCELLED)
    s->wild[s->nwild++ % WILD_KEEP] = (struct wild){.source = st.source, .tag = st.tag};
  if (st.error == PP_P2P_E_OK && !recv) {
    e->st.messages_sent++;
    e->st.bytes_sent += st.len;
    pp_engine_latency(e, st.done_ns - o->t_post);
  } else if (st.error == PP_P2P_E_OK) {
    uint64_t seq;
    uint32_t src;
    bool ok = true;
    if (st.len >= PP_MSG_HEADER) {
      memcpy(&seq, o->buf, 8);
      memcpy(&src, o->buf + 8, 4);
      ok = src == st.source && pp_msg_check(o->buf, st.len, src, seq) == 0;
    }
    if (ok) {
      e->st.messages_received++;
      e->st.bytes_received += st.len;
    } else {
      e->st.corrupt++;
    }
  }
  o->used = 0;
  o->next = s->free_out;
  s->free_out = (uint32_t)cookie;
  s->total_left--;
  if (o->batch == s->batch)
    s->batch_done++;
  else if (o->batch == s->last_nb && s->last_nb_left)
    s->last_nb_left--;
  return PP_OK;
}

/* The p2p layer reports every request through script_p2p_done: a send or receive completion
 * without a request of its own is bogus. */
static enum pp_status script_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                       enum pp_wc_status st)
{
  (void)e, (void)now, (void)cookie, (void)st;
  return PP_INVALID;
}

static enum pp_status script_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                       enum pp_wc_status st, uint32_t src, uint64_t tag,
                                       uint32_t len)
{
  (void)e, (void)now, (void)cookie, (void)st, (void)src, (void)tag, (void)len;
  return PP_INVALID;
}

static bool script_done(const struct pp_engine *e)
{
  const struct script *s = e->as;
  return s->pi == s->nprogs && s->total_left == 0;
}

/* The operation the rank's program stands at, and the ANY_SOURCE receives that matched. */
static size_t script_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct script *s = e->as;
  size_t n = 0;
  if (!s)
    return 0;
  uint32_t nw = s->nwild < WILD_KEEP ? s->nwild : WILD_KEEP;
  for (uint32_t i = 0; i < nw; i++) {
    const struct wild *w = &s->wild[(s->nwild - nw + i) % WILD_KEEP];
    pp_wait_add(out, max, &n, PP_WAIT_WILDCARD, w->source, w->tag, 0,
                "an ANY_SOURCE receive matched rank %u's message (tag %u)", w->source, w->tag);
  }
  if (s->pi < s->nprogs) {
    const struct pp_script_op *op = cur_op(e, s);
    char src[24] = "ANY_SOURCE";
    if (op->peer != PP_ANY_SOURCE)
      snprintf(src, sizeof(src), "%u", op->peer);
    pp_wait_add(out, max, &n, PP_WAIT_WORKLOAD, PP_WAIT_NOPEER, PP_WAIT_NOTAG, 0,
                "program %u stands at op %u (%s, peer %s, %u of %u done)", s->progs[s->pi], s->oi,
                pp_script_op_name((enum pp_script_op_kind)op->kind), src, s->batch_done,
                op->count);
  } else if (s->total_left) {
    pp_wait_add(out, max, &n, PP_WAIT_WORKLOAD, PP_WAIT_NOPEER, PP_WAIT_NOTAG, 0,
                "program finished, %u requests still outstanding", s->total_left);
  }
  return n;
}

const struct pp_app_ops pp_script_ops = {
    .name = "script",
    .plan = script_plan,
    .create = script_create,
    .destroy = script_destroy,
    .start = script_start,
    .pump = script_pump,
    .on_timer = script_on_timer,
    .send_done = script_send_done,
    .recv_done = script_recv_done,
    .p2p_done = script_p2p_done,
    .p2p_frees = true,
    .done = script_done,
    .pending = script_pending,
};

/* ------------------------------------------------------------------ registry */

static void script_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m,
                            uint32_t *npeers, uint64_t *lat)
{
  uint64_t bytes = 0;
  uint32_t peers = 0;
  for (uint32_t r = 0; r < c->nranks; r++) { /* the busiest rank */
    uint64_t b;
    uint32_t n;
    pp_script_need(c, r, &b, &n);
    bytes = b > bytes ? b : bytes;
    peers = n > peers ? n : peers;
  }
  *npeers = peers;
  pp_mem_add(m, bytes + 4096 + c->nranks * 8ull, "the script's message sizes and counts");
  pp_mem_add(m, 8192, "workload");
  *lat = 1000000;
}

static enum pp_status script_def_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  return pp_p2p_cfg_check(c, err, errlen) == PP_OK ? PP_OK : PP_INVALID;
}

_Static_assert(sizeof(struct pp_script) <= PP_WORKLOAD_PARAMS_MAX, "fits pp_engine_cfg.workload_params");

const struct pp_workload_def pp_script_def = {
    .name = "script",
    .desc = "per-rank MPI-style operation lists",
    .params_size = sizeof(struct pp_script),
    .pair_odd = true,
    .check = script_def_check,
    .mem_need = script_mem_need,
    .ops = &pp_script_ops,
};

