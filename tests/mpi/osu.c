/*
 * An OSU-style point-to-point benchmark (the method of the OSU micro-benchmarks, written here):
 * one source for every MPI this project compares with (prepost mpirun in simulation and on
 * verbs, SMPI's smpicc, MPICH, Open MPI).
 *
 *   osu latency [OPTIONS]  ranks 0 and 1 ping-pong: one-way latency = round trip / 2
 *   osu bw [OPTIONS]       rank 0 sends windows of W messages to rank 1 (Isend / Irecv, Waitall),
 *                          rank 1 answers each window with 4 bytes: MB/s = bytes / time
 *   osu bibw [OPTIONS]     both directions at once, windows of W each way
 *   osu mbw [OPTIONS]      multi-pair: rank i < n/2 streams windows to rank i + n/2; the
 *                          aggregate MB/s and messages/s over every pair
 *
 * OPTIONS: -s SIZES (comma separated bytes, default 1,8,64,512,4096,32768,262144,1048576),
 * -i ITERS (per size, default 100; 1/10 of that above 64 KiB, at least 10), -w WINDOW (default
 * 64), -x WARMUP (default 10, 2 above 64 KiB), -m 1 (latency: the median of the iterations'
 * one-way times instead of their mean; wall-clock runs on a loaded or emulated host have long
 * tails). Rank 0 prints one line per size:
 *
 *   # osu MODE ranks N window W
 *   # size      value    msgs    (value: us one way for latency, MB/s (1e6 B/s) otherwise;
 *                                  the header says "us median" with -m 1)
 *   1           1.234    200
 *
 * msgs counts the messages of the timed part (warm-up excluded), so a caller can compute
 * messages per CPU-second. Every received byte is checked (exit 1 with a message otherwise).
 * Times are MPI_Wtime: simulated time under prepost mpirun and SMPI, wall time elsewhere.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 32
#define MAX_WINDOW 256
#define MAX_ITERS 100000

struct opt {
  long sizes[MAX_SIZES];
  int nsizes, iters, window, warmup, median;
  const char *mode;
};

static int rank, nranks;

static void die(const char *msg)
{
  fprintf(stderr, "osu: rank %d: %s\n", rank, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int parse(int argc, char **argv, struct opt *o)
{
  static const long def[] = {1, 8, 64, 512, 4096, 32768, 262144, 1048576};
  memcpy(o->sizes, def, sizeof(def));
  o->nsizes = (int)(sizeof(def) / sizeof(def[0]));
  o->iters = 100;
  o->window = 64;
  o->warmup = -1;
  o->median = 0;
  if (argc < 2)
    return -1;
  o->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-s")) {
      o->nsizes = 0;
      for (char *p = argv[i + 1]; *p && o->nsizes < MAX_SIZES;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > (1L << 26))
          return -1;
        o->sizes[o->nsizes++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
          return -1;
      }
    } else if (!strcmp(argv[i], "-i")) {
      o->iters = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "-w")) {
      o->window = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "-x")) {
      o->warmup = atoi(argv[i + 1]);
    } else if (!strcmp(argv[i], "-m")) {
      o->median = atoi(argv[i + 1]);
    } else {
      return -1;
    }
  }
  if (o->iters < 1 || o->iters > MAX_ITERS || o->window < 1 || o->window > MAX_WINDOW ||
      o->nsizes < 1 || (o->median != 0 && o->median != 1))
    return -1;
  return strcmp(o->mode, "latency") && strcmp(o->mode, "bw") && strcmp(o->mode, "bibw") &&
                 strcmp(o->mode, "mbw")
             ? -1
             : 0;
}

static unsigned char pattern(long i, int seq)
{
  return (unsigned char)(i * 31 + seq * 7 + 1);
}

static void fill(unsigned char *b, long n, int seq)
{
  for (long i = 0; i < n; i++)
    b[i] = pattern(i, seq);
}

static void check(const unsigned char *b, long n, int seq)
{
  for (long i = 0; i < n; i++)
    if (b[i] != pattern(i, seq))
      die("received data differs from what was sent");
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ranks 0 and 1; the others wait at the barrier. rt: iters round-trip times (median mode) or
 * NULL (the mean over the whole timed loop). */
