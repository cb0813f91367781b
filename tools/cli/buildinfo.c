/* tools/cli/buildinfo.h: the version from CMake, the commit from the generated file. */
#include "tools/cli/buildinfo.h"

#ifndef PREPOST_VERSION
#define PREPOST_VERSION "?"
#endif

extern const char pp_build_commit_str[]; /* buildinfo_commit.c, generated */

const char *pp_build_version(void)
{
  return PREPOST_VERSION;
}

const char *pp_build_commit(void)
{
  return pp_build_commit_str;
}
