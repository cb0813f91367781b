/*
 * Trace reader: checks a whole trace file held in memory, indexes its records, decodes them one
 * at a time, formats them. Every read is bounds-checked against the chunk it belongs to; every
 * error names the file offset and what was expected there.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepost/trace.h"
#include "engine/core/outbuf.h"
#include "engine/trace/trace_codec.h"

#define KEY_MAX 255u

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Records 0x20..0x3f are outputs and carry no time stamp; every other type does. */
static bool has_ts(unsigned type)
{
  return type < 0x20 || type > 0x3f;
}

/* ---------------------------------------------------------------- payload decoding */

struct dec {
  struct pp_rd rd;
  const char *field; /* the field that failed */
  char why[96];
};

static uint64_t u64(struct dec *d, const char *field)
{
  uint64_t v = 0;
  if (d->rd.bad)
    return 0;
  if (pp_get_uv(&d->rd, &v)) {
    d->field = field;
    snprintf(d->why, sizeof(d->why), "a varint (the record ends or it has more than 64 bits)");
  }
  return v;
}

static uint32_t u32(struct dec *d, const char *field)
{
  uint64_t v = u64(d, field);
  if (!d->rd.bad && v > UINT32_MAX) {
    d->rd.bad = 1;
    d->field = field;
    snprintf(d->why, sizeof(d->why), "a 32-bit value, got %" PRIu64, v);
  }
  return (uint32_t)v;
}

static uint32_t below(struct dec *d, const char *field, uint32_t max)
{
  uint32_t v = u32(d, field);
  if (!d->rd.bad && v > max) {
    d->rd.bad = 1;
    d->field = field;
    snprintf(d->why, sizeof(d->why), "at most %u, got %u", max, v);
  }
  return v;
}

static uint8_t u8f(struct dec *d, const char *field)
{
  return (uint8_t)below(d, field, 255);
}

static int32_t s32(struct dec *d, const char *field)
{
  uint64_t v = u64(d, field);
  int64_t x = pp_unzigzag(v);
  if (!d->rd.bad && (x < INT32_MIN || x > INT32_MAX)) {
    d->rd.bad = 1;
    d->field = field;
    snprintf(d->why, sizeof(d->why), "a 32-bit signed value");
  }
  return (int32_t)x;
}

static void conn(struct dec *d, struct pp_conn_info *c)
{
  c->nchannels = below(d, "nchannels", PP_MAX_CHANNELS);
  for (uint32_t i = 0; i < c->nchannels && !d->rd.bad; i++) {
    c->qp_num[i] = u32(d, "qp_num");
    c->psn[i] = u32(d, "psn");
  }
  uint32_t nr = below(d, "nregions", PP_MAX_REGIONS);
  for (uint32_t i = 0; i < nr && !d->rd.bad; i++) {
    c->region[i].addr = u64(d, "region.addr");
    c->region[i].rkey = u32(d, "region.rkey");
    c->region[i].len = u32(d, "region.len");
  }
}

static uint32_t sges(struct dec *d, struct pp_sge *sg)
{
  uint32_t n = below(d, "num_sge", PP_MAX_SGE);
  for (uint32_t i = 0; i < n && !d->rd.bad; i++) {
    sg[i].addr = u64(d, "sge.addr");
    sg[i].length = u32(d, "sge.length");
    sg[i].lkey = u32(d, "sge.lkey");
  }
  return n;
}

/* Decodes the payload of a known record type into r (type, rank, ts set by the caller). Unknown
 * types decode to nothing. Returns 0, or -1 with d->field / d->why set. */
