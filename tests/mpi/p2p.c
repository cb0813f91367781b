/*
 * Point-to-point under prepost mpirun (2..4 ranks): blocking and non-blocking sends and receives
 * of every protocol size (eager, RGET, RPUT), synchronous sends, wildcards with the status they
 * fill, non-overtaking, Sendrecv, Probe/Iprobe with Get_count, Wait/Waitall/Waitany/Test/Testall,
 * MPI_PROC_NULL, cancel of an unmatched receive, truncation. Every byte is checked. Prints one
 * line per check with the simulated time, so two runs of a seed can be compared.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static unsigned char byte_at(size_t i, int seed)
{
  return (unsigned char)(i * 131 + (size_t)seed * 7 + (i >> 9));
}

static void fill(unsigned char *b, size_t n, int seed)
{
  for (size_t i = 0; i < n; i++)
    b[i] = byte_at(i, seed);
}

static void expect(const unsigned char *b, size_t n, int seed, const char *what)
{
  for (size_t i = 0; i < n; i++)
    CHECK(b[i] == byte_at(i, seed), "%s: byte %zu is %u, expected %u", what, i, b[i],
          byte_at(i, seed));
}

static void stamp(const char *what)
{
  printf("rank %d: %s at %.0f ns\n", rank, what, MPI_Wtime() * 1e9);
}

/* rank 0 -> 1 of every size class, blocking; the receiver checks status and count */
static void sizes(void)
{
  static const size_t n[] = {0, 1, 100, 4096, 12 << 10, (12 << 10) + 1, 64 << 10, 1 << 20,
                             (2 << 20) + 3};
  for (size_t k = 0; k < sizeof(n) / sizeof(n[0]); k++) {
    unsigned char *b = malloc(n[k] + 1);
    CHECK(b, "malloc");
    if (rank == 0) {
      fill(b, n[k], (int)k);
      CHECK_OK(MPI_Send(b, (int)n[k], MPI_BYTE, 1, 10 + (int)k, MPI_COMM_WORLD));
    } else if (rank == 1) {
      MPI_Status st;
      memset(b, 0, n[k] + 1);
      CHECK_OK(MPI_Recv(b, (int)n[k], MPI_BYTE, 0, 10 + (int)k, MPI_COMM_WORLD, &st));
      int count;
      MPI_Get_count(&st, MPI_BYTE, &count);
      CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 10 + (int)k && count == (int)n[k],
            "size %zu: source %d tag %d count %d", n[k], st.MPI_SOURCE, st.MPI_TAG, count);
      expect(b, n[k], (int)k, "sizes");
    }
    free(b);
  }
  stamp("sizes");
}

