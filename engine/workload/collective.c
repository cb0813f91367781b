/*
 * The collective workload: ring allreduce, allgather and broadcast over pp_proto_ops.send/recv,
 * as NCCL runs them on a ring, checked element by element.
 *
 * Layout. The buffer of `count` elements is cut into n blocks, block b = [count*b/n,
 * count*(b+1)/n) (allgather: block b is rank b's contribution); each block into pieces of at
 * most `chunk` bytes, piece (L, b) = the L-th `chunk` of block b. A slice L is the n pieces
 * (L, 0..n-1). Per slice, rank r runs T ring steps with its right neighbour r+1 and left
 * neighbour r-1:
 *   step s (0 <= s < T):  send piece (L, (r - s) mod n) to r+1,
 *                         receive piece (L, (r - s - 1) mod n) from r-1;
 *   allreduce: T = 2(n-1); steps s <= n-2 are the reduce-scatter (the received piece is added
 *   into the buffer), the others the allgather (it is copied); after step n-2 rank r holds the
 *   full sum of block (r+1) mod n, which the allgather steps pass around the ring.
 *   allgather: T = n-1, every step copies.
 * The message of step s >= 1 is the piece received at step s-1: it is sent once that piece has
 * been reduced or copied. Broadcast pipelines the root's buffer piece by piece down the ring
 * root -> root+1 -> ... -> root-1; each rank forwards a piece once it has it.
 *
 * Messages go to the protocol in that order on each connection (both ends derive the same order
 * and lengths; empty pieces, when count is small, are skipped by both). Receives land in
 * `window` staging buffers of `chunk` bytes; a received piece is applied only once no send of
 * the same piece is outstanding (the protocol owns a send buffer until send_done).
 *
 * Compute: a rank spends compute_ns of simulated time on each received piece before it can
 * apply it (slow ranks spend slow_compute_ns during iterations [slow_from, slow_until)); its
 * staging buffers stay busy meanwhile, so its receives stop, its slots fill and its left
 * neighbour runs out of credit: the ring slows to its pace, and speeds up again after.
 *
 * Data: element i of rank q in iteration k is a hash of (seed, k, q, i): integers for int32 and
 * int64 (sums wrap, computed in unsigned arithmetic), multiples of 1/4 in [-256, 256) for float32
 * and float64, so that every partial sum is exact whatever the order of the additions. After
 * each iteration every element is compared with the direct computation (the sum over the n
 * ranks, the owner's value, the root's value).
 */
#include "prepost/collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"

#define COMPUTE_TIMER 1u
#define ITER_SHIFT 40 /* cookie: iteration << 40 | message index */
#define IDX_MASK ((1ull << ITER_SHIFT) - 1)
#define POISON 0xa5

static const struct {
  const char *name;
} ops_info[] = {
#define PP_X(id, name, desc) [PP_COLL_##id] = {name},
    PP_COLL_OP_LIST(PP_X)
#undef PP_X
};

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
#define PP_X(id, name, bytes) [PP_DTYPE_##id] = {name, bytes},
    PP_DTYPE_LIST(PP_X)
#undef PP_X
};

const char *pp_coll_op_name(enum pp_coll_op op)
{
  return (unsigned)op < PP_COLL_OP_COUNT ? ops_info[op].name : "?";
}

int pp_coll_op_from_name(const char *name)
{
  for (int i = 0; i < PP_COLL_OP_COUNT; i++)
    if (strcmp(ops_info[i].name, name) == 0)
      return i;
  return -1;
}

const char *pp_dtype_name(enum pp_dtype t)
{
  return (unsigned)t < PP_DTYPE_COUNT ? dtypes[t].name : "?";
}

int pp_dtype_from_name(const char *name)
{
  for (int i = 0; i < PP_DTYPE_COUNT; i++)
    if (strcmp(dtypes[i].name, name) == 0)
      return i;
  return -1;
}

size_t pp_dtype_size(enum pp_dtype t)
{
  return (unsigned)t < PP_DTYPE_COUNT ? dtypes[t].size : 0;
}

