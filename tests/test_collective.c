/*
 * engine/workload/collective.c: ring allreduce, allgather and broadcast, checked element by element.
 *
 * Over tests/fakefabric.c (a fake RC fabric moving real bytes, with an adversarial scheduler) for
 * the schedules, data types, odd sizes, compute delays and failures; over SimGrid for the shipped
 * ring scenarios (one simulation per Test: Criterion runs each in its own process), the slow-rank
 * experiment among them; and tools/report/report_ring.c's bandwidth figures.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prepost/engine.h"
#include "engine/core/engine_impl.h"
#include "fakefabric.h"
#include "scratch.h"

/* scenario.h's opening comment trips -Wcomment (see tools/scenario/scenario.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/report/report_ring.h"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

static struct ff F;
static char what[256];

static void fini(void)
{
  if (F.n)
    ff_fini(&F);
  memset(&F, 0, sizeof(F));
}

TestSuite(collective, .fini = fini);

static struct pp_engine_cfg cfg_of(enum pp_protocol proto, uint32_t n, enum pp_coll_op op,
                                   enum pp_dtype t, uint64_t bytes, uint32_t chunk)
{
  struct pp_engine_cfg c = {
      .nranks = n,
      .protocol = proto,
      .qp = {.min_rnr_timer = 1,
             .rnr_retry = 0,
             .timeout = 14,
             .retry_cnt = 7,
             .max_rd_atomic = 1,
             .mtu = 4096,
             .sq_depth = 16,
             .rq_depth = 8},
      .workload = {.kind = PP_WORKLOAD_COLLECTIVE,
                   .pattern = PP_PATTERN_RING,
                   .messages = 1,
                   .size = 64},
      .seed = 7,
  };
  pp_ring_params_default(pp_ring_params_of(&c));
  pp_ring_params_of(&c)->slots = 4;
  pp_ring_params_of(&c)->slot_size = 512;
  pp_coll_params_default(pp_coll_params_of(&c));
  pp_coll_params_of(&c)->op = op;
  pp_coll_params_of(&c)->dtype = t;
  pp_coll_params_of(&c)->bytes = bytes;
  pp_coll_params_of(&c)->chunk = chunk;
  pp_coll_params_of(&c)->iterations = 2;
  return c;
}

static void stats(uint32_t r, struct pp_rank_stats *st)
{
  pp_engine_stats(F.e[r], st);
}

/* Runs the fabric to the end and checks every rank's result. */
static void run_and_check(const struct pp_engine_cfg *c, bool expect_rnr_free)
{
  ff_run(&F, 5000000);
  cr_assert(ff_all_done(&F), "%s: not done after %llu steps", what,
            (unsigned long long)F.steps);
  cr_assert_eq(F.engine_errors, 0, "%s: %s", what, pp_status_name(F.last_error));
  cr_assert_eq(F.access_errors, 0, "%s", what);
  if (expect_rnr_free)
    cr_assert_eq(F.rnr, 0, "%s: %llu RNRs", what, (unsigned long long)F.rnr);
  size_t esz = pp_dtype_size(pp_coll_params_of(c)->dtype);
  uint64_t count = pp_coll_params_of(c)->bytes / esz;
  for (uint32_t r = 0; r < c->nranks; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    cr_assert(st.coll.active, "%s", what);
    cr_assert_eq(st.coll.iterations_done, pp_coll_params_of(c)->iterations, "%s rank %u", what, r);
    cr_assert_eq(st.coll.elements_wrong, 0, "%s rank %u: %llu wrong", what, r,
                 (unsigned long long)st.coll.elements_wrong);
    cr_assert_eq(st.coll.elements_checked, count * pp_coll_params_of(c)->iterations, "%s rank %u", what, r);
    cr_assert_eq(st.corrupt, 0, "%s rank %u", what, r);
    cr_assert_eq(st.ring.violations, 0, "%s rank %u", what, r);
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
      cr_assert_eq(st.status_counts[k], 0, "%s rank %u: %s", what, r,
                   pp_wc_status_name((enum pp_wc_status)k));
  }
}

