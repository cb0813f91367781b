#!/usr/bin/env python3
"""tests/verbs/latprof.py: the two halves of tests/verbs/latprof.sh.

  latprof.py classify ENGINE_SYMS VERBS_SYMS < `perf script -F comm,period,ip,sym,dso` (-g)
      every sample into one category by its call chain
      (only the data phase: between the 1st and 99th percentile of the polling samples' times);
      prints {"phase_len_s", "samples", "counts": {category: samples}, "top": [...]}
  latprof.py report OUT ROUNDS ROWS PROF_ITERS CLOCKS [base]
      the latency medians over rounds, the ratios (per clocksource of CLOCKS, comma-separated,
      may be empty, and per build), and each row's profile; writes OUT/latprof.json
"""
import json
import os
import re
import statistics
import sys

# The categories, in the order they are tested (the first that matches a sample wins) and
# printed. A sample's chain is its frames, leaf first: (symbol, dso); a kernel sample's chain goes
# on into the user stack that made the system call.
CATEGORIES = [
    ("idle", "a vCPU idle (no runnable task)"),
    ("perf", "the profiler itself (perf record)"),
    ("clock", "reading the clock: clock_gettime, its system call, the HPET read under it"),
    ("rxe", "rxe's kernel work: a chain through rxe_* or ib_uverbs* (posting, requester, "
            "responder, completer, their copies and ICRC), ksoftirqd"),
    ("sched", "context switches (finish_task_switch, __schedule): a rank preempted or woken"),
    ("kernel", "the kernel, anything else (interrupts, timer ticks, other system calls)"),
    ("verbs_lib", "libibverbs and the rxe provider in user space (polling a CQ, posting a WR; "
                  "their spin locks in libc)"),
    ("engine", "the engine (libprepost.a: protocols, workloads, matching, timers)"),
    ("loop", "the verbs backend's loop and its CQ poll wrapper (drain, progress, vnic_poll_cq)"),
    ("backend", "the verbs backend otherwise (libprepost-verbs.a: WR translation, bootstrap)"),
    ("bench", "the rest of the prepost binary (the raw rows' own loop, the coordinator)"),
    ("libc", "libc otherwise (memcpy of payloads, malloc, ...)"),
    ("other", "anything else"),
]
IDLE = re.compile(r"^(native_safe_halt|default_idle|default_idle_call|cpu_idle_poll|"
                  r"do_idle|acpi_idle|intel_idle|cpuidle_enter|mwait_idle)")
CLOCK = re.compile(r"clock_gettime|posix_get_monotonic|__cvdso")
RXE = re.compile(r"^(rxe_|ib_uverbs|uverbs_)")
SCHED = re.compile(r"^(finish_task_switch|__schedule|schedule$|context_switch|__switch_to)")
LOOP = re.compile(r"^(drain|progress|vnic_poll_cq|rank_main|run_rank)")
POLL = re.compile(r"^(vnic_poll_cq|drain|rank_main|reap|wait_recvs|raw_lat)")


def classify_sample(comm, chain, engine, verbs):
    if not chain:
        return "other"
    leaf_sym, leaf_dso = chain[0]
    if comm.startswith("swapper") or IDLE.match(leaf_sym):
        return "idle"
    if comm.startswith("perf"):
        return "perf"
    if any(CLOCK.search(s) for s, _ in chain):
        return "clock"
    if any(RXE.match(s) for s, _ in chain) or comm.startswith("ksoftirqd"):
        return "rxe"
    if leaf_dso.startswith("["):
        if leaf_dso == "[vdso]":
            return "clock"
        return "sched" if SCHED.match(leaf_sym) else "kernel"
    base = os.path.basename(leaf_dso)
    if base.startswith(("librxe", "libibverbs")) or leaf_sym.startswith("pthread_spin"):
        return "verbs_lib"
    if base.startswith("prepost"):
        sym = leaf_sym.split(".")[0]
        if LOOP.match(sym):
            return "loop"
        if sym in engine or leaf_sym in engine:
            return "engine"
        if sym in verbs or leaf_sym in verbs:
            return "backend"
        return "bench"
    if base.startswith("libc"):
        return "libc"
    return "other"


WORK = re.compile(r"^(rxe_requester|rxe_responder|rxe_completer|ib_uverbs_post_send)")


def polls(comm, chain):
    # a sample of the data phase: a rank (or the raw rows' client/server) polling a CQ, in the
    # rxe provider, or posting through rxe's requester, responder or completer
    if comm != "prepost" or not chain:
        return False
    sym, dso = chain[0]
    return (bool(POLL.match(sym)) or os.path.basename(dso).startswith("librxe") or
            any(WORK.match(s) for s, _ in chain))


def read_syms(path):
    with open(path) as f:
        return {l.strip() for l in f if l.strip()}


