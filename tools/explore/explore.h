/*
 * prepost explore: deterministic simulation testing of the protocols (issue 7).
 *
 * One seed drives every random choice of a run: pp_explore_generate() turns (seed, options) into
 * a scenario (ranks, protocol and its parameters, sizes, counts, posting order and delays,
 * platform and NIC, faults), the simulator runs it in a child process (SimGrid allows one
 * simulation per process) under a wall-clock bound, and pp_explore_check() judges the result
 * against the invariants below. A failing seed is a one-line reproduction; the shrinker then
 * searches for a smaller scenario failing the same invariant.
 *
 * Extension points (one table entry each):
 *  - a protocol: its explorer hooks (struct pp_proto_explore, prepost/proto.h) in its def, next
 *    to the protocol (the built-ins': engine/proto/NAME/explore.c): its generator, the section
 *    of its own scenario keys, its reductions and its own invariants; the explorer names none;
 *  - a fault: PP_FAULT_LIST below, its parameters in struct pp_faults (simnic.h), its draw in
 *    draw_faults() (explore_gen.c), its scenario keys in tools/scenario/scenario_explore.inc;
 *  - an invariant: PP_INV_LIST below and a test in pp_explore_check() (explore_check.c).
 */
#ifndef PP_EXPLORE_H
#define PP_EXPLORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prepost/prng.h"

/* scenario.h's opening comment trips -Wcomment in some includers */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "tools/scenario/scenario.h"
#pragma GCC diagnostic pop

/* The fault catalogue: X(id, name, description). Where each lives: NIC = simnic.c, driver =
 * simrun.c, workload = engine/workload/stream.c. */
#define PP_FAULT_LIST(X)                                                                          \
  X(LOSS, "loss", "NIC: packets (requests, responses, ACKs) dropped")                             \
  X(JITTER, "jitter", "NIC: each wire transfer leaves late by a random delay (order kept)")       \
  X(SLOW, "slow", "workload: slow consumers hold each buffer before re-posting it")               \
  X(PAUSE, "pause", "driver: processes freeze for a while (no polling, no timers)")               \
  X(POST, "post", "workload: receives posted late and re-posted in a random order")               \
  X(CQ, "cq", "driver: completions polled late")                                                  \
  X(SCRAMBLE, "scramble", "NIC: an RDMA WRITE's bytes placed out of order, the last chunk first") \
  X(SRQ, "srq", "NIC: SRQ depletion (p2p.srq), WQEs posted to an SRQ usable only later")          \
  X(QP_ERROR, "qp-error", "NIC: a QP forced to ERROR mid-run (fatal)")                            \
  X(RKEY, "rkey", "NIC: rkeys invalidated while peers hold them (fatal)")                        \
  X(BYZANTINE, "byzantine",                                                                       \
    "driver: one rank lies on the wire, fields of its messages changed, control messages "         \
    "dropped, duplicated or held back (opt-in)")

enum pp_fault {
#define PP_X(id, name, desc) PP_FAULT_##id,
  PP_FAULT_LIST(PP_X)
#undef PP_X
      PP_FAULT_COUNT
};
/* Opt-in faults: never in "all" nor in the default mix, only when named (--faults byzantine).
 * byzantine fails until every field a peer sends is validated (issue 12). */
#define PP_FAULTS_OPT_IN (1u << PP_FAULT_BYZANTINE)
#define PP_FAULTS_ALL (((1u << PP_FAULT_COUNT) - 1) & ~PP_FAULTS_OPT_IN)

const char *pp_fault_name(enum pp_fault f);
const char *pp_fault_desc(enum pp_fault f);
/* "loss,jitter", "all", "none": 0 and the mask, or -1 with a sentence in err. */
int pp_faults_parse(const char *list, uint32_t *mask, char *err, size_t errlen);
/* "loss,jitter" / "none" */
void pp_faults_format(uint32_t mask, char *buf, size_t len);
/* The faults a scenario injects (its struct pp_faults and workload), as a mask. */
uint32_t pp_faults_of(const struct pp_scenario *sc);

