/* backends/verbs without an RDMA device (ctest, any machine): the ops table, GID choice, the
 * bootstrap wire format, rank tables, socket errors, the coordinator against fake ranks (happy
 * path with quiescence, missing rank, wrong scenario, failing rank), doctor and the CLI's error
 * paths. What needs a device runs in the Soft-RoCE guest: tests/test_verbs_rxe.c,
 * tests/verbs/suite.sh. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/verbs/boot.h"
#include "backends/verbs/counters.h"
#include "backends/verbs/verbsnic.h"
#include "backends/verbs/verbsrun.h"
#include "tools/report.h"

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

struct coord_ctx {
  struct boot_coord_args a;
  struct pp_engine_cfg cfg;
  struct pp_run_result res;
  enum pp_status s;
  char err[1024];
  uint16_t port;
};

static void *coord_thread(void *p)
{
  struct coord_ctx *c = p;
  c->s = boot_coordinate(&c->a, &c->res, c->err, sizeof(c->err));
  return NULL;
}

static void start_coord_np(struct coord_ctx *c, uint64_t boot_ns, uint64_t no_progress_ns,
                           pthread_t *th)
{
  char err[256];
  c->cfg = cfg2();
  c->port = 0;
  int lfd = boot_listen("127.0.0.1", &c->port, err, sizeof(err));
  cr_assert_geq(lfd, 0, "%s", err);
  c->a = (struct boot_coord_args){.listen_fd = lfd, .cfg = &c->cfg, .boot_timeout_ns = boot_ns,
                                  .run_timeout_ns = 10000000000ull,
                                  .no_progress_ns = no_progress_ns};
  snprintf(c->a.where, sizeof(c->a.where), "127.0.0.1:%u", c->port);
  cr_assert_eq(pthread_create(th, NULL, coord_thread, c), 0);
}

static void start_coord(struct coord_ctx *c, uint64_t boot_ns, pthread_t *th)
{
  start_coord_np(c, boot_ns, 0, th);
}

/* A fake rank: connects and says HELLO; conn_info carries its rank in qp_num[0]. */
static int fake_hello(uint16_t port, uint32_t rank, const struct pp_engine_cfg *cfg)
{
  char err[256];
  int fd = boot_connect("127.0.0.1", port, boot_now_ns() + 5000000000ull, err, sizeof(err));
  cr_assert_geq(fd, 0, "%s", err);
  bool has[2] = {rank != 0, rank != 1};
  struct pp_conn_info info[2] = {{.nchannels = 1, .qp_num = {100 + rank}},
                                 {.nchannels = 1, .qp_num = {100 + rank}}};
  struct vnic_addr a = {.link_layer = 2, .port = 1};
  a.gid[15] = (uint8_t)rank;
  struct boot_buf b = {0};
  boot_put_hello(&b, rank, cfg, &a, "fakehost", "fake0", has, info);
  cr_assert_eq(boot_send(fd, BOOT_HELLO, &b, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&b);
  return fd;
}

static uint32_t recv_type(int fd, struct boot_buf *b)
{
  uint32_t t = 0;
  char err[128];
  cr_assert_eq(boot_recv(fd, &t, b, boot_now_ns() + 5000000000ull, err, sizeof(err)), 1, "%s",
               err);
  return t;
}

static void send_state(int fd, bool idle, bool done, uint64_t gen)
{
  struct boot_buf b = {0};
  boot_put8(&b, idle);
  boot_put8(&b, done);
  boot_put64(&b, gen);
  cr_assert_eq(boot_send(fd, BOOT_STATE, &b, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&b);
}

Test(verbs, coordinator_runs_fake_ranks_to_quiescence)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  int fd[2] = {fake_hello(c.port, 1, &c.cfg), fake_hello(c.port, 0, &c.cfg)};
  struct boot_buf b = {0};
  for (uint32_t r = 0; r < 2; r++) {
    uint32_t rank = r == 0 ? 1 : 0;
    cr_assert_eq(recv_type(fd[r], &b), BOOT_TABLE);
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
    cr_assert_eq(boot_send(fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_GO);
  /* rank 0 (fd[1]) goes idle; rank 1 is still busy: no probe yet */
  send_state(fd[1], true, true, 5);
  send_state(fd[0], false, false, 3);
  send_state(fd[0], true, true, 9);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE);
    uint64_t id = boot_get64(&b);
    struct boot_buf o = {0};
    boot_put64(&o, id);
    boot_put8(&o, 1);
    boot_put64(&o, r == 0 ? 9 : 5); /* nobody moved */
    cr_assert_eq(boot_send(fd[r], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_STOP);
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
    cr_assert_eq(boot_send(fd[r], BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_COMPLETED);
    close(fd[r]);
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
  /* both ranks' histograms merged: the same summary as the simulator's (engine/hist.h) */
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
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  int fd[2] = {fake_hello(c.port, 0, &c.cfg), fake_hello(c.port, 1, &c.cfg)};
  struct boot_buf b = {0};
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_TABLE);
    boot_send(fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_GO);
  send_state(fd[0], true, false, 1);
  send_state(fd[1], true, false, 1);
  uint64_t id = 0;
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE);
    id = boot_get64(&b);
  }
  /* rank 1 processed a completion between its idle report and the probe */
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, 1);
  boot_put64(&o, 2);
  boot_send(fd[1], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  o.len = 0;
  boot_put64(&o, id);
  boot_put8(&o, 1);
  boot_put64(&o, 1);
  boot_send(fd[0], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  /* ... so no STOP; its new idle report starts another probe */
  send_state(fd[1], true, false, 2);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE, "a second probe, not STOP");
    cr_assert_gt(boot_get64(&b), id);
  }
  close(fd[0]);
  close(fd[1]);
  pthread_join(th, NULL);
  cr_assert_neq(c.s, PP_OK);
  cr_assert(strstr(c.err, "went away"), "%s", c.err);
  boot_buf_free(&o);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

/* A rank answers the probe, then processes a late completion and reports it: the coordinator must
 * probe again (it once waited for ever on the stale probe). */
Test(verbs, coordinator_probes_again_after_a_late_report)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  int fd[2] = {fake_hello(c.port, 0, &c.cfg), fake_hello(c.port, 1, &c.cfg)};
  struct boot_buf b = {0}, o = {0};
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_TABLE);
    boot_send(fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_GO);
  send_state(fd[0], true, true, 1);
  send_state(fd[1], true, true, 1);
  uint64_t id[2];
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE);
    id[r] = boot_get64(&b);
  }
  boot_put64(&o, id[0]);
  boot_put8(&o, 1);
  boot_put64(&o, 1);
  boot_send(fd[0], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  send_state(fd[0], true, true, 2); /* rank 0 moved after its answer; rank 1 has not answered */
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE, "a new probe, not a hang");
    uint64_t nid = boot_get64(&b);
    cr_assert_gt(nid, id[r]);
    o.len = 0;
    boot_put64(&o, nid);
    boot_put8(&o, 1);
    boot_put64(&o, r == 0 ? 2 : 1);
    boot_send(fd[r], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_STOP);
  close(fd[0]);
  close(fd[1]);
  pthread_join(th, NULL);
  boot_buf_free(&o);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

