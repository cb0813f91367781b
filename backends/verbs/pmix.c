/* The PMIx client of the verbs driver (pmix.h), on OpenPMIx's client library (libpmix). */
#define _GNU_SOURCE
#include "pmix.h"
#include "errf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

struct vpmix {
  pmix_proc_t me;
};

bool vpmix_launched(void)
{
  return getenv("PMIX_NAMESPACE") && getenv("PMIX_RANK");
}

int vpmix_init(struct vpmix **out, uint32_t *rank, uint32_t *size, char *err, size_t errlen)
{
  *out = NULL;
  struct vpmix *p = calloc(1, sizeof(*p));
  if (!p) {
    errf(err, errlen, "out of memory");
    return -1;
  }
  pmix_status_t rc = PMIx_Init(&p->me, NULL, 0);
  if (rc != PMIX_SUCCESS) {
    errf(err, errlen, "PMIx_Init: %s (is the launcher's PMIx server reachable?)",
         PMIx_Error_string(rc));
    free(p);
    return -1;
  }
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, p->me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t *v = NULL;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
  if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT32 || v->data.uint32 == 0) {
    errf(err, errlen, "PMIx_Get(%s): %s", PMIX_JOB_SIZE,
         rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a positive uint32");
    if (v)
      PMIX_VALUE_RELEASE(v);
    PMIx_Finalize(NULL, 0);
    free(p);
    return -1;
  }
  *size = v->data.uint32;
  PMIX_VALUE_RELEASE(v);
  *rank = p->me.rank;
  *out = p;
  return 0;
}

int vpmix_hostname(struct vpmix *p, uint32_t rank, char *out, size_t len, char *err,
                   size_t errlen)
{
  pmix_proc_t who;
  PMIX_LOAD_PROCID(&who, p->me.nspace, rank);
  pmix_value_t *v = NULL;
  pmix_status_t rc = PMIx_Get(&who, PMIX_HOSTNAME, NULL, 0, &v);
  int ok = rc == PMIX_SUCCESS && v && v->type == PMIX_STRING && v->data.string;
  if (ok)
    snprintf(out, len, "%s", v->data.string);
  else
    errf(err, errlen, "PMIx_Get(%s) of rank %" PRIu32 ": %s", PMIX_HOSTNAME, rank,
         rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "not a string");
  if (v)
    PMIX_VALUE_RELEASE(v);
  return ok ? 0 : -1;
}

int vpmix_put(struct vpmix *p, const char *key, const void *data, size_t n, char *err,
              size_t errlen)
{
  (void)p;
  pmix_byte_object_t bo = {.bytes = (char *)data, .size = n};
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  pmix_status_t rc = PMIx_Value_load(&v, &bo, PMIX_BYTE_OBJECT); /* copies */
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Put(PMIX_GLOBAL, key, &v);
  PMIx_Value_destruct(&v);
  if (rc != PMIX_SUCCESS) {
    errf(err, errlen, "PMIx_Put(%s, %zu bytes): %s", key, n, PMIx_Error_string(rc));
    return -1;
  }
  return 0;
}

int vpmix_fence(struct vpmix *p, uint64_t timeout_ns, char *err, size_t errlen)
{
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) {
    errf(err, errlen, "PMIx_Commit: %s", PMIx_Error_string(rc));
    return -1;
  }
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, p->me.nspace, PMIX_RANK_WILDCARD);
  bool collect = true;
  uint64_t s = (timeout_ns + 999999999ull) / 1000000000ull;
  int secs = s > 86400 ? 86400 : (int)s;
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  rc = PMIx_Info_load(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Info_load(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Fence(&job, 1, info, secs ? 2 : 1);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) {
    errf(err, errlen, "PMIx_Fence (waiting for every rank's connection information, at most "
                      "%d s): %s", secs, PMIx_Error_string(rc));
    return -1;
  }
  return 0;
}

int vpmix_get(struct vpmix *p, uint32_t rank, const char *key, struct boot_buf *out, size_t max,
              char *err, size_t errlen)
{
  out->len = out->at = 0;
  out->bad = false;
  pmix_proc_t who;
  PMIX_LOAD_PROCID(&who, p->me.nspace, rank);
  /* after a collecting fence everything is local: do not ask the server for what is not */
  bool optional = true;
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  pmix_value_t *v = NULL;
  pmix_status_t rc = PMIx_Info_load(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
  if (rc == PMIX_SUCCESS)
    rc = PMIx_Get(&who, key, &info, 1, &v);
  PMIX_INFO_DESTRUCT(&info);
  int ret = -1;
  if (rc == PMIX_ERR_NOT_FOUND) {
    ret = 0;
  } else if (rc != PMIX_SUCCESS) {
    errf(err, errlen, "PMIx_Get(%s) of rank %" PRIu32 ": %s", key, rank, PMIx_Error_string(rc));
  } else if (!v || v->type != PMIX_BYTE_OBJECT) {
    errf(err, errlen, "PMIx_Get(%s) of rank %" PRIu32 ": not a byte object", key, rank);
  } else if (v->data.bo.size > max) {
    errf(err, errlen, "PMIx_Get(%s) of rank %" PRIu32 ": %zu bytes, at most %zu expected", key,
         rank, v->data.bo.size, max);
  } else {
    boot_put_bytes(out, v->data.bo.bytes, v->data.bo.size);
    if (out->bad)
      errf(err, errlen, "out of memory");
    else
      ret = 1;
  }
  if (v)
    PMIX_VALUE_RELEASE(v);
  return ret;
}

void vpmix_finalize(struct vpmix *p)
{
  if (!p)
    return;
  pmix_status_t rc = PMIx_Finalize(NULL, 0);
  (void)rc; /* at the end of the process: nothing left to do about a failure */
  free(p);
}