HEAD = re.compile(r"^(.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\d+)")
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def samples(stream):
    # (comm, cpu, time s, period ns, chain) per sample of `perf script -F
    # comm,tid,cpu,time,period,ip,sym,dso` with call chains
    cur = None
    for line in stream:
        if not line.strip():
            continue
        if line[0] in " \t":
            m = FRAME.match(line)
            if m and cur:
                cur[4].append((m.group(1).split("+0x")[0], m.group(2)))
            continue
        if cur:
            yield cur
        m = HEAD.match(line)
        cur = [m.group(1), int(m.group(3)), float(m.group(4)), int(m.group(5)), []] if m else None
    if cur:
        yield cur


def classify(engine_path, verbs_path):
    engine, verbs = read_syms(engine_path), read_syms(verbs_path)
    all_s = list(samples(sys.stdin))
    pt = sorted(s[2] for s in all_s if polls(s[0], s[4]))
    if len(pt) < 100:
        print(f"latprof.py: {len(pt)} polling samples: no data phase found (a run too short for the sampling rate: raise LATPROF_PROF_ITERS or LATPROF_FREQ)", file=sys.stderr)
        return 1
    lo, hi = pt[len(pt) // 100], pt[-1 - len(pt) // 100]
    n = {c: 0 for c, _ in CATEGORIES}
    top = {}
    for comm, cpu, t, period, chain in all_s:
        if lo <= t <= hi:
            c = classify_sample(comm, chain, engine, verbs)
            n[c] += 1
            if chain:
                k = f"{c}: {chain[0][0]} ({os.path.basename(chain[0][1])})"
                top[k] = top.get(k, 0) + 1
    json.dump({"phase_s": [lo, hi], "phase_len_s": hi - lo, "samples": sum(n.values()),
               "counts": n, "top": sorted(top.items(), key=lambda x: -x[1])[:40]}, sys.stdout)
    print()
    return 0


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def perftest_typical(out, name):
    # perftest's result line: #bytes #iterations t_min t_max t_typical ...
    try:
        with open(os.path.join(out, name + ".cli")) as f:
            for l in f:
                p = l.split()
                if len(p) > 5 and p[0] == "64":
                    return float(p[4]), float(p[2])
    except (OSError, ValueError):
        pass
    return None


def bench_rows(d):
    # {row: (t_typical, t_min)} of one prepost bench --json latency run
    rows = {}
    for r in (d or {}).get("results", []):
        if r.get("test") == "lat" and r.get("value") is not None:
            rows[r["row"]] = (r["value"], r.get("t_min"))
    return rows


def med(v):
    v = [x for x in v if x is not None]
    return round(statistics.median(v), 2) if v else None


def report(out, rounds, rows, prof_iters, clocks, has_base):
    rows = rows.split(",")
    clocks = [c for c in clocks.split(",") if c] or [""]
    builds = ["new"] + (["base"] if has_base else [])
    runs = [(c, b) for c in clocks for b in builds]  # one bench run per round each

    def tag(k, c):
        return f"r{k}" + (f"-{c}" if c else "")

    lat = {(c, b): {r: {"t_typical": [], "t_min": []} for r in rows} for c, b in runs}
    ref = {(c, t): {"t_typical": [], "t_min": []} for c in clocks for t in ("send", "write", "read")}
    for k in range(1, rounds + 1):
        for c in clocks:
            for t in ("send", "write", "read"):
                v = perftest_typical(out, f"{tag(k, c)}-ib_{t}_lat")
                ref[(c, t)]["t_typical"].append(v and v[0])
                ref[(c, t)]["t_min"].append(v and v[1])
            for b in builds:
                got = bench_rows(load(os.path.join(out, f"{tag(k, c)}-{b}.json")))
                for r in rows:
                    v = got.get(r, (None, None))
                    lat[(c, b)][r]["t_typical"].append(v[0])
                    lat[(c, b)][r]["t_min"].append(v[1])

    def name(c, b):
        return ":".join(x for x in (c, b) if x)

    res = {"rounds": rounds, "clocksources": clocks, "builds": builds, "latency_us": {},
           "perftest_us": {}, "medians": {}, "ratios": {}, "profile_iters": prof_iters,
           "profile": {}}
    for (c, t), v in ref.items():
        res["perftest_us"][name(c, f"ib_{t}_lat")] = v
        res["medians"][name(c, f"ib_{t}_lat")] = {q: med(v[q]) for q in v}
    for (c, b), v in lat.items():
        res["latency_us"][name(c, b)] = v
        for r in rows:
            res["medians"][f"{name(c, b)}:{r}"] = {q: med(v[r][q]) for q in v[r]}

    def div(a, d):
        return a / d if a is not None and d else None

    def add(a, d):
        return a + d if a is not None and d is not None else None

    ra = res["ratios"]
    for c, b in runs:
        row = lambda r, k: lat[(c, b)].get(r, {"t_typical": [None] * rounds})["t_typical"][k]
        pt = lambda t, k: ref[(c, t)]["t_typical"][k]
        pairs = {
            "eager_vs_ib_send_lat": lambda k: div(row("eager", k), pt("send", k)),
            "eager_vs_raw_send": lambda k: div(row("eager", k), row("raw_send", k)),
            "raw_send_vs_ib_send_lat": lambda k: div(row("raw_send", k), pt("send", k)),
            "rget_vs_ib_read_lat_plus_eager": lambda k: div(row("rget", k),
                                                            add(pt("read", k), row("eager", k))),
            "rget_vs_raw_read_plus_eager": lambda k: div(row("rget", k),
                                                         add(row("raw_read", k), row("eager", k))),
            "raw_read_vs_ib_read_lat": lambda k: div(row("raw_read", k), pt("read", k)),
            "ring_cts_vs_ib_write_lat": lambda k: div(row("ring-cts", k), pt("write", k)),
            "ring_credits_vs_ib_write_lat": lambda k: div(row("ring-credits", k), pt("write", k)),
            "ring_cts_vs_raw_write": lambda k: div(row("ring-cts", k), row("raw_write", k)),
            "ring_credits_vs_raw_write": lambda k: div(row("ring-credits", k), row("raw_write", k)),
            "raw_write_vs_ib_write_lat": lambda k: div(row("raw_write", k), pt("write", k)),
        }
        for key, fn in pairs.items():
            ra[f"{name(c, b)}:{key}"] = med([fn(k) for k in range(rounds)])
        if b == "base":
            for r in rows:
                ra[f"{c + ':' if c else ''}new_vs_base:{r}"] = med(
                    [div(lat[(c, "new")][r]["t_typical"][k], lat[(c, "base")][r]["t_typical"][k])
                     for k in range(rounds)])
    if len(clocks) == 2:
        a, z = clocks
        for b in builds:
            for r in rows:
                ra[f"{b}:{z}_vs_{a}:{r}"] = med(
                    [div(lat[(z, b)][r]["t_typical"][k], lat[(a, b)][r]["t_typical"][k])
                     for k in range(rounds)])
        for t in ("send", "write", "read"):
            ra[f"{z}_vs_{a}:ib_{t}_lat"] = med(
                [div(ref[(z, t)]["t_typical"][k], ref[(a, t)]["t_typical"][k]) for k in range(rounds)])

    cats = [c for c, _ in CATEGORIES]
    prof = res["profile"]
    for r in rows:
        cat = load(os.path.join(out, f"cat-{r}.json"))
        b = bench_rows(load(os.path.join(out, f"prof-{r}.json"))).get(r)
        if not cat or not cat["samples"]:
            continue
        # CPU per round trip: the two vCPUs' time over the phase, shared as the samples are
        per_rt = 2 * cat["phase_len_s"] * 1e6 / (prof_iters * 0.98)
        prof[r] = {"phase_s": round(cat["phase_len_s"], 3), "samples": cat["samples"],
                   "t_typical": b[0] if b else None, "cpu_us_per_round_trip": round(per_rt, 1),
                   "share": {x: round(cat["counts"][x] / cat["samples"], 4) for x in cats},
                   "us": {x: round(per_rt * cat["counts"][x] / cat["samples"], 2) for x in cats},
                   "top": cat["top"][:15]}

    with open(os.path.join(out, "latprof.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"latency, 64 B, median over {rounds} rounds, us: t_typical (t_min)")
    for k, v in res["medians"].items():
        print(f"  {k:28} {v['t_typical']} ({v['t_min']})")
    print("ratios, the median over rounds of each round's ratio:")
    for k, v in ra.items():
        print(f"  {k:48} {v}")
    if prof:
        prow = [r for r in rows if r in prof]
        print(f"profile, {prof_iters} round trips a row (raw_read: READs): CPU us per round trip "
              f"of both vCPUs by category (share of the data phase's samples)")
        print("  " + f"{'':12}" + "".join(f"{r:>15}" for r in prow))
        for x in cats:
            print("  " + f"{x:12}" + "".join(
                f"{prof[r]['us'][x]:>7} ({100 * prof[r]['share'][x]:4.1f}%)" for r in prow))
        print("  " + f"{'total':12}" + "".join(f"{prof[r]['cpu_us_per_round_trip']:>15}" for r in prow))
        print("  " + f"{'t_typical':12}" + "".join(f"{str(prof[r]['t_typical']):>15}" for r in prow))
        print("  " + f"{'samples':12}" + "".join(f"{prof[r]['samples']:>15}" for r in prow))
        print("categories:")
        for c, d in CATEGORIES:
            print(f"  {c:12} {d}")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "classify":
        return classify(sys.argv[2], sys.argv[3])
    if len(sys.argv) in (7, 8) and sys.argv[1] == "report":
        return report(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6],
                      len(sys.argv) == 8)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
