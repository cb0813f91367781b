/*
 * Trace writer and per-rank recorder (see trace.h and traces/FORMAT.md). No I/O: finished chunks
 * go to the caller's sink.
 */
#include "prepost/trace.h"
#include "prepost/names.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/trace/trace_codec.h"

/* The hot paths' helpers: inlined into each record's path (a call's register saves and restores
 * cost about as much as encoding a few fields). */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

#define CHUNK_TARGET (256u * 1024u) /* a chunk is written once its records pass this size */
#define REC_MAX 600u                /* the largest record but MEM, with its header */
#define REC_HEAD_MAX 21u            /* type 1 + rank 5 + dt 10 + len 5 */
/* the chunk buffer: a record begun below CHUNK_TARGET always fits without growing */
#define CHUNK_BUF (PP_TRACE_CHUNK_HEADER + CHUNK_TARGET + REC_HEAD_MAX + REC_MAX)

/* ---------------------------------------------------------------- names, CRC */

static const struct {
  unsigned type;
  const char *name;
  enum pp_trace_rec_class cls;
} rec_types[] = {
#define PP_X(id, value, name, cls) {value, name, PP_TCLASS_##cls},
    PP_TRACE_REC_LIST(PP_X)
#undef PP_X
};

const char *pp_trace_rec_name(unsigned type)
{
  for (size_t i = 0; i < sizeof(rec_types) / sizeof(rec_types[0]); i++)
    if (rec_types[i].type == type)
      return rec_types[i].name;
  return "?";
}

static const uint8_t rec_classes[256] = {
#define PP_X(id, value, name, cls) [value] = PP_TCLASS_##cls,
    PP_TRACE_REC_LIST(PP_X)
#undef PP_X
};

enum pp_trace_rec_class pp_trace_rec_class(unsigned type)
{
  return type < 256 ? (enum pp_trace_rec_class)rec_classes[type] : PP_TCLASS_UNKNOWN;
}

static const char *const pkt_kind_names[] = {
#define PP_X(id, value, name) [value] = name,
    PP_TRACE_PKT_LIST(PP_X)
#undef PP_X
};

const char *pp_trace_pkt_kind_name(unsigned kind)
{
  return pp_name_of(pkt_kind_names, PP_TPKT_COUNT, kind);
}

int pp_trace_pkt_kind_from_name(const char *name)
{
  return pp_name_index(pkt_kind_names, PP_TPKT_COUNT, name);
}

static const char *const packets_names[] = {
#define PP_X(id, value, name) [value] = name,
    PP_TRACE_PACKETS_LIST(PP_X)
#undef PP_X
};

const char *pp_trace_packets_name(unsigned packets)
{
  int n = (int)(sizeof(packets_names) / sizeof(packets_names[0]));
  return pp_name_of(packets_names, n, packets);
}

/* CRC-32 (IEEE, for the RoCE ICRC of exports) and CRC-32C (Castagnoli, for chunks: the SSE4.2
 * crc32 instruction computes it at several bytes per cycle). Software: slicing-by-8. */
static uint32_t crc_ieee[8][256], crc_castagnoli[8][256];

static void crc_tables(uint32_t t[8][256], uint32_t poly)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? poly ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int k = 1; k < 8; k++)
      t[k][i] = t[0][t[k - 1][i] & 0xff] ^ (t[k - 1][i] >> 8);
}

