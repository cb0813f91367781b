#include "prepost/hist.h"

#include <assert.h>
#include <string.h>

void pp_hist_reset(struct pp_hist *h)
{
  memset(h, 0, sizeof(*h));
  h->min = UINT64_MAX;
}

/* Bucket i of a value v >= 2 * SUB: with e = floor(log2 v) and shift = e - SUB_BITS (>= 1), the
 * top SUB_BITS + 1 bits m = v >> shift lie in [SUB, 2 * SUB) and i = shift * SUB + m. Below,
 * shift is 0 and i = v. */
uint32_t pp_hist_index(uint64_t v)
{
  if (v < 2 * PP_HIST_SUB)
    return (uint32_t)v;
  unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - PP_HIST_SUB_BITS;
  uint32_t i = shift * PP_HIST_SUB + (uint32_t)(v >> shift);
  assert(i < PP_HIST_BUCKETS);
  return i;
}

static unsigned bucket_shift(uint32_t i)
{
  return i < 2 * PP_HIST_SUB ? 0 : i / PP_HIST_SUB - 1;
}

uint64_t pp_hist_bucket_lo(uint32_t i)
{
  assert(i < PP_HIST_BUCKETS);
  unsigned shift = bucket_shift(i);
  return (uint64_t)(i - shift * PP_HIST_SUB) << shift;
}

uint64_t pp_hist_bucket_hi(uint32_t i)
{
  return pp_hist_bucket_lo(i) + ((1ull << bucket_shift(i)) - 1);
}

void pp_hist_record(struct pp_hist *h, uint64_t v)
{
  h->bucket[pp_hist_index(v)]++;
  h->count++;
  h->min = v < h->min ? v : h->min;
  h->max = v > h->max ? v : h->max;
  h->sum = h->sum + v < h->sum ? UINT64_MAX : h->sum + v;
}

void pp_hist_merge(struct pp_hist *dst, const struct pp_hist *src)
{
  if (!src->count)
    return;
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++)
    dst->bucket[i] += src->bucket[i];
  dst->count += src->count;
  dst->min = src->min < dst->min ? src->min : dst->min;
  dst->max = src->max > dst->max ? src->max : dst->max;
  dst->sum = dst->sum + src->sum < dst->sum ? UINT64_MAX : dst->sum + src->sum;
}

/* ceil(n * num / den) without overflowing n * num */
static uint64_t nearest_rank(uint64_t n, uint64_t num, uint64_t den)
{
  uint64_t q = n / den, r = n % den;
  uint64_t k = q * num + (r * num + den - 1) / den;
  return k ? k : 1;
}

uint64_t pp_hist_percentile(const struct pp_hist *h, uint64_t num, uint64_t den)
{
  assert(den && num <= den);
  if (!h->count)
    return 0;
  uint64_t k = nearest_rank(h->count, num, den);
  if (k >= h->count)
    return h->max;
  if (k == 1)
    return h->min;
  uint64_t seen = 0;
  uint32_t i = pp_hist_index(h->min);
  for (; i < PP_HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= k)
      break;
  }
  assert(i < PP_HIST_BUCKETS);
  uint64_t lo = pp_hist_bucket_lo(i), v = lo + (pp_hist_bucket_hi(i) - lo) / 2;
  return v < h->min ? h->min : v > h->max ? h->max : v;
}

void pp_hist_summarize(const struct pp_hist *h, struct pp_hist_summary *out)
{
  *out = (struct pp_hist_summary){0};
  if (!h->count)
    return;
  out->count = h->count;
  out->min = h->min;
  out->p50 = pp_hist_percentile(h, 50, 100);
  out->p90 = pp_hist_percentile(h, 90, 100);
  out->p99 = pp_hist_percentile(h, 99, 100);
  out->p999 = pp_hist_percentile(h, 999, 1000);
  out->max = h->max;
  out->mean = h->sum / h->count;
}

bool pp_hist_valid(const struct pp_hist *h)
{
  if (!h->count) {
    for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++)
      if (h->bucket[i])
        return false;
    return h->min == UINT64_MAX && h->max == 0 && h->sum == 0;
  }
  if (h->min > h->max || !h->bucket[pp_hist_index(h->min)] || !h->bucket[pp_hist_index(h->max)])
    return false;
  uint64_t total = 0;
  for (uint32_t i = 0; i < PP_HIST_BUCKETS; i++) {
    if (h->bucket[i] && (i < pp_hist_index(h->min) || i > pp_hist_index(h->max)))
      return false;
    if (total + h->bucket[i] < total)
      return false;
    total += h->bucket[i];
  }
  return total == h->count;
}
