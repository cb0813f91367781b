/*
 * The p2p protocols "eager" and "rndv": tag matching, eager with credit flow control, rendezvous
 * RGET and pipelined RPUT. See prepost/p2p.h for the semantics; this comment is about how.
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
 * With p2p.srq (srq.c) the D data credits are not per-QP buffers: EAGER and RTS go on a data QP
 * per channel whose receives come from one shared receive queue per rank, and the credits are
 * lent out of its pool (a channel keeps one, the receiver lends up to D as the sender's headers
 * say it needs them and takes them back when it needs nothing more); each channel's own QP
 * keeps the R + C buffers, of HDR bytes, for replies and CREDIT messages.
 *
 * Matching messages (EAGER, RTS) carry a per-peer sequence number; one that arrives before its
 * predecessor (another channel was faster) is held in its buffer until the gap closes, so the
 * matching queues see every peer's messages in send order. Unexpected messages also stay in
 * their buffers; the credits they hold are what bounds unexpected memory.
 *
 * Completions reach the workload at the end of the event that caused them (a done list), never
 * from inside an API call the workload is making.
 *
 * Reply first: the FIN an RGET receiver owes once its READ completed only releases the
 * sender's buffer; in a ping-pong the application answers that very message, and its RTS
 * queued behind the FIN on the same send queue waits a whole NIC scheduling round (rxe: 85-130
 * us). So p2p_read_done does not queue the FIN: it holds it on the deferred list (defer_head,
 * tx slots linked by tx.next) and the FIN joins its channel's control queue, unchanged, at the
 * first of: the end of the application's next send (send_common: its EAGER / RTS was posted or
 * parked, then the FINs go), the flush timer (FLUSH_TIMER at the same `now`, armed with the
 * deferral: the application may never send), or the start of the next event (p2p_on_wc,
 * p2p_on_timer, p2p_on_async). Why nothing breaks:
 *  - a FIN still follows its READ's completion (it is created there), and is never lost: it
 *    is bounded by the timer armed when it was deferred (no timer to spare: it goes at once);
 *    a FIN of a failed channel is dropped, as the control queue drops it (close_channel);
 *  - it needs what it needed before: a small-pool tx slot taken at deferral (the pool covers
 *    every reply that can be owed), then a reply credit and a send-queue slot in the control
 *    queue; the reply that overtook it takes a data credit, never a reply credit, and a
 *    send-queue slot the FIN then waits for in the control queue (ctrl_due), as any reply does;
 *  - replies are consumed the moment they arrive, in any order: a FIN overtaken by the
 *    application's next EAGER / RTS, or by another reply of another request, names its request
 *    (sreq) and nothing else depends on the order between them. The only reply whose order
 *    matters, an RPUT FIN behind its WRITE, is never deferred.
 *  - p2p_quiet is false while a FIN is deferred, so a run does not end with one held back.
 *
 * Carried: the next RTS the application sends on that channel carries the deferred FIN in its
 * header (F_FIN, rreq = the FIN's sreq) instead of it following as a second WQE, which under
 * rxe reached the peer about one hop after the first and then delayed the next hop's first WQE
 * (backends/verbs/README.md, "Where the latency goes"). The channel remembers its latest
 * deferred FIN (chan.defer_fin); the RTS's header takes it when written (send_header) and only
 * once the RTS was posted is the FIN's tx slot marked carried (type 0): the flush frees it
 * unsent. A refused RTS leaves the FIN deferred, to go as before. At the peer the RTS's FIN is
 * taken first, as a FIN is (p2p_fin_carried: the same checks; a bad one fails the peer), then
 * the RTS, in or out of order. It takes no reply credit at either end: no receive of its own.
 * Only RTS carry one (an EAGER never does: the eager path tests nothing more).
 *
 * The eager fast path is the general one specialised, not a second implementation: the
 * sender's start (credits.c: start_first and the helpers it composes) and the receiver's
 * delivery (eager.c: deliver, start_recv, eager_recv) are always inline and take a `fast` flag
 * that is a compile-time constant at each call site: true for an EAGER message (without srq on
 * the sending side), so the compiler drops the rendezvous, RGET-registration and srq branches
 * and the call boundaries between the layers. The flag states only what those branches test
 * (the message's type, p->srq), so both specialisations make the same state changes in the
 * same order: traces are identical either way.
 *
 * Selective signalling of EAGER SENDs (credits.c: eager_signal, post_tx_hdr; eager.c: tx_done).
 * An EAGER of the fast path (no srq, one channel) is posted unsignalled when the next send in
 * its peer's line is an EAGER that start_sends starts right after it, on the same QP, for
 * certain (a credit, a send-queue slot and a big-pool send buffer are there for it), and fewer
 * than SIG_EVERY - 1 unsignalled ones precede it: in a burst of starts (credits came back for
 * parked sends) only the last one and every SIG_EVERY-th make a completion. Every other SEND
 * (RTS, replies, CREDIT, an EAGER alone or last in its burst, any with srq) is signalled.
 *  - Slots: the unsignalled EAGERs of a run (p2p.urun) are posted back to back and the next
 *    post on their QP, a signalled EAGER, takes the run over (tx.run, tx.rnext; its nwr counts
 *    their send-queue slots). RC completes a send queue in order, so its completion, success or
 *    error, is theirs too: it frees their send buffers and their send-queue slots (sq_used drops
 *    only there, as the NIC frees its slots only at a completion that covers them: no
 *    send-queue overflow). A run is open only inside start_sends, between two posts: if the NIC
 *    refuses the post that was to close it, the run's SENDs free their own slots (tx.held
 *    cleared) and the peer fails as for a refused control message, so close_channel's ERROR
 *    flushes the QP, which completes every WR left with an error. So no slot waits for ever,
 *    p2p_quiet (sq_used) still means nothing is outstanding, and held slots are bounded
 *    (SIG_EVERY - 1 per run). An unsignalled SEND that fails or is flushed makes a completion
 *    with its wr_id (ibverbs; simnic.c complete_send): it fails its channel as any failed
 *    completion does, and its slot is freed by the signalled one after it, which always
 *    completes (flushed at the latest) after it. Credits are untouched: RNR stays impossible.
 *  - Requests: an unsignalled EAGER's request completes when the SEND is posted (the NIC took
 *    the WR), since no completion will name it: its payload is in the send buffer already
 *    (send_header copied it), so the application's buffer is free, which is all a
 *    standard-mode send's completion says (MPI 3.1 section 3.4: a send may complete once the
 *    message is buffered; completion says nothing of its delivery; UCX's and MPICH's buffered
 *    eager sends complete so). A SEND the NIC refuses to post still fails its request
 *    (send_refused). A later failure of that SEND (an error or flush completion) cannot be
 *    reported to its request, which is complete and may be reused: it fails the channel and
 *    the peer as any failed completion does (every request still involving the peer fails with
 *    PP_P2P_E_FAILED); the message itself is reported delivered only by a receive that got it
 *    (RC places a SEND whole or not at all), as when a completed send's peer dies later. A
 *    synchronous one still completes at its ACK only (await), so MPI_Ssend's guarantee stands.
 *    A signalled EAGER's request completes at its completion, as before (tests/test_p2p.c:
 *    a_failed_unsignalled_burst_fails_the_peer_and_gives_every_buffer_back).
 *
 * The module's files (one concern each; this header is private to them):
 *   p2p.c      the pp_proto_ops entry points (create/destroy, connect, timers, async events;
 *              completions are eager.c's) and the public API (prepost/p2p.h)
 *   req.c      the request table and its handles, the request state machine, the work list,
 *              completion and the done list
 *   credits.c  posting receive buffers and sends, credit accounting, the per-channel control
 *              queue, and the sends parked for credits
 *   eager.c    matching messages (EAGER, RTS) in per-peer sequence: to a receive or unexpected;
 *              and the completions (p2p_on_wc: a SEND's, a receive's with its wire checks of
 *              credits, lengths, flags and sequence window), so that an EAGER message's event,
 *              from the completion to the workload's callback, is one function
 *   rndv.c     the rendezvous transfers: RGET (RTS, READ, FIN) and pipelined RPUT (CTS, WRITE,
 *              FIN)
 *   regs.c     registrations of user buffers and the line of requests waiting for one
 *   wire.c     protocol violations (untrusted peers), the rendezvous replies' checks
 *   fail.c     failures of channels and peers
 *   pending.c  what pending operations wait for (hang reports)
 *   config.c   parameters, their checks, names
 *   match.c    the matching queues (match.h; match_impl.h: their internals, for the inline post
 *              and arrival of p2p.c and eager.c); rcache.c the registration cache (prepost/rcache.h)
 *   srq.c      p2p.srq: the shared receive queue, its pool, and credits lent from it
 */
