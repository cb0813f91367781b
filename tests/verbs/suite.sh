#!/usr/bin/env bash
# tests/verbs/suite.sh [BUILD_DIR] [--bench] [--only STEP]...: the verbs test suite. Runs INSIDE the Soft-RoCE
# guest, as root, from the repository root:
#
#   tools/guest/run tests/verbs/suite.sh build/default
#
# (tools/test does exactly this, once per run.) Asserts outcomes, never timing:
#   doctor              READY on rxe0, with the GID prepost picks
#   test_verbs_rxe      RC rules on rxe through the backend (RNR_RETRY_EXC_ERR with rnr_retry 0,
#                       RNR NAKs then success with 7, REM_ACCESS_ERR for a bad rkey, ...), and
#                       the bootstrap failures (absent peer, wrong address, busy port, no device)
#   scenarios.py        the scenarios of tests/verbs/scenarios.list on rxe, each with its
#                       expectation and its parity with the simulator
#   traces              scenarios recorded on rxe (--trace: naive with RNR, eager, rndv, ring)
#                       replay exactly (`prepost replay`, zero divergence) and export to Perfetto
#   progress            ring-cts bandwidth (tests/verbs/bw/) completes in both progress modes,
#                       eager in event mode: a run that moves is not stopped as no_progress
#   port down           rxe0's netdev down: a run ends with exit 4 naming the port; doctor says
#                       NOT READY; back up afterwards
#   --only STEP         run only these steps (doctor, test_verbs_rxe, scenarios, traces, progress,
#                       port-down)
#   --bench             then tests/verbs/bench.sh (prepost bench vs perftest and UCX; no verdict)
# Ends with "verbs suite: N passed, N failed"; exit 1 if anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=build/default
bench=0
only=()
while (($#)); do
  case $1 in
    --bench) bench=1 ;;
    --only) only+=("$2"); shift ;;
    *) B=$1 ;;
  esac
  shift
