/*
 * Environment and error handling: Init, Init_thread, Query_thread, Is_thread_main, Finalize,
 * Initialized, Finalized, Abort, Wtime, Wtick, Get_processor_name, Get_version,
 * Get_library_version, Comm_set/get_errhandler (any communicator), Error_string, Error_class.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "impl.h"

struct pp_state pp_st;

/* ---------------------------------------------------------------- errors */

_Noreturn void pp_fatal(const char *fn, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fflush(stdout);
  fprintf(stderr, "prepost mpi: rank %u: %s: ", pp_st.rank, fn);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  pp_link_abort(code);
}

void pp_need_init(const char *fn)
{
  if (!pp_st.initialized)
    pp_fatal(fn, MPI_ERR_OTHER, "called before MPI_Init");
  if (pp_st.finalized)
    pp_fatal(fn, MPI_ERR_OTHER, "called after MPI_Finalize");
}

/* ---------------------------------------------------------------- the program's error handlers */

/* MPI_Comm_create_errhandler's handlers: handle PP_ERRH_BASE + slot. A slot lives while the
 * program's handle or a communicator holds it (MPI_Errhandler_free of a handler in use: the
 * communicators keep calling it). */
#define PP_ERRH_BASE 0x94000000u /* MPICH's "direct" error-handler handles */
static struct {
  MPI_Comm_errhandler_function *fn;
  int refs; /* the program's handle + communicators */
  bool handle; /* the program's handle is not freed */
} errhs[PP_MAX_ERRH];

static int errh_slot(MPI_Errhandler h, bool need_handle)
{
  uint32_t i = (uint32_t)h - PP_ERRH_BASE;
  if ((uint32_t)h < PP_ERRH_BASE || i >= PP_MAX_ERRH || !errhs[i].refs ||
      (need_handle && !errhs[i].handle))
    return -1;
  return (int)i;
}

static bool errh_builtin(MPI_Errhandler h)
{
  return h == MPI_ERRORS_ARE_FATAL || h == MPI_ERRORS_RETURN || h == MPI_ERRORS_ABORT;
}

void pp_errh_ref(MPI_Errhandler h, int delta)
{
  int i = errh_slot(h, false);
  if (i < 0)
    return;
  errhs[i].refs += delta;
  assert(errhs[i].refs >= 0);
  if (!errhs[i].refs)
    errhs[i].fn = NULL;
}

int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *h)
{
  pp_need_init("MPI_Comm_create_errhandler");
  if (!fn || !h)
    return pp_err(NULL, "MPI_Comm_create_errhandler", MPI_ERR_ARG, "NULL function or handle");
  for (uint32_t i = 0; i < PP_MAX_ERRH; i++)
    if (!errhs[i].refs) {
      errhs[i].fn = fn;
      errhs[i].refs = 1;
      errhs[i].handle = true;
      *h = (MPI_Errhandler)(PP_ERRH_BASE + i);
      return MPI_SUCCESS;
    }
  return pp_err(NULL, "MPI_Comm_create_errhandler", MPI_ERR_OTHER,
                "%u error handlers alive at once: the most this library keeps", PP_MAX_ERRH);
}
PP_ALIAS(MPI_Comm_create_errhandler);

int PMPI_Errhandler_free(MPI_Errhandler *h)
{
  pp_need_init("MPI_Errhandler_free");
  if (!h)
    return pp_err(NULL, "MPI_Errhandler_free", MPI_ERR_ARG, "NULL handle");
  if (errh_builtin(*h)) { /* MPI allows freeing a predefined handler: nothing to do */
    *h = MPI_ERRHANDLER_NULL;
    return MPI_SUCCESS;
  }
  int i = errh_slot(*h, true);
  if (i < 0)
    return pp_err(NULL, "MPI_Errhandler_free", MPI_ERR_ARG, "error handler 0x%x", *h);
  errhs[i].handle = false;
  pp_errh_ref(*h, -1);
  *h = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Errhandler_free);

/* The communicator's handler on an error: the program's function (then the call returns the
 * code), MPI_ERRORS_RETURN, or the job ends. */
