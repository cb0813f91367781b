/*
 * Configuration of the MPI-style point-to-point layer (engine/proto/p2p/) and of the workloads that
 * drive it (engine/workload/script.c: per-rank operation scripts; engine/workload/traffic.c: generated traffic).
 * Included by engine.h: these structs are the p2p protocols' and the workloads' parameters inside
 * pp_engine_cfg's proto_params / workload_params (pp_p2p_params_of, pp_traffic_of,
 * pp_script_of), plain values (no pointers) so that a configuration can be copied freely.
 */
#ifndef PP_P2P_CFG_H
#define PP_P2P_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "param.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* Thresholds, pools and bounds of the eager / rendezvous protocols. pp_p2p_params_default()
 * gives the defaults; eager_limit, rget_limit and record are taken as they are (0 is meaningful),
 * any other field left 0 takes its default (pp_p2p_params_resolve() in p2p.h). */
struct pp_p2p_params {
  uint32_t eager_limit;      /* payload bytes sent eagerly (protocol eager; rndv forces 0) */
  uint32_t rget_limit;       /* rendezvous messages up to this size use RGET, larger ones RPUT */
  uint32_t frag_size;        /* RPUT fragment: the receiver exposes the buffer this much at once */
  uint32_t pipeline;         /* RPUT fragments in flight per transfer */
  uint32_t channels;         /* RC QPs per peer (messages striped round robin) */
  uint32_t credits;          /* eager buffers per peer and channel (= sender's credits) */
  uint32_t credit_threshold; /* explicit credit message once this many credits are owed */
  uint32_t reply_slots;      /* receive buffers per channel reserved for replies (CTS/FIN/ACK) */
  uint32_t send_buffers;     /* eager send buffers shared by all peers */
  uint32_t max_requests;     /* outstanding requests (posted receives included) */
  uint32_t rcache_entries;   /* registration cache: at most this many registrations ... */
  uint64_t rcache_bytes;     /* ... covering at most this many bytes */
  uint32_t record;           /* completed receives recorded per rank for the report */
  /* SRQ-backed eager receives (engine/proto/p2p/srq.c): one shared receive queue per rank with a
   * pool of srq_buffers buffers lent to the peers as credits; srq_limit the SRQ's watermark and
   * the headroom never lent */
  bool srq;
  uint32_t srq_buffers;
  uint32_t srq_limit;
};

#define PP_P2P_MAX_CHANNELS 4u
#define PP_P2P_MAX_REQUESTS (1u << 20)
#define PP_P2P_MAX_CREDITS 4096u
#define PP_P2P_MAX_EAGER (1u << 20)
#define PP_P2P_MAX_RECORD (1u << 20)
#define PP_P2P_MAX_SRQ 16384u /* the simulated NIC's max_qp_wr */

/* --- the script workload: explicit per-rank operation lists --- */

/* X(id, name, description) */
#define PP_SCRIPT_OP_LIST(X)                                                   \
  X(ISEND, "isend", "non-blocking standard send")                               \
  X(ISSEND, "issend", "non-blocking synchronous send")                          \
  X(SEND, "send", "blocking standard send (isend + wait)")                      \
  X(SSEND, "ssend", "blocking synchronous send (issend + wait)")                \
  X(IRECV, "irecv", "non-blocking receive")                                     \
  X(RECV, "recv", "blocking receive (irecv + wait)")                            \
  X(WAIT, "wait", "wait for the requests of the last non-blocking operation")   \
  X(WAITALL, "waitall", "wait for every outstanding request")                   \
  X(PROBE, "probe", "wait until a matching message is there, without taking it") \
  X(CANCEL, "cancel", "cancel the receives of the last irecv not matched yet")  \
  X(COMPUTE, "compute", "do nothing for a while")

enum pp_script_op_kind {
#define PP_X(id, name, desc) PP_SOP_##id,
  PP_SCRIPT_OP_LIST(PP_X)
#undef PP_X
  PP_SOP_COUNT
};

#define PP_ANY_SOURCE UINT32_MAX
#define PP_ANY_TAG UINT32_MAX

