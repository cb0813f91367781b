/* Field tables and the one set of value parsers (prepost/param.h). */
#include "prepost/param.h"

#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "prepost/names.h"

static const char *const kind_names[] = {
#define PP_X(id, name) [PP_PARAM_##id] = name,
    PP_PARAM_KIND_LIST(PP_X)
#undef PP_X
};

const char *pp_param_kind_name(enum pp_param_kind k)
{
  return pp_name_of(kind_names, PP_PARAM_KIND_COUNT, k);
}

/* [-]digits[.digits][ ]*[letters], blanks around: the shape of integers, sizes and durations. */
struct num {
  bool neg, ovf, dot;
  uint64_t ip; /* integer part (valid unless ovf) */
  const char *frac;
  size_t nfrac;
  const char *unit;
  size_t nunit;
};

static bool is_digit(char ch)
{
  return ch >= '0' && ch <= '9';
}

static bool is_alpha(char ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static void trim(const char **s, size_t *len)
{
  while (*len && (**s == ' ' || **s == '\t')) {
    (*s)++;
    (*len)--;
  }
  while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
    (*len)--;
}

static bool parse_num(const char *s, size_t len, struct num *o)
{
  memset(o, 0, sizeof *o);
  trim(&s, &len);
  size_t i = 0;
  if (i < len && (s[i] == '+' || s[i] == '-'))
    o->neg = s[i++] == '-';
  size_t start = i;
  for (; i < len && is_digit(s[i]); i++) {
    unsigned d = (unsigned)(s[i] - '0');
    if (o->ip > (UINT64_MAX - d) / 10)
      o->ovf = true;
    else
      o->ip = o->ip * 10 + d;
  }
  if (i == start)
    return false;
  if (i < len && s[i] == '.') {
    o->dot = true;
    o->frac = s + ++i;
    while (i < len && is_digit(s[i]))
      i++;
    o->nfrac = (size_t)(s + i - o->frac);
    if (!o->nfrac)
      return false;
  }
  while (i < len && s[i] == ' ')
    i++;
  o->unit = s + i;
  o->nunit = len - i;
  for (; i < len; i++)
    if (!is_alpha(s[i]))
      return false;
  return true;
}

static bool unit_is(const struct num *n, const char *u)
{
  size_t l = strlen(u);
  return n->nunit == l && memcmp(n->unit, u, l) == 0;
}

static bool frac_is_zero(const struct num *n)
{
  for (size_t i = 0; i < n->nfrac; i++)
    if (n->frac[i] != '0')
      return false;
  return true;
}

#define WHY(st, ...)                                                           \
  do {                                                                         \
    if (why && whylen)                                                         \
      snprintf(why, whylen, __VA_ARGS__);                                      \
    return (st);                                                               \
  } while (0)

enum pp_status pp_parse_uint(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out,
                             char *why, size_t whylen)
{
  struct num n;
  if (!parse_num(s, len, &n) || n.dot || n.nunit)
    WHY(PP_PARSE, "must be an integer %" PRIu64 "..%" PRIu64, lo, hi);
  if (n.ovf || (n.neg && n.ip) || n.ip < lo || n.ip > hi)
    WHY(PP_INVALID, "must be an integer %" PRIu64 "..%" PRIu64, lo, hi);
  *out = n.ip;
  return PP_OK;
}

static const struct unit {
  const char *name;
  uint64_t mult;
} size_units[] = {{"B", 1},           {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
                  {"GiB", 1ull << 30}, {"TiB", 1ull << 40}, {"KB", 1000},
                  {"MB", 1000000},     {"GB", 1000000000},  {"TB", 1000000000000ull}},
  /* min and h for wall-clock bounds on the command line; the canonical text uses ns..s */
  time_units[] = {{"ns", 1},          {"us", 1000},          {"ms", 1000000},
                  {"s", 1000000000}, {"min", 60000000000ull}, {"h", 3600000000000ull}};
#define FORMAT_TIME_UNITS 4 /* ns, us, ms, s */

static const struct unit *find_unit(const struct num *n, const struct unit *u, size_t count)
{
  for (size_t i = 0; i < count; i++)
    if (unit_is(n, u[i].name))
      return &u[i];
  return NULL;
}

enum pp_status pp_parse_size(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out,
                             char *why, size_t whylen)
{
  struct num n;
  uint64_t mult = 1;
  if (!parse_num(s, len, &n) || n.nfrac > 9)
    goto bad;
  if (n.nunit) {
    const struct unit *u = find_unit(&n, size_units, sizeof size_units / sizeof size_units[0]);
    if (!u)
      goto bad;
    mult = u->mult;
  }
  uint64_t f = 0, p10 = 1;
  for (size_t i = 0; i < n.nfrac; i++) {
    f = f * 10 + (uint64_t)(n.frac[i] - '0');
    p10 *= 10;
  }
  /* f < 10^9 and mult <= 2^40 could overflow: split the product */
  if (f && mult > UINT64_MAX / f)
    WHY(PP_INVALID, "must be a size %" PRIu64 "..%" PRIu64 " bytes", lo, hi);
  if ((f * mult) % p10)
    WHY(PP_INVALID, "must be a whole number of bytes");
  uint64_t frac_b = f * mult / p10;
  if (n.ovf || (n.neg && (n.ip || f)) || n.ip > (UINT64_MAX - frac_b) / mult ||
      n.ip * mult + frac_b < lo || n.ip * mult + frac_b > hi)
    WHY(PP_INVALID, "must be a size %" PRIu64 "..%" PRIu64 " bytes", lo, hi);
  *out = n.ip * mult + frac_b;
  return PP_OK;
bad:
  WHY(PP_PARSE, "must be a size such as 4096, 64B, 4KiB, 1MiB or 1GB");
}

enum pp_status pp_parse_duration(const char *s, size_t len, uint64_t lo, uint64_t hi,
                                 uint64_t *out, char *why, size_t whylen)
{
  struct num n;
  uint64_t mult = 1;
  unsigned digits = 0; /* mult = 10^digits */
  if (!parse_num(s, len, &n))
    goto bad;
  if (n.nunit) {
    const struct unit *u = find_unit(&n, time_units, sizeof time_units / sizeof time_units[0]);
    if (!u)
      goto bad;
    mult = u->mult;
    for (uint64_t m = mult; m > 1; m /= 10)
      digits++;
  } else if (n.dot) {
    goto bad; /* fractions need a unit */
  }
  /* Fraction: keep digits+1 decimals; the first dropped one decides half-up rounding. */
  size_t k = n.nfrac < digits + 1 ? n.nfrac : digits + 1;
  uint64_t f = 0, frac_ns, p10 = 1;
  for (size_t i = 0; i < k; i++)
    f = f * 10 + (uint64_t)(n.frac[i] - '0');
  bool decimal = true; /* mult = 10^digits; min and h are 6 * 10^10 and 36 * 10^11 */
  for (uint64_t m = mult; m > 1 && decimal; m /= 10)
    decimal = m % 10 == 0;
  if (!decimal) { /* at most 9 decimals: f * (mult / 10^k) is exact and below mult */
    if (n.nfrac > 9)
      goto bad;
    for (size_t i = 0; i < k; i++)
      p10 *= 10;
    frac_ns = f * (mult / p10);
  } else if (k <= digits) {
    frac_ns = f;
    for (size_t i = k; i < digits; i++)
      frac_ns *= 10;
  } else {
    frac_ns = (f + 5) / 10;
  }
  if (n.neg && (n.ip || !frac_is_zero(&n)))
    WHY(PP_INVALID, "must not be negative");
  if (n.ovf || n.ip > (UINT64_MAX - frac_ns) / mult)
    WHY(PP_INVALID, "must be at most %" PRIu64 " ns", hi);
  uint64_t v = n.ip * mult + frac_ns;
  if (v < lo || v > hi) {
    char a[32], b[32];
    pp_format_duration(lo, a, sizeof a);
    pp_format_duration(hi, b, sizeof b);
    WHY(PP_INVALID, "must be a duration %s..%s", a, b);
  }
  *out = v;
  return PP_OK;
bad:
  WHY(PP_PARSE, "must be a duration such as 500ns, 2us, 1.5ms or 10s (a bare integer is ns)");
}

enum pp_status pp_parse_bool(const char *s, size_t len, bool *out, char *why, size_t whylen)
{
  static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no",
                                                                                "off", "0"};
  trim(&s, &len);
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strlen(yes[i]) == len && memcmp(s, yes[i], len) == 0) {
      *out = true;
      return PP_OK;
    }
    if (strlen(no[i]) == len && memcmp(s, no[i], len) == 0) {
      *out = false;
      return PP_OK;
    }
  }
  WHY(PP_PARSE, "must be true or false");
}

