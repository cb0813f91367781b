/*
 * The p2p protocols "eager" and "rndv": tag matching, eager with credit flow control, rendezvous
 * RGET and pipelined RPUT. See p2p.h for the semantics; this comment is about how.
 *
 * Per peer there are `channels` RC QPs. Every QP posts nrx = D + R + C receive buffers of
 * HDR + eager_limit bytes at creation and re-posts each one as soon as its message is consumed:
 *
 * - D = credits: data credits for requests. An EAGER message or an RTS costs one. The receiver
 *   counts `inuse` (buffers holding messages not consumed yet: unexpected, out of order) and
 *   `owed` (consumed, not yet handed back). Every message it sends on the QP carries `owed` back;
 *   if nothing goes that way it sends an explicit CREDIT message once owed >= T
 *   (credit_threshold), or as soon as owed > 0 when the sender must have run dry (inuse + owed
 *   == D: then nothing is in flight and the sender holds no credit).
 * - R = reply_slots: reply credits for CTS, FIN and ACK. A reply is consumed the moment it
 *   arrives, so its buffer is re-posted at once and `rowed` counts what to hand back, by the same
 *   rules (piggy-backed, or a CREDIT message once rowed >= ceil(R/2) or rowed == R). Replies
 *   never depend on the application, so a reply waiting for a reply credit always gets one, and
 *   requests and replies drawing from separate credits cannot block each other.
 * - C = 2 + (D - 1) / T + (R - 1) / ceil(R/2): explicit CREDIT messages, which need no credit.
 *   Each one carries >= T data or >= ceil(R/2) reply credits, or is a "dry" one (sent when the
 *   peer holds no credit of that kind, so no other return of that kind is in flight), and the
 *   credits in flight never exceed D and R: at most C of them are ever unconsumed.
 *
 * Nothing is sent into a QP without a posted buffer behind it: no RNR, whatever rnr_retry says.
 *
 * Matching messages (EAGER, RTS) carry a per-peer sequence number; one that arrives before its
 * predecessor (another channel was faster) is held in its buffer until the gap closes, so the
 * matching queues see every peer's messages in send order. Unexpected messages also stay in
 * their buffers; the credits they hold are what bounds unexpected memory.
 *
 * Completions reach the workload at the end of the event that caused them (a done list), never
 * from inside an API call the workload is making.
 */
#include "prepost/p2p.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bugs.h"
#include "engine_impl.h"
#include "match.h"
#include "prepost/names.h"

#define HDR 64u
#define PIPE_MAX 8u
#define FLUSH_TIMER 1u

enum msg_type { M_EAGER = 1, M_RTS, M_CTS, M_FIN, M_ACK, M_CREDIT };
/* F_ABORT: an RTS, CTS or FIN of a transfer given up because a buffer could not be registered
 * (PP_P2P_E_NO_MR): an RTS keeps its place in the sequence and is dropped by the receiver, a CTS
 * or FIN ends the peer's side of the transfer with the same error. */
enum { F_SYNC = 1, F_RGET = 2, F_ABORT = 4 };

/* The wire header at the start of every SEND (fixed-width fields, host order: both ends are
 * the same build). */
struct hdr {
  uint8_t type, flags;
  uint16_t credits; /* data credits handed back to the receiver of this message */
  uint32_t ctx;
  uint32_t seq;     /* EAGER, RTS: per-peer sequence number; CTS, FIN: fragment index */
  uint32_t tag;
  uint32_t len;     /* EAGER, RTS: message length; CTS: bytes the receiver takes in all */
  uint32_t nfrag;   /* CTS: number of fragments */
  uint64_t sreq;    /* the sender's request */
  uint64_t rreq;    /* the receiver's request */
  uint64_t addr;    /* RTS (RGET): source; CTS: destination fragment */
  uint32_t rkey;
  uint32_t flen;    /* CTS, FIN: fragment length */
  uint32_t off;     /* CTS, FIN: fragment offset */
  uint16_t rcredits; /* reply credits handed back */
  uint16_t pad;
};
_Static_assert(sizeof(struct hdr) == HDR, "the header is 64 bytes");

/* wr_id: kind (4 bits) | generation (28 bits) | index (32 bits) */
enum { W_RECV = 1, W_TX = 2, W_WRITE = 3, W_READ = 4 };
#define WRID(kind, gen, idx)                                                                       \
  ((uint64_t)(kind) << 60 | ((uint64_t)(gen) & 0xfffffffull) << 32 | (uint32_t)(idx))
#define WR_KIND(w) ((unsigned)((w) >> 60))
#define WR_GEN(w) ((uint32_t)(((w) >> 32) & 0xfffffff))
#define WR_IDX(w) ((uint32_t)(w))

/* RX_DEAD: a buffer of a peer that broke the protocol, never posted again */
enum rx_state { RX_POSTED, RX_HELD, RX_DEAD };

struct rx {
  struct pp_mentry me; /* the unexpected queue */
  struct rx *ooo_next; /* held out of order, sorted by seq */
  uint32_t ch;
  uint8_t state;
};

#define NO_TX UINT32_MAX

struct tx {
  uint32_t next; /* free list or control queue */
  uint32_t ch;
  uint64_t req;  /* request handle, or 0 */
  uint16_t nwr;  /* send-queue slots this signalled WR frees */
  uint8_t type;
  uint8_t slot;  /* RPUT sender FIN: the registration slot it releases */
};

struct chan {
  uint32_t peer; /* peer index */
  uint32_t qpn, psn;
  uint32_t rx0;
  /* receiving side */
  uint32_t inuse, owed, rowed;
  bool credit_pending; /* an explicit CREDIT message is due */
  /* sending side */
  uint32_t credits, rcredits, sq_used;
  uint32_t cq_head, cq_tail; /* replies waiting for a reply credit or a send-queue slot */
  bool failed;
};

struct peer {
  uint32_t rank, ch0, next_ch;
  uint32_t send_seq, recv_seq;
  struct rx *ooo;
  struct req *pend_head, *pend_tail;
  bool failed;
  uint8_t fail_wc, fail_err; /* what its requests complete with once it failed */
};

enum { K_FREE, K_SEND, K_RECV };
enum { RS_PENDING = 1, RS_ACTIVE, RS_DONE };
enum {
  R_SYNC = 1,
  R_AUTO = 2,     /* made by pp_proto_ops send/recv: freed after its callback */
  R_POSTED = 4,   /* in the posted-receive queue */
  R_WORK = 8,     /* on the work list */
  R_DONEQ = 16,   /* on the done list */
  R_RELEASED = 32, /* tested while on the done list: freed there */
  R_PARKED = 64,  /* counted once as parked */
  R_READ = 128,   /* RGET receiver: READ posted */
  R_REGS = 256,   /* holds registrations (xmr, rce) */
  R_REGQ = 512,   /* waiting in line for a registration (p2p.regq) */
  R_BUGCTS = 1024, /* test bug early-cts: this fragment's CTS went out already */
};

struct frag {
  uint64_t addr;
  uint32_t rkey, off, len, idx;
};

struct req {
  struct pp_mentry me;
  uint32_t gen;
  uint8_t kind, state, proto, err, wc;
  uint16_t flags;
  uint32_t peer;          /* peer index; UINT32_MAX before a receive matched */
  uint32_t rank, tag, ctx; /* send: destination; receive: the pattern */
  uint8_t *buf;
  uint32_t len;
  uint64_t cookie;
  uint64_t done_ns;
  uint32_t src, mtag, msg_len, got; /* receive: the message matched */
  uint32_t seq, ch;
  uint32_t wrs;           /* signalled work requests outstanding */
  bool await;             /* sender: waiting for the ACK / the last FIN */
  uint64_t peer_req;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t nfrag, fnext, fdone, fq_n, fq_head;
  uint32_t plen;          /* RPUT sender: the bytes the receiver takes (its first CTS) */
  struct frag fq[PIPE_MAX];                 /* sender: CTSs received, not written yet */
  struct pp_mr xmr[PIPE_MAX];               /* exposed to the peer for this transfer only */
  struct pp_rcache_entry *rce[PIPE_MAX * 2]; /* local registrations in use */
  struct req *next;
  struct req *regnext; /* the registration line */
};

struct txpool {
  uint8_t *buf;
  struct pp_mr mr;
  uint32_t first, n, size, free;
};

struct p2p {
  struct pp_p2p_params prm;
  /* Request handles go on the wire (a peer names its request and ours in replies): they are
   * bound to their peer when a reply comes, and not guessable: each allocation moves to a new
   * generation, and the handle is XORed with this engine's nonce (both from a PRNG seeded by the
   * configuration: deterministic per seed, no unseeded randomness). */
  uint64_t nonce;
  uint64_t gseq; /* splitmix64 state of the generations */
  uint32_t D, R, C, T, TR, P, nrx, bsize;
  uint32_t npeer, nch;
  struct peer peer[PP_MAX_PEERS];
  int32_t *peer_of; /* rank -> peer index or -1 */
  struct chan *ch;
  struct rx *rx;
  uint8_t *rxbuf;
  struct pp_mr rxmr;
  uint32_t ntotal_rx;
  struct tx *tx;
  struct txpool big, small;
  struct req *req;
  struct req *freereq;
  struct pp_match match;
  bool match_ok;
  struct pp_rcache rc;
  bool rc_ok;
  struct req *work, *work_tail; /* transfers with something to do, in the order they got it */
  /* Requests waiting for a registration of a user buffer (the NIC's MR table or the cache is
   * full), in the order they first asked: only the first tries, when a registration is
   * released (reg_wake). nregs counts the user-buffer registrations requests hold: 0 means none
   * will ever be released, and a request that cannot register then fails (PP_P2P_E_NO_MR). */
  struct req *regq_head, *regq_tail;
  uint32_t nregs;
  bool reg_wake;
  uint64_t now; /* of the event or call being processed */
  struct req *done_head, *done_tail;
  uint32_t depth;
  bool flushing, flush_armed;
  uint32_t npending; /* sends waiting to start */
  /* progress() visits only these, in index order (as a scan of all would): bit i of pend_mask,
   * peer i has sends waiting (pend_head); bit i of ctrl_due, channel i may have control
   * messages to flush (credit_pending or cq_head, as flush_ctrl left it) */
  uint64_t pend_mask;
  uint64_t ctrl_due[PP_MAX_QPS / 64];
  uint32_t nactive;  /* requests started and not complete */
  uint32_t nheld;    /* unexpected messages held */
  struct pp_recv_record *rec;
  uint32_t nrec, rec_cap;
  uint64_t rec_dropped;
  struct pp_p2p_stats st;
};

static const char *const proto_names[] = {
#define PP_X(id, name) [PP_P2P_##id] = name,
    PP_P2P_PROTO_LIST(PP_X)
#undef PP_X
};

static const char *const err_names[] = {
#define PP_X(id, name, desc) [PP_P2P_E_##id] = name,
    PP_P2P_ERR_LIST(PP_X)
#undef PP_X
};

const char *pp_p2p_proto_name(enum pp_p2p_proto p)
{
  return (unsigned)p < PP_P2P_PROTO_COUNT ? proto_names[p] : "?";
}

const char *pp_p2p_err_name(enum pp_p2p_err e)
{
  return (unsigned)e < PP_P2P_ERR_COUNT ? err_names[e] : "?";
}

