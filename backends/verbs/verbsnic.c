/*
 * prepost/nic.h's operations on libibverbs. See verbsnic.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "prepost/verbsnic.h"
#include "counters.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* prepost/nic.h promises ibverbs' numbers; hold it to that at compile time. */
_Static_assert((int)PP_WC_RNR_RETRY_EXC_ERR == (int)IBV_WC_RNR_RETRY_EXC_ERR, "wc status");
_Static_assert((int)PP_WC_GENERAL_ERR == (int)IBV_WC_GENERAL_ERR, "wc status");
_Static_assert((int)PP_WC_OP_RECV_RDMA_WITH_IMM == (int)IBV_WC_RECV_RDMA_WITH_IMM, "wc opcode");
_Static_assert((int)PP_WR_RDMA_READ == (int)IBV_WR_RDMA_READ, "wr opcode");
_Static_assert((int)PP_WR_SEND_WITH_IMM == (int)IBV_WR_SEND_WITH_IMM, "wr opcode");
_Static_assert((int)PP_QPS_ERR == (int)IBV_QPS_ERR, "qp state");
_Static_assert((int)PP_EVENT_SRQ_LIMIT_REACHED == (int)IBV_EVENT_SRQ_LIMIT_REACHED, "event");
_Static_assert((int)PP_EVENT_QP_LAST_WQE_REACHED == (int)IBV_EVENT_QP_LAST_WQE_REACHED, "event");
_Static_assert((int)PP_MTU_4096 == (int)IBV_MTU_4096, "mtu");
_Static_assert((int)PP_ACCESS_REMOTE_READ == (int)IBV_ACCESS_REMOTE_READ, "access");
_Static_assert((int)PP_SEND_SIGNALED == (int)IBV_SEND_SIGNALED, "send flags");
_Static_assert((int)PP_WC_WITH_IMM == (int)IBV_WC_WITH_IMM, "wc flags");
_Static_assert((int)PP_QP_DEST_QPN == (int)IBV_QP_DEST_QPN, "qp attr mask");
_Static_assert((int)PP_QP_MAX_DEST_RD_ATOMIC == (int)IBV_QP_MAX_DEST_RD_ATOMIC, "qp attr mask");
_Static_assert((int)PP_QP_MIN_RNR_TIMER == (int)IBV_QP_MIN_RNR_TIMER, "qp attr mask");

#define QP_HASH 2048 /* power of two, > the engine's max QPs per rank (64 peers x 8 channels) */
#define MAX_SRQ 64
#define CQ_MIN 256

/* A send WR posted and not completed: its wr_id, and whether it consumes a receive at the
 * responder (SEND, SEND_WITH_IMM, RDMA_WRITE_WITH_IMM; not RDMA_WRITE nor RDMA_READ). */
struct vsend {
  uint64_t wr_id;
  bool takes_recv;
};

struct vqp {
  struct ibv_qp *qp; /* NULL: free (a tombstone when `used`) */
  bool used;         /* the slot held a QP once: probe chains go through it */
  uint32_t peer;
  uint32_t srq_num;
  uint32_t send_wr, recv_wr; /* CQ capacity this QP needs */
  /* the send WRs posted and not completed, in order (signalled or not): a completion retires
   * its WR and every unsignalled one posted before it */
  struct vsend *sq;
  uint32_t sq_cap, sq_head, sq_len;
  uint32_t sq_takes_recv; /* of those, the ones that consume a receive at the responder */
  uint32_t rq_posted;     /* receives posted to it (not its SRQ's) and not completed */
};

struct vnic {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *chan;
  struct ibv_cq *scq, *rcq;
  int scq_cap, rcq_cap, scq_need, rcq_need, max_cqe;
  char device[VNIC_NAME_MAX];
  int port;
  int gid_index;
  struct ibv_port_attr pattr;
  union ibv_gid gid;
  uint32_t nranks;
  struct vnic_addr *peers;
  bool *peer_set;
  struct vqp qps[QP_HASH]; /* open addressing on qp_num, qp == NULL: empty */
  uint32_t nqps;
  struct ibv_srq *srqs[MAX_SRQ]; /* srq_num = index + 1 */
  uint32_t srq_wr[MAX_SRQ];
  uint32_t srq_posted[MAX_SRQ]; /* receives posted to it and not completed */
  struct ibv_mr **mrs; /* grown on demand (registration caches register many regions) */
  uint32_t mr_cap, max_mr;
  uint64_t sends_out; /* send WRs outstanding on every QP (the sum of their sq_len) */
  uint64_t polled[2];  /* completions polled from the send CQ, the receive CQ */
  uint64_t posted[2];  /* send WRs, receive WRs (QPs and SRQs) posted */
  const struct vnic_driver *drv; /* whose counter names (counters.h); NULL: unknown */
  struct vnic_raw mark;           /* the counters' zero (vnic_counters_mark) */
};

/* ---------------------------------------------------------------- helpers */

