/*
 * The actor side of `prepost mpirun` on the simulated backend: each rank's actor serves the
 * requests of its rank process (link.h) on the rank's engine. The only file of the MPI code that
 * calls the engine (pp_p2p_*): when the engine's application callbacks land, this is what moves
 * onto them.
 */
#ifndef PP_MPI_SERVE_H
#define PP_MPI_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "prepost/simrun.h"

struct pp_mpi_srv;

/* The time model (README "Time"): an MPI call that finds nothing to do (a test or probe that
 * fails, MPI_Wtime) lets `poll_ns` of simulated time pass before the rank's next call. */
struct pp_mpi_srv_cfg {
  uint32_t nranks;
  uint64_t poll_ns;
  uint32_t max_requests; /* outstanding requests per rank */
};

/* fds[i], pids[i]: rank i's end of its socketpair and its process (already started, waiting for
 * the go byte in the library's constructor). The server owns the fds from then on. */
enum pp_status pp_mpi_srv_create(const struct pp_mpi_srv_cfg *cfg, const int *fds,
                                 const pid_t *pids, struct pp_mpi_srv **out);
/* The application table pp_sim_set_hook() takes. */
const struct pp_sim_hook *pp_mpi_srv_app(struct pp_mpi_srv *s);
/* After the simulation: kills and reaps the rank processes still alive. */
void pp_mpi_srv_reap(struct pp_mpi_srv *s);
/* The launcher's exit code: 0 when every rank finalized and exited 0; the code of MPI_Abort; the
 * first failing rank's exit status (128 + signal); -1 when ranks are still blocked (a hang). */
int pp_mpi_srv_exit_code(const struct pp_mpi_srv *s);
/* Says why the run ended when it did not end well (an abort, a rank that died, a hang: every
 * rank's blocked MPI call and the wait-for cycle). */
void pp_mpi_srv_report(const struct pp_mpi_srv *s, uint64_t end_ns, FILE *out);
void pp_mpi_srv_destroy(struct pp_mpi_srv *s);

/* One rank on a device (`--backend verbs`, mpirun_verbs.c): the server of one rank process in
 * that rank's own process (the other ranks' fds -1, pids 0), driven from the rank's progress
 * loop instead of the simulator's hook. */
/* The hook's step, called after every progress pass; `now` ns since the job's start. Serves
 * the rank's requests while it runs (a blocking read), checks a blocked or sleeping call. */
uint64_t pp_mpi_srv_step(struct pp_mpi_srv *s, uint32_t rank, struct pp_engine *e, uint64_t now);
/* The rank's process has exited (or aborted, or the server stopped). */
bool pp_mpi_srv_rank_ended(const struct pp_mpi_srv *s, uint32_t rank);
/* Once ended: the rank's exit code as pp_mpi_srv_exit_code gives it (0 finalized and exited 0),
 * *aborted when it called MPI_Abort, why: the sentence (empty when it ended well); -1 before. */
int pp_mpi_srv_rank_exit(const struct pp_mpi_srv *s, uint32_t rank, bool *aborted, char *why,
                         size_t len);
/* Blocked in a blocking MPI call? *served: requests the rank made so far. */
bool pp_mpi_srv_rank_blocked(const struct pp_mpi_srv *s, uint32_t rank, uint64_t *served);
/* The rank its blocked call waits for, -1 (none, any). */
int32_t pp_mpi_srv_rank_waits_for(const struct pp_mpi_srv *s, uint32_t rank);
/* The hang report's line for the rank ("  rank R: blocked in MPI_Send(...)..."). */
void pp_mpi_srv_report_rank(const struct pp_mpi_srv *s, uint32_t rank, FILE *out);

#endif
