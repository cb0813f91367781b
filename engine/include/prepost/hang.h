/*
 * Hang analysis, free of I/O: what each pending operation of a rank waits for (struct pp_wait,
 * filled by the engine, its protocol and its workload), the wait-for graph between ranks, its
 * cycle, and a sentence naming the cause. Used by `prepost run` (both backends) and by
 * `prepost replay --hang`; the printing lives in tools/report/hang_report.c.
 *
 * Progress (what the no-progress bound of `prepost run` watches): pp_engine_progress_mark()
 * changes when a send or receive finished towards the workload (pp_app_send_done /
 * pp_app_recv_done, successful or not), or when the set of pending operations the engine reports
 * (kind, peer, tag and the text of each pp_wait: credits left, head, tail, ...) changed. Retries
 * at the NIC (RNR, transport retries), timers that fire without changing a request, and polling
 * are not progress.
 */
#ifndef PP_HANG_H
#define PP_HANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_engine;

/* X(id, name, description); the "note" kinds describe, they are not waits (no edge) */
#define PP_WAIT_KIND_LIST(X)                                                                  \
  X(QP_ERROR, "qp_error", "a QP in ERROR: nothing more moves on it")                          \
  X(CTS, "cts", "a rendezvous send waits for the receiver's CTS")                             \
  X(FIN, "fin", "a rendezvous transfer waits for the peer's data or FIN")                     \
  X(ACK, "ack", "a synchronous send waits for its ACK")                                       \
  X(CREDITS, "credits", "a send waits for credits from the receiver")                         \
  X(UNMATCHED, "unmatched", "a posted receive that no message matched")                       \
  X(RING_SLOT, "ring_slot", "a ring sender waits for a slot its consumer releases")           \
  X(RING_DATA, "ring_data", "a ring receive waits for data")                                  \
  X(SEND_WC, "send_wc", "posted sends wait for their completion (ACK, RNR retries)")          \
  X(MESSAGE, "message", "a receive waits for a message")                                      \
  X(WORKLOAD, "workload", "the workload waits for its own requests")                          \
  X(UNEXPECTED, "unexpected", "note: a message arrived that no receive matched")              \
  X(TIMER, "timer", "note: the rank's next timer (not part of the progress mark)")             \
  X(WILDCARD, "wildcard", "note: an ANY_SOURCE receive matched this sender")

enum pp_wait_kind {
#define PP_X(id, name, desc) PP_WAIT_##id,
  PP_WAIT_KIND_LIST(PP_X)
#undef PP_X
  PP_WAIT_KIND_COUNT
};
const char *pp_wait_kind_name(enum pp_wait_kind k);
/* A note (UNEXPECTED, TIMER, WILDCARD) tells what happened; it is no wait and makes no edge. */
bool pp_wait_is_note(enum pp_wait_kind k);

#define PP_WAIT_NOPEER UINT32_MAX /* the peer is unknown or any (ANY_SOURCE) */
#define PP_WAIT_NOTAG UINT32_MAX
#define PP_WAIT_TEXT 128

/* One pending operation: what it waits for, in words (what) and as fields. */
struct pp_wait {
  uint8_t kind;      /* enum pp_wait_kind */
  uint32_t peer;     /* the rank it waits for, or PP_WAIT_NOPEER */
  uint32_t tag;      /* or PP_WAIT_NOTAG */
  uint64_t since_ns; /* when the wait began, 0 when unknown */
  char what[PP_WAIT_TEXT];
};

