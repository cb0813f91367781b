/*
 * prepost replay: exact replay of recorded simulated runs matches; a trace whose outputs differ
 * from what the engine does is reported at the first divergence (rank, record, expected vs
 * produced); --until/--at stop and dump the engines' state; --sim re-runs with what-ifs.
 * Everything through the CLI (one simulation per process).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prepost/trace.h"
#include "scratch.h"

static char dir[64];
static char *out; /* stdout of the last cli() */

static void setup(void)
{
  scratch_make(dir, sizeof(dir), "replay");
}

static void teardown(void)
{
  free(out);
  out = NULL;
  scratch_remove(dir);
}

TestSuite(replay, .init = setup, .fini = teardown);

/* Runs `prepost ARGS` in the scratch directory; returns its exit code, stdout in `out`. */
static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli(const char *fmt, ...)
{
  char args[2048], cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s > out.txt 2> err.txt < /dev/null", dir,
           PREPOST_CLI, args);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s", cmd);
  free(out);
  char path[128];
  snprintf(path, sizeof(path), "%s/out.txt", dir);
  out = scratch_slurp(path, NULL);
  return WEXITSTATUS(st);
}

static void record(const char *scenario, const char *trace)
{
  int rc = cli("run " PREPOST_MODELS_DIR "/scenarios/%s.yaml --trace %s", scenario, trace);
  cr_assert(rc == 0 || rc == 1, "run %s: exit %d", scenario, rc);
}

Test(replay, recorded_runs_replay_exactly, .timeout = 120)
{
  /* naive, the NCCL-style ring (credits written into polled memory), MPI-style eager and
   * rendezvous (headers read from received buffers, RDMA READ into registration-cache MRs),
   * a script workload */
  const char *scenarios[] = {"rnr-slow-consumer", "rnr-slow-consumer-retry0", "lossy",
                             "rnr-slow-consumer-ring", "rnr-slow-consumer-eager",
                             "rnr-slow-consumer-rndv", "p2p-script"};
  for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
    record(scenarios[i], "t.trace");
    cr_assert_eq(cli("replay t.trace"), 0, "%s: %s", scenarios[i], out);
    cr_assert(strstr(out, "replay matched: "), "%s: %s", scenarios[i], out);
  }
}

/* A trace holds the heads of received messages, not their payload: the replay moves the
 * payload from the replayed senders, so healthy receivers count as healthy (they counted every
 * message as corrupt), a ring allreduce's data-dependent sends match, and a traffic workload's
 * registration-cache addresses (buffers now page-aligned) replay exactly. The replayed
 * statistics are compared with the recorded end of the run, in a note when they differ. */
Test(replay, payloads_move_between_the_replayed_engines, .timeout = 180)
{
  struct {
    const char *scenario, *want;
  } c[] = {{"fast-consumer", "sent 0 received 200 corrupt 0 "},
           {"rnr-slow-consumer-rndv", "received 200 corrupt 0 "},
           {"rnr-slow-consumer-ring", "received 200 corrupt 0 "},
           {"ring-allreduce-8-1m", "corrupt 0 "},
           {"p2p-traffic", "corrupt 0 "}};
  for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
    record(c[i].scenario, "t.trace");
    cr_assert_eq(cli("replay t.trace"), 0, "%s: %s", c[i].scenario, out);
    cr_assert(strstr(out, "replay matched: "), "%s: %s", c[i].scenario, out);
    cr_assert_null(strstr(out, "note:"), "%s: %s", c[i].scenario, out);
    cr_assert_eq(cli("replay t.trace --at 1000s"), 0, "%s", out);
    cr_assert(strstr(out, c[i].want), "%s: %s", c[i].scenario, out);
    for (const char *p = out; (p = strstr(p, " corrupt ")); p++)
      cr_assert(!strncmp(p, " corrupt 0 ", 11), "%s: %s", c[i].scenario, out);
  }
}

