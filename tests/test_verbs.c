/* backends/verbs without an RDMA device (ctest, any machine): the ops table, GID choice, the
 * bootstrap wire format, rank tables, socket errors, the coordinator against fake ranks (happy
 * path with quiescence, missing rank, wrong scenario, failing rank), doctor and the CLI's error
 * paths. What needs a device runs in the Soft-RoCE guest: tests/test_verbs_rxe.c,
 * tests/verbs/suite.sh. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/verbs/boot.h"
#include "backends/verbs/counters.h"
#include "backends/verbs/launch.h"
#include "prepost/verbsnic.h"
#include "prepost/verbsapp.h"
#include "prepost/verbsrun.h"
#include "tools/report/report.h"
#include "scratch.h"

#define SCENARIOS PREPOST_MODELS_DIR "/scenarios/"

/* ================================================================ the ops table */

Test(verbs, ops_table_is_complete)
{
  cr_assert(pp_nic_ops_complete(&vnic_ops));
  cr_assert_str_eq(vnic_ops.name, "verbs");
}

static struct vnic_gid gid(uint32_t index, int type, const char *text)
{
  struct vnic_gid g = {.index = index, .type = type};
  if (!strcmp(text, "v4")) {
    g.gid[10] = g.gid[11] = 0xff;
    g.gid[12] = 169, g.gid[13] = 254, g.gid[14] = 77, g.gid[15] = 1;
  } else {
    g.gid[0] = 0xfe, g.gid[1] = 0x80, g.gid[15] = (uint8_t)index;
  }
  return g;
}

Test(verbs, gid_choice_prefers_roce_v2_ipv4_mapped)
{
  struct vnic_gid t1[] = {gid(0, 2, "ll"), gid(1, 2, "v4")};
  cr_assert_eq(vnic_pick_gid(t1, 2), 1);
  struct vnic_gid t2[] = {gid(0, 1, "ll"), gid(1, 1, "v4"), gid(2, 2, "ll"), gid(3, 2, "v4")};
  cr_assert_eq(vnic_pick_gid(t2, 4), 3, "RoCE v2 before v1");
  struct vnic_gid t3[] = {gid(0, 1, "ll"), gid(1, 2, "ll")};
  cr_assert_eq(vnic_pick_gid(t3, 2), 1, "the first RoCE v2 one when none is IPv4-mapped");
  struct vnic_gid t4[] = {gid(4, 1, "ll"), gid(5, 1, "v4")};
  cr_assert_eq(vnic_pick_gid(t4, 2), 4, "then RoCE v1");
  struct vnic_gid t5[] = {gid(7, 0, "ll")};
  cr_assert_eq(vnic_pick_gid(t5, 1), 7, "then the first entry");
  cr_assert_eq(vnic_pick_gid(NULL, 0), -1);
  char s[64];
  vnic_gid_str(t1[1].gid, s, sizeof(s));
  cr_assert_str_eq(s, "::ffff:169.254.77.1");
  cr_assert_str_eq(vnic_gid_type_name(2), "RoCE v2");
}

Test(verbs, open_names_what_is_missing)
{
  struct vnic_config c = {.gid_index = -1};
  snprintf(c.device, sizeof(c.device), "nosuchdev0");
  struct vnic *n = (void *)1;
  char err[600] = "";
  enum pp_status s = vnic_open(&c, 2, &n, err, sizeof(err));
  cr_assert_eq(s, PP_NOTFOUND, "%s", err);
  cr_assert_null(n);
  /* with no device at all: "no RDMA device: ..."; with others: "no RDMA device named ..." */
  cr_assert(strstr(err, "no RDMA device"), "%s", err);
}

/* ================================================================ wire format */

Test(verbs, conn_info_travels_as_132_fixed_bytes)
{
  struct pp_conn_info a = {.nchannels = 3};
  for (int i = 0; i < PP_MAX_CHANNELS; i++) {
    a.qp_num[i] = 0x10000u + (uint32_t)i;
    a.psn[i] = 0xabcdefu - (uint32_t)i;
  }
  for (int i = 0; i < PP_MAX_REGIONS; i++)
    a.region[i] = (struct pp_region){.addr = 0x7fff00001000ull * (uint64_t)(i + 1),
                                     .rkey = 0xdead0000u + (uint32_t)i, .len = 4096u << i};
  struct boot_buf b = {0};
  boot_put_conn_info(&b, &a);
  cr_assert_eq(b.len, BOOT_CONN_INFO_BYTES);
  cr_assert_eq(b.p[0], 3, "little-endian");
  struct pp_conn_info c;
  boot_get_conn_info(&b, &c);
  cr_assert_not(b.bad);
  cr_assert_eq(memcmp(&a, &c, sizeof(a)), 0);
  boot_get_conn_info(&b, &c); /* past the end */
  cr_assert(b.bad);
  boot_buf_free(&b);
}

Test(verbs, address_and_result_round_trip)
{
  struct vnic_addr a = {.lid = 0x1234, .link_layer = 2, .port = 1}, c;
  for (int i = 0; i < 16; i++)
    a.gid[i] = (uint8_t)(i * 7);
  struct boot_buf b = {0};
  boot_put_addr(&b, &a);
  cr_assert_eq(b.len, BOOT_ADDR_BYTES);
  boot_get_addr(&b, &c);
  cr_assert_eq(memcmp(&a, &c, sizeof(a)), 0);
  boot_buf_free(&b);

  struct pp_rank_result r = {0}, r2;
  r.stats.messages_sent = 7;
  r.stats.status_counts[PP_WC_RNR_RETRY_EXC_ERR] = 1;
  r.stats.done = true;
  r.nic.rnr_naks_received = 42;
  snprintf(r.host, sizeof(r.host), "h/rxe0");
  static struct pp_hist h;
  pp_hist_reset(&h);
  pp_hist_record(&h, 5);
  pp_hist_record(&h, 6);
  pp_hist_record(&h, 70000);
  struct pp_hist *got;
  boot_put_result(&b, &r, NULL);
  size_t without = b.len;
  boot_buf_free(&b);
  boot_put_result(&b, &r, &h);
  cr_assert_eq(b.len - without, 4 * 8 + 4 + 3 * (4 + 8),
               "the histogram travels as count, min, max, sum and its non-empty buckets");
  boot_get_result(&b, &r2, &got);
  cr_assert_not(b.bad);
  cr_assert_eq(r2.stats.messages_sent, 7);
  cr_assert_eq(r2.stats.status_counts[PP_WC_RNR_RETRY_EXC_ERR], 1);
  cr_assert(r2.stats.done);
  cr_assert_eq(r2.nic.rnr_naks_received, 42);
  cr_assert_str_eq(r2.host, "h/rxe0");
  cr_assert(got);
  cr_assert_eq(memcmp(got, &h, sizeof(h)), 0, "the same histogram");
  free(got);
  /* one that does not add up (its count says 4 samples) is refused */
  h.count = 4;
  boot_buf_free(&b);
  boot_put_result(&b, &r, &h);
  boot_get_result(&b, &r2, &got);
  cr_assert(b.bad);
  cr_assert_null(got);
  boot_buf_free(&b);
  /* a rank without latency sends none */
  boot_put_result(&b, &r, NULL);
  boot_get_result(&b, &r2, &got);
  cr_assert_not(b.bad);
  cr_assert_null(got);
  boot_buf_free(&b);
}

Test(verbs, waits_round_trip)
{
  struct pp_wait w[3] = {
      {.kind = PP_WAIT_CTS, .peer = 1, .tag = 5, .since_ns = 77, .what = "rndv send waits"},
      {.kind = PP_WAIT_UNMATCHED, .peer = PP_WAIT_NOPEER, .tag = PP_WAIT_NOTAG, .what = "r"},
      {.kind = PP_WAIT_QP_ERROR, .peer = 0, .tag = PP_WAIT_NOTAG, .what = "qp"}};
  struct boot_buf b = {0};
  boot_put_waits(&b, w, 3, 40);
  struct pp_wait got[2];
  uint32_t total = 0;
  cr_assert_eq(boot_get_waits(&b, got, 2, &total), 2, "at most max, the rest skipped");
  cr_assert_not(b.bad);
  cr_assert_eq(b.at, b.len, "every wait read");
  cr_assert_eq(total, 40);
  cr_assert_eq(got[0].kind, PP_WAIT_CTS);
  cr_assert_eq(got[0].peer, 1);
  cr_assert_eq(got[0].tag, 5);
  cr_assert_eq(got[0].since_ns, 77);
  cr_assert_str_eq(got[0].what, "rndv send waits");
  cr_assert_eq(got[1].peer, PP_WAIT_NOPEER);
  /* a kind this build does not know, and a cut message, are refused */
  b.at = 0;
  b.p[8] = PP_WAIT_KIND_COUNT;
  cr_assert_eq(boot_get_waits(&b, got, 2, &total), 0);
  cr_assert(b.bad);
  b.at = 0;
  b.bad = false;
  b.p[8] = PP_WAIT_CTS;
  b.len -= 10;
  cr_assert_eq(boot_get_waits(&b, got, 2, &total), 0);
  cr_assert(b.bad);
  boot_buf_free(&b);
}

Test(verbs, host_port_parsing)
{
  char h[64], err[128];
  uint16_t p;
  cr_assert_eq(boot_parse_hostport("10.0.0.1:7000", 1, h, sizeof(h), &p, err, sizeof(err)), 0);
  cr_assert_str_eq(h, "10.0.0.1");
  cr_assert_eq(p, 7000);
  cr_assert_eq(boot_parse_hostport("node3", 18515, h, sizeof(h), &p, err, sizeof(err)), 0);
  cr_assert_str_eq(h, "node3");
  cr_assert_eq(p, 18515);
  cr_assert_eq(boot_parse_hostport("[fe80::1]:9", 1, h, sizeof(h), &p, err, sizeof(err)), 0);
  cr_assert_str_eq(h, "fe80::1");
  cr_assert_eq(p, 9);
  cr_assert_eq(boot_parse_hostport("::1", 5, h, sizeof(h), &p, err, sizeof(err)), 0);
  cr_assert_str_eq(h, "::1");
  cr_assert_eq(boot_parse_hostport("h:99999", 1, h, sizeof(h), &p, err, sizeof(err)), -1);
  cr_assert(strstr(err, "0..65535"), "%s", err);
  cr_assert_eq(boot_parse_hostport(":80", 1, h, sizeof(h), &p, err, sizeof(err)), -1);
  cr_assert_eq(boot_parse_hostport("[::1", 1, h, sizeof(h), &p, err, sizeof(err)), -1);
}

