/* prepost mpirun (tools/mpi/README.md). */
#ifndef PP_MPIRUN_H
#define PP_MPIRUN_H

#include <stdint.h>

extern const char *const pp_mpirun_usage;
/* argv[0]: "mpirun", then its options, PROG and PROG's arguments; the process's exit code */
int pp_mpirun_main(int argc, char **argv);
/* In a forked child: a rank's environment (the link's fd, PMI_RANK/SIZE, the library first on
 * LD_LIBRARY_PATH), then exec of prog. Never returns. */
_Noreturn void pp_mpirun_exec_rank(char **prog, int fd, uint32_t rank, uint32_t n);

#endif