#ifndef PP_P2P_IMPL_H
#define PP_P2P_IMPL_H

#include <assert.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine/core/bugs.h"
#include "engine/core/container_of.h"
#include "engine/core/engine_impl.h"
#include "engine/proto/p2p/match.h"
#include "prepost/p2p.h"

#define HDR 64u
#define PIPE_MAX 8u
#define FLUSH_TIMER 1u
/* at most SIG_EVERY - 1 unsignalled EAGER SENDs in a row on a QP (selective signalling, below;
 * fits tx.run) */
#define SIG_EVERY 16u

enum msg_type { M_EAGER = 1, M_RTS, M_CTS, M_FIN, M_ACK, M_CREDIT };
/* F_ABORT: an RTS, CTS or FIN of a transfer given up because a buffer could not be registered
 * (PP_P2P_E_NO_MR): an RTS keeps its place in the sequence and is dropped by the receiver, a CTS
 * or FIN ends the peer's side of the transfer with the same error. */
/* F_FAILED, with F_ABORT on a FIN: the peer gave up because its NIC refused the READ (RGET) or a
 * WRITE (RPUT) of the transfer; the request fails with PP_P2P_E_FAILED rather than NO_MR. */
enum { F_SYNC = 1, F_RGET = 2, F_ABORT = 4, F_FAILED = 8, F_FIN = 16 /* RTS: carries a FIN */ };

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
  uint16_t want;    /* srq, EAGER and RTS: sends queued behind this one that the sender's credits
                       do not cover (in nfrag: the credits it had received so far, mod 2^32) */
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
  struct pp_mentry me; /* the unexpected queue (pp_container_of gets the rx back) */
  struct rx *ooo_next; /* held out of order, sorted by seq; srq: the list of dead buffers */
  uint8_t *buf;        /* HDR + eager_limit bytes (srq: HDR for a channel's own buffers) */
  uint32_t ch;
  uint32_t idx;        /* r - p->rx (set at creation: no division per re-post) */
  uint8_t state;
  bool pool;           /* srq: a buffer of the shared pool (posted to the SRQ) */
  bool over;           /* srq, bug srq-no-credits: it came without a credit */
};

#define NO_TX UINT32_MAX

struct tx {
  uint32_t next;  /* free list or control queue (before it is posted) */
  uint32_t rnext; /* a run of unsignalled SENDs (p2p.urun, then the signalled one's): the next */
  uint64_t req;   /* request handle, or 0 (an unsignalled EAGER's: its request completed) */
  uint16_t ch;
  uint16_t nwr;   /* send-queue slots its completion frees: its own, unsignalled WRITEs' and
                     its run's */
  uint8_t type;   /* the message; 0: a deferred FIN an RTS carried (freed by the flush) */
  uint8_t slot;   /* RPUT sender FIN: the registration slot it releases */
  uint8_t run;    /* signalled: the unsignalled SENDs before it whose slots it frees (rnext) */
  bool held;      /* unsignalled: its slot is freed by the signalled SEND after it */
  uint8_t pad_[8]; /* to 32 bytes: p->tx[t] is a shift (SIZE_POW2 below) */
};
_Static_assert(PP_MAX_QPS <= UINT16_MAX, "a channel index fits tx.ch");

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
  uint32_t defer_fin;        /* its latest deferred FIN, which its next RTS carries (or NO_TX) */
  bool failed;
  /* srq (srq.c): EAGER and RTS go on a second QP whose receives come from the shared pool */
  uint32_t dqpn, dpsn, dsq_used;
  uint32_t grant;  /* receiving side: credits lent to the peer (held, owed, theirs, in flight) */
  uint32_t held;   /* receiving side: its messages that hold a pool buffer and a credit */
  uint32_t need;   /* receiving side: what the peer still needs, as it last said */
  uint32_t given;  /* receiving side: credits handed back so far (mod 2^32) */
  uint32_t seen;   /* sending side: credits received so far (mod 2^32) */
  bool waiting;    /* receiving side: in the pool's line for credits */
  uint8_t pad_[32]; /* to 128 bytes: p->ch[i] is a shift (SIZE_POW2 below) */
};

struct peer {
  uint32_t rank, ch0, next_ch;
  uint32_t send_seq, recv_seq;
  struct rx *ooo;
  struct req *pend_head, *pend_tail;
  bool failed;
  uint8_t fail_wc, fail_err; /* what its requests complete with once it failed */
  uint8_t pad_[8]; /* to 64 bytes: p->peer[i] is a shift (SIZE_POW2 below) */
};
/* The arrays the eager path indexes on every message hold structs of a power-of-two size, so
 * that an index becomes an address with one shift, not a multiplication. */