/* Little-endian 64-bit word at b (any alignment), the same on every host. */
static uint64_t load_le64(const uint8_t *b)
{
  uint64_t w;
  memcpy(&w, b, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

static uint64_t cs_round(uint64_t h, uint64_t w)
{
  h = (h ^ w) * 0x9e3779b97f4a7c15ull; /* 2^64 / golden ratio, odd */
  return h << 31 | h >> 33;
}

/* Four independent lanes over 32-byte blocks, the tail's bytes folded into one last word with
 * the length, then a final avalanche (the murmur3 64-bit finaliser's constants). About 0.6
 * instructions per byte, a tenth of byte-wise FNV-1a, which made the record of a 4 KiB receive
 * the largest single cost of a simulated message. */
uint64_t pp_p2p_checksum(const void *buf, size_t len)
{
  const uint8_t *b = buf;
  uint64_t h0 = 0x243f6a8885a308d3ull, h1 = 0x13198a2e03707344ull, h2 = 0xa4093822299f31d0ull,
           h3 = 0x082efa98ec4e6c89ull; /* digits of pi */
  size_t i = 0;
  for (; i + 32 <= len; i += 32) {
    h0 = cs_round(h0, load_le64(b + i));
    h1 = cs_round(h1, load_le64(b + i + 8));
    h2 = cs_round(h2, load_le64(b + i + 16));
    h3 = cs_round(h3, load_le64(b + i + 24));
  }
  for (; i + 8 <= len; i += 8)
    h0 = cs_round(h0, load_le64(b + i));
  uint64_t t = (uint64_t)(len & 0xff) << 56; /* the tail has at most 7 bytes */
  for (size_t j = 0; i + j < len; j++)
    t ^= (uint64_t)b[i + j] << (8 * j);
  h1 = cs_round(h1, t);
  uint64_t x = h0 ^ (h1 << 17 | h1 >> 47) ^ (h2 << 29 | h2 >> 35) ^ (h3 << 43 | h3 >> 21) ^
               (uint64_t)len;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/* ------------------------------------------------------------------ configuration */

static uint32_t def(uint32_t v, uint32_t d)
{
  return v ? v : d;
}

void pp_p2p_params_default(struct pp_p2p_params *p)
{
  *p = (struct pp_p2p_params){.eager_limit = 12u << 10, .rget_limit = 1u << 20, .record = 4096};
}

void pp_p2p_params_resolve(const struct pp_engine_cfg *c, struct pp_p2p_params *o)
{
  *o = c->p2p;
  if (c->protocol == PP_PROTO_RNDV)
    o->eager_limit = 0;
  o->frag_size = def(o->frag_size, 512u << 10);
  o->pipeline = def(o->pipeline, 4);
  o->channels = def(o->channels, 1);
  o->credits = def(o->credits, c->qp.rq_depth);
  o->credit_threshold = def(o->credit_threshold, (o->credits + 1) / 2);
  o->reply_slots = def(o->reply_slots, o->pipeline > 8 ? o->pipeline : 8);
  o->send_buffers = def(o->send_buffers, 64);
  uint32_t reqs = 2 * (c->qp.sq_depth + c->qp.rq_depth);
  o->max_requests = def(o->max_requests, reqs > 1024 ? reqs : 1024);
  o->rcache_entries = def(o->rcache_entries, 256);
  if (!o->rcache_bytes)
    o->rcache_bytes = 1ull << 30;
}

int pp_p2p_proto(int protocol)
{
  return protocol == PP_PROTO_EAGER || protocol == PP_PROTO_RNDV;
}

int pp_p2p_app(int kind)
{
  return kind == PP_WORKLOAD_SCRIPT || kind == PP_WORKLOAD_TRAFFIC || kind == PP_WORKLOAD_API;
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(err, errlen, __VA_ARGS__);                                                          \
      return PP_INVALID;                                                                           \
    }                                                                                              \
  } while (0)

int pp_script_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen);
int pp_traffic_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen);

int pp_p2p_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  const struct pp_workload *w = &c->workload;
  CHECK(!pp_p2p_app(w->kind) || pp_p2p_proto(c->protocol),
        "workload '%s' needs protocol eager or rndv, got '%s'", pp_workload_name(w->kind),
        pp_protocol_name(c->protocol));
  CHECK(w->pattern != PP_PATTERN_ALLTOALL || w->kind == PP_WORKLOAD_TRAFFIC,
        "pattern 'alltoall' is only for workload 'traffic'");
  if (pp_p2p_proto(c->protocol)) {
    struct pp_p2p_params p;
    pp_p2p_params_resolve(c, &p);
    CHECK(p.eager_limit <= PP_P2P_MAX_EAGER, "eager_limit must be at most %u bytes, got %u",
          PP_P2P_MAX_EAGER, p.eager_limit);
    CHECK(p.frag_size >= 4096, "frag_size must be at least 4096 bytes, got %u", p.frag_size);
    CHECK(p.pipeline <= PIPE_MAX, "pipeline must be 1..%u, got %u", PIPE_MAX, p.pipeline);
    CHECK(p.channels <= PP_P2P_MAX_CHANNELS, "channels must be 1..%u, got %u",
          PP_P2P_MAX_CHANNELS, p.channels);
    CHECK(p.credits <= PP_P2P_MAX_CREDITS, "credits must be 1..%u, got %u", PP_P2P_MAX_CREDITS,
          p.credits);
    CHECK(p.credit_threshold <= p.credits, "credit_threshold must be 1..credits (%u), got %u",
          p.credits, p.credit_threshold);
    CHECK(p.reply_slots <= PP_P2P_MAX_CREDITS, "reply_slots must be 1..%u, got %u",
          PP_P2P_MAX_CREDITS, p.reply_slots);
    CHECK(p.send_buffers <= 65536, "send_buffers must be 1..65536, got %u", p.send_buffers);
    CHECK(p.max_requests <= PP_P2P_MAX_REQUESTS, "max_requests must be 1..%u, got %u",
          PP_P2P_MAX_REQUESTS, p.max_requests);
    CHECK(p.rcache_entries <= 65536, "rcache_entries must be 1..65536, got %u",
          p.rcache_entries);
    CHECK(p.rcache_bytes >= (uint64_t)p.frag_size + 2 * PP_RCACHE_PAGE &&
              p.rcache_bytes >= (uint64_t)p.rget_limit + 2 * PP_RCACHE_PAGE,
          "rcache_bytes must hold a fragment and an RGET message (%llu), got %llu",
          (unsigned long long)(p.frag_size > p.rget_limit ? p.frag_size : p.rget_limit) +
              2 * PP_RCACHE_PAGE,
          (unsigned long long)p.rcache_bytes);
    CHECK(p.record <= PP_P2P_MAX_RECORD, "record must be at most %u, got %u", PP_P2P_MAX_RECORD,
          p.record);
    /* credits + reply_slots + credit messages <= 3 * 4096 receive buffers per QP */
  }
  if (w->kind == PP_WORKLOAD_SCRIPT)
    return pp_script_cfg_check(c, err, errlen);
  if (w->kind == PP_WORKLOAD_TRAFFIC)
    return pp_traffic_cfg_check(c, err, errlen);
  CHECK(w->kind != PP_WORKLOAD_API || c->nranks - 1 <= PP_MAX_PEERS,
        "workload 'api' connects every pair of ranks: at most %u ranks, got %u",
        PP_MAX_PEERS + 1, c->nranks);
  return PP_OK;
}

/* ------------------------------------------------------------------ helpers */

static struct p2p *P2P(const struct pp_engine *e)
{
  return e->ps;
}

static struct hdr *rx_hdr(const struct p2p *p, const struct rx *r)
{
  return (struct hdr *)(void *)(p->rxbuf + (size_t)(r - p->rx) * p->bsize);
}

static uint8_t *tx_buf(const struct p2p *p, uint32_t t)
{
  const struct txpool *tp = t < p->big.first + p->big.n && t >= p->big.first ? &p->big : &p->small;
  return tp->buf + (size_t)(t - tp->first) * tp->size;
}

static const struct pp_mr *tx_mr(const struct p2p *p, uint32_t t)
{
  return t >= p->big.first && t < p->big.first + p->big.n ? &p->big.mr : &p->small.mr;
}

static uint32_t tx_alloc(struct p2p *p, struct txpool *tp)
{
  uint32_t t = tp->free;
  if (t != NO_TX) {
    tp->free = p->tx[t].next;
    p->tx[t].next = NO_TX;
  }
  return t;
}

static void tx_free(struct p2p *p, uint32_t t)
{
  struct txpool *tp = t >= p->big.first && t < p->big.first + p->big.n ? &p->big : &p->small;
  p->tx[t] = (struct tx){.next = tp->free};
  tp->free = t;
}

/* Fragment i of an RPUT of len bytes: its offset and length. */
static uint32_t frag_len(const struct p2p *p, uint32_t len, uint32_t i)
{
  uint64_t off = (uint64_t)i * p->prm.frag_size;
  return off >= len ? 0 : len - off < p->prm.frag_size ? (uint32_t)(len - off) : p->prm.frag_size;
}

static uint32_t nfrag_of(const struct p2p *p, uint32_t len)
{
  return len ? (uint32_t)(((uint64_t)len + p->prm.frag_size - 1) / p->prm.frag_size) : 1;
}

static uint64_t handle_of(const struct p2p *p, const struct req *r)
{
  return ((uint64_t)r->gen << 32 | (uint64_t)(r - p->req + 1)) ^ p->nonce;
}

static struct req *req_of(const struct p2p *p, uint64_t h)
{
  h ^= p->nonce;
  uint32_t i = (uint32_t)h;
  if (i == 0 || i > p->prm.max_requests)
    return NULL;
  struct req *r = &p->req[i - 1];
  return r->kind != K_FREE && r->gen == (uint32_t)(h >> 32) ? r : NULL;
}

