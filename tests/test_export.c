/*
 * prepost trace export: the three pictures open in their tools. The pcap is decoded by tshark
 * (Debian's tshark dissects UDP 4791 as RoCEv2) and its opcodes, PSNs and RNR NAKs checked
 * against the trace; the Perfetto JSON is loaded by Python's json module and its events checked;
 * the SVG is parsed by Python's XML parser (tests/export/svg_check.py) and a screenshot of it in
 * headless Chromium is looked at. Through the CLI, in a scratch directory.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "scratch.h"

static char dir[64];

static void setup(void)
{
  scratch_make(dir, sizeof(dir), "export");
}

static void teardown(void)
{
  scratch_remove(dir);
}

TestSuite(export, .init = setup, .fini = teardown);

/* Runs a shell command in the scratch directory ($P is the CLI); returns its exit code. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
  char body[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof(cmd), "cd '%s' && P='%s' && M='%s/scenarios' && SVG='%s/../tests/export/"
           "svg_check.py' && %s", dir, PREPOST_CLI, PREPOST_MODELS_DIR, PREPOST_MODELS_DIR, body);
  int st = system(cmd);
  cr_assert(WIFEXITED(st), "%s", body);
  return WEXITSTATUS(st);
}

/* The number printed by a command. */
static long num(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long num(const char *fmt, ...)
{
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  cr_assert_eq(sh("%s > num.txt", body), 0, "%s", body);
  char path[128];
  snprintf(path, sizeof(path), "%s/num.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  long v = -1;
  cr_assert_eq(fscanf(f, "%ld", &v), 1, "no number from: %s", body);
  fclose(f);
  return v;
}

static bool have_tshark(void)
{
  return system("command -v tshark > /dev/null 2>&1") == 0;
}

#define TSHARK "tshark -n -r cap.pcap 2>/dev/null"

Test(export, pcap_decodes_as_rocev2_with_rnr_naks, .timeout = 120)
{
  if (!have_tshark())
    cr_skip_test("tshark is not installed (tools/lib.sh installs it)");
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer.yaml --trace t.trace --trace-packets > /dev/null"),
               0);
  cr_assert_eq(sh("$P trace export --pcap t.trace -o full.pcap"), 0);
  cr_assert_eq(sh("$P trace export --pcap t.trace -o cap.pcap --snaplen 96"), 0);
  long sends = num("$P trace dump t.trace --type pkt_tx | grep -c ' REQ SEND '");
  long rnr = num("$P trace dump t.trace --type pkt_tx | grep -c ' RNR_NAK '");
  cr_assert_gt(rnr, 100, "the slow consumer RNR-NAKs most messages");
  /* whole frames (payload, pad, ICRC): none malformed */
  cr_assert_eq(num("tshark -n -r full.pcap -c 300 -Y '_ws.malformed || _ws.expert.severity >= "
                   "error' 2>/dev/null | wc -l"), 0);
  cr_assert_eq(num("tshark -n -r full.pcap -c 300 -Y 'infiniband.invariant.crc' 2>/dev/null | "
                   "wc -l"), 300, "every frame ends in an ICRC");
  /* one decoding pass over the headers: frame, UDP port, opcode, PSN, AETH syndrome and timer */
  cr_assert_eq(sh(TSHARK " -T fields -E separator=, -e udp.dstport -e infiniband.bth.opcode "
                  "-e infiniband.bth.psn -e infiniband.aeth.syndrome "
                  "-e infiniband.aeth.syndrome.timer > f.txt"), 0);
  long frames = num("wc -l < f.txt");
  cr_assert_eq(num("grep -c '^4791,' f.txt"), frames, "every frame is RoCEv2 on UDP 4791");
  cr_assert_eq(num(TSHARK " -Y '_ws.malformed' | wc -l"), 0);
  /* opcodes: SEND Only (4) per recorded SEND, Acknowledge (17) for ACKs and NAKs */
  cr_assert_eq(num("awk -F, '$2 == 4' f.txt | wc -l"), sends);
  cr_assert_eq(num("awk -F, '$2 == 17' f.txt | wc -l"), frames - sends);
  /* RNR NAKs: AETH syndrome 001 + timer (0x21: min_rnr_timer 1 of the scenario) */
  cr_assert_eq(num("awk -F, '$4 == 33' f.txt | wc -l"), rnr);
  cr_assert_eq(num("awk -F, '$4 == 33 && $5 != 1' f.txt | wc -l"), 0, "tshark reads timer 1");
  /* PSNs: the first SENDs carry the requester's PSNs as recorded, going up by one */
  cr_assert_eq(sh("$P trace dump t.trace --type pkt_tx | grep ' REQ SEND ' | head -3 | "
                  "sed 's/.* psn 0x\\([0-9a-f]*\\) .*/\\1/' | while read h; do printf '%%d\\n' "
                  "0x$h; done > want.txt && awk -F, '$2 == 4 {print $3}' f.txt | head -3 > got.txt "
                  "&& cmp -s want.txt got.txt && "
                  "test $(sed -n 2p got.txt) -eq $(( $(sed -n 1p got.txt) + 1 ))"),
               0, "PSNs as recorded");
  /* the PSN an RNR NAK refuses is sent again (go-back-N from it) */
  cr_assert_eq(sh("p=$(awk -F, '$4 == 33 {print $3; exit}' f.txt) && "
                  "test $(awk -F, -v p=$p '$2 == 4 && $3 == p' f.txt | wc -l) -ge 2"),
               0, "the refused PSN is retransmitted");
}

Test(export, pcap_multi_packet_messages_and_rdma_writes, .timeout = 120)
{
  if (!have_tshark())
    cr_skip_test("tshark is not installed (tools/lib.sh installs it)");
  /* 64 KiB messages over a 4 KiB MTU: FIRST, 14 MIDDLE, LAST with consecutive PSNs */
  cr_assert_eq(sh("$P run $M/hdr-pair.yaml --trace t.trace --trace-packets > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --pcap t.trace -o cap.pcap --snaplen 128"), 0);
  long first = num(TSHARK " -Y 'infiniband.bth.opcode == 0' | wc -l");
  cr_assert_gt(first, 0);
  cr_assert_eq(num(TSHARK " -Y 'infiniband.bth.opcode == 2' | wc -l"), first);
  cr_assert_eq(num(TSHARK " -Y 'infiniband.bth.opcode == 1' | wc -l"), 14 * first);
  cr_assert_eq(sh(TSHARK " -Y 'infiniband.bth.opcode <= 2' -T fields -e infiniband.bth.psn | "
                  "head -16 | awk 'NR > 1 && $1 != p + 1 {exit 1} {p = $1}'"),
               0, "consecutive PSNs inside a message");
  /* the NCCL-style ring writes with RDMA WRITE (RETH) and WRITE_WITH_IMM */
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-ring.yaml --trace r.trace --trace-packets "
                  "> /dev/null"),
               0);
  cr_assert_eq(sh("$P trace export --pcap r.trace -o cap.pcap"), 0);
  long writes = num(TSHARK " -Y 'infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 11' | "
                    "wc -l");
  cr_assert_gt(writes, 0, "RDMA WRITE opcodes");
  cr_assert_eq(num(TSHARK " -Y 'infiniband.reth && infiniband.reth.r_key == 0' | wc -l"), 0,
               "every RETH names an rkey");
  cr_assert_gt(num(TSHARK " -Y 'infiniband.reth' | wc -l"), 0);
  cr_assert_eq(num(TSHARK " -Y '_ws.malformed' | wc -l"), 0);
  cr_assert_eq(sh("$P trace export --pcap nonexistent.trace -o x.pcap 2> /dev/null"), 2);
}

