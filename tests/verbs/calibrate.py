#!/usr/bin/env python3
"""tests/verbs/calibrate.py PREPOST --out DIR [--profile nics/rxe-tcg.yaml]: runs INSIDE the
Soft-RoCE guest (tests/verbs/suite.sh, step calibrate).

1. `prepost calibrate` measures the device and writes a profile that `prepost run` loads; its
   retry_cnt 7 measurement finds rxe's rules (rc_model: rxe), as the shipped profile says.
2. With the shipped calibrated profile (models/nics/rxe-tcg.yaml, the platform's bandwidth set to
   its measured line rate) the simulator predicts what rxe does in the timing-sensitive scenarios:
   the naive slow consumer (rnr_retry 7) at several consume times, RNR NAKs present or absent;
   rnr_retry 3 with 3 ms holds (and 300 ms holds), RNR_RETRY_EXC_ERR or completion. Each case has a
   margin computed from the profile: how far it is from the threshold that flips its outcome (the
   hold, consume plus one 4 KiB message latency, against the time the sender needs to fill the
   receive queue at the WQE cost; or against rnr_retry RNR delays of the scenario's code: the
   profile's for a predicted RNR_RETRY_EXC_ERR, the shortest rxe's jiffy timer allows for a
   predicted completion, rnr_floor()). Under emulation the RNR delays spread 2-6x between
   repetitions and the sender's pace with them, so a prediction is asserted only with a margin of
   MARGIN (3) or more; a case below it is reported with its margin, and not asserted. An
   exhaustion case runs RXE_REPS times on rxe and every run must agree. rxe's responder NAKs a
   refused SEND once per attempt however many packets it spans (RNR NAK at its first packet, one
   PSN sequence-error NAK at its second: rxe_resp.c), so RNR NAKs beyond one per refused message
   are retries that came back before the receive did. The default profile's
   prediction (the IBTA delays of a ConnectX-6) is printed beside it, which is what the
   calibration changes.
Exit 1 when a measured profile does not load or an asserted prediction is wrong.
"""
import json
import re
import subprocess
import sys

MARGIN = 3.0
RXE_REPS = 3  # rxe runs of each exhaustion case
TICK_NS = 4000000  # the guest kernel's jiffy (Debian's CONFIG_HZ=250): rxe's timers count in them
IBTA_RNR_NS = [655360000, 10000, 20000, 30000, 40000, 60000, 80000, 120000, 160000, 240000,
               320000, 480000, 640000, 960000, 1280000, 1920000, 2560000, 3840000, 5120000,
               7680000, 10240000, 15360000, 20480000, 30720000, 40960000, 61440000, 81920000,
               122880000, 163840000, 245760000, 327680000, 491520000]

# (name, scenario, --set assignments, kind, open): kind "presence" (rnr_retry 7: RNR NAKs or
# none) or "exhaustion" (rnr_retry 3: RNR_RETRY_EXC_ERR or completion); `open`: a case rxe was
# seen to contradict although its margin is large, reported with what happened and never
# counted as a failure until it is understood (the reason is the string)
CASES = [
    ("slow consumer, consume 100us", "rnr-slow-consumer", ["workload.consume=100us"], "presence",
     None),
    ("slow consumer, consume 10ms", "rnr-slow-consumer", ["workload.consume=10ms"], "presence",
     None),
    ("slow consumer, consume 50ms", "rnr-slow-consumer", ["workload.consume=50ms"], "presence",
     None),
    ("retry 3, 3 ms holds", "rnr-slow-consumer-retry3", ["workload.consume=3ms"], "exhaustion",
     None),
    ("retry 3, 3 ms holds, 1 buffer", "rnr-slow-consumer-retry3",
     ["workload.consume=3ms", "qp.rq_depth=1"], "exhaustion", None),
    ("retry 3, 300 ms holds", "rnr-slow-consumer-retry3",
     ["workload.consume=300ms", "qp.rq_depth=1"], "exhaustion", None),
]
COMMON = ["workload.messages=20"]


