/*
 * proto-window: a credit-window protocol over SEND/RECV, as a prepost plug-in (prepost/proto.h).
 *
 * Each connection is one RC QP. The receiver keeps 2 * window receive buffers of its own posted
 * at all times (window for data, window for the credit messages coming the other way); a sender
 * starts with `window` credits, spends one per message and gets them back in CREDIT messages,
 * which the receiver sends once `credit_batch` are owed. A message goes into a buffer the
 * receiver re-posted before returning its credit, so a send never meets an empty receive queue:
 * no RNR NAK, whatever the timing (the explorer checks exactly that).
 *
 * A message that arrives while the application has no receive posted waits in its buffer (the
 * "deferred" path): that buffer is re-posted, and its credit returned, only when the application
 * takes the message. The test-only bug `credit-without-repost` forgets the re-post on that path
 * but still returns the credit: the sender then counts a buffer that is not there, and the
 * receiver's queue runs dry (RNR NAKs). `prepost explore --plugin ... --bug credit-without-repost`
 * finds it and shrinks it.
 *
 * Wire format, in the first 16 bytes of every message: kind (DATA or CREDIT), credits (CREDIT:
 * how many come back), len (DATA: payload bytes), zero. Payloads are copied through the
 * protocol's own registered buffers (one SGE each way): simple, not zero-copy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prepost/proto.h>

struct window_params {
  uint32_t window;       /* credits per connection */
  uint32_t credit_batch; /* credits returned at once */
};

static const struct pp_param params[] = {
    PP_PARAM_UINT(struct window_params, window, 1, 256, 8,
                  "messages a sender may have in flight per peer (the receiver keeps twice as "
                  "many buffers posted: data and credit messages)"),
    PP_PARAM_UINT(struct window_params, credit_batch, 1, 256, 1,
                  "the receiver returns credits once this many are owed (at most window)"),
};

enum { KIND_DATA = 1, KIND_CREDIT = 2 };
enum { BUG_CREDIT_WITHOUT_REPOST = 0 };

struct hdr {
  uint32_t kind, credits, len, zero;
};

#define HDR ((uint32_t)sizeof(struct hdr))
#define WR_SEND (1ull << 63)
#define NO_PEER UINT32_MAX

struct sslot {
  uint8_t busy, kind;
  uint64_t cookie; /* the application's, for DATA */
};

struct arrived {
  uint32_t buf;   /* index of the receive buffer holding it */
  bool deferred;  /* no application receive was posted when it came */
};

struct conn {
  uint32_t peer, qpn, psn;
  uint32_t credits; /* messages this side may still send */
  uint32_t owed;    /* credits this side owes its peer */
  uint8_t *rbuf, *sbuf;
  struct pp_mr rmr, smr;
  struct sslot *ss;
  uint32_t busy; /* send slots in flight */
  struct pp_msg *app; /* the application's receives, a FIFO of cap entries */
  uint32_t app_head, app_n, app_cap;
  struct arrived *arr; /* messages waiting for one, a FIFO of nbuf entries */
  uint32_t arr_head, arr_n;
  bool dead, kick; /* failed; a delivery timer is pending */
  uint32_t status; /* enum pp_wc_status that failed it */
  uint64_t blocked_ns; /* the sender ran out of credits then (0: it has some) */
};

struct win {
  struct conn *c;
  uint32_t n;
  uint32_t nbuf, bsize; /* buffers per direction and connection, bytes each */
};

static struct win *W(const struct pp_engine *e)
{
  return pp_engine_proto_state(e);
}

static const struct window_params *P(const struct pp_engine *e)
{
  return pp_engine_proto_params(e);
}

static struct conn *conn_by_peer(const struct pp_engine *e, uint32_t peer)
{
  struct win *w = W(e);
  for (uint32_t i = 0; w && i < w->n; i++)
    if (w->c[i].peer == peer)
      return &w->c[i];
  return NULL;
}

static struct conn *conn_by_qp(const struct pp_engine *e, uint32_t qpn)
{
  struct win *w = W(e);
  for (uint32_t i = 0; w && i < w->n; i++)
    if (w->c[i].qpn == qpn)
      return &w->c[i];
  return NULL;
}