static double latency(long size, int iters, int warmup, unsigned char *sb, unsigned char *rb,
                      double *rt)
{
  double t0 = 0, ti = 0;
  int peer = 1 - rank;
  fill(sb, size, rank);
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup)
      t0 = MPI_Wtime();
    if (rt)
      ti = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(sb, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(rb, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(rb, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(sb, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
    if (rt && i >= warmup)
      rt[i - warmup] = MPI_Wtime() - ti;
  }
  double t = MPI_Wtime() - t0;
  if (rank < 2)
    check(rb, size, peer);
  if (!rt)
    return t * 1e6 / (2.0 * iters);
  qsort(rt, (size_t)iters, sizeof(*rt), cmp_double);
  double m = iters % 2 ? rt[iters / 2] : (rt[iters / 2 - 1] + rt[iters / 2]) / 2;
  return m * 1e6 / 2.0;
}

/* Windows from `from` to `to` (both: each way); returns the time of the timed windows. */
static double stream(long size, int iters, int warmup, int window, int from, int to, int both,
                     unsigned char *sb, unsigned char *rb)
{
  MPI_Request req[2 * MAX_WINDOW];
  char ack[4] = {0};
  int sender = rank == from || (both && rank == to);
  int receiver = rank == to || (both && rank == from);
  int peer = rank == from ? to : from;
  double t0 = 0;
  fill(sb, size, rank);
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup)
      t0 = MPI_Wtime();
    int n = 0;
    for (int k = 0; receiver && k < window; k++)
      MPI_Irecv(rb + (size_t)k * size, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[n++]);
    for (int k = 0; sender && k < window; k++)
      MPI_Isend(sb, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[n++]);
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    /* the window is over when its receiver says so */
    if (rank == from) {
      MPI_Recv(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (both)
        MPI_Send(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    } else if (rank == to) {
      MPI_Send(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
      if (both)
        MPI_Recv(ack, 4, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  double t = MPI_Wtime() - t0;
  if (receiver)
    for (int k = 0; k < window; k++)
      check(rb + (size_t)k * size, size, peer);
  return t;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  struct opt o;
  if (parse(argc, argv, &o) != 0) {
    if (rank == 0)
      fprintf(stderr, "usage: osu latency|bw|bibw|mbw [-s SIZES] [-i ITERS] [-w WINDOW] "
                      "[-x WARMUP] [-m 1]\n");
    MPI_Finalize();
    return 2;
  }
  int mbw = !strcmp(o.mode, "mbw");
  if (nranks < 2 || (mbw && nranks % 2)) {
    if (rank == 0)
      fprintf(stderr, "osu: %s needs %s ranks\n", o.mode, mbw ? "an even number of" : "2 or more");
    MPI_Finalize();
    return 2;
  }
  long maxsize = 0;
  for (int i = 0; i < o.nsizes; i++)
    maxsize = o.sizes[i] > maxsize ? o.sizes[i] : maxsize;
  unsigned char *sb = malloc((size_t)maxsize);
  unsigned char *rb = malloc((size_t)maxsize * (size_t)o.window);
  double *rt = o.median ? malloc((size_t)o.iters * sizeof(*rt)) : NULL;
  if (!sb || !rb || (o.median && !rt))
    die("out of memory");
  int lat = !strcmp(o.mode, "latency"), both = !strcmp(o.mode, "bibw");
  int pairs = mbw ? nranks / 2 : 1;
  if (rank == 0) {
    printf("# osu %s ranks %d window %d\n", o.mode, nranks, lat ? 1 : o.window);
    printf("# %-10s %12s %10s\n", "size", lat ? (o.median ? "us median" : "us") : "MB/s", "msgs");
    fflush(stdout);
  }
  for (int s = 0; s < o.nsizes; s++) {
    long size = o.sizes[s];
    int big = size > 65536;
    int iters = big ? (o.iters / 10 > 10 ? o.iters / 10 : 10) : o.iters;
    int warmup = o.warmup >= 0 ? o.warmup : big ? 2 : 10;
    MPI_Barrier(MPI_COMM_WORLD);
    double value;
    long msgs;
    if (lat) {
      value = latency(size, iters, warmup, sb, rb, rt);
      msgs = 2L * iters;
    } else {
      int from = mbw ? rank % pairs : 0, to = mbw ? rank % pairs + pairs : 1;
      double t = stream(size, iters, warmup, o.window, from, to, both, sb, rb);
      double tmax;
      MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      msgs = (long)iters * o.window * pairs * (both ? 2 : 1);
      value = (double)size * (double)msgs / tmax / 1e6;
    }
    if (rank == 0) { /* each row as it is measured: a run stopped later still shows it */
      printf("%-12ld %12.3f %10ld\n", size, value, msgs);
      fflush(stdout);
    }
  }
  free(sb);
  free(rb);
  free(rt);
  MPI_Finalize();
  return 0;
}
