/* prepost mpirun (tools/mpi/README.md). */
#ifndef PP_MPIRUN_H
#define PP_MPIRUN_H

extern const char *const pp_mpirun_usage;
/* argv: what follows "mpirun"; the process's exit code */
int pp_mpirun_main(int argc, char **argv);

#endif
