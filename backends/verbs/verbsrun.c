/*
 * The verbs driver: one process per rank, each owning its engine and its verbs NIC, time from
 * CLOCK_MONOTONIC in nanoseconds. The progress loop polls the CQs into the engine a bounded batch
 * at a time, fires the engine's timers when due and, at a fixed period, looks at the control
 * socket and async events and reports progress and state; it busy-polls, or (--progress event)
 * sleeps on the completion channel when there is nothing to do. See verbsrun.h and boot.h.
 */
#define _GNU_SOURCE
#include "prepost/verbsrun.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "errf.h"
#include "launch.h"
#include "pmix.h"
#include "prepost/app.h"
#include "prepost/p2p.h"
#include "prepost/verbsapp.h"
#include "prepost/trace.h"

#define EXIT_RANK_FAILED 4

_Static_assert(PP_VERBS_SECRET_BYTES == BOOT_SECRET_BYTES, "the job secret's size");

void pp_verbs_opts_default(struct pp_verbs_opts *o)
{
  *o = (struct pp_verbs_opts){.rank = -1, .log_fd = -1};
  o->nic.gid_index = -1;
  snprintf(o->coord_host, sizeof(o->coord_host), "127.0.0.1");
}

/* ---------------------------------------------------------------- rank table */

static int add_entry(struct pp_verbs_rank_entry **t, uint32_t *n, const char *hostport,
                     const char *dev, const char *where, char *err, size_t errlen)
{
  if (*n >= PP_MAX_RANKS) {
    errf(err, errlen, "%s: more than %u ranks", where, PP_MAX_RANKS);
    return -1;
  }
  struct pp_verbs_rank_entry *x = realloc(*t, (*n + 1) * sizeof(**t));
  if (!x) {
    errf(err, errlen, "out of memory");
    return -1;
  }
  *t = x;
  struct pp_verbs_rank_entry *e = &x[*n];
  memset(e, 0, sizeof(*e));
  char e2[256];
  if (boot_parse_hostport(hostport, PP_VERBS_DEFAULT_PORT, e->host, sizeof(e->host), &e->port, e2,
                          sizeof(e2))) {
    errf(err, errlen, "%s: %s", where, e2);
    return -1;
  }
  if (dev && strlen(dev) >= sizeof(e->device)) {
    errf(err, errlen, "%s: device name too long", where);
    return -1;
  }
  snprintf(e->device, sizeof(e->device), "%s", dev ? dev : "");
  (*n)++;
  return 0;
}

int pp_verbs_parse_table(const char *spec, struct pp_verbs_rank_entry **out, uint32_t *n,
                         char *err, size_t errlen)
{
  *out = NULL;
  *n = 0;
  FILE *f = strchr(spec, ',') ? NULL : fopen(spec, "r");
  if (f) {
    char line[1024], where[1100];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
      lineno++;
      char *hash = strchr(line, '#');
      if (hash)
        *hash = '\0';
      char *save, *a = strtok_r(line, " \t\r\n", &save), *b = strtok_r(NULL, " \t\r\n", &save);
      char *c = strtok_r(NULL, " \t\r\n", &save);
      if (!a)
        continue;
      snprintf(where, sizeof(where), "%s:%d", spec, lineno);
      if (c) {
        errf(err, errlen, "%s: expected 'HOST[:PORT] [DEVICE]', got a third field '%s'", where, c);
        fclose(f);
        goto fail;
      }
      if (add_entry(out, n, a, b, where, err, errlen)) {
        fclose(f);
        goto fail;
      }
    }
    fclose(f);
    if (*n == 0) {
      errf(err, errlen, "%s: no rank in the table", spec);
      goto fail;
    }
    return 0;
  }
  if (!strchr(spec, ',') && !strchr(spec, ':') && access(spec, F_OK) != 0 &&
      strchr(spec, '/')) {
    errf(err, errlen, "rank table '%s': %s", spec, strerror(errno));
    return -1;
  }
  char *copy = strdup(spec), *save = NULL;
  if (!copy) {
    errf(err, errlen, "out of memory");
    return -1;
  }
  int i = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save), i++) {
    char where[64];
    snprintf(where, sizeof(where), "--ranks entry %d", i);
    if (add_entry(out, n, tok, NULL, where, err, errlen)) {
      free(copy);
      goto fail;
    }
  }
  free(copy);
  if (*n == 0) {
    errf(err, errlen, "--ranks: empty rank table");
    goto fail;
  }
  return 0;
fail:
  free(*out);
  *out = NULL;
  *n = 0;
  return -1;
}

/* ---------------------------------------------------------------- one rank */

struct rank {
  const struct pp_run_cfg *cfg;
  const struct pp_verbs_opts *o;
  uint32_t id;
  struct vnic *nic;
  struct pp_engine *e;
  struct pp_trace_rank *tr;     /* NULL unless recording */
  struct pp_trace_writer *tw;
  FILE *tf;
  uint64_t trace_flushed;
  struct boot_link l; /* control connection to the coordinator (authenticated) */
  uint64_t gen; /* activity: completions, events and timers processed */
  uint64_t t0;
  char host[BOOT_HOST_MAX];
  char chost[256];    /* the coordinator ("": not known yet, PMIx mode before the exchange) */
  uint16_t cport;
  uint8_t secret[BOOT_SECRET_BYTES]; /* the job's (PMIx mode: possibly learned from rank 0) */
  struct watch *watch; /* the no-progress watch of the data phase (NULL before) */
  struct report *rep;  /* the idle report of the data phase (NULL before) */
  char *err;
  size_t errlen;
};

