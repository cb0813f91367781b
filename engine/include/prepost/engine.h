/*
 * The prepost engine: one instance per rank, sans-I/O.
 *
 * Inputs are calls with an explicit timestamp in integer nanoseconds: pp_engine_start(),
 * pp_engine_on_wc() for each completion the driver polled, pp_engine_on_async() for async events,
 * pp_engine_on_timer() when pp_engine_next_deadline() has passed. Outputs are calls into the
 * backend's const pp_nic_ops table. The engine never reads a clock, never draws a random number
 * except from the PRNG seeded by its configuration, never blocks, and allocates only in
 * pp_engine_create() (bounded pools sized from the configuration).
 */
#ifndef PP_ENGINE_H
#define PP_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collective.h"
#include "hist.h"
#include "nic.h"
#include "param.h"
#include "p2p_cfg.h"
#include "ring.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define PP_NO_DEADLINE UINT64_MAX
#define PP_MAX_RANKS 1024

#define PP_PROTOCOL_LIST(X)                                                    \
  X(NAIVE, "naive", "SENDs posted with no regard for the receiver")            \
  X(EAGER, "eager", "tag matching, eager + credits, rendezvous above a limit") \
  X(RNDV, "rndv", "tag matching, every message by rendezvous")                 \
  X(RING_CREDITS, "ring-credits", "slot FIFO, head credits written back")      \
  X(RING_CTS, "ring-cts", "slot FIFO, receiver-posted CTS entries")

/* The built-in protocols, by their registry ids (prepost/proto.h: a protocol is registered by
 * name; plug-ins get the ids after these). */
enum pp_protocol {
#define PP_X(id, name, desc) PP_PROTO_##id,
  PP_PROTOCOL_LIST(PP_X)
#undef PP_X
  PP_PROTO_COUNT
};

#define PP_PATTERN_LIST(X)                                                     \
  X(PAIR, "pair", "rank 2i sends to rank 2i+1")                                \
  X(RING, "ring", "rank i sends to rank (i+1) mod n")                          \
  X(ALLTOALL, "alltoall", "every rank sends to every other rank (traffic)")

enum pp_pattern {
#define PP_X(id, name, desc) PP_PATTERN_##id,
  PP_PATTERN_LIST(PP_X)
#undef PP_X
  PP_PATTERN_COUNT
};

/* The registry's names (prepost/proto.h): of protocol id `p` ("?" when unknown), and the id of
 * a name (-1 when unknown). */
const char *pp_protocol_name(uint32_t p);
int pp_protocol_from_name(const char *name);
const char *pp_pattern_name(enum pp_pattern p);
int pp_pattern_from_name(const char *name); /* -1 when unknown */

/* QP attributes a scenario sets (IB encodings). */
struct pp_qp_params {
  uint8_t min_rnr_timer;
  uint8_t rnr_retry;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t max_rd_atomic;
  uint32_t mtu;       /* bytes: 256..4096 */
  uint32_t sq_depth;  /* send queue slots per QP */
  uint32_t rq_depth;  /* receive buffers per QP */
};

#define PP_WORKLOAD_LIST(X)                                                    \
  X(STREAM, "stream", "a stream of messages per pattern, checked byte by byte") \
  X(SCRIPT, "script", "per-rank MPI-style operation lists")                    \
  X(TRAFFIC, "traffic", "generated p2p messages, checked")                     \
  X(APP, "app", "the embedding program's callbacks (prepost/app.h)")          \
  X(COLLECTIVE, "collective", "ring allreduce/allgather/broadcast, checked")   \
  X(PINGPONG, "pingpong", "rank 0 <-> rank 1 round trips, half of each recorded")

enum pp_workload_kind {
#define PP_X(id, name, desc) PP_WORKLOAD_##id,
  PP_WORKLOAD_LIST(PP_X)
#undef PP_X
  PP_WORKLOAD_COUNT
};
const char *pp_workload_name(enum pp_workload_kind k);
int pp_workload_from_name(const char *name); /* -1 when unknown */

