/*
 * Point-to-point: Send/Ssend/Rsend/Bsend, Isend/Issend/Irsend/Ibsend, Buffer_attach/detach,
 * Recv/Irecv, Sendrecv, Sendrecv_replace, Probe/Iprobe, Mprobe/Improbe/Mrecv/Imrecv, Wait/Test
 * (all, any, some), Cancel, Test_cancelled, Request_free (active requests too), Request_get_status,
 * persistent requests (Send/Bsend/Ssend/Rsend/Recv_init, Start, Startall), Get_count/
 * Get_elements(_x), Status_set_elements(_x)/Status_set_cancelled, MPI_PROC_NULL, wildcards,
 * MPI_STATUS(ES)_IGNORE, every datatype (non-contiguous ones packed into the message and
 * unpacked from it, dtype.c). Matching, ordering and the protocols are the engine's
 * (prepost/p2p.h), a rank's messages to itself its actor's (serve.c); the library checks the
 * arguments, keeps the MPI requests and fills MPI_Status.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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
      lreqs[i].bsend_seg = -1;
      *out = (MPI_Request)(PP_REQ_BASE + i);
      return &lreqs[i];
    }
  }
  return NULL;
}

static MPI_Request handle_of(const struct pp_lreq *l)
{
  return (MPI_Request)(PP_REQ_BASE + (uint32_t)(l - lreqs));
}

/* Frees a request and what it holds (a packed copy, a datatype). */
static void lreq_free(struct pp_lreq *l)
{
  if (l->tmp)
    free(l->buf);
  if (l->held)
    pp_type_release(l->udt);
  l->used = false;
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

static int type_of_status(const char *fn, const MPI_Status *status, MPI_Datatype dt,
                          size_t *size)
{
  if (!status || status == MPI_STATUS_IGNORE)
    return pp_err(NULL, fn, MPI_ERR_ARG, "MPI_STATUS_IGNORE is no status to read");
  struct pp_tbuf tb;
  int e = pp_type_check(NULL, fn, dt, 1, &tb);
  if (e)
    return e;
  *size = tb.bytes;
  return MPI_SUCCESS;
}

int PMPI_Get_count(const MPI_Status *status, MPI_Datatype dt, int *count)
{
  size_t sz = 0;
  int e = type_of_status("MPI_Get_count", status, dt, &sz);
  if (e)
    return e;
  size_t b = status_bytes(status);
  if (!sz)
    *count = b ? MPI_UNDEFINED : 0;
  else
    *count = b % sz || b / sz > INT_MAX ? MPI_UNDEFINED : (int)(b / sz);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_count);

int PMPI_Get_elements_x(const MPI_Status *status, MPI_Datatype dt, MPI_Count *count)
{
  size_t sz = 0;
  int e = type_of_status("MPI_Get_elements_x", status, dt, &sz);
  if (e)
    return e;
  (void)sz;
  *count = pp_type_elements(dt, status_bytes(status)); /* MPI_UNDEFINED: a partial element */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_elements_x);

int PMPI_Get_elements(const MPI_Status *status, MPI_Datatype dt, int *count)
{
  MPI_Count n;
  int e = PMPI_Get_elements_x(status, dt, &n);
  if (e)
    return e;
  *count = n > INT_MAX ? MPI_UNDEFINED : (int)n;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Get_elements);

int PMPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype dt, MPI_Count count)
{
  size_t sz = 0;
  int e = type_of_status("MPI_Status_set_elements_x", status, dt, &sz);
  if (e)
    return e;
  if (count < 0 || (sz && (size_t)count > SIZE_MAX / 2 / sz))
    return pp_err(NULL, "MPI_Status_set_elements_x", MPI_ERR_COUNT, "count %lld",
                  (long long)count);
  /* count elements of dt: count copies of the type (Get_count of dt gives count back) */
  bool c = status->count_hi_and_cancelled & 1;
  status_set(status, status->MPI_SOURCE, status->MPI_TAG, status->MPI_ERROR,
             (size_t)count * sz, c);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Status_set_elements_x);

int PMPI_Status_set_elements(MPI_Status *status, MPI_Datatype dt, int count)
{
  return PMPI_Status_set_elements_x(status, dt, count);
}
PP_ALIAS(MPI_Status_set_elements);

int PMPI_Status_set_cancelled(MPI_Status *status, int flag)
{
  if (!status || status == MPI_STATUS_IGNORE)
    return pp_err(NULL, "MPI_Status_set_cancelled", MPI_ERR_ARG, "no status");
  status->count_hi_and_cancelled = (status->count_hi_and_cancelled & ~1) | (flag ? 1 : 0);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Status_set_cancelled);

int PMPI_Test_cancelled(const MPI_Status *status, int *flag)
{
  *flag = status->count_hi_and_cancelled & 1;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Test_cancelled);

/* ---------------------------------------------------------------- argument checks */

static int check_comm(const char *fn, MPI_Comm comm, struct pp_comm **c)
{
  pp_need_init(fn);
  *c = pp_comm_get(comm);
  if (!*c)
    return pp_err(NULL, fn, MPI_ERR_COMM, "communicator 0x%x is not a live communicator", comm);
  return MPI_SUCCESS;
}

/* MPI_SUCCESS or the class through the comm's handler; a derived type may address absolute
 * memory from MPI_BOTTOM (NULL) */