/* Without --trace-packets a simulator trace has only the RNR NAKs and NAKs among its packets:
 * no capture from it, a clear refusal instead, and no file left behind. */
Test(export, pcap_refuses_a_trace_without_every_packet, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer.yaml --trace t.trace > /dev/null"), 0);
  cr_assert_eq(sh("$P trace dump t.trace | grep -qx '# trace.packets = 1'"), 0,
               "the header says which packets (1: errors)");
  cr_assert_gt(num("$P trace dump t.trace --type pkt_tx | grep -c ' RNR_NAK '"), 100,
               "the RNR NAKs are still recorded");
  cr_assert_eq(num("$P trace dump t.trace --type pkt_tx | grep -v '^#' | grep -v ' RNR_NAK ' | "
                   "wc -l"),
               0,
               "no data or ACK packets");
  cr_assert_eq(sh("$P trace export --pcap t.trace -o none.pcap 2> err.txt"), 2);
  cr_assert_eq(sh("grep -q -- '--trace-packets' err.txt && test ! -e none.pcap"), 0,
               "the message names --trace-packets and no capture is written");
  cr_assert_eq(sh("$P trace export --pcap t.trace > none.pcap 2> /dev/null"), 2);
  cr_assert_eq(sh("test ! -s none.pcap"), 0, "nothing on stdout either");
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer.yaml --trace-packets > /dev/null 2>&1"), 2,
               "--trace-packets goes with --trace");
}