Test(replay, until_dumps_the_state, .timeout = 60)
{
  record("rnr-slow-consumer", "t.trace");
  cr_assert_eq(cli("replay t.trace --at 1ms"), 0, "%s", out);
  cr_assert(strstr(out, "replay stopped before record"), "%s", out);
  cr_assert(strstr(out, "rank 0: "), "%s", out);
  cr_assert(strstr(out, "qp 0x100 -> rank 1: RTS"), "QP state: %s", out);
  cr_assert(strstr(out, " sends outstanding"), "%s", out);
  cr_assert(strstr(out, "    send wr_id 0x8000"), "the oldest pending sends: %s", out);
  cr_assert(strstr(out, "stream: sending to rank 1"), "the workload's state: %s", out);
  cr_assert(strstr(out, "stream: receiving from rank 0"), "%s", out);
  cr_assert(strstr(out, "slow consumer"), "%s", out);
  cr_assert(strstr(out, "timers: 8 pending"), "the slow consumer holds 8 buffers: %s", out);
  cr_assert_eq(cli("replay t.trace --until 30 --rank 1"), 0);
  cr_assert(strstr(out, "\nrank 1: "), "%s", out);
  cr_assert_null(strstr(out, "\nrank 0: "), "--rank 1 dumps rank 1 only: %s", out);
  cr_assert_eq(cli("replay t.trace --rank 5"), 2, "no rank 5");
}

Test(replay, qp_error_shows_in_the_state, .timeout = 60)
{
  record("rnr-slow-consumer-retry0", "t.trace");
  cr_assert_eq(cli("replay t.trace --at 999999999ns"), 0);
  cr_assert(strstr(out, "qp 0x100 -> rank 1: ERR"), "the sender's QP died: %s", out);
  cr_assert(strstr(out, "RNR_RETRY_EXC_ERR=1"), "%s", out);
}

/* A trace whose header says 8 messages while the recorded engines ran with 3: the receiver
 * pre-posts min(rq_depth, messages) receives, so the replayed one posts a fourth receive the
 * trace does not have. */
static int file_sink(void *ctx, const void *buf, size_t len)
{
  return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

static int f_ok(void)
{
  return PP_OK;
}
static uint32_t keys, qps;
static int f_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  (void)nic;
  keys++;
  *mr = (struct pp_mr){(uint64_t)(uintptr_t)addr, length, 0x100 + keys, 0x200 + keys, access};
  return f_ok();
}
static int f_dereg_mr(void *n, const struct pp_mr *m)
{
  (void)n;
  (void)m;
  return f_ok();
}
static int f_create_srq(void *n, const struct pp_srq_init_attr *a, uint32_t *s)
{
  (void)n;
  (void)a;
  *s = 1;
  return f_ok();
}
static int f_modify_srq(void *n, uint32_t s, uint32_t l)
{
  (void)n;
  (void)s;
  (void)l;
  return f_ok();
}
static int f_destroy(void *n, uint32_t q)
{
  (void)n;
  (void)q;
  return f_ok();
}
static int f_create_qp(void *n, const struct pp_qp_init_attr *a, uint32_t *q)
{
  (void)n;
  (void)a;
  *q = 0x100 + qps++;
  return f_ok();
}
static int f_modify_qp(void *n, uint32_t q, const struct pp_qp_attr *a, unsigned m)
{
  (void)n;
  (void)q;
  (void)a;
  (void)m;
  return f_ok();
}
static int f_post_send(void *n, uint32_t q, const struct pp_send_wr *w)
{
  (void)n;
  (void)q;
  (void)w;
  return f_ok();
}
static int f_post_recv(void *n, uint32_t q, const struct pp_recv_wr *w)
{
  (void)n;
  (void)q;
  (void)w;
  return f_ok();
}
static int f_query(void *n, struct pp_nic_counters *c)
{
  (void)n;
  *c = (struct pp_nic_counters){0};
  return f_ok();
}
static const struct pp_nic_ops fake_ops = {
    .name = "fake", .reg_mr = f_reg_mr, .dereg_mr = f_dereg_mr, .create_srq = f_create_srq,
    .modify_srq = f_modify_srq, .destroy_srq = f_destroy, .create_qp = f_create_qp,
    .modify_qp = f_modify_qp, .destroy_qp = f_destroy, .post_send = f_post_send,
    .post_recv = f_post_recv, .post_srq_recv = f_post_recv, .query_counters = f_query,
};