double pp_coll_bus_factor(enum pp_coll_op op, uint32_t nranks)
{
  if (nranks == 0)
    return 0;
  switch (op) {
  case PP_COLL_ALLREDUCE:
    return 2.0 * (nranks - 1) / nranks;
  case PP_COLL_ALLGATHER:
    return (double)(nranks - 1) / nranks;
  case PP_COLL_BROADCAST:
    return 1.0;
  default:
    return 0;
  }
}

void pp_coll_params_default(struct pp_coll_params *p)
{
  *p = (struct pp_coll_params){.op = PP_COLL_ALLREDUCE,
                               .dtype = PP_DTYPE_F32,
                               .bytes = 1u << 20,
                               .iterations = 1,
                               .warmup = 0,
                               .root = 0,
                               .chunk = 128u * 1024u,
                               .window = 4,
                               .check = true};
}

enum pp_status pp_coll_params_check(const struct pp_coll_params *p, uint32_t nranks, char *err,
                                    size_t errlen)
{
  CHECK((unsigned)p->op < PP_COLL_OP_COUNT, "unknown collective op %d", (int)p->op);
  CHECK((unsigned)p->dtype < PP_DTYPE_COUNT, "unknown datatype %d", (int)p->dtype);
  size_t esz = pp_dtype_size(p->dtype);
  CHECK(p->bytes >= esz && p->bytes <= PP_MAX_MSG_SIZE && p->bytes % esz == 0,
        "collective size must be a multiple of the %s size (%zu bytes) in %zu..%u, got %llu",
        pp_dtype_name(p->dtype), esz, esz, PP_MAX_MSG_SIZE, (unsigned long long)p->bytes);
  CHECK(p->op != PP_COLL_ALLGATHER || (p->bytes / esz) % nranks == 0,
        "allgather size must split into %u equal blocks of whole elements, got %llu bytes",
        nranks, (unsigned long long)p->bytes);
  CHECK(p->iterations >= 1 && p->iterations <= PP_COLL_MAX_ITERATIONS,
        "collective iterations must be 1..%u, got %u", PP_COLL_MAX_ITERATIONS, p->iterations);
  CHECK(p->warmup < p->iterations, "collective warmup must be below iterations (%u), got %u",
        p->iterations, p->warmup);
  CHECK(p->root < nranks, "collective root must be a rank 0..%u, got %u", nranks - 1, p->root);
  CHECK(p->chunk >= esz && p->chunk <= PP_MAX_MSG_SIZE && p->chunk % esz == 0,
        "collective chunk must be a multiple of the %s size (%zu bytes) in %zu..%u, got %u",
        pp_dtype_name(p->dtype), esz, esz, PP_MAX_MSG_SIZE, p->chunk);
  CHECK(p->window >= 1 && p->window <= PP_MAX_QUEUE_DEPTH, "collective window must be 1..%u, got %u",
        PP_MAX_QUEUE_DEPTH, p->window);
  CHECK((uint64_t)p->window * p->chunk <= (1ull << 32),
        "collective window * chunk = %llu bytes of staging exceed 4 GiB",
        (unsigned long long)p->window * p->chunk);
  CHECK(p->slow_from <= p->slow_until, "collective slow_from (%u) must not be after slow_until (%u)",
        p->slow_from, p->slow_until);
  return PP_OK;
}

/* ---------------------------------------------------------------- state */

struct pp_coll {
  uint32_t n, r, next, prev, last; /* last: the broadcast's final rank (root - 1) */
  size_t esz;
  uint64_t count, ce; /* elements in the buffer, per piece */
  uint32_t T;         /* ring steps per slice */
  uint64_t slices;    /* broadcast: pieces */
  uint64_t nsend, nrecv, npieces;
  uint8_t *buf;
  struct pp_mr bmr;
  uint8_t *stage;
  struct pp_mr smr;
  uint32_t W;
  bool *arrived;
  uint8_t *inflight; /* sends outstanding per piece */
  /* the iteration under way */
  uint32_t iter;
  bool running, failed, computing, timer_armed;
  uint64_t iter_start, ready_at, busy_until;
  uint64_t s_next, s_done, r_posted, r_done; /* message indices */
  uint64_t sends_out, recvs_out;             /* with the protocol */
};

