/*
 * The SimGrid driver: one host and one actor per rank. Each actor owns its rank's engine and
 * simulated NIC and runs the progress loop: wait for a packet or the next deadline, hand the
 * packet or the timer to the NIC, poll the CQ into the engine, fire the engine's timers.
 * Packets travel as SimGrid communications whose simulated size is their wire size, so the
 * network model (CM02, cross-traffic off) gives their timing; the sender keeps each handle and
 * reaps it once the receiver has the packet (see "Wire transfers" below).
 *
 * The run ends at global quiescence (every actor without a deadline and no packet in flight)
 * or at max_sim_time; the actor that sees it sends a shutdown token to every mailbox.
 */
#define _GNU_SOURCE /* pthread_setattr_default_np */
#include "prepost/simrun.h"
#include "prepost/simapp.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/comm.h>
#include <xbt/config.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xbt/log.h>

#include "prepost/hang.h"
#include "prepost/prng.h"
#include "byzantine.h"
#include "sgshim.h"
#include "simtrace.h"

struct rank_state {
  struct pp_engine *engine;
  struct pp_trace_rank *tr; /* NULL unless tracing */
  struct simnic *nic;
  struct pp_byz *byz; /* faults.byzantine: this rank's messages are mutated (byzantine.h) */
  sg_mailbox_t mbox;
  sg_host_t host;
  bool idle; /* waiting with no deadline of its own */
  /* faults (pp_faults): CQ polling delay and process pause */
  struct pp_prng prng;
  uint64_t poll_at, frozen_until;
  bool poll_armed, paused_once;
  uint64_t cq_delays;
  uint64_t app_deadline; /* pp_sim_hook: the application's own next deadline */
  /* wire transfers this rank sent and has not reaped: slots, each a handle or free */
  struct tx_slot *tx;
  uint32_t tx_cap, tx_free; /* tx_free: the first free slot, TX_NONE when none */
  uint32_t *arrived;        /* slots whose packet its receiver took, to reap (tx_cap of them) */
  uint32_t n_arrived;
};

struct tx_slot {
  sg_comm_t comm; /* NULL: free */
  uint32_t next;  /* free: the next free slot */
};

static struct sim {
  const struct pp_sim_config *cfg;
  const struct pp_sim_app *app; /* pp_sim_run_app: the program's ranks, else NULL */
  FILE *log;
  uint32_t nranks;
  struct simnic_fabric *fabric;
  struct rank_state *ranks;
  sg_bar_t barrier;
  uint32_t idle;
  bool stopping;
  bool timed_out;
  bool no_progress; /* the watchdog stopped the run */
  uint64_t *marks;  /* per rank: pp_engine_progress_mark() when the watchdog last looked */
  enum pp_status error;
  char err[256];
  uint64_t end_ns;
} S;

static char shutdown_token;
static struct pp_trace_writer *trace_writer;
static bool trace_all_packets;
static const struct pp_sim_hook *sim_app;

struct pp_trace_rank *pp_sim_rank_trace(uint32_t rank)
{
  return S.ranks && rank < S.nranks ? S.ranks[rank].tr : NULL;
}

void pp_sim_set_hook(const struct pp_sim_hook *app)
{
  sim_app = app;
}

void pp_sim_set_trace(struct pp_trace_writer *w)
{
  trace_writer = w;
  trace_all_packets = w && pp_trace_writer_packets(w) == PP_TRACE_PACKETS_ALL;
}

static uint64_t now_ns(void)
{
  return (uint64_t)llround(simgrid_get_clock() * 1e9);
}

static void fail(enum pp_status s, const char *what, uint32_t rank)
{
  /* faults.byzantine: the byzantine rank's engine may well be confused by its own mutated
   * messages; only the honest ranks are judged */
  if (S.ranks && S.ranks[rank].byz && S.cfg->faults.byzantine_rank == rank)
    return;
  if (S.error == PP_OK) {
    S.error = s;
    snprintf(S.err, sizeof(S.err), "rank %u: %s: %s", rank, what, pp_status_desc(s));
  }
}

/* ------------------------------------------------------------ wire transfers
 *
 * A packet (or a train) is one SimGrid communication put on the destination's mailbox. It is
 * not detached: SimGrid 3.32 keeps every detached communication in one list of its maestro and
 * removes a finished one with std::list::remove, a walk of the whole list, two or three times
 * per communication, so each cost grew with every communication in flight in the whole
 * simulation (an alltoall at 64 ranks: 12,900 instructions per message). The sender keeps the
 * handle in a slot instead, the packet carries the slot (simnic_pkt_set_wire_ref: slot + 1 in
 * the high half, the sender's rank in the low), the receiver hands the slot back when it takes
 * the packet, and the sender waits for it (done by then: the wait returns at once) in its next
 * loop: SimGrid then walks only that actor's own list, its transfers not yet reaped. A rank
 * leaving waits for all of its transfers first, so none is cancelled under its receiver. */
