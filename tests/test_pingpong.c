/*
 * engine/workload/pingpong.c on SimGrid: rank 0 <-> rank 1 round trips over each path the
 * engine has (eager, rndv RGET, rndv RPUT, ring-credits, ring-cts), one latency sample of half a
 * round trip per recorded iteration; the run's simulated time is exactly the round trips plus
 * the connection; no RNR, no unexpected message; a stale reply is caught; bad configurations
 * are refused with their sentence.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prepost/p2p.h"
#include "prepost/simrun.h"

#include "scratch.h"
#include "sim_case.h"

TestSuite(pingpong, .fini = sim_fini);

/* (plain arrays: Criterion runs each parameter in a new process, where pointers would dangle) */
struct path {
  char name[16];
  char protocol[16];
  char extra[64]; /* more scenario lines */
  int p2p;        /* the p2p path every message takes (enum pp_p2p_proto), -1: a ring */
  uint32_t hops;  /* one-way trips in series from the send to the receive completion */
};

static const struct path paths[] = {
    {"eager", "eager", "", PP_P2P_EAGER, 1},                    /* the SEND */
    {"rget", "rndv", "", PP_P2P_RNDV_GET, 3},                   /* RTS, READ, its response */
    {"rput", "rndv", "p2p:\n  rget_limit: 0\n", PP_P2P_RNDV_PUT, 3}, /* RTS, CTS, WRITE */
    {"ring-credits", "ring-credits", "", -1, 1},                /* the WRITE_WITH_IMM */
    {"ring-cts", "ring-cts", "", -1, 1},
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

/* The pingpong scenario (models/scenarios/pingpong.yaml) on a path, as text. */
static void scenario_text(char *out, size_t len, const struct path *p, const char *kind,
                          uint32_t n, uint32_t warmup, const char *interval, const char *more)
{
  snprintf(out, len,
           "name: pp-%s\nranks: 2\nplatform: platforms/roce-100g-2host.xml\n"
           "nic: nics/cx6-roce-100g.yaml\nprotocol: %s\n"
           "workload:\n  kind: %s\n  pattern: pair\n  messages: %u\n  warmup: %u\n  size: 64\n"
           "  interval: %s\n%s%s",
           p->name, p->protocol, kind, n, warmup, interval, p->extra, more);
}

/* Runs the pingpong on path p and checks what holds on every path; returns rank 0's summary. */
static struct pp_hist_summary run_path(const struct path *p, uint32_t n, uint32_t warmup,
                                       const char *interval)
{
  char text[1024];
  scenario_text(text, sizeof text, p, "pingpong", n, warmup, interval, "");
  sim_parse(text);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "%s: %s", p->name, pp_outcome_name(res.outcome));
  uint64_t trips = (uint64_t)n + warmup;
  for (uint32_t r = 0; r < 2; r++) {
    const struct pp_rank_result *x = &res.ranks[r];
    cr_assert(x->stats.done);
    cr_assert_eq(x->stats.messages_sent, trips, "%s rank %u", p->name, r);
    cr_assert_eq(x->stats.messages_received, trips, "%s rank %u: every byte checked", p->name, r);
    cr_assert_eq(x->stats.corrupt, 0);
    cr_assert_eq(x->nic.rnr_naks_received, 0, "%s rank %u: receives posted ahead", p->name, r);
    if (p->p2p >= 0) {
      cr_assert_eq(x->p2p.unexpected, 0, "%s rank %u: no unexpected message", p->name, r);
      cr_assert_eq(x->p2p.sent[p->p2p], trips, "%s rank %u: the path's protocol", p->name, r);
    }
  }
  cr_assert_eq(res.ranks[1].stats.latency.count, 0, "only rank 0 records");
  cr_assert_eq(res.ranks[0].stats.latency.count, n, "%s: one sample per recorded round trip",
               p->name);
  cr_assert_eq(res.latency.count, n);
  cr_assert_gt(res.latency.min, 0);
  return res.latency;
}

/* platforms/roce-100g-2host.xml: the link's one-way latency */
#define LINK_NS 1000u

/* The simulated time outside the round trips: connecting the pair (a few us on this platform),
 * well under one more round trip of any path here. */
#define SETUP_MAX_NS 10000u

ParameterizedTestParameters(pingpong, every_path_runs_back_to_back_round_trips)
{
  return cr_make_param_array(struct path, paths, NPATHS);
}

/* messages round trips, each sample half of one: the run is their sum twice plus the setup,
 * nothing between them. Mean is the rounded mean, so the sum is within count ns of it. */