/* strtod and printf follow LC_NUMERIC: in a program that set a locale with a decimal comma
 * (setlocale(LC_ALL, "") under de_DE, say) strtod stops at '.' and printf writes ','. prepost's
 * texts always use '.', so the two conversions go through these: c_to_locale copies text
 * [s, s + len) into buf (cap bytes, NUL-terminated) with each '.' as the current locale's
 * decimal point (false when it does not fit); locale_to_c turns that point back into '.'. */
static const char *locale_point(void)
{
  const char *pt = localeconv()->decimal_point;
  return pt && *pt ? pt : ".";
}

static bool c_to_locale(const char *s, size_t len, char *buf, size_t cap)
{
  const char *pt = locale_point();
  size_t np = strlen(pt), o = 0;
  for (size_t i = 0; i < len; i++) {
    const char *from = s[i] == '.' ? pt : s + i;
    size_t n = s[i] == '.' ? np : 1;
    if (o + n >= cap)
      return false;
    memcpy(buf + o, from, n);
    o += n;
  }
  buf[o] = '\0';
  return true;
}

/* %.17g of x with '.' as its point, snprintf-like into buf */
static int format_double(double x, char *buf, size_t len)
{
  char tmp[64];
  int w = snprintf(tmp, sizeof tmp, "%.17g", x);
  if (w < 0 || (size_t)w >= sizeof tmp)
    return -1;
  const char *pt = locale_point();
  char *at = strcmp(pt, ".") ? strstr(tmp, pt) : NULL;
  if (at) {
    size_t np = strlen(pt);
    *at = '.';
    memmove(at + 1, at + np, strlen(at + np) + 1);
  }
  return snprintf(buf, len, "%s", tmp);
}

