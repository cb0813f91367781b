/*
 * One captured frame to the transport headers of its RoCE or InfiniBand packet. Layouts: IBTA
 * vol. 1 chapter 9 (BTH 12 bytes: opcode, SE|M|PadCnt|TVer, P_Key, reserved, DestQP, A|reserved,
 * PSN; RETH 16: VA, R_Key, DMA length; AETH 4: syndrome, MSN; ImmDt/IETH 4; AtomicETH 28;
 * AtomicAckETH 8), annex A16/A17 for RoCE (GRH or IP/UDP 4791 before the BTH, ICRC after), the
 * Linux cooked headers as libpcap documents LINKTYPE_LINUX_SLL and LINKTYPE_LINUX_SLL2. Every
 * read is checked against the captured length; lengths in the headers are checked against each
 * other and against the frame's length on the wire.
 */
#define _POSIX_C_SOURCE 200809L /* inet_ntop */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "tools/import/import.h"

#define ROCE_PORT 4791
#define BTH_LEN 12
#define ICRC_LEN 4

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be24(const uint8_t *p) { return (uint32_t)p[0] << 16 | be16(p + 1); }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | be24(p + 1); }

bool pp_ib_linktype_known(int lt)
{
  return lt == PP_LT_ETHERNET || lt == PP_LT_RAW || lt == PP_LT_LINUX_SLL || lt == PP_LT_IPV4 ||
         lt == PP_LT_IPV6 || lt == PP_LT_INFINIBAND || lt == PP_LT_LINUX_SLL2;
}

/* the frame being decoded */
struct cur {
  const uint8_t *p;
  uint32_t cap, len; /* captured, on the wire */
  char *why;
  size_t whylen;
};

static int bad(struct cur *c, const char *fmt, unsigned a, unsigned b)
{
  snprintf(c->why, c->whylen, fmt, a, b);
  return -1;
}

/* The headers need `need` bytes from the start of the frame: captured and on the wire. */
static int need(struct cur *c, uint32_t need, const char *what)
{
  if (need <= c->cap)
    return 0;
  char fmt[160];
  snprintf(fmt, sizeof(fmt), "the %s ends at byte %%u, %s %%u bytes", what,
           c->cap < c->len ? "the snapshot captured only" : "the frame has only");
  return bad(c, fmt, need, c->cap);
}

/* Extended transport headers after the BTH, by RC opcode: their length, -1 when unknown. */
static int eth_len(uint8_t op, struct pp_ib_pkt *k)
{
  k->has_reth = op == 0x06 || op == 0x0a || op == 0x0b || op == 0x0c;
  k->has_imm = op == 0x03 || op == 0x05 || op == 0x09 || op == 0x0b;
  k->has_aeth = op == 0x0d || op == 0x0f || op == 0x10 || op == 0x11 || op == 0x12;
  k->has_ieth = op == 0x16 || op == 0x17;
  k->has_atomic = op == 0x13 || op == 0x14;
  k->has_atomic_ack = op == 0x12;
  if (op > 0x17 || op == 0x15)
    return -1;
  return (k->has_reth ? 16 : 0) + (k->has_imm ? 4 : 0) + (k->has_aeth ? 4 : 0) +
         (k->has_ieth ? 4 : 0) + (k->has_atomic ? 28 : 0) + (k->has_atomic_ack ? 8 : 0);
}

/* BTH at offset `off`, `ib` bytes of transport (BTH through ICRC) by the enclosing length. */
static int transport(struct cur *c, uint32_t off, uint32_t ib, struct pp_ib_pkt *k)
{
  if (ib < BTH_LEN + ICRC_LEN)
    return bad(c, "the RoCE/IB transport is %u bytes, less than BTH and ICRC (%u)", ib,
               BTH_LEN + ICRC_LEN);
  if (need(c, off + BTH_LEN, "BTH"))
    return -1;
  const uint8_t *b = c->p + off;
  k->opcode = b[0];
  k->se = b[1] & 0x80;
  k->pad = (b[1] >> 4) & 3;
  k->pkey = (uint16_t)be16(b + 2);
  k->dqpn = be24(b + 5);
  k->ackreq = b[8] & 0x80;
  k->psn = be24(b + 9);
  if (k->opcode >> 5) /* UC, RD, UD, CNP...: counted, not decoded */
    return 1;
  int x = eth_len(k->opcode, k);
  if (x < 0)
    return 1; /* an RC opcode this decoder does not know: the caller counts it */
  uint32_t hdr = BTH_LEN + (uint32_t)x;
  if (hdr + k->pad + ICRC_LEN > ib)
    return bad(c, "opcode 0x%02x needs %u bytes of headers, pad and ICRC; the packet has fewer",
               k->opcode, hdr + k->pad + ICRC_LEN);
  if (need(c, off + hdr, "extended transport header"))
    return -1;
  const uint8_t *e = b + BTH_LEN;
  if (k->has_reth) {
    k->va = (uint64_t)be32(e) << 32 | be32(e + 4);
    k->rkey = be32(e + 8);
    k->dma_len = be32(e + 12);
    e += 16;
  }
  if (k->has_atomic)
    e += 28;
  if (k->has_aeth) {
    k->syndrome = e[0];
    k->msn = be24(e + 1);
    e += 4;
  }
  if (k->has_atomic_ack)
    e += 8;
  if (k->has_imm || k->has_ieth)
    k->imm = be32(e);
  k->payload = ib - hdr - k->pad - ICRC_LEN;
  return 1;
}