static int check_buf(const char *fn, const struct pp_comm *c, const void *buf, int count,
                     MPI_Datatype dt, struct pp_tbuf *tb)
{
  int e = pp_type_check(c, fn, dt, count, tb);
  if (e)
    return e;
  if (count && tb->bytes && !buf && !tb->derived)
    return pp_err(c, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  return MPI_SUCCESS;
}

static int check_dest(const char *fn, const struct pp_comm *c, int dest)
{
  if (dest == MPI_PROC_NULL)
    return MPI_SUCCESS;
  if (dest < 0 || dest >= c->size)
    return pp_err(c, fn, MPI_ERR_RANK, "rank %d (the communicator has %d)", dest, c->size);
  return MPI_SUCCESS;
}

static int check_source(const char *fn, const struct pp_comm *c, int src)
{
  if (src == MPI_PROC_NULL || src == MPI_ANY_SOURCE)
    return MPI_SUCCESS;
  if (src < 0 || src >= c->size)
    return pp_err(c, fn, MPI_ERR_RANK, "rank %d (the communicator has %d)", src, c->size);
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

int pp_done_request(const char *fn, const struct pp_comm *c, MPI_Request *out)
{
  struct pp_lreq *l = pp_lreq_new(out);
  if (!l)
    return lreq_full(fn, c);
  *l = (struct pp_lreq){.used = true, .kind = PP_LREQ_DONE, .comm = c, .fn = fn,
                        .bsend_seg = -1};
  status_set(&l->st, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
  return MPI_SUCCESS;
}

int pp_start_send(const char *fn, const struct pp_comm *c, int ctx_off, const void *buf,
                  size_t bytes, int dest, int tag, bool sync, MPI_Request *out)
{
  struct pp_lreq *l = pp_lreq_new(out);
  if (!l)
    return lreq_full(fn, c);
  *l = (struct pp_lreq){.used = true, .kind = PP_LREQ_SEND, .bytes = bytes, .peer = dest,
                        .tag = tag, .comm = c, .fn = fn, .bsend_seg = -1};
  if (dest == MPI_PROC_NULL) {
    l->kind = PP_LREQ_DONE;
    status_set(&l->st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
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
                        .peer = source, .tag = tag, .comm = c, .fn = fn, .bsend_seg = -1};
  if (source == MPI_PROC_NULL) {
    l->kind = PP_LREQ_DONE;
    status_set(&l->st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
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

/* buf + off, from MPI_BOTTOM (NULL) too: absolute addresses */
static void *at(const void *buf, MPI_Aint off)
{
  return (void *)((uintptr_t)buf + (uintptr_t)off);
}

/* A typed send: in place when the data is one run, else packed into a copy the link sends. */
static int send_typed(const char *fn, const struct pp_comm *c, const void *buf, int count,
                      MPI_Datatype dt, const struct pp_tbuf *tb, int dest, int tag, bool sync,
                      MPI_Request *out)
{
  if (tb->dense || dest == MPI_PROC_NULL)
    return pp_start_send(fn, c, 0, at(buf, tb->dense ? tb->off : 0), tb->bytes, dest, tag, sync,
                         out);
  void *pk = malloc(tb->bytes ? tb->bytes : 1);
  if (!pk)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "a %zu-byte copy to pack into", tb->bytes);
  pp_type_pack(buf, count, dt, pk, tb->bytes);
  int e = pp_start_send(fn, c, 0, pk, tb->bytes, dest, tag, sync, out);
  free(pk); /* the link copied it */
  return e;
}

/* A typed receive: in place when one run, else into a packed copy unpacked when it completes. */
static int recv_typed(const char *fn, const struct pp_comm *c, void *buf, int count,
                      MPI_Datatype dt, const struct pp_tbuf *tb, int source, int tag,
                      MPI_Request *out)
{
  if (tb->dense || source == MPI_PROC_NULL)
    return pp_start_recv(fn, c, 0, at(buf, tb->dense ? tb->off : 0), tb->bytes, source, tag,
                         out);
  void *pk = malloc(tb->bytes ? tb->bytes : 1);
  if (!pk)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "a %zu-byte copy to receive into", tb->bytes);
  int e = pp_start_recv(fn, c, 0, pk, tb->bytes, source, tag, out);
  if (e) {
    free(pk);
    return e;
  }
  struct pp_lreq *l = pp_lreq_get(*out);
  l->tmp = true;
  l->ubuf = buf;
  l->ucount = count;
  l->udt = dt;
  l->held = true;
  pp_type_hold(dt);
  return MPI_SUCCESS;
}

/* ---------------------------------------------------------------- the buffered-send buffer */

#define PP_MAX_BSEND 4096u /* buffered messages in flight */

static struct {
  char *buf;
  size_t size;
  uint32_t n;            /* segments in use, sorted by offset */
  size_t off[PP_MAX_BSEND], len[PP_MAX_BSEND];
  uint64_t key[PP_MAX_BSEND]; /* which segment a request holds */
  uint64_t next_key;
} bsb;

/* First fit: a segment of `len` bytes, its key, or 0 when it does not fit. */
static uint64_t bsb_alloc(size_t len, size_t *off)
{
  if (bsb.n == PP_MAX_BSEND)
    return 0;
  size_t at = 0;
  uint32_t i = 0;
  for (; i < bsb.n; i++) {
    if (bsb.off[i] - at >= len)
      break;
    at = bsb.off[i] + bsb.len[i];
  }
  if (i == bsb.n && bsb.size - at < len)
    return 0;
  memmove(&bsb.off[i + 1], &bsb.off[i], (bsb.n - i) * sizeof(bsb.off[0]));
  memmove(&bsb.len[i + 1], &bsb.len[i], (bsb.n - i) * sizeof(bsb.len[0]));
  memmove(&bsb.key[i + 1], &bsb.key[i], (bsb.n - i) * sizeof(bsb.key[0]));
  bsb.off[i] = at;
  bsb.len[i] = len;
  bsb.key[i] = ++bsb.next_key;
  bsb.n++;
  *off = at;
  return bsb.key[i];
}

static void bsb_free(uint64_t key)
{
  for (uint32_t i = 0; i < bsb.n; i++)
    if (bsb.key[i] == key) {
      memmove(&bsb.off[i], &bsb.off[i + 1], (bsb.n - i - 1) * sizeof(bsb.off[0]));
      memmove(&bsb.len[i], &bsb.len[i + 1], (bsb.n - i - 1) * sizeof(bsb.len[0]));
      memmove(&bsb.key[i], &bsb.key[i + 1], (bsb.n - i - 1) * sizeof(bsb.key[0]));
      bsb.n--;
      return;
    }
}

/* ---------------------------------------------------------------- background requests */

/* Requests the program freed while active, and the transfers of buffered sends: they complete
 * in the background, swept at every completion call (without letting time pass) and waited for
 * by Buffer_detach (buffered sends) and MPI_Finalize (all). */
static MPI_Request bg[PP_LINK_MAX_WAIT];
static uint32_t nbg;

static int complete_core(const char *fn, int n, MPI_Request *reqs, MPI_Status *sts, int mode,
                         int flags, bool quiet, int *index, int *flag, int *outcount,
                         int *indices);

/* Sweeps (block false: what is done now) or waits for (block: every one, or only the buffered
 * sends) the background requests. */
static void bg_sweep(const char *fn, bool block, bool only_bsend)
{
  static MPI_Request rq[PP_LINK_MAX_WAIT];
  static int idx[PP_LINK_MAX_WAIT];
  for (;;) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < nbg; i++)
      if (!only_bsend || pp_lreq_get(bg[i])->bsend_seg >= 0)
        rq[n++] = bg[i];
    if (!n)
      return;
    int out = 0;
    complete_core(fn, (int)n, rq, MPI_STATUSES_IGNORE,
                  block ? PP_LINK_ALL : PP_LINK_SOME, block ? 1 : 2, true, NULL, NULL,
                  block ? NULL : &out, block ? NULL : idx);
    uint32_t k = 0; /* keep the ones still running */
    for (uint32_t i = 0; i < nbg; i++)
      if (pp_lreq_get(bg[i]))
        bg[k++] = bg[i];
    nbg = k;
    if (!block)
      return;
  }
}

static void bg_add(struct pp_lreq *l)
{
  if (nbg == PP_LINK_MAX_WAIT)
    bg_sweep("MPI_Request_free", true, false); /* full: wait for them (bounded, never dropped) */
  l->background = true;
  bg[nbg++] = handle_of(l);
}

void pp_p2p_quiesce(void)
{
  bg_sweep("MPI_Finalize", true, false);
}

/* ---------------------------------------------------------------- completing requests */

/* Fills the status of a completed request and frees it; its error class. */
static int finish(MPI_Request *r, struct pp_lreq *l, const struct pp_link_done *d, MPI_Status *st,
                  bool keep)
{
  int err = MPI_SUCCESS;
  if (l->kind == PP_LREQ_DONE) {
    if (st != MPI_STATUS_IGNORE)
      *st = l->st;
    err = l->st.MPI_ERROR;
  } else if (l->kind == PP_LREQ_SEND) {
    err = d->error == 0 || d->cancelled ? MPI_SUCCESS : MPI_ERR_OTHER;
    status_set(st, l->peer, l->tag, err, l->bytes, d->cancelled);
    if (l->bsend_seg >= 0 && !keep)
      bsb_free((uint64_t)l->bsend_seg);
  } else {
    int src = pp_comm_rank_of(l->comm, d->source);
    err = d->cancelled ? MPI_SUCCESS
          : d->msg_len > d->len || d->error == 1 /* PP_P2P_E_TRUNCATED */ ? MPI_ERR_TRUNCATE
          : d->error ? MPI_ERR_OTHER : MPI_SUCCESS;
    status_set(st, d->cancelled ? MPI_ANY_SOURCE : src, d->cancelled ? MPI_ANY_TAG : d->tag, err,
               d->cancelled ? 0 : d->len, d->cancelled);
    if (l->tmp && !d->cancelled)
      pp_type_unpack(l->buf, d->len, l->ubuf, l->ucount, l->udt);
  }
  if (keep) /* Request_get_status: the request goes on, and so does its hold on the comm */
    return err;
  if (l->kind != PP_LREQ_DONE)
    pp_comm_hold(l->comm, -1);
  lreq_free(l);
  *r = MPI_REQUEST_NULL;
  return err;
}

/* Reads one completion of the reply and its data into the request's buffer (a matched
 * message longer than the room: what fits, the rest dropped, the receive truncated). */
static void read_done(MPI_Request *reqs, const int *map, struct pp_link_done *d)
{
  pp_link_read(d, sizeof(*d));
  struct pp_lreq *l = pp_lreq_get(reqs[map[d->index]]);
  if (!l || (d->len && (l->kind != PP_LREQ_RECV || (d->len > l->bytes && !l->mrecv))))
    pp_fatal("MPI", MPI_ERR_INTERN, "the launcher reported a completion the library did not ask for");
  size_t fit = d->len > l->bytes ? l->bytes : d->len;
  if (fit)
    pp_link_read(l->buf, fit);
  for (size_t left = d->len - fit; left;) {
    char junk[4096];
    size_t k = left < sizeof(junk) ? left : sizeof(junk);
    pp_link_read(junk, k);
    left -= k;
  }
  d->len = (uint32_t)fit;
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

/* flags: 1 block, 2 never sleep (report what is done now); quiet: errors are returned, not
 * raised (background requests) */
static int complete_core(const char *fn, int n, MPI_Request *reqs, MPI_Status *sts, int mode,
                         int flags, bool quiet, int *index, int *flag, int *outcount,
                         int *indices)
{
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
      int e = finish(&reqs[i], l, NULL, st_at(sts, mode == PP_LINK_SOME ? ndone : 0), false);
      if (e != MPI_SUCCESS)
        err = mode == PP_LINK_ANY ? e : MPI_ERR_IN_STATUS;
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
    return err == MPI_SUCCESS || quiet ? err : pp_err(NULL, fn, err, "a request failed");
  }
  struct pp_link_rep rep = {0};
  if (live) {
    struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_TEST, .flags = (uint8_t)flags,
                            .mode = (uint8_t)mode, .nreq = (uint32_t)live,
                            .call = call_of(fn, n, reqs)};
    pp_link_call(&q, ids, (size_t)live * sizeof(*ids), &rep);
  }
  if (mode == PP_LINK_ALL && (int)rep.ndone == live) /* the null and PROC_NULL ones too */
    for (int i = 0; i < n; i++) {
      struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
      if (!l && sts != MPI_STATUSES_IGNORE)
        status_empty(&sts[i]);
      else if (l && l->kind == PP_LREQ_DONE && finish(&reqs[i], l, NULL, st_at(sts, i), false))
        err = n == 1 ? st_at(sts, i)->MPI_ERROR : MPI_ERR_IN_STATUS;
    }
  for (uint32_t k = 0; k < rep.ndone; k++) {
    struct pp_link_done d;
    read_done(reqs, map, &d);
    int i = map[d.index];
    int slot = mode == PP_LINK_ALL ? i : mode == PP_LINK_SOME ? ndone : 0;
    int e = finish(&reqs[i], pp_lreq_get(reqs[i]), &d, st_at(sts, slot), false);
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
  if (err == MPI_SUCCESS || quiet)
    return err;
  return pp_err(NULL, fn, err, "%s", err == MPI_ERR_TRUNCATE ? "the message was longer than the "
                                                               "receive buffer"
                                                             : "a request failed");
}

/* Persistent requests stand for their running operation (inactive ones for a null request);
 * the program's array keeps their handles. */
int pp_complete(const char *fn, int n, MPI_Request *reqs, MPI_Status *sts, int mode, bool block,
                int *index, int *flag, int *outcount, int *indices)
{
  pp_need_init(fn);
  if (n < 0 || (n && !reqs))
    return pp_err(NULL, fn, MPI_ERR_ARG, "%d requests", n);
  if (nbg)
    bg_sweep(fn, false, false);
  bool persist = false;
  for (int i = 0; i < n && !persist; i++) {
    struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
    persist = l && l->kind == PP_LREQ_PERSIST;
  }
  if (!persist)
    return complete_core(fn, n, reqs, sts, mode, block, false, index, flag, outcount, indices);
  MPI_Request small[64], *eff = n <= 64 ? small : malloc((size_t)n * sizeof(*eff));
  if (!eff)
    return pp_err(NULL, fn, MPI_ERR_NO_MEM, "%d requests", n);
  for (int i = 0; i < n; i++) {
    struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
    eff[i] = !l || l->kind != PP_LREQ_PERSIST ? reqs[i] : l->active ? l->inner : MPI_REQUEST_NULL;
  }
  int e = complete_core(fn, n, eff, sts, mode, block, false, index, flag, outcount, indices);
  for (int i = 0; i < n; i++) {
    struct pp_lreq *l = reqs[i] == MPI_REQUEST_NULL ? NULL : pp_lreq_get(reqs[i]);
    if (!l || l->kind != PP_LREQ_PERSIST)
      reqs[i] = eff[i];
    else if (l->active && eff[i] == MPI_REQUEST_NULL)
      l->active = false, l->inner = MPI_REQUEST_NULL;
  }
  if (eff != small)
    free(eff);
  return e;
}

/* ---------------------------------------------------------------- the MPI calls */

#define SEND_ARGS const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm

enum pp_send_mode { PP_MODE_STD, PP_MODE_SYNC, PP_MODE_READY, PP_MODE_BUF, PP_MODE_RECV };

static int start_bsend(const char *fn, const struct pp_comm *c, const void *buf, int count,
                       MPI_Datatype dt, const struct pp_tbuf *tb, int dest, int tag,
                       MPI_Request *req);

static int start_send(const char *fn, SEND_ARGS, int mode, MPI_Request *req)
{
  struct pp_comm *c;
  struct pp_tbuf tb;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &tb)) ||
      (e = check_tag(fn, c, tag, false)) || (e = check_dest(fn, c, dest)))
    return e;
  if (mode == PP_MODE_BUF)
    return start_bsend(fn, c, buf, count, dt, &tb, dest, tag, req);
  /* a ready send is a standard one: its receive is posted already (else the program is wrong) */
  return send_typed(fn, c, buf, count, dt, &tb, dest, tag, mode == PP_MODE_SYNC, req);
}