#define TX_NONE UINT32_MAX
#define TX_MAX_SLOTS (1u << 24) /* beyond: detached, as before */

static bool tx_grow(struct rank_state *r)
{
  uint32_t cap = r->tx_cap ? r->tx_cap * 2 : 64;
  if (cap > TX_MAX_SLOTS)
    return false;
  struct tx_slot *tx = realloc(r->tx, cap * sizeof(*tx));
  if (!tx)
    return false;
  r->tx = tx;
  uint32_t *arrived = realloc(r->arrived, cap * sizeof(*arrived));
  if (!arrived)
    return false; /* r->tx is bigger, tx_cap not yet: harmless */
  r->arrived = arrived;
  for (uint32_t i = cap; i-- > r->tx_cap;)
    r->tx[i] = (struct tx_slot){.comm = NULL, .next = i + 1 < cap ? i + 1 : r->tx_free};
  r->tx_free = r->tx_cap;
  r->tx_cap = cap;
  return true;
}

static void wire_send(void *ctx, uint32_t src, uint32_t dst, struct simnic_pkt *pkt,
                      uint64_t wire_bytes)
{
  (void)ctx;
  /* without every packet: a train of data or ACKs records nothing (one call to know) */
  if (trace_writer && (trace_all_packets || simnic_pkt_train_has_error(pkt)))
    pp_simtrace_tx(trace_writer, now_ns(), pkt, wire_bytes, trace_all_packets);
  struct rank_state *r = &S.ranks[src];
  /* only the sending rank's own actor can reap (SimGrid lists the handle with its issuer) */
  if (sg_actor_self_get_data() != r || (r->tx_free == TX_NONE && !tx_grow(r))) {
    simnic_pkt_set_wire_ref(pkt, 0);
    sg_comm_detach(sg_mailbox_put_init(S.ranks[dst].mbox, pkt, (long)wire_bytes), NULL);
    return;
  }
  uint32_t slot = r->tx_free;
  r->tx_free = r->tx[slot].next;
  simnic_pkt_set_wire_ref(pkt, (uint64_t)(slot + 1) << 32 | src);
  r->tx[slot].comm = sg_mailbox_put_async(S.ranks[dst].mbox, pkt, (long)wire_bytes);
}

/* The receiver took pkt: its sender may reap the transfer. */
static void tx_arrived(const struct simnic_pkt *pkt)
{
  uint64_t ref = simnic_pkt_wire_ref(pkt);
  if (!ref)
    return;
  struct rank_state *r = &S.ranks[(uint32_t)ref];
  assert(r->n_arrived < r->tx_cap);
  r->arrived[r->n_arrived++] = (uint32_t)(ref >> 32) - 1;
}

static void tx_wait(struct rank_state *r, uint32_t rank, uint32_t slot)
{
  sg_comm_t c = r->tx[slot].comm;
  assert(c);
  r->tx[slot] = (struct tx_slot){.comm = NULL, .next = r->tx_free};
  r->tx_free = slot;
  if (sg_comm_wait(c) != SG_OK)
    fail(PP_IO, "a wire transfer failed in SimGrid", rank);
}

/* Reaps the transfers whose packets arrived (each wait returns at once). */
static void tx_reap(struct rank_state *r, uint32_t rank)
{
  while (r->n_arrived)
    tx_wait(r, rank, r->arrived[--r->n_arrived]);
}

/* Before the rank's actor ends: every transfer it still holds, arrived or not. */
static void tx_finish(struct rank_state *r, uint32_t rank)
{
  r->n_arrived = 0;
  for (uint32_t i = 0; i < r->tx_cap; i++)
    if (r->tx[i].comm)
      tx_wait(r, rank, i);
}

static void stop_all(void)
{
  if (S.stopping)
    return;
  S.stopping = true;
  S.end_ns = now_ns();
  for (uint32_t i = 0; i < S.nranks; i++)
    sg_comm_detach(sg_mailbox_put_init(S.ranks[i].mbox, &shutdown_token, 0), NULL);
}

