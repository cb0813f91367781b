/*
 * prepost trace import: what the conversation says (tools/import/import.h): the diagnosis, the text and
 * JSON reports, the capture as a prepost trace, a scenario that reproduces its RNR pattern, and
 * the command line.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli_util.h"
#include "prepost/nic.h"
#include "prepost/trace.h"
#include "tools/import/import.h"

static const char *const nak_names[PP_IMP_NAKS] = {
    "PSN sequence error", "invalid request", "remote access error", "remote operational error",
    "invalid RD request"};
static const char *const nak_keys[PP_IMP_NAKS] = {"seq_err", "invalid_request", "remote_access",
                                                  "remote_operational", "invalid_rd"};

/* 41 ms, 640 us, 1.28 ms */
static const char *fmt_ns(uint64_t ns, char *b, size_t n)
{
  if (ns >= 1000000000u)
    snprintf(b, n, "%.3g s", ns / 1e9);
  else if (ns >= 1000000u)
    snprintf(b, n, "%.3g ms", ns / 1e6);
  else if (ns >= 1000u)
    snprintf(b, n, "%.3g us", ns / 1e3);
  else
    snprintf(b, n, "%" PRIu64 " ns", ns);
  return b;
}

static const char *host_name(const struct pp_import *m, uint32_t h, char *b, size_t n)
{
  if (h < m->nhosts)
    pp_ib_addr_format(&m->hosts[h], b, n);
  else
    snprintf(b, n, "?");
  return b;
}

/* "QP 0x11 (10.0.0.1)"; the requester's QPN is "?" until a response named it */
static const char *qp_name(const struct pp_import *m, const struct pp_imp_conn *c, bool resp,
                           char *b, size_t n)
{
  char h[64];
  host_name(m, resp ? c->resp_host : c->req_host, h, sizeof(h));
  if (!resp && !c->req_qpn_known)
    snprintf(b, n, "QP ? (%s)", h);
  else
    snprintf(b, n, "QP 0x%x (%s)", resp ? c->resp_qpn : c->req_qpn, h);
  return b;
}

struct sb {
  char *b;
  size_t n, o;
};

static void add(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct sb *s, const char *fmt, ...)
{
  if (s->o >= s->n)
    return;
  if (s->o)
    s->o += (size_t)snprintf(s->b + s->o, s->n - s->o, "; ");
  if (s->o >= s->n)
    return;
  va_list ap;
  va_start(ap, fmt);
  s->o += (size_t)vsnprintf(s->b + s->o, s->n - s->o, fmt, ap);
  va_end(ap);
}

static void diagnose_rnr(const struct pp_import *m, const struct pp_imp_conn *c, struct sb *s)
{
  char rq[96], rs[96], t1[32], t2[32];
  qp_name(m, c, true, rs, sizeof(rs));
  qp_name(m, c, false, rq, sizeof(rq));
  if (c->rnr_open) {
    char win[48] = "";
    if (c->rnr_open_naks > 1)
      snprintf(win, sizeof(win), " for %s", fmt_ns(c->rnr_last_ts - c->rnr_open_since, t1,
                                                   sizeof(t1)));
    if (pp_import_rnr_gave_up(c))
      add(s, "responder %s had no receive posted%s: %" PRIu64 " RNR NAK%s for PSN 0x%06x, "
             "requester %s exhausted rnr_retry (%" PRIu64 " retries, none after the last NAK)",
          rs, win, c->rnr_open_naks, c->rnr_open_naks == 1 ? "" : "s", c->rnr_open_psn, rq,
          c->rnr_open_retries);
    else
      add(s, "responder %s had no receive posted%s at the end of the capture: %" PRIu64
             " RNR NAK%s for PSN 0x%06x, requester %s still retrying",
          rs, win, c->rnr_open_naks, c->rnr_open_naks == 1 ? "" : "s", c->rnr_open_psn, rq);
  }
  uint64_t closed = c->rnr_streaks - (c->rnr_open ? 1 : 0);
  if (closed)
    add(s, "responder %s had no receive posted %" PRIu64 " times (%s in all, longest %s): %" PRIu64
           " RNR NAKs, %" PRIu64 " RNR retries by %s (RNR timer code %u)",
        rs, closed, fmt_ns(c->rnr_wait_ns, t1, sizeof(t1)),
        fmt_ns(c->rnr_wait_max_ns, t2, sizeof(t2)), c->rnr_naks, c->rnr_retries, rq,
        c->rnr_timer_code);
}

