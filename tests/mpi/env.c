/*
 * The environment under prepost mpirun: Init_thread (what is provided), Initialized/Finalized,
 * Comm_rank/size on MPI_COMM_WORLD and MPI_COMM_SELF, versions, the processor name, Wtime as
 * simulated time (it advances by what the network takes, and by the documented poll cost),
 * Wtick, Is_thread_main (the thread of MPI_Init, not another), Info objects; and the error
 * classes that invalid arguments return under MPI_ERRORS_RETURN. argv[1] names the thread level
 * asked of Init_thread (single, funneled, serialized; default multiple): FUNNELED at most.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int rank, size;

static void errors(void)
{
  int v = 0, cls, peer = (rank + 1) % size;
  MPI_Request r;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Errhandler h;
  CHECK_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h));
  CHECK(h == MPI_ERRORS_RETURN, "errhandler");
#define EXPECT(call, want)                                                     \
  do {                                                                         \
    int e_ = (call);                                                           \
    MPI_Error_class(e_, &cls);                                                 \
    CHECK(cls == (want), "%s: class %d, expected %s", #call, cls, #want);      \
  } while (0)
  EXPECT(MPI_Send(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
  EXPECT(MPI_Send(&v, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
  EXPECT(MPI_Isend(&v, 1, MPI_INT, peer, -1, MPI_COMM_WORLD, &r), MPI_ERR_TAG);
  EXPECT(MPI_Recv(&v, 1, MPI_INT, peer, -7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TAG);
  EXPECT(MPI_Send(&v, -1, MPI_INT, peer, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT(MPI_Send(&v, 1, (MPI_Datatype)0x12345, peer, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT(MPI_Send(&v, 1, MPI_DATATYPE_NULL, peer, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT(MPI_Bcast(&v, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
  EXPECT(MPI_Allreduce(&v, &cls, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP);
  EXPECT(MPI_Allreduce(&v, &cls, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
  EXPECT(MPI_Reduce(&v, &cls, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD), MPI_ERR_OP);
  MPI_Request bogus = (MPI_Request)0x6c00fff0;
  EXPECT(MPI_Wait(&bogus, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
  /* an invalid communicator goes to MPI_COMM_WORLD's handler */
  EXPECT(MPI_Send(&v, 1, MPI_INT, peer, 0, (MPI_Comm)0x44000005), MPI_ERR_COMM);
  EXPECT(MPI_Comm_rank(MPI_COMM_NULL, &v), MPI_ERR_COMM);
  char s[MPI_MAX_ERROR_STRING];
  int len;
  CHECK_OK(MPI_Error_string(MPI_ERR_TRUNCATE, s, &len));
  CHECK(len > 0 && strstr(s, "truncat"), "error string '%s'", s);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* The program's error handler: counts its calls, keeps the last communicator and code. */
static int handled, handled_code;
static MPI_Comm handled_comm;

static void on_error(MPI_Comm *comm, int *code, ...)
{
  handled++;
  handled_comm = *comm;
  handled_code = *code;
}

static void user_handlers(void)
{
  int v = 0, cls;
  MPI_Comm d, child;
  MPI_Errhandler h, got;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
  CHECK_OK(MPI_Comm_create_errhandler(on_error, &h));
  CHECK_OK(MPI_Comm_set_errhandler(d, h));
  CHECK_OK(MPI_Comm_get_errhandler(d, &got));
  CHECK(got == h, "get_errhandler 0x%x, set 0x%x", got, h);
  /* an error on d: the function runs with d and the class, then the call returns it */
  int e = MPI_Send(&v, 1, MPI_INT, size + 3, 0, d);
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_RANK && handled == 1 && handled_comm == d && handled_code == e,
        "send to a bad rank: class %d, handler called %d times (comm 0x%x, code %d)", cls,
        handled, handled_comm, handled_code);
  /* MPI_COMM_WORLD keeps its own handler: an error there is not the function's */
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  e = MPI_Send(&v, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
  CHECK(e != MPI_SUCCESS && handled == 1, "world's error reached the handler");
  /* Comm_call_errhandler: the program's own code, MPI_SUCCESS back */
  CHECK_OK(MPI_Comm_call_errhandler(d, MPI_ERR_OTHER));
  CHECK(handled == 2 && handled_code == MPI_ERR_OTHER, "call_errhandler: %d calls, code %d",
        handled, handled_code);
  /* a dup inherits it; freeing the handle leaves it with the communicators holding it */
  CHECK_OK(MPI_Comm_dup(d, &child));
  CHECK_OK(MPI_Errhandler_free(&h));
  CHECK(h == MPI_ERRHANDLER_NULL, "free sets MPI_ERRHANDLER_NULL");
  CHECK_OK(MPI_Comm_free(&d));
  e = MPI_Recv(&v, 1, MPI_INT, 0, -4, child, MPI_STATUS_IGNORE);
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_TAG && handled == 3 && handled_comm == child,
        "error on the dup: class %d, %d calls", cls, handled);
  /* the freed handle is no handle any more */
  e = MPI_Comm_set_errhandler(MPI_COMM_WORLD, got);
  MPI_Error_class(e, &cls);
  CHECK(cls == MPI_ERR_ARG, "set_errhandler of a freed handle: class %d", cls);
  CHECK_OK(MPI_Comm_free(&child));
  /* Comm_idup: a communicator like Comm_dup's, its request complete */
  MPI_Request r;
  CHECK_OK(MPI_Comm_idup(MPI_COMM_WORLD, &d, &r));
  CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(r == MPI_REQUEST_NULL, "idup's request not freed by Wait");
  CHECK_OK(MPI_Comm_compare(d, MPI_COMM_WORLD, &cls));
  CHECK(cls == MPI_CONGRUENT, "idup: compare %d", cls);
  int sum = 0;
  CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, d));
  CHECK(sum == size * (size - 1) / 2, "allreduce on the idup: %d", sum);
  CHECK_OK(MPI_Comm_free(&d));
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void *other_thread(void *arg)
{
  int *flag = arg;
  CHECK_OK(MPI_Is_thread_main(flag));
  return NULL;
}