/* [+]digits[.digits][e[+-]digits] or .digits...: strtod on a copy restricted to that alphabet
 * (no hex, inf, nan or locale-dependent forms). */
enum pp_status pp_parse_prob(const char *s, size_t len, double hi, double *out, char *why,
                             size_t whylen)
{
  char buf[64], *end = NULL;
  const char *range = hi < 1.0 ? "0 <= p < 1" : "0 <= p <= 1";
  trim(&s, &len);
  if (len == 0 || len >= sizeof buf)
    WHY(PP_PARSE, "must be a number %s", range);
  for (size_t i = 0; i < len; i++)
    if (!is_digit(s[i]) && s[i] != '.' && s[i] != 'e' && s[i] != 'E' && s[i] != '+' &&
        s[i] != '-')
      WHY(PP_PARSE, "must be a number %s", range);
  if (!c_to_locale(s, len, buf, sizeof buf))
    WHY(PP_PARSE, "must be a number %s", range);
  double x = strtod(buf, &end);
  if (end != buf + strlen(buf))
    WHY(PP_PARSE, "must be a number %s", range);
  if (!isfinite(x) || !(x >= 0 && x <= hi))
    WHY(PP_INVALID, "must be a number %s", range);
  *out = x;
  return PP_OK;
}

enum pp_status pp_parse_ranks(const char *s, size_t len, uint32_t ranks, uint64_t *out,
                              char *why, size_t whylen)
{
  uint64_t hi = (ranks < 64 ? ranks : 64) - 1, m = 0, x;
  trim(&s, &len);
  if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
    s++;
    len -= 2;
  }
  if (ranks == 0)
    WHY(PP_INVALID, "must be a list of ranks, but there are none");
  trim(&s, &len);
  if (len == 0)
    WHY(PP_INVALID, "must list at least one rank");
  while (len) {
    size_t n = 0;
    while (n < len && s[n] != ',')
      n++;
    enum pp_status st = pp_parse_uint(s, n, 0, hi, &x, NULL, 0);
    if (st != PP_OK)
      WHY(st, "must be a list of ranks 0..%" PRIu64 " such as [1, 3]", hi);
    m |= 1ull << x;
    if (n == len)
      break;
    s += n + 1;
    len -= n + 1;
    if (len == 0)
      WHY(PP_PARSE, "must be a list of ranks 0..%" PRIu64 " such as [1, 3]", hi);
  }
  *out = m;
  return PP_OK;
}