static int decode(struct dec *d, struct pp_trace_rec *r)
{
  memset(&r->u, 0, sizeof(r->u));
  r->ret = 0;
  switch (r->type) {
  case PP_TREC_CREATE:
  case PP_TREC_START:
  case PP_TREC_TIMER:
  case PP_TREC_DESTROY:
    break;
  case PP_TREC_LOCAL_INFO:
    r->u.conn.peer = u32(d, "peer");
    r->u.conn.ok = below(d, "ok", 1);
    conn(d, &r->u.conn.info);
    break;
  case PP_TREC_CONNECT:
    r->u.conn.peer = u32(d, "peer");
    conn(d, &r->u.conn.info);
    break;
  case PP_TREC_WC: {
    struct pp_wc *w = &r->u.wc;
    w->wr_id = pp_rotr8(u64(d, "wr_id"));
    w->status = (enum pp_wc_status)u32(d, "status");
    w->opcode = (enum pp_wc_opcode)u32(d, "opcode");
    w->vendor_err = u32(d, "vendor_err");
    w->byte_len = u32(d, "byte_len");
    w->imm_data = u32(d, "imm_data");
    w->qp_num = u32(d, "qp_num");
    w->src_qp = u32(d, "src_qp");
    w->wc_flags = u32(d, "wc_flags");
    break;
  }
  case PP_TREC_ASYNC:
    r->u.ev.type = (enum pp_event_type)u32(d, "type");
    r->u.ev.qp_num = u32(d, "qp_num");
    r->u.ev.srq_num = u32(d, "srq_num");
    break;
  case PP_TREC_RET:
    r->ret = s32(d, "status");
    break;
  case PP_TREC_P2P: {
    struct pp_trace_p2p *c = &r->u.p2p;
    c->op = u32(d, "op");
    c->peer = u32(d, "peer");
    c->tag = u32(d, "tag");
    c->ctx = u32(d, "ctx");
    c->len = u32(d, "len");
    c->cookie = u64(d, "cookie");
    c->addr = u64(d, "addr");
    c->req = u64(d, "req");
    c->ret = s32(d, "ret");
    c->st.source = u32(d, "st.source");
    c->st.tag = u32(d, "st.tag");
    c->st.ctx = u32(d, "st.ctx");
    c->st.len = u32(d, "st.len");
    c->st.msg_len = u32(d, "st.msg_len");
    c->st.error = (uint8_t)below(d, "st.error", 255);
    c->st.proto = (uint8_t)below(d, "st.proto", 255);
    c->st.wc_status = (uint8_t)below(d, "st.wc_status", 255);
    c->st.done_ns = u64(d, "st.done_ns");
    break;
  }
  case PP_TREC_MEM: {
    struct pp_trace_mem *m = &r->u.mem;
    m->key = u32(d, "key");
    m->offset = u64(d, "offset");
    m->total = u32(d, "total");
    m->len = below(d, "len", m->total);
    if (!d->rd.bad && (size_t)(d->rd.end - d->rd.p) < m->len) {
      d->rd.bad = 1;
      d->field = "data";
      snprintf(d->why, sizeof(d->why), "%u bytes of data, %zu remain in the record", m->len,
               (size_t)(d->rd.end - d->rd.p));
    }
    if (!d->rd.bad) {
      m->data = d->rd.p;
      d->rd.p += m->len;
    }
    break;
  }
  case PP_TREC_REG_MR:
    r->u.mr.addr = u64(d, "addr");
    r->u.mr.length = u64(d, "length");
    r->u.mr.access = u32(d, "access");
    r->ret = s32(d, "ret");
    r->u.mr.lkey = u32(d, "lkey");
    r->u.mr.rkey = u32(d, "rkey");
    break;
  case PP_TREC_DEREG_MR:
    r->u.mr.addr = u64(d, "addr");
    r->u.mr.length = u64(d, "length");
    r->u.mr.lkey = u32(d, "lkey");
    r->u.mr.rkey = u32(d, "rkey");
    r->ret = s32(d, "ret");
    break;
  case PP_TREC_CREATE_SRQ:
    r->u.srq.attr.max_wr = u32(d, "max_wr");
    r->u.srq.attr.max_sge = u32(d, "max_sge");
    r->u.srq.attr.srq_limit = u32(d, "srq_limit");
    r->ret = s32(d, "ret");
    r->u.srq.srq_num = u32(d, "srq_num");
    break;
  case PP_TREC_MODIFY_SRQ:
    r->u.srq.srq_num = u32(d, "srq_num");
    r->u.srq.attr.srq_limit = u32(d, "srq_limit");
    r->ret = s32(d, "ret");
    break;
  case PP_TREC_DESTROY_SRQ:
    r->u.srq.srq_num = u32(d, "srq_num");
    r->ret = s32(d, "ret");
    break;
  case PP_TREC_CREATE_QP: {
    struct pp_qp_init_attr *a = &r->u.cqp.attr;
    a->srq_num = u32(d, "srq_num");
    a->max_send_wr = u32(d, "max_send_wr");
    a->max_recv_wr = u32(d, "max_recv_wr");
    a->max_send_sge = u32(d, "max_send_sge");
    a->max_recv_sge = u32(d, "max_recv_sge");
    a->peer = u32(d, "peer");
    r->ret = s32(d, "ret");
    r->u.cqp.qp_num = u32(d, "qp_num");
    break;
  }
  case PP_TREC_MODIFY_QP: {
    struct pp_qp_attr *a = &r->u.mqp.attr;
    r->u.mqp.qp_num = u32(d, "qp_num");
    r->u.mqp.mask = u32(d, "mask");
    a->qp_state = (enum pp_qp_state)u32(d, "qp_state");
    a->path_mtu = (enum pp_mtu)u32(d, "path_mtu");
    a->dest_qp_num = u32(d, "dest_qp_num");
    a->rq_psn = u32(d, "rq_psn");
    a->sq_psn = u32(d, "sq_psn");
    a->qp_access_flags = u32(d, "qp_access_flags");
    a->min_rnr_timer = u8f(d, "min_rnr_timer");
    a->rnr_retry = u8f(d, "rnr_retry");
    a->timeout = u8f(d, "timeout");
    a->retry_cnt = u8f(d, "retry_cnt");
    a->max_rd_atomic = u8f(d, "max_rd_atomic");
    a->max_dest_rd_atomic = u8f(d, "max_dest_rd_atomic");
    r->ret = s32(d, "ret");
    break;
  }
  case PP_TREC_DESTROY_QP:
    r->u.cqp.qp_num = u32(d, "qp_num");
    r->ret = s32(d, "ret");
    break;
  case PP_TREC_POST_SEND: {
    struct pp_send_wr *w = &r->u.send.wr;
    r->u.send.qp_num = u32(d, "qp_num");
    w->wr_id = pp_rotr8(u64(d, "wr_id"));
    w->opcode = (enum pp_wr_opcode)u32(d, "opcode");
    w->send_flags = u32(d, "send_flags");
    w->num_sge = sges(d, w->sg_list);
    w->remote_addr = u64(d, "remote_addr");
    w->rkey = u32(d, "rkey");
    w->imm_data = u32(d, "imm_data");
    r->ret = s32(d, "ret");
    break;
  }
  case PP_TREC_POST_RECV:
  case PP_TREC_POST_SRQ_RECV:
    r->u.recv.qp_num = u32(d, "qp_num");
    r->u.recv.wr.wr_id = pp_rotr8(u64(d, "wr_id"));
    r->u.recv.wr.num_sge = sges(d, r->u.recv.wr.sg_list);
    r->ret = s32(d, "ret");
    break;
  case PP_TREC_QUERY_COUNTERS: {
    struct pp_nic_counters *c = &r->u.ctr;
    r->ret = s32(d, "ret");
    c->rnr_naks_sent = u64(d, "rnr_naks_sent");
    c->rnr_naks_received = u64(d, "rnr_naks_received");
    c->rnr_retries = u64(d, "rnr_retries");
    c->timeout_retries = u64(d, "timeout_retries");
    c->packets_sent = u64(d, "packets_sent");
    c->packets_dropped = u64(d, "packets_dropped");
    c->acks_sent = u64(d, "acks_sent");
    break;
  }
  case PP_TREC_PKT_TX: {
    struct pp_trace_pkt *k = &r->u.pkt;
    k->id = u64(d, "id");
    k->src_rank = r->rank;
    k->kind = below(d, "kind", PP_TPKT_COUNT - 1);
    k->opcode = u32(d, "opcode");
    k->dst_rank = u32(d, "dst_rank");
    k->src_qpn = u32(d, "src_qpn");
    k->dst_qpn = u32(d, "dst_qpn");
    k->psn = u32(d, "psn");
    k->npkts = u32(d, "npkts");
    k->len = u32(d, "len");
    k->syndrome = u32(d, "syndrome");
    k->has_ack = below(d, "has_ack", 1);
    k->ack_psn = u32(d, "ack_psn");
    k->remote_addr = u64(d, "remote_addr");
    k->rkey = u32(d, "rkey");
    k->imm = u32(d, "imm");
    k->wire_bytes = u64(d, "wire_bytes");
    break;
  }
  case PP_TREC_PKT_RX:
    r->u.pkt.id = u64(d, "id");
    r->u.pkt.dst_rank = r->rank;
    break;
  case PP_TREC_TEXT: {
    struct pp_trace_text *x = &r->u.text;
    x->kind = u32(d, "kind");
    x->len = below(d, "len", PP_TRACE_TEXT_MAX);
    if (!d->rd.bad && (size_t)(d->rd.end - d->rd.p) < x->len) {
      d->rd.bad = 1;
      d->field = "text";
      snprintf(d->why, sizeof(d->why), "%u bytes of text, %zu remain in the record", x->len,
               (size_t)(d->rd.end - d->rd.p));
    }
    if (!d->rd.bad) {
      x->data = (const char *)d->rd.p;
      d->rd.p += x->len;
    }
    break;
  }
  case PP_TREC_RANK_END: {
    struct pp_trace_end *e = &r->u.end;
    e->done = below(d, "done", 1);
    e->messages_sent = u64(d, "messages_sent");
    e->messages_received = u64(d, "messages_received");
    e->bytes_sent = u64(d, "bytes_sent");
    e->bytes_received = u64(d, "bytes_received");
    e->corrupt = u64(d, "corrupt");
    e->async_events = u64(d, "async_events");
    e->next_deadline = u64(d, "next_deadline");
    break;
  }
  default:
    break; /* a type of a later minor version: skipped */
  }
  return d->rd.bad ? -1 : 0;
}

