/* p2p: rendezvous transfers: RGET (RTS, READ, FIN) and pipelined RPUT (CTS, WRITE, FIN). */
#include "p2p_impl.h"

/* ------------------------------------------------------------------ the work list */

static int free_slot(struct req *r, uint32_t n)
{
  for (uint32_t i = 0; i < n; i++)
    if (!r->rce[i])
      return (int)i;
  return -1;
}

/* An RPUT sender that gave up writing (no registration: PP_P2P_E_NO_MR; a refused WRITE:
 * PP_P2P_E_FAILED): this and every later fragment go as a FIN without data (F_ABORT). */
static bool rput_given_up(const struct req *r)
{
  return r->err == PP_P2P_E_NO_MR || r->err == PP_P2P_E_FAILED;
}

/* The local registration of fragment f's bytes into r->rce[slot] (*rce; NULL when r gives up,
 * PP_P2P_E_NO_MR). false: r waits in line for one. */
static bool frag_reg(struct p2p *p, struct req *r, const struct frag *f, int slot,
                     struct pp_rcache_entry **rce)
{
  if (!p2p_reg_turn(p, r)) {
    p2p_reg_park(p, r);
    return false;
  }
  if (pp_rcache_get(&p->rc, r->buf + f->off, f->len, rce) != PP_OK) {
    *rce = NULL;
    if (p2p_reg_failed(p, r))
      return false;
    r->err = PP_P2P_E_NO_MR; /* this and every later fragment: a FIN without data */
    return true;
  }
  p2p_reg_unpark(p, r);
  r->rce[slot] = *rce;
  p2p_reg_held(p, r);
  return true;
}

/* Posts the WRITE of fragment f from r->rce[slot]; *nwr: the send-queue slots the FIN's
 * completion will free. false: the NIC refused it, the registration is released and r gives
 * up (PP_P2P_E_FAILED). */
static bool frag_write(struct pp_engine *e, struct req *r, const struct frag *f, int slot,
                       uint16_t *nwr)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  /* Unsignalled, its slot comes back with the FIN's completion; but never into the last free
   * slot: the FIN needs one, and a full send queue of WRs waiting for a FIN that cannot be
   * posted would never complete. The WRITE that takes the last slot is signalled and frees its
   * slot itself. */
  bool sig = c->sq_used + 1 == e->cfg.qp.sq_depth;
  struct pp_send_wr wr = {
      .wr_id = WRID(W_WRITE, r->gen, r->idx),
      .opcode = PP_WR_RDMA_WRITE,
      .send_flags = sig ? PP_SEND_SIGNALED : 0,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)(r->buf + f->off),
                   .length = f->len,
                   .lkey = r->rce[slot]->mr.lkey}},
      .remote_addr = f->addr,
      .rkey = f->rkey,
  };
  if (e->ops->post_send(e->nic, c->qpn, &wr) != PP_OK) {
    p2p_put_rce(p, r, (uint32_t)slot);
    r->err = PP_P2P_E_FAILED;
    r->wc = PP_WC_LOC_QP_OP_ERR;
    return false;
  }
  c->sq_used++;
  assert(c->sq_used <= e->cfg.qp.sq_depth);
  p->st.fragments++;
  if (sig)
    r->wrs++;
  *nwr = sig ? 1 : 2;
  return true;
}

/* Queues the FIN of fragment f (after its WRITE on the same QP: when the FIN arrives, the data
 * is in place), or an aborted one without data; slot: the registration its completion
 * releases (-1: none). */
static enum pp_status frag_fin(struct pp_engine *e, struct req *r, const struct frag *f, int slot,
                               uint16_t nwr)
{
  struct p2p *p = P2P(e);
  bool aborted = slot < 0 && rput_given_up(r);
  uint8_t flags = aborted ? (uint8_t)(F_ABORT | (r->err == PP_P2P_E_FAILED ? F_FAILED : 0)) : 0;
  struct hdr h = {.type = M_FIN, .flags = flags, .seq = f->idx, .rreq = r->peer_req,
                  .sreq = handle_of(p, r), .flen = f->len, .off = f->off};
  r->wrs++;
  r->fq_head = (r->fq_head + 1) % PIPE_MAX;
  r->fq_n--;
  r->fnext++;
  return p2p_send_reply(e, r->ch, &h, handle_of(p, r), (uint8_t)(slot >= 0 ? slot : 0xff), nwr);
}

