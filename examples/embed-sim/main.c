/*
 * An application embedded in the engine with callbacks (prepost/app.h), run on the simulated RC
 * NIC through the installed libprepost-sim (prepost/simapp.h): a ping-pong between two ranks over
 * a generated two-host 100 Gb/s cluster, for message sizes from 8 B (eager) to 256 KiB
 * (rendezvous by RDMA READ), each a few hundred round trips. Rank 0 sends, rank 1 answers with
 * the same bytes; every byte of every message is checked on both sides, and rank 0 prints half
 * the mean round trip per size (simulated time, as osu_latency does). Its application state is
 * one struct per rank, the callbacks' user_data. Exit 0 when every message arrived intact and
 * the run completed.
 */
#include <prepost/app.h>
#include <prepost/p2p.h>
#include <prepost/run.h>
#include <prepost/simapp.h>
#include <prepost/status.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS 200u
#define NSIZES 6u
static const uint32_t sizes[NSIZES] = {8, 1024, 8192, 16384, 65536, 262144};
#define MAX_SIZE 262144u

struct rank_app {
  uint32_t rank, size_i, iter; /* where the ping-pong stands */
  uint64_t t_start;            /* rank 0: when the current round trip began */
  uint64_t size_start;         /* rank 0: when the current size began */
  double half_rtt_ns[NSIZES];
  uint64_t bad_bytes, done_rounds;
  uint8_t *out, *in;
};

static void fill(uint8_t *b, uint32_t n, uint32_t size_i, uint32_t iter)
{
  for (uint32_t i = 0; i < n; i++)
    b[i] = (uint8_t)(i * 131u + size_i * 17u + iter);
}

static uint64_t check(const uint8_t *b, uint32_t n, uint32_t size_i, uint32_t iter)
{
  uint64_t bad = 0;
  for (uint32_t i = 0; i < n; i++)
    bad += b[i] != (uint8_t)(i * 131u + size_i * 17u + iter);
  return bad;
}

/* Posts the receive for the next message, and (rank 0) sends it. */
static enum pp_status next(struct pp_engine *e, uint64_t now, struct rank_app *a)
{
  uint32_t n = sizes[a->size_i], peer = 1 - a->rank;
  pp_req r;
  enum pp_status s = pp_p2p_irecv(e, now, a->in, n, peer, a->size_i, 0, 0, &r);
  if (s != PP_OK || a->rank != 0)
    return s;
  fill(a->out, n, a->size_i, a->iter);
  return pp_p2p_isend(e, now, a->out, n, peer, a->size_i, 0, 0, &r);
}

static enum pp_status on_start(struct pp_engine *e, uint64_t now, void *ud)
{
  struct rank_app *a = ud;
  a->t_start = a->size_start = now;
  return next(e, now, a);
}

static enum pp_status on_send_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                                   const struct pp_p2p_status *st, void *ud)
{
  (void)now, (void)cookie, (void)ud;
  if (st->error != PP_P2P_E_OK)
    return PP_IO;
  return pp_p2p_test(e, &req, NULL) ? PP_OK : PP_STATE; /* release the request */
}

static enum pp_status on_recv_done(struct pp_engine *e, uint64_t now, pp_req req, uint64_t cookie,
                                   const struct pp_p2p_status *st, void *ud)
{
  (void)cookie;
  struct rank_app *a = ud;
  uint32_t n = sizes[a->size_i];
  if (st->error != PP_P2P_E_OK || st->len != n || st->tag != a->size_i || !pp_p2p_test(e, &req, NULL))
    return PP_IO;
  a->bad_bytes += check(a->in, n, a->size_i, a->iter);
  if (a->rank == 1) { /* echo it */
    memcpy(a->out, a->in, n);
    pp_req r;
    enum pp_status s = pp_p2p_isend(e, now, a->out, n, 0, a->size_i, 0, 0, &r);
    if (s != PP_OK)
      return s;
  } else {
    pp_app_latency(e, now - a->t_start); /* into the run result's latency histogram */
  }
  a->done_rounds++;
  if (++a->iter == ITERS) {
    if (a->rank == 0)
      a->half_rtt_ns[a->size_i] = (double)(now - a->size_start) / ITERS / 2;
    a->iter = 0;
    a->size_start = now;
    if (++a->size_i == NSIZES)
      return PP_OK; /* finished */
  }
  a->t_start = now;
  return next(e, now, a);
}