static void addr4(struct pp_ib_addr *a, const uint8_t *p)
{
  memset(a, 0, sizeof(*a));
  a->fam = 4;
  a->a[10] = a->a[11] = 0xff;
  memcpy(a->a + 12, p, 4);
}

static void addr6(struct pp_ib_addr *a, const uint8_t *p)
{
  a->fam = 6;
  memcpy(a->a, p, 16);
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!memcmp(p, mapped, 12))
    a->fam = 4; /* a RoCEv2 GID of an IPv4 address */
}

/* UDP at `off` with `avail` bytes of IP payload. */
static int udp(struct cur *c, uint32_t off, uint32_t avail, struct pp_ib_pkt *k)
{
  if (avail < 8)
    return 0;
  if (need(c, off + 8, "UDP header"))
    return -1;
  const uint8_t *u = c->p + off;
  if (be16(u + 2) != ROCE_PORT)
    return 0;
  uint32_t ulen = be16(u + 4);
  if (ulen < 8 || ulen > avail)
    return bad(c, "UDP length %u does not fit the IP payload of %u bytes", ulen, avail);
  return transport(c, off + 8, ulen - 8, k);
}

static int ipv4(struct cur *c, uint32_t off, struct pp_ib_pkt *k)
{
  if (need(c, off + 20, "IPv4 header"))
    return -1;
  const uint8_t *ip = c->p + off;
  uint32_t ihl = (ip[0] & 15u) * 4, tot = be16(ip + 2);
  if (ip[0] >> 4 != 4 || ihl < 20)
    return bad(c, "IPv4 version %u, header length %u", ip[0] >> 4, ihl);
  if (ip[9] != 17)
    return 0;
  if (be16(ip + 6) & 0x3fff)
    return 0; /* a fragment: RoCE never fragments, and a piece is not a packet */
  if (tot < ihl || (uint64_t)off + tot > c->len)
    return bad(c, "IPv4 total length %u does not fit the frame's %u bytes", tot, c->len - off);
  if (need(c, off + ihl, "IPv4 options"))
    return -1;
  addr4(&k->src, ip + 12);
  addr4(&k->dst, ip + 16);
  return udp(c, off + ihl, tot - ihl, k);
}

static int ipv6(struct cur *c, uint32_t off, struct pp_ib_pkt *k)
{
  if (need(c, off + 40, "IPv6 header"))
    return -1;
  const uint8_t *ip = c->p + off;
  uint32_t plen = be16(ip + 4);
  if (ip[0] >> 4 != 6)
    return bad(c, "an IPv6 ethertype or link type with IP version %u (header byte 0x%02x)",
               ip[0] >> 4, ip[0]);
  if (ip[6] != 17)
    return 0; /* extension headers: RoCEv2 NICs send none */
  if ((uint64_t)off + 40 + plen > c->len)
    return bad(c, "IPv6 payload length %u does not fit the frame's %u bytes", plen,
               c->len - off - 40);
  addr6(&k->src, ip + 8);
  addr6(&k->dst, ip + 24);
  return udp(c, off + 40, plen, k);
}

/* RoCEv1 and the IB GRH: 40 bytes, IPv6-shaped, next header 0x1b = BTH. */
static int grh(struct cur *c, uint32_t off, uint32_t total, struct pp_ib_pkt *k)
{
  if (need(c, off + 40, "GRH"))
    return -1;
  const uint8_t *g = c->p + off;
  uint32_t plen = be16(g + 4);
  if (g[6] != 0x1b)
    return 0;
  if (plen + 40 > total)
    return bad(c, "GRH payload length %u does not fit %u bytes", plen, total - 40);
  addr6(&k->src, g + 8);
  addr6(&k->dst, g + 24);
  k->src.fam = k->dst.fam = 6;
  return transport(c, off + 40, plen, k);
}

