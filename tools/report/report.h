/* Printing a run's result: one JSON object, or a readable table. */
#ifndef PP_REPORT_H
#define PP_REPORT_H

#include <stdio.h>

#include "prepost/simrun.h"
#include "tools/cli/cli_util.h" /* pp_json_string */

void pp_report_json(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res);
void pp_report_table(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res);
/* The same for another backend ("verbs"): its name in the JSON, wall-clock time in the table. */
void pp_report_json_on(FILE *out, const struct pp_sim_config *cfg, const struct pp_run_result *res,
                       const char *backend);
void pp_report_table_on(FILE *out, const struct pp_sim_config *cfg,
                        const struct pp_run_result *res, const char *backend);

#endif