/* ================================================================ parameters */

Test(collective, names_and_bus_factors)
{
  cr_assert_str_eq(pp_coll_op_name(PP_COLL_ALLREDUCE), "allreduce");
  cr_assert_str_eq(pp_coll_op_name(PP_COLL_ALLGATHER), "allgather");
  cr_assert_str_eq(pp_coll_op_name(PP_COLL_BROADCAST), "broadcast");
  cr_assert_str_eq(pp_coll_op_name((enum pp_coll_op)9), "?");
  cr_assert_eq(pp_coll_op_from_name("broadcast"), PP_COLL_BROADCAST);
  cr_assert_eq(pp_coll_op_from_name("reduce"), -1);
  static const char *const types[] = {"float32", "float64", "int32", "int64"};
  static const size_t sizes[] = {4, 8, 4, 8};
  for (int i = 0; i < 4; i++) {
    cr_assert_str_eq(pp_dtype_name((enum pp_dtype)i), types[i]);
    cr_assert_eq(pp_dtype_from_name(types[i]), i);
    cr_assert_eq(pp_dtype_size((enum pp_dtype)i), sizes[i]);
  }
  cr_assert_str_eq(pp_dtype_name((enum pp_dtype)9), "?");
  cr_assert_eq(pp_dtype_size((enum pp_dtype)9), 0);
  cr_assert_eq(pp_dtype_from_name("bfloat16"), -1);
  /* nccl-tests: allreduce 2(n-1)/n, allgather (n-1)/n, broadcast 1 */
  cr_assert_float_eq(pp_coll_bus_factor(PP_COLL_ALLREDUCE, 8), 1.75, 1e-12);
  cr_assert_float_eq(pp_coll_bus_factor(PP_COLL_ALLREDUCE, 2), 1.0, 1e-12);
  cr_assert_float_eq(pp_coll_bus_factor(PP_COLL_ALLGATHER, 8), 0.875, 1e-12);
  cr_assert_float_eq(pp_coll_bus_factor(PP_COLL_BROADCAST, 64), 1.0, 1e-12);
  cr_assert_float_eq(pp_coll_bus_factor(PP_COLL_ALLREDUCE, 0), 0.0, 1e-12);
  cr_assert_float_eq(pp_coll_bus_factor((enum pp_coll_op)9, 4), 0.0, 1e-12);
  cr_assert_str_eq(pp_workload_name(PP_WORKLOAD_COLLECTIVE), "collective");
  cr_assert_str_eq(pp_collective_ops.name, "collective");
}

Test(collective, params_check)
{
  struct pp_coll_params p;
  pp_coll_params_default(&p);
  char err[256] = "";
  cr_assert_eq(pp_coll_params_check(&p, 4, err, sizeof(err)), PP_OK, "%s", err);
  static const struct {
    const char *word;
    int field;
    uint64_t value;
  } bad[] = {
      {"op", 0, 7},          {"datatype", 1, 7},   {"size", 2, 0},      {"size", 2, 6},
      {"size", 2, 2ull << 30}, {"allgather", 3, 0}, {"iterations", 4, 0}, {"warmup", 5, 1},
      {"root", 6, 4},        {"chunk", 7, 2},      {"chunk", 7, 0},     {"window", 8, 0},
      {"staging", 9, 0},     {"slow_from", 10, 0},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    pp_coll_params_default(&p);
    switch (bad[i].field) {
    case 0: p.op = (enum pp_coll_op)bad[i].value; break;
    case 1: p.dtype = (enum pp_dtype)bad[i].value; break;
    case 2: p.bytes = bad[i].value; break;
    case 3: p.op = PP_COLL_ALLGATHER; p.bytes = 4 * 5; break;
    case 4: p.iterations = 0; break;
    case 5: p.iterations = 1; p.warmup = 1; break;
    case 6: p.root = 4; break;
    case 7: p.chunk = (uint32_t)bad[i].value; break;
    case 8: p.window = 0; break;
    case 9: p.window = PP_MAX_QUEUE_DEPTH; p.chunk = 1u << 20; break;
    default: p.slow_from = 5; p.slow_until = 4; break;
    }
    err[0] = '\0';
    cr_assert_eq(pp_coll_params_check(&p, 4, err, sizeof(err)), PP_INVALID, "case %zu", i);
    cr_assert_not_null(strstr(err, bad[i].word), "case %zu: '%s' lacks '%s'", i, err,
                       bad[i].word);
  }
  /* through the engine's check, for the collective workload only */
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 4, PP_COLL_ALLREDUCE, PP_DTYPE_F32, 4096,
                                  1024);
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "%s", err);
  pp_coll_params_of(&c)->root = 9;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_INVALID);
  cr_assert_not_null(strstr(err, "root"), "%s", err);
  c.workload.kind = PP_WORKLOAD_STREAM;
  cr_assert_eq(pp_engine_cfg_check(&c, err, sizeof(err)), PP_OK, "the stream ignores it: %s", err);
}

