/* A seeded race for prepost explore --program: rank 0 takes two messages from MPI_ANY_SOURCE and
 * wrongly assumes rank 1's comes first. Without faults it does (rank 1 is closer in the order of
 * events); jitter, losses or late completions let rank 2's arrive first on some seeds: exit 1. */
#include <stdio.h>

#include <mpi.h>

int main(int argc, char **argv)
{
  int rank, v = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Status st;
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
    int first = st.MPI_SOURCE;
    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
    if (first != 1) {
      printf("rank 0: rank %d's message came first\n", first);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else if (rank <= 2) {
    v = rank;
    MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