static void threads(void)
{
  int flag = 0;
  CHECK_OK(MPI_Is_thread_main(&flag));
  CHECK(flag, "the thread of MPI_Init is not the main one");
  pthread_t t;
  flag = 1;
  CHECK(!pthread_create(&t, NULL, other_thread, &flag) && !pthread_join(t, NULL), "thread");
  CHECK(!flag, "another thread is the main one");
}

static void info(void)
{
  MPI_Info a, b;
  int n, flag, len;
  char v[MPI_MAX_INFO_VAL + 1], k[MPI_MAX_INFO_KEY + 1];
  CHECK_OK(MPI_Info_create(&a));
  CHECK_OK(MPI_Info_get_nkeys(a, &n));
  CHECK(n == 0, "new info has %d keys", n);
  CHECK_OK(MPI_Info_set(a, "wdir", "/tmp"));
  CHECK_OK(MPI_Info_set(a, "host", "node7"));
  CHECK_OK(MPI_Info_set(a, "wdir", "/scratch")); /* replaces, keeps its place */
  CHECK_OK(MPI_Info_get_nkeys(a, &n));
  CHECK(n == 2, "%d keys", n);
  CHECK_OK(MPI_Info_get_nthkey(a, 0, k));
  CHECK(!strcmp(k, "wdir"), "key 0 '%s'", k);
  CHECK_OK(MPI_Info_get_nthkey(a, 1, k));
  CHECK(!strcmp(k, "host"), "key 1 '%s'", k);
  CHECK_OK(MPI_Info_get(a, "wdir", MPI_MAX_INFO_VAL, v, &flag));
  CHECK(flag && !strcmp(v, "/scratch"), "wdir '%s'", v);
  CHECK_OK(MPI_Info_get(a, "host", 3, v, &flag)); /* at most 3 characters */
  CHECK(flag && !strcmp(v, "nod"), "host cut to '%s'", v);
  CHECK_OK(MPI_Info_get_valuelen(a, "host", &len, &flag));
  CHECK(flag && len == 5, "valuelen %d", len);
  CHECK_OK(MPI_Info_get(a, "nothere", MPI_MAX_INFO_VAL, v, &flag));
  CHECK(!flag, "a key never set");
  CHECK_OK(MPI_Info_dup(a, &b));
  CHECK_OK(MPI_Info_delete(a, "wdir"));
  CHECK_OK(MPI_Info_get_nkeys(a, &n));
  CHECK(n == 1, "%d keys after delete", n);
  CHECK_OK(MPI_Info_get(b, "wdir", MPI_MAX_INFO_VAL, v, &flag));
  CHECK(flag && !strcmp(v, "/scratch"), "the dup lost wdir");
  CHECK_OK(MPI_Info_free(&a));
  CHECK(a == MPI_INFO_NULL, "freed info");
  CHECK_OK(MPI_Info_get_nkeys(MPI_INFO_ENV, &n));
  CHECK(n == 0, "MPI_INFO_ENV has %d keys", n);
  int cls;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
#define INFO_EXPECT(call, want)                                                \
  do {                                                                         \
    MPI_Error_class((call), &cls);                                             \
    CHECK(cls == (want), "%s: class %d", #call, cls);                          \
  } while (0)
  char longkey[MPI_MAX_INFO_KEY + 2];
  memset(longkey, 'k', sizeof(longkey) - 1);
  longkey[sizeof(longkey) - 1] = '\0';
  INFO_EXPECT(MPI_Info_set(b, longkey, "v"), MPI_ERR_INFO_KEY);
  INFO_EXPECT(MPI_Info_set(b, "", "v"), MPI_ERR_INFO_KEY);
  INFO_EXPECT(MPI_Info_delete(b, "nothere"), MPI_ERR_INFO_NOKEY);
  INFO_EXPECT(MPI_Info_get_nthkey(b, 5, k), MPI_ERR_ARG);
  INFO_EXPECT(MPI_Info_get_nkeys(a, &n), MPI_ERR_INFO); /* freed */
  INFO_EXPECT(MPI_Info_free(&a), MPI_ERR_INFO);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Info_free(&b));
}