def ns(text):
    m = re.fullmatch(r"(\d+)ns", text.strip())
    if not m:
        raise ValueError("expected <integer>ns (a profile prepost calibrate wrote): %r" % text)
    return int(m.group(1))


def profile_key(path, key):
    """A profile's key as written (None when absent)."""
    for line in open(path):
        m = re.match(r"^(\w+):\s*(.*?)\s*$", line)
        if m and m.group(1) == key:
            return m.group(2)
    return None


def profile(path):
    """The keys of a calibrated profile the margins need (calibrate writes ns and bps)."""
    keys = {}
    for line in open(path):
        m = re.match(r"^(\w+):\s*(.*?)\s*$", line)
        if m:
            keys[m.group(1)] = m.group(2)
    table = {}
    inner = keys.get("rnr_delay", "{}").strip("{}")
    for item in filter(None, (x.strip() for x in inner.split(","))):
        code, d = item.split(":")
        table[int(code)] = ns(d)
    rate = float(re.fullmatch(r"([\d.]+)bps", keys["line_rate"]).group(1))
    lat = [float(m.group(1)) for m in re.finditer(r"#\s+4096 B\s+latency\s+([\d.]+) us",
                                                    open(path).read())]
    return {"wqe": ns(keys["wqe"]), "line_rate": rate, "rnr_min": ns(keys.get("rnr_min", "0ns")),
            "rnr_delay": table, "latency": int(lat[0] * 1e3) if lat else 0}


def rnr_delay(p, code):
    d = p["rnr_delay"].get(code, IBTA_RNR_NS[code])
    return max(d, p["rnr_min"])