static enum pp_status post_rbuf(struct pp_engine *e, struct conn *c, uint32_t i)
{
  struct win *w = W(e);
  struct pp_recv_wr wr = {
      .wr_id = i,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(c->rbuf + (size_t)i * w->bsize),
                   .length = w->bsize,
                   .lkey = c->rmr.lkey}},
  };
  return pp_nic_post_recv(e, c->qpn, &wr);
}

/* ------------------------------------------------------------------ set-up */

static void window_destroy(struct pp_engine *e)
{
  struct win *w = W(e);
  for (uint32_t i = 0; w && i < w->n; i++) {
    struct conn *c = &w->c[i];
    if (c->qpn && pp_nic_destroy_qp(e, c->qpn) != PP_OK)
      continue; /* the backend keeps it: nothing more to do here */
    if (c->rmr.lkey && pp_nic_dereg_mr(e, &c->rmr) != PP_OK)
      continue;
    if (c->smr.lkey && pp_nic_dereg_mr(e, &c->smr) != PP_OK)
      continue;
  }
  for (uint32_t i = 0; w && i < w->n; i++) {
    free(w->c[i].rbuf), free(w->c[i].sbuf), free(w->c[i].ss);
    free(w->c[i].app), free(w->c[i].arr);
  }
  if (w)
    free(w->c);
  free(w);
  pp_engine_set_proto_state(e, NULL);
}

static enum pp_status conn_create(struct pp_engine *e, struct conn *c, uint32_t peer)
{
  const struct pp_engine_cfg *cfg = pp_engine_config(e);
  struct win *w = W(e);
  c->peer = peer;
  c->credits = P(e)->window;
  c->app_cap = cfg->qp.rq_depth;
  c->rbuf = calloc(w->nbuf, w->bsize);
  c->sbuf = calloc(w->nbuf, w->bsize);
  c->ss = calloc(w->nbuf, sizeof *c->ss);
  c->app = calloc(c->app_cap, sizeof *c->app);
  c->arr = calloc(w->nbuf, sizeof *c->arr);
  if (!c->rbuf || !c->sbuf || !c->ss || !c->app || !c->arr)
    return PP_NOMEM;
  size_t bytes = (size_t)w->nbuf * w->bsize;
  enum pp_status s = pp_engine_reg(e, c->rbuf, bytes, PP_ACCESS_LOCAL_WRITE, &c->rmr);
  if (s == PP_OK)
    s = pp_engine_reg(e, c->sbuf, bytes, PP_ACCESS_LOCAL_WRITE, &c->smr);
  if (s == PP_OK)
    s = pp_engine_qp_open(e, peer, 0, w->nbuf, w->nbuf, &c->qpn, &c->psn);
  /* every buffer posted before anyone can send (the QP is in INIT) */
  for (uint32_t i = 0; s == PP_OK && i < w->nbuf; i++)
    s = post_rbuf(e, c, i);
  return s;
}

static enum pp_status window_create(struct pp_engine *e)
{
  const struct pp_engine_cfg *cfg = pp_engine_config(e);
  struct win *w = calloc(1, sizeof *w);
  if (!w)
    return PP_NOMEM;
  pp_engine_set_proto_state(e, w);
  w->nbuf = 2 * P(e)->window;
  w->bsize = HDR + cfg->workload.size;
  w->c = calloc(pp_engine_npeers(e) ? pp_engine_npeers(e) : 1, sizeof *w->c);
  if (!w->c)
    return PP_NOMEM;
  for (uint32_t i = 0; i < pp_engine_npeers(e); i++) {
    enum pp_status s = conn_create(e, &w->c[w->n++], pp_engine_peer(e, i));
    if (s != PP_OK)
      return s; /* the engine calls destroy */
  }
  return PP_OK;
}

static bool window_local_info(const struct pp_engine *e, uint32_t peer, struct pp_conn_info *out)
{
  const struct conn *c = conn_by_peer(e, peer);
  if (!c)
    return false;
  *out = (struct pp_conn_info){.nchannels = 1, .qp_num = {c->qpn}, .psn = {c->psn}};
  return true;
}

