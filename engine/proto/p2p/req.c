/* p2p: the request table, handles, the work list, completion and the done list. */
#include "p2p_impl.h"

#include <stdio.h>
#include <string.h>

#include "prepost/names.h"

static const char *const req_state_names[] = {
#define PP_X(id, name) [RQ_##id] = name,
    P2P_REQ_STATE_LIST(PP_X)
#undef PP_X
};

const char *p2p_req_state_name(enum req_state s)
{
  return pp_name_of(req_state_names, PP_NAMES_COUNT(req_state_names), s);
}

bool p2p_req_bad_transition(const struct p2p *p, const struct req *r, enum req_state to)
{
  fprintf(stderr, "p2p: request %u (%s): %s -> %s is not a transition of P2P_REQ_TRANSITIONS\n",
          (unsigned)(r - p->req), r->kind == K_SEND ? "send" : "receive",
          p2p_req_state_name((enum req_state)r->state), p2p_req_state_name(to));
  return false;
}

/* Takes r out of the list at *head (tail: its tail pointer, or NULL); false when not in it. */
static bool unlink_work(struct req **head, struct req **tail, struct req *r)
{
  struct req **pp = head, *prev = NULL;
  while (*pp && *pp != r) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp)
    return false;
  *pp = r->next;
  if (tail && *tail == r)
    *tail = prev;
  return true;
}

/* r (R_WORK) is over: off the work list, or off the part of it p2p_run_work has still to go
 * through (a request that fails with its peer while another one's work is being done). */
void p2p_remove_work(struct p2p *p, struct req *r)
{
  assert(r->flags & R_WORK);
  bool found = unlink_work(&p->work, &p->work_tail, r) || unlink_work(&p->run, NULL, r);
  assert(found);
  (void)found;
  r->flags &= ~R_WORK;
}

__attribute__((noinline)) void p2p_record(struct pp_engine *e, const struct req *r)
{
  struct p2p *p = P2P(e);
  if (p->nrec == p->rec_cap) {
    p->rec_dropped++;
    return;
  }
  bool ok = r->err == PP_P2P_E_OK || r->err == PP_P2P_E_TRUNCATED;
  p->rec[p->nrec++] = (struct pp_recv_record){
      .rank = e->cfg.rank,
      .source = ok ? r->src : r->rank,
      .tag = ok ? r->mtag : r->tag,
      .ctx = r->ctx,
      .size = ok ? r->got : 0,
      .msg_len = ok ? r->msg_len : 0,
      .error = r->err,
      .proto = r->proto,
      .wc_status = r->wc,
      .checksum = ok ? pp_p2p_checksum(r->buf, r->got) : 0,
  };
}

void p2p_count_error(struct p2p *p, const struct req *r)
{
  if (r->err == PP_P2P_E_TRUNCATED)
    p->st.truncated++;
  else if (r->err == PP_P2P_E_CANCELLED)
    p->st.cancelled++;
  else if (r->err == PP_P2P_E_FAILED || r->err == PP_P2P_E_NO_MR || r->err == PP_P2P_E_PEER)
    p->st.failed++;
}

static enum pp_wc_status wc_of(const struct req *r)
{
  switch (r->err) {
  case PP_P2P_E_OK:
    return PP_WC_SUCCESS;
  case PP_P2P_E_TRUNCATED:
    return PP_WC_LOC_LEN_ERR;
  case PP_P2P_E_CANCELLED:
    return PP_WC_WR_FLUSH_ERR;
  case PP_P2P_E_NO_MR:
    return PP_WC_LOC_PROT_ERR;
  default:
    return (enum pp_wc_status)r->wc;
  }
}

/* Request r goes to the workload: with a p2p_done slot (`app`: the application's callbacks,
 * engine/workload/app.c, and the scripts) its handle and its whole status, else its cookie and
 * completion status. */
static inline __attribute__((always_inline)) enum pp_status
flush_one(struct pp_engine *e, uint64_t now, const struct req *r, bool app)
{
  const struct p2p *p = P2P(e);
  if (app) {
    struct pp_p2p_status ps;
    p2p_fill_status(p, r, &ps);
    return pp_app_p2p_done(e, now, r->kind != K_SEND, handle_of(p, r), r->cookie, &ps);
  }
  return r->kind == K_SEND ? pp_app_send_done(e, now, r->cookie, wc_of(r))
                           : pp_app_recv_done(e, now, r->cookie, wc_of(r), r->src, r->mtag, r->got);
}

/* The done list to the workload, in order, with what the callbacks add to it meanwhile. The
 * workload's ops do not change during a run: `app` and `frees` are read once, and each
 * specialisation (p2p_flush_done) has one of the two kinds of callback in its loop. */
static inline __attribute__((always_inline)) enum pp_status
flush_list(struct pp_engine *e, uint64_t now, bool app, bool frees)
{
  struct p2p *p = P2P(e);
  enum pp_status st = PP_OK;
  for (struct req *r; (r = p->done_head) != NULL;) {
    p->done_head = r->next;
    if (!p->done_head)
      p->done_tail = NULL;
    r->flags &= ~R_DONEQ;
    if (r->flags & R_RELEASED) {
      p2p_req_set(p, r, RQ_FREE); /* its handle already went stale in pp_p2p_test */
      r->next = p->freereq;
      p->freereq = r;
      continue;
    }
    enum pp_status s = flush_one(e, now, r, app);
    if (st == PP_OK) /* the first error */
      st = s;
    if (frees || (r->flags & R_AUTO))
      p2p_req_free(p, r);
  }
  return st;
}

enum pp_status p2p_flush_done(struct pp_engine *e, uint64_t now)
{
  struct p2p *p = P2P(e);
  if (p->flushing)
    return PP_OK;
  p->flushing = true;
  const struct pp_app_ops *ops = e->appops;
  enum pp_status st = ops->p2p_done ? flush_list(e, now, true, ops->p2p_frees)
                                    : flush_list(e, now, false, ops->p2p_frees);
  p->flushing = false;
  return st;
}

void p2p_fail_as(struct pp_engine *e, uint64_t now, struct req *r, uint8_t err, uint8_t wc)
{
  if (r->state == RQ_DONE)
    return;
  p2p_release_regs(e, r);
  r->err = err;
  r->wc = wc;
  if (r->flags & R_POSTED) {
    pp_match_remove_posted(&P2P(e)->match, &r->me);
    r->flags &= ~R_POSTED;
  }
  p2p_complete(e, now, r);
}

