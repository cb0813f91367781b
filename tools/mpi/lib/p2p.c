/*
 * Point-to-point: Send/Ssend/Isend/Issend, Recv/Irecv, Sendrecv, Probe/Iprobe, Wait/Waitall/
 * Waitany, Test/Testall/Testany, Cancel (receives; a send reports not cancelled), Test_cancelled,
 * Get_count/Get_elements, MPI_PROC_NULL, MPI_ANY_SOURCE/TAG, MPI_STATUS(ES)_IGNORE, contiguous
 * predefined datatypes. Matching, ordering and the protocols are the engine's (prepost/p2p.h);
 * the library checks the arguments, keeps the MPI requests and fills MPI_Status.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "impl.h"

static struct pp_lreq lreqs[PP_MAX_LREQ];
static uint32_t lreq_hint;

struct pp_lreq *pp_lreq_get(MPI_Request r)
{
  uint32_t i = (uint32_t)r - PP_REQ_BASE;
  if ((uint32_t)r < PP_REQ_BASE || i >= PP_MAX_LREQ || !lreqs[i].used)
    return NULL;
  return &lreqs[i];
}

struct pp_lreq *pp_lreq_new(MPI_Request *out)
{
  for (uint32_t k = 0; k < PP_MAX_LREQ; k++) {
    uint32_t i = (lreq_hint + k) % PP_MAX_LREQ;
    if (!lreqs[i].used) {
      lreq_hint = i + 1;
      memset(&lreqs[i], 0, sizeof(lreqs[i]));
      lreqs[i].used = true;
      *out = (MPI_Request)(PP_REQ_BASE + i);
      return &lreqs[i];
    }
  }
  return NULL;
}

/* ---------------------------------------------------------------- status */

static void status_set(MPI_Status *st, int source, int tag, int error, size_t bytes,
                       bool cancelled)
{
  if (st == MPI_STATUS_IGNORE)
    return;
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  st->MPI_ERROR = error;
  st->count_lo = (int)(bytes & 0x7fffffffu);
  st->count_hi_and_cancelled = (int)((bytes >> 31) << 1) | (cancelled ? 1 : 0);
}

static size_t status_bytes(const MPI_Status *st)
{
  return (size_t)(unsigned)st->count_lo | ((size_t)((unsigned)st->count_hi_and_cancelled >> 1) << 31);
}