static inline struct req *req_alloc(struct p2p *p)
{
  struct req *r = p->freereq;
  if (!r)
    return NULL;
  p->freereq = r->next;
  /* a generation the slot did not have just before (its stale handles stay stale): it moves
   * by 1 + 27 bits of a splitmix64 step (inline: cheap on the eager path) */
  uint64_t z = (p->gseq += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  uint32_t gen = (r->gen + 1 + (uint32_t)((z ^ (z >> 31)) >> 37)) & 0xfffffff;
  memset(r, 0, sizeof(*r));
  r->gen = gen;
  r->peer = UINT32_MAX;
  return r;
}

static void req_free(struct p2p *p, struct req *r)
{
  r->kind = K_FREE;
  r->gen = (r->gen + 1) & 0xfffffff;
  r->next = p->freereq;
  p->freereq = r;
}

static void add_work(struct p2p *p, struct req *r)
{
  if (r->flags & R_WORK)
    return;
  r->flags |= R_WORK;
  r->next = NULL;
  if (p->work_tail)
    p->work_tail->next = r;
  else
    p->work = r;
  p->work_tail = r;
}

static void remove_work(struct p2p *p, struct req *r)
{
  if (!(r->flags & R_WORK))
    return;
  struct req **pp = &p->work, *prev = NULL;
  while (*pp != r) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  *pp = r->next;
  if (p->work_tail == r)
    p->work_tail = prev;
  r->flags &= ~R_WORK;
}

/* ------------------------------------------------------------------ registrations in line */

/* May r register now? Only when nobody waits, or r is the first in line. */
static bool reg_turn(const struct p2p *p, const struct req *r)
{
  return !p->regq_head || p->regq_head == r;
}

/* r needs a registration it cannot get now: it waits in line (off the work list; the line's
 * head goes back to work when a registration is released). */
static void reg_park(struct p2p *p, struct req *r)
{
  if (r->flags & R_REGQ)
    return;
  r->flags |= R_REGQ;
  r->regnext = NULL;
  if (p->regq_tail)
    p->regq_tail->regnext = r;
  else
    p->regq_head = r;
  p->regq_tail = r;
}

/* r leaves the line (it registered, or it is over): the next one may try. */
static void reg_unpark(struct p2p *p, struct req *r)
{
  if (!(r->flags & R_REGQ))
    return;
  struct req **pp = &p->regq_head, *prev = NULL;
  while (*pp != r) {
    prev = *pp;
    pp = &(*pp)->regnext;
  }
  *pp = r->regnext;
  if (p->regq_tail == r)
    p->regq_tail = prev;
  r->flags &= ~R_REGQ;
  p->reg_wake = true;
}

static void reg_held(struct p2p *p, struct req *r)
{
  p->nregs++;
  r->flags |= R_REGS;
}

static void reg_released(struct p2p *p)
{
  assert(p->nregs > 0);
  p->nregs--;
  p->reg_wake = true;
}

static void put_rce(struct p2p *p, struct req *r, uint32_t i)
{
  pp_rcache_put(&p->rc, r->rce[i]);
  r->rce[i] = NULL;
  reg_released(p);
}

static void drop_xmr(struct pp_engine *e, struct req *r, uint32_t i)
{
  e->ops->dereg_mr(e->nic, &r->xmr[i]);
  r->xmr[i] = (struct pp_mr){0};
  reg_released(P2P(e));
}

/* A registration with remote access for one transfer; when the NIC's MR table is full, unused
 * cached registrations make room. */
static enum pp_status reg_xmr(struct pp_engine *e, void *buf, size_t len, unsigned access,
                              struct pp_mr *mr)
{
  struct p2p *p = P2P(e);
  enum pp_status s;
  while ((s = (enum pp_status)e->ops->reg_mr(e->nic, buf, len, access, mr)) == PP_LIMIT &&
         pp_rcache_evict(&p->rc))
    ;
  return s;
}

static void arm_flush(struct pp_engine *e, uint64_t now)
{
  struct p2p *p = P2P(e);
  if (p->depth == 0 && !p->flushing && !p->flush_armed && p->done_head &&
      pp_engine_push_timer(e, now, PP_TIMER_PROTO, FLUSH_TIMER) == PP_OK)
    p->flush_armed = true;
}

static void record(struct pp_engine *e, const struct req *r)
{
  struct p2p *p = P2P(e);
  if (p->nrec == p->rec_cap) {
    p->rec_dropped++;
    return;
  }
  bool ok = r->err == PP_P2P_E_OK || r->err == PP_P2P_E_TRUNCATED;
  p->rec[p->nrec++] = (struct pp_recv_record){
      .rank = e->cfg.rank,
      .source = ok ? r->src : r->rank,
      .tag = ok ? r->mtag : r->tag,
      .ctx = r->ctx,
      .size = ok ? r->got : 0,
      .msg_len = ok ? r->msg_len : 0,
      .error = r->err,
      .proto = r->proto,
      .wc_status = r->wc,
      .checksum = ok ? pp_p2p_checksum(r->buf, r->got) : 0,
  };
}

/* The request is over: it goes to the done list, the workload hears of it at the end of the
 * event. */
static void complete(struct pp_engine *e, uint64_t now, struct req *r)
{
  struct p2p *p = P2P(e);
  remove_work(p, r);
  reg_unpark(p, r);
  if (r->state == RS_ACTIVE)
    p->nactive--;
  r->state = RS_DONE;
  r->done_ns = now;
  if (r->kind == K_RECV) {
    if (r->err == PP_P2P_E_OK || r->err == PP_P2P_E_TRUNCATED)
      p->st.received[r->proto]++;
    if (p->rec_cap)
      record(e, r);
  }
  if (r->err == PP_P2P_E_TRUNCATED)
    p->st.truncated++;
  else if (r->err == PP_P2P_E_CANCELLED)
    p->st.cancelled++;
  else if (r->err == PP_P2P_E_FAILED || r->err == PP_P2P_E_NO_MR || r->err == PP_P2P_E_PEER)
    p->st.failed++;
  r->flags |= R_DONEQ;
  r->next = NULL;
  if (p->done_tail)
    p->done_tail->next = r;
  else
    p->done_head = r;
  p->done_tail = r;
  arm_flush(e, now);
}

static enum pp_wc_status wc_of(const struct req *r)
{
  switch (r->err) {
  case PP_P2P_E_OK:
    return PP_WC_SUCCESS;
  case PP_P2P_E_TRUNCATED:
    return PP_WC_LOC_LEN_ERR;
  case PP_P2P_E_CANCELLED:
    return PP_WC_WR_FLUSH_ERR;
  case PP_P2P_E_NO_MR:
    return PP_WC_LOC_PROT_ERR;
  default:
    return (enum pp_wc_status)r->wc;
  }
}

static enum pp_status flush_done(struct pp_engine *e, uint64_t now)
{
  struct p2p *p = P2P(e);
  enum pp_status st = PP_OK;
  if (p->flushing)
    return PP_OK;
  p->flushing = true;
  while (p->done_head) {
    struct req *r = p->done_head;
    p->done_head = r->next;
    if (!p->done_head)
      p->done_tail = NULL;
    r->flags &= ~R_DONEQ;
    if (r->flags & R_RELEASED) {
      r->kind = K_FREE; /* its handle already went stale in pp_p2p_test */
      r->next = p->freereq;
      p->freereq = r;
      continue;
    }
    enum pp_status s = r->kind == K_SEND
                           ? pp_app_send_done(e, now, r->cookie, wc_of(r))
                           : pp_app_recv_done(e, now, r->cookie, wc_of(r), r->src, r->mtag, r->got);
    if (s != PP_OK && st == PP_OK)
      st = s;
    if (r->flags & R_AUTO)
      req_free(p, r);
  }
  p->flushing = false;
  return st;
}

/* ------------------------------------------------------------------ posting */

static enum pp_status post_rx(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  uint32_t i = (uint32_t)(r - p->rx);
  struct pp_recv_wr wr = {
      .wr_id = WRID(W_RECV, 0, i),
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(p->rxbuf + (size_t)i * p->bsize),
                   .length = p->bsize,
                   .lkey = p->rxmr.lkey}},
  };
  r->state = RX_POSTED;
  if (p->ch[r->ch].failed)
    return PP_OK;
  return (enum pp_status)e->ops->post_recv(e->nic, p->ch[r->ch].qpn, &wr);
}

/* Posts tx slot t (its header already filled) with `len` bytes; hands back the owed credits. */
static enum pp_status post_tx(struct pp_engine *e, uint32_t t, uint32_t len)
{
  struct p2p *p = P2P(e);
  struct tx *x = &p->tx[t];
  struct chan *c = &p->ch[x->ch];
  struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
  h->credits = (uint16_t)c->owed;
  h->rcredits = (uint16_t)c->rowed;
  if (h->type != M_CREDIT)
    p->st.credits_piggybacked += c->owed + c->rowed;
  c->owed = c->rowed = 0;
  struct pp_send_wr wr = {
      .wr_id = WRID(W_TX, 0, t),
      .opcode = PP_WR_SEND,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)h, .length = len, .lkey = tx_mr(p, t)->lkey}},
  };
  c->sq_used++;
  return (enum pp_status)e->ops->post_send(e->nic, c->qpn, &wr);
}

static bool credit_due(const struct p2p *p, const struct chan *c)
{
  return (c->owed > 0 && (c->owed >= p->T || c->inuse + c->owed == p->D)) ||
         (c->rowed > 0 && (c->rowed >= p->TR || c->rowed == p->R));
}

/* Posts what channel c may: a due CREDIT message first (it needs no credit), then the queued
 * replies while reply credits and send-queue slots last. */
static enum pp_status flush_ctrl_1(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  if (c->failed)
    return PP_OK;
  if (c->credit_pending && c->sq_used < e->cfg.qp.sq_depth) {
    c->credit_pending = false;
    if (credit_due(p, c)) { /* else piggy-backed meanwhile */
      uint32_t t = tx_alloc(p, &p->small);
      if (t == NO_TX) {
        c->credit_pending = true;
        return PP_OK;
      }
      struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
      *h = (struct hdr){.type = M_CREDIT};
      p->tx[t] = (struct tx){.next = NO_TX, .ch = (uint32_t)(c - p->ch), .nwr = 1,
                             .type = M_CREDIT};
      p->st.credit_msgs++;
      enum pp_status s = post_tx(e, t, HDR);
      if (s != PP_OK)
        return s;
    }
  }
  while (c->cq_head != NO_TX && c->sq_used < e->cfg.qp.sq_depth && c->rcredits > 0) {
    uint32_t t = c->cq_head;
    c->cq_head = p->tx[t].next;
    if (c->cq_head == NO_TX)
      c->cq_tail = NO_TX;
    p->tx[t].next = NO_TX;
    c->rcredits--;
    enum pp_status s = post_tx(e, t, HDR);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

/* Sends what channel c owes and can send now; ctrl_due says whether anything is left. */
static enum pp_status flush_ctrl(struct pp_engine *e, struct chan *c)
{
  struct p2p *p = P2P(e);
  enum pp_status s = flush_ctrl_1(e, c);
  uint32_t i = (uint32_t)(c - p->ch);
  uint64_t bit = 1ull << (i % 64);
  if (!c->failed && (c->cq_head != NO_TX || c->credit_pending))
    p->ctrl_due[i / 64] |= bit;
  else
    p->ctrl_due[i / 64] &= ~bit;
  return s;
}

/* Queues a reply (CTS, FIN, ACK) on channel ch; h is copied. It leaves with a reply credit. */
static enum pp_status send_reply(struct pp_engine *e, uint32_t ch, const struct hdr *h,
                                 uint64_t req, uint8_t slot, uint16_t nwr)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return PP_OK;
  uint32_t t = tx_alloc(p, &p->small);
  if (t == NO_TX)
    return PP_LIMIT; /* cannot happen: the pool covers every reply that can be owed */
  memcpy(tx_buf(p, t), h, HDR);
  p->tx[t] = (struct tx){.next = NO_TX, .ch = ch, .req = req, .nwr = nwr, .type = h->type,
                         .slot = slot};
  if (c->cq_tail == NO_TX)
    c->cq_head = t;
  else
    p->tx[c->cq_tail].next = t;
  c->cq_tail = t;
  return flush_ctrl(e, c);
}

static enum pp_status credit_check(struct pp_engine *e, uint32_t ch)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->credit_pending || !credit_due(p, c))
    return PP_OK;
  c->credit_pending = true;
  return flush_ctrl(e, c);
}

/* A reply was consumed: its buffer goes back at once, a reply credit is owed. */
static enum pp_status reply_consumed(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  enum pp_status s = post_rx(e, r);
  p->ch[r->ch].rowed++;
  return s == PP_OK ? credit_check(e, r->ch) : s;
}

/* A consumed buffer goes back to the NIC; `credits` of the sender's credits become owed. */
static enum pp_status release_rx(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  enum pp_status s = post_rx(e, r);
  if (s != PP_OK)
    return s;
  c->inuse--;
  c->owed++;
  return credit_check(e, r->ch);
}

/* ------------------------------------------------------------------ failures */

static void release_regs(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  if (!(r->flags & R_REGS))
    return;
  r->flags &= ~R_REGS;
  for (uint32_t i = 0; i < PIPE_MAX; i++)
    if (r->xmr[i].lkey)
      drop_xmr(e, r, i);
  for (uint32_t i = 0; i < 2 * PIPE_MAX; i++)
    if (r->rce[i])
      put_rce(p, r, i);
}

static void fail_as(struct pp_engine *e, uint64_t now, struct req *r, uint8_t err, uint8_t wc)
{
  if (r->state == RS_DONE)
    return;
  release_regs(e, r);
  r->err = err;
  r->wc = wc;
  if (r->flags & R_POSTED) {
    pp_match_remove_posted(&P2P(e)->match, &r->me);
    r->flags &= ~R_POSTED;
  }
  complete(e, now, r);
}

/* r could not register a buffer. While this engine holds registrations, one will be released:
 * r waits in line. With none held nothing will ever change: false, r must give up (NO_MR). */
static bool reg_failed(struct p2p *p, struct req *r)
{
  if (p->nregs == 0)
    return false;
  reg_park(p, r);
  return true;
}

/* Channel ch is out of use: its queued control messages will never go. A channel that is
 * still alive (its QP has not failed) goes to ERROR: every work request on it is flushed, so no
 * transfer of a request that fails with the peer touches its buffer afterwards. Completions that
 * were already in the CQ still arrive: on_send_wc takes them as stale. */
static void close_channel(struct pp_engine *e, uint32_t ch, bool alive)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  c->failed = true;
  while (c->cq_head != NO_TX) {
    uint32_t t = c->cq_head;
    c->cq_head = p->tx[t].next;
    tx_free(p, t);
  }
  c->cq_tail = NO_TX;
  if (alive && c->qpn) {
    struct pp_qp_attr a = {.qp_state = PP_QPS_ERR};
    e->ops->modify_qp(e->nic, c->qpn, &a, PP_QP_STATE);
  }
}

/* The peer pi is gone: every channel to it that is still alive goes to ERROR (except `dead`,
 * whose QP failed already), the messages it had held out of order are dropped, and everything
 * that involves it fails with err / wc. */
