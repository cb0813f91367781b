/*
 * Engine internals shared by the core (engine.c), the workloads (stream.c) and the protocols
 * (naive.c, ...); not a public header.
 *
 * Layering inside one rank:
 *   workload (stream.c)  --pp_proto_ops.send/recv-->  protocol (naive.c, ...)  --pp_nic_ops-->  NIC
 *   workload  <--pp_app_send_done/pp_app_recv_done--  protocol  <--pp_engine_on_wc---  driver
 * A protocol moves messages between ranks; a workload decides what to send and receive and checks
 * what arrives. Both own timers through the engine's bounded timer queue.
 */
#ifndef PP_ENGINE_IMPL_H
#define PP_ENGINE_IMPL_H

#include "prepost/engine.h"
#include "prepost/hang.h"
#include "prepost/prng.h"
#include "timerq.h"

struct pp_p2p_status;   /* prepost/p2p.h */
struct pp_peer_failure; /* prepost/app.h */

/* A message handed to a protocol: send `len` bytes of `buf` to `peer`, or receive up to `len`
 * bytes into `buf` from `peer`. `mr` covers `buf` (registered by the workload with local write,
 * remote write and remote read access, so zero-copy protocols may expose it). The protocol owns
 * the buffer until it reports completion with the same cookie. */
struct pp_msg {
  uint32_t peer;
  uint64_t tag;
  uint8_t *buf;
  uint32_t len;
  const struct pp_mr *mr;
  uint64_t cookie;
};

struct pp_proto_ops {
  const char *name;
  /* Allocates state, registers memory, opens QPs to every peer of pp_engine_peers() */
  enum pp_status (*create)(struct pp_engine *e);
  void (*destroy)(struct pp_engine *e);
  bool (*local_info)(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out);
  enum pp_status (*connect)(struct pp_engine *e, uint64_t now, uint32_t peer,
                            const struct pp_conn_info *remote);
  /* PP_AGAIN: not now (no credit, slot or queue entry); the workload retries after the next
   * event. Never a busy wait, never a send that can RNR (except the naive protocol's). */
  enum pp_status (*send)(struct pp_engine *e, uint64_t now, const struct pp_msg *m);
  enum pp_status (*recv)(struct pp_engine *e, uint64_t now, const struct pp_msg *m);
  enum pp_status (*on_wc)(struct pp_engine *e, uint64_t now, const struct pp_wc *wc);
  enum pp_status (*on_timer)(struct pp_engine *e, uint64_t now, uint32_t arg);
  /* Nothing of the protocol's own is outstanding (for pp_engine_done). */
  bool (*quiet)(const struct pp_engine *e);
  /* Optional (NULL: nothing to say): the protocol's state for pp_engine_dump() (prepost/dump.h):
   * per connection its queues, pending requests, credits, head/tail. snprintf-like: writes at
   * most len bytes (NUL included), returns the length it wanted. */
  size_t (*dump)(const struct pp_engine *e, char *buf, size_t len);
  /* What each pending operation waits for (prepost/hang.h): fills at most max entries with
   * pp_wait_add(), returns how many there are. Times in since_ns, never in the text (the text
   * is part of the progress mark). */
  size_t (*pending)(const struct pp_engine *e, struct pp_wait *out, size_t max);
};

extern const struct pp_proto_ops pp_naive_ops;
extern const struct pp_proto_ops pp_ring_credits_ops, pp_ring_cts_ops; /* ring.c */
extern const struct pp_proto_ops pp_p2p_eager_ops, pp_p2p_rndv_ops;    /* p2p.c */

/* A workload: what the application of a rank does with a protocol (engine.h's
 * pp_engine_cfg.workload.kind selects it). */
struct pp_app_ops {
  const char *name;
  /* Fills e->peers / e->npeers: the ranks this rank exchanges messages with. */
  enum pp_status (*plan)(struct pp_engine *e);
  /* Allocates and registers buffers, posts the first receives (the QPs are in INIT). */
  enum pp_status (*create)(struct pp_engine *e);
  void (*destroy)(struct pp_engine *e);
  enum pp_status (*start)(struct pp_engine *e, uint64_t now);
  /* Called after every event: retries what the protocol refused with PP_AGAIN. */
  enum pp_status (*pump)(struct pp_engine *e, uint64_t now);
  enum pp_status (*on_timer)(struct pp_engine *e, uint64_t now, uint32_t arg);
  /* PP_INVALID for a cookie the workload has no send / receive outstanding under (a bogus
   * completion): nothing changes. */
  enum pp_status (*send_done)(struct pp_engine *e, uint64_t now, uint64_t cookie,
                              enum pp_wc_status st);
  enum pp_status (*recv_done)(struct pp_engine *e, uint64_t now, uint64_t cookie,
                              enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len);
  bool (*done)(const struct pp_engine *e);
  /* Optional (NULL: nothing to say): the workload's state for pp_engine_dump(), as above. */
  size_t (*dump)(const struct pp_engine *e, char *buf, size_t len);
  /* Optional, as the protocol's `pending` (NULL: a workload not done says so in general). */
  size_t (*pending)(const struct pp_engine *e, struct pp_wait *out, size_t max);
  /* Optional (NULL: send_done / recv_done get it): a p2p request completed, with its handle
   * (still allocated: pp_p2p_test releases it) and its full status (engine/workload/app.c). */
  enum pp_status (*p2p_done)(struct pp_engine *e, uint64_t now, bool recv, uint64_t req,
                             uint64_t cookie, const struct pp_p2p_status *st);
  /* Optional (NULL: not reported): the connection to a peer failed, once per peer. */
  void (*peer_failed)(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f);
  /* Optional (NULL: only counted): an async event of the device. */
  void (*async_event)(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev);
};