int main(int argc, char **argv)
{
  int flag, provided;
  setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* as in a pipe: the library flushes at each call */
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(!flag, "initialized before MPI_Init");
  const char *level = argc > 1 ? argv[1] : "multiple";
  int required = !strcmp(level, "single")     ? MPI_THREAD_SINGLE
                 : !strcmp(level, "funneled") ? MPI_THREAD_FUNNELED
                 : !strcmp(level, "serialized") ? MPI_THREAD_SERIALIZED
                                                : MPI_THREAD_MULTIPLE;
  int want = required == MPI_THREAD_SINGLE ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED;
  CHECK_OK(MPI_Init_thread(&argc, &argv, required, &provided));
  CHECK(provided == want, "asked %s: provided %d", level, provided);
  CHECK_OK(MPI_Query_thread(&flag));
  CHECK(flag == want, "query_thread %d", flag);
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag, "not initialized after MPI_Init_thread");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int srank, ssize;
  MPI_Comm_rank(MPI_COMM_SELF, &srank);
  MPI_Comm_size(MPI_COMM_SELF, &ssize);
  CHECK(srank == 0 && ssize == 1, "self %d/%d", srank, ssize);
  int ver, sub;
  MPI_Get_version(&ver, &sub);
  CHECK(ver == MPI_VERSION && sub == MPI_SUBVERSION, "version %d.%d", ver, sub);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING], host[MPI_MAX_PROCESSOR_NAME];
  int len;
  MPI_Get_library_version(lib, &len);
  CHECK(len == (int)strlen(lib) && strstr(lib, "prepost"), "library '%s'", lib);
  MPI_Get_processor_name(host, &len);
  CHECK(len == (int)strlen(host) && len > 0, "processor '%s'", host);
  CHECK(MPI_Wtick() > 0 && MPI_Wtick() <= 1e-6, "wtick %g", MPI_Wtick());
  /* Wtime is simulated: each call costs the poll time (100 ns by default); on a device
   * (prepost mpirun --backend verbs says so in PREPOST_MPI_BACKEND) it is wall time */
  const char *be = getenv("PREPOST_MPI_BACKEND");
  int wall = be && !strcmp(be, "verbs");
  double t0 = MPI_Wtime(), t1 = MPI_Wtime();
  CHECK(wall ? t1 >= t0 : t1 - t0 > 0.99e-7 && t1 - t0 < 1.01e-7, "two Wtime calls %.1f ns apart",
        (t1 - t0) * 1e9);
  /* a 1 MiB message over the 100 Gb/s link takes at least 84 us */
  static char big[1 << 20];
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  t0 = MPI_Wtime();
  if (rank == 0 && size > 1)
    CHECK_OK(MPI_Send(big, sizeof(big), MPI_BYTE, 1, 0, MPI_COMM_WORLD));
  if (rank == 1)
    CHECK_OK(MPI_Recv(big, sizeof(big), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  t1 = MPI_Wtime();
  if (rank <= 1 && size > 1)
    CHECK(wall ? t1 > t0 : t1 - t0 > 83.8e-6, "1 MiB in %.0f ns", (t1 - t0) * 1e9);
  printf("rank %d of %d on %s: 1 MiB %s in %.0f ns\n", rank, size, host,
         rank == 0 ? "sent" : rank == 1 ? "received" : "not moved", (t1 - t0) * 1e9);
  errors();
  user_handlers();
  threads();
  info();
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(!flag, "finalized before MPI_Finalize");
  CHECK_OK(MPI_Finalize());
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(flag, "not finalized after MPI_Finalize");
  printf("rank %d: finalized (thread level %s: %d provided)\n", rank, level, want);
  return 0;
}