#define SIZE_POW2(t) _Static_assert((sizeof(t) & (sizeof(t) - 1)) == 0, #t " is a power of two")
SIZE_POW2(struct tx);
SIZE_POW2(struct chan);
SIZE_POW2(struct peer);

enum { K_SEND = 1, K_RECV };

/* The life of a request, X(id, name). It moves only along P2P_REQ_TRANSITIONS, through
 * p2p_req_set(), which asserts that (and keeps nactive). */
#define P2P_REQ_STATE_LIST(X)                                                                      \
  X(FREE, "free")       /* on the free list; its handles are stale */                             \
  X(PENDING, "pending") /* send: queued at its peer; receive: posted, not matched yet */          \
  X(ACTIVE, "active")   /* started: its transfer runs (counted in nactive) */                     \
  X(DONE, "done")       /* complete: on the done list or waiting for pp_p2p_test */

enum req_state {
#define PP_X(id, name) RQ_##id,
  P2P_REQ_STATE_LIST(PP_X)
#undef PP_X
  RQ_COUNT
};

/* X(from, to): every transition a request may make. */
#define P2P_REQ_TRANSITIONS(X)                                                                     \
  X(FREE, PENDING)   /* isend, issend, irecv */                                                   \
  X(PENDING, ACTIVE) /* a send started (credit, channel, buffer), a receive matched */            \
  X(PENDING, DONE)   /* failed with its peer, cancelled, or a send given up (no MR) */            \
  X(PENDING, FREE)   /* a receive the posted queue refused (PP_LIMIT): never handed out */        \
  X(ACTIVE, DONE)    /* its transfer is over, or failed */                                        \
  X(DONE, FREE)      /* pp_p2p_test took it, or its automatic callback ran */

#define P2P_REQ_BIT(from, to) | 1u << (RQ_##from * RQ_COUNT + RQ_##to)
#define P2P_REQ_ALLOWED (0u P2P_REQ_TRANSITIONS(P2P_REQ_BIT))
_Static_assert(RQ_COUNT * RQ_COUNT <= 32, "the transitions fit a 32-bit mask");
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
  /* Not cleared by req_alloc, up to kind: gen and peer it sets itself, and both of its callers
   * (isend and irecv) set rank, tag, ctx, len, buf and cookie before anything reads them. */
  uint32_t gen;
  uint32_t peer;          /* peer index; UINT32_MAX before a receive matched */
  uint32_t rank, tag;     /* send: destination; receive: the pattern (with ctx, below) */
  uint32_t len;
  uint8_t *buf;
  uint64_t cookie;
  /* req_alloc clears from kind up to me: 64 bytes, a few stores (the callers set kind, and
   * ctx; state is RQ_FREE, 0, in every free request). The size of the struct is what it was
   * before this order (the run's heap addresses, which traces record, stay the same). */
  uint8_t kind, state;
  uint16_t flags;
  uint32_t wrs;           /* signalled work requests outstanding */
  /* What the workload is told (p2p_fill_status): the fields of its pp_p2p_status, in that
   * struct's order (asserted below), so the status is one 32-byte copy; await is in the
   * status's padding byte (copied with it, read by nobody). */
  union {
    struct pp_p2p_status st;
    struct {
      uint32_t src, mtag;  /* receive: the message matched (send: dest, tag) */
      uint32_t ctx;        /* send: its context; receive: the pattern's, then the message's */
      uint32_t got, msg_len;
      uint8_t err, proto, wc;
      bool await;          /* sender: waiting for the ACK / the last FIN */
      uint64_t done_ns;
    };
  };
  uint32_t seq, ch;
  uint32_t fq_n;          /* RPUT sender: CTSs in fq (0 for every other request) */
  struct req *next;
  /* Not cleared by req_alloc (req_alloc clears up to here). me: the posted-receive queue
   * (pp_container_of gets the req back), read only while R_POSTED says it is queued, and
   * pp_match_post sets every field of its link 0 (the only link a receive uses). */
  struct pp_mentry me;
  uint32_t idx; /* its slot, r - p->req (set at creation, never cleared: no division per handle) */
  uint32_t hlo; /* its handles' low half, (idx + 1) ^ p->nonce (set at creation, never cleared) */
  uint64_t handle; /* a live request's handle (req_alloc); 0 once it went stale (req_stale) */
  /* A rendezvous's, from peer_req up to regnext: not cleared by req_alloc either (an eager
   * message never uses them); p2p_rndv_clear zeroes them when a rendezvous starts (send_begin,
   * start_recv), before anything reads them. */
  uint64_t peer_req;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t nfrag, fnext, fdone, fq_head;
  uint32_t plen;          /* RPUT sender: the bytes the receiver takes (its first CTS) */
  struct req *regnext; /* the registration line (set as a request joins it) */
  /* Not cleared by req_alloc either (most requests never use them): fq is read only below fq_n, and
   * xmr and rce are empty whenever the request is free (every registration is released before
   * it completes or with it: p2p_release_regs, p2p_put_rce, p2p_drop_xmr). */
  struct frag fq[PIPE_MAX];                 /* sender: CTSs received, not written yet */
  struct pp_mr xmr[PIPE_MAX];               /* exposed to the peer for this transfer only */
  struct pp_rcache_entry *rce[PIPE_MAX * 2]; /* local registrations in use */
};
_Static_assert(offsetof(struct req, me) - offsetof(struct req, kind) == 64,
               "req_alloc's clear is 64 bytes");