ParameterizedTest(const struct path *p, pingpong, every_path_runs_back_to_back_round_trips,
                  .timeout = 60)
{
  struct pp_hist_summary l = run_path(p, 50, 0, "0");
  uint64_t trips = 2 * l.count * l.mean;
  cr_assert_leq(trips, res.sim_time_ns + 4 * l.count, "%s: 2 x %" PRIu64 " x %" PRIu64 " ns > %"
                PRIu64 " ns run", p->name, l.count, l.mean, res.sim_time_ns);
  cr_assert_lt(res.sim_time_ns + 4 * l.count - trips, SETUP_MAX_NS + 8 * l.count,
               "%s: %" PRIu64 " ns of the run outside the round trips", p->name,
               res.sim_time_ns - trips);
  cr_assert_lt(l.max - l.min, l.min / 10 + 1, "%s: a deterministic model, no queueing",
               p->name);
  /* by hand: half a round trip is the path's one-way trips, each the link's latency plus 64 B
   * and headers at 100 Gb/s (~12 ns) and the NIC model's processing: within 10 % of the links */
  cr_assert_geq(l.min, p->hops * LINK_NS, "%s: %" PRIu64 " ns < %u one-way trips", p->name,
                l.min, p->hops);
  cr_assert_lt(l.p50, p->hops * LINK_NS * 11 / 10, "%s: %" PRIu64 " ns for %u one-way trips",
               p->name, l.p50, p->hops);
}

ParameterizedTestParameters(pingpong, warmup_runs_and_is_not_recorded)
{
  return cr_make_param_array(struct path, paths, NPATHS);
}

ParameterizedTest(const struct path *p, pingpong, warmup_runs_and_is_not_recorded, .timeout = 60)
{
  (void)run_path(p, 7, 5, "0"); /* 12 round trips, 7 samples */
}

/* With a pause between the round trips: the run is the round trips, the pauses and the setup. */
Test(pingpong, interval_pauses_between_round_trips, .timeout = 60)
{
  const uint64_t pause = 10000;
  struct pp_hist_summary l = run_path(&paths[0], 20, 0, "10us");
  uint64_t busy = 2 * l.count * l.mean + (l.count - 1) * pause;
  cr_assert_leq(busy, res.sim_time_ns + 4 * l.count);
  cr_assert_lt(res.sim_time_ns + 4 * l.count - busy, SETUP_MAX_NS + 8 * l.count,
               "%" PRIu64 " ns outside round trips and pauses", res.sim_time_ns - busy);
}

/* The stream workload's latency (post -> send completion of one message on an idle path) of the
 * same path, through the CLI (one simulation per process). */
static uint64_t stream_p50(const struct path *p)
{
  char dir[64], file[128], cmd[512], text[1024];
  scratch_make(dir, sizeof dir, "pp");
  snprintf(file, sizeof file, "%s/stream.yaml", dir);
  scenario_text(text, sizeof text, p, "stream", 50, 0, "20us", "");
  scratch_write(file, text);
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --models '%s' --json", PREPOST_CLI, file,
           PREPOST_MODELS_DIR);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  static char out[1 << 20];
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  int st = pclose(f);
  scratch_remove(dir);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
  const char *lat = strstr(out, "\"latency_ns\": {");
  cr_assert_not_null(lat, "%s", out);
  const char *p50 = strstr(lat, "\"p50\": ");
  cr_assert_not_null(p50);
  return strtoull(p50 + 7, NULL, 10);
}

ParameterizedTestParameters(pingpong, half_a_round_trip_is_at_most_streams_post_to_completion)
{
  return cr_make_param_array(struct path, paths, NPATHS);
}

/* A send completes once the peer acknowledged it (a round trip of the network at least, more on
 * the rendezvous paths); half a round trip of messages is one message's way: never more. */
ParameterizedTest(const struct path *p, pingpong,
                  half_a_round_trip_is_at_most_streams_post_to_completion, .timeout = 60)
{
  uint64_t stream = stream_p50(p);
  struct pp_hist_summary l = run_path(p, 50, 0, "0");
  cr_assert_gt(stream, 0);
  cr_assert_leq(l.p50, stream, "%s: pingpong p50 %" PRIu64 " ns, stream's %" PRIu64 " ns",
                p->name, l.p50, stream);
}

