/*
 * The wire fuzzer's corpus, replayed deterministically (gcc builds have no libFuzzer): every
 * input of tests/fuzz/wire-corpus goes through the same target as the libFuzzer harness
 * (tests/fuzz/fuzz_wire.c: an honest engine against a byzantine peer the input drives). Under
 * ASan (the asan preset) any out-of-bounds access, use after free or UBSan report fails here.
 *
 * The seeds (tests/fuzz/wire-corpus/<protocol>-<size>) are honest runs as recorded: every
 * message is delivered and the decisions are exactly as long as the run asks for. The corpus
 * also keeps the two inputs that crashed the engine before it validated every field a peer
 * sends (issue 12; tests/fuzz/wire-corpus/README.md). Then seeded mutations of the decisions of
 * every seed, p2p and ring, go through the target.
 * PREPOST_WIRE_CRASHES=DIR runs a folder of crashing inputs here (wire_fuzz/crashes).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/simgrid/byzantine.h"
#include "prepost/prng.h"
#include "prepost/p2p.h"
#include "fuzz/fuzz_wire.h"
#include "scratch.h"

#define CORPUS PREPOST_SOURCE_DIR "/tests/fuzz/wire-corpus"

static uint8_t *slurp(const char *path, size_t *n)
{
  return (uint8_t *)scratch_slurp(path, n);
}

static void run_file(const char *dir, const char *name, struct pp_fuzz_wire_result *r)
{
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  size_t n;
  uint8_t *b = slurp(path, &n);
  pp_fuzz_wire_run(b, n, r);
  free(b);
}

/* Runs every file of dir; returns how many. */
static unsigned run_dir(const char *dir)
{
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "cannot open %s", dir);
  struct dirent *de;
  unsigned files = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.' || !strcmp(de->d_name, "README.md"))
      continue;
    struct pp_fuzz_wire_result r;
    run_file(dir, de->d_name, &r);
    files++;
  }
  closedir(d);
  return files;
}

static const char *const recorded[] = {
    "eager-16",        "eager-3000",       "eager-2ch",         "eager-rget-9000",
    "eager-rput-40000", "eager-rput-100000", "rndv-200",          "rndv-rput-40000",
    "ring-credits-200", "ring-credits-9000", "ring-cts-200",      "ring-cts-9000",
};

Test(wire_fuzz, recorded_seeds_are_honest_runs)
{
  for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++) {
    char path[1024];
    snprintf(path, sizeof(path), CORPUS "/%s", recorded[i]);
    size_t n;
    uint8_t *b = slurp(path, &n);
    struct pp_fuzz_wire_result r;
    pp_fuzz_wire_run(b, n, &r);
    free(b);
    cr_assert_gt(r.expected, 0, "%s", recorded[i]);
    cr_assert_eq((uint64_t)r.received, r.expected, "%s: %d of %llu delivered", recorded[i],
                 r.received, (unsigned long long)r.expected);
    cr_assert_eq(r.mutated, 0, "%s", recorded[i]);
    cr_assert_eq(r.honest_error, 0, "%s", recorded[i]);
    cr_assert_eq(r.decisions, n - PP_FUZZ_WIRE_CFG, "%s: the recorded decisions are the run's",
                 recorded[i]);
  }
}

/* The input really drives the peer: the same run with one decision changed is mutated. Each
 * seed's first decision is the first work request of rank 1; a FIELD decision on it (a whole new
 * header of 0xff bytes) must show, and the honest rank must not get every message through. */
Test(wire_fuzz, a_decision_mutates_the_peer)
{
  size_t n;
  uint8_t *b = slurp(CORPUS "/eager-16", &n);
  uint8_t in[256];
  cr_assert_lt(n + 80, sizeof in);
  memcpy(in, b, PP_FUZZ_WIRE_CFG);
  size_t k = PP_FUZZ_WIRE_CFG;
  in[k++] = PP_BYZ_FIELD; /* action */
  in[k++] = 0;            /* a whole new header */
  memset(in + k, 0xff, 64);
  k += 64;
  struct pp_fuzz_wire_result r;
  pp_fuzz_wire_run(in, k, &r);
  free(b);
  cr_assert_geq(r.mutated, 1);
  cr_assert_lt((uint64_t)r.received, r.expected, "a message of type 0xff is no message");
}

Test(wire_fuzz, a_refused_configuration)
{
  static const uint8_t short_input[] = {0, 1};
  cr_assert_eq(pp_fuzz_wire_one(short_input, sizeof short_input), -1);
}

