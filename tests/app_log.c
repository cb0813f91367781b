#include "app_log.h"

#include <criterion/criterion.h>
#include <string.h>

struct app_log APP_LOG;

void app_log_reset(void)
{
  memset(&APP_LOG, 0, sizeof(APP_LOG));
}

static uint32_t rank_of(void *ud)
{
  uint32_t r = (uint32_t)(uintptr_t)ud;
  cr_assert_lt(r, APP_LOG_RANKS, "user_data is the rank");
  return r;
}

static enum pp_status log_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                               const struct pp_p2p_status *st, void *ud, bool recv)
{
  uint32_t r = rank_of(ud);
  cr_assert_eq(pp_app_user_data(e), ud, "the engine's user_data is the one passed");
  cr_assert_neq(req, PP_REQ_NULL, "a completion names its request");
  cr_assert_leq(st->done_ns, now, "reported at or after its completion");
  cr_assert_lt(APP_LOG.n, APP_LOG_MAX, "the test logs at most %u completions", APP_LOG_MAX);
  APP_LOG.ev[APP_LOG.n++] = (struct app_log_ev){
      .rank = r, .recv = recv, .req = req, .cookie = cookie, .now = now, .st = *st};
  return PP_OK;
}

static enum pp_status log_send(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                               const struct pp_p2p_status *st, void *ud)
{
  return log_done(e, now, req, cookie, st, ud, false);
}

static enum pp_status log_recv(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                               const struct pp_p2p_status *st, void *ud)
{
  return log_done(e, now, req, cookie, st, ud, true);
}

static enum pp_status log_start(struct pp_engine *e, uint64_t now, void *ud)
{
  (void)e, (void)now;
  APP_LOG.starts[rank_of(ud)]++;
  return PP_OK;
}

static enum pp_status log_timer(struct pp_engine *e, uint64_t now, uint32_t arg, void *ud)
{
  (void)e;
  uint32_t r = rank_of(ud);
  APP_LOG.timers[r]++;
  APP_LOG.last_timer_arg[r] = arg;
  APP_LOG.last_timer_ns[r] = now;
  return PP_OK;
}

static void log_peer_failed(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f,
                            void *ud)
{
  (void)e, (void)now;
  uint32_t r = rank_of(ud);
  cr_assert_lt(APP_LOG.nfail[r], APP_LOG_PEERS);
  APP_LOG.fail[r][APP_LOG.nfail[r]++] = *f;
}

static void log_error(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev,
                      void *ud)
{
  (void)e, (void)now;
  uint32_t r = rank_of(ud);
  APP_LOG.errors[r]++;
  APP_LOG.last_error[r] = *ev;
}

void app_log_callbacks(struct pp_app_callbacks *cb)
{
  pp_app_callbacks_default(cb);
  cb->start = log_start;
  cb->send_done = log_send;
  cb->recv_done = log_recv;
  cb->timer = log_timer;
  cb->peer_failed = log_peer_failed;
  cb->error = log_error;
}

const struct app_log_ev *app_log_find(uint32_t rank, pp_req req)
{
  for (uint32_t i = APP_LOG.n; i-- > 0;)
    if (APP_LOG.ev[i].rank == rank && APP_LOG.ev[i].req == req)
      return &APP_LOG.ev[i];
  return NULL;
}

bool app_log_status_eq(const struct pp_p2p_status *a, const struct pp_p2p_status *b)
{
  return a->source == b->source && a->tag == b->tag && a->ctx == b->ctx && a->len == b->len &&
         a->msg_len == b->msg_len && a->error == b->error && a->proto == b->proto &&
         a->wc_status == b->wc_status && a->done_ns == b->done_ns;
}