static uint32_t crc_sw(uint32_t t[8][256], uint32_t crc, const uint8_t *p, size_t len)
{
  crc = ~crc;
  while (len >= 8) {
    uint32_t lo = crc ^ pp_get_le32(p), hi = pp_get_le32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len--)
    crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t pp_crc32(uint32_t crc, const void *buf, size_t len)
{
  if (!crc_ieee[0][1])
    crc_tables(crc_ieee, 0xedb88320u);
  return crc_sw(crc_ieee, crc, buf, len);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
                                                             size_t len)
{
  uint64_t c = ~crc;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = (uint32_t)c;
  while (len--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}
#define HAVE_CRC32C_HW 1
#endif

uint32_t pp_crc32c(uint32_t crc, const void *buf, size_t len)
{
#ifdef HAVE_CRC32C_HW
  static int hw = -1;
  if (hw < 0)
    hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
  if (hw)
    return crc32c_hw(crc, buf, len);
#endif
  if (!crc_castagnoli[0][1])
    crc_tables(crc_castagnoli, 0x82f63b78u);
  return crc_sw(crc_castagnoli, crc, buf, len);
}

/* ---------------------------------------------------------------- writer */

static inline bool has_ts(unsigned type)
{
  return type < 0x20 || type > 0x3f; /* every type but the outputs carries a time stamp */
}

/* The payloads of the busiest records, shared by the direct path (encoded at once) and the
 * deferred one (their structs copied raw, encoded by pp_trace_seal()). */
HOT uint8_t *put_sge_list(uint8_t *p, uint32_t n, const struct pp_sge *sg)
{
  for (uint32_t i = 0; i < n; i++) {
    p = pp_put_uv(p, sg[i].addr);
    p = pp_put_uv(p, sg[i].length);
    p = pp_put_uv(p, sg[i].lkey);
  }
  return p;
}

static inline uint32_t sge_count(uint32_t num)
{
  return num <= PP_MAX_SGE ? num : PP_MAX_SGE;
}

/* The fields that are nearly always small go in groups (pp_put_uv2/3/4: one test per group);
 * the bytes are those of one varint per field, as FORMAT.md specifies. */
HOT uint8_t *enc_wc(uint8_t *p, const struct pp_wc *wc)
{
  p = pp_put_uv(p, pp_rotl8(wc->wr_id));
  p = pp_put_uv(p, (unsigned)wc->status);
  p = pp_put_uv(p, (unsigned)wc->opcode); /* RECV is 128: two bytes */
  p = pp_put_uv3(p, wc->vendor_err, wc->byte_len, wc->imm_data);
  p = pp_put_uv(p, wc->qp_num);
  return pp_put_uv2(p, wc->src_qp, wc->wc_flags);
}

HOT uint8_t *enc_send(uint8_t *p, uint32_t qp_num, const struct pp_send_wr *wr, int r)
{
  uint32_t n = sge_count(wr->num_sge);
  p = pp_put_uv(p, qp_num);
  p = pp_put_uv(p, pp_rotl8(wr->wr_id));
  p = pp_put_uv(p, (unsigned)wr->opcode);
  p = pp_put_uv(p, wr->send_flags);
  p = pp_put_uv(p, n);
  p = put_sge_list(p, n, wr->sg_list);
  return pp_put_uv4(p, wr->remote_addr, wr->rkey, wr->imm_data, pp_zigzag(r));
}

HOT uint8_t *enc_recv(uint8_t *p, uint32_t q, const struct pp_recv_wr *wr, int r)
{
  uint32_t n = sge_count(wr->num_sge);
  p = pp_put_uv(p, q);
  p = pp_put_uv(p, pp_rotl8(wr->wr_id));
  p = pp_put_uv(p, n);
  p = put_sge_list(p, n, wr->sg_list);
  return pp_put_sv(p, r);
}

HOT uint8_t *enc_pkt(uint8_t *p, uint64_t id, const struct pp_trace_pkt *k)
{
  p = pp_put_uv(p, id);
  p = pp_put_uv3(p, k->kind, k->opcode, k->dst_rank);
  p = pp_put_uv(p, k->src_qpn);
  p = pp_put_uv(p, k->dst_qpn);
  p = pp_put_uv(p, k->psn);
  p = pp_put_uv4(p, k->npkts, k->len, k->syndrome, k->has_ack);
  p = pp_put_uv4(p, k->ack_psn, k->remote_addr, k->rkey, k->imm);
  return pp_put_uv(p, k->wire_bytes);
}

/* Raw record kinds (byte 1 of a raw head): fields as words and a blob, or one of the structs. */
enum { RAW_WORDS, RAW_WC, RAW_SEND, RAW_RECV, RAW_PKT };
struct raw_op { /* before a send or receive WR */
  uint32_t q;
  int32_t r;
};

struct pkt_slot {
  const void *key;
  uint64_t id;
};

struct pp_trace_writer {
  pp_trace_sink sink;
  pp_trace_swap_sink swap; /* optional: REC chunks change hands instead of being copied */
  bool deferred;           /* with swap: chunks hold raw records, encoded by pp_trace_seal() */
  uint64_t *seal_last_ts;  /* pp_trace_seal()'s own (it runs on the sink's thread) */
  uint8_t *seal_buf;
  size_t seal_cap;
  void *ctx;
  enum pp_status err;
  bool begun, finished;
  uint8_t *hdr; /* HDR chunk (header included) */
  size_t hdr_len, hdr_cap;
  uint32_t nkv;
  uint8_t *buf; /* REC chunk being filled; its 16-byte header is written at flush */
  size_t len, cap;
  uint32_t chunk_recs;
  uint64_t nrecs, nchunks, bytes;
  uint32_t nranks;
  uint32_t open_ranks; /* nranks while records may be written (begun, not finished, no error) */
  uint64_t *last_ts;
  uint64_t origin; /* time stamps are written relative to it */
  uint32_t capture_bytes, snapshot_max;
  enum pp_trace_packets packets;
  struct pkt_slot *pk; /* packets in flight: open addressing, key NULL = empty */
  size_t pk_cap, pk_n;
  uint64_t next_pkt;
};

static void fail(struct pp_trace_writer *w, enum pp_status s)
{
  if (w->err == PP_OK)
    w->err = s;
  w->open_ranks = 0;
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
  if (need <= *cap)
    return 0;
  size_t n = *cap ? *cap : 256;
  while (n < need)
    n *= 2;
  uint8_t *b = realloc(*buf, n);
  if (!b)
    return -1;
  *buf = b;
  *cap = n;
  return 0;
}

static void sink_out(struct pp_trace_writer *w, const void *buf, size_t len)
{
  if (w->err != PP_OK)
    return;
  if (w->sink(w->ctx, buf, len) != 0)
    fail(w, PP_IO);
  else
    w->bytes += len;
}

static void chunk_header(uint8_t *h, uint32_t type, uint32_t len, uint32_t count, uint32_t crc)
{
  pp_put_le32(h, type);
  pp_put_le32(h + 4, len);
  pp_put_le32(h + 8, count);
  pp_put_le32(h + 12, crc);
}

enum pp_status pp_trace_writer_create(pp_trace_sink sink, void *ctx,
                                      const struct pp_trace_info *info,
                                      struct pp_trace_writer **out)
{
  *out = NULL;
  if (!sink || !info || info->nranks == 0 || info->nranks > PP_MAX_RANKS)
    return PP_INVALID;
  struct pp_trace_writer *w = calloc(1, sizeof(*w));
  if (!w)
    return PP_NOMEM;
  w->sink = sink;
  w->ctx = ctx;
  w->nranks = info->nranks;
  w->capture_bytes = info->capture_bytes;
  w->snapshot_max = info->snapshot_max;
  w->packets = info->packets <= PP_TRACE_PACKETS_ALL ? (enum pp_trace_packets)info->packets
                                                     : PP_TRACE_PACKETS_ALL;
  w->last_ts = calloc(info->nranks, sizeof(*w->last_ts));
  w->cap = CHUNK_BUF;
  w->buf = malloc(w->cap);
  if (!w->last_ts || !w->buf || grow(&w->hdr, &w->hdr_cap, 1024)) {
    pp_trace_writer_destroy(w);
    return PP_NOMEM;
  }
  w->len = PP_TRACE_CHUNK_HEADER;
  w->hdr_len = PP_TRACE_CHUNK_HEADER;
  uint8_t fh[PP_TRACE_FILE_HEADER];
  memcpy(fh, PP_TRACE_MAGIC, 8);
  pp_put_le16(fh + 8, PP_TRACE_MAJOR);
  pp_put_le16(fh + 10, PP_TRACE_MINOR);
  pp_put_le32(fh + 12, 0);
  sink_out(w, fh, sizeof(fh));
  pp_trace_kv_str(w, "prepost.version", info->version ? info->version : "?");
  if (info->commit)
    pp_trace_kv_str(w, "prepost.commit", info->commit);
  pp_trace_kv_str(w, "trace.backend", info->backend ? info->backend : "?");
  pp_trace_kv_str(w, "scenario.name", info->scenario ? info->scenario : "");
  pp_trace_kv_u64(w, "seed", info->seed);
  pp_trace_kv_u64(w, "nranks", info->nranks);
  pp_trace_kv_u64(w, "trace.capture_bytes", info->capture_bytes);
  pp_trace_kv_u64(w, "trace.snapshot_max", info->snapshot_max);
  pp_trace_kv_u64(w, "trace.packets", w->packets);
  *out = w;
  return w->err;
}

enum pp_trace_packets pp_trace_writer_packets(const struct pp_trace_writer *w)
{
  return w->packets;
}

static uint8_t *kv_begin(struct pp_trace_writer *w, const char *key, unsigned type, size_t extra)
{
  if (w->begun || w->err != PP_OK)
    return NULL;
  size_t kl = strlen(key);
  if (grow(&w->hdr, &w->hdr_cap, w->hdr_len + kl + extra + 32)) {
    fail(w, PP_NOMEM);
    return NULL;
  }
  uint8_t *p = pp_put_uv(w->hdr + w->hdr_len, kl);
  memcpy(p, key, kl);
  p += kl;
  *p++ = (uint8_t)type;
  w->nkv++;
  return p;
}

enum pp_status pp_trace_kv_u64(struct pp_trace_writer *w, const char *key, uint64_t v)
{
  uint8_t *p = kv_begin(w, key, PP_TKV_U64, 10);
  if (p)
    w->hdr_len = (size_t)(pp_put_uv(p, v) - w->hdr);
  return w->begun ? PP_STATE : w->err;
}

enum pp_status pp_trace_kv_f64(struct pp_trace_writer *w, const char *key, double v)
{
  uint8_t *p = kv_begin(w, key, PP_TKV_F64, 8);
  if (p) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    pp_put_le64(p, bits);
    w->hdr_len = (size_t)(p + 8 - w->hdr);
  }
  return w->begun ? PP_STATE : w->err;
}

enum pp_status pp_trace_kv_str(struct pp_trace_writer *w, const char *key, const char *v)
{
  size_t n = strlen(v);
  uint8_t *p = kv_begin(w, key, PP_TKV_STR, n + 10);
  if (p) {
    p = pp_put_uv(p, n);
    memcpy(p, v, n);
    w->hdr_len = (size_t)(p + n - w->hdr);
  }
  return w->begun ? PP_STATE : w->err;
}

enum pp_status pp_trace_kv_bytes(struct pp_trace_writer *w, const char *key, const void *v,
                                 size_t n)
{
  uint8_t *p = kv_begin(w, key, PP_TKV_BYTES, n + 10);
  if (p) {
    p = pp_put_uv(p, n);
    memcpy(p, v, n);
    w->hdr_len = (size_t)(p + n - w->hdr);
  }
  return w->begun ? PP_STATE : w->err;
}

enum pp_status pp_trace_set_origin(struct pp_trace_writer *w, uint64_t origin_ns)
{
  enum pp_status s = pp_trace_kv_u64(w, "trace.origin_ns", origin_ns);
  if (s == PP_OK)
    w->origin = origin_ns;
  return s;
}

enum pp_status pp_trace_begin(struct pp_trace_writer *w)
{
  if (w->begun) {
    fail(w, PP_STATE);
    return w->err;
  }
  w->begun = true;
  w->open_ranks = w->err == PP_OK ? w->nranks : 0;
  size_t n = w->hdr_len - PP_TRACE_CHUNK_HEADER;
  chunk_header(w->hdr, PP_TRACE_CHUNK_HDR, (uint32_t)n, w->nkv,
               pp_crc32c(0, w->hdr + PP_TRACE_CHUNK_HEADER, n));
  sink_out(w, w->hdr, w->hdr_len);
  return w->err;
}

enum pp_status pp_trace_writer_set_swap(struct pp_trace_writer *w, pp_trace_swap_sink swap,
                                        bool deferred)
{
  if (w->nrecs || w->chunk_recs || w->len != PP_TRACE_CHUNK_HEADER) {
    fail(w, PP_STATE);
    return PP_STATE;
  }
  if (deferred && !w->seal_last_ts && !(w->seal_last_ts = calloc(w->nranks, sizeof(uint64_t)))) {
    fail(w, PP_NOMEM);
    return PP_NOMEM;
  }
  w->swap = swap;
  w->deferred = swap && deferred;
  return PP_OK;
}

/*
 * Deferred encoding: on the recording thread a record is a raw head (RAW_HEAD bytes: type, number
 * of 64-bit words, rank, time stamp from the origin, blob length), its fields as 64-bit words
 * (signed ones zigzagged, as in the file) and a blob of bytes already in the file's encoding (the
 * payload of records written by emit()). pp_trace_seal() turns a chunk of them into the file's
 * records: the same bytes the direct path writes.
 */
#define RAW_HEAD 24u

static inline uint8_t *put_word(uint8_t *p, uint64_t v)
{
  memcpy(p, &v, 8);
  return p + 8;
}

static inline uint64_t get_word(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static int seal_room(struct pp_trace_writer *w, size_t need)
{
  return grow(&w->seal_buf, &w->seal_cap, need + 16);
}

/* Encodes the raw records of chunk (len bytes with its header) into w->seal_buf; its length, or
 * 0 when out of memory. */
static size_t seal_raw(struct pp_trace_writer *w, const uint8_t *chunk, size_t len)
{
  uint32_t count = pp_get_le32(chunk + 8);
  const uint8_t *r = chunk + PP_TRACE_CHUNK_HEADER, *end = chunk + len;
  size_t o = PP_TRACE_CHUNK_HEADER;
  if (seal_room(w, len + len / 4 + 64))
    return 0;
  for (uint32_t i = 0; i < count; i++) {
    if (end - r < (ptrdiff_t)RAW_HEAD)
      return 0; /* cannot happen: the recorder wrote `count` records */
    unsigned type = r[0], kind = r[1], nwords = pp_get_le16(r + 2);
    uint32_t rank = pp_get_le32(r + 4), blob = pp_get_le32(r + 16);
    uint64_t ts = get_word(r + 8);
    const uint8_t *words = r + RAW_HEAD, *b = words + 8u * nwords;
    uint8_t pl[REC_MAX + 16], *q = pl; /* the fields, encoded */
    assert(nwords * 10u <= REC_MAX);
    for (unsigned k = 0; k < nwords; k++)
      q = pp_put_uv(q, get_word(words + 8u * k));
    if (kind != RAW_WORDS) { /* a struct: encoded here, no blob follows */
      struct raw_op op;
      memcpy(&op, b, sizeof(op));
      if (kind == RAW_WC) {
        struct pp_wc wc;
        memcpy(&wc, b, sizeof(wc));
        q = enc_wc(q, &wc);
      } else if (kind == RAW_SEND) {
        struct pp_send_wr wr;
        memcpy(&wr, b + sizeof(op), sizeof(wr));
        q = enc_send(q, op.q, &wr, op.r);
      } else if (kind == RAW_RECV) {
        struct pp_recv_wr wr;
        memcpy(&wr, b + sizeof(op), sizeof(wr));
        q = enc_recv(q, op.q, &wr, op.r);
      } else {
        struct pp_trace_pkt k;
        uint64_t id = get_word(b);
        memcpy(&k, b + 8, sizeof(k));
        q = enc_pkt(q, id, &k);
      }
      b += blob;
      blob = 0;
    }
    size_t n = (size_t)(q - pl) + blob;
    if (seal_room(w, o + REC_HEAD_MAX + n))
      return 0;
    uint8_t *p = w->seal_buf + o;
    *p++ = (uint8_t)type;
    p = pp_put_uv(p, rank);
    if (has_ts(type)) {
      p = pp_put_sv(p, (int64_t)(ts - w->seal_last_ts[rank]));
      w->seal_last_ts[rank] = ts;
    }
    p = pp_put_uv(p, n);
    memcpy(p, pl, (size_t)(q - pl));
    p += q - pl;
    memcpy(p, b, blob);
    o = (size_t)(p + blob - w->seal_buf);
    r = b + blob;
  }
  chunk_header(w->seal_buf, PP_TRACE_CHUNK_REC, (uint32_t)(o - PP_TRACE_CHUNK_HEADER), count, 0);
  return o;
}

const uint8_t *pp_trace_seal(struct pp_trace_writer *w, uint8_t *chunk, size_t *len)
{
  uint8_t *c = chunk;
  if (w->deferred) {
    if (!(*len = seal_raw(w, chunk, *len)))
      return NULL;
    c = w->seal_buf;
  }
  uint32_t n = pp_get_le32(c + 4);
  pp_put_le32(c + 12, pp_crc32c(0, c + PP_TRACE_CHUNK_HEADER, n));
  return c;
}

/* A swap sink takes the chunk unsealed (the CRC is computed where it is written out). */
static void swap_out(struct pp_trace_writer *w)
{
  if (w->err != PP_OK)
    return;
  size_t len = w->len, cap = w->cap;
  if (w->swap(w->ctx, &w->buf, len, &cap) != 0) {
    fail(w, PP_IO);
    return;
  }
  assert(w->buf && cap >= CHUNK_BUF);
  w->cap = cap;
  w->bytes += len;
}

enum pp_status pp_trace_flush(struct pp_trace_writer *w)
{
  if (!w->begun || w->finished) {
    fail(w, PP_STATE);
    return w->err;
  }
  if (w->chunk_recs == 0)
    return w->err;
  size_t n = w->len - PP_TRACE_CHUNK_HEADER;
  if (w->swap) {
    chunk_header(w->buf, PP_TRACE_CHUNK_REC, (uint32_t)n, w->chunk_recs, 0);
    swap_out(w);
  } else {
    chunk_header(w->buf, PP_TRACE_CHUNK_REC, (uint32_t)n, w->chunk_recs,
                 pp_crc32c(0, w->buf + PP_TRACE_CHUNK_HEADER, n));
    sink_out(w, w->buf, w->len);
  }
  w->nchunks++;
  w->nrecs += w->chunk_recs;
  w->len = PP_TRACE_CHUNK_HEADER;
  w->chunk_recs = 0;
  return w->err;
}

enum pp_status pp_trace_finish(struct pp_trace_writer *w)
{
  if (w->finished || pp_trace_flush(w) != PP_OK)
    return w->err ? w->err : PP_STATE;
  w->finished = true;
  w->open_ranks = 0;
  uint8_t c[PP_TRACE_CHUNK_HEADER + 30], *p = c + PP_TRACE_CHUNK_HEADER;
  p = pp_put_uv(p, w->nrecs);
  p = pp_put_uv(p, w->nchunks);
  size_t n = (size_t)(p - c) - PP_TRACE_CHUNK_HEADER;
  chunk_header(c, PP_TRACE_CHUNK_END, (uint32_t)n, 0, pp_crc32c(0, c + PP_TRACE_CHUNK_HEADER, n));
  sink_out(w, c, (size_t)(p - c));
  return w->err;
}

enum pp_status pp_trace_writer_status(const struct pp_trace_writer *w)
{
  return w->err;
}

uint64_t pp_trace_writer_records(const struct pp_trace_writer *w)
{
  return w->nrecs + w->chunk_recs;
}

uint64_t pp_trace_writer_bytes(const struct pp_trace_writer *w)
{
  return w->bytes;
}

void pp_trace_writer_destroy(struct pp_trace_writer *w)
{
  if (!w)
    return;
  free(w->hdr);
  free(w->buf);
  free(w->last_ts);
  free(w->pk);
  free(w->seal_last_ts);
  free(w->seal_buf);
  free(w);
}

/*
 * The records of the hot paths are encoded in place: rec_begin() writes the record's head into the
 * chunk and returns where its payload (at most REC_MAX bytes) goes, with one byte kept for the
 * payload's length; rec_end() writes the length (moving the payload in the rare case it takes two
 * bytes). NULL from rec_begin: the writer has failed, record nothing.
 */

static uint8_t *rec_refused(struct pp_trace_writer *w)
{
  if (w->err == PP_OK)
    fail(w, PP_STATE); /* not begun, finished, or a rank beyond nranks */
  return NULL;
}

/* The direct path (the default): no test of the deferred mode here, the callers take the deferred
 * path first (raw_*(), out of line). */
HOT uint8_t *rec_begin(struct pp_trace_writer *w, unsigned type, uint32_t rank, uint64_t ts)
{
  if (rank >= w->open_ranks)
    return rec_refused(w);
  /* the buffer always has room for one more record (CHUNK_BUF; a MEM record grows it) */
  assert(w->cap - w->len >= REC_HEAD_MAX + REC_MAX);
  assert(!w->deferred);
  uint8_t *p = w->buf + w->len;
  *p++ = (uint8_t)type;
  p = pp_put_uv(p, rank);
  if (has_ts(type)) {
    ts = ts > w->origin ? ts - w->origin : 0;
    p = pp_put_sv(p, (int64_t)(ts - w->last_ts[rank]));
    w->last_ts[rank] = ts;
  }
  return p + 1;
}

HOT void rec_count(struct pp_trace_writer *w, uint8_t *end)
{
  w->len = (size_t)(end - w->buf);
  w->chunk_recs++; /* nrecs counts the flushed chunks' records */
  if (w->len - PP_TRACE_CHUNK_HEADER >= CHUNK_TARGET)
    pp_trace_flush(w);
}

HOT void rec_end(struct pp_trace_writer *w, uint8_t *pl, uint8_t *end)
{
  size_t n = (size_t)(end - pl);
  assert(n <= REC_MAX);
  if (n < 0x80) {
    pl[-1] = (uint8_t)n;
  } else { /* REC_MAX < 2^14: two bytes */
    memmove(pl + 1, pl, n);
    pl[-1] = (uint8_t)(n | 0x80);
    pl[0] = (uint8_t)(n >> 7);
    end++;
  }
  rec_count(w, end);
}

/* Deferred encoding: the raw head (RAW_HEAD bytes), then words, a struct or a blob. */
HOT uint8_t *raw_begin(struct pp_trace_writer *w, unsigned type, uint32_t rank, uint64_t ts)
{
  if (rank >= w->open_ranks)
    return rec_refused(w);
  assert(w->cap - w->len >= RAW_HEAD + REC_MAX);
  uint8_t *p = w->buf + w->len;
  p[0] = (uint8_t)type;
  p[1] = RAW_WORDS;
  pp_put_le16(p + 2, 0);
  pp_put_le32(p + 4, rank);
  uint64_t t = has_ts(type) && ts > w->origin ? ts - w->origin : 0;
  memcpy(p + 8, &t, 8);
  pp_put_le32(p + 16, 0);
  return p + RAW_HEAD;
}

/* A record of n fields, as words. */
static void raw_words(struct pp_trace_writer *w, unsigned type, uint32_t rank, uint64_t ts,
                      const uint64_t *v, unsigned n)
{
  uint8_t *pl = raw_begin(w, type, rank, ts);
  if (!pl)
    return;
  for (unsigned i = 0; i < n; i++)
    pl = put_word(pl, v[i]);
  pp_put_le16(pl - 8u * n - RAW_HEAD + 2, (uint16_t)n);
  rec_count(w, pl);
}

/* A record that is a struct (a, then b), copied as it is. */
HOT void raw_struct(struct pp_trace_writer *w, unsigned type, uint32_t rank, uint64_t ts,
                       unsigned kind, const void *a, size_t na, const void *b, size_t nb)
{
  uint8_t *pl = raw_begin(w, type, rank, ts);
  if (!pl)
    return;
  pl[1 - (ptrdiff_t)RAW_HEAD] = (uint8_t)kind;
  pp_put_le32(pl - RAW_HEAD + 16, (uint32_t)(na + nb));
  memcpy(pl, a, na);
  if (nb)
    memcpy(pl + na, b, nb);
  rec_count(w, pl + na + nb);
}

/*
 * Appends one record: the payload [pl, pl + n) was encoded by the caller. Inputs and notes carry
 * the time (a zigzag delta from the rank's previous time stamp); outputs do not.
 */
static void emit(struct pp_trace_writer *w, unsigned type, uint32_t rank, uint64_t ts,
                 const uint8_t *pl, size_t n)
{
  if (w->err != PP_OK)
    return;
  if (!w->begun || w->finished || rank >= w->nranks) {
    fail(w, PP_STATE);
    return;
  }
  if (grow(&w->buf, &w->cap, w->len + RAW_HEAD + REC_HEAD_MAX + n + REC_MAX)) {
    fail(w, PP_NOMEM);
    return;
  }
  uint8_t *p = w->buf + w->len;
  if (w->deferred) { /* the payload is already encoded: a blob */
    uint8_t *q = raw_begin(w, type, rank, ts);
    if (!q)
      return;
    pp_put_le32(q - RAW_HEAD + 16, (uint32_t)n);
    p = q;
  } else {
    *p++ = (uint8_t)type;
    p = pp_put_uv(p, rank);
    if (has_ts(type)) {
      ts = ts > w->origin ? ts - w->origin : 0;
      p = pp_put_sv(p, (int64_t)(ts - w->last_ts[rank]));
      w->last_ts[rank] = ts;
    }
    p = pp_put_uv(p, n);
  }
  if (n)
    memcpy(p, pl, n);
  rec_count(w, p + n);
}

/* ---------------------------------------------------------------- merging */

/* Appends one record's bytes as they are (its time delta already counts from the rank's previous
 * time stamp, which the merge keeps in place). */
static void emit_raw(struct pp_trace_writer *w, uint32_t rank, unsigned type, uint64_t ts,
                     const uint8_t *rec, size_t n)
{
  if (w->err != PP_OK)
    return;
  if (grow(&w->buf, &w->cap, w->len + n)) {
    fail(w, PP_NOMEM);
    return;
  }
  memcpy(w->buf + w->len, rec, n);
  w->len += n;
  if (has_ts(type))
    w->last_ts[rank] = ts;
  w->chunk_recs++;
  if (w->len - PP_TRACE_CHUNK_HEADER >= CHUNK_TARGET)
    pp_trace_flush(w);
}

/* Which part holds each rank; -1 with err when the parts do not fit w. */
static int merge_owners(const struct pp_trace_writer *w, const struct pp_trace *const *parts,
                        size_t nparts, int32_t *owner, char *err, size_t errlen)
{
  for (uint32_t r = 0; r < w->nranks; r++)
    owner[r] = -1;
  for (size_t k = 0; k < nparts; k++) {
    const struct pp_trace *t = parts[k];
    for (uint32_t r = 0; r < t->nranks; r++) {
      if (!t->rank_nrecs[r])
        continue;
      if (r >= w->nranks) {
        snprintf(err, errlen, "part %zu has records of rank %u, the merged trace has %u ranks", k,
                 r, w->nranks);
        return -1;
      }
      if (owner[r] >= 0) {
        snprintf(err, errlen, "parts %d and %zu both have records of rank %u", owner[r], k, r);
        return -1;
      }
      owner[r] = (int32_t)k;
    }
  }
  return 0;
}

enum pp_status pp_trace_merge(struct pp_trace_writer *w, const struct pp_trace *const *parts,
                              size_t nparts, char *err, size_t errlen)
{
  if (!w->begun || w->finished || w->deferred) {
    snprintf(err, errlen, "the merged trace is not open for records (or encodes them later)");
    return PP_INVALID;
  }
  int32_t *owner = malloc(w->nranks * sizeof(*owner));
  size_t *next = calloc(w->nranks, sizeof(*next));
  if (!owner || !next) {
    free(owner);
    free(next);
    snprintf(err, errlen, "out of memory");
    return PP_NOMEM;
  }
  enum pp_status s = PP_OK;
  if (merge_owners(w, parts, nparts, owner, err, errlen))
    s = PP_INVALID;
  for (uint32_t last = UINT32_MAX; s == PP_OK;) {
    /* the rank whose next record is the earliest; the last one copied wins ties */
    uint32_t best = UINT32_MAX;
    uint64_t best_ts = 0;
    for (uint32_t r = 0; r < w->nranks; r++) {
      if (owner[r] < 0)
        continue;
      const struct pp_trace *t = parts[owner[r]];
      if (next[r] == t->rank_nrecs[r])
        continue;
      uint64_t ts = t->idx[t->rank_recs[r][next[r]]].ts;
      if (best == UINT32_MAX || ts < best_ts || (ts == best_ts && r == last)) {
        best = r;
        best_ts = ts;
      }
    }
    if (best == UINT32_MAX)
      break;
    const struct pp_trace *t = parts[owner[best]];
    size_t i = t->rank_recs[best][next[best]++];
    const uint8_t *rec;
    size_t n;
    if ((s = pp_trace_rec_bytes(t, i, &rec, &n)) != PP_OK) {
      snprintf(err, errlen, "part %d: record %zu cannot be read", owner[best], i);
      break;
    }
    emit_raw(w, best, t->idx[i].type, best_ts, rec, n);
    if ((s = w->err) != PP_OK)
      snprintf(err, errlen, "writing the merged trace: %s", pp_status_desc(s));
    last = best;
  }
  free(owner);
  free(next);
  return s;
}

/* ---------------------------------------------------------------- packets */

static size_t pk_hash(const void *key, size_t cap)
{
  uint64_t x = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 32) & (cap - 1);
}

static int pk_grow(struct pp_trace_writer *w)
{
  size_t cap = w->pk_cap ? w->pk_cap * 2 : 256;
  struct pkt_slot *n = calloc(cap, sizeof(*n));
  if (!n)
    return -1;
  for (size_t i = 0; i < w->pk_cap; i++) {
    if (!w->pk[i].key)
      continue;
    size_t h = pk_hash(w->pk[i].key, cap);
    while (n[h].key)
      h = (h + 1) & (cap - 1);
    n[h] = w->pk[i];
  }
  free(w->pk);
  w->pk = n;
  w->pk_cap = cap;
  return 0;
}

/* Removes slot i keeping every probe chain intact (backward-shift deletion). */
static void pk_remove(struct pp_trace_writer *w, size_t i)
{
  size_t mask = w->pk_cap - 1, j = i;
  w->pk[i].key = NULL;
  for (;;) {
    j = (j + 1) & mask;
    if (!w->pk[j].key)
      break;
    size_t h = pk_hash(w->pk[j].key, w->pk_cap);
    /* can the entry at j move to the hole at i? (its home h is not in (i, j]) */
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      w->pk[i] = w->pk[j];
      w->pk[j].key = NULL;
      i = j;
    }
  }
  w->pk_n--;
}