#define REQ_ST_AT(f, g)                                                                            \
  _Static_assert(offsetof(struct req, f) - offsetof(struct req, st) ==                           \
                         offsetof(struct pp_p2p_status, g) &&                                  \
                     sizeof(((struct req *)0)->f) == sizeof(((struct pp_p2p_status *)0)->g), \
                 "req." #f " is its status's " #g)
REQ_ST_AT(src, source);
REQ_ST_AT(mtag, tag);
REQ_ST_AT(ctx, ctx);
REQ_ST_AT(got, len);
REQ_ST_AT(msg_len, msg_len);
REQ_ST_AT(err, error);
REQ_ST_AT(proto, proto);
REQ_ST_AT(wc, wc_status);
REQ_ST_AT(done_ns, done_ns);
_Static_assert(sizeof(struct pp_p2p_status) == 32 && offsetof(struct req, await) -
                   offsetof(struct req, st) == offsetof(struct pp_p2p_status, wc_status) + 1,
               "await is in the status's padding");
#undef REQ_ST_AT

struct txpool {
  uint8_t *buf;
  struct pp_mr mr;
  uint32_t first, n, size, free;
};

struct p2p_srq; /* srq.c */

struct p2p {
  struct pp_p2p_params prm;
  struct p2p_srq *srq; /* p2p.srq: the shared receive queue and its pool; NULL without */
  /* Request handles go on the wire (a peer names its request and ours in replies). What keeps
   * a peer from naming a request that is not its own is the binding: a reply is taken only for
   * a live request of the peer it came from (p2p_reply_req), and a handle of a slot's earlier
   * request is stale (the generation). Each slot starts at its own generation and counts up, so
   * handles differ from slot to slot and engine to engine and tell nothing of the slot index
   * (its half of the handle is XORed with this engine's nonce); both from a PRNG seeded by the
   * configuration: deterministic per seed, no unseeded randomness. A peer that saw one handle
   * of a slot can tell the next one of that slot, which gives it nothing: a request of another
   * peer refuses its replies, and one of its own it could answer anyway once announced. */
  uint32_t nonce;     /* bit 31 set: no handle is PP_REQ_NULL */
  uint64_t gen_seed; /* the slots' first generations (p2p_lists) */
  uint32_t D, R, C, T, TR, P, nrx, bsize;
  uint32_t cbsize; /* a channel's own receive buffers: bsize, or HDR with srq */
  uint32_t npool;  /* srq: the pool's buffers (p->rx[ntotal_rx..]), 0 without */
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
  uint32_t window; /* a peer's sequence window: channels * D (in the padding after match_ok) */
  struct pp_rcache rc;
  bool rc_ok;
  struct req *work, *work_tail; /* transfers with something to do, in the order they got it */
  struct req *run; /* the rest of the work list p2p_run_work is going through (R_WORK set) */
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
  uint32_t defer_head, defer_tail; /* FINs held back for the reply (reply first, above) */
  uint32_t npending; /* sends waiting to start */
  /* The open run (selective signalling, above): the EAGERs posted unsignalled on channel
   * urun_ch's QP since its last signalled SEND, linked by tx.rnext (urun_n of them, from urun);
   * the next signalled SEND there takes them over. At most one run is open, and only inside
   * start_sends (between the posts of two sends of one peer, on its one channel). */
  uint32_t urun, urun_n, urun_ch;
  uint32_t sig_cap; /* the longest run: SIG_EVERY - 1 with one channel, 0 (none) with more */
  /* progress() visits only these, in index order (as a scan of all would): bit i of pend_mask,
   * peer i has sends waiting (pend_head); bit i of ctrl_due, channel i has control messages
   * left (p2p_ctrl_left, as p2p_flush_ctrl left it), which can only be because it has no
   * send-queue room, no reply credit for its first reply, or no send buffer for its CREDIT;
   * bit i of ctrl_ready, one of those changed since (p2p_ctrl_wake): only these are tried
   * again, the others would fail the same way. */
  uint64_t pend_mask;
  uint64_t ctrl_due[PP_MAX_QPS / 64];
  uint64_t ctrl_ready[PP_MAX_QPS / 64];
  uint8_t ctrl_sum;  /* bit w: ctrl_ready[w] != 0 (progress looks at nothing else when 0) */
  bool ctrl_tx_wait; /* a CREDIT message found no send buffer */
  /* progress may have work: set by everything that can take it out of progress_idle (p2p.c),
   * i.e. sets a bit of ctrl_sum, puts a request on the work list, sets reg_wake, sets a bit of
   * pend_mask or clears one of wait_chan or wait_tx; cleared by progress when it finds itself
   * idle. So !prog implies progress_idle, and progress that finds nothing costs one test. */
  bool prog; /* (in the padding before wait_chan: the struct keeps its size and the run its
              * heap addresses, which traces record) */
  /* Peers whose first parked send cannot start until something changes, so that progress
   * skips them (a retry would fail the same way): bit i of wait_chan, none of peer i's
   * channels has both a data credit and send-queue room (cleared when one gains either);
   * bit i of wait_tx, the send-buffer pool it needs is empty (cleared when a buffer comes
   * back). Meaningful only while peer i's line is not empty; cleared when a send joins an
   * empty line. */
  uint64_t wait_chan, wait_tx;
  uint32_t nactive;  /* requests started and not complete */
  uint32_t nheld;    /* unexpected messages held */
  /* The work requests post_tx and p2p_post_rx hand to the NIC (which copies them): zero from
   * creation, and every post sets the same fields (one SGE), so the others stay zero and a
   * message's WR is not cleared whole (104 and 72 bytes) each time. */
  struct pp_send_wr txwr;
  struct pp_recv_wr rxwr;
  struct pp_recv_record *rec;
  uint32_t nrec, rec_cap;
  uint64_t rec_dropped;
  struct pp_p2p_stats st;
};

/* ------------------------------------------------------------------ helpers */

static inline struct p2p *P2P(const struct pp_engine *e)
{
  return e->ps;
}

static inline struct hdr *rx_hdr(const struct p2p *p, const struct rx *r)
{
  (void)p;
  return (struct hdr *)(void *)r->buf;
}

/* Tx slot t is one of the big pool's: the big pool's slots come first (p2p.c: big.first is
 * 0, the small pool's follow), so one compare. */
static inline bool tx_is_big(const struct p2p *p, uint32_t t)
{
  assert(p->big.first == 0 && p->small.first == p->big.n);
  return t < p->big.n;
}

static inline uint8_t *tx_buf(const struct p2p *p, uint32_t t)
{
  const struct txpool *tp = tx_is_big(p, t) ? &p->big : &p->small;
  return tp->buf + (size_t)(t - tp->first) * tp->size;
}

static inline const struct pp_mr *tx_mr(const struct p2p *p, uint32_t t)
{
  return tx_is_big(p, t) ? &p->big.mr : &p->small.mr;
}

static inline uint32_t tx_alloc(struct p2p *p, struct txpool *tp)
{
  uint32_t t = tp->free;
  if (t != NO_TX) {
    tp->free = p->tx[t].next;
    p->tx[t].next = NO_TX;
  }
  return t;
}

/* Channel i's control messages left over (ctrl_due) are tried again at the next progress. */
static inline void p2p_ctrl_wake(struct p2p *p, uint32_t i)
{
  uint64_t bit = 1ull << (i % 64);
  if (p->ctrl_due[i / 64] & bit) {
    p->ctrl_ready[i / 64] |= bit;
    p->ctrl_sum |= (uint8_t)(1u << (i / 64));
    p->prog = true;
  }
}

/* Every channel's (a send buffer came back for the CREDIT message that found none). */
static inline void p2p_ctrl_wake_all(struct p2p *p)
{
  p->ctrl_tx_wait = false;
  for (uint32_t w = 0; w < PP_MAX_QPS / 64; w++) {
    p->ctrl_ready[w] |= p->ctrl_due[w];
    if (p->ctrl_ready[w]) {
      p->ctrl_sum |= (uint8_t)(1u << w);
      p->prog = true;
    }
  }
}

static inline void tx_free(struct p2p *p, uint32_t t)
{
  struct txpool *tp = tx_is_big(p, t) ? &p->big : &p->small;
  p->tx[t] = (struct tx){.next = tp->free};
  tp->free = t;
  if (p->wait_tx) { /* a send waiting for a buffer may start */
    p->wait_tx = 0;
    p->prog = true;
  }
  if (p->ctrl_tx_wait)
    p2p_ctrl_wake_all(p);
}

/* Channel c gains `n` reply credits: its queued replies may go. */
static inline void p2p_chan_rcredits(struct p2p *p, struct chan *c, uint32_t n)
{
  c->rcredits += n;
  if (n)
    p2p_ctrl_wake(p, (uint32_t)(c - p->ch));
}

/* Channel c gains `n` data credits: a parked send of its peer may start. */
static inline void p2p_chan_credits(struct p2p *p, struct chan *c, uint32_t n)
{
  c->credits += n;
  if (n && (p->wait_chan & 1ull << c->peer)) {
    p->wait_chan &= ~(1ull << c->peer);
    p->prog = true;
  }
}

/* `n` slots of one of channel c's send queues (*sq: sq_used, or dsq_used for p2p.srq's data QP)
 * come back: from a full queue, a parked send of its peer may start (one that waited on a
 * channel without credits still waits). */
static inline void p2p_sq_release(struct p2p *p, struct chan *c, uint32_t *sq, uint32_t n,
                                  uint32_t depth)
{
  assert(*sq >= n);
  if (*sq >= depth && n) {
    if (p->wait_chan & 1ull << c->peer) {
      p->wait_chan &= ~(1ull << c->peer);
      p->prog = true;
    }
    p2p_ctrl_wake(p, (uint32_t)(c - p->ch));
  }
  *sq -= n;
}

/* Fragment i of an RPUT of len bytes: its offset and length. */
static inline uint32_t frag_len(const struct p2p *p, uint32_t len, uint32_t i)
{
  uint64_t off = (uint64_t)i * p->prm.frag_size;
  return off >= len ? 0 : len - off < p->prm.frag_size ? (uint32_t)(len - off) : p->prm.frag_size;
}

static inline uint32_t nfrag_of(const struct p2p *p, uint32_t len)
{
  return len ? (uint32_t)(((uint64_t)len + p->prm.frag_size - 1) / p->prm.frag_size) : 1;
}

/* A request's handle: its generation (28 bits, so a wr_id holds it too) over its slot + 1
 * XORed with the nonce (whose bit 31 no slot number has: never PP_REQ_NULL). */
static inline uint64_t handle_make(const struct p2p *p, const struct req *r)
{
  assert(r->gen <= 0xfffffff && r->idx == (uint32_t)(r - p->req) &&
         r->idx < p->prm.max_requests && r->hlo == ((r->idx + 1) ^ p->nonce));
  (void)p;
  return (uint64_t)r->gen << 32 | r->hlo;
}

/* r's handles go stale: it is freed, or released by pp_p2p_test while on the done list. Its
 * handle becomes 0, which no handle is (the nonce's bit 31), so req_of finds none for it. Its
 * generation stays: req_of compares the handle, a WR's completion (eager.c) also the state,
 * which is never ACTIVE again before req_alloc moves the slot to a new generation. */
static inline void req_stale(struct req *r)
{
  r->handle = 0;
}

/* A live request's handle, made once by req_alloc (every request's is read at least twice: by
 * the caller, by its callback; and an RTS's or a reply's is looked up by req_of). */
static inline uint64_t handle_of(const struct p2p *p, const struct req *r)
{
  assert(r->handle && r->handle == handle_make(p, r));
  (void)p;
  return r->handle;
}

/* The live request of handle h, or NULL: the slot h names, if its handle is h (the same slot
 * and generation; a stale one's is 0, and 0 names no slot). */
static inline struct req *req_of(const struct p2p *p, uint64_t h)
{
  uint32_t i = (uint32_t)h ^ p->nonce;
  if (i == 0 || i > p->prm.max_requests)
    return NULL;
  struct req *r = &p->req[i - 1];
  return r->state != RQ_FREE && r->handle == h ? r : NULL;
}

/* r holds no registration (xmr, rce): true of every free request. */
static inline bool req_regs_clear(const struct req *r)
{
  for (uint32_t i = 0; i < PIPE_MAX; i++)
    if (r->xmr[i].lkey || r->rce[i] || r->rce[PIPE_MAX + i])
      return false;
  return true;
}

static inline struct req *req_alloc(struct p2p *p)
{
  struct req *r = p->freereq;
  if (!r)
    return NULL;
  p->freereq = r->next;
  /* the slot's next generation (its stale handles stay stale until it wraps, 2^28 requests
   * of this slot later) */
  uint32_t gen = (r->gen + 1) & 0xfffffff;
  assert(r->state == RQ_FREE && gen != r->gen && req_regs_clear(r));
  memset(&r->kind, 0, offsetof(struct req, me) - offsetof(struct req, kind));
  r->gen = gen;
  r->handle = handle_make(p, r);
  r->peer = UINT32_MAX;
  return r;
}

/* A rendezvous starts with r: its fields (peer_req up to regnext) from zero. */
static inline void p2p_rndv_clear(struct req *r)
{
  memset(&r->peer_req, 0, offsetof(struct req, regnext) - offsetof(struct req, peer_req));
}

/* false, after saying which, for a transition the table does not have (an assert's message). */
bool p2p_req_bad_transition(const struct p2p *p, const struct req *r, enum req_state to);
const char *p2p_req_state_name(enum req_state s);

static inline bool p2p_req_may(enum req_state from, enum req_state to)
{
  return (P2P_REQ_ALLOWED >> (from * RQ_COUNT + to)) & 1u;
}

/* The one place a request changes state. */
static inline void p2p_req_set(struct p2p *p, struct req *r, enum req_state to)
{
  assert(p2p_req_may((enum req_state)r->state, to) || p2p_req_bad_transition(p, r, to));
  if (r->state == RQ_ACTIVE) {
    assert(p->nactive > 0);
    p->nactive--;
  }
  if (to == RQ_ACTIVE)
    p->nactive++;
  r->state = (uint8_t)to;
}

/* p2p_req_set where the caller knows r's state (`from`, a constant at every call site): the
 * same change, without testing the state for ACTIVE. */
static inline void p2p_req_move(struct p2p *p, struct req *r, enum req_state from,
                                enum req_state to)
{
  assert(r->state == from);
  assert(p2p_req_may(from, to) || p2p_req_bad_transition(p, r, to));
  if (from == RQ_ACTIVE) {
    assert(p->nactive > 0);
    p->nactive--;
  }
  if (to == RQ_ACTIVE)
    p->nactive++;
  r->state = (uint8_t)to;
}

/* The slot goes back to the free list; its handles go stale. */
static inline void p2p_req_free(struct p2p *p, struct req *r)
{
  assert(req_regs_clear(r));
  p2p_req_set(p, r, RQ_FREE);
  req_stale(r);
  r->next = p->freereq;
  p->freereq = r;
}

/* p2p_req_free of a request known to be DONE (the done list's). */
static inline void p2p_req_free_done(struct p2p *p, struct req *r)
{
  assert(req_regs_clear(r));
  p2p_req_move(p, r, RQ_DONE, RQ_FREE);
  req_stale(r);
  r->next = p->freereq;
  p->freereq = r;
}

/* Channel c has control messages to send (a CREDIT, or replies in its queue). */
static inline bool p2p_ctrl_left(const struct chan *c)
{
  return !c->failed && (c->cq_head != NO_TX || c->credit_pending);
}

/* The peers with sends waiting that are not known to wait for a channel or a buffer. */
static inline uint64_t p2p_may_start(const struct p2p *p)
{
  return p->pend_mask & ~(p->wait_chan | p->wait_tx);
}

/* Completions wait on the done list: outside an event, a timer at `now` delivers them. (The
 * _of forms take p = P2P(e) from a caller that has it: e->ps is read again after every store
 * of a pointer, which may alias it.) */
static inline void p2p_arm_flush_of(struct pp_engine *e, struct p2p *p, uint64_t now)
{
  if (p->done_head && p->depth == 0 && !p->flushing && !p->flush_armed && /* (the rare first) */
      pp_engine_push_timer(e, now, PP_TIMER_PROTO, FLUSH_TIMER) == PP_OK)
    p->flush_armed = true;
}

static inline void p2p_arm_flush(struct pp_engine *e, uint64_t now)
{
  p2p_arm_flush_of(e, P2P(e), now);
}

/* p2p.c: everything that may have become possible (control messages, parked sends,
 * transfers); p2p_progress below runs it only when there is something to do. */
enum pp_status p2p_progress_1(struct pp_engine *e);

/* progress_1 would do nothing. */
static inline bool p2p_progress_idle(const struct p2p *p)
{
  return !p->ctrl_sum && !p->work && !p->reg_wake && !p2p_may_start(p);
}

/* progress_1 unless it would do nothing: it is called at the end of every event and API call.
 * Without p->prog it is idle (p2p_impl.h); with it, it is idle unless progress_idle says not. */
static inline enum pp_status p2p_progress_of(struct pp_engine *e, struct p2p *p)
{
  assert(p == P2P(e) && (p->prog || p2p_progress_idle(p)));
  if (!p->prog)
    return PP_OK;
  if (p2p_progress_idle(p)) {
    p->prog = false;
    return PP_OK;
  }
  return p2p_progress_1(e);
}

static inline enum pp_status p2p_progress(struct pp_engine *e)
{
  return p2p_progress_of(e, P2P(e));
}

/* The protocol a send of len bytes takes. */
static inline uint32_t p2p_msg_proto(const struct p2p *p, uint32_t len)
{
  if (len <= p->prm.eager_limit)
    return PP_P2P_EAGER;
  return len <= p->prm.rget_limit ? PP_P2P_RNDV_GET : PP_P2P_RNDV_PUT;
}

/* The request's status as pp_p2p_test and the callbacks report it: a copy (a receive that
 * failed has its pattern there already: p2p_done_with_error). */
static inline void p2p_fill_status(const struct p2p *p, const struct req *r,
                                   struct pp_p2p_status *st)
{
  (void)p;
  assert(r->state == RQ_DONE);
  *st = r->st; /* (source = src, tag = mtag, len = got, error = err, wc_status = wc: the union) */
}

/* The engine runs one of the p2p protocols. */
static inline bool p2p_proto_ok(int protocol)
{
  return protocol == PP_PROTO_EAGER || protocol == PP_PROTO_RNDV;
}

/* req.c */
void p2p_remove_work(struct p2p *p, struct req *r);
void p2p_record(struct pp_engine *e, const struct req *r); /* p2p.record: a completed receive */
/* r completes with r->err != OK: its counter, and a receive that did not get its message
 * (every error but TRUNCATED) reports its pattern (source, tag) and no bytes. */
void p2p_done_with_error(struct p2p *p, struct req *r);
void p2p_fail_as(struct pp_engine *e, uint64_t now, struct req *r, uint8_t err, uint8_t wc);

/* regs.c */
void p2p_reg_park(struct p2p *p, struct req *r);
void p2p_reg_leave(struct p2p *p, struct req *r);
void p2p_put_rce(struct p2p *p, struct req *r, uint32_t i);
void p2p_drop_xmr(struct pp_engine *e, struct req *r, uint32_t i);
enum pp_status p2p_reg_xmr(struct pp_engine *e, void *buf, size_t len, unsigned access,
                           struct pp_mr *mr);
void p2p_release_regs(struct pp_engine *e, struct req *r);
bool p2p_reg_failed(struct p2p *p, struct req *r);

/* credits.c */
enum pp_status p2p_post_rx(struct pp_engine *e, struct rx *r);
enum pp_status p2p_flush_ctrl(struct pp_engine *e, struct chan *c);
enum pp_status p2p_send_reply(struct pp_engine *e, uint32_t ch, const struct hdr *h,
                              uint64_t req, uint8_t slot, uint16_t nwr);
enum pp_status p2p_defer_reply(struct pp_engine *e, uint64_t now, uint32_t ch,
                               const struct hdr *h);
enum pp_status p2p_flush_deferred(struct pp_engine *e);
enum pp_status p2p_reply_consumed(struct pp_engine *e, struct rx *r);
enum pp_status p2p_release_rx(struct pp_engine *e, struct rx *r);
enum pp_status p2p_credits_due(struct pp_engine *e, uint32_t ch);
enum pp_status p2p_start_all(struct pp_engine *e);
void p2p_start_direct(struct pp_engine *e, uint32_t pi);

/* fail.c */
void p2p_fail_peer(struct pp_engine *e, uint64_t now, uint32_t pi, uint32_t dead, uint8_t err,
                   uint8_t wc);
void p2p_fail_channel(struct pp_engine *e, uint64_t now, uint32_t ch, uint32_t dead,
                      uint8_t wc);
void p2p_post_refused(struct pp_engine *e, uint32_t ch);

/* wire.c */
enum pp_status p2p_violation(struct pp_engine *e, uint64_t now, struct rx *x, uint8_t type,
                             enum pp_violation_field f, uint64_t value, uint64_t limit,
                             bool at_most);
enum pp_status p2p_check_frag(struct pp_engine *e, uint64_t now, struct rx *x,
                              const struct hdr *h, uint32_t idx, uint32_t len);
enum pp_status p2p_check_cts(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h,
                             const struct req *r);
/* eager.c */
enum pp_status p2p_start_recv(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x);
/* pp_proto_ops.on_wc (with the receive path: the eager event is one function) */
enum pp_status p2p_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc);