/* ================================================================ results over the fake fabric */

Test(collective, every_op_and_type_over_both_ring_protocols, .timeout = 120)
{
  static const uint32_t ranks[] = {2, 3, 5};
  unsigned runs = 0;
  for (int proto = PP_PROTO_RING_CREDITS; proto <= PP_PROTO_RING_CTS; proto++)
    for (int op = 0; op < PP_COLL_OP_COUNT; op++)
      for (int t = 0; t < PP_DTYPE_COUNT; t++)
        for (size_t k = 0; k < 3; k++) {
          uint32_t n = ranks[k];
          size_t esz = pp_dtype_size((enum pp_dtype)t);
          /* blocks that are not multiples of the chunk, chunks that are not of the slot */
          uint64_t bytes = esz * n * (97 + 13 * k);
          struct pp_engine_cfg c = cfg_of((enum pp_protocol)proto, n, (enum pp_coll_op)op,
                                          (enum pp_dtype)t, bytes, (uint32_t)esz * 40);
          pp_ring_params_of(&c)->channels = 1 + (uint32_t)k;
          pp_coll_params_of(&c)->root = (uint32_t)(k + (size_t)t) % n;
          pp_coll_params_of(&c)->window = 1 + (uint32_t)t;
          snprintf(what, sizeof(what), "%s %s %s n %u", pp_protocol_name(proto),
                   pp_coll_op_name((enum pp_coll_op)op), pp_dtype_name((enum pp_dtype)t), n);
          ff_init(&F, &c, 11 + runs);
          run_and_check(&c, true);
          fini();
          runs++;
        }
  cr_assert_eq(runs, 2 * 3 * 4 * 3);
}

Test(collective, message_counts_follow_the_ring_schedule)
{
  /* allreduce of 3 ranks, 3 KiB float32 = 3 blocks of 256 elements, chunk 100 elements:
   * 3 slices (100, 100, 56) x 2(n-1) = 4 steps = 12 messages each way per rank */
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 3, PP_COLL_ALLREDUCE, PP_DTYPE_F32,
                                  3 * 1024, 400);
  pp_coll_params_of(&c)->iterations = 1;
  snprintf(what, sizeof(what), "allreduce 3 ranks");
  ff_init(&F, &c, 1);
  run_and_check(&c, true);
  for (uint32_t r = 0; r < 3; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    cr_assert_eq(st.messages_sent, 12, "rank %u", r);
    cr_assert_eq(st.messages_received, 12, "rank %u", r);
    /* each rank sends 2(n-1)/n of the buffer */
    cr_assert_eq(st.bytes_sent, 2 * 2 * 1024, "rank %u", r);
  }
  fini();
  /* broadcast from rank 2 of 4: the root only sends, its left neighbour only receives */
  c = cfg_of(PP_PROTO_RING_CTS, 4, PP_COLL_BROADCAST, PP_DTYPE_I32, 1000, 256);
  pp_coll_params_of(&c)->root = 2;
  pp_coll_params_of(&c)->iterations = 1;
  snprintf(what, sizeof(what), "broadcast root 2");
  ff_init(&F, &c, 2);
  run_and_check(&c, true);
  for (uint32_t r = 0; r < 4; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    cr_assert_eq(st.messages_received, r == 2 ? 0 : 4, "rank %u", r);
    cr_assert_eq(st.messages_sent, r == 1 ? 0 : 4, "rank %u", r);
    cr_assert_eq(st.ring.nconns, r == 2 || r == 1 ? 1 : 2, "rank %u talks to its users only", r);
  }
}