Test(verbs, rank_tables)
{
  struct pp_verbs_rank_entry *t;
  uint32_t n;
  char err[256];
  cr_assert_eq(pp_verbs_parse_table("10.0.0.1:7000,10.0.0.2", &t, &n, err, sizeof(err)), 0, "%s",
               err);
  cr_assert_eq(n, 2);
  cr_assert_eq(t[0].port, 7000);
  cr_assert_eq(t[1].port, PP_VERBS_DEFAULT_PORT);
  cr_assert_str_eq(t[1].host, "10.0.0.2");
  free(t);
  char path[] = "/tmp/prepost-ranks-XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "# rank table\n127.0.0.1:19000 rxe0   # rank 0\n\n127.0.0.1 mlx5_1\n");
  fclose(f);
  cr_assert_eq(pp_verbs_parse_table(path, &t, &n, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(t[0].device, "rxe0");
  cr_assert_str_eq(t[1].device, "mlx5_1");
  cr_assert_eq(t[0].port, 19000);
  free(t);
  f = fopen(path, "w");
  fprintf(f, "127.0.0.1 rxe0\n127.0.0.1 rxe0 extra\n");
  fclose(f);
  cr_assert_eq(pp_verbs_parse_table(path, &t, &n, err, sizeof(err)), -1);
  cr_assert(strstr(err, ":2: expected 'HOST[:PORT] [DEVICE]'"), "%s", err);
  f = fopen(path, "w");
  fprintf(f, "# nothing\n");
  fclose(f);
  cr_assert_eq(pp_verbs_parse_table(path, &t, &n, err, sizeof(err)), -1);
  cr_assert(strstr(err, "no rank"), "%s", err);
  unlink(path);
  cr_assert_eq(pp_verbs_parse_table("/nonexistent/ranks.txt", &t, &n, err, sizeof(err)), -1);
  cr_assert(strstr(err, "/nonexistent/ranks.txt"), "%s", err);
}

/* ================================================================ sockets */

/* ================================================================ the launchers' environment */

static int env_of(struct pp_launch_env *le, char *err, size_t errlen, ...)
{
  char *envp[16];
  va_list ap;
  va_start(ap, errlen);
  int n = 0;
  for (char *e; n < 15 && (e = va_arg(ap, char *));)
    envp[n++] = e;
  va_end(ap);
  envp[n] = NULL;
  return pp_launch_env_parse(envp, le, err, errlen);
}

Test(launch, open_mpi_and_slurm_environments)
{
  struct pp_launch_env le;
  char err[512];
  cr_assert_eq(env_of(&le, err, sizeof(err), "HOME=/root", "PATH=/bin", NULL), 0,
               "no launcher's variables");
  cr_assert_eq(le.kind, PP_LAUNCH_ENV_NONE);
  cr_assert_eq(env_of(&le, err, sizeof(err), "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                      NULL), 1, "%s", err);
  cr_assert_eq(le.kind, PP_LAUNCH_ENV_OMPI);
  cr_assert_eq(le.rank, 2);
  cr_assert_eq(le.size, 4);
  cr_assert_eq(le.nhosts, 0);
  /* mpirun inside a Slurm allocation: Open MPI's variables are the job's */
  cr_assert_eq(env_of(&le, err, sizeof(err), "SLURM_PROCID=0", "SLURM_NTASKS=8",
                      "SLURM_NODELIST=n[1-8]", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                      NULL), 1, "%s", err);
  cr_assert_eq(le.kind, PP_LAUNCH_ENV_OMPI);
  cr_assert_eq(le.rank, 1);
  cr_assert_eq(le.size, 2);
  /* srun: rank, size and the step's hosts (task 0 on the first) */
  cr_assert_eq(env_of(&le, err, sizeof(err), "SLURM_PROCID=3", "SLURM_NTASKS=4",
                      "SLURM_NODELIST=all[01-64]", "SLURM_STEP_NODELIST=gpu[07-08],cpu1", NULL),
               1, "%s", err);
  cr_assert_eq(le.kind, PP_LAUNCH_ENV_SLURM);
  cr_assert_eq(le.rank, 3);
  cr_assert_eq(le.size, 4);
  cr_assert_eq(le.nhosts, 3);
  cr_assert_str_eq(le.first_host, "gpu07");
  cr_assert_eq(env_of(&le, err, sizeof(err), "SLURM_PROCID=0", "SLURM_NPROCS=2",
                      "SLURM_NODELIST=a", NULL), 1, "SLURM_NPROCS, the older name: %s", err);
  cr_assert_eq(le.size, 2);
  cr_assert_str_eq(le.first_host, "a");
  const char *bad[][4] = {
      {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", NULL, "not a rank below"},
      {"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2", NULL, "OMPI_COMM_WORLD_RANK='x'"},
      {"OMPI_COMM_WORLD_RANK=-1", "OMPI_COMM_WORLD_SIZE=2", NULL, "not a rank below"},
      {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=0", NULL, "not a number of ranks"},
      {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=5000", NULL, "not a number of ranks"},
      {"OMPI_COMM_WORLD_RANK=0", NULL, NULL, "OMPI_COMM_WORLD_SIZE is not"},
      {"SLURM_PROCID=1", "SLURM_NTASKS=2 ", NULL, "not a number of ranks"},
      {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NODELIST=n[1-", "unbalanced brackets"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    cr_assert_eq(env_of(&le, err, sizeof(err), bad[i][0], bad[i][1], bad[i][2], NULL), -1,
                 "case %zu", i);
    cr_assert_not_null(strstr(err, bad[i][3]), "case %zu: '%s' not in '%s'", i, bad[i][3], err);
  }
}

Test(launch, slurm_host_lists)
{
  static char hosts[PP_MAX_RANKS * BOOT_HOST_MAX];
  char err[256];
  uint32_t n;
  struct {
    const char *list;
    uint32_t n;
    const char *first, *last;
  } ok[] = {
      {"node1", 1, "node1", "node1"},
      {"a,b,c", 3, "a", "c"},
      {"n[1-3]", 3, "n1", "n3"},
      {"n[08-10]", 3, "n08", "n10"},            /* the lower bound's width is kept */
      {"gpu[07-08,11],cpu1", 4, "gpu07", "cpu1"},
      {"r[1-2]-n[01-02]", 4, "r1-n01", "r2-n02"}, /* two ranges: the rightmost varies fastest */
      {"x[3]y", 1, "x3y", "x3y"},
      {"a,,b", 2, "a", "b"},
      {"n[0-1023]", 1024, "n0", "n1023"},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    cr_assert_eq(pp_launch_hostlist(ok[i].list, hosts, PP_MAX_RANKS, &n, err, sizeof(err)), 0,
                 "%s: %s", ok[i].list, err);
    cr_assert_eq(n, ok[i].n, "%s: %u hosts", ok[i].list, n);
    cr_assert_str_eq(hosts, ok[i].first, "%s", ok[i].list);
    cr_assert_str_eq(hosts + (size_t)(n - 1) * BOOT_HOST_MAX, ok[i].last, "%s", ok[i].list);
  }
  cr_assert_eq(pp_launch_hostlist("r[1-2]-n[01-02]", hosts, 4, &n, err, sizeof(err)), 0);
  cr_assert_str_eq(hosts + BOOT_HOST_MAX, "r1-n02");
  cr_assert_eq(pp_launch_hostlist("n[1-4]", NULL, 8, &n, err, sizeof(err)), 0, "count only");
  cr_assert_eq(n, 4);
  const char *bad[][2] = {
      {"n[1-3", "unbalanced"},  {"n1-3]", "unbalanced"}, {"n[[1]]", "unbalanced"},
      {"n[3-1]", "bad range"},  {"n[a-b]", "bad range"},       {"n[-2]", "bad range"},
      {"n[1-]", "bad range"},   {"n[]", "bad range"},          {"n[0-1024]", "more than 1024"},
      {"n[0-4294967294]", "more than 1024"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err[0] = '\0';
    cr_assert_eq(pp_launch_hostlist(bad[i][0], hosts, PP_MAX_RANKS, &n, err, sizeof(err)), -1,
                 "%s", bad[i][0]);
    cr_assert_not_null(strstr(err, bad[i][1]), "%s: '%s' not in '%s'", bad[i][0], bad[i][1], err);
  }
  char longname[BOOT_HOST_MAX + 8];
  memset(longname, 'h', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  cr_assert_eq(pp_launch_hostlist(longname, hosts, 4, &n, err, sizeof(err)), -1);
  cr_assert_not_null(strstr(err, "longer than"), "%s", err);
}

Test(verbs, listen_on_a_busy_port_says_so)
{
  char err[256];
  uint16_t p = 0;
  int a = boot_listen("127.0.0.1", &p, err, sizeof(err));
  cr_assert_geq(a, 0, "%s", err);
  cr_assert_neq(p, 0);
  uint16_t q = p;
  int b = boot_listen("127.0.0.1", &q, err, sizeof(err));
  cr_assert_eq(b, -1);
  cr_assert(strstr(err, "port busy"), "%s", err);
  cr_assert(strstr(err, "127.0.0.1"), "%s", err);
  close(a);
  q = 0;
  cr_assert_eq(boot_listen("192.0.2.77", &q, err, sizeof(err)), -1, "not an address of this host");
  cr_assert(strstr(err, "not on this machine"), "%s", err);
  q = 0;
  cr_assert_eq(boot_listen("no-such-host.invalid", &q, err, sizeof(err)), -1);
  cr_assert(strstr(err, "cannot resolve"), "%s", err);
}

Test(verbs, connect_to_nobody_fails_in_bounded_time)
{
  char err[512];
  uint16_t p = 0;
  int a = boot_listen("127.0.0.1", &p, err, sizeof(err));
  close(a); /* a port nobody listens on */
  uint64_t t0 = boot_now_ns();
  int fd = boot_connect("127.0.0.1", p, t0 + 700000000ull, err, sizeof(err));
  double dt = (boot_now_ns() - t0) / 1e9;
  cr_assert_eq(fd, -1);
  cr_assert(dt >= 0.6 && dt < 3.0, "retried for %.2f s", dt);
  cr_assert(strstr(err, "Connection refused"), "%s", err);
  cr_assert(strstr(err, "is rank 0 running"), "%s", err);
  cr_assert_eq(boot_connect("no-such-host.invalid", 1, boot_now_ns() + 1000000000ull, err,
                            sizeof(err)),
               -1);
  cr_assert(strstr(err, "cannot resolve 'no-such-host.invalid'"), "%s", err);
}

/* ================================================================ coordinator + fake ranks */

static struct pp_engine_cfg cfg2(void)
{
  struct pp_engine_cfg c = {.nranks = 2, .protocol = PP_PROTO_NAIVE, .seed = 1};
  c.qp = (struct pp_qp_params){.min_rnr_timer = 1, .rnr_retry = 7, .timeout = 14,
                               .retry_cnt = 7, .max_rd_atomic = 1, .mtu = 1024,
                               .sq_depth = 8, .rq_depth = 8};
  c.workload = (struct pp_workload){.pattern = PP_PATTERN_PAIR, .messages = 10, .size = 64};
  return c;
}

/* The job secret of these tests, and another job's. */
static const uint8_t SECRET[BOOT_SECRET_BYTES] = "prepost test secret, 32 bytes..";
static const uint8_t OTHER_SECRET[BOOT_SECRET_BYTES] = "another job's secret, 32 bytes.";

/* What the coordinator logs (dropped connections), one line each. */
struct logcap {
  pthread_mutex_t m;
  char text[1 << 16];
  size_t len;
  unsigned lines;
};

static void cap_log(void *ctx, const char *line)
{
  struct logcap *l = ctx;
  pthread_mutex_lock(&l->m);
  int k = snprintf(l->text + l->len, sizeof(l->text) - l->len, "%s\n", line);
  if (k > 0 && l->len + (size_t)k < sizeof(l->text))
    l->len += (size_t)k;
  l->lines++;
  pthread_mutex_unlock(&l->m);
}

/* How many logged lines hold every one of the (NULL-ended) needles. */
static unsigned logged(struct logcap *l, ...)
{
  unsigned n = 0;
  pthread_mutex_lock(&l->m);
  for (char *line = l->text; *line;) {
    char *end = strchr(line, '\n');
    *end = '\0';
    bool all = true;
    va_list ap;
    va_start(ap, l);
    for (const char *w; (w = va_arg(ap, const char *));)
      all = all && strstr(line, w);
    va_end(ap);
    n += all;
    *end = '\n';
    line = end + 1;
  }
  pthread_mutex_unlock(&l->m);
  return n;
}

struct coord_ctx {
  struct boot_coord_args a;
  struct pp_engine_cfg cfg;
  struct pp_run_result res;
  enum pp_status s;
  char err[1024];
  uint16_t port;
  struct logcap log;
  uint64_t now; /* the coordinator's judgement clock (boot_coord_args.clock): moved by the test */
};

/* Time passes for the no-progress judgement only when a test says so (advance): no verdict
 * depends on how fast the machine runs or how the threads are scheduled. */
static uint64_t test_clock(void *ctx)
{
  return __atomic_load_n((uint64_t *)ctx, __ATOMIC_SEQ_CST);
}

static void *coord_thread(void *p)
{
  struct coord_ctx *c = p;
  c->s = boot_coordinate(&c->a, &c->res, c->err, sizeof(c->err));
  return NULL;
}

/* The coordinator on 127.0.0.1 (any port), not yet started. */
static void coord_init(struct coord_ctx *c, uint64_t boot_ns, uint64_t no_progress_ns)
{
  char err[256];
  memset(c, 0, sizeof(*c));
  pthread_mutex_init(&c->log.m, NULL);
  c->cfg = cfg2();
  int lfd = boot_listen("127.0.0.1", &c->port, err, sizeof(err));
  cr_assert_geq(lfd, 0, "%s", err);
  c->now = 1000000000000ull;
  c->a = (struct boot_coord_args){.listen_fd = lfd, .cfg = &c->cfg, .boot_timeout_ns = boot_ns,
                                  .run_timeout_ns = 60000000000ull,
                                  .no_progress_ns = no_progress_ns, .secret = SECRET,
                                  .log = cap_log, .log_ctx = &c->log,
                                  .clock = test_clock, .clock_ctx = &c->now};
  snprintf(c->a.where, sizeof(c->a.where), "127.0.0.1:%u", c->port);
}

static void start_coord_np(struct coord_ctx *c, uint64_t boot_ns, uint64_t no_progress_ns,
                           pthread_t *th)
{
  coord_init(c, boot_ns, no_progress_ns);
  cr_assert_eq(pthread_create(th, NULL, coord_thread, c), 0);
}

static void start_coord(struct coord_ctx *c, uint64_t boot_ns, pthread_t *th)
{
  start_coord_np(c, boot_ns, 0, th);
}

/* Connects and authenticates as `rank` with `secret`: 0, or -1 with err. */
static int join(uint16_t port, uint32_t rank, const struct pp_engine_cfg *cfg,
                const uint8_t *secret, struct boot_link *l, char *err, size_t errlen)
{
  return boot_join("127.0.0.1", port, rank, cfg, secret, boot_now_ns() + 5000000000ull, l, err,
                   errlen);
}

/* A fake rank's HELLO; its conn_info carries `qp` in qp_num[0] (100 + rank for the real ones). */
static void say_hello(struct boot_link *l, uint32_t rank, uint32_t qp, const char *host)
{
  bool has[2] = {rank != 0, rank != 1};
  struct pp_conn_info info[2] = {{.nchannels = 1, .qp_num = {qp}}, {.nchannels = 1, .qp_num = {qp}}};
  struct vnic_addr a = {.link_layer = 2, .port = 1};
  a.gid[15] = (uint8_t)rank;
  struct boot_buf b = {0};
  boot_put_hello(&b, 2, &a, host, "fake0", has, info);
  cr_assert_eq(boot_send(l, BOOT_HELLO, &b, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&b);
}

/* A fake rank: authenticates with the job's secret and says HELLO. */
static struct boot_link fake_hello(uint16_t port, uint32_t rank, const struct pp_engine_cfg *cfg)
{
  char err[512];
  struct boot_link l;
  cr_assert_eq(join(port, rank, cfg, SECRET, &l, err, sizeof(err)), 0, "%s", err);
  say_hello(&l, rank, 100 + rank, "fakehost");
  return l;
}

/* The next message (the deadline is only there to fail a test that would hang). */
static uint32_t recv_type(struct boot_link *l, struct boot_buf *b)
{
  uint32_t t = 0;
  char err[128];
  cr_assert_eq(boot_recv(l, &t, b, boot_now_ns() + 30000000000ull, err, sizeof(err)), 1, "%s",
               err);
  return t;
}

/* A fake rank's idle report: idle at generation gen (boot.h: there is no busy report). */
static void send_state(struct boot_link *l, bool done, uint64_t gen)
{
  struct boot_buf b = {0};
  boot_put8(&b, done);
  boot_put64(&b, gen);
  cr_assert_eq(boot_send(l, BOOT_STATE, &b, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&b);
}

/* Both fake ranks through HELLO, TABLE, READY and GO. */
static void fake_start(struct coord_ctx *c, struct boot_link fd[2], struct boot_buf *b)
{
  fd[0] = fake_hello(c->port, 0, &c->cfg);
  fd[1] = fake_hello(c->port, 1, &c->cfg);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], b), BOOT_TABLE);
    cr_assert_eq(boot_send(&fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&fd[r], b), BOOT_GO);
}

/* Rank link l is asked whether it moved (PROBE) and answers: idle, still at generation gen. */
static void answer_probe(struct boot_link *l, uint64_t gen)
{
  struct boot_buf b = {0}, o = {0};
  uint32_t t = recv_type(l, &b);
  cr_assert_eq(t, BOOT_PROBE, "asked whether it moved (message %u)", t);
  boot_put64(&o, boot_get64(&b));
  boot_put8(&o, 1);
  boot_put64(&o, gen);
  cr_assert_eq(boot_send(l, BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&o);
  boot_buf_free(&b);
}

/* Two ranks past GO, idle and done at generation gen, to the end: STATE, PROBE answered, STOP
 * answered with a RESULT of done, BYE with outcome completed; their links closed. */
static void idle_done_to_bye(struct boot_link fd[2], uint64_t gen)
{
  struct boot_buf b = {0}, o = {0};
  for (int r = 0; r < 2; r++)
    send_state(&fd[r], true, gen);
  for (int r = 0; r < 2; r++)
    answer_probe(&fd[r], gen);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_STOP);
    struct pp_rank_result rr = {0};
    rr.stats.done = true;
    o.len = 0;
    boot_put_result(&o, &rr, NULL);
    cr_assert_eq(boot_send(&fd[r], BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_COMPLETED);
    close(fd[r].fd);
    fd[r].fd = -1;
  }
  boot_buf_free(&o);
  boot_buf_free(&b);
}

/* The coordinator thread th ended well; its result freed, its listening socket closed. */
static void coord_completed(struct coord_ctx *c, pthread_t th)
{
  pthread_join(th, NULL);
  cr_assert_eq(c->s, PP_OK, "%s", c->err);
  cr_assert_eq(c->res.outcome, PP_OUTCOME_COMPLETED);
  pp_run_result_free(&c->res);
  close(c->a.listen_fd);
}

/* A coordinator on 127.0.0.1 (boot timeout 5 s, no-progress bound no_progress_ns: 0 none) and
 * both fake ranks past GO (fake_start): what most coordinator tests start from. They talk to it
 * on fd with b, and end with two_fake_ranks_end. */
struct two_ranks {
  struct coord_ctx c;
  pthread_t th;
  bool joined;
  struct boot_link fd[2];
  struct boot_buf b;
};

/* two_fake_ranks_begin with the launcher's check() callback set (boot_coord_args.check). */
static void two_fake_ranks_begin_checked(struct two_ranks *t, uint64_t no_progress_ns,
                                         int (*check)(void *ctx, char *err, size_t errlen),
                                         void *check_ctx)
{
  coord_init(&t->c, 5000000000ull, no_progress_ns);
  t->c.a.check = check;
  t->c.a.check_ctx = check_ctx;
  cr_assert_eq(pthread_create(&t->th, NULL, coord_thread, &t->c), 0);
  t->joined = false;
  t->b = (struct boot_buf){0};
  fake_start(&t->c, t->fd, &t->b);
}

static void two_fake_ranks_begin(struct two_ranks *t, uint64_t no_progress_ns)
{
  two_fake_ranks_begin_checked(t, no_progress_ns, NULL, NULL);
}

/* The ranks' links still open closed (they go away), the coordinator's thread joined: its
 * verdict is in t->c.s, t->c.err and t->c.res. */
static void two_fake_ranks_hang_up(struct two_ranks *t)
{
  for (int r = 0; r < 2; r++) {
    if (t->fd[r].fd >= 0)
      close(t->fd[r].fd);
    t->fd[r].fd = -1;
  }
  if (!t->joined)
    pthread_join(t->th, NULL);
  t->joined = true;
}

/* two_fake_ranks_hang_up, then the coordinator's result, b and its listening socket freed. */
static void two_fake_ranks_end(struct two_ranks *t)
{
  two_fake_ranks_hang_up(t);
  pp_run_result_free(&t->c.res);
  boot_buf_free(&t->b);
  close(t->c.a.listen_fd);
}

Test(verbs, coordinator_runs_fake_ranks_to_quiescence)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  struct boot_link fd[2] = {fake_hello(c.port, 1, &c.cfg), fake_hello(c.port, 0, &c.cfg)};
  struct boot_buf b = {0};
  for (uint32_t r = 0; r < 2; r++) {
    uint32_t rank = r == 0 ? 1 : 0;
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_TABLE);
    struct vnic_addr addr[2];
    bool has[2];
    struct pp_conn_info info[2];
    boot_get_table(&b, 2, addr, has, info);
    cr_assert_not(b.bad);
    cr_assert_eq(addr[1].gid[15], 1, "every rank's address");
    uint32_t peer = 1 - rank;
    cr_assert(has[peer]);
    cr_assert_not(has[rank]);
    cr_assert_eq(info[peer].qp_num[0], 100 + peer, "the peer's conn_info for me");
    cr_assert_eq(boot_send(&fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_GO);
  /* rank 0 (fd[1]) goes idle; rank 1 has not reported (it is busy): no probe yet */
  send_state(&fd[1], true, 5);
  send_state(&fd[0], true, 9);
  for (int r = 0; r < 2; r++)
    answer_probe(&fd[r], r == 0 ? 9 : 5); /* nobody moved */
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_STOP);
    cr_assert_eq(boot_get8(&b), 0, "not a timeout");
    struct pp_rank_result rr = {0};
    rr.stats.done = true;
    rr.stats.messages_sent = r == 1 ? 10 : 0;
    rr.stats.messages_received = r == 0 ? 10 : 0;
    rr.stats.status_counts[PP_WC_SUCCESS] = 10;
    rr.nic.rnr_naks_received = 4; /* both ranks read one device's counters */
    rr.nic.rnr_naks_sent = 4;
    snprintf(rr.host, sizeof(rr.host), "fakehost/fake0");
    static struct pp_hist h;
    pp_hist_reset(&h);
    pp_hist_record(&h, r == 1 ? 1000 : 3000);
    struct boot_buf o = {0};
    boot_put_result(&o, &rr, &h);
    cr_assert_eq(boot_send(&fd[r], BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_COMPLETED);
    close(fd[r].fd);
  }
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_OK, "%s", c.err);
  cr_assert_eq(c.res.nranks, 2);
  cr_assert_eq(c.res.outcome, PP_OUTCOME_COMPLETED);
  cr_assert_eq(c.res.ranks[1].stats.messages_received, 10);
  /* one device shared by both ranks: its counts are credited once, by role */
  cr_assert_eq(c.res.ranks[0].nic.rnr_naks_received, 4, "the sender gets the NAKs received");
  cr_assert_eq(c.res.ranks[1].nic.rnr_naks_received, 0);
  cr_assert_eq(c.res.ranks[1].nic.rnr_naks_sent, 4, "the receiver gets the NAKs sent");
  cr_assert_eq(c.res.ranks[0].nic.rnr_naks_sent, 0);
  /* both ranks' histograms merged: the same summary as the simulator's (prepost/hist.h) */
  cr_assert_eq(c.res.latency.count, 2);
  cr_assert_eq(c.res.latency.p50, 1000);
  cr_assert_eq(c.res.latency.max, 3000);
  cr_assert(c.res.latency_hist);
  cr_assert_eq(c.res.latency_hist->bucket[pp_hist_index(3000)], 1);
  pp_run_result_free(&c.res);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

Test(verbs, coordinator_probe_is_void_when_a_rank_moved)
{
  struct two_ranks t;
  two_fake_ranks_begin(&t, 0);
  send_state(&t.fd[0], false, 1);
  send_state(&t.fd[1], false, 1);
  uint64_t id = 0;
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_PROBE);
    id = boot_get64(&t.b);
  }
  /* rank 1 processed a completion between its idle report and the probe */
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, 1);
  boot_put64(&o, 2);
  boot_send(&t.fd[1], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  o.len = 0;
  boot_put64(&o, id);
  boot_put8(&o, 1);
  boot_put64(&o, 1);
  boot_send(&t.fd[0], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  /* ... so no STOP; its new idle report starts another probe */
  send_state(&t.fd[1], false, 2);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_PROBE, "a second probe, not STOP");
    cr_assert_gt(boot_get64(&t.b), id);
  }
  two_fake_ranks_hang_up(&t);
  cr_assert_neq(t.c.s, PP_OK);
  cr_assert(strstr(t.c.err, "went away"), "%s", t.c.err);
  boot_buf_free(&o);
  two_fake_ranks_end(&t);
}

/* A rank answers the probe, then processes a late completion and reports it: the coordinator must
 * probe again (it once waited for ever on the stale probe). */
Test(verbs, coordinator_probes_again_after_a_late_report)
{
  struct two_ranks t;
  struct boot_buf o = {0};
  two_fake_ranks_begin(&t, 0);
  send_state(&t.fd[0], true, 1);
  send_state(&t.fd[1], true, 1);
  uint64_t id[2];
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_PROBE);
    id[r] = boot_get64(&t.b);
  }
  boot_put64(&o, id[0]);
  boot_put8(&o, 1);
  boot_put64(&o, 1);
  boot_send(&t.fd[0], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  send_state(&t.fd[0], true, 2); /* rank 0 moved after its answer; rank 1 has not answered */
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_PROBE, "a new probe, not a hang");
    uint64_t nid = boot_get64(&t.b);
    cr_assert_gt(nid, id[r]);
    o.len = 0;
    boot_put64(&o, nid);
    boot_put8(&o, 1);
    boot_put64(&o, r == 0 ? 2 : 1);
    boot_send(&t.fd[r], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_STOP);
  boot_buf_free(&o);
  two_fake_ranks_end(&t);
}

/* Rank link l answers the probe id: idle or not, at generation gen. */
static void reply_probe(struct boot_link *l, uint64_t id, bool idle, uint64_t gen)
{
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, idle);
  boot_put64(&o, gen);
  cr_assert_eq(boot_send(l, BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&o);
}

/* Both ranks' idle reports at gen 1 started probe `id`; rank 0 confirms its report, rank 1
 * answers (idle1, gen1). */
static uint64_t probe_after_reports(struct boot_link fd[2], struct boot_buf *b, bool idle1,
                                    uint64_t gen1)
{
  send_state(&fd[0], false, 1);
  send_state(&fd[1], false, 1);
  uint64_t id = 0;
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], b), BOOT_PROBE);
    id = boot_get64(b);
  }
  reply_probe(&fd[0], id, true, 1);
  reply_probe(&fd[1], id, idle1, gen1);
  return id;
}

