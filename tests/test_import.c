/*
 * prepost trace import --pcap (tools/import/import.h): the simulator's own pcap export of several
 * scenarios imports with the counts of the run's JSON (messages delivered, RNR NAKs, retries);
 * one hand-built conversation (SEND, RNR NAK and retry, WRITE with immediate, READ and its
 * responses, a PSN gap, a sequence-error NAK and the go-back) gives the same statistics in every
 * link type and file format the importer reads (pcap and pcapng; Ethernet with IPv4 and with a
 * VLAN tag and IPv6, Linux cooked SLL and SLL2, raw IP, RoCEv1, native InfiniBand), and tshark
 * decodes the same opcodes and PSNs; retransmissions that differ from what their PSN first
 * carried are counted (and identical go-backs, READ retries and stale ring slots are not); the
 * captures of rxe (tests/captures) import as their runs reported, and the one of rxe's retry
 * race names its zero-length resend; malformed and truncated captures fail with a sentence and
 * exit 2, and seeded mutations of real captures (through libpcap, and frame by frame through the
 * decoder on exact-size buffers) never read out of bounds (run under the asan preset).
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "prepost/prng.h"
#include "tools/import/import.h"
#include "scratch.h"

static char dir[64];

static void setup(void)
{
  scratch_make(dir, sizeof(dir), "import");
}

static void teardown(void)
{
  scratch_remove(dir);
}

TestSuite(import, .init = setup, .fini = teardown);

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
  char body[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "cd '%s' && P='%s' && M='%s/scenarios' && %s", dir, PREPOST_CLI,
           PREPOST_MODELS_DIR, body);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s", body);
  return WEXITSTATUS(st);
}

/* The file NAME in the scratch directory, whole. */
static char *slurp(const char *name, size_t *n)
{
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return scratch_slurp(path, n);
}

/* The first `"key": N` of a JSON text. */
static uint64_t json_u64(const char *j, const char *key)
{
  char k[64];
  snprintf(k, sizeof(k), "\"%s\": ", key);
  const char *p = strstr(j, k);
  cr_assert_not_null(p, "no %s in %s", key, j);
  return strtoull(p + strlen(k), NULL, 10);
}

static struct pp_import *import_file(const char *name)
{
  char path[256], err[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  struct pp_import *m;
  cr_assert_eq(pp_import_pcap(path, &m, err, sizeof(err)), 0, "%s", err);
  return m;
}

/* ---------------------------------------------------------------- the simulator's captures */

static void roundtrip(const char *scenario, const char *extra, uint64_t *rnr_out)
{
  int rc = sh("$P run $M/%s.yaml %s --trace t.trace --trace-packets --json > run.json", scenario,
              extra);
  cr_assert(rc == 0 || rc == 1, "%s ran (exit %d)", scenario, rc);
  cr_assert_eq(sh("$P trace export --pcap t.trace -o t.pcap"), 0);
  char *run = slurp("run.json", NULL);
  struct pp_import *m = import_file("t.pcap");
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  cr_expect_eq(t.delivered, json_u64(run, "messages"), "%s: messages", scenario);
  cr_expect_eq(t.rnr_naks, json_u64(run, "rnr_naks"), "%s: rnr_naks", scenario);
  cr_expect_eq(t.retries, json_u64(run, "retries"), "%s: retries", scenario);
  cr_expect_eq(t.retrans_mismatch, 0, "%s: the simulator resends what it sent", scenario);
  /* the CLI's JSON says the same */
  cr_assert_eq(sh("$P trace import --pcap t.pcap --json > imp.json"), 0);
  char *imp = slurp("imp.json", NULL);
  cr_expect_eq(json_u64(imp, "rnr_naks"), t.rnr_naks);
  cr_expect_eq(json_u64(imp, "retries"), t.retries);
  cr_expect_eq(json_u64(imp, "delivered"), t.delivered);
  if (rnr_out)
    *rnr_out = t.rnr_naks;
  pp_import_free(m);
  free(run);
  free(imp);
}

Test(import, simulator_capture_rnr_slow_consumer, .timeout = 120)
{
  uint64_t rnr = 0;
  roundtrip("rnr-slow-consumer", "", &rnr);
  cr_assert_gt(rnr, 100, "the slow consumer is RNR-NAKed");
  struct pp_import *m = import_file("t.pcap");
  cr_assert_eq(m->nconns, 1);
  char diag[2048];
  pp_import_diagnose(m, &m->conns[0], diag, sizeof(diag));
  cr_assert_not_null(strstr(diag, "had no receive posted"), "%s", diag);
  cr_assert_not_null(strstr(diag, "RNR timer code 1"), "%s", diag);
  cr_assert(m->conns[0].req_qpn_known, "the requester's QPN comes from the ACKs");
  cr_assert_gt(m->conns[0].rnr_wait_ns, 0);
  cr_assert_eq(m->conns[0].outstanding, 0, "everything acknowledged at the end");
  pp_import_free(m);
}

Test(import, simulator_capture_retry_exhausted, .timeout = 120)
{
  roundtrip("rnr-slow-consumer-retry0", "", NULL);
  roundtrip("rnr-slow-consumer-retry3", "", NULL);
  struct pp_import *m = import_file("t.pcap");
  char diag[2048];
  pp_import_diagnose(m, &m->conns[0], diag, sizeof(diag));
  cr_assert(pp_import_rnr_gave_up(&m->conns[0]));
  cr_assert_not_null(strstr(diag, "4 RNR NAKs"), "%s", diag);
  cr_assert_not_null(strstr(diag, "exhausted rnr_retry (3 retries"), "%s", diag);
  pp_import_free(m);
}

Test(import, simulator_capture_lossy_and_others, .timeout = 180)
{
  roundtrip("lossy", "", NULL);
  struct pp_import *m = import_file("t.pcap");
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  cr_assert_gt(t.seq_retries, 0, "lost requests: the requester goes back at a sequence-error NAK");
  cr_assert_gt(t.psn_gaps, 0, "lost requests are PSN gaps on the wire");
  pp_import_free(m);
  roundtrip("lossy", "--seed 7", NULL);
  roundtrip("fast-consumer", "", NULL);
  roundtrip("parity-rnr", "", NULL);
}

/* Rendezvous pulls with RDMA READ: requests, responses and what they acknowledge. */
Test(import, simulator_capture_reads, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-rndv.yaml --trace t.trace --trace-packets "
                  "--json > run.json"), 0);
  cr_assert_eq(sh("$P trace export --pcap t.trace -o t.pcap"), 0);
  struct pp_import *m = import_file("t.pcap");
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  uint64_t reads = 0;
  for (size_t i = 0; i < m->nconns; i++)
    reads += m->conns[i].by_op[4];
  cr_assert_gt(reads, 0);
  cr_assert_gt(t.read_resp_pkts, 0);
  cr_assert_eq(t.rnr_naks, 0, "rendezvous never sends into an unposted receive");
  cr_assert_eq(t.messages, t.delivered, "every message acknowledged, the READs by their data");
  pp_import_free(m);
}