/* ---------------------------------------------------------------- opening */

struct kvbuf {
  struct pp_trace_kv *kv;
  size_t n;
  char *strings;
  size_t slen, scap;
};

static int parse_header(const uint8_t *p, size_t n, uint32_t count, size_t base,
                        struct pp_trace *t, char *err, size_t errlen)
{
  /* strings are copied, NUL-terminated, into one buffer: at most n + 2 * count bytes */
  t->strings = malloc(n + 2 * (size_t)count + 1);
  t->kv = calloc(count ? count : 1, sizeof(*t->kv));
  if (!t->strings || !t->kv) {
    errf(err, errlen, "out of memory reading the header");
    return PP_NOMEM;
  }
  size_t sl = 0;
  struct pp_rd rd = {p, p + n, 0};
  size_t *key_off = calloc(count ? count : 1, sizeof(*key_off));
  size_t *str_off = calloc(count ? count : 1, sizeof(*str_off));
  if (!key_off || !str_off) {
    free(key_off);
    free(str_off);
    errf(err, errlen, "out of memory reading the header");
    return PP_NOMEM;
  }
  int rc = PP_OK;
  for (uint32_t i = 0; i < count && rc == PP_OK; i++) {
    size_t at = base + (size_t)(rd.p - p);
    uint64_t kl;
    if (pp_get_uv(&rd, &kl) || kl == 0 || kl > KEY_MAX || (size_t)(rd.end - rd.p) < kl + 1) {
      errf(err, errlen, "offset %zu: header entry %u: expected a key of 1..%u bytes and a type",
           at, i, KEY_MAX);
      rc = PP_PARSE;
      break;
    }
    if (memchr(rd.p, 0, kl)) {
      errf(err, errlen, "offset %zu: header entry %u: key contains a NUL byte", at, i);
      rc = PP_PARSE;
      break;
    }
    key_off[i] = sl;
    memcpy(t->strings + sl, rd.p, kl);
    sl += kl;
    t->strings[sl++] = '\0';
    rd.p += kl;
    struct pp_trace_kv *kv = &t->kv[i];
    kv->type = *rd.p++;
    const char *key = t->strings + key_off[i];
    switch (kv->type) {
    case PP_TKV_U64:
      if (pp_get_uv(&rd, &kv->u)) {
        errf(err, errlen, "offset %zu: header key '%s': expected a varint value", at, key);
        rc = PP_PARSE;
      }
      break;
    case PP_TKV_F64:
      if (rd.end - rd.p < 8) {
        errf(err, errlen, "offset %zu: header key '%s': expected 8 bytes of double", at, key);
        rc = PP_PARSE;
      } else {
        uint64_t bits = pp_get_le64(rd.p);
        memcpy(&kv->f, &bits, 8);
        rd.p += 8;
      }
      break;
    case PP_TKV_BYTES: {
      uint64_t bn;
      if (pp_get_uv(&rd, &bn) || (uint64_t)(rd.end - rd.p) < bn) {
        errf(err, errlen, "offset %zu: header key '%s': bytes run past the header chunk", at,
             key);
        rc = PP_PARSE;
      } else {
        kv->b = rd.p;
        kv->n = (size_t)bn;
        rd.p += bn;
      }
      break;
    }
    case PP_TKV_STR: {
      uint64_t sn;
      if (pp_get_uv(&rd, &sn) || (uint64_t)(rd.end - rd.p) < sn) {
        errf(err, errlen, "offset %zu: header key '%s': string runs past the header chunk", at,
             key);
        rc = PP_PARSE;
      } else if (memchr(rd.p, 0, sn)) {
        errf(err, errlen, "offset %zu: header key '%s': string contains a NUL byte", at, key);
        rc = PP_PARSE;
      } else {
        str_off[i] = sl;
        memcpy(t->strings + sl, rd.p, sn);
        sl += sn;
        t->strings[sl++] = '\0';
        rd.p += sn;
      }
      break;
    }
    default:
      errf(err, errlen, "offset %zu: header key '%s': unknown value type %u (expected 1..4)", at,
           key, kv->type);
      rc = PP_PARSE;
    }
    t->nkv = i + 1;
  }
  if (rc == PP_OK && rd.p != rd.end) {
    errf(err, errlen, "offset %zu: %zu bytes after the %u header entries", base + (size_t)(rd.p - p),
         (size_t)(rd.end - rd.p), count);
    rc = PP_PARSE;
  }
  /* pointers only now: t->strings no longer moves */
  for (size_t i = 0; i < t->nkv; i++) {
    t->kv[i].key = t->strings + key_off[i];
    t->kv[i].s = t->kv[i].type == PP_TKV_STR && rc == PP_OK ? t->strings + str_off[i] : "";
  }
  for (size_t i = 0; rc == PP_OK && i < t->nkv; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(t->kv[i].key, t->kv[j].key)) {
        errf(err, errlen, "offset %zu: header key '%s' appears twice", base, t->kv[i].key);
        rc = PP_PARSE;
        break;
      }
  free(key_off);
  free(str_off);
  return rc;
}