/* One PKT_TX record with this id. */
HOT void pkt_tx_rec(struct pp_trace_writer *w, uint64_t now, uint64_t id,
                       const struct pp_trace_pkt *k)
{
  if (w->deferred) {
    raw_struct(w, PP_TREC_PKT_TX, k->src_rank, now, RAW_PKT, &id, 8, k, sizeof(*k));
    return;
  }
  uint8_t *pl = rec_begin(w, PP_TREC_PKT_TX, k->src_rank, now);
  if (pl)
    rec_end(w, pl, enc_pkt(pl, id, k));
}

HOT void pkt_rx_rec(struct pp_trace_writer *w, uint64_t now, uint32_t rank, uint64_t id)
{
  if (w->deferred) {
    raw_words(w, PP_TREC_PKT_RX, rank, now, &id, 1);
    return;
  }
  uint8_t *pl = rec_begin(w, PP_TREC_PKT_RX, rank, now);
  if (pl)
    rec_end(w, pl, pp_put_uv(pl, id));
}

void pp_trace_pkt_tx(struct pp_trace_writer *w, uint64_t now, const void *key,
                     const struct pp_trace_pkt *k)
{
  if (!w || w->err != PP_OK)
    return;
  if ((w->pk_n + 1) * 2 > w->pk_cap && pk_grow(w)) {
    fail(w, PP_NOMEM);
    return;
  }
  uint64_t id = w->next_pkt++;
  size_t h = pk_hash(key, w->pk_cap);
  while (w->pk[h].key && w->pk[h].key != key)
    h = (h + 1) & (w->pk_cap - 1);
  if (!w->pk[h].key)
    w->pk_n++;
  w->pk[h] = (struct pkt_slot){key, id};
  pkt_tx_rec(w, now, id, k);
}