static int start_recv(const char *fn, void *buf, int count, MPI_Datatype dt, int source, int tag,
                      MPI_Comm comm, MPI_Request *req)
{
  struct pp_comm *c;
  struct pp_tbuf tb;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &tb)) ||
      (e = check_tag(fn, c, tag, true)) || (e = check_source(fn, c, source)))
    return e;
  return recv_typed(fn, c, buf, count, dt, &tb, source, tag, req);
}

static int wait1(const char *fn, MPI_Request *req, MPI_Status *st)
{
  return pp_complete(fn, 1, req, st == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : st, PP_LINK_ALL,
                     true, NULL, NULL, NULL, NULL);
}

/* A buffered send: packed into the attached buffer (MPI_BSEND_OVERHEAD bytes of accounting
 * each, MPI's rule), its transfer a background request that gives the space back when it
 * completes; the program's request is complete at once. */
static int start_bsend(const char *fn, const struct pp_comm *c, const void *buf, int count,
                       MPI_Datatype dt, const struct pp_tbuf *tb, int dest, int tag,
                       MPI_Request *req)
{
  struct pp_lreq *l;
  if (dest != MPI_PROC_NULL) {
    size_t need = (tb->bytes + MPI_BSEND_OVERHEAD + 7) & ~(size_t)7, off = 0;
    uint64_t key = bsb_alloc(need, &off);
    if (!key && nbg) { /* transfers done meanwhile give their space back */
      bg_sweep(fn, false, true);
      key = bsb_alloc(need, &off);
    }
    if (!key)
      return pp_err(c, fn, MPI_ERR_BUFFER,
                    "%zu bytes (%zu + MPI_BSEND_OVERHEAD) do not fit the attached buffer "
                    "(%zu bytes, %u messages in it%s)", need, tb->bytes, bsb.size, bsb.n,
                    bsb.buf ? "" : ": none is attached, MPI_Buffer_attach");
    char *pk = bsb.buf + off + MPI_BSEND_OVERHEAD;
    pp_type_pack(buf, count, dt, pk, tb->bytes);
    MPI_Request t;
    int e = pp_start_send(fn, c, 0, pk, tb->bytes, dest, tag, false, &t);
    if (e) {
      bsb_free(key);
      return e;
    }
    struct pp_lreq *x = pp_lreq_get(t);
    x->bsend_seg = (int64_t)key;
    bg_add(x);
  }
  if (!(l = pp_lreq_new(req)))
    return lreq_full(fn, c);
  l->kind = PP_LREQ_DONE;
  l->comm = c;
  l->fn = fn;
  status_set(&l->st, dest == MPI_PROC_NULL ? MPI_PROC_NULL : MPI_ANY_SOURCE, MPI_ANY_TAG,
             MPI_SUCCESS, 0, false);
  return MPI_SUCCESS;
}

