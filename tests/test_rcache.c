/*
 * engine/proto/p2p/rcache.c: the registration cache against a fake backend that records registrations.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/simnic.h"
#include "prepost/rcache.h"

struct reg {
  uint64_t addr, len;
  unsigned access;
  int live;
};

static struct {
  struct reg r[256];
  unsigned n, regs, deregs;
  int fail; /* reg_mr returns this when non-zero */
  unsigned table; /* the NIC's MR table: PP_LIMIT past this many live registrations (0: none) */
} F;

static unsigned live(void)
{
  unsigned n = 0;
  for (unsigned i = 0; i < F.n; i++)
    n += (unsigned)F.r[i].live;
  return n;
}

static int fk_reg(void *nic, void *addr, size_t len, unsigned access, struct pp_mr *mr)
{
  (void)nic;
  if (F.fail)
    return F.fail;
  if (F.table && live() >= F.table)
    return PP_LIMIT;
  cr_assert_lt(F.n, 256);
  F.r[F.n] = (struct reg){(uint64_t)(uintptr_t)addr, len, access, 1};
  *mr = (struct pp_mr){.addr = (uint64_t)(uintptr_t)addr, .length = len, .lkey = 100 + F.n,
                       .rkey = 200 + F.n, .access = access};
  F.n++;
  F.regs++;
  return PP_OK;
}

static int fk_dereg(void *nic, const struct pp_mr *mr)
{
  (void)nic;
  cr_assert(mr->lkey >= 100 && mr->lkey < 100 + F.n, "dereg of an unknown lkey %u", mr->lkey);
  cr_assert(F.r[mr->lkey - 100].live, "double dereg of lkey %u", mr->lkey);
  F.r[mr->lkey - 100].live = 0;
  F.deregs++;
  return PP_OK;
}

/* only reg_mr and dereg_mr are ever called; the other slots are the simulator's */
static struct pp_nic_ops ops;

static struct pp_rcache rc;
static uint8_t *mem; /* 1 MiB, page aligned */

static void init(void)
{
  memset(&F, 0, sizeof(F));
  ops = simnic_ops;
  ops.reg_mr = fk_reg;
  ops.dereg_mr = fk_dereg;
  mem = aligned_alloc(4096, 1 << 20);
  cr_assert_not_null(mem);
}

static void fini(void)
{
  pp_rcache_fini(&rc);
  free(mem);
}

TestSuite(rcache, .init = init, .fini = fini);

Test(rcache, a_hit_reuses_the_registration)
{
  struct pp_rcache_entry *a, *b, *c;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 4, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem + 100, 1000, &a), PP_OK);
  cr_assert_eq(F.regs, 1);
  cr_assert_eq(F.r[0].addr, (uint64_t)(uintptr_t)mem, "widened to the page");
  cr_assert_eq(F.r[0].len, 4096);
  cr_assert_eq(F.r[0].access, PP_ACCESS_LOCAL_WRITE, "local access only: never remote");
  cr_assert_eq(pp_rcache_get(&rc, mem + 2000, 2000, &b), PP_OK, "same page");
  cr_assert_eq(a, b);
  cr_assert_eq(F.regs, 1);
  cr_assert_eq(a->refs, 2);
  pp_rcache_put(&rc, a);
  pp_rcache_put(&rc, b);
  cr_assert_eq(pp_rcache_get(&rc, mem, 4096, &c), PP_OK);
  cr_assert_eq(c, a, "still cached after its last put");
  cr_assert_eq(rc.st.hits, 2);
  cr_assert_eq(rc.st.misses, 1);
  pp_rcache_put(&rc, c);
  pp_rcache_fini(&rc);
  cr_assert_eq(F.deregs, 1, "fini deregisters what is cached");
}

Test(rcache, lru_eviction_by_count)
{
  struct pp_rcache_entry *e[4];
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 3, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(pp_rcache_get(&rc, mem + i * 8192, 100, &e[i]), PP_OK);
    pp_rcache_put(&rc, e[i]);
  }
  /* touch 0 so that 1 is the least recently used */
  cr_assert_eq(pp_rcache_get(&rc, mem, 100, &e[0]), PP_OK);
  pp_rcache_put(&rc, e[0]);
  cr_assert_eq(pp_rcache_get(&rc, mem + 3 * 8192, 100, &e[3]), PP_OK);
  cr_assert_eq(F.deregs, 1);
  cr_assert_eq(F.r[1].live, 0, "the least recently used went");
  cr_assert(F.r[0].live && F.r[2].live);
  cr_assert_eq(rc.st.evictions, 1);
  cr_assert_eq(rc.n, 3);
  pp_rcache_put(&rc, e[3]);
}

Test(rcache, lru_eviction_by_bytes)
{
  struct pp_rcache_entry *a, *b;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 16, 3 * 4096, PP_ACCESS_LOCAL_WRITE), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem, 2 * 4096, &a), PP_OK);
  pp_rcache_put(&rc, a);
  cr_assert_eq(pp_rcache_get(&rc, mem + 65536, 2 * 4096, &b), PP_OK);
  cr_assert_eq(F.deregs, 1, "the first went to make room");
  cr_assert_leq(rc.bytes, 3 * 4096);
  pp_rcache_put(&rc, b);
}

