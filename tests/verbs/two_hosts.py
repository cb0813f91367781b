#!/usr/bin/env python3
"""The verdicts of tests/verbs/two-hosts.sh, on the host, after the two guests powered off: each
case's verbs run (rank 0 in guest A, rank 1 in guest B) against the same scenario on the
simulator, and what the guests' counters say about the link. One PASS/FAIL line per check, a
closing "two hosts: N passed, N failed" line; exit 1 if anything failed.

usage: two_hosts.py PREPOST --out DIR --loss PERCENT --case NAME:SCENARIO:LOSS[:SETS]...

DIR holds a/ and b/, the guests' folders: NAME.json (rank 0's report; rank 1 prints none),
NAME.rc, NAME.stderr, NAME.before and NAME.after (rxe0's hw_counters, eth0's statistics, tc's
qdiscs). A case without loss is asserted as tests/verbs/scenarios.list says for that scenario
(its expectation and parity mode, scenarios.py's checks); the lossy case: completed on both,
the counts of the simulator's run with faults.loss = LOSS/100 (messages, bytes, statuses per
rank), retries > 0 on both, and netem's drops and rxe's retransmissions in the guests' counters.
SETS (k=v[,k=v...], or -) are the scenario keys the guests' runs were given; the simulator's run
gets the same.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenarios  # noqa: E402  (expect, parity: the one-guest suite's checks)


def listed():
    """scenarios.list: NAME -> (parity mode, expectation)."""
    out = {}
    with open(os.path.join(HERE, "scenarios.list")) as f:
        for line in f:
            x = line.split("#")[0].split()
            if x:
                out[x[0]] = (x[1], x[2])
    return out


def snapshot(path):
    """NAME.before/after: counters by name, and the netem qdisc's drops (None: no netem)."""
    c, drops = {}, None
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition(" ")
                if k == "qdisc":
                    for q in json.loads(v or "[]"):
                        if q.get("kind") == "netem":
                            drops = q.get("drops", 0)
                elif v.strip().lstrip("-").isdigit():
                    c[k] = int(v)
    except (OSError, ValueError):
        return None, None
    return c, drops


def delta(d, side, name):
    b, _ = snapshot(os.path.join(d, side, name + ".before"))
    a, drops = snapshot(os.path.join(d, side, name + ".after"))
    if b is None or a is None:
        return None, None
    return {k: a[k] - b.get(k, 0) for k in a}, drops