static int set_err(char *err, size_t len, enum pp_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_err(char *err, size_t len, enum pp_status s, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (err && len)
    vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return s;
}

static const char *port_state_name(enum ibv_port_state s)
{
  static const char *const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static const char *phys_state_name(uint8_t s)
{
  static const char *const names[] = {"?",      "SLEEP",    "POLLING",   "DISABLED",
                                      "PORT_CONFIGURATION_TRAINING", "LINK_UP",
                                      "LINK_ERROR_RECOVERY", "PHY_TEST"};
  return s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static struct vqp *qp_at(struct vnic *n, uint32_t qpn, uint32_t i)
{
  return &n->qps[(qpn * 2654435761u + i) & (QP_HASH - 1)];
}

/* Open addressing on qp_num; destroyed QPs leave tombstones (used, qp NULL). */
static struct vqp *qp_get(struct vnic *n, uint32_t qpn)
{
  for (uint32_t i = 0; i < QP_HASH; i++) {
    struct vqp *q = qp_at(n, qpn, i);
    if (!q->used)
      return NULL;
    if (q->qp && q->qp->qp_num == qpn)
      return q;
  }
  return NULL;
}

static struct vqp *qp_free_slot(struct vnic *n, uint32_t qpn)
{
  for (uint32_t i = 0; i < QP_HASH; i++) {
    struct vqp *q = qp_at(n, qpn, i);
    if (!q->qp)
      return q;
  }
  return NULL;
}

static struct ibv_srq *srq_get(struct vnic *n, uint32_t srq_num)
{
  return srq_num >= 1 && srq_num <= MAX_SRQ ? n->srqs[srq_num - 1] : NULL;
}

/* Grows a CQ so that it holds `need` entries (ibv_resize_cq); 0 or an errno. */
static int cq_fit(struct vnic *n, struct ibv_cq *cq, int *cap, int need)
{
  if (need <= *cap)
    return 0;
  int want = *cap;
  while (want < need)
    want *= 2;
  if (want > n->max_cqe)
    want = n->max_cqe;
  if (want < need)
    return ENOSPC;
  int rc = ibv_resize_cq(cq, want);
  if (rc)
    return rc;
  *cap = cq->cqe;
  return 0;
}

static int is_v4_mapped(const uint8_t g[16])
{
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, prefix, 12) == 0;
}

int vnic_pick_gid(const struct vnic_gid *g, int n)
{
  for (int i = 0; i < n; i++)
    if (g[i].type == IBV_GID_TYPE_ROCE_V2 && is_v4_mapped(g[i].gid))
      return (int)g[i].index;
  for (int i = 0; i < n; i++)
    if (g[i].type == IBV_GID_TYPE_ROCE_V2)
      return (int)g[i].index;
  for (int i = 0; i < n; i++)
    if (g[i].type == IBV_GID_TYPE_ROCE_V1)
      return (int)g[i].index;
  return n > 0 ? (int)g[0].index : -1;
}

void vnic_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
  if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
    snprintf(buf, len, "?");
}

const char *vnic_gid_type_name(int type)
{
  switch (type) {
  case IBV_GID_TYPE_IB:
    return "IB";
  case IBV_GID_TYPE_ROCE_V1:
    return "RoCE v1";
  case IBV_GID_TYPE_ROCE_V2:
    return "RoCE v2";
  default:
    return "?";
  }
}

/* The kernel caches hw_counters for `lifespan` ms (10 by default) after each read: wait that long
 * (plus a tick) so that what follows is read fresh. */
static void wait_lifespan(const char *device, int port)
{
  char path[256];
  snprintf(path, sizeof(path), VNIC_SYSFS_ROOT "/%s/ports/%d/hw_counters/lifespan", device, port);
  FILE *f = fopen(path, "r");
  unsigned long long ms = 0;
  bool ok = f && fscanf(f, "%llu", &ms) == 1;
  if (f)
    fclose(f);
  if (!ok)
    return;
  if (ms > 1000)
    ms = 1000;
  struct timespec t = {0, (long)(ms + 5) * 1000000};
  nanosleep(&t, NULL);
}


/* ---------------------------------------------------------------- open / close */

/* Finds the device and port: by name, or the first ACTIVE port. */
static enum pp_status find_port(const struct vnic_config *cfg, struct vnic *n, char *err,
                                size_t errlen)
{
  int num = 0;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  if (!list || num == 0) {
    int e = errno;
    if (list)
      ibv_free_device_list(list);
    return set_err(err, errlen, PP_NOTFOUND,
                   "no RDMA device: ibv_get_device_list found none%s%s (load a driver, e.g. "
                   "`modprobe rdma_rxe` and `rdma link add rxe0 type rxe netdev IFACE`; "
                   "`prepost doctor` shows what is there)",
                   e ? ": " : "", e ? strerror(e) : "");
  }
  char names[256] = "";
  char why[512] = "";
  enum pp_status s = PP_NOTFOUND;
  for (int i = 0; i < num && !n->ctx; i++) {
    const char *name = ibv_get_device_name(list[i]);
    size_t l = strlen(names);
    snprintf(names + l, sizeof(names) - l, "%s%s", l ? ", " : "", name);
    if (cfg->device[0] && strcmp(cfg->device, name) != 0)
      continue;
    struct ibv_context *ctx = ibv_open_device(list[i]);
    if (!ctx) {
      snprintf(why, sizeof(why), "cannot open device %s: %s", name, strerror(errno));
      s = PP_IO;
      continue;
    }
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da)) {
      snprintf(why, sizeof(why), "ibv_query_device(%s): %s", name, strerror(errno));
      ibv_close_device(ctx);
      s = PP_IO;
      continue;
    }
    int first = cfg->port > 0 ? cfg->port : 1, last = cfg->port > 0 ? cfg->port : da.phys_port_cnt;
    if (cfg->port > da.phys_port_cnt) {
      snprintf(why, sizeof(why), "device %s has %u port(s), port %d requested", name,
               da.phys_port_cnt, cfg->port);
      ibv_close_device(ctx);
      s = PP_NOTFOUND;
      continue;
    }
    for (int p = first; p <= last; p++) {
      struct ibv_port_attr pa;
      if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
        snprintf(why, sizeof(why), "ibv_query_port(%s, %d): %s", name, p, strerror(errno));
        s = PP_IO;
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        snprintf(why, sizeof(why), "%s port %d is %s (physical state %s), not ACTIVE", name, p,
                 port_state_name(pa.state), phys_state_name(pa.phys_state));
        s = PP_STATE;
        continue;
      }
      n->ctx = ctx;
      n->port = p;
      n->pattr = pa;
      n->max_cqe = da.max_cqe;
      n->max_mr = da.max_mr > 0 ? (uint32_t)da.max_mr : 1u << 20;
      snprintf(n->device, sizeof(n->device), "%s", name);
      break;
    }
    if (!n->ctx)
      ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (n->ctx)
    return PP_OK;
  if (cfg->device[0] && !why[0])
    return set_err(err, errlen, PP_NOTFOUND, "no RDMA device named '%s' (devices: %s)",
                   cfg->device, names);
  return set_err(err, errlen, s, "%s%s", why[0] ? why : "no ACTIVE port on any RDMA device",
                 s == PP_STATE ? " (port down: check the link / `rdma link`)" : "");
}