/* Reply first (engine/proto/p2p/p2p_impl.h, engine/proto/ring/ring.c): the control message
 * that only releases the sender (a ring credit write) is posted after the answer the
 * application sends in the same pass, never before it, and still goes when no answer comes
 * (the last round trip); an RGET FIN rides in the answer's RTS (carried), so an RGET
 * ping-pong posts one SEND per hop, and a separate FIN only for the last, unanswered, reply. Read from the run's event log (one line per NIC event, in time order:
 * "T hostH TX REQ OPCODE psn P len L ...", "T hostH RX ...", "T hostH WC ... OPCODE STATUS len L"). */
struct order {
  uint32_t answered[2]; /* ring: arrivals whose rank's next WRITE was the answer (64 B) */
  uint32_t credit_first[2]; /* ring: ... was a credit write (8 or 32 B) */
  uint32_t credit_at_once[2]; /* ring: those posted at the arrival's time */
  uint32_t fin_behind[2]; /* rget: READs whose peer's next SEND (the FIN) came before the data */
  uint32_t reads[2];
  uint32_t sends[2]; /* rget: SENDs posted (RTS, carrying a FIN or not, and FINs) */
  bool last_fin_at_once; /* rget: rank 0's last READ completion, a SEND at the same time */
};

static void log_order(FILE *log, bool ring, struct order *o)
{
  char line[512];
  bool after_arrival[2] = {false, false}, in_read[2] = {false, false};
  uint64_t arrival_at[2] = {0, 0}, last_read_done = 0, last_send = 0;
  rewind(log);
  *o = (struct order){0};
  while (fgets(line, sizeof line, log)) {
    unsigned long long t;
    unsigned h, len = 0;
    char what[16], op[32];
    if (sscanf(line, "%llu host%u %15s", &t, &h, what) != 3 || h > 1)
      continue;
    const char *l = strstr(line, " len ");
    if (l)
      len = (unsigned)strtoul(l + 5, NULL, 10);
    if (!strcmp(what, "WC")) {
      const char *w = strstr(line, "wr_id ");
      if (!w || sscanf(w, "wr_id %*s %31s", op) != 1)
        continue;
      if (ring && !strcmp(op, "RECV_RDMA_WITH_IMM") && len == 64) {
        after_arrival[h] = true;
        arrival_at[h] = t;
      }
      if (!ring && !strcmp(op, "RDMA_READ") && h == 0)
        last_read_done = t;
      continue;
    }
    if (sscanf(line, "%*u %*s %*s %*s %31s", op) != 1)
      continue;
    if (!strcmp(what, "TX") && strstr(line, " TX REQ ")) {
      if (ring && after_arrival[h]) {
        after_arrival[h] = false;
        if (len == 64) {
          o->answered[h]++;
        } else {
          o->credit_first[h]++;
          o->credit_at_once[h] += t == arrival_at[h];
        }
      }
      if (!ring && !strcmp(op, "RDMA_READ")) {
        o->reads[h]++;
        in_read[h] = true;
      }
      if (!ring && !strcmp(op, "SEND")) {
        o->sends[h]++;
        if (h == 0)
          last_send = t;
      }
    } else if (!ring && !strcmp(what, "RX")) {
      if (strstr(line, " RX READ_RESP "))
        in_read[h] = false;
      else if (in_read[h] && !strcmp(op, "SEND")) {
        o->fin_behind[h]++;
        in_read[h] = false;
      }
    }
  }
  o->last_fin_at_once = last_read_done && last_send == last_read_done;
}

ParameterizedTestParameters(pingpong, the_answer_goes_before_the_fin_or_the_credit)
{
  static const struct path deferred[] = {paths[1], paths[3], paths[4]}; /* rget and the rings */
  return cr_make_param_array(struct path, deferred, 3);
}

ParameterizedTest(const struct path *p, pingpong, the_answer_goes_before_the_fin_or_the_credit,
                  .timeout = 60)
{
  const uint32_t n = 10;
  char text[1024];
  scenario_text(text, sizeof text, p, "pingpong", n, 0, "0", "");
  sim_parse(text);
  FILE *log = tmpfile();
  cr_assert_not_null(log);
  sim_run(log);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "%s: %s", p->name,
               pp_outcome_name(res.outcome));
  struct order o;
  bool ring = p->p2p < 0;
  log_order(log, ring, &o);
  fclose(log);
  if (ring) {
    cr_assert_eq(o.answered[1], n, "%s: rank 1 answers every ping before its credit", p->name);
    cr_assert_eq(o.answered[0], n - 1, "%s: rank 0's next ping goes before its credit", p->name);
    cr_assert_eq(o.credit_first[1], 0, "%s", p->name);
    cr_assert_eq(o.credit_first[0], 1, "%s: the last reply, unanswered: only the credit", p->name);
    cr_assert_eq(o.credit_at_once[0], 1, "%s: at the time the reply arrived", p->name);
  } else {
    cr_assert_eq(o.reads[0], n);
    cr_assert_eq(o.reads[1], n);
    cr_assert_eq(o.sends[1], n, "%s: rank 1's FINs all rode in its replies' RTS", p->name);
    cr_assert_eq(o.sends[0], n + 1, "%s: rank 0's in its next pings', but the last", p->name);
    cr_assert_eq(o.fin_behind[0], 0, "%s: no SEND but the RTS per hop", p->name);
    cr_assert(o.last_fin_at_once, "%s: the last FIN, unanswered, at the READ's completion",
              p->name);
  }
}

