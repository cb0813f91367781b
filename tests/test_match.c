/*
 * engine/proto/p2p/match.c: the posted-receive and unexpected-message queues, alone (no engine, no NIC).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/proto/p2p/match.h"

#define ANYS PP_ANY_SOURCE
#define ANYT PP_ANY_TAG

static struct pp_match m;
static struct pp_mentry e[64];

static void fini(void)
{
  pp_match_fini(&m);
}

TestSuite(match, .fini = fini);

static int idx(const struct pp_mentry *x)
{
  return x ? (int)(x - e) : -1;
}

Test(match, exact_receive_gets_its_message)
{
  cr_assert_eq(pp_match_init(&m, 16, 16), PP_OK);
  cr_assert_eq(pp_match_post(&m, &e[0], 0, 3, 7), PP_OK);
  cr_assert_null(pp_match_arrive(&m, 0, 3, 8), "another tag does not match");
  cr_assert_null(pp_match_arrive(&m, 0, 2, 7), "another source does not match");
  cr_assert_null(pp_match_arrive(&m, 1, 3, 7), "another context does not match");
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 3, 7)), 0);
  cr_assert_null(pp_match_arrive(&m, 0, 3, 7), "a receive matches once");
  cr_assert_eq(m.nposted, 0);
}

Test(match, first_posted_matching_receive_wins_whatever_its_wildcards)
{
  cr_assert_eq(pp_match_init(&m, 16, 16), PP_OK);
  /* posting order: specific, any-source, any-tag, any-any, specific */
  pp_match_post(&m, &e[0], 0, 1, 5);
  pp_match_post(&m, &e[1], 0, ANYS, 5);
  pp_match_post(&m, &e[2], 0, 1, ANYT);
  pp_match_post(&m, &e[3], 0, ANYS, ANYT);
  pp_match_post(&m, &e[4], 0, 1, 5);
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 0);
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 1, "the ANY_SOURCE receive was posted next");
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 2, "then the ANY_TAG one");
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 3, "then the double wildcard");
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 4, "the later specific one comes last");
}

Test(match, wildcard_posted_first_takes_a_message_a_later_specific_one_wanted)
{
  cr_assert_eq(pp_match_init(&m, 16, 16), PP_OK);
  pp_match_post(&m, &e[0], 0, ANYS, ANYT);
  pp_match_post(&m, &e[1], 0, 2, 9);
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 2, 9)), 0);
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 2, 9)), 1);
}

Test(match, unexpected_messages_in_arrival_order_per_pattern)
{
  cr_assert_eq(pp_match_init(&m, 16, 16), PP_OK);
  pp_match_add_unexpected(&m, &e[0], 0, 1, 5);
  pp_match_add_unexpected(&m, &e[1], 0, 2, 6);
  pp_match_add_unexpected(&m, &e[2], 0, 1, 6);
  pp_match_add_unexpected(&m, &e[3], 0, 2, 5);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, 2, 5)), 3);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, 1, ANYT)), 0);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, 6)), 1);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, ANYT)), 0);
  cr_assert_null(pp_match_find_unexpected(&m, 1, ANYS, ANYT), "context 1 has nothing");
  cr_assert_null(pp_match_find_unexpected(&m, 0, 3, ANYT));
  /* finding does not take: a probe */
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, ANYT)), 0);
  pp_match_remove_unexpected(&m, &e[0]);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, 1, ANYT)), 2, "source 1's next is e2");
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, ANYT)), 1);
  cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, 5)), 3);
  pp_match_remove_unexpected(&m, &e[3]);
  pp_match_remove_unexpected(&m, &e[1]);
  pp_match_remove_unexpected(&m, &e[2]);
  cr_assert_eq(m.nunexpected, 0);
  cr_assert_null(pp_match_find_unexpected(&m, 0, ANYS, ANYT));
}

Test(match, cancel_removes_a_posted_receive)
{
  cr_assert_eq(pp_match_init(&m, 16, 16), PP_OK);
  pp_match_post(&m, &e[0], 0, 1, 5);
  pp_match_post(&m, &e[1], 0, 1, 5);
  pp_match_remove_posted(&m, &e[0]);
  cr_assert_eq(idx(pp_match_arrive(&m, 0, 1, 5)), 1);
  cr_assert_eq(m.nposted, 0);
}

Test(match, bounds_are_enforced)
{
  cr_assert_eq(pp_match_init(&m, 2, 1), PP_OK);
  cr_assert_eq(pp_match_post(&m, &e[0], 0, 1, 1), PP_OK);
  cr_assert_eq(pp_match_post(&m, &e[1], 0, ANYS, ANYT), PP_OK);
  cr_assert_eq(pp_match_post(&m, &e[2], 0, 1, 1), PP_LIMIT);
  cr_assert_eq(pp_match_add_unexpected(&m, &e[3], 0, 1, 1), PP_OK);
  cr_assert_eq(pp_match_add_unexpected(&m, &e[4], 0, 1, 2), PP_LIMIT);
}

