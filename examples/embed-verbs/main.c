/*
 * The application of examples/embed-sim (a ping-pong from 8 B to 256 KiB, every byte checked,
 * half round trips printed) on a real ibverbs device through the installed libprepost-verbs,
 * with the program's own exchange of connection information (prepost/verbsapp.h, part 2): the
 * process forks one process per rank; each opens the device and its engine
 * (pp_verbs_rank_open), writes what its peer needs (pp_verbs_rank_local_info) into a socketpair
 * and reads the peer's, connects (pp_verbs_rank_connect) and runs (pp_verbs_rank_run). Any
 * other channel (MPI, a shared file, the program's own sockets) would do.
 *
 * Exit 0 when both ranks completed with every byte intact; 77 when there is no RDMA device
 * (e.g. Soft-RoCE not loaded: `modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE`).
 * Run it in the guest: tools/guest/run <build>/embed-verbs.
 */
#include <prepost/app.h>
#include <prepost/p2p.h>
#include <prepost/run.h>
#include <prepost/status.h>
#include <prepost/verbsapp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITERS 50u
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

static int exchange(int fd, const struct pp_verbs_peer_info *mine, struct pp_verbs_peer_info *theirs)
{
  if (write(fd, mine, sizeof *mine) != (ssize_t)sizeof *mine)
    return -1;
  size_t got = 0;
  while (got < sizeof *theirs) {
    ssize_t k = read(fd, (char *)theirs + got, sizeof *theirs - got);
    if (k <= 0)
      return -1;
    got += (size_t)k;
  }
  return 0;
}

static void config(struct pp_run_cfg *c)
{
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", "embed-verbs example");
  struct pp_engine_cfg *e = &c->engine;
  e->nranks = 2;
  e->protocol = PP_PROTO_EAGER;
  e->qp = (struct pp_qp_params){.min_rnr_timer = 12, .rnr_retry = 7, .timeout = 14,
                                .retry_cnt = 7, .max_rd_atomic = 16, .mtu = 1024,
                                .sq_depth = 128, .rq_depth = 64};
  pp_p2p_params_default(pp_p2p_params_of(e));
  e->seed = 11;
  c->seed = 11;
}

/* One rank, in its own process: 0 ok, 1 failed, 77 no device. */
static int run_rank(uint32_t rank, int fd)
{
  static struct pp_run_cfg cfg;
  config(&cfg);
  struct rank_app a = {.rank = rank, .out = malloc(MAX_SIZE), .in = malloc(MAX_SIZE)};
  if (!a.out || !a.in)
    return 1;
  struct pp_app_callbacks cb;
  pp_app_callbacks_default(&cb);
  cb.start = on_start;
  cb.send_done = on_send_done;
  cb.recv_done = on_recv_done;
  cb.done = is_done;
  char err[1024];
  struct pp_verbs_rank *r;
  enum pp_status s = pp_verbs_rank_open(&cfg, rank, NULL, &cb, &a, &r, err, sizeof err);
  if (s != PP_OK) {
    fprintf(stderr, "embed-verbs: %s\n", err);
    return s == PP_NOTFOUND ? 77 : 1;
  }
  struct pp_verbs_peer_info mine, theirs;
  uint32_t peer = 1 - rank;
  int rc = 1;
  if (!pp_verbs_rank_local_info(r, peer, &mine) || exchange(fd, &mine, &theirs)) {
    fprintf(stderr, "embed-verbs: rank %u: the exchange with rank %u failed\n", rank, peer);
    goto out;
  }
  if (pp_verbs_rank_connect(r, peer, &theirs, err, sizeof err) != PP_OK) {
    fprintf(stderr, "embed-verbs: %s\n", err);
    goto out;
  }
  /* both connected before either sends: a one-byte barrier on the same channel */
  char x = 1;
  if (write(fd, &x, 1) != 1 || read(fd, &x, 1) != 1)
    goto out;
  struct pp_rank_result res;
  s = pp_verbs_rank_run(r, 60000000000ull, &res, err, sizeof err);
  if (s != PP_OK) {
    fprintf(stderr, "embed-verbs: %s\n", err);
    goto out;
  }
  if (rank == 0) {
    printf("%s on %s: %llu messages received\n", cfg.name, res.host,
           (unsigned long long)res.stats.messages_received);
    printf("%10s %14s\n", "size (B)", "latency (ns)");
    for (uint32_t i = 0; i < NSIZES; i++)
      printf("%10u %14.0f\n", sizes[i], a.half_rtt_ns[i]);
  }
  rc = a.bad_bytes == 0 && a.done_rounds == ITERS * NSIZES && res.stats.done ? 0 : 1;
  printf("rank %u: every byte intact, every round trip done: %s\n", rank, rc ? "FAILED" : "ok");
out:
  pp_verbs_rank_close(r);
  free(a.out);
  free(a.in);
  return rc;
}

int main(void)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("embed-verbs: socketpair");
    return 1;
  }
  fflush(NULL);
  pid_t child = fork();
  if (child < 0) {
    perror("embed-verbs: fork");
    return 1;
  }
  if (child == 0) {
    close(sv[0]);
    _exit(run_rank(1, sv[1]));
  }
  close(sv[1]);
  int rc0 = run_rank(0, sv[0]);
  close(sv[0]); /* a rank 1 still waiting for the exchange sees the end */
  int st = 0;
  waitpid(child, &st, 0);
  int rc1 = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  if (rc0 == 77 || rc1 == 77)
    return 77;
  return rc0 || rc1 ? 1 : 0;
}
