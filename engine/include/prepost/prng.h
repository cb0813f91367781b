/* Seeded pseudo-random numbers (xoshiro256**, seeded through splitmix64). The only source of
 * randomness in prepost: the same seed gives the same sequence on every machine. */
#ifndef PP_PRNG_H
#define PP_PRNG_H

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

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
