#define _XOPEN_SOURCE 700 /* readlink, realpath */
#include "cli_util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *pp_cli_models_dir(void)
{
  const char *env = getenv("PREPOST_MODELS");
  if (env && *env)
    return env;
  /* installed: <prefix>/bin/prepost finds <prefix>/share/prepost/models (PREPOST_MODELS_REL,
   * from the install layout), wherever the prefix was moved */
  static char dir[PATH_MAX];
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    struct stat st;
    if (slash && (size_t)(slash + 1 - exe) + sizeof PREPOST_MODELS_REL < sizeof exe) {
      memcpy(slash + 1, PREPOST_MODELS_REL, sizeof PREPOST_MODELS_REL);
      if (realpath(exe, dir) && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return dir;
    }
  }
  return PREPOST_MODELS_DIR; /* the source tree's, for the build tree's program */
}

int pp_cli_usage_error(const char *who, const char *usage, const char *fmt, const char *arg)
{
  fprintf(stderr, "%s: ", who);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n%s", usage);
  return 2;
}

int pp_cli_parse_u64(const char *s, uint64_t *out)
{
  char *end;
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
    return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end)
    return -1;
  *out = v;
  return 0;
}

int pp_cli_parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
  uint64_t v;
  if (pp_cli_parse_u64(s, &v) || v < lo || v > hi)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

void pp_json_string(FILE *out, const char *s)
{
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20)
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}