extern const struct pp_app_ops pp_stream_ops;
extern const struct pp_app_ops pp_collective_ops; /* collective.c */
extern const struct pp_app_ops pp_script_ops;     /* script.c */
extern const struct pp_app_ops pp_traffic_ops;    /* traffic.c */
extern const struct pp_app_ops pp_app_workload_ops; /* workload/app.c: the program's callbacks */

/* Timer owners: the kind of a timer in the queue. */
enum pp_timer_owner { PP_TIMER_APP = 1, PP_TIMER_PROTO = 2 };

#define PP_MAX_PEERS 64
#define PP_MAX_QPS (PP_MAX_PEERS * PP_MAX_CHANNELS)

/* A QP this engine opened and the first error completion seen on it (hang reports). */
struct pp_qp_seen {
  uint32_t qpn, peer;
  uint8_t error; /* enum pp_wc_status, PP_WC_SUCCESS while none */
  uint64_t error_ns;
};

struct pp_engine {
  struct pp_engine_cfg cfg;
  const struct pp_nic_ops *ops;
  void *nic;
  const struct pp_proto_ops *proto;
  void *ps; /* the protocol's state */
  const struct pp_app_ops *appops;
  void *as; /* the workload's state */
  uint32_t peers[PP_MAX_PEERS];
  uint32_t npeers;
  bool connected[PP_MAX_PEERS]; /* connected[i]: pp_engine_connect to peers[i] succeeded */
  bool started;
  uint64_t start_ns;
  struct pp_timerq timers;
  struct pp_prng prng;
  struct pp_hist *lat; /* latency of the rank's successful sends (NULL: it sends none) */
  uint64_t lat_cap;    /* set by the workload's plan: non-zero when the rank records latency */
  struct pp_rank_stats st;
  uint64_t finished; /* sends and receives finished towards the workload (progress) */
  struct pp_qp_seen qps[PP_MAX_QPS];
  uint32_t nqps;
  struct pp_violation viol[PP_MAX_PEERS]; /* viol[i]: the first violation of peers[i] */
  bool violated[PP_MAX_PEERS];
  bool peer_down[PP_MAX_PEERS]; /* peer_down[i]: the failure of peers[i] was reported */
  const void *app_arg; /* what pp_engine_create_with() gave the workload (its plan reads it) */
};

/* pp_engine_create() with an argument for the workload's plan (e->app_arg; the app workload's
 * callbacks). */
enum pp_status pp_engine_create_with(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                     void *nic, const void *app_arg, struct pp_engine **out);

/* script.c: the buffer bytes and the number of peers of `rank` under a script workload. */
void pp_script_need(const struct pp_engine_cfg *c, uint32_t rank, uint64_t *bytes, uint32_t *npeers);

/* --- for protocols --- */
/* Registers memory with the backend. */
enum pp_status pp_engine_reg(struct pp_engine *e, void *buf, size_t len, unsigned access,
                             struct pp_mr *mr);
/* Creates an RC QP to `peer` and takes it to INIT; srq_num 0 for its own receive queue. */
enum pp_status pp_engine_qp_open(struct pp_engine *e, uint32_t peer, uint32_t srq_num,
                                 uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t *qpn,
                                 uint32_t *psn);
/* Takes a QP through RTR and RTS with the configured attributes. */
enum pp_status pp_engine_qp_connect(struct pp_engine *e, uint32_t qpn, uint32_t psn,
                                    uint32_t remote_qpn, uint32_t remote_psn);
enum pp_status pp_engine_push_timer(struct pp_engine *e, uint64_t deadline,
                                    enum pp_timer_owner owner, uint32_t arg);

/* A peer's message failed a check (the protocol then fails the connection to it): counted, the
 * first one of each peer kept for the reports (hang report, --json). */
void pp_engine_violation(struct pp_engine *e, uint64_t now, const struct pp_violation *v);

/* Adds a peer rank (once); PP_LIMIT past PP_MAX_PEERS. */
enum pp_status pp_engine_add_peer(struct pp_engine *e, uint32_t peer);
/* Records one latency sample into the rank's histogram (prepost/hist.h). */
void pp_engine_latency(struct pp_engine *e, uint64_t ns);

/* --- protocol -> workload --- (PP_INVALID: no such outstanding message; a protocol returns it
 * from its on_wc) */
enum pp_status pp_app_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st);
enum pp_status pp_app_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len);
/* p2p -> a workload with a p2p_done slot: request `req` (its handle) completed with *st. */
enum pp_status pp_app_p2p_done(struct pp_engine *e, uint64_t now, bool recv, uint64_t req,
                               uint64_t cookie, const struct pp_p2p_status *st);

/* Message contents: a header and a pattern derived from (source, seq), checked byte by byte. */
void pp_msg_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);
/* 0 when buf holds message `seq` from `src` intact. */
int pp_msg_check(const uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);

#endif