struct pp_script_op {
  uint8_t kind;    /* enum pp_script_op_kind */
  uint8_t pad[3];
  uint32_t peer;   /* destination or source rank; PP_ANY_SOURCE */
  uint32_t tag;    /* PP_ANY_TAG for receives */
  uint32_t comm;   /* communicator context id */
  uint32_t size;   /* message bytes (sends), buffer bytes (receives) */
  uint32_t count;  /* repetitions (>= 1) */
  uint64_t ns;     /* compute time */
};

#define PP_SCRIPT_MAX_OPS 256u
#define PP_SCRIPT_MAX_PROGS 32u
#define PP_SCRIPT_MAX_COUNT 1000000u

/* One program: the ops [first, first + n) run `repeat` times (0 = once) by every rank in the
 * `ranks` bitmap. A rank runs every program that names it, in order. */
struct pp_script_prog {
  uint64_t ranks[1024 / 64];
  uint16_t first, n;
  uint32_t repeat;
};

#define PP_SCRIPT_MAX_REPEAT 10000000u

struct pp_script {
  uint16_t nprogs, nops;
  struct pp_script_prog prog[PP_SCRIPT_MAX_PROGS];
  struct pp_script_op op[PP_SCRIPT_MAX_OPS];
};

/* --- the traffic workload: generated messages --- */

#define PP_SIZE_DIST_LIST(X)                                                   \
  X(FIXED, "fixed", "every message has `size` bytes")                          \
  X(UNIFORM, "uniform", "sizes uniform in [size, size_max]")                   \
  X(LOG_UNIFORM, "log-uniform", "log2 of the size uniform in [size, size_max]")

enum pp_size_dist {
#define PP_X(id, name, desc) PP_DIST_##id,
  PP_SIZE_DIST_LIST(PP_X)
#undef PP_X
  PP_DIST_COUNT
};

#define PP_RECV_MODE_LIST(X)                                                   \
  X(SPECIFIC, "specific", "each receive names its source and tag")            \
  X(ANY_TAG, "any-tag", "each receive names its source, any tag")              \
  X(MIXED, "mixed", "specific and any-tag receives at random")                 \
  X(ANY_SOURCE, "any-source", "each receive names its tag, any source")        \
  X(ANY, "any", "every receive is ANY_SOURCE and ANY_TAG")

enum pp_recv_mode {
#define PP_X(id, name, desc) PP_RECV_##id,
  PP_RECV_MODE_LIST(PP_X)
#undef PP_X
  PP_RECV_MODE_COUNT
};

struct pp_traffic {
  uint32_t size_max;     /* largest message (>= workload.size) */
  uint8_t dist;          /* enum pp_size_dist */
  uint8_t recv_mode;     /* enum pp_recv_mode */
  uint16_t pad;
  uint32_t tags;         /* tags drawn from 0..tags-1 (>= 1) */
  uint32_t window;       /* outstanding sends and receives per rank (>= 1) */
};

struct pp_engine_cfg;
/* eager_limit 12 KiB, rget_limit 1 MiB, record 4096, every other field 0 (its default). */
void pp_p2p_params_default(struct pp_p2p_params *p);
/* The scenario section `p2p` and the traffic keys of `workload` (engine/proto/p2p/p2p_param.c,
 * engine/workload/traffic_param.c). */
PP_PARAM_TABLE(pp_p2p);
#define PP_P2P_PARAM_COUNT 16u /* pp_p2p_param_count, as a constant for static initializers */
PP_PARAM_TABLE(pp_traffic);
/* The protocols / workloads of the p2p layer. */
int pp_p2p_proto(int protocol);
int pp_p2p_app(int workload_kind);
/* Checks the p2p, traffic and script parts of a configuration; a sentence in err. */
int pp_p2p_cfg_check(const struct pp_engine_cfg *c, char *err, size_t errlen);

const char *pp_script_op_name(enum pp_script_op_kind k);
int pp_script_op_from_name(const char *name); /* -1 when unknown */
const char *pp_size_dist_name(enum pp_size_dist d);
int pp_size_dist_from_name(const char *name);
const char *pp_recv_mode_name(enum pp_recv_mode m);
int pp_recv_mode_from_name(const char *name);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
