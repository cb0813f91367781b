/* The failure paths of prepost mpirun: argv[1] says which. "abort": rank 1 calls MPI_Abort with
 * code 7 while rank 0 waits in MPI_Recv (exit 7); "unsupported": a function of the ABI the
 * library does not implement (MPI_Win_fence: exit MPI_ERR_UNSUPPORTED_OPERATION, 44, naming it); "fatal": an invalid rank under MPI_ERRORS_ARE_FATAL (exit MPI_ERR_RANK, 6); "comm": a
 * communicator that was freed, under MPI_ERRORS_ARE_FATAL (exit MPI_ERR_COMM, 5); "exit":
 * rank 1 exits 5 without MPI_Finalize (exit 5); "crash": rank 0 is killed by SIGSEGV (exit 139);
 * "requests": rank 1 posts more receives than the engine's p2p.max_requests (1024 by default:
 * exit MPI_ERR_NO_MEM, 34, the launcher naming the bound). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

int main(int argc, char **argv)
{
  int rank, v = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *what = argc > 1 ? argv[1] : "";
  if (rank == 0 && strcmp(what, "crash")) {
    MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return 1; /* not reached */
  }
  if (!strcmp(what, "abort")) {
    MPI_Abort(MPI_COMM_WORLD, 7);
  } else if (!strcmp(what, "unsupported")) {
    MPI_Win_fence(0, MPI_WIN_NULL);
  } else if (!strcmp(what, "fatal")) {
    MPI_Send(&v, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
  } else if (!strcmp(what, "comm")) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_SELF, 0, 0, &c); /* its handle on MPI_COMM_SELF: no other rank */
    MPI_Comm freed = c;
    MPI_Comm_free(&c);
    MPI_Comm_rank(freed, &v);
  } else if (!strcmp(what, "exit")) {
    exit(5);
  } else if (!strcmp(what, "requests")) {
    static int b[5000];
    static MPI_Request r[5000];
    for (int i = 0; i < 5000; i++)
      MPI_Irecv(&b[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, &r[i]);
  } else if (!strcmp(what, "crash")) {
    if (rank == 0)
      raise(SIGSEGV);
    MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  printf("rank %d: not reached (%s)\n", rank, what);
  return 1;
}