/* [+-]digits[.digits][(e|E)[+-]digits][ ]*[letters], blanks around: a bandwidth's number (the
 * exponent only when digits follow it) as a double, and its unit. */
static bool parse_real(const char *s, size_t len, double *val, const char **unit, size_t *nunit)
{
  char buf[64];
  trim(&s, &len);
  size_t i = 0;
  if (i < len && (s[i] == '+' || s[i] == '-'))
    i++;
  size_t d0 = i;
  while (i < len && is_digit(s[i]))
    i++;
  if (i == d0)
    return false;
  if (i < len && s[i] == '.') {
    size_t f0 = ++i;
    while (i < len && is_digit(s[i]))
      i++;
    if (i == f0)
      return false;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < len && (s[j] == '+' || s[j] == '-'))
      j++;
    if (j < len && is_digit(s[j])) {
      while (j < len && is_digit(s[j]))
        j++;
      i = j;
    }
  }
  char *end = NULL;
  if (!c_to_locale(s, i, buf, sizeof buf))
    return false;
  *val = strtod(buf, &end);
  if (end != buf + strlen(buf))
    return false;
  while (i < len && s[i] == ' ')
    i++;
  *unit = s + i;
  *nunit = len - i;
  for (; i < len; i++)
    if (!is_alpha(s[i]))
      return false;
  return true;
}

/* Bits per second of each unit; the first FORMAT_BW_UNITS (bits, increasing) are the canonical
 * text's. */
static const struct bw_unit {
  const char *name;
  double mult;
} bw_units[] = {{"bps", 1},     {"kbps", 1e3},  {"Mbps", 1e6},  {"Gbps", 1e9},  {"Tbps", 1e12},
                {"Kbps", 1e3},  {"Bps", 8},     {"kBps", 8e3},  {"KBps", 8e3},  {"MBps", 8e6},
                {"GBps", 8e9},  {"TBps", 8e12}};
#define FORMAT_BW_UNITS 5

size_t pp_format_bandwidth(double bps, char *buf, size_t len)
{
  int w = -1;
  for (size_t i = FORMAT_BW_UNITS; i-- > 0 && w < 0;) {
    double q = bps / bw_units[i].mult;
    /* a whole number the parser multiplies back to exactly bps */
    if (isfinite(q) && q >= 1 && q < 9007199254740992.0 && q == floor(q) &&
        q * bw_units[i].mult == bps)
      w = snprintf(buf, len, "%.0f%s", q, bw_units[i].name);
  }
  if (w < 0)
    w = format_double(bps, buf, len);
  return w < 0 ? 0 : (size_t)w;
}