static void fail_peer(struct pp_engine *e, uint64_t now, uint32_t pi, uint32_t dead, uint8_t err,
                      uint8_t wc)
{
  struct p2p *p = P2P(e);
  struct peer *pe = &p->peer[pi];
  if (pe->failed)
    return;
  pe->failed = true;
  pe->fail_wc = wc;
  pe->fail_err = err;
  for (uint32_t k = 0; k < p->prm.channels; k++)
    if (!p->ch[pe->ch0 + k].failed)
      close_channel(e, pe->ch0 + k, pe->ch0 + k != dead);
  for (struct rx *x = pe->ooo; x; x = x->ooo_next)
    x->state = RX_DEAD;
  pe->ooo = NULL;
  while (pe->pend_head) {
    struct req *r = pe->pend_head;
    pe->pend_head = r->next;
    p->npending--;
    fail_as(e, now, r, err, wc);
  }
  pe->pend_tail = NULL;
  p->pend_mask &= ~(1ull << (pe - p->peer));
  for (uint32_t i = 0; i < p->prm.max_requests; i++) {
    struct req *r = &p->req[i];
    if (r->kind == K_FREE || r->state == RS_DONE)
      continue;
    if (r->peer == pi || (r->kind == K_RECV && (r->flags & R_POSTED) && r->rank == pe->rank))
      fail_as(e, now, r, err, wc);
  }
}

/* A completion failed on channel ch: the peer is gone (its messages are sequenced across all
 * its channels, one lost channel breaks the order of all). Its other channels are closed and
 * everything that involves it fails. */
static void fail_channel(struct pp_engine *e, uint64_t now, uint32_t ch, uint8_t wc)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[ch];
  if (c->failed)
    return;
  close_channel(e, ch, false);
  fail_peer(e, now, c->peer, ch, PP_P2P_E_FAILED, wc);
}

/* Untrusted peers: the message in x broke the protocol (field f said `value`; `limit` is what
 * was allowed: the bound when at_most, else the value expected). It is reported, its buffer is
 * never posted again and the connection to its peer fails (PP_P2P_E_PEER, GENERAL_ERR). */
static enum pp_status violation(struct pp_engine *e, uint64_t now, struct rx *x, uint8_t type,
                                enum pp_violation_field f, uint64_t value, uint64_t limit,
                                bool at_most)
{
  struct p2p *p = P2P(e);
  uint32_t pi = p->ch[x->ch].peer;
  x->state = RX_DEAD;
  /* A peer that failed already (a QP error on one of its channels) is judged no more: what it
   * sent before its other channels went to ERROR may name requests that failed with it. */
  if (p->peer[pi].failed)
    return PP_OK;
  struct pp_violation v = {.peer = p->peer[pi].rank, .field = (uint8_t)f, .at_most = at_most,
                           .value = value, .limit = limit};
  snprintf(v.msg, sizeof(v.msg), "%s", pp_p2p_msg_name((enum pp_p2p_msg)type));
  pp_engine_violation(e, now, &v);
  fail_peer(e, now, pi, UINT32_MAX, PP_P2P_E_PEER, PP_WC_GENERAL_ERR);
  return PP_OK;
}

/* ------------------------------------------------------------------ sending */

static uint32_t msg_proto(const struct p2p *p, uint32_t len)
{
  if (len <= p->prm.eager_limit)
    return PP_P2P_EAGER;
  return len <= p->prm.rget_limit ? PP_P2P_RNDV_GET : PP_P2P_RNDV_PUT;
}

/* Starts the sends parked at peer pe, in order, while credits, reply slots, send-queue slots
 * and buffers allow. */
static enum pp_status start_sends(struct pp_engine *e, uint32_t pi)
{
  struct p2p *p = P2P(e);
  struct peer *pe = &p->peer[pi];
  while (pe->pend_head) {
    struct req *r = pe->pend_head;
    uint32_t ch = UINT32_MAX;
    for (uint32_t k = 0; k < p->prm.channels && ch == UINT32_MAX; k++) {
      uint32_t i = pe->ch0 + (pe->next_ch + k) % p->prm.channels;
      const struct chan *c = &p->ch[i];
      if (c->credits && c->sq_used < e->cfg.qp.sq_depth)
        ch = i;
    }
    bool big = r->proto == PP_P2P_EAGER && r->len > 0;
    uint32_t t = ch == UINT32_MAX ? NO_TX : tx_alloc(p, big ? &p->big : &p->small);
    struct pp_mr xmr = {0};
    bool abort = false;
    if (t != NO_TX && r->proto == PP_P2P_RNDV_GET &&
        reg_xmr(e, r->buf, r->len, PP_ACCESS_REMOTE_READ, &xmr) != PP_OK) {
      abort = p->nregs == 0; /* no registration of ours left to wait for */
      if (!abort) {
        tx_free(p, t);
        t = NO_TX;
      }
    }
    if (t == NO_TX) {
      if (!(r->flags & R_PARKED)) {
        r->flags |= R_PARKED;
        p->st.parked++;
      }
      return PP_OK;
    }
    pe->pend_head = r->next;
    if (!pe->pend_head) {
      pe->pend_tail = NULL;
      p->pend_mask &= ~(1ull << pi);
    }
    p->npending--;
    struct chan *c = &p->ch[ch];
    c->credits--;
    pe->next_ch = (ch - pe->ch0 + 1) % p->prm.channels;
    r->ch = ch;
    r->state = RS_ACTIVE;
    p->nactive++;
    r->wrs = 1;
    r->await = r->proto != PP_P2P_EAGER || (r->flags & R_SYNC);
    r->xmr[0] = xmr;
    if (xmr.lkey)
      reg_held(p, r);
    p->st.sent[r->proto]++;
    struct hdr *h = (struct hdr *)(void *)tx_buf(p, t);
    *h = (struct hdr){
        .type = r->proto == PP_P2P_EAGER ? M_EAGER : M_RTS,
        .flags = (uint8_t)(((r->flags & R_SYNC) ? F_SYNC : 0) |
                           (r->proto == PP_P2P_RNDV_GET ? F_RGET : 0) | (abort ? F_ABORT : 0)),
        .ctx = r->ctx,
        .seq = r->seq,
        .tag = r->tag,
        .len = r->len,
        .sreq = handle_of(p, r),
        .addr = (uint64_t)(uintptr_t)r->buf,
        .rkey = xmr.rkey,
    };
    uint32_t len = HDR;
    if (r->proto == PP_P2P_EAGER && r->len) {
      memcpy((uint8_t *)h + HDR, r->buf, r->len);
      len += r->len;
    }
    p->tx[t] = (struct tx){.next = NO_TX, .ch = ch, .req = abort ? 0 : handle_of(p, r), .nwr = 1,
                           .type = h->type};
    enum pp_status s = post_tx(e, t, len);
    if (abort) /* the RTS only keeps the sequence: the receiver drops it */
      fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static enum pp_status start_all(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  for (uint64_t m = p->pend_mask; m && p->npending;) {
    uint32_t i = (uint32_t)__builtin_ctzll(m);
    enum pp_status s = start_sends(e, i);
    if (s != PP_OK)
      return s;
    m = i == 63 ? 0 : p->pend_mask & ~0ull << (i + 1); /* the peers after i with sends waiting */
  }
  return PP_OK;
}

static void maybe_complete_send(struct pp_engine *e, uint64_t now, struct req *r)
{
  struct p2p *p = P2P(e);
  if (r->wrs || r->await || r->fq_n || r->state == RS_DONE)
    return;
  (void)p;
  release_regs(e, r);
  complete(e, now, r);
}

/* ------------------------------------------------------------------ the work list */

static int free_slot(struct req *r, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    if (!r->rce[i])
      return (int)i;
  return -1;
}

/* Sender of an RPUT: writes the fragments whose CTS arrived. true while some remain. */
static bool work_rput_send(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  while (r->fq_n && !c->failed) {
    struct frag *f = &r->fq[r->fq_head];
    int slot = free_slot(r, 2 * PIPE_MAX);
    uint16_t nwr = 1; /* send-queue slots the FIN's completion frees */
    if (c->sq_used >= e->cfg.qp.sq_depth || slot < 0)
      return true;
    struct pp_rcache_entry *rce = NULL;
    if (f->len && r->err != PP_P2P_E_NO_MR) {
      if (!reg_turn(p, r)) {
        reg_park(p, r);
        return false;
      }
      if (pp_rcache_get(&p->rc, r->buf + f->off, f->len, &rce) != PP_OK) {
        if (reg_failed(p, r))
          return false;
        r->err = PP_P2P_E_NO_MR; /* this and every later fragment: a FIN without data */
      } else {
        reg_unpark(p, r);
        r->rce[slot] = rce;
        reg_held(p, r);
      }
    }
    if (rce) {
      /* Unsignalled, its slot comes back with the FIN's completion; but never into the last
       * free slot: the FIN needs one, and a full send queue of WRs waiting for a FIN that
       * cannot be posted would never complete. The WRITE that takes the last slot is
       * signalled and frees its slot itself. */
      bool sig = c->sq_used + 1 == e->cfg.qp.sq_depth;
      struct pp_send_wr wr = {
          .wr_id = WRID(W_WRITE, r->gen, r - p->req),
          .opcode = PP_WR_RDMA_WRITE,
          .send_flags = sig ? PP_SEND_SIGNALED : 0,
          .num_sge = 1,
          .sg_list = {{.addr = (uint64_t)(uintptr_t)(r->buf + f->off),
                       .length = f->len,
                       .lkey = rce->mr.lkey}},
          .remote_addr = f->addr,
          .rkey = f->rkey,
      };
      c->sq_used++;
      if (e->ops->post_send(e->nic, c->qpn, &wr) != PP_OK)
        return false;
      p->st.fragments++;
      if (sig)
        r->wrs++;
      nwr = sig ? 1 : 2;
    }
    /* the FIN follows the WRITE on the same QP: when it arrives, the data is in place */
    bool aborted = !rce && r->err == PP_P2P_E_NO_MR;
    struct hdr h = {.type = M_FIN, .flags = aborted ? F_ABORT : 0, .seq = f->idx,
                    .rreq = r->peer_req, .sreq = handle_of(p, r), .flen = f->len, .off = f->off};
    r->wrs++;
    r->fq_head = (r->fq_head + 1) % PIPE_MAX;
    r->fq_n--;
    r->fnext++;
    if (send_reply(e, r->ch, &h, handle_of(p, r), (uint8_t)(rce ? slot : 0xff), nwr) != PP_OK)
      return false;
  }
  return false;
}

/* Receiver of an RPUT: exposes the next fragments (a registration with remote write for this
 * fragment only) and sends their CTS, at most `pipeline` at a time. */
static bool work_rput_recv(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  uint32_t window = p->P;
  while (r->fnext < r->nfrag && r->fnext - r->fdone < window) {
    uint32_t i = r->fnext, slot = i % window;
    uint32_t off = (uint32_t)((uint64_t)i * p->prm.frag_size);
    uint32_t flen = r->got - off < p->prm.frag_size ? r->got - off : p->prm.frag_size;
    struct pp_mr mr = {0};
    bool abort = false;
    if (flen && PP_BUG(&e->cfg, EARLY_CTS) && !(r->flags & R_BUGCTS)) {
      /* the bug: the CTS goes out first, with whatever the slot holds; the fragment is
       * registered on the next round */
      struct hdr h = {.type = M_CTS, .seq = i, .len = r->got, .nfrag = r->nfrag,
                      .sreq = r->peer_req, .rreq = handle_of(p, r),
                      .addr = (uint64_t)(uintptr_t)(r->buf + off), .rkey = r->xmr[slot].rkey,
                      .flen = flen, .off = off};
      r->flags |= R_BUGCTS;
      if (send_reply(e, r->ch, &h, 0, 0, 1) != PP_OK)
        return false;
      return true;
    }
    if (flen) {
      if (!reg_turn(p, r)) {
        reg_park(p, r);
        return false;
      }
      if (reg_xmr(e, r->buf + off, flen, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE, &mr) !=
          PP_OK) {
        if (reg_failed(p, r))
          return false;
        abort = true; /* nothing of ours in flight, none will be: the sender learns by CTS */
      } else {
        reg_unpark(p, r);
        r->xmr[slot] = mr;
        reg_held(p, r);
      }
    }
    if (!abort && (r->flags & R_BUGCTS)) { /* test bug early-cts: its CTS went already */
      r->flags &= ~R_BUGCTS;
      r->fnext++;
      continue;
    }
    struct hdr h = {.type = M_CTS,
                    .flags = abort ? F_ABORT : 0,
                    .seq = i,
                    .len = r->got,
                    .nfrag = r->nfrag,
                    .sreq = r->peer_req,
                    .rreq = handle_of(p, r),
                    .addr = (uint64_t)(uintptr_t)(r->buf + off),
                    .rkey = mr.rkey,
                    .flen = flen,
                    .off = off};
    r->fnext++;
    enum pp_status s = send_reply(e, r->ch, &h, 0, 0, 1);
    if (abort)
      fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    if (s != PP_OK || abort)
      return false;
  }
  return false;
}

/* Receiver of an RGET: reads the message. */
static bool work_rget_recv(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  if ((r->flags & R_READ) || c->failed)
    return false;
  if (c->sq_used >= e->cfg.qp.sq_depth)
    return true;
  if (!reg_turn(p, r)) {
    reg_park(p, r);
    return false;
  }
  if (pp_rcache_get(&p->rc, r->buf, r->got, &r->rce[0]) != PP_OK) {
    if (reg_failed(p, r))
      return false;
    struct hdr f = {.type = M_FIN, .flags = F_RGET | F_ABORT, .sreq = r->peer_req};
    fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    send_reply(e, r->ch, &f, 0, 0, 1);
    return false;
  }
  reg_unpark(p, r);
  reg_held(p, r);
  struct pp_send_wr wr = {
      .wr_id = WRID(W_READ, r->gen, r - p->req),
      .opcode = PP_WR_RDMA_READ,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)r->buf, .length = r->got,
                   .lkey = r->rce[0]->mr.lkey}},
      .remote_addr = r->raddr,
      .rkey = r->rkey,
  };
  c->sq_used++;
  r->flags |= R_READ;
  r->wrs++;
  e->ops->post_send(e->nic, c->qpn, &wr);
  return false;
}

