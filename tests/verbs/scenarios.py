#!/usr/bin/env python3
"""The verbs suite's scenario runs: each scenario of scenarios.list on the verbs backend (an RDMA
device: Soft-RoCE in the guest), its expectation asserted, and the same scenario on the simulator
compared with it field by field (timings excluded). One PASS/FAIL line per check, a closing
"N passed, N failed" line; exit 1 if anything failed.

usage: scenarios.py PREPOST [--list FILE] [--models DIR] [--only NAME] [--out DIR]
                    [--launcher CMD] [--plugin PATH]...

--launcher CMD: start the verbs run through a cluster's launcher, one process per rank: CMD is
put before the prepost command line, with {n} replaced by the scenario's number of ranks (e.g.
"mpirun.openmpi --allow-run-as-root --oversubscribe -n {n}": the ranks learn rank, size and each
other's connection information through PMIx, backends/verbs/README.md).

--plugin PATH: load this plug-in (a protocol of its own, README "Write your own protocol") in
both runs, simulated and verbs: the list's scenarios may then name its protocol.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_OF = {"completed": 0, "errors": 1, "stalled": 3, "timeout": 3, "no_progress": 3}


def run(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s", time.monotonic() - t0
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def keys(o, prefix=""):
    """The key paths of a JSON value (status_counts keys are values, not structure)."""
    out = set()
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "status_counts":
                out.add(prefix + k)
                continue
            out.add(prefix + k)
            out |= keys(v, prefix + k + ".")
    elif isinstance(o, list) and o:
        out |= keys(o[0], prefix + "[].")
    return out


def compare(mode, sim, rxe):
    """Differences between the two runs under a parity mode; empty when they agree."""
    d = []
    if mode == "shape-if-rnr":
        if rxe["rnr_naks"] == 0 and rxe["outcome"] == "completed":
            return d  # the guest's sender never outran the receiver: nothing to compare
        mode = "shape"

    def same(what, a, b):
        if a != b:
            d.append(f"{what}: simgrid {a!r}, verbs {b!r}")

    same("outcome", sim["outcome"], rxe["outcome"])
    same("ranks", len(sim["ranks"]), len(rxe["ranks"]))
    if mode in ("exact", "protocol"):
        same("RNR present", sim["rnr_naks"] > 0, rxe["rnr_naks"] > 0)
    for s, r in zip(sim["ranks"], rxe["ranks"]):
        i = s["rank"]
        same(f"rank {i} done", s["done"], r["done"])
        if mode in ("exact", "counts", "protocol"):
            for f in ("messages_sent", "messages", "bytes", "corrupt"):
                same(f"rank {i} {f}", s[f], r[f])
            if mode == "protocol":
                same(f"rank {i} statuses", sorted(s["status_counts"]), sorted(r["status_counts"]))
            else:
                same(f"rank {i} status_counts", s["status_counts"], r["status_counts"])
        else:  # shape
            same(f"rank {i} statuses", sorted(s["status_counts"]), sorted(r["status_counts"]))
            same(f"rank {i} RNR_RETRY_EXC_ERR", s["status_counts"].get("RNR_RETRY_EXC_ERR", 0),
                 r["status_counts"].get("RNR_RETRY_EXC_ERR", 0))
            for run_, name in ((s, "simgrid"), (r, "verbs")):
                if run_["corrupt"]:
                    d.append(f"rank {i}: {name} received {run_['corrupt']} corrupt/out-of-order")
    # p2p protocols report every completed receive with the checksum of its bytes: per receiving
    # rank and source, the same messages in the same order (MPI's non-overtaking rule; which
    # source a wildcard receive matched first may differ)
    def streams(run_):
        out = {}
        for x in run_.get("receives", []):
            key = (x["rank"], x["source"])
            out.setdefault(key, []).append((x["tag"], x["size"], x["msg_len"], x["status"],
                                            x["protocol"], x["checksum"]))
        return out
    rs, rr = streams(sim), streams(rxe)
    # a collective checks every element of every iteration: the same number on both, none wrong
    if "collective" in sim or "collective" in rxe:
        sc, rc_ = sim.get("collective", {}), rxe.get("collective", {})
        same("collective elements_checked", sc.get("elements_checked"),
             rc_.get("elements_checked"))
        for c_, name in ((sc, "simgrid"), (rc_, "verbs")):
            if c_.get("elements_wrong", 0):
                d.append(f"{name}: {c_['elements_wrong']} collective elements wrong")
    if mode != "shape":
        for key in sorted(set(rs) | set(rr)):
            if rs.get(key) != rr.get(key):
                d.append(f"receives of rank {key[0]} from rank {key[1]}: simgrid {rs.get(key)}, "
                         f"verbs {rr.get(key)}")
    if mode == "shape":
        # every message a sender saw acknowledged was received intact, in order, on both
        for run_, name in ((sim, "simgrid"), (rxe, "verbs")):
            sent = sum(x["messages_sent"] for x in run_["ranks"])
            got = sum(x["messages"] for x in run_["ranks"])
            if sent != got:
                d.append(f"{name}: {sent} sends acknowledged, {got} messages received intact")
    return d


def parity(mode, sim, rxe):
    """What the simulated and the rxe run disagree on in parity mode `mode`: compare()'s
    differences, then the JSON keys and the backend names, which every mode wants the same."""
    d = compare(mode, sim, rxe)
    ks, kr = keys(sim), keys(rxe)
    if mode == "shape-if-rnr" and rxe["rnr_naks"] == 0 and rxe["outcome"] == "completed":
        ks = {k for k in ks if not k.startswith("hang")}  # only a run that stopped has one
    if ks != kr:
        d.append(f"JSON keys differ: only simgrid {sorted(ks - kr)}, only verbs {sorted(kr - ks)}")
    if rxe.get("backend") != "verbs" or sim.get("backend") != "simgrid":
        d.append("backend names")
    return d


def expect(what, rxe, rc):
    d = []
    oc = rxe["outcome"]
    if rc != EXIT_OF.get(oc, -1):
        d.append(f"exit {rc} for outcome {oc}")
    intact = (all(r["corrupt"] == 0 for r in rxe["ranks"]) and
              rxe.get("collective", {}).get("elements_wrong", 0) == 0)
    if what == "no-rnr":
        if oc != "completed" or rxe["rnr_naks"] != 0 or not intact:
            d.append(f"want completed without RNR: {oc}, {rxe['rnr_naks']} RNR NAKs")
    elif what == "rnr":
        if oc != "completed" or rxe["rnr_naks"] == 0 or not intact:
            d.append(f"want completed with RNR NAKs: {oc}, {rxe['rnr_naks']} RNR NAKs")
    elif what == "rnr-exc":
        if oc != "errors" or rxe["status_counts"].get("RNR_RETRY_EXC_ERR", 0) < 1:
            d.append(f"want RNR_RETRY_EXC_ERR: {oc}, {rxe['status_counts']}")
    elif what == "completed":
        if oc != "completed" or not intact:
            d.append(f"want completed, intact: {oc}")
    elif what == "errors":
        if oc != "errors":
            d.append(f"want errors: {oc}")
    elif what == "rnr-exc-if-rnr":
        # rnr_retry 0 on a receiver that is slow only against a fast enough sender: whether an
        # RNR NAK happens on rxe depends on how fast the emulated guest runs the sender; when
        # one did it was fatal, when none did everything arrived
        if rxe["rnr_naks"] > 0 or oc != "completed":
            if oc != "errors" or rxe["status_counts"].get("RNR_RETRY_EXC_ERR", 0) != 1:
                d.append(f"want RNR_RETRY_EXC_ERR after an RNR NAK: {oc}, "
                         f"{rxe['rnr_naks']} RNR NAKs, {rxe['status_counts']}")
        elif not intact:
            d.append("completed without RNR NAKs but not intact")
    elif what.startswith("hang:"):
        # exit 3 with a hang object (collected from every rank) whose cause starts with the
        # word after "hang:" (unposted, wildcard, cycle, qp_error, silent, credits)
        h = rxe.get("hang")
        if rc != 3 or oc not in ("stalled", "timeout", "no_progress"):
            d.append(f"want exit 3 and a hang: exit {rc}, {oc}")
        if not h or h.get("stuck_ranks", 0) < 1 or len(h.get("ranks", [])) < 1:
            d.append(f"want a hang object with stuck ranks: {h!r}")
        elif not h.get("cause", "").startswith(what[5:]):
            d.append(f"want the cause {what[5:]!r}...: {h.get('cause')!r}")
        # one time base: wall-clock ns from GO, for at_ns and every wait (CLOCK_MONOTONIC
        # values, the guest's uptime, would lie far past at_ns; a timer note's time is when it
        # fires, in the future)
        if h and h.get("time_base") != "run":
            d.append(f"want time_base 'run': {h.get('time_base')!r}")
        late = [w["since_ns"] for r in (h or {}).get("ranks", []) for w in r["waits"]
                if w["kind"] != "timer" and w["since_ns"] > h["at_ns"] + 2_000_000_000]
        if late:
            d.append(f"waits since after the hang was detected ({h['at_ns']} ns): {late[:4]}")
    else:
        d.append(f"unknown expectation {what!r}")
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prepost")
    ap.add_argument("--list", default=os.path.join(HERE, "scenarios.list"))
    ap.add_argument("--models", default=os.path.join(HERE, "..", "..", "models"))
    ap.add_argument("--only", action="append")
    ap.add_argument("--out", default=os.environ.get("GUEST_OUT", "/tmp"))
    ap.add_argument("--launcher")
    ap.add_argument("--plugin", action="append", default=[])
    a = ap.parse_args()
    passed = failed = 0

    def report(ok, name, detail=()):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"PASS {name}")
        else:
            failed += 1
            print(f"FAIL {name}")
            for x in detail:
                print(f"    {x}")
        sys.stdout.flush()

    with open(a.list) as f:
        lines = [l.split("#")[0].split() for l in f]
    for fields in lines:
        if not fields:
            continue
        name, mode, want, extra = fields[0], fields[1], fields[2], fields[3:]
        if a.only and name not in a.only:
            continue
        if "/" in name:  # a path from the repository root (traces/hangs/...)
            path = os.path.join(HERE, "..", "..", name + ".yaml")
        else:
            path = os.path.join(a.models, "scenarios", name + ".yaml")
        base = [a.prepost, "run", path, "--json", "--models", a.models]
        for p in a.plugin:
            base += ["--plugin", p]
        src, sout, serr, st = run(base, 300)
        vcmd = base + ["--backend", "verbs", "--timeout", "180s"] + extra
        vtag = "verbs"
        if a.launcher:
            try:
                n = len(json.loads(sout)["ranks"])
            except (ValueError, KeyError):
                n = 0
            vcmd = [x.replace("{n}", str(n)) for x in shlex.split(a.launcher)] + vcmd
            vtag = "verbs-" + os.path.basename(shlex.split(a.launcher)[0]).split(".")[0]
        rrc, rout, rerr, rt = run(vcmd, 240)
        for tag, out, err_, rc in (("simgrid", sout, serr, src), (vtag, rout, rerr, rrc)):
            base_name = os.path.basename(name)
            with open(os.path.join(a.out, f"{base_name}.{tag}.json"), "w") as g:
                g.write(out)
            with open(os.path.join(a.out, f"{base_name}.{tag}.stderr"), "w") as g:
                g.write(err_)
        try:
            sim = json.loads(sout)
        except ValueError:
            report(False, f"{name}: simulator run", [f"exit {src}", serr.strip()[-500:]])
            continue
        try:
            rxe = json.loads(rout)
        except ValueError:
            report(False, f"{name}: {vtag} run", [f"exit {rrc}", rerr.strip()[-800:]])
            continue
        summary = (f"{rxe['outcome']}, {rxe['messages']} messages, {rxe['rnr_naks']} RNR NAKs "
                   f"(simulated {sim['rnr_naks']}), {rxe['status_counts']}, {rt:.1f} s")
        report(not expect(want, rxe, rrc), f"{name}: {vtag} {want}: {summary}",
               expect(want, rxe, rrc))
        d = parity(mode, sim, rxe)
        report(not d, f"{name}: parity ({mode})", d)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
