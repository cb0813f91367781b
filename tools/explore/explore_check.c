/*
 * prepost explore: the invariants judged after every run (tools/explore/explore.h, PP_INV_LIST), in
 * order; the first that fails is the run's verdict (the shrinker keeps it).
 *
 *  integrity  no message arrived corrupt, twice or out of order (the workloads check every byte
 *             and the sequence: stats.corrupt; the collective checks every element)
 *  reuse      no buffer changed while the application held it (stats.early_reuse: the stream
 *             workload's slow consumer re-checks a buffer's bytes when it releases it)
 *  protocol   the protocol's own invariants (its counters of what it saw broken, ...), judged
 *             by the protocol's check (struct pp_proto_explore.check); no rank failed a peer for
 *             a protocol violation (stats.peer_violations: with no liar, a false alarm; also
 *             after a fatal fault: a peer that failed with its QP is judged no more)
 *  rnr        zero RNR NAKs under a flow-controlled protocol (one that is not, the positive
 *             control, is exempt; so is a scenario with the srq fault, whose NIC hides WQEs)
 *  errors     no error completion unless an injected fatal fault (qp-error, rkey) fired
 *  hang       after the quiet phase every operation is done: a run that stalled or reached
 *             max_sim_time (= the end of the faults + the liveness bound) hangs, unless a fatal
 *             fault fired and was reported (an async event or an error completion)
 *  delivery   a completed stream run delivered `messages` messages to every receiver
 *
 * With the byzantine fault (one rank lies on the wire, backends/simgrid/byzantine.h) the
 * judgement is about the honest ranks only: none may accept a corrupt message or see a buffer
 * changed while it held it (integrity, reuse: wrong data reported as success, whatever the liar
 * did), none may fail an event (engine: simrun ignores the liar's own engine), and the honest
 * ranks that do not exchange messages with the liar must finish as if nothing happened (errors,
 * rnr, hang, delivery). A rank that talks to the liar may see error completions, RNR NAKs, its
 * protocol counting violations (it detected a lie) or wait for ever: that is a clear reaction.
 * A receive that completes with PP_P2P_E_PEER (the liar's connection failed) is such a reaction,
 * not a corrupt message; but the violation must name the liar (protocol: an honest rank blamed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/explore/explore.h"

struct sums {
  uint64_t corrupt, reuse, rnr, errors, async, received, coll_wrong;
  uint64_t status[PP_WC_STATUS_COUNT];
  uint32_t first_corrupt, first_reuse, first_rnr, first_undone, first_coll;
  bool undone;
  struct pp_fault_counts fired;
};

static void add_faults(struct pp_fault_counts *a, const struct pp_fault_counts *b)
{
  a->jittered += b->jittered;
  a->ordered += b->ordered;
  a->scrambled += b->scrambled;
  a->srq_starved += b->srq_starved;
  a->qp_errors += b->qp_errors;
  a->rkeys += b->rkeys;
  a->cq_delays += b->cq_delays;
  a->pauses += b->pauses;
  a->byzantine += b->byzantine;
}

static void sum(const struct pp_run_result *res, struct sums *s)
{
  memset(s, 0, sizeof *s);
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    if (r->stats.corrupt && !s->corrupt)
      s->first_corrupt = i;
    if (r->stats.early_reuse && !s->reuse)
      s->first_reuse = i;
    if (r->nic.rnr_naks_received && !s->rnr)
      s->first_rnr = i;
    if (r->stats.coll.elements_wrong && !s->coll_wrong)
      s->first_coll = i;
    if (!r->stats.done && !s->undone) {
      s->undone = true;
      s->first_undone = i;
    }
    s->corrupt += r->stats.corrupt;
    s->reuse += r->stats.early_reuse;
    s->rnr += r->nic.rnr_naks_received;
    s->async += r->stats.async_events;
    s->received += r->stats.messages_received;
    s->coll_wrong += r->stats.coll.elements_wrong;
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++) {
      s->status[k] += r->stats.status_counts[k];
      s->errors += r->stats.status_counts[k];
    }
    add_faults(&s->fired, &r->faults);
  }
}

static void status_list(const struct sums *s, char *buf, size_t len)
{
  size_t at = 0;
  buf[0] = '\0';
  for (int k = 1; k < PP_WC_STATUS_COUNT && at < len; k++)
    if (s->status[k])
      at += (size_t)snprintf(buf + at, len - at, "%s%s x%" PRIu64, at ? ", " : "",
                             pp_wc_status_name((enum pp_wc_status)k), s->status[k]);
}

/* Does honest rank i exchange messages with rank b? (stream: its destination or source; the
 * other workloads: assume it does) */
