/*
 * prepost trace export --perfetto: Chrome trace event JSON, which ui.perfetto.dev and
 * chrome://tracing load. One process per rank, one thread per QP:
 *  - an async slice per work request, from its post to its completion (category send / recv);
 *  - per message (packet, or consuming send on a verbs trace) a short slice where it leaves and
 *    where it arrives, joined by a flow arrow;
 *  - instant events for error completions and RNR NAKs;
 *  - counter tracks per rank: sends outstanding, receives posted, RNR NAKs received.
 * Times are microseconds with nanosecond decimals.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export_msgs.h"
#include "trace_cli.h"

struct wr_ent {
  uint64_t key, wr_id; /* key = rank << 32 | qpn, + 1 (0 = empty) */
  uint64_t id;         /* async slice id */
  int recv;
};

struct wrmap {
  struct wr_ent *e;
  size_t cap, n;
};

static size_t wr_hash(uint64_t key, uint64_t wr_id, size_t cap)
{
  uint64_t x = (key * 0x9e3779b97f4a7c15ull) ^ wr_id ^ (wr_id >> 29);
  return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static struct wr_ent *wr_find(struct wrmap *m, uint64_t key, uint64_t wr_id)
{
  if (!m->cap)
    return NULL;
  size_t h = wr_hash(key, wr_id, m->cap);
  while (m->e[h].key) {
    if (m->e[h].key == key && m->e[h].wr_id == wr_id)
      return &m->e[h];
    h = (h + 1) & (m->cap - 1);
  }
  return NULL;
}

static void wr_del(struct wrmap *m, struct wr_ent *e)
{
  size_t i = (size_t)(e - m->e), mask = m->cap - 1, j = i;
  m->e[i].key = 0;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->e[j].key)
      break;
    size_t h = wr_hash(m->e[j].key, m->e[j].wr_id, m->cap);
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      m->e[i] = m->e[j];
      m->e[j].key = 0;
      i = j;
    }
  }
  m->n--;
}

static struct wr_ent *wr_put(struct wrmap *m, uint64_t key, uint64_t wr_id)
{
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    struct wr_ent *n = calloc(cap, sizeof(*n));
    if (!n)
      return NULL;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->e[i].key)
        continue;
      size_t h = wr_hash(m->e[i].key, m->e[i].wr_id, cap);
      while (n[h].key)
        h = (h + 1) & (cap - 1);
      n[h] = m->e[i];
    }
    free(m->e);
    m->e = n;
    m->cap = cap;
  }
  size_t h = wr_hash(key, wr_id, m->cap);
  while (m->e[h].key && !(m->e[h].key == key && m->e[h].wr_id == wr_id))
    h = (h + 1) & (m->cap - 1);
  if (!m->e[h].key)
    m->n++;
  m->e[h].key = key;
  m->e[h].wr_id = wr_id;
  return &m->e[h];
}

static void json_str(FILE *o, const char *s)
{
  fputc('"', o);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(o, "\\%c", c);
    else if (c < 0x20)
      fprintf(o, "\\u%04x", c);
    else
      fputc(c, o);
  }
  fputc('"', o);
}

struct rank_ctr {
  int64_t sends, recvs;
  uint64_t rnr;
};