/* Both ranks get PROBE want, confirm their reports (gens g0, g1), and get STOP. */
static void probe_confirmed_to_stop(struct boot_link fd[2], struct boot_buf *b, uint64_t want,
                                    uint64_t g0, uint64_t g1)
{
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], b), BOOT_PROBE, "a probe, not STOP");
    cr_assert_eq(boot_get64(b), want, "rank %d: probe %" PRIu64 " (one probe per standing set)",
                 r, want);
  }
  for (int r = 0; r < 2; r++)
    reply_probe(&fd[r], want, true, r ? g1 : g0);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&fd[r], b), BOOT_STOP);
}

/* A rank reported idle, then worked without saying so (there is no busy report) and is idle
 * again: its probe reply's gen refutes the stale report, so no STOP, and none until it reports
 * again; its new report starts the probe that stops the run. */
Test(verbs, coordinator_stale_idle_report_then_activity_does_not_stop_the_run)
{
  struct two_ranks t;
  two_fake_ranks_begin(&t, 0);
  uint64_t id = probe_after_reports(t.fd, &t.b, true, 3);
  send_state(&t.fd[1], false, 3); /* idle again after its grace */
  probe_confirmed_to_stop(t.fd, &t.b, id + 1, 1, 3);
  two_fake_ranks_end(&t); /* the ranks go away before their results: not a completed run */
}

/* A probe finds a rank working (not idle) at the gen of its stale report: its report is void at
 * the coordinator, so another rank's report alone starts no probe (the voided rank is not idle
 * as far as the coordinator knows) until the voided rank reports again. */
Test(verbs, coordinator_probe_reply_voids_a_stale_report)
{
  struct two_ranks t;
  two_fake_ranks_begin(&t, 0);
  uint64_t id = probe_after_reports(t.fd, &t.b, false, 1);
  send_state(&t.fd[0], false, 1); /* rank 0 again (its report stands): no probe, rank 1 works */
  send_state(&t.fd[1], false, 2); /* rank 1 idle again: the next probe, the only one */
  probe_confirmed_to_stop(t.fd, &t.b, id + 1, 1, 2);
  two_fake_ranks_end(&t); /* the ranks go away before their results: not a completed run */
}

Test(verbs, coordinator_names_the_rank_that_never_came)
{
  struct coord_ctx c;
  pthread_t th;
  uint64_t t0 = boot_now_ns();
  start_coord(&c, 600000000ull, &th);
  struct boot_link fd = fake_hello(c.port, 0, &c.cfg);
  struct boot_buf b = {0};
  cr_assert_eq(recv_type(&fd, &b), BOOT_ABORT, "the rank that came is told");
  pthread_join(th, NULL);
  double dt = (boot_now_ns() - t0) / 1e9;
  cr_assert_eq(c.s, PP_IO);
  cr_assert(strstr(c.err, "rank(s) 1 did not connect to the coordinator at 127.0.0.1:"), "%s",
            c.err);
  cr_assert(dt < 3.0, "%.2f s", dt);
  close(fd.fd);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

/* An authenticated rank with another scenario is a member of this job misconfigured: the job
 * fails, and that rank learns why at once. */
Test(verbs, coordinator_rejects_another_scenario)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 3000000000ull, &th);
  struct pp_engine_cfg other = cfg2();
  other.workload.messages = 11;
  struct boot_link l;
  char err[512];
  cr_assert_eq(join(c.port, 1, &other, SECRET, &l, err, sizeof(err)), -1);
  cr_assert(strstr(err, "refused this rank: bootstrap: rank 1 runs a different scenario"), "%s",
            err);
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_INVALID);
  cr_assert(strstr(c.err, "rank 1 runs a different scenario configuration"), "%s", c.err);
  close(c.a.listen_fd);
}

Test(verbs, coordinator_aborts_when_a_rank_reports_a_failure)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  struct boot_link ok = fake_hello(c.port, 0, &c.cfg), bad;
  char err[512];
  /* rank 1 failed before its HELLO: it authenticates to say so (report_failure in verbsrun.c) */
  cr_assert_eq(join(c.port, 1, &c.cfg, SECRET, &bad, err, sizeof(err)), 0, "%s", err);
  boot_send_text(&bad, BOOT_ERROR, "rank 1: rxe0 port 1 is DOWN", boot_now_ns() + 1000000000ull);
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_IO);
  cr_assert(strstr(c.err, "rxe0 port 1 is DOWN"), "%s", c.err);
  struct boot_buf b = {0};
  cr_assert_eq(recv_type(&ok, &b), BOOT_ABORT);
  cr_assert(b.len > 0 && memmem(b.p, b.len, "port 1 is DOWN", 14), "the others learn why");
  boot_buf_free(&b);
  close(ok.fd);
  close(bad.fd);
  close(c.a.listen_fd);
}

