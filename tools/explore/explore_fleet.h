/*
 * prepost explore on a fleet: shards, machine-readable summaries, JUnit XML, progress lines off a
 * terminal, and `prepost explore merge` (tools/explore/explore_fleet.c).
 *
 * A run with --json writes OUT/summary.json: the build (version, commit), the mix (every option
 * that changes what a seed generates or how it is judged), the seeds (range, shard, how many ran),
 * the deterministic totals (messages delivered, simulated time), failures per invariant, every
 * failure (seed, invariant, why, the command that reproduces it, its files) and the rates. The
 * merge reads the summaries of shards' OUT directories, refuses summaries of other builds or mixes,
 * checks that the shards of a fixed seed count are all there once, and writes one summary and one
 * failure set (files copied, one entry per seed, grouped by signature).
 */
#ifndef PP_EXPLORE_FLEET_H
#define PP_EXPLORE_FLEET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/explore/explore.h"

/* A shard K/N (1 <= K <= N) of the seeds from F on runs F+K-1, F+K-1+N, F+K-1+2N, ...: the N
 * shards of a range together run exactly its seeds, each once. 0 and k, n set, or -1. */
int pp_fleet_parse_shard(const char *s, uint32_t *k, uint32_t *n);
/* How many of `count` seeds shard k/n runs. */
uint64_t pp_fleet_shard_count(uint64_t count, uint32_t k, uint32_t n);

struct pp_fleet_failure {
  uint64_t seed;
  enum pp_inv inv;
  const char *why;
};

/* What one `prepost explore` run of seeds did, for the summary. */
struct pp_fleet_run {
  /* the mix: what a seed generates and how it is judged */
  const struct pp_explore_space *sp;
  double timeout_s;
  const char *options;  /* the reproduction flags (" --protocol ring --faults loss") */
  /* the seeds */
  uint64_t from, count; /* count 0: a time budget */
  double budget_s;
  uint32_t shard, shards;
  uint64_t done;
  bool complete;        /* false when --stop-after ended it early */
  /* deterministic totals of the seeds that ran */
  uint64_t messages, sim_ns;
  const struct pp_fleet_failure *failures;
  unsigned nfailures;
  double wall_s;
  const char *out; /* where the failure files are */
};

/* Writes OUT/summary.json (json) and the JUnit XML file (junit, NULL: none); 0, or -1 with a
 * message on stderr. */
int pp_fleet_report(const struct pp_fleet_run *r, bool json, const char *junit);

/* A progress line for a log (stderr off a terminal): seeds done of total, rate, ETA, failures.
 * total 0: a time budget of budget_s seconds. */
void pp_fleet_progress(FILE *out, uint64_t done, uint64_t total, double budget_s, double elapsed_s,
                       unsigned failures);

/* `prepost explore merge ...` */
int pp_cli_explore_merge(int argc, char **argv);
extern const char *const pp_explore_merge_usage;

#endif
