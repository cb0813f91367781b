/* Printing a hang analysis (prepost/hang.h): a readable report, or the JSON object that
 * `prepost run --json` and `prepost replay --hang --json` put under "hang". */
#ifndef PP_HANG_REPORT_H
#define PP_HANG_REPORT_H

#include <stdio.h>

#include "prepost/hang.h"

/* "hang: ..." then per rank what it waits for, the wait-for graph, the cycle and the cause;
 * "no hang: every rank's engine is done" when nobody is stuck. */
void pp_hang_print(FILE *out, const struct pp_hang *h);
/* {"stuck_ranks": n, "trigger": ..., "time_base": "sim"|"run"|"trace", "at_ns": ..., "cause": ..., "ranks": [...], "silent": [...],
 *  "edges": [...], "cycle": [...]} */
void pp_hang_json(FILE *out, const struct pp_hang *h);

#endif
