/*
 * The app workload: the embedding program's callbacks (prepost/app.h). No application lives
 * here: this file forwards the engine's events to the program's table and counts what its
 * requests did (messages and bytes sent and received, for the rank's statistics). Peers are
 * every other rank; the program calls the p2p API (prepost/p2p.h) itself.
 *
 * Completions come from the p2p layer's done list at the end of the event that finished them
 * (engine/proto/p2p/p2p.c, flush_done), so a callback may post, test and cancel at once. Peer failures
 * are found in the middle of an event (a protocol check, a completion in error): they are queued
 * and told after it, from `pump`, when the engine and the protocol are consistent again.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine_impl.h"
#include "prepost/app.h"
#include "prepost/names.h"

struct app {
  struct pp_app_callbacks cb;
  void *ud;
  struct pp_peer_failure fail[PP_MAX_PEERS]; /* found, told in order */
  uint32_t nfail, told;
};

/* What pp_engine_create_app hands pp_engine_create_with (e->app_arg). */
struct app_arg {
  const struct pp_app_callbacks *cb;
  void *ud;
};

static const char *const failure_names[] = {
#define PP_X(id, name, desc) [PP_PEER_FAIL_##id] = name,
    PP_PEER_FAILURE_LIST(PP_X)
#undef PP_X
};

const char *pp_peer_failure_name(enum pp_peer_failure_kind k)
{
  return pp_name_of(failure_names, PP_PEER_FAIL_COUNT, k);
}

/* ------------------------------------------------------------------ no-op defaults */

static enum pp_status nop_start(struct pp_engine *e, uint64_t now, void *ud)
{
  (void)e, (void)now, (void)ud;
  return PP_OK;
}

static enum pp_status nop_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                               const struct pp_p2p_status *st, void *ud)
{
  (void)e, (void)now, (void)req, (void)cookie, (void)st, (void)ud;
  return PP_OK;
}

static enum pp_status nop_timer(struct pp_engine *e, uint64_t now, uint32_t arg, void *ud)
{
  (void)e, (void)now, (void)arg, (void)ud;
  return PP_OK;
}

static void nop_peer_failed(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f,
                            void *ud)
{
  (void)e, (void)now, (void)f, (void)ud;
}

static void nop_error(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev,
                      void *ud)
{
  (void)e, (void)now, (void)ev, (void)ud;
}

static bool nop_finished(const struct pp_engine *e, void *ud)
{
  (void)e, (void)ud;
  return true;
}

void pp_app_callbacks_default(struct pp_app_callbacks *cb)
{
  *cb = (struct pp_app_callbacks){
      .start = nop_start,
      .send_done = nop_done,
      .recv_done = nop_done,
      .timer = nop_timer,
      .progress = nop_start,
      .peer_failed = nop_peer_failed,
      .error = nop_error,
      .done = nop_finished,
  };
}

bool pp_app_callbacks_complete(const struct pp_app_callbacks *cb)
{
  return cb && cb->start && cb->send_done && cb->recv_done && cb->timer && cb->progress &&
         cb->peer_failed && cb->error && cb->done;
}

/* ------------------------------------------------------------------ public entry points */

enum pp_status pp_engine_create_app(const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                    void *nic, const struct pp_app_callbacks *cb,
                                    void *user_data, struct pp_engine **out)
{
  *out = NULL;
  if (!pp_app_callbacks_complete(cb))
    return PP_INVALID;
  struct pp_engine_cfg *c = malloc(sizeof(*c)); /* 12 KB: not on a simulated actor's stack */
  if (!c)
    return PP_NOMEM;
  *c = *cfg;
  c->workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  struct app_arg a = {.cb = cb, .ud = user_data};
  enum pp_status s = pp_engine_create_with(c, ops, nic, &a, out);
  free(c);
  return s;
}

static struct app *app_of(const struct pp_engine *e)
{
  return e && e->appops == &pp_app_workload_ops ? e->as : NULL;
}

void *pp_app_user_data(const struct pp_engine *e)
{
  const struct app *a = app_of(e);
  return a ? a->ud : NULL;
}

enum pp_status pp_app_timer(struct pp_engine *e, uint64_t deadline, uint32_t arg)
{
  if (!app_of(e))
    return PP_STATE;
  return pp_engine_push_timer(e, deadline, PP_TIMER_APP, arg);
}

void pp_app_latency(struct pp_engine *e, uint64_t ns)
{
  if (app_of(e))
    pp_engine_latency(e, ns);
}

/* ------------------------------------------------------------------ the ops table */