static enum pp_status window_connect(struct pp_engine *e, uint64_t now, uint32_t peer,
                                     const struct pp_conn_info *remote)
{
  (void)now;
  const struct conn *c = conn_by_peer(e, peer);
  if (!c)
    return PP_NOTFOUND;
  if (remote->nchannels != 1)
    return PP_INVALID;
  return pp_engine_qp_connect(e, c->qpn, c->psn, remote->qp_num[0], remote->psn[0]);
}

/* ------------------------------------------------------------------ sending */

static int free_slot(const struct pp_engine *e, const struct conn *c)
{
  for (uint32_t i = 0; i < W(e)->nbuf; i++)
    if (!c->ss[i].busy)
      return (int)i;
  return -1;
}

/* One message from slot i: header, then len payload bytes (already in place). */
static enum pp_status post_slot(struct pp_engine *e, struct conn *c, uint32_t i, uint32_t kind,
                                uint32_t credits, uint32_t len, uint64_t cookie)
{
  uint8_t *b = c->sbuf + (size_t)i * W(e)->bsize;
  struct hdr h = {.kind = kind, .credits = credits, .len = len};
  memcpy(b, &h, HDR);
  struct pp_send_wr wr = {
      .wr_id = WR_SEND | i,
      .opcode = PP_WR_SEND,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)b, .length = HDR + len, .lkey = c->smr.lkey}},
  };
  enum pp_status s = pp_nic_post_send(e, c->qpn, &wr);
  if (s == PP_OK) {
    c->ss[i] = (struct sslot){.busy = 1, .kind = (uint8_t)kind, .cookie = cookie};
    c->busy++;
  }
  return s;
}

/* Returns what is owed once a batch is due and a slot is free. */
static enum pp_status give_credits(struct pp_engine *e, struct conn *c)
{
  if (c->dead || c->owed < P(e)->credit_batch)
    return PP_OK;
  int i = free_slot(e, c);
  if (i < 0)
    return PP_OK; /* again at the next send completion */
  enum pp_status s = post_slot(e, c, (uint32_t)i, KIND_CREDIT, c->owed, 0, 0);
  if (s == PP_OK)
    c->owed = 0;
  return s;
}

static enum pp_status window_send(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  struct conn *c = conn_by_peer(e, m->peer);
  if (!c || m->len > W(e)->bsize - HDR)
    return PP_INVALID;
  if (!c->dead && c->credits == 0) {
    if (!c->blocked_ns)
      c->blocked_ns = now ? now : 1;
    return PP_AGAIN;
  }
  int i = free_slot(e, c); /* a dead connection posts anyway: its QP flushes the send */
  if (i < 0)
    return PP_AGAIN;
  memcpy(c->sbuf + (size_t)i * W(e)->bsize + HDR, m->buf, m->len);
  enum pp_status s = post_slot(e, c, (uint32_t)i, KIND_DATA, 0, m->len, m->cookie);
  if (s == PP_OK && !c->dead) {
    c->credits--;
    c->blocked_ns = 0;
  }
  return s;
}

/* ------------------------------------------------------------------ receiving */

static uint32_t conn_index(const struct pp_engine *e, const struct conn *c)
{
  return (uint32_t)(c - W(e)->c);
}

/* Delivery happens from on_wc or on_timer, never inside recv(): the application's callback must
 * not run inside its own call into the protocol. */
static enum pp_status kick(struct pp_engine *e, uint64_t now, struct conn *c)
{
  if (c->kick)
    return PP_OK;
  c->kick = true;
  return pp_proto_timer(e, now, conn_index(e, c));
}

static enum pp_status window_recv(struct pp_engine *e, uint64_t now, const struct pp_msg *m)
{
  struct conn *c = conn_by_peer(e, m->peer);
  if (!c)
    return PP_INVALID;
  if (c->app_n == c->app_cap)
    return PP_AGAIN;
  c->app[(c->app_head + c->app_n++) % c->app_cap] = *m;
  return c->arr_n || c->dead ? kick(e, now, c) : PP_OK;
}