Test(replay, first_divergence_is_named)
{
  char path[128];
  snprintf(path, sizeof(path), "%s/bad.trace", dir);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  struct pp_engine_cfg cfg = {
      .nranks = 2, .protocol = PP_PROTO_NAIVE,
      .qp = {.min_rnr_timer = 1, .rnr_retry = 7, .timeout = 14, .retry_cnt = 7,
             .max_rd_atomic = 1, .mtu = 1024, .sq_depth = 4, .rq_depth = 4},
      .workload = {.kind = PP_WORKLOAD_STREAM, .pattern = PP_PATTERN_PAIR, .messages = 8,
                   .size = 32},
      .seed = 5};
  struct pp_trace_info info = {.version = "t", .backend = "fake", .scenario = "bad",
                               .nranks = 2, .capture_bytes = 64, .snapshot_max = 4096};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(file_sink, f, &info, &w), PP_OK);
  cr_assert_eq(pp_trace_kv_engine_cfg(w, &cfg), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  struct pp_engine_cfg ran = cfg;
  ran.workload.messages = 3; /* what the recorded engines really used */
  struct pp_trace_rank *t[2];
  struct pp_engine *e[2];
  for (uint32_t r = 0; r < 2; r++) {
    t[r] = pp_trace_rank_create(w, r);
    ran.rank = r;
    cr_assert_eq(pp_tr_engine_create(t[r], 0, &ran, &fake_ops, NULL, &e[r]), PP_OK);
  }
  for (uint32_t r = 0; r < 2; r++) {
    pp_tr_engine_destroy(t[r], e[r], 10);
    pp_trace_rank_destroy(t[r]);
  }
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  fclose(f);
  cr_assert_eq(cli("replay bad.trace"), 1, "%s", out);
  cr_assert(strstr(out, "replay diverged at rank 1, record "), "%s", out);
  cr_assert(strstr(out, "while replaying record "), "%s", out);
  cr_assert(strstr(out, "(create at 0 ns)"), "%s", out);
  cr_assert(strstr(out, "  expected: #"), "%s", out);
  cr_assert(strstr(out, "  produced: post_recv qp 0x"), "%s", out);
  cr_assert(strstr(out, " wr_id 0x3 "), "the fourth receive: %s", out);
  cr_assert(strstr(out, "rank 1: "), "the state at the divergence: %s", out);
}

Test(replay, sim_what_if, .timeout = 120)
{
  record("rnr-slow-consumer-retry0", "t.trace");
  cr_assert_eq(cli("replay t.trace --sim"), 1, "the recorded failure again: %s", out);
  cr_assert(strstr(out, "RNR_RETRY_EXC_ERR=1"), "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --set rnr_retry=7 --json"), 0,
               "rnr_retry 7 makes it complete: %s", out);
  cr_assert(strstr(out, "\"outcome\": \"completed\""), "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --set engine.qp.rq_depth=256 --set messages=50"), 0,
               "enough receive buffers: no RNR at all: %s", out);
  /* the scenario's own spelling, through the section's field table */
  cr_assert_eq(cli("replay t.trace --sim --set qp.rnr_retry=7 --json"), 0, "%s", out);
  cr_assert(strstr(out, "\"outcome\": \"completed\""), "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --set qp.rnr_retry=8 2> e.txt; test $? = 2 && grep -q "
                   "\"'qp.rnr_retry' must be an integer 0..7, got '8'\" e.txt"),
               0, "a value out of the table's bounds is refused with its sentence");
  cr_assert_eq(cli("replay t.trace --sim --list-keys"), 0);
  cr_assert(strstr(out, "engine.qp.rnr_retry=0\n"), "%s", out);
  cr_assert(strstr(out, "sim.faults.loss="), "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --set nonsense=1"), 2);
  cr_assert_eq(cli("replay t.trace --set rnr_retry=7"), 2, "--set needs --sim");
  cr_assert_eq(cli("replay t.trace --sim --until 3"), 2);
  cr_assert_eq(cli("replay"), 2);
  cr_assert_eq(cli("replay --help"), 0);
  cr_assert(strstr(out, "--until N"), "%s", out);
  /* the what-if run can itself be recorded, and replays exactly */
  cr_assert_eq(cli("replay t.trace --sim --set rnr_retry=7 --trace w.trace"), 0);
  cr_assert_eq(cli("replay w.trace"), 0, "%s", out);
  /* its packets: as the source trace's (no data packets), or every one with --trace-packets */
  cr_assert_eq(cli("trace dump w.trace --header"), 0);
  cr_assert(strstr(out, "# trace.packets = 1\n"), "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --set rnr_retry=7 --trace p.trace --trace-packets"), 0);
  cr_assert_eq(cli("trace dump p.trace --header"), 0);
  cr_assert(strstr(out, "# trace.packets = 2\n"), "%s", out);
  cr_assert_eq(cli("replay p.trace --sim --set rnr_retry=7 --trace q.trace"), 0);
  cr_assert_eq(cli("trace dump q.trace --header"), 0);
  cr_assert(strstr(out, "# trace.packets = 2\n"), "a trace with every packet begets one: %s", out);
  cr_assert_eq(cli("replay p.trace"), 0, "%s", out);
  cr_assert_eq(cli("replay t.trace --sim --trace-packets"), 2, "--trace-packets needs --trace");
}

