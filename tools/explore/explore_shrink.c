/*
 * prepost explore: shrinking a failing scenario (tools/explore/explore.h). Greedy: try each reduction in
 * turn (fewer ranks, fewer messages, smaller messages, one fault less, smaller fault parameters,
 * shallower queues, no pacing, then the protocol's own reductions: pp_explore_gen.reduce) and keep the first that still fails with the same
 * invariant; start over from the smaller scenario until no reduction fails or the run budget is
 * spent. Each candidate runs in its own child process like any seed.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/explore/explore.h"

/* Keeps the rank masks and hosts of sc within its (new) number of ranks. */
static void fit_ranks(struct pp_scenario *sc)
{
  struct pp_sim_config *s = &sc->sim;
  uint32_t n = s->engine.nranks;
  uint64_t all = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
  struct pp_workload *w = &s->engine.workload;
  if (w->pattern == PP_PATTERN_PAIR && n % 2)
    w->pattern = PP_PATTERN_RING;
  w->consume_ranks &= all; /* 0: every receiver */
  s->faults.pause_ranks &= all;
  if (!s->faults.pause_ranks)
    s->faults.pause_ns = s->faults.pause_at_ns = 0;
  s->faults.qp_error_host %= n;
  s->faults.rkey_host %= n;
  s->faults.byzantine_rank %= n;
}

/* Switches fault f off in sc; false when it was not on. */
static bool fault_off(struct pp_scenario *sc, enum pp_fault f)
{
  if (!(pp_faults_of(sc) >> f & 1))
    return false;
  struct pp_faults *x = &sc->sim.faults;
  struct pp_workload *w = &sc->sim.engine.workload;
  switch (f) {
  case PP_FAULT_LOSS: x->loss = 0; break;
  case PP_FAULT_JITTER: x->jitter_ns = 0; break;
  case PP_FAULT_SLOW: w->consume_ns = 0; w->consume_ranks = 0; break;
  case PP_FAULT_PAUSE: x->pause_ns = x->pause_at_ns = 0; x->pause_ranks = 0; break;
  case PP_FAULT_POST: w->post_delay_ns = w->consume_jitter_ns = 0; break;
  case PP_FAULT_CQ: x->cq_delay_ns = 0; break;
  case PP_FAULT_SCRAMBLE: x->scramble = 0; x->scramble_ns = 0; break;
  case PP_FAULT_SRQ: x->srq_delay_ns = 0; break;
  case PP_FAULT_QP_ERROR: x->qp_error_ns = 0; x->qp_error_host = x->qp_error_qp = 0; break;
  case PP_FAULT_RKEY: x->rkey_ns = 0; x->rkey_host = 0; break;
  case PP_FAULT_BYZANTINE: x->byzantine = 0; x->byzantine_rank = 0; break;
  default: return false;
  }
  return true;
}

static bool halve64(uint64_t *v, uint64_t min)
{
  if (*v <= min)
    return false;
  *v = *v / 2 < min ? min : *v / 2;
  return true;
}

static bool halve32(uint32_t *v, uint32_t min)
{
  uint64_t x = *v;
  bool r = halve64(&x, min);
  *v = (uint32_t)x;
  return r;
}

#define NREDUCE (PP_FAULT_COUNT + 14u) /* the generic reductions */
#define MAX_PROTO_REDUCE 32u /* then a protocol's own: k = NREDUCE .. + this */

/* Candidate number k applied to c; false when it does not apply (or changes nothing). */
static bool reduce(struct pp_scenario *c, unsigned k, const char **what)
{
  struct pp_sim_config *s = &c->sim;
  struct pp_workload *w = &s->engine.workload;
  struct pp_qp_params *q = &s->engine.qp;
  struct pp_faults *f = &s->faults;
  if (k >= NREDUCE) {
    const struct pp_explore_gen *g = pp_explore_gen_of(s->engine.protocol);
    return g && g->reduce && g->reduce(c, k - NREDUCE, what);
  }
  if (k < PP_FAULT_COUNT) {
    *what = "a fault less";
    return fault_off(c, (enum pp_fault)k);
  }
  k -= PP_FAULT_COUNT;
  switch (k) {
  case 0:
    *what = "2 ranks";
    if (s->engine.nranks <= 2)
      return false;
    s->engine.nranks = 2;
    fit_ranks(c);
    return true;
  case 1:
    *what = "a rank less";
    if (s->engine.nranks <= 2)
      return false;
    s->engine.nranks--;
    fit_ranks(c);
    return true;
  case 2:
    *what = "1 message";
    if (w->messages <= 1)
      return false;
    w->messages = 1;
    return true;
  case 3:
    *what = "half the messages";
    return halve32(&w->messages, 1);
  case 4:
    *what = "a message less";
    if (w->messages <= 1)
      return false;
    w->messages--;
    return true;
  case 5:
    *what = "smallest messages";
    if (w->size <= PP_MSG_HEADER)
      return false;
    w->size = PP_MSG_HEADER;
    return true;
  case 6:
    *what = "half the message size";
    return halve32(&w->size, PP_MSG_HEADER);
  case 7:
    *what = "no pacing";
    if (!w->interval_ns)
      return false;
    w->interval_ns = 0;
    return true;
  case 8:
    *what = "half the send queue";
    return halve32(&q->sq_depth, 1);
  case 9:
    *what = "half the receive buffers";
    return halve32(&q->rq_depth, 1);
  case 10:
    *what = "half the consume time";
    return halve64(&w->consume_ns, w->consume_jitter_ns ? 0 : 1);
  case 11:
    *what = "half the jitters";
    return halve64(&f->jitter_ns, 1) | halve64(&w->consume_jitter_ns, 1) |
           halve64(&f->cq_delay_ns, 1);
  case 12:
    *what = "half the delays";
    return halve64(&w->post_delay_ns, 1) | halve64(&f->pause_ns, 1) |
           halve64(&f->scramble_ns, 1) | halve64(&f->srq_delay_ns, 1);
  case 13:
    *what = "half the loss";
    if (!(f->loss > 1e-4))
      return false;
    f->loss /= 2;
    return true;
  default:
    return false;
  }
}

static bool valid(const struct pp_scenario *c)
{
  char err[256];
  return pp_engine_cfg_check(&c->sim.engine, err, sizeof err) == PP_OK &&
         pp_nic_profile_check(&c->sim.nic, err, sizeof err) == PP_OK;
}

unsigned pp_explore_shrink(const struct pp_scenario *sc, enum pp_inv inv, unsigned max_runs,
                           double timeout_s, struct pp_scenario *out, FILE *log)
{
  static struct pp_scenario cand;
  *out = *sc;
  uint64_t until = sc->sim.faults.until_ns;
  unsigned runs = 0;
  bool progress = true;
  while (progress && runs < max_runs) {
    progress = false;
    for (unsigned k = 0; k < NREDUCE + MAX_PROTO_REDUCE && runs < max_runs; k++) {
      cand = *out;
      const char *what = "";
      if (!reduce(&cand, k, &what))
        continue;
      pp_explore_set_bounds(&cand, until);
      if (!valid(&cand))
        continue;
      struct pp_verdict v;
      pp_explore_run(&cand, timeout_s, NULL, NULL, &v);
      runs++;
      if (v.inv != inv)
        continue;
      *out = cand;
      progress = true;
      if (log) {
        char d[256];
        pp_explore_describe(out, d, sizeof d);
        fprintf(log, "  shrink: %s -> %s\n", what, d);
      }
      k--; /* the same reduction again (halving) until it stops failing */
    }
  }
  return runs;
}
