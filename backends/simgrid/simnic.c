#include "prepost/simnic.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/prng.h"
#include "prepost/trace.h"

#define QPN_BASE 0x100u
#define ASYNC_DEPTH 64u
#define EXT_RETH 16u /* RDMA extended transport header */
#define EXT_AETH 4u  /* ACK extended transport header */
#define EXT_IMM 4u
#define TRAIN_BYTES 65536u /* a train carries at most this many wire bytes */
/* The tables' first sizes (they double up to the profile's limits), and the MR entries the memory
 * estimate counts: a run's pools and connections, and the p2p registration cache's 256 */
#define QP_CAP0 8u
#define MR_CAP0 16u
#define CQ_CAP0 64u
#define MR_EST 1024u

enum pkt_kind { PKT_REQ, PKT_ACK, PKT_RNR_NAK, PKT_NAK, PKT_READ_RESP };
static const char *const pkt_kind_names[] = {"REQ", "ACK", "RNR_NAK", "NAK", "READ_RESP"};

/* NAK syndromes (AETH 0x60 | code) */
enum nak_code { NAK_PSN_SEQ = 0, NAK_INV_REQ = 1, NAK_REM_ACCESS = 2, NAK_REM_OP = 3 };

struct simnic_pkt {
  struct simnic_pkt *next_free;
  struct simnic_pkt *train; /* the next packet of the same train, or NULL */
  enum pkt_kind kind;
  uint32_t src_host, dst_host;
  uint32_t src_qpn, dst_qpn;
  uint32_t psn;   /* REQ/READ_RESP: first PSN; NAKs: the PSN refused */
  uint32_t npkts; /* MTU packets the message spans */
  uint32_t ack_epsn; /* every PSN before this one is acknowledged (valid if has_ack) */
  bool has_ack;
  uint8_t syndrome; /* RNR_NAK: min_rnr_timer code; NAK: enum nak_code */
  enum pp_wr_opcode opcode;
  uint32_t len;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm;
  uint32_t sq_index, sq_gen; /* identity of the requester's WQE */
  uint32_t src_off; /* REQ: where in the WQE's data its first byte is (0 but for the last
                       packet of a WRITE_WITH_IMM resumed there, rc_model rxe) */
  struct simnic_pkt *delay_next; /* faults: held by its NIC until release_at */
  uint64_t release_at, wire_bytes;
  uint64_t tag; /* the trace recorder's, while in flight (simnic_pkt_set_tag); 0 from pkt_new */
  uint64_t wire_ref; /* the driver's, while in flight (simnic_pkt_set_wire_ref); 0 from pkt_new */
};

/* faults.scramble: an RDMA WRITE whose bytes are partly placed (struct pp_faults) */
struct placement {
  uint8_t *data; /* the WRITE's bytes, taken at arrival; then one "placed" flag per chunk */
  uint64_t addr, due;
  uint32_t len, npkts, imm;
  bool has_recv;
  struct pp_recv_wr r;
};
#define CHUNK 64u

struct sq_wqe {
  struct pp_send_wr wr;
  uint32_t len;
  uint32_t psn;
  uint32_t npkts;
  uint32_t gen;
  bool read_done;
  bool read_counted; /* a READ sent since the last rewind whose response has not come back:
                        counted in qp->reads_out */
  uint32_t acked; /* rc_model rxe: its first packets the responder acknowledged (a
                     WRITE_WITH_IMM whose last packet was RNR-NAKed): it is resent after them */
};

struct ring {
  struct pp_recv_wr *wr;
  uint32_t cap, head, count;
  uint64_t *ready; /* faults.srq_delay_ns: when each WQE becomes usable (SRQs only) */
};

struct qp {
  bool used;
  uint32_t qpn;
  enum pp_qp_state state;
  struct pp_qp_init_attr init;
  struct pp_qp_attr attr;
  struct sq_wqe *sq;
  uint32_t sq_head, sq_next, sq_tail; /* free-running; slot = index % max_send_wr */
  uint32_t sq_done; /* slots before it are free: a completion covered them (unsignalled WRs
                       keep their slots until a later completion, as on real HCAs) */
  uint32_t next_psn;
  uint8_t rnr_left, retry_left;
  uint64_t rnr_until;    /* requester waits out an RNR NAK until then (0: not waiting) */
  uint64_t ack_deadline; /* local ACK timeout (0: not armed) */
  uint32_t reads_out;
  /* an ACK past an unanswered READ (its response was lost) or a PSN sequence-error NAK started a
   * retransmission: the next such ACKs, responses or NAKs, sent before the retransmitted
   * requests got there, start none (rxe's comp.started_retry); cleared by progress and by an
   * ACK timeout */
  bool retry_started;
  struct ring rq;
  /* responder */
  uint32_t epsn;
  bool psn_nak_sent; /* a sequence-error NAK went for this gap: the rest of it is dropped
                        silently until the request at epsn arrives (rxe's resp.sent_psn_nak) */
  uint32_t ack_unsent;
  bool ack_pending;
  uint64_t ack_due;
  struct placement *pend; /* faults.scramble: a WRITE not wholly placed yet */
  /* the NIC's indexes of its QPs (qp_touch / qp_sync) */
  bool dirty;        /* changed since the indexes last saw it: on the NIC's dirty list */
  uint32_t heap_pos; /* 1 + its place in the timer heap, 0: not in it (no timer armed) */
  uint64_t key;      /* its earliest timer, as the heap knows it */
};

struct srq {
  bool used;
  struct ring rq;
  uint32_t max_sge;
  uint32_t limit;
};

struct mr {
  bool used;
  uint8_t gen;
  struct pp_mr mr;
};

struct simnic {
  struct simnic_fabric *f;
  uint32_t host;
  uint64_t now;
  /* The QP, MR and CQ tables grow (doubling) to what the run uses, up to the profile's max_qp,
   * max_mr and cq_depth: sized by the profile at creation, a 1,024-rank run reserved 5.9 MiB of
   * address space per NIC, mostly never touched. qcap bounds every per-QP array below. */
  uint32_t qcap, mcap, ccap;
  struct qp *qps;
  uint32_t *live; /* indices of the QPs in use, in creation order */
  uint32_t nlive;
  struct srq *srqs;
  struct mr *mrs;
  struct pp_wc *cq;
  uint32_t cq_head, cq_count;
  struct pp_async_event async[ASYNC_DEPTH];
  uint32_t async_head, async_count;
  struct pp_nic_counters ctr;
  uint64_t tx_free_at;
  double ns_per_byte; /* line rate (> 0: simnic_set_line_rate) */
  bool train_open; /* tx_kick is filling a train: requests join it instead of leaving alone */
  struct simnic_pkt *train_head, *train_tail;
  uint64_t train_bytes;
  uint32_t tx_rr;
  uint32_t gen;
  /* Indexes of the QPs, so that no entry point scans them all: a min-heap of the QPs with a
   * timer armed, keyed by their earliest one (RNR wait, ACK timeout, coalesced ACK, scrambled
   * WRITE), and a bitmap, by place in `live`, of those that can transmit (qp_can_transmit).
   * Whatever may change a QP marks it dirty (qp_touch: qp_get does); qp_sync brings the dirty
   * ones up to date before the indexes are read. All arrays have qcap entries. */
  uint32_t *live_pos; /* by QP index: its place in `live` */
  uint32_t *dirty, ndirty;
  uint32_t *heap, nheap; /* QP indices */
  uint64_t *txbits;      /* by place in `live` */
  uint32_t ntx;          /* bits set */
  uint32_t *due;         /* simnic_on_timer's scratch: places of the QPs whose timer is due */
  /* faults */
  struct simnic_pkt *delay_head, *delay_tail; /* transfers held back, release_at ascending */
  bool qp_error_done, rkey_done;
  struct pp_fault_counts fc;
};

#define SLAB_PKTS 256u
struct pkt_slab {
  struct pkt_slab *next;
  struct simnic_pkt pkts[SLAB_PKTS];
};

struct simnic_fabric {
  struct pp_nic_profile prof;
  struct pp_faults faults;
  struct simnic_wire wire;
  struct pp_prng prng;
  uint32_t nhosts;
  struct simnic *nics;
  struct simnic_pkt *free_pkts;
  struct pkt_slab *slabs; /* every packet lives in a slab, freed with the fabric */
  uint64_t in_flight;
  FILE *log;
  struct pp_prng fprng; /* draws of the faults other than loss (loss keeps its own sequence) */
  uint64_t transfers;   /* wire transfers so far (faults.order_mask numbers them) */
};

/* ---------------------------------------------------------------- profile */

/* Member by member into zeroed bytes: a compound literal assigned whole may leave its padding
 * holes (after ack_every and after train_max) as the stack had them (seen at -O0), and the
 * profile is compared and copied as bytes (traces, tests). */
void pp_nic_profile_default(struct pp_nic_profile *p)
{
  memset(p, 0, sizeof *p);
  memcpy(p->name, "cx6-roce-100g", sizeof "cx6-roce-100g");
  p->mtu = 4096;
  p->header_bytes = 82;
  p->wqe_ns = 50;
  p->ack_every = 16;
  p->ack_delay_ns = 1000;
  p->max_qp = 4096;
  p->max_qp_wr = 16384;
  p->max_srq = 1024;
  p->max_mr = 65536;
  p->cq_depth = 65536;
  p->max_rd_atomic = 16;
  p->train_max = 1;
  p->line_rate_bps = 100e9;
}

uint64_t simnic_rnr_delay_ns(const struct pp_nic_profile *p, unsigned code)
{
  code &= 31u;
  uint64_t d = p->rnr_delay_ns[code] ? p->rnr_delay_ns[code] : pp_rnr_timer_ns(code);
  if (d < p->rnr_min_ns)
    d = p->rnr_min_ns;
  if (p->rnr_tick_ns && d % p->rnr_tick_ns)
    d += p->rnr_tick_ns - d % p->rnr_tick_ns; /* no overflow: both bounded by the check */
  return d;
}

static bool rnr_table_ok(const struct pp_nic_profile *p)
{
  for (unsigned c = 0; c < 32; c++)
    if (p->rnr_delay_ns[c] > PP_RNR_DELAY_MAX_NS)
      return false;
  return true;
}

enum pp_status pp_nic_profile_check(const struct pp_nic_profile *p, char *err, size_t errlen)
{
  const char *what = NULL;
  if (pp_mtu_from_bytes(p->mtu) == 0)
    what = "mtu must be 256, 512, 1024, 2048 or 4096";
  else if (p->ack_every < 1)
    what = "ack_every must be >= 1";
  else if (p->max_qp < 1 || p->max_qp > 1u << 20)
    what = "max_qp must be 1..1048576";
  else if (p->max_qp_wr < 1 || p->max_qp_wr > 1u << 20)
    what = "max_qp_wr must be 1..1048576";
  else if (p->max_srq > 1u << 16)
    what = "max_srq must be 0..65536";
  else if (p->max_mr < 1 || p->max_mr > 1u << 16)
    what = "max_mr must be 1..65536";
  else if (p->cq_depth < 1 || p->cq_depth > 1u << 24)
    what = "cq_depth must be 1..16777216";
  else if (p->max_rd_atomic < 1 || p->max_rd_atomic > 255)
    what = "max_rd_atomic must be 1..255";
  else if (p->header_bytes > 4096)
    what = "header_bytes must be 0..4096";
  else if (p->train_max < 1 || p->train_max > 256)
    what = "train must be 1..256";
  else if (!(p->line_rate_bps > 0 && p->line_rate_bps <= 1e15))
    what = "line_rate must be a bandwidth > 0 (bits/s), at most 1 Pb/s";
  else if (p->rnr_tick_ns > PP_RNR_DELAY_MAX_NS || p->rnr_min_ns > PP_RNR_DELAY_MAX_NS)
    what = "rnr_tick and rnr_min must be at most 60s";
  else if (!rnr_table_ok(p))
    what = "every rnr_delay must be at most 60s";
  else if (p->rc_model >= PP_RC_MODEL_COUNT)
    what = "rc_model must be ibta or rxe";
  if (what) {
    snprintf(err, errlen, "NIC profile '%s': %s", p->name, what);
    return PP_INVALID;
  }
  return PP_OK;
}

/* ---------------------------------------------------------------- helpers */

/* PSNs are 24-bit and wrap: compare and advance them modulo 2^24. */
#define PSN_MASK 0xffffffu

static bool psn_before(uint32_t a, uint32_t b)
{
  return ((a - b) & 0x800000u) != 0;
}

static uint32_t psn_add(uint32_t psn, uint32_t n)
{
  return (psn + n) & PSN_MASK;
}

