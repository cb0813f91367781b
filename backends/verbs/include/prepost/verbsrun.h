/*
 * The verbs driver (the counterpart of backends/simgrid/simrun.c): runs a scenario's engines on a
 * real ibverbs device, one process per rank, time from CLOCK_MONOTONIC in nanoseconds.
 *
 * Two ways to start:
 *  - launcher (rank < 0): this process is the coordinator and forks one process per rank, all on
 *    this machine and (by default) on one device;
 *  - rank table (rank >= 0): this process runs one rank; rank 0 also runs the coordinator (a
 *    thread) on the table's first address. Start one process per rank, on any hosts.
 * The coordinator (or rank 0) gets the whole run's result; other ranks get the outcome only.
 */
#ifndef PP_VERBSRUN_H
#define PP_VERBSRUN_H

#include <stdbool.h>
#include <stdio.h>

#include "prepost/run.h"
#include "prepost/verbsnic.h"

#include "prepost/export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_verbs_app; /* prepost/verbsapp.h */

#define PP_VERBS_DEFAULT_PORT 18515
#define PP_VERBS_SECRET_BYTES 32

struct pp_verbs_rank_entry {
  char host[256];
  uint16_t port;
  char device[VNIC_NAME_MAX]; /* "" = the --device option, else the first active port */
};

/* Recording (`--trace`): every rank process records its engine through prepost/trace.h into its
 * own complete trace file, "PATH.rank<N>" (flushed every 100 ms, so a killed rank leaves a
 * readable prefix); the launcher's caller merges them into PATH (pp_trace_merge). Time stamps
 * count from origin_ns (CLOCK_MONOTONIC; 0: the rank process's own start). */
struct pp_verbs_trace {
  const char *path;
  const char *version;    /* prepost.version */
  const char *commit;     /* prepost.commit (NULL: no key) */
  uint32_t capture_bytes; /* trace.capture_bytes */
  uint64_t origin_ns;
};
/* The part file of rank `rank` of trace `path`. */
void pp_verbs_trace_part(const char *path, uint32_t rank, char *out, size_t len);

/* How a rank waits for completions (verbsrun.c's progress engine). X(id, name, description) */
#define PP_VERBS_PROGRESS_LIST(X)                                                             \
  X(BUSY, "busy", "busy-poll the CQs, never sleep (the default: latency)")                    \
  X(EVENT, "event", "sleep on the completion channel when there is nothing to do (idle CPU)")

enum pp_verbs_progress {
#define PP_X(id, name, desc) PP_VERBS_PROGRESS_##id,
  PP_VERBS_PROGRESS_LIST(PP_X)
#undef PP_X
  PP_VERBS_PROGRESS_COUNT
};
const char *pp_verbs_progress_name(enum pp_verbs_progress m);
/* The mode named s, or -1. */
int pp_verbs_progress_from_name(const char *s);

/* How this process learns its rank and meets the others. X(id, name, description) */
#define PP_VERBS_LAUNCH_LIST(X)                                                               \
  X(AUTO, "auto", "table with --rank, else pmix under a PMIx launcher, else env with "       \
                  "--coordinator, else fork")                                                 \
  X(FORK, "fork", "this process coordinates and forks every rank on this machine")            \
  X(TABLE, "table", "one rank per process, --rank R --ranks TABLE")                           \
  X(ENV, "env", "one rank per process, rank and size from Open MPI's or Slurm's environment, " \
                "the TCP bootstrap at --coordinator")                                         \
  X(PMIX, "pmix", "one rank per process, started by a PMIx launcher (mpirun, srun "           \
                  "--mpi=pmix): rank, size, hosts and connection information through PMIx")

enum pp_verbs_launch {
#define PP_X(id, name, desc) PP_VERBS_LAUNCH_##id,
  PP_VERBS_LAUNCH_LIST(PP_X)
#undef PP_X
  PP_VERBS_LAUNCH_COUNT
};
const char *pp_verbs_launch_name(enum pp_verbs_launch m);
/* The mode named s, or -1. */
int pp_verbs_launch_from_name(const char *s);

struct pp_verbs_opts {
  struct vnic_config nic;
  int rank;                            /* -1: launcher mode */
  struct pp_verbs_rank_entry *table;   /* rank table (nranks entries) or NULL in launcher mode */
  uint32_t ntable;
  char coord_host[256];                /* launcher mode: where the coordinator listens */
  uint16_t coord_port;                 /* launcher mode: 0 = any free port */
  uint64_t boot_timeout_ns;            /* each bootstrap step (0: 20 s) */
  uint64_t run_timeout_ns;             /* the data phase (0: 120 s) */
  enum pp_verbs_progress progress;     /* busy (0, the default) or event */
  int log_fd;                          /* -1: no event log; else one line per completion/event */
  struct pp_verbs_trace trace;         /* trace.path NULL: no trace */
  /* The job secret that authenticates the bootstrap (backends/verbs/boot.h). Launcher mode
   * makes one when has_secret is false; rank table mode needs it (the same on every host). */
  uint8_t secret[PP_VERBS_SECRET_BYTES];
  bool has_secret;
  enum pp_verbs_launch launch;         /* auto (0, the default) */
  /* "HOST[:PORT]" (port 18515 by default) or "": env mode: the coordinator every rank connects
   * to and rank 0 listens on; pmix mode: where rank 0's coordinator listens (default: the IPv4
   * address of its RoCE GID, else its host name, any free port). */
  char coordinator[300];
  /* An application's ranks (prepost/verbsapp.h, pp_verbs_run_app sets it); NULL: the
   * configuration's workload. */
  const struct pp_verbs_app *app;
};

void pp_verbs_opts_default(struct pp_verbs_opts *o);

/* Parses a rank table: a file with one "HOST[:PORT] [DEVICE]" line per rank ('#' comments), or
 * a comma-separated "HOST[:PORT],HOST[:PORT],..." list. Only rank 0's port is used (the
 * coordinator listens there; default 18515). 0, or -1 with file:line in err. */
int pp_verbs_parse_table(const char *spec, struct pp_verbs_rank_entry **out, uint32_t *n,
                         char *err, size_t errlen);

/*
 * Runs the scenario (a scenario's pp_sim_config gives cfg with pp_sim_run_cfg, prepost/simrun.h).
 * *reporter is set when this process holds the whole result (launcher or rank 0): res is then
 * filled as pp_sim_run fills it (the run contract, prepost/run.h; free with pp_run_result_free);
 * on other ranks only res->outcome is set. Returns PP_OK when the run happened (whatever its outcome);
 * otherwise the backend could not start or the bootstrap failed, and err names what failed.
 */
enum pp_status pp_verbs_run(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                            struct pp_run_result *res, bool *reporter, char *err, size_t errlen);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
