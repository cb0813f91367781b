#include "cli_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
