/*
 * tools/explore: the explorer (issue 7). The generator is a pure function of the seed and writes
 * scenarios that read back identically; each fault of the catalogue fires and does what it says
 * (NIC faults through the simnic harness, driver and workload faults through whole simulations);
 * the invariants catch the naive protocol's RNR failures (the positive control) and every
 * test-only bug of engine/core/bugs.h within a small seed budget, and the shrinker reduces them; the
 * CLI prints a reproduction that reproduces.
 *
 * Whole simulations run in child processes (pp_explore_run), so one Test may run several.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/bugs.h"
#include "prepost/p2p.h"
#include "prepost/proto.h"
#include "simnic_harness.h"
#include "scratch.h"
#include "tools/explore/explore.h"

static char tmpdir[64];

static void setup(void)
{
  scratch_make(tmpdir, sizeof tmpdir, "explore");
}

static void teardown(void)
{
  scratch_remove(tmpdir);
}

static int gen_index(const char *name)
{
  int g = pp_explore_gen_by_name(name);
  cr_assert_geq(g, 0, "no generator %s", name);
  return g;
}

/* ================================================================ generator and writer */

TestSuite(explore_gen);

Test(explore_gen, same_seed_same_scenario_other_seed_other_scenario)
{
  static struct pp_scenario a, b;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  pp_explore_generate(42, &sp, &a);
  pp_explore_generate(42, &sp, &b);
  cr_assert(memcmp(&a, &b, sizeof a) == 0);
  int differ = 0;
  for (uint64_t s = 43; s < 53; s++) {
    pp_explore_generate(s, &sp, &b);
    differ += memcmp(&a.sim.engine, &b.sim.engine, sizeof a.sim.engine) != 0;
  }
  cr_assert_eq(differ, 10);
}

Test(explore_gen, every_generated_scenario_is_valid)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  char err[256];
  for (size_t g = 0; g < pp_explore_gen_count(); g++)
    for (int rate = 0; rate < 2; rate++)
      for (uint64_t s = 1; s <= 300; s++) {
        sp.gen = (int)g;
        sp.fault_rate = rate ? 1.0 : 0.3;
        sp.bugs = s % 3 ? 0 : 1u << (s % PP_BUG_COUNT);
        pp_explore_generate(s, &sp, &sc);
        cr_assert_eq(pp_engine_cfg_check(&sc.sim.engine, err, sizeof err), PP_OK,
                     "%s seed %" PRIu64 ": %s", pp_explore_gens[g].name, s, err);
        cr_assert_eq(pp_nic_profile_check(&sc.sim.nic, err, sizeof err), PP_OK, "%s", err);
        cr_assert_eq(sc.sim.engine.protocol, pp_explore_gens[g].protocol);
        cr_assert_leq(sc.sim.engine.nranks, sp.max_ranks);
        cr_assert_gt(sc.sim.max_sim_time_ns, sc.sim.faults.until_ns);
        uint32_t f = pp_faults_of(&sc);
        cr_assert_eq(f & ~pp_explore_gens[g].faults, 0, "a fault the protocol does not take");
        cr_assert(!f == !sc.sim.faults.until_ns, "faults and only faults have a quiet phase");
      }
}

/* The explorer names no protocol: each built-in brings its hooks in its def (its folder's
 * explore.c), and the explorer's entry is made from them. */
Test(explore_gen, every_builtin_protocol_brings_its_own_hooks_through_the_registry)
{
  for (uint32_t id = 0; id < PP_PROTO_COUNT; id++) {
    const struct pp_proto_def *d = pp_proto_get(id);
    cr_assert(d && d->explore && d->explore->gen, "%s has no explorer hooks", pp_protocol_name(id));
    const struct pp_explore_gen *g = pp_explore_gen_of(id);
    cr_assert(g && g->def == d && !strcmp(g->name, d->name));
    cr_assert_eq(g->flow_controlled, d->explore->flow_controlled, "%s", d->name);
    cr_assert_eq(g->in_mix, d->explore->in_mix, "%s", d->name);
    cr_assert_eq(g->faults >> PP_FAULT_BYZANTINE & 1, d->explore->validates_peers, "%s", d->name);
    cr_assert_eq(g->bugs & d->explore->engine_bugs, d->explore->engine_bugs, "%s", d->name);
    /* the workload its scenarios run is the one its hooks name */
    static struct pp_scenario sc;
    struct pp_explore_space sp;
    pp_explore_space_default(&sp);
    sp.gen = gen_index(d->name);
    pp_explore_generate(7, &sp, &sc);
    cr_assert_eq((uint32_t)sc.sim.engine.workload.kind, d->explore->workload, "%s", d->name);
  }
}

Test(explore_gen, the_default_mix_is_the_flow_controlled_protocols)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  bool seen[PP_PROTO_COUNT] = {false};
  for (uint64_t s = 1; s <= 200; s++) {
    pp_explore_generate(s, &sp, &sc);
    const struct pp_explore_gen *g = pp_explore_gen_of(sc.sim.engine.protocol);
    cr_assert(g && g->in_mix && g->flow_controlled);
    seen[sc.sim.engine.protocol] = true;
  }
  for (size_t g = 0; g < pp_explore_gen_count(); g++)
    cr_assert_eq(seen[pp_explore_gens[g].protocol], pp_explore_gens[g].in_mix, "%s",
                 pp_explore_gens[g].name);
}

/* ANY_SOURCE receives with specific tags from several sources are only safe (no hang whatever
 * the timing) when every receive can be posted at once: the generator gives them that window,
 * and shrinking never halves it below. Seed 20770 had a window of 1 and hung under loss. */
