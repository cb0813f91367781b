#define _XOPEN_SOURCE 700 /* readlink, realpath, O_CLOEXEC, S_ISSOCK, fdopen */
#include "tools/cli/cli_util.h"
#include "prepost/param.h"

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

/* ---------------------------------------------------------------- options */

/* argv[i] as given, up to a '=' (into buf). */
static const char *spelled(const struct pp_cli_opts *o, int i, char *buf, size_t len)
{
  const char *a = i > 0 && i < o->argc ? o->argv[i] : "?";
  size_t n = strcspn(a, "=");
  snprintf(buf, len, "%.*s", (int)n, a);
  return buf;
}

/* "--s" matching --seed and --set: the candidates, else NULL. */
static const char *ambiguous(const struct pp_cli_opts *o, const char *given, char *buf,
                             size_t len)
{
  size_t n = strlen(given) - 2, at = 0, hits = 0;
  buf[0] = '\0';
  for (const struct option *l = o->longs; l && l->name; l++)
    if (strlen(l->name) > n && !strncmp(l->name, given + 2, n)) {
      if (at < len)
        at += (size_t)snprintf(buf + at, len - at, "%s--%s", hits ? ", " : "", l->name);
      hits++;
    }
  return hits > 1 ? buf : NULL;
}

int pp_cli_next(struct pp_cli_opts *o)
{
  char shorts[64];
  const char *sh = o->shorts ? o->shorts : "";
  /* ':' first (the caller's messages); a leading '+' (the first operand ends the options)
   * must come before it */
  if (*sh == '+')
    snprintf(shorts, sizeof shorts, "+:%s", sh + 1);
  else
    snprintf(shorts, sizeof shorts, ":%s", sh);
  static const struct option none[] = {{0, 0, 0, 0}};
  if (!o->started) {
    optind = 0; /* glibc: a full reinitialisation (another command may have parsed before) */
    o->started = true;
  }
  opterr = 0;
  int li = -1;
  int c = getopt_long(o->argc, o->argv, shorts, o->longs ? o->longs : none, &li);
  o->arg = optarg;
  if (c == -1) {
    o->rest = optind;
    return PP_CLI_END;
  }
  char given[48], list[256];
  if (c == '?' || c == ':') {
    spelled(o, optind - 1, given, sizeof given);
    bool is_long = !strncmp(given, "--", 2);
    if (!is_long && optopt)
      snprintf(given, sizeof given, "-%c", optopt);
    if (c == ':')
      return pp_cli_usage_error(o->who, o->usage, "option '%s' needs a value", given),
             PP_CLI_BAD;
    if (is_long && optopt && strchr(o->argv[optind - 1], '='))
      return pp_cli_usage_error(o->who, o->usage, "option '%s' takes no value", given),
             PP_CLI_BAD;
    if (is_long && ambiguous(o, given, list, sizeof list)) {
      char msg[400];
      snprintf(msg, sizeof msg, "ambiguous option '%s' (%s)", given, list);
      return pp_cli_usage_error(o->who, o->usage, "%s", msg), PP_CLI_BAD;
    }
    return pp_cli_usage_error(o->who, o->usage, "unknown option '%s'", given), PP_CLI_BAD;
  }
  if (li >= 0)
    snprintf(o->name, sizeof o->name, "--%s", o->longs[li].name);
  else
    snprintf(o->name, sizeof o->name, "-%c", c);
  return c;
}

int pp_cli_opt_error(const struct pp_cli_opts *o, const char *fmt, const char *arg)
{
  char f[256];
  snprintf(f, sizeof f, "%s %s", o->name, fmt);
  return pp_cli_usage_error(o->who, o->usage, f, arg);
}

static int opt_value(const struct pp_cli_opts *o, enum pp_status st, const char *why)
{
  if (st == PP_OK)
    return 0;
  char msg[320];
  snprintf(msg, sizeof msg, "%s %s, got '%s'", o->name, why, o->arg ? o->arg : "");
  return pp_cli_usage_error(o->who, o->usage, "%s", msg);
}

int pp_cli_opt_uint(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *out)
{
  char why[160];
  const char *a = o->arg ? o->arg : "";
  return opt_value(o, pp_parse_uint(a, strlen(a), lo, hi, out, why, sizeof why), why);
}

int pp_cli_opt_size(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *out)
{
  char why[160];
  const char *a = o->arg ? o->arg : "";
  return opt_value(o, pp_parse_size(a, strlen(a), lo, hi, out, why, sizeof why), why);
}

int pp_cli_opt_duration(const struct pp_cli_opts *o, uint64_t lo, uint64_t hi, uint64_t *ns)
{
  char why[200];
  return opt_value(o, pp_cli_parse_duration(o->arg ? o->arg : "", lo, hi, ns, why, sizeof why),
                   why);
}

enum pp_status pp_cli_parse_duration(const char *text, uint64_t lo, uint64_t hi, uint64_t *ns,
                                     char *why, size_t whylen)
{
  static const char units[] = "500ns, 2us, 1.5ms, 10s, 5min or 1h";
  size_t len = strlen(text);
  bool digits = false, zero = true; /* a bare integer (blanks aside), and whether it is 0 */
  for (size_t j = 0; j < len; j++) {
    if (text[j] == ' ')
      continue;
    if (text[j] < '0' || text[j] > '9') {
      digits = false;
      break;
    }
    digits = true;
    zero = zero && text[j] == '0';
  }
  if (digits && !zero) {
    snprintf(why, whylen, "needs a unit: a duration such as %s", units);
    return PP_PARSE;
  }
  enum pp_status st = pp_parse_duration(text, len, lo, hi, ns, why, whylen);
  if (st == PP_PARSE)
    snprintf(why, whylen, "must be a duration such as %s", units);
  return st;
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