const struct pp_trace_kv *pp_trace_kv_find(const struct pp_trace *t, const char *key)
{
  for (size_t i = 0; i < t->nkv; i++)
    if (t->kv[i].key && !strcmp(t->kv[i].key, key))
      return &t->kv[i];
  return NULL;
}

enum pp_trace_packets pp_trace_packets(const struct pp_trace *t)
{
  const struct pp_trace_kv *kv = pp_trace_kv_find(t, "trace.packets");
  if (kv && kv->type == PP_TKV_U64 && kv->u <= PP_TRACE_PACKETS_ALL)
    return (enum pp_trace_packets)kv->u;
  if (kv) /* a later minor's mode: its packets are not known to be all */
    return PP_TRACE_PACKETS_ERRORS;
  for (size_t i = 0; i < t->nrecs; i++)
    if (t->idx[i].type == PP_TREC_PKT_TX)
      return PP_TRACE_PACKETS_ALL;
  return PP_TRACE_PACKETS_NONE;
}

/* Reads one record header at rd: type, rank, time delta, payload length. */
struct rec_head {
  unsigned type;
  uint32_t rank;
  int64_t dt;
  const uint8_t *pl;
  size_t n;
};

static int rec_head(struct pp_rd *rd, uint32_t nranks, struct rec_head *h, const char **what)
{
  uint64_t v;
  if (rd->p >= rd->end) {
    *what = "a record type byte";
    return -1;
  }
  h->type = *rd->p++;
  if (pp_get_uv(rd, &v) || v >= nranks) {
    *what = "a rank below the header's nranks";
    return -1;
  }
  h->rank = (uint32_t)v;
  h->dt = 0;
  if (has_ts(h->type)) {
    if (pp_get_uv(rd, &v)) {
      *what = "a time delta varint";
      return -1;
    }
    h->dt = pp_unzigzag(v);
  }
  if (pp_get_uv(rd, &v) || v > (uint64_t)(rd->end - rd->p)) {
    *what = "a payload length within the chunk";
    return -1;
  }
  h->pl = rd->p;
  h->n = (size_t)v;
  rd->p += v;
  return 0;
}

static int push_idx(struct pp_trace *t, size_t *cap, const struct pp_trace_idx *e)
{
  if (t->nrecs == *cap) {
    size_t nc = *cap ? *cap * 2 : 1024;
    struct pp_trace_idx *n = realloc(t->idx, nc * sizeof(*n));
    if (!n)
      return -1;
    t->idx = n;
    *cap = nc;
  }
  t->idx[t->nrecs++] = *e;
  return 0;
}

