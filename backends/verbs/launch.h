/*
 * Started by a cluster's launcher: what the launcher tells each process about the job.
 *
 * PMIx (pmix.c): mpirun (Open MPI/PRRTE) and `srun --mpi=pmix` start a PMIx server per node and
 * hand every process its namespace and rank (PMIX_NAMESPACE, PMIX_RANK, the server's URI); the
 * process asks the server for the job's size and every rank's host, and exchanges data with the
 * other ranks through the server's key-value store (PMIx_Put, PMIx_Commit, PMIx_Fence, PMIx_Get;
 * the PMIx standard, v4, chapters 6 and 7).
 *
 * Without PMIx, the launchers' environment (Open MPI's mpirun: OMPI_COMM_WORLD_RANK and
 * OMPI_COMM_WORLD_SIZE; Slurm's srun: SLURM_PROCID, SLURM_NTASKS and SLURM_NODELIST, a compressed
 * host list like "node[01-04,07],gpu5") gives rank and size; the TCP bootstrap then needs the
 * coordinator's address (--coordinator HOST:PORT; under Slurm by default the first host of
 * SLURM_NODELIST, where srun places task 0, at port 18515).
 */
#ifndef PP_VERBS_LAUNCH_H
#define PP_VERBS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot.h"

/* Which environment told us the rank. */
#define PP_LAUNCH_ENV_LIST(X)                                                                 \
  X(NONE, "none")                                                                             \
  X(OMPI, "Open MPI (OMPI_COMM_WORLD_RANK/SIZE)")                                             \
  X(SLURM, "Slurm (SLURM_PROCID/NTASKS)")

enum pp_launch_env_kind {
#define PP_X(id, desc) PP_LAUNCH_ENV_##id,
  PP_LAUNCH_ENV_LIST(PP_X)
#undef PP_X
};
const char *pp_launch_env_kind_desc(enum pp_launch_env_kind k);

struct pp_launch_env {
  enum pp_launch_env_kind kind;
  uint32_t rank, size;
  uint32_t nhosts;                   /* SLURM_NODELIST's hosts (0: not given) */
  char first_host[BOOT_HOST_MAX];    /* the first of them ("" when none) */
};

/* Reads the launcher's environment from envp (NULL-terminated "NAME=value" strings, as environ):
 * Open MPI's variables first (an mpirun inside a Slurm allocation sets both; its own are the
 * job's), else Slurm's. 1 found, 0 neither launcher's variables are set, -1 with a sentence
 * (a rank that is not a number, a rank not below the size, a host list that does not parse). */
int pp_launch_env_parse(char *const *envp, struct pp_launch_env *out, char *err, size_t errlen);

/* Expands a Slurm host list ("a,b[1-3,07],c[00-02]x") into at most max names (each
 * BOOT_HOST_MAX bytes, hosts[i * BOOT_HOST_MAX]); *n how many. Zero padding of ranges is kept
 * ("[08-10]": 08 09 10). hosts may be NULL (count only). 0, or -1 with a sentence (unbalanced
 * brackets, a bad range, more than max names, a name too long). */
int pp_launch_hostlist(const char *s, char *hosts, uint32_t max, uint32_t *n, char *err,
                       size_t errlen);

#endif