#define PY "/usr/bin/python3 -c "

Test(export, perfetto_json_loads_with_the_expected_events, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry0.yaml --trace t.trace > /dev/null"), 1);
  cr_assert_eq(sh("$P trace export --perfetto t.trace -o t.json"), 0);
  int rc = sh(PY "'\n"
                 "import json, collections\n"
                 "d = json.load(open(\"t.json\"))\n"
                 "ev = d[\"traceEvents\"]\n"
                 "ph = collections.Counter(e[\"ph\"] for e in ev)\n"
                 "names = {e[\"args\"][\"name\"] for e in ev if e[\"ph\"] == \"M\" and "
                 "e[\"name\"] == \"process_name\"}\n"
                 "assert names == {\"rank 0\", \"rank 1\"}, names\n"
                 "assert any(e[\"ph\"] == \"M\" and e[\"name\"] == \"thread_name\" for e in ev)\n"
                 "b = collections.Counter(e[\"id\"] for e in ev if e[\"ph\"] == \"b\")\n"
                 "e_ = collections.Counter(e[\"id\"] for e in ev if e[\"ph\"] == \"e\")\n"
                 "assert b and b == e_, \"every async slice ends\"\n"
                 "s = sorted(e[\"id\"] for e in ev if e[\"ph\"] == \"s\")\n"
                 "f = sorted(e[\"id\"] for e in ev if e[\"ph\"] == \"f\")\n"
                 "assert s and s == f, \"flow arrows pair up\"\n"
                 "assert any(e[\"ph\"] == \"s\" and e[\"name\"] == \"RNR NAK\" for e in ev)\n"
                 "assert any(e[\"ph\"] == \"s\" and e[\"name\"] == \"SEND\" for e in ev)\n"
                 "assert any(e[\"ph\"] == \"C\" and \"sends outstanding\" in e[\"args\"] for e "
                 "in ev)\n"
                 "assert any(e[\"ph\"] == \"C\" and e[\"name\"] == \"RNR NAKs received\" for e "
                 "in ev)\n"
                 "assert any(e[\"ph\"] == \"i\" and e[\"name\"] == \"RNR_RETRY_EXC_ERR\" for e "
                 "in ev)\n"
                 "assert all(isinstance(e.get(\"ts\", 0), (int, float)) for e in ev)\n"
                 "assert ph[\"X\"] >= 2 * ph[\"s\"]\n"
                 "'");
  cr_assert_eq(rc, 0, "the Perfetto JSON checks failed (see stderr)");
}

/* The ring protocols post every receive with one wr_id: slices pair with completions per QP in
 * post order (an unsignalled send ends with the completion that covers it), so every slice of a
 * completed run ends, after it began, with a real status (a receive still posted at the end is
 * pending); ranks are pid 1.. (pid 0 is Perfetto's idle process). */
static void check_pairing(const char *scenario)
{
  cr_assert_eq(sh("$P run $M/%s.yaml --trace t.trace > /dev/null", scenario), 0);
  cr_assert_eq(sh("$P trace export --perfetto t.trace -o t.json"), 0);
  int rc = sh(PY "'\n"
                 "import json, collections\n"
                 "ev = json.load(open(\"t.json\"))[\"traceEvents\"]\n"
                 "b = {e[\"id\"]: e for e in ev if e[\"ph\"] == \"b\"}\n"
                 "en = collections.Counter(e[\"id\"] for e in ev if e[\"ph\"] == \"e\")\n"
                 "assert len(b) > 100 and set(en) == set(b) and max(en.values()) == 1, "
                 "(len(b), len(en))\n"
                 "for e in ev:\n"
                 "  if e[\"ph\"] == \"e\":\n"
                 "    s = b[e[\"id\"]]\n"
                 "    assert (s[\"pid\"], s[\"tid\"], s[\"cat\"]) == (e[\"pid\"], e[\"tid\"], "
                 "e[\"cat\"]), (s, e)\n"
                 "    assert e[\"ts\"] >= s[\"ts\"], (s, e)\n"
                 "    st = e[\"args\"][\"status\"]\n"
                 "    assert st in (\"SUCCESS\", \"covered\") or (st == \"pending\" and "
                 "e[\"cat\"] == \"recv\"), e\n"
                 "assert min(e[\"pid\"] for e in ev if \"pid\" in e) == 1\n"
                 "recv = [e for e in ev if e[\"ph\"] == \"b\" and e[\"cat\"] == \"recv\"]\n"
                 "assert len({e[\"args\"][\"wr_id\"] for e in recv}) < len(recv) / 10, "
                 "\"receives share wr_ids\"\n"
                 "'");
  cr_assert_eq(rc, 0, "%s: the pairing checks failed (see stderr)", scenario);
}

