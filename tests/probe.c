#include "probe.h"

#include <criterion/criterion.h>
#include <string.h>

static enum pp_status pr_plan(struct pp_engine *e)
{
  (void)e;
  return PP_OK;
}
static void pr_destroy(struct pp_engine *e)
{
  e->as = NULL;
}
static enum pp_status pr_start(struct pp_engine *e, uint64_t now)
{
  (void)e, (void)now;
  return PP_OK;
}
static enum pp_status pr_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  (void)e, (void)now, (void)arg;
  return PP_OK;
}
static enum pp_status pr_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                   enum pp_wc_status st)
{
  (void)now;
  struct probe *p = e->as;
  cr_assert_lt(p->nsend, PROBE_MAX);
  p->sends[p->nsend++] = (struct done_rec){cookie, st, 0, 0};
  return PP_OK;
}
static enum pp_status pr_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                   enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len)
{
  (void)tag;
  struct probe *p = e->as;
  cr_assert_lt(p->nrecv, PROBE_MAX);
  p->recvs[p->nrecv++] = (struct done_rec){cookie, st, src, len};
  if (p->repost) {
    p->repost = false;
    p->repost_status = e->proto->recv(e, now, &p->again);
  }
  return PP_OK;
}
static bool pr_done(const struct pp_engine *e)
{
  (void)e;
  return true;
}

static const struct pp_app_ops probe_ops = {
    .name = "probe",
    .plan = pr_plan,
    .create = pr_plan,
    .destroy = pr_destroy,
    .start = pr_start,
    .pump = pr_start,
    .on_timer = pr_on_timer,
    .send_done = pr_send_done,
    .recv_done = pr_recv_done,
    .done = pr_done,
};

void probe_install(struct pp_engine *e, struct probe *p)
{
  memset(p, 0, sizeof(*p));
  e->appops->destroy(e);
  e->appops = &probe_ops;
  e->as = p;
}
