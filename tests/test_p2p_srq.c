/*
 * engine/proto/p2p/srq.c: the eager protocol with p2p.srq, on SimGrid: one shared receive queue
 * per rank whose pool is lent out as credits. An incast of many senders into one slow receiver
 * with rnr_retry 0 (the first RNR NAK would kill a QP): zero RNR, every message delivered; the
 * same run with test bug srq-no-credits: RNR once the pool runs dry; the SRQ depletion fault,
 * which hides posted WQEs, now hits a protocol; receive memory that does not grow with peers.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "prepost/p2p.h"
#include "prepost/proto.h"
#include "prepost/simrun.h"

#include "sim_case.h"

TestSuite(p2p_srq, .fini = sim_fini);

static uint64_t rnr(void)
{
  uint64_t n = 0;
  for (uint32_t r = 0; r < res.nranks; r++)
    n += res.ranks[r].nic.rnr_naks_received + res.ranks[r].nic.rnr_naks_sent;
  return n;
}

/* ranks - 1 senders, every rank to every other, into rank 0 that consumes slowly; the pool is
 * its least (one buffer per peer, srq_limit and one more) plus `extra`. */
static void incast(uint32_t ranks, const char *srq, const char *more)
{
  char text[2048];
  snprintf(text, sizeof text,
           "ranks: %u\nseed: 7\nprotocol: eager\n"
           "workload:\n  kind: traffic\n  pattern: alltoall\n  messages: 24\n  size: 1KiB\n"
           "  size_max: 8KiB\n  size_dist: log-uniform\n  receives: specific\n  window: 8\n"
           "  consume: 10us\n  slow_ranks: [0]\n"
           "p2p:\n  eager_limit: 4KiB\n  credits: 16\n%s"
           "qp:\n  rnr_retry: %s\n%s",
           ranks, srq, strstr(more, "srq-no-credits") ? "7" : "0", more);
  sim_parse(text);
  sim_run(NULL);
}

#define SRQ_ON "  srq: true\n  srq_buffers: 2\n  srq_limit: 4\n"

Test(p2p_srq, incast_with_credits_from_the_shared_pool_zero_rnr)
{
  incast(17, SRQ_ON, "");
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "outcome %s", pp_outcome_name(res.outcome));
  cr_assert_eq(rnr(), 0, "a credit is a posted buffer: no RNR, whatever rnr_retry");
  const struct pp_p2p_stats *s = &res.ranks[0].p2p;
  cr_assert_eq(s->srq_buffers, 16 + 4 + 1, "the pool's least: a buffer per peer, the headroom");
  cr_assert_gt(s->srq_lent, 0, "credits beyond the first were lent out of the pool");
  cr_assert_gt(s->srq_reclaimed, 0, "and taken back when their peer needed nothing more");
  cr_assert_leq(s->srq_lent_max, s->srq_buffers - 4, "never more lent than the pool less its "
                                                     "headroom");
  uint64_t parked = 0;
  for (uint32_t r = 1; r < 17; r++)
    parked += res.ranks[r].p2p.parked;
  cr_assert_gt(parked, 0, "16 senders into a pool of 21: they waited for credits");
  cr_assert_eq(s->srq_limit_events, 0, "honest peers never eat into the headroom");
  cr_assert_eq(s->srq_overruns, 0);
  for (uint32_t r = 0; r < 17; r++) {
    cr_assert_eq(res.ranks[r].stats.messages_received, 16 * 24, "rank %u: every message", r);
    cr_assert_eq(res.ranks[r].stats.corrupt, 0);
    cr_assert_eq(res.ranks[r].stats.peer_violations, 0);
  }
}