/* What the application side of a rank does. */
struct pp_workload {
  enum pp_workload_kind kind;
  enum pp_pattern pattern;
  uint32_t messages;        /* per sending rank */
  uint32_t size;            /* bytes per message, >= PP_MSG_HEADER */
  uint64_t interval_ns;     /* gap between two posts of the application; 0 = back to back */
  uint64_t consume_ns;      /* receiver holds each buffer this long before re-posting it */
  uint64_t consume_ranks;   /* bitmask of slow ranks (first 64); 0 = every receiver */
  uint64_t consume_jitter_ns; /* stream: each hold lasts consume_ns + U[0, this] (re-posts come
                               late and out of order); the slow ranks apply it */
  uint64_t post_delay_ns;   /* stream: receivers post their first buffers this long after start
                               (+ U[0, consume_jitter_ns] each) instead of before connecting */
  uint32_t warmup;          /* pingpong: round trips before the `messages` recorded ones */
};

/* Field tables (prepost/param.h, engine/core/engine_param.c): the scenario's `qp` section and
 * the stream keys of `workload` (kind, pattern, messages, size, interval, consume, ...). */
PP_PARAM_TABLE(pp_qp);
PP_PARAM_TABLE(pp_workload);
/* Bytes of a protocol's parameter struct in the configuration (the built-ins' and plug-ins'). */
#define PP_PROTO_PARAMS_MAX 256u
/* Bytes of a workload's parameter struct in the configuration: room for the largest, the script
 * workload's (struct pp_script: 32 programs, 256 operations); each workload asserts its fit. */
#define PP_WORKLOAD_PARAMS_MAX 12552u

/* What every protocol and workload needs; each protocol's and each workload's own parameters
 * are bytes here that it owns, validates and documents (its field table, its check): chosen
 * with pp_engine_cfg_protocol() / pp_engine_cfg_workload() (which set them to their defaults),
 * read through the module's accessor (pp_p2p_params_of(), pp_ring_params_of(),
 * pp_coll_params_of(), pp_traffic_of(), pp_script_of() below; a plug-in's through
 * pp_engine_cfg_proto_params()). */
struct pp_engine_cfg {
  uint32_t rank;
  uint32_t nranks;
  uint32_t protocol; /* its registry id (prepost/proto.h); the built-ins' are enum pp_protocol */
  struct pp_qp_params qp;
  struct pp_workload workload; /* kind and the stream keys every workload shares */
  uint64_t seed;
  uint32_t test_bugs;         /* test-only injected bugs (engine/core/bugs.h; bits 24..31: the
                                 protocol's own, prepost/proto.h); 0 in real use */
  /* The protocol's parameters: its struct, at most PP_PROTO_PARAMS_MAX bytes. */
  uint64_t proto_params[PP_PROTO_PARAMS_MAX / 8];
  /* The workload's parameters (workload.kind's): its struct, at most PP_WORKLOAD_PARAMS_MAX. */
  uint64_t workload_params[PP_WORKLOAD_PARAMS_MAX / 8];
};

/* Chooses protocol `name` for cfg: its id into cfg->protocol and its parameters at their
 * defaults. PP_NOTFOUND when no protocol has that name. */
enum pp_status pp_engine_cfg_protocol(struct pp_engine_cfg *cfg, const char *name);
/* The protocol's parameters inside cfg (NULL for an unknown protocol). */
void *pp_engine_cfg_proto_params(struct pp_engine_cfg *cfg);
const void *pp_engine_cfg_proto_params_c(const struct pp_engine_cfg *cfg);
/* Chooses workload `kind` (enum pp_workload_kind or a registered one): cfg->workload.kind and its
 * parameters at their defaults; the shared stream keys of cfg->workload stay. PP_NOTFOUND for
 * an unknown kind. */
enum pp_status pp_engine_cfg_workload(struct pp_engine_cfg *cfg, uint32_t kind);
/* Sets the parameters of cfg->workload.kind to their defaults (after kind was written). */
void pp_engine_cfg_workload_defaults(struct pp_engine_cfg *cfg);

/* Bytes of the header prepost puts at the start of every naive message (seq, source, check). */
#define PP_MSG_HEADER 16u

/* Upper bounds checked by pp_engine_cfg_check(). */
#define PP_MAX_MESSAGES 10000000u
#define PP_MAX_MSG_SIZE (1u << 30)
#define PP_MAX_QUEUE_DEPTH 16384u

