/*
 * The rest of point-to-point under prepost mpirun (2..3 ranks): ready and buffered sends with
 * the attached buffer's accounting, Sendrecv_replace, matched probes (Mprobe/Improbe/Mrecv/
 * Imrecv, MPI_MESSAGE_NO_PROC), cancel of sends, Request_free of active requests,
 * Request_get_status, persistent requests, MPI_PROC_NULL in every call that takes it,
 * Status_set_*, messages of a rank to itself (ordering, probes, wildcards, MPI_COMM_SELF), and
 * the error classes of invalid arguments. Every byte is checked.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static int cls_of(int e)
{
  int c;
  MPI_Error_class(e, &c);
  return c;
}

static void stamp(const char *what)
{
  printf("rank %d: %s at %.0f ns\n", rank, what, MPI_Wtime() * 1e9);
}

static int count_of(const MPI_Status *st, MPI_Datatype dt)
{
  int n;
  CHECK_OK(MPI_Get_count(st, dt, &n));
  return n;
}

/* Rsend / Irsend to a receive posted before (a barrier says so) */
static void ready(void)
{
  int v[8];
  if (rank == 1) {
    MPI_Request r[2];
    int w[8];
    CHECK_OK(MPI_Irecv(v, 8, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Irecv(w, 8, MPI_INT, 0, 2, MPI_COMM_WORLD, &r[1]));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 8; i++)
      CHECK(v[i] == i * 3 && w[i] == i * 5, "ready: %d %d at %d", v[i], w[i], i);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      int w[8];
      for (int i = 0; i < 8; i++)
        v[i] = i * 3, w[i] = i * 5;
      MPI_Request r;
      CHECK_OK(MPI_Rsend(v, 8, MPI_INT, 1, 1, MPI_COMM_WORLD));
      CHECK_OK(MPI_Irsend(w, 8, MPI_INT, 1, 2, MPI_COMM_WORLD, &r));
      CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
  }
  stamp("ready");
}

/* Bsend / Ibsend: what fits the attached buffer (size + MPI_BSEND_OVERHEAD each), MPI_ERR_BUFFER
 * for what does not, Buffer_detach waits for the messages and gives the buffer back */
static void buffered(void)
{
  enum { N = 1000 };
  if (rank == 0) {
    int psize;
    CHECK_OK(MPI_Pack_size(N, MPI_CHAR, MPI_COMM_WORLD, &psize));
    CHECK(psize == N, "Pack_size %d", psize);
    int bsize = 2 * (psize + MPI_BSEND_OVERHEAD);
    char *bbuf = malloc((size_t)bsize), *m = malloc(4 * N);
    CHECK(bbuf && m, "malloc");
    for (int i = 0; i < 4 * N; i++)
      m[i] = (char)(i * 7);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(cls_of(MPI_Bsend(m, 1, MPI_CHAR, 1, 20, MPI_COMM_WORLD)) == MPI_ERR_BUFFER,
          "Bsend without a buffer attached");
    CHECK_OK(MPI_Buffer_attach(bbuf, bsize));
    CHECK(cls_of(MPI_Buffer_attach(bbuf, bsize)) == MPI_ERR_BUFFER, "a second buffer");
    CHECK(cls_of(MPI_Bsend(m, 3 * N, MPI_CHAR, 1, 20, MPI_COMM_WORLD)) == MPI_ERR_BUFFER,
          "a message larger than the buffer");
    CHECK_OK(MPI_Bsend(m, N, MPI_CHAR, 1, 21, MPI_COMM_WORLD));
    MPI_Request r;
    CHECK_OK(MPI_Ibsend(m + N, N, MPI_CHAR, 1, 22, MPI_COMM_WORLD, &r));
    int flag;
    CHECK_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag && r == MPI_REQUEST_NULL, "an Ibsend is complete once buffered");
    memset(m, 0, 2 * N); /* the buffer holds the copies */
    /* the buffer is full: no time passed, nothing went out yet */
    CHECK(cls_of(MPI_Bsend(m, 1, MPI_CHAR, 1, 23, MPI_COMM_WORLD)) == MPI_ERR_BUFFER,
          "the buffer is full");
    void *back;
    int bs;
    CHECK_OK(MPI_Buffer_detach(&back, &bs));
    CHECK(back == bbuf && bs == bsize, "detach gives the buffer back: %p %d", back, bs);
    CHECK_OK(MPI_Buffer_attach(bbuf, bsize)); /* empty again: two more fit */
    CHECK_OK(MPI_Bsend(m + 2 * N, N, MPI_CHAR, 1, 24, MPI_COMM_WORLD));
    CHECK_OK(MPI_Bsend(m + 3 * N, N, MPI_CHAR, 1, 25, MPI_COMM_WORLD));
    CHECK_OK(MPI_Buffer_detach(&back, &bs));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(bbuf);
    free(m);
  } else if (rank == 1) {
    char *m = malloc(N);
    CHECK(m, "malloc");
    for (int k = 0; k < 4; k++) {
      MPI_Status st;
      int tag = k < 2 ? 21 + k : 22 + k;
      CHECK_OK(MPI_Recv(m, N, MPI_CHAR, 0, tag, MPI_COMM_WORLD, &st));
      CHECK(count_of(&st, MPI_CHAR) == N, "count");
      for (int i = 0; i < N; i++)
        CHECK(m[i] == (char)((k * N + i) * 7), "buffered %d: byte %d", k, i);
    }
    free(m);
  }
  stamp("buffered");
}