/* The import as a trace: the exports draw it, and the pcap export of it imports the same. */
Test(import, trace_out_exports, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry3.yaml --trace t.trace --trace-packets "
                  "> /dev/null; $P trace export --pcap t.trace -o t.pcap"), 0);
  cr_assert_eq(sh("$P trace import --pcap t.pcap -o imp.trace > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --perfetto imp.trace -o imp.json"), 0);
  cr_assert_eq(sh("python3 -c 'import json,sys; d=json.load(open(\"imp.json\")); "
                  "sys.exit(0 if any(\"RNR\" in str(e.get(\"name\",\"\")) for e in "
                  "d[\"traceEvents\"]) else 1)'"), 0, "Perfetto shows the RNR NAKs");
  cr_assert_eq(sh("$P trace export --svg imp.trace -o imp.svg"), 0);
  cr_assert_eq(sh("python3 -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(\"imp.svg\")'"),
               0);
  cr_assert_eq(sh("grep -c RNR imp.svg > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --pcap imp.trace -o re.pcap"), 0);
  struct pp_import *a = import_file("t.pcap"), *b = import_file("re.pcap");
  struct pp_imp_totals ta, tb;
  pp_import_totals(a, &ta);
  pp_import_totals(b, &tb);
  cr_assert_eq(ta.messages, tb.messages);
  cr_assert_eq(ta.delivered, tb.delivered);
  cr_assert_eq(ta.rnr_naks, tb.rnr_naks);
  cr_assert_eq(ta.retries, tb.retries);
  pp_import_free(a);
  pp_import_free(b);
}

/* The scenario of a capture reproduces its RNR outcome in kind. */
Test(import, scenario_out_reproduces_rnr, .timeout = 180)
{
  const char *sc[] = {"rnr-slow-consumer", "rnr-slow-consumer-retry0",
                      "rnr-slow-consumer-retry3"};
  for (size_t i = 0; i < 3; i++) {
    int rc0 = sh("$P run $M/%s.yaml --trace t.trace --trace-packets --json > run.json", sc[i]);
    cr_assert_eq(sh("$P trace export --pcap t.trace -o t.pcap && $P trace import --pcap t.pcap "
                    "--scenario-out s.yaml > /dev/null"), 0);
    int rc1 = sh("$P run s.yaml --json > sim.json");
    cr_assert_eq(rc1, rc0, "%s: the same exit (completion or error completions)", sc[i]);
    char *a = slurp("run.json", NULL), *b = slurp("sim.json", NULL);
    cr_assert_gt(json_u64(b, "rnr_naks"), 0, "%s: RNR NAKs in the reproduction", sc[i]);
    cr_assert_eq(strstr(a, "RNR_RETRY_EXC_ERR") != NULL, strstr(b, "RNR_RETRY_EXC_ERR") != NULL,
                 "%s: RNR_RETRY_EXC_ERR in both or neither", sc[i]);
    free(a);
    free(b);
  }
  cr_assert_eq(sh("grep -q '^  min_rnr_timer: 1$' s.yaml && grep -q '^  rnr_retry: 3$' s.yaml && "
                  "grep -q '^  rq_depth: 8$' s.yaml"), 0, "QP attributes from the wire");
}

/* The pcap export as a capture tool reads it: MSN is the responder's count of completed
 * messages (the four RNR NAKs for the refused SEND of retry3 all carry 8, the messages it had
 * accepted), and the packets of a multi-packet message follow one another at line rate. */
Test(import, export_msn_and_line_rate, .timeout = 120)
{
  if (system("command -v tshark > /dev/null 2>&1") != 0)
    cr_skip_test("tshark is not installed (tools/lib.sh installs it)");
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry3.yaml --trace t.trace --trace-packets "
                  "> /dev/null; $P trace export --pcap t.trace -o t.pcap"), 0);
  cr_assert_eq(sh("tshark -n -r t.pcap -Y 'infiniband.aeth.syndrome == 0x21' -T fields "
                  "-e infiniband.aeth.msn 2>/dev/null | sort -u > msn.txt"), 0);
  char *msn = slurp("msn.txt", NULL);
  cr_assert_str_eq(msn, "8\n", "every RNR NAK says 8 messages completed");
  free(msn);
  struct pp_import *m = import_file("t.pcap");
  cr_assert_eq(m->conns[0].msn, 8, "the last AETH's MSN: 8 delivered");
  cr_assert_eq(m->conns[0].delivered, 8);
  pp_import_free(m);
  /* 28 KiB SENDs: 7 packets of 4154 bytes, 332 ns apart at 100 Gb/s, never out of order */
  cr_assert_eq(sh("sed -e 's/size: 4KiB/size: 28KiB/' -e 's/messages: 200/messages: 5/' "
                  "-e \"s#platforms/#$M/../platforms/#\" -e \"s#nics/#$M/../nics/#\" "
                  "$M/fast-consumer.yaml > fc.yaml && $P run fc.yaml --trace f.trace "
                  "--trace-packets > /dev/null && $P trace export --pcap f.trace -o f.pcap"), 0);
  cr_assert_eq(sh("tshark -n -r f.pcap -T fields -e frame.time_delta -e frame.len "
                  "-e infiniband.bth.opcode 2>/dev/null | head -7 > d.txt"), 0);
  char *d = slurp("d.txt", NULL);
  cr_assert_str_eq(d, "0.000000000\t4154\t0\n0.000000332\t4154\t1\n0.000000332\t4154\t1\n"
                      "0.000000332\t4154\t1\n0.000000332\t4154\t1\n0.000000332\t4154\t1\n"
                      "0.000000332\t4154\t2\n");
  free(d);
  cr_assert_eq(sh("test $(tshark -n -r f.pcap -T fields -e frame.time_delta 2>/dev/null | "
                  "grep -c '^-') -eq 0"), 0, "time never goes back");
}

/* ---------------------------------------------------------------- captures of rxe */

#define CAPTURES PREPOST_SOURCE_DIR "/tests/captures"

static struct pp_import *import_path(const char *path)
{
  char err[512];
  struct pp_import *m;
  cr_assert_eq(pp_import_pcap(path, &m, err, sizeof(err)), 0, "%s", err);
  return m;
}

/* tcpdump -s 128 on the veth between two rxe devices (tests/verbs/suite.sh, step capture) while
 * rnr-slow-consumer-retry0 ran over verbs: the run reported 9 messages, 1 RNR NAK, exit 1. */