static enum pp_status pick_gid(const struct vnic_config *cfg, struct vnic *n, char *err,
                               size_t errlen)
{
  if (n->pattr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    n->gid_index = cfg->gid_index >= 0 ? cfg->gid_index : 0;
  } else if (cfg->gid_index >= 0) {
    n->gid_index = cfg->gid_index;
  } else {
    int len = n->pattr.gid_tbl_len > 0 ? n->pattr.gid_tbl_len : 1;
    struct vnic_gid *g = calloc((size_t)len, sizeof(*g));
    int k = 0;
    if (!g)
      return PP_NOMEM;
    for (int i = 0; i < len; i++) {
      struct ibv_gid_entry e;
      if (ibv_query_gid_ex(n->ctx, (uint32_t)n->port, (uint32_t)i, &e, 0))
        continue; /* an empty slot */
      g[k].index = e.gid_index;
      memcpy(g[k].gid, e.gid.raw, 16);
      g[k].type = (int)e.gid_type;
      k++;
    }
    n->gid_index = vnic_pick_gid(g, k);
    free(g);
    if (n->gid_index < 0)
      return set_err(err, errlen, PP_NOTFOUND,
                     "%s port %d: the GID table is empty (no IP address on the netdev?)",
                     n->device, n->port);
  }
  if (ibv_query_gid(n->ctx, (uint8_t)n->port, n->gid_index, &n->gid))
    return set_err(err, errlen, PP_NOTFOUND, "%s port %d: no GID at index %d: %s", n->device,
                   n->port, n->gid_index, strerror(errno));
  static const uint8_t zero[16];
  if (n->pattr.link_layer == IBV_LINK_LAYER_ETHERNET && !memcmp(n->gid.raw, zero, 16))
    return set_err(err, errlen, PP_NOTFOUND, "%s port %d: GID index %d is empty", n->device,
                   n->port, n->gid_index);
  return PP_OK;
}

