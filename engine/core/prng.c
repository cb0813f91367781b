#include <math.h>

#include "prepost/prng.h"

static uint64_t splitmix64(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void pp_prng_seed(struct pp_prng *r, uint64_t seed)
{
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

uint64_t pp_prng_next(struct pp_prng *r)
{
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t pp_prng_below(struct pp_prng *r, uint64_t bound)
{
  if (bound == 0)
    return 0;
  uint64_t threshold = -bound % bound;
  for (;;) {
    uint64_t x = pp_prng_next(r);
    if (x >= threshold)
      return x % bound;
  }
}

double pp_prng_unit(struct pp_prng *r)
{
  return (double)(pp_prng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t pp_prng_range(struct pp_prng *r, uint64_t lo, uint64_t hi)
{
  return hi <= lo ? lo : lo + pp_prng_below(r, hi - lo + 1);
}

uint64_t pp_prng_log_range(struct pp_prng *r, uint64_t lo, uint64_t hi)
{
  if (hi <= lo)
    return lo;
  double a = log((double)lo), b = log((double)hi);
  uint64_t x = (uint64_t)llround(exp(a + (b - a) * pp_prng_unit(r)));
  return x < lo ? lo : x > hi ? hi : x;
}

bool pp_prng_chance(struct pp_prng *r, double p)
{
  return pp_prng_unit(r) < p;
}

static uint64_t fmix(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t pp_seed_derive(uint64_t seed, enum pp_seed_domain domain, uint32_t rank)
{
  uint64_t z = fmix(seed + 0x9e3779b97f4a7c15ull);
  z = fmix(z ^ (((uint64_t)domain + 1) * 0xc2b2ae3d27d4eb4full));
  return fmix(z ^ (((uint64_t)rank + 1) * 0x165667b19e3779f9ull));
}

static const char *const domain_names[] = {
#define PP_X(id, name, desc) name,
    PP_SEED_DOMAIN_LIST(PP_X)
#undef PP_X
};

const char *pp_seed_domain_name(enum pp_seed_domain d)
{
  return (unsigned)d < PP_SEED_DOMAIN_COUNT ? domain_names[d] : "?";
}