static uint32_t npkts_of(uint32_t len, uint32_t mtu)
{
  return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

/* The event log (--log): logf_ tests for it before its arguments are evaluated, so a run
 * without it pays one load and branch per event (it paid the call and the name lookups). */
#define logf_(n, ...) ((n)->f->log ? log_line((n), __VA_ARGS__) : (void)0)
static void log_line(struct simnic *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(struct simnic *n, const char *fmt, ...)
{
  FILE *log = n->f->log;
  fprintf(log, "%" PRIu64 " host%u ", n->now, n->host);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(log, fmt, ap);
  va_end(ap);
  fputc('\n', log);
}

/* The QP may change: the NIC's indexes look at it again before they are next read. */
static void qp_touch(struct simnic *n, struct qp *qp)
{
  if (qp->dirty)
    return;
  assert(n->ndirty < n->qcap);
  qp->dirty = true;
  n->dirty[n->ndirty++] = (uint32_t)(qp - n->qps);
}

/* Every QP an entry point reaches comes through here (or is touched where it is taken from the
 * indexes): whoever looks a QP up may change it. */
static struct qp *qp_get(struct simnic *n, uint32_t qpn)
{
  uint32_t i = qpn - QPN_BASE;
  if (qpn < QPN_BASE || i >= n->qcap || !n->qps[i].used)
    return NULL;
  qp_touch(n, &n->qps[i]);
  return &n->qps[i];
}

static struct srq *srq_get(struct simnic *n, uint32_t srq_num)
{
  if (srq_num == 0 || srq_num > n->f->prof.max_srq || !n->srqs[srq_num - 1].used)
    return NULL;
  return &n->srqs[srq_num - 1];
}

static uint32_t key_index(uint32_t key)
{
  return (key >> 8) & 0xffff;
}

/* The MR behind an lkey (remote = 0) or rkey (remote = 1), or NULL. */
static const struct pp_mr *mr_by_key(const struct simnic *n, uint32_t key, int remote)
{
  uint32_t i = key_index(key);
  if (i == 0 || i > n->mcap || !n->mrs[i - 1].used)
    return NULL;
  const struct pp_mr *m = &n->mrs[i - 1].mr;
  return (remote ? m->rkey : m->lkey) == key ? m : NULL;
}

static bool mr_covers(const struct pp_mr *m, uint64_t addr, uint64_t len, unsigned access)
{
  return m && (m->access & access) == access && addr >= m->addr &&
         len <= m->length && addr - m->addr <= m->length - len;
}

static bool sges_valid(const struct simnic *n, const struct pp_sge *sg, uint32_t num,
                       unsigned access)
{
  for (uint32_t i = 0; i < num; i++)
    if (sg[i].length && !mr_covers(mr_by_key(n, sg[i].lkey, 0), sg[i].addr, sg[i].length, access))
      return false;
  return true;
}

static uint64_t sges_len(const struct pp_sge *sg, uint32_t num)
{
  uint64_t len = 0;
  for (uint32_t i = 0; i < num; i++)
    len += sg[i].length;
  return len;
}

/* Copies len bytes from a gather list, from its byte `skip` on, to a scatter list (either may
 * be a single buffer). */
static void sg_copy_at(const struct pp_sge *dst, uint32_t ndst, const struct pp_sge *src,
                       uint32_t nsrc, uint64_t skip, uint64_t len)
{
  uint32_t di = 0, si = 0;
  uint64_t doff = 0, soff = 0;
  for (; si < nsrc && skip >= src[si].length; si++)
    skip -= src[si].length;
  soff = skip;
  while (len > 0 && di < ndst && si < nsrc) {
    uint64_t dleft = dst[di].length - doff, sleft = src[si].length - soff;
    uint64_t k = dleft < sleft ? dleft : sleft;
    if (k > len)
      k = len;
    if (k)
      memmove((void *)(uintptr_t)(dst[di].addr + doff), (const void *)(uintptr_t)(src[si].addr + soff),
              (size_t)k);
    len -= k;
    doff += k;
    soff += k;
    if (doff == dst[di].length) {
      di++;
      doff = 0;
    }
    if (soff == src[si].length) {
      si++;
      soff = 0;
    }
  }
}

static void sg_copy(const struct pp_sge *dst, uint32_t ndst, const struct pp_sge *src,
                    uint32_t nsrc, uint64_t len)
{
  sg_copy_at(dst, ndst, src, nsrc, 0, len);
}

static void push_async(struct simnic *n, enum pp_event_type type, uint32_t qpn, uint32_t srq_num)
{
  if (n->async_count == ASYNC_DEPTH)
    return; /* bounded: the oldest events are kept, later ones dropped */
  n->async[(n->async_head + n->async_count++) % ASYNC_DEPTH] =
      (struct pp_async_event){.type = type, .qp_num = qpn, .srq_num = srq_num};
  logf_(n, "ASYNC %s qp %u srq %u", pp_event_name(type), qpn, srq_num);
}

/* Room for one more completion: the CQ ring grows (in order, from index 0) up to cq_depth. */
static bool cq_room(struct simnic *n)
{
  if (n->cq_count < n->ccap)
    return true;
  uint32_t depth = n->f->prof.cq_depth, cap = n->ccap * 2 < depth ? n->ccap * 2 : depth;
  struct pp_wc *cq = cap > n->ccap ? malloc((size_t)cap * sizeof(*cq)) : NULL;
  if (!cq)
    return false;
  for (uint32_t k = 0; k < n->cq_count; k++)
    cq[k] = n->cq[(n->cq_head + k) % n->ccap];
  free(n->cq);
  n->cq = cq;
  n->cq_head = 0;
  n->ccap = cap;
  return true;
}

static void push_wc(struct simnic *n, const struct pp_wc *wc)
{
  if (!cq_room(n)) { /* cq_depth reached (or no memory to grow to it): overflow */
    push_async(n, PP_EVENT_CQ_ERR, wc->qp_num, 0);
    return;
  }
  n->cq[(n->cq_head + n->cq_count++) % n->ccap] = *wc;
  logf_(n, "WC qp %u wr_id 0x%" PRIx64 " %s %s len %u", wc->qp_num, wc->wr_id,
        pp_wc_opcode_name(wc->opcode), pp_wc_status_name(wc->status), wc->byte_len);
}

/* ---------------------------------------------------------------- packets */

void simnic_pkt_discard(struct simnic_fabric *f, struct simnic_pkt *p)
{
  p->next_free = f->free_pkts;
  f->free_pkts = p;
}

void simnic_pkt_lost(struct simnic_fabric *f, struct simnic_pkt *p)
{
  while (p) {
    struct simnic_pkt *next = p->train;
    assert(f->in_flight > 0);
    f->in_flight--;
    simnic_pkt_discard(f, p);
    p = next;
  }
}

const struct simnic_pkt *simnic_pkt_next(const struct simnic_pkt *p)
{
  return p->train;
}

void simnic_pkt_set_tag(const struct simnic_pkt *p, uint64_t tag)
{
  ((struct simnic_pkt *)(uintptr_t)p)->tag = tag; /* pool memory: never a const object */
}

uint64_t simnic_pkt_tag(const struct simnic_pkt *p)
{
  return p->tag;
}

void simnic_pkt_set_wire_ref(struct simnic_pkt *p, uint64_t ref)
{
  p->wire_ref = ref;
}

uint64_t simnic_pkt_wire_ref(const struct simnic_pkt *p)
{
  return p->wire_ref;
}

static struct simnic_pkt *pkt_new(struct simnic *n, enum pkt_kind kind, const struct qp *qp)
{
  struct simnic_fabric *f = n->f;
  if (!f->free_pkts) { /* the pool grows to the peak number of packets in flight */
    struct pkt_slab *s = malloc(sizeof(*s));
    if (!s)
      abort();
    s->next = f->slabs;
    f->slabs = s;
    for (uint32_t i = 0; i < SLAB_PKTS; i++)
      simnic_pkt_discard(f, &s->pkts[i]);
  }
  struct simnic_pkt *p = f->free_pkts;
  f->free_pkts = p->next_free;
  *p = (struct simnic_pkt){
      .kind = kind,
      .src_host = n->host,
      .dst_host = qp->init.peer,
      .src_qpn = qp->qpn,
      .dst_qpn = qp->attr.dest_qp_num,
  };
  return p;
}

/* Faults are injected until faults.until_ns (0: for ever). */
static bool faults_on(const struct simnic *n)
{
  return n->f->faults.until_ns == 0 || n->now < n->f->faults.until_ns;
}

/* Hands a transfer (a packet or a train) to the wire, or holds it back (jitter, order mask):
 * a held transfer keeps every later one of this NIC behind it, so order per source holds. */
static void emit(struct simnic *n, struct simnic_pkt *head, uint64_t wire_bytes)
{
  struct simnic_fabric *f = n->f;
  uint64_t i = f->transfers++, delay = 0;
  if (i < f->faults.order_bits && i < 64 && (f->faults.order_mask >> i) & 1) {
    delay += f->faults.order_window_ns;
    n->fc.ordered++;
  }
  if (f->faults.jitter_ns && faults_on(n)) {
    uint64_t j = pp_prng_below(&f->fprng, f->faults.jitter_ns + 1);
    delay += j;
    n->fc.jittered += j > 0;
  }
  if (delay == 0 && !n->delay_head) {
    f->wire.send(f->wire.ctx, n->host, head->dst_host, head, wire_bytes);
    return;
  }
  head->release_at = n->now + delay;
  head->wire_bytes = wire_bytes;
  head->delay_next = NULL;
  if (n->delay_head) {
    if (head->release_at < n->delay_tail->release_at)
      head->release_at = n->delay_tail->release_at;
    n->delay_tail->delay_next = head;
  } else {
    n->delay_head = head;
  }
  n->delay_tail = head;
  logf_(n, "HOLD %s psn %u until %" PRIu64, pkt_kind_names[head->kind], head->psn,
        head->release_at);
}

static void release_held(struct simnic *n)
{
  while (n->delay_head && n->delay_head->release_at <= n->now) {
    struct simnic_pkt *p = n->delay_head;
    n->delay_head = p->delay_next;
    if (!n->delay_head)
      n->delay_tail = NULL;
    n->f->wire.send(n->f->wire.ctx, n->host, p->dst_host, p, p->wire_bytes);
  }
}

static void wire_send(struct simnic *n, struct simnic_pkt *p, uint64_t wire_bytes)
{
  struct simnic_fabric *f = n->f;
  n->ctr.packets_sent++;
  logf_(n, "TX %s %s psn %u len %u -> host%u qp %u", pkt_kind_names[p->kind],
        p->kind == PKT_REQ ? pp_wr_opcode_name(p->opcode) : "-", p->psn, p->len, p->dst_host,
        p->dst_qpn);
  if (f->faults.loss > 0 && faults_on(n) && pp_prng_unit(&f->prng) < f->faults.loss) {
    n->ctr.packets_dropped++;
    logf_(n, "DROP %s psn %u", pkt_kind_names[p->kind], p->psn);
    simnic_pkt_discard(f, p);
    return;
  }
  f->in_flight++;
  if (n->train_open) { /* rides the train tx_kick is filling (one QP: one destination) */
    if (n->train_head)
      n->train_tail->train = p;
    else
      n->train_head = p;
    n->train_tail = p;
    n->train_bytes += wire_bytes;
    return;
  }
  emit(n, p, wire_bytes);
}

/* Opens a train: the requests transmitted until train_close() travel as one wire transfer. */
static void train_open(struct simnic *n)
{
  n->train_head = n->train_tail = NULL;
  n->train_open = true;
  n->train_bytes = 0;
}

static void train_close(struct simnic *n)
{
  struct simnic_pkt *head = n->train_head;
  n->train_head = n->train_tail = NULL;
  n->train_open = false;
  if (head)
    emit(n, head, n->train_bytes);
}

static uint64_t hdr(const struct simnic *n)
{
  return n->f->prof.header_bytes;
}

static void send_ack(struct simnic *n, struct qp *qp)
{
  struct simnic_pkt *p = pkt_new(n, PKT_ACK, qp);
  p->has_ack = true;
  p->ack_epsn = qp->epsn;
  p->psn = psn_add(qp->epsn, PSN_MASK); /* epsn - 1 */
  qp->ack_pending = false;
  qp->ack_unsent = 0;
  n->ctr.acks_sent++;
  wire_send(n, p, hdr(n) + EXT_AETH);
}

static void send_nak(struct simnic *n, struct qp *qp, enum pkt_kind kind, uint8_t syndrome)
{
  struct simnic_pkt *p = pkt_new(n, kind, qp);
  p->has_ack = true;
  p->ack_epsn = qp->epsn; /* a NAK acknowledges everything before the PSN it refuses */
  p->psn = qp->epsn;
  p->syndrome = syndrome;
  qp->ack_pending = false;
  qp->ack_unsent = 0;
  wire_send(n, p, hdr(n) + EXT_AETH);
}

/* ---------------------------------------------------------------- queue pairs */

static enum pp_wc_opcode wc_opcode_of(enum pp_wr_opcode op)
{
  switch (op) {
  case PP_WR_RDMA_WRITE:
  case PP_WR_RDMA_WRITE_WITH_IMM:
    return PP_WC_OP_RDMA_WRITE;
  case PP_WR_RDMA_READ:
    return PP_WC_OP_RDMA_READ;
  default:
    return PP_WC_OP_SEND;
  }
}

static struct sq_wqe *sq_at(struct qp *qp, uint32_t index)
{
  return &qp->sq[index % qp->init.max_send_wr];
}

static void complete_send(struct simnic *n, struct qp *qp, struct sq_wqe *w,
                          enum pp_wc_status status)
{
  assert(w == sq_at(qp, qp->sq_head));
  if (status != PP_WC_SUCCESS || (w->wr.send_flags & PP_SEND_SIGNALED)) {
    qp->sq_done = qp->sq_head + 1;
    struct pp_wc wc = {
        .wr_id = w->wr.wr_id,
        .status = status,
        .opcode = wc_opcode_of(w->wr.opcode),
        .byte_len = w->len,
        .qp_num = qp->qpn,
        .src_qp = qp->attr.dest_qp_num,
    };
    push_wc(n, &wc);
  }
  w->gen = 0; /* the WQE is gone: in-flight packets that point at it become stale */
}

static void complete_recv(struct simnic *n, struct qp *qp, const struct pp_recv_wr *r,
                          enum pp_wc_status status, enum pp_wc_opcode op, uint32_t len,
                          const uint32_t *imm)
{
  struct pp_wc wc = {
      .wr_id = r->wr_id,
      .status = status,
      .opcode = op,
      .byte_len = len,
      .qp_num = qp->qpn,
      .src_qp = qp->attr.dest_qp_num,
      .imm_data = imm ? *imm : 0,
      .wc_flags = imm ? PP_WC_WITH_IMM : 0,
  };
  push_wc(n, &wc);
}

static void drop_placement(struct simnic *n, struct qp *qp, bool flush);

/* ERROR: every outstanding send WQE and every WQE of the QP's own receive queue completes with
 * WR_FLUSH_ERR (SRQ WQEs belong to the SRQ and stay). */
static void qp_flush(struct simnic *n, struct qp *qp)
{
  logf_(n, "QP %u %s -> ERR", qp->qpn, pp_qp_state_name(qp->state));
  qp->state = PP_QPS_ERR;
  qp->rnr_until = qp->ack_deadline = 0;
  qp->ack_pending = false;
  drop_placement(n, qp, true);
  for (; qp->sq_head != qp->sq_tail; qp->sq_head++)
    complete_send(n, qp, sq_at(qp, qp->sq_head), PP_WC_WR_FLUSH_ERR);
  qp->sq_next = qp->sq_tail;
  for (; qp->rq.count > 0; qp->rq.count--, qp->rq.head = (qp->rq.head + 1) % qp->rq.cap)
    complete_recv(n, qp, &qp->rq.wr[qp->rq.head], PP_WC_WR_FLUSH_ERR, PP_WC_OP_RECV, 0, NULL);
}

/* The QP goes to ERROR (qp_flush). A QP attached to an SRQ then raises QP_LAST_WQE_REACHED
 * (IB spec: the QP is in ERROR and will take no more WQEs from the SRQ; rxe raises it in
 * flush_recv_queue, mlx5 from the device), after QP_FATAL when `fatal` (a device error): the
 * consumer learns of a QP that had nothing of its own to flush. */
static void qp_error_events(struct simnic *n, struct qp *qp, bool fatal)
{
  if (qp->state == PP_QPS_ERR)
    return;
  qp_flush(n, qp);
  if (fatal)
    push_async(n, PP_EVENT_QP_FATAL, qp->qpn, 0);
  if (qp->init.srq_num)
    push_async(n, PP_EVENT_QP_LAST_WQE_REACHED, qp->qpn, 0);
}

static void qp_to_error(struct simnic *n, struct qp *qp)
{
  qp_error_events(n, qp, false);
}

/* The WQE at the head of the send queue fails with `status` and the QP goes to ERROR. */
static void fail_head(struct simnic *n, struct qp *qp, enum pp_wc_status status)
{
  assert(qp->sq_head != qp->sq_tail);
  complete_send(n, qp, sq_at(qp, qp->sq_head), status);
  qp->sq_head++;
  qp_to_error(n, qp);
}

/* Go back N: retransmit from the WQE at `index`. */
static void rewind_to(struct qp *qp, uint32_t index)
{
  for (uint32_t i = index; i != qp->sq_next; i++)
    sq_at(qp, i)->read_counted = false;
  qp->sq_next = index;
  qp->next_psn = sq_at(qp, index)->psn;
  qp->reads_out = 0;
  qp->ack_deadline = 0;
}

static bool qp_can_transmit(struct qp *qp)
{
  if (qp->state != PP_QPS_RTS || qp->rnr_until || qp->sq_next == qp->sq_tail)
    return false;
  if (qp->sq_next != qp->sq_head && sq_at(qp, qp->sq_next - 1)->npkts == 0)
    return false; /* stopped at a local protection error: it fails when it reaches the head */
  const struct sq_wqe *w = sq_at(qp, qp->sq_next);
  return w->wr.opcode != PP_WR_RDMA_READ || qp->reads_out < qp->attr.max_rd_atomic;
}

/* ---------------------------------------------------------------- the QP indexes */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

/* The QP's earliest timer (UINT64_MAX: none); depends on the QP alone, not on the time. */
static uint64_t qp_key(const struct qp *qp)
{
  uint64_t d = UINT64_MAX;
  if (qp->rnr_until)
    d = min_u64(d, qp->rnr_until);
  if (qp->ack_deadline)
    d = min_u64(d, qp->ack_deadline);
  if (qp->ack_pending)
    d = min_u64(d, qp->ack_due);
  if (qp->pend)
    d = min_u64(d, qp->pend->due);
  return d;
}

static uint64_t heap_key(const struct simnic *n, uint32_t at)
{
  return n->qps[n->heap[at]].key;
}

static void heap_put(struct simnic *n, uint32_t at, uint32_t qpi)
{
  n->heap[at] = qpi;
  n->qps[qpi].heap_pos = at + 1;
}

static void heap_up(struct simnic *n, uint32_t at)
{
  uint32_t qpi = n->heap[at];
  uint64_t key = n->qps[qpi].key;
  while (at > 0 && heap_key(n, (at - 1) / 2) > key) {
    heap_put(n, at, n->heap[(at - 1) / 2]);
    at = (at - 1) / 2;
  }
  heap_put(n, at, qpi);
}

static void heap_down(struct simnic *n, uint32_t at)
{
  uint32_t qpi = n->heap[at];
  uint64_t key = n->qps[qpi].key;
  for (;;) {
    uint32_t c = 2 * at + 1;
    if (c >= n->nheap)
      break;
    if (c + 1 < n->nheap && heap_key(n, c + 1) < heap_key(n, c))
      c++;
    if (heap_key(n, c) >= key)
      break;
    heap_put(n, at, n->heap[c]);
    at = c;
  }
  heap_put(n, at, qpi);
}

static void heap_remove(struct simnic *n, struct qp *qp)
{
  uint32_t at = qp->heap_pos - 1, moved = n->heap[--n->nheap];
  qp->heap_pos = 0;
  if (at == n->nheap)
    return;
  heap_put(n, at, moved);
  heap_up(n, at);
  heap_down(n, n->qps[moved].heap_pos - 1);
}

/* The QP's key is now `key`: in the heap at its place, or out of it (UINT64_MAX). */
static void heap_set(struct simnic *n, struct qp *qp, uint64_t key)
{
  qp->key = key;
  if (key == UINT64_MAX) {
    if (qp->heap_pos)
      heap_remove(n, qp);
    return;
  }
  if (!qp->heap_pos) {
    assert(n->nheap < n->qcap);
    heap_put(n, n->nheap++, (uint32_t)(qp - n->qps));
  }
  heap_up(n, qp->heap_pos - 1);
  heap_down(n, qp->heap_pos - 1);
}

static void tx_bit(struct simnic *n, uint32_t pos, bool on)
{
  uint64_t m = 1ull << (pos % 64), *w = &n->txbits[pos / 64];
  if (on == ((*w & m) != 0))
    return;
  *w ^= m;
  if (on)
    n->ntx++;
  else
    n->ntx--;
}

/* Brings the indexes up to date with every QP touched since the last time. */
static void qp_sync(struct simnic *n)
{
  for (uint32_t k = 0; k < n->ndirty; k++) {
    uint32_t i = n->dirty[k];
    struct qp *qp = &n->qps[i];
    assert(qp->used && qp->dirty);
    qp->dirty = false;
    tx_bit(n, n->live_pos[i], qp_can_transmit(qp));
    uint64_t key = qp_key(qp);
    if (key != qp->key)
      heap_set(n, qp, key);
  }
  n->ndirty = 0;
}

/* The first place in `live` at or after `from` (cyclically) whose QP can transmit; nlive if
 * none. Bits beyond nlive are never set. */
static uint32_t tx_find(const struct simnic *n, uint32_t from)
{
  uint32_t words = (n->nlive + 63) / 64;
  if (n->ntx == 0)
    return n->nlive;
  for (uint32_t k = 0; k <= words; k++) {
    uint32_t w = (from / 64 + k) % words;
    uint64_t bits = n->txbits[w];
    if (k == 0)
      bits &= ~0ull << (from % 64); /* from `from` on */
    else if (k == words)
      bits &= from % 64 ? ~(~0ull << (from % 64)) : 0; /* back round: before `from` */
    if (bits)
      return w * 64 + (uint32_t)__builtin_ctzll(bits);
  }
  return n->nlive;
}

/* A QP came or went: places in `live` moved; the bitmap is rebuilt (set-up and tear-down). */
static void qp_reindex(struct simnic *n)
{
  memset(n->txbits, 0, (n->qcap + 63) / 64 * sizeof(*n->txbits));
  n->ntx = 0;
  for (uint32_t k = 0; k < n->nlive; k++) {
    n->live_pos[n->live[k]] = k;
    tx_bit(n, k, qp_can_transmit(&n->qps[n->live[k]]));
  }
}

static uint64_t transmit(struct simnic *n, struct qp *qp)
{
  struct sq_wqe *w = sq_at(qp, qp->sq_next);
  unsigned access = w->wr.opcode == PP_WR_RDMA_READ ? PP_ACCESS_LOCAL_WRITE : 0;
  if (!sges_valid(n, w->wr.sg_list, w->wr.num_sge, access)) {
    /* only the head can fail in order; earlier WQEs are still in flight: fail when it is head */
    qp->sq_next++;
    w->read_done = false;
    w->npkts = 0; /* marks "local protection error" */
    if (qp->sq_head == qp->sq_next - 1)
      fail_head(n, qp, PP_WC_LOC_PROT_ERR);
    return 0;
  }
  uint32_t mtu = pp_mtu_bytes(qp->attr.path_mtu), skip = w->acked; /* w->psn kept if skip */
  if (!skip) {
    w->psn = qp->next_psn;
    w->npkts = npkts_of(w->len, mtu);
  }
  assert(skip < w->npkts && w->psn == qp->next_psn);
  qp->next_psn = psn_add(qp->next_psn, w->npkts);
  struct simnic_pkt *p = pkt_new(n, PKT_REQ, qp);
  p->psn = psn_add(w->psn, skip);
  p->npkts = w->npkts - skip;
  p->opcode = w->wr.opcode;
  p->src_off = skip * mtu;
  p->len = w->len - p->src_off;
  p->remote_addr = w->wr.remote_addr + p->src_off;
  p->rkey = w->wr.rkey;
  p->imm = w->wr.imm_data;
  p->sq_index = qp->sq_next;
  p->sq_gen = w->gen;
  if (qp->ack_pending) { /* piggy-back the responder's ACK on this request */
    p->has_ack = true;
    p->ack_epsn = qp->epsn;
    qp->ack_pending = false;
    qp->ack_unsent = 0;
  }
  bool rdma = w->wr.opcode == PP_WR_RDMA_WRITE || w->wr.opcode == PP_WR_RDMA_WRITE_WITH_IMM ||
              w->wr.opcode == PP_WR_RDMA_READ;
  uint64_t wire = (uint64_t)p->npkts * hdr(n) + (rdma && !skip ? EXT_RETH : 0);
  if (w->wr.opcode == PP_WR_RDMA_READ) {
    qp->reads_out++;
    w->read_counted = true;
  } else
    wire += p->len + (w->wr.opcode == PP_WR_SEND_WITH_IMM || w->wr.opcode == PP_WR_RDMA_WRITE_WITH_IMM ? EXT_IMM : 0);
  qp->sq_next++;
  if (!qp->ack_deadline && qp->attr.timeout)
    qp->ack_deadline = n->now + pp_ack_timeout_ns(qp->attr.timeout);
  wire_send(n, p, wire);
  return wire;
}

/* Transmits what the send queues hold, one WQE per wqe_ns, round robin over QPs. */
static void tx_kick(struct simnic *n)
{
  while (n->tx_free_at <= n->now) {
    qp_sync(n);
    uint32_t at = n->nlive ? tx_find(n, n->tx_rr % n->nlive) : 0;
    if (at >= n->nlive)
      return;
    struct qp *qp = &n->qps[n->live[at]];
    n->tx_rr = at + 1;
    qp_touch(n, qp);
    /* up to train_max WQEs of this QP leave as one train (doorbell batching) */
    uint64_t wire = 0, wqes = 0;
    train_open(n);
    do {
      wire += transmit(n, qp);
      wqes++;
    } while (wqes < n->f->prof.train_max && wire < TRAIN_BYTES && qp_can_transmit(qp));
    train_close(n);
    uint64_t busy = (uint64_t)ceil((double)wire * n->ns_per_byte);
    if (busy < wqes * n->f->prof.wqe_ns)
      busy = wqes * n->f->prof.wqe_ns;
    n->tx_free_at = n->now + busy;
  }
}

/* ---------------------------------------------------------------- requester */

static void on_progress(struct simnic *n, struct qp *qp)
{
  qp->retry_started = false;
  qp->rnr_left = qp->attr.rnr_retry;
  qp->retry_left = qp->attr.retry_cnt;
  qp->ack_deadline = qp->sq_head != qp->sq_next && qp->attr.timeout
                         ? n->now + pp_ack_timeout_ns(qp->attr.timeout)
                         : 0;
}

/* A READ in flight no longer counts against max_rd_atomic (its response came, or it completed). */
static void read_uncount(struct qp *qp, struct sq_wqe *w)
{
  if (!w->read_counted)
    return;
  assert(qp->reads_out > 0);
  w->read_counted = false;
  qp->reads_out--;
}

/* rc_model rxe: an ACK for the first packets of the head WQE (a WRITE_WITH_IMM whose earlier
 * packets the responder placed before it RNR-NAKed the last, then ACKed again as duplicates:
 * rxe_resp.c, duplicate_request). rxe's completer takes it as progress (rxe_comp.c, check_ack:
 * AETH_ACK resets the retry counters; COMPST_UPDATE_COMP moves comp.psn past them), and the
 * requester's next retry starts at comp.psn (rxe_req.c, req_retry): at the last packet. */
/* How far an answer acknowledges packets inside the head WQE (requester_partial_ack): an RNR
 * NAK not at all (rxe's completer leaves comp.psn where it is: rxe_comp.c, check_ack,
 * AETH_RNR_NAK), a PSN sequence-error NAK up to its PSN (comp.psn = its PSN, the retry
 * counters kept), an ACK up to its PSN and as progress (reset_retry_counters). */
enum partial_ack { PARTIAL_NONE, PARTIAL_NAK, PARTIAL_ACK };

static void requester_partial_ack(struct simnic *n, struct qp *qp, struct sq_wqe *w,
                                  uint32_t ack_epsn, enum partial_ack how)
{
  uint32_t k = (ack_epsn - w->psn) & PSN_MASK;
  if (how == PARTIAL_NONE || n->f->prof.rc_model != PP_RC_RXE ||
      w->wr.opcode == PP_WR_RDMA_READ || !psn_before(w->psn, ack_epsn) || k <= w->acked)
    return;
  assert(k < w->npkts);
  w->acked = k;
  if (how == PARTIAL_ACK)
    on_progress(n, qp);
}

/* Everything before ack_epsn is acknowledged: complete WQEs in order. */
static void requester_ack_to(struct simnic *n, struct qp *qp, uint32_t ack_epsn,
                             enum partial_ack how)
{
  bool progress = false;
  while (qp->state == PP_QPS_RTS && qp->sq_head != qp->sq_next) {
    struct sq_wqe *w = sq_at(qp, qp->sq_head);
    if (w->npkts == 0) { /* local protection error found at transmit time */
      fail_head(n, qp, PP_WC_LOC_PROT_ERR);
      return;
    }
    if (psn_before(ack_epsn, w->psn + w->npkts)) {
      if (!progress)
        requester_partial_ack(n, qp, w, ack_epsn, how);
      break;
    }
    if (w->wr.opcode == PP_WR_RDMA_READ && !w->read_done) {
      if (!qp->retry_started) { /* the read response was lost: ask again, once */
        logf_(n, "READ LOST qp %u retransmit from psn %u", qp->qpn, w->psn);
        rewind_to(qp, qp->sq_head);
        qp->retry_started = true;
      }
      break;
    }
    read_uncount(qp, w);
    complete_send(n, qp, w, PP_WC_SUCCESS);
    qp->sq_head++;
    progress = true;
  }
  if (progress)
    on_progress(n, qp);
}

static void requester_ack(struct simnic *n, struct qp *qp, uint32_t ack_epsn)
{
  requester_ack_to(n, qp, ack_epsn, PARTIAL_ACK);
}

/* The head WQE spans psn (an RNR NAK names the PSN it refused: with rc_model rxe the last of a
 * WRITE_WITH_IMM, whose earlier packets were placed). */
static bool head_spans_psn(struct qp *qp, uint32_t psn)
{
  if (qp->sq_head == qp->sq_next)
    return false;
  const struct sq_wqe *w = sq_at(qp, qp->sq_head);
  return !psn_before(psn, w->psn) && psn_before(psn, psn_add(w->psn, w->npkts));
}

static struct sq_wqe *head_if_psn(struct qp *qp, uint32_t psn)
{
  if (qp->sq_head == qp->sq_next)
    return NULL;
  struct sq_wqe *w = sq_at(qp, qp->sq_head);
  return w->psn == psn ? w : NULL;
}

/* One retry out of a budget (rnr_left or retry_left; `infinite`: rnr_retry 7): false when it
 * was spent already, and the head WQE has failed with `status` (the QP is in ERROR). */
static bool spend_retry(struct simnic *n, struct qp *qp, uint8_t *left, bool infinite,
                        enum pp_wc_status status)
{
  if (infinite)
    return true;
  if (*left == 0) {
    fail_head(n, qp, status);
    return false;
  }
  (*left)--;
  return true;
}

/* A retry of retry_cnt's (an ACK timeout or a PSN sequence-error NAK): RETRY_EXC_ERR when the
 * budget is spent, else go back to the head; `started` (a NAK) makes the NAKs and lost READ
 * responses that follow before the retransmission starts none (rxe's comp.started_retry), an
 * ACK timeout clears it. Both count in timeout_retries, as rxe's completer_retry_err. */
/* Whether retry_cnt never runs out: the IBTA makes no retry_cnt infinite; rxe never counts 7
 * down (rxe_comp.c, rxe_completer, COMPST_ERROR_RETRY: comp.retry_cnt is decremented only when
 * it is not 7), so retry_cnt 7 retries a peer that stopped answering forever. */
static bool retry_cnt_infinite(const struct simnic *n, const struct qp *qp)
{
  return n->f->prof.rc_model == PP_RC_RXE && qp->attr.retry_cnt == 7;
}

static void retry_go_back(struct simnic *n, struct qp *qp, const char *why, bool started)
{
  if (!spend_retry(n, qp, &qp->retry_left, retry_cnt_infinite(n, qp), PP_WC_RETRY_EXC_ERR))
    return;
  qp->retry_started = started;
  n->ctr.timeout_retries++;
  logf_(n, "%s qp %u retransmit from psn %u", why, qp->qpn, sq_at(qp, qp->sq_head)->psn);
  rewind_to(qp, qp->sq_head);
}

static void requester_rnr_nak(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  requester_ack_to(n, qp, p->psn, PARTIAL_NONE);
  n->ctr.rnr_naks_received++;
  if (qp->state != PP_QPS_RTS || qp->rnr_until || !head_spans_psn(qp, p->psn))
    return; /* stale */
  if (!spend_retry(n, qp, &qp->rnr_left, qp->attr.rnr_retry == PP_RNR_RETRY_INFINITE,
                   PP_WC_RNR_RETRY_EXC_ERR))
    return;
  n->ctr.rnr_retries++;
  uint64_t deadline = qp->ack_deadline;
  rewind_to(qp, qp->sq_head);
  /* IBTA: the ACK timer stops for the wait and restarts with the retransmission. rxe: the
   * retransmission timer runs on (rxe_comp.c, rxe_completer, COMPST_RNR_RETRY arms
   * rnr_nak_timer only; the requester re-arms retrans_timer at a send only when it is not
   * pending, rxe_req.c): qp_timers spends a retry_cnt if it fires during the wait. */
  if (n->f->prof.rc_model == PP_RC_RXE)
    qp->ack_deadline = deadline;
  qp->rnr_until = n->now + simnic_rnr_delay_ns(&n->f->prof, p->syndrome);
}

/* A PSN sequence-error NAK: the responder saw a gap and expects p->psn; everything before it is
 * acknowledged. The requester goes back to it at once, a retry counted against retry_cnt like
 * an ACK timeout (rxe's check_ack -> COMPST_ERROR_RETRY). Ignored while
 * a retry started by an earlier NAK or lost READ response is under way (rxe's started_retry) and
 * while an RNR NAK for the same PSN is being waited out (the RNR NAK already went back there). */
static void requester_seq_nak(struct simnic *n, struct qp *qp)
{
  if (qp->rnr_until || qp->retry_started)
    return;
  retry_go_back(n, qp, "SEQ NAK", true);
}

static void requester_nak(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  requester_ack_to(n, qp, p->psn, PARTIAL_NAK);
  if (qp->state != PP_QPS_RTS || !head_if_psn(qp, p->psn))
    return;
  if (p->syndrome == NAK_PSN_SEQ) {
    requester_seq_nak(n, qp);
    return;
  }
  static const enum pp_wc_status status[] = {
      [NAK_INV_REQ] = PP_WC_REM_INV_REQ_ERR,
      [NAK_REM_ACCESS] = PP_WC_REM_ACCESS_ERR,
      [NAK_REM_OP] = PP_WC_REM_OP_ERR,
  };
  fail_head(n, qp, status[p->syndrome]);
}

static void requester_read_resp(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  for (uint32_t i = qp->sq_head; i != qp->sq_next; i++) {
    struct sq_wqe *w = sq_at(qp, i);
    if (w->psn == p->psn && w->wr.opcode == PP_WR_RDMA_READ) {
      /* also the response to a READ sent again (go back N) after its first response came */
      w->read_done = true;
      read_uncount(qp, w);
      break;
    }
  }
  requester_ack(n, qp, p->ack_epsn);
}

/* ---------------------------------------------------------------- responder */

/* The requester's WQE a request packet was made from, if it still exists. */
static struct sq_wqe *origin_wqe(struct simnic_fabric *f, const struct simnic_pkt *p)
{
  struct simnic *src = &f->nics[p->src_host];
  struct qp *qp = qp_get(src, p->src_qpn);
  if (!qp || p->sq_gen == 0)
    return NULL;
  struct sq_wqe *w = sq_at(qp, p->sq_index);
  return w->gen == p->sq_gen ? w : NULL;
}

static bool take_recv(struct simnic *n, struct qp *qp, struct pp_recv_wr *out, uint32_t *max_sge)
{
  struct srq *s = qp->init.srq_num ? srq_get(n, qp->init.srq_num) : NULL;
  struct ring *r = s ? &s->rq : &qp->rq;
  if (r->count == 0)
    return false;
  if (r->ready && r->ready[r->head] > n->now) { /* faults.srq_delay_ns: not usable yet */
    n->fc.srq_starved++;
    return false;
  }
  *out = r->wr[r->head];
  r->head = (r->head + 1) % r->cap;
  r->count--;
  *max_sge = s ? s->max_sge : qp->init.max_recv_sge;
  if (s && s->limit && r->count < s->limit) {
    s->limit = 0; /* one shot: re-armed by modify_srq */
    push_async(n, PP_EVENT_SRQ_LIMIT_REACHED, 0, qp->init.srq_num);
  }
  return true;
}

static void ack_later(struct simnic *n, struct qp *qp, uint32_t npkts)
{
  const struct pp_nic_profile *prof = &n->f->prof;
  qp->ack_unsent += npkts;
  if (prof->ack_delay_ns == 0 || qp->ack_unsent >= prof->ack_every) {
    send_ack(n, qp);
  } else if (!qp->ack_pending) {
    qp->ack_pending = true;
    qp->ack_due = n->now + prof->ack_delay_ns;
  }
}

/* Responder-side error of class A/C: complete the consumed WQE (if any), NAK, QP to ERROR. */
static void responder_error(struct simnic *n, struct qp *qp, const struct pp_recv_wr *r,
                            enum pp_wc_status status, enum nak_code nak)
{
  if (r)
    complete_recv(n, qp, r, status, PP_WC_OP_RECV, 0, NULL);
  send_nak(n, qp, PKT_NAK, (uint8_t)nak);
  qp_to_error(n, qp);
}

/* A zero-length RDMA WRITE or READ checks no rkey and no address (IB C9-88; rxe's check_rkey
 * skips them too): it touches no memory. */
static bool remote_ok(const struct simnic *n, const struct simnic_pkt *p, unsigned access)
{
  return p->len == 0 || mr_covers(mr_by_key(n, p->rkey, 1), p->remote_addr, p->len, access);
}

static void execute_read(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  struct sq_wqe *w = origin_wqe(n->f, p);
  if (w) {
    struct pp_sge src = {.addr = p->remote_addr, .length = p->len};
    sg_copy(w->wr.sg_list, w->wr.num_sge, &src, 1, p->len);
  }
  struct simnic_pkt *r = pkt_new(n, PKT_READ_RESP, qp);
  r->psn = p->psn;
  r->npkts = p->npkts;
  r->len = p->len;
  r->has_ack = true;
  r->ack_epsn = psn_add(p->psn, p->npkts);
  qp->ack_pending = false;
  qp->ack_unsent = 0;
  wire_send(n, r, (uint64_t)p->npkts * hdr(n) + EXT_AETH + p->len);
}

/* faults.scramble: the rest of a WRITE's bytes land, then its completion and ACK. */
static void finish_placement(struct simnic *n, struct qp *qp)
{
  struct placement *pl = qp->pend;
  qp->pend = NULL;
  uint8_t *placed = pl->data + pl->len;
  for (uint32_t c = 0; c * CHUNK < pl->len; c++) {
    uint32_t off = c * CHUNK, k = pl->len - off < CHUNK ? pl->len - off : CHUNK;
    if (!placed[c])
      memcpy((void *)(uintptr_t)(pl->addr + off), pl->data + off, k);
  }
  logf_(n, "PLACED qp %u len %u", qp->qpn, pl->len);
  if (pl->has_recv)
    complete_recv(n, qp, &pl->r, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, pl->len, &pl->imm);
  ack_later(n, qp, pl->npkts);
  free(pl->data);
  free(pl);
}

/* The QP goes to ERROR or away with a WRITE half placed: its bytes stay as they are. */
static void drop_placement(struct simnic *n, struct qp *qp, bool flush)
{
  struct placement *pl = qp->pend;
  if (!pl)
    return;
  qp->pend = NULL;
  if (flush && pl->has_recv)
    complete_recv(n, qp, &pl->r, PP_WC_WR_FLUSH_ERR, PP_WC_OP_RECV, 0, NULL);
  free(pl->data);
  free(pl);
}

/* faults.scramble: places the last 64-byte chunk of a WRITE, then a random subset of the others
 * in a random order; the rest, the receive completion and the ACK follow later. Returns false
 * (nothing done) when the fault does not fire for this WRITE. */
static bool scramble_write(struct simnic *n, struct qp *qp, const struct simnic_pkt *p,
                           const struct sq_wqe *src, const struct pp_recv_wr *r)
{
  struct simnic_fabric *f = n->f;
  if (!(f->faults.scramble > 0) || !faults_on(n) || p->len <= CHUNK || qp->pend ||
      !(pp_prng_unit(&f->fprng) < f->faults.scramble))
    return false;
  uint32_t nch = (p->len + CHUNK - 1) / CHUNK;
  struct placement *pl = calloc(1, sizeof(*pl));
  uint8_t *data = malloc((size_t)p->len + nch);
  uint32_t *order = malloc(nch * sizeof(*order));
  if (!pl || !data || !order) {
    free(pl);
    free(data);
    free(order);
    return false;
  }
  struct pp_sge tmp = {.addr = (uint64_t)(uintptr_t)data, .length = p->len};
  sg_copy(&tmp, 1, src->wr.sg_list, src->wr.num_sge, p->len);
  uint8_t *placed = data + p->len;
  memset(placed, 0, nch);
  /* order: the last chunk, then the others shuffled; the first `now` of them land at once */
  order[0] = nch - 1;
  for (uint32_t c = 1; c < nch; c++)
    order[c] = c - 1;
  for (uint32_t c = nch - 1; c > 1; c--) {
    uint32_t k = 1 + (uint32_t)pp_prng_below(&f->fprng, c);
    uint32_t t = order[c];
    order[c] = order[k];
    order[k] = t;
  }
  uint32_t now = 1 + (uint32_t)pp_prng_below(&f->fprng, nch - 1);
  for (uint32_t i = 0; i < now; i++) {
    uint32_t c = order[i], off = c * CHUNK, k = p->len - off < CHUNK ? p->len - off : CHUNK;
    memcpy((void *)(uintptr_t)(p->remote_addr + off), data + off, k);
    placed[c] = 1;
  }
  free(order);
  *pl = (struct placement){.data = data,
                           .addr = p->remote_addr,
                           .due = n->now + f->faults.scramble_ns,
                           .len = p->len,
                           .npkts = p->npkts,
                           .imm = p->imm,
                           .has_recv = r != NULL};
  if (r)
    pl->r = *r;
  qp->pend = pl;
  n->fc.scrambled++;
  logf_(n, "SCRAMBLE qp %u psn %u: %u of %u chunks placed", qp->qpn, p->psn, now, nch);
  return true;
}

/* Whether the responder QP lets this operation in: RDMA WRITE (with or without immediate) needs
 * REMOTE_WRITE in its qp_access_flags, RDMA READ needs REMOTE_READ and room for at least one
 * incoming READ (max_dest_rd_atomic > 0). Checked before any receive WQE is consumed (like rxe's
 * check_op_valid / check_resource); a refusal is a NAK "invalid request". */
static bool op_enabled(const struct qp *qp, enum pp_wr_opcode op)
{
  switch (op) {
  case PP_WR_RDMA_WRITE:
  case PP_WR_RDMA_WRITE_WITH_IMM:
    return qp->attr.qp_access_flags & PP_ACCESS_REMOTE_WRITE;
  case PP_WR_RDMA_READ:
    return (qp->attr.qp_access_flags & PP_ACCESS_REMOTE_READ) && qp->attr.max_dest_rd_atomic > 0;
  default:
    return true;
  }
}

/* Whether request p has packets from its k-th on, 0 < k < p->npkts, at the responder's path
 * MTU (the requester's, on a QP pair set up as RC needs). */
static bool tail_ok(const struct qp *qp, const struct simnic_pkt *p, uint32_t k)
{
  return k > 0 && k < p->npkts && (uint64_t)k * pp_mtu_bytes(qp->attr.path_mtu) < p->len;
}

/* The packets of request p from its k-th on (tail_ok). */
static struct simnic_pkt pkt_tail(const struct qp *qp, const struct simnic_pkt *p, uint32_t k)
{
  uint32_t off = k * pp_mtu_bytes(qp->attr.path_mtu);
  assert(k < p->npkts && off < p->len);
  struct simnic_pkt t = *p;
  t.psn = psn_add(p->psn, k);
  t.npkts = p->npkts - k;
  t.src_off = p->src_off + off;
  t.len = p->len - off;
  t.remote_addr = p->remote_addr + off;
  t.train = NULL;
  return t;
}

static void responder_execute(struct simnic *n, struct qp *qp, const struct simnic_pkt *p);

/* rc_model rxe, a WRITE_WITH_IMM of several packets: only its last packet
 * (RDMA_WRITE_LAST_WITH_IMMEDIATE) carries the mask that needs a receive WQE (rxe_opcode.c,
 * RXE_RWR_MASK; rxe_resp.c, check_resource), so the others are placed as they come (the rkey
 * checked on the whole range at the first, check_rkey) and only the last one may be
 * RNR-NAKed, naming its own PSN (rxe_responder, RESPST_ERR_RNR). They request no ACK (rxe_req.c
 * sets ackreq on a message's last packet): the last one's ACK or RNR NAK answers. */
static void responder_write_imm_rxe(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  if (!remote_ok(n, p, PP_ACCESS_REMOTE_WRITE)) {
    responder_error(n, qp, NULL, PP_WC_REM_ACCESS_ERR, NAK_REM_ACCESS);
    return;
  }
  struct sq_wqe *src = origin_wqe(n->f, p);
  struct simnic_pkt last = pkt_tail(qp, p, p->npkts - 1);
  struct pp_sge dst = {.addr = p->remote_addr, .length = p->len - last.len};
  sg_copy_at(&dst, 1, src->wr.sg_list, src->wr.num_sge, p->src_off, dst.length);
  qp->epsn = psn_add(qp->epsn, p->npkts - 1);
  logf_(n, "WRITE_IMM qp %u psn %u: %u packets placed, the last one needs a receive", qp->qpn,
        p->psn, p->npkts - 1);
  responder_execute(n, qp, &last);
}

/* A request that arrives in sequence. Returns false when it was refused (nothing executed). */
static void responder_execute(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  struct sq_wqe *src = origin_wqe(n->f, p);
  if (!src)
    return; /* the requester's WQE is gone (flushed): as if lost on the wire */
  if (!op_enabled(qp, p->opcode)) {
    logf_(n, "NAK invalid request qp %u psn %u: %s not enabled on the QP", qp->qpn, p->psn,
          pp_wr_opcode_name(p->opcode));
    responder_error(n, qp, NULL, PP_WC_REM_INV_REQ_ERR, NAK_INV_REQ);
    return;
  }
  if (p->opcode == PP_WR_RDMA_WRITE_WITH_IMM && n->f->prof.rc_model == PP_RC_RXE &&
      tail_ok(qp, p, p->npkts - 1)) {
    responder_write_imm_rxe(n, qp, p);
    return;
  }
  struct pp_recv_wr r;
  uint32_t max_sge = 0;
  bool has_recv = false;
  if (pp_wr_consumes_recv(p->opcode)) {
    if (!take_recv(n, qp, &r, &max_sge)) {
      /* Refused at its first packet, as rxe's check_resource does (SEND_FIRST / SEND_ONLY
       * carry its RWR mask): one RNR NAK per attempt. The message's next packet is then beyond
       * the expected PSN: rxe's check_psn NAKs it "PSN sequence error", once (sent_psn_nak),
       * and drops the rest of the message and whatever follows until the retry. (rc_model
       * ibta refuses a multi-packet WRITE_WITH_IMM here whole too, at its first packet; rxe
       * looks for the receive only at its last: responder_write_imm_rxe.) */
      n->ctr.rnr_naks_sent++;
      send_nak(n, qp, PKT_RNR_NAK, qp->attr.min_rnr_timer);
      if (p->npkts > 1 && p->opcode != PP_WR_RDMA_WRITE_WITH_IMM) {
        qp->psn_nak_sent = true;
        logf_(n, "NAK sequence error qp %u psn %u: expected %u", qp->qpn, psn_add(p->psn, 1),
              qp->epsn);
        send_nak(n, qp, PKT_NAK, NAK_PSN_SEQ);
      }
      return;
    }
    has_recv = true;
  }
  switch (p->opcode) {
  case PP_WR_SEND:
  case PP_WR_SEND_WITH_IMM:
    if (p->len > sges_len(r.sg_list, r.num_sge)) {
      responder_error(n, qp, &r, PP_WC_LOC_LEN_ERR, NAK_INV_REQ);
      return;
    }
    if (r.num_sge > max_sge || !sges_valid(n, r.sg_list, r.num_sge, PP_ACCESS_LOCAL_WRITE)) {
      responder_error(n, qp, &r, PP_WC_LOC_PROT_ERR, NAK_REM_OP);
      return;
    }
    sg_copy(r.sg_list, r.num_sge, src->wr.sg_list, src->wr.num_sge, p->len);
    complete_recv(n, qp, &r, PP_WC_SUCCESS, PP_WC_OP_RECV, p->len,
                  p->opcode == PP_WR_SEND_WITH_IMM ? &p->imm : NULL);
    break;
  case PP_WR_RDMA_WRITE:
  case PP_WR_RDMA_WRITE_WITH_IMM: {
    if (!remote_ok(n, p, PP_ACCESS_REMOTE_WRITE)) {
      responder_error(n, qp, has_recv ? &r : NULL, PP_WC_REM_ACCESS_ERR, NAK_REM_ACCESS);
      return;
    }
    if (!p->src_off && scramble_write(n, qp, p, src, has_recv ? &r : NULL)) {
      qp->epsn = psn_add(qp->epsn, p->npkts); /* completion and ACK: finish_placement() */
      return;
    }
    struct pp_sge dst = {.addr = p->remote_addr, .length = p->len};
    sg_copy_at(&dst, 1, src->wr.sg_list, src->wr.num_sge, p->src_off, p->len);
    if (has_recv) /* the whole message's length (rxe: resp.length, from the first packet) */
      complete_recv(n, qp, &r, PP_WC_SUCCESS, PP_WC_OP_RECV_RDMA_WITH_IMM, p->src_off + p->len,
                    &p->imm);
    break;
  }
  case PP_WR_RDMA_READ:
    if (!remote_ok(n, p, PP_ACCESS_REMOTE_READ)) {
      responder_error(n, qp, NULL, PP_WC_REM_ACCESS_ERR, NAK_REM_ACCESS);
      return;
    }
    qp->epsn = psn_add(qp->epsn, p->npkts);
    execute_read(n, qp, p);
    return;
  }
  qp->epsn = psn_add(qp->epsn, p->npkts);
  ack_later(n, qp, p->npkts);
}

static void responder_request(struct simnic *n, struct qp *qp, const struct simnic_pkt *p)
{
  if (qp->state != PP_QPS_RTR && qp->state != PP_QPS_RTS)
    return;
  if (p->psn == qp->epsn) {
    qp->psn_nak_sent = false;
    responder_execute(n, qp, p);
  } else if (psn_before(p->psn, qp->epsn)) {
    /* a duplicate (our ACK was lost or the requester went back N): answer again */
    uint32_t k = (qp->epsn - p->psn) & PSN_MASK;
    if (n->f->prof.rc_model == PP_RC_RXE && p->opcode != PP_WR_RDMA_READ && k < p->npkts &&
        tail_ok(qp, p, k)) {
      /* rc_model rxe only: a WRITE_WITH_IMM resent whole after its last packet was RNR-NAKed;
       * the packets placed before are duplicates, ACKed again (rxe_resp.c, duplicate_request:
       * one ACK each, of the PSN before the one expected; here one for them all), the last is
       * new */
      send_ack(n, qp);
      struct simnic_pkt rest = pkt_tail(qp, p, k);
      qp->psn_nak_sent = false;
      responder_execute(n, qp, &rest);
    } else if (p->opcode == PP_WR_RDMA_READ) {
      if (remote_ok(n, p, PP_ACCESS_REMOTE_READ))
        execute_read(n, qp, p);
    } else {
      send_ack(n, qp);
    }
  } else if (!qp->psn_nak_sent) {
    /* a gap: a request was lost, or refused with an RNR NAK; NAK the first PSN missing, once
     * per gap (rxe's check_psn), and drop the request */
    qp->psn_nak_sent = true;
    logf_(n, "NAK sequence error qp %u psn %u: expected %u", qp->qpn, p->psn, qp->epsn);
    send_nak(n, qp, PKT_NAK, NAK_PSN_SEQ);
  }
  /* else: the rest of a gap already NAKed: dropped silently */
}

/* ---------------------------------------------------------------- entry points */

/* faults.qp_error_ns / rkey_ns: due on this host? */
static bool qp_error_due(const struct simnic *n)
{
  const struct pp_faults *fl = &n->f->faults;
  return fl->qp_error_ns && !n->qp_error_done && n->host == fl->qp_error_host;
}

static bool rkey_due(const struct simnic *n)
{
  const struct pp_faults *fl = &n->f->faults;
  return fl->rkey_ns && !n->rkey_done && n->host == fl->rkey_host;
}

/* Some QP of the NIC has send WQEs outstanding. */
static bool nic_busy(const struct simnic *n)
{
  for (uint32_t k = 0; k < n->nlive; k++) {
    const struct qp *qp = &n->qps[n->live[k]];
    if (qp->sq_head != qp->sq_tail)
      return true;
  }
  return false;
}

/* The one-shot faults: a QP forced to ERROR, rkeys invalidated. */
static void fault_events(struct simnic *n)
{
  const struct pp_faults *fl = &n->f->faults;
  if (qp_error_due(n) && n->now >= fl->qp_error_ns) {
    n->qp_error_done = true;
    if (n->nlive) {
      struct qp *qp = &n->qps[n->live[fl->qp_error_qp % n->nlive]];
      qp_touch(n, qp);
      if (qp->state != PP_QPS_ERR && qp->state != PP_QPS_RESET) {
        n->fc.qp_errors++;
        logf_(n, "FAULT qp %u forced to ERROR", qp->qpn);
        qp_error_events(n, qp, true);
      }
    }
  }
  if (rkey_due(n) && n->now >= fl->rkey_ns) {
    n->rkey_done = true;
    for (uint32_t i = 0; i < n->mcap; i++) {
      struct mr *m = &n->mrs[i];
      if (m->used && (m->mr.access & (PP_ACCESS_REMOTE_WRITE | PP_ACCESS_REMOTE_READ))) {
        m->mr.rkey ^= 0x20000000u; /* same MR slot, a key no peer holds */
        n->fc.rkeys++;
        logf_(n, "FAULT mr lkey 0x%x: rkey now 0x%x", m->mr.lkey, m->mr.rkey);
      }
    }
  }
}


static void on_one_packet(struct simnic *n, struct simnic_pkt *p)
{
  struct simnic_fabric *f = n->f;
  assert(f->in_flight > 0);
  f->in_flight--;
  struct qp *qp = qp_get(n, p->dst_qpn);
  if (qp && qp->pend) /* a half-placed WRITE lands wholly before anything after it */
    finish_placement(n, qp);
  logf_(n, "RX %s %s psn %u len %u <- host%u qp %u", pkt_kind_names[p->kind],
        p->kind == PKT_REQ ? pp_wr_opcode_name(p->opcode) : "-", p->psn, p->len, p->src_host,
        p->src_qpn);
  if (qp && qp->init.peer == p->src_host && qp->attr.dest_qp_num == p->src_qpn &&
      qp->state >= PP_QPS_RTR && qp->state <= PP_QPS_RTS) {
    switch (p->kind) {
    case PKT_REQ:
      if (p->has_ack)
        requester_ack(n, qp, p->ack_epsn);
      responder_request(n, qp, p);
      break;
    case PKT_ACK:
      requester_ack(n, qp, p->ack_epsn);
      break;
    case PKT_RNR_NAK:
      requester_rnr_nak(n, qp, p);
      break;
    case PKT_NAK:
      requester_nak(n, qp, p);
      break;
    case PKT_READ_RESP:
      requester_read_resp(n, qp, p);
      break;
    }
  }
  simnic_pkt_discard(f, p);
}

void simnic_on_packet(struct simnic *n, uint64_t now, struct simnic_pkt *p)
{
  n->now = now;
  fault_events(n);
  while (p) {
    struct simnic_pkt *next = p->train;
    on_one_packet(n, p);
    p = next;
  }
  tx_kick(n);
}

#ifndef NDEBUG
/* Debug builds: the indexes say what a scan of every QP would (the scan they replace). */
static void check_indexes(const struct simnic *n)
{
  uint32_t ntx = 0;
  for (uint32_t k = 0; k < n->nlive; k++) {
    const struct qp *qp = &n->qps[n->live[k]];
    bool bit = (n->txbits[k / 64] >> (k % 64)) & 1;
    assert(n->live_pos[n->live[k]] == k && !qp->dirty);
    assert(bit == qp_can_transmit((struct qp *)qp));
    assert(qp->key == qp_key(qp) && (qp->heap_pos != 0) == (qp->key != UINT64_MAX));
    ntx += bit;
  }
  assert(ntx == n->ntx);
  for (uint32_t i = 1; i < n->nheap; i++)
    assert(heap_key(n, (i - 1) / 2) <= heap_key(n, i) && n->qps[n->heap[i]].heap_pos == i + 1);
}
#endif

uint64_t simnic_next_deadline(const struct simnic *cn)
{
  struct simnic *n = (struct simnic *)cn; /* the indexes are not the NIC's state */
  if (n->ndirty)
    qp_sync(n);
#ifndef NDEBUG
  check_indexes(n);
#endif
  uint64_t d = n->nheap ? n->qps[n->heap[0]].key : UINT64_MAX;
  if (n->tx_free_at > n->now && n->ntx)
    d = min_u64(d, n->tx_free_at);
  if (n->delay_head)
    d = min_u64(d, n->delay_head->release_at);
  /* a one-shot fault wakes the NIC only while it has sends outstanding (else it fires at the
   * next packet): it must not keep a finished run alive */
  if (qp_error_due(n) && nic_busy(n))
    d = min_u64(d, n->f->faults.qp_error_ns);
  if (rkey_due(n) && nic_busy(n))
    d = min_u64(d, n->f->faults.rkey_ns);
  return d;
}

/* rxe only (the ACK deadline survives an RNR NAK there alone): the ACK timeout fired during an
 * RNR wait. rxe's completer takes it as any timeout (COMPST_EXIT -> COMPST_ERROR_RETRY: one
 * retry_cnt spent, RETRY_EXC_ERR when none is left) and sets need_retry, but the requester
 * does not go back before rnr_nak_timer has fired (rxe_req.c, rxe_requester:
 * need_retry && !wait_for_rnr_timer), so the retransmission stays the RNR wait's. */
static void rnr_wait_timeout(struct simnic *n, struct qp *qp)
{
  assert(qp->sq_head != qp->sq_tail);
  if (!spend_retry(n, qp, &qp->retry_left, retry_cnt_infinite(n, qp), PP_WC_RETRY_EXC_ERR))
    return;
  n->ctr.timeout_retries++;
  logf_(n, "TIMEOUT in RNR wait qp %u psn %u", qp->qpn, sq_at(qp, qp->sq_head)->psn);
}

static void qp_timers(struct simnic *n, struct qp *qp)
{
  if (qp->ack_pending && qp->ack_due <= n->now)
    send_ack(n, qp);
  if (qp->rnr_until && qp->rnr_until <= n->now)
    qp->rnr_until = 0; /* tx_kick retransmits */
  if (qp->ack_deadline && qp->ack_deadline <= n->now) {
    qp->ack_deadline = 0;
    if (qp->rnr_until && n->f->prof.rc_model == PP_RC_RXE) {
      rnr_wait_timeout(n, qp);
      return;
    }
    if (qp->sq_head == qp->sq_next)
      return;
    retry_go_back(n, qp, "TIMEOUT", false);
  }
}

/* simnic_on_timer: the places in `live` of the QPs with a timer due, in that order. */
static uint32_t take_due(struct simnic *n)
{
  uint32_t k = 0;
  qp_sync(n);
  while (n->nheap && n->qps[n->heap[0]].key <= n->now) {
    struct qp *qp = &n->qps[n->heap[0]];
    uint32_t pos = n->live_pos[n->heap[0]], j = k++;
    heap_set(n, qp, UINT64_MAX);
    qp_touch(n, qp); /* its timers change: back into the heap at the next qp_sync */
    for (; j > 0 && n->due[j - 1] > pos; j--) /* few at a time: insertion */
      n->due[j] = n->due[j - 1];
    n->due[j] = pos;
  }
  return k;
}

void simnic_on_timer(struct simnic *n, uint64_t now)
{
  n->now = now;
  fault_events(n);
  uint32_t ndue = take_due(n);
  for (uint32_t k = 0; k < ndue; k++) { /* in the order of `live`, as a scan of them would */
    struct qp *qp = &n->qps[n->live[n->due[k]]];
    if (qp->pend && qp->pend->due <= now)
      finish_placement(n, qp);
    qp_timers(n, qp);
  }
  release_held(n);
  tx_kick(n);
}

void simnic_set_now(struct simnic *n, uint64_t now)
{
  n->now = now;
}

enum pp_status simnic_set_line_rate(struct simnic *n, double bits_per_second)
{
  if (!(bits_per_second > 0 && bits_per_second <= 1e15))
    return PP_INVALID;
  n->ns_per_byte = 8e9 / bits_per_second;
  return PP_OK;
}

int simnic_poll_cq(struct simnic *n, struct pp_wc *wc, int max)
{
  int k = 0;
  for (; k < max && n->cq_count > 0; k++) {
    wc[k] = n->cq[n->cq_head];
    n->cq_head = (n->cq_head + 1) % n->ccap;
    n->cq_count--;
  }
  return k;
}

int simnic_get_async_event(struct simnic *n, struct pp_async_event *ev)
{
  if (n->async_count == 0)
    return 0;
  *ev = n->async[n->async_head];
  n->async_head = (n->async_head + 1) % ASYNC_DEPTH;
  n->async_count--;
  return 1;
}

enum pp_qp_state simnic_qp_state(const struct simnic *n, uint32_t qpn)
{
  const struct qp *qp = qp_get((struct simnic *)n, qpn);
  return qp ? qp->state : PP_QPS_RESET;
}

void simnic_counters(const struct simnic *n, struct pp_nic_counters *out)
{
  *out = n->ctr;
}

void simnic_fault_counts(const struct simnic *n, struct pp_fault_counts *out)
{
  *out = n->fc;
}

bool simnic_has_events(const struct simnic *n)
{
  return n->cq_count > 0 || n->async_count > 0;
}

void simnic_pkt_describe(const struct simnic_pkt *p, struct simnic_pkt_info *out)
{
  *out = (struct simnic_pkt_info){
      .kind = pkt_kind_names[p->kind],
      .src_host = p->src_host,
      .dst_host = p->dst_host,
      .dst_qpn = p->dst_qpn,
      .psn = p->psn,
      .len = p->len,
      .opcode = p->opcode,
      .src_qpn = p->src_qpn,
      .npkts = p->npkts,
      .syndrome = p->syndrome,
      .has_ack = p->has_ack,
      .ack_epsn = p->ack_epsn,
      .remote_addr = p->remote_addr,
      .rkey = p->rkey,
      .imm = p->imm,
  };
}

/* the NIC's kinds are the trace's, in the same order */
_Static_assert((int)PKT_REQ == (int)PP_TPKT_REQ && (int)PKT_ACK == (int)PP_TPKT_ACK &&
                   (int)PKT_RNR_NAK == (int)PP_TPKT_RNR_NAK && (int)PKT_NAK == (int)PP_TPKT_NAK &&
                   (int)PKT_READ_RESP == (int)PP_TPKT_READ_RESP,
               "simnic packet kinds differ from the trace's");

bool simnic_pkt_is_error(const struct simnic_pkt *p)
{
  return p->kind == PKT_RNR_NAK || p->kind == PKT_NAK;
}

bool simnic_pkt_train_has_error(const struct simnic_pkt *p)
{
  for (; p; p = p->train)
    if (p->kind == PKT_RNR_NAK || p->kind == PKT_NAK)
      return true;
  return false;
}

void simnic_pkt_trace(const struct simnic_pkt *p, struct pp_trace_pkt *k)
{
  k->id = 0;
  k->kind = (uint32_t)p->kind;
  k->opcode = p->kind == PKT_READ_RESP ? (uint32_t)PP_WR_RDMA_READ : (uint32_t)p->opcode;
  k->src_rank = p->src_host;
  k->dst_rank = p->dst_host;
  k->src_qpn = p->src_qpn;
  k->dst_qpn = p->dst_qpn;
  k->psn = p->psn;
  k->npkts = p->npkts;
  k->len = p->len;
  k->syndrome = p->syndrome;
  k->has_ack = p->has_ack;
  k->ack_psn = p->ack_epsn;
  k->remote_addr = p->remote_addr;
  k->rkey = p->rkey;
  k->imm = p->imm;
  k->wire_bytes = 0;
}

/* ---------------------------------------------------------------- verbs */

/* Zeroed room for `cap` elements of `size` where `*p` has `old` (cap >= old). */
static bool grow(void *p, size_t size, uint32_t old, uint32_t cap)
{
  void **pp = p;
  void *q = realloc(*pp, (size_t)cap * size);
  if (!q)
    return false;
  memset((char *)q + (size_t)old * size, 0, (size_t)(cap - old) * size);
  *pp = q;
  return true;
}

static uint32_t next_cap(uint32_t cap, uint32_t max)
{
  return cap >= max / 2 ? max : cap * 2;
}

/* The MR table doubles (slot i keeps its keys: lkey (i + 1) << 8 | gen). */
static bool mr_grow(struct simnic *n)
{
  uint32_t cap = next_cap(n->mcap, n->f->prof.max_mr);
  if (cap == n->mcap || !grow(&n->mrs, sizeof(*n->mrs), n->mcap, cap))
    return false;
  n->mcap = cap;
  return true;
}

/* Every per-QP array doubles; indices (QP numbers) stay. */
static bool qp_grow(struct simnic *n)
{
  uint32_t old = n->qcap, cap = next_cap(old, n->f->prof.max_qp);
  if (cap == old)
    return false;
  bool ok = grow(&n->qps, sizeof(*n->qps), old, cap) && grow(&n->live, sizeof(uint32_t), old, cap) &&
            grow(&n->live_pos, sizeof(uint32_t), old, cap) &&
            grow(&n->dirty, sizeof(uint32_t), old, cap) &&
            grow(&n->heap, sizeof(uint32_t), old, cap) && grow(&n->due, sizeof(uint32_t), old, cap) &&
            grow(&n->txbits, sizeof(uint64_t), (old + 63) / 64, (cap + 63) / 64);
  if (ok) /* else some arrays are larger than qcap: harmless */
    n->qcap = cap;
  return ok;
}

static int nic_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *out)
{
  struct simnic *n = nic;
  if ((!addr && length) || (access & ~7u))
    return PP_INVALID;
  if ((access & (PP_ACCESS_REMOTE_WRITE)) && !(access & PP_ACCESS_LOCAL_WRITE))
    return PP_INVALID; /* ibverbs: remote write needs local write */
  for (uint32_t i = 0; i < n->f->prof.max_mr; i++) {
    if (i == n->mcap && !mr_grow(n))
      return n->mcap == n->f->prof.max_mr ? PP_LIMIT : PP_NOMEM;
    struct mr *m = &n->mrs[i];
    if (m->used)
      continue;
    m->used = true;
    m->gen++;
    uint32_t lkey = (i + 1) << 8 | m->gen;
    m->mr = (struct pp_mr){
        .addr = (uint64_t)(uintptr_t)addr,
        .length = length,
        .lkey = lkey,
        .rkey = lkey | 0x40000000u,
        .access = access,
    };
    *out = m->mr;
    return PP_OK;
  }
  return PP_LIMIT;
}

static int nic_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct simnic *n = nic;
  uint32_t i = key_index(mr->lkey);
  if (!mr_by_key(n, mr->lkey, 0))
    return PP_NOTFOUND;
  n->mrs[i - 1].used = false;
  return PP_OK;
}