enum pp_status pp_trace_open(const uint8_t *data, size_t size, unsigned flags,
                             struct pp_trace *t, char *err, size_t errlen)
{
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->size = size;
  if (size < PP_TRACE_FILE_HEADER) {
    errf(err, errlen, "offset 0: expected a %u-byte trace file header, the file has %zu bytes",
         PP_TRACE_FILE_HEADER, size);
    return PP_PARSE;
  }
  if (memcmp(data, PP_TRACE_MAGIC, 8) != 0) {
    /* the zstd frame magic: the CLI's compressed traces, which its loader decompresses first */
    if (!memcmp(data, "\x28\xb5\x2f\xfd", 4))
      errf(err, errlen, "offset 0: a zstd-compressed trace: decompress it first (zstd -d, or the "
                        "CLI's loader pp_trace_file_load)");
    else
      errf(err, errlen, "offset 0: not a prepost trace (expected the magic \"PPTRACE\\x1a\")");
    return PP_PARSE;
  }
  t->major = pp_get_le16(data + 8);
  t->minor = pp_get_le16(data + 10);
  if (t->major < 1 || t->major > PP_TRACE_MAJOR) {
    errf(err, errlen, "offset 8: trace format %u.%u, this prepost reads 1.x to %u.x", t->major,
         t->minor, PP_TRACE_MAJOR);
    return PP_UNSUPPORTED;
  }
  enum pp_status rc = PP_OK;
  size_t off = PP_TRACE_FILE_HEADER, idx_cap = 0;
  uint64_t *last_ts = NULL;
  uint64_t nchunks = 0;
  bool have_hdr = false;
  while (rc == PP_OK && off < size) {
    size_t left = size - off;
    if (left < PP_TRACE_CHUNK_HEADER) {
      if (flags & PP_TRACE_PARTIAL && have_hdr)
        break;
      errf(err, errlen, "offset %zu: truncated chunk header (%zu of %u bytes)", off, left,
           PP_TRACE_CHUNK_HEADER);
      rc = PP_PARSE;
      break;
    }
    uint32_t type = pp_get_le32(data + off), len = pp_get_le32(data + off + 4);
    uint32_t count = pp_get_le32(data + off + 8), crc = pp_get_le32(data + off + 12);
    if (len > PP_TRACE_CHUNK_MAX) {
      errf(err, errlen, "offset %zu: chunk length %u exceeds the %u-byte maximum", off + 4, len,
           PP_TRACE_CHUNK_MAX);
      rc = PP_PARSE;
      break;
    }
    if (len > left - PP_TRACE_CHUNK_HEADER) {
      if (flags & PP_TRACE_PARTIAL && have_hdr)
        break;
      errf(err, errlen, "offset %zu: truncated chunk: it declares %u bytes, %zu remain", off, len,
           left - PP_TRACE_CHUNK_HEADER);
      rc = PP_PARSE;
      break;
    }
    const uint8_t *pl = data + off + PP_TRACE_CHUNK_HEADER;
    uint32_t got = pp_crc32c(0, pl, len);
    if (got != crc) {
      errf(err, errlen, "offset %zu: chunk CRC mismatch (stored 0x%08x, computed 0x%08x): the "
           "chunk is corrupted", off + 12, crc, got);
      rc = PP_PARSE;
      break;
    }
    size_t base = off + PP_TRACE_CHUNK_HEADER;
    if (!have_hdr && type != PP_TRACE_CHUNK_HDR) {
      errf(err, errlen, "offset %zu: expected the HDR1 chunk first", off);
      rc = PP_PARSE;
      break;
    }
    if (type == PP_TRACE_CHUNK_HDR) {
      if (have_hdr) {
        errf(err, errlen, "offset %zu: a second HDR1 chunk", off);
        rc = PP_PARSE;
        break;
      }
      have_hdr = true;
      if (count > len / 4) { /* an entry takes at least 4 bytes */
        errf(err, errlen, "offset %zu: the header chunk declares %u entries in %u bytes", off + 8,
             count, len);
        rc = PP_PARSE;
        break;
      }
      if ((rc = parse_header(pl, len, count, base, t, err, errlen)) != PP_OK)
        break;
      const struct pp_trace_kv *nr = pp_trace_kv_find(t, "nranks");
      if (!nr || nr->type != PP_TKV_U64 || nr->u < 1 || nr->u > PP_MAX_RANKS) {
        errf(err, errlen, "offset %zu: the header needs nranks, an integer 1..%u", base,
             PP_MAX_RANKS);
        rc = PP_PARSE;
        break;
      }
      t->nranks = (uint32_t)nr->u;
      if (!(last_ts = calloc(t->nranks, sizeof(*last_ts)))) {
        rc = PP_NOMEM;
        errf(err, errlen, "out of memory");
      }
    } else if (type == PP_TRACE_CHUNK_REC) {
      nchunks++;
      struct pp_rd rd = {pl, pl + len, 0};
      for (uint32_t i = 0; i < count; i++) {
        size_t at = base + (size_t)(rd.p - pl);
        struct rec_head h;
        const char *what;
        if (rec_head(&rd, t->nranks, &h, &what)) {
          errf(err, errlen, "offset %zu: record %zu (%u of %u in the chunk at offset %zu): "
               "expected %s", at, t->nrecs, i, count, off, what);
          rc = PP_PARSE;
          break;
        }
        uint64_t ts = last_ts[h.rank] + (uint64_t)h.dt;
        if (h.dt < 0 && (uint64_t)0 - (uint64_t)h.dt > last_ts[h.rank]) {
          errf(err, errlen, "offset %zu: record %zu: time delta %" PRId64 " goes below 0", at,
               t->nrecs, h.dt);
          rc = PP_PARSE;
          break;
        }
        if (has_ts(h.type))
          last_ts[h.rank] = ts;
        struct pp_trace_rec r = {.type = h.type, .rank = h.rank, .ts = last_ts[h.rank]};
        struct dec d = {.rd = {h.pl, h.pl + h.n, 0}};
        if (decode(&d, &r)) {
          errf(err, errlen, "offset %zu: record %zu (%s, rank %u): field %s: expected %s", at,
               t->nrecs, pp_trace_rec_name(h.type), h.rank, d.field, d.why);
          rc = PP_PARSE;
          break;
        }
        struct pp_trace_idx e = {.offset = at, .ts = last_ts[h.rank], .rank = h.rank,
                                 .type = h.type};
        if (push_idx(t, &idx_cap, &e)) {
          errf(err, errlen, "out of memory indexing record %zu", t->nrecs);
          rc = PP_NOMEM;
          break;
        }
      }
      if (rc == PP_OK && rd.p != rd.end) {
        errf(err, errlen, "offset %zu: %zu bytes after the %u records the chunk at offset %zu "
             "declares", base + (size_t)(rd.p - pl), (size_t)(rd.end - rd.p), count, off);
        rc = PP_PARSE;
      }
    } else if (type == PP_TRACE_CHUNK_END) {
      struct pp_rd rd = {pl, pl + len, 0};
      uint64_t nrec = 0, nch = 0;
      if (count != 0) {
        errf(err, errlen, "offset %zu: END chunk: expected a count of 0, got %u", off + 8, count);
        rc = PP_PARSE;
      } else if (pp_get_uv(&rd, &nrec) || pp_get_uv(&rd, &nch)) {
        errf(err, errlen, "offset %zu: END chunk: expected the record and chunk totals", base);
        rc = PP_PARSE;
      } else if (nrec != t->nrecs || nch != nchunks) {
        errf(err, errlen, "offset %zu: END chunk says %" PRIu64 " records in %" PRIu64
             " chunks, the file has %zu in %" PRIu64 ": chunks are missing", base, nrec, nch,
             t->nrecs, nchunks);
        rc = PP_PARSE;
      } else if (off + PP_TRACE_CHUNK_HEADER + len != size) {
        errf(err, errlen, "offset %zu: %zu bytes after the END chunk",
             off + PP_TRACE_CHUNK_HEADER + len, size - (off + PP_TRACE_CHUNK_HEADER + len));
        rc = PP_PARSE;
      } else {
        t->complete = true;
      }
    } /* else: a chunk type of a later minor version, skipped */
    off += PP_TRACE_CHUNK_HEADER + (size_t)len;
  }
  free(last_ts);
  if (rc == PP_OK && !have_hdr) {
    errf(err, errlen, "offset %zu: expected the HDR1 chunk, the file ends", off);
    rc = PP_PARSE;
  }
  if (rc == PP_OK && !t->complete && !(flags & PP_TRACE_PARTIAL)) {
    errf(err, errlen, "offset %zu: the trace ends without its END chunk (the recording was cut "
         "short); read its %zu complete records with --partial", off, t->nrecs);
    rc = PP_PARSE;
  }
  if (rc == PP_OK) { /* per-rank lists */
    t->rank_nrecs = calloc(t->nranks, sizeof(*t->rank_nrecs));
    t->rank_recs = calloc(t->nranks, sizeof(*t->rank_recs));
    if (!t->rank_nrecs || !t->rank_recs)
      rc = PP_NOMEM;
    for (size_t i = 0; rc == PP_OK && i < t->nrecs; i++)
      t->rank_nrecs[t->idx[i].rank]++;
    for (uint32_t r = 0; rc == PP_OK && r < t->nranks; r++)
      if (t->rank_nrecs[r] && !(t->rank_recs[r] = malloc(t->rank_nrecs[r] * sizeof(uint32_t))))
        rc = PP_NOMEM;
    if (rc == PP_OK) {
      memset(t->rank_nrecs, 0, t->nranks * sizeof(*t->rank_nrecs));
      for (size_t i = 0; i < t->nrecs; i++) {
        uint32_t r = t->idx[i].rank;
        t->rank_recs[r][t->rank_nrecs[r]++] = (uint32_t)i;
      }
    } else {
      errf(err, errlen, "out of memory");
    }
  }
  if (rc != PP_OK) {
    pp_trace_close(t);
    t->data = data;
    t->size = size;
  }
  return rc;
}

