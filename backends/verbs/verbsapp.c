/*
 * An application on a device with the program's own exchange of connection information
 * (prepost/verbsapp.h, part 2): one rank, its verbs NIC and its engine; a busy-polling loop
 * (completions in batches, timers when due, async events), CLOCK_MONOTONIC nanoseconds.
 */
#define _GNU_SOURCE
#include "prepost/verbsapp.h"
#include "boot.h"
#include "errf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prepost/p2p.h"

struct pp_verbs_rank {
  uint32_t rank, nranks;
  struct vnic *nic;
  struct pp_engine *e;
  bool *connected; /* nranks */
};

enum pp_status pp_verbs_rank_open(const struct pp_run_cfg *cfg, uint32_t rank,
                                  const struct vnic_config *nic, const struct pp_app_callbacks *cb,
                                  void *user_data, struct pp_verbs_rank **out, char *err,
                                  size_t errlen)
{
  *out = NULL;
  struct pp_engine_cfg *ec = malloc(sizeof(*ec));
  struct pp_verbs_rank *r = calloc(1, sizeof(*r));
  enum pp_status s = PP_NOMEM;
  if (!ec || !r || !(r->connected = calloc(cfg->engine.nranks ? cfg->engine.nranks : 1, 1))) {
    errf(err, errlen, "rank %u: out of memory", rank);
    goto fail;
  }
  *ec = cfg->engine;
  ec->rank = rank;
  ec->workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  if ((s = pp_engine_cfg_check(ec, err, errlen)) != PP_OK)
    goto fail;
  if (!pp_app_callbacks_complete(cb)) {
    errf(err, errlen, "rank %u: a callback is not set (start from pp_app_callbacks_default)", rank);
    s = PP_INVALID;
    goto fail;
  }
  r->rank = rank;
  r->nranks = ec->nranks;
  struct vnic_config def = {.gid_index = -1};
  char e2[700];
  if ((s = vnic_open(nic ? nic : &def, ec->nranks, &r->nic, e2, sizeof(e2))) != PP_OK) {
    errf(err, errlen, "rank %u: %s", rank, e2);
    goto fail;
  }
  if ((s = pp_engine_create_app(ec, &vnic_ops, r->nic, cb, user_data, &r->e)) != PP_OK) {
    errf(err, errlen, "rank %u: creating the engine on %s failed: %s%s", rank,
         vnic_device_name(r->nic), pp_status_desc(s),
         s == PP_NOMEM || s == PP_PROTECTION
             ? " (memory registration: check `ulimit -l`, see `prepost doctor`)"
             : "");
    goto fail;
  }
  free(ec);
  *out = r;
  return PP_OK;
fail:
  free(ec);
  pp_verbs_rank_close(r);
  return s;
}

bool pp_verbs_rank_local_info(const struct pp_verbs_rank *r, uint32_t peer,
                              struct pp_verbs_peer_info *out)
{
  memset(out, 0, sizeof(*out));
  if (peer >= r->nranks || peer == r->rank)
    return false;
  vnic_local_addr(r->nic, &out->addr);
  return pp_engine_local_info(r->e, peer, &out->conn);
}

enum pp_status pp_verbs_rank_connect(struct pp_verbs_rank *r, uint32_t peer,
                                     const struct pp_verbs_peer_info *remote, char *err,
                                     size_t errlen)
{
  if (peer >= r->nranks || peer == r->rank) {
    errf(err, errlen, "rank %u: no peer %u (ranks 0..%u)", r->rank, peer, r->nranks - 1);
    return PP_INVALID;
  }
  enum pp_status s = vnic_set_peer_addr(r->nic, peer, &remote->addr);
  if (s == PP_OK)
    s = pp_engine_connect(r->e, boot_now_ns(), peer, &remote->conn);
  if (s != PP_OK) {
    errf(err, errlen, "rank %u: connecting the QP(s) to rank %u on %s failed: %s", r->rank, peer,
         vnic_device_name(r->nic), pp_status_desc(s));
    return s;
  }
  r->connected[peer] = true;
  return PP_OK;
}

