/* prepost mpirun --backend verbs (mpirun_verbs.c): an MPI program on an ibverbs device. */
#ifndef PP_MPIRUN_VERBS_H
#define PP_MPIRUN_VERBS_H

#include <stdint.h>

#include "prepost/run.h"
#include "prepost/verbsnic.h"

struct pp_mpirun_verbs_cfg {
  uint32_t n;            /* ranks running PROG */
  uint32_t engine_ranks; /* n, or 2 for -n 1 (a rank without a program is the engine's peer) */
  char **prog;
  const struct pp_run_cfg *run; /* protocol, p2p/QP parameters, seed */
  struct vnic_config nic;
  uint64_t poll_ns;
  uint64_t no_progress_ns; /* the hang bound (0: never) */
  uint64_t timeout_ns;     /* the job's bound (0: none) */
  uint32_t max_requests;
};

/* Runs the job; the process's exit code (as on the simulated backend; 4: the device or the
 * bootstrap failed, the message says). */
int pp_mpirun_verbs(const struct pp_mpirun_verbs_cfg *c);

#endif