Test(import, rxe_capture_rnr_retry0, .timeout = 60)
{
  struct pp_import *m = import_path(CAPTURES "/rxe-rnr-retry0.pcap");
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  cr_assert_eq(t.delivered, 9);
  cr_assert_eq(t.rnr_naks, 1);
  cr_assert_eq(t.retries, 0);
  cr_assert_eq(m->nconns, 1);
  cr_assert(pp_import_rnr_gave_up(&m->conns[0]));
  char diag[2048];
  pp_import_diagnose(m, &m->conns[0], diag, sizeof(diag));
  cr_assert_not_null(strstr(diag, "exhausted rnr_retry"), "%s", diag);
  cr_assert_gt(m->conns[0].outstanding, 0, "the refused message and what followed it");
  pp_import_free(m);
  cr_assert_eq(sh("$P trace import --pcap " CAPTURES "/rxe-rnr-retry0.pcap --json > r.json"), 0);
  char *r = slurp("r.json", NULL);
  cr_assert_not_null(strstr(r, "\"last_unacked_psn\": "), "%s", r);
  cr_assert_not_null(strstr(r, "\"rnr_retry_exhausted\": true"), "%s", r);
  free(r);
  /* its scenario ends the same way in simulation */
  cr_assert_eq(sh("$P trace import --pcap " CAPTURES "/rxe-rnr-retry0.pcap --scenario-out s.yaml "
                  "> /dev/null"), 0);
  cr_assert_eq(sh("$P run s.yaml --json > sim.json"), 1, "error completions, as on rxe");
  char *j = slurp("sim.json", NULL);
  cr_assert_eq(json_u64(j, "messages"), 9);
  cr_assert_eq(json_u64(j, "rnr_naks"), 1);
  cr_assert_not_null(strstr(j, "\"RNR_RETRY_EXC_ERR\": 1"), "%s", j);
  free(j);
}

/* The same on a loaded host: rxe timed out once and resent 0x24eb16, then 0x24eb17 144 us later
 * after the ACK of 0x24eb17 had come: one go-back (rxe's counters said 1 retry), not two. */
Test(import, rxe_capture_slow_retransmission)
{
  struct pp_import *m = import_path(CAPTURES "/rxe-rnr-retry0-timeout.pcap");
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  cr_assert_eq(t.delivered, 10);
  cr_assert_eq(t.rnr_naks, 1);
  cr_assert_eq(t.retries, 1);
  cr_assert_eq(t.timeout_retries, 1);
  cr_assert_eq(t.retrans_mismatch, 0, "rxe resent what it had sent");
  pp_import_free(m);
}

/* ib_write_bw -n 200 -s 4096 between the two rxe devices: 200 WRITEs of 4 KiB, 4 packets each
 * (rxe's 1024-byte MTU on a 1500-byte netdev). */
Test(import, rxe_capture_perftest)
{
  struct pp_import *m = import_path(CAPTURES "/rxe-ib_write_bw.pcap");
  cr_assert_eq(m->nconns, 1, "perftest's data QP (its handshake is TCP)");
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->by_op[0], 200);
  cr_assert_eq(c->message_bytes, 200 * 4096);
  cr_assert_eq(c->delivered, 200);
  cr_assert_eq(c->rnr_naks, 0);
  cr_assert_eq(c->outstanding, 0);
  pp_import_free(m);
}

/* Debian 12's rxe (6.1.192) in the lossy two-host case (backends/verbs/README.md, "rxe's retry
 * race"): a retry resent PSN 0x684f00, first a SEND_FIRST of 1024 bytes, as a 0-byte SEND_ONLY
 * and every later packet one PSN late; 41 resent packets differ from what their PSN first
 * carried (counted packet by packet in the capture), and the responder NAKed 0x684f38. */
Test(import, rxe_capture_zero_length_retry)
{
  struct pp_import *m = import_path(CAPTURES "/rxe-zero-len-retry.pcap");
  cr_assert_eq(m->nconns, 1);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->retrans_mismatch, 41);
  cr_assert_eq(c->mismatch.psn, 0x684f00);
  cr_assert_eq(c->mismatch.op0, 0x00, "first a SEND_FIRST");
  cr_assert_eq(c->mismatch.len0, 1024);
  cr_assert_eq(c->mismatch.op1, 0x04, "resent as a SEND_ONLY");
  cr_assert_eq(c->mismatch.len1, 0);
  cr_assert(c->fatal_nak && c->fatal_nak_code == 1 && c->fatal_nak_psn == 0x684f38,
            "the invalid-request NAK");
  char diag[2048];
  pp_import_diagnose(m, c, diag, sizeof(diag));
  const char *want = "QP 0x15 (169.254.77.1) re-sent PSN 0x684f00 as SEND_ONLY (0 bytes) where "
                     "it first sent SEND_FIRST (1024 bytes): a retransmission";
  cr_assert_eq(strncmp(diag, want, strlen(want)), 0, "%s", diag);
  cr_assert_not_null(strstr(diag, "(41 resent packets differ from their originals); responder "
                                  "QP 0x15 (169.254.77.2) NAKed PSN 0x684f38 with invalid "
                                  "request"), "%s", diag);
  pp_import_free(m);
}

/* ---------------------------------------------------------------- hand-built captures */

/* One packet of the conversation: dir 0 requester (host A, QP 0x11) -> responder (host B,
 * QP 0x12), 1 back. */
struct hp {
  int dir;
  uint8_t op;
  uint32_t psn;
  uint8_t syn;
  uint32_t msn, payload, dma;
  uint64_t ts;
};

static const struct hp conv[] = {
    {0, 0x04, 100, 0, 0, 64, 0, 1000},          /* SEND_ONLY */
    {1, 0x11, 100, 0x1f, 1, 0, 0, 2000},        /* ACK */
    {0, 0x04, 101, 0, 0, 64, 0, 3000},          /* SEND_ONLY */
    {1, 0x11, 101, 0x20 | 14, 1, 0, 0, 4000},   /* RNR NAK, timer 14 (1.28 ms) */
    {0, 0x04, 101, 0, 0, 64, 0, 1284000},       /* the RNR retry */
    {1, 0x11, 101, 0x1f, 2, 0, 0, 1285000},     /* ACK */
    {0, 0x0b, 102, 0, 0, 128, 128, 1286000},    /* WRITE_ONLY_IMM */
    {0, 0x0c, 103, 0, 0, 0, 8192, 1287000},     /* READ_REQUEST, 8 KiB */
    {1, 0x0d, 103, 0x1f, 3, 4096, 0, 1288000},  /* READ_RESPONSE_FIRST */
    {1, 0x0f, 104, 0x1f, 4, 4096, 0, 1289000},  /* READ_RESPONSE_LAST */
    {0, 0x04, 107, 0, 0, 32, 0, 1290000},       /* SEND_ONLY after a gap: 105, 106 missing */
    {1, 0x11, 105, 0x60, 4, 0, 0, 1291000},     /* NAK PSN sequence error */
    {0, 0x04, 105, 0, 0, 32, 0, 1292000},       /* the go-back: 105, 106, 107 */
    {0, 0x04, 106, 0, 0, 32, 0, 1293000},
    {0, 0x04, 107, 0, 0, 32, 0, 1294000},
    {1, 0x11, 107, 0x1f, 7, 0, 0, 1295000},     /* ACK: everything */
};
#define NCONV (sizeof(conv) / sizeof(conv[0]))