static int by_ethertype(struct cur *c, uint32_t type, uint32_t off, struct pp_ib_pkt *k)
{
  if (type == 0x0800)
    return ipv4(c, off, k);
  if (type == 0x86dd)
    return ipv6(c, off, k);
  if (type == 0x8915) /* RoCEv1: GRH, BTH ..., ICRC */
    return grh(c, off, c->len - off, k);
  return 0;
}

static int ethernet(struct cur *c, struct pp_ib_pkt *k)
{
  uint32_t off = 12;
  for (int tags = 0; tags < 3; tags++) { /* 802.1Q and 802.1ad tags */
    if (need(c, off + 2, "Ethernet header"))
      return -1;
    uint32_t type = be16(c->p + off);
    if (type != 0x8100 && type != 0x88a8)
      return by_ethertype(c, type, off + 2, k);
    off += 4;
  }
  return 0;
}

static int raw_ip(struct cur *c, uint32_t off, struct pp_ib_pkt *k)
{
  if (need(c, off + 1, "IP header"))
    return -1;
  unsigned v = c->p[off] >> 4;
  return v == 4 ? ipv4(c, off, k) : v == 6 ? ipv6(c, off, k) : 0;
}

/* Native InfiniBand: LRH (8 bytes), GRH when LNH says so, BTH ..., ICRC, VCRC. */
static int infiniband(struct cur *c, struct pp_ib_pkt *k)
{
  if (need(c, 8, "LRH"))
    return -1;
  const uint8_t *l = c->p;
  uint32_t lnh = l[1] & 3, words = be16(l + 4) & 0x7ff;
  uint32_t total = words * 4; /* LRH through ICRC */
  if (lnh < 2)
    return 0; /* raw or IP over the LRH */
  if (total < 8 || total > c->len)
    return bad(c, "LRH packet length %u bytes does not fit the frame's %u", total, c->len);
  memset(&k->src, 0, sizeof(k->src));
  memset(&k->dst, 0, sizeof(k->dst));
  k->src.fam = k->dst.fam = 'L';
  memcpy(k->dst.a, l + 2, 2);
  memcpy(k->src.a, l + 6, 2);
  if (lnh == 3)
    return grh(c, 8, total - 8, k);
  return transport(c, 8, total - 8, k);
}

int pp_ib_decode(int lt, const uint8_t *p, uint32_t caplen, uint32_t len, struct pp_ib_pkt *k,
                 char *why, size_t whylen)
{
  struct cur c = {.p = p, .cap = caplen < len ? caplen : len, .len = len, .why = why,
                  .whylen = whylen};
  memset(k, 0, sizeof(*k));
  switch (lt) {
  case PP_LT_ETHERNET:
    return ethernet(&c, k);
  case PP_LT_LINUX_SLL: /* 16 bytes: packet type, ARPHRD, address length, address, protocol */
    return need(&c, 16, "Linux cooked header") ? -1 : by_ethertype(&c, be16(p + 14), 16, k);
  case PP_LT_LINUX_SLL2: /* 20 bytes: protocol first */
    return need(&c, 20, "Linux cooked v2 header") ? -1 : by_ethertype(&c, be16(p), 20, k);
  case PP_LT_RAW:
    return raw_ip(&c, 0, k);
  case PP_LT_IPV4:
    return ipv4(&c, 0, k);
  case PP_LT_IPV6:
    return ipv6(&c, 0, k);
  case PP_LT_INFINIBAND:
    return infiniband(&c, k);
  default:
    snprintf(why, whylen, "link type %d is not one the importer reads", lt);
    return -1;
  }
}

void pp_ib_addr_format(const struct pp_ib_addr *a, char *buf, size_t len)
{
  const uint8_t *x = a->a;
  if (a->fam == 4) {
    snprintf(buf, len, "%u.%u.%u.%u", x[12], x[13], x[14], x[15]);
  } else if (a->fam == 'L') {
    snprintf(buf, len, "lid 0x%04x", be16(x));
  } else if (!inet_ntop(AF_INET6, x, buf, (socklen_t)len)) {
    snprintf(buf, len, "?");
  }
}

const char *pp_ib_opcode_name(uint8_t op)
{
  static const char *const rc[] = {
      "SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_IMM", "SEND_ONLY", "SEND_ONLY_IMM",
      "WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY",
      "WRITE_ONLY_IMM", "READ_REQUEST", "READ_RESPONSE_FIRST", "READ_RESPONSE_MIDDLE",
      "READ_RESPONSE_LAST", "READ_RESPONSE_ONLY", "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE",
      "COMPARE_SWAP", "FETCH_ADD", "RC_0x15", "SEND_LAST_INV", "SEND_ONLY_INV"};
  if (op < sizeof(rc) / sizeof(rc[0]))
    return rc[op];
  return op == 0x81 ? "CNP" : "non-RC";
}