Test(export, perfetto_pairs_by_qp_and_post_order, .timeout = 120)
{
  check_pairing("rnr-slow-consumer-ring");
  check_pairing("ring-slow-rank");
}

/* A window and an event limit keep a big run loadable; begun slices still end. */
Test(export, perfetto_window_and_event_limit, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-ring.yaml --trace t.trace > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --perfetto t.trace --max-events 100 -o t.json 2> err.txt"),
               0);
  cr_assert_eq(sh("grep -q 'stopped at 100 events' err.txt"), 0);
  int rc = sh(PY "'\n"
                 "import json, collections\n"
                 "d = json.load(open(\"t.json\"))\n"
                 "ev = d[\"traceEvents\"]\n"
                 "n = [e for e in ev if e[\"ph\"] != \"M\"]\n"
                 "b = collections.Counter(e[\"id\"] for e in ev if e[\"ph\"] == \"b\")\n"
                 "en = collections.Counter(e[\"id\"] for e in ev if e[\"ph\"] == \"e\")\n"
                 "assert b == en, \"every slice begun ends\"\n"
                 "drawn = [e for e in n if e[\"ph\"] in \"bCi\" or (e[\"ph\"] == \"X\" and not "
                 "e[\"name\"].endswith(\" arrives\"))]\n"
                 "assert 90 <= len(drawn) <= 100, len(drawn)\n"
                 "assert d[\"metadata\"][\"prepost_truncated\"] is True\n"
                 "'");
  cr_assert_eq(rc, 0, "--max-events (see stderr)");
  cr_assert_eq(sh("$P trace export --perfetto t.trace --window 20000:40000 -o w.json"), 0);
  rc = sh(PY "'\n"
             "import json\n"
             "ev = json.load(open(\"w.json\"))[\"traceEvents\"]\n"
             "st = [e for e in ev if e[\"ph\"] in \"bXsiC\"]\n"
             "assert st and all(20.0 <= e[\"ts\"] < 40.0 for e in st), "
             "min(e[\"ts\"] for e in st)\n"
             "'");
  cr_assert_eq(rc, 0, "--window (see stderr)");
  cr_assert_eq(sh("$P trace export --perfetto t.trace --window 5:5 2> /dev/null"), 2);
  cr_assert_eq(sh("$P trace export --svg t.trace --window 5:9 2> /dev/null"), 2);
}

/* Perfetto's protobuf format, decoded by a small wire-format reader (no protobuf library, no
 * trace_processor on Debian): every packet a Trace.packet; tracks declared before use (a
 * process per rank with pid 1.., a thread per QP, lanes and counter tracks parented to them);
 * on every track the slices nest (begin/end balanced, never an end first), and on one lane
 * never two WRs at once; the same events as the JSON export (slices, counters, flows). */
