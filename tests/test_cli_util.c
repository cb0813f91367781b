/* tools/cli_util: the argument parsing the CLI's subcommands share. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdint.h>

#include "tools/cli_util.h"

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