Test(rcache, full_of_registrations_in_use_is_again_not_an_error)
{
  struct pp_rcache_entry *a, *b, *c;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 1, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem, 100, &a), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem + 8192, 100, &b), PP_AGAIN);
  cr_assert_null(b);
  pp_rcache_put(&rc, a);
  cr_assert_eq(pp_rcache_get(&rc, mem + 8192, 100, &c), PP_OK, "room once it was put back");
  pp_rcache_put(&rc, c);
  cr_assert_eq(pp_rcache_get(&rc, mem, 5 << 20, &a), PP_LIMIT, "larger than the whole cache");
}

Test(rcache, invalidate_on_free)
{
  struct pp_rcache_entry *a, *b, *c;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 8, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem, 100, &a), PP_OK);
  pp_rcache_put(&rc, a);
  cr_assert_eq(pp_rcache_get(&rc, mem + 8192, 100, &b), PP_OK); /* kept in use */
  cr_assert_eq(pp_rcache_invalidate(&rc, mem, 16384), 2);
  cr_assert_eq(F.deregs, 1, "the unused one goes at once");
  cr_assert_eq(F.r[1].live, 1, "the one in use stays until its put");
  cr_assert_eq(pp_rcache_get(&rc, mem + 8192, 100, &c), PP_OK);
  cr_assert_neq(c, b, "an invalidated registration is never handed out again");
  cr_assert_eq(F.regs, 3);
  pp_rcache_put(&rc, b);
  cr_assert_eq(F.r[1].live, 0, "dropped at its last put");
  pp_rcache_put(&rc, c);
  cr_assert_eq(pp_rcache_invalidate(&rc, mem + 65536, 10), 0, "nothing there");
}

Test(rcache, backend_failure_is_reported)
{
  struct pp_rcache_entry *a;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 8, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  F.fail = PP_LIMIT;
  cr_assert_eq(pp_rcache_get(&rc, mem, 100, &a), PP_LIMIT);
  cr_assert_eq(rc.n, 0);
  F.fail = 0;
  cr_assert_eq(pp_rcache_get(&rc, mem, 0, &a), PP_OK, "an empty range registers one page");
  pp_rcache_put(&rc, a);
}

/* The NIC's MR table (2 entries) is smaller than the cache (8): a miss that the NIC refuses with
 * PP_LIMIT deregisters unused cached registrations, least recently used first; with all of ours
 * in use it is PP_AGAIN (a put will make room), never a failure that only time would cure. */
Test(rcache, a_full_nic_mr_table_evicts_unused_registrations)
{
  struct pp_rcache_entry *a, *b, *c, *d, *x;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 8, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  F.table = 2;
  cr_assert_eq(pp_rcache_get(&rc, mem, 100, &a), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem + 8192, 100, &b), PP_OK);
  pp_rcache_put(&rc, a);
  pp_rcache_put(&rc, b);
  cr_assert_eq(pp_rcache_get(&rc, mem + 16384, 100, &c), PP_OK, "a cached, unused one made room");
  cr_assert_eq(F.r[0].live, 0, "the least recently used went");
  cr_assert_eq(F.r[1].live, 1);
  cr_assert_eq(rc.st.evictions, 1);
  cr_assert_eq(pp_rcache_get(&rc, mem + 24576, 100, &d), PP_OK);
  cr_assert_eq(pp_rcache_get(&rc, mem + 32768, 100, &x), PP_AGAIN, "both in use: wait for a put");
  cr_assert_null(x);
  cr_assert_eq(rc.n, 2);
  pp_rcache_put(&rc, c);
  cr_assert_eq(pp_rcache_get(&rc, mem + 32768, 100, &x), PP_OK, "room after the put");
  cr_assert_eq(live(), 2);
  pp_rcache_put(&rc, d);
  pp_rcache_put(&rc, x);
  cr_assert_eq(pp_rcache_evict(&rc), true);
  cr_assert_eq(pp_rcache_evict(&rc), true);
  cr_assert_eq(pp_rcache_evict(&rc), false, "nothing left to evict");
  cr_assert_eq(live(), 0);
}

Test(rcache, bad_bounds_are_refused)
{
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 0, 1 << 20, 0), PP_INVALID);
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 4, 100, 0), PP_INVALID);
}

Test(rcache, lookups_by_start_page_or_among_the_recent)
{
  struct pp_rcache_entry *e[20], *x, *y;
  cr_assert_eq(pp_rcache_init(&rc, &ops, NULL, 64, 1 << 20, PP_ACCESS_LOCAL_WRITE), PP_OK);
  for (int i = 0; i < 20; i++) { /* 20 registrations of 3 pages each */
    cr_assert_eq(pp_rcache_get(&rc, mem + i * 3 * 4096, 3 * 4096, &e[i]), PP_OK);
    pp_rcache_put(&rc, e[i]);
  }
  cr_assert_eq(pp_rcache_get(&rc, mem + 100, 8000, &x), PP_OK);
  cr_assert_eq(x, e[0], "same start page: found by the hash, however old");
  pp_rcache_put(&rc, x);
  cr_assert_eq(pp_rcache_get(&rc, mem + 19 * 3 * 4096 + 4096, 100, &y), PP_OK);
  cr_assert_eq(y, e[19], "contained in a recent one");
  pp_rcache_put(&rc, y);
  cr_assert_eq(pp_rcache_get(&rc, mem + 5 * 3 * 4096 + 4096, 100, &y), PP_OK);
  cr_assert_neq(y, e[5], "contained in an old one, not at its start: a (bounded) miss");
  cr_assert_eq(rc.st.misses, 21);
  pp_rcache_put(&rc, y);
}