Test(explore_gen, any_source_alltoall_traffic_gets_a_window_for_every_receive)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  unsigned seen = 0;
  for (size_t g = 0; g < pp_explore_gen_count(); g++) {
    if (pp_explore_gens[g].protocol != PP_PROTO_EAGER && pp_explore_gens[g].protocol != PP_PROTO_RNDV)
      continue;
    sp.gen = (int)g;
    for (uint64_t s = 1; s <= 3000; s++) {
      pp_explore_generate(s, &sp, &sc);
      const struct pp_engine_cfg *e = &sc.sim.engine;
      if (pp_traffic_of(e)->recv_mode != PP_RECV_ANY_SOURCE || pp_traffic_of(e)->tags <= 1 ||
          e->workload.pattern != PP_PATTERN_ALLTOALL || e->nranks < 3)
        continue;
      seen++;
      uint32_t need = e->workload.messages * (e->nranks - 1);
      cr_assert_geq(pp_traffic_of(e)->window, need, "seed %" PRIu64, s);
      struct pp_p2p_params prm; /* and a request for each receive and each send in flight */
      pp_p2p_params_resolve(e, &prm);
      cr_assert_geq(prm.max_requests, 2 * need, "seed %" PRIu64, s);
      static struct pp_scenario t;
      const char *what;
      for (unsigned k = 0; k < 32; k++) { /* each reduction alone, on the scenario as drawn */
        t = sc;
        if (pp_explore_gens[g].reduce(&t, k, &what) && !strcmp(what, "half the window"))
          cr_assert_geq(pp_traffic_of(&t.sim.engine)->window, need, "shrunk below: seed %" PRIu64, s);
      }
    }
  }
  cr_assert_gt(seen, 10, "the generator draws such scenarios");
}

/* The liveness bound of a traffic scenario counts its largest messages to every destination and
 * the round trips of a rendezvous: this alltoall of RPUT messages through a send queue of one WR
 * completes at 25.685 ms, past the 25.247 ms bound that counted 52 messages of 16 B. */
Test(explore_gen, the_liveness_bound_counts_p2p_sizes_destinations_and_round_trips)
{
  static struct pp_scenario sc;
  char err[512] = "";
  cr_assert_eq(pp_scenario_load(PREPOST_SOURCE_DIR
                                "/traces/regressions/p2p-rndv-alltoall-sq-depth-1-liveness-bound.yaml",
                                PREPOST_MODELS_DIR, &sc, err, sizeof err),
               PP_OK, "%s", err);
  cr_assert_eq(sc.sim.engine.workload.pattern, PP_PATTERN_ALLTOALL);
  pp_explore_set_bounds(&sc, 0);
  cr_assert_gt(sc.sim.max_sim_time_ns, 2 * 25685379ull, "bound %.3f ms",
               sc.sim.max_sim_time_ns / 1e6);
}

/* write -> parse gives the same configuration, byte for byte */
/* The scenario as pp_scenario_write writes it (with comment), in a malloc'd string; its length
 * in *len. */
static char *written(const struct pp_scenario *sc, const char *comment, size_t *len)
{
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  cr_assert_not_null(f);
  cr_assert_eq(pp_scenario_write(f, sc, comment), 0);
  fclose(f);
  return text;
}

static void round_trip(const struct pp_scenario *sc)
{
  static struct pp_scenario back;
  char err[1024] = "";
  size_t len;
  char *text = written(sc, "a comment\nexpect: ok", &len);
  cr_assert_eq(pp_scenario_parse(text, len, "rt.yaml", PREPOST_MODELS_DIR, &back, err, sizeof err),
               PP_OK, "%s\n%s", err, text);
  cr_assert(memcmp(&back.sim, &sc->sim, sizeof back.sim) == 0,
            "the written scenario reads back differently:\n%s", text);
  free(text);
}

Test(explore_gen, written_scenarios_read_back_identically)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  for (size_t g = 0; g < pp_explore_gen_count(); g++)
    for (uint64_t s = 1; s <= 60; s++) {
      sp.gen = (int)g;
      sp.fault_rate = s % 2 ? 1.0 : 0.3;
      sp.bugs = s % 4 ? 0 : (1u << PP_BUG_COUNT) - 1;
      sp.faults = s % 3 ? PP_FAULTS_ALL : PP_FAULTS_ALL | PP_FAULTS_OPT_IN; /* byzantine keys */
      pp_explore_generate(s, &sp, &sc);
      if (s % 5 == 0) { /* an exhaustive-mode ordering */
        sc.sim.faults.order_bits = 7;
        sc.sim.faults.order_mask = 0x55;
        sc.sim.faults.order_window_ns = 1500;
      }
      if (s % 7 == 0) { /* a calibrated profile's RNR model */
        sc.sim.nic.rnr_delay_ns[1] = 29598875;
        sc.sim.nic.rnr_delay_ns[20] = 23348635;
        sc.sim.nic.rnr_min_ns = 22480355;
        sc.sim.nic.rnr_tick_ns = 4000000;
      }
      round_trip(&sc);
    }
}

/* The keys outside a section's main table: written only when not their default (a default NIC
 * gets no line_rate line, no slow_ranks without slow ranks), and then read back. */
Test(explore_gen, a_non_default_line_rate_and_slow_ranks_are_written_and_read_back)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  pp_explore_generate(3, &sp, &sc);
  sc.sim.engine.workload.consume_ranks = 0;
  size_t len;
  char *text = written(&sc, NULL, &len);
  cr_assert_null(strstr(text, "line_rate"), "%s", text);
  cr_assert_null(strstr(text, "slow_ranks"), "%s", text);
  free(text);
  sc.sim.nic.line_rate_bps = 25e9;
  sc.sim.engine.workload.consume_ranks = 0x1;
  text = written(&sc, NULL, &len);
  cr_assert_not_null(strstr(text, "\n  line_rate: 25Gbps\n"), "%s", text);
  cr_assert_not_null(strstr(text, "\n  slow_ranks: [0]\n"), "%s", text);
  free(text);
  round_trip(&sc);
}

/* The byzantine fault is opt-in: "all" and the default space never draw it, naming it does,
 * for every protocol but naive (whose messages are the data itself), p2p.srq included. */