/* rndv.c */
enum pp_status p2p_run_work(struct pp_engine *e);
enum pp_status p2p_rndv_start(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x);
enum pp_status p2p_read_done(struct pp_engine *e, uint64_t now, struct req *r,
                             const struct pp_wc *wc);
enum pp_status p2p_write_done(struct pp_engine *e, uint64_t now, struct req *r,
                              const struct pp_wc *wc);
enum pp_status p2p_on_cts(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h);
enum pp_status p2p_on_fin(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h);
bool p2p_fin_carried(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h);

/* pending.c */
size_t p2p_pending(const struct pp_engine *e, struct pp_wait *out, size_t max);

/* srq.c: the shared receive queue (p->srq set) */
enum pp_status p2p_srq_create(struct pp_engine *e);
void p2p_srq_map(struct p2p *p);
void p2p_srq_destroy(struct pp_engine *e);
struct rx *p2p_srq_rx(struct pp_engine *e, uint32_t i, const struct pp_wc *wc);
/* The channel whose data QP is qpn, UINT32_MAX for none. */
uint32_t p2p_srq_chan_of(const struct p2p *p, uint32_t qpn);
enum pp_status p2p_srq_post(struct pp_engine *e, struct rx *r);
enum pp_status p2p_srq_arrive(struct pp_engine *e, uint64_t now, struct rx *x,
                              const struct hdr *h);