int PMPI_Buffer_attach(void *buffer, int size)
{
  pp_need_init("MPI_Buffer_attach");
  if (bsb.buf)
    return pp_err(NULL, "MPI_Buffer_attach", MPI_ERR_BUFFER, "a buffer is attached already "
                                                            "(MPI_Buffer_detach it first)");
  if (size < 0 || (size && !buffer))
    return pp_err(NULL, "MPI_Buffer_attach", MPI_ERR_ARG, "buffer %p of %d bytes", buffer, size);
  bsb.buf = buffer;
  bsb.size = (size_t)size;
  bsb.n = 0;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Buffer_attach);

int PMPI_Buffer_detach(void *buffer_addr, int *size)
{
  pp_need_init("MPI_Buffer_detach");
  if (!buffer_addr || !size)
    return pp_err(NULL, "MPI_Buffer_detach", MPI_ERR_ARG, "NULL argument");
  bg_sweep("MPI_Buffer_detach", true, true); /* its messages go out first (MPI: it blocks) */
  *(void **)buffer_addr = bsb.buf;
  *size = (int)bsb.size;
  bsb.buf = NULL;
  bsb.size = 0;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Buffer_detach);

#define BLOCKING_SEND(NAME, MODE)                                                                \
  int PMPI_##NAME(SEND_ARGS)                                                                     \
  {                                                                                              \
    MPI_Request r;                                                                               \
    int e = start_send("MPI_" #NAME, buf, count, dt, dest, tag, comm, MODE, &r);                 \
    return e ? e : wait1("MPI_" #NAME, &r, MPI_STATUS_IGNORE);                                   \
  }                                                                                              \
  PP_ALIAS(MPI_##NAME);
#define NONBLOCKING_SEND(NAME, MODE)                                                             \
  int PMPI_##NAME(SEND_ARGS, MPI_Request *req)                                                   \
  {                                                                                              \
    return start_send("MPI_" #NAME, buf, count, dt, dest, tag, comm, MODE, req);                 \
  }                                                                                              \
  PP_ALIAS(MPI_##NAME);

BLOCKING_SEND(Send, PP_MODE_STD)
BLOCKING_SEND(Ssend, PP_MODE_SYNC)
BLOCKING_SEND(Rsend, PP_MODE_READY)
BLOCKING_SEND(Bsend, PP_MODE_BUF)
NONBLOCKING_SEND(Isend, PP_MODE_STD)
NONBLOCKING_SEND(Issend, PP_MODE_SYNC)
NONBLOCKING_SEND(Irsend, PP_MODE_READY)
NONBLOCKING_SEND(Ibsend, PP_MODE_BUF)

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

/* the receive stays posted when the send fails: the error handler returned, the request is the
 * program's no more; cancel it so nothing lands in the buffer later */
static void drop_recv(MPI_Request *r)
{
  PMPI_Cancel(r);
  PMPI_Wait(r, MPI_STATUS_IGNORE);
}

static int sendrecv_end(MPI_Request *r, MPI_Status *st)
{
  MPI_Status sts[2];
  int e = pp_complete("MPI_Sendrecv", 2, r, sts, PP_LINK_ALL, true, NULL, NULL, NULL, NULL);
  if (st != MPI_STATUS_IGNORE)
    *st = sts[0];
  return e == MPI_ERR_IN_STATUS ? sts[0].MPI_ERROR ? sts[0].MPI_ERROR : sts[1].MPI_ERROR : e;
}

int PMPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf,
                  int rcount, MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                  MPI_Status *st)
{
  MPI_Request r[2];
  int e = start_recv("MPI_Sendrecv", rbuf, rcount, rdt, source, rtag, comm, &r[0]);
  if (e)
    return e;
  if ((e = start_send("MPI_Sendrecv", sbuf, scount, sdt, dest, stag, comm, PP_MODE_STD, &r[1]))) {
    drop_recv(&r[0]);
    return e;
  }
  return sendrecv_end(r, st);
}
PP_ALIAS(MPI_Sendrecv);

/* The message goes out from a packed copy of buf, the one that comes in lands in buf. */
int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source,
                          int rtag, MPI_Comm comm, MPI_Status *st)
{
  const char *fn = "MPI_Sendrecv_replace";
  struct pp_comm *c;
  struct pp_tbuf tb;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &tb)) ||
      (e = check_tag(fn, c, stag, false)) || (e = check_dest(fn, c, dest)) ||
      (e = check_tag(fn, c, rtag, true)) || (e = check_source(fn, c, source)))
    return e;
  void *pk = malloc(tb.bytes ? tb.bytes : 1);
  if (!pk)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "a %zu-byte copy", tb.bytes);
  pp_type_pack(buf, count, dt, pk, tb.bytes);
  MPI_Request r[2];
  if ((e = recv_typed(fn, c, buf, count, dt, &tb, source, rtag, &r[0]))) {
    free(pk);
    return e;
  }
  if ((e = pp_start_send(fn, c, 0, pk, tb.bytes, dest, stag, false, &r[1]))) {
    drop_recv(&r[0]);
    free(pk);
    return e;
  }
  free(pk); /* the link copied it */
  return sendrecv_end(r, st);
}
PP_ALIAS(MPI_Sendrecv_replace);

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

