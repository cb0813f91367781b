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

void p2p_done_with_error(struct p2p *p, struct req *r)
{
  if (r->err == PP_P2P_E_TRUNCATED)
    p->st.truncated++;
  else if (r->err == PP_P2P_E_CANCELLED)
    p->st.cancelled++;
  else if (r->err == PP_P2P_E_FAILED || r->err == PP_P2P_E_NO_MR || r->err == PP_P2P_E_PEER)
    p->st.failed++;
  if (r->kind == K_RECV && r->err != PP_P2P_E_TRUNCATED) {
    r->src = r->rank;
    r->mtag = r->tag;
    r->got = r->msg_len = 0;
  }
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

