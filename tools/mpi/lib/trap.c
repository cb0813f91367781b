/*
 * What a function of MPICH's ABI that the library does not implement yet does (the weak traps
 * gen_traps.cmake writes for every name of abi-functions.txt): it ends the job with a message
 * naming itself and MPI_ERR_UNSUPPORTED_OPERATION as the exit code, the way MPI_Abort would.
 * And the ABI's data symbols, so a binary that refers to them loads.
 */
#include <string.h>

#include "impl.h"

_Noreturn void pp_trap(const char *fn);

_Noreturn void pp_trap(const char *fn)
{
  const char *name = strncmp(fn, "PMPI_", 5) ? fn : fn + 1;
  pp_fatal(name, MPI_ERR_UNSUPPORTED_OPERATION,
           "not implemented by prepost's MPI yet (tools/mpi/README.md lists what is)");
}

static int unweighted, weights_empty;
int *const MPI_UNWEIGHTED = &unweighted;
int *const MPI_WEIGHTS_EMPTY = &weights_empty;
MPI_Fint *MPI_F_STATUS_IGNORE = 0;
MPI_Fint *MPI_F_STATUSES_IGNORE = 0;
