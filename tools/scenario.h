/*
 * Scenario files (models/scenarios/NAME.yaml): what to run, on which platform and NIC model, with
 * which protocol, workload, QP attributes, faults and seed. The format is documented in
 * models/scenarios/README.md. Parsing never crashes on bad input: every error names file:line
 * and what was expected.
 */
#ifndef PP_SCENARIO_H
#define PP_SCENARIO_H

#include <stddef.h>

#include "backends/simgrid/simrun.h"

struct pp_scenario {
  char path[PP_PATH_MAX];
  struct pp_sim_config sim;
};

/* Fills sc with the defaults every key falls back to. */
void pp_scenario_defaults(struct pp_scenario *sc);

/*
 * Parses the YAML text of a scenario. `path` is used in error messages and to resolve relative
 * paths (platform files, NIC profiles) against `models_dir` (e.g. "<repo>/models"). On error
 * returns PP_PARSE (or PP_INVALID for an impossible value, PP_IO for a missing referenced file)
 * and writes "file:line: message" into err.
 */
enum pp_status pp_scenario_parse(const char *text, size_t len, const char *path,
                                 const char *models_dir, struct pp_scenario *sc, char *err,
                                 size_t errlen);
/* Reads and parses a file. */
enum pp_status pp_scenario_load(const char *path, const char *models_dir, struct pp_scenario *sc,
                                char *err, size_t errlen);
/* Loads a NIC profile file (models/nics/<name>.yaml) into p. */
enum pp_status pp_nic_profile_load(const char *path, struct pp_nic_profile *p, char *err,
                                   size_t errlen);

#endif
