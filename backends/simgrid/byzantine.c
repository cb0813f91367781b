/* A byzantine peer between one engine and its NIC: see byzantine.h. */
#include "byzantine.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define HB 64u    /* a message header: what FIELD changes */
#define SLOT 128u /* bounce slot: a header and the first bytes after it (data lies) */

static const char *const action_names[] = {
#define PP_X(id, name) name,
    PP_BYZ_ACTION_LIST(PP_X)
#undef PP_X
};

const char *pp_byz_action_name(enum pp_byz_action a)
{
  return (unsigned)a < PP_BYZ_ACTION_COUNT ? action_names[a] : "?";
}

struct held {
  bool on;
  struct pp_send_wr wr;
};

struct pp_byz {
  const struct pp_nic_ops *ops;
  void *nic;
  bool bytes;
  enum pp_byz_wire wire;
  double rate;
  struct pp_prng prng;
  const uint8_t *in;
  size_t in_len, in_pos, asked;
  uint8_t *bounce;
  struct pp_mr bmr;
  bool bmr_tried;
  uint32_t bnext;
  uint32_t qpn[PP_BYZ_MAX_QPS];
  struct held held[PP_BYZ_MAX_QPS];
  uint32_t nqp;
  struct pp_mr mrs[PP_BYZ_MAX_MRS]; /* what the engine registered (READ responses) */
  uint32_t nmr;
  struct pp_byz_counts c;
  bool data_lies;
};

/* ------------------------------------------------------------------ decisions */

static uint64_t in_bytes(struct pp_byz *b, unsigned n)
{
  uint64_t v = 0;
  b->asked += n;
  for (unsigned i = 0; i < n && b->in_pos < b->in_len; i++)
    v |= (uint64_t)b->in[b->in_pos++] << (8 * i);
  return v;
}

/* Uniform-ish in [0, bound); 0 when bound is 0 or the input is exhausted. */
static uint32_t pick(struct pp_byz *b, uint32_t bound)
{
  if (bound <= 1)
    return 0;
  if (b->bytes)
    return (uint32_t)(in_bytes(b, bound > 256 ? 4 : 1) % bound);
  return (uint32_t)pp_prng_below(&b->prng, bound);
}

static uint64_t rnd64(struct pp_byz *b)
{
  return b->bytes ? in_bytes(b, 8) : pp_prng_next(&b->prng);
}

/* A value of `bits` bits different from old: the boundary values fuzzers like. */
static uint64_t interesting(struct pp_byz *b, uint64_t old, unsigned bits)
{
  uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1, v;
  switch (pick(b, 8)) {
  case 0: v = 0; break;
  case 1: v = 1; break;
  case 2: v = old + 1; break;
  case 3: v = old - 1; break;
  case 4: v = mask; break;
  case 5: v = old ^ (1ull << pick(b, bits)); break;
  case 6: v = old + 2 + pick(b, 1024); break;
  default: v = rnd64(b); break;
  }
  v &= mask;
  return v == (old & mask) ? (old ^ 1) & mask : v;
}

/* ------------------------------------------------------------------ helpers */

static uint64_t get_n(const uint8_t *p, unsigned width)
{
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (width) {
  case 1: memcpy(&u8, p, 1); return u8;
  case 2: memcpy(&u16, p, 2); return u16;
  case 4: memcpy(&u32, p, 4); return u32;
  default: memcpy(&u64, p, 8); return u64;
  }
}

static void put_n(uint8_t *p, unsigned width, uint64_t v)
{
  uint8_t u8 = (uint8_t)v;
  uint16_t u16 = (uint16_t)v;
  uint32_t u32 = (uint32_t)v;
  switch (width) {
  case 1: memcpy(p, &u8, 1); break;
  case 2: memcpy(p, &u16, 2); break;
  case 4: memcpy(p, &u32, 4); break;
  default: memcpy(p, &v, 8); break;
  }
}

