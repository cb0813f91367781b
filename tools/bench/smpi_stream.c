/*
 * smpi_stream: the traffic of prepost's bench scenarios as an MPI program, so SimGrid's own MPI
 * simulation (SMPI: smpicc, smpirun) can be timed on it next to prepost (tools/bench-sim).
 *
 *   smpirun -np N -platform P.xml -hostfile H ./smpi_stream PATTERN MESSAGES SIZE
 *
 * PATTERN pair: rank 2i sends MESSAGES messages of SIZE bytes to rank 2i+1; ring: every rank i
 * sends MESSAGES to (i+1) mod N and receives as many from (i-1) mod N. Messages go in windows
 * of WINDOW non-blocking sends and receives, each window waited for as a whole (a stream with a
 * bounded number in flight, as prepost's stream workload keeps the receive queue posted). Every
 * message's first bytes carry its sequence number and are checked. The receiver hands the
 * window back with one empty message once it has every message of it (the sender waits for
 * that before the next window): flow control, as prepost's protocols keep it. Without it SMPI's
 * small sends complete at once (detached), the sender runs ahead and the receiver's unexpected
 * queue grows with the run (SMPI's cost then grows with the square of the messages: 2,000
 * messages 0.37 CPU-s, 20,000 76 CPU-s). Rank 0 prints one line:
 *
 *   smpi_stream ranks=N messages=TOTAL sim_time_s=T
 *
 * with TOTAL the messages received over every rank and T the simulated time (MPI_Wtime).
 * Exit 1 on a wrong message or a bad argument.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define MAX_SIZE (1 << 20)

static int parse(const char *s, long lo, long hi, long *out)
{
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* Sends (dest >= 0) and receives (src >= 0) `messages` in windows; returns the bad ones. */
static long stream(int dest, int src, long messages, long size, char *sbuf, char *rbuf)
{
  MPI_Request req[2 * WINDOW];
  long bad = 0;
  for (long base = 0; base < messages; base += WINDOW) {
    int n = 0, w = messages - base < WINDOW ? (int)(messages - base) : WINDOW;
    for (int i = 0; src >= 0 && i < w; i++)
      MPI_Irecv(rbuf + (size_t)i * size, (int)size, MPI_BYTE, src, 0, MPI_COMM_WORLD, &req[n++]);
    for (int i = 0; dest >= 0 && i < w; i++) {
      uint64_t seq = (uint64_t)(base + i);
      memcpy(sbuf + (size_t)i * size, &seq, sizeof seq);
      MPI_Isend(sbuf + (size_t)i * size, (int)size, MPI_BYTE, dest, 0, MPI_COMM_WORLD, &req[n++]);
    }
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    if (src >= 0) /* the window is back */
      MPI_Send(NULL, 0, MPI_BYTE, src, 1, MPI_COMM_WORLD);
    if (dest >= 0)
      MPI_Recv(NULL, 0, MPI_BYTE, dest, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; src >= 0 && i < w; i++) {
      uint64_t seq;
      memcpy(&seq, rbuf + (size_t)i * size, sizeof seq);
      bad += seq != (uint64_t)(base + i);
    }
  }
  return bad;
}

int main(int argc, char **argv)
{
  int rank, n;
  long messages, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int pair = argc == 4 && strcmp(argv[1], "pair") == 0;
  if (argc != 4 || (!pair && strcmp(argv[1], "ring") != 0) ||
      parse(argv[2], 1, 100000000, &messages) || parse(argv[3], 8, MAX_SIZE, &size) || n < 2 ||
      (pair && n % 2)) {
    if (rank == 0)
      fprintf(stderr, "usage: smpi_stream pair|ring MESSAGES SIZE (8..%d bytes; pair: an even "
                      "number of ranks)\n", MAX_SIZE);
    MPI_Finalize();
    return 1;
  }
  int dest = pair ? (rank % 2 == 0 ? rank + 1 : -1) : (rank + 1) % n;
  int src = pair ? (rank % 2 == 1 ? rank - 1 : -1) : (rank + n - 1) % n;
  char *sbuf = malloc((size_t)WINDOW * size), *rbuf = malloc((size_t)WINDOW * size);
  if (!sbuf || !rbuf) {
    fprintf(stderr, "smpi_stream: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sbuf, 0, (size_t)WINDOW * size);
  double t0 = MPI_Wtime();
  long bad = stream(dest, src, messages, size, sbuf, rbuf);
  long got = src >= 0 ? messages - bad : 0, total = 0, bad_total = 0;
  MPI_Reduce(&got, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&bad, &bad_total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  double t = MPI_Wtime() - t0;
  if (rank == 0)
    printf("smpi_stream ranks=%d messages=%ld sim_time_s=%.9f\n", n, total, t);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  if (rank == 0 && bad_total) {
    fprintf(stderr, "smpi_stream: %ld messages out of order or wrong\n", bad_total);
    return 1;
  }
  return 0;
}