Test(verbs, coordinator_names_the_rank_that_never_came)
{
  struct coord_ctx c;
  pthread_t th;
  uint64_t t0 = boot_now_ns();
  start_coord(&c, 600000000ull, &th);
  int fd = fake_hello(c.port, 0, &c.cfg);
  struct boot_buf b = {0};
  cr_assert_eq(recv_type(fd, &b), BOOT_ABORT, "the rank that came is told");
  pthread_join(th, NULL);
  double dt = (boot_now_ns() - t0) / 1e9;
  cr_assert_eq(c.s, PP_IO);
  cr_assert(strstr(c.err, "rank(s) 1 did not connect to the coordinator at 127.0.0.1:"), "%s",
            c.err);
  cr_assert(dt < 3.0, "%.2f s", dt);
  close(fd);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

Test(verbs, coordinator_rejects_another_scenario)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 3000000000ull, &th);
  struct pp_engine_cfg other = cfg2();
  other.workload.messages = 11;
  int fd = fake_hello(c.port, 1, &other);
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_INVALID);
  cr_assert(strstr(c.err, "rank 1 runs a different scenario configuration"), "%s", c.err);
  close(fd);
  close(c.a.listen_fd);
}

Test(verbs, coordinator_aborts_when_a_rank_reports_a_failure)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord(&c, 5000000000ull, &th);
  int ok = fake_hello(c.port, 0, &c.cfg);
  char err[128];
  int bad = boot_connect("127.0.0.1", c.port, boot_now_ns() + 1000000000ull, err, sizeof(err));
  boot_send_text(bad, BOOT_ERROR, "rank 1: rxe0 port 1 is DOWN", boot_now_ns() + 1000000000ull);
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_IO);
  cr_assert(strstr(c.err, "rxe0 port 1 is DOWN"), "%s", c.err);
  struct boot_buf b = {0};
  cr_assert_eq(recv_type(ok, &b), BOOT_ABORT);
  cr_assert(b.len > 0 && memmem(b.p, b.len, "port 1 is DOWN", 14), "the others learn why");
  boot_buf_free(&b);
  close(ok);
  close(bad);
  close(c.a.listen_fd);
}