/* Connection information a rank publishes for one peer, exchanged out of band (the simulator
 * copies it, the verbs backend sends it as bytes: fixed size, fixed-width fields). A connection
 * is one QP per channel plus a few remotely accessible memory regions whose meaning belongs to
 * the protocol. */
#define PP_MAX_CHANNELS 8
#define PP_MAX_REGIONS 4

struct pp_region {
  uint64_t addr;
  uint32_t rkey;
  uint32_t len;
};

struct pp_conn_info {
  uint32_t nchannels;
  uint32_t qp_num[PP_MAX_CHANNELS];
  uint32_t psn[PP_MAX_CHANNELS];
  struct pp_region region[PP_MAX_REGIONS];
};

/* Untrusted peers: a message of a peer that failed a check of the protocol (a field out of its
 * bounds, the wrong request, peer or state). The connection to that peer fails (its QPs go to
 * ERROR, its requests complete with an error), nothing is read or written outside the intended
 * buffers, the other peers go on. X(id, name, description) */
#define PP_VIOLATION_LIST(X)                                                   \
  X(BYTE_LEN, "byte_len", "the bytes received do not hold the message")        \
  X(TYPE, "type", "not a message kind of the protocol")                        \
  X(FLAGS, "flags", "flags the message kind does not carry")                   \
  X(LEN, "len", "a length the transfer does not have")                         \
  X(SEQ, "seq", "a sequence number outside the window, or seen before")        \
  X(TAG, "tag", "a reserved tag")                                              \
  X(CREDITS, "credits", "more data credits handed back than were lent")        \
  X(RCREDITS, "rcredits", "more reply credits handed back than were lent")     \
  X(HANDLE, "handle", "no request with this peer in a state that takes it")    \
  X(FRAG, "frag", "a fragment index out of order, or past the last")           \
  X(NFRAG, "nfrag", "a fragment count the transfer does not have")             \
  X(OFF, "off", "a fragment offset the transfer does not have")                \
  X(FLEN, "flen", "a fragment length the transfer does not have")              \
  X(SLOT, "slot", "a ring chunk into a slot not released yet")                 \
  X(HEAD, "head", "a ring credit not ahead of the last or beyond the chunks sent") \
  X(CTS_ENTRY, "cts_entry", "a ring CTS entry with the wrong idx, tag, address, key or size") \
  X(OPCODE, "opcode", "an operation that may not consume this receive")       \
  X(NO_CREDIT, "no_credit", "a message its sender held no credit for (p2p.srq)")

enum pp_violation_field {
#define PP_X(id, name, desc) PP_VF_##id,
  PP_VIOLATION_LIST(PP_X)
#undef PP_X
  PP_VF_COUNT
};
const char *pp_violation_field_name(enum pp_violation_field f); /* "?" when unknown */
const char *pp_violation_field_desc(enum pp_violation_field f);

struct pp_violation {
  uint32_t peer;    /* the rank whose message it was */
  uint8_t field;    /* enum pp_violation_field */
  uint8_t at_most;  /* limit is a bound (value must be <= limit), else the value expected */
  char msg[10];     /* the message kind: "EAGER", "CTS", ...; ring: "data", "credit", "cts" */
  uint64_t value, limit;
  uint64_t at_ns;
};
/* "CTS from rank 1: off 65536, expected 0 (a fragment offset ...)" into buf. */
void pp_violation_text(const struct pp_violation *v, char *buf, size_t len);

struct pp_rank_stats {
  uint64_t messages_sent;     /* send WRs completed successfully */
  uint64_t messages_received; /* messages delivered to the application, intact */
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t corrupt;           /* messages whose bytes did not check */
  uint64_t early_reuse;       /* buffers the network changed while the application held them
                                 (used before release) */
  uint64_t status_counts[PP_WC_STATUS_COUNT];
  uint64_t async_events;
  struct pp_hist_summary latency; /* post to send completion, successful sends (hist.h) */
  bool done;
  struct pp_ring_stats ring;  /* ring protocols */
  struct pp_coll_stats coll;  /* collective workload */
  uint64_t peer_violations;   /* peers' messages that failed a check (each fails its peer) */
  struct pp_violation first_violation; /* the first of them */
};

struct pp_engine;

/* Validates the configuration; on error writes a sentence into err. */
enum pp_status pp_engine_cfg_check(const struct pp_engine_cfg *cfg, char *err, size_t errlen);