enum l2 { L_ETH4, L_ETH6_VLAN, L_SLL4, L_SLL2_6, L_RAW4, L_ROCEV1, L_IB, L_IB_GRH, L_N };
static const int l2_lt[L_N] = {PP_LT_ETHERNET,   PP_LT_ETHERNET, PP_LT_LINUX_SLL,
                               PP_LT_LINUX_SLL2, PP_LT_RAW,      PP_LT_ETHERNET,
                               PP_LT_INFINIBAND, PP_LT_INFINIBAND};

static void be16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v; }
static void be24(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 16), be16(p + 1, v); }
static void be32(uint8_t *p, uint32_t v) { be16(p, v >> 16), be16(p + 2, v); }

/* BTH, extension headers, payload, pad, ICRC (zeros): the IB transport. */
static size_t transport(uint8_t *p, const struct hp *h)
{
  uint8_t op = h->op;
  uint32_t pad = (4 - h->payload % 4) % 4;
  memset(p, 0, 12);
  p[0] = op;
  p[1] = (uint8_t)(pad << 4);
  be16(p + 2, 0xffff);
  be24(p + 5, h->dir ? 0x11 : 0x12);
  p[8] = h->dir ? 0 : 0x80;
  be24(p + 9, h->psn);
  size_t n = 12;
  if (op == 0x0b || op == 0x0c) { /* RETH */
    memset(p + n, 0, 16);
    be32(p + n + 4, 0x1000);
    be32(p + n + 8, 0xabc);
    be32(p + n + 12, h->dma);
    n += 16;
  }
  if (op == 0x11 || op == 0x0d || op == 0x0f || op == 0x10) { /* AETH */
    p[n] = h->syn;
    be24(p + n + 1, h->msn);
    n += 4;
  }
  if (op == 0x0b) { /* ImmDt */
    be32(p + n, 0xfeedbeef);
    n += 4;
  }
  memset(p + n, 0x5a, h->payload + pad + 4);
  return n + h->payload + pad + 4;
}

static size_t ip4(uint8_t *p, const struct hp *h)
{
  uint8_t *u = p + 20;
  size_t ib = transport(u + 8, h);
  memset(p, 0, 28);
  p[0] = 0x45;
  be16(p + 2, (uint32_t)(28 + ib));
  p[8] = 64;
  p[9] = 17;
  uint8_t a[4] = {192, 168, 1, 1}, b[4] = {192, 168, 1, 2};
  memcpy(p + 12, h->dir ? b : a, 4);
  memcpy(p + 16, h->dir ? a : b, 4);
  be16(u, 49152);
  be16(u + 2, 4791);
  be16(u + 4, (uint32_t)(8 + ib));
  return 28 + ib;
}

static void gid(uint8_t *p, int host)
{
  memset(p, 0, 16);
  p[0] = 0xfe;
  p[1] = 0x80;
  p[15] = (uint8_t)(host + 1);
}

static size_t ip6(uint8_t *p, const struct hp *h, bool grh)
{
  uint8_t *u = p + 40;
  size_t ib = transport(grh ? u : u + 8, h);
  memset(p, 0, 40);
  p[0] = 0x60;
  be16(p + 4, (uint32_t)(grh ? ib : 8 + ib));
  p[6] = grh ? 0x1b : 17;
  p[7] = 64;
  gid(p + 8, h->dir);
  gid(p + 24, !h->dir);
  if (grh)
    return 40 + ib;
  be16(u, 49152);
  be16(u + 2, 4791);
  be16(u + 4, (uint32_t)(8 + ib));
  return 48 + ib;
}

static size_t frame(uint8_t *p, enum l2 l, const struct hp *h)
{
  size_t n;
  switch (l) {
  case L_ETH4:
  case L_ETH6_VLAN:
  case L_ROCEV1:
    memset(p, 0, 12);
    p[5] = (uint8_t)(h->dir ? 2 : 1);
    p[11] = (uint8_t)(h->dir ? 1 : 2);
    if (l == L_ETH6_VLAN) {
      be16(p + 12, 0x8100);
      be16(p + 14, 5);
      be16(p + 16, 0x86dd);
      return 18 + ip6(p + 18, h, false);
    }
    be16(p + 12, l == L_ROCEV1 ? 0x8915 : 0x0800);
    return 14 + (l == L_ROCEV1 ? ip6(p + 14, h, true) : ip4(p + 14, h));
  case L_SLL4:
    memset(p, 0, 16);
    be16(p + 2, 1);
    be16(p + 4, 6);
    be16(p + 14, 0x0800);
    return 16 + ip4(p + 16, h);
  case L_SLL2_6:
    memset(p, 0, 20);
    be16(p, 0x86dd);
    return 20 + ip6(p + 20, h, false);
  case L_RAW4:
    return ip4(p, h);
  case L_IB:
  case L_IB_GRH:
    memset(p, 0, 8);
    p[1] = l == L_IB ? 2 : 3;
    be16(p + 2, h->dir ? 1 : 2);
    be16(p + 6, h->dir ? 2 : 1);
    n = 8 + (l == L_IB ? transport(p + 8, h) : ip6(p + 8, h, true));
    be16(p + 4, (uint32_t)(n / 4));
    memset(p + n, 0, 2); /* VCRC */
    return n + 2;
  default:
    return 0;
  }
}

static void put32(FILE *f, uint32_t v) { cr_assert_eq(fwrite(&v, 4, 1, f), 1); }
static void put16(FILE *f, uint16_t v) { cr_assert_eq(fwrite(&v, 2, 1, f), 1); }

/* Packets as a capture: classic pcap (nanosecond) or pcapng (if_tsresol 9). */
static uint32_t snaplen; /* 0: whole frames */
static size_t conv_from; /* the capture starts with this packet of the conversation */