/* ================================================================ CLI */

static char tmpdir[64];
static char *out, *errs;

static char *slurp(const char *path)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int cli(const char *args)
{
  if (!tmpdir[0]) {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/prepost-verbs-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
  }
  free(out);
  free(errs);
  char cmd[2048], p[128];
  snprintf(cmd, sizeof(cmd), "timeout 60 '%s' %s > '%s/out' 2> '%s/err' < /dev/null",
           PREPOST_CLI, args, tmpdir, tmpdir);
  int st = system(cmd);
  cr_assert(WIFEXITED(st));
  snprintf(p, sizeof(p), "%s/out", tmpdir);
  out = slurp(p);
  snprintf(p, sizeof(p), "%s/err", tmpdir);
  errs = slurp(p);
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
           "--ranks 127.0.0.1:1,127.0.0.1 --boot-timeout 1");
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
      {"--backend nosuch", "--backend: 'simgrid' or 'verbs'"},
      {"--backend verbs --rank 1", "--rank and --ranks go together"},
      {"--backend verbs --ranks a,b", "--rank and --ranks go together"},
      {"--backend verbs --ib-port 0", "--ib-port wants 1..255"},
      {"--backend verbs --gid-index x", "--gid-index wants"},
      {"--backend verbs --timeout -1", "--timeout wants seconds"},
      {"--backend verbs --port 70000", "--port wants 0..65535"},
      {"--backend verbs --frobnicate", "unknown option '--frobnicate'"},
      {"--backend verbs --no-progress soon", "'--no-progress' must be a duration"},
      {"--backend verbs --no-progress", "--no-progress needs a value"},
      {"--backend verbs --trace", "--trace needs a value"},
      {"--backend verbs --progress spin", "--progress: 'busy' or 'event', got 'spin'"},
      {"--backend verbs --progress", "--progress needs a value"},
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
  cr_assert_eq(cli("run --backend verbs --help"), 0);
  assert_has(out, "usage: prepost run SCENARIO --backend verbs");
  cr_assert_eq(cli("bench --iters 1"), 2);
  assert_has(errs, "--iters wants");
  cr_assert_eq(cli("run " SCENARIOS "fast-consumer.yaml --backend simgrid --json"), 0,
               "--backend simgrid is the default backend: %s", errs);
  assert_has(out, "\"backend\": \"simgrid\"");
}

/* ================================================================ hang reports (engine/hang.h) */

/* Both fake ranks through HELLO, TABLE, READY and GO. */
static void fake_start(struct coord_ctx *c, int fd[2], struct boot_buf *b)
{
  fd[0] = fake_hello(c->port, 0, &c->cfg);
  fd[1] = fake_hello(c->port, 1, &c->cfg);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], b), BOOT_TABLE);
    cr_assert_eq(boot_send(fd[r], BOOT_READY, NULL, boot_now_ns() + 1000000000ull), 0);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], b), BOOT_GO);
}