def capture_check(prepost, path):
    """A guest's capture of the lossy case, read by `prepost trace import`: (ok, what, detail).
    ok: it has the run's requests and ACKs and every retransmission repeats its original (rxe's
    retry race, backends/verbs/README.md, breaks that first: its diagnosis is printed)."""
    if not os.path.exists(path):
        return False, "missing", [f"{path}: tcpdump wrote nothing"]
    p = subprocess.run([prepost, "trace", "import", "--pcap", path, "--json"],
                       capture_output=True, text=True, timeout=120)
    try:
        t = json.loads(p.stdout)
    except ValueError:
        return False, "unreadable", [f"prepost trace import: exit {p.returncode}",
                                     p.stderr[-500:]]
    what = (f"{t.get('messages')} messages, {t.get('retries')} retries, "
            f"{t.get('retransmitted_packets')} packets resent, {t.get('retrans_mismatch')} differing "
            f"from their originals")
    e = []
    if not t.get("messages") or not t.get("retries"):
        e.append("want the run's messages and retransmissions in the capture")
    if t.get("retrans_mismatch"):
        q = subprocess.run([prepost, "trace", "import", "--pcap", path], capture_output=True,
                           text=True, timeout=120)
        e += [ln.strip() for ln in q.stdout.splitlines() if "diagnosis:" in ln or
              "mismatched" in ln]
    return not e, what, e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prepost")
    ap.add_argument("--out", required=True)
    ap.add_argument("--loss", required=True, type=float)
    ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "models"))
    ap.add_argument("--case", action="append", default=[])
    a = ap.parse_args()
    lst = listed()
    passed = failed = 0

    def report(ok, what, detail=()):
        nonlocal passed, failed
        passed, failed = passed + bool(ok), failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'} {what}")
        for x in ([] if ok else detail):
            print(f"    {x}")
        sys.stdout.flush()

    for case in a.case:
        name, sc, loss, *sets = case.split(":")
        loss = float(loss)
        path = os.path.join(a.models, "scenarios", sc + ".yaml")
        cmd = [a.prepost, "run", path, "--json", "--models", a.models]
        for kv in (sets[0].split(",") if sets and sets[0] != "-" else []):
            cmd += ["--set", kv]
        if loss:
            cmd += ["--set", f"faults.loss={loss / 100:g}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        try:
            sim = json.loads(p.stdout)
        except ValueError:
            report(False, f"{name}: simulator run ({sc})", [f"exit {p.returncode}", p.stderr[-500:]])
            continue
        rcs = []
        for side in ("a", "b"):
            try:
                with open(os.path.join(a.out, side, name + ".rc")) as f:
                    rcs.append(int(f.read()))
            except (OSError, ValueError):
                rcs.append(None)
        try:
            with open(os.path.join(a.out, "a", name + ".json")) as f:
                rxe = json.load(f)
        except (OSError, ValueError):
            err = ""
            for side in ("a", "b"):
                try:
                    with open(os.path.join(a.out, side, name + ".stderr")) as f:
                        err += f"{side}: " + f.read()[-400:]
                except OSError:
                    pass
            report(False, f"{name}: verbs run across the guests ({sc}): no report",
                   [f"exit statuses A {rcs[0]}, B {rcs[1]}", err.strip()])
            continue
        da, drops_a = delta(a.out, "a", name)
        db, drops_b = delta(a.out, "b", name)
        summary = (f"{rxe['outcome']}, {rxe['messages']} messages, {rxe['rnr_naks']} RNR NAKs, "
                   f"{rxe['retries']} retries (simulated: {sim['outcome']}, {sim['messages']}, "
                   f"{sim['rnr_naks']}, {sim['retries']}), {rxe['status_counts']}, "
                   f"{rxe['sim_time_ns'] / 1e9:.1f} s")
        # one rank per guest, both exited as the outcome says
        d = []
        hosts = [r.get("host", "").split("/")[0] for r in rxe["ranks"]]  # HOST/DEVICE
        if hosts != ["rxe-a", "rxe-b"]:
            d.append(f"rank hosts {hosts}, want ['rxe-a', 'rxe-b'] (one rank per guest)")
        want_rc = scenarios.EXIT_OF.get(rxe["outcome"], -1)
        if rcs != [want_rc, want_rc]:
            d.append(f"exit statuses A {rcs[0]}, B {rcs[1]} for outcome {rxe['outcome']}")
        # the traffic went over the link: each guest's rxe0 sent and received packets, and eth0
        # carried at least as many as rxe0 sent, less what netem dropped (its qdisc drops a
        # packet before the device counts it as transmitted)
        if da is None or db is None:
            d.append("a guest's counters are missing")
        else:
            for side, x, drops in (("A", da, drops_a), ("B", db, drops_b)):
                if x.get("rxe.sent_pkts", 0) <= 0 or x.get("rxe.rcvd_pkts", 0) <= 0:
                    d.append(f"{side}: rxe0 sent {x.get('rxe.sent_pkts')}, received "
                             f"{x.get('rxe.rcvd_pkts')} packets")
                if x.get("eth0.tx_packets", 0) + (drops or 0) < x.get("rxe.sent_pkts", 0):
                    d.append(f"{side}: eth0 sent {x.get('eth0.tx_packets')} packets and netem "
                             f"dropped {drops or 0}, rxe0 sent {x.get('rxe.sent_pkts')}")
            # nothing but netem loses a packet on the link: what one rxe0 sent, less what its
            # netem dropped, the other rxe0 received
            for src, x, y, drops in (("A", da, db, drops_a), ("B", db, da, drops_b)):
                sent, got = x.get("rxe.sent_pkts", 0), y.get("rxe.rcvd_pkts", 0)
                if sent - (drops or 0) != got:
                    d.append(f"{src} -> {'B' if src == 'A' else 'A'}: rxe0 sent {sent}, netem "
                             f"dropped {drops or 0}, the other rxe0 received {got}")
        wire = "" if da is None or db is None else (
            f"; rxe0 sent A {da.get('rxe.sent_pkts')} B {db.get('rxe.sent_pkts')}, "
            f"received A {da.get('rxe.rcvd_pkts')} B {db.get('rxe.rcvd_pkts')} packets")
        report(not d, f"{name}: {sc} across two guests: {summary}{wire}", d)

        if not loss:
            mode, want = lst.get(sc, ("protocol", "completed"))
            e = scenarios.expect(want, rxe, want_rc if rcs[0] is None else rcs[0])
            report(not e, f"{name}: verbs {want}", e)
        else:
            # the lossy case: the same outcome and counts as the simulator's run at that loss
            # rate, and retransmissions on both (how many is up to the draws and the timing)
            e = []
            if rxe["outcome"] != "completed" or sim["outcome"] != "completed":
                e.append(f"want completed on both: verbs {rxe['outcome']}, simulator "
                         f"{sim['outcome']}")
            if not rxe["retries"] or not sim["retries"]:
                e.append(f"want retries > 0 on both: verbs {rxe['retries']}, simulator "
                         f"{sim['retries']}")
            report(not e, f"{name}: completed with retries on both, loss {loss:g}%", e)
            # netem dropped rxe's packets (counted by the netem qdisc, which only RoCE's UDP
            # packets reach) and rxe's requester retransmitted
            n = []
            if drops_a is None or drops_b is None:
                n.append(f"netem qdisc missing: A {drops_a}, B {drops_b}")
            elif drops_a + drops_b <= 0:
                n.append("netem dropped no packet")
            retx = None if da is None else da.get("rxe.completer_retry_err")
            if not retx:
                n.append(f"rank 0's rxe0 retransmitted nothing (completer_retry_err {retx})")
            got = "" if da is None or db is None else (
                f": netem dropped A {drops_a} of {da.get('rxe.sent_pkts')}, B {drops_b} of "
                f"{db.get('rxe.sent_pkts')} rxe packets; A completer_retry_err "
                f"{da.get('rxe.completer_retry_err')}, rcvd_seq_err {da.get('rxe.rcvd_seq_err')}"
                f", retry_exceeded_err {da.get('rxe.retry_exceeded_err')}; B out_of_seq_request "
                f"{db.get('rxe.out_of_seq_request')}, duplicate_request "
                f"{db.get('rxe.duplicate_request')}")
            report(not n, f"{name}: netem's loss hit rxe's packets{got}", n)
            for side in ("a", "b"):
                ok, what, detail = capture_check(a.prepost, os.path.join(a.out, side,
                                                                          name + ".pcap"))
                report(ok, f"{name}: {side.upper()}'s capture: {what}", detail)
            mode = "counts"
        d = scenarios.parity(mode, sim, rxe)
        report(not d, f"{name}: parity with the simulator ({mode})", d)
    print(f"two hosts: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