enum pp_status p2p_srq_release(struct pp_engine *e, struct rx *r);
void p2p_srq_recycle(struct pp_engine *e, struct rx *r);
enum pp_status p2p_srq_flush_dead(struct pp_engine *e);
void p2p_srq_fail_channel(struct pp_engine *e, struct chan *c);
void p2p_srq_stats(const struct p2p *p, struct pp_p2p_stats *out);
enum pp_status p2p_srq_on_async(struct pp_engine *e, uint64_t now,
                                const struct pp_async_event *ev);
uint32_t p2p_srq_num(const struct p2p *p);

/* The queue pair a message of `type` goes on: with srq, EAGER and RTS take the data QP. */
static inline bool p2p_on_dqp(const struct p2p *p, uint8_t type)
{
  return p->srq && (type == M_EAGER || type == M_RTS);
}

/* ------------------------------------------------------------------ small and hot: inline */

/* May r register now? Only when nobody waits, or r is the first in line. */
static inline bool p2p_reg_turn(const struct p2p *p, const struct req *r)
{
  return !p->regq_head || p->regq_head == r;
}

static inline void p2p_reg_held(struct p2p *p, struct req *r)
{
  p->nregs++;
  r->flags |= R_REGS;
}

/* r at the end of the list *head .. *tail, linked by next (req.c's unlink_work takes it out). */
static inline void req_append(struct req **head, struct req **tail, struct req *r)
{
  r->next = NULL;
  if (*tail)
    (*tail)->next = r;
  else
    *head = r;
  *tail = r;
}