static void status_empty(MPI_Status *st)
{
  status_set(st, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
}

int PMPI_Get_count(const MPI_Status *status, MPI_Datatype dt, int *count)
{
  size_t sz = pp_dt_size(dt);
  if (!sz)
    return pp_err(NULL, "MPI_Get_count", MPI_ERR_TYPE, "datatype 0x%x", dt);
  size_t b = status_bytes(status);
  *count = b % sz || b / sz > INT_MAX ? MPI_UNDEFINED : (int)(b / sz);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_count);

int PMPI_Get_elements(const MPI_Status *status, MPI_Datatype dt, int *count)
{
  return PMPI_Get_count(status, dt, count); /* predefined types: an element is the type */
}
PP_ALIAS(MPI_Get_elements);

int PMPI_Test_cancelled(const MPI_Status *status, int *flag)
{
  *flag = status->count_hi_and_cancelled & 1;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Test_cancelled);

/* ---------------------------------------------------------------- argument checks */

/* MPI_SUCCESS or the class through the comm's handler */
static int check_buf(const char *fn, const struct pp_comm *c, const void *buf, int count,
                     MPI_Datatype dt, size_t *bytes)
{
  size_t sz = pp_dt_size(dt);
  if (!sz)
    return pp_err(c, fn, MPI_ERR_TYPE, "datatype 0x%x is not a predefined datatype (derived "
                                       "datatypes are not supported yet)", dt);
  if (count < 0)
    return pp_err(c, fn, MPI_ERR_COUNT, "count %d", count);
  if (count && !buf)
    return pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  *bytes = (size_t)count * sz;
  if (*bytes > PP_LINK_MAX_MSG)
    return pp_err(c, fn, MPI_ERR_COUNT, "%zu bytes: more than the %u a message may have", *bytes,
                  PP_LINK_MAX_MSG);
  return MPI_SUCCESS;
}

static int check_comm(const char *fn, MPI_Comm comm, struct pp_comm **c)
{
  pp_need_init(fn);
  *c = pp_comm_get(comm);
  if (!*c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", comm);
  return MPI_SUCCESS;
}

static int check_dest(const char *fn, const struct pp_comm *c, int dest)
{
  if (dest == MPI_PROC_NULL)
    return MPI_SUCCESS;
  if (dest < 0 || dest >= c->size)
    return pp_err(c, fn, MPI_ERR_RANK, "rank %d (the communicator has %d)", dest, c->size);
  if (dest == c->rank)
    pp_fatal(fn, MPI_ERR_UNSUPPORTED_OPERATION,
             "a message to the rank itself is not supported yet (%s rank %d)", c->name, dest);
  return MPI_SUCCESS;
}

static int check_source(const char *fn, const struct pp_comm *c, int src)
{
  if (src == MPI_PROC_NULL || src == MPI_ANY_SOURCE)
    return MPI_SUCCESS;
  if (src < 0 || src >= c->size)
    return pp_err(c, fn, MPI_ERR_RANK, "rank %d (the communicator has %d)", src, c->size);
  if (src == c->rank)
    pp_fatal(fn, MPI_ERR_UNSUPPORTED_OPERATION,
             "a message from the rank itself is not supported yet (%s rank %d)", c->name, src);
  return MPI_SUCCESS;
}

static int check_tag(const char *fn, const struct pp_comm *c, int tag, bool any)
{
  if (tag >= 0 || (any && tag == MPI_ANY_TAG))
    return MPI_SUCCESS;
  return pp_err(c, fn, MPI_ERR_TAG, "tag %d", tag);
}

/* ---------------------------------------------------------------- starting requests */

static int lreq_full(const char *fn, const struct pp_comm *c)
{
  return pp_err(c, fn, MPI_ERR_NO_MEM, "more than %u requests outstanding", PP_MAX_LREQ);
}

int pp_start_send(const char *fn, const struct pp_comm *c, int ctx_off, const void *buf,
                  size_t bytes, int dest, int tag, bool sync, MPI_Request *out)
{
  struct pp_lreq *l = pp_lreq_new(out);
  if (!l)
    return lreq_full(fn, c);
  *l = (struct pp_lreq){.used = true, .kind = PP_LREQ_SEND, .bytes = bytes, .peer = dest,
                        .tag = tag, .comm = c, .fn = fn};
  if (dest == MPI_PROC_NULL) {
    l->kind = PP_LREQ_DONE;
    return MPI_SUCCESS;
  }
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_ISEND, .flags = sync,
                          .peer = pp_comm_world(c, dest), .tag = tag,
                          .ctx = c->ctx + (uint32_t)ctx_off, .len = (uint32_t)bytes,
                          .call = pp_call(fn, dest, tag, c)};
  struct pp_link_rep rep;
  pp_link_call(&q, buf, bytes, &rep);
  if (rep.status != 0) {
    l->used = false;
    *out = MPI_REQUEST_NULL;
    return pp_err(c, fn, MPI_ERR_NO_MEM, "the engine refused the send (status %d, the launcher "
                                         "said why)", rep.status);
  }
  l->id = rep.id;
  pp_comm_hold(c, +1);
  return MPI_SUCCESS;
}

int pp_start_recv(const char *fn, const struct pp_comm *c, int ctx_off, void *buf, size_t bytes,
                  int source, int tag, MPI_Request *out)
{
  struct pp_lreq *l = pp_lreq_new(out);
  if (!l)
    return lreq_full(fn, c);
  *l = (struct pp_lreq){.used = true, .kind = PP_LREQ_RECV, .buf = buf, .bytes = bytes,
                        .peer = source, .tag = tag, .comm = c, .fn = fn};
  if (source == MPI_PROC_NULL) {
    l->kind = PP_LREQ_DONE;
    return MPI_SUCCESS;
  }
  int wsrc = source == MPI_ANY_SOURCE ? -1 : pp_comm_world(c, source);
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_IRECV, .peer = wsrc,
                          .tag = tag == MPI_ANY_TAG ? -1 : tag, .ctx = c->ctx + (uint32_t)ctx_off,
                          .len = (uint32_t)bytes, .call = pp_call(fn, source, tag, c)};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  if (rep.status != 0) {
    l->used = false;
    *out = MPI_REQUEST_NULL;
    return pp_err(c, fn, MPI_ERR_NO_MEM, "the engine refused the receive (status %d, the "
                                         "launcher said why)", rep.status);
  }
  l->id = rep.id;
  pp_comm_hold(c, +1);
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- completing requests */

/* Fills the status of a completed request and frees it; its error class. */
static int finish(MPI_Request *r, struct pp_lreq *l, const struct pp_link_done *d, MPI_Status *st)
{
  int err = MPI_SUCCESS;
  if (l->kind == PP_LREQ_DONE) {
    if (l->peer == MPI_PROC_NULL && st != MPI_STATUS_IGNORE)
      status_set(st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
  } else if (l->kind == PP_LREQ_SEND) {
    err = d->error == 0 || d->cancelled ? MPI_SUCCESS : MPI_ERR_OTHER;
    status_set(st, l->peer, l->tag, err, l->bytes, false);
  } else {
    int src = pp_comm_rank_of(l->comm, d->source);
    err = d->cancelled ? MPI_SUCCESS
          : d->msg_len > d->len || d->error == 1 /* PP_P2P_E_TRUNCATED */ ? MPI_ERR_TRUNCATE
          : d->error ? MPI_ERR_OTHER : MPI_SUCCESS;
    status_set(st, d->cancelled ? MPI_ANY_SOURCE : src, d->cancelled ? MPI_ANY_TAG : d->tag, err,
               d->cancelled ? 0 : d->len, d->cancelled);
  }
  if (l->kind != PP_LREQ_DONE)
    pp_comm_hold(l->comm, -1);
  l->used = false;
  *r = MPI_REQUEST_NULL;
  return err;
}

/* Reads one completion of the reply and its data into the request's buffer. */
static void read_done(MPI_Request *reqs, const int *map, struct pp_link_done *d)
{
  pp_link_read(d, sizeof(*d));
  struct pp_lreq *l = pp_lreq_get(reqs[map[d->index]]);
  if (!l || (d->len && (l->kind != PP_LREQ_RECV || d->len > l->bytes)))
    pp_fatal("MPI", MPI_ERR_INTERN, "the launcher reported a completion the library did not ask for");
  if (d->len)
    pp_link_read(l->buf, d->len);
}

static MPI_Status *st_at(MPI_Status *sts, int i)
{
  return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

/* The blocked call's description: the first live request's peer and tag. */
static struct pp_link_call call_of(const char *fn, int n, MPI_Request *reqs)
{
  for (int i = 0; i < n; i++) {
    struct pp_lreq *l = pp_lreq_get(reqs[i]);
    if (l && l->kind != PP_LREQ_DONE)
      return pp_call(fn, n == 1 ? l->peer : -3, n == 1 ? l->tag : -3, l->comm);
  }
  return pp_call(fn, -3, -3, NULL);
}

int pp_complete(const char *fn, int n, MPI_Request *reqs, MPI_Status *sts, int mode, bool block,
                int *index, int *flag, int *outcount, int *indices)
{
  pp_need_init(fn);
  if (n < 0 || (n && !reqs))
    return pp_err(NULL, fn, MPI_ERR_ARG, "%d requests", n);
  static int map[PP_LINK_MAX_WAIT];
  static uint64_t ids[PP_LINK_MAX_WAIT];
  int live = 0, nlocal = 0, ndone = 0, err = MPI_SUCCESS;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL)
      continue;
    struct pp_lreq *l = pp_lreq_get(reqs[i]);
    if (!l)
      return pp_err(NULL, fn, MPI_ERR_REQUEST, "request %d (0x%x) is not a live request", i,
                    reqs[i]);
    if (l->kind == PP_LREQ_DONE) {
      nlocal++;
      continue;
    }
    if (live == (int)PP_LINK_MAX_WAIT)
      pp_fatal(fn, MPI_ERR_UNSUPPORTED_OPERATION, "more than %u requests at once",
               PP_LINK_MAX_WAIT);
    map[live] = i;
    ids[live++] = l->id;
  }
  if (flag)
    *flag = 0;
  if (index)
    *index = MPI_UNDEFINED;
  if (outcount)
    *outcount = live + nlocal ? 0 : MPI_UNDEFINED;
  if (live + nlocal == 0) { /* every request null: complete, with an empty status */
    if (flag)
      *flag = 1;
    for (int i = 0; i < (mode == PP_LINK_ALL ? n : n ? 1 : 0); i++)
      if (sts != MPI_STATUSES_IGNORE && mode != PP_LINK_SOME)
        status_empty(&sts[i]);
    return MPI_SUCCESS;
  }
  /* ANY and SOME report the requests complete already (PROC_NULL) without asking the actor */
  if (mode != PP_LINK_ALL && nlocal) {
    for (int i = 0; i < n; i++) {
      struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
      if (!l || l->kind != PP_LREQ_DONE)
        continue;
      finish(&reqs[i], l, NULL, st_at(sts, mode == PP_LINK_SOME ? ndone : 0));
      if (index)
        *index = i;
      if (indices)
        indices[ndone] = i;
      ndone++;
      if (mode == PP_LINK_ANY)
        break;
    }
    if (flag)
      *flag = 1;
    if (outcount)
      *outcount = ndone;
    return MPI_SUCCESS;
  }
  struct pp_link_rep rep = {0};
  if (live) {
    struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_TEST, .flags = block,
                            .mode = (uint8_t)mode, .nreq = (uint32_t)live,
                            .call = call_of(fn, n, reqs)};
    pp_link_call(&q, ids, (size_t)live * sizeof(*ids), &rep);
  }
  if (mode == PP_LINK_ALL && (int)rep.ndone == live) /* the null and PROC_NULL ones too */
    for (int i = 0; i < n; i++) {
      struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
      if (!l && sts != MPI_STATUSES_IGNORE)
        status_empty(&sts[i]);
      else if (l && l->kind == PP_LREQ_DONE)
        finish(&reqs[i], l, NULL, st_at(sts, i));
    }
  for (uint32_t k = 0; k < rep.ndone; k++) {
    struct pp_link_done d;
    read_done(reqs, map, &d);
    int i = map[d.index];
    int slot = mode == PP_LINK_ALL ? i : mode == PP_LINK_SOME ? ndone : 0;
    int e = finish(&reqs[i], pp_lreq_get(reqs[i]), &d, st_at(sts, slot));
    if (index)
      *index = i;
    if (indices)
      indices[ndone] = i;
    ndone++;
    if (e != MPI_SUCCESS)
      err = mode == PP_LINK_ANY || n == 1 ? e : MPI_ERR_IN_STATUS;
  }
  if (flag)
    *flag = mode == PP_LINK_ALL ? (int)rep.ndone == live : ndone > 0;
  if (outcount)
    *outcount = ndone;
  if (err == MPI_SUCCESS)
    return MPI_SUCCESS;
  return pp_err(NULL, fn, err, "%s", err == MPI_ERR_TRUNCATE ? "the message was longer than the "
                                                               "receive buffer"
                                                             : "a request failed");
}

