/*
 * Scenario files (models/scenarios/NAME.yaml): what to run, on which platform and NIC model, with
 * which protocol, workload, QP attributes, faults and seed. The format is documented in
 * models/scenarios/README.md. Parsing never crashes on bad input: every error names file:line
 * and what was expected.
 */
#ifndef PP_SCENARIO_H
#define PP_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "prepost/simrun.h"

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
/* The same with `--set` assignments applied over the file's text: "KEY=VALUE" for a top-level
 * key (ranks=16) or "SECTION.KEY=VALUE" (qp.rnr_retry=7, p2p.eager_limit=8KiB,
 * platform.cluster.latency=2us); VALUE is YAML as in the file (a scalar, or [1, 3]) and goes
 * through the same checks; a later one wins. Errors in them read "FILE: --set A=B: ...". */
enum pp_status pp_scenario_load_set(const char *path, const char *models_dir,
                                    const char *const *sets, size_t nsets,
                                    struct pp_scenario *sc, char *err, size_t errlen);

/* true (and why) when the scenario's workload cannot do anything: a script with no send,
 * receive or probe, or the api workload (driven by an embedding program, not the CLI). */
bool pp_scenario_runs_nothing(const struct pp_scenario *sc, char *why, size_t whylen);

/* Every scenario key (section, key, kind, default, one sentence): `prepost help keys`. */
void pp_scenario_print_keys(FILE *out);

/* The keys of a scenario section, as the parser checks them and `help keys` lists them: its
 * field tables (prepost/param.h) in order. Section NULL is the top level, else "workload", "qp",
 * "p2p", "ring", "collective", "faults", "limits", "nic" (also a NIC profile file's keys),
 * "platform", "platform.cluster". Table i of the section into *t and *n; false past its last
 * table or for another name. (The top level also takes the section of a protocol with
 * parameters of its own, named after it: prepost/proto.h.) */
bool pp_scenario_section_table(const char *section, size_t i, const struct pp_param **t,
                               size_t *n);

/* limits.no_progress when a scenario does not say (1 s: simulated on SimGrid, wall clock on
 * verbs); 0 turns the bound off. */
#define PP_NO_PROGRESS_DEFAULT_NS 1000000000ull

/* Parses a duration as a scenario writes it ("500ns", "2us", "1.5ms", "10s", bare ns) for the
 * command-line option `key`; on error a sentence in err. */
enum pp_status pp_duration_parse(const char *text, const char *key, uint64_t *out, char *err,
                                 size_t errlen);

/* Loads a NIC profile file (models/nics/<name>.yaml) into p. */
enum pp_status pp_nic_profile_load(const char *path, struct pp_nic_profile *p, char *err,
                                   size_t errlen);

#endif