enum pp_status vnic_open(const struct vnic_config *cfg, uint32_t nranks, struct vnic **out,
                         char *err, size_t errlen)
{
  *out = NULL;
  struct vnic *n = calloc(1, sizeof(*n));
  if (!n)
    return PP_NOMEM;
  n->nranks = nranks;
  n->peers = calloc(nranks ? nranks : 1, sizeof(*n->peers));
  n->peer_set = calloc(nranks ? nranks : 1, sizeof(*n->peer_set));
  enum pp_status s = n->peers && n->peer_set ? PP_OK : PP_NOMEM;
  if (s == PP_OK)
    s = find_port(cfg, n, err, errlen);
  if (s == PP_OK)
    s = pick_gid(cfg, n, err, errlen);
  if (s == PP_OK && !(n->pd = ibv_alloc_pd(n->ctx)))
    s = set_err(err, errlen, PP_IO, "%s: ibv_alloc_pd: %s", n->device, strerror(errno));
  if (s == PP_OK && !(n->chan = ibv_create_comp_channel(n->ctx)))
    s = set_err(err, errlen, PP_IO, "%s: ibv_create_comp_channel: %s", n->device,
                strerror(errno));
  if (s == PP_OK) {
    n->scq = ibv_create_cq(n->ctx, CQ_MIN, n, n->chan, 0);
    n->rcq = ibv_create_cq(n->ctx, CQ_MIN, n, n->chan, 0);
    if (!n->scq || !n->rcq)
      s = set_err(err, errlen, PP_IO, "%s: ibv_create_cq: %s", n->device, strerror(errno));
    else {
      n->scq_cap = n->scq->cqe;
      n->rcq_cap = n->rcq->cqe;
    }
  }
  if (s == PP_OK) {
    /* the progress loop polls these descriptors: never block on them */
    int fl = fcntl(n->ctx->async_fd, F_GETFL);
    int fc = fcntl(n->chan->fd, F_GETFL);
    if (fl < 0 || fc < 0 || fcntl(n->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
        fcntl(n->chan->fd, F_SETFL, fc | O_NONBLOCK) < 0)
      s = set_err(err, errlen, PP_IO, "%s: cannot make the event fds non-blocking: %s",
                  n->device, strerror(errno));
  }
  if (s != PP_OK) {
    if (s == PP_NOMEM && err && !err[0])
      set_err(err, errlen, s, "out of memory opening the RDMA device");
    vnic_close(n);
    return s;
  }
  vnic_counters_mark(n);
  *out = n;
  return PP_OK;
}

void vnic_close(struct vnic *n)
{
  if (!n)
    return;
  for (uint32_t i = 0; i < QP_HASH; i++) {
    if (n->qps[i].qp)
      ibv_destroy_qp(n->qps[i].qp);
    free(n->qps[i].sq);
  }
  for (uint32_t i = 0; i < MAX_SRQ; i++)
    if (n->srqs[i])
      ibv_destroy_srq(n->srqs[i]);
  for (uint32_t i = 0; i < n->mr_cap; i++)
    if (n->mrs[i])
      ibv_dereg_mr(n->mrs[i]);
  free(n->mrs);
  if (n->scq)
    ibv_destroy_cq(n->scq);
  if (n->rcq)
    ibv_destroy_cq(n->rcq);
  if (n->chan)
    ibv_destroy_comp_channel(n->chan);
  if (n->pd)
    ibv_dealloc_pd(n->pd);
  if (n->ctx)
    ibv_close_device(n->ctx);
  free(n->peers);
  free(n->peer_set);
  free(n);
}

const char *vnic_device_name(const struct vnic *n)
{
  return n->device;
}

int vnic_port(const struct vnic *n)
{
  return n->port;
}

int vnic_gid_index(const struct vnic *n)
{
  return n->gid_index;
}

uint32_t vnic_active_mtu(const struct vnic *n)
{
  return pp_mtu_bytes((enum pp_mtu)n->pattr.active_mtu);
}

void vnic_local_addr(const struct vnic *n, struct vnic_addr *out)
{
  *out = (struct vnic_addr){
      .lid = n->pattr.lid, .link_layer = n->pattr.link_layer, .port = (uint8_t)n->port};
  memcpy(out->gid, n->gid.raw, 16);
}

enum pp_status vnic_set_peer_addr(struct vnic *n, uint32_t rank, const struct vnic_addr *a)
{
  if (rank >= n->nranks)
    return PP_INVALID;
  n->peers[rank] = *a;
  n->peer_set[rank] = true;
  return PP_OK;
}

/* ---------------------------------------------------------------- the ops */

static int op_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *out)
{
  struct vnic *n = nic;
  if ((!addr && length) ||
      (access & ~(unsigned)(PP_ACCESS_LOCAL_WRITE | PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ)))
    return PP_INVALID;
  if ((access & PP_ACCESS_REMOTE_WRITE) && !(access & PP_ACCESS_LOCAL_WRITE))
    return PP_INVALID; /* ibverbs: remote write needs local write */
  uint32_t slot = n->mr_cap;
  for (uint32_t i = 0; i < n->mr_cap && slot == n->mr_cap; i++)
    if (!n->mrs[i])
      slot = i;
  if (slot == n->mr_cap) {
    if (n->mr_cap >= n->max_mr)
      return PP_LIMIT; /* the device's max_mr */
    uint32_t cap = n->mr_cap ? 2 * n->mr_cap : 64;
    struct ibv_mr **m = realloc(n->mrs, cap * sizeof(*m));
    if (!m)
      return PP_NOMEM;
    memset(m + n->mr_cap, 0, (cap - n->mr_cap) * sizeof(*m));
    n->mrs = m;
    n->mr_cap = cap;
  }
  struct ibv_mr *mr = ibv_reg_mr(n->pd, addr, length, (int)access);
  if (!mr)
    return errno == ENOMEM || errno == EAGAIN ? PP_NOMEM : errno == EPERM ? PP_PROTECTION : PP_IO;
  n->mrs[slot] = mr;
  *out = (struct pp_mr){.addr = (uint64_t)(uintptr_t)addr,
                        .length = length,
                        .lkey = mr->lkey,
                        .rkey = mr->rkey,
                        .access = access};
  return PP_OK;
}

static int op_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct vnic *n = nic;
  for (uint32_t i = 0; i < n->mr_cap; i++) {
    if (n->mrs[i] && n->mrs[i]->lkey == mr->lkey &&
        (uint64_t)(uintptr_t)n->mrs[i]->addr == mr->addr) {
      int rc = ibv_dereg_mr(n->mrs[i]);
      if (rc)
        return rc == EBUSY ? PP_STATE : PP_IO;
      n->mrs[i] = NULL;
      return PP_OK;
    }
  }
  return PP_NOTFOUND;
}

static int op_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *srq_num)
{
  struct vnic *n = nic;
  if (a->max_wr < 1 || a->max_sge > PP_MAX_SGE || a->srq_limit > a->max_wr)
    return PP_INVALID;
  int slot = -1;
  for (int i = 0; i < MAX_SRQ && slot < 0; i++)
    if (!n->srqs[i])
      slot = i;
  if (slot < 0)
    return PP_LIMIT;
  if (cq_fit(n, n->rcq, &n->rcq_cap, n->rcq_need + (int)a->max_wr))
    return PP_LIMIT;
  struct ibv_srq_init_attr ia = {
      .srq_context = n,
      .attr = {.max_wr = a->max_wr, .max_sge = a->max_sge ? a->max_sge : 1, .srq_limit = 0}};
  struct ibv_srq *srq = ibv_create_srq(n->pd, &ia);
  if (!srq)
    return errno == ENOMEM ? PP_NOMEM : errno == EINVAL ? PP_INVALID : PP_IO;
  if (a->srq_limit) {
    /* arm the limit event explicitly: create does not arm it on every device */
    struct ibv_srq_attr sa = {.srq_limit = a->srq_limit};
    if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT)) {
      ibv_destroy_srq(srq);
      return PP_INVALID;
    }
  }
  n->srqs[slot] = srq;
  n->srq_posted[slot] = 0;
  n->srq_wr[slot] = a->max_wr;
  n->rcq_need += (int)a->max_wr;
  *srq_num = (uint32_t)slot + 1;
  return PP_OK;
}