void pp_trace_pkt_rx(struct pp_trace_writer *w, uint64_t now, uint32_t rank, const void *key)
{
  if (!w || w->err != PP_OK || !w->pk_cap)
    return;
  size_t h = pk_hash(key, w->pk_cap);
  while (w->pk[h].key && w->pk[h].key != key)
    h = (h + 1) & (w->pk_cap - 1);
  if (!w->pk[h].key)
    return; /* not seen leaving: nothing to name */
  uint64_t id = w->pk[h].id;
  pk_remove(w, h);
  pkt_rx_rec(w, now, rank, id);
}

uint64_t pp_trace_pkt_tx_id(struct pp_trace_writer *w, uint64_t now, const struct pp_trace_pkt *k)
{
  if (!w || w->err != PP_OK)
    return 0;
  uint64_t id = w->next_pkt++;
  pkt_tx_rec(w, now, id, k);
  return id;
}

void pp_trace_pkt_rx_id(struct pp_trace_writer *w, uint64_t now, uint32_t rank, uint64_t id)
{
  if (w && w->err == PP_OK)
    pkt_rx_rec(w, now, rank, id);
}

/* ---------------------------------------------------------------- rank recorder */

struct tr_mr {
  uint64_t addr, len;
  uint32_t lkey, rkey;
  unsigned access;
  uint8_t *shadow; /* remote-writable and small: the bytes as of the last input */
};