static enum pp_status app_plan(struct pp_engine *e)
{
  const struct app_arg *arg = e->app_arg;
  if (!arg || !pp_app_callbacks_complete(arg->cb))
    return PP_INVALID; /* workload 'app' without pp_engine_create_app */
  struct app *a = calloc(1, sizeof(*a));
  if (!a)
    return PP_NOMEM;
  e->as = a;
  a->cb = *arg->cb;
  a->ud = arg->ud;
  e->lat_cap = 1; /* pp_app_latency: the histogram has a fixed size */
  for (uint32_t r = 0; r < e->cfg.nranks; r++)
    if (r != e->cfg.rank && pp_engine_add_peer(e, r) != PP_OK)
      return PP_LIMIT;
  return PP_OK;
}

static enum pp_status app_create(struct pp_engine *e)
{
  (void)e;
  return PP_OK;
}

static void app_destroy(struct pp_engine *e)
{
  free(e->as);
  e->as = NULL;
}

static enum pp_status app_start(struct pp_engine *e, uint64_t now)
{
  struct app *a = e->as;
  return a->cb.start(e, now, a->ud);
}

/* Tells the failures found so far, in order. */
static void tell_failures(struct pp_engine *e, uint64_t now, struct app *a)
{
  while (a->told < a->nfail) {
    const struct pp_peer_failure *f = &a->fail[a->told++];
    a->cb.peer_failed(e, now, f, a->ud);
  }
}

static enum pp_status app_pump(struct pp_engine *e, uint64_t now)
{
  struct app *a = e->as;
  if (!e->started)
    return PP_OK;
  tell_failures(e, now, a);
  return a->cb.progress(e, now, a->ud);
}

static enum pp_status app_on_timer(struct pp_engine *e, uint64_t now, uint32_t arg)
{
  struct app *a = e->as;
  return a->cb.timer(e, now, arg, a->ud);
}

/* The p2p layer reports every request of the program through app_p2p_done. */
static enum pp_status app_send_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                    enum pp_wc_status st)
{
  (void)e, (void)now, (void)cookie, (void)st;
  return PP_INVALID;
}

static enum pp_status app_recv_done(struct pp_engine *e, uint64_t now, uint64_t cookie,
                                    enum pp_wc_status st, uint32_t src, uint64_t tag, uint32_t len)
{
  (void)e, (void)now, (void)cookie, (void)st, (void)src, (void)tag, (void)len;
  return PP_INVALID;
}

static enum pp_status app_p2p_done(struct pp_engine *e, uint64_t now, bool recv, uint64_t req,
                                   uint64_t cookie, const struct pp_p2p_status *st)
{
  struct app *a = e->as;
  bool ok = st->error == PP_P2P_E_OK || (recv && st->error == PP_P2P_E_TRUNCATED);
  if (ok && recv) {
    e->st.messages_received++;
    e->st.bytes_received += st->len;
  } else if (ok) {
    e->st.messages_sent++;
    e->st.bytes_sent += st->len;
  }
  return (recv ? a->cb.recv_done : a->cb.send_done)(e, now, req, cookie, st, a->ud);
}

static bool app_done(const struct pp_engine *e)
{
  const struct app *a = e->as;
  return a->told == a->nfail && a->cb.done(e, a->ud);
}

static void app_peer_failed(struct pp_engine *e, uint64_t now, const struct pp_peer_failure *f)
{
  (void)now;
  struct app *a = e->as;
  if (a->nfail < PP_MAX_PEERS) /* once per peer (engine.c), at most PP_MAX_PEERS of them */
    a->fail[a->nfail++] = *f;
}

static void app_async_event(struct pp_engine *e, uint64_t now, const struct pp_async_event *ev)
{
  struct app *a = e->as;
  a->cb.error(e, now, ev, a->ud);
  if (e->started)
    tell_failures(e, now, a);
}

const struct pp_app_ops pp_app_workload_ops = {
    .name = "app",
    .plan = app_plan,
    .create = app_create,
    .destroy = app_destroy,
    .start = app_start,
    .pump = app_pump,
    .on_timer = app_on_timer,
    .send_done = app_send_done,
    .recv_done = app_recv_done,
    .done = app_done,
    .p2p_done = app_p2p_done,
    .peer_failed = app_peer_failed,
    .async_event = app_async_event,
};

/* The program's callbacks connect every pair of ranks. */
static void app_mem_need(const struct pp_engine_cfg *c, struct pp_mem_need *m, uint32_t *npeers,
                         uint64_t *lat)
{
  *npeers = c->nranks - 1;
  pp_mem_add(m, 4096 + c->nranks * 8ull, "the application's state");
  pp_mem_add(m, 8192, "workload");
  *lat = 1000000;
}

static enum pp_status app_def_check(const struct pp_engine_cfg *c, char *err, size_t errlen)
{
  return pp_p2p_cfg_check(c, err, errlen) == PP_OK ? PP_OK : PP_INVALID;
}

const struct pp_workload_def pp_app_def = {
    .name = "app",
    .desc = "the embedding program's callbacks (prepost/app.h)",
    .pair_odd = true,
    .check = app_def_check,
    .mem_need = app_mem_need,
    .ops = &pp_app_workload_ops,
};
