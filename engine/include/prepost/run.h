/*
 * The run contract: what a driver (the simulated backend, prepost/simrun.h; the verbs backend,
 * prepost/verbsrun.h; a program's own) reports about a run of N ranks, whatever moved the bytes.
 * A run's outcome, each rank's statistics, counters and receive records, the latency over every
 * rank's sends (their histograms merged, prepost/hist.h) and, when ranks are not done, the hang
 * report (prepost/hang.h). The helpers below are the one aggregation both backends use, so the
 * same run gives the same report on either.
 */
#ifndef PP_RUN_H
#define PP_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "hang.h"
#include "hist.h"
#include "nic.h"
#include "p2p.h"
#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

/* What every backend's run needs besides the backend's own settings. */
struct pp_run_cfg {
  char name[128];
  struct pp_engine_cfg engine; /* rank is set per rank */
  uint64_t seed;
  /* stop the run when no rank made progress (prepost/hang.h) for this long (the backend's
   * clock: simulated time on SimGrid, wall time on verbs); 0: never */
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

/* How often each injected fault fired on a host (the simulated backend's faults, struct
 * pp_faults of prepost/simnic.h; all 0 on a device). */
struct pp_fault_counts {
  uint64_t jittered;    /* wire transfers delayed by jitter */
  uint64_t ordered;     /* wire transfers delayed by order_mask */
  uint64_t scrambled;   /* RDMA WRITEs placed out of order */
  uint64_t srq_starved; /* requests refused (RNR) while an SRQ held only unusable WQEs */
  uint64_t qp_errors;   /* QPs forced to ERROR */
  uint64_t rkeys;       /* rkeys invalidated */
  uint64_t cq_delays;   /* (driver) completion polls postponed */
  uint64_t pauses;      /* (driver) process pauses */
  uint64_t byzantine;   /* (driver) work requests the byzantine peer mutated, dropped, ... */
};

struct pp_rank_result {
  struct pp_rank_stats stats;
  struct pp_nic_counters nic;
  char host[64];
  struct pp_fault_counts faults;   /* how often each injected fault fired */
  struct pp_p2p_stats p2p;         /* protocols eager and rndv */
  struct pp_recv_record *receives; /* their completed receives, in order (freed with the result) */
  size_t nreceives;
  uint64_t receives_dropped;       /* completed beyond p2p.record */
};

struct pp_run_result {
  enum pp_outcome outcome;
  /* why the ranks that are not done are stuck (prepost/hang.h), NULL when every rank is done;
   * freed with the result */
  struct pp_hang *hang;
  uint64_t sim_time_ns; /* the run's length: simulated time, or wall time of the data phase */
  uint32_t nranks;
  struct pp_rank_result *ranks; /* nranks entries, malloc'd; free with pp_run_result_free() */
  /* latency over every rank's sends: the ranks' histograms merged (prepost/hist.h; malloc'd,
   * NULL when no rank records latency or memory ran out) and its summary */
  struct pp_hist *latency_hist;
  struct pp_hist_summary latency;
};

/* Allocates res->ranks for nranks ranks (zeroed); the rest of res is zeroed. PP_NOMEM. */
enum pp_status pp_run_result_init(struct pp_run_result *res, uint32_t nranks);
/* Merges one rank's latency histogram into res->latency_hist (allocated at the first; a rank
 * that records none passes NULL). */
void pp_run_result_add_latency(struct pp_run_result *res, const struct pp_hist *h);
/* Once every rank's stats are in: the outcome (ERRORS when a rank has error completions or
 * corrupt messages, else COMPLETED when every rank is done, else `stuck`: STALLED, TIMEOUT or
 * NO_PROGRESS, whichever ended the run) and the merged latency's summary. Returns whether
 * every rank is done. */
bool pp_run_result_finish(struct pp_run_result *res, enum pp_outcome stuck);
/* A hang report for res (res->outcome set): allocated and initialised for res->nranks ranks,
 * its trigger from the outcome, at res->sim_time_ns; the backend fills the ranks
 * (pp_hang_set_engine or pp_hang_set_rank) and calls pp_hang_analyze(). NULL when out of memory.
 * Free with pp_run_result_free (as res->hang) or pp_hang_free + free. */
struct pp_hang *pp_run_hang_new(const struct pp_run_result *res, uint64_t no_progress_ns);
void pp_run_result_free(struct pp_run_result *res);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
