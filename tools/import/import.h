/* prepost trace import --pcap: a packet capture of RoCEv2 (UDP 4791 over Ethernet, Linux cooked
 * SLL/SLL2 or raw IP; IPv4 and IPv6), RoCEv1 (ethertype 0x8915) or native InfiniBand
 * (LINKTYPE_INFINIBAND) read through libpcap (pcap and pcapng), each RC connection's conversation
 * rebuilt from its BTH/RETH/AETH/ImmDt headers (IBTA vol. 1, chapter 9), per-QP statistics, a
 * diagnosis, and from it a prepost trace (traces/FORMAT.md: pkt_tx/pkt_rx records, so that
 * `prepost trace export --perfetto/--svg/--pcap` draw it) and a scenario that reproduces an RNR
 * pattern in simulation. README.md (Traces) documents the command, traces/FORMAT.md the trace. */
#ifndef PP_TOOLS_IMPORT_H
#define PP_TOOLS_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- one frame (import_decode.c) */

/* pcap link types the decoder reads */
enum {
  PP_LT_ETHERNET = 1,
  PP_LT_RAW = 101,
  PP_LT_LINUX_SLL = 113,
  PP_LT_IPV4 = 228,
  PP_LT_IPV6 = 229,
  PP_LT_INFINIBAND = 247,
  PP_LT_LINUX_SLL2 = 276,
};

/* A host address: IPv4 (as ::ffff:a.b.c.d), IPv6 or GID, or an InfiniBand LID (fam 'L'). */
struct pp_ib_addr {
  uint8_t fam; /* 4, 6, 'L' */
  uint8_t a[16];
};

/* The transport headers of one packet. */
struct pp_ib_pkt {
  struct pp_ib_addr src, dst;
  uint8_t opcode; /* BTH opcode, transport in the top 3 bits (0 = RC) */
  bool se, ackreq;
  uint8_t pad;
  uint16_t pkey;
  uint32_t dqpn, psn;
  bool has_reth, has_aeth, has_imm, has_ieth, has_atomic, has_atomic_ack;
  uint64_t va;
  uint32_t rkey, dma_len;
  uint8_t syndrome; /* AETH */
  uint32_t msn;     /* AETH */
  uint32_t imm;     /* ImmDt or IETH */
  uint32_t payload; /* bytes after the headers, before pad and ICRC */
};

/* Decodes one frame of link type `lt`, `caplen` bytes captured of `len`. 1: a RoCE/IB packet in
 * *k; 0: some other packet (not UDP 4791, another ethertype, an IP fragment); -1: a RoCE/IB
 * packet whose lengths do not add up or whose headers the snapshot cut, with why in `why`.
 * Reads nothing outside p[0, caplen). */
int pp_ib_decode(int lt, const uint8_t *p, uint32_t caplen, uint32_t len, struct pp_ib_pkt *k,
                 char *why, size_t whylen);
/* true for link types pp_ib_decode knows */
bool pp_ib_linktype_known(int lt);
/* "10.0.0.1", "fe80::1", "lid 0x0001" */
void pp_ib_addr_format(const struct pp_ib_addr *a, char *buf, size_t len);
/* "SEND_ONLY", "ACKNOWLEDGE", ... ("RC_0x15" for one it does not name) */
const char *pp_ib_opcode_name(uint8_t opcode);

/* ---------------------------------------------------------------- the conversation (import.c) */

enum { PP_IMP_NAKS = 5 }; /* AETH NAK codes: 0 PSN sequence error, 1 invalid request, 2 remote
                             access error, 3 remote operational error, 4 invalid RD request */