/* A RESULT, not done, with what the rank's pending operations wait for. */
static void fake_stuck_result(int fd, const struct pp_wait *w, uint32_t n)
{
  struct pp_rank_result rr = {0};
  rr.stats.status_counts[PP_WC_SUCCESS] = 1;
  snprintf(rr.host, sizeof(rr.host), "fakehost/fake0");
  struct boot_buf o = {0};
  boot_put_result(&o, &rr, NULL);
  boot_put_waits(&o, w, n, n);
  cr_assert_eq(boot_send(fd, BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
  boot_buf_free(&o);
}

static const struct pp_wait rank0_waits[] = {
    {.kind = PP_WAIT_CTS, .peer = 1, .tag = 1,
     .what = "rndv send tag 1 (65536 bytes) to rank 1 waits for CTS"}};
static const struct pp_wait rank1_waits[] = {
    {.kind = PP_WAIT_UNMATCHED, .peer = 0, .tag = 2, .what = "receive (rank 0, tag 2) never matched"},
    {.kind = PP_WAIT_UNEXPECTED, .peer = 0, .tag = 1, .what = "rndv RTS from rank 0 tag 1"}};

/* Busy ranks (a timer each: never idle) that stop telling PROGRESS: the coordinator stops the run
 * after the bound, collects the ranks' waits and names the cause. */
Test(verbs, coordinator_stops_a_run_without_progress_and_collects_the_hang)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord_np(&c, 5000000000ull, 300000000ull, &th);
  int fd[2];
  struct boot_buf b = {0};
  fake_start(&c, fd, &b);
  uint64_t t0 = boot_now_ns();
  send_state(fd[0], false, false, 1);
  send_state(fd[1], false, false, 1);
  usleep(200000);
  cr_assert_eq(boot_send(fd[0], BOOT_PROGRESS, NULL, boot_now_ns() + 1000000000ull), 0);
  uint64_t t1 = boot_now_ns();
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_STOP, "no probe: nobody is idle");
  double after = (boot_now_ns() - t1) / 1e9, total = (boot_now_ns() - t0) / 1e9;
  cr_assert(after >= 0.29 && after < 2.0, "STOP %.3f s after the last PROGRESS", after);
  cr_assert(total >= 0.49, "the PROGRESS at 0.2 s moved the bound: %.3f s", total);
  fake_stuck_result(fd[0], rank0_waits, 1);
  fake_stuck_result(fd[1], rank1_waits, 2);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_NO_PROGRESS);
    close(fd[r]);
  }
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_OK, "%s", c.err);
  cr_assert_eq(c.res.outcome, PP_OUTCOME_NO_PROGRESS);
  const struct pp_hang *h = c.res.hang;
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
  pp_run_result_free(&c.res);
  cr_assert_null(c.res.hang);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

/* Idle ranks with operations pending: quiescence, outcome stalled, the hang from the RESULTs. */
Test(verbs, coordinator_reports_the_hang_of_a_stalled_run)
{
  struct coord_ctx c;
  pthread_t th;
  start_coord_np(&c, 5000000000ull, 60000000000ull, &th);
  int fd[2];
  struct boot_buf b = {0};
  fake_start(&c, fd, &b);
  send_state(fd[0], true, false, 4);
  send_state(fd[1], true, false, 4);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_PROBE);
    uint64_t id = boot_get64(&b);
    struct boot_buf o = {0};
    boot_put64(&o, id);
    boot_put8(&o, 1);
    boot_put64(&o, 4);
    cr_assert_eq(boot_send(fd[r], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++)
    cr_assert_eq(recv_type(fd[r], &b), BOOT_STOP);
  fake_stuck_result(fd[0], rank0_waits, 1);
  fake_stuck_result(fd[1], rank1_waits, 2);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_STALLED);
    close(fd[r]);
  }
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_OK, "%s", c.err);
  cr_assert_not_null(c.res.hang);
  cr_assert_eq(c.res.hang->trigger, PP_HANG_TRIGGER_QUIESCENCE);
  cr_assert_eq(c.res.hang->nedges, 2);
  cr_assert_eq(c.res.hang->edge[0].from, 0);
  cr_assert_eq(c.res.hang->edge[0].to, 1);
  cr_assert_eq(c.res.hang->edge[0].kind, PP_WAIT_CTS);
  pp_run_result_free(&c.res);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

