#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include "scratch.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

void scratch_make(char *dir, size_t dir_size, const char *name)
{
  int n = snprintf(dir, dir_size, "/tmp/prepost-%s-XXXXXX", name);
  cr_assert(n > 0 && (size_t)n < dir_size, "scratch directory name too long for %zu bytes", dir_size);
  cr_assert_not_null(mkdtemp(dir), "cannot make %s", dir);
}

void scratch_remove(const char *dir)
{
  char cmd[512];
  int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  cr_assert(n > 0 && (size_t)n < sizeof(cmd));
  cr_expect_eq(system(cmd), 0, "%s", cmd);
}

void scratch_write(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "cannot write %s", path);
  cr_assert_geq(fputs(text, f), 0, "cannot write %s", path);
  cr_assert_eq(fclose(f), 0, "cannot write %s", path);
}

char *scratch_slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot read %s", path);
  size_t cap = 65536, n = 0, r;
  char *buf = malloc(cap + 1);
  cr_assert_not_null(buf);
  while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      buf = realloc(buf, (cap *= 2) + 1);
      cr_assert_not_null(buf);
    }
  }
  cr_assert(!ferror(f), "error reading %s", path);
  fclose(f);
  buf[n] = '\0';
  if (len)
    *len = n;
  return buf;
}