/* ================================================================ the bootstrap under attack */

/* Both real ranks (joined and said HELLO) through the whole job: each gets the other's address
 * and conn_info (qp 100 + peer: not an impostor's), READY, GO, idle, probe, STOP, RESULT, BYE. */
static void drive_job(struct boot_link fd[2])
{
  struct boot_buf b = {0};
  for (uint32_t r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_TABLE);
    struct vnic_addr addr[2];
    bool has[2];
    struct pp_conn_info info[2];
    boot_get_table(&b, 2, addr, has, info);
    cr_assert_not(b.bad);
    cr_assert_eq(addr[1 - r].gid[15], 1 - r, "the real peer's address");
    cr_assert_eq(info[1 - r].qp_num[0], 100 + (1 - r), "the real peer's QP, not an impostor's");
    cr_assert_eq(boot_send(&fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_GO);
  boot_buf_free(&b);
  idle_done_to_bye(fd, 1);
}

/* drive_job, then the coordinator ended well; its result freed. */
static void job_completes(struct coord_ctx *c, pthread_t th, struct boot_link fd[2])
{
  drive_job(fd);
  coord_completed(c, th);
}

static void real_job(struct coord_ctx *c, pthread_t th)
{
  struct boot_link fd[2] = {fake_hello(c->port, 0, &c->cfg), fake_hello(c->port, 1, &c->cfg)};
  job_completes(c, th, fd);
}

/* PMIx runs (boot_coord_args.tables_exchanged): the ranks exchanged addresses and pp_conn_info
 * through the launcher and say READY right after HELLO; the coordinator sends no TABLE, goes
 * on to GO when every rank is READY, and runs the job as usual. Without the flag a READY before
 * the TABLE is refused. */
Test(verbs, coordinator_without_tables_for_pmix_runs)
{
  struct coord_ctx c;
  pthread_t th;
  coord_init(&c, 5000000000ull, 0);
  c.a.tables_exchanged = true;
  cr_assert_eq(pthread_create(&th, NULL, coord_thread, &c), 0);
  struct boot_link fd[2];
  struct boot_buf b = {0};
  for (uint32_t r = 0; r < 2; r++) { /* rank 0 READY before rank 1 even joined */
    fd[r] = fake_hello(c.port, r, &c.cfg);
    cr_assert_eq(boot_send(&fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&fd[r], &b), BOOT_GO, "GO, no TABLE");
  idle_done_to_bye(fd, 1);
  coord_completed(&c, th);

  /* the TCP bootstrap: a READY before the TABLE is a protocol error */
  start_coord(&c, 5000000000ull, &th);
  fd[0] = fake_hello(c.port, 0, &c.cfg);
  cr_assert_eq(boot_send(&fd[0], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  pthread_join(th, NULL);
  cr_assert_neq(c.s, PP_OK);
  cr_assert_not_null(strstr(c.err, "unexpected message"), "%s", c.err);
  close(fd[0].fd);
  close(c.a.listen_fd);
  boot_buf_free(&b);
}

/* A raw TCP connection to the coordinator (no handshake). */
static int raw_connect(uint16_t port)
{
  char err[256];
  int fd = boot_connect("127.0.0.1", port, boot_now_ns() + 5000000000ull, err, sizeof(err));
  cr_assert_geq(fd, 0, "%s", err);
  return fd;
}

/* Reads the coordinator's CHALLENGE on a raw connection; its nonce into nc. */
static void read_challenge(int fd, uint8_t nc[BOOT_NONCE_BYTES])
{
  struct boot_link l = boot_link_of(fd);
  struct boot_buf b = {0};
  cr_assert_eq(recv_type(&l, &b), BOOT_CHALLENGE);
  cr_assert_eq(b.len, BOOT_CHALLENGE_BYTES);
  cr_assert_eq(boot_get32(&b), BOOT_MAGIC);
  cr_assert_eq(boot_get32(&b), BOOT_VERSION);
  boot_get_bytes(&b, nc, BOOT_NONCE_BYTES);
  boot_buf_free(&b);
}

static void send_raw(int fd, const void *p, size_t n)
{
  cr_assert_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_frame(int fd, uint32_t type, const struct boot_buf *b)
{
  struct boot_link l = boot_link_of(fd);
  cr_assert_eq(boot_send(&l, type, b, boot_now_ns() + 1000000000ull), 0);
}

/* The coordinator closed this connection within `secs` (after what it had sent: a challenge, an
 * ABORT). Returns the type of the last frame it sent, 0 if none. */
static uint32_t closed_by_coordinator(int fd, double secs)
{
  struct boot_link l = boot_link_of(fd);
  struct boot_buf b = {0};
  uint32_t type = 0, last = 0;
  char err[128];
  int rc;
  while ((rc = boot_recv(&l, &type, &b, boot_now_ns() + (uint64_t)(secs * 1e9), err,
                         sizeof(err))) == 1)
    last = type;
  cr_assert_eq(rc, -1, "the connection was not closed within %.1f s", secs);
  boot_buf_free(&b);
  close(fd);
  return last;
}

/* Every line naming a dropped connection names its address, never a rank of the job. */
static void drops_blame_no_rank(struct coord_ctx *c)
{
  cr_assert_eq(logged(&c->log, "dropped the connection from", NULL),
               logged(&c->log, "dropped the connection from 127.0.0.1:", NULL), "%s",
               c->log.text);
  cr_assert_eq(logged(&c->log, "dropped", "rank 1 (", NULL), 0, "%s", c->log.text);
}

/* Impersonation: an old-style HELLO (the unkeyed scenario hash is all the old bootstrap asked
 * for), another job's secret, no secret (a MAC of zeros). None gets in, none disturbs the job;
 * the real rank 1 gets the real rank 0's QP. */
Test(boot_attack, impostors_are_dropped_and_logged)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  /* 1. bootstrap version 1's HELLO, as rank 1 with QP 666 */
  int v1 = raw_connect(c.port);
  struct boot_buf h = {0};
  boot_put32(&h, BOOT_MAGIC_V1);
  boot_put32(&h, 1);
  boot_put32(&h, 2);
  boot_put64(&h, boot_cfg_hash(&c.cfg));
  send_frame(v1, BOOT_HELLO, &h);
  cr_assert_eq(closed_by_coordinator(v1, 3), BOOT_CHALLENGE);
  /* 2. another job's secret */
  struct boot_link l;
  char err[512];
  cr_assert_eq(join(c.port, 1, &c.cfg, OTHER_SECRET, &l, err, sizeof(err)), -1);
  cr_assert(strstr(err, "refused this rank: authentication failed"), "%s", err);
  /* 3. no secret: a well-formed AUTH with a MAC of zeros */
  int ns = raw_connect(c.port);
  uint8_t nc[BOOT_NONCE_BYTES], nr[BOOT_NONCE_BYTES] = {7};
  read_challenge(ns, nc);
  struct boot_buf a = {0};
  boot_put_auth(&a, 1, 2, boot_cfg_hash(&c.cfg), SECRET, nc, nr);
  memset(a.p + BOOT_AUTH_BYTES - BOOT_TAG_BYTES, 0, BOOT_TAG_BYTES);
  send_frame(ns, BOOT_AUTH, &a);
  cr_assert_eq(closed_by_coordinator(ns, 3), BOOT_ABORT);
  real_job(&c, th);
  cr_assert_eq(logged(&c.log, "HELLO without authenticating", NULL), 1, "%s", c.log.text);
  cr_assert_eq(logged(&c.log, "failed authentication", NULL), 2, "%s", c.log.text);
  drops_blame_no_rank(&c);
  boot_buf_free(&h);
  boot_buf_free(&a);
}

/* A genuine AUTH (made with the secret) for one connection's challenge, replayed on another: the
 * nonces differ, so it fails there. */
Test(boot_attack, replayed_auth_is_dropped)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  int seen = raw_connect(c.port);
  uint8_t nc[BOOT_NONCE_BYTES], nc2[BOOT_NONCE_BYTES], nr[BOOT_NONCE_BYTES] = {9};
  read_challenge(seen, nc);
  struct boot_buf a = {0};
  boot_put_auth(&a, 1, 2, boot_cfg_hash(&c.cfg), SECRET, nc, nr); /* what went by on the wire */
  close(seen);
  int replay = raw_connect(c.port);
  read_challenge(replay, nc2);
  cr_assert_neq(memcmp(nc, nc2, sizeof(nc)), 0, "a fresh challenge per connection");
  send_frame(replay, BOOT_AUTH, &a);
  cr_assert_eq(closed_by_coordinator(replay, 3), BOOT_ABORT);
  real_job(&c, th);
  cr_assert_eq(logged(&c.log, "failed authentication", "replayed", NULL), 1, "%s", c.log.text);
  drops_blame_no_rank(&c);
  boot_buf_free(&a);
}

/* Junk, and an unauthenticated ERROR (it once aborted the job, blaming "a rank"). */
Test(boot_attack, junk_is_dropped_and_the_job_goes_on)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  int j = raw_connect(c.port);
  send_raw(j, "GET / HTTP/1.0\r\n\r\n\x01\x02\xff\xfe", 22);
  closed_by_coordinator(j, 3);
  int e = raw_connect(c.port);
  struct boot_link el = boot_link_of(e);
  boot_send_text(&el, BOOT_ERROR, "rank 1: fake failure", boot_now_ns() + 1000000000ull);
  closed_by_coordinator(e, 3);
  real_job(&c, th);
  cr_assert_eq(logged(&c.log, "sent junk", NULL), 2, "%s", c.log.text);
  drops_blame_no_rank(&c);
}

/* Frames cut short (closed, or stalled past the deadline), too big, or of the wrong size. */
Test(boot_attack, truncated_and_oversized_frames_are_dropped)
{
  struct coord_ctx c;
  pthread_t th;
  coord_init(&c, 10000000000ull, 0);
  c.a.auth_timeout_ns = 500000000ull;
  cr_assert_eq(pthread_create(&th, NULL, coord_thread, &c), 0);
  uint8_t h[8 + 10] = {BOOT_AUTH, 0, 0, 0, BOOT_AUTH_BYTES, 0, 0, 0, 'P', 'P'};
  int cut = raw_connect(c.port), stall = raw_connect(c.port), big = raw_connect(c.port);
  int small = raw_connect(c.port);
  send_raw(cut, h, sizeof(h));
  shutdown(cut, SHUT_WR);
  send_raw(stall, h, sizeof(h));
  uint8_t huge[8] = {BOOT_AUTH, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f};
  send_raw(big, huge, sizeof(huge));
  struct boot_buf s16 = {0};
  boot_put_bytes(&s16, h, 8);
  boot_put_bytes(&s16, huge, 8);
  send_frame(small, BOOT_AUTH, &s16);
  closed_by_coordinator(cut, 3);
  closed_by_coordinator(big, 3);
  closed_by_coordinator(small, 3);
  closed_by_coordinator(stall, 3); /* at its deadline */
  real_job(&c, th);
  cr_assert_eq(logged(&c.log, "closed in the middle of a frame (truncated)", NULL), 1, "%s",
               c.log.text);
  cr_assert_eq(logged(&c.log, "18 byte(s) of a frame in 0.5 s", NULL), 1, "%s", c.log.text);
  cr_assert_eq(logged(&c.log, "larger than allowed (2147483647 bytes, at most 256", NULL), 1,
               "%s", c.log.text);
  cr_assert_eq(logged(&c.log, "an AUTH of 16 bytes (88 expected)", NULL), 1, "%s", c.log.text);
  drops_blame_no_rank(&c);
  boot_buf_free(&s16);
}

/* Another bootstrap version, each way: the coordinator drops it (and says why), a rank refuses a
 * coordinator of another version. */
Test(boot_attack, another_version_is_refused_both_ways)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  const uint8_t other = (uint8_t)(BOOT_VERSION + 1);
  char want[96];
  int vx = raw_connect(c.port);
  uint8_t nc[BOOT_NONCE_BYTES], nr[BOOT_NONCE_BYTES] = {3};
  read_challenge(vx, nc);
  struct boot_buf a = {0};
  boot_put_auth(&a, 1, 2, boot_cfg_hash(&c.cfg), SECRET, nc, nr);
  a.p[4] = other; /* the next version */
  send_frame(vx, BOOT_AUTH, &a);
  cr_assert_eq(closed_by_coordinator(vx, 3), BOOT_ABORT);
  real_job(&c, th);
  snprintf(want, sizeof(want), "speaks bootstrap version %u, this coordinator %u", other,
           BOOT_VERSION);
  cr_assert_eq(logged(&c.log, want, NULL), 1, "%s", c.log.text);
  drops_blame_no_rank(&c);
  /* a coordinator of the next version */
  char err[256];
  uint16_t p = 0;
  int lfd = boot_listen("127.0.0.1", &p, err, sizeof(err));
  int rfd = raw_connect(p), cfd = accept(lfd, NULL, NULL);
  uint8_t ch[BOOT_CHALLENGE_BYTES] = {'P', 'P', 'B', 'T', other};
  struct boot_buf cb = {0};
  boot_put_bytes(&cb, ch, sizeof(ch));
  send_frame(cfd, BOOT_CHALLENGE, &cb);
  struct boot_link rl = boot_link_of(rfd);
  cr_assert_eq(boot_rank_auth(&rl, 1, &c.cfg, SECRET, boot_now_ns() + 2000000000ull, err,
                              sizeof(err)),
               -1);
  snprintf(want, sizeof(want), "the coordinator speaks bootstrap version %u, this rank %u", other,
           BOOT_VERSION);
  cr_assert(strstr(err, want), "%s", err);
  close(rfd);
  close(cfd);
  close(lfd);
  boot_buf_free(&a);
  boot_buf_free(&cb);
}

/* Mutual: a "coordinator" without the secret cannot pass itself off as the real one. */
Test(boot_attack, a_rank_refuses_a_coordinator_without_the_secret)
{
  char err[256];
  uint16_t p = 0;
  int lfd = boot_listen("127.0.0.1", &p, err, sizeof(err));
  int rfd = raw_connect(p), cfd = accept(lfd, NULL, NULL);
  uint8_t ch[BOOT_CHALLENGE_BYTES] = {'P', 'P', 'B', 'T', BOOT_VERSION};
  struct boot_buf cb = {0}, ok = {0};
  boot_put_bytes(&cb, ch, sizeof(ch));
  send_frame(cfd, BOOT_CHALLENGE, &cb);
  uint8_t guess[BOOT_TAG_BYTES] = {0};
  boot_put_bytes(&ok, guess, sizeof(guess));
  send_frame(cfd, BOOT_AUTH_OK, &ok); /* before the AUTH even came: it does not need it */
  struct pp_engine_cfg cfg = cfg2();
  struct boot_link rl = boot_link_of(rfd);
  cr_assert_eq(boot_rank_auth(&rl, 1, &cfg, SECRET, boot_now_ns() + 2000000000ull, err,
                              sizeof(err)),
               -1);
  cr_assert(strstr(err, "did not prove it holds the job secret"), "%s", err);
  cr_assert_not(rl.keyed);
  close(rfd);
  close(cfd);
  close(lfd);
  boot_buf_free(&cb);
  boot_buf_free(&ok);
}

/* Slowloris: silent and one-byte clients do not hold the coordinator: a real rank that comes
 * after them is in at once, and each is dropped at its own deadline, not at the boot timeout. */
Test(boot_attack, slow_and_silent_clients_hold_nobody)
{
  struct coord_ctx c;
  pthread_t th;
  coord_init(&c, 20000000000ull, 0);
  c.a.auth_timeout_ns = 1500000000ull;
  cr_assert_eq(pthread_create(&th, NULL, coord_thread, &c), 0);
  int slow[5];
  uint64_t t0 = boot_now_ns();
  for (int i = 0; i < 5; i++) {
    slow[i] = raw_connect(c.port);
    if (i)
      send_raw(slow[i], "\x0f", 1); /* the first byte of an AUTH header, then nothing */
  }
  uint64_t t1 = boot_now_ns();
  struct boot_link fd[2];
  fd[0] = fake_hello(c.port, 0, &c.cfg);
  double in = (boot_now_ns() - t1) / 1e9;
  cr_assert_lt(in, 1.0, "rank 0 waited %.2f s behind the slow clients", in);
  for (int i = 0; i < 5; i++) {
    closed_by_coordinator(slow[i], 5);
    double at = (boot_now_ns() - t0) / 1e9;
    cr_assert(at >= 1.4 && at < 5.0, "slow client %d dropped after %.2f s (its deadline: 1.5 s)",
              i, at);
  }
  fd[1] = fake_hello(c.port, 1, &c.cfg);
  job_completes(&c, th, fd);
  cr_assert_eq(logged(&c.log, "no authentication within 1.5 s (silent)", NULL), 1, "%s",
               c.log.text);
  cr_assert_eq(logged(&c.log, "1 byte(s) of a frame in 1.5 s", NULL), 4, "%s", c.log.text);
  drops_blame_no_rank(&c);
}

/* 1,100 connections (more than the listen backlog and 17 times the pending limit of 64): the
 * oldest unauthenticated ones are shed, the authenticated rank 0 is never closed, and rank 1
 * still gets in after them. */
Test(boot_attack, a_flood_of_connections_closes_no_real_rank)
{
  struct coord_ctx c;
  pthread_t th;
  struct boot_coord_stats stats = {0};
  coord_init(&c, 30000000000ull, 0);
  c.a.stats = &stats;
  cr_assert_eq(pthread_create(&th, NULL, coord_thread, &c), 0);
  struct boot_link fd[2];
  fd[0] = fake_hello(c.port, 0, &c.cfg);
  enum { FLOOD = 1100 };
  static int f[FLOOD];
  for (int i = 0; i < FLOOD; i++) {
    f[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert_geq(f[i], 0, "socket %d: %s", i, strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = connect(f[i], (struct sockaddr *)&sa, sizeof(sa));
    cr_assert(rc == 0 || errno == EINPROGRESS, "connect %d: %s", i, strerror(errno));
  }
  /* every one accepted (a challenge or the close is there to read) before rank 1 comes */
  uint64_t dl = boot_now_ns() + 60000000000ull;
  for (int i = 0; i < FLOOD; i++) {
    struct pollfd p = {.fd = f[i], .events = POLLIN};
    while (poll(&p, 1, 100) == 0)
      cr_assert_lt(boot_now_ns(), dl, "connection %d never accepted", i);
  }
  fd[1] = fake_hello(c.port, 1, &c.cfg);
  job_completes(&c, th, fd);
  for (int i = 0; i < FLOOD; i++)
    close(f[i]);
  cr_assert_eq(logged(&c.log, "64 unauthenticated connections were held (the limit) and it was "
                              "the oldest", NULL),
               BOOT_LOG_LINES, "%s", c.log.text);
  cr_assert_eq(logged(&c.log, "1100 unauthenticated connection(s) dropped in all", NULL), 1,
               "%s", c.log.text);
  cr_assert_eq(stats.dropped, FLOOD);
  drops_blame_no_rank(&c);
}

/* fd exhaustion, in a child process with RLIMIT_NOFILE low: the coordinator cannot accept (and
 * holds no unauthenticated connection to shed), so it rests its listen socket instead of
 * spinning on it, and takes the waiting ranks once descriptors are free again. */
struct exhaust_report {
  enum pp_status s;
  double cpu_s; /* the coordinator process's CPU time during one second of exhaustion */
  int nnull;
  struct boot_coord_stats stats;
  char err[256];
  char log[2048];
};

static double cpu_now(void)
{
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
         ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) / 1e6;
}

static void exhausted_coordinator(struct coord_ctx *c, int go_fd, int report_fd)
{
  struct exhaust_report rep = {0};
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = 64;
  c->a.stats = &rep.stats;
  pthread_t th;
  if (setrlimit(RLIMIT_NOFILE, &rl) || pthread_create(&th, NULL, coord_thread, c))
    _exit(2);
  int nul[64];
  while (rep.nnull < 64 && (nul[rep.nnull] = open("/dev/null", O_RDONLY)) >= 0)
    rep.nnull++;
  if (write(go_fd, "x", 1) != 1) /* the ranks may come */
    _exit(3);
  double c0 = cpu_now();
  usleep(1000000);
  rep.cpu_s = cpu_now() - c0;
  for (int i = 0; i < rep.nnull; i++)
    close(nul[i]);
  pthread_join(th, NULL);
  rep.s = c->s;
  snprintf(rep.err, sizeof(rep.err), "%.255s", c->err);
  snprintf(rep.log, sizeof(rep.log), "%.2047s", c->log.text);
  if (write(report_fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
    _exit(4);
  _exit(0);
}

Test(boot_attack, fd_exhaustion_does_not_spin)
{
  struct coord_ctx c;
  coord_init(&c, 20000000000ull, 0);
  int go[2], rep[2];
  cr_assert_eq(pipe(go), 0);
  cr_assert_eq(pipe(rep), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0)
    exhausted_coordinator(&c, go[1], rep[1]);
  char x;
  cr_assert_eq(read(go[0], &x, 1), 1, "the child did not start");
  struct boot_link fd[2];
  fd[0] = fake_hello(c.port, 0, &c.cfg); /* waits in the backlog until the child frees fds */
  fd[1] = fake_hello(c.port, 1, &c.cfg);
  drive_job(fd);
  struct exhaust_report r;
  cr_assert_eq(read(rep[0], &r, sizeof(r)), (ssize_t)sizeof(r));
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  cr_assert_eq(r.s, PP_OK, "%s", r.err);
  cr_assert_gt(r.nnull, 0, "the descriptor table was filled");
  /* at most one accept() per 100 ms rest: ~10 in the second the table is full (a spinning
   * coordinator made thousands even when a loaded machine gave it a sixth of a core) */
  cr_assert_geq(r.stats.accept_errors, 1);
  cr_assert_lt(r.stats.accept_errors, 40, "%u failed accepts", r.stats.accept_errors);
  cr_assert_lt(r.cpu_s, 0.3, "the coordinator used %.2f s of CPU in 1 s of EMFILE", r.cpu_s);
  cr_assert(strstr(r.log, "bootstrap: accept on 127.0.0.1:") &&
                strstr(r.log, "Too many open files: new connections wait"),
            "%s", r.log);
  close(c.a.listen_fd);
}

/* A rank number is claimed once: a second authenticated claim (two processes with --rank 1) is
 * dropped and named; the job goes on with the first. */
Test(boot_attack, a_rank_is_claimed_once)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  struct boot_link fd[2], twin;
  fd[1] = fake_hello(c.port, 1, &c.cfg);
  char err[512];
  cr_assert_eq(join(c.port, 1, &c.cfg, SECRET, &twin, err, sizeof(err)), -1);
  cr_assert(strstr(err, "refused this rank: this rank number is taken"), "%s", err);
  fd[0] = fake_hello(c.port, 0, &c.cfg);
  job_completes(&c, th, fd);
  cr_assert_eq(logged(&c.log, "authenticated as rank 1, which 127.0.0.1:", "already is", NULL), 1,
               "%s", c.log.text);
}

/* What a peer says is printed escaped: no terminal control sequences, bounded length. */
Test(boot_attack, peer_text_is_sanitised)
{
  char out[32];
  cr_assert_str_eq(boot_sanitize("ok\x1b[2J\n", 7, out, sizeof(out)), "ok\\x1b[2J\\x0a");
  cr_assert_str_eq(boot_sanitize("0123456789012345678901234567890123456789", 40, out, 16),
                   "012345678901...");
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 10000000000ull, &th);
  struct boot_link ok = fake_hello(c.port, 0, &c.cfg), bad;
  cr_assert_eq(join(c.port, 1, &c.cfg, SECRET, &bad, out, sizeof(out)), 0);
  say_hello(&bad, 1, 101, "evil\x1b]0;owned\x07");
  boot_send_text(&bad, BOOT_ERROR, "\x1b[2J\x1b[31mfake\r\n", boot_now_ns() + 1000000000ull);
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_IO);
  cr_assert(strstr(c.err, "rank 1 failed: \\x1b[2J\\x1b[31mfake\\x0d\\x0a"), "%s", c.err);
  for (const char *p = c.err; *p; p++)
    cr_assert(*p >= 0x20 && *p <= 0x7e, "byte %#x in '%s'", *p, c.err);
  close(ok.fd);
  close(bad.fd);
  close(c.a.listen_fd);
}

/* ================================================================ the job secret */

static void write_file(const char *path, const void *p, size_t n, mode_t mode)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, p, n), (ssize_t)n);
  cr_assert_eq(fchmod(fd, mode), 0);
  close(fd);
}