void pp_trace_close(struct pp_trace *t)
{
  for (uint32_t r = 0; t->rank_recs && r < t->nranks; r++)
    free(t->rank_recs[r]);
  free(t->rank_recs);
  free(t->rank_nrecs);
  free(t->idx);
  free(t->kv);
  free(t->strings);
  memset(t, 0, sizeof(*t));
}

/* The head of record i; the record lies inside a chunk that was checked, the read is bounded by
 * the file anyway. */
static enum pp_status locate(const struct pp_trace *t, size_t i, struct rec_head *h)
{
  if (i >= t->nrecs)
    return PP_NOTFOUND;
  const struct pp_trace_idx *e = &t->idx[i];
  if (e->offset >= t->size)
    return PP_PARSE;
  struct pp_rd rd = {t->data + e->offset, t->data + t->size, 0};
  const char *what;
  return rec_head(&rd, t->nranks, h, &what) ? PP_PARSE : PP_OK;
}

enum pp_status pp_trace_rec_bytes(const struct pp_trace *t, size_t i, const uint8_t **p,
                                  size_t *n)
{
  struct rec_head h;
  enum pp_status s = locate(t, i, &h);
  if (s != PP_OK)
    return s;
  *p = t->data + t->idx[i].offset;
  *n = (size_t)(h.pl + h.n - *p);
  return PP_OK;
}

enum pp_status pp_trace_get(const struct pp_trace *t, size_t i, struct pp_trace_rec *r)
{
  struct rec_head h;
  enum pp_status s = locate(t, i, &h);
  if (s != PP_OK)
    return s;
  const struct pp_trace_idx *e = &t->idx[i];
  *r = (struct pp_trace_rec){.type = h.type, .rank = h.rank, .ts = e->ts, .index = i,
                             .offset = e->offset};
  struct dec d = {.rd = {h.pl, h.pl + h.n, 0}};
  return decode(&d, r) ? PP_PARSE : PP_OK;
}

/* ---------------------------------------------------------------- formatting */

static const char *status_name(int32_t s)
{
  return pp_status_name((enum pp_status)s);
}

static void fmt_ret(struct out *o, int32_t r)
{
  pf(o, " -> %s", status_name(r));
}

static void fmt_access(struct out *o, unsigned a)
{
  pf(o, "%s%s%s%s", a & PP_ACCESS_LOCAL_WRITE ? "LW" : "", a & PP_ACCESS_REMOTE_WRITE ? "+RW" : "",
     a & PP_ACCESS_REMOTE_READ ? "+RR" : "", a ? "" : "none");
  if (a & ~7u)
    pf(o, "+0x%x", a & ~7u);
}

static void fmt_conn(struct out *o, const struct pp_conn_info *c)
{
  pf(o, " channels [");
  for (uint32_t i = 0; i < c->nchannels && i < PP_MAX_CHANNELS; i++)
    pf(o, "%sqp 0x%x psn 0x%x", i ? ", " : "", c->qp_num[i], c->psn[i]);
  pf(o, "]");
  for (uint32_t i = 0; i < PP_MAX_REGIONS; i++)
    if (c->region[i].addr || c->region[i].rkey || c->region[i].len)
      pf(o, " region%u [addr 0x%" PRIx64 " rkey 0x%x len %u]", i, c->region[i].addr,
         c->region[i].rkey, c->region[i].len);
}

static void fmt_sges(struct out *o, uint32_t n, const struct pp_sge *sg)
{
  pf(o, " sge [");
  for (uint32_t i = 0; i < n && i < PP_MAX_SGE; i++)
    pf(o, "%s0x%" PRIx64 " len %u lkey 0x%x", i ? ", " : "", sg[i].addr, sg[i].length,
       sg[i].lkey);
  pf(o, "]");
}

static const char *opname(const char *s)
{
  return s ? s : "?";
}