/* One direction of an RC connection: a requester QP and the responder QP it sends to. */
struct pp_imp_conn {
  uint32_t req_host, resp_host; /* indices into pp_import.hosts */
  uint32_t req_qpn, resp_qpn;   /* req_qpn: from the responses' destination QP (when seen) */
  bool req_qpn_known;
  /* requests */
  uint64_t req_pkts, req_bytes;       /* every request packet (bytes: payload) */
  uint64_t messages, message_bytes;   /* distinct request messages sent (not retransmissions) */
  uint64_t started;                   /* messages begun, also those never finished */
  uint64_t by_op[5];                  /* messages by enum pp_wr_opcode */
  uint64_t imm_msgs;                  /* with immediate data */
  uint64_t delivered;                 /* messages acknowledged by the responder */
  uint64_t retrans_pkts;              /* request packets of a PSN sent before */
  uint64_t retries, rnr_retries, seq_retries, timeout_retries; /* go-backs, by cause */
  uint64_t psn_gaps, psn_gap_pkts;    /* PSNs skipped on the wire (lost before the capture) */
  /* SEND and RDMA WRITE packets resent with another opcode or payload length than their PSN
   * first carried (an RC requester must repeat a request exactly): the first of them */
  uint64_t retrans_mismatch;
  struct pp_imp_mismatch { uint64_t ts; uint32_t psn, len0, len1; uint8_t op0, op1; } mismatch;
  /* responses */
  uint64_t resp_pkts, acks, rnr_naks, naks[PP_IMP_NAKS], read_resp_pkts, read_resp_bytes;
  uint32_t msn;                       /* the last AETH MSN */
  bool msn_seen;
  /* RNR */
  uint64_t rnr_wait_ns, rnr_wait_max_ns, rnr_streaks;
  uint32_t rnr_timer_code;            /* the last RNR NAK's timer code */
  uint32_t rnr_timer_mask;            /* codes seen, bit per code */
  bool rnr_open;                      /* the last streak never ended */
  bool rnr_ended;                     /* one streak ended (rnr_end_first) */
  uint64_t rnr_open_naks, rnr_open_since;
  uint32_t rnr_open_psn;
  uint64_t first_rnr_ts;              /* first RNR NAK */
  uint64_t delivered_before_rnr;      /* messages acknowledged before the first RNR NAK */
  uint64_t first_ts, last_ts, last_req_ts, last_resp_ts;
  uint64_t first_msg_ts, rnr_end_first;  /* first message; end of the first RNR streak */
  uint64_t size_min, size_max;
  bool fatal_nak;                     /* a NAK other than a sequence error: the QP goes to error */
  uint32_t fatal_nak_code, fatal_nak_psn;
  uint64_t rnr_last_ts;               /* the last RNR NAK */
  /* the last PSN state */
  bool psn_known, any_ack;
  uint32_t next_psn, acked_psn;       /* next PSN the requester will use; acknowledged through */
  uint64_t outstanding;               /* PSNs sent and not acknowledged at the end */
  /* internal: the walk (import.c) */
  uint32_t prev_psn, read_slack;
  bool seen_req, prev_retrans, pend_open, acked_prev;
  int cause;                          /* of the next go-back: 1 RNR NAK, 2 sequence NAK */
  uint64_t message_bytes_acc;
  uint32_t miss_lo[16], miss_n[16];   /* PSN ranges of the gaps not filled yet */
  size_t nmiss;
  uint64_t rnr_open_retries;          /* retries after the open streak's NAKs */
  uint64_t train_gap_max;             /* the largest gap within the current retransmission */
  uint64_t msg_ts[64];                /* when the first 64 messages were sent: the offered rate */
  uint32_t nmsg_ts;
  struct pp_imp_pend { uint64_t t0, t1; uint32_t psn, npkts, len, opcode, rkey, imm; uint64_t va;
                       bool resp; } pend[2];
  uint64_t *ends;                     /* ring of outstanding message end PSNs */
  size_t ends_head, ends_n, ends_cap;
  /* what recent PSNs first carried, indexed by PSN modulo sent_cap (import.c, sent_record) */
  struct pp_imp_sent { uint32_t psn, len; uint8_t opcode; bool used; } *sent;
  size_t sent_cap;
};