static int op_modify_srq(void *nic, uint32_t srq_num, uint32_t srq_limit)
{
  struct vnic *n = nic;
  struct ibv_srq *srq = srq_get(n, srq_num);
  if (!srq)
    return PP_NOTFOUND;
  if (srq_limit > n->srq_wr[srq_num - 1])
    return PP_INVALID;
  struct ibv_srq_attr sa = {.srq_limit = srq_limit};
  int rc = ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT);
  return rc == 0 ? PP_OK : rc == EINVAL ? PP_INVALID : PP_IO;
}

static int op_destroy_srq(void *nic, uint32_t srq_num)
{
  struct vnic *n = nic;
  struct ibv_srq *srq = srq_get(n, srq_num);
  if (!srq)
    return PP_NOTFOUND;
  for (uint32_t i = 0; i < QP_HASH; i++)
    if (n->qps[i].qp && n->qps[i].srq_num == srq_num)
      return PP_STATE; /* ibverbs: EBUSY while a QP uses it */
  int rc = ibv_destroy_srq(srq);
  if (rc)
    return rc == EBUSY ? PP_STATE : PP_IO;
  n->srqs[srq_num - 1] = NULL;
  n->rcq_need -= (int)n->srq_wr[srq_num - 1];
  return PP_OK;
}

static int op_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qp_num)
{
  struct vnic *n = nic;
  struct ibv_srq *srq = NULL;
  if (a->max_send_wr < 1 || a->max_send_sge > PP_MAX_SGE || a->max_recv_sge > PP_MAX_SGE ||
      a->peer >= n->nranks)
    return PP_INVALID;
  if (a->srq_num && !(srq = srq_get(n, a->srq_num)))
    return PP_INVALID;
  if (n->nqps >= QP_HASH / 2)
    return PP_LIMIT;
  uint32_t rwr = srq ? 0 : a->max_recv_wr;
  if (cq_fit(n, n->scq, &n->scq_cap, n->scq_need + (int)a->max_send_wr) ||
      cq_fit(n, n->rcq, &n->rcq_cap, n->rcq_need + (int)rwr))
    return PP_LIMIT;
  struct ibv_qp_init_attr ia = {
      .qp_context = n,
      .send_cq = n->scq,
      .recv_cq = n->rcq,
      .srq = srq,
      .cap = {.max_send_wr = a->max_send_wr,
              .max_recv_wr = rwr,
              .max_send_sge = a->max_send_sge ? a->max_send_sge : 1,
              .max_recv_sge = srq ? 0 : (a->max_recv_sge ? a->max_recv_sge : 1)},
      .qp_type = IBV_QPT_RC,
      .sq_sig_all = 0,
  };
  struct ibv_qp *qp = ibv_create_qp(n->pd, &ia);
  if (!qp)
    return errno == ENOMEM ? PP_NOMEM : errno == EINVAL ? PP_INVALID : PP_IO;
  struct vqp *q = qp_free_slot(n, qp->qp_num);
  /* ibv_create_qp wrote the real send queue size into ia.cap (at least what was asked) */
  uint32_t cap = ia.cap.max_send_wr > a->max_send_wr ? ia.cap.max_send_wr : a->max_send_wr;
  struct vsend *fifo = q ? calloc(cap, sizeof(*fifo)) : NULL;
  if (!q || !fifo) {
    free(fifo);
    ibv_destroy_qp(qp);
    return q ? PP_NOMEM : PP_LIMIT;
  }
  *q = (struct vqp){.qp = qp, .used = true, .peer = a->peer, .srq_num = a->srq_num,
                    .send_wr = a->max_send_wr, .recv_wr = rwr, .sq = fifo, .sq_cap = cap};
  n->nqps++;
  n->scq_need += (int)a->max_send_wr;
  n->rcq_need += (int)rwr;
  *qp_num = qp->qp_num;
  return PP_OK;
}

static int op_destroy_qp(void *nic, uint32_t qpn)
{
  struct vnic *n = nic;
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return PP_NOTFOUND;
  int rc = ibv_destroy_qp(q->qp);
  if (rc)
    return rc == EBUSY ? PP_STATE : PP_IO;
  n->scq_need -= (int)q->send_wr;
  n->rcq_need -= (int)q->recv_wr;
  n->nqps--;
  n->sends_out -= q->sq_len;
  free(q->sq);
  *q = (struct vqp){.used = true}; /* a tombstone */
  return PP_OK;
}

static enum ibv_qp_state qp_state_now(struct ibv_qp *qp)
{
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
    return IBV_QPS_UNKNOWN;
  return a.qp_state;
}

