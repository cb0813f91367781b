/* Matching queues hashed by (context, source, tag); see match.h. */
#include "engine/proto/p2p/match_impl.h"

#include <stdlib.h>
#include <string.h>

static uint32_t pow2_at_least(uint64_t n)
{
  uint32_t p = 16;
  while (p < n && p < (1u << 30))
    p <<= 1;
  return p;
}

enum pp_status pp_match_init(struct pp_match *m, uint32_t max_posted, uint32_t max_unexpected)
{
  memset(m, 0, sizeof(*m));
  m->max_posted = max_posted;
  m->max_unexpected = max_unexpected;
  /* a receive uses one sub-queue, an unexpected message up to four */
  uint64_t nq = (uint64_t)max_posted + 4ull * max_unexpected;
  m->posted.mask = pow2_at_least(2ull * max_posted) - 1;
  m->unexpected.mask = pow2_at_least(8ull * max_unexpected) - 1;
  m->posted.bucket = calloc((size_t)m->posted.mask + 1, sizeof(*m->posted.bucket));
  m->unexpected.bucket = calloc((size_t)m->unexpected.mask + 1, sizeof(*m->unexpected.bucket));
  m->pool = calloc(nq ? nq : 1, sizeof(*m->pool));
  if (!m->posted.bucket || !m->unexpected.bucket || !m->pool) {
    pp_match_fini(m);
    return PP_NOMEM;
  }
  for (uint64_t i = nq; i-- > 0;) {
    m->pool[i].hnext = m->free;
    m->free = &m->pool[i];
  }
  return PP_OK;
}

void pp_match_fini(struct pp_match *m)
{
  free(m->posted.bucket);
  free(m->unexpected.bucket);
  free(m->pool);
  memset(m, 0, sizeof(*m));
}

enum pp_status pp_match_post(struct pp_match *m, struct pp_mentry *r, uint32_t ctx, uint32_t src,
                             uint32_t tag)
{
  return pp_match_post_inline(m, r, ctx, src, tag);
}

struct pp_mentry *pp_match_arrive(struct pp_match *m, uint32_t ctx, uint32_t src, uint32_t tag)
{
  return pp_match_arrive_inline(m, ctx, src, tag);
}

void pp_match_remove_posted(struct pp_match *m, struct pp_mentry *r)
{
  remove_posted(m, r);
}

enum pp_status pp_match_add_unexpected(struct pp_match *m, struct pp_mentry *u, uint32_t ctx,
                                       uint32_t src, uint32_t tag)
{
  if (m->nunexpected == m->max_unexpected)
    return PP_LIMIT;
  entry_key(m, u, ctx, src, tag);
  const uint32_t srcs[4] = {src, src, PP_ANY_SOURCE, PP_ANY_SOURCE};
  const uint32_t tags[4] = {tag, PP_ANY_TAG, tag, PP_ANY_TAG};
  for (uint32_t l = 0; l < 4; l++)
    append(get_queue(m, &m->unexpected, ctx, srcs[l], tags[l], l), u);
  m->nunexpected++;
  return PP_OK;
}

struct pp_mentry *pp_match_find_unexpected(const struct pp_match *m, uint32_t ctx, uint32_t src,
                                           uint32_t tag)
{
  if (m->nunexpected == 0)
    return NULL;
  const struct pp_mqueue *q = lookup(&m->unexpected, ctx, src, tag);
  return q ? q->head : NULL;
}

void pp_match_remove_unexpected(struct pp_match *m, struct pp_mentry *u)
{
  for (uint32_t l = 0; l < 4; l++)
    unlink_entry(m, &m->unexpected, u, l);
  m->nunexpected--;
}
