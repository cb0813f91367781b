/* p2p: registrations of user buffers, and the line of requests waiting for one. */
#include "p2p_impl.h"

/* ------------------------------------------------------------------ registrations in line */

/* r needs a registration it cannot get now: it waits in line (off the work list; the line's
 * head goes back to work when a registration is released). */
void p2p_reg_park(struct p2p *p, struct req *r)
{
  if (r->flags & R_REGQ)
    return;
  r->flags |= R_REGQ;
  r->regnext = NULL;
  if (p->regq_tail)
    p->regq_tail->regnext = r;
  else
    p->regq_head = r;
  p->regq_tail = r;
}

static void reg_released(struct p2p *p)
{
  assert(p->nregs > 0);
  p->nregs--;
  p->reg_wake = true;
  p->prog = true;
}

void p2p_put_rce(struct p2p *p, struct req *r, uint32_t i)
{
  assert(i < 2 * PIPE_MAX && r->rce[i]);
  pp_rcache_put(&p->rc, r->rce[i]);
  r->rce[i] = NULL;
  reg_released(p);
}

void p2p_drop_xmr(struct pp_engine *e, struct req *r, uint32_t i)
{
  e->ops->dereg_mr(e->nic, &r->xmr[i]);
  r->xmr[i] = (struct pp_mr){0};
  reg_released(P2P(e));
}

/* A registration with remote access for one transfer; when the NIC's MR table is full, unused
 * cached registrations make room. */
enum pp_status p2p_reg_xmr(struct pp_engine *e, void *buf, size_t len, unsigned access,
                           struct pp_mr *mr)
{
  struct p2p *p = P2P(e);
  enum pp_status s;
  while ((s = (enum pp_status)e->ops->reg_mr(e->nic, buf, len, access, mr)) == PP_LIMIT &&
         pp_rcache_evict(&p->rc))
    ;
  return s;
}

/* ------------------------------------------------------------------ failures */

void p2p_release_regs(struct pp_engine *e, struct req *r)
{
  struct p2p *p = P2P(e);
  if (!(r->flags & R_REGS))
    return;
  r->flags &= ~R_REGS;
  for (uint32_t i = 0; i < PIPE_MAX; i++)
    if (r->xmr[i].lkey)
      p2p_drop_xmr(e, r, i);
  for (uint32_t i = 0; i < 2 * PIPE_MAX; i++)
    if (r->rce[i])
      p2p_put_rce(p, r, i);
}

/* r could not register a buffer. While this engine holds registrations, one will be released:
 * r waits in line. With none held nothing will ever change: false, r must give up (NO_MR). */
bool p2p_reg_failed(struct p2p *p, struct req *r)
{
  if (p->nregs == 0)
    return false;
  p2p_reg_park(p, r);
  return true;
}

/* r leaves the line (it registered, or it is over): the next one may try. */
void p2p_reg_leave(struct p2p *p, struct req *r)
{
  struct req **pp = &p->regq_head, *prev = NULL;
  while (*pp != r) {
    prev = *pp;
    pp = &(*pp)->regnext;
  }
  *pp = r->regnext;
  if (p->regq_tail == r)
    p->regq_tail = prev;
  r->flags &= ~R_REGQ;
  p->reg_wake = true;
  p->prog = true;
}
