#define _XOPEN_SOURCE 700 /* readlink, realpath, O_CLOEXEC, S_ISSOCK, fdopen */
#include "cli_util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
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

static const char *file_kind(mode_t m)
{
  return S_ISDIR(m)    ? "is a directory"
         : S_ISFIFO(m) ? "is a FIFO, not a regular file"
         : S_ISCHR(m)  ? "is a character device, not a regular file"
         : S_ISBLK(m)  ? "is a block device, not a regular file"
         : S_ISSOCK(m) ? "is a socket, not a regular file"
                       : "is not a regular file";
}

/* Fails with err and errno set to `e`. */
static FILE *open_fail(int fd, int e, const char *what, char *err, size_t errlen)
{
  snprintf(err, errlen, "%s", what ? what : strerror(e));
  if (fd >= 0)
    close(fd);
  errno = e;
  return NULL;
}

FILE *pp_open_regular(const char *path, char *err, size_t errlen)
{
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return open_fail(fd, errno, NULL, err, errlen);
  struct stat st;
  int flags;
  if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0)
    return open_fail(fd, errno, NULL, err, errlen);
  if (!S_ISREG(st.st_mode))
    return open_fail(fd, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, file_kind(st.st_mode), err,
                     errlen);
  if (fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return open_fail(fd, errno, NULL, err, errlen);
  FILE *f = fdopen(fd, "rb");
  return f ? f : open_fail(fd, errno, NULL, err, errlen);
}

int pp_read_regular(const char *path, size_t max, char **data, size_t *len, bool *too_big,
                    char *err, size_t errlen)
{
  *data = NULL;
  *len = 0;
  if (max > SIZE_MAX / 2)
    max = SIZE_MAX / 2;
  if (too_big)
    *too_big = false;
  FILE *f = pp_open_regular(path, err, errlen);
  if (!f)
    return -1;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  for (;;) {
    if (!buf) {
      snprintf(err, errlen, "out of memory");
      fclose(f);
      return -1;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n > max) {
      snprintf(err, errlen, "larger than %zu bytes", max);
      if (too_big)
        *too_big = true;
      free(buf);
      fclose(f);
      return -1;
    }
    if (r == 0)
      break;
    if (n == cap) { /* n <= max < cap * 2: grow to at most max + 1, one byte tells "too big" */
      size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *nb = realloc(buf, ncap + 1);
      if (!nb)
        free(buf);
      buf = nb;
      cap = ncap;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "read error");
    free(buf);
    return -1;
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return 0;
}