/* Sender of an RPUT: writes the fragments whose CTS arrived. true while some remain. */
static bool work_rput_send(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  while (r->fq_n && !c->failed) {
    const struct frag *f = &r->fq[r->fq_head];
    int slot = free_slot(r, 2 * PIPE_MAX);
    uint16_t nwr = 1; /* send-queue slots the FIN's completion frees */
    if (c->sq_used >= e->cfg.qp.sq_depth || slot < 0)
      return true;
    struct pp_rcache_entry *rce = NULL;
    if (f->len && !rput_given_up(r) && !frag_reg(p, r, f, slot, &rce))
      return false;
    if (rce && !frag_write(e, r, f, slot, &nwr))
      rce = NULL;
    if (frag_fin(e, r, f, rce ? slot : -1, nwr) != PP_OK)
      return false;
  }
  return false;
}

/* Test bug early-cts: the CTS of fragment i goes out before its fragment is registered, with
 * whatever the slot holds; the fragment is registered on the next round. */
static bool bug_early_cts(struct pp_engine *e, struct req *r, uint32_t i, uint32_t off,
                          uint32_t flen)
{
  struct p2p *p = P2P(e);
  struct hdr h = {.type = M_CTS, .seq = i, .len = r->got, .nfrag = r->nfrag,
                  .sreq = r->peer_req, .rreq = handle_of(p, r),
                  .addr = (uint64_t)(uintptr_t)(r->buf + off), .rkey = r->xmr[i % p->P].rkey,
                  .flen = flen, .off = off};
  r->flags |= R_BUGCTS;
  if (p2p_send_reply(e, r->ch, &h, 0, 0, 1) != PP_OK)
    return false;
  return true;
}

/* Exposes fragment bytes [off, off + flen) of r for remote write into r->xmr[slot] (*mr).
 * false: r waits in line for a registration. *abort: none will ever come (PP_P2P_E_NO_MR). */
static bool frag_expose(struct pp_engine *e, struct req *r, uint32_t slot, uint32_t off,
                        uint32_t flen, struct pp_mr *mr, bool *abort)
{
  struct p2p *p = P2P(e);
  if (!p2p_reg_turn(p, r)) {
    p2p_reg_park(p, r);
    return false;
  }
  unsigned access = PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE;
  if (p2p_reg_xmr(e, r->buf + off, flen, access, mr) != PP_OK) {
    if (p2p_reg_failed(p, r))
      return false;
    *abort = true; /* nothing of ours in flight, none will be: the sender learns by CTS */
    return true;
  }
  p2p_reg_unpark(p, r);
  r->xmr[slot] = *mr;
  p2p_reg_held(p, r);
  return true;
}

/* Receiver of an RPUT: exposes the next fragments (a registration with remote write for this
 * fragment only) and sends their CTS, at most `pipeline` at a time. */