Test(boot, secret_files_and_environment)
{
  char dir[] = "/tmp/prepost-secret-XXXXXX", path[64], err[256];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/job.secret", dir);
  uint8_t s[BOOT_SECRET_BYTES], t[BOOT_SECRET_BYTES];
  write_file(path, SECRET, sizeof(SECRET), 0600);
  cr_assert_eq(boot_secret_load(path, s, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(memcmp(s, SECRET, sizeof(s)), 0, "32 raw bytes");
  char hex[2 * BOOT_SECRET_BYTES + 2];
  for (unsigned i = 0; i < BOOT_SECRET_BYTES; i++)
    snprintf(hex + 2 * i, 3, "%02x", SECRET[i]);
  strcat(hex, "\n");
  write_file(path, hex, strlen(hex), 0400);
  cr_assert_eq(boot_secret_load(path, t, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(memcmp(t, SECRET, sizeof(t)), 0, "64 hex digits and a newline");
  write_file(path, hex, strlen(hex), 0640);
  cr_assert_eq(boot_secret_load(path, t, err, sizeof(err)), -1);
  cr_assert(strstr(err, "others can access it (mode 640): chmod 600 it"), "%s", err);
  write_file(path, "short", 5, 0600);
  cr_assert_eq(boot_secret_load(path, t, err, sizeof(err)), -1);
  cr_assert(strstr(err, "expected 32 bytes or 64 hex digits, got 5 bytes"), "%s", err);
  cr_assert_eq(boot_secret_load(dir, t, err, sizeof(err)), -1);
  cr_assert(strstr(err, "not a regular file"), "%s", err);
  unlink(path);
  rmdir(dir);
  unsetenv("PREPOST_JOB_SECRET_FILE");
  unsetenv("PREPOST_JOB_SECRET");
  cr_assert_eq(boot_secret_from_env(t, err, sizeof(err)), 0);
  hex[2 * BOOT_SECRET_BYTES] = '\0';
  setenv("PREPOST_JOB_SECRET", hex, 1);
  memset(t, 0, sizeof(t));
  cr_assert_eq(boot_secret_from_env(t, err, sizeof(err)), 1, "%s", err);
  cr_assert_eq(memcmp(t, SECRET, sizeof(t)), 0);
  setenv("PREPOST_JOB_SECRET", "abcd", 1);
  cr_assert_eq(boot_secret_from_env(t, err, sizeof(err)), -1);
  unsetenv("PREPOST_JOB_SECRET");
  cr_assert_eq(boot_secret_generate(s, err, sizeof(err)), 0);
  cr_assert_eq(boot_secret_generate(t, err, sizeof(err)), 0);
  cr_assert_neq(memcmp(s, t, sizeof(s)), 0);
}

/* Frames after the handshake carry a MAC: one altered byte and the receiver refuses it. */
Test(boot, keyed_frames_refuse_an_altered_byte)
{
  int sv[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  struct boot_link a = {.fd = sv[0], .keyed = true}, b = {.fd = sv[1], .keyed = true};
  memcpy(a.tx_key, SECRET, sizeof(a.tx_key));
  memcpy(b.rx_key, SECRET, sizeof(b.rx_key));
  struct boot_buf m = {0}, got = {0};
  boot_put64(&m, 42);
  cr_assert_eq(boot_send(&a, BOOT_STATE, &m, boot_now_ns() + 1000000000ull), 0);
  uint32_t type;
  char err[200];
  cr_assert_eq(boot_recv(&b, &type, &got, boot_now_ns() + 1000000000ull, err, sizeof(err)), 1,
               "%s", err);
  cr_assert_eq(boot_get64(&got), 42);
  /* the same frame again (a replay within the connection): the sequence number differs */
  a.tx_seq = 0;
  cr_assert_eq(boot_send(&a, BOOT_STATE, &m, boot_now_ns() + 1000000000ull), 0);
  cr_assert_eq(boot_recv(&b, &type, &got, boot_now_ns() + 1000000000ull, err, sizeof(err)), -1);
  cr_assert(strstr(err, "failed authentication"), "%s", err);
  /* through a man in the middle: as sent it verifies, one payload byte altered it does not */
  int mitm[2];
  cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, mitm), 0);
  struct boot_link a2 = a;
  a2.fd = mitm[0];
  for (int flip = 0; flip < 2; flip++) {
    uint8_t f[8 + 8 + BOOT_TAG_BYTES];
    a2.tx_seq = b.rx_seq;
    cr_assert_eq(boot_send(&a2, BOOT_STATE, &m, boot_now_ns() + 1000000000ull), 0);
    cr_assert_eq(read(mitm[1], f, sizeof(f)), (ssize_t)sizeof(f));
    f[8] ^= (uint8_t)flip;
    cr_assert_eq(write(sv[0], f, sizeof(f)), (ssize_t)sizeof(f));
    cr_assert_eq(boot_recv(&b, &type, &got, boot_now_ns() + 1000000000ull, err, sizeof(err)),
                 flip ? -1 : 1, "flip %d: %s", flip, err);
  }
  close(mitm[0]);
  close(mitm[1]);
  close(sv[0]);
  close(sv[1]);
  boot_buf_free(&m);
  boot_buf_free(&got);
}

/* ================================================================ CLI */

static char tmpdir[64];
static char *out, *errs;

static int cli(const char *args)
{
  if (!tmpdir[0])
    scratch_make(tmpdir, sizeof(tmpdir), "verbs");
  free(out);
  free(errs);
  char cmd[2048], p[128];
  snprintf(cmd, sizeof(cmd), "timeout 60 '%s' %s > '%s/out' 2> '%s/err' < /dev/null",
           PREPOST_CLI, args, tmpdir, tmpdir);
  int st = system(cmd);
  cr_assert(WIFEXITED(st));
  snprintf(p, sizeof(p), "%s/out", tmpdir);
  out = scratch_slurp(p, NULL);
  snprintf(p, sizeof(p), "%s/err", tmpdir);
  errs = scratch_slurp(p, NULL);
  return WEXITSTATUS(st);
}

#define assert_has(hay, needle)                                                \
  cr_assert_not_null(strstr((hay), (needle)), "'%s' not in:\n%s", (needle), (hay))

Test(verbs_cli, doctor_always_ends_with_a_verdict)
{
  int rc = cli("doctor");
  cr_assert(rc == 0 || rc == 1, "exit %d", rc);
  assert_has(out, "memlock");
  assert_has(out, "verdict");
  if (rc == 1)
    cr_assert(strstr(out, "NO DEVICE") || strstr(out, "NOT READY"), "%s", out);
  else
    assert_has(out, "READY");
  rc = cli("doctor --device nosuchdev0");
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "NO DEVICE") || strstr(out, "no RDMA device named 'nosuchdev0'"), "%s",
            out);
  cr_assert_eq(cli("doctor --bogus"), 2);
  cr_assert_eq(cli("doctor --help"), 0);
  assert_has(out, "usage: prepost doctor");
}

Test(verbs_cli, missing_device_is_exit_4_with_the_reason)
{
  uint64_t t0 = boot_now_ns();
  int rc = cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --device nosuchdev0");
  cr_assert_eq(rc, 4, "exit %d\n%s", rc, errs);
  assert_has(errs, "verbs backend: no RDMA device");
  cr_assert_eq(out[0], '\0');
  cr_assert((boot_now_ns() - t0) / 1e9 < 10);
  rc = cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --device nosuchdev0 --rank 1 "
           "--ranks 127.0.0.1:1,127.0.0.1 --boot-timeout 1s");
  cr_assert_eq(rc, 2, "a rank table run without the job secret: exit %d\n%s", rc, errs);
  assert_has(errs, "needs the job's secret on every host: set PREPOST_JOB_SECRET_FILE");
  setenv("PREPOST_JOB_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
         1);
  rc = cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --device nosuchdev0 --rank 1 "
           "--ranks 127.0.0.1:1,127.0.0.1 --boot-timeout 1s");
  unsetenv("PREPOST_JOB_SECRET");
  cr_assert_eq(rc, 4, "exit %d\n%s", rc, errs);
  assert_has(errs, "rank 1: no RDMA device");
  /* --trace: no rank ran, so there is nothing to merge and no file (a sentence says so) */
  char args[1024], path[256];
  snprintf(path, sizeof(path), "%s/none.trace", tmpdir);
  snprintf(args, sizeof(args),
           "run " SCENARIOS "fast-consumer.yaml --backend verbs --device nosuchdev0 --trace %s",
           path);
  rc = cli(args);
  cr_assert_eq(rc, 4, "exit %d\n%s", rc, errs);
  assert_has(errs, "no rank left a trace");
  cr_assert_neq(access(path, F_OK), 0, "no trace file");
  rc = cli("bench --device nosuchdev0");
  cr_assert_eq(rc, 4, "exit %d\n%s", rc, errs);
  assert_has(errs, "no RDMA device");
}