Test(p2p_srq, senders_that_ignore_the_credits_rnr_once_the_pool_runs_dry)
{
  incast(17, SRQ_ON, "test_bugs: [srq-no-credits]\nlimits: {no_progress: 200us}\n");
  const struct pp_p2p_stats *s = &res.ranks[0].p2p;
  cr_assert_gt(s->srq_overruns, 0, "messages came without a credit");
  cr_assert_gt(s->srq_limit_events, 0, "they ate into the headroom: SRQ_LIMIT_REACHED");
  cr_assert_gt(s->srq_refilled, 0, "the event posted the spare buffers");
  cr_assert_gt(rnr(), 0, "then the pool ran dry: RNR NAKs");
  /* unexpected messages hold the whole pool: the one rank 0 waits for is NAKed for ever */
  cr_assert_eq(res.outcome, PP_OUTCOME_NO_PROGRESS, "outcome %s", pp_outcome_name(res.outcome));
}

Test(p2p_srq, without_srq_the_same_incast_pays_a_buffer_per_credit_and_peer)
{
  incast(17, "", "");
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(rnr(), 0);
  const struct pp_p2p_stats *s = &res.ranks[0].p2p;
  cr_assert_eq(s->srq_buffers, 0);
  /* 16 peers x (16 credits + 8 reply slots + 4 credit messages) buffers of 64 + 4 KiB */
  cr_assert_eq(s->eager_rx_bytes, 16ull * (16 + 8 + 4) * (64 + 4096));
}

/* Eager receive memory (the bytes registered for receive buffers) from runs at 8 and 32
 * peers: with srq the pool stays (256 buffers) and each channel adds 12 buffers of 64 bytes;
 * without, every peer costs (64 credits + 8 reply slots + 4 credit messages) x 4160 bytes. */
struct mem_case {
  uint32_t ranks;
  int srq;
};

ParameterizedTestParameters(p2p_srq, eager_receive_memory_does_not_grow_with_the_peers)
{
  static struct mem_case c[] = {{9, 0}, {33, 0}, {9, 1}, {33, 1}};
  return cr_make_param_array(struct mem_case, c, sizeof(c) / sizeof(c[0]));
}

ParameterizedTest(struct mem_case *c, p2p_srq, eager_receive_memory_does_not_grow_with_the_peers)
{
  char text[1024];
  snprintf(text, sizeof text,
           "ranks: %u\nseed: 3\nprotocol: eager\n"
           "workload:\n  kind: traffic\n  pattern: alltoall\n  messages: 2\n  size: 1KiB\n"
           "p2p:\n  eager_limit: 4KiB\n  credits: 64\n%s",
           c->ranks, c->srq ? "  srq: true\n" : "");
  sim_parse(text);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(rnr(), 0);
  uint64_t peers = c->ranks - 1, got = res.ranks[0].p2p.eager_rx_bytes;
  if (c->srq)
    cr_assert_eq(got, 256ull * (64 + 4096) + peers * 12 * 64, "%llu peers: %llu bytes",
                 (unsigned long long)peers, (unsigned long long)got);
  else
    cr_assert_eq(got, peers * (64 + 8 + 4) * (64 + 4096), "%llu peers: %llu bytes",
                 (unsigned long long)peers, (unsigned long long)got);
}

/* The protocol's memory estimate (pp_proto_def.mem_need) at 64 and 1,024 peers. */
Test(p2p_srq, memory_estimate_at_64_and_1024_peers)
{
  sim_parse("ranks: 2\nprotocol: eager\nworkload: {kind: traffic, pattern: alltoall, messages: 1, "
            "size: 1KiB}\n");
  const struct pp_proto_def *d = pp_proto_get(PP_PROTO_EAGER);
  cr_assert_not_null(d);
  struct pp_mem_need n[2][2] = {{{0}}};
  const uint32_t peers[2] = {64, 1024};
  for (int srq = 0; srq < 2; srq++) {
    pp_p2p_params_of(&sc.sim.engine)->srq = srq;
    for (int k = 0; k < 2; k++)
      d->mem_need(&sc.sim.engine, pp_p2p_params_of(&sc.sim.engine), peers[k], &n[srq][k]);
  }
  /* without srq the bytes grow 16x with the peers, with it they stay within 2x (the pool of
   * 256 default buffers grows to a buffer per peer at 1,024, and the per-peer tables grow) */
  cr_assert_gt(n[0][1].bytes, 15 * n[0][0].bytes);
  cr_assert_lt(n[1][1].bytes, n[0][1].bytes / 10);
  cr_assert_eq(n[1][0].qps, 128, "two QPs a peer with srq");
  cr_assert_eq(n[1][1].recv_wqes, 1024ull * 12 + 1024 + 16 + 1,
               "12 control WQEs a peer, and the pool: a buffer per peer, srq_limit, one");
}

