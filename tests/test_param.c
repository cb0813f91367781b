/* engine/core/param: the one set of value parsers (durations, sizes, integers, bools) and the
 * field tables every module describes its parameters with (prepost/param.h). */
#define _POSIX_C_SOURCE 200809L /* newlocale, uselocale */
#include <criterion/criterion.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/param.h"

static enum pp_status dur(const char *s, uint64_t *v)
{
  return pp_parse_duration(s, strlen(s), 0, UINT64_MAX, v, NULL, 0);
}

static enum pp_status size(const char *s, uint64_t *v)
{
  return pp_parse_size(s, strlen(s), 0, UINT64_MAX, v, NULL, 0);
}

Test(param, durations_in_every_unit_rounded_half_up)
{
  uint64_t v;
  cr_assert_eq(dur("250ns", &v), PP_OK);
  cr_assert_eq(v, 250);
  cr_assert_eq(dur("2us", &v), PP_OK);
  cr_assert_eq(v, 2000);
  cr_assert_eq(dur(" 1.5ms ", &v), PP_OK);
  cr_assert_eq(v, 1500000);
  cr_assert_eq(dur("10s", &v), PP_OK);
  cr_assert_eq(v, 10000000000ull);
  cr_assert_eq(dur("3", &v), PP_OK, "a bare integer is nanoseconds");
  cr_assert_eq(v, 3);
  cr_assert_eq(dur("1.0005us", &v), PP_OK);
  cr_assert_eq(v, 1001, "half up");
  cr_assert_eq(dur("1.0004us", &v), PP_OK);
  cr_assert_eq(v, 1000);
  cr_assert_eq(dur("-0", &v), PP_OK);
  cr_assert_eq(v, 0);
}

