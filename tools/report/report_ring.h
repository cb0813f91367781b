/* What a run of the ring protocols or the collective workload adds to the report (report.c
 * calls these; they print nothing for other runs). */
#ifndef PP_REPORT_RING_H
#define PP_REPORT_RING_H

#include <stdio.h>

#include "prepost/simrun.h"

/* The bandwidth figures of a collective run, the way nccl-tests computes them: time from the
 * end of the warmup iterations (the start when there are none) to the end of the last
 * iteration, both taken as the latest rank; algbw = bytes * iterations / time, busbw = algbw *
 * pp_coll_bus_factor(). Gbit/s (nccl-tests prints GB/s: divide by 8). */
struct pp_coll_figures {
  uint32_t iterations; /* measured (done, past the warmup) */
  uint64_t time_ns;
  double algbw_gbps, busbw_gbps, factor;
  uint64_t elements_checked, elements_wrong;
};
/* 0 and zeroed figures when the run is not a collective one or no iteration was measured. */
int pp_coll_figures(const struct pp_sim_config *cfg, const struct pp_run_result *res,
                    struct pp_coll_figures *out);

/* Appends `, "collective": {...}, "algbw_gbps": x, "busbw_gbps": y` (collective runs) and
 * `, "ring": {..., "connections": [...]}` (ring protocols) to the top-level JSON object. */
void pp_report_ring_json(FILE *out, const struct pp_sim_config *cfg,
                         const struct pp_run_result *res);
/* Credit stalls the table lists, longest first; the rest are counted. */
#define PP_REPORT_TOP_STALLS 8

/* A few lines under the table. */
void pp_report_ring_table(FILE *out, const struct pp_sim_config *cfg,
                          const struct pp_run_result *res);

#endif
