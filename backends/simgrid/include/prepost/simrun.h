/* Runs a scenario on SimGrid: one simulated host and one actor per rank, each actor driving a
 * prepost engine against the simulated NIC of its host. One run per process (SimGrid limit). */
#ifndef PP_SIMRUN_H
#define PP_SIMRUN_H

#include <stdio.h>

#include "prepost/simnic.h"
#include "prepost/engine.h"
#include "prepost/p2p.h"

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

#define PP_OUTCOME_LIST(X)                                                     \
  X(COMPLETED, "completed", "every operation completed successfully")          \
  X(ERRORS, "errors", "the run ended with error completions")                  \
  X(STALLED, "stalled", "nothing left to do but operations still pending")     \
  X(TIMEOUT, "timeout", "max_sim_time reached with operations pending")         \
  X(NO_PROGRESS, "no_progress", "no rank made progress for the no-progress bound")

enum pp_outcome {
#define PP_X(id, name, desc) PP_OUTCOME_##id,
  PP_OUTCOME_LIST(PP_X)
#undef PP_X
};
const char *pp_outcome_name(enum pp_outcome o);

struct pp_rank_result {
  struct pp_rank_stats stats;
  struct pp_nic_counters nic;
  char host[64];
  struct pp_fault_counts faults;   /* how often each injected fault fired (pp_faults) */
  struct pp_p2p_stats p2p;         /* protocols eager and rndv */
  struct pp_recv_record *receives; /* their completed receives, in order (freed with the result) */
  size_t nreceives;
  uint64_t receives_dropped;       /* completed beyond p2p.record */
};

struct pp_hang;

struct pp_run_result {
  enum pp_outcome outcome;
  /* why the ranks that are not done are stuck (prepost/hang.h), NULL when every rank is done;
   * freed with the result */
  struct pp_hang *hang;
  uint64_t sim_time_ns;
  uint32_t nranks;
  struct pp_rank_result *ranks; /* nranks entries, malloc'd; free with pp_run_result_free() */
  /* latency over every rank's sends: the ranks' histograms merged (prepost/hist.h; malloc'd,
   * NULL when no rank records latency or memory ran out) and its summary */
  struct pp_hist *latency_hist;
  struct pp_hist_summary latency;
};

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
void pp_run_result_free(struct pp_run_result *res);

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
struct pp_sim_app {
  void *ctx;
  uint64_t (*step)(void *ctx, uint32_t rank, struct pp_engine *e, uint64_t now);
  bool (*done)(void *ctx, uint32_t rank);
  bool (*stop)(void *ctx);
};
void pp_sim_set_app(const struct pp_sim_app *app);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
