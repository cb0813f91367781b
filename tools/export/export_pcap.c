/*
 * prepost trace export --pcap: the simulated packets (PKT_TX records) as RoCEv2 frames in a
 * pcap file (nanosecond time stamps, Ethernet link type) that Wireshark and tshark dissect:
 * Ethernet | IPv4 | UDP (destination port 4791) | BTH | RETH / AETH / ImmDt | payload | pad |
 * ICRC (the IBTA RoCEv2 annex; Wireshark's packet-infiniband dissector reads the same layout).
 *
 * The simulated NIC sends one record per message; here a message of n MTU packets becomes
 * FIRST/MIDDLE/LAST packets with consecutive PSNs. Payload bytes are zeros (a trace keeps only
 * the heads of received messages). ACKs the simulated NIC piggy-backs on a request become a
 * separate ACKNOWLEDGE just before it, as a real RC responder sends them. Rank r is host
 * 10.0.x.y with x.y = r + 1 and MAC 02:00:00:00:x:y.
 *
 * Time stamps: a record is the start of its transfer; its packets follow one another at the
 * platform's bandwidth (sim.platform.bandwidth_bps, 100 Gb/s without it), each taking its
 * frame's bytes on the wire, and a rank's link carries one frame at a time, up to the next
 * record's time (frames stay in time order; a longer train shares that stamp). The AETH's MSN is
 * the responder's count of completed messages: a message completes when the responder
 * acknowledges its last PSN (an ACK, a NAK or RNR NAK for a later PSN, a piggy-backed ACK, the
 * last response of a READ), so an RNR-NAKed message does not count until it is accepted.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/engine.h"
#include "engine/trace/trace_codec.h"
#include "tools/trace/trace_cli.h"

#define ROCE_PORT 4791
#define ETH_LEN 14
#define IP_LEN 20
#define UDP_LEN 8
#define BTH_LEN 12
#define RETH_LEN 16
#define AETH_LEN 4
#define IMM_LEN 4
#define ICRC_LEN 4

/* IB opcodes of the RC transport */
enum {
  OP_SEND_FIRST = 0x00, OP_SEND_MIDDLE = 0x01, OP_SEND_LAST = 0x02, OP_SEND_LAST_IMM = 0x03,
  OP_SEND_ONLY = 0x04, OP_SEND_ONLY_IMM = 0x05, OP_WRITE_FIRST = 0x06, OP_WRITE_MIDDLE = 0x07,
  OP_WRITE_LAST = 0x08, OP_WRITE_LAST_IMM = 0x09, OP_WRITE_ONLY = 0x0a, OP_WRITE_ONLY_IMM = 0x0b,
  OP_READ_REQ = 0x0c, OP_READ_RESP_FIRST = 0x0d, OP_READ_RESP_MIDDLE = 0x0e,
  OP_READ_RESP_LAST = 0x0f, OP_READ_RESP_ONLY = 0x10, OP_ACK = 0x11,
};

struct pcap_out {
  FILE *f;
  uint32_t snaplen;
  uint16_t ip_id;
  uint64_t frames;
  uint8_t *buf;
  size_t cap;
  double ns_per_byte; /* the link's speed */
  uint64_t *busy;     /* per rank: when its link is free (a frame starts no earlier) */
  uint32_t nranks;
  uint64_t limit;     /* the next record's time: no frame later, so time never goes back */
};

static void put_be16(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void put_be24(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 16);
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
  put_be16(p, v >> 16);
  put_be16(p + 2, v);
}

static uint16_t ip_checksum(const uint8_t *h)
{
  uint32_t s = 0;
  for (int i = 0; i < IP_LEN; i += 2)
    s += (uint32_t)h[i] << 8 | h[i + 1];
  while (s >> 16)
    s = (s & 0xffff) + (s >> 16);
  return (uint16_t)~s;
}

/* The RoCEv2 invariant CRC: CRC-32 over 8 bytes of ones (the masked LRH), the IP and UDP headers
 * with their variant fields (TOS, TTL, checksums) set to ones, the BTH with its reserved byte set
 * to ones, then the rest of the transport headers, the payload and the pad. */