/* Appends a wait to out[*n] when *n < max; always counts it in *n. snprintf-style text. */
void pp_wait_add(struct pp_wait *out, size_t max, size_t *n, enum pp_wait_kind kind,
                 uint32_t peer, uint32_t tag, uint64_t since_ns, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* What a rank's pending operations wait for: QPs in ERROR (the status that killed them), then
 * the protocol's and the workload's pending operations. Fills at most max, returns how many
 * there are. Nothing when the engine is done. */
size_t pp_engine_pending(const struct pp_engine *e, struct pp_wait *out, size_t max);
/* A value that changes with progress (see the top of this file). */
uint64_t pp_engine_progress_mark(const struct pp_engine *e);

/* ------------------------------------------------------------------ the analysis */

#define PP_HANG_MAX_WAITS 24  /* kept per rank (more are counted) */
#define PP_HANG_MAX_EDGES 4096
#define PP_HANG_WHY 256

/* X(id, name) */
#define PP_HANG_RANK_LIST(X)                                                                  \
  X(DONE, "done")                                                                             \
  X(STUCK, "stuck")                                                                           \
  X(SILENT, "silent")                                                                         \
  X(UNKNOWN, "unknown")

enum pp_hang_rank_state {
#define PP_X(id, name) PP_HANG_##id,
  PP_HANG_RANK_LIST(PP_X)
#undef PP_X
};
const char *pp_hang_rank_state_name(enum pp_hang_rank_state s);

struct pp_hang_rank {
  uint8_t state;          /* enum pp_hang_rank_state */
  uint64_t last_input_ns; /* SILENT: when it last got an input */
  uint32_t nwaits, total; /* kept, reported */
  struct pp_wait waits[PP_HANG_MAX_WAITS];
};

struct pp_hang_edge {
  uint32_t from, to;
  uint8_t kind; /* enum pp_wait_kind of the first reason */
  char why[PP_HANG_WHY];
};

/* X(id, name, description) */
#define PP_HANG_TRIGGER_LIST(X)                                                               \
  X(QUIESCENCE, "quiescence", "nothing left to happen, operations still pending")             \
  X(NO_PROGRESS, "no_progress", "no progress for the no-progress bound")                      \
  X(TIMEOUT, "timeout", "the time limit with operations pending")                             \
  X(REPLAY, "replay", "the end of a replayed trace")

enum pp_hang_trigger {
#define PP_X(id, name, desc) PP_HANG_TRIGGER_##id,
  PP_HANG_TRIGGER_LIST(PP_X)
#undef PP_X
};
const char *pp_hang_trigger_name(enum pp_hang_trigger t);

/* What at_ns, every wait's since_ns and last_input_ns count from: one base per report.
 * X(id, name, description) */
#define PP_HANG_CLOCK_LIST(X)                                                                 \
  X(SIM, "sim", "simulated ns from the run's start")                                          \
  X(RUN, "run", "wall-clock ns from the data phase's start (GO), on each rank's own clock; "  \
                "0 for a wait begun before it")                                               \
  X(TRACE, "trace", "ns from the trace's origin")

enum pp_hang_clock {
#define PP_X(id, name, desc) PP_HANG_CLOCK_##id,
  PP_HANG_CLOCK_LIST(PP_X)
#undef PP_X
};
const char *pp_hang_clock_name(enum pp_hang_clock c);
const char *pp_hang_clock_desc(enum pp_hang_clock c);

struct pp_hang {
  uint32_t nranks, stuck;
  uint8_t trigger;         /* enum pp_hang_trigger */
  uint8_t clock;           /* enum pp_hang_clock: the base of every time below (SIM by default) */
  uint64_t at_ns;          /* when it was detected */
  uint64_t no_progress_ns; /* the bound, for NO_PROGRESS */
  struct pp_hang_rank *rank;
  struct pp_hang_edge *edge;
  uint32_t nedges;
  uint32_t *cycle;
  uint32_t ncycle;
  /* No cycle: the rank the wait-for chain from the first stuck rank ends at (it waits for no
   * one), or PP_WAIT_NOPEER; chain_timer: it has a timer pending (busy until then, not stuck). */
  uint32_t chain_end;
  bool chain_timer;
  char cause[512];
};

/* Allocates nranks ranks (all UNKNOWN). */
enum pp_status pp_hang_init(struct pp_hang *h, uint32_t nranks);
void pp_hang_free(struct pp_hang *h);
/* Sets a rank's state and copies its waits (the first PP_HANG_MAX_WAITS of total). */
void pp_hang_set_rank(struct pp_hang *h, uint32_t rank, enum pp_hang_rank_state st,
                      uint64_t last_input_ns, const struct pp_wait *w, size_t total);
/* Fills a rank from its engine (DONE or STUCK with its pending waits). */
void pp_hang_set_engine(struct pp_hang *h, uint32_t rank, const struct pp_engine *e);
/* An edge from -> to (the first reason for a pair stays); PP_LIMIT past PP_HANG_MAX_EDGES. */
enum pp_status pp_hang_add_edge(struct pp_hang *h, uint32_t from, uint32_t to,
                                enum pp_wait_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Counts stuck ranks, adds the edges of every rank's waits (a silent rank's waiters wait for
 * it), finds a cycle and names the cause. Call once, after every rank is set. */
void pp_hang_analyze(struct pp_hang *h);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