static void logline(struct rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logline(struct rank *r, const char *fmt, ...)
{
  if (r->o->log_fd < 0)
    return;
  char buf[512];
  uint64_t t = boot_now_ns() - r->t0;
  int k = snprintf(buf, sizeof(buf), "%" PRIu64 ".%09" PRIu64 " rank %u ", t / 1000000000u,
                   t % 1000000000u, r->id);
  va_list ap;
  va_start(ap, fmt);
  k += vsnprintf(buf + k, sizeof(buf) - (size_t)k - 1, fmt, ap);
  va_end(ap);
  if (k > (int)sizeof(buf) - 2)
    k = (int)sizeof(buf) - 2;
  buf[k++] = '\n';
  /* one write per line: lines of several rank processes interleave but never mix */
  ssize_t w = write(r->o->log_fd, buf, (size_t)k);
  (void)w;
}

/* ---- recording (--trace): this rank's own file, merged by the launcher's caller */

void pp_verbs_trace_part(const char *path, uint32_t rank, char *out, size_t len)
{
  snprintf(out, len, "%s.rank%u", path, rank);
}

static int trace_sink(void *ctx, const void *buf, size_t len)
{
  return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

/* Opens this rank's part file and its recorder; -1 with err set. */
static int trace_open(struct rank *r, const struct pp_engine_cfg *ecfg)
{
  const struct pp_verbs_trace *o = &r->o->trace;
  char path[1100];
  pp_verbs_trace_part(o->path, r->id, path, sizeof(path));
  if (!(r->tf = fopen(path, "wb"))) {
    errf(r->err, r->errlen, "rank %u: cannot write trace '%s': %s", r->id, path, strerror(errno));
    return -1;
  }
  struct pp_trace_info info = {.version = o->version,
                               .commit = o->commit,
                               .backend = "verbs",
                               .scenario = r->cfg->name,
                               .seed = r->cfg->seed,
                               .nranks = ecfg->nranks,
                               .capture_bytes = o->capture_bytes,
                               .snapshot_max = PP_TRACE_SNAPSHOT_DEFAULT};
  enum pp_status s = pp_trace_writer_create(trace_sink, r->tf, &info, &r->tw);
  if (s == PP_OK)
    s = pp_trace_kv_engine_cfg(r->tw, &r->cfg->engine);
  if (s == PP_OK)
    s = pp_trace_kv_str(r->tw, "verbs.device", vnic_device_name(r->nic));
  if (s == PP_OK)
    s = pp_trace_set_origin(r->tw, o->origin_ns ? o->origin_ns : r->t0);
  if (s == PP_OK)
    s = pp_trace_begin(r->tw);
  if (s == PP_OK && !(r->tr = pp_trace_rank_create(r->tw, r->id)))
    s = PP_NOMEM;
  if (s != PP_OK) {
    errf(r->err, r->errlen, "rank %u: cannot start trace '%s': %s", r->id, path,
         pp_status_desc(s));
    return -1;
  }
  r->trace_flushed = boot_now_ns();
  return 0;
}

/* Before the rank sleeps: hands the records so far to the file every 100 ms (a rank that gets
 * killed leaves a readable prefix). */
static void trace_tick(struct rank *r, uint64_t now)
{
  if (!r->tw || now - r->trace_flushed < 100000000ull)
    return;
  pp_trace_flush(r->tw);
  fflush(r->tf);
  r->trace_flushed = now;
}

/* Ends the file (END chunk) and frees the recorder; -1 when anything failed on the way. */
static int trace_close(struct rank *r)
{
  if (!r->tf)
    return 0;
  int rc = 0;
  if (r->tw && (pp_trace_finish(r->tw) != PP_OK || pp_trace_writer_status(r->tw) != PP_OK))
    rc = -1;
  if (fclose(r->tf) != 0)
    rc = -1;
  pp_trace_rank_destroy(r->tr);
  pp_trace_writer_destroy(r->tw);
  r->tr = NULL;
  r->tw = NULL;
  r->tf = NULL;
  return rc;
}

/* ---- the progress engine
 *
 * One pass of the loop: hand at most POLL_BUDGET completions to the engine, fire its timers when
 * due, and, every HOUSEKEEP_NS of wall time, the housekeeping: async events and control messages
 * (one non-blocking ppoll on their two fds), the no-progress watch, the idle/done state report
 * and the trace flush. The budget bounds the work between two looks at the clock: rxe completes
 * work inside ibv_post_send, so under a bandwidth run the CQ is never empty, and a loop that
 * drains it to the end would starve the timers, the reports and the coordinator's messages.
 *
 * busy (the default): the loop never sleeps and makes no system call on the data path (polling
 * a CQ is a user-space read of its ring; the housekeeping's ppoll runs at most once every
 * HOUSEKEEP_NS). event: once a pass finds nothing to do and no timer is due within
 * SPIN_BEFORE_DEADLINE_NS, the rank arms the CQs and sleeps in ppoll on the completion channel,
 * the async event fd and the control socket until the next deadline: less CPU on idle waits, a
 * wake-up latency per message. */

/* Completions handed to the engine per pass (vnic_poll_cq takes up to 32 per call). */
#define POLL_BUDGET 64
/* How often a busy rank looks at its control socket and async events, its progress and state. */
#define HOUSEKEEP_NS 100000ull
/* busy mode: a pass that found nothing reads the clock only once in this many such passes (a
 * pass that worked always does). Where the kernel's clocksource cannot be read from user space
 * (HPET or ACPI PM, as in an emulated guest whose TSC is marked unstable) clock_gettime is a
 * system call and a device read, and reading it once per pass was the busy loop's largest cost:
 * 14-21% of all CPU samples in the guest's bandwidth runs (backends/verbs/README.md, "Where the
 * time goes"). A due timer fires at most this many empty polls late. */
#define IDLE_PASSES_PER_CLOCK 8u

const char *pp_verbs_progress_name(enum pp_verbs_progress m)
{
  static const char *const names[] = {
#define PP_X(id, name, desc) [PP_VERBS_PROGRESS_##id] = name,
      PP_VERBS_PROGRESS_LIST(PP_X)
#undef PP_X
  };
  return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : "?";
}

int pp_verbs_progress_from_name(const char *s)
{
  for (int m = 0; m < PP_VERBS_PROGRESS_COUNT; m++)
    if (!strcmp(s, pp_verbs_progress_name((enum pp_verbs_progress)m)))
      return m;
  return -1;
}

/* Hands at most `budget` completions to the engine, each batch timestamped by one clock reading
 * taken after it was polled; how many, or -1 on a CQ error or an engine refusal (err set).
 * `*clock`, when not NULL, is set to the last reading if there was one (left alone if nothing
 * was polled), so the caller need not read the clock again (one HPET read is ~1.2-2 us in the
 * emulated guest: "Where the time goes" in README.md). */
static int drain_at(struct rank *r, int budget, uint64_t *clock)
{
  struct pp_wc wc[32];
  int done = 0;
  while (done < budget) {
    int want = budget - done < 32 ? budget - done : 32;
    int n = vnic_poll_cq(r->nic, wc, want);
    if (n < 0) {
      errf(r->err, r->errlen, "rank %u: polling the CQ of %s failed", r->id,
           vnic_device_name(r->nic));
      return -1;
    }
    uint64_t now = n ? boot_now_ns() : 0;
    if (n && clock)
      *clock = now;
    for (int i = 0; i < n; i++) {
      logline(r, "wc qp %u wr_id %#" PRIx64 " %s %s len %u%s", wc[i].qp_num, wc[i].wr_id,
              pp_wc_opcode_name(wc[i].opcode), pp_wc_status_name(wc[i].status), wc[i].byte_len,
              wc[i].status == PP_WC_RNR_RETRY_EXC_ERR ? " (RNR retries exhausted)" : "");
      enum pp_status s = pp_tr_on_wc(r->tr, r->e, now, &wc[i]);
      if (s != PP_OK) {
        errf(r->err, r->errlen, "rank %u: the engine rejected a completion (qp %u, %s): %s",
             r->id, wc[i].qp_num, pp_wc_status_name(wc[i].status), pp_status_desc(s));
        return -1;
      }
    }
    r->gen += (uint64_t)n;
    done += n;
    if (n < want)
      break; /* the CQs are empty for now */
  }
  return done;
}

static int drain(struct rank *r, int budget)
{
  return drain_at(r, budget, NULL);
}

/* Hands the pending async events to the engine (their fd said readable); how many. */
static int drain_async(struct rank *r)
{
  struct pp_async_event ev;
  int a = 0;
  uint64_t now = boot_now_ns();
  while (vnic_get_async_event(r->nic, &ev)) {
    logline(r, "async %s qp %u srq %u", pp_event_name(ev.type), ev.qp_num, ev.srq_num);
    pp_tr_on_async(r->tr, r->e, now, &ev);
    a++;
  }
  r->gen += (uint64_t)a;
  return a;
}

/* BOOT_STATE: idle at r->gen (boot.h). */
static int send_state(struct rank *r, bool done)
{
  struct boot_buf b = {0};
  boot_put8(&b, done);
  boot_put64(&b, r->gen);
  int rc = boot_send(&r->l, BOOT_STATE, &b, boot_now_ns() + 10000000000ull);
  boot_buf_free(&b);
  return rc;
}

static bool is_idle(struct rank *r)
{
  return pp_engine_next_deadline(r->e) == PP_NO_DEADLINE && vnic_sends_outstanding(r->nic) == 0;
}

static int mark_reply(struct rank *r, struct boot_buf *b);
static void probe_answered(struct rank *r, bool idle);

/* A control message during the run: 1 STOP, 0 handled, -1 failure (err set). */
static int control(struct rank *r, struct boot_buf *b)
{
  uint32_t type;
  char e2[128];
  int rc = boot_recv(&r->l, &type, b, boot_now_ns() + 10000000000ull, e2, sizeof(e2));
  if (rc != 1) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator: %s", r->id, rc ? e2 : "timeout");
    return -1;
  }
  if (type == BOOT_STOP)
    return 1;
  if (type == BOOT_ABORT) {
    char t[BOOT_TEXT_MAX];
    errf(r->err, r->errlen, "rank %u: the run was aborted: %s", r->id,
         boot_sanitize(b->p, b->len, t, sizeof(t)));
    return -1;
  }
  if (type == BOOT_MARK_PROBE)
    return mark_reply(r, b);
  if (type != BOOT_PROBE) {
    errf(r->err, r->errlen, "rank %u: unexpected control message %u", r->id, type);
    return -1;
  }
  uint64_t id = boot_get64(b);
  /* what is in the CQ now counts: a completion not yet polled makes the reply's gen differ from
   * the idle report's, and the probe void */
  if (drain(r, POLL_BUDGET) < 0)
    return -1;
  struct boot_buf o = {0};
  bool idle = is_idle(r);
  boot_put64(&o, id);
  boot_put8(&o, idle);
  boot_put64(&o, r->gen);
  probe_answered(r, idle);
  rc = boot_send(&r->l, BOOT_PROBE_REPLY, &o, boot_now_ns() + 10000000000ull);
  boot_buf_free(&o);
  if (rc) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator", r->id);
    return -1;
  }
  return 0;
}

/* The idle report (boot.h, BOOT_STATE; the coordinator's side and why it is safe: boot.c, "the
 * run: quiescence detection"). A rank tells the coordinator only that it is idle, never that it
 * is busy again: the coordinator's probe finds that out (the reply's gen differs from the
 * report's, or it says not idle), so nothing is sent when activity resumes, which is when a
 * message is on its way. A rank reports idleness after a grace of quiet time (no activity, no
 * timer set, no send outstanding): protocols with round trips go idle between messages, and a
 * report (and the probe it may start) each time would cost more than the messages, and could
 * coincide with the next one. The grace starts at IDLE_GRACE_NS and doubles, up to
 * IDLE_GRACE_MAX_NS, each time a report turns out premature (activity after it): a workload that
 * pauses between messages stops reporting after a few, while the end of a run, which is mostly
 * reached with every rank done, is told after IDLE_GRACE_DONE_NS (doubled the same way, from its
 * own start, when a done rank's report was premature). A run that ends without every rank done
 * (a deadlock: quiescent, not complete) is detected at most IDLE_GRACE_MAX_NS late. */