static enum pp_status ring_init(struct ring *r, uint32_t cap)
{
  r->wr = calloc(cap ? cap : 1, sizeof(*r->wr));
  r->cap = cap;
  r->head = r->count = 0;
  return r->wr ? PP_OK : PP_NOMEM;
}

static enum pp_status ring_push(struct ring *r, const struct pp_recv_wr *wr)
{
  if (r->count == r->cap)
    return PP_AGAIN;
  r->wr[(r->head + r->count++) % r->cap] = *wr;
  return PP_OK;
}

static int nic_create_srq(void *nic, const struct pp_srq_init_attr *a, uint32_t *srq_num)
{
  struct simnic *n = nic;
  if (a->max_wr < 1 || a->max_wr > n->f->prof.max_qp_wr || a->max_sge > PP_MAX_SGE)
    return PP_INVALID;
  for (uint32_t i = 0; i < n->f->prof.max_srq; i++) {
    struct srq *s = &n->srqs[i];
    if (s->used)
      continue;
    if (ring_init(&s->rq, a->max_wr) != PP_OK)
      return PP_NOMEM;
    if (n->f->faults.srq_delay_ns && !(s->rq.ready = calloc(a->max_wr, sizeof(*s->rq.ready)))) {
      free(s->rq.wr);
      return PP_NOMEM;
    }
    s->used = true;
    s->max_sge = a->max_sge;
    s->limit = a->srq_limit;
    *srq_num = i + 1;
    return PP_OK;
  }
  return PP_LIMIT;
}