bool pp_import_rnr_gave_up(const struct pp_imp_conn *c)
{
  return c->rnr_open && c->rnr_open_retries < c->rnr_open_naks;
}

void pp_import_diagnose(const struct pp_import *m, const struct pp_imp_conn *c, char *buf,
                        size_t len)
{
  struct sb s = {buf, len, 0};
  buf[0] = '\0';
  char rq[96], rs[96];
  qp_name(m, c, true, rs, sizeof(rs));
  qp_name(m, c, false, rq, sizeof(rq));
  /* first: it explains the NAK (invalid request, remote operational error) that follows it */
  if (c->retrans_mismatch) {
    const struct pp_imp_mismatch *x = &c->mismatch;
    char more[96] = "";
    if (c->retrans_mismatch > 1)
      snprintf(more, sizeof(more), " (%" PRIu64 " resent packets differ from their originals)",
               c->retrans_mismatch);
    add(&s, "%s re-sent PSN 0x%06x as %s (%u bytes) where it first sent %s (%u bytes): a "
            "retransmission that does not repeat the original, so the responder sees every "
            "later message boundary shifted; that is a requester (NIC or driver) bug, not the "
            "application's%s",
        rq, x->psn, pp_ib_opcode_name(x->op1), x->len1, pp_ib_opcode_name(x->op0), x->len0,
        more);
  }
  if (c->rnr_naks)
    diagnose_rnr(m, c, &s);
  if (c->fatal_nak)
    add(&s, "responder %s NAKed PSN 0x%06x with %s: requester %s goes to the error state", rs,
        c->fatal_nak_psn, nak_names[c->fatal_nak_code < PP_IMP_NAKS ? c->fatal_nak_code : 3],
        rq);
  if (c->naks[0] && c->seq_retries)
    add(&s, "%" PRIu64 " PSN sequence error NAKs from %s: packets lost on the way, %s went "
            "back %" PRIu64 " times",
        c->naks[0], rs, rq, c->seq_retries);
  else if (c->naks[0])
    add(&s, "%" PRIu64 " PSN sequence error NAKs from %s that no go-back of their own followed%s",
        c->naks[0], rs, c->rnr_naks ? " (for the packets behind an RNR-NAKed one: the RNR "
                                      "retry resent them)" : "");
  if (c->timeout_retries)
    add(&s, "%s went back %" PRIu64 " times without a NAK (ACK timeouts: requests or ACKs "
            "lost)", rq, c->timeout_retries);
  if (c->psn_gaps)
    add(&s, "%" PRIu64 " PSN gaps in the requests to %s (%" PRIu64 " packets not on the wire "
            "where the capture was taken)", c->psn_gaps, rs, c->psn_gap_pkts);
  if (c->outstanding && !c->rnr_open)
    add(&s, "%s has %" PRIu64 " PSNs unacknowledged at the end of the capture (0x%06x..0x%06x)",
        rq, c->outstanding, (c->acked_psn + 1) & 0xffffff, (c->next_psn - 1) & 0xffffff);
}

/* ---------------------------------------------------------------- reports */

