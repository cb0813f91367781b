/*
 * Info objects: Info_create, Info_set, Info_get, Info_get_valuelen, Info_get_string,
 * Info_delete, Info_get_nkeys, Info_get_nthkey, Info_dup, Info_free, and MPI_INFO_ENV (empty:
 * mpirun passes no hints). Keys keep the order they were first set in (nthkey is that order).
 * Bounded: PP_MAX_INFO objects, PP_MAX_INFO_KEYS keys each (MPI_ERR_NO_MEM past either); keys of
 * at most MPI_MAX_INFO_KEY characters, values of at most MPI_MAX_INFO_VAL (MPI_ERR_INFO_KEY /
 * MPI_ERR_INFO_VALUE).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "impl.h"

#define PP_MAX_INFO 256u
#define PP_MAX_INFO_KEYS 64u
#define PP_INFO_BASE 0x9c000000u /* MPICH's "direct" info handles */

struct info_kv {
  char *key, *val;
};

struct info {
  bool used;
  uint32_t n;
  struct info_kv kv[PP_MAX_INFO_KEYS];
};

static struct info infos[PP_MAX_INFO];
static struct info info_env = {.used = true}; /* MPI_INFO_ENV */

static struct info *info_get(MPI_Info h)
{
  if (h == MPI_INFO_ENV)
    return &info_env;
  uint32_t i = (uint32_t)h - PP_INFO_BASE;
  if ((uint32_t)h < PP_INFO_BASE || i >= PP_MAX_INFO || !infos[i].used)
    return NULL;
  return &infos[i];
}

static int info_arg(const char *fn, MPI_Info h, struct info **in)
{
  pp_need_init(fn);
  if (!(*in = info_get(h)))
    return pp_err(NULL, fn, MPI_ERR_INFO, "info 0x%x is not a live info object", h);
  return MPI_SUCCESS;
}

static int key_arg(const char *fn, const char *key)
{
  if (!key)
    return pp_err(NULL, fn, MPI_ERR_INFO_KEY, "key is NULL");
  size_t n = strlen(key);
  if (n == 0 || n > MPI_MAX_INFO_KEY)
    return pp_err(NULL, fn, MPI_ERR_INFO_KEY, "a key of %zu characters (1..%d)", n,
                  MPI_MAX_INFO_KEY);
  return MPI_SUCCESS;
}

static struct info_kv *find(struct info *in, const char *key)
{
  for (uint32_t i = 0; i < in->n; i++)
    if (!strcmp(in->kv[i].key, key))
      return &in->kv[i];
  return NULL;
}

static void info_clear(struct info *in)
{
  for (uint32_t i = 0; i < in->n; i++) {
    free(in->kv[i].key);
    free(in->kv[i].val);
  }
  memset(in, 0, sizeof(*in));
}

static int info_new(const char *fn, MPI_Info *out, struct info **in)
{
  if (!out)
    return pp_err(NULL, fn, MPI_ERR_ARG, "info is NULL");
  for (uint32_t i = 0; i < PP_MAX_INFO; i++)
    if (!infos[i].used) {
      infos[i].used = true;
      *in = &infos[i];
      *out = (MPI_Info)(PP_INFO_BASE + i);
      return MPI_SUCCESS;
    }
  return pp_err(NULL, fn, MPI_ERR_NO_MEM, "more than %u info objects (free some with "
                                          "MPI_Info_free)", PP_MAX_INFO);
}

int PMPI_Info_create(MPI_Info *info)
{
  struct info *in;
  pp_need_init("MPI_Info_create");
  return info_new("MPI_Info_create", info, &in);
}
PP_ALIAS(MPI_Info_create);

/* sets key to val in `in` (a copy of each): MPI_SUCCESS or MPI_ERR_NO_MEM */
static int put(struct info *in, const char *key, const char *val)
{
  struct info_kv *kv = find(in, key);
  char *v = strdup(val);
  if (!v)
    return MPI_ERR_NO_MEM;
  if (kv) {
    free(kv->val);
    kv->val = v;
    return MPI_SUCCESS;
  }
  char *k = in->n < PP_MAX_INFO_KEYS ? strdup(key) : NULL;
  if (!k) {
    free(v);
    return MPI_ERR_NO_MEM;
  }
  in->kv[in->n++] = (struct info_kv){.key = k, .val = v};
  return MPI_SUCCESS;
}

int PMPI_Info_set(MPI_Info info, const char *key, const char *value)
{
  const char *fn = "MPI_Info_set";
  struct info *in;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = key_arg(fn, key)))
    return e;
  if (in == &info_env)
    return pp_err(NULL, fn, MPI_ERR_INFO, "MPI_INFO_ENV cannot be changed");
  if (!value || strlen(value) > MPI_MAX_INFO_VAL)
    return pp_err(NULL, fn, MPI_ERR_INFO_VALUE, "a value that is NULL or longer than %d",
                  MPI_MAX_INFO_VAL);
  if ((e = put(in, key, value)))
    return pp_err(NULL, fn, e, "more than %u keys in one info object, or no memory",
                  PP_MAX_INFO_KEYS);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_set);

int PMPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag)
{
  const char *fn = "MPI_Info_get";
  struct info *in;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = key_arg(fn, key)))
    return e;
  if (valuelen < 0 || !flag || (valuelen && !value))
    return pp_err(NULL, fn, MPI_ERR_ARG, "valuelen %d, value or flag NULL", valuelen);
  struct info_kv *kv = find(in, key);
  *flag = kv != NULL;
  if (kv) { /* at most valuelen characters, and the terminating NUL (MPI 4.0 10.2) */
    size_t n = strlen(kv->val), m = n < (size_t)valuelen ? n : (size_t)valuelen;
    memcpy(value, kv->val, m);
    value[m] = '\0';
  }
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_get);

int PMPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen, int *flag)
{
  const char *fn = "MPI_Info_get_valuelen";
  struct info *in;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = key_arg(fn, key)))
    return e;
  struct info_kv *kv = find(in, key);
  *flag = kv != NULL;
  if (kv)
    *valuelen = (int)strlen(kv->val);
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_get_valuelen);

int PMPI_Info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag)
{
  const char *fn = "MPI_Info_get_string";
  struct info *in;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = key_arg(fn, key)))
    return e;
  if (!buflen || *buflen < 0 || !flag || (*buflen && !value))
    return pp_err(NULL, fn, MPI_ERR_ARG, "buflen, value or flag");
  struct info_kv *kv = find(in, key);
  *flag = kv != NULL;
  if (!kv)
    return MPI_SUCCESS;
  size_t n = strlen(kv->val);
  if (*buflen) { /* MPI 4.0: at most buflen - 1 characters and the NUL; buflen = the size */
    size_t m = n < (size_t)*buflen - 1 ? n : (size_t)*buflen - 1;
    memcpy(value, kv->val, m);
    value[m] = '\0';
  }
  *buflen = (int)n + 1;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_get_string);

int PMPI_Info_delete(MPI_Info info, const char *key)
{
  const char *fn = "MPI_Info_delete";
  struct info *in;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = key_arg(fn, key)))
    return e;
  struct info_kv *kv = find(in, key);
  if (!kv)
    return pp_err(NULL, fn, MPI_ERR_INFO_NOKEY, "no key '%s'", key);
  free(kv->key);
  free(kv->val);
  uint32_t i = (uint32_t)(kv - in->kv);
  memmove(&in->kv[i], &in->kv[i + 1], sizeof(in->kv[0]) * (in->n - i - 1));
  in->n--;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_delete);

int PMPI_Info_get_nkeys(MPI_Info info, int *nkeys)
{
  struct info *in;
  int e = info_arg("MPI_Info_get_nkeys", info, &in);
  if (e)
    return e;
  *nkeys = (int)in->n;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_get_nkeys);

int PMPI_Info_get_nthkey(MPI_Info info, int n, char *key)
{
  const char *fn = "MPI_Info_get_nthkey";
  struct info *in;
  int e = info_arg(fn, info, &in);
  if (e)
    return e;
  if (n < 0 || (uint32_t)n >= in->n)
    return pp_err(NULL, fn, MPI_ERR_ARG, "key %d of %u", n, in->n);
  if (!key)
    return pp_err(NULL, fn, MPI_ERR_ARG, "key is NULL");
  strcpy(key, in->kv[n].key); /* the caller has MPI_MAX_INFO_KEY + 1: key_arg bounded it */
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_get_nthkey);

int PMPI_Info_dup(MPI_Info info, MPI_Info *newinfo)
{
  const char *fn = "MPI_Info_dup";
  struct info *in, *out;
  int e;
  if ((e = info_arg(fn, info, &in)) || (e = info_new(fn, newinfo, &out)))
    return e;
  for (uint32_t i = 0; i < in->n; i++)
    if ((e = put(out, in->kv[i].key, in->kv[i].val))) {
      info_clear(out);
      *newinfo = MPI_INFO_NULL;
      return pp_err(NULL, fn, e, "no memory");
    }
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_dup);

int PMPI_Info_free(MPI_Info *info)
{
  const char *fn = "MPI_Info_free";
  struct info *in;
  int e;
  if (!info)
    return pp_err(NULL, fn, MPI_ERR_ARG, "info is NULL");
  if ((e = info_arg(fn, *info, &in)))
    return e;
  if (in == &info_env)
    return pp_err(NULL, fn, MPI_ERR_INFO, "MPI_INFO_ENV is predefined: it cannot be freed");
  info_clear(in);
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}
PP_ALIAS(MPI_Info_free);