struct tr_qp {
  uint32_t qpn, srq;
};

struct tr_recv { /* a posted receive whose head is captured when it completes */
  uint64_t wr_id;
  uint32_t queue; /* qp_num, or srq_num | 1u << 31 */
  uint32_t lkey, len;
  uint64_t addr;
  uint8_t used;
};

struct pp_trace_rank {
  struct pp_trace_writer *w;
  uint32_t rank;
  const struct pp_nic_ops *ops;
  void *nic;
  uint64_t now;
  struct tr_mr *mrs;
  size_t nmr, mr_cap;
  size_t nshadow; /* MRs with a shadow: none, and an input costs no snapshot loop */
  struct tr_qp *qps;
  size_t nqp, qp_cap;
  struct tr_recv *rv; /* open addressing on (queue, wr_id) */
  size_t rv_cap, rv_n;
};

#define SRQ_BIT (1u << 31)

struct pp_trace_rank *pp_trace_rank_create(struct pp_trace_writer *w, uint32_t rank)
{
  if (!w || rank >= w->nranks)
    return NULL;
  struct pp_trace_rank *t = calloc(1, sizeof(*t));
  if (!t) {
    fail(w, PP_NOMEM);
    return NULL;
  }
  t->w = w;
  t->rank = rank;
  return t;
}

void pp_trace_rank_destroy(struct pp_trace_rank *t)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->nmr; i++)
    free(t->mrs[i].shadow);
  free(t->mrs);
  free(t->qps);
  free(t->rv);
  free(t);
}

/* wr_ids are mostly small indices, maybe with flag bits on top: consecutive ids land in
 * consecutive slots (cache friendly), the high bits and the queue still spread them. */
static size_t rv_hash(uint32_t queue, uint64_t wr_id, size_t cap)
{
  uint64_t x = wr_id ^ (wr_id >> 32) ^ (wr_id >> 48) ^ (uint64_t)queue * 0x9e3779b9u;
  return (size_t)x & (cap - 1);
}

static struct tr_recv *rv_find(struct pp_trace_rank *t, uint32_t queue, uint64_t wr_id)
{
  if (!t->rv_cap)
    return NULL;
  size_t h = rv_hash(queue, wr_id, t->rv_cap);
  while (t->rv[h].used) {
    if (t->rv[h].queue == queue && t->rv[h].wr_id == wr_id)
      return &t->rv[h];
    h = (h + 1) & (t->rv_cap - 1);
  }
  return NULL;
}

static void rv_put(struct pp_trace_rank *t, uint32_t queue, const struct pp_recv_wr *wr)
{
  if (wr->num_sge == 0 || wr->sg_list[0].length == 0)
    return;
  struct tr_recv *e = rv_find(t, queue, wr->wr_id);
  if (!e) {
    if ((t->rv_n + 1) * 2 > t->rv_cap) { /* entries are never removed: only grow */
      size_t cap = t->rv_cap ? t->rv_cap * 2 : 64;
      struct tr_recv *n = calloc(cap, sizeof(*n));
      if (!n) {
        fail(t->w, PP_NOMEM);
        return;
      }
      for (size_t i = 0; i < t->rv_cap; i++) {
        if (!t->rv[i].used)
          continue;
        size_t h = rv_hash(t->rv[i].queue, t->rv[i].wr_id, cap);
        while (n[h].used)
          h = (h + 1) & (cap - 1);
        n[h] = t->rv[i];
      }
      free(t->rv);
      t->rv = n;
      t->rv_cap = cap;
    }
    size_t h = rv_hash(queue, wr->wr_id, t->rv_cap);
    while (t->rv[h].used)
      h = (h + 1) & (t->rv_cap - 1);
    e = &t->rv[h];
    t->rv_n++;
  }
  *e = (struct tr_recv){.wr_id = wr->wr_id,
                        .queue = queue,
                        .lkey = wr->sg_list[0].lkey,
                        .len = wr->sg_list[0].length,
                        .addr = wr->sg_list[0].addr,
                        .used = 1};
}

static struct tr_mr *mr_by_lkey(struct pp_trace_rank *t, uint32_t lkey)
{
  for (size_t i = 0; i < t->nmr; i++)
    if (t->mrs[i].lkey == lkey)
      return &t->mrs[i];
  return NULL;
}

static void emit_mem(struct pp_trace_rank *t, uint32_t key, uint64_t off, uint32_t total,
                     const uint8_t *data, uint32_t len)
{
  size_t cap = 48 + (size_t)len;
  uint8_t small[REC_MAX], *pl = cap <= sizeof(small) ? small : malloc(cap);
  if (!pl) {
    fail(t->w, PP_NOMEM);
    return;
  }
  uint8_t *p = pl;
  p = pp_put_uv(p, key);
  p = pp_put_uv(p, off);
  p = pp_put_uv(p, total);
  p = pp_put_uv(p, len);
  memcpy(p, data, len);
  emit(t->w, PP_TREC_MEM, t->rank, t->now, pl, (size_t)(p + len - pl));
  if (pl != small)
    free(pl);
}

