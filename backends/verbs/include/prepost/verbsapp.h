/*
 * An application (prepost/app.h) on a real ibverbs device, one rank per process, the same
 * callbacks as on the simulated backend (prepost/simapp.h). Two ways to connect the ranks:
 *
 * 1. The built-in TCP bootstrap (backends/verbs/README.md: authenticated, quiescence, results):
 *    pp_verbs_run_app, as pp_verbs_run runs a scenario (launcher or rank-table mode), with a
 *    per-rank factory that gives each rank its callbacks. The coordinator gets the whole run's
 *    result (the run contract, prepost/run.h).
 *
 * 2. The program's own out-of-band exchange (MPI, a file system, its own sockets, a key-value
 *    store): three phases on one rank,
 *
 *      pp_verbs_rank_open(&cfg, rank, &nic, &cb, me, &r, err, len);   // device, engine, QPs in INIT
 *      for every peer p: pp_verbs_rank_local_info(r, p, &mine[p]);     // what p needs from me
 *      ... the program sends mine[p] to p and receives theirs[p] from p ...
 *      for every peer p: pp_verbs_rank_connect(r, p, &theirs[p], ...) // RTR, RTS
 *      pp_verbs_rank_run(r, timeout, &result, err, len);               // start, run to done
 *      pp_verbs_rank_close(r);
 *
 *    struct pp_verbs_peer_info is plain fixed-size data (no pointers): copy its bytes between
 *    processes of one build (the built-in bootstrap's wire format, boot.h, is the portable one).
 *    The exchange must be complete before any rank runs: a rank starts sending at once.
 *
 * cfg->engine.workload is not used (the ranks run the program), cfg->engine.protocol must be
 * "eager" or "rndv"; every other rank is a peer. `now` in the callbacks is CLOCK_MONOTONIC ns.
 */
#ifndef PP_VERBSAPP_H
#define PP_VERBSAPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prepost/app.h"
#include "prepost/run.h"
#include "prepost/verbsnic.h"
#include "prepost/verbsrun.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* ---------------------------------------------------------------- 1. built-in bootstrap */

struct pp_verbs_app {
  /* Called in the rank's process before its engine is created: fills cb (every slot set;
   * pp_app_callbacks_default first) and *user_data. Another status fails the rank. */
  enum pp_status (*rank)(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
                         void **user_data);
  void *ctx;
};

/* pp_verbs_run (prepost/verbsrun.h) for an application: o->trace is refused (an application run
 * is not recorded), the rest as there. */
enum pp_status pp_verbs_run_app(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                                const struct pp_verbs_app *app, struct pp_run_result *res,
                                bool *reporter, char *err, size_t errlen);

/* ---------------------------------------------------------------- 2. the program's exchange */

/* What one rank publishes for one peer: its port address and the connection (QPs, PSNs,
 * regions) meant for that peer. */
struct pp_verbs_peer_info {
  struct vnic_addr addr;
  struct pp_conn_info conn;
};

struct pp_verbs_rank;

/* Opens the device of nic (NULL: the first ACTIVE port), creates rank `rank`'s engine with the
 * callbacks (QPs in INIT, receives posted). PP_NOTFOUND / PP_STATE / PP_IO (the device),
 * PP_INVALID (configuration, callbacks) with a sentence in err. */
enum pp_status pp_verbs_rank_open(const struct pp_run_cfg *cfg, uint32_t rank,
                                  const struct vnic_config *nic, const struct pp_app_callbacks *cb,
                                  void *user_data, struct pp_verbs_rank **out, char *err,
                                  size_t errlen);
/* Fills what `peer` needs to connect to this rank; false for itself or a rank out of range. */
bool pp_verbs_rank_local_info(const struct pp_verbs_rank *r, uint32_t peer,
                              struct pp_verbs_peer_info *out);
/* Takes the QPs to `peer` through RTR and RTS with what the peer published for this rank. */
enum pp_status pp_verbs_rank_connect(struct pp_verbs_rank *r, uint32_t peer,
                                     const struct pp_verbs_peer_info *remote, char *err,
                                     size_t errlen);
/* Starts the application (every peer connected) and drives it, busy-polling, until the engine
 * is done and no send is outstanding, or timeout_ns (0: 120 s) passes. Fills this rank's result
 * (stats, p2p counters, device counters, host). PP_OK when done, PP_LIMIT at the timeout, the
 * engine's or a callback's status when one failed (err says which). */
enum pp_status pp_verbs_rank_run(struct pp_verbs_rank *r, uint64_t timeout_ns,
                                 struct pp_rank_result *out, char *err, size_t errlen);
/* pp_verbs_rank_run in steps, for a program that drives its rank from its own loop (the MPI
 * launcher, tools/mpi/): start (every peer connected; the device's counters zeroed), then one
 * progress pass at a time (at most 64 completions, async events, due timers; never blocks; the
 * engine's or a callback's failure with a sentence in err), until quiet (the engine is done and
 * no send WR is outstanding); the result as pp_verbs_rank_run fills it. */
enum pp_status pp_verbs_rank_start(struct pp_verbs_rank *r, char *err, size_t errlen);
enum pp_status pp_verbs_rank_progress(struct pp_verbs_rank *r, char *err, size_t errlen);
bool pp_verbs_rank_quiet(const struct pp_verbs_rank *r);
void pp_verbs_rank_result(struct pp_verbs_rank *r, struct pp_rank_result *out);
/* What the device says about the rank's queues (vnic_describe), snprintf-like. */
size_t pp_verbs_rank_describe(struct pp_verbs_rank *r, char *buf, size_t len);
/* The rank's engine (for pp_p2p_* between runs, pp_engine_stats, ...). */
struct pp_engine *pp_verbs_rank_engine(struct pp_verbs_rank *r);
/* Destroys the engine and closes the device; NULL is fine. */
void pp_verbs_rank_close(struct pp_verbs_rank *r);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