static uint32_t icrc(const uint8_t *ip, size_t ib_len)
{
  uint8_t mask[8 + IP_LEN + UDP_LEN + BTH_LEN];
  memset(mask, 0xff, 8);
  memcpy(mask + 8, ip, IP_LEN + UDP_LEN + BTH_LEN);
  uint8_t *m = mask + 8;
  m[1] = 0xff;                     /* TOS */
  m[8] = 0xff;                     /* TTL */
  m[10] = m[11] = 0xff;            /* IP checksum */
  m[IP_LEN + 6] = m[IP_LEN + 7] = 0xff; /* UDP checksum */
  m[IP_LEN + UDP_LEN + 4] = 0xff;  /* BTH reserved byte before DestQP */
  uint32_t c = pp_crc32(0, mask, sizeof(mask));
  const uint8_t *rest = ip + IP_LEN + UDP_LEN + BTH_LEN;
  return pp_crc32(c, rest, ib_len - BTH_LEN);
}

struct frame {
  uint32_t src, dst; /* ranks */
  uint32_t src_qpn, dst_qpn;
  uint8_t opcode;
  uint32_t psn;
  bool ackreq;
  bool reth, aeth, imm;
  uint64_t va;
  uint32_t rkey, dma_len;
  uint8_t syndrome;
  uint32_t msn;
  uint32_t imm_data;
  uint32_t payload;
};

static int write_frame(struct pcap_out *o, uint64_t ts, const struct frame *fr)
{
  uint32_t pad = (4 - fr->payload % 4) % 4;
  size_t ib = BTH_LEN + (fr->reth ? RETH_LEN : 0) + (fr->aeth ? AETH_LEN : 0) +
              (fr->imm ? IMM_LEN : 0) + fr->payload + pad;
  size_t len = ETH_LEN + IP_LEN + UDP_LEN + ib + ICRC_LEN;
  if (len > 65535 + ETH_LEN)
    return -1;
  if (len > o->cap) {
    uint8_t *b = realloc(o->buf, len);
    if (!b)
      return -1;
    o->buf = b;
    o->cap = len;
  }
  uint8_t *p = o->buf;
  memset(p, 0, len);
  /* Ethernet */
  uint8_t *eth = p;
  eth[0] = 0x02;
  eth[4] = (uint8_t)((fr->dst + 1) >> 8);
  eth[5] = (uint8_t)(fr->dst + 1);
  eth[6] = 0x02;
  eth[10] = (uint8_t)((fr->src + 1) >> 8);
  eth[11] = (uint8_t)(fr->src + 1);
  put_be16(eth + 12, 0x0800);
  /* IPv4 */
  uint8_t *ip = p + ETH_LEN;
  ip[0] = 0x45;
  put_be16(ip + 2, (uint32_t)(len - ETH_LEN));
  put_be16(ip + 4, o->ip_id++);
  put_be16(ip + 6, 0x4000); /* don't fragment */
  ip[8] = 64;
  ip[9] = 17;
  ip[12] = 10;
  ip[14] = (uint8_t)((fr->src + 1) >> 8);
  ip[15] = (uint8_t)(fr->src + 1);
  ip[16] = 10;
  ip[18] = (uint8_t)((fr->dst + 1) >> 8);
  ip[19] = (uint8_t)(fr->dst + 1);
  put_be16(ip + 10, ip_checksum(ip));
  /* UDP: the source port spreads QPs like RoCE NICs do; checksum 0 (none) */
  uint8_t *udp = ip + IP_LEN;
  put_be16(udp, 0xc000 | (fr->src_qpn & 0x3fff));
  put_be16(udp + 2, ROCE_PORT);
  put_be16(udp + 4, (uint32_t)(UDP_LEN + ib + ICRC_LEN));
  /* BTH */
  uint8_t *bth = udp + UDP_LEN;
  bth[0] = fr->opcode;
  bth[1] = (uint8_t)(pad << 4); /* SE 0, MigReq 0, PadCnt, TVer 0 */
  put_be16(bth + 2, 0xffff);    /* default P_Key */
  put_be24(bth + 5, fr->dst_qpn);
  bth[8] = fr->ackreq ? 0x80 : 0;
  put_be24(bth + 9, fr->psn & 0xffffff);
  uint8_t *x = bth + BTH_LEN;
  if (fr->reth) {
    put_be32(x, (uint32_t)(fr->va >> 32));
    put_be32(x + 4, (uint32_t)fr->va);
    put_be32(x + 8, fr->rkey);
    put_be32(x + 12, fr->dma_len);
    x += RETH_LEN;
  }
  if (fr->aeth) {
    x[0] = fr->syndrome;
    put_be24(x + 1, fr->msn & 0xffffff);
    x += AETH_LEN;
  }
  if (fr->imm) {
    put_be32(x, fr->imm_data);
    x += IMM_LEN;
  }
  /* payload and pad are zeros; the ICRC is stored little-endian, as NICs put it on the wire */
  pp_put_le32(p + len - ICRC_LEN, icrc(ip, ib));
  if (fr->src < o->nranks) { /* after the rank's previous frame, at line rate */
    if (o->busy[fr->src] > ts)
      ts = o->busy[fr->src] < o->limit ? o->busy[fr->src] : o->limit;
    o->busy[fr->src] = ts + (uint64_t)((double)len * o->ns_per_byte + 0.5);
  }
  uint32_t incl = o->snaplen && len > o->snaplen ? o->snaplen : (uint32_t)len;
  uint8_t rh[16];
  pp_put_le32(rh, (uint32_t)(ts / 1000000000u));
  pp_put_le32(rh + 4, (uint32_t)(ts % 1000000000u));
  pp_put_le32(rh + 8, incl);
  pp_put_le32(rh + 12, (uint32_t)len);
  if (fwrite(rh, 1, 16, o->f) != 16 || fwrite(p, 1, incl, o->f) != incl)
    return -1;
  o->frames++;
  return 0;
}