enum pp_status pp_parse_bandwidth(const char *s, size_t len, double lo, double hi, double *out,
                                  char *why, size_t whylen)
{
  double x, mult = 1;
  const char *unit;
  size_t nunit;
  if (!parse_real(s, len, &x, &unit, &nunit))
    goto bad;
  if (nunit) {
    size_t i = 0, n = sizeof bw_units / sizeof bw_units[0];
    while (i < n && !(strlen(bw_units[i].name) == nunit && !memcmp(bw_units[i].name, unit, nunit)))
      i++;
    if (i == n)
      goto bad;
    mult = bw_units[i].mult;
  }
  x *= mult;
  if (!isfinite(x) || !(x > 0) || x < lo || x > hi) {
    if (lo <= DBL_MIN && hi >= DBL_MAX)
      WHY(PP_INVALID, "must be a finite bandwidth > 0");
    char a[48], b[48];
    pp_format_bandwidth(lo, a, sizeof a);
    pp_format_bandwidth(hi, b, sizeof b);
    if (lo <= DBL_MIN)
      WHY(PP_INVALID, "must be a bandwidth > 0 and at most %s", b);
    WHY(PP_INVALID, "must be a bandwidth %s..%s", a, b);
  }
  *out = x;
  return PP_OK;
bad:
  WHY(PP_PARSE, "must be a bandwidth such as 100Gbps, 25GBps (bytes/s) or a bare number of "
                "bits/s");
}

static double bits_double(uint64_t b)
{
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static uint64_t double_bits(double d)
{
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}

/* The rank count a RANKS entry's max (a mask of ranks 0..k-1) allows. */
static uint32_t mask_ranks(uint64_t max)
{
  uint32_t k = 0;
  while (k < 64 && max >> k & 1)
    k++;
  return k;
}

static size_t format_ranks(uint64_t mask, char *buf, size_t len)
{
  size_t at = 0;
  int w = snprintf(buf, len, "[");
  at = w < 0 ? 0 : (size_t)w;
  for (int i = 0; i < 64; i++)
    if (mask >> i & 1) {
      w = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, "%s%d",
                   at > 1 ? ", " : "", i);
      at += w < 0 ? 0 : (size_t)w;
    }
  w = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0, "]");
  return at + (w < 0 ? 0 : (size_t)w);
}

static size_t format_units(uint64_t v, const struct unit *u, size_t count, char *buf, size_t len)
{
  /* the largest unit (among those of one base, listed in increasing order) that divides v */
  const struct unit *best = &u[0];
  for (size_t i = 1; i < count && v; i++)
    if (u[i].mult > best->mult && v % u[i].mult == 0)
      best = &u[i];
  int w = snprintf(buf, len, "%" PRIu64 "%s", v / best->mult, best->name);
  return w < 0 ? 0 : (size_t)w;
}

size_t pp_format_size(uint64_t bytes, char *buf, size_t len)
{
  if (bytes < 1024 || bytes % 1024) { /* plain bytes read best below a KiB */
    int w = snprintf(buf, len, "%" PRIu64, bytes);
    return w < 0 ? 0 : (size_t)w;
  }
  return format_units(bytes, size_units, 5, buf, len); /* the binary ones */
}

size_t pp_format_duration(uint64_t ns, char *buf, size_t len)
{
  return format_units(ns, time_units, FORMAT_TIME_UNITS, buf, len);
}

/* ---------------------------------------------------------------------- field tables */

const struct pp_param *pp_param_find(const struct pp_param *t, size_t n, const char *key)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].key, key) == 0)
      return &t[i];
  return NULL;
}

uint64_t pp_param_get(const struct pp_param *p, const void *obj)
{
  if (p->kind == PP_PARAM_COMPOSITE)
    return 0; /* no member */
  const unsigned char *at = (const unsigned char *)obj + p->offset;
  switch (p->width) {
  case 1: {
    uint8_t v;
    memcpy(&v, at, 1);
    return v;
  }
  case 2: {
    uint16_t v;
    memcpy(&v, at, 2);
    return v;
  }
  case 4: {
    uint32_t v;
    memcpy(&v, at, 4);
    return v;
  }
  default: {
    assert(p->width == 8);
    uint64_t v;
    memcpy(&v, at, 8);
    return v;
  }
  }
}

void pp_param_put(const struct pp_param *p, void *obj, uint64_t v)
{
  if (p->kind == PP_PARAM_COMPOSITE)
    return; /* no member */
  unsigned char *at = (unsigned char *)obj + p->offset;
  uint8_t v8 = (uint8_t)v;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  switch (p->width) {
  case 1:
    memcpy(at, &v8, 1);
    break;
  case 2:
    memcpy(at, &v16, 2);
    break;
  case 4:
    memcpy(at, &v32, 4);
    break;
  default:
    assert(p->width == 8);
    memcpy(at, &v, 8);
    break;
  }
}

