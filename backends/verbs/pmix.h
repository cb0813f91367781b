/*
 * The PMIx client of the verbs driver (launch.h says why): rank, size and hosts from the
 * launcher's PMIx server, and an all-to-all exchange of one blob per rank through its key-value
 * store (PMIx_Put, PMIx_Commit, a collecting PMIx_Fence, PMIx_Get), which replaces the HELLO and
 * TABLE of the TCP bootstrap (boot.h). Every call is bounded (PMIX_TIMEOUT) and fails with a
 * sentence naming the PMIx call and its status.
 */
#ifndef PP_VERBS_PMIX_H
#define PP_VERBS_PMIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot.h"

/* True when a PMIx launcher started this process (PMIX_NAMESPACE and PMIX_RANK are set). */
bool vpmix_launched(void);

struct vpmix;
/* PMIx_Init, then the job's size (PMIX_JOB_SIZE). 0, or -1 with a sentence. */
int vpmix_init(struct vpmix **out, uint32_t *rank, uint32_t *size, char *err, size_t errlen);
/* The host `rank` runs on (PMIX_HOSTNAME). 0, or -1 with a sentence. */
int vpmix_hostname(struct vpmix *p, uint32_t rank, char *out, size_t len, char *err,
                   size_t errlen);
/* Publishes data under key (PMIX_GLOBAL scope: every rank of the job may read it), visible to
 * the others after the next vpmix_fence. 0, or -1 with a sentence. */
int vpmix_put(struct vpmix *p, const char *key, const void *data, size_t n, char *err,
              size_t errlen);
/* Commits what was put and waits (at most timeout_ns, rounded up to whole seconds) until every
 * rank of the job has, collecting the data. 0, or -1 with a sentence. */
int vpmix_fence(struct vpmix *p, uint64_t timeout_ns, char *err, size_t errlen);
/* What `rank` put under key, into out (reset; at most max bytes). 1 got it, 0 that rank put
 * nothing under key, -1 with a sentence (more than max bytes, or the get failed). */
int vpmix_get(struct vpmix *p, uint32_t rank, const char *key, struct boot_buf *out, size_t max,
              char *err, size_t errlen);
/* PMIx_Finalize; p freed. NULL: nothing. */
void vpmix_finalize(struct vpmix *p);

#endif