static int nic_modify_srq(void *nic, uint32_t srq_num, uint32_t limit)
{
  struct srq *s = srq_get(nic, srq_num);
  if (!s)
    return PP_NOTFOUND;
  if (limit > s->rq.cap)
    return PP_INVALID;
  s->limit = limit;
  return PP_OK;
}

static int nic_destroy_srq(void *nic, uint32_t srq_num)
{
  struct simnic *n = nic;
  struct srq *s = srq_get(n, srq_num);
  if (!s)
    return PP_NOTFOUND;
  for (uint32_t k = 0; k < n->nlive; k++)
    if (n->qps[n->live[k]].init.srq_num == srq_num)
      return PP_STATE; /* ibverbs: EBUSY while a QP uses it */
  free(s->rq.wr);
  free(s->rq.ready);
  *s = (struct srq){0};
  return PP_OK;
}

static int nic_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qp_num)
{
  struct simnic *n = nic;
  const struct pp_nic_profile *prof = &n->f->prof;
  if (a->max_send_wr < 1 || a->max_send_wr > prof->max_qp_wr || a->max_recv_wr > prof->max_qp_wr ||
      a->max_send_sge > PP_MAX_SGE || a->max_recv_sge > PP_MAX_SGE || a->peer >= n->f->nhosts ||
      (a->srq_num && !srq_get(n, a->srq_num)))
    return PP_INVALID;
  for (uint32_t i = 0; i < prof->max_qp; i++) {
    if (i == n->qcap && !qp_grow(n))
      return n->qcap == prof->max_qp ? PP_LIMIT : PP_NOMEM;
    struct qp *qp = &n->qps[i];
    if (qp->used)
      continue;
    *qp = (struct qp){.init = *a, .qpn = QPN_BASE + i, .state = PP_QPS_RESET, .key = UINT64_MAX};
    qp->sq = calloc(a->max_send_wr, sizeof(*qp->sq));
    if (!qp->sq || ring_init(&qp->rq, a->srq_num ? 0 : a->max_recv_wr) != PP_OK) {
      free(qp->sq);
      free(qp->rq.wr);
      *qp = (struct qp){0};
      return PP_NOMEM;
    }
    qp->used = true;
    n->live_pos[i] = n->nlive;
    n->live[n->nlive++] = i; /* last in `live`: no other place moves, its bit is clear */
    *qp_num = qp->qpn;
    return PP_OK;
  }
  return PP_LIMIT;
}

