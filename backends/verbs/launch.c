/* The launchers' environment: Open MPI's and Slurm's variables, Slurm's host lists (launch.h). */
#define _GNU_SOURCE
#include "launch.h"
#include "errf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pp_launch_env_kind_desc(enum pp_launch_env_kind k)
{
  static const char *const d[] = {
#define PP_X(id, desc) [PP_LAUNCH_ENV_##id] = desc,
      PP_LAUNCH_ENV_LIST(PP_X)
#undef PP_X
  };
  return (unsigned)k < sizeof(d) / sizeof(d[0]) ? d[k] : "?";
}

static const char *env_get(char *const *envp, const char *name)
{
  size_t n = strlen(name);
  for (char *const *e = envp; e && *e; e++)
    if (!strncmp(*e, name, n) && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

/* A decimal number below `below`, no sign, no junk. */
static int parse_u32(const char *s, uint32_t below, uint32_t *out)
{
  if (!s || *s < '0' || *s > '9')
    return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v >= below)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

/* ---- host lists */

struct hl {
  char *hosts;
  uint32_t max, n;
  char *err;
  size_t errlen;
};

static int emit(struct hl *h, const char *name, size_t len)
{
  if (len == 0)
    return 0; /* "a,,b": empty items are skipped, as Slurm does */
  if (len >= BOOT_HOST_MAX) {
    errf(h->err, h->errlen, "host list: a host name longer than %u bytes", BOOT_HOST_MAX - 1);
    return -1;
  }
  if (h->n >= h->max) {
    errf(h->err, h->errlen, "host list: more than %" PRIu32 " hosts", h->max);
    return -1;
  }
  if (h->hosts) {
    memcpy(h->hosts + (size_t)h->n * BOOT_HOST_MAX, name, len);
    h->hosts[(size_t)h->n * BOOT_HOST_MAX + len] = '\0';
  }
  h->n++;
  return 0;
}

/* Expands item[0..len) (brackets allowed, no top-level comma) after the prefix acc[0..alen). */
static int expand(struct hl *h, const char *item, size_t len, char *acc, size_t alen)
{
  const char *lb = memchr(item, '[', len);
  const char *rb0 = memchr(item, ']', len);
  if (!lb) {
    if (rb0) {
      errf(h->err, h->errlen, "host list: ']' without '['");
      return -1;
    }
    if (alen + len >= BOOT_HOST_MAX) {
      errf(h->err, h->errlen, "host list: a host name longer than %u bytes", BOOT_HOST_MAX - 1);
      return -1;
    }
    memcpy(acc + alen, item, len);
    return emit(h, acc, alen + len);
  }
  size_t pre = (size_t)(lb - item);
  const char *rb = memchr(lb, ']', len - pre);
  if (!rb || (rb0 && rb0 < lb) || memchr(lb + 1, '[', (size_t)(rb - lb - 1))) {
    errf(h->err, h->errlen, "host list: unbalanced brackets in '%.*s'", (int)len, item);
    return -1;
  }
  if (alen + pre >= BOOT_HOST_MAX) {
    errf(h->err, h->errlen, "host list: a host name longer than %u bytes", BOOT_HOST_MAX - 1);
    return -1;
  }
  if (rb == lb + 1) {
    errf(h->err, h->errlen, "host list: bad range '[]'");
    return -1;
  }
  memcpy(acc + alen, item, pre);
  alen += pre;
  const char *rest = rb + 1;
  size_t restlen = len - (size_t)(rest - item);
  /* the ranges: "1-3,07,10-12" */
  const char *p = lb + 1;
  while (p < rb) {
    const char *comma = memchr(p, ',', (size_t)(rb - p));
    const char *end = comma ? comma : rb;
    const char *dash = memchr(p, '-', (size_t)(end - p));
    const char *hi = dash ? dash + 1 : p;
    size_t lolen = (size_t)((dash ? dash : end) - p), hilen = (size_t)(end - hi);
    char a[24], b[24];
    uint32_t lo, up;
    if (!lolen || !hilen || lolen >= sizeof(a) || hilen >= sizeof(b)) {
      errf(h->err, h->errlen, "host list: bad range '%.*s'", (int)(end - p), p);
      return -1;
    }
    memcpy(a, p, lolen);
    a[lolen] = '\0';
    memcpy(b, hi, hilen);
    b[hilen] = '\0';
    if (parse_u32(a, UINT32_MAX, &lo) || parse_u32(b, UINT32_MAX, &up) || up < lo) {
      errf(h->err, h->errlen, "host list: bad range '%.*s'", (int)(end - p), p);
      return -1;
    }
    if (up - lo >= h->max) {
      errf(h->err, h->errlen, "host list: more than %" PRIu32 " hosts", h->max);
      return -1;
    }
    int width = (int)lolen; /* Slurm pads to the lower bound's digits: [08-10] */
    for (uint32_t v = lo;; v++) {
      char num[24];
      int k = snprintf(num, sizeof(num), "%0*" PRIu32, width, v);
      if (alen + (size_t)k >= BOOT_HOST_MAX) {
        errf(h->err, h->errlen, "host list: a host name longer than %u bytes", BOOT_HOST_MAX - 1);
        return -1;
      }
      memcpy(acc + alen, num, (size_t)k);
      if (expand(h, rest, restlen, acc, alen + (size_t)k))
        return -1;
      if (v == up)
        break;
    }
    p = comma ? comma + 1 : rb;
  }
  return 0;
}

int pp_launch_hostlist(const char *s, char *hosts, uint32_t max, uint32_t *n, char *err,
                       size_t errlen)
{
  struct hl h = {.hosts = hosts, .max = max, .err = err, .errlen = errlen};
  char acc[BOOT_HOST_MAX];
  *n = 0;
  const char *item = s;
  int depth = 0;
  for (const char *p = s;; p++) {
    if (*p == '[')
      depth++;
    else if (*p == ']')
      depth--;
    if (depth < 0 || depth > 1) {
      errf(err, errlen, "host list: unbalanced brackets in '%s'", s);
      return -1;
    }
    if ((*p == ',' && depth == 0) || *p == '\0') {
      if (*p == '\0' && depth) {
        errf(err, errlen, "host list: unbalanced brackets in '%s'", s);
        return -1;
      }
      if (expand(&h, item, (size_t)(p - item), acc, 0))
        return -1;
      item = p + 1;
      if (*p == '\0')
        break;
    }
  }
  *n = h.n;
  return 0;
}

/* ---- the environment */

static int take(char *const *envp, const char *rname, const char *sname, const char *alt_sname,
                enum pp_launch_env_kind kind, struct pp_launch_env *out, char *err,
                size_t errlen)
{
  const char *r = env_get(envp, rname), *s = env_get(envp, sname);
  if (!s && alt_sname)
    s = env_get(envp, alt_sname);
  if (!r)
    return 0;
  if (!s) {
    errf(err, errlen, "%s is set but %s is not", rname, sname);
    return -1;
  }
  if (parse_u32(s, PP_MAX_RANKS + 1, &out->size) || out->size == 0) {
    errf(err, errlen, "%s='%s': not a number of ranks in 1..%u", sname, s, PP_MAX_RANKS);
    return -1;
  }
  if (parse_u32(r, out->size, &out->rank)) {
    errf(err, errlen, "%s='%s': not a rank below %s=%" PRIu32, rname, r, sname, out->size);
    return -1;
  }
  out->kind = kind;
  return 1;
}

int pp_launch_env_parse(char *const *envp, struct pp_launch_env *out, char *err, size_t errlen)
{
  *out = (struct pp_launch_env){.kind = PP_LAUNCH_ENV_NONE};
  int k = take(envp, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, PP_LAUNCH_ENV_OMPI,
               out, err, errlen);
  if (k == 0)
    k = take(envp, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", PP_LAUNCH_ENV_SLURM, out, err,
             errlen);
  if (k <= 0)
    return k;
  const char *nl = env_get(envp, "SLURM_STEP_NODELIST");
  if (!nl)
    nl = env_get(envp, "SLURM_NODELIST");
  if (out->kind == PP_LAUNCH_ENV_SLURM && nl) {
    char *hosts = malloc((size_t)PP_MAX_RANKS * BOOT_HOST_MAX), e2[256];
    if (!hosts) {
      errf(err, errlen, "out of memory");
      return -1;
    }
    int rc = pp_launch_hostlist(nl, hosts, PP_MAX_RANKS, &out->nhosts, e2, sizeof(e2));
    if (rc == 0 && out->nhosts)
      snprintf(out->first_host, sizeof(out->first_host), "%s", hosts);
    free(hosts);
    if (rc) {
      errf(err, errlen, "SLURM_NODELIST='%.200s': %s", nl, e2);
      return -1;
    }
  }
  return 1;
}
