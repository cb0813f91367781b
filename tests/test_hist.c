/* engine/hist: the bounded latency histogram (log-linear buckets, nearest-rank percentiles
 * within 1/256 of the sample, exact below 256, exact count/min/max/sum). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/hist.h"
#include "prepost/prng.h"

static struct pp_hist H, H2, H3;

static void record_all(struct pp_hist *h, const uint64_t *v, size_t n)
{
  pp_hist_reset(h);
  for (size_t i = 0; i < n; i++)
    pp_hist_record(h, v[i]);
}

Test(hist, buckets_tile_every_value)
{
  cr_assert_eq(pp_hist_index(0), 0);
  cr_assert_eq(pp_hist_index(255), 255);
  cr_assert_eq(pp_hist_index(256), 256);
  cr_assert_eq(pp_hist_index(UINT64_MAX), PP_HIST_BUCKETS - 1);
  cr_assert_eq(pp_hist_bucket_lo(0), 0);
  cr_assert_eq(pp_hist_bucket_hi(PP_HIST_BUCKETS - 1), UINT64_MAX);
  for (uint32_t i = 0; i + 1 < PP_HIST_BUCKETS; i++) {
    uint64_t lo = pp_hist_bucket_lo(i), hi = pp_hist_bucket_hi(i);
    cr_assert_eq(hi + 1, pp_hist_bucket_lo(i + 1), "bucket %u ends where %u starts", i, i + 1);
    cr_assert_eq(pp_hist_index(lo), i);
    cr_assert_eq(pp_hist_index(hi), i);
    /* the width: 1 below 256, else at most lo / 128 (half of it is the stated error) */
    cr_assert(hi - lo + 1 == 1 || (hi - lo + 1) * PP_HIST_SUB <= lo, "bucket %u: %llu..%llu", i,
              (unsigned long long)lo, (unsigned long long)hi);
  }
}

Test(hist, exact_below_256_nearest_rank)
{
  uint64_t v[100];
  for (int i = 0; i < 100; i++) /* 1..100, scrambled */
    v[i] = (uint64_t)((i * 37) % 100) + 1;
  record_all(&H, v, 100);
  cr_assert_eq(pp_hist_percentile(&H, 50, 100), 50);
  cr_assert_eq(pp_hist_percentile(&H, 99, 100), 99);
  cr_assert_eq(pp_hist_percentile(&H, 100, 100), 100);
  cr_assert_eq(pp_hist_percentile(&H, 0, 100), 1, "the 0th is the first sample");
  struct pp_hist_summary s;
  pp_hist_summarize(&H, &s);
  cr_assert(s.count == 100 && s.min == 1 && s.p50 == 50 && s.p90 == 90 && s.p99 == 99 &&
            s.p999 == 100 && s.max == 100 && s.mean == 50);

  uint64_t three[] = {30, 10, 20};
  record_all(&H, three, 3);
  cr_assert_eq(pp_hist_percentile(&H, 50, 100), 20); /* rank ceil(1.5) = 2 */
  cr_assert_eq(pp_hist_percentile(&H, 99, 100), 30); /* rank ceil(2.97) = 3 */
  uint64_t ten[] = {100, 90, 80, 70, 60, 50, 40, 30, 20, 10};
  record_all(&H, ten, 10);
  cr_assert_eq(pp_hist_percentile(&H, 50, 100), 50); /* rank 5 */
  cr_assert_eq(pp_hist_percentile(&H, 99, 100), 100);
  uint64_t two[] = {7, 3};
  record_all(&H, two, 2);
  cr_assert_eq(pp_hist_percentile(&H, 50, 100), 3);
  cr_assert_eq(pp_hist_percentile(&H, 99, 100), 7);
}

