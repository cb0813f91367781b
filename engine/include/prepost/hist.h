/*
 * A bounded latency histogram in the manner of HdrHistogram (log-linear buckets), free of I/O:
 * fixed memory (struct pp_hist, no allocation), any uint64_t value, O(1) record, exact count,
 * min, max and sum, and percentiles within a documented relative error. The engine records every
 * latency sample of a rank into one; the simulator and the verbs backend report the same
 * percentiles from it, and a verbs rank sends its buckets (not its samples) to the coordinator.
 *
 * Buckets: values below 2 * PP_HIST_SUB (256) each have their own bucket (exact); above, every
 * power of two [2^e, 2^(e+1)) is cut into PP_HIST_SUB (128) buckets of width 2^(e-7). A bucket's
 * value is its midpoint, so a reported percentile differs from the sample it stands for by at
 * most half a bucket: |reported - true| <= true / 256 (0.39 %), and exact below 256 ns. The
 * nearest-rank percentile (the ceil(n * p)-th smallest sample) is the one reported; its bucket is
 * found exactly, only the value within it is approximate. Reported values are clamped to
 * [min, max], which are exact (the 100th percentile is the max, a single sample is exact).
 */
#ifndef PP_HIST_H
#define PP_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define PP_HIST_SUB_BITS 7
#define PP_HIST_SUB (1u << PP_HIST_SUB_BITS)
/* 2 * SUB exact buckets, then SUB per power of two from 2^(SUB_BITS+1) to 2^63: 7424 buckets,
 * 58 KiB */
#define PP_HIST_BUCKETS ((65 - PP_HIST_SUB_BITS) * PP_HIST_SUB)

struct pp_hist {
  uint64_t count;
  uint64_t min, max; /* exact; min = UINT64_MAX, max = 0 when empty */
  uint64_t sum;      /* saturates at UINT64_MAX */
  uint64_t bucket[PP_HIST_BUCKETS];
};

/* Percentile summary: nearest-rank, as above. All 0 when the histogram is empty. */
struct pp_hist_summary {
  uint64_t count, min, p50, p90, p99, p999, max, mean;
};

void pp_hist_reset(struct pp_hist *h);
void pp_hist_record(struct pp_hist *h, uint64_t v);
/* Adds src's samples to dst. */
void pp_hist_merge(struct pp_hist *dst, const struct pp_hist *src);

/* The bucket of a value and the smallest and largest value a bucket holds. */
uint32_t pp_hist_index(uint64_t v);
uint64_t pp_hist_bucket_lo(uint32_t i);
uint64_t pp_hist_bucket_hi(uint32_t i);

/* The ceil(n * num / den)-th smallest sample (at least the 1st), within the error above;
 * 0 when empty. num <= den. */
uint64_t pp_hist_percentile(const struct pp_hist *h, uint64_t num, uint64_t den);
void pp_hist_summarize(const struct pp_hist *h, struct pp_hist_summary *out);

/* A histogram that came from elsewhere (the verbs wire): the buckets add up to count, min and
 * max lie in the first and last non-empty bucket (or count is 0 and they are UINT64_MAX, 0). */
bool pp_hist_valid(const struct pp_hist *h);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