Test(verbs_cli, usage_errors)
{
  const char *bad[][2] = {
      {"--backend nosuch", "--backend must be simgrid or verbs, got 'nosuch'"},
      {"--backend verbs --rank 1", "--rank and --ranks go together"},
      {"--backend verbs --ranks a,b", "--rank and --ranks go together"},
      {"--backend verbs --ib-port 0", "--ib-port must be an integer 1..255, got '0'"},
      {"--backend verbs --gid-index x", "--gid-index must be an integer 0..255"},
      {"--backend verbs --timeout -1", "--timeout must not be negative"},
      {"--backend verbs --timeout 10", "--timeout needs a unit: a duration such as 500ns"},
      {"--backend=verbs --timeout=0", "--timeout must be a duration 1ns.."},
      {"--backend verbs --port 70000", "--port must be an integer 0..65535"},
      {"--backend verbs --frobnicate", "unknown option '--frobnicate'"},
      {"--backend verbs --no-progress soon", "--no-progress must be a duration such as 500ns"},
      {"--backend verbs --no-progress", "option '--no-progress' needs a value"},
      {"--backend verbs --trace", "option '--trace' needs a value"},
      {"--backend verbs --progress spin", "--progress must be busy or event, got 'spin'"},
      {"--backend verbs --progress", "option '--progress' needs a value"},
      {"--backend verbs --set qp.rnr_retry=9", "--set qp.rnr_retry=9: 'rnr_retry' must be"},
      {"--backend verbs --launch slurm",
       "--launch must be auto, fork, table, env or pmix, got 'slurm'"},
      {"--backend verbs --launch", "option '--launch' needs a value"},
      {"--backend verbs --coordinator host:99999", "--coordinator wants HOST[:PORT], got"},
      {"--backend verbs --coordinator", "option '--coordinator' needs a value"},
      {"--backend verbs --launch table", "--launch table needs --rank R --ranks TABLE"},
      {"--backend verbs --launch fork --rank 0 --ranks 127.0.0.1,127.0.0.1",
       "--rank and --ranks go with --launch table"},
      /* the environment of `prepost` here has no launcher's variables */
      {"--backend verbs --launch env", "no launcher variables tell this process its rank"},
      {"--backend verbs --coordinator 127.0.0.1:1", "no launcher variables tell this process"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char args[512];
    snprintf(args, sizeof(args), "run " SCENARIOS "fast-consumer.yaml %s", bad[i][0]);
    int rc = cli(args);
    cr_assert_eq(rc, 2, "%s: exit %d", bad[i][0], rc);
    assert_has(errs, bad[i][1]);
  }
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --rank 1 --ranks "
                   "127.0.0.1"),
               2, "the table has 1 entry, the scenario 2 ranks: %s", errs);
  /* Open MPI's environment without PMIx: rank and size from it, checked against the scenario */
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --coordinator "
                   "127.0.0.1:1 --launch env"), 2);
  cr_assert_eq(setenv("OMPI_COMM_WORLD_RANK", "1", 1), 0);
  cr_assert_eq(setenv("OMPI_COMM_WORLD_SIZE", "3", 1), 0);
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --coordinator "
                   "127.0.0.1:1"), 2);
  assert_has(errs, "the launcher started 3 processes (Open MPI (OMPI_COMM_WORLD_RANK/SIZE)), "
                   "the scenario has 2 ranks");
  cr_assert_eq(setenv("OMPI_COMM_WORLD_SIZE", "2", 1), 0);
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend verbs --coordinator "
                   "127.0.0.1:1"), 2);
  assert_has(errs, "needs the job's secret");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  cr_assert_eq(cli("run --backend verbs --help"), 0);
  assert_has(out, "usage: prepost run SCENARIO --backend verbs");
  cr_assert_eq(cli("bench --iters 1"), 2);
  assert_has(errs, "--iters must be an integer 10..10000000, got '1'");
  const char *bench_bad[][2] = {
      {"--rows raw_send,nosuch", "--rows must name rows among raw_send"},
      {"--rows ''", "--rows must name rows"},
      {"--rows", "option '--rows' needs a value"},
      {"--sizes 0", "--sizes must be a size 1..8388608 bytes, got '0'"},
      {"--sizes 64,16MiB", "--sizes must be a size 1..8388608 bytes, got '16MiB'"},
      {"--sizes 4KiB,x", "--sizes must be a size such as 4096"},
      {"--sizes ,", "--sizes wants a comma-separated list of sizes"},
      {"--test all", "--test must be lat, bw or both, got 'all'"},
      {"--lat-size 9MiB", "--lat-size must be a size 1..8388608 bytes, got '9MiB'"},
      {"--lat-size 9M", "--lat-size must be a size such as 4096"},
      {"--report_gbits --frobnicate 1", "unknown option '--frobnicate'"},
      {"-a --all --report_gbits extra", "unexpected argument 'extra'"},
  };
  for (size_t i = 0; i < sizeof(bench_bad) / sizeof(bench_bad[0]); i++) {
    char args[256];
    snprintf(args, sizeof(args), "bench %s", bench_bad[i][0]);
    cr_assert_eq(cli(args), 2, "bench %s: exit 2", bench_bad[i][0]);
    assert_has(errs, bench_bad[i][1]);
  }
  cr_assert_eq(cli("bench --help"), 0);
  assert_has(out, "--report_gbits");
  assert_has(out, "t_typical (the median)");
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend simgrid --json"), 0,
               "--backend simgrid is the default backend: %s", errs);
  assert_has(out, "\"backend\": \"simgrid\"");
}

/* ================================================================ hang reports (prepost/hang.h) */

static const struct pp_wait rank0_waits[] = {
    {.kind = PP_WAIT_CTS, .peer = 1, .tag = 1,
     .what = "rndv send tag 1 (65536 bytes) to rank 1 waits for CTS"}};
static const struct pp_wait rank1_waits[] = {
    {.kind = PP_WAIT_UNMATCHED, .peer = 0, .tag = 2, .what = "receive (rank 0, tag 2) never matched"},
    {.kind = PP_WAIT_UNEXPECTED, .peer = 0, .tag = 1, .what = "rndv RTS from rank 0 tag 1"}};

static uint64_t test_now(struct coord_ctx *c)
{
  return __atomic_load_n(&c->now, __ATOMIC_SEQ_CST);
}

/* Every byte sent on l is in the coordinator's socket (acknowledged, SIOCOUTQ 0): there to be
 * read when it next looks (it reads what waits before it asks or judges). */
static void delivered(const struct boot_link *l)
{
  uint64_t dl = boot_now_ns() + 30000000000ull;
  for (;;) {
    int q = 0;
    cr_assert_eq(ioctl(l->fd, SIOCOUTQ, &q), 0, "SIOCOUTQ: %s", strerror(errno));
    if (q == 0)
      return;
    cr_assert_lt(boot_now_ns(), dl, "the coordinator took nothing for 30 s");
    usleep(1000);
  }
}

/* Moves the judgement clock by ns once what both ranks said is with the coordinator. */
static void advance(struct coord_ctx *c, struct boot_link fd[2], uint64_t ns)
{
  delivered(&fd[0]);
  delivered(&fd[1]);
  __atomic_add_fetch(&c->now, ns, __ATOMIC_SEQ_CST);
}

/* The next message on l, the judgement clock moved by `step` whenever none is there. How often
 * it moves depends on the machine's speed; the tests assert only what holds however often. */
static uint32_t recv_advancing(struct coord_ctx *c, struct boot_link fd[2], struct boot_link *l,
                               struct boot_buf *b, uint64_t step)
{
  for (int i = 0; i < 5000; i++) {
    struct pollfd pf = {.fd = l->fd, .events = POLLIN};
    int k = poll(&pf, 1, 20);
    cr_assert_geq(k, 0, "poll: %s", strerror(errno));
    if (k > 0)
      return recv_type(l, b);
    advance(c, fd, step);
  }
  cr_assert_fail("no message in 5,000 steps of the clock");
  return 0;
}

/* Busy ranks (a timer each: never idle) that stop telling PROGRESS: the coordinator stops the run
 * after the bound, collects the ranks' waits and names the cause. */
static void mark_answer(struct boot_link *l, uint64_t id, bool moved)
{
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, moved);
  cr_assert_eq(boot_send(l, BOOT_MARK_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&o);
}

/* What the fake ranks' devices say: rank 0's QP 10 and rank 1's QP 11, connected to each other;
 * rank 0's requester has sent up to PSN 500, rank 1's responder expects rq_psn (rank 1's
 * requester and rank 0's responder match, at 90). */
struct fake_dev {
  uint32_t rq_psn;
  uint32_t outstanding, takes_recv; /* rank 0's send WRs not completed, those that take a receive */
  uint32_t rq_posted;               /* receives posted at rank 1's QP */
};

