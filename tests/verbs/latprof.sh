#!/usr/bin/env bash
# tests/verbs/latprof.sh [BUILD_DIR] [BASE_BUILD_DIR]: where the latency goes, in one boot of the
# Soft-RoCE guest:
#
#   GUEST_APPEND=tsc=reliable tools/guest/run tests/verbs/latprof.sh build/default [BASE/build/default]
#
# 1. LATPROF_ROUNDS rounds (default 5) of 64 B ping-pong latency, LATPROF_ITERS (1000) round
#    trips each: perftest's ib_send_lat, ib_write_lat and ib_read_lat, then `prepost bench --test
#    lat` of BUILD_DIR (and of BASE_BUILD_DIR if given; the two take turns going first), every row
#    of LATPROF_ROWS. With LATPROF_CLOCKS (e.g. "hpet tsc": the kernel's clocksources, switched
#    through sysfs between runs, in turn; tsc needs the guest booted with tsc=reliable) each round
#    runs once per clocksource. Medians over rounds of t_typical and t_min, and the medians over
#    rounds of each round's ratios (like against like, measured minutes apart at most).
# 2. A CPU profile of each row of BUILD_DIR (the first clocksource): `perf record -a -g -e
#    cpu-clock -F LATPROF_FREQ` (default 2000 Hz; both vCPUs, every process; its data in the guest's
#    own tmpfs, not on 9p) around a bench of LATPROF_PROF_ITERS (default 5000) round trips
#    (raw_read: READs). Only the data phase counts: the samples between the 1st and 99th
#    percentile of the times of the samples that poll a CQ. Each sample goes in one category by
#    its call chain (tests/verbs/latprof.py: the clock, rxe's kernel work, context switches, the
#    engine, the verbs backend and its loop, the verbs library, the profiler itself, ...), as a
#    share of the phase's samples and as CPU microseconds per round trip (the share of the two
#    vCPUs' time over the phase's round trips).
#
# Writes $GUEST_OUT/latprof.json, each profile's `perf script` (script-ROW.txt.gz) and prints the
# tables. A benchmark, not a test: it fails only when a tool could not run. PERF: the perf binary
# (default perf, the host's through the guest's 9p root: Debian's linux-perf).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${1:-build/default}
BASE=${2:-}
OUT=${GUEST_OUT:-$(mktemp -d)}
ROUNDS=${LATPROF_ROUNDS:-5}
ITERS=${LATPROF_ITERS:-1000}
PROF_ITERS=${LATPROF_PROF_ITERS:-5000}
ROWS=${LATPROF_ROWS:-raw_send,eager,raw_read,rget,raw_write,ring-cts,ring-credits}
CLOCKS=${LATPROF_CLOCKS:-}
FREQ=${LATPROF_FREQ:-2000}
PERF=${PERF:-perf}
CS=/sys/devices/system/clocksource/clocksource0
DEV=$(ls /sys/class/infiniband 2>/dev/null | head -1)
[[ -n $DEV ]] || { echo "latprof.sh: no RDMA device"; exit 1; }
for b in "$B" $BASE; do
  [[ -x $b/tools/prepost ]] || { echo "latprof.sh: no $b/tools/prepost"; exit 1; }
done
command -v "$PERF" >/dev/null || { echo "latprof.sh: no perf ($PERF)"; exit 1; }
for c in $CLOCKS; do
  grep -qw "$c" $CS/available_clocksource ||
    { echo "latprof.sh: clocksource $c not available (have: $(cat $CS/available_clocksource))"; exit 1; }
done
clock() { # clock NAME: switch the kernel's clocksource (nothing when LATPROF_CLOCKS is empty)
  [[ -z $1 ]] && return 0
  echo "$1" >$CS/current_clocksource && [[ $(cat $CS/current_clocksource) == "$1" ]] ||
    { echo "latprof.sh: cannot switch the clocksource to $1"; exit 1; }
}