Test(collective, fewer_elements_than_ranks)
{
  /* 2 elements over 5 ranks: three blocks are empty, their steps carry nothing */
  for (int op = PP_COLL_ALLREDUCE; op <= PP_COLL_BROADCAST; op += 2) {
    struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 5, (enum pp_coll_op)op, PP_DTYPE_I64,
                                    16, 8);
    snprintf(what, sizeof(what), "%s of 2 elements over 5", pp_coll_op_name((enum pp_coll_op)op));
    ff_init(&F, &c, 3);
    run_and_check(&c, true);
    fini();
  }
}

Test(collective, naive_protocol_works_but_rnrs)
{
  /* the same collective over SENDs: one receive posted at a time, a sender that does not wait */
  struct pp_engine_cfg c = cfg_of(PP_PROTO_NAIVE, 3, PP_COLL_ALLREDUCE, PP_DTYPE_F64, 3 * 8 * 300,
                                  8 * 20);
  pp_coll_params_of(&c)->window = 1;
  c.qp.rnr_retry = 7;
  snprintf(what, sizeof(what), "naive allreduce");
  ff_init(&F, &c, 5);
  F.exec_weight = 6;
  run_and_check(&c, false);
  cr_assert_gt(F.rnr, 0, "without flow control the receiver is not always ready");
}

Test(collective, a_flipped_byte_is_found)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 3, PP_COLL_ALLREDUCE, PP_DTYPE_I32,
                                  3 * 4 * 200, 4 * 50);
  pp_coll_params_of(&c)->iterations = 1;
  ff_init(&F, &c, 9);
  F.flip_at = 5;
  ff_run(&F, 1000000);
  cr_assert(ff_all_done(&F));
  uint64_t wrong = 0, corrupt = 0;
  for (uint32_t r = 0; r < 3; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    wrong += st.coll.elements_wrong;
    corrupt += st.corrupt;
  }
  cr_assert_gt(wrong, 0, "one flipped byte in one piece makes wrong sums");
  cr_assert_gt(corrupt, 0, "the iteration counts as corrupt");
}

Test(collective, unchecked_runs_check_nothing)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CTS, 2, PP_COLL_ALLGATHER, PP_DTYPE_F32, 800, 80);
  pp_coll_params_of(&c)->check = false;
  ff_init(&F, &c, 4);
  ff_run(&F, 1000000);
  cr_assert(ff_all_done(&F));
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert_eq(st.coll.elements_checked, 0);
  cr_assert_eq(st.coll.iterations_done, 2);
}

/* ================================================================ compute and the slow rank */

