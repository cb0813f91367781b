/*
 * p2p_match: the cost of MPI matching (engine/proto/p2p/match.c) against the number of posted receives.
 *
 *   p2p_match [--matches M] [POSTED ...]        default: 2000000 matches; 10 100 1000 10000
 *
 * For each queue length N: N receives with distinct (source, tag) are posted, then N messages
 * arrive in a shuffled order, each taking its receive out of the queue; repeated until about
 * M matches were timed (a small M for valgrind). Prints one line per N:
 *
 *   p2p_match posted=N exact_ns=X wild_ns=Y list_ns=Z
 *
 * exact_ns: post + match of one receive with the hashed queues (source and tag given);
 * wild_ns: the same when every receive is ANY_SOURCE (one sub-queue, always its head);
 * list_ns: a plain linked list scanned from the head, as a naive implementation would, for
 * comparison (skipped above 10000).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/proto/p2p/match.h"

static double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)rng;
}

struct lnode {
  struct lnode *next;
  uint32_t src, tag;
};

int main(int argc, char **argv)
{
  uint32_t sizes[16] = {10, 100, 1000, 10000};
  int nsizes = 4, first = 1;
  uint32_t matches = 2000000;
  if (argc > 2 && !strcmp(argv[1], "--matches")) {
    matches = (uint32_t)strtoul(argv[2], NULL, 10);
    first = 3;
  }
  if (argc > first) {
    nsizes = 0;
    for (int i = first; i < argc && nsizes < 16; i++)
      sizes[nsizes++] = (uint32_t)strtoul(argv[i], NULL, 10);
  }
  for (int si = 0; si < nsizes; si++) {
    uint32_t n = sizes[si];
    if (n == 0)
      continue;
    struct pp_match m;
    struct pp_mentry *e = calloc(n, sizeof(*e));
    uint32_t *order = calloc(n, sizeof(*order));
    struct lnode *ln = calloc(n, sizeof(*ln));
    if (!e || !order || !ln || pp_match_init(&m, n, 16) != PP_OK) {
      fprintf(stderr, "p2p_match: out of memory\n");
      return 1;
    }
    for (uint32_t i = 0; i < n; i++)
      order[i] = i;
    for (uint32_t i = n; i > 1; i--) {
      uint32_t j = next_u32() % i, t = order[i - 1];
      order[i - 1] = order[j];
      order[j] = t;
    }
    uint32_t rounds = (matches + n - 1) / n;
    uint64_t bad = 0;
    double t0 = now_ns();
    for (uint32_t r = 0; r < rounds; r++) {
      for (uint32_t i = 0; i < n; i++)
        pp_match_post(&m, &e[i], 0, i % 64, i);
      for (uint32_t i = 0; i < n; i++) {
        uint32_t k = order[i];
        bad += pp_match_arrive(&m, 0, k % 64, k) != &e[k];
      }
    }
    double exact = (now_ns() - t0) / ((double)rounds * n);
    t0 = now_ns();
    for (uint32_t r = 0; r < rounds; r++) {
      for (uint32_t i = 0; i < n; i++)
        pp_match_post(&m, &e[i], 0, PP_ANY_SOURCE, i);
      for (uint32_t i = 0; i < n; i++)
        bad += pp_match_arrive(&m, 0, order[i] % 64, order[i]) != &e[order[i]];
    }
    double wild = (now_ns() - t0) / ((double)rounds * n);
    double list = -1;
    if (n <= 10000) {
      uint32_t lrounds = rounds / (n / 10 + 1) + 1;
      t0 = now_ns();
      for (uint32_t r = 0; r < lrounds; r++) {
        struct lnode *head = NULL, **tail = &head;
        for (uint32_t i = 0; i < n; i++) {
          ln[i] = (struct lnode){NULL, i % 64, i};
          *tail = &ln[i];
          tail = &ln[i].next;
        }
        for (uint32_t i = 0; i < n; i++) {
          uint32_t k = order[i];
          struct lnode **p = &head;
          while (*p && !((*p)->src == k % 64 && (*p)->tag == k))
            p = &(*p)->next;
          bad += *p != &ln[k];
          if (*p)
            *p = (*p)->next;
        }
      }
      list = (now_ns() - t0) / ((double)lrounds * n);
    }
    if (bad) {
      fprintf(stderr, "p2p_match: %llu wrong matches\n", (unsigned long long)bad);
      return 1;
    }
    printf("p2p_match posted=%u exact_ns=%.1f wild_ns=%.1f list_ns=%.1f\n", n, exact, wild, list);
    pp_match_fini(&m);
    free(e);
    free(order);
    free(ln);
  }
  return 0;
}