static int qp_slot(const struct pp_byz *b, uint32_t qpn)
{
  for (uint32_t i = 0; i < b->nqp; i++)
    if (b->qpn[i] == qpn)
      return (int)i;
  return -1;
}

static uint32_t wr_len(const struct pp_send_wr *wr)
{
  uint64_t n = 0;
  for (uint32_t i = 0; i < wr->num_sge && i < PP_MAX_SGE; i++)
    n += wr->sg_list[i].length;
  return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static bool is_send(enum pp_wr_opcode op)
{
  return op == PP_WR_SEND || op == PP_WR_SEND_WITH_IMM;
}

static bool is_rdma(enum pp_wr_opcode op)
{
  return op == PP_WR_RDMA_WRITE || op == PP_WR_RDMA_WRITE_WITH_IMM || op == PP_WR_RDMA_READ;
}

/* The next bounce slot (registered on first use); NULL when it cannot be registered. */
static uint8_t *bounce_slot(struct pp_byz *b)
{
  if (!b->bmr_tried) {
    b->bmr_tried = true;
    b->bounce = calloc(PP_BYZ_SLOTS, SLOT);
    if (b->bounce && b->ops->reg_mr(b->nic, b->bounce, (size_t)PP_BYZ_SLOTS * SLOT,
                                    PP_ACCESS_LOCAL_WRITE, &b->bmr) != PP_OK) {
      free(b->bounce);
      b->bounce = NULL;
    }
  }
  if (!b->bounce)
    return NULL;
  uint8_t *s = b->bounce + (size_t)(b->bnext++ % PP_BYZ_SLOTS) * SLOT;
  memset(s, 0, SLOT);
  return s;
}

/* Moves the first min(len, max) bytes of wr into a bounce slot (the rest, if any, stays where it
 * is as a second scatter element). NULL when it cannot (several elements, no bounce memory). */
static uint8_t *take_bytes(struct pp_byz *b, struct pp_send_wr *wr, uint32_t max, uint32_t *hlen)
{
  uint32_t len = wr_len(wr);
  if (wr->num_sge != 1 || len == 0)
    return NULL;
  uint8_t *s = bounce_slot(b);
  if (!s)
    return NULL;
  struct pp_sge orig = wr->sg_list[0];
  uint32_t h = len < max ? len : max;
  memcpy(s, (const void *)(uintptr_t)orig.addr, h);
  wr->sg_list[0] = (struct pp_sge){.addr = (uint64_t)(uintptr_t)s, .length = h, .lkey = b->bmr.lkey};
  if (len > h) {
    wr->sg_list[1] = (struct pp_sge){.addr = orig.addr + h, .length = len - h, .lkey = orig.lkey};
    wr->num_sge = 2;
  }
  *hlen = h;
  return s;
}

static uint8_t *take_header(struct pp_byz *b, struct pp_send_wr *wr, uint32_t *hlen)
{
  return take_bytes(b, wr, HB, hlen);
}

/* ------------------------------------------------------------------ the mutations */

/* The p2p header fields the seeded source may change (byzantine.h lists why not the others). */
static const struct {
  uint8_t off, width;
} p2p_fields[] = {{0, 1},  {1, 1},  {2, 2},  {8, 4},  {16, 4}, {20, 4}, {24, 8},
                  {32, 8}, {40, 8}, {48, 4}, {52, 4}, {56, 4}, {60, 2}};
enum { P2P_EAGER = 1, P2P_RTS = 2, P2P_CTS = 3 };

static bool mutate_field(struct pp_byz *b, struct pp_send_wr *wr)
{
  uint32_t h;
  uint8_t *s = take_header(b, wr, &h);
  if (!s)
    return false;
  unsigned off, width;
  if (b->bytes) {
    if (pick(b, 4) == 0) { /* a whole new header */
      for (uint32_t i = 0; i < h; i++)
        s[i] = (uint8_t)in_bytes(b, 1);
      return true;
    }
    width = 1u << pick(b, 4);
    off = h >= width ? pick(b, h - width + 1) : 0;
    if (width > h)
      width = h;
  } else if (b->wire == PP_BYZ_WIRE_P2P && is_send(wr->opcode) && h == HB) {
    uint8_t type = s[0];
    unsigned k = pick(b, sizeof p2p_fields / sizeof p2p_fields[0]);
    off = p2p_fields[k].off;
    width = p2p_fields[k].width;
    if (off == 16 && type != P2P_EAGER && type != P2P_CTS)
      off = 8, width = 4; /* an RTS's length: not checkable (byzantine.h); its seq instead */
    if (off == 40 && type != P2P_CTS) { /* an address the peer owns: only far away */
      put_n(s + off, 8, get_n(s + off, 8) ^ (1ull << (40 + pick(b, 20))));
      return true;
    }
  } else {
    /* ring control writes (credits, CTS entries): any aligned word */
    width = h >= 8 && pick(b, 2) ? 8 : 4;
    if (h < width)
      return false;
    off = pick(b, h / width) * width;
  }
  if (width == 0)
    return false;
  put_n(s + off, width, interesting(b, get_n(s + off, width), width * 8));
  return true;
}

/* pp_byz_set_data_lies: a byte of the message itself changed, past the p2p header (64 bytes) or
 * a ring chunk's start, past the workload's own 16-byte header: what no receiver can detect. */
static bool lie_in_data(struct pp_byz *b, struct pp_send_wr *wr)
{
  bool ring_data = wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM && !(wr->imm_data >> 31);
  uint32_t from = (is_send(wr->opcode) ? HB : 0) + 16, h;
  if ((!is_send(wr->opcode) && !ring_data) || wr_len(wr) <= from)
    return false;
  uint8_t *s = take_bytes(b, wr, SLOT, &h);
  if (!s || h <= from)
    return false;
  s[from + pick(b, h - from)] ^= 0x5a;
  return true;
}

static void mutate_imm(struct pp_byz *b, struct pp_send_wr *wr)
{
  if (b->bytes) {
    wr->imm_data = (uint32_t)interesting(b, wr->imm_data, 32);
    return;
  }
  /* keep the kind (credit / data) and a data chunk's last flag: change the value */
  bool credit = (wr->imm_data >> 31) & 1;
  unsigned bits = credit ? 31 : 30;
  uint32_t keep = wr->imm_data & ~(uint32_t)((1ull << bits) - 1);
  wr->imm_data = keep | (uint32_t)interesting(b, wr->imm_data & ((1u << bits) - 1), bits);
}

static void shorten(struct pp_byz *b, struct pp_send_wr *wr)
{
  uint32_t len = wr_len(wr), cut = 1 + pick(b, len);
  /* take the bytes off the last scatter element(s) */
  for (uint32_t i = wr->num_sge; i-- > 0 && cut;) {
    uint32_t k = wr->sg_list[i].length < cut ? wr->sg_list[i].length : cut;
    wr->sg_list[i].length -= k;
    cut -= k;
  }
}

/* A dropped request becomes a zero-length RDMA WRITE: it completes in its place in the send
 * queue as the original would have, and touches nothing at the peer (no rkey is checked). */
static void drop(struct pp_send_wr *wr)
{
  *wr = (struct pp_send_wr){.wr_id = wr->wr_id, .opcode = PP_WR_RDMA_WRITE,
                            .send_flags = wr->send_flags};
}

/* Which mutations apply to wr: a bit per action (PASS excluded). */
static uint32_t applicable(const struct pp_byz *b, const struct pp_send_wr *wr)
{
  uint32_t len = wr_len(wr), m = 0;
  bool send = is_send(wr->opcode), rdma = is_rdma(wr->opcode);
  bool plain_write = wr->opcode == PP_WR_RDMA_WRITE;
  bool imm = wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM || wr->opcode == PP_WR_SEND_WITH_IMM;
#define ON(id) m |= 1u << PP_BYZ_##id
  if (b->bytes) {
    if (len)
      ON(FIELD);
    if (imm)
      ON(IMM);
    if (rdma) {
      ON(RADDR);
      ON(RKEY);
    }
    if (len)
      ON(SHORTEN);
    ON(DROP);
    ON(DUP);
    ON(HOLD);
    ON(INJECT);
    return m;
  }
  bool control_write = wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM && len <= HB;
  if ((send && b->wire == PP_BYZ_WIRE_P2P) || (control_write && (wr->imm_data >> 31) && len >= 4))
    ON(FIELD);
  if (wr->opcode == PP_WR_RDMA_WRITE_WITH_IMM)
    ON(IMM);
  if (rdma) {
    ON(RADDR);
    ON(RKEY);
  }
  if (send && b->wire == PP_BYZ_WIRE_P2P && len)
    ON(SHORTEN);
  if (!plain_write) {
    ON(DROP);
    ON(HOLD);
  }
  ON(DUP);
#undef ON
  return m;
}

static enum pp_byz_action choose(struct pp_byz *b, const struct pp_send_wr *wr)
{
  uint32_t m = applicable(b, wr);
  if (b->bytes) {
    enum pp_byz_action a = (enum pp_byz_action)pick(b, PP_BYZ_ACTION_COUNT);
    return (m >> a & 1) ? a : PP_BYZ_PASS;
  }
  if (!m || !(pp_prng_unit(&b->prng) < b->rate))
    return PP_BYZ_PASS;
  uint32_t n = (uint32_t)__builtin_popcount(m), k = pick(b, n);
  for (int a = 0; a < PP_BYZ_ACTION_COUNT; a++)
    if (m >> a & 1 && k-- == 0)
      return (enum pp_byz_action)a;
  return PP_BYZ_PASS;
}

/* Posts the WR held back on QP slot i, if any (it goes after the one just posted). */
static void release_held(struct pp_byz *b, uint32_t qpn, int i)
{
  if (i < 0 || !b->held[i].on)
    return;
  if (b->ops->post_send(b->nic, qpn, &b->held[i].wr) == PP_OK)
    b->held[i].on = false;
}

static void inject(struct pp_byz *b, uint32_t qpn)
{
  uint8_t *s = bounce_slot(b);
  if (!s)
    return;
  uint32_t len = 1 + pick(b, HB);
  for (uint32_t i = 0; i < len; i++)
    s[i] = (uint8_t)in_bytes(b, 1);
  struct pp_send_wr wr = {
      .wr_id = 0,
      .opcode = pick(b, 2) ? PP_WR_SEND : PP_WR_SEND_WITH_IMM,
      .num_sge = 1,
      .sg_list = {{.addr = (uint64_t)(uintptr_t)s, .length = len, .lkey = b->bmr.lkey}},
      .imm_data = (uint32_t)in_bytes(b, 4),
  };
  (void)b->ops->post_send(b->nic, qpn, &wr); /* unsignalled: no completion unless it fails */
}

/* Applies action a to wr (a copy of the engine's); the action actually taken (PASS when it
 * could not be), or HOLD when wr was kept back (not to be posted now). */
static enum pp_byz_action apply(struct pp_byz *b, uint32_t qpn, int slot, struct pp_send_wr *wr,
                                enum pp_byz_action a)
{
  if (b->data_lies) /* the positive control: every mutation a data lie */
    return a != PP_BYZ_PASS && lie_in_data(b, wr) ? PP_BYZ_FIELD : PP_BYZ_PASS;
  switch (a) {
  case PP_BYZ_FIELD: return mutate_field(b, wr) ? a : PP_BYZ_PASS;
  case PP_BYZ_IMM: mutate_imm(b, wr); return a;
  case PP_BYZ_RADDR:
    wr->remote_addr = b->bytes ? interesting(b, wr->remote_addr, 64)
                               : wr->remote_addr ^ (1ull << (40 + pick(b, 20)));
    return a;
  case PP_BYZ_RKEY: wr->rkey = (uint32_t)interesting(b, wr->rkey, 32); return a;
  case PP_BYZ_SHORTEN: shorten(b, wr); return a;
  case PP_BYZ_DROP: drop(wr); return a;
  case PP_BYZ_HOLD:
    if (b->held[slot].on)
      return PP_BYZ_PASS; /* one held at a time per QP */
    b->held[slot] = (struct held){.on = true, .wr = *wr};
    return a;
  case PP_BYZ_INJECT: inject(b, qpn); return a;
  default: return a;
  }
}

static int byz_post_send(void *nic, uint32_t qpn, const struct pp_send_wr *orig)
{
  struct pp_byz *b = nic;
  struct pp_send_wr wr = *orig;
  int slot = qp_slot(b, qpn);
  b->c.wrs++;
  enum pp_byz_action a = slot < 0 ? PP_BYZ_PASS : apply(b, qpn, slot, &wr, choose(b, &wr));
  if (a == PP_BYZ_HOLD) {
    b->c.done[a]++;
    return PP_OK;
  }
  int s = b->ops->post_send(b->nic, qpn, &wr);
  if (s != PP_OK)
    return s;
  b->c.done[a]++;
  if (a == PP_BYZ_DUP) {
    struct pp_send_wr d = wr;
    d.send_flags &= ~(unsigned)PP_SEND_SIGNALED;
    (void)b->ops->post_send(b->nic, qpn, &d); /* a full send queue: no duplicate */
  }
  release_held(b, qpn, slot);
  return PP_OK;
}

/* ------------------------------------------------------------------ pass-through */

static int byz_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  struct pp_byz *b = nic;
  int s = b->ops->reg_mr(b->nic, addr, length, access, mr);
  if (s == PP_OK && b->nmr < PP_BYZ_MAX_MRS)
    b->mrs[b->nmr++] = *mr;
  return s;
}