static void fake_qps(struct boot_buf *o, uint32_t rank, const struct fake_dev *d)
{
  struct vnic_qp_state q = {.qpn = 10 + rank, .peer = !rank, .dest_qpn = 10 + !rank, .state = 3,
                            .sq_psn = rank ? 90 : 500, .rq_psn = rank ? d->rq_psn : 90,
                            .sq_outstanding = rank ? 0 : d->outstanding,
                            .sq_takes_recv = rank ? 0 : d->takes_recv,
                            .rq_posted = rank ? d->rq_posted : 16};
  boot_put_qps(o, &q, 1, 1);
}

static void mark_answer_qps(struct boot_link *l, uint64_t id, uint32_t rank,
                            const struct fake_dev *d)
{
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, false);
  fake_qps(&o, rank, d);
  cr_assert_eq(boot_send(l, BOOT_MARK_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&o);
}

/* The end of a run stopped before it was done: both fake ranks send their RESULT (not done,
 * their waits, their QPs when d is not NULL), get BYE with `want` and hang up; the coordinator
 * returns `want`. */
static void end_stuck(struct two_ranks *t, const struct fake_dev *d, enum pp_outcome want)
{
  for (int r = 0; r < 2; r++) {
    struct pp_rank_result rr = {0};
    rr.stats.status_counts[PP_WC_SUCCESS] = 1;
    snprintf(rr.host, sizeof(rr.host), "fakehost/fake0");
    struct boot_buf o = {0};
    boot_put_result(&o, &rr, NULL);
    boot_put_waits(&o, r ? rank1_waits : rank0_waits, r ? 2 : 1, r ? 2 : 1);
    if (d)
      fake_qps(&o, (uint32_t)r, d);
    cr_assert_eq(boot_send(&t->fd[r], BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(&t->fd[r], &t->b), BOOT_BYE);
    cr_assert_eq(boot_get8(&t->b), want);
  }
  two_fake_ranks_hang_up(t);
  cr_assert_eq(t->c.s, PP_OK, "%s", t->c.err);
  cr_assert_eq(t->c.res.outcome, want);
}

/* A rank inside one long system call (rxe's ibv_post_send on a loaded emulated guest) sends no
 * PROGRESS for longer than the bound, yet moves: the coordinator asks before it judges, and the
 * answer "moved", two bounds late, clears the suspicion. Then nobody moves: both answer "still",
 * STOP. And a rank that cannot answer at all is judged after 30 bounds. */
Test(verbs, coordinator_asks_before_it_judges_no_progress)
{
  struct two_ranks t;
  uint64_t bound = 300000000ull;
  two_fake_ranks_begin(&t, bound);
  uint64_t go = test_now(&t.c);
  cr_assert_eq(recv_advancing(&t.c, t.fd, &t.fd[0], &t.b, bound / 4), BOOT_MARK_PROBE);
  uint64_t id = boot_get64(&t.b);
  cr_assert_eq(recv_type(&t.fd[1], &t.b), BOOT_MARK_PROBE);
  cr_assert_geq(test_now(&t.c) - go, bound, "asked once the bound passed");
  mark_answer(&t.fd[1], id, false);
  advance(&t.c, t.fd, 2 * bound); /* rank 0 is "inside a system call": it answers late, moved */
  mark_answer(&t.fd[0], id, true);
  uint64_t moved = test_now(&t.c);
  /* no STOP: the next suspicion comes a bound after the answer */
  cr_assert_eq(recv_advancing(&t.c, t.fd, &t.fd[0], &t.b, bound / 4), BOOT_MARK_PROBE,
               "a new suspicion, not a STOP");
  uint64_t id2 = boot_get64(&t.b);
  cr_assert_neq(id2, id);
  cr_assert_eq(recv_type(&t.fd[1], &t.b), BOOT_MARK_PROBE);
  cr_assert_geq(test_now(&t.c) - moved, bound, "the answer 'moved' counted as progress");
  mark_answer(&t.fd[0], id, false); /* a stale answer to the first probe counts for nothing */
  mark_answer(&t.fd[0], id2, false);
  advance(&t.c, t.fd, bound / 2);
  mark_answer(&t.fd[1], id2, false);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_STOP, "both still: no progress");
  end_stuck(&t, NULL, PP_OUTCOME_NO_PROGRESS);
  two_fake_ranks_end(&t);

  /* a rank that never answers: STOP 30 bounds after the question */
  two_fake_ranks_begin(&t, bound);
  cr_assert_eq(recv_advancing(&t.c, t.fd, &t.fd[0], &t.b, bound / 4), BOOT_MARK_PROBE);
  uint64_t asked = test_now(&t.c);
  mark_answer(&t.fd[0], boot_get64(&t.b), false);
  cr_assert_eq(recv_type(&t.fd[1], &t.b), BOOT_MARK_PROBE); /* and rank 1 says nothing */
  cr_assert_eq(recv_advancing(&t.c, t.fd, &t.fd[0], &t.b, bound), BOOT_STOP);
  cr_assert_geq(test_now(&t.c) - asked, 30 * bound, "30 bounds to answer");
  cr_assert_eq(recv_type(&t.fd[1], &t.b), BOOT_STOP);
  end_stuck(&t, NULL, PP_OUTCOME_NO_PROGRESS);
  two_fake_ranks_end(&t);
}

/* Answers every MARK_PROBE with the QPs of d (the device moves, rq_psn += 50, at the first
 * `moves` probes), the clock moving a bound while none is asked, until STOP: how many probes;
 * *changed: the clock when the PSNs last changed. */
static int probe_until_stop(struct coord_ctx *c, struct boot_link fd[2], struct boot_buf *b,
                            struct fake_dev *d, int moves, uint64_t *changed)
{
  int probes = 0;
  *changed = test_now(c);
  for (;;) {
    uint32_t t0 = recv_advancing(c, fd, &fd[0], b, c->a.no_progress_ns);
    if (t0 == BOOT_STOP)
      break;
    cr_assert_eq(t0, BOOT_MARK_PROBE);
    uint64_t id = boot_get64(b);
    cr_assert_eq(recv_type(&fd[1], b), BOOT_MARK_PROBE);
    if (++probes <= moves) {
      d->rq_psn += 50;
      *changed = test_now(c);
    }
    mark_answer_qps(&fd[0], id, 0, d);
    mark_answer_qps(&fd[1], id, 1, d);
    cr_assert_lt(probes, 1000, "never stopped");
  }
  cr_assert_eq(recv_type(&fd[1], b), BOOT_STOP);
  return probes;
}

/* A run whose busy ranks answer every question "still" with the QPs of d, the device moving at
 * the first `moves` questions, to its end (no_progress): how many questions it took. The
 * coordinator's result is in t->c.res (two_fake_ranks_end frees it). */
static int still_run(struct two_ranks *t, struct fake_dev *d, int moves, uint64_t *changed)
{
  two_fake_ranks_begin(t, 50000000ull);
  int probes = probe_until_stop(&t->c, t->fd, &t->b, d, moves, changed);
  end_stuck(t, d, PP_OUTCOME_NO_PROGRESS);
  cr_assert_not_null(t->c.res.hang);
  return probes;
}

/* Both ranks answer "still", but rank 1's responder has not reached requests rank 0's device
 * already completed (the stall Soft-RoCE 6.1 shows on a starved CPU): the device owes work. The
 * coordinator waits while the QPs' PSNs change, and for 30 bounds after they last did; then
 * no_progress, and the hang report names the device instead of a deadlock. Without the QPs
 * (coordinator_asks_before_it_judges_no_progress) the first "still" from both stops the run. */
Test(verbs, coordinator_waits_for_a_device_that_owes_work_and_names_it)
{
  struct two_ranks t;
  struct fake_dev d = {.rq_psn = 300}; /* 200 PSNs behind rank 0's next; nothing outstanding */
  uint64_t changed;
  int probes = still_run(&t, &d, 3, &changed);
  cr_assert_gt(probes, 4, "all still, yet the device owed work: asked again (%d)", probes);
  cr_assert_geq(test_now(&t.c) - changed, 30 * t.c.a.no_progress_ns,
                "30 bounds after the PSNs last changed");
  char want[160];
  snprintf(want, sizeof(want), "device: rank 0's QP 10 (fake0) has every request it sent completed "
           "(next PSN 500), but rank 1's QP 11 (fake0) expects PSN %u, %u PSNs behind", d.rq_psn,
           500 - d.rq_psn);
  cr_assert(strstr(t.c.res.hang->cause, want), "cause: %s", t.c.res.hang->cause);
  cr_assert(strstr(t.c.res.hang->cause, "not for each other"), "cause: %s", t.c.res.hang->cause);
  two_fake_ranks_end(&t);
}

/* A requester ahead of its peer's responder with send WRs still outstanding waits for the
 * device too when no RNR wait can hold it: the responder has receives posted for the requests
 * that take one (rndv's RTS and FIN while READs are in flight), or none of them takes one (only
 * READs outstanding: rxe moves the responder's expected PSN past a READ once it sent the whole
 * response). Patience, then the device named with the counts. */
Test(verbs, outstanding_requests_the_responder_can_take_are_the_device)
{
  static const struct {
    struct fake_dev d;
    const char *why;
  } cases[] = {
      {{.rq_psn = 300, .outstanding = 4, .takes_recv = 4, .rq_posted = 8}, "receives posted"},
      {{.rq_psn = 300, .outstanding = 6, .takes_recv = 0, .rq_posted = 0}, "READs only"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct two_ranks t;
    struct fake_dev d = cases[i].d;
    uint64_t changed;
    int probes = still_run(&t, &d, 3, &changed);
    cr_assert_gt(probes, 4, "%s: patience for the device (%d probes)", cases[i].why, probes);
    cr_assert_geq(test_now(&t.c) - changed, 30 * t.c.a.no_progress_ns, "%s", cases[i].why);
    char want[256];
    snprintf(want, sizeof(want),
             "device: rank 0's QP 10 (fake0) has %u send WRs outstanding (%u take a receive) and "
             "sent up to PSN 500, but rank 1's QP 11 (fake0) expects PSN %u, %u PSNs behind, "
             "with %u receives posted: no RNR wait",
             d.outstanding, d.takes_recv, d.rq_psn, 500 - d.rq_psn, d.rq_posted);
    cr_assert(strstr(t.c.res.hang->cause, want), "%s: cause: %s", cases[i].why,
              t.c.res.hang->cause);
    two_fake_ranks_end(&t);
  }
}

/* A requester ahead of its peer's responder with requests outstanding that take a receive, and
 * no receive posted there, is what a responder RNR-NAKing forever does to it
 * (traces/hangs/rnr-forever on rxe), the protocol's hang: no patience, however its PSNs move;
 * the first "still" from both stops the run, and the cause is the waits', not the device's. */
Test(verbs, outstanding_requests_ahead_of_the_responder_are_not_the_device)
{
  struct two_ranks t;
  struct fake_dev d = {.rq_psn = 300, .outstanding = 4, .takes_recv = 1, .rq_posted = 0};
  uint64_t changed;
  int probes = still_run(&t, &d, 3, &changed);
  cr_assert_eq(probes, 1, "no patience for the protocol's own hang (%d probes)", probes);
  cr_assert_null(strstr(t.c.res.hang->cause, "device:"), "cause: %s", t.c.res.hang->cause);
  two_fake_ranks_end(&t);
}

Test(verbs, coordinator_stops_a_run_without_progress_and_collects_the_hang)
{
  struct two_ranks t;
  uint64_t bound = 300000000ull;
  two_fake_ranks_begin(&t, bound);
  advance(&t.c, t.fd, bound * 2 / 3);
  cr_assert_eq(boot_send(&t.fd[0], BOOT_PROGRESS, NULL, boot_now_ns() + 1000000000ull), 0);
  uint64_t told = test_now(&t.c);
  /* the bound passed: the coordinator asks, both answer that they did not move */
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_advancing(&t.c, t.fd, &t.fd[r], &t.b, bound / 4), BOOT_MARK_PROBE,
                 "asked before judged");
    mark_answer(&t.fd[r], boot_get64(&t.b), false);
  }
  cr_assert_geq(test_now(&t.c) - told, bound, "the PROGRESS moved the bound");
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_STOP, "no probe: nobody is idle");
  end_stuck(&t, NULL, PP_OUTCOME_NO_PROGRESS);
  const struct pp_hang *h = t.c.res.hang;
  cr_assert_not_null(h);
  cr_assert_eq(h->trigger, PP_HANG_TRIGGER_NO_PROGRESS);
  cr_assert_eq(h->clock, PP_HANG_CLOCK_RUN, "wall-clock time from GO, not CLOCK_MONOTONIC");
  cr_assert_eq(h->no_progress_ns, 300000000ull);
  cr_assert_eq(h->stuck, 2);
  cr_assert_eq(h->rank[1].nwaits, 2);
  cr_assert_str_eq(h->rank[1].waits[0].what, "receive (rank 0, tag 2) never matched");
  cr_assert_eq(h->ncycle, 2);
  cr_assert(strstr(h->cause, "unposted receive: rank 0's message to rank 1 (tag 1)"), "%s",
            h->cause);
  pp_run_result_free(&t.c.res);
  cr_assert_null(t.c.res.hang);
  two_fake_ranks_end(&t);
}

/* Idle ranks with operations pending: quiescence, outcome stalled, the hang from the RESULTs. */
Test(verbs, coordinator_reports_the_hang_of_a_stalled_run)
{
  struct two_ranks t;
  two_fake_ranks_begin(&t, 60000000000ull);
  send_state(&t.fd[0], false, 4);
  send_state(&t.fd[1], false, 4);
  for (int r = 0; r < 2; r++)
    answer_probe(&t.fd[r], 4);
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(&t.fd[r], &t.b), BOOT_STOP);
  end_stuck(&t, NULL, PP_OUTCOME_STALLED);
  cr_assert_not_null(t.c.res.hang);
  cr_assert_eq(t.c.res.hang->trigger, PP_HANG_TRIGGER_QUIESCENCE);
  cr_assert_eq(t.c.res.hang->nedges, 2);
  cr_assert_eq(t.c.res.hang->edge[0].from, 0);
  cr_assert_eq(t.c.res.hang->edge[0].to, 1);
  cr_assert_eq(t.c.res.hang->edge[0].kind, PP_WAIT_CTS);
  two_fake_ranks_end(&t);
}