/* typed data: doubles, Get_count in elements and MPI_UNDEFINED for a partial element */
static void typed(void)
{
  double d[100];
  if (rank == 0) {
    for (int i = 0; i < 100; i++)
      d[i] = i * 0.5;
    CHECK_OK(MPI_Send(d, 100, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(d, 13, MPI_BYTE, 1, 2, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Status st;
    int count;
    CHECK_OK(MPI_Recv(d, 100, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &st));
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(count == 100, "count %d", count);
    for (int i = 0; i < 100; i++)
      CHECK(d[i] == i * 0.5, "d[%d] = %g", i, d[i]);
    CHECK_OK(MPI_Recv(d, 100, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, &st));
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(count == MPI_UNDEFINED, "13 bytes are no whole double: count %d", count);
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == 13, "count %d", count);
  }
}

/* every rank sends to every other with Isend/Irecv and Waitall; sources and tags in statuses */
static void all_to_all(void)
{
  enum { N = 3000 };
  unsigned char *out = malloc(N), *in = malloc((size_t)N * size);
  MPI_Request *r = malloc(sizeof(*r) * 2 * (size_t)size);
  MPI_Status *st = malloc(sizeof(*st) * 2 * (size_t)size);
  CHECK(out && in && r && st, "malloc");
  fill(out, N, rank);
  int k = 0;
  for (int p = 0; p < size; p++)
    if (p != rank)
      CHECK_OK(MPI_Irecv(in + (size_t)p * N, N, MPI_BYTE, p, 100 + p, MPI_COMM_WORLD, &r[k++]));
  for (int p = 0; p < size; p++)
    if (p != rank)
      CHECK_OK(MPI_Isend(out, N, MPI_BYTE, p, 100 + rank, MPI_COMM_WORLD, &r[k++]));
  CHECK_OK(MPI_Waitall(k, r, st));
  k = 0;
  for (int p = 0; p < size; p++)
    if (p != rank) {
      CHECK(st[k].MPI_SOURCE == p && st[k].MPI_TAG == 100 + p, "status %d: %d/%d", k,
            st[k].MPI_SOURCE, st[k].MPI_TAG);
      CHECK(r[k] == MPI_REQUEST_NULL, "Waitall frees the requests");
      expect(in + (size_t)p * N, N, p, "all_to_all");
      k++;
    }
  free(out), free(in), free(r), free(st);
  stamp("all_to_all");
}

/* wildcards: rank 0 takes one message of each other rank with ANY_SOURCE/ANY_TAG */
static void wildcards(void)
{
  if (rank == 0) {
    int seen[64] = {0};
    for (int i = 1; i < size; i++) {
      int v;
      MPI_Status st;
      CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      CHECK(st.MPI_SOURCE >= 1 && st.MPI_SOURCE < size && v == st.MPI_SOURCE * 11 &&
                st.MPI_TAG == 7 + st.MPI_SOURCE,
            "source %d tag %d value %d", st.MPI_SOURCE, st.MPI_TAG, v);
      CHECK(!seen[st.MPI_SOURCE]++, "rank %d twice", st.MPI_SOURCE);
      printf("rank 0: wildcard %d from rank %d\n", i, st.MPI_SOURCE);
    }
  } else {
    int v = rank * 11;
    CHECK_OK(MPI_Send(&v, 1, MPI_INT, 0, 7 + rank, MPI_COMM_WORLD));
  }
}

/* non-overtaking: messages of one sender with one tag arrive in order, ANY_TAG too */
static void order(void)
{
  enum { M = 50 };
  if (rank == 0) {
    MPI_Request r[M];
    int v[M];
    for (int i = 0; i < M; i++) {
      v[i] = i;
      CHECK_OK(MPI_Isend(&v[i], 1, MPI_INT, 1, i % 2, MPI_COMM_WORLD, &r[i]));
    }
    CHECK_OK(MPI_Waitall(M, r, MPI_STATUSES_IGNORE));
  } else if (rank == 1) {
    for (int i = 0; i < M; i++) {
      int v;
      CHECK_OK(MPI_Recv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(v == i, "message %d arrived as %d", i, v);
    }
  }
}

/* Issend completes only once the receive matched: rank 1 posts it only after a message rank 0
 * sends once it has seen its Issend incomplete for 20 polls */
static void synchronous(void)
{
  int v = 42;
  if (rank == 0) {
    MPI_Request r;
    int flag;
    CHECK_OK(MPI_Issend(&v, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r));
    for (int i = 0; i < 20; i++) { /* 20 polls: 2 us of simulated time */
      CHECK_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
      CHECK(!flag, "Issend completed before rank 1 posted its receive");
    }
    int go = 1;
    CHECK_OK(MPI_Send(&go, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL, "Wait frees");
    CHECK_OK(MPI_Ssend(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int go, w;
    CHECK_OK(MPI_Recv(&go, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Recv(&w, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(w == 42, "got %d", w);
    CHECK_OK(MPI_Recv(&w, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(w == 42, "got %d", w);
  }
  stamp("synchronous");
}

/* Sendrecv around a ring */
static void ring(void)
{
  int right = (rank + 1) % size, left = (rank + size - 1) % size, got = -1;
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 9, &got, 1, MPI_INT, left, 9, MPI_COMM_WORLD,
                        &st));
  CHECK(got == left && st.MPI_SOURCE == left && st.MPI_TAG == 9, "got %d from %d", got,
        st.MPI_SOURCE);
}

/* Probe tells source, tag and size before the receive; Iprobe polls */
static void probes(void)
{
  if (rank == 0) {
    unsigned char b[777];
    fill(b, sizeof(b), 5);
    CHECK_OK(MPI_Send(b, 777, MPI_BYTE, 1, 21, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(b, 300, MPI_BYTE, 1, 22, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Status st;
    int count, flag = 0, polls = 0;
    CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, &st));
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 21 && count == 777, "probe %d %d %d",
          st.MPI_SOURCE, st.MPI_TAG, count);
    unsigned char *b = malloc((size_t)count);
    CHECK_OK(MPI_Recv(b, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
    expect(b, 777, 5, "probe");
    free(b);
    while (!flag) {
      CHECK_OK(MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
      polls++;
    }
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(st.MPI_TAG == 22 && count == 300, "iprobe %d %d", st.MPI_TAG, count);
    unsigned char c[300];
    CHECK_OK(MPI_Recv(c, 300, MPI_BYTE, 0, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    printf("rank 1: iprobe found it after %d polls\n", polls);
  }
}

/* Waitany and Testall over two receives completing in a known order */
static void any_and_all(void)
{
  if (rank == 0) {
    int a = 1, b = 2;
    CHECK_OK(MPI_Send(&b, 1, MPI_INT, 1, 32, MPI_COMM_WORLD));
    int go;
    CHECK_OK(MPI_Recv(&go, 1, MPI_INT, 1, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Send(&a, 1, MPI_INT, 1, 31, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int a = 0, b = 0, idx, flag;
    MPI_Request r[3];
    MPI_Status st[3];
    CHECK_OK(MPI_Irecv(&a, 1, MPI_INT, 0, 31, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Irecv(&b, 1, MPI_INT, 0, 32, MPI_COMM_WORLD, &r[1]));
    r[2] = MPI_REQUEST_NULL;
    CHECK_OK(MPI_Waitany(3, r, &idx, &st[0]));
    CHECK(idx == 1 && b == 2 && st[0].MPI_TAG == 32 && r[1] == MPI_REQUEST_NULL,
          "waitany: index %d b %d", idx, b);
    CHECK_OK(MPI_Testall(3, r, &flag, st));
    CHECK(!flag && r[0] != MPI_REQUEST_NULL, "testall: the tag-31 receive cannot be complete");
    int go = 1;
    CHECK_OK(MPI_Send(&go, 1, MPI_INT, 0, 33, MPI_COMM_WORLD));
    for (flag = 0; !flag;)
      CHECK_OK(MPI_Testall(3, r, &flag, st));
    CHECK(a == 1 && st[0].MPI_TAG == 31 && st[0].MPI_SOURCE == 0, "testall: a %d", a);
    CHECK_OK(MPI_Waitany(3, r, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED, "waitany over null requests: %d", idx);
  }
}

/* MPI_PROC_NULL: complete at once, source MPI_PROC_NULL, count 0 */
static void proc_null(void)
{
  int v = 5;
  MPI_Status st;
  MPI_Request r;
  CHECK_OK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  CHECK_OK(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
  int count;
  MPI_Get_count(&st, MPI_INT, &count);
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0 && v == 5,
        "proc_null: %d %d %d", st.MPI_SOURCE, st.MPI_TAG, count);
  CHECK_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
  int flag;
  CHECK_OK(MPI_Test(&r, &flag, &st));
  CHECK(flag && r == MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_PROC_NULL, "proc_null irecv");
  CHECK_OK(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "probe proc_null");
}

/* a receive nobody matches is cancelled; Test_cancelled says so */
static void cancel(void)
{
  int v;
  MPI_Request r;
  MPI_Status st;
  CHECK_OK(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Cancel(&r));
  CHECK_OK(MPI_Wait(&r, &st));
  int c;
  MPI_Test_cancelled(&st, &c);
  CHECK(c, "the receive was not cancelled");
}

/* a message longer than the buffer: MPI_ERR_TRUNCATE with MPI_ERRORS_RETURN, what fits delivered */
static void truncation(void)
{
  if (rank == 0) {
    int v[4] = {1, 2, 3, 4};
    CHECK_OK(MPI_Send(v, 4, MPI_INT, 1, 50, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int v[2] = {0, 0};
    MPI_Status st;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int e = MPI_Recv(v, 2, MPI_INT, 0, 50, MPI_COMM_WORLD, &st);
    int cls;
    MPI_Error_class(e, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "error %d", e);
    CHECK(v[0] == 1 && v[1] == 2, "what fits is delivered: %d %d", v[0], v[1]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size >= 2, "run with 2 ranks or more");
  sizes();
  typed();
  all_to_all();
  wildcards();
  order();
  synchronous();
  ring();
  probes();
  any_and_all();
  proc_null();
  cancel();
  truncation();
  stamp("done");
  CHECK_OK(MPI_Finalize());
  return 0;
}