/* Hands completions and async events to the engine until the NIC has none left. */
static void drain(struct rank_state *r, uint32_t rank, uint64_t now)
{
  struct pp_wc wc[32];
  struct pp_async_event ev;
  simnic_set_now(r->nic, now);
  for (;;) {
    int n = simnic_poll_cq(r->nic, wc, 32);
    for (int i = 0; i < n; i++) {
      enum pp_status s = pp_tr_on_wc(r->tr, r->engine, now, &wc[i]);
      if (s != PP_OK)
        fail(s, "engine rejected a completion", rank);
    }
    int a = 0;
    while (simnic_get_async_event(r->nic, &ev)) {
      pp_tr_on_async(r->tr, r->engine, now, &ev);
      a++;
    }
    if (n == 0 && a == 0)
      return;
  }
}

static uint64_t rank_deadline(const struct rank_state *r)
{
  uint64_t a = pp_engine_next_deadline(r->engine), b = simnic_next_deadline(r->nic);
  if (r->frozen_until) /* paused: the process wakes at the end of the pause, the NIC runs on */
    a = r->frozen_until;
  else if (r->poll_armed && r->poll_at < a)
    a = r->poll_at;
  if (!r->frozen_until && r->app_deadline < a)
    a = r->app_deadline;
  return a < b ? a : b;
}

/* faults.pause_*: the end of the pause `rank` is in at `now`, else 0. */
static uint64_t frozen_until(uint32_t rank, uint64_t now)
{
  const struct pp_faults *f = &S.cfg->faults;
  if (!f->pause_ns || rank >= 64 || !((f->pause_ranks >> rank) & 1) || now < f->pause_at_ns ||
      now - f->pause_at_ns >= f->pause_ns)
    return 0;
  return f->pause_at_ns + f->pause_ns;
}

/* faults.cq_delay_ns: may the rank poll its CQ now? A completion queued at t is polled at
 * t + U[0, cq_delay_ns] (with whatever queued meanwhile). */
static bool poll_due(struct rank_state *r, uint64_t now)
{
  const struct pp_faults *f = &S.cfg->faults;
  if (!f->cq_delay_ns || (f->until_ns && now >= f->until_ns)) {
    r->poll_armed = false;
    return true;
  }
  if (!r->poll_armed) {
    uint64_t d = simnic_has_events(r->nic) ? pp_prng_below(&r->prng, f->cq_delay_ns + 1) : 0;
    if (d == 0)
      return true;
    r->poll_armed = true;
    r->poll_at = now + d;
    r->cq_delays++;
    return false;
  }
  if (now < r->poll_at)
    return false;
  r->poll_armed = false;
  return true;
}

static void connect_rank(struct rank_state *r, uint32_t rank)
{
  for (uint32_t peer = 0; peer < S.nranks; peer++) {
    struct pp_conn_info remote;
    if (peer == rank || !pp_tr_local_info(S.ranks[peer].tr, S.ranks[peer].engine, rank, &remote))
      continue;
    enum pp_status s = pp_tr_connect(r->tr, r->engine, now_ns(), peer, &remote);
    if (s != PP_OK)
      fail(s, "connecting the QP", rank);
  }
}

/* pp_sim_hook: lets the rank's application run at `now`, then drains what it caused. */
static void app_step(struct rank_state *r, uint32_t rank, uint64_t now)
{
  if (!sim_app)
    return;
  r->app_deadline = sim_app->step(sim_app->ctx, rank, r->engine, now);
  if (sim_app->stop && sim_app->stop(sim_app->ctx))
    stop_all();
  else
    drain(r, rank, now);
}

static void progress_loop(struct rank_state *r, uint32_t rank)
{
  uint64_t max_ns = S.cfg->max_sim_time_ns;
  void *data = NULL;
  sg_comm_t get = sg_mailbox_get_async(r->mbox, &data);
  for (;;) {
    tx_reap(r, rank);
    uint64_t now = now_ns();
    uint64_t d = S.stopping ? UINT64_MAX : rank_deadline(r);
    if (!S.stopping && d == UINT64_MAX && !r->idle) {
      r->idle = true;
      if (++S.idle == S.nranks && simnic_fabric_in_flight(S.fabric) == 0)
        stop_all(); /* global quiescence */
    }
    if (!S.stopping && d > max_ns)
      d = max_ns;
    double timeout = d == UINT64_MAX ? -1.0 : (double)(d > now ? d - now : 0) / 1e9;
    if (pp_sg_wait_for(get, timeout)) {
      if (data == &shutdown_token)
        return;
      if (r->idle) {
        r->idle = false;
        S.idle--;
      }
      if (trace_writer && (trace_all_packets || simnic_pkt_train_has_error(data)))
        pp_simtrace_rx(trace_writer, now_ns(), rank, data); /* only recorded ones are tagged */
      tx_arrived(data);
      simnic_on_packet(r->nic, now_ns(), data);
      get = sg_mailbox_get_async(r->mbox, &data);
    } else if (d >= max_ns && now_ns() >= max_ns) {
      S.timed_out = true;
      stop_all();
      continue;
    }
    now = now_ns();
    if (d != UINT64_MAX && now < d && now + 1 >= d)
      now = d; /* the double clock may land one nanosecond short of the deadline */
    if (S.stopping)
      continue;
    if (simnic_next_deadline(r->nic) <= now)
      simnic_on_timer(r->nic, now);
    if ((r->frozen_until = frozen_until(rank, now))) {
      r->paused_once = true;
      continue;
    }
    simnic_set_now(r->nic, now);
    if (poll_due(r, now))
      drain(r, rank, now);
    if (pp_engine_next_deadline(r->engine) <= now) {
      enum pp_status s = pp_tr_on_timer(r->tr, r->engine, now);
      if (s != PP_OK)
        fail(s, "engine timer", rank);
      if (poll_due(r, now))
        drain(r, rank, now);
    }
    app_step(r, rank, now);
  }
}

