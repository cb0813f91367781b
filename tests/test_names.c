/* engine/core/names.c: the one lookup behind every X-macro name table. */
#include <criterion/criterion.h>

#include "prepost/names.h"

static const char *const table[] = {[0] = "zero", [1] = "one", [3] = "three"}; /* 2 is a hole */

Test(names, value_to_name)
{
  cr_assert_str_eq(pp_name_of(table, PP_NAMES_COUNT(table), 0), "zero");
  cr_assert_str_eq(pp_name_of(table, PP_NAMES_COUNT(table), 3), "three");
  cr_assert_str_eq(pp_name_of(table, PP_NAMES_COUNT(table), 2), "?");
  cr_assert_str_eq(pp_name_of(table, PP_NAMES_COUNT(table), 4), "?");
  cr_assert_str_eq(pp_name_of(table, PP_NAMES_COUNT(table), -1), "?");
}

Test(names, name_to_value)
{
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), "one"), 1);
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), "three"), 3);
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), "two"), -1);
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), "ONE"), -1);
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), ""), -1);
  cr_assert_eq(pp_name_index(table, PP_NAMES_COUNT(table), NULL), -1);
}