/* Before every input: what the NIC wrote into small remote-writable regions since the last one. */
static void snapshot(struct pp_trace_rank *t)
{
  for (size_t i = 0; i < t->nmr; i++) {
    struct tr_mr *m = &t->mrs[i];
    if (!m->shadow)
      continue;
    const uint8_t *cur = (const uint8_t *)(uintptr_t)m->addr;
    if (memcmp(cur, m->shadow, m->len) == 0)
      continue;
    uint64_t a = 0, b = m->len;
    while (cur[a] == m->shadow[a])
      a++;
    while (cur[b - 1] == m->shadow[b - 1])
      b--;
    emit_mem(t, m->lkey, a, (uint32_t)(b - a), cur + a, (uint32_t)(b - a));
    memcpy(m->shadow + a, cur + a, b - a);
  }
}

HOT void input_prologue(struct pp_trace_rank *t, uint64_t now)
{
  t->now = now;
  if (t->nshadow) /* none: an input costs no snapshot loop */
    snapshot(t);
}

static void emit_simple(struct pp_trace_rank *t, unsigned type)
{
  if (t->w->deferred) {
    raw_words(t->w, type, t->rank, t->now, NULL, 0);
    return;
  }
  uint8_t *pl = rec_begin(t->w, type, t->rank, t->now);
  if (pl)
    rec_end(t->w, pl, pl);
}

static void emit_ret(struct pp_trace_rank *t, enum pp_status s)
{
  if (s == PP_OK)
    return;
  uint8_t pl[24], *p = pp_put_sv(pl, s);
  emit(t->w, PP_TREC_RET, t->rank, t->now, pl, (size_t)(p - pl));
}

static uint8_t *put_conn(uint8_t *p, const struct pp_conn_info *c)
{
  uint32_t n = c->nchannels <= PP_MAX_CHANNELS ? c->nchannels : PP_MAX_CHANNELS;
  p = pp_put_uv(p, n);
  for (uint32_t i = 0; i < n; i++) {
    p = pp_put_uv(p, c->qp_num[i]);
    p = pp_put_uv(p, c->psn[i]);
  }
  p = pp_put_uv(p, PP_MAX_REGIONS);
  for (uint32_t i = 0; i < PP_MAX_REGIONS; i++) {
    p = pp_put_uv(p, c->region[i].addr);
    p = pp_put_uv(p, c->region[i].rkey);
    p = pp_put_uv(p, c->region[i].len);
  }
  return p;
}


/* ---- the recording ops table: call, then log arguments, out-parameters and result */

static int tr_reg_mr(void *nic, void *addr, size_t length, unsigned access, struct pp_mr *mr)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->reg_mr(t->nic, addr, length, access, mr);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, (uint64_t)(uintptr_t)addr);
  p = pp_put_uv(p, length);
  p = pp_put_uv(p, access);
  p = pp_put_sv(p, r);
  p = pp_put_uv(p, r == PP_OK ? mr->lkey : 0);
  p = pp_put_uv(p, r == PP_OK ? mr->rkey : 0);
  emit(t->w, PP_TREC_REG_MR, t->rank, 0, pl, (size_t)(p - pl));
  if (r == PP_OK) {
    if (t->nmr == t->mr_cap) {
      size_t cap = t->mr_cap ? t->mr_cap * 2 : 8;
      struct tr_mr *n = realloc(t->mrs, cap * sizeof(*n));
      if (!n) {
        fail(t->w, PP_NOMEM);
        return r;
      }
      t->mrs = n;
      t->mr_cap = cap;
    }
    struct tr_mr *m = &t->mrs[t->nmr++];
    *m = (struct tr_mr){.addr = (uint64_t)(uintptr_t)addr,
                        .len = length,
                        .lkey = mr->lkey,
                        .rkey = mr->rkey,
                        .access = access};
    if ((access & PP_ACCESS_REMOTE_WRITE) && length > 0 && length <= t->w->snapshot_max && addr) {
      if ((m->shadow = malloc(length))) {
        memcpy(m->shadow, addr, length);
        t->nshadow++;
      } else
        fail(t->w, PP_NOMEM);
    }
  }
  return r;
}

static int tr_dereg_mr(void *nic, const struct pp_mr *mr)
{
  struct pp_trace_rank *t = nic;
  struct pp_mr copy = *mr;
  int r = t->ops->dereg_mr(t->nic, mr);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, copy.addr);
  p = pp_put_uv(p, copy.length);
  p = pp_put_uv(p, copy.lkey);
  p = pp_put_uv(p, copy.rkey);
  p = pp_put_sv(p, r);
  emit(t->w, PP_TREC_DEREG_MR, t->rank, 0, pl, (size_t)(p - pl));
  struct tr_mr *m = mr_by_lkey(t, copy.lkey);
  if (r == PP_OK && m) {
    t->nshadow -= m->shadow != NULL;
    free(m->shadow);
    *m = t->mrs[--t->nmr];
  }
  return r;
}

static int tr_create_srq(void *nic, const struct pp_srq_init_attr *attr, uint32_t *srq_num)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->create_srq(t->nic, attr, srq_num);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, attr->max_wr);
  p = pp_put_uv(p, attr->max_sge);
  p = pp_put_uv(p, attr->srq_limit);
  p = pp_put_sv(p, r);
  p = pp_put_uv(p, r == PP_OK ? *srq_num : 0);
  emit(t->w, PP_TREC_CREATE_SRQ, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

static int tr_modify_srq(void *nic, uint32_t srq_num, uint32_t srq_limit)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->modify_srq(t->nic, srq_num, srq_limit);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, srq_num);
  p = pp_put_uv(p, srq_limit);
  p = pp_put_sv(p, r);
  emit(t->w, PP_TREC_MODIFY_SRQ, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

static int tr_destroy_srq(void *nic, uint32_t srq_num)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->destroy_srq(t->nic, srq_num);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, srq_num);
  p = pp_put_sv(p, r);
  emit(t->w, PP_TREC_DESTROY_SRQ, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

static int tr_create_qp(void *nic, const struct pp_qp_init_attr *a, uint32_t *qp_num)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->create_qp(t->nic, a, qp_num);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, a->srq_num);
  p = pp_put_uv(p, a->max_send_wr);
  p = pp_put_uv(p, a->max_recv_wr);
  p = pp_put_uv(p, a->max_send_sge);
  p = pp_put_uv(p, a->max_recv_sge);
  p = pp_put_uv(p, a->peer);
  p = pp_put_sv(p, r);
  p = pp_put_uv(p, r == PP_OK ? *qp_num : 0);
  emit(t->w, PP_TREC_CREATE_QP, t->rank, 0, pl, (size_t)(p - pl));
  if (r == PP_OK) {
    if (t->nqp == t->qp_cap) {
      size_t cap = t->qp_cap ? t->qp_cap * 2 : 8;
      struct tr_qp *n = realloc(t->qps, cap * sizeof(*n));
      if (!n) {
        fail(t->w, PP_NOMEM);
        return r;
      }
      t->qps = n;
      t->qp_cap = cap;
    }
    t->qps[t->nqp++] = (struct tr_qp){*qp_num, a->srq_num};
  }
  return r;
}

static int tr_modify_qp(void *nic, uint32_t qp_num, const struct pp_qp_attr *a, unsigned mask)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->modify_qp(t->nic, qp_num, a, mask);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, qp_num);
  p = pp_put_uv(p, mask);
  p = pp_put_uv(p, (unsigned)a->qp_state);
  p = pp_put_uv(p, (unsigned)a->path_mtu);
  p = pp_put_uv(p, a->dest_qp_num);
  p = pp_put_uv(p, a->rq_psn);
  p = pp_put_uv(p, a->sq_psn);
  p = pp_put_uv(p, a->qp_access_flags);
  p = pp_put_uv(p, a->min_rnr_timer);
  p = pp_put_uv(p, a->rnr_retry);
  p = pp_put_uv(p, a->timeout);
  p = pp_put_uv(p, a->retry_cnt);
  p = pp_put_uv(p, a->max_rd_atomic);
  p = pp_put_uv(p, a->max_dest_rd_atomic);
  p = pp_put_sv(p, r);
  emit(t->w, PP_TREC_MODIFY_QP, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

static int tr_destroy_qp(void *nic, uint32_t qp_num)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->destroy_qp(t->nic, qp_num);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, qp_num);
  p = pp_put_sv(p, r);
  emit(t->w, PP_TREC_DESTROY_QP, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

static int tr_post_send(void *nic, uint32_t qp_num, const struct pp_send_wr *wr)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->post_send(t->nic, qp_num, wr);
  if (t->w->deferred) {
    struct raw_op op = {qp_num, r};
    raw_struct(t->w, PP_TREC_POST_SEND, t->rank, 0, RAW_SEND, &op, sizeof(op), wr, sizeof(*wr));
    return r;
  }
  uint8_t *pl = rec_begin(t->w, PP_TREC_POST_SEND, t->rank, 0);
  if (pl)
    rec_end(t->w, pl, enc_send(pl, qp_num, wr, r));
  return r;
}