/* Messages each responder QP has completed (the MSN of its ACKs): keyed by (rank, qpn); `ends`
 * is a ring of the last PSNs of the messages it has seen and not yet acknowledged. */
struct msn_ent {
  uint32_t rank, qpn, msn, next_psn;
  bool used;
  uint32_t *ends;
  uint32_t head, n, cap;
};

static struct msn_ent *msn_of(struct msn_ent *tab, size_t cap, uint32_t rank, uint32_t qpn,
                              size_t *n)
{
  size_t h = ((size_t)rank * 0x9e3779b9u ^ qpn) & (cap - 1);
  while (tab[h].used && (tab[h].rank != rank || tab[h].qpn != qpn))
    h = (h + 1) & (cap - 1);
  if (!tab[h].used) {
    tab[h] = (struct msn_ent){.rank = rank, .qpn = qpn, .used = true};
    ++*n;
  }
  return &tab[h];
}

static bool psn_after(uint32_t a, uint32_t b) /* a > b modulo 2^24 */
{
  return a != b && ((a - b) & 0x800000u) == 0;
}

#define MSN_MAX_PENDING (1u << 20)

/* A message the responder saw, to complete when it acknowledges its last PSN. */
static int msn_push(struct msn_ent *e, uint32_t last_psn)
{
  if (e->n == e->cap) {
    if (e->cap >= MSN_MAX_PENDING)
      return -1;
    uint32_t cap = e->cap ? e->cap * 2 : 16;
    uint32_t *n = malloc(cap * sizeof(*n));
    if (!n)
      return -1;
    for (uint32_t i = 0; i < e->n; i++)
      n[i] = e->ends[(e->head + i) % e->cap];
    free(e->ends);
    e->ends = n;
    e->cap = cap;
    e->head = 0;
  }
  e->ends[(e->head + e->n++) % e->cap] = last_psn;
  return 0;
}

/* The responder acknowledges every PSN through p: the messages ending there are complete. */
static void msn_ack(struct msn_ent *e, uint32_t p)
{
  while (e->n && !psn_after(e->ends[e->head], p & 0xffffff)) {
    e->head = (e->head + 1) % e->cap;
    e->n--;
    e->msn = (e->msn + 1) & 0xffffff;
  }
}

int pp_export_pcap_check(const struct pp_trace *t, char *err, size_t errlen)
{
  enum pp_trace_packets p = pp_trace_packets(t);
  if (p == PP_TRACE_PACKETS_ALL)
    return 0;
  if (p == PP_TRACE_PACKETS_ERRORS)
    snprintf(err, errlen, "the trace has only the RNR NAK and NAK packets (trace.packets %s): "
                          "record it again with `prepost run SCENARIO --trace FILE "
                          "--trace-packets` for a capture", pp_trace_packets_name(p));
  else
    snprintf(err, errlen, "the trace has no packets (a real NIC reports none: only the simulated "
                          "backend records them, with `prepost run --trace FILE --trace-packets`)");
  return -1;
}

