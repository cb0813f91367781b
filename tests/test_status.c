/* engine/status: every status code has a distinct printable name and a description. */
#include <criterion/criterion.h>
#include <string.h>

#include "prepost/status.h"

Test(status, names_are_distinct_and_printable)
{
  for (int i = 0; i < PP_STATUS_COUNT; i++) {
    const char *n = pp_status_name((enum pp_status)i);
    cr_assert_not_null(n);
    cr_assert(strlen(n) > 0, "status %d has an empty name", i);
    cr_assert_str_neq(n, "?", "status %d has no name", i);
    for (int j = 0; j < i; j++)
      cr_assert_str_neq(n, pp_status_name((enum pp_status)j), "statuses %d and %d share '%s'", i,
                        j, n);
  }
}

Test(status, names_match_the_enum)
{
  cr_assert_str_eq(pp_status_name(PP_OK), "OK");
  cr_assert_str_eq(pp_status_name(PP_AGAIN), "AGAIN");
  cr_assert_str_eq(pp_status_name(PP_INVALID), "INVALID");
  cr_assert_str_eq(pp_status_name(PP_LIMIT), "LIMIT");
  cr_assert_str_eq(pp_status_name(PP_UNSUPPORTED), "UNSUPPORTED");
  cr_assert_eq(PP_OK, 0, "PP_OK must be 0 so that `if (s)` means failure");
}

Test(status, every_status_has_a_description)
{
  for (int i = 0; i < PP_STATUS_COUNT; i++) {
    const char *d = pp_status_desc((enum pp_status)i);
    cr_assert_not_null(d);
    cr_assert(strlen(d) > 3, "status %s has no description", pp_status_name((enum pp_status)i));
    cr_assert_str_neq(d, pp_status_desc((enum pp_status)PP_STATUS_COUNT),
                      "status %d reads as unknown", i);
    for (int j = 0; j < i; j++)
      cr_assert_str_neq(d, pp_status_desc((enum pp_status)j), "statuses %d and %d share a description",
                        i, j);
  }
}

Test(status, out_of_range_gives_question_mark)
{
  cr_assert_str_eq(pp_status_name((enum pp_status)PP_STATUS_COUNT), "?");
  cr_assert_str_eq(pp_status_name((enum pp_status)(PP_STATUS_COUNT + 100)), "?");
  cr_assert_str_eq(pp_status_name((enum pp_status)-1), "?");
  cr_assert_not_null(pp_status_desc((enum pp_status)-1));
  cr_assert_not_null(pp_status_desc((enum pp_status)PP_STATUS_COUNT));
}