#define IDLE_GRACE_NS 5000000ull
#define IDLE_GRACE_MAX_NS 80000000ull
#define IDLE_GRACE_DONE_NS 1000000ull

/* What the coordinator holds of this rank's idleness, as far as it can know. */
struct report {
  bool standing;              /* an idle report at sent_gen that no activity has refuted yet */
  bool sent_done;             /* ... made when done */
  uint64_t sent_gen;
  uint64_t seen_gen, quiet_since; /* quiet since when (the gen as then) */
  uint64_t grace, grace_done; /* the current graces (not done, done) */
};

/* The report made is void: activity after it (or a probe answered "not idle"). Premature: the
 * grace used for it doubles. */
static void report_void(struct rank *r, struct report *p)
{
  if (!p->standing)
    return;
  uint64_t *g = p->sent_done ? &p->grace_done : &p->grace;
  *g = *g * 2 > IDLE_GRACE_MAX_NS ? IDLE_GRACE_MAX_NS : *g * 2;
  p->standing = false;
  logline(r, "idle report at gen %" PRIu64 " premature: grace %.1f ms", p->sent_gen, *g / 1e6);
}

/* A probe was answered: a reply that does not confirm the standing report voids it at the
 * coordinator, so this rank must report again when it is idle. */
static void probe_answered(struct rank *r, bool idle)
{
  struct report *p = r->rep;
  if (p && (!idle || r->gen != p->sent_gen))
    report_void(r, p);
}

/* event mode: how long before a timer's deadline a rank stops sleeping and polls instead. A
 * ppoll sleep ends up to the timer slack (50 us) plus the wake-up latency (tens of us in a VM)
 * late: a workload that posts every 2 us would be paced at one message per ~60 us, and a slow
 * consumer would no longer be slower than its sender. Sleeping until this margin and polling the
 * rest keeps timers within microseconds at the cost of at most this much CPU per timer. */
#define SPIN_BEFORE_DEADLINE_NS 100000ull

/* The no-progress bound (prepost/hang.h): the progress mark is looked at every bound/8 after
 * activity (it walks the pending operations: not after every completion), and a change is told
 * to the coordinator, which stops the run when nobody told one for the bound. */
struct watch {
  uint64_t step, mark, gen, next;
};

/* The coordinator suspects no progress (boot.h, MARK_PROBE): what is in the CQ now counts (this
 * rank may just be back from a long ibv_post_send), then whether the mark changed since it was
 * last looked at. 0, or -1 (err set). */
static int mark_reply(struct rank *r, struct boot_buf *b)
{
  uint64_t id = boot_get64(b);
  if (b->bad) {
    errf(r->err, r->errlen, "rank %u: a truncated MARK_PROBE", r->id);
    return -1;
  }
  if (drain(r, POLL_BUDGET) < 0)
    return -1;
  struct watch *w = r->watch;
  uint64_t m = pp_engine_progress_mark(r->e);
  bool moved = w && m != w->mark;
  if (w) {
    w->mark = m;
    w->gen = r->gen;
  }
  logline(r, "mark probe %" PRIu64 ": %s", id, moved ? "moved" : "still");
  struct boot_buf o = {0};
  boot_put64(&o, id);
  boot_put8(&o, moved);
  /* and what its device says about its QPs: a device that owes work is not a stalled run */
  struct vnic_qp_state q[BOOT_MAX_QPS];
  size_t nq = vnic_qp_states(r->nic, q, BOOT_MAX_QPS);
  boot_put_qps(&o, q, nq < BOOT_MAX_QPS ? (uint32_t)nq : BOOT_MAX_QPS, (uint32_t)nq);
  int rc = boot_send(&r->l, BOOT_MARK_REPLY, &o, boot_now_ns() + 10000000000ull);
  boot_buf_free(&o);
  if (rc)
    errf(r->err, r->errlen, "rank %u: lost the coordinator", r->id);
  return rc ? -1 : 0;
}

/* -1: lost the coordinator. */
static int watch_progress(struct rank *r, struct watch *w, uint64_t now)
{
  if (!w->step || r->gen == w->gen || now < w->next)
    return 0;
  w->gen = r->gen;
  w->next = now + w->step;
  uint64_t m = pp_engine_progress_mark(r->e);
  if (m == w->mark)
    return 0;
  w->mark = m;
  logline(r, "progress");
  return boot_send(&r->l, BOOT_PROGRESS, NULL, now + 10000000000ull);
}

/* The loop's state between passes. */
struct loop {
  struct watch w;
  struct boot_buf b;
  struct report rep;
  uint64_t next_house;
  uint64_t now;          /* the clock at its last reading */
  uint32_t idle_passes;  /* busy: empty passes since it was read */
};

/* The grace before an idle report now (done or not). */
static uint64_t report_grace(const struct report *p, bool done)
{
  return done ? p->grace_done : p->grace;
}

/* The idle report (see struct report): once per quiet spell, after its grace; nothing when
 * activity resumes (the report is then void, here, and at the coordinator by its probe).
 * -1: lost the coordinator. */
static int report_state(struct rank *r, struct loop *L, uint64_t now)
{
  struct report *p = &L->rep;
  bool idle = is_idle(r);
  if (!idle || r->gen != p->seen_gen) {
    p->quiet_since = now;
    p->seen_gen = r->gen;
  }
  if (p->standing && r->gen != p->sent_gen)
    report_void(r, p);
  if (!idle || p->standing)
    return 0;
  bool done = pp_engine_done(r->e);
  if (now - p->quiet_since < report_grace(p, done))
    return 0;
  logline(r, "state idle%s at gen %" PRIu64, done ? ", done" : "", r->gen);
  if (send_state(r, done))
    return -1;
  p->standing = true;
  p->sent_done = done;
  p->sent_gen = r->gen;
  return 0;
}

/* Async events and a control message whose fds are readable: 1 STOP, 0 go on, -1 failure. */
static int service_fds(struct rank *r, struct loop *L, bool async_ready, bool ctl_ready)
{
  if (async_ready)
    drain_async(r);
  return ctl_ready ? control(r, &L->b) : 0;
}

/* The housekeeping (see the top of this section); poll_fds: look at the async and control fds
 * first (every HOUSEKEEP_NS; an event-mode rank about to sleep leaves them to the sleep's
 * ppoll). 1 STOP, 0 go on, -1 failure. */
static int housekeeping(struct rank *r, struct loop *L, uint64_t now, bool poll_fds)
{
  L->next_house = now + HOUSEKEEP_NS;
  if (poll_fds) {
    struct pollfd pf[2] = {{.fd = vnic_async_fd(r->nic), .events = POLLIN},
                           {.fd = r->l.fd, .events = POLLIN}};
    struct timespec zero = {0, 0};
    int k = ppoll(pf, 2, &zero, NULL);
    if (k < 0 && errno != EINTR) {
      errf(r->err, r->errlen, "rank %u: ppoll: %s", r->id, strerror(errno));
      return -1;
    }
    int c = k > 0 ? service_fds(r, L, pf[0].revents != 0, pf[1].revents != 0) : 0;
    if (c)
      return c;
  }
  if (watch_progress(r, &L->w, now) || report_state(r, L, now)) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator", r->id);
    return -1;
  }
  trace_tick(r, now);
  return 0;
}

/* event mode, nothing to do: arms the CQs and sleeps until a completion, an async event, a
 * control message or the next deadline (the engine's timer, the idle report, the progress
 * watch). 1 STOP, 0 go on, -1 failure. */
static int sleep_for_event(struct rank *r, struct loop *L, uint64_t now, uint64_t d)
{
  if (d != PP_NO_DEADLINE && d - now <= SPIN_BEFORE_DEADLINE_NS)
    return 0; /* the deadline is near: poll the CQ until it is due */
  if (vnic_arm_cq(r->nic)) {
    errf(r->err, r->errlen, "rank %u: ibv_req_notify_cq failed", r->id);
    return -1;
  }
  /* a completion that arrived before the arm raises no event: look once more */
  int n = drain(r, POLL_BUDGET);
  if (n != 0)
    return n < 0 ? -1 : 0;
  uint64_t wait = d == PP_NO_DEADLINE ? 1000000000ull : d - now;
  if (wait > 1000000000ull)
    wait = 1000000000ull;
  if (d != PP_NO_DEADLINE && wait == d - now)
    wait -= SPIN_BEFORE_DEADLINE_NS; /* wake up early, poll the rest */
  struct report *p = &L->rep;
  uint64_t report_at = p->quiet_since + report_grace(p, pp_engine_done(r->e));
  if (is_idle(r) && !p->standing && report_at > now && report_at - now < wait)
    wait = report_at - now; /* wake up to report idleness */
  struct watch *w = &L->w;
  if (w->step && r->gen != w->gen && (w->next <= now || w->next - now < wait))
    wait = w->next > now ? w->next - now : 0; /* wake up to look at the progress mark */
  struct timespec ts = {(time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull)};
  struct pollfd pf[3] = {{.fd = vnic_comp_fd(r->nic), .events = POLLIN},
                         {.fd = vnic_async_fd(r->nic), .events = POLLIN},
                         {.fd = r->l.fd, .events = POLLIN}};
  int k = ppoll(pf, 3, &ts, NULL);
  if (k < 0 && errno != EINTR) {
    errf(r->err, r->errlen, "rank %u: ppoll: %s", r->id, strerror(errno));
    return -1;
  }
  if (k <= 0)
    return 0;
  if (pf[0].revents)
    vnic_consume_cq_events(r->nic);
  return service_fds(r, L, pf[1].revents != 0, pf[2].revents != 0);
}