static int op_modify_qp(void *nic, uint32_t qpn, const struct pp_qp_attr *a, unsigned mask)
{
  struct vnic *n = nic;
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return PP_NOTFOUND;
  enum ibv_qp_state from = qp_state_now(q->qp);
  if ((mask & PP_QP_STATE) && from != IBV_QPS_UNKNOWN &&
      !pp_qp_transition_ok((enum pp_qp_state)from, a->qp_state))
    return PP_STATE;
  struct ibv_qp_attr x;
  memset(&x, 0, sizeof(x));
  int m = (int)mask;
  x.qp_state = (enum ibv_qp_state)a->qp_state;
  x.qp_access_flags = a->qp_access_flags;
  x.dest_qp_num = a->dest_qp_num;
  x.rq_psn = a->rq_psn & 0xffffff;
  x.sq_psn = a->sq_psn & 0xffffff;
  x.min_rnr_timer = a->min_rnr_timer;
  x.rnr_retry = a->rnr_retry;
  x.timeout = a->timeout;
  x.retry_cnt = a->retry_cnt;
  x.max_rd_atomic = a->max_rd_atomic;
  x.max_dest_rd_atomic = a->max_dest_rd_atomic;
  if (mask & PP_QP_PATH_MTU) {
    /* a path MTU above the port's active MTU cannot be used: clamp it, as applications do */
    enum pp_mtu mtu = a->path_mtu;
    if ((int)mtu > (int)n->pattr.active_mtu)
      mtu = (enum pp_mtu)n->pattr.active_mtu;
    x.path_mtu = (enum ibv_mtu)mtu;
  }
  if ((mask & PP_QP_STATE) && a->qp_state == PP_QPS_INIT && from == IBV_QPS_RESET) {
    x.pkey_index = 0;
    x.port_num = (uint8_t)n->port;
    m |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (!(mask & PP_QP_ACCESS_FLAGS))
      m |= IBV_QP_ACCESS_FLAGS; /* required by ibverbs for RESET -> INIT */
  }
  if ((mask & PP_QP_STATE) && a->qp_state == PP_QPS_RTR && from == IBV_QPS_INIT) {
    if (q->peer >= n->nranks || !n->peer_set[q->peer])
      return PP_STATE; /* the peer's address is not known yet */
    const struct vnic_addr *p = &n->peers[q->peer];
    x.ah_attr.port_num = (uint8_t)n->port;
    x.ah_attr.sl = 0;
    x.ah_attr.src_path_bits = 0;
    if (n->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
      x.ah_attr.is_global = 1;
      memcpy(x.ah_attr.grh.dgid.raw, p->gid, 16);
      x.ah_attr.grh.sgid_index = (uint8_t)n->gid_index;
      x.ah_attr.grh.hop_limit = 64;
      x.ah_attr.grh.traffic_class = 0;
      x.ah_attr.grh.flow_label = 0;
    } else {
      x.ah_attr.dlid = p->lid;
      x.ah_attr.is_global = 0;
    }
    m |= IBV_QP_AV;
  }
  int rc = ibv_modify_qp(q->qp, &x, m);
  if (rc == 0)
    return PP_OK;
  return rc == EINVAL ? PP_INVALID : rc == ENOMEM ? PP_NOMEM : PP_IO;
}

static void to_ibv_sges(const struct pp_sge *in, uint32_t num, struct ibv_sge *out)
{
  for (uint32_t i = 0; i < num; i++)
    out[i] = (struct ibv_sge){.addr = in[i].addr, .length = in[i].length, .lkey = in[i].lkey};
}

static int post_errno(struct ibv_qp *qp, int rc)
{
  if (rc == ENOMEM)
    return PP_AGAIN; /* the queue is full */
  enum ibv_qp_state st = qp_state_now(qp);
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR)
    return PP_STATE;
  return PP_INVALID;
}

static int op_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *wr)
{
  struct vnic *n = nic;
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return PP_NOTFOUND;
  if (wr->num_sge > PP_MAX_SGE || (unsigned)wr->opcode > PP_WR_RDMA_READ)
    return PP_INVALID;
  struct ibv_sge sg[PP_MAX_SGE];
  to_ibv_sges(wr->sg_list, wr->num_sge, sg);
  struct ibv_send_wr w, *bad = NULL;
  memset(&w, 0, sizeof(w));
  w.wr_id = wr->wr_id;
  w.sg_list = wr->num_sge ? sg : NULL;
  w.num_sge = (int)wr->num_sge;
  w.opcode = (enum ibv_wr_opcode)wr->opcode;
  w.send_flags = wr->send_flags & PP_SEND_SIGNALED;
  if (wr->opcode == PP_WR_SEND_WITH_IMM || wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM)
    w.imm_data = htonl(wr->imm_data);
  if (wr->opcode == PP_WR_RDMA_WRITE || wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM ||
      wr->opcode == PP_WR_RDMA_READ) {
    w.wr.rdma.remote_addr = wr->remote_addr;
    w.wr.rdma.rkey = wr->rkey;
  }
  int rc = ibv_post_send(q->qp, &w, &bad);
  if (rc)
    return post_errno(q->qp, rc);
  n->posted[0]++;
  if (q->sq_len < q->sq_cap) {
    bool takes = wr->opcode == PP_WR_SEND || wr->opcode == PP_WR_SEND_WITH_IMM ||
                 wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM;
    q->sq[(q->sq_head + q->sq_len++) % q->sq_cap] = (struct vsend){wr->wr_id, takes};
    q->sq_takes_recv += takes;
    n->sends_out++;
  }
  return PP_OK;
}