static enum pp_status run_work(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  struct req *list = p->work;
  p->work = p->work_tail = NULL;
  while (list) {
    struct req *r = list;
    list = r->next;
    r->flags &= ~R_WORK;
    if (r->state == RS_DONE)
      continue;
    bool more;
    if (r->kind == K_SEND)
      more = work_rput_send(e, r);
    else if (r->proto == PP_P2P_RNDV_GET)
      more = work_rget_recv(e, r);
    else
      more = work_rput_recv(e, r);
    if (more)
      add_work(p, r);
  }
  return PP_OK;
}

/* Everything that may have become possible: control messages, parked sends, transfers. */
static enum pp_status progress(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  for (uint32_t w = 0; w < (p->nch + 63) / 64; w++)
    for (uint64_t m = p->ctrl_due[w]; m;) {
      uint32_t b = (uint32_t)__builtin_ctzll(m), i = w * 64 + b;
      if (p->ch[i].cq_head != NO_TX || p->ch[i].credit_pending) {
        enum pp_status s = flush_ctrl(e, &p->ch[i]);
        if (s != PP_OK)
          return s;
      }
      m = b == 63 ? 0 : p->ctrl_due[w] & ~0ull << (b + 1); /* what is due after i, now */
    }
  enum pp_status s = PP_OK;
  do { /* a registration released: the first in line tries, then the next, ... */
    if (p->reg_wake && p->regq_head)
      add_work(p, p->regq_head);
    p->reg_wake = false;
    s = run_work(e);
  } while (s == PP_OK && p->reg_wake && p->regq_head);
  if (s == PP_OK)
    s = start_all(e);
  return s;
}

/* ------------------------------------------------------------------ receiving */

static enum pp_status start_recv(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  r->peer = c->peer;
  r->ch = x->ch;
  r->src = p->peer[c->peer].rank;
  r->mtag = h->tag;
  r->ctx = h->ctx;
  r->msg_len = h->len;
  r->got = h->len < r->len ? h->len : r->len;
  r->err = h->len > r->len ? PP_P2P_E_TRUNCATED : PP_P2P_E_OK;
  r->peer_req = h->sreq;
  r->state = RS_ACTIVE;
  p->nactive++;
  if (h->type == M_EAGER) {
    r->proto = PP_P2P_EAGER;
    if (r->got)
      memcpy(r->buf, (const uint8_t *)h + HDR, r->got);
    if (h->flags & F_SYNC) {
      struct hdr a = {.type = M_ACK, .sreq = h->sreq};
      p->st.sync_acks++;
      enum pp_status s = send_reply(e, x->ch, &a, 0, 0, 1);
      if (s != PP_OK)
        return s;
    }
    complete(e, now, r);
    return release_rx(e, x);
  }
  if (p->peer[c->peer].failed) { /* a rendezvous with a dead peer can never transfer */
    r->proto = (h->flags & F_RGET) ? PP_P2P_RNDV_GET : PP_P2P_RNDV_PUT;
    fail_as(e, now, r, p->peer[c->peer].fail_err, p->peer[c->peer].fail_wc);
    return release_rx(e, x);
  }
  if (h->flags & F_RGET) {
    r->proto = PP_P2P_RNDV_GET;
    r->raddr = h->addr;
    r->rkey = h->rkey;
    enum pp_status s = release_rx(e, x);
    if (s != PP_OK)
      return s;
    if (r->got == 0) {
      struct hdr f = {.type = M_FIN, .flags = F_RGET, .sreq = r->peer_req};
      complete(e, now, r);
      return send_reply(e, r->ch, &f, 0, 0, 1);
    }
    add_work(p, r);
    return PP_OK;
  }
  r->proto = PP_P2P_RNDV_PUT;
  r->nfrag = nfrag_of(p, r->got);
  add_work(p, r);
  return release_rx(e, x);
}

/* A matching message, in sequence: to its receive, or into the unexpected queue. */
static enum pp_status deliver(struct pp_engine *e, uint64_t now, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  uint32_t rank = p->peer[p->ch[x->ch].peer].rank;
  if (h->flags & F_ABORT) /* a send given up: it only held its place in the sequence */
    return release_rx(e, x);
  struct pp_mentry *m = pp_match_arrive(&p->match, h->ctx, rank, h->tag);
  if (m) {
    struct req *r = (struct req *)(void *)m;
    r->flags &= ~R_POSTED;
    return start_recv(e, now, r, x);
  }
  x->state = RX_HELD;
  p->st.unexpected++;
  if (++p->nheld > p->st.unexpected_max)
    p->st.unexpected_max = p->nheld;
  return pp_match_add_unexpected(&p->match, &x->me, h->ctx, rank, h->tag);
}

/* A matching message (EAGER, RTS) as its header says: its length against the bytes that came,
 * its flags, its tag and its sequence number against the window the credits allow (every
 * message of the peer not yet delivered holds one of the credits of its channel). */
static enum pp_status check_match_msg(struct pp_engine *e, uint64_t now, struct rx *x,
                                      const struct hdr *h, uint32_t body)
{
  struct p2p *p = P2P(e);
  const struct peer *pe = &p->peer[p->ch[x->ch].peer];
  uint32_t window = p->prm.channels * p->D, d = h->seq - pe->recv_seq;
  if (h->type == M_EAGER) {
    if (h->len != body)
      return violation(e, now, x, h->type, PP_VF_LEN, h->len, body, false);
    if (h->len > p->prm.eager_limit)
      return violation(e, now, x, h->type, PP_VF_LEN, h->len, p->prm.eager_limit, true);
    if (h->flags & ~F_SYNC)
      return violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_SYNC, true);
  } else {
    if (body)
      return violation(e, now, x, h->type, PP_VF_BYTE_LEN, body + HDR, HDR, false);
    if (h->len <= p->prm.eager_limit || h->len > PP_MAX_MSG_SIZE)
      return violation(e, now, x, h->type, PP_VF_LEN, h->len,
                       h->len > PP_MAX_MSG_SIZE ? PP_MAX_MSG_SIZE : p->prm.eager_limit + 1ull,
                       h->len > PP_MAX_MSG_SIZE);
    if ((h->flags & ~(F_SYNC | F_RGET | F_ABORT)) ||
        ((h->flags & F_RGET) != 0) != (h->len <= p->prm.rget_limit))
      return violation(e, now, x, h->type, PP_VF_FLAGS, h->flags,
                       h->len <= p->prm.rget_limit ? F_RGET : 0, false);
  }
  if (h->tag == PP_ANY_TAG)
    return violation(e, now, x, h->type, PP_VF_TAG, h->tag, PP_ANY_TAG - 1ull, true);
  if (d >= window)
    return violation(e, now, x, h->type, PP_VF_SEQ, h->seq, pe->recv_seq + (uint64_t)window - 1,
                     true);
  return PP_OK;
}

static enum pp_status on_match_msg(struct pp_engine *e, uint64_t now, struct rx *x,
                                   uint32_t body)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  struct peer *pe = &p->peer[c->peer];
  enum pp_status s = check_match_msg(e, now, x, h, body);
  if (s != PP_OK || x->state == RX_DEAD)
    return s;
  if (h->seq != pe->recv_seq) { /* an earlier message is still on its way on another channel */
    struct rx **pp = &pe->ooo;
    while (*pp && (int32_t)(rx_hdr(p, *pp)->seq - h->seq) < 0)
      pp = &(*pp)->ooo_next;
    if (*pp && rx_hdr(p, *pp)->seq == h->seq) /* a second message with this number */
      return violation(e, now, x, h->type, PP_VF_SEQ, h->seq, pe->recv_seq, false);
    p->st.out_of_order++;
    c->inuse++;
    x->state = RX_HELD;
    x->ooo_next = *pp;
    *pp = x;
    return PP_OK;
  }
  c->inuse++;
  x->state = RX_HELD;
  s = deliver(e, now, x);
  pe->recv_seq++;
  while (s == PP_OK && pe->ooo && rx_hdr(p, pe->ooo)->seq == pe->recv_seq) {
    struct rx *n = pe->ooo;
    pe->ooo = n->ooo_next;
    s = deliver(e, now, n);
    pe->recv_seq++;
  }
  return s;
}

/* The request a reply names: a live one of `kind` with the peer the reply came from (a handle
 * of another peer's transfer is no handle for this one). */
static struct req *reply_req(struct p2p *p, uint64_t h, uint8_t kind, uint32_t pi)
{
  struct req *r = req_of(p, h);
  return r && r->kind == kind && r->state == RS_ACTIVE && r->peer == pi ? r : NULL;
}

/* A fragment's index, offset and length as the transfer has them (CTS, RPUT FIN). */
static enum pp_status check_frag(struct pp_engine *e, uint64_t now, struct rx *x,
                                 const struct hdr *h, uint32_t idx, uint32_t len)
{
  struct p2p *p = P2P(e);
  if (h->seq != idx)
    return violation(e, now, x, h->type, PP_VF_FRAG, h->seq, idx, false);
  if (h->off != (uint64_t)idx * p->prm.frag_size)
    return violation(e, now, x, h->type, PP_VF_OFF, h->off, (uint64_t)idx * p->prm.frag_size,
                     false);
  if (h->flen != frag_len(p, len, idx))
    return violation(e, now, x, h->type, PP_VF_FLEN, h->flen, frag_len(p, len, idx), false);
  return PP_OK;
}