static void write_pkts(const char *name, enum l2 l, bool ng, const struct hp *pkts, size_t npkts)
{
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  int lt = l2_lt[l];
  if (ng) {
    put32(f, 0x0a0d0d0a), put32(f, 28), put32(f, 0x1a2b3c4d), put16(f, 1), put16(f, 0);
    put32(f, 0xffffffff), put32(f, 0xffffffff), put32(f, 28);
    put32(f, 1), put32(f, 32), put16(f, (uint16_t)lt), put16(f, 0), put32(f, 65535);
    put16(f, 9), put16(f, 1), put32(f, 9); /* if_tsresol 10^-9, padded */
    put32(f, 0), put32(f, 32);
  } else {
    put32(f, 0xa1b23c4d), put16(f, 2), put16(f, 4), put32(f, 0), put32(f, 0);
    put32(f, 65535), put32(f, (uint32_t)lt);
  }
  for (size_t i = 0; i < npkts; i++) {
    uint8_t b[9000];
    uint32_t n = (uint32_t)frame(b, l, &pkts[i]);
    uint64_t ts = 1700000000ull * 1000000000ull + pkts[i].ts;
    if (ng) {
      uint32_t padded = (n + 3) & ~3u;
      put32(f, 6), put32(f, 32 + padded), put32(f, 0);
      put32(f, (uint32_t)(ts >> 32)), put32(f, (uint32_t)ts), put32(f, n), put32(f, n);
      cr_assert_eq(fwrite(b, 1, n, f), n);
      static const uint8_t zero[4];
      cr_assert_eq(fwrite(zero, 1, padded - n, f), padded - n);
      put32(f, 32 + padded);
    } else {
      uint32_t incl = snaplen && n > snaplen ? snaplen : n;
      put32(f, (uint32_t)(ts / 1000000000u)), put32(f, (uint32_t)(ts % 1000000000u));
      put32(f, incl), put32(f, n);
      cr_assert_eq(fwrite(b, 1, incl, f), incl);
    }
  }
  cr_assert_eq(fclose(f), 0);
}

/* pkts as an Ethernet/IPv4 pcap named `name`, imported. */
static struct pp_import *import_pkts(const char *name, const struct hp *pkts, size_t npkts)
{
  write_pkts(name, L_ETH4, false, pkts, npkts);
  return import_file(name);
}
#define IMPORT_PKTS(name, a) import_pkts(name, a, sizeof(a) / sizeof((a)[0]))

static void write_capture(const char *name, enum l2 l, bool ng)
{
  write_pkts(name, l, ng, conv + conv_from, NCONV - conv_from);
}

static void check_conversation(const char *name, const char *what)
{
  struct pp_import *m = import_file(name);
  cr_expect_str_neq(m->linktype, "?", "%s: the link type has its name", what);
  cr_assert_eq(m->ib_pkts, NCONV, "%s: every frame is a RoCE/IB packet", what);
  cr_assert_eq(m->nhosts, 2, "%s", what);
  cr_assert_eq(m->nconns, 1, "%s: one QP pair, one direction with requests", what);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_expect_eq(c->resp_qpn, 0x12, "%s", what);
  cr_expect(c->req_qpn_known && c->req_qpn == 0x11, "%s: requester QPN from the ACKs", what);
  cr_expect_eq(c->messages, 7, "%s: 5 sends, a write, a read (105 and 106 seen once)", what);
  cr_expect_eq(c->by_op[2], 5, "%s", what);
  cr_expect_eq(c->by_op[1], 1, "%s: the write carries immediate data", what);
  cr_expect_eq(c->by_op[4], 1, "%s", what);
  cr_expect_eq(c->delivered, 7, "%s", what);
  cr_expect_eq(c->message_bytes, 64 + 64 + 128 + 8192 + 3 * 32, "%s", what);
  cr_expect_eq(c->rnr_naks, 1, "%s", what);
  cr_expect_eq(c->rnr_timer_code, 14, "%s", what);
  cr_expect_eq(c->rnr_wait_ns, 1281000, "%s: from the RNR NAK to the ACK of its PSN", what);
  cr_expect_eq(c->retries, 2, "%s", what);
  cr_expect_eq(c->rnr_retries, 1, "%s", what);
  cr_expect_eq(c->seq_retries, 1, "%s", what);
  cr_expect_eq(c->timeout_retries, 0, "%s", what);
  cr_expect_eq(c->naks[0], 1, "%s: a sequence-error NAK", what);
  cr_expect_eq(c->psn_gaps, 1, "%s", what);
  cr_expect_eq(c->psn_gap_pkts, 2, "%s", what);
  cr_expect_eq(c->retrans_pkts, 4, "%s: 101, then 105..107 behind 107 (105, 106 first seen)",
               what);
  cr_expect_eq(c->read_resp_pkts, 2, "%s", what);
  cr_expect_eq(c->read_resp_bytes, 8192, "%s", what);
  cr_expect_eq(c->msn, 7, "%s: the last AETH's MSN", what);
  cr_expect_eq(c->outstanding, 0, "%s", what);
  cr_expect_eq(c->next_psn, 108, "%s", what);
  cr_expect_eq(c->retrans_mismatch, 0, "%s: every retransmission repeats its original", what);
  pp_import_free(m);
}

Test(import, hand_built_every_link_type_and_format)
{
  static const char *const names[L_N] = {"eth-ipv4", "eth-vlan-ipv6", "sll-ipv4", "sll2-ipv6",
                                         "raw-ipv4", "rocev1",        "ib",       "ib-grh"};
  for (int l = 0; l < L_N; l++)
    for (int ng = 0; ng < 2; ng++) {
      char name[64];
      snprintf(name, sizeof(name), "%s.%s", names[l], ng ? "pcapng" : "pcap");
      write_capture(name, (enum l2)l, ng);
      check_conversation(name, name);
    }
}

/* A capture that starts with a response (the ACK of a SEND before it): one direction still. */
Test(import, hand_built_starts_mid_conversation)
{
  conv_from = 1;
  write_capture("mid.pcap", L_ETH4, false);
  conv_from = 0;
  struct pp_import *m = import_file("mid.pcap");
  cr_assert_eq(m->nconns, 1, "the ACK's direction is the requests' one");
  cr_assert_eq(m->conns[0].messages, 6);
  cr_assert_eq(m->conns[0].delivered, 6);
  cr_assert_eq(m->conns[0].rnr_naks, 1);
  cr_assert_eq(m->conns[0].req_qpn, 0x11);
  cr_assert_eq(m->conns[0].resp_qpn, 0x12);
  pp_import_free(m);
}

Test(import, hand_built_json_and_diagnosis)
{
  write_capture("c.pcapng", L_SLL2_6, true);
  cr_assert_eq(sh("$P trace import --pcap c.pcapng --json > c.json"), 0);
  char *j = slurp("c.json", NULL);
  cr_assert_eq(json_u64(j, "rnr_naks"), 1);
  cr_assert_eq(json_u64(j, "seq_naks"), 1);
  cr_assert_eq(json_u64(j, "retries"), 2);
  cr_assert_eq(json_u64(j, "rnr_timer_code"), 14);
  cr_assert_not_null(strstr(j, "\"host\": \"fe80::1\", \"qpn\": 17"), "%s", j);
  cr_assert_not_null(strstr(j, "had no receive posted 1 times (1.28 ms in all"), "%s", j);
  cr_assert_not_null(strstr(j, "1 PSN sequence error NAKs"), "%s", j);
  cr_assert_eq(sh("python3 -c 'import json; json.load(open(\"c.json\"))'"), 0, "valid JSON");
  cr_assert_not_null(strstr(j, "\"unacked_psn\": null, \"last_unacked_psn\": null"), "%s", j);
  free(j);
  cr_assert_eq(sh("$P trace import --pcap c.pcapng > c.txt && grep -q 'QP 0x11 (fe80::1) -> "
                  "QP 0x12 (fe80::2)' c.txt"), 0);
}