Test(explore_gen, byzantine_only_when_asked_for)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  uint32_t m;
  char err[512];
  cr_assert_eq(pp_faults_parse("all", &m, err, sizeof err), 0);
  cr_assert_eq(m >> PP_FAULT_BYZANTINE & 1, 0);
  cr_assert_eq(pp_faults_parse("byzantine", &m, err, sizeof err), 0);
  cr_assert_eq(m, 1u << PP_FAULT_BYZANTINE);
  pp_explore_space_default(&sp);
  sp.fault_rate = 1;
  unsigned drawn = 0, drawn_srq = 0;
  for (uint64_t s = 1; s <= 200; s++) {
    pp_explore_generate(s, &sp, &sc);
    cr_assert_eq(sc.sim.faults.byzantine, 0, "seed %" PRIu64, s);
  }
  sp.faults = 1u << PP_FAULT_BYZANTINE;
  for (uint64_t s = 1; s <= 200; s++) {
    pp_explore_generate(s, &sp, &sc);
    bool naive = sc.sim.engine.protocol == PP_PROTO_NAIVE;
    bool srq = (sc.sim.engine.protocol == PP_PROTO_EAGER ||
                sc.sim.engine.protocol == PP_PROTO_RNDV) && pp_p2p_params_of(&sc.sim.engine)->srq;
    cr_assert_eq(sc.sim.faults.byzantine > 0, !naive, "seed %" PRIu64, s);
    cr_assert_lt(sc.sim.faults.byzantine_rank, sc.sim.engine.nranks);
    drawn += !naive;
    drawn_srq += srq && !naive;
  }
  cr_assert_gt(drawn, 0);
  cr_assert_gt(drawn_srq, 0, "with p2p.srq too");
}

/* A QP forced to ERROR is drawn with p2p.srq as without (the data QP has no receive queue of
 * its own: the protocol must learn of its failure from QP_LAST_WQE_REACHED). */
Test(explore_gen, qp_error_drawn_with_srq_too)
{
  static struct pp_scenario sc;
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  sp.fault_rate = 1;
  sp.faults = 1u << PP_FAULT_QP_ERROR;
  unsigned srq = 0, plain = 0;
  for (uint64_t s = 1; s <= 300; s++) {
    pp_explore_generate(s, &sp, &sc);
    bool p2p = sc.sim.engine.protocol == PP_PROTO_EAGER || sc.sim.engine.protocol == PP_PROTO_RNDV;
    if (!p2p || !sc.sim.faults.qp_error_ns)
      continue;
    srq += pp_p2p_params_of(&sc.sim.engine)->srq;
    plain += !pp_p2p_params_of(&sc.sim.engine)->srq;
  }
  cr_assert_gt(plain, 0);
  cr_assert_gt(srq, 0, "with p2p.srq too");
}

Test(explore_gen, fault_lists)
{
  uint32_t m;
  char err[512], buf[256];
  cr_assert_eq(pp_faults_parse("loss,jitter", &m, err, sizeof err), 0);
  cr_assert_eq(m, 1u << PP_FAULT_LOSS | 1u << PP_FAULT_JITTER);
  cr_assert_eq(pp_faults_parse("all", &m, err, sizeof err), 0);
  cr_assert_eq(m, PP_FAULTS_ALL);
  cr_assert_eq(pp_faults_parse("none", &m, err, sizeof err), 0);
  cr_assert_eq(m, 0);
  cr_assert_eq(pp_faults_parse("loss,bogus", &m, err, sizeof err), -1);
  cr_assert_not_null(strstr(err, "unknown fault 'bogus'"), "%s", err);
  pp_faults_format(1u << PP_FAULT_QP_ERROR | 1u << PP_FAULT_CQ, buf, sizeof buf);
  cr_assert_str_eq(buf, "cq,qp-error");
  pp_faults_format(0, buf, sizeof buf);
  cr_assert_str_eq(buf, "none");
}

/* ================================================================ NIC faults (harness) */

TestSuite(explore_nic);

static struct pp_nic_profile small_nic(void)
{
  struct pp_nic_profile p;
  pp_nic_profile_default(&p);
  p.max_qp = 16;
  p.max_mr = 64;
  p.max_srq = 4;
  p.cq_depth = 4096;
  return p;
}

static int poll_all(struct harness *h, uint32_t host, struct pp_wc *wc, int max)
{
  int n = 0, k;
  while (n < max && (k = h_poll(h, host, wc + n, max - n)) > 0)
    n += k;
  return n;
}

Test(explore_nic, jitter_delays_transfers_but_keeps_them_in_order)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.jitter_ns = 20000};
  struct harness *h = h_create_faults(2, &p, &f, 7);
  struct h_qp_opts o = h_qp_defaults();
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[50][256], dst[50][256];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE);
  for (int i = 0; i < 50; i++) {
    memset(src[i], i + 1, sizeof src[i]);
    cr_assert_eq(h_post_recv(h, 1, qb, (uint64_t)i, &md, dst[i], sizeof dst[i]), PP_OK);
    cr_assert_eq(h_post_send(h, 0, qa, PP_WR_SEND, (uint64_t)i, &ms, src[i], sizeof src[i], 0, 0,
                             true),
                 PP_OK);
  }
  h_run(h, UINT64_MAX);
  struct pp_wc wc[64];
  cr_assert_eq(poll_all(h, 1, wc, 64), 50);
  for (int i = 0; i < 50; i++) {
    cr_assert_eq(wc[i].status, PP_WC_SUCCESS);
    cr_assert_eq(wc[i].wr_id, (uint64_t)i, "in order");
    cr_assert_eq(memcmp(src[i], dst[i], sizeof src[i]), 0);
  }
  struct pp_fault_counts fc;
  simnic_fault_counts(h_nic(h, 0), &fc);
  cr_assert_gt(fc.jittered, 10, "jitter fired %" PRIu64 " times", fc.jittered);
  cr_assert_gt(h->now, 20000, "the last transfers left late");
  h_destroy(h);
}