/* The no-progress watchdog (cfg->no_progress_ns): a daemon actor that looks at every rank's
 * progress mark every bound/8 of simulated time and stops the run when none changed for the
 * bound. It only reads the engines: the ranks' events are the same with or without it. */
static bool any_progress(void)
{
  bool moved = false;
  for (uint32_t i = 0; i < S.nranks; i++) {
    uint64_t m = S.ranks[i].engine ? pp_engine_progress_mark(S.ranks[i].engine) : 0;
    moved = moved || m != S.marks[i];
    S.marks[i] = m;
  }
  return moved;
}

static void watchdog_actor(int argc, char **argv)
{
  (void)argc, (void)argv;
  sg_actor_daemonize(sg_actor_self());
  uint64_t bound = S.cfg->no_progress_ns, step = bound / 8 ? bound / 8 : 1;
  uint64_t last = now_ns();
  any_progress();
  while (!S.stopping) {
    sg_actor_sleep_for((double)step / 1e9);
    if (S.stopping)
      return;
    uint64_t now = now_ns();
    if (any_progress())
      last = now;
    else if (now - last >= bound) {
      S.no_progress = true;
      stop_all();
    }
  }
}

static void rank_actor(int argc, char **argv)
{
  (void)argc;
  uint32_t rank = (uint32_t)atoi(argv[1]);
  struct rank_state *r = &S.ranks[rank];
  sg_actor_self_set_data(r); /* wire_send: the rank whose actor sends */
  r->tx_free = TX_NONE;
  pp_prng_seed(&r->prng, pp_seed_derive(S.cfg->seed, PP_SEED_DRIVER, rank));
  sg_mailbox_set_receiver(sg_mailbox_get_name(r->mbox));
  struct pp_engine_cfg ecfg = S.cfg->engine;
  ecfg.rank = rank;
  r->tr = pp_trace_rank_create(trace_writer, rank);
  const struct pp_nic_ops *ops = &simnic_ops;
  void *nic = r->nic;
  const struct pp_faults *fl = &S.cfg->faults;
  if (fl->byzantine > 0 && fl->byzantine_rank == rank) {
    bool p2p = ecfg.protocol == PP_PROTO_EAGER || ecfg.protocol == PP_PROTO_RNDV;
    if (pp_byz_create_seeded(&simnic_ops, r->nic, p2p ? PP_BYZ_WIRE_P2P : PP_BYZ_WIRE_RING,
                             fl->byzantine, pp_seed_derive(S.cfg->seed, PP_SEED_BYZANTINE, rank),
                             &r->byz) != PP_OK) {
      fail(PP_NOMEM, "creating the byzantine peer", rank);
      return;
    }
    pp_byz_set_data_lies(r->byz, fl->byzantine_data_lies);
    ops = &pp_byz_ops;
    nic = r->byz;
  }
  enum pp_status s;
  if (S.app) { /* the program's callbacks for this rank (prepost/simapp.h) */
    struct pp_app_callbacks cb;
    void *ud = NULL;
    pp_app_callbacks_default(&cb);
    if ((s = S.app->rank(S.app->ctx, rank, &cb, &ud)) != PP_OK)
      fail(s, "the application's rank factory", rank);
    else if ((s = pp_tr_engine_create_app(r->tr, now_ns(), &ecfg, ops, nic, &cb, ud,
                                          &r->engine)) != PP_OK)
      fail(s, "creating the engine (are the application's callbacks all set?)", rank);
  } else if ((s = pp_tr_engine_create(r->tr, now_ns(), &ecfg, ops, nic, &r->engine)) != PP_OK) {
    fail(s, "creating the engine", rank);
  }
  sg_barrier_wait(S.barrier);
  if (S.error == PP_OK)
    connect_rank(r, rank);
  sg_barrier_wait(S.barrier);
  if (S.error != PP_OK) {
    tx_finish(r, rank);
    return;
  }
  uint64_t now = now_ns();
  s = pp_tr_start(r->tr, r->engine, now);
  if (s != PP_OK)
    fail(s, "starting the workload", rank);
  drain(r, rank, now);
  r->app_deadline = UINT64_MAX;
  app_step(r, rank, now);
  progress_loop(r, rank);
  tx_finish(r, rank);
}