/* The arrived messages to the application's receives, in order. */
static enum pp_status deliver(struct pp_engine *e, uint64_t now, struct conn *c)
{
  struct win *w = W(e);
  while (!c->dead && c->arr_n && c->app_n) {
    struct arrived a = c->arr[c->arr_head];
    c->arr_head = (c->arr_head + 1) % w->nbuf, c->arr_n--;
    struct pp_msg m = c->app[c->app_head];
    c->app_head = (c->app_head + 1) % c->app_cap, c->app_n--;
    const uint8_t *b = c->rbuf + (size_t)a.buf * w->bsize;
    struct hdr h;
    memcpy(&h, b, HDR);
    uint32_t len = h.len <= m.len ? h.len : m.len;
    memcpy(m.buf, b + HDR, len);
    enum pp_status s = PP_OK;
    if (!(a.deferred && pp_engine_proto_bug(e, BUG_CREDIT_WITHOUT_REPOST)))
      s = post_rbuf(e, c, a.buf);
    c->owed++;
    if (s == PP_OK)
      s = give_credits(e, c);
    if (s != PP_OK)
      return s;
    s = pp_app_recv_done(e, now, m.cookie, h.len <= m.len ? PP_WC_SUCCESS : PP_WC_LOC_LEN_ERR,
                         c->peer, 0, len);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

/* The connection failed (an error completion, a fatal QP, a peer's bad message): its QP goes
 * to ERROR (every posted WR flushes), the application's receives complete with `st`. */
static enum pp_status fail_conn(struct pp_engine *e, uint64_t now, struct conn *c, uint32_t st)
{
  if (!c->dead) {
    c->dead = true;
    c->status = st;
    c->arr_n = 0;
    struct pp_qp_attr err = {.qp_state = PP_QPS_ERR};
    enum pp_status s = pp_nic_modify_qp(e, c->qpn, &err, PP_QP_STATE);
    if (s != PP_OK)
      return s;
  }
  while (c->app_n) {
    struct pp_msg m = c->app[c->app_head];
    c->app_head = (c->app_head + 1) % c->app_cap, c->app_n--;
    enum pp_status s =
        pp_app_recv_done(e, now, m.cookie, (enum pp_wc_status)c->status, c->peer, 0, 0);
    if (s != PP_OK)
      return s;
  }
  return PP_OK;
}

static enum pp_status violation(struct pp_engine *e, uint64_t now, struct conn *c, uint8_t field,
                                uint64_t value, uint64_t limit)
{
  struct pp_violation v = {.peer = c->peer, .field = field, .at_most = 1, .value = value,
                           .limit = limit};
  memcpy(v.msg, "window", 7);
  pp_engine_violation(e, now, &v);
  return fail_conn(e, now, c, PP_WC_REM_OP_ERR);
}

static enum pp_status on_recv(struct pp_engine *e, uint64_t now, struct conn *c,
                              const struct pp_wc *wc)
{
  struct win *w = W(e);
  uint32_t i = (uint32_t)wc->wr_id;
  if (i >= w->nbuf)
    return PP_INVALID;
  if (c->dead)
    return PP_OK; /* a flushed buffer of a failed connection */
  struct hdr h;
  if (wc->byte_len < HDR)
    return violation(e, now, c, PP_VF_BYTE_LEN, wc->byte_len, HDR);
  memcpy(&h, c->rbuf + (size_t)i * w->bsize, HDR);
  if (h.kind == KIND_CREDIT) {
    if (h.credits == 0 || c->credits + (uint64_t)h.credits > P(e)->window)
      return violation(e, now, c, PP_VF_CREDITS, c->credits + (uint64_t)h.credits,
                       P(e)->window);
    c->credits += h.credits;
    c->blocked_ns = 0;
    return post_rbuf(e, c, i);
  }
  if (h.kind != KIND_DATA)
    return violation(e, now, c, PP_VF_TYPE, h.kind, KIND_CREDIT);
  if (h.len != wc->byte_len - HDR)
    return violation(e, now, c, PP_VF_LEN, h.len, wc->byte_len - HDR);
  c->arr[(c->arr_head + c->arr_n++) % w->nbuf] = (struct arrived){.buf = i,
                                                                 .deferred = c->app_n == 0};
  return deliver(e, now, c);
}

static enum pp_status window_on_wc(struct pp_engine *e, uint64_t now, const struct pp_wc *wc)
{
  struct conn *c = conn_by_qp(e, wc->qp_num);
  if (!c)
    return PP_INVALID;
  if (!(wc->wr_id & WR_SEND)) {
    if (wc->status != PP_WC_SUCCESS)
      return fail_conn(e, now, c, wc->status);
    return on_recv(e, now, c, wc);
  }
  uint32_t i = (uint32_t)(wc->wr_id & ~WR_SEND);
  if (i >= W(e)->nbuf || !c->ss[i].busy)
    return PP_INVALID;
  struct sslot sl = c->ss[i];
  c->ss[i].busy = 0;
  c->busy--;
  enum pp_status s = wc->status != PP_WC_SUCCESS ? fail_conn(e, now, c, wc->status)
                                                 : give_credits(e, c);
  if (s != PP_OK)
    return s;
  return sl.kind == KIND_DATA ? pp_app_send_done(e, now, sl.cookie, wc->status) : PP_OK;
}

static enum pp_status window_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct win *w = W(e);
  if (arg >= w->n)
    return PP_INVALID;
  struct conn *c = &w->c[arg];
  c->kick = false;
  return c->dead ? fail_conn(e, now, c, c->status) : deliver(e, now, c);
}

/* A fatal QP (ibverbs IBV_EVENT_QP_FATAL and its kin): fail the connection at once rather than
 * wait for the flushed completions. */
static enum pp_status window_on_async(struct pp_engine *e, uint64_t now,
                                      const struct pp_async_event *ev)
{
  if (ev->type != PP_EVENT_QP_FATAL && ev->type != PP_EVENT_QP_REQ_ERR &&
      ev->type != PP_EVENT_QP_ACCESS_ERR)
    return PP_OK;
  struct conn *c = conn_by_qp(e, ev->qp_num);
  return c ? fail_conn(e, now, c, PP_WC_FATAL_ERR) : PP_OK;
}

/* ------------------------------------------------------------------ state */

/* Quiet: no send in flight, no message waiting for a receive, no send refused for credits that
 * are on their way (the peer owes them: its credit message is an event still to come). */
static bool window_quiet(const struct pp_engine *e)
{
  const struct win *w = W(e);
  for (uint32_t i = 0; w && i < w->n; i++) {
    const struct conn *c = &w->c[i];
    if (c->busy || (!c->dead && (c->arr_n || c->blocked_ns)))
      return false;
  }
  return true;
}

static size_t window_pending(const struct pp_engine *e, struct pp_wait *out, size_t max)
{
  const struct win *w = W(e);
  size_t n = 0;
  for (uint32_t i = 0; w && i < w->n; i++) {
    const struct conn *c = &w->c[i];
    if (c->dead)
      continue;
    if (c->blocked_ns)
      pp_wait_add(out, max, &n, PP_WAIT_CREDITS, c->peer, PP_WAIT_NOTAG, c->blocked_ns,
                  "a send waits for credits (0 of %u)", P(e)->window);
    if (c->busy)
      pp_wait_add(out, max, &n, PP_WAIT_SEND_WC, c->peer, PP_WAIT_NOTAG, 0,
                  "%u sends wait for their completion", c->busy);
    if (c->arr_n)
      pp_wait_add(out, max, &n, PP_WAIT_UNEXPECTED, c->peer, PP_WAIT_NOTAG, 0,
                  "%u messages wait for a receive", c->arr_n);
  }
  return n;
}

static size_t window_dump(const struct pp_engine *e, char *buf, size_t len)
{
  const struct win *w = W(e);
  size_t n = 0;
  for (uint32_t i = 0; w && i < w->n; i++) {
    const struct conn *c = &w->c[i];
    int k = snprintf(buf + (n < len ? n : len), n < len ? len - n : 0,
                     "  window: peer %u qp 0x%x: %u credits, %u owed, %u sends in flight, "
                     "%u arrived, %u receives posted%s\n",
                     c->peer, c->qpn, c->credits, c->owed, c->busy, c->arr_n, c->app_n,
                     c->dead ? ", failed" : "");
    n += k > 0 ? (size_t)k : 0;
  }
  return n;
}

static const struct pp_proto_ops window_ops = {
    .name = "window",
    .create = window_create,
    .destroy = window_destroy,
    .local_info = window_local_info,
    .connect = window_connect,
    .send = window_send,
    .recv = window_recv,
    .on_wc = window_on_wc,
    .on_timer = window_on_timer,
    .quiet = window_quiet,
    .pending = window_pending,
    .dump = window_dump,
    .on_async = window_on_async,
};

/* ------------------------------------------------------------------ the definition */

static enum pp_status window_check(const struct pp_engine_cfg *cfg, const void *params,
                                   char *err, size_t errlen)
{
  const struct window_params *p = params;
  if (p->credit_batch > p->window) {
    snprintf(err, errlen, "window.credit_batch must be at most window.window (%u), got %u",
             p->window, p->credit_batch);
    return PP_INVALID;
  }
  if (cfg->workload.size > (1u << 24)) {
    snprintf(err, errlen, "the window protocol copies messages: at most 16 MiB, got %u",
             cfg->workload.size);
    return PP_INVALID;
  }
  return PP_OK;
}

static void window_mem_need(const struct pp_engine_cfg *cfg, const void *params, uint32_t npeers,
                            struct pp_mem_need *out)
{
  const struct window_params *p = params;
  uint64_t nbuf = 2ull * p->window, bsize = HDR + (uint64_t)cfg->workload.size;
  out->qps = npeers;
  out->send_wqes = out->recv_wqes = npeers * nbuf;
  pp_mem_add(out, npeers * 2 * nbuf * bsize, "window.window and workload.size");
  pp_mem_add(out, npeers * ((uint64_t)cfg->qp.rq_depth * sizeof(struct pp_msg) +
                            nbuf * (sizeof(struct sslot) + sizeof(struct arrived))),
             "qp.rq_depth and window.window");
}

/* explorer: a window of 1..16 (stop-and-wait at 1), any batch up to it */
static void window_gen(struct pp_prng *r, const struct pp_explore_limits *lim,
                       struct pp_engine_cfg *cfg, void *params)
{
  (void)lim;
  (void)cfg;
  struct window_params *p = params;
  p->window = 1 + (uint32_t)pp_prng_below(r, 16);
  p->credit_batch = 1 + (uint32_t)pp_prng_below(r, p->window);
}

static bool window_reduce(struct pp_engine_cfg *cfg, void *params, unsigned k, const char **what)
{
  (void)cfg;
  struct window_params *p = params;
  switch (k) {
  case 0:
    *what = "half the window";
    if (p->window <= 1)
      return false;
    p->window /= 2;
    if (p->credit_batch > p->window)
      p->credit_batch = p->window;
    return true;
  case 1:
    *what = "credits returned one by one";
    if (p->credit_batch == 1)
      return false;
    p->credit_batch = 1;
    return true;
  default:
    return false;
  }
}

static const struct pp_proto_explore window_explore = {
    .flow_controlled = true,
    .in_mix = false, /* explored with --protocol window (or its --bug) */
    .gen = window_gen,
    .reduce = window_reduce,
};

/* exports: a message's name from its header */
static const char *window_msg_name(const uint8_t *head, size_t len)
{
  struct hdr h;
  if (len < HDR)
    return NULL;
  memcpy(&h, head, HDR);
  return h.kind == KIND_DATA ? "DATA" : h.kind == KIND_CREDIT ? "CREDIT" : NULL;
}

static const struct pp_proto_bug window_bugs[] = {
    [BUG_CREDIT_WITHOUT_REPOST] = {"credit-without-repost",
                                   "window: a message that waited for its receive returns its "
                                   "credit but its buffer is never re-posted"},
};

static const struct pp_proto_def window_def = {
    .abi = PP_PROTO_ABI,
    .name = "window",
    .desc = "credit window over SEND/RECV, receive buffers always posted (an example plug-in)",
    .params = params,
    .nparams = sizeof params / sizeof params[0],
    .params_size = sizeof(struct window_params),
    .check = window_check,
    .mem_need = window_mem_need,
    .ops = &window_ops,
    .bugs = window_bugs,
    .nbugs = sizeof window_bugs / sizeof window_bugs[0],
    .explore = &window_explore,
    .msg_name = window_msg_name,
};

PP_PLUGIN_DECLARE("proto-window");

__attribute__((visibility("default"))) int prepost_plugin_init(const struct pp_plugin_host *host);

int prepost_plugin_init(const struct pp_plugin_host *host)
{
  return host->register_protocol(host, &window_def, host->err, host->errlen) == PP_OK ? 0 : 1;
}