static int progress(struct rank *r)
{
  uint64_t bound = r->cfg->no_progress_ns;
  struct loop L = {.now = boot_now_ns()};
  L.rep = (struct report){.sent_gen = UINT64_MAX, .seen_gen = UINT64_MAX, .quiet_since = L.now,
                          .grace = IDLE_GRACE_NS, .grace_done = IDLE_GRACE_DONE_NS};
  L.w = (struct watch){.step = bound ? (bound / 8 ? bound / 8 : 1) : 0, .gen = r->gen};
  L.w.mark = bound ? pp_engine_progress_mark(r->e) : 0;
  r->watch = &L.w;
  r->rep = &L.rep;
  bool busy = r->o->progress == PP_VERBS_PROGRESS_BUSY;
  int rc = 0;
  while (rc == 0) {
    uint64_t polled = 0; /* the clock drain read after its last batch, if it polled any */
    int n = drain_at(r, POLL_BUDGET, &polled);
    if (n < 0) {
      rc = -1;
      break;
    }
    /* A pass that worked takes drain's reading (the engine's work since is a few us: a timer
     * fires that much later at most); a pass that found nothing reads the clock itself (busy:
     * once in IDLE_PASSES_PER_CLOCK). */
    if (n > 0) {
      L.now = polled > L.now ? polled : L.now;
      L.idle_passes = 0;
    } else if (!busy || ++L.idle_passes >= IDLE_PASSES_PER_CLOCK) {
      L.now = boot_now_ns();
      L.idle_passes = 0;
    }
    uint64_t now = L.now;
    uint64_t d = pp_engine_next_deadline(r->e);
    bool timer = d <= now;
    if (timer) {
      logline(r, "timer due %+.1f us", ((double)now - (double)d) / 1e3);
      enum pp_status s = pp_tr_on_timer(r->tr, r->e, now);
      r->gen++;
      if (s != PP_OK) {
        errf(r->err, r->errlen, "rank %u: engine timer: %s", r->id, pp_status_desc(s));
        rc = -1;
        break;
      }
      d = pp_engine_next_deadline(r->e);
    }
    bool worked = n > 0 || timer, due = now >= L.next_house;
    if (due || (!busy && !worked))
      rc = housekeeping(r, &L, now, due);
    if (rc == 0 && !busy && !worked)
      rc = sleep_for_event(r, &L, now, d);
  }
  boot_buf_free(&L.b);
  r->watch = NULL;
  r->rep = NULL;
  return rc > 0 ? 0 : -1;
}

/* Waits for one message of `want` type; -1 with err on anything else. */
static int expect(struct rank *r, uint32_t want, const char *what, struct boot_buf *b,
                  uint64_t deadline)
{
  uint32_t type;
  char e2[128];
  int rc = boot_recv(&r->l, &type, b, deadline, e2, sizeof(e2));
  if (rc == 0) {
    errf(r->err, r->errlen, "rank %u: no %s from the coordinator within %.0f s", r->id, what,
         (deadline - boot_now_ns() + r->o->boot_timeout_ns) / 1e9);
    return -1;
  }
  if (rc < 0) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator while waiting for %s: %s", r->id,
         what, e2);
    return -1;
  }
  if (type == BOOT_ABORT) {
    char t[BOOT_TEXT_MAX];
    errf(r->err, r->errlen, "rank %u: the coordinator aborted the run: %s", r->id,
         boot_sanitize(b->p, b->len, t, sizeof(t)));
    return -1;
  }
  if (type != want) {
    errf(r->err, r->errlen, "rank %u: expected %s from the coordinator, got message %u", r->id,
         what, type);
    return -1;
  }
  return 0;
}

static int send_hello(struct rank *r)
{
  uint32_t n = r->cfg->engine.nranks;
  bool *has = calloc(n, sizeof(*has));
  struct pp_conn_info *info = calloc(n, sizeof(*info));
  struct boot_buf b = {0};
  int rc = -1;
  if (has && info) {
    struct vnic_addr a;
    vnic_local_addr(r->nic, &a);
    for (uint32_t j = 0; j < n; j++)
      has[j] = j != r->id && pp_tr_local_info(r->tr, r->e, j, &info[j]);
    boot_put_hello(&b, n, &a, r->host, vnic_device_name(r->nic), has, info);
    rc = b.bad ? -1 : boot_send(&r->l, BOOT_HELLO, &b, boot_now_ns() + r->o->boot_timeout_ns);
  }
  boot_buf_free(&b);
  free(has);
  free(info);
  if (rc)
    errf(r->err, r->errlen, "rank %u: cannot send HELLO to the coordinator", r->id);
  return rc;
}

static int connect_peers(struct rank *r, struct boot_buf *b)
{
  uint32_t n = r->cfg->engine.nranks;
  struct vnic_addr *addr = calloc(n, sizeof(*addr));
  bool *has = calloc(n, sizeof(*has));
  struct pp_conn_info *info = calloc(n, sizeof(*info));
  int rc = -1;
  if (!addr || !has || !info) {
    errf(r->err, r->errlen, "rank %u: out of memory", r->id);
    goto out;
  }
  boot_get_table(b, n, addr, has, info);
  if (b->bad) {
    errf(r->err, r->errlen, "rank %u: truncated table from the coordinator", r->id);
    goto out;
  }
  for (uint32_t j = 0; j < n; j++)
    vnic_set_peer_addr(r->nic, j, &addr[j]);
  for (uint32_t j = 0; j < n; j++) {
    if (!has[j] || j == r->id)
      continue;
    enum pp_status s = pp_tr_connect(r->tr, r->e, boot_now_ns(), j, &info[j]);
    if (s == PP_NOTFOUND)
      continue; /* the peer talks to us, we do not talk to it (asymmetric plans) */
    if (s != PP_OK) {
      errf(r->err, r->errlen,
           "rank %u: connecting the QP(s) to rank %u on %s failed (modify_qp to RTR/RTS): %s",
           r->id, j, vnic_device_name(r->nic), pp_status_desc(s));
      goto out;
    }
    logline(r, "connected to rank %u (%u channel(s), remote qp %u)", j, info[j].nchannels,
            info[j].qp_num[0]);
  }
  rc = 0;
out:
  free(addr);
  free(has);
  free(info);
  return rc;
}

static int send_result(struct rank *r)
{
  struct pp_rank_result rr = {0};
  pp_engine_stats(r->e, &rr.stats);
  pp_p2p_stats(r->e, &rr.p2p);
  const struct pp_recv_record *recs = NULL;
  rr.nreceives = pp_p2p_receives(r->e, &recs, &rr.receives_dropped);
  rr.receives = (struct pp_recv_record *)recs; /* only read by boot_put_result */
  vnic_ops.query_counters(r->nic, &rr.nic);
  snprintf(rr.host, sizeof(rr.host), "%.31s/%.31s", r->host, vnic_device_name(r->nic));
  struct boot_buf b = {0};
  boot_put_result(&b, &rr, pp_engine_latency_hist(r->e));
  struct pp_wait w[PP_HANG_MAX_WAITS];
  size_t nw = pp_engine_pending(r->e, w, PP_HANG_MAX_WAITS);
  /* the engine's times are CLOCK_MONOTONIC; the hang report's are from GO (PP_HANG_CLOCK_RUN) */
  for (size_t i = 0; i < nw && i < PP_HANG_MAX_WAITS; i++)
    w[i].since_ns = w[i].since_ns > r->t0 ? w[i].since_ns - r->t0 : 0;
  boot_put_waits(&b, w, nw < PP_HANG_MAX_WAITS ? (uint32_t)nw : PP_HANG_MAX_WAITS, (uint32_t)nw);
  /* and its QPs as the device reports them: the coordinator pairs them to tell a device that
   * completed requests its peer never took from a deadlock of the protocol */
  struct vnic_qp_state q[BOOT_MAX_QPS];
  size_t nq = vnic_qp_states(r->nic, q, BOOT_MAX_QPS);
  boot_put_qps(&b, q, nq < BOOT_MAX_QPS ? (uint32_t)nq : BOOT_MAX_QPS, (uint32_t)nq);
  int rc = b.bad ? -1 : boot_send(&r->l, BOOT_RESULT, &b, boot_now_ns() + 30000000000ull);
  boot_buf_free(&b);
  if (rc)
    errf(r->err, r->errlen, "rank %u: cannot send the results to the coordinator", r->id);
  return rc;
}