static uint64_t depletion(int srq)
{
  char text[1024];
  snprintf(text, sizeof text,
           "ranks: 4\nseed: 11\nprotocol: eager\n"
           "workload:\n  kind: traffic\n  pattern: alltoall\n  messages: 40\n  size: 512B\n"
           "p2p:\n  eager_limit: 4KiB\n  credits: 8\n%s"
           "qp:\n  rnr_retry: 7\n"
           "faults:\n  srq_delay: 20us\n  until: 1ms\n",
           srq ? "  srq: true\n" : "");
  sim_parse(text);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED);
  uint64_t starved = 0;
  for (uint32_t r = 0; r < 4; r++)
    starved += res.ranks[r].faults.srq_starved;
  return starved;
}

Test(p2p_srq, srq_depletion_fault_hits_the_protocol)
{
  cr_assert_gt(depletion(1), 0, "WQEs posted to the SRQ were hidden");
  cr_assert_gt(rnr(), 0, "credits for buffers the NIC cannot use yet: RNR");
}

Test(p2p_srq, srq_depletion_fault_without_srq_has_nothing_to_hit)
{
  cr_assert_eq(depletion(0), 0);
  cr_assert_eq(rnr(), 0);
}

/* A QP forced to ERROR (faults.qp_error) at `at` ns on `host`, QP `qp` of its NIC (0: the
 * channel's control QP, 1: its data QP): rndv, rank 0 sends 31 messages of 16 B..9.4 KiB to
 * rank 1 (RPUT above 1,391 B: WRITEs on the control QP), a window of 4, a send queue of 2. */
static void qp_error_at(uint32_t host, uint32_t qp, uint64_t at)
{
  char text[1024];
  snprintf(text, sizeof text,
           "ranks: 2\nseed: 5568\nprotocol: rndv\n"
           "workload: {kind: traffic, pattern: pair, messages: 31, size: 16, size_max: 9663, "
           "size_dist: log-uniform, window: 4}\n"
           "qp: {rnr_retry: 0, sq_depth: 2}\n"
           "faults: {qp_error_at: %lluns, qp_error_host: %u, qp_error_qp: %u}\n"
           "p2p: {eager_limit: 2932, rget_limit: 1391, pipeline: 1, credits: 2, "
           "credit_threshold: 2, srq: true, srq_buffers: 10, srq_limit: 4}\n",
           (unsigned long long)at, host, qp);
  sim_parse(text);
  sim_run(NULL);
}

/* 25 instants of the run (it takes about 106 us), 4 us apart. */
static struct criterion_test_params instants(void)
{
  static uint64_t at[25];
  for (size_t i = 0; i < 25; i++)
    at[i] = 2000 + 4000 * i;
  return cr_make_param_array(uint64_t, at, 25);
}

ParameterizedTestParameters(p2p_srq, a_failed_data_qp_takes_its_control_qp_with_it)
{
  return instants();
}

/* The sender's data QP fails: its channel's control QP must go to ERROR with it, or an RPUT's
 * WRITE queued there still reads the send buffer after its request failed and the application
 * refilled it: the receiver takes the new bytes under the old FIN (traces/regressions/
 * p2p-srq-qp-error-control-qp-left-alive.yaml). Before the fix 4 of these instants delivered a
 * corrupt message; without QP_LAST_WQE_REACHED (a data QP that fails with nothing outstanding
 * makes no completion) the receiver never learnt at 2 of them that its peer had failed. */