static uint64_t sim_time_of(const char *json)
{
  const char *at = strstr(json, "\"sim_time_ns\": ");
  cr_assert_not_null(at, "%s", json);
  return strtoull(at + strlen("\"sim_time_ns\": "), NULL, 10);
}

/* The keys of the scenario's NIC and generated cluster, as a scenario writes them (the
 * scenario parser's tables): a longer link latency makes the what-if run longer; a cluster key
 * on a trace of a run on a platform file is refused. */
Test(replay, sim_what_if_with_the_cluster_and_nic_keys, .timeout = 120)
{
  char path[600];
  snprintf(path, sizeof(path), "%s/cl.yaml", dir);
  scratch_write(path,
                "name: cl\nseed: 1\nranks: 2\nplatform:\n  cluster: {bandwidth: 100Gbps, latency: 1us}\n"
                "protocol: naive\nworkload:\n  pattern: pair\n  messages: 20\n  size: 4KiB\n"
                "qp:\n  rnr_retry: 7\n");
  cr_assert_eq(cli("run cl.yaml --trace c.trace"), 0, "%s", out);
  cr_assert_eq(cli("replay c.trace --sim --json"), 0, "%s", out);
  uint64_t base = sim_time_of(out);
  cr_assert_eq(cli("replay c.trace --sim --set platform.cluster.latency=50us --json"), 0, "%s",
               out);
  uint64_t slow = sim_time_of(out);
  cr_assert_gt(slow, base + 49000, "at least one 50 us link crossing more: %llu vs %llu",
               (unsigned long long)slow, (unsigned long long)base);
  cr_assert_eq(cli("replay c.trace --sim --set platform.cluster.bandwidth=1Gbps --json"), 0,
               "%s", out);
  cr_assert_gt(sim_time_of(out), base, "a slower link: %s", out);
  cr_assert_eq(cli("replay c.trace --sim --set nic.line_rate=25Gbps --json"), 0, "%s", out);
  cr_assert_eq(cli("replay c.trace --sim --set platform.cluster.bandwidth=0 2> e.txt; "
                   "test $? = 2 && grep -q \"'platform.cluster.bandwidth' must be\" e.txt"),
               0, "a value out of the table's bounds is refused with its sentence");
  record("rnr-slow-consumer-retry0", "t.trace"); /* a platform file */
  cr_assert_eq(cli("replay t.trace --sim --set platform.cluster.latency=2us 2> e.txt; "
                   "test $? = 2 && grep -q 'uses the platform file' e.txt"),
               0, "no cluster to change");
}