Test(wire_fuzz, every_corpus_file_runs_clean, .timeout = 300)
{
  cr_assert_geq(run_dir(CORPUS), sizeof recorded / sizeof recorded[0], "the corpus is there");
}

/* Mutations of the decisions (the configuration kept): bit flips, interesting bytes, cuts,
 * insertions, as tests/test_trace_fuzz.c does for traces. */
static void mutate_rounds(const char *name, unsigned rounds, struct pp_prng *rng)
{
  char path[1024];
  snprintf(path, sizeof(path), CORPUS "/%s", name);
  size_t n;
  uint8_t *orig = slurp(path, &n);
  uint8_t *m = malloc(n + 64);
  for (unsigned round = 0; round < rounds; round++) {
    size_t len = n;
    memcpy(m, orig, n);
    unsigned kind = (unsigned)pp_prng_below(rng, 4), edits = 1 + (unsigned)pp_prng_below(rng, 4);
    for (unsigned e = 0; e < edits && len > PP_FUZZ_WIRE_CFG; e++) {
      size_t at = PP_FUZZ_WIRE_CFG + (size_t)pp_prng_below(rng, len - PP_FUZZ_WIRE_CFG);
      switch (kind) {
      case 0: m[at] ^= (uint8_t)(1u << pp_prng_below(rng, 8)); break;
      case 1: m[at] = (uint8_t[]){0x00, 0x01, 0x02, 0x7f, 0x80, 0xff}[pp_prng_below(rng, 6)]; break;
      case 2: len = at; break;
      default:
        if (len < n + 60) {
          memmove(m + at + 1, m + at, len - at);
          m[at] = (uint8_t)pp_prng_next(rng);
          len++;
        }
      }
    }
    struct pp_fuzz_wire_result r;
    pp_fuzz_wire_run(m, len, &r);
    cr_assert_geq(r.received, 0, "%s round %u", name, round);
  }
  free(m);
  free(orig);
}

Test(wire_fuzz, ring_seeds_and_their_mutations, .timeout = 300)
{
  static const char *const ring[] = {"ring-credits-200", "ring-credits-9000", "ring-cts-200",
                                     "ring-cts-9000"};
  struct pp_prng rng;
  pp_prng_seed(&rng, 12);
  for (size_t i = 0; i < sizeof ring / sizeof ring[0]; i++)
    mutate_rounds(ring[i], 300, &rng);
}

/* The p2p seeds' mutations crashed the engine before the validation (issue 12). */
Test(wire_fuzz, p2p_seeds_and_their_mutations, .timeout = 300)
{
  struct pp_prng rng;
  pp_prng_seed(&rng, 13);
  for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++)
    if (strncmp(recorded[i], "ring-", 5))
      mutate_rounds(recorded[i], 100, &rng);
}

/* The byzantine wrapper aims at the p2p header as engine/proto/p2p/p2p_impl.h lays it out (byzantine.h): the
 * offsets it names agree with what pp_p2p_msg_describe() decodes. */
Test(wire_fuzz, byzantine_knows_the_p2p_header)
{
  uint8_t h[64] = {0};
  h[0] = PP_P2P_MSG_CTS;
  uint16_t credits = 0x1234, rcredits = 0x0567;
  uint32_t seq = 0xa1b2c3d4, tag = 0x01020304, len = 0x00c0ffee;
  memcpy(h + 2, &credits, 2);
  memcpy(h + 8, &seq, 4);
  memcpy(h + 12, &tag, 4);
  memcpy(h + 16, &len, 4);
  memcpy(h + 60, &rcredits, 2);
  struct pp_p2p_msg_info m;
  cr_assert(pp_p2p_msg_describe(h, sizeof h, &m));
  cr_assert_eq(m.type, PP_P2P_MSG_CTS);
  cr_assert_eq(m.credits, credits);
  cr_assert_eq(m.rcredits, rcredits);
  cr_assert_eq(m.seq, seq);
  cr_assert_eq(m.tag, tag);
  cr_assert_eq(m.len, len);
}

Test(wire_fuzz, crashes)
{
  const char *dir = getenv("PREPOST_WIRE_CRASHES");
  if (!dir || !*dir)
    cr_skip_test("PREPOST_WIRE_CRASHES not set (a folder of inputs to try, e.g. new crash-* files)");
  cr_assert_gt(run_dir(dir), 0);
}