/* The most bytes one frame takes: every header, the pad and the ICRC around its payload. */
#define FRAME_OVERHEAD (ETH_LEN + IP_LEN + UDP_LEN + BTH_LEN + RETH_LEN + AETH_LEN + IMM_LEN + 3 + \
                        ICRC_LEN)
#define PCAP_REC_HDR 16u

static uint64_t frame_bytes(uint32_t payload, uint32_t snaplen)
{
  uint64_t b = (uint64_t)payload + FRAME_OVERHEAD;
  return PCAP_REC_HDR + (snaplen && b > snaplen ? snaplen : b);
}

/* One PKT_TX record's frames, checked against its bytes: the model sends a message of len bytes
 * as ceil(len / MTU) packets, MTU 256..4096, so its packet count is no smaller than ceil(len /
 * 4096) and no larger than ceil(len / 256) (a lying count would make the capture as large as it
 * says); at most PP_MAX_MSG_SIZE bytes. */
static int pkt_plan(const struct pp_trace_pkt *k, size_t i, uint32_t snaplen, uint64_t *frames,
                    uint64_t *bytes, char *err, size_t errlen)
{
  uint32_t n = k->npkts ? k->npkts : 1;
  bool data = (k->kind == PP_TPKT_REQ && k->opcode != PP_WR_RDMA_READ) ||
              k->kind == PP_TPKT_READ_RESP;
  uint64_t lo = data ? ((uint64_t)k->len + 4095) / 4096 : 0, hi = ((uint64_t)k->len + 255) / 256;
  if (k->len > PP_MAX_MSG_SIZE || (data && (n < lo || n > (hi ? hi : 1)))) {
    snprintf(err, errlen,
             "record %zu (pkt_tx of rank %u) is inconsistent: %" PRIu32 " bytes in %" PRIu32
             " MTU packets (a message of up to %u bytes spans ceil(bytes / MTU) packets, MTU "
             "256..4096): the trace is corrupt or forged",
             i, k->src_rank, k->len, n, PP_MAX_MSG_SIZE);
    return -1;
  }
  if (k->has_ack && k->kind == PP_TPKT_REQ) {
    *frames += 1;
    *bytes += frame_bytes(0, snaplen);
  }
  if (!data) {
    *frames += 1;
    *bytes += frame_bytes(0, snaplen);
    return 0;
  }
  *frames += n;
  *bytes += (uint64_t)n * frame_bytes(0, snaplen) +
            (snaplen && snaplen <= FRAME_OVERHEAD ? 0 : k->len); /* at most */
  return 0;
}

int pp_export_pcap_plan(const struct pp_trace *t, const struct pp_export_opts *o,
                        uint64_t *frames, uint64_t *bytes, char *err, size_t errlen)
{
  *frames = 0;
  *bytes = 24; /* the file header */
  if (pp_export_pcap_check(t, err, errlen))
    return -1;
  for (size_t i = 0; i < t->nrecs; i++) {
    if (t->idx[i].type != PP_TREC_PKT_TX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK) {
      snprintf(err, errlen, "record %zu cannot be read", i);
      return -1;
    }
    if (pkt_plan(&r.u.pkt, i, o->snaplen, frames, bytes, err, errlen))
      return -1;
  }
  return 0;
}