/* ---------------------------------------------------------------- retransmissions that differ */

/* 75 SENDs of 4 packets of 1024 bytes from PSN 0xffff80 (across the PSN wrap, and past the
 * ring's first sizes), an ACK timeout, the go-back resending all 300 packets and the ACK of the
 * last. Packet `change` of the go-back (-1: none) is resent as opcode `op` with `len` bytes. */
#define GB_PKTS 300
static struct hp gb[2 * GB_PKTS + 1];

static void go_back_capture(const char *name, int change, uint8_t op1, uint32_t len1)
{
  for (uint32_t i = 0; i < GB_PKTS; i++) {
    uint8_t op = i % 4 == 0 ? 0x00 : i % 4 == 3 ? 0x02 : 0x01;
    uint32_t psn = (0xffff80u + i) & 0xffffffu;
    gb[i] = (struct hp){0, op, psn, 0, 0, 1024, 0, 1000 + 1000ull * i};
    gb[GB_PKTS + i] = gb[i];
    gb[GB_PKTS + i].ts += 50000000;
  }
  if (change >= 0)
    gb[GB_PKTS + change].op = op1, gb[GB_PKTS + change].payload = len1;
  gb[2 * GB_PKTS] = (struct hp){1, 0x11, (0xffff80u + GB_PKTS - 1) & 0xffffffu, 0x1f, 75, 0, 0,
                                 60000000};
  write_pkts(name, L_ETH4, false, gb, 2 * GB_PKTS + 1);
}

Test(import, retrans_identical_go_back_is_no_mismatch)
{
  go_back_capture("gb.pcap", -1, 0, 0);
  struct pp_import *m = import_file("gb.pcap");
  cr_assert_eq(m->nconns, 1);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->retrans_pkts, GB_PKTS, "every packet of the go-back is a retransmission");
  cr_assert_eq(c->retries, 1);
  cr_assert_eq(c->messages, 75);
  cr_assert_eq(c->retrans_mismatch, 0, "a go-back that repeats what it sent");
  char diag[2048];
  pp_import_diagnose(m, c, diag, sizeof(diag));
  cr_assert_null(strstr(diag, "re-sent"), "%s", diag);
  pp_import_free(m);
  cr_assert_eq(sh("$P trace import --pcap gb.pcap --json > gb.json && "
                  "$P trace import --pcap gb.pcap > gb.txt && ! grep -q mismatched gb.txt"), 0);
  char *j = slurp("gb.json", NULL);
  cr_assert_eq(json_u64(j, "retrans_mismatch"), 0);
  cr_assert_not_null(strstr(j, "\"retrans_mismatch_first\": null"), "%s", j);
  free(j);
}

/* rxe's retry race (backends/verbs/README.md): the go-back resends the last packet of the third
 * message as a 0-byte SEND_ONLY; the ring has grown past 64 entries since that PSN was sent.
 * A change of the length alone, or of the opcode alone, is one too. */
Test(import, retrans_changed_at_one_psn_is_one_mismatch)
{
  go_back_capture("gb.pcap", 11, 0x04, 0);
  struct pp_import *m = import_file("gb.pcap");
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->retrans_mismatch, 1);
  cr_assert_eq(c->mismatch.psn, 0xffff8b);
  cr_assert_eq(c->mismatch.op0, 0x02, "first sent as SEND_LAST");
  cr_assert_eq(c->mismatch.len0, 1024);
  cr_assert_eq(c->mismatch.op1, 0x04, "resent as SEND_ONLY");
  cr_assert_eq(c->mismatch.len1, 0);
  cr_assert_eq(c->mismatch.ts - m->first_ts, 50000000 + 11000);
  struct pp_imp_totals t;
  pp_import_totals(m, &t);
  cr_assert_eq(t.retrans_mismatch, 1);
  char diag[2048];
  pp_import_diagnose(m, c, diag, sizeof(diag));
  const char *want = "QP 0x11 (192.168.1.1) re-sent PSN 0xffff8b as SEND_ONLY (0 bytes) where it "
                     "first sent SEND_LAST (1024 bytes): a retransmission that does not repeat "
                     "the original, so the responder sees every later message boundary shifted; "
                     "that is a requester (NIC or driver) bug, not the application's";
  cr_assert_eq(strncmp(diag, want, strlen(want)), 0, "first in the diagnosis: %s", diag);
  cr_assert_not_null(strstr(diag, "ACK timeouts"), "the go-back's cause follows: %s", diag);
  pp_import_free(m);
  cr_assert_eq(sh("$P trace import --pcap gb.pcap > gb.txt && grep -q '^  mismatched 1 "
                  "retransmissions differ from the original (first: PSN 0xffff8b at 50 ms, "
                  "SEND_LAST 1024 B first, SEND_ONLY 0 B resent)$' gb.txt"), 0);
  cr_assert_eq(sh("$P trace import --pcap gb.pcap --json > gb.json"), 0);
  char *j = slurp("gb.json", NULL);
  cr_assert_eq(json_u64(j, "retrans_mismatch"), 1, "the totals");
  cr_assert_not_null(strstr(j, "\"retrans_mismatch\": 1, \"retrans_mismatch_first\": {\"psn\": "
                               "16777099, \"ts_ns\": 50011000, \"first_opcode\": \"SEND_LAST\", "
                               "\"first_len\": 1024, \"resent_opcode\": \"SEND_ONLY\", "
                               "\"resent_len\": 0}"), "%s", j);
  cr_assert_eq(sh("python3 -c 'import json; json.load(open(\"gb.json\"))'"), 0, "valid JSON");
  free(j);
  /* the length alone, and the opcode alone */
  go_back_capture("len.pcap", 11, 0x02, 512);
  go_back_capture("op.pcap", 12, 0x04, 1024);
  m = import_file("len.pcap");
  cr_assert(m->conns[0].retrans_mismatch == 1 && m->conns[0].mismatch.len1 == 512);
  pp_import_free(m);
  m = import_file("op.pcap");
  cr_assert(m->conns[0].retrans_mismatch == 1 && m->conns[0].mismatch.op0 == 0x00);
  pp_import_free(m);
}

/* A READ's retries are not judged: one for the rest of the data from the first missing
 * response's PSN, one from the READ's own PSN asking for less than it first did. */