/* A packet or message of the conversation for the trace (pkt_tx at t0, pkt_rx at t1). */
struct pp_imp_event {
  uint64_t t0, t1;
  uint32_t src_host, dst_host, src_qpn, dst_qpn;
  uint32_t kind;   /* enum pp_trace_pkt_kind */
  uint32_t opcode; /* enum pp_wr_opcode */
  uint32_t psn, npkts, len, syndrome, ack_psn, rkey, imm;
  bool has_ack;
  uint64_t va;
};

struct pp_import {
  char linktype[32];
  uint64_t frames, ib_pkts, other_pkts, non_rc_pkts, unknown_ops;
  uint64_t first_ts, last_ts; /* ns since the epoch, of the RoCE/IB packets */
  struct pp_ib_addr *hosts;
  size_t nhosts;
  struct pp_imp_conn *conns;
  size_t nconns;
  struct pp_imp_event *ev;
  size_t nev, evcap;
};

/* Limits: a capture beyond them is refused with a sentence (never an abort). */
#define PP_IMPORT_MAX_HOSTS 1024u
#define PP_IMPORT_MAX_CONNS 65536u
#define PP_IMPORT_MAX_EVENTS (16u << 20)
#define PP_IMPORT_MAX_OUTSTANDING (1u << 20)
/* Per connection, how far back a retransmission is compared with its PSN's first request
 * packet: a ring grown from 64 PSNs to this as the connection sends (48 KiB at most, and never
 * more than 4 slots per packet of the connection). */
#define PP_IMPORT_SENT_PSNS 4096u

/* Reads a capture (pcap or pcapng) from `path` or an open FILE (closed by the call). 0, or -1
 * with "PATH: frame N: ..." in err (a malformed or truncated capture, a link type it does not
 * read, a limit). *out is freed with pp_import_free. */
int pp_import_pcap(const char *path, struct pp_import **out, char *err, size_t errlen);
int pp_import_pcap_fp(FILE *f, const char *name, struct pp_import **out, char *err,
                      size_t errlen);
void pp_import_free(struct pp_import *m);

/* Totals over every connection. */
struct pp_imp_totals {
  uint64_t messages, delivered, bytes, rnr_naks, retries, rnr_retries, seq_retries,
      timeout_retries, naks, seq_naks, psn_gaps, rnr_wait_ns, retrans_pkts, read_resp_pkts,
      retrans_mismatch;
};
void pp_import_totals(const struct pp_import *m, struct pp_imp_totals *t);

/* The diagnosis of one connection in the hang report's words, "" when nothing is wrong. */
void pp_import_diagnose(const struct pp_import *m, const struct pp_imp_conn *c, char *buf,
                        size_t len);

/* The connection's last RNR refusal never ended and the requester sent no retry after its last
 * RNR NAK: it exhausted rnr_retry (or the capture ended within the RNR timer). */
bool pp_import_rnr_gave_up(const struct pp_imp_conn *c);

/* ---------------------------------------------------------------- outputs (import_out.c) */

void pp_import_report(const struct pp_import *m, const char *name, FILE *out);
void pp_import_json(const struct pp_import *m, const char *name, FILE *out);
/* A prepost trace of the capture (hosts as ranks, packets as pkt_tx/pkt_rx, trace.backend
 * "pcap"). 0, or -1 with err. */
int pp_import_trace(const struct pp_import *m, const char *name, const char *path,
                    const char *version, char *err, size_t errlen);
/* A scenario reproducing the capture's RNR pattern (the connection with the most RNR NAKs, or
 * the busiest). 0, or -1 with err (no RC traffic to model). */
int pp_import_scenario(const struct pp_import *m, const char *name, FILE *out, char *err,
                       size_t errlen);

/* prepost trace import ... (argv after "import") */
int pp_cli_trace_import(int argc, char **argv, const char *version);

#endif
