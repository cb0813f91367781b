/*
 * Application callbacks: an embedding program drives one rank's engine through the MPI-style
 * point-to-point API (prepost/p2p.h) and learns what happened through callbacks, in the manner
 * of ngtcp2's `ngtcp2_callbacks`: a table of functions plus one `user_data` pointer, handed to
 * the engine at creation (pp_engine_create_app) and passed back to every call.
 *
 *   struct pp_app_callbacks cb;
 *   pp_app_callbacks_default(&cb);          // every slot a documented no-op
 *   cb.start = my_start;                    // post the first receives and sends
 *   cb.recv_done = my_recv_done;            // a receive completed: look at st, post the next
 *   pp_engine_create_app(&cfg, ops, nic, &cb, me, &engine);
 *
 * The engine stays sans-I/O: a driver (prepost/simapp.h on the simulated NIC, prepost/verbsapp.h
 * on ibverbs, or the program's own loop) hands it completions and timer expiries; the callbacks
 * run inside those calls, at the end of the event that caused them. From a callback, or between
 * two events, the program may call pp_p2p_isend / issend / irecv / test / testall / iprobe /
 * cancel / mem_free on the engine it was given, and pp_app_timer() to be woken later (an
 * application that models compute time). It must not destroy the engine from a callback.
 *
 * Requests. A completion callback gets the request's handle and its full status; the request
 * stays allocated (pp_p2p_test would return the same status) until pp_p2p_test() releases it,
 * which the callback may do at once: `pp_p2p_test(e, &req, NULL)`. Requests not released count
 * against p2p.max_requests (pp_p2p_isend then returns PP_AGAIN). A request the program released
 * with pp_p2p_test before its callback ran (it completed inside the same event) is not reported:
 * the program has its status already.
 *
 * Probes: pp_p2p_iprobe() answers at once; a program that waits for a message without taking it
 * (MPI_Probe) asks again from `progress`, which runs after every event.
 *
 * Every slot must be set (pp_engine_create_app refuses a table with a NULL slot): start from
 * pp_app_callbacks_default(). A callback that returns a status other than PP_OK makes the event
 * that called it return that status to the driver, which ends the run with an error naming it.
 *
 * The configuration's `workload` is not used: the engine runs the `app` workload, whose peers
 * are every other rank. The protocol must be one of the p2p layer's ("eager" or "rndv").
 */
#ifndef PP_APP_H
#define PP_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "nic.h"
#include "p2p.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* Why the connection to a peer failed. X(id, name, description) */
#define PP_PEER_FAILURE_LIST(X)                                                                \
  X(QP_ERROR, "qp_error", "a QP to the peer completed a work request in error")                \
  X(QP_FATAL, "qp_fatal", "the device reported a QP to the peer fatal (async event)")          \
  X(VIOLATION, "violation", "the peer broke the protocol (a field failed a check)")

enum pp_peer_failure_kind {
#define PP_X(id, name, desc) PP_PEER_FAIL_##id,
  PP_PEER_FAILURE_LIST(PP_X)
#undef PP_X
  PP_PEER_FAIL_COUNT
};
const char *pp_peer_failure_name(enum pp_peer_failure_kind k); /* "?" when unknown */

/* The first failure of a peer's connection; reported once per peer. Its requests complete too,
 * each with its own error (PP_P2P_E_FAILED with the wc status, or PP_P2P_E_PEER). */
struct pp_peer_failure {
  uint32_t peer;
  uint8_t kind;      /* enum pp_peer_failure_kind */
  uint8_t wc_status; /* QP_ERROR: the completion's enum pp_wc_status */
  uint32_t qp_num;   /* QP_ERROR, QP_FATAL: the QP */
  struct pp_violation violation; /* VIOLATION: what was wrong (pp_violation_text) */
  uint64_t at_ns;
};

struct pp_app_callbacks {
  /* Every connection is up (pp_engine_start): post the first operations. */
  enum pp_status (*start)(struct pp_engine *e, uint64_t now, void *user_data);
  /* A send (isend or issend) completed; st->source is its destination, st->error says how. */
  enum pp_status (*send_done)(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                              const struct pp_p2p_status *st, void *user_data);
  /* A receive completed: st->source, tag, ctx, len (bytes delivered), msg_len (> len when
   * truncated), error (PP_P2P_E_OK, TRUNCATED, CANCELLED, FAILED with wc_status, NO_MR, PEER). */
  enum pp_status (*recv_done)(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                              const struct pp_p2p_status *st, void *user_data);
  /* A deadline the program asked for with pp_app_timer() passed; arg is the one it gave. */
  enum pp_status (*timer)(struct pp_engine *e, uint64_t now, uint32_t arg, void *user_data);
  /* After every event (completions, timers): retry what returned PP_AGAIN, probe, ... */
  enum pp_status (*progress)(struct pp_engine *e, uint64_t now, void *user_data);
  /* The connection to a peer failed (once per peer, after the event that found it). */
  void (*peer_failed)(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f,
                      void *user_data);
  /* The device reported an asynchronous event (QP_FATAL also reaches peer_failed; CQ_ERR,
   * SRQ_LIMIT_REACHED, PORT_ERR, ... only here). */
  void (*error)(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev,
                void *user_data);
  /* Has the program finished? The engine is done (pp_engine_done, the run's outcome) when this
   * says so and the protocol has nothing outstanding. */
  bool (*done)(const struct pp_engine *e, void *user_data);
};

/* Fills every slot with its no-op default: start, send_done, recv_done, timer and progress
 * return PP_OK and do nothing (send_done and recv_done leave the request to pp_p2p_test);
 * peer_failed and error do nothing; done returns true (the engine is done once nothing is
 * outstanding). */
void pp_app_callbacks_default(struct pp_app_callbacks *cb);
/* Every slot is set. */
bool pp_app_callbacks_complete(const struct pp_app_callbacks *cb);

/*
 * pp_engine_create() for an application: the engine runs the callbacks `cb` (copied; every slot
 * set) with `user_data`. cfg->workload is ignored. PP_INVALID for an incomplete table, a protocol
 * outside the p2p layer or an invalid configuration.
 */
enum pp_status pp_engine_create_app(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                    void *nic, const struct pp_app_callbacks *cb,
                                    void *user_data, struct pp_engine **out);

/* The user_data of an engine made by pp_engine_create_app (NULL for any other). */
void *pp_app_user_data(const struct pp_engine *e);

/* Calls the `timer` callback with `arg` once `deadline` (ns, the driver's clock) has passed.
 * Timers cannot be cancelled (ignore a stale one by its arg). PP_LIMIT when the engine's timer
 * queue is full, PP_STATE for an engine that is not an application's. */
enum pp_status pp_app_timer(struct pp_engine *e, uint64_t deadline, uint32_t arg);

/* Records one latency sample (ns) into the rank's histogram (pp_engine_latency_hist, the run
 * result's `latency`): what the program measures, e.g. a round trip. */
void pp_app_latency(struct pp_engine *e, uint64_t ns);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
