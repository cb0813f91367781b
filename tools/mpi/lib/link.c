/*
 * The rank's end of the link to its actor (../link.h). The library's constructor waits for the
 * actor's go byte before main() runs, so even the program's code before MPI_Init runs in
 * lock-step with the other ranks. Every request flushes stdio first: what the rank printed
 * before an MPI call is out before any other rank runs again, so the interleaving of the ranks'
 * output is the same in every run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "impl.h"

static int link_fd = -1;

static _Noreturn void link_lost(const char *what)
{
  /* the launcher is gone (it killed the job, or died): nothing to report to */
  fprintf(stderr, "prepost mpi: lost the link to the launcher (%s)\n", what);
  _exit(1);
}

static void write_all(const void *p, size_t n)
{
  const char *c = p;
  while (n) {
    ssize_t k = send(link_fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      link_lost("write");
    c += k;
    n -= (size_t)k;
  }
}

void pp_link_read(void *buf, size_t n)
{
  char *c = buf;
  while (n) {
    ssize_t k = read(link_fd, c, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      link_lost("read");
    c += k;
    n -= (size_t)k;
  }
}

__attribute__((constructor)) static void link_wait_go(void)
{
  const char *v = getenv(PP_LINK_FD_ENV);
  if (!v || !*v)
    return; /* not under prepost mpirun: MPI_Init says so */
  char *end;
  long fd = strtol(v, &end, 10);
  if (*end || fd < 3 || fd > 1 << 20)
    return;
  link_fd = (int)fd;
  char go;
  pp_link_read(&go, 1);
}

bool pp_link_up(void)
{
  return link_fd >= 0;
}

struct pp_link_call pp_call(const char *fn, int peer, int tag, const struct pp_comm *c)
{
  struct pp_link_call k = {.peer = peer, .tag = tag};
  snprintf(k.fn, sizeof(k.fn), "%s", fn);
  snprintf(k.comm, sizeof(k.comm), "%s", c ? c->name : "");
  return k;
}

void pp_link_call(const struct pp_link_req *q, const void *extra, size_t elen,
                  struct pp_link_rep *rep)
{
  fflush(NULL);
  write_all(q, sizeof(*q));
  if (elen)
    write_all(extra, elen);
  pp_link_read(rep, sizeof(*rep));
  if (rep->magic != PP_LINK_MAGIC || rep->op != q->op)
    link_lost("a reply to another request");
}

void pp_link_init(uint32_t *rank, uint32_t *size)
{
  if (link_fd < 0) {
    fprintf(stderr, "prepost mpi: MPI_Init: not started by `prepost mpirun` (%s is not set): "
                    "this libmpich.so.12 runs MPI programs on prepost only\n",
            PP_LINK_FD_ENV);
    exit(1);
  }
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_INIT};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  *rank = rep.rank;
  *size = rep.size;
}

uint64_t pp_link_now(void)
{
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_WTIME};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  return rep.now_ns;
}

void pp_link_finalize(void)
{
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_FINALIZE};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
}

_Noreturn void pp_link_abort(int code)
{
  fflush(NULL);
  if (link_fd >= 0) {
    struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_ABORT, .code = code};
    write_all(&q, sizeof(q));
    char c;
    while (read(link_fd, &c, 1) > 0) /* the launcher kills the job */
      ;
  }
  _exit(code & 0xff ? code & 0xff : 1);
}