/* A trace of format 1.2 (raw struct bytes, tests/traces/README.md): its configuration reads
 * through the frozen layout, `trace dump` shows it as format 2's keys, `replay --sim` re-runs
 * it, and what that records (format 2) replays exactly. */
Test(replay, a_format_1_trace_still_reads, .timeout = 60)
{
  const char *f1 = PREPOST_SOURCE_DIR "/tests/traces/format1-p2p-script.pptrace";
  cr_assert_eq(cli("trace dump --header %s", f1), 0, "%s", out);
  cr_assert(strstr(out, "# prepost trace, format 1.2,"), "%s", out);
  cr_assert(strstr(out, "# engine.cfg = (13096 bytes)\n"), "%s", out);
  cr_assert(strstr(out, "#   engine.script.ops = 14\n"), "%s", out);
  cr_assert(strstr(out, "#   engine.script.prog.2 = ranks=2 first=10 n=4 repeat=0\n"), "%s", out);
  cr_assert(strstr(out, "#   engine.script.op.6 = recv peer=1 tag=any comm=0 size=10 count=1 "
                        "ns=0ns\n"),
            "%s", out);
  cr_assert(strstr(out, "#   engine.p2p.eager_limit = 12KiB\n"), "%s", out);
  cr_assert_eq(cli("replay --sim %s --json --trace w.trace", f1), 0, "%s", out);
  cr_assert(strstr(out, "\"outcome\": \"completed\""), "%s", out);
  cr_assert_eq(cli("trace dump --header w.trace"), 0);
  cr_assert(strstr(out, "# prepost trace, format 2.1,"), "%s", out);
  cr_assert(strstr(out, "# engine.script.op.6 = recv peer=1 tag=any comm=0 size=10 count=1 "
                        "ns=0ns\n"),
            "%s", out);
  cr_assert_null(strstr(out, "engine.cfg ="), "%s", out);
  cr_assert_eq(cli("replay w.trace"), 0, "%s", out);
  cr_assert(strstr(out, "replay matched: 3 ranks"), "%s", out);
}

/* A format 2 trace's --sim re-run is the recorded run: the whole configuration is in its keys
 * (a collective and a ring protocol here; p2p-script above and in recorded_runs_replay_exactly). */
Test(replay, sim_rerun_of_a_format_2_trace_is_the_run, .timeout = 120)
{
  const char *scenarios[] = {"ring-allreduce-8-1m", "p2p-script"};
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
    int rc = cli("run " PREPOST_MODELS_DIR "/scenarios/%s.yaml --json --trace t.trace",
                 scenarios[i]);
    char *run = strdup(out);
    cr_assert_eq(cli("replay t.trace --sim --json"), rc, "%s", scenarios[i]);
    cr_assert_str_eq(out, run, "%s: the same --json", scenarios[i]);
    free(run);
    cr_assert_eq(cli("replay t.trace"), 0, "%s: %s", scenarios[i], out);
  }
}

/* ================================================================ zstd (traces/FORMAT.md) */

static void head_bytes(const char *name, unsigned char *b, size_t n)
{
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  cr_assert_eq(fread(b, 1, n, f), n, "%s is shorter than %zu bytes", path, n);
  fclose(f);
}

