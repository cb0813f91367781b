/* The data of an exact replay: see replay_data.h. */
#include "tools/trace/replay_data.h"

#include <stdlib.h>
#include <string.h>

/* Bytes held for sends not yet received, over every rank: a trace that completes sends whose
 * receives it never completes cannot make the replay hold more. Past it, a send keeps no bytes
 * and its receive counts as unmoved. */
#define RPD_MAX_HELD ((uint64_t)1 << 30)

struct snd {
  uint32_t qpn;
  uint64_t wr_id;
  enum pp_wr_opcode opcode;
  uint8_t *data; /* SEND, WRITE: the gather list's bytes at the post (NULL: none held) */
  uint32_t len;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t nsge; /* READ: where its bytes go */
  struct pp_sge sg[PP_MAX_SGE];
  bool consumes; /* a receive at the peer (SEND, SEND_WITH_IMM, WRITE_WITH_IMM) */
  bool placed;   /* WRITE*: its bytes are at the remote address */
};

struct rcv {
  uint32_t q; /* QP or SRQ number */
  bool srq;
  uint64_t wr_id;
  uint32_t nsge;
  struct pp_sge sg[PP_MAX_SGE];
};

struct rank {
  struct snd *s;
  size_t ns, scap;
  struct rcv *r;
  size_t nr, rcap;
};

struct rpd {
  struct rpd_env env;
  uint32_t nranks;
  struct rank *ranks;
  uint64_t held;
  struct rpd_stats st;
};

struct rpd *rpd_create(uint32_t nranks, struct rpd_env env)
{
  struct rpd *d = calloc(1, sizeof(*d));
  if (!d)
    return NULL;
  d->ranks = calloc(nranks ? nranks : 1, sizeof(*d->ranks));
  if (!d->ranks) {
    free(d);
    return NULL;
  }
  d->env = env;
  d->nranks = nranks;
  return d;
}

void rpd_free(struct rpd *d)
{
  if (!d)
    return;
  for (uint32_t i = 0; i < d->nranks; i++) {
    for (size_t j = 0; j < d->ranks[i].ns; j++)
      free(d->ranks[i].s[j].data);
    free(d->ranks[i].s);
    free(d->ranks[i].r);
  }
  free(d->ranks);
  free(d);
}

void rpd_stats(const struct rpd *d, struct rpd_stats *out)
{
  *out = d->st;
}

static uint32_t sge_len(const struct pp_sge *sg, uint32_t n)
{
  uint64_t len = 0;
  for (uint32_t i = 0; i < n && i < PP_MAX_SGE; i++)
    len += sg[i].length;
  return len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
}

