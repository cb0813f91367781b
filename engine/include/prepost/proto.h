/*
 * Writing a protocol: the protocol-author API and the registry of protocols.
 *
 * A protocol moves messages between ranks over the NIC interface (prepost/nic.h); a workload
 * (the application side of a rank) decides what to send and receive and checks what arrives:
 *
 *   workload  --pp_proto_ops.send/recv-->  protocol  --pp_nic_*() (pp_nic_ops)-->  NIC
 *   workload  <--pp_app_send_done/recv_done--  protocol  <--pp_proto_ops.on_wc--  engine
 *
 * A protocol is a const struct pp_proto_def: a name, its parameters described by a field table
 * (prepost/param.h) with their defaults, a check of those parameters against the rest of the
 * configuration, an estimate of the memory it allocates, the ops table, optional test-only bugs
 * and optional explorer hooks. It is registered by name (pp_proto_register(), or from a plug-in
 * through struct pp_plugin_host) and chosen by name: pp_engine_cfg_protocol() sets
 * pp_engine_cfg.protocol to its registry id and its parameters to their defaults.
 *
 * The engine stays opaque: a protocol reaches the configuration, its parameters and state, the
 * peers, the PRNG and the NIC through the accessors below, never through struct pp_engine's
 * layout. Every rule of the engine holds for a protocol too: sans-I/O (time comes in `now`,
 * integer ns), no clock, randomness only from pp_engine_prng(), allocation only in create(),
 * bounded everything, no blocking.
 */
#ifndef PP_PROTO_H
#define PP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "hang.h"
#include "nic.h"
#include "param.h"
#include "prng.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

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
  /* Allocates state, registers memory, opens QPs to every peer (pp_engine_npeers/peer). */
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
  /* What each pending operation waits for (prepost/hang.h): fills at most max entries with
   * pp_wait_add(), returns how many there are. Times in since_ns, never in the text (the text
   * is part of the progress mark). */
  size_t (*pending)(const struct pp_engine *e, struct pp_wait *out, size_t max);
  /* Optional (NULL: nothing to say): the protocol's state for pp_engine_dump() (prepost/dump.h):
   * per connection its queues, pending requests, credits, head/tail. snprintf-like: writes at
   * most len bytes (NUL included), returns the length it wanted. */
  size_t (*dump)(const struct pp_engine *e, char *buf, size_t len);
  /* Optional (NULL: the event is only counted): an async event of the NIC (ibverbs'
   * ibv_get_async_event: PP_EVENT_QP_FATAL, PP_EVENT_SRQ_LIMIT_REACHED, ...), after the engine
   * counted it. A protocol may fail the connection of a fatal QP, or refill an SRQ that
   * reached its limit. */
  enum pp_status (*on_async)(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev);
};

/* ------------------------------------------------------------- what a protocol may use */

/* The configuration every protocol shares (rank, ranks, QP attributes, seed, test bugs). */
const struct pp_engine_cfg *pp_engine_config(const struct pp_engine *e);
/* The protocol's own parameters (its def's params_size bytes, set through its field table). */
const void *pp_engine_proto_params(const struct pp_engine *e);
/* The protocol's state: whatever create() allocated. */
void *pp_engine_proto_state(const struct pp_engine *e);
void pp_engine_set_proto_state(struct pp_engine *e, void *state);
/* The ranks this rank exchanges messages with (the workload's plan): i < pp_engine_npeers(). */
uint32_t pp_engine_npeers(const struct pp_engine *e);
uint32_t pp_engine_peer(const struct pp_engine *e, uint32_t i);
/* The rank's seeded PRNG (prepost/prng.h): the only randomness a protocol may draw. */
struct pp_prng *pp_engine_prng(struct pp_engine *e);
/* The backend's NIC: what the pp_nic_*() wrappers below take. */
const struct pp_nic_ops *pp_engine_nic_ops(const struct pp_engine *e);
void *pp_engine_nic(const struct pp_engine *e);
/* Is the protocol's own test-only bug number `i` (its def's bugs[i]) switched on? Always false
 * in a build with -DPREPOST_NO_TEST_BUGS. */
bool pp_engine_proto_bug(const struct pp_engine *e, unsigned i);

/* Registers memory with the backend. */
enum pp_status pp_engine_reg(struct pp_engine *e, void *buf, size_t len, unsigned access,
                             struct pp_mr *mr);
/* Deregisters *mr if pp_engine_reg registered it (lkey set; a zeroed pp_mr is left alone), for
 * teardown paths that may run after a partial create. */
void pp_engine_dereg(struct pp_engine *e, const struct pp_mr *mr);
/* Creates an RC QP to `peer` and takes it to INIT (local write, remote write and remote read
 * access); srq_num 0 for its own receive queue. *psn: a random initial PSN for the QP. */
