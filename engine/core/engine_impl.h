/*
 * Engine internals shared by the core (engine.c), the workloads (stream.c) and the built-in
 * protocols (naive.c, ...); not a public header. What any protocol may use (a plug-in too) is
 * prepost/proto.h; the built-ins may also reach struct pp_engine directly.
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
#include "prepost/proto.h"
#include "engine/core/timerq.h"

struct pp_p2p_status;   /* prepost/p2p.h */
struct pp_peer_failure; /* prepost/app.h */

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
  /* With p2p_done: the p2p layer frees each request once p2p_done returned (its handle is
   * stale then; the workload never calls pp_p2p_test for it): one lookup and status copy less
   * per completion (engine/workload/script.c). */
  bool p2p_frees;
  /* Optional (NULL: not reported): the connection to a peer failed, once per peer. */
  void (*peer_failed)(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f);
  /* Optional (NULL: only counted): an async event of the device. */
  void (*async_event)(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev);
};

/* A workload in the registry (engine/core/registry.c), as a protocol's struct pp_proto_def: its
 * parameters are params_size bytes (at most PP_WORKLOAD_PARAMS_MAX) in
 * pp_engine_cfg.workload_params, set by `defaults` (NULL: all 0) when the workload is chosen; the
 * keys every workload shares are pp_engine_cfg.workload. */
struct pp_workload_def {
  const char *name;
  const char *desc;
  size_t params_size;
  void (*defaults)(void *params);
  bool alltoall; /* takes pattern 'alltoall' */
  bool pair_odd; /* pattern 'pair' with an odd number of ranks (the last one idles) */
  /* Optional: its settings against the rest of the configuration, a sentence in err. */
  enum pp_status (*check)(const struct pp_engine_cfg *cfg, char *err, size_t errlen);
  /* The busiest rank's peers (at most PP_MAX_PEERS), its buffers as pp_mem_add() terms and the
   * latency samples it records (*lat: 0 = none). */
  void (*mem_need)(const struct pp_engine_cfg *cfg, struct pp_mem_need *out, uint32_t *npeers,
                   uint64_t *lat);
  const struct pp_app_ops *ops;
};
/* Registers a workload; its kind (pp_engine_cfg.workload.kind) is its registration order.
 * PP_INVALID (missing slot), PP_EXISTS, PP_LIMIT as pp_proto_register. */
enum pp_status pp_workload_register(const struct pp_workload_def *def, char *err, size_t errlen);
const struct pp_workload_def *pp_workload_get(uint32_t kind);
/* A built-in protocol, its parameters (pp_engine_cfg.proto_params) set by `defaults` (NULL: its
 * field table's) when it is chosen. */
enum pp_status pp_proto_register_builtin(const struct pp_proto_def *def,
                                         void (*defaults)(void *params));
/* engine/core/builtin.c: registers the built-in protocols and workloads (once, at the first
 * lookup of either registry). */
void pp_builtin_register(void);

extern const struct pp_app_ops pp_stream_ops;
extern const struct pp_app_ops pp_collective_ops; /* collective.c */
extern const struct pp_app_ops pp_script_ops;     /* script.c */
extern const struct pp_app_ops pp_traffic_ops;    /* traffic.c */
extern const struct pp_app_ops pp_app_workload_ops; /* workload/app.c: the program's callbacks */

/* In a configuration check with `char *err, size_t errlen` in scope: unless cond holds, the
 * sentence (printf-style) into err and return PP_INVALID. */
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(err, errlen, __VA_ARGS__);                                                          \
      return PP_INVALID;                                                                           \
    }                                                                                              \
  } while (0)

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

/* Adds a peer rank (once); PP_LIMIT past PP_MAX_PEERS. */
enum pp_status pp_engine_add_peer(struct pp_engine *e, uint32_t peer);
/* Records one latency sample into the rank's histogram (prepost/hist.h). */
void pp_engine_latency(struct pp_engine *e, uint64_t ns);

/* p2p -> a workload with a p2p_done slot: request `req` (its handle) completed with *st.
 * Inline: every p2p completion's (p2p_flush_done). */
static inline enum pp_status pp_app_p2p_done(struct pp_engine *e, uint64_t now, bool recv,
                                             uint64_t req, uint64_t cookie,
                                             const struct pp_p2p_status *st)
{
  e->finished++;
  return e->appops->p2p_done(e, now, recv, req, cookie, st);
}

/* Message contents: a header and a pattern derived from (source, seq), checked byte by byte. */
void pp_msg_fill(uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);
/* 0 when buf holds message `seq` from `src` intact. */
int pp_msg_check(const uint8_t *buf, uint32_t size, uint32_t src, uint64_t seq);

#endif