/* What pp_engine_create() will ask for, for the busiest rank of a valid configuration: an upper
 * estimate of the bytes it allocates (buffer pools, ring slots, eager and bounce buffers,
 * latency samples, request and matching tables, the engine itself), and the QPs it opens with
 * their queue depths (the backend's share). So a run can be refused before anything is
 * allocated. */
struct pp_mem_need {
  uint64_t bytes;
  uint32_t qps;
  uint64_t send_wqes, recv_wqes; /* summed over the QPs */
  const char *biggest;           /* the settings of the largest term of `bytes` */
  uint64_t biggest_bytes;        /* that term */
};
void pp_engine_mem_need(const struct pp_engine_cfg *cfg, struct pp_mem_need *out);

/* Allocates pools and buffers, registers memory, creates the QPs (taken to INIT) and pre-posts
 * receives. */
enum pp_status pp_engine_create(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                void *nic, struct pp_engine **out);
void pp_engine_destroy(struct pp_engine *e);

/* Does this rank talk to `peer`? Fills `out` with what the peer needs to connect. */
bool pp_engine_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out);
/* Takes the QP to `peer` through RTR and RTS with the configured attributes. */
enum pp_status pp_engine_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                 const struct pp_conn_info *remote);
/* Starts the workload once every connection is up. */
enum pp_status pp_engine_start(struct pp_engine *e, uint64_t now);

enum pp_status pp_engine_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc);
enum pp_status pp_engine_on_async(struct pp_engine *e, uint64_t now,
                                  const struct pp_async_event *ev);
enum pp_status pp_engine_on_timer(struct pp_engine *e, uint64_t now);
uint64_t pp_engine_next_deadline(const struct pp_engine *e);

/* All of this rank's operations completed, successfully or not. */
bool pp_engine_done(const struct pp_engine *e);
/* Fills the rank's statistics (with the latency percentiles of its histogram). */
void pp_engine_stats(const struct pp_engine *e, struct pp_rank_stats *out);
/* The same without the latency percentiles (a walk over the histogram): counts only, cheap. */
void pp_engine_counts(const struct pp_engine *e, struct pp_rank_stats *out);

/* The histogram (prepost/hist.h) of the latencies (ns) of this rank's successful sends: every
 * sample, in fixed memory; NULL when the rank sends nothing. */
const struct pp_hist *pp_engine_latency_hist(const struct pp_engine *e);

/* The peer rank sends go to / receives come from, or -1. */
int pp_workload_dest(const struct pp_workload *w, uint32_t rank, uint32_t nranks);
int pp_workload_source(const struct pp_workload *w, uint32_t rank, uint32_t nranks);

/* The built-ins' parameters inside a configuration, as strchr does it: the pointer is as
 * writable as the configuration given. Meaningful for the protocol (p2p: eager, rndv; ring:
 * ring-credits, ring-cts) or the workload (traffic, script, collective) they belong to: the
 * storage is the protocol's or the workload's, shared by all of them. */
static inline bool pp_engine_cfg_is_p2p(const struct pp_engine_cfg *c)
{
  return c->protocol == PP_PROTO_EAGER || c->protocol == PP_PROTO_RNDV;
}
static inline bool pp_engine_cfg_is_ring(const struct pp_engine_cfg *c)
{
  return c->protocol == PP_PROTO_RING_CREDITS || c->protocol == PP_PROTO_RING_CTS;
}
static inline struct pp_p2p_params *pp_p2p_params_of(const struct pp_engine_cfg *c)
{
  return (struct pp_p2p_params *)(uintptr_t)c->proto_params;
}
static inline struct pp_ring_params *pp_ring_params_of(const struct pp_engine_cfg *c)
{
  return (struct pp_ring_params *)(uintptr_t)c->proto_params;
}
static inline struct pp_traffic *pp_traffic_of(const struct pp_engine_cfg *c)
{
  return (struct pp_traffic *)(uintptr_t)c->workload_params;
}
static inline struct pp_script *pp_script_of(const struct pp_engine_cfg *c)
{
  return (struct pp_script *)(uintptr_t)c->workload_params;
}
static inline struct pp_coll_params *pp_coll_params_of(const struct pp_engine_cfg *c)
{
  return (struct pp_coll_params *)(uintptr_t)c->workload_params;
}

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