/* Request_get_status: the state without freeing (a receive's data lands already). */
int PMPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
  const char *fn = "MPI_Request_get_status";
  pp_need_init(fn);
  if (!flag)
    return pp_err(NULL, fn, MPI_ERR_ARG, "NULL flag");
  struct pp_lreq *l = req == MPI_REQUEST_NULL ? NULL : pp_lreq_get(req);
  if (req != MPI_REQUEST_NULL && !l)
    return pp_err(NULL, fn, MPI_ERR_REQUEST, "request 0x%x", req);
  if (l && l->kind == PP_LREQ_PERSIST)
    l = l->active ? pp_lreq_get(l->inner) : NULL;
  *flag = 1;
  if (!l) {
    status_empty(st);
    return MPI_SUCCESS;
  }
  if (l->kind == PP_LREQ_DONE) {
    if (st != MPI_STATUS_IGNORE)
      *st = l->st;
    return MPI_SUCCESS;
  }
  uint64_t id = l->id;
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_TEST, .flags = 4,
                          .mode = PP_LINK_ALL, .nreq = 1, .call = pp_call(fn, l->peer, l->tag,
                                                                           l->comm)};
  struct pp_link_rep rep;
  pp_link_call(&q, &id, sizeof(id), &rep);
  *flag = rep.ndone == 1;
  if (!*flag)
    return MPI_SUCCESS;
  MPI_Request h = handle_of(l);
  int map0 = 0;
  struct pp_link_done d;
  read_done(&h, &map0, &d);
  int e = finish(&h, l, &d, st, true);
  return e == MPI_SUCCESS ? e : pp_err(NULL, fn, e, "the request failed");
}
PP_ALIAS(MPI_Request_get_status);

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