Test(collective, compute_time_paces_the_ring_and_the_slow_window)
{
  /* 4 ranks, allreduce, 8 pieces received per rank per iteration; rank 1 spends 50 us on each
   * during iterations 2 and 3 only */
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 4, PP_COLL_ALLREDUCE, PP_DTYPE_F32,
                                  4 * 4 * 128, 4 * 64);
  pp_coll_params_of(&c)->iterations = 6;
  pp_coll_params_of(&c)->compute_ns = 1000;
  pp_coll_params_of(&c)->slow_ranks = 1u << 1;
  pp_coll_params_of(&c)->slow_compute_ns = 50000;
  pp_coll_params_of(&c)->slow_from = 2;
  pp_coll_params_of(&c)->slow_until = 4;
  pp_coll_params_of(&c)->window = 1; /* one piece computed at a time, the next ones wait in the slots */
  pp_ring_params_of(&c)->slots = 2;
  snprintf(what, sizeof(what), "slow rank");
  ff_init(&F, &c, 6);
  F.max_step_ns = 10;
  run_and_check(&c, true);
  uint64_t end[6] = {0};
  for (uint32_t r = 0; r < 4; r++) {
    struct pp_rank_stats st;
    stats(r, &st);
    for (int k = 0; k < 6; k++)
      if (st.coll.iter_end_ns[k] > end[k])
        end[k] = st.coll.iter_end_ns[k];
  }
  uint64_t d[6];
  for (int k = 0; k < 6; k++)
    d[k] = end[k] - (k ? end[k - 1] : 0);
  /* 2 slices x 6 steps = 12 pieces per iteration, at 50 us each on the slow rank */
  cr_assert_geq(d[2], 11 * 50000, "the slow rank paces iteration 2: %llu ns",
                (unsigned long long)d[2]);
  cr_assert_geq(d[3], 11 * 50000);
  cr_assert_lt(d[1], 12 * 50000 / 4, "fast before: %llu ns", (unsigned long long)d[1]);
  cr_assert_lt(d[5], 12 * 50000 / 4, "fast again after: %llu ns", (unsigned long long)d[5]);
  cr_assert_geq(d[5], 12 * 1000, "every rank still computes 1 us per piece");
  struct pp_rank_stats st;
  stats(0, &st);
  /* rank 0 sends to rank 1, the slow one: it ran out of credit */
  uint64_t stall = 0;
  for (uint32_t k = 0; k < st.ring.nconns; k++)
    if (st.ring.conn[k].peer == 1)
      stall = st.ring.conn[k].credit_stall_ns;
  cr_assert_gt(stall, 0, "head stopped moving upstream of the slow rank");
}

/* ================================================================ failures */

Test(collective, a_broken_connection_ends_the_collective_with_errors)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 3, PP_COLL_ALLREDUCE, PP_DTYPE_F32,
                                  3 * 4 * 1000, 4 * 100);
  ff_init(&F, &c, 8);
  for (int i = 0; i < 200; i++)
    ff_step(&F);
  ff_break_qp(&F, 0, ff_qp_at(&F, 0, 0)->qpn, PP_WC_RETRY_EXC_ERR);
  ff_run(&F, 1000000);
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert(st.done, "rank 0 ends: its outstanding messages all came back");
  cr_assert_gt(st.status_counts[PP_WC_RETRY_EXC_ERR] + st.status_counts[PP_WC_WR_FLUSH_ERR], 0);
  cr_assert_lt(st.coll.iterations_done, 2);
}

Test(collective, bogus_completions_are_rejected)
{
  struct pp_engine_cfg c = cfg_of(PP_PROTO_RING_CREDITS, 2, PP_COLL_ALLREDUCE, PP_DTYPE_F32, 4096,
                                  1024);
  ff_init(&F, &c, 1);
  struct pp_engine *e = F.e[0];
  cr_assert_eq(e->appops->send_done(e, 0, 99ull << 40, PP_WC_SUCCESS), PP_INVALID, "iteration");
  cr_assert_eq(e->appops->send_done(e, 0, 500, PP_WC_SUCCESS), PP_INVALID, "never sent");
  cr_assert_eq(e->appops->recv_done(e, 0, 500, PP_WC_SUCCESS, 1, 0, 1024), PP_INVALID);
  cr_assert_eq(e->appops->recv_done(e, 0, 7ull << 40, PP_WC_SUCCESS, 1, 0, 1024), PP_INVALID);
  cr_assert_eq(e->appops->on_timer(e, 0, 77), PP_INVALID, "not a compute timer");
  cr_assert_eq(e->appops->on_timer(e, 0, 1), PP_INVALID, "no compute timer armed");
  /* a wrong length from a protocol is a corrupt message */
  cr_assert_eq(e->appops->recv_done(e, 0, 0, PP_WC_SUCCESS, 1, 0, 3), PP_OK);
  struct pp_rank_stats st;
  stats(0, &st);
  cr_assert_eq(st.corrupt, 1);
}