static void us(FILE *o, uint64_t ns)
{
  fprintf(o, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void counter(FILE *o, const char **sep, uint32_t rank, uint64_t ts,
                    const struct rank_ctr *c)
{
  fprintf(o, "%s{\"ph\":\"C\",\"name\":\"work requests\",\"pid\":%u,\"ts\":", *sep, rank);
  us(o, ts);
  fprintf(o, ",\"args\":{\"sends outstanding\":%" PRId64 ",\"receives posted\":%" PRId64 "}}",
          c->sends, c->recvs);
  *sep = ",\n";
}

static const char *msg_name(const struct pp_xmsg *m)
{
  switch (m->kind) {
  case PP_MK_DATA:
    return pp_wr_opcode_name((enum pp_wr_opcode)m->opcode);
  case PP_MK_ACK:
    return "ACK";
  case PP_MK_RNR_NAK:
    return "RNR NAK";
  case PP_MK_NAK:
    return "NAK";
  default:
    return "READ RESPONSE";
  }
}

int pp_export_perfetto(const struct pp_trace *t, FILE *o, const struct pp_export_opts *opts,
                       char *err, size_t errlen)
{
  (void)opts;
  struct pp_xmsg *msgs = NULL;
  size_t nmsg = 0;
  if (pp_trace_messages(t, &msgs, &nmsg, err, errlen))
    return -1;
  struct rank_ctr *ctr = calloc(t->nranks, sizeof(*ctr));
  struct wrmap wrs = {0};
  if (!ctr) {
    free(msgs);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *sep = "";
  uint64_t end_ts = 0, next_id = 1;
  const struct pp_trace_kv *name = pp_trace_kv_find(t, "scenario.name");
  fprintf(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"scenario\":");
  json_str(o, name && name->type == PP_TKV_STR ? name->s : "?");
  fprintf(o, "},\"traceEvents\":[\n");
  for (uint32_t r = 0; r < t->nranks; r++) {
    fprintf(o, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"rank %u\"}}",
            sep, r, r);
    sep = ",\n";
    fprintf(o, "%s{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"args\":"
            "{\"sort_index\":%u}}", sep, r, r);
  }
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < t->nrecs; i++) {
    unsigned type = t->idx[i].type;
    if (type != PP_TREC_CREATE_QP && type != PP_TREC_POST_SEND && type != PP_TREC_POST_RECV &&
        type != PP_TREC_POST_SRQ_RECV && type != PP_TREC_WC && type != PP_TREC_PKT_TX)
      continue;
    struct pp_trace_rec r;
    if (pp_trace_get(t, i, &r) != PP_OK) {
      rc = -1;
      break;
    }
    end_ts = r.ts > end_ts ? r.ts : end_ts;
    struct rank_ctr *c = &ctr[r.rank];
    switch (type) {
    case PP_TREC_CREATE_QP:
      if (r.ret == PP_OK)
        fprintf(o, "%s{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
                "{\"name\":\"qp 0x%x to rank %u\"}}", sep, r.rank, r.u.cqp.qp_num,
                r.u.cqp.qp_num, r.u.cqp.attr.peer);
      break;
    case PP_TREC_POST_SEND:
    case PP_TREC_POST_RECV:
    case PP_TREC_POST_SRQ_RECV: {
      if (r.ret != PP_OK)
        break;
      bool recv = type != PP_TREC_POST_SEND;
      uint32_t q = recv ? r.u.recv.qp_num : r.u.send.qp_num;
      uint64_t wr_id = recv ? r.u.recv.wr.wr_id : r.u.send.wr.wr_id;
      uint64_t key = ((uint64_t)r.rank << 32 | q) + 1;
      if (type == PP_TREC_POST_SRQ_RECV)
        key |= 1ull << 63;
      struct wr_ent *e = wr_put(&wrs, key, wr_id);
      if (!e) {
        rc = -1;
        break;
      }
      e->id = next_id++;
      e->recv = recv;
      uint32_t len = 0;
      const struct pp_sge *sg = recv ? r.u.recv.wr.sg_list : r.u.send.wr.sg_list;
      uint32_t nsge = recv ? r.u.recv.wr.num_sge : r.u.send.wr.num_sge;
      for (uint32_t s = 0; s < nsge && s < PP_MAX_SGE; s++)
        len += sg[s].length;
      fprintf(o, "%s{\"ph\":\"b\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
              ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, recv ? "recv" : "send",
              recv ? "receive WQE" : pp_wr_opcode_name(r.u.send.wr.opcode), e->id, r.rank,
              type == PP_TREC_POST_SRQ_RECV ? 0 : q);
      us(o, r.ts);
      fprintf(o, ",\"args\":{\"wr_id\":\"0x%" PRIx64 "\",\"bytes\":%u}}", wr_id, len);
      if (recv)
        c->recvs++;
      else
        c->sends++;
      counter(o, &sep, r.rank, r.ts, c);
      break;
    }
    case PP_TREC_WC: {
      const struct pp_wc *w = &r.u.wc;
      uint64_t key = ((uint64_t)r.rank << 32 | w->qp_num) + 1;
      struct wr_ent *e = wr_find(&wrs, key, w->wr_id);
      if (!e) { /* an SRQ receive: any SRQ of the rank with this wr_id */
        for (size_t h = 0; h < wrs.cap && !e; h++)
          if (wrs.e[h].key && (wrs.e[h].key & (1ull << 63)) &&
              ((wrs.e[h].key & ~(1ull << 63)) - 1) >> 32 == r.rank && wrs.e[h].wr_id == w->wr_id)
            e = &wrs.e[h];
      }
      if (w->status != PP_WC_SUCCESS) {
        fprintf(o, "%s{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
                sep, pp_wc_status_name(w->status), r.rank, w->qp_num);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"wr_id\":\"0x%" PRIx64 "\"}}", w->wr_id);
      }
      if (e) {
        fprintf(o, "%s{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%" PRIu64
                ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, e->recv ? "recv" : "send",
                e->recv ? "receive WQE" : pp_wc_opcode_name(w->opcode), e->id, r.rank,
                (e->key >> 63) ? 0 : w->qp_num);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"status\":\"%s\",\"byte_len\":%u}}", pp_wc_status_name(w->status),
                w->byte_len);
        if (e->recv)
          c->recvs--;
        else
          c->sends--;
        wr_del(&wrs, e);
        counter(o, &sep, r.rank, r.ts, c);
      }
      break;
    }
    case PP_TREC_PKT_TX:
      if (r.u.pkt.kind == PP_TPKT_RNR_NAK && r.u.pkt.dst_rank < t->nranks) {
        struct rank_ctr *d = &ctr[r.u.pkt.dst_rank];
        d->rnr++;
        fprintf(o, "%s{\"ph\":\"C\",\"name\":\"RNR NAKs received\",\"pid\":%u,\"ts\":", sep,
                r.u.pkt.dst_rank);
        us(o, r.ts);
        fprintf(o, ",\"args\":{\"RNR NAKs\":%" PRIu64 "}}", d->rnr);
      }
      break;
    }
  }
  /* work requests never completed end with the trace */
  for (size_t h = 0; rc == 0 && h < wrs.cap; h++) {
    const struct wr_ent *e = &wrs.e[h];
    if (!e->key)
      continue;
    uint64_t k = (e->key & ~(1ull << 63)) - 1;
    fprintf(o, "%s{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"never completed\",\"id\":%" PRIu64
            ",\"pid\":%u,\"tid\":%u,\"ts\":", sep, e->recv ? "recv" : "send", e->id,
            (uint32_t)(k >> 32), (e->key >> 63) ? 0 : (uint32_t)k);
    us(o, end_ts);
    fprintf(o, ",\"args\":{\"status\":\"pending\"}}");
  }
  /* messages: a short slice at each end, joined by a flow arrow */
  for (size_t i = 0; rc == 0 && i < nmsg; i++) {
    const struct pp_xmsg *m = &msgs[i];
    const char *nm = msg_name(m);
    fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"wire\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":",
            sep, nm, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"psn\":%u,\"bytes\":%u,\"to\":%u}}", m->psn, m->len,
            m->dst);
    if (m->t1 == UINT64_MAX)
      continue; /* lost or still in flight: no arrow */
    fprintf(o, "%s{\"ph\":\"s\",\"cat\":\"wire\",\"name\":\"%s\",\"id\":%zu,\"pid\":%u,"
            "\"tid\":%u,\"ts\":", sep, nm, i + 1, m->src, m->src_qpn);
    us(o, m->t0);
    fprintf(o, "}");
    fprintf(o, "%s{\"ph\":\"X\",\"cat\":\"wire\",\"name\":\"%s arrives\",\"pid\":%u,\"tid\":%u,"
            "\"ts\":", sep, nm, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, ",\"dur\":0.001,\"args\":{\"psn\":%u,\"from\":%u}}", m->psn, m->src);
    fprintf(o, "%s{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wire\",\"name\":\"%s\",\"id\":%zu,"
            "\"pid\":%u,\"tid\":%u,\"ts\":", sep, nm, i + 1, m->dst, m->dst_qpn);
    us(o, m->t1);
    fprintf(o, "}");
  }
  fprintf(o, "\n]}\n");
  free(wrs.e);
  free(ctr);
  free(msgs);
  if (rc || ferror(o)) {
    snprintf(err, errlen, "writing the JSON failed");
    return -1;
  }
  return 0;
}