enum pp_status pp_engine_qp_open(struct pp_engine *e, uint32_t peer, uint32_t srq_num,
                                 uint32_t max_send_wr, uint32_t max_recv_wr, uint32_t *qpn,
                                 uint32_t *psn);
/* Takes a QP through RTR and RTS with the configured attributes. */
enum pp_status pp_engine_qp_connect(struct pp_engine *e, uint32_t qpn, uint32_t psn,
                                    uint32_t remote_qpn, uint32_t remote_psn);

/* Timer owners: the kind of a timer in the engine's bounded queue. */
enum pp_timer_owner { PP_TIMER_APP = 1, PP_TIMER_PROTO = 2 };
enum pp_status pp_engine_push_timer(struct pp_engine *e, uint64_t deadline,
                                    enum pp_timer_owner owner, uint32_t arg);
/* A protocol timer: on_timer(e, now, arg) once `now` >= deadline. PP_LIMIT when the queue is
 * full. */
static inline enum pp_status pp_proto_timer(struct pp_engine *e, uint64_t deadline, uint32_t arg)
{
  return pp_engine_push_timer(e, deadline, PP_TIMER_PROTO, arg);
}

/* A peer's message failed a check of the protocol (the protocol then fails the connection to
 * it): counted, the first one of each peer kept for the reports (hang report, --json). */
void pp_engine_violation(struct pp_engine *e, uint64_t now, const struct pp_violation *v);

/* protocol -> workload (PP_INVALID: no such outstanding message; a protocol returns it from its
 * on_wc). */
enum pp_status pp_app_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st);
enum pp_status pp_app_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len);

/* The NIC, as rdma-core's inline verbs (ibv_post_send, ...), returning enum pp_status (what
 * every pp_nic_ops function returns, as an int). */
static inline enum pp_status pp_nic_post_send(struct pp_engine *e, uint32_t qpn,
                                              const struct pp_send_wr *wr)
{
  return (enum pp_status)pp_engine_nic_ops(e)->post_send(pp_engine_nic(e), qpn, wr);
}
static inline enum pp_status pp_nic_post_recv(struct pp_engine *e, uint32_t qpn,
                                              const struct pp_recv_wr *wr)
{
  return (enum pp_status)pp_engine_nic_ops(e)->post_recv(pp_engine_nic(e), qpn, wr);
}
static inline enum pp_status pp_nic_post_srq_recv(struct pp_engine *e, uint32_t srq,
                                                  const struct pp_recv_wr *wr)
{
  return (enum pp_status)pp_engine_nic_ops(e)->post_srq_recv(pp_engine_nic(e), srq, wr);
}
static inline enum pp_status pp_nic_modify_qp(struct pp_engine *e, uint32_t qpn,
                                              const struct pp_qp_attr *attr, unsigned mask)
{
  return (enum pp_status)pp_engine_nic_ops(e)->modify_qp(pp_engine_nic(e), qpn, attr, mask);
}
static inline enum pp_status pp_nic_destroy_qp(struct pp_engine *e, uint32_t qpn)
{
  return (enum pp_status)pp_engine_nic_ops(e)->destroy_qp(pp_engine_nic(e), qpn);
}
static inline enum pp_status pp_nic_dereg_mr(struct pp_engine *e, const struct pp_mr *mr)
{
  return (enum pp_status)pp_engine_nic_ops(e)->dereg_mr(pp_engine_nic(e), mr);
}
static inline enum pp_status pp_nic_create_srq(struct pp_engine *e,
                                               const struct pp_srq_init_attr *attr,
                                               uint32_t *srq_num)
{
  return (enum pp_status)pp_engine_nic_ops(e)->create_srq(pp_engine_nic(e), attr, srq_num);
}
static inline enum pp_status pp_nic_modify_srq(struct pp_engine *e, uint32_t srq_num,
                                               uint32_t srq_limit)
{
  return (enum pp_status)pp_engine_nic_ops(e)->modify_srq(pp_engine_nic(e), srq_num, srq_limit);
}
static inline enum pp_status pp_nic_destroy_srq(struct pp_engine *e, uint32_t srq_num)
{
  return (enum pp_status)pp_engine_nic_ops(e)->destroy_srq(pp_engine_nic(e), srq_num);
}

/* ------------------------------------------------------------- memory estimate */

/* Adds a term to an estimate (prepost/engine.h, struct pp_mem_need): `bytes` to out->bytes,
 * and `what` (the settings that size it) becomes out->biggest when it is the largest term so
 * far. */
void pp_mem_add(struct pp_mem_need *out, uint64_t bytes, const char *what);

/* ------------------------------------------------------------- the registry */

/* The ABI of struct pp_proto_def, struct pp_plugin_host and the functions above: a def or a
 * plug-in built against another version is refused. */