/* ---------------------------------------------------------------- the MPI calls */

#define SEND_ARGS const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm

static int start_send(const char *fn, SEND_ARGS, bool sync, MPI_Request *req)
{
  struct pp_comm *c;
  size_t bytes = 0;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &bytes)) ||
      (e = check_tag(fn, c, tag, false)) || (e = check_dest(fn, c, dest)))
    return e;
  return pp_start_send(fn, c, 0, buf, bytes, dest, tag, sync, req);
}

static int start_recv(const char *fn, void *buf, int count, MPI_Datatype dt, int source, int tag,
                      MPI_Comm comm, MPI_Request *req)
{
  struct pp_comm *c;
  size_t bytes = 0;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &bytes)) ||
      (e = check_tag(fn, c, tag, true)) || (e = check_source(fn, c, source)))
    return e;
  return pp_start_recv(fn, c, 0, buf, bytes, source, tag, req);
}

static int wait1(const char *fn, MPI_Request *req, MPI_Status *st)
{
  return pp_complete(fn, 1, req, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st, PP_LINK_ALL,
                     true, NULL, NULL, NULL, NULL);
}

int PMPI_Send(SEND_ARGS)
{
  MPI_Request r;
  int e = start_send("MPI_Send", buf, count, dt, dest, tag, comm, false, &r);
  return e ? e : wait1("MPI_Send", &r, MPI_STATUS_IGNORE);
}
PP_ALIAS(MPI_Send);

