/*
 * What the tests that run one scenario on SimGrid per Test share (SimGrid allows one simulation
 * per process; Criterion runs every Test in its own): the scenario `sc` and the run's result
 * `res`, parsed or loaded and run with the failures asserted (Criterion), so a caller never
 * checks a result.
 */
#ifndef PP_TEST_SIM_CASE_H
#define PP_TEST_SIM_CASE_H

#include <stdio.h>

#include "prepost/simrun.h"

/* scenario.h's opening comment trips -Wcomment (see tools/scenario/scenario.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

extern struct pp_scenario sc;
extern struct pp_run_result res;

/* text as a scenario file "inline.yaml" into sc. */
void sim_parse(const char *text);
/* models/scenarios/NAME.yaml into sc. */
void sim_load(const char *name);
/* Runs sc in this process into res (the event log into `log` unless NULL). */
void sim_run(FILE *log);
/* Frees res (a suite's .fini, or part of it). */
void sim_fini(void);

#endif