Test(export, perfetto_protobuf_decodes_and_matches_the_json, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-ring.yaml --trace t.trace > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --perfetto t.trace -o t.json"), 0);
  cr_assert_eq(sh("$P trace export --perfetto --proto t.trace -o t.pftrace"), 0);
  int rc = sh(PY "'\n"
                 "import json, collections\n"
                 "def fields(b):\n"
                 "  i, out = 0, []\n"
                 "  def varint():\n"
                 "    nonlocal i\n"
                 "    v, s = 0, 0\n"
                 "    while True:\n"
                 "      c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7\n"
                 "      if not c & 0x80: return v\n"
                 "  while i < len(b):\n"
                 "    k = varint(); f, wt = k >> 3, k & 7\n"
                 "    if wt == 0: out.append((f, varint()))\n"
                 "    elif wt == 1: out.append((f, int.from_bytes(b[i:i+8], \"little\"))); i += 8\n"
                 "    elif wt == 2:\n"
                 "      n = varint(); out.append((f, b[i:i+n])); i += n\n"
                 "    else: raise ValueError(\"wire type %%d\" %% wt)\n"
                 "  assert i == len(b), \"message overruns\"\n"
                 "  return out\n"
                 "def get(fs, f): return [v for k, v in fs if k == f]\n"
                 "tracks, kind, pids = {}, {}, set()\n"
                 "depth = collections.Counter(); begins = 0; counters = 0; flows = set(); ends = set()\n"
                 "last_ts = collections.defaultdict(int)\n"
                 "for f, pkt in fields(open(\"t.pftrace\", \"rb\").read()):\n"
                 "  assert f == 1\n"
                 "  p = fields(pkt)\n"
                 "  assert get(p, 10) == [1], \"one trusted sequence\"\n"
                 "  for td in map(fields, get(p, 60)):\n"
                 "    u = get(td, 1)[0]; assert u not in tracks, \"a track declared once\"\n"
                 "    par = get(td, 5)\n"
                 "    assert not par or par[0] in tracks, \"parent declared first\"\n"
                 "    tracks[u] = par[0] if par else None\n"
                 "    if get(td, 3): pids.add(get(fields(get(td, 3)[0]), 1)[0]); kind[u] = \"process\"\n"
                 "    elif get(td, 4): kind[u] = \"thread\"\n"
                 "    elif get(td, 8): kind[u] = \"counter\"\n"
                 "    else: kind[u] = \"lane\"\n"
                 "  for te in map(fields, get(p, 11)):\n"
                 "    t = get(te, 11)[0]; ty = get(te, 9)[0]; ts = get(p, 8)[0]\n"
                 "    assert t in tracks, \"event on a declared track\"\n"
                 "    if ty == 1: depth[t] += 1; begins += 1; assert kind[t] == \"lane\"\n"
                 "    if ty == 2: depth[t] -= 1; assert depth[t] >= 0, \"end before begin\"\n"
                 "    if ty == 1 or ty == 2: assert depth[t] <= 1, \"two WRs on one lane\"\n"
                 "    if ty == 4: counters += 1; assert kind[t] == \"counter\"\n"
                 "    flows.update(get(te, 47)); ends.update(get(te, 48))\n"
                 "assert pids == {1, 2}, pids\n"
                 "assert all(v == 0 for v in depth.values()), \"every slice ends\"\n"
                 "ev = json.load(open(\"t.json\"))[\"traceEvents\"]\n"
                 "jb = sum(1 for e in ev if e[\"ph\"] == \"b\")\n"
                 "jc = sum(len(e[\"args\"]) for e in ev if e[\"ph\"] == \"C\")  # a series each\n"
                 "js = {e[\"id\"] for e in ev if e[\"ph\"] == \"s\"}\n"
                 "assert begins == jb, (begins, jb)\n"
                 "assert counters == jc, (counters, jc)\n"
                 "assert flows == ends == js, (len(flows), len(ends), len(js))\n"
                 "'");
  cr_assert_eq(rc, 0, "the protobuf checks failed (see stderr)");
  cr_assert(num("wc -c < t.pftrace") < num("wc -c < t.json") / 2, "the protobuf is smaller");
}

/* The protocol layer: messages named as the protocol names them, one flow arrow each, and the
 * credit and occupancy counters within what the configuration allows. */
static void check_protocol(const char *scenario, const char *names, const char *counters,
                           int lo, int hi, int min_changes)
{
  cr_assert_eq(sh("$P run $M/%s.yaml --trace t.trace > /dev/null", scenario), 0);
  cr_assert_eq(sh("$P trace export --perfetto t.trace -o t.json"), 0);
  int rc = sh(PY "'\n"
                 "import json, collections\n"
                 "ev = json.load(open(\"t.json\"))[\"traceEvents\"]\n"
                 "want = set(\"%s\".split(\",\"))\n"
                 "s = collections.Counter(e[\"name\"] for e in ev if e.get(\"cat\") == "
                 "\"protocol\" and e[\"ph\"] == \"s\")\n"
                 "f = collections.Counter(e[\"name\"] for e in ev if e.get(\"cat\") == "
                 "\"protocol\" and e[\"ph\"] == \"f\")\n"
                 "assert set(s) == want, (sorted(s), sorted(want))\n"
                 "assert s == f, \"every protocol arrow lands\"\n"
                 "ids = [e[\"id\"] for e in ev if e[\"ph\"] == \"s\"]\n"
                 "assert len(ids) == len(set(ids)), \"flow ids are unique across layers\"\n"
                 "sends = {e[\"name\"] for e in ev if e[\"ph\"] == \"b\" and "
                 "e[\"cat\"] == \"send\"}\n"
                 "assert want <= sends, (\"send slices named by the protocol\", sends)\n"
                 "for kind in \"%s\".split(\",\"):\n"
                 "  v = [list(e[\"args\"].values())[0] for e in ev if e[\"ph\"] == \"C\" and "
                 "e[\"name\"].startswith(kind + \" qp 0x\")]\n"
                 "  assert len(v) >= %d, (kind, len(v))\n"
                 "  assert min(v) >= %d and max(v) <= %d, (kind, min(v), max(v))\n"
                 "  assert min(v) < max(v), (kind, \"the counter moves\")\n"
                 "'",
              names, counters, min_changes, lo, hi);
  cr_assert_eq(rc, 0, "%s: the protocol checks failed (see stderr)", scenario);
}

