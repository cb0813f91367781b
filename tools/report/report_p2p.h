/* What a run of the p2p protocols (eager, rndv) adds to the report (report.c calls these; they
 * print nothing for other runs). */
#ifndef PP_REPORT_P2P_H
#define PP_REPORT_P2P_H

#include <stdio.h>

#include "prepost/simrun.h"

/* Appends `, "p2p": [per-rank counters], "receives": [...]` to the top-level JSON object. The
 * receives are one object per completed receive, rank by rank, each rank's in completion
 * order: rank, source, tag, comm, size (bytes delivered), msg_len, status (ok, truncated,
 * cancelled, failed), protocol (eager, rndv-put, rndv-get), checksum (16 hex digits of the
 * pp_p2p_checksum of the bytes delivered), and wc_status for a failed one. */
void pp_report_p2p_json(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res);
/* A few lines under the table. */
void pp_report_p2p_table(FILE *out, const struct pp_sim_config *cfg,
                         const struct pp_run_result *res);

#endif
