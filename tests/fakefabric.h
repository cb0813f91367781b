/*
 * A fake RC fabric for engine tests without SimGrid: N engines in one process, each on a fake NIC
 * (a pp_nic_ops table) that really moves bytes between the registered buffers, with the RC rules
 * the protocols rely on: per-QP in-order execution, WRITE_WITH_IMM consumes a receive WQE (none
 * posted = an RNR, counted: the tests require zero), remote keys and bounds checked (REM_ACCESS,
 * counted), send completions when "acknowledged", bounded send and receive queues; a request to
 * a QP in ERROR is never acknowledged: RETRY_EXC_ERR, and the sender's QP goes to ERROR too.
 *
 * The scheduler is adversarial but legal: each step picks at random (seeded) one of
 *   - execute the oldest not yet executed request of some QP at the responder,
 *   - acknowledge the oldest executed request of some QP (its send completion),
 *   - hand the oldest completion of some NIC's CQ to its engine,
 *   - fire an engine's due timers;
 * time advances a little every step, and jumps to the next deadline when nothing else can move.
 * So completions of different QPs interleave in every order, a credit update can overtake the
 * ACK of the data it frees, and a data write can be executed the moment it is posted.
 */
#ifndef PP_FAKEFABRIC_H
#define PP_FAKEFABRIC_H

#include <stdbool.h>
#include <stdint.h>

#include "prepost/engine.h"

#define FF_MAX_RANKS 16
#define FF_MAX_QPS 64
#define FF_MAX_MRS 64
#define FF_MAX_WR 4096

struct ff_wr {
  struct pp_send_wr wr;
  uint32_t len;
};

struct ff_qp {
  bool used;
  uint32_t qpn, peer, dest_qpn;
  enum pp_qp_state state;
  struct pp_qp_init_attr init;
  struct ff_wr *sq; /* ring of max_send_wr: [acked, executed) executed, [executed, tail) pending */
  uint32_t sq_acked, sq_exec, sq_tail;
  struct pp_recv_wr *rq; /* ring of max_recv_wr */
  uint32_t rq_head, rq_count;
};

struct ff_mr {
  bool used;
  struct pp_mr mr;
};

struct ff_nic {
  struct ff *f;
  uint32_t rank;
  struct ff_mr mrs[FF_MAX_MRS];
  struct ff_qp qps[FF_MAX_QPS];
  struct pp_wc *cq; /* ring */
  uint32_t cq_head, cq_count, cq_cap;
  uint64_t posted_sends, posted_recvs, executed, rnr, access_errors;
  uint64_t max_sq; /* largest send queue occupancy seen */
};

struct ff {
  uint32_t n;
  struct ff_nic nic[FF_MAX_RANKS];
  struct pp_engine *e[FF_MAX_RANKS];
  uint64_t now;
  uint64_t rng;
  uint64_t steps;
  uint64_t rnr, access_errors, engine_errors;
  enum pp_status last_error;
  /* knobs */
  unsigned exec_weight, ack_weight, cq_weight; /* relative odds of each kind of step */
  uint64_t max_step_ns;                        /* time advance per step: 0..max_step_ns */
  bool hold_acks; /* never acknowledge (tests of send-queue limits) */
  uint64_t flip_at; /* flip a byte of the flip_at-th data write or SEND (1-based; 0 = never) */
  uint64_t data_writes;
};

extern const struct pp_nic_ops ff_ops;

/* Sets the fabric up for cfg->nranks ranks: creates each engine (rank = its index), exchanges
 * the connection info, connects and starts them all at time 0. Asserts every step. */
void ff_init(struct ff *f, const struct pp_engine_cfg *cfg, uint64_t seed);
/* Creates the engines only (no connect/start), for tests of the setup. */
void ff_create(struct ff *f, const struct pp_engine_cfg *cfg, uint64_t seed);
/* Connects every pair of ranks that list each other, then starts every engine. */
void ff_connect_start(struct ff *f);
void ff_fini(struct ff *f);

/* One scheduler step; false when nothing can move (every queue empty, no deadline). */
bool ff_step(struct ff *f);
/* Steps until nothing can move or max_steps; returns the steps taken. */
uint64_t ff_run(struct ff *f, uint64_t max_steps);
/* Every engine done? */
bool ff_all_done(const struct ff *f);

/* Individual actions for hand-driven tests (each returns false when it had nothing to do). */
bool ff_exec(struct ff *f, uint32_t rank, uint32_t qpn);
bool ff_ack(struct ff *f, uint32_t rank, uint32_t qpn);
bool ff_deliver(struct ff *f, uint32_t rank);
void ff_deliver_all(struct ff *f);
/* Moves time to `now` and fires the engines' due timers. */
void ff_advance(struct ff *f, uint64_t now);

/* Breaks a QP as the NIC would on a fatal error: to ERROR, the head request (if any) completes
 * with `status`, every other outstanding send and receive WR with WR_FLUSH_ERR. */
void ff_break_qp(struct ff *f, uint32_t rank, uint32_t qpn, enum pp_wc_status status);

struct ff_qp *ff_qp(struct ff *f, uint32_t rank, uint32_t qpn);
/* The i-th QP rank created (creation order), or NULL. */
struct ff_qp *ff_qp_at(struct ff *f, uint32_t rank, uint32_t i);
uint32_t ff_qp_count(const struct ff *f, uint32_t rank);

#endif