void pp_import_report(const struct pp_import *m, const char *name, FILE *out)
{
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  char d[32];
  fprintf(out, "%s: %s, %" PRIu64 " frames, %" PRIu64 " RoCE/IB packets (%" PRIu64
               " other, %" PRIu64 " not RC), %s\n",
          name, m->linktype, m->frames, m->ib_pkts, m->other_pkts, m->non_rc_pkts,
          fmt_ns(m->ib_pkts ? m->last_ts - m->first_ts : 0, d, sizeof(d)));
  fprintf(out, "totals: %" PRIu64 " messages (%" PRIu64 " acknowledged), %" PRIu64
               " bytes, %" PRIu64 " RNR NAKs, %" PRIu64 " retries (%" PRIu64 " RNR, %" PRIu64
               " sequence, %" PRIu64 " timeout), %" PRIu64 " NAKs, %" PRIu64 " PSN gaps\n",
          t.messages, t.delivered, t.bytes, t.rnr_naks, t.retries, t.rnr_retries, t.seq_retries,
          t.timeout_retries, t.naks, t.psn_gaps);
  for (size_t i = 0; i < m->nconns; i++) {
    const struct pp_imp_conn *c = &m->conns[i];
    char rq[96], rs[96], w[32], diag[2048];
    fprintf(out, "\n%s -> %s\n", qp_name(m, c, false, rq, sizeof(rq)),
            qp_name(m, c, true, rs, sizeof(rs)));
    fprintf(out, "  requests   %" PRIu64 " packets, %" PRIu64 " bytes, %" PRIu64
                 " messages (send %" PRIu64 ", send+imm %" PRIu64 ", write %" PRIu64
                 ", write+imm %" PRIu64 ", read %" PRIu64 "), %" PRIu64 " acknowledged\n",
            c->req_pkts, c->req_bytes, c->messages, c->by_op[PP_WR_SEND],
            c->by_op[PP_WR_SEND_WITH_IMM], c->by_op[PP_WR_RDMA_WRITE],
            c->by_op[PP_WR_RDMA_WRITE_WITH_IMM], c->by_op[PP_WR_RDMA_READ], c->delivered);
    fprintf(out, "  responses  %" PRIu64 " packets: %" PRIu64 " ACKs, %" PRIu64
                 " RNR NAKs, %" PRIu64 " NAKs, %" PRIu64 " read responses; last MSN %s%u\n",
            c->resp_pkts, c->acks, c->rnr_naks,
            c->naks[0] + c->naks[1] + c->naks[2] + c->naks[3] + c->naks[4], c->read_resp_pkts,
            c->msn_seen ? "" : "(none) ", c->msn);
    fprintf(out, "  retries    %" PRIu64 " (%" PRIu64 " RNR, %" PRIu64 " sequence, %" PRIu64
                 " timeout), %" PRIu64 " packets retransmitted, %" PRIu64 " PSN gaps\n",
            c->retries, c->rnr_retries, c->seq_retries, c->timeout_retries, c->retrans_pkts,
            c->psn_gaps);
    if (c->retrans_mismatch)
      fprintf(out, "  mismatched %" PRIu64 " retransmissions differ from the original (first: "
                   "PSN 0x%06x at %s, %s %u B first, %s %u B resent)\n",
              c->retrans_mismatch, c->mismatch.psn,
              fmt_ns(c->mismatch.ts - m->first_ts, w, sizeof(w)),
              pp_ib_opcode_name(c->mismatch.op0), c->mismatch.len0,
              pp_ib_opcode_name(c->mismatch.op1), c->mismatch.len1);
    if (c->rnr_naks)
      fprintf(out, "  RNR        waiting %s, RNR timer code %u\n",
              fmt_ns(c->rnr_wait_ns + (c->rnr_open ? c->rnr_last_ts - c->rnr_open_since : 0),
                     w, sizeof(w)),
              c->rnr_timer_code);
    fprintf(out, "  PSN        next 0x%06x, acknowledged through 0x%06x, %" PRIu64
                 " outstanding\n",
            c->next_psn, c->acked_psn, c->outstanding);
    pp_import_diagnose(m, c, diag, sizeof(diag));
    if (diag[0])
      fprintf(out, "  diagnosis: %s\n", diag);
  }
}