/* Test bug pong-stale: rank 1's third reply carries the bytes of its first; rank 0 sees it. */
Test(pingpong, a_stale_reply_is_caught, .timeout = 60)
{
  char text[1024];
  scenario_text(text, sizeof text, &paths[0], "pingpong", 10, 0, "0", "test_bugs: [pong-stale]\n");
  sim_parse(text);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_ERRORS, "%s", pp_outcome_name(res.outcome));
  cr_assert_eq(res.ranks[0].stats.corrupt, 1);
  cr_assert_eq(res.ranks[0].stats.messages_received, 9);
  cr_assert_eq(res.ranks[1].stats.corrupt, 0);
  cr_assert_eq(res.ranks[1].stats.messages_received, 10);
}

static void refused(const char *text, const char *sentence)
{
  char err[1024] = "";
  static struct pp_scenario s;
  cr_assert_neq(pp_scenario_parse(text, strlen(text), "inline.yaml", PREPOST_MODELS_DIR, &s, err,
                                  sizeof err),
                PP_OK, "accepted:\n%s", text);
  cr_assert_not_null(strstr(err, sentence), "%s", err);
}

Test(pingpong, other_rank_counts_and_patterns_are_refused)
{
  refused("ranks: 3\nworkload: {kind: pingpong}\n",
          "workload 'pingpong' runs between 2 ranks, got 3");
  refused("ranks: 4\nworkload: {kind: pingpong}\n",
          "workload 'pingpong' runs between 2 ranks, got 4");
  refused("ranks: 2\nworkload: {kind: pingpong, pattern: ring}\n",
          "workload 'pingpong' needs pattern 'pair' (rank 0 <-> rank 1), got 'ring'");
  /* the engine's own check, as a backend calls it */
  char err[256];
  sim_parse("ranks: 2\nworkload: {kind: pingpong}\n");
  struct pp_engine_cfg c = sc.sim.engine;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof err), PP_OK, "%s", err);
  c.nranks = 3;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "workload 'pingpong' runs between 2 ranks, got 3");
}

/* Memory: the busiest rank's estimate holds its 4 buffers and one peer's QP. */
Test(pingpong, mem_need_counts_four_buffers_and_one_peer)
{
  sim_parse("ranks: 2\nprotocol: ring-cts\nworkload: {kind: pingpong, size: 1MiB}\n");
  struct pp_mem_need small, big;
  struct pp_engine_cfg c = sc.sim.engine;
  pp_engine_mem_need(&c, &small);
  c.workload.size = 2u << 20;
  pp_engine_mem_need(&c, &big);
  cr_assert_eq(small.qps, 1);
  cr_assert_geq(big.bytes - small.bytes, 4u << 20, "4 buffers of 1 MiB more");
}

/* Stopped mid-run: each rank's pending operations say what it waits for (the hang report). */
Test(pingpong, a_stopped_run_says_what_each_rank_waits_for, .timeout = 60)
{
  char text[1024];
  scenario_text(text, sizeof text, &paths[1], "pingpong", 1000, 0, "0",
                "limits:\n  max_sim_time: 30us\n");
  sim_parse(text);
  sim_run(NULL);
  cr_assert_eq(res.outcome, PP_OUTCOME_TIMEOUT, "%s", pp_outcome_name(res.outcome));
  cr_assert_not_null(res.hang);
  const char *want[2] = {"waits for the reply of round trip", "waits for the ping of round trip"};
  for (uint32_t r = 0; r < 2; r++) {
    const struct pp_hang_rank *h = &res.hang->rank[r];
    bool found = false;
    for (uint32_t i = 0; i < h->nwaits; i++)
      found |= h->waits[i].kind == PP_WAIT_MESSAGE && h->waits[i].peer == 1 - r &&
               strstr(h->waits[i].what, want[r]) != NULL;
    cr_assert(found, "rank %u: no '%s' among its %u waits", r, want[r], h->nwaits);
  }
}