static int nic_destroy_qp(void *nic, uint32_t qpn)
{
  struct simnic *n = nic;
  struct qp *qp = qp_get(n, qpn);
  if (!qp)
    return PP_NOTFOUND;
  uint32_t idx = (uint32_t)(qp - n->qps), k = 0;
  while (n->live[k] != idx)
    k++;
  memmove(&n->live[k], &n->live[k + 1], (n->nlive - k - 1) * sizeof(*n->live));
  n->nlive--;
  if (qp->dirty) { /* off the dirty list: qp_sync sees only QPs in use */
    k = 0;
    while (n->dirty[k] != idx)
      k++;
    n->dirty[k] = n->dirty[--n->ndirty];
  }
  heap_set(n, qp, UINT64_MAX);
  for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++)
    sq_at(qp, i)->gen = 0;
  drop_placement(n, qp, false);
  free(qp->sq);
  free(qp->rq.wr);
  *qp = (struct qp){0};
  qp_reindex(n);
  return PP_OK;
}

static void qp_reset(struct qp *qp)
{
  qp->sq_head = qp->sq_next = qp->sq_tail = qp->sq_done = 0;
  qp->rq.head = qp->rq.count = 0;
  qp->rnr_until = qp->ack_deadline = 0;
  qp->ack_pending = false;
  qp->ack_unsent = 0;
  qp->reads_out = 0;
  qp->retry_started = qp->psn_nak_sent = false;
  qp->attr = (struct pp_qp_attr){0};
}