Test(explore_nic, scramble_places_the_last_chunk_first_and_completes_after_all)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.scramble = 1.0, .scramble_ns = 5000};
  struct harness *h = h_create_faults(2, &p, &f, 3);
  struct h_qp_opts o = h_qp_defaults();
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[4096], dst[4096];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (uint8_t)(i * 7 + 1);
  memset(dst, 0, sizeof dst);
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE);
  cr_assert_eq(h_post_recv(h, 1, qb, 9, NULL, NULL, 0), PP_OK);
  cr_assert_eq(h_post_send(h, 0, qa, PP_WR_RDMA_WRITE_WITH_IMM, 1, &ms, src, sizeof src, md.addr,
                           md.rkey, true),
               PP_OK);
  struct pp_fault_counts fc = {0};
  while (!fc.scrambled) { /* one instant at a time, up to the WRITE's arrival */
    uint64_t t = h_next_time(h);
    cr_assert_neq(t, UINT64_MAX);
    h_run(h, t);
    simnic_fault_counts(h_nic(h, 1), &fc);
  }
  /* a receiver polling the last byte sees it now, while other bytes have not landed */
  cr_assert_eq(memcmp(dst + 4096 - 64, src + 4096 - 64, 64), 0, "the last chunk landed first");
  cr_assert_neq(memcmp(dst, src, sizeof src), 0, "some chunks have not landed");
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(h, 1, wc, 4), 0, "no completion before every byte landed");
  h_run(h, UINT64_MAX);
  cr_assert_eq(memcmp(dst, src, sizeof src), 0, "every byte landed in the end");
  cr_assert_eq(h_poll(h, 1, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_SUCCESS);
  cr_assert_eq(wc[0].opcode, PP_WC_OP_RECV_RDMA_WITH_IMM);
  cr_assert_eq(h_poll(h, 0, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_SUCCESS);
  cr_assert_geq(h->now, 5000, "the WRITE completed after the delayed placement");
  h_destroy(h);
}

Test(explore_nic, srq_delay_starves_the_srq_until_its_wqes_are_usable)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.srq_delay_ns = 50000};
  struct harness *h = h_create_faults(2, &p, &f, 1);
  uint32_t srq;
  struct pp_srq_init_attr sa = {.max_wr = 8, .max_sge = 1};
  cr_assert_eq(simnic_ops.create_srq(h_nic(h, 1), &sa, &srq), PP_OK);
  struct h_qp_opts o = h_qp_defaults();
  o.srq_b = srq;
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[64], dst[64];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE);
  struct pp_recv_wr rw = {
      .wr_id = 5, .num_sge = 1, .sg_list = {{.addr = md.addr, .length = 64, .lkey = md.lkey}}};
  simnic_set_now(h_nic(h, 1), 0);
  cr_assert_eq(simnic_ops.post_srq_recv(h_nic(h, 1), srq, &rw), PP_OK);
  cr_assert_eq(h_post_send(h, 0, qa, PP_WR_SEND, 1, &ms, src, 64, 0, 0, true), PP_OK);
  h_run(h, UINT64_MAX);
  struct pp_fault_counts fc;
  simnic_fault_counts(h_nic(h, 1), &fc);
  struct pp_nic_counters c;
  simnic_counters(h_nic(h, 1), &c);
  cr_assert_gt(fc.srq_starved, 0);
  cr_assert_gt(c.rnr_naks_sent, 0, "the depleted SRQ answers with RNR NAKs");
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(h, 1, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_SUCCESS);
  cr_assert_geq(h->now, 50000, "delivered once the WQE became usable");
  h_destroy(h);
}

Test(explore_nic, qp_error_fault_flushes_and_raises_qp_fatal)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.qp_error_ns = 30000, .qp_error_host = 0, .qp_error_qp = 0};
  struct harness *h = h_create_faults(2, &p, &f, 1);
  struct h_qp_opts o = h_qp_defaults(); /* rnr_retry 7: the send RNRs until the fault */
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[64];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  cr_assert_eq(h_post_send(h, 0, qa, PP_WR_SEND, 1, &ms, src, 64, 0, 0, true), PP_OK);
  h_run(h, UINT64_MAX);
  cr_assert_eq(simnic_qp_state(h_nic(h, 0), qa), PP_QPS_ERR);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(h, 0, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_WR_FLUSH_ERR);
  struct pp_async_event ev;
  cr_assert_eq(simnic_get_async_event(h_nic(h, 0), &ev), 1);
  cr_assert_eq(ev.type, PP_EVENT_QP_FATAL);
  cr_assert_eq(ev.qp_num, qa);
  struct pp_fault_counts fc;
  simnic_fault_counts(h_nic(h, 0), &fc);
  cr_assert_eq(fc.qp_errors, 1);
  cr_assert_geq(h->now, 30000);
  h_destroy(h);
}

Test(explore_nic, rkey_invalidation_fails_a_peer_holding_the_old_rkey)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.rkey_ns = 5000, .rkey_host = 1};
  struct harness *h = h_create_faults(2, &p, &f, 1);
  struct h_qp_opts o = h_qp_defaults();
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[64], dst[64];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE);
  cr_assert_eq(h_post_send(h, 0, qa, PP_WR_RDMA_WRITE, 1, &ms, src, 64, md.addr, md.rkey, true),
               PP_OK);
  h_run(h, 4000);
  struct pp_wc wc[4];
  cr_assert_eq(h_poll(h, 0, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_SUCCESS, "before the fault the rkey works");
  h->now = 10000;
  cr_assert_eq(h_post_send(h, 0, qa, PP_WR_RDMA_WRITE, 2, &ms, src, 64, md.addr, md.rkey, true),
               PP_OK);
  h_run(h, UINT64_MAX);
  cr_assert_eq(h_poll(h, 0, wc, 4), 1);
  cr_assert_eq(wc[0].status, PP_WC_REM_ACCESS_ERR, "the old rkey is refused");
  struct pp_fault_counts fc;
  simnic_fault_counts(h_nic(h, 1), &fc);
  cr_assert_eq(fc.rkeys, 1);
  h_destroy(h);
}