/* ================================================================ bandwidth figures */

Test(collective, figures_the_nccl_tests_way)
{
  static struct pp_sim_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.engine.workload.kind = PP_WORKLOAD_COLLECTIVE;
  pp_coll_params_default(pp_coll_params_of(&cfg.engine));
  pp_coll_params_of(&cfg.engine)->bytes = 1 << 20;
  pp_coll_params_of(&cfg.engine)->iterations = 3;
  struct pp_rank_result ranks[4];
  memset(ranks, 0, sizeof(ranks));
  for (int r = 0; r < 4; r++) {
    struct pp_coll_stats *s = &ranks[r].stats.coll;
    s->active = true;
    s->iterations_done = 3;
    s->start_ns = 100;
    s->iter_end_ns[0] = 1000000 + 10 * r;
    s->iter_end_ns[1] = 2000000 + 10 * r;
    s->iter_end_ns[2] = 3000000 + 10 * r;
    s->end_ns = 3000000 + 10 * r;
    s->elements_checked = 5;
  }
  struct pp_run_result res = {.nranks = 4, .ranks = ranks};
  struct pp_coll_figures f;
  cr_assert(pp_coll_figures(&cfg, &res, &f));
  cr_assert_eq(f.iterations, 3);
  cr_assert_eq(f.time_ns, 3000030 - 100, "first start to the last rank's end");
  double alg = (double)(1 << 20) * 8 * 3 / (3000030 - 100);
  cr_assert_float_eq(f.algbw_gbps, alg, 1e-9);
  cr_assert_float_eq(f.busbw_gbps, alg * 1.5, 1e-9, "allreduce of 4: x 2(n-1)/n");
  cr_assert_eq(f.elements_checked, 20);
  pp_coll_params_of(&cfg.engine)->warmup = 1;
  cr_assert(pp_coll_figures(&cfg, &res, &f));
  cr_assert_eq(f.iterations, 2);
  cr_assert_eq(f.time_ns, 3000030 - 1000030, "from the end of the warmup");
  pp_coll_params_of(&cfg.engine)->op = PP_COLL_ALLGATHER;
  cr_assert(pp_coll_figures(&cfg, &res, &f));
  cr_assert_float_eq(f.busbw_gbps, f.algbw_gbps * 0.75, 1e-9);
  ranks[2].stats.coll.iterations_done = 2;
  cr_assert_not(pp_coll_figures(&cfg, &res, &f), "a rank fell short: no measurement");
  cfg.engine.workload.kind = PP_WORKLOAD_STREAM;
  cr_assert_not(pp_coll_figures(&cfg, &res, &f));
  /* the JSON: keys present, balanced */
  cfg.engine.workload.kind = PP_WORKLOAD_COLLECTIVE;
  cfg.engine.protocol = PP_PROTO_RING_CTS;
  pp_ring_params_default(pp_ring_params_of(&cfg.engine));
  ranks[2].stats.coll.iterations_done = 3;
  ranks[0].stats.ring.nconns = 1;
  ranks[0].stats.ring.conn[0] = (struct pp_ring_conn_stats){.peer = 1, .credit_stall_ns = 1234};
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  cr_assert_not_null(out);
  fputc('{', out);
  fputs("\"x\": 1", out);
  pp_report_ring_json(out, &cfg, &res);
  fputc('}', out);
  pp_report_ring_table(out, &cfg, &res);
  fclose(out);
  for (const char *k = "\"algbw_gbps\"\0\"busbw_gbps\"\0\"iteration_busbw_gbps\"\0\"connections\"\0"
                       "\"credit_stall_ns\": 1234\0\"slots\": 8\0\"op\": \"allgather\"\0";
       *k; k += strlen(k) + 1)
    cr_assert_not_null(strstr(text, k), "no %s in\n%s", k, text);
  int depth = 0;
  for (const char *p = text; *p && *p != '\n'; p++)
    depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
  cr_assert_eq(depth, 0, "%s", text);
  cr_assert_not_null(strstr(text, "busbw"), "the table line");
  free(text);
}