/* A coordinator that did not run for longer than the bound (its CPU taken: busy-polling ranks
 * on few CPUs) finds PROGRESS waiting unread: it reads it before judging, the run goes on. The
 * launcher's check() callback is where it is kept from running here. */
static int stall_once(void *ctx, char *err, size_t errlen)
{
  (void)err, (void)errlen;
  int *fd = ctx, f = __atomic_load_n(fd, __ATOMIC_SEQ_CST);
  if (f < 0)
    return 0;
  /* 0.3 s bound: the rank says STATE then PROGRESS, and the coordinator sleeps 0.5 s before it
   * reads them (one message per rank per pass: the STATE first) */
  send_state(f, false, false, 1);
  cr_assert_eq(boot_send(f, BOOT_PROGRESS, NULL, boot_now_ns() + 1000000000ull), 0);
  __atomic_store_n(fd, -1, __ATOMIC_SEQ_CST);
  usleep(500000);
  return 0;
}

Test(verbs, coordinator_reads_waiting_progress_before_it_judges)
{
  struct coord_ctx c;
  pthread_t th;
  static int stall_fd = -1;
  stall_fd = -1;
  char err[256];
  c.cfg = cfg2();
  c.port = 0;
  int lfd = boot_listen("127.0.0.1", &c.port, err, sizeof(err));
  cr_assert_geq(lfd, 0, "%s", err);
  c.a = (struct boot_coord_args){.listen_fd = lfd, .cfg = &c.cfg, .boot_timeout_ns = 5000000000ull,
                                 .run_timeout_ns = 10000000000ull, .no_progress_ns = 300000000ull,
                                 .check = stall_once, .check_ctx = &stall_fd};
  snprintf(c.a.where, sizeof(c.a.where), "127.0.0.1:%u", c.port);
  cr_assert_eq(pthread_create(&th, NULL, coord_thread, &c), 0);
  int fd[2];
  struct boot_buf b = {0};
  fake_start(&c, fd, &b);
  send_state(fd[0], false, false, 1);
  send_state(fd[1], false, false, 1);
  usleep(100000);
  __atomic_store_n(&stall_fd, fd[0], __ATOMIC_SEQ_CST); /* the next check() stalls */
  while (__atomic_load_n(&stall_fd, __ATOMIC_SEQ_CST) >= 0)
    usleep(10000);
  usleep(600000); /* past the stall; then both ranks report idle and done */
  send_state(fd[0], true, true, 2);
  send_state(fd[1], true, true, 2);
  for (int r = 0; r < 2; r++) {
    uint32_t t = recv_type(fd[r], &b);
    cr_assert_eq(t, BOOT_PROBE, "not stopped as no_progress (message %u)", t);
    uint64_t id = boot_get64(&b);
    struct boot_buf o = {0};
    boot_put64(&o, id);
    boot_put8(&o, 1);
    boot_put64(&o, 2);
    cr_assert_eq(boot_send(fd[r], BOOT_PROBE_REPLY, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_STOP);
    struct pp_rank_result rr = {0};
    rr.stats.done = true;
    struct boot_buf o = {0};
    boot_put_result(&o, &rr, NULL);
    cr_assert_eq(boot_send(fd[r], BOOT_RESULT, &o, boot_now_ns() + 1000000000ull), 0);
    boot_buf_free(&o);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(recv_type(fd[r], &b), BOOT_BYE);
    cr_assert_eq(boot_get8(&b), PP_OUTCOME_COMPLETED);
    close(fd[r]);
  }
  pthread_join(th, NULL);
  cr_assert_eq(c.s, PP_OK, "%s", c.err);
  cr_assert_eq(c.res.outcome, PP_OUTCOME_COMPLETED);
  pp_run_result_free(&c.res);
  boot_buf_free(&b);
  close(c.a.listen_fd);
}

/* ---------------------------------------------------------------- per-driver counters */

static char sysfs[64];

static void put_file(const char *dev, const char *file, const char *text)
{
  char path[512], cmd[600];
  snprintf(path, sizeof(path), "%s/%s/ports/1/%s", sysfs, dev, file);
  snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
  cr_assert_eq(system(cmd), 0);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
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