static inline void p2p_add_work(struct p2p *p, struct req *r)
{
  if (r->flags & R_WORK)
    return;
  r->flags |= R_WORK;
  req_append(&p->work, &p->work_tail, r);
  p->prog = true;
}

/* The request a reply names: a live one of `kind` with the peer the reply came from (a handle
 * of another peer's transfer is no handle for this one). */
static inline struct req *p2p_reply_req(struct p2p *p, uint64_t h, uint8_t kind, uint32_t pi)
{
  struct req *r = req_of(p, h);
  return r && r->kind == kind && r->state == RQ_ACTIVE && r->peer == pi ? r : NULL;
}

/* r leaves the line (it registered, or it is over): the next one may try. */
static inline void p2p_reg_unpark(struct p2p *p, struct req *r)
{
  if (r->flags & R_REGQ)
    p2p_reg_leave(p, r);
}

/* The request is over: it goes to the done list, the workload hears of it at the end of the
 * event. Inline (every completion's; the rare parts out of line in req.c). `active`: the
 * caller knows r is ACTIVE (a constant at each call site). */
static inline __attribute__((always_inline)) void p2p_complete_as(struct pp_engine *e, uint64_t now,
                                                                  struct req *r, bool active)
{
  struct p2p *p = P2P(e);
  if (r->flags & (R_WORK | R_REGQ)) { /* (one test for the two rare ones) */
    if (r->flags & R_WORK)
      p2p_remove_work(p, r);
    p2p_reg_unpark(p, r);
  }
  if (active)
    p2p_req_move(p, r, RQ_ACTIVE, RQ_DONE);
  else
    p2p_req_set(p, r, RQ_DONE);
  r->done_ns = now;
  if (r->kind == K_RECV) {
    if (r->err == PP_P2P_E_OK || r->err == PP_P2P_E_TRUNCATED)
      p->st.received[r->proto]++;
    if (p->rec_cap)
      p2p_record(e, r);
  }
  if (r->err != PP_P2P_E_OK)
    p2p_done_with_error(p, r);
  assert(!(r->flags & R_DONEQ));
  r->flags |= R_DONEQ;
  req_append(&p->done_head, &p->done_tail, r);
  /* No p2p_arm_flush here: in an event (depth > 0) or a flush the list is delivered at its end
   * anyway, and every other completion is made by an API call, each of which ends with one
   * (api_done, or send_common's direct start), at the same `now`, with no timer pushed in
   * between: the flush timer is armed exactly as if it were armed here. */
}

static inline void p2p_complete(struct pp_engine *e, uint64_t now, struct req *r)
{
  p2p_complete_as(e, now, r, false);
}

/* ------------------------------------------------------------------ req.c, inline: the done list to
 * the workload */

static inline enum pp_wc_status p2p_wc_of(const struct req *r)
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

/* Request r goes to the workload: with a p2p_done slot (`app`: the application's callbacks,
 * engine/workload/app.c, and the scripts) its handle and its whole status, else its cookie and
 * completion status. */
static inline __attribute__((always_inline)) enum pp_status
p2p_flush_one(struct pp_engine *e, uint64_t now, const struct req *r, bool app)
{
  const struct p2p *p = P2P(e);
  if (app) {
    struct pp_p2p_status ps;
    p2p_fill_status(p, r, &ps);
    return pp_app_p2p_done(e, now, r->kind != K_SEND, handle_of(p, r), r->cookie, &ps);
  }
  return r->kind == K_SEND ? pp_app_send_done(e, now, r->cookie, p2p_wc_of(r))
                           : pp_app_recv_done(e, now, r->cookie, p2p_wc_of(r), r->src, r->mtag, r->got);
}