static long file_size(const char *name)
{
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* The CLI writes zstd (one stream, flushed per chunk): `zstd -d` gives the plain trace, and the
 * compressed trace, its decompression and a plain recording (PREPOST_TRACE_ZSTD=0) all read and
 * replay exactly. */
Test(replay, traces_are_zstd_compressed_and_replay_exactly, .timeout = 120)
{
  record("rnr-slow-consumer-eager", "z.trace");
  unsigned char b[8];
  head_bytes("z.trace", b, 4);
  cr_assert(b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd, "not zstd");
  cr_assert_eq(cli("replay z.trace"), 0, "%s", out);
  cr_assert(strstr(out, "replay matched: "), "%s", out);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "cd '%s' && zstd -q -d -c z.trace > d.trace", dir);
  cr_assert_eq(system(cmd), 0, "zstd -d failed");
  head_bytes("d.trace", b, 8);
  cr_assert(!memcmp(b, PP_TRACE_MAGIC, 8), "zstd -d does not give a plain trace");
  cr_assert_eq(cli("trace dump z.trace > z.txt && '%s' trace dump d.trace > d.txt && "
                   "cmp z.txt d.txt", PREPOST_CLI),
               0, "the compressed and decompressed traces read differently");
  cr_assert_eq(cli("replay d.trace"), 0, "%s", out);
  /* plain recordings, as every trace before compression */
  setenv("PREPOST_TRACE_ZSTD", "0", 1);
  record("rnr-slow-consumer-eager", "p.trace");
  unsetenv("PREPOST_TRACE_ZSTD");
  head_bytes("p.trace", b, 8);
  cr_assert(!memcmp(b, PP_TRACE_MAGIC, 8), "PREPOST_TRACE_ZSTD=0 wrote no plain trace");
  cr_assert_eq(cli("replay p.trace"), 0, "%s", out);
  cr_assert(strstr(out, "replay matched: "), "%s", out);
  long z = file_size("z.trace"), p = file_size("p.trace");
  cr_assert_lt(z * 4, p, "compressed %ld bytes, plain %ld", z, p);
}

/* A compressed trace cut short: an error without --partial, its whole chunks with it. */
Test(replay, a_compressed_trace_cut_short_reads_with_partial, .timeout = 120)
{
  record("bench-pair", "b.trace");
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "cd '%s' && head -c $(( $(wc -c < b.trace) / 2 )) b.trace > cut.trace",
           dir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_eq(cli("trace stats cut.trace 2> cut.err; grep -q 'cut short' cut.err"), 0);
  cr_assert_eq(cli("trace stats cut.trace"), 2);
  cr_assert_eq(cli("trace stats --partial cut.trace"), 0, "%s", out);
  cr_assert(strstr(out, "(partial)"), "%s", out);
  long recs = 0;
  const char *r = strstr(out, " bytes, ");
  cr_assert_not_null(r, "%s", out);
  recs = strtol(r + 8, NULL, 10);
  cr_assert_gt(recs, 100000, "only %ld records of the first half", recs);
}

/* The engine's reader (no zstd in the engine) names a compressed trace for what it is. */
Test(replay, the_engine_reader_names_a_compressed_trace)
{
  record("rnr-slow-consumer", "z.trace");
  char path[128];
  snprintf(path, sizeof(path), "%s/z.trace", dir);
  char *data = scratch_slurp(path, NULL);
  struct pp_trace t;
  char err[256];
  cr_assert_eq(pp_trace_open((const uint8_t *)data, 64, 0, &t, err, sizeof(err)), PP_PARSE);
  cr_assert(strstr(err, "zstd-compressed trace"), "%s", err);
  free(data);
}

/* A "zstd bomb": a few KB that expand to far more than the limit end in a sentence and exit 2,
 * not in the OOM killer; the same file within a larger limit is read (and is no trace). */
Test(replay, a_compressed_trace_that_expands_past_the_limit_is_refused, .timeout = 120)
{
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "cd '%s' && head -c 67108864 /dev/zero | zstd -q -19 -c > bomb.trace",
           dir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_lt(file_size("bomb.trace"), 65536, "not a bomb");
  setenv("PREPOST_TRACE_MAX_BYTES", "1048576", 1);
  int rc = cli("trace stats bomb.trace");
  unsetenv("PREPOST_TRACE_MAX_BYTES");
  char path[128];
  snprintf(path, sizeof(path), "%s/err.txt", dir);
  char *err = scratch_slurp(path, NULL);
  cr_assert_eq(rc, 2, "%s", err);
  cr_assert(strstr(err, "expands to more than 1048576 bytes"), "%s", err);
  cr_assert(strstr(err, "PREPOST_TRACE_MAX_BYTES"), "%s", err);
  free(err);
  /* within the limit it decompresses, and the reader then says it is no trace */
  cr_assert_eq(cli("trace stats bomb.trace"), 2, "%s", out);
  err = scratch_slurp(path, NULL);
  cr_assert_null(strstr(err, "expands to more than"), "%s", err);
  free(err);
}