struct piece {
  uint64_t off, len; /* elements */
  uint64_t id;       /* for inflight[] */
  int64_t dep;       /* sends: the receive index it needs applied first, or -1 */
  bool reduce;       /* receives: add (else copy) */
};

static uint64_t bstart(const struct pp_coll *c, uint64_t b)
{
  return c->count * b / c->n;
}

static void ring_piece(const struct pp_coll *c, uint64_t L, uint64_t b, struct piece *p)
{
  uint64_t lo = bstart(c, b), hi = bstart(c, b + 1);
  p->off = lo + L * c->ce;
  p->len = p->off < hi ? (hi - p->off < c->ce ? hi - p->off : c->ce) : 0;
  p->id = L * c->n + b;
}

static void send_piece(const struct pp_engine *e, uint64_t i, struct piece *p)
{
  const struct pp_coll *c = e->as;
  if (pp_coll_params_of(&e->cfg)->op == PP_COLL_BROADCAST) {
    p->off = i * c->ce;
    p->len = c->count - p->off < c->ce ? c->count - p->off : c->ce;
    p->id = i;
    p->dep = c->r == pp_coll_params_of(&e->cfg)->root ? -1 : (int64_t)i;
    return;
  }
  uint64_t L = i / c->T, s = i % c->T;
  ring_piece(c, L, (c->r + 2 * c->n - s) % c->n, p);
  p->dep = s ? (int64_t)i - 1 : -1;
}

static void recv_piece(const struct pp_engine *e, uint64_t j, struct piece *p)
{
  const struct pp_coll *c = e->as;
  p->dep = -1;
  p->reduce = false;
  if (pp_coll_params_of(&e->cfg)->op == PP_COLL_BROADCAST) {
    p->off = j * c->ce;
    p->len = c->count - p->off < c->ce ? c->count - p->off : c->ce;
    p->id = j;
    return;
  }
  uint64_t L = j / c->T, s = j % c->T;
  ring_piece(c, L, (c->r + 2 * c->n - s - 1) % c->n, p);
  p->reduce = pp_coll_params_of(&e->cfg)->op == PP_COLL_ALLREDUCE && s + 2 <= c->n;
}

/* ---------------------------------------------------------------- data */