Test(param, bad_durations_say_why)
{
  uint64_t v = 77;
  char why[160];
  cr_assert_eq(pp_parse_duration("3 weeks", 7, 0, UINT64_MAX, &v, why, sizeof why), PP_PARSE);
  cr_assert(strstr(why, "must be a duration such as 500ns"), "%s", why);
  cr_assert_eq(dur("1.5", &v), PP_PARSE, "a fraction needs a unit");
  cr_assert_eq(dur("-1ms", &v), PP_INVALID);
  cr_assert_eq(dur("99999999999999999999s", &v), PP_INVALID);
  cr_assert_eq(dur("ms", &v), PP_PARSE);
  cr_assert_eq(dur("", &v), PP_PARSE);
  cr_assert_eq(v, 77, "nothing stored on error");
  cr_assert_eq(pp_parse_duration("2ms", 3, 0, 1000000, &v, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must be a duration 0ns..1ms");
}

Test(param, sizes_binary_and_decimal)
{
  uint64_t v;
  cr_assert_eq(size("4096", &v), PP_OK);
  cr_assert_eq(v, 4096);
  cr_assert_eq(size("64B", &v), PP_OK);
  cr_assert_eq(v, 64);
  cr_assert_eq(size("4KiB", &v), PP_OK);
  cr_assert_eq(v, 4096);
  cr_assert_eq(size("1.5MiB", &v), PP_OK);
  cr_assert_eq(v, 1572864);
  cr_assert_eq(size("4KB", &v), PP_OK);
  cr_assert_eq(v, 4000);
  cr_assert_eq(size("1GB", &v), PP_OK);
  cr_assert_eq(v, 1000000000);
  cr_assert_eq(size("2TiB", &v), PP_OK);
  cr_assert_eq(v, 2ull << 40);
  cr_assert_eq(size("1.1B", &v), PP_INVALID, "not a whole number of bytes");
  cr_assert_eq(size("4kib", &v), PP_PARSE, "units are case-sensitive");
  cr_assert_eq(size("-4", &v), PP_INVALID);
  char why[160];
  cr_assert_eq(pp_parse_size("8KiB", 4, 16, 4096, &v, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must be a size 16..4096 bytes");
}

Test(param, integers_decimal)
{
  uint64_t v;
  char why[160];
  cr_assert_eq(pp_parse_uint(" 31 ", 4, 0, 100, &v, NULL, 0), PP_OK);
  cr_assert_eq(v, 31);
  cr_assert_eq(pp_parse_uint("0x1F", 4, 0, 100, &v, NULL, 0), PP_PARSE, "decimal only");
  cr_assert_eq(pp_parse_uint("18446744073709551615", 20, 0, UINT64_MAX, &v, NULL, 0), PP_OK);
  cr_assert_eq(v, UINT64_MAX);
  cr_assert_eq(pp_parse_uint("18446744073709551616", 20, 0, UINT64_MAX, &v, NULL, 0),
               PP_INVALID);
  cr_assert_eq(pp_parse_uint("7", 1, 8, 9, &v, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must be an integer 8..9");
  cr_assert_eq(pp_parse_uint("7k", 2, 0, 9, &v, NULL, 0), PP_PARSE);
  cr_assert_eq(pp_parse_uint("-1", 2, 0, 9, &v, NULL, 0), PP_INVALID);
}

Test(param, bools)
{
  bool b = false;
  cr_assert_eq(pp_parse_bool("yes", 3, &b, NULL, 0), PP_OK);
  cr_assert(b);
  cr_assert_eq(pp_parse_bool("off", 3, &b, NULL, 0), PP_OK);
  cr_assert(!b);
  cr_assert_eq(pp_parse_bool("maybe", 5, &b, NULL, 0), PP_PARSE);
}

Test(param, canonical_text_reads_back)
{
  static const uint64_t sizes[] = {0, 1, 1000, 1024, 1536, 65536, 1ull << 30, 3ull << 40, 4097};
  static const uint64_t durs[] = {0, 1, 999, 1000, 1500, 2000000, 3000000000ull, 1234567891};
  char buf[64];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    uint64_t v;
    pp_format_size(sizes[i], buf, sizeof buf);
    cr_assert_eq(size(buf, &v), PP_OK, "%s", buf);
    cr_assert_eq(v, sizes[i], "%s", buf);
  }
  for (size_t i = 0; i < sizeof durs / sizeof durs[0]; i++) {
    uint64_t v;
    pp_format_duration(durs[i], buf, sizeof buf);
    cr_assert_eq(dur(buf, &v), PP_OK, "%s", buf);
    cr_assert_eq(v, durs[i], "%s", buf);
  }
  pp_format_size(65536, buf, sizeof buf);
  cr_assert_str_eq(buf, "64KiB");
  pp_format_duration(1500, buf, sizeof buf);
  cr_assert_str_eq(buf, "1500ns");
  pp_format_duration(2000000, buf, sizeof buf);
  cr_assert_str_eq(buf, "2ms");
}

/* A module's parameters as a plug-in would describe them. */
enum mode { MODE_FAST, MODE_SAFE, MODE_COUNT };
static const char *const mode_names[] = {"fast", "safe"};
struct toy {
  uint8_t small;
  uint32_t window;
  uint64_t hold_ns;
  uint32_t chunk;
  bool check;
  uint32_t mode;
};
static const struct pp_param toy_params[] = {
    PP_PARAM_UINT(struct toy, small, 1, 200, 7, "a byte"),
    PP_PARAM_UINT(struct toy, window, 1, 64, 4, "messages in flight"),
    PP_PARAM_DURATION(struct toy, hold_ns, 0, 1000000000, 1000, "how long"),
    PP_PARAM_SIZE(struct toy, chunk, 16, 1u << 20, 4096, "bytes per chunk"),
    PP_PARAM_BOOL(struct toy, check, 1, "check every byte"),
    PP_PARAM_ENUM(struct toy, mode, mode_names, MODE_COUNT, MODE_SAFE, "what to favour"),
};
#define NTOY (sizeof toy_params / sizeof toy_params[0])

Test(param, table_defaults_set_format_check)
{
  struct toy t;
  char err[200], buf[64];
  memset(&t, 0xff, sizeof t);
  cr_assert(pp_params_valid(toy_params, NTOY, sizeof t, err, sizeof err), "%s", err);
  pp_params_defaults(toy_params, NTOY, &t);
  cr_assert_eq(t.small, 7);
  cr_assert_eq(t.window, 4);
  cr_assert_eq(t.hold_ns, 1000);
  cr_assert_eq(t.chunk, 4096);
  cr_assert(t.check);
  cr_assert_eq(t.mode, MODE_SAFE);
  cr_assert_eq(pp_params_check(toy_params, NTOY, &t, err, sizeof err), PP_OK);

  const struct pp_param *p = pp_param_find(toy_params, NTOY, "hold_ns");
  cr_assert_not_null(p);
  cr_assert_null(pp_param_find(toy_params, NTOY, "hold"));
  cr_assert_eq(pp_param_set(p, &t, "2.5ms", 5, err, sizeof err), PP_OK);
  cr_assert_eq(t.hold_ns, 2500000);
  pp_param_format(p, &t, buf, sizeof buf);
  cr_assert_str_eq(buf, "2500us");
  cr_assert_eq(pp_param_set(p, &t, "2s", 2, err, sizeof err), PP_INVALID);
  cr_assert_eq(t.hold_ns, 2500000, "unchanged");

  p = pp_param_find(toy_params, NTOY, "mode");
  cr_assert_eq(pp_param_set(p, &t, "fast", 4, err, sizeof err), PP_OK);
  cr_assert_eq(t.mode, MODE_FAST);
  cr_assert_eq(pp_param_set(p, &t, "slow", 4, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be one of fast, safe");
  pp_param_format(p, &t, buf, sizeof buf);
  cr_assert_str_eq(buf, "fast");

  p = pp_param_find(toy_params, NTOY, "small");
  cr_assert_eq(pp_param_set(p, &t, "201", 3, err, sizeof err), PP_INVALID);
  cr_assert_eq(pp_param_set(p, &t, "200", 3, err, sizeof err), PP_OK);
  cr_assert_eq(t.small, 200);
  cr_assert_eq(t.window, 4, "the neighbour untouched");

  t.window = 65;
  cr_assert_eq(pp_params_check(toy_params, NTOY, &t, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "window must be 1..64, got 65");
}

Test(param, malformed_tables_are_refused)
{
  char err[200];
  struct pp_param t[2] = {PP_PARAM_UINT(struct toy, window, 1, 64, 4, "a"),
                          PP_PARAM_UINT(struct toy, window, 1, 64, 4, "b")};
  cr_assert(!pp_params_valid(t, 2, sizeof(struct toy), err, sizeof err));
  cr_assert(strstr(err, "listed twice"), "%s", err);
  t[1] = (struct pp_param)PP_PARAM_UINT(struct toy, small, 1, 300, 4, "b");
  cr_assert(!pp_params_valid(t, 2, sizeof(struct toy), err, sizeof err), "300 > a byte");
  t[1] = (struct pp_param)PP_PARAM_UINT(struct toy, small, 5, 9, 4, "b");
  cr_assert(!pp_params_valid(t, 2, sizeof(struct toy), err, sizeof err), "default below min");
  cr_assert(!pp_params_valid(t, 1, 2, err, sizeof err), "outside the struct");
  cr_assert(strstr(err, "outside"), "%s", err);
}

/* Probabilities: a double member, its bounds as the double's bits (1.0, or the largest double
 * below 1 for "p < 1"); canonical text %.17g, read back exactly. */
struct chance {
  double p, q;
  uint64_t ranks;
  uint32_t who;
};
static const struct pp_param chance_params[] = {
    PP_PARAM_PROB_KEYED("p", struct chance, p, PP_PARAM_PROB_BELOW_ONE, "below one"),
    PP_PARAM_PROB_KEYED("q", struct chance, q, PP_PARAM_PROB_ONE, "up to one"),
    PP_PARAM_RANKS_KEYED("ranks", struct chance, ranks, "a set"),
    PP_PARAM_KEYED("who", struct chance, who, PP_PARAM_UINT, 0, UINT32_MAX, 0, "a rank", NULL,
                   PP_PARAM_F_RANK),
};
#define NCHANCE (sizeof chance_params / sizeof chance_params[0])

Test(param, probabilities)
{
  struct chance c;
  char err[200], buf[400];
  cr_assert(pp_params_valid(chance_params, NCHANCE, sizeof c, err, sizeof err), "%s", err);
  memset(&c, 0xff, sizeof c);
  pp_params_defaults(chance_params, NCHANCE, &c);
  cr_assert(c.p == 0.0 && c.q == 0.0 && c.ranks == 0 && c.who == 0);
  const struct pp_param *p = &chance_params[0], *q = &chance_params[1];
  cr_assert_eq(pp_param_set(p, &c, " 1e-3 ", 6, err, sizeof err), PP_OK);
  cr_assert(c.p == 1e-3);
  pp_param_format(p, &c, buf, sizeof buf);
  struct chance back = {0};
  cr_assert_eq(pp_param_set(p, &back, buf, strlen(buf), err, sizeof err), PP_OK);
  cr_assert(back.p == c.p, "%s reads back", buf);
  cr_assert_eq(pp_param_set(p, &c, "1", 1, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be a number 0 <= p < 1");
  cr_assert_eq(pp_param_set(q, &c, "1.0", 3, err, sizeof err), PP_OK);
  cr_assert(c.q == 1.0);
  cr_assert_eq(pp_param_set(q, &c, "1.5", 3, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be a number 0 <= p <= 1");
  cr_assert_eq(pp_param_set(q, &c, "-0", 2, err, sizeof err), PP_OK, "-0 == 0");
  const char *bad[] = {"nan", "inf", "0x1p-3", "", "1%", "0.5.5", "-0.1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_assert_neq(pp_param_set(q, &c, bad[i], strlen(bad[i]), NULL, 0), PP_OK, "%s", bad[i]);
  cr_assert_eq(pp_param_set(p, &c, "-0.1", 4, NULL, 0), PP_INVALID);
  cr_assert_eq(pp_param_set(p, &c, "nan", 3, NULL, 0), PP_PARSE);
  /* the bits order as the numbers: the table check sees a value out of range */
  c.p = 1.0;
  cr_assert_eq(pp_params_check(chance_params, NCHANCE, &c, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "p must be 0..0.99999999999999989, got 1");
  c.p = -0.5;
  cr_assert_eq(pp_params_check(chance_params, NCHANCE, &c, err, sizeof err), PP_INVALID);
}

Test(param, rank_sets_and_rank_bounds)
{
  struct chance c = {0};
  char err[200], buf[400];
  const struct pp_param *r = &chance_params[2];
  cr_assert_eq(pp_param_set(r, &c, "[1, 3]", 6, err, sizeof err), PP_OK);
  cr_assert_eq(c.ranks, 0xa);
  cr_assert_eq(pp_param_set(r, &c, "63,0", 4, err, sizeof err), PP_OK);
  cr_assert_eq(c.ranks, 1ull << 63 | 1);
  pp_param_format(r, &c, buf, sizeof buf);
  cr_assert_str_eq(buf, "[0, 63]");
  c.ranks = UINT64_MAX;
  size_t want = pp_param_format(r, &c, buf, sizeof buf);
  cr_assert_eq(want, strlen(buf));
  uint64_t back = 0;
  cr_assert_eq(pp_parse_ranks(buf, strlen(buf), 64, &back, err, sizeof err), PP_OK, "%s", err);
  cr_assert_eq(back, UINT64_MAX);
  cr_assert_lt(pp_param_format(r, &c, buf, 8), want + 1, "snprintf-like when short");
  cr_assert_eq(pp_param_set(r, &c, "[]", 2, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must list at least one rank");
  cr_assert_neq(pp_param_set(r, &c, "64", 2, NULL, 0), PP_OK);
  cr_assert_neq(pp_param_set(r, &c, "1,", 2, NULL, 0), PP_OK);
  cr_assert_neq(pp_param_set(r, &c, "1 3", 3, NULL, 0), PP_OK);
  /* bounded by a run of 4 ranks */
  struct pp_param b = pp_param_rank_bound(r, 4);
  cr_assert_eq(b.max, 0xf);
  cr_assert_eq(pp_param_set(&b, &c, "[3]", 3, err, sizeof err), PP_OK);
  cr_assert_eq(pp_param_set(&b, &c, "[4]", 3, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be a list of ranks 0..3 such as [1, 3]");
  b = pp_param_rank_bound(&chance_params[3], 4);
  cr_assert_eq(b.max, 3);
  cr_assert_eq(pp_param_set(&b, &c, "4", 1, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be an integer 0..3");
  b = pp_param_rank_bound(&chance_params[0], 4);
  cr_assert_eq(b.max, PP_PARAM_PROB_BELOW_ONE, "not a rank entry: unchanged");
  cr_assert_eq(pp_param_rank_bound(r, 64).max, UINT64_MAX);
}

/* Bandwidths: a double of bits/s, finite and > 0, its bounds and default as the double's bits
 * (PP_PARAM_BW_*); units of bits and of bytes (x 8); canonical text the largest bit unit of
 * which the value is a whole number, else 17 digits, read back exactly. */
struct link {
  double bps, capped;
};
#define CAP_BITS 0x42d6bcc41e900000ull /* 1e14: 100 Tb/s */
static const struct pp_param link_params[] = {
    PP_PARAM_BANDWIDTH_KEYED("bps", struct link, bps, PP_PARAM_BW_100G, "a link"),
    PP_PARAM_KEYED("capped", struct link, capped, PP_PARAM_BANDWIDTH, PP_PARAM_BW_MIN, CAP_BITS,
                   PP_PARAM_BW_100G, "at most 100 Tb/s", NULL, 0),
};
#define NLINK (sizeof link_params / sizeof link_params[0])

static double bits_as_double(uint64_t b)
{
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

Test(param, bandwidths)
{
  cr_assert(bits_as_double(PP_PARAM_BW_100G) == 100e9);
  cr_assert(bits_as_double(PP_PARAM_BW_MAX) == DBL_MAX);
  cr_assert(bits_as_double(PP_PARAM_BW_MIN) > 0 && bits_as_double(PP_PARAM_BW_MIN) < DBL_MIN);
  cr_assert(bits_as_double(CAP_BITS) == 1e14);
  struct link l;
  char err[200], buf[64];
  cr_assert(pp_params_valid(link_params, NLINK, sizeof l, err, sizeof err), "%s", err);
  memset(&l, 0xff, sizeof l);
  pp_params_defaults(link_params, NLINK, &l);
  cr_assert(l.bps == 100e9 && l.capped == 100e9);
  pp_param_format_default(&link_params[0], buf, sizeof buf);
  cr_assert_str_eq(buf, "100Gbps");
  const struct {
    const char *text, *canon;
    double bps;
  } ok[] = {{"100Gbps", "100Gbps", 100e9},   {"25GBps", "200Gbps", 200e9},
            {" 1.5Tbps ", "1500Gbps", 1.5e12}, {"10 Mbps", "10Mbps", 10e6},
            {"3kbps", "3kbps", 3e3},          {"3Kbps", "3kbps", 3e3},
            {"94148362bps", "94148362bps", 94148362}, {"2e9", "2Gbps", 2e9},
            {"1e-3", "0.001", 1e-3},          {"12500000000.1", "12500000000.1", 12500000000.1},
            {"1KBps", "8kbps", 8e3},          {"+7Bps", "56bps", 56}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    cr_assert_eq(pp_param_set(&link_params[0], &l, ok[i].text, strlen(ok[i].text), err,
                              sizeof err),
                 PP_OK, "%s: %s", ok[i].text, err);
    cr_assert(l.bps == ok[i].bps, "%s: %.17g", ok[i].text, l.bps);
    size_t want = pp_param_format(&link_params[0], &l, buf, sizeof buf);
    cr_assert_eq(want, strlen(buf));
    cr_assert_str_eq(buf, ok[i].canon, "%s", ok[i].text);
    struct link back = {0};
    cr_assert_eq(pp_param_set(&link_params[0], &back, buf, strlen(buf), err, sizeof err), PP_OK);
    cr_assert(back.bps == l.bps, "%s reads back", buf);
  }
  l.bps = 0.1 + 0.2; /* no whole number of a unit: 17 digits */
  pp_param_format(&link_params[0], &l, buf, sizeof buf);
  struct link back = {0};
  cr_assert_eq(pp_param_set(&link_params[0], &back, buf, strlen(buf), err, sizeof err), PP_OK);
  cr_assert(back.bps == l.bps, "%s reads back", buf);
  l.bps = 1;
  const char *shape[] = {"", "Gbps", "100Gbit", "1.Gbps", "0x10", "inf", "nan", "1e", "1 e3"};
  for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
    cr_assert_eq(pp_param_set(&link_params[0], &l, shape[i], strlen(shape[i]), err, sizeof err),
                 PP_PARSE, "%s", shape[i]);
    cr_assert_str_eq(err, "must be a bandwidth such as 100Gbps, 25GBps (bytes/s) or a bare "
                          "number of bits/s");
  }
  const char *range[] = {"0", "0Gbps", "-1Gbps", "-0", "1e999", "1e-999"};
  for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
    cr_assert_eq(pp_param_set(&link_params[0], &l, range[i], strlen(range[i]), err, sizeof err),
                 PP_INVALID, "%s", range[i]);
    cr_assert_str_eq(err, "must be a finite bandwidth > 0");
  }
  cr_assert(l.bps == 1, "nothing stored on error");
  cr_assert_eq(pp_param_set(&link_params[1], &l, "101Tbps", 7, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be a bandwidth > 0 and at most 100Tbps");
  struct pp_param from1g = link_params[1];
  from1g.min = 0x41cdcd6500000000ull; /* 1e9 */
  cr_assert_eq(pp_param_set(&from1g, &l, "999Mbps", 7, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "must be a bandwidth 1Gbps..100Tbps");
  cr_assert_eq(pp_param_set(&link_params[1], &l, "100Tbps", 7, err, sizeof err), PP_OK);
  /* the bits of doubles >= 0 order as the numbers: the table check refuses what the parser
   * would (0, negative, infinite, NaN, above max) */
  const double badv[] = {0.0, -1.0, INFINITY, NAN};
  for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++) {
    l = (struct link){.bps = badv[i], .capped = 1};
    cr_assert_eq(pp_params_check(link_params, NLINK, &l, err, sizeof err), PP_INVALID, "%g",
                 badv[i]);
    cr_assert(!strncmp(err, "bps must be ", 12), "%s", err);
  }
  l = (struct link){.bps = 1, .capped = 2e14};
  cr_assert_eq(pp_params_check(link_params, NLINK, &l, err, sizeof err), PP_INVALID);
  cr_assert_str_eq(err, "capped must be 4.9406564584124654e-324..100Tbps, got 200Tbps");
  /* a table whose bandwidth may be 0 or infinite, or is not a double, is refused */
  struct pp_param t = link_params[0];
  t.min = 0;
  cr_assert(!pp_params_valid(&t, 1, sizeof l, err, sizeof err));
  t = link_params[0];
  t.max = 0x7ff0000000000000ull; /* inf */
  t.def = t.max;
  cr_assert(!pp_params_valid(&t, 1, sizeof l, err, sizeof err));
  t = link_params[0];
  t.width = 4;
  cr_assert(!pp_params_valid(&t, 1, sizeof l, err, sizeof err));
  cr_assert(strstr(err, "8 bytes"), "%s", err);
  cr_assert_str_eq(pp_param_kind_name(PP_PARAM_BANDWIDTH), "bandwidth");
}

/* A composite entry names a key whose value its section's code parses: no member to read,
 * write, default or check, and pp_param_set refuses it. */
Test(param, composite_keys_have_a_name_and_a_doc_only)
{
  static const struct pp_param t[] = {
      PP_PARAM_COMPOSITE_KEYED("ops", "a list of operations"),
      PP_PARAM_UINT(struct toy, window, 1, 64, 4, "a"),
  };
  char err[200], buf[16];
  cr_assert(pp_params_valid(t, 2, sizeof(struct toy), err, sizeof err), "%s", err);
  cr_assert_eq(pp_param_find(t, 2, "ops"), &t[0]);
  struct toy a, b;
  memset(&a, 0x5a, sizeof a);
  memcpy(&b, &a, sizeof a);
  pp_params_defaults(t, 1, &a);
  cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "no member written");
  pp_param_put(&t[0], &a, 7);
  cr_assert_eq(memcmp(&a, &b, sizeof a), 0);
  cr_assert_eq(pp_param_get(&t[0], &a), 0);
  cr_assert_eq(pp_params_check(t, 1, &a, err, sizeof err), PP_OK);
  cr_assert_eq(pp_param_set(&t[0], &a, "1", 1, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "its section"), "%s", err);
  cr_assert_eq(pp_param_format(&t[0], &a, buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "");
  struct pp_param bad = t[0];
  bad.width = 4;
  cr_assert(!pp_params_valid(&bad, 1, sizeof(struct toy), err, sizeof err), "a member");
  bad = t[0];
  bad.max = 1;
  cr_assert(!pp_params_valid(&bad, 1, sizeof(struct toy), err, sizeof err), "bounds");
  cr_assert(strstr(err, "composite"), "%s", err);
  cr_assert_str_eq(pp_param_kind_name(PP_PARAM_COMPOSITE), "composite");
}

/* An embedding program may set a locale whose decimal point is a comma; prepost's texts keep
 * '.' both ways. de_DE.UTF-8 comes from LOCPATH, which tests/CMakeLists.txt fills with localedef
 * (fixture param_locale), so this runs on a machine without that locale installed. */
Test(param, numbers_keep_the_point_under_a_decimal_comma_locale)
{
  locale_t de = newlocale(LC_NUMERIC_MASK, "de_DE.UTF-8", (locale_t)0);
  cr_assert(de != (locale_t)0, "no de_DE.UTF-8 locale (LOCPATH=%s)",
            getenv("LOCPATH") ? getenv("LOCPATH") : "unset");
  locale_t was = uselocale(de);
  cr_assert_str_eq(localeconv()->decimal_point, ",", "the locale's decimal point");

  double x = 0;
  cr_assert_eq(pp_parse_prob("0.25", 4, 1.0, &x, NULL, 0), PP_OK);
  cr_assert_eq(x, 0.25);
  cr_assert_eq(pp_parse_prob("1e-3", 4, 1.0, &x, NULL, 0), PP_OK);
  cr_assert_eq(x, 1e-3);
  cr_assert_eq(pp_parse_prob("0,25", 4, 1.0, &x, NULL, 0), PP_PARSE, "a comma is not prepost's");
  cr_assert_eq(pp_parse_bandwidth("1.5Tbps", 7, 1, 1e15, &x, NULL, 0), PP_OK);
  cr_assert_eq(x, 1.5e12);

  char buf[64];
  size_t n = pp_format_bandwidth(1.25, buf, sizeof buf);
  cr_assert_str_eq(buf, "1.25");
  cr_assert_eq(n, 4);
  struct chance c = {.p = 0.1};
  pp_param_format(&chance_params[0], &c, buf, sizeof buf);
  cr_assert_str_eq(buf, "0.10000000000000001");
  cr_assert_eq(pp_param_set(&chance_params[0], &c, buf, strlen(buf), NULL, 0), PP_OK);
  cr_assert_eq(c.p, 0.1, "the text reads back to the same value");

  uselocale(was);
  freelocale(de);
}

/* The corners of the parsers, each refused with its reason and nothing stored: a point with no
 * decimal after it, a negative fraction, more decimals than a minute's nanoseconds hold, a
 * fraction whose bytes overflow before the bounds are checked, a rank set when the run has no
 * ranks. */
Test(param, parser_corners_say_why)
{
  uint64_t v = 77;
  char why[160];
  cr_assert_eq(dur("1.ms", &v), PP_PARSE, "a point needs a decimal");
  cr_assert_eq(dur("-0.0ms", &v), PP_OK, "a negative zero is zero");
  cr_assert_eq(v, 0);
  v = 77;
  cr_assert_eq(pp_parse_duration("-0.5ms", 6, 0, UINT64_MAX, &v, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must not be negative");
  cr_assert_eq(dur("1.5min", &v), PP_OK);
  cr_assert_eq(v, 90000000000ull);
  v = 77;
  cr_assert_eq(dur("1.0000000001min", &v), PP_PARSE, "finer than the nanosecond");
  cr_assert_eq(pp_parse_size("0.999999999TiB", 14, 0, UINT64_MAX, &v, why, sizeof why),
               PP_INVALID);
  cr_assert(strstr(why, "must be a size"), "%s", why);
  cr_assert_eq(v, 77, "nothing stored on error");
  cr_assert_eq(pp_parse_ranks("1", 1, 0, &v, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must be a list of ranks, but there are none");
  cr_assert_eq(v, 77);
}

/* A table entry with no key, an unknown kind, a width no integer has, or an enum without names
 * is refused, with the entry's index and key; a value set through an unknown kind is refused. */
Test(param, malformed_entries_are_named)
{
  char err[200];
  struct pp_param t = PP_PARAM_UINT(struct toy, window, 1, 64, 4, "a");
  cr_assert(pp_params_valid(&t, 1, sizeof(struct toy), err, sizeof err), "%s", err);
  struct pp_param b = t;
  b.key = NULL;
  cr_assert(!pp_params_valid(&b, 1, sizeof(struct toy), err, sizeof err));
  cr_assert_str_eq(err, "parameter 0 (?) has no key");
  b = t;
  b.kind = PP_PARAM_KIND_COUNT;
  cr_assert(!pp_params_valid(&b, 1, sizeof(struct toy), err, sizeof err));
  cr_assert_str_eq(err, "parameter 0 (window) has an unknown kind");
  struct toy o = {.window = 9};
  cr_assert_eq(pp_param_set(&b, &o, "5", 1, err, sizeof err), PP_INVALID);
  cr_assert(strstr(err, "has an unknown kind"), "%s", err);
  cr_assert_eq(o.window, 9, "nothing stored");
  b = t;
  b.width = 3;
  cr_assert(!pp_params_valid(&b, 1, sizeof(struct toy), err, sizeof err));
  cr_assert_str_eq(err, "parameter 0 (window) has a width other than 1, 2, 4 or 8 bytes");
  b = t;
  b.kind = PP_PARAM_ENUM;
  b.min = 0, b.max = 1, b.def = 0;
  cr_assert(!pp_params_valid(&b, 1, sizeof(struct toy), err, sizeof err));
  cr_assert_str_eq(err, "parameter 0 (window) is an enum without names");
}

/* A 2-byte member: set within its bounds, refused past them (nothing written, its neighbours
 * untouched), formatted back. */
struct narrow {
  uint8_t before;
  uint16_t port;
  uint8_t after;
};

Test(param, two_byte_members)
{
  const struct pp_param t[] = {PP_PARAM_UINT(struct narrow, port, 1, 65535, 80, "a port")};
  char err[200], buf[32];
  cr_assert(pp_params_valid(t, 1, sizeof(struct narrow), err, sizeof err), "%s", err);
  struct narrow n;
  memset(&n, 0xee, sizeof n);
  pp_params_defaults(t, 1, &n);
  cr_assert_eq(n.port, 80);
  cr_assert_eq(pp_param_set(&t[0], &n, "65535", 5, err, sizeof err), PP_OK, "%s", err);
  cr_assert_eq(n.port, 65535);
  cr_assert_eq(pp_param_set(&t[0], &n, "65536", 5, err, sizeof err), PP_INVALID);
  cr_assert_eq(n.port, 65535);
  cr_assert_eq(n.before, 0xee);
  cr_assert_eq(n.after, 0xee);
  pp_param_format(&t[0], &n, buf, sizeof buf);
  cr_assert_str_eq(buf, "65535");
  n.port = 0; /* below its min: the table check says so */
  cr_assert_eq(pp_params_check(t, 1, &n, err, sizeof err), PP_INVALID);
}