Test(explore_nic, order_mask_delays_exactly_the_numbered_transfers)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.order_bits = 4, .order_mask = 0x5, .order_window_ns = 3000};
  struct harness *h = h_create_faults(2, &p, &f, 1);
  struct h_qp_opts o = h_qp_defaults();
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  static uint8_t src[8][64], dst[8][64];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE);
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(h_post_recv(h, 1, qb, (uint64_t)i, &md, dst[i], 64), PP_OK);
    cr_assert_eq(h_post_send(h, 0, qa, PP_WR_SEND, (uint64_t)i, &ms, src[i], 64, 0, 0, true),
                 PP_OK);
  }
  h_run(h, UINT64_MAX);
  struct pp_fault_counts f0, f1;
  simnic_fault_counts(h_nic(h, 0), &f0);
  simnic_fault_counts(h_nic(h, 1), &f1);
  cr_assert_eq(f0.ordered + f1.ordered, 2, "transfers 0 and 2 of the fabric");
  struct pp_wc wc[16];
  cr_assert_eq(poll_all(h, 1, wc, 16), 8);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(wc[i].wr_id, (uint64_t)i);
  h_destroy(h);
}

Test(explore_nic, faults_stop_at_until)
{
  struct pp_nic_profile p = small_nic();
  struct pp_faults f = {.loss = 0.9, .until_ns = 1, .jitter_ns = 50000};
  struct harness *h = h_create_faults(2, &p, &f, 1);
  struct h_qp_opts o = h_qp_defaults();
  uint32_t qa, qb;
  h_connect(h, 0, 1, &o, &qa, &qb);
  h->now = 10;
  static uint8_t src[64], dst[64];
  struct pp_mr ms = h_reg(h, 0, src, sizeof src, PP_ACCESS_LOCAL_WRITE);
  struct pp_mr md = h_reg(h, 1, dst, sizeof dst, PP_ACCESS_LOCAL_WRITE);
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(h_post_recv(h, 1, qb, (uint64_t)i, &md, dst, 64), PP_OK);
    cr_assert_eq(h_post_send(h, 0, qa, PP_WR_SEND, (uint64_t)i, &ms, src, 64, 0, 0, true), PP_OK);
  }
  h_run(h, UINT64_MAX);
  struct pp_nic_counters c;
  simnic_counters(h_nic(h, 0), &c);
  struct pp_fault_counts fc;
  simnic_fault_counts(h_nic(h, 0), &fc);
  cr_assert_eq(c.packets_dropped, 0);
  cr_assert_eq(fc.jittered, 0);
  h_destroy(h);
}

/* ================================================================ whole runs */

TestSuite(explore_run);

/* naive, 2 ranks, 40 x 1 KiB, 4 receive buffers, infinite RNR retry, short RNR timer */
static void base(struct pp_scenario *sc, enum pp_protocol proto)
{
  pp_scenario_defaults(sc);
  struct pp_sim_config *s = &sc->sim;
  snprintf(s->name, sizeof s->name, "explore-test");
  pp_engine_cfg_protocol(&s->engine, pp_protocol_name(proto)); /* and its defaults */
  s->engine.nranks = 2;
  s->engine.workload.messages = 40;
  s->engine.workload.size = 1024;
  s->engine.qp.rq_depth = 4;
  s->engine.qp.sq_depth = 16;
  s->engine.qp.min_rnr_timer = 1;
  s->engine.qp.rnr_retry = 7;
  s->engine.qp.timeout = 10;
  if (pp_engine_cfg_is_ring(&s->engine)) {
    pp_ring_params_of(&s->engine)->slots = 4;
    pp_ring_params_of(&s->engine)->slot_size = 512;
  }
  pp_explore_set_bounds(sc, 0);
}

static void run(struct pp_scenario *sc, struct pp_verdict *v)
{
  pp_explore_set_bounds(sc, 2000000);
  pp_explore_run(sc, 120, NULL, NULL, v);
}

#define assert_inv(v, want)                                                    \
  cr_assert_eq((v).inv, (want), "verdict %s, want %s: %s", pp_inv_name((v).inv), \
               pp_inv_name(want), (v).why)

Test(explore_run, no_fault_runs_pass)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(v.messages, 40);
  cr_assert_eq(v.rnr_naks, 0);
  base(&sc, PP_PROTO_RING_CREDITS);
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.messages, 40);
}

/* The byzantine fault (backends/simgrid/byzantine.h) really mutates what rank 1 sends: the run
 * differs from the clean one and counts its mutations; the positive control (every mutation a
 * changed data byte, which no receiver can detect) is caught by the integrity invariant, on the
 * honest receiver, and the liar's own side is not judged. */
