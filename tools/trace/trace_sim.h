/* The simulated backend's configuration in a trace header (sim.* keys), both ways, and what-if
 * overrides (`prepost replay --sim --set KEY=VALUE`). */
#ifndef PP_TRACE_SIM_H
#define PP_TRACE_SIM_H

#include <stddef.h>

#include "prepost/simrun.h"
#include "prepost/trace.h"

/* Writes sim.cfg (the struct's bytes), readable sim.* keys, the platform file's text (when it
 * has one) and the engine.* keys of cfg->engine. */
enum pp_status pp_trace_kv_sim_cfg(struct pp_trace_writer *w, const struct pp_sim_config *cfg);

/* Rebuilds the configuration of a simulated run from a trace header: sim.cfg when its size
 * matches this build, else the readable keys (a warning in note). If the platform file named in
 * the trace is missing here, its recorded text is written to a temporary file (its path in
 * cfg->platform.file; the caller unlinks it when tmp_platform is set). */
enum pp_status pp_trace_sim_cfg(const struct pp_trace *t, struct pp_sim_config *cfg,
                                bool *tmp_platform, char *note, size_t notelen);

/* One override "key=value": engine.* keys (engine/trace/trace_cfg.c) and the sim.* keys below. */
enum pp_status pp_trace_sim_cfg_set(struct pp_sim_config *cfg, const char *assignment, char *err,
                                    size_t errlen);
/* Every key that --set accepts, one per line with its current value. */
void pp_trace_sim_cfg_print(FILE *out, const struct pp_sim_config *cfg);

#endif