static bool work_rput_recv(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  uint32_t window = p->P;
  while (r->fnext < r->nfrag && r->fnext - r->fdone < window) {
    uint32_t i = r->fnext, slot = i % window;
    uint32_t off = (uint32_t)((uint64_t)i * p->prm.frag_size);
    uint32_t flen = r->got - off < p->prm.frag_size ? r->got - off : p->prm.frag_size;
    struct pp_mr mr = {0};
    bool abort = false;
    if (flen && PP_BUG(&e->cfg, EARLY_CTS) && !(r->flags & R_BUGCTS))
      return bug_early_cts(e, r, i, off, flen);
    if (flen && !frag_expose(e, r, slot, off, flen, &mr, &abort))
      return false;
    if (!abort && (r->flags & R_BUGCTS)) { /* test bug early-cts: its CTS went already */
      r->flags &= ~R_BUGCTS;
      r->fnext++;
      continue;
    }
    struct hdr h = {.type = M_CTS, .flags = abort ? F_ABORT : 0, .seq = i, .len = r->got,
                    .nfrag = r->nfrag, .sreq = r->peer_req, .rreq = handle_of(p, r),
                    .addr = (uint64_t)(uintptr_t)(r->buf + off), .rkey = mr.rkey,
                    .flen = flen, .off = off};
    r->fnext++;
    assert(r->fnext <= r->nfrag && r->fnext - r->fdone <= window);
    enum pp_status s = p2p_send_reply(e, r->ch, &h, 0, 0, 1);
    if (abort)
      p2p_fail_as(e, p->now, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    if (s != PP_OK || abort)
      return false;
  }
  return false;
}

/* The receiver of an RGET gives up (no registration for its buffer, or a READ the NIC refused):
 * it fails with err / wc, its registration released, and the sender learns by an aborted FIN
 * (F_FAILED: for a refused READ), at which it fails too and revokes the read access it gave. */
static void rget_abort(struct pp_engine *e, struct req *r, uint8_t err, uint8_t wc)
{
  struct p2p *p = P2P(e);
  uint8_t flags = (uint8_t)(F_RGET | F_ABORT | (err == PP_P2P_E_FAILED ? F_FAILED : 0));
  struct hdr f = {.type = M_FIN, .flags = flags, .sreq = r->peer_req};
  p2p_fail_as(e, p->now, r, err, wc);
  if (p2p_send_reply(e, r->ch, &f, 0, 0, 1) != PP_OK)
    p2p_post_refused(e, r->ch); /* no send buffer for it: cannot happen, the pool covers it */
}

/* Posts the READ of RGET receiver r into its registered buffer; one the NIC refuses fails the
 * transfer on both sides (rget_abort). */
static void rget_read(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  struct pp_send_wr wr = {
      .wr_id = WRID(W_READ, r->gen, r->idx),
      .opcode = PP_WR_RDMA_READ,
      .send_flags = PP_SEND_SIGNALED,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)r->buf, .length = r->got,
                   .lkey = r->rce[0]->mr.lkey}},
      .remote_addr = r->raddr,
      .rkey = r->rkey,
  };
  if (e->ops->post_send(e->nic, c->qpn, &wr) != PP_OK) {
    rget_abort(e, r, PP_P2P_E_FAILED, PP_WC_LOC_QP_OP_ERR);
    return;
  }
  c->sq_used++;
  assert(c->sq_used <= e->cfg.qp.sq_depth);
  r->flags |= R_READ;
  r->wrs++;
}

/* Receiver of an RGET: registers its buffer (in line) and reads the message. true while it
 * waits for send-queue room. */
static bool work_rget_recv(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  struct chan *c = &p->ch[r->ch];
  if ((r->flags & R_READ) || c->failed)
    return false;
  if (c->sq_used >= e->cfg.qp.sq_depth)
    return true;
  if (!p2p_reg_turn(p, r)) {
    p2p_reg_park(p, r);
    return false;
  }
  if (pp_rcache_get(&p->rc, r->buf, r->got, &r->rce[0]) != PP_OK) {
    if (!p2p_reg_failed(p, r))
      rget_abort(e, r, PP_P2P_E_NO_MR, PP_WC_LOC_PROT_ERR);
    return false;
  }
  p2p_reg_unpark(p, r);
  p2p_reg_held(p, r);
  rget_read(e, r);
  return false;
}

enum pp_status p2p_run_work(struct pp_engine *e)
{
  struct p2p *p = P2P(e);
  p->run = p->work; /* what this round does: work added meanwhile waits for the next one */
  p->work = p->work_tail = NULL;
  while (p->run) {
    struct req *r = p->run;
    p->run = r->next;
    r->flags &= ~R_WORK;
    if (r->state == RQ_DONE)
      continue;
    bool more;
    if (r->kind == K_SEND)
      more = work_rput_send(e, r);
    else if (r->proto == PP_P2P_RNDV_GET)
      more = work_rget_recv(e, r);
    else
      more = work_rput_recv(e, r);
    if (more)
      p2p_add_work(p, r);
  }
  return PP_OK;
}

/* CTS at an RPUT sender: the next fragment in order, within the message and the pipeline. */
enum pp_status p2p_on_cts(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h)
{
  struct p2p *p = P2P(e);
  uint32_t pi = p->ch[x->ch].peer;
  struct req *r = p2p_reply_req(p, h->sreq, K_SEND, pi);
  if (!r || r->proto != PP_P2P_RNDV_PUT || !r->await)
    return p2p_violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
  enum pp_status s = p2p_check_cts(e, now, x, h, r);
  if (s != PP_OK || x->state == RX_DEAD)
    return s;
  if (h->flags & F_ABORT) {
    r->err = PP_P2P_E_NO_MR; /* the receiver could not expose its buffer */
    r->nfrag = r->fnext;
    r->await = false;
    p2p_maybe_complete_send(e, now, r);
  } else {
    r->fq[(r->fq_head + r->fq_n) % PIPE_MAX] = (struct frag){
        .addr = h->addr, .rkey = h->rkey, .off = h->off, .len = h->flen, .idx = h->seq};
    r->fq_n++;
    assert(r->fq_n <= p->P && p->P <= PIPE_MAX);
    r->nfrag = h->nfrag;
    r->plen = h->len;
    r->peer_req = h->rreq;
    p2p_add_work(p, r);
  }
  return p2p_reply_consumed(e, x);
}

