/* The verbs driver's PMIx client (backends/verbs/pmix.h) under a real PMIx launcher, without an
 * RDMA device: ctest runs it as `mpirun -n 3 verbs_pmix_check`. Every rank puts a blob of its own
 * size and content and, for the next rank only, a per-peer key (the shape of the driver's
 * "prepost.ci.J" keys); rank 0 puts one more key. After one collecting fence every rank reads
 * every blob, the per-peer key from its predecessor (and finds none from anyone else: the
 * not-found answer the driver relies on for ranks that do not talk to it), rank 0's key, and
 * every rank's host name. Prints one PASS/FAIL line per check and "N passed, N failed". */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/verbs/pmix.h"

static unsigned passed, failed;

static void check(uint32_t rank, int ok, const char *what)
{
  if (ok)
    passed++;
  else
    failed++;
  printf("%s rank %" PRIu32 ": %s\n", ok ? "PASS" : "FAIL", rank, what);
}

static size_t blob_len(uint32_t r)
{
  return 100 + 37 * (size_t)r;
}

static void blob(uint32_t r, uint8_t *p)
{
  for (size_t i = 0; i < blob_len(r); i++)
    p[i] = (uint8_t)(r * 31 + i);
}

int main(void)
{
  char err[512], key[32], host[256];
  struct vpmix *px;
  uint32_t me, n;
  if (!vpmix_launched()) {
    printf("FAIL: not started by a PMIx launcher (PMIX_NAMESPACE, PMIX_RANK)\n0 passed, 1 failed\n");
    return 1;
  }
  if (vpmix_init(&px, &me, &n, err, sizeof(err))) {
    printf("FAIL: %s\n0 passed, 1 failed\n", err);
    return 1;
  }
  uint8_t mine[4096], want[4096];
  blob(me, mine);
  int ok = vpmix_put(px, "t.blob", mine, blob_len(me), err, sizeof(err)) == 0;
  snprintf(key, sizeof(key), "t.to.%" PRIu32, (me + 1) % n);
  ok = ok && vpmix_put(px, key, &me, sizeof(me), err, sizeof(err)) == 0;
  if (ok && me == 0)
    ok = vpmix_put(px, "t.zero", "coordinator", 11, err, sizeof(err)) == 0;
  check(me, ok, ok ? "put" : err);
  ok = vpmix_fence(px, 30000000000ull, err, sizeof(err)) == 0;
  check(me, ok, ok ? "fence" : err);
  struct boot_buf g = {0};
  for (uint32_t j = 0; j < n; j++) {
    blob(j, want);
    int k = vpmix_get(px, j, "t.blob", &g, sizeof(want), err, sizeof(err));
    check(me, k == 1 && g.len == blob_len(j) && !memcmp(g.p, want, g.len),
          k < 0 ? err : "every rank's blob, its size and bytes");
    snprintf(key, sizeof(key), "t.to.%" PRIu32, me);
    k = vpmix_get(px, j, key, &g, sizeof(uint32_t), err, sizeof(err));
    if (n > 2 && j != (me + n - 1) % n)
      check(me, k == 0, k < 0 ? err : "no per-peer key from a rank that did not put one");
    else if (j != me)
      check(me, k == 1 && g.len == 4 && !memcmp(g.p, &j, 4),
            k < 0 ? err : "the predecessor's per-peer key");
    ok = vpmix_hostname(px, j, host, sizeof(host), err, sizeof(err)) == 0 && host[0];
    check(me, ok, ok ? "every rank's host name" : err);
  }
  int k = vpmix_get(px, 0, "t.zero", &g, 64, err, sizeof(err));
  check(me, k == 1 && g.len == 11 && !memcmp(g.p, "coordinator", 11),
        k < 0 ? err : "rank 0's own key");
  k = vpmix_get(px, 0, "t.blob", &g, 10, err, sizeof(err));
  check(me, k == -1 && strstr(err, "at most 10 expected"), "a value over the bound is refused");
  boot_buf_free(&g);
  vpmix_finalize(px);
  printf("%u passed, %u failed\n", passed, failed);
  return failed ? 1 : 0;
}
