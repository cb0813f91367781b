/*
 * The trace reader's fuzz corpus, replayed deterministically (CI has no clang): every seed of
 * tests/fuzz/corpus parses as expected, then thousands of seeded mutations of each (bit flips,
 * byte overwrites, truncations, insertions; CRCs recomputed half of the time so that mutations
 * reach the record decoder) go through the same target as the libFuzzer harness
 * (tests/fuzz/fuzz_trace.c). Under ASan (the asan preset) any out-of-bounds read fails here.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/prng.h"
#include "prepost/trace.h"
#include "fuzz/fuzz_trace.h"
#include "scratch.h"

#define CORPUS PREPOST_SOURCE_DIR "/tests/fuzz/corpus"

static uint8_t *slurp(const char *path, size_t *n)
{
  return (uint8_t *)scratch_slurp(path, n);
}

static int seed(const char *name)
{
  char path[512];
  snprintf(path, sizeof(path), CORPUS "/%s", name);
  size_t n;
  uint8_t *b = slurp(path, &n);
  int r = pp_fuzz_trace_one(b, n);
  free(b);
  return r;
}

Test(trace_fuzz, seeds_parse_as_expected)
{
  cr_assert_eq(seed("tiny"), 6);
  cr_assert_eq(seed("tiny-crcfix"), 6);
  cr_assert_eq(seed("tiny-partial"), 6, "a trace without END, read in partial mode");
  cr_assert_eq(seed("short-header"), -1);
  cr_assert_gt(seed("rnr-retry0"), 100, "a recorded simulated run");
  cr_assert_gt(seed("rnr-retry0-cut"), 100, "without its END chunk, in partial mode");
  cr_assert_eq(seed("rnr-retry0-v1.1"), 90, "format 1.1, trace.packets errors: one RNR NAK");
  cr_assert_eq(seed("regress-dt-int64-min"), -1, "a time delta of -2^63 (found by libFuzzer)");
  cr_assert_eq(seed("script-v2"), 537, "format 2.0: the configuration as keys, a script's lines");
}

/* Which packets a seed has: format 1.0 (no trace.packets key) had every packet it recorded. */
static enum pp_trace_packets packets_of(const char *name, unsigned *minor)
{
  char path[512];
  snprintf(path, sizeof(path), CORPUS "/%s", name);
  size_t n;
  uint8_t *b = slurp(path, &n);
  struct pp_trace t;
  char err[512];
  cr_assert_eq(pp_trace_open(b + 1, n - 1, 0, &t, err, sizeof(err)), PP_OK, "%s: %s", name, err);
  enum pp_trace_packets p = pp_trace_packets(&t);
  *minor = t.minor;
  pp_trace_close(&t);
  free(b);
  return p;
}

Test(trace_fuzz, seeds_say_which_packets_they_have)
{
  unsigned minor;
  cr_assert_eq(packets_of("rnr-retry0", &minor), PP_TRACE_PACKETS_ALL);
  cr_assert_eq(minor, 0, "a format 1.0 trace: no key, its packets are all there were");
  cr_assert_eq(packets_of("tiny", &minor), PP_TRACE_PACKETS_ALL, "1.0 with one packet");
  cr_assert_eq(packets_of("rnr-retry0-v1.1", &minor), PP_TRACE_PACKETS_ERRORS);
  cr_assert_eq(minor, 1);
}

Test(trace_fuzz, every_corpus_file_and_its_mutations, .timeout = 300)
{
  DIR *d = opendir(CORPUS);
  cr_assert_not_null(d);
  struct pp_prng rng;
  pp_prng_seed(&rng, 6);
  struct dirent *de;
  unsigned files = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    char path[512];
    snprintf(path, sizeof(path), CORPUS "/%s", de->d_name);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    pp_fuzz_trace_one(orig, n);
    files++;
    uint8_t *m = malloc(n + 64);
    for (int round = 0; round < 1500; round++) {
      size_t len = n;
      memcpy(m, orig, n);
      if (len > 0)
        m[0] = (uint8_t)pp_prng_below(&rng, 4); /* CRC fix-up and partial mode at random */
      unsigned kind = (unsigned)pp_prng_below(&rng, 4);
      unsigned edits = 1 + (unsigned)pp_prng_below(&rng, 4);
      for (unsigned e = 0; e < edits && len > 1; e++) {
        size_t at = 1 + (size_t)pp_prng_below(&rng, len - 1);
        switch (kind) {
        case 0:
          m[at] ^= (uint8_t)(1u << pp_prng_below(&rng, 8));
          break;
        case 1: /* interesting bytes: varint continuation, 0, all ones */
          m[at] = (uint8_t[]){0x00, 0x7f, 0x80, 0xff, 0x01}[pp_prng_below(&rng, 5)];
          break;
        case 2:
          len = at;
          break;
        default:
          if (len < n + 60) {
            memmove(m + at + 1, m + at, len - at);
            m[at] = (uint8_t)pp_prng_next(&rng);
            len++;
          }
        }
      }
      pp_fuzz_trace_one(m, len);
    }
    free(m);
    free(orig);
  }
  closedir(d);
  cr_assert_geq(files, 8, "the corpus is there");
}