HOT void log_recv(struct pp_trace_rank *t, unsigned type, uint32_t q,
                     const struct pp_recv_wr *wr, int r)
{
  if (t->w->deferred) {
    struct raw_op op = {q, r};
    raw_struct(t->w, type, t->rank, 0, RAW_RECV, &op, sizeof(op), wr, sizeof(*wr));
  } else {
    uint8_t *pl = rec_begin(t->w, type, t->rank, 0);
    if (!pl)
      return;
    rec_end(t->w, pl, enc_recv(pl, q, wr, r));
  }
  if (r == PP_OK && t->w->capture_bytes)
    rv_put(t, type == PP_TREC_POST_SRQ_RECV ? q | SRQ_BIT : q, wr);
}

static int tr_post_recv(void *nic, uint32_t qp_num, const struct pp_recv_wr *wr)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->post_recv(t->nic, qp_num, wr);
  log_recv(t, PP_TREC_POST_RECV, qp_num, wr, r);
  return r;
}

static int tr_post_srq_recv(void *nic, uint32_t srq_num, const struct pp_recv_wr *wr)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->post_srq_recv(t->nic, srq_num, wr);
  log_recv(t, PP_TREC_POST_SRQ_RECV, srq_num, wr, r);
  return r;
}

static int tr_query_counters(void *nic, struct pp_nic_counters *c)
{
  struct pp_trace_rank *t = nic;
  int r = t->ops->query_counters(t->nic, c);
  struct pp_nic_counters z = {0};
  const struct pp_nic_counters *v = r == PP_OK ? c : &z;
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_sv(p, r);
  p = pp_put_uv(p, v->rnr_naks_sent);
  p = pp_put_uv(p, v->rnr_naks_received);
  p = pp_put_uv(p, v->rnr_retries);
  p = pp_put_uv(p, v->timeout_retries);
  p = pp_put_uv(p, v->packets_sent);
  p = pp_put_uv(p, v->packets_dropped);
  p = pp_put_uv(p, v->acks_sent);
  emit(t->w, PP_TREC_QUERY_COUNTERS, t->rank, 0, pl, (size_t)(p - pl));
  return r;
}

const struct pp_nic_ops pp_trace_nic_ops = {
    .name = "trace",
    .reg_mr = tr_reg_mr,
    .dereg_mr = tr_dereg_mr,
    .create_srq = tr_create_srq,
    .modify_srq = tr_modify_srq,
    .destroy_srq = tr_destroy_srq,
    .create_qp = tr_create_qp,
    .modify_qp = tr_modify_qp,
    .destroy_qp = tr_destroy_qp,
    .post_send = tr_post_send,
    .post_recv = tr_post_recv,
    .post_srq_recv = tr_post_srq_recv,
    .query_counters = tr_query_counters,
};

/* ---- the engine's entry points */

enum pp_status pp_tr_engine_create(struct pp_trace_rank *t, uint64_t now,
                                   const struct pp_engine_cfg *cfg, const struct pp_nic_ops *ops,
                                   void *nic, struct pp_engine **out)
{
  if (!t)
    return pp_engine_create(cfg, ops, nic, out);
  t->ops = ops;
  t->nic = nic;
  input_prologue(t, now);
  emit_simple(t, PP_TREC_CREATE);
  enum pp_status s = pp_engine_create(cfg, &pp_trace_nic_ops, t, out);
  emit_ret(t, s);
  return s;
}

bool pp_tr_local_info(struct pp_trace_rank *t, const struct pp_engine *e, uint32_t peer,
                      struct pp_conn_info *out)
{
  bool ok = pp_engine_local_info(e, peer, out);
  if (!t)
    return ok;
  struct pp_conn_info z = {0};
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, peer);
  p = pp_put_uv(p, ok);
  p = put_conn(p, ok ? out : &z);
  emit(t->w, PP_TREC_LOCAL_INFO, t->rank, t->now, pl, (size_t)(p - pl));
  return ok;
}

enum pp_status pp_tr_connect(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                             uint32_t peer, const struct pp_conn_info *remote)
{
  if (!t)
    return pp_engine_connect(e, now, peer, remote);
  input_prologue(t, now);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, peer);
  p = put_conn(p, remote);
  emit(t->w, PP_TREC_CONNECT, t->rank, now, pl, (size_t)(p - pl));
  enum pp_status s = pp_engine_connect(e, now, peer, remote);
  emit_ret(t, s);
  return s;
}

enum pp_status pp_tr_start(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now)
{
  if (!t)
    return pp_engine_start(e, now);
  input_prologue(t, now);
  emit_simple(t, PP_TREC_START);
  enum pp_status s = pp_engine_start(e, now);
  emit_ret(t, s);
  return s;
}

/* The head of a received message, where the engine will read it. */
static void capture_recv(struct pp_trace_rank *t, const struct pp_wc *wc)
{
  if (wc->status != PP_WC_SUCCESS || wc->opcode != PP_WC_OP_RECV || wc->byte_len == 0)
    return;
  uint32_t queue = wc->qp_num;
  for (size_t i = 0; i < t->nqp; i++)
    if (t->qps[i].qpn == wc->qp_num && t->qps[i].srq)
      queue = t->qps[i].srq | SRQ_BIT;
  const struct tr_recv *rv = rv_find(t, queue, wc->wr_id);
  const struct tr_mr *m = rv ? mr_by_lkey(t, rv->lkey) : NULL;
  if (!m || rv->addr < m->addr || rv->addr - m->addr > m->len)
    return;
  uint32_t n = wc->byte_len < rv->len ? wc->byte_len : rv->len;
  if ((uint64_t)n > m->len - (rv->addr - m->addr))
    return;
  uint32_t total = n;
  if (n > t->w->capture_bytes)
    n = t->w->capture_bytes;
  emit_mem(t, m->lkey, rv->addr - m->addr, total, (const uint8_t *)(uintptr_t)rv->addr, n);
}

enum pp_status pp_tr_on_wc(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                           const struct pp_wc *wc)
{
  if (!t)
    return pp_engine_on_wc(e, now, wc);
  input_prologue(t, now);
  if (t->w->capture_bytes)
    capture_recv(t, wc);
  if (t->w->deferred) {
    raw_struct(t->w, PP_TREC_WC, t->rank, now, RAW_WC, wc, sizeof(*wc), NULL, 0);
  } else {
    uint8_t *pl = rec_begin(t->w, PP_TREC_WC, t->rank, now);
    if (pl)
      rec_end(t->w, pl, enc_wc(pl, wc));
  }
  enum pp_status s = pp_engine_on_wc(e, now, wc);
  emit_ret(t, s);
  return s;
}

enum pp_status pp_tr_on_async(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                              const struct pp_async_event *ev)
{
  if (!t)
    return pp_engine_on_async(e, now, ev);
  input_prologue(t, now);
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, (unsigned)ev->type);
  p = pp_put_uv(p, ev->qp_num);
  p = pp_put_uv(p, ev->srq_num);
  emit(t->w, PP_TREC_ASYNC, t->rank, now, pl, (size_t)(p - pl));
  enum pp_status s = pp_engine_on_async(e, now, ev);
  emit_ret(t, s);
  return s;
}

enum pp_status pp_tr_on_timer(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now)
{
  if (!t)
    return pp_engine_on_timer(e, now);
  input_prologue(t, now);
  emit_simple(t, PP_TREC_TIMER);
  enum pp_status s = pp_engine_on_timer(e, now);
  emit_ret(t, s);
  return s;
}

enum pp_status pp_tr_engine_create_app(struct pp_trace_rank *t, uint64_t now,
                                       const struct pp_engine_cfg *cfg,
                                       const struct pp_nic_ops *ops, void *nic,
                                       const struct pp_app_callbacks *cb, void *user_data,
                                       struct pp_engine **out)
{
  if (!t)
    return pp_engine_create_app(cfg, ops, nic, cb, user_data, out);
  t->ops = ops;
  t->nic = nic;
  input_prologue(t, now);
  emit_simple(t, PP_TREC_CREATE);
  enum pp_status s = pp_engine_create_app(cfg, &pp_trace_nic_ops, t, cb, user_data, out);
  emit_ret(t, s);
  return s;
}