Test(explore_run, byzantine_peer_mutates_and_a_data_lie_is_caught)
{
  static struct pp_scenario sc;
  static const enum pp_protocol protos[] = {PP_PROTO_EAGER, PP_PROTO_RING_CREDITS};
  for (int i = 0; i < 2; i++) {
    struct pp_verdict clean, v;
    base(&sc, protos[i]);
    run(&sc, &clean);
    assert_inv(clean, PP_INV_OK);
    cr_assert_eq(clean.fired.byzantine, 0);
    sc.sim.faults.byzantine = 0.3;
    sc.sim.faults.byzantine_rank = 1;
    run(&sc, &v);
    /* judged (not stopped by an engine that rejected a lie): the mutations are counted */
    if (v.inv != PP_INV_ENGINE)
      cr_assert_gt(v.fired.byzantine, 0, "%s: nothing mutated (%s: %s)",
                   pp_protocol_name(protos[i]), pp_inv_name(v.inv), v.why);
    cr_assert(v.inv != clean.inv || v.messages != clean.messages || v.sim_ns != clean.sim_ns ||
                  v.errors != clean.errors,
              "%s: the run with a byzantine peer is the clean run", pp_protocol_name(protos[i]));
    /* the positive control: rank 0 sends to the honest rank 1 (pattern pair) and lies in data */
    base(&sc, protos[i]);
    sc.sim.engine.workload.pattern = PP_PATTERN_PAIR;
    sc.sim.faults.byzantine = 0.3;
    sc.sim.faults.byzantine_rank = 0;
    sc.sim.faults.byzantine_data_lies = true;
    run(&sc, &v);
    assert_inv(v, PP_INV_INTEGRITY);
    cr_assert_not_null(strstr(v.why, "honest rank 1 accepted"), "%s", v.why);
    cr_assert_gt(v.fired.byzantine, 0);
    /* the same lies told by the receiver (rank 1, which sends nothing but credits and acks)
     * change no data: the honest sender's side is all that is judged */
    sc.sim.faults.byzantine_rank = 1;
    run(&sc, &v);
    cr_assert_neq(v.inv, PP_INV_INTEGRITY, "%s", v.why);
  }
}

/* A protocol violation blamed on a peer (stats.peer_violations): with no liar in the run a false
 * alarm of the checks (protocol), also when a fatal fault fired (a peer that failed with its QP
 * is judged no more: traces/regressions/p2p-qp-error-late-fin-no-violation.yaml); with a
 * byzantine rank it must name the liar. Judged on a completed run's result, built here. */
Test(explore_check, a_violation_must_name_the_liar)
{
  static struct pp_scenario sc;
  struct pp_rank_result ranks[2];
  struct pp_run_result res = {.outcome = PP_OUTCOME_COMPLETED, .nranks = 2, .ranks = ranks};
  char why[256];
  base(&sc, PP_PROTO_EAGER);
  sc.sim.engine.workload.pattern = PP_PATTERN_PAIR;
  memset(ranks, 0, sizeof ranks);
  for (int i = 0; i < 2; i++)
    ranks[i].stats.done = true;
  ranks[1].stats.messages_received = sc.sim.engine.workload.messages;
  cr_assert_eq(pp_explore_check(&sc, &res, why, sizeof why), PP_INV_OK, "%s", why);
  ranks[1].stats.peer_violations = 1;
  ranks[1].stats.first_violation.peer = 0;
  cr_assert_eq(pp_explore_check(&sc, &res, why, sizeof why), PP_INV_PROTOCOL, "%s", why);
  cr_assert_not_null(strstr(why, "rank 1 failed an honest peer"), "%s", why);
  ranks[0].faults.qp_errors = 1; /* a fatal fault does not explain it */
  cr_assert_eq(pp_explore_check(&sc, &res, why, sizeof why), PP_INV_PROTOCOL, "%s", why);
  ranks[0].faults.qp_errors = 0;
  sc.sim.faults.byzantine = 0.3; /* rank 0 lies: rank 1 blaming it is a clear reaction */
  sc.sim.faults.byzantine_rank = 0;
  cr_assert_eq(pp_explore_check(&sc, &res, why, sizeof why), PP_INV_OK, "%s", why);
  sc.sim.engine.nranks = 3; /* a third, honest rank 2 blamed instead */
  struct pp_rank_result r3[3];
  memset(r3, 0, sizeof r3);
  r3[0] = ranks[0], r3[1] = ranks[1];
  r3[2].stats.done = true;
  r3[1].stats.first_violation.peer = 2;
  res.nranks = 3, res.ranks = r3;
  cr_assert_eq(pp_explore_check(&sc, &res, why, sizeof why), PP_INV_PROTOCOL, "%s", why);
  cr_assert_not_null(strstr(why, "blamed honest rank 2"), "%s", why);
}

Test(explore_run, slow_consumer_makes_naive_rnr_and_retry0_fail)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  sc.sim.engine.workload.consume_ns = 20000;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK); /* naive is exempt from the RNR invariant ... */
  cr_assert_gt(v.rnr_naks, 0);
  sc.sim.engine.qp.rnr_retry = 0;
  run(&sc, &v);
  assert_inv(v, PP_INV_ERRORS); /* ... but not from RNR_RETRY_EXC_ERR */
  cr_assert_not_null(strstr(v.why, "RNR_RETRY_EXC_ERR"), "%s", v.why);
  base(&sc, PP_PROTO_RING_CTS); /* the flow-controlled protocol does not RNR */
  sc.sim.engine.workload.consume_ns = 20000;
  sc.sim.engine.qp.rnr_retry = 0;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.rnr_naks, 0);
}

Test(explore_run, late_and_reordered_receive_posting)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  sc.sim.engine.workload.post_delay_ns = 30000;
  sc.sim.engine.workload.consume_jitter_ns = 10000;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_gt(v.rnr_naks, 0, "naive sends before the receiver posted");
  cr_assert_eq(v.messages, 40, "the re-posts in random order still get every message in order");
  base(&sc, PP_PROTO_RING_CREDITS);
  sc.sim.engine.workload.post_delay_ns = 30000;
  sc.sim.engine.workload.consume_jitter_ns = 10000;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.rnr_naks, 0);
}

Test(explore_run, paused_process)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  sc.sim.faults.pause_ranks = 1u << 1;
  sc.sim.faults.pause_at_ns = 0;
  sc.sim.faults.pause_ns = 200000;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.fired.pauses, 1);
  cr_assert_gt(v.rnr_naks, 0, "the paused receiver cannot re-post: its NIC RNR-NAKs");
  cr_assert_geq(v.sim_ns, 200000);
}

Test(explore_run, delayed_cq_polling)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_RING_CTS);
  sc.sim.faults.cq_delay_ns = 20000;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_gt(v.fired.cq_delays, 10);
}

