/* tools/cli_util: the argument parsing the CLI's subcommands share. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdint.h>

#include "tools/cli/cli_util.h"

Test(cli_util, parse_u64_accepts_whole_unsigned_numbers)
{
  uint64_t v = 7;
  cr_assert_eq(pp_cli_parse_u64("0", &v), 0);
  cr_assert_eq(v, 0);
  cr_assert_eq(pp_cli_parse_u64("18446744073709551615", &v), 0);
  cr_assert_eq(v, UINT64_MAX);
  cr_assert_eq(pp_cli_parse_u64("0x10", &v), 0);
  cr_assert_eq(v, 16);
}

Test(cli_util, parse_u64_refuses_anything_else_and_leaves_out_alone)
{
  const char *bad[] = {NULL, "", "-1", "+1", " 1", "1 ", "12x", "x", "18446744073709551616",
                       "0x", "1e3"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t v = 42;
    cr_assert_eq(pp_cli_parse_u64(bad[i], &v), -1, "'%s' accepted", bad[i] ? bad[i] : "(null)");
    cr_assert_eq(v, 42, "'%s' changed the output", bad[i] ? bad[i] : "(null)");
  }
}

Test(cli_util, parse_u32_checks_the_range)
{
  uint32_t v = 9;
  cr_assert_eq(pp_cli_parse_u32("1", 1, 3, &v), 0);
  cr_assert_eq(v, 1);
  cr_assert_eq(pp_cli_parse_u32("3", 1, 3, &v), 0);
  cr_assert_eq(v, 3);
  cr_assert_eq(pp_cli_parse_u32("0", 1, 3, &v), -1);
  cr_assert_eq(pp_cli_parse_u32("4", 1, 3, &v), -1);
  cr_assert_eq(pp_cli_parse_u32("4294967296", 0, UINT32_MAX, &v), -1, "wraps to 0");
  cr_assert_eq(v, 3);
}

Test(cli_util, usage_error_names_the_command_and_prints_the_usage, .init = cr_redirect_stderr)
{
  cr_assert_eq(pp_cli_usage_error("prepost explore", "usage: prepost explore ...\n",
                                  "unknown option '%s'", "--bogus"),
               2);
  fflush(stderr);
  cr_assert_stderr_eq_str("prepost explore: unknown option '--bogus'\n\n"
                          "usage: prepost explore ...\n");
}

Test(cli_util, json_string_escapes_quotes_backslashes_and_control_bytes, .init = cr_redirect_stdout)
{
  pp_json_string(stdout, "a\"b\\c\n\x01 \xc3\xa9");
  fflush(stdout);
  cr_assert_stdout_eq_str("\"a\\\"b\\\\c\\u000a\\u0001 \xc3\xa9\"");
}

/* ---------------------------------------------------------------- options (getopt_long) */

#include <string.h>

#include "prepost/param.h"

enum { T_SEED = 256, T_JSON, T_SET };
static const struct option topts[] = {{"seed", required_argument, NULL, T_SEED},
                                      {"set", required_argument, NULL, T_SET},
                                      {"json", no_argument, NULL, T_JSON},
                                      {0, 0, 0, 0}};

/* Parses a NULL-terminated argument list (argv[0] the command's name); the options seen as
 * "val=arg " into got, the operands after "|". The return: 0, or 2 after a usage error. */
static int parse_opts(char *got, size_t len, const char *const *args)
{
  char *argv[16];
  int argc = 0;
  for (; args[argc]; argc++)
    argv[argc] = (char *)args[argc];
  argv[argc] = NULL;
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ho:", .longs = topts,
                          .who = "t", .usage = "usage: t\n"};
  size_t at = 0;
  got[0] = '\0';
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    if (c == PP_CLI_BAD)
      return 2;
    at += (size_t)snprintf(got + at, len - at, "%s=%s ", g.name, g.arg ? g.arg : "");
  }
  at += (size_t)snprintf(got + at, len - at, "|");
  for (int i = g.rest; i < argc; i++)
    at += (size_t)snprintf(got + at, len - at, " %s", argv[i]);
  return 0;
}