/* One pass: completions (at most 64), async events, due timers. */
static enum pp_status pass(struct pp_verbs_rank *r, char *err, size_t errlen)
{
  struct pp_wc wc[32];
  for (int k = 0; k < 2; k++) {
    int n = vnic_poll_cq(r->nic, wc, 32);
    if (n < 0) {
      errf(err, errlen, "rank %u: polling the CQ of %s failed", r->rank,
           vnic_device_name(r->nic));
      return PP_IO;
    }
    uint64_t now = boot_now_ns();
    for (int i = 0; i < n; i++) {
      enum pp_status s = pp_engine_on_wc(r->e, now, &wc[i]);
      if (s != PP_OK) {
        errf(err, errlen, "rank %u: a completion (qp %u, %s) failed in the engine or a callback: %s",
             r->rank, wc[i].qp_num, pp_wc_status_name(wc[i].status), pp_status_desc(s));
        return s;
      }
    }
    if (n < 32)
      break;
  }
  struct pp_async_event ev;
  while (vnic_get_async_event(r->nic, &ev))
    pp_engine_on_async(r->e, boot_now_ns(), &ev);
  uint64_t now = boot_now_ns();
  if (pp_engine_next_deadline(r->e) <= now) {
    enum pp_status s = pp_engine_on_timer(r->e, now);
    if (s != PP_OK) {
      errf(err, errlen, "rank %u: a timer failed in the engine or a callback: %s", r->rank,
           pp_status_desc(s));
      return s;
    }
  }
  return PP_OK;
}

enum pp_status pp_verbs_rank_start(struct pp_verbs_rank *r, char *err, size_t errlen)
{
  for (uint32_t p = 0; p < r->nranks; p++)
    if (p != r->rank && !r->connected[p]) {
      errf(err, errlen, "rank %u: rank %u is not connected (pp_verbs_rank_connect)", r->rank, p);
      return PP_STATE;
    }
  vnic_counters_mark(r->nic);
  enum pp_status s = pp_engine_start(r->e, boot_now_ns());
  if (s != PP_OK)
    errf(err, errlen, "rank %u: starting the application: %s", r->rank, pp_status_desc(s));
  return s;
}

enum pp_status pp_verbs_rank_progress(struct pp_verbs_rank *r, char *err, size_t errlen)
{
  return pass(r, err, errlen);
}

bool pp_verbs_rank_quiet(const struct pp_verbs_rank *r)
{
  return pp_engine_done(r->e) && vnic_sends_outstanding(r->nic) == 0;
}

void pp_verbs_rank_result(struct pp_verbs_rank *r, struct pp_rank_result *out)
{
  memset(out, 0, sizeof(*out));
  pp_engine_stats(r->e, &out->stats);
  pp_p2p_stats(r->e, &out->p2p);
  vnic_ops.query_counters(r->nic, &out->nic);
  char host[32] = "";
  gethostname(host, sizeof(host) - 1);
  snprintf(out->host, sizeof(out->host), "%.31s/%.31s", host, vnic_device_name(r->nic));
}

size_t pp_verbs_rank_describe(struct pp_verbs_rank *r, char *buf, size_t len)
{
  return vnic_describe(r->nic, buf, len);
}

enum pp_status pp_verbs_rank_run(struct pp_verbs_rank *r, uint64_t timeout_ns,
                                 struct pp_rank_result *out, char *err, size_t errlen)
{
  memset(out, 0, sizeof(*out));
  uint64_t t0 = boot_now_ns(), end = t0 + (timeout_ns ? timeout_ns : 120000000000ull);
  enum pp_status s = pp_verbs_rank_start(r, err, errlen);
  if (s == PP_STATE)
    return s;
  while (s == PP_OK && !pp_verbs_rank_quiet(r)) {
    if (boot_now_ns() >= end) {
      errf(err, errlen, "rank %u: not done after %.1f s", r->rank, (boot_now_ns() - t0) / 1e9);
      s = PP_LIMIT;
      break;
    }
    s = pass(r, err, errlen);
  }
  pp_verbs_rank_result(r, out);
  return s;
}

struct pp_engine *pp_verbs_rank_engine(struct pp_verbs_rank *r)
{
  return r ? r->e : NULL;
}

void pp_verbs_rank_close(struct pp_verbs_rank *r)
{
  if (!r)
    return;
  pp_engine_destroy(r->e);
  if (r->nic)
    vnic_close(r->nic);
  free(r->connected);
  free(r);
}