/* --------------------------------------------------------------- contexts */

/* ASan cannot follow SimGrid's stack switching of ucontext/raw contexts, nor can valgrind
 * (callgrind's call graph): PREPOST_SG_CONTEXTS=thread (any SimGrid factory name) selects the
 * factory, thread by default under ASan. NULL: SimGrid's default (raw on x86-64). */
static const char *context_factory(void)
{
  const char *c = getenv("PREPOST_SG_CONTEXTS");
#if defined(__SANITIZE_ADDRESS__)
  if (!c || !*c)
    c = "thread";
#endif
  return c && *c ? c : NULL;
}

/* Each actor's stack. SimGrid's default is 8 MiB, so 1,024 ranks reserved 8 GiB of address space
 * for stacks alone and SimGrid aborted ("Failed to allocate stack") under an 8 GB RLIMIT_AS from
 * about 768 ranks. Measured high-water mark of a rank actor (its stack painted with a pattern at
 * the start, scanned at the end): 26 KiB, over every scenario of models/scenarios with and
 * without --trace --trace-packets --log --json, ctest's simulator suites and 400 explorer seeds
 * (the collective and p2p workloads are the deepest). 256 KiB leaves ten times that; under ASan
 * (redzones around every local) 1 MiB. SimGrid puts a guard page below each stack
 * (contexts/guard-size), so an overflow is a SIGSEGV, not silent corruption. PREPOST_SG_STACK_KIB
 * overrides it (16..1048576), e.g. for an application (prepost/app.h) with deep callbacks. */
#if defined(__SANITIZE_ADDRESS__)
#define PP_SIM_STACK_KIB 1024u
#else
#define PP_SIM_STACK_KIB 256u
#endif

static uint32_t stack_kib(void)
{
  const char *v = getenv("PREPOST_SG_STACK_KIB");
  char *end;
  unsigned long k = v && *v ? strtoul(v, &end, 10) : 0;
  return k >= 16 && k <= (1ul << 20) && !*end ? (uint32_t)k : PP_SIM_STACK_KIB;
}

/* The thread factory starts its actors with std::thread, which ignores contexts/stack-size and
 * takes glibc's default (RLIMIT_STACK, 8 MiB): give the process's new threads the same size. */
static enum pp_status thread_stack(uint32_t kib, char *err, size_t errlen)
{
  const char *c = context_factory();
  if (!c || strcmp(c, "thread") != 0)
    return PP_OK;
  pthread_attr_t a;
  int rc = pthread_attr_init(&a);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&a, (size_t)kib << 10);
    if (rc == 0)
      rc = pthread_setattr_default_np(&a);
    pthread_attr_destroy(&a);
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot set the actors' thread stack size to %u KiB: %s", kib,
             strerror(rc));
    return PP_IO;
  }
  return PP_OK;
}

/* --------------------------------------------------------------- memory */

/* SimGrid's own share per rank (host, actor, mailbox, network model), measured: the smallest
 * RLIMIT_AS under which a 1,024-rank ring runs, minus the estimate of the rest, over 1,024. */
#define PP_SIM_SG_PER_RANK (64u << 10)

void pp_sim_mem_need(const struct pp_sim_config *cfg, struct pp_sim_mem *out)
{
  struct pp_mem_need e;
  pp_engine_mem_need(&cfg->engine, &e);
  uint64_t page = 4096;
  *out = (struct pp_sim_mem){
      .engine = e.bytes,
      .nic = simnic_mem_bytes(&cfg->nic, e.qps, e.send_wqes, e.recv_wqes),
      .stack = ((uint64_t)stack_kib() << 10) + page, /* and its guard page */
      .simgrid = PP_SIM_SG_PER_RANK,
      .biggest = e.biggest,
  };
  out->per_rank = out->engine + out->nic + out->stack + out->simgrid;
  out->total = out->per_rank * cfg->engine.nranks;
}