static void json_conn(const struct pp_import *m, const struct pp_imp_conn *c, FILE *out)
{
  char h[64], diag[2048];
  fprintf(out, "{\"requester\": {\"host\": ");
  pp_json_string(out, host_name(m, c->req_host, h, sizeof(h)));
  if (c->req_qpn_known)
    fprintf(out, ", \"qpn\": %u}", c->req_qpn);
  else
    fprintf(out, ", \"qpn\": null}");
  fprintf(out, ", \"responder\": {\"host\": ");
  pp_json_string(out, host_name(m, c->resp_host, h, sizeof(h)));
  fprintf(out, ", \"qpn\": %u}", c->resp_qpn);
  fprintf(out,
          ", \"request_packets\": %" PRIu64 ", \"request_bytes\": %" PRIu64
          ", \"messages\": %" PRIu64 ", \"message_bytes\": %" PRIu64 ", \"delivered\": %" PRIu64
          ", \"sends\": %" PRIu64 ", \"sends_imm\": %" PRIu64 ", \"writes\": %" PRIu64
          ", \"writes_imm\": %" PRIu64 ", \"reads\": %" PRIu64 ", \"response_packets\": %" PRIu64
          ", \"acks\": %" PRIu64 ", \"read_response_packets\": %" PRIu64
          ", \"read_response_bytes\": %" PRIu64,
          c->req_pkts, c->req_bytes, c->messages, c->message_bytes, c->delivered,
          c->by_op[PP_WR_SEND], c->by_op[PP_WR_SEND_WITH_IMM], c->by_op[PP_WR_RDMA_WRITE],
          c->by_op[PP_WR_RDMA_WRITE_WITH_IMM], c->by_op[PP_WR_RDMA_READ], c->resp_pkts, c->acks,
          c->read_resp_pkts, c->read_resp_bytes);
  uint64_t wait = c->rnr_wait_ns + (c->rnr_open ? c->rnr_last_ts - c->rnr_open_since : 0);
  fprintf(out,
          ", \"rnr_naks\": %" PRIu64 ", \"rnr_wait_ns\": %" PRIu64 ", \"rnr_wait_max_ns\": %" PRIu64
          ", \"rnr_streaks\": %" PRIu64 ", \"rnr_timer_code\": %u, \"rnr_unresolved\": %s, \"rnr_retry_exhausted\": %s"
          ", \"retries\": %" PRIu64 ", \"rnr_retries\": %" PRIu64 ", \"seq_retries\": %" PRIu64
          ", \"timeout_retries\": %" PRIu64 ", \"retransmitted_packets\": %" PRIu64
          ", \"psn_gaps\": %" PRIu64 ", \"psn_gap_packets\": %" PRIu64 ", \"naks\": {",
          c->rnr_naks, wait, c->rnr_wait_max_ns, c->rnr_streaks, c->rnr_timer_code,
          c->rnr_open ? "true" : "false", pp_import_rnr_gave_up(c) ? "true" : "false", c->retries, c->rnr_retries, c->seq_retries,
          c->timeout_retries, c->retrans_pkts, c->psn_gaps, c->psn_gap_pkts);
  for (int j = 0; j < PP_IMP_NAKS; j++)
    fprintf(out, "%s\"%s\": %" PRIu64, j ? ", " : "", nak_keys[j], c->naks[j]);
  fprintf(out, "}, \"retrans_mismatch\": %" PRIu64 ", \"retrans_mismatch_first\": ",
          c->retrans_mismatch);
  if (c->retrans_mismatch)
    fprintf(out, "{\"psn\": %u, \"ts_ns\": %" PRIu64 ", \"first_opcode\": \"%s\", "
                 "\"first_len\": %u, \"resent_opcode\": \"%s\", \"resent_len\": %u}",
            c->mismatch.psn, c->mismatch.ts - m->first_ts, pp_ib_opcode_name(c->mismatch.op0),
            c->mismatch.len0, pp_ib_opcode_name(c->mismatch.op1), c->mismatch.len1);
  else
    fprintf(out, "null");
  fprintf(out, ", \"msn\": ");
  if (c->msn_seen)
    fprintf(out, "%u", c->msn);
  else
    fprintf(out, "null");
  fprintf(out, ", \"next_psn\": %u, \"acked_psn\": %u, \"outstanding\": %" PRIu64
               ", \"unacked_psn\": ",
          c->next_psn, c->acked_psn, c->outstanding);
  if (c->outstanding)
    fprintf(out, "%u, \"last_unacked_psn\": %u", (c->acked_psn + 1) & 0xffffff,
            (c->next_psn - 1) & 0xffffff);
  else
    fprintf(out, "null, \"last_unacked_psn\": null");
  pp_import_diagnose(m, c, diag, sizeof(diag));
  fprintf(out, ", \"diagnosis\": ");
  pp_json_string(out, diag);
  fprintf(out, "}");
}