static bool talks_to(const struct pp_sim_config *cfg, uint32_t i, uint32_t b)
{
  const struct pp_workload *w = &cfg->engine.workload;
  if (w->kind != PP_WORKLOAD_STREAM)
    return true;
  uint32_t n = cfg->engine.nranks;
  return pp_workload_dest(w, i, n) == (int)b || pp_workload_source(w, i, n) == (int)b;
}

static uint64_t rank_errors(const struct pp_rank_result *r)
{
  uint64_t e = 0;
  for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
    e += r->stats.status_counts[k];
  return e;
}

static enum pp_inv check_byzantine(const struct pp_scenario *sc, const struct pp_run_result *res,
                                   char *why, size_t len)
{
  const struct pp_sim_config *cfg = &sc->sim;
  const struct pp_workload *w = &cfg->engine.workload;
  uint32_t b = cfg->faults.byzantine_rank;
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_stats *st = &res->ranks[i].stats;
    if (i == b)
      continue;
    if (st->corrupt || st->coll.elements_wrong) {
      snprintf(why, len, "honest rank %u accepted %" PRIu64 " corrupt messages (%" PRIu64
                         " collective elements) as success: byzantine rank %u",
               i, st->corrupt, st->coll.elements_wrong, b);
      return PP_INV_INTEGRITY;
    }
    if (st->early_reuse) {
      snprintf(why, len, "honest rank %u: %" PRIu64 " buffers changed while the application "
                         "held them: byzantine rank %u",
               i, st->early_reuse, b);
      return PP_INV_REUSE;
    }
    if (st->peer_violations && st->first_violation.peer != b) {
      snprintf(why, len, "honest rank %u blamed honest rank %u for a protocol violation "
                         "(byzantine rank %u)",
               i, st->first_violation.peer, b);
      return PP_INV_PROTOCOL;
    }
  }
  for (uint32_t i = 0; i < res->nranks; i++) {
    const struct pp_rank_result *r = &res->ranks[i];
    if (i == b || talks_to(cfg, i, b))
      continue;
    uint64_t expect = pp_workload_source(w, i, cfg->engine.nranks) >= 0 ? w->messages : 0;
    if (r->nic.rnr_naks_received) {
      snprintf(why, len, "rank %u, which does not talk to byzantine rank %u, got %" PRIu64
                         " RNR NAKs", i, b, r->nic.rnr_naks_received);
      return PP_INV_RNR;
    }
    if (rank_errors(r)) {
      snprintf(why, len, "rank %u, which does not talk to byzantine rank %u, has %" PRIu64
                         " error completions", i, b, rank_errors(r));
      return PP_INV_ERRORS;
    }
    if (!r->stats.done) {
      snprintf(why, len, "rank %u, which does not talk to byzantine rank %u, is not done (%s)",
               i, b, pp_outcome_name(res->outcome));
      return PP_INV_HANG;
    }
    if (r->stats.messages_received != expect) {
      snprintf(why, len, "rank %u received %" PRIu64 " messages intact, expected %" PRIu64, i,
               r->stats.messages_received, expect);
      return PP_INV_DELIVERY;
    }
  }
  return PP_INV_OK;
}

