/* The registration cache; see rcache.h. */
#include "prepost/rcache.h"

#include <stdlib.h>
#include <string.h>

enum pp_status pp_rcache_init(struct pp_rcache *rc, const struct pp_nic_ops *ops, void *nic,
                              uint32_t max_entries, uint64_t max_bytes, unsigned access)
{
  memset(rc, 0, sizeof(*rc));
  if (max_entries == 0 || max_bytes < PP_RCACHE_PAGE)
    return PP_INVALID;
  rc->ops = ops;
  rc->nic = nic;
  rc->access = access;
  rc->max_entries = max_entries;
  rc->max_bytes = max_bytes;
  rc->mask = 15;
  while (rc->mask + 1 < 2 * max_entries)
    rc->mask = rc->mask * 2 + 1;
  rc->pool = calloc(max_entries, sizeof(*rc->pool));
  rc->bucket = calloc((size_t)rc->mask + 1, sizeof(*rc->bucket));
  if (!rc->pool || !rc->bucket) {
    free(rc->pool);
    free(rc->bucket);
    return PP_NOMEM;
  }
  for (uint32_t i = max_entries; i-- > 0;) {
    rc->pool[i].next = rc->free;
    rc->free = &rc->pool[i];
  }
  return PP_OK;
}

static struct pp_rcache_entry **slot_of(const struct pp_rcache *rc, uint64_t addr)
{
  uint64_t x = (addr / PP_RCACHE_PAGE) * 0x9e3779b97f4a7c15ull;
  return &rc->bucket[(x ^ (x >> 29)) & rc->mask];
}

static void list_remove(struct pp_rcache *rc, struct pp_rcache_entry *e)
{
  if (e->prev)
    e->prev->next = e->next;
  else
    rc->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    rc->tail = e->prev;
  e->prev = e->next = NULL;
}

static void list_push_front(struct pp_rcache *rc, struct pp_rcache_entry *e)
{
  e->prev = NULL;
  e->next = rc->head;
  if (rc->head)
    rc->head->prev = e;
  else
    rc->tail = e;
  rc->head = e;
}

/* Deregisters and frees an unused entry. */
static void drop(struct pp_rcache *rc, struct pp_rcache_entry *e)
{
  struct pp_rcache_entry **s = slot_of(rc, e->addr);
  while (*s != e)
    s = &(*s)->hnext;
  *s = e->hnext;
  list_remove(rc, e);
  rc->ops->dereg_mr(rc->nic, &e->mr);
  rc->bytes -= e->len;
  rc->n--;
  e->next = rc->free;
  rc->free = e;
}

void pp_rcache_fini(struct pp_rcache *rc)
{
  while (rc->head)
    drop(rc, rc->head);
  free(rc->pool);
  free(rc->bucket);
  memset(rc, 0, sizeof(*rc));
}

/* Evicts unused entries, least recently used first, until a registration of len bytes fits. */
static bool make_room(struct pp_rcache *rc, uint64_t len)
{
  struct pp_rcache_entry *e = rc->tail;
  while ((rc->n == rc->max_entries || rc->bytes + len > rc->max_bytes) && e) {
    struct pp_rcache_entry *prev = e->prev;
    if (e->refs == 0) {
      drop(rc, e);
      rc->st.evictions++;
    }
    e = prev;
  }
  return rc->n < rc->max_entries && rc->bytes + len <= rc->max_bytes;
}

bool pp_rcache_evict(struct pp_rcache *rc)
{
  for (struct pp_rcache_entry *e = rc->tail; e; e = e->prev)
    if (e->refs == 0) {
      drop(rc, e);
      rc->st.evictions++;
      return true;
    }
  return false;
}

enum pp_status pp_rcache_get(struct pp_rcache *rc, const void *addr, size_t len,
                             struct pp_rcache_entry **out)
{
  uint64_t a = (uint64_t)(uintptr_t)addr;
  uint64_t lo = a & ~(uint64_t)(PP_RCACHE_PAGE - 1);
  uint64_t hi = (a + len + PP_RCACHE_PAGE - 1) & ~(uint64_t)(PP_RCACHE_PAGE - 1);
  if (hi == lo)
    hi = lo + PP_RCACHE_PAGE;
  *out = NULL;
  struct pp_rcache_entry *hit = NULL;
  for (struct pp_rcache_entry *e = *slot_of(rc, lo); e && !hit; e = e->hnext)
    if (!e->invalid && e->addr == lo && hi <= e->addr + e->len)
      hit = e;
  uint32_t k = 0;
  for (struct pp_rcache_entry *e = rc->head; e && !hit && k < 8; e = e->next, k++)
    if (!e->invalid && e->addr <= lo && hi <= e->addr + e->len)
      hit = e;
  if (hit) {
    list_remove(rc, hit);
    list_push_front(rc, hit);
    hit->refs++;
    rc->st.hits++;
    *out = hit;
    return PP_OK;
  }
  if (hi - lo > rc->max_bytes)
    return PP_LIMIT;
  if (!make_room(rc, hi - lo))
    return PP_AGAIN;
  struct pp_mr mr;
  enum pp_status s;
  /* the NIC's MR table is full: unused registrations of ours make room there too */
  while ((s = (enum pp_status)rc->ops->reg_mr(rc->nic, (void *)(uintptr_t)lo, (size_t)(hi - lo),
                                              rc->access, &mr)) == PP_LIMIT &&
         pp_rcache_evict(rc))
    ;
  if (s == PP_LIMIT && rc->n > 0)
    return PP_AGAIN; /* every registration of ours is in use: retry after a put */
  if (s != PP_OK)
    return s;
  struct pp_rcache_entry *e = rc->free;
  rc->free = e->next;
  struct pp_rcache_entry **slot = slot_of(rc, lo);
  *e = (struct pp_rcache_entry){.addr = lo, .len = hi - lo, .mr = mr, .refs = 1, .hnext = *slot};
  *slot = e;
  list_push_front(rc, e);
  rc->n++;
  rc->bytes += e->len;
  rc->st.misses++;
  rc->st.registered_bytes += e->len;
  *out = e;
  return PP_OK;
}

void pp_rcache_put(struct pp_rcache *rc, struct pp_rcache_entry *e)
{
  if (--e->refs == 0 && e->invalid)
    drop(rc, e);
}

uint32_t pp_rcache_invalidate(struct pp_rcache *rc, const void *addr, size_t len)
{
  uint64_t a = (uint64_t)(uintptr_t)addr, end = a + len;
  uint32_t n = 0;
  struct pp_rcache_entry *e = rc->head;
  while (e) {
    struct pp_rcache_entry *next = e->next;
    if (!e->invalid && e->addr < end && a < e->addr + e->len) {
      n++;
      rc->st.invalidations++;
      if (e->refs == 0)
        drop(rc, e);
      else
        e->invalid = true;
    }
    e = next;
  }
  return n;
}