static void fmt_bytes(char *buf, size_t len, uint64_t b)
{
  if (b >= (1ull << 30))
    snprintf(buf, len, "%.1f GiB", (double)b / (1ull << 30));
  else if (b >= (1ull << 20))
    snprintf(buf, len, "%.1f MiB", (double)b / (1ull << 20));
  else
    snprintf(buf, len, "%.1f KiB", (double)b / 1024);
}

/* The address space this process already uses (/proc/self/statm), 0 if unknown. */
static uint64_t mapped_now(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (fscanf(f, "%lu", &pages) != 1)
      pages = 0;
    fclose(f);
  }
  return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Refuses a run that would not fit, before SimGrid or any engine allocates. */
static enum pp_status mem_check(const struct pp_sim_config *cfg, char *err, size_t errlen)
{
  struct pp_sim_mem m;
  pp_sim_mem_need(cfg, &m);
  uint64_t limit = cfg->memory_limit ? cfg->memory_limit : UINT64_MAX;
  const char *which = "limits.memory";
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t used = mapped_now(), room = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    if (room < limit) {
      limit = room;
      which = "the room the address-space limit (RLIMIT_AS, ulimit -v) leaves";
    }
  }
  if (m.total <= limit)
    return PP_OK;
  char tot[32], per[32], eng[32], nic[32], stk[32], lim[32];
  fmt_bytes(tot, sizeof(tot), m.total);
  fmt_bytes(per, sizeof(per), m.per_rank);
  fmt_bytes(eng, sizeof(eng), m.engine);
  fmt_bytes(nic, sizeof(nic), m.nic);
  fmt_bytes(stk, sizeof(stk), m.stack);
  fmt_bytes(lim, sizeof(lim), limit);
  const char *lower = m.engine >= m.nic && m.engine >= m.stack ? m.biggest
                      : m.nic >= m.stack ? "the NIC profile's max_mr, cq_depth and max_qp"
                                         : "PREPOST_SG_STACK_KIB";
  snprintf(err, errlen,
           "the run needs about %s (%u ranks x %s: engine %s, simulated NIC %s, stack %s), more "
           "than %s (%s): lower ranks or %s%s",
           tot, cfg->engine.nranks, per, eng, nic, stk, which, lim, lower,
           cfg->memory_limit ? ", or raise limits.memory" : "");
  return PP_LIMIT;
}

/* --------------------------------------------------------------- platform */

static int natural_cmp(const void *pa, const void *pb)
{
  const char *a = sg_host_get_name(*(const sg_host_t *)pa);
  const char *b = sg_host_get_name(*(const sg_host_t *)pb);
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      char *ea, *eb;
      unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
      if (x != y)
        return x < y ? -1 : 1;
      a = ea;
      b = eb;
    } else if (*a != *b) {
      return (unsigned char)*a - (unsigned char)*b;
    } else {
      a++;
      b++;
    }
  }
  return (unsigned char)*a - (unsigned char)*b;
}

static enum pp_status load_platform(const struct pp_sim_config *cfg, char *err, size_t errlen)
{
  const char *file = cfg->platform.file;
  if (!file[0]) {
    if (!(cfg->platform.bandwidth_bps > 0) || cfg->platform.latency_ns == 0) {
      snprintf(err, errlen, "generated cluster needs bandwidth > 0 and latency > 0");
      return PP_INVALID;
    }
    /* A star: a route crosses its destination's port link (the switch's egress queue to that
     * host, shared fairly by the flows into it) with the whole latency, and nothing on the way
     * out, where the sending NIC already serialises its trains at the line rate (simnic's
     * tx_kick). With the source's link in the route too (the cluster this was, SPLITDUPLEX), a
     * flow slowed at a busy destination kept a share of its sender's uplink though its bytes
     * had left the NIC, and every flow of an alltoall was a variable of one connected system of
     * SimGrid's bandwidth model, whose every solve then grew with the flows in flight. */
    if (!pp_sg_star_cluster(S.nranks, cfg->platform.bandwidth_bps / 8,
                            (double)cfg->platform.latency_ns / 1e9)) {
      snprintf(err, errlen, "SimGrid refused the generated cluster of %u hosts", S.nranks);
      return PP_INVALID;
    }
    return PP_OK;
  }
  struct stat st; /* SimGrid would block reading a FIFO, and abort on a directory */
  if (stat(file, &st) != 0 || access(file, R_OK) != 0) {
    snprintf(err, errlen, "platform file '%s': %s", file, strerror(errno));
    return PP_IO;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "platform file '%s' is not a regular file", file);
    return PP_IO;
  }
  simgrid_load_platform(file);
  return PP_OK;
}