int pp_trace_rec_format(const struct pp_trace_rec *r, char *buf, size_t len)
{
  struct out o = {buf, len, 0};
  if (len)
    buf[0] = '\0';
  pf(&o, "#%" PRIu64 " r%u %" PRIu64 " %s", r->index, r->rank, r->ts, pp_trace_rec_name(r->type));
  switch (r->type) {
  case PP_TREC_LOCAL_INFO:
    pf(&o, " peer %u%s", r->u.conn.peer, r->u.conn.ok ? "" : " -> false");
    if (r->u.conn.ok)
      fmt_conn(&o, &r->u.conn.info);
    break;
  case PP_TREC_CONNECT:
    pf(&o, " peer %u", r->u.conn.peer);
    fmt_conn(&o, &r->u.conn.info);
    break;
  case PP_TREC_WC: {
    const struct pp_wc *w = &r->u.wc;
    pf(&o, " qp 0x%x wr_id 0x%" PRIx64 " %s %s len %u", w->qp_num, w->wr_id,
       opname(pp_wc_opcode_name(w->opcode)), opname(pp_wc_status_name(w->status)), w->byte_len);
    if (w->wc_flags & PP_WC_WITH_IMM)
      pf(&o, " imm 0x%x", w->imm_data);
    if (w->src_qp)
      pf(&o, " src_qp 0x%x", w->src_qp);
    if (w->vendor_err)
      pf(&o, " vendor_err 0x%x", w->vendor_err);
    if (w->wc_flags & ~(unsigned)PP_WC_WITH_IMM)
      pf(&o, " flags 0x%x", w->wc_flags);
    break;
  }
  case PP_TREC_ASYNC:
    pf(&o, " %s qp 0x%x srq %u", opname(pp_event_name(r->u.ev.type)), r->u.ev.qp_num,
       r->u.ev.srq_num);
    break;
  case PP_TREC_RET:
    pf(&o, " %s", status_name(r->ret));
    break;
  case PP_TREC_P2P: {
    const struct pp_trace_p2p *c = &r->u.p2p;
    unsigned op = c->op & ~PP_TRACE_P2P_RESULT;
    pf(&o, " %s%s", pp_trace_p2p_name(c->op), c->op & PP_TRACE_P2P_RESULT ? " ->" : "");
    if (!(c->op & PP_TRACE_P2P_RESULT)) {
      if (op == PP_TP2P_TEST || op == PP_TP2P_CANCEL)
        pf(&o, " req 0x%" PRIx64, c->req);
      else if (op == PP_TP2P_MEM_FREE)
        pf(&o, " addr 0x%" PRIx64 " len %u", c->addr, c->len);
      else
        pf(&o, " %s %u tag %u ctx %u", op == PP_TP2P_ISEND || op == PP_TP2P_ISSEND ? "dest" : "src",
           c->peer, c->tag, c->ctx);
      if (op <= PP_TP2P_IRECV)
        pf(&o, " addr 0x%" PRIx64 " len %u cookie %" PRIu64, c->addr, c->len, c->cookie);
      break;
    }
    if (op == PP_TP2P_MEM_FREE) {
      pf(&o, " %d invalidated", c->ret);
    } else if (op == PP_TP2P_TEST || op == PP_TP2P_IPROBE) {
      pf(&o, " %s", c->ret ? "true" : "false");
      if (c->ret)
        pf(&o, " source %u tag %u ctx %u len %u msg_len %u error %s", c->st.source, c->st.tag,
           c->st.ctx, c->st.len, c->st.msg_len, pp_p2p_err_name((enum pp_p2p_err)c->st.error));
    } else {
      pf(&o, " %s", status_name(c->ret));
      if (op != PP_TP2P_CANCEL && c->ret == PP_OK)
        pf(&o, " req 0x%" PRIx64, c->req);
    }
    break;
  }
  case PP_TREC_MEM: {
    const struct pp_trace_mem *m = &r->u.mem;
    pf(&o, " lkey 0x%x +0x%" PRIx64 " total %u:", m->key, m->offset, m->total);
    for (uint32_t i = 0; i < m->len && i < 16; i++)
      pf(&o, " %02x", m->data[i]);
    if (m->len > 16)
      pf(&o, " ...");
    break;
  }
  case PP_TREC_REG_MR:
    pf(&o, " addr 0x%" PRIx64 " len %" PRIu64 " ", r->u.mr.addr, r->u.mr.length);
    fmt_access(&o, r->u.mr.access);
    fmt_ret(&o, r->ret);
    if (r->ret == PP_OK)
      pf(&o, " lkey 0x%x rkey 0x%x", r->u.mr.lkey, r->u.mr.rkey);
    break;
  case PP_TREC_DEREG_MR:
    pf(&o, " lkey 0x%x addr 0x%" PRIx64 " len %" PRIu64, r->u.mr.lkey, r->u.mr.addr,
       r->u.mr.length);
    fmt_ret(&o, r->ret);
    break;
  case PP_TREC_CREATE_SRQ:
    pf(&o, " max_wr %u max_sge %u limit %u", r->u.srq.attr.max_wr, r->u.srq.attr.max_sge,
       r->u.srq.attr.srq_limit);
    fmt_ret(&o, r->ret);
    if (r->ret == PP_OK)
      pf(&o, " srq %u", r->u.srq.srq_num);
    break;
  case PP_TREC_MODIFY_SRQ:
    pf(&o, " srq %u limit %u", r->u.srq.srq_num, r->u.srq.attr.srq_limit);
    fmt_ret(&o, r->ret);
    break;
  case PP_TREC_DESTROY_SRQ:
    pf(&o, " srq %u", r->u.srq.srq_num);
    fmt_ret(&o, r->ret);
    break;
  case PP_TREC_CREATE_QP: {
    const struct pp_qp_init_attr *a = &r->u.cqp.attr;
    pf(&o, " peer %u srq %u send_wr %u recv_wr %u send_sge %u recv_sge %u", a->peer, a->srq_num,
       a->max_send_wr, a->max_recv_wr, a->max_send_sge, a->max_recv_sge);
    fmt_ret(&o, r->ret);
    if (r->ret == PP_OK)
      pf(&o, " qp 0x%x", r->u.cqp.qp_num);
    break;
  }
  case PP_TREC_MODIFY_QP: {
    const struct pp_qp_attr *a = &r->u.mqp.attr;
    unsigned m = r->u.mqp.mask;
    pf(&o, " qp 0x%x", r->u.mqp.qp_num);
    if (m & PP_QP_STATE)
      pf(&o, " state %s", opname(pp_qp_state_name(a->qp_state)));
    if (m & PP_QP_ACCESS_FLAGS) {
      pf(&o, " access ");
      fmt_access(&o, a->qp_access_flags);
    }
    if (m & PP_QP_PATH_MTU)
      pf(&o, " mtu %u", pp_mtu_bytes(a->path_mtu));
    if (m & PP_QP_DEST_QPN)
      pf(&o, " dest_qp 0x%x", a->dest_qp_num);
    if (m & PP_QP_RQ_PSN)
      pf(&o, " rq_psn 0x%x", a->rq_psn);
    if (m & PP_QP_SQ_PSN)
      pf(&o, " sq_psn 0x%x", a->sq_psn);
    if (m & PP_QP_MIN_RNR_TIMER)
      pf(&o, " min_rnr_timer %u", a->min_rnr_timer);
    if (m & PP_QP_RNR_RETRY)
      pf(&o, " rnr_retry %u", a->rnr_retry);
    if (m & PP_QP_TIMEOUT)
      pf(&o, " timeout %u", a->timeout);
    if (m & PP_QP_RETRY_CNT)
      pf(&o, " retry_cnt %u", a->retry_cnt);
    if (m & PP_QP_MAX_QP_RD_ATOMIC)
      pf(&o, " max_rd_atomic %u", a->max_rd_atomic);
    if (m & PP_QP_MAX_DEST_RD_ATOMIC)
      pf(&o, " max_dest_rd_atomic %u", a->max_dest_rd_atomic);
    fmt_ret(&o, r->ret);
    break;
  }
  case PP_TREC_DESTROY_QP:
    pf(&o, " qp 0x%x", r->u.cqp.qp_num);
    fmt_ret(&o, r->ret);
    break;
  case PP_TREC_POST_SEND: {
    const struct pp_send_wr *w = &r->u.send.wr;
    pf(&o, " qp 0x%x wr_id 0x%" PRIx64 " %s%s", r->u.send.qp_num, w->wr_id,
       opname(pp_wr_opcode_name(w->opcode)), w->send_flags & PP_SEND_SIGNALED ? " signaled" : "");
    if (w->send_flags & ~(unsigned)PP_SEND_SIGNALED)
      pf(&o, " flags 0x%x", w->send_flags);
    fmt_sges(&o, w->num_sge, w->sg_list);
    if (w->opcode == PP_WR_RDMA_WRITE || w->opcode == PP_WR_RDMA_WRITE_WITH_IMM ||
        w->opcode == PP_WR_RDMA_READ || w->remote_addr || w->rkey)
      pf(&o, " remote 0x%" PRIx64 " rkey 0x%x", w->remote_addr, w->rkey);
    if (w->opcode == PP_WR_RDMA_WRITE_WITH_IMM || w->opcode == PP_WR_SEND_WITH_IMM ||
        w->imm_data)
      pf(&o, " imm 0x%x", w->imm_data);
    fmt_ret(&o, r->ret);
    break;
  }
  case PP_TREC_POST_RECV:
  case PP_TREC_POST_SRQ_RECV:
    pf(&o, " %s 0x%x wr_id 0x%" PRIx64, r->type == PP_TREC_POST_RECV ? "qp" : "srq",
       r->u.recv.qp_num, r->u.recv.wr.wr_id);
    fmt_sges(&o, r->u.recv.wr.num_sge, r->u.recv.wr.sg_list);
    fmt_ret(&o, r->ret);
    break;
  case PP_TREC_QUERY_COUNTERS: {
    const struct pp_nic_counters *c = &r->u.ctr;
    fmt_ret(&o, r->ret);
    pf(&o, " rnr_naks_sent %" PRIu64 " rnr_naks_received %" PRIu64 " rnr_retries %" PRIu64
       " timeout_retries %" PRIu64 " packets_sent %" PRIu64 " packets_dropped %" PRIu64
       " acks_sent %" PRIu64, c->rnr_naks_sent, c->rnr_naks_received, c->rnr_retries,
       c->timeout_retries, c->packets_sent, c->packets_dropped, c->acks_sent);
    break;
  }
  case PP_TREC_PKT_TX: {
    const struct pp_trace_pkt *k = &r->u.pkt;
    pf(&o, " id %" PRIu64 " %s", k->id, pp_trace_pkt_kind_name(k->kind));
    if (k->kind == PP_TPKT_REQ)
      pf(&o, " %s", opname(pp_wr_opcode_name((enum pp_wr_opcode)k->opcode)));
    pf(&o, " qp 0x%x -> r%u qp 0x%x psn 0x%x", k->src_qpn, k->dst_rank, k->dst_qpn, k->psn);
    if (k->npkts > 1)
      pf(&o, " pkts %u", k->npkts);
    pf(&o, " len %u", k->len);
    if (k->kind == PP_TPKT_RNR_NAK)
      pf(&o, " rnr_timer %u", k->syndrome);
    else if (k->kind == PP_TPKT_NAK)
      pf(&o, " syndrome 0x%x", 0x60 | k->syndrome);
    if (k->has_ack)
      pf(&o, " ack_psn 0x%x", k->ack_psn);
    if (k->kind == PP_TPKT_REQ && (k->remote_addr || k->rkey))
      pf(&o, " remote 0x%" PRIx64 " rkey 0x%x", k->remote_addr, k->rkey);
    if (k->kind == PP_TPKT_REQ && (k->opcode == PP_WR_RDMA_WRITE_WITH_IMM ||
                                   k->opcode == PP_WR_SEND_WITH_IMM))
      pf(&o, " imm 0x%x", k->imm);
    pf(&o, " wire %" PRIu64, k->wire_bytes);
    break;
  }
  case PP_TREC_PKT_RX:
    pf(&o, " id %" PRIu64, r->u.pkt.id);
    break;
  case PP_TREC_TEXT:
    pf(&o, " %s \"%.*s\"", r->u.text.kind == PP_TTEXT_MPI_REPORT ? "mpirun" : "?",
       (int)r->u.text.len, r->u.text.data);
    break;
  case PP_TREC_RANK_END: {
    const struct pp_trace_end *e = &r->u.end;
    pf(&o, " done %s sent %" PRIu64 " received %" PRIu64 " corrupt %" PRIu64 " async %" PRIu64,
       e->done ? "yes" : "no", e->messages_sent, e->messages_received, e->corrupt,
       e->async_events);
    if (e->next_deadline != PP_NO_DEADLINE)
      pf(&o, " next_deadline %" PRIu64, e->next_deadline);
    break;
  }
  default:
    if (pp_trace_rec_class(r->type) == PP_TCLASS_UNKNOWN)
      pf(&o, " (type 0x%02x, unknown to this version)", r->type);
  }
  return (int)o.n;
}