/* CTS at an RPUT sender: the next fragment in order, within the message and the pipeline. */
static enum pp_status on_cts(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h)
{
  struct p2p *p = P2P(e);
  uint32_t pi = p->ch[x->ch].peer;
  struct req *r = reply_req(p, h->sreq, K_SEND, pi);
  if (!r || r->proto != PP_P2P_RNDV_PUT || !r->await)
    return violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
  uint32_t idx = r->fnext + r->fq_n; /* the CTSs so far */
  if (h->flags & ~F_ABORT)
    return violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_ABORT, true);
  if (idx == 0 && h->len > r->len)
    return violation(e, now, x, h->type, PP_VF_LEN, h->len, r->len, true);
  if (idx > 0 && (h->len != r->plen || h->rreq != r->peer_req))
    return violation(e, now, x, h->type, h->len != r->plen ? PP_VF_LEN : PP_VF_HANDLE,
                     h->len != r->plen ? h->len : h->rreq,
                     h->len != r->plen ? r->plen : r->peer_req, false);
  if (h->nfrag != nfrag_of(p, h->len))
    return violation(e, now, x, h->type, PP_VF_NFRAG, h->nfrag, nfrag_of(p, h->len), false);
  if (idx >= h->nfrag || r->fq_n >= p->P)
    return violation(e, now, x, h->type, PP_VF_FRAG, h->seq,
                     idx >= h->nfrag ? h->nfrag - 1ull : r->fnext + p->P - 1ull, true);
  enum pp_status s = check_frag(e, now, x, h, idx, h->len);
  if (s != PP_OK || x->state == RX_DEAD)
    return s;
  if (h->flags & F_ABORT) {
    r->err = PP_P2P_E_NO_MR; /* the receiver could not expose its buffer */
    r->nfrag = r->fnext;
    r->await = false;
    maybe_complete_send(e, now, r);
  } else {
    r->fq[(r->fq_head + r->fq_n) % PIPE_MAX] = (struct frag){
        .addr = h->addr, .rkey = h->rkey, .off = h->off, .len = h->flen, .idx = h->seq};
    r->fq_n++;
    r->nfrag = h->nfrag;
    r->plen = h->len;
    r->peer_req = h->rreq;
    add_work(p, r);
  }
  return reply_consumed(e, x);
}

/* FIN: at an RGET sender, the receiver read our buffer (or gave up: F_ABORT); at an RPUT
 * receiver, the next fragment of ours that got a CTS was written (or not: F_ABORT). */
static enum pp_status on_fin(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h)
{
  struct p2p *p = P2P(e);
  uint32_t pi = p->ch[x->ch].peer;
  struct req *r;
  if (h->flags & F_RGET) {
    r = reply_req(p, h->sreq, K_SEND, pi);
    if (!r || r->proto != PP_P2P_RNDV_GET || !r->await)
      return violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
    if (h->flags & ~(F_RGET | F_ABORT))
      return violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_RGET | F_ABORT, true);
    if (h->flags & F_ABORT)
      r->err = PP_P2P_E_NO_MR;
    r->await = false;
    maybe_complete_send(e, now, r);
    return reply_consumed(e, x);
  }
  r = reply_req(p, h->rreq, K_RECV, pi);
  if (!r || r->proto != PP_P2P_RNDV_PUT || h->sreq != r->peer_req)
    return violation(e, now, x, h->type, PP_VF_HANDLE, h->rreq, 0, false);
  if (h->flags & ~F_ABORT)
    return violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_ABORT, true);
  /* only a fragment whose CTS went (test bug early-cts: one may go before its fnext moved) */
  uint32_t sent = r->fnext + ((r->flags & R_BUGCTS) ? 1 : 0);
  if (r->fdone >= sent) /* FINs with this one, against the CTSs that went */
    return violation(e, now, x, h->type, PP_VF_FRAG, r->fdone + 1ull, sent, true);
  enum pp_status s = check_frag(e, now, x, h, r->fdone, r->got);
  if (s != PP_OK || x->state == RX_DEAD)
    return s;
  if (r->xmr[h->seq % p->P].lkey)
    drop_xmr(e, r, h->seq % p->P); /* that fragment is no longer remotely writable */
  if (h->flags & F_ABORT)
    r->err = PP_P2P_E_NO_MR;
  if (++r->fdone == r->nfrag) {
    release_regs(e, r);
    complete(e, now, r);
  } else {
    add_work(p, r);
  }
  return reply_consumed(e, x);
}

static enum pp_status on_recv(struct pp_engine *e, uint64_t now, struct rx *x,
                              const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  struct chan *c = &p->ch[x->ch];
  if (wc->byte_len < HDR) /* the rest of the header is an older message's: never read it */
    return violation(e, now, x, 0, PP_VF_BYTE_LEN, wc->byte_len, HDR, false);
  if (h->credits > p->D - c->credits)
    return violation(e, now, x, h->type, PP_VF_CREDITS, h->credits, p->D - c->credits, true);
  if (h->rcredits > p->R - c->rcredits)
    return violation(e, now, x, h->type, PP_VF_RCREDITS, h->rcredits, p->R - c->rcredits, true);
  c->credits += h->credits;
  c->rcredits += h->rcredits;
  struct req *r;
  switch (h->type) {
  case M_EAGER:
  case M_RTS:
    return on_match_msg(e, now, x, wc->byte_len - HDR);
  case M_CTS:
    return on_cts(e, now, x, h);
  case M_FIN:
    return on_fin(e, now, x, h);
  case M_ACK:
    r = reply_req(p, h->sreq, K_SEND, c->peer);
    if (!r || r->proto != PP_P2P_EAGER || !(r->flags & R_SYNC) || !r->await)
      return violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
    r->await = false;
    maybe_complete_send(e, now, r);
    return reply_consumed(e, x);
  case M_CREDIT:
    return post_rx(e, x);
  default:
    return violation(e, now, x, h->type, PP_VF_TYPE, h->type, M_CREDIT, true);
  }
}

static enum pp_status on_send_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  uint32_t kind = WR_KIND(wc->wr_id), idx = WR_IDX(wc->wr_id);
  if (kind == W_TX) {
    if (idx >= p->big.n + p->small.n)
      return PP_INVALID;
    struct tx x = p->tx[idx];
    struct chan *c = &p->ch[x.ch];
    c->sq_used -= x.nwr;
    tx_free(p, idx);
    struct req *r = x.req ? req_of(p, x.req) : NULL;
    if (wc->status != PP_WC_SUCCESS) {
      fail_channel(e, now, x.ch, (uint8_t)wc->status);
      return PP_OK;
    }
    if (!r || r->kind != K_SEND || r->state != RS_ACTIVE)
      return PP_OK;
    r->wrs--;
    if (x.type == M_FIN && x.slot != 0xff && r->rce[x.slot])
      put_rce(p, r, x.slot);
    if (x.type == M_FIN && r->fnext == r->nfrag && r->fq_n == 0)
      r->await = false;
    maybe_complete_send(e, now, r);
    return PP_OK;
  }
  if (idx >= p->prm.max_requests)
    return PP_INVALID;
  struct req *r = &p->req[idx];
  bool mine = r->kind != K_FREE && r->gen == WR_GEN(wc->wr_id) && r->state == RS_ACTIVE;
  if (kind == W_READ) {
    if (!mine) /* the request failed with its peer while its READ was in flight: stale */
      return PP_OK;
    p->ch[r->ch].sq_used--;
    if (wc->status != PP_WC_SUCCESS) {
      fail_channel(e, now, r->ch, (uint8_t)wc->status);
      return PP_OK;
    }
    r->wrs--;
    put_rce(p, r, 0);
    struct hdr f = {.type = M_FIN, .flags = F_RGET, .sreq = r->peer_req};
    complete(e, now, r);
    return send_reply(e, r->ch, &f, 0, 0, 1);
  }
  if (kind == W_WRITE) { /* errors, and the WRITEs that took a send queue's last slot */
    if (!mine)
      return PP_OK; /* the request failed with its peer meanwhile */
    if (wc->status != PP_WC_SUCCESS) {
      fail_channel(e, now, r->ch, (uint8_t)wc->status);
      return PP_OK;
    }
    p->ch[r->ch].sq_used--;
    r->wrs--;
    maybe_complete_send(e, now, r);
    return PP_OK;
  }
  return PP_INVALID;
}

/* ------------------------------------------------------------------ pp_proto_ops */

static enum pp_status p2p_create(struct pp_engine *e)
{
  struct p2p *p = calloc(1, sizeof(*p));
  if (!p)
    return PP_NOMEM;
  e->ps = p;
  pp_p2p_params_resolve(&e->cfg, &p->prm);
  const struct pp_p2p_params *m = &p->prm;
  p->D = m->credits;
  p->T = m->credit_threshold;
  p->R = m->reply_slots;
  p->TR = (p->R + 1) / 2;
  p->C = 2 + (p->D - 1) / p->T + (p->R - 1) / p->TR;
  p->P = m->pipeline;
  struct pp_prng g;
  pp_prng_seed(&g, (e->cfg.seed ^ 0x70327032u) * 0x9e3779b97f4a7c15ull + e->cfg.rank);
  p->nonce = pp_prng_next(&g) | 1ull << 31; /* bit 31: no handle is PP_REQ_NULL */
  p->gseq = pp_prng_next(&g);
  p->nrx = p->D + p->R + p->C;
  p->bsize = (HDR + m->eager_limit + 63) & ~63u;
  p->npeer = e->npeers;
  p->nch = p->npeer * m->channels;
  p->ntotal_rx = p->nch * p->nrx;
  p->peer_of = malloc(e->cfg.nranks * sizeof(*p->peer_of));
  p->ch = calloc(p->nch ? p->nch : 1, sizeof(*p->ch));
  p->rx = calloc(p->ntotal_rx ? p->ntotal_rx : 1, sizeof(*p->rx));
  p->rxbuf = calloc(p->ntotal_rx ? p->ntotal_rx : 1, p->bsize);
  p->big = (struct txpool){.first = 0, .n = m->send_buffers, .size = p->bsize};
  /* replies queue per request (at most `pipeline` CTS or FIN, and an ACK) and per channel */
  p->small = (struct txpool){.first = m->send_buffers,
                             .n = p->nch * (p->nrx + 4) + m->max_requests * (p->P + 1) + 1,
                             .size = HDR};
  p->tx = calloc(p->big.n + p->small.n, sizeof(*p->tx));
  p->big.buf = calloc(p->big.n, p->bsize);
  p->small.buf = calloc(p->small.n, HDR);
  p->req = calloc(m->max_requests, sizeof(*p->req));
  p->rec_cap = m->record;
  p->rec = calloc(p->rec_cap ? p->rec_cap : 1, sizeof(*p->rec));
  if (!p->peer_of || !p->ch || !p->rx || !p->rxbuf || !p->tx || !p->big.buf || !p->small.buf ||
      !p->req || !p->rec)
    return PP_NOMEM;
  for (uint32_t i = 0; i < e->cfg.nranks; i++)
    p->peer_of[i] = -1;
  for (uint32_t i = m->max_requests; i-- > 0;) {
    p->req[i].next = p->freereq;
    p->freereq = &p->req[i];
  }
  p->big.free = p->small.free = NO_TX;
  for (uint32_t t = p->big.n + p->small.n; t-- > 0;)
    tx_free(p, t);
  enum pp_status s = pp_match_init(&p->match, m->max_requests, p->ntotal_rx);
  if (s != PP_OK)
    return s;
  p->match_ok = true;
  p->match.bug_exact_first = PP_BUG(&e->cfg, WILDCARD_ORDER);
  s = pp_rcache_init(&p->rc, e->ops, e->nic, m->rcache_entries, m->rcache_bytes,
                     PP_ACCESS_LOCAL_WRITE);
  if (s != PP_OK)
    return s;
  p->rc_ok = true;
  if ((s = pp_engine_reg(e, p->rxbuf, (size_t)p->ntotal_rx * p->bsize, PP_ACCESS_LOCAL_WRITE,
                         &p->rxmr)) != PP_OK ||
      (s = pp_engine_reg(e, p->big.buf, (size_t)p->big.n * p->bsize, PP_ACCESS_LOCAL_WRITE,
                         &p->big.mr)) != PP_OK ||
      (s = pp_engine_reg(e, p->small.buf, (size_t)p->small.n * HDR, PP_ACCESS_LOCAL_WRITE,
                         &p->small.mr)) != PP_OK)
    return s;
  for (uint32_t i = 0; i < p->npeer; i++) {
    struct peer *pe = &p->peer[i];
    pe->rank = e->peers[i];
    pe->ch0 = i * m->channels;
    p->peer_of[pe->rank] = (int32_t)i;
    for (uint32_t k = 0; k < m->channels; k++) {
      uint32_t ci = pe->ch0 + k;
      struct chan *c = &p->ch[ci];
      *c = (struct chan){.peer = i, .rx0 = ci * p->nrx, .credits = p->D, .rcredits = p->R,
                         .cq_head = NO_TX, .cq_tail = NO_TX};
      s = pp_engine_qp_open(e, pe->rank, 0, e->cfg.qp.sq_depth, p->nrx, &c->qpn, &c->psn);
      for (uint32_t j = 0; s == PP_OK && j < p->nrx; j++) {
        p->rx[c->rx0 + j].ch = ci;
        s = post_rx(e, &p->rx[c->rx0 + j]);
      }
      if (s != PP_OK)
        return s;
    }
  }
  return PP_OK;
}