/* Tells the coordinator why this rank cannot run (so that it aborts at once instead of waiting
 * for the bootstrap timeout). Best effort, bounded. */
static void report_failure(struct rank *r)
{
  char e2[512];
  struct boot_link fresh, *l = &r->l; /* its own link: the sequence numbers go on */
  if (l->fd < 0) { /* it failed before joining: join to say so */
    if (!r->chost[0] || boot_join(r->chost, r->cport, r->id, &r->cfg->engine, r->secret,
                  boot_now_ns() + 2000000000ull, &fresh, e2, sizeof(e2)))
      return;
    l = &fresh;
  }
  boot_send_text(l, BOOT_ERROR, r->err, boot_now_ns() + 1000000000ull);
  if (l == &fresh)
    close(fresh.fd);
}

/* The TCP bootstrap: join the coordinator, HELLO, TABLE, connect the QPs, READY. -1 with
 * r->err set. */
static int tcp_bootstrap(struct rank *r, struct boot_buf *b)
{
  char e2[700];
  uint64_t bt = r->o->boot_timeout_ns;
  if (boot_join(r->chost, r->cport, r->id, &r->cfg->engine, r->secret, boot_now_ns() + bt, &r->l,
                e2, sizeof(e2))) {
    errf(r->err, r->errlen, "rank %u: bootstrap: %s", r->id, e2);
    return -1;
  }
  /* the coordinator waits up to bt for everyone's HELLO, then bt for everyone's READY */
  if (send_hello(r) ||
      expect(r, BOOT_TABLE, "the address table", b, boot_now_ns() + 2 * bt + 5000000000ull))
    return -1;
  if (connect_peers(r, b)) {
    report_failure(r);
    return -1;
  }
  if (boot_send(&r->l, BOOT_READY, NULL, boot_now_ns() + bt)) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator before READY", r->id);
    return -1;
  }
  return 0;
}

/* ---- started by a PMIx launcher (pmix.h)
 *
 * Every rank puts, under its own name, "prepost.addr" (a magic, the version of this exchange, the
 * scenario's hash, its port address, host and device) and, for every rank j it talks to,
 * "prepost.ci.j" (its pp_conn_info for j: only the edges of the plan, not a full table per
 * rank); rank 0 also "prepost.coord", the address of the coordinator it runs (a thread, as in a
 * rank table run), and "prepost.secret" when the job's secret was not given in the environment.
 * One collecting fence, then every rank reads what it needs, connects its QPs, and joins the
 * coordinator for the rest of the run (GO, progress, quiescence, results), which sends no TABLE. */

#define PMIX_MAGIC 0x584d5050u /* "PPMX" */
#define PMIX_XCHG_VERSION 1u
#define PMIX_ADDR_BYTES (16u + BOOT_ADDR_BYTES + BOOT_HOST_MAX + VNIC_NAME_MAX)

struct coord_thread {
  struct boot_coord_args a;
  struct pp_run_result *res;
  enum pp_status s;
  char err[1024];
  pthread_t th;
  bool started;
};

static void *coord_main(void *p)
{
  struct coord_thread *t = p;
  t->s = boot_coordinate(&t->a, t->res, t->err, sizeof(t->err));
  return NULL;
}

/* Starts the coordinator thread on lfd (which it then owns until coord_join). -1: err set. */
static int coord_start(struct coord_thread *t, int lfd, const char *where,
                       const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                       const uint8_t *secret, bool exchanged, char *err, size_t errlen)
{
  t->a = (struct boot_coord_args){.listen_fd = lfd,
                                  .cfg = &cfg->engine,
                                  .boot_timeout_ns = o->boot_timeout_ns,
                                  .run_timeout_ns = o->run_timeout_ns,
                                  .no_progress_ns = cfg->no_progress_ns,
                                  .secret = secret,
                                  .tables_exchanged = exchanged};
  snprintf(t->a.where, sizeof(t->a.where), "%s", where);
  if (pthread_create(&t->th, NULL, coord_main, t)) {
    errf(err, errlen, "cannot start the coordinator thread");
    return -1;
  }
  t->started = true;
  return 0;
}

/* After rank 0's own run (status s, its message e2): the whole run's status, its result in
 * t->res when PP_OK (then *reporter). */
static enum pp_status coord_join(struct coord_thread *t, enum pp_status s, const char *e2,
                                 bool *reporter, char *err, size_t errlen)
{
  pthread_join(t->th, NULL);
  close(t->a.listen_fd);
  if (t->s != PP_OK) {
    /* the coordinator's view names the failing rank; add rank 0's own failure if any */
    if (s != PP_OK && !strstr(t->err, "rank 0"))
      errf(err, errlen, "%s; %s", t->err, e2);
    else
      errf(err, errlen, "%s", t->err);
    return t->s;
  }
  if (s != PP_OK) {
    errf(err, errlen, "%s", e2);
    pp_run_result_free(t->res);
    return s;
  }
  *reporter = true;
  return PP_OK;
}

struct pmix_boot {
  struct vpmix *px;
  bool secret_known;       /* r->secret holds the job's secret already */
  bool publish_secret;     /* rank 0: put it as "prepost.secret" */
  struct coord_thread *ct; /* rank 0: the coordinator it starts */
};

/* Rank 0: where its coordinator listens and what the others are told: --coordinator, else the
 * IPv4 address of its RoCE v2 GID (the network the ranks share), else the host name PMIx gives
 * (the node's name, as the launcher reaches it). */
static void coord_host_of(struct rank *r, struct pmix_boot *pb, char *host, size_t len,
                          uint16_t *port)
{
  char e2[256];
  *port = 0;
  if (r->o->coordinator[0] &&
      boot_parse_hostport(r->o->coordinator, PP_VERBS_DEFAULT_PORT, host, len, port, e2,
                          sizeof(e2)) == 0)
    return;
  struct vnic_addr a;
  vnic_local_addr(r->nic, &a);
  static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (a.link_layer == 2 && !memcmp(a.gid, v4mapped, sizeof(v4mapped))) {
    snprintf(host, len, "%u.%u.%u.%u", a.gid[12], a.gid[13], a.gid[14], a.gid[15]);
    return;
  }
  if (vpmix_hostname(pb->px, r->id, host, len, e2, sizeof(e2)))
    snprintf(host, len, "%s", r->host);
}