Test(hist, empty_and_single)
{
  pp_hist_reset(&H);
  struct pp_hist_summary s = {.p50 = 1, .max = 3};
  pp_hist_summarize(&H, &s);
  cr_assert(s.count == 0 && s.min == 0 && s.p50 == 0 && s.max == 0 && s.mean == 0);
  cr_assert_eq(pp_hist_percentile(&H, 50, 100), 0);
  cr_assert(pp_hist_valid(&H));
  pp_hist_record(&H, 123456789);
  pp_hist_summarize(&H, &s);
  cr_assert(s.count == 1 && s.min == 123456789 && s.p50 == 123456789 && s.p999 == 123456789 &&
                s.max == 123456789 && s.mean == 123456789,
            "one sample is reported exactly (clamped to min and max)");
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Against the exact nearest-rank percentiles of the sorted samples: within 1/256, on values
 * spread over 1 ns .. ~17 s (log-uniform) and on a narrow band (all in a few buckets). */
Test(hist, percentiles_within_the_stated_error)
{
  enum { N = 100000 };
  static uint64_t v[N];
  struct pp_prng r;
  for (int round = 0; round < 2; round++) {
    pp_prng_seed(&r, 7 + (uint64_t)round);
    uint64_t sum = 0;
    for (int i = 0; i < N; i++) {
      uint64_t x = round == 0 ? pp_prng_next(&r) >> (30 + pp_prng_next(&r) % 34)
                              : 1000000 + pp_prng_next(&r) % 20000;
      v[i] = x;
      sum += x;
    }
    record_all(&H, v, N);
    qsort(v, N, sizeof(v[0]), cmp_u64);
    static const uint64_t per[][2] = {{1, 100},   {10, 100},   {50, 100},     {90, 100},
                                      {99, 100},  {999, 1000}, {9999, 10000}, {1, 3}};
    for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
      uint64_t rank = (N * per[k][0] + per[k][1] - 1) / per[k][1];
      uint64_t exact = v[rank - 1], got = pp_hist_percentile(&H, per[k][0], per[k][1]);
      uint64_t d = got > exact ? got - exact : exact - got;
      cr_assert_leq(d * 256, exact, "round %d, %llu/%llu: %llu for %llu", round,
                    (unsigned long long)per[k][0], (unsigned long long)per[k][1],
                    (unsigned long long)got, (unsigned long long)exact);
    }
    struct pp_hist_summary s;
    pp_hist_summarize(&H, &s);
    cr_assert_eq(s.count, N);
    cr_assert_eq(s.min, v[0]);
    cr_assert_eq(s.max, v[N - 1]);
    cr_assert_eq(s.mean, sum / N);
  }
}

Test(hist, merge_is_recording_everything)
{
  struct pp_prng r;
  pp_prng_seed(&r, 3);
  pp_hist_reset(&H);
  pp_hist_reset(&H2);
  pp_hist_reset(&H3);
  for (int i = 0; i < 5000; i++) {
    uint64_t x = pp_prng_next(&r) % 10000000;
    pp_hist_record(&H, x);
    pp_hist_record(i % 3 ? &H2 : &H3, x);
  }
  pp_hist_merge(&H2, &H3);
  cr_assert_eq(memcmp(&H, &H2, sizeof(H)), 0);
  pp_hist_reset(&H3);
  pp_hist_merge(&H2, &H3); /* an empty one changes nothing (its min is UINT64_MAX) */
  cr_assert_eq(memcmp(&H, &H2, sizeof(H)), 0);
}

Test(hist, valid_finds_what_does_not_add_up)
{
  pp_hist_reset(&H);
  pp_hist_record(&H, 1000);
  pp_hist_record(&H, 5000);
  cr_assert(pp_hist_valid(&H));
  H2 = H;
  H2.count = 3;
  cr_assert_not(pp_hist_valid(&H2), "count");
  H2 = H;
  H2.min = 2000;
  cr_assert_not(pp_hist_valid(&H2), "min outside its bucket");
  H2 = H;
  H2.max = 999;
  cr_assert_not(pp_hist_valid(&H2), "min > max");
  H2 = H;
  H2.bucket[pp_hist_index(9000)] = 1;
  H2.bucket[pp_hist_index(5000)] = 0;
  cr_assert_not(pp_hist_valid(&H2), "a sample past max");
  pp_hist_reset(&H2);
  H2.bucket[3] = 1;
  cr_assert_not(pp_hist_valid(&H2), "an empty one with a sample");
  H2 = H;
  H2.bucket[pp_hist_index(9000)] = 1;
  H2.count = 3;
  cr_assert_not(pp_hist_valid(&H2), "a sample past max, max's bucket still there");
  H2 = H;
  H2.bucket[pp_hist_index(1000)] = UINT64_MAX;
  H2.bucket[pp_hist_index(5000)] = 2;
  H2.count = 1; /* what the sum wraps to */
  cr_assert_not(pp_hist_valid(&H2), "buckets whose sum wraps");
}

Test(hist, sum_saturates)
{
  pp_hist_reset(&H);
  pp_hist_record(&H, UINT64_MAX - 1);
  pp_hist_record(&H, 10);
  cr_assert_eq(H.sum, UINT64_MAX);
  cr_assert_eq(H.count, 2);
  cr_assert_eq(H.max, UINT64_MAX - 1);
  cr_assert_eq(pp_hist_percentile(&H, 100, 100), UINT64_MAX - 1);
}
