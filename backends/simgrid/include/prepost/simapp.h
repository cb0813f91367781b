/*
 * A program's own application (prepost/app.h) on the simulated RC NIC: N ranks, one SimGrid
 * host and actor each, every rank an engine created with the callbacks the program gives it.
 * The same platform, NIC profile (its line rate always modelled: the host link's bandwidth),
 * faults, seed, time bounds and no-progress watchdog as a scenario's run (prepost/simrun.h),
 * and the same result (the run contract, prepost/run.h): outcome, per-rank statistics, merged
 * latency (what the program recorded with pp_app_latency), hang report.
 *
 *   static enum pp_status my_rank(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
 *                                 void **user_data)
 *   {
 *     pp_app_callbacks_default(cb);
 *     cb->start = my_start;
 *     cb->recv_done = my_recv_done;
 *     *user_data = &((struct my_state *)ctx)[rank];
 *     return PP_OK;
 *   }
 *   struct pp_sim_app app = {.rank = my_rank, .ctx = states};
 *   pp_sim_run_app(&cfg, &app, NULL, &res, err, sizeof err);
 *
 * cfg->engine.workload is not used (the ranks run the program); cfg->engine.protocol must be
 * "eager" or "rndv". The callbacks run inside the simulation, on the rank's actor (its stack:
 * PREPOST_SG_STACK_KIB); `now` is simulated time. With pp_sim_set_trace an application run is
 * recorded like any other, and its calls into the engine too when it makes them through the
 * pp_tr_p2p_* wrappers with pp_sim_rank_trace(rank) (what `prepost mpirun --trace` does); calls
 * made from the callbacks are not recorded, so such a trace does not replay exactly. One
 * simulation per process, as pp_sim_run.
 */
#ifndef PP_SIMAPP_H
#define PP_SIMAPP_H

#include <stdint.h>
#include <stdio.h>

#include "prepost/app.h"
#include "prepost/run.h"
#include "prepost/simrun.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_sim_app {
  /* Called once for every rank, before its engine is created: fills cb (every slot set;
   * pp_app_callbacks_default first) and *user_data. Another status than PP_OK fails the run
   * ("rank R: the application's rank factory: ..."). */
  enum pp_status (*rank)(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
                         void **user_data);
  void *ctx;
};

/* Runs the application; as pp_sim_run otherwise. PP_INVALID (with a sentence) for a factory
 * missing, a protocol outside the p2p layer or a configuration the engine refuses. */
enum pp_status pp_sim_run_app(const struct pp_sim_config *cfg, const struct pp_sim_app *app,
                              FILE *log, struct pp_run_result *res, char *err, size_t errlen);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