/* The invariants, in the order they are judged: X(id, name, description). */
#define PP_INV_LIST(X)                                                                            \
  X(OK, "ok", "every invariant held")                                                             \
  X(SETUP, "setup", "the scenario could not run (configuration or platform error)")               \
  X(CRASH, "crash", "the simulation process died")                                                \
  X(ENGINE, "engine", "an engine failed an event of the run (a bogus completion, a bound hit)")   \
  X(WALLCLOCK, "wallclock", "the run exceeded its wall-clock bound (a hang of the simulator)")    \
  X(INTEGRITY, "integrity", "a message arrived corrupt, twice or out of order")                   \
  X(REUSE, "reuse", "a slot or buffer was used before it was released")                           \
  X(PROTOCOL, "protocol", "the protocol saw one of its own invariants broken")                    \
  X(RNR, "rnr", "RNR NAKs under a flow-controlled protocol")                                      \
  X(ERRORS, "errors", "error completions that no injected fatal fault explains")                  \
  X(HANG, "hang", "operations still pending after the quiet phase (liveness)")                    \
  X(DELIVERY, "delivery", "a completed run did not deliver every message exactly once")

enum pp_inv {
#define PP_X(id, name, desc) PP_INV_##id,
  PP_INV_LIST(PP_X)
#undef PP_X
      PP_INV_COUNT
};
const char *pp_inv_name(enum pp_inv i);
const char *pp_inv_desc(enum pp_inv i);
int pp_inv_from_name(const char *name); /* -1 when unknown */

/* What the generator may draw; the CLI's options. */
struct pp_explore_space {
  int gen;            /* index into pp_explore_gens, -1: the default mix */
  uint32_t faults;    /* faults a seed may draw from */
  double fault_rate;  /* probability that each of them is on in a seed */
  uint32_t max_ranks; /* 2.. */
  uint32_t max_messages;
  uint32_t max_size;
  uint32_t bugs; /* test-only bugs (engine/core/bugs.h) switched on in every scenario */
};
/* The defaults: the default mix, every fault at rate 0.3, 8 ranks, 200 messages of 64 KiB. */
void pp_explore_space_default(struct pp_explore_space *s);

/* A protocol's entry: how to generate, write and check its scenarios, through its explorer hooks
 * (struct pp_proto_def.explore, prepost/proto.h). */
struct pp_explore_gen {
  const char *name;          /* as --protocol takes it */
  uint32_t protocol;         /* its registry id */
  bool flow_controlled;      /* must never see an RNR NAK */
  bool in_mix;               /* part of the default mix (a positive control is not) */
  uint32_t faults;           /* the faults that apply to it */
  uint32_t bugs;             /* the test-only bugs its scenarios can hit (its hooks' engine_bugs
                              * and its def's own): a space with bugs on draws from the mix
                              * entries that have one of them */
  /* Draws the protocol's own part of sc: the common part (ranks, pattern, sizes, QP, platform,
   * NIC) is drawn already and may be adjusted. */
  void (*gen)(struct pp_prng *r, const struct pp_explore_space *sp, struct pp_scenario *sc);
  /* Writes the protocol's own keys: section "top" (its whole top-level section). */
  void (*write)(FILE *out, const struct pp_scenario *sc, const char *section);
  /* Shrinking: reduction number k (0, 1, ...) of the protocol's own parameters applied to sc,
   * with a few words in *what; false when k does not apply (or changes nothing), and from the
   * first k past the last one on. */
  bool (*reduce)(struct pp_scenario *sc, unsigned k, const char **what);
  /* Protocol invariants beyond the generic ones; PP_INV_OK and nothing in why when they hold. */
  enum pp_inv (*check)(const struct pp_scenario *sc, const struct pp_run_result *res, char *why,
                       size_t len);
  const struct pp_proto_def *def; /* the protocol, whose hooks the entry calls */
};
/* One entry per registered protocol that brings explorer hooks (struct pp_proto_def.explore):
 * the built-ins' (engine/proto/NAME/explore.c) and the plug-ins', appended by
 * pp_explore_gens_sync(). */