static int byz_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct pp_byz *b = nic;
  for (uint32_t i = 0; i < b->nmr; i++)
    if (b->mrs[i].lkey == mr->lkey) {
      b->mrs[i] = b->mrs[--b->nmr];
      break;
    }
  return b->ops->dereg_mr(b->nic, mr);
}

static int byz_create_srq(void *nic, const struct pp_srq_init_attr *attr, uint32_t *srq_num)
{
  struct pp_byz *b = nic;
  return b->ops->create_srq(b->nic, attr, srq_num);
}

static int byz_modify_srq(void *nic, uint32_t srq_num, uint32_t srq_limit)
{
  struct pp_byz *b = nic;
  return b->ops->modify_srq(b->nic, srq_num, srq_limit);
}

static int byz_destroy_srq(void *nic, uint32_t srq_num)
{
  struct pp_byz *b = nic;
  return b->ops->destroy_srq(b->nic, srq_num);
}

static int byz_create_qp(void *nic, const struct pp_qp_init_attr *attr, uint32_t *qp_num)
{
  struct pp_byz *b = nic;
  struct pp_qp_init_attr a = *attr;
  if (a.max_send_sge < 2) /* a mutated header goes out of the bounce buffer */
    a.max_send_sge = 2;
  int s = b->ops->create_qp(b->nic, &a, qp_num);
  if (s == PP_OK && b->nqp < PP_BYZ_MAX_QPS) {
    b->qpn[b->nqp] = *qp_num;
    b->held[b->nqp].on = false;
    b->nqp++;
  }
  return s;
}

