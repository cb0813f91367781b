/* engine/prng: seeded, reproducible, unbiased bounded draws, unit interval. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "prepost/prng.h"

Test(prng, same_seed_same_sequence)
{
  struct pp_prng a, b;
  pp_prng_seed(&a, 12345);
  pp_prng_seed(&b, 12345);
  for (int i = 0; i < 1000; i++)
    cr_assert_eq(pp_prng_next(&a), pp_prng_next(&b), "draw %d", i);
}

Test(prng, reseeding_restarts_the_sequence)
{
  struct pp_prng a;
  uint64_t first[16];
  pp_prng_seed(&a, 7);
  for (int i = 0; i < 16; i++)
    first[i] = pp_prng_next(&a);
  pp_prng_seed(&a, 7);
  for (int i = 0; i < 16; i++)
    cr_assert_eq(pp_prng_next(&a), first[i]);
}

Test(prng, different_seeds_differ)
{
  static const uint64_t seeds[] = {0, 1, 2, 3, 0x100000001b3ull, UINT64_MAX};
  enum { NS = sizeof(seeds) / sizeof(seeds[0]), K = 8 };
  uint64_t out[NS][K];
  for (int s = 0; s < NS; s++) {
    struct pp_prng r;
    pp_prng_seed(&r, seeds[s]);
    for (int k = 0; k < K; k++)
      out[s][k] = pp_prng_next(&r);
  }
  for (int s = 0; s < NS; s++)
    for (int t = 0; t < s; t++) {
      int same = 0;
      for (int k = 0; k < K; k++)
        same += out[s][k] == out[t][k];
      cr_assert_lt(same, K, "seeds %d and %d give the same sequence", s, t);
      cr_assert_neq(out[s][0], out[t][0]);
    }
}

Test(prng, seed_zero_is_not_degenerate)
{
  /* xoshiro's all-zero state would return 0 forever; splitmix seeding must avoid it */
  struct pp_prng r;
  pp_prng_seed(&r, 0);
  int zeros = 0;
  for (int i = 0; i < 100; i++)
    zeros += pp_prng_next(&r) == 0;
  cr_assert_lt(zeros, 2);
}

Test(prng, below_stays_in_bound)
{
  struct pp_prng r;
  pp_prng_seed(&r, 99);
  static const uint64_t bounds[] = {1, 2, 3, 7, 10, 1000, 1u << 24, (1ull << 63) + 1, UINT64_MAX};
  for (size_t b = 0; b < sizeof(bounds) / sizeof(bounds[0]); b++)
    for (int i = 0; i < 2000; i++)
      cr_assert_lt(pp_prng_below(&r, bounds[b]), bounds[b]);
  for (int i = 0; i < 100; i++)
    cr_assert_eq(pp_prng_below(&r, 1), 0);
  cr_assert_eq(pp_prng_below(&r, 0), 0, "bound 0 gives 0");
}

Test(prng, below_covers_every_value_roughly_evenly)
{
  enum { B = 10, N = 100000 };
  struct pp_prng r;
  pp_prng_seed(&r, 2024);
  unsigned hist[B] = {0};
  for (int i = 0; i < N; i++)
    hist[pp_prng_below(&r, B)]++;
  for (int v = 0; v < B; v++) /* expected 10000, sd ~95: +-5% is > 5 sd */
    cr_assert(hist[v] > N / B * 95 / 100 && hist[v] < N / B * 105 / 100, "value %d drawn %u times",
              v, hist[v]);
}

Test(prng, below_is_reproducible)
{
  struct pp_prng a, b;
  pp_prng_seed(&a, 5);
  pp_prng_seed(&b, 5);
  for (int i = 0; i < 500; i++)
    cr_assert_eq(pp_prng_below(&a, 1000003), pp_prng_below(&b, 1000003));
}

Test(prng, unit_in_half_open_interval)
{
  struct pp_prng r;
  pp_prng_seed(&r, 3);
  double lo = 1.0, hi = 0.0, sum = 0;
  enum { N = 100000 };
  for (int i = 0; i < N; i++) {
    double u = pp_prng_unit(&r);
    cr_assert(u >= 0.0 && u < 1.0, "draw %d = %.17g", i, u);
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
    sum += u;
  }
  cr_assert_lt(lo, 0.001);
  cr_assert_gt(hi, 0.999);
  cr_assert(sum / N > 0.49 && sum / N < 0.51, "mean %.4f", sum / N);
}