ParameterizedTest(uint64_t *at, p2p_srq, a_failed_data_qp_takes_its_control_qp_with_it)
{
  qp_error_at(0, 1, *at);
  cr_assert_eq(res.ranks[0].faults.qp_errors, 1, "the fault fired");
  for (uint32_t r = 0; r < 2; r++)
    cr_assert_eq(res.ranks[r].stats.corrupt, 0, "rank %u took a corrupt message", r);
  cr_assert(res.ranks[1].stats.done, "the receiver's receives are over (failed with the peer)");
  cr_assert_gt(res.ranks[1].p2p.failed, 0);
}

ParameterizedTestParameters(p2p_srq, a_failed_data_qp_with_nothing_outstanding_fails_its_channel)
{
  return instants();
}

/* The receiver's data QP fails: it sends nothing (pair), and a QP on an SRQ has no receive
 * queue of its own, so no completion says so; QP_LAST_WQE_REACHED does, and fails the channel
 * at once: its control QP goes to ERROR (its receive buffers flushed) and its posted receives
 * fail. Before the fix, at each of these instants, none failed: the receiver waited for ever. */
ParameterizedTest(uint64_t *at, p2p_srq,
                  a_failed_data_qp_with_nothing_outstanding_fails_its_channel)
{
  qp_error_at(1, 1, *at);
  const struct pp_rank_result *r = &res.ranks[1];
  cr_assert_eq(r->faults.qp_errors, 1, "the fault fired");
  cr_assert_eq(r->stats.corrupt + res.ranks[0].stats.corrupt, 0);
  cr_assert(r->stats.done, "its receives are over");
  cr_assert_gt(r->p2p.failed, 0, "they failed with the peer");
  cr_assert_gt(r->stats.status_counts[PP_WC_WR_FLUSH_ERR], 0,
               "the control QP went to ERROR with the data QP");
}

/* The same with a lying peer (explore --faults byzantine --fault-rate 1, seed 106): the liar's
 * duplicated SEND completes twice, the second time with WR_FLUSH_ERR on the QP of a channel
 * that had failed, naming a send slot now used by its channel to rank 0. That channel closes
 * and its requests fail; its data QP went to ERROR but its control QP stayed alive with an RPUT
 * WRITE queued, whose buffer the application refilled: honest rank 0 took those bytes under
 * the FIN as a success. Every QP of the channel but the one that failed now goes to ERROR. */
Test(p2p_srq, a_stale_completion_closes_every_qp_of_the_channel_it_names)
{
  char err[1024] = "";
  const char *path = PREPOST_SOURCE_DIR
      "/traces/regressions/p2p-srq-byzantine-control-qp-left-alive.yaml";
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof err), PP_OK, "%s",
               err);
  sim_run(NULL);
  uint32_t liar = sc.sim.faults.byzantine_rank;
  cr_assert_eq(liar, 4);
  cr_assert_gt(res.ranks[liar].faults.byzantine, 0, "the liar lied");
  for (uint32_t r = 0; r < res.nranks; r++)
    if (r != liar)
      cr_assert_eq(res.ranks[r].stats.corrupt, 0, "honest rank %u took a corrupt message", r);
}

static const char *cfg_error(const char *text)
{
  static char err[1024];
  err[0] = '\0';
  if (pp_scenario_parse(text, strlen(text), "inline.yaml", PREPOST_MODELS_DIR, &sc, err,
                        sizeof(err)) == PP_OK)
    return NULL;
  return err;
}

Test(p2p_srq, configuration_checks)
{
  const char *e = cfg_error("ranks: 2\nprotocol: eager\nworkload: {kind: traffic, messages: 1, "
                            "size: 1KiB}\np2p: {srq: true, channels: 2}\n");
  cr_assert(e && strstr(e, "channels must be 1"), "%s", e ? e : "accepted");
  e = cfg_error("ranks: 2\nprotocol: rndv\nworkload: {kind: traffic, messages: 4, size: 64KiB}\n"
                "p2p: {srq: true}\n");
  cr_assert_null(e, "%s", e);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "rndv: RTS from the pool, the rest on control");
  cr_assert_eq(rnr(), 0);
}
