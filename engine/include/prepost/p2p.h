/*
 * MPI-style point-to-point on top of the engine (protocols "eager" and "rndv").
 *
 * API: non-blocking isend / issend / irecv on a communicator context, test / testall, iprobe,
 * cancel of a pending receive, ANY_SOURCE and ANY_TAG. The engine is sans-I/O, so there is no
 * blocking call here: MPI's wait, waitall, probe, send and recv are steps of the script workload
 * (engine/workload/script.c), which stops its rank's program there and resumes from the event that
 * completes them. Every call takes `now`; completions are also reported to the workload through
 * pp_app_send_done / pp_app_recv_done with the caller's cookie, at the end of the event that
 * completed them (a call made outside an event arms a timer at `now` for that).
 *
 * Semantics (MPI 3.1 section 3.5):
 * - matching by (context, source, tag) on a posted-receive queue and an unexpected-message queue
 *   (engine/proto/p2p/match.c); a message goes to the first posted receive that matches it, a
 *   receive takes the earliest unexpected message it matches; wildcards and specific receives
 *   are ordered by posting order;
 * - non-overtaking: every message to a peer carries a per-peer sequence number, and the receiver
 *   matches them in that order even when they arrive out of order over several channels (QPs);
 * - a message longer than the receive buffer completes the receive with PP_P2P_TRUNCATED after
 *   delivering what fits; the sender completes normally;
 * - issend completes only after the matching receive has started (an ACK for eager messages; the
 *   rendezvous handshake itself for larger ones); isend may complete before (eager: once sent,
 *   or, for an EAGER posted unsignalled in a burst, once posted: its payload is copied already;
 *   engine/proto/p2p/p2p_impl.h, selective signalling);
 * - iprobe reports source, tag and size of the message a receive would get, without taking it.
 *
 * Protocols, chosen by size: eager up to eager_limit (copied through pre-posted bounce buffers,
 * with per-peer credits: the sender holds one credit per receive buffer and parks its message
 * when it has none, credits come back piggy-backed on any message or in an explicit credit
 * message; RNR is impossible by construction, so rnr_retry 0 is safe); RGET up to rget_limit (the
 * RTS carries the source address and rkey, the receiver RDMA-READs and sends FIN); RPUT above (the
 * receiver exposes its buffer fragment by fragment with CTS, the sender RDMA-WRITEs each fragment
 * and sends FIN, `pipeline` fragments in flight). Remote access is granted per transfer and
 * revoked at its FIN; local registrations of user buffers go through a bounded LRU cache
 * (engine/proto/p2p/rcache.c). When the NIC's MR table is full, unused cached registrations
 * make room; transfers that still cannot register wait in line, in the order they asked, for
 * one to be released, and fail with PP_P2P_E_NO_MR (both sides, the message's place in the
 * per-peer order kept) only when this engine holds none that could be. A peer's message that
 * fails a check (README: untrusted peers) fails that peer only: its requests complete with
 * PP_P2P_E_PEER. A work request the NIC refuses to post fails its own request only
 * (PP_P2P_E_FAILED, wc_status LOC_QP_OP_ERR; the peer's side of a refused READ or WRITE
 * completes with REM_ABORT_ERR), with everything it held given back; a refused control message
 * (CREDIT, CTS, FIN, ACK) fails the peer, whose requests would otherwise wait for it forever.
 * Unexpected messages stay in their bounce buffers: that memory is bounded by the credits, and a
 * receiver that does not take them holds its senders back, never drops data.
 */
#ifndef PP_P2P_H
#define PP_P2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "rcache.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

typedef uint64_t pp_req; /* 0: no request */
#define PP_REQ_NULL 0ull

/* X(id, name) */
#define PP_P2P_PROTO_LIST(X)                                                   \
  X(EAGER, "eager")                                                            \
  X(RNDV_PUT, "rndv-put")                                                      \
  X(RNDV_GET, "rndv-get")

enum pp_p2p_proto {
#define PP_X(id, name) PP_P2P_##id,
  PP_P2P_PROTO_LIST(PP_X)
#undef PP_X
  PP_P2P_PROTO_COUNT
};