Test(export, perfetto_protocol_messages_and_credit_counters, .timeout = 120)
{
  /* 8 credits per peer (rq_depth), explicit CREDIT messages once 4 are owed */
  check_protocol("rnr-slow-consumer-eager", "EAGER,CREDIT", "eager credits", 0, 8, 200);
  check_protocol("rnr-slow-consumer-rndv", "RTS,FIN,CREDIT", "eager credits", 0, 8, 200);
  /* 8 slots per channel: credits the sender holds, slots the receiver has not returned */
  check_protocol("rnr-slow-consumer-ring", "data,credit", "ring credits,ring occupancy", 0, 8,
                 200);
  /* the MPI-style script: every message type, 64 credits (rq_depth) */
  check_protocol("p2p-script", "EAGER,RTS,CTS,FIN,ACK,CREDIT", "eager credits", 0, 64, 8);
}

Test(export, svg_is_well_formed, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry0.yaml --trace t.trace > /dev/null"), 1);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg"), 0);
  int rc = sh(PY "'\n"
                 "import xml.etree.ElementTree as ET\n"
                 "ns = {\"s\": \"http://www.w3.org/2000/svg\"}\n"
                 "root = ET.parse(\"t.svg\").getroot()\n"
                 "assert root.tag == \"{http://www.w3.org/2000/svg}svg\"\n"
                 "g = root.findall(\"s:g\", ns)\n"
                 "msgs = [x for x in g if x.get(\"class\", \"\").startswith(\"msg\")]\n"
                 "assert len(msgs) > 10, len(msgs)\n"
                 "assert any(\"rnr\" in x.get(\"class\") for x in msgs), \"an RNR NAK arrow\"\n"
                 "errs = [x for x in g if x.get(\"class\") == \"error\"]\n"
                 "texts = [t.text for x in errs for t in x.findall(\"s:text\", ns)]\n"
                 "assert \"RNR_RETRY_EXC_ERR\" in texts, texts\n"
                 "lanes = [x for x in root.findall(\"s:line\", ns) if x.get(\"class\") == "
                 "\"lane\"]\n"
                 "assert len(lanes) == 2\n"
                 "'");
  cr_assert_eq(rc, 0, "the SVG checks failed (see stderr)");
  cr_assert_eq(sh("$P trace export --svg t.trace --max-events 5 -o small.svg && "
                  "grep -q ': 5 of ' small.svg"), 0);
  cr_assert_eq(sh("$P trace export t.trace 2> /dev/null"), 2, "export needs a format");
  cr_assert_eq(sh("$P trace export --svg --pcap t.trace 2> /dev/null"), 2);
}

/* A default trace has no PSNs for the protocol's messages: none is printed (every SEND was
 * "psn 0x0"); the messages carry the protocol's names; a packet trace's PSNs are the real ones. */
Test(export, svg_names_messages_and_prints_only_real_psns, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/p2p-script.yaml --trace t.trace > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg && $SVG labels t.svg > l.txt"), 0);
  cr_assert_eq(num("(grep -c psn l.txt || true)"), 0, "no PSN the trace does not have");
  for (const char *const *n = (const char *const[]){"EAGER", "RTS", "CTS", "FIN", NULL}; *n; n++)
    cr_assert_eq(sh("grep -q '^%s ' l.txt", *n), 0, "a %s arrow", *n);
  cr_assert_eq(sh("$P run $M/lossy.yaml --trace p.trace --trace-packets > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --svg p.trace -o p.svg && $SVG labels p.svg > l.txt"), 0);
  cr_assert_eq(num("grep -c '^SEND psn 0x' l.txt"), num("grep -c '^SEND' l.txt"));
  cr_assert_gt(num("grep '^SEND psn' l.txt | cut -d' ' -f3 | sort -u | wc -l"), 100,
               "the PSNs of the packets, not one for all");
}