/* Rank 0: listens, starts the coordinator, puts its address (and the secret). -1: err set. */
static int pmix_coordinator(struct rank *r, struct pmix_boot *pb)
{
  char host[256], where[300], e2[512];
  uint16_t port;
  if (r->o->coordinator[0] &&
      boot_parse_hostport(r->o->coordinator, PP_VERBS_DEFAULT_PORT, host, sizeof(host), &port,
                          e2, sizeof(e2))) {
    errf(r->err, r->errlen, "--coordinator: %s", e2);
    return -1;
  }
  coord_host_of(r, pb, host, sizeof(host), &port);
  int lfd = boot_listen(host, &port, e2, sizeof(e2));
  if (lfd < 0) {
    errf(r->err, r->errlen, "rank 0: the coordinator: %s", e2);
    return -1;
  }
  snprintf(where, sizeof(where), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
  /* the options' secret (rank 0's is always there: pmix_run), not this rank's copy: the thread
   * outlives rank_main */
  if (coord_start(pb->ct, lfd, where, r->cfg, r->o, r->o->secret, true, r->err, r->errlen)) {
    close(lfd);
    return -1;
  }
  snprintf(r->chost, sizeof(r->chost), "%s", host);
  r->cport = port;
  logline(r, "coordinator at %s", where);
  if (vpmix_put(pb->px, "prepost.coord", where, strlen(where), e2, sizeof(e2)) ||
      (pb->publish_secret &&
       vpmix_put(pb->px, "prepost.secret", r->secret, BOOT_SECRET_BYTES, e2, sizeof(e2)))) {
    errf(r->err, r->errlen, "rank 0: %s", e2);
    return -1;
  }
  return 0;
}

/* Puts this rank's address and its pp_conn_info for every peer it talks to. -1: err set. */
static int pmix_put_mine(struct rank *r, struct pmix_boot *pb)
{
  char e2[512], key[32];
  struct vnic_addr a;
  vnic_local_addr(r->nic, &a);
  struct boot_buf b = {0};
  char h[BOOT_HOST_MAX] = {0}, d[VNIC_NAME_MAX] = {0};
  snprintf(h, sizeof(h), "%s", r->host);
  snprintf(d, sizeof(d), "%s", vnic_device_name(r->nic));
  boot_put32(&b, PMIX_MAGIC);
  boot_put32(&b, PMIX_XCHG_VERSION);
  boot_put64(&b, boot_cfg_hash(&r->cfg->engine));
  boot_put_addr(&b, &a);
  boot_put_bytes(&b, h, sizeof(h));
  boot_put_bytes(&b, d, sizeof(d));
  int rc = b.bad ? -1 : vpmix_put(pb->px, "prepost.addr", b.p, b.len, e2, sizeof(e2));
  for (uint32_t j = 0; rc == 0 && j < r->cfg->engine.nranks; j++) {
    struct pp_conn_info ci;
    if (j == r->id || !pp_tr_local_info(r->tr, r->e, j, &ci))
      continue;
    b.len = 0;
    boot_put_conn_info(&b, &ci);
    snprintf(key, sizeof(key), "prepost.ci.%u", j);
    rc = b.bad ? -1 : vpmix_put(pb->px, key, b.p, b.len, e2, sizeof(e2));
  }
  boot_buf_free(&b);
  if (rc)
    errf(r->err, r->errlen, "rank %u: %s", r->id, b.bad ? "out of memory" : e2);
  return rc;
}

/* After the fence: every rank's address and what it put for this rank, as a TABLE
 * (boot_get_table's layout) for connect_peers. -1: err set. */
static int pmix_table(struct rank *r, struct pmix_boot *pb, struct boot_buf *table)
{
  char e2[512], key[32];
  uint32_t n = r->cfg->engine.nranks;
  uint64_t hash = boot_cfg_hash(&r->cfg->engine);
  struct boot_buf g = {0}, ci = {0};
  table->len = table->at = 0;
  int rc = 0;
  for (uint32_t j = 0; rc == 0 && j < n; j++) {
    int k = vpmix_get(pb->px, j, "prepost.addr", &g, PMIX_ADDR_BYTES, e2, sizeof(e2));
    if (k <= 0) {
      errf(r->err, r->errlen, "rank %u: %s", r->id,
           k ? e2 : "a rank put no address (is every process of the job a prepost rank?)");
      rc = -1;
      break;
    }
    uint32_t magic = boot_get32(&g), version = boot_get32(&g);
    uint64_t h = boot_get64(&g);
    struct vnic_addr a;
    boot_get_addr(&g, &a);
    if (g.bad || magic != PMIX_MAGIC || version != PMIX_XCHG_VERSION) {
      errf(r->err, r->errlen, "rank %u: rank %u's PMIx address is not a prepost exchange of "
                              "version %u", r->id, j, PMIX_XCHG_VERSION);
      rc = -1;
    } else if (h != hash) {
      errf(r->err, r->errlen, "rank %u: rank %u runs another scenario (ranks, protocol, "
                              "workload, QP attributes or seed differ)", r->id, j);
      rc = -1;
    }
    boot_put_addr(table, &a);
  }
  for (uint32_t j = 0; rc == 0 && j < n; j++) {
    struct pp_conn_info info = {0};
    int k = 0;
    if (j != r->id) {
      snprintf(key, sizeof(key), "prepost.ci.%u", r->id);
      k = vpmix_get(pb->px, j, key, &ci, BOOT_CONN_INFO_BYTES, e2, sizeof(e2));
      if (k > 0)
        boot_get_conn_info(&ci, &info);
      if (k < 0 || ci.bad) {
        errf(r->err, r->errlen, "rank %u: %s", r->id, k < 0 ? e2 : "a truncated pp_conn_info");
        rc = -1;
      }
    }
    boot_put8(table, k > 0);
    boot_put_conn_info(table, &info);
  }
  boot_buf_free(&g);
  boot_buf_free(&ci);
  if (rc == 0 && table->bad) {
    errf(r->err, r->errlen, "out of memory");
    rc = -1;
  }
  return rc;
}

/* Rank 0's coordinator address and (when the environment gave none) the secret. -1: err set. */
static int pmix_coord_of(struct rank *r, struct pmix_boot *pb)
{
  char e2[512];
  struct boot_buf g = {0};
  int rc = -1;
  if (r->id != 0) {
    int k = vpmix_get(pb->px, 0, "prepost.coord", &g, 299, e2, sizeof(e2));
    char where[300] = {0};
    if (k > 0)
      memcpy(where, g.p, g.len);
    if (k <= 0) {
      errf(r->err, r->errlen, "rank %u: %s", r->id, k ? e2 : "rank 0 put no coordinator address");
      goto out;
    }
    if (boot_parse_hostport(where, PP_VERBS_DEFAULT_PORT, r->chost, sizeof(r->chost), &r->cport,
                            e2, sizeof(e2))) {
      errf(r->err, r->errlen, "rank %u: rank 0's coordinator address: %s", r->id, e2);
      goto out;
    }
  }
  if (!pb->secret_known) {
    int k = vpmix_get(pb->px, 0, "prepost.secret", &g, BOOT_SECRET_BYTES, e2, sizeof(e2));
    if (k <= 0 || g.len != BOOT_SECRET_BYTES) {
      errf(r->err, r->errlen, "rank %u: %s", r->id,
           k < 0 ? e2
                 : "rank 0 published no job secret: it has one from its environment "
                   "(PREPOST_JOB_SECRET_FILE or PREPOST_JOB_SECRET) and this rank has none: "
                   "give every rank the same (mpirun -x PREPOST_JOB_SECRET_FILE)");
      goto out;
    }
    memcpy(r->secret, g.p, BOOT_SECRET_BYTES);
    pb->secret_known = true;
  }
  rc = 0;
out:
  boot_buf_free(&g);
  return rc;
}

/* The PMIx bootstrap: exchange, connect the QPs, join the coordinator, HELLO (for its host
 * and device names), READY. -1 with r->err set. */
static int pmix_bootstrap(struct rank *r, struct pmix_boot *pb, struct boot_buf *b)
{
  char e2[700];
  uint64_t bt = r->o->boot_timeout_ns;
  if ((r->id == 0 && pmix_coordinator(r, pb)) || pmix_put_mine(r, pb))
    return -1;
  if (vpmix_fence(pb->px, 2 * bt, e2, sizeof(e2))) {
    errf(r->err, r->errlen, "rank %u: %s", r->id, e2);
    return -1;
  }
  if (pmix_coord_of(r, pb) || pmix_table(r, pb, b))
    return -1;
  /* failures from here on are told to the coordinator (report_failure) */
  if (connect_peers(r, b)) {
    report_failure(r);
    return -1;
  }
  if (boot_join(r->chost, r->cport, r->id, &r->cfg->engine, r->secret, boot_now_ns() + bt, &r->l,
                e2, sizeof(e2))) {
    errf(r->err, r->errlen, "rank %u: bootstrap: %s", r->id, e2);
    return -1;
  }
  if (send_hello(r))
    return -1;
  if (boot_send(&r->l, BOOT_READY, NULL, boot_now_ns() + bt)) {
    errf(r->err, r->errlen, "rank %u: lost the coordinator before READY", r->id);
    return -1;
  }
  return 0;
}

/* A rank stopped before it was done (no_progress, timeout): what its device says about its
 * queues, on stderr (vnic_describe: completions polled, PSNs per QP), so that the two sides of
 * a stall can be put next to each other. */
static void say_queues(struct rank *r)
{
  char buf[4096];
  size_t k = vnic_describe(r->nic, buf, sizeof(buf));
  fprintf(stderr, "prepost: rank %u stopped before it was done; %s%s", r->id, buf,
          k >= sizeof(buf) ? " ...\n" : "");
}

/* Runs rank `id` to the end; fills *outcome from the coordinator's BYE. pb: started by a PMIx
 * launcher (chost, cport then unused), else NULL. */
static enum pp_status rank_main(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                                uint32_t id, const char *chost, uint16_t cport,
                                const char *device, struct pmix_boot *pb,
                                enum pp_outcome *outcome, char *err, size_t errlen)
{
  struct rank r = {.cfg = cfg, .o = o, .id = id, .l = {.fd = -1}, .err = err, .errlen = errlen};
  struct boot_buf b = {0};
  enum pp_status s = PP_IO;
  if (!pb) {
    snprintf(r.chost, sizeof(r.chost), "%s", chost);
    r.cport = cport;
  }
  memcpy(r.secret, o->secret, sizeof(r.secret));
  gethostname(r.host, sizeof(r.host) - 1);
  r.t0 = boot_now_ns();
  struct vnic_config nc = o->nic;
  if (device && device[0])
    snprintf(nc.device, sizeof(nc.device), "%s", device);
  char e2[700];
  s = vnic_open(&nc, cfg->engine.nranks, &r.nic, e2, sizeof(e2));
  if (s != PP_OK) {
    errf(err, errlen, "rank %u: %s", id, e2);
    report_failure(&r);
    return s;
  }
  struct pp_engine_cfg ecfg = cfg->engine;
  ecfg.rank = id;
  if (o->trace.path && trace_open(&r, &ecfg)) {
    report_failure(&r);
    s = PP_IO;
    goto out;
  }
  if (o->app) { /* the application's callbacks for this rank (prepost/verbsapp.h) */
    struct pp_app_callbacks cb;
    void *ud = NULL;
    pp_app_callbacks_default(&cb);
    s = o->app->rank(o->app->ctx, id, &cb, &ud);
    if (s == PP_OK)
      s = pp_engine_create_app(&ecfg, &vnic_ops, r.nic, &cb, ud, &r.e);
  } else {
    s = pp_tr_engine_create(r.tr, boot_now_ns(), &ecfg, &vnic_ops, r.nic, &r.e);
  }
  if (s != PP_OK) {
    errf(err, errlen, "rank %u: creating the engine on %s failed: %s%s", id,
         vnic_device_name(r.nic), pp_status_desc(s),
         s == PP_NOMEM || s == PP_PROTECTION
             ? " (memory registration: check `ulimit -l`, see `prepost doctor`)"
             : "");
    report_failure(&r);
    goto out;
  }
  s = PP_IO;
  uint64_t bt = o->boot_timeout_ns;
  if (pb ? pmix_bootstrap(&r, pb, &b) : tcp_bootstrap(&r, &b))
    goto out;
  if (expect(&r, BOOT_GO, "GO", &b, boot_now_ns() + bt + 5000000000ull))
    goto out;
  vnic_counters_mark(r.nic);
  r.t0 = boot_now_ns();
  logline(&r, "start on %s port %d gid index %d", vnic_device_name(r.nic), vnic_port(r.nic),
          vnic_gid_index(r.nic));
  s = pp_tr_start(r.tr, r.e, r.t0);
  if (s != PP_OK) {
    errf(err, errlen, "rank %u: starting the workload: %s", id, pp_status_desc(s));
    report_failure(&r);
    goto out;
  }
  s = PP_IO;
  if (progress(&r)) {
    report_failure(&r);
    goto out;
  }
  if (!pp_engine_done(r.e))
    say_queues(&r);
  if (send_result(&r))
    goto out;
  if (expect(&r, BOOT_BYE, "the outcome", &b, boot_now_ns() + 60000000000ull))
    goto out;
  *outcome = (enum pp_outcome)boot_get8(&b);
  s = PP_OK;
out:
  boot_buf_free(&b);
  if (r.l.fd >= 0)
    close(r.l.fd);
  uint64_t end = boot_now_ns();
  pp_tr_rank_end(r.tr, r.e, end); /* both as pp_engine_* without a recorder */
  pp_tr_engine_destroy(r.tr, r.e, end);
  if (trace_close(&r) && s == PP_OK) {
    errf(err, errlen, "rank %u: writing its trace failed", id);
    s = PP_IO;
  }
  vnic_close(r.nic);
  return s;
}

/* ---------------------------------------------------------------- launcher */

struct children {
  pid_t *pid;
  uint32_t n;
  bool *reaped;
};

static int check_children(void *ctx, char *err, size_t errlen)
{
  struct children *ch = ctx;
  for (uint32_t i = 0; i < ch->n; i++) {
    if (ch->reaped[i])
      continue;
    int st;
    pid_t p = waitpid(ch->pid[i], &st, WNOHANG);
    if (p != ch->pid[i])
      continue;
    ch->reaped[i] = true;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      continue;
    if (WIFEXITED(st))
      errf(err, errlen, "the process of rank %u exited with status %d (its message is above)", i,
           WEXITSTATUS(st));
    else
      errf(err, errlen, "the process of rank %u was killed by signal %d", i,
           WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return -1;
  }
  return 0;
}

static void reap(struct children *ch, uint64_t grace_ns)
{
  uint64_t dl = boot_now_ns() + grace_ns;
  for (;;) {
    bool left = false;
    for (uint32_t i = 0; i < ch->n; i++) {
      if (ch->reaped[i])
        continue;
      int st;
      if (waitpid(ch->pid[i], &st, WNOHANG) == ch->pid[i])
        ch->reaped[i] = true;
      else
        left = true;
    }
    if (!left)
      return;
    if (boot_now_ns() >= dl)
      break;
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
  }
  for (uint32_t i = 0; i < ch->n; i++)
    if (!ch->reaped[i]) {
      kill(ch->pid[i], SIGKILL);
      waitpid(ch->pid[i], NULL, 0);
      ch->reaped[i] = true;
    }
}

static enum pp_status launch(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                             struct pp_run_result *res, char *err, size_t errlen)
{
  uint32_t n = cfg->engine.nranks;
  /* one clear message for the whole run when the device is missing or down */
  struct vnic *probe;
  enum pp_status s = vnic_open(&o->nic, n, &probe, err, errlen);
  if (s != PP_OK)
    return s;
  vnic_close(probe);
  /* the job secret: the forked ranks inherit it in memory (no command line, no environment) */
  struct pp_verbs_opts oo = *o;
  if (!oo.has_secret && boot_secret_generate(oo.secret, err, errlen))
    return PP_IO;
  oo.has_secret = true;
  o = &oo;
  uint16_t port = o->coord_port;
  int lfd = boot_listen(o->coord_host, &port, err, errlen);
  if (lfd < 0)
    return PP_IO;
  struct children ch = {.pid = calloc(n, sizeof(pid_t)), .reaped = calloc(n, sizeof(bool))};
  if (!ch.pid || !ch.reaped) {
    free(ch.pid);
    free(ch.reaped);
    close(lfd);
    errf(err, errlen, "out of memory");
    return PP_NOMEM;
  }
  fflush(NULL);
  pid_t parent = getpid();
  for (uint32_t i = 0; i < n; i++) {
    pid_t p = fork();
    if (p < 0) {
      errf(err, errlen, "fork for rank %u: %s", i, strerror(errno));
      ch.n = i;
      reap(&ch, 0);
      free(ch.pid);
      free(ch.reaped);
      close(lfd);
      return PP_IO;
    }
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(EXIT_RANK_FAILED);
      close(lfd);
      char e2[1024];
      enum pp_outcome oc = PP_OUTCOME_COMPLETED;
      enum pp_status rs =
          rank_main(cfg, o, i, o->coord_host, port, NULL, NULL, &oc, e2, sizeof(e2));
      if (rs != PP_OK) {
        fprintf(stderr, "prepost: %s\n", e2);
        fflush(stderr);
      }
      _exit(rs == PP_OK ? 0 : EXIT_RANK_FAILED);
    }
    ch.pid[i] = p;
  }
  ch.n = n;
  struct boot_coord_args a = {
      .listen_fd = lfd,
      .cfg = &cfg->engine,
      .boot_timeout_ns = o->boot_timeout_ns,
      .run_timeout_ns = o->run_timeout_ns,
      .no_progress_ns = cfg->no_progress_ns,
      .check = check_children,
      .check_ctx = &ch,
      .secret = o->secret,
  };
  snprintf(a.where, sizeof(a.where), "%.255s:%u", o->coord_host, port);
  s = boot_coordinate(&a, res, err, errlen);
  close(lfd);
  reap(&ch, s == PP_OK ? 10000000000ull : 3000000000ull);
  free(ch.pid);
  free(ch.reaped);
  return s;
}

/* ---------------------------------------------------------------- rank table mode */

static enum pp_status one_rank(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *o,
                               struct pp_run_result *res, bool *reporter, char *err,
                               size_t errlen)
{
  uint32_t n = cfg->engine.nranks, id = (uint32_t)o->rank;
  if (o->ntable != n) {
    errf(err, errlen, "the rank table has %u entries, the scenario has %u ranks", o->ntable, n);
    return PP_INVALID;
  }
  if (id >= n) {
    errf(err, errlen, "--rank %u: the scenario has ranks 0..%u", id, n - 1);
    return PP_INVALID;
  }
  if (!o->has_secret) {
    errf(err, errlen, "a rank table run needs the job's secret on every host: set "
                      "PREPOST_JOB_SECRET_FILE to a 0600 file of 32 random bytes (the same file "
                      "on every host; backends/verbs/README.md, \"Security\")");
    return PP_INVALID;
  }
  const struct pp_verbs_rank_entry *c = &o->table[0];
  enum pp_outcome oc = PP_OUTCOME_COMPLETED;
  if (id != 0) {
    enum pp_status s = rank_main(cfg, o, id, c->host, c->port, o->table[id].device, NULL, &oc,
                                 err, errlen);
    res->outcome = oc;
    return s;
  }
  uint16_t port = c->port;
  int lfd = boot_listen(c->host, &port, err, errlen);
  if (lfd < 0)
    return PP_IO;
  struct coord_thread t = {.res = res};
  char where[300];
  snprintf(where, sizeof(where), "%s:%u", c->host, port);
  if (coord_start(&t, lfd, where, cfg, o, o->secret, false, err, errlen)) {
    close(lfd);
    return PP_IO;
  }
  char e2[1024];
  enum pp_status s = rank_main(cfg, o, 0, c->host, port, c->device, NULL, &oc, e2, sizeof(e2));
  return coord_join(&t, s, e2, reporter, err, errlen);
}

/* ---------------------------------------------------------------- launched by a launcher */

const char *pp_verbs_launch_name(enum pp_verbs_launch m)
{
  static const char *const names[] = {
#define PP_X(id, name, desc) [PP_VERBS_LAUNCH_##id] = name,
      PP_VERBS_LAUNCH_LIST(PP_X)
#undef PP_X
  };
  return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : "?";
}

int pp_verbs_launch_from_name(const char *s)
{
  for (int m = 0; m < PP_VERBS_LAUNCH_COUNT; m++)
    if (!strcmp(s, pp_verbs_launch_name((enum pp_verbs_launch)m)))
      return m;
  return -1;
}

/* env and pmix modes: the secret from the environment when it has one. 1 found, 0 none, -1 err. */
static int secret_of_env(struct pp_verbs_opts *o, char *err, size_t errlen)
{
  if (o->has_secret)
    return 1;
  int k = boot_secret_from_env(o->secret, err, errlen);
  o->has_secret = k > 0;
  return k;
}

/* Rank and size from Open MPI's or Slurm's environment, the TCP bootstrap at --coordinator (or
 * Slurm's first host): a rank table whose entries all name the coordinator. */
static enum pp_status env_run(const struct pp_run_cfg *cfg, struct pp_verbs_opts *o,
                              struct pp_run_result *res, bool *reporter, char *err,
                              size_t errlen)
{
  extern char **environ;
  struct pp_launch_env le;
  char e2[512];
  int k = pp_launch_env_parse(environ, &le, e2, sizeof(e2));
  if (k <= 0) {
    errf(err, errlen, "%s", k ? e2 : "--launch env: no launcher variables tell this process its "
                                     "rank (OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS); "
                                     "without a launcher use --rank R --ranks TABLE");
    return PP_INVALID;
  }
  uint32_t n = cfg->engine.nranks;
  if (le.size != n) {
    errf(err, errlen, "the launcher started %u processes (%s), the scenario has %u ranks", le.size,
         pp_launch_env_kind_desc(le.kind), n);
    return PP_INVALID;
  }
  char spec[320];
  if (o->coordinator[0])
    snprintf(spec, sizeof(spec), "%s", o->coordinator);
  else if (le.first_host[0])
    snprintf(spec, sizeof(spec), "%s", le.first_host); /* where srun places task 0 */
  else {
    errf(err, errlen, "--launch env: the TCP bootstrap needs the coordinator's address: "
                      "--coordinator HOST:PORT (rank %u of %s listens there)", 0u,
         pp_launch_env_kind_desc(le.kind));
    return PP_INVALID;
  }
  if (secret_of_env(o, err, errlen) < 0)
    return PP_INVALID;
  struct pp_verbs_rank_entry *t = calloc(n, sizeof(*t));
  if (!t) {
    errf(err, errlen, "out of memory");
    return PP_NOMEM;
  }
  if (boot_parse_hostport(spec, PP_VERBS_DEFAULT_PORT, t[0].host, sizeof(t[0].host), &t[0].port,
                          e2, sizeof(e2))) {
    errf(err, errlen, "--coordinator: %s", e2);
    free(t);
    return PP_INVALID;
  }
  for (uint32_t i = 1; i < n; i++)
    t[i] = t[0];
  t[0].device[0] = '\0';
  o->table = t;
  o->ntable = n;
  o->rank = (int)le.rank;
  enum pp_status s = one_rank(cfg, o, res, reporter, err, errlen);
  free(t);
  return s;
}

/* Started by a PMIx launcher: rank, size, the exchange and (when the environment has none) the
 * job's secret through PMIx; rank 0 runs the coordinator. */
static enum pp_status pmix_run(const struct pp_run_cfg *cfg, struct pp_verbs_opts *o,
                               struct pp_run_result *res, bool *reporter, char *err,
                               size_t errlen)
{
  struct coord_thread t = {.res = res};
  struct pmix_boot pb = {.ct = &t};
  uint32_t id, size, n = cfg->engine.nranks;
  if (vpmix_init(&pb.px, &id, &size, err, errlen))
    return PP_IO;
  enum pp_status s = PP_INVALID;
  int k = secret_of_env(o, err, errlen);
  if (k < 0)
    goto out;
  if (size != n) {
    errf(err, errlen, "the PMIx launcher started %u processes, the scenario has %u ranks "
                      "(mpirun -n %u)", size, n, n);
    goto out;
  }
  pb.secret_known = k > 0;
  if (id == 0 && !pb.secret_known) {
    s = PP_IO;
    if (boot_secret_generate(o->secret, err, errlen))
      goto out;
    o->has_secret = pb.secret_known = pb.publish_secret = true;
  }
  enum pp_outcome oc = PP_OUTCOME_COMPLETED;
  char e2[1024];
  s = rank_main(cfg, o, id, NULL, 0, NULL, &pb, &oc, e2, sizeof(e2));
  if (id == 0 && t.started) {
    s = coord_join(&t, s, e2, reporter, err, errlen);
  } else {
    if (s != PP_OK)
      errf(err, errlen, "%s", e2);
    res->outcome = oc;
  }
out:
  vpmix_finalize(pb.px);
  return s;
}

enum pp_status pp_verbs_run(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *opts,
                            struct pp_run_result *res, bool *reporter, char *err, size_t errlen)
{
  memset(res, 0, sizeof(*res));
  *reporter = false;
  enum pp_status s = pp_engine_cfg_check(&cfg->engine, err, errlen);
  if (s != PP_OK)
    return s;
  struct pp_verbs_opts o = *opts;
  if (!o.boot_timeout_ns)
    o.boot_timeout_ns = 20000000000ull;
  if (!o.run_timeout_ns)
    o.run_timeout_ns = 120000000000ull;
  signal(SIGPIPE, SIG_IGN);
  enum pp_verbs_launch m = o.launch;
  if (m == PP_VERBS_LAUNCH_AUTO)
    m = o.rank >= 0          ? PP_VERBS_LAUNCH_TABLE
        : vpmix_launched()   ? PP_VERBS_LAUNCH_PMIX
        : o.coordinator[0]   ? PP_VERBS_LAUNCH_ENV
                             : PP_VERBS_LAUNCH_FORK;
  if ((m == PP_VERBS_LAUNCH_TABLE) != (o.rank >= 0)) {
    errf(err, errlen, m == PP_VERBS_LAUNCH_TABLE ? "--launch table needs --rank R --ranks TABLE"
                                                 : "--rank and --ranks go with --launch table "
                                                   "(or auto), not --launch %s",
         pp_verbs_launch_name(m));
    return PP_INVALID;
  }
  if (m == PP_VERBS_LAUNCH_PMIX)
    return pmix_run(cfg, &o, res, reporter, err, errlen);
  if (m == PP_VERBS_LAUNCH_ENV)
    return env_run(cfg, &o, res, reporter, err, errlen);
  if (m == PP_VERBS_LAUNCH_FORK) {
    if (o.trace.path && !o.trace.origin_ns)
      o.trace.origin_ns = boot_now_ns(); /* one time scale for every forked rank */
    s = launch(cfg, &o, res, err, errlen);
    *reporter = s == PP_OK;
    return s;
  }
  return one_rank(cfg, &o, res, reporter, err, errlen);
}

enum pp_status pp_verbs_run_app(const struct pp_run_cfg *cfg, const struct pp_verbs_opts *opts,
                                const struct pp_verbs_app *app, struct pp_run_result *res,
                                bool *reporter, char *err, size_t errlen)
{
  static struct pp_run_cfg c; /* 13 KB; forked ranks inherit it */
  memset(res, 0, sizeof(*res));
  *reporter = false;
  if (!app || !app->rank) {
    errf(err, errlen, "an application run needs a rank factory (struct pp_verbs_app.rank)");
    return PP_INVALID;
  }
  if (opts->trace.path) {
    errf(err, errlen, "an application run is not recorded: no trace with pp_verbs_run_app");
    return PP_UNSUPPORTED;
  }
  c = *cfg;
  c.engine.workload = (struct pp_workload){.kind = PP_WORKLOAD_APP};
  struct pp_verbs_opts o = *opts;
  o.app = app;
  return pp_verbs_run(&c, &o, res, reporter, err, errlen);
}