static int byz_modify_qp(void *nic, uint32_t qp_num, const struct pp_qp_attr *attr, unsigned mask)
{
  struct pp_byz *b = nic;
  return b->ops->modify_qp(b->nic, qp_num, attr, mask);
}

static int byz_destroy_qp(void *nic, uint32_t qp_num)
{
  struct pp_byz *b = nic;
  int i = qp_slot(b, qp_num);
  if (i >= 0) {
    b->nqp--;
    b->qpn[i] = b->qpn[b->nqp];
    b->held[i] = b->held[b->nqp];
  }
  return b->ops->destroy_qp(b->nic, qp_num);
}

static int byz_post_recv(void *nic, uint32_t qp_num, const struct pp_recv_wr *wr)
{
  struct pp_byz *b = nic;
  return b->ops->post_recv(b->nic, qp_num, wr);
}

static int byz_post_srq_recv(void *nic, uint32_t srq_num, const struct pp_recv_wr *wr)
{
  struct pp_byz *b = nic;
  return b->ops->post_srq_recv(b->nic, srq_num, wr);
}

static int byz_query_counters(void *nic, struct pp_nic_counters *out)
{
  struct pp_byz *b = nic;
  return b->ops->query_counters(b->nic, out);
}

const struct pp_nic_ops pp_byz_ops = {
    .name = "byzantine",
    .reg_mr = byz_reg_mr,
    .dereg_mr = byz_dereg_mr,
    .create_srq = byz_create_srq,
    .modify_srq = byz_modify_srq,
    .destroy_srq = byz_destroy_srq,
    .create_qp = byz_create_qp,
    .modify_qp = byz_modify_qp,
    .destroy_qp = byz_destroy_qp,
    .post_send = byz_post_send,
    .post_recv = byz_post_recv,
    .post_srq_recv = byz_post_srq_recv,
    .query_counters = byz_query_counters,
};