/* ---------------------------------------------------------------- matched probes */

#define PP_MAX_MSGH 4096u
#define PP_MSG_BASE 0xac000000u /* neither MPI_MESSAGE_NULL nor MPI_MESSAGE_NO_PROC */

/* A message Mprobe took off the queues: the actor's receive request holds it. */
static struct msgh {
  bool used;
  uint64_t id;
  const struct pp_comm *comm;
  int source, tag;
  uint32_t len;
} msgs[PP_MAX_MSGH];

static int mprobe(const char *fn, int source, int tag, MPI_Comm comm, bool block, int *flag,
                  MPI_Message *msg, MPI_Status *st)
{
  struct pp_comm *c;
  int e;
  if ((e = check_comm(fn, comm, &c)) || (e = check_tag(fn, c, tag, true)) ||
      (e = check_source(fn, c, source)))
    return e;
  if (!msg)
    return pp_err(c, fn, MPI_ERR_ARG, "NULL message");
  if (flag)
    *flag = 0;
  if (source == MPI_PROC_NULL) {
    if (flag)
      *flag = 1;
    *msg = MPI_MESSAGE_NO_PROC;
    status_set(st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
    return MPI_SUCCESS;
  }
  uint32_t i = 0;
  while (i < PP_MAX_MSGH && msgs[i].used)
    i++;
  if (i == PP_MAX_MSGH)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "more than %u matched messages not received",
                  PP_MAX_MSGH);
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_MPROBE, .flags = block,
                          .peer = source == MPI_ANY_SOURCE ? -1 : pp_comm_world(c, source),
                          .tag = tag == MPI_ANY_TAG ? -1 : tag, .ctx = c->ctx,
                          .call = pp_call(fn, source, tag, c)};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  if (rep.status != 0)
    return pp_err(c, fn, MPI_ERR_NO_MEM, "the engine refused the receive of the matched message "
                                         "(status %d, the launcher said why)", rep.status);
  if (!rep.found)
    return MPI_SUCCESS;
  if (flag)
    *flag = 1;
  int src = pp_comm_rank_of(c, rep.source);
  pp_comm_hold(c, +1); /* the actor's receive holds the message on c: Mrecv's request inherits it */
  msgs[i] = (struct msgh){.used = true, .id = rep.id, .comm = c, .source = src, .tag = rep.tag,
                          .len = rep.msg_len};
  *msg = (MPI_Message)(PP_MSG_BASE + i);
  status_set(st, src, rep.tag, MPI_SUCCESS, rep.msg_len, false);
  return MPI_SUCCESS;
}