static bool is_done(const struct pp_engine *e, void *ud)
{
  (void)e;
  const struct rank_app *a = ud;
  return a->size_i == NSIZES;
}

static struct rank_app apps[2];

/* The rank factory: each rank's callbacks and state. */
static enum pp_status make_rank(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
                                void **user_data)
{
  struct rank_app *all = ctx;
  struct rank_app *a = &all[rank];
  a->rank = rank;
  a->out = malloc(MAX_SIZE);
  a->in = malloc(MAX_SIZE);
  if (!a->out || !a->in)
    return PP_NOMEM;
  pp_app_callbacks_default(cb);
  cb->start = on_start;
  cb->send_done = on_send_done;
  cb->recv_done = on_recv_done;
  cb->done = is_done;
  *user_data = a;
  return PP_OK;
}

static void config(struct pp_sim_config *c)
{
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", "embed-sim example");
  c->platform.bandwidth_bps = 100e9; /* a generated two-host cluster */
  c->platform.latency_ns = 1000;
  pp_nic_profile_default(&c->nic);
  struct pp_engine_cfg *e = &c->engine;
  e->nranks = 2;
  e->protocol = PP_PROTO_EAGER; /* eager up to 12 KiB, RGET above */
  e->qp = (struct pp_qp_params){.min_rnr_timer = 12, .rnr_retry = 0, .timeout = 14,
                                .retry_cnt = 7, .max_rd_atomic = 16, .mtu = 4096,
                                .sq_depth = 128, .rq_depth = 64};
  pp_p2p_params_default(pp_p2p_params_of(e));
  e->seed = 11;
  c->seed = 11;
  c->max_sim_time_ns = 10ull * 1000000000ull;
  c->no_progress_ns = 1000000000ull;
}

int main(void)
{
  static struct pp_sim_config cfg;
  config(&cfg);
  struct pp_sim_app app = {.rank = make_rank, .ctx = apps};
  struct pp_run_result res;
  char err[512];
  enum pp_status s = pp_sim_run_app(&cfg, &app, NULL, &res, err, sizeof err);
  if (s != PP_OK) {
    fprintf(stderr, "embed-sim: pp_sim_run_app: %s: %s\n", pp_status_name(s), err);
    return 1;
  }
  printf("%s: outcome %s, %.1f us simulated\n", cfg.name, pp_outcome_name(res.outcome),
         (double)res.sim_time_ns / 1e3);
  printf("%10s %14s\n", "size (B)", "latency (ns)");
  for (uint32_t i = 0; i < NSIZES; i++)
    printf("%10u %14.0f\n", sizes[i], apps[0].half_rtt_ns[i]);
  printf("round trips recorded: %llu, median %llu ns\n", (unsigned long long)res.latency.count,
         (unsigned long long)res.latency.p50);
  int ok = res.outcome == PP_OUTCOME_COMPLETED && apps[0].bad_bytes == 0 &&
           apps[1].bad_bytes == 0 && apps[0].done_rounds == ITERS * NSIZES &&
           apps[1].done_rounds == ITERS * NSIZES && res.latency.count == ITERS * NSIZES &&
           apps[0].half_rtt_ns[0] > 1000 && /* at least the 1 us link */
           apps[0].half_rtt_ns[NSIZES - 1] > apps[0].half_rtt_ns[0];
  printf("every byte intact, every round trip done: %s\n", ok ? "ok" : "FAILED");
  pp_run_result_free(&res);
  for (int r = 0; r < 2; r++) {
    free(apps[r].out);
    free(apps[r].in);
  }
  return ok ? 0 : 1;
}