static const char *const p2p_names[] = {
#define PP_X(id, value, name) [value] = name,
    PP_TRACE_P2P_LIST(PP_X)
#undef PP_X
};

const char *pp_trace_p2p_name(unsigned op)
{
  op &= ~PP_TRACE_P2P_RESULT;
  return op < PP_TP2P_COUNT ? p2p_names[op] : "?";
}

/* A P2P record: the call's arguments and results (FORMAT.md), then its status when it returned
 * one that was not OK (RET) for the calls that return a status. */
static void emit_p2p(struct pp_trace_rank *t, const struct pp_trace_p2p *c)
{
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv4(p, c->op, c->peer, c->tag, c->ctx);
  p = pp_put_uv(p, c->len);
  p = pp_put_uv(p, c->cookie);
  p = pp_put_uv(p, c->addr);
  p = pp_put_uv(p, c->req);
  p = pp_put_sv(p, c->ret);
  const struct pp_p2p_status *st = &c->st;
  p = pp_put_uv4(p, st->source, st->tag, st->ctx, st->len);
  p = pp_put_uv4(p, st->msg_len, st->error, st->proto, st->wc_status);
  p = pp_put_uv(p, st->done_ns);
  emit(t->w, PP_TREC_P2P, t->rank, t->now, pl, (size_t)(p - pl));
}

/* Each call is two P2P records: the call with its arguments before it runs (the engine's
 * pp_nic_ops calls follow as its outputs), then its results (op | PP_TRACE_P2P_RESULT): the
 * request made or given, the status or the boolean, the status of a completed test or a probe. */
static void emit_p2p_result(struct pp_trace_rank *t, uint32_t op, uint64_t req, int32_t ret,
                            const struct pp_p2p_status *st)
{
  struct pp_trace_p2p c = {.op = op | PP_TRACE_P2P_RESULT, .req = req, .ret = ret};
  if (st)
    c.st = *st;
  emit_p2p(t, &c);
}

enum pp_status pp_tr_p2p_isend(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                               bool sync, const void *buf, uint32_t len, uint32_t dest,
                               uint32_t tag, uint32_t ctx, uint64_t cookie, pp_req *req)
{
  if (!t)
    return (sync ? pp_p2p_issend : pp_p2p_isend)(e, now, buf, len, dest, tag, ctx, cookie, req);
  input_prologue(t, now);
  uint32_t op = sync ? PP_TP2P_ISSEND : PP_TP2P_ISEND;
  emit_p2p(t, &(struct pp_trace_p2p){
                  .op = op, .peer = dest, .tag = tag, .ctx = ctx, .len = len, .cookie = cookie,
                  .addr = (uint64_t)(uintptr_t)buf});
  enum pp_status s =
      (sync ? pp_p2p_issend : pp_p2p_isend)(e, now, buf, len, dest, tag, ctx, cookie, req);
  emit_p2p_result(t, op, s == PP_OK ? *req : 0, s, NULL);
  return s;
}

enum pp_status pp_tr_p2p_irecv(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                               void *buf, uint32_t len, uint32_t source, uint32_t tag,
                               uint32_t ctx, uint64_t cookie, pp_req *req)
{
  if (!t)
    return pp_p2p_irecv(e, now, buf, len, source, tag, ctx, cookie, req);
  input_prologue(t, now);
  emit_p2p(t, &(struct pp_trace_p2p){.op = PP_TP2P_IRECV, .peer = source, .tag = tag, .ctx = ctx,
                                     .len = len, .cookie = cookie,
                                     .addr = (uint64_t)(uintptr_t)buf});
  enum pp_status s = pp_p2p_irecv(e, now, buf, len, source, tag, ctx, cookie, req);
  emit_p2p_result(t, PP_TP2P_IRECV, s == PP_OK ? *req : 0, s, NULL);
  return s;
}

bool pp_tr_p2p_test(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now, pp_req *req,
                    struct pp_p2p_status *st)
{
  if (!t)
    return pp_p2p_test(e, req, st);
  input_prologue(t, now);
  emit_p2p(t, &(struct pp_trace_p2p){.op = PP_TP2P_TEST, .req = *req});
  struct pp_p2p_status mine;
  bool done = pp_p2p_test(e, req, &mine);
  if (done && st)
    *st = mine;
  emit_p2p_result(t, PP_TP2P_TEST, *req, done, done ? &mine : NULL);
  return done;
}

bool pp_tr_p2p_iprobe(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                      uint32_t source, uint32_t tag, uint32_t ctx, struct pp_p2p_status *st)
{
  if (!t)
    return pp_p2p_iprobe(e, source, tag, ctx, st);
  input_prologue(t, now);
  emit_p2p(t, &(struct pp_trace_p2p){.op = PP_TP2P_IPROBE, .peer = source, .tag = tag,
                                     .ctx = ctx});
  struct pp_p2p_status mine = {0};
  bool hit = pp_p2p_iprobe(e, source, tag, ctx, &mine);
  if (hit && st)
    *st = mine;
  emit_p2p_result(t, PP_TP2P_IPROBE, 0, hit, hit ? &mine : NULL);
  return hit;
}

enum pp_status pp_tr_p2p_cancel(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                                pp_req req)
{
  if (!t)
    return pp_p2p_cancel(e, now, req);
  input_prologue(t, now);
  emit_p2p(t, &(struct pp_trace_p2p){.op = PP_TP2P_CANCEL, .req = req});
  enum pp_status s = pp_p2p_cancel(e, now, req);
  emit_p2p_result(t, PP_TP2P_CANCEL, req, s, NULL);
  return s;
}

/* The buffer's address and length (len), then the registrations it invalidated (ret). */
uint32_t pp_tr_p2p_mem_free(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now,
                            const void *buf, uint32_t len)
{
  if (!t)
    return pp_p2p_mem_free(e, buf, len);
  input_prologue(t, now);
  emit_p2p(t, &(struct pp_trace_p2p){.op = PP_TP2P_MEM_FREE, .len = len,
                                     .addr = (uint64_t)(uintptr_t)buf});
  uint32_t n = pp_p2p_mem_free(e, buf, len);
  emit_p2p_result(t, PP_TP2P_MEM_FREE, 0, (int32_t)n, NULL);
  return n;
}

void pp_tr_rank_end(struct pp_trace_rank *t, const struct pp_engine *e, uint64_t now)
{
  if (!t || !e)
    return;
  struct pp_rank_stats st;
  pp_engine_counts(e, &st); /* no percentiles: sorting the samples is not the recorder's job */
  t->now = now;
  uint8_t pl[REC_MAX], *p = pl;
  p = pp_put_uv(p, st.done);
  p = pp_put_uv(p, st.messages_sent);
  p = pp_put_uv(p, st.messages_received);
  p = pp_put_uv(p, st.bytes_sent);
  p = pp_put_uv(p, st.bytes_received);
  p = pp_put_uv(p, st.corrupt);
  p = pp_put_uv(p, st.async_events);
  uint64_t dl = pp_engine_next_deadline(e);
  if (dl != PP_NO_DEADLINE) /* on the trace's time scale */
    dl = dl > t->w->origin ? dl - t->w->origin : 0;
  p = pp_put_uv(p, dl);
  emit(t->w, PP_TREC_RANK_END, t->rank, now, pl, (size_t)(p - pl));
}

enum pp_status pp_trace_text(struct pp_trace_writer *w, uint32_t rank, uint64_t now,
                             unsigned kind, const char *s, size_t n)
{
  if (n > PP_TRACE_TEXT_MAX || rank >= w->nranks || (n && !s))
    return PP_INVALID;
  uint8_t pl[PP_TRACE_TEXT_MAX + 20], *p = pl;
  p = pp_put_uv(p, kind);
  p = pp_put_uv(p, n);
  if (n)
    memcpy(p, s, n);
  emit(w, PP_TREC_TEXT, rank, now, pl, (size_t)(p - pl) + n);
  return w->err;
}

void pp_tr_engine_destroy(struct pp_trace_rank *t, struct pp_engine *e, uint64_t now)
{
  if (!t || !e) {
    pp_engine_destroy(e);
    return;
  }
  input_prologue(t, now);
  emit_simple(t, PP_TREC_DESTROY);
  pp_engine_destroy(e);
}
