/*
 * Runs two ranks on the simulated RC NIC through the installed libprepost-sim: rank 0 streams
 * 200 messages of 64 KiB to rank 1 with the MPI-style eager protocol (credits, rendezvous above
 * the eager limit) over a generated two-host 100 Gb/s cluster, then checks what the run reports:
 * every operation completed, every byte arrived intact, no RNR NAK (the protocol makes them
 * impossible), and the simulated time is no less than what the link needs for the payload.
 * Exit 0 when all of that holds.
 */
#include <prepost/engine.h>
#include <prepost/p2p.h>
#include <prepost/simrun.h>
#include <prepost/status.h>

#include <stdio.h>
#include <string.h>

#define MESSAGES 200u
#define SIZE (64u * 1024u)

static int check(int ok, const char *what)
{
  printf("%-48s %s\n", what, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

static void config(struct pp_sim_config *c)
{
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", "sim-run example");
  c->platform.bandwidth_bps = 100e9; /* no platform file: a generated cluster */
  c->platform.latency_ns = 1000;
  pp_nic_profile_default(&c->nic);
  struct pp_engine_cfg *e = &c->engine;
  e->nranks = 2;
  e->protocol = PP_PROTO_EAGER;
  e->qp = (struct pp_qp_params){.min_rnr_timer = 12, .rnr_retry = 0, .timeout = 14,
                                .retry_cnt = 7, .max_rd_atomic = 16, .mtu = 4096,
                                .sq_depth = 128, .rq_depth = 64};
  e->workload = (struct pp_workload){.kind = PP_WORKLOAD_STREAM, .pattern = PP_PATTERN_PAIR,
                                     .messages = MESSAGES, .size = SIZE};
  pp_p2p_params_default(pp_p2p_params_of(e));
  e->seed = 7;
  c->seed = 7;
  c->max_sim_time_ns = 10ull * 1000000000ull;
  c->no_progress_ns = 1000000000ull;
}

int main(void)
{
  static struct pp_sim_config cfg;
  config(&cfg);
  char err[512];
  if (pp_engine_cfg_check(&cfg.engine, err, sizeof err) != PP_OK) {
    fprintf(stderr, "sim-run: configuration: %s\n", err);
    return 1;
  }
  struct pp_run_result res;
  enum pp_status st = pp_sim_run(&cfg, NULL, &res, err, sizeof err);
  if (st != PP_OK) {
    fprintf(stderr, "sim-run: pp_sim_run: %s: %s\n", pp_status_name(st), err);
    return 1;
  }
  const struct pp_rank_stats *tx = &res.ranks[0].stats, *rx = &res.ranks[1].stats;
  uint64_t naks = res.ranks[0].nic.rnr_naks_received + res.ranks[1].nic.rnr_naks_received;
  double wire_ns = (double)MESSAGES * SIZE * 8.0 / cfg.platform.bandwidth_bps * 1e9;
  printf("%s: protocol %s, outcome %s, %llu messages in %.1f us simulated, p50 latency %llu ns\n",
         cfg.name, pp_protocol_name(cfg.engine.protocol), pp_outcome_name(res.outcome),
         (unsigned long long)rx->messages_received, (double)res.sim_time_ns / 1e3,
         (unsigned long long)res.latency.p50);
  int bad = 0;
  bad += check(res.outcome == PP_OUTCOME_COMPLETED, "outcome completed");
  bad += check(res.nranks == 2, "two ranks");
  bad += check(tx->messages_sent == MESSAGES, "every message sent");
  bad += check(rx->messages_received == MESSAGES, "every message received");
  bad += check(rx->bytes_received == (uint64_t)MESSAGES * SIZE, "every byte received");
  bad += check(rx->corrupt == 0 && rx->early_reuse == 0, "bytes intact, no early reuse");
  bad += check(tx->status_counts[PP_WC_SUCCESS] > 0 &&
                   tx->status_counts[PP_WC_RNR_RETRY_EXC_ERR] == 0,
               "successful completions, no RNR_RETRY_EXC_ERR");
  bad += check(naks == 0, "no RNR NAK");
  bad += check((double)res.sim_time_ns >= wire_ns, "no faster than the link");
  bad += check(res.ranks[1].p2p.received[PP_P2P_RNDV_GET] + res.ranks[1].p2p.received[PP_P2P_RNDV_PUT] ==
                   MESSAGES,
               "64 KiB messages went by rendezvous");
  pp_run_result_free(&res);
  return bad ? 1 : 0;
}