/* X(id, name, description) */
#define PP_P2P_ERR_LIST(X)                                                     \
  X(OK, "ok", "completed")                                                     \
  X(TRUNCATED, "truncated", "the message was longer than the receive buffer")  \
  X(CANCELLED, "cancelled", "the receive was cancelled before it matched")     \
  X(FAILED, "failed", "a work completion failed (wc_status tells which)")      \
  X(NO_MR, "no-mr", "a buffer could not be registered and nothing held will free an MR")   \
  X(PEER, "peer", "the peer broke the protocol: its connection was failed")

enum pp_p2p_err {
#define PP_X(id, name, desc) PP_P2P_E_##id,
  PP_P2P_ERR_LIST(PP_X)
#undef PP_X
  PP_P2P_ERR_COUNT
};

/* The wire messages: the 64-byte header at the start of every SEND names one. X(id, value, name) */
#define PP_P2P_MSG_LIST(X)                                                     \
  X(EAGER, 1, "EAGER")                                                         \
  X(RTS, 2, "RTS")                                                             \
  X(CTS, 3, "CTS")                                                             \
  X(FIN, 4, "FIN")                                                             \
  X(ACK, 5, "ACK")                                                             \
  X(CREDIT, 6, "CREDIT")

enum pp_p2p_msg {
#define PP_X(id, value, name) PP_P2P_MSG_##id = value,
  PP_P2P_MSG_LIST(PP_X)
#undef PP_X
  PP_P2P_MSG_END
};

/* What a message's header says, for tools that read the heads a trace captured. */
struct pp_p2p_msg_info {
  enum pp_p2p_msg type;
  uint32_t credits;  /* data credits it hands back to its receiver */
  uint32_t rcredits; /* reply credits it hands back */
  uint32_t seq, tag, len;
};
/* Decodes the first `len` bytes of a received message (its header is 64 bytes); false when they
 * are too few or name no message type. */
bool pp_p2p_msg_describe(const void *head, size_t len, struct pp_p2p_msg_info *out);
const char *pp_p2p_msg_name(enum pp_p2p_msg m); /* "?" when unknown */

const char *pp_p2p_proto_name(enum pp_p2p_proto p);
const char *pp_p2p_err_name(enum pp_p2p_err e);

struct pp_p2p_status {
  uint32_t source;  /* receives: the sender; sends: the destination */
  uint32_t tag;
  uint32_t ctx;
  uint32_t len;     /* bytes delivered into the buffer (receives) or sent */
  uint32_t msg_len; /* the message's length (> len when truncated) */
  uint8_t error;    /* enum pp_p2p_err */
  uint8_t proto;    /* enum pp_p2p_proto */
  uint8_t wc_status; /* enum pp_wc_status, for PP_P2P_E_FAILED */
  uint64_t done_ns; /* when it completed */
};

/*
 * Starts a send of len bytes of buf to rank dest. The buffer must stay untouched until the
 * request completes. PP_AGAIN when every request is in use (complete some first); PP_INVALID for
 * a rank that is not a peer of this engine, or tag PP_ANY_TAG; PP_STATE before pp_engine_start().
 */
enum pp_status pp_p2p_isend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                            uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *req);
/* Synchronous: completes only once the matching receive has started. */
enum pp_status pp_p2p_issend(struct pp_engine *e, uint64_t now, const void *buf, uint32_t len,
                             uint32_t dest, uint32_t tag, uint32_t ctx, uint64_t cookie,
                             pp_req *req);
/* Starts a receive of at most len bytes into buf from source (PP_ANY_SOURCE) with tag
 * (PP_ANY_TAG) on context ctx. May be posted before pp_engine_start(). */
enum pp_status pp_p2p_irecv(struct pp_engine *e, uint64_t now, void *buf, uint32_t len,
                            uint32_t source, uint32_t tag, uint32_t ctx, uint64_t cookie,
                            pp_req *req);
/* true when *req is complete: fills st (may be NULL), frees the request and sets *req to 0.
 * A null request is complete with an empty status. false for a request still running (or a
 * stale handle: nothing changes). */
