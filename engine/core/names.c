#include "prepost/names.h"

#include <string.h>

const char *pp_name_of(const char *const *names, int count, long v)
{
  return v >= 0 && v < count && names[v] ? names[v] : "?";
}

int pp_name_index(const char *const *names, int count, const char *name)
{
  for (int i = 0; name && i < count; i++)
    if (names[i] && strcmp(names[i], name) == 0)
      return i;
  return -1;
}