static int post_recv_common(struct ibv_qp *qp, struct ibv_srq *srq, const struct pp_recv_wr *wr)
{
  if (wr->num_sge > PP_MAX_SGE)
    return PP_INVALID;
  struct ibv_sge sg[PP_MAX_SGE];
  to_ibv_sges(wr->sg_list, wr->num_sge, sg);
  struct ibv_recv_wr w = {.wr_id = wr->wr_id, .sg_list = wr->num_sge ? sg : NULL,
                          .num_sge = (int)wr->num_sge},
                     *bad = NULL;
  int rc = qp ? ibv_post_recv(qp, &w, &bad) : ibv_post_srq_recv(srq, &w, &bad);
  if (rc == 0)
    return PP_OK;
  if (!qp)
    return rc == ENOMEM ? PP_AGAIN : PP_INVALID;
  return rc == ENOMEM ? PP_AGAIN : qp_state_now(qp) == IBV_QPS_RESET ? PP_STATE : PP_INVALID;
}

static int op_post_recv(void *nic, uint32_t qpn, const struct pp_recv_wr *wr)
{
  struct vnic *n = nic;
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return PP_NOTFOUND;
  if (q->srq_num)
    return PP_INVALID;
  int s = post_recv_common(q->qp, NULL, wr);
  n->posted[1] += s == PP_OK;
  q->rq_posted += s == PP_OK;
  return s;
}

static int op_post_srq_recv(void *nic, uint32_t srq_num, const struct pp_recv_wr *wr)
{
  struct vnic *n = nic;
  struct ibv_srq *srq = srq_get(n, srq_num);
  if (!srq)
    return PP_NOTFOUND;
  int s = post_recv_common(NULL, srq, wr);
  n->posted[1] += s == PP_OK;
  n->srq_posted[srq_num - 1] += s == PP_OK;
  return s;
}

static int op_query_counters(void *nic, struct pp_nic_counters *out)
{
  struct vnic *n = nic;
  struct vnic_raw now;
  wait_lifespan(n->device, n->port);
  vnic_raw_read(VNIC_SYSFS_ROOT, n->device, n->port, n->drv, &now);
  vnic_counters_map(n->drv, &now, &n->mark, out); /* what the driver lacks is marked missing */
  return n->drv ? PP_OK : PP_UNSUPPORTED;
}

const struct pp_nic_ops vnic_ops = {
    .name = "verbs",
    .reg_mr = op_reg_mr,
    .dereg_mr = op_dereg_mr,
    .create_srq = op_create_srq,
    .modify_srq = op_modify_srq,
    .destroy_srq = op_destroy_srq,
    .create_qp = op_create_qp,
    .modify_qp = op_modify_qp,
    .destroy_qp = op_destroy_qp,
    .post_send = op_post_send,
    .post_recv = op_post_recv,
    .post_srq_recv = op_post_srq_recv,
    .query_counters = op_query_counters,
};

/* ---------------------------------------------------------------- progress */

static void to_pp_wc(const struct ibv_wc *w, bool send_side, struct pp_wc *o)
{
  *o = (struct pp_wc){
      .wr_id = w->wr_id,
      .status = (enum pp_wc_status)w->status,
      .opcode = (enum pp_wc_opcode)w->opcode,
      .vendor_err = w->vendor_err,
      .byte_len = w->byte_len,
      .qp_num = w->qp_num,
      .src_qp = w->src_qp,
      .wc_flags = w->wc_flags & IBV_WC_WITH_IMM,
  };
  if (w->wc_flags & IBV_WC_WITH_IMM)
    o->imm_data = ntohl(w->imm_data);
  if (w->status != IBV_WC_SUCCESS) /* only wr_id, status, qp_num and vendor_err are valid */
    o->opcode = send_side ? PP_WC_OP_SEND : PP_WC_OP_RECV;
}

/* A receive completion of QP qpn (successful or flushed): the receive it took is no longer
 * posted, on the QP or on its SRQ. */
static void recv_done(struct vnic *n, uint32_t qpn)
{
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return;
  uint32_t *posted = q->srq_num ? &n->srq_posted[q->srq_num - 1] : &q->rq_posted;
  if (*posted)
    (*posted)--;
}

/* A send completion of QP qpn for wr_id: completions come in posting order, so it retires the
 * oldest outstanding WR with that wr_id and the unsignalled ones before it. */
static void retire(struct vnic *n, uint32_t qpn, uint64_t wr_id)
{
  struct vqp *q = qp_get(n, qpn);
  if (!q)
    return;
  uint32_t k = 0;
  while (k < q->sq_len && q->sq[(q->sq_head + k) % q->sq_cap].wr_id != wr_id)
    k++;
  if (k == q->sq_len)
    return; /* not ours (cannot happen): keep the count */
  k++;
  for (uint32_t i = 0; i < k; i++)
    q->sq_takes_recv -= q->sq[(q->sq_head + i) % q->sq_cap].takes_recv;
  q->sq_head = (q->sq_head + k) % q->sq_cap;
  q->sq_len -= k;
  n->sends_out -= k;
}

int vnic_poll_cq(struct vnic *n, struct pp_wc *wc, int max)
{
  struct ibv_wc w[32];
  int got = 0;
  for (int side = 0; side < 2 && got < max; side++) {
    struct ibv_cq *cq = side == 0 ? n->scq : n->rcq;
    int want = max - got < 32 ? max - got : 32;
    int k = ibv_poll_cq(cq, want, w);
    if (k < 0)
      return -1;
    n->polled[side] += (uint64_t)k;
    for (int i = 0; i < k; i++) {
      to_pp_wc(&w[i], side == 0, &wc[got++]);
      if (side == 0)
        retire(n, w[i].qp_num, w[i].wr_id);
      else
        recv_done(n, w[i].qp_num);
    }
  }
  return got;
}