void pp_import_json(const struct pp_import *m, const char *name, FILE *out)
{
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  fprintf(out, "{\"capture\": ");
  pp_json_string(out, name);
  fprintf(out, ", \"linktype\": ");
  pp_json_string(out, m->linktype);
  fprintf(out,
          ", \"frames\": %" PRIu64 ", \"roce_packets\": %" PRIu64 ", \"other_packets\": %" PRIu64
          ", \"non_rc_packets\": %" PRIu64 ", \"unknown_opcodes\": %" PRIu64
          ", \"duration_ns\": %" PRIu64 ", \"messages\": %" PRIu64 ", \"delivered\": %" PRIu64
          ", \"bytes\": %" PRIu64 ", \"rnr_naks\": %" PRIu64 ", \"rnr_wait_ns\": %" PRIu64
          ", \"retries\": %" PRIu64 ", \"rnr_retries\": %" PRIu64 ", \"seq_retries\": %" PRIu64
          ", \"timeout_retries\": %" PRIu64 ", \"naks\": %" PRIu64 ", \"seq_naks\": %" PRIu64
          ", \"psn_gaps\": %" PRIu64 ", \"retransmitted_packets\": %" PRIu64
          ", \"retrans_mismatch\": %" PRIu64 ", \"hosts\": [",
          m->frames, m->ib_pkts, m->other_pkts, m->non_rc_pkts, m->unknown_ops,
          m->ib_pkts ? m->last_ts - m->first_ts : 0, t.messages, t.delivered, t.bytes,
          t.rnr_naks, t.rnr_wait_ns, t.retries, t.rnr_retries, t.seq_retries, t.timeout_retries,
          t.naks, t.seq_naks, t.psn_gaps, t.retrans_pkts, t.retrans_mismatch);
  for (size_t i = 0; i < m->nhosts; i++) {
    char h[64];
    fprintf(out, "%s", i ? ", " : "");
    pp_json_string(out, host_name(m, (uint32_t)i, h, sizeof(h)));
  }
  fprintf(out, "], \"qps\": [");
  for (size_t i = 0; i < m->nconns; i++) {
    fprintf(out, "%s", i ? ", " : "");
    json_conn(m, &m->conns[i], out);
  }
  fprintf(out, "]}\n");
}

/* ---------------------------------------------------------------- as a prepost trace */

struct stamp {
  uint64_t t;
  size_t ev;
  int rx; /* 0 tx, 1 rx: a packet leaves before it arrives */
};

static int stamp_cmp(const void *a, const void *b)
{
  const struct stamp *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  if (x->ev != y->ev)
    return x->ev < y->ev ? -1 : 1;
  return x->rx - y->rx;
}

