/* Both ranks MPI_Send 1 MiB to each other first: a rendezvous send completes only once the
 * matching receive is posted, so neither ever reaches its MPI_Recv. prepost mpirun must end with
 * exit 3 and a hang report naming each rank's blocked MPI_Send and the wait-for cycle. */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

int main(int argc, char **argv)
{
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t n = 1 << 20;
  char *out = calloc(n, 1), *in = calloc(n, 1);
  int peer = rank ^ 1;
  printf("rank %d: sending 1 MiB to rank %d\n", rank, peer);
  MPI_Send(out, (int)n, MPI_BYTE, peer, 42, MPI_COMM_WORLD);
  MPI_Recv(in, (int)n, MPI_BYTE, peer, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  printf("rank %d: not reached\n", rank);
  MPI_Finalize();
  return 0;
}
