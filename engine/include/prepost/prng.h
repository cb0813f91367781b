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

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