int PMPI_Ssend(SEND_ARGS)
{
  MPI_Request r;
  int e = start_send("MPI_Ssend", buf, count, dt, dest, tag, comm, true, &r);
  return e ? e : wait1("MPI_Ssend", &r, MPI_STATUS_IGNORE);
}
PP_ALIAS(MPI_Ssend);

int PMPI_Isend(SEND_ARGS, MPI_Request *req)
{
  return start_send("MPI_Isend", buf, count, dt, dest, tag, comm, false, req);
}
PP_ALIAS(MPI_Isend);

int PMPI_Issend(SEND_ARGS, MPI_Request *req)
{
  return start_send("MPI_Issend", buf, count, dt, dest, tag, comm, true, req);
}
PP_ALIAS(MPI_Issend);

int PMPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
              MPI_Status *st)
{
  MPI_Request r;
  int e = start_recv("MPI_Recv", buf, count, dt, source, tag, comm, &r);
  return e ? e : wait1("MPI_Recv", &r, st);
}
PP_ALIAS(MPI_Recv);

int PMPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
               MPI_Request *req)
{
  return start_recv("MPI_Irecv", buf, count, dt, source, tag, comm, req);
}
PP_ALIAS(MPI_Irecv);

int PMPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf,
                  int rcount, MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                  MPI_Status *st)
{
  MPI_Request r[2];
  MPI_Status sts[2];
  int e = start_recv("MPI_Sendrecv", rbuf, rcount, rdt, source, rtag, comm, &r[0]);
  if (e)
    return e;
  if ((e = start_send("MPI_Sendrecv", sbuf, scount, sdt, dest, stag, comm, false, &r[1]))) {
    /* the receive stays posted: the error handler returned, the request is the program's no
     * more; cancel it so nothing lands in rbuf later */
    PMPI_Cancel(&r[0]);
    PMPI_Wait(&r[0], MPI_STATUS_IGNORE);
    return e;
  }
  e = pp_complete("MPI_Sendrecv", 2, r, sts, PP_LINK_ALL, true, NULL, NULL, NULL, NULL);
  if (st != MPI_STATUS_IGNORE)
    *st = sts[0];
  return e == MPI_ERR_IN_STATUS ? sts[0].MPI_ERROR ? sts[0].MPI_ERROR : sts[1].MPI_ERROR : e;
}
PP_ALIAS(MPI_Sendrecv);