def rnr_floor(retries, code):
    """The shortest time `retries` RNR waits of `code` can take on rxe (rxe_comp.c): the timer is
    armed for n = max(usecs_to_jiffies(IBTA delay), 1) jiffies and fires at a tick, so the first
    wait may end at the next tick, n - 1 ticks on; each later one starts just after the tick
    whose retry drew it (rxe's loopback answers within the tick) and lasts about n ticks."""
    n = max(-(-IBTA_RNR_NS[code] // TICK_NS), 1)
    return ((n - 1) + (retries - 1) * n) * TICK_NS if retries else 0


def scenario_keys(name, sets):
    """consume, interval, size, rq_depth, rnr_retry, min_rnr_timer of the scenario as run: its
    file's keys (one level of sections), then the --set assignments."""
    keys = {}
    for line in open("models/scenarios/%s.yaml" % name):
        m = re.match(r"^\s+(\w+):\s*([^#\s]+)", line)
        if m:
            keys[m.group(1)] = m.group(2)
    for s in sets:
        k, v = s.split("=", 1)
        keys[k.split(".")[-1]] = v
    return keys


def dur(text):
    m = re.fullmatch(r"([\d.]+)(ns|us|ms|s)?", text)
    return int(float(m.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, None: 1}[m.group(2)])


def size(text):
    m = re.fullmatch(r"(\d+)(B|KiB|MiB)?", text)
    return int(m.group(1)) * {"B": 1, "KiB": 1024, "MiB": 1 << 20, None: 1}[m.group(2)]


def margin(p, keys, kind, boot_wqe=0):
    """How far the case is from flipping, and the outcome the margin's side says. boot_wqe: the
    WQE cost this boot measured (step 1), which paces the sender here, 0 if not measured."""
    # a buffer is back one message latency after the hold (the receiver's completion)
    consume = dur(keys["consume"]) + p["latency"]
    if kind == "presence":
        # the sender posts at the WQE cost: rxe does its work inside ibv_post_send, a burst of
        # posts goes out faster than the stream's bandwidth (a 100 us consumer saw RNR NAKs on
        # rxe when the margin came from the bandwidth: 27.8x the wrong way). The cost is this
        # boot's own: a CPU-starved guest posted 588 WQEs/s where the profile says 22,335, and
        # its sender then never outran a 10 ms consumer
        t_msg = max(dur(keys["interval"]), boot_wqe or p["wqe"])
        fill = int(keys["rq_depth"]) * t_msg
        return ((consume / fill, "rnr") if consume > fill else (fill / consume, "no-rnr")) + (
            "emulation noise",)
    retries, code = int(keys["rnr_retry"]), int(keys["min_rnr_timer"])
    budget = retries * rnr_delay(p, code)
    if budget <= consume:
        return consume / budget, "exc", "emulation noise"
    # completion needs the budget to outlast the hold however short rxe's waits can be, and the
    # profile's delays are medians measured under load: the floor is the kernel's timer
    floor = rnr_floor(retries, code)
    return (floor / consume, "completes",
            "%d RNR waits of code %d can end after %.1f ms on rxe" % (retries, code, floor / 1e6))


def verdict(d, kind):
    if kind == "presence":
        return "rnr" if d.get("rnr_naks") else "no-rnr"
    exc = d.get("status_counts", {}).get("RNR_RETRY_EXC_ERR", 0)
    return "exc" if exc else "completes" if d.get("outcome") == "completed" else "other:%s" % d.get(
        "outcome")


def run(prepost, name, sets, extra, out, tag):
    cmd = [prepost, "run", "models/scenarios/%s.yaml" % name, "--json"] + extra
    for s in COMMON + sets:
        cmd += ["--set", s]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"outcome": "killed after 600 s"}
    open("%s/calib-%s.err" % (out, tag), "w").write(r.stderr)
    open("%s/calib-%s.json" % (out, tag), "w").write(r.stdout)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {"outcome": "no-json(exit %d)" % r.returncode}


def main():
    prepost, out, prof = sys.argv[1], ".", "nics/rxe-tcg.yaml"
    args = sys.argv[2:]
    while args:
        if args[0] == "--out":
            out, args = args[1], args[2:]
        elif args[0] == "--profile":
            prof, args = args[1], args[2:]
        else:
            sys.exit("unknown argument %s" % args[0])
    failed = 0
    # 1. a fresh measurement loads
    mine = "%s/calibrated.yaml" % out
    r = subprocess.run([prepost, "calibrate", "--backend", "verbs", "--reps", "2", "--iters", "20",
                        "--codes", "1,14", "--sizes", "64,4KiB", "-o", mine],
                       capture_output=True, text=True, timeout=900)
    print("".join("    " + l + "\n" for l in r.stderr.splitlines()), end="")
    ok = r.returncode == 0
    if ok:
        lr = subprocess.run([prepost, "run", "models/scenarios/fast-consumer.yaml", "--set",
                             "nic=" + mine], capture_output=True, text=True, timeout=300)
        ok = lr.returncode == 0
        if not ok:
            print("    " + lr.stderr.strip())
    print("%s calibrate: a fresh profile, loaded by prepost run" % ("PASS" if ok else "FAIL"))
    failed += not ok
    # rxe never counts retry_cnt 7 down (rxe_comp.c): calibrate's dead-peer measurement must say
    # so, as the shipped profile does (rc_model: rxe)
    if ok:
        model = profile_key(mine, "rc_model")
        good = model == "rxe" and profile_key("models/" + prof, "rc_model") == "rxe"
        print("%s calibrate: retry_cnt 7 against a dead peer never gives up (rc_model %s)" %
              ("PASS" if good else "FAIL", model))
        failed += not good
    # the WQE cost this boot measured: the presence margins are judged against it
    boot_wqe = profile(mine)["wqe"] if ok else 0
    # 2. predictions of the shipped profile
    p = profile("models/" + prof)
    print("INFO this boot: %s WQEs/s (the shipped profile: %d)" %
          ("%d" % (1e9 / boot_wqe) if boot_wqe else "not measured", 1e9 / p["wqe"]))
    bw = "platform={cluster: {bandwidth: %dbps}}" % p["line_rate"]
    for label, name, sets, kind, known in CASES:
        keys = scenario_keys(name, COMMON + sets)
        m, side, why = margin(p, keys, kind, boot_wqe)
        m_prof, side_prof, _ = margin(p, keys, kind)
        if side != side_prof:
            # this boot's sender is not the profile's: what the profile predicts is not what this
            # boot can do, so its prediction is not judged here
            m, why = 0.0, "this boot's WQE rate puts the case on the %s side, the profile's on the %s side" % (side, side_prof)
        else:
            # the boot's short measurement (20 iterations) is noisy too: the case must hold at
            # either pace (a 100 us consumer: 5.2x at this boot's measured rate, 1.9x at the
            # profile's, and rxe saw RNR NAKs)
            m = min(m, m_prof)
        tag = re.sub(r"\W+", "-", label)
        dsim = run(prepost, name, sets + ["nic=" + prof, bw], [], out, tag + "-sim")
        sim = verdict(dsim, kind)
        spec = verdict(run(prepost, name, sets, [], out, tag + "-spec"), kind)
        # the rxe side RXE_REPS times (an exhaustion case hangs on timing: every run must agree),
        # with the RNR NAKs each counted: rxe's responder NAKs a refused SEND once per attempt
        # (rxe_resp.c: RNR NAK at its first packet, a PSN sequence-error NAK at its second), so
        # more NAKs than refused messages mean retries that came before the receive was back
        runs = []
        for i in range(RXE_REPS if kind == "exhaustion" else 1):
            d = run(prepost, name, sets, ["--backend", "verbs", "--timeout", "300s"], out,
                    "%s-rxe%s" % (tag, i or ""))
            runs.append((verdict(d, kind), d.get("rnr_naks"), d.get("messages"),
                         round(d.get("sim_time_ns", 0) / 1e6, 1)))
        rxe = runs[0][0] if all(r[0] == runs[0][0] for r in runs) else "mixed"
        agree = sim == rxe
        if rxe == "mixed":
            # rxe's own outcome varies from run to run in this boot (its RNR timer fires at a
            # jiffy tick and the guest's load decides how many waits a hold spans): no
            # prediction can be asserted against it; stated, not counted
            m, why = 0.0, "rxe's outcome varies between runs in this boot: its RNR timer " \
                "fires at 4 ms ticks and the guest's load decides how many waits a hold spans"
        if known:
            res = "OPEN"
        elif m >= MARGIN:
            res = "PASS" if agree else "FAIL"
            failed += not agree
        else:
            res = "INFO"
        print("%s %s: rxe %s, simulated with %s %s (default profile %s); margin %.1fx%s" %
              (res, label, rxe, prof, sim, spec, m,
               " < %.0fx (%s): not asserted" % (MARGIN, why) if m < MARGIN and not known
               else ""))
        if kind == "exhaustion":
            print("    rxe runs (outcome, RNR NAKs, messages, ms): %s; simulated: %s RNR NAKs, "
                  "%.1f ms" % (runs, dsim.get("rnr_naks"), dsim.get("sim_time_ns", 0) / 1e6))
        if known:
            print("    open, not asserted: " + known)
        sys.stdout.flush()
    # 3. diagnostics, never asserted: the 1-buffer case with the ranks sleeping on the completion
    # channel instead of spinning (does a spinning rank stretch rxe's RNR timer?)
    diag = []
    for i in range(2):
        d = run(prepost, "rnr-slow-consumer-retry3", ["workload.consume=3ms", "qp.rq_depth=1"],
                ["--backend", "verbs", "--timeout", "300s", "--progress", "event"], out,
                "diag-event%d" % i)
        diag.append((verdict(d, "exhaustion"), d.get("rnr_naks"), d.get("messages"),
                     round(d.get("sim_time_ns", 0) / 1e6, 1)))
    print("INFO retry 3, 3 ms holds, 1 buffer, --progress event on rxe (outcome, RNR NAKs, "
          "messages, ms): %s" % diag)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