#define PP_PROTO_ABI 2u /* 2: struct pp_proto_explore took the built-ins' hooks */
#define PP_MAX_PROTOCOLS 32u
#define PP_PROTO_MAX_BUGS 8u
/* Bits PP_PROTO_BUG_SHIFT + i of pp_engine_cfg.test_bugs: the protocol's own bug i. */
#define PP_PROTO_BUG_SHIFT 24u

struct pp_proto_bug {
  const char *name; /* as `--bug NAME` and a scenario's test_bugs: take it */
  const char *doc;  /* one sentence: what goes wrong */
};

/* A verdict of an explorer hook. */
struct pp_proto_verdict {
  bool ok;
  char why[200]; /* when !ok: a sentence naming the rank and what broke */
};

/* What the explorer's options let a scenario hold (`prepost explore --max-ranks N
 * --max-messages N --max-size SIZE`): a generator draws within them. */
struct pp_explore_limits {
  uint32_t max_ranks;
  uint32_t max_messages;
  uint32_t max_size; /* bytes of the largest message the common part draws */
  uint32_t bugs;     /* the test bugs asked for (--bug): a gen may draw what they need */
  uint64_t seed;     /* the scenario's seed: a stream of the protocol's own draws is
                        pp_seed_derive(seed, PP_SEED_EXPLORE, k) with k >= 1 */
};

/* What `prepost explore` needs to explore a protocol (all optional but gen): the protocol's own
 * part of the exploration, next to the protocol (the built-ins' are engine/proto/NAME/explore.c).
 * The explorer draws the common part of a scenario (ranks, pattern, sizes, QP attributes, NIC
 * and platform, faults), runs it with the protocol's workload (each message checked) and judges
 * it by its generic invariants (no hang, no corruption, no RNR NAK when flow_controlled, ...)
 * and then by the protocol's check. */
struct pp_proto_explore {
  bool flow_controlled; /* must never see an RNR NAK */
  bool in_mix;          /* part of the default mix (with the built-ins) */
  /* Checks every field a peer sends (struct pp_violation): the opt-in byzantine fault (a rank
   * that lies on the wire: immediates, addresses, rkeys, lengths, control messages dropped or
   * held back, and the p2p header's fields) applies to it. */
  bool validates_peers;
  /* The workload its scenarios run (enum pp_workload_kind): PP_WORKLOAD_STREAM (0: a stream of
   * messages, each checked byte by byte) or PP_WORKLOAD_TRAFFIC (generated tag-matched messages;
   * gen draws the traffic parameters, pp_traffic_of(cfg)). The explorer sets it before gen. */
  uint32_t workload;
  /* Bits of pp_engine_cfg.test_bugs below PP_PROTO_BUG_SHIFT (the built-ins' test bugs) that its
   * scenarios can hit: `--bug` with one of them explores the protocols that have it. A plug-in's
   * own bugs (its def's bugs) count without being named here. */
  uint32_t engine_bugs;
  /* The scenario section of its parameters and their field table, as the explorer writes them
   * into a scenario file (a "derived" key still 0 left out). NULL / 0: the def's name and
   * params. */
  const char *section;
  const struct pp_param *params;
  size_t nparams;
  /* Draws the protocol's parameters (params: its params_size bytes, at their defaults) and may
   * adjust the common part of cfg (queue depths, pattern, the workload's parameters...), within
   * lim. */
  void (*gen)(struct pp_prng *r, const struct pp_explore_limits *lim, struct pp_engine_cfg *cfg,
              void *params);
  /* Shrinking: reduction number k (0, 1, ...) of the protocol's own parameters, with a few
   * words in *what; false when k does not apply or changes nothing, and for every k past the
   * last one (at most 32 of them). */
  bool (*reduce)(struct pp_engine_cfg *cfg, void *params, unsigned k, const char **what);
  /* The protocol's own invariants over the ranks' statistics of a finished run. */
  void (*check)(const struct pp_engine_cfg *cfg, const void *params,
                const struct pp_rank_stats *ranks, uint32_t nranks, struct pp_proto_verdict *v);
  /* Optional, for the explorer's liveness bound: the network round trips one message of `size`
   * bytes costs (a rendezvous: its request, then per fragment a grant and a FIN). NULL: 1. */
  uint64_t (*round_trips)(const struct pp_engine_cfg *cfg, const void *params, uint32_t size);
  /* Optional: whether the drawn parameters take receives from an SRQ, so that the SRQ depletion
   * fault applies (it is drawn for no protocol otherwise). NULL: never. */
  bool (*uses_srq)(const void *params);
};

