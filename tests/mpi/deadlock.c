/* Both ranks MPI_Send 1 MiB to each other first: a rendezvous send completes only once the
 * matching receive is posted, so neither ever reaches its MPI_Recv. prepost mpirun must end with
 * exit 3 and a hang report naming each rank's blocked MPI_Send and the wait-for cycle. With
 * argv[1] "split", on a communicator of the ranks in reverse order named "solver": the report
 * names it, with the peer as the program gave it (its rank there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

int main(int argc, char **argv)
{
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t n = 1 << 20;
  char *out = calloc(n, 1), *in = calloc(n, 1);
  MPI_Comm c = MPI_COMM_WORLD;
  if (argc > 1 && !strcmp(argv[1], "split")) {
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c);
    MPI_Comm_set_name(c, "solver");
    MPI_Comm_rank(c, &rank);
  }
  int peer = rank ^ 1;
  printf("rank %d: sending 1 MiB to rank %d\n", rank, peer);
  MPI_Send(out, (int)n, MPI_BYTE, peer, 42, c);
  MPI_Recv(in, (int)n, MPI_BYTE, peer, 42, c, MPI_STATUS_IGNORE);
  printf("rank %d: not reached\n", rank);
  MPI_Finalize();
  return 0;
}