static void p2p_destroy(struct pp_engine *e)
{
  struct p2p *p = e->ps;
  if (!p)
    return;
  for (uint32_t i = 0; p->req && i < p->prm.max_requests; i++)
    if (p->req[i].kind != K_FREE)
      release_regs(e, &p->req[i]);
  for (uint32_t i = 0; p->ch && i < p->nch; i++)
    if (p->ch[i].qpn)
      e->ops->destroy_qp(e->nic, p->ch[i].qpn);
  if (p->rxmr.lkey)
    e->ops->dereg_mr(e->nic, &p->rxmr);
  if (p->big.mr.lkey)
    e->ops->dereg_mr(e->nic, &p->big.mr);
  if (p->small.mr.lkey)
    e->ops->dereg_mr(e->nic, &p->small.mr);
  if (p->rc_ok)
    pp_rcache_fini(&p->rc);
  if (p->match_ok)
    pp_match_fini(&p->match);
  free(p->peer_of);
  free(p->ch);
  free(p->rx);
  free(p->rxbuf);
  free(p->tx);
  free(p->big.buf);
  free(p->small.buf);
  free(p->req);
  free(p->rec);
  free(p);
  e->ps = NULL;
}

static int peer_idx(const struct p2p *p, const struct pp_engine *e, uint32_t rank)
{
  return rank < e->cfg.nranks ? p->peer_of[rank] : -1;
}

static bool p2p_local_info(const struct pp_engine *e, uint32_t rank, struct pp_conn_info *out)
{
  const struct p2p *p = P2P(e);
  int i = peer_idx(p, e, rank);
  if (i < 0)
    return false;
  *out = (struct pp_conn_info){.nchannels = p->prm.channels};
  for (uint32_t k = 0; k < p->prm.channels; k++) {
    out->qp_num[k] = p->ch[p->peer[i].ch0 + k].qpn;
    out->psn[k] = p->ch[p->peer[i].ch0 + k].psn;
  }
  return true;
}

static enum pp_status p2p_connect(struct pp_engine *e, uint64_t now, uint32_t rank,
                                  const struct pp_conn_info *remote)
{
  (void)now;
  struct p2p *p = P2P(e);
  int i = peer_idx(p, e, rank);
  if (i < 0)
    return PP_NOTFOUND;
  if (remote->nchannels != p->prm.channels)
    return PP_INVALID;
  for (uint32_t k = 0; k < p->prm.channels; k++) {
    const struct chan *c = &p->ch[p->peer[i].ch0 + k];
    enum pp_status s =
        pp_engine_qp_connect(e, c->qpn, c->psn, remote->qp_num[k], remote->psn[k]);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static enum pp_status finish(struct pp_engine *e, uint64_t now, enum pp_status s)
{
  struct p2p *p = P2P(e);
  if (s == PP_OK)
    s = progress(e);
  if (--p->depth == 0) {
    enum pp_status f = flush_done(e, now);
    if (s == PP_OK)
      s = f;
    if (s == PP_OK)
      s = progress(e); /* the workload may have started new work from its callbacks */
  }
  return s;
}

static enum pp_status p2p_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  p->depth++;
  p->now = now;
  enum pp_status s;
  if (WR_KIND(wc->wr_id) == W_RECV) {
    uint32_t i = WR_IDX(wc->wr_id);
    if (i >= p->ntotal_rx || p->rx[i].state != RX_POSTED) {
      s = PP_INVALID;
    } else if (wc->status != PP_WC_SUCCESS) {
      p->rx[i].state = RX_HELD; /* flushed: never re-posted */
      fail_channel(e, now, p->rx[i].ch, (uint8_t)wc->status);
      s = PP_OK;
    } else {
      s = on_recv(e, now, &p->rx[i], wc);
    }
  } else {
    s = on_send_wc(e, now, wc);
  }
  return finish(e, now, s);
}

static enum pp_status p2p_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct p2p *p = P2P(e);
  if (arg != FLUSH_TIMER)
    return PP_INVALID;
  p->flush_armed = false;
  p->depth++;
  p->now = now;
  return finish(e, now, PP_OK);
}

static bool p2p_quiet(const struct pp_engine *e)
{
  const struct p2p *p = P2P(e);
  if (p->npending || p->nactive || p->work || p->done_head)
    return false;
  for (uint32_t i = 0; i < p->nch; i++) /* a failed channel's work requests are flushed */
    if (!p->ch[i].failed && (p->ch[i].sq_used || p->ch[i].cq_head != NO_TX))
      return false;
  return true;
}

/* pp_proto_ops send/recv: a pp_msg becomes an auto-freed request on context 0. */
static enum pp_status p2p_send(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  pp_req r;
  if (m->tag >= PP_ANY_TAG)
    return PP_INVALID;
  enum pp_status s =
      pp_p2p_isend(e, now, m->buf, m->len, m->peer, (uint32_t)m->tag, 0, m->cookie, &r);
  if (s == PP_OK)
    req_of(P2P(e), r)->flags |= R_AUTO;
  return s;
}

static enum pp_status p2p_recv(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  pp_req r;
  if (m->tag >= PP_ANY_TAG)
    return PP_INVALID;
  enum pp_status s =
      pp_p2p_irecv(e, now, m->buf, m->len, m->peer, (uint32_t)m->tag, 0, m->cookie, &r);
  if (s == PP_OK)
    req_of(P2P(e), r)->flags |= R_AUTO;
  return s;
}

/* ------------------------------------------------------------------ hang reports */

static const char *src_name(uint32_t rank, char *buf, size_t len)
{
  if (rank == PP_ANY_SOURCE)
    return "ANY_SOURCE";
  snprintf(buf, len, "rank %u", rank);
  return buf;
}

/* The fewest data credits any channel to peer pi holds, and its reply credits. */
static void peer_credits(const struct p2p *p, uint32_t pi, uint32_t *credits, uint32_t *rcredits,
                         uint32_t *sq_used)
{
  const struct peer *pe = &p->peer[pi];
  *credits = *rcredits = *sq_used = UINT32_MAX;
  for (uint32_t k = 0; k < p->prm.channels; k++) {
    const struct chan *c = &p->ch[pe->ch0 + k];
    *credits = c->credits < *credits ? c->credits : *credits;
    *rcredits = c->rcredits < *rcredits ? c->rcredits : *rcredits;
    *sq_used = c->sq_used < *sq_used ? c->sq_used : *sq_used;
  }
}

static void pending_send(const struct pp_engine *e, const struct p2p *p, const struct req *r,
                         struct pp_wait *out, size_t max, size_t *n)
{
  const char *pn = pp_p2p_proto_name((enum pp_p2p_proto)r->proto);
  if (r->state == RS_PENDING) {
    int32_t pi = p->peer_of[r->rank];
    uint32_t cr = 0, rcr = 0, sq = 0;
    if (pi >= 0)
      peer_credits(p, (uint32_t)pi, &cr, &rcr, &sq);
    if (cr == 0)
      pp_wait_add(out, max, n, PP_WAIT_CREDITS, r->rank, r->tag, 0,
                  "%s send tag %u (%u bytes) to rank %u waits for credits (0 of %u left: the "
                  "receiver has not consumed its messages)", pn, r->tag, r->len, r->rank, p->D);
    else
      pp_wait_add(out, max, n, PP_WAIT_CREDITS, r->rank, r->tag, 0,
                  "%s send tag %u (%u bytes) to rank %u waits to start (%u credits, send queue "
                  "%u of %u used, or no send buffer)", pn, r->tag, r->len, r->rank, cr, sq,
                  e->cfg.qp.sq_depth);
    return;
  }
  if (r->proto == PP_P2P_RNDV_PUT && r->nfrag == 0 && r->fq_n == 0)
    pp_wait_add(out, max, n, PP_WAIT_CTS, r->rank, r->tag, 0,
                "rndv send tag %u (%u bytes) to rank %u waits for CTS (the receiver has not "
                "matched it)", r->tag, r->len, r->rank);
  else if (r->proto == PP_P2P_RNDV_PUT && r->await)
    pp_wait_add(out, max, n, PP_WAIT_CTS, r->rank, r->tag, 0,
                "rndv send tag %u to rank %u waits for the next CTS (%u of %u fragments)", r->tag,
                r->rank, r->fnext, r->nfrag);
  else if (r->proto == PP_P2P_RNDV_GET && r->await)
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->rank, r->tag, 0,
                "rndv (RGET) send tag %u (%u bytes) to rank %u waits for the receiver to match "
                "and read it (FIN)", r->tag, r->len, r->rank);
  else if (r->await)
    pp_wait_add(out, max, n, PP_WAIT_ACK, r->rank, r->tag, 0,
                "synchronous send tag %u to rank %u waits for its ACK (the receiver has not "
                "matched it)", r->tag, r->rank);
  else
    pp_wait_add(out, max, n, PP_WAIT_SEND_WC, r->rank, r->tag, 0,
                "%s send tag %u to rank %u waits for %u send completions", pn, r->tag, r->rank,
                r->wrs);
}

static void pending_recv(const struct p2p *p, const struct req *r, struct pp_wait *out,
                         size_t max, size_t *n)
{
  char b[32];
  if (r->flags & R_POSTED) {
    char t[32];
    if (r->tag == PP_ANY_TAG)
      snprintf(t, sizeof(t), "ANY_TAG");
    else
      snprintf(t, sizeof(t), "tag %u", r->tag);
    pp_wait_add(out, max, n, PP_WAIT_UNMATCHED, r->rank == PP_ANY_SOURCE ? PP_WAIT_NOPEER : r->rank,
                r->tag, 0, "receive (%s, %s) never matched", src_name(r->rank, b, sizeof(b)), t);
    return;
  }
  (void)p;
  if (r->proto == PP_P2P_RNDV_GET)
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->src, r->mtag, 0,
                "rndv (RGET) receive from rank %u tag %u waits for its READ of %u bytes", r->src,
                r->mtag, r->got);
  else
    pp_wait_add(out, max, n, PP_WAIT_FIN, r->src, r->mtag, 0,
                "rndv receive from rank %u tag %u waits for the sender's data and FIN (%u of %u "
                "fragments)", r->src, r->mtag, r->fdone, r->nfrag);
}

static bool in_ooo(const struct p2p *p, const struct rx *x)
{
  const struct peer *pe = &p->peer[p->ch[x->ch].peer];
  for (const struct rx *o = pe->ooo; o; o = o->ooo_next)
    if (o == x)
      return true;
  return false;
}

static void pending_held(const struct p2p *p, struct pp_wait *out, size_t max, size_t *n)
{
  for (uint32_t i = 0; i < p->ntotal_rx; i++) {
    const struct rx *x = &p->rx[i];
    if (x->state != RX_HELD)
      continue;
    const struct hdr *h = rx_hdr(p, x);
    uint32_t rank = p->peer[p->ch[x->ch].peer].rank;
    if (in_ooo(p, x))
      pp_wait_add(out, max, n, PP_WAIT_MESSAGE, rank, h->tag, 0,
                  "message seq %u from rank %u held until an earlier one arrives", h->seq, rank);
    else
      pp_wait_add(out, max, n, PP_WAIT_UNEXPECTED, rank, h->tag, 0,
                  "%s from rank %u tag %u (%u bytes) arrived and no receive matched it",
                  h->type == M_RTS ? "rndv RTS" : "eager message", rank, h->tag, h->len);
  }
}

