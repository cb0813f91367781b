/* Runs a scenario on SimGrid: one simulated host and one actor per rank, each actor driving a
 * prepost engine against the simulated NIC of its host. One run per process (SimGrid limit).
 * The result is the backend-neutral run contract (prepost/run.h). */
#ifndef PP_SIMRUN_H
#define PP_SIMRUN_H

#include <stdio.h>
#include <string.h>

#include "prepost/simnic.h"
#include "prepost/engine.h"
#include "prepost/p2p.h"
#include "prepost/run.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define PP_PATH_MAX 1024

/* Where the hosts come from: a SimGrid XML platform file, or a generated cluster. */
struct pp_platform {
  char file[PP_PATH_MAX]; /* non-empty: load this XML file (ranks map to hosts sorted by name) */
  /* else generate a cluster of `ranks` hosts behind one switch: */
  double bandwidth_bps;   /* per host link, bits/s */
  uint64_t latency_ns;    /* per host link */
};

struct pp_sim_config {
  char name[128];
  struct pp_platform platform;
  struct pp_nic_profile nic;
  struct pp_faults faults;
  struct pp_engine_cfg engine; /* rank is set per actor */
  uint64_t seed;
  uint64_t max_sim_time_ns;    /* stop the run there (a bound, reported as a timeout) */
  /* limits.memory: refuse a run whose estimated memory (pp_sim_mem_need) exceeds it; 0: only
   * the address-space limit (RLIMIT_AS) if one is set */
  uint64_t memory_limit;
  /* stop the run when no rank made progress (prepost/hang.h) for this long, simulated time on
   * SimGrid, wall time on verbs; 0: never */
  uint64_t no_progress_ns;
};

/* The scenario section `limits` (max_sim_time, no_progress, memory: members of struct
 * pp_sim_config), backends/simgrid/sim_param.c. */
PP_PARAM_TABLE(pp_limits);
/* The generated cluster of a scenario's `platform: {cluster: ...}` (struct pp_platform:
 * bandwidth, latency). */
PP_PARAM_TABLE(pp_cluster);

/* What a run of cfg needs, estimated before anything is allocated: per rank its engine
 * (pp_engine_mem_need), its simulated NIC (simnic_mem_bytes), its actor's stack and SimGrid's
 * share; `total` for every rank. pp_sim_run() refuses a run whose total exceeds
 * cfg->memory_limit or the room RLIMIT_AS leaves, with a sentence naming the amount and what to
 * lower. */
struct pp_sim_mem {
  uint64_t engine, nic, stack, simgrid, per_rank, total;
  const char *biggest; /* the settings of the largest engine term */
};
void pp_sim_mem_need(const struct pp_sim_config *cfg, struct pp_sim_mem *out);

/* Runs the simulation. `log` (may be NULL) receives one line per NIC event, deterministic for a
 * given configuration and seed. Errors (bad platform, too few hosts) come back as a status with
 * a sentence in err. */
enum pp_status pp_sim_run(const struct pp_sim_config *cfg, FILE *log, struct pp_run_result *res,
                          char *err, size_t errlen);

/* The backend-neutral part of cfg (prepost/run.h), e.g. for pp_verbs_run (inline: a program
 * that drives only a device does not link the simulator for it). */
static inline void pp_sim_run_cfg(const struct pp_sim_config *cfg, struct pp_run_cfg *out)
{
  memset(out, 0, sizeof(*out));
  memcpy(out->name, cfg->name, sizeof(out->name));
  out->name[sizeof(out->name) - 1] = 0;
  out->engine = cfg->engine;
  out->seed = cfg->seed;
  out->no_progress_ns = cfg->no_progress_ns;
}

/* Records the next pp_sim_run() into w (prepost/trace.h): every rank's inputs and outputs and the
 * packets; NULL (the default) records nothing. The caller writes the header before and calls
 * pp_trace_finish() after. */
struct pp_trace_writer;
void pp_sim_set_trace(struct pp_trace_writer *w);

/* An application driving the engines of a run of workload "api" from inside their actors (the
 * MPI launcher, tools/mpi/): `step` runs in rank `rank`'s actor once its engine has started and
 * again after every event the actor handled; it may call pp_p2p_* on `e` at `now` and returns its
 * own next deadline (PP_NO_DEADLINE: only an engine event wakes it). A rank whose application is
 * not `done` at the end is stuck (outcome stalled, timeout or no progress, never completed);
 * `stop` true ends the run at once (e.g. MPI_Abort). The interim seam until the engine's
 * application callbacks land; NULL (the default) runs no application. */
struct pp_sim_hook {
  void *ctx;
  uint64_t (*step)(void *ctx, uint32_t rank, struct pp_engine *e, uint64_t now);
  bool (*done)(void *ctx, uint32_t rank);
  bool (*stop)(void *ctx);
};
void pp_sim_set_hook(const struct pp_sim_hook *app);
/* The recorder of a rank while a traced run is under way (pp_sim_set_trace), else NULL: a hook
 * records its calls into the engine with it (pp_tr_p2p_*, prepost/trace.h). */
struct pp_trace_rank *pp_sim_rank_trace(uint32_t rank);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