static uint64_t mix(uint64_t x)
{
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

static uint64_t data_key(const struct pp_engine *e, uint32_t iter, uint32_t src)
{
  return mix(pp_seed_derive(e->cfg.seed, PP_SEED_COLLECTIVE, src) + iter);
}

/* The hash of element i under key; the element's value is derived from it by type. */
static uint64_t elem_hash(uint64_t key, uint64_t i)
{
  return mix(i * 0x9e3779b97f4a7c15ull + key);
}

static double quarter(uint64_t h)
{
  return (double)((int64_t)(h >> 53) - 1024) * 0.25; /* [-256, 256) in steps of 1/4 */
}

static void store(uint8_t *buf, enum pp_dtype t, uint64_t i, uint64_t h)
{
  switch (t) {
  case PP_DTYPE_F32:
    ((float *)(void *)buf)[i] = (float)quarter(h);
    break;
  case PP_DTYPE_F64:
    ((double *)(void *)buf)[i] = quarter(h);
    break;
  case PP_DTYPE_I32:
    ((uint32_t *)(void *)buf)[i] = (uint32_t)(h >> 32);
    break;
  default:
    ((uint64_t *)(void *)buf)[i] = h;
    break;
  }
}

/* Writes rank src's elements [lo, hi) of iteration iter into buf. */
static void fill(const struct pp_engine *e, uint8_t *buf, uint32_t src, uint64_t lo, uint64_t hi)
{
  uint64_t key = data_key(e, ((const struct pp_coll *)e->as)->iter, src);
  for (uint64_t i = lo; i < hi; i++)
    store(buf, pp_coll_params_of(&e->cfg)->dtype, i, elem_hash(key, i));
}

/* dst[0..len) += src[0..len) */
static void reduce(enum pp_dtype t, uint8_t *dst, const uint8_t *src, uint64_t len)
{
  switch (t) {
  case PP_DTYPE_F32: {
    float *d = (float *)(void *)dst;
    const float *s = (const float *)(const void *)src;
    for (uint64_t i = 0; i < len; i++)
      d[i] += s[i];
    break;
  }
  case PP_DTYPE_F64: {
    double *d = (double *)(void *)dst;
    const double *s = (const double *)(const void *)src;
    for (uint64_t i = 0; i < len; i++)
      d[i] += s[i];
    break;
  }
  case PP_DTYPE_I32: {
    uint32_t *d = (uint32_t *)(void *)dst;
    const uint32_t *s = (const uint32_t *)(const void *)src;
    for (uint64_t i = 0; i < len; i++)
      d[i] += s[i];
    break;
  }
  default: {
    uint64_t *d = (uint64_t *)(void *)dst;
    const uint64_t *s = (const uint64_t *)(const void *)src;
    for (uint64_t i = 0; i < len; i++)
      d[i] += s[i];
    break;
  }
  }
}

/* Compares buf[lo, hi) with the direct computation; returns the number of wrong elements. */
static uint64_t check_range(const struct pp_engine *e, uint64_t lo, uint64_t hi)
{
  const struct pp_coll *c = e->as;
  const struct pp_coll_params *p = pp_coll_params_of(&e->cfg);
  uint64_t keys[PP_MAX_RANKS];
  uint32_t nsrc = 0;
  uint64_t wrong = 0;
  if (p->op == PP_COLL_ALLREDUCE) {
    for (uint32_t q = 0; q < c->n; q++)
      keys[nsrc++] = data_key(e, c->iter, q);
  }
  for (uint64_t i = lo; i < hi; i++) {
    if (p->op != PP_COLL_ALLREDUCE) { /* allgather: count is a multiple of n */
      uint32_t src = p->op == PP_COLL_BROADCAST ? p->root : (uint32_t)(i / (c->count / c->n));
      uint8_t want[8];
      store(want, p->dtype, 0, elem_hash(data_key(e, c->iter, src), i));
      wrong += memcmp(want, c->buf + i * c->esz, c->esz) != 0;
      continue;
    }
    double fsum = 0;
    uint64_t isum = 0;
    for (uint32_t q = 0; q < nsrc; q++) {
      uint64_t h = elem_hash(keys[q], i);
      fsum += quarter(h);
      isum += p->dtype == PP_DTYPE_I32 ? (h >> 32) : h;
    }
    switch (p->dtype) {
    case PP_DTYPE_F32:
      wrong += ((const float *)(const void *)c->buf)[i] != (float)fsum;
      break;
    case PP_DTYPE_F64:
      wrong += ((const double *)(const void *)c->buf)[i] != fsum;
      break;
    case PP_DTYPE_I32:
      wrong += ((const uint32_t *)(const void *)c->buf)[i] != (uint32_t)isum;
      break;
    default:
      wrong += ((const uint64_t *)(const void *)c->buf)[i] != isum;
      break;
    }
  }
  return wrong;
}

/* ---------------------------------------------------------------- iterations */

static uint64_t compute_ns(const struct pp_engine *e)
{
  const struct pp_coll *c = e->as;
  const struct pp_coll_params *p = pp_coll_params_of(&e->cfg);
  bool slow = c->r < 64 && (p->slow_ranks >> c->r & 1) && c->iter >= p->slow_from &&
              c->iter < p->slow_until;
  return slow ? p->slow_compute_ns : p->compute_ns;
}

static void iteration_begin(struct pp_engine *e, uint64_t now)
{
  struct pp_coll *c = e->as;
  const struct pp_coll_params *p = pp_coll_params_of(&e->cfg);
  c->running = true;
  c->iter_start = now;
  c->s_next = c->s_done = c->r_posted = c->r_done = 0;
  switch (p->op) {
  case PP_COLL_ALLREDUCE:
    fill(e, c->buf, c->r, 0, c->count);
    break;
  case PP_COLL_ALLGATHER:
    memset(c->buf, POISON, c->count * c->esz);
    fill(e, c->buf, c->r, bstart(c, c->r), bstart(c, c->r + 1));
    break;
  default:
    if (c->r == p->root)
      fill(e, c->buf, c->r, 0, c->count);
    else
      memset(c->buf, POISON, c->count * c->esz);
    break;
  }
}

static void iteration_end(struct pp_engine *e, uint64_t now)
{
  struct pp_coll *c = e->as;
  struct pp_coll_stats *st = &e->st.coll;
  if (pp_coll_params_of(&e->cfg)->check) {
    uint64_t wrong = check_range(e, 0, c->count);
    st->elements_checked += c->count;
    st->elements_wrong += wrong;
    if (wrong)
      e->st.corrupt++;
  }
  if (c->iter < PP_COLL_ITER_LOG)
    st->iter_end_ns[c->iter] = now;
  st->end_ns = now;
  st->iterations_done++;
  pp_engine_latency(e, now - c->iter_start);
  c->running = false;
  if (++c->iter < pp_coll_params_of(&e->cfg)->iterations)
    iteration_begin(e, now);
}

/* Posts receives, applies arrived pieces, posts sends, as far as each can go. */
static enum pp_status progress(struct pp_engine *e, uint64_t now)
{
  struct pp_coll *c = e->as;
  struct piece p;
  while (c->running && !c->failed) {
    while (c->r_posted < c->nrecv && c->r_posted < c->r_done + c->W) {
      recv_piece(e, c->r_posted, &p);
      uint32_t at = (uint32_t)(c->r_posted % c->W);
      if (p.len) {
        struct pp_msg m = {.peer = c->prev,
                           .buf = c->stage + (size_t)at * pp_coll_params_of(&e->cfg)->chunk,
                           .len = (uint32_t)(p.len * c->esz),
                           .mr = &c->smr,
                           .cookie = (uint64_t)c->iter << ITER_SHIFT | c->r_posted};
        enum pp_status s = e->proto->recv(e, now, &m);
        if (s == PP_AGAIN)
          break;
        if (s != PP_OK)
          return s;
        c->recvs_out++;
      }
      c->arrived[at] = p.len == 0; /* an empty piece is never sent: it is there already */
      c->r_posted++;
    }
    bool applied = false;
    while (c->r_done < c->r_posted && c->arrived[c->r_done % c->W]) {
      recv_piece(e, c->r_done, &p);
      if (c->inflight[p.id])
        break; /* the piece is still being sent from: apply it after send_done */
      uint64_t cns = p.len ? compute_ns(e) : 0;
      if (cns) {
        if (!c->computing) {
          c->computing = true;
          c->ready_at = (now > c->busy_until ? now : c->busy_until) + cns;
          c->busy_until = c->ready_at;
        }
        if (now < c->ready_at) {
          if (!c->timer_armed) {
            enum pp_status s = pp_engine_push_timer(e, c->ready_at, PP_TIMER_APP, COMPUTE_TIMER);
            if (s != PP_OK)
              return s;
            c->timer_armed = true;
          }
          break;
        }
        c->computing = false;
      }
      uint32_t at = (uint32_t)(c->r_done % c->W);
      uint8_t *dst = c->buf + p.off * c->esz;
      const uint8_t *src = c->stage + (size_t)at * pp_coll_params_of(&e->cfg)->chunk;
      if (p.reduce)
        reduce(pp_coll_params_of(&e->cfg)->dtype, dst, src, p.len);
      else if (p.len)
        memcpy(dst, src, p.len * c->esz);
      c->arrived[at] = false;
      c->r_done++;
      applied = true;
    }
    while (c->s_next < c->nsend) {
      send_piece(e, c->s_next, &p);
      if (p.dep >= 0 && (uint64_t)p.dep >= c->r_done)
        break;
      if (p.len) {
        struct pp_msg m = {.peer = c->next,
                           .buf = c->buf + p.off * c->esz,
                           .len = (uint32_t)(p.len * c->esz),
                           .mr = &c->bmr,
                           .cookie = (uint64_t)c->iter << ITER_SHIFT | c->s_next};
        enum pp_status s = e->proto->send(e, now, &m);
        if (s == PP_AGAIN)
          break;
        if (s != PP_OK)
          return s;
        c->sends_out++;
        c->inflight[p.id]++;
      } else {
        c->s_done++;
      }
      c->s_next++;
    }
    if (c->s_done == c->nsend && c->r_done == c->nrecv)
      iteration_end(e, now); /* and begins the next one, if any */
    else if (!applied)
      break; /* nothing more can move before the next event */
  }
  return PP_OK;
}

/* ---------------------------------------------------------------- ops */

static enum pp_status coll_plan(struct pp_engine *e)
{
  const struct pp_coll_params *p = pp_coll_params_of(&e->cfg);
  struct pp_coll *c = calloc(1, sizeof(*c));
  if (!c)
    return PP_NOMEM;
  e->as = c;
  c->n = e->cfg.nranks;
  c->r = e->cfg.rank;
  c->next = (c->r + 1) % c->n;
  c->prev = (c->r + c->n - 1) % c->n;
  c->last = (p->root + c->n - 1) % c->n;
  c->esz = pp_dtype_size(p->dtype);
  c->count = p->bytes / c->esz;
  c->ce = p->chunk / c->esz;
  if (p->op == PP_COLL_BROADCAST) {
    c->T = 1;
    c->slices = (c->count + c->ce - 1) / c->ce;
    c->npieces = c->slices;
    c->nsend = c->r == c->last ? 0 : c->slices;
    c->nrecv = c->r == p->root ? 0 : c->slices;
  } else {
    uint64_t maxblock = (c->count + c->n - 1) / c->n;
    c->T = p->op == PP_COLL_ALLREDUCE ? 2 * (c->n - 1) : c->n - 1;
    c->slices = maxblock ? (maxblock + c->ce - 1) / c->ce : 1;
    c->npieces = c->slices * c->n;
    c->nsend = c->nrecv = c->slices * c->T;
  }
  enum pp_status s = PP_OK;
  if (c->nsend)
    s = pp_engine_add_peer(e, c->next);
  if (s == PP_OK && c->nrecv)
    s = pp_engine_add_peer(e, c->prev);
  e->lat_cap = p->iterations;
  return s;
}

static const unsigned app_access =
    PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ;

static enum pp_status coll_create(struct pp_engine *e)
{
  struct pp_coll *c = e->as;
  const struct pp_coll_params *p = pp_coll_params_of(&e->cfg);
  c->W = p->window < e->cfg.qp.rq_depth ? p->window : e->cfg.qp.rq_depth;
  c->buf = malloc(c->count * c->esz);
  c->stage = malloc((size_t)c->W * p->chunk);
  c->arrived = calloc(c->W, sizeof(*c->arrived));
  c->inflight = calloc(c->npieces, 1);
  if (!c->buf || !c->stage || !c->arrived || !c->inflight)
    return PP_NOMEM;
  enum pp_status s = pp_engine_reg(e, c->buf, c->count * c->esz, app_access, &c->bmr);
  if (s == PP_OK)
    s = pp_engine_reg(e, c->stage, (size_t)c->W * p->chunk, app_access, &c->smr);
  return s;
}

static void coll_destroy(struct pp_engine *e)
{
  struct pp_coll *c = e->as;
  if (!c)
    return;
  pp_engine_dereg(e, &c->bmr);
  pp_engine_dereg(e, &c->smr);
  free(c->buf);
  free(c->stage);
  free(c->arrived);
  free(c->inflight);
  free(c);
  e->as = NULL;
}

static enum pp_status coll_start(struct pp_engine *e, uint64_t now)
{
  struct pp_coll *c = e->as;
  e->st.coll.active = true;
  e->st.coll.start_ns = now;
  c->busy_until = now;
  iteration_begin(e, now);
  return progress(e, now);
}

static enum pp_status coll_pump(struct pp_engine *e, uint64_t now)
{
  return progress(e, now);
}

static enum pp_status coll_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct pp_coll *c = e->as;
  (void)now;
  if (arg != COMPUTE_TIMER || !c->timer_armed)
    return PP_INVALID;
  c->timer_armed = false;
  return PP_OK; /* the engine pumps after the due timers */
}

