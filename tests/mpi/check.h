/* The MPI test programs' assertion: a failed CHECK names file:line and the condition and ends
 * the job with MPI_Abort's exit code 99 (the test expects 0). */
#ifndef PP_MPI_TEST_CHECK_H
#define PP_MPI_TEST_CHECK_H

#include <mpi.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      MPI_Abort(MPI_COMM_WORLD, 99);                                           \
    }                                                                          \
  } while (0)

#define CHECK_OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

#endif