int pp_err(const struct pp_comm *c, const char *fn, int cls, const char *fmt, ...)
{
  const struct pp_comm *eh = c ? c : pp_comm_get(MPI_COMM_WORLD);
  MPI_Errhandler h = eh->errh;
  if (h == MPI_ERRORS_RETURN)
    return cls;
  int slot = errh_slot(h, false);
  if (slot >= 0) {
    MPI_Comm comm = eh->handle;
    int code = cls;
    errhs[slot].fn(&comm, &code, fn);
    return cls;
  }
  char text[MPI_MAX_ERROR_STRING];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  char s[MPI_MAX_ERROR_STRING];
  int len;
  PMPI_Error_string(cls, s, &len);
  pp_fatal(fn, cls, "%s: %s (%s; MPI_ERRORS_ARE_FATAL)", s, text, c ? c->name : "MPI_COMM_WORLD");
}

/* X(class, text) */
#define PP_ERR_TEXT(X)                                                         \
  X(MPI_SUCCESS, "no error")                                                   \
  X(MPI_ERR_BUFFER, "invalid buffer pointer")                                  \
  X(MPI_ERR_COUNT, "invalid count argument")                                   \
  X(MPI_ERR_TYPE, "invalid datatype")                                          \
  X(MPI_ERR_TAG, "invalid tag")                                                \
  X(MPI_ERR_COMM, "invalid communicator")                                      \
  X(MPI_ERR_RANK, "invalid rank")                                              \
  X(MPI_ERR_ROOT, "invalid root")                                              \
  X(MPI_ERR_GROUP, "invalid group")                                            \
  X(MPI_ERR_OP, "invalid reduce operation")                                    \
  X(MPI_ERR_ARG, "invalid argument")                                           \
  X(MPI_ERR_UNKNOWN, "unknown error")                                          \
  X(MPI_ERR_TRUNCATE, "message truncated")                                     \
  X(MPI_ERR_OTHER, "other MPI error")                                          \
  X(MPI_ERR_INTERN, "internal MPI error")                                      \
  X(MPI_ERR_IN_STATUS, "see the error code in the status")                     \
  X(MPI_ERR_PENDING, "pending request")                                        \
  X(MPI_ERR_REQUEST, "invalid request")                                        \
  X(MPI_ERR_NO_MEM, "out of memory")                                           \
  X(MPI_ERR_INFO_KEY, "invalid info key")                                     \
  X(MPI_ERR_INFO_VALUE, "invalid info value")                                 \
  X(MPI_ERR_INFO_NOKEY, "no such info key")                                   \
  X(MPI_ERR_INFO, "invalid info object")                                      \
  X(MPI_ERR_KEYVAL, "invalid attribute keyval")                               \
  X(MPI_ERR_UNSUPPORTED_OPERATION, "operation not supported by prepost's MPI yet")

int PMPI_Error_string(int code, char *string, int *resultlen)
{
  const char *t = NULL;
  switch (code) {
#define PP_X(cls, text)                                                        \
  case cls:                                                                    \
    t = text;                                                                  \
    break;
    PP_ERR_TEXT(PP_X)
#undef PP_X
  default:
    break;
  }
  if (!string || !resultlen)
    return MPI_ERR_ARG;
  if (t)
    *resultlen = snprintf(string, MPI_MAX_ERROR_STRING, "%s", t);
  else
    *resultlen = snprintf(string, MPI_MAX_ERROR_STRING, "error code %d", code);
  return t ? MPI_SUCCESS : MPI_ERR_ARG;
}
PP_ALIAS(MPI_Error_string);

int PMPI_Error_class(int code, int *cls)
{
  if (!cls || code < 0 || code > MPI_ERR_LASTCODE)
    return MPI_ERR_ARG;
  *cls = code; /* every code the library returns is a class */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Error_class);

int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h)
{
  pp_need_init("MPI_Comm_set_errhandler");
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, "MPI_Comm_set_errhandler", MPI_ERR_COMM, "communicator 0x%x", comm);
  if (!errh_builtin(h) && errh_slot(h, true) < 0)
    return pp_err(c, "MPI_Comm_set_errhandler", MPI_ERR_ARG, "error handler 0x%x", h);
  pp_errh_ref(h, 1);
  pp_errh_ref(c->errh, -1);
  c->errh = h;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_set_errhandler);

int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *h)
{
  pp_need_init("MPI_Comm_get_errhandler");
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, "MPI_Comm_get_errhandler", MPI_ERR_COMM, "communicator 0x%x", comm);
  *h = c->errh;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Comm_get_errhandler);