bool vnic_get_async_event(struct vnic *n, struct pp_async_event *ev)
{
  struct ibv_async_event e;
  if (ibv_get_async_event(n->ctx, &e))
    return false; /* EAGAIN: none pending */
  *ev = (struct pp_async_event){.type = (enum pp_event_type)e.event_type};
  switch (e.event_type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_COMM_EST:
  case IBV_EVENT_SQ_DRAINED:
  case IBV_EVENT_PATH_MIG:
  case IBV_EVENT_PATH_MIG_ERR:
  case IBV_EVENT_QP_LAST_WQE_REACHED:
    ev->qp_num = e.element.qp ? e.element.qp->qp_num : 0;
    break;
  case IBV_EVENT_SRQ_ERR:
  case IBV_EVENT_SRQ_LIMIT_REACHED:
    for (uint32_t i = 0; i < MAX_SRQ; i++)
      if (n->srqs[i] && n->srqs[i] == e.element.srq)
        ev->srq_num = i + 1;
    break;
  default:
    break;
  }
  ibv_ack_async_event(&e);
  return true;
}

int vnic_arm_cq(struct vnic *n)
{
  int rc = ibv_req_notify_cq(n->scq, 0);
  return rc ? rc : ibv_req_notify_cq(n->rcq, 0);
}

void vnic_consume_cq_events(struct vnic *n)
{
  struct ibv_cq *cq;
  void *ctx;
  while (ibv_get_cq_event(n->chan, &cq, &ctx) == 0)
    ibv_ack_cq_events(cq, 1);
}

int vnic_comp_fd(const struct vnic *n)
{
  return n->chan->fd;
}

int vnic_async_fd(const struct vnic *n)
{
  return n->ctx->async_fd;
}

uint64_t vnic_sends_outstanding(const struct vnic *n)
{
  return n->sends_out;
}

void vnic_counters_mark(struct vnic *n)
{
  n->drv = vnic_driver_of(VNIC_SYSFS_ROOT, n->device, n->port);
  wait_lifespan(n->device, n->port);
  vnic_raw_read(VNIC_SYSFS_ROOT, n->device, n->port, n->drv, &n->mark);
}

/* snprintf into buf at *off (clamped: the length the whole text would have keeps counting). */
static void describe_add(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void describe_add(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(*off < len ? buf + *off : NULL, *off < len ? len - *off : 0, fmt, ap);
  va_end(ap);
  if (k > 0)
    *off += (size_t)k;
}

static const char *qp_state_name(enum ibv_qp_state s)
{
  static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static void qp_state_of(const struct vnic *n, const struct vqp *q, struct vnic_qp_state *s)
{
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN;
  *s = (struct vnic_qp_state){.qpn = q->qp->qp_num, .peer = q->peer, .state = VNIC_QP_UNKNOWN,
                              .sq_outstanding = q->sq_len, .sq_takes_recv = q->sq_takes_recv,
                              .srq_num = q->srq_num,
                              .rq_posted = q->srq_num ? n->srq_posted[q->srq_num - 1]
                                                      : q->rq_posted};
  if (ibv_query_qp(q->qp, &a, mask, &ia))
    return;
  s->state = (uint32_t)a.qp_state;
  s->dest_qpn = a.dest_qp_num;
  s->sq_psn = a.sq_psn;
  s->rq_psn = a.rq_psn;
}

size_t vnic_qp_states(struct vnic *n, struct vnic_qp_state *s, size_t max)
{
  size_t k = 0;
  for (uint32_t i = 0; i < QP_HASH; i++) {
    if (!n->qps[i].qp)
      continue;
    if (k < max)
      qp_state_of(n, &n->qps[i], &s[k]);
    k++;
  }
  return k;
}

size_t vnic_describe(struct vnic *n, char *buf, size_t len)
{
  size_t off = 0;
  if (len)
    buf[0] = 0;
  describe_add(buf, len, &off,
               "%s: completions polled %" PRIu64 " send, %" PRIu64 " receive; posted %" PRIu64
               " send, %" PRIu64 " receive WRs; %" PRIu64 " send WRs outstanding\n",
               n->device, n->polled[0], n->polled[1], n->posted[0], n->posted[1], n->sends_out);
  for (uint32_t i = 0; i < QP_HASH; i++) {
    struct vnic_qp_state q;
    if (!n->qps[i].qp)
      continue;
    qp_state_of(n, &n->qps[i], &q);
    if (q.state == VNIC_QP_UNKNOWN) {
      describe_add(buf, len, &off, "  qp %u (peer %u): ibv_query_qp failed\n", q.qpn, q.peer);
      continue;
    }
    describe_add(buf, len, &off,
                 "  qp %u (peer %u, remote qp %u): %s, next send psn %u, expected receive psn %u, "
                 "%u send WRs outstanding (%u take a receive), %u receives posted%s\n",
                 q.qpn, q.peer, q.dest_qpn, qp_state_name((enum ibv_qp_state)q.state), q.sq_psn,
                 q.rq_psn, q.sq_outstanding, q.sq_takes_recv, q.rq_posted,
                 q.srq_num ? " (its SRQ's)" : "");
  }
  return off;
}