static enum pp_status map_hosts(char *err, size_t errlen)
{
  size_t n = sg_host_count();
  if (n < S.nranks) {
    snprintf(err, errlen, "platform has %zu hosts, the scenario needs %u", n, S.nranks);
    return PP_INVALID;
  }
  sg_host_t *hosts = sg_host_list();
  qsort(hosts, n, sizeof(*hosts), natural_cmp);
  for (uint32_t i = 0; i < S.nranks; i++) {
    S.ranks[i].host = hosts[i];
    char name[64];
    snprintf(name, sizeof(name), "nic-%u", i);
    S.ranks[i].mbox = sg_mailbox_by_name(name);
  }
  free(hosts);
  return PP_OK;
}

/* --------------------------------------------------------------- results */

/* Why the ranks that are not done are stuck: each engine's pending operations; a rank still
 * paused by faults.pause_* at the end is silent (its last input: the start of the pause). */
static struct pp_hang *hang_of(const struct pp_run_result *res)
{
  struct pp_hang *h = pp_run_hang_new(res, S.cfg->no_progress_ns);
  if (!h)
    return NULL;
  for (uint32_t i = 0; i < S.nranks; i++) {
    pp_hang_set_engine(h, i, S.ranks[i].engine);
    if (h->rank[i].state == PP_HANG_STUCK && frozen_until(i, S.end_ns)) {
      h->rank[i].state = PP_HANG_SILENT;
      h->rank[i].last_input_ns = S.cfg->faults.pause_at_ns;
    }
  }
  pp_hang_analyze(h);
  return h;
}

static void collect(struct pp_run_result *res)
{
  for (uint32_t i = 0; i < S.nranks; i++) {
    struct pp_rank_result *rr = &res->ranks[i];
    pp_engine_stats(S.ranks[i].engine, &rr->stats);
    simnic_counters(S.ranks[i].nic, &rr->nic);
    simnic_fault_counts(S.ranks[i].nic, &rr->faults);
    rr->faults.cq_delays = S.ranks[i].cq_delays;
    rr->faults.pauses = S.ranks[i].paused_once;
    if (S.ranks[i].byz) {
      struct pp_byz_counts bc;
      pp_byz_counts(S.ranks[i].byz, &bc);
      rr->faults.byzantine = bc.wrs - bc.done[PP_BYZ_PASS];
    }
    pp_p2p_stats(S.ranks[i].engine, &rr->p2p);
    rr->nreceives = pp_p2p_receives_copy(S.ranks[i].engine, &rr->receives, &rr->receives_dropped);
    snprintf(rr->host, sizeof(rr->host), "%s", sg_host_get_name(S.ranks[i].host));
    if (sim_app && sim_app->done) /* an MPI launcher's ranks: done when their process is */
      rr->stats.done = rr->stats.done && sim_app->done(sim_app->ctx, i);
  }
  for (uint32_t i = 0; i < S.nranks; i++)
    pp_run_result_add_latency(res, pp_engine_latency_hist(S.ranks[i].engine));
  res->sim_time_ns = S.end_ns;
  enum pp_outcome stuck = S.no_progress ? PP_OUTCOME_NO_PROGRESS
                          : S.timed_out ? PP_OUTCOME_TIMEOUT
                                        : PP_OUTCOME_STALLED;
  if (!pp_run_result_finish(res, stuck))
    res->hang = hang_of(res);
}

static void cleanup(void)
{
  for (uint32_t i = 0; S.ranks && i < S.nranks; i++) {
    pp_tr_rank_end(S.ranks[i].tr, S.ranks[i].engine, S.end_ns);
    pp_tr_engine_destroy(S.ranks[i].tr, S.ranks[i].engine, S.end_ns);
    pp_trace_rank_destroy(S.ranks[i].tr);
    pp_byz_destroy(S.ranks[i].byz);
    free(S.ranks[i].tx);
    free(S.ranks[i].arrived);
  }
  simnic_fabric_destroy(S.fabric);
  free(S.ranks);
  free(S.marks);
  S.marks = NULL;
  if (S.barrier)
    sg_barrier_destroy(S.barrier);
  S.ranks = NULL;
  S.fabric = NULL;
}

