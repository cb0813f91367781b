/* prepost mpirun (tools/mpi/README.md). */
#ifndef PP_MPIRUN_H
#define PP_MPIRUN_H

#include <stdint.h>

extern const char *const pp_mpirun_usage;
/* argv[0]: "mpirun", then its options, PROG and PROG's arguments; self: prepost's own argv
 * (NULL-terminated), to run itself again without address randomisation for --trace (see
 * reexec_without_aslr in mpirun.c); the process's exit code */
int pp_mpirun_main(int argc, char **argv, char **self);
/* In a forked child: a rank's environment (the link's fd, PMI_RANK/SIZE, the library first on
 * LD_LIBRARY_PATH), then exec of prog. Never returns. */
_Noreturn void pp_mpirun_exec_rank(char **prog, int fd, uint32_t rank, uint32_t n);

#endif