Test(explore_run, loss_jitter_scramble_on_a_ring_protocol)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_RING_CREDITS);
  sc.sim.faults.loss = 0.02;
  sc.sim.faults.jitter_ns = 5000;
  sc.sim.faults.scramble = 1.0;
  sc.sim.faults.scramble_ns = 2000;
  sc.sim.engine.workload.messages = 100;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_gt(v.dropped, 0);
  cr_assert_gt(v.fired.jittered, 0);
  cr_assert_gt(v.fired.scrambled, 0, "ring data moves by RDMA WRITE");
  cr_assert_eq(v.messages, 100);
}

Test(explore_run, fatal_faults_must_be_reported_not_hang)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_RING_CREDITS);
  sc.sim.engine.workload.interval_ns = 2000;
  sc.sim.faults.qp_error_ns = 20000;
  sc.sim.faults.qp_error_host = 0;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_eq(v.fired.qp_errors, 1);
  cr_assert(v.errors > 0 || v.async > 0);
  base(&sc, PP_PROTO_RING_CTS);
  sc.sim.engine.workload.interval_ns = 2000;
  sc.sim.faults.rkey_ns = 20000;
  sc.sim.faults.rkey_host = 1;
  run(&sc, &v);
  assert_inv(v, PP_INV_OK);
  cr_assert_gt(v.fired.rkeys, 0);
  cr_assert_gt(v.errors, 0, "the writer holding the old rkey fails");
}

Test(explore_run, wall_clock_bound_kills_the_run)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  sc.sim.engine.workload.messages = 100000;
  pp_explore_run(&sc, 0.05, NULL, NULL, &v);
  assert_inv(v, PP_INV_WALLCLOCK);
}

Test(explore_run, a_setup_error_is_a_verdict)
{
  static struct pp_scenario sc;
  struct pp_verdict v;
  base(&sc, PP_PROTO_NAIVE);
  snprintf(sc.sim.platform.file, sizeof sc.sim.platform.file, "/nonexistent/platform.xml");
  pp_explore_run(&sc, 60, NULL, NULL, &v);
  assert_inv(v, PP_INV_SETUP);
}

/* ================================================================ finding and shrinking */

TestSuite(explore_find, .init = setup, .fini = teardown);

/* Explores seeds [1, n] of sp with 2 jobs; the first seed failing with `want` (in seed order). */
static bool find(const struct pp_explore_space *sp, uint64_t n, enum pp_inv want, uint64_t *seed,
                 struct pp_verdict *found)
{
  static struct pp_scenario sc;
  struct pp_explore_pool *p = pp_explore_pool_create(2, 120);
  cr_assert_not_null(p);
  uint64_t next = 1, best = UINT64_MAX;
  for (;;) {
    while (next <= n && next < best && pp_explore_pool_running(p) < 2) {
      pp_explore_generate(next, sp, &sc);
      cr_assert(pp_explore_pool_start(p, next, &sc));
      next++;
    }
    uint64_t id;
    struct pp_verdict v;
    if (!pp_explore_pool_wait(p, -1, &id, &v))
      break;
    if (v.inv != PP_INV_OK)
      cr_log_info("seed %" PRIu64 ": %s %s", id, pp_inv_name(v.inv), v.why);
    if (v.inv == want && id < best) {
      best = id;
      *found = v;
    }
  }
  pp_explore_pool_destroy(p);
  *seed = best;
  return best != UINT64_MAX;
}

/* Finds `want` within `budget` seeds, shrinks it, checks the shrunk scenario. */
static void find_and_shrink(struct pp_explore_space *sp, uint64_t budget, enum pp_inv want)
{
  static struct pp_scenario sc, small;
  uint64_t seed;
  struct pp_verdict v;
  cr_assert(find(sp, budget, want, &seed, &v), "no %s failure in %" PRIu64 " seeds",
            pp_inv_name(want), budget);
  pp_explore_generate(seed, sp, &sc);
  char before[256], after[256];
  pp_explore_describe(&sc, before, sizeof before);
  unsigned runs = pp_explore_shrink(&sc, want, 40, 120, &small, NULL);
  pp_explore_describe(&small, after, sizeof after);
  cr_log_info("seed %" PRIu64 " [%s] %s: %s -> %s (%u runs)", seed, pp_inv_name(want), v.why,
              before, after, runs);
  cr_assert_gt(runs, 0);
  const struct pp_workload *a = &sc.sim.engine.workload, *b = &small.sim.engine.workload;
  cr_assert_leq(small.sim.engine.nranks, sc.sim.engine.nranks);
  cr_assert_leq(b->messages, a->messages);
  cr_assert_leq(b->size, a->size);
  cr_assert_eq(pp_faults_of(&small) & ~pp_faults_of(&sc), 0);
  cr_assert(memcmp(&small.sim, &sc.sim, sizeof sc.sim) != 0, "nothing shrank: %s", before);
  /* the shrunk scenario, written and read back, still fails the same way */
  char path[256], err[512];
  snprintf(path, sizeof path, "%s/shrunk.yaml", tmpdir);
  cr_assert_eq(pp_scenario_write_file(path, &small, "expect: x"), 0);
  static struct pp_scenario back;
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &back, err, sizeof err), PP_OK, "%s",
               err);
  pp_explore_run(&back, 120, NULL, NULL, &v);
  assert_inv(v, want);
}

/* find_and_shrink in the default space with test bug b alone. */
static void bug_found_and_shrunk(enum pp_bug b, uint64_t budget, enum pp_inv want)
{
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  sp.bugs = 1u << b;
  find_and_shrink(&sp, budget, want);
}

Test(explore_find, naive_rnr_failures_found_and_shrunk)
{
  struct pp_explore_space sp;
  pp_explore_space_default(&sp);
  sp.gen = gen_index("naive");
  find_and_shrink(&sp, 50, PP_INV_ERRORS);
}