/* A send that never arrived says why: its completion's status at the sender (a flushed or
 * refused SEND is not lost); "lost" is for packets only. */
Test(export, svg_says_why_a_message_did_not_arrive, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry0.yaml --trace t.trace > /dev/null"), 1);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg && $SVG labels t.svg > l.txt"), 0);
  cr_assert_eq(sh("grep -q '(RNR_RETRY_EXC_ERR)$' l.txt"), 0, "the refused send");
  cr_assert_eq(sh("grep -q '(WR_FLUSH_ERR)$' l.txt"), 0, "the flushed send");
  cr_assert_eq(num("(grep -c lost l.txt || true)"), 0);
  cr_assert_eq(num("grep -c 'class=\"msg [a-z]* undelivered' t.svg"), 2);
}

/* Labels fit their lanes: a ring's RDMA_WRITE_WITH_IMM packets needed 267 px between lanes
 * 170 px apart. */
Test(export, svg_labels_fit_their_lanes, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-ring.yaml --trace t.trace --trace-packets "
                  "> /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg && $SVG fit t.svg"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg --max-events 50 && $SVG fit t.svg"), 0);
}

/* --time-scale: each arrow as long as its time; a picture too tall is refused before writing. */
Test(export, svg_time_scale, .timeout = 120)
{
  cr_assert_eq(sh("$P run $M/lossy.yaml --trace t.trace --trace-packets > /dev/null"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace --time-scale 20ns -o t.svg && "
                  "$SVG scale t.svg 20 && grep -q 'class=\"ruler\"' t.svg"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace --time-scale 1ns -o big.svg 2> e.txt"), 2);
  cr_assert_eq(sh("grep -q 'use a larger --time-scale' e.txt && test ! -s big.svg"), 0);
  cr_assert_eq(sh("$P trace export --svg t.trace --time-scale 20 2> /dev/null"), 2,
               "a duration needs its unit");
  cr_assert_eq(sh("$P trace export --perfetto t.trace --time-scale 1us 2> /dev/null"), 2);
}

/* What a user sees: headless Chromium draws the chart (lanes, blue data arrows, red RNR NAKs).
 * tools/lib.sh installs chromium and python3-pil. */
Test(export, svg_renders_in_a_browser, .timeout = 180)
{
  cr_assert_eq(sh("command -v chromium > /dev/null"), 0, "chromium is not installed "
               "(tools/lib.sh installs it)");
  cr_assert_eq(sh("$P run $M/rnr-slow-consumer-retry0.yaml --trace t.trace > /dev/null"), 1);
  cr_assert_eq(sh("$P trace export --svg t.trace -o t.svg"), 0);
  cr_assert_eq(sh("w=$(grep -o 'width=\"[0-9]*\"' t.svg | head -1 | tr -dc 0-9) && "
                  "h=$(grep -o 'height=\"[0-9]*\"' t.svg | head -1 | tr -dc 0-9) && "
                  "HOME=$PWD timeout 120 chromium --headless --no-sandbox --disable-gpu "
                  "--hide-scrollbars --user-data-dir=$PWD/chrome --screenshot=$PWD/shot.png "
                  "--window-size=$w,$h file://$PWD/t.svg > chrome.log 2>&1 && "
                  "$SVG shot shot.png t.svg"), 0, "the screenshot (see stderr)");
}

/* ================================================================ bounded by the trace */

#include "prepost/trace.h"

static int file_sink(void *ctx, const void *buf, size_t len)
{
  return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

/* A trace with every packet whose records are one honest 8 KiB SEND (2 packets at MTU 4096) and
 * `n` more data packets of `len` bytes that say they span `npkts` MTU packets. */
static void write_packets_trace(const char *name, uint32_t n, uint32_t len, uint32_t npkts)
{
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  struct pp_trace_info info = {.version = "t", .backend = "simgrid", .scenario = "forged",
                               .nranks = 2, .packets = PP_TRACE_PACKETS_ALL};
  struct pp_trace_writer *w;
  cr_assert_eq(pp_trace_writer_create(file_sink, f, &info, &w), PP_OK);
  cr_assert_eq(pp_trace_kv_u64(w, "engine.qp.mtu", 4096), PP_OK);
  cr_assert_eq(pp_trace_begin(w), PP_OK);
  struct pp_trace_pkt k = {.kind = PP_TPKT_REQ, .opcode = PP_WR_SEND, .src_rank = 0,
                           .dst_rank = 1, .src_qpn = 0x100, .dst_qpn = 0x101, .psn = 1,
                           .npkts = 2, .len = 8192, .wire_bytes = 8300};
  pp_trace_pkt_tx_id(w, 1000, &k);
  for (uint32_t i = 0; i < n; i++) {
    k.psn += k.npkts;
    k.npkts = npkts;
    k.len = len;
    pp_trace_pkt_tx_id(w, 2000 + i, &k);
  }
  cr_assert_eq(pp_trace_finish(w), PP_OK);
  pp_trace_writer_destroy(w);
  cr_assert_eq(fclose(f), 0);
}

/* A forged packet count (4 billion MTU packets for 64 bytes) used to make `trace export --pcap`
 * write frames until the disk was full: the counts are checked against the bytes before any
 * output, exit 2, no file. */
Test(export, pcap_refuses_a_packet_count_its_bytes_cannot_hold, .timeout = 60)
{
  write_packets_trace("ok.trace", 1, 12288, 3);
  cr_assert_eq(sh("$P trace export --pcap ok.trace -o ok.pcap 2> err.txt"), 0);
  /* pcap header 24 + 5 frames of 16 + headers + payload: 8192 + 12288 payload bytes */
  long size = num("wc -c < ok.pcap");
  cr_assert(size > 20480 && size < 20480 + 5 * 200, "%ld bytes", size);

  write_packets_trace("lie.trace", 1, 64, 0xffffffffu);
  cr_assert_eq(sh("$P trace export --pcap lie.trace -o lie.pcap 2> err.txt"), 2);
  cr_assert_eq(sh("grep -q 'record 1 (pkt_tx of rank 0) is inconsistent: 64 bytes in 4294967295 "
                  "MTU packets' err.txt"), 0);
  cr_assert_eq(sh("grep -q 'corrupt or forged' err.txt"), 0);
  cr_assert_neq(sh("test -e lie.pcap"), 0, "no capture written");
  /* too few packets for the bytes (frames larger than any MTU) are as false */
  write_packets_trace("few.trace", 1, 1 << 20, 1);
  cr_assert_eq(sh("$P trace export --pcap few.trace -o few.pcap 2> err.txt"), 2);
  cr_assert_eq(sh("grep -q '1048576 bytes in 1 MTU packets' err.txt"), 0);
}

/* Honest counts that still need more room than the output's file system has: refused up front
 * with the size, before the file is created (here /proc, which has no free blocks). */
Test(export, pcap_refuses_a_capture_larger_than_the_free_space, .timeout = 60)
{
  write_packets_trace("big.trace", 200, 1 << 20, 256);
  cr_assert_eq(sh("$P trace export --pcap big.trace -o /proc/x.pcap 2> err.txt"), 2);
  cr_assert_eq(sh("grep -q 'the capture would take up to 20[0-9.]* MiB (51202 frames), more "
                  "than the 0.0 MiB free where .*/proc/x.pcap' err.txt"), 0);
  cr_assert_eq(sh("grep -q -- '--snaplen N' err.txt"), 0);
  /* with --snaplen 128 the same capture is small */
  cr_assert_eq(sh("$P trace export --pcap big.trace --snaplen 128 -o s.pcap"), 0);
  cr_assert(num("wc -c < s.pcap") < 200 * 256 * 160, "snaplen bounds each frame");
}

/* The Perfetto and SVG exports of the same forged trace: one slice per record, whatever the
 * records claim (their output grows with the records present, not with the counts inside). */
Test(export, perfetto_and_svg_stay_proportional_to_the_records, .timeout = 60)
{
  write_packets_trace("lie.trace", 100, 64, 0xffffffffu);
  long in = num("wc -c < lie.trace");
  cr_assert_eq(sh("$P trace export --perfetto lie.trace -o p.json"), 0);
  cr_assert_eq(sh("$P trace export --svg lie.trace -o p.svg"), 0);
  cr_assert(num("wc -c < p.json") < 1000 * in, "perfetto %ld bytes for %ld", num("wc -c < p.json"),
            in);
  cr_assert(num("wc -c < p.svg") < 1000 * in, "svg");
}