static enum pp_status set_enum(const struct pp_param *p, void *obj, const char *s, size_t len,
                               char *why, size_t whylen)
{
  trim(&s, &len);
  for (uint64_t i = p->min; i <= p->max; i++)
    if (strlen(p->names[i]) == len && memcmp(p->names[i], s, len) == 0) {
      pp_param_put(p, obj, i);
      return PP_OK;
    }
  size_t at = 0;
  if (why && whylen)
    at = (size_t)snprintf(why, whylen, "must be one of");
  for (uint64_t i = p->min; i <= p->max && why && at < whylen; i++)
    at += (size_t)snprintf(why + at, whylen - at, "%s %s", i == p->min ? "" : ",", p->names[i]);
  return PP_INVALID;
}

enum pp_status pp_param_set(const struct pp_param *p, void *obj, const char *text, size_t len,
                            char *why, size_t whylen)
{
  uint64_t v = 0;
  bool b;
  enum pp_status st;
  switch (p->kind) {
  case PP_PARAM_UINT:
    st = pp_parse_uint(text, len, p->min, p->max, &v, why, whylen);
    break;
  case PP_PARAM_SIZE:
    st = pp_parse_size(text, len, p->min, p->max, &v, why, whylen);
    break;
  case PP_PARAM_DURATION:
    st = pp_parse_duration(text, len, p->min, p->max, &v, why, whylen);
    break;
  case PP_PARAM_BOOL:
    b = false; /* read only when parsed: a refused text leaves it unset */
    st = pp_parse_bool(text, len, &b, why, whylen);
    v = st == PP_OK && b;
    break;
  case PP_PARAM_ENUM:
    return set_enum(p, obj, text, len, why, whylen);
  case PP_PARAM_PROB: {
    double d = 0;
    st = pp_parse_prob(text, len, bits_double(p->max), &d, why, whylen);
    v = double_bits(d);
    break;
  }
  case PP_PARAM_RANKS:
    st = pp_parse_ranks(text, len, mask_ranks(p->max), &v, why, whylen);
    break;
  case PP_PARAM_BANDWIDTH: {
    double d = 0;
    st = pp_parse_bandwidth(text, len, bits_double(p->min), bits_double(p->max), &d, why,
                            whylen);
    v = double_bits(d);
    break;
  }
  case PP_PARAM_COMPOSITE:
    WHY(PP_INVALID, "is not a single value (its section reads it)");
  default:
    WHY(PP_INVALID, "has an unknown kind %u", p->kind);
  }
  if (st == PP_OK)
    pp_param_put(p, obj, v);
  return st;
}

size_t pp_param_format(const struct pp_param *p, const void *obj, char *buf, size_t len)
{
  uint64_t v = pp_param_get(p, obj);
  int w;
  switch (p->kind) {
  case PP_PARAM_SIZE:
    return pp_format_size(v, buf, len);
  case PP_PARAM_DURATION:
    return pp_format_duration(v, buf, len);
  case PP_PARAM_BOOL:
    w = snprintf(buf, len, "%s", v ? "true" : "false");
    break;
  case PP_PARAM_ENUM:
    w = snprintf(buf, len, "%s", v >= p->min && v <= p->max ? p->names[v] : "?");
    break;
  case PP_PARAM_PROB:
    w = format_double(bits_double(v), buf, len);
    break;
  case PP_PARAM_RANKS:
    return format_ranks(v, buf, len);
  case PP_PARAM_BANDWIDTH:
    return pp_format_bandwidth(bits_double(v), buf, len);
  case PP_PARAM_COMPOSITE:
    w = snprintf(buf, len, "%s", "");
    break;
  default:
    w = snprintf(buf, len, "%" PRIu64, v);
    break;
  }
  return w < 0 ? 0 : (size_t)w;
}