/* A coordinator that did not run for longer than the bound (its CPU taken: busy-polling ranks
 * on few CPUs) finds PROGRESS waiting unread: it reads it before it asks or judges, the run goes
 * on. The launcher's check() callback is where it is kept from running here: the rank says
 * STATE then PROGRESS, then the clock jumps past the bound (the coordinator reads one message
 * per rank per pass: the STATE first, the PROGRESS still waiting when it looks at the clock). */
struct stall {
  struct boot_link *fd; /* the rank that talks during the stall; NULL: no stall (any more) */
  struct coord_ctx *c;
};

static int stall_once(void *ctx, char *err, size_t errlen)
{
  (void)err, (void)errlen;
  struct stall *st = ctx;
  struct boot_link *f = __atomic_load_n(&st->fd, __ATOMIC_SEQ_CST);
  if (!f)
    return 0;
  send_state(f, false, 1); /* idle, not done: rank 1 has not reported, no probe */
  cr_assert_eq(boot_send(f, BOOT_PROGRESS, NULL, boot_now_ns() + 1000000000ull), 0);
  delivered(f);
  __atomic_add_fetch(&st->c->now, st->c->a.no_progress_ns * 5 / 3, __ATOMIC_SEQ_CST);
  __atomic_store_n(&st->fd, NULL, __ATOMIC_SEQ_CST);
  return 0;
}

Test(verbs, coordinator_reads_waiting_progress_before_it_judges)
{
  struct two_ranks t;
  static struct stall st;
  st = (struct stall){.c = &t.c};
  two_fake_ranks_begin_checked(&t, 300000000ull, stall_once, &st);
  delivered(&t.fd[1]);
  __atomic_store_n(&st.fd, &t.fd[0], __ATOMIC_SEQ_CST); /* the next check() stalls */
  uint64_t dl = boot_now_ns() + 30000000000ull;
  while (__atomic_load_n(&st.fd, __ATOMIC_SEQ_CST)) {
    cr_assert_lt(boot_now_ns(), dl, "the coordinator never called check()");
    usleep(1000);
  }
  /* past the stall (asked whether it moved, not stopped); then both ranks are idle and done */
  idle_done_to_bye(t.fd, 2);
  two_fake_ranks_hang_up(&t);
  cr_assert_eq(t.c.s, PP_OK, "%s", t.c.err);
  cr_assert_eq(t.c.res.outcome, PP_OUTCOME_COMPLETED);
  two_fake_ranks_end(&t);
}

/* ---------------------------------------------------------------- per-driver counters */

static char sysfs[64];

static void put_file(const char *dev, const char *file, const char *text)
{
  char path[512], cmd[600];
  snprintf(path, sizeof(path), "%s/%s/ports/1/%s", sysfs, dev, file);
  snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
  cr_assert_eq(system(cmd), 0);
  scratch_write(path, text);
}

static void put_counter(const char *dev, const char *file, uint64_t v)
{
  char text[32];
  snprintf(text, sizeof(text), "%llu\n", (unsigned long long)v);
  put_file(dev, file, text);
}

static void make_sysfs(void)
{
  snprintf(sysfs, sizeof(sysfs), "/tmp/pp-sysfs-XXXXXX");
  cr_assert_not_null(mkdtemp(sysfs));
}

static void remove_sysfs(void)
{
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sysfs);
  cr_assert_eq(system(cmd), 0);
}

/* Reads dev's counters (mark), lets set() change the files, reads again and maps the delta. */
static const struct vnic_driver *delta_of(const char *dev, void (*set)(const char *dev, int step),
                                          struct pp_nic_counters *out)
{
  set(dev, 0);
  const struct vnic_driver *d = vnic_driver_of(sysfs, dev, 1);
  struct vnic_raw mark, now;
  vnic_raw_read(sysfs, dev, 1, d, &mark);
  set(dev, 1);
  vnic_raw_read(sysfs, dev, 1, d, &now);
  vnic_counters_map(d, &now, &mark, out);
  return d;
}

static void rxe_files(const char *dev, int step)
{
  put_counter(dev, "hw_counters/rcvd_rnr_err", 100 + 10 * (uint64_t)step);
  put_counter(dev, "hw_counters/send_rnr_err", 7 + 4 * (uint64_t)step);
  put_counter(dev, "hw_counters/retry_rnr_exceeded_err", (uint64_t)step);
  put_counter(dev, "hw_counters/completer_retry_err", 50 + 3 * (uint64_t)step);
  put_counter(dev, "hw_counters/sent_pkts", 1000 + 200 * (uint64_t)step);
}

static void mlx5_files(const char *dev, int step)
{
  put_counter(dev, "hw_counters/out_of_buffer", 5 + 6 * (uint64_t)step);
  put_counter(dev, "hw_counters/rnr_nak_retry_err", 20 + 8 * (uint64_t)step);
  put_counter(dev, "hw_counters/local_ack_timeout_err", 2 + 2 * (uint64_t)step);
  put_counter(dev, "hw_counters/out_of_sequence", 0);
  if (!strcmp(dev, "mlx5_0")) { /* extended counters and the PMA counters: not on every device */
    put_counter(dev, "hw_counters/req_rnr_retries_exceeded", (uint64_t)step);
    put_counter(dev, "counters/port_xmit_packets", 4000 + 900 * (uint64_t)step);
  }
}

static void unknown_files(const char *dev, int step)
{
  put_counter(dev, "hw_counters/rnr_naks_whatever", 3 + (uint64_t)step);
}

#define HAVE(c, f) pp_nic_counter_have(&(c), PP_NIC_CNT_##f)

Test(verbs_counters, rxe_names)
{
  make_sysfs();
  struct pp_nic_counters c;
  const struct vnic_driver *d = delta_of("rxe0", rxe_files, &c);
  cr_assert_str_eq(vnic_driver_name(d), "rxe");
  cr_assert(HAVE(c, rnr_naks_received) && c.rnr_naks_received == 10);
  cr_assert(HAVE(c, rnr_naks_sent) && c.rnr_naks_sent == 4);
  cr_assert(HAVE(c, rnr_retries) && c.rnr_retries == 9, "10 RNR NAKs, 1 exhausted the budget");
  cr_assert(HAVE(c, timeout_retries) && c.timeout_retries == 3);
  cr_assert(HAVE(c, packets_sent) && c.packets_sent == 200);
  cr_assert(!HAVE(c, packets_dropped) && !HAVE(c, acks_sent), "rxe counts neither");
  remove_sysfs();
}

Test(verbs_counters, mlx5_q_counter_names)
{
  make_sysfs();
  struct pp_nic_counters c;
  const struct vnic_driver *d = delta_of("mlx5_0", mlx5_files, &c);
  cr_assert_str_eq(vnic_driver_name(d), "mlx5");
  cr_assert(HAVE(c, rnr_naks_sent) && c.rnr_naks_sent == 6, "out_of_buffer");
  cr_assert(HAVE(c, rnr_naks_received) && c.rnr_naks_received == 9,
            "rnr_nak_retry_err + req_rnr_retries_exceeded: %llu",
            (unsigned long long)c.rnr_naks_received);
  cr_assert(HAVE(c, rnr_retries) && c.rnr_retries == 8, "rnr_nak_retry_err");
  cr_assert(HAVE(c, timeout_retries) && c.timeout_retries == 2, "local_ack_timeout_err");
  cr_assert(HAVE(c, packets_sent) && c.packets_sent == 900, "counters/port_xmit_packets");
  /* without the extended and PMA counters: the optional term counts 0, packets_sent is null */
  d = delta_of("mlx5_1", mlx5_files, &c);
  cr_assert_str_eq(vnic_driver_name(d), "mlx5");
  cr_assert(HAVE(c, rnr_naks_received) && c.rnr_naks_received == 8);
  cr_assert(!HAVE(c, packets_sent), "no port_xmit_packets: not available, not 0");
  cr_assert_eq(c.packets_sent, 0);
  remove_sysfs();
}

Test(verbs_counters, unknown_driver_or_unreadable_file_is_not_available)
{
  make_sysfs();
  struct pp_nic_counters c;
  const struct vnic_driver *d = delta_of("foo0", unknown_files, &c);
  cr_assert_null(d);
  cr_assert_str_eq(vnic_driver_name(d), "unknown");
  cr_assert_eq(c.missing, (1u << PP_NIC_COUNTER_COUNT) - 1, "every counter: not available");
  /* no such device at all */
  cr_assert_null(vnic_driver_of(sysfs, "nodev", 1));
  /* an rxe whose completer_retry_err does not hold a number */
  rxe_files("rxe1", 0);
  put_file("rxe1", "hw_counters/completer_retry_err", "n/a\n");
  d = vnic_driver_of(sysfs, "rxe1", 1);
  struct vnic_raw mark, now;
  vnic_raw_read(sysfs, "rxe1", 1, d, &mark);
  vnic_raw_read(sysfs, "rxe1", 1, d, &now);
  vnic_counters_map(d, &now, &mark, &c);
  cr_assert(!HAVE(c, timeout_retries));
  cr_assert(HAVE(c, rnr_naks_received) && c.rnr_naks_received == 0);
  remove_sysfs();
}

Test(verbs_counters, json_says_null_for_what_is_not_counted)
{
  struct pp_sim_config cfg = {0};
  snprintf(cfg.name, sizeof(cfg.name), "t");
  cfg.engine.nranks = 2;
  struct pp_rank_result rr[2] = {0};
  rr[0].nic.rnr_naks_received = 3;
  rr[0].nic.missing = 1u << PP_NIC_CNT_packets_dropped | 1u << PP_NIC_CNT_timeout_retries;
  rr[1].nic.rnr_naks_sent = 3;
  rr[1].nic.missing = 1u << PP_NIC_CNT_packets_dropped;
  struct pp_run_result res = {.nranks = 2, .ranks = rr};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  pp_report_json_on(f, &cfg, &res, "verbs");
  fclose(f);
  cr_assert(strstr(buf, "\"rnr_naks\": 3, \"retries\": null,"), "%s", buf);
  cr_assert(strstr(buf, "\"rnr_naks_sent\": 0, \"timeout_retries\": null, \"packets_dropped\": null"),
            "%s", buf);
  cr_assert(strstr(buf, "\"rnr_naks_sent\": 3, \"timeout_retries\": 0, \"packets_dropped\": null"),
            "%s", buf);
  free(buf);
}

/* ================================================================ applications (prepost/verbsapp.h) */

static struct pp_run_cfg app_cfg(void)
{
  struct pp_run_cfg c = {.seed = 1};
  snprintf(c.name, sizeof(c.name), "app");
  c.engine = (struct pp_engine_cfg){.nranks = 2, .protocol = PP_PROTO_EAGER, .seed = 1};
  c.engine.qp = (struct pp_qp_params){.min_rnr_timer = 1, .rnr_retry = 7, .timeout = 14,
                                      .retry_cnt = 7, .max_rd_atomic = 1, .mtu = 4096,
                                      .sq_depth = 64, .rq_depth = 64};
  pp_p2p_params_default(pp_p2p_params_of(&c.engine));
  return c;
}

static enum pp_status app_rank(void *ctx, uint32_t rank, struct pp_app_callbacks *cb,
                               void **user_data)
{
  (void)ctx, (void)rank, (void)user_data;
  pp_app_callbacks_default(cb);
  return PP_OK;
}

Test(verbs_app, a_rank_checks_its_configuration_and_callbacks_before_the_device)
{
  struct pp_run_cfg c = app_cfg();
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  struct pp_verbs_rank *r = (struct pp_verbs_rank *)&cb;
  char err[512] = "";
  cb.done = NULL;
  cr_assert_eq(pp_verbs_rank_open(&c, 0, NULL, &cb, NULL, &r, err, sizeof(err)), PP_INVALID);
  cr_assert_null(r);
  cr_assert(strstr(err, "a callback is not set"), "%s", err);
  pp_app_callbacks_default(&cb);
  c.engine.protocol = PP_PROTO_NAIVE;
  cr_assert_eq(pp_verbs_rank_open(&c, 0, NULL, &cb, NULL, &r, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "workload 'app' needs protocol eager or rndv"), "%s", err);
  c = app_cfg();
  cr_assert_eq(pp_verbs_rank_open(&c, 2, NULL, &cb, NULL, &r, err, sizeof(err)), PP_INVALID,
               "rank 2 of 2");
  pp_verbs_rank_close(NULL);
}

Test(verbs_app, a_rank_names_the_device_it_cannot_open)
{
  struct pp_run_cfg c = app_cfg();
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  struct vnic_config nic = {.gid_index = -1};
  snprintf(nic.device, sizeof(nic.device), "no_such_dev0");
  struct pp_verbs_rank *r;
  char err[512] = "";
  enum pp_status s = pp_verbs_rank_open(&c, 1, &nic, &cb, NULL, &r, err, sizeof(err));
  cr_assert_eq(s, PP_NOTFOUND, "%s: %s", pp_status_name(s), err);
  cr_assert_null(r);
  /* without any device (this machine) the list is empty; with one (the guest), it names ours */
  cr_assert(strstr(err, "rank 1: ") && (strstr(err, "no_such_dev0") || strstr(err, "no RDMA device")),
            "%s", err);
}

Test(verbs_app, the_bootstrapped_run_wants_a_factory_and_no_trace)
{
  struct pp_run_cfg c = app_cfg();
  struct pp_verbs_opts o;
  pp_verbs_opts_default(&o);
  struct pp_run_result res;
  bool reporter = true;
  char err[512] = "";
  struct pp_verbs_app none = {0}, app = {.rank = app_rank};
  cr_assert_eq(pp_verbs_run_app(&c, &o, &none, &res, &reporter, err, sizeof(err)), PP_INVALID);
  cr_assert(strstr(err, "rank factory"), "%s", err);
  cr_assert_not(reporter);
  o.trace.path = "t.trace";
  cr_assert_eq(pp_verbs_run_app(&c, &o, &app, &res, &reporter, err, sizeof(err)), PP_UNSUPPORTED);
  cr_assert(strstr(err, "not recorded"), "%s", err);
}