Test(import, retrans_read_retried_partially_is_no_mismatch)
{
  static const struct hp rd[] = {
      {0, 0x0c, 200, 0, 0, 0, 8192, 1000},         /* READ_REQUEST 8 KiB: PSNs 200, 201 */
      {1, 0x0d, 200, 0x1f, 0, 4096, 0, 2000},      /* READ_RESPONSE_FIRST; the LAST lost */
      {0, 0x0c, 201, 0, 0, 0, 4096, 30000000},     /* the rest, from PSN 201 */
      {0, 0x0c, 200, 0, 0, 0, 4096, 60000000},     /* from 200, for less */
      {1, 0x10, 201, 0x1f, 1, 4096, 0, 60001000},  /* READ_RESPONSE_ONLY */
      {0, 0x04, 202, 0, 0, 64, 0, 60002000},       /* SEND_ONLY */
      {1, 0x11, 202, 0x1f, 2, 0, 0, 60003000},     /* ACK */
  };
  struct pp_import *m = IMPORT_PKTS("rd.pcap", rd);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->retrans_pkts, 2, "both READs are retries");
  cr_assert_eq(c->retrans_mismatch, 0);
  cr_assert_eq(c->delivered, 2);
  pp_import_free(m);
}

/* A retransmission of a PSN whose slot a later PSN took (PP_IMPORT_SENT_PSNS further), and of a
 * PSN far behind that the capture never saw (4M PSNs, modulo 2^24): neither is compared with
 * the slot's PSN. */
Test(import, retrans_stale_slot_is_not_compared)
{
  const uint32_t later = 100 + PP_IMPORT_SENT_PSNS, far = (later - 0x400000u) & 0xffffffu;
  const struct hp st[] = {
      {0, 0x04, 100, 0, 0, 64, 0, 1000},         /* SEND_ONLY */
      {1, 0x11, 100, 0x1f, 1, 0, 0, 2000},       /* ACK */
      {0, 0x04, later, 0, 0, 32, 0, 3000},       /* the same slot, the PSNs between lost */
      {0, 0x04, 100, 0, 0, 64, 0, 40000000},     /* 100 again, as first sent */
      {0, 0x04, far, 0, 0, 16, 0, 40001000},     /* a PSN never seen */
      {1, 0x11, later, 0x1f, 2, 0, 0, 40002000}, /* ACK */
  };
  struct pp_import *m = IMPORT_PKTS("st.pcap", st);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->retrans_pkts, 2);
  cr_assert_eq(c->psn_gaps, 1);
  cr_assert_eq(c->retrans_mismatch, 0, "PSN 0x%06x against 0x%06x's slot", c->mismatch.psn,
               later);
  pp_import_free(m);
}

/* A gap's fill that finds its slot taken by a later PSN leaves that one (it is the one a go-back
 * resends next): 101 and 165 share a slot of the 64 the two first packets have. */
Test(import, retrans_gap_fill_leaves_a_later_psn)
{
  static const struct hp lf[] = {
      {0, 0x04, 100, 0, 0, 64, 0, 1000},        /* SEND_ONLY; 101..164 lost */
      {0, 0x04, 165, 0, 0, 64, 0, 2000},        /* SEND_ONLY */
      {1, 0x11, 101, 0x60, 1, 0, 0, 3000},      /* NAK PSN sequence error */
      {0, 0x04, 101, 0, 0, 64, 0, 4000},        /* the go-back (the rest of it lost too) */
      {0, 0x04, 165, 0, 0, 32, 0, 5000},        /* 165 with 32 bytes */
  };
  struct pp_import *m = IMPORT_PKTS("lf.pcap", lf);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->sent_cap, 64);
  cr_assert_eq(c->retrans_mismatch, 1);
  cr_assert(c->mismatch.psn == 165 && c->mismatch.len0 == 64 && c->mismatch.len1 == 32);
  pp_import_free(m);
}

/* PSNs that jump by 64, 128, 256, ... collide in every size of the ring: it stays at 64 slots
 * (4 per packet at most), not PP_IMPORT_SENT_PSNS, for a hostile capture's few packets. */
Test(import, retrans_ring_grows_with_packets_not_psn_jumps)
{
  struct hp j[7];
  for (uint32_t i = 0, psn = 0; i < 7; psn += 64u << i, i++)
    j[i] = (struct hp){0, 0x04, psn, 0, 0, 64, 0, 1000 + 1000ull * i};
  struct pp_import *m = IMPORT_PKTS("j.pcap", j);
  cr_assert_eq(m->conns[0].psn_gaps, 6);
  cr_assert_eq(m->conns[0].sent_cap, 64);
  pp_import_free(m);
  go_back_capture("gb.pcap", -1, 0, 0);
  m = import_file("gb.pcap");
  cr_assert_eq(m->conns[0].sent_cap, 512, "300 PSNs sent in order: all remembered");
  pp_import_free(m);
}

/* A PSN lost before the capture point is first seen in the go-back: a later resend is compared
 * with that. */
Test(import, retrans_of_a_gap_fill_is_compared_with_it)
{
  static const struct hp gf[] = {
      {0, 0x04, 100, 0, 0, 64, 0, 1000},        /* SEND_ONLY; 101 lost */
      {0, 0x04, 102, 0, 0, 64, 0, 2000},        /* SEND_ONLY */
      {1, 0x11, 101, 0x60, 1, 0, 0, 3000},      /* NAK PSN sequence error */
      {0, 0x04, 101, 0, 0, 64, 0, 4000},        /* the go-back: 101 on the wire at last */
      {0, 0x04, 102, 0, 0, 64, 0, 5000},
      {0, 0x04, 101, 0, 0, 0, 0, 40000000},     /* after an ACK timeout, with 0 bytes */
      {1, 0x11, 102, 0x1f, 3, 0, 0, 40001000},  /* ACK */
  };
  struct pp_import *m = IMPORT_PKTS("gf.pcap", gf);
  const struct pp_imp_conn *c = &m->conns[0];
  cr_assert_eq(c->psn_gaps, 1);
  cr_assert_eq(c->retrans_mismatch, 1);
  cr_assert(c->mismatch.psn == 101 && c->mismatch.len0 == 64 && c->mismatch.len1 == 0);
  pp_import_free(m);
}

/* tshark reads the same opcodes, PSNs and AETH syndromes from the hand-built captures. */
Test(import, hand_built_decodes_in_tshark, .timeout = 120)
{
  if (system("command -v tshark > /dev/null 2>&1") != 0)
    cr_skip_test("tshark is not installed (tools/lib.sh installs it)");
  char want[4096] = "";
  size_t o = 0;
  for (size_t i = 0; i < NCONV; i++)
    o += (size_t)snprintf(want + o, sizeof(want) - o, "%u,%u\n", conv[i].op, conv[i].psn);
  const char *caps[] = {"eth4.pcapng", "eth6.pcap", "sll.pcap"};
  enum l2 ls[] = {L_ETH4, L_ETH6_VLAN, L_SLL4};
  for (int i = 0; i < 3; i++) {
    write_capture(caps[i], ls[i], i == 0);
    cr_assert_eq(sh("tshark -n -r %s -d udp.port==4791,infiniband -T fields -E separator=, "
                    "-e infiniband.bth.opcode -e infiniband.bth.psn 2>/dev/null > got.txt",
                    caps[i]), 0);
    char *got = slurp("got.txt", NULL);
    cr_assert_str_eq(got, want, "%s: tshark's opcodes and PSNs", caps[i]);
    free(got);
    cr_assert_eq(sh("test $(tshark -n -r %s -d udp.port==4791,infiniband -Y "
                    "'infiniband.aeth.syndrome == 0x2e' 2>/dev/null | wc -l) -eq 1", caps[i]), 0,
                 "%s: one RNR NAK with timer 14", caps[i]);
  }
}