static void gather(uint8_t *dst, const struct pp_sge *sg, uint32_t n)
{
  for (uint32_t i = 0; i < n && i < PP_MAX_SGE; i++) {
    memcpy(dst, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
    dst += sg[i].length;
  }
}

/* Up to len bytes of src into the scatter list; the bytes written. */
static uint32_t scatter(const struct pp_sge *sg, uint32_t n, const uint8_t *src, uint32_t len)
{
  uint32_t done = 0;
  for (uint32_t i = 0; i < n && i < PP_MAX_SGE && done < len; i++) {
    uint32_t k = sg[i].length < len - done ? sg[i].length : len - done;
    memcpy((void *)(uintptr_t)sg[i].addr, src + done, k);
    done += k;
  }
  return done;
}

static void snd_drop(struct rpd *d, struct rank *k, size_t i)
{
  d->held -= k->s[i].data ? k->s[i].len : 0;
  free(k->s[i].data);
  memmove(&k->s[i], &k->s[i + 1], (k->ns - i - 1) * sizeof(k->s[0]));
  k->ns--;
}

int rpd_post_send(struct rpd *d, uint32_t rank, uint32_t qpn, const struct pp_send_wr *wr)
{
  if (rank >= d->nranks)
    return 0;
  struct rank *k = &d->ranks[rank];
  if (k->ns == k->scap) {
    size_t cap = k->scap ? k->scap * 2 : 64;
    struct snd *n = realloc(k->s, cap * sizeof(*n));
    if (!n)
      return -1;
    k->s = n;
    k->scap = cap;
  }
  struct snd *s = &k->s[k->ns];
  *s = (struct snd){.qpn = qpn, .wr_id = wr->wr_id, .opcode = wr->opcode,
                    .len = sge_len(wr->sg_list, wr->num_sge), .raddr = wr->remote_addr,
                    .rkey = wr->rkey, .consumes = pp_wr_consumes_recv(wr->opcode) != 0};
  if (wr->opcode == PP_WR_RDMA_READ) {
    s->nsge = wr->num_sge < PP_MAX_SGE ? wr->num_sge : PP_MAX_SGE;
    memcpy(s->sg, wr->sg_list, s->nsge * sizeof(s->sg[0]));
  } else if (s->len && d->held + s->len <= RPD_MAX_HELD) {
    s->data = malloc(s->len);
    if (!s->data)
      return -1;
    gather(s->data, wr->sg_list, wr->num_sge);
    d->held += s->len;
  }
  k->ns++;
  return 0;
}

int rpd_post_recv(struct rpd *d, uint32_t rank, uint32_t q, bool srq, const struct pp_recv_wr *wr)
{
  if (rank >= d->nranks)
    return 0;
  struct rank *k = &d->ranks[rank];
  if (k->nr == k->rcap) {
    size_t cap = k->rcap ? k->rcap * 2 : 64;
    struct rcv *n = realloc(k->r, cap * sizeof(*n));
    if (!n)
      return -1;
    k->r = n;
    k->rcap = cap;
  }
  struct rcv *r = &k->r[k->nr++];
  *r = (struct rcv){.q = q, .srq = srq, .wr_id = wr->wr_id,
                    .nsge = wr->num_sge < PP_MAX_SGE ? wr->num_sge : PP_MAX_SGE};
  memcpy(r->sg, wr->sg_list, r->nsge * sizeof(r->sg[0]));
  return 0;
}

/* A WRITE's bytes at its remote address in the peer's memory. */
static void place(struct rpd *d, uint32_t peer, struct snd *s)
{
  if (s->placed)
    return;
  s->placed = true;
  if (!s->len)
    return;
  bool recorded = false;
  void *dst = s->data ? d->env.remote(d->env.ctx, peer, s->rkey, s->raddr, s->len, &recorded)
                      : NULL;
  if (recorded)
    return; /* its MEM records place it, in time */
  if (!dst) {
    d->st.no_place += s->len;
    return;
  }
  memcpy(dst, s->data, s->len);
  d->st.moved_bytes += s->len;
}

/* A READ's bytes from the peer's memory, as it is now, into its scatter list. */
static void fetch(struct rpd *d, uint32_t peer, const struct snd *s)
{
  bool recorded;
  const void *src =
      s->len ? d->env.remote(d->env.ctx, peer, s->rkey, s->raddr, s->len, &recorded) : NULL;
  if (!src) {
    d->st.no_place += s->len;
    return;
  }
  d->st.moved_bytes += scatter(s->sg, s->nsge, src, s->len);
}

/* A successful send-queue completion: every earlier work request of the QP is done too
 * (unsignaled ones have no completion of their own). */
static void send_done(struct rpd *d, uint32_t rank, const struct pp_wc *wc)
{
  struct rank *k = &d->ranks[rank];
  uint32_t peer, dest, srq;
  if (!d->env.qp(d->env.ctx, rank, wc->qp_num, &peer, &dest, &srq))
    return;
  size_t upto = SIZE_MAX;
  for (size_t i = 0; i < k->ns && upto == SIZE_MAX; i++)
    if (k->s[i].qpn == wc->qp_num && k->s[i].wr_id == wc->wr_id)
      upto = i;
  if (upto == SIZE_MAX)
    return;
  for (size_t i = 0; i <= upto && i < k->ns;) {
    struct snd *s = &k->s[i];
    if (s->qpn != wc->qp_num) {
      i++;
      continue;
    }
    if (s->opcode == PP_WR_RDMA_READ)
      fetch(d, peer, s);
    else if (s->opcode == PP_WR_RDMA_WRITE || s->opcode == PP_WR_RDMA_WRITE_WITH_IMM)
      place(d, peer, s);
    if (s->consumes) { /* stays until its receive completes at the peer */
      i++;
      continue;
    }
    snd_drop(d, k, i);
    upto--;
  }
}

/* A receive completion: the oldest consuming send of the peer QP not yet received is it. */
static void recv_done(struct rpd *d, uint32_t rank, const struct pp_wc *wc)
{
  uint32_t peer, dest, srq;
  if (!d->env.qp(d->env.ctx, rank, wc->qp_num, &peer, &dest, &srq))
    return;
  struct rank *k = &d->ranks[rank];
  size_t ri = SIZE_MAX;
  for (size_t i = 0; i < k->nr && ri == SIZE_MAX; i++)
    if (k->r[i].wr_id == wc->wr_id &&
        ((!k->r[i].srq && k->r[i].q == wc->qp_num) || (k->r[i].srq && srq && k->r[i].q == srq)))
      ri = i;
  struct rank *p = peer < d->nranks ? &d->ranks[peer] : NULL;
  size_t si = SIZE_MAX;
  for (size_t i = 0; p && i < p->ns && si == SIZE_MAX;) {
    struct snd *s = &p->s[i];
    if (s->qpn != dest) {
      i++;
    } else if (s->consumes) {
      si = i;
    } else if (s->opcode == PP_WR_RDMA_WRITE) {
      place(d, rank, s); /* posted before this send on the QP: it landed first (RC order) */
      snd_drop(d, p, i);
    } else {
      i++; /* a READ: its bytes move at its own completion */
    }
  }
  if (si == SIZE_MAX || (!p->s[si].data && p->s[si].len)) {
    d->st.no_sender++;
  } else if (wc->opcode == PP_WC_OP_RECV_RDMA_WITH_IMM) {
    place(d, rank, &p->s[si]); /* the target is this rank: its own region */
  } else if (ri != SIZE_MAX) {
    uint32_t n = wc->byte_len < p->s[si].len ? wc->byte_len : p->s[si].len;
    d->st.moved_bytes += scatter(k->r[ri].sg, k->r[ri].nsge, p->s[si].data, n);
  }
  if (si != SIZE_MAX)
    snd_drop(d, p, si);
  if (ri != SIZE_MAX) {
    memmove(&k->r[ri], &k->r[ri + 1], (k->nr - ri - 1) * sizeof(k->r[0]));
    k->nr--;
  }
}

/* An error completion (its opcode is undefined, as in ibverbs): the work request it names, a
 * send or a receive of that QP, never lands. */
static void failed(struct rpd *d, uint32_t rank, const struct pp_wc *wc)
{
  struct rank *k = &d->ranks[rank];
  uint32_t peer, dest, srq = 0;
  if (!d->env.qp(d->env.ctx, rank, wc->qp_num, &peer, &dest, &srq))
    srq = 0;
  for (size_t i = 0; i < k->ns; i++)
    if (k->s[i].qpn == wc->qp_num && k->s[i].wr_id == wc->wr_id) {
      snd_drop(d, k, i);
      return;
    }
  for (size_t i = 0; i < k->nr; i++)
    if (k->r[i].wr_id == wc->wr_id &&
        ((!k->r[i].srq && k->r[i].q == wc->qp_num) || (k->r[i].srq && srq && k->r[i].q == srq))) {
      memmove(&k->r[i], &k->r[i + 1], (k->nr - i - 1) * sizeof(k->r[0]));
      k->nr--;
      return;
    }
}

void rpd_wc(struct rpd *d, uint32_t rank, const struct pp_wc *wc)
{
  if (rank >= d->nranks)
    return;
  if (wc->status != PP_WC_SUCCESS)
    failed(d, rank, wc);
  else if (wc->opcode == PP_WC_OP_RECV || wc->opcode == PP_WC_OP_RECV_RDMA_WITH_IMM)
    recv_done(d, rank, wc);
  else
    send_done(d, rank, wc);
}
