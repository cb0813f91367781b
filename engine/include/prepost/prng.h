/* Seeded pseudo-random numbers (xoshiro256**, seeded through splitmix64). The only source of
 * randomness in prepost: the same seed gives the same sequence on every machine. */
#ifndef PP_PRNG_H
#define PP_PRNG_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

struct pp_prng {
  uint64_t s[4];
};

void pp_prng_seed(struct pp_prng *r, uint64_t seed);
uint64_t pp_prng_next(struct pp_prng *r);
/* Uniform in [0, bound) without modulo bias; 0 when bound is 0. */
uint64_t pp_prng_below(struct pp_prng *r, uint64_t bound);
/* Uniform double in [0, 1). */
double pp_prng_unit(struct pp_prng *r);
/* Uniform in [lo, hi]; lo when hi <= lo (no draw then). */
uint64_t pp_prng_range(struct pp_prng *r, uint64_t lo, uint64_t hi);
/* Log-uniform in [lo, hi] (1 <= lo): small values as often as large ones; lo when hi <= lo. */
uint64_t pp_prng_log_range(struct pp_prng *r, uint64_t lo, uint64_t hi);
/* True with probability p. */
bool pp_prng_chance(struct pp_prng *r, double p);

/* Seed derivation: every seeded stream of prepost is seeded with pp_seed_derive(seed, domain,
 * rank), from the one seed of a run (the scenario's `seed`, pp_engine_cfg.seed). A domain is
 * what the stream decides; rank the rank it belongs to (0 for a stream of the whole run, or the
 * stream's own index where a domain says so). The result is a hash of the three (SplitMix64's
 * finalizer, applied to each in turn): nearby seeds, domains and ranks give unrelated streams,
 * the same three the same stream on every machine. X(id, name, what the stream decides) */
#define PP_SEED_DOMAIN_LIST(X)                                                                    \
  X(ENGINE, "engine", "an engine's PRNG (pp_engine_prng: the protocols' and workloads' draws)")   \
  X(P2P, "p2p", "the p2p protocols' request-handle nonce and first sequence number")              \
  X(TRAFFIC_SIZE, "traffic-size", "the traffic workload's message sizes (rank: the source)")       \
  X(TRAFFIC_TAG, "traffic-tag", "the traffic workload's message tags (rank: the source)")          \
  X(TRAFFIC_MIXED, "traffic-mixed",                                                               \
    "the traffic workload's choice of any-tag receives in mixed mode (rank: the source)")         \
  X(COLLECTIVE, "collective", "the collective workload's element values (rank: the source)")      \
  X(LOSS, "loss", "the simulated fabric's packet loss")                                            \
  X(NIC_FAULTS, "nic-faults", "the simulated fabric's jitter and scrambled placement")            \
  X(DRIVER, "driver", "the simulation driver's per-rank delays (completions polled late)")        \
  X(BYZANTINE, "byzantine", "the lying rank's choices of what to change on the wire")            \
  X(EXPLORE, "explore", "prepost explore's seed -> scenario generator")

enum pp_seed_domain {
#define PP_X(id, name, desc) PP_SEED_##id,
  PP_SEED_DOMAIN_LIST(PP_X)
#undef PP_X
  PP_SEED_DOMAIN_COUNT
};

uint64_t pp_seed_derive(uint64_t seed, enum pp_seed_domain domain, uint32_t rank);
/* "engine", ...; "?" when unknown. */
const char *pp_seed_domain_name(enum pp_seed_domain d);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