/* ---------------------------------------------------------------- malformed and truncated */

static int cli_error(const char *name, const char *needle)
{
  int rc = sh("$P trace import --pcap %s > out.txt 2> err.txt", name);
  char *e = slurp("err.txt", NULL);
  cr_assert_not_null(strstr(e, needle), "%s: wanted '%s' in: %s", name, needle, e);
  cr_assert_not_null(strstr(e, name), "the message names the file: %s", e);
  free(e);
  return rc;
}

Test(import, malformed_and_truncated_exit_2)
{
  write_capture("ok.pcap", L_ETH4, false);
  size_t n;
  char *b = slurp("ok.pcap", &n);
  char path[256];
  /* cut in the middle of the last frame */
  snprintf(path, sizeof(path), "%s/cut.pcap", dir);
  FILE *f = fopen(path, "wb");
  cr_assert_eq(fwrite(b, 1, n - 20, f), n - 20);
  fclose(f);
  cr_assert_eq(cli_error("cut.pcap", "truncated"), 2);
  /* the third frame's UDP length beyond its IP payload */
  size_t off = 24;
  for (int i = 0; i < 2; i++)
    off += 16 + (uint32_t)((uint8_t)b[off + 8] | (uint8_t)b[off + 9] << 8);
  b[off + 16 + 14 + 20 + 4] = (char)0x7f;
  snprintf(path, sizeof(path), "%s/bad.pcap", dir);
  f = fopen(path, "wb");
  cr_assert_eq(fwrite(b, 1, n, f), n);
  fclose(f);
  cr_assert_eq(cli_error("bad.pcap", "frame 3: UDP length"), 2);
  /* a snapshot that cuts the headers */
  snaplen = 50;
  write_capture("small.pcap", L_ETH4, false);
  snaplen = 0;
  cr_assert_eq(cli_error("small.pcap", "snapshot captured only"), 2);
  /* not a capture, an unknown link type, a missing file */
  cr_assert_eq(sh("echo 'not a capture' > text.pcap"), 0);
  cr_assert_eq(cli_error("text.pcap", "not a capture libpcap reads"), 2);
  cr_assert_eq(cli_error("missing.pcap", "not a capture libpcap reads"), 2);
  b[20] = 105; /* LINKTYPE_IEEE802_11 */
  snprintf(path, sizeof(path), "%s/wifi.pcap", dir);
  f = fopen(path, "wb");
  cr_assert_eq(fwrite(b, 1, n, f), n);
  fclose(f);
  cr_assert_eq(cli_error("wifi.pcap", "link type 105"), 2);
  free(b);
  cr_assert_eq(sh("$P trace import --json > /dev/null 2>&1"), 2, "no --pcap: usage error");
}

/* Seeded mutations through libpcap and the importer (the file's structure), then each frame's
 * bytes through the decoder in a buffer of exactly its captured size (ASan sees any over-read). */
static void mutate(struct pp_prng *r, uint8_t *p, size_t *n)
{
  unsigned k = (unsigned)pp_prng_below(r, 4);
  if (k == 0 && *n)
    *n = (size_t)pp_prng_below(r, *n); /* truncate */
  int edits = 1 + (int)pp_prng_below(r, 8);
  for (int i = 0; i < edits && *n; i++) {
    size_t at = (size_t)pp_prng_below(r, *n);
    if (k == 1)
      p[at] ^= (uint8_t)(1u << pp_prng_below(r, 8));
    else
      p[at] = (uint8_t)pp_prng_next(r);
  }
}

static int fuzz_one(const uint8_t *data, size_t n)
{
  FILE *f = fmemopen((void *)data, n ? n : 1, "rb");
  cr_assert_not_null(f);
  struct pp_import *m;
  char err[512] = "";
  int rc = pp_import_pcap_fp(f, "fuzz", &m, err, sizeof(err));
  if (rc == 0) {
    FILE *null = fopen("/dev/null", "w");
    pp_import_report(m, "fuzz", null);
    pp_import_json(m, "fuzz", null);
    fclose(null);
    pp_import_free(m);
  } else {
    cr_assert(err[0], "a failure says why");
  }
  return rc;
}

Test(import, fuzz_mutated_captures, .timeout = 240)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry3.yaml --trace t.trace --trace-packets "
                  "> /dev/null; $P trace export --pcap t.trace -o sim.pcap"), 0);
  write_capture("ng.pcapng", L_SLL2_6, true);
  write_capture("ib.pcap", L_IB_GRH, false);
  cr_assert_eq(sh("cp " CAPTURES "/rxe-rnr-retry0.pcap rxe.pcap && cp " CAPTURES
                  "/rxe-zero-len-retry.pcap race.pcap"), 0);
  const char *seeds[] = {"sim.pcap", "ng.pcapng", "ib.pcap", "rxe.pcap", "race.pcap"};
  struct pp_prng r;
  pp_prng_seed(&r, 14);
  int ok = 0, bad = 0;
  for (int s = 0; s < 5; s++) {
    size_t n;
    uint8_t *orig = (uint8_t *)slurp(seeds[s], &n);
    cr_assert_eq(fuzz_one(orig, n), 0, "%s reads unmutated", seeds[s]);
    uint8_t *p = malloc(n);
    for (int i = 0; i < 1500; i++) {
      size_t len = n;
      memcpy(p, orig, n);
      mutate(&r, p, &len);
      if (fuzz_one(p, len) == 0)
        ok++;
      else
        bad++;
    }
    free(p);
    free(orig);
  }
  cr_assert_gt(ok, 100, "some mutations still read");
  cr_assert_gt(bad, 100, "some mutations are refused");
  /* frame by frame, every link type, exact-size buffers */
  for (int l = 0; l < L_N; l++)
    for (size_t i = 0; i < NCONV; i++) {
      uint8_t b[9000];
      size_t n = frame(b, (enum l2)l, &conv[i]);
      for (int j = 0; j < 200; j++) {
        size_t len = n;
        uint8_t tmp[9000];
        memcpy(tmp, b, n);
        mutate(&r, tmp, &len);
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, tmp, len);
        struct pp_ib_pkt k;
        char why[256];
        uint32_t wire = (uint32_t)(pp_prng_below(&r, 2) ? n : len);
        int d = pp_ib_decode(l2_lt[l], exact, (uint32_t)len, wire, &k, why, sizeof(why));
        cr_assert(d >= -1 && d <= 1);
        if (d == 1)
          cr_assert_leq(k.payload, wire);
        free(exact);
      }
    }
}