/* A FIN's flags: `kind` (F_RGET or 0), F_ABORT, and F_FAILED only with F_ABORT. */
static bool fin_flags_ok(uint8_t flags, uint8_t kind)
{
  return !(flags & ~(kind | F_ABORT | F_FAILED)) && (flags & F_RGET) == kind &&
         (!(flags & F_FAILED) || (flags & F_ABORT));
}

/* An aborted FIN: the peer gave up the transfer, for want of a registration (PP_P2P_E_NO_MR) or
 * because its NIC refused the READ or WRITE (F_FAILED: PP_P2P_E_FAILED, REM_ABORT_ERR). */
static void fin_abort(struct req *r, uint8_t flags)
{
  if (!(flags & F_ABORT))
    return;
  r->err = (flags & F_FAILED) ? PP_P2P_E_FAILED : PP_P2P_E_NO_MR;
  if (flags & F_FAILED)
    r->wc = PP_WC_REM_ABORT_ERR;
}

/* FIN at an RGET sender: the receiver read our buffer (or gave up: F_ABORT). */
static enum pp_status fin_rget(struct pp_engine *e, uint64_t now, struct rx *x,
                               const struct hdr *h)
{
  struct p2p *p = P2P(e);
  struct req *r = p2p_reply_req(p, h->sreq, K_SEND, p->ch[x->ch].peer);
  if (!r || r->proto != PP_P2P_RNDV_GET || !r->await)
    return p2p_violation(e, now, x, h->type, PP_VF_HANDLE, h->sreq, 0, false);
  if (!fin_flags_ok(h->flags, F_RGET))
    return p2p_violation(e, now, x, h->type, PP_VF_FLAGS, h->flags,
                         F_RGET | F_ABORT | F_FAILED, true);
  fin_abort(r, h->flags);
  r->await = false;
  p2p_maybe_complete_send(e, now, r);
  return p2p_reply_consumed(e, x);
}

/* The FIN an RTS carries (F_FIN; p2p_impl.h: carried): rreq names our RGET send it finishes,
 * checked as a FIN's sreq is (fin_rget). False when it names none: the peer failed, and x, the
 * RTS's buffer, went with it. */
bool p2p_fin_carried(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h)
{
  struct p2p *p = P2P(e);
  assert(h->type == M_RTS && (h->flags & F_FIN));
  struct req *r = p2p_reply_req(p, h->rreq, K_SEND, p->ch[x->ch].peer);
  if (!r || r->proto != PP_P2P_RNDV_GET || !r->await) {
    enum pp_status s = p2p_violation(e, now, x, M_FIN, PP_VF_HANDLE, h->rreq, 0, false);
    assert(s == PP_OK);
    (void)s;
    return false;
  }
  r->await = false;
  p2p_maybe_complete_send(e, now, r);
  return true;
}

/* FIN at an RPUT receiver: the next fragment of ours that got a CTS was written (or not:
 * F_ABORT); its window closes. */
static enum pp_status fin_rput(struct pp_engine *e, uint64_t now, struct rx *x,
                               const struct hdr *h)
{
  struct p2p *p = P2P(e);
  struct req *r = p2p_reply_req(p, h->rreq, K_RECV, p->ch[x->ch].peer);
  if (!r || r->proto != PP_P2P_RNDV_PUT || h->sreq != r->peer_req)
    return p2p_violation(e, now, x, h->type, PP_VF_HANDLE, h->rreq, 0, false);
  if (!fin_flags_ok(h->flags, 0))
    return p2p_violation(e, now, x, h->type, PP_VF_FLAGS, h->flags, F_ABORT | F_FAILED, true);
  /* only a fragment whose CTS went (test bug early-cts: one may go before its fnext moved) */
  uint32_t sent = r->fnext + ((r->flags & R_BUGCTS) ? 1 : 0);
  if (r->fdone >= sent) /* FINs with this one, against the CTSs that went */
    return p2p_violation(e, now, x, h->type, PP_VF_FRAG, r->fdone + 1ull, sent, true);
  enum pp_status s = p2p_check_frag(e, now, x, h, r->fdone, r->got);
  if (s != PP_OK || x->state == RX_DEAD)
    return s;
  if (r->xmr[h->seq % p->P].lkey)
    p2p_drop_xmr(e, r, h->seq % p->P); /* that fragment is no longer remotely writable */
  fin_abort(r, h->flags);
  if (++r->fdone == r->nfrag) {
    p2p_release_regs(e, r);
    p2p_complete(e, now, r);
  } else {
    p2p_add_work(p, r);
  }
  return p2p_reply_consumed(e, x);
}