static enum pp_status sim_run(const struct pp_sim_config *cfg, const struct pp_sim_app *app,
                              FILE *log, struct pp_run_result *res, char *err, size_t errlen)
{
  static bool used;
  memset(res, 0, sizeof(*res));
  if (used) {
    snprintf(err, errlen, "one simulation per process (SimGrid cannot load a second platform)");
    return PP_STATE;
  }
  used = true;
  enum pp_status s = pp_engine_cfg_check(&cfg->engine, err, errlen);
  if (s != PP_OK)
    return s;
  memset(&S, 0, sizeof(S));
  S.cfg = cfg;
  S.app = app;
  S.log = log;
  S.nranks = cfg->engine.nranks;
  if ((s = mem_check(cfg, err, errlen)) != PP_OK)
    return s;
  char arg0[] = "prepost", factory[128], stack[64];
  const char *contexts = context_factory();
  uint32_t kib = stack_kib();
  snprintf(factory, sizeof(factory), "--cfg=contexts/factory:%s", contexts ? contexts : "");
  snprintf(stack, sizeof(stack), "--cfg=contexts/stack-size:%u", kib);
  char *argv[] = {arg0, stack, contexts ? factory : NULL, NULL};
  int argc = argv[2] ? 3 : 2;
  if ((s = thread_stack(kib, err, errlen)) != PP_OK)
    return s;
  xbt_log_control_set("root.thres:critical");
  simgrid_init(&argc, argv);
  sg_cfg_set_string("network/model", "CM02");
  sg_cfg_set_boolean("network/crosstraffic", "no");
  if ((s = load_platform(cfg, err, errlen)) != PP_OK)
    return s;
  S.ranks = calloc(S.nranks, sizeof(*S.ranks));
  if (!S.ranks)
    return PP_NOMEM;
  if ((s = map_hosts(err, errlen)) != PP_OK)
    goto out_cleanup;
  struct simnic_wire wire = {.ctx = NULL, .send = wire_send};
  s = simnic_fabric_create(S.nranks, &cfg->nic, &cfg->faults, cfg->seed, &wire, &S.fabric);
  if (s != PP_OK) {
    snprintf(err, errlen, "cannot create the simulated NICs: %s", pp_status_desc(s));
    goto out_cleanup;
  }
  simnic_fabric_set_log(S.fabric, log);
  for (uint32_t i = 0; i < S.nranks; i++) {
    S.ranks[i].nic = simnic_fabric_nic(S.fabric, i);
    /* the NIC serialises at the rate of the path to its neighbour (its own port link) */
    sg_host_t peer = S.ranks[(i + 1) % S.nranks].host;
    double bps = sg_host_get_route_bandwidth(S.ranks[i].host, peer) * 8;
    if (simnic_set_line_rate(S.ranks[i].nic, bps) != PP_OK) {
      snprintf(err, errlen, "the platform's link of host %s has no usable bandwidth (%g bit/s)",
               sg_host_get_name(S.ranks[i].host), bps);
      s = PP_INVALID;
      goto out_cleanup;
    }
  }
  S.barrier = sg_barrier_init(S.nranks);
  for (uint32_t i = 0; i < S.nranks; i++) {
    char name[32], num[16];
    snprintf(name, sizeof(name), "rank%u", i);
    snprintf(num, sizeof(num), "%u", i);
    const char *args[] = {name, num};
    sg_actor_create_(name, S.ranks[i].host, rank_actor, 2, args);
  }
  if (cfg->no_progress_ns) {
    S.marks = calloc(S.nranks, sizeof(*S.marks));
    if (!S.marks) {
      snprintf(err, errlen, "out of memory for the no-progress watchdog");
      s = PP_NOMEM;
      goto out_cleanup;
    }
    const char *args[] = {"watchdog"};
    sg_actor_create_("watchdog", S.ranks[0].host, watchdog_actor, 1, args);
  }
  simgrid_run();
  if (S.error != PP_OK) {
    snprintf(err, errlen, "%s", S.err);
    s = S.error;
    goto out_cleanup;
  }
  if ((s = pp_run_result_init(res, S.nranks)) != PP_OK)
    goto out_cleanup;
  collect(res);
out_cleanup:
  cleanup();
  return s;
}

enum pp_status pp_sim_run(const struct pp_sim_config *cfg, FILE *log, struct pp_run_result *res,
                          char *err, size_t errlen)
{
  return sim_run(cfg, NULL, log, res, err, errlen);
}

enum pp_status pp_sim_run_app(const struct pp_sim_config *cfg, const struct pp_sim_app *app,
                              FILE *log, struct pp_run_result *res, char *err, size_t errlen)
{
  static struct pp_sim_config c; /* 13 KB; the run keeps a pointer to it */
  memset(res, 0, sizeof(*res));
  if (!app || !app->rank) {
    snprintf(err, errlen, "an application run needs a rank factory (struct pp_sim_app.rank)");
    return PP_INVALID;
  }
  c = *cfg;
  c.engine.workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  return sim_run(&c, app, log, res, err, errlen);
}