/* ================================================================ the shipped scenarios */

static struct pp_scenario sc;
static struct pp_run_result res;

static void load(const char *name)
{
  char path[PP_PATH_MAX], err[1024] = "";
  snprintf(path, sizeof(path), "%s/scenarios/%s.yaml", PREPOST_MODELS_DIR, name);
  cr_assert_eq(pp_scenario_load(path, PREPOST_MODELS_DIR, &sc, err, sizeof(err)), PP_OK, "%s",
               err);
}

/* Runs sc (loaded, maybe made smaller: the test suite runs under ASan too). */
static void simulate(const char *name)
{
  char err[1024] = "";
  enum pp_status s = pp_sim_run(&sc.sim, NULL, &res, err, sizeof(err));
  cr_assert_eq(s, PP_OK, "%s: %s", name, err);
  cr_assert_eq(res.outcome, PP_OUTCOME_COMPLETED, "%s: %s", name, pp_outcome_name(res.outcome));
  for (uint32_t r = 0; r < res.nranks; r++) {
    const struct pp_rank_result *rr = &res.ranks[r];
    cr_assert_eq(rr->nic.rnr_naks_sent + rr->nic.rnr_naks_received, 0, "rank %u", r);
    for (int k = 1; k < PP_WC_STATUS_COUNT; k++)
      cr_assert_eq(rr->stats.status_counts[k], 0, "rank %u", r);
    cr_assert_eq(rr->stats.corrupt, 0);
    cr_assert_eq(rr->stats.coll.elements_wrong, 0);
    cr_assert_eq(rr->stats.ring.violations, 0);
    cr_assert_eq(rr->stats.coll.iterations_done, pp_coll_params_of(&sc.sim.engine)->iterations);
  }
}

static void sim_fini(void)
{
  pp_run_result_free(&res);
}