extern struct pp_explore_gen pp_explore_gens[];
/* Appends the entries of protocols registered since (plug-ins); every lookup below calls it. */
void pp_explore_gens_sync(void);
size_t pp_explore_gen_count(void); /* the entries in pp_explore_gens[], after a sync */
int pp_explore_gen_by_name(const char *name); /* index, -1 when unknown */
const struct pp_explore_gen *pp_explore_gen_of(uint32_t protocol); /* NULL when none */

/* Seed -> scenario: a pure function of (seed, space). */
void pp_explore_generate(uint64_t seed, const struct pp_explore_space *sp, struct pp_scenario *sc);

/* Sets the quiet phase: faults stop at `until` (ns; later if a pause lasts longer; 0 when the
 * scenario has no fault) and max_sim_time becomes the liveness bound after it. */
void pp_explore_set_bounds(struct pp_scenario *sc, uint64_t until);

/* Writes sc as a scenario file that pp_scenario_load() reads back into the same configuration;
 * `comment` (may be NULL) becomes leading '#' lines. 0, or -1 on a write error. */
/* prepost explore --program PROG -n N ... (explore_prog.c): argv as pp_cli_explore's. */
int pp_explore_program(int argc, char **argv);
int pp_scenario_write(FILE *out, const struct pp_scenario *sc, const char *comment);
int pp_scenario_write_file(const char *path, const struct pp_scenario *sc, const char *comment);

/* Judges a finished run. */
enum pp_inv pp_explore_check(const struct pp_scenario *sc, const struct pp_run_result *res,
                             char *why, size_t len);

/* The verdict of one run, as the child process sends it back. */
struct pp_verdict {
  enum pp_inv inv;
  enum pp_outcome outcome;
  char why[256];
  uint64_t sim_ns;
  uint64_t messages; /* delivered, every rank */
  uint64_t rnr_naks;
  uint64_t errors;   /* error completions */
  uint64_t dropped;  /* packets lost (faults.loss) */
  uint64_t async;    /* async events the engines saw */
  struct pp_fault_counts fired; /* summed over the ranks */
  double wall_s;
};

/* Runs sc in a child process with a wall-clock bound (seconds; 0 = none): the child is killed
 * and the verdict is WALLCLOCK past it. `trace` and `log` (may be NULL) are files the child
 * writes: the trace (traces/FORMAT.md) and the NIC event log. */
void pp_explore_run(const struct pp_scenario *sc, double timeout_s, const char *trace,
                    const char *log, struct pp_verdict *v);

/* A pool of child runs for --jobs. */
struct pp_explore_pool;
struct pp_explore_pool *pp_explore_pool_create(unsigned jobs, double timeout_s);
void pp_explore_pool_destroy(struct pp_explore_pool *p);
/* Starts sc (copied) tagged `id`; false when every job is busy. */
bool pp_explore_pool_start(struct pp_explore_pool *p, uint64_t id, const struct pp_scenario *sc);
/* Waits for one run to end (up to wait_s seconds, < 0: as long as it takes); true and its id
 * and verdict, false when none ended in time or none is running. */
bool pp_explore_pool_wait(struct pp_explore_pool *p, double wait_s, uint64_t *id,
                          struct pp_verdict *v);
unsigned pp_explore_pool_running(const struct pp_explore_pool *p);

/* Shrinking: looks for a smaller scenario (fewer ranks, messages, faults; smaller sizes, queues,
 * delays) still failing with `inv`, trying at most max_runs candidates. `out` receives the
 * smallest found (sc itself when nothing smaller fails); returns the runs made. log (may be
 * NULL) gets one line per accepted step. */
unsigned pp_explore_shrink(const struct pp_scenario *sc, enum pp_inv inv, unsigned max_runs,
                           double timeout_s, struct pp_scenario *out, FILE *log);

/* A one-line summary of a scenario: "ring-cts, 4 ranks ring, 37 x 4096 B, faults loss,cq". */
void pp_explore_describe(const struct pp_scenario *sc, char *buf, size_t len);

/* `prepost explore ...` */
int pp_cli_explore(int argc, char **argv);
extern const char *const pp_explore_usage;

#endif