static size_t p2p_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct p2p *p = P2P(e);
  size_t n = 0;
  if (!p || !p->req)
    return 0;
  for (uint32_t i = 0; i < p->prm.max_requests; i++) {
    const struct req *r = &p->req[i];
    if (r->kind == K_SEND && r->state != RS_DONE && r->state)
      pending_send(e, p, r, out, max, &n);
    else if (r->kind == K_RECV && r->state != RS_DONE)
      pending_recv(p, r, out, max, &n);
  }
  pending_held(p, out, max, &n);
  for (uint32_t i = 0; i < p->nch; i++) {
    const struct chan *c = &p->ch[i];
    if (!c->failed && c->cq_head != NO_TX)
      pp_wait_add(out, max, &n, PP_WAIT_CREDITS, p->peer[c->peer].rank, PP_WAIT_NOTAG, 0,
                  "replies (CTS, FIN, ACK) to rank %u wait for reply credits (%u left) or "
                  "send-queue room (%u used)", p->peer[c->peer].rank, c->rcredits, c->sq_used);
  }
  return n;
}

const struct pp_proto_ops pp_p2p_eager_ops = {
    .name = "eager",
    .create = p2p_create,
    .destroy = p2p_destroy,
    .local_info = p2p_local_info,
    .connect = p2p_connect,
    .send = p2p_send,
    .recv = p2p_recv,
    .on_wc = p2p_on_wc,
    .on_timer = p2p_on_timer,
    .quiet = p2p_quiet,
    .pending = p2p_pending,
};

const struct pp_proto_ops pp_p2p_rndv_ops = {
    .name = "rndv",
    .create = p2p_create,
    .destroy = p2p_destroy,
    .local_info = p2p_local_info,
    .connect = p2p_connect,
    .send = p2p_send,
    .recv = p2p_recv,
    .on_wc = p2p_on_wc,
    .on_timer = p2p_on_timer,
    .quiet = p2p_quiet,
    .pending = p2p_pending,
};

/* ------------------------------------------------------------------ the API */

static struct p2p *api(const struct pp_engine *e)
{
  return e && pp_p2p_proto(e->cfg.protocol) ? e->ps : NULL;
}

/* After an API call: the work it made possible, and the completions it caused reach the
 * workload through a timer at `now` unless an event is being processed. */
static enum pp_status api_done(struct pp_engine *e, uint64_t now, enum pp_status s)
{
  struct p2p *p = P2P(e);
  if (p->depth == 0)
    p->now = now;
  if (s == PP_OK && e->started && p->depth == 0)
    s = progress(e);
  arm_flush(e, now);
  return s;
}

static enum pp_status send_common(struct pp_engine *e, uint64_t now, const void *buf,
                                  uint32_t len, uint32_t dest, uint32_t tag, uint32_t ctx,
                                  uint64_t cookie, pp_req *out, bool sync)
{
  struct p2p *p = api(e);
  if (out)
    *out = PP_REQ_NULL;
  if (!p || (!buf && len))
    return PP_INVALID;
  int pi = peer_idx(p, e, dest);
  if (pi < 0 || tag == PP_ANY_TAG || len > PP_MAX_MSG_SIZE)
    return PP_INVALID;
  if (!e->started)
    return PP_STATE;
  struct req *r = req_alloc(p);
  if (!r)
    return PP_AGAIN;
  struct peer *pe = &p->peer[pi];
  r->kind = K_SEND;
  r->state = RS_PENDING;
  r->flags = sync ? R_SYNC : 0;
  r->peer = (uint32_t)pi;
  r->rank = dest;
  r->tag = tag;
  r->ctx = ctx;
  r->buf = (uint8_t *)(uintptr_t)buf;
  r->len = len;
  r->cookie = cookie;
  r->proto = (uint8_t)msg_proto(p, len);
  r->src = dest;
  r->mtag = tag;
  r->got = r->msg_len = len;
  if (out)
    *out = handle_of(p, r);
  if (pe->failed) {
    r->err = pe->fail_err;
    r->wc = pe->fail_wc;
    complete(e, now, r);
    return api_done(e, now, PP_OK);
  }
  r->seq = pe->send_seq++;
  r->next = NULL;
  if (pe->pend_tail)
    pe->pend_tail->next = r;
  else
    pe->pend_head = r;
  pe->pend_tail = r;
  p->pend_mask |= 1ull << (pe - p->peer);
  p->npending++;
  return api_done(e, now, PP_OK);
}

enum pp_status pp_p2p_isend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                            uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *req)
{
  return send_common(e, now, buf, len, dest, tag, ctx, cookie, req, false);
}

enum pp_status pp_p2p_issend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                             uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                             pp_req *req)
{
  return send_common(e, now, buf, len, dest, tag, ctx, cookie, req, true);
}

enum pp_status pp_p2p_irecv(struct pp_engine *e, uint64_t now, void *buf, uint32_t len,
                            uint32_t source, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *out)
{
  struct p2p *p = api(e);
  if (out)
    *out = PP_REQ_NULL;
  if (!p || (!buf && len) || len > PP_MAX_MSG_SIZE)
    return PP_INVALID;
  if (source != PP_ANY_SOURCE && peer_idx(p, e, source) < 0)
    return PP_INVALID;
  struct req *r = req_alloc(p);
  if (!r)
    return PP_AGAIN;
  r->kind = K_RECV;
  r->state = RS_PENDING;
  r->rank = source;
  r->tag = tag;
  r->ctx = ctx;
  r->buf = buf;
  r->len = len;
  r->cookie = cookie;
  if (out)
    *out = handle_of(p, r);
  if (source != PP_ANY_SOURCE && p->peer[peer_idx(p, e, source)].failed) {
    r->err = p->peer[peer_idx(p, e, source)].fail_err;
    r->wc = p->peer[peer_idx(p, e, source)].fail_wc;
    complete(e, now, r);
    return api_done(e, now, PP_OK);
  }
  struct pp_mentry *m = pp_match_find_unexpected(&p->match, ctx, source, tag);
  enum pp_status s;
  if (m) {
    struct rx *x = (struct rx *)(void *)m;
    pp_match_remove_unexpected(&p->match, m);
    p->nheld--;
    p->depth++; /* start_recv may complete it: the workload hears of it after this call */
    s = start_recv(e, now, r, x);
    p->depth--;
  } else {
    s = pp_match_post(&p->match, &r->me, ctx, source, tag);
    if (s == PP_OK)
      r->flags |= R_POSTED;
    else
      req_free(p, r);
  }
  return api_done(e, now, s);
}

static void fill_status(const struct p2p *p, const struct req *r, struct pp_p2p_status *st)
{
  (void)p;
  *st = (struct pp_p2p_status){
      .source = r->src,
      .tag = r->mtag,
      .ctx = r->ctx,
      .len = r->got,
      .msg_len = r->msg_len,
      .error = r->err,
      .proto = r->proto,
      .wc_status = r->wc,
      .done_ns = r->done_ns,
  };
  if (r->kind == K_RECV && r->err != PP_P2P_E_OK && r->err != PP_P2P_E_TRUNCATED) {
    st->source = r->rank;
    st->tag = r->tag;
    st->len = st->msg_len = 0;
  }
}

bool pp_p2p_test(struct pp_engine *e, pp_req *req, struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  if (*req == PP_REQ_NULL) {
    if (st)
      *st = (struct pp_p2p_status){0};
    return true;
  }
  struct req *r = p ? req_of(p, *req) : NULL;
  if (!r || r->state != RS_DONE || (r->flags & R_AUTO))
    return false;
  if (st)
    fill_status(p, r, st);
  *req = PP_REQ_NULL;
  if (r->flags & R_DONEQ) { /* still on the done list: freed when the list gets there */
    r->flags |= R_RELEASED;
    r->gen = (r->gen + 1) & 0xfffffff;
  } else {
    req_free(p, r);
  }
  return true;
}

bool pp_p2p_testall(struct pp_engine *e, uint32_t n, pp_req *reqs, struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  for (uint32_t i = 0; i < n; i++) {
    if (reqs[i] == PP_REQ_NULL)
      continue;
    const struct req *r = p ? req_of(p, reqs[i]) : NULL;
    if (!r || r->state != RS_DONE || (r->flags & R_AUTO))
      return false;
  }
  for (uint32_t i = 0; i < n; i++)
    pp_p2p_test(e, &reqs[i], st ? &st[i] : NULL);
  return true;
}

bool pp_p2p_iprobe(struct pp_engine *e, uint32_t source, uint32_t tag, uint32_t ctx,
                   struct pp_p2p_status *st)
{
  struct p2p *p = api(e);
  if (!p)
    return false;
  const struct pp_mentry *m = pp_match_find_unexpected(&p->match, ctx, source, tag);
  if (!m)
    return false;
  if (st) {
    const struct rx *x = (const struct rx *)(const void *)m;
    const struct hdr *h = rx_hdr(p, x);
    *st = (struct pp_p2p_status){
        .source = m->src,
        .tag = h->tag,
        .ctx = h->ctx,
        .len = h->len,
        .msg_len = h->len,
        .proto = (uint8_t)(h->type == M_EAGER          ? PP_P2P_EAGER
                           : (h->flags & F_RGET) != 0 ? PP_P2P_RNDV_GET
                                                      : PP_P2P_RNDV_PUT),
    };
  }
  return true;
}

enum pp_status pp_p2p_cancel(struct pp_engine *e, uint64_t now, pp_req req)
{
  struct p2p *p = api(e);
  struct req *r = p ? req_of(p, req) : NULL;
  if (!r)
    return PP_NOTFOUND;
  if (r->kind != K_RECV)
    return PP_UNSUPPORTED;
  if (!(r->flags & R_POSTED))
    return PP_STATE;
  pp_match_remove_posted(&p->match, &r->me);
  r->flags &= ~R_POSTED;
  r->err = PP_P2P_E_CANCELLED;
  complete(e, now, r);
  return api_done(e, now, PP_OK);
}

uint32_t pp_p2p_mem_free(struct pp_engine *e, const void *buf, size_t len)
{
  struct p2p *p = api(e);
  return p ? pp_rcache_invalidate(&p->rc, buf, len) : 0;
}

void pp_p2p_stats(const struct pp_engine *e, struct pp_p2p_stats *out)
{
  const struct p2p *p = api(e);
  *out = p ? p->st : (struct pp_p2p_stats){0};
  if (p)
    out->rcache = p->rc.st, out->rcache.entries = p->rc.n;
}

size_t pp_p2p_receives(const struct pp_engine *e, const struct pp_recv_record **out,
                       uint64_t *dropped)
{
  const struct p2p *p = api(e);
  *out = p ? p->rec : NULL;
  if (dropped)
    *dropped = p ? p->rec_dropped : 0;
  return p ? p->nrec : 0;
}

size_t pp_p2p_receives_copy(const struct pp_engine *e, struct pp_recv_record **out,
                            uint64_t *dropped)
{
  const struct pp_recv_record *rec;
  size_t n = pp_p2p_receives(e, &rec, dropped);
  *out = n ? malloc(n * sizeof(*rec)) : NULL;
  if (!*out)
    return 0;
  memcpy(*out, rec, n * sizeof(*rec));
  return n;
}

/* ---------------------------------------------------------------- wire messages, for tools */

#define PP_X(id, value, name) _Static_assert(M_##id == (value), "PP_P2P_MSG_LIST is the wire's");
PP_P2P_MSG_LIST(PP_X)
#undef PP_X

static const char *const msg_names[] = {
#define PP_X(id, value, name) [value] = name,
    PP_P2P_MSG_LIST(PP_X)
#undef PP_X
};

const char *pp_p2p_msg_name(enum pp_p2p_msg m)
{
  return pp_name_of(msg_names, PP_NAMES_COUNT(msg_names), m);
}

bool pp_p2p_msg_describe(const void *head, size_t len, struct pp_p2p_msg_info *out)
{
  struct hdr h;
  if (len < sizeof(h))
    return false;
  memcpy(&h, head, sizeof(h));
  if (h.type < M_EAGER || h.type > M_CREDIT)
    return false;
  *out = (struct pp_p2p_msg_info){.type = (enum pp_p2p_msg)h.type,
                                  .credits = h.credits,
                                  .rcredits = h.rcredits,
                                  .seq = h.seq,
                                  .tag = h.tag,
                                  .len = h.len};
  return true;
}