size_t pp_param_format_default(const struct pp_param *p, char *buf, size_t len)
{
  if (p->flags & PP_PARAM_F_DERIVED && p->def == 0) {
    int w = snprintf(buf, len, "derived");
    return w < 0 ? 0 : (size_t)w;
  }
  struct pp_param one = *p;
  one.offset = 0;
  one.width = 8;
  return pp_param_format(&one, &p->def, buf, len);
}

struct pp_param pp_param_rank_bound(const struct pp_param *p, uint32_t ranks)
{
  struct pp_param b = *p;
  if (!(p->flags & PP_PARAM_F_RANK))
    return b;
  uint64_t top = ranks ? ranks - 1 : 0;
  if (p->kind == PP_PARAM_RANKS)
    b.max = ranks >= 64 ? UINT64_MAX : (1ull << ranks) - 1;
  else if (top < b.max)
    b.max = top;
  return b;
}

void pp_params_defaults(const struct pp_param *t, size_t n, void *obj)
{
  for (size_t i = 0; i < n; i++)
    pp_param_put(&t[i], obj, t[i].def);
}

enum pp_status pp_params_check(const struct pp_param *t, size_t n, const void *obj, char *err,
                               size_t errlen)
{
  for (size_t i = 0; i < n; i++) {
    uint64_t v = pp_param_get(&t[i], obj);
    if ((v >= t[i].min && v <= t[i].max) || (t[i].flags & PP_PARAM_F_DERIVED && v == 0))
      continue;
    char lo[320], hi[320], got[320];
    struct pp_param one = {.kind = t[i].kind == PP_PARAM_ENUM ? PP_PARAM_UINT : t[i].kind,
                           .width = 8};
    pp_param_format(&one, &t[i].min, lo, sizeof lo);
    pp_param_format(&one, &t[i].max, hi, sizeof hi);
    pp_param_format(&one, &v, got, sizeof got);
    snprintf(err, errlen, "%s must be %s..%s, got %s", t[i].key, lo, hi, got);
    return PP_INVALID;
  }
  return PP_OK;
}

bool pp_params_valid(const struct pp_param *t, size_t n, size_t obj_size, char *err,
                     size_t errlen)
{
  for (size_t i = 0; i < n; i++) {
    const struct pp_param *p = &t[i];
    uint64_t wmax = p->width == 8 ? UINT64_MAX : (1ull << (8 * p->width)) - 1;
    const char *bad = NULL;
    if (!p->key || !*p->key)
      bad = "has no key";
    else if (pp_param_find(t, i, p->key))
      bad = "is listed twice";
    else if (p->kind >= PP_PARAM_KIND_COUNT)
      bad = "has an unknown kind";
    else if (p->kind == PP_PARAM_COMPOSITE)
      bad = p->width || p->offset || p->min || p->max || p->def || p->flags
                ? "is a composite with a member or bounds"
                : NULL;
    else if (p->width != 1 && p->width != 2 && p->width != 4 && p->width != 8)
      bad = "has a width other than 1, 2, 4 or 8 bytes";
    else if ((p->kind == PP_PARAM_PROB || p->kind == PP_PARAM_BANDWIDTH) && p->width != 8)
      bad = "is a double but not 8 bytes wide";
    else if (p->kind == PP_PARAM_BANDWIDTH && (p->min == 0 || p->max > PP_PARAM_BW_MAX))
      bad = "is a bandwidth that may be 0 or not finite";
    else if ((size_t)p->offset + p->width > obj_size)
      bad = "lies outside the parameter struct";
    else if ((!(p->min <= p->def && p->def <= p->max) &&
              !(p->flags & PP_PARAM_F_DERIVED && p->def == 0)) ||
             p->max > wmax || p->min > p->max)
      bad = "needs min <= default <= max within its width";
    else if (p->kind == PP_PARAM_ENUM && !p->names)
      bad = "is an enum without names";
    if (bad) {
      snprintf(err, errlen, "parameter %zu (%s) %s", i, p->key ? p->key : "?", bad);
      return false;
    }
  }
  return true;
}