Test(match, sub_queues_are_recycled)
{
  /* far more posts and arrivals than the pool has sub-queues: emptied ones go back */
  cr_assert_eq(pp_match_init(&m, 4, 4), PP_OK);
  for (uint32_t i = 0; i < 10000; i++) {
    cr_assert_eq(pp_match_post(&m, &e[i % 4], i % 3, i, i * 7), PP_OK);
    cr_assert_eq(idx(pp_match_arrive(&m, i % 3, i, i * 7)), (int)(i % 4));
    cr_assert_eq(pp_match_add_unexpected(&m, &e[4 + i % 4], 0, i, i), PP_OK);
    cr_assert_eq(idx(pp_match_find_unexpected(&m, 0, ANYS, i)), (int)(4 + i % 4));
    pp_match_remove_unexpected(&m, &e[4 + i % 4]);
  }
}

/* A randomized model check: the hashed queues give the same answers as a plain list scan. */
Test(match, agrees_with_a_linear_scan)
{
  enum { N = 48 };
  struct pp_mentry *ent = e;
  struct ref {
    int used, posted; /* posted receive or unexpected message */
    uint32_t ctx, src, tag;
    uint64_t order;
  } ref[N] = {{0}};
  uint64_t clock = 0, x = 12345;
  cr_assert_eq(pp_match_init(&m, N, N), PP_OK);
  for (int step = 0; step < 20000; step++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t r = (uint32_t)(x >> 33);
    uint32_t ctx = r % 2, src = (r >> 1) % 3, tag = (r >> 3) % 3;
    int slot = -1;
    for (int i = 0; i < N && slot < 0; i++)
      if (!ref[(r + i) % N].used)
        slot = (int)((r + i) % N);
    if ((r >> 8) % 2 == 0 && slot >= 0) { /* post a receive, wildcards half the time */
      uint32_t s = (r >> 9) % 2 ? ANYS : src, t = (r >> 10) % 2 ? ANYT : tag;
      /* expected: the earliest unexpected message matching */
      int want = -1;
      for (int i = 0; i < N; i++)
        if (ref[i].used && !ref[i].posted && ref[i].ctx == ctx && (s == ANYS || ref[i].src == s) &&
            (t == ANYT || ref[i].tag == t) && (want < 0 || ref[i].order < ref[want].order))
          want = i;
      int got = idx(pp_match_find_unexpected(&m, ctx, s, t));
      cr_assert_eq(got, want, "step %d: receive (%u,%x,%x): got %d want %d", step, ctx, s, t, got, want);
      if (got >= 0) {
        pp_match_remove_unexpected(&m, &ent[got]);
        ref[got].used = 0;
      } else {
        cr_assert_eq(pp_match_post(&m, &ent[slot], ctx, s, t), PP_OK);
        ref[slot] = (struct ref){1, 1, ctx, s, t, clock++};
      }
    } else if (slot >= 0) { /* a message arrives */
      int want = -1;
      for (int i = 0; i < N; i++)
        if (ref[i].used && ref[i].posted && ref[i].ctx == ctx &&
            (ref[i].src == ANYS || ref[i].src == src) && (ref[i].tag == ANYT || ref[i].tag == tag) &&
            (want < 0 || ref[i].order < ref[want].order))
          want = i;
      int got = idx(pp_match_arrive(&m, ctx, src, tag));
      cr_assert_eq(got, want, "step %d: message (%u,%u,%u)", step, ctx, src, tag);
      if (got >= 0) {
        ref[got].used = 0;
      } else {
        cr_assert_eq(pp_match_add_unexpected(&m, &ent[slot], ctx, src, tag), PP_OK);
        ref[slot] = (struct ref){1, 0, ctx, src, tag, clock++};
      }
    }
  }
}

static double match_ns(uint32_t posted)
{
  struct pp_match mm;
  struct pp_mentry *ent = calloc(posted, sizeof(*ent));
  cr_assert_not_null(ent);
  cr_assert_eq(pp_match_init(&mm, posted, 16), PP_OK);
  struct timespec a, b;
  uint64_t n = 0;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int round = 0; round < 20; round++) {
    for (uint32_t i = 0; i < posted; i++)
      pp_match_post(&mm, &ent[i], 0, i % 64, i);
    for (uint32_t i = posted; i-- > 0;) /* the last posted first: the deepest for a list */
      n += pp_match_arrive(&mm, 0, i % 64, i) == &ent[i];
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  cr_assert_eq(n, 20ull * posted);
  pp_match_fini(&mm);
  free(ent);
  return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (20.0 * posted);
}

Test(match, exact_lookup_cost_does_not_grow_with_the_queue)
{
  double small = match_ns(10), big = match_ns(10000);
  cr_log_info("post + match: %.1f ns at 10 posted receives, %.1f ns at 10000", small, big);
  /* generous: a list scan would be ~1000 times slower at 10000 */
  cr_assert_lt(big, 20 * small + 500, "%.1f ns at 10000 vs %.1f ns at 10", big, small);
}