done
step() { # step NAME: is this step selected?
  ((${#only[@]} == 0)) && return 0
  local x
  for x in "${only[@]}"; do [[ $x == "$1" ]] && return 0; done
  return 1
}
P=$B/tools/prepost
OUT=${GUEST_OUT:-$(mktemp -d)}
pass=0 fail=0
ok() {
  if [[ $1 == 0 ]]; then
    pass=$((pass + 1))
    echo "PASS $2 (${SECONDS} s)"
  else
    fail=$((fail + 1))
    echo "FAIL $2 (${SECONDS} s)"
  fi
  SECONDS=0
}
[[ -x $P ]] || { echo "FAIL: $P is not built"; echo "verbs suite: 0 passed, 1 failed"; exit 1; }
DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)
PORT_STATE=/sys/class/infiniband/$DEV/ports/1/state

if step doctor; then
echo "== doctor"
"$P" doctor >"$OUT/doctor.txt" 2>&1
rc=$?
sed 's/^/    /' "$OUT/doctor.txt"
grep -q '^verdict     READY' "$OUT/doctor.txt"
ok $((rc | $?)) "doctor: READY"
fi

if step test_verbs_rxe; then
echo "== test_verbs_rxe"
timeout 600 "$B/tests/test_verbs_rxe" --jobs 1 >"$OUT/test_verbs_rxe.txt" 2>&1
rc=$?
grep -E 'Synthesis|FAIL|Assertion|failed|CRASH|Timed out' "$OUT/test_verbs_rxe.txt" | head -30 |
  sed 's/^/    /'
ok $rc "test_verbs_rxe"
fi

if step scenarios; then
echo "== scenarios on rxe, parity with the simulator"
timeout 1200 /usr/bin/python3 tests/verbs/scenarios.py "$P" --out "$OUT" | tee "$OUT/scenarios.txt" |
  sed 's/^/    /'
ok "${PIPESTATUS[0]}" "scenarios.py"
fi

if step traces; then
echo "== traces recorded on rxe replay exactly"
# naive with RNR NAKs, eager and rendezvous (p2p with credits), the ring FIFO with its polled
# credit words (remote-written memory captured by the recorder's snapshots)
for sc in parity-rnr rnr-slow-consumer-eager rnr-slow-consumer-rndv rnr-slow-consumer-ring; do
  t=$OUT/$sc.rxe.trace
  rm -f "$t" "$t".rank*
  timeout 240 "$P" run "models/scenarios/$sc.yaml" --backend verbs --timeout 180 --trace "$t" \
    >"$OUT/$sc.trace-run.out" 2>"$OUT/$sc.trace-run.err"
  rc=$?
  [[ $rc == 0 && -s $t ]] && ! ls "$t".rank* >/dev/null 2>&1
  ok $((rc | $?)) "$sc: recorded on rxe (exit $rc, $(stat -c %s "$t" 2>/dev/null || echo no) bytes, rank files merged)"
  "$P" trace stats "$t" >"$OUT/$sc.trace-stats.txt" 2>&1
  grep -E '^(wc|post_send|post_recv|timer|mem) ' "$OUT/$sc.trace-stats.txt" | sed 's/^/    /'
  timeout 120 "$P" replay "$t" >"$OUT/$sc.replay.txt" 2>&1
  rc=$?
  sed 's/^/    /' "$OUT/$sc.replay.txt" | tail -8
  [[ $rc == 0 ]] && grep -q '^replay matched' "$OUT/$sc.replay.txt"
  ok $((rc | $?)) "$sc: exact replay, no divergence (exit $rc)"
  timeout 120 "$P" trace export --perfetto "$t" -o "$OUT/$sc.perfetto.json" 2>&1 | sed 's/^/    /'
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["traceEvents"]; assert any(x.get("ph")=="C" for x in e), "no counters"; assert any(x.get("cat")=="protocol" and x["ph"]=="s" for x in e), "no protocol flows"' \
    "$OUT/$sc.perfetto.json"
  ok $? "$sc: Perfetto export with protocol flows and counters"
done
fi

if step progress; then
echo "== bandwidth runs that move are not stopped as no_progress"
# rxe completes work inside ibv_post_send: under a bandwidth run the CQ is never empty, and a
# progress loop that drains it to the end never reports progress (ring-cts ended no_progress
# while moving). ring-cts in both progress modes, eager (RGET at 64 KiB) in event mode only: busy
# RGET runs stall when the guest's vCPUs are scarce (backends/verbs/README.md). The default
# no-progress bound (1 s).
for run in ring-cts:busy ring-cts:event eager:event; do
  sc=${run%:*} mode=${run#*:}
  timeout 300 "$P" run "tests/verbs/bw/$sc.yaml" --backend verbs --progress "$mode" --json \
    >"$OUT/bw-$sc-$mode.json" 2>"$OUT/bw-$sc-$mode.err"
  rc=$?
  got=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["outcome"], d["messages"], "%.1f MB/s" % (d["bytes"] / d["sim_time_ns"] * 1e9 / 2**20))' \
    "$OUT/bw-$sc-$mode.json" 2>/dev/null)
  sed 's/^/    /' "$OUT/bw-$sc-$mode.err" | tail -5
  [[ $rc == 0 && $got == "completed 2000 "* ]]
  ok $? "$sc bandwidth, --progress $mode: exit $rc, ${got:-no report}"
done
fi

if step port-down; then
echo "== port down"
if [[ -n $DEV && -e $PORT_STATE ]]; then
  NETDEV=$(rdma link show "$DEV/1" 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
  ip link set "${NETDEV:-dummy0}" down
  for _ in $(seq 50); do grep -q DOWN "$PORT_STATE" && break; sleep 0.1; done
  t0=$EPOCHREALTIME
  timeout 60 "$P" run models/scenarios/fast-consumer.yaml --backend verbs >"$OUT/down.out" 2>"$OUT/down.err"
  rc=$?
  dt=$(printf %.1f "$(echo "$EPOCHREALTIME - $t0" | bc)")
  sed 's/^/    /' "$OUT/down.err"
  [[ $rc == 4 ]] && grep -q "$DEV port 1 is DOWN" "$OUT/down.err"
  ok $? "port down: exit $rc in $dt s, naming the port"
  "$P" doctor >"$OUT/doctor-down.txt" 2>&1
  rc=$?
  grep '^verdict' "$OUT/doctor-down.txt" | sed 's/^/    /'
  [[ $rc == 1 ]] && grep -q "NOT READY: $DEV port 1 is DOWN" "$OUT/doctor-down.txt"
  ok $? "port down: doctor says NOT READY"
  ip link set "${NETDEV:-dummy0}" up
  for _ in $(seq 100); do grep -q ACTIVE "$PORT_STATE" && break; sleep 0.1; done
  grep -q ACTIVE "$PORT_STATE"
  ok $? "port back up: ACTIVE"
else
  ok 1 "port down: no device to take down"
fi
fi

if ((bench)); then
  echo "== bench (not a test: figures and ratios)"
  tests/verbs/bench.sh "$B"
fi

echo "verbs suite: $pass passed, $fail failed"
((fail == 0))