Test(explore_find, bug_early_repost_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_EARLY_REPOST, 40, PP_INV_REUSE);
}

Test(explore_find, bug_lost_repost_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_LOST_REPOST, 60, PP_INV_HANG);
}

Test(explore_find, bug_send_reuse_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_SEND_REUSE, 30, PP_INV_INTEGRITY);
}

Test(explore_find, bug_early_credit_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_EARLY_CREDIT, 40, PP_INV_RNR);
}

Test(explore_find, bug_early_cts_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_EARLY_CTS, 30, PP_INV_ERRORS);
}

Test(explore_find, bug_wildcard_order_found_and_shrunk)
{
  bug_found_and_shrunk(PP_BUG_WILDCARD_ORDER, 40, PP_INV_INTEGRITY);
}

/* ================================================================ the command line */

TestSuite(explore_cli, .init = setup, .fini = teardown);

static char *out_text;

static int cli(const char *args)
{
  char cmd[4096], path[256];
  snprintf(path, sizeof path, "%s/out", tmpdir);
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' explore %s > out 2> err < /dev/null", tmpdir,
           PREPOST_CLI, args);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "prepost explore %s: did not exit normally", args);
  free(out_text);
  out_text = scratch_slurp(path, NULL);
  return WEXITSTATUS(st);
}

#define assert_has(needle)                                                     \
  cr_assert_not_null(strstr(out_text, (needle)), "'%s' not in:\n%s", (needle), out_text)

Test(explore_cli, clean_seeds_exit_0_with_a_summary)
{
  cr_assert_eq(cli("--seeds 4 --jobs 2"), 0, "%s", out_text);
  assert_has("explore: 4 seeds (1..4)");
  assert_has("0 failures");
}

Test(explore_cli, a_failure_prints_a_reproduction_that_reproduces)
{
  cr_assert_eq(cli("--from 41 --seeds 10 --protocol naive --shrink-max 1 --shrink-runs 30 --out f"), 1);
  assert_has("FAIL seed ");
  assert_has("[errors]");
  const char *r = strstr(out_text, "reproduce: prepost explore --from ");
  cr_assert_not_null(r, "%s", out_text);
  char line[512];
  r += strlen("reproduce: prepost explore ");
  snprintf(line, sizeof line, "%.*s", (int)strcspn(r, "\n"), r);
  char args[640];
  snprintf(args, sizeof args, "%s --no-shrink --no-trace --out g", line);
  char *first = strdup(out_text);
  cr_assert_eq(cli(args), 1, "%s: %s", args, out_text);
  assert_has("explore: 1 seeds");
  /* the same seed fails with the same sentence */
  const char *fail = strstr(first, "FAIL seed ");
  size_t fl = strcspn(fail, "\n");
  char want[512];
  snprintf(want, sizeof want, "%.*s", (int)fl, fail);
  assert_has(want);
  free(first);
  /* the written scenario and the shrunk one replay with their expected verdict */
  cr_assert_eq(cli("--replay f"), 0, "%s", out_text);
  assert_has("-shrunk.yaml: errors");
  assert_has(" as expected, 0 not");
}

Test(explore_cli, replay_reports_an_unexpected_verdict)
{
  static struct pp_scenario sc;
  base(&sc, PP_PROTO_NAIVE);
  char path[256];
  snprintf(path, sizeof path, "%s/passes.yaml", tmpdir);
  cr_assert_eq(pp_scenario_write_file(path, &sc, "expect: hang"), 0);
  cr_assert_eq(cli("--replay passes.yaml"), 1);
  assert_has("FAIL passes.yaml: ok (expected hang)");
}

Test(explore_cli, exhaustive_enumerates_every_ordering)
{
  cr_assert_eq(cli("--exhaustive 3 --from 5 --max-ranks 2 --max-messages 4 --jobs 2"), 0, "%s",
               out_text);
  assert_has("2^3 = 8 orderings");
  assert_has("exhaustive: 8 orderings");
}

/* A naive receiver with one buffer re-posts it 9999 ns after the first message lands; the second
 * message lands 10000 ns after the first: the run passes, by 1 ns. Exhaustive mode with a 2 ns
 * window finds the ordering (the first message 2 ns late) where the re-post comes 1 ns late and
 * the second SEND meets an RNR NAK with rnr_retry 0. */
Test(explore_cli, exhaustive_finds_a_race_the_plain_run_passes)
{
  static struct pp_scenario sc;
  base(&sc, PP_PROTO_NAIVE);
  sc.sim.engine.workload.messages = 2;
  sc.sim.engine.workload.size = 16;
  sc.sim.engine.workload.interval_ns = 10000;
  sc.sim.engine.workload.consume_ns = 9999;
  sc.sim.engine.qp.rq_depth = 1;
  sc.sim.engine.qp.rnr_retry = 0;
  char path[256];
  snprintf(path, sizeof path, "%s/race.yaml", tmpdir);
  cr_assert_eq(pp_scenario_write_file(path, &sc, "expect: ok"), 0);
  cr_assert_eq(cli("--replay race.yaml"), 0, "%s", out_text);
  cr_assert_eq(cli("--exhaustive 3 --window 2ns --replay race.yaml --out f"), 1, "%s", out_text);
  assert_has("exhaustive: 8 orderings");
  assert_has("2 failing (errors 2)");
  assert_has("FAIL ordering 0x1 [errors]");
  cr_assert_eq(cli("--replay f"), 0, "the written ordering fails again: %s", out_text);
}

Test(explore_cli, usage_errors)
{
  cr_assert_eq(cli("--bogus"), 2);
  cr_assert_eq(cli("--protocol nope"), 2);
  cr_assert_eq(cli("--faults loss,nope"), 2);
  cr_assert_eq(cli("--bug nope"), 2);
  cr_assert_eq(cli("--seeds 3 --time 1s"), 2);
  cr_assert_eq(cli("--list"), 0);
  assert_has("early-repost");
  assert_has("qp-error");
}