Test(prng, range_and_log_range_stay_in_bounds_and_reach_both_ends)
{
  struct pp_prng r;
  pp_prng_seed(&r, 99);
  bool lo = false, hi = false, llo = false, lhi = false;
  unsigned small = 0; /* log-uniform: as many draws in [1, 32) as in [32, 1024] */
  for (int i = 0; i < 20000; i++) {
    uint64_t x = pp_prng_range(&r, 3, 9);
    cr_assert(x >= 3 && x <= 9, "%lu", (unsigned long)x);
    lo |= x == 3;
    hi |= x == 9;
    uint64_t y = pp_prng_log_range(&r, 1, 1024);
    cr_assert(y >= 1 && y <= 1024, "%lu", (unsigned long)y);
    llo |= y == 1;
    lhi |= y == 1024;
    small += y < 32;
  }
  cr_assert(lo && hi && llo && lhi);
  cr_assert(small > 8000 && small < 12000, "%u of 20000 below 32", small);
  /* an empty range draws nothing */
  struct pp_prng a, b;
  pp_prng_seed(&a, 5);
  pp_prng_seed(&b, 5);
  cr_assert_eq(pp_prng_range(&a, 7, 7), 7);
  cr_assert_eq(pp_prng_log_range(&a, 8, 2), 8);
  cr_assert_eq(pp_prng_next(&a), pp_prng_next(&b));
}

Test(prng, chance_is_a_probability)
{
  struct pp_prng r;
  pp_prng_seed(&r, 7);
  unsigned yes = 0;
  for (int i = 0; i < 10000; i++)
    yes += pp_prng_chance(&r, 0.25);
  cr_assert(yes > 2200 && yes < 2800, "%u of 10000", yes);
  for (int i = 0; i < 100; i++)
    cr_assert(!pp_prng_chance(&r, 0) && pp_prng_chance(&r, 1));
}

/* One derivation for every seeded stream: a pure function, and no two of (seed, domain, rank)
 * nearby give the same stream. */
Test(prng, seed_derive_separates_seeds_domains_and_ranks)
{
  cr_assert_eq(pp_seed_derive(7, PP_SEED_ENGINE, 3), pp_seed_derive(7, PP_SEED_ENGINE, 3));
  enum { S = 8, R = 16 };
  static uint64_t seen[S * PP_SEED_DOMAIN_COUNT * R];
  size_t n = 0;
  for (uint64_t s = 0; s < S; s++)
    for (int d = 0; d < PP_SEED_DOMAIN_COUNT; d++)
      for (uint32_t r = 0; r < R; r++) {
        uint64_t x = pp_seed_derive(s, (enum pp_seed_domain)d, r);
        for (size_t i = 0; i < n; i++)
          cr_assert_neq(seen[i], x, "seed %lu domain %s rank %u repeats", (unsigned long)s,
                        pp_seed_domain_name((enum pp_seed_domain)d), r);
        seen[n++] = x;
      }
  /* not the seed itself, nor the seed plus the rank (the old engine's kind of mix) */
  cr_assert_neq(pp_seed_derive(0, PP_SEED_ENGINE, 0), 0);
  cr_assert_neq(pp_seed_derive(1, PP_SEED_ENGINE, 0) - pp_seed_derive(0, PP_SEED_ENGINE, 0),
                pp_seed_derive(1, PP_SEED_ENGINE, 1) - pp_seed_derive(0, PP_SEED_ENGINE, 1));
}

Test(prng, seed_domains_have_names)
{
  for (int d = 0; d < PP_SEED_DOMAIN_COUNT; d++)
    cr_assert_str_neq(pp_seed_domain_name((enum pp_seed_domain)d), "?");
  cr_assert_str_eq(pp_seed_domain_name(PP_SEED_EXPLORE), "explore");
  cr_assert_str_eq(pp_seed_domain_name(PP_SEED_DOMAIN_COUNT), "?");
}