# perftest: server in the background, client against 127.0.0.1 (GID 1: RoCE v2 IPv4-mapped)
# shellcheck source=tests/verbs/pair.sh
source tests/verbs/pair.sh
fail=0
bench() { # bench BUILD TAG ITERS [ROWS]: one prepost bench latency run, its JSON in $OUT/TAG.json
  "$1/tools/prepost" bench --rows "${4:-$ROWS}" --test lat --lat-size 64 --iters "$3" --json \
    >"$OUT/$2.json" 2>"$OUT/$2.err" || { echo "latprof.sh: prepost bench $2 failed (exit $?)"; fail=1; }
}
load() { cut -d' ' -f1-3 /proc/loadavg; }

port=18700
cl=(${CLOCKS:-""})
echo "latprof.sh: $ROUNDS rounds, $ITERS round trips, rows $ROWS, clocksources ${CLOCKS:-$(cat $CS/current_clocksource) (unchanged)}; load $(load)"
for ((k = 1; k <= ROUNDS; k++)); do
  for ((j = 0; j < ${#cl[@]}; j++)); do
    c=${cl[$(((j + k) % ${#cl[@]}))]} # the clocksources take turns going first
    clock "$c"
    tag="r$k${c:+-$c}"
    for t in send write read; do
      port=$((port + 1))
      pair "$tag-ib_${t}_lat" $port "ib_${t}_lat" -d "$DEV" -x 1 -s 64 -n "$ITERS" -p $port -- \
        "ib_${t}_lat" -d "$DEV" -x 1 -s 64 -n "$ITERS" -p $port 127.0.0.1 ||
        { echo "latprof.sh: ib_${t}_lat $tag failed"; fail=1; }
    done
    if [[ -n $BASE ]] && ((k % 2 == 0)); then
      bench "$BASE" "$tag-base" "$ITERS"
      bench "$B" "$tag-new" "$ITERS"
    else
      bench "$B" "$tag-new" "$ITERS"
      [[ -n $BASE ]] && bench "$BASE" "$tag-base" "$ITERS"
    fi
  done
  echo "latprof.sh: round $k done; load $(load)"
done

# the profile: each row alone, under the first clocksource
clock "${cl[0]}"
nm "$B/engine/libprepost.a" 2>/dev/null | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$OUT/syms-engine"
nm "$B/backends/verbs/libprepost-verbs.a" 2>/dev/null | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$OUT/syms-verbs"
[[ -s $OUT/syms-engine && -s $OUT/syms-verbs ]] || { echo "latprof.sh: no symbols from $B's libraries"; exit 1; }
PD=$(mktemp -d /tmp/latprof.XXXXXX) # the guest's tmpfs: perf writing over 9p took a vCPU
for row in ${ROWS//,/ }; do
  if ! "$PERF" record -q -F "$FREQ" -a -g -e cpu-clock -o "$PD/perf.data" -- \
    "$B/tools/prepost" bench --rows "$row" --test lat --lat-size 64 --iters "$PROF_ITERS" --json \
    >"$OUT/prof-$row.json" 2>"$OUT/prof-$row.err"; then
    echo "latprof.sh: perf of $row failed"; fail=1; continue
  fi
  "$PERF" script -i "$PD/perf.data" -F comm,tid,cpu,time,period,ip,sym,dso 2>/dev/null |
    gzip >"$OUT/script-$row.txt.gz"
  rm -f "$PD/perf.data"
  zcat "$OUT/script-$row.txt.gz" |
    /usr/bin/python3 tests/verbs/latprof.py classify "$OUT/syms-engine" "$OUT/syms-verbs" \
      >"$OUT/cat-$row.json" || { echo "latprof.sh: classifying $row failed"; fail=1; }
  echo "latprof.sh: profiled $row; load $(load)"
done
rm -rf "$PD"
/usr/bin/python3 tests/verbs/latprof.py report "$OUT" "$ROUNDS" "$ROWS" "$PROF_ITERS" \
  "${CLOCKS// /,}" ${BASE:+base} || fail=1
exit $fail