bool pp_p2p_test(struct pp_engine *e, pp_req *req, struct pp_p2p_status *st);
/* true when all n requests are complete; then every one is freed as by pp_p2p_test (st may be
 * NULL, else n entries). Nothing changes when one of them is still running. */
bool pp_p2p_testall(struct pp_engine *e, uint32_t n, pp_req *reqs, struct pp_p2p_status *st);
/* Is there a message a receive (source, tag, ctx) would get now? Fills source, tag, ctx and
 * msg_len (= len) of st without taking the message. */
bool pp_p2p_iprobe(struct pp_engine *e, uint32_t source, uint32_t tag, uint32_t ctx,
                   struct pp_p2p_status *st);
/* Cancels a receive that has not matched yet: it completes with PP_P2P_E_CANCELLED. PP_STATE when
 * it already matched (it will complete normally), PP_UNSUPPORTED for a send, PP_NOTFOUND for a
 * stale handle. */
enum pp_status pp_p2p_cancel(struct pp_engine *e, uint64_t now, pp_req req);
/* The application is about to free [buf, buf + len): drops cached registrations of it. Returns
 * how many it invalidated. */
uint32_t pp_p2p_mem_free(struct pp_engine *e, const void *buf, size_t len);

/* Counters of one rank's p2p layer. */
struct pp_p2p_stats {
  uint64_t sent[PP_P2P_PROTO_COUNT];     /* sends started, by protocol */
  uint64_t received[PP_P2P_PROTO_COUNT]; /* receives completed, by protocol */
  uint64_t sync_acks;        /* ACKs sent for synchronous eager sends */
  uint64_t credit_msgs;      /* explicit credit messages sent */
  uint64_t credits_piggybacked; /* credits returned on other messages */
  uint64_t parked;           /* sends that had to wait for credits, reply slots or buffers */
  uint64_t unexpected;       /* messages that arrived before their receive */
  uint64_t unexpected_max;   /* most messages held unexpected at once */
  uint64_t out_of_order;     /* messages held back until an earlier one arrived */
  uint64_t truncated, cancelled, failed;
  uint64_t fragments;        /* RPUT fragments written */
  struct pp_rcache_stats rcache;
  /* p2p.srq: the shared pool (0 without it, but eager_rx_bytes) */
  uint64_t srq_buffers;      /* buffers of the pool */
  uint64_t eager_rx_bytes;   /* bytes of receive buffers registered (also without srq) */
  uint64_t srq_lent;         /* credits lent beyond each channel's first */
  uint64_t srq_reclaimed;    /* credits taken back into the pool */
  uint64_t srq_lent_max;     /* most credits lent at once */
  uint64_t srq_limit_events; /* SRQ_LIMIT_REACHED events (a peer ate into the headroom) */
  uint64_t srq_refilled;     /* buffers posted by those events */
  uint64_t srq_overruns;     /* messages that came without a credit */
};
void pp_p2p_stats(const struct pp_engine *e, struct pp_p2p_stats *out);

/* One completed receive, for the report (`receives` in --json). */
struct pp_recv_record {
  uint32_t rank, source, tag, ctx;
  uint32_t size;     /* bytes delivered */
  uint32_t msg_len;
  uint8_t error;     /* enum pp_p2p_err */
  uint8_t proto;     /* enum pp_p2p_proto */
  uint8_t wc_status;
  uint64_t checksum; /* pp_p2p_checksum() of the bytes delivered */
};
/* The receives completed so far, in completion order (at most p2p.record of them; *dropped
 * tells how many more completed). 0 for an engine that is not p2p. */
size_t pp_p2p_receives(const struct pp_engine *e, const struct pp_recv_record **out,
                       uint64_t *dropped);
/* The same in a malloc'd copy (*out NULL when there is none). */
size_t pp_p2p_receives_copy(const struct pp_engine *e, struct pp_recv_record **out,
                            uint64_t *dropped);
/* A 64-bit hash of the bytes (not cryptographic; equal on every host: words are read
 * little-endian). */
uint64_t pp_p2p_checksum(const void *buf, size_t len);

/* The p2p parameters with every default filled in. */
void pp_p2p_params_resolve(const struct pp_engine_cfg *c, struct pp_p2p_params *out);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