static enum pp_status coll_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                     enum pp_wc_status st)
{
  struct pp_coll *c = e->as;
  (void)now;
  uint64_t i = cookie & IDX_MASK;
  if (cookie >> ITER_SHIFT != c->iter || i >= c->s_next || c->sends_out == 0)
    return PP_INVALID;
  struct piece p;
  send_piece(e, i, &p);
  if (!c->inflight[p.id])
    return PP_INVALID;
  c->inflight[p.id]--;
  c->sends_out--;
  c->s_done++;
  if (st != PP_WC_SUCCESS) {
    c->failed = true;
    return PP_OK;
  }
  e->st.messages_sent++;
  e->st.bytes_sent += p.len * c->esz;
  return PP_OK;
}

static enum pp_status coll_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                     enum pp_wc_status st, uint32_t src, uint64_t tag,
                                     uint32_t len)
{
  struct pp_coll *c = e->as;
  (void)now, (void)tag;
  uint64_t j = cookie & IDX_MASK;
  if (cookie >> ITER_SHIFT != c->iter || j < c->r_done || j >= c->r_posted ||
      c->arrived[j % c->W] || c->recvs_out == 0)
    return PP_INVALID;
  c->recvs_out--;
  if (st != PP_WC_SUCCESS) {
    c->failed = true;
    return PP_OK;
  }
  struct piece p;
  recv_piece(e, j, &p);
  if (len != p.len * c->esz || src != c->prev) {
    e->st.corrupt++;
    c->failed = true;
    return PP_OK;
  }
  c->arrived[j % c->W] = true;
  e->st.messages_received++;
  e->st.bytes_received += len;
  return PP_OK;
}