int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st)
{
  return mprobe("MPI_Mprobe", source, tag, comm, true, NULL, msg, st);
}
PP_ALIAS(MPI_Mprobe);

int PMPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg,
                 MPI_Status *st)
{
  return mprobe("MPI_Improbe", source, tag, comm, false, flag, msg, st);
}
PP_ALIAS(MPI_Improbe);

static int imrecv(const char *fn, void *buf, int count, MPI_Datatype dt, MPI_Message *msg,
                  MPI_Request *req)
{
  pp_need_init(fn);
  uint32_t i = msg ? (uint32_t)*msg - PP_MSG_BASE : PP_MAX_MSGH;
  bool noproc = msg && *msg == MPI_MESSAGE_NO_PROC;
  if (!noproc && (!msg || (uint32_t)*msg < PP_MSG_BASE || i >= PP_MAX_MSGH || !msgs[i].used))
    return pp_err(NULL, fn, MPI_ERR_REQUEST, "message 0x%x is no matched message (MPI_Mprobe)",
                  msg ? *msg : 0);
  const struct pp_comm *c = noproc ? pp_comm_get(MPI_COMM_WORLD) : msgs[i].comm;
  struct pp_tbuf tb;
  int e = check_buf(fn, c, buf, count, dt, &tb);
  if (e)
    return e;
  struct pp_lreq *l = pp_lreq_new(req);
  if (!l)
    return lreq_full(fn, c);
  *msg = MPI_MESSAGE_NULL;
  if (noproc) {
    l->kind = PP_LREQ_DONE;
    l->comm = c;
    status_set(&l->st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0, false);
    return MPI_SUCCESS;
  }
  struct msgh m = msgs[i];
  msgs[i].used = false;
  *l = (struct pp_lreq){.used = true, .kind = PP_LREQ_RECV, .id = m.id, .bytes = tb.bytes,
                        .peer = m.source, .tag = m.tag, .comm = c, .fn = fn, .mrecv = true,
                        .udt = dt, .held = true, .bsend_seg = -1};
  pp_type_hold(dt);
  if (tb.dense) {
    l->buf = at(buf, tb.off);
  } else if (!(l->buf = malloc(tb.bytes ? tb.bytes : 1))) {
    pp_comm_hold(c, -1);
    lreq_free(l);
    *req = MPI_REQUEST_NULL;
    return pp_err(c, fn, MPI_ERR_NO_MEM, "a %zu-byte copy to receive into", tb.bytes);
  } else {
    l->tmp = true;
    l->ubuf = buf;
    l->ucount = count;
  }
  return MPI_SUCCESS;
}

int PMPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Request *req)
{
  return imrecv("MPI_Imrecv", buf, count, dt, msg, req);
}
PP_ALIAS(MPI_Imrecv);

int PMPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *st)
{
  MPI_Request r;
  int e = imrecv("MPI_Mrecv", buf, count, dt, msg, &r);
  return e ? e : wait1("MPI_Mrecv", &r, st);
}
PP_ALIAS(MPI_Mrecv);

/* ---------------------------------------------------------------- cancel, free */

/* A receive that has not matched is cancelled, and so is a rank's send to itself that has not
 * (the actor holds those); a send to another rank runs to completion (the engine cannot take
 * it back): Test_cancelled says false. */