Test(collective, sim_slow_rank_stalls_without_error_and_recovers, .fini = sim_fini,
     .timeout = 120)
{
  load("ring-slow-rank");
  /* a quarter of the data, 9 iterations of which 3..5 slow: the same shape, faster to simulate */
  struct pp_coll_params *cp = pp_coll_params_of(&sc.sim.engine);
  cp->bytes /= 4;
  cp->iterations = 9;
  cp->slow_from = 3;
  cp->slow_until = 6;
  simulate("ring-slow-rank");
  const struct pp_coll_params *p = pp_coll_params_of(&sc.sim.engine);
  uint64_t end[PP_COLL_ITER_LOG] = {0}, start = UINT64_MAX;
  for (uint32_t r = 0; r < res.nranks; r++) {
    const struct pp_coll_stats *s = &res.ranks[r].stats.coll;
    if (s->start_ns < start)
      start = s->start_ns;
    for (uint32_t k = 0; k < p->iterations; k++)
      if (s->iter_end_ns[k] > end[k])
        end[k] = s->iter_end_ns[k];
  }
  double busbw[PP_COLL_ITER_LOG];
  for (uint32_t k = 0; k < p->iterations; k++)
    busbw[k] = (double)p->bytes * 8 / (double)(end[k] - (k ? end[k - 1] : start)) * 1.75;
  double before = busbw[p->slow_from - 1], after = busbw[p->iterations - 1];
  for (uint32_t k = p->slow_from; k < p->slow_until; k++)
    cr_assert_lt(busbw[k], before / 2, "iteration %u at %.1f Gb/s, before %.1f", k, busbw[k],
                 before);
  /* the ring runs at the slow rank's pace: 56 pieces of 20 us per iteration */
  uint64_t pieces = 2 * (8 - 1) * (p->bytes / 8 / p->chunk);
  double paced = (double)p->bytes * 8 / (double)(pieces * p->slow_compute_ns) * 1.75;
  cr_assert_float_eq(busbw[p->slow_from + 1], paced, paced * 0.02, "%.2f vs %.2f Gb/s",
                     busbw[p->slow_from + 1], paced);
  cr_assert_gt(after, before * 0.95, "recovered: %.1f Gb/s after, %.1f before", after, before);
  /* head stopped moving upstream: rank 2's connection to the slow rank 3 stalled */
  const struct pp_ring_stats *up = &res.ranks[2].stats.ring;
  uint64_t stall = 0;
  for (uint32_t k = 0; k < up->nconns; k++)
    if (up->conn[k].peer == 3)
      stall = up->conn[k].credit_stall_ns;
  /* over 0.5 ms with 58-byte headers, 0.496 ms with the wire's 82 bytes per packet */
  cr_assert_gt(stall, 450000, "rank 2 -> 3 stalled %llu ns", (unsigned long long)stall);
  const struct pp_ring_stats *far = &res.ranks[6].stats.ring;
  for (uint32_t k = 0; k < far->nconns; k++)
    cr_assert_lt(far->conn[k].credit_stall_ns, stall / 10, "the others wait for data, not credit");
}

Test(collective, sim_allreduce_8_ranks_cts, .fini = sim_fini, .timeout = 120)
{
  load("ring-allreduce-8-1m");
  pp_coll_params_of(&sc.sim.engine)->iterations = 2;
  simulate("ring-allreduce-8-1m");
  struct pp_coll_figures f;
  cr_assert(pp_coll_figures(&sc.sim, &res, &f));
  cr_assert_eq(f.iterations, 1, "2 iterations, 1 warmup");
  cr_assert_gt(f.busbw_gbps, 50);
  cr_assert_lt(f.busbw_gbps, 100);
}

Test(collective, sim_allreduce_64_ranks_4k, .fini = sim_fini, .timeout = 120)
{
  load("ring-allreduce-64-4k");
  pp_coll_params_of(&sc.sim.engine)->iterations = 1;
  simulate("ring-allreduce-64-4k");
  cr_assert_eq(res.nranks, 64);
  for (uint32_t r = 0; r < 64; r++)
    cr_assert_eq(res.ranks[r].stats.messages_sent, 2 * 63, "rank %u", r);
}

Test(collective, cli_json_has_the_ring_keys, .timeout = 120)
{
  char dir[64], path[128], cmd[2048];
  scratch_make(dir, sizeof(dir), "coll");
  snprintf(path, sizeof(path), "%s/ar.yaml", dir);
  scratch_write(path, "name: cli-ring\nranks: 3\nprotocol: ring-cts\nworkload: {kind: collective}\n"
                      "collective: {size: 12KiB, chunk: 1KiB, iterations: 2}\n"
                      "ring: {slots: 4, slot_size: 512, channels: 2}\nqp: {rnr_retry: 0}\n");
  snprintf(cmd, sizeof(cmd), "'%s' run '%s' --json", PREPOST_CLI, path);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  static char out[1 << 16];
  size_t n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  scratch_remove(dir);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
  for (const char *k = "\"algbw_gbps\": \0\"busbw_gbps\": \0\"collective\": {\0\"ring\": {\0"
                       "\"credit_stall_ns\": \0\"connections\": [\0\"rnr_naks\": 0\0";
       *k; k += strlen(k) + 1)
    cr_assert_not_null(strstr(out, k), "no %s in\n%s", k, out);
}