static bool coll_done(const struct pp_engine *e)
{
  const struct pp_coll *c = e->as;
  if (c->failed) /* done once the sends came back; receives still posted are abandoned */
    return c->sends_out == 0;
  return e->st.coll.iterations_done == pp_coll_params_of(&e->cfg)->iterations;
}

const struct pp_app_ops pp_collective_ops = {
    .name = "collective",
    .plan = coll_plan,
    .create = coll_create,
    .destroy = coll_destroy,
    .start = coll_start,
    .pump = coll_pump,
    .on_timer = coll_on_timer,
    .send_done = coll_send_done,
    .recv_done = coll_recv_done,
    .done = coll_done,
};

/* ------------------------------------------------------------------ registry */

static void coll_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m, uint32_t *npeers,
                          uint64_t *lat)
{
  *npeers = c->workload.pattern == PP_PATTERN_PAIR ? 1 : 2;
  uint64_t W = pp_coll_params_of(c)->window < c->qp.rq_depth ? pp_coll_params_of(c)->window : c->qp.rq_depth;
  uint64_t elems = pp_coll_params_of(c)->bytes / 4 + 1; /* the in-flight flags: at most one per element */
  pp_mem_add(m, pp_coll_params_of(c)->bytes + elems, "collective.size");
  pp_mem_add(m, W * (pp_coll_params_of(c)->chunk + 8), "collective.window and collective.chunk");
  pp_mem_add(m, 8192, "workload");
  *lat = pp_coll_params_of(c)->iterations;
}

static enum pp_status coll_def_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  return pp_coll_params_check(pp_coll_params_of(c), c->nranks, err, errlen);
}

static void coll_defaults(void *p)
{
  pp_coll_params_default(p);
}

_Static_assert(sizeof(struct pp_coll_params) <= PP_WORKLOAD_PARAMS_MAX, "fits pp_engine_cfg.workload_params");

const struct pp_workload_def pp_collective_def = {
    .name = "collective",
    .desc = "ring allreduce/allgather/broadcast, checked",
    .params_size = sizeof(struct pp_coll_params),
    .defaults = coll_defaults,
    .check = coll_def_check,
    .mem_need = coll_mem_need,
    .ops = &pp_collective_ops,
};