/* Sendrecv_replace around the ring, and with the rank itself */
static void replace(void)
{
  int v[100];
  for (int i = 0; i < 100; i++)
    v[i] = rank * 1000 + i;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv_replace(v, 100, MPI_INT, right, 30, left, 30, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 30 && count_of(&st, MPI_INT) == 100, "status");
  for (int i = 0; i < 100; i++)
    CHECK(v[i] == left * 1000 + i, "replace: v[%d] = %d", i, v[i]);
  CHECK_OK(MPI_Sendrecv_replace(v, 100, MPI_INT, rank, 31, rank, 31, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_SOURCE == rank && v[7] == left * 1000 + 7, "replace with itself");
  stamp("replace");
}

/* Mprobe / Improbe / Mrecv / Imrecv: the matched message is nobody else's */
static void matched(void)
{
  if (rank == 0) {
    int a[4] = {1, 2, 3, 4}, b[6] = {5, 6, 7, 8, 9, 10};
    CHECK_OK(MPI_Send(a, 4, MPI_INT, 1, 40, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(b, 6, MPI_INT, 1, 41, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(a, 4, MPI_INT, 1, 42, MPI_COMM_WORLD));
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (rank == 1) {
    MPI_Message m1, m2;
    MPI_Status st;
    CHECK_OK(MPI_Mprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &m1, &st));
    CHECK(st.MPI_TAG == 40 && count_of(&st, MPI_INT) == 4 && m1 != MPI_MESSAGE_NULL,
          "Mprobe: tag %d", st.MPI_TAG);
    /* the matched message is off the queue: a wildcard receive gets the next one */
    int b[6] = {0};
    CHECK_OK(MPI_Recv(b, 6, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_TAG == 41 && b[5] == 10, "the next message: tag %d", st.MPI_TAG);
    int flag = 0;
    while (!flag)
      CHECK_OK(MPI_Improbe(MPI_ANY_SOURCE, 42, MPI_COMM_WORLD, &flag, &m2, &st));
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 42, "Improbe");
    int a[4] = {0};
    CHECK_OK(MPI_Mrecv(a, 4, MPI_INT, &m1, &st));
    CHECK(m1 == MPI_MESSAGE_NULL && st.MPI_TAG == 40 && a[0] == 1 && a[3] == 4, "Mrecv");
    /* a buffer too small: what fits, MPI_ERR_TRUNCATE */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(a, 0, sizeof(a));
    MPI_Request r;
    CHECK_OK(MPI_Imrecv(a, 2, MPI_INT, &m2, &r));
    int e = MPI_Wait(&r, &st);
    CHECK(cls_of(e) == MPI_ERR_TRUNCATE && a[0] == 1 && a[1] == 2 && a[2] == 0, "truncated");
    CHECK(count_of(&st, MPI_INT) == 2, "count %d", count_of(&st, MPI_INT));
    CHECK(cls_of(MPI_Mrecv(a, 2, MPI_INT, &m2, &st)) == MPI_ERR_REQUEST, "MPI_MESSAGE_NULL");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
  /* MPI_PROC_NULL: the message MPI_MESSAGE_NO_PROC */
  MPI_Message m;
  MPI_Status st;
  int flag = 0, x = 5;
  CHECK_OK(MPI_Improbe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &m, &st));
  CHECK(flag && m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "Improbe PROC_NULL");
  CHECK_OK(MPI_Mrecv(&x, 1, MPI_INT, &m, &st));
  CHECK(m == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG &&
            count_of(&st, MPI_INT) == 0 && x == 5,
        "Mrecv of MPI_MESSAGE_NO_PROC");
  CHECK_OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
  CHECK(m == MPI_MESSAGE_NO_PROC, "Mprobe PROC_NULL");
  MPI_Request r;
  CHECK_OK(MPI_Imrecv(&x, 1, MPI_INT, &m, &r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Imrecv of MPI_MESSAGE_NO_PROC");
  stamp("matched");
}

/* Cancel of a send: to another rank it runs to completion (not cancelled); to the rank itself,
 * before it matched, it is cancelled and never received */
static void cancel_send(void)
{
  int v = 77, flag;
  MPI_Status st;
  if (rank == 0) {
    MPI_Request r;
    CHECK_OK(MPI_Isend(&v, 1, MPI_INT, 1, 50, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Cancel(&r));
    CHECK_OK(MPI_Wait(&r, &st));
    CHECK_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag, "a send on the engine is not cancelled");
  } else if (rank == 1) {
    int w = 0;
    CHECK_OK(MPI_Recv(&w, 1, MPI_INT, 0, 50, MPI_COMM_WORLD, &st));
    CHECK(w == 77, "the send not cancelled arrives");
  }
  MPI_Request r;
  CHECK_OK(MPI_Issend(&v, 1, MPI_INT, rank, 51, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
  CHECK(!flag, "a synchronous send to oneself waits for its receive");
  CHECK_OK(MPI_Cancel(&r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag, "an unmatched send to oneself is cancelled");
  CHECK_OK(MPI_Iprobe(rank, 51, MPI_COMM_WORLD, &flag, &st));
  CHECK(!flag, "a cancelled send is never received");
  stamp("cancel_send");
}

/* Request_free of active requests: the send is delivered, the receive lands */
static void free_active(void)
{
  static int in[256];
  if (rank == 0) {
    static int out[256];
    for (int i = 0; i < 256; i++)
      out[i] = i + 9;
    MPI_Request r;
    CHECK_OK(MPI_Isend(out, 256, MPI_INT, 1, 60, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL, "freed");
    int ack;
    CHECK_OK(MPI_Recv(&ack, 1, MPI_INT, 1, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Send(out, 256, MPI_INT, 1, 62, MPI_COMM_WORLD));
  } else if (rank == 1) {
    MPI_Status st;
    CHECK_OK(MPI_Recv(in, 256, MPI_INT, 0, 60, MPI_COMM_WORLD, &st));
    CHECK(in[255] == 264, "the freed send arrived");
    memset(in, 0, sizeof(in));
    MPI_Request r;
    CHECK_OK(MPI_Irecv(in, 256, MPI_INT, 0, 62, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Request_free(&r));
    int ack = 1;
    CHECK_OK(MPI_Send(&ack, 1, MPI_INT, 0, 61, MPI_COMM_WORLD));
    /* the freed receive completes in the background: poll until its data is there */
    MPI_Request none = MPI_REQUEST_NULL;
    int flag, tries = 0;
    while (in[255] != 264 && tries++ < 100000) {
      CHECK_OK(MPI_Iprobe(0, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
      CHECK_OK(MPI_Test(&none, &flag, MPI_STATUS_IGNORE));
    }
    CHECK(in[0] == 9 && in[255] == 264, "the freed receive landed (after %d polls)", tries);
  }
  stamp("free_active");
}

/* Request_get_status: the state without freeing; a later Wait completes the request */
static void get_status(void)
{
  if (rank == 1) {
    int v[3] = {0};
    MPI_Request r;
    MPI_Status st;
    int flag = 0;
    CHECK_OK(MPI_Irecv(v, 3, MPI_INT, 0, 70, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag, "not sent yet");
    int go = 1;
    CHECK_OK(MPI_Send(&go, 1, MPI_INT, 0, 71, MPI_COMM_WORLD));
    while (!flag)
      CHECK_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(r != MPI_REQUEST_NULL && st.MPI_SOURCE == 0 && st.MPI_TAG == 70 && v[2] == 72,
          "get_status: the request stays, the data is there");
    CHECK_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag, "still complete");
    CHECK_OK(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL && st.MPI_TAG == 70 && count_of(&st, MPI_INT) == 3, "Wait");
    CHECK_OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE, "a null request");
  } else if (rank == 0) {
    int v[3] = {70, 71, 72}, go;
    CHECK_OK(MPI_Recv(&go, 1, MPI_INT, 1, 71, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_Request r;
    int flag = 0;
    CHECK_OK(MPI_Isend(v, 3, MPI_INT, 1, 70, MPI_COMM_WORLD, &r));
    while (!flag)
      CHECK_OK(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
    CHECK(r != MPI_REQUEST_NULL, "the send request stays");
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
  }
  stamp("get_status");
}

/* Persistent requests: rounds of Startall/Waitall, every mode, inactive ones are null-like */
static void persistent(void)
{
  int out[16], in[16];
  MPI_Request r[2];
  int peer = rank ^ 1;
  if (peer >= size) { /* the odd rank out talks to itself */
    peer = rank;
  }
  CHECK_OK(MPI_Recv_init(in, 16, MPI_INT, peer, 80, MPI_COMM_WORLD, &r[0]));
  CHECK_OK(MPI_Send_init(out, 16, MPI_INT, peer, 80, MPI_COMM_WORLD, &r[1]));
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 16; i++)
      out[i] = rank * 100 + round * 16 + i;
    CHECK_OK(MPI_Startall(2, r));
    MPI_Status st[2];
    CHECK_OK(MPI_Waitall(2, r, st));
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL, "persistent handles stay");
    CHECK(st[0].MPI_SOURCE == peer && count_of(&st[0], MPI_INT) == 16, "status");
    for (int i = 0; i < 16; i++)
      CHECK(in[i] == peer * 100 + round * 16 + i, "round %d: in[%d] = %d", round, i, in[i]);
  }
  /* an inactive persistent request completes at once with an empty status */
  MPI_Status st;
  CHECK_OK(MPI_Wait(&r[0], &st));
  CHECK(r[0] != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE, "inactive");
  int idx, flag;
  CHECK_OK(MPI_Testany(2, r, &idx, &flag, &st));
  CHECK(flag && idx == MPI_UNDEFINED, "Testany of inactive requests");
  /* Start of an active one is an error; of a non-persistent one too */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK_OK(MPI_Start(&r[0]));
  CHECK(cls_of(MPI_Start(&r[0])) == MPI_ERR_REQUEST, "Start of an active request");
  CHECK_OK(MPI_Start(&r[1]));
  CHECK_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
  MPI_Request plain;
  CHECK_OK(MPI_Irecv(in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &plain));
  CHECK(cls_of(MPI_Start(&plain)) == MPI_ERR_REQUEST, "Start of a non-persistent request");
  CHECK_OK(MPI_Wait(&plain, MPI_STATUS_IGNORE));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  CHECK_OK(MPI_Request_free(&r[0]));
  CHECK_OK(MPI_Request_free(&r[1]));
  CHECK(r[0] == MPI_REQUEST_NULL, "Request_free of a persistent request");
  /* the other modes, one round each (Bsend_init through a buffer) */
  static char bbuf[4096];
  CHECK_OK(MPI_Buffer_attach(bbuf, sizeof(bbuf)));
  MPI_Request q[4];
  int ins[3] = {0};
  CHECK_OK(MPI_Recv_init(&ins[0], 1, MPI_INT, peer, 81, MPI_COMM_WORLD, &q[0]));
  CHECK_OK(MPI_Recv_init(&ins[1], 1, MPI_INT, peer, 82, MPI_COMM_WORLD, &q[1]));
  CHECK_OK(MPI_Recv_init(&ins[2], 1, MPI_INT, peer, 83, MPI_COMM_WORLD, &q[2]));
  CHECK_OK(MPI_Startall(3, q));
  MPI_Barrier(MPI_COMM_WORLD); /* the receives are posted: a ready send is allowed */
  int v = rank + 1000;
  MPI_Request s[3];
  CHECK_OK(MPI_Ssend_init(&v, 1, MPI_INT, peer, 81, MPI_COMM_WORLD, &s[0]));
  CHECK_OK(MPI_Bsend_init(&v, 1, MPI_INT, peer, 82, MPI_COMM_WORLD, &s[1]));
  CHECK_OK(MPI_Rsend_init(&v, 1, MPI_INT, peer, 83, MPI_COMM_WORLD, &s[2]));
  CHECK_OK(MPI_Startall(3, s));
  CHECK_OK(MPI_Waitall(3, s, MPI_STATUSES_IGNORE));
  CHECK_OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 3; i++)
    CHECK(ins[i] == peer + 1000, "mode %d: %d", i, ins[i]);
  for (int i = 0; i < 3; i++) {
    CHECK_OK(MPI_Request_free(&q[i]));
    CHECK_OK(MPI_Request_free(&s[i]));
  }
  void *back;
  int bs;
  CHECK_OK(MPI_Buffer_detach(&back, &bs));
  stamp("persistent");
}

/* MPI_PROC_NULL: every call completes at once, the status says MPI_PROC_NULL, count 0 */
static void proc_null_all(void)
{
  int v = 3;
  MPI_Status st;
  MPI_Request r;
  static char bbuf[1024];
  CHECK_OK(MPI_Buffer_attach(bbuf, sizeof(bbuf)));
  CHECK_OK(MPI_Rsend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  CHECK_OK(MPI_Bsend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
  CHECK_OK(MPI_Ibsend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK_OK(MPI_Irsend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK_OK(MPI_Sendrecv_replace(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_PROC_NULL, 0,
                                MPI_COMM_WORLD, &st));
  CHECK(v == 3 && st.MPI_SOURCE == MPI_PROC_NULL && count_of(&st, MPI_INT) == 0,
        "Sendrecv_replace PROC_NULL");
  CHECK_OK(MPI_Recv_init(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Start(&r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "persistent PROC_NULL");
  CHECK_OK(MPI_Request_free(&r));
  void *back;
  int bs;
  CHECK_OK(MPI_Buffer_detach(&back, &bs));
}

/* Status_set_elements(_x) / Status_set_cancelled, read back */
static void status_set(void)
{
  MPI_Status st;
  memset(&st, 0, sizeof(st));
  CHECK_OK(MPI_Status_set_elements(&st, MPI_DOUBLE, 7));
  int n;
  CHECK_OK(MPI_Get_elements(&st, MPI_DOUBLE, &n));
  CHECK(n == 7 && count_of(&st, MPI_DOUBLE) == 7 && count_of(&st, MPI_BYTE) == 56, "set 7");
  CHECK_OK(MPI_Status_set_elements_x(&st, MPI_INT, (MPI_Count)3 << 30));
  MPI_Count x;
  CHECK_OK(MPI_Get_elements_x(&st, MPI_INT, &x));
  CHECK(x == (MPI_Count)3 << 30, "set_elements_x: %lld", (long long)x);
  CHECK_OK(MPI_Get_count(&st, MPI_INT, &n));
  CHECK(n == MPI_UNDEFINED, "more than an int: %d", n);
  int flag;
  CHECK_OK(MPI_Status_set_cancelled(&st, 1));
  CHECK_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag, "set_cancelled");
  CHECK_OK(MPI_Get_elements_x(&st, MPI_INT, &x));
  CHECK(x == (MPI_Count)3 << 30, "the count kept");
  CHECK_OK(MPI_Status_set_cancelled(&st, 0));
  CHECK_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(!flag, "set_cancelled 0");
}

/* A rank's messages to itself: order, probes, wildcards, posted receives, Ssend, truncation,
 * MPI_COMM_SELF, and with another rank's messages in the same receives */
static void self(void)
{
  MPI_Status st;
  int v[3] = {11, 12, 13}, w = 0, flag;
  for (int i = 0; i < 3; i++)
    CHECK_OK(MPI_Send(&v[i], 1, MPI_INT, rank, 1 + i, MPI_COMM_WORLD));
  CHECK_OK(MPI_Iprobe(rank, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
  CHECK(flag && st.MPI_TAG == 1 && st.MPI_SOURCE == rank, "Iprobe: the first to itself");
  CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_TAG == 3, "Probe by tag");
  for (int i = 0; i < 3; i++) {
    CHECK_OK(MPI_Recv(&w, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK(w == v[i] && st.MPI_TAG == 1 + i && st.MPI_SOURCE == rank, "in order: %d", w);
  }
  /* receives posted first take the send, the earliest posted first, wildcards included */
  MPI_Request r[3];
  int a = 0, b = 0, c = 0;
  CHECK_OK(MPI_Irecv(&a, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &r[0]));
  CHECK_OK(MPI_Irecv(&b, 1, MPI_INT, rank, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]));
  CHECK_OK(MPI_Irecv(&c, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &r[2]));
  int x = 21, y = 22, z = 23;
  CHECK_OK(MPI_Ssend(&x, 1, MPI_INT, rank, 9, MPI_COMM_WORLD)); /* matches r[0] */
  CHECK_OK(MPI_Send(&y, 1, MPI_INT, rank, 9, MPI_COMM_WORLD));  /* r[1] */
  CHECK_OK(MPI_Send(&z, 1, MPI_INT, rank, 9, MPI_COMM_WORLD));  /* r[2] */
  MPI_Status sts[3];
  CHECK_OK(MPI_Waitall(3, r, sts));
  CHECK(a == 21 && b == 22 && c == 23, "posting order: %d %d %d", a, b, c);
  CHECK(sts[0].MPI_SOURCE == rank && sts[1].MPI_TAG == 9, "statuses");
  /* truncation */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  long big[2] = {1, 2};
  int small = 0;
  CHECK_OK(MPI_Send(big, 2, MPI_LONG, rank, 10, MPI_COMM_WORLD));
  CHECK(cls_of(MPI_Recv(&small, 1, MPI_INT, rank, 10, MPI_COMM_WORLD, &st)) == MPI_ERR_TRUNCATE,
        "a truncated message to itself");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  /* MPI_COMM_SELF */
  CHECK_OK(MPI_Sendrecv(&x, 1, MPI_INT, 0, 5, &w, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &st));
  CHECK(w == 21 && st.MPI_SOURCE == 0, "COMM_SELF Sendrecv");
  MPI_Message m;
  CHECK_OK(MPI_Send(&y, 1, MPI_INT, 0, 6, MPI_COMM_SELF));
  CHECK_OK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &m, &st));
  CHECK(st.MPI_TAG == 6 && st.MPI_SOURCE == 0, "Mprobe on COMM_SELF");
  CHECK_OK(MPI_Iprobe(0, 6, MPI_COMM_SELF, &flag, &st));
  CHECK(!flag, "the matched message is off the queue");
  CHECK_OK(MPI_Mrecv(&w, 1, MPI_INT, &m, &st));
  CHECK(w == 22, "Mrecv on COMM_SELF");
  /* a wildcard receive gets the other rank's message and its own, each in its order */
  if (rank <= 1) {
    int peer = 1 - rank, got[4], seen_self = 0, seen_peer = 0;
    int mine[2] = {rank * 10, rank * 10 + 1};
    MPI_Request sr[2];
    CHECK_OK(MPI_Isend(&mine[0], 1, MPI_INT, peer, 15, MPI_COMM_WORLD, &sr[0]));
    CHECK_OK(MPI_Isend(&mine[1], 1, MPI_INT, peer, 15, MPI_COMM_WORLD, &sr[1]));
    CHECK_OK(MPI_Send(&mine[0], 1, MPI_INT, rank, 15, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(&mine[1], 1, MPI_INT, rank, 15, MPI_COMM_WORLD));
    for (int i = 0; i < 4; i++) {
      CHECK_OK(MPI_Recv(&got[i], 1, MPI_INT, MPI_ANY_SOURCE, 15, MPI_COMM_WORLD, &st));
      if (st.MPI_SOURCE == rank)
        CHECK(got[i] == rank * 10 + seen_self++, "own order");
      else
        CHECK(got[i] == peer * 10 + seen_peer++, "peer order");
    }
    CHECK(seen_self == 2 && seen_peer == 2, "both");
    CHECK_OK(MPI_Waitall(2, sr, MPI_STATUSES_IGNORE));
  }
  stamp("self");
}

/* invalid arguments: MPI's error classes with MPI_ERRORS_RETURN */
static void errors(void)
{
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int v = 0;
  MPI_Request r;
  CHECK(cls_of(MPI_Rsend(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD)) == MPI_ERR_RANK, "rank");
  CHECK(cls_of(MPI_Bsend(&v, 1, MPI_INT, 0, -4, MPI_COMM_WORLD)) == MPI_ERR_TAG, "tag");
  CHECK(cls_of(MPI_Send_init(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, &r)) == MPI_ERR_COUNT,
        "count");
  CHECK(cls_of(MPI_Recv_init(&v, 1, (MPI_Datatype)0x4c00ff77, 0, 0, MPI_COMM_WORLD, &r)) ==
            MPI_ERR_TYPE,
        "datatype");
  CHECK(cls_of(MPI_Sendrecv_replace(&v, 1, MPI_INT, 0, 0, -7, 0, MPI_COMM_WORLD,
                                    MPI_STATUS_IGNORE)) == MPI_ERR_RANK,
        "source");
  MPI_Message m;
  CHECK(cls_of(MPI_Mprobe(size + 1, 0, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE)) == MPI_ERR_RANK,
        "Mprobe rank");
  MPI_Request bogus = (MPI_Request)0x6c00fff0;
  CHECK(cls_of(MPI_Request_free(&bogus)) == MPI_ERR_REQUEST, "Request_free of no request");
  CHECK(cls_of(MPI_Ssend(&v, 1, MPI_INT, 0, 0, (MPI_Comm)0x44000077)) == MPI_ERR_COMM, "comm");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
  CHECK_OK(MPI_Init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size >= 2, "run with 2 ranks or more");
  if (argc > 1 && !strcmp(argv[1], "fatal")) { /* MPI_ERRORS_ARE_FATAL: the job ends */
    static char bb[200];
    MPI_Buffer_attach(bb, sizeof(bb));
    char big[300] = {0};
    MPI_Bsend(big, 300, MPI_CHAR, 1 - rank, 0, MPI_COMM_WORLD);
    CHECK(0, "not reached");
  }
  if (argc > 1 && !strcmp(argv[1], "selfhang")) { /* a synchronous send to oneself, unmatched */
    int v = 1;
    if (rank == 0)
      MPI_Ssend(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
    else
      MPI_Recv(&v, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(0, "not reached");
  }
  if (argc > 1 && !strcmp(argv[1], "freehang")) { /* a freed Issend no receive takes */
    int v = 1;
    MPI_Request r;
    if (rank == 0) {
      MPI_Issend(&v, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, &r);
      MPI_Request_free(&r);
    }
    MPI_Finalize(); /* rank 0 waits for its freed send there, rank 1 in the barrier */
    CHECK(0, "not reached");
  }
  ready();
  buffered();
  replace();
  matched();
  cancel_send();
  free_active();
  get_status();
  persistent();
  proc_null_all();
  status_set();
  self();
  errors();
  stamp("done");
  CHECK_OK(MPI_Finalize());
  return 0;
}