int pp_export_pcap(const struct pp_trace *t, FILE *out, const struct pp_export_opts *opts,
                   char *err, size_t errlen)
{
  struct pcap_out o = {.f = out, .snaplen = opts->snaplen};
  uint32_t mtu = 4096;
  const struct pp_trace_kv *kv = pp_trace_kv_find(t, "engine.qp.mtu");
  if (kv && kv->type == PP_TKV_U64 && kv->u >= 256 && kv->u <= 4096)
    mtu = (uint32_t)kv->u;
  uint64_t frames, bytes;
  if (pp_export_pcap_plan(t, opts, &frames, &bytes, err, errlen))
    return -1;
  size_t cap = 64;
  while (cap < 4 * (size_t)t->nranks + 64)
    cap *= 2;
  struct msn_ent *msn = calloc(cap, sizeof(*msn));
  size_t nmsn = 0;
  double bps = 100e9;
  kv = pp_trace_kv_find(t, "sim.platform.bandwidth_bps");
  if (kv && kv->type == PP_TKV_F64 && kv->f >= 1e6 && kv->f <= 1e15)
    bps = kv->f;
  else if (kv && kv->type == PP_TKV_U64 && kv->u >= 1000000u && kv->u <= 1000000000000000u)
    bps = (double)kv->u;
  o.ns_per_byte = 8e9 / bps;
  o.nranks = t->nranks;
  o.busy = calloc(t->nranks ? t->nranks : 1, sizeof(*o.busy));
  uint8_t gh[24];
  pp_put_le32(gh, 0xa1b23c4d); /* nanosecond time stamps */
  pp_put_le16(gh + 4, 2);
  pp_put_le16(gh + 6, 4);
  pp_put_le32(gh + 8, 0);
  pp_put_le32(gh + 12, 0);
  pp_put_le32(gh + 16, o.snaplen ? o.snaplen : 65535 + ETH_LEN);
  pp_put_le32(gh + 20, 1); /* LINKTYPE_ETHERNET */
  int rc = msn && o.busy && fwrite(gh, 1, sizeof(gh), out) == sizeof(gh) ? 0 : -1;
  size_t nx = 0; /* the next PKT_TX record after i */
  for (size_t i = 0; rc == 0 && i < t->nrecs; i++) {
    if (t->idx[i].type != PP_TREC_PKT_TX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK) {
      rc = -1;
      break;
    }
    const struct pp_trace_pkt *k = &r.u.pkt;
    while (nx < t->nrecs && (nx <= i || t->idx[nx].type != PP_TREC_PKT_TX))
      nx++;
    o.limit = nx < t->nrecs && t->idx[nx].ts > r.ts ? t->idx[nx].ts : r.ts;
    if (nx >= t->nrecs)
      o.limit = UINT64_MAX;
    if ((nmsn + 2) * 2 >= cap) { /* grow: rehash */
      struct msn_ent *n = calloc(cap * 2, sizeof(*n));
      if (!n) {
        rc = -1;
        break;
      }
      size_t dummy = 0;
      for (size_t j = 0; j < cap; j++)
        if (msn[j].used)
          *msn_of(n, cap * 2, msn[j].rank, msn[j].qpn, &dummy) = msn[j];
      free(msn);
      msn = n;
      cap *= 2;
    }
    struct frame base = {.src = k->src_rank, .dst = k->dst_rank, .src_qpn = k->src_qpn,
                         .dst_qpn = k->dst_qpn};
    /* the responder side of this packet's QP (for MSNs): who sends ACKs on it */
    struct msn_ent *resp = k->kind == PP_TPKT_REQ
                               ? msn_of(msn, cap, k->dst_rank, k->dst_qpn, &nmsn)
                               : msn_of(msn, cap, k->src_rank, k->src_qpn, &nmsn);
    if (k->kind == PP_TPKT_REQ) {
      struct msn_ent *own = msn_of(msn, cap, k->src_rank, k->src_qpn, &nmsn);
      if (k->has_ack) { /* a piggy-backed ACK: a real ACKNOWLEDGE first */
        struct frame a = base;
        a.opcode = OP_ACK;
        a.psn = (k->ack_psn - 1) & 0xffffff;
        a.aeth = true;
        a.syndrome = 0x1f;
        msn_ack(own, k->ack_psn - 1);
        a.msn = own->msn;
        rc = write_frame(&o, r.ts, &a);
      }
      uint32_t n = k->npkts ? k->npkts : 1;
      uint32_t seg = mtu;
      if ((uint64_t)n * seg < k->len || (n > 1 && (uint64_t)(n - 1) * seg >= k->len))
        seg = (k->len + n - 1) / n; /* the model's MTU differs: spread the bytes evenly */
      if (k->opcode == PP_WR_RDMA_READ) {
        struct frame f = base;
        f.opcode = OP_READ_REQ;
        f.psn = k->psn;
        f.ackreq = true;
        f.reth = true;
        f.va = k->remote_addr;
        f.rkey = k->rkey;
        f.dma_len = k->len;
        if (rc == 0)
          rc = write_frame(&o, r.ts, &f);
        n = 1;
      }
      for (uint32_t j = 0; rc == 0 && k->opcode != PP_WR_RDMA_READ && j < n; j++) {
        bool first = j == 0, last = j == n - 1;
        bool write = k->opcode == PP_WR_RDMA_WRITE || k->opcode == PP_WR_RDMA_WRITE_WITH_IMM;
        bool with_imm = k->opcode == PP_WR_RDMA_WRITE_WITH_IMM || k->opcode == PP_WR_SEND_WITH_IMM;
        struct frame f = base;
        f.psn = (k->psn + j) & 0xffffff;
        f.payload = last ? k->len - j * seg : seg;
        f.ackreq = last;
        f.imm = last && with_imm;
        f.imm_data = k->imm;
        f.reth = write && first;
        f.va = k->remote_addr;
        f.rkey = k->rkey;
        f.dma_len = k->len;
        if (write)
          f.opcode = n == 1 ? (with_imm ? OP_WRITE_ONLY_IMM : OP_WRITE_ONLY)
                     : first ? OP_WRITE_FIRST
                     : last  ? (with_imm ? OP_WRITE_LAST_IMM : OP_WRITE_LAST)
                             : OP_WRITE_MIDDLE;
        else
          f.opcode = n == 1 ? (with_imm ? OP_SEND_ONLY_IMM : OP_SEND_ONLY)
                     : first ? OP_SEND_FIRST
                     : last  ? (with_imm ? OP_SEND_LAST_IMM : OP_SEND_LAST)
                             : OP_SEND_MIDDLE;
        rc = write_frame(&o, r.ts, &f);
      }
      /* a new message for the responder (the first time its PSN range is seen): it counts in
       * the MSN once acknowledged */
      uint32_t end = (k->psn + n) & 0xffffff;
      uint32_t npsn = k->opcode == PP_WR_RDMA_READ && k->npkts ? k->npkts : n;
      if (rc == 0 && (!resp->next_psn || psn_after(end, resp->next_psn))) {
        resp->next_psn = end;
        if (msn_push(resp, (k->psn + npsn - 1) & 0xffffff))
          rc = -1;
      }
    } else if (k->kind == PP_TPKT_READ_RESP) {
      uint32_t n = k->npkts ? k->npkts : 1;
      uint32_t seg = mtu;
      if ((uint64_t)n * seg < k->len || (n > 1 && (uint64_t)(n - 1) * seg >= k->len))
        seg = (k->len + n - 1) / n;
      for (uint32_t j = 0; rc == 0 && j < n; j++) {
        bool first = j == 0, last = j == n - 1;
        struct frame f = base;
        f.psn = (k->psn + j) & 0xffffff;
        f.payload = last ? k->len - j * seg : seg;
        f.opcode = n == 1 ? OP_READ_RESP_ONLY
                   : first ? OP_READ_RESP_FIRST
                   : last  ? OP_READ_RESP_LAST
                           : OP_READ_RESP_MIDDLE;
        f.aeth = first || last;
        f.syndrome = 0x1f;
        msn_ack(resp, last ? f.psn : f.psn - 1);
        f.msn = resp->msn;
        rc = write_frame(&o, r.ts, &f);
      }
    } else { /* ACK, RNR NAK, NAK */
      struct frame f = base;
      f.opcode = OP_ACK;
      f.psn = k->psn;
      f.aeth = true;
      msn_ack(resp, k->kind == PP_TPKT_ACK ? k->psn : k->psn - 1);
      f.msn = resp->msn;
      f.syndrome = k->kind == PP_TPKT_ACK       ? 0x1f
                   : k->kind == PP_TPKT_RNR_NAK ? (uint8_t)(0x20 | (k->syndrome & 0x1f))
                                                : (uint8_t)(0x60 | (k->syndrome & 0x1f));
      rc = write_frame(&o, r.ts, &f);
    }
  }
  for (size_t j = 0; msn && j < cap; j++)
    free(msn[j].ends);
  free(msn);
  free(o.busy);
  free(o.buf);
  if (rc)
    snprintf(err, errlen, "writing the capture failed");
  return rc;
}