int PMPI_Cancel(MPI_Request *req)
{
  pp_need_init("MPI_Cancel");
  struct pp_lreq *l = req ? pp_lreq_get(*req) : NULL;
  if (!l)
    return pp_err(NULL, "MPI_Cancel", MPI_ERR_REQUEST, "request 0x%x", req ? *req : 0);
  if (l->kind == PP_LREQ_PERSIST)
    l = l->active ? pp_lreq_get(l->inner) : NULL;
  if (!l || l->kind == PP_LREQ_DONE)
    return MPI_SUCCESS;
  struct pp_link_req q = {.magic = PP_LINK_MAGIC, .op = PP_LINK_CANCEL, .id = l->id};
  struct pp_link_rep rep;
  pp_link_call(&q, NULL, 0, &rep);
  return MPI_SUCCESS; /* matched already: it completes normally */
}
PP_ALIAS(MPI_Cancel);

/* An active request goes on in the background; a persistent one ends its operation so. */
int PMPI_Request_free(MPI_Request *req)
{
  pp_need_init("MPI_Request_free");
  struct pp_lreq *l = req ? pp_lreq_get(*req) : NULL;
  if (!l)
    return pp_err(NULL, "MPI_Request_free", MPI_ERR_REQUEST, "request 0x%x", req ? *req : 0);
  if (l->kind == PP_LREQ_PERSIST) {
    struct pp_lreq *in = l->active ? pp_lreq_get(l->inner) : NULL;
    lreq_free(l);
    l = in;
  }
  if (l && l->kind == PP_LREQ_DONE)
    lreq_free(l);
  else if (l)
    bg_add(l);
  *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Request_free);

/* ---------------------------------------------------------------- persistent requests */

static int init_req(const char *fn, const void *buf, int count, MPI_Datatype dt, int peer,
                    int tag, MPI_Comm comm, int mode, MPI_Request *req)
{
  struct pp_comm *c;
  struct pp_tbuf tb;
  int e;
  bool recv = mode == PP_MODE_RECV;
  if ((e = check_comm(fn, comm, &c)) || (e = check_buf(fn, c, buf, count, dt, &tb)) ||
      (e = check_tag(fn, c, tag, recv)) ||
      (e = recv ? check_source(fn, c, peer) : check_dest(fn, c, peer)))
    return e;
  struct pp_lreq *l = pp_lreq_new(req);
  if (!l)
    return lreq_full(fn, c);
  l->kind = PP_LREQ_PERSIST;
  l->fn = fn;
  l->comm = c;
  l->pmode = (uint8_t)mode;
  l->pbuf = buf;
  l->pcount = count;
  l->pdt = dt;
  l->pcomm = comm;
  l->peer = peer;
  l->tag = tag;
  pp_type_hold(dt);
  l->udt = dt; /* released with the request */
  l->held = true;
  return MPI_SUCCESS;
}

#define INIT_SEND(NAME, MODE)                                                                    \
  int PMPI_##NAME(SEND_ARGS, MPI_Request *req)                                                   \
  {                                                                                              \
    return init_req("MPI_" #NAME, buf, count, dt, dest, tag, comm, MODE, req);                   \
  }                                                                                              \
  PP_ALIAS(MPI_##NAME);

INIT_SEND(Send_init, PP_MODE_STD)
INIT_SEND(Ssend_init, PP_MODE_SYNC)
INIT_SEND(Rsend_init, PP_MODE_READY)
INIT_SEND(Bsend_init, PP_MODE_BUF)

int PMPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                   MPI_Request *req)
{
  return init_req("MPI_Recv_init", buf, count, dt, source, tag, comm, PP_MODE_RECV, req);
}
PP_ALIAS(MPI_Recv_init);

static int start1(const char *fn, MPI_Request *req)
{
  struct pp_lreq *l = req ? pp_lreq_get(*req) : NULL;
  if (!l || l->kind != PP_LREQ_PERSIST)
    return pp_err(NULL, fn, MPI_ERR_REQUEST, "request 0x%x is no persistent request",
                  req ? *req : 0);
  if (l->active)
    return pp_err(pp_comm_get(l->pcomm), fn, MPI_ERR_REQUEST, /* NULL if freed: WORLD's */
                  "the persistent request is active already (complete it before starting it "
                  "again)");
  const char *op = fn; /* its errors are the Start's */
  int e = l->pmode == PP_MODE_RECV
              ? start_recv(op, (void *)l->pbuf, l->pcount, l->pdt, l->peer, l->tag, l->pcomm,
                           &l->inner)
              : start_send(op, l->pbuf, l->pcount, l->pdt, l->peer, l->tag, l->pcomm, l->pmode,
                           &l->inner);
  if (e == MPI_SUCCESS)
    l->active = true;
  return e;
}

int PMPI_Start(MPI_Request *req)
{
  pp_need_init("MPI_Start");
  return start1("MPI_Start", req);
}
PP_ALIAS(MPI_Start);

int PMPI_Startall(int n, MPI_Request reqs[])
{
  pp_need_init("MPI_Startall");
  if (n < 0 || (n && !reqs))
    return pp_err(NULL, "MPI_Startall", MPI_ERR_ARG, "%d requests", n);
  for (int i = 0; i < n; i++) {
    int e = start1("MPI_Startall", &reqs[i]);
    if (e)
      return e;
  }
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Startall);