/* The done list to the workload, in order, with what the callbacks add to it meanwhile. The
 * workload's ops do not change during a run: `app` and `frees` are read once, and each
 * specialisation (p2p_flush_done) has one of the two kinds of callback in its loop. */
static inline __attribute__((always_inline)) enum pp_status
p2p_flush_list(struct pp_engine *e, uint64_t now, bool app, bool frees)
{
  struct p2p *p = P2P(e);
  enum pp_status st = PP_OK;
  for (struct req *r; (r = p->done_head) != NULL;) {
    p->done_head = r->next;
    if (!p->done_head)
      p->done_tail = NULL;
    r->flags &= ~R_DONEQ;
    if (r->flags & R_RELEASED) {
      p2p_req_set(p, r, RQ_FREE); /* its handle already went stale in pp_p2p_test */
      r->next = p->freereq;
      p->freereq = r;
      continue;
    }
    enum pp_status s = p2p_flush_one(e, now, r, app);
    if (st == PP_OK) /* the first error */
      st = s;
    if (frees || (r->flags & R_AUTO))
      p2p_req_free_done(p, r);
  }
  return st;
}

/* The done list to the workload: inline in the event entry points (p2p_finish: the eager
 * path's two per message, in p2p_on_wc), where it shares their frame. */
static inline __attribute__((always_inline)) enum pp_status
p2p_flush_done(struct pp_engine *e, uint64_t now)
{
  struct p2p *p = P2P(e);
  if (p->flushing)
    return PP_OK;
  p->flushing = true;
  const struct pp_app_ops *ops = e->appops;
  enum pp_status st = ops->p2p_done ? p2p_flush_list(e, now, true, ops->p2p_frees)
                                    : p2p_flush_list(e, now, false, ops->p2p_frees);
  p->flushing = false;
  return st;
}

/* A send is over once its work requests completed, nothing is awaited and no CTS waits. */
static inline void p2p_maybe_complete_send(struct pp_engine *e, uint64_t now, struct req *r)
{
  if (r->wrs || r->await || r->fq_n || r->state == RQ_DONE)
    return;
  if (r->flags & R_REGS) /* (p2p_release_regs would do nothing: an eager send has none) */
    p2p_release_regs(e, r);
  p2p_complete(e, now, r);
}

/* p2p_maybe_complete_send of a send known to be ACTIVE (a SEND's completion, an ACK). */
static inline void p2p_maybe_complete_active(struct pp_engine *e, uint64_t now, struct req *r)
{
  assert(r->state == RQ_ACTIVE);
  if (r->wrs || r->await || r->fq_n)
    return;
  if (r->flags & R_REGS) /* (p2p_release_regs would do nothing: an eager send has none) */
    p2p_release_regs(e, r);
  p2p_complete_as(e, now, r, true);
}

/* ------------------------------------------------------------------ credits.c, inline: the
 * receiver's buffer re-post and credit accounting */

/* Receive buffer r posted again (p2p_post_rx; inline in p2p_release_rx_inline). */
static inline enum pp_status p2p_rx_repost(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  uint32_t i = r->idx;
  assert(i == (uint32_t)(r - p->rx));
  r->state = RX_POSTED;
  if (p->ch[r->ch].failed)
    return PP_OK;
  struct pp_recv_wr *wr = &p->rxwr; /* the rest of it stays zero (p2p_impl.h) */
  wr->wr_id = WRID(W_RECV, 0, i);
  wr->num_sge = 1;
  wr->sg_list[0] = (struct pp_sge){.addr = (uint64_t)(uintptr_t)r->buf, .length = p->cbsize,
                                   .lkey = p->rxmr.lkey};
  return (enum pp_status)e->ops->post_recv(e->nic, p->ch[r->ch].qpn, wr);
}

/* Channel c owes an explicit CREDIT message (the rules at the top of this file; srq: a channel's
 * credits are its grant, not D). */
static inline bool p2p_credit_due(const struct p2p *p, const struct chan *c)
{
  return (c->owed > 0 &&
          (c->owed >= p->T || (p->srq ? c->held + c->owed >= c->grant : c->inuse + c->owed == p->D))) ||
         (c->rowed > 0 && (c->rowed >= p->TR || c->rowed == p->R));
}

/* p2p_credits_due for channel c, inline in p2p_release_rx_inline. */
static inline enum pp_status p2p_chan_credits_due(struct pp_engine *e, struct chan *c)
{
  if (c->credit_pending || !p2p_credit_due(P2P(e), c))
    return PP_OK;
  c->credit_pending = true;
  return p2p_flush_ctrl(e, c);
}

/* A consumed buffer goes back to the NIC; one of the sender's credits becomes owed. Inline in
 * the receiver's eager fast path (eager.c), p2p_release_rx everywhere else. */
static inline enum pp_status p2p_release_rx_inline(struct pp_engine *e, struct rx *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  if (r->pool)
    return p2p_srq_release(e, r);
  enum pp_status s = p2p_rx_repost(e, r);
  if (s != PP_OK)
    return s;
  assert(c->inuse > 0);
  c->inuse--;
  c->owed++;
  return p2p_chan_credits_due(e, c);
}

enum pp_status p2p_srq_flush_dead(struct pp_engine *e);
/* The start of an event (eager.c's p2p_on_wc, p2p.c's timer and async events): the FINs still
 * deferred go first (reply first, above). */
static inline enum pp_status p2p_event_start(struct pp_engine *e, uint64_t now)
{
  struct p2p *p = P2P(e);
  p->depth++;
  p->now = now;
  return p->defer_head != NO_TX ? p2p_flush_deferred(e) : PP_OK;
}

/* The end of an event: progress, the done list to the workload, progress again. Inline in each
 * event entry point (eager.c's p2p_on_wc: the eager path's, two per message; p2p.c's timer and
 * async events). */
static inline __attribute__((always_inline)) enum pp_status p2p_finish(struct pp_engine *e,
                                                                   uint64_t now, enum pp_status s)
{
  struct p2p *p = P2P(e);
  if (s == PP_OK && p->srq)
    s = p2p_srq_flush_dead(e);
  if (s == PP_OK)
    s = p2p_progress(e);
  if (--p->depth == 0) {
    enum pp_status f = p->done_head ? p2p_flush_done(e, now) : PP_OK; /* (nothing to flush) */
    if (s == PP_OK)
      s = f;
    if (s == PP_OK)
      s = p2p_progress(e); /* the workload may have started new work from its callbacks */
  }
  return s;
}

#endif