struct pp_proto_def {
  uint32_t abi;     /* PP_PROTO_ABI */
  const char *name; /* [a-z0-9-], unique: what `protocol:` in a scenario names */
  const char *desc; /* one line */
  /* Its parameters: a field table over a struct of params_size bytes (at most
   * PP_PROTO_PARAMS_MAX, prepost/engine.h), each member starting at its entry's default.
   * nparams 0: none. */
  const struct pp_param *params;
  size_t nparams;
  size_t params_size;
  /* Optional: the parameters against the rest of the configuration (the table's bounds are
   * checked before), a sentence in err. */
  enum pp_status (*check)(const struct pp_engine_cfg *cfg, const void *params, char *err,
                          size_t errlen);
  /* Optional: what create() allocates for `npeers` peers: pp_mem_add() terms, and out->qps,
   * send_wqes, recv_wqes (preset for one QP per peer with the configured depths). */
  void (*mem_need)(const struct pp_engine_cfg *cfg, const void *params, uint32_t npeers,
                   struct pp_mem_need *out);
  const struct pp_proto_ops *ops; /* every slot but dump and on_async set */
  const struct pp_proto_bug *bugs; /* at most PP_PROTO_MAX_BUGS */
  uint32_t nbugs;
  const struct pp_proto_explore *explore; /* NULL: `prepost explore` cannot draw it */
  /* Optional: the name of one of its messages from its first bytes (what a trace captured of a
   * receive, trace.capture_bytes), for the exports (Perfetto's slices and flows): "DATA",
   * "CREDIT", ...; NULL when the bytes are none of its messages. NULL: every message is "data". */
  const char *(*msg_name)(const uint8_t *head, size_t len);
};

/* Registers a protocol: PP_INVALID (a sentence in err) for a def of another ABI, a name that
 * is empty or not [a-z0-9-], a missing ops slot, an ill-formed field table or defaults out of
 * bounds, too many bugs; PP_EXISTS for a name taken; PP_LIMIT past PP_MAX_PROTOCOLS. The def
 * must outlive every engine (a plug-in stays loaded). Register before creating engines: the
 * registry is not locked. The built-in protocols are registered first (ids 0..). */
enum pp_status pp_proto_register(const struct pp_proto_def *def, char *err, size_t errlen);
/* The same, naming the plug-in that registers it (a file name: the trace header keeps it, so
 * a replay without it can say which plug-in is missing). */
enum pp_status pp_proto_register_from(const struct pp_proto_def *def, const char *plugin,
                                      char *err, size_t errlen);
/* Lookups: NULL / -1 when unknown. */
const struct pp_proto_def *pp_proto_find(const char *name);
const struct pp_proto_def *pp_proto_get(uint32_t id);
int pp_proto_id(const char *name);
uint32_t pp_proto_count(void);
/* The bit of pp_engine_cfg.test_bugs for test bug `name` of protocol `id`
 * (PP_PROTO_BUG_SHIFT + its index), -1 when it has none of that name. */
int pp_proto_bug_bit(uint32_t id, const char *name);
/* The same over every registered protocol: the bit, and the protocol in *id; -1 when none. */
int pp_proto_bug_find(const char *name, uint32_t *id);
/* The plug-in that registered protocol `id`; NULL for a built-in. */
const char *pp_proto_plugin(uint32_t id);

/* pp_engine_cfg_protocol(), pp_engine_cfg_proto_params(): prepost/engine.h. */

/* ------------------------------------------------------------- plug-ins */

/* A plug-in is a shared object that defines
 *
 *   PP_PLUGIN_DECLARE("proto-window");
 *   int prepost_plugin_init(const struct pp_plugin_host *host)
 *   {
 *     return host->register_protocol(host, &window_def, host->err, host->errlen);
 *   }
 *
 * The host (the CLI's --plugin PATH, PREPOST_PLUGINS=a.so:b.so) dlopens it, refuses it when its
 * prepost_plugin_abi is not PP_PROTO_ABI, then calls prepost_plugin_init; 0 is success. */
struct pp_plugin_host {
  uint32_t abi;       /* PP_PROTO_ABI of the host */
  const char *plugin; /* the plug-in's file name, as it was given */
  /* Registers a protocol of the plug-in (pp_proto_register_from with the plug-in's name). */
  enum pp_status (*register_protocol)(const struct pp_plugin_host *host,
                                      const struct pp_proto_def *def, char *err, size_t errlen);
  char *err; /* a buffer for the plug-in's sentence when init fails */
  size_t errlen;
};
typedef int (*pp_plugin_init_fn)(const struct pp_plugin_host *host);
#define PP_PLUGIN_DECLARE(name_)                                                              \
  __attribute__((visibility("default"))) const uint32_t prepost_plugin_abi = PP_PROTO_ABI;    \
  __attribute__((visibility("default"))) const char prepost_plugin_name[] = name_

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