static int sink_file(void *ctx, const void *buf, size_t len)
{
  return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

static int write_events(struct pp_trace_writer *w, const struct pp_import *m, uint64_t *ids)
{
  struct stamp *s = malloc(2 * m->nev * sizeof(*s) + 1);
  if (!s)
    return -1;
  for (size_t i = 0; i < m->nev; i++) {
    s[2 * i] = (struct stamp){m->ev[i].t0, i, 0};
    s[2 * i + 1] = (struct stamp){m->ev[i].t1, i, 1};
  }
  qsort(s, 2 * m->nev, sizeof(*s), stamp_cmp);
  for (size_t i = 0; i < 2 * m->nev; i++) {
    const struct pp_imp_event *e = &m->ev[s[i].ev];
    uint64_t now = s[i].t - m->first_ts;
    if (s[i].rx) {
      pp_trace_pkt_rx_id(w, now, e->dst_host, ids[s[i].ev]);
      continue;
    }
    /* wire bytes: RoCEv2/IPv4 framing of each packet (Ethernet 14 + FCS 4, IPv4 20, UDP 8,
     * BTH 12, ICRC 4) plus the payload */
    struct pp_trace_pkt k = {.kind = e->kind, .opcode = e->opcode, .src_rank = e->src_host,
                             .dst_rank = e->dst_host, .src_qpn = e->src_qpn,
                             .dst_qpn = e->dst_qpn, .psn = e->psn, .npkts = e->npkts,
                             .len = e->len, .syndrome = e->syndrome, .has_ack = e->has_ack,
                             .ack_psn = e->ack_psn, .remote_addr = e->va, .rkey = e->rkey,
                             .imm = e->imm, .wire_bytes = (uint64_t)e->npkts * 62 + e->len};
    ids[s[i].ev] = pp_trace_pkt_tx_id(w, now, &k);
  }
  free(s);
  return 0;
}

int pp_import_trace(const struct pp_import *m, const char *name, const char *path,
                    const char *version, char *err, size_t errlen)
{
  FILE *f = fopen(path, "wb");
  if (!f) {
    snprintf(err, errlen, "cannot write '%s'", path);
    return -1;
  }
  struct pp_trace_info info = {.version = version, .backend = "pcap", .scenario = name,
                               .nranks = m->nhosts ? (uint32_t)m->nhosts : 1,
                               .packets = PP_TRACE_PACKETS_ALL};
  struct pp_trace_writer *w = NULL;
  uint64_t *ids = calloc(m->nev + 1, sizeof(*ids));
  enum pp_status st = ids ? pp_trace_writer_create(sink_file, f, &info, &w) : PP_NOMEM;
  for (size_t i = 0; st == PP_OK && i < m->nhosts; i++) {
    char key[48], h[64];
    snprintf(key, sizeof(key), "import.host.%zu", i);
    pp_ib_addr_format(&m->hosts[i], h, sizeof(h));
    st = pp_trace_kv_str(w, key, h);
  }
  if (st == PP_OK)
    st = pp_trace_kv_str(w, "import.linktype", m->linktype);
  if (st == PP_OK)
    st = pp_trace_kv_u64(w, "import.origin_ns", m->first_ts);
  if (st == PP_OK)
    st = pp_trace_begin(w);
  if (st == PP_OK && write_events(w, m, ids))
    st = PP_NOMEM;
  if (st == PP_OK)
    st = pp_trace_finish(w);
  pp_trace_writer_destroy(w);
  free(ids);
  if (fclose(f) != 0 && st == PP_OK)
    st = PP_IO;
  if (st != PP_OK) {
    snprintf(err, errlen, "writing the trace '%s' failed (%s)", path, pp_status_name(st));
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- as a scenario */

static int u64_cmp(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The application's offered interval: the median gap between the first messages. */
static uint64_t offered_interval(const struct pp_imp_conn *c)
{
  uint64_t g[64];
  uint32_t n = 0;
  for (uint32_t i = 1; i < c->nmsg_ts; i++)
    g[n++] = c->msg_ts[i] - c->msg_ts[i - 1];
  if (!n)
    return 0;
  qsort(g, n, sizeof(g[0]), u64_cmp);
  return g[n / 2];
}

static const struct pp_imp_conn *busiest(const struct pp_import *m)
{
  const struct pp_imp_conn *b = NULL;
  for (size_t i = 0; i < m->nconns; i++) {
    const struct pp_imp_conn *c = &m->conns[i];
    if (!c->messages)
      continue;
    if (!b || c->rnr_naks > b->rnr_naks ||
        (c->rnr_naks == b->rnr_naks && c->messages > b->messages))
      b = c;
  }
  return b;
}

int pp_import_scenario(const struct pp_import *m, const char *name, FILE *out, char *err,
                       size_t errlen)
{
  const struct pp_imp_conn *c = busiest(m);
  if (!c) {
    snprintf(err, errlen, "no RC request messages in the capture: nothing to reproduce");
    return -1;
  }
  char rq[96], rs[96], diag[2048];
  qp_name(m, c, false, rq, sizeof(rq));
  qp_name(m, c, true, rs, sizeof(rs));
  pp_import_diagnose(m, c, diag, sizeof(diag));
  /* every message begun: a refused one may never have been finished on the wire */
  uint64_t msgs = c->started > c->messages ? c->started : c->messages;
  if (msgs > PP_MAX_MESSAGES)
    msgs = PP_MAX_MESSAGES;
  uint64_t size = c->message_bytes / c->messages;
  uint64_t interval = offered_interval(c);
  /* RNR: the receiver had rq_depth buffers (what it accepted before the first RNR NAK) and
   * gave one back `consume` after it received it: the first refusal ended when the first
   * message's buffer came back. A refusal that never ended: longer than the capture. */
  uint64_t depth = c->rnr_naks ? c->delivered_before_rnr : msgs;
  uint64_t consume = 0;
  unsigned rnr_retry = 7;
  if (c->rnr_naks && c->rnr_ended)
    consume = c->rnr_end_first - c->first_msg_ts;
  else if (c->rnr_naks)
    consume = 2 * (c->rnr_last_ts - c->first_msg_ts) + 1000000;
  if (pp_import_rnr_gave_up(c))
    rnr_retry = c->rnr_open_retries < 6 ? (unsigned)c->rnr_open_retries : 6;
  if (depth < 1)
    depth = 1;
  if (depth > PP_MAX_QUEUE_DEPTH)
    depth = PP_MAX_QUEUE_DEPTH;
  uint64_t sq = msgs < PP_MAX_QUEUE_DEPTH ? msgs : PP_MAX_QUEUE_DEPTH;
  uint64_t span = m->last_ts - m->first_ts;
  fprintf(out, "# Made by `prepost trace import --pcap %s --scenario-out`: the pattern of\n"
               "# %s -> %s, %" PRIu64 " messages of %" PRIu64 " bytes on average\n"
               "# (%" PRIu64 "..%" PRIu64 "), %" PRIu64 " RNR NAKs (timer code %u).\n",
          name, rq, rs, c->messages, size, c->size_min, c->size_max, c->rnr_naks,
          c->rnr_timer_code);
  if (diag[0])
    fprintf(out, "# Diagnosis: %s\n", diag);
  fprintf(out, "# Inferred: interval = the median gap between the first messages; rq_depth = the\n"
               "# messages accepted before the first RNR NAK; consume = from the first message to\n"
               "# the end of the first RNR window (the receiver's posting gap); rnr_retry = the\n"
               "# retries of a refusal the requester gave up on (else 7); min_rnr_timer = the RNR\n"
               "# NAKs' timer code. Sends stand for every opcode (RNR concerns receives only).\n");
  fprintf(out, "name: import-%s\nseed: 1\nranks: 2\nplatform: platforms/roce-100g-2host.xml\n"
               "nic: nics/cx6-roce-100g.yaml\nprotocol: naive\n\n",
          c->rnr_naks ? "rnr" : "traffic");
  fprintf(out, "workload:\n  pattern: pair\n  messages: %" PRIu64 "\n  size: %" PRIu64
               "\n  interval: %" PRIu64 "ns\n  consume: %" PRIu64 "ns\n",
          msgs, size ? size : 1, interval, consume);
  if (consume)
    fprintf(out, "  slow_ranks: [1]\n");
  fprintf(out, "\nqp:\n  min_rnr_timer: %u\n  rnr_retry: %u\n  timeout: 14\n  retry_cnt: 7\n"
               "  sq_depth: %" PRIu64 "\n  rq_depth: %" PRIu64 "\n\n",
          c->rnr_naks ? c->rnr_timer_code : 1, rnr_retry, sq ? sq : 1, depth);
  fprintf(out, "limits:\n  max_sim_time: %" PRIu64 "ns\n",
          span * 20 + consume * 4 + 1000000000u);
  return ferror(out) ? (snprintf(err, errlen, "writing the scenario failed"), -1) : 0;
}

/* ---------------------------------------------------------------- prepost trace import */

static const char *const usage =
    "usage: prepost trace import --pcap FILE [--json] [-o TRACE] [--scenario-out FILE]\n"
    "                            [-h|--help]\n"
    "\n"
    "Reads a packet capture (pcap or pcapng: tcpdump -i NETDEV|any, Wireshark, ibdump) of RoCEv2\n"
    "(UDP 4791, IPv4/IPv6, Ethernet or Linux cooked), RoCEv1 or native InfiniBand, rebuilds each\n"
    "RC QP's conversation and prints per-QP statistics and a diagnosis.\n"
    "  --json              one JSON object: totals (messages, rnr_naks, retries, ...) and \"qps\"\n"
    "  -o TRACE            also write the capture as a prepost trace (hosts as ranks, packets as\n"
    "                      pkt_tx/pkt_rx): `prepost trace export --perfetto/--svg/--pcap TRACE`\n"
    "  --scenario-out FILE a scenario reproducing the RNR pattern in simulation (`prepost run`)\n"
    "Exit codes: 0 read, 2 usage error or a capture that is malformed, truncated or unreadable.\n";

int pp_cli_trace_import(int argc, char **argv, const char *version)
{
  const char *pcap = NULL, *trace = NULL, *scen = NULL;
  bool json = false;
  enum { I_PCAP = 256, I_SCEN, I_JSON };
  static const struct option opts[] = {{"pcap", required_argument, NULL, I_PCAP},
                                       {"scenario-out", required_argument, NULL, I_SCEN},
                                       {"json", no_argument, NULL, I_JSON},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  struct pp_cli_opts g = {.argc = argc, .argv = argv, .shorts = "ho:", .longs = opts,
                          .who = "prepost trace import", .usage = usage};
  int c;
  while ((c = pp_cli_next(&g)) != PP_CLI_END) {
    switch (c) {
    case PP_CLI_BAD:
      return 2;
    case 'h':
      return fputs(usage, stdout), 0;
    case I_PCAP:
      pcap = g.arg;
      break;
    case 'o':
      trace = g.arg;
      break;
    case I_SCEN:
      scen = g.arg;
      break;
    default:
      json = true;
    }
  }
  if (g.rest < argc)
    return pp_cli_usage_error("prepost trace import", usage, "unexpected argument '%s'",
                              argv[g.rest]);
  if (!pcap)
    return pp_cli_usage_error("prepost trace import", usage, "%s", "import needs --pcap FILE");
  struct pp_import *m;
  char err[1024];
  if (pp_import_pcap(pcap, &m, err, sizeof(err))) {
    fprintf(stderr, "prepost: %s\n", err);
    return 2;
  }
  const char *base = strrchr(pcap, '/') ? strrchr(pcap, '/') + 1 : pcap;
  int rc = 0;
  if (trace && pp_import_trace(m, base, trace, version, err, sizeof(err)))
    rc = 2;
  if (!rc && scen) {
    FILE *f = fopen(scen, "w");
    if (!f)
      snprintf(err, sizeof(err), "cannot write '%s'", scen), rc = 2;
    else if (pp_import_scenario(m, base, f, err, sizeof(err)))
      rc = 2;
    if (f && fclose(f) != 0 && !rc)
      snprintf(err, sizeof(err), "writing '%s' failed", scen), rc = 2;
  }
  if (rc)
    fprintf(stderr, "prepost: %s\n", err);
  else if (json)
    pp_import_json(m, pcap, stdout);
  else
    pp_import_report(m, pcap, stdout);
  pp_import_free(m);
  return rc;
}
