/*
 * A bounded LRU registration cache for zero-copy user buffers.
 *
 * Registrations are local (the access flags given at init, without remote access): the p2p layer
 * uses them as the source of RDMA WRITEs and the target of RDMA READs. Remote access is never
 * cached: a buffer a peer may write or read gets its own registration for the duration of that
 * transfer (engine/proto/p2p/regs.c), so a stale rkey is dead once the transfer is over.
 *
 * Ranges are widened to whole 4 KiB pages (the NIC pins pages anyway), so neighbouring buffers
 * and repeated use of one buffer hit the same registration. The cache holds at most max_entries
 * registrations covering at most max_bytes; past either bound the least recently used unused
 * registration is deregistered. A lookup first tries the registration that starts on the same
 * page (a hash table: the common case of a buffer, or a fragment of one, used again), then the 8
 * most recently used ones for a registration that contains the range; anything else is a miss,
 * so a lookup costs the same at 8 or 65536 entries. When the application frees memory it calls
 * pp_rcache_invalidate():
 * registrations overlapping the range are dropped (at once, or at their last pp_rcache_put()).
 */
#ifndef PP_RCACHE_H
#define PP_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nic.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif
PP_API_BEGIN

#define PP_RCACHE_PAGE 4096u

struct pp_rcache_entry {
  uint64_t addr, len; /* the registered, page-aligned range */
  struct pp_mr mr;
  uint32_t refs;
  bool invalid;       /* freed by the application while in use: dropped at the last put */
  struct pp_rcache_entry *prev, *next;
  struct pp_rcache_entry *hnext; /* hash chain by start page */
};

struct pp_rcache_stats {
  uint64_t hits, misses, evictions, invalidations, registered_bytes, entries;
};

struct pp_rcache {
  const struct pp_nic_ops *ops;
  void *nic;
  unsigned access;
  struct pp_rcache_entry *pool, *free;
  struct pp_rcache_entry *head, *tail; /* most recently used first */
  struct pp_rcache_entry **bucket;     /* by start page */
  uint32_t mask;
  uint32_t max_entries, n;
  uint64_t max_bytes, bytes;
  struct pp_rcache_stats st;
};

enum pp_status pp_rcache_init(struct pp_rcache *rc, const struct pp_nic_ops *ops, void *nic,
                              uint32_t max_entries, uint64_t max_bytes, unsigned access);
/* Deregisters every registration (they must all have been put back). */
void pp_rcache_fini(struct pp_rcache *rc);

/*
 * A registration covering [addr, addr + len), with one more reference; *out->mr has the lkey.
 * PP_AGAIN when every cached registration is in use and no room is left (retry after a put);
 * PP_LIMIT when the range alone exceeds max_bytes. When reg_mr fails with PP_LIMIT (the NIC's MR
 * table is full), unused cached registrations are deregistered, least recently used first, until
 * it succeeds; with none left it is PP_AGAIN while some of ours are in use, else PP_LIMIT. Any
 * other failure of reg_mr is returned as it is.
 */
enum pp_status pp_rcache_get(struct pp_rcache *rc, const void *addr, size_t len,
                             struct pp_rcache_entry **out);
/* Deregisters the least recently used unused registration (the NIC's MR table is full and
 * something else needs an entry). false when every registration is in use. */
bool pp_rcache_evict(struct pp_rcache *rc);
void pp_rcache_put(struct pp_rcache *rc, struct pp_rcache_entry *e);
/* The application frees [addr, addr + len). Returns how many registrations it invalidated. */
uint32_t pp_rcache_invalidate(struct pp_rcache *rc, const void *addr, size_t len);

PP_API_END
#ifdef __cplusplus
}
#endif

#endif