Test(cli_util, options_with_equals_or_apart_mixed_with_operands)
{
  char got[256];
  const char *a[] = {"run", "s.yaml", "--seed=7", "--json", "-o", "f", "--set", "a=b", "x", NULL};
  cr_assert_eq(parse_opts(got, sizeof got, a), 0);
  cr_assert_str_eq(got, "--seed=7 --json= -o=f --set=a=b | s.yaml x");
  const char *b[] = {"run", "--see=3", "--", "--json", NULL}; /* a unique prefix; -- ends them */
  cr_assert_eq(parse_opts(got, sizeof got, b), 0);
  cr_assert_str_eq(got, "--seed=3 | --json");
  /* a second parse in the same process starts over */
  const char *c[] = {"run", "--json", NULL};
  cr_assert_eq(parse_opts(got, sizeof got, c), 0);
  cr_assert_str_eq(got, "--json= |");
}

Test(cli_util, option_errors_have_one_message_each, .init = cr_redirect_stderr)
{
  char got[256];
  const char *const cases[][3] = {
      {"--frob", NULL, "t: unknown option '--frob'\n"},
      {"-x", NULL, "t: unknown option '-x'\n"},
      {"--seed", NULL, "t: option '--seed' needs a value\n"},
      {"-o", NULL, "t: option '-o' needs a value\n"},
      {"--json=1", NULL, "t: option '--json' takes no value\n"},
      {"--se", "1", "t: ambiguous option '--se' (--seed, --set)\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *a[] = {"run", cases[i][0], cases[i][1], NULL};
    cr_assert_eq(parse_opts(got, sizeof got, a), 2, "%s", cases[i][0]);
  }
  fflush(stderr);
  char want[1024] = "";
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    strcat(want, cases[i][2]);
    strcat(want, "\nusage: t\n");
  }
  cr_assert_stderr_eq_str(want);
}

Test(cli_util, durations_on_the_command_line_need_their_unit)
{
  uint64_t ns = 1;
  char why[200];
  cr_assert_eq(pp_cli_parse_duration("10s", 0, UINT64_MAX, &ns, why, sizeof why), PP_OK);
  cr_assert_eq(ns, 10000000000ull);
  cr_assert_eq(pp_cli_parse_duration("1.5ms", 0, UINT64_MAX, &ns, why, sizeof why), PP_OK);
  cr_assert_eq(ns, 1500000);
  cr_assert_eq(pp_cli_parse_duration("2min", 0, UINT64_MAX, &ns, why, sizeof why), PP_OK);
  cr_assert_eq(ns, 120000000000ull);
  cr_assert_eq(pp_cli_parse_duration("1.25h", 0, UINT64_MAX, &ns, why, sizeof why), PP_OK);
  cr_assert_eq(ns, 4500000000000ull);
  cr_assert_eq(pp_cli_parse_duration("0", 0, UINT64_MAX, &ns, why, sizeof why), PP_OK);
  cr_assert_eq(ns, 0, "0 needs no unit");
  ns = 77;
  cr_assert_eq(pp_cli_parse_duration("10", 0, UINT64_MAX, &ns, why, sizeof why), PP_PARSE);
  cr_assert_str_eq(why, "needs a unit: a duration such as 500ns, 2us, 1.5ms, 10s, 5min or 1h");
  cr_assert_eq(ns, 77);
  cr_assert_eq(pp_cli_parse_duration(" 10 ", 0, UINT64_MAX, &ns, why, sizeof why), PP_PARSE);
  cr_assert_eq(pp_cli_parse_duration("soon", 0, UINT64_MAX, &ns, why, sizeof why), PP_PARSE);
  cr_assert_str_eq(why, "must be a duration such as 500ns, 2us, 1.5ms, 10s, 5min or 1h");
  cr_assert_eq(pp_cli_parse_duration("5m", 0, UINT64_MAX, &ns, why, sizeof why), PP_PARSE);
  cr_assert_eq(pp_cli_parse_duration("2s", 0, 1000000000, &ns, why, sizeof why), PP_INVALID);
  cr_assert_str_eq(why, "must be a duration 0ns..1s");
  /* in a scenario, a bare integer stays nanoseconds */
  cr_assert_eq(pp_parse_duration("10", 2, 0, UINT64_MAX, &ns, NULL, 0), PP_OK);
  cr_assert_eq(ns, 10);
}