int PMPI_Wait(MPI_Request *req, MPI_Status *st)
{
  return wait1("MPI_Wait", req, st);
}
PP_ALIAS(MPI_Wait);

int PMPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
  return pp_complete("MPI_Waitall", n, reqs, sts, PP_LINK_ALL, true, NULL, NULL, NULL, NULL);
}
PP_ALIAS(MPI_Waitall);

int PMPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
  return pp_complete("MPI_Waitany", n, reqs, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st,
                     PP_LINK_ANY, true, index, NULL, NULL, NULL);
}
PP_ALIAS(MPI_Waitany);

int PMPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
  return pp_complete("MPI_Waitsome", n, reqs, sts, PP_LINK_SOME, true, NULL, NULL, outcount,
                     indices);
}
PP_ALIAS(MPI_Waitsome);

int PMPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
  return pp_complete("MPI_Test", 1, req, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st,
                     PP_LINK_ALL, false, NULL, flag, NULL, NULL);
}
PP_ALIAS(MPI_Test);

int PMPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
  return pp_complete("MPI_Testall", n, reqs, sts, PP_LINK_ALL, false, NULL, flag, NULL, NULL);
}
PP_ALIAS(MPI_Testall);

int PMPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
  return pp_complete("MPI_Testany", n, reqs, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st,
                     PP_LINK_ANY, false, index, flag, NULL, NULL);
}
PP_ALIAS(MPI_Testany);

int PMPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
  return pp_complete("MPI_Testsome", n, reqs, sts, PP_LINK_SOME, false, NULL, NULL, outcount,
                     indices);
}
PP_ALIAS(MPI_Testsome);

static int probe(const char *fn, int source, int tag, MPI_Comm comm, bool block, int *flag,
                 MPI_Status *st)
{
  struct pp_comm *c;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_tag(fn, c, tag, true)) ||
      (e = check_source(fn, c, source)))
    return e;
  if (flag)
    *flag = 0;
  if (source == MPI_PROC_NULL) {
    if (flag)
      *flag = 1;
    status_set(st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
    return MPI_SUCCESS;
  }
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_PROBE, .flags = block,
                          .peer = source == MPI_ANY_SOURCE ? -1 : pp_comm_world(c, source),
                          .tag = tag == MPI_ANY_TAG ? -1 : tag, .ctx = c->ctx,
                          .call = pp_call(fn, source, tag, c)};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  if (!rep.found)
    return MPI_SUCCESS;
  if (flag)
    *flag = 1;
  status_set(st, pp_comm_rank_of(c, rep.source), rep.tag, MPI_SUCCESS, rep.msg_len, false);
  return MPI_SUCCESS;
}

int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *st)
{
  return probe("MPI_Probe", source, tag, comm, true, NULL, st);
}
PP_ALIAS(MPI_Probe);

int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *st)
{
  return probe("MPI_Iprobe", source, tag, comm, false, flag, st);
}
PP_ALIAS(MPI_Iprobe);

int PMPI_Cancel(MPI_Request *req)
{
  pp_need_init("MPI_Cancel");
  struct pp_lreq *l = pp_lreq_get(*req);
  if (!l)
    return pp_err(NULL, "MPI_Cancel", MPI_ERR_REQUEST, "request 0x%x", *req);
  if (l->kind != PP_LREQ_RECV)
    return MPI_SUCCESS; /* a send runs to completion: Test_cancelled says false */
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_CANCEL, .id = l->id};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  return MPI_SUCCESS; /* matched already: it completes normally */
}
PP_ALIAS(MPI_Cancel);

int PMPI_Request_free(MPI_Request *req)
{
  pp_need_init("MPI_Request_free");
  struct pp_lreq *l = pp_lreq_get(*req);
  if (!l)
    return pp_err(NULL, "MPI_Request_free", MPI_ERR_REQUEST, "request 0x%x", *req);
  if (l->kind != PP_LREQ_DONE)
    pp_fatal("MPI_Request_free", MPI_ERR_UNSUPPORTED_OPERATION,
             "freeing an active request is not supported yet (wait for it instead)");
  l->used = false;
  *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Request_free);