int PMPI_Comm_call_errhandler(MPI_Comm comm, int code)
{
  pp_need_init("MPI_Comm_call_errhandler");
  struct pp_comm *c = pp_comm_get(comm);
  if (!c)
    return pp_err(NULL, "MPI_Comm_call_errhandler", MPI_ERR_COMM, "communicator 0x%x", comm);
  if (code == MPI_SUCCESS)
    return MPI_SUCCESS;
  (void)pp_err(c, "MPI_Comm_call_errhandler", code, "the program's error code %d", code);
  return MPI_SUCCESS; /* MPI: it returns MPI_SUCCESS when the handler returns */
}
PP_ALIAS(MPI_Comm_call_errhandler);

/* ---------------------------------------------------------------- init and finalize */

static int init(const char *fn)
{
  if (pp_st.initialized)
    pp_fatal(fn, MPI_ERR_OTHER, "MPI is already initialized");
  pp_link_init(&pp_st.rank, &pp_st.size);
  pp_comm_start(pp_st.rank, pp_st.size);
  pp_st.main_thread = pthread_self();
  pp_st.initialized = true;
  return MPI_SUCCESS;
}

int PMPI_Init(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  pp_st.thread_level = MPI_THREAD_SINGLE;
  return init("MPI_Init");
}
PP_ALIAS(MPI_Init);

int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
  (void)argc, (void)argv;
  if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE)
    pp_fatal("MPI_Init_thread", MPI_ERR_ARG, "invalid thread level %d", required);
  /* the lock-step link serves one thread at a time: FUNNELED at most */
  pp_st.thread_level = required > MPI_THREAD_FUNNELED ? MPI_THREAD_FUNNELED : required;
  if (provided)
    *provided = pp_st.thread_level;
  return init("MPI_Init_thread");
}
PP_ALIAS(MPI_Init_thread);

int PMPI_Query_thread(int *provided)
{
  pp_need_init("MPI_Query_thread");
  *provided = pp_st.thread_level;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Query_thread);

int PMPI_Is_thread_main(int *flag)
{
  pp_need_init("MPI_Is_thread_main");
  if (!flag)
    return pp_err(NULL, "MPI_Is_thread_main", MPI_ERR_ARG, "flag is NULL");
  *flag = pthread_equal(pthread_self(), pp_st.main_thread) != 0;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Is_thread_main);

int PMPI_Finalize(void)
{
  pp_need_init("MPI_Finalize");
  int e = pp_comm_finalize(); /* MPI_COMM_SELF's attributes first: their delete callbacks */
  if (e)
    return pp_err(pp_comm_get(MPI_COMM_SELF), "MPI_Finalize", e,
                  "a delete callback of an attribute of MPI_COMM_SELF failed");
  pp_p2p_quiesce(); /* then freed requests and buffered sends end (a callback's too) */
  PMPI_Barrier(MPI_COMM_WORLD); /* MPI: collective over MPI_COMM_WORLD */
  pp_link_finalize();
  pp_st.finalized = true;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Finalize);

int PMPI_Initialized(int *flag)
{
  *flag = pp_st.initialized;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Initialized);

int PMPI_Finalized(int *flag)
{
  *flag = pp_st.finalized;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Finalized);

int PMPI_Abort(MPI_Comm comm, int errorcode)
{
  (void)comm;
  fflush(stdout);
  fprintf(stderr, "prepost mpi: rank %u: MPI_Abort(%s, %d)\n", pp_st.rank,
          pp_comm_get(comm) ? pp_comm_get(comm)->name : "?", errorcode);
  pp_link_abort(errorcode);
}
PP_ALIAS(MPI_Abort);

/* ---------------------------------------------------------------- time and names */

double PMPI_Wtime(void)
{
  pp_need_init("MPI_Wtime");
  return (double)pp_link_now() / 1e9;
}
PP_ALIAS(MPI_Wtime);

double PMPI_Wtick(void)
{
  return 1e-9; /* simulated nanoseconds */
}
PP_ALIAS(MPI_Wtick);

int PMPI_Get_processor_name(char *name, int *resultlen)
{
  pp_need_init("MPI_Get_processor_name");
  /* the simulated host of the rank (a generated cluster names them host0..hostN-1) */
  *resultlen = snprintf(name, MPI_MAX_PROCESSOR_NAME, "host%u", pp_st.rank);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_processor_name);

int PMPI_Get_version(int *version, int *subversion)
{
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_version);

int PMPI_Get_library_version(char *version, int *resultlen)
{
  *resultlen = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                        "prepost MPI (MPICH 4.0.2 ABI, libmpich.so.12), on the prepost engine");
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_library_version);

