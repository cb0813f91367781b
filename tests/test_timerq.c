/* engine/timerq: a bounded min-heap of deadlines; ties fire in insertion order. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "prepost/prng.h"
#include "engine/core/timerq.h"

Test(timerq, empty)
{
  struct pp_timerq q;
  cr_assert_eq(pp_timerq_init(&q, 4), PP_OK);
  struct pp_timer t;
  cr_assert_eq(pp_timerq_next(&q), UINT64_MAX);
  cr_assert_eq(pp_timerq_pop_due(&q, UINT64_MAX, &t), 0);
  pp_timerq_fini(&q);
}

Test(timerq, pops_in_deadline_order)
{
  struct pp_timerq q;
  cr_assert_eq(pp_timerq_init(&q, 8), PP_OK);
  static const uint64_t d[] = {50, 10, 40, 30, 20, 60, 5, 45};
  for (uint32_t i = 0; i < 8; i++)
    cr_assert_eq(pp_timerq_push(&q, d[i], 1, i), PP_OK);
  cr_assert_eq(pp_timerq_next(&q), 5);
  static const uint64_t want[] = {5, 10, 20, 30, 40, 45, 50, 60};
  struct pp_timer t;
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(pp_timerq_pop_due(&q, 1000, &t), 1);
    cr_assert_eq(t.deadline, want[i]);
    cr_assert_eq(d[t.arg], t.deadline, "arg travels with its timer");
    cr_assert_eq(t.kind, 1);
  }
  cr_assert_eq(pp_timerq_pop_due(&q, 1000, &t), 0);
  pp_timerq_fini(&q);
}

Test(timerq, only_due_timers_pop)
{
  struct pp_timerq q;
  pp_timerq_init(&q, 4);
  pp_timerq_push(&q, 100, 1, 0);
  pp_timerq_push(&q, 200, 2, 0);
  struct pp_timer t;
  cr_assert_eq(pp_timerq_pop_due(&q, 99, &t), 0, "deadline 100 is not due at 99");
  cr_assert_eq(pp_timerq_next(&q), 100, "a refused pop leaves the queue alone");
  cr_assert_eq(pp_timerq_pop_due(&q, 100, &t), 1, "deadline == now is due");
  cr_assert_eq(t.kind, 1);
  cr_assert_eq(pp_timerq_pop_due(&q, 199, &t), 0);
  cr_assert_eq(pp_timerq_next(&q), 200);
  cr_assert_eq(pp_timerq_pop_due(&q, 500, &t), 1);
  cr_assert_eq(t.kind, 2);
  cr_assert_eq(pp_timerq_next(&q), UINT64_MAX);
  pp_timerq_fini(&q);
}

Test(timerq, ties_fire_in_insertion_order)
{
  struct pp_timerq q;
  pp_timerq_init(&q, 64);
  /* interleave three deadlines so the heap has to reorder equal keys */
  for (uint32_t i = 0; i < 60; i++)
    cr_assert_eq(pp_timerq_push(&q, 1000 - (i % 3) * 100, 0, i), PP_OK);
  struct pp_timer t;
  uint64_t last_deadline = 0;
  int64_t last_arg = -1;
  for (int i = 0; i < 60; i++) {
    cr_assert_eq(pp_timerq_pop_due(&q, 1000, &t), 1);
    if (t.deadline == last_deadline)
      cr_assert_gt((int64_t)t.arg, last_arg, "tie at %llu: arg %u after %lld",
                   (unsigned long long)t.deadline, t.arg, (long long)last_arg);
    else
      cr_assert_gt(t.deadline, last_deadline);
    last_deadline = t.deadline;
    last_arg = t.arg;
  }
  pp_timerq_fini(&q);
}

Test(timerq, ties_after_interleaved_pops)
{
  struct pp_timerq q;
  pp_timerq_init(&q, 16);
  pp_timerq_push(&q, 10, 0, 0);
  pp_timerq_push(&q, 10, 0, 1);
  struct pp_timer t;
  pp_timerq_pop_due(&q, 10, &t);
  cr_assert_eq(t.arg, 0);
  pp_timerq_push(&q, 10, 0, 2);
  pp_timerq_push(&q, 5, 0, 3);
  pp_timerq_push(&q, 10, 0, 4);
  static const uint32_t want[] = {3, 1, 2, 4};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(pp_timerq_pop_due(&q, 10, &t), 1);
    cr_assert_eq(t.arg, want[i], "pop %d: arg %u, want %u", i, t.arg, want[i]);
  }
  pp_timerq_fini(&q);
}

Test(timerq, limit_when_full)
{
  struct pp_timerq q;
  cr_assert_eq(pp_timerq_init(&q, 3), PP_OK);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(pp_timerq_push(&q, 10 + i, 0, 0), PP_OK);
  cr_assert_eq(pp_timerq_push(&q, 1, 0, 99), PP_LIMIT);
  cr_assert_eq(pp_timerq_next(&q), 10, "a refused push changes nothing");
  struct pp_timer t;
  cr_assert_eq(pp_timerq_pop_due(&q, 10, &t), 1);
  cr_assert_eq(pp_timerq_push(&q, 1, 0, 99), PP_OK, "room again after a pop");
  cr_assert_eq(pp_timerq_next(&q), 1);
  pp_timerq_fini(&q);
}

Test(timerq, zero_capacity_refuses)
{
  struct pp_timerq q;
  cr_assert_eq(pp_timerq_init(&q, 0), PP_OK);
  cr_assert_eq(pp_timerq_push(&q, 1, 0, 0), PP_LIMIT);
  pp_timerq_fini(&q);
}

Test(timerq, random_against_sorted_order)
{
  enum { N = 1000 };
  struct pp_timerq q;
  pp_timerq_init(&q, N);
  struct pp_prng r;
  pp_prng_seed(&r, 42);
  uint64_t pushed[N];
  for (uint32_t i = 0; i < N; i++) {
    pushed[i] = pp_prng_below(&r, 50); /* many ties */
    cr_assert_eq(pp_timerq_push(&q, pushed[i], 0, i), PP_OK);
  }
  struct pp_timer t, prev = {0};
  for (int i = 0; i < N; i++) {
    cr_assert_eq(pp_timerq_pop_due(&q, UINT64_MAX - 1, &t), 1);
    cr_assert_eq(pushed[t.arg], t.deadline);
    if (i > 0)
      cr_assert(prev.deadline < t.deadline || (prev.deadline == t.deadline && prev.arg < t.arg),
                "(%llu,%u) popped after (%llu,%u)", (unsigned long long)t.deadline, t.arg,
                (unsigned long long)prev.deadline, prev.arg);
    prev = t;
  }
  cr_assert_eq(pp_timerq_next(&q), UINT64_MAX);
  pp_timerq_fini(&q);
}