/* ------------------------------------------------------------------ life cycle */

static enum pp_status create(const struct pp_nic_ops *ops, void *nic, struct pp_byz **out)
{
  struct pp_byz *b = calloc(1, sizeof(*b));
  if (!b)
    return PP_NOMEM;
  b->ops = ops;
  b->nic = nic;
  *out = b;
  return PP_OK;
}

enum pp_status pp_byz_create_seeded(const struct pp_nic_ops *ops, void *nic, enum pp_byz_wire wire,
                                    double rate, uint64_t seed, struct pp_byz **out)
{
  enum pp_status s = create(ops, nic, out);
  if (s != PP_OK)
    return s;
  (*out)->wire = wire;
  (*out)->rate = rate;
  pp_prng_seed(&(*out)->prng, seed); /* pp_seed_derive(run seed, PP_SEED_BYZANTINE, rank) */
  return PP_OK;
}

enum pp_status pp_byz_create_bytes(const struct pp_nic_ops *ops, void *nic, const uint8_t *data,
                                   size_t len, struct pp_byz **out)
{
  enum pp_status s = create(ops, nic, out);
  if (s != PP_OK)
    return s;
  (*out)->bytes = true;
  (*out)->in = data;
  (*out)->in_len = len;
  return PP_OK;
}

void pp_byz_destroy(struct pp_byz *b)
{
  if (!b)
    return;
  if (b->bounce) {
    (void)b->ops->dereg_mr(b->nic, &b->bmr);
    free(b->bounce);
  }
  free(b);
}