enum pp_status p2p_on_fin(struct pp_engine *e, uint64_t now, struct rx *x, const struct hdr *h)
{
  return (h->flags & F_RGET) ? fin_rget(e, now, x, h) : fin_rput(e, now, x, h);
}


/* The READ of an RGET receiver completed: the data is in place, the sender hears by FIN, which
 * waits for the application's reply to go first (p2p_impl.h: reply first). */
enum pp_status p2p_read_done(struct pp_engine *e, uint64_t now, struct req *r,
                             const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  assert(p->ch[r->ch].sq_used > 0 && r->wrs > 0);
  p2p_sq_release(p, &p->ch[r->ch], &p->ch[r->ch].sq_used, 1, e->cfg.qp.sq_depth);
  if (wc->status != PP_WC_SUCCESS) {
    p2p_fail_channel(e, now, r->ch, wc->qp_num, (uint8_t)wc->status);
    return PP_OK;
  }
  r->wrs--;
  p2p_put_rce(p, r, 0);
  struct hdr f = {.type = M_FIN, .flags = F_RGET, .sreq = r->peer_req};
  p2p_complete(e, now, r);
  return p2p_defer_reply(e, now, r->ch, &f);
}

/* A WRITE of an RPUT sender completed: errors, and the WRITEs that took a send queue's last
 * slot (signalled). */
enum pp_status p2p_write_done(struct pp_engine *e, uint64_t now, struct req *r,
                              const struct pp_wc *wc)
{
  struct p2p *p = P2P(e);
  if (wc->status != PP_WC_SUCCESS) {
    p2p_fail_channel(e, now, r->ch, wc->qp_num, (uint8_t)wc->status);
    return PP_OK;
  }
  assert(p->ch[r->ch].sq_used > 0 && r->wrs > 0);
  p2p_sq_release(p, &p->ch[r->ch], &p->ch[r->ch].sq_used, 1, e->cfg.qp.sq_depth);
  r->wrs--;
  p2p_maybe_complete_send(e, now, r);
  return PP_OK;
}

/* An RTS matched receive r (x: its buffer, consumed here): an RGET reads, an RPUT sends CTSs. */
enum pp_status p2p_rndv_start(struct pp_engine *e, uint64_t now, struct req *r, struct rx *x)
{
  struct p2p *p = P2P(e);
  const struct hdr *h = rx_hdr(p, x);
  const struct peer *pe = &p->peer[r->peer];
  if (pe->failed) { /* a rendezvous with a dead peer can never transfer */
    r->proto = (h->flags & F_RGET) ? PP_P2P_RNDV_GET : PP_P2P_RNDV_PUT;
    p2p_fail_as(e, now, r, pe->fail_err, pe->fail_wc);
    return p2p_release_rx(e, x);
  }
  if (!(h->flags & F_RGET)) {
    r->proto = PP_P2P_RNDV_PUT;
    r->nfrag = nfrag_of(p, r->got);
    p2p_add_work(p, r);
    return p2p_release_rx(e, x);
  }
  r->proto = PP_P2P_RNDV_GET;
  r->raddr = h->addr;
  r->rkey = h->rkey;
  enum pp_status s = p2p_release_rx(e, x);
  if (s != PP_OK)
    return s;
  if (r->got > 0) {
    p2p_add_work(p, r);
    return PP_OK;
  }
  struct hdr f = {.type = M_FIN, .flags = F_RGET, .sreq = r->peer_req};
  p2p_complete(e, now, r);
  return p2p_send_reply(e, r->ch, &f, 0, 0, 1);
}