/* Attributes ibverbs requires for each RC transition. */
static unsigned required_mask(enum pp_qp_state from, enum pp_qp_state to)
{
  if (from == PP_QPS_INIT && to == PP_QPS_RTR)
    return PP_QP_PATH_MTU | PP_QP_DEST_QPN | PP_QP_RQ_PSN | PP_QP_MAX_DEST_RD_ATOMIC |
           PP_QP_MIN_RNR_TIMER;
  if (from == PP_QPS_RTR && to == PP_QPS_RTS)
    return PP_QP_SQ_PSN | PP_QP_TIMEOUT | PP_QP_RETRY_CNT | PP_QP_RNR_RETRY |
           PP_QP_MAX_QP_RD_ATOMIC;
  return 0;
}

static bool attrs_valid(const struct simnic *n, const struct pp_qp_attr *a, unsigned mask)
{
  const struct pp_nic_profile *prof = &n->f->prof;
  if ((mask & PP_QP_PATH_MTU) &&
      (pp_mtu_bytes(a->path_mtu) == 0 || pp_mtu_bytes(a->path_mtu) > prof->mtu))
    return false;
  if ((mask & PP_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
    return false;
  if ((mask & PP_QP_TIMEOUT) && a->timeout > 31)
    return false;
  if ((mask & PP_QP_RETRY_CNT) && a->retry_cnt > 7)
    return false;
  if ((mask & PP_QP_RNR_RETRY) && a->rnr_retry > 7)
    return false;
  if ((mask & PP_QP_MAX_QP_RD_ATOMIC) && (a->max_rd_atomic > prof->max_rd_atomic))
    return false;
  if ((mask & PP_QP_MAX_DEST_RD_ATOMIC) && (a->max_dest_rd_atomic > prof->max_rd_atomic))
    return false;
  return true;
}

static void apply_attrs(struct qp *qp, const struct pp_qp_attr *a, unsigned mask)
{
#define SET(flag, field)                                                       \
  if (mask & (flag))                                                           \
  qp->attr.field = a->field
  SET(PP_QP_ACCESS_FLAGS, qp_access_flags);
  SET(PP_QP_PATH_MTU, path_mtu);
  SET(PP_QP_TIMEOUT, timeout);
  SET(PP_QP_RETRY_CNT, retry_cnt);
  SET(PP_QP_RNR_RETRY, rnr_retry);
  SET(PP_QP_RQ_PSN, rq_psn);
  SET(PP_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
  SET(PP_QP_MIN_RNR_TIMER, min_rnr_timer);
  SET(PP_QP_SQ_PSN, sq_psn);
  SET(PP_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
  SET(PP_QP_DEST_QPN, dest_qp_num);
#undef SET
}

static int nic_modify_qp(void *nic, uint32_t qpn, const struct pp_qp_attr *a, unsigned mask)
{
  struct simnic *n = nic;
  struct qp *qp = qp_get(n, qpn);
  if (!qp)
    return PP_NOTFOUND;
  enum pp_qp_state from = qp->state, to = (mask & PP_QP_STATE) ? a->qp_state : from;
  if ((mask & PP_QP_STATE) && !pp_qp_transition_ok(from, to))
    return PP_STATE;
  if ((mask & required_mask(from, to)) != required_mask(from, to) || !attrs_valid(n, a, mask))
    return PP_INVALID;
  if (to == PP_QPS_RESET) {
    drop_placement(n, qp, false);
    qp_reset(qp);
    qp->state = PP_QPS_RESET;
    return PP_OK;
  }
  if (to == PP_QPS_ERR) {
    qp_to_error(n, qp);
    return PP_OK;
  }
  apply_attrs(qp, a, mask);
  if (from != to)
    logf_(n, "QP %u %s -> %s", qp->qpn, pp_qp_state_name(from), pp_qp_state_name(to));
  qp->state = to;
  if (from == PP_QPS_INIT && to == PP_QPS_RTR)
    qp->epsn = qp->attr.rq_psn & PSN_MASK;
  if (from == PP_QPS_RTR && to == PP_QPS_RTS) {
    qp->next_psn = qp->attr.sq_psn & PSN_MASK;
    qp->rnr_left = qp->attr.rnr_retry;
    qp->retry_left = qp->attr.retry_cnt;
  }
  return PP_OK;
}

static int nic_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *wr)
{
  struct simnic *n = nic;
  struct qp *qp = qp_get(n, qpn);
  if (!qp)
    return PP_NOTFOUND;
  if (qp->state != PP_QPS_RTS && qp->state != PP_QPS_ERR)
    return PP_STATE;
  if (wr->num_sge > qp->init.max_send_sge || (unsigned)wr->opcode > PP_WR_RDMA_READ)
    return PP_INVALID;
  if (qp->sq_tail - qp->sq_done == qp->init.max_send_wr)
    return PP_AGAIN;
  uint64_t len = sges_len(wr->sg_list, wr->num_sge);
  if (len > (1ull << 31)) /* the IB message size limit */
    return PP_INVALID;
  struct sq_wqe *w = sq_at(qp, qp->sq_tail++);
  if (++n->gen == 0) /* 0 means "no WQE" */
    n->gen = 1;
  *w = (struct sq_wqe){.wr = *wr, .len = (uint32_t)len, .gen = n->gen};
  if (qp->state == PP_QPS_ERR) {
    complete_send(n, qp, w, PP_WC_WR_FLUSH_ERR);
    qp->sq_head = qp->sq_next = qp->sq_tail;
    return PP_OK;
  }
  tx_kick(n);
  return PP_OK;
}

static int nic_post_recv(void *nic, uint32_t qpn, const struct pp_recv_wr *wr)
{
  struct simnic *n = nic;
  struct qp *qp = qp_get(n, qpn);
  if (!qp)
    return PP_NOTFOUND;
  if (qp->init.srq_num)
    return PP_INVALID;
  if (qp->state == PP_QPS_RESET)
    return PP_STATE;
  if (wr->num_sge > qp->init.max_recv_sge)
    return PP_INVALID;
  if (qp->state == PP_QPS_ERR) {
    complete_recv(n, qp, wr, PP_WC_WR_FLUSH_ERR, PP_WC_OP_RECV, 0, NULL);
    return PP_OK;
  }
  return ring_push(&qp->rq, wr);
}

static int nic_post_srq_recv(void *nic, uint32_t srq_num, const struct pp_recv_wr *wr)
{
  struct srq *s = srq_get(nic, srq_num);
  if (!s)
    return PP_NOTFOUND;
  if (wr->num_sge > s->max_sge)
    return PP_INVALID;
  if (s->rq.ready && s->rq.count < s->rq.cap) {
    struct simnic *n = nic;
    s->rq.ready[(s->rq.head + s->rq.count) % s->rq.cap] =
        faults_on(n) ? n->now + n->f->faults.srq_delay_ns : 0;
  }
  return ring_push(&s->rq, wr);
}

static int nic_query_counters(void *nic, struct pp_nic_counters *out)
{
  simnic_counters(nic, out);
  return PP_OK;
}

const struct pp_nic_ops simnic_ops = {
    .name = "simgrid",
    .reg_mr = nic_reg_mr,
    .dereg_mr = nic_dereg_mr,
    .create_srq = nic_create_srq,
    .modify_srq = nic_modify_srq,
    .destroy_srq = nic_destroy_srq,
    .create_qp = nic_create_qp,
    .modify_qp = nic_modify_qp,
    .destroy_qp = nic_destroy_qp,
    .post_send = nic_post_send,
    .post_recv = nic_post_recv,
    .post_srq_recv = nic_post_srq_recv,
    .query_counters = nic_query_counters,
};

/* ---------------------------------------------------------------- fabric */

static void nic_fini(struct simnic *n)
{
  while (n->nlive > 0)
    nic_destroy_qp(n, QPN_BASE + n->live[n->nlive - 1]);
  if (n->srqs)
    for (uint32_t i = 0; i < n->f->prof.max_srq; i++) {
      free(n->srqs[i].rq.wr);
      free(n->srqs[i].rq.ready);
    }
  free(n->qps);
  free(n->live);
  free(n->live_pos);
  free(n->dirty);
  free(n->heap);
  free(n->txbits);
  free(n->due);
  free(n->srqs);
  free(n->mrs);
  free(n->cq);
}

static enum pp_status nic_init(struct simnic_fabric *f, struct simnic *n, uint32_t host)
{
  const struct pp_nic_profile *p = &f->prof;
  n->f = f;
  n->host = host;
  n->qcap = p->max_qp < QP_CAP0 ? p->max_qp : QP_CAP0;
  n->mcap = p->max_mr < MR_CAP0 ? p->max_mr : MR_CAP0;
  n->ccap = p->cq_depth < CQ_CAP0 ? p->cq_depth : CQ_CAP0;
  n->qps = calloc(n->qcap, sizeof(*n->qps));
  n->live = calloc(n->qcap, sizeof(*n->live));
  n->live_pos = calloc(n->qcap, sizeof(*n->live_pos));
  n->dirty = calloc(n->qcap, sizeof(*n->dirty));
  n->heap = calloc(n->qcap, sizeof(*n->heap));
  n->txbits = calloc((n->qcap + 63) / 64, sizeof(*n->txbits));
  n->due = calloc(n->qcap, sizeof(*n->due));
  n->srqs = calloc(p->max_srq ? p->max_srq : 1, sizeof(*n->srqs));
  n->mrs = calloc(n->mcap, sizeof(*n->mrs));
  n->cq = calloc(n->ccap, sizeof(*n->cq));
  return n->qps && n->live && n->live_pos && n->dirty && n->heap && n->txbits && n->due &&
                 n->srqs && n->mrs && n->cq
             ? PP_OK
             : PP_NOMEM;
}

/* The size a table that starts at `cap` and doubles reaches for `need` entries, at most `max`. */
static uint64_t cap_for(uint64_t cap, uint64_t need, uint64_t max)
{
  while (cap < need && cap < max)
    cap = next_cap((uint32_t)cap, (uint32_t)max);
  return cap < max ? cap : max;
}

uint64_t simnic_mem_bytes(const struct pp_nic_profile *p, uint64_t qps, uint64_t send_wqes,
                          uint64_t recv_wqes)
{
  uint64_t srqs = p->max_srq ? p->max_srq : 1;
  uint64_t q = cap_for(QP_CAP0, qps, p->max_qp), m = cap_for(MR_CAP0, MR_EST, p->max_mr);
  uint64_t c = cap_for(CQ_CAP0, send_wqes + recv_wqes, p->cq_depth);
  return sizeof(struct simnic) + q * (sizeof(struct qp) + 5 * sizeof(uint32_t)) +
         (q + 63) / 64 * sizeof(uint64_t) + srqs * sizeof(struct srq) + m * sizeof(struct mr) +
         c * sizeof(struct pp_wc) + send_wqes * sizeof(struct sq_wqe) +
         recv_wqes * sizeof(struct pp_recv_wr);
}

enum pp_status simnic_fabric_create(uint32_t nhosts, const struct pp_nic_profile *profile,
                                    const struct pp_faults *faults, uint64_t seed,
                                    const struct simnic_wire *wire, struct simnic_fabric **out)
{
  char err[128];
  *out = NULL;
  if (nhosts == 0 || !wire || !wire->send || pp_nic_profile_check(profile, err, sizeof(err)) ||
      faults->loss < 0 || faults->loss >= 1 || !(faults->scramble >= 0 && faults->scramble <= 1))
    return PP_INVALID;
  struct simnic_fabric *f = calloc(1, sizeof(*f));
  if (!f)
    return PP_NOMEM;
  f->prof = *profile;
  f->faults = *faults;
  f->wire = *wire;
  f->nhosts = nhosts;
  pp_prng_seed(&f->prng, pp_seed_derive(seed, PP_SEED_LOSS, 0));
  pp_prng_seed(&f->fprng, pp_seed_derive(seed, PP_SEED_NIC_FAULTS, 0));
  f->nics = calloc(nhosts, sizeof(*f->nics));
  enum pp_status s = f->nics ? PP_OK : PP_NOMEM;
  for (uint32_t i = 0; s == PP_OK && i < nhosts; i++)
    if ((s = nic_init(f, &f->nics[i], i)) == PP_OK)
      s = simnic_set_line_rate(&f->nics[i], profile->line_rate_bps);
  if (s != PP_OK) {
    simnic_fabric_destroy(f);
    return s;
  }
  *out = f;
  return PP_OK;
}

void simnic_fabric_destroy(struct simnic_fabric *f)
{
  if (!f)
    return;
  for (uint32_t i = 0; f->nics && i < f->nhosts; i++)
    if (f->nics[i].f)
      nic_fini(&f->nics[i]);
  free(f->nics);
  while (f->slabs) {
    struct pkt_slab *s = f->slabs;
    f->slabs = s->next;
    free(s);
  }
  free(f);
}

struct simnic *simnic_fabric_nic(struct simnic_fabric *f, uint32_t host)
{
  return host < f->nhosts ? &f->nics[host] : NULL;
}

uint64_t simnic_fabric_in_flight(const struct simnic_fabric *f)
{
  return f->in_flight;
}

void simnic_fabric_set_log(struct simnic_fabric *f, FILE *log)
{
  f->log = log;
}