void pp_byz_set_data_lies(struct pp_byz *b, bool on)
{
  b->data_lies = on;
}

void pp_byz_counts(const struct pp_byz *b, struct pp_byz_counts *out)
{
  *out = b->c;
}

bool pp_byz_read_response(struct pp_byz *b, uint64_t addr, uint32_t len, uint32_t rkey)
{
  const struct pp_mr *m = NULL;
  for (uint32_t i = 0; i < b->nmr && !m; i++)
    if (b->mrs[i].rkey == rkey && (b->mrs[i].access & PP_ACCESS_REMOTE_READ) &&
        addr >= b->mrs[i].addr && len <= b->mrs[i].length &&
        addr - b->mrs[i].addr <= b->mrs[i].length - len)
      m = &b->mrs[i];
  if (!b->bytes || !m || len == 0 || pick(b, 2) == 0)
    return false;
  uint8_t *buf = (uint8_t *)(uintptr_t)addr;
  uint32_t off = pick(b, len), room = len - off, n = 1 + pick(b, room < HB ? room : HB);
  for (uint32_t i = 0; i < n; i++)
    buf[off + i] = (uint8_t)in_bytes(b, 1);
  b->c.reads++;
  return true;
}

size_t pp_byz_consumed(const struct pp_byz *b)
{
  return b->asked;
}