enum pp_inv pp_explore_check(const struct pp_scenario *sc, const struct pp_run_result *res,
                             char *why, size_t len)
{
  const struct pp_sim_config *cfg = &sc->sim;
  const struct pp_workload *w = &cfg->engine.workload;
  const struct pp_explore_gen *g = pp_explore_gen_of(cfg->engine.protocol);
  struct sums s;
  sum(res, &s);
  why[0] = '\0';
  if (cfg->faults.byzantine > 0)
    return check_byzantine(sc, res, why, len);
  if (s.corrupt) {
    snprintf(why, len, "%" PRIu64 " messages arrived corrupt, twice or out of order (first on rank %u)",
             s.corrupt, s.first_corrupt);
    return PP_INV_INTEGRITY;
  }
  if (s.coll_wrong) {
    snprintf(why, len, "%" PRIu64 " collective elements wrong (first on rank %u)", s.coll_wrong,
             s.first_coll);
    return PP_INV_INTEGRITY;
  }
  if (s.reuse) {
    snprintf(why, len, "%" PRIu64 " buffers changed while the application held them (first on "
                       "rank %u): used before release",
             s.reuse, s.first_reuse);
    return PP_INV_REUSE;
  }
  bool fatal = s.fired.qp_errors + s.fired.rkeys > 0;
  for (uint32_t i = 0; i < res->nranks; i++)
    if (res->ranks[i].stats.peer_violations) { /* no liar here: a false alarm of the checks */
      char v[192];
      pp_violation_text(&res->ranks[i].stats.first_violation, v, sizeof v);
      snprintf(why, len, "rank %u failed an honest peer for a protocol violation: %s", i, v);
      return PP_INV_PROTOCOL;
    }
  if (g && g->check) {
    enum pp_inv inv = g->check(sc, res, why, len);
    if (inv != PP_INV_OK)
      return inv;
  }
  bool flow = g ? g->flow_controlled : true; /* no hooks: judged as flow-controlled */
  if (flow && s.rnr && !cfg->faults.srq_delay_ns) {
    snprintf(why, len, "%" PRIu64 " RNR NAKs under %s, a flow-controlled protocol (first on rank %u)",
             s.rnr, pp_protocol_name(cfg->engine.protocol), s.first_rnr);
    return PP_INV_RNR;
  }
  if (s.errors && !fatal) {
    char list[256];
    status_list(&s, list, sizeof list);
    snprintf(why, len, "error completions with no fatal fault injected: %s", list);
    return PP_INV_ERRORS;
  }
  if (res->outcome == PP_OUTCOME_STALLED || res->outcome == PP_OUTCOME_TIMEOUT ||
      res->outcome == PP_OUTCOME_NO_PROGRESS) {
    if (fatal && (s.async || s.errors))
      return PP_INV_OK; /* a fatal fault, reported: the peers of a dead QP may wait for ever */
    if (res->outcome == PP_OUTCOME_STALLED)
      snprintf(why, len, "stalled at %.3f us: nothing left to do, rank %u not done",
               res->sim_time_ns / 1e3, s.first_undone);
    else if (res->outcome == PP_OUTCOME_NO_PROGRESS)
      snprintf(why, len, "no progress for %.3f us (at %.3f us), rank %u not done",
               cfg->no_progress_ns / 1e3, res->sim_time_ns / 1e3, s.first_undone);
    else
      snprintf(why, len, "rank %u not done %.3f us after the faults stopped (at %.3f us)",
               s.first_undone, (cfg->max_sim_time_ns - cfg->faults.until_ns) / 1e3,
               cfg->faults.until_ns / 1e3);
    return PP_INV_HANG;
  }
  if (res->outcome == PP_OUTCOME_COMPLETED && w->kind == PP_WORKLOAD_STREAM) {
    for (uint32_t i = 0; i < res->nranks; i++) {
      uint64_t expect =
          pp_workload_source(w, i, cfg->engine.nranks) >= 0 ? (uint64_t)w->messages : 0;
      if (res->ranks[i].stats.messages_received != expect) {
        snprintf(why, len, "rank %u received %" PRIu64 " messages intact, expected %" PRIu64, i,
                 res->ranks[i].stats.messages_received, expect);
        return PP_INV_DELIVERY;
      }
    }
  }
  return PP_INV_OK;
}
